"""Reading users' files safely, and writing capnb's files whole.

Reading: :func:`user_path` checks a path where it enters (no NUL byte, no symbolic-link loop) and
:func:`read_text` reads a small text file (a config) within a size budget, as UTF-8, with an error
that says what the file is instead (UTF-16, Latin-1, binary).

Writing: :func:`write_atomic` writes one file whole or not at all; :func:`write_set` writes a set
of files (a plan's ``plan.nc`` and ``plan.json``) so that readers see the old set or the new one:

1. every file is written into a fresh hidden folder beside the targets, named by host and process;
   space and the file-size limit (``ulimit -f``) are checked before, and a failed write (a full
   disk) is an :class:`~capnb.errors.OutputError` naming the path, the folder removed;
2. under an exclusive lock on the output folder (``flock``: a second writer waits its turn, and
   then wins whole), the folder is renamed to ``.capnb-commit``: the set is committed;
3. each file is renamed over its target, then the folder is removed. A process killed during 3
   leaves ``.capnb-commit`` behind, and the next capnb that writes to the folder (or
   :func:`settle`) moves the rest into place before anything else: the committed set, whole.

A hidden ``.capnb-outputs.json`` in the folder records the SHA-256 of each file capnb wrote there;
an existing target that is not one of them (a ``plan.json`` the user wrote, or edited) is not
replaced without ``force``. Temporary folders and files of processes that died on this host (or
of any host, after a week) are removed by the next writer.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ..errors import ConfigError, OutputError

__all__ = [
    "check_set",
    "file_version",
    "json_error_at",
    "json_line_of",
    "json_lines_objects",
    "read_csv_frame",
    "read_text",
    "settle",
    "user_path",
    "write_atomic",
    "write_section",
    "write_set",
]

#: Largest text file (a plan config, a model's config.json) read whole into memory.
MAX_TEXT_BYTES = 16 * 2**20
_MANIFEST = ".capnb-outputs.json"
_COMMIT = ".capnb-commit"
_TMP_PREFIX = ".capnb-tmp-"
#: Temporaries of another host (or whose process cannot be checked) count as stale after this.
_STALE_S = 7 * 86_400


# -- reading ----------------------------------------------------------------------------------------
def user_path(value: str | os.PathLike, what: str = "path") -> Path:
    """A path a user gave, checked where it enters: a NUL byte or a symbolic-link loop is an error.

    Existence is left to the caller (each says what it expected to find there).
    """
    text = os.fspath(value)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\x00" in text:
        raise ConfigError(f"{what} {text!r}: a path cannot hold a NUL byte")
    path = Path(text)
    try:
        path.stat()
    except FileNotFoundError:
        return path
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ConfigError(
                f"{path}: a loop of symbolic links ({what}); point the link at a file"
            ) from None
        if err.errno == errno.ENAMETOOLONG:
            raise ConfigError(f"{what}: the path is too long for the file system") from None
        if err.errno == errno.ENOTDIR:
            return path  # a file where a folder was expected: "no such file"
        raise ConfigError(f"{path}: cannot be read ({err.strerror}; {what})") from None
    return path


def json_error_at(error: json.JSONDecodeError) -> str:
    """Where a JSON text broke, in words: ``"Expecting value at line 3, column 5"``."""
    return f"{error.msg} at line {error.lineno}, column {error.colno}"


def read_csv_frame(path: Path, **options):
    """A CSV file as a pandas DataFrame, each value under its own column's name.

    pandas reads a first row with one value more than the header (a trailing comma) by taking
    the first column as the index: each name then heads its right neighbour's values. Read with
    ``index_col=False``, an empty value past the header's columns is dropped; a filled one is a
    ConfigError naming the line (pandas would drop it with a warning). Other errors are pandas'
    (a ValueError, or an OSError) for the caller to name the file in.
    """
    import csv
    import warnings

    import pandas as pd

    past = {"message": "Length of header", "category": pd.errors.ParserWarning}
    with warnings.catch_warnings():
        warnings.filterwarnings("error", **past)
        try:
            return pd.read_csv(path, index_col=False, **options)
        except pd.errors.ParserWarning:  # values past the header's columns (pandas 3 warns of
            pass  # empty text ones too)
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as file:
        rows = csv.reader(file)
        header = next(rows)
        for row in rows:
            filled = [i for i, value in enumerate(row) if i >= len(header) and value.strip()]
            if filled:
                raise ConfigError(
                    f"{path}, line {rows.line_num}: {len(row)} values where the header names "
                    f"{len(header)} columns (value {filled[0] + 1}, {row[filled[0]]!r}, has no "
                    "column; is a comma unquoted?)"
                )
    with warnings.catch_warnings():  # only empty values past the header's columns: dropped
        warnings.filterwarnings("ignore", **past)
        return pd.read_csv(path, index_col=False, **options)


def read_text(path: str | os.PathLike, what: str = "file", *, limit: int = MAX_TEXT_BYTES) -> str:
    """A small text file, read whole as UTF-8 (a byte-order mark is allowed).

    Raises
    ------
    ConfigError
        The path is a folder, larger than ``limit`` bytes, or not UTF-8 text: the message says
        what it is instead (UTF-16, a Latin-1 byte and its line, binary) and how to fix it.
    """
    path = user_path(path, what)
    if path.is_dir():
        raise ConfigError(f"{path}: a folder, not a {what}")
    try:
        size = path.stat().st_size
        if size > limit:
            raise ConfigError(
                f"{path}: {size:,} bytes; capnb reads a {what} of at most {limit:,} bytes"
            )
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror})") from None
    return decode_text(data, path)


def decode_text(data: bytes, where: str | os.PathLike, *, byte: int = 0, line: int = 1) -> str:
    """``data`` as UTF-8 text, or a ConfigError saying which encoding it looks like instead.

    ``byte``, ``line``: where ``data`` starts in its file (a block read after others), so the
    error names the file's own byte and line.
    """
    if byte == 0 and data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{where}: UTF-16 text (it starts with a UTF-16 byte-order mark); save "
                          "it as UTF-8")  # fmt: skip
    nul = data.find(b"\x00")
    if nul >= 0:
        line += data.count(b"\n", 0, nul)
        raise ConfigError(
            f"{where}, line {line}: a NUL byte (byte {byte + nul}): a binary file or UTF-16 "
            "without a byte-order mark, not UTF-8 text"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line += data.count(b"\n", 0, err.start)
        raise ConfigError(
            f"{where}, line {line}: byte 0x{data[err.start]:02x} (byte {byte + err.start}) is not "
            "UTF-8 (Latin-1 or another code page, or a binary file); save the file as UTF-8"
        ) from None


_NOT_AN_OBJECT = re.compile(rb"(?:\A(?:\xef\xbb\xbf)?|\n)[ \t\r]*([^{ \t\r\n])")


#: The deepest JSON capnb reads: pyarrow 26's JSON reader crashes the process (segmentation
#: fault) on a line nested some 20,000 deep, Python's json module raises RecursionError near 1,000.
MAX_JSON_DEPTH = 1_000
#: Bytes that are not a bracket or a line end, dropped to count each line's brackets at C speed.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}\n")
_JSON_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*+"')


def _json_depth(line: bytes) -> int:
    """How deep a line of JSON nests (brackets inside strings do not count)."""
    import numpy as np

    codes = np.frombuffer(_JSON_STRING.sub(b'""', line), dtype=np.uint8)
    step = np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
    step -= np.isin(codes, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _too_deep(view, name: str) -> None:
    """A ConfigError naming the first line nested deeper than :data:`MAX_JSON_DEPTH`.

    Only a line holding that many brackets can be; those few are measured string by string.
    """
    brackets = bytes(view).translate(None, _NOT_BRACKETS)
    line, start = 1, 0
    for found in re.finditer(rb"[^\n]{%d,}" % (MAX_JSON_DEPTH + 1), brackets):
        for _ in range(brackets.count(b"\n", 0, found.start()) + 1 - line):
            start = view.find(b"\n", start) + 1
        line = brackets.count(b"\n", 0, found.start()) + 1
        end = view.find(b"\n", start)
        depth = _json_depth(bytes(view[start : end if end >= 0 else len(view)]))
        if depth > MAX_JSON_DEPTH:
            raise ConfigError(
                f"{name}, line {line}: JSON nested {depth:,} deep; capnb reads JSON nested at "
                f"most {MAX_JSON_DEPTH:,} deep"
            )


def parse_json(text: str, where: str) -> object:
    """``json.loads(text)``; JSON nested past Python's recursion limit is a ConfigError at ``where``.

    (A ``json.JSONDecodeError`` is the caller's to name: each says it its own way.)
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ConfigError(
            f"{where}: JSON nested too deeply (Python's json module reads about 1,000 levels)"
        ) from None
    except ValueError as error:
        if isinstance(error, json.JSONDecodeError):
            raise
        raise number_too_long(where) from None


def number_too_long(where: str) -> ConfigError:
    """The error for a JSON or TOML integer past Python's limit for reading one (4,300 digits).

    Python raises a bare ``ValueError: Exceeds the limit (4300 digits) for integer string
    conversion``, naming no file.
    """
    import sys

    return ConfigError(
        f"{where}: a number of more than {sys.get_int_max_str_digits():,} digits, larger than "
        "any figure capnb reads; is the file what it should be?"
    )


def json_lines_objects(path: str | os.PathLike, name: str | None = None) -> None:
    """Every non-blank line of a JSON-lines file starts an object (``{``), or a ConfigError.

    Checked before pyarrow's JSON reader sees a file: pyarrow 26 crashes the process
    (segmentation fault) on a file whose first value is ``null``, or on a line nested some
    20,000 deep (:data:`MAX_JSON_DEPTH`), and reads a later ``null`` line as an empty row. A
    scan of the bytes, at the speed of ``re`` (a 100 MB trace in well under a second); what the
    objects hold is the reader's to check.
    """
    import mmap

    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            found = _NOT_AN_OBJECT.search(view)
            if found is None:
                _too_deep(view, name or str(path))
                return
            line = view[: found.start(1)].count(b"\n") + 1
            start = bytes(view[found.start(1) : found.start(1) + 12])
    shown = start.decode("utf-8", "replace").split("\n")[0]
    raise ConfigError(
        f"{name or path}, line {line}: not a JSON object (starts {shown!r}); JSON lines hold "
        "one object per line"
    )


def file_version(path: str | os.PathLike) -> tuple[str, int, int]:
    """A file's version as a cache key: its path, size (bytes) and modification time (ns).

    A cache keyed on it reads the file again after an edit, and not before.
    """
    stat = os.stat(path)
    return str(path), stat.st_size, stat.st_mtime_ns


def json_line_of(path: str | os.PathLike):
    """``line(row)``: the line of a JSON-lines file that holds its record ``row`` (0 first).

    pyarrow's reader skips blank lines (whitespace only), so a record's index is not its line;
    the file's lines are counted when a row is first named (an error, a warning), not before.
    """
    import numpy as np

    counted: list = []

    def line(row: int) -> int:
        if not counted:
            with open(path, "rb") as handle:
                kept = [n for n, text in enumerate(handle, 1) if text.strip(b" \t\r\n")]
            counted.append(np.asarray(kept, dtype=np.int64))
        return int(counted[0][row]) if row < counted[0].size else row + 1

    return line


# -- writing ----------------------------------------------------------------------------------------
def _tag() -> str:
    """Host and process id, so that a later writer can tell a dead writer's leftovers."""
    host = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"
    return f"{host}-{os.getpid()}"


def _failed(path: Path, err: OSError, size: int | None = None) -> OutputError:
    """One line naming the path and what to do, for an OSError while writing it."""
    bytes_ = f" ({size:,} bytes to write)" if size is not None else ""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        why = "no space left on its file system" if err.errno == errno.ENOSPC else "disk quota full"
        return OutputError(f"{path}: {why}{bytes_}; free space or write elsewhere")
    if err.errno == errno.EFBIG:
        return OutputError(f"{path}: larger than the file-size limit (ulimit -f){bytes_}; raise "
                           "the limit or write elsewhere")  # fmt: skip
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        # (no flag named: capnb config takes its path, plan and report --out, the API a folder)
        return OutputError(f"{path}: cannot write there ({err.strerror}); write elsewhere")
    return OutputError(f"{path}: cannot be written ({err.strerror or err})")


def _file_size_limit() -> int | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _check_room(folder: Path, sizes: Mapping[str, int]) -> None:
    """Refuse before writing when the files cannot fit: the file-size limit, the free space."""
    limit = _file_size_limit()
    for name, size in sizes.items():
        if limit is not None and size > limit:
            raise OutputError(
                f"{folder / name}: {size:,} bytes, above the file-size limit of {limit:,} bytes "
                "(ulimit -f); raise the limit or write elsewhere"
            )
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    total = sum(sizes.values())
    if total > free:
        raise OutputError(
            f"{folder}: {total:,} bytes to write but {free:,} free on its file system; free "
            "space or write elsewhere (--out)"
        )


def _write_bytes(path: Path, data: bytes) -> None:
    """Write a new file (its mode from the umask), flushed to the disk; OSError on failure."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system syncs a folder
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _dangling(folder: Path) -> None:
    """A symbolic link to nothing where a folder goes: an OutputError, not "a file"."""
    if folder.is_symlink() and not folder.exists():
        raise OutputError(
            f"{folder}: a symbolic link to {os.readlink(folder)}, which does not exist; make that "
            "folder or give another --out"
        )


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        for parent in (folder, *folder.parents):
            _dangling(parent)
        raise OutputError(f"{folder}: a file, not a folder to write into") from None
    except OSError as err:
        raise _failed(folder, err) from None


def write_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write a text file whole or not at all: a temporary file beside it, renamed over it.

    A failure leaves the old file (or no file) and no temporary behind, and is an
    :class:`~capnb.errors.OutputError` naming the path. The file gets the usual permissions of a
    new file (the umask's), not a temporary file's private ones.
    """
    path = user_path(path, "output file")
    _make_folder(path.parent)
    with contextlib.suppress(OSError):
        _clean_stale(path.parent)
    data = text.encode("utf-8")
    _check_room(path.parent, {path.name: len(data)})
    tmp = path.parent / f".{path.name}.{_tag()}-{os.urandom(4).hex()}.tmp"
    try:
        _write_bytes(tmp, data)
        os.replace(tmp, path)
    except OSError as err:
        raise _failed(path, err, len(data)) from None
    finally:
        with contextlib.suppress(OSError):  # a read-only folder refuses even a missing file's
            tmp.unlink(missing_ok=True)
    return path


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on the folder itself (no lock file): concurrent writers take turns."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no lock; the commit folder still guards
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest(folder: Path) -> dict[str, str]:
    try:
        recorded = json.loads((folder / _MANIFEST).read_text(encoding="utf-8"))
        files = recorded["files"]
        return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _roll_forward(folder: Path) -> None:
    """Finish a commit a killed writer left: move the committed files into place, manifest last."""
    commit = folder / _COMMIT
    if not commit.is_dir():
        return
    names = sorted(p.name for p in commit.iterdir())
    for name in sorted(names, key=lambda n: n == _MANIFEST):
        os.replace(commit / name, folder / name)
    commit.rmdir()
    _fsync_folder(folder)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _clean_stale(folder: Path) -> None:
    """Remove temporaries of writers that died: this host's dead pids, anyone's after a week."""
    host = _tag().rsplit("-", 1)[0]
    now = time.time()
    pattern = re.compile(r"(?:\.capnb-tmp-|\..+\.)(?P<host>[A-Za-z0-9]+)-(?P<pid>\d+)-")
    for entry in folder.iterdir():
        name = entry.name
        legacy = re.fullmatch(r"\..+\.nc\.tmp", name)  # an older capnb's one fixed name
        match = pattern.match(name)
        if not (legacy or (match and (name.startswith(_TMP_PREFIX) or name.endswith(".tmp")))):
            continue
        try:
            old = now - entry.lstat().st_mtime > _STALE_S
        except OSError:
            continue
        dead = bool(match) and match["host"] == host and not _alive(int(match["pid"]))
        if not (dead or old or legacy):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def settle(folder: str | os.PathLike) -> None:
    """Bring an output folder to a whole set: finish a killed writer's commit, drop stale files.

    Every :func:`write_set` does this first; a reader may call it before reading a set.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return
    with _locked(folder):
        _roll_forward(folder)
        _clean_stale(folder)


def write_set(
    folder: str | os.PathLike,
    files: Mapping[str, bytes | str],
    *,
    force: bool = False,
    remove: Iterable[str] = (),
) -> dict[str, Path]:
    """Write several files into ``folder`` as one set: a reader sees the old set or the new one.

    Parameters
    ----------
    folder
        The output folder (made if missing).
    files
        File name (no folder) -> its content (``str`` is written as UTF-8).
    force
        Replace a target that capnb did not write there (or that was changed since).
    remove
        File names of an earlier set that this one drops (a page of a worksheet not run now):
        removed with the commit where capnb wrote them and they are unchanged, so that they do
        not stay beside the new set as if they were of it; a file of the user's is left alone.

    Returns
    -------
    dict
        File name -> its path.

    Raises
    ------
    OutputError
        The files do not fit (the free space, the file-size limit), a write failed, or a target
        exists that capnb did not write and ``force`` is false; the message names the path. The
        folder keeps its previous files, and no temporary is left behind.
    """
    folder = _output_folder(folder)
    contents = {
        name: (c.encode("utf-8") if isinstance(c, str) else bytes(c)) for name, c in files.items()
    }
    remove = [remove] if isinstance(remove, str) else list(remove)
    for name in (*contents, *remove):
        if not name or Path(name).name != name or name.startswith(".capnb"):
            raise OutputError(f"{folder}: {name!r} is not a plain file name capnb may write")
    _make_folder(folder)
    if not folder.is_dir():
        raise OutputError(f"{folder}: not a folder to write into")
    _check_room(folder, {name: len(data) for name, data in contents.items()})
    try:
        staging = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{_tag()}-", dir=folder))
    except OSError as err:  # a read-only folder: named, not its temporary
        raise _failed(folder, err) from None
    try:
        for name, data in contents.items():
            try:
                _write_bytes(staging / name, data)
            except OSError as err:
                raise _failed(folder / name, err, len(data)) from None
        with _locked(folder):
            _roll_forward(folder)
            _clean_stale(folder)
            _commit(folder, staging, contents, force, [n for n in remove if n not in contents])
    except OSError as err:
        raise _failed(folder, err) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return {name: folder / name for name in contents}


def _output_folder(folder: str | os.PathLike) -> Path:
    """An output folder a user gave: ``''`` (an unset shell variable) is not the current folder."""
    if not os.fspath(folder).strip():
        raise OutputError(
            f"output folder {os.fspath(folder)!r}: an empty path (an unset shell variable?); give "
            "the folder to write into, or leave --out out"
        )
    return user_path(folder, "output folder")


def check_set(
    folder: str | os.PathLike,
    names: Iterable[str],
    *,
    force: bool = False,
    reads: Mapping[str, str] | None = None,
) -> None:
    """Refuse now, before the work, a set :func:`write_set` would refuse to write at the end.

    A file where the folder (or one of its parents) goes, a folder in the way of a file, a folder
    this process cannot write into (a read-only mount), or a target capnb did not write there
    (without ``force``) is an :class:`OutputError` naming the path; nothing is written. A write
    can still fail later (a full disk): this checks only what is already in the way. ``reads``:
    setting -> a folder the run reads every file of (measured runs); the folder written must not
    be one of them, or the next run reads the set as runs.
    """
    folder = _output_folder(folder)
    for setting, given in (reads or {}).items():
        if given and Path(given).is_dir() and folder.is_dir() and folder.samefile(given):
            raise OutputError(
                f"{folder}: the folder of {setting} = {given!r}, which the plan reads; the files "
                "capnb writes there would be read as runs the next time: give another --out"
            )
    for parent in (folder, *folder.parents):
        _dangling(parent)
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(f"{parent}: a file, not a folder to write into")
            _writable(parent)
            break
    if folder.is_dir():
        _refuse_foreign(folder, names, force, _manifest(folder))


def _writable(folder: Path) -> None:
    """Refuse a folder this process cannot make files in: a read-only mount, no permission."""
    if os.access(folder, os.W_OK | os.X_OK):
        return
    read_only = hasattr(os, "ST_RDONLY") and os.statvfs(folder).f_flag & os.ST_RDONLY
    code = errno.EROFS if read_only else errno.EACCES
    raise _failed(folder, OSError(code, os.strerror(code)))


def _refuse_foreign(folder: Path, names: Iterable[str], force: bool, recorded: dict) -> None:
    for name in names:
        target = folder / name
        if target.is_dir():
            raise OutputError(f"{target}: a folder is in the way of the file capnb writes")
        if target.is_symlink() and not target.exists() and not force:  # not replaced unasked
            raise OutputError(
                f"{target}: a symbolic link to {os.readlink(target)}, which does not exist; capnb "
                "did not make it: move it or pass --force (force=True) to replace it"
            )
        if target.exists() and not force and recorded.get(name) != _sha256(target):
            raise OutputError(
                f"{target}: exists and capnb did not write it (or it was changed since, or a "
                "capnb from before 6 December 2026 wrote it without keeping a record of it "
                "here); move it or pass --force (force=True) to replace it"
            )


def _commit(
    folder: Path, staging: Path, contents: Mapping[str, bytes], force: bool, remove: list[str]
) -> None:
    """Under the folder's lock: refuse foreign targets, then commit and move the set into place.

    The earlier set's files in ``remove`` that capnb wrote (unchanged) go first: a writer killed
    after that leaves part of the earlier set, never files of two sets.
    """
    recorded = _manifest(folder)
    _refuse_foreign(folder, contents, force, recorded)
    stale = [n for n in remove if (folder / n).is_file() and recorded.get(n) == _sha256(folder / n)]
    manifest = {**recorded, **{name: hashlib.sha256(d).hexdigest() for name, d in contents.items()}}
    manifest = {name: digest for name, digest in manifest.items() if name not in stale}
    _write_bytes(staging / _MANIFEST, json.dumps({"files": manifest}, indent=1).encode())
    _fsync_folder(staging)
    for name in stale:
        (folder / name).unlink()
    os.rename(staging, folder / _COMMIT)  # the commit point: from here on the set is whole
    _fsync_folder(folder)
    _roll_forward(folder)


def write_section(path: str | os.PathLike, section: str) -> Path:
    """Replace one ``##`` section of a Markdown file (or append it), leaving the others alone.

    ``section`` starts with its own ``##`` heading line; the section it replaces runs from the
    line equal to that heading to the next ``##`` heading. Written whole (:func:`write_atomic`).
    """
    path = Path(path)
    heading = section.splitlines()[0].strip()
    if not heading.startswith("## "):
        raise ValueError(f"section must start with a '## ' heading, got {heading!r}")
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        joiner = (
            "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        )
        return write_atomic(path, text + joiner + section)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    tail = "".join(lines[end:])
    return write_atomic(path, "".join(lines[:start]) + section + ("\n" + tail if tail else ""))

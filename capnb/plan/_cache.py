"""An on-disk cache of :func:`capnb.plan.build` for processes that build the same plan again.

Off unless the environment variable ``CAPNB_PLAN_CACHE`` names a folder. The test suite sets it
(``tests/conftest.py``) to a folder of its own run, so the pytest workers, the worksheet kernels
nbval starts and the JupyterLab kernels of the browser tests, which all inherit it, build the
bundled defaults' plan once between them and read it back after (the default plan is 14 days of
1-s steps over the whole policy grid, with its held-out choice: about 13 s of CPU each time).

A plan is found by everything it is built from: the config (every setting and the name of its
source, which the plan's text repeats), the contents of every file or folder the config names, the
bundled data (each file's path, size and time), and capnb's own files (code, templates, tables).
A build that raises stores nothing. The warnings a build issued are stored with it and issued
again on every read, so a reader sees what a builder saw. The plan is stored with :mod:`pickle`
(exact: the NetCDF of :func:`capnb.plan.export` turns some attributes into strings), written to a
temporary name and renamed, under a lock per plan, so that processes asking at once wait for the
first; a store that fails (a full disk) leaves no temporary, and the plan built is returned.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pickle
import warnings
from pathlib import Path

VARIABLE = "CAPNB_PLAN_CACHE"


def folder() -> Path | None:
    """The cache's folder, or None when caching is off."""
    where = os.environ.get(VARIABLE, "").strip()
    return Path(where) if where else None


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    digest = hashlib.sha256()
    package = Path(__file__).parents[1]
    files = (p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in sorted(files):  # its code, templates and tables
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _tree_digest(path: Path, contents: bool) -> str:
    """A file's or folder's digest: its bytes, or (``contents=False``) each file's size and time."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        if contents:
            digest.update(file.read_bytes())
        else:
            stat = file.stat()
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _named_paths(value: object) -> list[str]:
    """Every string in a config's settings that names an existing file or folder."""
    if isinstance(value, dict):
        return [p for v in value.values() for p in _named_paths(v)]
    if isinstance(value, list | tuple):
        return [p for v in value for p in _named_paths(v)]
    if isinstance(value, str) and value and len(value) < 4096:
        with contextlib.suppress(OSError, ValueError):
            if Path(value).exists():
                return [value]
    return []


def key(cfg) -> str:
    """The cache key of a :class:`PlanConfig`: a digest of all a plan is built from."""
    from ..data import dataset_path

    settings = cfg.as_dict()
    record = {
        "config": settings,
        "source": cfg.source,
        "files": {p: _tree_digest(Path(p).resolve(), True) for p in _named_paths(settings)},
        "datasets": _tree_digest(Path(dataset_path()), False),
        "code": _code_digest(),
    }
    text = json.dumps(record, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def cached_build(cfg, build):
    """``(build(), warnings it issued)``, or the pair stored for ``cfg``'s key.

    With caching off the build runs as it is and its warnings are issued as they come: ``[]``.
    """
    where = folder()
    if where is None:
        return build(), []
    import fcntl

    where.mkdir(parents=True, exist_ok=True)
    name = key(cfg)
    stored = where / f"{name}.pickle"
    with open(where / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stored.is_file():
            return pickle.loads(stored.read_bytes())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            made = build(), [(w.category, str(w.message)) for w in caught]
        partial = stored.with_suffix(f".{os.getpid()}.partial")
        try:
            partial.write_bytes(pickle.dumps(made, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(partial, stored)
        except OSError:  # a full disk: the plan is built, only not kept for the next process
            pass
        finally:  # and never a partial file left behind (a failure, Ctrl-C)
            partial.unlink(missing_ok=True)
        return made

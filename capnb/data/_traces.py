"""Traffic traces: request logs (one row per request) and rate series (one row per window).

Request logs load as an ``xarray.Dataset`` over dim ``request`` with ``time`` (datetime64[ns] on the
trace's own clock) and, when the file has them, ``prompt_tokens`` and ``output_tokens`` (int64).
Rate series load as a Dataset over ``time`` with ``qps`` (requests/s) and ``requests``. Both state
their clock in the attrs (``timezone``, ``weekday_known``). Readers are pyarrow's; nothing is
guessed: a problem in a file is an error naming the file, column and row, or (for out-of-order and
duplicate times, which are sorted and kept) a :class:`TraceWarning` repeated in ``attrs["notes"]``.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import glossary
from ..errors import ConfigError, InputError, UnknownNameError
from . import _times
from ._catalog import dataset_path

__all__ = [
    "TRACE_FORMATS",
    "TraceWarning",
    "list_rate_series",
    "list_traces",
    "load_trace",
]

#: Formats :func:`load_trace` reads.
TRACE_FORMATS = ("azure", "mooncake", "csv", "parquet")

_AZURE = {"time": "TIMESTAMP", "prompt": "ContextTokens", "output": "GeneratedTokens"}
_MOONCAKE = {"time": "timestamp", "prompt": "input_length", "output": "output_length"}
_TIME_NAMES = ("timestamp", "time", "TIMESTAMP", "arrival_time", "created_at")
_PROMPT_NAMES = ("prompt_tokens", "input_tokens", "input_length", "ContextTokens")
_OUTPUT_NAMES = ("output_tokens", "output_length", "GeneratedTokens")

_BUNDLED_TRACES = {
    "azure-code-2023": ("AzureLLMInferenceTrace_code.csv", "azure"),
    "azure-conv-2023": ("AzureLLMInferenceTrace_conv.csv", "azure"),
    "mooncake-synthetic": ("mooncake_synthetic_trace.jsonl", "mooncake"),
}
_BUNDLED_SERIES = {
    "servegen-m-large": "servegen_language_m-large_aggregate_rate_10min.csv",
    "servegen-m-small": "servegen_language_m-small_aggregate_rate_10min.csv",
}


class TraceWarning(UserWarning):
    """A trace loaded, but something in it was repaired (sorted, merged) and is reported."""


def list_traces() -> list[str]:
    """Names of the bundled request logs (see ``datasets/README.md``)."""
    return list(_BUNDLED_TRACES)


def list_rate_series() -> list[str]:
    """Names of the bundled rate series (see ``datasets/README.md``)."""
    return list(_BUNDLED_SERIES)


# -- request logs ------------------------------------------------------------------------------
def load_trace(
    name_or_path: str | os.PathLike,
    *,
    format: str | None = None,
    time_column: str | None = None,
    prompt_column: str | None = None,
    output_column: str | None = None,
    time_unit: str | None = None,
    timezone: str | None = None,
    start: str | None = None,
):
    """Load a request log: one row per request with its arrival time and token counts.

    Parameters
    ----------
    name_or_path
        A bundled trace (:func:`list_traces`: ``"azure-code-2023"``, ``"azure-conv-2023"``,
        ``"mooncake-synthetic"``) or the path of a file.
    format
        ``"azure"`` (CSV ``TIMESTAMP, ContextTokens, GeneratedTokens``), ``"mooncake"`` (JSONL
        ``timestamp`` in ms since the first request, ``input_length``, ``output_length``), ``"csv"``
        or ``"parquet"`` (a named time column, optional token columns). Default: from the file's
        suffix and, for CSV, its header.
    time_column, prompt_column, output_column
        Column names for ``csv``/``parquet`` (defaults: the first present of ``timestamp``, ``time``,
        ``TIMESTAMP``, ``arrival_time``, ``created_at``; of ``prompt_tokens``, ``input_tokens``,
        ``input_length``, ``ContextTokens``; of ``output_tokens``, ``output_length``,
        ``GeneratedTokens``). Token columns are optional; a log without them has no token variables.
    time_unit
        For a numeric time column: ``"s"``, ``"ms"``, ``"us"`` or ``"ns"`` (Mooncake: ``"ms"``).
    timezone
        The clock to count hours of the day on (IANA name). Times with UTC offsets are converted to
        it; naive times are taken to be on it already. Default: the single offset the file states,
        or unknown for naive times.
    start
        For relative times (Mooncake; numbers with ``time_unit`` that count from the first request):
        the date and time of time 0. Default: 1970-01-01 00:00 as a placeholder, with
        ``weekday_known = "no"``.

    Returns
    -------
    xarray.Dataset
        Over dim ``request``, sorted by time: ``time`` (datetime64[ns], the trace's own clock),
        ``prompt_tokens`` and ``output_tokens`` (tokens, int64) when present. Attrs: ``source``,
        ``format``, ``timezone``, ``weekday_known``, ``notes`` (what was repaired).

    Raises
    ------
    ConfigError
        The file is empty, lacks a column, or holds a value that is not a time or a whole
        non-negative token count (the message names the column and row).

    Examples
    --------
    >>> trace = load_trace("azure-conv-2023")
    >>> trace.sizes["request"], str(trace.time.dtype)
    (19366, 'datetime64[ns]')
    """
    path, fmt = _trace_source(name_or_path, format)
    timezone = _times.resolve_timezone(timezone)
    relative = start is not None
    if fmt == "mooncake":
        columns = {
            "time": time_column or _MOONCAKE["time"],
            "prompt": prompt_column or _MOONCAKE["prompt"],
            "output": output_column or _MOONCAKE["output"],
        }
        table, where = _read_jsonl(path, columns)
        time_unit, relative = time_unit or "ms", True
    elif fmt == "parquet":
        table, where, columns = _read_parquet(path, time_column, prompt_column, output_column)
    else:
        preset = _AZURE if fmt == "azure" else {}
        table, where, columns = _read_csv(
            path, preset, time_column, prompt_column, output_column, time_unit, timezone
        )
    ns, clock = _times.table_times(
        table, columns["time"], where, time_unit, timezone, relative, start
    )
    tokens = {
        name: _token_column(table, columns[key], where)
        for key, name in (("prompt", "prompt_tokens"), ("output", "output_tokens"))
        if columns.get(key)
    }
    used = {
        "time": columns["time"],
        "prompt_tokens": columns.get("prompt"),
        "output_tokens": columns.get("output"),
    }
    return _request_dataset(path, fmt, ns, tokens, clock, where, used)


def _trace_source(name_or_path, format) -> tuple[Path, str]:
    if format is not None and format not in TRACE_FORMATS:
        raise InputError(f"format must be one of {list(TRACE_FORMATS)}, got {format!r}")
    if not isinstance(name_or_path, str | os.PathLike):
        raise InputError(
            f"name_or_path must be a bundled trace name or a path, got {type(name_or_path).__name__}"
        )
    text = str(name_or_path)
    if text in _BUNDLED_TRACES:
        file, fmt = _BUNDLED_TRACES[text]
        return dataset_path("traces", file), format or fmt
    if text in _BUNDLED_SERIES:
        raise InputError(
            f"{text!r} is a rate series (counts per window, not requests): load it with "
            "capnb.data.load_rate_series"
        )
    path = Path(name_or_path)
    if not path.exists():
        if os.sep not in text and "." not in text:
            raise UnknownNameError("trace", text, list_traces())
        raise ConfigError(f"{path}: no such trace file")
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a trace file")
    if path.stat().st_size == 0:
        raise ConfigError(f"{path}: the file is empty")
    if format is not None:
        return path, format
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return path, "mooncake"
    if suffix in (".parquet", ".pq"):
        return path, "parquet"
    if suffix in (".csv", ".txt", ".gz"):
        header = _csv_header(path)
        return path, "azure" if set(_AZURE.values()) <= set(header) else "csv"
    raise ConfigError(
        f"{path}: cannot tell the format from the suffix {suffix!r}; pass format= one of "
        f"{list(TRACE_FORMATS)}"
    )


def _csv_header(path: Path) -> list[str]:
    try:
        with _open_text(path) as handle:
            rows = csv.reader(handle)
            header = next(rows, None)
            if not header or not any(h.strip() for h in header):
                raise ConfigError(f"{path}: the file is empty (no header line)")
            first = next(rows, None)
            while first is not None and not any(v.strip() for v in first):
                first = next(rows, None)
    except (UnicodeDecodeError, EOFError, OSError, csv.Error) as err:
        # binary data, a truncated .gz, a NUL byte: not a text file the readers can parse
        raise ConfigError(f"{path}: not a readable UTF-8 CSV file ({err})") from None
    if first is None:
        raise ConfigError(f"{path}: holds a header but no rows")
    return [h.strip().lstrip("\ufeff") for h in header]


def _open_text(path: Path):
    if path.suffix.lower() == ".gz":
        import gzip

        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _first_values(path: Path) -> dict[str, str]:
    with _open_text(path) as handle:
        rows = csv.reader(handle)
        header = [h.strip().lstrip("\ufeff") for h in next(rows)]
        for row in rows:
            if any(v.strip() for v in row):
                return dict(zip(header, (v.strip() for v in row), strict=False))
    return {}


def _pick_column(header, given, candidates, argument, path, required) -> str | None:
    if given is not None:
        if given not in header:
            raise ConfigError(f"{path}: no column {given!r} ({argument}); columns: {header}")
        return given
    for name in candidates:
        if name in header:
            return name
    if required:
        raise ConfigError(
            f"{path}: no time column among {list(candidates)}; name it with {argument}= "
            f"(columns: {header})"
        )
    return None


def _csv_where(path: Path) -> Callable[[int], str]:
    return lambda row: f"{path.name}, row {row + 1} (line {row + 2})"


def _read_csv(path, preset, time_column, prompt_column, output_column, time_unit, timezone):
    """Read a CSV request log with pyarrow.

    The time column is typed from the first row's form (naive, or with a UTC offset), so pyarrow
    parses it while it reads. When the file's offsets need checking (times with offsets and no
    ``timezone=``), the column is read as text batch by batch, each batch's offsets are checked
    against the first row's and the batch is parsed (:func:`_read_one_offset`); the result is a
    timestamp column with the file's one offset as its zone. Anything less regular is read as text
    and parsed with row-level messages.
    """
    import re

    import pyarrow as pa
    import pyarrow.csv as pacsv

    header = _csv_header(path)
    columns = {
        "time": _pick_column(
            header, time_column or preset.get("time"), _TIME_NAMES, "time_column", path, True
        ),
        "prompt": _pick_column(
            header,
            prompt_column or preset.get("prompt"),
            _PROMPT_NAMES,
            "prompt_column",
            path,
            False,
        ),
        "output": _pick_column(
            header,
            output_column or preset.get("output"),
            _OUTPUT_NAMES,
            "output_column",
            path,
            False,
        ),
    }
    where = _csv_where(path)
    wanted = [c for c in columns.values() if c]
    first = _first_values(path).get(columns["time"], "")  # a short first row: pyarrow names it
    types: dict[str, object] = {c: pa.int64() for k, c in columns.items() if k != "time" and c}
    aware = re.search(_times.OFFSET_PATTERN, first) is not None
    table, offset = None, None
    if _is_number(first):
        _times.unit_ns(time_unit, "time_unit", columns["time"])
    elif not aware:
        types[columns["time"]] = pa.timestamp("ns")
    elif timezone is not None:
        types[columns["time"]] = pa.timestamp("ns", tz="UTC")
    else:
        # the offsets are checked as the text is read; what the check cannot settle (a time without
        # an offset, an empty cell, a value pyarrow does not parse) stays text, parsed row by row
        types[columns["time"]] = pa.string()
        table, offset = _read_one_offset(path, wanted, types, columns["time"], first)
    if table is None:
        try:
            table = _arrow_csv(path, wanted, types)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError):
            # a value did not convert: read the columns as text and name the row at fault
            options = pacsv.ConvertOptions(
                column_types=dict.fromkeys(wanted, pa.string()),
                include_columns=wanted,
                strings_can_be_null=True,
            )
            table = _read_csv_table(path, options)
    if table.num_rows == 0:
        raise ConfigError(f"{path}: holds a header but no rows")
    if offset is not None:  # the file's one offset becomes the column's zone
        zone = "UTC" if offset == 0 else _times.offset_name(offset)[3:]
        name = columns["time"]
        index = table.column_names.index(name)
        typed = table.column(name).cast(pa.timestamp("ns", tz=zone))
        table = table.set_column(index, name, typed)
    return table, where, columns


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _arrow_csv(path, columns, types):
    import pyarrow.csv as pacsv

    options = pacsv.ConvertOptions(
        column_types=types, include_columns=columns, strings_can_be_null=True
    )
    return pacsv.read_csv(path, convert_options=options)


def _read_csv_table(path: Path, options):
    """Read a CSV with pyarrow; a file it cannot parse even as text is an error naming the row."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        return pacsv.read_csv(path, convert_options=options)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError):
        pass
    # a value did not convert to the inferred type: every column as text, for row-level messages
    text = pacsv.ConvertOptions(
        include_columns=options.include_columns,
        column_types=dict.fromkeys(options.include_columns, pa.string()),
        strings_can_be_null=True,
    )
    try:
        return pacsv.read_csv(path, convert_options=text)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError) as err:
        raise ConfigError(
            f"{path}: {_malformed_row(path)}not a well-formed CSV file ({err})"
        ) from None


def _malformed_row(path: Path) -> str:
    """Where the first row with a field count unlike the header's is ("row N (line M): "), or ""."""
    try:
        with _open_text(path) as handle:
            rows = csv.reader(handle)
            width = len(next(rows))
            for number, row in enumerate(rows, 1):
                if row and len(row) != width:
                    return (
                        f"row {number} (line {rows.line_num}) has {len(row)} fields, not {width}; "
                    )
    except (UnicodeDecodeError, EOFError, OSError, csv.Error, StopIteration):
        pass
    return ""


def _read_one_offset(path: Path, columns, types, name: str, first: str):
    """Read a CSV whose times carry UTC offsets, checking that they all state the first row's.

    The time column (``types[name]`` is text) is read batch by batch by pyarrow's streaming reader,
    and each batch's offsets are compared with the first row's before the batch is parsed to UTC
    instants. The file's rows are cut at line ends into one part per core, read side by side on
    threads (a compressed file is one part). Returns ``(table, offset)``: the table with the time
    column as ``timestamp[ns, UTC]`` and the offset in minutes east of UTC; ``(None, None)`` when
    the check cannot settle it (a time without an offset comes first; an empty cell, a value
    pyarrow does not parse, a row pyarrow cannot read), for the text path to name the row.

    Raises
    ------
    ConfigError
        A row states another offset than the first row, before any row without one (the message
        names both rows).
    """
    import re
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa
    import pyarrow.csv as pacsv

    zone = re.search(_times.OFFSET_PATTERN, first).group(1)
    minutes = _times.fixed_offset(zone)
    options = pacsv.ConvertOptions(
        column_types=types, include_columns=columns, strings_can_be_null=True
    )
    sources = _row_parts(path)

    def read(source) -> _Part:
        return _read_part(source, options, name, zone, minutes)

    with ThreadPoolExecutor(len(sources)) as pool:
        parts = list(pool.map(read, sources))
    rows, batches, parsed = 0, [], True
    for part in parts:  # in file order: the first event decides
        if part.event == "other":
            first_name, other_name = _times.offset_name(minutes), _times.offset_name(part.minutes)
            row = rows + part.row
            raise ConfigError(
                f"{path.name}: column {name!r} mixes UTC offsets ({first_name} in row 1, "
                f"{other_name} in row {row + 1} (line {row + 2})): say which clock to count hours "
                "of the day on with timezone= (e.g. timezone='Europe/Berlin', or 'UTC')"
            )
        if part.event is not None:  # a time without an offset, or a row pyarrow cannot read
            return None, None
        rows += part.row
        parsed = parsed and part.batches is not None
        batches += part.batches or []
    if not parsed or not batches:  # a time pyarrow does not parse: the text path names its row
        return None, None
    return pa.Table.from_batches(batches), minutes


#: Bytes of CSV per batch of :func:`_read_one_offset` (pyarrow's default block size), the least
#: bytes of rows worth a part (and a thread) of their own, and the most parts (None: one per core).
_BLOCK_BYTES = 1 << 20
_PART_BYTES = 16 << 20
_MAX_PARTS: int | None = None


def _row_parts(path: Path) -> list:
    """The sources :func:`_read_part` reads: byte ranges of rows cut at line ends, or the path.

    A part is ``(buffer, column names)`` (the header is read once, from the first line) or, for a
    compressed file or one pyarrow cannot map, ``(path, None)``: one part, header included.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if path.suffix.lower() == ".gz":
        return [(path, None)]
    try:
        data = pa.memory_map(str(path)).read_buffer()
        text = np.frombuffer(data, dtype=np.uint8)
        header_end = _line_start(text, 1)
        header = pacsv.read_csv(
            pa.BufferReader(data.slice(0, header_end)), pacsv.ReadOptions(use_threads=False)
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError):
        return [(path, None)]
    size = text.size - header_end
    count = max(1, min(_MAX_PARTS or pa.cpu_count(), size // _PART_BYTES))
    bounds = [header_end]
    for k in range(1, count):
        cut = _line_start(text, header_end + size * k // count)
        if bounds[-1] < cut < text.size:
            bounds.append(cut)
    bounds.append(text.size)
    names = header.schema.names
    return [(data.slice(a, b - a), names) for a, b in itertools.pairwise(bounds)]


def _line_start(text: np.ndarray, position: int) -> int:
    """The first byte at or after ``position`` that starts a line (``text.size`` if none)."""
    while position < text.size:
        window = text[position - 1 : position - 1 + (1 << 16)]
        ends = np.flatnonzero(window == 10)
        if ends.size:
            return position + int(ends[0])
        position += window.size
    return text.size


class _Part:
    """What :func:`_read_part` found in one part of a file.

    ``batches`` (None when a time did not parse or a cell is empty), ``row`` (rows read; with an
    event, the part's row it names) and ``event``: ``"other"`` (a row stating another offset,
    ``minutes``), ``"none"`` (a time stating none, or a row pyarrow cannot read) or None.
    """

    def __init__(self, batches, row: int, event: str | None = None, minutes: int | None = None):
        self.batches, self.row, self.event, self.minutes = batches, row, event, minutes


def _read_part(source, options, name: str, zone: str, minutes: int) -> _Part:
    """Read one part batch by batch: check each batch's offsets, then parse its times to UTC."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    where, names = source
    read = pacsv.ReadOptions(block_size=_BLOCK_BYTES, column_names=names, use_threads=False)
    batches, rows = [], 0
    try:
        reader = pacsv.open_csv(
            pa.BufferReader(where) if names else where, read_options=read, convert_options=options
        )
        for batch in reader:
            index = batch.schema.get_field_index(name)
            event, parsed = _batch_times(batch.column(index), zone, minutes)
            if event is not None:
                row, other = event
                return _Part(None, rows + row, "none" if other is None else "other", other)
            if parsed is None:
                batches = None  # a time pyarrow does not parse: still check the offsets
            elif batches is not None:
                arrays = [
                    parsed if i == index else batch.column(i) for i in range(batch.num_columns)
                ]
                batches.append(pa.RecordBatch.from_arrays(arrays, names=batch.schema.names))
            rows += batch.num_rows
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError):
        return _Part(None, rows, "none")
    return _Part(batches, rows)


def _batch_times(text, zone: str, minutes: int):
    """Check one batch's times against the first row's offset, then parse them to UTC instants.

    Returns ``(event, parsed)``: ``event`` is the first row stating another offset, as ``(row, its
    minutes)``, or a time stating none, as ``(row, None)``; without one, ``parsed`` holds the
    instants, or is None when pyarrow does not parse a time or a cell is empty.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    utc = pa.timestamp("ns", tz="UTC")
    if not text.null_count and pc.all(pc.ends_with(text, zone)).as_py() is not False:
        # every time ends in the first row's offset as the first row writes it; spaces around a
        # time or a value that is not one fail to parse and are looked at row by row below
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None, text.cast(utc)
    text = pc.utf8_trim_whitespace(text)  # other spellings ("Z", "+0000"), spaces, other offsets
    found = pc.extract_regex(text, r"(?P<zone>Z|[+-]\d\d:?\d\d)$")
    stated = pc.struct_field(found, "zone")  # null where a row states no offset
    spellings = stated.dictionary_encode()
    # each spelling's minutes, and a last entry for the rows that state none
    codes = np.array([_times.fixed_offset(z) for z in spellings.dictionary.to_pylist()] + [0])
    which = spellings.indices.fill_null(len(codes) - 1).to_numpy(zero_copy_only=False)
    empty = text.is_null().to_numpy(zero_copy_only=False)  # no time at all: not an offset
    odd = np.flatnonzero(((which == len(codes) - 1) | (codes[which] != minutes)) & ~empty)
    if odd.size:
        row = int(odd[0])
        return (row, None if which[row] == len(codes) - 1 else int(codes[which[row]])), None
    if empty.any():
        return None, None  # the text path names the empty cell, unless another offset comes later
    try:
        return None, text.cast(utc)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None, None


def _read_jsonl(path: Path, columns: dict[str, str]):
    import pyarrow as pa
    import pyarrow.json as pajson

    where = lambda row: f"{path.name}, line {row + 1}"  # noqa: E731
    try:
        table = pajson.read_json(path)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        _diagnose_jsonl(path)
        raise
    if table.num_rows == 0:
        raise ConfigError(f"{path}: holds no rows")
    for key, name in columns.items():
        if name not in table.column_names:
            raise ConfigError(
                f"{path}: no field {name!r} ({key} column); fields: {table.column_names}"
            )
    return table, where


def _diagnose_jsonl(path: Path) -> None:
    with open(path, encoding="utf-8", errors="replace") as handle:  # a bad byte: a JSON error
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(
                    f"{path.name}, line {number}: not valid JSON ({err.msg})"
                ) from None
            if not isinstance(record, dict):
                raise ConfigError(f"{path.name}, line {number}: not a JSON object")
    raise ConfigError(f"{path}: pyarrow could not read it as JSON lines (fields of mixed types?)")


def _read_parquet(path: Path, time_column, prompt_column, output_column):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise ConfigError(f"{path}: not a readable Parquet file ({err})") from None
    header = list(schema.names)
    columns = {
        "time": _pick_column(header, time_column, _TIME_NAMES, "time_column", path, True),
        "prompt": _pick_column(header, prompt_column, _PROMPT_NAMES, "prompt_column", path, False),
        "output": _pick_column(header, output_column, _OUTPUT_NAMES, "output_column", path, False),
    }
    table = pq.read_table(path, columns=[c for c in columns.values() if c])
    if table.num_rows == 0:
        raise ConfigError(f"{path}: holds no rows")
    return table, (lambda row: f"{path.name}, row {row + 1}"), columns


def _token_column(table, column: str, where) -> np.ndarray:
    """A token column as int64, or an error naming the first row that is not a whole count >= 0."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pat

    values = table.column(column)
    if pat.is_string(values.type) or pat.is_large_string(values.type):
        text = pc.utf8_trim_whitespace(values.combine_chunks())
        ok = pc.fill_null(pc.match_substring_regex(text, r"^[+-]?\d+(\.0*)?$"), False)
        ok = ok.to_numpy(zero_copy_only=False) & ~values.is_null().to_numpy(zero_copy_only=False)
        if not ok.all():
            row = int(np.flatnonzero(~ok)[0])
            shown = text[row].as_py()
            raise ConfigError(
                f"{where(row)}: column {column!r} holds {shown!r}, not a whole number of tokens"
            )
        values = text.cast(pa.float64())
    if values.null_count:
        row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise ConfigError(f"{where(row)}: column {column!r} is empty (no token count)")
    numbers = values.to_numpy(zero_copy_only=False)
    if numbers.dtype.kind == "f":
        # beyond 2**53 a float is not an exact count (and past 2**63 no int64 holds it)
        bad = ~np.isfinite(numbers) | (numbers != np.round(numbers)) | (np.abs(numbers) > 2**53)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ConfigError(
                f"{where(row)}: column {column!r} holds {numbers[row]!r}, not a whole number of tokens"
            )
    elif numbers.dtype.kind not in "iu":
        raise ConfigError(f"column {column!r} has type {values.type}, not token counts")
    numbers = numbers.astype(np.int64, copy=False)
    if (numbers < 0).any():
        row = int(np.flatnonzero(numbers < 0)[0])
        raise ConfigError(f"{where(row)}: column {column!r} holds {numbers[row]}, a negative count")
    return numbers


def _request_dataset(path, fmt, ns, tokens, clock, where, used):
    import xarray as xr

    notes = []
    order = None
    steps_back = np.flatnonzero(ns[1:] < ns[:-1])
    if steps_back.size:
        order = np.argsort(ns, kind="stable")
        notes.append(
            f"{steps_back.size:,} rows were earlier than the row before them (first: "
            f"{where(int(steps_back[0]) + 1)}); the requests were sorted by time"
        )
        ns = ns[order]
        tokens = {k: v[order] for k, v in tokens.items()}
    same = int(np.count_nonzero(ns[1:] == ns[:-1]))
    if same:
        notes.append(
            f"{same:,} requests share their timestamp with the one before (kept: simultaneous "
            "arrivals at the log's time resolution)"
        )
    if notes:
        warnings.warn(f"{path.name}: " + "; ".join(notes), TraceWarning, stacklevel=3)
    data = {
        "time": (
            "request",
            ns.view("datetime64[ns]"),
            {"long_name": "arrival time on the trace's own clock"},
        )
    }
    for name, values in tokens.items():
        data[name] = ("request", values, glossary.attrs(name))
    attrs = {
        "title": f"request log {path.name}",
        "source": str(path),
        "format": fmt,
        **clock.attrs(),
        "notes": "; ".join(notes) or "none",
        "columns": ", ".join(
            f"{name} from {column!r}" if column else f"no {name} (the file has no such column)"
            for name, column in used.items()
        ),
    }
    return xr.Dataset(data, attrs=attrs)

"""Traffic traces: request logs (one row per request) and rate series (one row per window).

Request logs load as an ``xarray.Dataset`` over dim ``request`` with ``time`` (datetime64[ns] on the
trace's own clock) and, when the file has them, ``prompt_tokens`` and ``output_tokens`` (int64).
Rate series load as a Dataset over ``time`` with ``qps`` (requests/s) and ``requests``. Both state
their clock in the attrs (``timezone``, ``weekday_known``). Readers are pyarrow's; nothing is
guessed: a problem in a file is an error naming the file, column and row, or (for out-of-order and
duplicate times, which are sorted and kept) a :class:`TraceWarning` repeated in ``attrs["notes"]``.
"""

from __future__ import annotations

import csv
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
    parses it in its multi-threaded reader. When the file's offsets need checking, a byte scan of
    the column finds whether they all agree; the result is a timestamp column with the file's one
    offset as its zone. Anything less regular is read as text and parsed with row-level messages.
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
    offset = None
    if _is_number(first):
        _times.unit_ns(time_unit, "time_unit", columns["time"])
    elif not aware:
        types[columns["time"]] = pa.timestamp("ns")
    elif timezone is not None:
        types[columns["time"]] = pa.timestamp("ns", tz="UTC")
    else:
        offset = _single_offset(path, header.index(columns["time"]), columns["time"])
        # offsets that a byte scan could not settle: keep the text, parse it row by row
        types[columns["time"]] = pa.string() if offset is None else pa.timestamp("ns", tz="UTC")
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
        offset = None
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


def _single_offset(path: Path, column: int, name: str) -> int | None:
    """The one UTC offset (minutes) of a CSV's time column, by a byte scan; None: not scannable."""
    if path.suffix.lower() == ".gz":
        return None
    from ..kernels import forecast as kernels  # numba loads only when a file needs the scan

    text = np.memmap(path, dtype=np.uint8, mode="r")
    header_end = int(np.argmax(text[: 1 << 20] == 10)) + 1
    code, position, other = kernels.offset_codes(text, column, header_end)
    if code in (kernels.QUOTED, kernels.NO_ZONE) or other == kernels.QUOTED:
        return None
    if position >= 0:
        if other == kernels.NO_ZONE:
            return None  # a time without an offset: the text parser names the row
        line = int(np.count_nonzero(text[:position] == 10)) + 1
        first, second = _times.offset_name(code), _times.offset_name(other)
        raise ConfigError(
            f"{path.name}: column {name!r} mixes UTC offsets ({first} in row 1, {second} in row "
            f"{line - 1} (line {line})): say which clock to count hours of the day on with "
            "timezone= (e.g. timezone='Europe/Berlin', or 'UTC')"
        )
    return int(code)


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

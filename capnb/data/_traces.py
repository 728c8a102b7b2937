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
import functools
import itertools
import json
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import glossary, words
from .._validate import MOST_COUNT
from ..errors import ConfigError, InputError, UnknownNameError
from . import _times
from ._catalog import dataset_path
from ._files import (
    decode_text,
    file_version,
    json_line_of,
    json_lines_objects,
    parse_json,
    user_path,
)
from ._times import TraceWarning

__all__ = [
    "COLUMN_NAMES",
    "TRACE_FORMATS",
    "TraceWarning",
    "list_rate_series",
    "list_traces",
    "load_trace",
]

#: Formats :func:`load_trace` reads.
TRACE_FORMATS = ("azure", "mooncake", "csv", "parquet", "jsonl")

_AZURE = {"time": "TIMESTAMP", "prompt": "ContextTokens", "output": "GeneratedTokens"}
_MOONCAKE = {"time": "timestamp", "prompt": "input_length", "output": "output_length"}
#: Fields only Mooncake's JSON lines have: a JSON-lines log with one of them is read as Mooncake's.
_MOONCAKE_FIELDS = ("hash_ids", "input_length", "output_length")

#: The columns a request log's time and token counts are read from when none is named: the first
#: of each list the file has, by its exact name, else by its name compared without case, spaces,
#: "_", "-" and "." (``Request tokens``, ``PROMPT_TOKENS`` and ``promptTokens`` all match).
COLUMN_NAMES = {
    "time": (
        "timestamp",  # Mooncake, BurstGPT ("Timestamp"), most exports
        "time",
        "TIMESTAMP",  # Azure LLM inference traces
        "arrival_time",
        "arrival_timestamp",
        "request_time",
        "created_at",  # OpenAI-style logs
        "created",  # OpenAI response objects (Unix seconds)
        "arrived_at",  # Vidur's and Sarathi-Serve's trace CSVs (seconds from 0)
    ),
    "prompt": (
        "prompt_tokens",  # OpenAI usage, vLLM
        "input_tokens",
        "input_length",  # Mooncake
        "ContextTokens",  # Azure
        "Request tokens",  # BurstGPT
        "prompt_length",
        "prompt_len",
        "input_len",
        "num_prompt_tokens",
        "num_input_tokens",
        "prompt_token_count",
        "input_token_count",
        "num_prefill_tokens",  # Vidur, Sarathi-Serve
        "prompt_size",  # splitwise-sim
    ),
    "output": (
        "output_tokens",
        "output_length",  # Mooncake
        "GeneratedTokens",  # Azure
        "Response tokens",  # BurstGPT
        "completion_tokens",  # OpenAI usage
        "output_len",
        "response_length",
        "num_output_tokens",
        "num_completion_tokens",
        "output_token_count",
        "completion_token_count",
        "num_decode_tokens",  # Vidur, Sarathi-Serve
        "token_size",  # splitwise-sim: the tokens generated
    ),
}
_TIME_NAMES = COLUMN_NAMES["time"]
_PROMPT_NAMES = COLUMN_NAMES["prompt"]
_OUTPUT_NAMES = COLUMN_NAMES["output"]
#: Column names of a rate series: requests/s per window, or requests per window.
_RATE_NAMES = (
    "qps",
    "rps",
    "rate",
    "request_rate",
    "requests_per_s",
    "req_per_s",
    "total_rate_rps",
)
#: Column names of the model a request was served by (BurstGPT's ``Model``), compared as
#: :func:`_normal` names.
_MODEL_NAMES = ("model", "modelname", "modelid")
_COUNT_NAMES = ("requests", "count", "request_count", "num_requests", "arrivals")

_BUNDLED_TRACES = {
    "azure-code-2023": ("AzureLLMInferenceTrace_code.csv", "azure"),
    "azure-conv-2023": ("AzureLLMInferenceTrace_conv.csv", "azure"),
    "mooncake-synthetic": ("mooncake_synthetic_trace.jsonl", "mooncake"),
}
_BUNDLED_SERIES = {
    "servegen-m-large": "servegen_language_m-large_aggregate_rate_10min.csv",
    "servegen-m-mid": "servegen_language_m-mid_aggregate_rate_10min.csv",
    "servegen-m-small": "servegen_language_m-small_aggregate_rate_10min.csv",
}


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
        ``"azure"`` (CSV ``TIMESTAMP, ContextTokens, GeneratedTokens``), ``"mooncake"`` (JSON lines
        ``timestamp`` in ms, ``input_length``, ``output_length``, ``hash_ids``), or ``"csv"``,
        ``"parquet"`` or ``"jsonl"`` (any log: a time column, optional token columns). Default:
        from the file's suffix and its columns: a CSV with Azure's three columns is ``"azure"``, a
        JSON-lines file (``.jsonl``, ``.json``, ``.ndjson``) whose first record has one of
        Mooncake's own fields (``hash_ids``, ``input_length``, ``output_length``) ``"mooncake"``.
    time_column, prompt_column, output_column
        Column names (Mooncake: its fields). Default: the first the file has of
        :data:`COLUMN_NAMES` (compared exactly, then without case, spaces, ``_``, ``-`` and
        ``.``, then by a nested name's last part: a JSON record's ``usage`` object gives
        ``usage.prompt_tokens``): times from ``timestamp``, ``time``, ``arrival_time``,
        ``created_at``, ...; prompt tokens from ``prompt_tokens``, ``input_tokens``,
        ``input_length``, ``ContextTokens``, ``Request tokens`` (BurstGPT), ``prompt_len``, ...;
        output tokens from ``output_tokens``, ``output_length``, ``GeneratedTokens``,
        ``Response tokens``, ``completion_tokens``, ....
        Token columns are optional; a log without them has no token variables, and a column that
        looks like token counts but is not one of these names is reported (``attrs["columns"]``
        and a :class:`TraceWarning`), not read.
    time_unit
        For a numeric time column: ``"s"``, ``"ms"``, ``"us"`` or ``"ns"``; required, except for
        Mooncake, whose unit is ms (``attrs["notes"]`` says so). Numbers are Unix times (UTC), or,
        before 2000 as Unix times, counts from an unknown time 0. A unit that makes Unix times of
        another unit fall in 1970 (or past 2261) is refused with the dates each unit gives.
    timezone
        The clock to count hours of the day on (IANA name). Times with UTC offsets are converted to
        it; naive times are taken to be on it already, and across a daylight-saving change are
        placed as the same times with offsets would be (the hour repeated when clocks go back
        told apart by the rows' order). Default: the single offset the file states,
        or unknown for naive times.
    start
        For relative times (numbers that count from the first request, e.g. Mooncake's): the date
        and time of time 0. Default: 1970-01-01 00:00 as a placeholder, with
        ``weekday_known = "no"`` and ``hours_known = "no"``.

    Returns
    -------
    xarray.Dataset
        Over dim ``request``, sorted by time: ``time`` (datetime64[ns], the trace's own clock),
        ``prompt_tokens`` and ``output_tokens`` (tokens, int64) when present. Attrs: ``source``,
        ``format``, ``timezone``, ``weekday_known``, ``columns`` (which column gave what),
        ``notes`` (what was repaired or decided).

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
    notes: list[str] = []  # what the reader decided, for the attrs
    warned: list[str] = []  # ... and what of it a user should hear about
    if fmt in ("mooncake", "jsonl"):
        table, where, columns, header = _read_jsonl(
            path, fmt, time_column, prompt_column, output_column
        )
        if fmt == "mooncake" and time_unit is None and _numeric(table, columns["time"]):
            time_unit = "ms"  # Mooncake's unit, said in the notes (and doubted when it may not be)
            notes.append(f"column {columns['time']!r} read as milliseconds (Mooncake's unit)")
            warned += _mooncake_unit_doubts(table, columns["time"], where)
    elif fmt == "parquet":
        table, where, columns, header = _read_parquet(
            path, time_column, prompt_column, output_column
        )
    else:
        preset = _AZURE if fmt == "azure" else {}
        table, where, columns, header = _read_csv(
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
    if not tokens:
        notes += _warn_rate_columns(path, [c for c in header if c != columns["time"]])
    warned += _mixed_models(path, fmt, table, header)
    return _request_dataset(path, fmt, ns, tokens, clock, where, used, header, notes, warned)


def _trace_source(name_or_path, format) -> tuple[Path, str]:
    if format is not None and format not in TRACE_FORMATS:
        *layouts, last = TRACE_FORMATS
        raise InputError(f"format must be one of {layouts} or {last!r}, got {format!r}")
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
    path = user_path(name_or_path, "trace")
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
        return path, _jsonl_format(path)
    if suffix in (".parquet", ".pq"):
        return path, "parquet"
    if suffix in (".csv", ".txt", ".gz"):
        header = _csv_header(path)
        return path, "azure" if set(_AZURE.values()) <= set(header) else "csv"
    raise ConfigError(
        f"{path}: cannot tell the format from the suffix {suffix!r}; pass format= one of "
        f"{list(TRACE_FORMATS)}"
    )


def _jsonl_format(path: Path) -> str:
    """``"mooncake"`` when the first record has a field only Mooncake's logs have, else ``"jsonl"``.

    A first line that is not a JSON object reads as ``"jsonl"``: the reader then names the line.
    """
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    record = parse_json(line, f"{path.name}, line {number}")
                except json.JSONDecodeError:
                    return "jsonl"
                if isinstance(record, dict) and any(f in record for f in _MOONCAKE_FIELDS):
                    return "mooncake"
                return "jsonl"
    return "jsonl"


def _check_utf8(path: Path) -> None:
    """Every byte of a CSV file is UTF-8, else a ConfigError naming its line and byte.

    Read in blocks of 1 MiB: a byte anywhere, not only in the header's first block, and in
    columns the readers skip too (pyarrow checks only the columns it converts). Once per version
    of a file: a load reads its header up to three times (its format, its columns, the read).
    """
    _check_utf8_once(file_version(path))


@functools.lru_cache(maxsize=16)
def _check_utf8_once(version: tuple[str, int, int]) -> None:
    """:func:`_check_utf8` of one version of a file (:func:`capnb.data._files.file_version`)."""
    import gzip

    path = Path(version[0])
    pending, offset, lines = b"", 0, 0
    with gzip.open(path, "rb") if path.suffix.lower() == ".gz" else open(path, "rb") as handle:
        while True:
            block = handle.read(1 << 20)
            data = pending + block
            try:
                data.decode("utf-8")
                end = len(data)
            except UnicodeDecodeError as err:
                end = err.start
                if not block or err.end < len(data) or len(data) - end > 3:  # not a cut character
                    decode_text(data, path, byte=offset, line=lines + 1)  # raises: names it
            if not block:
                return
            lines += data.count(b"\n", 0, end)
            offset, pending = offset + end, data[end:]


def _csv_header(path: Path) -> list[str]:
    try:
        _check_utf8(path)
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
    header = [h.strip() for h in header]
    _no_separator_line(header, path)
    _headed(header, path)
    _named_once(header, path, "header")
    if len(header) == 1:  # one column: a file separated by something else than commas
        other = next((sep for sep in (";", "\t", "|") if sep in header[0]), None)
        if other is not None:
            shown = {";": "';'", "\t": "tabs", "|": "'|'"}[other]
            raise ConfigError(
                f"{path}: its header is one column, {header[0]!r}, which holds {shown}: capnb "
                "reads comma-separated files; write the file with commas between its columns"
            )
    return header


def _no_separator_line(header: list[str], path: Path) -> None:
    """A first line ``sep=,`` (Excel's dialect: Grafana's 'Download CSV for Excel') is no header.

    Read as the header, its one name ``sep=`` ended in "no time column among [...]".
    """
    line = ",".join(header)
    if len(header) <= 2 and line.lower().startswith("sep=") and len(line) <= 6:
        raise ConfigError(
            f"{path}: line 1, {line!r}, is the separator line Excel-dialect exports start with "
            "(Grafana's 'Download CSV for Excel'), not the header: delete that line (or export "
            "without the Excel option) so that the column names come first"
        )


def _headed(header: list[str], path: Path) -> None:
    """A CSV's first line names its columns: one whose names are mostly numbers or times is data.

    A file written without a header line (ServeGen's ``chunk-N-trace.csv``, ``0,1.33,8.6,...``)
    otherwise reads its first row as column names and ends in "no time column".
    """
    values = [h for h in header if any(c.isdigit() for c in h) and (_is_number(h) or _is_time(h))]
    if 2 * len(values) > len(header):
        shown = ", ".join(repr(h) for h in header[:6]) + (", ..." if len(header) > 6 else "")
        raise ConfigError(
            f"{path}: line 1 holds values ({shown}), not column names: the file has no header "
            "line; capnb reads columns by their names: add one as the first line (a request log: "
            "e.g. timestamp,prompt_tokens,output_tokens; a rate series: e.g. timestamp,qps)"
        )


def _is_time(text: str) -> bool:
    try:
        with warnings.catch_warnings():  # numpy warns of the offset of "...+00:00"
            warnings.simplefilter("ignore")
            np.datetime64(text.replace(" ", "T", 1))
    except ValueError:
        return False
    return True


def _named_once(names: list[str], path: Path, where: str) -> None:
    """A CSV header or Parquet schema names each column once (not read from the first of two)."""
    for i, name in enumerate(names):
        if name and name in names[:i]:
            raise ConfigError(
                f"{path}: the {where} names {name!r} twice (columns {names.index(name) + 1} and "
                f"{i + 1}); rename one"
            )


def parquet_names(path: Path) -> list[str]:
    """A Parquet file's column names, each once, or a ConfigError naming the file."""
    import pyarrow.parquet as pq

    try:
        names = list(pq.read_schema(path).names)
    except Exception as err:  # pyarrow raises several kinds for a file that is not Parquet
        raise ConfigError(f"{path}: not a readable Parquet file ({err})") from None
    _named_once(names, path, "schema")
    return names


def _open_text(path: Path):
    """The file as text without its byte-order mark, as pyarrow reads it.

    Dropped after the CSV parse, the mark kept the quotes of a quoted first name (Grafana's
    ``\ufeff"Time"`` read as ``"Time"``, a column pyarrow does not have).
    """
    if path.suffix.lower() == ".gz":
        import gzip

        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _first_values(path: Path) -> dict[str, str]:
    with _open_text(path) as handle:
        rows = csv.reader(handle)
        header = [h.strip() for h in next(rows)]
        for row in rows:
            if any(v.strip() for v in row):
                return dict(zip(header, (v.strip() for v in row), strict=False))
    return {}


def _normal(name: object) -> str:
    """A column name without case, spaces, "_", "-" and "." (``Request tokens``: ``requesttokens``)."""
    return re.sub(r"[^0-9a-z]", "", str(name).lower())


def _find_column(header, candidates, argument: str, path) -> str | None:
    """The column of ``header`` that ``candidates`` name first, or None when none does.

    By exact name first, else by :func:`_normal` name, else by the last part of a nested name
    (``usage.prompt_tokens``: a JSON record's ``usage`` object, or a CSV of flattened ones). Two
    columns matching one name without case and spacing (``Time`` and ``TIME``), and none exactly,
    are an error asking for ``argument``.
    """
    for name in candidates:
        if name in header:
            return name
    for key in (_normal, lambda column: _normal(str(column).rsplit(".", 1)[-1])):
        normal: dict[str, list[str]] = {}
        for column in header:
            normal.setdefault(key(column), []).append(column)
        for name in candidates:
            found = normal.get(_normal(name), [])
            if len(found) > 1:
                raise ConfigError(
                    f"{path}: columns {found} both read as {name!r}; name the one to use with "
                    f"{argument}="
                )
            if found:
                return found[0]
    return None


def _looks_like_tokens(name: object) -> bool:
    """A column whose name says it counts tokens (``Total tokens``, ``prompt_len``)."""
    normal = _normal(name)
    return "token" in normal or normal.endswith(("len", "length"))


def _pick_column(header, given, candidates, argument, path, required) -> str | None:
    if given is not None:
        if given not in header:
            raise ConfigError(f"{path}: no column {given!r} ({argument}); columns: {header}")
        return given
    found = _find_column(header, candidates, argument, path)
    if found is not None:
        return found
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
        _times.unit_ns(time_unit, f"{path}: time_unit", columns["time"])
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
    return table, where, columns, header


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
    return _arrow_read(path, options)


def _spaced_names(path: Path) -> dict[str, str]:
    """The header's names written with spaces around them (``" qps"``), by their stripped name.

    capnb names columns stripped (:func:`_csv_header`); pyarrow keeps the spaces.
    """
    with _open_text(path) as handle:
        header = next(csv.reader(handle), [])
    return {h.strip(): h for h in header if h != h.strip()}


def _as_written(options, spaced: dict[str, str]):
    """``options`` with each column named as the header writes it (see :func:`_spaced_names`)."""
    import pyarrow.csv as pacsv

    if not spaced:
        return options
    return pacsv.ConvertOptions(
        column_types={spaced.get(k, k): v for k, v in options.column_types.items()},
        include_columns=[spaced.get(c, c) for c in options.include_columns],
        strings_can_be_null=options.strings_can_be_null,
    )


def _arrow_read(path: Path, options):
    """A CSV as pyarrow reads it, its columns named stripped, as capnb's header sniff names them."""
    import pyarrow.csv as pacsv

    spaced = _spaced_names(path)
    table = pacsv.read_csv(path, convert_options=_as_written(options, spaced))
    return table.rename_columns([c.strip() for c in table.column_names]) if spaced else table


def _read_csv_table(path: Path, options):
    """Read a CSV with pyarrow; a file it cannot parse even as text is an error naming the row."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    # (ArrowKeyError: a header whose quoting pyarrow reads otherwise than the column sniff did)
    unreadable = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
                  pa.ArrowKeyError, OSError)  # fmt: skip
    try:
        return _arrow_read(path, options)
    except unreadable:
        pass
    # a value did not convert to the inferred type: every column as text, for row-level messages
    text = pacsv.ConvertOptions(
        include_columns=options.include_columns,
        column_types=dict.fromkeys(options.include_columns, pa.string()),
        strings_can_be_null=True,
    )
    try:
        return _arrow_read(path, text)
    except unreadable as err:
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
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa
    import pyarrow.csv as pacsv

    zone = re.search(_times.OFFSET_PATTERN, first).group(1)
    minutes = _times.fixed_offset(zone)
    spaced = _spaced_names(path)
    options = _as_written(
        pacsv.ConvertOptions(column_types=types, include_columns=columns, strings_can_be_null=True),
        spaced,
    )
    sources = _row_parts(path)

    def read(source) -> _Part:
        return _read_part(source, options, spaced.get(name, name), zone, minutes)

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
    table = pa.Table.from_batches(batches)
    return table.rename_columns([c.strip() for c in table.column_names]), minutes


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


def _read_jsonl(path: Path, fmt: str, time_column, prompt_column, output_column):
    """Read JSON lines with pyarrow: Mooncake's fields, or any log's by the CSV column rules."""
    import pyarrow as pa
    import pyarrow.json as pajson

    line = json_line_of(path)  # blank lines are not records
    where = lambda row: f"{path.name}, line {line(row)}"  # noqa: E731
    try:
        json_lines_objects(path, path.name)
    except ConfigError:  # a line that starts no object: a document over several lines?
        not_one_document(path)
        raise
    try:
        table = pajson.read_json(path)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        _diagnose_jsonl(path)
        raise
    if table.num_rows == 0:
        raise ConfigError(f"{path}: holds no rows")
    table = _flattened(table)
    header = table.column_names
    if fmt == "mooncake":
        columns = {
            "time": time_column or _MOONCAKE["time"],
            "prompt": prompt_column or _MOONCAKE["prompt"],
            "output": output_column or _MOONCAKE["output"],
        }
        for key, name in columns.items():
            if name not in header:
                raise ConfigError(f"{path}: no field {name!r} ({key} column); fields: {header}")
    else:
        columns = {
            "time": _pick_column(header, time_column, _TIME_NAMES, "time_column", path, True),
            "prompt": _pick_column(
                header, prompt_column, _PROMPT_NAMES, "prompt_column", path, False
            ),
            "output": _pick_column(
                header, output_column, _OUTPUT_NAMES, "output_column", path, False
            ),
        }
    if pa.types.is_timestamp(table.column(columns["time"]).type):
        # pyarrow parsed ISO times with their offsets to naive UTC: the offsets (one clock, or
        # several) are lost; read the text, as a CSV's, for the clock rules of the CSV readers
        schema = pa.schema([(columns["time"], pa.string())])
        options = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
        table = _flattened(pajson.read_json(path, parse_options=options))
    return table, where, columns, header


def _flattened(table):
    """A JSON table with its records' objects as columns of their own (usage.prompt_tokens)."""
    import pyarrow as pa

    while any(pa.types.is_struct(field.type) for field in table.schema):
        table = table.flatten()
    return table


def _mixed_models(path: Path, fmt: str, table, header) -> list[str]:
    """What a log's model column says when it names more than one model (BurstGPT's ``Model``).

    capnb plans one model: a log of several is read as one service's traffic, which is said with
    each model's count of requests.
    """
    import pyarrow.compute as pc

    column = next((c for c in header if _normal(c) in _MODEL_NAMES), None)
    if column is None:
        return []
    if column in table.column_names:
        values = table.column(column)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        values = pq.read_table(path, columns=[column]).column(column)
    else:
        import pyarrow as pa

        values = _arrow_csv(path, [column], {column: pa.string()}).column(column)
    counts = pc.value_counts(pc.drop_null(values.cast("string"))).to_pylist()
    if len(counts) < 2:
        return []
    counts.sort(key=lambda c: (-c["counts"], c["values"]))
    shown = ", ".join(f"{c['values']}: {words.count(c['counts'], 'request')}" for c in counts[:5])
    more = f" and {len(counts) - 5:,} more" if len(counts) > 5 else ""
    return [
        f"column {column!r} names {len(counts):,} models ({shown}{more}): their requests are "
        "read together as one service's traffic, planned on the one model the plan gives; to "
        "plan one model's traffic, keep its rows in a file of their own"
    ]


def _numeric(table, column: str) -> bool:
    import pyarrow.types as pat

    kind = table.column(column).type
    return pat.is_integer(kind) or pat.is_floating(kind)


def _mooncake_unit_doubts(table, column: str, where) -> list[str]:
    """Why Mooncake's ms may be the wrong unit for this file: times with fractions of a ms.

    Mooncake counts whole milliseconds; fractions suggest seconds (``0.215``), read 1000x too
    short. Returned as a note for the warning, with the span either way.
    """
    numbers = table.column(column).to_numpy(zero_copy_only=False)
    if numbers.dtype.kind != "f" or not np.isfinite(numbers).all():
        return []
    fractions = np.flatnonzero(numbers != np.round(numbers))
    if not fractions.size:
        return []
    row = int(fractions[0])
    span = float(numbers.max() - numbers.min())
    return [
        f"column {column!r} holds fractions of a millisecond ({numbers[row].item():g} in "
        f"{where(row)}) though Mooncake counts whole ms: read as ms the log spans "
        f"{_times._span_text(span * 1e6)} ({_rate(table.num_rows, span * 1e-3)}); as seconds it would span "
        f"{_times._span_text(span * 1e9)} ({_rate(table.num_rows, span)}): if the times are seconds, pass "
        "time_unit='s'"
    ]


def _rate(requests: int, seconds: float) -> str:
    rate = requests / max(seconds, 1e-9)
    return f"{rate:,.0f} requests/s" if rate >= 100 else f"{rate:.3g} requests/s"


#: Words of a column name that say it holds requests per time or per window (``requests_per_minute``,
#: ``arrivalRate``, ``RPM``), where its name is none :func:`load_rate_series` reads; ``value`` is
#: a metric sample's (Prometheus' and Grafana's exports: ``timestamp,value``, ``Series,Time,Value``).
_RATE_WORDS = frozenset(
    ("qps", "rps", "rpm", "rph", "rate", "rates", "throughput", "requests", "reqs", "count",
     "counts", "arrivals", "value", "values")
)  # fmt: skip


def _looks_like_rate(name: object) -> bool:
    """A column whose name says it holds a rate or a count of requests, not one request's field.

    Its known names (``qps``, ``requests``, ...) or a name with a word of :data:`_RATE_WORDS`, or
    ``per`` followed by a time (``requests_per_minute``), or a Prometheus counter's ``_total``
    ending (``vllm:request_success_total``); never a token column.
    """
    names = {_normal(known) for known in (*_RATE_NAMES, *_COUNT_NAMES)}
    if _normal(name) in names:
        return True
    if _looks_like_tokens(name):
        return False
    found = [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", str(name))]
    times = ("", "sec", "second", "m", "min", "minute", "h", "hour", "day")  # "s" stripped
    per = any(a == "per" and b.rstrip("s") in times for a, b in itertools.pairwise(found))
    counter = str(name).lower().endswith("_total")  # Prometheus names its counters so
    return per or counter or bool(_RATE_WORDS.intersection(found))


def _warn_rate_columns(path: Path, header) -> list[str]:
    """A log without token columns but with a rate or count column is likely a rate series.

    Warned about on its own (:func:`load_traffic` told ``kind="requests"`` silences it), and
    returned as a note.
    """
    found = next((column for column in header if _looks_like_rate(column)), None)
    if found is None:
        return []
    note = (
        f"column {found!r} looks like a rate series' column (requests/s or requests per window), "
        "which load_trace does not read: each row was counted as one request; if the file is a "
        "rate series, load it with capnb.data.load_traffic or load_rate_series"
    )
    warnings.warn(f"{path.name}: {note}", TraceWarning, stacklevel=3)
    return [note]


def _json_kind(value: object) -> str | None:
    """The JSON type of a value as pyarrow infers a column from it (None: null, any column)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object"


def _diagnose_jsonl(path: Path) -> None:
    first: dict[str, tuple[str, int]] = {}  # field -> (its JSON type, the line it was first seen)
    with open(path, encoding="utf-8", errors="replace") as handle:  # a bad byte: a JSON error
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = parse_json(line, f"{path.name}, line {number}")
            except json.JSONDecodeError as err:
                not_one_document(path)
                raise ConfigError(
                    f"{path.name}, line {number}: not valid JSON ({err.msg})"
                ) from None
            if not isinstance(record, dict):
                raise ConfigError(f"{path.name}, line {number}: not a JSON object")
            not_a_query_response(record, f"{path}, line {number}")
            for field, value in record.items():
                kind = _json_kind(value)
                seen = first.setdefault(field, (kind, number)) if kind else (kind, number)
                if kind and seen[0] != kind:
                    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
                    raise ConfigError(
                        f"{path.name}, line {number}: field {field!r} holds a {kind} "
                        f"({shown}) where line {seen[1]} holds a {seen[0]}: "
                        "a JSON-lines column takes one type (write every row's "
                        f"{field!r} as a {seen[0]})"
                    )
    raise ConfigError(f"{path}: pyarrow could not read it as JSON lines (fields of mixed types?)")


#: The largest JSON file read whole to tell one document from JSON lines (bytes).
_DOCUMENT_BYTES = 64 * 2**20


def not_one_document(path: Path) -> None:
    """Refuse a JSON file that is one document over several lines, where JSON lines were read.

    A line of it is not JSON on its own (``{`` alone): said so, it was "line 1: not valid JSON"
    of a file that holds valid JSON. A Prometheus query response saved by ``curl | jq`` or a
    browser is one: named as such (:func:`not_a_query_response`).
    """
    if path.stat().st_size > _DOCUMENT_BYTES:
        return
    try:
        text = path.read_text(encoding="utf-8")
        first = next(line for line in text.splitlines() if line.strip())
        if _parses(first):  # a line of JSON lines that holds no object: the line's error stands
            return
        document = json.loads(text)
    except (ValueError, RecursionError, StopIteration):  # not one document either
        return
    if isinstance(document, dict):
        not_a_query_response(document, str(path))
    lines = text.rstrip("\n").count("\n") + 1
    what = (
        f"a JSON array of {words.count(len(document), 'item')} over {lines:,} lines"
        if isinstance(document, list)
        else f"one JSON document over {lines:,} lines"
    )
    raise ConfigError(
        f"{path}: {what}, not JSON lines: a request log in JSON holds one object per line, each "
        "request's own (write the file so, or as a CSV)"
    )


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def not_a_query_response(record: dict, where: str) -> None:
    """Refuse a Prometheus HTTP API response (``{"status": ..., "data": {"resultType": ...}}``).

    Read as a JSON-lines log it was "no time column" or "fields of mixed types?": its samples are
    ``[unix_seconds, "value"]`` pairs inside ``data.result[i].values``.
    """
    body = record.get("data")
    if not (isinstance(body, dict) and "resultType" in body and "status" in record):
        return
    result = body.get("result")
    series = len(result) if isinstance(result, list) else 0
    raise ConfigError(
        f"{where}: a Prometheus query response (resultType {body['resultType']!r}, "
        f"{series:,} series), not a request log or rate series: write the samples of one series "
        "(data.result[0].values, [Unix seconds, value] pairs) as a CSV with a header "
        "timestamp,qps (a rate(...[5m]) query's values, requests/s) or timestamp,requests (an "
        "increase(...[5m]) query's), and load it with time_unit='s'"
    )


def _read_parquet(path: Path, time_column, prompt_column, output_column):
    import pyarrow.parquet as pq

    header = parquet_names(path)
    columns = {
        "time": _pick_column(header, time_column, _TIME_NAMES, "time_column", path, True),
        "prompt": _pick_column(header, prompt_column, _PROMPT_NAMES, "prompt_column", path, False),
        "output": _pick_column(header, output_column, _OUTPUT_NAMES, "output_column", path, False),
    }
    table = pq.read_table(path, columns=[c for c in columns.values() if c])
    if table.num_rows == 0:
        raise ConfigError(f"{path}: holds no rows")
    return table, (lambda row: f"{path.name}, row {row + 1}"), columns, header


def _token_column(table, column: str, where) -> np.ndarray:
    """A token column as int64, or an error naming the first row that is not a whole count >= 0."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pat

    values = table.column(column)
    empty = values.is_null().to_numpy(zero_copy_only=False)
    if pat.is_string(values.type) or pat.is_large_string(values.type):
        text = pc.utf8_trim_whitespace(values.combine_chunks())
        ok = pc.fill_null(pc.match_substring_regex(text, r"^[+-]?\d+(\.0*)?$"), False)
        ok = ok.to_numpy(zero_copy_only=False) & ~empty
        if not ok.all():
            row = int(np.flatnonzero(~ok)[0])
            if empty[row]:  # (not "holds None")
                raise ConfigError(f"{where(row)}: column {column!r} is empty (no token count)")
            shown = text[row].as_py()
            raise ConfigError(
                f"{where(row)}: column {column!r} holds {shown!r}, not a whole number of tokens"
            )
        values = text.cast(pa.float64())
    if values.null_count:
        row = int(np.flatnonzero(empty)[0])
        raise ConfigError(f"{where(row)}: column {column!r} is empty (no token count)")
    numbers = values.to_numpy(zero_copy_only=False)
    if numbers.dtype.kind == "f":
        bad = ~np.isfinite(numbers) | (numbers != np.round(numbers))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ConfigError(
                f"{where(row)}: column {column!r} holds {float(numbers[row])!r}, not a whole number of tokens"
            )
    elif numbers.dtype.kind not in "iu":
        raise ConfigError(f"{where(0)}: column {column!r} has type {values.type}, not token counts")
    # beyond 2**53 a float is not an exact count, and past 2**63 - 1 an int64 wraps negative
    big = numbers > MOST_COUNT
    if big.any():
        row = int(np.flatnonzero(big)[0])
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {int(numbers[row]):,} tokens, over the "
            f"{MOST_COUNT:,} (2**53) capnb counts for one request"
        )
    if (numbers < 0).any():  # before the cast: a float below -2**63 has no int64
        row = int(np.flatnonzero(numbers < 0)[0])
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {int(numbers[row])}, a negative count"
        )
    return numbers.astype(np.int64, copy=False)


def _request_dataset(path, fmt, ns, tokens, clock, where, used, header, decided, doubts):
    """The Dataset of a request log, sorted by time.

    ``decided`` and ``doubts`` are the readers' notes (``doubts`` are also warned about), put
    ahead of the repairs made here.
    """
    import xarray as xr

    notes, warned = [*decided, *doubts], list(doubts)
    order = None
    steps_back = np.flatnonzero(ns[1:] < ns[:-1])
    if steps_back.size:
        order = np.argsort(ns, kind="stable")
        back_s = float((ns[steps_back] - ns[steps_back + 1]).max()) / 1e9
        one = steps_back.size == 1
        said = (
            f"{steps_back.size:,} {'row was' if one else 'rows were'} earlier than the row "
            f"before {'it' if one else 'them'} (first: "
            f"{where(int(steps_back[0]) + 1)}); the requests were sorted by time (the largest "
            f"step back: {words.duration(back_s)})"
        )
        if clock.timezone == "unknown" and back_s <= 3600:  # a clock set back by an hour
            said += (
                "; if these are local times over a daylight-saving change, the hour the clocks "
                "went back is counted twice: name their zone with timezone="
            )
        warned.append(said)
        ns = ns[order]
        tokens = {k: v[order] for k, v in tokens.items()}
    same = int(np.count_nonzero(ns[1:] == ns[:-1]))
    if same:
        warned.append(
            f"{words.count(same, 'request')} share{'s' if same == 1 else ''} "
            f"{'its' if same == 1 else 'their'} timestamp with the one before (kept: simultaneous "
            "arrivals at the log's time resolution)"
        )
    # columns that look like token counts, where a token variable was not found
    unread = [
        str(c)
        for c in header
        if c not in used.values() and _looks_like_tokens(c) and c != used["time"]
    ]
    missing = [name for name, column in used.items() if column is None]
    if missing and unread:
        arguments = " / ".join(f"{n.split('_')[0]}_column=" for n in missing)
        warned.append(
            f"no {' or '.join(missing)}: column{'s' if len(unread) > 1 else ''} "
            f"{', '.join(map(repr, unread))} look{'' if len(unread) > 1 else 's'} like token "
            f"counts but {'were' if len(unread) > 1 else 'was'} not read (not a known name); "
            f"name the column with {arguments}"
        )
    notes += warned[len(doubts) :]
    if warned:
        warnings.warn(f"{path.name}: " + "; ".join(warned), TraceWarning, stacklevel=3)
    data = {
        "time": (
            "request",
            ns.view("datetime64[ns]"),
            {"long_name": "arrival time on the trace's own clock"},
        )
    }
    for name, values in tokens.items():
        data[name] = ("request", values, glossary.attrs(name))

    def said(name, column):
        if column:
            return f"{name} from {column!r}"
        if unread:
            return (
                f"no {name} ({', '.join(map(repr, unread))} look{'' if len(unread) > 1 else 's'} "
                f"like token counts but {'are' if len(unread) > 1 else 'is'} not a known name "
                f"for it: name it with {name.split('_')[0]}_column=)"
            )
        return f"no {name} (the file has no such column)"

    attrs = {
        "title": f"request log {path.name}",
        "source": str(path),
        "format": fmt,
        **clock.attrs(),
        "notes": "; ".join(notes) or "none",
        "columns": ", ".join(said(name, column) for name, column in used.items()),
    }
    return xr.Dataset(data, attrs=attrs)

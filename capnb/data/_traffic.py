"""Traffic of any form a user has: a bundled name, a request log or a rate series, told apart.

A request log has one row per request (a time, often token counts); a rate series has one row per
window (a time and requests/s, or requests). The plan and the worksheets take either; this module
reads which one a file is from its columns, or takes the user's word (``kind=``), and says so when
both readings are possible.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import words
from ..errors import ConfigError, InputError
from ._files import parse_json, user_path
from ._rates import load_rate_series
from ._traces import (
    _BUNDLED_SERIES,
    _BUNDLED_TRACES,
    _COUNT_NAMES,
    _OUTPUT_NAMES,
    _PROMPT_NAMES,
    _RATE_NAMES,
    _TIME_NAMES,
    _csv_header,
    _find_column,
    _first_values,
    _is_number,
    _looks_like_rate,
    load_trace,
    not_a_query_response,
    not_one_document,
    parquet_names,
)

__all__ = ["TRAFFIC_KINDS", "load_traffic", "traffic_columns"]

#: What a traffic file holds: a request log, a rate series, or "auto" (read from its columns).
TRAFFIC_KINDS = ("auto", "requests", "rates")

_WINDOW_NAMES = ("window_start", "window_start_s", *_TIME_NAMES)


def _columns(path: Path) -> list[str]:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return parquet_names(path)
    if suffix in (".jsonl", ".json", ".ndjson"):
        with path.open(encoding="utf-8", errors="replace") as handle:  # a bad byte: a JSON error
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        record = parse_json(line, f"{path.name}, line {number}")
                    except json.JSONDecodeError as err:
                        not_one_document(path)
                        raise ConfigError(
                            f"{path}, line {number}: not valid JSON ({err.msg})"
                        ) from None
                    if not isinstance(record, dict):
                        return []
                    not_a_query_response(record, f"{path}, line {number}")
                    return list(_flat(record))
        raise ConfigError(f"{path}: the file is empty")
    return _csv_header(path)


def _flat(record: dict, prefix: str = "") -> dict:
    """A JSON record's fields with its objects' fields named as pyarrow flattens them (usage.x)."""
    flat: dict = {}
    for key, value in record.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def traffic_columns(path: str | os.PathLike, **given: str | None) -> dict[str, str | None]:
    """The columns a traffic file's kind is read from: time, rate, count, prompt and output tokens.

    Found by the names :func:`load_trace` reads (``capnb.data._traces.COLUMN_NAMES``, compared
    exactly, then without case, spaces, ``_``, ``-`` and ``.``) and a rate series' (``qps``,
    ``requests``, ...); ``given`` (``time_column=``, ``rate_column=``, ...) names a column, which
    is then not found by name for another one (a ``time_column="arrival_s"`` is no count of
    ``arrivals``).
    """
    path = Path(path)
    header = _columns(path)
    claimed = {named for named in given.values() if named is not None}
    unclaimed = [column for column in header if column not in claimed]
    found = {}
    for key, names in (
        ("time", _WINDOW_NAMES),
        ("rate", _RATE_NAMES),
        ("count", _COUNT_NAMES),
        ("prompt", _PROMPT_NAMES),
        ("output", _OUTPUT_NAMES),
    ):
        named = given.get(f"{key}_column")
        if named is not None and named not in header:
            raise ConfigError(f"{path}: no column {named!r} ({key}_column); columns: {header}")
        found[key] = named or _find_column(unclaimed, names, f"{key}_column", path)
    return found


#: The columns only one kind of traffic file has, by the kind (a reader's options).
_COLUMN_OPTIONS = {
    "requests": ("prompt_column", "output_column"),
    "rates": ("rate_column", "count_column", "running_total"),
}


def _no_time_column(path: Path, value: str, columns: dict[str, str | None]) -> ConfigError:
    """The error for a file with a rate or count column and no time column of a known name."""
    others = [c for c in _columns(path) if c not in (value, *columns.values())]
    which = (
        f"if {others[0]!r} holds each window's start, name it with time_column={others[0]!r}"
        if len(others) == 1
        else f"name the column of window starts ({', '.join(map(repr, others))}) with time_column="
        if others
        else f"if it holds each request's time (or each window's start), name it with "
        f"time_column={value!r}"
    )
    return ConfigError(
        f"{path}: no time column among {list(_WINDOW_NAMES)}, and column {value!r} reads as a "
        f"rate series' values by its name; {which} (a plan config's [traffic] time_column, capnb "
        "plan --time-column)"
    )


def load_traffic(
    name_or_path: str | os.PathLike,
    *,
    kind: str = "auto",
    start: str | None = None,
    **options: object,
):
    """Load traffic as a request log or a rate series, whichever the file is.

    Parameters
    ----------
    name_or_path
        A bundled trace or rate series (:func:`list_traces`, :func:`list_rate_series`) or a file.
    kind
        ``"auto"`` (read from the columns: a rate column such as ``qps`` and no token columns is a
        rate series; token columns and no rate column, or a time column alone, a request log),
        ``"requests"`` or ``"rates"``.
    start
        For times counted from an unknown start: the date and time of time 0 (see
        :func:`load_trace`).
    **options
        Passed to :func:`load_trace` or :func:`load_rate_series`. The columns they name
        (``time_column``, ``prompt_column``, ``output_column``, ``rate_column``,
        ``count_column``) are the ones the kind is read from; the others are found by the names
        both readers use (:func:`traffic_columns`).

    Returns
    -------
    xarray.Dataset
        A request log (dim ``request``) or a rate series (dim ``time``); ``attrs["traffic_kind"]``
        says which, and how it was decided.

    Raises
    ------
    ConfigError
        Both readings are possible (a rate or count column beside token columns), or neither:
        the message names the columns and asks for ``kind``; a column whose name reads as a rate
        or a count in no name capnb reads (``requests_per_minute``, ``arrivalRate``) in a file
        without token columns, under ``"auto"`` (each row would count as one request); or
        ``kind`` contradicts the columns (``"requests"`` for a file whose only value column is a
        rate or a count, ``"rates"`` for one without either); a bundled trace is given the other
        kind's column (``prompt_column`` for a rate series); both rate_column and count_column.
    """
    if kind not in TRAFFIC_KINDS:
        raise InputError(f"kind must be one of {list(TRAFFIC_KINDS)}, got {kind!r}")
    text = str(name_or_path) if isinstance(name_or_path, str | os.PathLike) else None
    if text is None:
        raise InputError(
            f"trace must be a bundled name or a path, got {type(name_or_path).__name__}"
        )
    _one_value_column(options)
    if text in _BUNDLED_SERIES or text in _BUNDLED_TRACES:
        return _load_bundled(text, kind, start, options)
    path = user_path(text, "trace")
    if path.is_dir():
        raise ConfigError(f"{path}: a folder, not a trace file")
    if not path.is_file():
        known = ", ".join([*_BUNDLED_TRACES, *_BUNDLED_SERIES])
        raise ConfigError(
            f"trace={text!r} is neither a bundled trace or rate series ({known}) nor a file"
            + (f" (no file at {path.resolve()})" if path.suffix or os.sep in text else "")
        )
    named = ("time_column", "rate_column", "count_column", "prompt_column", "output_column")
    columns = traffic_columns(path, **{k: options.get(k) for k in named})
    if options.get("rate_column") is not None or options.get("count_column") is not None:
        # the value column the caller named, not another the file also has
        columns["count" if options.get("rate_column") is not None else "rate"] = None
    value = columns["rate"] or columns["count"]
    tokens = columns["prompt"] or columns["output"]
    how, others = "as stated (trace_kind)", []
    if kind == "auto":
        if value and not columns["time"]:  # no time: the "rate" may be the times ('arrival_s')
            raise _no_time_column(path, value, columns)
        if value and tokens:
            raise ConfigError(
                f"{path}: column {value!r} reads as a rate series and {tokens!r} as a request log; "
                "say which with trace_kind = 'rates' or 'requests'"
            )
        if value and columns["time"]:
            kind, how = "rates", f"read from its columns ({columns['time']}, {value})"
        elif columns["time"]:
            header = _columns(path)
            rate_like = [c for c in header if c != columns["time"] and _looks_like_rate(c)]
            if rate_like:
                raise ConfigError(
                    f"{path}: column {rate_like[0]!r} looks like a rate series' values (requests "
                    "per time or per window), but capnb reads a rate series from a requests/s "
                    f"column ({', '.join(_RATE_NAMES)}) or a requests-per-window column "
                    f"({', '.join(_COUNT_NAMES)}), and there is no token column to make the file "
                    "a request log: read as one, each row would count as one request. If it is a "
                    f"rate series, name the column with rate_column={rate_like[0]!r} (requests/s) "
                    f"or count_column={rate_like[0]!r} (requests per window) (a plan config's "
                    "[traffic] rate_column or count_column, capnb plan --rate-column or "
                    "--count-column), or write its rates "
                    "in requests/s in a column named 'qps' (or the requests of each window in one "
                    "named 'requests'); if each row is one request, say so with trace_kind = "
                    "'requests'"
                )
            kind, how = "requests", f"read from its columns ({columns['time']}: one row a request)"
            others = [] if tokens else [c for c in header if c != columns["time"]]
        else:
            raise ConfigError(
                f"{path}: no time column among {list(_WINDOW_NAMES)}; name it with time_column= "
                "(a plan config's [traffic] time_column, capnb plan --time-column)"
            )
    if kind == "requests" and value and not tokens:
        raise ConfigError(
            f"{path}: trace_kind = 'requests', but column {value!r} holds a rate series' values "
            "(requests/s or requests per window) and no column holds token counts: each row "
            "would count as one request; use trace_kind = 'rates' (or 'auto'), or remove the "
            "column if each row really is one request"
        )
    extra = {"start": start} if start else {}
    if kind == "rates":
        if not value:  # only trace_kind = 'rates' gets here: "auto" reads such a file as requests
            raise _no_rate_column(path, tokens)
        rest = {k: v for k, v in options.items() if k not in named}
        loaded = load_rate_series(
            path,
            time_column=columns["time"],
            **({"rate_column": columns["rate"]} if columns["rate"] else {}),
            **({"count_column": columns["count"]} if not columns["rate"] else {}),
            **extra,
            **rest,
        )
    else:
        if options.get("running_total") is not None:
            raise ConfigError(
                f"{path}: running_total = {options['running_total']!r} is a rate series' setting, "
                f"and the file is a request log ({how}): leave it out, or say trace_kind = "
                "'rates' if the file is a series"
            )
        loaded = load_trace(path, **extra, **options)
        if how.startswith("read from") and others:
            _not_windows(loaded, path, others)
    loaded.attrs["traffic_kind"] = f"{_words(kind)}, {how}"
    return loaded


def _load_bundled(text: str, kind: str, start: str | None, options: dict):
    """A bundled trace or rate series (:func:`load_traffic`'s checks of its kind and options)."""
    bundled = "rates" if text in _BUNDLED_SERIES else "requests"
    if kind not in ("auto", bundled):
        raise ConfigError(f"{text!r} is a bundled {_words(bundled)}, not a {_words(kind)}")
    other = "requests" if bundled == "rates" else "rates"
    whose = _words(other) + ("'" if other == "rates" else "'s")  # a rate series' column
    for name in _COLUMN_OPTIONS[other]:  # the other reader's columns: not this file's
        if options.get(name) is not None:
            what = "setting" if name == "running_total" else "column"
            raise ConfigError(
                f"{name} = {options[name]!r} names a {whose} {what}, and {text!r} "
                f"is a bundled {_words(bundled)}: leave it out, or give a {_words(other)} file"
            )
    loaded = (load_rate_series if bundled == "rates" else load_trace)(
        text, **({"start": start} if start else {}), **options
    )
    loaded.attrs["traffic_kind"] = f"{bundled} (bundled {text})"
    return loaded


def _no_rate_column(path: Path, tokens: str | None) -> ConfigError:
    """The error for trace_kind = 'rates' on a file with no rate or count column."""
    log = (
        f"; its columns read as a request log ({tokens!r}): use trace_kind = 'requests' (or 'auto')"
        if tokens
        else ""
    )
    return ConfigError(
        f"{path}: trace_kind = 'rates', but no column holds a rate series' values: it needs a "
        f"requests/s column ({', '.join(_RATE_NAMES)}) or a requests-per-window column "
        f"({', '.join(_COUNT_NAMES)}), or one named with rate_column= or count_column={log}"
    )


def _one_value_column(options: dict) -> None:
    """A rate series' values are one column: both named read the rate and dropped the count."""
    rate, count = options.get("rate_column"), options.get("count_column")
    if rate is not None and count is not None:
        raise ConfigError(
            f"rate_column = {rate!r} and count_column = {count!r}: a rate series' values are one "
            "column, requests/s (rate_column) or requests per window (count_column); give one "
            "(capnb plan --rate-column or --count-column)"
        )


#: A log read without token columns whose rows are at least this many, each the same step after
#: the one before (or a whole multiple of it: windows missing), is a rate series' windows:
#: requests arrive unevenly.
_GRID_ROWS = 12
#: The share of a log's steps that must be its least step for its rows to be windows.
_GRID_SHARE = 0.9


def _not_windows(loaded, path: Path, others: list[str]) -> None:
    """Refuse a rate series of unknown column names read as a request log, one request a row.

    Grafana's 'Series joined by time' CSV (``Time,pod-a,pod-b``) has no column name a rate reader
    knows: read as a log, its 864 five-minute rows of 10 requests/s were 864 requests. Told by
    rows one step apart (at least :data:`_GRID_SHARE` of them; the others a whole number of steps:
    a scrape that missed a window) and a column whose first value is written as a decimal
    (``1.0``), in a CSV file.
    """
    import numpy as np

    if path.suffix.lower() in (".parquet", ".pq", ".jsonl", ".json", ".ndjson"):
        return
    first = _first_values(path)
    # a request's own fields (a status, an id, token counts of other names) are whole numbers
    others = [c for c in others if _decimal(first.get(c, ""))]
    times = loaded.time.values.astype("datetime64[ns]").view(np.int64)
    if not others or times.size < _GRID_ROWS:
        return
    steps = np.diff(times)
    step = int(steps.min())
    if step <= 0 or (steps % step).any() or (steps == step).mean() < _GRID_SHARE:
        return
    missing = int((steps // step - 1).sum())
    gaps = (
        f" (or a whole number of steps: {words.count(missing, 'window')} missing)"
        if missing
        else ""
    )
    shown = ", ".join(map(repr, others[:4])) + (", ..." if len(others) > 4 else "")
    raise ConfigError(
        f"{path}: its {times.size:,} rows are each {step / 1e9:g} s after the one before{gaps}, "
        "as a rate series' windows are, not requests' arrivals, and no column holds token counts: "
        f"read as a request log, each row would count as one request. If a column ({shown}) "
        "holds each window's requests/s or requests, name it with rate_column= or count_column= "
        "([traffic] rate_column or count_column, capnb plan --rate-column or --count-column); if "
        "its columns are several series (Grafana's 'Series joined by time'), sum them into one "
        "column first; if each row really is one request, say so with trace_kind = 'requests'"
    )


def _decimal(text: str) -> bool:
    """A number written with a decimal point or an exponent (``1.0``, ``2e3``), not a whole one."""
    return _is_number(text) and not text.lstrip("+-").isdigit()


def _words(kind: str) -> str:
    return {"rates": "rate series", "requests": "request log"}.get(kind, kind)

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

from ..errors import ConfigError, InputError
from ._rates import load_rate_series
from ._traces import (
    _BUNDLED_SERIES,
    _BUNDLED_TRACES,
    _OUTPUT_NAMES,
    _PROMPT_NAMES,
    _TIME_NAMES,
    _csv_header,
    load_trace,
)

__all__ = ["TRAFFIC_KINDS", "load_traffic", "traffic_columns"]

TRAFFIC_KINDS = ("auto", "requests", "rates")

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
_COUNT_NAMES = ("requests", "count", "request_count", "num_requests", "arrivals")
_WINDOW_NAMES = ("window_start", "window_start_s", *_TIME_NAMES)


def _columns(path: Path) -> list[str]:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            return list(pq.read_schema(path).names)
        except Exception as err:  # pyarrow raises several kinds for a file that is not Parquet
            raise ConfigError(f"{path}: not a readable Parquet file ({err})") from None
    if suffix in (".jsonl", ".json", ".ndjson"):
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise ConfigError(f"{path}, line 1: not valid JSON ({err.msg})") from None
                    return list(record) if isinstance(record, dict) else []
        raise ConfigError(f"{path}: the file is empty")
    return _csv_header(path)


def _first(names, header) -> str | None:
    lowered = {h.lower(): h for h in header}
    return next((lowered[n.lower()] for n in names if n.lower() in lowered), None)


def traffic_columns(path: str | os.PathLike) -> dict[str, str | None]:
    """The columns a traffic file's kind is read from: time, rate, count, prompt and output tokens."""
    header = _columns(Path(path))
    return {
        "time": _first(_WINDOW_NAMES, header),
        "rate": _first(_RATE_NAMES, header),
        "count": _first(_COUNT_NAMES, header),
        "prompt": _first(_PROMPT_NAMES, header),
        "output": _first(_OUTPUT_NAMES, header),
    }


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
        Passed to :func:`load_trace` or :func:`load_rate_series`.

    Returns
    -------
    xarray.Dataset
        A request log (dim ``request``) or a rate series (dim ``time``); ``attrs["traffic_kind"]``
        says which, and how it was decided.

    Raises
    ------
    ConfigError
        Both readings are possible (a rate or count column beside token columns), or neither:
        the message names the columns and asks for ``kind``.
    """
    if kind not in TRAFFIC_KINDS:
        raise InputError(f"kind must be one of {list(TRAFFIC_KINDS)}, got {kind!r}")
    text = str(name_or_path) if isinstance(name_or_path, str | os.PathLike) else None
    if text is None:
        raise InputError(
            f"trace must be a bundled name or a path, got {type(name_or_path).__name__}"
        )
    if text in _BUNDLED_SERIES or text in _BUNDLED_TRACES:
        bundled = "rates" if text in _BUNDLED_SERIES else "requests"
        if kind not in ("auto", bundled):
            raise ConfigError(f"{text!r} is a bundled {_words(bundled)}, not a {_words(kind)}")
        loaded = (load_rate_series if bundled == "rates" else load_trace)(
            text, **({"start": start} if start else {}), **options
        )
        loaded.attrs["traffic_kind"] = f"{bundled} (bundled {text})"
        return loaded
    path = Path(text)
    if not path.is_file():
        known = ", ".join([*_BUNDLED_TRACES, *_BUNDLED_SERIES])
        raise ConfigError(
            f"trace={text!r} is neither a bundled trace or rate series ({known}) nor a file"
            + (f" (no file at {path.resolve()})" if path.suffix or os.sep in text else "")
        )
    columns = traffic_columns(path)
    value = columns["rate"] or columns["count"]
    tokens = columns["prompt"] or columns["output"]
    how = "as stated (trace_kind)"
    if kind == "auto":
        if value and tokens:
            raise ConfigError(
                f"{path}: column {value!r} reads as a rate series and {tokens!r} as a request log; "
                "say which with trace_kind = 'rates' or 'requests'"
            )
        if value and columns["time"]:
            kind, how = "rates", f"read from its columns ({columns['time']}, {value})"
        elif columns["time"]:
            kind, how = "requests", f"read from its columns ({columns['time']}: one row a request)"
        else:
            raise ConfigError(
                f"{path}: no time column among {list(_WINDOW_NAMES)}; name the file's columns "
                "or load it with capnb.data.load_trace / load_rate_series"
            )
    extra = {"start": start} if start else {}
    if kind == "rates":
        if not value:
            raise ConfigError(
                f"{path}: a rate series needs a requests/s column ({', '.join(_RATE_NAMES)}) or a "
                f"requests-per-window column ({', '.join(_COUNT_NAMES)})"
            )
        loaded = load_rate_series(
            path,
            time_column=columns["time"],
            **({"rate_column": columns["rate"]} if columns["rate"] else {}),
            **({"count_column": columns["count"]} if not columns["rate"] else {}),
            **extra,
            **options,
        )
    else:
        loaded = load_trace(path, **extra, **options)
    loaded.attrs["traffic_kind"] = f"{_words(kind)}, {how}"
    return loaded


def _words(kind: str) -> str:
    return {"rates": "rate series", "requests": "request log"}.get(kind, kind)

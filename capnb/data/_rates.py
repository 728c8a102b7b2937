"""Rate series: pre-aggregated request rates or counts per fixed window (e.g. ServeGen's 10 minutes)."""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import numpy as np

from .. import glossary, words
from ..errors import ConfigError, InputError, UnknownNameError
from . import _times
from ._catalog import dataset_path
from ._files import user_path
from ._times import IDLE_MEDIAN_COUNT
from ._traces import (
    _BUNDLED_SERIES,
    _BUNDLED_TRACES,
    TraceWarning,
    _csv_header,
    _csv_where,
    _first_values,
    _is_number,
    _read_csv_table,
    list_rate_series,
    parquet_names,
)

__all__ = ["load_rate_series"]


# -- rate series -------------------------------------------------------------------------------
def load_rate_series(
    name_or_path: str | os.PathLike,
    *,
    time_column: str | None = None,
    rate_column: str | None = None,
    count_column: str | None = None,
    interval: str | float | None = None,
    time_unit: str | None = None,
    timezone: str | None = None,
    start: str | None = None,
    zero_is_missing: bool | None = None,
    running_total: bool | None = None,
):
    """Load a pre-aggregated series: a request rate (or count) per fixed window.

    Parameters
    ----------
    name_or_path
        A bundled series (:func:`list_rate_series`: ``"servegen-m-large"``, ``"servegen-m-small"``:
        14 days of 10-minute windows) or the path of a CSV or Parquet file.
    time_column
        Window start: datetimes, or numbers with ``time_unit`` counted from ``start``.
    rate_column, count_column
        Exactly one: requests/s per window, or requests per window.
    interval
        Window length (``"10min"`` or seconds). Default: the most common step between windows.
    time_unit, timezone, start
        As in :func:`load_trace`. ServeGen's time 0 is 00:00 of its day 0, whose date, weekday and
        time zone are not published: they load with a placeholder date and ``weekday_known="no"``.
    zero_is_missing
        Treat windows with a rate of exactly 0 as missing (NaN), as in production series where a
        zero is a hole in the data, not an idle service (ServeGen m-small has 37 such windows), or
        keep them as idle windows (False). None (default): decided window by window. A zero is
        missing data when an empty window would be improbable at the traffic of the windows at
        the same time of day on the other days (and, over two weeks or more, of the week on the
        other weeks): Poisson probability below 0.1 %, about :data:`IDLE_MEDIAN_COUNT` requests
        expected; otherwise it is idle time and kept, so a service idle every night keeps its
        nights. A series under two days, whose hours are not known or whose windows do not
        divide a day has no time of day to compare with: there the median count of its non-empty
        windows decides (at least :data:`IDLE_MEDIAN_COUNT`: every zero is missing). The notes
        say which, and why.
    running_total
        Whether the value column is a running total (a Prometheus ``*_total`` counter). None
        (default): a column that rises at nearly every step and almost never falls is refused,
        as a running total read as each window's value plans on the requests since the exporter
        started. False: the column is each window's value all the same (a young service ramping
        up rises at every step). True: each window's requests are the increase to the next row
        (a fall is a restart from 0: the later row's own value), over the window from one row to
        the next (the last row starts no window); with ``count_column`` only.

    Returns
    -------
    xarray.Dataset
        Over ``time`` (window starts, a regular grid; absent windows are inserted as missing):
        ``qps`` (requests/s) and ``requests`` (per window), NaN where missing. Attrs:
        ``interval_s``, ``timezone``, ``weekday_known``, ``missing_windows``, ``notes``.

    Examples
    --------
    >>> series = load_rate_series("servegen-m-small")
    >>> series.sizes["time"], int(series.qps.isnull().sum())
    (2016, 37)
    """
    text = str(name_or_path) if isinstance(name_or_path, str | os.PathLike) else None
    bundled = text in _BUNDLED_SERIES
    if bundled:
        path = dataset_path("traces", _BUNDLED_SERIES[text])
        time_column = time_column or "window_start_s"
        if count_column is None:  # the series' own requests/s column, unless a count was named
            rate_column = rate_column or "total_rate_rps"
        time_unit, interval = time_unit or "s", interval or 600
    else:
        path = _series_path(name_or_path, text)
    _check_columns(path, time_column, rate_column, count_column)
    timezone = _times.resolve_timezone(timezone)
    value_column = rate_column or count_column
    _check_running_total(running_total, rate_column)
    table, where = _read_series_table(path, time_column, value_column)
    # a bundled series counts from 00:00 of its day 0 (ServeGen's time 0)
    ns, clock = _window_starts(table, path, where, time_column, time_unit, timezone, start, bundled)
    values = _number_column(table, value_column, where)
    notes = []
    ns, values, rows = _in_time_order(ns, values, where, value_column, notes, clock)
    if running_total is None:
        _not_a_counter(values, rows, where, value_column)
    elif running_total:
        ns, values, rows = _increases(ns, values, rows, where, value_column)
        notes.append(f"column {value_column!r} is a running total (running_total=True): each "
                     "window's requests are its increase to the next row")  # fmt: skip
    else:
        notes.append(f"column {value_column!r} read as each window's value (running_total=False)")
    step, grid, full = _on_grid(ns, values, rows, interval, where)
    seconds = step / 1e9
    qps = full if rate_column else full / seconds
    absent = grid.size - ns.size
    qps = _missing_zeros(qps, seconds, step, clock, zero_is_missing, notes)
    if not (qps > 0).any():  # NaN compares false: missing windows are no traffic either
        raise ConfigError(
            f"{path}: every window's {value_column!r} is 0 or missing: a series without traffic "
            "plans nothing (is it the right column, or the right file?)"
        )
    if absent:
        notes.append(f"{absent:,} absent windows are inserted as missing")
    repairs = [n for n in notes if "sorted" in n or "merged" in n]
    if repairs:  # missing windows are data, stated in the attrs; repairs are worth a warning
        warnings.warn(f"{path.name}: " + "; ".join(repairs), TraceWarning, stacklevel=2)
    return _rate_dataset(qps, seconds, grid, path, clock, notes)


def _check_columns(path: Path, time_column, rate_column, count_column) -> None:
    """The columns named: a time column and exactly one of a rate or a count column."""
    if (rate_column is None) == (count_column is None):
        raise InputError(
            f"{path}: give exactly one of rate_column= (requests/s) or count_column= (requests) "
            "(capnb.data.load_traffic finds the columns itself in a time,qps or time,requests file)"
        )
    if time_column is None:
        raise InputError(
            f"{path}: name the column of window start times with time_column= "
            "(capnb.data.load_traffic finds it itself in a time,qps or time,requests file)"
        )


def _window_starts(table, path, where, time_column, time_unit, timezone, start, bundled):
    """Each window's start (ns since the epoch on the series' clock) and the clock.

    Numbers count ``time_unit`` from ``start`` (from 00:00 of day 0 for a bundled series, whose
    date is not known); datetimes are read as they are.
    """
    import pyarrow.types as pat

    relative = start is not None or bundled
    if time_column is None or time_column not in table.column_names:
        raise ConfigError(
            f"{path}: no column {time_column!r} (time_column); columns: {table.column_names}"
        )
    kind = table.column(time_column).type
    if not (pat.is_integer(kind) or pat.is_floating(kind)):
        relative = False
    return _times.table_times(
        table, time_column, where, time_unit, timezone, relative, start, bundled
    )


def _in_time_order(ns, values, where, column: str, notes: list[str], clock):
    """The windows sorted by start and repeats of the same value merged (each noted).

    Returns the starts, values and each window's row in the file (its position before sorting).
    """
    order = np.argsort(ns, kind="stable")
    if (np.diff(ns) < 0).any():
        first = int(np.flatnonzero(np.diff(ns) < 0)[0]) + 1
        notes.append(f"windows were out of time order (first: {where(first)}); sorted")
    ns, values, rows = ns[order], values[order], order
    repeated = ns[1:][ns[1:] == ns[:-1]]
    ns, values, rows, merged = _merge_duplicates(ns, values, rows, where, column)
    if merged:
        note = ("1 repeated window with the same value was merged" if merged == 1 else
                f"{merged:,} repeated windows with the same value were merged")  # fmt: skip
        naive = clock.timezone == "unknown" and not clock.origin  # local dates, zone not named
        notes.append(note + (_clock_change_hint(repeated) if naive else ""))
    return ns, values, rows


def _clock_change_hint(repeated: np.ndarray) -> str:
    """Words for merged windows of a series on local times with no zone (naive, no timezone=).

    Repeats within one hour between 00:00 and 03:59 of one day are where an autumn
    daylight-saving change repeats an hour (01:00 in the US and the UK, 02:00 in most of Europe,
    Australia): there the merge drops an hour of traffic.
    """
    import pandas as pd

    times = pd.DatetimeIndex(repeated.view("datetime64[ns]"))
    zone = (
        "name the zone of the file's local times with timezone= (a plan's [traffic] timezone, "
        "--timezone) to keep both"
    )
    one_hour = times.max() - times.min() < pd.Timedelta(hours=1)
    if one_hour and times.normalize().nunique() == 1 and (times.hour <= 3).all():
        first, last = times.min(), times.max()
        return (
            f": they are {first:%Y-%m-%d %H:%M} to {last:%H:%M}, the night hour a daylight-saving "
            "change repeats when the clocks go back; if the times are local clock times, the "
            f"merge dropped that hour's traffic: {zone}"
        )
    return f"; if they are local clock times a daylight-saving change repeated, {zone}"


#: A column that, over at least :data:`_COUNTER_ROWS` rows, rises at this share of the steps
#: where it changes (and at half its steps or more) is a running total: traffic with a time of
#: day falls about as often as it rises. (A counter is flat where no request came: a service idle
#: at night.)
_COUNTER_RISES = 0.9
_COUNTER_ROWS = 12


def _check_running_total(running_total, rate_column) -> None:
    """``running_total`` is None, True or False; True reads requests, so a count column."""
    if running_total is not None and not isinstance(running_total, bool | np.bool_):
        raise InputError(
            f"running_total must be true, false or None (decided from the column), got "
            f"{running_total!r}"
        )
    if running_total and rate_column is not None:
        raise ConfigError(
            f"running_total = true with rate_column = {rate_column!r}: a running total counts "
            "requests; name its column with count_column (each window's requests are its "
            "increase), or say running_total = false if the column is each window's requests/s"
        )


def _increases(ns, values, rows, where, column: str):
    """Each window's requests from a running total, the window starting at the earlier row.

    The increase to the next row; where the total falls, the counter restarted from 0, and the
    later row's own value is the increase.
    """
    if values.size < 2:
        raise ConfigError(
            f"{where(int(rows[0]))}: column {column!r} is a running total (running_total = true) "
            "of one row: the increase over a window needs two rows or more"
        )
    steps = np.diff(values)
    return ns[:-1], np.where(steps >= 0, steps, values[1:]), rows[:-1]


def _not_a_counter(values, rows, where, column: str) -> None:
    """Refuse a running total (a Prometheus ``*_total`` counter) read as each window's value.

    A counter read as requests per window (or requests/s) plans on the requests since the
    exporter started: three days at 10 requests/s loaded as a mean of 4,321 requests/s. A
    counter rises wherever requests came, stays flat where none did, and falls only where it
    restarts from 0.
    """
    steps = np.diff(values)
    rises, falls = int((steps > 0).sum()), int((steps < 0).sum())
    if (
        values.size < _COUNTER_ROWS
        or rises < _COUNTER_RISES * (rises + falls)
        or rises < 0.5 * steps.size
        or falls > 0.01 * steps.size
    ):
        return
    fell = (
        "never falls"
        if not falls
        else f"falls {'once' if falls == 1 else f'{falls:,} times'} (a restart)"
    )
    raise ConfigError(
        f"{where(int(rows[0]))} to row {int(rows[-1]) + 1:,}: column {column!r} "
        f"rises at {rises:,} of its {steps.size:,} steps ({values[0]:,.0f} to {values[-1]:,.0f}) "
        f"and {fell}: a cumulative counter (requests since the exporter started, as a Prometheus "
        "*_total counter is), not each window's requests or requests/s; export each window's "
        "increase instead (PromQL increase(x[5m]) for requests per window, rate(x[5m]) for "
        "requests/s, or the difference of consecutive rows), or load it with "
        "running_total = true (a plan config's [traffic] running_total, capnb plan "
        "--running-total yes) and count_column; if the column really is each window's value (a "
        "service ramping up), say running_total = false (--running-total no)"
    )


def _on_grid(ns, values, rows, interval, where):
    """The step (ns), the regular grid of window starts, and the values on it (NaN: absent)."""
    from ._series import interval_ns  # one parser of durations (it brings xarray: load lazily)

    step = _series_step(ns, interval, where, rows, interval_ns)
    grid = np.arange(ns[0], ns[-1] + step, step, dtype=np.int64)
    position = (ns - ns[0]) // step
    off_grid = np.flatnonzero((ns - ns[0]) % step)
    if off_grid.size:
        row = int(rows[off_grid[0]])
        steps = np.unique(np.diff(ns))
        how = "given as interval=" if interval is not None else "the most common step between rows"
        raise ConfigError(
            f"{where(row)}: window start is not a whole number of intervals ({step / 1e9:g} s) "
            f"after the first window (the interval: {how}); a rate series is read on a regular "
            "grid, one row per "
            f"window of one length, and this one's rows are {steps[0] / 1e9:g} s to "
            f"{steps[-1] / 1e9:g} s apart ({words.count(steps.size, 'different step')}, "
            f"{words.count(off_grid.size, 'row')} off the grid): put it on windows of one length "
            "first (the mean requests/s, or the requests, of each 10 minutes)"
        )
    full = np.full(grid.size, np.nan)
    full[position] = values
    return step, grid, full


def _rate_dataset(qps, seconds: float, grid, path: Path, clock, notes: list[str]):
    """The series as a Dataset over ``time``: ``qps`` and ``requests``, its clock and notes."""
    import xarray as xr

    with np.errstate(over="ignore"):
        requests = qps * seconds
    over = np.flatnonzero(np.isinf(requests))
    if over.size:  # 1e308 requests/s: inf requests a window, numpy's warning the only sign
        at = np.datetime_as_string(grid[over[0]].astype("datetime64[ns]"), unit="s")
        raise ConfigError(
            f"{path}: the window at {at} holds {qps[over[0]]:g} requests/s, which over its "
            f"{seconds:g} s is more requests than capnb can count"
        )
    return xr.Dataset(
        {
            "qps": ("time", qps, glossary.attrs("qps")),
            "requests": ("time", requests, glossary.attrs("requests")),
        },
        coords={"time": ("time", grid.view("datetime64[ns]"), glossary.attrs("time"))},
        attrs={
            "title": f"rate series {path.name}",
            "source": str(path),
            "interval_s": seconds,
            **clock.attrs(),
            "missing_windows": int(np.isnan(qps).sum()),
            "notes": "; ".join(notes) or "none",
        },
    )


def _missing_zeros(qps, seconds, step, clock, zero_is_missing, notes: list[str]) -> np.ndarray:
    """The rates with the windows of exactly 0 that are missing data set to NaN (and noted).

    ``zero_is_missing``: None decides window by window (:func:`_zero_holes`), True marks every
    zero missing, False keeps them all as idle windows.
    """
    zeros = qps == 0.0
    if zeros.any() and zero_is_missing is None:
        return np.where(_zero_holes(qps * seconds, step, clock.attrs(), notes), np.nan, qps)
    if zeros.any() and zero_is_missing:
        notes.append(f"{int(zeros.sum()):,} windows with a rate of exactly 0 are marked missing")
        return np.where(zeros, np.nan, qps)
    return qps


def _zero_holes(counts: np.ndarray, step: int, clock: dict, notes: list[str]) -> np.ndarray:
    """Which windows of 0 requests are missing data: those where an empty window is improbable.

    A window of 0 is compared with the windows at the same time of day on the other days (and of
    the week on the other weeks, :func:`capnb.data._times.compared_periods`): it is missing when
    every comparison makes it improbable (:func:`capnb.data._times.emptiness_score` at the median
    of those windows), and idle otherwise, so a service idle every night keeps its nights, even
    beside one busy night, and one empty night among busy ones is a hole. Where there is nothing
    to compare with (a series under two days, hours not known, windows that do not divide a day,
    or no observed window at that time on another day), the series' median non-empty window
    decides, as for a service without a time of day.
    """
    zero = np.flatnonzero(counts == 0.0)
    positive = counts[np.isfinite(counts) & (counts > 0)]
    typical = float(np.median(positive)) if positive.size else 0.0
    by_median = typical >= IDLE_MEDIAN_COUNT
    periods, why = _times.compared_periods(counts.size * step, clock)
    if periods and (86_400 * 1_000_000_000) % step:  # no same time of day to compare with
        periods, why = (), f"its windows ({step / 1e9:g} s) do not divide a day"
    hole = np.ones(zero.size, bool)
    compared = np.zeros(zero.size, bool)
    for period in periods:
        cycle = period // step
        reach = (counts.size - 1) // cycle
        shifts = np.array([c * cycle for c in (*range(-reach, 0), *range(1, reach + 1))])
        other = zero[:, None] + shifts[None, :]
        inside = (other >= 0) & (other < counts.size)
        values = np.where(inside, counts[np.clip(other, 0, counts.size - 1)], np.nan)
        seen = np.isfinite(values).sum(axis=1).astype(float)
        # the median cycle, not their sum: one busy night does not make every idle night a hole
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (no cycle seen: NaN, no say)
            typical_there = np.nan_to_num(np.nanmedian(values, axis=1))
        score = _times.emptiness_score(typical_there * seen, seen, 1.0)
        improbable = score >= IDLE_MEDIAN_COUNT
        hole &= improbable | (seen == 0)  # nothing at that time on another cycle: no say
        compared |= seen > 0
    hole = np.where(compared, hole, by_median)
    missing = np.zeros(counts.size, bool)
    missing[zero[hole]] = True
    if periods:
        basis = _times.compared_text(periods)
        idle = int((compared & ~hole).sum())
        if idle:
            notes.append(
                f"{idle:,} windows with a rate of 0 are kept as idle, not missing: at {basis} the "
                "series has too little traffic for an empty window to be improbable (Poisson "
                "probability over 0.1 %); zero_is_missing=True marks them missing"
            )
        if (compared & hole).any():
            notes.append(
                f"{int((compared & hole).sum()):,} windows with a rate of exactly 0 are marked "
                f"missing: at {basis} the series' traffic makes an empty window improbable "
                "(Poisson probability under 0.1 %); zero_is_missing=False keeps them as idle"
            )
        if not compared.all():
            notes.append(
                f"{int((~compared).sum()):,} windows with a rate of 0 have no observed window at "
                f"{basis}: judged by the series' median non-empty window ({typical:.3g} "
                f"requests), they are {'missing' if by_median else 'kept as idle'}"
            )
        return missing
    median = f"judged against the series' median window, not the time of day: {why}"
    if by_median:
        notes.append(
            f"{zero.size:,} windows with a rate of exactly 0 are marked missing ({median})"
        )
    else:
        notes.append(
            f"{zero.size:,} windows with a rate of 0 are kept as idle, not missing: at a median "
            f"of {typical:.3g} requests per non-empty window, an empty window is expected "
            f"(Poisson probability {math.exp(-typical):.1%}); zero_is_missing=True marks them "
            f"missing ({median})"
        )
    return missing


def _series_path(name_or_path, text: str | None) -> Path:
    """The path of a user's series file (``text``: the argument as text, None if not a path)."""
    if text in _BUNDLED_TRACES:
        raise InputError(
            f"{text!r} is a request log: load it with capnb.data.load_trace and aggregate it with "
            "capnb.forecast.resample"
        )
    if not isinstance(name_or_path, str | os.PathLike):
        raise InputError(
            f"name_or_path must be a bundled series name or a path, got {type(name_or_path).__name__}"
        )
    path = user_path(name_or_path, "rate series")
    if not path.exists():
        if os.sep not in str(name_or_path) and "." not in str(name_or_path):
            raise UnknownNameError("rate series", name_or_path, list_rate_series())
        raise ConfigError(f"{path}: no such file")
    if path.is_dir():
        raise ConfigError(f"{path}: a folder, not a rate series file")
    if path.stat().st_size == 0:
        raise ConfigError(f"{path}: the file is empty")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix.lower() == ".gz" else path.suffix
    if suffix.lower() not in _SERIES_SUFFIXES:
        # read as CSV, a JSON-lines file was "no column 't'; columns: ['{"t": 0', ...]"
        raise ConfigError(
            f"{path}: capnb reads a rate series from CSV (.csv, .txt, .gz) or Parquet (.parquet, "
            f".pq), and {path.suffix!r} is neither; write it as one of them"
        )
    return path


#: What a rate series file may be named (no suffix: read as CSV).
_SERIES_SUFFIXES = ("", ".csv", ".txt", ".csv.gz", ".txt.gz", ".gz", ".parquet", ".pq")


def _read_series_table(path: Path, time_column, value_column):
    import pyarrow as pa

    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        parquet_names(path)
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as err:
            raise ConfigError(f"{path}: not a readable Parquet file ({err})") from None
        where = lambda row: f"{path.name}, row {row + 1}"  # noqa: E731
    else:
        import pyarrow.csv as pacsv

        header = _csv_header(path)
        for name, argument in ((time_column, "time_column"), (value_column, "rate/count column")):
            if name is not None and name not in header:
                raise ConfigError(f"{path}: no column {name!r} ({argument}); columns: {header}")
        types = {value_column: pa.string()}
        if time_column is not None and not _is_number(_first_values(path).get(time_column, "")):
            # times as text: the parser then sees each UTC offset (pyarrow would move them all
            # to UTC, so a file mixing offsets would load on a clock nobody chose)
            types[time_column] = pa.string()
        options = pacsv.ConvertOptions(
            include_columns=[c for c in (time_column, value_column) if c], column_types=types
        )
        table = _read_csv_table(path, options)
        where = _csv_where(path)
    if table.num_rows == 0:
        raise ConfigError(f"{path}: holds no rows")
    if value_column not in table.column_names:
        raise ConfigError(f"{path}: no column {value_column!r}; columns: {table.column_names}")
    return table, where


def _number_column(table, column: str, where) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pat

    values = table.column(column).combine_chunks()
    if pat.is_dictionary(values.type):
        values = values.dictionary_decode()
    kind = values.type
    empty = values.is_null().to_numpy(zero_copy_only=False)
    if pat.is_string(kind) or pat.is_large_string(kind):  # an empty CSV cell is text ''
        empty |= pc.fill_null(pc.equal(pc.utf8_trim_whitespace(values), ""), False).to_numpy(
            zero_copy_only=False
        )
    if empty.any():
        raise ConfigError(
            f"{where(int(np.flatnonzero(empty)[0]))}: column {column!r} is empty; a rate or count is "
            "a number >= 0 in every row (remove the row: a window absent from the series is read "
            "as missing)"
        )
    if not (pat.is_integer(kind) or pat.is_floating(kind) or pat.is_decimal(kind)
            or pat.is_string(kind) or pat.is_large_string(kind)):  # fmt: skip
        # true/false read as 1 and 0 (a 0 then missing); a list or a struct ended in numpy
        raise ConfigError(f"{where(0)}: column {column!r} has type {kind}, not a rate or count")
    if pat.is_string(values.type) or pat.is_large_string(values.type):
        text = pc.utf8_trim_whitespace(values)
        pattern = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
        ok = pc.fill_null(pc.match_substring_regex(text, pattern), False)  # empty cells: null
        ok = ok.to_numpy(zero_copy_only=False) & ~values.is_null().to_numpy(zero_copy_only=False)
        if not ok.all():
            row = int(np.flatnonzero(~ok)[0])
            raise ConfigError(
                f"{where(row)}: column {column!r} holds {text[row].as_py()!r}, not a number"
            )
        values = text.cast(pa.float64())
    numbers = values.to_numpy(zero_copy_only=False).astype(np.float64)
    bad = ~np.isfinite(numbers) | (numbers < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {float(numbers[row])!r}; a rate or count is a finite "
            "number >= 0"
        )
    return numbers


def _merge_duplicates(ns, values, rows, where, column):
    same = np.flatnonzero(ns[1:] == ns[:-1])
    if not same.size:
        return ns, values, rows, 0
    differ = same[values[same + 1] != values[same]]
    if differ.size:
        a, b = int(rows[differ[0]]), int(rows[differ[0] + 1])
        raise ConfigError(
            f"{where(a)} and {where(b)} are the same window with different {column!r} "
            f"({float(values[differ[0]])!r} and {float(values[differ[0] + 1])!r}); remove one, "
            "or, for local times over a daylight-saving change, name their zone with timezone="
        )
    keep = np.ones(ns.size, bool)
    keep[same + 1] = False
    return ns[keep], values[keep], rows[keep], int(same.size)


def _series_step(ns, interval, where, rows, interval_ns) -> int:
    if ns.size < 2 and interval is None:
        raise ConfigError(
            f"{where(0)}: a single window: a rate series needs two rows or more to tell its step "
            "(load_rate_series' interval= gives it; a plan's interval, --interval, is the "
            "forecast's window, not the series' step)"
        )
    if interval is not None:
        return interval_ns(interval, "interval")
    steps, counts = np.unique(np.diff(ns), return_counts=True)
    return int(steps[np.argmax(counts)])

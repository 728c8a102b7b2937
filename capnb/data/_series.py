"""Series of traffic: durations, seasonal slots, and request logs resampled to regular intervals.

Part of the forecast step (its public names are re-exported by :mod:`capnb.forecast`).
"""

from __future__ import annotations

import numbers
import re
import warnings
from dataclasses import dataclass

import numpy as np
import xarray as xr

from .. import glossary
from .._validate import naive_times
from ..errors import InputError
from ..units import declare_units, require_units
from . import _times
from ._times import IDLE_MEDIAN_COUNT

__all__ = [
    "Slots",
    "checked_series",
    "interval_ns_of",
    "interval_seconds",
    "long_runs",
    "resample",
    "runs",
    "slot_codes",
    "slots",
]

NS = 1_000_000_000
DAY_NS = 86_400 * NS
WEEK_NS = 7 * DAY_NS
#: Monday 1970-01-05 00:00: slot periods are counted from a Monday midnight.
MONDAY_NS = 4 * DAY_NS
#: Words for a time unit: those capnb.units reads ("2 hrs", "500 msec"), and pandas' m, D, W.
_UNITS_S = {
    "ns": 1e-9, "nanosecond": 1e-9, "us": 1e-6, "microsecond": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "millisecond": 1e-3, "s": 1, "sec": 1, "second": 1, "min": 60, "m": 60, "minute": 60,
    "h": 3600, "hr": 3600, "hour": 3600, "d": 86_400, "day": 86_400, "w": 604_800,
    "week": 604_800,
}  # fmt: skip


# -- intervals and slots ---------------------------------------------------------------------
def interval_ns(value: object, argument: str, *, low_s: float = 1e-3) -> int:
    """A duration given as ``"5s"``, ``"10min"``, ``"1h"``, ``"7D"`` or seconds -> whole ns."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*", value)
        unit = (match.group(2).lower() or "s") if match else ""  # "600": seconds, as promised
        if match and match.group(2) in ("M", "MS"):  # pandas' month end and month start
            raise InputError(
                f"{argument}={value!r} is ambiguous: M reads as minutes here but as months in "
                "pandas, MS as milliseconds here but as month starts; write 'min' or 'ms'"
            )
        if unit.endswith("s") and unit[:-1] in _UNITS_S and unit not in _UNITS_S:
            unit = unit[:-1]  # "mins", "hours", "days"
        if not match or unit not in _UNITS_S:
            raise InputError(
                f"{argument}={value!r} is not a duration; write e.g. '1s', '5s', '1min', '1h', '7D' "
                "or a number of seconds"
            )
        seconds = float(match.group(1)) * _UNITS_S[unit]
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InputError(f"{argument} must be a duration such as '1min' or seconds, got {value!r}")
    if not np.isfinite(seconds) or seconds < low_s:
        raise InputError(f"{argument} must be at least {low_s:g} s, got {value!r}")
    return round(seconds * NS)


def interval_seconds(value: object) -> float:
    """A duration (``"10min"``, ``"1h"`` or seconds) in seconds.

    Examples
    --------
    >>> interval_seconds("10min")
    600.0
    """
    return interval_ns(value, "interval") / NS


def duration_text(ns: int) -> str:
    seconds = ns / NS
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            value = seconds / size
            return f"{value:g} {unit}" if value == round(value) else f"{value:.1f} {unit}"
    return f"{seconds:g} s"


@dataclass(frozen=True)
class Slots:
    """How intervals map to seasonal slots: a period cut into equal slots, from Monday 00:00.

    Attributes
    ----------
    kind
        ``"hour_of_day"``, ``"hour_of_week"`` or ``"custom"``.
    slot_ns, period_ns
        Slot length and period in nanoseconds.
    """

    kind: str
    slot_ns: int
    period_ns: int

    @property
    def count(self) -> int:
        """Number of slots in a period."""
        return self.period_ns // self.slot_ns

    @property
    def needs_weekday(self) -> bool:
        """Whether the slots depend on the weekday: the period does not divide a day."""
        return DAY_NS % self.period_ns != 0

    def label(self) -> str:
        """Words for the slot kind, for messages and charts."""
        if self.kind != "custom":
            return self.kind.replace("_", " ")
        return f"{duration_text(self.slot_ns)} slots of a {duration_text(self.period_ns)} period"

    def named(self, codes) -> str:
        """Slots by their codes in words: '6 hour of week slots (Sat 10:00-16:00)'.

        Runs of slots, the first 8, then '...'; named as the forecast's words name them (custom
        slots by number), a run through the end of the period joined to the one at its start.
        """
        codes = np.unique(np.asarray(codes, dtype=np.int64))
        starts, stops = runs(np.isin(np.arange(self.count), codes))
        if self.kind == "custom":
            pairs = zip(starts, stops, strict=True)
            text = [f"{a}" if b - a == 1 else f"{a}-{b - 1}" for a, b in pairs]
        else:
            if starts.size > 1 and starts[0] == 0 and stops[-1] == self.count:  # around the period
                starts, stops = starts[1:], np.append(stops[1:-1], stops[0])
            text = [_slot_run(self, a, b) for a, b in zip(starts, stops, strict=True)]
        shown = ", ".join(text[:8]) + (", ..." if len(text) > 8 else "")
        return f"{codes.size} {self.label()} slot{'s' if codes.size != 1 else ''} ({shown})"


def _slot_run(spec: Slots, first: int, stop: int) -> str:
    """Words for the slots from ``first`` up to ``stop`` (exclusive): 'Sat 22:00-Sun 02:00'."""
    begin = slot_label(first, spec.kind).rsplit("-", 1)[0]
    end = slot_label(stop % spec.count, spec.kind).rsplit("-", 1)[0]
    if end.split(" ")[0] == begin.split(" ")[0]:  # the same day: its name once
        end = end.split(" ")[-1]
    return f"{begin}-{end}"


def slots(kind: str | tuple | Slots = "hour_of_day") -> Slots:
    """Slot definition: ``"hour_of_day"``, ``"hour_of_week"`` or ``(slot_length, period)``.

    Examples
    --------
    >>> slots("hour_of_week").count
    168
    >>> slots(("30min", "1D")).count
    48
    """
    if isinstance(kind, Slots):
        return kind
    if kind == "hour_of_day":
        return Slots("hour_of_day", 3600 * NS, DAY_NS)
    if kind == "hour_of_week":
        return Slots("hour_of_week", 3600 * NS, WEEK_NS)
    if isinstance(kind, tuple) and len(kind) == 2:
        slot_ns = interval_ns(kind[0], "slots[0] (slot length)", low_s=1)
        period_ns = interval_ns(kind[1], "slots[1] (period)", low_s=1)
        if period_ns % slot_ns:
            raise InputError(
                f"slots: the period {kind[1]!r} is not a whole number of slots of {kind[0]!r}"
            )
        return Slots("custom", slot_ns, period_ns)
    raise InputError(
        f"slots must be 'hour_of_day', 'hour_of_week' or (slot_length, period) such as "
        f"('30min', '1D'), got {kind!r}"
    )


@declare_units(slot_s="s")
def slot_label(slot: int, kind: str, slot_s: float = 3600.0) -> str:
    """Words for a slot code: ``"09:00-10:00"``, ``"Mon 09:00-10:00"`` or ``"slot 5"``.

    Examples
    --------
    >>> slot_label(9, "hour_of_day"), slot_label(24 + 9, "hour_of_week")
    ('09:00-10:00', 'Tue 09:00-10:00')
    """
    if kind == "hour_of_day":
        return f"{slot:02d}:00-{(slot + 1) % 24:02d}:00"
    if kind == "hour_of_week":
        day = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[slot // 24]
        return f"{day} {slot_label(slot % 24, 'hour_of_day')}"
    real = isinstance(slot_s, numbers.Real) and not isinstance(slot_s, bool)
    if not (real and np.isfinite(slot_s) and slot_s > 0):
        raise InputError(f"slot_s must be a finite number of seconds > 0, got {slot_s!r}")
    return f"slot {slot} ({duration_text(round(slot_s * NS))} each)"


def slot_codes(time: np.ndarray | xr.DataArray, kind: str | tuple | Slots = "hour_of_day"):
    """Slot code of each time (datetime64), on the trace's own clock: a ``slot`` index per time.

    Examples
    --------
    >>> t = np.array(["2024-05-13T09:30", "2024-05-19T23:59"], dtype="datetime64[ns]")  # Mon, Sun
    >>> slot_codes(t, "hour_of_week").tolist()
    [9, 167]
    """
    spec = slots(kind)
    values = time.values if isinstance(time, xr.DataArray) else np.asarray(time)
    ns = values.astype("datetime64[ns]").view(np.int64)
    return ((ns - MONDAY_NS) % spec.period_ns) // spec.slot_ns


# -- resampling ------------------------------------------------------------------------------
def resample(
    trace: xr.Dataset,
    interval: str | float = "1min",
    *,
    gap: str | float | None = "15min",
) -> xr.Dataset:
    """Aggregate a request log (or a rate series) into a regular series of intervals.

    Parameters
    ----------
    trace
        A request log from :func:`capnb.data.load_trace` (dim ``request``), or a rate series from
        :func:`capnb.data.load_rate_series` (dim ``time``) to coarsen.
    interval
        Interval length: ``"1s"``, ``"5s"``, ``"1min"``, ``"1h"`` ... or seconds (1 s to 1 day, a
        whole number of seconds). Intervals are aligned to the clock (an hour starts at :00).
        For a rate series, a whole multiple of its own interval.
    gap
        A request log's runs of empty intervals at least this long are marked missing (a hole in
        the log, not an idle service) where the log's traffic at the same time of day on its other
        days (and, over two weeks or more, of the week on its other weeks) makes a stretch that
        empty improbable (Poisson probability under 0.1 %); elsewhere they are idle time, zeros
        (a service idle every night keeps its nights). A log under two days, or whose hours of the
        day are not known, is judged at its mean rate instead. ``None`` keeps every empty interval
        as a real zero. The notes say which.

    Returns
    -------
    xarray.Dataset
        Over ``time`` (interval starts, datetime64[ns]): ``qps`` (requests/s), ``requests``
        (requests in the interval), and for logs with token counts ``prompt_tokens`` and
        ``output_tokens`` (tokens summed over the interval). All float64, NaN where missing.
        The first and last intervals count only the time from the first to the last request; one
        observed for less than half its length is missing. Attrs: ``interval_s``, the trace's clock
        (``timezone``, ``weekday_known``), ``missing_intervals``, ``notes``.

    Raises
    ------
    InputError
        The interval is not a whole number of seconds in [1 s, 1 day], or longer than the trace.

    Examples
    --------
    >>> from capnb.data import load_trace
    >>> series = resample(load_trace("azure-conv-2023"), "1min")
    >>> series.sizes["time"], round(float(series.qps.mean()), 2)
    (60, 5.56)
    """
    if not isinstance(trace, xr.Dataset):
        raise InputError(f"trace must be an xarray Dataset, got {type(trace).__name__}")
    step = interval_ns(interval, "interval", low_s=1)
    if step % NS or step > DAY_NS:
        raise InputError(
            f"interval must be a whole number of seconds from 1 s to 1 day, got {interval!r}"
        )
    if "time" in trace:
        naive_times(trace["time"], "trace.time")
    if "request" in trace.dims and "time" in trace:
        return _resample_log(trace, step, gap)
    if "time" in trace.dims and "qps" in trace:
        return _resample_series(trace, step)
    raise InputError(
        "trace must be a request log (dim 'request' with 'time') or a rate series (dim 'time' "
        f"with 'qps'); got dims {dict(trace.sizes)} and variables {list(trace.data_vars)}"
    )


def _clock_attrs(trace: xr.Dataset) -> dict[str, object]:
    keys = ("source", "timezone", "weekday_known", "hours_known", "time_origin")
    return {k: trace.attrs[k] for k in keys if k in trace.attrs}


def dated(values: np.ndarray, what: str) -> np.ndarray:
    """Times as dates and times; numbers (seconds? nanoseconds?) are refused, not guessed at."""
    if values.dtype.kind in "biufcm":
        raise InputError(
            f"{what} holds numbers ({values.dtype}), not dates and times: read a file with "
            "capnb.data.load_trace or load_rate_series (time_unit=, start=), or convert them "
            "with pandas.to_datetime(times, unit='s', origin=...)"
        )
    return values


def _resample_log(trace: xr.Dataset, step: int, gap) -> xr.Dataset:
    ns = dated(trace["time"].values, "trace.time").astype("datetime64[ns]").view(np.int64)
    if ns.size == 0:
        raise InputError("trace: holds no requests")
    if (ns[1:] < ns[:-1]).any():
        raise InputError("trace: times are not sorted; load it with capnb.data.load_trace")
    first, last = int(ns[0]), int(ns[-1])
    span = last - first
    if span < step:
        what = "a single request" if ns.size == 1 else f"{duration_text(span)} from first to last"
        raise InputError(
            f"interval {duration_text(step)} is longer than the trace ({what}); choose a shorter "
            "interval or a longer trace"
        )
    from ..kernels import forecast as kernels  # numba loads when a log is resampled

    origin = first - first % step
    n_bins = (last - origin) // step + 1
    requests = np.zeros(n_bins)
    sums = {name: np.zeros(n_bins) for name in ("prompt_tokens", "output_tokens") if name in trace}
    empty = np.zeros(0, np.int64)
    kernels.bin_requests(
        ns,
        trace["prompt_tokens"].values if "prompt_tokens" in sums else empty,
        trace["output_tokens"].values if "output_tokens" in sums else empty,
        origin,
        step,
        requests,
        sums.get("prompt_tokens", np.zeros(0)),
        sums.get("output_tokens", np.zeros(0)),
    )
    starts = origin + np.arange(n_bins, dtype=np.int64) * step
    covered = np.minimum(starts + step, last) - np.maximum(starts, first)
    covered = np.maximum(covered, 0).astype(np.float64)
    missing = covered < step / 2
    notes = []
    edges = int(missing.sum())
    if edges:
        notes.append(f"{edges} edge interval(s) observed for under half their length are missing")
    idle_starts, idle_stops = runs(requests == 0)
    longest = int((idle_stops - idle_starts).max(initial=0)) * step
    if gap is not None:
        gap_ns = interval_ns(gap, "gap", low_s=1)
        long = idle_stops - idle_starts >= -(-gap_ns // step)
        stretches = (origin + idle_starts[long] * step, origin + idle_stops[long] * step)
        periods, why = _times.compared_periods(span, trace.attrs)
        if periods:
            # judged without their end intervals: a run of empty intervals reaches into the
            # traffic either side up to the gap before the next request, where the other cycles'
            # requests would make any idle night "improbable" at a fine interval
            inner = stretches[1] - stretches[0] > 2 * step
            trimmed = (stretches[0] + step * inner, stretches[1] - step * inner)
            hole = _improbably_empty(ns, *trimmed, periods)
            holes = _mark(n_bins, idle_starts[long][hole], idle_stops[long][hole])
            whole = bool((stretches[1] - stretches[0] >= min(periods)).any())
            counts = (int(hole.sum()), int(holes.sum()), hole.size)
            notes.extend(_hole_notes(periods, gap_ns, *counts, whole))
        else:
            holes = _mean_rate_holes(ns, step, n_bins, idle_starts, idle_stops, gap_ns, notes)
            if long.any():
                notes.append(
                    "empty stretches are judged against the log's mean rate, not the time of day: "
                    + why
                )
        missing |= holes
    qps = np.where(missing, np.nan, requests / np.where(covered > 0, covered, 1.0) * NS)
    data = {
        "qps": ("time", qps, glossary.attrs("qps")),
        "requests": ("time", np.where(missing, np.nan, requests), glossary.attrs("requests")),
    }
    for name, values in sums.items():
        data[name] = (
            "time",
            np.where(missing, np.nan, values),
            glossary.attrs(name, long_name=f"{name.replace('_', ' ')} summed over the interval"),
        )
    attrs = {
        "title": "request rate per interval",
        **_clock_attrs(trace),
        "interval_s": step / NS,
        "missing_intervals": int(missing.sum()),
        "longest_empty_s": longest / NS,
        "notes": "; ".join(notes) or "none",
    }
    return xr.Dataset(data, coords=_time_coord(starts), attrs=attrs)


def _improbably_empty(ns, a, b, periods) -> np.ndarray:
    """Which empty stretches ``[a, b)`` of a log are holes: improbable at every period's phase.

    A stretch shorter than a period is compared with the same phase (time of day, of the week)
    on the log's other cycles (:func:`capnb.data._times.emptiness_score`); one at least a period
    long holds every phase, and is compared with the log's mean rate. The cycles' median rate is
    taken, not their pooled one: idle nights are then idle (most other nights are empty too), even
    beside one busy night, and one empty night among busy ones is a hole.
    """
    first, last = int(ns[0]), int(ns[-1])
    length = (b - a).astype(np.float64)
    hole = np.ones(a.size, bool)
    for period in periods:
        score = length * (ns.size - 1) / (last - first)  # at the log's mean rate
        short = np.flatnonzero(length < period)
        reach = (last - first) // period + 1  # the other cycles the log touches, either side
        shifts = [c * period for c in (*range(-reach, 0), *range(1, reach + 1))]
        exposure = np.zeros((short.size, len(shifts)))
        count = np.zeros((short.size, len(shifts)))
        for j, shift in enumerate(shifts):
            low = np.clip(a[short] + shift, first, last)
            high = np.clip(b[short] + shift, first, last)
            exposure[:, j] = high - low
            count[:, j] = np.searchsorted(ns, high) - np.searchsorted(ns, low)
        # the median cycle's rate, not their pooled one: one busy night does not make every idle
        # night a hole
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (no cycle seen: no say)
            rate = np.nan_to_num(np.nanmedian(np.where(exposure > 0, count / exposure, np.nan), 1))
        seen = exposure.sum(axis=1)
        score[short] = _times.emptiness_score(rate * seen, seen, length[short])
        hole &= score >= IDLE_MEDIAN_COUNT
    return hole


def _hole_notes(periods, gap_ns: int, hole_runs: int, hole_intervals: int, runs_in_all: int, whole):
    basis = _times.compared_text(periods)
    if whole:  # a run a day long holds every time of day
        basis += " (runs of a day or more: at its mean rate)"
    notes = []
    if runs_in_all > hole_runs:
        notes.append(
            f"{runs_in_all - hole_runs:,} empty run(s) of at least {duration_text(gap_ns)} are "
            f"idle, not holes: at {basis} the log has too few requests for them to be improbable"
        )
    if hole_runs:
        notes.append(
            f"{hole_intervals:,} intervals in {hole_runs:,} empty run(s) of at least "
            f"{duration_text(gap_ns)} are missing (a hole in the log): at {basis} the log's "
            "requests make them improbable (Poisson probability under 0.1 %); pass gap=None to "
            "count them as zero"
        )
    return notes


def _mean_rate_holes(ns, step, n_bins, idle_starts, idle_stops, gap_ns, notes) -> np.ndarray:
    """The holes of a log whose time of day cannot be compared: judged at its mean rate."""
    span = int(ns[-1] - ns[0])
    # an empty stretch is a hole only where the log's mean rate makes it improbable: at
    # IDLE_MEDIAN_COUNT expected requests a Poisson stretch is empty with probability 0.1 %
    expected_ns = IDLE_MEDIAN_COUNT * span / max(ns.size - 1, 1)
    if expected_ns > gap_ns:
        notes.append(
            f"empty runs shorter than {duration_text(expected_ns)} are idle, not holes: at "
            f"this log's mean of {(ns.size - 1) / span * NS:.3g} requests/s one that long "
            f"is empty with probability 0.1 % (gap={duration_text(gap_ns)} is shorter)"
        )
        gap_ns = int(expected_ns)
    long = idle_stops - idle_starts >= -(-gap_ns // step)
    holes = _mark(n_bins, idle_starts[long], idle_stops[long])
    if holes.any():
        notes.append(
            f"{int(holes.sum()):,} intervals in empty runs of at least {duration_text(gap_ns)} "
            "are missing (a hole in the log); pass gap=None to count them as zero"
        )
    return holes


def runs(flags) -> tuple[np.ndarray, np.ndarray]:
    """Where the runs of True in ``flags`` start and stop (exclusive), as two int64 arrays.

    Plain numpy (``np.diff`` of the flags): with the runs found once for both the longest empty
    stretch and the holes, this measured as fast as the numba loop it replaced.
    """
    flags = np.asarray(flags, dtype=bool)
    edges = np.flatnonzero(np.diff(flags, prepend=False, append=False))
    return edges[::2], edges[1::2]


def long_runs(flags, min_length: int) -> np.ndarray:
    """The runs of True in ``flags`` that are at least ``min_length`` long, as a boolean array."""
    starts, stops = runs(flags)
    long = stops - starts >= min_length
    return _mark(np.size(flags), starts[long], stops[long])


def _mark(size: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """A boolean array of ``size``, True on ``[starts[k], stops[k])`` (disjoint, apart)."""
    steps = np.zeros(size + 1, np.int8)
    steps[starts] = 1
    steps[stops] = -1
    return np.cumsum(steps[:-1], dtype=np.int8).astype(bool)


def _time_coord(starts: np.ndarray) -> dict[str, tuple]:
    return {"time": ("time", starts.view("datetime64[ns]"), glossary.attrs("time"))}


def _spacing_hint(series: xr.Dataset) -> str:
    """``"; its times are 60 s apart: series.attrs['interval_s'] = 60"``, where they say so."""
    if (
        "time" not in series.coords
        or series.sizes.get("time", 0) < 2
        or series["time"].dtype.kind != "M"  # times that are not dates say no spacing
    ):
        return "; set it, e.g. series.attrs['interval_s'] = 60"
    steps = np.diff(np.asarray(series["time"].values, "datetime64[ns]").astype(np.int64))
    step_s = float(np.median(steps)) / NS
    if not (step_s > 0 and step_s.is_integer()):
        return "; set it, e.g. series.attrs['interval_s'] = 60"
    return f"; its times are {step_s:g} s apart: series.attrs['interval_s'] = {step_s:g}"


def interval_ns_of(series: xr.Dataset) -> int:
    """The interval of a series (from ``attrs["interval_s"]``), in ns."""
    if "interval_s" not in series.attrs:
        raise InputError(
            "series.attrs['interval_s'] is missing: the length of the series' intervals, in s"
            + _spacing_hint(series)
            + " (capnb.data.load_rate_series and capnb.forecast.resample of a request log set it)"
        )
    # 0 divided by zero in the slots, NaN and text failed the int conversion, -600 passed
    return interval_ns(series.attrs["interval_s"], "series.attrs['interval_s']")


def _not_a_multiple(step: int, own: int) -> str:
    """Why ``step`` (ns) cannot be cut from a series of interval ``own``, and the interval that can.

    The interval suggested is the shortest multiple of ``own`` from ``step`` up that divides an
    hour, the length of hour-of-day and hour-of-week slots (a plan's ``interval`` must).
    """
    said = (
        f"interval {duration_text(step)} is not a whole multiple of the series' own interval "
        f"({duration_text(own)})"
    )
    hour = 3600 * NS
    fits = [k * own for k in range(-(-step // own), hour // own + 1) if hour % (k * own) == 0]
    if fits:
        return (
            f"{said}: give interval '{duration_text(fits[0])}' (a multiple of "
            f"{duration_text(own)} that divides an hour, as the forecast's slots need; in a plan: "
            f"[traffic] interval = '{duration_text(fits[0])}', or --interval "
            f"'{duration_text(fits[0])}')"
        )
    return (
        f"{said}, and no multiple of {duration_text(own)} divides an hour, the length of the "
        "forecast's slots: put the series on windows that divide an hour first (e.g. the mean "
        "requests/s of each 10 or 15 minutes)"
    )


def _resample_series(series: xr.Dataset, step: int) -> xr.Dataset:
    dated(series["time"].values, "trace.time")
    own = interval_ns_of(series)
    if step % own:
        raise InputError(_not_a_multiple(step, own))
    ns = series["time"].values.astype("datetime64[ns]").view(np.int64)
    if ns[-1] + own - ns[0] < step:
        raise InputError(
            f"interval {duration_text(step)} is longer than the series "
            f"({duration_text(int(ns[-1] + own - ns[0]))})"
        )
    origin = ns[0] - ns[0] % step
    index = (ns - origin) // step
    n_bins = int(index[-1]) + 1
    qps = series["qps"].values
    seen = ~np.isnan(qps)
    total = np.bincount(index[seen], weights=qps[seen], minlength=n_bins)
    count = np.bincount(index[seen], minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    starts = origin + np.arange(n_bins, dtype=np.int64) * step
    attrs = {
        **series.attrs,
        "interval_s": step / NS,
        "missing_intervals": int((count == 0).sum()),
        "notes": (
            f"each interval's qps is the mean of its observed {duration_text(own)} windows; "
            "missing when none is observed"
        ),
    }
    return xr.Dataset(
        {
            "qps": ("time", mean, glossary.attrs("qps")),
            "requests": ("time", mean * step / NS, glossary.attrs("requests")),
        },
        coords=_time_coord(starts),
        attrs=attrs,
    )


def checked_series(series: object, argument: str = "series") -> xr.Dataset:
    """The series if it has ``qps`` over ``time``, an interval and two observed values; else raise."""
    if not isinstance(series, xr.Dataset) or "qps" not in series or "time" not in series.dims:
        raise InputError(
            f"{argument} must be a Dataset over 'time' with 'qps' (from capnb.forecast.resample or "
            "capnb.data.load_rate_series)"
        )
    require_units(series["qps"], "requests/s", f"{argument}.qps")
    naive_times(series["time"], f"{argument}.time")
    dated(series["time"].values, f"{argument}.time")
    interval_ns_of(series)
    given = series.sizes["time"]
    if given:  # an empty series has no rates to check, only too few of them
        _check_rates(series, argument)
    observed = int(series["qps"].notnull().sum()) if given else 0
    if observed < 2:
        raise InputError(
            f"{argument}: fewer than two observed intervals ({given} given, {observed} observed); "
            "nothing to plan on"
        )
    return series


def _check_spacing(times: np.ndarray, step: np.ndarray, interval: int, argument: str) -> None:
    """Times a whole number of intervals apart: an interval_s the times contradict is refused.

    Windows left out (a gap of whole intervals) are missing values; a gap shorter than the interval,
    or not a multiple of it, means the attr is not the series' interval (10-minute rates labelled
    hourly were read as six times the span).
    """
    off = np.flatnonzero(step % interval)
    if off.size:
        at = int(off[0])
        shown = [np.datetime_as_string(times[i], unit="s") for i in (at, at + 1)]
        raise InputError(
            f"{argument}.attrs['interval_s'] says {interval / NS:g} s, but {argument}.time's times "
            f"{shown[0]} and {shown[1]} (positions {at} and {at + 1}) are {step[at] / NS:g} s "
            "apart; set interval_s to the times' interval, or resample the series "
            "(capnb.forecast.resample)"
        )


def _check_rates(series: xr.Dataset, argument: str) -> None:
    """Times strictly increasing; each rate a number of requests/s >= 0, or NaN (missing)."""
    times = series["time"].values.astype("datetime64[ns]")
    step = np.diff(times.view(np.int64))
    if (step <= 0).any():
        at = int(np.flatnonzero(step <= 0)[0]) + 1
        shown = [np.datetime_as_string(times[i], unit="s") for i in (at, at - 1)]
        if step[at - 1] == 0:
            raise InputError(
                f"{argument}.time: position {at} repeats the time before it ({shown[0]})"
            )
        raise InputError(
            f"{argument}.time: times run backwards at position {at} ({shown[0]} after {shown[1]}); "
            "sort them, one value per interval"
        )
    _check_spacing(times, step, interval_ns_of(series), argument)
    qps = series["qps"]
    if qps.dtype.kind not in "iuf":
        raise InputError(f"{argument}.qps must hold numbers (requests/s), got dtype {qps.dtype}")
    values = qps.transpose("time", ...).values.reshape(times.size, -1)
    bad = np.isinf(values) | (values < 0)
    if bad.any():
        at, column = (int(i[0]) for i in np.nonzero(bad))
        raise InputError(
            f"{argument}.qps holds {float(values[at, column])!r} at position {at} (time "
            f"{np.datetime_as_string(times[at], unit='s')}); a rate is a finite number of "
            "requests/s >= 0 (NaN where it is missing)"
        )

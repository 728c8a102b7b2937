"""Bursts as probabilistic events: detection, a burst model, and Monte Carlo months of demand.

The article: campaigns and trending events lift QPS 3-5x for a short time; rare, but an SLA breach
costs more than idle capacity. Model them as events (e.g. 1-2 a month, 1-2 hours, 3-5x) and cover
them with an elastic buffer rather than fixed capacity. This module

- finds bursts in a series (:func:`detect_bursts`: intervals above ``factor`` x the slot baseline
  for at least ``min_duration``) and fits a :class:`BurstModel` to them (:func:`fit_burst_model`:
  each burst's size is its mean factor on the baseline the simulation multiplies, so that a fitted
  model simulates the bursts it was fitted to);
- simulates many months at minute resolution (:func:`simulate`): demand = slot baseline x noise x
  burst factor, with the noise resampled from the series' own residuals; out of it come the
  distribution of the monthly peak, the probability that a capacity is exceeded in a month, the
  expected minutes per month above it, and the ``buffer_qps`` an elastic buffer must hold.

Every trial draws from its own Philox stream keyed by the seed, so results are identical for any
number of threads and any split of the trials into dask chunks. The step's public names are
re-exported by :mod:`capnb.forecast`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import xarray as xr

from .. import _validate, glossary
from ..data._series import (
    DAY_NS,
    Slots,
    checked_series,
    interval_ns,
    interval_ns_of,
    runs,
    slot_codes,
)
from ..errors import InputError
from ..units import declare_units
from . import _months
from ._baseline import fit_baseline, slot_statistics
from ._growth import MIN_DAYS
from ._shift import level_shift_in, shift_words

__all__ = [
    "MONTH_DAYS",
    "BurstModel",
    "MonthInputs",
    "burst_free",
    "detect_bursts",
    "fit_burst_model",
    "month_inputs",
    "noise_pools",
    "simulate",
]

NS = 1_000_000_000
#: A Monte Carlo month: 30 days of 1,440 minutes (43,200 minutes). Burst rates are per such month.
MONTH_DAYS = 30
_MONTH_S = MONTH_DAYS * 86_400
#: The article's bursts: 1.5 a month (1-2), each 1-2 h (s) at 3-5x the baseline.
_ARTICLE = (1.5, (3600.0, 7200.0), (3.0, 5.0))
#: :func:`detect_bursts`' default: an interval above this many times its slot's median.
BURST_FACTOR = 2.0
#: :func:`burst_free` keeps bursts found more often than this many a week (over the observed
#: time, a week at least) in the series: they recur, so they are the baseline's (the article's
#: bursts come 1-2 times a month). Chosen on synthetic 14-day traces: with a 30-60 minute spike
#: at 2.5x every day set to the baseline, the held-back week's P99 coverage fell from 99.1 % to
#: 97.7 %; with two spikes a week it held (99.1 % and 99.2 %).
RECURRING_PER_WEEK = 2.0
#: How :func:`burst_free`'s words name a burst left as observed for running at the history's end.
RUNNING = "the one still running at the history's end"


@dataclass(frozen=True)
class BurstModel:
    """Bursts as random events: how often, how long, how high.

    Bursts arrive as a Poisson process (``rate_per_month`` per 30-day month), start at a uniformly
    random minute, last a uniform duration in ``duration_s`` (rounded to whole minutes) and multiply
    the baseline by a uniform factor in ``multiplier``; where bursts overlap, the larger factor holds.

    Attributes
    ----------
    rate_per_month
        Expected bursts per 30-day month (>= 0).
    duration_s
        (shortest, longest) burst, seconds.
    multiplier
        (lowest, highest) factor on the baseline, >= 1.
    source
        Where the numbers come from (shown in answers). Default: "the article's default" when
        the numbers are the article's, else "set by hand".

    Examples
    --------
    >>> print(BurstModel().describe())
    1.5 bursts a month (Poisson), each 1-2 h long at 3-5x the baseline (the article's default)
    """

    rate_per_month: float = 1.5
    duration_s: tuple[float, float] = (3600.0, 7200.0)
    multiplier: tuple[float, float] = (3.0, 5.0)
    source: str | None = None

    def __post_init__(self):
        _validate.fraction(self.rate_per_month, "rate_per_month", high=10_000.0)
        for name, low_bound in (("duration_s", 1.0), ("multiplier", 1.0)):
            pair = getattr(self, name)
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise InputError(f"{name} must be a (low, high) pair, got {pair!r}")
            low, high = (_validate.fraction(v, name, low=low_bound, high=1e9) for v in pair)
            if low > high:
                raise InputError(f"{name}: low {low:g} is above high {high:g}")
            object.__setattr__(self, name, (low, high))
        if self.source is None:  # the article's numbers are the article's; any other, the user's
            article = (self.rate_per_month, self.duration_s, self.multiplier) == _ARTICLE
            object.__setattr__(
                self, "source", "the article's default" if article else "set by hand"
            )
        elif not isinstance(self.source, str):
            raise InputError(f"source must be text, got {self.source!r}")

    def describe(self) -> str:
        """The model in words."""
        if self.rate_per_month == 0:  # its lengths and sizes describe bursts that never come
            return f"no bursts ({self.source})"
        d0, d1 = (_duration(v) for v in self.duration_s)
        if d0 == d1:
            span = d0
        elif d0.split()[-1] == d1.split()[-1]:  # one unit: "1-2 h", "30-45 min"
            span = f"{d0.split()[0]}-{d1}"
        else:  # minutes to hours: "30 min-7 h"
            span = f"{d0}-{d1}"
        m0, m1 = self.multiplier
        times = f"{m0:.3g}x" if m0 == m1 else f"{m0:.3g}-{m1:.3g}x"
        return (
            f"{self.rate_per_month:.3g} bursts a month (Poisson), each {span} long at {times} the "
            f"baseline ({self.source})"
        )


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 1800 == 0:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:.0f} min"


# -- detection -------------------------------------------------------------------------------
def detect_bursts(
    series: xr.Dataset,
    baseline: xr.Dataset | None = None,
    *,
    factor: float = BURST_FACTOR,
    min_duration: str | float = "30min",
    reference_quantile: float = 0.5,
) -> xr.Dataset:
    """Find bursts: runs of intervals above ``factor`` x their slot's baseline, at least this long.

    A hole (missing intervals) inside a run, no longer than ``min_duration``, is part of the burst
    (its duration counts it; its sizes are over the observed intervals); a longer one ends the run.

    Parameters
    ----------
    series
        QPS series (:func:`capnb.forecast.resample`, :func:`capnb.data.load_rate_series`).
    baseline
        Slot baselines of the same series (:func:`capnb.forecast.fit_baseline`); default: hour of
        day.
    factor
        How many times the slot's reference rate an interval must exceed.
    min_duration
        Shortest run that counts as a burst (``"30min"`` or seconds); rounded up to whole intervals.
    reference_quantile
        Which ``traffic_quantile`` of the baseline is the reference (the median: bursts barely
        move it).

    Returns
    -------
    xarray.Dataset
        ``in_burst`` over ``time``; over dim ``burst``: ``burst_start`` (datetime64),
        ``duration_s`` (s), ``peak_qps`` (requests/s), ``multiplier`` (the burst's mean qps over
        its duration against its slots' baseline outside the bursts: the factor
        :func:`simulate` puts on that baseline, under its noise) and ``peak_multiplier`` (the
        burst's highest interval over its slot reference, noise included: detection's measure,
        larger than ``multiplier`` by the noise of the burst's loudest interval). Attrs: the
        settings, ``observed_s``, the observed (non-missing) time the bursts were looked for
        in, and ``level_shift``: ``"none"``, or the level shift found in the series (its weekly
        mean 1.5x or more, up or down, and staying, as :func:`capnb.forecast.select` finds it),
        each side of which is measured against its own baseline on the given baseline's slots
        (a tripling read as one 168-hour burst at 3x before).
    """
    series = checked_series(series)
    baseline = fit_baseline(series) if baseline is None else checked_baseline(baseline)
    factor = _validate.fraction(factor, "factor", low=1.0, high=1e6)
    step = interval_ns_of(series)
    min_ns = interval_ns(min_duration, "min_duration", low_s=1)
    if reference_quantile not in baseline.traffic_quantile.values:
        raise InputError(
            f"reference_quantile={reference_quantile} is not among the baseline's traffic_quantile "
            f"values {baseline.traffic_quantile.values.tolist()}"
        )
    if series["qps"].ndim != 1:
        raise InputError("detect_bursts takes one series (qps over time only)")
    codes = slot_codes(series["time"], _slots_of(baseline))
    qps = series["qps"].values.astype(float)
    expected, shift, sides = _references(series, baseline, codes, reference_quantile)
    with np.errstate(invalid="ignore"):
        above = qps > factor * expected  # NaN (missing) compares False
    length = -(-min_ns // step)
    starts, stops = runs(_bridged(above, np.isnan(qps), length))
    long = stops - starts >= length
    starts, stops = starts[long], stops[long]
    in_burst = np.zeros(qps.size, bool)
    for a, b in zip(starts, stops, strict=True):
        in_burst[a:b] = True
    ratio = np.where(expected > 0, qps / np.where(expected > 0, expected, 1.0), np.inf)
    peak = np.array([np.nanmax(qps[a:b]) for a, b in zip(starts, stops, strict=True)])
    peak_multiplier = np.array([np.nanmax(ratio[a:b]) for a, b in zip(starts, stops, strict=True)])
    multiplier = np.empty(starts.size)
    for side in sides:
        inside = (starts >= side.start) & (starts < (qps.size if side.stop is None else side.stop))
        part = (qps[side], codes[side], in_burst[side], starts[inside] - side.start)
        multiplier[inside] = _mean_multipliers(
            *part, stops[inside] - side.start, baseline, series["time"][side]
        )
    observed_s = float(np.count_nonzero(~np.isnan(qps)) * step / NS)
    return xr.Dataset(
        {
            "in_burst": ("time", in_burst, glossary.attrs("in_burst")),
            "burst_start": ("burst", series["time"].values[starts], glossary.attrs("burst_start")),
            "duration_s": ("burst", (stops - starts) * step / NS, glossary.attrs("duration_s")),
            "peak_qps": ("burst", peak.reshape(-1), glossary.attrs("peak_qps")),
            "multiplier": ("burst", multiplier.reshape(-1), glossary.attrs("multiplier")),
            "peak_multiplier": (
                "burst",
                peak_multiplier.reshape(-1),
                glossary.attrs("peak_multiplier"),
            ),
        },
        coords={"time": series["time"]},
        attrs={
            "title": "detected bursts",
            "factor": factor,
            "min_duration_s": length * step / NS,
            "reference_quantile": float(reference_quantile),
            "slots": baseline.attrs["slots"],
            "observed_s": observed_s,
            "interval_s": step / NS,
            "level_shift": "none" if shift is None else _shift_words(series, shift),
        },
    )


def _references(series: xr.Dataset, baseline: xr.Dataset, codes, reference_quantile: float):
    """Each interval's reference rate (its slot's ``reference_quantile``), the shift and sides.

    After a level shift each side is measured against its own baseline. Returns (reference per
    interval, the shift or None, the sides as slices).
    """
    qps = series["qps"].values.astype(float)
    step = interval_ns_of(series)
    shift = level_shift_in(qps, DAY_NS // step) if DAY_NS % step == 0 else None
    sides = [slice(0, qps.size)] if shift is None else [slice(0, shift[0]), slice(shift[0], None)]
    expected = np.empty(qps.size)
    for side in sides:
        own = baseline if shift is None else _side_baseline(series, side, baseline)
        expected[side] = own.target_qps.sel(traffic_quantile=reference_quantile).values[codes[side]]
    return expected, shift, sides


def burst_free(series: xr.Dataset, slots: str | tuple | Slots = "hour_of_day"):
    """The series with each detected burst's intervals at the rate it was measured against.

    Bursts are events for the burst buffer (:func:`simulate` draws them), not part of the
    baseline a forecast carries: a burst left in a forecast's history is repeated by a seasonal
    naive, and its misses, pooled into the conformal errors, widen the plan of every slot, so the
    fixed plan holds the burst and the Monte Carlo adds bursts on top of it. Each interval of a
    burst found by :func:`detect_bursts` (its defaults, on ``slots``) is set to its slot's median
    (the detector's reference; each side's own after a level shift); a missing one stays missing.
    A burst still running at the last observed interval is left as observed: until it ends it
    cannot be told from a level shift.
    Bursts found more often than :data:`RECURRING_PER_WEEK` a week recur: the series is returned
    as it is. Returns (the series, the :func:`detect_bursts` result, words saying what was
    replaced, starting "none" or "kept" where nothing was). A series spanning under
    :data:`capnb.forecast.MIN_DAYS` days is returned as it is (``found`` is then None): against
    less than a week a weekday's level or a young service's ramp passes for a burst, as a
    weekday pattern for a trend.
    """
    span_days = series.sizes["time"] * interval_ns_of(series) / DAY_NS
    if span_days < MIN_DAYS:
        return series, None, young_words(span_days)
    baseline = fit_baseline(series, slots=slots)
    found = detect_bursts(series, baseline)
    count = found.sizes["burst"]
    if count == 0:
        return series, found, "none detected (detect_bursts' defaults)"
    weeks = found.attrs["observed_s"] / (7 * 86_400)
    if count > RECURRING_PER_WEEK * max(weeks, 1.0):
        words = (
            f"kept: {count} detected in {7 * weeks:.3g} days observed, more than "
            f"{RECURRING_PER_WEEK:g} a week, so they recur and are the baseline's"
        )
        return series, found, words
    codes = slot_codes(series["time"], _slots_of(baseline))
    expected = _references(series, baseline, codes, 0.5)[0]
    qps = series["qps"].values.astype(float)
    replace = found["in_burst"].values & ~np.isnan(qps)
    running = _running_at_end(found["in_burst"].values, qps)
    replace[running:] = False  # not yet ended: it cannot be told from a level shift
    qps[replace] = expected[replace]
    result = series.copy()
    result["qps"] = ("time", qps, series["qps"].attrs)
    if "requests" in result:  # the counts of an interval follow its rate
        counts = result["requests"].values.astype(float)
        counts[replace] = qps[replace] * interval_ns_of(series) / NS
        result["requests"] = ("time", counts, series["requests"].attrs)
    shown = [
        f"{str(start)[:16].replace('T', ' ')} for {_duration(float(length))} at {size:.2g}x"
        for start, length, size in zip(
            found.burst_start.values[:3], found.duration_s.values, found.multiplier.values,
            strict=False,
        )
    ]  # fmt: skip
    more = f" and {count - 3} more" if count > 3 else ""
    words = (
        f"{count} burst(s) detected ({'; '.join(shown)}{more}), {int(replace.sum())} intervals "
        "set to their slot's median, the rate each was measured against: bursts are the burst "
        "buffer's (the Monte Carlo's), not the baseline's"
    )
    if running < qps.size:
        words += (
            f"; {RUNNING} ({qps.size - running} intervals) left as observed: until it ends it "
            "cannot be told from a level shift"
        )
    return result, found, words


def _running_at_end(in_burst: np.ndarray, qps: np.ndarray) -> int:
    """Where the burst still running at the last observed interval starts (``qps.size``: none)."""
    seen = np.flatnonzero(~np.isnan(qps))
    if seen.size == 0 or not in_burst[seen[-1]]:
        return qps.size
    starts, _ = runs(in_burst)
    return int(starts[starts <= seen[-1]][-1])


def young_words(days: float) -> str:
    """Why bursts were left in a history of ``days`` (under :data:`MIN_DAYS`): words "none ..."."""
    return (
        f"none set to their baseline: {days:.3g} days of history, under the {MIN_DAYS} a burst is "
        "told from the level against (before a week, a weekday's level or a young service's ramp "
        "passes for a burst)"
    )


def _side_baseline(series: xr.Dataset, side: slice, baseline: xr.Dataset) -> xr.Dataset:
    """The baseline of one side of a level shift, on the given baseline's slots and quantiles."""
    quantiles = baseline.traffic_quantile.values
    return fit_baseline(series.isel(time=side), slots=_slots_of(baseline), quantiles=quantiles)


def _shift_words(series: xr.Dataset, shift: tuple[int, float, float]) -> str:
    when = str(series["time"].values[shift[0]])[:16].replace("T", " ")
    return (
        f"{shift_words(when, shift)}; bursts are looked for on each side against its own "
        "baseline, so the shift is no burst"
    )


def _bridged(above: np.ndarray, missing: np.ndarray, longest: int) -> np.ndarray:
    """``above`` with each hole of at most ``longest`` intervals between two intervals above filled.

    A burst with a few unlogged minutes inside is one burst: left as two, its rate per month
    doubled and its duration halved. A longer hole could have held a quiet stretch, so it ends the
    run.
    """
    out = above.copy()
    starts, stops = runs(missing)
    for a, b in zip(starts, stops, strict=True):
        if 0 < a and b < above.size and above[a - 1] and above[b] and b - a <= longest:
            out[a:b] = True
    return out


def _mean_multipliers(qps, codes, in_burst, starts, stops, baseline, time) -> np.ndarray:
    """Each burst's mean factor on the baseline :func:`simulate` multiplies.

    The Monte Carlo's demand is slot mean x noise x burst factor, the slot mean taken over the
    intervals outside the bursts and the noise a ratio of mean 1 (:func:`month_inputs`); so a
    burst's factor is the mean over its intervals of qps / that slot mean. (Its highest interval
    over the slot median, ``peak_multiplier``, has the noise in it a second time: a 2-hour 6x burst
    under log-normal noise of sigma 0.3 read 11.8x that way.)
    """
    quiet = np.where(in_burst, np.nan, qps)
    _, mean, _ = slot_statistics(quiet, codes, np.array([0.5]), _slots_of(baseline).count)
    level = mean[codes]
    out = np.empty(starts.size)
    for i, (a, b) in enumerate(zip(starts, stops, strict=True)):
        usable = ~np.isnan(qps[a:b]) & ~np.isnan(level[a:b]) & (level[a:b] > 0)
        if not usable.any():
            spec = _slots_of(baseline)
            raise InputError(
                f"the burst starting {str(time.values[a])[:16]} has no baseline to be measured "
                f"against: its {_slot_list(spec, np.unique(codes[a:b]))} no observed interval "
                "outside the detected bursts with a rate above zero. Give more history, or "
                "coarser slots"
            )
        out[i] = float(np.mean(qps[a:b][usable] / level[a:b][usable]))
    return out


def checked_baseline(baseline: object) -> xr.Dataset:
    """The baseline if it is :func:`fit_baseline`'s answer (per slot and quantile); else raise."""
    if not isinstance(baseline, xr.Dataset):
        got = f"a {type(baseline).__name__}"
    elif "target_qps" not in baseline or not {"slot", "traffic_quantile"} <= set(
        baseline["target_qps"].dims
    ):
        got = "a Dataset without target_qps over slot and traffic_quantile"
    else:
        _slots_of(baseline)
        return baseline
    raise InputError(f"baseline must be the output of capnb.forecast.fit_baseline, got {got}")


def _slots_of(baseline: xr.Dataset) -> Slots:
    kind = baseline.attrs.get("slots")
    if kind is None or "slot_s" not in baseline.attrs:
        raise InputError("baseline must come from capnb.forecast.fit_baseline (it lacks 'slots')")
    return Slots(kind, round(baseline.attrs["slot_s"] * NS), round(baseline.attrs["period_s"] * NS))


def fit_burst_model(bursts: xr.Dataset) -> BurstModel:
    """A :class:`BurstModel` from detected bursts: their rate per month and observed ranges.

    With no burst detected the rate is 0 (and the ranges are the article's, unused). The fewer
    bursts, the weaker the fit: the model's ``source`` says how many bursts in how many days, and
    the Poisson 95 % upper bound of the rate (``-ln(0.05) = 3.0`` events when none was seen).
    """
    if not isinstance(bursts, xr.Dataset) or "observed_s" not in bursts.attrs:
        raise InputError("bursts must come from capnb.forecast.detect_bursts")
    count = int(bursts.sizes["burst"])
    months = bursts.attrs["observed_s"] / _MONTH_S
    days = bursts.attrs["observed_s"] / 86_400
    upper = _poisson_upper(count) / months
    source = (
        f"fitted: {count} burst{'s' if count != 1 else ''} in {days:.1f} days; "
        f"95% upper bound {upper:.3g} a month"
    )
    if count == 0:
        return BurstModel(rate_per_month=0.0, source=source)
    durations = bursts.duration_s.values
    multipliers = bursts.multiplier.values
    return BurstModel(
        rate_per_month=count / months,
        duration_s=(float(durations.min()), float(durations.max())),
        multiplier=(max(1.0, float(multipliers.min())), max(1.0, float(multipliers.max()))),
        source=source,
    )


def _poisson_upper(count: int, level: float = 0.95) -> float:
    """Upper confidence bound of a Poisson mean after ``count`` events (exact, by bisection)."""
    low, high = 0.0, 10.0 + 10.0 * count
    for _ in range(200):
        mid = (low + high) / 2
        cdf = sum(math.exp(-mid) * mid**k / math.factorial(k) for k in range(count + 1))
        low, high = (mid, high) if cdf > 1 - level else (low, mid)
    return high


# -- Monte Carlo -----------------------------------------------------------------------------
@dataclass(frozen=True)
class MonthInputs:
    """What the Monte Carlo kernel takes: a month of baseline minutes and the noise pool.

    Attributes
    ----------
    base
        The baseline of each minute of the month, requests/s (minutes,).
    noise
        Multiplicative residuals (k,), ratios with mean 1 per slot, ordered by their slot's
        baseline (in time order when every minute draws from all of them).
    noise_block
        Minutes per noise draw (the series' interval).
    excluded
        The number of intervals left out of the baseline and noise as bursts.
    pool_start, pool_size
        Per minute (minutes,), the residuals its noise is drawn from:
        ``noise[pool_start[m] : pool_start[m] + pool_size[m]]`` (:func:`noise_pools`). Not
        given: every minute draws from all of them.
    """

    base: np.ndarray
    noise: np.ndarray
    noise_block: int
    excluded: int
    pool_start: np.ndarray | None = None
    pool_size: np.ndarray | None = None

    def __post_init__(self):
        if self.pool_start is None:
            object.__setattr__(self, "pool_start", np.zeros(self.base.size, np.int64))
        if self.pool_size is None:
            object.__setattr__(self, "pool_size", np.full(self.base.size, self.noise.size))


def noise_pools(level: np.ndarray, slot_mean: np.ndarray, fewest: int | None):
    """Each slot's range of the residuals, ordered by their slot's baseline: its level's noise.

    ``level`` (k,) is the baseline of each residual's slot, ``slot_mean`` (slots,) every slot's
    baseline. A slot draws from the residuals of the slots of its own baseline, widened to the
    ``fewest`` nearest in level (half below, half above, shifted at the ends), since the noise of
    a rate is relative to its level: counts of a Poisson stream of rate r over an interval spread
    by 1 / sqrt(r x interval) of their mean, so a quiet hour's ratios are wider than a busy one's
    (1.45 against 1.17 at P99 on a request log of 0.5-3.5 requests/s per minute). None: every slot
    draws from all of them.

    A smaller pool also has a shorter tail: a month's peak is about the largest residual its
    busiest slot draws, so with the same noise in every hour (14 days at one minute) pools of one
    slot's 840 residuals put ``required_qps`` 11 % under one pool of all 20,160. Level pools trade
    the quiet hours' wider spread for that truncation, which is why they are not the default.

    Returns (order, start, size): the residuals' order and, per slot, its range in that order.
    """
    k = level.size
    if fewest is None or fewest >= k:
        return np.arange(k), np.zeros(slot_mean.size, np.int64), np.full(slot_mean.size, k)
    order = np.argsort(level, kind="stable")
    ranked = level[order]
    own_low = np.searchsorted(ranked, slot_mean, side="left")
    own_high = np.searchsorted(ranked, slot_mean, side="right")
    size = np.maximum(own_high - own_low, fewest)
    start = np.clip((own_low + own_high) // 2 - size // 2, 0, k - size)
    return order, start.astype(np.int64), size.astype(np.int64)


def month_inputs(
    series: xr.Dataset,
    baseline: xr.Dataset,
    *,
    exclude: xr.Dataset | str | None = "detect",
    days: int = MONTH_DAYS,
    noise_pool_min: int | None = None,
) -> MonthInputs:
    """The baseline of every minute of a month (from Monday 00:00) and the residual noise pools.

    The baseline of a slot is the mean of its intervals outside bursts; the residuals are each
    such interval's qps over its slot's baseline, and a minute draws from all of them (default), or
    from those of its slot's level (:func:`noise_pools`: its slot's, widened to the
    ``noise_pool_min`` nearest in baseline). ``exclude``: ``"detect"`` (default: bursts found by
    :func:`detect_bursts` with its defaults), a :func:`detect_bursts` result, or None (keep all).
    """
    series = checked_series(series)
    spec = _slots_of(checked_baseline(baseline))
    step = interval_ns_of(series)
    if step % (60 * NS):
        raise InputError(
            f"the Monte Carlo runs per minute: resample the series to '1min' or a whole number of "
            f"minutes first (its interval is {step / NS:g} s)"
        )
    if isinstance(exclude, str) and exclude != "detect":
        raise InputError(
            f"exclude must be 'detect', a detect_bursts result or None, got {exclude!r}"
        )
    qps = series["qps"].values.astype(float).copy()
    observed = ~np.isnan(qps)
    if exclude is not None:
        found = detect_bursts(series, baseline) if isinstance(exclude, str) else exclude
        mask = found["in_burst"].reindex(time=series["time"], fill_value=False).values
        excluded = int(np.count_nonzero(mask & ~np.isnan(qps)))
        qps[mask] = np.nan
    else:
        excluded = 0
    codes = slot_codes(series["time"], spec)
    _, mean, count = slot_statistics(qps, codes, np.array([0.5]), spec.count)
    empty = np.flatnonzero(count == 0)
    if empty.size:
        seen = np.bincount(codes[observed], minlength=spec.count)[empty] > 0
        raise InputError(
            _no_baseline(spec, empty[~seen], empty[seen]),
            plan=_no_baseline(spec, empty[~seen], empty[seen], plan=True),
        )
    seen = ~np.isnan(qps) & (mean[codes] > 0)
    if not seen.any():  # no residual to draw: the pool would be empty
        quiet = int(np.count_nonzero(~np.isnan(qps)))
        raise InputError(
            f"series: every observed interval outside the detected bursts is 0 requests/s "
            f"({quiet} observed intervals), so there is no traffic for the Monte Carlo to vary; "
            "give a series with traffic"
        )
    if noise_pool_min is not None:
        noise_pool_min = _validate.positive_int(noise_pool_min, "noise_pool_min")
    noise = qps[seen] / mean[codes][seen]
    order, start, size = noise_pools(mean[codes][seen], mean, noise_pool_min)
    minutes = int(days) * 1440
    minute_ns = np.arange(minutes, dtype=np.int64) * 60 * NS
    slot = (minute_ns % spec.period_ns) // spec.slot_ns
    return MonthInputs(
        mean[slot], noise[order], int(step // (60 * NS)), excluded, start[slot], size[slot]
    )


def _no_baseline(
    spec: Slots, unobserved: np.ndarray, in_bursts: np.ndarray, *, plan: bool = False
) -> str:
    """Why slots have no baseline, for each cause the advice that fits it.

    ``plan``: the advice in a plan's settings, which set the series, slots and exclusion for it.
    """
    parts = []
    if unobserved.size:
        missing = (
            f"{_slot_list(spec, unobserved)} no observed interval: the series is missing there "
            "(it does not cover those times, or they fall in holes). "
        )
        if plan:
            coarser = (
                " or hour-of-day slots ([traffic] slots = 'hour_of_day')"
                if spec.kind == "hour_of_week"
                else ""
            )
            parts.append(
                missing + "Give a trace that covers every one of them ([traffic] trace, --trace: "
                f"a day or more for hour-of-day slots, a week for hour-of-week){coarser}"
            )
        else:
            parts.append(
                missing + "Give a series that covers them or coarser slots; if the service was "
                "idle then (not unlogged), count those stretches as zero (resample the log with "
                "gap=None, or load the rate series with zero_is_missing=False)"
            )
    if in_bursts.size:
        advice = (
            "Give a longer trace ([traffic] trace, --trace)"
            if plan
            else "Give more history, or keep the bursts in the baseline (exclude=None)"
        )
        parts.append(
            f"{_slot_list(spec, in_bursts)} every observed interval inside a detected burst. "
            + advice
        )
    return "the Monte Carlo needs a baseline for every slot, but " + "; and ".join(parts) + "."


def _slot_list(spec: Slots, slots: np.ndarray) -> str:
    """'3 hour of day slots (00:00-02:00, 05:00-06:00) have' (:meth:`Slots.named`)."""
    return f"{spec.named(slots)} ha{'ve' if slots.size != 1 else 's'}"


def _seed_words(seed: object) -> tuple[np.uint64, np.uint64]:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
        raise InputError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    return np.uint64(int(seed) & 0xFFFFFFFF), np.uint64(int(seed) >> 32)


def _capacity_grid(capacity_qps, inputs: MonthInputs, bursts: BurstModel, fixed_plan: float):
    if capacity_qps is None:
        # up to the largest demand the model can produce, with the fixed plan on a level
        upper = float(inputs.base.max() * inputs.noise.max() * bursts.multiplier[1])
        on_plan = max(1, round(200 * fixed_plan / upper)) if upper > 0 else 1
        step = fixed_plan / on_plan if fixed_plan > 0 else max(upper, 1.0) / 200
        return np.arange(math.ceil(upper / step) + 2) * step
    grid = np.asarray(capacity_qps, dtype=float)
    if grid.ndim != 1 or grid.size < 2 or not np.isfinite(grid).all():
        raise InputError("capacity_qps must be at least two finite capacity levels, requests/s")
    if (grid < 0).any():
        raise InputError(
            f"capacity_qps holds {grid.min():g} requests/s: capacity levels must be >= 0"
        )
    steps = np.diff(grid)
    if (steps <= 0).any() or not np.allclose(steps, steps[0], rtol=1e-9, atol=0):
        raise InputError("capacity_qps must be evenly spaced and increasing (e.g. np.linspace)")
    return grid


@declare_units(capacity_qps="requests/s")
def simulate(
    series: xr.Dataset,
    baseline: xr.Dataset,
    bursts: BurstModel | None = None,
    *,
    trials: int = 10_000,
    days: int = MONTH_DAYS,
    seed: int = 0,
    exceed_probability: float = 0.05,
    plan_quantile: float | None = None,
    capacity_qps=None,
    exclude: xr.Dataset | str | None = "detect",
    chunks: int | None = None,
    noise_pool_min: int | None = None,
) -> xr.Dataset:
    """Monte Carlo months at minute resolution: monthly peaks, exceedance curve and the buffer.

    Each trial is one month (``days`` x 1,440 minutes, starting Monday 00:00 of the slot clock):
    demand(minute) = slot baseline x noise x burst factor, the noise drawn once per series
    interval from the series' own residuals (``noise_pool_min``), the bursts from ``bursts``.

    Parameters
    ----------
    series, baseline
        The history (interval a whole number of minutes) and its slot baselines.
    bursts
        The burst model (default: the article's, :class:`BurstModel`).
    trials, days, seed
        Number of months, days per month, and the seed (results are identical for a given seed,
        whatever the thread count or ``chunks``).
    exceed_probability
        The chosen monthly probability of demand exceeding capacity, for ``required_qps``.
    plan_quantile
        The traffic quantile of the fixed plan (default: the baseline's highest); the fixed plan is
        the busiest slot's ``target_qps`` at it.
    capacity_qps
        Evenly spaced capacity levels of the exceedance curve, requests/s (default: from 0 to the
        largest possible demand, with the fixed plan on a level).
    exclude
        Bursts left out of the baseline and noise (see :func:`month_inputs`).
    chunks
        Trials per dask chunk (needs dask); the result is the same as without.
    noise_pool_min
        None (default): every slot draws its noise from all the residuals. A number: the fewest a
        slot draws from, its own slot's widened to those of the slots nearest in baseline level
        (:func:`noise_pools`, which says what each choice misstates).

    Returns
    -------
    xarray.Dataset
        ``monthly_peak_qps`` and ``mean_qps`` over ``trial``; ``exceed_probability`` (probability
        that demand exceeds the level at least once in a month) and ``minutes_above`` (expected
        minutes per month above it) over ``capacity_qps``; ``required_qps`` (the smallest capacity
        whose monthly exceedance probability is at most ``exceed_probability``) and ``buffer_qps``
        (= required_qps - fixed plan, at least 0). Attrs: the settings, ``fixed_plan_qps`` and
        ``burst_model``.
    """
    bursts = BurstModel() if bursts is None else bursts
    if not isinstance(bursts, BurstModel):
        raise InputError(f"bursts must be a BurstModel, got {type(bursts).__name__}")
    trials = _validate.positive_int(trials, "trials")
    days = _validate.positive_int(days, "days")
    _validate.within_budget(  # measured: about 1.7 KB and 48 us of CPU per 30-day trial; the
        # month's minute clock, its slots and baseline: 32 bytes a minute of ``days``
        f"trials={trials:,} Monte Carlo months of {days:,} days",
        nbytes=trials * 1800.0 + days * 1440 * 32.0,
        seconds=trials * days * 1440 * 1.2e-9,
        lower="lower trials (2,000 resolve a 5 % monthly exceedance to about 0.5 %) or days "
        f"(a month is {MONTH_DAYS} days)",
    )
    probability = _validate.fraction(exceed_probability, "exceed_probability", low_open=True)
    key = _seed_words(seed)
    quantiles = checked_baseline(baseline).traffic_quantile.values
    plan_quantile = float(quantiles[-1]) if plan_quantile is None else plan_quantile
    if plan_quantile not in quantiles:
        raise InputError(
            f"plan_quantile={plan_quantile} is not among the baseline's traffic_quantile values "
            f"{quantiles.tolist()}"
        )
    fixed_plan = float(baseline.target_qps.sel(traffic_quantile=plan_quantile).max("slot"))
    inputs = month_inputs(
        series, baseline, exclude=exclude, days=days, noise_pool_min=noise_pool_min
    )
    grid = _capacity_grid(capacity_qps, inputs, bursts, fixed_plan)
    ids = xr.DataArray(np.arange(trials, dtype=np.int64), dims="trial")
    if chunks is not None:
        ids = ids.chunk({"trial": _validate.positive_int(chunks, "chunks")})
    mean_count = bursts.rate_per_month * days / MONTH_DAYS
    kwargs = {"inputs": inputs, "bursts": bursts, "mean_count": mean_count, "key": key}
    peak, mean, above = xr.apply_ufunc(
        _months.month_block,
        ids,
        kwargs={**kwargs, "grid": grid},
        output_core_dims=[[], [], ["capacity_qps"]],
        dask="parallelized",
        output_dtypes=[float, float, np.int64],
        dask_gufunc_kwargs={"output_sizes": {"capacity_qps": grid.size}},
    )
    peak = peak.compute()
    # a month exceeds a level exactly when its peak does
    exceeded = xr.DataArray(_months.peaks_above(peak.values, grid), dims="capacity_qps")
    trial_coord = ("trial", np.arange(trials), glossary.attrs("trial"))
    result = xr.Dataset(
        {
            "monthly_peak_qps": peak.assign_attrs(glossary.attrs("monthly_peak_qps")),
            "mean_qps": mean.assign_attrs(glossary.attrs("mean_qps")),
            "exceed_probability": exceeded.assign_attrs(glossary.attrs("exceed_probability")),
            "minutes_above": _months.minutes_above(above).assign_attrs(
                glossary.attrs("minutes_above")
            ),
        },
        coords={
            "trial": trial_coord,
            "capacity_qps": ("capacity_qps", grid, glossary.attrs("capacity_qps")),
        },
        attrs={
            "title": f"Monte Carlo: {trials:,} months of {days} days at minute resolution",
            "seed": int(seed),
            "trials": trials,
            "days": days,
            "chosen_exceed_probability": probability,
            "plan_quantile": plan_quantile,
            "fixed_plan_qps": fixed_plan,
            "burst_model": bursts.describe(),
            "noise_pool": int(inputs.noise.size),
            "noise_pool_min": "all" if noise_pool_min is None else int(noise_pool_min),
            "noise_block_min": inputs.noise_block,
            "excluded_burst_intervals": inputs.excluded,
            "month_start": "Monday 00:00 of the slot clock",
        },
    ).compute()
    return _choose(result, probability)


def _choose(simulation: xr.Dataset, probability: float) -> xr.Dataset:
    """``required_qps`` and ``buffer_qps`` of a simulation for another exceedance probability.

    The months do not depend on the probability: :func:`capnb.forecast.target_from` re-chooses
    without re-simulating.
    """
    probability = _validate.fraction(probability, "exceed_probability", low_open=True)
    fixed_plan = float(simulation.attrs["fixed_plan_qps"])
    required = _required(np.asarray(simulation.monthly_peak_qps.values), probability)
    result = simulation.assign(
        required_qps=((), required, glossary.attrs("required_qps")),
        buffer_qps=((), max(0.0, required - fixed_plan), glossary.attrs("buffer_qps")),
    )
    result.attrs["chosen_exceed_probability"] = probability
    return result


def _required(peaks: np.ndarray, probability: float) -> float:
    """Smallest simulated peak C with share(peak > C) <= probability (the empirical quantile)."""
    ordered = np.sort(peaks)
    allowed = math.floor(probability * ordered.size + 1e-9)  # months that may exceed
    return float(ordered[max(0, ordered.size - 1 - allowed)])

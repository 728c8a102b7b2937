"""The history carried to the coming days by the chosen growth model (what a target plans on)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import _validate
from ..data._series import checked_series, slot_codes
from ..data._series import slots as slot_spec
from ..errors import InputError
from ._models import FORECAST_MODELS
from ._select import DEFAULT_MODELS, MIN_SCORED_ORIGINS, _TooShort, select

__all__ = ["TARGET_GROWTH_MODELS", "carry", "selection_quantiles"]

#: What :func:`capnb.forecast.target` plans on: ``"auto"`` (the default: the candidate chosen by
#: rolling origins inside the history, :func:`capnb.forecast.select`), one candidate by name
#: (:data:`capnb.forecast.FORECAST_MODELS`), ``"probabilistic"`` (the log-linear trend with its
#: Student-t band, :func:`capnb.forecast.predict`) or ``"none"`` (the past quantiles as they are).
TARGET_GROWTH_MODELS = ("auto", *FORECAST_MODELS, "probabilistic", "none")


def selection_quantiles(quantile: float) -> tuple[tuple, tuple]:
    """The quantiles a selection plans (P50, P95, P99 and the plan's) and those it scores (>= 0.9).

    The median is planned, not scored: :func:`carry` maps each slot's past median to the model's,
    so a slot's ordinary intervals follow the model's median, not its P99's ratio.
    """
    planned = tuple(sorted({0.5, 0.95, 0.99, float(quantile)}))
    scored = tuple(q for q in planned if q >= 0.9)
    return planned, scored


def _times(series: xr.Dataset, per_interval: np.ndarray, words: str) -> xr.Dataset:
    per_interval = xr.DataArray(per_interval, dims="time")
    result = series.copy()
    for name in ("qps", "requests"):
        if name in result:
            result[name] = (result[name] * per_interval).assign_attrs(series[name].attrs)
    result.attrs["growth_model"] = words
    return result


def _knots(values: np.ndarray, quantiles: np.ndarray, targets: np.ndarray):
    """A slot's map from past rates to the model's: ``(x, y)`` knots, or None where none fits.

    Each quantile ``p`` is read by numpy's linear method between the two order statistics at
    ``(n - 1) p``, weights ``1 - f`` and ``f``; both are scaled by the quantile's own factor
    (target / past quantile), so the carried slot's quantile at ``p`` is the target exactly. Where
    the lower one's image would fall below the knots before it (a burst in the pair above the
    slot's ordinary maximum, its factor far below the median's), it is raised halfway from the
    last image to the target and the upper one takes what keeps the quantile exact:
    ``(target - (1 - f) y_lo) / f``. Two quantiles read off the same pair (a short slot's P95 and
    P99) set its two images together, the only ones that give both targets; a third on that pair
    has no images left to set (a slot of 3 intervals reads its P50, P95 and P99 off its two
    largest), so no map goes through all three.
    Between knots the map is linear in the rate, below the lowest and above the highest it is the
    end factor times the rate. None when the map cannot be increasing (the model's quantiles out
    of order, a quantile of zero under a positive target, pairs that share a rate and disagree, a
    third quantile on one pair, an image below 0 requests/s, an image above 0 for a rate of 0:
    the carry multiplies each rate, so an idle interval stays idle).
    """
    x = np.sort(values)
    n = x.size
    knots_x, knots_y = [], []
    last = (-1, 0.0, 0.0)  # the previous quantile's lower order statistic, its f and target
    shared = -1  # the lower order statistic of a pair whose images two quantiles set
    for p, target in zip(quantiles, targets, strict=True):
        lo = int(np.floor((n - 1) * p))
        hi, f = min(lo + 1, n - 1), (n - 1) * p - lo
        past = float(np.quantile(x, p))
        if not (np.isfinite(target) and past > 0 and target >= 0):
            return None
        if lo == last[0] and hi > lo and f > last[1]:  # two quantiles read off one pair
            if lo == shared:  # its images already give two targets: a third moves them
                return None
            shared = lo
            gap = (target - last[2]) / (f - last[1])
            knots_y[-2:] = [last[2] - last[1] * gap, last[2] + (1 - last[1]) * gap]
            last = (lo, f, target)
            continue
        last = (lo, f, target)
        y_lo, y_hi = x[lo] * (target / past), x[hi] * (target / past)
        floor = knots_y[-1] if knots_y else 0.0
        if knots_x and x[lo] == knots_x[-1]:
            y_lo = floor  # the rate already has an image
        elif y_lo <= floor and f > 0 and x[lo] > 0:  # an idle rate's image is 0, never raised
            y_lo = (floor + target) / 2  # above the last image, under the quantile's target
        if y_lo != x[lo] * (target / past):
            if f <= 0 or y_lo > target:
                return None
            y_hi = (target - (1 - f) * y_lo) / f
        knots_x.extend((x[lo], x[hi]))
        knots_y.extend((y_lo, y_hi))
    kx, ky = np.asarray(knots_x), np.asarray(knots_y)
    if np.any(np.diff(kx) < 0) or np.any(np.diff(ky) < 0) or ky[0] < 0:
        return None
    if np.any(ky[kx == 0] != 0):  # the carry is a factor on each rate: 0 requests/s stays 0
        return None
    same = np.diff(kx) == 0
    if np.any(ky[1:][same] != ky[:-1][same]):  # one rate, two images
        return None
    return kx, ky


def _mapped(series: xr.Dataset, selection: xr.Dataset, slots, q: float, words: str):
    """Each slot's past rates mapped onto the model's quantiles (see :func:`_knots`).

    Where no increasing map goes through every quantile of the selection (a burst in the slot's
    past the model does not carry: its P95 factor far above its P99's), the map goes through the
    median and the plan's quantile ``q`` only, else through ``q`` alone (one factor for the slot);
    a slot without a finite factor at ``q`` (its past at ``q`` is 0 requests/s) is left as it is.
    A slot with no traffic in the past and a plan of 0 requests/s at ``q`` has nothing to map. The
    words say how many slots, and the model's highest rate at ``q`` among those left.
    """
    codes = slot_codes(series["time"], slot_spec(slots))
    qps = series["qps"].values
    quantiles = selection.traffic_quantile.values
    targets = selection.target_qps.values  # (slot, traffic_quantile)
    tries = [
        np.ones(quantiles.size, dtype=bool),
        (quantiles == quantiles.min()) | (quantiles == q),
        quantiles == q,
    ]
    per_interval = np.ones(qps.size)
    fewer: dict[str, int] = {}
    left: list[float] = []  # the model's rate at q (requests/s) of each slot left as it is
    unplanned = 0  # slots the model has no finite rate for at q, left as they are
    for slot in range(targets.shape[0]):
        where = np.flatnonzero((codes == slot) & np.isfinite(qps))
        if where.size == 0:
            continue
        values = qps[where]
        if not values.any() and targets[slot][quantiles == q].max() == 0:
            continue  # an idle slot planned at 0 requests/s: nothing to map
        for used in tries:
            knots = _knots(values, quantiles[used], targets[slot][used])
            if knots is not None:
                break
        if knots is None:
            at_q = float(targets[slot][quantiles == q][0])
            if not np.isfinite(at_q):
                unplanned += 1
            elif at_q > 0:  # a past of 0 at q, which no factor carries (idle in both: the model's)
                left.append(at_q)
            continue
        if not used.all():
            named = "/".join(f"P{100 * p:g}" for p in quantiles[used])
            fewer[named] = fewer.get(named, 0) + 1
        kx, ky = knots
        low, high = (ky[0] / kx[0] if kx[0] > 0 else 1.0), ky[-1] / kx[-1]
        image = np.interp(values, kx, ky)
        image = np.where(
            values < kx[0], values * low, np.where(values > kx[-1], values * high, image)
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            per_interval[where] = np.where(values > 0, image / values, low)
    for named, count in fewer.items():
        words += (
            f"; {count} slot(s) mapped at {named} only (no increasing map through all: too few "
            "intervals a slot to keep the quantiles apart, or a factor falling fast between them)"
        )
    if left:
        words += (
            f"; {len(left)} slot(s) left as they are (a P{100 * q:g} of 0 requests/s in the past, "
            f"which no factor carries to the model's: up to {max(left):.3g} requests/s)"
        )
    if unplanned:
        words += f"; {unplanned} slot(s) left as they are (no finite P{100 * q:g} from the model)"
    return _times(series, per_interval, words)


def _chosen_on(selection: xr.Dataset) -> str:
    """The origins the choice was pooled over, in words: those where every candidate planned.

    A candidate without plans at :data:`MIN_SCORED_ORIGINS` origins (one needing 7 days before
    an origin, on a shorter trace) has no score and was not compared: the words name the
    candidates compared and those left out.
    """
    pooled, total = int(selection.attrs["pooled_origins"]), selection.sizes["origin"]
    names = [str(name) for name in selection.forecast_model.values]
    compared = [n for n, s in zip(names, selection.score.values, strict=True) if not np.isnan(s)]
    left = [name for name in names if name not in compared]
    if not left:
        if pooled == total:
            return f" (chosen on all {total} origins, every candidate planned at each)"
        return f" (chosen on the {pooled} of {total} origins where every candidate planned)"
    among = (
        f"between {compared[0]} and {compared[1]}"
        if len(compared) == 2
        else f"among {', '.join(compared)}"
        if len(compared) > 2
        else f"as the only candidate compared, {compared[0]},"
    )
    each = {1: "it", 2: "both"}.get(len(compared), "each")
    return (
        f" (chosen {among} on the {pooled} of {total} origins where {each} planned; not "
        f"compared: {', '.join(left)}, with plans at fewer than {MIN_SCORED_ORIGINS} origins)"
    )


def _burst_free(series: xr.Dataset, selection: xr.Dataset, slots, words: str):
    """The history to carry: its bursts at their baseline where the selection set them so.

    A burst carried in the history would be in the fixed plan, and the Monte Carlo's bursts
    come on top of it: it is counted once, in the burst buffer. The words say so.
    """
    from ._bursts import RUNNING, burst_free

    said = str(selection.attrs.get("bursts", "kept"))
    if said.startswith("kept: "):  # found, but recurring: the baseline's
        return series, words + f"; bursts {said}"
    if said.startswith("none set") or (said.startswith("none") and RUNNING in said):
        # under a week, or one burst running at the end: carried as observed
        return series, words + f"; bursts {said}"
    if said.startswith(("kept", "none")):  # none found, or bursts="baseline"
        return series, words
    try:
        clean, _, here = burst_free(series, slots)
    except InputError:  # the selection found them; here a burst has nothing to measure it by
        return series, words + "; bursts kept in the carried history (no baseline to set them to)"
    if here.startswith(("kept", "none")):  # over the whole history they recur
        return series, words + f"; bursts: {said}; in the carried history {here}"
    running = f"; {here[here.index(RUNNING) :]}" if RUNNING in here else ""
    return clean, words + (
        f"; bursts: {said}; the carried history holds them at that median too (detected on "
        f"the whole history), so they are counted once, in the burst buffer{running}"
    )


def _checked_selection(selection, quantile: float, allowed) -> xr.Dataset:
    if not isinstance(selection, xr.Dataset) or not {"chosen_model", "pooled_origins"} <= set(
        selection.attrs
    ):
        raise InputError("selection must be the output of capnb.forecast.select")
    if quantile not in selection.traffic_quantile.values:
        raise InputError(
            f"selection: its quantiles {selection.traffic_quantile.values.tolist()} lack the "
            f"plan's {quantile:g}"
        )
    if selection.attrs["chosen_model"] not in allowed:
        raise InputError(f"selection chose {selection.attrs['chosen_model']!r}, not in {allowed}")
    return selection


def carry(
    series: xr.Dataset,
    *,
    slots="hour_of_day",
    quantile: float = 0.99,
    growth_model: str = "auto",
    horizon_days: int = 7,
    selection: xr.Dataset | None = None,
) -> xr.Dataset:
    """The history carried to the ``horizon_days`` after it, each slot mapped onto the model's plan.

    Each slot's past rates are mapped, increasing, so that the slot's quantiles in the selection
    (P50, P95, P99 and ``quantile``) become the model's forecast of them exactly:
    :func:`capnb.forecast.fit_baseline` of the result plans each slot on the growth model's plan
    at ``quantile``, and its median and mean follow the model's median, not the ratio at the plan's
    quantile (one burst day in a slot's past P99 would otherwise shrink its ordinary days). A slot
    the map cannot fit (the model's quantiles out of order, too few intervals, ties) is mapped at
    its median and ``quantile``, else scaled by its factor at ``quantile``; one idle at
    ``quantile`` (0 requests/s) is left as it is. The words say how many slots of each. Where
    the selection set bursts to their baseline (``select(..., bursts="buffer")``), the history
    carried holds them there too (:func:`capnb.forecast.detect_bursts` on the whole history),
    so that a plan counts them once, in the burst buffer, and the words say so.
    ``attrs["growth_model"]`` says what was done, in words starting with the model's
    name; a history the model cannot forecast (a selection with too few origins, a probabilistic
    plan with under 7 days, a series with extra dims) is returned as it is, with ``"none: "`` and
    why.

    Parameters
    ----------
    growth_model
        One of :data:`TARGET_GROWTH_MODELS`.
    selection
        A :func:`capnb.forecast.select` result on this series to reuse (``"auto"`` or a candidate).
    """
    from ._growth import MIN_DAYS, carry_forward, observed_days

    series = checked_series(series)
    q = _validate.fraction(quantile, "quantile", low_open=True)
    if growth_model not in TARGET_GROWTH_MODELS:
        raise InputError(
            f"growth_model must be one of {list(TARGET_GROWTH_MODELS)}, got {growth_model!r}"
        )
    if isinstance(horizon_days, bool) or not isinstance(horizon_days, int) or horizon_days < 1:
        raise InputError(f"horizon_days must be a positive integer, got {horizon_days!r}")
    same = series.copy()
    if growth_model == "none":
        same.attrs["growth_model"] = "none"
        return same
    if series["qps"].ndim > 1:
        same.attrs["growth_model"] = (
            f"none: the {growth_model} growth takes one series (qps over time only)"
        )
        return same
    if growth_model == "probabilistic":
        if observed_days(series) < MIN_DAYS:
            same.attrs["growth_model"] = (
                f"none: fewer than {MIN_DAYS} days observed, planned on the history as it is"
            )
            return same
        ahead = carry_forward(series, slots=slots, quantile=q, horizon_days=horizon_days)
        ahead.attrs["growth_model"] = f"probabilistic: {ahead.attrs['growth']}"
        return ahead
    allowed = DEFAULT_MODELS if growth_model == "auto" else (growth_model,)
    if selection is None:
        planned, scored = selection_quantiles(q)
        try:
            selection = select(
                series, slots=slots, quantiles=planned, score_quantiles=scored, models=allowed,
                horizon_days=horizon_days,
            )  # fmt: skip
        except _TooShort as error:
            same.attrs["growth_model"] = f"none: {error}; planned on the history as it is"
            return same
    selection = _checked_selection(selection, q, allowed)
    factor = selection.growth_factor.sel(traffic_quantile=q).values
    shown = factor[np.isfinite(factor)]
    named = "/".join(f"P{100 * p:g}" for p in selection.traffic_quantile.values)
    ratio = (
        f"its P{100 * q:g} x {shown.min():.3g} to {shown.max():.3g} of the past"
        if shown.size
        else f"no slot has a past P{100 * q:g} above 0 requests/s to scale"
    )
    words = (
        f"{growth_model}: {selection.attrs['chosen_model']}"
        f"{_chosen_on(selection) if growth_model == 'auto' else ''}"
        f", its {named} for the {selection.attrs['horizon_days']} days after the history: each "
        f"slot's past rates mapped onto them ({ratio})"
    )
    shift, short = (selection.attrs.get(name, "none") for name in ("level_shift", "under_a_week"))
    if shift != "none":
        words += f"; a level shift on {shift}: the model planned from the days after it alone"
    if short != "none":
        words += f"; {short}"
    series, words = _burst_free(series, selection, slots, words)
    result = _mapped(series, selection, slots, q, words)
    for name in ("choice", "goals", "origins", "gaps"):
        result.attrs[f"forecast_{name}"] = selection.attrs[name]
    return result

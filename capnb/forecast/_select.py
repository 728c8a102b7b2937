"""Choose the forecast by how it did on days it had not seen: rolling origins inside the history.

At every origin (every day, or every hour for a trace under :data:`HOURLY_BELOW_DAYS` days) each
candidate of :mod:`._models` forecasts the coming ``horizon_days`` from the values before the
origin alone. Its plan for a slot at quantile q is then calibrated on its own errors at the
earlier origins (split conformal): the q-quantile, over the slot's intervals of the horizon and
over the errors, of forecast + unit x error, an error being (demand - forecast) in the slot's
unit at its origin (``_scales``), taken from the windows of the origins of the last
:data:`CALIBRATION_DAYS` days, each cut at the origin (nothing after the origin is read). The
plan at an origin is therefore what one would have planned there.

A candidate is scored at each origin by the pinball loss of its plans over the scored window: a
proper score, whose best constant per slot is the window's own per-slot quantile (the hindsight
plan). :func:`select` chooses, at the end of the history and at every origin before it, the
candidate with the least pooled loss over the origins before: the record of those choices scored
on the windows after them is the selection's own out-of-sample record.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from .. import _validate, glossary, words
from ..data._series import (
    DAY_NS,
    NS,
    Slots,
    checked_series,
    duration_text,
    interval_ns_of,
    runs,
    slot_codes,
)
from ..errors import InputError
from ..kernels.forecast import mixture_bisect
from ._models import FORECAST_MODELS
from ._shift import level_shift_in, shift_words

__all__ = [
    "CALIBRATION_DAYS",
    "DEFAULT_MODELS",
    "HOURLY_BELOW_DAYS",
    "MIN_SCORED_ORIGINS",
    "select",
]

#: The candidates :func:`select` compares by default: every model of :data:`FORECAST_MODELS`.
DEFAULT_MODELS = tuple(FORECAST_MODELS)
#: A trace shorter than this (days) is backtested from an origin every hour instead of every day.
HOURLY_BELOW_DAYS = 8
#: The errors of the origins of the last this many days calibrate a plan (older ones are dropped:
#: traffic changes, and the oldest errors say least about the coming week).
CALIBRATION_DAYS = 28
#: A candidate is compared once it has plans scored at this many origins.
MIN_SCORED_ORIGINS = 2
_BISECTIONS = 64  # halvings of the bracket of a slot's mixture quantile


class _TooShort(InputError):
    """The history leaves too few origins for a rolling-origin choice (a plan falls back)."""


@dataclass
class _Setup:
    """The series as arrays, and the origins every candidate forecasts from."""

    values: np.ndarray  # requests/s, NaN where missing; bursts at their baseline (fit, errors)
    demand: np.ndarray  # requests/s as observed, bursts included (the record's coverage, excess)
    ns: np.ndarray  # interval starts
    step_ns: int
    per_day: int
    origin_step: int  # intervals between origins
    horizon: int  # intervals forecast from each origin
    origins: np.ndarray  # interval positions (the first scored interval of each)
    codes: np.ndarray  # slot of every interval, and of the horizon after the last one
    spec: Slots
    q: np.ndarray
    scored: np.ndarray  # which of q the score sums
    calibration: int  # intervals of origins whose errors calibrate a plan
    min_errors: int
    young: int = 0  # origins before it read ``demand`` (no week yet to tell a burst by)


@dataclass
class _Track:
    """One candidate's plans at every origin and their running sums over each scored window."""

    plans: dict = field(default_factory=dict)  # origin position -> (slot, q) plan
    errors: dict = field(default_factory=dict)  # origin position -> (demand - forecast) / scale
    sums: dict = field(default_factory=dict)  # origin position -> running sums (see _score)
    notes: list = field(default_factory=list)
    idle: int = 0  # origins the candidate forecasts no traffic at all from (an idle past)


def _origin_step(choice: str, days: float, per_day: int, step_ns: int) -> tuple[str, int]:
    if choice == "auto":
        choice = "day" if days >= HOURLY_BELOW_DAYS else "hour"
    if choice == "day":
        return "day", per_day
    if choice != "hour":
        raise InputError(f"origin_step must be 'auto', 'day' or 'hour', got {choice!r}")
    if (3600 * NS) % step_ns:
        raise InputError(
            f"origin_step='hour': the series' interval ({duration_text(step_ns)}) does not divide "
            "an hour; resample it or use origin_step='day'"
        )
    return "hour", (3600 * NS) // step_ns


def _setup(series, slots, quantiles, score_quantiles, horizon_days, origin_step):
    from ._baseline import _quantiles, _series_and_slots

    series, spec = _series_and_slots(series, slots)
    if series["qps"].ndim != 1:
        raise InputError("series: give one series (qps over time only); select the others away")
    step = interval_ns_of(series)
    if DAY_NS % step:
        raise InputError(
            f"the series' interval ({duration_text(step)}) does not divide a day: resample it"
        )
    ns = series["time"].values.astype("datetime64[ns]").view(np.int64)
    if ns.size > 1 and (np.diff(ns) != step).any():
        raise InputError("series: its times are not a regular grid of its interval; resample it")
    q = _quantiles(quantiles)
    scored = np.isin(q, _quantiles(score_quantiles, "score_quantiles"))
    if scored.sum() != np.unique(np.asarray(score_quantiles, dtype=float)).size:
        raise InputError(
            f"score_quantiles {np.atleast_1d(score_quantiles).astype(float).tolist()} must be "
            f"among quantiles {q.tolist()}: give score_quantiles= from them, or add them"
        )
    per_day = DAY_NS // step
    horizon = _validate.positive_int(horizon_days, "horizon_days") * per_day
    kind, every = _origin_step(origin_step, ns.size / per_day, per_day, step)
    origins = np.arange(per_day, ns.size, every)
    ahead = ns[-1] + step * np.arange(1, horizon + 1, dtype=np.int64)
    codes = slot_codes(np.concatenate([ns, ahead]).view("datetime64[ns]"), spec)
    values = series["qps"].values.astype(float)
    setup = _Setup(
        values=values,
        demand=values,
        ns=ns,
        step_ns=step,
        per_day=per_day,
        origin_step=every,
        horizon=horizon,
        origins=origins,
        codes=codes,
        spec=spec,
        q=q,
        scored=scored,
        calibration=CALIBRATION_DAYS * per_day,
        min_errors=math.ceil(1.0 / (1.0 - q[-1])),
    )
    return series, setup, kind


# -- plans: a candidate's forecast plus its calibrated errors ----------------------------------
def _scales(setup: _Setup, origin: int, forecast: np.ndarray) -> np.ndarray | None:
    """Each slot's unit of error: sqrt(slot's mean forecast x whole forecast's mean).

    Count noise grows as the square root of the rate, a level shift as the rate itself: the
    geometric mean of the slot's rate and the overall rate sits between. A unit per slot alone
    (its own mean) made a slot forecast nearly idle turn every later request into an enormous
    error that widened every slot's plan (plans 100-15,000x the hindsight's on ServeGen clients);
    one unit for all (the overall mean) planned capacity at night for a service idle every
    night. A slot forecast idle has unit 0: its errors are left out and its plan is 0.
    None for a forecast of no traffic at all.
    """
    codes = setup.codes[origin : origin + setup.horizon]
    ok = np.isfinite(forecast)
    if not ok.any() or forecast[ok].mean() <= 0:
        return None
    total = np.bincount(codes[ok], weights=forecast[ok], minlength=setup.spec.count)
    count = np.bincount(codes[ok], minlength=setup.spec.count)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(np.maximum(total / count, 0.0) * forecast[ok].mean())


def _seen_at(setup: _Setup, origin: int) -> np.ndarray:
    """The history as an origin reads it: bursts at their baseline from a week on, else as seen."""
    return setup.demand if origin < setup.young else setup.values


def _errors(setup: _Setup, origin: int, forecast, scale, values=None) -> np.ndarray:
    """(demand - forecast) / the slot's unit over the origin's window (NaN where not defined).

    The demand is ``values`` (default: the history as ``origin`` reads it, :func:`_seen_at`).
    """
    end = min(origin + setup.horizon, setup.values.size)
    values = _seen_at(setup, origin) if values is None else values
    with np.errstate(invalid="ignore", divide="ignore"):
        error = (values[origin:end] - forecast[: end - origin]) / scale[setup.codes[origin:end]]
    error[~np.isfinite(error)] = np.nan
    return error


def _mixture_quantiles(points, codes, scale, calibration, q) -> np.ndarray:
    """Per slot, the q-quantiles of point + scale x error over the slot's points and the errors.

    The mixture's CDF at x is the mean over the slot's points p of the share of errors below
    (x - p) / scale; its q-quantile (the least x where it reaches q) is found by bisection. A
    slot without a point gets NaN; a quantile below 0 is 0 (no negative capacity).
    """
    errors, cumulative = calibration
    n_slots = scale.size
    idle = scale == 0
    ok = np.isfinite(points) & ~idle[codes]
    points, codes = points[ok] / scale[codes[ok]], codes[ok]
    count = np.bincount(codes, minlength=n_slots)
    width = max(int(count.max()) if count.size else 0, 1)
    order = np.argsort(codes, kind="stable")
    rank = np.arange(order.size) - np.repeat(np.cumsum(count) - count, count)
    table = np.full((n_slots, width), np.nan)
    table[codes[order], rank] = points[order]
    seen = ~np.isnan(table)
    filled = np.where(seen, table, 0.0)
    with np.errstate(invalid="ignore"):  # a slot without points: its bracket is empty
        low = np.nanmin(np.where(seen, table, np.inf), axis=1) + errors[0]
        high = np.nanmax(np.where(seen, table, -np.inf), axis=1) + errors[-1]
    result = np.full((n_slots, q.size), np.nan)
    rows = count > 0
    upper = mixture_bisect(filled[rows], seen[rows].astype(np.float64), low[rows], high[rows],
                           errors, cumulative, np.asarray(q, dtype=np.float64), _BISECTIONS)  # fmt: skip
    result[rows] = np.maximum(upper, 0.0) * scale[rows][:, None]
    result[idle] = 0.0
    return result


def _calibration(setup: _Setup, track: _Track, origin: int) -> np.ndarray | None:
    """The sorted errors of the earlier origins' windows, each cut at ``origin``.

    Returned with the share of errors at or below each (0 first), which the mixture reads.
    """
    starts = [
        start for start in track.errors if start < origin and start >= origin - setup.calibration
    ]
    if not starts:
        return None
    pooled = np.concatenate([track.errors[start][: origin - start] for start in starts])
    pooled = np.sort(pooled[~np.isnan(pooled)])
    if pooled.size < setup.min_errors:
        return None
    return pooled, np.arange(pooled.size + 1) / pooled.size


def _plan(setup: _Setup, track: _Track, origin: int, forecast: np.ndarray, scale: np.ndarray):
    """The (slot, q) plan at ``origin``: None without enough errors or with a slot unplanned."""
    calibration = _calibration(setup, track, origin)
    if calibration is None:
        return None
    codes = setup.codes[origin : origin + setup.horizon]
    plan = _mixture_quantiles(forecast, codes, scale, calibration, setup.q)
    if np.isnan(plan[np.unique(codes)]).any():
        return None
    return plan


# -- scores: running sums over each origin's window -------------------------------------------
def _score(setup: _Setup, origin: int, plan: np.ndarray) -> dict:
    """Running sums over the window after ``origin`` (so that any cut of it is one lookup).

    ``pinball`` sums the pinball loss of the scored quantiles and ``demand`` the demand it is
    divided by, both on the baseline the candidates are fitted on (bursts at their baseline: a
    choice of baseline model, which a burst the buffer holds does not sway); ``count`` the
    observed intervals, ``hits`` and ``excess`` per quantile the covered intervals and the
    capacity above demand, on the demand as observed (bursts included: the record).
    """
    end = min(origin + setup.horizon, setup.values.size)
    seen = ~np.isnan(setup.demand[origin:end])
    capacity = plan[setup.codes[origin:end]]  # (t, q)
    base = np.where(seen, _seen_at(setup, origin)[origin:end], 0.0)
    gap = base[:, None] - capacity
    loss = np.where(gap > 0, setup.q * gap, (setup.q - 1.0) * gap)
    loss = np.where(seen[:, None], loss, 0.0)
    gap = np.where(seen, setup.demand[origin:end], 0.0)[:, None] - capacity
    return {
        "pinball": np.cumsum(loss[:, setup.scored].sum(axis=1)),
        "demand": np.cumsum(base),
        "count": np.cumsum(seen),
        "hits": np.cumsum((gap <= 0) & seen[:, None], axis=0),
        "excess": np.cumsum(np.where(seen[:, None], np.maximum(-gap, 0.0), 0.0), axis=0),
    }


def _track(setup: _Setup, name: str) -> _Track:
    """Forecasts, errors, plans and their scores of one candidate at every origin."""
    rule, _ = FORECAST_MODELS[name]
    track = _Track()
    for origin in setup.origins:
        if origin == setup.young:  # a week seen: the earlier windows' errors as it tells them
            track.errors = _told_errors(setup, rule, track.errors)
        forecast = rule(_seen_at(setup, origin)[:origin], setup.per_day, setup.horizon)
        scale = None if forecast is None else _scales(setup, origin, forecast.values)
        if scale is None:
            track.idle += forecast is not None
            continue
        plan = _plan(setup, track, origin, forecast.values, scale)
        track.errors[int(origin)] = _errors(setup, origin, forecast.values, scale)
        if plan is not None:
            track.plans[int(origin)] = plan
            track.sums[int(origin)] = _score(setup, origin, plan)
    return track


def _told_errors(setup: _Setup, rule, errors: dict) -> dict:
    """The errors of the windows before ``setup.young``, forecast and scored on ``setup.values``.

    Before a week the history is read as observed; from the origin at a week on, the first week
    holds its bursts at their baseline (told from the week up to that origin alone), and the
    earlier windows' forecasts and errors are those the told history gives.
    """
    told = {}
    for start in errors:
        forecast = rule(setup.values[:start], setup.per_day, setup.horizon)
        scale = None if forecast is None else _scales(setup, start, forecast.values)
        if scale is not None:
            told[start] = _errors(setup, start, forecast.values, scale, setup.values)
    return told


def _cut(sums: dict, origin: int, boundary: int) -> int:
    """Index of the last running sum of the window after ``origin`` cut at ``boundary``."""
    return min(boundary - origin, sums["pinball"].size) - 1


def _choose(tracks: dict, boundary: int):
    """The candidate with the least pooled loss over the origins before ``boundary``.

    Compared on the origins where every candidate with plans at :data:`MIN_SCORED_ORIGINS` or
    more has one (a later starter narrows the comparison rather than being compared on other
    days). Returns (name or None, {name: score}, origins compared).
    """
    planned = {
        name: [
            o for o, s in track.sums.items() if o < boundary and s["count"][_cut(s, o, boundary)]
        ]
        for name, track in tracks.items()
    }
    eligible = [name for name, found in planned.items() if len(found) >= MIN_SCORED_ORIGINS]
    if not eligible:
        return None, {}, []
    common = sorted(set.intersection(*(set(planned[name]) for name in eligible)))
    if len(common) < MIN_SCORED_ORIGINS:
        return None, {}, []
    scores = {}
    for name in eligible:
        sums = tracks[name].sums
        loss = sum(sums[o]["pinball"][_cut(sums[o], o, boundary)] for o in common)
        demand = sum(sums[o]["demand"][_cut(sums[o], o, boundary)] for o in common)
        scores[name] = loss / demand if demand > 0 else np.inf
    return min(eligible, key=lambda name: scores[name]), scores, common


# -- the record --------------------------------------------------------------------------------
#: The issue's goals for a calibrated plan: pooled coverage of held-out windows per quantile, and
#: the over-provisioning over the hindsight plan's where the level is flat.
COVERAGE_GOALS = {0.95: (0.93, 0.97), 0.99: (0.97, 0.995)}
FLAT_RATIO_GOAL = 1.25
#: A scored window counts as flat when its mean is within this share of the last fitted week's.
FLAT_CHANGE = 0.10


def _hindsight(setup: _Setup, origin: int) -> tuple[np.ndarray, float, int]:
    """The window's own per-slot quantiles' excess capacity (per q), demand and observed count."""
    from ._baseline import slot_statistics

    end = min(origin + setup.horizon, setup.values.size)
    demand = setup.demand[origin:end]
    codes = setup.codes[origin:end]
    own = slot_statistics(demand, codes, setup.q, setup.spec.count)[0]
    seen = ~np.isnan(demand)
    excess = np.maximum(own[codes[seen]] - demand[seen, None], 0.0).sum(axis=0)
    return excess, float(demand[seen].sum()), int(seen.sum())


def _level_change(setup: _Setup, origin: int) -> float:
    """The window's mean over the mean of the (up to) 7 days before the origin, minus 1.

    A window of part of a day (a short trace's hourly origins, a window cut where the series
    ends) is set against the same times of day before it: against whole days, 16:00-24:00 of a
    steady daily cycle read as a fall of 39 %.
    """
    start = max(0, origin - 7 * setup.per_day)
    end = min(origin + setup.horizon, setup.values.size)
    before = setup.demand[start:origin]
    after = setup.demand[origin:end]
    if np.isnan(after).all() or np.isnan(before).all() or np.nanmean(before) <= 0:
        return math.nan
    if (end - origin) % setup.per_day == 0:
        return float(np.nanmean(after) / np.nanmean(before) - 1.0)
    seen = ~np.isnan(before)
    phase = np.arange(start, origin)[seen] % setup.per_day
    counts = np.bincount(phase, minlength=setup.per_day)
    sums = np.bincount(phase, before[seen], minlength=setup.per_day)
    at = np.arange(origin, end) % setup.per_day
    usable = ~np.isnan(after) & (counts[at] > 0)
    expected = float((sums[at[usable]] / counts[at[usable]]).sum())
    if expected <= 0:
        return math.nan
    return float(after[usable].sum() / expected - 1.0)


def _per_origin(setup: _Setup, tracks: dict, weekly: _Track) -> dict:
    """Every candidate's and the selection's scores at every origin (full windows).

    The selection's plan at an origin is the one the series' end would give from the history up
    to it: raised to the history's own quantiles where that history is too short to compare a
    weekly cycle (:func:`_too_short_for_a_week`, ``weekly`` the week's seasonal naive), as
    :func:`select` raises the plan it returns.
    """
    n_o, n_m, n_q = setup.origins.size, len(tracks), setup.q.size
    out = {
        "coverage": np.full((n_o, n_m, n_q), np.nan),
        "excess": np.full((n_o, n_m, n_q), np.nan),
        "pinball": np.full((n_o, n_m), np.nan),
        "selected": [""] * n_o,
        "hits_selected": np.full((n_o, n_q), np.nan),
        "excess_selected": np.full((n_o, n_q), np.nan),
        "hindsight_excess": np.zeros((n_o, n_q)),
        "demand": np.zeros(n_o),
        "count": np.zeros(n_o, np.int64),
        "missing": np.zeros(n_o, np.int64),
        "level_change": np.full(n_o, np.nan),
    }
    names = list(tracks)
    for i, origin in enumerate(int(o) for o in setup.origins):
        excess, demand, count = _hindsight(setup, origin)
        end = min(origin + setup.horizon, setup.values.size)
        out["hindsight_excess"][i], out["demand"][i], out["count"][i] = excess, demand, count
        out["missing"][i] = end - origin - count
        out["level_change"][i] = _level_change(setup, origin)
        for m, name in enumerate(names):
            sums = tracks[name].sums.get(origin)
            if sums is not None and count:
                out["coverage"][i, m] = sums["hits"][-1] / count
                out["excess"][i, m] = sums["excess"][-1]
                base = sums["demand"][-1]  # the pinball loss is the baseline's (see _score)
                out["pinball"][i, m] = sums["pinball"][-1] / base if base > 0 else np.nan
        chosen = _planning(tracks, origin)
        if chosen is not None and count:
            out["selected"][i] = chosen
            m = names.index(chosen)
            out["hits_selected"][i] = tracks[chosen].sums[origin]["hits"][-1]
            out["excess_selected"][i] = out["excess"][i, m]
            if _too_short_for_a_week(setup, origin, weekly):
                raised = _raised_to_past(setup, tracks[chosen].plans[origin], origin)
                sums = _score(setup, origin, raised)
                out["hits_selected"][i] = sums["hits"][-1]
                out["excess_selected"][i] = sums["excess"][-1]
    return out


def _too_short_for_a_week(setup: _Setup, n: int, weekly: _Track) -> bool:
    """Whether the first ``n`` intervals are too short to compare a weekly cycle.

    Under a week, or the week's seasonal naive (``weekly``) planned at fewer than
    :data:`MIN_SCORED_ORIGINS` origins before ``n`` (see :func:`_under_a_week`).
    """
    planned = sum(1 for origin in weekly.plans if origin < n)
    return n < 7 * setup.per_day or planned < MIN_SCORED_ORIGINS


def _raised_to_past(setup: _Setup, plan: np.ndarray, n: int) -> np.ndarray:
    """``plan`` with each slot quantile raised to that of the first ``n`` intervals."""
    from ._baseline import slot_statistics

    history = slot_statistics(setup.values[:n], setup.codes[:n], setup.q, setup.spec.count)[0]
    return np.fmax(plan, history)


def _planning(tracks: dict, origin: int) -> str | None:
    """The model chosen at ``origin``: the best-scored before it among those with a plan there.

    As at the series' end (:func:`select`), a better-scored candidate without a plan at the
    origin (a forecast of no traffic after an idle day, too few past errors) gives way to the
    next; None when no candidate is compared yet or none plans the origin.
    """
    _, scores, _ = _choose(tracks, origin)
    ranked = sorted(scores, key=scores.get)
    return next((name for name in ranked if origin in tracks[name].sums), None)


def _unplanned(tracks: dict) -> str:
    """Each candidate with plans at too few origins to be compared, with the history it needs."""
    return "; ".join(
        f"{name} planned at {words.count(len(track.plans), 'origin')}: it needs "
        f"{words.count(FORECAST_MODELS[name][1], 'day')} before an origin and errors at earlier "
        "origins"
        for name, track in tracks.items()
        if len(track.plans) < MIN_SCORED_ORIGINS
    )


def _under_a_week(setup: _Setup, plan: np.ndarray) -> tuple[np.ndarray, str]:
    """A plan from a trace too short to compare a weekly cycle: each slot at no less than its past.

    A trace under a week shows no weekly cycle, and the coming week holds weekdays it never showed
    (a trace ending on a weekend holds no Monday after a weekend); a longer one where the week's
    seasonal naive, the one candidate that repeats the cycle, plans at fewer than
    :data:`MIN_SCORED_ORIGINS` origins (10-minute rates under 10 days; hourly under 13, its first
    plan needing 100 past errors) shows it once, and the others' errors come mostly from windows
    without a rise from a quiet weekend (8 days from a Monday, weekends at 0.3x: last_week's P99
    plan covered 74 % of the week after, its P95 41 %). No candidate compared can tell a weekend
    from a drop, so any day of the coming week may be like any day seen.
    """
    n = setup.values.size
    raised = _raised_to_past(setup, plan, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.nanmax(np.where(raised > plan, raised / plan, 1.0))
    count = int((raised > plan).sum())
    why = (
        "under a week: it shows no weekly cycle and the coming week holds weekdays it never showed"
        if n < 7 * setup.per_day
        else "too short for seasonal_naive_week (the last 7 days repeated, the one candidate that "
        f"repeats a weekly cycle) to be compared (it planned at under {MIN_SCORED_ORIGINS} "
        "origins), and the choice and its calibration may not have seen a rise after quieter days "
        "such as a weekend"
    )
    moved = (
        f"{count} of {plan.size} slot quantiles raised to them, by up to {factor:.3g}x"
        if count
        else f"none of the {plan.size} slot quantiles was below them"
    )
    return raised, (
        f"the trace is {duration_text(n * setup.step_ns)} long, {why}, so each slot is planned at "
        f"no less than its own past quantiles ({moved})"
    )


def _shift_words(setup: _Setup, shift: tuple[int, float, float]) -> str:
    days = (setup.values.size - shift[0]) / setup.per_day
    return (
        f"{shift_words(_when(setup, shift[0]), shift)} there for the {days:.3g} days to the "
        "series' end"
    )


def _after_shift(series, setup: _Setup, shift, ranked: list):
    """The plan after the series from the days since a level shift alone, and a note saying so.

    The model is chosen again on those days (the full history's ranking where they leave no
    choice), forecasts from them, and is calibrated on their errors alone: the errors of windows
    across the shift carry the whole jump, which is no error of the coming week's. Returns
    (model, forecast, plan, note); the first three None where no model plans from those days
    (the plan then carries the shift, and the note says so).
    """
    after = series.isel(time=slice(shift[0], None))
    arguments = (setup.spec, setup.q, setup.q[setup.scored], setup.horizon // setup.per_day)
    post = _setup(after, *arguments, "auto")[1]
    tracks = {name: _track(post, name) for name in ranked}
    _, scores, _ = _choose(tracks, post.values.size)
    order = sorted(scores, key=scores.get) if scores else ranked
    name, forecast, plan, _ = _end_plan(post, tracks, order)
    words = f"a level shift on {_shift_words(setup, shift)}"
    if name is None:
        return (
            None,
            None,
            None,
            (
                f"{words}: no model plans the coming week from those days alone, so the plan is "
                "calibrated on errors of windows across the shift, which carry the whole jump"
            ),
        )
    return (
        name,
        forecast,
        plan,
        (
            f"{words}: {name} planned the coming week from those days alone, calibrated on their "
            "errors (the windows across the shift carry the whole jump, no error of the coming week's)"
        ),
    )


def _end_plan(setup: _Setup, tracks: dict, ranked: list):
    """The best-ranked candidate that plans the horizon after the series, with its plan.

    One whose forecast from the series' end is no traffic at all (the day's seasonal naive after
    an idle Sunday) or that has too few past errors gives way to the next. Returns (name or
    None, forecast, plan, {skipped name: why}).
    """
    skipped: dict[str, str] = {}
    days = setup.horizon // setup.per_day
    end = setup.values.size
    for name in ranked:
        forecast = FORECAST_MODELS[name][0](setup.values, setup.per_day, setup.horizon)
        scale = None if forecast is None else _scales(setup, end, forecast.values)
        plan = None if scale is None else _plan(setup, tracks[name], end, forecast.values, scale)
        if plan is not None:
            return name, forecast, plan, skipped
        skipped[name] = (
            f"forecasts no traffic for the {days} days after the series"
            if scale is None
            else "has too few past errors to calibrate its plan at the series' end"
        )
    return None, None, None, skipped


def _attrs(units: str, long_name: str, **extra) -> dict:
    return {"units": units, "long_name": long_name, **extra}


_RATIO = _attrs("1", "over-provisioning over the hindsight plan's (the window's own quantiles)")
_PINBALL = _attrs("1", "pinball loss of the scored quantiles, summed, over demand")
_CHOSEN = _attrs("", "model chosen from the origins before this one ('' where none could be)")
_HINDSIGHT = _attrs("1", "over-provisioning of the window's own per-slot quantiles")
_CHANGE = _attrs("1", "window mean over the last fitted week's, minus 1")
_MISSING = _attrs("1", "intervals of the window not observed (left out of the scores)")


def select(
    series: xr.Dataset,
    *,
    slots: str | tuple | Slots = "hour_of_day",
    quantiles=(0.5, 0.95, 0.99),
    score_quantiles=(0.95, 0.99),
    models=DEFAULT_MODELS,
    horizon_days: int = 7,
    origin_step: str = "auto",
    bursts: str = "buffer",
) -> xr.Dataset:
    """Choose the forecast model of a series by rolling origins inside its own history.

    Every candidate forecasts the ``horizon_days`` after each origin from the values before it,
    and its per-slot quantiles are calibrated on its errors at the earlier origins (see the
    module's docstring). The chosen model has the least pinball loss of the ``score_quantiles``
    pooled over the origins; the same choice made at each origin from the origins before it, and
    scored on the window after it, is the out-of-sample record.

    Parameters
    ----------
    series
        A QPS series over a regular grid whose interval divides a day (missing intervals NaN).
        It needs a day and a few origins after it: the first origin is one day in.
    slots, quantiles
        As in :func:`capnb.forecast.fit_baseline`: the plan's slots and quantiles.
    score_quantiles
        The quantiles whose pinball loss chooses (among ``quantiles``).
    models
        Candidates (:data:`capnb.forecast.FORECAST_MODELS`).
    horizon_days
        The days each origin plans for (windows are cut where the series ends).
    origin_step
        ``"day"``, ``"hour"`` or ``"auto"``: daily origins, hourly for a trace under
        :data:`HOURLY_BELOW_DAYS` days (attr ``origin_step`` says which).
    bursts
        ``"buffer"`` (default): each burst :func:`capnb.forecast.detect_bursts` finds (its
        defaults, on ``slots``) is set to its slots' median, the rate it was measured against,
        before any candidate is fitted, calibrated or compared by pinball loss (each interval as
        first seen from the series up to the next origin, so no origin reads the days after it);
        the record's coverage and over-provisioning stay of the demand as observed, bursts
        included. Bursts are events for the burst buffer (:func:`capnb.forecast.simulate`):
        left in, they were repeated by a seasonal naive and, pooled into the conformal errors,
        widened the plan of every slot. Found more than twice a week (over the time observed,
        a week at least) they recur and stay. ``"baseline"``: kept in the history, as before
        December 2026.

    Returns
    -------
    xarray.Dataset
        ``target_qps`` (slot, traffic_quantile): the chosen model's plan for the horizon after the
        series, with ``history_qps`` (the past per-slot quantiles, bursts at their baseline) and
        ``growth_factor``; over
        (origin, forecast_model[, traffic_quantile]) every candidate's ``coverage``,
        ``overprovision_fraction``, ``overprovision_ratio`` and ``pinball_loss``; over origin the
        ``selected_model`` (chosen from the origins before it; "" where none could be),
        ``selected_coverage``, ``selected_overprovision_ratio`` (the plan select returns from the
        history up to the origin), ``hindsight_overprovision_fraction``, ``level_change``,
        ``scored_intervals`` and ``missing_intervals``; ``score`` over
        forecast_model; ``pooled_coverage`` and ``pooled_overprovision_ratio`` (all origins and the
        flat ones) of the selected plans. Attrs: ``chosen_model``, ``origin_step``, ``origins``,
        ``pooled_origins`` (how many origins ``choice`` pooled: those where every candidate
        planned), ``choice``, ``gaps``, ``goals`` (each goal met or by how far, and why),
        ``level_shift`` (``"none"``, or when the weekly mean jumped 1.5x or more, up or down,
        and stayed: the plan is then chosen and calibrated on the days from it alone, the record
        over origins is still the whole history's), ``under_a_week`` (``"none"``, or for a trace
        under a week, which shows no weekly cycle, or too short for the week's seasonal naive to
        be compared: each slot planned at no less than its own past quantiles), ``bursts`` (what
        was set to its baseline, or ``"none ..."``, or ``"kept ..."``) and ``notes``.

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> choice = select(load_rate_series("servegen-m-large"))
    >>> choice.attrs["origin_step"], choice.sizes["origin"]
    ('day', 13)
    """
    series = checked_series(series)
    names = _validate.names(models, "models")
    unknown = [name for name in names if name not in FORECAST_MODELS]
    if unknown:
        raise InputError(f"models: unknown {unknown}; choose from {list(FORECAST_MODELS)}")
    series, setup, kind = _setup(
        series, slots, quantiles, score_quantiles, horizon_days, origin_step
    )
    if setup.origins.size < MIN_SCORED_ORIGINS + 1:
        span = duration_text(setup.values.size * setup.step_ns)
        raise _TooShort(
            f"series: {span} leaves {setup.origins.size} origin(s) after its first day; a "
            f"rolling-origin choice needs {MIN_SCORED_ORIGINS + 1} (origins every {kind})"
        )
    series, bursts = _without_bursts(series, setup, bursts)
    tracks = {name: _track(setup, name) for name in names}
    chosen, scores, common = _choose(tracks, setup.values.size)
    if chosen is None:
        idle = max(track.idle for track in tracks.values())
        why = (
            f"from {idle} of its {setup.origins.size} origins the candidates forecast no traffic "
            "at all (the days before them are idle); give a history with traffic on most days"
            if idle
            else f"{_unplanned(tracks)}; give a longer history"
        )
        raise _TooShort(
            f"series: no candidate has plans at {MIN_SCORED_ORIGINS} origins of this "
            f"{duration_text(setup.values.size * setup.step_ns)} history (origins every {kind}); "
            + why
        )
    ranked = sorted(scores, key=scores.get)
    name, forecast, plan, skipped = _end_plan(setup, tracks, ranked)
    if name is None:
        raise InputError(
            "series: no model plans the days after it: "
            + "; ".join(f"{other} {why}" for other, why in skipped.items())
            + f" (of the models {names}; growth_model='auto' tries every candidate)"
        )
    notes = [
        f"{other} scored better but {why}: {name} plans them" for other, why in skipped.items()
    ]
    shift = level_shift_in(setup.values, setup.per_day)
    shifted = (
        (None, None, None, "") if shift is None else _after_shift(series, setup, shift, ranked)
    )
    if shifted[0] is not None:
        notes = []  # the plan is the one from the days after the shift
    short = "none"
    weekly = tracks.get("seasonal_naive_week") or _track(setup, "seasonal_naive_week")
    if _too_short_for_a_week(setup, setup.values.size, weekly):
        plan, short = _under_a_week(setup, plan)
        notes.append(short)
    found = [] if bursts.startswith(("none", "kept in the history")) else [f"bursts: {bursts}"]
    note = "; ".join(
        found + [shifted[3]] * bool(shifted[3]) + notes + [forecast.note] * bool(forecast.note)
    )
    record = _per_origin(setup, tracks, weekly)
    result = _dataset(series, setup, names, record, scores, plan)
    result.attrs.update(_words(setup, kind, name, scores, common, record, note, names, tracks))
    if skipped:
        result.attrs["choice"] = result.attrs["choice"].replace(
            ": least pinball loss", f": after {', '.join(skipped)} (no plan), least pinball loss", 1
        )
    if shift is not None:
        result.attrs["level_shift"] = _shift_words(setup, shift)
    result.attrs["under_a_week"] = short
    result.attrs["bursts"] = bursts
    if shifted[0] is not None:
        chosen, forecast, plan = shifted[:3]
        result = _replan(result, chosen, plan, forecast.note, _when(setup, shift[0]))
    return result


def _without_bursts(series: xr.Dataset, setup: _Setup, bursts: str) -> tuple[xr.Dataset, str]:
    """The series with its detected bursts at their baseline, each as first seen, and words.

    ``bursts="baseline"`` keeps them (the series as it is).

    Bursts are the burst buffer's, not the baseline forecast's (see :func:`burst_free`). Before
    :data:`capnb.forecast.MIN_DAYS` days a burst cannot be told from a weekday's level or a young
    service's ramp: origins before a week read the history as observed (``setup.demand``). The
    first week is cleaned by :func:`burst_free` on that week alone, and each later origin's
    intervals on the series up to the next origin (those after the last origin on the whole
    series), and keep that value; from the first origin a week in, every candidate's earlier
    windows are forecast and scored again on the cleaned history (:func:`_told_errors`): so a
    plan at an origin and its errors read nothing after it. ``setup.values`` is replaced: every
    candidate is fitted, calibrated and chosen on the baseline; ``setup.demand`` keeps the demand
    as observed, bursts included, which the record's coverage and over-provisioning are of.
    """
    from ._bursts import RUNNING, burst_free
    from ._growth import MIN_DAYS

    if bursts not in ("buffer", "baseline"):
        raise InputError(f"bursts must be 'buffer' or 'baseline', got {bursts!r}")
    if bursts == "baseline":
        return series, "kept in the history (bursts='baseline')"
    raw = setup.values
    clean = raw.copy()
    week = MIN_DAYS * setup.per_day
    bounds = np.unique(np.concatenate([[week], setup.origins, [raw.size]]))
    bounds = np.concatenate([[0], bounds[(bounds >= week) & (bounds <= raw.size)]])
    later = setup.origins[setup.origins >= week]
    setup.young = int(later[0]) if later.size else raw.size  # reads the first week told
    failed = kept = running = ""
    for a, b in itertools.pairwise(bounds):
        if not _may_hold_a_burst(setup, raw[:b], a):
            continue
        try:
            seen, _, words = burst_free(series.isel(time=slice(0, int(b))), setup.spec)
        except InputError as error:  # a burst with no interval outside it to measure it by
            failed = failed or str(error)
            continue
        clean[a:b] = seen["qps"].values[a:b]
        kept = words if words.startswith("kept") else ""  # the latest view (a shift told later)
        running = words[words.index(RUNNING) :] if b == raw.size and RUNNING in words else ""
    setup.values = clean
    result = series.copy()
    result["qps"] = ("time", clean, series["qps"].attrs)
    words = _burst_words(setup, raw, clean, failed, kept)
    if running and words.startswith(none := "none detected (detect_bursts' defaults)"):
        words = "none set to their baseline" + words[len(none) :]
    return result, words + f"; {running}" * bool(running)


def _may_hold_a_burst(setup: _Setup, seen: np.ndarray, start: int) -> bool:
    """Whether ``seen[start:]`` holds an interval a burst found in ``seen`` could cover.

    :func:`detect_bursts` marks only intervals above :data:`BURST_FACTOR` x their slot's median
    (each side's after a level shift, which is not checked here): without one, its run of
    ``burst_free`` (tens of milliseconds) would change nothing there.
    """
    from ._baseline import slot_statistics
    from ._bursts import BURST_FACTOR

    if level_shift_in(seen, setup.per_day) is not None:
        return True
    codes = setup.codes[: seen.size]
    median = slot_statistics(seen, codes, np.array([0.5]), setup.spec.count)[0][:, 0]
    with np.errstate(invalid="ignore"):
        return bool(np.any(seen[start:] > BURST_FACTOR * median[codes[start:]]))


def _burst_words(setup: _Setup, raw, clean, failed: str, kept: str) -> str:
    """What :func:`_without_bursts` replaced, in words: "none ..." or "kept ..." where nothing."""
    from ._bursts import young_words
    from ._growth import MIN_DAYS

    if raw.size < MIN_DAYS * setup.per_day:  # under a week: the bursts were not looked for
        return young_words(raw.size / setup.per_day)
    starts, stops = runs((raw != clean) & ~np.isnan(raw))  # a missing one is never replaced
    # a history of exactly a week has no origin a week in: its week is told at its end alone
    told_at = "the origin a week in" if setup.young < raw.size else "the history's end"
    early = (
        f"; origins before {MIN_DAYS} days read the history as observed (before a week, a "
        f"weekday's level or a young service's ramp passes for a burst), and the first week's "
        f"bursts are told at {told_at}"
    )
    if starts.size == 0:
        why = f"; some days were not looked at: {failed}" if failed else ""
        return (kept or "none detected (detect_bursts' defaults)") + early + why
    shown = [
        f"{_when(setup, int(a))} for {duration_text(int(b - a) * setup.step_ns)} at "
        f"{np.nanmean(raw[a:b]) / np.nanmean(clean[a:b]):.2g}x"
        for a, b in zip(starts[:3], stops[:3], strict=True)
    ]
    more = f" and {starts.size - 3} more" if starts.size > 3 else ""
    return (
        f"{starts.size} burst(s) detected ({'; '.join(shown)}{more}; over their slot's median): "
        f"their {int((stops - starts).sum())} intervals set to that median, the rate each was "
        "measured against, for every candidate's fitting and errors (each as first seen, from the "
        "series up to the next origin; the choice's pinball loss too, the coverage and "
        "over-provisioning of the record on the demand as observed): "
        f"bursts are the burst buffer's (the Monte Carlo's), not the baseline's{early}"
    )


def _replan(result: xr.Dataset, chosen: str, plan: np.ndarray, note: str, when: str):
    """The selection planning the coming week on the days from a level shift at ``when``."""
    result["target_qps"].values = plan
    with np.errstate(invalid="ignore", divide="ignore"):
        result["growth_factor"].values = plan / result["history_qps"].values
    result.attrs["chosen_model"] = chosen
    result.attrs["choice"] = (
        f"{chosen}: chosen on the days from the level shift of {when}; over the whole history, "
        + result.attrs["choice"]
    )
    if note:
        result.attrs["notes"] += f"; {note}"
    return result


def _pooled(record: dict, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coverage and over-provisioning ratio of the selected plans, pooled over ``rows``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        coverage = record["hits_selected"][rows].sum(axis=0) / record["count"][rows].sum()
        ratio = record["excess_selected"][rows].sum(axis=0) / record["hindsight_excess"][rows].sum(
            axis=0
        )
    return coverage, ratio


def _selected_rows(record: dict) -> np.ndarray:
    return np.array([bool(name) for name in record["selected"]], dtype=bool)


def _flat_rows(record: dict) -> np.ndarray:
    return _selected_rows(record) & (np.abs(record["level_change"]) <= FLAT_CHANGE)


def _dataset(series, setup: _Setup, names, record, scores, plan) -> xr.Dataset:
    from ._baseline import slot_statistics

    history = slot_statistics(
        setup.values, setup.codes[: setup.values.size], setup.q, setup.spec.count
    )[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = record["excess"] / record["hindsight_excess"][:, None, :]
        selected_ratio = record["excess_selected"] / record["hindsight_excess"]
        selected_cover = record["hits_selected"] / record["count"][:, None]
        hindsight = record["hindsight_excess"] / record["demand"][:, None]
        over = record["excess"] / record["demand"][:, None, None]
        mean_demand = record["demand"] / record["count"]
        growth = plan / history  # a slot idle in the past and planned idle: NaN
    coverage, pooled_ratio = _pooled(record, _selected_rows(record))
    flat_coverage, flat_ratio = _pooled(record, _flat_rows(record))
    o, m, q = "origin", "forecast_model", "traffic_quantile"
    flat = f"selected plans, origins within {FLAT_CHANGE:.0%} of the last week's level"
    ratio_name, cover = _RATIO["long_name"], glossary.attrs("coverage")
    data = {
        "target_qps": (("slot", q), plan, glossary.attrs("target_qps")),
        "history_qps": (("slot", q), history, _attrs("requests/s", "past per-slot quantile")),
        "growth_factor": (("slot", q), growth, _attrs("1", "target over history")),
        "coverage": ((o, m, q), record["coverage"], cover),
        "overprovision_fraction": ((o, m, q), over, glossary.attrs("overprovision_fraction")),
        "overprovision_ratio": ((o, m, q), ratio, _RATIO),
        "pinball_loss": ((o, m), record["pinball"], _PINBALL),
        "score": ((m,), [scores.get(n, np.nan) for n in names], _PINBALL),
        "selected_model": ((o,), np.asarray(record["selected"], dtype=str), _CHOSEN),
        "selected_coverage": ((o, q), selected_cover, cover),
        "selected_overprovision_ratio": ((o, q), selected_ratio, _RATIO),
        "hindsight_overprovision_fraction": ((o, q), hindsight, _HINDSIGHT),
        "level_change": ((o,), record["level_change"], _CHANGE),
        "scored_intervals": ((o,), record["count"], _attrs("1", "observed intervals scored")),
        "scored_mean_qps": (
            (o,),
            mean_demand,
            glossary.attrs("mean_qps", long_name="mean demand scored"),
        ),
        "missing_intervals": ((o,), record["missing"], _MISSING),
        "pooled_coverage": ((q,), coverage, {**cover, "pooled": "selected plans"}),
        "pooled_overprovision_ratio": ((q,), pooled_ratio, _attrs("1", ratio_name, pooled="all")),
        "flat_pooled_coverage": ((q,), flat_coverage, {**cover, "pooled": flat}),
        "flat_pooled_overprovision_ratio": ((q,), flat_ratio, _attrs("1", ratio_name, pooled=flat)),
    }
    starts = setup.ns[setup.origins].view("datetime64[ns]")
    coords = {
        "slot": ("slot", np.arange(setup.spec.count), glossary.attrs("slot", kind=setup.spec.kind)),
        q: (q, setup.q, glossary.attrs(q)),
        m: (m, list(names), _attrs("1", "candidate forecast (capnb.forecast.FORECAST_MODELS)")),
        o: (o, starts, _attrs("datetime64", "rolling origin: planned from the trace before it")),
        "fitted_days": (o, setup.origins / setup.per_day, _attrs("d", "days before the origin")),
    }
    return xr.Dataset(data, coords=coords, attrs={
        "title": "forecast model chosen by rolling origins",
        "slots": setup.spec.kind,
        "slot_s": setup.spec.slot_ns / NS,
        "horizon_days": setup.horizon // setup.per_day,
        "interval_s": setup.step_ns / NS,
        "score_quantiles": ", ".join(f"{v:g}" for v in setup.q[setup.scored]),
        "source": series.attrs.get("source", ""),
    })  # fmt: skip


def _when(setup: _Setup, position: int) -> str:
    return str(setup.ns[position].view("datetime64[ns]").astype("datetime64[m]")).replace("T", " ")


def _gap_words(setup: _Setup, record: dict) -> str:
    starts, stops = runs(np.isnan(setup.values))
    if starts.size == 0:
        return "none: every interval is observed"
    shown = [
        f"{_when(setup, a)} for {duration_text(int(b - a) * setup.step_ns)}"
        for a, b in zip(starts[:5], stops[:5], strict=True)
    ]
    more = f" and {starts.size - 5} more" if starts.size > 5 else ""
    empty = [
        _when(setup, int(o)) for o, c in zip(setup.origins, record["count"], strict=True) if c == 0
    ]
    text = (
        f"{int(np.isnan(setup.values).sum()):,} intervals missing in {starts.size} run(s) "
        f"({'; '.join(shown)}{more}): left out of every score and calibration, never filled"
    )
    if empty:
        text += f"; origins whose whole window is missing, not scored: {', '.join(empty)}"
    return text


def _goal_words(setup: _Setup, record: dict) -> str:
    """Each goal of a calibrated plan, met or by how far, with the origins that missed it."""
    rows = _selected_rows(record)
    if not rows.any():
        return "not measured: no origin had a selection to score"
    coverage, _ = _pooled(record, rows)
    _, flat_ratio = _pooled(record, _flat_rows(record))
    said = []
    with np.errstate(invalid="ignore", divide="ignore"):
        per_origin = record["hits_selected"] / record["count"][:, None]
    for j, level in enumerate(setup.q):
        goal = COVERAGE_GOALS.get(round(float(level), 6))
        if goal is None:
            continue
        name = f"P{100 * level:g}"
        got = float(coverage[j])
        shown = words.percent_against(got, *goal)  # 99.52 % is not "99.5%" beside a 99.5 % end
        if goal[0] <= got <= goal[1]:
            said.append(f"{name} coverage {shown}: within the goal {goal[0]:.0%}-{goal[1]:.1%}")
            continue
        side = "short of" if got < goal[0] else "above"
        # the origins that missed it: the least covered when short, the most covered when above
        sign, end = (1.0, "lowest") if got < goal[0] else (-1.0, "highest")
        worst = np.argsort(np.where(rows, sign * per_origin[:, j], np.inf))[:2]
        why = ", ".join(
            f"{_when(setup, int(setup.origins[i]))} covered {per_origin[i, j]:.0%} with the level "
            f"{record['level_change'][i]:+.0%} on the week before"
            for i in worst
            if rows[i]
        )
        said.append(
            f"{name} coverage {shown}: {side} the goal {goal[0]:.0%}-{goal[1]:.1%} ({end}: {why})"
        )
    at = np.flatnonzero(np.isclose(setup.q, 0.99))
    if at.size:
        said.append(_flat_goal_words(float(flat_ratio[at[0]]), int(_flat_rows(record).sum())))
    return "; ".join(said) or "no goal among the quantiles planned"


def _flat_goal_words(ratio: float, flat: int) -> str:
    """The P99 over-provisioning goal on flat origins: met, missed, or why it was not measured."""
    if flat == 0:
        return (
            f"P99 over-provisioning not measured: no origin was flat (its window's mean within "
            f"{FLAT_CHANGE:.0%} of the last fitted week's)"
        )
    if not np.isfinite(ratio):
        return (
            f"P99 over-provisioning not measured on the {flat} flat origin(s): the hindsight "
            "plan held no capacity above demand there, so there is no ratio to it"
        )
    verdict = "within" if ratio <= FLAT_RATIO_GOAL else "above"
    return (
        f"P99 over-provisioning {ratio:.2f}x the hindsight plan's on the {flat} flat origin(s): "
        f"{verdict} the goal {FLAT_RATIO_GOAL:g}x"
    )


def _words(setup, kind, chosen, scores, common, record, note, names, tracks) -> dict:
    per = "day" if kind == "day" else "hour"
    origins = (
        f"{setup.origins.size} origins, one every {per}"
        f"{' (the trace is under ' + str(HOURLY_BELOW_DAYS) + ' days)' if per == 'hour' else ''}"
        f", from {_when(setup, int(setup.origins[0]))} to {_when(setup, int(setup.origins[-1]))};"
        f" each scores the {setup.horizon // setup.per_day} days after it, cut where the series ends"
    )
    ranked = sorted(scores, key=scores.get)
    score = ", ".join(f"{name} {100 * scores[name]:.3g} %" for name in ranked)
    notes = [
        f"{name} never had a plan: it needs {FORECAST_MODELS[name][1]} days before an origin and "
        "errors at earlier origins"
        for name in names
        if not tracks[name].plans
    ]
    if note:
        notes.append(note)
    # a candidate without plans at MIN_SCORED_ORIGINS origins has no score: not compared
    who = "every candidate" if len(scores) == len(names) else f"the {len(scores)} compared"
    return {
        "chosen_model": chosen,
        "origin_step": per,
        "origins": origins,
        "pooled_origins": len(common),
        "choice": (
            f"{chosen}: least pinball loss of P{', P'.join(f'{100 * v:g}' for v in setup.q[setup.scored])} "
            f"over demand, pooled over the {len(common)} origins {who} planned ({score})"
        ),
        "gaps": _gap_words(setup, record),
        "goals": _goal_words(setup, record),
        "notes": "; ".join(notes) or "none",
        "level_shift": "none",
    }

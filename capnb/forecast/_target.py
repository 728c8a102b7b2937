"""The forecast step's answer: per-slot targets with the burst buffer, and the answer in words."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import words
from ..data._series import Slots, checked_series, slot_label
from ..errors import InputError
from ._baseline import DEFAULT_QUANTILES, _quantiles, fit_baseline
from ._bursts import MONTH_DAYS, BurstModel, _choose, detect_bursts, fit_burst_model, simulate
from ._outlook import plan_name, project_factor

__all__ = ["describe", "slot_clock", "slot_label", "target", "target_from"]


# -- the step's answer -----------------------------------------------------------------------
def target(
    series: xr.Dataset,
    *,
    slots: str | tuple | Slots = "hour_of_day",
    quantiles=DEFAULT_QUANTILES,
    plan_quantile: float | None = None,
    mean_plan: str = "overall",
    bursts: BurstModel | str | None = None,
    trials: int = 10_000,
    days: int = MONTH_DAYS,
    seed: int = 0,
    exceed_probability: float = 0.05,
    growth: float = 1.0,
    trend_per_day: float = 0.0,
    days_ahead: float = 0.0,
    chunks: int | None = None,
    growth_model: str = "auto",
    horizon_days: int = 7,
    selection: xr.Dataset | None = None,
) -> xr.Dataset:
    """The forecast step's answer: per-slot targets, and the burst buffer from a Monte Carlo.

    Chains :func:`fit_baseline`, :func:`detect_bursts`, :func:`simulate` and :func:`target_from`
    (and, with ``growth``/``trend_per_day``, the projection) on one series. This is what the
    capacity step takes as its target. To keep the parts between changes (a worksheet does), run
    those steps yourself and assemble them with :func:`target_from`: the answer is the same.

    Parameters
    ----------
    series
        QPS series whose interval is a whole number of minutes (the Monte Carlo runs per minute).
    slots, quantiles, mean_plan
        As in :func:`fit_baseline`.
    plan_quantile
        The quantile of the fixed plan (default: the highest of ``quantiles``).
    bursts
        A :class:`BurstModel`, ``"fitted"`` (fit to bursts detected in the series) or None (the
        article's default model).
    trials, days, seed, exceed_probability, chunks
        As in :func:`simulate`.
    growth, trend_per_day, days_ahead
        Carry the history forward before planning (as in :func:`project`): every rate of the
        series is multiplied by ``growth x (1 + trend_per_day) ** days_ahead``.
    growth_model, horizon_days, selection
        ``"auto"`` (default): plan for the ``horizon_days`` after the series with the forecast
        model chosen by rolling origins inside the history (:func:`select`; a given
        ``selection`` is reused): each slot's past rates are mapped so that its P50, P95 and P99
        (and the plan quantile) are the chosen model's calibrated quantiles of the coming days
        (:func:`carry`, whose words name the slots mapped at fewer). A candidate's name
        (:data:`FORECAST_MODELS`) plans with it alone.
        ``"probabilistic"``: the log-linear trend of the daily mean with its Student-t band
        (:func:`carry_forward`; needs 7 days). A history too short for the model is planned as it
        is, and the attr ``growth_model`` says so and why. ``"none"``: the history's quantiles
        (with ``trend_per_day`` and ``days_ahead`` if given, which the other models refuse: they
        forecast their own growth). Attrs ``forecast_choice``, ``forecast_goals``,
        ``forecast_origins`` and ``forecast_gaps`` carry the selection's words.

    Returns
    -------
    xarray.Dataset
        ``target_qps`` over (slot, traffic_quantile), with the other variables of
        :func:`fit_baseline`; ``exceed_probability`` and ``minutes_above`` over ``capacity_qps``;
        ``monthly_peak_qps`` over ``trial``; ``required_qps`` and ``buffer_qps``. Attrs carry the
        baseline's (boundaries included) and the simulation's, with the burst model in words.

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> plan = target(load_rate_series("servegen-m-large"), trials=200)
    >>> plan.target_qps.dims, plan.buffer_qps.attrs["units"]
    (('slot', 'traffic_quantile'), 'requests/s')
    """
    from ._auto import TARGET_GROWTH_MODELS, carry

    series = checked_series(series)
    if growth_model == "trend":
        raise InputError(
            "growth_model='trend': target plans with 'auto', a candidate, 'probabilistic' or "
            "'none'; for a point trend give growth_model='none', "
            "trend_per_day=float(fit_trend(series).trend_per_day) and days_ahead"
        )
    if growth_model not in TARGET_GROWTH_MODELS:
        raise InputError(
            f"growth_model must be one of {list(TARGET_GROWTH_MODELS)}, got {growth_model!r}"
        )
    scale = project_factor(growth, trend_per_day, days_ahead)
    if growth_model != "none" and (trend_per_day != 0 or days_ahead != 0):
        raise InputError(
            "trend_per_day and days_ahead apply to growth_model='none'; "
            f"growth_model={growth_model!r} forecasts its own growth over horizon_days"
        )
    planned = plan_quantile if plan_quantile is not None else _quantiles(quantiles)[-1]
    carried = carry(
        series, slots=slots, quantile=planned, growth_model=growth_model,
        horizon_days=horizon_days, selection=selection,
    )  # fmt: skip
    grown = carried.attrs["growth_model"]
    history = None if grown.startswith("none") else series
    series = series if history is None else carried
    if scale != 1.0:
        series = series.copy()
        for name in ("qps", "requests"):
            if name in series:
                series[name] = (series[name] * scale).assign_attrs(series[name].attrs)
    baseline = fit_baseline(series, slots=slots, quantiles=quantiles, mean_plan=mean_plan)
    if history is None:
        found = detect_bursts(series, baseline)
    else:  # the bursts are events of the history (its slot levels), found where they happened
        found = detect_bursts(
            history, fit_baseline(history, slots=slots, quantiles=quantiles, mean_plan=mean_plan)
        )
    if bursts == "fitted":
        model = fit_burst_model(found)
    elif bursts is None or isinstance(bursts, BurstModel):
        model = bursts or BurstModel()
    else:
        raise InputError(f"bursts must be a BurstModel, 'fitted' or None, got {bursts!r}")
    run = simulate(
        series,
        baseline,
        model,
        trials=trials,
        days=days,
        seed=seed,
        exceed_probability=exceed_probability,
        plan_quantile=plan_quantile,
        exclude=found,
        chunks=chunks,
    )
    result = target_from(baseline, run, detected=found)
    result.attrs["growth_model"] = grown
    for name in ("choice", "goals", "origins", "gaps"):
        if f"forecast_{name}" in carried.attrs:
            result.attrs[f"forecast_{name}"] = carried.attrs[f"forecast_{name}"]
    if scale != 1.0:
        result.attrs["projection"] = f"history scaled by x{scale:.4g}"
    return result


def target_from(
    baseline: xr.Dataset,
    simulation: xr.Dataset,
    *,
    detected: xr.Dataset | None = None,
    exceed_probability: float | None = None,
) -> xr.Dataset:
    """The forecast step's answer assembled from its parts: a baseline and its Monte Carlo.

    :func:`target` is :func:`fit_baseline`, :func:`detect_bursts` and :func:`simulate` followed by
    this function. Call it yourself to keep the parts between changes: the simulated months do not
    depend on the exceedance probability, so a new probability needs only this function (it
    re-chooses ``required_qps`` and ``buffer_qps`` from the same months), not a new simulation.

    Parameters
    ----------
    baseline
        The slot baselines (:func:`fit_baseline`) the simulation ran on.
    simulation
        A :func:`simulate` result on ``baseline``.
    detected
        The bursts (:func:`detect_bursts`) the simulation left out of the baseline, counted in the
        ``bursts_detected`` attr (0 if not given).
    exceed_probability
        The monthly probability of exceeding capacity that ``required_qps`` and ``buffer_qps`` are
        chosen for (default: the simulation's own ``chosen_exceed_probability``).

    Returns
    -------
    xarray.Dataset
        As :func:`target`: the baseline's variables, the simulation's (its ``mean_qps`` over trials
        left out: the baseline's ``mean_qps`` is per slot), and both their attrs.

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> series = load_rate_series("servegen-m-large")
    >>> baseline = fit_baseline(series)
    >>> found = detect_bursts(series, baseline)
    >>> months = simulate(series, baseline, trials=200, exclude=found)
    >>> strict = target_from(baseline, months, detected=found, exceed_probability=0.01)
    >>> float(strict.buffer_qps) >= float(target_from(baseline, months).buffer_qps)
    True
    """
    if "monthly_peak_qps" not in simulation or "fixed_plan_qps" not in simulation.attrs:
        raise InputError("target_from: simulation must be the output of capnb.forecast.simulate")
    if "target_qps" not in baseline or "slot" not in baseline.dims:
        raise InputError("target_from: baseline must be the output of capnb.forecast.fit_baseline")
    plan_quantile = float(simulation.attrs["plan_quantile"])
    if plan_quantile not in baseline.traffic_quantile.values or not np.isclose(
        float(baseline.target_qps.sel(traffic_quantile=plan_quantile).max("slot")),
        float(simulation.attrs["fixed_plan_qps"]),
        rtol=1e-12,
    ):
        raise InputError(
            "target_from: the simulation did not run on this baseline (its fixed plan is not the "
            "baseline's busiest slot at its plan quantile)"
        )
    if exceed_probability is not None:
        simulation = _choose(simulation, exceed_probability)
    result = baseline.copy()
    for name in simulation.data_vars:
        if name != "mean_qps":  # the months' mean demand; the baseline's mean_qps is per slot
            result[name] = simulation[name]
    result.attrs = {
        **baseline.attrs,
        **simulation.attrs,
        "title": "traffic forecast: targets and buffer",
        "bursts_detected": 0 if detected is None else int(detected.sizes["burst"]),
    }
    return result


def slot_clock(result: xr.Dataset) -> str:
    """The clock a forecast's slot labels are on: the trace's zone, or ``""`` where not known.

    The zone as the trace says it, without its note ("UTC", "Europe/Berlin"); custom slots have
    no clock.
    """
    zone = str(result.attrs.get("timezone", "unknown"))
    if zone == "unknown" or result.attrs.get("slots") == "custom":
        return ""
    return zone.split(" (")[0]


def _rate(value: float) -> str:
    return f"{words.rate(value)} requests/s"


def describe(result: xr.Dataset, *, quantile: float | None = None) -> str:
    """The answer of :func:`fit_baseline` or :func:`target` in plain sentences with their numbers.

    Parameters
    ----------
    result
        A baseline or a target Dataset (one series: no extra dims).
    quantile
        The plan's traffic quantile (default: the target's ``plan_quantile``, else the highest).
    """
    if "target_qps" not in result or "slot" not in result.dims:
        raise InputError("describe takes the output of capnb.forecast.fit_baseline or target")
    extra = set(result.target_qps.dims) - {"slot", "traffic_quantile"}
    if extra:
        raise InputError(f"describe: choose one value of {sorted(extra)} first (.sel)")
    q = quantile if quantile is not None else result.attrs.get("plan_quantile")
    q = float(result.traffic_quantile[-1]) if q is None else float(q)
    if q not in result.traffic_quantile.values:
        raise InputError(f"quantile={q} is not among {result.traffic_quantile.values.tolist()}")
    kind, slot_s = result.attrs["slots"], result.attrs["slot_s"]
    zone = slot_clock(result)
    clock = f" {zone}" if zone else ""

    def when(slot: int) -> str:
        return slot_label(slot, kind, slot_s) + clock

    plan = result.target_qps.sel(traffic_quantile=q)
    busiest, quietest = int(plan.argmax("slot")), int(plan.argmin("slot"))
    name = plan_name(q)
    shortfall = float(result.shortfall_fraction.sel(traffic_quantile=q).isel(slot=busiest))
    mean_plan = result.mean_plan_qps.isel(slot=busiest)
    grown = str(result.attrs.get("growth_model", ""))
    carried = ": " in grown and not grown.startswith("none")
    mean_words = (
        f"a plan at the {'mean of the demand carried forward' if carried else 'historical mean'} "
        f"({_rate(float(mean_plan))})"
        if result.attrs["mean_plan"] == "overall"
        else "a plan at each slot's mean"
    )
    per = kind.replace("_", " ") if kind != "custom" else "slot"
    planned = int(plan.notnull().sum())
    if planned > 1:
        low, high = _rate(float(plan[quietest])), _rate(float(plan[busiest]))
        with_data = " with data" if planned < plan.sizes["slot"] else ""
        span = (
            f"{high} in each of the {planned} slots{with_data}"
            if low == high  # "from 50 requests/s (00:00-01:00) to 50 requests/s (00:00-01:00)"
            else f"from {low} ({when(quietest)}) to {high} ({when(busiest)})"
        )
        first = f"Plan on the {name} per {per}: {span}; " + (
            f"the busiest slot's mean is {float(result.peak_to_trough):.2f}x the quietest's."
            if np.isfinite(float(result.peak_to_trough))
            else "the quietest slot has no traffic at all."
        )
    elif plan.sizes["slot"] == 1:  # no cycle to describe: one rate at every time
        first = f"Plan on the {name}: {_rate(float(plan[busiest]))} at every time (a single slot)."
    else:
        first = (
            f"Plan on the {name} per {per}: {_rate(float(plan[busiest]))} in "
            f"{when(busiest)}, the only one of {plan.sizes['slot']} slots with "
            "data."
        )
    text = [
        first,
        f"{mean_words[0].upper()}{mean_words[1:]} falls {shortfall:.0%} short of the {name}"
        f"{' in the busiest slot' if planned > 1 else ''} and leaves "
        f"{float(result.overall_underprovisioned_share):.0%} of intervals under-provisioned.",
    ]
    if "buffer_qps" in result:
        peaks = result.monthly_peak_qps.values
        fixed = float(result.attrs["fixed_plan_qps"])
        exceeded = float(np.mean(peaks > fixed))
        minutes = float(np.interp(fixed, result.capacity_qps.values, result.minutes_above.values))
        chosen = float(result.attrs["chosen_exceed_probability"])
        text.append(
            f"With {result.attrs['burst_model']}, the fixed {name} plan "
            f"({_rate(fixed)}) is exceeded in {exceeded:.0%} of months ({minutes:,.0f} minutes a "
            f"month on average); {_rate(float(result.required_qps))} keeps that to {chosen:.0%}: an "
            f"elastic buffer of {_rate(float(result.buffer_qps))} above the fixed plan."
        )
    if carried:
        text.append(f"The plan is for the coming days, not the past ones: {grown}.")
    elif grown.startswith("none: "):  # a forecast was asked for and could not be made
        text.append(f"No forecast of the coming days: {grown.removeprefix('none: ')}.")
    if result.attrs.get("boundaries", "none") != "none":
        text.append(result.attrs["boundaries"])
    return " ".join(text)

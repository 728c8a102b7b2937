"""Looking forward: project slot baselines ahead, fit a trend, and backtest plans on held-out weeks.

Part of the forecast step (its public names are re-exported by :mod:`capnb.forecast`).
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .. import _validate, glossary, words
from ..data._series import (
    DAY_NS,
    NS,
    checked_series,
    duration_text,
    interval_ns,
    interval_ns_of,
    slot_codes,
)
from ..errors import InputError

__all__ = ["backtest", "fit_trend", "plan_name", "project", "project_factor"]

#: Relative rounding a plan may carry and still cover the demand it equals (a few ulps, 1e-16 each).
_ROUNDING = 1e-12
_SCALED = ("target_qps", "mean_qps", "mean_plan_qps", "shortfall_qps", "overall_qps")


def plan_name(quantile: float) -> str:
    """``0.99`` -> ``"P99"``, ``0.999`` -> ``"P99.9"`` (:func:`capnb.words.quantile`)."""
    return words.quantile(quantile)


def project(
    baseline: xr.Dataset,
    *,
    growth: float = 1.0,
    trend_per_day: float = 0.0,
    days_ahead: float = 0.0,
) -> xr.Dataset:
    """Slot baselines carried forward: every rate x growth x (1 + trend_per_day) ** days_ahead.

    Parameters
    ----------
    baseline
        The output of :func:`capnb.forecast.fit_baseline`.
    growth
        A one-off factor (expected growth of the user base, a launch), > 0.
    trend_per_day
        Compound daily growth (from :func:`fit_trend` or a business plan), > -1.
    days_ahead
        How far ahead of the fitted history the plan is for, days.

    Returns
    -------
    xarray.Dataset
        The baseline with its rates (``target_qps``, ``mean_qps``, ``mean_plan_qps``,
        ``shortfall_qps``, ``overall_qps``) scaled; shares and ratios are unchanged. ``attrs
        ["projection"]`` records the factor.

    Examples
    --------
    >>> from capnb.forecast import fit_baseline
    >>> from capnb.data import load_rate_series
    >>> base = fit_baseline(load_rate_series("servegen-m-large"))
    >>> ahead = project(base, growth=1.2)
    >>> round(float(ahead.target_qps.max() / base.target_qps.max()), 3)
    1.2
    """
    factor = project_factor(growth, trend_per_day, days_ahead)
    result = baseline.copy()
    for name in _SCALED:
        if name in result:
            result[name] = (result[name] * factor).assign_attrs(baseline[name].attrs)
    result.attrs["projection"] = (
        f"x{factor:.4g} = growth {growth:g} x (1 + {trend_per_day:g}/day) ^ {days_ahead:g} days"
    )
    return result


def fit_trend(series: xr.Dataset, *, min_days: int = 7) -> xr.Dataset:
    """The daily growth of traffic: a log-linear fit of the daily mean rate over whole days.

    Days observed for less than half their length are left out. At least ``min_days`` days are
    needed (a week, so that the weekday pattern does not pass for a trend).

    Returns
    -------
    xarray.Dataset
        ``trend_per_day`` (1/day) with its standard error in ``attrs``, and ``mean_qps`` over
        ``time`` (one value per day, requests/s).
    """
    series = checked_series(series)
    min_days = _validate.positive_int(min_days, "min_days")
    step = interval_ns_of(series)
    ns = series["time"].values.astype("datetime64[ns]").view(np.int64)
    qps = series["qps"].values.astype(float)
    day = ns // DAY_NS
    days = np.unique(day)
    per_day = DAY_NS // step if DAY_NS % step == 0 else None
    means, kept = [], []
    for d in days:
        values = qps[day == d]
        observed = np.count_nonzero(~np.isnan(values))
        if per_day is None or observed < per_day / 2:
            continue
        means.append(np.nanmean(values))
        kept.append(d)
    if len(kept) < min_days:
        raise InputError(
            f"fit_trend needs at least {min_days} days observed for at least half their length; "
            f"the series has {len(kept)}"
        )
    x = np.asarray(kept, dtype=float) - kept[0]
    y = np.log(np.asarray(means))
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (intercept + slope * x)
    se = math.sqrt(residual @ residual / (x.size - 2) / ((x - x.mean()) @ (x - x.mean())))
    trend = math.expm1(slope)
    return xr.Dataset(
        {
            "trend_per_day": (
                (),
                trend,
                glossary.attrs("trend_per_day", standard_error=math.exp(slope) * se),
            ),
            "mean_qps": (
                "time",
                np.asarray(means),
                glossary.attrs("mean_qps", long_name="mean request rate of the day"),
            ),
        },
        coords={"time": ("time", (np.asarray(kept) * DAY_NS).view("datetime64[ns]"))},
        attrs={"days": len(kept), "method": "least squares of log(daily mean) on the day"},
    )


def backtest(
    series: xr.Dataset,
    *,
    fit: str | float = "7D",
    slots="hour_of_day",
    quantiles=(0.5, 0.95, 0.99),
    mean_plan: str = "overall",
    growth: float = 1.0,
    trend_per_day: float | str = 0.0,
    growth_model: str = "probabilistic",
) -> xr.Dataset:
    """Fit slot baselines on the start of a series and score the plans on the rest.

    Parameters
    ----------
    series
        A multi-week QPS series.
    fit
        Length of the fitted part from the start (``"7D"``: fit on week 1, score the rest).
    slots, quantiles, mean_plan
        As in :func:`capnb.forecast.fit_baseline`.
    growth, trend_per_day
        Carry the fitted plans forward as :func:`project` does, each scored interval by its days
        after the fitted part; ``trend_per_day="fit"`` takes :func:`fit_trend` of the fitted part.
    growth_model
        ``"probabilistic"`` (default): each quantile plan is :func:`capnb.forecast.predict` of the
        fitted part over the scored days (the fitted trend with its prediction band; needs 7 days);
        ``"trend"``: the past quantiles carried by :func:`fit_trend` of the fitted part (the same as
        ``trend_per_day="fit"``); ``"none"``: the past quantiles, carried by ``trend_per_day``.
        ``growth`` multiplies every model's plans; the mean plan is never grown by a model.

    Returns
    -------
    xarray.Dataset
        Over ``plan`` (``"mean"`` and one ``"P.."`` per quantile): ``coverage`` (share of scored
        intervals whose qps the plan covers), ``overprovision_fraction`` (mean of the capacity the
        plan holds above demand, over mean demand) and ``unserved_fraction`` (mean demand above
        the plan, over mean demand). ``traffic_quantile`` is a coordinate over ``plan`` (NaN for
        the mean plan). Attrs: the fitted and scored spans, and the fitted baseline's boundaries.

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> score = backtest(load_rate_series("servegen-m-large"), fit="7D")
    >>> score.plan.values.tolist()
    ['mean', 'P50', 'P95', 'P99']
    """
    from ._baseline import fit_baseline
    from ._growth import growth_model as _growth_model
    from ._growth import predict

    series = checked_series(series)
    fit_ns = interval_ns(fit, "fit", low_s=1)
    ns = series["time"].values.astype("datetime64[ns]").view(np.int64)
    split = ns[0] + fit_ns
    if split > ns[-1]:
        span = duration_text(int(ns[-1] - ns[0]) + interval_ns_of(series))
        raise InputError(f"fit={fit!r} covers the whole series ({span}); nothing is left to score")
    fitted, scored = series.isel(time=ns < split), series.isel(time=ns >= split)
    model = _growth_model(growth_model)
    baseline = fit_baseline(fitted, slots=slots, quantiles=quantiles, mean_plan=mean_plan)
    if model != "none" and not (isinstance(trend_per_day, int | float) and trend_per_day == 0):
        raise InputError(
            f"trend_per_day={trend_per_day!r} applies to growth_model='none'; "
            f"growth_model={model!r} fits its own trend"
        )
    if model == "trend":
        trend_per_day = "fit"
    if isinstance(trend_per_day, str):
        if trend_per_day != "fit":
            raise InputError(f"trend_per_day must be a number or 'fit', got {trend_per_day!r}")
        trend_per_day = float(fit_trend(fitted).trend_per_day)
    scored_ns = scored["time"].values.astype("datetime64[ns]").view(np.int64)
    days = (scored_ns - split) / DAY_NS
    factor = np.array([project_factor(growth, trend_per_day, 0.0)]) * (1.0 + trend_per_day) ** days
    codes = slot_codes(scored["time"], _slot_spec(baseline))
    qps = scored["qps"].values.astype(float)
    plans = {"mean": baseline.mean_plan_qps.values[codes] * factor}
    if model == "probabilistic":
        horizon = max(1, math.ceil((scored_ns[-1] + interval_ns_of(series) - split) / DAY_NS))
        ahead = predict(fitted, slots=slots, quantiles=quantiles, horizon_days=horizon)
        targets = ahead.target_qps
    else:
        targets = baseline.target_qps
    for q in baseline.traffic_quantile.values:
        plans[plan_name(q)] = targets.sel(traffic_quantile=q).values[codes] * factor
    usable = ~np.isnan(qps)
    for plan in plans.values():
        usable &= ~np.isnan(plan)
    if not usable.any():
        raise InputError("backtest: no scored interval has both a value and a fitted slot plan")
    demand = qps[usable]
    mean_demand = demand.mean()
    metrics = {"coverage": [], "overprovision_fraction": [], "unserved_fraction": []}
    for plan in plans.values():
        capacity = plan[usable]
        # a plan reaches the demand it equals: the probabilistic plan passes through log and exp,
        # which put a flat 50 requests/s at 50 - 7e-15 (scored as covering none of it)
        metrics["coverage"].append(np.mean(demand <= capacity * (1 + _ROUNDING)))
        metrics["overprovision_fraction"].append(
            np.mean(np.maximum(capacity - demand, 0)) / mean_demand
        )
        metrics["unserved_fraction"].append(np.mean(np.maximum(demand - capacity, 0)) / mean_demand)
    step = interval_ns_of(series)
    return xr.Dataset(
        {name: ("plan", np.asarray(v), glossary.attrs(name)) for name, v in metrics.items()},
        coords={
            "plan": ("plan", list(plans), glossary.attrs("plan")),
            "traffic_quantile": (
                "plan",
                np.concatenate(([np.nan], baseline.traffic_quantile.values)),
                glossary.attrs("traffic_quantile"),
            ),
        },
        attrs={
            "title": "backtest of slot plans",
            "fitted": f"first {duration_text(fit_ns)} ({int(fitted.sizes['time'])} intervals)",
            "scored": (
                f"the remaining {duration_text(int(scored.sizes['time']) * step)} "
                f"({int(usable.sum())} observed intervals)"
            ),
            "slots": baseline.attrs["slots"],
            "mean_plan": mean_plan,
            "boundaries": baseline.attrs["boundaries"],
            "interval_s": step / NS,
            "projection": f"growth {growth:g} x (1 + {trend_per_day:.4g}/day) ^ days after the fit",
            "growth_model": model,
        },
    )


def project_factor(growth: float, trend_per_day: float, days_ahead: float) -> float:
    """The ratio growth x (1 + ``trend_per_day``) ** days_ahead, arguments checked as :func:`project` does."""
    growth = _validate.fraction(growth, "growth", low=0.0, high=1e6, low_open=True)
    trend = _validate.fraction(trend_per_day, "trend_per_day", low=-1.0, high=10.0, low_open=True)
    days = _validate.fraction(days_ahead, "days_ahead", high=36_500.0)
    return growth * (1.0 + trend) ** days


def _slot_spec(baseline: xr.Dataset):
    from ._bursts import _slots_of

    return _slots_of(baseline)

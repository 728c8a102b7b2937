"""Rolling origins: plans fitted on days 1..k and scored on the days after, for every k.

Part of the forecast step (re-exported by :mod:`capnb.forecast`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import _validate, glossary
from ..data._series import (
    DAY_NS,
    NS,
    Slots,
    checked_series,
    duration_text,
    interval_ns_of,
    slot_codes,
)
from ..data._series import slots as slot_spec
from ..errors import InputError
from ._baseline import _quantiles, slot_statistics
from ._growth import GROWTH_MODELS, MIN_DAYS, _attrs, _horizon, growth_model
from ._outlook import backtest

__all__ = ["rolling_origin"]


def rolling_origin(
    series: xr.Dataset,
    *,
    slots: str | tuple | Slots = "hour_of_day",
    quantiles=(0.95, 0.99),
    growth_models=GROWTH_MODELS,
    min_fit_days: int = 7,
    horizon_days: int = 7,
) -> xr.Dataset:
    """Score plans on days they have not seen: fit on days 1..k, score days k+1..k+horizon, every k.

    Each origin k (from ``min_fit_days`` to the series' last day but one) fits each growth model on
    the first k days (:func:`capnb.forecast.backtest`) and scores the per-slot plans on the next
    ``horizon_days`` days (fewer at the end of the series). The hindsight plan is the scored days'
    own per-slot quantiles: the plan of one who knew those days.

    Parameters
    ----------
    series
        A QPS series of at least ``min_fit_days`` + 1 days. Days are counted in 24 hours from
        its first interval (as :func:`capnb.forecast.backtest`'s ``fit`` and
        :func:`capnb.forecast.select`'s origins count them), midnight or not.
    slots, quantiles
        As in :func:`capnb.forecast.fit_baseline`.
    growth_models
        Growth models to compare (:data:`GROWTH_MODELS`).
    min_fit_days, horizon_days
        The first origin, and the days scored after each.

    Returns
    -------
    xarray.Dataset
        Over (origin, growth_model, traffic_quantile): ``coverage``, ``overprovision_fraction`` and
        ``overprovision_ratio`` (over the hindsight plan's; inf where that is 0); over (origin,
        traffic_quantile): ``hindsight_overprovision_fraction``; over (growth_model,
        traffic_quantile), pooled over every scored interval of every origin: ``pooled_coverage``
        (share of all intervals), ``pooled_overprovision_fraction`` (excess capacity summed over
        demand summed) and ``pooled_overprovision_ratio`` (over the hindsight plans' summed
        excess). ``origin`` counts the fitted days; ``scored_days`` and ``scored_intervals`` are
        over origin.

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> table = rolling_origin(load_rate_series("servegen-m-large"), growth_models=("none",))
    >>> table.origin.values.tolist()
    [7, 8, 9, 10, 11, 12, 13]
    """
    series = checked_series(series)
    first, horizon, q, methods = _rolling_args(min_fit_days, horizon_days, quantiles, growth_models)
    ns, step, total_days = _whole_days(series, first)
    origins = list(range(first, total_days))
    spec = slot_spec(slots)
    shape = (len(origins), len(methods), q.size)
    coverage, over = np.full(shape, np.nan), np.full(shape, np.nan)
    hindsight = np.full((len(origins), q.size), np.nan)
    demand_sum, intervals, scored_days = np.zeros(len(origins)), np.zeros(len(origins)), []
    for o, k in enumerate(origins):
        end = min(k + horizon, total_days)
        part = series.isel(time=ns < ns[0] + end * DAY_NS)
        scored = part.isel(
            time=part["time"].values.astype("datetime64[ns]").view(np.int64) >= ns[0] + k * DAY_NS
        )
        scored_days.append(end - k)
        demand = scored["qps"].values.astype(float)
        demand = demand[~np.isnan(demand)]
        demand_sum[o], intervals[o] = demand.sum(), demand.size
        for m, method in enumerate(methods):
            score = backtest(part, fit=f"{k}D", slots=slots, quantiles=q, growth_model=method)
            plans = score.isel(plan=slice(1, None))  # the mean plan left out
            coverage[o, m] = plans.coverage.values
            over[o, m] = plans.overprovision_fraction.values
        hindsight[o] = _hindsight(scored, spec, q, demand.mean())
    table = _pooled(coverage, over, hindsight, demand_sum, intervals)
    table["scored_days"] = ("origin", np.asarray(scored_days), _attrs("d", "days scored"))
    table["scored_intervals"] = ("origin", intervals.astype(np.int64), _attrs("1", "intervals"))
    return table.assign_coords(
        origin=("origin", np.asarray(origins), _attrs("d", "days fitted (days 1..k)")),
        growth_model=(
            "growth_model",
            list(methods),
            _attrs("", "how the plan carries history forward"),
        ),
        traffic_quantile=("traffic_quantile", q, glossary.attrs("traffic_quantile")),
    ).assign_attrs(
        title="rolling-origin backtest of slot plans",
        slots=spec.kind,
        horizon_days=horizon,
        interval_s=step / NS,
        source=series.attrs.get("source", ""),
    )


def _rolling_args(min_fit_days, horizon_days, quantiles, growth_models):
    """The checked first origin (days), horizon (days), quantiles and growth model names."""
    first = _validate.positive_int(min_fit_days, "min_fit_days")
    if first < MIN_DAYS:
        raise InputError(f"min_fit_days must be at least {MIN_DAYS}, got {min_fit_days!r}")
    horizon = _horizon(horizon_days)
    q = _quantiles(quantiles)
    if isinstance(growth_models, str):
        growth_models = (growth_models,)
    methods = tuple(growth_model(m, "growth_models") for m in growth_models)
    if not methods or len(set(methods)) != len(methods):
        raise InputError(f"growth_models: give distinct names from {list(GROWTH_MODELS)}")
    return first, horizon, q, methods


def _whole_days(series: xr.Dataset, first: int) -> tuple[np.ndarray, int, int]:
    """The series' times and step (ns) and its days from its first interval: one after ``first``."""
    step = interval_ns_of(series)
    ns = series["time"].values.astype("datetime64[ns]").view(np.int64)
    total_days = -(-(int(ns[-1] - ns[0]) + step) // DAY_NS)
    if total_days <= first:
        raise InputError(
            f"series: {duration_text(int(ns[-1] - ns[0]) + step)} leaves no day to score after "
            f"min_fit_days={first}"
        )
    return ns, step, total_days


def _hindsight(scored: xr.Dataset, spec: Slots, q: np.ndarray, mean_demand: float) -> np.ndarray:
    """Over-provisioning of the scored days' own per-slot quantiles (as fit_baseline computes them).

    Per quantile: the mean capacity above demand over the observed intervals, over mean demand.
    """
    codes = slot_codes(scored["time"], spec)
    values = scored["qps"].values.astype(float)
    own = slot_statistics(values, codes, q, spec.count)[0]
    seen = ~np.isnan(values)
    out = np.full(q.size, np.nan)
    for j in range(q.size):
        plan = own[codes, j]
        out[j] = np.mean(np.maximum(plan[seen] - values[seen], 0)) / mean_demand
    return out


def _pooled(coverage, over, hindsight, demand_sum, intervals) -> xr.Dataset:
    """The per-origin scores and their pools over every scored interval of every origin."""
    weights = intervals[:, None, None]
    excess = over * demand_sum[:, None, None]  # capacity above demand, summed over the intervals
    hind_excess = (hindsight * demand_sum[:, None]).sum(axis=0)
    pooled_over = excess.sum(axis=0) / demand_sum.sum()
    dims = ("origin", "growth_model", "traffic_quantile")
    with np.errstate(divide="ignore", invalid="ignore"):  # a hindsight plan with no idle capacity
        ratio = over / hindsight[:, None, :]
        pooled_ratio = excess.sum(axis=0) / hind_excess[None, :]
    return xr.Dataset(
        {
            "coverage": (dims, coverage, glossary.attrs("coverage")),
            "overprovision_fraction": (dims, over, glossary.attrs("overprovision_fraction")),
            "overprovision_ratio": (
                dims,
                ratio,
                _attrs("1", "over-provisioning over the hindsight plan's (inf if that is 0)"),
            ),
            "hindsight_overprovision_fraction": (
                ("origin", "traffic_quantile"),
                hindsight,
                _attrs("1", "over-provisioning of the scored days' own per-slot quantiles"),
            ),
            "pooled_coverage": (
                ("growth_model", "traffic_quantile"),
                (coverage * weights).sum(axis=0) / intervals.sum(),
                glossary.attrs("coverage", pooled="every scored interval of every origin"),
            ),
            "pooled_overprovision_fraction": (
                ("growth_model", "traffic_quantile"),
                pooled_over,
                glossary.attrs("overprovision_fraction", pooled="sums over every origin"),
            ),
            "pooled_overprovision_ratio": (
                ("growth_model", "traffic_quantile"),
                pooled_ratio,
                _attrs("1", "pooled over-provisioning over the hindsight plans' pooled"),
            ),
        }
    )

"""Slot baselines: each slot's mean and P50/P95/P99 request rate, and the mean plan's shortfall."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import _validate, glossary
from ..data._series import (
    DAY_NS,
    MONDAY_NS,
    NS,
    WEEK_NS,
    Slots,
    checked_series,
    duration_text,
    interval_ns_of,
    slot_codes,
)
from ..data._series import slots as slot_spec
from ..errors import InputError

#: The traffic quantiles a baseline gives each slot: P50, P95 and P99 of its request rate.
DEFAULT_QUANTILES = (0.5, 0.95, 0.99)


# -- slot baselines --------------------------------------------------------------------------
_MEAN_PLANS = ("overall", "slot")


def _quantiles(values, name: str = "quantiles") -> np.ndarray:
    """``values`` as sorted quantiles, each in (0, 1) once; errors name the argument ``name``."""
    try:
        array = np.atleast_1d(np.asarray(values, dtype=float))
    except (TypeError, ValueError):
        array = np.empty((0,))
    if array.ndim != 1 or array.size == 0:
        raise InputError(f"{name}: give a list of numbers in (0, 1), got {values!r}")
    if np.isnan(array).any() or (array <= 0).any() or (array >= 1).any():
        raise InputError(f"{name} must lie strictly between 0 and 1, got {array.tolist()}")
    if np.unique(array).size != array.size:
        raise InputError(f"{name}: duplicate values in {array.tolist()}")
    return np.sort(array)


def slot_statistics(values, slot, quantiles, n_slots: int):
    """Per slot: the quantiles, mean and count of the values that are not missing.

    Parameters
    ----------
    values
        (n,) float64, NaN for a missing interval (left out).
    slot
        (n,) int64 slot codes in ``[0, n_slots)``.
    quantiles
        (q,) quantiles in [0, 1], by numpy's default ("linear") method with its two-sided
        interpolation, so that each equals ``np.quantile`` of the slot's values bit for bit.
    n_slots
        Number of slots.

    Returns
    -------
    (quantile, mean, count)
        (n_slots, q) and (n_slots,) float64, NaN for a slot without values, and (n_slots,) int64.
        A slot's mean is its values summed one at a time in ascending order, then divided by the
        count.

    Notes
    -----
    Plain numpy: the values are grouped by slot (a radix sort of the codes), laid out as one row
    per slot padded with NaN, and each row is sorted (NaN last); the quantiles are read off the
    rows and the sums are running sums along them. In the forecast benchmark this ties the numba
    kernel it replaced and beats numpy's ``lexsort`` + ``bincount`` and a pandas ``groupby``, with
    nothing to compile.
    """
    values = np.asarray(values, dtype=np.float64)
    slot = np.asarray(slot)
    quantiles = np.asarray(quantiles, dtype=np.float64)
    seen = ~np.isnan(values)
    if not seen.all():
        values, slot = values[seen], slot[seen]
    count = np.bincount(slot, minlength=n_slots).astype(np.int64)
    width = int(count.max()) if values.size else 0
    # group by slot: a stable sort of small integer codes is a radix sort
    codes = slot.astype(np.uint16) if n_slots <= 1 << 16 else slot
    order = np.argsort(codes, kind="stable")
    grouped = values[order]
    if grouped.size == n_slots * width:  # every slot holds as many values: rows as they are
        table = grouped.reshape(n_slots, width)
    else:
        table = np.full((n_slots, width), np.nan)
        starts = np.cumsum(count) - count
        shift = np.arange(n_slots, dtype=np.int64) * width - starts
        table.reshape(-1)[np.arange(grouped.size) + shift[slot[order]]] = grouped
    table.sort(axis=1)
    quantile = np.full((n_slots, quantiles.size), np.nan)
    mean = np.full(n_slots, np.nan)
    rows = np.flatnonzero(count)
    if rows.size:
        sizes = count[rows]
        table = table[rows] if rows.size < n_slots else table
        index = np.arange(rows.size)
        mean[rows] = np.add.accumulate(table, axis=1)[index, sizes - 1] / sizes
        position = quantiles * (sizes[:, None] - 1)
        below = np.floor(position)
        weight = position - below
        below = below.astype(np.int64)
        low = table[index[:, None], below]
        high = table[index[:, None], np.minimum(below + 1, sizes[:, None] - 1)]
        step = high - low
        quantile[rows] = np.where(weight >= 0.5, high - step * (1.0 - weight), low + step * weight)
    return quantile, mean, count


def _slot_block(qps: np.ndarray, codes: np.ndarray, quantiles: np.ndarray, n_slots: int):
    # apply_ufunc hands over (..., time); the statistics take one series at a time
    lead = qps.shape[:-1]
    target = np.empty((*lead, n_slots, quantiles.size))
    mean = np.empty((*lead, n_slots))
    count = np.empty((*lead, n_slots), np.int64)
    for index in np.ndindex(*lead):
        target[index], mean[index], count[index] = slot_statistics(
            qps[index], codes, quantiles, n_slots
        )
    return target, mean, count


def _check_weekday(series: xr.Dataset, spec: Slots) -> None:
    origin = series.attrs.get("time_origin", "relative timestamps")
    if spec.count > 1 and series.attrs.get("hours_known") == "no":
        why = (
            f"slots={spec.kind!r}: this series counts time from an unknown start ({origin}), so "
            "its hours of the day are not known; "
        )
        raise InputError(
            why + "load it with start= (the date and time of time 0), or use one slot",
            plan=why + "set [traffic] start (--start) to the date and time of time 0",
        )
    if spec.needs_weekday and series.attrs.get("weekday_known") == "no":
        why = (
            f"slots={spec.kind!r} needs the weekday, and this series' weekday is not known "
            f"({origin}); "
        )
        raise InputError(
            why + "use 'hour_of_day', or load the trace with start= set to the real date of time 0",
            plan=why
            + "set [traffic] slots = 'hour_of_day', or [traffic] start (--start) to the real "
            "date of time 0",
        )


def fit_baseline(
    series: xr.Dataset,
    *,
    slots: str | tuple | Slots = "hour_of_day",
    quantiles=DEFAULT_QUANTILES,
    mean_plan: str = "overall",
    flat_tolerance: float = 0.1,
) -> xr.Dataset:
    """Per-slot baselines of a QPS series: mean and quantiles, and how far a mean plan falls short.

    Parameters
    ----------
    series
        A series over ``time`` with ``qps`` (requests/s), from :func:`resample` or
        :func:`capnb.data.load_rate_series`. Missing intervals (NaN) are left out.
    slots
        ``"hour_of_day"`` (0-23), ``"hour_of_week"`` (0-167, Monday 00:00 = 0; needs a known weekday)
        or ``(slot_length, period)`` such as ``("30min", "1D")``. The interval must divide the slot.
    quantiles
        The ``traffic_quantile`` values to plan on (default 0.5, 0.95, 0.99).
    mean_plan
        The plan the quantiles are compared with: ``"overall"`` (one rate, the historical mean: the
        article's mistake) or ``"slot"`` (each slot's own mean).
    flat_tolerance
        Traffic counts as flat (the mean suffices) when the highest quantile of the busiest slot is
        within this share of the overall mean.

    Returns
    -------
    xarray.Dataset
        ``target_qps`` over (slot, traffic_quantile) and ``mean_qps``, ``intervals``, ``periods``,
        ``mean_plan_qps``, ``underprovisioned_share`` over slot; ``shortfall_qps`` and
        ``shortfall_fraction`` over (slot, traffic_quantile); ``overall_qps`` and
        ``overall_shortfall_fraction`` over traffic_quantile (all intervals pooled);
        ``overall_underprovisioned_share``, ``peak_to_trough``, ``peak_to_mean``. Rates in
        requests/s. Attrs: ``slots``, ``slot_s``, ``period_s``, ``interval_s``, ``mean_plan``,
        ``flat`` and ``enough_history`` ("yes"/"no") and ``boundaries`` (the statements).

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> base = fit_baseline(load_rate_series("servegen-m-large"))
    >>> base.target_qps.sizes["slot"], base.attrs["enough_history"]
    (24, 'yes')
    """
    series, spec = _series_and_slots(series, slots)
    step = interval_ns_of(series)
    if mean_plan not in _MEAN_PLANS:
        raise InputError(f"mean_plan must be one of {list(_MEAN_PLANS)}, got {mean_plan!r}")
    tolerance = _validate.fraction(flat_tolerance, "flat_tolerance", high=10.0)
    q = _quantiles(quantiles)
    codes = slot_codes(series["time"], spec)
    qps = series["qps"].astype(float)
    target, mean, count = xr.apply_ufunc(
        _slot_block,
        qps,
        kwargs={"codes": codes, "quantiles": q, "n_slots": spec.count},
        input_core_dims=[["time"]],
        output_core_dims=[["slot", "traffic_quantile"], ["slot"], ["slot"]],
        dask="parallelized",
        output_dtypes=[float, float, np.int64],
        dask_gufunc_kwargs={"output_sizes": {"slot": spec.count, "traffic_quantile": q.size}},
    )
    coords = {
        "slot": ("slot", np.arange(spec.count), glossary.attrs("slot", kind=spec.kind)),
        "traffic_quantile": ("traffic_quantile", q, glossary.attrs("traffic_quantile")),
    }
    result = xr.Dataset(
        {
            "target_qps": target.assign_attrs(glossary.attrs("target_qps")),
            "mean_qps": mean.assign_attrs(glossary.attrs("mean_qps")),
            "intervals": count.assign_attrs(glossary.attrs("intervals")),
        },
        coords=coords,
    )
    result["periods"] = ("slot", _periods(series, spec), glossary.attrs("periods"))
    result = _shortfall(result, qps, codes, q, mean_plan)
    result.attrs = {
        "title": f"slot baselines ({spec.label()})",
        **{
            k: v
            for k, v in series.attrs.items()
            if k in ("source", "timezone", "weekday_known", "hours_known")
        },
        "slots": spec.kind,
        "slot_s": spec.slot_ns / NS,
        "period_s": spec.period_ns / NS,
        "interval_s": step / NS,
        "mean_plan": mean_plan,
        "span_s": float(series.sizes["time"] * step / NS),
    }
    return _boundaries(result, spec, tolerance)


def _periods(series: xr.Dataset, spec: Slots) -> np.ndarray:
    ns = series["time"].values.astype("datetime64[ns]").view(np.int64)
    seen = series["qps"].notnull().values
    while seen.ndim > 1:
        seen = seen.any(axis=0)
    period = (ns[seen] - MONDAY_NS) // spec.period_ns
    slot = ((ns[seen] - MONDAY_NS) % spec.period_ns) // spec.slot_ns
    pairs = np.unique(period * spec.count + slot)
    return np.bincount(pairs % spec.count, minlength=spec.count)


def _share_per_slot(above: np.ndarray, seen: np.ndarray, codes: np.ndarray, n_slots: int):
    """Share of each slot's observed intervals above the plan: (..., time) flags -> (..., slot).

    Counted with ``np.bincount`` (an xarray groupby took most of :func:`fit_baseline`'s time on
    long series); a slot with no observed interval gets NaN.
    """

    def per_slot(flags: np.ndarray) -> np.ndarray:
        rows = flags.reshape(-1, flags.shape[-1])
        index = np.arange(rows.shape[0])[:, None] * n_slots + codes
        counts = np.bincount(index[rows], minlength=rows.shape[0] * n_slots)
        return counts.reshape(*flags.shape[:-1], n_slots)

    with np.errstate(invalid="ignore", divide="ignore"):
        return per_slot(above) / per_slot(seen)


def _shortfall(result, qps, codes, q, mean_plan) -> xr.Dataset:
    overall_mean = qps.mean("time")
    if mean_plan == "overall":
        plan = overall_mean.expand_dims(slot=result.slot).transpose(..., "slot")
    else:
        plan = result.mean_qps
    target = result.target_qps
    shortfall = (target - plan).clip(min=0)
    result["mean_plan_qps"] = plan.assign_attrs(glossary.attrs("mean_plan_qps", kind=mean_plan))
    result["shortfall_qps"] = shortfall.assign_attrs(glossary.attrs("shortfall_qps"))
    result["shortfall_fraction"] = (shortfall / target).assign_attrs(
        glossary.attrs("shortfall_fraction")
    )
    slot_of = xr.DataArray(codes, dims="time")
    plan_per_interval = plan.isel(slot=slot_of)
    seen = qps.notnull()
    above = (qps > plan_per_interval) & seen
    share = xr.apply_ufunc(
        _share_per_slot,
        above,
        seen,
        kwargs={"codes": codes, "n_slots": result.sizes["slot"]},
        input_core_dims=[["time"], ["time"]],
        output_core_dims=[["slot"]],
        dask="parallelized",
        output_dtypes=[float],
        # the plan per interval comes chunked along time (by slot): whole series per block
        dask_gufunc_kwargs={"output_sizes": {"slot": result.sizes["slot"]}, "allow_rechunk": True},
    ).assign_coords(slot=result.slot)
    result["underprovisioned_share"] = share.assign_attrs(glossary.attrs("underprovisioned_share"))
    overall = qps.quantile(q, dim="time", skipna=True).rename(quantile="traffic_quantile")
    overall = overall.assign_coords(traffic_quantile=result.traffic_quantile)
    overall_plan = plan_per_interval.where(seen).mean("time")
    result["overall_qps"] = overall.assign_attrs(glossary.attrs("overall_qps"))
    result["overall_shortfall_fraction"] = (
        (overall - overall_plan).clip(min=0) / overall
    ).assign_attrs(glossary.attrs("overall_shortfall_fraction", plan=mean_plan))
    result["overall_underprovisioned_share"] = (above.sum("time") / seen.sum("time")).assign_attrs(
        glossary.attrs("overall_underprovisioned_share")
    )
    result["peak_to_trough"] = (
        result.mean_qps.max("slot") / result.mean_qps.min("slot")
    ).assign_attrs(glossary.attrs("peak_to_trough"))
    result["peak_to_mean"] = (result.mean_qps.max("slot") / overall_mean).assign_attrs(
        glossary.attrs("peak_to_mean")
    )
    return result


def _boundaries(result: xr.Dataset, spec: Slots, tolerance: float) -> xr.Dataset:
    """State where percentile planning does not apply: too little history, flat traffic."""
    statements = []
    periods = result["periods"].values
    unseen = int((periods == 0).sum())
    thin = int((periods < 2).sum())
    unit = "day" if spec.period_ns == DAY_NS else "week" if spec.period_ns == WEEK_NS else "period"
    if thin:
        span = duration_text(round(result.attrs["span_s"] * NS))
        statements.append(
            f"Too little history for {spec.label()} slots: {thin} of {spec.count} slots were seen in "
            f"fewer than two {unit}s ({unseen} never), in {span} of data. A quantile "
            f"of one {unit} is that {unit}'s value, not a baseline: use coarser slots or more history."
        )
    top = result.target_qps.isel(traffic_quantile=-1).max("slot")
    overall_mean = result.mean_qps.weighted(result.intervals).mean("slot")
    flat = bool((top <= (1 + tolerance) * overall_mean).all())
    if flat:
        statements.append(
            f"Traffic is flat: even the P{100 * float(result.traffic_quantile[-1]):g} of the busiest "
            f"slot is within {tolerance:.0%} of the mean, so planning on the mean suffices and "
            "percentile planning would only add idle capacity."
        )
    result.attrs["enough_history"] = "no" if thin else "yes"
    result.attrs["flat"] = "yes" if flat else "no"
    result.attrs["boundaries"] = " ".join(statements) or "none"
    return result


def _series_and_slots(series, slots):
    """The checked series and its slot spec: the interval divides the slot; weekdays known if used."""
    series = checked_series(series)
    spec = slot_spec(slots)
    step = interval_ns_of(series)
    if spec.slot_ns % step:
        raise InputError(
            f"the series' interval ({duration_text(step)}) does not divide the slot length "
            f"({duration_text(spec.slot_ns)}): resample to an interval that does"
        )
    _check_weekday(series, spec)
    return series, spec

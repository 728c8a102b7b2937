"""Demand for the simulator: requests/s per step, from arrays, rate series and request logs.

Part of :mod:`capnb.elasticity` (which re-exports :func:`resample_demand`). Every value must be a
finite, non-negative rate; the error names the position and time of the first bad one.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr

from .. import _validate, glossary
from ..errors import InputError
from ..units import declare_units, require_units
from ._decision import real
from ._policy import steps

__all__ = [
    "PREDICTIVE_QUANTILE",
    "demand_values",
    "forecast_demand",
    "prepare_demand",
    "resample_demand",
    "smooth_demand",
]

#: The forecast quantile the predictive policy provisions for by default: its slot's median, the
#: policy's reactive correction adding the load seen above it. On servegen-m-large's second week
#: (forecast fitted on the first, 8.8 requests/s per instance, 75 s cold start) the cheapest
#: predictive run within the 0.1% breach budget cost 21,325 USD at the P50, 28,050 at the P95 and
#: 31,826 at the P99.
PREDICTIVE_QUANTILE = 0.5

_NS = 1_000_000_000


def _seconds_between(times: np.ndarray, what: str) -> float:
    if times.size < 2:
        raise InputError(f"{what}: one time point; give step_s")
    gaps = np.diff(times.astype("datetime64[ns]" if times.dtype.kind == "M" else "timedelta64[ns]"))
    gaps = gaps.astype(np.int64)
    if gaps[0] <= 0:
        how = "run backwards" if gaps[0] < 0 else "do not move"
        raise InputError(
            f"{what}: times {how} ({gaps[0] / _NS:g} s from position 0 to 1); sort them, one "
            "value per step"
        )
    if (gaps != gaps[0]).any():
        where = int(np.flatnonzero(gaps != gaps[0])[0])
        raise InputError(
            f"{what}: times are not evenly spaced ({gaps[0] / _NS:g} s, then "
            f"{gaps[where] / _NS:g} s after position {where}); resample it first"
        )
    return gaps[0] / _NS


def _timed_series(demand):
    """A pandas Series over times as a DataArray over ``time``; anything else as it is.

    Its times say its step, as a DataArray's do: it is not a bare array read at any ``step_s``.
    """
    if isinstance(demand, pd.Series) and demand.index.dtype.kind in "mM":
        return xr.DataArray(demand.to_numpy(), dims="time", coords={"time": demand.index})
    return demand


def _when(times: np.ndarray, i: int) -> str:
    if times.dtype.kind == "M":
        return str(np.datetime_as_string(times[i], unit="s"))
    return f"{times[i] / np.timedelta64(1, 's'):g} s"


def _check_values(values: np.ndarray, times: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        kind = "NaN" if np.isnan(values[i]) else ("negative" if values[i] < 0 else "infinite")
        fill = (
            " (missing windows: fill them with each slot's median as the plan does, "
            "prepare_demand(series, step_s, baseline=capnb.forecast.fit_baseline(series)))"
            if kind == "NaN"
            else ""
        )
        raise InputError(
            f"{what}: {kind} demand {float(values[i])!r} at position {i} (time {_when(times, i)}); "
            f"{int(bad.sum())} bad value(s) in all{fill}"
        )


@declare_units(step_s="s")
def resample_demand(source, step_s: float, *, gap: str | float | None = "15min") -> xr.DataArray:
    """A request log or a rate series as demand per simulation step (requests/s).

    Parameters
    ----------
    source
        A request log (:func:`capnb.data.load_trace`: requests are counted per step), a rate
        series (:func:`capnb.data.load_rate_series` or :func:`capnb.forecast.resample`: windows
        longer than the step are held constant, shorter ones averaged), or a DataArray of
        requests/s over ``time``.
    step_s
        Simulation step (s). A rate series' window must be a whole multiple of it, or divide it.
    gap
        For a request log: runs of empty steps at least this long count as missing data (see
        :func:`capnb.forecast.resample`), which is an error inside the span.

    Returns
    -------
    xarray.DataArray
        ``qps`` over ``time`` (requests/s), attrs ``step_s`` and ``source``. Partial steps at the
        edges of a log are trimmed.

    Examples
    --------
    >>> from capnb.data import load_trace
    >>> demand = resample_demand(load_trace("azure-code-2023"), 5)
    >>> demand.sizes["time"], demand.attrs["step_s"]
    (687, 5.0)
    """
    from .. import forecast

    step = real(step_s, "step_s", open_low=True)
    if isinstance(source, xr.Dataset) and "request" in source.dims:
        if step != round(step) or step < 1:
            raise InputError(
                f"step_s must be a whole number of seconds for a request log, got {step_s}"
            )
        span = np.ptp(source.time.values.astype("datetime64[ns]").view(np.int64)) / 1e9
        _validate.within_budget(
            f"{span / step:,.0f} steps of {step:g} s",
            nbytes=span / step * 24.0,
            lower="use a longer step_s",
        )
        series = forecast.resample(source, int(step), gap=gap).qps
        observed = np.flatnonzero(np.isfinite(series.values))
        if observed.size == 0:
            raise InputError("source: no complete step; use a shorter step_s")
        series = series.isel(time=slice(observed[0], observed[-1] + 1))
        holes = np.flatnonzero(~np.isfinite(series.values))
        if holes.size:
            raise InputError(
                f"source: the log has no requests for at least {gap} from "
                f"{_when(series.time.values, int(holes[0]))} ({holes.size} steps in all), which "
                "counts as missing data; pass gap=None to treat it as idle time, or load a span "
                "without it"
            )
        held = None
    else:
        series = source.qps if isinstance(source, xr.Dataset) and "qps" in source else source
        series = _timed_series(series)
        if not isinstance(series, xr.DataArray) or series.dims != ("time",):
            raise InputError(
                "source must be a request log, a rate series with 'qps' over 'time', or a "
                f"DataArray over 'time'; got {type(source).__name__}"
            )
        _validate.naive_times(series["time"], "source.time")
        interval = float(
            series.attrs.get("interval_s") or _seconds_between(series.time.values, "source")
        )
        if interval > step:
            repeat = steps(interval, step, "the series' window (interval_s)")
            _validate.within_budget(  # times and values, 8 bytes each, and a temporary
                f"{series.size * repeat:,} steps of {step:g} s",
                nbytes=series.size * repeat * 24.0,
                lower="use a longer step_s",
            )
            offsets = (np.arange(repeat) * round(step * _NS)).astype("timedelta64[ns]")
            times = (series.time.values[:, None] + offsets[None, :]).ravel()
            series = xr.DataArray(
                np.repeat(series.values, repeat), dims="time", coords={"time": times}
            )
            held = interval
        elif interval < step:
            _whole_multiple(step, interval)
            coarse = forecast.resample(
                series.to_dataset(name="qps").assign_attrs(interval_s=interval), round(step)
            )
            series, held = coarse.qps, None
        else:
            held = None
    values = np.ascontiguousarray(series.values, dtype=np.float64)
    _check_values(values, series.time.values, "source")
    attrs = {**glossary.attrs("qps"), "step_s": step}
    if isinstance(source, xr.Dataset | xr.DataArray) and "source" in source.attrs:
        attrs["source"] = source.attrs["source"]
    if held is not None:
        attrs["held_from_s"] = held
    time = ("time", series.time.values, glossary.attrs("time"))
    return xr.DataArray(values, dims="time", coords={"time": time}, name="qps", attrs=attrs)


def _whole_multiple(step: float, interval: float) -> None:
    """Check that a step of ``step`` s averages whole windows of ``interval`` s, in whole seconds.

    The windows are averaged per step (:func:`capnb.forecast.resample`, whole seconds): a step that
    cut a window had been truncated (2.5 s over a 1-s series gave 2-s steps labelled 2.5 s).
    """
    count = step / interval
    if abs(count - round(count)) > 1e-9 * count or step != round(step):
        fits = [k * interval for k in range(math.ceil(count), math.ceil(count) + 3600)]
        fit = next((f for f in fits if abs(f - round(f)) < 1e-9), None)
        hint = f"; e.g. step_s={fit:g}" if fit is not None else ""
        raise InputError(
            f"step_s={step:g} s is not a whole multiple of the series' window of {interval:g} s "
            f"in whole seconds: a step averages whole windows{hint}"
        )


def demand_values(demand, step_s) -> tuple[np.ndarray, np.ndarray, float]:
    """Validated demand values (requests/s), their times and the step (s)."""
    demand = _timed_series(demand)
    if isinstance(demand, xr.Dataset):
        if "request" in demand.dims:
            raise InputError(
                "demand is a request log; turn it into requests/s per step with "
                "capnb.elasticity.resample_demand(trace, step_s)"
            )
        if "qps" not in demand:
            raise InputError(f"demand: a Dataset needs a 'qps' variable, has {list(demand)}")
        demand = demand.qps
    if isinstance(demand, xr.DataArray):
        if demand.ndim != 1:
            raise InputError(f"demand must be 1-D over time, got dims {demand.dims}")
        require_units(demand, "requests/s", "demand")
        values = np.asarray(demand.values)
        dim = demand.dims[0]
        if dim in demand.coords:
            _validate.naive_times(demand[dim], f"demand.{dim}")
        times = demand[dim].values if dim in demand.coords else None
        known = demand.attrs.get("step_s") or demand.attrs.get("interval_s")
        if times is not None and times.dtype.kind in "mM" and times.size > 1:
            apart = _seconds_between(times, "demand")
            if known is not None and not math.isclose(float(real(known, "step_s")), apart):
                label = "step_s" if demand.attrs.get("step_s") else "interval_s"
                raise InputError(  # the attr had won: 1-s times were simulated as 5-s steps
                    f"demand: its {label} attr says {float(known):g} s, but its times are "
                    f"{apart:g} s apart; drop the attr or resample it with "
                    "capnb.elasticity.resample_demand"
                )
            known = apart
        if step_s is None:
            if known is None:
                raise InputError("demand has no time step; give step_s")
            step_s = known
        elif known is not None and not math.isclose(float(known), float(step_s), rel_tol=1e-9):
            raise InputError(
                f"step_s={step_s} does not match the demand's own step of {known:g} s; resample "
                "it with capnb.elasticity.resample_demand"
            )
    else:
        values, times = np.asarray(demand), None
        if step_s is None:
            raise InputError("demand is a plain array; give step_s (seconds per value)")
    step = real(step_s, "step_s", open_low=True)
    if values.ndim != 1 or values.size == 0:
        raise InputError(f"demand must be a non-empty 1-D series, got shape {values.shape}")
    if values.dtype.kind not in "iuf":
        raise InputError(f"demand must hold numbers (requests/s), got dtype {values.dtype}")
    values = np.ascontiguousarray(values, dtype=np.float64)
    if times is None or times.dtype.kind not in "mM":
        times = (np.arange(values.size) * round(step * _NS)).astype("timedelta64[ns]")
    _check_values(values, times, "demand")
    return values, times, step


@declare_units(step_s="s")
def prepare_demand(
    source, step_s: float, *, baseline: xr.Dataset | None = None, scale: float = 1.0
) -> xr.DataArray:
    """Demand per simulation step from a trace as the plan reads it: scaled, holes filled.

    A real production series has holes (the readers mark them missing, never zero), and the
    simulator needs a number at every step. Each missing window takes its slot's median from the
    forecast ``baseline``: the neutral choice, which invents neither a burst nor a trough. The
    share filled is ``attrs["filled_share"]``. The plan and the elasticity worksheet both call
    this, so that they simulate the same demand.

    Parameters
    ----------
    source
        A request log or a rate series (as :func:`resample_demand` takes).
    step_s
        Simulation step (s).
    baseline
        The forecast step's baseline or target for the same series (``target_qps`` over ``slot`` x
        ``traffic_quantile`` with 0.5 among the quantiles); without it a hole is an error.
    scale
        Multiplies every rate (the plan's ``demand_scale``).

    Returns
    -------
    xarray.DataArray
        ``qps`` over ``time`` (requests/s) with ``step_s`` and ``filled_share`` attrs.

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> from capnb.forecast import fit_baseline
    >>> series = load_rate_series("servegen-m-small")  # 37 of its 10-min windows are missing
    >>> demand = prepare_demand(series, 60, baseline=fit_baseline(series))
    >>> round(demand.attrs["filled_share"], 4), demand.sizes["time"]
    (0.0184, 20160)
    """
    from .. import forecast

    factor = real(scale, "scale", open_low=True)
    step = real(step_s, "step_s", open_low=True)
    log = isinstance(source, xr.Dataset) and "request" in source.dims
    native = step if log else float(source.attrs.get("interval_s", step))
    qps = forecast.resample(source, f"{native:g}s").qps * factor
    observed = np.flatnonzero(np.isfinite(qps.values))
    if observed.size == 0:
        raise InputError("source: no observed window to simulate")
    qps = qps.isel(time=slice(observed[0], observed[-1] + 1))  # a log's partial edges stay out
    missing = np.isnan(qps.values)
    if missing.any():
        if baseline is None:
            raise InputError(
                f"source: {int(missing.sum())} windows are missing; give baseline= (the forecast "
                "step's baseline) to fill them with their slot's median"
            )
        median = baseline.target_qps.sel(traffic_quantile=0.5)
        codes = forecast.slot_codes(qps.time.values[missing], _slot_spec(baseline))
        values = qps.values.copy()
        values[missing] = median.sel(slot=codes).values
        qps = qps.copy(data=values)
    qps.attrs["interval_s"] = native
    demand = resample_demand(qps, step)
    demand.attrs.update(filled_share=float(missing.mean()))
    return demand


@declare_units(latency_s="s")
def smooth_demand(demand: xr.DataArray, latency_s: float) -> xr.DataArray:
    """Demand as the instances see it: the arrival rate averaged over a request's time in one.

    An instance holds the requests of the last ``latency_s`` seconds in flight (Little's law), and
    the capacity step's requests/s per instance is its safe concurrency over that latency: what
    can exceed it is the arrivals of the last ``latency_s`` seconds, not of one step. A request
    log counted per second is noisy: at 3.5 requests/s on average, some second brings 8, which an
    instance holding 40 requests takes in; counted per step, that second left requests over and
    was a breach, and the plan bought spares for noise. Each step's rate becomes the trailing mean
    over ``round(latency_s / step_s)`` steps; the steps of the first window, which have no full
    window behind them, take that first window's mean (the simulator starts its fleet on the first
    step: one second's count of a log would set it, noise and all). A rate series held
    constant over windows at least ``latency_s`` long (``attrs["held_from_s"]``, as
    :func:`resample_demand` marks it) is returned as is: each window is an average already.

    Parameters
    ----------
    demand
        Requests/s per step over ``time`` (:func:`prepare_demand`, :func:`resample_demand`), with
        its ``step_s`` attr.
    latency_s
        A request's mean time in an instance at the operating point (s): the safe concurrency
        over the requests/s per instance. At most one step: the demand is returned as is.

    Returns
    -------
    xarray.DataArray
        The same ``qps`` over ``time``, attrs ``smoothed_over_s`` (the window, s) added.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> d = xr.DataArray(np.array([0.0, 4, 0, 4, 0, 4]), dims="time", attrs={"step_s": 1.0})
    >>> smooth_demand(d, 2.0).values.tolist()
    [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    """
    if isinstance(demand, xr.Dataset) and "qps" in demand:
        demand = demand.qps
    if not isinstance(demand, xr.DataArray):
        raise InputError(
            f"demand: expected requests/s over time as a DataArray (prepare_demand, "
            f"resample_demand), got {type(demand).__name__}"
        )
    values, _, step = demand_values(demand, None)
    latency = real(latency_s, "latency_s", open_low=True)
    held = float(demand.attrs.get("held_from_s", 0.0))  # a rate series' window, held per step
    window = 1 if held >= latency else max(1, round(latency / step))
    if window > 1:
        total = np.concatenate([[0.0], np.cumsum(values)])
        ends = np.maximum(np.arange(1, values.size + 1), min(window, values.size))
        starts = np.maximum(ends - window, 0)
        values = (total[ends] - total[starts]) / (ends - starts)
    out = demand.copy(data=values)
    out.attrs["smoothed_over_s"] = window * step
    return out


def _slot_spec(baseline: xr.Dataset):
    from .. import forecast

    return forecast.Slots(
        str(baseline.attrs["slots"]),
        round(float(baseline.attrs["slot_s"]) * _NS),
        round(float(baseline.attrs["period_s"]) * _NS),
    )


@declare_units(step_s="s")
def forecast_demand(
    demand,
    baseline: xr.Dataset,
    *,
    quantile: float = PREDICTIVE_QUANTILE,
    step_s: float | None = None,
) -> xr.DataArray:
    """The forecast's rate at every simulation step: its slot's ``quantile`` (requests/s).

    The predictive policy (``policy="predictive"`` in :func:`capnb.elasticity.simulate` and
    :func:`capnb.elasticity.sweep`) reads it one cold start ahead. A baseline fitted on other days
    than ``demand`` (an earlier week) makes it a true forecast; fitted on the same days, it has
    seen the traffic it is tested on.

    Parameters
    ----------
    demand
        Requests/s per step over datetime ``time`` (as :func:`prepare_demand` returns): only its
        times are read, to find each step's slot.
    baseline
        The forecast step's baseline or target (``target_qps`` over ``slot`` x
        ``traffic_quantile``, :func:`capnb.forecast.fit_baseline` or :func:`capnb.forecast.target`).
    quantile
        Which of the baseline's traffic quantiles to provision for (default
        :data:`PREDICTIVE_QUANTILE`).
    step_s
        Seconds per demand value (default: the demand's own step).

    Returns
    -------
    xarray.DataArray
        ``forecast_qps`` over the demand's ``time`` (requests/s), attrs ``quantile`` and ``slots``.
    """
    from .. import forecast

    _, times, _ = demand_values(demand, step_s)
    if times.dtype.kind != "M" and baseline.attrs.get("slots") != "custom":
        raise InputError(
            "demand: its times must be dates to find each step's slot of the forecast; use "
            "capnb.elasticity.prepare_demand on a trace with a clock"
        )
    if not isinstance(baseline, xr.Dataset) or "target_qps" not in baseline:
        raise InputError("baseline must be the forecast step's baseline or target (target_qps)")
    known = baseline.traffic_quantile.values
    matches = np.flatnonzero(np.isclose(known, quantile, rtol=0, atol=1e-12))
    if matches.size == 0:
        raise InputError(
            f"quantile={quantile!r} is not among the baseline's traffic quantiles {known.tolist()}"
        )
    per_slot = baseline.target_qps.isel(traffic_quantile=int(matches[0]))
    codes = forecast.slot_codes(times, _slot_spec(baseline))
    values = np.ascontiguousarray(per_slot.sel(slot=codes).values, dtype=np.float64)
    return xr.DataArray(
        values,
        dims="time",
        coords={"time": ("time", times, glossary.attrs("time"))},
        name="forecast_qps",
        attrs=glossary.attrs(
            "forecast_qps",
            quantile=float(known[matches[0]]),
            slots=str(baseline.attrs["slots"]),
        ),
    )

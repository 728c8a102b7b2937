"""Simulate autoscaling policies over a demand series, sweep policy grids, and read the runs."""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from .. import _validate, glossary
from ..errors import InputError
from ..kernels import autoscale as kernels
from ..units import declare_units, instances_needed, one_value
from ._advice import (
    demand_summary,
)
from ._decision import real
from ._demand import demand_values
from ._policy import (
    COOLDOWN_MEANING,
    DEFAULT_COOLDOWN_S,
    OPTIONS,
    POLICIES,
    Policy,
    _axis,
    build_config,
    config_attrs,
    steps,
)
from ._result import metric_variables, timeline_variables

_DEFAULTS = {"cold_start_s": 90.0, "tolerance_s": 60.0, "thrash_window_s": 900.0}
#: Most instances a simulated pool may hold (ready, starting and warm spares).
_LARGEST_POOL = 10_000_000
#: Instance slots per random stream of a preemption rate (see :func:`_preemption_losses`).
_SLOTS_PER_STREAM = 64
#: Most candidate preemptions a rate may draw (memory: 24 bytes each).
_MOST_CANDIDATES = 20_000_000


# -- the grid ------------------------------------------------------------------------------------
def _grid(params: Mapping[str, object]) -> dict[str, xr.DataArray]:
    kinds = {
        "scale_up_threshold": "share",
        "cooldown_s": "seconds",
        "cold_start_s": "seconds",
        "min_instances": "count",
        "buffer_instances": "count",
    }
    grid = {}
    for name, kind in kinds.items():
        array, is_dim = _axis(params[name], name, kind)
        if is_dim:
            grid[name] = xr.DataArray(array, dims=name, coords={name: array}, name=name)
            grid[name][name].attrs.update(glossary.attrs(name))
        else:
            grid[name] = xr.DataArray(array[0], name=name, attrs=glossary.attrs(name))
    return grid


def _forecast_values(forecast, values: np.ndarray, policy: str) -> np.ndarray | None:
    """The predictive policy's forecast as float64 requests/s, one per demand step; checked."""
    if forecast is None:
        if policy == "predictive":
            raise InputError(
                "forecast: the predictive policy needs the forecast demand per step (requests/s); "
                "make one with capnb.elasticity.forecast_demand(demand, baseline)"
            )
        return None
    array = np.asarray(forecast.values if isinstance(forecast, xr.DataArray) else forecast)
    if array.ndim != 1 or array.dtype.kind not in "iuf":
        raise InputError(f"forecast must be a 1-D series of requests/s, got shape {array.shape}")
    if array.size != values.size:
        raise InputError(
            f"forecast has {array.size} steps but the demand has {values.size}; give one forecast "
            "rate per demand step"
        )
    if not np.isfinite(array).all() or (array < 0).any():
        i = int(np.flatnonzero(~np.isfinite(array) | (array < 0))[0])
        raise InputError(f"forecast: {float(array[i])!r} at position {i} is not a rate >= 0")
    return np.ascontiguousarray(array, dtype=np.float64)


def _per_step(values, n: int, name: str) -> np.ndarray:
    """A 1-D series of finite numbers >= 0, one per demand step."""
    array = np.asarray(values.values if isinstance(values, xr.DataArray) else values)
    if array.ndim != 1 or array.dtype.kind not in "iuf":
        raise InputError(f"{name} must be a number or a 1-D series of numbers, one per demand step")
    if array.size != n:
        raise InputError(f"{name} has {array.size} steps but the demand has {n}; give one per step")
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}: {float(array[i])!r} at position {i} is not a number >= 0")
    return array


def _preemption_losses(preemption, lost_instances, seed, n: int, step: float, most_ready: int):
    """The kernel's preemption events (:class:`~capnb.kernels.autoscale.Losses`), or None.

    ``lost_instances``: the given series, one event per step that loses any. ``preemption``: a
    rate per ready instance-hour (one number, or one per step), drawn as a Poisson process on
    (time x instance slot): slot ``y`` in ``[0, most_ready)`` carries candidate preemptions at the
    highest rate ``r_max``, and a candidate at step ``t`` takes an instance when ``y x r_max /
    r[t]`` is below the instances ready then - so each ready instance is lost at ``r[t]`` per hour,
    whatever the fleet holds at the time. Every 64 slots have their own stream seeded by
    ``(seed, block)``: the draws do not depend on how many slots are drawn, so a run gives the same
    answer alone (:func:`simulate`) as in a sweep, and every run of a sweep meets the same draws.
    """
    if preemption is not None and lost_instances is not None:
        raise InputError("give preemption (a rate) or lost_instances (a series), not both")
    if lost_instances is not None:
        lost = _per_step(lost_instances, n, "lost_instances")
        if (lost != np.round(lost)).any():
            i = int(np.flatnonzero(lost != np.round(lost))[0])
            raise InputError(f"lost_instances: {float(lost[i])!r} at position {i} is not whole")
        return kernels.Losses.of_counts(lost.astype(np.int64))
    if preemption is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"seed must be a whole number >= 0, got {seed!r}")
    constant = isinstance(preemption, numbers.Real) and not isinstance(preemption, bool)
    if constant:
        rates = None
        highest = real(preemption, "preemption")
    else:
        if isinstance(preemption, bool | str):
            raise InputError(f"preemption must be a rate per instance-hour, got {preemption!r}")
        rates = _per_step(preemption, n, "preemption").astype(np.float64)
        highest = float(rates.max())
    if highest == 0.0:
        return kernels.Losses.none()
    per_slot = highest * n * step / 3600.0  # candidates per instance slot over the run
    streams = math.ceil(max(most_ready, 1) / _SLOTS_PER_STREAM)
    if per_slot * streams * _SLOTS_PER_STREAM > _MOST_CANDIDATES:
        raise InputError(
            f"preemption={highest:g} per instance-hour over {n * step / 3600:,.0f} hours and "
            f"{most_ready:,} instances draws more than {_MOST_CANDIDATES:,} preemptions; "
            "is it a rate per instance-hour?"
        )
    at, slot = [], []
    for block in range(streams):
        rng = np.random.default_rng([int(seed), block])
        count = rng.poisson(per_slot * _SLOTS_PER_STREAM)
        at.append(rng.random(count) * n)
        slot.append(block * _SLOTS_PER_STREAM + rng.random(count) * _SLOTS_PER_STREAM)
    steps = np.minimum(np.concatenate(at).astype(np.int64), n - 1)
    marks = np.concatenate(slot)
    order = np.lexsort((marks, steps))
    steps, marks = steps[order], marks[order]
    if rates is not None:  # thinned to the step's rate; a step at rate 0 loses nothing
        with np.errstate(divide="ignore"):
            marks = np.where(rates[steps] > 0, marks * highest / rates[steps], np.inf)
    return kernels.Losses(steps, np.ones(steps.size, np.int64), np.ascontiguousarray(marks))


def _max_pool(values: np.ndarray, per_instance_qps: float, grid, max_instances) -> int:
    lowest = int(grid["min_instances"].max())
    spares = int(grid["buffer_instances"].max())
    if lowest + spares > _LARGEST_POOL:
        raise InputError(
            f"min_instances={lowest:,} plus buffer_instances={spares:,} is more than the "
            f"{_LARGEST_POOL:,} instances capnb simulates"
        )
    if max_instances is not None:
        if isinstance(max_instances, bool) or not isinstance(max_instances, numbers.Integral):
            raise InputError(f"max_instances must be a whole number, got {max_instances!r}")
        if max_instances < lowest:
            raise InputError(f"min_instances={lowest} is more than max_instances={max_instances}")
        if max_instances + spares > _LARGEST_POOL:
            raise InputError(
                f"max_instances={max_instances:,} (plus {spares:,} warm spares) is more than the "
                f"{_LARGEST_POOL:,} instances capnb simulates"
            )
        return int(max_instances)
    # the pool that serves the peak at the lowest threshold: no policy ever asks for more
    need = float(values.max()) / (per_instance_qps * float(grid["scale_up_threshold"].min()))
    if need + spares > _LARGEST_POOL:
        # requests per step given as requests/s, or per_instance_qps in requests/ms: a pool the
        # simulator could not even allocate
        raise InputError(
            f"demand peaks at {float(values.max()):.4g} requests/s, which needs {need:.3g} "
            f"instances of per_instance_qps={per_instance_qps:g} requests/s; capnb simulates "
            f"pools of up to {_LARGEST_POOL:,}: check that demand is in requests/s and "
            "per_instance_qps in requests/s per instance"
        )
    return max(lowest, 1, math.ceil(need))


def _runs(up, cooldown, cold, low, buffer, *, demand, config, forecast=None, losses=None):
    """apply_ufunc block: broadcast the parameters, run the kernel, return (..., metric)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (up, cooldown, cold, low, buffer)))
    runs = kernels.Run.grid(up, cooldown, cold, low, buffer)
    metrics = np.empty((runs.up.size, len(kernels.METRICS)))
    kernels.simulate_many(demand, config, runs, metrics, forecast, losses)
    return metrics.reshape((*shape, len(kernels.METRICS)))


def _checked(demand, step_s, forecast):
    """``(values, times, step, forecast)``: the demand and the forecast (or None), checked."""
    values, times, step = demand_values(demand, step_s)
    return values, times, step, _forecast_values(forecast, values, "")


def _instance_qps(value) -> float:
    """``per_instance_qps`` as a number; one cell of the capacity step's answer is one."""
    value = one_value(value, "requests/s", "per_instance_qps")
    return real(value, "per_instance_qps", open_low=True)


def _prepared(
    demand,
    step_s,
    policy,
    params,
    options,
    per_instance_qps,
    max_instances,
    tolerance_s,
    thrash_window_s,
    forecast=None,
    checked=None,
):
    # `checked`: the demand and forecast as _checked returns them, when a sweep already has them
    values, times, step, ahead = checked or _checked(demand, step_s, forecast)
    if ahead is None:
        _forecast_values(None, values, policy)  # the predictive policy needs one
    qps = _instance_qps(per_instance_qps)
    if params["cooldown_s"] is None:
        params = {**params, "cooldown_s": DEFAULT_COOLDOWN_S[policy]}
    grid = _grid(params)
    if policy == "hpa" and int(grid["min_instances"].min()) < 1:
        raise InputError("min_instances must be at least 1 for the HPA (minReplicas >= 1)")
    # the predictive policy provisions for the forecast's largest rate ahead plus the load above
    # the forecast: at most the forecast's peak plus the demand's largest excess over it (a pool
    # for less would cap its runs by the grid's other cells, the highest floor)
    peak = (
        values
        if ahead is None or policy != "predictive"
        else np.array([ahead.max() + max(0.0, float(np.max(values - ahead)))]) * (1 + 1e-9)
    )
    high = _max_pool(peak, qps, grid, max_instances)
    config = build_config(
        policy,
        step_s=step,
        per_instance_qps=qps,
        tolerance_s=tolerance_s,
        max_instances=high,
        thrash_window_s=thrash_window_s,
        options=options,
    )
    in_steps = {
        name: xr.apply_ufunc(
            np.vectorize(lambda s, n=name: steps(s, step, n), otypes=[np.int64]), grid[name]
        )
        for name in ("cooldown_s", "cold_start_s")
    }
    ahead = ahead if policy == "predictive" else None
    return values, times, step, qps, grid, in_steps, config, high, ahead


def _kernel_inputs(
    demand,
    *,
    per_instance_qps,
    policy="article",
    step_s=None,
    max_instances=None,
    tolerance_s=_DEFAULTS["tolerance_s"],
    thrash_window_s=_DEFAULTS["thrash_window_s"],
    options=None,
    forecast=None,
    **params,
):
    """One policy's grid as :func:`sweep` validates it: ``(demand, Config, Run, forecast)``.

    For benchmarks; ``forecast`` is the validated forecast (None unless the policy is predictive).

    ``params`` are :func:`sweep`'s grid arguments (``scale_up_threshold``, ``cooldown_s``, ...,
    each a value or a sequence); the runs are their every combination, the first varying slowest.
    ``policy`` may be a :class:`Policy` record instead (one run; ``params`` then holds only
    ``cold_start_s``).
    """
    if isinstance(policy, Policy):
        cold = params.pop("cold_start_s", _DEFAULTS["cold_start_s"])
        record = _one_policy(policy, {**params, "max_instances": max_instances, **(options or {})})
        policy, options, max_instances = record.name, dict(record.options), record.max_instances
        params = _record_settings(record, cold)
    params = {
        "scale_up_threshold": 0.7,
        "cooldown_s": None,
        "cold_start_s": _DEFAULTS["cold_start_s"],
        "min_instances": 1,
        "buffer_instances": 0,
        **params,
    }
    values, _, _, _, grid, in_steps, config, _, ahead = _prepared(
        demand,
        step_s,
        policy,
        params,
        options or {},
        per_instance_qps,
        max_instances,
        tolerance_s,
        thrash_window_s,
        forecast,
    )
    knobs = xr.broadcast(
        grid["scale_up_threshold"],
        in_steps["cooldown_s"],
        in_steps["cold_start_s"],
        grid["min_instances"],
        grid["buffer_instances"],
    )
    return values, config, kernels.Run.grid(*(k.values for k in knobs)), ahead


def _attrs(policy, step, qps, tolerance_s, thrash_window_s, high, values, gpus, price, options):
    # without the demand's summary (demand_summary), which a sweep makes once for every policy
    return {
        "policy": policy,
        "step_s": step,
        "duration_s": values.size * step,
        "per_instance_qps": qps,
        "tolerance_s": float(tolerance_s),
        "thrash_window_s": float(thrash_window_s),
        "max_instances": high,
        "gpus_per_instance": gpus,
        "usd_per_gpu_hour": "none" if price is None else price,
        "cooldown_meaning": COOLDOWN_MEANING[policy],
        **config_attrs(policy, options),
    }


def _preemption_attrs(preemption, lost_instances, seed) -> dict:
    """What was preempted, for a result's attrs (nothing when nothing was)."""
    if lost_instances is not None:
        return {"preemption": "given per step (lost_instances)"}
    if preemption is None:
        return {}
    if isinstance(preemption, numbers.Real):
        return {"preemption_per_instance_hour": float(preemption), "preemption_seed": int(seed)}
    return {"preemption_per_instance_hour": "given per step", "preemption_seed": int(seed)}


def _price(gpu, usd_per_gpu_hour) -> float | None:
    if gpu is not None and usd_per_gpu_hour is not None:
        raise InputError("give gpu or usd_per_gpu_hour, not both")
    if gpu is not None:
        from ..data import gpu_column, resolve_gpu

        return float(gpu_column([resolve_gpu(gpu)], "usd_per_gpu_hour")[0])
    if usd_per_gpu_hour is not None:
        return real(usd_per_gpu_hour, "usd_per_gpu_hour")
    return None


def _gpus(gpus_per_instance) -> int:
    if isinstance(gpus_per_instance, bool) or not isinstance(gpus_per_instance, numbers.Integral):
        raise InputError(f"gpus_per_instance must be a whole number, got {gpus_per_instance!r}")
    if gpus_per_instance < 1:
        raise InputError(f"gpus_per_instance must be at least 1, got {gpus_per_instance}")
    return int(gpus_per_instance)


@declare_units(
    per_instance_qps="requests/s",
    step_s="s",
    cooldown_s="s",
    cold_start_s="s",
    tolerance_s="s",
    thrash_window_s="s",
    usd_per_gpu_hour="USD/hour",
)
def simulate(
    demand,
    *,
    per_instance_qps: float,
    step_s: float | None = None,
    policy: str | Policy = "article",
    scale_up_threshold: float = 0.7,
    cooldown_s: float | None = None,
    cold_start_s: float = _DEFAULTS["cold_start_s"],
    min_instances: int = 1,
    buffer_instances: int = 0,
    max_instances: int | None = None,
    tolerance_s: float = _DEFAULTS["tolerance_s"],
    thrash_window_s: float = _DEFAULTS["thrash_window_s"],
    gpus_per_instance: int = 1,
    gpu: str | None = None,
    usd_per_gpu_hour: float | None = None,
    forecast=None,
    preemption=None,
    lost_instances=None,
    seed: int = 0,
    **options: object,
) -> xr.Dataset:
    """Simulate one autoscaling policy over a demand series, with its timeline.

    Parameters
    ----------
    demand
        Requests/s per step: a 1-D array (give ``step_s``), a DataArray over ``time`` (or a pandas
        Series over times: its times give the step) or the output of :func:`resample_demand`.
    per_instance_qps
        Requests/s one ready instance serves within the SLA (the capacity step's answer): a number,
        or one cell of :func:`capnb.capacity.safe_concurrency`'s ``per_instance_qps`` (a 0-d
        DataArray).
    step_s
        Seconds per demand value (default: the demand's own step).
    policy
        One of :data:`POLICIES`, or a :class:`Policy` record of the policy and its settings
        (``scale_up_threshold``, ``cooldown_s``, ``min_instances``, ``buffer_instances``,
        ``max_instances`` and the options), which then are not given as keywords.
    scale_up_threshold
        Load ratio above which the article's policy adds instances; HPA's and Knative's target
        utilisation of ``per_instance_qps``.
    cooldown_s
        The policy's scale-down window (article: sustained-low time, default 900 s; HPA:
        stabilisation window, 300 s; Knative: scale-down delay, 0 s).
    cold_start_s
        Decision to serving (s); see :func:`capnb.coldstart.estimate` (Llama-3.1-8B: 75 s).
    min_instances, max_instances
        Bounds of the pool the policy manages (``fixed``: the fleet; ``fixed_elastic``: the fixed
        part). Default maximum: enough for the peak at the threshold, never binding.
    buffer_instances
        Warm spares held above the policy's pool, never scaled.
    tolerance_s
        The latency tolerance: a request waiting this long is dropped; the article's policy will not
        scale up when the cold start exceeds half of it.
    thrash_window_s
        An instance stopped sooner than this after becoming ready counts as thrash.
    gpus_per_instance
        GPUs per instance (tensor parallelism), for GPU-hours.
    gpu, usd_per_gpu_hour
        A catalog GPU (its price) or a price, for the cost ``usd``.
    forecast
        Forecast demand per step (requests/s, one per demand value): the ``"predictive"``
        policy provisions for it (:func:`capnb.elasticity.forecast_demand` makes one from the
        forecast step's per-slot quantiles); the other policies ignore it.
    preemption
        Spot preemption as a rate: preemptions per ready instance-hour (one number, or a series
        with one rate per demand step, e.g. the spot rate times the spot share of the fleet).
        Providers publish no such rate: you state it. Each ready instance (warm spares included)
        is lost at that rate, a Poisson process drawn with ``seed``: the same seed gives the same
        preemptions, alone or in a :func:`sweep` (where every run meets the same draws). A lost
        instance stops before its step serves, the most recently ready first; the policy sees the
        smaller pool at its next decision and starts replacements, which pay the cold start (a
        ``fixed`` fleet restarts them at once). Default None: nothing is preempted.
    lost_instances
        Instead of a rate, the instances lost at each step: whole numbers, one per demand step
        (never more than are ready).
    seed
        Seed of the preemption draws (a whole number >= 0).
    **options
        Policy options with their defaults in :data:`OPTIONS`, e.g. ``evaluation_s`` or
        ``scale_down_threshold`` (article), ``sync_s`` (HPA), ``panic_window_s`` (Knative).

    Returns
    -------
    xarray.Dataset
        Over ``time``: ``qps``, ``ready_instances``, ``starting_instances``,
        ``ready_capacity_qps``, ``served_in_step``, ``dropped_in_step``, ``backlog`` (end of step)
        and ``breach``.
        0-d: the run's metrics (as in :func:`sweep`), with ``preempted`` (instances lost) when
        ``preemption`` or ``lost_instances`` is given. Every time and every window is a whole
        number of steps: a window shorter than one step is an error.

    Examples
    --------
    >>> import numpy as np
    >>> run = simulate(np.r_[np.full(60, 10.0), np.full(60, 40.0)], step_s=5, per_instance_qps=10,
    ...                policy="hpa", cold_start_s=30)
    >>> int(run.ready_instances[0]), int(run.ready_instances[-1]), float(run.breach_s)
    (2, 6, 85.0)
    """
    record = _one_policy(policy, dict(
        scale_up_threshold=scale_up_threshold, cooldown_s=cooldown_s, min_instances=min_instances,
        buffer_instances=buffer_instances, max_instances=max_instances, **options,
    ))  # fmt: skip
    policy, options, max_instances = record.name, dict(record.options), record.max_instances
    params = _record_settings(record, cold_start_s)
    gpus, price = _gpus(gpus_per_instance), _price(gpu, usd_per_gpu_hour)
    values, times, step, qps, grid, in_steps, config, high, ahead = _prepared(
        demand, step_s, policy, params, options, per_instance_qps, max_instances, tolerance_s,
        thrash_window_s, forecast,
    )  # fmt: skip
    n = values.size
    losses = _preemption_losses(
        preemption, lost_instances, seed, n, step, high + int(grid["buffer_instances"])
    )
    raw, per_step = _run_once(values, config, grid, in_steps, ahead, losses)
    timeline = timeline_variables(values, times, qps, *per_step)
    time = timeline.pop("time")
    result = xr.Dataset(
        {**timeline, **metric_variables(raw, n, step, qps, gpus, price, losses is not None)},
        coords={"time": time, **{name: grid[name] for name in grid}},
    )
    result.attrs = _attrs(
        policy, step, qps, tolerance_s, thrash_window_s, high, values, gpus, price, options
    ) | demand_summary(values, step)
    result.attrs.update(_preemption_attrs(preemption, lost_instances, seed))
    result.attrs["title"] = f"capnb autoscaling timeline: {policy}"
    return result


#: simulate's keywords that a :class:`Policy` record holds, at their defaults.
_KEYWORD_DEFAULTS = {
    "scale_up_threshold": 0.7,
    "cooldown_s": None,
    "min_instances": 1,
    "buffer_instances": 0,
    "max_instances": None,
}


def _one_policy(policy, keywords: dict) -> Policy:
    """The run's :class:`Policy`: the record given, or one made of the keywords (checked).

    ``keywords``: simulate's policy settings and options as given. Next to a record, each must be
    at its default (options absent): the record holds them.
    """
    if isinstance(policy, Policy):
        given = sorted(
            k for k, v in keywords.items()
            if k not in _KEYWORD_DEFAULTS or not _is_default(v, _KEYWORD_DEFAULTS[k])
        )  # fmt: skip
        if given:
            raise InputError(
                f"policy is a Policy record: give {', '.join(given)} in it, not as keywords"
            )
        return policy
    if not isinstance(policy, str):
        raise InputError(f"simulate runs one policy; got policy={policy!r} (use sweep for several)")
    for name in ("scale_up_threshold", "cooldown_s", "min_instances", "buffer_instances"):
        value = keywords[name]
        if isinstance(value, Sequence | np.ndarray) and not isinstance(value, str):
            raise InputError(f"simulate takes one {name}; got {value!r} (use sweep for a grid)")
    settings = {k: keywords.pop(k) for k in _KEYWORD_DEFAULTS}
    return Policy(policy, **settings, options=keywords)


def _record_settings(record: Policy, cold_start_s) -> dict:
    """The settings of one run of ``record`` (:func:`_settings`; a floor of 1 when it has none)."""
    if isinstance(cold_start_s, Sequence | np.ndarray) and not isinstance(cold_start_s, str):
        raise InputError(
            f"simulate takes one cold_start_s; got {cold_start_s!r} (use sweep for a grid)"
        )
    floor = 1 if record.min_instances is None else record.min_instances
    return _settings(
        record.scale_up_threshold, record.cooldown_s, cold_start_s, floor, record.buffer_instances
    )


def _is_default(value, default) -> bool:
    if default is None or value is None:
        return value is default
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value == default


def _settings(scale_up_threshold, cooldown_s, cold_start_s, min_instances, buffer_instances):
    """The policy settings a run takes (each a value, or in a sweep a sequence: a grid dim)."""
    return {
        "scale_up_threshold": scale_up_threshold,
        "cooldown_s": cooldown_s,
        "cold_start_s": cold_start_s,
        "min_instances": min_instances,
        "buffer_instances": buffer_instances,
    }


def _run_once(values, config, grid, in_steps, ahead, losses):
    """One run of the kernel with its timeline: its metrics (a DataArray over metric), the steps."""
    metrics = np.empty(len(kernels.METRICS))
    per_step = kernels.Timeline.empty(values.size)
    run = kernels.Run.of(
        up=float(grid["scale_up_threshold"]),
        cooldown=int(in_steps["cooldown_s"]),
        cold=int(in_steps["cold_start_s"]),
        low=int(grid["min_instances"]),
        buffer=int(grid["buffer_instances"]),
    )
    kernels.simulate(values, config, run, metrics, per_step, ahead, losses)
    return xr.DataArray(metrics, dims="metric"), per_step


@declare_units(
    per_instance_qps="requests/s",
    step_s="s",
    cooldown_s="s",
    cold_start_s="s",
    tolerance_s="s",
    thrash_window_s="s",
    usd_per_gpu_hour="USD/hour",
)
def sweep(
    demand,
    *,
    per_instance_qps: float,
    step_s: float | None = None,
    policy: str | Sequence[str] = "article",
    scale_up_threshold=0.7,
    cooldown_s=None,
    cold_start_s=_DEFAULTS["cold_start_s"],
    min_instances=1,
    buffer_instances=0,
    max_instances: int | None = None,
    tolerance_s: float = _DEFAULTS["tolerance_s"],
    thrash_window_s: float = _DEFAULTS["thrash_window_s"],
    gpus_per_instance: int = 1,
    gpu: str | None = None,
    usd_per_gpu_hour: float | None = None,
    chunks: Mapping[str, int] | None = None,
    forecast=None,
    preemption=None,
    lost_instances=None,
    seed: int = 0,
    **options: object,
) -> xr.Dataset:
    """Run a grid of policies over one demand series; the metrics as a Dataset over the grid.

    Same arguments as :func:`simulate`, except that ``scale_up_threshold``, ``cooldown_s``,
    ``cold_start_s``, ``min_instances`` and ``buffer_instances`` may be sequences - each becomes a
    dim of the result, in that order - and ``policy`` may be a list (a ``policy`` dim, first, even
    for a list of one).
    ``cooldown_s=None`` takes each policy's default (a ``cooldown_s`` coordinate over ``policy``).
    ``options`` go to the policies that know them. ``chunks`` (dim -> size) runs the grid as dask
    blocks; runs are spread over threads inside each block. ``forecast`` (requests/s per step)
    is what the ``"predictive"`` policy provisions for. ``preemption`` (a rate per instance-hour)
    or ``lost_instances`` (a series), with ``seed``, as in :func:`simulate`: every run of the grid
    meets the same draws, and the result has ``preempted``.

    Returns
    -------
    xarray.Dataset
        Per run: ``served``, ``late``, ``dropped``, ``unserved`` (requests) and their shares of
        ``arrivals``; ``breach_s`` and ``breach_share``; ``dropping_s``; ``peak_backlog``;
        ``gpu_hours``, ``cold_start_gpu_hours``, ``wasted_cold_start_gpu_hours``; ``usd`` when a
        price is given; ``scale_up_events``, ``scale_down_events``, ``scale_events``,
        ``instances_started``, ``thrash``, ``cancelled_starts``; ``peak_instances``,
        ``mean_instances``, ``ready_utilisation``; ``vetoed_scale_ups`` (article); ``panic_s`` (Knative).

    Examples
    --------
    >>> import numpy as np
    >>> rate = 20 + 15 * np.sin(np.arange(17_280) * 2 * np.pi / 17_280)
    >>> grid = sweep(rate, step_s=5, per_instance_qps=5, cooldown_s=[0, 900, 1800],
    ...              cold_start_s=[30, 120])
    >>> dict(grid.sizes)
    {'cooldown_s': 3, 'cold_start_s': 2}
    """
    policies = _distinct_policies(policy, options)
    gpus, price = _gpus(gpus_per_instance), _price(gpu, usd_per_gpu_hour)
    one = functools.partial(
        _policy_runs,
        params=_settings(scale_up_threshold, cooldown_s, cold_start_s, min_instances, buffer_instances),
        options=options, demand=demand, step_s=step_s, forecast=forecast,
        checked=_checked(demand, step_s, forecast),  # once for every policy
        per_instance_qps=per_instance_qps, max_instances=max_instances, tolerance_s=tolerance_s,
        thrash_window_s=thrash_window_s, losses=(preemption, lost_instances, seed),
        cost=(gpus, price), chunks=chunks,
    )  # fmt: skip
    done = _side_by_side(one, policies, chunks)
    raws, grids, attrs, (values, *_), (step, *_), (qps, *_) = zip(*done, strict=True)
    losses_given = preemption is not None or lost_instances is not None
    listed = not isinstance(policy, str)  # a list, even of one, gives a policy dim (as sel does)
    raw = _policy_metrics(raws, listed)
    variables = metric_variables(raw, values.size, step, qps, gpus, price, losses_given)
    result = xr.Dataset(variables, coords=_sweep_coords(policies, grids, listed))
    # attrs that differ between policies (their name, what cooldown_s means) are dropped; each
    # policy's own options keep their policy-prefixed names
    result.attrs = _shared_attrs(attrs) | demand_summary(values, step)
    result.attrs.update(_preemption_attrs(preemption, lost_instances, seed))
    result.attrs["title"] = "capnb autoscaling sweep: " + ", ".join(policies)
    return result


def _distinct_policies(policy, options) -> list[str]:
    """The policies of a sweep, known and distinct; every option known to one of them."""
    if isinstance(policy, Policy) or (
        isinstance(policy, Sequence) and any(isinstance(p, Policy) for p in policy)
    ):
        raise InputError(
            "policy: sweep takes policy names; a Policy record is one run - simulate(..., "
            "policy=record), or sweep its settings with sweep(..., **record.settings())"
        )
    policies = [policy] if isinstance(policy, str) else list(policy)
    if not policies or len(set(policies)) != len(policies):
        raise InputError(f"policy: give distinct policies, got {policy!r}")
    for name in policies:
        if name not in POLICIES:
            raise InputError(f"policy={name!r} is not known; use some of {list(POLICIES)}")
    unknown = set(options) - {k for name in policies for k in OPTIONS[name]}
    if unknown:
        raise InputError(f"no policy in {policies} has option(s) {sorted(unknown)}")
    return policies


def _policy_runs(
    name,
    *,
    params,
    options,
    demand,
    step_s,
    forecast,
    checked,
    per_instance_qps,
    max_instances,
    tolerance_s,
    thrash_window_s,
    losses,
    cost,
    chunks,
):
    """One policy's runs: the kernel's metrics over the grid's dims, its grid and its attrs.

    ``losses`` is (preemption, lost_instances, seed), ``cost`` (gpus per instance, price).
    """
    mine = {k: v for k, v in options.items() if k in OPTIONS.get(name, {})}
    values, _, step, qps, grid, in_steps, config, high, ahead = _prepared(
        demand, step_s, name, params, mine, per_instance_qps, max_instances, tolerance_s,
        thrash_window_s, forecast, checked,
    )  # fmt: skip
    cells = int(np.prod([np.size(v) for v in grid.values()]))
    _validate.within_budget(  # measured: about 16 ns of CPU per step and grid cell
        f"{values.size:,} steps of {step:g} s x {cells:,} {name} policy cells",
        seconds=values.size * cells * 16e-9,
        lower="use a longer step_s, a shorter trace or fewer policy values",
    )
    most_ready = high + int(grid["buffer_instances"].max())
    events = _preemption_losses(*losses, values.size, step, most_ready)
    raw = _grid_runs(grid, in_steps, chunks, values, config, ahead, events)
    attrs = _attrs(name, step, qps, tolerance_s, thrash_window_s, high, values, *cost, mine)
    return raw, grid, attrs, values, step, qps


def _grid_runs(grid, in_steps, chunks, values, config, ahead, losses) -> xr.DataArray:
    """The kernel's metrics for every cell of the grid (dask blocks when ``chunks``)."""
    inputs = [
        grid["scale_up_threshold"],
        in_steps["cooldown_s"],
        in_steps["cold_start_s"],
        grid["min_instances"],
        grid["buffer_instances"],
    ]
    if chunks:
        inputs = [a.chunk({d: c for d, c in chunks.items() if d in a.dims}) for a in inputs]
    raw = xr.apply_ufunc(
        _runs,
        *inputs,
        kwargs={"demand": values, "config": config, "forecast": ahead, "losses": losses},
        output_core_dims=[["metric"]],
        dask="parallelized",
        output_dtypes=[np.float64],
        dask_gufunc_kwargs={"output_sizes": {"metric": len(kernels.METRICS)}},
    )
    return raw.transpose(*[d for d in grid if d in raw.dims], "metric")


def _side_by_side(one, policies, chunks) -> list:
    """``one(policy)`` for each policy, in threads when the runs are not dask blocks."""
    import numba

    threads = 1 if chunks else min(len(policies), numba.get_num_threads())
    if threads < 2:
        return [one(name) for name in policies]
    # the policies side by side: each one's runs already share the cores, but a policy's
    # last runs leave a core idle that the next policy's first runs fill (the kernel
    # releases the GIL; every result is the same as one after the other)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, policies))


def _policy_metrics(raws, listed: bool) -> xr.DataArray:
    """The kernels' metrics of every policy's runs, over (policy, grid dims) when ``listed``."""
    # every policy ran on the same demand, step and grid of settings: one array over (policy, grid
    # dims) from the kernels' metrics side by side (np.stack keeps dask's blocks)
    if not listed:
        return raws[0]
    return xr.DataArray(np.stack([r.data for r in raws]), dims=("policy", *raws[0].dims))


def _sweep_coords(policies, grids, listed: bool) -> dict:
    """The grid's settings as coordinates, a setting that differs between policies over policy."""
    coords = {}
    for name, value in grids[0].items():
        if all(g[name].dims == value.dims and np.array_equal(g[name], value) for g in grids):
            # as a Variable with the glossary's attrs: a DataArray over its own dim brought none
            coords[name] = value.variable.copy(deep=False)
            coords[name].attrs = glossary.attrs(name)
        else:  # a policy's own default scale-down delay (cooldown_s=None): a value per policy
            coords[name] = ("policy", [g[name].item() for g in grids], glossary.attrs(name))
    if listed:
        coords["policy"] = ("policy", policies, glossary.attrs("policy"))
    return coords


def _shared_attrs(attrs: Sequence[dict]) -> dict:
    """The attrs of every policy's runs that no two policies give different values."""
    shared = {}
    for one in attrs:
        for name, value in one.items():
            if all(np.array_equal(value, other.get(name, value)) for other in attrs):
                shared.setdefault(name, value)
    return shared


@declare_units(per_instance_qps="requests/s", step_s="s")
def fixed_instances(
    demand, per_instance_qps: float, *, quantile: float = 0.99, step_s: float | None = None
) -> int:
    """Instances a fixed fleet needs to serve the demand's ``quantile`` (the P99 baseline).

    ``ceil(quantile(demand) / per_instance_qps)``, at least 1, the ceiling taken after a relative
    tolerance of 1e-12 as :func:`capnb.capacity.instances` takes it (float noise such as
    30.000000000000004 / 3 is 10 instances, not 11). The forecast step's per-slot P99 targets
    (:mod:`capnb.forecast`) refine this per hour of day.

    Examples
    --------
    >>> fixed_instances([10.0, 20.0, 35.0, 12.0], 10, quantile=1.0, step_s=60)
    4
    """
    values, _, _ = demand_values(demand, step_s)
    qps = _instance_qps(per_instance_qps)
    share = real(quantile, "quantile")
    if share > 1:
        raise InputError(f"quantile must be in [0, 1], got {quantile}")
    return max(1, int(instances_needed(float(np.quantile(values, share)), qps)))

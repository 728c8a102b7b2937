"""The plan: the four steps chained on one set of inputs, one Dataset and one recommendation.

::

    trace ──► forecast ──► target_qps per slot + burst buffer
    model ──► memory ────► largest fitting concurrency per GPU and TP
    SLA ────► capacity ──► per-instance QPS, instances per slot, cost; the cheapest GPU and TP
    policies ► elasticity ► the autoscaling policy that keeps the breach budget at the least cost

:func:`build` runs the chain (inputs as a :class:`PlanConfig`, a config file, or keyword overrides)
and returns one ``xarray.Dataset``: every step's results with their units, variables prefixed by
their step (``forecast_target_qps``, ``capacity_instances``, ...), the recommendation in
``attrs["recommendation"]`` and the article's applicability checks in ``attrs["warnings"]`` (also
issued as :class:`PlanWarning`). :func:`export` writes it as NetCDF and a JSON summary.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from ._plan_config import PlanConfig, from_mapping, load_config, save_config
from .errors import CapnbError, InputError
from .report import _write_atomic

__all__ = [
    "PlanConfig",
    "PlanError",
    "PlanWarning",
    "build",
    "describe",
    "export",
    "load",
    "load_config",
    "save_config",
]

HOURS_PER_MONTH = 730.0  # 8,760 / 12


class PlanWarning(UserWarning):
    """One of the article's applicability checks: the plan holds, but a simpler one may do."""


class PlanError(CapnbError):
    """A step of the plan failed; the message names the step and the input."""


def _config(config, overrides) -> PlanConfig:
    if config is None:
        config = PlanConfig()
    elif isinstance(config, str | os.PathLike):
        config = load_config(config)
    elif isinstance(config, dict):
        config = from_mapping(config)
    elif not isinstance(config, PlanConfig):
        raise InputError(
            f"config must be a PlanConfig, a mapping or a file path, got {type(config).__name__}"
        )
    return config.replace(**overrides) if overrides else config


class _Stage:
    """Names the step a failure came from (and the config it ran on)."""

    def __init__(self, name: str, config: PlanConfig):
        self.name, self.config = name, config

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, CapnbError) and not isinstance(error, PlanError):
            raise PlanError(
                f"the {self.name} step failed (config: {self.config.source}): {error}"
            ) from error
        return False


def _prefixed(ds: xr.Dataset, step: str, drop: tuple[str, ...] = ()) -> xr.Dataset:
    keep = ds.drop_vars([v for v in drop if v in ds.variables])
    renamed = keep.rename({v: f"{step}_{v}" for v in keep.data_vars})
    for name in renamed.data_vars:
        renamed[name].attrs.setdefault("step", step)
    return renamed


# -- the steps ------------------------------------------------------------------------------------
def _traffic(cfg: PlanConfig):
    from . import data, forecast

    if cfg.trace in data.list_rate_series():
        source = data.load_rate_series(cfg.trace)
    elif cfg.trace in data.list_traces() or Path(cfg.trace).suffix in (
        ".csv",
        ".jsonl",
        ".parquet",
    ):
        source = data.load_trace(cfg.trace)
    else:
        known = [*data.list_traces(), *data.list_rate_series()]
        raise InputError(
            f"trace={cfg.trace!r} is neither a bundled trace ({', '.join(known)}) nor a file"
        )
    if not cfg.demand_scale > 0:
        raise InputError(f"demand_scale must be positive, got {cfg.demand_scale!r}")
    series = forecast.resample(source, cfg.interval)
    series["qps"] = (series.qps * cfg.demand_scale).assign_attrs(series.qps.attrs)
    return source, series


def _forecast(cfg: PlanConfig, series):
    from . import forecast

    bursts = {"article": forecast.BurstModel(), "fit": "fit", "none": None}
    if cfg.bursts not in bursts:
        raise InputError(f"bursts must be one of {list(bursts)}, got {cfg.bursts!r}")
    quantiles = tuple(sorted({0.5, 0.95, 0.99, float(cfg.traffic_quantile)}))
    return forecast.target(
        series,
        slots=cfg.slots,
        quantiles=quantiles,
        plan_quantile=cfg.traffic_quantile,
        bursts=bursts[cfg.bursts],
        trials=cfg.trials,
        seed=cfg.seed,
        exceed_probability=cfg.exceed_probability,
    )


def _capacity(cfg: PlanConfig, target_qps, buffer_qps):
    from . import capacity, data, latency

    workload = latency.workload(data.load_trace(cfg.workload))
    seq_len = math.ceil(float((workload.prompt_tokens + workload.output_tokens).mean()))
    if cfg.latency == "model":
        result = capacity.sweep(
            cfg.model,
            list(cfg.gpus),
            list(cfg.tensor_parallel),
            seq_len,
            cfg.sla_s,
            workload=workload,
            target_qps=target_qps,
            buffer_qps=buffer_qps,
            metric=cfg.sla_metric,
            quantile=cfg.sla_quantile,
            accounting=cfg.accounting,
        )
        result = result.squeeze(["model", "seq_len", "sla"], drop=False)
    else:
        curve = data.load_latency_curve(cfg.latency)
        result = capacity.plan(
            curve,
            cfg.sla_s,
            target_qps,
            buffer_qps=buffer_qps,
            metric=cfg.sla_metric,
            quantile=cfg.sla_quantile,
            accounting=cfg.accounting,
        )
    return result, workload, seq_len


def _choose(cap: xr.Dataset, cfg: PlanConfig) -> dict[str, object]:
    """The (gpu, tensor_parallel) with the lowest cost summed over slots: one fleet type for the day."""
    if "gpu" not in cap.dims:  # a measured curve: one configuration
        return {}
    daily = (
        cap.usd_per_hour.sum("slot", skipna=False)
        if "slot" in cap.usd_per_hour.dims
        else cap.usd_per_hour
    )
    feasible = daily.where(np.isfinite(daily))
    if not bool(feasible.notnull().any()):
        reasons = sorted(set(np.asarray(cap.binding.values).ravel().tolist()))
        raise PlanError(
            f"infeasible: no GPU in {list(cfg.gpus)} at tensor parallelism {list(cfg.tensor_parallel)} "
            f"meets {cfg.sla_metric} P{100 * cfg.sla_quantile:g} <= {cfg.sla_s:g} s for {cfg.model} "
            f"(bindings: {', '.join(reasons)}); relax the SLA, add GPUs or tensor parallelism"
        )
    stacked = feasible.stack(option=("gpu", "tensor_parallel"))
    best = stacked.isel(option=int(stacked.argmin("option")))
    return {"gpu": str(best.gpu.item()), "tensor_parallel": int(best.tensor_parallel.item())}


def _demand(cfg: PlanConfig, source, fc: xr.Dataset) -> xr.DataArray:
    """Demand per simulation step; windows missing from the trace take their slot's median.

    The simulator needs a number at every step, and a real production series has gaps (marked
    missing by the readers, never zero). Filling a gap with the slot's P50 is the neutral choice: it
    neither invents a burst nor a trough. The share filled is recorded in ``attrs["filled_share"]``.
    """
    from . import elasticity, forecast

    log = "request" in source.dims
    native = cfg.step_s if log else float(source.attrs.get("interval_s", cfg.step_s))
    qps = forecast.resample(source, f"{native:g}s").qps * cfg.demand_scale
    observed = np.flatnonzero(np.isfinite(qps.values))
    qps = qps.isel(time=slice(observed[0], observed[-1] + 1))  # a log's partial edges stay out
    missing = np.isnan(qps.values)
    if missing.any():
        median = fc.target_qps.sel(traffic_quantile=0.5)
        codes = forecast.slot_codes(qps.time.values[missing], fc.attrs.get("slots", cfg.slots))
        values = qps.values.copy()
        values[missing] = median.sel(slot=codes).values
        qps = qps.copy(data=values)
    qps.attrs["interval_s"] = native
    demand = elasticity.resample_demand(qps, cfg.step_s)
    demand.attrs.update(filled_share=float(missing.mean()))
    return demand


def _elasticity(
    cfg: PlanConfig, demand: xr.DataArray, chosen_cap: xr.Dataset, gpu: str, tensor_parallel: int
):
    from . import coldstart, elasticity

    per_instance = float(chosen_cap.per_instance_qps)
    if cfg.cold_start_s == "estimate":
        estimate = coldstart.estimate(cfg.model, gpu, tensor_parallel=tensor_parallel)
        estimated = float(estimate.cold_start_s.squeeze())
    else:
        estimate, estimated = None, float(cfg.cold_start_s)
    cold = math.ceil(estimated / cfg.step_s) * cfg.step_s  # the simulator counts whole steps
    low = (
        max(1, math.ceil(float(chosen_cap.target_qps.min()) / per_instance))
        if "target_qps" in chosen_cap
        else 1
    )
    floors = sorted({1, low})
    sweep = elasticity.sweep(
        demand,
        per_instance_qps=per_instance,
        step_s=cfg.step_s,
        policy=list(cfg.policies),
        scale_up_threshold=list(cfg.scale_up_threshold),
        cooldown_s=list(cfg.cooldown_s),
        buffer_instances=list(cfg.buffer_instances),
        min_instances=floors,
        cold_start_s=cold,
        tolerance_s=cfg.tolerance_s,
        gpus_per_instance=tensor_parallel,
        gpu=gpu,
    )
    advice = elasticity.recommend(sweep, breach_budget=cfg.breach_budget)
    return demand, sweep, advice, estimate, estimated, cold


def build(config: PlanConfig | dict | str | os.PathLike | None = None, **overrides) -> xr.Dataset:
    """Run forecast -> memory -> capacity -> elasticity on one set of inputs.

    Parameters
    ----------
    config
        A :class:`PlanConfig`, a mapping of its fields, a path to a TOML/YAML file, or None for
        the bundled defaults.
    **overrides
        Fields to change (``sla_s=1.0``, ``gpus=["H100-SXM"]``, ...).

    Returns
    -------
    xarray.Dataset
        Every step's results, prefixed by step, with units; ``attrs``: ``recommendation`` (text),
        ``warnings`` (the applicability checks), ``gpu``, ``tensor_parallel``, ``policy``,
        ``monthly_usd``, ``breach_minutes_per_month`` and the config.

    Raises
    ------
    PlanError
        A step failed (the message names it) or no configuration meets the SLA ("infeasible", with
        the reasons); never a silent fallback.
    """
    from . import capacity, forecast, memory

    cfg = _config(config, overrides)
    with _Stage("forecast", cfg):
        source, series = _traffic(cfg)
        fc = _forecast(cfg, series)
    target = fc.target_qps.sel(traffic_quantile=cfg.traffic_quantile)
    buffer_qps = fc.buffer_qps if "buffer_qps" in fc else None
    with _Stage("capacity", cfg):
        cap, _workload, seq_len = _capacity(cfg, target, buffer_qps)
    with _Stage("memory", cfg):
        mem = memory.max_concurrency(
            model=cfg.model,
            gpu=list(cfg.gpus),
            tensor_parallel=list(cfg.tensor_parallel),
            seq_len=seq_len,
            accounting=cfg.accounting,
            invalid_tensor_parallel="mask",
        )
    choice = _choose(cap, cfg)
    chosen = cap.sel(choice) if choice else cap
    gpu = choice.get("gpu") or str(cap.attrs.get("gpu", chosen.coords.get("gpu", "unknown")))
    tp = (
        choice.get("tensor_parallel") or int(chosen.coords["tensor_parallel"])
        if "tensor_parallel" in chosen.coords
        else 1
    )
    if str(chosen.binding.values) not in ("latency", "memory", "measured_range"):
        raise PlanError(f"infeasible: {capacity.describe(chosen)}")
    with _Stage("elasticity", cfg):
        demand = _demand(cfg, source, fc)
        demand, sweep, advice, _estimate, estimated, cold = _elasticity(
            cfg, demand, chosen, gpu, tp
        )

    plan = _assemble(
        cfg, series, fc, mem, cap, chosen, sweep, advice, demand, gpu, tp, estimated, cold, seq_len
    )
    checks = _checks(cfg, fc, cap, chosen, advice, sweep, demand, estimated)
    plan.attrs["warnings"] = checks
    plan.attrs["recommendation"] = _recommendation(
        plan, cfg, fc, cap, chosen, advice, checks, forecast
    )
    for check in checks:
        warnings.warn(check, PlanWarning, stacklevel=2)
    return plan


# -- the result -----------------------------------------------------------------------------------
def _burst_test(demand: xr.DataArray, cfg: PlanConfig, run_settings: dict) -> xr.Dataset:
    """The chosen policy under one burst of the article's mid size, at the trace's busiest hour.

    The trace replays only the bursts it happened to contain; this injects a 4x burst for 1.5 h
    (the middle of the article's 3-5x, 1-2 h) starting at the busiest step of the trace's middle
    day, to show what the elastic buffer must absorb.
    """
    from . import elasticity

    values = demand.values.copy()
    per_day = round(86400 / cfg.step_s)
    middle = (values.size // per_day // 2) * per_day
    day = values[middle : middle + per_day] if values.size >= middle + per_day else values
    start = (
        middle + int(np.nanargmax(day))
        if values.size >= middle + per_day
        else int(np.nanargmax(values))
    )
    length = round(1.5 * 3600 / cfg.step_s)
    values[start : start + length] *= 4.0
    burst = demand.copy(data=values)
    run = elasticity.simulate(burst, **run_settings)
    run.attrs.update(
        burst_start=str(demand.time.values[start]), burst_multiplier=4.0, burst_hours=1.5
    )
    return run


def _assemble(
    cfg, series, fc, mem, cap, chosen, sweep, advice, demand, gpu, tp, estimated, cold, seq_len
):
    from . import elasticity

    settings = dict(
        per_instance_qps=float(chosen.per_instance_qps),
        step_s=cfg.step_s,
        cold_start_s=cold,
        tolerance_s=cfg.tolerance_s,
        gpus_per_instance=tp,
        gpu=gpu,
        **advice.selection,
    )
    run = elasticity.simulate(demand, **settings)
    burst = _burst_test(demand, cfg, settings)
    # the chosen run's timeline, per forecast interval (the full timeline has one row per step)
    interval = f"{int(series.attrs.get('interval_s', 600))}s"
    timeline = (
        run[["qps", "ready_instances", "starting_instances", "backlog"]]
        .resample(time=interval)
        .mean()
    )
    timeline["breach_s"] = run.breach.astype(float).resample(time=interval).sum() * cfg.step_s
    for name in ("qps", "ready_instances", "starting_instances", "backlog"):
        timeline[name].attrs = dict(run[name].attrs)
    timeline["breach_s"].attrs = {
        "units": "s",
        "long_name": "seconds in SLA breach in the interval",
    }
    fc_vars = fc.drop_vars([v for v in fc.data_vars if "trial" in fc[v].dims])
    parts = [
        _prefixed(series[["qps"]], "traffic"),
        _prefixed(fc_vars, "forecast"),
        _prefixed(mem, "memory"),
        _prefixed(
            cap.drop_vars(
                [c for c in ("model", "seq_len") if c in cap.coords and cap[c].ndim == 0]
            ),
            "capacity",
        ),
        _prefixed(
            sweep.drop_vars([v for v in sweep.data_vars if "time" in sweep[v].dims]), "elasticity"
        ),
        _prefixed(timeline.rename(time="timeline_time"), "timeline"),
    ]
    plan = xr.merge(parts, compat="override", join="outer", combine_attrs="drop_conflicts")
    plan.attrs = {}
    per_instance = float(chosen.per_instance_qps)
    hours = float(run.attrs.get("duration_s", demand.size * cfg.step_s)) / 3600.0
    metrics = advice.metrics
    plan.attrs.update(
        title="capnb capacity plan",
        config=json.dumps(cfg.as_dict()),
        config_source=cfg.source,
        model=cfg.model,
        gpu=gpu,
        tensor_parallel=tp,
        seq_len=seq_len,
        per_instance_qps=per_instance,
        policy=json.dumps({k: _jsonable(v) for k, v in advice.selection.items()}),
        policy_kind=advice.kind,
        cold_start_estimate_s=estimated,
        cold_start_s=cold,
        simulated_hours=hours,
        monthly_usd=float(metrics.get("usd", math.nan)) / hours * HOURS_PER_MONTH,
        breach_minutes_per_month=float(metrics.get("breach_s", math.nan))
        / hours
        * HOURS_PER_MONTH
        / 60,
        burst_test_start=burst.attrs["burst_start"],
        burst_test_breach_minutes=float(burst.breach_s) / 60,
        burst_test_unserved_share=float(burst.unserved_share),
        demand_filled_share=float(demand.attrs.get("filled_share", 0.0)),
    )
    return plan


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    return value


def _checks(cfg, fc, cap, chosen, advice, sweep, demand, estimated) -> list[str]:
    """The article's applicability checks, as sentences (empty when the full method pays)."""
    from . import capacity, elasticity

    checks = []
    flat = fc.attrs.get("boundary_flat") or fc.attrs.get("flat")
    statements = " ".join(
        str(v) for k, v in fc.attrs.items() if "boundar" in k or k in ("flat", "history")
    )
    if (
        flat in (True, "yes", "True")
        or "mean suffices" in statements
        or "flat" in statements.lower()
    ):
        checks.append(
            f"Flat traffic: {statements.strip()}"
            if statements.strip()
            else "Flat traffic: planning on the mean would do."
        )
    applicability = capacity.applicability(chosen.isel(slot=0) if "slot" in chosen.dims else chosen)
    if "adds little" in applicability:
        checks.append(applicability)
    if estimated > cfg.tolerance_s / 2:
        checks.append(
            f"Cold start ({estimated:.0f} s) exceeds half the {cfg.tolerance_s:g} s latency budget: pure "
            "elasticity cannot react to a burst in time; hold fixed capacity plus an elastic buffer."
        )
    dips = elasticity.troughs(demand)
    if dips.size and float(dips.max()) > max(cfg.cooldown_s) * 4:
        checks.append(
            f"Long troughs (up to {float(dips.max()) / 3600:.1f} h below the scale-down level): "
            "scaling down in them pays whatever the delay, so a scale-down cool-down is unnecessary "
            f"here (the swept {min(cfg.cooldown_s) / 60:g}-{max(cfg.cooldown_s) / 60:g} min change little)."
        )
    return checks


def _options_by_cost(cap: xr.Dataset) -> list[tuple[str, int, float]]:
    """Feasible (gpu, tensor_parallel, USD per day) options, cheapest first."""
    if "gpu" not in cap.dims:
        return []
    daily = (
        cap.usd_per_hour.sum("slot", skipna=False)
        if "slot" in cap.usd_per_hour.dims
        else cap.usd_per_hour
    )
    options = [
        (str(g), int(t), float(daily.sel(gpu=g, tensor_parallel=t)))
        for g in cap.gpu.values
        for t in cap.tensor_parallel.values
    ]
    return sorted((o for o in options if np.isfinite(o[2])), key=lambda o: o[2])


def _recommendation(plan, cfg, fc, cap, chosen, advice, checks, forecast) -> str:
    per_instance = plan.attrs["per_instance_qps"]
    gpu, tp = plan.attrs["gpu"], plan.attrs["tensor_parallel"]
    options = _options_by_cost(cap)
    choice = f"{tp} x {gpu} per instance"
    if len(options) > 1:
        runner = options[1]
        choice += (
            f" (the cheapest of {len(options)} feasible GPU and tensor-parallel options; next: "
            f"{runner[1]} x {runner[0]} at {runner[2] / options[0][2] - 1:+.0%})"
        )
    binding = str(chosen.binding.item())
    memory_limit = (
        f"; memory holds {int(chosen.max_concurrency)}" if "max_concurrency" in chosen else ""
    )
    lines = [
        f"Serve {cfg.model} on {choice}: one instance serves {per_instance:.2f} requests/s at "
        f"{cfg.sla_metric} P{100 * cfg.sla_quantile:g} <= {cfg.sla_s:g} s, at a safe concurrency of "
        f"{int(chosen.safe_concurrency)} (binding: {binding}{memory_limit}).",
    ]
    target = fc.target_qps.sel(traffic_quantile=cfg.traffic_quantile)
    fixed = np.ceil(target.values / per_instance - 1e-12).astype(int)
    buffer_qps = float(fc.buffer_qps) if "buffer_qps" in fc else 0.0
    buffer = math.ceil(buffer_qps / per_instance - 1e-12)
    lines.append(
        f"Fixed part: {fixed.min()}-{fixed.max()} instances per {fc.attrs.get('slots', 'slot')} slot for "
        f"the P{100 * cfg.traffic_quantile:g} plan ({float(target.min()):,.0f}-{float(target.max()):,.0f} "
        f"requests/s); elastic buffer: {buffer} instances for {buffer_qps:,.0f} requests/s of bursts."
    )
    lines.append(f"Run: {advice.text}")
    filled = plan.attrs.get("demand_filled_share", 0.0)
    if filled:
        lines.append(
            f"Note: {filled:.1%} of the trace was missing; the simulation filled those steps "
            "with their slot's median demand."
        )
    fixed_monthly = (
        float(chosen.usd_per_hour.mean()) * HOURS_PER_MONTH
        if "usd_per_hour" in chosen
        else math.nan
    )
    lines.append(
        f"Cost: {plan.attrs['monthly_usd']:,.0f} USD a month (730 h) with this policy and "
        f"{plan.attrs['breach_minutes_per_month']:,.0f} SLA-breach minutes a month (simulated over "
        f"{plan.attrs['simulated_hours']:.0f} h of the trace); a fixed fleet for the plan plus the burst "
        f"buffer would cost {fixed_monthly:,.0f} USD a month."
    )
    plan.attrs["fixed_monthly_usd"] = fixed_monthly
    plan.attrs["buffer_instances"] = buffer
    lines.append(
        f"Burst test: under one burst of 4x for 1.5 h at the busiest hour (from "
        f"{plan.attrs['burst_test_start'][:16]}), this policy is in SLA breach for "
        f"{plan.attrs['burst_test_breach_minutes']:,.0f} min and leaves "
        f"{plan.attrs['burst_test_unserved_share']:.2%} of requests unserved"
        + (
            ": hold more warm spares or a higher floor if that is too much."
            if plan.attrs["burst_test_breach_minutes"] > 1
            else "."
        )
    )
    lines.append(f"Traffic: {forecast.describe(fc)}")
    lines += [f"Check: {c}" for c in checks]
    return "\n".join(lines)


def describe(plan: xr.Dataset) -> str:
    """The plan's recommendation, as text a person can read."""
    return str(plan.attrs["recommendation"])


def export(
    plan: xr.Dataset, directory: str | os.PathLike, *, name: str = "plan"
) -> dict[str, Path]:
    """Write ``<name>.nc`` (NetCDF, every result) and ``<name>.json`` (the summary), atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    netcdf = directory / f"{name}.nc"
    tmp = directory / f".{name}.nc.tmp"
    try:
        _netcdf_ready(plan).to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, netcdf)
    finally:
        tmp.unlink(missing_ok=True)
    summary = {
        k: _jsonable(v)
        for k, v in plan.attrs.items()
        if isinstance(v, str | int | float | np.generic)
    }
    summary["warnings"] = list(plan.attrs.get("warnings", []))
    path = directory / f"{name}.json"
    _write_atomic(path, json.dumps(summary, indent=2, default=str) + "\n")
    return {"netcdf": netcdf, "json": path}


def load(path: str | os.PathLike) -> xr.Dataset:
    """Read a plan written by :func:`export` (its NetCDF file) back into memory."""
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"{path}: no such plan file (write one with capnb.plan.export or capnb plan)"
        )
    with xr.open_dataset(path, engine="h5netcdf") as stored:
        plan = stored.load()
    if "recommendation" not in plan.attrs:
        raise InputError(f"{path}: not a capnb plan (it has no recommendation)")
    plan.attrs["warnings"] = json.loads(plan.attrs.get("warnings", "[]"))
    for name in plan.variables:
        if plan[name].dtype == object:
            plan[name] = plan[name].astype(str)
    return plan


def _netcdf_ready(plan: xr.Dataset) -> xr.Dataset:
    out = plan.copy()
    out.attrs = {
        k: (json.dumps(v) if isinstance(v, list | dict) else v) for k, v in plan.attrs.items()
    }
    for name in list(out.variables):
        out[name].attrs = {
            k: (
                json.dumps(v)
                if isinstance(v, list | dict | tuple)
                else (str(v) if isinstance(v, bool) else v)
            )
            for k, v in out[name].attrs.items()
        }
        if out[name].dtype.kind == "U":
            out[name] = out[name].astype(object)
        if out[name].dtype.kind in "mM":  # NetCDF encodes time units itself
            out[name].attrs.pop("units", None)
    return out

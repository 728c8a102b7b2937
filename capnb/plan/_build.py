"""The chained plan: build, describe, export and load."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from ..data import write_atomic
from ..errors import CapnbError, InputError
from ._config import PlanConfig, from_mapping, load_config
from ._steps import (
    PlanError,
    _burst_test,
    _capacity,
    _choose,
    _demand,
    _elasticity,
    _forecast,
    _traffic,
)
from ._text import HOURS_PER_MONTH, _checks, _recommendation


class PlanWarning(UserWarning):
    """One of the article's applicability checks: the plan holds, but a simpler one may do."""


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
    from .. import capacity, forecast, memory

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
def _assemble(
    cfg, series, fc, mem, cap, chosen, sweep, advice, demand, gpu, tp, estimated, cold, seq_len
):
    from .. import elasticity

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
    write_atomic(path, json.dumps(summary, indent=2, default=str) + "\n")
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

"""The chained plan: build, describe, export and load."""

from __future__ import annotations

import contextlib
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from .. import glossary
from ..data import settle, write_set
from ..errors import CapnbError, InputError
from ._config import PlanConfig, check_names, from_mapping, load_config, trace_options
from ._fleet import elastic_at, mixed_fleet
from ._fleet import sentence as fleet_sentence
from ._fleet import variables as fleet_variables
from ._serving import compare_serving, serving_sentence, serving_variables
from ._steps import (
    WORKLOAD_SAMPLES,
    PlanError,
    _burst_test,
    _capacity,
    _choose,
    _demand,
    _elasticity,
    _forecast,
    _traffic,
    unmodelled,
)
from ._text import _checks, _recommendation


class PlanWarning(UserWarning):
    """One of the article's applicability checks: the plan holds, but a simpler one may do."""


def read_config(
    config: PlanConfig | dict | str | os.PathLike | None = None, **overrides
) -> PlanConfig:
    """The plan's inputs as a :class:`PlanConfig`, from any form :func:`build` takes.

    Parameters
    ----------
    config
        A :class:`PlanConfig`, a mapping of its fields, a path to a TOML/YAML file, or None for
        the bundled defaults.
    **overrides
        Fields to change.
    """
    checked = isinstance(config, str | os.PathLike | dict)  # read with their names checked
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
    if overrides:
        config = config.replace(**overrides)
    if overrides or not checked:  # a file's names were checked where it was read, with lines
        check_names(config)
    return config


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
        ``monthly_usd``, ``breach_minutes_per_month`` and the config. With ``backtest_days`` > 0
        and a trace longer than that, the plan built on the days before is replayed on them
        (:func:`backtest`): its table as ``backtest_*`` variables over ``plan``, and attrs
        ``backtest`` (one sentence, quoted in the recommendation).

    Raises
    ------
    PlanError
        A step failed (the message names it) or no configuration meets the SLA ("infeasible", with
        the reasons); never a silent fallback.
    """
    from ._backtest import held_out_windows, no_backtest, run_backtest

    cfg = read_config(config, **overrides)
    with _Stage("forecast", cfg):
        source = _load(cfg)
    windows = held_out_windows(source, cfg.backtest_days) if cfg.backtest_days else None
    plan, _ = _build_on(cfg, source)
    if windows is not None:
        with _Stage("backtest", cfg):
            table = run_backtest(cfg, source, *windows, builder=_build_on)
        _attach(plan, table)
    elif cfg.backtest_days:  # asked for, but the trace is too short: said, not dropped
        plan.attrs["backtest_skipped"] = no_backtest(source, cfg.backtest_days)
        plan.attrs["recommendation"] += f"\nBacktest: {plan.attrs['backtest_skipped']}"
    for check in plan.attrs["warnings"]:
        warnings.warn(check, PlanWarning, stacklevel=2)
    return plan


def backtest(
    config: PlanConfig | dict | str | os.PathLike | None = None,
    *,
    fit,
    score,
    draws: int = 100,
    **overrides,
) -> xr.Dataset:
    """Build the plan on one window of the trace and replay it on another.

    The whole plan (forecast, capacity, elasticity) is built on the ``fit`` window alone; the
    ``score`` window's traffic is then replayed through the elasticity simulator with the plan's
    GPU, fleet, warm spares and policy, and compared with the hindsight-best plan for that window
    (the cheapest policy run of the same grid that met the breach budget there, the plan's own run
    among the candidates) and with naive fixed fleets sized on the fit window's mean rate, on its
    last interval's rate and on the plan's own fixed fleet (the P-quantile of the forecast).

    Parameters
    ----------
    config, **overrides
        As in :func:`build`.
    fit, score
        Windows of the trace, half-open ``slice(start, stop)``: whole days counted from the trace's
        first time (``slice(0, 7)``: its first week) or dates and times (``slice("2024-03-04",
        "2024-03-11")``). They must not overlap.
    draws
        Burst draws: the score window again with bursts from the plan's burst model (seeded by the
        config's ``seed``), to count in how many each plan holds its breach budget.

    Returns
    -------
    xarray.Dataset
        Over ``plan`` (``recommended``, ``hindsight``, ``naive-mean``, ``naive-last``,
        ``fixed-plan``): the run's settings (``policy``, ``min_instances``, ...), ``breach_min``,
        ``unserved``, ``late``, ``unserved_share``, ``gpu_hours``, ``usd``, ``meets_budget``,
        ``usd_above_hindsight`` and ``burst_hold_share``, with units; attrs the windows, the budget
        and ``summary`` (one sentence).

    Examples
    --------
    >>> table = backtest(fit=slice(0, 7), score=slice(7, 14))  # doctest: +SKIP
    >>> table.breach_min.sel(plan="recommended")  # doctest: +SKIP
    """
    from ._backtest import run_backtest, windows_of

    cfg = read_config(config, **overrides)
    with _Stage("forecast", cfg):
        source = _load(cfg)
    fit_window, score_window = windows_of(source, fit, score)
    with _Stage("backtest", cfg):
        return run_backtest(cfg, source, fit_window, score_window, builder=_build_on, draws=draws)


def _load(cfg: PlanConfig):
    """The trace as stored (a request log or a rate series), before any window is cut."""
    from .. import data

    return data.load_traffic(cfg.trace, kind=cfg.trace_kind, start=cfg.start, **trace_options(cfg))


def _attach(plan: xr.Dataset, table: xr.Dataset) -> None:
    """The backtest's table and sentence on the plan (and quoted in its recommendation)."""
    for name in table.data_vars:
        plan[f"backtest_{name}"] = table[name].assign_attrs(step="backtest")
    plan.attrs["backtest"] = table.attrs["summary"]
    for key in ("fit_start", "fit_stop", "score_start", "score_stop", "score_days", "burst_draws",
                "mix_breach_min", "mix_usd"):  # fmt: skip
        if key in table.attrs:
            plan.attrs[f"backtest_{key}"] = table.attrs[key]
    plan.attrs["recommendation"] += f"\nBacktest: {table.attrs['summary']}"


def _build_on(cfg: PlanConfig, source):
    """The plan on one trace (or a window of it): ``(plan, parts)``, the steps' own results in parts."""
    from .. import capacity, memory

    with _Stage("forecast", cfg):
        source, series = _traffic(cfg, source)
        fc = _forecast(cfg, series)
    target = fc.target_qps.sel(traffic_quantile=cfg.traffic_quantile)
    buffer_qps = fc.buffer_qps if "buffer_qps" in fc else None
    unshardable = _unshardable(cfg)
    if len(unshardable) == len(cfg.tensor_parallel):
        raise PlanError(
            f"no tensor-parallel degree in {list(cfg.tensor_parallel)} can shard {cfg.model}: "
            + "; ".join(unshardable.values())
        )
    with _Stage("capacity", cfg):
        cap, _workload, seq_len = _capacity(cfg, source, target, buffer_qps)
    with _Stage("memory", cfg):
        mem = memory.max_concurrency(
            model=cfg.model,
            gpu=list(cfg.gpus),
            tensor_parallel=list(cfg.tensor_parallel),
            seq_len=seq_len,
            accounting=cfg.accounting,
            invalid_tensor_parallel="mask",
        )
    best = _choose(cap, cfg)
    if best is not None:
        gpu, tp = str(best.cheapest_gpu.item()), int(best.cheapest_tensor_parallel.item())
        chosen = cap.sel(gpu=gpu, tensor_parallel=tp)
    else:
        chosen = cap
        gpu = str(cap.attrs.get("gpu", chosen.coords.get("gpu", "unknown")))
        # a measured curve: the config names its one GPU and degree (checked against the curve's)
        tp = (
            int(chosen.coords["tensor_parallel"])
            if "tensor_parallel" in chosen.coords
            else int(cfg.tensor_parallel[0])
        )
    if str(chosen.binding.values) not in capacity.FEASIBLE:
        # why a curve meets no SLA does not depend on the traffic: one cell of the target says it
        one = chosen.isel({dim: 0 for dim in chosen.dims})
        raise PlanError(f"infeasible: {capacity.describe(one)}")
    with _Stage("elasticity", cfg):
        demand = _demand(cfg, source, series)
        demand, sweep, advice, _estimate, estimated, cold, ahead = _elasticity(
            cfg, demand, chosen, gpu, tp, fc, series
        )

    plan = _assemble(
        cfg, series, fc, mem, cap, best, chosen, sweep, advice, demand, gpu, tp, estimated, cold,
        seq_len, ahead,
    )  # fmt: skip
    plan.attrs["unshardable"] = "; ".join(unshardable.values())  # degrees left out, and why
    plan.attrs["unmodelled"] = unmodelled(cap)  # options the latency model could not price, why
    if best is not None and cfg.latency in ("model", "engine"):  # ranked by a model: how sure?
        from ._closecall import close_call

        plan.attrs.update(
            close_call(
                cap, best, model=_model_name(cfg.model), metric=cfg.sla_metric,
                prompt_tokens=float(_workload.prompt_tokens.mean()),
                output_tokens=float(_workload.output_tokens.mean()),
                latency_model="analytic" if cfg.latency == "model" else "engine",
            )
        )  # fmt: skip
    mixed = None
    if best is not None:  # the same throughputs as a mix of GPU types, priced and replayed
        from .. import data

        with _Stage("fleet", cfg):
            mixed, replay = mixed_fleet(cfg, cap, fc, demand, advice.selection)
        if isinstance(mixed, str):  # the provider prices none of the GPUs: said, not planned
            plan.attrs["fleet"], mixed = mixed, None
        if mixed is not None:
            plan.update(fleet_variables(mixed, replay))
            elastic = {
                "usd": elastic_at(data.gpu_prices(cfg.provider), gpu, advice.metrics["gpu_hours"]),
                "breach_s": advice.metrics["breach_s"],
            }
            plan.attrs["fleet"] = fleet_sentence(
                mixed, replay, plan.attrs["simulated_hours"], elastic
            )
            plan.attrs["mix_replay_usd"] = float(replay.attrs["usd"])
            plan.attrs["mix_replay_breach_s"] = float(replay.attrs["breach_s"])
            plan.attrs["single_type_replay_usd"] = float(elastic["usd"])
            plan.attrs["mix_usd_per_hour"] = float(mixed.attrs["mix_usd_per_hour"])
            plan.attrs["mix_single_type_usd_per_hour"] = float(
                mixed.attrs["single_type_usd_per_hour"]
            )
            plan.attrs["mix_provider"] = str(mixed.attrs["provider"])
            plan.attrs["mix_optimality_gap"] = float(mixed.attrs["optimality_gap"])
    with _Stage("serving", cfg):  # prefill and decode pools against the aggregated fleet
        serving, serving_replay = compare_serving(
            cfg, _workload, fc, gpu, tp, demand, cold, advice.selection
        )
    if isinstance(serving, xr.Dataset):
        plan.update(serving_variables(serving, serving_replay))
        plan.attrs["serving_mode"] = str(serving.attrs["serving"])
    if serving is not None:
        plan.attrs["serving"] = serving_sentence(
            serving, serving_replay, plan.attrs["simulated_hours"]
        )
    checks = _checks(cfg, fc, chosen, advice, demand, estimated)
    plan.attrs["warnings"] = checks
    plan.attrs["recommendation"] = _recommendation(plan, cfg, fc, chosen, advice, checks)
    parts = dict(
        series=series, fc=fc, chosen=chosen, advice=advice, demand=demand, gpu=gpu, tp=tp,
        cold=cold, mixed=mixed,
    )  # fmt: skip
    return plan, parts


# -- the result -----------------------------------------------------------------------------------
def _timeline(run: xr.Dataset, interval_s: float, step_s: float) -> xr.Dataset:
    """The chosen run's timeline per forecast interval: means, and seconds in breach.

    The run has one row per simulation step (1.2 M for two weeks at 1 s); its steps are whole
    divisors of the interval, so a reshape averages them (xarray's resample took seconds here).
    """
    per = max(1, round(interval_s / step_s))
    rows = run.sizes["time"] // per * per
    start = run.time.values[:rows:per]
    out = xr.Dataset(coords={"time": start})
    for name in ("qps", "ready_instances", "starting_instances", "backlog"):
        values = np.asarray(run[name].values[:rows], dtype=float).reshape(-1, per)
        out[name] = ("time", values.mean(axis=1), dict(run[name].attrs))
    breach = np.asarray(run.breach.values[:rows], dtype=float).reshape(-1, per)
    out["breach_s"] = (
        "time",
        breach.sum(axis=1) * step_s,
        {"units": "s", "long_name": "seconds in SLA breach in the interval"},
    )
    return out


def _assemble(
    cfg, series, fc, mem, cap, best, chosen, sweep, advice, demand, gpu, tp, estimated, cold,
    seq_len, ahead,
):  # fmt: skip
    from .. import capacity, elasticity

    settings = dict(
        per_instance_qps=float(chosen.per_instance_qps),
        step_s=cfg.step_s,
        cold_start_s=cold,
        tolerance_s=cfg.tolerance_s,
        gpus_per_instance=tp,
        gpu=gpu,
        **advice.selection,
    )
    if advice.selection.get("policy") == "predictive":
        settings["forecast"] = ahead
    run = elasticity.simulate(demand, **settings)
    burst = _burst_test(demand, cfg, settings)
    # the chosen run's timeline, per forecast interval (the full timeline has one row per step)
    timeline = _timeline(run, float(series.attrs.get("interval_s", 600)), cfg.step_s)
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
    # the fixed fleet of the chosen option for every traffic quantile (the plan chart's dropdown)
    fleet = capacity.fleet(chosen.per_instance_qps, fc.target_qps, buffer=0)
    parts.append(_prefixed(fleet[["fixed_instances"]], "fleet"))
    if best is not None:  # the capacity step's choice over the day, as choice_*
        parts.append(_prefixed(best, "choice"))
    plan = xr.merge(parts, compat="override", join="outer", combine_attrs="drop_conflicts")
    plan.attrs = {}
    per_instance = float(chosen.per_instance_qps)
    hours = float(run.attrs.get("duration_s", demand.size * cfg.step_s)) / 3600.0
    metrics = advice.metrics
    plan.attrs.update(
        title="capnb capacity plan",
        config=json.dumps(cfg.as_dict()),
        config_source=cfg.source,
        trace_used=f"{cfg.trace} ({series.attrs.get('traffic_kind', '')})",
        model_used=f"{_model_name(cfg.model)} (from {_model_source(cfg.model)})",
        latency_used=str(cap.attrs.get("latency_source", cfg.latency)),
        # a measured curve's corrections and derivations (envelope raises, placements, derived
        # means), one per line: the reader of the plan sees what was done to the measurements
        latency_notes=str(cap.attrs.get("notes", "")),
        workload_used=str(cap.attrs.get("workload_source", cfg.workload)),
        workload_trace=str(cap.attrs.get("workload_trace", cfg.workload)),
        workload_samples=WORKLOAD_SAMPLES,
        model=_model_name(cfg.model),  # a config file's model by its name, not its path
        gpu=gpu,
        tensor_parallel=tp,
        seq_len=seq_len,
        per_instance_qps=per_instance,
        policy=json.dumps({k: _jsonable(v) for k, v in advice.selection.items()}),
        policy_kind=advice.kind,
        cold_start_estimate_s=estimated,
        cold_start_s=cold,
        simulated_hours=hours,
        monthly_usd=float(metrics.get("usd", math.nan)) / hours * glossary.HOURS_PER_MONTH,
        breach_minutes_per_month=float(metrics.get("breach_s", math.nan))
        / hours
        * glossary.HOURS_PER_MONTH
        / 60,
        fixed_monthly_usd=float(chosen.usd_per_hour.mean()) * glossary.HOURS_PER_MONTH
        if "usd_per_hour" in chosen
        else math.nan,
        buffer_instances=int(chosen.burst_instances.max()),
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


def _unshardable(cfg: PlanConfig) -> dict[int, str]:
    """The config's tensor-parallel degrees that cannot shard its model, each with the reason."""
    from .. import data

    spec = data.load_model(cfg.model)
    reasons = {int(tp): spec.valid_tensor_parallel(int(tp)) for tp in cfg.tensor_parallel}
    return {tp: why for tp, why in reasons.items() if why}


def _model_name(model: str) -> str:
    """The model's name as capnb.data.load_model gives it (a config file's, not its path)."""
    from .. import data

    return data.load_model(model).name


def _model_source(model: str) -> str:
    from .. import data

    spec = data.load_model(model)
    where = "the bundled catalog" if model in data.list_models() else str(spec.source)
    # what capnb assumed reading the config (a dtype, tied embeddings, a vision tower not counted)
    return where + "".join(f"; note: {note}" for note in getattr(spec, "notes", ()))


def inputs_used(plan: xr.Dataset | dict) -> str:
    """Which inputs a plan was built on, in words: config, trace, model, latency, workload, GPUs.

    Takes a plan, or the summary :func:`export` writes (``plan.json``, read as a mapping).

    For the bundled defaults it reads ``config: defaults; trace: servegen-m-large (rates (bundled
    servegen-m-large)); model: Llama-3.1-8B (from the bundled catalog); latency: the calibrated
    analytic model; workload: azure-conv-2023; ...``.
    """
    attrs = plan.attrs if isinstance(plan, xr.Dataset) else dict(plan)  # a plan, or its plan.json
    config = json.loads(attrs["config"])
    plan = xr.Dataset(attrs=attrs)
    parts = [
        f"config: {plan.attrs.get('config_source', 'defaults')}",
        f"trace: {plan.attrs.get('trace_used', config['trace'])}",
        f"model: {plan.attrs.get('model_used', config['model'])}",
        f"latency: {plan.attrs.get('latency_used', config['latency'])}"
        + "".join(
            f" (note: {note})"
            for note in str(plan.attrs.get("latency_notes", "")).split("\n")
            if note
        ),
        f"workload: {plan.attrs.get('workload_used', config['workload'])}",
        f"GPUs compared: {', '.join(config['gpus'])} at tensor parallelism "
        f"{', '.join(str(t) for t in config['tensor_parallel'])}",
        f"SLA: {config['sla_metric']} P{100 * config['sla_quantile']:g} <= {config['sla_s']:g} s",
    ]
    return "; ".join(parts)


def describe(plan: xr.Dataset) -> str:
    """The plan's recommendation, as text a person can read."""
    return str(plan.attrs["recommendation"])


def export(
    plan: xr.Dataset, directory: str | os.PathLike, *, name: str = "plan", force: bool = False
) -> dict[str, Path]:
    """Write ``<name>.nc`` (NetCDF, every result) and ``<name>.json`` (the summary) as one set.

    Both files are made in memory, then written together (:func:`capnb.data.write_set`): the
    folder holds the old pair or the new one, and a file capnb did not write is replaced only
    with ``force``.
    """
    netcdf = bytes(_netcdf_ready(plan).to_netcdf(engine="h5netcdf"))
    summary = {
        k: _jsonable(v)
        for k, v in plan.attrs.items()
        if isinstance(v, str | int | float | np.generic)
    }
    summary["warnings"] = list(plan.attrs.get("warnings", []))
    text = json.dumps(summary, indent=2, default=str) + "\n"
    files = write_set(directory, {f"{name}.nc": netcdf, f"{name}.json": text}, force=force)
    return {"netcdf": files[f"{name}.nc"], "json": files[f"{name}.json"]}


def load(path: str | os.PathLike) -> xr.Dataset:
    """Read a plan written by :func:`export` (its NetCDF file) back into memory."""
    path = Path(path)
    with contextlib.suppress(OSError):
        settle(path.parent)  # a set a killed writer committed: moved into place before reading
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

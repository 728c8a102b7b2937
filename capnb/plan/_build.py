"""The chained plan: build, describe, export and load."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shlex
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from .. import glossary
from ..data import settle, write_set
from ..errors import CapnbError, InputError
from ..records import SLA
from . import _cache
from ._answer import Alternative, answer, meanings, units
from ._compose import export_check, make_answer, with_held_out
from ._config import (
    PlanConfig,
    _resolve_paths,
    check_names,
    from_mapping,
    load_config,
    setting_units,
    trace_options,
)
from ._fleet import elastic_at, mixed_fleet
from ._fleet import sentence as fleet_sentence
from ._fleet import variables as fleet_variables
from ._origins import _observed_steps, held_out_bursts
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
    arrivals_of,
    budget_minutes,
    burst_model,
    chosen_policy,
    own_calibration_of,
    per_month,
    replay_hours,
    unshardable_degrees,
)
from ._text import render_text
from ._text import sections as _sections


class PlanWarning(UserWarning):
    """One of the article's applicability checks: the plan holds, but a simpler one may do."""


def read_config(
    config: PlanConfig | dict | str | os.PathLike | None = None,
    *,
    overrides_from: str = "replace()",
    **overrides,
) -> PlanConfig:
    """The plan's inputs as a :class:`PlanConfig`, from any form :func:`build` takes.

    Parameters
    ----------
    config
        A :class:`PlanConfig`, a mapping of its settings (by table, as a file holds them, or
        each under its own name), a path to a TOML/YAML file, or None for the bundled defaults.
    overrides_from
        Where the overrides come from, as an error in one of them says (``capnb plan``'s flags:
        ``"command line"``).
    **overrides
        Settings to change, as :meth:`PlanConfig.replace` takes them: a table by its name
        (``serving={"gpus": ["H100-SXM"]}``) or a setting by its own (``sla="ttft=1.5,tpot=60ms"``).
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
        config = config._changed(overrides_from, overrides)
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
            said = error.plan or str(error)  # the advice in a plan's settings, where it differs
            raise PlanError(
                f"the {self.name} step failed (config: {self.config.source}): {said}"
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
        A :class:`PlanConfig`, a mapping of its settings (by table, as a file holds them, or
        each under its own name), a path to a TOML/YAML file, or None for the bundled defaults.
    **overrides
        Settings to change, as :meth:`PlanConfig.replace` takes them: a table by its name
        (``serving={"gpus": ["H100-SXM"]}``) or a setting by its own (``sla="ttft=1.5,tpot=60ms"``,
        ``gpus=["H100-SXM"]``, ...).

    Returns
    -------
    xarray.Dataset
        Every step's results, prefixed by step, with units; ``attrs["answer"]``: the answer
        record (:func:`answer` reads it: GPU and degree, fleet, policy, cost, breach, held-out
        record, checks), ``config`` and ``config_source``. With ``backtest_days`` > 0 and a trace
        that leaves held-out windows, the policy is chosen out of sample (rolling origins inside
        the trace, :mod:`capnb.plan._origins`) and its record on the held-out windows is the
        table ``held_out_*`` (over ``origin`` and ``plan``) and the answer's ``held_out``. The
        article's applicability checks are also issued as :class:`PlanWarning`.

    Raises
    ------
    PlanError
        A step failed (the message names it) or no configuration meets the SLA ("infeasible", with
        the reasons); never a silent fallback.
    """
    cfg = read_config(config, **overrides)
    plan, issued = _cache.cached_build(cfg, lambda: _build_new(cfg))
    for category, message in issued:  # the steps' own warnings, as a build from scratch gives them
        warnings.warn(message, category, stacklevel=2)
    for check in answer(plan).checks:
        if check.kind == "article":
            warnings.warn(check.finding, PlanWarning, stacklevel=2)
    return plan


def _build_new(cfg: PlanConfig) -> xr.Dataset:
    with _Stage("forecast", cfg):
        source = _load(cfg)
    return _build_on(cfg, source, held_out=True)[0]


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
        "2024-03-11")``). They must not overlap, and ``score`` starts after ``fit`` ends (the
        plan forecasts the days after its history).
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

    return data.load_traffic(
        cfg.traffic.trace,
        kind=cfg.traffic.trace_kind,
        start=cfg.traffic.start,
        **trace_options(cfg),
    )


def _build_on(cfg: PlanConfig, source, *, held_out: bool = False):
    """The plan on one trace (or a window of it): ``(plan, parts)``, the steps' own results in parts.

    ``held_out``: choose the policy by rolling origins inside the trace (:func:`build`); a
    backtest's plan on its fit window does not.
    """
    from .. import capacity

    with _Stage("forecast", cfg):
        source, series = _traffic(cfg, source)
        bursts = burst_model(cfg, series)
        fc = _forecast(cfg, series)
    target = fc.target_qps.sel(traffic_quantile=cfg.traffic.traffic_quantile)
    buffer_qps = fc.buffer_qps if "buffer_qps" in fc else None
    unshardable = unshardable_degrees(cfg)
    if len(unshardable) == len(cfg.serving.tensor_parallel):
        raise PlanError(
            f"no tensor-parallel degree in {list(cfg.serving.tensor_parallel)} can shard "
            f"{_model_name(cfg.serving.model)}: " + "; ".join(unshardable.values())
        )
    with _Stage("capacity", cfg):
        cap, workload, seq_len = _capacity(cfg, source, target, buffer_qps)
    with _Stage("memory", cfg):
        mem = _memory_step(cfg, cap, seq_len)
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
            else int(cfg.serving.tensor_parallel[0])
        )
    if str(chosen.binding.values) not in capacity.FEASIBLE:
        # why a curve meets no SLA does not depend on the traffic: one cell of the target says it
        one = chosen.isel({dim: 0 for dim in chosen.dims})
        why = capacity.describe(one)  # (its words may begin "Infeasible": said once)
        raise PlanError(why[0].lower() + why[1:] if why.lower().startswith("infeasible")
                        else f"infeasible: {why}")  # fmt: skip
    with _Stage("arrivals", cfg):  # the chosen instance under Poisson arrivals (engine only)
        under_arrivals = arrivals_of(cfg, cap, chosen, gpu, tp, workload)
    with _Stage("elasticity", cfg):
        demand = _demand(cfg, source, series)
        demand, sweep, advice, _estimate, estimated, cold, ahead, record = _elasticity(
            cfg, demand, chosen, gpu, tp, fc, series, held_out=held_out, arrivals=under_arrivals
        )
    policy = chosen_policy(cfg, advice.selection)
    plan, run, burst = _assemble(
        cfg, series, fc, mem, cap, best, chosen, sweep, policy, demand, gpu, tp, ahead, bursts,
        cold,
    )  # fmt: skip
    alternatives = []
    if best is not None:  # the same throughputs as a mix of GPU types, priced and replayed
        with _Stage("fleet", cfg):
            mixed, replay = mixed_fleet(cfg, cap, fc, demand, policy)
        if isinstance(mixed, str):  # the provider prices none of the GPUs: said, not planned
            alternatives.append(_alternative("mixed fleet", mixed))
            mixed = None
        elif mixed is not None:
            plan.update(fleet_variables(mixed, replay))
            alternatives.append(_mix_alternative(cfg, mixed, replay, gpu, advice, run))
    else:
        mixed = None
        if cfg.fleet.provider != "none":  # asked for, and not planned: said, not left out
            alternatives.append(_alternative("mixed fleet", MIX_UNMEASURED))
    with _Stage("serving", cfg):  # prefill and decode pools against the aggregated fleet
        serving, serving_replay = compare_serving(cfg, workload, fc, gpu, tp, demand, cold,
                                                  policy, own_calibration_of(cap, gpu))  # fmt: skip
    if isinstance(serving, xr.Dataset):
        plan.update(serving_variables(serving, serving_replay))
    if serving is not None:
        own = chosen.fixed_instances.values if "fixed_instances" in chosen else None
        alternatives.append(_serving_alternative(serving, serving_replay, run, own, cfg))
    made = make_answer(
        cfg, plan=plan, fc=fc, cap=cap, best=best, chosen=chosen, advice=advice, run=run,
        burst=burst, gpu=gpu, tp=tp, cold=cold, estimated=estimated, demand=demand,
        workload=workload, seq_len=seq_len, unshardable=unshardable,
        alternatives=alternatives, inputs=_inputs_words(cfg, cap, series), bursts=bursts,
        arrivals=under_arrivals,
    )  # fmt: skip
    made = dataclasses.replace(made, checks=(*made.checks, export_check(made, demand, cfg, gpu)))
    if not isinstance(record, str):
        for name in record.table.data_vars:
            plan[f"held_out_{name}"] = record.table[name].assign_attrs(step="held_out")
        plan = plan.rename({"origin": "held_out_origin", "plan": "held_out_plan"})
    with _Stage("held-out bursts", cfg):
        burst_share = (
            None if isinstance(record, str)
            else held_out_bursts(cfg, record, demand, series, bursts, dict(
                per_instance_qps=float(chosen.per_instance_qps), step_s=cfg.elasticity.step_s,
                cold_start_s=cold, tolerance_s=cfg.elasticity.tolerance_s, gpus_per_instance=tp, gpu=gpu))
        )  # fmt: skip
    made = with_held_out(made, record, cfg, burst_share)
    # the replay served the demand smoothed over a request's time in an instance (s)
    plan.attrs["demand_smoothed_over_s"] = float(demand.attrs["smoothed_over_s"])
    plan.attrs["answer"] = json.dumps(made.to_dict())
    parts = dict(
        series=series, fc=fc, chosen=chosen, advice=advice, demand=demand, gpu=gpu, tp=tp,
        cold=cold, mixed=mixed, bursts=bursts,
    )  # fmt: skip
    return plan, parts


#: Why a plan on measured latencies has no mixed fleet (the mix is priced on the capacity step's
#: options over GPU types and degrees; a measured curve is one of them).
MIX_UNMEASURED = (
    "not planned: the latencies are measured, one curve for one GPU at one tensor-parallel degree, "
    "and the mixed fleet is planned over the capacity step's options of GPU type and degree (plan "
    "on the latency model, latency = 'auto', to see the mix and its reserved base priced)"
)


def _alternative(name: str, words: str) -> Alternative:
    """An alternative that could not be costed: its reason, no numbers."""
    return Alternative(name=name, monthly_usd=math.nan, breach_minutes_per_month=math.nan,
                       words=words, status="not_costed")  # fmt: skip


def _standing(breach_minutes: float, cfg: PlanConfig) -> str:
    """A replayed alternative's status: over_budget or within_budget.

    ``breach_minutes``: its replay's SLA-breach minutes a month, against the plan's budget
    (``breach_budget`` of a 730-hour month).
    """
    return "over_budget" if breach_minutes > budget_minutes(cfg) else "within_budget"


def _per_month(value: float, run: xr.Dataset) -> float:
    """A total over the replay as a figure a month (730 h)."""
    return float(value) * per_month(replay_hours(run))


def _mix_alternative(cfg, mixed, replay, gpu, advice, run) -> Alternative:
    from .. import data

    elastic = {
        "usd": elastic_at(data.gpu_prices(cfg.fleet.provider), gpu, advice.metrics["gpu_hours"]),
        "breach_s": advice.metrics["breach_s"],
        "budget_minutes": budget_minutes(cfg),
    }
    breach = _per_month(replay.attrs["breach_s"], run) / 60
    return Alternative(
        name=f"mixed fleet at {cfg.fleet.provider}'s prices",
        monthly_usd=_per_month(replay.attrs["usd"], run),
        breach_minutes_per_month=breach,
        words=fleet_sentence(mixed, replay, replay_hours(run), elastic),
        status=_standing(breach, cfg),
    )


def _serving_alternative(serving, replay, run, own, cfg: PlanConfig) -> Alternative:
    mine = {"usd": float(run.usd) if "usd" in run else math.nan,
            "breach_s": float(run.breach_s), "budget_minutes": budget_minutes(cfg)}  # fmt: skip
    words = serving_sentence(serving, replay, replay_hours(run), own, chosen=mine)
    if replay is None:  # not replayed: not compared, or the pools miss the SLA as sized
        missed = isinstance(serving, xr.Dataset) and not bool(
            serving.meets_sla.sel(serving="disaggregated")
        )
        alternative = _alternative("prefill/decode pools", words)
        return dataclasses.replace(alternative, status="misses_sla") if missed else alternative
    # replayed: the pools met the SLA, their per-request simulation too (disaggregate decides)
    breach = _per_month(replay.attrs["breach_s"], run) / 60
    return Alternative(
        name="prefill/decode pools",
        monthly_usd=_per_month(replay.attrs["usd"], run),
        breach_minutes_per_month=breach,
        words=words,
        status=_standing(breach, cfg),
    )


# -- the result -----------------------------------------------------------------------------------
def _timeline(run: xr.Dataset, interval_s: float, step_s: float) -> xr.Dataset:
    """The chosen run's timeline per forecast interval: means, and seconds in breach.

    The run has one row per simulation step (1.2 M for two weeks at 1 s); its steps are whole
    divisors of the interval, so a reshape averages them (xarray's resample took seconds here).
    """
    per = max(1, round(interval_s / step_s))
    rows = run.sizes["time"] // per * per
    start = run.time.values[:rows:per]
    out = xr.Dataset(coords={"time": ("time", start, glossary.attrs("time"))})
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


def _assemble(cfg, series, fc, mem, cap, best, chosen, sweep, policy, demand, gpu, tp, ahead,
              bursts, cold):  # fmt: skip
    """Every step's results in one Dataset, the chosen run and its burst test: ``(plan, run, burst)``.

    ``policy``: the chosen run's :class:`capnb.elasticity.Policy` (:func:`chosen_policy`).
    """
    from .. import capacity, elasticity

    settings = dict(
        per_instance_qps=float(chosen.per_instance_qps),
        step_s=cfg.elasticity.step_s,
        cold_start_s=cold,
        tolerance_s=cfg.elasticity.tolerance_s,
        gpus_per_instance=tp,
        gpu=gpu,
        policy=policy,
    )
    if policy.name == "predictive":
        settings["forecast"] = ahead
    run = elasticity.simulate(demand, **settings)
    # the burst lands where the trace was observed, not in a hole the replay filled
    burst = _burst_test(demand, cfg, settings, bursts,
                        observed=_observed_steps(series, demand.time.values))  # fmt: skip
    # the chosen run's timeline, per forecast interval (the full timeline has one row per step)
    timeline = _timeline(run, float(series.attrs.get("interval_s", 600)), cfg.elasticity.step_s)
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
    plan.attrs = dict(
        title="capnb capacity plan",
        # the paths read (a relative one from this process's folder), so that plan.json's config
        # reads the same files from any folder (load_config, the settle commands' re-plan)
        config=json.dumps(_resolve_paths(cfg.as_dict(), Path.cwd())),
        config_source=cfg.source,
        latency_notes=str(cap.attrs.get("notes", "")),
        workload_trace=str(cap.attrs.get("workload_trace", cfg.serving.workload)),
        workload_samples=WORKLOAD_SAMPLES,
        memory_accounting=str(cap.attrs["memory_accounting"]),
        memory_vllm_version=str(cap.attrs.get("memory_vllm_version", "")),
        # {gpu: Calibration's fields}: the engine fitted on the user's runs (calibration_runs)
        own_calibrations=str(cap.attrs.get("own_calibrations", "{}")),
    )
    # the ratios measured / predicted capacity_per_instance_qps_low/_high stand for (no band: none)
    from ..capacity._band import BAND_ATTRS

    kept = (*BAND_ATTRS, "own_band_ratios")  # (own: the GPU calibrated on the user's runs)
    plan.attrs.update({f"capacity_{k}": cap.attrs[k] for k in kept if k in cap.attrs})
    return plan, run, burst


def _model_name(model: str) -> str:
    """The model's name as capnb.data.load_model gives it (a config file's, not its path)."""
    from .. import data

    return data.load_model(model).name


def _model_source(model: str) -> str:
    from .. import data

    spec = data.load_model(model)
    where = str(spec.source)
    if model in data.list_models():  # the catalog's, or a copy's of the user's
        where = f"{where} (CAPNB_DATASETS)" if data.catalog_is_own() else "the bundled catalog"
    # what capnb assumed reading the config (a dtype, tied embeddings, a vision tower not counted)
    return where + "".join(f"; note: {note}" for note in getattr(spec, "notes", ()))


def _profile_words(cfg: PlanConfig) -> str:
    """The profile run the engine's KV cache was sized after, per GPU (as vLLM V1 runs it).

    An option that runs more sequences at once than the GPU's profile is profiled running them
    (its ``--max-num-seqs``: :func:`capnb.capacity._engine_sweep._served`), and the words say so.
    """
    from ..capacity._engine_sweep import MOST_SEQUENCES
    from ..latency._engine import profile_settings
    from ._steps import engine_settings

    settings = engine_settings(cfg)
    by_profile: dict[tuple[int, int], list[str]] = {}
    for gpu in cfg.serving.gpus:
        by_profile.setdefault(profile_settings(gpu, settings), []).append(gpu)
    runs = "; ".join(
        f"{seqs:,} sequences and {tokens:,} tokens on {', '.join(gpus)}"
        for (seqs, tokens), gpus in by_profile.items()
    )
    if settings.engine == "vllm-v1" and min(seqs for seqs, _ in by_profile) < MOST_SEQUENCES:
        runs += "; an option run at more sequences at once than that, at those (--max-num-seqs)"
    return f", after a profile run as vLLM V1 runs it ({runs})"


def _accounting_words(cfg: PlanConfig, cap: xr.Dataset) -> str:
    """The memory accounting the plan sized its options with, and why when not the config's."""
    used, version = str(cap.attrs["memory_accounting"]), cap.attrs.get("memory_vllm_version")
    words = {"article": "the article's accounting (15 % headroom)"}.get(used, f"{used} accounting")
    if used == "vllm":
        words = f"vLLM {version}'s accounting" if version else "vLLM's accounting"
        if _engine_priced(cap) and not cfg.serving.engine.startswith("vllm"):
            # the engine model sizes every engine's KV cache so
            from ..records import ENGINES

            words += (
                f" for {ENGINES[cfg.serving.engine]} too (capnb sizes every engine's KV cache "
                "with vLLM's; the engine's own sizing is not modelled)"
            )
    if used == "vllm" and _engine_priced(cap):
        words += _profile_words(cfg)
    if used != cfg.serving.accounting:
        words += (
            f" (the serving-engine model's KV cache; [serving] accounting = "
            f"{cfg.serving.accounting!r} applies to the analytic model and measured latencies)"
        )
    if used == "vllm" and version:  # on the memory the driver reports, where catalogued
        from .. import data

        reported = data.load_gpus(cfg.serving.gpus).memory_reported_bytes
        marketed = [str(g) for g in reported.gpu.values if not np.isfinite(reported.sel(gpu=g))]
        if marketed:
            words += (
                f", on the marketed memory (memory_bytes) of {', '.join(marketed)}: the GPU "
                "catalog has no driver-reported memory (memory_reported_bytes) for "
                f"{'it' if len(marketed) == 1 else 'them'}"
            )
    return words


def _inputs_words(cfg: PlanConfig, cap: xr.Dataset, series: xr.Dataset) -> str:
    """The inputs a plan was built on, in words (the record's ``inputs``)."""
    notes = "".join(
        f" (note: {note})" for note in str(cap.attrs.get("notes", "")).split("\n") if note
    )
    parts = [
        f"config: {cfg.source}",
        f"trace: {cfg.traffic.trace} ({series.attrs.get('traffic_kind', '')})",
        f"model: {_model_name(cfg.serving.model)} (from {_model_source(cfg.serving.model)})",
        f"latency: {cap.attrs.get('latency_source', cfg.serving.latency)}{notes}",
        *_engine_words(cfg, cap),
        f"workload: {cap.attrs.get('workload_source', cfg.serving.workload)}",
        f"memory: {_accounting_words(cfg, cap)}",
        f"GPUs compared: {', '.join(cfg.serving.gpus)} at tensor parallelism "
        f"{', '.join(str(t) for t in cfg.serving.tensor_parallel)}",
        f"SLA: {cfg.sla}",
    ]
    from .. import data

    own = data.own_gpu_figures(data.resolve_gpu(g) for g in cfg.serving.gpus)
    if own:  # a catalog of the user's: which GPU figures are theirs
        parts.insert(-1, f"GPU figures: {own}")
    return "; ".join(parts)


def _memory_step(cfg: PlanConfig, cap: xr.Dataset, seq_len: int) -> xr.Dataset:
    """The sequences that fit, with the accounting the capacity step sized its options with.

    Where the serving-engine model priced them on vLLM's, each option is profiled at the
    sequences the engine sweep profiled it at (its ``profiled_sequences``:
    :func:`capnb.latency._engine.served_accounting`, vllm serve's run on the GPU, 256 sequences
    and 2,048 tokens on an L4; an option run at more sequences at once, at those), so the memory
    step holds what the answer's "memory holds" says. An option the sweep could not run is
    profiled as the server's settings are.
    """
    from .. import memory

    used, version = str(cap.attrs["memory_accounting"]), cap.attrs.get("memory_vllm_version")
    kw = dict(model=cfg.serving.model, seq_len=seq_len, invalid_tensor_parallel="mask")
    if used != "vllm" or not _engine_priced(cap):
        return memory.max_concurrency(gpu=list(cfg.serving.gpus), accounting=used,
                                      tensor_parallel=list(cfg.serving.tensor_parallel),
                                      vllm_version=version, **kw)  # fmt: skip
    rows = []
    for gpu in cfg.serving.gpus:
        cells = [
            _profiled(cfg, gpu, int(tp), version, kw, _sweep_profile(cap, gpu, int(tp), ""))[1]
            for tp in cfg.serving.tensor_parallel
        ]
        rows.append(xr.concat(cells, dim="tensor_parallel", **_STACKED))
    return xr.concat(rows, dim="gpu", **_STACKED)


def _sweep_profile(ds: xr.Dataset, gpu: str, tp: int, prefix: str) -> float:
    """The sequences the engine sweep profiled an option's KV cache at (NaN: none it ran)."""
    from .. import data

    name = f"{prefix}profiled_sequences"
    if name not in ds:
        return math.nan
    return float(ds[name].sel(gpu=data.resolve_gpu(gpu), tensor_parallel=tp).item())


def _profiled(cfg: PlanConfig, gpu: str, tp: int, version, kw: dict, profiled: float):
    """(vLLM's accounting of one option as the engine sweep profiled it, the sequences it fits).

    At ``profiled`` sequences (the sweep's ``profiled_sequences``: ``vllm serve``'s on the GPU,
    or the sequences the option runs at once where more) for a vLLM V1 server; else, or where
    NaN, as the server's settings profile it (:func:`capnb.latency._engine.served_accounting`).
    """
    from .. import data, memory
    from ..latency import _engine
    from ._steps import engine_settings

    settings = engine_settings(cfg)
    hybrid = _engine.hybrid_engine(data.load_model(cfg.serving.model), settings.engine)
    served = settings
    if settings.engine == "vllm-v1" and math.isfinite(profiled):
        served = dataclasses.replace(settings, max_num_seqs=int(profiled))
    acct = _engine.served_accounting(data.resolve_gpu(gpu), served, hybrid=hybrid,
                                     vllm_version=version)  # fmt: skip
    return acct, memory.max_concurrency(gpu=[gpu], tensor_parallel=[tp], accounting=acct, **kw)


def memory_profile(plan: xr.Dataset, gpu: str, tensor_parallel: int) -> dict[str, object]:
    """The vLLM profile run the plan sized one option's KV cache with ({}: the accounting's own).

    ``max_num_seqs``, ``max_num_batched_tokens`` and ``hybrid_kv`` of
    :func:`capnb.memory.accounting` (vLLM at the plan's ``memory_vllm_version``): where the
    serving-engine model priced the options, each is profiled as the engine sweep profiled it
    (``vllm serve``'s run on its GPU, 256 sequences and 2,048 tokens on an L40S, not the
    accounting's 1,024 and 8,192), so that accounting counts the sequences the answer's
    "memory holds" says.
    """
    version = str(plan.attrs.get("memory_vllm_version", "")) or None
    if plan.attrs.get("memory_accounting") != "vllm" or version is None:
        return {}
    cfg = read_config(json.loads(plan.attrs["config"]))
    kw = dict(
        model=cfg.serving.model, seq_len=int(answer(plan).seq_len), invalid_tensor_parallel="mask"
    )
    tp = int(tensor_parallel)
    acct, _ = _profiled(cfg, gpu, tp, version, kw, _sweep_profile(plan, gpu, tp, "capacity_"))
    return {"max_num_seqs": acct.max_num_seqs, "max_num_batched_tokens": acct.max_num_batched_tokens,
            "hybrid_kv": acct.hybrid_kv}  # fmt: skip


#: How the memory step's cells stack: every variable along the dim, the rest as the first cell's
_STACKED = dict(data_vars="all", coords="minimal", compat="override", join="outer",
                combine_attrs="override")  # fmt: skip


def _engine_priced(cap: xr.Dataset) -> bool:
    """Whether the serving-engine model priced any of the SLA's bounds (the capacity step's attrs)."""
    return "engine" in json.loads(cap.attrs.get("latency_models", "{}")).values()


def _engine_words(cfg: PlanConfig, cap: xr.Dataset) -> list[str]:
    """The engine, where the latency words do not name it: what it sets without the engine model."""
    if _engine_priced(cap) or cfg.serving.engine == "vllm-v1":
        return []
    from ..records import ENGINES

    return [f"engine: {ENGINES[cfg.serving.engine]} (its serve commands and manifests; the "
            "latencies above are not the engine model's, so not its scheduling)"]  # fmt: skip


def inputs_used(plan: xr.Dataset | dict) -> str:
    """Which inputs a plan was built on, in words: config, trace, model, latency, workload, GPUs.

    Takes a plan, or the mapping ``plan.json`` holds. For the bundled defaults it reads
    ``config: defaults; trace: servegen-m-large (rates (bundled servegen-m-large)); model:
    Llama-3.1-8B (from the bundled catalog); latency: the calibrated analytic model; ...``.
    """
    return answer(plan).inputs


def describe(plan: xr.Dataset | dict) -> str:
    """The plan's answer as text a person reads (a rendering of :func:`answer`)."""
    return render_text(answer(plan))


def sections(plan: xr.Dataset | dict) -> dict[str, str]:
    """The answer's paragraphs by name (``serve``, ``headline``, ``fleet``, ``cost``, ...).

    :func:`describe` is these joined by new lines; the report's first page typesets the same.
    """
    return _sections(answer(plan))


def summary(plan: xr.Dataset) -> dict:
    """What ``plan.json`` holds: the answer's fields, their units, the config and the text.

    ``answer``: :meth:`Answer.to_dict` (NaN as null); ``units``: each field's unit (nested
    fields as ``parent.field``); ``meanings``: each field's meaning, with what a null, empty or
    sentinel value of it says (``memory_concurrency`` -1: not checked); ``config``: the inputs
    as a mapping; ``config_units``: each setting's unit (the SLA's as ``sla.field``); ``text``:
    :func:`describe`.
    """
    record = answer(plan)
    return {
        "answer": record.to_dict(),
        "units": units(),
        "meanings": meanings(),
        "config": json.loads(plan.attrs["config"]),
        "config_units": setting_units() | {f"sla.{k}": v for k, v in units(SLA).items()},
        "config_source": plan.attrs.get("config_source", "defaults"),
        "text": render_text(record),
    }


def export_names(name: str = "plan") -> tuple[str, ...]:
    """The files :func:`export` writes: ``<name>.nc``, ``<name>.json`` and the autoscaler objects.

    The objects are ``hpa.yaml``, ``knative.yaml`` and ``keda.yaml`` for the default name, and
    ``<name>-hpa.yaml`` ... otherwise, so that a second plan exported beside ``plan.nc`` under its
    own name does not replace the first plan's objects. A command checks these names against its
    output folder (:func:`capnb.data.check_set`) before it builds the plan, not after.
    """
    from ._manifests import KINDS

    _check_export_name(name)
    return (f"{name}.nc", f"{name}.json", *(_yaml_name(name, kind) for kind in KINDS))


def _check_export_name(name: object) -> None:
    """``name`` of :func:`export`: the stem of plain file names, or an InputError naming it."""
    if not isinstance(name, str):
        raise InputError(f"name={name!r}: expected text, the files' stem, e.g. 'plan'")
    if not name.strip():
        raise InputError(f"name={name!r}: an empty name; give the files' stem, e.g. 'plan'")
    if Path(name).name != name or "\\" in name:
        raise InputError(f"name={name!r}: a file name, not a path (give the folder as directory)")
    if name.startswith("."):
        raise InputError(
            f"name={name!r}: starts with '.', a hidden file; e.g. {name.lstrip('.')!r}"
        )
    if name.lower().endswith((".nc", ".json")):
        raise InputError(
            f"name={name!r}: give it without its suffix, e.g. {Path(name).stem!r} (export adds "
            ".nc and .json)"
        )


def _yaml_name(name: str, kind: str) -> str:
    return f"{kind}.yaml" if name == "plan" else f"{name}-{kind}.yaml"


def export(
    plan: xr.Dataset, directory: str | os.PathLike, *, name: str = "plan", force: bool = False
) -> dict[str, Path]:
    """Write the plan's files as one set: ``<name>.nc``, ``<name>.json`` and its autoscaler objects.

    ``<name>.nc`` holds every result (NetCDF), ``<name>.json`` the answer (:func:`summary`), and
    ``hpa.yaml``, ``knative.yaml`` and ``keda.yaml`` (``<name>-hpa.yaml`` ... under another
    ``name``: :func:`export_names`) the chosen policy as a Kubernetes HPA, a
    Knative Service and a KEDA ScaledObject with the values the replay used
    (:func:`capnb.plan.manifests`). The files are made in memory, then written together
    (:func:`capnb.data.write_set`): the folder holds the old set or the new one, and a file capnb
    did not write is replaced only with ``force``.

    Returns
    -------
    dict
        Paths by key: ``netcdf``, ``json``, ``hpa``, ``knative``, ``keda``.
    """
    from ._manifests import manifests, policy_choice

    _check_export_name(name)
    objects = manifests(policy_choice(plan))
    netcdf = bytes(_netcdf_ready(plan).to_netcdf(engine="h5netcdf"))
    text = json.dumps(summary(plan), indent=2) + "\n"
    contents = {f"{name}.nc": netcdf, f"{name}.json": text}
    contents |= {_yaml_name(name, kind): objects.yaml(kind) for kind in objects.documents}
    files = write_set(directory, contents, force=force)
    return {"netcdf": files[f"{name}.nc"], "json": files[f"{name}.json"],
            **{kind: files[_yaml_name(name, kind)] for kind in objects.documents}}  # fmt: skip


def load(path: str | os.PathLike) -> xr.Dataset:
    """Read a plan written by :func:`export` (its NetCDF file) back into memory.

    Its variables carry the glossary's names with their ``units`` attrs, as :func:`build` returned
    them (``capacity_per_instance_qps`` in requests/s, ...).
    """
    path = Path(path)
    with contextlib.suppress(OSError):
        settle(path.parent)  # a set a killed writer committed: moved into place before reading
    if path.is_dir():  # the folder capnb plan wrote into: its files named, not "no such file"
        found = [str(path / name) for name in ("plan.nc", "plan.json") if (path / name).is_file()]
        raise InputError(
            f"{path}: a folder, not a plan file; give "
            + (" or ".join(found) if found else "the plan.nc or plan.json capnb plan wrote")
        )
    if not path.is_file():
        raise InputError(
            f"{path}: no such plan file (write one with capnb.plan.export or capnb plan)"
        )
    if path.suffix in (".toml", ".yaml", ".yml"):  # the inputs (capnb config), not a plan built
        raise InputError(
            f"{path}: a plan config, not a plan: run capnb plan --config {shlex.quote(str(path))} "
            "and give the plan.nc it writes"
        )
    if path.suffix == ".json":  # the summary beside plan.nc: its answer record, not the plan
        raise InputError(
            f"{path}: a plan.json holds the plan's answer record, not the plan: load "
            f"{path.with_suffix('.nc')}, or read the answer with "
            "capnb.plan.answer(json.load(open(path)))"
        )
    try:
        with xr.open_dataset(path, engine="h5netcdf") as stored:
            plan = stored.load()
    except (OSError, ValueError) as error:  # h5py's "file signature not found", a truncated file
        raise InputError(f"{path}: not a plan file capnb wrote (not NetCDF: {error})") from None
    if "answer" not in plan.attrs:
        raise InputError(f"{path}: not a capnb plan (it carries no answer)")
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

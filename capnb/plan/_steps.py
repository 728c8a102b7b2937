"""The plan's stages: each step of :func:`capnb.plan.build`, on a :class:`PlanConfig`."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import xarray as xr

from .. import words
from ..errors import CapnbError, InputError
from ..glossary import HOURS_PER_MONTH
from ..units import instances_needed
from ._config import PlanConfig, trace_options, workload_options
from ._draws import burst_model


class PlanError(CapnbError):
    """A step of the plan failed; the message names the step and the input."""


def _traffic(cfg: PlanConfig, source=None):
    """The trace as the plan reads it (a request log or a rate series), and its forecast series.

    ``source``: the trace already loaded (a window of it, for a backtest).
    """
    from .. import data, forecast

    if source is None:
        source = data.load_traffic(
            cfg.traffic.trace,
            kind=cfg.traffic.trace_kind,
            start=cfg.traffic.start,
            **trace_options(cfg),
        )
    series = forecast.resample(source, cfg.traffic.interval)
    series["qps"] = (series.qps * cfg.traffic.demand_scale).assign_attrs(series.qps.attrs)
    series.attrs["traffic_kind"] = source.attrs.get("traffic_kind", "")
    return source, series


def _forecast(cfg: PlanConfig, series):
    from .. import forecast

    quantiles = tuple(sorted({0.5, 0.95, 0.99, float(cfg.traffic.traffic_quantile)}))
    return forecast.target(
        series,
        slots=cfg.traffic.slots,
        quantiles=quantiles,
        plan_quantile=cfg.traffic.traffic_quantile,
        bursts=burst_model(cfg, series),
        trials=cfg.traffic.trials,
        seed=cfg.traffic.seed,
        exceed_probability=cfg.traffic.exceed_probability,
        growth_model=cfg.traffic.growth_model,
    )


#: Representative requests the latency model prices (capnb.latency.workload); the plan's attrs
#: carry it (``workload_samples``) so that worksheet 03 in a report prices the same ones.
WORKLOAD_SAMPLES = 512


def within_context(log: xr.Dataset, model, name: str = "workload") -> xr.Dataset:
    """The requests of a request log that fit ``model``'s context: the ones a plan prices.

    ``log``: one row a request, with ``prompt_tokens`` and ``output_tokens`` (tokens);
    ``model``: a catalog id, a ``config.json`` or its folder; ``name``: the log's, for the error.
    vLLM rejects a request longer than its default ``max_model_len`` (the model's context) on any
    GPU, so the plan counts it as rejected, neither priced nor held in memory; worksheet 03 in a
    report prices the same requests. A log with no request that fits is an
    :class:`~capnb.errors.InputError`.
    """
    from .. import data

    spec = data.load_model(model)  # named by its name: a folder's path is not the model's
    limit = spec.context_tokens
    prompt, output = (
        np.asarray(log[n].values, float).ravel() for n in ("prompt_tokens", "output_tokens")
    )
    within = np.ones(prompt.size, bool) if limit is None else prompt + output <= limit
    if not within.any():
        raise InputError(
            f"workload: every one of the workload's {prompt.size:,} requests ({name!r}) is "
            f"longer than {spec.name}'s context of {limit:,} tokens (prompt + "
            "output), which vLLM rejects: serve a model with a longer context, or plan on a "
            "workload whose requests fit ([serving] workload)"
        )
    dim = log.prompt_tokens.dims[0]  # one row a request
    return log if within.all() else log.isel({dim: np.flatnonzero(within)})


def _workload(cfg: PlanConfig, source):
    """Prompt and output lengths the latency model prices, and where they came from.

    The latency model prices :data:`WORKLOAD_SAMPLES` requests of the log, of those within the
    model's context: vLLM rejects a longer one at its ``max_model_len`` on any GPU, so it is
    counted as rejected (the context check), neither priced nor held in memory. The whole log's
    request lengths (tokens, prompt + output) ride along as ``attrs["log_tokens"]`` for that
    check.
    """
    from .. import data, latency

    def sampled(log, name):
        out = latency.workload(
            within_context(log, cfg.serving.model, name), samples=WORKLOAD_SAMPLES
        )
        tokens = (
            np.asarray(log[n].values, float).ravel() for n in ("prompt_tokens", "output_tokens")
        )
        out.attrs["log_tokens"] = sum(tokens)  # the whole log's: the context check counts them
        return out, name

    own = "request" in source.dims and {"prompt_tokens", "output_tokens"} <= set(source)
    if cfg.serving.workload == "trace" and not own:
        raise InputError(
            f"workload = 'trace': the trace {cfg.traffic.trace!r} has no prompt and output token columns "
            "(name them with [traffic] prompt_column and output_column if their names are not "
            "common ones, or name a bundled trace or a file that has them)"
        )
    if cfg.serving.workload in ("trace", "auto") and own:
        return sampled(source, cfg.traffic.trace)
    name = "azure-conv-2023" if cfg.serving.workload == "auto" else cfg.serving.workload
    return sampled(data.load_trace(name, **workload_options(cfg, name)), name)


def _blocks(cfg: PlanConfig, workload_from: str):
    """The prompt block hashes of the request log the workload comes from (the cache's hit rate).

    The lengths and the prefix reuse are read from the same log: the plan's own trace when it has
    token columns, else the ``workload`` trace (e.g. ``workload = "mooncake-synthetic"``).
    """
    from .. import data

    # the plan's own log names its prompt column in [traffic]: the block hashes count the same one
    named = cfg.traffic.prompt_column if workload_from == cfg.traffic.trace else None
    try:
        if named:
            return data.load_block_hashes(workload_from, prompt_field=named)
        return data.load_block_hashes(workload_from)
    except (CapnbError, OSError) as error:
        raise InputError(
            f"prefix_cache_share = {cfg.serving.prefix_cache_share:g}: the workload's request log "
            f"{workload_from!r} must carry prompt block hashes (Mooncake's hash_ids) to replay "
            f"the cache; set workload to one that does (e.g. 'mooncake-synthetic'): {error}"
        ) from error


def _own_calibration(cfg: PlanConfig) -> dict | None:
    """``{gpu: Calibration}`` from the config's ``calibration_runs`` (None without them)."""
    from .. import data, latency

    serving = cfg.serving
    if not serving.calibration_runs:
        return None
    # one GPU among the candidates, the only one or named (checked where the config is read)
    gpu = data.resolve_gpu(serving.calibration_gpu or serving.gpus[0])
    runs = data.read_bench_runs(
        serving.calibration_runs, model=data.load_model(serving.model).name, gpu=gpu,
        tensor_parallel=serving.calibration_tensor_parallel, engine=serving.engine,
    )  # fmt: skip
    try:
        return {gpu: latency.calibrate(runs)}  # (by catalog id, as the engine sweep's gpus)
    except CapnbError as error:  # ("runs: ..." is the API's argument: the plan names its setting)
        if error.plan is None:
            error.plan = (
                f"calibration_runs = {serving.calibration_runs!r} (--calibrate; runs of "
                f"{serving.calibration_tensor_parallel} x {gpu}): {error}"
            )
        raise


def engine_settings(cfg: PlanConfig):
    """The serving engine the plan's engine model runs (:class:`capnb.records.EngineSettings`)."""
    from ..records import EngineSettings

    tokens = cfg.serving.max_num_batched_tokens or None  # (0: the engine's default)
    return EngineSettings(cfg.serving.engine, max_num_batched_tokens=tokens)


def _whole_prompts(cfg: PlanConfig, workload: xr.Dataset) -> None:
    """An error naming the config's field when the engine computes prompts whole and one is too long.

    Without chunked prefill (TGI, TensorRT-LLM, vLLM V0 at short contexts) a prompt is computed in
    one step of at most ``max_num_batched_tokens`` tokens, and the engine refuses a longer one.
    Resolved at the model's context, the ``max_model_len`` the engine model runs (vLLM V0's
    defaults follow it: chunks of 512 past 32K tokens, else the context whole).
    """
    from .. import data
    from ..latency import _engine
    from ..records import BLOCK_SIZE

    context = data.load_model(cfg.serving.model).context_tokens
    at_context = dataclasses.replace(
        engine_settings(cfg), max_model_len=int(context) if context else None
    )
    settings = at_context.resolve(gpu=data.resolve_gpu(cfg.serving.gpus[0]))
    prompt = workload.prompt_tokens.values.astype(np.int64)
    # (without a prefix cache's hits: the sweep's own check counts them)
    longest = _engine.longest_over_budget(prompt, np.zeros_like(prompt), settings,
                                          settings.block_size or BLOCK_SIZE)  # fmt: skip
    if not longest:
        return
    from ._servers import server_of

    budget = settings.max_num_batched_tokens
    said = "set" if cfg.serving.max_num_batched_tokens else "its default"
    raise InputError(
        f"engine = {cfg.serving.engine!r} computes a prompt whole, in one step of at most "
        f"{budget:,} tokens ({said}), but the workload's longest prompt has {longest:,} tokens: "
        f"set [serving] max_num_batched_tokens = {longest} or more (the server's "
        f"{server_of(cfg.serving.engine).step_tokens}; the plan's serve commands and pods then "
        "carry it), or plan on shorter prompts"
    )


def own_calibrations(cap: xr.Dataset) -> dict[str, dict]:
    """``{gpu: Calibration's fields}`` the capacity step priced on the user's runs ({}: none)."""
    return json.loads(cap.attrs.get("own_calibrations", "{}"))


def own_calibration_of(cap: xr.Dataset, gpu: str):
    """The calibration the capacity step priced ``gpu`` on from the user's runs (None: bundled)."""
    from ..latency.calibration import Calibration

    values = own_calibrations(cap).get(gpu)
    return None if values is None else Calibration(**values)


def _capacity(cfg: PlanConfig, source, target_qps, buffer_qps):
    from .. import capacity, data
    from ..latency import validate as latency_validate

    # which latency model the held-out figures favour for each of the SLA's metrics
    choices = {m: latency_validate.preferred_model(m) for m in cfg.sla.bounds}
    kind, analytic_metrics = cfg.serving.latency, ()
    if kind == "auto":  # each bound on the model its metric's held-out error prefers
        analytic_metrics = tuple(m for m, c in choices.items() if c["model"] == "analytic")
        kind = "model" if len(analytic_metrics) == len(choices) else "engine"
    if cfg.serving.calibration_runs and kind != "engine":
        raise InputError(
            f"calibration_runs = {cfg.serving.calibration_runs!r} calibrates the serving-engine "
            f"model; latency = {cfg.serving.latency!r} does not use it (set latency = 'engine')"
        )
    if cfg.serving.prefix_cache_share > 0 and kind != "engine":
        raise InputError(
            f"prefix_cache_share = {cfg.serving.prefix_cache_share:g} needs latency = 'engine' (the "
            f"serving-engine model takes the hit rate; latency = {cfg.serving.latency!r} does not)"
        )

    workload, workload_from = _workload(cfg, source)
    seq_len = math.ceil(float((workload.prompt_tokens + workload.output_tokens).mean()))
    if kind == "model":

        def analytic_sweep(sla):
            return capacity.sweep(
                cfg.serving.model, list(cfg.serving.gpus), list(cfg.serving.tensor_parallel), seq_len, sla,
                workload=workload, target_qps=target_qps, buffer_qps=buffer_qps,
                accounting=cfg.serving.accounting,
            ).squeeze(["model", "seq_len"], drop=False)  # fmt: skip

        result = analytic_sweep(cfg.sla)
        ratios = capacity.band_ratios(cfg.sla, model="analytic")
        if ratios:  # the answer's band: the analytic model's held-out error, bound by bound
            result = capacity.band(
                result,
                analytic_sweep(capacity.scaled_sla(cfg.sla, ratios, "high")),
                analytic_sweep(capacity.scaled_sla(cfg.sla, ratios, "low")),
                ratios,
            )
        result.attrs["latency_source"] = "the calibrated analytic model"
    elif kind == "engine":
        _whole_prompts(cfg, workload)
        blocks, own = None, _own_calibration(cfg)
        if cfg.serving.prefix_cache_share > 0:
            blocks = _blocks(cfg, workload_from)
        result = capacity.sweep_engine(
            cfg.serving.model,
            list(cfg.serving.gpus),
            list(cfg.serving.tensor_parallel),
            workload,
            cfg.sla,
            target_qps,
            buffer_qps=buffer_qps,
            prefix_cache_share=cfg.serving.prefix_cache_share,
            blocks=blocks,
            seed=cfg.traffic.seed,
            analytic_metrics=analytic_metrics,
            calibration=own,
            settings=engine_settings(cfg),
        )
        if own:  # the GPUs priced on the user's own runs: their error is the own-run one, and
            # the later steps on them (arrivals, prefill/decode pools) price them so too
            result.attrs["own_calibrations"] = json.dumps(
                {gpu: dataclasses.asdict(cal) for gpu, cal in own.items()}
            )
    else:
        if cfg.serving.latency in data.list_latency_curves():
            curve = data.load_latency_curve(cfg.serving.latency)
            where = f"the bundled measured curve {cfg.serving.latency}"
            _same_configuration(cfg, curve)
        else:
            if len(cfg.serving.gpus) != 1 or len(cfg.serving.tensor_parallel) != 1:
                raise InputError(
                    f"latency = {cfg.serving.latency!r}: measured latencies hold for the one GPU and "
                    "tensor-parallel degree they were measured on; set gpus = [that GPU] and "
                    f"tensor_parallel = [its degree] (now {list(cfg.serving.gpus)} and "
                    f"{list(cfg.serving.tensor_parallel)})"
                )
            curve = data.read_benchmark(
                cfg.serving.latency,
                model=data.load_model(cfg.serving.model).name,
                gpu=data.resolve_gpu(cfg.serving.gpus[0]),
                tensor_parallel=int(cfg.serving.tensor_parallel[0]),
            )
            from ..data._benchmarks import FORMAT_WORDS

            read = FORMAT_WORDS[curve.attrs["format"]]
            where = f"measured latencies ({read}) at {cfg.serving.latency}"
        _holds_longest(cfg, workload, workload_from)
        result = capacity.plan(
            curve,
            cfg.sla,
            target_qps,
            buffer_qps=buffer_qps,
            accounting=cfg.serving.accounting,
            seq_len=seq_len,  # memory holds the plan's traffic, as the memory step checks it
        )
        result.attrs["latency_source"] = where
        lengths = _lengths_note(curve, workload, workload_from, seq_len)
        if lengths:
            from ..data import _curve

            _curve.add_note(result, lengths)
    # the memory accounting the options were sized with: the engine's KV budget is vLLM's
    result.attrs.setdefault("memory_accounting", cfg.serving.accounting)
    # the engine the options' commands start (the engine model's own, where it priced them)
    result.attrs["engine"] = cfg.serving.engine
    result.attrs["max_num_batched_tokens"] = cfg.serving.max_num_batched_tokens
    # the model each bound was checked on, and the one the held-out figures favour, said
    used = {"model": "analytic", "engine": "engine"}.get(kind, "measured")
    result.attrs["latency_models"] = json.dumps(
        {m: "analytic" if m in analytic_metrics else used for m in cfg.sla.bounds}
    )
    if cfg.serving.latency == "auto":
        result.attrs["latency_source"] = "per bound, the model its held-out error prefers: " + (
            ", ".join(f"{m.upper()} {c['model']}" for m, c in choices.items())
        )
        if kind == "engine":  # which engine it simulated (--engine), as latency = "engine" says
            from ..records import ENGINES

            engine = ENGINES[cfg.serving.engine]
            result.attrs["latency_source"] += f" (the serving-engine model of {engine})"
        if "own_calibration" in result.attrs:  # the engine priced a GPU on the user's runs
            result.attrs["latency_source"] += "; the engine " + result.attrs["own_calibration"]
        result.attrs["latency_choices"] = json.dumps({m: c["reason"] for m, c in choices.items()})
    preferred = {c["model"] for c in choices.values()}
    result.attrs["latency_model_preferred"] = (
        preferred.pop() if len(preferred) == 1
        else ", ".join(f"{m.upper()}: {c['model']}" for m, c in choices.items())
    )  # fmt: skip
    result.attrs["latency_model_preferred_reason"] = " ".join(
        f"{m.upper()}: {c['reason']}" for m, c in choices.items()
    )
    result.attrs["workload_trace"] = workload_from  # a bundled trace name or a file
    own = workload_from == cfg.traffic.trace
    result.attrs["workload_source"] = (
        f"the plan's own trace ({cfg.traffic.trace})" if own else workload_from
    )
    if not own and cfg.serving.workload == "auto":  # the lengths priced are not the trace's: why
        result.attrs["workload_source"] += (
            " (workload = 'auto': the plan's trace is a rate series, with no request lengths)"
            if "request" not in source.dims
            else " (workload = 'auto': the plan's request log has no prompt and output token "
            "columns; name them with [traffic] prompt_column and output_column if it has them "
            "under other names)"
        )
    return result, workload, seq_len


def _holds_longest(cfg: PlanConfig, workload, workload_from: str) -> None:
    """A measured curve's one configuration must hold the workload's longest request whole.

    vLLM rejects a request its KV cache cannot hold; the sweeps rule such an option out
    (``infeasible_memory``), and a measured curve has no other option: "infeasible".
    """
    from .. import data, memory

    longest = int((workload.prompt_tokens + workload.output_tokens).max())
    gpu, tp = data.resolve_gpu(cfg.serving.gpus[0]), int(cfg.serving.tensor_parallel[0])
    held = memory.max_concurrency(
        model=cfg.serving.model, gpu=gpu, tensor_parallel=tp, seq_len=longest,
        accounting=cfg.serving.accounting,
    ).max_concurrency  # fmt: skip
    if int(held.max()) < 1:
        raise PlanError(
            f"infeasible: {tp} x {gpu} cannot hold the workload's longest request ({longest:,} "
            f"tokens, prompt + output, from {workload_from}) whole, which vLLM would reject "
            f"({cfg.serving.accounting} accounting); measure a higher tensor parallelism or a GPU "
            "with more memory, or use a KV cache dtype of fp8"
        )


def _same_configuration(cfg: PlanConfig, curve) -> None:
    """A measured curve holds for the model, GPU and TP it was measured on: the config must say them."""
    from .. import data

    measured = (
        str(curve.attrs["model"]),
        str(curve.attrs["gpu"]),
        int(curve.attrs["tensor_parallel"]),
    )
    asked = (
        data.load_model(cfg.serving.model).name,
        [data.resolve_gpu(g) for g in cfg.serving.gpus],
        list(cfg.serving.tensor_parallel),
    )
    if asked != (measured[0], [measured[1]], [measured[2]]):
        raise InputError(
            f"latency = {cfg.serving.latency!r} was measured on {measured[0]} at {measured[2]} x "
            f"{measured[1]}; a measured curve holds for that configuration only: set model = "
            f"{measured[0]!r}, gpus = [{measured[1]!r}] and tensor_parallel = [{measured[2]}] "
            f"(now {cfg.serving.model!r}, {list(cfg.serving.gpus)} and "
            f"{list(cfg.serving.tensor_parallel)}), or plan with latency = 'model'"
        )


#: A benchmark's mean prompt or output length this far from the workload's is said in the plan.
LENGTHS_APART = 0.25


def _lengths_note(curve, workload, workload_from: str, seq_len: int) -> str:
    """What the plan says when a measured curve's lengths are not its traffic's ("" if close)."""
    measured = (curve.attrs.get("prompt_tokens"), curve.attrs.get("output_tokens"))
    if None in measured:
        return ""
    mine = (float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean()))
    if all(abs(m / w - 1) <= LENGTHS_APART for m, w in zip(measured, mine, strict=True)):
        return ""
    return (
        f"the benchmark measured {measured[0]:,.0f} prompt and {measured[1]:,.0f} output tokens "
        f"per request on average; the plan's workload ({workload_from}) averages "
        f"{mine[0]:,.0f} and {mine[1]:,.0f}: the latencies are the benchmark's, and memory is "
        f"checked at the workload's {seq_len:,} tokens per sequence"
    )


def _choose(cap: xr.Dataset, cfg: PlanConfig) -> xr.Dataset | None:
    """The capacity step's cheapest (gpu, tensor_parallel) over the day: one fleet type for it.

    None for a measured curve (one configuration); ``PlanError`` ("infeasible") when no option
    meets the SLA in every slot.
    """
    from .. import capacity, data

    if "gpu" not in cap.dims:  # a measured curve: one configuration
        return None
    model = data.load_model(cfg.serving.model).name  # a folder's config by its name, not its path
    over = ["slot"] if "slot" in cap.usd_per_hour.dims else []
    best = capacity.cheapest(cap, over=over)
    unpriced = str(best.unpriced_options.item()) if "unpriced_options" in best else ""
    if int(best.feasible_options) == 0 and unpriced:
        one = ", " not in unpriced
        raise PlanError(
            f"no price: {unpriced} meet{'s' if one else ''} {cfg.sla} for {model}, but the "
            "GPU catalog "
            f"has no usd_per_gpu_hour for {'it' if one else 'them'}, so no plan can be priced or "
            "ranked; add the price to your GPU catalog (docs/data.md: 'Your own GPU') or add a priced "
            "GPU to gpus"
        )
    if int(best.feasible_options) == 0:
        invalid = unshardable_degrees(cfg)
        reasons = sorted(set(np.asarray(cap.binding.values).ravel().tolist()))
        if reasons == ["no_data"]:  # not one option could be modelled: say why, not "relax"
            raise PlanError(f"no latency for any option: {unmodelled(cap)}")
        why = "; ".join([*invalid.values(), *filter(None, [unmodelled(cap)])])
        # where memory alone rules every option out, a looser SLA frees none of it
        memory_only = set(reasons) <= {"infeasible_memory", "invalid_tensor_parallel"}
        remedy = (
            "give GPUs with more memory or a higher tensor parallelism"
            if memory_only
            else "relax the SLA, add GPUs or tensor parallelism"
        )
        if memory_only and "seq_len" in cap.coords:
            from ..memory._footprint import smallest_degrees

            smallest = smallest_degrees(
                cfg.serving.model, cfg.serving.gpus, cfg.serving.tensor_parallel,
                int(cap.seq_len), accounting=str(cap.attrs.get("memory_accounting", "article")),
                vllm_version=cap.attrs.get("memory_vllm_version"),
            )  # fmt: skip
            remedy += f" ({smallest})" if smallest else ""
        raise PlanError(
            f"infeasible: no GPU in {list(cfg.serving.gpus)} at tensor parallelism "
            f"{list(cfg.serving.tensor_parallel)} meets {cfg.sla} for {model} "
            f"(bindings: {', '.join(reasons)}{f'; {why}' if why else ''}){_floors(cap, cfg)}; "
            f"{remedy}"
        )
    return best


def _floors(cap: xr.Dataset, cfg: PlanConfig) -> str:
    """Why latency rules every option out: per bound, the lowest latency any option starts at."""
    said = _floor_words(cap, cfg)
    return f": {'; '.join(said)}" if said else ""


def _floor_words(cap: xr.Dataset, cfg: PlanConfig) -> list[str]:
    """Per SLA bound, the lowest latency an option that misses it starts at, and which option."""
    if "latency_floor" not in cap or "binding_metric" not in cap:
        return []
    over = cap[["binding", "binding_metric", "latency_floor"]].reset_coords(drop=True)
    rows = over.to_dataframe().reset_index()
    rows = rows[(rows.binding == "infeasible_latency") & rows.latency_floor.notna()]
    said = []
    for metric, group in rows.groupby("binding_metric", sort=False):
        if metric not in cfg.sla.bounds:
            continue
        best = group.loc[group.latency_floor.idxmin()]
        option = f" ({int(best.tensor_parallel)} x {best.gpu})" if "gpu" in best else ""
        said.append(
            f"the lowest {cfg.sla.name} {metric.upper()} at one request in flight is "
            f"{words.latency(float(best.latency_floor))}{option}, over its bound of "
            f"{words.latency(cfg.sla.bounds[metric])}"
        )
    return said


def ruled_out(cap: xr.Dataset, cfg: PlanConfig) -> tuple[str, ...]:
    """The options a feasible plan ruled out by the SLA or by memory, per reason, in words.

    How many, and the nearest: by the SLA, the lowest latency one starts at (per bound); by
    memory, the options themselves (the first three).
    """
    if not {"gpu", "tensor_parallel"} <= set(cap.dims) or "binding" not in cap:
        return ()
    binding = cap.binding
    binding = binding.isel({d: 0 for d in binding.dims if d not in ("gpu", "tensor_parallel")})
    out = []
    missed = int((binding == "infeasible_latency").sum())
    if missed:
        floors = _floor_words(cap, cfg)
        out.append(
            f"{words.count(missed, 'option')} {'misses' if missed == 1 else 'miss'} the SLA"
            + (f" ({'; '.join(floors)})" if floors else "")
        )
    short = [
        f"{int(t)} x {g}"
        for g in binding.gpu.values
        for t in binding.tensor_parallel.values
        if str(binding.sel(gpu=g, tensor_parallel=t).item()) == "infeasible_memory"
    ]
    if short:
        named = ", ".join(short[:3]) + (f" and {len(short) - 3:,} more" if len(short) > 3 else "")
        out.append(f"{named} cannot hold the model and the workload's requests in memory")
    return tuple(out)


def unshardable_degrees(cfg: PlanConfig) -> dict[int, str]:
    """The config's tensor-parallel degrees that cannot shard its model, each with the reason."""
    from .. import data

    spec = data.load_model(cfg.serving.model)
    reasons = {int(tp): spec.valid_tensor_parallel(int(tp)) for tp in cfg.serving.tensor_parallel}
    return {tp: why for tp, why in reasons.items() if why}


def unmodelled(cap: xr.Dataset) -> str:
    """Why some options have no latency (binding ``no_data``), as the latency step said it.

    A degree that cannot shard the model is ``invalid_tensor_parallel`` on either sweep, said on
    its own (:func:`unshardable_degrees`).
    """
    if "no_data" not in np.asarray(cap.binding.values).ravel().tolist():
        return ""
    return (
        str(cap.attrs.get("unmodelled", "")) or "the latency model has no figures for some options"
    )


def _demand(cfg: PlanConfig, source, series: xr.Dataset) -> xr.DataArray:
    """Demand per simulation step, holes filled with the history's slot median.

    The elasticity step's rule (:func:`capnb.elasticity.prepare_demand`), with the baseline of the
    history itself (as worksheet 04 fits it): a hole is a window of the past, so the forecast
    carried forward to the coming week is not what it would have shown.
    """
    from .. import elasticity, forecast

    baseline = forecast.fit_baseline(series, slots=cfg.traffic.slots)
    return elasticity.prepare_demand(
        source, cfg.elasticity.step_s, baseline=baseline, scale=cfg.traffic.demand_scale
    )


def served_demand(demand: xr.DataArray, cap: xr.Dataset) -> xr.DataArray:
    """The demand the replay serves: smoothed over a request's time in an instance.

    :func:`capnb.elasticity.smooth_demand` over the operating point's mean latency (requests in
    flight over requests/s per instance, Little's law): an instance holds that many seconds of
    arrivals, so a second's clump of a request log is no breach.
    """
    from .. import elasticity

    latency = float(cap.operating_concurrency) / float(cap.per_instance_qps)
    return elasticity.smooth_demand(demand, latency)


def replay_hours(run: xr.Dataset) -> float:
    """Hours the replay ``run`` spans (its ``duration_s``, in s)."""
    return float(run.attrs["duration_s"]) / 3600.0


def per_month(hours: float) -> float:
    """A total over a replay of ``hours`` times this is a figure a month (730 h)."""
    return HOURS_PER_MONTH / hours


def budget_minutes(cfg: PlanConfig) -> float:
    """The plan's SLA-breach budget in minutes a month (its share of a 730-h month)."""
    return cfg.elasticity.breach_budget * HOURS_PER_MONTH * 60


def _first(values) -> object:
    """The first value of a variable (the chosen option's cell of a search without a slot)."""
    array = np.asarray(values.values if isinstance(values, xr.DataArray) else values)
    return array.ravel()[0].item()


def latency_model_of(cap, metric: str) -> str:
    """``analytic``, ``engine`` or ``measured``: where the capacity step took ``metric``'s latencies."""
    models = json.loads(cap.attrs["latency_models"])
    return models.get(metric) or next(iter(models.values()))


def arrivals_of(cfg: PlanConfig, cap: xr.Dataset, chosen: xr.Dataset, gpu: str, tp: int,
                workload: xr.Dataset) -> xr.Dataset | None:  # fmt: skip
    """The chosen instance under Poisson arrivals (:func:`capnb.capacity.arrivals`), or None.

    Only where the serving-engine model priced the binding bound: it is the model that simulates
    arrivals, and its closed loop is the one the per-instance rate came from (with a prefix
    cache, its hit rate and the KV tokens it leaves to running sequences).
    """
    from .. import capacity

    metric = str(_first(chosen.binding_metric)) if "binding_metric" in chosen else ""
    qps = float(_first(chosen.per_instance_qps))
    if latency_model_of(cap, metric) != "engine" or not qps > 0:
        return None
    from ..records import Deployment

    deployment = Deployment(cfg.serving.model, gpu, int(tp))
    cache = {}  # the prefix cache the closed loop priced the rate with: its hits, its KV left
    if cfg.serving.prefix_cache_share > 0:
        cache = {"prefix_hit_rate": float(_first(chosen.prefix_hit_rate)),
                 "kv_cache_tokens": int(_first(chosen.running_tokens))}  # fmt: skip
    return capacity.arrivals(deployment, workload, sla=cfg.sla, per_instance_qps=qps,
                             seed=cfg.traffic.seed, calibration=own_calibration_of(cap, gpu),
                             settings=engine_settings(cfg), **cache)  # fmt: skip


def forecast_load(fc: xr.Dataset, cfg: PlanConfig, per_instance: float) -> float:
    """The forecast's busiest slot at the plan's quantile over one instance's requests/s (1)."""
    return float(fc.target_qps.sel(traffic_quantile=cfg.traffic.traffic_quantile).max()) / (
        per_instance
    )


def forecast_fleet(fc: xr.Dataset, cfg: PlanConfig, per_instance: float) -> int:
    """Instances the forecast's busiest slot needs at the plan's quantile (floors are shares of it)."""
    return max(1, int(instances_needed(forecast_load(fc, cfg, per_instance), 1.0)))


def _elasticity(
    cfg: PlanConfig,
    demand: xr.DataArray,
    chosen_cap: xr.Dataset,
    gpu: str,
    tensor_parallel: int,
    fc: xr.Dataset,
    series: xr.Dataset,
    held_out: bool = True,
    arrivals: xr.Dataset | None = None,
):
    """The elasticity step: the policy grid swept over the trace, and the policy chosen.

    The policy is chosen out of sample (:func:`capnb.plan._origins.rolling`: by rolling origins
    inside the trace, on windows each choice never saw) when ``held_out`` and the trace leaves
    held-out windows; otherwise on the trace itself (:func:`capnb.elasticity.recommend`, which
    tries the predictive policy on the trace's later half first), and the plan says so. Floors
    are shares of the forecast's busiest-slot fleet (:data:`capnb.plan._origins.FLOOR_SHARES`).
    ``arrivals``: the chosen instance under Poisson arrivals (:func:`arrivals_of`), or None;
    given, only policies that run instances within its ``headroom`` are chosen
    (:func:`capnb.plan._origins.eligible`).
    Returns ``(demand, sweep, advice, estimate, estimated, cold, ahead, rolling)``; ``rolling``
    is the rolling-origin record, or why there is none.
    """
    from .. import elasticity
    from ..elasticity import coldstart
    from ._origins import FLOOR_SHARES, Config, rolling

    per_instance = float(chosen_cap.per_instance_qps)
    demand = served_demand(demand, chosen_cap)
    if cfg.elasticity.cold_start_s == "estimate":
        estimate = coldstart.estimate(cfg.serving.model, gpu, tensor_parallel=tensor_parallel)
        estimated = float(estimate.cold_start_s.squeeze())
    else:
        estimate, estimated = None, float(cfg.elasticity.cold_start_s)
    cold = coldstart.in_whole_steps(estimated, cfg.elasticity.step_s)  # the simulator's steps
    fleet = forecast_fleet(fc, cfg, per_instance)
    floors = sorted({Config("", 0, 0, 0, share).floor(fleet) for share in FLOOR_SHARES})
    ahead = predictive_forecast(demand, fc) if "predictive" in cfg.elasticity.policies else None
    settings = dict(
        per_instance_qps=per_instance,
        step_s=cfg.elasticity.step_s,
        cold_start_s=cold,
        tolerance_s=cfg.elasticity.tolerance_s,
        gpus_per_instance=tensor_parallel,
        gpu=gpu,
    )
    scaling = cfg.elasticity
    sweep = elasticity.sweep(
        demand, policy=list(scaling.policies), scale_up_threshold=list(scaling.scale_up_threshold),
        cooldown_s=list(scaling.cooldown_s), buffer_instances=list(scaling.buffer_instances),
        min_instances=floors, **settings, forecast=ahead,
    )  # fmt: skip
    headroom = None if arrivals is None else float(arrivals.headroom)
    load = forecast_load(fc, cfg, per_instance)
    record = (
        rolling(cfg, series, demand, settings, elasticity.choose_held_out, headroom, load)
        if held_out and cfg.elasticity.backtest_days
        else "backtest_days = 0: no held-out window was asked for"
    )
    if isinstance(record, str):
        within = _within_headroom(sweep, headroom)
        advice = elasticity.recommend(
            within,
            breach_budget=cfg.elasticity.breach_budget,
            held_out=lambda: _held_out(cfg, demand, series, settings),
        )
        advice.reasons.insert(0, f"Chosen on the trace itself, not out of sample: {record}.")
    else:
        c = record.choice
        selection = {"policy": c.policy, "scale_up_threshold": c.scale_up_threshold,
                     "cooldown_s": c.cooldown_s, "min_instances": c.floor(fleet),
                     "buffer_instances": c.buffer_instances}  # fmt: skip
        selection = {k: v for k, v in selection.items() if k in sweep.dims}
        advice = elasticity.recommendation_for(
            sweep, selection, breach_budget=cfg.elasticity.breach_budget,
            reasons=[f"Chosen out of sample: {record.choice_why}."],
        )  # fmt: skip
    if headroom is not None and headroom < 1:
        advice.reasons.append(
            f"Among the policies that run an instance up to {headroom:.0%} of its closed-loop "
            f"{per_instance:.3g} requests/s, the share it serves within the SLA under Poisson "
            "arrivals (the arrivals check), where any of the swept ones does."
        )
    return demand, sweep, advice, estimate, estimated, cold, ahead, record


def _within_headroom(sweep: xr.Dataset, headroom: float | None) -> xr.Dataset:
    """The sweep's scale-up thresholds up to the arrivals ``headroom`` (all, when none is)."""
    if headroom is None or "scale_up_threshold" not in sweep.dims:
        return sweep
    keep = sweep.scale_up_threshold.values <= headroom + 1e-9
    return sweep.isel(scale_up_threshold=np.flatnonzero(keep)) if keep.any() else sweep


def chosen_policy(cfg: PlanConfig, selection: dict):
    """The elasticity step's chosen run as a :class:`capnb.elasticity.Policy` record.

    ``selection`` is the run's cell of the sweep (``Recommendation.selection``); a setting the
    sweep has no dim for (the policy, when the config names one) is the config's.
    """
    from .. import elasticity

    grid = cfg.elasticity
    return elasticity.Policy.from_settings({
        "policy": grid.policies[0], "scale_up_threshold": grid.scale_up_threshold[0],
        "cooldown_s": grid.cooldown_s[0], "buffer_instances": grid.buffer_instances[0], **selection,
    })  # fmt: skip


def predictive_forecast(demand: xr.DataArray, fc: xr.Dataset) -> xr.DataArray:
    """The forecast the predictive policy reads: each step's slot at its default quantile."""
    from .. import elasticity

    return elasticity.forecast_demand(demand, fc)


def _held_out(cfg: PlanConfig, demand, series, settings):
    """Every policy swept on the trace's later half, its forecast and floors from the first half.

    The predictive policy is recommended only if it wins there (:func:`capnb.elasticity.recommend`,
    which calls this only when it would be chosen). The floors swept are shares of the first
    half's P99 fleet (:func:`capnb.elasticity.policy_grid`), as the forecast is fitted on it: none
    is sized on the half it is scored on. The cut is at a whole day; a trace of less than two days
    has nothing to hold out (None: the policy is not recommended).
    """
    from .. import elasticity, forecast

    day = round(86400 / cfg.elasticity.step_s)
    cut = demand.size // day // 2 * day
    if cut == 0 or series is None:
        return None
    split = demand.time.values[cut]
    baseline = forecast.fit_baseline(
        series.isel(time=np.flatnonzero(series.time.values < split)), slots=cfg.traffic.slots
    )
    later = demand.isel(time=slice(cut, None))
    grid = elasticity.policy_grid(
        demand.isel(time=slice(None, cut)),
        settings["per_instance_qps"],
        scale_up_threshold=list(cfg.elasticity.scale_up_threshold),
        cooldown_s=list(cfg.elasticity.cooldown_s),
        buffer_instances=list(cfg.elasticity.buffer_instances),
    )
    return elasticity.sweep(
        later,
        policy=list(cfg.elasticity.policies),
        **grid,
        **settings,
        forecast=predictive_forecast(later, baseline),
    )


def _busiest_stretch(values: np.ndarray, steps: int, seen: np.ndarray | None = None) -> int | None:
    """First index of the ``steps`` consecutive values of the highest sum.

    Missing values count as 0. With ``seen`` (whether each value was observed), only stretches
    observed throughout count, and None says there is none; without it a span shorter than
    ``steps`` starts at 0.
    """
    filled = np.nan_to_num(np.asarray(values, dtype=float), nan=0.0)
    if seen is None:
        if filled.size <= steps:
            return 0
        seen = np.ones(filled.size, bool)
    if seen.size < steps:
        return None
    holes = np.concatenate(([0], np.cumsum(~seen)))
    whole = (holes[steps:] - holes[:-steps]) == 0  # whole[i]: values[i : i + steps] observed
    if not whole.any():
        return None
    running = np.concatenate(([0.0], np.cumsum(filled)))
    sums = np.where(whole, running[steps:] - running[:-steps], -np.inf)  # values[i : i + steps]
    return int(np.argmax(sums))


def _burst_test(demand: xr.DataArray, cfg: PlanConfig, run_settings: dict, model, *,
                observed: np.ndarray):  # fmt: skip
    """The chosen policy under one burst of the plan's burst model, at the trace's busiest hour.

    The trace replays only the bursts it happened to contain; this injects one burst of the
    middle size of ``model`` (:func:`burst_model`: its mean factor for its mean length) over the
    busiest stretch of the burst's length in the trace's middle day (the highest mean demand, not
    the one busiest step: a request log's per-second counts peak on noise), to show what the
    elastic buffer must absorb. None when the model draws no bursts.

    ``observed``: whether each step of ``demand`` was observed (a hole holds its slot's median,
    not the trace): the burst lands on observed steps only, in the middle day, or where that day
    has no observed stretch as long, the trace's busiest one; a trace with none counts its filled
    steps as no demand.
    """
    from .. import elasticity

    if model.rate_per_month == 0:
        return None
    multiplier, seconds = float(np.mean(model.multiplier)), float(np.mean(model.duration_s))
    values = demand.values.copy()
    seen = np.asarray(observed, dtype=bool)
    if seen.shape != values.shape:
        raise ValueError(f"observed: {seen.size} steps for a demand of {values.size}")
    per_day = round(86400 / cfg.elasticity.step_s)
    steps = max(1, round(seconds / cfg.elasticity.step_s))
    middle = (values.size // per_day // 2) * per_day
    offset, stop = (
        (middle, middle + per_day) if values.size >= middle + per_day else (0, values.size)
    )
    start = _busiest_stretch(values[offset:stop], steps, seen[offset:stop])
    start = offset + start if start is not None else _busiest_stretch(values, steps, seen)
    if start is None:
        start = _busiest_stretch(np.where(seen, values, np.nan), steps)
    values[start : start + steps] *= multiplier
    run = elasticity.simulate(demand.copy(data=values), **run_settings)
    run.attrs.update(
        burst_start=str(demand.time.values[start]),
        burst_multiplier=multiplier,
        burst_hours=seconds / 3600,
        burst_model=model.describe(),
    )
    return run

"""The capacity step over GPUs and tensor-parallel degrees with engine curves (and a prefix cache).

:func:`capnb.capacity.sweep` searches analytic curves in numba kernels; this does the same search
on curves from the serving-engine simulation (:func:`capnb.latency.engine`), one curve per
(GPU, degree), each read by :func:`capnb.capacity.plan`. With a prefix cache, each instance's KV
budget (vLLM's accounting) is split first (:func:`capnb.memory.split_kv`): the cache's share is
taken from the running sequences, and the hit rate replayed from the trace's block hashes goes to
the engine, which skips that share of each prompt's prefill.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import xarray as xr

from .. import _validate, glossary
from ..errors import InfeasibleError, InputError
from ..records import SLA, VLLM_VERSION, Deployment, EngineSettings, expect_deployment
from ._band import BAND_ATTRS

__all__ = ["engine_curve_of", "sweep_engine"]

#: Concurrency points per engine curve: a geometric grid from 1 to what memory holds (at most 512).
POINTS = 10
MOST_SEQUENCES = 512


def engine_curve(deployment, workload, *, fits, running_tokens, hit_rate, requests, seed,
                 settings=None, calibration=None):  # fmt: skip
    """The engine's latency curve for one deployment, as every engine-curve search in capnb runs it.

    ``fits`` sequences fit in the running share of the KV budget (``running_tokens``); the curve
    covers a geometric grid of :data:`POINTS` concurrencies from 1 to ``fits`` (at most
    :data:`MOST_SEQUENCES`), and the engine may run all of them at once (``max_num_seqs``), so
    memory, not a scheduler limit, bounds the search. ``hit_rate``: the prefix cache's share of
    prompt tokens not computed. ``settings``: the :class:`~capnb.records.EngineSettings` (None:
    vLLM V1's defaults); its ``max_num_seqs`` is the grid's top, or the one given where lower
    (a server started with that limit: the requests above it wait). ``calibration``:
    the engine's (None: the bundled one of the GPU and engine; :func:`capnb.latency.calibrate`
    makes one from the user's own runs).
    """
    from .. import latency

    top = min(int(fits), MOST_SEQUENCES)
    grid = np.unique(np.round(np.geomspace(1, top, num=min(top, POINTS))).astype(np.int64))
    settings = settings or EngineSettings()
    given = settings.max_num_seqs  # a server's own limit: the requests past it wait
    settings = replace(settings, max_num_seqs=min(int(given), top) if given else top)
    return latency.engine(
        deployment, workload, concurrency=grid.tolist(), requests=requests,
        kv_cache_tokens=int(running_tokens), prefix_hit_rate=float(hit_rate), seed=seed,
        settings=settings, calibration=calibration,
    )  # fmt: skip


def _sequences(deployment: Deployment, kv_tokens: int, seq_len: int,
               settings: EngineSettings | None) -> int:  # fmt: skip
    """Sequences of ``seq_len`` tokens ``kv_tokens`` of KV cache hold, in whole blocks.

    As the engine holds them (:func:`capnb.latency._engine.held_sequences`: vLLM's blocks, and
    its hybrid groups for a model with sliding-window layers), which is what
    :func:`capnb.memory.max_concurrency` counts with vLLM's accounting.
    """
    from ..latency import _engine

    return _engine.held_sequences(deployment, kv_tokens, seq_len, settings)


def _holds(deployment: Deployment, tokens: int, kv_tokens: int,
           settings: EngineSettings | None) -> bool:  # fmt: skip
    """Whether the engine's pool of ``kv_tokens`` holds a request of ``tokens`` whole."""
    from ..latency import _engine

    return _engine.held_request(deployment, tokens, kv_tokens, settings)


def _kv_tokens(model, gpu, tp: int, seq_len: int, vllm_version: str, *, kv_dtype: str = "auto",
               weight_dtype: str | None = None, settings: EngineSettings | None = None) -> int:  # fmt: skip
    """The KV cache tokens vLLM's accounting gives one instance (0 when nothing fits).

    At the deployment's dtypes: FP8 weights leave more memory to the cache, and an FP8 cache
    holds twice the tokens (defaults: the model's own weights, ``"auto"`` cache). Counted as the
    engine of ``settings`` stores the layers (vLLM V1's hybrid groups, or full length:
    :func:`capnb.latency._engine.hybrid_engine`).
    """
    from .. import data, memory
    from ..latency import _engine

    engine = (settings or EngineSettings()).engine
    hybrid = _engine.hybrid_engine(data.load_model(model), engine)
    # profiled as the server runs on this GPU; an engine that stores every layer whole: the
    # bucket's count at full length
    acct = _engine.served_accounting(str(gpu), settings, hybrid=hybrid, vllm_version=vllm_version)
    budget = memory.max_concurrency(
        model=model, gpu=gpu, tensor_parallel=int(tp), seq_len=seq_len, accounting=acct,
        kv_dtype=kv_dtype, weight_dtype=weight_dtype,
    )  # fmt: skip
    return int(budget.kv_cache_tokens.item()) if np.isfinite(budget.kv_cache_tokens) else 0


def engine_curve_of(deployment, workload: xr.Dataset, *, requests: int = 1000, seed: int = 0,
                    settings: EngineSettings | None = None, vllm_version: str = VLLM_VERSION,
                    calibration=None) -> xr.Dataset:  # fmt: skip
    """The serving-engine curve a plan prices one deployment on (no prefix cache).

    The same curve :func:`sweep_engine` searches: up to the sequences of the workload's mean
    length that vLLM's KV cache accounting fits on the deployment (at most
    :data:`MOST_SEQUENCES`), on its grid of concurrencies; so a worksheet that draws it finds the
    plan's safe concurrency. ``attrs["memory_limit"]``: those sequences. A KV cache that holds no
    sequence is an :class:`~capnb.errors.InputError`. ``calibration``: the engine's (None: the
    bundled one), as :func:`sweep_engine` prices a GPU calibrated on the user's own runs.
    """
    expect_deployment(deployment)  # (its degree was checked when it was made)
    model, gpu, tp = deployment.model, deployment.gpu, int(deployment.tensor_parallel)
    seq_len = math.ceil(float((workload.prompt_tokens + workload.output_tokens).mean()))
    dtypes = {"kv_dtype": deployment.kv_dtype, "weight_dtype": deployment.weight_dtype}
    kv = _kv_tokens(model, gpu, tp, seq_len, vllm_version, settings=settings, **dtypes)
    served = _served(gpu, settings, _sequences(deployment, kv, seq_len, settings))
    if served is not settings:  # the server runs more at once than it was profiled with
        kv = _kv_tokens(model, gpu, tp, seq_len, vllm_version, settings=served, **dtypes)
    fits = _sequences(deployment, kv, seq_len, settings)
    if fits < 1:
        raise InputError(
            f"{model} on {tp} x {gpu}: its KV cache ({kv:,} tokens) holds no sequence of the "
            f"workload's mean length ({seq_len:,} tokens)"
        )
    curve = engine_curve(deployment, workload, fits=fits, running_tokens=kv, hit_rate=0.0,
                         requests=requests, seed=seed, settings=settings,
                         calibration=calibration)  # fmt: skip
    curve.attrs["memory_limit"] = int(fits)
    return curve


def _none_run(spec, tensor_parallel, unpriced: list[str]) -> InputError:
    """The error when no option runs and memory ruled none out: the degrees, the figures missing.

    Every degree that does not shard the model (its heads, its experts) is said; when none does,
    that is the error (not a KV cache too small, which no option was asked to hold).
    """
    invalid = [r for r in (spec.valid_tensor_parallel(int(tp)) for tp in tensor_parallel) if r]
    if len(invalid) == len(tensor_parallel):
        return InputError(
            f"tensor_parallel: no degree in {list(tensor_parallel)} shards {spec.name}: "
            + "; ".join(invalid)
        )
    return InputError("; ".join([*unpriced, *invalid]))


def _none_hold(model, gpus, tensor_parallel, seq_len, share, longest, too_long, vllm_version,
               settings):  # fmt: skip
    """The error when no option's KV cache holds one sequence (or the longest request) whole.

    ``too_long``: the options whose cache holds a sequence of the mean length but not the
    longest request; where there are any, that request is what no option holds.
    """
    from .. import data
    from ..latency import _engine
    from ..memory._footprint import smallest_degrees

    spec = data.load_model(model)
    name = spec.name
    where = f"no GPU in {list(gpus)} at tensor parallelism {list(tensor_parallel)}"
    # the degrees vLLM cannot load were not tried: say so, not that memory ruled them out
    unloadable = [r for r in map(spec.valid_tensor_parallel, map(int, tensor_parallel)) if r]
    cache = f"with {share:.0%} of the KV budget for a prefix cache"
    if too_long:
        return InfeasibleError(
            f"infeasible: {where} can hold the workload's longest request ({longest:,} tokens, "
            f"prompt + output) of {name} whole ({cache}), and vLLM rejects a request its KV "
            f"cache cannot hold ({'; '.join(too_long)} KV cache tokens: each holds a "
            f"{seq_len:,}-token sequence of the mean length, not that one): give GPUs with more "
            "memory, a higher tensor parallelism, or a KV cache dtype of fp8"
        )
    # each GPU's KV budget as the engine counted it: its server's profile run (256 sequences on
    # an L4, where the bucket's 1,024 would leave 70B's weights no room at 8 x L4)
    hybrid = _engine.hybrid_engine(data.load_model(model), (settings or EngineSettings()).engine)
    served = {g: _engine.served_accounting(str(g), settings, hybrid=hybrid,
                                           vllm_version=vllm_version) for g in gpus}  # fmt: skip
    smallest = smallest_degrees(
        model, gpus, tensor_parallel, seq_len, accounting=served, vllm_version=vllm_version
    )
    return InfeasibleError(
        f"infeasible: {where} can hold one {seq_len:,}-token sequence of {name} ({cache}): give "
        "GPUs with more memory or a higher tensor parallelism"
        + (f" ({smallest})" if smallest else "")
        + (f"; not tried: {'; '.join(unloadable)}" if unloadable else "")
    )


def sweep_engine(
    model,
    gpus,
    tensor_parallel,
    workload: xr.Dataset,
    sla,
    target_qps,
    *,
    buffer_qps=None,
    metric: str = "e2e",
    quantile: float = 0.99,
    prefix_cache_share: float = 0.0,
    blocks: xr.Dataset | None = None,
    requests: int = 1000,
    seed: int = 0,
    vllm_version: str = VLLM_VERSION,
    settings: EngineSettings | None = None,
    latency_band="held-out",
    analytic_metrics: tuple[str, ...] = (),
    calibration: Mapping | None = None,
) -> xr.Dataset:
    """:func:`plan` on an engine curve for every (gpu, tensor_parallel), stacked over both.

    Parameters
    ----------
    model, gpus, tensor_parallel
        One model; candidate GPUs and degrees (lists). A grid, so not one
        :class:`~capnb.records.Deployment`: each (GPU, degree) is one deployment, made here.
    workload
        Prompt and output lengths (:func:`capnb.latency.workload`).
    sla, target_qps, buffer_qps, metric, quantile
        As in :func:`plan` (``sla`` seconds of ``metric`` or a :class:`capnb.records.SLA`;
        ``target_qps`` a number or a DataArray, e.g. over ``slot``).
    prefix_cache_share
        Share of each instance's KV budget held by a prefix cache, in [0, 1).
    blocks
        The trace's block hashes (:func:`capnb.data.load_block_hashes`); needed when
        ``prefix_cache_share > 0``.
    requests, seed
        Requests simulated per curve point, and their seed.
    vllm_version
        Whose KV budget the engine and the split use (vLLM's accounting).
    settings
        The serving engine simulated and its scheduling (:class:`capnb.records.EngineSettings`;
        None: vLLM V1's defaults); ``max_num_seqs``: what memory holds, or the lower one given.
    latency_band
        ``"held-out"`` (default): every answer carries its band, from the engine model's held-out
        error on the SLA's metric (:func:`capnb.latency.validate.error_band`;
        :func:`capnb.capacity.band`); ``(low, high)``: that ratio measured / predicted; None: no
        band.
    analytic_metrics
        Metrics whose latencies come from the calibrated analytic model
        (:func:`capnb.latency.analytic`) at the engine curve's concurrencies instead of the
        engine's, with the analytic model's held-out band: what a plan with ``latency = "auto"``
        asks for the bounds the held-out record prefers the analytic model on
        (:func:`capnb.latency.validate.preferred_model`).
    calibration
        ``{gpu: Calibration}``: the engine calibrated on the user's own runs on that GPU
        (:func:`capnb.latency.calibrate`), which prices it at every degree; its answers' band is
        the own-run held-out error (``"own-run"`` of :func:`capnb.latency.validate.error_band`).
        Other GPUs: the bundled calibration. None: the bundled one everywhere. The band attrs
        are a bundled-priced option's; ``own_band_ratios`` says the own-run band.

    Returns
    -------
    xarray.Dataset
        :func:`plan`'s variables over (``gpu``, ``tensor_parallel``) (then the target's dims);
        options that cannot run (the degree does not shard the model, or no sequence fits) are
        NaN with ``binding`` saying why. ``prefix_hit_rate`` and ``running_tokens`` (the
        KV cache tokens left to running sequences: vLLM's ``kv_cache_tokens`` less the prefix
        cache's share) and ``profiled_sequences`` (the sequences vLLM V1's profile run sizes that
        cache at: the server's, or the option's where it runs more at once) per option. Attrs:
        ``latency_source``, ``prefix_cache_share``, ``memory_accounting`` (``"vllm"``) and
        ``memory_vllm_version``: the KV budget's.
    """
    from .. import data
    from ._safe import plan

    share = float(prefix_cache_share)
    if not (math.isfinite(share) and 0.0 <= share < 1.0):
        raise InputError(f"prefix_cache_share must be in [0, 1), got {prefix_cache_share!r}")
    if share > 0 and blocks is None:
        raise InputError(
            "prefix_cache_share > 0 needs the trace's block hashes (blocks=, "
            "capnb.data.load_block_hashes): the hit rate is replayed from them"
        )

    spec = data.load_model(model)
    gpus, tensor_parallel = _options(gpus, tensor_parallel, sla, metric, workload)
    lengths = workload.prompt_tokens + workload.output_tokens
    seq_len = math.ceil(float(lengths.mean()))
    longest = int(lengths.max())  # vLLM rejects a request its KV cache cannot hold whole
    ratio = _band_ratio(latency_band, sla, metric, analytic_metrics)
    own = _own_calibrations(calibration, gpus)
    own_ratio = (
        _band_ratio(latency_band, sla, metric, analytic_metrics, model="own-run") if own else None
    )
    rows, too_long, unpriced = {}, [], []
    for gpu in gpus:
        for tp in tensor_parallel:
            reason = spec.valid_tensor_parallel(int(tp))
            if reason:
                rows[(gpu, tp)] = ("invalid_tensor_parallel", None)
                continue
            missing = _missing_figures(spec, gpu, int(tp))
            if missing:  # as the analytic sweep: no latency for this option, the rest go on
                rows[(gpu, tp)] = ("no_data", None)
                unpriced.extend(m for m in missing if m not in unpriced)
                continue
            hit, running, profiled = _running_budget(model, gpu, tp, seq_len, vllm_version,
                                                     settings, share, blocks)  # fmt: skip
            option = Deployment(model, gpu, int(tp))
            fits = _sequences(option, running, seq_len, settings)
            whole = _holds(option, longest, running, settings)
            if fits >= 1 and not whole:  # the workload's longest request: said in the notes
                too_long.append(f"{tp} x {gpu}: {running:,}")
            if fits < 1 or not whole:
                rows[(gpu, tp)] = ("infeasible_memory", (hit, running))
                continue
            curve = engine_curve(option, workload, fits=fits,
                                 running_tokens=running, hit_rate=hit, requests=requests,
                                 seed=seed, settings=settings, calibration=own.get(gpu))  # fmt: skip
            curve = _analytic_metrics(curve, analytic_metrics, model, gpu, tp, workload)
            banded = (own_ratio if gpu in own else ratio) or None
            result = plan(curve, sla, target_qps, buffer_qps=buffer_qps, metric=metric,
                          quantile=quantile, memory_limit=int(fits), latency_band=banded)  # fmt: skip
            rows[(gpu, tp)] = ("ok", _with_budget(result, hit, running, profiled))
    template = next((r for kind, r in rows.values() if kind == "ok"), None)
    if template is None and all(kind != "infeasible_memory" for kind, _ in rows.values()):
        raise _none_run(spec, tensor_parallel, unpriced)  # memory ruled none out: say what did
    if template is None:
        raise _none_hold(model, gpus, tensor_parallel, seq_len, share, longest, too_long,
                         vllm_version, settings)  # fmt: skip
    out = _stacked(rows, gpus, tensor_parallel, template)
    _say_left_out(out, unpriced, too_long, longest)
    if ratio:
        out.attrs.update(_band_attrs(rows, own, template))
    if own:  # (own_calibration: what a plan's latency words keep whatever else they say)
        out.attrs["own_calibration"] = _own_words(own)
    out.attrs.update(
        **_latency_source(own, (settings or EngineSettings()).engine),
        prefix_cache_share=share,
        # whose KV budget the engine ran on: the memory step of a plan on it counts the same
        memory_accounting="vllm",
        memory_vllm_version=vllm_version,
        prompt_tokens=float(workload.prompt_tokens.mean()),
        output_tokens=float(workload.output_tokens.mean()),
    )
    return out


def _with_budget(result: xr.Dataset, hit: float, running: int, profiled: int) -> xr.Dataset:
    """An option's answer with its KV budget: hit rate, running tokens, sequences profiled."""
    for name, value in (("prefix_hit_rate", hit), ("running_tokens", running),
                        ("profiled_sequences", profiled)):  # fmt: skip
        result[name] = xr.DataArray(value, attrs=glossary.attrs(name))
    return result


def _options(gpus, tensor_parallel, sla, metric: str, workload) -> tuple[list[str], list[int]]:
    """The sweep's GPUs and degrees, checked with its bounds (an error names the argument).

    GPUs as catalog ids, as capacity.sweep's (l40s: L40S), each once; degrees whole, positive
    and distinct; the workload's token counts; no TPOT or ITL bound on a workload that has none
    (:func:`_per_token_bounds`).
    """
    from .. import data
    from ..latency import _engine

    _engine.check_workload(workload)  # (before its lengths size the KV cache)
    ids = [data.resolve_gpu(g) for g in _validate.names(gpus, "gpus")]
    if len(set(ids)) != len(ids):
        raise InputError(f"gpus: {ids} names the same GPU twice")
    _per_token_bounds(sla, metric, workload)
    return ids, _validate.positive_ints(tensor_parallel, "tensor_parallel").tolist()


def _per_token_bounds(sla, metric: str, workload: xr.Dataset) -> None:
    """An error when a TPOT or ITL bound meets a workload of one-token outputs, which has neither.

    TPOT and ITL count the tokens after the first (a request of one output token has none, as in
    vLLM's benchmark), so on such a workload no curve holds them.
    """
    bounded = list(sla.bounds) if isinstance(sla, SLA) else [metric]
    per_token = [m for m in bounded if m in ("tpot", "itl")]
    if per_token and float(np.rint(workload.output_tokens.max())) <= 1:
        m = per_token[0]
        where = f"sla: a {m.upper()} bound ({m}_s)" if isinstance(sla, SLA) else f"metric={m!r}"
        raise InputError(
            f"{where} on a workload whose every request has 1 output token: {m.upper()} counts "
            f"the output tokens after the first, so these requests have no {m.upper()}; bound "
            "TTFT or E2E instead"
        )


def _band_attrs(rows: dict, own: dict, template: xr.Dataset) -> dict:
    """The sweep's band attrs: a bundled-calibration option's, and ``own_band_ratios``.

    ``own_band_ratios``: the band in words of the GPUs calibrated on the user's runs, if any.
    """
    ok = [(gpu, r) for (gpu, _), (kind, r) in rows.items() if kind == "ok"]
    bundled = next((r for gpu, r in ok if gpu not in own), template)
    out = {k: bundled.attrs[k] for k in BAND_ATTRS if k in bundled.attrs}
    mine = [r for gpu, r in ok if gpu in own]
    if mine and "band_ratios" in mine[0].attrs:
        out["own_band_ratios"] = mine[0].attrs["band_ratios"]
    return out


def _say_left_out(out: xr.Dataset, unpriced: list[str], too_long: list[str], longest: int) -> None:
    """The notes of the options left out: no latency (and why), or too little memory."""
    from ..data import _curve

    if unpriced:  # which options have no latency, and why (capnb.plan names them)
        out.attrs["unmodelled"] = "; ".join(unpriced)
        _curve.add_note(out, "; ".join(unpriced))
    if too_long:  # said with the answer: which options memory ruled out, and why
        _curve.add_note(
            out,
            f"memory: the KV cache of {'; '.join(too_long)} tokens cannot hold the workload's "
            f"longest request ({longest:,} tokens, prompt + output), which vLLM would reject: "
            "infeasible_memory",
        )


def _missing_figures(spec, gpu: str, tp: int) -> list[str]:
    """Why the engine model cannot price ``gpu`` at ``tp``: a catalog figure it needs is missing."""
    from ..data import load_gpus
    from ..latency import calibration
    from ..latency._curves import _missing_figures as missing_figures

    vector = calibration.gpu_vector(load_gpus([gpu]), gpu, spec.weight_dtype)
    return missing_figures([gpu], vector[None, :], np.array([tp]))


def _stacked(rows: dict, gpus, tensor_parallel, template: xr.Dataset) -> xr.Dataset:
    """Each option's answer over (``gpu``, ``tensor_parallel``).

    An option that cannot run (its kind in ``rows`` is not ``"ok"``) is NaN everywhere, its
    ``binding`` saying why (its kind).
    """
    template = template.drop_vars([c for c in ("gpu", "tensor_parallel") if c in template.coords])
    stacked = []
    for gpu in gpus:
        per_tp = []
        for tp in tensor_parallel:
            kind, result = rows[(gpu, tp)]
            if kind != "ok":
                result = template.copy()
                for name, var in template.data_vars.items():
                    if var.dtype.kind in "iufb":
                        result[name] = xr.full_like(var, np.nan, dtype=float)
                # (its own width: the template's string column may be narrower than the kind)
                result["binding"] = xr.full_like(template.binding, kind, dtype=np.array(kind).dtype)
            else:
                result = result.drop_vars(
                    [c for c in ("gpu", "tensor_parallel") if c in result.coords]
                )
            per_tp.append(result)
        stacked.append(xr.concat(per_tp, dim="tensor_parallel", combine_attrs="drop_conflicts"))
    out = xr.concat(stacked, dim="gpu", combine_attrs="drop_conflicts")
    return out.assign_coords(
        gpu=("gpu", list(gpus), glossary.attrs("gpu")),
        tensor_parallel=(
            "tensor_parallel",
            [int(t) for t in tensor_parallel],
            glossary.attrs("tensor_parallel"),
        ),
    )


def _running_budget(model, gpu, tp, seq_len: int, vllm_version: str, settings, share: float,
                    blocks) -> tuple[float, int, int]:  # fmt: skip
    """(prefix hit rate, KV tokens left to running sequences, sequences profiled) of one option.

    vLLM's KV budget (:func:`_kv_tokens`), less a prefix cache's ``share`` of it where one is
    held (:func:`capnb.memory.split_kv`, its hit rate replayed from ``blocks``); profiled at the
    sequences the option runs at once where they are more than the server's (:func:`_served`);
    those sequences (:func:`capnb.latency._engine.profile_settings`) are the third figure.
    """
    from .. import memory
    from ..latency import _engine

    def budget(profiled) -> tuple[float, int]:
        kv = _kv_tokens(model, gpu, tp, seq_len, vllm_version, settings=profiled)
        if not (share > 0 and kv > 0):
            return 0.0, kv
        split = memory.split_kv(blocks, kv_cache_tokens=kv, seq_len=seq_len, cache_share=[share])
        return float(split.prefix_hit_rate.item()), int(split.running_tokens.item())

    hit, running = budget(settings)
    fits = _sequences(Deployment(model, gpu, int(tp)), running, seq_len, settings)
    served = _served(gpu, settings, fits)
    if served is not settings:
        hit, running = budget(served)
    return hit, running, _engine.profile_settings(gpu, served)[0]


def _served(gpu: str, settings: EngineSettings | None, fits: int) -> EngineSettings | None:
    """The settings of the server that runs the option's sequences at once, as vLLM profiles them.

    The engine curve runs as many sequences as memory holds (at most :data:`MOST_SEQUENCES`), and
    the plan's pods and benchmark commands pass ``--max-num-seqs`` where that is more than the
    server's default (:func:`capnb.plan._closecall.above_default_seqs`): vLLM V1 then profiles
    its sampler over those sequences, which leaves less KV cache (Llama-3.1-8B on an L40S:
    185,216 tokens at 484 sequences, not 193,888 at vllm serve's 256). ``settings`` itself where
    the option runs no more than it profiles, the engine is not vLLM V1 (whose KV cache is
    sized as ``vllm serve``'s) or the server is given its own ``max_num_seqs`` (run and profiled
    as given). One step: the sequences held after it are fewer, so a server run at them holds
    them.
    """
    from ..latency import _engine

    given = settings or EngineSettings()
    top = min(int(fits), MOST_SEQUENCES)
    if given.engine != "vllm-v1" or given.max_num_seqs:  # (a server's own limit: run, profiled)
        return settings
    if top <= _engine.profile_settings(gpu, given)[0]:
        return settings
    return replace(given, max_num_seqs=top)


def _own_words(own: dict) -> str:
    """The GPUs calibrated on the user's runs, in words ("on H100-SXM calibrated on ...")."""
    return "on " + ", ".join(
        f"{gpu} calibrated on your own runs ({cal.fitted_on.split('; prior:')[0]}; band: "
        "the own-run held-out error)"
        for gpu, cal in own.items()
    )


def _latency_source(own: dict, engine: str) -> dict[str, str]:
    """The attrs ``latency_source`` and ``engine``: the engine simulated, the GPUs on own runs."""
    from ..records import ENGINES

    source = f"the serving-engine model of {ENGINES[engine]} (capnb.latency.engine, calibrated)"
    return {"latency_source": f"{source}; {_own_words(own)}" if own else source, "engine": engine}


def _own_calibrations(calibration, gpus) -> dict:
    """``{gpu: Calibration}`` checked: each a calibration, each GPU one of the candidates.

    Keyed by catalog id, as ``gpus`` are (an alias of a candidate names that candidate).
    """
    from ..data import resolve_gpu
    from ..latency.calibration import Calibration

    if calibration is None:
        return {}
    if not isinstance(calibration, Mapping):
        raise InputError(
            "calibration: expected {gpu: Calibration} (capnb.latency.calibrate on your runs of "
            f"that GPU), got {type(calibration).__name__}"
        )
    out = {}
    for gpu, cal in calibration.items():
        if resolve_gpu(gpu) not in list(gpus):
            raise InputError(
                f"calibration: GPU {gpu!r} is not among the candidate gpus {list(gpus)}: a "
                "calibration prices the GPU its runs measured"
            )
        if not isinstance(cal, Calibration):
            raise InputError(
                f"calibration[{gpu!r}]: expected a capnb.latency.calibration.Calibration "
                f"(capnb.latency.calibrate), got {type(cal).__name__}"
            )
        out[resolve_gpu(gpu)] = cal
    return out


def _band_ratio(latency_band, sla, metric: str | None, analytic_metrics=(), model="engine"):
    """The ratios measured / predicted a sweep's answers are banded by (None or {}: none).

    Held out: each bound's metric gets the held-out ratios of the model its latencies come from
    (the analytic model's for ``analytic_metrics``, else ``model``'s: the engine's by source, or
    ``"own-run"``: the engine calibrated on a source's own runs).
    """
    if latency_band is None:
        return None
    if isinstance(latency_band, str):
        if latency_band != "held-out":
            raise InputError(
                f"latency_band must be 'held-out', (low, high) or None, got {latency_band!r}"
            )
        from ._band import band_ratios

        ratios = band_ratios(sla, model=model, metric=metric)
        if analytic_metrics:
            analytic = band_ratios(sla, model="analytic", metric=metric)
            ratios = {m: pair for m, pair in ratios.items() if m not in analytic_metrics}
            ratios |= {m: pair for m, pair in analytic.items() if m in analytic_metrics}
        return ratios
    return latency_band


def _analytic_metrics(curve: xr.Dataset, metrics, model, gpu, tp, workload) -> xr.Dataset:
    """The engine curve with ``metrics``' latencies from the analytic model, same concurrencies."""
    if not metrics:
        return curve
    from .. import latency

    other = latency.analytic(
        model, gpu, int(tp), workload=workload, concurrency=curve.concurrency.values.tolist(),
        quantiles=[float(q) for q in curve.latency_quantile.values],
    ).squeeze(["model", "gpu", "tensor_parallel"], drop=True)  # fmt: skip
    out = curve.copy(deep=True)
    for m in metrics:
        out["latency"].loc[{"metric": m}] = (
            other.latency.sel(metric=m).transpose(*out.latency.sel(metric=m).dims).values
        )
        out["mean_latency"].loc[{"metric": m}] = other.mean_latency.sel(metric=m).values
    out.attrs["analytic_metrics"] = ", ".join(metrics)
    return out

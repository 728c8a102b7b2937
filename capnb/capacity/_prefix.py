"""What a prefix cache does to capacity: more cache, fewer running sequences, less prefill.

The memory step splits one instance's KV budget between running sequences and a prefix cache
(:func:`capnb.memory.split_kv`, the hit rate replayed from the trace's block hashes); the engine
model (:func:`capnb.latency.engine`) serves the trace's lengths with the running share as its KV
capacity and the hit rate as the share of prompt tokens not computed; the capacity step reads the
SLA off each curve. The answer is the cache share that serves the most requests/s per instance,
and what it changes in instances for a target rate.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .. import glossary
from ..errors import InputError
from ..records import SLA, VLLM_VERSION, Deployment, expect_deployment, expect_sla
from ..units import instances_needed

__all__ = ["prefix_trade"]

DEFAULT_SHARES = (0.0, 0.1, 0.2, 0.3, 0.5)


def prefix_trade(
    deployment: Deployment,
    trace="mooncake-synthetic",
    *,
    sla: SLA,
    cache_share=DEFAULT_SHARES,
    target_qps: float | None = None,
    requests: int = 600,
    vllm_version: str = VLLM_VERSION,
    seed: int = 0,
    block_tokens: int | None = None,
) -> xr.Dataset:
    """Per-instance capacity under the SLA for each share of the KV budget given to a prefix cache.

    Parameters
    ----------
    deployment
        The model, GPU, degree (GPUs) and dtypes (:class:`capnb.records.Deployment`).
    trace
        A request log with block hashes (a bundled name, e.g. ``"mooncake-synthetic"``, or a
        path in Mooncake's JSON-lines format): its block hashes give the hit rate, its prompt and
        output lengths the workload.
    sla
        The SLA (:class:`capnb.records.SLA`; a prefix cache shortens TTFT, so a TTFT bound is
        the one it moves).
    cache_share
        Shares of the KV budget held by the cache, in [0, 1).
    target_qps
        Requests/s to serve (optional): instances needed at each share.
    requests, seed
        Requests simulated per engine point, and their seed.
    vllm_version
        Whose KV budget (vLLM's accounting, :func:`capnb.memory.max_concurrency`).
    block_tokens
        Tokens per hash block of the log (None: Mooncake's 512), as
        :func:`capnb.data.load_block_hashes` takes it.

    Returns
    -------
    xarray.Dataset
        Over ``cache_share``: ``prefix_hit_rate``, ``running_tokens``, ``max_concurrency`` (memory's
        limit), ``safe_concurrency`` (under the SLA, 0 where infeasible), ``binding``,
        ``per_instance_qps``, ``latency_floor`` (the deciding bound's latency at concurrency 1, s) and,
        with a target, ``instances``. Attrs: ``best_cache_share`` (most requests/s per instance;
        NaN when no share is feasible) and ``reason``.
    """
    from .. import data, latency, memory
    from ._engine_sweep import _holds, engine_curve
    from ._safe import FEASIBLE, safe_concurrency

    expect_deployment(deployment)
    expect_sla(sla)
    if target_qps is not None and not (
        isinstance(target_qps, int | float) and math.isfinite(target_qps) and target_qps > 0
    ):
        raise InputError(f"target_qps must be requests/s > 0, got {target_qps!r}")
    blocks = data.load_block_hashes(
        trace, **({} if block_tokens is None else {"block_tokens": block_tokens})
    )
    log = data.load_trace(trace)
    if "output_tokens" not in log:
        raise InputError(f"trace {trace!r} has no output_tokens: its output lengths are needed")
    work = latency.workload(log)
    seq_len = math.ceil(float((work.prompt_tokens + work.output_tokens).mean()))
    budget = memory.max_concurrency(
        deployment=deployment, seq_len=seq_len, accounting="vllm", vllm_version=vllm_version,
    )  # fmt: skip
    kv_tokens = int(budget.kv_cache_tokens.item())
    # split_kv checks the shares; with no KV cache at all (the weights and vLLM's reserve fill
    # the GPU) nothing runs at any share: a budget of 1 token, then none
    # (the sequences each running share holds as the engine stores the model: its hybrid groups)
    split = memory.split_kv(blocks, kv_cache_tokens=max(kv_tokens, 1), seq_len=seq_len,
                            cache_share=cache_share, model=deployment.spec)  # fmt: skip
    if kv_tokens < 1:
        split["running_tokens"] *= 0
        split["max_concurrency"] *= 0
    n = split.sizes["cache_share"]
    running = [int(r) for r in split.running_tokens.values]
    # the log's longest request must fit in the running share's KV blocks, or the engine rejects it
    longest = int((work.prompt_tokens + work.output_tokens).max())
    too_long = np.array([r < 1 or not _holds(deployment, longest, r, None) for r in running])
    safe = np.zeros(n, np.int64)
    qps = np.zeros(n)
    floor = np.full(n, np.nan)
    binding = np.full(n, "infeasible", dtype=object)
    for i in range(n):
        fits = int(split.max_concurrency.values[i])
        if fits < 1 or too_long[i]:
            binding[i] = "memory"
            continue
        curve = engine_curve(deployment, work, fits=fits,
                             running_tokens=split.running_tokens.values[i],
                             hit_rate=split.prefix_hit_rate.values[i], requests=requests,
                             seed=seed)  # fmt: skip
        found = safe_concurrency(curve, sla, memory_limit=fits)
        floor[i] = float(found.latency_floor)
        binding[i] = str(found.binding.item())
        if binding[i] in FEASIBLE:
            safe[i] = int(found.safe_concurrency.item())
            qps[i] = float(found.per_instance_qps.item())
    out = xr.Dataset(
        {
            "prefix_hit_rate": split.prefix_hit_rate,
            "running_tokens": split.running_tokens,
            "max_concurrency": split.max_concurrency,
            "safe_concurrency": ("cache_share", safe, glossary.attrs("safe_concurrency")),
            "binding": ("cache_share", binding.astype(str), glossary.attrs("binding")),
            "per_instance_qps": ("cache_share", qps, glossary.attrs("per_instance_qps")),
            "latency_floor": (
                "cache_share",
                floor,
                {"units": "s", "long_name": "the deciding bound's latency at concurrency 1"},
            ),
        },
        coords={"cache_share": split.cache_share},
    )
    if target_qps is not None:
        need = np.where(qps > 0, instances_needed(target_qps, np.where(qps > 0, qps, 1.0)), np.nan)
        out["instances"] = ("cache_share", need, glossary.attrs("instances"))
    if (qps > 0).any():
        best = int(np.argmax(qps))
        share = float(out.cache_share.values[best])
        reason = (
            f"a cache of {share:.0%} of the KV budget serves {qps[best]:.3f} requests/s per "
            f"instance at {sla} (hit rate "
            f"{float(out.prefix_hit_rate.values[best]):.1%}, {int(safe[best])} running "
            f"sequences)" + _without_cache(out.cache_share.values, qps, floor)
        )
    else:
        share = math.nan
        reason = _infeasible(sla, floor, budget, split, too_long, longest)
    out.attrs = {
        "model": deployment.spec.name, "gpu": deployment.gpu,
        "tensor_parallel": deployment.tensor_parallel,
        "trace": str(trace), "kv_cache_tokens": kv_tokens, "seq_len": seq_len,
        "sla": str(sla), "sla_bounds": sla.as_dict(),
        "best_cache_share": share, "reason": reason,
        "latency_model": "capnb.latency.engine (calibrated continuous-batching simulation)",
    }  # fmt: skip
    return out


def _without_cache(shares, qps, floor) -> str:
    """``"; no cache: ..."`` in words, when share 0 was priced: its requests/s, or why none."""
    if float(shares[0]) != 0.0:
        return ""
    if qps[0] > 0:
        return f"; no cache: {qps[0]:.3f} requests/s per instance"
    if np.isfinite(floor[0]):  # the engine ran: the SLA is missed at one request in flight
        return f"; no cache: infeasible (at one request in flight {floor[0]:.3g} s, above the SLA)"
    return "; no cache: infeasible (its KV cache cannot hold the log's requests)"


def _infeasible(sla, floor, budget, split, too_long, longest: int) -> str:
    """Why no cache share meets the SLA, in words starting "infeasible:"."""
    from .. import memory

    if np.isfinite(floor).any():
        return (
            f"infeasible: no cache share meets {sla}; the lowest floor is {np.nanmin(floor):.2f} s"
        )
    if int(budget.kv_cache_tokens.item()) < 1:  # memory's own words: "Infeasible: ... does not fit"
        return "infeasible: " + memory.describe(budget).removeprefix("Infeasible: ")
    if too_long.all():
        return (
            f"infeasible: the KV cache ({int(split.running_tokens.values.max()):,} tokens with "
            f"no prefix cache) cannot hold the log's longest request ({longest:,} tokens, "
            "prompt + output), which the engine would reject; give a larger degree or GPU"
        )
    return "infeasible: no running sequence fits in memory at any cache share"

"""A prefill:decode fleet simulated per request (:func:`capnb.kernels.pd.simulate_fleet`).

:func:`fleet_run` draws the requests (the engine model's seeded sample), routes each to a prefill
and a decode instance, and runs the kernel with the engine's hand-off (:func:`pool_setup`): on
SGLang the decode instance pre-allocates the prompt's KV before the prefill starts, and streams
the prefill's first token when its loop finds the transfer done; on vLLM the request waits after
the transfer in the decode instance's admission queue and its first token is a decode step's.
Either way it queues at its prefill instance, is prefilled and crosses the link (its KV bytes over
one GPU's link, :func:`kv_transfer_s`), so its TTFT holds every queue on its way.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from ..kernels import pd as kernels
from ..records import EngineSettings

__all__ = ["ROUTERS", "fleet_run"]

#: How a request's instances are picked: at random (SGLang's mini load balancer picks a prefill
#: and a decode server with ``random.choice``), or in turn (``sglang_router --policy round_robin``:
#: a counter per pool).
ROUTERS = ("random", "round_robin")
#: SGLang's ``--num-reserved-decode-tokens`` default: the KV tokens a decode instance keeps free per
#: request it holds before it pre-allocates another (tokens).
SGLANG_RESERVED_DECODE_TOKENS = 512
#: SGLang's decode server takes this many times its running limit in pre-allocated requests on top
#: when that limit is at most ``_PREALLOC_UP_TO`` (``pre_alloc_size = max_num_reqs * 2 if
#: max_num_reqs <= 32 else 0``).
_PREALLOC_EXTRA, _PREALLOC_UP_TO = 2, 32


def _routes(router: str, requests: int, pair, rng: np.random.Generator):
    if router == "random":
        return rng.integers(0, pair[0], requests), rng.integers(0, pair[1], requests)
    if router == "round_robin":
        index = np.arange(requests)
        return index % pair[0], index % pair[1]
    raise InputError(f"router must be one of {ROUTERS}, got {router!r}")


def pool_setup(spec, gpu_id: str, tps: dict, engine: EngineSettings,
               kv_dtype: str = "auto", weight_dtype: str | None = None) -> dict:  # fmt: skip
    """Each pool's model vector, the GPU vector, the prefill budget, the decode limits, the hand-off.

    ``engine``: the :class:`~capnb.records.EngineSettings` both pools run (None fields: the
    engine's defaults on this GPU and decode KV cache). ``kv_dtype``, ``weight_dtype``: the
    deployment's (as :func:`capnb.latency.engine` reads them; None: the model's weights).
    """
    from ..data import load_gpus
    from ..latency import _engine

    gpus = load_gpus([gpu_id])
    # the P:D kernel stores every layer whole (it has no hybrid groups): a full-length count
    kv_tokens = _engine.kv_tokens_auto(spec, gpu_id, tps["decode"], kv_dtype=kv_dtype,
                                       weight_dtype=weight_dtype, hybrid=False,
                                       settings=engine)  # fmt: skip
    if kv_tokens <= 0:
        raise InputError(
            f"tensor_parallel: {spec.name} leaves no KV cache on a decode instance of "
            f"{tps['decode']} x {gpu_id}"
        )
    # max_model_len the model's context when not given, as capnb.latency.engine resolves it
    settings = _engine._resolved(engine, spec, gpu_id, float(gpus.memory_bytes.values[0]),
                                 kv_tokens)  # fmt: skip
    max_seqs = int(settings.running_limit(kv_tokens))
    sglang = settings.engine == "sglang"
    block = int(settings.block_size or _engine.BLOCK_SIZE)  # the engine's KV block (tokens)
    return {
        "model_p": _engine.model_vector(
            spec, tps["prefill"], kv_dtype=kv_dtype, weight_dtype=weight_dtype
        ),
        "model_d": _engine.model_vector(
            spec, tps["decode"], kv_dtype=kv_dtype, weight_dtype=weight_dtype
        ),
        "gpu": _engine.gpu_vector(gpus, gpu_id, weight_dtype or spec.weight_dtype),
        "budget": int(settings.max_num_batched_tokens),
        "max_seqs": max_seqs,
        "kv_blocks": kv_tokens // block,
        "block": block,
        "tps": tps,
        # the hand-off: SGLang's pre-allocation (request slots, reserved tokens), or vLLM's
        "handoff": 1 if sglang else 0,
        "slots": max_seqs * (1 + _PREALLOC_EXTRA) if max_seqs <= _PREALLOC_UP_TO else max_seqs,
        "reserved": SGLANG_RESERVED_DECODE_TOKENS if sglang else 0,
    }


def fleet_run(setup: dict, cal, pair, prompt, output, transfer_s, *, closed: bool, load: float,
              warmup: int, quantile: float, router: str, rng: np.random.Generator) -> dict:  # fmt: skip
    """One fleet of ``pair`` = (prefill, decode) instances at one load, simulated per request.

    ``prompt``, ``output`` (int64) and ``transfer_s`` per request; ``load``: requests in flight
    (``closed``) or requests/s. Returns the ``quantile`` of TTFT and TPOT (s), the median TTFT (s),
    the mean seconds of
    each TTFT stage (:data:`capnb.kernels.pd.STAGES`), requests/s and output tokens/s completed,
    the busy share of each pool, and the saturated stage ("" when no queue dominates).
    """
    from ..latency import _engine

    n = prompt.size
    route_p, route_d = _routes(router, n, pair, rng)
    gaps = _engine.arrival_gaps(rng, n, 1.0)
    settings = np.array(
        [1.0 if closed else 0.0, load, pair[0], pair[1], setup["budget"], setup["max_seqs"],
         setup["kv_blocks"], setup["block"], setup["slots"], setup["reserved"],
         setup["handoff"], setup.get("handoff_s", 0.0), setup.get("handoff_delay_s", 0.0)],
        dtype=float,
    )  # fmt: skip
    longest = int((prompt + output).max())
    if -(-longest // setup["block"]) > setup["kv_blocks"]:
        raise InputError(
            f"workload: a request of {longest:,} tokens does not fit in a decode instance's KV "
            f"cache ({setup['kv_blocks'] * setup['block']:,} tokens)"
        )
    times = np.empty((n, len(kernels.TIMES)))
    stats = np.zeros(len(kernels.STATS))
    tps = setup["tps"]
    kernels.simulate_fleet(
        prompt, output, np.asarray(transfer_s, dtype=float), route_p, route_d, gaps, settings,
        setup["model_p"], setup["model_d"], setup["gpu"], tps["prefill"], tps["decode"], cal,
        times, stats,
    )  # fmt: skip
    return _summary(times, stats, output, warmup, quantile, cal[6], pair)


def _summary(times, stats, output, warmup: int, quantile: float, overhead: float, pair) -> dict:
    """The run's figures from its per-request times, over the requests after the warm-up."""
    if np.isnan(times[:, -1]).any():
        raise InputError("the fleet simulation stopped with requests unserved (none could run)")
    kept = slice(warmup, None)
    ttft = times[kept, 6] - times[kept, 0] + overhead
    e2e = times[kept, 7] - times[kept, 0] + overhead
    out = output[kept]
    tpot = (e2e - ttft)[out > 1] / (out[out > 1] - 1)
    stages = np.diff(times[kept, :7], axis=1).mean(axis=0)
    done = np.sort(times[:, 7])
    start = done[warmup - 1] if warmup > 0 else 0.0
    span = done[-1] - start
    after = times[:, 7] > start if warmup > 0 else np.ones(times.shape[0], bool)
    # requests held by each pool's instance on average over the window (queue + prefill; from the
    # hand-off to the last token): the time their stays overlap it, over its length
    held = [
        np.clip(np.minimum(times[:, b], done[-1]) - np.maximum(times[:, a], start), 0, None).sum()
        / (span * instances)
        if span > 0
        else math.nan
        for a, b, instances in ((1, 3, pair[0]), (5, 7, pair[1]))
    ]
    quant = lambda v: float(np.quantile(v, quantile, method="inverted_cdf")) if v.size else math.nan  # noqa: E731
    duration = float(done[-1])
    busy = (stats[3] / (pair[0] * duration), stats[4] / (pair[1] * duration))
    # the queues: the prefill queue, the link's (with the bytes), the decode side's hand-off work
    # (with the work and its fixed latency), the decode instance's (pre-allocation and poll)
    waits = {"prefill": stages[1], "transfer": stages[3], "handoff": stages[4],
             "decode": stages[0] + stages[5]}  # fmt: skip
    stage, wait = max(waits.items(), key=lambda kv: kv[1])
    return {
        "ttft": quant(ttft),
        "ttft_median": float(np.median(ttft)) if ttft.size else math.nan,
        "tpot": quant(tpot),
        "stages": stages,
        "fleet_qps": after.sum() / span if span > 0 else math.nan,
        "output_tokens_per_s": output[after].sum() / span if span > 0 else math.nan,
        "busy": busy,
        "pool_concurrency": held,
        # a stage's queue dominates when it is over half the mean TTFT
        "bottleneck": stage if wait > 0.5 * float(np.mean(ttft)) else "",
        "preemptions": int(stats[0]),
        "mean_decode_batch": stats[2] / stats[1] if stats[1] > 0 else 0.0,
    }

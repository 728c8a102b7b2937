"""Disaggregated serving: prefill and decode on separate pools, sized separately, against aggregated.

DistServe, Splitwise, Mooncake, Dynamo and SGLang run a request's prefill on one instance and its
decode on another, moving its KV cache between them. Each pool is then sized by the SLA it owns:
TTFT bounds the prefill pool (with the KV transfer and the wait for a decode slot in it), TPOT the
decode pool. The prefill:decode ratio follows from the prompt/output mix.

capnb models each pool with the engine simulation (:func:`capnb.latency.engine`), closed loop over
the requests in flight on one instance:

- prefill pool: the workload's prompts, one output token each (the first token is the prefill's);
- decode pool: the same requests with their prompts already in the KV cache (``prefix_hit_rate=1``:
  the cache holds them, nothing is recomputed but the last block) and their full output. The decode
  instance's own TTFT is its wait for a batch slot plus one step: one step more than SGLang's decode
  takes, a few milliseconds;
- KV transfer: the prompt's KV bytes on one rank (sliding-window layers at their window,
  :meth:`~capnb.data.modelspec.ModelSpec.kv_bytes_per_sequence`) over one GPU's link
  (``link_bandwidth``: the catalog's intra-node interconnect by default; give a NIC's bytes/s for
  pools on separate nodes).

For sizing, a pool's TTFT adds up as prefill TTFT + transfer + decode TTFT (the sum of their
quantiles: conservative); TPOT is the decode pool's.

:func:`pd_ratio` simulates a fixed fleet of ``P`` prefill and ``D`` decode instances per request
(:func:`capnb.kernels.pd.simulate_fleet`, driven by :mod:`._pd_fleet`) with its engine's hand-off:
on SGLang the decode instance pre-allocates the prompt's KV before the prefill starts and streams
the prefill's first token when its loop finds the KV landed; on vLLM the request waits after the
transfer in the decode instance's admission queue (a sequence slot and KV blocks). Either way it
queues at its prefill instance, is prefilled in token-budgeted steps and crosses the link (one
transfer at a time per instance), so its TTFT holds every queue; it picks the ratio with the most
output tokens/s per GPU within the SLA. :func:`disaggregate` sizes both pools for a demand per slot (the
forecast's target) at the operating points of their curves that cost fewest GPUs per request/s
under the SLA, compares the aggregated fleet for the same demand, and simulates its busiest slot
per request in the same way (``simulated_latency``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from .. import _validate, glossary, words
from ..errors import InputError
from ..records import SLA, Deployment, EngineSettings, expect_deployment
from ..units import instances_needed
from . import _pd_fleet

__all__ = ["POOLS", "disaggregate", "kv_transfer_s", "pd_ratio", "pool_curves"]

#: The pools of a disaggregated fleet, in order.
POOLS = ("prefill", "decode")
#: The engine both pools and the aggregated instance run unless told: vLLM V1 with 256 running
#: sequences (requests) and 8,192 tokens a step, the limits of the P:D measurements compared.
POOL_ENGINE = EngineSettings("vllm-v1", max_num_seqs=256, max_num_batched_tokens=8192)
#: Latency metrics the disaggregated model reports.
_METRICS = ("ttft", "tpot")
#: Requests each instance of the busiest slot's simulated fleet serves at least, on average: a
#: larger fleet is simulated as a share of it at the same requests/s per instance.
PEAK_REQUESTS_PER_INSTANCE = 50


def _tensor_parallel(value, argument: str = "tensor_parallel") -> dict[str, int]:
    if isinstance(value, Mapping):
        unknown = set(value) - set(POOLS)
        if unknown or set(value) != set(POOLS):
            raise InputError(
                f"{argument}: give one degree or a mapping with keys 'prefill' and 'decode', "
                f"got {dict(value)!r}"
            )
        return {
            pool: _validate.positive_int(value[pool], f"{argument}[{pool!r}]") for pool in POOLS
        }
    tp = _validate.positive_int(value, argument)
    return dict.fromkeys(POOLS, tp)


def pd_sla_gaps(sla: SLA) -> tuple[list[str], list[str]]:
    """(missing, unchecked): SLA fields the pools need and lack, and fields they never check.

    A prefill pool answers to a TTFT bound and a decode pool to a TPOT bound, and the pools are
    sized on those two alone: an E2E bound spans both pools, an ITL bound each gap.
    """
    missing = [f"{m}_s" for m in ("ttft", "tpot") if m not in sla.bounds]
    unchecked = [f"{m}_s" for m in sla.bounds if m not in ("ttft", "tpot")]
    return missing, unchecked


def _pd_bounds(sla: SLA) -> tuple[float, float, float]:
    """The SLA's TTFT and TPOT bounds (s) and quantile: prefill answers to one, decode to the other."""
    if not isinstance(sla, SLA):
        raise InputError(
            f"sla: expected a capnb.records.SLA with ttft_s and tpot_s, got {type(sla).__name__}"
        )
    missing, unchecked = pd_sla_gaps(sla)
    if missing:
        raise InputError(
            f"sla: {sla} has no {' or '.join(missing)}: prefill and decode pools are sized on a "
            "TTFT and a TPOT bound together; give both"
        )
    if unchecked:  # a bound the pools' answer would show but never check: refused, not ignored
        raise InputError(
            f"sla: {sla} has {' and '.join(unchecked)}: prefill and decode pools are checked on "
            "TTFT and TPOT only (an E2E bound also holds the output's length, an ITL bound each "
            "gap), so a pick under it would be said to meet a bound it was never held to; give "
            "the SLA without it, and check the chosen pools' E2E or ITL with capnb.latency.engine"
        )
    return sla.bounds["ttft"], sla.bounds["tpot"], sla.quantile


def _link(gpu_id: str, link_bandwidth) -> tuple[float, str]:
    from ..data import load_gpus

    if link_bandwidth is None:
        bandwidth = float(load_gpus([gpu_id]).interconnect_bandwidth.item())
        if not np.isfinite(bandwidth):
            raise InputError(
                f"link_bandwidth: {gpu_id} has no interconnect bandwidth in the catalog; give the "
                "bytes/s of the link between the pools"
            )
        return bandwidth, f"{gpu_id}'s intra-node interconnect (catalog), {bandwidth / 1e9:g} GB/s"
    if isinstance(link_bandwidth, bool) or not isinstance(link_bandwidth, numbers.Real):
        raise InputError(f"link_bandwidth must be bytes/s (a number > 0), got {link_bandwidth!r}")
    if not (link_bandwidth > 0 and math.isfinite(link_bandwidth)):
        raise InputError(f"link_bandwidth must be bytes/s (a number > 0), got {link_bandwidth!r}")
    return float(link_bandwidth), f"given, {link_bandwidth / 1e9:g} GB/s"


def kv_transfer_s(
    model, prompt_tokens, *, tensor_parallel: int = 1, link_bandwidth: float, kv_dtype: str = "auto"
) -> np.ndarray:
    """Seconds to move a prompt's KV cache from a prefill to a decode instance.

    Each of the ``tensor_parallel`` ranks sends its share over its own link at the same time:
    ``kv_bytes_per_sequence(prompt, tp) / link_bandwidth`` (bytes/s of one GPU's link).

    Examples
    --------
    >>> float(kv_transfer_s("gpt-oss-120b", 2048, tensor_parallel=2, link_bandwidth=450e9))  # s
    8.912896e-05
    """
    from ..data import load_model

    spec = load_model(model)
    tp = _validate.positive_int(tensor_parallel, "tensor_parallel")
    spec.check_tensor_parallel(tp)
    if (
        isinstance(link_bandwidth, bool)
        or not isinstance(link_bandwidth, numbers.Real)
        or not (link_bandwidth > 0 and math.isfinite(link_bandwidth))
    ):
        raise InputError(f"link_bandwidth must be bytes/s (a number > 0), got {link_bandwidth!r}")
    try:
        tokens = np.asarray(prompt_tokens, dtype=float)
    except (TypeError, ValueError):  # a word, a mapping: not a token count
        tokens = np.array(np.nan)
    if (~np.isfinite(tokens) | (tokens < 0)).any():
        raise InputError(f"prompt_tokens must be finite numbers >= 0, got {prompt_tokens!r}")
    per_layer = spec.kv_bytes_per_token(kv_dtype, tp) / spec.layers
    windowed = np.minimum(tokens, spec.sliding_window) if spec.sliding_layers else 0.0
    full = spec.layers - spec.sliding_layers
    bytes_ = per_layer * (full * tokens + spec.sliding_layers * windowed)
    return bytes_ / float(link_bandwidth)


def _check_workload(workload) -> None:
    if not isinstance(workload, xr.Dataset) or not {"prompt_tokens", "output_tokens"} <= set(
        workload.data_vars
    ):
        raise InputError("workload: pass capnb.latency.workload(...) (a Dataset over 'request')")


def pool_curves(
    deployment: Deployment,
    workload: xr.Dataset,
    *,
    tensor_parallel=None,
    concurrency=None,
    requests: int = 1000,
    seed: int = 0,
    settings: EngineSettings = POOL_ENGINE,
    calibration=None,
) -> xr.Dataset:
    """Closed-loop engine curves of one prefill and one decode instance (a ``pool`` dim).

    Parameters
    ----------
    deployment, workload
        As in :func:`capnb.latency.engine` (:class:`capnb.records.Deployment`: model, GPU,
        dtypes, and the degree of both pools unless ``tensor_parallel`` says otherwise).
    tensor_parallel
        None (the deployment's), one degree for both pools, or ``{"prefill": p, "decode": d}``
        (GPUs per instance).
    concurrency
        Requests in flight on one instance (default: 1 to 256, two points a doubling past 4).
    requests, seed, settings, calibration
        Passed to :func:`capnb.latency.engine` for both pools; ``settings`` (a
        :class:`capnb.records.EngineSettings`) defaults to :data:`POOL_ENGINE`.

    Returns
    -------
    xarray.Dataset
        ``latency`` (pool, concurrency, metric, latency_quantile), ``mean_latency`` (pool,
        concurrency, metric), ``instance_qps`` (pool, concurrency: requests/s one instance
        completes), ``pool_tensor_parallel`` (pool); attrs name the inputs.
    """
    from .. import latency

    _check_workload(workload)
    tps = _tensor_parallel(_degree(deployment, tensor_parallel))
    grid = (
        latency.concurrency_grid(256, dense_up_to=4, per_doubling=2)
        if concurrency is None
        else np.sort(_validate.positive_ints(concurrency, "concurrency"))
    )
    prefill_work = workload.copy()
    prefill_work["output_tokens"] = xr.ones_like(workload["output_tokens"])
    common = dict(
        concurrency=grid,
        **_engine_settings(requests, seed, settings, calibration),
    )
    curves = {
        "prefill": latency.engine(deployment.at(tps["prefill"]), prefill_work, **common),
        "decode": latency.engine(
            deployment.at(tps["decode"]), workload, prefix_hit_rate=1.0, **common
        ),
    }
    pool = xr.DataArray(list(POOLS), dims="pool", attrs=glossary.attrs("pool"))
    result = xr.Dataset(
        {
            "latency": xr.concat([curves[p].latency for p in POOLS], dim=pool),
            "mean_latency": xr.concat([curves[p].mean_latency for p in POOLS], dim=pool),
            "instance_qps": xr.concat([curves[p].throughput for p in POOLS], dim=pool).assign_attrs(
                glossary.attrs("instance_qps")
            ),
            "pool_tensor_parallel": (
                "pool",
                [tps[p] for p in POOLS],
                glossary.attrs("pool_tensor_parallel"),
            ),
        }
    )
    first = curves["decode"]
    result.attrs = {
        "source": "capnb engine model per pool (capnb.capacity.pool_curves)",
        "model": first.attrs["model"],
        "gpu": first.attrs["gpu"],
        "prompt_tokens": first.attrs["prompt_tokens"],
        "output_tokens": first.attrs["output_tokens"],
        "requests": int(requests),
        "seed": int(seed),
        "prefill_kv_cache_tokens": curves["prefill"].attrs["kv_cache_tokens"],
        "decode_kv_cache_tokens": first.attrs["kv_cache_tokens"],
        "pools": "prefill: the prompts with one output token; decode: the same requests with "
        "their prompts in the KV cache (prefix_hit_rate 1)",
        "calibration": first.attrs["calibration"],
    }
    return result


def _envelope(values: np.ndarray) -> np.ndarray:
    return np.maximum.accumulate(np.nan_to_num(values, nan=0.0))


def _at(grid: np.ndarray, values: np.ndarray, k: float) -> float:
    """A curve's value at concurrency ``k`` (linear; flat below the first point, NaN past the last)."""
    if not np.isfinite(k) or k > grid[-1] * (1 + 1e-9):
        return math.nan
    return float(np.interp(k, grid, values))


def _ratios(ratios) -> list[tuple[int, int]]:
    if isinstance(ratios, str) or not isinstance(ratios, Sequence) or not ratios:
        raise InputError(
            f"ratios must be a list of (prefill, decode) instances or 'P:D', got {ratios!r}"
        )
    out = []
    for r in ratios:
        if isinstance(r, str):
            parts = r.split(":")
            if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
                raise InputError(f"ratios: {r!r} is not 'P:D' with two whole numbers")
            r = (int(parts[0]), int(parts[1]))
        if not isinstance(r, Sequence) or len(r) != 2:
            raise InputError(f"ratios: {r!r} is not a (prefill, decode) pair")
        out.append(
            (
                _validate.positive_int(r[0], "ratios (prefill)"),
                _validate.positive_int(r[1], "ratios (decode)"),
            )
        )
    if len(set(out)) != len(out):
        raise InputError(f"ratios: duplicate pairs in {out}")
    return out


def _ratio_tensor_parallel(value, labels: list[str]) -> list[dict[str, int]]:
    """Per ratio, the degree of each pool: one for all, or a mapping from "P:D" to one."""
    if isinstance(value, Mapping) and set(value) - set(POOLS):
        missing = [label for label in labels if label not in value]
        if missing or set(value) - set(labels):
            raise InputError(
                f"tensor_parallel: a mapping per ratio needs exactly the ratios {labels}, got "
                f"{sorted(value)}"
            )
        return [_tensor_parallel(value[label], f"tensor_parallel[{label!r}]") for label in labels]
    one = _tensor_parallel(value)
    return [one for _ in labels]


def _quantile_index(curves: xr.Dataset, q: float) -> xr.Dataset:
    qs = curves.latency_quantile.values
    hit = np.flatnonzero(np.isclose(qs, q))
    if hit.size == 0:
        raise InputError(f"quantile {q} is not among the curves' latency quantiles {qs.tolist()}")
    return curves.isel(latency_quantile=int(hit[0]))


def pd_ratio(
    deployment: Deployment,
    workload: xr.Dataset,
    *,
    concurrency,
    sla: SLA,
    ratios=((1, 1), (1, 3), (2, 2), (3, 1)),
    tensor_parallel=None,
    aggregated_tensor_parallel: int | None = None,
    aggregated_gpus: int | None = None,
    link_bandwidth: float | None = None,
    aggregated_curve: xr.Dataset | None = None,
    requests: int = 1000,
    seed: int = 0,
    settings: EngineSettings = POOL_ENGINE,
    calibration=None,
    router: str = "random",
    warmup_share: float = 0.1,
    handoff_s: float = 0.0,
    handoff_delay_s: float = 0.0,
) -> xr.Dataset:
    """Each prefill:decode ratio of a fixed fleet at ``concurrency`` requests in flight, and the best.

    Parameters
    ----------
    deployment, workload
        As in :func:`pool_curves`.
    concurrency
        Requests in flight on the whole fleet (a closed loop, as ``vllm bench serve
        --max-concurrency`` runs): one or more.
    sla
        The SLA (:class:`capnb.records.SLA`): its quantile of TTFT and of TPOT must be within its
        ``ttft_s`` and ``tpot_s`` (both needed: each pool answers to one of them).
    ratios
        Fleets to compare: ``(prefill instances, decode instances)`` pairs or ``"P:D"`` strings.
    tensor_parallel
        GPUs per instance: None (the deployment's), one degree, or ``{"prefill": p, "decode": d}``,
        or a mapping from each ``"P:D"`` label to one of those (fleets of different degrees side
        by side): a grid of degrees, so beside the deployment rather than in it.
    aggregated_tensor_parallel, aggregated_gpus
        The aggregated alternative: instances of this degree (default the first ratio's decode
        pool's) on this many GPUs, sharing the same concurrency. Default: at each concurrency,
        the GPUs of the best ratio's fleet (the largest fleet's where no ratio meets the SLA),
        so that both carry the same requests in flight per GPU.
    link_bandwidth
        Bytes/s of one GPU's link between the pools (default: the catalog's intra-node figure).
    aggregated_curve
        A precomputed aggregated :func:`capnb.latency.engine` curve (its concurrency grid must
        reach every instance's share: past its end the latency is NaN); computed when None.
    requests, seed, warmup_share
        Requests simulated per (ratio, concurrency), all drawn from ``workload`` with the same seed
        (the same requests and arrivals for every fleet); the first ``warmup_share`` (in [0, 1)) are
        left out of the statistics (0: every request counts, as ``vllm bench serve`` reports).
        With a share above 0 the warm-up covers at least two turns of the loop (all
        ``concurrency`` requests arrive at once at the start, and the next turn is still
        bunched): a concurrency above it is simulated with that many more requests, so its
        figures are the loop's steady state.
    settings, calibration
        The engine (:class:`capnb.records.EngineSettings`, default :data:`POOL_ENGINE`; None
        fields: the engine's defaults): a prefill step's token budget, a decode instance's
        running requests; its bundled calibration unless ``calibration`` is given.
    router
        How each request's prefill and decode instances are picked: ``"random"`` (SGLang's mini
        load balancer) or ``"round_robin"``.
    handoff_s, handoff_delay_s
        The hand-off's time outside the GPU: seconds of a decode instance's work per request
        handed to it (bootstrap, the transfer's bookkeeping, polling), one request at a time per
        instance, and a fixed latency per request that holds nothing up (the router's hop,
        handshakes). Default 0: none; no engine documents either.
        :mod:`capnb.capacity.validate_disagg` fits both leave-one-group-out on dstack's SGLang
        runs (about 20 ms of work and 60 ms of latency there).

    Each fleet is simulated per request (:func:`capnb.kernels.pd.simulate_fleet`) with the
    engine's hand-off: on SGLang (``settings.engine == "sglang"``) the decode instance's loop
    pre-allocates the prompt's KV (a request slot, SGLang's 512 reserved tokens a request) before
    the prefill starts and streams the prefill's first token when the KV has landed; otherwise the
    request waits after the transfer in the decode instance's admission queue (a sequence slot and
    KV blocks) and its first token is a decode step's. Both queue at the prefill instance, are
    prefilled in token-budgeted steps and cross the link (its KV bytes, one transfer at a time per
    instance's link); TTFT holds every queue.

    Returns
    -------
    xarray.Dataset
        Over ``ratio`` (``"P:D"`` labels), ``concurrency`` (the fleet's), ``pool`` and ``metric``
        (ttft, tpot): ``instances`` (ratio, pool), ``gpus`` (ratio), ``pool_concurrency``,
        ``fleet_qps``, ``output_tokens_per_gpu``, ``latency`` (the quantile; TTFT includes the
        transfer and every queue), ``meets_sla``, ``ttft_median`` (ratio, concurrency: the median
        request's TTFT, s), ``ttft_stages`` (ratio, concurrency, stage: mean
        seconds), ``bottleneck`` (the stage whose queue holds most of TTFT: prefill, transfer,
        handoff, decode, or ""), ``kv_transfer_s``;
        ``best_ratio`` (concurrency, "" when none meets the SLA) and ``best_reason``; the
        aggregated alternative's ``aggregated_latency``, ``aggregated_output_tokens_per_gpu``,
        ``aggregated_meets_sla``, ``aggregated_gpus`` (concurrency); ``serving`` (concurrency:
        the cheaper of the two per GPU within the SLA) and ``serving_reason``. Attrs beside the
        inputs: ``router`` and ``routing_assumed`` (the routing, in words: the latencies hold
        for it), ``handoff_s`` and ``handoff_delay_s``.
    """
    _check_workload(workload)
    spec, gpu_id = _deployed(deployment)
    conc = np.sort(_validate.positive_ints(concurrency, "concurrency"))
    ttft_sla, tpot_sla, q = _pd_bounds(sla)
    pairs = _ratios(ratios)
    labels = [f"{p}:{d}" for p, d in pairs]
    tps = _ratio_tensor_parallel(_degree(deployment, tensor_parallel), labels)
    fleet_gpus, agg_tp, agg_instances = _fleets(
        pairs, tps, aggregated_tensor_parallel, aggregated_gpus
    )
    bandwidth, link_from = _link(gpu_id, link_bandwidth)
    run = _engine_settings(requests, seed, settings, calibration)
    need = int(conc.max())
    if aggregated_curve is None:
        top = max(1, math.ceil(need / agg_instances.min()))
        aggregated_curve = _aggregated_engine(deployment.at(agg_tp), workload, top, run)

    prompt = np.asarray(workload.prompt_tokens.values, dtype=float)
    output_mean = float(np.maximum(np.rint(workload.output_tokens.values), 1).mean())
    warm = _validate.fraction(warmup_share, "warmup_share", high_open=True)
    if router not in _pd_fleet.ROUTERS:
        raise InputError(f"router must be one of {_pd_fleet.ROUTERS}, got {router!r}")
    runs = _fleet_runs(spec, gpu_id, workload, pairs, tps, conc, q, bandwidth, run,
                       router=router, warmup_share=warm, dtypes=_dtypes(deployment),
                       handoff=(_seconds(handoff_s, "handoff_s"),
                                _seconds(handoff_delay_s, "handoff_delay_s")))  # fmt: skip
    lat = runs["latency"]
    per_gpu = runs["output_tokens_per_s"] / fleet_gpus[:, None]
    meets = (lat[..., 0] <= ttft_sla) & (lat[..., 1] <= tpot_sla)
    best = _best_ratios(labels, conc, per_gpu, lat, meets, q, ttft_sla, tpot_sla)
    # the aggregated alternative on the best ratio's GPUs (the largest fleet's where none meets),
    # its instances sharing each concurrency
    held = [agg_instances[labels.index(b)] if b else agg_instances.max() for b in best[0]]
    agg = _aggregated_at(aggregated_curve, conc, (np.array(held), agg_tp), output_mean, q, sla)
    serving = _serving_per_concurrency(labels, *best, per_gpu, agg, q)
    ds = _pd_ratio_dataset(
        labels, conc, q, pairs, tps, fleet_gpus, runs, per_gpu, meets, best, agg, serving
    )
    ds.attrs = _pd_ratio_attrs(
        spec, gpu_id, sla, link_from, prompt, output_mean, (aggregated_gpus, agg_tp)
    ) | _routing_attrs(router, handoff_s, handoff_delay_s)
    return ds


#: How pd_ratio's router picks each request's instances, in words (the result states it).
_ROUTER_WORDS = {
    "random": "random routing: each request's prefill and decode instances drawn uniformly "
    "(SGLang's mini load balancer)",
    "round_robin": "round-robin routing: each pool's instances taken in turn "
    "(sglang_router --policy round_robin)",
}


def _routing_attrs(router: str, handoff_s, handoff_delay_s) -> dict:
    """The router and hand-off times a pd_ratio result assumed (they change its latencies)."""
    return {
        "router": router,
        "routing_assumed": _ROUTER_WORDS[router],
        "handoff_s": _seconds(handoff_s, "handoff_s"),
        "handoff_delay_s": _seconds(handoff_delay_s, "handoff_delay_s"),
    }


def _seconds(value, argument: str) -> float:
    """A duration checked to be finite seconds >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{argument} must be seconds (a number >= 0), got {value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise InputError(f"{argument} must be seconds (a number >= 0), got {value!r}")
    return float(value)


def _deployed(deployment) -> tuple:
    """(model spec, catalog GPU id) of a deployment, checked to be the record."""
    expect_deployment(deployment)
    return deployment.spec, deployment.gpu


def _dtypes(deployment) -> dict:
    """The deployment's KV cache and weight dtypes, as the pools' simulation takes them."""
    return {"kv_dtype": deployment.kv_dtype, "weight_dtype": deployment.weight_dtype}


def _degree(deployment, tensor_parallel):
    """The degrees asked for: the given ones, or the deployment's (GPUs per instance)."""
    _deployed(deployment)
    return deployment.tensor_parallel if tensor_parallel is None else tensor_parallel


def _engine_settings(requests, seed, settings, calibration) -> dict:
    """The engine simulation's settings, the same for both pools and the aggregated instance."""
    return dict(requests=requests, seed=seed, settings=settings, calibration=calibration)


def _aggregated_engine(deployment, workload, top: int, settings: dict):
    """The aggregated instance's closed-loop curve, 1 to ``top`` requests in flight."""
    from .. import latency

    return latency.engine(
        deployment,
        workload,
        concurrency=latency.concurrency_grid(top, dense_up_to=4, per_doubling=2),
        **settings,
    )


def _fleets(pairs, tps, aggregated_tensor_parallel, aggregated_gpus):
    """GPUs of each ratio's fleet, the aggregated alternative's degree, and its instances per ratio.

    The aggregated fleet compared with a ratio holds that ratio's GPUs (at the same requests in
    flight, each GPU carries the same load), or ``aggregated_gpus`` where given.
    """
    agg_tp = _validate.positive_int(
        aggregated_tensor_parallel or tps[0]["decode"], "aggregated_tensor_parallel"
    )
    fleet_gpus = np.array(
        [p * tp["prefill"] + d * tp["decode"] for (p, d), tp in zip(pairs, tps, strict=True)]
    )
    if aggregated_gpus is not None:
        agg_gpus = _validate.positive_int(aggregated_gpus, "aggregated_gpus")
        if agg_gpus < agg_tp:
            raise InputError(
                f"aggregated_gpus: {agg_gpus} GPUs hold no instance of tensor_parallel {agg_tp}"
            )
        return fleet_gpus, agg_tp, np.full(len(pairs), agg_gpus // agg_tp)
    small = np.flatnonzero(fleet_gpus < agg_tp)
    if small.size:
        p, d = pairs[small[0]]
        raise InputError(
            f"aggregated_tensor_parallel: ratio {p}:{d}'s {fleet_gpus[small[0]]} GPUs hold no "
            f"aggregated instance of tensor_parallel {agg_tp}; give aggregated_gpus"
        )
    return fleet_gpus, agg_tp, fleet_gpus // agg_tp


def _fleet_runs(spec, gpu_id, workload, pairs, tps, conc, q, bandwidth, settings, *, router,
                warmup_share, handoff=(0.0, 0.0), dtypes=None) -> dict:  # fmt: skip
    """Each ratio's fleet at each concurrency, simulated per request (:mod:`._pd_fleet`).

    ``dtypes``: the deployment's ``kv_dtype`` and ``weight_dtype`` (:func:`_dtypes`; None: the
    model's own).
    """
    dtypes = dtypes or {}
    from ..latency import _engine

    shape = (len(pairs), conc.size)
    pool_k = np.full((*shape, 2), np.nan)
    rate, tokens = np.full(shape, np.nan), np.full(shape, np.nan)
    lat = np.full((*shape, 2), np.nan)
    median = np.full(shape, np.nan)
    stages = np.full((*shape, len(_pd_fleet.kernels.STAGES)), np.nan)
    transfer = np.full(len(pairs), np.nan)
    bottleneck = np.full(shape, "", dtype=object)
    n = _validate.positive_int(settings["requests"], "requests")
    warmup = min(math.ceil(warmup_share * n), n - 1)
    engine = settings["settings"]
    cal = _engine._calibration_of(settings["calibration"], gpu_id, engine.engine)
    for i, pair in enumerate(pairs):
        setup = _pd_fleet.pool_setup(spec, gpu_id, tps[i], engine, **dtypes)
        setup |= {"handoff_s": handoff[0], "handoff_delay_s": handoff[1]}
        for j, c in enumerate(conc):
            # a steady state (share > 0) leaves out the opening wave, with as many more requests
            more = _engine.warmup_waves(c, warmup) if warmup_share > 0 else 0
            prompt, output, rng = _engine.sample_requests(workload, n + more, settings["seed"])
            moved = kv_transfer_s(spec, prompt, tensor_parallel=tps[i]["prefill"],
                                  link_bandwidth=bandwidth,
                                  kv_dtype=dtypes.get("kv_dtype", "auto"))  # fmt: skip
            run = _pd_fleet.fleet_run(setup, cal.engine_array(), pair, prompt, output, moved,
                                      closed=True, load=float(c), warmup=warmup + more,
                                      quantile=q, router=router, rng=rng)  # fmt: skip
            rate[i, j], tokens[i, j] = run["fleet_qps"], run["output_tokens_per_s"]
            lat[i, j] = run["ttft"], run["tpot"]
            median[i, j] = run["ttft_median"]
            stages[i, j] = run["stages"]
            pool_k[i, j] = run["pool_concurrency"]
            bottleneck[i, j] = run["bottleneck"]
        transfer[i] = float(np.quantile(moved, q, method="inverted_cdf"))
    return {
        "pool_concurrency": pool_k,
        "fleet_qps": rate,
        "output_tokens_per_s": tokens,
        "latency": lat,
        "ttft_median": median,
        "stages": stages,
        "bottleneck": bottleneck,
        "kv_transfer_s": transfer,
    }


def _best_ratios(labels, conc, per_gpu, lat, meets, q, ttft_sla, tpot_sla):
    """Per concurrency, the ratio with the most output tokens/s per GPU within the SLA, and why."""
    best, best_reason = [], []
    for j, c in enumerate(conc):
        ok = np.flatnonzero(meets[:, j])
        if ok.size == 0:
            worst = [
                f"{labels[i]} P{q * 100:g} TTFT {lat[i, j, 0]:.3g} s / TPOT {lat[i, j, 1] * 1e3:.3g} ms"
                for i in range(len(labels))
            ]
            best.append("")
            best_reason.append(
                f"infeasible at concurrency {c}: no ratio meets TTFT <= {ttft_sla:g} s and TPOT <= "
                f"{tpot_sla * 1e3:g} ms ({'; '.join(worst)})"
            )
            continue
        i = int(ok[np.argmax(per_gpu[ok, j])])
        best.append(labels[i])
        others = [labels[k] for k in range(len(labels)) if k != i and meets[k, j]]
        best_reason.append(
            f"{labels[i]} serves {per_gpu[i, j]:,.0f} output tokens/s per GPU within the SLA "
            f"(P{q * 100:g} TTFT {lat[i, j, 0]:.3g} s, TPOT {lat[i, j, 1] * 1e3:.3g} ms)"
            + (f", more than {', '.join(others)}" if others else ", the only ratio within it")
        )
    return best, best_reason


def _aggregated_at(curve: xr.Dataset, conc, fleet, output_mean: float, q: float, sla) -> dict:
    """The aggregated fleet (``fleet``: instances, degree) with its instances sharing each concurrency.

    Its latency quantiles (concurrency, metric), output tokens/s per GPU, whether it meets the SLA.
    """
    instances, tp = fleet  # instances: one count per concurrency
    agg_q = _quantile_index(curve, q)
    agg_grid = curve.concurrency.values.astype(float)
    agg_x = _envelope(curve.throughput.values)
    agg_lat = np.full((conc.size, 2), np.nan)
    agg_rate = np.full(conc.size, np.nan)
    for j, c in enumerate(conc):
        k = c / instances[j]
        agg_rate[j] = instances[j] * _at(agg_grid, agg_x, k)
        for m, metric in enumerate(_METRICS):
            agg_lat[j, m] = _at(agg_grid, agg_q.latency.sel(metric=metric).values, k)
    return {
        "latency": agg_lat,
        "output_tokens_per_gpu": agg_rate * output_mean / (instances * tp),
        "meets_sla": (agg_lat[:, 0] <= sla.bounds["ttft"]) & (agg_lat[:, 1] <= sla.bounds["tpot"]),
        "fleet": [f"{n} x TP{tp}" for n in instances],
        "gpus": instances * tp,
    }


def _serving_per_concurrency(labels, best, best_reason, per_gpu, agg: dict, q: float):
    """Per concurrency, aggregated or disaggregated (more tokens/s per GPU within the SLA), and why."""
    serving, serving_reason = [], []
    agg_lat, agg_per_gpu, agg_meets = agg["latency"], agg["output_tokens_per_gpu"], agg["meets_sla"]
    for j in range(len(best)):
        i = labels.index(best[j]) if best[j] else -1
        disagg = per_gpu[i, j] if i >= 0 else math.nan
        agg_j = agg_per_gpu[j] if agg_meets[j] else math.nan
        agg_text = (
            f"aggregated ({agg['fleet'][j]}) {agg_per_gpu[j]:,.0f} tokens/s per GPU, "
            f"P{q * 100:g} TTFT {agg_lat[j, 0]:.3g} s, TPOT {agg_lat[j, 1] * 1e3:.3g} ms"
        )
        if i < 0 and not agg_meets[j]:
            serving.append("infeasible")
            serving_reason.append(f"neither meets the SLA: {agg_text}; {best_reason[j]}")
        elif i < 0 or (agg_meets[j] and agg_j >= disagg):
            serving.append("aggregated")
            serving_reason.append(
                f"{agg_text}"
                + (
                    f" against {disagg:,.0f} for disaggregated {best[j]}"
                    if i >= 0
                    else "; no disaggregated ratio meets the SLA"
                )
            )
        else:
            serving.append("disaggregated")
            serving_reason.append(
                f"disaggregated {best[j]} {disagg:,.0f} tokens/s per GPU against {agg_text}"
                + ("" if agg_meets[j] else " (outside the SLA)")
            )
    return serving, serving_reason


def _pd_ratio_dataset(
    labels, conc, q, pairs, tps, fleet_gpus, runs, per_gpu, meets, best, agg, serving
) -> xr.Dataset:
    """pd_ratio's result without its attrs: per ratio, the aggregated alternative, the choice."""
    best, best_reason = best
    serving, serving_reason = serving
    pool = xr.DataArray(list(POOLS), dims="pool", attrs=glossary.attrs("pool"))
    coords = {
        "ratio": ("ratio", labels, glossary.attrs("ratio")),
        "concurrency": ("concurrency", conc, glossary.attrs("concurrency")),
        "pool": pool,
        "metric": ("metric", list(_METRICS), glossary.attrs("metric")),
        "stage": ("stage", list(_pd_fleet.kernels.STAGES), glossary.attrs("stage")),
        "latency_quantile": ((), q, glossary.attrs("latency_quantile")),
    }
    return xr.Dataset(
        {
            "instances": (("ratio", "pool"), np.array(pairs), glossary.attrs("instances")),
            "pool_tensor_parallel": (
                ("ratio", "pool"),
                [[tp[p] for p in POOLS] for tp in tps],
                glossary.attrs("pool_tensor_parallel"),
            ),
            "gpus": ("ratio", fleet_gpus, glossary.attrs("gpus")),
            "pool_concurrency": (
                ("ratio", "concurrency", "pool"),
                runs["pool_concurrency"],
                glossary.attrs("pool_concurrency"),
            ),
            "fleet_qps": (("ratio", "concurrency"), runs["fleet_qps"], glossary.attrs("fleet_qps")),
            "output_tokens_per_gpu": (
                ("ratio", "concurrency"),
                per_gpu,
                glossary.attrs("output_tokens_per_gpu"),
            ),
            "latency": (
                ("ratio", "concurrency", "metric"),
                runs["latency"],
                glossary.attrs("latency"),
            ),
            "meets_sla": (("ratio", "concurrency"), meets, glossary.attrs("meets_sla")),
            "ttft_median": (
                ("ratio", "concurrency"),
                runs["ttft_median"],
                glossary.attrs("ttft_median"),
            ),
            "bottleneck": (
                ("ratio", "concurrency"),
                runs["bottleneck"].astype(str),
                glossary.attrs("bottleneck"),
            ),
            "kv_transfer_s": ("ratio", runs["kv_transfer_s"], glossary.attrs("kv_transfer_s")),
            "ttft_stages": (
                ("ratio", "concurrency", "stage"),
                runs["stages"],
                glossary.attrs("ttft_stages"),
            ),
            "best_ratio": ("concurrency", best, glossary.attrs("best_ratio")),
            "best_reason": ("concurrency", best_reason, glossary.attrs("best_reason")),
            "aggregated_latency": (
                ("concurrency", "metric"),
                agg["latency"],
                glossary.attrs("latency"),
            ),
            "aggregated_output_tokens_per_gpu": (
                "concurrency",
                agg["output_tokens_per_gpu"],
                glossary.attrs("output_tokens_per_gpu"),
            ),
            "aggregated_gpus": (
                "concurrency",
                agg["gpus"],
                glossary.attrs("gpus", long_name="GPUs of the aggregated fleet compared"),
            ),
            "aggregated_meets_sla": ("concurrency", agg["meets_sla"], glossary.attrs("meets_sla")),
            "serving": ("concurrency", serving, glossary.attrs("serving")),
            "serving_reason": ("concurrency", serving_reason, glossary.attrs("serving_reason")),
        },
        coords=coords,
    )


def _pd_ratio_attrs(spec, gpu_id, sla, link_from, prompt, output_mean, aggregated) -> dict:
    """pd_ratio's attrs: the inputs, the means it used, the aggregated fleet, how TTFT adds up."""
    gpus, tp = aggregated
    fleet = (
        f"TP{tp} instances of {gpu_id} on the GPUs of the best ratio's fleet at each concurrency "
        "(the largest fleet's where none meets the SLA; aggregated_gpus)"
        if gpus is None
        else f"{gpus // tp} x {gpu_id} TP{tp} ({gpus // tp * tp} GPUs)"
    )
    return {
        "source": "capnb.capacity.pd_ratio (closed loop on a fixed fleet, engine model per pool)",
        "model": spec.name,
        "gpu": gpu_id,
        "sla": str(sla),
        "quantile": sla.quantile,
        "link": link_from,
        "output_tokens_mean": output_mean,
        "prompt_tokens_mean": float(prompt.mean()),
        "aggregated": fleet,
        "ttft": "per request: decode pre-allocation (SGLang) + prefill queue + prefill + KV "
        "transfer (with the link's queue) and the decode side's hand-off work + the decode "
        "instance's wait to stream the first token (SGLang: its next loop pass; vLLM: admission "
        "and a decode step), simulated over the fleet (capnb.kernels.pd); its quantile over the "
        "requests",
    }


def _target(target_qps) -> tuple[np.ndarray, np.ndarray, str]:
    if isinstance(target_qps, xr.DataArray):
        if target_qps.ndim == 0:
            values, slots, name = np.atleast_1d(float(target_qps)), np.array([0]), "slot"
        elif target_qps.ndim == 1:
            name = target_qps.dims[0]
            if target_qps.dtype.kind not in "biuf":
                raise InputError(
                    f"target_qps must be requests/s, got {target_qps.dtype} values over {name}"
                )
            values = np.asarray(target_qps.values, dtype=float)
            slots = (
                np.asarray(target_qps[name].values)
                if name in target_qps.coords
                else np.arange(values.size)
            )
        else:
            raise InputError(
                f"target_qps must be one rate per slot (1-D), got dims {target_qps.dims}; select a "
                "traffic_quantile first"
            )
    else:
        try:
            values = np.atleast_1d(np.asarray(target_qps, dtype=float))
        except (TypeError, ValueError):  # a word, a mapping: not a rate
            values = np.empty((0, 0))
        if values.ndim != 1:
            raise InputError(
                f"target_qps must be a number or one rate per slot, got {target_qps!r}"
            )
        slots, name = np.arange(values.size), "slot"
    if values.size == 0 or not (np.isfinite(values) & (values >= 0)).all():
        raise InputError(f"target_qps must be finite requests/s >= 0, got {values.tolist()}")
    return values, slots, name


def disaggregate(
    deployment: Deployment,
    workload: xr.Dataset,
    *,
    target_qps,
    sla: SLA,
    tensor_parallel=None,
    aggregated_tensor_parallel: int | None = None,
    link_bandwidth: float | None = None,
    usd_per_gpu_hour: float | None = None,
    curves: xr.Dataset | None = None,
    aggregated_curve: xr.Dataset | None = None,
    requests: int = 1000,
    seed: int = 0,
    settings: EngineSettings = POOL_ENGINE,
    calibration=None,
) -> xr.Dataset:
    """A plan per pool (prefill, decode) for a demand per slot, against the aggregated plan.

    Each pool's operating point is a concurrency per instance on its closed-loop curve
    (:func:`pool_curves`): the decode pool's keeps the quantile of TPOT within the SLA's
    ``tpot_s``; the prefill pool's keeps prefill TTFT + KV transfer + the decode pool's wait
    within its ``ttft_s``.
    Of all pairs meeting both, the one with the fewest GPUs per request/s
    (``tp_p / r_p + tp_d / r_d``, ``r`` the requests/s an instance completes there by the engine)
    is taken. Each slot then holds ``ceil(target / r_p)`` prefill and ``ceil(target / r_d)`` decode
    instances: the P:D ratio per slot. The aggregated plan: instances of
    ``aggregated_tensor_parallel`` (default the decode pool's) at the concurrency with the most
    requests/s keeping both quantiles within the SLA. The cheaper over the day (GPU-hours, every slot
    the same length) is chosen; where one is infeasible the other is chosen and the reason says why;
    where both are, ``serving`` is ``"infeasible"`` (never a silent fallback).

    Parameters
    ----------
    target_qps
        Requests/s per slot: a number, a 1-D array or a DataArray over one dim (e.g. the forecast's
        ``target_qps.sel(traffic_quantile=0.99)`` over ``slot``).
    Others
        As in :func:`pd_ratio`; ``usd_per_gpu_hour`` defaults to the catalog's price.

    Returns
    -------
    xarray.Dataset
        Over ``pool``, the slot dim and ``serving`` (aggregated, disaggregated): ``pool_tensor_parallel``,
        ``pool_concurrency`` and ``per_instance_qps`` (pool), ``instances`` (pool, slot),
        ``pd_ratio`` (slot), ``aggregated_instances`` (slot), ``gpus`` and ``usd_per_hour``
        (serving, slot), ``latency`` (serving, metric) at the operating points, ``meets_sla`` and
        ``serving_reason`` (serving), ``kv_transfer_s``; ``simulated_latency`` (metric) and
        ``ttft_stages`` (stage): the busiest slot's disaggregated fleet simulated per request
        (Poisson arrivals at its demand; NaN when that plan is infeasible); attrs ``serving`` (the
        choice) and ``recommendation`` (one sentence with the reason). Pools whose busiest slot
        the simulation puts past the SLA do not meet it (``meets_sla`` False, the simulation in
        ``serving_reason``): they are never the choice.
    """
    _check_workload(workload)
    spec, gpu_id = _deployed(deployment)
    demand, slots, slot_dim = _target(target_qps)
    q = _pd_bounds(sla)[2]  # the SLA must bound both TTFT (prefill) and TPOT (decode)
    tps = _tensor_parallel(_degree(deployment, tensor_parallel))
    agg_tp = _validate.positive_int(
        aggregated_tensor_parallel or tps["decode"], "aggregated_tensor_parallel"
    )
    bandwidth, link_from = _link(gpu_id, link_bandwidth)
    price = _gpu_price(gpu_id, usd_per_gpu_hour)
    run = _engine_settings(requests, seed, settings, calibration)
    if curves is None:
        curves = pool_curves(deployment, workload, tensor_parallel=tps, **run)
    else:
        _check_pool_degrees(curves, tps)
    if aggregated_curve is None:
        aggregated_curve = _aggregated_engine(deployment.at(agg_tp), workload, 256, run)

    prompt = np.asarray(workload.prompt_tokens.values, dtype=float)
    dtypes = _dtypes(deployment)
    disagg = _disaggregated_plan(curves, demand, tps, sla, spec, prompt, bandwidth,
                                 kv_dtype=dtypes["kv_dtype"])  # fmt: skip
    agg = _aggregated_plan(aggregated_curve, demand, agg_tp, sla)
    simulated = _simulated_peak(spec, gpu_id, workload, tps, disagg, demand, bandwidth, run,
                                sla, dtypes=dtypes)  # fmt: skip
    if simulated["note"]:  # the pools as sized miss the SLA on their own simulation: no plan
        disagg = disagg | {"meets_sla": False, "reason": simulated["note"]}
    choice, recommendation = _recommend(disagg, agg, demand, tps, agg_tp, gpu_id, q)
    ds = _disaggregate_dataset(disagg, agg, tps, demand, slots, slot_dim, price, q)
    ds["simulated_latency"] = xr.DataArray(
        simulated["latency"], dims="metric", attrs=glossary.attrs("simulated_latency")
    )
    ds["ttft_stages"] = xr.DataArray(
        simulated["stages"], dims="stage", attrs=glossary.attrs("ttft_stages")
    )
    ds = ds.assign_coords(stage=("stage", list(_pd_fleet.kernels.STAGES), glossary.attrs("stage")))
    ds.attrs = {
        "source": "capnb.capacity.disaggregate (engine model per pool)",
        "model": spec.name,
        "gpu": gpu_id,
        "sla": str(sla),
        "quantile": q,
        "link": link_from,
        "usd_per_gpu_hour": price,
        "aggregated_tensor_parallel": agg_tp,
        "serving": choice,
        "recommendation": recommendation,
    }
    return ds


def _simulated_peak(spec, gpu_id, workload, tps, disagg, demand, bandwidth, settings, sla, *,
                    dtypes=None) -> dict:  # fmt: skip
    """The disaggregated plan's busiest slot simulated per request (:mod:`._pd_fleet`).

    An open loop of Poisson arrivals at the slot's requests/s over its prefill and decode
    instances: the quantiles of TTFT (with every queue of the hand-off) and TPOT, the mean TTFT
    stages, and ``note``: when they miss the SLA the curves' operating points met, why, as the
    disaggregated plan's reason (it then does not meet the SLA).
    """
    from ..latency import _engine

    nan = {"latency": [math.nan] * 2, "stages": [math.nan] * len(_pd_fleet.kernels.STAGES),
           "note": ""}  # fmt: skip
    peak = int(np.argmax(demand))
    if not disagg["meets_sla"] or demand[peak] <= 0:
        return nan
    pair = tuple(int(v) for v in disagg["instances"][:, peak])
    n = _validate.positive_int(settings["requests"], "requests")
    shown, load = f"{pair[0]:,}:{pair[1]:,}", float(demand[peak])
    share, part = _fleet_share(pair, n)
    n = max(n, sum(share) * PEAK_REQUESTS_PER_INSTANCE)  # (a share's instances as many each)
    if share != pair:
        load *= part
        shown = f"{share[0]}:{share[1]}, a share of its {pair[0]:,}:{pair[1]:,}"
        pair = share
    dtypes = dtypes or {}
    setup = _pd_fleet.pool_setup(spec, gpu_id, tps, settings["settings"], **dtypes)
    cal = _engine._calibration_of(settings["calibration"], gpu_id, settings["settings"].engine)
    prompt, output, rng = _engine.sample_requests(workload, n, settings["seed"])
    moved = kv_transfer_s(
        spec,
        prompt,
        tensor_parallel=tps["prefill"],
        link_bandwidth=bandwidth,
        kv_dtype=dtypes.get("kv_dtype", "auto"),
    )
    run = _pd_fleet.fleet_run(setup, cal.engine_array(), pair, prompt, output, moved,
                              closed=False, load=load, warmup=math.ceil(0.1 * n),
                              quantile=sla.quantile, router="random", rng=rng)  # fmt: skip
    latency = [run["ttft"], run["tpot"]]
    unit = {"ttft": ("s", 1), "tpot": ("ms", 1e3)}
    missed = [
        f"{m.upper()} {v * unit[m][1]:.3g} {unit[m][0]} against the SLA's "
        f"{sla.bounds[m] * unit[m][1]:g} {unit[m][0]}"
        for m, v in zip(_METRICS, latency, strict=True)
        if not v <= sla.bounds[m]
    ]
    note = (
        f"past the SLA as sized: simulated per request at the busiest slot ({shown}, "
        f"{words.rate(demand[peak])} requests/s, Poisson arrivals) the hand-off's queues give "
        f"P{sla.quantile * 100:g} {' and '.join(missed)} ({_remedy(run['bottleneck'])})"
        if missed
        else ""
    )
    return {"latency": latency, "stages": run["stages"], "note": note}


def _fleet_share(pair: tuple[int, int], requests: int) -> tuple[tuple[int, int], float]:
    """The (prefill, decode) instances a fleet is simulated on, and their share of its load.

    With random routing each instance sees its own share of the arrivals, so a fleet over
    ``requests`` / :data:`PEAK_REQUESTS_PER_INSTANCE` instances is simulated as a share of it at
    the same requests/s per instance: of the sizes from that count to twice it (or to the one
    that holds a single instance of the smaller pool, at most ten times it), the one nearest the
    fleet's P:D proportion, the pool rounded down a little busier; the caller simulates as many
    requests a share instance. A share of 20 of 28:1,720 rounded to 1:20 loaded its decode
    instances at 2.9x the fleet's; 1:61 holds them within 1 %.
    """
    total = sum(pair)
    if total * PEAK_REQUESTS_PER_INSTANCE <= requests:
        return pair, 1.0
    size = max(2, requests // PEAK_REQUESTS_PER_INSTANCE)
    most = min(total, 10 * size, max(2 * size, math.ceil(total / max(1, min(pair)))))
    best = None
    for t in range(size, most + 1):
        share = (max(1, round(pair[0] * t / total)), max(1, round(pair[1] * t / total)))
        parts = (share[0] / pair[0], share[1] / pair[1])
        skew = max(parts) / min(parts)
        if best is None or skew < best[0] - 1e-12:
            best = (skew, share, max(parts))
    return best[1], best[2]


def _remedy(bottleneck: str) -> str:
    """What relieves the stage whose queue holds most of TTFT (the hand-off work is decode's)."""
    if bottleneck == "transfer":
        return "a faster link between the pools, or fewer bytes per request"
    pool = "prefill" if bottleneck == "prefill" else "decode"
    return f"add instances to the {pool} pool"


def _check_pool_degrees(curves: xr.Dataset, tps: dict[str, int]) -> None:
    """Given pool curves must be at the degrees the plan sizes and prices (GPUs per instance)."""
    if "pool_tensor_parallel" not in curves:
        raise InputError("curves: no pool_tensor_parallel; pass the result of pool_curves")
    have = {str(p): int(curves.pool_tensor_parallel.sel(pool=p)) for p in POOLS}
    if have != tps:
        raise InputError(
            f"curves: pool degrees {have} differ from tensor_parallel {tps}; build the curves at "
            "the same degrees (pool_curves(..., tensor_parallel=...)) or pass that tensor_parallel"
        )


def _gpu_price(gpu_id: str, usd_per_gpu_hour) -> float:
    """USD per GPU-hour: the given price, checked, or the catalog's."""
    from ..data import load_gpus

    if usd_per_gpu_hour is None:
        return float(load_gpus([gpu_id]).usd_per_gpu_hour.item())
    price = float(usd_per_gpu_hour)
    if not (math.isfinite(price) and price >= 0):
        raise InputError(f"usd_per_gpu_hour must be a number >= 0, got {usd_per_gpu_hour!r}")
    return price


def _pool_columns(curves: xr.Dataset, q: float) -> dict:
    """The pool curves' grid, requests/s per instance and quantile latencies as arrays."""
    at_q = _quantile_index(curves, q)
    return {
        "grid": curves.concurrency.values.astype(float),
        "x_p": curves.instance_qps.sel(pool="prefill").values,
        "x_d": curves.instance_qps.sel(pool="decode").values,
        "p_ttft": at_q.latency.sel(pool="prefill", metric="ttft").values,
        "d_ttft": at_q.latency.sel(pool="decode", metric="ttft").values,
        "d_tpot": at_q.latency.sel(pool="decode", metric="tpot").values,
    }


def _pool_points(cols: dict, q, tps, transfer_q, sla) -> tuple[tuple[int, int] | None, str]:
    """The (prefill, decode) points on the pool curves with the fewest GPUs per request/s, and why.

    None when no pair meets the SLA; the reason then says which bound no point meets.
    """
    ttft_sla, tpot_sla = sla.bounds["ttft"], sla.bounds["tpot"]
    grid, x_p, x_d = cols["grid"], cols["x_p"], cols["x_d"]
    p_ttft, d_ttft, d_tpot = cols["p_ttft"], cols["d_ttft"], cols["d_tpot"]
    best = None  # (GPUs per request/s, i_p, i_d)
    for i_d in np.flatnonzero(d_tpot <= tpot_sla):
        budget = ttft_sla - transfer_q - d_ttft[i_d]
        ok_p = np.flatnonzero(p_ttft <= budget)
        if ok_p.size == 0:
            continue
        i_p = int(ok_p[np.argmax(x_p[ok_p])])
        cost = tps["prefill"] / x_p[i_p] + tps["decode"] / x_d[i_d]
        if best is None or cost < best[0]:
            best = (cost, i_p, int(i_d))
    if best is not None:
        _, i_p, i_d = best
        return (i_p, i_d), (
            f"prefill at {words.count(grid[i_p], 'request')} and decode at "
            f"{words.count(grid[i_d], 'request')} in flight per instance: "
            f"{x_p[i_p]:.3g} and {x_d[i_d]:.3g} requests/s per instance"
        )
    if not (d_tpot <= tpot_sla).any():
        return None, (
            f"infeasible: the decode pool's P{q * 100:g} TPOT is {d_tpot[0] * 1e3:.3g} ms at "
            f"one request in flight, above the SLA's {tpot_sla * 1e3:g} ms"
        )
    floor = p_ttft[0] + transfer_q + np.nanmin(d_ttft[d_tpot <= tpot_sla])
    return None, (
        f"infeasible: prefill TTFT + KV transfer + decode wait is at least {floor:.3g} s "
        f"(P{q * 100:g}), above the SLA's {ttft_sla:g} s"
    )


def _disaggregated_plan(curves, demand, tps, sla, spec, prompt, bandwidth,
                        kv_dtype: str = "auto") -> dict:  # fmt: skip
    """Both pools at their operating points: instances per slot, GPUs, P:D ratio, latency."""
    q = sla.quantile
    cols = _pool_columns(curves, q)
    transfer_q = float(
        kv_transfer_s(
            spec,
            np.quantile(prompt, q),
            tensor_parallel=tps["prefill"],
            link_bandwidth=bandwidth,
            kv_dtype=kv_dtype,
        )
    )
    points, reason = _pool_points(cols, q, tps, transfer_q, sla)
    plan = {"meets_sla": points is not None, "reason": reason, "kv_transfer_s": transfer_q}
    if points is None:
        nan_slots = np.full(demand.size, np.nan)
        return plan | {
            "instances": np.stack([nan_slots, nan_slots]),
            "gpus": nan_slots,
            "pd_ratio": nan_slots,
            "latency": [math.nan] * 2,
            "pool_concurrency": [math.nan] * 2,
            "per_instance_qps": [math.nan] * 2,
        }
    i_p, i_d = points
    x_p, x_d = cols["x_p"], cols["x_d"]
    inst = np.stack([instances_needed(demand, x_p[i_p]), instances_needed(demand, x_d[i_d])])
    return plan | {
        "instances": inst,
        "gpus": inst[0] * tps["prefill"] + inst[1] * tps["decode"],
        "pd_ratio": np.where(inst[1] > 0, inst[0] / np.where(inst[1] > 0, inst[1], 1), np.nan),
        "latency": [cols["p_ttft"][i_p] + transfer_q + cols["d_ttft"][i_d], cols["d_tpot"][i_d]],
        "pool_concurrency": [cols["grid"][i_p], cols["grid"][i_d]],
        "per_instance_qps": [x_p[i_p], x_d[i_d]],
    }


def _aggregated_plan(curve: xr.Dataset, demand, tp: int, sla) -> dict:
    """Aggregated instances at the concurrency with the most requests/s within the SLA, per slot."""
    q, ttft_sla, tpot_sla = sla.quantile, sla.bounds["ttft"], sla.bounds["tpot"]
    agg_q = _quantile_index(curve, q)
    a_grid = curve.concurrency.values.astype(float)
    a_x = curve.throughput.values
    a_ttft = agg_q.latency.sel(metric="ttft").values
    a_tpot = agg_q.latency.sel(metric="tpot").values
    ok_a = np.flatnonzero((a_ttft <= ttft_sla) & (a_tpot <= tpot_sla))
    if ok_a.size == 0:
        nan_slots = np.full(demand.size, np.nan)
        return {
            "meets_sla": False,
            "reason": f"infeasible: at one request in flight P{q * 100:g} TTFT is {a_ttft[0]:.3g} "
            f"s and TPOT {a_tpot[0] * 1e3:.3g} ms against the SLA's {ttft_sla:g} s and "
            f"{tpot_sla * 1e3:g} ms",
            "instances": nan_slots,
            "gpus": nan_slots,
            "latency": [math.nan] * 2,
        }
    i_a = int(ok_a[np.argmax(a_x[ok_a])])
    inst = instances_needed(demand, a_x[i_a])
    return {
        "meets_sla": True,
        "reason": f"{words.count(a_grid[i_a], 'request')} in flight per instance: "
        f"{a_x[i_a]:.3g} requests/s",
        "instances": inst,
        "gpus": inst * tp,
        "latency": [a_ttft[i_a], a_tpot[i_a]],
    }


def _recommend(disagg: dict, agg: dict, demand, tps, agg_tp, gpu_id, q) -> tuple[str, str]:
    """The cheaper plan over the slots in GPU-slots (or "infeasible"), in one sentence with why."""
    hours = {
        "aggregated": float(np.sum(agg["gpus"])),
        "disaggregated": float(np.sum(disagg["gpus"])),
    }
    peak = int(np.argmax(demand))
    inst, agg_inst = disagg["instances"], agg["instances"]
    if not agg["meets_sla"] and not disagg["meets_sla"]:
        return "infeasible", (
            f"Infeasible: aggregated {agg['reason']}; disaggregated {disagg['reason']}."
        )
    if not disagg["meets_sla"] or (
        agg["meets_sla"] and hours["aggregated"] <= hours["disaggregated"]
    ):
        why = (
            f"disaggregated is {disagg['reason']}"
            if not disagg["meets_sla"]
            else f"{hours['aggregated']:,.0f} GPU-slots {words.over_slots(len(demand))} against "
            f"{hours['disaggregated']:,.0f} "
            f"disaggregated ({int(inst[0, peak]):,}:{int(inst[1, peak]):,} at the busiest slot)"
        )
        lat = agg["latency"]
        return "aggregated", (
            f"Serve aggregated: {words.count(int(agg_inst[peak]), 'instance')} of {agg_tp} x "
            f"{gpu_id} at the busiest slot ({words.rate(demand[peak])} requests/s), sized at "
            f"{_sized(agg['reason'])}, where P{q * 100:g} TTFT {lat[0]:.3g} s, "
            f"TPOT {lat[1] * 1e3:.3g} ms; {why}."
        )
    why = (
        f"aggregated is {agg['reason']}"
        if not agg["meets_sla"]
        else f"{hours['disaggregated']:,.0f} GPU-slots {words.over_slots(len(demand))} against "
        f"{hours['aggregated']:,.0f} "
        f"aggregated ({int(agg_inst[peak]):,} x TP{agg_tp} at the busiest slot)"
    )
    lat = disagg["latency"]
    return "disaggregated", (
        f"Serve disaggregated: {int(inst[0, peak]):,} prefill (TP{tps['prefill']}) and "
        f"{int(inst[1, peak]):,} decode (TP{tps['decode']}) {gpu_id} instances at the busiest "
        f"slot ({words.rate(demand[peak])} requests/s), sized with "
        f"{_sized(disagg['reason'])}, where P{q * 100:g} TTFT {lat[0]:.3g} s "
        f"(KV transfer {disagg['kv_transfer_s'] * 1e3:.2g} ms), TPOT {lat[1] * 1e3:.3g} ms; {why}."
    )


def _sized(reason: str) -> str:
    """A pool's operating point: "45 requests in flight per instance (6.53 requests/s)".

    The latencies a plan states are read there, the most each instance carries, not at a slot's
    own rate.
    """
    point, rate = reason.split(": ", 1)
    return f"{point} ({rate.removesuffix(' per instance')})"


def _disaggregate_dataset(disagg, agg, tps, demand, slots, slot_dim, price, q) -> xr.Dataset:
    """The result of disaggregate without its attrs: both pools, both plans side by side per slot."""
    pool = xr.DataArray(list(POOLS), dims="pool", attrs=glossary.attrs("pool"))
    serving = ["aggregated", "disaggregated"]
    slot_attrs = glossary.attrs("slot") if slot_dim == "slot" else {}
    gpus = np.stack([agg["gpus"], disagg["gpus"]])
    return xr.Dataset(
        {
            "pool_tensor_parallel": (
                "pool",
                [tps[p] for p in POOLS],
                glossary.attrs("pool_tensor_parallel"),
            ),
            "pool_concurrency": (
                "pool",
                disagg["pool_concurrency"],
                glossary.attrs("pool_concurrency"),
            ),
            "per_instance_qps": (
                "pool",
                disagg["per_instance_qps"],
                glossary.attrs("per_instance_qps"),
            ),
            "instances": (("pool", slot_dim), disagg["instances"], glossary.attrs("instances")),
            "pd_ratio": (slot_dim, disagg["pd_ratio"], glossary.attrs("pd_ratio")),
            "aggregated_instances": (slot_dim, agg["instances"], glossary.attrs("instances")),
            "target_qps": (slot_dim, demand, glossary.attrs("target_qps")),
            "gpus": (("serving", slot_dim), gpus, glossary.attrs("gpus")),
            "usd_per_hour": (("serving", slot_dim), gpus * price, glossary.attrs("usd_per_hour")),
            "latency": (
                ("serving", "metric"),
                np.array([agg["latency"], disagg["latency"]]),
                glossary.attrs("latency"),
            ),
            "meets_sla": (
                "serving",
                [agg["meets_sla"], disagg["meets_sla"]],
                glossary.attrs("meets_sla"),
            ),
            "serving_reason": (
                "serving",
                [agg["reason"], disagg["reason"]],
                glossary.attrs("serving_reason"),
            ),
            "kv_transfer_s": ((), disagg["kv_transfer_s"], glossary.attrs("kv_transfer_s")),
        },
        coords={
            "pool": pool,
            slot_dim: (slot_dim, slots, slot_attrs),
            "serving": ("serving", serving, glossary.attrs("serving")),
            "metric": ("metric", list(_METRICS), glossary.attrs("metric")),
            "latency_quantile": ((), q, glossary.attrs("latency_quantile")),
        },
    )

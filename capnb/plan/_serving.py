"""The plan's serving mode: aggregated against disaggregated prefill/decode on the chosen GPU.

:func:`capnb.capacity.disaggregate` sizes a prefill pool and a decode pool per slot on the
serving-engine model (TTFT bounds the prefill pool, TPOT the decode pool) and the aggregated
fleet for the same demand and SLA on the same model, and chooses the cheaper with its reason. The
comparison needs the SLA's TTFT and TPOT bounds (an SLA without both does not split between the
pools: the plan says so and does not compare).

Its pools then hand off to the elasticity step one by one
(:func:`capnb.elasticity.simulate_pools`: every request passes through both, a ``demand_share``
of 1 each), replayed over the trace with the cold start of the chosen GPU and the scale-down window
the elasticity step chose (:func:`capnb.plan._fleet.replay_schedule`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import xarray as xr

from .. import glossary, words
from ._config import PlanConfig
from ._fleet import replay_schedule
from ._steps import per_month as month_factor

__all__ = ["compare_serving", "serving_sentence", "serving_variables"]


def _unsplit(cfg: PlanConfig) -> str:
    """Why the SLA cannot size prefill and decode pools apart ("" when it can).

    Both pools need a TTFT and a TPOT bound, and are sized on those alone: an E2E or ITL bound
    would be left unchecked (:func:`capnb.capacity._disagg.pd_sla_gaps`).
    """
    from ..capacity._disagg import pd_sla_gaps

    missing, unsized = pd_sla_gaps(cfg.sla)
    if missing:
        return (
            f"not compared: the SLA ({cfg.sla}) has no {' or '.join(missing)}, and a prefill pool "
            "answers to a TTFT bound and a decode pool to a TPOT bound (give both in [sla] to "
            "compare)"
        )
    if not unsized:
        return ""
    return (
        f"not compared: the SLA ({cfg.sla}) has {' and '.join(unsized)}, and the pools are sized "
        "on TTFT (prefill) and TPOT (decode) alone: an E2E bound spans both pools, and an ITL "
        "bound is not simulated per pool (leave it out of [sla] to compare on TTFT and TPOT)"
    )


#: Engines that serve prefill and decode in separate pools (the KV cache sent between them):
#: vLLM V1 (its KV connectors), SGLang (``--disaggregation-mode``), TensorRT-LLM (its
#: disaggregated serving). Their pools are simulated with :data:`capnb.capacity.POOL_ENGINE`'s
#: limits and the engine's own scheduling and overheads.
DISAGGREGATING = ("vllm-v1", "sglang", "trtllm")


def compare_serving(
    cfg: PlanConfig, workload, fc: xr.Dataset, gpu: str, tp: int, demand, cold, policy,
    calibration=None,
):  # fmt: skip
    """``(comparison, replay)``; ``(None, None)`` when not asked; ``(reason, None)`` when it cannot.

    ``workload``: the lengths the capacity step priced; ``fc``: the forecast's target per slot;
    ``gpu``, ``tp``: the capacity step's choice (both pools and the aggregated fleet use that GPU and
    degree); ``demand``: requests/s per simulation step; ``cold``: the chosen GPU's cold start (s);
    ``policy``: the elasticity step's chosen :class:`capnb.elasticity.Policy` (its scale-down
    window is the pools'); ``calibration``: the engine's on ``gpu`` where the capacity step
    priced it on the user's own runs (None: the bundled one).
    """
    from .. import capacity

    if cfg.serving.disaggregation == "none":
        return None, None
    unsplit = _unsplit(cfg)
    if unsplit:
        return unsplit, None
    if cfg.serving.engine not in DISAGGREGATING:
        from ..records import ENGINES

        return (
            f"not compared: {ENGINES[cfg.serving.engine]} serves no disaggregated prefill and "
            f"decode pools (capnb compares them for "
            f"{', '.join(ENGINES[engine] for engine in DISAGGREGATING)})"
        ), None
    from ..data import load_gpus

    if not np.isfinite(float(load_gpus([gpu]).interconnect_bandwidth.item())):
        return (
            f"not compared: {gpu} has no GPU-to-GPU link bandwidth in the catalog, "
            "so the KV transfer between a prefill and a decode pool cannot be timed (give it to "
            "capnb.capacity.disaggregate as link_bandwidth, in bytes/s, to compare)."
        ), None
    target = fc.target_qps.sel(traffic_quantile=cfg.traffic.traffic_quantile, drop=True)
    tokens = cfg.serving.max_num_batched_tokens or capacity.POOL_ENGINE.max_num_batched_tokens
    pools = dataclasses.replace(capacity.POOL_ENGINE, engine=cfg.serving.engine,
                                max_num_batched_tokens=tokens)  # fmt: skip
    result = capacity.disaggregate(
        capacity.Deployment(cfg.serving.model, gpu, int(tp)),
        workload,
        target_qps=target,
        sla=cfg.sla,
        aggregated_tensor_parallel=tp,
        seed=cfg.traffic.seed,
        calibration=calibration,
        settings=pools,
    )
    share = float(cfg.serving.prefix_cache_share)
    if share > 0:  # the plan's own fleet is sized with the cache's hits; these pools are not
        result.attrs["prefix_cache"] = (
            f"Both sides are sized without the prefix cache (prefix_cache_share = {share:g}: "
            "capnb.capacity.disaggregate models none), so the aggregated fleet here is not the "
            "plan's own, whose instances serve more requests/s with the cache's hits"
        )
    replay = None
    if bool(result.meets_sla.sel(serving="disaggregated")):
        fleet = xr.Dataset(
            {"instances": result.instances.astype(np.int64), "demand_share": ("pool", [1.0, 1.0])},
            coords={
                "per_instance_qps": result.per_instance_qps,
                "tensor_parallel": result.pool_tensor_parallel,
                "gpu": ("pool", [gpu, gpu]),
            },
        ).assign_attrs(slots=cfg.traffic.slots)
        replay = replay_schedule(
            cfg, fleet, demand, fc, cold_start_s=cold,
            cooldown_s=float(policy.cooldown_s),
        )  # fmt: skip
    return result, replay


def _own_fleet(result, own) -> str:
    """The plan's own fleet beside the comparison's aggregated one, where the two differ.

    ``own``: the plan's instances per slot (its capacity step's ``fixed_instances``). The
    comparison sizes both modes at concurrencies the engine simulated; the plan reads its safe
    concurrency between them (on the model its Latencies line names), so its fleet can be smaller.
    """
    if own is None:
        return ""
    theirs = np.asarray(result.aggregated_instances.values, dtype=float)
    mine = np.asarray(own, dtype=float)
    # an aggregated mode that misses the SLA has no fleet (NaN): its reason says why
    if mine.shape != theirs.shape or np.array_equal(mine, theirs) or np.isnan(theirs).any():
        return ""
    meets = bool(result.meets_sla.sel(serving="disaggregated"))  # else no pools to weigh
    tp = int(result.attrs["aggregated_tensor_parallel"])
    slots = result.usd_per_hour.dims[-1]
    split = float(result.gpus.sum(slots).sel(serving="disaggregated"))
    gpus = float(mine.sum()) * tp
    against = (
        f": disaggregated, {words.change(split / gpus)} {'fewer' if split <= gpus else 'more'} "
        "GPUs than it"
        if meets and np.isfinite(split) and gpus > 0
        else ""
    )
    return (
        f"; the plan's own aggregated fleet above holds {int(mine.max()):,} x TP{tp} at the "
        f"busiest slot, {gpus:,.0f} GPU-slots {words.over_slots(mine.size)} (its safe "
        "concurrency read between "
        f"the simulated ones, on the model its Latencies line names; this comparison sizes both "
        f"modes at simulated concurrencies){against}"
    )


def _against_chosen(replay, per_month: float, chosen) -> tuple[str, bool]:
    """The pools' replay beside the plan's chosen run, and whether the pools lose to it.

    ``chosen``: the chosen run's ``usd`` and ``breach_s`` over the same hours and the plan's
    ``budget_minutes`` a month. The pools lose when they cost more, or break the budget the
    chosen run keeps.
    """
    if chosen is None:
        return "", False
    usd, mine = replay.attrs["usd"] * per_month, chosen["usd"] * per_month
    breach, budget = replay.attrs["breach_s"] * per_month / 60, chosen["budget_minutes"]
    kept = chosen["breach_s"] * per_month / 60 <= budget
    dearer, over = usd > mine, breach > budget
    if not np.isfinite(mine):  # the chosen run has no price
        return "", over and kept
    # (the chosen run's own cost and breach are the answer's: said there, not copied here)
    words_ = (
        f": the pools cost {words.change(usd / mine)} {'more' if dearer else 'less'} than the "
        "plan's chosen run"
        + (f", and are in breach {breach:,.0f} minutes a month, over the budget of {budget:,.0f}"
           if over else "")
    )  # fmt: skip
    return words_, dearer or (over and kept)


def serving_sentence(result, replay, hours: float, own=None, chosen=None) -> str:
    """The plan's line on the serving mode: the choice, its reason, and the pools' replay.

    ``own``: the plan's own instances per slot, said beside the comparison's aggregated fleet
    where the two differ. ``chosen``: the plan's chosen run (``usd``, ``breach_s`` over the same
    ``hours``) and its ``budget_minutes`` a month: pools whose replay costs more, or breaks the
    budget that run keeps, are not recommended, whatever their GPU-slots.
    """
    if isinstance(result, str):
        return result
    gpus = result.gpus.mean(result.usd_per_hour.dims[-1])
    saving = 1 - float(gpus.sel(serving="disaggregated")) / float(gpus.sel(serving="aggregated"))
    # a mode that misses the SLA (no fleet, or pools past it in their simulation): no share to
    # state, the reason says why
    share = (
        f": {words.change(1 - saving)} {'fewer' if saving >= 0 else 'more'} GPUs disaggregated"
        if np.isfinite(saving) and bool(result.meets_sla.all())
        else ""
    )
    line = (
        f"{str(result.attrs['recommendation']).rstrip('.')}{share}{_own_fleet(result, own)}. "
        f"Both sized on the serving-engine model, the KV moved over {result.attrs['link']}"
    )
    if replay is not None:
        per_month = month_factor(hours)
        against, loses = _against_chosen(replay, per_month, chosen)
        line += (
            f"; the two pools replayed over the trace (each started one cold start ahead of its "
            f"slot plan): {replay.attrs['breach_s'] * per_month / 60:,.0f} SLA-breach minutes a "
            f"month, {replay.attrs['usd'] * per_month:,.0f} USD a month{against}"
        )
        lead = "Serve disaggregated: "
        if loses and line.startswith(lead):
            line = (
                "Keep the plan's aggregated fleet: replayed over the trace the pools lose to it "
                f"(below). On GPU-slots alone, disaggregated would be {line.removeprefix(lead)}"
            )
    if result.attrs.get("prefix_cache"):
        line += f". {result.attrs['prefix_cache']}"
    return line + "."


def serving_variables(result, replay) -> xr.Dataset:
    """The comparison as plan variables (``serving_*``) over ``serving_pool``, ``serving``, slot.

    The disaggregated pools are ``serving_pool`` inside a plan: the mix's pools hold ``pool``.
    """
    keep = ["pool_tensor_parallel", "pool_concurrency", "per_instance_qps", "instances",
            "pd_ratio", "aggregated_instances", "gpus", "usd_per_hour", "meets_sla",
            "serving_reason", "kv_transfer_s"]  # fmt: skip
    out = result[keep].rename({v: f"serving_{v}" for v in keep if not v.startswith("serving_")})
    out = out.rename({"pool": "serving_pool"})
    out["serving_pool"].attrs = glossary.attrs("serving_pool")  # not pool's, which it renames
    if replay is not None:
        for name in ("breach_s", "usd", "gpu_hours"):
            out[f"serving_pool_{name}"] = (
                ("serving_pool",),
                replay[name].values,
                dict(replay[name].attrs),
            )
    for name in out.data_vars:
        out[name].attrs["step"] = "serving"
    out.attrs = {}
    return out.drop_vars([c for c in out.coords if c not in out.dims], errors="ignore")

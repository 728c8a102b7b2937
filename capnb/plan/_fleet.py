"""The plan's fleet: the cheapest mix of GPU types per slot, and its pools replayed over the trace.

The capacity step answers with one GPU type on demand; :func:`capnb.capacity.mix` prices the
same per-instance throughputs at one provider's reserved, on-demand (and spot) prices and finds the
cheapest whole-instance fleet per slot; :func:`capnb.elasticity.simulate_pools` replays each of its
pools over the trace with the policy the elasticity step chose, its reserved base as the floor.
The plan quotes both beside the single type on demand at the same prices.
"""

from __future__ import annotations

import math

import xarray as xr

from .. import glossary, words
from ..glossary import HOURS_PER_MONTH
from ._config import PlanConfig
from ._steps import per_month as month_factor

__all__ = [
    "MIP_GAP",
    "elastic_at",
    "mixed_fleet",
    "replay_mix",
    "replay_schedule",
    "sentence",
    "variables",
]

#: The plan's mix may stop within 2 % of the solver's proven lower bound (the mix reports the gap
#: it reached, ``optimality_gap``). The plan's forecast is far less sure than that, and proving a
#: tighter gap can take minutes: on the default plan (24 slots, four GPU types, reserved and on
#: demand) a 0.1 % proof took 20 CPU s and 0.2 % 26 s, while the base of the program with
#: fractional on-demand counts, priced exactly, took 0.3 s, was 1.7 % above that program's bound
#: and 0.013 % cheaper than the base the 0.1 % proof stopped at; with spot a proof has taken 430 s.
MIP_GAP = 0.02


def mixed_fleet(cfg: PlanConfig, cap: xr.Dataset, fc: xr.Dataset, demand, policy):
    """``(mix, replay)``, ``(None, None)`` (no mix asked) or ``(reason, None)`` (none priced).

    The reason: the provider prices none of the GPUs that meet the SLA; the plan states it and
    stands.

    ``cap``: the capacity step over (gpu, tensor_parallel); ``fc``: the forecast step's target
    (requests/s per slot at ``cfg.traffic.traffic_quantile``); ``demand``: requests/s per simulation
    step; ``policy``: the elasticity step's chosen :class:`capnb.elasticity.Policy` (its
    scale-down window is the pools').
    """
    from .. import capacity, data
    from ..errors import NotPricedError

    if cfg.fleet.provider == "none":
        return None, None
    prices = data.gpu_prices(cfg.fleet.provider)
    options = xr.Dataset({"per_instance_qps": cap.per_instance_qps})
    target = fc.target_qps.sel(traffic_quantile=cfg.traffic.traffic_quantile, drop=True)
    try:
        mixed = capacity.mix(
            options,
            target,
            prices=prices,
            reserved=None if cfg.fleet.reserved == "none" else cfg.fleet.reserved,
            spot_preemption=None
            if cfg.fleet.spot_preemption == "none"
            else float(cfg.fleet.spot_preemption),
            mip_gap=MIP_GAP,
        )
    except NotPricedError as error:  # the capacity step names the GPUs that meet the SLA
        return (
            f"not priced: {cfg.fleet.provider} lists no price for "
            f"{', '.join(error.gpus) or 'any GPU'} that meets the SLA, so no mix of GPU types is "
            f'planned (set [fleet] provider to one that prices them, or "none").'
        ), None
    mixed.attrs["slots"] = cfg.traffic.slots
    return mixed, replay_mix(cfg, mixed, demand, fc, policy)


def replay_mix(cfg: PlanConfig, mixed: xr.Dataset, demand, fc: xr.Dataset, policy):
    """The mix's pools replayed over ``demand`` (requests/s per step), pool by pool.

    The mix is a schedule: each pool reads its own share of the forecast's slot plan (``fc`` at
    ``cfg.traffic.traffic_quantile``) one cold start ahead (the predictive policy at full utilisation of
    the planned instances) and adds the load seen above it; its reserved base is its floor; the
    scale-down window is the elasticity step's choice (``policy``, a
    :class:`capnb.elasticity.Policy`). ``fc`` may be fitted on other days than
    ``demand`` (a backtest).
    """
    from .. import data
    from ..elasticity import coldstart

    used = mixed.sel(pool=(mixed.instances.sum("slot") > 0).values)
    colds = {}
    for pool, gpu, tp in zip(used.pool.values, used.gpu.values, used.tensor_parallel.values,
                             strict=True):  # fmt: skip
        if cfg.elasticity.cold_start_s == "estimate":
            estimate = coldstart.estimate(cfg.serving.model, str(gpu), tensor_parallel=int(tp))
            seconds = float(estimate.cold_start_s.squeeze())
        else:
            seconds = float(cfg.elasticity.cold_start_s)
        colds[str(pool)] = coldstart.in_whole_steps(seconds, cfg.elasticity.step_s)
    return replay_schedule(
        cfg,
        used,
        demand,
        fc,
        cold_start_s=colds,
        cooldown_s=float(policy.cooldown_s),
        prices=data.gpu_prices(cfg.fleet.provider),
        spot_preemption_rate=cfg.fleet.spot_preemption_rate
        if cfg.fleet.spot_preemption != "none"
        else None,
        seed=cfg.traffic.seed,
    )


def replay_schedule(cfg: PlanConfig, fleet: xr.Dataset, demand, fc: xr.Dataset, *, cold_start_s,
                    cooldown_s: float, **extra):  # fmt: skip
    """A fleet planned per slot (over ``pool``), replayed over ``demand`` pool by pool.

    Each pool reads its own share of the forecast's slot plan (``fc`` at ``cfg.traffic.traffic_quantile``)
    one cold start ahead (the predictive policy at full utilisation of the planned instances) and
    adds the load seen above it; ``cooldown_s`` is its scale-down window. ``extra``: further
    arguments of :func:`capnb.elasticity.simulate_pools` (prices, spot preemption, seed).
    """
    from .. import elasticity

    return elasticity.simulate_pools(
        demand,
        fleet,
        policy=elasticity.Policy("predictive", scale_up_threshold=1.0, cooldown_s=cooldown_s),
        cold_start_s=cold_start_s,
        step_s=cfg.elasticity.step_s,
        tolerance_s=cfg.elasticity.tolerance_s,
        forecast=elasticity.forecast_demand(demand, fc, quantile=cfg.traffic.traffic_quantile),
        **extra,
    )


def elastic_at(prices: xr.Dataset, gpu: str, gpu_hours: float) -> float:
    """USD of the elasticity step's chosen run (one type) at the provider's on-demand price."""
    known = gpu in set(prices.gpu.values)
    per = float(prices.usd_per_gpu_hour.sel(gpu=gpu, pricing="on_demand")) if known else math.nan
    return gpu_hours * per


def _saving(share: float) -> str:
    """The mix's saving on one type as planned: ``13% less``, ``0.3% less``, or none."""
    return f"{words.change(1 - share)} less" if share > 0 else "no saving"


def sentence(mixed: xr.Dataset, replay: xr.Dataset, hours: float, elastic: dict) -> str:
    """The plan's line on the mix: the mix beside one type, both planned and both replayed.

    ``elastic``: the elasticity step's chosen run of one type, ``usd`` at the provider's
    on-demand price and ``breach_s``, over the same ``hours``, and the plan's ``budget_minutes``
    a month (optional), which the mix's replay is said to break where it does. The mix is never
    dearer than one type on demand *as planned* (that fleet is one of the integer program's
    solutions); replayed over the trace, it is compared with the elastic run, which may serve the
    same traffic for less.
    """
    from ..capacity._mix import bought_above

    used = mixed.sel(pool=(mixed.instances.sum("slot") > 0).values)
    base = [
        f"{int(n)} x {p}"
        for p, n in zip(used.pool.values, used.reserved_instances.values, strict=True)
        if n > 0
    ]
    above = bought_above(used.on_demand_instances, used.spot_instances)  # on demand, spot, ...
    per_month = month_factor(hours)
    mix_month = replay.attrs["usd"] * per_month
    one_month = elastic["usd"] * per_month
    one_breach = elastic["breach_s"] * per_month / 60
    mix_breach = replay.attrs["breach_s"] * per_month / 60
    budget = elastic.get("budget_minutes", math.inf)
    over = f", over the plan's breach budget of {budget:,.0f}" if mix_breach > budget else ""
    longer = (
        "in breach longer (it holds no warm spares or burst buffer: it is planned on the forecast "
        "alone)"
        if replay.attrs["breach_s"] > elastic["breach_s"]
        else ""
    )
    if not math.isfinite(one_month):  # the plan's GPU is not on this provider's list
        against = (
            "; the chosen single-type run has no on-demand price at this provider to compare "
            f"with (it replayed with {one_breach:,.0f} SLA-breach minutes a month)"
            + (f": the mix is {longer}" if longer else "")
        )
    else:
        verdict = (
            "costs the same as" if mix_month == one_month
            else f"is {words.change(mix_month / one_month)} "
            f"{'less' if mix_month < one_month else 'more'} than"
        )  # fmt: skip
        against = (
            f"; the chosen single-type run at the same on-demand prices costs {one_month:,.0f} "
            f"USD a month with {one_breach:,.0f}: the mix {verdict} the chosen "
            f"single-type run{f', and {longer}' if longer else ''}"
        )
    return (
        f"planned per slot for the forecast at {mixed.attrs['provider']}'s prices, one type "
        f"on demand ({mixed.attrs['single_type_pool']}) costs "
        f"{mixed.attrs['single_type_usd_per_hour'] * HOURS_PER_MONTH:,.0f} USD a month and the "
        f"cheapest mix ({', '.join(base) or 'nothing'} reserved; "
        f"{' + '.join(str(p) for p in used.pool.values)}"
        f"{f' {above} above' if above != 'nothing' else ', nothing above'}) "
        f"{mixed.attrs['mix_usd_per_hour'] * HOURS_PER_MONTH:,.0f} USD a month "
        f"({_saving(float(mixed.attrs['saving']))}). Replayed over the trace pool by pool (each "
        f"pool started one cold start ahead of its slot plan, its reserved base as its floor), "
        f"the mix costs {mix_month:,.0f} USD a month with "
        f"{mix_breach:,.0f} SLA-breach minutes a month{over}"
        + (
            f" ({words.count(replay.attrs['preempted'], 'spot instance')} preempted at "
            f"{float(replay.attrs['spot_preemption_rate']):g} an instance-hour and replaced)"
            if replay.attrs.get("preempted")
            else ""
        )
        + f"{against}"
        + (
            f" (spot asked for, but {mixed.attrs['provider']} lists no spot price for "
            f"{mixed.attrs['spot_unpriced']}: none planned)"
            if mixed.attrs.get("spot_unpriced")
            else ""
        )
        + (
            f" ({mixed.attrs['not_priced']} meet{'s' if ', ' not in mixed.attrs['not_priced'] else ''}"
            f" the SLA, but {mixed.attrs['provider']} lists no price for "
            f"{'it' if ', ' not in mixed.attrs['not_priced'] else 'them'}: not in the mix)"
            if mixed.attrs.get("not_priced")
            else ""
        )
        + (
            f" ({mixed.attrs['reserved_pricing']} asked for, but {mixed.attrs['provider']} lists "
            f"no {mixed.attrs['reserved_pricing']} price for {mixed.attrs['reserved_unpriced']}: "
            "none reserved)"
            if mixed.attrs.get("reserved_unpriced")
            else ""
        )
        + "."
    )


def variables(mixed: xr.Dataset, replay: xr.Dataset) -> xr.Dataset:
    """The mix and its replay as plan variables over ``pool``: ``mix_*`` and ``pool_*``.

    The pools' GPU, tensor-parallel degree and throughput become ``pool_gpu``,
    ``pool_tensor_parallel`` and ``pool_per_instance_qps`` (the plan's ``gpu`` and
    ``tensor_parallel`` are the capacity step's dims).
    """
    keep = ["reserved_instances", "on_demand_instances", "spot_instances", "instances",
            "served_qps", "usd_per_hour", "single_type_usd_per_hour"]  # fmt: skip
    described = {"gpu": "pool_gpu", "tensor_parallel": "pool_tensor_parallel",
                 "per_instance_qps": "pool_per_instance_qps"}  # fmt: skip
    mix_part = mixed[keep].rename({name: f"mix_{name}" for name in keep})
    mix_part = mix_part.rename(described).set_coords(list(described.values()))
    # a renamed variable the glossary lists carries its own name's attrs, not the old name's
    mix_part["pool_tensor_parallel"].attrs = glossary.attrs("pool_tensor_parallel")
    metrics = ["breach_s", "unserved_share", "gpu_hours", "mean_instances", "peak_instances", "usd"]
    pool_part = replay[metrics].reset_coords(drop=True)
    pool_part = pool_part.rename({name: f"pool_{name}" for name in metrics})
    out = xr.merge([mix_part, pool_part], join="outer", compat="override")
    for name in out.data_vars:
        out[name].attrs["step"] = "fleet"
    out["mix_instances"].attrs["mip_gap"] = MIP_GAP  # the gap the mix was solved to
    out.attrs = {}
    return out

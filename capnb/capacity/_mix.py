"""The cheapest mix of GPU types per slot: a reserved base held all day, on-demand (and spot) above it.

One GPU type priced on demand is the plan's default. Two things make it dearer than it needs to
be: a reserved (committed) price is lower but paid in every slot, so it pays for the load every
slot has (the base); and the type that is cheapest per request/s may be capped by a quota. The
cheapest fleet is an integer program, solved exactly by HiGHS through
:func:`scipy.optimize.milp`. Per pool ``p`` (a GPU type and tensor-parallel degree serving
``q_p`` requests/s per instance on ``g_p`` GPUs) and slot ``s`` (``S`` slots of equal length):

    minimise   sum_p g_p (S r_p R_p + sum_s (o_p O_ps + v_p V_ps))
    subject to sum_p q_p (R_p + O_ps + (1 - preemption) V_ps) >= demand_s     for every slot s
               sum_{p of GPU type G} g_p (R_p + O_ps + V_ps) <= limit_G       for every s, G
               R_p, O_ps, V_ps whole numbers >= 0

with ``R`` reserved instances (every slot), ``O`` on-demand and ``V`` spot instances, ``r``, ``o``
and ``v`` the prices per GPU-hour. Spot capacity counts at ``1 - spot_preemption`` of its
throughput: the expected share lost to preemption, stated by the caller (providers publish no
rate). A pool without a price of a kind cannot buy that kind.

A pool is left out of the program when another pool of the same GPU type does at least as well
exactly: ``k`` of its instances (``k`` whole) hold the same GPUs at the same prices and serve at
least as many requests/s (e.g. TP 2 at under twice TP 1's throughput); such a pool can only tie.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import sys

import numpy as np
import xarray as xr

from .. import glossary
from ..errors import InfeasibleError, InputError, NotPricedError

__all__ = ["mix"]


def _pools(options: xr.Dataset) -> xr.Dataset:
    if not isinstance(options, xr.Dataset) or "per_instance_qps" not in options:
        raise InputError(
            "options must be a Dataset with per_instance_qps (over gpu, tensor_parallel)"
        )
    qps = options.per_instance_qps
    checked_rates(qps)
    if "pool" not in qps.dims:
        extra = [d for d in qps.dims if d not in ("gpu", "tensor_parallel")]
        if extra:
            raise InputError(
                f"options.per_instance_qps has dims {extra} beside gpu, tensor_parallel"
            )
        qps = qps.stack(pool=[d for d in ("gpu", "tensor_parallel") if d in qps.dims])
        qps = qps.where(np.isfinite(qps) & (qps > 0), drop=True)
        qps = qps.reset_index("pool").assign_coords(
            pool=[
                f"{g} TP{int(t)}"
                for g, t in zip(qps.gpu.values, qps.tensor_parallel.values, strict=False)
            ]
        )
    for name in ("gpu", "tensor_parallel"):
        if name not in qps.coords:
            raise InputError(f"options needs a {name} coordinate along pool")
    return qps


def checked_rates(qps: xr.DataArray) -> None:
    """Requests/s per instance finite and >= 0 (NaN or 0: misses the SLA), or the cell named.

    ``qps`` over (gpu, tensor_parallel), or pool (labelled, or stacked from those two), and
    size_bin where the options are per request size: the first bad cell's bin and pool are named.
    """
    values = np.asarray(qps.values, dtype=float)
    bad = (values < 0) | np.isinf(values)
    if not bad.any():
        return
    at = dict(zip(qps.dims, (int(i[0]) for i in np.nonzero(bad)), strict=True))
    cell = qps.isel(at)
    pool = f"{cell.gpu.values} TP{int(cell.tensor_parallel.values)}"
    if "pool" in qps.dims and not isinstance(cell.pool.values.item(), tuple):  # labelled pools
        pool = f"{cell.pool.values} ({pool})"
    where = f"size bin {cell.size_bin.values} on " if "size_bin" in qps.dims else ""
    raise InputError(
        f"options.per_instance_qps of {where}pool {pool} is {float(cell):g}: give finite "
        "requests/s >= 0 per instance (NaN or 0 where the pool misses the SLA)"
    )


def _prices(prices: xr.Dataset, gpus, kind: str | None) -> np.ndarray:
    if kind is None:
        return np.full(len(gpus), np.nan)
    if kind not in prices.pricing.values:
        there = ", ".join(str(k) for k in prices.pricing.values)
        asked = {"on_demand": "every fleet's on-demand price", "spot": "spot_preemption's spot"}
        raise InputError(
            f"pricing {kind!r} is not in prices.pricing ({there}): "
            + (f"{asked[kind]} price is needed" if kind in asked else
               f"reserved={kind!r} must be one of them, or None for no reserved base")
        )  # fmt: skip
    table = prices.usd_per_gpu_hour.sel(pricing=kind)
    known = set(table.gpu.values)
    values = np.array([float(table.sel(gpu=g)) if g in known else np.nan for g in gpus])
    for gpu, value in zip(gpus, values, strict=True):
        if not np.isnan(value) and not (np.isfinite(value) and value > 0):
            raise InputError(
                f"prices: usd_per_gpu_hour of {gpu} ({kind}) is {value:g}; a price per GPU-hour "
                "must be > 0 (NaN: that kind cannot be bought)"
            )
    return values


def mix(
    options,
    demand_qps,
    *,
    prices,
    reserved: str | None = "reserved",
    spot_preemption: float | None = None,
    limits=None,
    mip_gap: float = 0.0,
):
    """The cheapest fleet per slot from several GPU types: reserved base, on-demand and spot above.

    Parameters
    ----------
    options
        Per-instance throughput under the SLA: a Dataset with ``per_instance_qps`` over
        (``gpu``, ``tensor_parallel``), e.g. a plan's ``capacity_per_instance_qps`` renamed, or
        already over ``pool`` with ``gpu`` and ``tensor_parallel`` coordinates. Pools that do not
        meet the SLA (NaN, 0) are left out.
    demand_qps
        Requests/s to serve per slot: a DataArray over ``slot`` (a plan's
        ``capacity_target_qps``).
    prices
        Prices per GPU-hour over (``gpu``, ``pricing``): :func:`capnb.data.gpu_prices` of one
        provider. A missing price (NaN) means that kind cannot be bought for that GPU; any other
        must be > 0 USD per GPU-hour.
    reserved
        The pricing kind of the base held in every slot (``"reserved"``, ``"reserved_1y"``,
        ``"reserved_3y"``), or None for no reserved base.
    spot_preemption
        Expected share of spot capacity lost to preemption, in [0, 1); None: no spot.
    limits
        Mapping GPU type -> the most GPUs of it held at once (a quota), over all its pools.
    mip_gap
        Relative gap to the proven lower bound at which the choice of the reserved base may stop.
        0 (the default) proves the optimum with the day's whole-instance program (about 1-2 s of
        CPU for 24 slots and four GPU types on demand and reserved; 20 s on the default plan's
        refitted rates; with spot capacity the proof can take minutes: 430 s of CPU on one case).
        A gap above 0 first tries the base of the day's program with fractional on-demand and spot
        counts (under a second; that program's optimum is the bound): kept when the day priced
        exactly with it is within the gap, else the whole program is solved within the gap. The
        result's ``optimality_gap`` says how far above the bound it stopped and its ``solver``
        attribute which way the base was chosen (the plan uses 0.02). With the base fixed, each
        slot's on-demand and spot part is solved exactly, one slot at a time.

    Returns
    -------
    xarray.Dataset
        ``reserved_instances`` (pool), ``on_demand_instances``, ``spot_instances`` and
        ``instances`` (pool, slot), ``served_qps`` and ``usd_per_hour`` (slot);
        ``single_type_usd_per_hour`` (pool): the mean cost of serving every slot with that pool
        alone on demand (``ceil(demand / per_instance_qps)``; NaN where a limit forbids it).
        Attrs: the mix's and the cheapest single type's mean USD/hour (slots of equal length),
        the saving, ``optimality_gap`` (the mix's cost over the solver's proven lower bound,
        minus 1), the pricing used and the solver, ``above`` (what is bought above the base:
        ``"on demand"``, ``"spot"``, ``"on demand and spot"`` or ``"nothing"``);
        ``not_priced`` (the GPUs) where a GPU meets the SLA but has no price of the kinds asked
        for, so it is not in the mix;
        ``spot_unpriced`` (the GPUs) when ``spot_preemption`` was given but no pool has a spot
        price, so none was planned; ``reserved_unpriced`` (the GPUs) likewise when no pool has a
        price of the ``reserved`` kind, so no base was held.

    Raises
    ------
    InputError
        Bad arguments (named), or no fleet within the limits meets a slot's demand ("infeasible",
        naming the slot and what the limits allow).
    NotPricedError
        The prices list none of the options' GPUs (``error.gpus`` names them).
    """
    qps = _pools(options)
    demand, limits = _mix_args(qps, demand_qps, prices, spot_preemption, mip_gap, limits)
    everything = qps
    qps, price = _candidates(qps, prices, reserved, spot_preemption)
    gpus = [str(x) for x in qps.gpu.values]
    q = qps.values.astype(float)
    g = qps.tensor_parallel.values.astype(float)
    keep = 1.0 - float(spot_preemption or 0.0)
    if not _buyable(price).any():  # the GPUs that meet the SLA, named for the caller
        serves = np.isfinite(everything.values) & (everything.values > 0)
        raise NotPricedError(str(x) for x in everything.gpu.values[serves])
    _check_reachable(demand, q, g, gpus, price, keep, limits, demand_qps.slot.values)
    problem = dict(q=q, g=g, gpus=gpus, price=price, keep=keep, limits=limits)
    held, on_demand, spot, bound, how = _cheapest_fleet(demand, problem, mip_gap)
    slot_cost = (
        (g * np.nan_to_num(price["reserved"]) * held).sum()
        + (g[:, None] * np.nan_to_num(price["on_demand"])[:, None] * on_demand).sum(0)
        + (g[:, None] * np.nan_to_num(price["spot"])[:, None] * spot).sum(0)
    )  # USD/hour while the slot lasts
    single_cost = _single_type(demand, q, g, gpus, price["on_demand"], limits)
    result = _mix_dataset(qps, demand_qps, (held, on_demand, spot), keep, slot_cost, single_cost)
    result.attrs = _mix_attrs(
        slot_cost, single_cost, bound, qps.pool.values, reserved, spot_preemption, limits, prices
    ) | {"solver": f"scipy.optimize.milp (HiGHS): {how}; each slot exact",
         "above": bought_above(on_demand, spot)}  # fmt: skip
    result.attrs |= unpriced(price, gpus, reserved, spot_preemption)
    result.attrs |= _not_priced(everything, prices, reserved, spot_preemption)
    return _with_left_out(
        result,
        everything,
        demand,
        price_of=lambda gpu: _prices(prices, [gpu], "on_demand")[0],
        limits=limits,
    )


def _mix_args(qps, demand_qps, prices, spot_preemption, mip_gap, limits):
    """The checked demand (requests/s per slot) and limits (GPU type -> most GPUs)."""
    if not isinstance(demand_qps, xr.DataArray) or demand_qps.dims != ("slot",):
        raise InputError("demand_qps must be a DataArray over slot (requests/s)")
    demand = checked_demand(demand_qps)
    if not isinstance(prices, xr.Dataset) or "usd_per_gpu_hour" not in prices:
        raise InputError("prices must be a Dataset over (gpu, pricing): capnb.data.gpu_prices(...)")
    if spot_preemption is not None:
        checked_share(spot_preemption, "spot_preemption")
    checked_share(mip_gap, "mip_gap")
    return demand, checked_limits(limits, [str(g) for g in qps.gpu.values])


def checked_demand(demand_qps: xr.DataArray) -> np.ndarray:
    """The demand's requests/s per slot, or an error naming the first slot that is not >= 0."""
    demand = demand_qps.values.astype(float)
    bad = ~np.isfinite(demand) | (demand < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        slot = demand_qps.slot.values[i] if "slot" in demand_qps.coords else i
        raise InputError(
            f"demand_qps at slot {slot} is {demand[i]:g}: give finite requests/s >= 0 in every "
            f"slot ({int(bad.sum()):,} of the {demand.size:,} slots fail that)"
        )
    return demand


def checked_share(value, name: str) -> float:
    """A share in [0, 1) (``spot_preemption``, ``mip_gap``), or an InputError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise InputError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


def checked_limits(limits, gpus: list[str]) -> dict:
    """``limits`` as a dict of GPU type -> whole GPUs >= 0, each type in a pool, or an InputError."""
    limits = dict(limits or {})
    for gpu, cap in limits.items():
        if gpu not in gpus:
            raise InputError(f"limits names {gpu!r}, which is in no pool ({sorted(set(gpus))})")
        if isinstance(cap, bool) or not isinstance(cap, int | np.integer) or cap < 0:
            raise InputError(f"limits[{gpu!r}] must be a whole number of GPUs >= 0, got {cap!r}")
    return limits


def _candidates(qps: xr.DataArray, prices: xr.Dataset, reserved, spot_preemption):
    """The pools the program may buy (priced, not dominated) and their prices by kind (USD/GPU-h).

    A price is NaN where that kind cannot be bought: no spot without ``spot_preemption``, no
    reserved base without ``reserved``.
    """
    gpus = [str(g) for g in qps.gpu.values]
    priced = [g in set(prices.gpu.values) for g in gpus]  # a GPU the provider does not list
    qps = qps.isel(pool=[i for i in _undominated(qps.values, qps.tensor_parallel.values, gpus)
                         if priced[i]])  # fmt: skip
    gpus = [str(x) for x in qps.gpu.values]
    price = {
        "reserved": _prices(prices, gpus, reserved),
        "on_demand": _prices(prices, gpus, "on_demand"),
        "spot": _prices(prices, gpus, "spot" if spot_preemption is not None else None),
    }
    return qps, price


def _cheapest_fleet(demand: np.ndarray, problem: dict, gap: float):
    """Reserved (pool), on-demand and spot instances (pool, slot), the day's proven bound, and how.

    The base couples the slots, so one program over the day chooses it; the base fixed, each
    slot's on-demand and spot part is its own small program, solved exactly (:func:`_slots`). With
    ``gap`` > 0 the day's program is first solved with the on-demand and spot counts allowed to be
    fractions (the base whole): a fraction of a second, and its optimum bounds the day's cost from
    below; its base is kept when the day priced exactly with it is within ``gap`` of that bound.
    Otherwise (and always with ``gap`` 0) the whole integer program chooses the base within
    ``gap``: on the default plan's 24 slots and four GPU types HiGHS took 20 CPU s to prove 0.1 %
    (17,180 nodes) and stopped at a base that costs 0.013 % more than the fractional program's.
    The bound is None when there is no reserved price (then every slot is solved exactly alone).
    """
    n_pool = problem["q"].size
    if not np.isfinite(problem["price"]["reserved"]).any():
        held = np.zeros(n_pool, np.int64)
        return held, *_slots(demand, problem, held)[:2], None, "no reserved base"
    if gap > 0:
        loose = _solve(demand, **problem, gap=0.0, whole=False)
        held, bound = loose.x[:n_pool].astype(np.int64), float(loose.fun)
        on_demand, spot, day = _slots(demand, problem, held)
        if day - bound <= gap * day:
            return held, on_demand, spot, bound, BASE_QUICK
    joint = _solve(demand, **problem, gap=gap)
    held = joint.x[:n_pool]
    return held, *_slots(demand, problem, held)[:2], float(joint.mip_dual_bound), BASE_WHOLE


def _slots(demand: np.ndarray, problem: dict, held: np.ndarray):
    """On-demand and spot instances (pool, slot) over the base ``held``, and the day's cost.

    The cost is the programs' objective summed over the slots (USD/hour, the base in each).
    """
    n_pool = problem["q"].size
    on_demand = np.zeros((n_pool, demand.size), np.int64)
    spot = np.zeros_like(on_demand)
    day = 0.0
    for s in range(demand.size):
        one = _solve(demand[s : s + 1], **problem, gap=0.0, held=held)
        on_demand[:, s], spot[:, s] = one.x[n_pool : 2 * n_pool], one.x[2 * n_pool :]
        day += float(one.fun)
    return on_demand, spot, day


def unpriced(price: dict, gpus: list[str], reserved, spot_preemption) -> dict:
    """The kinds asked for that no pool has a price of, each with the GPUs (attrs to say so).

    ``reserved_unpriced``: a reserved kind (``"reserved_1y"``) the provider lists for none of the
    GPUs, so no base is held; ``spot_unpriced``: spot asked for and priced for none, so none is
    planned. Both are said in the plan's line, never left to look like the cheapest choice.
    """
    names = ", ".join(dict.fromkeys(gpus))
    said = {}
    if reserved is not None and not np.isfinite(price["reserved"]).any():
        said["reserved_unpriced"] = names
    if spot_preemption is not None and not np.isfinite(price["spot"]).any():
        said["spot_unpriced"] = names
    return said


def _not_priced(qps: xr.DataArray, prices: xr.Dataset, reserved, spot_preemption) -> dict:
    """``not_priced``: the GPUs that meet the SLA with no price of the kinds asked (left out).

    A GPU the provider does not list cannot be in the mix; the plan's line names it, so the
    cheapest mix is not read as the cheapest over every GPU asked for.
    """
    meets = np.isfinite(qps.values) & (qps.values > 0)
    gpus = list(dict.fromkeys(str(g) for g in qps.gpu.values[meets]))
    kinds = [reserved, "on_demand", "spot" if spot_preemption is not None else None]
    none = [g for g in gpus if all(np.isnan(_prices(prices, [g], k)[0]) for k in kinds)]
    return {"not_priced": ", ".join(none)} if none else {}


def bought_above(on_demand, spot) -> str:
    """What a fleet buys above its reserved base, in words: the kinds it holds in some slot."""
    kinds = [kind for kind, count in (("on demand", on_demand), ("spot", spot)) if np.sum(count)]
    return " and ".join(kinds) or "nothing"


#: How the reserved base was chosen (the mix's ``solver`` attribute says which).
BASE_QUICK = (
    "the base of the day's program with fractional on-demand and spot counts, within mip_gap"
)
BASE_WHOLE = "the base of the day's whole-instance program, within mip_gap"


def _mix_attrs(slot_cost, single_cost, bound, pools, reserved, spot_preemption, limits, prices):
    """The mix's mean cost against the cheapest single type's, its optimality gap, its settings."""
    day = float(slot_cost.sum())
    bound = day if bound is None else min(bound, day)
    best = int(np.nanargmin(single_cost)) if np.isfinite(single_cost).any() else None
    mean_cost = float(slot_cost.mean())
    return {
        "mix_usd_per_hour": mean_cost,
        "single_type_pool": "" if best is None else str(pools[best]),
        "single_type_usd_per_hour": np.nan if best is None else float(single_cost[best]),
        "saving": np.nan if best is None else saving(mean_cost, float(single_cost[best])),
        "reserved_pricing": reserved or "none",
        "spot_preemption": np.nan if spot_preemption is None else float(spot_preemption),
        "limits": ", ".join(f"{k}: {v} GPUs" for k, v in limits.items()) or "none",
        "provider": prices.attrs.get("provider", ""),
        "optimality_gap": float((day - bound) / day) if day > 0 else 0.0,
    }


def saving(mix_cost: float, single_cost: float) -> float:
    """The share of the single type's cost the mix saves (0 where neither costs anything)."""
    return 0.0 if single_cost == 0.0 and mix_cost == 0.0 else 1.0 - mix_cost / single_cost


def _mix_dataset(qps, demand_qps, fleet: tuple, keep, slot_cost, single_cost) -> xr.Dataset:
    """The fleet (reserved, on-demand, spot instances) per pool and slot, with its service and cost."""
    held, on_demand, spot = fleet
    q = qps.values.astype(float)
    g = qps.tensor_parallel.values.astype(float)
    total = held[:, None] + on_demand + spot
    served = q @ (held[:, None] + on_demand + keep * spot)
    pool_coords = {
        "pool": ("pool", qps.pool.values, glossary.attrs("pool")),
        "gpu": ("pool", [str(x) for x in qps.gpu.values], glossary.attrs("gpu")),
        "tensor_parallel": ("pool", g.astype(np.int64), glossary.attrs("tensor_parallel")),
        "per_instance_qps": ("pool", q, glossary.attrs("per_instance_qps")),
    }
    both = ("pool", "slot")
    return xr.Dataset(
        {
            "reserved_instances": ("pool", held, glossary.attrs("reserved_instances")),
            "on_demand_instances": (both, on_demand, glossary.attrs("on_demand_instances")),
            "spot_instances": (both, spot, glossary.attrs("spot_instances")),
            "instances": (both, total, glossary.attrs("instances")),
            "served_qps": ("slot", served, glossary.attrs("served_qps")),
            "target_qps": ("slot", demand_qps.values.astype(float), glossary.attrs("target_qps")),
            "usd_per_hour": ("slot", slot_cost, glossary.attrs("usd_per_hour")),
            "single_type_usd_per_hour": (
                "pool",
                single_cost,
                glossary.attrs("usd_per_hour", long_name="mean cost of that pool alone, on demand"),
            ),
        },
        # the demand's slot, its kind kept, under the glossary's units and long_name
        coords={
            **pool_coords,
            "slot": (
                "slot",
                demand_qps.slot.values,
                {**demand_qps.slot.attrs, **glossary.attrs("slot")},
            ),
        },
    )


def _solve(demand, *, q, g, gpus, price, keep, limits, gap, held=None, whole=True):
    """One integer program over the given slots: R (pool), then O and V (pool, slot) per pool.

    With ``held``, the reserved instances are fixed to it; with ``whole`` False, O and V may be
    fractions (R stays whole). The objective is the sum over slots of USD/hour. Returns scipy's
    result, ``x`` rounded to whole instances (with ``whole`` False: R rounded, O and V as solved).
    """
    from scipy.optimize import LinearConstraint
    from scipy.sparse import lil_matrix

    n_pool, n_slot = q.size, demand.size
    n = n_pool * (1 + 2 * n_slot)
    o_at = lambda p, s: n_pool + p * n_slot + s  # noqa: E731
    v_at = lambda p, s: n_pool + n_pool * n_slot + p * n_slot + s  # noqa: E731
    cost = np.zeros(n)
    lower, upper = np.zeros(n), np.full(n, np.inf)
    for p in range(n_pool):
        for kind, index in (("reserved", [p]), ("on_demand", [o_at(p, s) for s in range(n_slot)]),
                            ("spot", [v_at(p, s) for s in range(n_slot)])):  # fmt: skip
            per = price[kind][p]
            if np.isnan(per):
                upper[index] = 0.0
                continue
            # never more of a pool than covers the slot (or the busiest slot) alone
            rate = q[p] * (keep if kind == "spot" else 1.0)
            need = demand.max() if kind == "reserved" else demand
            upper[index] = np.ceil(need / rate - 1e-9) if rate > 0 else 0.0
            cost[index] = g[p] * per * (n_slot if kind == "reserved" else 1)
    if held is not None:
        lower[:n_pool] = upper[:n_pool] = held
    rows = lil_matrix((n_slot * (1 + len(limits)), n))
    lower_b = np.r_[demand, np.full(n_slot * len(limits), -np.inf)]
    upper_b = np.r_[np.full(n_slot, np.inf), np.zeros(n_slot * len(limits))]
    for s in range(n_slot):
        for p in range(n_pool):
            rows[s, p] = rows[s, o_at(p, s)] = q[p]
            rows[s, v_at(p, s)] = q[p] * keep
    for k, (gpu, cap) in enumerate(limits.items()):
        for s in range(n_slot):
            r = n_slot + k * n_slot + s
            upper_b[r] = cap
            for p in np.flatnonzero(np.array(gpus) == gpu):
                rows[r, p] = rows[r, o_at(p, s)] = rows[r, v_at(p, s)] = g[p]
    result = quiet_milp(
        cost,
        constraints=LinearConstraint(rows.tocsr(), lower_b, upper_b),
        integrality=np.ones(n) if whole else np.r_[np.ones(n_pool), np.zeros(n - n_pool)],
        bounds=(lower, upper),
        options={"mip_rel_gap": gap},
    )
    if result.status == 2:
        raise InfeasibleError(
            "infeasible: no whole-instance fleet within the limits meets every slot"
        )
    if result.x is None:
        raise InputError(f"the integer program was not solved: {result.message}")
    result.x = (
        np.round(result.x).astype(np.int64)
        if whole
        else np.r_[np.round(result.x[:n_pool]), result.x[n_pool:]]
    )
    return result


def quiet_milp(*args, **kwargs):
    """:func:`scipy.optimize.milp`, with the process's standard output closed while HiGHS runs.

    HiGHS (1.x inside scipy) writes debugging lines from C++ straight to file descriptor 1 while it
    solves some of these programs, whatever ``disp`` says: a user's ``capnb report`` printed
    ``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();``. The solver's
    verdict is in its result (``status``, ``message``), which the callers read; Python's own
    ``sys.stdout`` is flushed first, so nothing of capnb's is lost.
    """
    from scipy.optimize import milp  # scipy's import is deferred to the first program

    with contextlib.suppress(AttributeError, ValueError, OSError):
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1 (a detached process): nothing to quiet
        return milp(*args, **kwargs)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            return milp(*args, **kwargs)
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _single_type(demand, q, g, gpus, on_demand, limits) -> np.ndarray:
    """Mean USD per slot-hour of each pool alone, on demand; NaN where a limit forbids it."""
    count = np.ceil(demand[None, :] / q[:, None] - 1e-9)
    cost = (count * g[:, None] * on_demand[:, None]).mean(1)
    for p, gpu in enumerate(gpus):
        if gpu in limits and (count[p] * g[p] > limits[gpu]).any():
            cost[p] = np.nan
    return cost


def _undominated(q, tp, gpus) -> np.ndarray:
    """Indices of the pools no other pool of the same GPU type beats exactly (see the module)."""
    keep = []
    for i in range(q.size):
        beaten = False
        for j in range(q.size):
            if j == i or gpus[j] != gpus[i] or tp[i] % tp[j]:
                continue
            k = tp[i] // tp[j]
            if k * q[j] > q[i] or (k * q[j] == q[i] and j < i):  # ties: the first pool stays
                beaten = True
                break
        if not beaten:
            keep.append(i)
    return np.array(keep, dtype=np.int64)


def _with_left_out(
    result: xr.Dataset, everything: xr.DataArray, demand, price_of, limits
) -> xr.Dataset:
    """Put the dominated pools back with no instances, and their single-type costs."""
    if everything.sizes["pool"] == result.sizes["pool"]:
        return result
    full = result.drop_vars(["gpu", "tensor_parallel", "per_instance_qps"]).reindex(
        pool=everything.pool.values, fill_value=0
    )
    q = everything.values.astype(float)
    g = everything.tensor_parallel.values.astype(float)
    gpus = [str(x) for x in everything.gpu.values]
    on_demand = np.array([price_of(gpu) for gpu in gpus])
    single = _single_type(demand, q, g, gpus, on_demand, limits)
    full["single_type_usd_per_hour"] = ("pool", single, result.single_type_usd_per_hour.attrs)
    return full.assign_coords(
        gpu=("pool", [str(x) for x in everything.gpu.values], glossary.attrs("gpu")),
        tensor_parallel=("pool", g.astype(np.int64), glossary.attrs("tensor_parallel")),
        per_instance_qps=("pool", q, glossary.attrs("per_instance_qps")),
    ).assign_attrs(result.attrs)


def _buyable(price: dict) -> np.ndarray:
    """Pools with at least one price (reserved, on demand or spot)."""
    return ~(np.isnan(price["reserved"]) & np.isnan(price["on_demand"]) & np.isnan(price["spot"]))


def _check_reachable(demand, q, g, gpus, price, keep, limits, slots) -> None:
    """Name the first slot no fleet within the limits can serve (a bound, before the solver)."""
    buyable = _buyable(price)
    rate = np.where(np.isnan(price["reserved"]) & np.isnan(price["on_demand"]), keep, 1.0)
    ceiling = 0.0
    for gpu in sorted(set(gpus)):
        mine = np.array(gpus) == gpu
        if gpu not in limits and (mine & buyable).any():
            return  # an unlimited type can serve any demand
        per_gpu = q[mine & buyable] * rate[mine & buyable] / g[mine & buyable]
        ceiling += limits.get(gpu, 0) * (per_gpu.max() if per_gpu.size else 0.0)
    over = np.flatnonzero(demand > ceiling + 1e-9)
    if over.size:
        s = int(over[0])
        raise InfeasibleError(
            f"infeasible: slot {slots[s]} needs {demand[s]:,.1f} requests/s; the limits allow at "
            f"most {ceiling:,.1f} ({', '.join(f'{k}: {v} GPUs' for k, v in limits.items())})"
        )

"""A fleet of several pools replayed over the traffic, one autoscaled pool at a time.

Part of :mod:`capnb.elasticity`. When the capacity step answers with more than one pool (a mix of
GPU types, :func:`capnb.capacity.mix`; or prefill and decode pools,
:func:`capnb.capacity.disaggregate`), each pool serves its own share of the traffic with its own
per-instance throughput, GPUs per instance, cold start and price, and its own reserved base. The
hand-off is a Dataset over ``pool`` (see :mod:`capnb.glossary`):

``per_instance_qps`` (pool), ``tensor_parallel`` (pool), ``gpu`` (pool)
    What one instance of the pool serves under the SLA, on how many GPUs of which type.
``instances`` (pool, slot), optional ``reserved_instances`` (pool)
    The planned fleet per forecast slot and the base held in every slot (0 when absent).
``demand_share`` (pool[, slot]), optional
    The share of each step's requests the pool serves. Absent, a mix splits the traffic in
    proportion to the capacity it planned for the step's slot (``per_instance_qps x
    instances``); stages of one request (prefill and decode) each carry 1.
``spot_instances`` (pool, slot), optional
    The planned instances on spot pricing (:func:`capnb.capacity.mix`); the rest of the elastic
    part (``instances - reserved_instances``) is on demand.

Every pool is simulated by :func:`capnb.elasticity.simulate` with the same policy, its reserved
base as the fewest instances, and spot capacity lost at the preemption rate the caller states
(providers publish none); the result puts the runs side by side over ``pool`` and the service's
own figures in attrs: its seconds in breach are the steps in which *any* pool breaches (a request
needs every stage, and a mix's pools each serve requests of their own).
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np
import xarray as xr

from .. import glossary
from ..errors import InputError
from ..units import declare_units
from ._decision import real
from ._demand import demand_values
from ._policy import Policy, split_settings

__all__ = ["pool_demand", "simulate_pools"]

_SLOTS_BY_COUNT = {24: "hour_of_day", 168: "hour_of_week"}


def _fleet(fleet) -> xr.Dataset:
    if not isinstance(fleet, xr.Dataset) or "pool" not in fleet.dims:
        raise InputError(
            "fleet must be a Dataset over pool (capnb.capacity.mix or capnb.capacity.disaggregate)"
        )
    for name in ("per_instance_qps", "tensor_parallel", "instances"):
        if name not in fleet.variables:
            raise InputError(f"fleet has no {name!r} (over pool); it has {sorted(fleet.variables)}")
    qps = np.asarray(fleet.per_instance_qps.values, dtype=float)
    if not (np.isfinite(qps) & (qps > 0)).all():
        bad = str(fleet.pool.values[int(np.flatnonzero(~(np.isfinite(qps) & (qps > 0)))[0])])
        raise InputError(f"fleet.per_instance_qps of pool {bad!r} must be > 0 requests/s")
    if "slot" not in fleet.instances.dims:
        raise InputError("fleet.instances must be over (pool, slot)")
    return fleet


def _slot_kind(fleet: xr.Dataset, slots) -> str:
    if slots is not None:
        return slots
    kind = fleet.attrs.get("slots") or _SLOTS_BY_COUNT.get(fleet.sizes["slot"])
    if kind is None:
        raise InputError(
            f"fleet has {fleet.sizes['slot']} slots and no 'slots' attr; give slots= "
            "('hour_of_day' or 'hour_of_week')"
        )
    return kind


def _shares(fleet: xr.Dataset) -> xr.DataArray:
    """The share of the traffic each pool serves, over (pool, slot).

    In proportion to the instances' throughput in the slot; in a slot the fleet planned no
    instance for (an idle hour), in proportion to one instance of each pool, so that traffic
    arriving then still reaches the pools whose policies start instances for it.
    """
    if "demand_share" in fleet:
        share = fleet.demand_share.broadcast_like(fleet.instances).transpose("pool", "slot")
        values = np.asarray(share.values, dtype=float)
        if not (np.isfinite(values) & (values >= 0) & (values <= 1)).all():
            raise InputError("fleet.demand_share must be in [0, 1]")
        return share
    capacity = (fleet.per_instance_qps * fleet.instances).transpose("pool", "slot")
    idle = capacity.sum("pool") <= 0
    one_each = fleet.per_instance_qps.broadcast_like(capacity).transpose("pool", "slot")
    capacity = xr.where(idle, one_each, capacity).transpose("pool", "slot")
    total = capacity.sum("pool")
    if (total <= 0).any():  # a pool of no throughput at all: nothing to split by
        slot = fleet.slot.values[int(np.flatnonzero((total <= 0).values)[0])]
        raise InputError(f"fleet has no throughput in slot {slot}: its share cannot be split")
    return capacity / total


@declare_units(step_s="s")
def pool_demand(demand, fleet: xr.Dataset, *, step_s=None, slots=None) -> xr.DataArray:
    """Each pool's requests/s at every step: the demand times the pool's share of its slot.

    Parameters
    ----------
    demand
        Requests/s per step over datetime ``time`` (:func:`prepare_demand`).
    fleet
        The capacity step's pools (see the module): ``instances`` over (pool, slot) and
        ``per_instance_qps`` over pool, or a ``demand_share``.
    step_s
        Seconds per demand value (default: the demand's own step).
    slots
        The slots of the fleet (``"hour_of_day"``, ``"hour_of_week"``); default: the fleet's
        ``slots`` attr, else read from its number of slots (24 or 168).

    Returns
    -------
    xarray.DataArray
        ``qps`` over (pool, time), requests/s; summed over ``pool`` it gives the demand back for a
        mix (for stages, every pool carries all of it).
    """
    fleet = _fleet(fleet)
    values, times, step = demand_values(demand, step_s)
    if times is None or times.dtype.kind != "M":
        raise InputError(
            "demand: its times must be dates to find each step's slot of the fleet; use "
            "capnb.elasticity.prepare_demand on a trace with a clock"
        )
    share = _shares(fleet)
    at = _slot_index(times, fleet, slots)
    per_pool = np.asarray(share.values, dtype=float)[:, at] * values[None, :]
    return xr.DataArray(
        per_pool,
        dims=("pool", "time"),
        coords={
            "pool": ("pool", fleet.pool.values, glossary.attrs("pool")),
            "time": ("time", times, glossary.attrs("time")),
        },
        name="qps",
        attrs={**glossary.attrs("qps"), "step_s": step},
    )


def _slot_index(times: np.ndarray, fleet: xr.Dataset, slots) -> np.ndarray:
    """The position along ``fleet.slot`` of every step's slot."""
    from .. import forecast

    kind = forecast.slots(_slot_kind(fleet, slots))
    codes = forecast.slot_codes(times, kind)
    known = {int(s): i for i, s in enumerate(np.asarray(fleet.slot.values))}
    missing = sorted(set(np.unique(codes).tolist()) - set(known))
    if missing:
        raise InputError(f"fleet has no plan for {kind.named(missing)} of the demand")
    lookup = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
    for s, i in known.items():
        if s < lookup.size:
            lookup[s] = i
    return lookup[codes]


def _spot_shares(fleet: xr.Dataset, reserved: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (pool, slot): spot instances over all planned, and over the elastic part (0 if none)."""
    if "spot_instances" not in fleet:
        zeros = np.zeros((fleet.sizes["pool"], fleet.sizes["slot"]))
        return zeros, zeros
    spot = np.asarray(fleet.spot_instances.transpose("pool", "slot").values, dtype=float)
    total = np.asarray(fleet.instances.transpose("pool", "slot").values, dtype=float)
    if not (np.isfinite(spot) & (spot >= 0)).all() or (spot > total - reserved[:, None]).any():
        raise InputError(
            "fleet.spot_instances must be whole instances >= 0 within instances - "
            "reserved_instances of each slot"
        )
    elastic = total - reserved[:, None]
    of_all = np.divide(spot, total, out=np.zeros_like(spot), where=total > 0)
    of_elastic = np.divide(spot, elastic, out=np.zeros_like(spot), where=elastic > 0)
    return of_all, of_elastic


def _price(prices, gpu: str, kind: str) -> float:
    if prices is None or gpu not in set(prices.gpu.values) or kind not in prices.pricing.values:
        return float("nan")
    return float(prices.usd_per_gpu_hour.sel(gpu=gpu, pricing=kind))


@declare_units(cold_start_s="s", step_s="s")
def simulate_pools(
    demand,
    fleet: xr.Dataset,
    *,
    policy: str | Policy = "fixed_elastic",
    cold_start_s=75.0,
    prices=None,
    step_s=None,
    slots=None,
    spot_preemption_rate: float | None = None,
    seed: int = 0,
    **settings,
) -> xr.Dataset:
    """Replay every pool of a fleet over the traffic with one autoscaling policy.

    Parameters
    ----------
    demand
        Requests/s per step over datetime ``time`` (:func:`prepare_demand`).
    fleet
        The capacity step's pools (see the module).
    policy
        One of :data:`POLICIES`, or a :class:`Policy` record of the policy and its settings (then
        not given in ``settings``); each pool's fewest instances is its ``reserved_instances``
        (0 when the fleet has none, or at least 1 for ``"hpa"``) unless ``min_instances`` is
        given (in ``settings``, or the record's).
    cold_start_s
        Seconds, one for every pool, or a mapping pool -> seconds (GPU types load at their own
        speed: :func:`capnb.coldstart.estimate`).
    prices
        :func:`capnb.data.gpu_prices` of one provider: the reserved base is priced at its
        ``reserved`` price (on demand where none is listed), the spot instance-hours (below) at
        ``spot``, the rest at ``on_demand``. None: the catalog's on-demand price of the GPU for
        every instance.
    step_s, slots
        As in :func:`pool_demand`.
    spot_preemption_rate
        Preemptions per spot instance-hour, for a fleet with ``spot_instances``. Providers
        publish no rate: state one (:func:`capnb.capacity.mix`'s ``spot_preemption`` is a share
        of capacity, not this rate). In each step, every ready instance of a pool is lost at
        ``rate x spot_instances / instances`` of the step's slot - at the planned fleet, its
        planned spot instances each at the rate - and the policy replaces them at its next
        decision, through a cold start (:func:`simulate`'s ``preemption``). None: no preemption.
    seed
        Seed of the preemption draws; each pool draws its own stream from it.

    Instance-hours are priced as follows: the reserved base ``reserved_instances`` for the whole
    trace (or the pool's whole use, if less); of the hours above the base, each step's
    ``max(instances held - reserved_instances, 0)`` times the planned spot share of the slot's
    elastic part (``spot_instances / (instances - reserved_instances)``) are spot, the rest on
    demand. The replay thus prices its elastic part in the proportion the plan bought it, also
    when it holds more or fewer instances than planned.
    **settings
        Further arguments of :func:`simulate` (``scale_up_threshold``, ``cooldown_s``,
        ``tolerance_s``, ``buffer_instances``, ...), the same for every pool; a ``forecast``
        (requests/s per step, for ``"predictive"``) is split among the pools like the demand.

    Returns
    -------
    xarray.Dataset
        Over ``pool``: every metric of :func:`simulate` (``breach_s``, ``unserved_share``,
        ``gpu_hours``, ``mean_instances``, ...), ``preempted`` (instances lost to preemption),
        ``spot_gpu_hours`` (the GPU-hours priced at spot), ``usd`` (the pool's cost at the prices
        above), ``qps`` over (pool, time) and the timelines' ``ready_instances`` and ``breach``.
        Attrs: ``breach_s`` (steps in which any pool breaches, times the step), ``usd``,
        ``gpu_hours``, ``preempted`` and ``unserved_share`` of the whole service.

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> times = pd.date_range("2024-05-13", periods=7200, freq="s").values
    >>> demand = xr.DataArray(np.full(7200, 30.0), dims="time", coords={"time": times})
    >>> fleet = xr.Dataset(
    ...     {"instances": (("pool", "slot"), np.full((2, 24), 2)),
    ...      "reserved_instances": ("pool", [2, 1])},
    ...     coords={"pool": ["A TP1", "B TP1"], "per_instance_qps": ("pool", [10.0, 5.0]),
    ...             "tensor_parallel": ("pool", [1, 1]), "gpu": ("pool", ["L4", "L4"]),
    ...             "slot": np.arange(24)})
    >>> runs = simulate_pools(demand, fleet, cold_start_s=60, tolerance_s=60)
    >>> [round(float(q), 1) for q in runs.qps.mean("time")]
    [20.0, 10.0]
    """
    fleet = _fleet(fleet)
    per_pool = pool_demand(demand, fleet, step_s=step_s, slots=slots)
    step = float(per_pool.attrs["step_s"])
    pools = [str(p) for p in fleet.pool.values]
    colds = _cold_starts(cold_start_s, pools)
    reserved = (
        np.asarray(fleet.reserved_instances.values, dtype=np.int64)
        if "reserved_instances" in fleet
        else np.zeros(len(pools), np.int64)
    )
    gpus = [str(g) for g in fleet.gpu.values] if "gpu" in fleet.variables else [None] * len(pools)
    ahead = settings.pop("forecast", None)
    if ahead is not None:  # the predictive policy's forecast, split like the demand
        ahead = pool_demand(ahead, fleet, step_s=step, slots=slots)
    spot_preemption_rate = _checked_preemption(settings, spot_preemption_rate, seed)
    policy, settings = _pool_policy(policy, settings)
    runs, figures = _replay_pools(
        per_pool, fleet, ahead, slots=slots, policy=policy, colds=colds, reserved=reserved,
        gpus=gpus, prices=prices, rate=spot_preemption_rate, seed=seed, settings=settings,
    )  # fmt: skip
    stacked = _side_by_side(runs, figures, per_pool, pools, colds, reserved)
    stacked.attrs = _service_attrs(
        stacked, policy.name, step, prices, fleet, spot_preemption_rate, seed
    )
    return stacked


def _pool_policy(policy, settings: dict) -> tuple[Policy, dict]:
    """The replay's :class:`Policy` (given, or made of ``settings``) and the other settings."""
    ours, rest = split_settings(settings)
    if not isinstance(policy, Policy):
        return Policy.from_settings({"policy": policy, **ours}), rest
    if ours:
        raise InputError(
            f"policy is a Policy record: give {', '.join(sorted(ours))} in it, not as keywords"
        )
    return policy, rest


def _replay_pools(per_pool, fleet, ahead, *, slots, policy, colds, reserved, gpus, prices, rate,
                  seed, settings) -> tuple[list[xr.Dataset], dict]:  # fmt: skip
    """Every pool replayed by :func:`simulate`: its runs' metrics and the figures over pool.

    The runs lose their timelines; the figures (name: (dims, values)) are each pool's cost, spot
    GPU-hours and instances lost, and its ready instances and breaches over time. ``policy`` is
    the :class:`Policy` of every pool; a pool's fewest instances is its reserved base (unless the
    record has a ``min_instances``); ``settings`` are simulate's other arguments. Its spot
    instances are lost at ``rate`` times the slot's spot share; each pool draws its own seed from
    ``seed``.
    """
    from ._simulate import simulate

    step = float(per_pool.attrs["step_s"])
    spot_of_all, spot_of_elastic = _spot_shares(fleet, reserved)
    at = _slot_index(per_pool.time.values, fleet, slots)
    runs, ready, breach, cost, spot_hours, lost = [], [], [], [], [], []
    for i in range(len(colds)):
        tp = int(fleet.tensor_parallel.values[i])
        preemption = None
        if rate and spot_of_all[i].any():
            preemption = rate * spot_of_all[i][at]
        floor = policy.min_instances
        if floor is None:
            floor = max(int(reserved[i]), 1 if policy.name == "hpa" else 0)
        run = simulate(
            per_pool.isel(pool=i, drop=True),
            per_instance_qps=float(fleet.per_instance_qps.values[i]),
            policy=dataclasses.replace(policy, min_instances=floor),
            cold_start_s=colds[i],
            gpus_per_instance=tp,
            gpu=gpus[i] if prices is None else None,
            usd_per_gpu_hour=None,
            forecast=None if ahead is None else ahead.isel(pool=i, drop=True),
            preemption=preemption,
            seed=int(np.random.SeedSequence([int(seed), i]).generate_state(1)[0]),
            **settings,
        )
        held = (int(reserved[i]), tp, per_pool.sizes["time"], step)
        usd, spot = _pool_cost(run, held, spot_of_elastic[i][at], prices, gpus[i])
        spot_hours.append(spot if prices is not None else 0.0)
        lost.append(int(run.preempted) if "preempted" in run else 0)
        cost.append(usd)
        ready.append(run.ready_instances.values)
        breach.append(run.breach.values)
        runs.append(run.drop_dims("time").drop_vars(
            [c for c in run.coords if c not in run.dims], errors="ignore"
        ))  # fmt: skip
    figures = {
        "usd": ("pool", np.asarray(cost)),
        "preempted": ("pool", np.asarray(lost, np.int64)),
        "spot_gpu_hours": ("pool", np.asarray(spot_hours)),
        "ready_instances": (("pool", "time"), np.stack(ready)),
        "breach": (("pool", "time"), np.stack(breach)),
    }
    return runs, figures


def _cold_starts(cold_start_s, pools: list[str]) -> list[float]:
    """Seconds of cold start per pool: one for all, or a mapping that names every pool."""
    if isinstance(cold_start_s, dict):
        unknown = sorted(set(cold_start_s) - set(pools))
        if unknown or set(pools) - set(cold_start_s):
            raise InputError(f"cold_start_s: give one per pool {pools}; got {sorted(cold_start_s)}")
        return [float(cold_start_s[p]) for p in pools]
    return [float(cold_start_s)] * len(pools)


def _checked_preemption(settings: dict, spot_preemption_rate, seed):
    """The checked spot preemption rate (preemptions per spot instance-hour, or None); checks seed.

    :func:`simulate`'s own ``preemption`` and ``lost_instances`` are refused: the fleet's spot
    share sets them per pool.
    """
    for name in ("preemption", "lost_instances"):
        if name in settings:
            raise InputError(f"{name}: give simulate_pools spot_preemption_rate instead")
    if spot_preemption_rate is not None:
        spot_preemption_rate = real(spot_preemption_rate, "spot_preemption_rate")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"seed must be a whole number >= 0, got {seed!r}")
    return spot_preemption_rate


def _pool_cost(run: xr.Dataset, held: tuple, spot_share: np.ndarray, prices, gpu) -> tuple:
    """One pool's USD and spot GPU-hours, priced as :func:`simulate_pools` says.

    ``held``: the pool's reserved instances, GPUs per instance, steps and seconds per step;
    ``spot_share``: per step, the planned spot share of the slot's elastic part.
    """
    reserved, tp, steps, step = held
    hours = float(run.gpu_hours)
    base_hours = min(hours, reserved * tp * steps * step / 3600)
    above = np.maximum(run.ready_instances.values + run.starting_instances.values - reserved, 0)
    spot = min(float(np.dot(above, spot_share)) * tp * step / 3600, hours - base_hours)
    if prices is None:
        return (float(run.usd) if "usd" in run else float("nan")), spot
    at_reserved = _price(prices, gpu, "reserved")
    on_demand = _price(prices, gpu, "on_demand")
    at_spot = _price(prices, gpu, "spot")
    if np.isnan(at_reserved):
        at_reserved = on_demand
    if np.isnan(at_spot):
        at_spot = on_demand
    usd = base_hours * at_reserved + (hours - base_hours - spot) * on_demand + spot * at_spot
    return usd, spot


def _side_by_side(runs, figures: dict, per_pool, pools, colds, reserved) -> xr.Dataset:
    """The pools' runs over ``pool``, with their ``figures`` (name: (dims, values)) and ``qps``."""
    stacked = xr.concat(runs, dim="pool", coords="minimal", compat="override",
                        combine_attrs="drop_conflicts")  # fmt: skip
    stacked = stacked.assign_coords(
        pool=("pool", pools, glossary.attrs("pool")),
        cold_start_s=("pool", colds, glossary.attrs("cold_start_s")),
        reserved_instances=("pool", reserved, glossary.attrs("reserved_instances")),
    )
    for name in ("usd", "preempted", "spot_gpu_hours"):
        stacked[name] = (*figures[name], glossary.attrs(name))
    stacked["qps"] = per_pool
    for name in ("ready_instances", "breach"):
        stacked[name] = (*figures[name], glossary.attrs(name))
    return stacked


def _service_attrs(stacked: xr.Dataset, policy, step, prices, fleet, rate, seed) -> dict:
    """The whole service's figures: a step breaches if any pool does; costs and losses summed."""
    any_breach = np.logical_or.reduce(stacked.breach.values.astype(bool), axis=0)
    arrivals = float(stacked.arrivals.sum())
    return {
        "policy": policy,
        "step_s": step,
        "breach_s": float(any_breach.sum() * step),
        "usd": float(np.sum(stacked.usd.values)),
        "gpu_hours": float(stacked.gpu_hours.sum()),
        "preempted": int(np.sum(stacked.preempted.values)),
        "unserved_share": float(stacked.unserved.sum() / arrivals) if arrivals > 0 else 0.0,
        "pricing": "catalog on-demand" if prices is None else
        f"{prices.attrs.get('provider', 'given')}: reserved base, "
        + ("spot share of the elastic part at spot, " if "spot_instances" in fleet else "")
        + "on demand above",
        "spot_preemption_rate": "none" if rate is None else rate,
        "seed": int(seed),
    }  # fmt: skip

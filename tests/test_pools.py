"""The per-pool hand-off: a fleet over ``pool`` split over the traffic and replayed pool by pool."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import capnb
from capnb.errors import InputError

HOURS = 6


def _demand(seed: int = 3) -> xr.DataArray:
    rng = np.random.default_rng(seed)
    times = pd.date_range("2024-05-13", periods=HOURS * 3600, freq="s").values
    hour = (times.astype("datetime64[h]").astype(np.int64) % 24).astype(float)
    values = 40 + 10 * hour + rng.gamma(4.0, 2.0, times.size)
    return xr.DataArray(values, dims="time", coords={"time": times}, attrs={"step_s": 1.0})


def _fleet() -> xr.Dataset:
    slots = np.arange(24)
    a = np.where(slots < 3, 4, 6)
    b = np.where(slots < 3, 2, 0)
    return xr.Dataset(
        {
            "instances": (("pool", "slot"), np.stack([a, b])),
            "reserved_instances": ("pool", [3, 0]),
        },
        coords={
            "pool": ["H200 TP1", "A100-80GB TP1"],
            "gpu": ("pool", ["H200", "A100-80GB"]),
            "tensor_parallel": ("pool", [1, 1]),
            "per_instance_qps": ("pool", [12.0, 5.0]),
            "slot": slots,
        },
    )


def test_pool_demand_splits_by_planned_capacity_and_sums_back():
    demand, fleet = _demand(), _fleet()
    split = capnb.elasticity.pool_demand(demand, fleet)
    assert split.dims == ("pool", "time")
    np.testing.assert_allclose(split.sum("pool").values, demand.values)
    hour = demand.time.dt.hour.values
    early = hour < 3
    # hours 0-2: 4 x 12 against 2 x 5 requests/s of capacity; later the A100 pool holds none
    np.testing.assert_allclose(split.isel(pool=0).values[early], demand.values[early] * 48 / 58)
    assert (split.isel(pool=1).values[~early] == 0).all()


def test_the_pools_and_their_times_carry_the_glossarys_attrs():
    # pool_demand built pool and time from bare values, and simulate_pools's qps brought them
    # over its own: the runs came back over a pool and a time with no units or long_name
    from capnb import glossary

    demand, fleet = _demand(), _fleet()
    split = capnb.elasticity.pool_demand(demand, fleet)
    runs = capnb.elasticity.simulate_pools(demand, fleet, cold_start_s=60)
    for result in (split, runs):
        assert result.pool.attrs == glossary.attrs("pool")
        assert result.time.attrs == glossary.attrs("time")


def test_stages_carry_every_request():
    demand = _demand()
    fleet = _fleet().assign(demand_share=("pool", [1.0, 1.0]))
    split = capnb.elasticity.pool_demand(demand, fleet)
    np.testing.assert_allclose(split.isel(pool=1).values, demand.values)


def test_simulate_pools_equals_each_pool_simulated_alone():
    demand, fleet = _demand(), _fleet()
    runs = capnb.elasticity.simulate_pools(
        demand, fleet, policy="knative", cold_start_s={"H200 TP1": 60, "A100-80GB TP1": 90},
        tolerance_s=60, scale_up_threshold=0.8,
    )  # fmt: skip
    split = capnb.elasticity.pool_demand(demand, fleet)
    breach = np.zeros(demand.size, bool)
    for i, (cold, floor, qps, gpu) in enumerate([(60, 3, 12.0, "H200"), (90, 0, 5.0, "A100-80GB")]):
        alone = capnb.elasticity.simulate(
            split.isel(pool=i, drop=True), per_instance_qps=qps, policy="knative",
            cold_start_s=cold, min_instances=floor, tolerance_s=60, scale_up_threshold=0.8,
            gpu=gpu,
        )  # fmt: skip
        for name in ("breach_s", "served", "dropped", "gpu_hours", "usd", "peak_instances"):
            assert float(runs[name].isel(pool=i)) == pytest.approx(float(alone[name]), rel=1e-12)
        np.testing.assert_array_equal(runs.ready_instances.isel(pool=i), alone.ready_instances)
        breach |= alone.breach.values.astype(bool)
    assert runs.attrs["breach_s"] == breach.sum() * 1.0
    assert runs.attrs["usd"] == pytest.approx(float(runs.usd.sum()))
    assert runs.reserved_instances.values.tolist() == [3, 0]


def test_reserved_base_priced_at_the_reserved_price():
    demand, fleet = _demand(), _fleet()
    prices = capnb.data.gpu_prices("hyperstack")
    runs = capnb.elasticity.simulate_pools(
        demand, fleet, policy="fixed", min_instances=3, cold_start_s=60, prices=prices
    )
    hours = HOURS * 1.0
    h200 = prices.usd_per_gpu_hour.sel(gpu="H200")
    expected = 3 * hours * float(h200.sel(pricing="reserved"))
    assert float(runs.usd.isel(pool=0)) == pytest.approx(expected)
    a100 = prices.usd_per_gpu_hour.sel(gpu="A100-80GB", pricing="on_demand")
    assert float(runs.usd.isel(pool=1)) == pytest.approx(3 * hours * float(a100))


def test_bad_fleets_are_named():
    demand, fleet = _demand(), _fleet()
    with pytest.raises(InputError, match="Dataset over pool"):
        capnb.elasticity.simulate_pools(demand, fleet.isel(pool=0))
    with pytest.raises(InputError, match="per_instance_qps of pool 'A100-80GB TP1'"):
        capnb.elasticity.pool_demand(
            demand, fleet.assign_coords(per_instance_qps=("pool", [12.0, 0.0]))
        )
    # a fleet with no instances at all is no error any more: an idle slot's traffic is split as if
    # each pool had one instance (test_a_slot_the_fleet_left_empty_still_sends_its_traffic...)
    split = capnb.elasticity.pool_demand(demand, fleet.assign(instances=fleet.instances * 0))
    np.testing.assert_allclose(split.sum("pool"), demand.values)
    with pytest.raises(InputError, match="cold_start_s: give one per pool"):
        capnb.elasticity.simulate_pools(demand, fleet, cold_start_s={"H200 TP1": 60})
    with pytest.raises(InputError, match="dates"):
        capnb.elasticity.pool_demand(np.ones(100), fleet, step_s=1.0)
    with pytest.raises(InputError, match="slots="):
        capnb.elasticity.pool_demand(demand, fleet.isel(slot=slice(0, 12)))


def _spot_fleet() -> xr.Dataset:
    # the H200 pool: a reserved base of 3, then 1 on demand and 2 spot in every slot after hour 2
    fleet = _fleet()
    spot = np.zeros((2, 24), np.int64)
    spot[0, 3:] = 2
    return fleet.assign(spot_instances=(("pool", "slot"), spot))


def _prices() -> xr.Dataset:
    kinds = ["on_demand", "reserved", "spot"]
    return xr.Dataset(
        {"usd_per_gpu_hour": (("gpu", "pricing"), [[4.0, 3.0, 1.0], [2.0, 1.5, 0.5]])},
        coords={"gpu": ["H200", "A100-80GB"], "pricing": kinds},
        attrs={"provider": "test"},
    )


def test_spot_instances_priced_at_spot_and_preempted_at_the_stated_rate():
    demand, fleet = _demand(), _spot_fleet()
    settings = dict(policy="fixed", cold_start_s=60, prices=_prices(), min_instances=6)
    calm = capnb.elasticity.simulate_pools(demand, fleet, **settings)
    # a fixed 6 of which 3 reserved, above them hours 0-2 plan 1 on demand (no spot) and later
    # 1 on demand and 2 spot: the elastic 3 are a third on demand there, two thirds spot
    early, late = 3 * 3600, (HOURS - 3) * 3600
    spot_hours = late * 3 * 2 / 3 / 3600
    assert float(calm.spot_gpu_hours.isel(pool=0)) == pytest.approx(spot_hours)
    want = HOURS * 3 * 3.0 + spot_hours * 1.0 + (HOURS * 3 - spot_hours) * 4.0
    assert float(calm.usd.isel(pool=0)) == pytest.approx(want)
    assert calm.preempted.values.tolist() == [0, 0] and early > 0
    assert "spot share of the elastic part at spot" in calm.attrs["pricing"]
    # at 2 preemptions per spot instance-hour: about 2 x 2 spot x 3 h = 12 lost, all in the
    # H200 pool after hour 2, each restarted through the 60-s cold start
    lost = capnb.elasticity.simulate_pools(demand, fleet, **settings, spot_preemption_rate=2.0,
                                           seed=7)  # fmt: skip
    assert 0 < int(lost.preempted.isel(pool=0)) < 40 and int(lost.preempted.isel(pool=1)) == 0
    assert lost.attrs["preempted"] == int(lost.preempted.sum())
    ready = lost.ready_instances.isel(pool=0).values
    assert (ready[:early] == 6).all() and ready[early:].min() < 6
    assert int(lost.instances_started.isel(pool=0)) == int(lost.preempted.isel(pool=0))
    assert float(lost.gpu_hours.isel(pool=0)) < float(calm.gpu_hours.isel(pool=0))
    again = capnb.elasticity.simulate_pools(demand, fleet, **settings, spot_preemption_rate=2.0,
                                            seed=7)  # fmt: skip
    np.testing.assert_array_equal(again.ready_instances, lost.ready_instances)
    with pytest.raises(InputError, match="spot_preemption_rate"):
        capnb.elasticity.simulate_pools(demand, fleet, **settings, spot_preemption_rate=-1.0)
    with pytest.raises(InputError, match="spot_instances"):
        capnb.elasticity.simulate_pools(
            demand, fleet.assign(spot_instances=fleet.spot_instances * 3), **settings
        )
    with pytest.raises(InputError, match="spot_preemption_rate instead"):
        capnb.elasticity.simulate_pools(demand, fleet, **settings, preemption=1.0)


def test_a_slot_the_fleet_left_empty_still_sends_its_traffic_to_the_pools():
    # an idle hour planned at 0 instances: traffic arriving then is split as if each pool had
    # one instance (it raised "fleet has no instances in slot 0" and no idle service could plan)
    from capnb.elasticity._pools import _shares

    fleet = xr.Dataset(
        {"instances": (("pool", "slot"), [[0, 2, 3], [0, 1, 0]]),
         "per_instance_qps": ("pool", [2.0, 5.0])},
        coords={"pool": ["a", "b"], "slot": [0, 1, 2]},
    )  # fmt: skip
    share = _shares(fleet)
    assert share.dims == ("pool", "slot")
    np.testing.assert_allclose(share.sel(slot=0), [2 / 7, 5 / 7])
    np.testing.assert_allclose(share.sel(slot=1), [4 / 9, 5 / 9])
    np.testing.assert_allclose(share.sum("pool"), 1.0)


def test_a_fleet_without_a_plan_for_some_slots_names_them_by_weekday_and_hour():
    # a fleet planned per hour of week without Saturday 10:00-16:00 was refused for
    # "slot(s) [130, 131, 132, 133, 134]": codes, and only the first five of the six
    fleet = _fleet().isel(slot=[0]).drop_vars("slot")
    week = [s for s in range(168) if not 130 <= s < 136]
    fleet = fleet.isel(slot=np.zeros(len(week), dtype=int)).assign_coords(slot=week)
    times = pd.date_range("2026-01-05", periods=7 * 24 * 60, freq="min").values  # a Monday
    demand = xr.DataArray(np.full(times.size, 5.0), dims="time", coords={"time": times})
    with pytest.raises(InputError, match=r"no plan for 6 hour of week slots \(Sat 10:00-16:00\)"):
        capnb.elasticity.pool_demand(demand.assign_attrs(step_s=60.0), fleet, slots="hour_of_week")

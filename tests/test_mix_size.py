"""Mixed fleets by request size (capnb.capacity.mix_by_size) against brute force and Mélange.

Brute force, independent of the solver: every assignment of slices to pools (Mélange's binary
formulation), every reserved base; for the free split with two pools, the exchange argument (a
pool takes the bins it is comparatively best at first) over every instance count.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from capnb.capacity import compare_fleets, mix_by_size, size_bins, validate_mix
from capnb.errors import InfeasibleError, InputError


def options_of(q, gpus=None, tps=None):
    q = np.asarray(q, dtype=float)
    pools = [f"P{i}" for i in range(q.shape[1])]
    return xr.Dataset(
        {"per_instance_qps": (("size_bin", "pool"), q)},
        coords={"size_bin": [f"b{i}" for i in range(q.shape[0])], "pool": pools,
                "gpu": ("pool", gpus or [f"G{i}" for i in range(q.shape[1])]),
                "tensor_parallel": ("pool", tps or [1] * q.shape[1])},
    )  # fmt: skip


def prices_of(on_demand, reserved=None):
    kinds = ["on_demand"] + (["reserved"] if reserved is not None else [])
    table = [[o] + ([r] if reserved is not None else []) for o, r in
             zip(on_demand, reserved or on_demand, strict=True)]  # fmt: skip
    return xr.Dataset(
        {"usd_per_gpu_hour": (("gpu", "pricing"), table)},
        coords={"gpu": [f"G{i}" for i in range(len(on_demand))], "pricing": kinds},
    )


def demand_of(values):
    return xr.DataArray(np.asarray(values, float), dims="slot", coords={"slot": range(len(values))})


def brute_slices(q, demand, shares, slices, on_demand, reserved=None):
    """Cheapest day (sum of slot costs) over every slice assignment and every reserved base."""
    q = np.asarray(q, float)
    n_bin, n_pool = q.shape
    parts = [b for b in range(n_bin) for _ in range(slices)]
    counts_by_slot = []  # per slot: the instance counts some assignment needs
    for rate in demand:
        needs = set()
        for assign in itertools.product(range(n_pool), repeat=len(parts)):
            if any(np.isnan(q[b, p]) for b, p in zip(parts, assign, strict=True)):
                continue
            load = np.zeros(n_pool)
            for b, p in zip(parts, assign, strict=True):
                load[p] += rate * shares[b] / slices / q[b, p]
            needs.add(tuple(math.ceil(x - 1e-9) for x in load))
        counts_by_slot.append(needs)
    most = [max(n[p] for needs in counts_by_slot for n in needs) for p in range(n_pool)]
    bases = (
        [(0,) * n_pool] if reserved is None else itertools.product(*(range(m + 1) for m in most))
    )
    best = math.inf
    for base in bases:
        day = len(demand) * sum(r * c for r, c in zip(reserved or [0] * n_pool, base, strict=True))
        for needs in counts_by_slot:
            day += min(sum(o * max(n - h, 0) for o, n, h in zip(on_demand, need, base, strict=True))
                       for need in needs)  # fmt: skip
        best = min(best, day)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_slices_equal_brute_force_on_small_cases(seed):
    rng = np.random.default_rng(seed)
    q = rng.uniform(1, 12, size=(3, 2)).round(2)
    if seed == 5:
        q[0, 1] = np.nan  # a bin one pool cannot serve within the SLA
    shares = rng.dirichlet(np.ones(3)).round(3)
    shares[-1] = 1 - shares[:-1].sum()
    demand = rng.uniform(5, 40, size=2).round(1)
    on_demand = [1.0, 2.7]
    for slices, reserved in ((1, None), (2, None), (2, [0.6, 1.5])):
        setting = dict(prices=prices_of(on_demand, reserved), slices=slices,
                       shares=xr.DataArray(shares, dims="size_bin"),
                       reserved=None if reserved is None else "reserved")  # fmt: skip
        fleet = mix_by_size(options_of(q), demand_of(demand), exact_base=True, **setting)
        expected = brute_slices(q, demand, shares, slices, on_demand, reserved)
        assert float(fleet.usd_per_hour.sum()) == pytest.approx(expected, abs=1e-9)
        # the quick base: never below the optimum, and within the gap it reports
        quick = mix_by_size(options_of(q), demand_of(demand), **setting)
        day = float(quick.usd_per_hour.sum())
        assert expected - 1e-9 <= day <= expected / (1 - quick.attrs["optimality_gap"]) + 1e-9


def brute_split_two_pools(q, need, price):
    """Free split, two pools, one slot: fill pool 0 with the bins it is comparatively best at."""
    order = np.argsort(-(q[:, 0] / q[:, 1]))
    best = math.inf
    for n0 in range(0, 60):
        left, room = need.astype(float).copy(), float(n0)
        for b in order:
            take = min(left[b], room * q[b, 0])
            left[b] -= take
            room -= take / q[b, 0]
        n1 = math.ceil((left / q[:, 1]).sum() - 1e-9)
        best = min(best, n0 * price[0] + n1 * price[1])
    return best


@pytest.mark.parametrize("seed", range(8))
def test_the_free_split_equals_the_exchange_argument_and_is_never_dearer(seed):
    rng = np.random.default_rng(100 + seed)
    q = rng.uniform(0.5, 20, size=(5, 2))
    shares = rng.dirichlet(np.ones(5))
    rate = float(rng.uniform(5, 80))
    price = [1.01, 3.67]
    fleet = mix_by_size(options_of(q), demand_of([rate]), prices=prices_of(price),
                        shares=xr.DataArray(shares, dims="size_bin"), reserved=None)  # fmt: skip
    assert float(fleet.usd_per_hour[0]) == pytest.approx(
        brute_split_two_pools(q, rate * shares, price), abs=1e-9
    )
    whole = mix_by_size(options_of(q), demand_of([rate]), prices=prices_of(price),
                        shares=xr.DataArray(shares, dims="size_bin"), reserved=None, slices=1)  # fmt: skip
    assert float(fleet.usd_per_hour[0]) <= float(whole.usd_per_hour[0]) + 1e-9
    # every bin is served in full, and no pool carries more load than its instances
    np.testing.assert_allclose(fleet.served_qps.sum("pool").values[:, 0], rate * shares, atol=1e-6)
    load = (fleet.served_qps / xr.DataArray(q, dims=("size_bin", "pool"))).sum("size_bin")
    assert (load.values <= fleet.instances.values + 1e-6).all()


def test_melanges_example_is_reproduced():
    out = validate_mix.toy()
    assert out["whole"][0] == [3, 1] and out["whole"][1] == pytest.approx(6.70)
    assert out["split"][1] == pytest.approx(4.68) and out["split"][1] < out["whole"][1]


@pytest.fixture(scope="module")
def melange():
    """The three checks computed now (:func:`validate_mix.record`), once for the tests below."""
    return validate_mix.record()


@pytest.mark.slow
def test_the_stored_melange_record_is_a_fresh_computations(melange):
    """Worksheet 06 shows the stored record: it must be what the code computes now."""
    import json

    now = json.loads(json.dumps(melange))
    assert validate_mix._same(now, json.loads(validate_mix.RECORD.read_text()))
    toy, cells, table = validate_mix.stored()
    assert toy["whole"][0] == [3, 1] and list(table.rate_qps) == list(validate_mix.RATES)
    assert cells.same_gpu.isna().sum() == (~cells.read).sum()  # unread tiles stay NaN
    assert validate_mix.main([]) == 0
    changed = json.loads(json.dumps(now))
    changed["savings"][0]["saving"] *= 1.001
    assert not validate_mix._same(now, changed)


@pytest.mark.slow
def test_the_per_bin_curves_pick_melanges_cheaper_gpu_per_size(melange):
    cells = pd.DataFrame(melange["heatmap"])
    read = cells[cells.read]
    assert read.same_gpu.sum() >= 26 and len(read) == 28
    assert np.corrcoef(cells.published_pct, cells.capnb_pct)[0, 1] > 0.9


@pytest.mark.slow
def test_melanges_setup_at_one_request_per_second_matches_its_plot(melange):
    row = pd.DataFrame(melange["savings"]).iloc[0]
    assert row.rate_qps == 1
    # Mélange's Plot 7 at 1 request/s: one A10G and one L4 (1.71 USD/hour), 15 % below two A10G,
    # and H100 alone 4.4x dearer: its "77 %"
    assert row.fleet == "1 x L4 TP1, 1 x A10G TP1"
    assert row.saving == pytest.approx(1 - 1 / 1.17, abs=0.01)
    assert row.worst_single_over_mix == pytest.approx(4.4, abs=0.05)


def test_reserved_base_and_single_type_costs():
    q = [[10.0, 30.0], [2.0, 12.0]]
    fleet = mix_by_size(options_of(q), demand_of([40, 10, 60]), prices=prices_of([1.0, 3.0], [0.5, 1.8]),
                        shares=xr.DataArray([0.7, 0.3], dims="size_bin"))  # fmt: skip
    assert (fleet.instances >= fleet.reserved_instances).all()
    assert fleet.attrs["optimality_gap"] >= 0
    # each pool alone on demand, every bin on it: ceil(sum of loads) per slot, averaged
    load = np.array([[0.7 * d / 10 + 0.3 * d / 2 for d in (40, 10, 60)],
                     [0.7 * d / 30 + 0.3 * d / 12 for d in (40, 10, 60)]])  # fmt: skip
    single = (np.ceil(load - 1e-9) * np.array([[1.0], [3.0]])).mean(1)
    np.testing.assert_allclose(fleet.single_type_usd_per_hour.values, single)
    assert fleet.attrs["mix_usd_per_hour"] <= single.min() + 1e-9


def test_the_mix_by_size_keeps_the_demands_slot_coordinate_with_the_glossarys_attrs():
    # as capacity.mix did, mix_by_size rebuilt slot from its bare values: a forecast's
    # target_qps came back over a slot with no units, long_name or kind (hour_of_day)
    from capnb import glossary

    slot_attrs = {**glossary.attrs("slot"), "kind": "hour_of_day"}
    demand = demand_of([40, 10, 60]).assign_coords(slot=("slot", [0, 1, 2], slot_attrs))
    kept = dict(
        prices=prices_of([1.0, 3.0], [0.5, 1.8]), shares=xr.DataArray([0.7, 0.3], dims="size_bin")
    )
    fleet = mix_by_size(options_of([[10.0, 30.0], [2.0, 12.0]]), demand, **kept)
    assert fleet.slot.attrs == slot_attrs
    bare = mix_by_size(options_of([[10.0, 30.0], [2.0, 12.0]]), demand.drop_vars("slot"), **kept)
    assert bare.slot.attrs == glossary.attrs("slot")


def test_a_service_of_one_instance_a_slot_gets_its_reserved_base():
    # one size bin, under one instance of load in every slot: the program that picks the base,
    # counting instances above it fractionally, held none, and the fleet was one on-demand
    # instance every slot (3.2 USD/h, "saving" 0) where one reserved (2.72 USD/h) serves it
    options = options_of([[18.8, 8.3]])
    demand = demand_of(np.linspace(2, 10, 24))
    prices = prices_of([3.2, 3.0], [2.72, 2.6])
    fleet = mix_by_size(options, demand, prices=prices, shares=xr.DataArray([1.0], dims="size_bin"))
    exact = mix_by_size(options, demand, prices=prices, shares=xr.DataArray([1.0], dims="size_bin"),
                        exact_base=True)  # fmt: skip
    assert fleet.reserved_instances.values.tolist() == exact.reserved_instances.values.tolist()
    assert fleet.reserved_instances.values.tolist() == [1, 0]
    assert fleet.attrs["mix_usd_per_hour"] == pytest.approx(exact.attrs["mix_usd_per_hour"])
    assert fleet.attrs["mix_usd_per_hour"] == pytest.approx(2.72)
    assert fleet.attrs["saving"] == pytest.approx(1 - 2.72 / 3.2)


def test_bins_and_bad_inputs():
    bins = size_bins(prompt_tokens=[10, 600, 600, 20_000], output_tokens=[5, 100, 100, 5])
    assert bins.requests.values.tolist() == [1, 2, 1]
    assert bins.size_bin_index.values.tolist() == [0, 1, 1, 2]
    assert bins.request_share.sum() == pytest.approx(1)
    with pytest.raises(InputError, match="outside the bin edges"):
        size_bins(prompt_tokens=[10], output_tokens=[5], prompt_edges=(1, 5))
    with pytest.raises(InputError, match="shares must sum to 1"):
        mix_by_size(options_of([[1.0], [2.0]]), demand_of([3]), prices=prices_of([1.0]),
                    shares=xr.DataArray([0.5, 0.6], dims="size_bin"), reserved=None)  # fmt: skip
    with pytest.raises(
        InfeasibleError,
        match=r"infeasible: no pool meets the SLA for size bin\(s\) b0 "
        r"\(50% of the requests\)",
    ):
        mix_by_size(options_of([[np.nan, 1.0], [2.0, 2.0]]).isel(pool=[0]), demand_of([3]),
                    prices=prices_of([1.0, 1.0]), shares=xr.DataArray([0.5, 0.5], dims="size_bin"),
                    reserved=None)  # fmt: skip
    with pytest.raises(InputError, match="slices"):
        mix_by_size(options_of([[1.0]]), demand_of([3]), prices=prices_of([1.0]),
                    shares=xr.DataArray([1.0], dims="size_bin"), reserved=None, slices=0)  # fmt: skip


def test_a_request_below_the_first_edge_is_told_to_lower_it_not_to_end_the_edges_with_inf():
    # prompt_edges=(128, 1024, inf) already end with inf; a 100-token prompt was told "end the
    # edges with inf", which it had done: the message names the edge and the side it is on
    with pytest.raises(InputError, match=r"prompt 100 is below prompt_edges\[0\] = 128") as below:
        size_bins(
            prompt_tokens=[300, 100], output_tokens=[10, 10], prompt_edges=(128, 1024, np.inf)
        )
    assert "request 1 " in str(below.value) and "end the edges with inf" not in str(below.value)
    with pytest.raises(InputError, match=r"output 70 is at or above output_edges\[-1\] = 64"):
        size_bins(prompt_tokens=[300], output_tokens=[70], output_edges=(1, 64))


def test_an_unserved_bin_of_few_requests_reads_its_share_not_zero():
    # one request in 2,500 (prompt 8192+ on a log of short chats) is 0.04%, not "0.0%"
    with pytest.raises(InfeasibleError, match=r"size bin\(s\) b0 \(0\.040% of the requests\)"):
        mix_by_size(options_of([[np.nan, 1.0], [2.0, 2.0]]).isel(pool=[0]), demand_of([3]),
                    prices=prices_of([1.0, 1.0]),
                    shares=xr.DataArray([0.0004, 0.9996], dims="size_bin"), reserved=None)  # fmt: skip


def _two_gpu_curves():
    """Per-instance requests/s of two GPUs: for the whole workload, and by two size bins."""
    whole = xr.Dataset(
        {"per_instance_qps": (("gpu", "tensor_parallel"), [[4.0], [9.0]])},
        coords={"gpu": ["G0", "G1"], "tensor_parallel": [1]},
    )
    by_size = xr.Dataset(
        {"per_instance_qps": (("size_bin", "gpu", "tensor_parallel"), [[[12.0], [14.0]],
                                                                       [[1.5], [6.0]]]),
         "request_share": ("size_bin", [0.6, 0.4])},
        coords={"size_bin": ["short", "long"], "gpu": ["G0", "G1"], "tensor_parallel": [1]},
    )  # fmt: skip
    return whole, by_size


def test_fleets_side_by_side_never_get_dearer_down_each_curve():
    whole, by_size = _two_gpu_curves()
    demand = demand_of([30, 12, 45, 60])
    table = compare_fleets(whole, by_size, demand, prices=prices_of([1.0, 2.5], [0.7, 1.8]))
    cost = dict(zip(table.fleet.values, table.usd_per_hour.values, strict=True))
    assert cost["by size: types mixed by size, reserved base"] <= min(
        cost["by size: one type, reserved base"], cost["by size: types mixed by size, on demand"]
    ) * (1 + table.attrs["optimality_gap"])
    assert (
        cost["whole workload: types mixed, reserved base"]
        <= cost["whole workload: one type, reserved base"] + 1e-9
    )
    first = table.saving.values[[0, 3]]
    assert (first == 0).all() and (table.saving.values >= -1e-9).all()


def test_the_one_type_reserved_row_is_the_cheapest_type_reserved_not_the_on_demand_winner():
    # G0 is cheapest on demand (1.00 against 1.05 USD/h) but G1's reservation is far deeper (0.50
    # against 0.95): the "one type, reserved base" row held G0 at 3.80 USD/h while "types
    # mixed, reserved base" held G1 alone at 2.00, so the table said mixing saved 45 points that
    # one type reserved saves on its own
    whole = xr.Dataset(
        {"per_instance_qps": (("gpu", "tensor_parallel"), [[10.0], [10.0]])},
        coords={"gpu": ["G0", "G1"], "tensor_parallel": [1]},
    )
    by_size = xr.Dataset(
        {"per_instance_qps": (("size_bin", "gpu", "tensor_parallel"), [[[10.0], [10.0]]] * 2),
         "request_share": ("size_bin", [0.5, 0.5])},
        coords={"size_bin": ["short", "long"], "gpu": ["G0", "G1"], "tensor_parallel": [1]},
    )  # fmt: skip
    table = compare_fleets(whole, by_size, demand_of([40] * 4), mip_gap=0.0,
                           prices=prices_of([1.0, 1.05], [0.95, 0.5]))  # fmt: skip
    cost = dict(zip(table.fleet.values, table.usd_per_hour.values, strict=True))
    pools = dict(zip(table.fleet.values, table.pools.values, strict=True))
    for curves in ("whole workload", "by size"):
        assert pools[f"{curves}: one type, on demand"] == "G0 TP1"
        assert pools[f"{curves}: one type, reserved base"] == "G1 TP1"
        assert cost[f"{curves}: one type, reserved base"] == pytest.approx(2.0)
    assert cost["whole workload: types mixed, reserved base"] == pytest.approx(2.0)


def test_fleets_side_by_side_say_when_no_reserved_price_exists():
    # at aws (on-demand prices only) the four "reserved base" rows held no reserved instance and
    # cost what on demand does (18.06 USD/h, saving 0 %), and the table said nothing of it where
    # capacity.mix says reserved_unpriced; the table now carries it
    whole, by_size = _two_gpu_curves()
    prices = prices_of([1.0, 2.5], [np.nan, np.nan])
    table = compare_fleets(whole, by_size, demand_of([30, 12, 45, 60]), prices=prices)
    assert table.attrs["reserved_unpriced"] == "G0, G1"
    priced = compare_fleets(whole, by_size, demand_of([30, 12, 45, 60]),
                            prices=prices_of([1.0, 2.5], [0.7, 1.8]))  # fmt: skip
    assert "reserved_unpriced" not in priced.attrs


def test_fleets_side_by_side_need_a_reserved_kind_for_their_reserved_rows():
    # reserved=None gave four rows named "reserved base" bought on demand (hyperstack, the bimodal
    # log: "types mixed, reserved base" 6.94 USD/h where the reserved base costs 6.15) and a
    # reserved_pricing attr of None
    whole, by_size = _two_gpu_curves()
    with pytest.raises(InputError, match="reserved must name the pricing kind of the reserved"):
        compare_fleets(whole, by_size, demand_of([30, 12]), reserved=None,
                       prices=prices_of([1.0, 2.5], [0.7, 1.8]))  # fmt: skip


def test_fleets_side_by_side_are_priced_with_the_mixs_spot_and_limits():
    # worksheet 06 priced its mix with spot (62% below one type on demand) and its quota, then set
    # the fleets side by side without either: "types mixed, reserved base" saved 20% on the same
    # page; the table now takes the same spot_preemption and limits
    from capnb.capacity import mix

    whole, by_size = _two_gpu_curves()
    demand = demand_of([30, 12, 45, 60])
    prices = xr.Dataset(
        {"usd_per_gpu_hour": (("gpu", "pricing"), [[1.0, 0.7, 0.35], [2.5, 1.8, 0.9]])},
        coords={"gpu": ["G0", "G1"], "pricing": ["on_demand", "reserved", "spot"]},
    )
    settings = dict(prices=prices, spot_preemption=0.1, limits={"G1": 4})
    table = compare_fleets(whole, by_size, demand, **settings, mip_gap=0.0)
    cost = dict(zip(table.fleet.values, table.usd_per_hour.values, strict=True))
    alone = mix(whole, demand, reserved="reserved", mip_gap=0.0, **settings)
    assert cost["whole workload: types mixed, reserved base"] == pytest.approx(
        alone.attrs["mix_usd_per_hour"]
    )
    by_size_mix = mix_by_size(by_size, demand, reserved="reserved", **settings)
    assert int((by_size_mix.instances.sel(pool="G1 TP1")).max()) <= 4
    assert cost["by size: types mixed by size, reserved base"] <= by_size_mix.attrs[
        "mix_usd_per_hour"
    ] * (1 + table.attrs["optimality_gap"])
    assert table.attrs["spot_preemption"] == 0.1 and table.attrs["limits"] == "G1: 4 GPUs"


def test_shares_are_read_by_their_size_bin_labels():
    # shares labelled in another order than the options' bins were read by position: the short
    # bin's share went to the long bin, with no error
    options = options_of([[10.0, 1.0], [1.0, 10.0]])  # G0 serves b0, G1 serves b1
    args = dict(prices=prices_of([1.0, 1.0]), reserved=None)
    ordered = xr.DataArray([0.9, 0.1], dims="size_bin", coords={"size_bin": ["b0", "b1"]})
    reversed_ = ordered.sel(size_bin=["b1", "b0"])
    fleet = mix_by_size(options, demand_of([100.0]), shares=reversed_, **args)
    expected = mix_by_size(options, demand_of([100.0]), shares=ordered, **args)
    assert fleet.served_qps.sum("pool").values.ravel().tolist() == pytest.approx([90.0, 10.0])
    assert fleet.instances.values.tolist() == expected.instances.values.tolist()
    with pytest.raises(InputError, match=r"shares.*'b9'"):
        mix_by_size(options, demand_of([100.0]), **args,
                    shares=xr.DataArray([0.9, 0.1], dims="size_bin",
                                        coords={"size_bin": ["b0", "b9"]}))  # fmt: skip


def test_shares_per_slot_are_read_by_their_slot_labels():
    # shares over (size_bin, slot) labelled slots 12, 0 against a demand over slots 0, 12 were read
    # by position: slot 0 got 10 % short requests where its shares said 90 %; shares labelled with
    # slots the demand lacks (5, 6) were used as if they were its own
    options = options_of([[10.0, 20.0], [1.0, 5.0]])
    args = dict(prices=prices_of([1.0, 3.0]), reserved=None)
    demand = xr.DataArray([10.0, 10.0], dims="slot", coords={"slot": [0, 12]})
    shares = xr.DataArray([[0.9, 0.1], [0.1, 0.9]], dims=("size_bin", "slot"),
                          coords={"size_bin": ["b0", "b1"], "slot": [0, 12]})  # fmt: skip
    fleet = mix_by_size(options, demand, shares=shares.sel(slot=[12, 0]), **args)
    served = fleet.served_qps.sum("pool").transpose("size_bin", "slot").values
    np.testing.assert_allclose(served, [[9.0, 1.0], [1.0, 9.0]])
    with pytest.raises(InputError, match=r"shares are over slots \[5, 6\].*demand_qps.*\[0, 12\]"):
        mix_by_size(options, demand, shares=shares.assign_coords(slot=[5, 6]), **args)


def test_shares_as_a_plain_list():
    # a list was AttributeError: 'list' object has no attribute 'transpose'
    options = options_of([[10.0, 1.0], [1.0, 10.0]])
    args = dict(prices=prices_of([1.0, 1.0]), reserved=None)
    fleet = mix_by_size(options, demand_of([100.0]), shares=[0.9, 0.1], **args)
    assert fleet.served_qps.sum("pool").values.ravel().tolist() == pytest.approx([90.0, 10.0])
    with pytest.raises(InputError, match="shares"):
        mix_by_size(options, demand_of([100.0]), shares="half", **args)


def test_limits_are_checked_as_mix_checks_them():
    # a negative or fractional quota ran the program: "infeasible: ... (HiGHS Status 8 ...)"
    args = dict(prices=prices_of([1.0, 1.0]), reserved=None, shares=[0.5, 0.5])
    options = options_of([[10.0, 1.0], [1.0, 10.0]])
    for cap in (-1, 2.5, True):
        with pytest.raises(InputError, match=r"limits\['G0'\] must be a whole number of GPUs"):
            mix_by_size(options, demand_of([10.0]), limits={"G0": cap}, **args)


def test_a_pool_a_limit_forbids_alone_is_not_the_single_type_the_mix_is_priced_against():
    # with G0 capped at 2 GPUs, G0 alone (3 instances in the busiest slot) was still the cheapest
    # single type, 2.0 USD/h, and the saving 0% against a fleet the quota forbids; mix gives NaN
    options = options_of([[10.0, 4.0]])
    fleet = mix_by_size(options, demand_of([10.0, 25.0]), prices=prices_of([1.0, 1.5]),
                        shares=[1.0], reserved=None, limits={"G0": 2})  # fmt: skip
    assert np.isnan(fleet.single_type_usd_per_hour.sel(pool="G0 TP1"))
    assert fleet.attrs["single_type_pool"] == "G1 TP1"
    assert fleet.attrs["single_type_usd_per_hour"] == pytest.approx((3 + 7) / 2 * 1.5)
    assert fleet.attrs["mix_usd_per_hour"] <= fleet.attrs["single_type_usd_per_hour"]


def test_pools_no_price_covers_are_named_not_an_infeasible_program():
    # prices of other GPUs ended in "infeasible: no whole-instance fleet within the limits (...
    # HiGHS Status 8 ...)" with no limits given; mix raises NotPricedError naming the GPUs
    from capnb.errors import NotPricedError

    options = options_of([[10.0, 1.0], [np.nan, 10.0]])
    args = dict(reserved=None, shares=[0.5, 0.5])
    with pytest.raises(NotPricedError, match="G0, G1") as caught:
        mix_by_size(options, demand_of([10.0]), prices=prices_of([1.0, 1.0]).assign_coords(
            gpu=["X", "Y"]), **args)  # fmt: skip
    assert caught.value.gpus == ["G0", "G1"]
    # G1 alone serves b1 and has no price: that bin cannot be bought
    only_g0 = prices_of([1.0, 1.0]).sel(gpu=["G0"])
    with pytest.raises(
        InfeasibleError, match=r"bin\(s\) b1 .* only on G1, for which prices has no"
    ):
        mix_by_size(options, demand_of([10.0]), prices=only_g0, **args)


def test_a_gpu_meeting_the_sla_with_no_price_is_named_by_the_mix_by_size_as_by_mix():
    # Llama-3.1-8B on H100-SXM, L40S and A10G at hyperstack (no L40S, no A10G): capacity.mix said
    # not_priced "L40S, A10G"; mix_by_size listed both pools at 0 instances, its 6.5 % saving
    # against H100-SXM alone with not a word that the cheaper GPUs were never in the program
    from capnb.capacity import mix

    options = options_of([[10.0, 30.0, 6.0], [2.0, 12.0, np.nan]], gpus=["G0", "G1", "G2"])
    prices = prices_of([1.0, 3.0, 0.3]).sel(gpu=["G0", "G1"])
    fleet = mix_by_size(options, demand_of([40, 10]), prices=prices, reserved=None,
                        shares=[0.7, 0.3])  # fmt: skip
    assert fleet.attrs["not_priced"] == "G2"
    whole = options.isel(size_bin=0, drop=True).drop_vars("size_bin", errors="ignore")
    assert mix(whole, demand_of([40, 10]), prices=prices, reserved=None).attrs["not_priced"] == "G2"
    priced = mix_by_size(options, demand_of([40, 10]), prices=prices_of([1.0, 3.0, 0.3]),
                         reserved=None, shares=[0.7, 0.3])  # fmt: skip
    assert "not_priced" not in priced.attrs


def test_size_options_takes_the_axes_sweep_takes():
    # a numpy array of GPUs was one GPU named "array(['L40S', 'H100-SXM'], ...)", and a range or
    # array of degrees "tensor_parallel: expected a 1-D sequence, got shape (1, 2)"
    from capnb.capacity import SLA, size_options

    bins = size_bins(prompt_tokens=[500] * 4, output_tokens=[100] * 4)
    sla = SLA(ttft_s=2.0, tpot_s=0.05)
    listed = size_options("Llama-3.1-8B", ["L40S", "H100-SXM"], [1, 2], sla, bins)
    for gpus, tps in ((np.array(["L40S", "H100-SXM"]), range(1, 3)),
                      (("L40S", "H100-SXM"), np.array([1, 2]))):  # fmt: skip
        got = size_options("Llama-3.1-8B", gpus, tps, sla, bins)
        xr.testing.assert_identical(got, listed)


def test_bin_edges_that_are_not_numbers_are_named():
    # numpy's bare "could not convert string to float: 'short'" before
    with pytest.raises(InputError, match=r"prompt_edges must be at least two increasing token"):
        size_bins(prompt_tokens=[5], output_tokens=[5], prompt_edges=("short", "long"))


def test_bin_edges_between_token_counts_are_named():
    # edges 0.5, 100.5, inf put a 100-token prompt in the first bin, labelled "prompt 0-99"
    with pytest.raises(InputError, match=r"prompt_edges must be whole token counts.*100\.5"):
        size_bins(
            prompt_tokens=[100, 9000], output_tokens=[10, 20], prompt_edges=[0.5, 100.5, math.inf]
        )
    with pytest.raises(InputError, match=r"output_edges must be whole token counts"):
        size_bins(prompt_tokens=[100], output_tokens=[10], output_edges=[1, 63.5, math.inf])
    bins = size_bins(
        prompt_tokens=[100, 9000], output_tokens=[10, 20], prompt_edges=[0, 101, math.inf]
    )
    assert bins.size_bin.values.tolist() == [
        "prompt 0-100 / output 1-63",
        "prompt 101+ / output 1-63",
    ]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"spot_preemption": "high"}, "spot_preemption"), ({"mip_gap": "0.1"}, "mip_gap"),
     ({"mip_gap": None}, "mip_gap")],
)  # fmt: skip
def test_settings_that_are_not_numbers_are_named_by_both_mixes(kwargs, name):
    # ValueError "could not convert string to float: 'high'", TypeError "'<=' not supported
    # between instances of 'int' and 'str'" before
    from capnb.capacity import mix

    options = options_of([[10.0]])
    with pytest.raises(InputError, match=rf"{name} must be in \[0, 1\)"):
        mix_by_size(options, demand_of([5.0]), prices=prices_of([1.0]), shares=[1.0],
                    reserved=None, **kwargs)  # fmt: skip
    with pytest.raises(InputError, match=rf"{name} must be in \[0, 1\)"):
        mix(options.isel(size_bin=0, drop=True), demand_of([5.0]), prices=prices_of([1.0]),
            reserved=None, **kwargs)  # fmt: skip


@pytest.mark.slow
def test_a_bin_no_gpus_kv_cache_holds_is_infeasible_in_the_mix_not_an_error_of_the_options():
    # a chat log with 20 % documents of 20,000-30,000 prompt tokens, Llama-3.1-8B on L4 alone on
    # the engine model: size_options stopped with "infeasible: no GPU in ['L4'] ... can hold one
    # 24954-token sequence", naming no bin, while beside another GPU the same bin was NaN
    # ('infeasible_memory') and the mix named it with its share of the requests, as documented
    # (50,000 tokens here: an L4 profiled as vllm serve runs it holds 43,344)
    from capnb.capacity import SLA, size_options

    prompt = [300] * 8 + [50_000] * 2
    bins = size_bins(prompt_tokens=prompt, output_tokens=[100] * 8 + [300] * 2)
    options = size_options("Llama-3.1-8B", ["L4"], [1], SLA(ttft_s=10.0, tpot_s=0.08), bins,
                           latency="engine")  # fmt: skip
    long = "prompt 8192+ / output 256-1023"
    assert np.isnan(options.per_instance_qps.sel(size_bin=long)).all()
    assert (options.binding.sel(size_bin=long) == "infeasible_memory").all()
    assert (options.per_instance_qps.sel(size_bin="prompt 128-511 / output 64-255") > 0).all()
    from capnb.data import gpu_prices

    demand = xr.DataArray([1.0, 2.0], dims="slot", coords={"slot": [0, 1]})
    said = rf"size bin\(s\) {re.escape(long)} \(20% of the requests\)"
    with pytest.raises(InfeasibleError, match=said):
        mix_by_size(options, demand, prices=gpu_prices("hyperstack"), reserved=None)


def test_a_bin_of_too_few_requests_for_its_quantile_is_named_with_its_count():
    # 200 short chats and 3 long prompts: the long bin's "P99" TPOT was the worst of 3 requests
    # (its maximum), given as a P99 with no word; the options, and the fleets priced on them, now
    # name the bin and its count
    from capnb.capacity import size_options

    prompt, output = [300] * 200 + [6000, 7000, 6500], [150] * 200 + [100, 150, 120]
    bins = size_bins(prompt_tokens=prompt, output_tokens=output)
    options = size_options("Llama-3.1-8B", ["H100-SXM"], [1], 0.06, bins)
    note = options.attrs["few_requests"]
    assert note.startswith("prompt 2048-8191 / output 64-255 (3 requests)")
    assert "fewer than 100 requests" in note and "prompt 128-511" not in note
    fleet = mix_by_size(options, demand_of([5.0]), prices=prices_of([2.0]).assign_coords(
        gpu=["H100-SXM"]), reserved=None)  # fmt: skip
    assert fleet.attrs["few_requests"] == note
    enough = size_options("Llama-3.1-8B", ["H100-SXM"], [1], 0.06, bins, quantile=0.5)
    assert "few_requests" not in enough.attrs  # a median of 3 is not their maximum


def test_a_reserved_kind_not_in_the_prices_is_named_with_the_kinds_there_are():
    # reserved="resrved" at hyperstack said "pricing 'resrved' is not in prices
    # ([np.str_('on_demand'), np.str_('reserved_1y'), ...])": numpy's reprs, and no argument
    from capnb.data import gpu_prices

    options = options_of([[2.0, 3.0]], gpus=["H100-PCIe", "A100-80GB-PCIe"])
    with pytest.raises(InputError) as error:
        mix_by_size(
            options,
            demand_of([4.0]),
            prices=gpu_prices("hyperstack"),
            shares=[1.0],
            reserved="resrved",
        )
    said = str(error.value)
    assert "np.str_" not in said and "reserved='resrved'" in said
    assert "(on_demand, reserved_1y, reserved_3y, reserved, spot)" in said


def test_a_bin_longer_than_the_models_context_is_named_not_priced_in_silence():
    # 200 chats and 40 documents of 8-30K prompt tokens on Llama-2-7B (a 4,096-token context):
    # the documents' bin was priced at 0.68 requests/s on an H100-SXM and sent there by the mix,
    # with no word that vLLM rejects every one of them; the options and the fleets now name it
    from capnb.capacity import size_options

    prompt = [300] * 200 + list(np.linspace(8_000, 30_000, 40).round())
    output = [150] * 240
    bins = size_bins(prompt_tokens=prompt, output_tokens=output,
                     prompt_edges=(1, 1024, 32768), output_edges=(1, 1024))  # fmt: skip
    options = size_options("Llama-2-7B", ["H100-SXM"], [1], 0.1, bins, quantile=0.9)
    note = options.attrs["beyond_context"]
    assert note.startswith(
        "prompt 1024-32767 / output 1-1023 (40 of 40 requests, the longest 30,150"
    )
    assert "Llama-2-7B's context of 4,096 tokens" in note and "prompt 1-1023" not in note
    fleet = mix_by_size(options, demand_of([5.0]), prices=prices_of([2.0]).assign_coords(
        gpu=["H100-SXM"]), reserved=None)  # fmt: skip
    assert fleet.attrs["beyond_context"] == note
    fits = size_options("Llama-3.1-8B", ["H100-SXM"], [1], 0.1, bins, quantile=0.9)
    assert "beyond_context" not in fits.attrs  # 131,072 tokens hold them all
    whole = xr.Dataset({"per_instance_qps": (("gpu", "tensor_parallel"), [[2.0]])},
                       coords={"gpu": ["H100-SXM"], "tensor_parallel": [1]})  # fmt: skip
    fleets = compare_fleets(whole, options, demand_of([5.0]), prices=prices_of(
        [2.0], [1.5]).assign_coords(gpu=["H100-SXM"]))  # fmt: skip
    assert fleets.attrs["beyond_context"] == note


def test_limits_no_fleet_fits_in_name_the_bin_or_the_slot_not_the_solver():
    # chats on G0 or G1, documents on G1 alone: with G1 capped at 0 GPUs, and with G0 at 1 and G1
    # at 1 for 30 requests/s, both said "infeasible: no whole-instance fleet within the limits
    # (The problem is infeasible. (HiGHS Status 8 ...))"; capacity.mix names the slot
    options = options_of([[10.0, 10.0], [np.nan, 1.0]])
    args = dict(prices=prices_of([1.0, 1.0]), reserved=None, shares=[0.8, 0.2])
    with pytest.raises(InfeasibleError) as caught:
        mix_by_size(options, demand_of([1.0, 2.0]), limits={"G1": 0}, **args)
    said = str(caught.value)
    assert "HiGHS" not in said
    assert re.search(r"size bin\(s\) b1 \(20% of the requests\) .* only on G1, which limits "
                     r"hold at 0 GPUs", said), said  # fmt: skip
    with pytest.raises(InfeasibleError) as caught:
        mix_by_size(options, demand_of([1.0, 30.0]), limits={"G0": 1, "G1": 1}, **args)
    said = str(caught.value)
    assert "HiGHS" not in said
    assert re.search(r"slot 1 needs 30\.0 requests/s; .* \(G0: 1 GPUs, G1: 1 GPUs\)", said), said


def test_a_negative_or_infinite_rate_is_named_not_read_as_missing_the_sla():
    # per_instance_qps of -3 (or inf) in bin b0 on P0 was read as "P0 misses the SLA for b0" and
    # the fleet priced without it (3.33 USD/h), silently; NaN or 0 is how a pool misses the SLA
    args = dict(prices=prices_of([1.0, 1.0]), reserved=None, shares=[0.5, 0.5])
    for bad in (-3.0, np.inf):
        options = options_of([[bad, 1.0], [1.0, 10.0]])
        with pytest.raises(InputError, match=r"per_instance_qps.*b0.*P0.*(-3|inf)"):
            mix_by_size(options, demand_of([10.0]), **args)
    zero = mix_by_size(options_of([[0.0, 2.0], [1.0, 10.0]]), demand_of([10.0]), **args)
    assert zero.served_qps.sel(size_bin="b0", pool="G0 TP1").item() == 0.0

"""Mixed fleets: the integer program against exhaustive enumeration on small cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import xarray as xr

import capnb
from capnb.errors import ConfigError, InfeasibleError, InputError


def _options(gpus, tps, qps):
    return xr.Dataset(
        {"per_instance_qps": ("pool", np.asarray(qps, float))},
        coords={
            "pool": [f"p{i}" for i in range(len(gpus))],
            "gpu": ("pool", gpus),
            "tensor_parallel": ("pool", tps),
        },
    )


def _prices(table):
    """{gpu: {pricing: price}} -> the Dataset gpu_prices returns."""
    gpus = list(table)
    kinds = list(capnb.data.PRICINGS)
    values = [[table[g].get(k, np.nan) for k in kinds] for g in gpus]
    return xr.Dataset(
        {"usd_per_gpu_hour": (("gpu", "pricing"), values)}, coords={"gpu": gpus, "pricing": kinds}
    )


def _brute(q, g, gpus, price, demand, keep, limits, top):
    """Cheapest total cost over the day by trying every fleet with at most `top` of each."""
    n = len(q)
    best = np.inf
    r_price = [price[gpus[p]].get("reserved", np.nan) for p in range(n)]
    o_price = [price[gpus[p]].get("on_demand", np.nan) for p in range(n)]
    v_price = (
        [price[gpus[p]].get("spot", np.nan) for p in range(n)] if keep is not None else [np.nan] * n
    )
    choices = lambda prices: [range(top + 1) if not np.isnan(x) else [0] for x in prices]  # noqa: E731
    for held in itertools.product(*choices(r_price)):
        total = sum(held[p] * g[p] * r_price[p] for p in range(n) if held[p]) * len(demand)
        for d in demand:
            slot_best = np.inf
            for extra in itertools.product(*choices(o_price), *choices(v_price)):
                o, v = extra[:n], extra[n:]
                served = sum(q[p] * (held[p] + o[p] + (keep or 0) * v[p]) for p in range(n))
                if served < d - 1e-9:
                    continue
                if any(
                    sum(g[p] * (held[p] + o[p] + v[p]) for p in range(n) if gpus[p] == k) > cap
                    for k, cap in limits.items()
                ):
                    continue
                cost = sum(
                    g[p] * (o[p] * o_price[p] + (v[p] * v_price[p] if v[p] else 0))
                    for p in range(n)
                    if o[p] or v[p]
                )
                slot_best = min(slot_best, cost)
            total += slot_best
            if not np.isfinite(total):
                break
        best = min(best, total)
    return best


CASES = [
    # (gpus, tensor_parallel, qps, prices, demand, spot_preemption, limits, most of each kind)
    (
        ["A", "B"],
        [1, 2],
        [3.0, 7.0],
        {"A": {"on_demand": 2.0, "reserved": 1.3}, "B": {"on_demand": 3.5, "reserved": 2.0}},
        [5.0, 11.0, 2.0],
        None,
        {},
        6,
    ),
    (
        ["A", "B"],
        [1, 1],
        [4.0, 9.0],
        {"A": {"on_demand": 1.0, "reserved": 0.7, "spot": 0.4}, "B": {"on_demand": 2.1}},
        [8.0, 17.0, 30.0],
        0.25,
        {},
        12,
    ),
    (
        ["A", "B"],
        [1, 1],
        [5.0, 6.0],
        {"A": {"on_demand": 1.0, "reserved": 0.6}, "B": {"on_demand": 1.5, "reserved": 1.0}},
        [14.0, 22.0, 9.0],
        None,
        {"A": 2},
        6,
    ),
    (
        ["A", "A", "B"],
        [1, 2, 1],
        [2.0, 5.0, 3.0],
        {"A": {"on_demand": 1.0, "reserved": 0.8, "spot": 0.3}, "B": {"on_demand": 1.1}},
        [6.0, 10.0],
        0.5,
        {"A": 3},
        5,
    ),
]


CASES.append(  # A at TP 2 serves less than two A at TP 1: left out of the program, still reported
    (["A", "A", "B"], [1, 2, 1], [3.0, 5.0, 4.0],
     {"A": {"on_demand": 1.0, "reserved": 0.7}, "B": {"on_demand": 1.4}},
     [7.0, 13.0], None, {}, 6)
)  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_the_milp_finds_the_exhaustive_optimum(case):
    gpus, tps, qps, table, demand, preempt, limits, top = case
    out = capnb.capacity.mix(
        _options(gpus, tps, qps),
        xr.DataArray(demand, dims="slot"),
        prices=_prices(table),
        spot_preemption=preempt,
        limits=limits,
    )
    keep = None if preempt is None else 1 - preempt
    assert int(out.instances.max()) <= top  # the optimum lies in the enumerated space
    best = _brute(qps, tps, gpus, table, demand, keep, limits, top=top)
    assert out.usd_per_hour.sum().item() == pytest.approx(best, abs=1e-9)
    assert np.all(out.served_qps.values >= np.asarray(demand) - 1e-9)
    assert out.sizes["pool"] == len(gpus)
    # a looser gap stops within it of the proven bound: never below the optimum, never far above
    fast = capnb.capacity.mix(
        _options(gpus, tps, qps),
        xr.DataArray(demand, dims="slot"),
        prices=_prices(table),
        spot_preemption=preempt,
        limits=limits,
        mip_gap=0.05,
    )
    day = fast.usd_per_hour.sum().item()
    assert best - 1e-9 <= day <= best / (1 - 0.05) + 1e-9
    assert (day - best) / day <= fast.attrs["optimality_gap"] + 1e-12
    for gpu, cap in limits.items():
        mine = out.gpu == gpu
        assert int((out.instances * out.tensor_parallel).where(mine, 0).sum("pool").max()) <= cap


def test_no_reserved_base_is_the_per_slot_cheapest_on_demand():
    # one pool, on demand only: ceil(demand / qps) in every slot, as the single-type plan
    out = capnb.capacity.mix(
        _options(["A"], [2], [4.0]),
        xr.DataArray([9.0, 4.0, 0.0], dims="slot"),
        prices=_prices({"A": {"on_demand": 1.5, "reserved": 1.0}}),
        reserved=None,
    )
    assert out.instances.sel(pool="p0").values.tolist() == [3, 1, 0]
    assert out.attrs["mix_usd_per_hour"] == pytest.approx(out.attrs["single_type_usd_per_hour"])
    assert out.usd_per_hour.values.tolist() == pytest.approx([9.0, 3.0, 0.0])


def test_a_flat_day_is_all_reserved_and_a_spike_is_on_demand():
    demand = xr.DataArray([10.0] * 23 + [30.0], dims="slot")
    out = capnb.capacity.mix(
        _options(["A"], [1], [10.0]),
        demand,
        prices=_prices({"A": {"on_demand": 2.0, "reserved": 1.2}}),
    )
    assert int(out.reserved_instances.item()) == 1
    assert out.on_demand_instances.sel(pool="p0").values.tolist() == [0] * 23 + [2]
    assert out.attrs["saving"] == pytest.approx(1 - (1.2 * 24 + 4.0) / 24 / ((2.0 * 23 + 6.0) / 24))


def test_the_mix_keeps_the_demands_slot_coordinate_with_the_glossarys_attrs():
    # the mix rebuilt slot from its bare values: a forecast's target_qps came back over a slot
    # with no units, long_name or kind (hour_of_day), unlike every other glossary dim it returns
    from capnb import glossary

    slot_attrs = {**glossary.attrs("slot"), "kind": "hour_of_day"}
    demand = xr.DataArray([10.0] * 23 + [30.0], dims="slot",
                          coords={"slot": ("slot", np.arange(24), slot_attrs)})  # fmt: skip
    prices = _prices({"A": {"on_demand": 2.0, "reserved": 1.2}})
    out = capnb.capacity.mix(_options(["A"], [1], [10.0]), demand, prices=prices)
    assert out.slot.attrs == slot_attrs
    bare = capnb.capacity.mix(_options(["A"], [1], [10.0]), demand.drop_vars("slot"), prices=prices)
    assert bare.slot.attrs == glossary.attrs("slot")


def test_infeasible_limits_name_the_slot():
    with pytest.raises(InfeasibleError, match="infeasible: slot 1 needs 50.0"):
        capnb.capacity.mix(
            _options(["A"], [1], [10.0]),
            xr.DataArray([5.0, 50.0], dims="slot"),
            prices=_prices({"A": {"on_demand": 1.0}}),
            limits={"A": 4},
        )


@pytest.mark.parametrize(("value", "said"), [(np.nan, "nan"), (-1.0, "-1")])
def test_a_bad_slot_of_demand_is_named(value, said):
    # found feeding my log's hourly rates with an hour the log did not reach (NaN): the error said
    # "must be finite requests/s >= 0 in every slot", not which slot of 24
    slots = [0, 6, 12, 18]
    demand = xr.DataArray([5.0, 6.0, value, 7.0], dims="slot", coords={"slot": slots})
    options = _options(["A"], [1], [10.0])
    prices = _prices({"A": {"on_demand": 1.0}})
    where = rf"demand_qps at slot 12 is {said}"
    with pytest.raises(InputError, match=where):
        capnb.capacity.mix(options, demand, prices=prices)
    by_size = xr.Dataset(
        {"per_instance_qps": (("size_bin", "pool"), [[10.0]])},
        coords={"size_bin": ["all"], "pool": ["A TP1"], "gpu": ("pool", ["A"]),
                "tensor_parallel": ("pool", [1])},
    )  # fmt: skip
    with pytest.raises(InputError, match=where):
        capnb.capacity.mix_by_size(by_size, demand, prices=prices, shares=[1.0])


def test_the_gpus_no_price_covers_are_named_in_a_typed_error():
    # the provider lists only B; A and C meet the SLA (C's throughput is 0: it does not, unnamed)
    from capnb.errors import NotPricedError

    with pytest.raises(NotPricedError, match="A, D") as caught:
        capnb.capacity.mix(
            _options(["A", "C", "D"], [1, 1, 2], [10.0, 0.0, 20.0]),
            xr.DataArray([5.0], dims="slot"),
            prices=_prices({"B": {"on_demand": 1.0}}),
        )
    assert caught.value.gpus == ["A", "D"] and isinstance(caught.value, InputError)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"spot_preemption": 1.0}, "spot_preemption"),
        ({"limits": {"Z": 3}}, "limits"),
        ({"limits": {"A": -1}}, "limits"),
        ({"reserved": "reserved_9y"}, "reserved_9y"),
        ({"mip_gap": -0.1}, "mip_gap"),
        ({"demand_qps": [5.0]}, "demand_qps"),
        ({"demand_qps": xr.DataArray([-1.0], dims="slot")}, "demand_qps"),
        ({"options": xr.Dataset()}, "options"),
    ],
)
def test_bad_arguments_are_named(kwargs, name):
    args = {"options": _options(["A"], [1], [10.0]), "demand_qps": xr.DataArray([5.0], dims="slot")}
    args.update(kwargs)
    with pytest.raises(InputError, match=name):
        capnb.capacity.mix(prices=_prices({"A": {"on_demand": 1.0}}), **args)


def test_the_bundled_prices_have_sources_and_dates():
    table = capnb.data.load_gpu_prices()
    assert set(table.pricing) <= set(capnb.data.PRICINGS)
    assert (
        table.source.str.len().min() > 20 and table.captured.str.match(r"\d{4}-\d{2}-\d{2}").all()
    )
    assert not table.duplicated(["gpu", "provider", "pricing"]).any()


def test_a_bad_price_row_names_its_line(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(
        "gpu,provider,pricing,usd_per_gpu_hour,source,captured,notes\n"
        "H100-SXM,x,on_demand,2.0,somewhere,2026-01-01,\n"
        "H100-SXM,x,monthly,2.0,somewhere,2026-01-01,\n"
    )
    with pytest.raises(ConfigError, match="line 3"):
        capnb.data.load_gpu_prices(path)


@pytest.mark.parametrize(
    ("row", "said"),
    [
        # found adding prices of my own for an H20: a row without a provider or a capture date
        # was taken (the provider NaN, no provider's table holding it; the source "q (nan)"),
        # and an empty price or GPU read "got nan" and "gpu nan"
        ("H100-SXM,,spot,1.0,q,2026-12-01,", "provider"),
        ("H100-SXM,x,spot,1.0,q,,", "captured"),
        ("H100-SXM,x,spot,,q,2026-12-01,", "usd_per_gpu_hour"),
        (",x,spot,1.0,q,2026-12-01,", "gpu"),
    ],
)
def test_an_empty_cell_of_a_price_row_is_named(tmp_path, row, said):
    path = tmp_path / "p.csv"
    path.write_text("gpu,provider,pricing,usd_per_gpu_hour,source,captured,notes\n" + row + "\n")
    with pytest.raises(ConfigError, match=rf"p\.csv, line 2: {said} is empty; every price needs "):
        capnb.data.load_gpu_prices(path)


def test_the_solvers_own_prints_are_dropped_and_the_answer_kept(capfd, monkeypatch):
    import os

    import scipy.optimize
    from scipy.optimize import LinearConstraint, milp

    from capnb.capacity._mix import quiet_milp

    args = ([1.0, 2.0],)
    kwargs = dict(constraints=LinearConstraint([[1.0, 1.0]], 3, np.inf), integrality=[1, 1])
    assert np.array_equal(quiet_milp(*args, **kwargs).x, milp(*args, **kwargs).x)  # same answer

    def noisy(*a, **k):  # HiGHS writes from C++ to file descriptor 1
        os.write(1, b"HighsMipSolverData::transformNewIntegerFeasibleSolution\n")
        return "solved"

    monkeypatch.setattr(scipy.optimize, "milp", noisy)
    print("capnb's own line")  # buffered before the call: kept
    assert quiet_milp() == "solved"
    os.write(1, b"after\n")  # descriptor 1 is back
    out = capfd.readouterr().out
    assert "capnb's own line" in out and "after" in out and "Highs" not in out


def test_a_gap_keeps_the_fractional_programs_base_when_it_is_within_it():
    # a day of 24 slots: the fractional program's base, priced exactly, is the answer when it is
    # within the gap of that program's optimum (the bound); a gap of 0 proves the whole program
    rng = np.random.default_rng(7)
    demand = xr.DataArray(400 + 150 * rng.random(24), dims="slot")
    table = {"A": {"on_demand": 1.6, "reserved": 1.36}, "B": {"on_demand": 6.0, "reserved": 5.1}}
    options, prices = _options(["A", "B"], [1, 1], [5.9, 38.6]), _prices(table)
    quick = capnb.capacity.mix(options, demand, prices=prices, mip_gap=0.05)
    exact = capnb.capacity.mix(options, demand, prices=prices)
    assert "fractional" in quick.attrs["solver"] and "whole-instance" in exact.attrs["solver"]
    day, best = quick.usd_per_hour.sum().item(), exact.usd_per_hour.sum().item()
    assert exact.attrs["optimality_gap"] < 1e-9
    assert best - 1e-9 <= day <= best / (1 - 0.05)
    assert (day - best) / day <= quick.attrs["optimality_gap"] <= 0.05
    assert np.all(quick.served_qps.values >= demand.values - 1e-9)
    # a gap the fractional base cannot meet falls back to the whole program
    tight = capnb.capacity.mix(options, demand, prices=prices, mip_gap=1e-6)
    assert "whole-instance" in tight.attrs["solver"] and tight.attrs["optimality_gap"] <= 1e-6


@pytest.mark.parametrize("price", [-1.0, 0.0, np.inf])
def test_a_price_of_no_cost_or_less_is_named(price):
    # a hand-built prices Dataset with -1 USD/GPU-hour planned a fleet at -10 USD/hour (every
    # instance the bounds allowed), and one of 0 a fleet of that size at no cost, saving NaN
    options = _options(["A", "B"], [1, 1], [2.0, 20.0])
    prices = _prices({"A": {"on_demand": price}, "B": {"on_demand": 3.67}})
    for fleet in (capnb.capacity.mix, capnb.capacity.mix_by_size):
        given = (
            options.expand_dims(size_bin=["all"])
            if fleet is capnb.capacity.mix_by_size
            else options
        )
        with pytest.raises(InputError, match=r"prices: usd_per_gpu_hour of A \(on_demand\)"):
            fleet(given, xr.DataArray([30.0], dims="slot"), prices=prices, reserved=None,
                  **({"shares": [1.0]} if fleet is capnb.capacity.mix_by_size else {}))  # fmt: skip


def test_spot_asked_for_without_a_spot_price_is_said():
    # spot_preemption given, but the provider prices no spot for these GPUs: none is planned,
    # and the mix says so (the plan's sentence reads it); with a spot price it is not said
    args = dict(options=_options(["A", "B"], [1, 1], [5.0, 7.0]),
                demand_qps=xr.DataArray([9.0, 21.0], dims="slot"), spot_preemption=0.05)  # fmt: skip
    none = capnb.capacity.mix(prices=_prices({"A": {"on_demand": 1.0}, "B": {"on_demand": 1.5}}),
                              **args)  # fmt: skip
    assert none.attrs["spot_unpriced"] == "A, B" and int(none.spot_instances.sum()) == 0
    some = capnb.capacity.mix(
        prices=_prices({"A": {"on_demand": 1.0, "spot": 0.4}, "B": {"on_demand": 1.5}}), **args
    )
    assert "spot_unpriced" not in some.attrs


def test_the_mix_says_what_it_buys_above_its_base():
    # worksheet 06 said "the cheapest mix (nothing reserved, on demand above)" of a mix that held
    # 169 spot instance-hours and no on-demand one (Qwen3-30B-A3B, spot at 35% of on demand)
    args = dict(
        options=_options(["A"], [1], [5.0]), demand_qps=xr.DataArray([9.0, 21.0], dims="slot")
    )
    kinds = {"on_demand": 1.0, "spot": 0.35, "reserved": 0.9}
    spot = capnb.capacity.mix(
        prices=_prices({"A": kinds}), spot_preemption=0.1, reserved=None, **args
    )
    assert int(spot.on_demand_instances.sum()) == 0 and int(spot.spot_instances.sum()) > 0
    assert spot.attrs["above"] == "spot"
    on_demand = capnb.capacity.mix(prices=_prices({"A": kinds}), reserved=None, **args)
    assert on_demand.attrs["above"] == "on demand"
    flat = capnb.capacity.mix(prices=_prices({"A": kinds}), options=args["options"],
                              demand_qps=xr.DataArray([9.0, 9.0], dims="slot"))  # fmt: skip
    assert int(flat.reserved_instances.sum()) == 2 and flat.attrs["above"] == "nothing"


def test_a_reserved_kind_the_provider_does_not_price_is_said():
    # [fleet] reserved = "reserved_1y" at a provider listing only "reserved": the mix held no
    # base and its plan line said "nothing reserved", as if reserving did not pay; it says why now
    from capnb.plan._fleet import sentence

    args = dict(options=_options(["A", "B"], [1, 1], [5.0, 7.0]),
                demand_qps=xr.DataArray([9.0, 21.0], dims="slot"))  # fmt: skip
    prices = _prices({"A": {"on_demand": 1.0, "reserved": 0.6}, "B": {"on_demand": 1.5}})
    prices.attrs["provider"] = "mine"
    none = capnb.capacity.mix(prices=prices, reserved="reserved_1y", **args)
    assert none.attrs["reserved_unpriced"] == "A, B" and int(none.reserved_instances.sum()) == 0
    by_size = capnb.capacity.mix_by_size(
        args["options"].expand_dims(size_bin=["all"]), args["demand_qps"], prices=prices,
        shares=[1.0], reserved="reserved_3y",
    )  # fmt: skip
    assert by_size.attrs["reserved_unpriced"] == "A, B"
    some = capnb.capacity.mix(prices=prices, reserved="reserved", **args)
    assert "reserved_unpriced" not in some.attrs
    replay = xr.Dataset(attrs={"usd": 10.0, "breach_s": 0.0})
    said = sentence(none, replay, 24.0, {"usd": 12.0, "breach_s": 0.0})
    assert (
        "(reserved_1y asked for, but mine lists no reserved_1y price for A, B: none reserved)"
        in said
    )


def test_a_gpu_meeting_the_sla_that_the_provider_does_not_price_is_said():
    # Qwen3-14B on L40S, A100-80GB and H100-SXM at hyperstack, which lists no L40S: the plan's
    # line said "the cheapest mix (1 x A100-80GB TP1 reserved; ...)" with the L40S pools left out
    # and not a word of it; a GPU that meets the SLA and has no price is now named
    from capnb.plan._fleet import sentence

    args = dict(options=_options(["A", "B", "C"], [1, 1, 2], [5.0, 7.0, np.nan]),
                demand_qps=xr.DataArray([9.0, 21.0], dims="slot"))  # fmt: skip
    prices = _prices({"A": {"on_demand": 1.0}, "C": {"on_demand": 0.5}})
    prices.attrs["provider"] = "mine"
    mixed = capnb.capacity.mix(prices=prices, **args)
    assert mixed.attrs["not_priced"] == "B"  # C meets no SLA: not named
    said = sentence(mixed, xr.Dataset(attrs={"usd": 10.0, "breach_s": 0.0}), 24.0,
                    {"usd": 12.0, "breach_s": 0.0})  # fmt: skip
    assert "(B meets the SLA, but mine lists no price for it: not in the mix)" in said
    priced = capnb.capacity.mix(prices=_prices({"A": {"on_demand": 1.0}, "B": {"on_demand": 2.0}}),
                                **args)  # fmt: skip
    assert "not_priced" not in priced.attrs


@pytest.mark.parametrize("rate", [-2.0, np.inf])
def test_a_negative_or_infinite_rate_per_instance_is_named_not_read_as_missing_the_sla(rate):
    # -2 requests/s per instance on pool A was dropped as if A missed the SLA, and the mix came
    # back priced on B alone (1.5 USD/hour) with no word; NaN or 0 still mean "misses the SLA"
    options = _options(["A", "B"], [1, 1], [rate, 2.0])
    prices = _prices({"A": {"on_demand": 1.0}, "B": {"on_demand": 1.5}})
    demand = xr.DataArray([1.0], dims="slot")
    with pytest.raises(InputError, match=r"per_instance_qps of pool p0 \(A TP1\) is -?inf|"
                                         r"per_instance_qps of pool p0 \(A TP1\) is -2"):  # fmt: skip
        capnb.capacity.mix(options, demand, prices=prices, reserved=None)
    stacked = xr.Dataset(
        {"per_instance_qps": (("gpu", "tensor_parallel"), [[rate], [2.0]])},
        coords={"gpu": ["A", "B"], "tensor_parallel": [1]},
    )
    with pytest.raises(InputError, match=r"per_instance_qps of pool A TP1 is"):
        capnb.capacity.mix(stacked, demand, prices=prices, reserved=None)
    missing = capnb.capacity.mix(_options(["A", "B"], [1, 1], [np.nan, 2.0]), demand,
                                 prices=prices, reserved=None)  # fmt: skip
    assert missing.attrs["mix_usd_per_hour"] == pytest.approx(1.5)


def test_a_bad_price_is_said_as_a_number():
    # the message printed "np.float64(-1.0)"
    options = _options(["A"], [1], [2.0])
    with pytest.raises(InputError, match=r"\(on_demand\) is -1;"):
        capnb.capacity.mix(options, xr.DataArray([1.0], dims="slot"),
                           prices=_prices({"A": {"on_demand": -1.0}}), reserved=None)  # fmt: skip


def test_no_demand_in_any_slot_saves_nothing_and_says_so_without_a_nan(recwarn):
    # demand 0 in every slot: both fleets cost 0 USD/hour and the saving was 0/0, NaN with
    # numpy's "invalid value" warning
    options = _options(["A", "B"], [1, 1], [2.0, 3.0])
    prices = _prices({"A": {"on_demand": 1.0, "reserved": 0.7}, "B": {"on_demand": 1.4}})
    demand = xr.DataArray([0.0, 0.0], dims="slot")
    fleet = capnb.capacity.mix(options, demand, prices=prices)
    by_size = capnb.capacity.mix_by_size(options.expand_dims(size_bin=["all"]), demand,
                                         prices=prices, shares=[1.0])  # fmt: skip
    for result in (fleet, by_size):
        assert result.attrs["mix_usd_per_hour"] == 0.0
        assert result.attrs["saving"] == 0.0
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]

"""The elasticity step: the article's decision engine, documented autoscaler behaviour, bad input."""

import math
import re

import numpy as np
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st

from capnb import data, elasticity
from capnb.elasticity import NoAction, ScaleDown, ScaleUp, decide_scaling_action
from capnb.errors import InputError
from capnb.kernels import autoscale as kernels


# -- the article's decision engine: every branch --------------------------------------------------
def decide(qps, capacity=100.0, **kw):
    settings = {"current_instances": 4, "cold_start_s": 20.0, "latency_budget_s": 60.0,
                "low_duration_s": 0.0} | kw  # fmt: skip
    return decide_scaling_action(qps, capacity, **settings)


def test_scale_up_adds_enough_to_bring_the_ratio_back_under_the_threshold():
    # ratio 0.9 over 0.7 with 4 instances: ceil(4 x (0.9 / 0.7 - 1)) = ceil(1.14) = 2
    assert decide(90) == ScaleUp(2)
    # just over the threshold still adds one
    assert decide(70.1) == ScaleUp(1)
    # the added instances bring the ratio to the threshold or below
    for qps in (71, 85, 99, 150, 400):
        action = decide(qps)
        assert qps / (100 / 4 * (4 + action.instances)) <= 0.7


def test_cold_start_longer_than_half_the_budget_vetoes_the_scale_up():
    assert decide(90, cold_start_s=31) == NoAction(
        "cold start time exceeds latency budget",
        "increase fixed capacity instead of elastic scaling",
    )
    assert decide(90, cold_start_s=30) == ScaleUp(2)  # exactly half is allowed


def test_the_veto_rule_refuses_a_cold_start_or_tolerance_that_is_not_finite_seconds_ge_0():
    # cold_start_vetoes(nan, 60) was False: an unknown cold start let every scale-up count (and a
    # negative tolerance, -60 s, vetoed nothing below -30 s); each is an error naming the argument
    assert elasticity.cold_start_vetoes("75 s", "1 min") is True
    bad = (("nan s", 60.0, "cold_start_s"), (30.0, math.nan, "tolerance_s"),
           (-75.0, 60.0, "cold_start_s"), (30.0, "-1 min", "tolerance_s"))  # fmt: skip
    for cold, tolerance, argument in bad:
        with pytest.raises(InputError, match=rf"^{argument} must be .* seconds"):
            elasticity.cold_start_vetoes(cold, tolerance)


def test_scale_down_waits_for_the_cooldown():
    assert decide(20, low_duration_s=600, cooldown_s=900) == NoAction(
        "cool-down period not met", "wait for sustained low traffic"
    )
    assert decide(20, low_duration_s=900, cooldown_s=900).reason == "cool-down period not met"
    assert decide(20, low_duration_s=901, cooldown_s=900) == ScaleDown(1)


def test_load_in_the_normal_range_keeps_the_fleet():
    for qps in (30, 50, 70):
        assert decide(qps) == NoAction("load within normal range", "maintain current capacity")


@given(st.floats(0, 1000), st.integers(1, 50), st.floats(0.5, 50), st.integers(0, 40),
       st.integers(0, 40), st.floats(0.3, 0.95), st.integers(0, 6))  # fmt: skip
def test_python_engine_and_kernel_rule_agree(qps, pool, per_qps, cold, budget, up, low_evals):
    cooldown, period = 3, 2
    action = decide_scaling_action(
        qps, pool * per_qps, current_instances=pool, cold_start_s=float(cold),
        latency_budget_s=float(budget), low_duration_s=float(low_evals * period),
        scale_up_threshold=up, scale_down_threshold=0.25, cooldown_s=float(cooldown),
    )  # fmt: skip
    target, _, vetoed = kernels.article_decision(
        qps, pool, per_qps, up, 0.25, low_evals - 1, period, cooldown, 2 * cold > budget
    )
    if isinstance(action, ScaleUp):
        assert target - pool == action.instances
    elif isinstance(action, ScaleDown):
        assert target == pool - 1
    else:
        assert target == pool
        assert vetoed == (action.reason == "cold start time exceeds latency budget")


def test_decision_engine_rejects_bad_input():
    with pytest.raises(InputError, match="max_qps"):
        decide(10, 0.0)
    with pytest.raises(InputError, match="current_qps"):
        decide(float("nan"))
    with pytest.raises(InputError, match="current_instances"):
        decide(10, current_instances=0)
    with pytest.raises(InputError, match="scale_down_threshold"):
        decide(10, scale_up_threshold=0.3, scale_down_threshold=0.5)


# -- documented autoscaler behaviour through the simulator ----------------------------------------
def steps_to(values_and_lengths):
    return np.concatenate([np.full(n, float(v)) for v, n in values_and_lengths])


@pytest.mark.parametrize("cold_start_s", [5, 30, 90, 150])
def test_cold_start_delays_capacity_by_exactly_its_length(cold_start_s):
    demand = steps_to([(10, 40), (40, 100)])

    def first_capacity_increase(cold):
        run = elasticity.simulate(demand, step_s=5, per_instance_qps=10, policy="hpa",
                                  cold_start_s=cold, cooldown_s=0)  # fmt: skip
        return run, np.flatnonzero(np.diff(run.ready_instances.values) > 0)[0] + 1

    # the same decision (end of step d) serves from step d + 1 without a cold start
    instant, at_once = first_capacity_increase(0)
    run, ready = first_capacity_increase(cold_start_s)
    time = run.time.values
    assert (time[ready] - time[at_once]) / np.timedelta64(1, "s") == cold_start_s
    starting = run.starting_instances.values
    assert (starting[at_once:ready] > 0).all() and starting[at_once - 1] == 0
    assert (run.ready_instances.values[at_once:ready] == instant.ready_instances.values[0]).all()


def test_hpa_four_pods_at_90_against_60_become_six():
    demand = steps_to([(240, 30), (360, 30)])  # 4 pods at 60 per pod, then at 90 per pod
    run = elasticity.simulate(demand, step_s=5, per_instance_qps=100, scale_up_threshold=0.6,
                              policy="hpa", cold_start_s=10, cooldown_s=0)  # fmt: skip
    assert run.ready_instances.values[29] == 4
    # the sync at the end of step 32 sees 90 per pod and orders 2 more, ready 2 steps later
    assert run.starting_instances.values[33] == 2 and run.ready_instances.values[35] == 6
    assert run.ready_instances.values[-1] == 6 and int(run.scale_up_events) == 1


def test_hpa_tolerance_keeps_ten_pods_at_105_and_scales_to_twelve_at_111():
    run = elasticity.simulate(steps_to([(1000, 30), (1050, 30), (1110, 30)]), step_s=5,
                              per_instance_qps=100, scale_up_threshold=1.0, policy="hpa",
                              cold_start_s=0, cooldown_s=0)  # fmt: skip
    ready = run.ready_instances.values
    assert (ready[:61] == 10).all()
    assert ready[-1] == 12 and int(run.scale_up_events) == 1


def test_hpa_scale_down_waits_out_the_stabilisation_window_then_drops_at_once():
    run = elasticity.simulate(steps_to([(1000, 30), (300, 120)]), step_s=5, per_instance_qps=100,
                              scale_up_threshold=1.0, policy="hpa", cooldown_s=300,
                              cold_start_s=0)  # fmt: skip
    ready = run.ready_instances.values
    # the last sync that saw 1,000 requests/s ends step 29; its recommendation of 10 holds for
    # the 300 s (60 steps) window, so the first sync without it ends step 89
    assert (ready[:90] == 10).all()
    assert (ready[90:] == 3).all()
    assert int(run.scale_down_events) == 1


def test_hpa_rate_policy_limits_the_scale_up():
    # from 2 pods the default policies allow max(2 + 4, 2 x 2) = 6 per 15 s
    run = elasticity.simulate(steps_to([(10, 30), (200, 60)]), step_s=5, per_instance_qps=10,
                              scale_up_threshold=1.0, policy="hpa", cold_start_s=0, cooldown_s=0)  # fmt: skip
    ready = run.ready_instances.values
    assert ready[29] == 1 and ready[33] == 5  # 1 + max(4, 1) = 5 after the first sync
    assert ready[-1] == 20


def _knative(jump_to):
    demand = steps_to([(28, 60), (jump_to, 6)])  # 4 pods at target 7 (10 x 0.7), then a jump
    return elasticity.simulate(demand, step_s=1, per_instance_qps=10, policy="knative",
                               cold_start_s=10, tick_s=1, stable_window_s=30,
                               panic_window_s=3)  # fmt: skip


def test_knative_panics_when_the_panic_window_needs_twice_the_ready_pods():
    # a new KPA over more than one pod starts in panic and leaves it after one stable window:
    # steps 0-30. Then 50 requests/s need ceil(50 / 7) = 8 pods = 2 x 4 ready: panic again from
    # the tick at the end of step 62, the first whose 3-s window holds only the new rate (steps
    # 63-65). 49 requests/s need 7 pods: no panic.
    assert float(_knative(49).panic_s) == 31
    assert float(_knative(50).panic_s) == 31 + 3
    assert int(_knative(50).starting_instances[-1]) == 4


def test_knative_does_not_scale_down_while_panicking():
    demand = steps_to([(28, 60), (70, 4), (7, 20)])
    run = elasticity.simulate(demand, step_s=1, per_instance_qps=10, policy="knative",
                              cold_start_s=2, tick_s=1, stable_window_s=30, panic_window_s=3)  # fmt: skip
    present = run.ready_instances.values + run.starting_instances.values
    peak = present.max()
    assert peak == 10 and (present[np.argmax(present) :] == peak).all()


def test_knative_scale_down_delay_holds_the_peak():
    demand = steps_to([(70, 60), (7, 120)])
    quick = elasticity.simulate(demand, step_s=1, per_instance_qps=10, policy="knative", tick_s=1,
                                stable_window_s=10, panic_window_s=2, cold_start_s=0)  # fmt: skip
    held = elasticity.simulate(demand, step_s=1, per_instance_qps=10, policy="knative", tick_s=1,
                               stable_window_s=10, panic_window_s=2, cold_start_s=0,
                               cooldown_s=60)  # fmt: skip
    assert int(quick.ready_instances[100]) < 10 and int(held.ready_instances[100]) == 10
    # the KPA halves at most per tick (max-scale-down-rate 2); the delay holds each step a minute
    assert int(quick.ready_instances[-1]) == 1 and int(held.ready_instances[-1]) == 5


def test_article_policy_scales_down_after_the_cooldown():
    demand = steps_to([(35, 60), (5, 400)])
    run = elasticity.simulate(demand, step_s=5, per_instance_qps=10, cold_start_s=20,
                              cooldown_s=900, evaluation_s=60)  # fmt: skip
    ready = run.ready_instances.values
    assert ready[0] == 5  # ceil(35 / 7)
    # low from step 60; the 16th low evaluation (960 s > 900 s) ends step 251
    assert (ready[:252] == 5).all() and ready[252] == 4
    assert ready[-1] == 1


def test_article_veto_leaves_the_burst_unserved_and_fixed_elastic_scales():
    demand = steps_to([(10, 60), (60, 200)])
    kw = {"step_s": 5, "per_instance_qps": 10, "cold_start_s": 90, "tolerance_s": 60}
    vetoed = elasticity.simulate(demand, **kw)
    scaled = elasticity.simulate(demand, policy="fixed_elastic", **kw)
    assert int(vetoed.scale_up_events) == 0 and int(vetoed.vetoed_scale_ups) > 0
    assert float(vetoed.unserved_share) > 0.5
    assert int(scaled.scale_up_events) > 0 and float(scaled.unserved_share) < 0.05


def test_thrash_counts_instances_stopped_soon_after_becoming_ready():
    demand = steps_to([(10, 20), (60, 12), (10, 40)] * 4)
    kw = {"step_s": 5, "per_instance_qps": 10, "cold_start_s": 10, "policy": "hpa"}
    eager = elasticity.simulate(demand, cooldown_s=0, **kw)
    patient = elasticity.simulate(demand, cooldown_s=600, **kw)
    assert int(eager.thrash) > 0 and int(patient.thrash) == 0
    assert float(eager.wasted_cold_start_gpu_hours) > 0
    assert float(patient.wasted_cold_start_gpu_hours) == 0


# -- results: units, sweep against simulate, dask -------------------------------------------------
def test_every_variable_carries_units_and_a_long_name():
    run = elasticity.simulate(np.full(100, 20.0), step_s=5, per_instance_qps=10, gpu="H100-SXM")
    for name, variable in run.variables.items():
        assert {"units", "long_name"} <= set(variable.attrs), name
    assert run.usd.attrs["units"] == "USD" and run.gpu_hours.attrs["units"] == "GPU·h"
    # 3 instances (ceil(20 / 7)) for 500 s at 2.99 USD per GPU-hour
    assert float(run.gpu_hours) == pytest.approx(3 * 500 / 3600)
    assert float(run.usd) == pytest.approx(3 * 500 / 3600 * 2.99)


def test_sweep_cells_equal_single_runs():
    rng = np.random.default_rng(11)
    demand = 30 + 25 * np.sin(np.arange(4000) / 300) + rng.gamma(1.0, 5.0, 4000)
    grid = elasticity.sweep(demand, step_s=5, per_instance_qps=10, policy=["article", "hpa"],
                            scale_up_threshold=[0.6, 0.8], cooldown_s=[0, 300],
                            cold_start_s=[30, 60], min_instances=[1, 3], buffer_instances=[0, 1],
                            tolerance_s=120)  # fmt: skip
    assert list(grid.dims) == ["policy", "scale_up_threshold", "cooldown_s", "cold_start_s",
                               "min_instances", "buffer_instances"]  # fmt: skip
    for cell in ({"policy": "article", "scale_up_threshold": 0.8, "cooldown_s": 300,
                  "cold_start_s": 60, "min_instances": 3, "buffer_instances": 1},
                 {"policy": "hpa", "scale_up_threshold": 0.6, "cooldown_s": 0,
                  "cold_start_s": 30, "min_instances": 1, "buffer_instances": 0}):  # fmt: skip
        one = elasticity.simulate(demand, step_s=5, per_instance_qps=10, tolerance_s=120, **cell)
        swept = grid.sel(cell)
        for name in ("served", "breach_s", "gpu_hours", "scale_events", "thrash", "peak_backlog"):
            assert float(swept[name]) == float(one[name]), name
        assert int(one.breach.sum()) * 5 == float(one.breach_s)


def test_a_list_of_one_policy_keeps_its_dim_and_a_name_does_not():
    demand = 20 + 15 * np.sin(np.arange(2000) / 200)
    kw = {"step_s": 5, "per_instance_qps": 5, "min_instances": [1, 2]}
    listed = elasticity.sweep(demand, policy=["hpa"], **kw)
    named = elasticity.sweep(demand, policy="hpa", **kw)
    assert listed.breach_s.dims == ("policy", "min_instances") and list(listed.policy) == ["hpa"]
    assert named.breach_s.dims == ("min_instances",) and "policy" not in named.coords
    xr.testing.assert_equal(listed.sel(policy="hpa").drop_vars("policy"), named)


def test_sweep_on_dask_equals_in_memory(dask_client):
    demand = 20 + 15 * np.sin(np.arange(3000) / 200)
    kw = {"step_s": 5, "per_instance_qps": 5, "cooldown_s": [0, 300, 900],
          "min_instances": [1, 2, 3, 4]}  # fmt: skip
    eager = elasticity.sweep(demand, **kw)
    lazy = elasticity.sweep(demand, chunks={"min_instances": 2}, **kw)
    assert lazy.breach_s.chunks is not None
    xr.testing.assert_identical(lazy.compute(), eager)


def test_pareto_front_and_choice():
    rng = np.random.default_rng(5)
    demand = 30 + 25 * np.sin(np.arange(6000) / 500) + rng.gamma(1.0, 4.0, 6000)
    grid = elasticity.sweep(demand, step_s=5, per_instance_qps=10, policy=["hpa", "fixed"],
                            min_instances=[1, 3, 5, 7, 9], cold_start_s=30, gpu="L4")  # fmt: skip
    front = elasticity.pareto_front(grid)
    assert front.dims == grid.usd.dims and front.dtype == bool
    cost, breach = grid.usd.values.ravel(), grid.breach_s.values.ravel()
    on = front.values.ravel()
    for i in range(cost.size):
        no_worse = (cost <= cost[i]) & (breach <= breach[i])
        dominated = (no_worse & ((cost < cost[i]) | (breach < breach[i]))).any()
        twin_on_front = (on & (cost == cost[i]) & (breach == breach[i])).any()
        assert on[i] == (not dominated and (on[i] or not twin_on_front)), i
    chosen = elasticity.choose(grid, breach_budget=0.01)
    cell = grid.sel(chosen)
    meets = grid.breach_share.values <= 0.01
    assert float(cell.breach_share) <= 0.01
    assert float(cell.usd) == grid.usd.values[meets].min()
    spotless = grid.breach_share.values == 0
    none_or_best = elasticity.choose(grid, breach_budget=0.0)
    if spotless.any():
        assert float(grid.usd.sel(none_or_best)) == grid.usd.values[spotless].min()
    else:
        assert none_or_best is None
    # the run least in breach, the cheaper of equals: against every run
    least = grid.sel(elasticity.least_breach(grid))
    fewest = grid.breach_share.values.min()
    assert float(least.breach_share) == fewest
    assert float(least.usd) == grid.usd.values[grid.breach_share.values == fewest].min()
    assert elasticity.least_breach(grid.sel(policy="hpa", min_instances=3)) == {}  # one run


def test_the_trough_level_of_a_slow_service_keeps_its_digits():
    # a service at 0.02-0.18 requests/s: its advice read "Dips below 0.1 requests/s" for a level of
    # 0.0767 (":.1f"); under 0.05 it read "Dips below 0.0 requests/s"
    t = np.arange(17_280)
    daily = 0.1 + 0.08 * np.sin(2 * np.pi * t / 17_280)
    grid = elasticity.sweep(daily, step_s=5, per_instance_qps=1, policy=["hpa"], cold_start_s=10,
                            min_instances=[1], tolerance_s=60, gpu="H100-SXM")  # fmt: skip
    level = grid.attrs["trough_level_qps"]
    advice = elasticity.recommend(grid, breach_budget=0.01)
    assert 0.05 < level < 0.1
    assert any(r.startswith(f"Dips below {level:.3g} requests/s last ") for r in advice.reasons)


def test_recommendation_applies_the_article_rules():
    t = np.arange(17_280)
    daily = 60 + 50 * np.sin(2 * np.pi * t / 17_280)  # a day at 5-s steps
    kw = {"step_s": 5, "per_instance_qps": 10, "policy": ["article", "hpa", "fixed", "fixed_elastic"],
          "min_instances": [1, 4, 8, 12, 16], "tolerance_s": 60, "gpu": "H100-SXM"}  # fmt: skip
    slow = elasticity.recommend(elasticity.sweep(daily, cold_start_s=90, **kw), breach_budget=0.01)
    assert slow.kind == "fixed_plus_buffer" and slow.meets_budget
    assert slow.reasons[0].startswith("Cold start 90 s exceeds half the 60 s tolerance")
    fast = elasticity.recommend(elasticity.sweep(daily, cold_start_s=10, **kw), breach_budget=0.01)
    assert fast.kind == "elastic" and fast.meets_budget
    assert any("short enough" in reason for reason in fast.reasons)
    flat = elasticity.recommend(elasticity.sweep(np.full(17_280, 60.0), cold_start_s=10, **kw),
                                breach_budget=0.01)  # fmt: skip
    assert flat.kind == "fixed" and flat.selection["policy"] == "fixed"
    assert "Run a fixed fleet" in flat.text


def test_a_fixed_fleet_far_cheaper_than_elastic_is_not_said_to_be_within_the_margin():
    # a slow service (3 requests/s, one instance of 20) and a 75-s cold start over a 60-s tolerance:
    # the only elastic runs the rules allow hold 2 warm spares, 3x the fixed fleet's cost; the note
    # read "A fixed fleet meets the budget within 10% of the best elastic cost (215.3 vs 645.8
    # USD)", as if the two cost about the same
    demand = np.full(17_280, 3.0)
    grid = elasticity.sweep(demand, step_s=5, per_instance_qps=20, policy=["hpa", "fixed"],
                            min_instances=[1], buffer_instances=[0, 2], cold_start_s=75,
                            tolerance_s=60, gpu="H100-SXM")  # fmt: skip
    advice = elasticity.recommend(grid, breach_budget=0.001)
    assert advice.kind == "fixed"
    fixed = float(grid.usd.sel(policy="fixed", buffer_instances=0).min())
    elastic = float(grid.usd.sel(policy="hpa", buffer_instances=2).min())
    assert elastic == pytest.approx(3 * fixed)
    note = next(reason for reason in advice.reasons if reason.startswith("A fixed fleet"))
    assert "within 10%" not in note
    assert (
        f"{1 - fixed / elastic:.0%} less than" in note
        and f"({fixed:,.1f} vs {elastic:,.1f} USD)" in note
    )


def test_a_recommendations_selection_picks_its_run_out_of_a_sweep_over_cold_starts():
    # recommend(grid, cold_start_s=90).selection was {'policy': 'hpa', 'min_instances': 3}: without
    # the cold start, grid.sel(**selection) kept both cold starts (30 and 90 s) and
    # describe(grid, **selection) failed with "choose one run"
    t = np.arange(17_280)
    daily = 8 + 12 * np.clip(np.sin(2 * np.pi * t / 17_280), 0, None)
    grid = elasticity.sweep(daily, step_s=5, per_instance_qps=4, policy=["fixed", "hpa"],
                            min_instances=[1, 3, 6], cold_start_s=[30, 90], tolerance_s=60,
                            gpu="H100-SXM")  # fmt: skip
    advice = elasticity.recommend(grid, cold_start_s=90)
    assert advice.selection["cold_start_s"] == 90
    cell = grid.sel(advice.selection)
    assert cell.breach_share.ndim == 0 and float(cell.usd) == advice.metrics["usd"]
    assert elasticity.describe(grid, **advice.selection).endswith("thrash.")


@pytest.mark.parametrize("call", ["recommend", "describe"])
def test_a_selection_outside_the_sweep_names_the_coordinate_and_its_values(call):
    # recommend(grid, cold_start_s=45) raised xarray's KeyError "not all values found in index
    # 'cold_start_s'. Try setting the `method` keyword argument", and gpu="H100" a KeyError
    # listing the Dataset's dims
    grid = elasticity.sweep(np.full(720, 30.0), step_s=5, per_instance_qps=10,
                            policy=["fixed", "hpa"], min_instances=4, cold_start_s=[30, 90])  # fmt: skip
    pick = getattr(elasticity, call)
    with pytest.raises(InputError, match=r"cold_start_s=45 is not in the sweep; it has \[30, 90\]"):
        pick(grid, cold_start_s=45, policy="fixed")
    with pytest.raises(InputError, match=r"gpu is not a coordinate of the sweep; it has .*policy"):
        pick(grid, cold_start_s=30, gpu="H100")


def test_troughs_measure_dips_inside_the_series():
    durations = elasticity.troughs([9, 1, 1, 9, 1, 9, 9, 1, 1, 1], step_s=10, level_qps=5)
    assert durations.values.tolist() == [20.0, 10.0]  # the last dip runs off the end: no length


def test_troughs_refuses_a_level_that_is_not_a_finite_rate_ge_0():
    # level_qps=nan (or 'nan requests/s') found no dip at all and answered [], as a smooth
    # series would; a level given per minute is the same dips as per second
    demand = [9, 1, 1, 9, 1, 9, 9, 1, 1, 1]
    per_minute = elasticity.troughs(demand, step_s="10 s", level_qps="300 requests/min")
    assert per_minute.values.tolist() == [20.0, 10.0]
    for level in (math.nan, "nan requests/s", -5.0, math.inf):
        with pytest.raises(
            InputError, match=r"^level_qps must be a finite number of requests/s >= 0"
        ):
            elasticity.troughs(demand, step_s=10, level_qps=level)


def test_fixed_instances_covers_the_quantile():
    demand = np.arange(1, 101, dtype=float)
    assert elasticity.fixed_instances(demand, 10, quantile=0.99, step_s=60) == math.ceil(99.01 / 10)


def test_fixed_instances_counts_as_the_capacity_step_does():
    # a demand of 30.000000000000004 requests/s (0.1 + 0.2 style float noise on 30) at 3
    # requests/s per instance: the capacity step said 10 instances (its ceiling after a 1e-12
    # relative tolerance), the elasticity step's fixed fleet 11
    from capnb import capacity

    for rate, per in [(30.000000000000004, 3.0), (1.1, 0.1), (10.5, 2.5), (12.0, 4.0)]:
        fixed = elasticity.fixed_instances([rate] * 10, per, quantile=1.0, step_s=60)
        assert fixed == int(capacity.instances(per, rate, buffer=0)), (rate, per)


def test_resample_demand_holds_a_rate_series_and_counts_a_log():
    series = data.load_rate_series("servegen-m-large")
    held = elasticity.resample_demand(series, 60)
    assert held.sizes["time"] == series.sizes["time"] * 10
    np.testing.assert_array_equal(held.values[:10], np.full(10, series.qps.values[0]))
    log = data.load_trace("azure-conv-2023")
    counted = elasticity.resample_demand(log, 60)
    assert counted.attrs["step_s"] == 60.0 and counted.attrs["units"] == "requests/s"
    assert counted.sum() * 60 <= log.sizes["request"]


@pytest.mark.parametrize("step_s", [2.5, 1.5])
def test_resample_demand_refuses_a_step_that_is_no_whole_multiple_of_a_finer_series(step_s):
    # a 1-s rate series at step_s=2.5 came back averaged over 2-s windows (0.5, 2.5, 4.5, ...)
    # labelled step_s=2.5, which simulate then refused ("times are 2 s apart")
    times = np.datetime64("2026-01-05") + np.arange(12).astype("timedelta64[s]")
    series = xr.DataArray(
        np.arange(12.0), dims="time", coords={"time": times}, attrs={"units": "requests/s"}
    )
    with pytest.raises(InputError, match=rf"step_s={step_s:g} s is not a whole multiple of"):
        elasticity.resample_demand(series, step_s)
    demand = elasticity.resample_demand(series, 3)
    assert demand.values.tolist() == [1.0, 4.0, 7.0, 10.0] and demand.attrs["step_s"] == 3.0
    assert float(elasticity.simulate(demand, per_instance_qps=5, cold_start_s=3).arrivals) == 66.0


# -- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"demand": [1.0, -2.0, 3.0]}, r"negative demand -2.0 at position 1 \(time 5 s\)"),
        ({"demand": [1.0, float("nan")]}, "NaN demand"),
        ({"per_instance_qps": 0}, "per_instance_qps must be > 0"),
        ({"min_instances": 5, "max_instances": 3}, "min_instances=5 is more than max_instances=3"),
        (
            {"cooldown_s": 3},
            r"cooldown_s=3 s is shorter than one step of 5 s; simulate with step_s <= 3",
        ),
        ({"cold_start_s": 12}, "cold_start_s=12 s is not a whole number of steps of 5 s"),
        (
            {"policy": "knative"},
            r"tick_s=2 s is shorter than one step of 5 s; simulate with step_s <= 2",
        ),
        ({"policy": "hpa", "sync_s": 1}, "sync_s=1 s is shorter than one step"),
        ({"policy": "hpa", "min_instances": 0}, "at least 1 for the HPA"),
        ({"policy": "lambda"}, "policy='lambda' is not known"),
        ({"panic_window_s": 6}, r"policy 'article' has no option\(s\) \['panic_window_s'\]"),
        ({"scale_up_threshold": 1.5}, r"scale_up_threshold: values must be in \(0, 1\]"),
        ({"demand": np.ones((3, 2))}, "1-D"),
        ({"step_s": None}, "give step_s"),
        ({"gpu": "H100-SXM", "usd_per_gpu_hour": 2.0}, "not both"),
    ],
)
def test_bad_input_names_the_argument(kwargs, message):
    arguments = {"demand": np.full(50, 10.0), "step_s": 5, "per_instance_qps": 10.0} | kwargs
    with pytest.raises(InputError, match=message):
        elasticity.simulate(arguments.pop("demand"), **arguments)


def test_sweep_rejects_duplicates_and_unknown_options():
    with pytest.raises(InputError, match="duplicate"):
        elasticity.sweep(np.ones(10), step_s=5, per_instance_qps=1, cooldown_s=[0, 0])
    with pytest.raises(InputError, match="no policy in"):
        elasticity.sweep(np.ones(10), step_s=5, per_instance_qps=1, policy=["hpa"], tick_s=2)
    with pytest.raises(InputError, match="request log"):
        elasticity.simulate(data.load_trace("azure-code-2023"), step_s=5, per_instance_qps=1)


def test_a_gap_in_a_request_log_is_named():
    log = data.load_trace("azure-code-2023")
    with pytest.raises(InputError, match=r"no requests for at least 60s from 2023-11-16T18:17:44"):
        elasticity.resample_demand(log, 1, gap="60s")
    assert elasticity.resample_demand(log, 1, gap=None).sizes["time"] == 3436


# -- spot preemption ------------------------------------------------------------------------------
def _steady(n=14_400, qps=45.0):
    return np.full(n, qps)


def test_preemption_rate_is_deterministic_for_a_seed_and_shared_by_a_sweep():
    settings = dict(step_s=1, per_instance_qps=10, policy="hpa", min_instances=2, cold_start_s=60,
                    tolerance_s=60)  # fmt: skip
    one = elasticity.simulate(_steady(), **settings, preemption=1.0, seed=4)
    again = elasticity.simulate(_steady(), **settings, preemption=1.0, seed=4)
    other = elasticity.simulate(_steady(), **settings, preemption=1.0, seed=5)
    assert int(one.preempted) > 0
    np.testing.assert_array_equal(one.ready_instances, again.ready_instances)
    assert int(one.preempted) == int(again.preempted)
    assert not np.array_equal(one.ready_instances, other.ready_instances)
    # a run of a sweep meets the same draws as the run alone (its grid holds more spares)
    grid = elasticity.sweep(_steady(), **{**settings, "min_instances": [2, 4]},
                            buffer_instances=[0, 3], preemption=1.0, seed=4)  # fmt: skip
    row = grid.sel(min_instances=2, buffer_instances=0)
    for name in ("preempted", "breach_s", "gpu_hours", "instances_started"):
        assert float(row[name]) == float(one[name]), name
    assert one.attrs["preemption_per_instance_hour"] == 1.0 and one.attrs["preemption_seed"] == 4
    # without preemption there is no such variable, and nothing changes
    plain = elasticity.simulate(_steady(), **settings)
    assert "preempted" not in plain
    none = elasticity.simulate(_steady(), **settings, preemption=0.0)
    assert float(none.breach_s) == float(plain.breach_s)


def test_preemption_rate_loses_instances_at_that_rate():
    # a fixed fleet of 10 for 4 hours at 0.5 per instance-hour: about 20 preemptions (its lost
    # instances are restarted within a minute, so it holds about 10 throughout)
    run = elasticity.simulate(_steady(), step_s=1, per_instance_qps=10, policy="fixed",
                              min_instances=10, cold_start_s=30, preemption=0.5, seed=1)  # fmt: skip
    lost = [int(elasticity.simulate(_steady(), step_s=1, per_instance_qps=10, policy="fixed",
                                    min_instances=10, cold_start_s=30, preemption=0.5,
                                    seed=s).preempted) for s in range(20)]  # fmt: skip
    assert 20 * 20 - 5 * math.sqrt(20 * 20) < sum(lost) < 20 * 20 + 5 * math.sqrt(20 * 20)
    assert int(run.instances_started) == int(run.preempted)
    # a per-step rate: none lost where it is 0
    rate = np.r_[np.zeros(7_200), np.full(7_200, 3.0)]
    half = elasticity.simulate(_steady(), step_s=1, per_instance_qps=10, policy="fixed",
                               min_instances=10, cold_start_s=30, preemption=rate, seed=2)  # fmt: skip
    assert int(half.preempted) > 0
    assert (half.ready_instances.values[:7_200] == 10).all()


def test_lost_instances_given_per_step():
    lost = np.zeros(600, np.int64)
    lost[100] = 2
    run = elasticity.simulate(_steady(600), step_s=1, per_instance_qps=10, policy="fixed",
                              min_instances=5, cold_start_s=20, lost_instances=lost)  # fmt: skip
    ready = run.ready_instances.values
    assert ready[99] == 5 and (ready[100:121] == 3).all() and ready[121] == 5
    assert int(run.preempted) == 2 and float(run.breach_s) > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"preemption": -0.1}, "preemption"),
        ({"preemption": np.ones(5)}, "preemption has 5 steps"),
        ({"preemption": [0.1, np.nan] * 300}, "preemption: nan at position 1"),
        ({"preemption": "often"}, "preemption"),
        ({"preemption": 0.1, "seed": -1}, "seed"),
        ({"preemption": 0.1, "seed": 1.5}, "seed"),
        ({"lost_instances": np.ones(10)}, "lost_instances has 10 steps"),
        ({"lost_instances": np.full(600, 0.5)}, "lost_instances: 0.5 at position 0 is not whole"),
        ({"lost_instances": np.full(600, -1)}, "lost_instances"),
        ({"preemption": 0.1, "lost_instances": np.zeros(600)}, "not both"),
        ({"preemption": 1e9}, "preemption=1e\\+09 per instance-hour"),
    ],
)
def test_bad_preemption_is_named(kwargs, message):
    with pytest.raises(InputError, match=message):
        elasticity.simulate(_steady(600), step_s=1, per_instance_qps=10, policy="fixed",
                            min_instances=2, **kwargs)  # fmt: skip


def test_a_series_with_holes_says_how_to_fill_them(tmp_path):
    # a rate series as load_traffic reads it marks missing windows NaN; simulate refused it with
    # "NaN demand nan at position 2 ...; 1 bad value(s) in all" and no word of what to do
    path = tmp_path / "rates.csv"
    path.write_text(
        "timestamp,qps\n"
        + "".join(f"2025-01-01T00:{m:02d}:00Z,5\n" for m in range(0, 60, 10) if m != 20)
    )
    series = data.load_traffic(str(path))
    assert np.isnan(series.qps.values).sum() == 1
    with pytest.raises(InputError, match=r"NaN demand .*prepare_demand"):
        elasticity.simulate(series, per_instance_qps=2.0, policy="fixed", min_instances=3)


def test_a_policys_own_period_too_short_for_the_step_names_the_policy():
    # a sweep over several policies said "sync_s=15 s is shorter than one step of 60 s", an
    # option the caller never set, of a policy it did not name
    with pytest.raises(InputError, match=r"hpa's sync_s=15 s is shorter than one step of 60 s"):
        elasticity.sweep(np.full(100, 10.0), step_s=60, per_instance_qps=10, cold_start_s=60,
                         policy=["fixed", "hpa"])  # fmt: skip
    with pytest.raises(InputError, match=r"predictive's evaluation_s=15 s is shorter"):
        elasticity.simulate(np.full(100, 10.0), step_s=60, per_instance_qps=10, cold_start_s=60,
                            policy="predictive", forecast=np.full(100, 10.0))  # fmt: skip


def test_smooth_demand_is_the_trailing_mean_over_a_requests_time_in_an_instance():
    rng = np.random.default_rng(4)
    values = rng.poisson(3.0, 500).astype(float)
    demand = xr.DataArray(values, dims="time", attrs={"step_s": 2.0})
    got = elasticity.smooth_demand(demand, 9.0)  # 4.5 steps: a window of 4 (round half to even)
    want = [values[max(0, t - 3) : max(t + 1, 4)].mean() for t in range(values.size)]
    np.testing.assert_allclose(got.values, want, rtol=1e-12)  # the first window at its mean
    assert got.attrs["smoothed_over_s"] == 8.0 and got.attrs["step_s"] == 2.0
    # at most one step: the same values
    np.testing.assert_array_equal(elasticity.smooth_demand(demand, 2.5).values, values)
    with pytest.raises(InputError, match="latency_s"):
        elasticity.smooth_demand(demand, -1.0)
    with pytest.raises(InputError, match="demand: expected requests/s over time"):
        elasticity.smooth_demand(values, 9.0)
    # a Dataset's qps is read as the plan's demand is
    np.testing.assert_array_equal(
        elasticity.smooth_demand(demand.to_dataset(name="qps"), 9.0).values, got.values
    )


def test_a_logs_second_by_second_clumps_are_no_breach_once_smoothed():
    # one instance serving 4 requests/s (40 in flight over 10 s) under Poisson arrivals at 3/s:
    # counted per second, 5 or more arrive (some left over) in a third of the seconds; the
    # rate over the 10 s a request spends in the instance exceeds 4/s in 4 % of them
    rng = np.random.default_rng(5)
    demand = xr.DataArray(rng.poisson(3.0, 7200).astype(float), dims="time", attrs={"step_s": 1.0})
    run = dict(per_instance_qps=4.0, policy="fixed", min_instances=1, tolerance_s=60.0)
    raw = float(elasticity.simulate(demand, **run).breach_s)
    smooth = float(elasticity.simulate(elasticity.smooth_demand(demand, 10.0), **run).breach_s)
    assert raw > 1000 and smooth < raw / 5


def test_a_logs_first_second_does_not_set_the_replays_starting_fleet():
    # found on Mooncake's conversation trace (arrivals in clumps every 3 s): smoothed over 10 s,
    # its first step stayed its first second's 10 requests/s (the next 16), the simulator started
    # 12 instances on it (at 1.2 requests/s each), and starting the log one second later gave 20
    # instances and 13.2 GPU-hours against 9.0 on the article policy, which never scales up here
    clumps = np.zeros(3600)
    clumps[::3] = np.resize([10.0, 16.0, 3.0, 9.0, 12.0], 1200)  # 10 requests/s on average / 3
    demand = xr.DataArray(clumps, dims="time", attrs={"step_s": 1.0})
    run = dict(per_instance_qps=1.2, policy="article", cold_start_s=77)
    fleets = []
    for skip in (0, 3, 6):
        smooth = elasticity.smooth_demand(demand[skip:].assign_attrs(step_s=1.0), 10.0)
        assert float(smooth[0]) == pytest.approx(float(demand[skip : skip + 10].mean()))
        fleets.append(float(elasticity.simulate(smooth, **run).peak_instances))
    assert max(fleets) - min(fleets) <= 1, fleets


def test_a_rate_series_held_over_windows_longer_than_the_latency_is_served_as_is():
    series = xr.DataArray(
        [2.0, 9.0, 4.0], dims="time",
        coords={"time": np.array([0, 600, 1200], dtype="datetime64[s]")},
        attrs={"interval_s": 600.0},
    )  # fmt: skip
    demand = elasticity.resample_demand(series, 1.0)
    assert demand.attrs["held_from_s"] == 600.0
    same = elasticity.smooth_demand(demand, 10.0)
    np.testing.assert_array_equal(same.values, demand.values)
    assert same.attrs["smoothed_over_s"] == 1.0


def test_a_predictive_run_is_the_same_alone_and_in_a_sweep_of_higher_floors():
    """Found by a plan's worksheet 05 check (Llama-3.1-70B on servegen-m-mid): the predictive
    policy adds the load above its forecast to the forecast's largest rate ahead, more than the
    pool that serves the demand's peak; that pool capped it alone (peak 886 instances) and not in
    the plan's sweep, whose highest floor set a larger pool (919): one run, two costs."""
    steps = 17_280  # a day of 5 s steps: hour-long steps between 100 and 300 requests/s
    rate = np.where((np.arange(steps) // 720) % 2 == 0, 100.0, 300.0)
    late = np.roll(rate, 360)  # the forecast half an hour late
    settings = dict(per_instance_qps=10.0, step_s=5.0, cold_start_s=60.0, policy="predictive",
                    scale_up_threshold=0.6, forecast=late)  # fmt: skip
    grid = elasticity.sweep(rate, min_instances=[5, 200], **settings)
    alone = elasticity.simulate(rate, min_instances=5, **settings)
    for name in ("peak_instances", "gpu_hours", "breach_s", "scale_events"):
        assert float(grid[name].sel(min_instances=5)) == float(alone[name]), name


def test_demand_in_another_unit_is_refused_not_read_as_requests_per_second():
    # a DataArray of requests/min (its units attr says so) was simulated as requests/s: 60x the
    # fleet's load, and fixed_instances sized for it without a word
    minutes = xr.DataArray(
        np.full(600, 600.0), dims="time", attrs={"units": "requests/min", "step_s": 1.0}
    )
    for call in (
        lambda d: elasticity.fixed_instances(d, 5.0),
        lambda d: elasticity.simulate(d, per_instance_qps=5.0),
        lambda d: elasticity.troughs(d),
        lambda d: elasticity.sweep(d, per_instance_qps=5.0, policy=["article", "hpa"]),
    ):
        with pytest.raises(InputError, match=r"demand: its units attr 'requests/min' is not "):
            call(minutes)
        with pytest.raises(
            InputError, match=r"demand: 'a DataArray in GB' is gigabyte, not a rate"
        ):
            call(minutes.assign_attrs(units="GB"))
        with pytest.raises(InputError, match=r"demand: its units attr 'qps\?' is not a unit"):
            call(xr.Dataset({"qps": minutes.assign_attrs(units="qps?")}))
    per_second = minutes.copy(data=np.full(600, 10.0))
    assert elasticity.fixed_instances(per_second.assign_attrs(units="requests/s"), 5.0) == 2
    assert elasticity.fixed_instances(per_second.assign_attrs(units="requests / second"), 5.0) == 2


def test_demand_whose_times_run_backwards_is_named_not_blamed_on_step_s():
    # a series in reverse time order ended in "step_s must be > 0, got np.float64(-1.0)": an
    # argument the caller had not given
    times = np.datetime64("2026-06-01") + np.arange(600)[::-1] * np.timedelta64(1, "s")
    backwards = xr.DataArray(np.full(600, 10.0), dims="time", coords={"time": times})
    with pytest.raises(InputError, match=r"demand: times run backwards \(-1 s from position 0"):
        elasticity.simulate(backwards, per_instance_qps=5.0)
    same = xr.DataArray(np.full(3, 10.0), dims="time", coords={"time": times[[0, 0, 0]]})
    with pytest.raises(InputError, match=r"demand: times do not move \(0 s from position 0"):
        elasticity.fixed_instances(same, 5.0)


def test_per_instance_qps_takes_one_cell_of_the_capacity_steps_answer():
    # the capacity step's per_instance_qps, selected to one cell, is a 0-d DataArray: it was
    # refused as "per_instance_qps must be a finite number, got <xarray.DataArray ...>"
    demand = np.r_[np.full(60, 10.0), np.full(60, 40.0)]
    cell = xr.DataArray(10.0, attrs={"units": "requests/s"}, coords={"gpu": "L40S"})
    for call in (elasticity.simulate, elasticity.sweep):
        assert call(demand, step_s=5, per_instance_qps=cell).identical(
            call(demand, step_s=5, per_instance_qps=10.0)
        )
    # selected by gpu and tensor_parallel, it keeps a model dim of one: still one cell
    for call in (elasticity.simulate, elasticity.sweep):
        assert call(
            demand, step_s=5, per_instance_qps=cell.expand_dims(model=["Qwen3-32B"])
        ).identical(call(demand, step_s=5, per_instance_qps=10.0))
    assert elasticity.fixed_instances(demand, cell.expand_dims(model=["Qwen3-32B"]), step_s=5) == 4
    grid = xr.DataArray([10.0, 20.0], dims="gpu", coords={"gpu": ["L40S", "H200"]})
    with pytest.raises(
        InputError, match=r"per_instance_qps: one number, not a DataArray over \('gpu',\)"
    ):
        elasticity.simulate(demand, step_s=5, per_instance_qps=grid)
    per_minute = cell.copy(data=600.0).assign_attrs(units="requests/min")
    assert elasticity.simulate(demand, step_s=5, per_instance_qps=per_minute).identical(
        elasticity.simulate(demand, step_s=5, per_instance_qps=10.0)
    )


def test_a_swept_setting_keeps_its_glossary_attrs_as_a_dim():
    # a setting given as a list (a dim of the sweep) lost its units and long_name: cold_start_s
    # over two values had neither, while the settings left scalar carried the glossary's
    from capnb import glossary

    demand = np.r_[np.full(60, 10.0), np.full(60, 40.0)]
    grid = {"cold_start_s": [10, 20], "cooldown_s": [0, 900], "scale_up_threshold": [0.5, 0.7],
            "min_instances": [1, 2], "buffer_instances": [0, 1]}  # fmt: skip
    for policy in ("article", ["article", "hpa"]):
        for name, values in grid.items():
            result = elasticity.sweep(demand, step_s=5, per_instance_qps=10, policy=policy,
                                      **{name: values})  # fmt: skip
            assert name in result.dims
            assert result[name].attrs == glossary.attrs(name), (policy, name)


def test_demand_and_its_forecast_keep_the_glossary_attrs_of_time():
    # resample_demand, prepare_demand and forecast_demand gave a time coordinate without the
    # glossary's units (datetime64) and long_name, which the rate series they read carries
    from capnb import forecast, glossary

    series = data.load_rate_series("servegen-m-large")
    baseline = forecast.fit_baseline(series)
    demand = elasticity.prepare_demand(series, 60, baseline=baseline)
    for result in (
        elasticity.resample_demand(series, 60),
        elasticity.resample_demand(series, 1200),
        elasticity.resample_demand(data.load_trace("azure-code-2023"), 5),
        demand,
        elasticity.forecast_demand(demand, baseline),
    ):
        assert result.time.attrs == glossary.attrs("time")


def test_a_setting_shorter_than_a_series_window_says_how_to_shorten_the_step():
    # a 10-minute rate series with the default tolerance_s=60 said "simulate with step_s <= 60 s",
    # and step_s=60 then failed ("does not match the demand's own step"): the step of a series is
    # changed by resampling it
    series = data.load_rate_series("servegen-m-large")
    with pytest.raises(InputError, match=r"step_s <= 60 s .*capnb\.elasticity\.resample_demand"):
        elasticity.simulate(series, per_instance_qps=5.0)
    run = elasticity.simulate(elasticity.resample_demand(series, 30), per_instance_qps=5.0)
    assert run.attrs["step_s"] == 30.0


def test_a_pandas_series_over_times_is_simulated_at_its_own_step():
    # a pandas Series of 10-s rates was read as a bare array: at step_s=1, ten hours ran as one
    # (gpu_hours 8.0 of 80.0); its times now say its step, as a DataArray's do, and
    # resample_demand, which that error names, takes it
    import pandas as pd

    series = pd.Series(40.0, index=pd.date_range("2026-01-01", periods=3600, freq="10s"))
    with pytest.raises(InputError, match=r"step_s=1 does not match the demand's own step of 10 s"):
        elasticity.simulate(series, step_s=1, per_instance_qps=8.0, cold_start_s=60)
    run = elasticity.simulate(elasticity.resample_demand(series, 1), per_instance_qps=8.0,
                              cold_start_s=60)  # fmt: skip
    assert run.attrs["duration_s"] == 36_000.0 and float(run.gpu_hours) == 80.0


def test_forecast_demand_is_named_in_the_glossary():
    # forecast_demand returned forecast_qps, a name the glossary did not list, with a long_name
    # of its own; the predictive policy's input is a glossary name like every result's
    from capnb import forecast, glossary

    series = data.load_rate_series("servegen-m-large")
    baseline = forecast.fit_baseline(series)
    demand = elasticity.prepare_demand(series, 60, baseline=baseline)
    ahead = elasticity.forecast_demand(demand, baseline, quantile=0.99)
    assert ahead.name == "forecast_qps"
    assert ahead.attrs == glossary.attrs("forecast_qps", quantile=0.99, slots="hour_of_day")


def test_the_glossarys_policy_dim_names_every_policy():
    # the glossary (and the docs' glossary page rendered from it) listed five policies, "article,
    # hpa, knative, fixed or fixed_elastic", while sweep takes and returns a sixth, predictive
    from capnb import glossary

    meaning = glossary.DIMS["policy"].long_name
    assert all(re.search(rf"\b{name}\b", meaning) for name in elasticity.POLICIES), meaning

"""The predictive autoscaling policy: kernel against its references, and what a forecast buys."""

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from test_autoscale_kernels import assert_same_metrics, config, run_kernel

from benchmarks.reference import REGISTRY
from capnb import elasticity
from capnb.errors import InputError
from capnb.kernels import autoscale as kernels

simulate_python = REGISTRY["autoscale.simulate"]["python"]
simulate_numpy = REGISTRY["autoscale.simulate"]["numpy"]


def predictive(demand, forecast, up, cooldown, cold, low, buffer, cfg):
    n = demand.size
    metrics = np.empty(len(kernels.METRICS))
    timeline = kernels.Timeline.empty(n)
    run = kernels.Run.of(up=up, cooldown=cooldown, cold=cold, low=low, buffer=buffer)
    kernels.simulate(demand, cfg, run, metrics, timeline, forecast)
    return dict(zip(kernels.METRICS, metrics, strict=True)), timeline


@st.composite
def cases(draw):
    n = draw(st.integers(1, 200))
    demand = np.array(draw(st.lists(st.floats(0.0, 150.0), min_size=n, max_size=n)))
    noise = np.array(draw(st.lists(st.floats(-40.0, 40.0), min_size=n, max_size=n)))
    forecast = np.maximum(demand + noise, 0.0) if draw(st.booleans()) else demand.copy()
    low = draw(st.integers(0, 4))
    cfg = config(
        policy=kernels.PREDICTIVE,
        per_instance_qps=draw(st.floats(2.0, 30.0)),
        step_s=draw(st.sampled_from([1.0, 5.0])),
        tolerance_steps=draw(st.integers(0, 15)),
        max_instances=draw(st.integers(max(low, 1), low + 40)),
        thrash_steps=draw(st.integers(0, 20)),
        period_steps=draw(st.integers(1, 6)),
    )
    knobs = (draw(st.floats(0.3, 1.0)), draw(st.integers(0, 30)), draw(st.integers(0, 12)), low,
             draw(st.integers(0, 2)))  # fmt: skip
    return demand, forecast, knobs, cfg


@settings(max_examples=150, deadline=None)
@given(cases())
def test_kernel_matches_python_and_numpy_references(case):
    demand, forecast, (up, cooldown, cold, low, buffer), cfg = case
    got, timeline = predictive(demand, forecast, up, cooldown, cold, low, buffer, cfg)
    want, want_timeline = simulate_python(demand, up, cooldown, cold, low, buffer, cfg, forecast)
    assert_same_metrics(got, want, case)
    np.testing.assert_array_equal(timeline.ready, want_timeline["ready"])
    np.testing.assert_array_equal(timeline.starting, want_timeline["starting"])
    np.testing.assert_array_equal(timeline.breach, want_timeline["breach"])
    as_grid = [np.array([v]) for v in (up, cooldown, cold, low, buffer)]
    numpy_metrics = simulate_numpy(demand, *as_grid, cfg, forecast)[0]
    assert_same_metrics(got, dict(zip(kernels.METRICS, numpy_metrics, strict=True)), case)


def test_grid_of_runs_matches_references_and_scales():
    rng = np.random.default_rng(5)
    t = np.arange(3_000)
    demand = (
        60
        + 40 * np.sin(2 * np.pi * t / 900)
        + rng.gamma(0.5, 40.0, t.size) * (rng.random(t.size) < 0.05)
    )
    forecast = np.maximum(60 + 40 * np.sin(2 * np.pi * (t - 30) / 900), 0.0)  # late by 30 steps
    n = 16
    up, cooldown = rng.uniform(0.5, 0.95, n), rng.integers(0, 120, n)
    cold, low, buffer = rng.integers(0, 40, n), rng.integers(1, 4, n), rng.integers(0, 3, n)
    cfg = config(policy=kernels.PREDICTIVE, period_steps=5, tolerance_steps=10, thrash_steps=60)
    metrics = np.empty((n, len(kernels.METRICS)))
    runs = kernels.Run.grid(up, cooldown, cold, low, buffer)
    kernels.simulate_many(demand, cfg, runs, metrics, forecast)
    numpy_metrics = simulate_numpy(demand, up, cooldown, cold, low, buffer, cfg, forecast)
    for i in range(n):
        got = dict(zip(kernels.METRICS, metrics[i], strict=True))
        assert_same_metrics(got, dict(zip(kernels.METRICS, numpy_metrics[i], strict=True)), i)
        if i % 4 == 0:
            want, _ = simulate_python(demand, up[i], cooldown[i], cold[i], low[i], buffer[i], cfg,
                                      forecast)  # fmt: skip
            assert_same_metrics(got, want, i)
    column = kernels.METRICS.index
    assert metrics[:, column("scale_up_events")].min() > 0
    assert metrics[:, column("scale_down_events")].min() > 0  # it follows the troughs down
    assert metrics[:, column("breach_steps")].max() > 0  # the late forecast and the bursts bite


@pytest.mark.parametrize("cold", [5, 20, 60])
def test_a_perfect_forecast_never_breaches_where_reactive_policies_do(cold):
    # a ramp from 20 to 200 requests/s over 100 steps, held, then back down
    demand = np.r_[np.full(200, 20.0), np.linspace(20, 200, 100), np.full(300, 200.0),
                   np.linspace(200, 20, 100), np.full(300, 20.0)]  # fmt: skip
    common = dict(per_instance_qps=10.0, step_s=1.0, tolerance_steps=10, period_steps=5,
                  max_instances=60)  # fmt: skip
    got, timeline = predictive(
        demand, demand.copy(), 0.8, 30, cold, 1, 0, config(policy=kernels.PREDICTIVE, **common)
    )
    assert got["breach_steps"] == 0 and got["dropped"] == 0 and got["late"] == 0
    assert got["scale_down_events"] > 0  # back down after the ramp
    capacity = timeline.ready * 10.0
    assert (capacity >= demand).all()
    for policy in (kernels.ARTICLE, kernels.HPA, kernels.KNATIVE, kernels.FIXED_ELASTIC):
        cfg = config(policy=policy, **common)
        reactive, _ = run_kernel(demand, 0.8, 30, cold, 1, 0, cfg)
        assert reactive["breach_steps"] > 0, policy


def test_the_correction_adds_the_load_above_the_forecast():
    # the forecast says 10 requests/s throughout; the load is 100: it must scale on what it sees
    demand = np.r_[np.full(20, 10.0), np.full(400, 100.0)]
    cfg = config(policy=kernels.PREDICTIVE, per_instance_qps=10.0, step_s=1.0, period_steps=5,
                 tolerance_steps=10, max_instances=50)  # fmt: skip
    got, timeline = predictive(demand, np.full(demand.size, 10.0), 0.8, 0, 10, 1, 0, cfg)
    # the forecast alone asks for ceil(10 / 8) = 2; the 90 requests/s above it, for 13 in all
    assert timeline.ready[-1] == 13
    assert got["breach_steps"] < 50  # the cold start and one period, then the backlog drains


# -- the step module --------------------------------------------------------------------------
def _days(n_days=2, step_s=15.0):
    steps = np.arange(int(n_days * 86400 / step_s))
    times = np.datetime64("2024-03-04T00:00") + steps * np.timedelta64(int(step_s), "s")
    hours = (times - times.astype("datetime64[D]")).astype("timedelta64[h]").astype(int)
    values = 40.0 + 30.0 * np.sin(2 * np.pi * hours / 24)
    return xr.DataArray(values, dims="time", coords={"time": times}, attrs={"step_s": step_s})


def _baseline(demand):
    from capnb import forecast

    series = demand.to_dataset(name="qps")
    series.attrs["interval_s"] = demand.attrs["step_s"]
    return forecast.fit_baseline(series)


def test_sweep_runs_the_predictive_policy_beside_the_others():
    demand = _days()
    ahead = elasticity.forecast_demand(demand, _baseline(demand), quantile=0.5)
    assert ahead.attrs["units"] == "requests/s" and ahead.size == demand.size
    result = elasticity.sweep(demand, per_instance_qps=10.0, policy=["article", "predictive"],
                              scale_up_threshold=[0.7, 0.8], cold_start_s=120, forecast=ahead)  # fmt: skip
    assert list(result.policy.values) == ["article", "predictive"]
    again = elasticity.sweep(demand, per_instance_qps=10.0, policy=["article", "predictive"],
                             scale_up_threshold=[0.7, 0.8], cold_start_s=120, forecast=ahead)  # fmt: skip
    xr.testing.assert_identical(result, again)
    # the forecast is the demand's own hourly shape: started ahead, no breach
    assert float(result.breach_s.sel(policy="predictive").max()) == 0.0


def test_bad_forecasts_are_input_errors_naming_it():
    demand = _days(1)
    with pytest.raises(InputError, match="forecast"):
        elasticity.simulate(demand, per_instance_qps=10.0, policy="predictive")
    with pytest.raises(InputError, match="forecast has 3 steps"):
        elasticity.simulate(demand, per_instance_qps=10.0, policy="predictive",
                            forecast=[1.0, 2.0, 3.0])  # fmt: skip
    bad = np.full(demand.size, 5.0)
    bad[7] = np.nan
    with pytest.raises(InputError, match="forecast: nan at position 7"):
        elasticity.simulate(demand, per_instance_qps=10.0, policy="predictive", forecast=bad)
    with pytest.raises(InputError, match="quantile=0.42"):
        elasticity.forecast_demand(demand, _baseline(demand), quantile=0.42)
    with pytest.raises(InputError, match="evaluation_s"):
        elasticity.simulate(demand, per_instance_qps=10.0, policy="predictive",
                            forecast=np.ones(demand.size), evaluation_s=20.0)  # fmt: skip


def test_recommend_takes_the_predictive_policy_only_when_it_wins_held_out():
    demand = _days()
    ahead = elasticity.forecast_demand(demand, _baseline(demand))
    swept = elasticity.sweep(demand, per_instance_qps=10.0, policy=["article", "predictive"],
                             min_instances=[1, 8], cold_start_s=60, forecast=ahead,
                             usd_per_gpu_hour=2.0)  # fmt: skip
    # make the predictive runs the cheapest here, and check the rule on two held-out outcomes
    cheap = swept.assign(usd=xr.where(swept.policy == "predictive", swept.usd / 10, swept.usd))
    assert elasticity.choose(cheap)["policy"] == "predictive"
    dear = swept.assign(usd=xr.where(swept.policy == "predictive", swept.usd * 10, swept.usd))
    kept = elasticity.recommend(cheap, held_out=cheap)
    assert kept.selection["policy"] == "predictive"
    assert any("wins on held-out" in r for r in kept.reasons)
    dropped = elasticity.recommend(cheap, held_out=dear)
    assert dropped.selection["policy"] == "article"
    assert any("not recommended" in r for r in dropped.reasons)
    calls = []
    lazy = elasticity.recommend(cheap, held_out=lambda: calls.append(1) or dear)
    assert lazy.selection == dropped.selection and calls == [1]
    assert elasticity.recommend(cheap).selection["policy"] == "article"  # nothing held out
    # when it is not chosen here, held-out traffic is never swept
    elasticity.recommend(dear, held_out=lambda: calls.append(2) or dear)
    assert calls == [1]

"""Invariants across the steps, stated with hypothesis on real data where there is some.

Each test says why its property must hold, so that a counterexample means the code is wrong.
Per-step invariants of the kernels live beside them (``test_*_kernels.py``); these are the ones a
user sees through the public functions, several of them across two steps.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from capnb import capacity, data, elasticity, forecast, memory

MODELS = ["Llama-3.1-8B", "Llama-3.1-70B", "Qwen3-30B-A3B", "DeepSeek-V3", "Mixtral-8x7B"]
# measured curves with the metric and quantile their SLA bounds
CURVES = {
    "dstack-vllm-mi300x-short": ("ttft", 0.99),
    "dstack-tgi-mi300x-short": ("ttft", 0.99),
    "dstack-vllm-mi300x-long": ("tpot", 0.99),
    "lmdeploy-llama2-7b-a100-tp1-p2048-o128": ("itl", 0.99),
    "lmdeploy-llama2-70b-a100-tp4-p128-o2048": ("itl", 0.95),
}


@functools.cache
def curve(name):
    return data.load_latency_curve(name)


@functools.cache
def servegen():
    return data.load_rate_series("servegen-m-large")


def series_from(seed: int, days: int, missing: float, spread: float) -> xr.Dataset:
    """A 10-minute rate series with a daily swing, lognormal noise and missing windows."""
    rng = np.random.default_rng(seed)
    n = days * 144
    swing = 50 + 40 * np.sin(np.arange(n) * 2 * np.pi / 144)
    qps = swing * rng.lognormal(0.0, spread, n)
    qps[rng.random(n) < missing] = np.nan
    times = np.datetime64("2024-01-01", "ns") + np.arange(n) * np.timedelta64(600, "s")
    return xr.Dataset(
        {"qps": ("time", qps), "requests": ("time", qps * 600)},
        coords={"time": times},
        attrs={"interval_s": 600.0, "timezone": "UTC", "weekday_known": "yes"},
    )


# -- memory -----------------------------------------------------------------------------------------
@given(st.sampled_from(MODELS), st.sampled_from(data.list_gpus()), st.sampled_from([1, 2, 4, 8]),
       st.integers(1, 200_000), st.floats(0.3, 0.95), st.floats(0.0, 0.05))  # fmt: skip
def test_more_gpu_memory_never_lowers_the_fitting_concurrency(model, gpu, tp, seq_len, share, more):
    # usable memory grows with the share of the GPU the runtime may use; the largest fitting
    # concurrency is the floor of (usable - weights - reserve) / KV per sequence, monotone in it
    kw = dict(model=model, gpu=gpu, tensor_parallel=tp, seq_len=seq_len, accounting="vllm",
              invalid_tensor_parallel="mask")  # fmt: skip
    less = memory.max_concurrency(gpu_memory_utilization=share, **kw).max_concurrency
    most = memory.max_concurrency(gpu_memory_utilization=share + more, **kw).max_concurrency
    assert (most >= less).all()


@given(st.lists(st.integers(1, 500_000), min_size=2, max_size=6, unique=True),
       st.sampled_from(["article", "vllm"]))  # fmt: skip
def test_longer_sequences_never_fit_more_of_them(seq_len, accounting):
    # a sequence's KV cache grows with its length (in 16-token blocks for vLLM: still monotone)
    ds = memory.max_concurrency(model=MODELS, gpu=data.list_gpus(), tensor_parallel=[1, 8],
                                seq_len=sorted(seq_len), accounting=accounting,
                                invalid_tensor_parallel="mask")  # fmt: skip
    assert (ds.max_concurrency.diff("seq_len") <= 0).all()


# -- memory -> capacity -----------------------------------------------------------------------------
@given(st.sampled_from(list(CURVES)), st.floats(0.01, 100.0), st.integers(0, 3000),
       st.integers(0, 3000))  # fmt: skip
def test_more_memory_never_lowers_the_safe_concurrency(name, sla, limit, more):
    metric, quantile = CURVES[name]
    kw = dict(metric=metric, quantile=quantile)
    low = capacity.safe_concurrency(curve(name), sla, memory_limit=limit, **kw)
    high = capacity.safe_concurrency(curve(name), sla, memory_limit=limit + more, **kw)
    assert int(high.safe_concurrency) >= int(low.safe_concurrency)
    # and the throughput at the best operating point under both limits cannot fall either
    assert np.nan_to_num(float(high.per_instance_qps)) >= np.nan_to_num(float(low.per_instance_qps))


# -- capacity ---------------------------------------------------------------------------------------
def _instances(plan) -> np.ndarray:
    """Instances over sla (infeasible: infinitely many)."""
    return np.where(np.isnan(plan.instances.values), np.inf, plan.instances.values)


@given(st.sampled_from(list(CURVES)),
       st.lists(st.floats(0.005, 200.0), min_size=2, max_size=6, unique=True),
       st.floats(0.0, 5000.0), st.integers(0, 3))  # fmt: skip
def test_a_stricter_sla_never_lowers_the_instance_count(name, slas, target, buffer):
    # a stricter SLA admits fewer concurrencies; the best Little's-law throughput over fewer
    # candidates cannot be higher, so ceil(target / per-instance) cannot be lower
    metric, quantile = CURVES[name]
    plan = capacity.plan(curve(name), sorted(slas), target, metric=metric, quantile=quantile,
                         buffer=buffer)  # fmt: skip
    count = _instances(plan)
    assert (count[1:] <= count[:-1]).all(), count  # SLAs ascending: looser, so never more


# A real exception, left out: a target below ~1e-300 requests/s divided by the per-instance
# throughput underflows to 0.0 and plans 0 instances (hypothesis found 5e-324 requests/s).
targets = st.one_of(st.just(0.0), st.floats(1e-300, 1e5))


@given(st.sampled_from(list(CURVES)), st.floats(0.01, 200.0),
       st.lists(targets, min_size=2, max_size=6), st.integers(0, 3))  # fmt: skip
def test_more_demand_never_lowers_the_instance_count_and_the_plan_covers_it(
    name, sla, targets, buffer
):
    metric, quantile = CURVES[name]
    target = xr.DataArray(sorted(targets), dims="scenario")
    plan = capacity.plan(curve(name), sla, target, metric=metric, quantile=quantile, buffer=buffer)
    count = _instances(plan)
    assert (count[1:] >= count[:-1]).all(), count
    if np.isfinite(count).all():
        # the planned instances serve the target (the ceiling forgives 1e-12 of rounding)
        served = (count - buffer) * float(plan.per_instance_qps)
        assert (served >= target.values * (1 - 1e-9)).all()


# -- forecast -> capacity ---------------------------------------------------------------------------
@given(st.floats(0.05, 20.0), st.floats(0.5, 200.0), st.integers(0, 3))
def test_scaling_all_demand_by_k_scales_the_fixed_plan_by_about_k(k, per_instance_qps, buffer):
    # quantiles are homogeneous: k x demand has k x the slot targets; the instance count is a
    # ceiling of them, so it moves by k up to the rounding: k n - k < n_k <= k n + 1
    series = servegen()
    scaled = series.copy()
    scaled["qps"] = series.qps * k
    scaled["requests"] = series.requests * k
    base = forecast.fit_baseline(series).target_qps
    grown = forecast.fit_baseline(scaled).target_qps
    np.testing.assert_allclose(grown, k * base, rtol=1e-12)
    n = capacity.instances(xr.DataArray(per_instance_qps), base, buffer=buffer).values - buffer
    n_k = capacity.instances(xr.DataArray(per_instance_qps), grown, buffer=buffer).values - buffer
    assert (n_k > k * n - k).all() and (n_k <= k * n + 1).all()


@given(st.integers(0, 2**32), st.integers(2, 10), st.floats(0.0, 0.3), st.floats(0.01, 2.0),
       st.sampled_from(["hour_of_day", "hour_of_week", ("30min", "1D")]))  # fmt: skip
def test_the_p99_slot_baseline_is_never_below_the_p95(seed, days, missing, spread, slots):
    # for the same intervals, a higher quantile of them is never lower
    series = series_from(seed, days, missing, spread)
    base = forecast.fit_baseline(series, slots=slots, quantiles=(0.5, 0.95, 0.99)).target_qps
    seen = base.notnull().all("traffic_quantile")
    steps = base.diff("traffic_quantile").where(seen)
    assert bool((steps >= 0).where(seen, True).all())
    assert bool(seen.any())


@given(st.integers(0, 2**32), st.floats(0.0, 0.3), st.floats(0.0, 100.0))
def test_more_demand_in_every_interval_never_lowers_a_slot_target(seed, missing, most):
    # each slot's quantile is an order statistic (interpolated) of its intervals: raising every
    # interval raises every order statistic
    series = series_from(seed, 7, missing, 0.5)
    more = series.copy()
    extra = np.random.default_rng(seed + 1).uniform(0.0, most, series.sizes["time"])
    more["qps"] = series.qps + extra
    low = forecast.fit_baseline(series).target_qps
    high = forecast.fit_baseline(more).target_qps
    assert bool((high >= low).where(low.notnull(), True).all())


# -- elasticity -------------------------------------------------------------------------------------
policies = st.sampled_from(elasticity.POLICIES)


@given(st.lists(st.floats(0.0, 500.0), min_size=1, max_size=300), policies,
       st.floats(0.3, 0.95), st.integers(0, 60), st.integers(0, 40), st.integers(1, 4),
       st.integers(0, 2), st.integers(0, 24), st.floats(0.5, 50.0))  # fmt: skip
def test_every_step_balances_backlog_arrivals_served_and_dropped(
    demand, policy, up, cooldown, cold, low, buffer, tolerance, per_instance_qps
):
    # the architecture's hand-off: backlog_in + arrivals = served + dropped + backlog_out, per step
    run = elasticity.simulate(
        np.asarray(demand), step_s=5, per_instance_qps=per_instance_qps, policy=policy,
        scale_up_threshold=up, cooldown_s=5 * cooldown, cold_start_s=5 * cold, min_instances=low,
        buffer_instances=buffer, tolerance_s=5 * tolerance,
        **({"evaluation_s": 15} if policy in ("article", "fixed_elastic") else {}),
        **({"tick_s": 5, "panic_window_s": 5} if policy == "knative" else {}),
        **({"forecast": np.asarray(demand)[::-1].copy()} if policy == "predictive" else {}),
    )  # fmt: skip
    backlog_out = run.backlog.values
    backlog_in = np.concatenate([[0.0], backlog_out[:-1]])
    arrivals = run.qps.values * 5
    np.testing.assert_allclose(
        backlog_in + arrivals,
        run.served_in_step.values + run.dropped_in_step.values + backlog_out,
        rtol=1e-9, atol=1e-6,
    )  # fmt: skip
    assert (backlog_out >= -1e-9).all()
    assert float(run.served + run.unserved) == pytest.approx(
        float(run.arrivals), rel=1e-9, abs=1e-6
    )
    # a breach is exactly a step that leaves requests waiting
    assert (run.breach.values == (backlog_out + run.dropped_in_step.values > 0)).all()


@given(st.lists(st.integers(0, 60), min_size=1, max_size=200), st.integers(1, 12),
       st.integers(0, 8), st.integers(0, 8), st.integers(0, 10))  # fmt: skip
def test_a_larger_fixed_fleet_never_breaches_more_or_serves_less(counts, q, fleet, more, tol):
    # whole requests per 1-second step and whole requests per instance: the arithmetic is exact.
    # With more capacity every cohort left after serving oldest-first is no larger, so every
    # drop, every step in breach and the final backlog are no larger either
    kw = dict(step_s=1, per_instance_qps=q, policy="fixed", tolerance_s=tol)
    small = elasticity.simulate(np.asarray(counts, float), min_instances=fleet, **kw)
    large = elasticity.simulate(np.asarray(counts, float), min_instances=fleet + more, **kw)
    assert float(large.breach_s) <= float(small.breach_s)
    assert float(large.unserved) <= float(small.unserved)
    assert float(large.dropped) <= float(small.dropped)


@given(st.lists(st.integers(0, 60), min_size=1, max_size=200), st.integers(1, 12),
       st.integers(0, 10))  # fmt: skip
def test_a_fleet_sized_for_the_peak_never_breaches(counts, q, tol):
    demand = np.asarray(counts, float)
    fleet = elasticity.fixed_instances(demand, q, quantile=1.0, step_s=1)
    run = elasticity.simulate(demand, step_s=1, per_instance_qps=q, policy="fixed",
                              min_instances=fleet, tolerance_s=tol)  # fmt: skip
    assert float(run.breach_s) == 0.0 and float(run.unserved) == 0.0


# -- determinism ------------------------------------------------------------------------------------
def _with_threads(count, func):
    before = numba.get_num_threads()
    numba.set_num_threads(count)
    try:
        return func()
    finally:
        numba.set_num_threads(before)


@settings(max_examples=6)
@given(st.integers(0, 2**64 - 1), st.integers(8, 40), st.integers(1, 7))
def test_the_same_seed_gives_the_same_months_whatever_chunks_and_threads(
    dask_client, seed, trials, chunk
):
    series = servegen()
    base = forecast.fit_baseline(series)
    run = functools.partial(forecast.simulate, series, base, trials=trials, days=7, seed=seed)
    one_thread = _with_threads(1, run)
    every_thread = _with_threads(numba.config.NUMBA_NUM_THREADS, run)
    chunked = run(chunks=chunk).compute()
    for other in (every_thread, chunked):
        np.testing.assert_array_equal(other.monthly_peak_qps, one_thread.monthly_peak_qps)
        np.testing.assert_array_equal(other.exceed_probability, one_thread.exceed_probability)
        assert float(other.buffer_qps) == float(one_thread.buffer_qps)


@settings(max_examples=6)
@given(st.integers(0, 2**32), st.sampled_from(["article", "hpa", "knative"]),
       st.dictionaries(st.sampled_from(["cooldown_s", "cold_start_s", "min_instances"]),
                       st.integers(1, 3), min_size=1))  # fmt: skip
def test_a_sweep_is_the_same_whatever_chunks_and_threads(dask_client, seed, policy, chunks):
    rng = np.random.default_rng(seed)
    demand = 40 + 30 * np.sin(np.arange(4000) / 300) + rng.gamma(0.5, 20.0, 4000)
    kw = dict(step_s=1, per_instance_qps=10, policy=policy, cooldown_s=[0, 60, 600],
              cold_start_s=[10, 60, 120], min_instances=[1, 2, 4])  # fmt: skip
    plain = _with_threads(1, lambda: elasticity.sweep(demand, **kw))
    threaded = _with_threads(numba.config.NUMBA_NUM_THREADS, lambda: elasticity.sweep(demand, **kw))
    chunked = elasticity.sweep(demand, chunks=chunks, **kw).compute()
    for other in (threaded, chunked):
        xr.testing.assert_identical(other, plain)

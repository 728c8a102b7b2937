"""Latency and capacity kernels against their plain Python and numpy references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.reference import REGISTRY
from capnb.kernels import capacity as capacity_kernels
from capnb.kernels import latency as latency_kernels

SEARCH = REGISTRY["capacity.search"]
CURVE = REGISTRY["latency.analytic_curve"]


def same(a, b, rtol=1e-9):
    if isinstance(a, float | np.floating) and math.isnan(a):
        return isinstance(b, float | np.floating) and math.isnan(b)
    return abs(float(a) - float(b)) <= rtol * max(1.0, abs(float(b)))


# -- curves ---------------------------------------------------------------------------------------
@given(st.lists(st.one_of(st.floats(0, 100), st.just(math.nan)), min_size=1, max_size=30))
def test_monotone_envelope_matches_references(values):
    kernel = latency_kernels.monotone_envelope(np.array(values))
    python = REGISTRY["latency.monotone_envelope"]["python"](values)
    numpy_ = REGISTRY["latency.monotone_envelope"]["numpy"](np.array(values))
    np.testing.assert_array_equal(kernel, np.array(python))
    np.testing.assert_array_equal(kernel, numpy_)


@given(
    st.lists(st.integers(1, 500), min_size=1, max_size=12, unique=True),
    st.lists(st.floats(0, 10, allow_subnormal=False), min_size=12, max_size=12),
    st.lists(st.floats(-5, 600), min_size=1, max_size=8),
)
def test_interpolate_matches_references(xs, ys, at):
    x = np.sort(np.array(xs, dtype=float))
    y = np.array(ys[: x.size])
    kernel = latency_kernels.interpolate(x, y, np.array(at))
    for value, t in zip(kernel, at, strict=True):
        assert same(value, REGISTRY["latency.interpolate"]["python"](list(x), list(y), t))
    np.testing.assert_allclose(
        kernel, REGISTRY["latency.interpolate"]["numpy"](x, y, at), rtol=1e-12, equal_nan=True
    )


def test_interpolate_is_nan_outside_the_measured_range_and_exact_on_points():
    x, y = np.array([1.0, 4.0, 8.0]), np.array([0.1, 0.4, 2.0])
    out = latency_kernels.interpolate(x, y, np.array([0.5, 1.0, 2.0, 8.0, 9.0, np.nan]))
    np.testing.assert_allclose(out, [np.nan, 0.1, 0.2, 2.0, np.nan, np.nan], equal_nan=True)


# -- the search ------------------------------------------------------------------------------------
@st.composite
def curves(draw):
    size = draw(st.integers(1, 8))
    grid = sorted(draw(st.lists(st.integers(1, 300), min_size=size, max_size=size, unique=True)))
    if draw(st.booleans()):
        grid[0] = 1
        grid = sorted(set(grid))
    rises = draw(st.lists(st.floats(0, 2), min_size=len(grid), max_size=len(grid)))
    latency = np.cumsum(np.array(rises) + 0.01)
    mean = np.maximum.accumulate(
        latency
        * np.array(draw(st.lists(st.floats(0.2, 1), min_size=len(grid), max_size=len(grid))))
    )
    slas = draw(st.lists(st.floats(0.001, 20), min_size=1, max_size=6, unique=True))
    memory = draw(st.integers(0, 400))
    return latency, mean, np.array(grid, dtype=float), np.array(slas), memory


@given(curves())
def test_search_matches_the_python_walk_and_numpy(case):
    latency, mean, grid, slas, memory = case
    kernel = capacity_kernels.search(latency, mean, grid, slas, memory)
    numpy_ = SEARCH["numpy"](latency, mean, grid, slas, memory)
    for s, sla in enumerate(slas):
        python = SEARCH["python"](list(latency), list(mean), list(grid), float(sla), memory)
        points = SEARCH["python_points"](list(latency), list(mean), list(grid), float(sla), memory)
        for k in range(5):
            assert same(kernel[k][s], python[k]), (k, sla, kernel, python)
            assert same(kernel[k][s], points[k]), (k, sla, kernel, points)
            assert same(kernel[k][s], numpy_[k][s]), (k, sla, kernel, numpy_)


@given(curves())
def test_a_stricter_sla_never_raises_safe_concurrency(case):
    latency, mean, grid, slas, memory = case
    order = np.sort(slas)
    safe = capacity_kernels.search(latency, mean, grid, order, memory)[0]
    assert (np.diff(safe) >= 0).all()


@given(curves(), st.integers(0, 400))
def test_more_memory_never_lowers_safe_concurrency(case, extra):
    latency, mean, grid, slas, memory = case
    before = capacity_kernels.search(latency, mean, grid, slas, memory)[0]
    after = capacity_kernels.search(latency, mean, grid, slas, memory + extra)[0]
    feasible = capacity_kernels.search(latency, mean, grid, slas, memory)[1] <= 2
    assert (after[feasible] >= before[feasible]).all()


def test_search_codes_and_littles_law_by_hand():
    # latency rises 0.1 s per request in flight from concurrency 1 to 10; mean e2e = latency / 2
    grid = np.arange(1.0, 11.0)
    latency = 0.1 * grid
    mean = latency / 2
    safe, code, qps, operating, at_safe = capacity_kernels.search(
        latency, mean, grid, np.array([0.05, 0.55, 5.0]), 7
    )
    labels = [capacity_kernels.BINDING[c] for c in code]
    assert labels == ["infeasible_latency", "latency", "memory"]
    assert safe.tolist() == [0, 5, 7]
    # c / (0.05 c) = 20 requests/s at every concurrency: ties go to the lowest
    assert qps[1] == pytest.approx(20.0) and operating[1] == 1
    assert at_safe[1] == pytest.approx(0.5)


def test_a_latency_rounded_above_the_sla_meets_it_in_the_kernel_and_every_reference():
    # 2,300 ms read as 2.3000000000000003 s at concurrency 8, and 26 / 34 ms at 4 / 8 drawn at
    # 0.030000000000000002 s at 6: both meet their SLA (2.3 s, 30 ms), in the kernel and in the
    # plain references alike
    for latency, grid, sla, want in (
        (np.array([1.0, 2300 / 1000]), np.array([1.0, 8.0]), 2.3, 8),
        (np.array([0.026, 0.034]), np.array([4.0, 8.0]), 0.030, 6),
    ):
        mean = latency * 10
        kernel = capacity_kernels.search(latency, mean, grid, np.array([sla]), 10**6)
        numpy_ = SEARCH["numpy"](latency, mean, grid, np.array([sla]), 10**6)
        python = SEARCH["python"](list(latency), list(mean), list(grid), sla, 10**6)
        points = SEARCH["python_points"](list(latency), list(mean), list(grid), sla, 10**6)
        assert kernel[0][0] == numpy_[0][0] == python[0] == points[0] == want


def test_search_never_goes_past_the_last_point():
    grid = np.array([1.0, 2.0, 4.0])
    safe, code, *_ = capacity_kernels.search(
        np.array([0.1, 0.2, 0.3]), np.array([0.1, 0.2, 0.3]), grid, np.array([100.0]), 10**9
    )
    assert safe[0] == 4 and capacity_kernels.BINDING[code[0]] == "measured_range"


def test_search_reports_no_data_for_a_nan_curve():
    nan = np.full(3, np.nan)
    safe, code, qps, *_ = capacity_kernels.search(
        nan, nan, np.array([1.0, 2.0, 3.0]), np.array([1.0]), 10
    )
    assert capacity_kernels.BINDING[code[0]] == "no_data" and safe[0] == 0 and np.isnan(qps[0])


@given(st.lists(st.one_of(st.floats(0, 100), st.just(math.nan)), min_size=1, max_size=20))
def test_two_smallest_matches_references(values):
    kernel = [v.item() for v in capacity_kernels.two_smallest(np.array(values))]
    python = REGISTRY["capacity.two_smallest"]["python"](values)
    numpy_ = [np.asarray(v).item() for v in REGISTRY["capacity.two_smallest"]["numpy"](values)]
    for a, b, c in zip(kernel, python, numpy_, strict=True):
        assert same(a, b) and same(a, c)


# -- the analytic model ----------------------------------------------------------------------------
# Llama-3.1-70B at TP 4: layers' FLOP per token, weights, KV per token, layers, attention width,
# hidden size, the LM head's FLOP per sampled token (128,256 x 8,192), no windowed layers
MODEL = np.array([2 * 68.98e9 / 4, 137.95e9 / 4, 327680 / 4, 80, 64 * 128 / 4, 8192.0,
                  2 * 128256 * 8192 / 4, 0.0, 0.0])  # fmt: skip
GPU = np.array([312e12, 2039e9, 300e9])
CALIBRATION = np.array([0.6, 0.8, 0.3, 0.005, 3e-4, 4e-5])


@given(
    st.booleans(),
    st.floats(1, 256),
    st.floats(1, 16384),
    st.sampled_from([1, 2, 4, 8]),
)
def test_step_seconds_matches_the_python_reference(prefill, batch, tokens, tp):
    kernel = latency_kernels.step_seconds(prefill, batch, tokens, MODEL, GPU, tp, CALIBRATION)
    python = REGISTRY["latency.step_seconds"]["python"](
        prefill, batch, tokens, MODEL, GPU, tp, CALIBRATION
    )
    assert kernel == pytest.approx(python, rel=1e-12)


@given(
    st.lists(st.integers(1, 8000), min_size=1, max_size=24),
    st.lists(st.integers(1, 2000), min_size=24, max_size=24),
    st.lists(st.integers(1, 400), min_size=1, max_size=5, unique=True),
    st.sampled_from([1, 2, 8]),
)
def test_analytic_curve_matches_the_python_reference(prompts, outputs, concurrency, tp):
    prompt = np.array(prompts, dtype=float)
    output = np.array(outputs[: prompt.size], dtype=float)
    conc = np.sort(np.array(concurrency, dtype=float))
    metrics = np.array([0, 1, 2, 3])
    quantiles = np.array([0.5, 0.9, 0.99])
    latency, mean = latency_kernels.analytic_curve(
        MODEL, GPU, tp, CALIBRATION, prompt, output, conc, metrics, quantiles
    )
    ref_latency, ref_mean = CURVE["python"](
        MODEL, GPU, tp, CALIBRATION, list(prompt), list(output), list(conc), list(metrics),
        list(quantiles),
    )  # fmt: skip
    np.testing.assert_allclose(latency, np.array(ref_latency), rtol=1e-7, equal_nan=True)
    np.testing.assert_allclose(mean, np.array(ref_mean), rtol=1e-9)


def test_analytic_curve_at_concurrency_one_is_the_workload_alone():
    # one request in flight: no queue, no stall; e2e_i = prefill_i + (output_i - 1) x step(1)
    prompt = np.array([100.0, 1000.0, 4000.0])
    output = np.array([10.0, 200.0, 50.0])
    latency, mean = latency_kernels.analytic_curve(
        MODEL, GPU, 4, CALIBRATION, prompt, output, np.array([1.0]), np.array([0, 3]),
        np.array([0.5, 0.99]),
    )  # fmt: skip
    prefill = [latency_kernels.prefill_seconds(p, 1.0, MODEL, GPU, 4, CALIBRATION) for p in prompt]
    context = float(np.sum(output * (prompt + output / 2)) / output.sum())
    step = latency_kernels.decode_seconds(1.0, context, MODEL, GPU, 4, CALIBRATION)
    e2e = sorted(p + (o - 1) * step for p, o in zip(prefill, output, strict=True))
    assert latency[0, 1, 0] == pytest.approx(e2e[1])  # P50 of three: the second
    assert latency[0, 1, 1] == pytest.approx(e2e[2])
    assert latency[0, 0, 1] == pytest.approx(max(prefill))
    assert mean[0, 1] == pytest.approx(np.mean(e2e))


def test_analytic_curve_is_nan_without_an_interconnect_figure():
    gpu = np.array([312e12, 2039e9, np.nan])
    latency, mean = latency_kernels.analytic_curve(
        MODEL, gpu, 2, CALIBRATION, np.array([100.0]), np.array([10.0]), np.array([1.0, 2.0]),
        np.array([3]), np.array([0.99]),
    )  # fmt: skip
    assert np.isnan(latency).all() and np.isnan(mean).all()


def test_a_curve_that_ends_where_memory_does_is_bound_by_memory_not_its_range():
    # the analytic and engine curves end at what memory holds: a plan whose SLA never binds said
    # "the measured curve ends before any bound binds (... benchmark higher concurrencies)" for
    # an analytic curve memory had ended (Llama-3.1-8B on H100-SXM, 313 in flight)
    grid = np.array([1.0, 2.0, 4.0])
    safe, code, *_ = capacity_kernels.search(
        np.array([0.1, 0.2, 0.3]), np.array([0.1, 0.2, 0.3]), grid, np.array([100.0]), 4
    )
    assert safe[0] == 4 and capacity_kernels.BINDING[code[0]] == "memory"


# gpt-oss-120b at TP 1: half its layers' KV (18 of 36 layers) in a sliding window of 128 tokens
MODEL_WINDOWED = np.array([2 * 4.552e9, 65.2e9, 73728.0, 36, 64 * 64, 2880.0,
                           2 * 201088 * 2880, 0.5, 128.0])  # fmt: skip


@given(st.booleans(), st.integers(1, 64), st.integers(1, 4000), st.sampled_from([1, 2, 8]))
def test_windowed_layers_match_the_python_reference(prefill, batch, tokens, tp):
    kernel = latency_kernels.step_seconds(
        prefill, float(batch), float(tokens), MODEL_WINDOWED, GPU, tp, CALIBRATION
    )
    python = REGISTRY["latency.step_seconds"]["python"](
        prefill, float(batch), float(tokens), MODEL_WINDOWED, GPU, tp, CALIBRATION
    )
    assert float(kernel) == pytest.approx(python, rel=1e-12)


def test_a_window_caps_what_a_decode_step_reads():
    full = MODEL_WINDOWED.copy()
    full[7:] = 0.0
    # at 128 tokens of context the window reads everything: the same step
    at_window = [latency_kernels.decode_seconds(1.0, 128.0, m, GPU, 1, CALIBRATION)
                 for m in (MODEL_WINDOWED, full)]  # fmt: skip
    assert at_window[0] == at_window[1]
    # at 32,768 tokens the windowed half reads 128: the KV read is (16,384 + 64) / 32,768 of full
    features = [latency_kernels.step_features(False, 1.0, 32768.0, m, GPU, 1)[1]
                for m in (MODEL_WINDOWED, full)]  # fmt: skip
    kv_full = 32768.0 * 73728.0 / GPU[1]
    weights = 65.2e9 / GPU[1]
    assert features[1] == pytest.approx(weights + kv_full, rel=1e-12)
    assert features[0] == pytest.approx(weights + kv_full * (16384 + 64) / 32768, rel=1e-12)

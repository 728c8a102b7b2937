"""The two-pass Monte Carlo gives the months of the one-pass reference (plain numpy)."""

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.reference.forecast import simulate_months_numpy
from capnb.forecast import BurstModel, MonthInputs, _months


def _one_pass(inputs, model, key, first, trials, grid):
    return simulate_months_numpy(
        (np.uint64(key[0]), np.uint64(key[1])), list(range(first, first + trials)), inputs.base,
        inputs.noise, inputs.noise_block, model.rate_per_month, model.duration_s[0] / 60,
        model.duration_s[1] / 60, *model.multiplier, grid[0], grid[1] - grid[0], grid.size,
        inputs.pool_start, inputs.pool_size,
    )  # fmt: skip


def _two_pass(inputs, model, key, first, trials, grid):
    ids = np.arange(first, first + trials)
    peak, mean, block = _months.month_block(
        ids, inputs=inputs, bursts=model, mean_count=model.rate_per_month,
        key=(np.uint64(key[0]), np.uint64(key[1])), grid=grid,
    )  # fmt: skip
    return peak, mean, block


@st.composite
def months(draw):
    minutes = draw(st.sampled_from([240, 1440, 2000]))
    block = draw(st.sampled_from([1, 7, 10, 60]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    # a stepped baseline (runs of equal values) and a small noise pool
    base = np.repeat(rng.uniform(10, 200, -(-minutes // 60)), 60)[:minutes]
    noise = rng.lognormal(0, 0.3, draw(st.integers(1, 40)))
    # each hour's baseline draws from a range of the residuals (a slot's level's pool), or all
    pooled = draw(st.booleans())
    size = rng.integers(1, noise.size + 1, base.size // 60 + 1)
    start = rng.integers(0, noise.size - size + 1)
    hour = np.arange(minutes) // 60
    pools = (start[hour], size[hour]) if pooled else (None, None)
    low = draw(st.floats(1.0, 4.0))
    model = BurstModel(
        rate_per_month=draw(st.sampled_from([0.0, 1.5, 8.0, 40.0])),
        duration_s=(draw(st.sampled_from([60.0, 600.0])), draw(st.sampled_from([3600.0, 30000.0]))),
        multiplier=(low, low + draw(st.floats(0.0, 4.0))),
    )
    key = (draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**32 - 1)))
    grid = np.linspace(0.0, float(base.max() * noise.max() * model.multiplier[1]) * 1.05, 37)
    return MonthInputs(base, noise, block, 0, *pools), model, key, grid


@given(months(), st.integers(0, 5000), st.integers(1, 12))
def test_two_passes_give_the_one_pass_months(case, first, trials):
    inputs, model, key, grid = case
    _months._KEPT.clear()
    peak, mean, above = _one_pass(inputs, model, key, first, trials, grid)
    got_peak, got_mean, block = _two_pass(inputs, model, key, first, trials, grid)
    np.testing.assert_array_equal(got_peak, peak)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12)
    np.testing.assert_array_equal(block.sum(axis=0), above.sum(axis=0))
    np.testing.assert_array_equal(_months.peaks_above(got_peak, grid), (above > 0).mean(axis=0))


def test_kept_first_pass_is_reused_and_the_thread_count_changes_nothing():
    rng = np.random.default_rng(1)
    inputs = MonthInputs(np.repeat(rng.uniform(50, 150, 720), 60), rng.lognormal(0, 0.3, 50), 10, 0)
    model = BurstModel()
    grid = np.linspace(0.0, 2000.0, 50)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        _months._KEPT.clear()
        one = _two_pass(inputs, model, (3, 4), 0, 80, grid)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        _months._KEPT.clear()
        two = _two_pass(inputs, model, (3, 4), 0, 80, grid)
    finally:
        numba.set_num_threads(before)
    again = _two_pass(inputs, BurstModel(multiplier=(2.0, 9.0)), (3, 4), 0, 80, grid)
    assert len(_months._KEPT) == 1  # the second model re-used the months without bursts
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(again[0], one[0])


@pytest.mark.parametrize("trials", [1, 7])
def test_blocks_of_trials_add_up_to_one_run(trials):
    rng = np.random.default_rng(2)
    inputs = MonthInputs(np.repeat(rng.uniform(50, 150, 48), 30), rng.lognormal(0, 0.3, 20), 5, 0)
    model, grid = BurstModel(rate_per_month=20.0), np.linspace(0.0, 1500.0, 30)
    whole = _two_pass(inputs, model, (9, 9), 0, 2 * trials, grid)
    parts = [_two_pass(inputs, model, (9, 9), a, trials, grid) for a in (0, trials)]
    np.testing.assert_array_equal(whole[0], np.concatenate([p[0] for p in parts]))
    np.testing.assert_array_equal(whole[2].sum(axis=0), sum(p[2].sum(axis=0) for p in parts))

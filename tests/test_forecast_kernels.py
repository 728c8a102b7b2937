"""Forecast kernels against their plain-Python and numpy references, and against published facts."""

import ast
import pathlib

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.reference import REGISTRY
from benchmarks.reference import forecast as forecast_reference
from benchmarks.reference.forecast import expected_month_mean
from capnb.data._series import long_runs
from capnb.forecast import BurstModel, MonthInputs, _months
from capnb.forecast._baseline import slot_statistics
from capnb.kernels import forecast as kernels

R = {name.split(".", 1)[1]: refs for name, refs in REGISTRY.items() if name.startswith("forecast.")}

# Random123's known-answer vectors for philox4x32 with 10 rounds (kat_vectors in the Random123
# distribution): counter, key -> output.
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def test_kernels_import_numpy_and_numba_only():
    for path in (pathlib.Path(kernels.__file__), pathlib.Path(forecast_reference.__file__)):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= {"numpy", "numba", "math", "__future__", "csv", "io", "re"}, roots


@pytest.mark.parametrize(("counter", "key", "expected"), PHILOX_KAT)
def test_philox_matches_random123_known_answers(counter, key, expected):
    assert tuple(int(w) for w in kernels.philox4x32(*counter, *key)) == expected
    assert R["philox4x32"]["python"](counter, key) == expected
    numpy_words = R["philox4x32"]["numpy"](*([c] for c in counter), *key)
    assert tuple(int(w[0]) for w in numpy_words) == expected


@given(st.lists(st.integers(0, 2**32 - 1), min_size=6, max_size=6))
def test_philox_kernel_matches_python(words):
    assert tuple(int(w) for w in kernels.philox4x32(*words)) == R["philox4x32"]["python"](
        words[:4], words[4:]
    )


def test_uniform53_spans_zero_to_below_one():
    assert kernels.uniform53(np.uint64(0), np.uint64(0)) == 0.0
    top = kernels.uniform53(np.uint64(2**32 - 1), np.uint64(2**32 - 1))
    assert top == 1.0 - 2.0**-53


@given(
    st.lists(st.integers(0, 10**6), min_size=0, max_size=60),
    st.integers(-1000, 1000),
    st.integers(1, 5000),
    st.integers(1, 40),
    st.booleans(),
)
def test_bin_requests_matches_references(times, origin, interval, n_bins, with_tokens):
    time_ns = np.sort(np.asarray(times, dtype=np.int64))
    rng = np.random.default_rng(len(times))
    prompt = rng.integers(0, 9000, time_ns.size) if with_tokens else np.zeros(0, np.int64)
    output = rng.integers(0, 900, time_ns.size) if with_tokens else np.zeros(0, np.int64)
    got = [np.zeros(n_bins), np.zeros(n_bins), np.zeros(n_bins)]
    outside = kernels.bin_requests(time_ns, prompt, output, origin, interval, *got)
    for ref in (R["bin_requests"]["python"], R["bin_requests"]["numpy"]):
        for mine, theirs in zip(
            got, ref(time_ns, prompt, output, origin, interval, n_bins), strict=True
        ):
            np.testing.assert_array_equal(mine, theirs)
    assert outside == time_ns.size - got[0].sum()


@given(
    st.lists(st.one_of(st.floats(0, 1e4), st.just(float("nan"))), min_size=1, max_size=80),
    st.integers(1, 7),
    st.lists(st.floats(0.01, 0.99), min_size=1, max_size=4, unique=True),
)
def test_slot_statistics_matches_references(values, n_slots, quantiles):
    values = np.asarray(values)
    slot = np.arange(values.size) % n_slots
    q = np.sort(np.asarray(quantiles))
    out_q, out_mean, out_count = slot_statistics(values, slot, q, n_slots)
    for name in ("python", "numpy"):
        ref_q, ref_mean, ref_count = R["slot_statistics"][name](values, slot, q, n_slots)
        np.testing.assert_allclose(out_q, ref_q, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(out_mean, ref_mean, rtol=1e-12)
        np.testing.assert_array_equal(out_count, ref_count)


def test_slot_statistics_is_numpys_default_quantile_exactly():
    rng = np.random.default_rng(3)
    values = rng.lognormal(3, 1, 5000)
    slot = rng.integers(0, 24, values.size)
    q = np.array([0.5, 0.95, 0.99])
    out_q = slot_statistics(values, slot, q, 24)[0]
    for s in range(24):
        np.testing.assert_array_equal(out_q[s], np.quantile(values[slot == s], q))


@given(st.lists(st.booleans(), max_size=60), st.integers(1, 6))
def test_long_runs_matches_python(flags, min_length):
    flags = np.asarray(flags, dtype=bool)
    out = long_runs(flags, min_length)
    np.testing.assert_array_equal(out, R["long_runs"]["python"](flags, min_length))


# -- Monte Carlo -----------------------------------------------------------------------------
def _month(minutes=600, block=3, seed_words=(12345, 678), pools=False):
    """A month's inputs; ``pools``: each 7-minute run of the baseline draws from its own range."""
    rng = np.random.default_rng(minutes)
    base = rng.uniform(50, 150, minutes)
    noise = rng.lognormal(0, 0.3, 97)
    noise /= noise.mean()
    args = dict(
        base=base, noise=noise, noise_block=block, mean_count=2.5,
        d_low=20.0, d_high=90.0, m_low=2.0, m_high=4.0,
    )  # fmt: skip
    if pools:
        base[:] = np.repeat(base[::7], 7)[:minutes]  # runs of a level, as slots make them
        size = rng.integers(1, 40, minutes)[np.arange(minutes) // 7 * 7]
        args.update(pool_start=(rng.integers(0, 97 - 40, minutes)[np.arange(minutes) // 7 * 7]),
                    pool_size=size)  # fmt: skip
    return np.uint64(seed_words[0]), np.uint64(seed_words[1]), args


def _kernel(key0, key1, first, trials, args, cap_low, cap_step, levels, *, per_trial=True):
    """The two-pass kernels (:mod:`capnb.kernels.months`): per-trial peaks, means, minutes above.

    ``per_trial=False``: the minutes above summed over the trials (one block, much faster).
    """
    inputs = MonthInputs(
        args["base"], args["noise"], args["noise_block"], 0, args.get("pool_start"),
        args.get("pool_size"),
    )  # fmt: skip
    model = BurstModel(
        duration_s=(args["d_low"] * 60, args["d_high"] * 60),
        multiplier=(args["m_low"], args["m_high"]),
    )
    grid = cap_low + cap_step * np.arange(levels)
    kw = dict(inputs=inputs, bursts=model, mean_count=args["mean_count"], key=(key0, key1))
    _months._KEPT.clear()
    peak, mean, block = _months.month_block(np.arange(first, first + trials), grid=grid, **kw)
    if not per_trial:
        return peak, mean, block.sum(axis=0)
    # a block's minutes above come summed over its trials: one block per trial
    above = np.concatenate(
        [_months.month_block([t], grid=grid, **kw)[2] for t in range(first, first + trials)]
    )
    return peak, mean, above


@pytest.mark.parametrize("pools", [False, True])
def test_monte_carlo_kernel_matches_python_and_numpy_exactly(pools):
    key0, key1, args = _month(pools=pools)
    peak, mean, above = _kernel(key0, key1, 5, 6, args, 10.0, 25.0, 40)
    refs = [
        R["simulate_months"][name](
            (key0, key1),
            list(range(5, 11)),
            args["base"],
            args["noise"],
            args["noise_block"],
            args["mean_count"],
            args["d_low"],
            args["d_high"],
            args["m_low"],
            args["m_high"],
            10.0,
            25.0,
            40,
            args.get("pool_start"),
            args.get("pool_size"),
        )
        for name in ("python", "numpy")
    ]
    for ref_peak, ref_mean, ref_above in refs:
        np.testing.assert_array_equal(peak, ref_peak)
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-12)
        np.testing.assert_array_equal(above, ref_above)
    assert above[:, 0].max() > 0 and above[:, -1].min() == 0  # the grid spans the demand


def test_monte_carlo_is_identical_for_any_thread_count_and_any_split():
    key0, key1, args = _month(minutes=1440, block=10)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = _kernel(key0, key1, 0, 64, args, 0.0, 20.0, 50)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = _kernel(key0, key1, 0, 64, args, 0.0, 20.0, 50)
    finally:
        numba.set_num_threads(before)
    first = _kernel(key0, key1, 0, 20, args, 0.0, 20.0, 50)
    rest = _kernel(key0, key1, 20, 44, args, 0.0, 20.0, 50)
    for a, b, c, d in zip(one, two, first, rest, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, np.concatenate([c, d]))


def test_monte_carlo_seeds_give_different_months():
    key0, key1, args = _month()
    a = _kernel(key0, key1, 0, 8, args, 0.0, 20.0, 10)[0]
    b = _kernel(key0 + np.uint64(1), key1, 0, 8, args, 0.0, 20.0, 10)[0]
    assert not np.array_equal(a, b)


def test_monte_carlo_mean_matches_its_analytic_mean():
    # bursts long and frequent enough to matter: the analytic mean must include them exactly
    key0, key1, args = _month(minutes=2880, block=5)
    trials = 4000
    _, mean, _ = _kernel(key0, key1, 0, trials, args, 0.0, 50.0, 4, per_trial=False)
    expected = expected_month_mean(**args)
    no_bursts = float(np.mean(args["base"]) * np.mean(args["noise"]))
    standard_error = mean.std(ddof=1) / np.sqrt(trials)
    assert abs(mean.mean() - expected) < 4 * standard_error
    assert expected - no_bursts > 10 * standard_error  # the test can tell bursts from none


def test_monte_carlo_without_bursts_or_noise_is_the_baseline():
    key0, key1, args = _month(minutes=300, block=1)
    args.update(mean_count=0.0, noise=np.ones(5))
    peak, mean, above = _kernel(key0, key1, 0, 3, args, 0.0, 1.0, 200)
    np.testing.assert_allclose(peak, args["base"].max())
    np.testing.assert_allclose(mean, args["base"].mean(), rtol=1e-12)
    expected_above = [(args["base"] > j).sum() for j in range(200)]
    np.testing.assert_array_equal(above[0], expected_above)


def test_burst_minutes_rounds_and_never_drops_below_one():
    assert kernels.burst_minutes(0.0, 60.0, 120.0) == 60
    assert kernels.burst_minutes(0.999999, 60.0, 120.0) == 120
    assert kernels.burst_minutes(0.5, 0.01, 0.02) == 1

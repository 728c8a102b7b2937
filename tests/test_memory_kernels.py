"""Memory kernels against their plain-Python and numpy references."""

import ast
import pathlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.reference import REGISTRY
from benchmarks.reference.memory import FULL
from capnb.kernels import memory as kernels

footprint_python = REGISTRY["memory.footprint"]["python"]
footprint_numpy = REGISTRY["memory.footprint"]["numpy"]
largest_python = REGISTRY["memory.largest_fitting_concurrency"]["python"]
largest_numpy = REGISTRY["memory.largest_fitting_concurrency"]["numpy"]

GB = 1e9
weights_st = st.floats(0.0, 2000 * GB)
kv_st = st.floats(1.0, 5e6)
usable_st = st.floats(1 * GB, 300 * GB)
seq_st = st.integers(1, 300_000)
fraction_st = st.sampled_from([0.0, 0.1, 0.15, 0.2])
reserve_st = st.floats(0.0, 8 * GB)
block_st = st.sampled_from([1, 16, 32])


def _footprint_grid(weights, kv, conc, seq, fraction, reserve, block):
    """Call the kernel as the step module does: 2-D parameters, outputs allocated by the caller."""
    shape = np.broadcast_shapes(np.shape(weights), np.shape(kv), np.shape(reserve))
    scalar = shape == ()
    weights, kv, reserve = (
        np.array(np.broadcast_to(a, shape), dtype=float, ndmin=2) for a in (weights, kv, reserve)
    )
    conc, seq = np.asarray(conc, np.int64), np.asarray(seq, np.int64)
    outputs = [np.empty((*weights.shape, conc.size, seq.size)) for _ in range(3)]
    layout = [np.array(np.broadcast_to(v, weights.shape)) for v in FULL]
    kernels.footprint(weights, kv, reserve, conc, seq, fraction, block, *layout, *outputs)
    return [o[0, 0] for o in outputs] if scalar else outputs


@given(
    weights_st,
    kv_st,
    st.lists(st.integers(1, 5000), min_size=1, max_size=6),
    st.lists(seq_st, min_size=1, max_size=6),
    fraction_st,
    reserve_st,
    block_st,
)
def test_footprint_matches_python_reference(weights, kv, conc, seq, fraction, reserve, block):
    kv_out, headroom_out, total_out = _footprint_grid(
        weights, kv, conc, seq, fraction, reserve, block
    )
    for i, c in enumerate(conc):
        for j, s in enumerate(seq):
            ref = footprint_python(weights, kv, np.inf, c, s, fraction, reserve, block)
            assert kv_out[i, j] == ref[0]
            assert headroom_out[i, j] == pytest.approx(ref[1], rel=1e-12, abs=1e-3)
            assert total_out[i, j] == ref[2]


def test_footprint_matches_numpy_reference_on_a_random_grid():
    rng = np.random.default_rng(7)
    weights = rng.uniform(1e9, 2e11, (5, 3))
    kv = rng.uniform(1e4, 1e6, (5, 3))
    conc = rng.integers(1, 4096, 40)
    seq = rng.integers(1, 131_072, 30)
    got = _footprint_grid(weights, kv, conc, seq, 0.15, 1e9, 16)
    want = footprint_numpy(
        weights[..., None, None],
        kv[..., None, None],
        np.inf,
        conc[:, None],
        seq[None, :],
        0.15,
        1e9,
        16,
    )
    for g, w in zip(got, want[:3], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@given(weights_st, kv_st, usable_st, seq_st, fraction_st, reserve_st, block_st)
def test_largest_fitting_concurrency_matches_counting_reference(
    weights, kv, usable, seq, fraction, reserve, block
):
    got = int(
        kernels.largest_fitting_concurrency(
            weights, kv, usable, seq, fraction, reserve, block, *FULL
        )
    )
    assert got == largest_python(weights, kv, usable, seq, fraction, reserve, block)


@given(weights_st, kv_st, usable_st, seq_st, fraction_st, reserve_st, block_st)
def test_fits_exactly_up_to_the_largest(weights, kv, usable, seq, fraction, reserve, block):
    largest = int(
        kernels.largest_fitting_concurrency(
            weights, kv, usable, seq, fraction, reserve, block, *FULL
        )
    )
    for c in {1, largest, largest + 1}:
        if c >= 1:
            fits = footprint_python(weights, kv, usable, c, seq, fraction, reserve, block)[3]
            assert fits == (c <= largest)


def test_fits_kernel_matches_numpy_comparison():
    rng = np.random.default_rng(11)
    largest = rng.integers(0, 500, (7, 9))
    conc = np.sort(rng.choice(np.arange(1, 1000), 40, replace=False))
    out = np.empty((7, 40, 9), dtype=bool)
    kernels.fits(largest, conc, out)
    np.testing.assert_array_equal(out, conc[None, :, None] <= largest[:, None, :])


def test_largest_matches_numpy_grid_search():
    rng = np.random.default_rng(3)
    weights = rng.uniform(1e9, 1e11, 50)
    kv = rng.uniform(1e4, 1e6, 50)
    usable = rng.uniform(2e10, 2e11, 50)
    seq = rng.integers(256, 65_536, 50)
    grid = np.arange(1, 20_001)
    want = largest_numpy(
        weights[:, None], kv[:, None], usable[:, None], grid[None, :], seq[:, None], 0.15, 0.0, 1
    )
    got = kernels.largest_fitting_concurrency(weights, kv, usable, seq, 0.15, 0.0, 1, *FULL)
    np.testing.assert_array_equal(np.minimum(got, grid[-1]), want)


@pytest.mark.parametrize(
    ("weights", "usable", "expected"),
    [(100e9, 80e9, 0), (0.0, 80e9, None), (80e9 / 1.15, 80e9, 0)],
)
def test_edges(weights, usable, expected):
    got = int(kernels.largest_fitting_concurrency(weights, 1e5, usable, 1000, 0.15, 0.0, 1, *FULL))
    assert got == (
        expected
        if expected is not None
        else largest_python(weights, 1e5, usable, 1000, 0.15, 0.0, 1)
    )
    assert got >= 0


def test_smallest_fitting_tensor_parallel_matches_python_reference():
    rng = np.random.default_rng(5)
    candidates = np.array([1, 2, 4, 8, 16, 32, 64])
    weights = rng.uniform(1e9, 2e12, (6, 1)) / candidates
    weights[2, :3] = np.nan  # tensor-parallel degrees a model cannot use
    kv = rng.uniform(1e4, 1e6, (6, 1)) / np.minimum(candidates, 8)
    reserve = rng.uniform(0, 4e9, (6, 7))
    usable = rng.uniform(1e10, 2e11, 5)
    seq = rng.integers(256, 400_000, 9)
    out = np.empty((6, 5, 9), np.int64)
    kernels.smallest_fitting_tensor_parallel(
        weights, kv, reserve, candidates, usable, seq, 0.15, 16, np.ones(6), np.zeros(6),
        np.zeros(6, np.int64), out,
    )  # fmt: skip
    python = REGISTRY["memory.smallest_fitting_tensor_parallel"]["python"]
    want = [
        [
            [python(weights[m], kv[m], reserve[m], candidates, u, s, 0.15, 16) for s in seq]
            for u in usable
        ]
        for m in range(6)
    ]
    np.testing.assert_array_equal(out, want)
    assert 0 < (out > 0).mean() < 1


def test_block_rounding_counts_whole_blocks():
    kv, _, _ = _footprint_grid(0.0, 2.0, [1], [1, 16, 17], 0.0, 0.0, 16)
    np.testing.assert_array_equal(kv[0], [32.0, 32.0, 64.0])


def test_kernels_import_only_numpy_and_numba():
    """The kernel layer stays pure array maths: no xarray, pandas, presentation or step modules."""
    forbidden = {"xarray", "pandas", "pyarrow", "dask", "altair", "ipywidgets", "IPython", "capnb"}
    folder = pathlib.Path(kernels.__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = {node.module.split(".")[0]}
            elif isinstance(node, ast.ImportFrom) and node.level > 1:
                roots = {"capnb"}  # from .. import: reaching out of capnb.kernels
            else:
                continue
            assert not roots & forbidden, f"{path.name} imports {roots & forbidden}"


# vLLM's hybrid KV cache manager: full and windowed groups of layers sharing one pool of blocks
layout_st = st.tuples(
    st.sampled_from([0.0, 0.5, 10 / 62, 1.0]),
    st.sampled_from([0.0, 0.5, 60 / 62, 1.0]),
    st.integers(2, 300),  # a window keeps ceil(window / block) + 1 >= 2 blocks
)


@given(weights_st, kv_st, usable_st, seq_st, fraction_st, reserve_st, block_st, layout_st)
def test_largest_fitting_concurrency_matches_counting_reference_under_hybrid_groups(
    weights, kv, usable, seq, fraction, reserve, block, layout
):
    if layout[0] + layout[1] == 0.0:
        layout = FULL  # (no layer at all is no model)
    cell = (weights, kv, usable, seq, fraction, reserve, block)
    got = int(kernels.largest_fitting_concurrency(*cell, *layout))
    assert got == largest_python(*cell, layout)


def test_hybrid_footprint_keeps_only_the_windows_blocks():
    # gpt-oss: 18 full and 18 windowed layers (window 128: 9 blocks of 16); 2 bytes a token
    layout = (0.5, 0.5, 9)
    weights = np.zeros((1, 1))
    outputs = [np.empty((1, 1, 1, 3)) for _ in range(3)]
    kernels.footprint(weights, weights + 2.0, weights, np.array([1]), np.array([16, 144, 8192]),
                      0.0, 16, weights + 0.5, weights + 0.5, np.full((1, 1), 9), *outputs)  # fmt: skip
    # 1, 9 and 512 blocks in the full group; 1, 9 and 9 in the windowed group; 32 bytes a block
    np.testing.assert_array_equal(outputs[0][0, 0, 0], [32.0, 288.0, (512 + 9) / 2 * 32])
    for seq, want in zip([16, 144, 8192], outputs[0][0, 0, 0], strict=True):
        assert footprint_python(0.0, 2.0, np.inf, 1, seq, 0.0, 0.0, 16, layout)[0] == want


@given(seq_st, kv_st, block_st, layout_st)
def test_sequence_bytes_is_one_sequence_of_the_footprint(seq, kv, block, layout):
    if layout[0] + layout[1] == 0.0:
        layout = FULL
    got = float(kernels.sequence_bytes(seq, kv, block, *layout))
    assert got == footprint_python(0.0, kv, np.inf, 1, seq, 0.0, 0.0, block, layout)[0]

"""Memory sweep benchmark: about 8 M cells (10 models x 12 GPUs x 4 TP x 256 concurrency x 64 seq_len).

Timed on the same inputs in one run:

- the full Dataset from :func:`capnb.memory.sweep`, against plain numpy broadcasting of the same
  outputs, a pure-Python loop (timed on a slice and scaled) and the memory-bandwidth bound: the time
  this machine takes to allocate and write every variable of the Dataset (one thread or two,
  whichever is faster); also on one thread, and on a grid ten times larger, where the fixed cost
  of validation and assembling the Dataset (about 5 ms) no longer dominates;
- the reduced answer (largest fitting concurrency per model x gpu x TP x seq_len) from
  :func:`capnb.memory.max_concurrency`, which never builds the concurrency grid, against the same
  closed form in numpy (the best plain version: closed form against closed form), and, for
  scale, numpy that materialises the grid and reduces it (grid against grid is the full sweep's
  comparison above).
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from capnb import data, memory
from capnb.kernels import memory as kernels

from . import Row, best_time
from .reference import REGISTRY
from .reference.memory import FULL

MODELS = [
    "Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Mixtral-8x7B", "Mixtral-8x22B",
    "Qwen3-8B", "Qwen3-32B", "Qwen3-30B-A3B", "Qwen3-235B-A22B", "DeepSeek-V3",
]  # fmt: skip
TENSOR_PARALLEL = [1, 2, 4, 8]


def _grid(quick: bool) -> dict[str, object]:
    return {
        "model": MODELS[:3] if quick else MODELS,
        "gpu": data.list_gpus()[:4] if quick else data.list_gpus(),
        "tensor_parallel": TENSOR_PARALLEL,
        "concurrency": np.arange(1, (32 if quick else 256) + 1),
        "seq_len": np.arange(1, (8 if quick else 64) + 1) * 2048,
    }


def _fill_bound(shapes: list[tuple[tuple[int, ...], np.dtype]]) -> float:
    """Best time to allocate and write arrays of these shapes, on one thread or two.

    What the full Dataset cannot beat on this machine: every byte of it allocated (page faults of
    fresh memory included, as a result is) and written once with numpy's constant fill, by one
    thread or by two writing halves (the faster counts). The fill streams its stores; values
    computed in a loop are stored the ordinary way, each cache line read before it is written.
    """
    from concurrent.futures import ThreadPoolExecutor

    def fill(parts: int):
        arrays = [np.empty(s, dtype=d) for s, d in shapes]
        pieces = []
        for a in arrays:
            flat = a.reshape(-1)
            bounds = [flat.size * k // parts for k in range(parts + 1)]
            pieces += [(flat, a0, b0) for a0, b0 in itertools.pairwise(bounds)]

        def write(piece):
            flat, a0, b0 = piece
            flat[a0:b0] = "x" if flat.dtype.kind == "U" else 1

        if parts == 1:
            for piece in pieces:
                write(piece)
        else:
            with ThreadPoolExecutor(parts) as pool:
                list(pool.map(write, pieces))
        return arrays

    return min(best_time(lambda k=k: fill(k), repeat=5) for k in (1, 2))


def _full_row(label: str, grid: dict, reference: bool) -> Row:
    import numba

    result = memory.sweep(**grid)
    cells = int(result.fits.size)
    shapes = [(v.shape, v.dtype) for v in result.data_vars.values()]
    nbytes = sum(int(np.prod(s)) * d.itemsize for s, d in shapes)
    del result
    t_sweep = best_time(lambda: memory.sweep(**grid), repeat=5)
    t_bound = _fill_bound(shapes)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        t_one = best_time(lambda: memory.sweep(**grid), repeat=3)
    finally:
        numba.set_num_threads(threads)
    ratios = {"1 -> 2 threads": t_one / t_sweep}
    if reference:
        ratios = {**reference, **ratios}
    size = "x".join(str(len(grid[d])) for d in ("model", "gpu", "tensor_parallel"))
    size += f"x{len(grid['concurrency'])}x{len(grid['seq_len'])}"
    return Row(
        label,
        f"{size} = {cells / 1e6:.1f} M cells",
        t_sweep,
        f"{cells / t_sweep / 1e6:,.0f} M cells/s, {nbytes / t_sweep / 1e9:.1f} GB/s of Dataset",
        ratios,
        f"{nbytes / 1e6:,.0f} MB in {len(shapes)} variables; allocate+write bound "
        f"{t_bound * 1e3:.1f} ms ({nbytes / t_bound / 1e9:.1f} GB/s): sweep = "
        f"{t_sweep / t_bound:.2f}x the bound (goal 1.2x)",
    )


def run(quick: bool = False) -> list[Row]:
    grid = _grid(quick)
    result = memory.sweep(**grid)
    cells = int(result.fits.size)
    inputs = (
        result.weights_bytes.values[:, None, :, None, None],
        result.kv_bytes_per_token.values[:, None, :, None, None],
    )
    usable = result.usable_bytes.values[None, :, None, None, None]
    conc = result.concurrency.values[None, None, None, :, None]
    seq = result.seq_len.values[None, None, None, None, :]
    fraction = result.attrs["headroom_fraction"]

    def numpy_full():
        kv, headroom, total, _ = REGISTRY["memory.footprint"]["numpy"](
            inputs[0][:, 0], inputs[1][:, 0], np.inf, conc[:, 0], seq[:, 0], fraction, 0.0, 1
        )
        fits = total[:, None] <= usable
        largest = np.where(fits, conc, 0).max(axis=3)
        return kv, headroom, total, fits, largest

    # check before timing: the kernel path and numpy agree on every output
    kv, headroom, total, fits, largest = numpy_full()
    np.testing.assert_allclose(result.kv_cache_bytes.values, kv, rtol=1e-12)
    np.testing.assert_allclose(result.headroom_bytes.values, headroom, rtol=1e-9)
    np.testing.assert_allclose(result.total_bytes.values, total, rtol=1e-12)
    assert np.array_equal(result.fits.values, fits)
    assert np.array_equal(np.minimum(result.max_concurrency.values, conc.max()), largest)
    del result, kv, headroom, total, fits

    t_numpy = best_time(numpy_full, repeat=3)
    python_ref = REGISTRY["memory.footprint"]["python"]
    w, k, u = float(inputs[0].flat[0]), float(inputs[1].flat[0]), float(usable.flat[0])
    sample = 20_000
    start = time.perf_counter()
    for i in range(sample):
        python_ref(
            w, k, u, int(conc.flat[i % conc.size]), int(seq.flat[i % seq.size]), fraction, 0.0, 1
        )
    t_python = (time.perf_counter() - start) / sample * cells
    t_sweep = best_time(lambda: memory.sweep(**grid), repeat=5)
    rows = [
        _full_row(
            "memory.sweep (full Dataset)",
            grid,
            {"numpy": t_numpy / t_sweep, "pure Python": t_python / t_sweep},
        )
    ]
    if not quick:
        big = {**grid, "concurrency": np.arange(1, 1025), "seq_len": np.arange(1, 161) * 512}
        rows.append(_full_row("memory.sweep (full Dataset), 10x the grid", big, {}))

    reduced = {k: v for k, v in grid.items() if k != "concurrency"}
    t_reduced = best_time(lambda: memory.max_concurrency(**reduced), repeat=5)
    closed = REGISTRY["memory.largest_fitting_concurrency"]["numpy (closed form)"]
    closed_args = (
        inputs[0][..., 0],
        inputs[1][..., 0],
        usable[..., 0],
        seq[..., 0, :],
        fraction,
        0.0,
        1,
    )
    # the kernel on the same cells, a full-length KV layout (one group of every layer)
    t_kernel = best_time(lambda: kernels.largest_fitting_concurrency(*closed_args, *FULL), repeat=5)
    np.testing.assert_array_equal(
        closed(*closed_args), memory.max_concurrency(**reduced).max_concurrency.values
    )
    t_closed = best_time(lambda: closed(*closed_args), repeat=5)
    t_numpy_reduced = best_time(lambda: numpy_full()[4], repeat=3)
    reduced_cells = cells // grid["concurrency"].size
    rows.append(
        Row(
            "memory.max_concurrency (reduced)",
            f"{reduced_cells:,} cells, no concurrency grid",
            t_reduced,
            f"{reduced_cells / t_reduced / 1e6:,.2f} M cells/s",
            {
                "numpy closed form": t_closed / t_reduced,
                "numpy (materialised grid)": t_numpy_reduced / t_reduced,
            },
            f"kernel alone {t_kernel * 1e3:.2f} ms ({t_closed / t_kernel:,.1f}x numpy's closed "
            "form); the rest is validation and xarray",
        )
    )
    return rows

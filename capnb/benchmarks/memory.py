"""Memory sweep benchmark: about 8 M cells (10 models x 12 GPUs x 4 TP x 256 concurrency x 64 seq_len).

Three things are timed on the same inputs in one run:

- the full Dataset from :func:`capnb.memory.sweep`, against plain numpy broadcasting of the same
  outputs, a pure-Python loop (timed on a slice and scaled) and the memory-bandwidth bound: the time
  this machine takes to allocate and write the Dataset's bytes (``numpy.full`` of every output);
- the reduced answer (largest fitting concurrency per model x gpu x TP x seq_len) from
  :func:`capnb.memory.max_concurrency`, which never builds the concurrency grid, against numpy that
  materialises the grid and reduces it.
"""

from __future__ import annotations

import time

import numpy as np

from .. import data, memory
from ..kernels import memory as kernels
from ..kernels.reference import REGISTRY
from . import Row, best_time

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

    t_sweep = best_time(lambda: memory.sweep(**grid))
    t_numpy = best_time(numpy_full)
    out_shapes = [(result.kv_cache_bytes.shape, np.float64)] * 3 + [
        (result.fits.shape, np.bool_),
        (result.max_concurrency.shape, np.int64),
    ]
    t_bound = best_time(lambda: [np.full(s, 1, dtype=d) for s, d in out_shapes])
    nbytes = sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in out_shapes)

    python_ref = REGISTRY["memory.footprint"]["python"]
    w, k, u = float(inputs[0].flat[0]), float(inputs[1].flat[0]), float(usable.flat[0])
    sample = 20_000
    start = time.perf_counter()
    for i in range(sample):
        python_ref(
            w, k, u, int(conc.flat[i % conc.size]), int(seq.flat[i % seq.size]), fraction, 0.0, 1
        )
    t_python = (time.perf_counter() - start) / sample * cells

    reduced = {k: v for k, v in grid.items() if k != "concurrency"}
    t_reduced = best_time(lambda: memory.max_concurrency(**reduced))
    t_kernel = best_time(
        lambda: kernels.largest_fitting_concurrency(
            inputs[0][..., 0], inputs[1][..., 0], usable[..., 0], seq[..., 0, :], fraction, 0.0, 1
        )
    )
    t_numpy_reduced = best_time(lambda: numpy_full()[4])
    t_widget = _worksheet_interaction()
    size = "x".join(
        str(result.sizes[d]) for d in ("model", "gpu", "tensor_parallel", "concurrency", "seq_len")
    )
    reduced_cells = int(result.max_concurrency.size)
    return [
        Row(
            "memory.sweep (full Dataset)",
            f"{size} = {cells / 1e6:.1f} M cells",
            t_sweep,
            f"{cells / t_sweep / 1e6:,.0f} M cells/s",
            {"numpy": t_numpy / t_sweep, "pure Python": t_python / t_sweep},
            f"{nbytes / 1e6:,.0f} MB of outputs; allocate+write bound {t_bound * 1e3:.1f} ms "
            f"({nbytes / t_bound / 1e9:.1f} GB/s): sweep = {t_sweep / t_bound:.2f}x the bound",
        ),
        Row(
            "memory.max_concurrency (reduced)",
            f"{reduced_cells:,} cells, no concurrency grid",
            t_reduced,
            f"{reduced_cells / t_reduced / 1e6:,.2f} M cells/s",
            {"numpy (materialised grid)": t_numpy_reduced / t_reduced},
            f"kernel alone {t_kernel * 1e3:.2f} ms ({t_numpy_reduced / t_kernel:,.0f}x numpy); "
            "the rest is validation and xarray",
        ),
        Row(
            "MemoryWorksheet: one control change",
            "breakdown sweep + 12 GPUs x 4 TP x 8 seq_len overview",
            t_widget,
            f"{t_widget * 1e3:,.0f} ms to new result and both charts (goal < 150 ms)",
            {},
            "set(gpu=...) then chart(...).to_dict() for the two charts",
        ),
    ]


def _worksheet_interaction() -> float:
    from ..widgets import MemoryWorksheet

    ws = MemoryWorksheet()
    gpus = iter(["H200", "B200", "H100-SXM", "A100-80GB"] * 10)

    def change():
        ws.set(gpu=next(gpus))
        for name in ws.chart_makers:
            ws.chart(name).to_dict()

    return best_time(change, repeat=5)

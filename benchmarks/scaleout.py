"""Scale-out: a memory sweep reduced on the fly on a dask.distributed cluster.

The README's example sweeps 10 models x 12 GPUs x 4 TP x 4,096 concurrencies x 8,192 sequence
lengths (1.6e10 cells; 48 GB as a Dataset) and keeps, per (model, gpu, tensor_parallel),
the share of the (concurrency, seq_len) plane that fits and the most memory a fitting cell uses.
Here the same client code runs on a LocalCluster of this machine (two worker processes, one thread
each) on a grid scaled down to fit the benchmark's time, and reports the throughput and the memory
the workers held (sampled by ``distributed.diagnostics.MemorySampler``) against the size the
Dataset would have had. The result is checked against the same reduction computed in memory on a
slice.
"""

from __future__ import annotations

import time

import numpy as np
import xarray as xr

from . import Row

MODELS = [
    "Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Mixtral-8x7B", "Mixtral-8x22B",
    "Qwen3-8B", "Qwen3-32B", "Qwen3-30B-A3B", "Qwen3-235B-A22B", "DeepSeek-V3",
]  # fmt: skip


def summary(ds: xr.Dataset) -> xr.Dataset:
    """The README's reduction: what fits, and the most memory a fitting cell holds."""
    return xr.Dataset(
        {
            "fits_share": ds.fits.mean(["concurrency", "seq_len"]),
            "peak_bytes": ds.total_bytes.where(ds.fits).max(["concurrency", "seq_len"]),
        }
    )


def _grid(concurrency: int, lengths: int) -> dict:
    from capnb import data

    return {
        "model": MODELS,
        "gpu": data.list_gpus(),
        "tensor_parallel": [1, 2, 4, 8],
        "concurrency": np.arange(1, concurrency + 1),
        "seq_len": np.arange(1, lengths + 1) * 16,
    }


def _dataset_bytes(grid: dict) -> int:
    # what memory.sweep would materialise: 3 float64 over (model, TP, concurrency, seq_len) and
    # the fits flags over all five dims (the small per-cell answers left out)
    m, g, t = len(grid["model"]), len(grid["gpu"]), len(grid["tensor_parallel"])
    c, s = grid["concurrency"].size, grid["seq_len"].size
    return m * t * c * s * 3 * 8 + m * g * t * c * s


def run(quick: bool = False) -> list[Row]:
    import distributed
    from distributed.diagnostics import MemorySampler

    from capnb import memory

    grid = _grid(256 if quick else 2048, 256 if quick else 2048)
    chunks = {"model": 1, "concurrency": 256, "seq_len": 512 if not quick else 256}
    cells = int(np.prod([len(v) for v in grid.values()]))
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        # warm-up: the workers import capnb and load the kernels from the disk cache
        client.run(lambda: __import__("capnb.memory"))
        small = {**grid, "concurrency": grid["concurrency"][:8], "seq_len": grid["seq_len"][:8]}
        summary(memory.sweep(**small, invalid_tensor_parallel="mask", chunks=chunks)).compute()
        idle = sum(client.run(_rss).values())
        sampler = MemorySampler()
        start = time.perf_counter()
        with sampler.sample("sweep", interval=0.05):
            lazy = summary(memory.sweep(**grid, invalid_tensor_parallel="mask", chunks=chunks))
            result = lazy.compute()
        seconds = time.perf_counter() - start
        held = float(sampler.to_pandas()["sweep"].max())
        tasks = len(lazy.__dask_graph__())
    # check: a slice of the grid in memory gives the same reduction
    part = {**grid, "model": grid["model"][:2], "gpu": grid["gpu"][:3]}
    part["concurrency"], part["seq_len"] = grid["concurrency"], grid["seq_len"][:256]
    local = summary(memory.sweep(**part, invalid_tensor_parallel="mask"))
    remote = summary(
        memory.sweep(**part, invalid_tensor_parallel="mask", chunks={"concurrency": 256})
    )
    xr.testing.assert_identical(remote.compute(), local)
    assert result.fits_share.shape == (10, len(grid["gpu"]), 4)
    full = _dataset_bytes(grid)
    size = "x".join(str(len(v)) for v in grid.values())
    return [
        Row(
            "memory.sweep reduced on a LocalCluster",
            f"{size} = {cells:.2e} cells",
            seconds,
            f"{cells / seconds / 1e6:,.0f} M cells/s",
            {},
            f"2 worker processes x 1 thread, chunks {chunks}, {tasks:,} tasks; the Dataset would "
            f"take {full / 1e9:,.1f} GB, the cluster held at most {held / 1e9:.2f} GB "
            f"({idle / 1e9:.2f} GB idle); at this rate the README's 1.6e10 cells take "
            f"{1.6e10 / (cells / seconds) / 60:,.0f} min on this machine",
        )
    ]


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss

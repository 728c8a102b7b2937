"""Capacity benchmark: the SLA search over 64 SLA x 12 GPU x 10 models x 4 TP x 64 seq_len.

The analytic latency curves (e2e P99 and mean e2e over a concurrency grid, one per model x gpu x TP
x seq_len) and the memory limits are computed first and timed on their own. Then the search - safe
concurrency, binding constraint, Little's-law throughput, operating point, latency at the safe
point - is timed on the same inputs in one run:

- the numba kernel (:data:`capnb.kernels.capacity.search`), alone and through
  :func:`capnb.capacity.safe_concurrency` (validation, envelope, xarray);
- numpy broadcasting (``search_numpy``: materialises cells x SLA x concurrency, run in blocks of
  cells so that it fits in memory);
- the pure-Python loop (``search_python_points``: the article's loop over the curve's points, then
  the crossing segment and Little's law), timed on a sample of cells and scaled.

Outputs are checked equal across the three before anything is timed. The goal in issue 3: the
search at least 3x faster than numpy.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from capnb import capacity, data, latency, memory
from capnb.kernels import capacity as kernels

from . import Row, best_time
from .memory import MODELS, TENSOR_PARALLEL, _fill_bound
from .reference import REGISTRY


def _grid(quick: bool) -> dict[str, object]:
    return {
        "model": MODELS[:2] if quick else MODELS,
        "gpu": data.list_gpus()[:3] if quick else data.list_gpus(),
        "tensor_parallel": TENSOR_PARALLEL,
        "seq_len": np.arange(1, (4 if quick else 64) + 1) * 256,
        "sla": np.geomspace(0.5, 600.0, 8 if quick else 64),
    }


def run(quick: bool = False) -> list[Row]:
    grid = _grid(quick)
    workload = latency.workload(data.load_trace("azure-conv-2023"), samples=128)
    cells = dict(grid)
    slas = cells.pop("sla")

    start = time.perf_counter()
    limits = memory.max_concurrency(**cells, invalid_tensor_parallel="mask").max_concurrency
    concurrency = latency.concurrency_grid(int(np.clip(int(limits.max()), 1, 4096)))
    curves = latency.analytic(
        **cells, workload=workload, concurrency=concurrency, metrics=["e2e"], quantiles=[0.99],
        invalid_tensor_parallel="mask",
    )  # fmt: skip
    t_curves = time.perf_counter() - start
    flat = latency.envelope(curves)
    p99 = flat.latency.sel(metric="e2e", latency_quantile=0.99)
    mean = flat.mean_latency.sel(metric="e2e")
    lat = p99.transpose("model", "gpu", "tensor_parallel", "seq_len", "concurrency").values
    e2e = mean.transpose("model", "gpu", "tensor_parallel", "seq_len", "concurrency").values
    mem = limits.transpose("model", "gpu", "tensor_parallel", "seq_len").values.astype(np.int64)
    conc = concurrency.astype(float)
    n_cells = int(np.prod(mem.shape))
    flat_lat, flat_e2e, flat_mem = lat.reshape(n_cells, -1), e2e.reshape(n_cells, -1), mem.ravel()
    searched = n_cells * slas.size

    def kernel():
        return kernels.search(flat_lat, flat_e2e, conc, slas, flat_mem)

    def numpy_blocks(block=1024):
        parts = [
            REGISTRY["capacity.search"]["numpy"](
                flat_lat[i : i + block],
                flat_e2e[i : i + block],
                conc,
                slas,
                flat_mem[i : i + block],
            )
            for i in range(0, n_cells, block)
        ]
        return [np.concatenate([p[k] for p in parts]) for k in range(5)]

    def step():
        return capacity.safe_concurrency(curves, slas, memory_limit=limits)

    # the three agree before anything is timed
    ours, theirs = kernel(), numpy_blocks()
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, equal_nan=True)
    rng = np.random.default_rng(0)
    sample = rng.choice(n_cells, size=40 if quick else 400, replace=False)
    python_ref = REGISTRY["capacity.search"]["python_points"]
    start = time.perf_counter()
    for i in sample:
        for s, sla in enumerate(slas):
            got = python_ref(
                list(flat_lat[i]), list(flat_e2e[i]), list(conc), float(sla), int(flat_mem[i])
            )
            assert got[0] == ours[0][i, s] and got[1] == ours[1][i, s]
    t_python = (time.perf_counter() - start) / (sample.size * slas.size) * searched
    from_step = step()
    assert np.array_equal(
        from_step.safe_concurrency.transpose(
            "model", "gpu", "tensor_parallel", "seq_len", "sla"
        ).values.reshape(n_cells, -1),
        ours[0],
    )

    t_kernel = best_time(kernel)
    t_numpy = best_time(numpy_blocks, repeat=2)
    t_step = best_time(step)
    shapes = [(v.shape, v.dtype) for v in from_step.data_vars.values()]
    nbytes = sum(int(np.prod(s)) * d.itemsize for s, d in shapes)
    t_bound = _fill_bound(shapes)

    def analytic():
        return latency.analytic(
            **cells, workload=workload, concurrency=concurrency, metrics=["e2e"],
            quantiles=[0.99], invalid_tensor_parallel="mask",
        )  # fmt: skip

    t_analytic = best_time(analytic, repeat=1, warmup=0)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        t_kernel_one = best_time(kernel)
        t_analytic_one = best_time(analytic, repeat=1, warmup=0)
    finally:
        numba.set_num_threads(threads)
    feasible = np.isin(ours[1], [0, 1, 2]).mean()
    size = "x".join(
        str(len(grid[d])) for d in ("sla", "gpu", "model", "tensor_parallel", "seq_len")
    )
    rows = [
        Row(
            "capacity search (kernel)",
            f"{size} = {searched / 1e6:.2f} M cell-SLAs, {conc.size} concurrencies each",
            t_kernel,
            f"{searched / t_kernel / 1e6:,.1f} M cell-SLAs/s",
            {
                "numpy": t_numpy / t_kernel,
                "pure Python": t_python / t_kernel,
                f"1 -> {threads} threads": t_kernel_one / t_kernel,
            },
            f"{feasible:.0%} feasible; numpy in blocks of 1,024 cells (it materialises "
            "cells x SLA x concurrency)",
        ),
        Row(
            "capacity.safe_concurrency (step)",
            f"{searched / 1e6:.2f} M cell-SLAs",
            t_step,
            f"{searched / t_step / 1e6:,.1f} M cell-SLAs/s",
            {"numpy (search only)": t_numpy / t_step},
            f"with validation, monotone envelope and xarray; the Dataset is {nbytes / 1e6:,.0f} MB "
            f"(binding labels {from_step.binding.nbytes / 1e6:,.0f} MB of it): allocate+write "
            f"bound {t_bound * 1e3:.1f} ms, step = {t_step / t_bound:.2f}x the bound (goal 1.2x)",
        ),
        Row(
            "latency.analytic (curves for the sweep)",
            f"{n_cells:,} curves x {conc.size} concurrencies, 128-request Azure conv workload",
            t_analytic,
            f"{n_cells * conc.size / t_analytic / 1e6:,.2f} M curve points/s, "
            f"{t_analytic / (n_cells * conc.size) * 1e6:.2f} us a point",
            {f"1 -> {threads} threads": t_analytic_one / t_analytic},
            "e2e P99 + mean; computed once per grid, not per SLA (with the memory limits first: "
            f"{t_curves:.1f} s)",
        ),
    ]
    if quick:
        return rows
    start = time.perf_counter()
    small = {k: v for k, v in grid.items()}
    small["seq_len"] = grid["seq_len"][:4]
    sweep = capacity.sweep(**small, workload=workload, target_qps=10.0)
    t_sweep = time.perf_counter() - start
    rows.append(
        Row(
            "capacity.sweep (end to end, target and cheapest)",
            f"{'x'.join(str(sweep.sizes[d]) for d in ('sla', 'gpu', 'model', 'tensor_parallel', 'seq_len'))}",
            t_sweep,
            f"{sweep.safe_concurrency.size / t_sweep / 1e3:,.0f} k cell-SLAs/s",
            {},
            "analytic curves dominate; see the row above",
        )
    )
    return rows

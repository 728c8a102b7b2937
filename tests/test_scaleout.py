"""Scale-out: sweeps on dask give the in-memory answer, from dask's threads too."""

import subprocess
import sys
import textwrap

import numpy as np
import xarray as xr

from capnb import data, forecast, latency, memory
from capnb.kernels import _lazy

GRID = {
    "model": ["Llama-3.1-8B", "Llama-3.1-70B", "DeepSeek-V3"],
    "gpu": ["L4", "H100-SXM", "MI300X"],
    "tensor_parallel": [1, 2, 8],
    "seq_len": [1024, 8192, 32768],
}


def test_max_concurrency_on_a_dask_cluster_matches_in_memory(dask_client):
    plain = memory.max_concurrency(**GRID, invalid_tensor_parallel="mask")
    lazy = memory.max_concurrency(
        **GRID, invalid_tensor_parallel="mask", chunks={"model": 1, "seq_len": 2}
    )
    assert lazy.max_concurrency.chunks is not None
    xr.testing.assert_identical(lazy.compute(), plain)


def test_a_memory_sweep_reduces_on_the_fly_on_a_cluster(dask_client):
    # the pattern of the README's sweep that does not fit in memory: reduce each block as it is
    # made, never the whole grid at once
    grid = {**GRID, "concurrency": np.arange(1, 257), "seq_len": np.arange(1, 65) * 512}
    chunks = {"model": 1, "concurrency": 64, "seq_len": 16}

    def summary(ds):
        # the peak over what fits, NaN where nothing does: a block where nothing fits is reduced
        # as zeros (a max of an all-NaN block warns in the dask worker, and warnings are errors)
        dims = ["concurrency", "seq_len"]
        peak = ds.total_bytes.where(ds.fits, 0).max(dims).where(ds.fits.any(dims))
        return xr.Dataset({"fits_share": ds.fits.mean(dims), "peak_bytes": peak})

    plain = summary(memory.sweep(**grid, invalid_tensor_parallel="mask"))
    lazy = summary(memory.sweep(**grid, invalid_tensor_parallel="mask", chunks=chunks))
    assert lazy.fits_share.chunks is not None
    xr.testing.assert_identical(lazy.compute(), plain)


def test_analytic_curves_on_a_cluster_are_identical_to_in_memory(dask_client):
    workload = latency.workload(data.load_trace("azure-conv-2023"), samples=32)
    args = (["Llama-3.1-8B", "Qwen3-8B"], ["A100-80GB", "H100-SXM", "L40S"], [1, 2])
    kw = {"workload": workload, "seq_len": [1024, 8192], "concurrency": [1, 8, 64]}
    plain = latency.analytic(*args, **kw)
    lazy = latency.analytic(*args, **kw, chunks={"gpu": 1, "seq_len": 1})
    xr.testing.assert_identical(lazy.compute(), plain)


def test_monte_carlo_on_a_cluster_is_identical_to_in_memory(dask_client):
    series = data.load_rate_series("servegen-m-large")
    base = forecast.fit_baseline(series)
    plain = forecast.simulate(series, base, trials=120, seed=5)
    xr.testing.assert_identical(
        forecast.simulate(series, base, trials=120, seed=5, chunks=50), plain
    )


_THREADS_ON_WORKQUEUE = """
import dask, numpy as np, numba, xarray as xr
from capnb import data, elasticity, forecast
from capnb.kernels import _lazy

rate = 20 + 15 * np.sin(np.arange(120_000) * 2 * np.pi / 17_280)
grid = {"cooldown_s": [0, 300, 900, 1800], "min_instances": [1, 2, 4, 8, 16],
        "scale_up_threshold": [0.5, 0.6, 0.7, 0.8]}
assert 20 * rate.size >= _lazy.PARALLEL_MIN_WORK  # each chunk is split over threads too
plain = elasticity.sweep(rate, step_s=5, per_instance_qps=5, policy="hpa", **grid)
series = data.load_rate_series("servegen-m-large")
base = forecast.fit_baseline(series)
months = forecast.simulate(series, base, trials=200, seed=3)
with dask.config.set(scheduler="threads", num_workers=4):
    lazy = elasticity.sweep(rate, step_s=5, per_instance_qps=5, policy="hpa",
                            chunks={"scale_up_threshold": 1}, **grid)
    xr.testing.assert_identical(lazy.compute(), plain)
    xr.testing.assert_identical(forecast.simulate(series, base, trials=200, seed=3, chunks=25),
                                months)
print(numba.threading_layer())  # numba.get_num_threads (threads_for) starts the layer
"""


def test_dask_threads_get_the_in_memory_answer_on_the_workqueue_layer():
    # numba's workqueue layer aborts the process on concurrent parallel launches; capnb's kernels
    # never launch one (they split work over plain threads), so dask's threads are safe on it
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_THREADS_ON_WORKQUEUE)],
        capture_output=True,
        text=True,
        env={"NUMBA_THREADING_LAYER": "workqueue", "PATH": "/usr/bin:/bin"},
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "workqueue"


def test_threaded_gufunc_is_identical_for_one_and_two_threads():
    import numba

    workload = latency.workload(data.load_trace("azure-conv-2023"), samples=16)
    args = (["Llama-3.1-8B", "Qwen3-8B", "Llama-3.1-70B"], ["L4", "H100-SXM"], [1, 2, 4])
    kw = {"workload": workload, "seq_len": [512, 4096, 16384], "concurrency": [1, 4, 32]}
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = latency.analytic(*args, **kw, invalid_tensor_parallel="mask")
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = latency.analytic(*args, **kw, invalid_tensor_parallel="mask")
    finally:
        numba.set_num_threads(before)
    xr.testing.assert_identical(one, two)


def test_a_memory_sweep_written_by_threads_is_identical_to_one_thread(monkeypatch):
    import numba

    monkeypatch.setattr(_lazy, "PARALLEL_MIN_WORK", 100_000)  # thread this small grid
    grid = {**GRID, "concurrency": np.arange(1, 257), "seq_len": np.arange(1, 65) * 512}
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = memory.sweep(**grid, invalid_tensor_parallel="mask")
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = memory.sweep(**grid, invalid_tensor_parallel="mask")
    finally:
        numba.set_num_threads(before)
    assert one.fits.size >= _lazy.PARALLEL_MIN_WORK  # both kernels ran threaded
    xr.testing.assert_identical(one, two)

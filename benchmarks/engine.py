"""Engine benchmark: a 64-point closed-loop curve of 2,000 requests a point (goal: under 1 s, warm).

:func:`capnb.latency.engine` for Llama-3.1-8B on one H100-SXM with the Azure conversation trace's
length distribution, concurrency 1 to 512 (64 points; max_num_seqs 256, so the curve passes its
knee). Timed warm (compiled, cached): the whole call, then the kernel alone on one thread, and the
plain-Python reference simulator on a small case, scaled per simulated step.
"""

from __future__ import annotations

import os
import time

import numba
import numpy as np

from capnb import data, latency
from capnb.latency import _engine

from . import Row, best_time
from .reference.engine import simulate_python


def run(quick: bool = False) -> list[Row]:
    requests = 200 if quick else 2000
    points = 8 if quick else 64
    w = latency.workload(data.load_trace("azure-conv-2023"))
    grid = np.unique(np.round(np.geomspace(1, 512, points)).astype(np.int64))
    while grid.size < points:  # geomspace repeats small integers: fill with the next ones
        grid = np.unique(np.concatenate([grid, [grid.max() + 1]]))

    h100 = latency.Deployment("Llama-3.1-8B", "H100-SXM", 1)

    def call():
        return latency.engine(h100, w, concurrency=grid, requests=requests)

    curve = call()  # compile (or load from the cache)
    t_curve = best_time(call, repeat=3, warmup=1)
    cpu_start = time.process_time()
    call()
    t_cpu = time.process_time() - cpu_start  # every thread's CPU time: the machine may be shared
    load = os.getloadavg()[0]
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        t_one = best_time(call, repeat=1, warmup=0)
        cpu_one = []  # the goal: CPU time of one thread, best of 3
        for _ in range(1 if quick else 3):
            cpu_start = time.process_time()
            call()
            cpu_one.append(time.process_time() - cpu_start)
    finally:
        numba.set_num_threads(threads)

    # the reference on a small case: seconds per simulated step, against the kernel's
    prompt, output, _ = _engine.sample_requests(w, 100, 0)
    spec_args = _reference_args(prompt, output)
    start = time.perf_counter()
    ref = simulate_python(**spec_args)
    t_ref = time.perf_counter() - start
    kernel_steps = float(curve.steps.sum())
    per_step_kernel = t_curve / kernel_steps
    per_step_ref = t_ref / ref["steps"]
    return [
        Row(
            "latency.engine (64-point curve)",
            f"{grid.size} concurrencies 1-512 x {requests:,} requests (Azure conv lengths)",
            t_curve,
            f"{kernel_steps / t_curve / 1e6:,.2f} M steps/s; knee at concurrency "
            f"{float(curve.knee):.0f}",
            {
                "1 thread": t_one / t_curve,
                "Python reference (per step)": per_step_ref / per_step_kernel,
            },
            f"goal < 1 s warm, CPU time of one thread {min(cpu_one):.2f} s"
            f": {'met' if min(cpu_one) < 1.0 else 'NOT met'}; {numba.get_num_threads()} numba "
            f"threads; CPU time {t_cpu:.2f} s over all threads; load average {load:.1f} during the "
            "run",
        )
    ]


def _reference_args(prompt, output):
    from capnb.data import load_gpus, load_model
    from capnb.latency import calibration as cal
    from capnb.latency import engine_calibration

    spec = load_model("Llama-3.1-8B")
    return dict(
        prompt=prompt, output=output, gaps=np.zeros(prompt.size), cached=np.zeros(prompt.size, np.int64),
        closed=True, load=16, max_num_seqs=256, max_num_batched_tokens=8192, kv_blocks=20000,
        block_size=16, warmup=10, model=cal.model_vector(spec, 1),
        gpu=cal.gpu_vector(load_gpus(["H100-SXM"]), "H100-SXM", spec.weight_dtype), tensor_parallel=1,
        calibration=engine_calibration("H100-SXM").engine_array(),
    )  # fmt: skip

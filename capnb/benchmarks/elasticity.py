"""Autoscaling simulator benchmark: 1,000 policies over 30 days at 5-second steps, per policy family.

The issue's setting: the article's policy and Kubernetes HPA (15-second sync = 3 steps) over 30 days
at 5-second steps (518,400 steps x 1,000 policies = 5.2e8 policy-steps), Knative at 2-second steps
over one day (43,200 steps x 1,000 = 4.3e7). The grid: scale-up threshold 0.5-0.9 (5) x scale-down
window 0-3,600 s (5) x cold start 30-150 s (5) x minimum 1/2/4/8 x buffer 0/2 = 1,000 policies.

Demand is real: ServeGen m-large (14 days of 10-minute rates, repeated to 30 days and held at the
step) and, burstier, the Azure 2023 code trace (57 minutes of requests counted per step, repeated).
For each: the kernel through :func:`capnb.elasticity.sweep` (validation and xarray included) and
alone, against a numpy version vectorised over the 1,000 policies (timed on a slice of the steps
and scaled) and the pure-Python reference (two policies on a slice, scaled). All three are first
checked equal on the slice. The tolerance is 300 s so that no cold start in the grid vetoes the
article's scale-ups: every policy really scales.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from .. import data, elasticity
from ..elasticity._simulate import _kernel_inputs
from ..kernels import autoscale as kernels
from ..kernels.reference import REGISTRY
from . import Row, best_time

GRID = {
    "scale_up_threshold": [0.5, 0.6, 0.7, 0.8, 0.9],
    "cooldown_s": [0, 300, 900, 1800, 3600],
    "cold_start_s": [30, 60, 90, 120, 150],
    "min_instances": [1, 2, 4, 8],
    "buffer_instances": [0, 2],
}
QUICK_GRID = {k: v[:2] for k, v in GRID.items()}
TOLERANCE_S = 300
DAY_S = 86_400


def _demand(source: str, step_s: int, days: float) -> tuple[np.ndarray, float]:
    """Real demand tiled to ``days`` (requests/s per step) and a per-instance QPS that fits it."""
    if source == "servegen":
        one = elasticity.resample_demand(data.load_rate_series("servegen-m-large"), step_s).values
        per_instance_qps = 20.0  # 10-30 instances over the day
    else:
        one = elasticity.resample_demand(data.load_trace("azure-code-2023"), step_s).values
        per_instance_qps = 1.0  # 3 on average, bursts past 30
    n = round(days * DAY_S / step_s)
    return np.ascontiguousarray(np.resize(one, n)), per_instance_qps


def _family(
    policy: str,
    source: str,
    step_s: int,
    days: float,
    grid: dict,
    slice_steps: int,
    python_steps: int,
    options: dict,
) -> list[Row]:
    demand, qps = _demand(source, step_s, days)
    kwargs = {
        "step_s": step_s,
        "per_instance_qps": qps,
        "policy": policy,
        "tolerance_s": TOLERANCE_S,
    }
    # the kernel's inputs as the sweep builds them: validated, the grid in whole steps
    _, config, runs, _ = _kernel_inputs(demand, **kwargs, options=options, **grid)
    kwargs.update(grid, **options)
    n_runs, n_steps = runs.up.size, demand.size
    policy_steps = n_runs * n_steps

    # check before timing: kernel, numpy and pure Python agree on the slice
    part = demand[:slice_steps]
    kernel_part = np.empty((n_runs, len(kernels.METRICS)))
    kernels.simulate_many(part, config, runs, kernel_part)
    numpy_part = REGISTRY["autoscale.simulate"]["numpy"](part, *runs, config)
    np.testing.assert_allclose(kernel_part, numpy_part, rtol=1e-9, atol=1e-6)
    python = REGISTRY["autoscale.simulate"]["python"]
    for i in (0, n_runs - 1):
        want, _ = python(part, *(knob[i] for knob in runs), config)
        np.testing.assert_allclose(
            kernel_part[i], [want[m] for m in kernels.METRICS], rtol=1e-9, atol=1e-6
        )

    metrics = np.empty((n_runs, len(kernels.METRICS)))
    t_kernel = best_time(lambda: kernels.simulate_many(demand, config, runs, metrics))
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        t_one = best_time(lambda: kernels.simulate_many(demand, config, runs, metrics), repeat=2)
    finally:
        numba.set_num_threads(threads)
    t_sweep = best_time(lambda: elasticity.sweep(demand, **kwargs), repeat=2)
    start = time.perf_counter()
    REGISTRY["autoscale.simulate"]["numpy"](part, *runs, config)
    t_numpy = (time.perf_counter() - start) / slice_steps * n_steps
    start = time.perf_counter()
    for i in (0, n_runs - 1):
        python(demand[:python_steps], *(knob[i] for knob in runs), config)
    t_python = (time.perf_counter() - start) / (2 * python_steps) * policy_steps
    scale = f"{metrics[:, kernels.METRICS.index('scale_up_events')].mean():,.0f}"
    size = f"{n_runs:,} policies x {n_steps:,} steps ({step_s} s) = {policy_steps:.2e} policy-steps"
    label = f"{policy} on {source}"
    return [
        Row(
            f"autoscale kernel: {label}",
            size,
            t_kernel,
            f"{policy_steps / t_kernel / 1e6:,.0f} M policy-steps/s",
            {
                "numpy (vectorised over policies)": t_numpy / t_kernel,
                "pure Python": t_python / t_kernel,
                f"1 -> {threads} threads": t_one / t_kernel,
            },
            f"{scale} scale-ups per policy on average; numpy timed on {slice_steps:,} steps, "
            f"Python on 2 x {python_steps:,}, both scaled",
        ),
        Row(
            f"elasticity.sweep: {label}",
            size,
            t_sweep,
            f"{policy_steps / t_sweep / 1e6:,.0f} M policy-steps/s",
            {"numpy": t_numpy / t_sweep, "pure Python": t_python / t_sweep},
            "end to end: validation, grid, kernel, Dataset of 26 variables",
        ),
    ]


def run(quick: bool = False) -> list[Row]:
    grid = QUICK_GRID if quick else GRID
    days = 1.0 if quick else 30.0
    rows = []
    for source in ("servegen", "azure-code"):
        rows += _family(
            "article",
            source,
            5,
            days,
            grid,
            1_000 if quick else 4_000,
            2_000 if quick else 20_000,
            {},
        )
        # HPA's and Knative's references re-scan their windows at every decision (as their
        # specifications read): a shorter slice of steps, scaled
        rows += _family(
            "hpa", source, 5, days, grid, 1_000 if quick else 4_000, 2_000 if quick else 5_000, {}
        )
        rows += _family(
            "knative",
            source,
            2,
            0.25 if quick else 1.0,
            grid,
            1_000 if quick else 4_000,
            1_000 if quick else 2_000,
            {},
        )
    return rows

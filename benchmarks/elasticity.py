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

from capnb import data, elasticity
from capnb.elasticity._simulate import _kernel_inputs
from capnb.kernels import autoscale as kernels

from . import Row, best_time
from .reference import REGISTRY

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


def _worksheet(quick: bool) -> list[Row]:
    """Worksheet 04's sweep, which its cold-start and tolerance controls re-run.

    Every policy over the worksheet's grid on ServeGen m-large's 14 days at 1-s steps (its
    10-minute rates held), cold start 120 s, tolerance 60 s. Each policy's kernel on one thread
    against the numpy reference (checked equal, then timed, on a slice of the steps and scaled),
    and the whole sweep on numba's threads.
    """
    from capnb import forecast as fc
    from capnb.elasticity import POLICIES

    source = data.load_rate_series("servegen-m-large")
    baseline = fc.fit_baseline(fc.resample(source, "10min"), slots="hour_of_day")
    demand = elasticity.prepare_demand(source, 1, baseline=baseline)
    if quick:
        demand = demand.isel(time=slice(0, DAY_S // 8))  # a smoke run: three hours
    ahead = elasticity.forecast_demand(demand, baseline)
    grid = elasticity.policy_grid(
        demand, 20.0, scale_up_threshold=[0.6, 0.7, 0.8], cooldown_s=[300.0, 900.0, 1800.0],
        buffer_instances=[0, 2],
    )  # fmt: skip
    common = {"per_instance_qps": 20.0, "step_s": 1, "tolerance_s": 60.0, "cold_start_s": 120.0}
    part = slice(0, 1_000 if quick else 20_000)
    threads = numba.get_num_threads()
    rows, total = [], 0.0
    for policy in POLICIES:
        given = ahead.values if policy == "predictive" else None
        values, config, runs, forecast = _kernel_inputs(
            demand.values, policy=policy, forecast=given, **common, **grid
        )
        n_runs, n_steps = runs.up.size, values.size
        check = np.empty((n_runs, len(kernels.METRICS)))
        kernels.simulate_many(values[part], config, runs, check, forecast=_cut(forecast, part))
        reference = REGISTRY["autoscale.simulate"]["numpy"]
        start = time.perf_counter()
        want = reference(values[part], *runs, config, _cut(forecast, part))
        t_numpy = (time.perf_counter() - start) / (part.stop - part.start) * n_steps
        np.testing.assert_allclose(check, want, rtol=1e-9, atol=1e-6)
        metrics = np.empty((n_runs, len(kernels.METRICS)))
        numba.set_num_threads(1)
        try:
            args = (values, config, runs, metrics, forecast)
            t_one = best_time(lambda args=args: kernels.simulate_many(*args), repeat=2)
        finally:
            numba.set_num_threads(threads)
        total += t_one
        steps = n_runs * n_steps
        rows.append(
            Row(
                f"autoscale kernel, worksheet 04's sweep: {policy}",
                f"{n_runs} runs x {n_steps:,} steps (1 s) = {steps:.2e} policy-steps",
                t_one,
                f"{steps / t_one / 1e6:,.0f} M policy-steps/s",
                {"numpy (vectorised over runs)": t_numpy / t_one},
                f"one thread; numpy timed on {part.stop:,} steps and scaled",
            )
        )
    t_sweep = best_time(
        lambda: elasticity.sweep(demand, policy=list(POLICIES), forecast=ahead, **common, **grid),
        repeat=2,
    )
    rows.append(
        Row(
            "elasticity.sweep, worksheet 04's sweep: every policy",
            f"{len(POLICIES)} policies x {n_runs} runs x {n_steps:,} steps",
            t_sweep,
            f"kernels {total:.2f} s on one thread",
            {},
            f"end to end on {threads} threads: validation, grid, kernels, one Dataset",
        )
    )
    return rows


def _cut(forecast, part: slice):
    return None if forecast is None else np.ascontiguousarray(forecast[part])


def run(quick: bool = False) -> list[Row]:
    grid = QUICK_GRID if quick else GRID
    days = 0.25 if quick else 30.0
    rows = _worksheet(quick)
    for source in ("servegen", "azure-code"):
        rows += _family(
            "article",
            source,
            5,
            days,
            grid,
            250 if quick else 4_000,
            250 if quick else 20_000,
            {},
        )
        # HPA's and Knative's references re-scan their windows at every decision (as their
        # specifications read): a shorter slice of steps, scaled
        rows += _family(
            "hpa", source, 5, days, grid, 250 if quick else 4_000, 250 if quick else 5_000, {}
        )
        rows += _family(
            "knative",
            source,
            2,
            0.1 if quick else 1.0,
            grid,
            250 if quick else 4_000,
            250 if quick else 2_000,
            {},
        )
    return rows

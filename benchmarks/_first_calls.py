"""One tiny call per kernel, for the compile-time benchmark (:mod:`benchmarks.compile`).

Run in a fresh process: each kernel is called twice with the same tiny arguments and the difference
(compiling, or loading from the on-disk cache) is printed as JSON. Helpers (``@njit`` scalar
functions) compile inside the kernels that call them.
"""

from __future__ import annotations

import json
import time

import numpy as np


def memory():
    from capnb.kernels import memory as k

    w = np.ones((1, 1))
    out = [np.empty((1, 1, 2, 2)) for _ in range(3)]
    yield (
        "memory.footprint",
        lambda: k.footprint(
            w,
            w,
            w * 0,
            np.arange(1, 3),
            np.arange(1, 3),
            0.15,
            1,
            w,
            w * 0,
            np.zeros((1, 1), np.int64),
            *out,
        ),
    )
    yield (
        "memory.fits",
        lambda: k.fits(np.ones((1, 2), np.int64), np.arange(1, 3), np.empty((1, 2, 2), bool)),
    )
    yield (
        "memory.largest_fitting_concurrency",
        lambda: k.largest_fitting_concurrency(1e9, 1e5, 8e10, 1024, 0.15, 0.0, 1, 1.0, 0.0, 0),
    )
    yield (
        "memory.smallest_fitting_tensor_parallel",
        lambda: k.smallest_fitting_tensor_parallel(
            np.ones((1, 2)),
            np.ones((1, 2)),
            np.zeros((1, 2)),
            np.array([1, 2]),
            np.ones(1) * 8e10,
            np.array([1024]),
            0.15,
            1,
            np.ones(1),
            np.zeros(1),
            np.zeros(1, np.int64),
            np.empty((1, 1, 1), np.int64),
        ),
    )


def latency():
    from capnb.kernels import latency as k

    v = np.arange(1.0, 5.0)
    yield "latency.monotone_envelope", lambda: k.monotone_envelope(v)
    yield "latency.interpolate", lambda: k.interpolate(v, v, v)
    model, gpu, cal = np.ones(len(k.MODEL_FIELDS)), np.ones(3), np.ones(6)
    yield "latency.step_seconds", lambda: k.step_seconds(True, 1.0, 10.0, model, gpu, 1, cal)
    yield "latency.step_features", lambda: k.step_features(True, 1.0, 10.0, model, gpu, 1, cal)
    yield (
        "latency.analytic_curve",
        lambda: k.analytic_curve(
            model * 1e9,
            gpu * 1e12,
            1,
            np.array([0.5, 0.5, 0.5, 1e-3, 1e-4, 1e-5]),
            v * 100,
            v * 10,
            v,
            np.array([0, 3]),
            np.array([0.99]),
        ),
    )


def capacity():
    from capnb.kernels import capacity as k

    v = np.arange(1.0, 5.0)
    yield "capacity.search", lambda: k.search(v, v, v, np.array([2.0]), 3)
    yield "capacity.two_smallest", lambda: k.two_smallest(v)


def forecast():
    # runs and slot statistics are numpy (nothing to compile); binning and the months are numba
    from capnb.kernels import forecast as k
    from capnb.kernels import months as mk

    z = np.zeros(4)
    yield (
        "forecast.bin_requests",
        lambda: k.bin_requests(
            np.arange(4, dtype=np.int64), z, z, 0, 2, z.copy(), z.copy(), z.copy()
        ),
    )

    base, cls, ends, noise = np.ones(60), np.zeros(60, np.int64), np.full(60, 60), np.ones(3)
    starts, sizes = np.zeros(60, np.int64), np.full(60, 3)
    peak, total, counts = np.empty(2), np.empty(2), np.zeros((1, 3), np.int64)
    key = (np.uint64(0), np.uint64(0))
    yield (
        "months.quiet_months",
        lambda: mk.quiet_months(
            *key, 0, 2, base, cls, ends, noise, starts, sizes, 10, peak, total, counts
        ),
    )
    yield (
        "months.burst_months",
        lambda: mk.burst_months(
            *key,
            0,
            base,
            ends,
            noise,
            starts,
            sizes,
            10,
            1.0,
            10.0,
            20.0,
            2.0,
            3.0,
            0.0,
            1.0,
            peak,
            total,
            np.empty(2),
            np.empty(2),
            np.zeros(5, np.int64),
        ),
    )
    yield (
        "months.bin_counts",
        lambda: mk.bin_counts(np.ones((1, 3)), counts, 0.0, 1.0, np.zeros(5, np.int64)),
    )


def elasticity():
    from capnb.elasticity._policy import build_config
    from capnb.kernels import autoscale as k

    demand = np.full(50, 10.0)
    runs = k.Run.grid(0.7, 6, 6, 1, 0)
    metrics = np.empty((1, len(k.METRICS)))
    # one compiled loop serves every policy (the policy is a runtime code in the config)
    config = build_config(
        "knative",
        step_s=1.0,
        per_instance_qps=5.0,
        tolerance_s=60.0,
        max_instances=10,
        thrash_window_s=900.0,
        options={},
    )
    yield "autoscale.simulate_many", lambda: k._runs_serial(demand, config, runs, metrics)
    run, timeline = k.Run.of(up=0.7, cooldown=6, cold=6, low=1, buffer=0), k.Timeline.empty(50)
    # the timeline path runs the same compiled loop (a grid of one run): nothing more to compile
    yield (
        "autoscale.simulate (timeline)",
        lambda: k.simulate(demand, config, run, metrics[0], timeline),
    )


GROUPS = {g.__name__: g for g in (memory, latency, capacity, forecast, elasticity)}


def main(groups: str = "") -> None:
    """Print each kernel's first-call minus second-call time (s) as JSON.

    ``groups``: comma-separated step names (default: every step's kernels).
    """
    out = {}
    for group in [GROUPS[g] for g in groups.split(",")] if groups else GROUPS.values():
        for name, call in group():
            start = time.perf_counter()
            call()
            first = time.perf_counter() - start
            start = time.perf_counter()
            call()
            second = time.perf_counter() - start
            out[name] = first - second
    print(json.dumps(out))

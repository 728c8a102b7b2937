"""The autoscaling kernel against an earlier version of itself, timed in one run.

``python -m capnb.benchmarks.kernel_split BEFORE [--check N] [--repeat N] [--compile N]``

``BEFORE`` is a directory holding an earlier ``autoscale.py`` and ``autoscale_rules.py`` (with its
``autoscale_loop.py`` if it has one, and ``autoscale_records.py`` if it differs), e.g. the one-body
loop from before issue 32::

    mkdir -p /tmp/before && for f in autoscale autoscale_rules; do
        git show 8813808:capnb/kernels/$f.py > /tmp/before/$f.py; done
    python -m capnb.benchmarks.kernel_split /tmp/before --check 300 --repeat 21 --compile 5

``--check N`` first runs both kernels on ``N`` random cases (every policy and option, preemptions,
forecasts, as the tests draw them) and compares their results bit for bit. Then both kernels run
in this one process on one thread, interleaved (each round alternates which goes first), timed as
CPU time (``time.process_time``): worksheet 04's sweep (every policy over its grid of 90 runs on
ServeGen m-large's 14 days at 1-s steps) and one long run with its timeline per policy, their
metrics and timelines checked equal (``np.array_equal``) before the timed rounds. ``--compile N``
times each kernel's first call (compiling every function of the loop into an empty numba cache)
in ``N`` fresh processes each, alternating, as the first call's CPU time minus the second's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_BEFORE_PACKAGE = "capnb_kernel_before"


def load_before(directory: str | Path, into: str | Path):
    """The earlier kernel in ``directory`` as a package copied under ``into``: its module ``autoscale``.

    Its relative imports of files it does not hold point at capnb's own (``_lazy``, and the records
    unless given).
    """
    package = Path(into) / _BEFORE_PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    given = {p.stem for p in Path(directory).glob("autoscale*.py")}
    if not {"autoscale", "autoscale_rules"} <= given:
        raise SystemExit(f"{directory} must hold autoscale.py and autoscale_rules.py")
    (package / "__init__.py").write_text("")
    for name in given:
        text = (Path(directory) / f"{name}.py").read_text()
        for module in ("_lazy", "autoscale_records"):
            if module not in given:
                text = text.replace(f"from .{module} import", f"from capnb.kernels.{module} import")
        (package / f"{name}.py").write_text(text)
    sys.path.insert(0, str(into))
    return importlib.import_module(f"{_BEFORE_PACKAGE}.autoscale")


def _inputs():
    """Worksheet 04's sweep per policy: ``{policy: (demand, config, runs, forecast)}``."""
    from .. import data, elasticity
    from .. import forecast as fc
    from ..elasticity._simulate import _kernel_inputs

    source = data.load_rate_series("servegen-m-large")
    baseline = fc.fit_baseline(fc.resample(source, "10min"), slots="hour_of_day")
    demand = elasticity.prepare_demand(source, 1, baseline=baseline)
    ahead = elasticity.forecast_demand(demand, baseline)
    grid = elasticity.policy_grid(
        demand, 20.0, scale_up_threshold=[0.6, 0.7, 0.8], cooldown_s=[300.0, 900.0, 1800.0],
        buffer_instances=[0, 2],
    )  # fmt: skip
    common = {"per_instance_qps": 20.0, "step_s": 1, "tolerance_s": 60.0, "cold_start_s": 120.0}
    inputs = {}
    for policy in elasticity.POLICIES:
        given = ahead.values if policy == "predictive" else None
        inputs[policy] = _kernel_inputs(
            demand.values, policy=policy, forecast=given, **common, **grid
        )
    return inputs


def _one_run(kernel, demand, config, runs, forecast):
    """The grid's middle run with its timeline: ``(seconds, metrics, timeline)``."""
    i = runs.up.size // 2
    run = kernel.Run(*(knob[i].item() for knob in runs))
    metrics = np.empty(len(kernel.METRICS))
    timeline = kernel.Timeline.empty(demand.size)
    for series in timeline:  # its pages mapped before the clock starts, for either kernel alike
        series.fill(0)
    start = time.process_time()
    kernel.simulate(demand, config, run, metrics, timeline, forecast)
    return time.process_time() - start, metrics, timeline


def _sweep(kernel, demand, config, runs, forecast):
    """The grid's runs, metrics only: ``(seconds, metrics)``."""
    metrics = np.empty((runs.up.size, len(kernel.METRICS)))
    start = time.process_time()
    kernel.simulate_many(demand, config, runs, metrics, forecast)
    return time.process_time() - start, metrics


def throughput(before, after, repeat: int) -> list[str]:
    """Markdown rows: each policy's policy-steps/s before and after (median of ``repeat``)."""
    import numba

    numba.set_num_threads(1)  # one thread: the sweep's runs in one loop, CPU time is its time
    inputs = _inputs()
    kernels = {"before": before, "after": after}
    times = {(what, policy, k): [] for what in ("sweep", "timeline") for policy in inputs
             for k in kernels}  # fmt: skip
    for r in range(repeat + 1):  # the first round compiles and checks, untimed
        order = list(kernels) if r % 2 == 0 else list(reversed(kernels))
        for policy, args in inputs.items():
            got = {}
            for name in order:
                seconds, metrics = _sweep(kernels[name], *args)
                one_s, one, timeline = _one_run(kernels[name], *args)
                if r:
                    times["sweep", policy, name].append(seconds)
                    times["timeline", policy, name].append(one_s)
                got[name] = (metrics, one, *timeline)
            if r == 0 and not all(
                np.array_equal(a, b) for a, b in zip(got["before"], got["after"], strict=True)
            ):
                raise SystemExit(f"{policy}: the two kernels' results differ")
    rows = [
        "| run | policy | policy-steps | before: M policy-steps/s, median (best) | after | "
        "after / before, median (best) |",
        "|---|---|---|---|---|---|",
    ]
    for what in ("sweep", "timeline"):
        total = {k: np.zeros(repeat) for k in kernels}
        steps_all = 0
        for policy, (demand, _, runs, _) in inputs.items():
            steps = demand.size * (runs.up.size if what == "sweep" else 1)
            steps_all += steps
            for k in kernels:
                total[k] += times[what, policy, k]
            rows.append(_row(what, policy, steps, {k: times[what, policy, k] for k in kernels}))
        rows.append(_row(what, "all", steps_all, total))
    return rows


def _row(what, policy, steps, seconds):
    median = {k: steps / statistics.median(s) / 1e6 for k, s in seconds.items()}
    best = {k: steps / min(s) / 1e6 for k, s in seconds.items()}
    label = "worksheet 04's sweep" if what == "sweep" else "one run with its timeline"
    return (
        f"| {label} | {policy} | {steps:.3g} | {median['before']:,.0f} ({best['before']:,.0f}) | "
        f"{median['after']:,.0f} ({best['after']:,.0f}) | "
        f"{median['after'] / median['before']:.2f} ({best['after'] / best['before']:.2f}) |"
    )


# -- bit for bit: both kernels on a broad grid of random runs ------------------------------------
_BASE = {
    "step_s": 5.0, "per_instance_qps": 10.0, "tolerance_steps": 12, "max_instances": 40,
    "thrash_steps": 12, "period_steps": 3, "scale_down_threshold": 0.3, "hpa_tolerance": 0.1,
    "up_stabilization_steps": 0, "up_pods": 4, "up_percent": 100, "up_period_steps": 3,
    "down_pods": -1, "down_percent": 100, "down_period_steps": 3, "stable_steps": 12,
    "panic_steps": 3, "panic_threshold": 2.0, "max_scale_up_rate": 1000.0,
    "max_scale_down_rate": 2.0,
}  # fmt: skip


def _random_demand(rng, n):
    """Rates as the tests draw them: scattered (zeros, low, high), held in blocks, or a wave."""
    kind = rng.integers(3)
    if kind == 0:
        choice = rng.integers(3, size=n)
        low, high = rng.uniform(0, 40, n), rng.uniform(40, 200, n)
        return np.where(choice == 0, 0.0, np.where(choice == 1, low, high))
    if kind == 1:
        blocks = int(rng.integers(1, 13))
        values = np.where(rng.random(blocks) < 0.2, 0.0, rng.uniform(0, 200, blocks))
        return np.repeat(values, rng.integers(1, max(2, 2 * n // blocks), blocks))
    wave = np.sin(np.arange(n) / n * 2 * np.pi * rng.uniform(1, 4))
    return np.maximum(0.0, 60 + 50 * wave + rng.normal(0, 10, n))


def _random_config(rng, kernel, policy):
    """A config and a run drawn over every option, as ``tests/test_autoscale_kernels.py`` does."""
    from ..elasticity._decision import veto_cold_steps

    low = int(rng.integers(1 if policy == kernel.HPA else 0, 5))
    up_pods, up = int(rng.choice([-1, 0, 2, 4])), float(rng.uniform(0.3, 1.0))
    stable, tolerance = int(rng.integers(1, 21)), int(rng.integers(0, 16))
    fields = _BASE | {
        "per_instance_qps": rng.uniform(2, 30), "step_s": rng.choice([1.0, 2.0, 5.0]),
        "tolerance_steps": tolerance, "max_instances": rng.integers(low, low + 31),
        "thrash_steps": rng.integers(0, 21), "policy": policy,
        "period_steps": rng.integers(1, 6), "scale_down_threshold": rng.uniform(0, up * 0.9),
        "hpa_tolerance": rng.choice([0.0, 0.05, 0.1, 0.2]),
        "up_stabilization_steps": rng.choice([0, 3, 9]), "up_pods": up_pods,
        "up_percent": rng.choice([0, 50, 100, 200] if up_pods < 0 else [-1, 0, 100]),
        "up_period_steps": rng.integers(1, 10), "down_pods": rng.choice([-1, 1, 3]),
        "down_percent": rng.choice([10, 50, 100]), "down_period_steps": rng.integers(1, 10),
        "stable_steps": stable, "panic_steps": rng.integers(1, stable + 1),
        "panic_threshold": rng.choice([1.0, 1.5, 2.0]),
        "max_scale_up_rate": rng.choice([1.5, 10.0, 1000.0]),
        "max_scale_down_rate": rng.choice([1.5, 2.0, 4.0]),
        "veto_cold_steps": veto_cold_steps(tolerance) if rng.random() < 0.8 else rng.integers(20),
    }  # fmt: skip
    run = kernel.Run.of(
        up=up, cooldown=rng.integers(0, 31), cold=rng.integers(0, 13), low=low,
        buffer=rng.integers(0, 3),
    )  # fmt: skip
    return kernel.Config.of(**fields), run


def _random_losses(rng, kernel, n):
    """No preemption, a series of instances lost, or events with marks."""
    draw = rng.random()
    if draw < 0.5:
        return None
    if draw < 0.75:
        return kernel.Losses.of_counts(np.where(rng.random(n) < 0.03, rng.integers(1, 4, n), 0))
    m = int(rng.integers(1, max(2, n // 10)))
    steps = np.sort(rng.integers(0, n, m)).astype(np.int64)
    return kernel.Losses(steps, rng.integers(0, 3, m).astype(np.int64), rng.uniform(-1, 10, m))


def _random_case(rng, kernel, i):
    """Case ``i``: ``(demand, config, run, forecast, losses)``, every policy in turn."""
    policies = (kernel.ARTICLE, kernel.HPA, kernel.KNATIVE, kernel.FIXED, kernel.FIXED_ELASTIC,
                kernel.PREDICTIVE)  # fmt: skip
    policy = policies[i % len(policies)]
    n = int(rng.integers(1, 600) if i % 10 else rng.integers(600, 5000))
    demand = np.ascontiguousarray(_random_demand(rng, n), dtype=np.float64)
    config, run = _random_config(rng, kernel, policy)
    forecast = None
    if policy == kernel.PREDICTIVE:
        forecast = demand * rng.uniform(0.6, 1.4) + rng.normal(0, 5, demand.size)
        forecast = np.ascontiguousarray(np.roll(np.maximum(forecast, 0.0), rng.integers(-30, 30)))
    return demand, config, run, forecast, _random_losses(rng, kernel, demand.size)


def _results(kernel, demand, config, run, forecast, losses, grid):
    """One run's metrics and timeline, and a grid's metrics, by ``kernel``."""
    metrics = np.empty(len(kernel.METRICS))
    timeline = kernel.Timeline.empty(demand.size)
    kernel.simulate(demand, config, run, metrics, timeline, forecast, losses)
    many = np.empty((grid.up.size, len(kernel.METRICS)))
    kernel.simulate_many(demand, config, grid, many, forecast, losses)
    return (metrics, *timeline, many)


def check(before, after, count: int, seed: int = 0) -> str:
    """Both kernels on ``count`` random runs and grids of 12: the arrays that differ (none).

    Each case draws a policy, a demand of 1-5,000 steps, every option of the config, the run's
    knobs, preemptions and (predictive) a forecast; its grid varies the knobs around the run
    (repeated knobs for ``FIXED``). Results are compared with ``np.array_equal``.
    """
    rng = np.random.default_rng(seed)
    compared = differ = 0
    for i in range(count):
        demand, config, run, forecast, losses = _random_case(rng, after, i)
        size = 12
        knobs = (rng.uniform(0.3, 1.0, size), rng.integers(0, 31, size),
                 np.repeat(rng.integers(0, 13, 4), 3), np.full(size, run.low),
                 np.repeat(rng.integers(0, 3, 3), 4))  # fmt: skip
        grid = after.Run.grid(*knobs)
        want = _results(before, demand, config, run, forecast, losses, grid)
        got = _results(after, demand, config, run, forecast, losses, grid)
        compared += len(got)
        differ += sum(not np.array_equal(a, b) for a, b in zip(want, got, strict=True))
    return (
        f"{count} random cases (a run with its timeline and a grid of 12 each): "
        f"{compared} arrays compared with np.array_equal, {differ} differ"
    )


_FIRST_CALL = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[2])
from capnb.elasticity._policy import build_config
import importlib
k = importlib.import_module(sys.argv[1])
demand = np.full(50, 10.0)
config = build_config("knative", step_s=1.0, per_instance_qps=5.0, tolerance_s=60.0,
                      max_instances=10, thrash_window_s=900.0, options={})
runs = k.Run.grid(0.7, 6, 6, 1, 0)
metrics = np.empty((1, len(k.METRICS)))
run, timeline = k.Run.of(up=0.7, cooldown=6, cold=6, low=1, buffer=0), k.Timeline.empty(50)
def call():
    k._runs_serial(demand, config, runs, metrics)
    k.simulate(demand, config, run, metrics[0], timeline)
out = []
for _ in range(2):
    start = time.process_time()
    call()
    out.append(time.process_time() - start)
print(json.dumps(out[0] - out[1]))
"""


def first_compile(into: str | Path, count: int) -> list[str]:
    """Markdown rows: each kernel's first call into an empty cache, then from it, in fresh processes.

    CPU seconds of the first call minus the second: compiling into an empty numba cache (cold), and
    loading what that wrote in a second process (warm).
    """
    seconds = {(name, kind): [] for name in ("before", "after") for kind in ("cold", "warm")}
    modules = {"before": f"{_BEFORE_PACKAGE}.autoscale", "after": "capnb.kernels.autoscale"}
    for r in range(count):
        for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "NUMBA_CACHE_DIR": cache}
                for kind in ("cold", "warm"):
                    out = subprocess.run(
                        [sys.executable, "-c", _FIRST_CALL, modules[name], str(into)],
                        capture_output=True, text=True, check=True, env=env,
                    )  # fmt: skip
                    seconds[name, kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return [
        "| first call (CPU s) | cache | runs | median | each |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {kind} | {count} | {statistics.median(s):.3g} | "
            f"{', '.join(f'{x:.3g}' for x in s)} |"
            for (name, kind), s in seconds.items()
        ),
    ]


def main() -> None:
    """Parse the command line, time both kernels, print the tables."""
    from . import machine

    parser = argparse.ArgumentParser(prog="python -m capnb.benchmarks.kernel_split")
    parser.add_argument(
        "before", help="directory with the earlier autoscale.py, autoscale_rules.py"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--compile", type=int, default=0, help="fresh-process compiles per kernel")
    parser.add_argument("--check", type=int, default=0, help="random cases checked bit for bit")
    args = parser.parse_args()
    into = tempfile.mkdtemp(prefix="capnb-before-")
    try:
        before = load_before(args.before, into)
        from ..kernels import autoscale as after

        print(f"machine: {machine()}\n")
        if args.check:
            print(check(before, after, args.check), "\n")
        if args.repeat:
            print("\n".join(throughput(before, after, args.repeat)), "\n")
        if args.compile:
            print("\n".join(first_compile(into, args.compile)))
    finally:
        shutil.rmtree(into, ignore_errors=True)


if __name__ == "__main__":
    main()

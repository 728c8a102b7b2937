"""The autoscaling loop as named steps: each short, none counting references, each run from scratch."""

import ast
import pathlib

import numba
import numpy as np
import pytest

from capnb import data
from capnb.elasticity import resample_demand
from capnb.elasticity._decision import veto_cold_steps
from capnb.kernels import autoscale as kernels
from capnb.kernels import autoscale_loop as loop

#: Issue 32: a function over ~80 lines holds two ideas.
LONGEST_LINES = 80
#: The loop's functions that allocate, and so count references: they run once per run.
ALLOCATING = {"runs", "new_cohorts", "new_windows"}


def test_every_function_of_the_autoscaling_kernels_is_short():
    folder = pathlib.Path(kernels.__file__).parent
    sizes = {}
    for path in sorted(folder.glob("autoscale*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                sizes[f"{path.name}:{node.lineno} {node.name}"] = node.end_lineno - node.lineno + 1
    assert "autoscale_loop.py" in " ".join(sizes)
    assert {k: v for k, v in sizes.items() if v > LONGEST_LINES} == {}


def test_the_loop_counts_no_references_outside_what_allocates():
    # A step compiled with reference counting pays atomic operations per call on every array it is
    # given (the article's sweep ran 8 times slower), and numba removes them only where it can
    # prove them paired. So each step is compiled without (numba's _nrt=False) or copied by numba
    # into one that is.
    compiled = {
        name: f
        for name, f in vars(loop).items()
        if isinstance(f, numba.core.registry.CPUDispatcher)
        and f.py_func.__module__ == loop.__name__
    }
    assert {"run_one", "full_step", "quiet_stretch", "decide", "serve"} <= set(compiled)
    counting = {
        name
        for name, f in compiled.items()
        if f.targetoptions.get("_nrt", True) and f.targetoptions.get("inline") != "always"
    }
    assert counting == ALLOCATING


def _config(policy, tolerance_steps=12):
    return kernels.Config.of(
        step_s=2.0, per_instance_qps=1.0, tolerance_steps=tolerance_steps, max_instances=60,
        thrash_steps=30, policy=policy, veto_cold_steps=veto_cold_steps(tolerance_steps),
        period_steps=5, scale_down_threshold=0.3, hpa_tolerance=0.1, up_stabilization_steps=10,
        up_pods=4, up_percent=100, up_period_steps=10, down_percent=50, down_period_steps=10,
        stable_steps=30, panic_steps=3, panic_threshold=2.0, max_scale_up_rate=10.0,
        max_scale_down_rate=2.0,
    )  # fmt: skip


@pytest.mark.parametrize(
    "policy",
    [kernels.ARTICLE, kernels.HPA, kernels.KNATIVE, kernels.FIXED_ELASTIC, kernels.PREDICTIVE],
)
def test_each_run_of_a_grid_starts_from_scratch(policy):
    # the state records are made once per range of runs and set again by each run: a grid of
    # runs gives, bit for bit, what each run gives alone (with its timeline)
    demand = np.ascontiguousarray(
        resample_demand(data.load_trace("azure-code-2023"), 2.0).values[:1500]
    )
    forecast = np.ascontiguousarray(np.convolve(demand, np.ones(15) / 15, mode="same"))
    losses = kernels.Losses.of_counts(np.isin(np.arange(demand.size), [200, 900]).astype(int))
    cfg = _config(policy)
    grid = kernels.Run.grid(
        [0.9, 0.5, 0.7, 0.6], [0, 40, 10, 20], [15, 1, 30, 5], [1, 3, 2, 1], [0, 1, 0, 2]
    )
    together = np.empty((4, len(kernels.METRICS)))
    kernels._runs_serial(demand, cfg, grid, together, forecast, losses)
    for i in range(4):
        alone = np.empty(len(kernels.METRICS))
        timeline = kernels.Timeline.empty(demand.size)
        run = kernels.Run(*(knob[i].item() for knob in grid))
        kernels.simulate(demand, cfg, run, alone, timeline, forecast, losses)
        np.testing.assert_array_equal(together[i], alone)
    assert together[:, kernels.METRICS.index("instances_started")].min() > 0  # runs that scale
    assert together[:, kernels.METRICS.index("preempted")].max() > 0

"""The autoscaling simulator against the request-level SimPy model that cross-checks it.

The model lives with its test (``tests/test_crosscheck_simpy.py``: it is test code, and SimPy is a
test dependency), so this benchmark runs from a source checkout with the ``test`` extra installed.
Both run the same deployment (Llama-2-7B on an A100-80GB at P99 ITL <= 30 ms, 65 s cold start) and
policy on one ServeGen m-large day as Poisson arrivals (1,000,000 requests; ``--quick``: 100,000)
and on the Azure 2023 code trace; the test asserts that they agree, this only times them.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

from . import Row, best_time

_MODEL = Path(__file__).resolve().parents[1] / "tests" / "test_crosscheck_simpy.py"


def _model():
    if not _MODEL.is_file():
        raise RuntimeError(
            f"the SimPy model is test code ({_MODEL.name}); run this benchmark from a source "
            "checkout of capnb (the repository's root)"
        )
    if importlib.util.find_spec("simpy") is None:
        raise RuntimeError("the SimPy model needs SimPy: pip install -e '.[test]'")
    spec = importlib.util.spec_from_file_location("capnb_crosscheck_model", _MODEL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run(quick: bool = False) -> list[Row]:
    model = _model()
    deployment = model.deployment()
    requests = 100_000 if quick else 1_000_000
    cases = [
        ("ServeGen m-large day", *model.servegen_day(requests), "hpa"),
        ("Azure code 2023", *model.trace_arrivals("azure-code-2023"), "hpa"),
    ]
    rows = []
    for label, arrivals, n_steps, scenario in cases:
        args = (arrivals, n_steps, scenario, deployment)
        highest = int(model.run_flows(*args).attrs["max_instances"])  # also compiles the kernel
        flows_s = best_time(lambda args=args: model.run_flows(*args))
        start = time.perf_counter()
        model.run_events(*args, highest=highest)
        events_s = time.perf_counter() - start
        rows.append(
            Row(
                f"elasticity.simulate vs SimPy requests: {scenario} on {label}",
                f"{arrivals.size:,} requests, {n_steps:,} steps (5 s)",
                flows_s,
                f"{n_steps / flows_s / 1e6:,.2f} M steps/s",
                {"SimPy request-level model": events_s / flows_s},
                f"SimPy {events_s:,.1f} s ({arrivals.size / events_s / 1e3:,.0f} k requests/s); "
                "SimPy timed once; agreement asserted in tests/test_crosscheck_simpy.py",
            )
        )
    return rows

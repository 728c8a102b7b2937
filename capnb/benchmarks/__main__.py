"""``python -m capnb.benchmarks [step ...] [--quick]``: run the benchmark suite and print its table."""

from __future__ import annotations

import argparse
import datetime
import importlib
from pathlib import Path

from . import machine, table

STEPS = (
    "forecast", "memory", "prefix", "capacity", "engine", "elasticity", "backtest", "held_out",
    "worksheets", "scaleout",
    "compile", "crosscheck", "startup", "report", "browser",
)  # fmt: skip


#: What each step's table measures, one sentence each (BENCHMARKS.md's words between the tables).
ABOUT = {
    "forecast": "Reading, resampling and slot statistics of traces against pyarrow, numpy and pandas.",
    "memory": "The memory sweep and its closed form against numpy.",
    "prefix": "Prefix-cache hit rates by stack distance against an OrderedDict LRU per size.",
    "capacity": "The safe-concurrency search and the capacity sweep against numpy.",
    "engine": "The serving-engine simulation: one curve, and a curve of many points.",
    "elasticity": "The autoscaling simulator against its numpy and Python references.",
    "backtest": "A plan built on one week and replayed on the next.",
    "held_out": "The plan's policy chosen by rolling origins (goal: under 60 s warm), and the whole plan.",
    "worksheets": "Each worksheet's controls, headless (the step calls behind a redraw).",
    "scaleout": "The memory and capacity sweeps on dask, against one process.",
    "compile": "First-call compile times of the numba kernels.",
    "crosscheck": "The simulator against a request-level SimPy model.",
    "startup": "Import time of capnb and its steps.",
    "report": "`capnb report` on the bundled defaults.",
    "browser": "Each worksheet control's redraw in JupyterLab, in chromium (answer and charts).",
}


def main() -> None:
    """Parse the command line and run the chosen steps' benchmarks."""
    parser = argparse.ArgumentParser(prog="python -m capnb.benchmarks")
    parser.add_argument(
        "steps", nargs="*", help=f"steps to run, of {', '.join(STEPS)} (default: all)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="small grids: a smoke run, not figures"
    )
    parser.add_argument(
        "--write",
        metavar="BENCHMARKS.md",
        help="write the tables as this file (the current figures)",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    steps = args.steps or STEPS
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"machine: {machine()}\n")
    sections = []
    for step in steps:
        module = importlib.import_module(f"{__package__}.{step}")
        print(f"## {step}\n")
        text = table(module.run(quick=args.quick))
        print(text + "\n")
        sections.append(f"## {step}\n\n{ABOUT.get(step, '')}\n\n{text}\n")
    if args.write:
        from ..data import write_atomic

        command = "python -m capnb.benchmarks " + " ".join(args.steps) + (" --quick" * args.quick)
        head = (
            "# Benchmarks\n\nThe current figures, written by `"
            + command.strip()
            + f" --write BENCHMARKS.md` on {started} (earlier rounds are in git's history). Each "
            "kernel is timed on fixed, seeded inputs against the best plain implementation of the "
            "same computation (numpy, pyarrow, pandas) in the same run, after checking their results "
            "equal; best of several repeats after a warm-up unless a row says otherwise. Speed is never "
            "asserted in a test.\n\n"
            f"**Machine**: {machine()}. A shared 2-core VM: absolute figures move by 20-50 % between "
            "runs an hour apart; ratios within one run are steadier.\n\n"
        )
        write_atomic(Path(args.write), head + "\n".join(sections))


if __name__ == "__main__":
    main()

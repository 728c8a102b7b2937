"""``python -m benchmarks [step ...] [--quick] [--write BENCHMARKS.md]``: run the benchmark suite.

Each step prints its full table; ``--write`` writes the short tables as BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import re
from pathlib import Path

import benchmarks
from capnb.data import write_atomic

from . import brief_table, machine, table

STEPS = (
    "forecast", "memory", "prefix", "capacity", "engine", "elasticity", "backtest", "held_out",
    "worksheets", "scaleout",
    "compile", "crosscheck", "startup", "report", "browser",
)  # fmt: skip


#: What each step's table measures and against what, one sentence each (BENCHMARKS.md's line above
#: each table).
ABOUT = {
    "forecast": "Reading, resampling and slot statistics of traces against pyarrow, numpy and pandas.",
    "memory": "The memory sweep and its closed form against numpy.",
    "prefix": "Prefix-cache hit rates by stack distance against an OrderedDict LRU per size.",
    "capacity": "The safe-concurrency search and the capacity sweep against numpy.",
    "engine": "The serving-engine simulation (one curve, and a curve of many points) against Python.",
    "elasticity": "The autoscaling simulator against its numpy and Python references.",
    "backtest": "A plan built on one week and replayed on the next, end to end (its time alone).",
    "held_out": "The plan's policy chosen by rolling origins, and the whole plan, against 60 s warm.",
    "worksheets": "Each worksheet's controls headless (the step calls behind a redraw), against 150 ms.",
    "scaleout": "The memory and capacity sweeps on dask, against one process.",
    "compile": "First-call compile times of the numba kernels, a cold cache against a warm one.",
    "crosscheck": "The autoscaling simulator against a request-level SimPy model.",
    "startup": "Import time of capnb and its steps, against importing its heavy libraries.",
    "report": "`capnb report` on the bundled defaults, a cold kernel cache against a warm one.",
    "browser": "Each worksheet control's redraw in JupyterLab in chromium, against its goal.",
}

#: What the machine note says beside the machine's own line.
SHARED = (
    "A VM shared with other jobs while the command ran (load average {load:.1f} over the last "
    "minute when this file was written): absolute figures move by 20-50 % between runs an hour "
    "apart; ratios within one run are steadier."
)


def main() -> None:
    """Parse the command line and run the chosen steps' benchmarks."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument(
        "steps", nargs="*", help=f"steps to run, of {', '.join(STEPS)} (default: all)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="small grids: a smoke run, not figures"
    )
    parser.add_argument(
        "--write",
        metavar="BENCHMARKS.md",
        help="write the current tables as this file, after each step (run from the repository's root)",
    )
    args = parser.parse_args()
    # a benchmark times building plans, never reading one back from the test suite's plan cache
    os.environ.pop("CAPNB_PLAN_CACHE", None)
    benchmarks.SMOKE = args.quick
    unknown = sorted(set(args.steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    steps = args.steps or STEPS
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"machine: {machine()}\n")
    sections = []
    old = None
    if args.write and args.steps and Path(args.write).is_file():
        old = Path(args.write).read_text(encoding="utf-8")
    for step in steps:
        module = importlib.import_module(f"{__package__}.{step}")
        print(f"## {step}\n")
        rows = module.run(quick=args.quick)
        print(table(rows) + "\n")
        sections.append(section(step, rows, args.quick))
        if args.write:  # after each step: a run stopped part-way leaves what it measured, said so
            path = Path(args.write)
            if args.steps and old is not None:  # some steps: their sections replace the file's
                text = merged(old, args, started, sections)
            else:
                text = document(args, started, sections, steps[len(sections) :])
            write_atomic(path, text)


def section(step: str, rows: list, quick: bool) -> str:
    """One step's part of BENCHMARKS.md: its heading, what it measures, how to rerun it, its table."""
    command = f"python -m benchmarks {step}" + " --quick" * quick
    return f"## {step}\n\n{ABOUT[step]} Reproduce: `{command}`.\n\n{brief_table(rows)}\n"


def merged(old: str, args, started: str, sections: list[str]) -> str:
    """``old`` (a BENCHMARKS.md) with the sections of the steps just run in place of its own.

    The other steps' tables stay as they were measured; a line under the head says which
    sections were rerun, when and by which command. Lines of earlier reruns stay for the steps
    no later rerun measured again (a step rerun leaves the older line; a line left with no step
    goes).
    """
    head, *kept = re.split(r"(?m)^(?=## )", old)
    fresh = {part.split("\n", 1)[0].removeprefix("## ").strip(): part for part in sections}
    parts = [fresh.pop(part.split("\n", 1)[0].removeprefix("## ").strip(), part) for part in kept]
    parts += fresh.values()  # steps the file did not hold yet
    command = " ".join(["python -m benchmarks", *args.steps, "--quick" * args.quick])
    command = " ".join(command.split()) + f" --write {Path(args.write).name}"
    ended = datetime.datetime.now(datetime.UTC).strftime("%H:%M UTC")
    rerun = (f"**Rerun since**: {', '.join(args.steps)} by `{command}`, {started} to {ended} "
             f"({machine()}).")  # fmt: skip
    earlier = [_without(line, args.steps) for line in re.findall(_RERUN, head)]
    head = re.sub(_RERUN + r"\n\n", "", head)
    head = head.replace(_FROM_ABOVE + "\n\n", "").rstrip("\n")
    lines = "".join(f"{line}\n\n" for line in [*filter(None, earlier), rerun])
    return (f"{head}\n\n{lines}{_FROM_ABOVE}\n\n"
            + "\n\n".join(p.rstrip("\n") for p in parts) + "\n")  # fmt: skip


#: What the rerun lines leave to the full run the head names.
_FROM_ABOVE = "The sections no rerun line names are from the run above."


#: A line of :func:`merged` under the head: ``**Rerun since**: step, step by `command`, ...``.
_RERUN = r"(?m)^\*\*Rerun since\*\*: .*$"


def _without(line: str, steps) -> str:
    """An earlier rerun's line without the steps rerun since ('' when none is left)."""
    named, rest = line.removeprefix("**Rerun since**: ").split(" by `", 1)
    rest = rest.replace("; the other sections are from the run above.", ".")  # older lines
    left = [s for s in named.split(", ") if s not in steps]
    return f"**Rerun since**: {', '.join(left)} by `{rest}" if left else ""


def document(args, started: str, sections: list[str], missing) -> str:
    """BENCHMARKS.md: the command that wrote it, the date, the machine, then one table per step."""
    command = " ".join(["python -m benchmarks", *args.steps, "--quick" * args.quick])
    command = " ".join(command.split()) + f" --write {Path(args.write).name}"
    ended = datetime.datetime.now(datetime.UTC).strftime("%H:%M UTC")
    missing_note = (
        f"**Not in this run**: {', '.join(missing)} (the run stopped before them).\n\n"
        if missing
        else ""
    )
    head = (
        "# Benchmarks\n\n"
        f"Generated by `{command}` from the repository's root, {started} to {ended}: the current "
        "tables only (earlier rounds are in git's history). Each kernel is timed on fixed, seeded "
        "inputs against the best plain implementation of the same computation (numpy, pyarrow, "
        "pandas, the references in `benchmarks/reference/`) in the same run, after checking "
        "their results equal; best of several repeats after a warm-up unless a row says "
        "otherwise. Ratios are how many times faster capnb is. The command also prints each "
        "row's throughput and notes. Speed is never asserted in a test.\n\n"
        + missing_note
        + f"**Machine**: {machine()}. {SHARED.format(load=os.getloadavg()[0])}\n\n"
    )
    return head + "\n".join(sections)


if __name__ == "__main__":
    main()

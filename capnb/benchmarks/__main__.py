"""``python -m capnb.benchmarks [step ...] [--quick]``: run the benchmark suite and print its table."""

from __future__ import annotations

import argparse
import importlib

from . import machine, print_rows

STEPS = (
    "forecast", "memory", "prefix", "capacity", "engine", "elasticity", "backtest", "held_out",
    "worksheets", "scaleout",
    "compile", "crosscheck", "startup", "report", "browser",
)  # fmt: skip


def main() -> None:
    """Parse the command line and run the chosen steps' benchmarks."""
    parser = argparse.ArgumentParser(prog="python -m capnb.benchmarks")
    parser.add_argument(
        "steps", nargs="*", help=f"steps to run, of {', '.join(STEPS)} (default: all)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="small grids: a smoke run, not figures"
    )
    args = parser.parse_args()
    unknown = sorted(set(args.steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    print(f"machine: {machine()}\n")
    for step in args.steps or STEPS:
        module = importlib.import_module(f"{__package__}.{step}")
        print(f"## {step}\n")
        print_rows(module.run(quick=args.quick))
        print()


if __name__ == "__main__":
    main()

"""``capnb`` on the command line.

- ``capnb report [--config plan.toml] [--out DIR]``: execute the worksheets (the bundled defaults, or
  the config's inputs) and write one self-contained HTML report plus one per worksheet.
- ``capnb plan [--config plan.toml] [--out DIR]``: build the plan, print the recommendation, write
  ``plan.nc`` and ``plan.json``.
- ``capnb config plan.toml``: write the default plan config to edit.

A failure prints which step or worksheet failed and why, exits with status 1, and leaves every
previously written file intact.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

__all__ = ["main"]


def _report(args: argparse.Namespace) -> int:
    from .report import WORKSHEETS, run_report

    names = tuple(args.worksheet or WORKSHEETS)
    start = time.perf_counter()
    written = run_report(
        args.config, args.out, worksheets=names, jobs=args.jobs, progress=not args.quiet
    )
    elapsed = time.perf_counter() - start
    print(f"Report written in {elapsed:.0f} s (open it in any browser; it needs no network):")
    for path in written:
        print(f"  {path.resolve()}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from . import plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)  # they are part of the printed text
        result = plan.build(args.config)
    print(plan.describe(result))
    files = plan.export(result, args.out)
    print("\nWritten:")
    for path in files.values():
        print(f"  {path.resolve()}")
    return 0


def _config(args: argparse.Namespace) -> int:
    from . import plan

    path = plan.save_config(plan.PlanConfig(), args.path)
    print(
        f"Default plan config written to {Path(path).resolve()}; edit it and run "
        f"`capnb plan --config {args.path}` or `capnb report --config {args.path}`."
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``capnb`` command."""
    parser = argparse.ArgumentParser(
        prog="capnb", description="Capacity planning for LLM inference."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    report = commands.add_parser(
        "report", help="execute the worksheets and write offline HTML reports"
    )
    report.add_argument(
        "--config", help="plan config (TOML/YAML); default: each worksheet's bundled inputs"
    )
    report.add_argument("--out", default="reports", help="output directory (default: reports)")
    report.add_argument("--worksheet", action="append", help="run only this worksheet (repeatable)")
    report.add_argument("--jobs", type=int, default=2, help="worksheets run at once (default: 2)")
    report.add_argument("--quiet", action="store_true", help="no progress bar")
    report.set_defaults(run=_report)

    plan = commands.add_parser("plan", help="build the plan, print the recommendation, export it")
    plan.add_argument("--config", help="plan config (TOML/YAML); default: the bundled defaults")
    plan.add_argument(
        "--out", default="reports", help="where plan.nc and plan.json go (default: reports)"
    )
    plan.set_defaults(run=_plan)

    config = commands.add_parser("config", help="write the default plan config to a TOML file")
    config.add_argument("path", help="file to write, e.g. plan.toml")
    config.set_defaults(run=_config)

    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except Exception as error:  # a CLI prints what failed, not a traceback
        print(f"capnb {args.command}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``capnb`` on the command line: ``capnb report`` executes the worksheets and writes HTML reports."""

from __future__ import annotations

import argparse
import sys
import time

__all__ = ["main"]


def _report(args: argparse.Namespace) -> int:
    from .report import WORKSHEETS, run_worksheet

    names = args.worksheet or list(WORKSHEETS)
    written = []
    for index, name in enumerate(names, 1):
        start = time.perf_counter()
        print(f"[{index}/{len(names)}] running worksheet {name} ...", flush=True)
        path = run_worksheet(name, args.out)
        print(
            f"[{index}/{len(names)}] {name}: {time.perf_counter() - start:.1f} s -> {path}",
            flush=True,
        )
        written.append(path)
    print("Reports written (open in any browser; they need no network):")
    for path in written:
        print(f"  {path.resolve()}")
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
    report.add_argument("--out", default="reports", help="output directory (default: reports)")
    report.add_argument(
        "--worksheet",
        action="append",
        help="worksheet to run (repeatable; default: all of the main job)",
    )
    report.set_defaults(run=_report)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except Exception as error:  # a CLI prints the failure, not a traceback
        print(f"capnb {args.command}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Benchmarks: each kernel against its plain-numpy and pure-Python references, timed in one run.

Run ``python -m benchmarks`` (all) or ``python -m benchmarks memory`` (one step) from the repository's
root; ``--quick`` shrinks the grids for a smoke run. Each step's module ``benchmarks/<step>.py`` has a
``run(quick: bool) -> list[Row]``. References come from :data:`benchmarks.reference.REGISTRY`, the
same table the tests use. Speed is never asserted in a test; the figures go to ``BENCHMARKS.md``.
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Row", "best_time", "brief_table", "machine", "print_rows", "table"]

#: A smoke run (``--quick``, set by ``python -m benchmarks``): every timed call runs once, without
#: a warm-up, so that CI runs each benchmark's code in a fraction of the time; its times are not
#: figures.
SMOKE = False


@dataclass
class Row:
    """One benchmark line: what was timed, on how much, how fast, and against what."""

    kernel: str
    size: str
    seconds: float
    throughput: str
    ratios: dict[str, float] = field(default_factory=dict)
    note: str = ""


def best_time(func: Callable[[], object], *, repeat: int = 3, warmup: int = 1) -> float:
    """Best wall time of ``repeat`` calls after ``warmup`` calls (seconds); one call in a smoke run."""
    if SMOKE:
        repeat, warmup = 1, 0
    for _ in range(warmup):
        func()
    times = []
    for _ in range(repeat):
        if not SMOKE:  # a full collection of a test worker's heap takes 0.1-0.3 s, for no figure
            gc.collect()
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def machine() -> str:
    """CPU model, cores and library versions, for the record."""
    import os
    import platform

    import numba
    import numpy
    import xarray

    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next(
                line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    return (
        f"{cpu}; {os.cpu_count()} cores; Python {platform.python_version()}; numpy {numpy.__version__}; "
        f"numba {numba.__version__} ({numba.config.NUMBA_NUM_THREADS} threads); xarray {xarray.__version__}"
    )


def table(rows: list[Row]) -> str:
    """Rows as a Markdown table (what BENCHMARKS.md holds)."""
    lines = [
        "| kernel | grid | time | throughput | vs references | note |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratios = ", ".join(f"{v:,.1f}x {k}" for k, v in row.ratios.items())
        cells = [row.kernel, row.size, f"{row.seconds * 1e3:,.1f} ms", row.throughput, ratios,
                 row.note]  # fmt: skip
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


#: A goal a row states, in its throughput or note ("goal < 150 ms: NOT met").
_GOAL = re.compile(r"goal[^;()]*")


def brief_table(rows: list[Row]) -> str:
    """Rows as BENCHMARKS.md's short table: what, on what, how fast, against what, the goal.

    The throughput and the notes (the machine's load, each part's time) are printed by the command,
    not written: the file stays short enough to read. A grid shared by every row is said once.
    """
    grids = {row.size for row in rows}
    shared = len(grids) == 1
    head = ["kernel", "time", "vs references", "goal"] if shared else [
        "kernel", "grid", "time", "vs references", "goal"]  # fmt: skip
    # cells between bare bars: the same Markdown table, and a bar is not a word to count
    lines = ["|" + "|".join(head) + "|", "|" + "---|" * len(head)]
    for row in rows:
        ratios = ", ".join(f"{v:,.1f}x {k}" for k, v in row.ratios.items())
        found = _GOAL.findall(f"{row.throughput}; {row.note}")
        goals = "; ".join(dict.fromkeys(g.split(". ")[0].strip() for g in found))  # its sentence
        cells = [row.kernel, *([] if shared else [row.size]), _seconds(row.seconds), ratios, goals]
        lines.append("|" + "|".join(str(c).strip().replace("|", "/") for c in cells) + "|")
    if shared:
        lines.append(f"\nEvery row: {rows[0].size}.")
    return "\n".join(lines)


def _seconds(seconds: float) -> str:
    return f"{seconds:,.2f} s" if seconds >= 1 else f"{seconds * 1e3:,.1f} ms"


def print_rows(rows: list[Row]) -> None:
    """Print rows as a Markdown table (ready for BENCHMARKS.md)."""
    print(table(rows))

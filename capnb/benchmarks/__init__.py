"""Benchmarks: each kernel against its plain-numpy and pure-Python references, timed in one run.

Run ``python -m capnb.benchmarks`` (all) or ``python -m capnb.benchmarks memory`` (one step);
``--quick`` shrinks the grids for a smoke run. Each step's module ``capnb/benchmarks/<step>.py`` has a
``run(quick: bool) -> list[Row]``. References come from :data:`capnb.kernels.reference.REGISTRY`, the
same table the tests use. Speed is never asserted in a test; the figures go to ``BENCHMARKS.md``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Row", "best_time", "machine", "print_rows", "table"]


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
    """Best wall time of ``repeat`` calls after ``warmup`` calls (seconds)."""
    for _ in range(warmup):
        func()
    times = []
    for _ in range(repeat):
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


def print_rows(rows: list[Row]) -> None:
    """Print rows as a Markdown table (ready for BENCHMARKS.md)."""
    print(table(rows))

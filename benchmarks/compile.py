"""Compilation: each kernel's first call and each worksheet's first run, with a cold and a warm cache.

Everything runs in fresh Python processes sharing one temporary ``NUMBA_CACHE_DIR``: the first pass
finds it empty (a fresh install), the second finds what the first wrote. A kernel's compile time is
its first call minus its second (same tiny arguments), so it counts compiling (or loading from the
cache) and not the work. Goal (issue 7): a fresh install's first worksheet run must not spend more
than a few seconds compiling.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from . import Row

ROOT = Path(__file__).resolve().parents[1]

_KERNEL_CALLS = "import sys; from benchmarks import _first_calls; _first_calls.main(*sys.argv[1:])"
_WORKSHEET_RUN = r"""
import sys, time
start = time.perf_counter()
import capnb
from capnb import notebook
notebook.setup()
worksheet = notebook.worksheet(sys.argv[1])
for name in worksheet.charts:
    worksheet.chart(name).to_dict()
print(time.perf_counter() - start)
"""

WORKSHEETS = ("01_forecasting", "02_memory", "03_capacity", "04_elasticity")


def _python(code: str, cache: str, *args: str) -> str:
    # the repository's root on the path: ``benchmarks`` is not installed with capnb
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return out.stdout.strip().splitlines()[-1]


def run(quick: bool = False) -> list[Row]:
    rows = []
    # a smoke run compiles one step's kernels: the same code path as all seventeen, a fifth of the time
    groups = ("memory",) if quick else ()
    with tempfile.TemporaryDirectory() as cache:
        cold = json.loads(_python(_KERNEL_CALLS, cache, *groups))
        warm = json.loads(_python(_KERNEL_CALLS, cache, *groups))
    for name, seconds in cold.items():
        rows.append(
            Row(
                f"compile {name}",
                "tiny arguments, fresh process",
                seconds,
                f"cold {seconds:.2f} s, warm {warm[name] * 1e3:,.0f} ms",
                {"cold / warm": seconds / max(warm[name], 1e-6)},
                "first call minus second call; warm = loaded from the on-disk cache",
            )
        )
    total_cold, total_warm = sum(cold.values()), sum(warm.values())
    rows.append(
        Row(
            "compile: every kernel" if not quick else "compile: the memory step's kernels",
            f"{len(cold)} kernels",
            total_cold,
            f"cold {total_cold:.1f} s, warm {total_warm:.2f} s",
            {"cold / warm": total_cold / max(total_warm, 1e-6)},
            "a user compiles only the kernels of the steps they use",
        )
    )
    # a smoke run: the worksheet whose kernels the memory group above already names
    for name in ("02_memory",) if quick else WORKSHEETS:
        with tempfile.TemporaryDirectory() as cache:
            first = float(_python(_WORKSHEET_RUN, cache, name))
            again = float(_python(_WORKSHEET_RUN, cache, name))
        rows.append(
            Row(
                f"{name}: first run",
                "fresh process: import, defaults, every chart",
                first,
                f"cold cache {first:.1f} s, warm {again:.1f} s: {first - again:.1f} s compiling",
                {"cold / warm": first / again},
                "goal: no more than a few seconds compiling",
            )
        )
    return rows

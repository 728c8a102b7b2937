"""Start-up costs: ``import capnb``, and the first result of a step with a cold and a warm kernel cache.

Each figure is measured in a fresh Python process (best of several), since that is what a user pays
when a worksheet starts. The baseline for the import is importing numpy, pandas, xarray and numba
themselves, which capnb defers to first use.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

import benchmarks

from . import Row

_FIRST_RESULT = """
import time
start = time.perf_counter()
import capnb.memory as memory
memory.sweep(model="Llama-3.1-8B", gpu=["L4", "H100-SXM"], tensor_parallel=[1, 2],
             concurrency=[1, 8, 64], seq_len=[1024, 8192])
print(time.perf_counter() - start)
"""


def _seconds(code: str, env: dict[str, str] | None = None, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(1 if benchmarks.SMOKE else repeat):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        )
        best = min(best, float(out.stdout.split()[-1]))
    return best


def _import_seconds(modules: str) -> float:
    code = f"import time; s = time.perf_counter(); import {modules}; print(time.perf_counter() - s)"
    return _seconds(code)


def run(quick: bool = False) -> list[Row]:
    repeat = 1 if quick else 5
    t_capnb = _import_seconds("capnb")
    t_heavy = _import_seconds("numpy, pandas, xarray, numba")
    # a worksheet's imports: capnb first defers rfc3987_syntax's grammar (capnb._deferred)
    t_charts = _import_seconds("capnb, altair")
    t_charts_plain = _import_seconds("altair, capnb")
    with tempfile.TemporaryDirectory() as cache:
        env = {"NUMBA_CACHE_DIR": cache, "PATH": "/usr/bin:/bin"}
        t_cold = _seconds(_FIRST_RESULT, env, repeat=1)
        t_warm = _seconds(_FIRST_RESULT, env, repeat=repeat)
    return [
        Row(
            "import capnb",
            "fresh process",
            t_capnb,
            f"{t_capnb * 1e3:.0f} ms (goal < 500 ms)",
            {"import numpy+pandas+xarray+numba": t_heavy / t_capnb},
            "the heavy libraries load on first use of a step",
        ),
        Row(
            "import capnb, altair",
            "fresh process (a worksheet's imports)",
            t_charts,
            f"{t_charts * 1e3:.0f} ms",
            {"import altair, capnb (altair first)": t_charts_plain / t_charts},
            "capnb first defers the iri grammar jsonschema builds on import",
        ),
        Row(
            "first memory.sweep, cold kernel cache",
            "fresh process, empty NUMBA_CACHE_DIR",
            t_cold,
            f"{t_cold:.2f} s incl. imports and compiling the memory kernels",
            {},
            "",
        ),
        Row(
            "first memory.sweep, warm kernel cache",
            "fresh process, cache from the run above",
            t_warm,
            f"{t_warm:.2f} s incl. imports",
            {"cold cache": t_cold / t_warm},
            "kernels load from disk",
        ),
    ]

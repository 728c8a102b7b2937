"""The main job end to end: ``capnb report`` on the bundled defaults, cold and warm kernel cache.

Goals (issue 6): under 60 s with a cold numba cache and under 30 s warm on this 2-core machine, each
HTML file under about 5 MB with the vega bundle inlined once. The cold run points ``NUMBA_CACHE_DIR``
(inherited by every worksheet's kernel) at an empty directory; the warm run reuses it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import Row


def _run(out: Path, cache: str) -> float:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "capnb.cli", "report", "--out", str(out), "--quiet"],
        check=True,
        env=env,
        capture_output=True,
    )
    return time.perf_counter() - start


def run(quick: bool = False) -> list[Row]:
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        cold = _run(Path(out), cache)
        warm = min(_run(Path(out), cache) for _ in range(1 if quick else 2))
        sizes = {p.name: p.stat().st_size for p in Path(out).glob("*.html")}
        bundles = {
            p.name: p.read_text().count("if (!window.vegaEmbed)") for p in Path(out).glob("*.html")
        }
    largest = max(sizes, key=sizes.get)
    return [
        Row(
            "capnb report, cold kernel cache",
            f"{len(sizes)} HTML files",
            cold,
            f"{cold:.0f} s (goal < 60 s)",
            {},
            "two kernels, each running worksheet after worksheet (reset between)",
        ),
        Row(
            "capnb report, warm kernel cache",
            f"{len(sizes)} HTML files",
            warm,
            f"{warm:.0f} s (goal < 30 s)",
            {"cold": cold / warm},
            "",
        ),
        Row(
            "report sizes",
            f"{len(sizes)} HTML files",
            0.0,
            f"largest {largest} {sizes[largest] / 1e6:.1f} MB (goal < 5 MB)",
            {},
            f"vega bundle inlined {max(bundles.values())} time(s) per file",
        ),
    ]

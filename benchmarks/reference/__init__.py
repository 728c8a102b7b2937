"""Plain Python and numpy references for every kernel: the tests and the benchmarks compare with these.

They are written for clarity, not speed: the obvious loop (``*_python``) and the obvious numpy
broadcast (``*_numpy``). Each step keeps its references in ``benchmarks/reference/<step>.py``;
:data:`REGISTRY` merges their tables (kernel name -> {"python": ..., "numpy": ...}) so that one table
feeds both the tests and the benchmark suite.
"""

from __future__ import annotations

from . import (
    capacity,
    elasticity,
    engine,
    forecast,
    memory,
    pd,
    prefix,
)

__all__ = ["REGISTRY"]

REGISTRY: dict[str, dict[str, object]] = {
    **memory.REGISTRY,
    **capacity.REGISTRY,
    **forecast.REGISTRY,
    **elasticity.REGISTRY,
    **engine.REGISTRY,
    **pd.REGISTRY,
    **prefix.REGISTRY,
}

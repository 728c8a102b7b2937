"""Plain Python and numpy references for every kernel: the tests and the benchmarks compare with these.

They are written for clarity, not speed: the obvious loop (``*_python``) and the obvious numpy
broadcast (``*_numpy``). Each step keeps its references in ``capnb/kernels/<step>_reference.py``;
:data:`REGISTRY` merges their tables (kernel name -> {"python": ..., "numpy": ...}) so that one table
feeds both the tests and the benchmark suite.
"""

from __future__ import annotations

from . import (
    capacity_reference,
    disagg_reference,
    elasticity_reference,
    engine_reference,
    forecast_reference,
    memory_reference,
    prefix_reference,
)

__all__ = ["REGISTRY"]

REGISTRY: dict[str, dict[str, object]] = {
    **memory_reference.REGISTRY,
    **capacity_reference.REGISTRY,
    **forecast_reference.REGISTRY,
    **elasticity_reference.REGISTRY,
    **engine_reference.REGISTRY,
    **disagg_reference.REGISTRY,
    **prefix_reference.REGISTRY,
}

"""capnb: capacity planning for LLM inference, in Jupyter.

Four steps, each a module: :mod:`capnb.forecast` (traffic), :mod:`capnb.memory` (weights + KV cache),
:mod:`capnb.capacity` (safe concurrency under a P99 SLA) and :mod:`capnb.elasticity` (autoscaling).
Catalogs and file readers live in :mod:`capnb.data`; the names, dims and units every result uses are
in :mod:`capnb.glossary`.

Importing capnb is cheap: the step modules (and numpy, xarray, numba behind them) load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from . import _deferred

__version__ = "0.1.0"

# altair's jsonschema builds an unused grammar parser on import (about 1 s a process): deferred
_deferred.install()

_SUBMODULES = (
    "calibration",
    "capacity",
    "charts",
    "coldstart",
    "data",
    "elasticity",
    "errors",
    "forecast",
    "glossary",
    "latency",
    "memory",
    "modelspec",
    "notebook",
    "plan",
    "records",
    "report",
    "widgets",
)

#: The records of settings that travel together (:mod:`capnb.records`), importable from capnb;
#: not in ``__all__``, which lists capnb's modules (the API reference documents them in records).
_RECORDS = ("Deployment", "EngineSettings", "SLA")

__all__ = [
    "__version__",
    "calibration",
    "capacity",
    "charts",
    "coldstart",
    "data",
    "elasticity",
    "errors",
    "forecast",
    "glossary",
    "latency",
    "memory",
    "modelspec",
    "notebook",
    "plan",
    "records",
    "report",
    "widgets",
]

if TYPE_CHECKING:  # pragma: no cover
    from . import (
        calibration,
        capacity,
        charts,
        coldstart,
        data,
        elasticity,
        errors,
        forecast,
        glossary,
        latency,
        memory,
        modelspec,
        notebook,
        plan,
        records,
        report,
        widgets,
    )
    from .records import SLA as SLA
    from .records import Deployment as Deployment
    from .records import EngineSettings as EngineSettings


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    if name in _RECORDS:
        record = getattr(importlib.import_module(f"{__name__}.records"), name)
        globals()[name] = record
        return record
    raise AttributeError(f"module 'capnb' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, *_RECORDS])

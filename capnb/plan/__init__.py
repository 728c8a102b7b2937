"""The plan: the four steps chained on one set of inputs, one Dataset and one recommendation.

::

    trace ──► forecast ──► target_qps per slot + burst buffer
    model ──► memory ────► largest fitting concurrency per GPU and TP
    SLA ────► capacity ──► per-instance QPS, instances per slot, cost; the cheapest GPU and TP
    policies ► elasticity ► the autoscaling policy that keeps the breach budget at the least cost

:func:`build` runs the chain (inputs as a :class:`PlanConfig`, a config file, or keyword overrides)
and returns one ``xarray.Dataset``: every step's results with their units, variables prefixed by
their step (``forecast_target_qps``, ``capacity_instances``, ...), and the answer: one typed record
(:class:`Answer`, read with :func:`answer`) that :func:`describe`, ``plan.json``, the report and the
command line render. The article's applicability checks are issued as :class:`PlanWarning` too.
:func:`export` writes the plan as NetCDF and ``plan.json`` (:func:`summary`).
:func:`backtest` builds the plan on one window of the trace and replays it on a later one, against
the hindsight-best and naive plans.
"""

from __future__ import annotations

from ..records import SLA
from ._answer import Answer, answer, units
from ._build import (
    PlanWarning,
    backtest,
    build,
    describe,
    export,
    export_names,
    inputs_used,
    load,
    memory_profile,
    read_config,
    sections,
    summary,
)
from ._config import (
    Elasticity,
    Fleet,
    PlanConfig,
    Serving,
    Traffic,
    load_config,
    save_config,
    trace_options,
    workload_options,
)
from ._manifests import Manifests, PolicyChoice, manifest_settings, manifests, policy_choice
from ._servers import SERVERS, Server
from ._steps import PlanError, within_context

__all__ = [
    "SERVERS",
    "SLA",
    "Answer",
    "Elasticity",
    "Fleet",
    "Manifests",
    "PlanConfig",
    "PlanError",
    "PlanWarning",
    "PolicyChoice",
    "Server",
    "Serving",
    "Traffic",
    "answer",
    "backtest",
    "build",
    "describe",
    "export",
    "export_names",
    "inputs_used",
    "load",
    "load_config",
    "manifest_settings",
    "manifests",
    "memory_profile",
    "policy_choice",
    "read_config",
    "save_config",
    "sections",
    "summary",
    "trace_options",
    "units",
    "within_context",
    "workload_options",
]

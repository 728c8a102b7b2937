"""The plan: the four steps chained on one set of inputs, one Dataset and one recommendation.

::

    trace ──► forecast ──► target_qps per slot + burst buffer
    model ──► memory ────► largest fitting concurrency per GPU and TP
    SLA ────► capacity ──► per-instance QPS, instances per slot, cost; the cheapest GPU and TP
    policies ► elasticity ► the autoscaling policy that keeps the breach budget at the least cost

:func:`build` runs the chain (inputs as a :class:`PlanConfig`, a config file, or keyword overrides)
and returns one ``xarray.Dataset``: every step's results with their units, variables prefixed by
their step (``forecast_target_qps``, ``capacity_instances``, ...), the recommendation in
``attrs["recommendation"]`` and the article's applicability checks in ``attrs["warnings"]`` (also
issued as :class:`PlanWarning`). :func:`export` writes it as NetCDF and a JSON summary.
:func:`backtest` builds the plan on one window of the trace and replays it on a later one, against
the hindsight-best and naive plans.
"""

from __future__ import annotations

from ._build import (
    PlanWarning,
    backtest,
    build,
    describe,
    export,
    inputs_used,
    load,
    read_config,
)
from ._config import PlanConfig, load_config, save_config, trace_options
from ._manifests import Manifests, PolicyChoice, manifest_settings, manifests, policy_choice
from ._steps import PlanError

__all__ = [
    "Manifests",
    "PlanConfig",
    "PlanError",
    "PlanWarning",
    "PolicyChoice",
    "backtest",
    "build",
    "describe",
    "export",
    "inputs_used",
    "load",
    "load_config",
    "manifest_settings",
    "manifests",
    "policy_choice",
    "read_config",
    "save_config",
    "trace_options",
]

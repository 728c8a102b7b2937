"""The article's scaling decision engine (part of :mod:`capnb.elasticity`, which re-exports it).

Per evaluation: ``load_ratio = current_qps / max_qps``. Above the scale-up threshold (0.7) the fleet
grows - unless the cold start vetoes it (:func:`cold_start_vetoes`), when the article recommends
fixed capacity instead; below the scale-down threshold (0.3) for longer than the cool-down it shrinks by
one instance; otherwise nothing changes. The simulator applies the same rule in
:func:`capnb.kernels.autoscale_rules.article_decision`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ..errors import InputError
from ..units import declare_units

__all__ = [
    "NoAction",
    "ScaleDown",
    "ScaleUp",
    "cold_start_vetoes",
    "decide_scaling_action",
    "real",
    "veto_cold_steps",
]


@declare_units(cold_start_s="s", tolerance_s="s")
def cold_start_vetoes(cold_start_s: float, tolerance_s: float) -> bool:
    """The article's cold-start rule: whether scaling up reacts too late to count on.

    A new instance that takes more than half the latency tolerance to start cannot relieve a
    burst before the SLA counts as breached: the article then holds fixed capacity (its engine
    vetoes scale-ups) and puts an elastic buffer above it. This is the one place the rule is
    written; the simulator, the recommendation and the plan's text ask here.

    Examples
    --------
    >>> cold_start_vetoes(75.0, 60.0), cold_start_vetoes(30.0, 60.0)
    (True, False)
    """
    cold, tolerance = (_seconds(cold_start_s, "cold_start_s"), _seconds(tolerance_s, "tolerance_s"))
    return cold > cold_start_limit_s(tolerance)


def _seconds(value: object, name: str) -> float:
    """A duration for the veto rule: a finite number of seconds >= 0 (NaN vetoed nothing)."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (real and math.isfinite(value) and value >= 0):
        raise InputError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def cold_start_limit_s(tolerance_s: float) -> float:
    """The longest cold start :func:`cold_start_vetoes` lets scaling up count on: half the tolerance.

    Examples
    --------
    >>> cold_start_limit_s(60.0)
    30.0
    """
    return float(tolerance_s) / 2


def veto_cold_steps(tolerance_steps: int) -> int:
    """The shortest cold start (whole steps) that :func:`cold_start_vetoes` vetoes.

    The simulator counts time in steps; it vetoes a run whose cold start is at least this long.

    Examples
    --------
    >>> veto_cold_steps(60), veto_cold_steps(61)
    (31, 31)
    """
    return next(c for c in range(int(tolerance_steps) + 2) if cold_start_vetoes(c, tolerance_steps))


@dataclass(frozen=True)
class ScaleUp:
    """Add ``instances`` instances."""

    instances: int


@dataclass(frozen=True)
class ScaleDown:
    """Remove ``instances`` instances (the article removes one at a time)."""

    instances: int = 1


@dataclass(frozen=True)
class NoAction:
    """Keep the fleet as it is, with the article's reason and recommendation."""

    reason: str
    recommendation: str


def real(value: object, name: str, *, low: float = 0.0, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InputError(f"{name} must be a finite number, got {value!r}")
    if value < low or (open_low and value == low):
        raise InputError(f"{name} must be {'>' if open_low else '>='} {low:g}, got {value!r}")
    return float(value)


@declare_units(
    current_qps="requests/s",
    max_qps="requests/s",
    cold_start_s="s",
    latency_budget_s="s",
    low_duration_s="s",
    cooldown_s="s",
)
def decide_scaling_action(
    current_qps: float,
    max_qps: float,
    *,
    current_instances: int,
    cold_start_s: float,
    latency_budget_s: float,
    low_duration_s: float,
    scale_up_threshold: float = 0.7,
    scale_down_threshold: float = 0.3,
    cooldown_s: float = 900.0,
) -> ScaleUp | ScaleDown | NoAction:
    """The article's scaling decision for one evaluation.

    Parameters
    ----------
    current_qps
        Request rate now (requests/s).
    max_qps
        Capacity of the current fleet (requests/s).
    current_instances
        Instances in the fleet (at least 1).
    cold_start_s
        Time from the decision until a new instance serves (s).
    latency_budget_s
        How long the service may run over capacity before the SLA counts as breached (s).
    low_duration_s
        How long the load has been below ``scale_down_threshold`` (s).
    scale_up_threshold, scale_down_threshold
        Load ratios (the article: 0.7 and 0.3).
    cooldown_s
        Sustained low load needed before a scale-down (the article: 15-30 min).

    Returns
    -------
    ScaleUp, ScaleDown or NoAction
        Above the scale-up threshold: ``ScaleUp(ceil(n x (ratio / threshold - 1)))`` (at least 1),
        enough to bring the ratio back under the threshold - unless :func:`cold_start_vetoes`.
        Below the scale-down threshold for longer than the cool-down:
        ``ScaleDown(1)``.

    Examples
    --------
    >>> decide_scaling_action(90, 100, current_instances=4, cold_start_s=20,
    ...                       latency_budget_s=60, low_duration_s=0)
    ScaleUp(instances=2)
    >>> decide_scaling_action(90, 100, current_instances=4, cold_start_s=90,
    ...                       latency_budget_s=60, low_duration_s=0).reason
    'cold start time exceeds latency budget'
    """
    qps = real(current_qps, "current_qps")
    capacity = real(max_qps, "max_qps", open_low=True)
    if isinstance(current_instances, bool) or not isinstance(current_instances, numbers.Integral):
        raise InputError(f"current_instances must be a whole number, got {current_instances!r}")
    if current_instances < 1:
        raise InputError(f"current_instances must be at least 1, got {current_instances}")
    cold = real(cold_start_s, "cold_start_s")
    budget = real(latency_budget_s, "latency_budget_s")
    low_for = real(low_duration_s, "low_duration_s")
    up = real(scale_up_threshold, "scale_up_threshold", open_low=True)
    down = real(scale_down_threshold, "scale_down_threshold")
    cooldown = real(cooldown_s, "cooldown_s")
    if down >= up:
        raise InputError(f"scale_down_threshold={down:g} must be below scale_up_threshold={up:g}")
    load_ratio = qps / capacity
    if load_ratio > up:
        if cold_start_vetoes(cold, budget):
            return NoAction(
                "cold start time exceeds latency budget",
                "increase fixed capacity instead of elastic scaling",
            )
        return ScaleUp(max(1, math.ceil(current_instances * (load_ratio / up - 1.0))))
    if load_ratio < down:
        if low_for > cooldown:
            return ScaleDown(1)
        return NoAction("cool-down period not met", "wait for sustained low traffic")
    return NoAction("load within normal range", "maintain current capacity")

"""The autoscaling simulator's typed records: what a run is given and what it writes.

Plain :class:`typing.NamedTuple` classes of scalars or arrays, with no numba import: the step module
builds them (:func:`capnb.elasticity._policy.build_config`), the references read them, and numba
compiles the kernels against them as named tuples: a field read is a register move once the rules
are inlined, with no index constants to keep in step. (A numpy structured record, passed by
pointer, compiled and ran as fast on the benchmark grid; a named tuple is immutable, has typed
fields with defaults, and needs no dtype.) Every field is in whole steps, instances or requests/s.

:class:`Config`
    Settings shared by every run of a sweep (the step, the latency tolerance, the policy and its
    options).
:class:`Run`
    One run's knobs (scale-up threshold, scale-down window, cold start, pool floor, warm spares); the
    same record with one array per knob is a flat grid of runs.
:class:`Timeline`
    Output arrays, one entry per step (or empty: metrics only).
:class:`Losses`
    Instances lost to preemption (spot capacity): events by step, or none.
"""

from __future__ import annotations

import functools
import typing
from typing import NamedTuple

import numpy as np

__all__ = [
    "ARTICLE",
    "CONFIG_FIELDS",
    "FIXED",
    "FIXED_ELASTIC",
    "HPA",
    "KNATIVE",
    "METRICS",
    "PREDICTIVE",
    "Config",
    "Losses",
    "Run",
    "Timeline",
]

#: Policy codes of :attr:`Config.policy`.
ARTICLE, HPA, KNATIVE, FIXED, FIXED_ELASTIC, PREDICTIVE = 0, 1, 2, 3, 4, 5

#: Entries of a run's ``metrics`` vector (float64). Counts of steps are converted to seconds by
#: the step module.
METRICS = (
    "arrivals",  # requests that arrived
    "served",  # requests served
    "late",  # requests served in a later step than they arrived
    "dropped",  # requests dropped after waiting the tolerance
    "final_backlog",  # requests still waiting at the end
    "peak_backlog",  # largest backlog at the end of a step
    "breach_steps",  # steps that leave requests unserved: backlog_in + arrivals > capacity
    "dropping_steps",  # steps in which requests were dropped
    "instance_steps",  # sum over steps of (ready + starting) instances
    "starting_steps",  # sum over steps of starting instances
    "wasted_starting_steps",  # cold-start steps of instances cancelled or stopped as thrash
    "scale_up_events",
    "scale_down_events",
    "instances_started",
    "instances_stopped",  # including cancelled starts
    "thrash",  # ready instances stopped less than thrash_steps after becoming ready
    "cancelled",  # starting instances stopped before they were ready
    "peak_instances",  # largest ready + starting
    "vetoed_scale_ups",  # article: evaluations where the cold start vetoed a scale-up
    "panic_steps",  # Knative: steps spent in panic mode
    "preempted",  # ready instances lost to preemption (not counted as stopped)
)


class Config(NamedTuple):
    """Settings shared by every run of a sweep; build it with :meth:`of`.

    The defaults of the policy options are neutral values (no such rate policy, windows of one
    step); the step module fills in the chosen policy's validated options.
    """

    step_s: float
    """Seconds per step."""
    per_instance_qps: float
    """Requests/s one ready instance serves."""
    tolerance_steps: int
    """Steps a request may wait before it is dropped (the latency tolerance)."""
    max_instances: int
    """Largest pool the policy may hold."""
    thrash_steps: int
    """An instance stopped sooner than this after becoming ready counts as thrash."""
    policy: int
    """``ARTICLE``, ``HPA``, ``KNATIVE``, ``FIXED``, ``FIXED_ELASTIC`` or ``PREDICTIVE``."""
    veto_cold_steps: int
    """Article: a run whose cold start lasts at least this many steps vetoes every scale-up (the
    elasticity step decides the threshold from its cold-start rule)."""
    period_steps: int = 1
    """Evaluation (article, predictive), sync (HPA) or tick (Knative) period."""
    scale_down_threshold: float = 0.0
    """Article: load ratio below which the pool may shrink."""
    hpa_tolerance: float = 0.0
    """HPA: ratio band around 1 inside which nothing changes."""
    up_stabilization_steps: int = 0
    """HPA: scale-up stabilisation window."""
    up_pods: int = -1
    """HPA: Pods scale-up policy value (-1: no such policy)."""
    up_percent: float = -1.0
    """HPA: Percent scale-up policy value (-1: none)."""
    up_period_steps: int = 1
    """HPA: the scale-up policies' period."""
    down_pods: int = -1
    """HPA: Pods scale-down policy value (-1: none)."""
    down_percent: float = -1.0
    """HPA: Percent scale-down policy value (-1: none)."""
    down_period_steps: int = 1
    """HPA: the scale-down policies' period."""
    stable_steps: int = 1
    """Knative: stable window."""
    panic_steps: int = 1
    """Knative: panic window."""
    panic_threshold: float = 0.0
    """Knative: panic when needed pods / ready pods >= this."""
    max_scale_up_rate: float = 0.0
    """Knative: at most ``ceil(rate x ready)`` pods after a tick."""
    max_scale_down_rate: float = 1.0
    """Knative: at least ``floor(ready / rate)`` pods after a tick."""

    @classmethod
    def of(cls, **fields: object) -> Config:
        """A config with every field of its declared type (int or float).

        numba compiles one kernel per combination of field types, so a config built from mixed
        Python and numpy numbers would compile again; a whole-number field given a fraction is an
        error rather than truncated.
        """
        return cls(**{name: _as(kind, fields[name], name) for name, kind in _kinds(cls, fields)})


class Run(NamedTuple):
    """One run's knobs, or a flat grid of runs (one array per knob, built by :meth:`grid`)."""

    up: float
    """Scale-up threshold (article) or target utilisation (HPA, Knative), as a share of
    ``per_instance_qps``."""
    cooldown: int
    """The policy's scale-down window (article: sustained-low time; HPA: scale-down stabilisation
    window; Knative: scale-down delay)."""
    cold: int
    """Cold start (steps): instances added by a decision at step ``t`` serve from ``t + 1 + cold``."""
    low: int
    """Pool floor (``fixed``: the fleet; ``fixed_elastic``: the fixed part)."""
    buffer: int
    """Warm spares held on top of the pool, never scaled."""

    @classmethod
    def of(cls, **fields: object) -> Run:
        """One run with every knob of its declared type (see :meth:`Config.of`)."""
        return cls(**{name: _as(kind, fields[name], name) for name, kind in _kinds(cls, fields)})

    @classmethod
    def grid(cls, up, cooldown, cold, low, buffer) -> Run:
        """A flat grid of runs: the knobs broadcast together, raveled, float64 / int64 arrays.

        The arrays are writable copies, so that every grid has the same numba type (a read-only
        view would compile the simulator again).
        """
        knobs = (up, cooldown, cold, low, buffer)
        shape = np.broadcast_shapes(*(np.shape(a) for a in knobs))
        return cls(
            *(
                np.array(np.broadcast_to(a, shape).ravel(), dtype=kind)
                for a, kind in zip(knobs, (np.float64, *[np.int64] * 4), strict=True)
            )
        )


class Timeline(NamedTuple):
    """Per-step output arrays of one run (each of length ``T``, or all empty: metrics only)."""

    ready: np.ndarray
    """int64: instances ready during each step."""
    starting: np.ndarray
    """int64: instances starting during each step."""
    served: np.ndarray
    """float64: requests served in each step."""
    dropped: np.ndarray
    """float64: requests dropped in each step."""
    backlog: np.ndarray
    """float64: requests waiting at the end of each step."""
    breach: np.ndarray
    """bool: whether requests were left after serving (the step is in SLA breach)."""

    @classmethod
    def empty(cls, steps: int) -> Timeline:
        """Uninitialised arrays for ``steps`` steps."""
        ints = (np.empty(steps, np.int64) for _ in range(2))
        floats = (np.empty(steps) for _ in range(3))
        return cls(*ints, *floats, np.empty(steps, np.bool_))


class Losses(NamedTuple):
    """Instances lost to preemption: events sorted by step (all empty: no preemption).

    At step ``steps[i]`` (before it serves) the event takes ``counts[i]`` ready instances, newest
    first, if ``marks[i] < ready`` (the ready instances at that moment, warm spares included);
    never more than are ready. An event of a given series has mark -1 (it always applies); a
    preemption *rate* is a Poisson stream of candidate events thinned by their marks
    (:func:`capnb.elasticity.simulate`), so that each ready instance is lost at the rate
    whatever the fleet holds. Events of one step apply in order.
    """

    steps: np.ndarray
    """int64, non-decreasing: the step of each event."""
    counts: np.ndarray
    """int64 >= 0: instances the event takes."""
    marks: np.ndarray
    """float64: the event applies only while more than this many instances are ready."""

    @classmethod
    def none(cls) -> Losses:
        """No preemption."""
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))

    @classmethod
    def of_counts(cls, lost) -> Losses:
        """Events from a series of instances lost at each step (whole numbers >= 0)."""
        lost = np.asarray(lost)
        steps = np.flatnonzero(lost).astype(np.int64)
        counts = lost[steps].astype(np.int64)
        return cls(steps, counts, np.full(steps.size, -1.0))


#: Fields of :class:`Config`, in order.
CONFIG_FIELDS = Config._fields


@functools.cache
def _types(cls: type) -> dict[str, type]:
    return typing.get_type_hints(cls)


def _kinds(cls: type, fields: dict[str, object]):
    unknown = set(fields) - set(cls._fields)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    missing = [n for n in cls._fields if n not in fields and n not in cls._field_defaults]
    if missing:
        raise TypeError(f"{cls.__name__} needs {missing}")
    for name, kind in _types(cls).items():
        if name in fields:
            yield name, kind


def _as(kind: type, value: object, name: str) -> int | float:
    if kind is float:
        return float(value)
    whole = int(value)
    if whole != value:
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return whole

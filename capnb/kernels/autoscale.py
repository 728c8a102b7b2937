"""Autoscaling simulator kernels: a fleet of GPU instances serving a demand series under a policy.

One run steps through ``T`` steps of ``config.step_s`` seconds. Per step ``t``:

1. starting instances whose cold start ends at ``t`` become ready; then instances lost to
   preemption at ``t`` (``losses``, :class:`~capnb.kernels.autoscale_records.Losses`; none unless
   given) stop at once, the most recently ready first, as a scale-down would take them, but counted
   as ``preempted``, not as stopped or thrash. Nothing replaces them until the policy's next
   decision, which sees the smaller pool (a fixed fleet restarts them at the end of the step); a
   replacement is a start like any other and pays the cold start;
2. the ready instances serve up to ``ready x per_instance_qps x step_s`` requests, oldest first: the
   backlog carried in, then this step's arrivals ``demand[t] x step_s``. Requests served after their
   own step are *late*;
3. what is left joins the backlog; a request that has waited ``tolerance`` steps unserved is dropped,
   so per step ``backlog_in + arrivals = served + dropped + backlog_out`` (tolerance 0 drops at once);
4. the step is in SLA breach when requests are left after serving: ``backlog_in + arrivals``
   exceeds the ready capacity;
5. at the policy's decision steps (every ``period`` steps, after a full period), the policy's rule
   reads what a real controller would see - the arrival rate over its window, the ready and
   starting instance counts and its own state - and sets the pool size. Added instances serve from
   step ``t + 1 + cold`` (a decision ends step ``t``); removed ones stop at once, starting ones
   first, then the most recently ready (Kubernetes' ReplicaSet deletes not-ready pods first, then
   those ready for the shortest time).

The instances are a pool the policy manages (``run.low`` to ``config.max_instances``) plus
``run.buffer`` warm spares held on top that the policy never sees. The policies (``config.policy``)
and their rules, one small function each in :mod:`capnb.kernels.autoscale_rules`:

``ARTICLE`` (:func:`~capnb.kernels.autoscale_rules.article_rule`)
    The article's decision engine: load ratio = rate / pool capacity (ready + starting); above the
    scale-up threshold add ``ceil(pool x (ratio / threshold - 1))`` (at least 1) unless the cold
    start exceeds half the latency tolerance (then no action: the article's veto); below the
    scale-down threshold for longer than the cool-down remove one per evaluation.
``FIXED_ELASTIC`` (the same rule)
    Without the veto: the pool floor ``run.low`` is fixed capacity that carries the load through
    cold starts; the elastic part above it grows for long bursts.
``HPA`` (:func:`~capnb.kernels.autoscale_rules.hpa_rule`)
    Kubernetes HPA v2 on a per-pod requests/s metric: desired = ceil(ratio x ready) outside the
    tolerance, starting pods counted as unready, scale-up/scale-down stabilisation windows, rate
    policies (Pods and Percent, ``selectPolicy: Max``) and min/max replicas. With no ready pod
    (only after a preemption) there is no metric: the sync holds the count and records nothing.
``KNATIVE`` (:func:`~capnb.kernels.autoscale_rules.knative_rule`)
    Knative's KPA in requests/s mode: stable and panic windows (the stable one read from a
    cumulative request counter, as a metrics pipeline reads a rate), panic when the panic-window load
    needs at least ``panic_threshold`` x the ready pods, no scale-down while panicking, max
    scale-up and scale-down rates, and the scale-down delay as a windowed maximum.
``PREDICTIVE`` (:func:`~capnb.kernels.autoscale_rules.predictive_rule`)
    Provisions for a forecast of the demand (one rate per step, ``forecast``, given beside the
    demand): the forecast's largest rate until the next decision's instances can serve (one cold
    start ahead), plus the observed load above the forecast over the last period (a reactive
    correction), at target utilisation ``run.up``; scale-down stabilised over ``run.cooldown``,
    so the pool follows the forecast's troughs.
``FIXED``
    ``run.low`` instances throughout: no rule (instances lost to preemption are restarted at once).

The scale-down window of each policy is ``run.cooldown`` (article: sustained-low time; HPA:
scale-down stabilisation window; Knative: scale-down delay). Everything is in whole steps; the step
module converts seconds, validates, and builds the records (:mod:`capnb.kernels.autoscale_records`).

Two shortcuts keep a long sweep fast and change no result (the same float sums in the same order,
checked against the references): a *quiet stretch* (nothing queued, no cohort becoming ready, no
loss) adds each step's arrivals without the plant; and a decision *at rest* - the last decision
changed nothing, the fleet has not changed since, and this one reads the same (the article's load
band, the HPA's or the predictive policy's desired count, Knative's two pod counts) before the front
of one of its windows leaves - is taken as a quiet step. Held rates (a 10-minute series at 1-s
steps) make most decisions such. A ``FIXED`` grid runs each distinct ``(cold, low, buffer)`` once.
Metrics are written to ``metrics`` in the order of :data:`METRICS`.

This module holds the entry points and what every run of a grid reads alike; the loop itself, a
driver of named steps, is :mod:`capnb.kernels.autoscale_loop`.
"""

from __future__ import annotations

import numpy as np

from . import autoscale_loop as loop
from ._lazy import njit, over_threads, threads_for
from .autoscale_loop import BLOCK
from .autoscale_records import (
    ARTICLE,
    CONFIG_FIELDS,
    FIXED,
    FIXED_ELASTIC,
    HPA,
    KNATIVE,
    METRICS,
    PREDICTIVE,
    Config,
    Losses,
    Run,
    Timeline,
)
from .autoscale_rules import (
    article_decision,
    hpa_replicas,
    knative_desired,
    knative_needs,
    predictive_rate,
    predictive_table,
)

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
    "article_decision",
    "hpa_replicas",
    "knative_desired",
    "simulate",
    "simulate_many",
]


# -- what the runs of a grid read alike -------------------------------------------------------------
@njit
def _counter(demand):
    """Cumulative rate: ``counter[i] = demand[0] + ... + demand[i - 1]``, added left to right."""
    counter = np.empty(demand.shape[0] + 1)
    counter[0] = 0.0
    for i in range(demand.shape[0]):
        counter[i + 1] = counter[i] + demand[i]
    return counter


@njit
def _shared(demand, config):
    """What every run of a grid reads alike: ``(arrivals, block_max, loads)``.

    ``arrivals``: the requests over the trace, each step's ``demand x step_s`` added in step order;
    ``block_max``: the largest rate of each block of :data:`BLOCK` steps; ``loads``: the mean rate
    over each decision's period (added in step order), which the article's, the HPA's and the
    predictive rules read. Decisions fall on the same steps in every run (every ``period`` steps,
    after a full period), so these are made once per grid instead of in every run's loop.
    """
    n = demand.shape[0]
    arrivals = 0.0
    for k in range(n):
        arrivals += demand[k] * config.step_s
    block_max = np.empty((n + BLOCK - 1) // BLOCK)
    for b in range(block_max.shape[0]):
        top = demand[b * BLOCK]
        for k in range(b * BLOCK + 1, min(n, b * BLOCK + BLOCK)):
            if demand[k] > top:
                top = demand[k]
        block_max[b] = top
    period = config.period_steps
    loads = np.empty(n // period)
    for d in range(loads.shape[0]):
        total = 0.0
        for k in range(d * period, d * period + period):
            total += demand[k]
        loads[d] = total / period
    return arrivals, block_max, loads


@njit
def _next_read(config, loads, table, stable_need, panic_need):
    """For each decision ``d``: the first decision after it that reads otherwise (int64).

    What a decision reads apart from the fleet: the mean rate (article, HPA); the rate the
    predictive policy provisions for; Knative's stable and panic counts at its step.
    """
    if config.policy == FIXED:  # never decides: nothing to read ahead (its period is one step)
        return np.empty(0, np.int64)
    period = config.period_steps
    n = loads.shape[0]
    first = np.empty(n)
    second = np.empty(n)
    for d in range(n):
        if config.policy == KNATIVE:
            first[d] = stable_need[d * period + period - 1]
            second[d] = panic_need[d * period + period - 1]
        elif config.policy == PREDICTIVE:
            first[d] = second[d] = predictive_rate(table[0][d], table[1][d], loads[d])
        else:
            first[d] = second[d] = loads[d]
    following = np.empty(n, np.int64)
    after = n
    for d in range(n - 1, -1, -1):
        following[d] = after
        if d > 0 and (first[d] != first[d - 1] or second[d] != second[d - 1]):
            after = d
    return following


@njit
def _needs(demand, arrived, up, config):
    # Knative's precomputed pod counts for target `up`; no arrays for the other policies
    if config.policy != KNATIVE:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return knative_needs(
        demand, arrived, up * config.per_instance_qps, config.stable_steps, config.panic_steps
    )


@njit
def _table(forecast, config, cold):
    # the predictive policy's reads of its forecast at each decision; empty for the others
    if config.policy != PREDICTIVE:
        return np.empty(0), np.empty(0)
    return predictive_table(forecast, config.period_steps, cold)


@njit(nogil=True)
def _reads(demand, forecast, arrived, shared, config, up, cold):
    """What a run reads apart from its fleet: ``(stable_need, panic_need, table, next_read)``.

    Knative's counts depend on its target (``up``), the predictive policy's forecast reads on the
    cold start (``cold``), and the other policies' on neither, so runs that share those share
    these: they are made once per value (:func:`_read_groups`), not once per run or thread.
    """
    stable_need, panic_need = _needs(demand, arrived, up, config)
    table = _table(forecast, config, cold)
    following = _next_read(config, shared[2], table, stable_need, panic_need)
    return stable_need, panic_need, table, following


def _read_groups(demand, forecast, shared, config, runs):
    """``(key, reads)``: the knob that changes what a run reads, and its values' reads.

    ``key`` is None when no knob does; ``reads`` maps each value to its :func:`_reads`, made once
    per value (on threads when there are several).
    """
    key = (
        runs.up if config.policy == KNATIVE else runs.cold if config.policy == PREDICTIVE else None
    )
    values = [None] if key is None else np.unique(key).tolist()
    # only Knative reads the cumulative counter (its stable window, as a metrics pipeline would)
    arrived = _counter(demand) if config.policy == KNATIVE else _NO_FORECAST
    made = {}

    def make(a, b):
        for value in values[a:b]:
            up = np.float64(value if config.policy == KNATIVE else runs.up[0])
            cold = np.int64(value if config.policy == PREDICTIVE else runs.cold[0])
            made[value] = _reads(demand, forecast, arrived, shared, config, up, cold)

    over_threads(make, len(values), len(values) * demand.shape[0])
    return key, made


def _grouped(demand, shared, groups, losses, config, runs, metrics, timeline, first, stop):
    """Runs ``first..stop-1``: each stretch of runs that read alike with its group's reads."""
    key, made = groups
    i = first
    while i < stop:
        j = stop
        if key is not None:
            j = i + 1
            while j < stop and key[j] == key[i]:
                j += 1
        reads = made[None if key is None else key[i].item()]
        loop.runs(demand, shared, reads, losses, config, runs, metrics, timeline, i, j)
        i = j


def simulate(demand, config, run, metrics, timeline, forecast=None, losses=None):
    """One run with its timeline.

    The compiled loop of :func:`simulate_many`, on a grid of one run that records its timeline:
    the timeline path compiles nothing more.

    Parameters
    ----------
    demand : float64[T]
        Arrival rate per step (requests/s).
    config : Config
        Settings (:meth:`Config.of`).
    run : Run
        The run's knobs (:meth:`Run.of`).
    metrics : float64[len(METRICS)]
        Output: the run's totals.
    timeline : Timeline
        Output: instances ready and starting, requests served and dropped and the backlog at the
        end of each step, and whether it was in SLA breach (:meth:`Timeline.empty`).
    forecast : float64[T], optional
        Forecast demand per step (requests/s); ``PREDICTIVE`` needs it, the others ignore it.
    losses : Losses, optional
        Instances lost to preemption (default: none).
    """
    one = metrics[np.newaxis]  # a view: the kernel writes through it
    forecast = _forecast(demand, config, forecast)
    losses = _losses(losses)
    shared = _shared(demand, config)
    grid = Run.grid(*run)
    groups = _read_groups(demand, forecast, shared, config, grid)
    _grouped(demand, shared, groups, losses, config, grid, one, timeline, 0, 1)


def _forecast(demand, config, forecast):
    """The forecast array the kernel reads: checked for ``PREDICTIVE``, empty for the others."""
    if config.policy != PREDICTIVE:
        return _NO_FORECAST
    if forecast is None or forecast.shape != demand.shape or forecast.dtype != np.float64:
        raise ValueError("PREDICTIVE needs a float64 forecast of the demand's shape")
    return forecast


def _losses(losses):
    """The preemption events the kernel reads: checked, or none."""
    if losses is None:
        return _NO_LOSSES
    steps, counts, marks = (np.ascontiguousarray(a) for a in losses)
    if not (steps.dtype == counts.dtype == np.int64 and marks.dtype == np.float64):
        raise ValueError("losses: int64 steps and counts, float64 marks")
    if not steps.shape == counts.shape == marks.shape or steps.ndim != 1:
        raise ValueError("losses: three 1-D arrays of one length")
    if steps.size and ((np.diff(steps) < 0).any() or steps[0] < 0 or (counts < 0).any()):
        raise ValueError("losses: steps sorted and >= 0, counts >= 0")
    return Losses(steps, counts, marks)


def _runs_serial(demand, config, runs, metrics, forecast=None, losses=None):
    forecast = _NO_FORECAST if forecast is None else forecast
    losses = _losses(losses)
    shared = _shared(demand, config)
    groups = _read_groups(demand, forecast, shared, config, runs)
    _grouped(
        demand, shared, groups, losses, config, runs, metrics, _NO_TIMELINE, 0, runs.up.shape[0]
    )


#: The timeline of runs that record none, the forecast of policies that read none, no preemption.
_NO_TIMELINE = Timeline.empty(0)
_NO_FORECAST = np.empty(0)
_NO_LOSSES = Losses.none()


def _distinct(config, runs, losses):
    """The runs that differ: ``(runs, None)``, or for ``FIXED`` ``(distinct runs, where)``.

    A fixed fleet never decides: only its size and warm spares change a run, and the cold start
    of what it restarts after a preemption. Runs of a grid that differ only in the other knobs
    are one run: ``metrics[i]`` is the distinct run ``where[i]``'s.
    """
    if config.policy != FIXED:
        return runs, None
    keys = [runs.low, runs.buffer]
    if losses is not None and np.size(losses[0]):
        keys.append(runs.cold)
    knobs = np.stack(keys, axis=1)
    keys, first, where = np.unique(knobs, axis=0, return_index=True, return_inverse=True)
    if keys.shape[0] == knobs.shape[0]:
        return runs, None
    pick = np.sort(first)  # the distinct runs in the grid's order; `where` indexes them
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first)] = np.arange(first.size)
    distinct = Run.grid(*(np.ascontiguousarray(np.asarray(k)[pick]) for k in runs))
    return distinct, rank[where.ravel()]


def simulate_many(demand, config, runs, metrics, forecast=None, losses=None):
    """Runs over a flat grid of policies, metrics only; threads over policies when it pays.

    The threads are Python threads running the compiled loop without the GIL, as many as numba's
    thread count (``numba.set_num_threads``) above capnb's one threshold
    (:data:`capnb.kernels._lazy.PARALLEL_MIN_WORK`): each run is independent and sequential, so the
    answer is the same on any number of threads. (A ``prange`` loop would compile the simulator a
    second time, seconds on a fresh install, and needs a thread-safe numba threading layer under
    dask.)

    Parameters
    ----------
    demand : float64[T]
        Arrival rate per step (requests/s), shared by every run.
    config : Config
        Settings shared by every run.
    runs : Run
        One array per knob, ``P`` runs (:meth:`Run.grid`).
    metrics : float64[P, len(METRICS)]
        Output.
    forecast : float64[T], optional
        Forecast demand per step (requests/s); ``PREDICTIVE`` needs it, the others ignore it.
    losses : Losses, optional
        Instances lost to preemption, the same events for every run (default: none).
    """
    distinct, where = _distinct(config, runs, losses)
    if distinct is not runs:  # each distinct run once, then every run its copy
        some = np.empty((distinct.up.shape[0], metrics.shape[1]))
        simulate_many(demand, config, distinct, some, forecast, losses)
        metrics[:] = some[where]
        return
    count = runs.up.shape[0]
    forecast = _forecast(demand, config, forecast)
    losses = _losses(losses)
    if threads_for(count, count * demand.shape[0]) < 2:
        _runs_serial(demand, config, runs, metrics, forecast, losses)
        return
    shared = _shared(demand, config)
    # Knative's counts per target, the predictive policy's reads per cold start: made once, so
    # a thread's piece may hold several of them. A few pieces per thread: runs differ in cost (a
    # bursty policy queues), so they balance.
    groups = _read_groups(demand, forecast, shared, config, runs)
    over_threads(
        lambda a, b: _grouped(
            demand, shared, groups, losses, config, runs, metrics, _NO_TIMELINE, a, b
        ),
        count,
        count * demand.shape[0],
        pieces=4,
    )

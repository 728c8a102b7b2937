"""Autoscaling policy rules: one small function per policy, over typed records.

The simulator (:mod:`capnb.kernels.autoscale`) runs the fleet and the backlog; at each decision
step it hands the policy's rule what a real controller would see and the policy's own state, and
applies the pool size the rule returns (clamped to ``[run.low, config.max_instances]``). A rule is

``rule(config, run, seen, state, ...) -> (target_pool, new_state)``

config : :class:`~capnb.kernels.autoscale_records.Config`
    Settings shared by every run (the policy's options, in whole steps).
run : :class:`~capnb.kernels.autoscale_records.Run`
    This run's knobs: threshold or target ``up``, scale-down window ``cooldown``, cold start
    ``cold``, pool floor ``low`` and warm spares ``buffer``.
seen : :class:`Seen`
    What the controller reads at the end of step ``seen.t``: the arrival rate over its window and
    the ready and starting instances of the pool it manages (warm spares excluded).
state
    The policy's own named tuple of scalars (:class:`ArticleState`, :class:`HpaState`,
    :class:`KnativeState`); the rule returns a new one. Windows of past decisions are preallocated
    arrays (:class:`Window`, :class:`Events`) that the rule updates in place.

``FIXED`` has no rule: it never decides. :func:`predictive_rule` also reads the forecast demand
(one rate per step, given to the simulator beside the demand) through :func:`predictive_table`,
its reads at every decision, made once per cold start. The formulas the rules apply
(:func:`article_decision`, :func:`hpa_replicas`, :func:`knative_desired`,
:func:`predictive_need`) take and return plain numbers and are tested on their own against the
references.

To change a policy, edit its rule (and its state record if it needs to remember more); the
simulator does not change, except where it takes a decision at rest as a quiet step: it compares
what the rule reads (``REST.key`` in :mod:`~capnb.kernels.autoscale_loop`, set by its ``at_rest``
and compared by its ``reads_as_rest``: the article's load band, the HPA's and the predictive
policy's desired count, Knative's pod counts), and a rule that reads or remembers more must be
compared there too (the tests on held rates catch a miss). numba's on-disk cache checks only the
file of the function it caches, so after editing this file remove the simulator's cached code
(``autoscale*`` in the numba cache directory, :func:`capnb.kernels._lazy.cache_dir`) or touch
``autoscale_loop.py``. Three things keep a rule as fast as the same lines written inside the
simulator's loop, and are worth keeping when editing one:

- a rule is declared ``@njit(inline="always")``: numba copies it into the loop's decision step
  before typing it, so its named tuples become scalars in registers and no call is made per
  decision;
- the loop's steps are compiled without numba's reference counting (``_nrt=False``, see
  :mod:`~capnb.kernels.autoscale_loop`): a rule may pass its windows around as it likes and costs
  no atomic operation per decision, but it must not allocate (an array made there does not
  compile): give it preallocated arrays, as the windows are;
- the loop is compiled with ``error_model="numpy"`` (no division raises), so that no path needs
  an exception's machinery. Every divisor is checked nonzero when the settings are validated.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._lazy import njit
from .autoscale_records import (
    ARTICLE,
    CONFIG_FIELDS,
    FIXED,
    FIXED_ELASTIC,
    HPA,
    KNATIVE,
    PREDICTIVE,
    Config,
    Run,
)

__all__ = [
    "ARTICLE",
    "CONFIG_FIELDS",
    "FIXED",
    "FIXED_ELASTIC",
    "HPA",
    "KNATIVE",
    "PREDICTIVE",
    "ArticleState",
    "Config",
    "Events",
    "HpaState",
    "KnativeState",
    "Run",
    "Seen",
    "Window",
    "article_decision",
    "article_ratio",
    "article_rule",
    "hpa_rate_limit",
    "hpa_replicas",
    "hpa_rule",
    "knative_bounds",
    "knative_desired",
    "knative_needs",
    "knative_over",
    "knative_rule",
    "new_events",
    "new_knative_state",
    "new_window",
    "predictive_desired",
    "predictive_need",
    "predictive_parts",
    "predictive_rate",
    "predictive_rule",
    "predictive_table",
    "window_push",
    "window_rest",
]

#: A step before every run: the step of an empty slot of a window or event log.
NEVER = -(1 << 40)
#: A step after every run.
NEVER_ENDS = 1 << 62


class Seen(NamedTuple):
    """What a controller reads at a decision, at the end of step ``t``."""

    t: int
    """The step that ends with this decision."""
    load_qps: float
    """Article, HPA: mean arrival rate over the last period (requests/s)."""
    stable_need: int
    """Knative: ``ceil(stable-window rate / target per pod)``, before the rate bounds."""
    panic_need: int
    """Knative: the same over the panic window."""
    pool: int
    """Instances the policy holds: ready and starting, warm spares excluded."""
    ready: int
    """Ready instances of the pool."""
    starting: int
    """Instances still starting (cold start under way)."""


# -- the article's policy (and fixed + elastic) --------------------------------------------------
class ArticleState(NamedTuple):
    """The article's engine between evaluations."""

    low_evals: int
    """Consecutive evaluations below the scale-down threshold."""
    vetoed: int
    """Evaluations so far whose scale-up the cold start vetoed (reported as a metric)."""


@njit(inline="always")
def article_ratio(load_qps, pool, per_instance_qps):
    """The article's load ratio: ``load_qps / (pool x per_instance_qps)`` (an empty pool: inf or 0)."""
    if pool > 0:
        return load_qps / (pool * per_instance_qps)
    return math.inf if load_qps > 0.0 else 0.0


@njit
def article_decision(load_qps, pool, per_instance_qps, up, down, low_evals, period, cooldown, veto):
    """The article's decision for one evaluation: ``(desired_pool, low_evals, vetoed)``.

    Parameters
    ----------
    load_qps : float
        Arrival rate (requests/s).
    pool : int
        Instances the policy holds (ready and starting); ``pool x per_instance_qps`` is the
        article's ``max_qps``.
    per_instance_qps, up, down : float
        Requests/s per instance and the scale-up and scale-down thresholds (load ratios).
    low_evals : int
        Consecutive evaluations below ``down`` before this one.
    period, cooldown : int
        Steps between evaluations and the sustained-low time: the low duration is ``low_evals x
        period`` steps and must exceed ``cooldown``.
    veto : bool
        Whether the cold start vetoes scaling up (the elasticity step's rule; the article then holds fixed
        capacity instead of scaling up).

    Returns
    -------
    desired_pool, low_evals, vetoed : int, int, bool
        Above ``up``: ``pool + ceil(pool x (ratio / up - 1))`` (at least one more) unless vetoed;
        below ``down`` for longer than ``cooldown``: ``pool - 1``; otherwise ``pool``. The caller
        clamps ``desired_pool`` to the pool bounds.
    """
    ratio = article_ratio(load_qps, pool, per_instance_qps)
    if ratio > up:
        if veto:
            return pool, 0, True
        extra = pool * (ratio / up - 1.0) if pool > 0 else load_qps / (up * per_instance_qps)
        # cap before converting: a near-zero pool facing a huge rate must not overflow an int
        add = 1 if extra <= 1.0 else (1 << 40 if extra > 1e12 else math.ceil(extra))
        return pool + add, 0, False
    if ratio < down:
        low_evals += 1
        if low_evals * period > cooldown:
            return pool - 1, low_evals, False
        return pool, low_evals, False
    return pool, 0, False


@njit(inline="always")
def article_rule(config, run, seen, state):
    """The article's policy at one evaluation: ``(target_pool, ArticleState)``.

    Load ratio = ``seen.load_qps / (seen.pool x per_instance_qps)`` (the pool counts starting
    instances); above ``run.up`` grow by :func:`article_decision`'s step, below
    ``config.scale_down_threshold`` for longer than ``run.cooldown`` steps shrink by one. Under
    ``ARTICLE`` a cold start longer than half the latency tolerance vetoes every scale-up (the
    article's advice to hold fixed capacity); ``FIXED_ELASTIC`` is the same rule without the veto,
    its floor ``run.low`` being the fixed part that carries the load through cold starts.

    Parameters
    ----------
    config : Config
        ``scale_down_threshold``, ``period_steps`` (between evaluations), ``tolerance_steps``.
    run : Run
        ``up`` (scale-up threshold), ``cooldown`` (sustained-low time), ``cold``.
    seen : Seen
        ``load_qps`` (mean rate over the period) and ``pool``.
    state : ArticleState

    Returns
    -------
    target_pool : int
    state : ArticleState
    """
    veto = config.policy == ARTICLE and run.cold >= config.veto_cold_steps
    target, low_evals, vetoed = article_decision(
        seen.load_qps,
        seen.pool,
        config.per_instance_qps,
        run.up,
        config.scale_down_threshold,
        state.low_evals,
        config.period_steps,
        run.cooldown,
        veto,
    )
    return target, ArticleState(low_evals, state.vetoed + vetoed)


# -- windows of past decisions: monotone queues, windowed max/min in O(1) amortised ---------------
class Window(NamedTuple):
    """A windowed maximum (or minimum) of recent decisions: a monotone queue in a ring.

    The values in the queue are monotone (decreasing for a maximum), so the front is the answer
    once entries older than the window are gone.
    """

    steps: np.ndarray
    """int64 ring: step of each queued entry."""
    values: np.ndarray
    """int64 ring: value of each queued entry."""
    ends: np.ndarray
    """int64[2]: first slot and length of the queue."""


@njit
def new_window(span, period):
    """An empty window for ``span`` steps of decisions taken every ``period`` steps."""
    size = span // period + 2  # every entry inside the window, plus the one coming in
    return Window(np.empty(size, np.int64), np.empty(size, np.int64), np.zeros(2, np.int64))


@njit
def _wrap(index, size):
    """``index % size`` for 0 <= index < 2 x size, without an integer division on the hot path."""
    return index - size if index >= size else index


@njit(inline="always")
def window_rest(window, span):
    """How long pushing the last value again returns the same answer: ``(until, back)``.

    Pushing the value last pushed replaces the queue's back entry (equal values leave), so the
    answer stays the front's until the front leaves the window, at step ``front + span``; with the
    back alone in the queue (or no window), forever (``until`` is then ``NEVER_ENDS``). ``back``
    is the back entry's slot, whose step such a push would renew (-1: no window).
    """
    if span <= 0:
        return NEVER_ENDS, -1
    first, length = window.ends[0], window.ends[1]
    back = _wrap(first + length - 1, window.steps.shape[0])
    if length <= 1:
        return NEVER_ENDS, back
    return window.steps[first] + span, back


@njit
def window_push(window, step, value, span, keep_max):
    """Record ``value`` at ``step``; return the max (or min) over entries with step > step - span.

    ``keep_max`` chooses a maximum (True) or a minimum. A ``span`` of 0 (no window) returns
    ``value`` and records nothing.
    """
    if span <= 0:
        return value
    steps, values = window.steps, window.values
    size = steps.shape[0]
    first, length = window.ends[0], window.ends[1]
    while length > 0:
        back = values[_wrap(first + length - 1, size)]
        if (back <= value) if keep_max else (back >= value):
            length -= 1
        else:
            break
    slot = _wrap(first + length, size)
    steps[slot] = step
    values[slot] = value
    length += 1
    while steps[first] <= step - span:
        first = _wrap(first + 1, size)
        length -= 1
    window.ends[0], window.ends[1] = first, length
    return values[first]


# -- Kubernetes HPA v2 ----------------------------------------------------------------------------
class HpaState(NamedTuple):
    """The HPA between syncs (its past recommendations and changes are in windows and a log)."""

    next_event: int
    """Slot of the event log that the next scale event goes to."""
    desired: int
    """The last sync's desired count, before stabilisation (-1: none yet)."""
    rec: int
    """The last sync's stabilised recommendation, before the rate policies (-1: none yet)."""


class Events(NamedTuple):
    """Recent scale events: a ring with room for one per sync over the longer rate-policy period."""

    steps: np.ndarray
    """int64: step of each event (``NEVER``: an empty slot)."""
    changes: np.ndarray
    """int64: instances added (positive) or removed (negative)."""


@njit
def new_events(config):
    """An empty event log for ``config``'s scale-up and scale-down policy periods."""
    size = max(config.up_period_steps, config.down_period_steps) // config.period_steps + 2
    return Events(np.full(size, NEVER, np.int64), np.zeros(size, np.int64))


@njit
def hpa_replicas(total_metric, target_per_pod, ready, unready, tolerance):
    """Kubernetes HPA's replica count for a per-pod metric, with ``unready`` pods still starting.

    ``ratio = (total_metric / ready) / target_per_pod``. Without unready pods, or when the ratio
    is at most 1, the desired count is ``ceil(ratio x ready)``, or the current ``ready + unready``
    when ``|1 - ratio| <= tolerance``. Scaling up with unready pods counts them at zero load: the
    ratio over ``ready + unready`` pods decides, and a change of direction or a ratio inside the
    tolerance keeps the current count. ``ready`` must be at least 1.
    """
    current = ready + unready
    ratio = total_metric / ready / target_per_pod
    if unready == 0 or ratio <= 1.0:
        if abs(1.0 - ratio) <= tolerance:
            return current
        return math.ceil(ratio * ready)
    new_ratio = total_metric / current / target_per_pod
    if abs(1.0 - new_ratio) <= tolerance or new_ratio < 1.0:
        return current
    return max(math.ceil(new_ratio * current), current)


@njit(inline="always")
def _changes_since(events, since):
    """Net change of the pool over the events after step ``since``."""
    total = 0
    for i in range(events.steps.shape[0]):
        if events.steps[i] > since:
            total += events.changes[i]
    return total


@njit(inline="always")
def hpa_rate_limit(config, run, seen, rec, events):
    """HPA's scale-up or scale-down rate policies and min/max replicas, applied to ``rec``.

    The policies (``selectPolicy: Max``) are measured from the pool as it was one policy period
    ago (``start``, from the recent events): scale-up allows the larger of ``start + up_pods`` and
    ``ceil(start x (1 + up_percent / 100))``, scale-down the smaller of ``start - down_pods`` and
    ``floor(start x (1 - down_percent / 100))`` (a value of -1: no such policy). A limit never
    reverses the direction, and the result stays within ``[run.low, config.max_instances]``.
    """
    current = seen.pool
    if rec > current:
        start = current - _changes_since(events, seen.t - config.up_period_steps)
        limit = -(1 << 40)
        if config.up_pods >= 0:
            limit = max(limit, start + config.up_pods)
        if config.up_percent >= 0:
            limit = max(limit, math.ceil(start * (1.0 + config.up_percent / 100.0)))
        limit = max(limit, current)
        return min(rec, min(config.max_instances, limit))
    if rec < current:
        start = current - _changes_since(events, seen.t - config.down_period_steps)
        limit = 1 << 40
        if config.down_pods >= 0:
            limit = min(limit, start - config.down_pods)
        if config.down_percent >= 0:
            limit = min(limit, math.floor(start * (1.0 - config.down_percent / 100.0)))
        limit = min(limit, current)
        return max(rec, max(run.low, limit))
    return rec


@njit(inline="always")
def hpa_rule(config, run, seen, state, up_window, down_window, events):
    """Kubernetes HPA v2 at one sync on a per-pod requests/s metric: ``(target_pool, HpaState)``.

    1. desired = :func:`hpa_replicas` of the mean rate over the sync period, target ``run.up x
       per_instance_qps`` per pod, starting pods counted as unready;
    2. stabilisation: the pool grows at most to the lowest desired count over the scale-up window
       (``config.up_stabilization_steps``) and shrinks at most to the highest over the
       scale-down window (``run.cooldown``); a window of 0 takes this sync's count alone;
    3. the rate policies (:func:`hpa_rate_limit`), when the pool changes; a change is logged in
       ``events`` for the rate policies of the next syncs.

    Parameters
    ----------
    config : Config
        ``hpa_tolerance``, ``up_stabilization_steps``, the rate policies (``up_pods``,
        ``up_percent``, ``up_period_steps`` and their scale-down counterparts), ``max_instances``.
    run : Run
        ``up`` (target utilisation), ``cooldown`` (scale-down stabilisation window), ``low``.
    seen : Seen
        ``load_qps`` (mean rate over the sync period), ``pool``, ``ready``, ``starting``.
    state : HpaState
    up_window, down_window : Window
        Recent desired counts, for the stabilisation windows; updated in place.
    events : Events
        Recent scale events; updated in place.

    Returns
    -------
    target_pool : int
    state : HpaState
    """
    desired = hpa_replicas(
        seen.load_qps,
        run.up * config.per_instance_qps,
        seen.ready,
        seen.starting,
        config.hpa_tolerance,
    )
    ceiling = window_push(down_window, seen.t, desired, run.cooldown, True)
    floor = window_push(up_window, seen.t, desired, config.up_stabilization_steps, False)
    rec = min(max(seen.pool, floor), ceiling)
    target = rec
    slot = state.next_event
    if rec != seen.pool:  # most syncs change nothing: no rate policies, nothing to log
        target = hpa_rate_limit(config, run, seen, rec, events)
        if target != seen.pool:
            events.steps[slot] = seen.t
            events.changes[slot] = target - seen.pool
            slot += 1
    return target, HpaState(_wrap(slot, events.steps.shape[0]), desired, rec)


# -- Knative KPA ----------------------------------------------------------------------------------
class KnativeState(NamedTuple):
    """The KPA between ticks: panic mode, and the rate bounds of the last ready count."""

    panicking: bool
    """In panic mode: no scale-down."""
    panic_since: int
    """Last step the panic condition held."""
    max_panic: int
    """Largest count desired during this panic."""
    pods: int
    """Ready pods (at least 1) that the three bounds below were computed for (-1: none yet)."""
    most: int
    """``ceil(max_scale_up_rate x pods)``."""
    least: int
    """``floor(pods / max_scale_down_rate)``."""
    panic_limit: float
    """``panic_threshold x pods``."""


@njit
def knative_desired(stable_qps, panic_qps, target_per_pod, ready, max_up_rate, max_down_rate):
    """Knative KPA's ``(desired_stable, desired_panic, needed_panic)`` pod counts for one tick.

    ``ready`` of 0 counts as 1, as Knative does. The desired counts are kept within
    ``[floor(ready / max_down_rate), ceil(ready x max_up_rate)]``; ``needed_panic`` is the
    unclamped ``ceil(panic_qps / target_per_pod)`` that the panic test compares with ``ready``.
    """
    pods = max(ready, 1)
    most = math.ceil(max_up_rate * pods)
    least = math.floor(pods / max_down_rate)
    stable = math.ceil(stable_qps / target_per_pod)
    panic = math.ceil(panic_qps / target_per_pod)
    return min(max(stable, least), most), min(max(panic, least), most), panic


@njit
def knative_needs(demand, arrived, per_pod, stable_steps, panic_window):
    """Knative's unclamped pod counts at every step: ``(stable, panic)``, int64[T] each.

    ``ceil(window rate / per_pod)`` over the stable and panic windows (shorter at the start);
    the stable window is read from ``arrived``, the cumulative rate (``arrived[i] = demand[0] +
    ... + demand[i - 1]``), as a metrics pipeline reads a rate from a counter. They depend on the
    demand, the windows and the per-pod target only, not on the fleet, so a sweep computes them
    once per target instead of once per run and step; :func:`knative_rule` reads them in
    ``seen.stable_need`` and ``seen.panic_need``.
    """
    n_steps = demand.shape[0]
    stable = np.empty(n_steps, np.int64)
    panic = np.empty(n_steps, np.int64)
    for t in range(n_steps):
        seen = min(t + 1, stable_steps)
        recent = min(t + 1, panic_window)
        panic_sum = 0.0
        for k in range(t - recent + 1, t + 1):
            panic_sum += demand[k]
        stable[t] = math.ceil((arrived[t + 1] - arrived[t + 1 - seen]) / seen / per_pod)
        panic[t] = math.ceil(panic_sum / recent / per_pod)
    return stable, panic


@njit(inline="always")
def new_knative_state(pool):
    """The KPA's state at the start: in panic mode when more than one pod is ready, holding it."""
    return KnativeState(pool > 1, -1, pool, -1, 0, 0, 0.0)


@njit(inline="always")
def knative_bounds(config, ready, state):
    """``(pods, most, least, panic_limit)`` for ``ready`` pods: the state's, unless they changed."""
    pods = max(ready, 1)
    if pods == state.pods:
        return pods, state.most, state.least, state.panic_limit
    most = math.ceil(config.max_scale_up_rate * pods)
    least = math.floor(pods / config.max_scale_down_rate)
    return pods, most, least, config.panic_threshold * pods


@njit(inline="always")
def knative_over(config, needed, pods, panic_limit):
    """The panic condition ``needed / pods >= panic_threshold``, without dividing unless a near tie."""
    if needed > panic_limit * (1.0 + 1e-12):
        return True
    if needed < panic_limit * (1.0 - 1e-12):
        return False
    return needed / pods >= config.panic_threshold


@njit(inline="always")
def knative_rule(config, run, seen, state, delay):
    """Knative's KPA at one tick, in requests/s mode: ``(target_pool, KnativeState)``.

    1. the stable and panic counts (``seen.stable_need``, ``seen.panic_need``) are kept within
       the rate bounds of :func:`knative_desired` around the ready pods;
    2. panic when the panic count needs at least ``panic_threshold`` x the ready pods; panic ends
       once the condition has not held for a whole stable window (the surge has had time to show
       in the stable average). While panicking the count never goes down: the largest count so
       far is held;
    3. the scale-down delay (``run.cooldown`` steps): the highest count over the delay, from
       ``delay`` (:class:`Window`, updated in place).

    The bounds depend only on the ready pods, so the state keeps them until those change: a tick
    usually divides nothing.

    Parameters
    ----------
    config : Config
        ``stable_steps``, ``panic_threshold``, ``max_scale_up_rate``, ``max_scale_down_rate``.
    run : Run
        ``cooldown`` (scale-down delay); ``up`` (target utilisation) is in ``seen``'s counts.
    seen : Seen
        ``stable_need`` and ``panic_need`` (:func:`knative_needs`), ``ready``.
    state : KnativeState
    delay : Window
        Recent counts, for the scale-down delay; updated in place.

    Returns
    -------
    target_pool : int
    state : KnativeState
    """
    pods, most, least, panic_limit = knative_bounds(config, seen.ready, state)
    stable_pods = min(max(seen.stable_need, least), most)
    panic_pods = min(max(seen.panic_need, least), most)
    over = knative_over(config, seen.panic_need, pods, panic_limit)
    panicking, panic_since, max_panic = state.panicking, state.panic_since, state.max_panic
    if over:  # enter panic, or extend it
        panicking = True
        panic_since = seen.t
    elif panicking and panic_since + config.stable_steps < seen.t:
        panicking = False
        max_panic = 0
    target = stable_pods
    if panicking:
        target = max(target, panic_pods, max_panic)
        max_panic = target
    target = window_push(delay, seen.t, target, run.cooldown, True)
    return target, KnativeState(panicking, panic_since, max_panic, pods, most, least, panic_limit)


# -- predictive: the forecast one cold start ahead, corrected by the observed error --------------
@njit
def predictive_parts(forecast, t, period, cold):
    """The two forecast reads of the decision ending step ``t``: ``(ahead, forecast_mean)``.

    ``ahead``: the forecast's largest rate over steps ``t + 1`` to ``t + period + cold`` (cut at
    the end of the series; at the last step, the forecast of that step); ``forecast_mean``: its
    mean over the last ``period`` steps (added left to right, as the simulator adds the demand).
    Neither depends on the fleet: a sweep reads them once per cold start for every run
    (:func:`predictive_table`).
    """
    last_step = forecast.shape[0] - 1
    first = min(t + 1, last_step)
    last = min(t + period + cold, last_step)
    ahead = forecast[first]
    for k in range(first + 1, last + 1):
        if forecast[k] > ahead:
            ahead = forecast[k]
    seen = 0.0
    for k in range(t - period + 1, t + 1):
        seen += forecast[k]
    return ahead, seen / period


@njit
def predictive_table(forecast, period, cold):
    """:func:`predictive_parts` at every decision step ``d x period + period - 1``: two float64 arrays.

    Decisions fall on the same steps in every run (every ``period`` steps, after a full period), so
    a sweep computes these once per cold start instead of once per run and decision.
    """
    count = forecast.shape[0] // period
    ahead = np.empty(count)
    mean = np.empty(count)
    for d in range(count):
        ahead[d], mean[d] = predictive_parts(forecast, d * period + period - 1, period, cold)
    return ahead, mean


@njit
def predictive_rate(ahead, forecast_mean, load_qps):
    """The rate to provision: ``ahead`` plus the observed load above the forecast, if any."""
    error = load_qps - forecast_mean
    return ahead + error if error > 0.0 else ahead


@njit
def predictive_need(forecast, t, period, cold, load_qps):
    """The rate (requests/s) the predictive policy provisions for at the decision ending step ``t``.

    ``ahead``: the forecast's largest rate over steps ``t + 1`` to ``t + period + cold`` (cut at
    the end of the series; at the last step, the forecast of that step): instances started now
    serve from ``t + 1 + cold``, the next decision's from ``t + period + 1 + cold``, and instances
    stopped now stop at ``t + 1``, so this span is what this decision alone must cover.
    ``error``: the observed mean rate ``load_qps`` over the last ``period`` steps minus the
    forecast's mean over the same steps (added left to right, as the simulator adds the demand),
    counted only when positive: the load above the forecast is added to what is provisioned.
    Returns ``ahead + max(error, 0)``.
    """
    ahead, forecast_mean = predictive_parts(forecast, t, period, cold)
    return predictive_rate(ahead, forecast_mean, load_qps)


@njit(inline="always")
def predictive_desired(config, run, t, load_qps, table):
    """The predictive policy's desired count at the decision ending step ``t``, before the window.

    ``ceil(rate / (run.up x per_instance_qps))`` of :func:`predictive_rate` at the decision's
    forecast reads (``table``, :func:`predictive_table`) and the observed mean rate ``load_qps``.
    """
    d = t // config.period_steps
    rate = predictive_rate(table[0][d], table[1][d], load_qps)
    need = rate / (run.up * config.per_instance_qps)
    # cap before converting: a huge forecast must not overflow an int
    return 1 << 40 if need > 1e12 else math.ceil(need)


@njit(inline="always")
def predictive_rule(config, run, seen, table, down):
    """The predictive policy at one evaluation: the target pool (it keeps no state of its own).

    1. the rate to provision: :func:`predictive_need` - the forecast over the span until the next
       decision's instances can serve (one cold start ahead), plus the observed load above the
       forecast over the last period (a reactive correction for the forecast's error);
    2. desired = ``ceil(rate / (run.up x per_instance_qps))`` (``run.up`` is the target
       utilisation, as for the HPA);
    3. scale-down stabilisation: the largest desired count over the last ``run.cooldown`` steps
       (``down``, a :class:`Window` updated in place), so the pool follows the forecast's troughs
       after that window.

    Parameters
    ----------
    config : Config
        ``period_steps`` (between evaluations), ``per_instance_qps``.
    run : Run
        ``up``, ``cooldown``, ``cold``.
    seen : Seen
        ``t`` and ``load_qps`` (mean observed rate over the period).
    table : (float64[D], float64[D])
        :func:`predictive_table` of the forecast for ``run.cold``: the forecast's two reads at
        each decision (the same arithmetic as :func:`predictive_need`, done once per sweep).
    down : Window

    Returns
    -------
    target_pool : int
    """
    desired = predictive_desired(config, run, seen.t, seen.load_qps, table)
    return window_push(down, seen.t, desired, run.cooldown, True)

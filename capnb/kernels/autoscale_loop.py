"""The autoscaling simulator's loop: one run, step by step, as a driver of named steps.

:func:`run_one` is the driver (:mod:`capnb.kernels.autoscale` describes the model, and
:func:`runs` is the one compiled entry point). It calls, in this order:

:func:`quiet_stretch`
    Steps that serve their arrivals in full and change nothing else, taken at once, with the
    decisions at rest among them (:func:`decisions_at_rest`) and Knative's ticks that change
    nothing (:func:`quiet_tick`).
:func:`saturated_stretch`
    Steps of one held rate above the ready capacity with the queue full, taken at once.
:func:`full_step`
    One step in full: :func:`cohort_ready`, :func:`preempt`, :func:`serve`,
    :func:`drop_expired`, :func:`tally`, then :func:`decide` (the policy's rule from
    :mod:`capnb.kernels.autoscale_rules` through :func:`apply_rule`, and :func:`at_rest`) and
    :func:`scale` (:func:`start`, :func:`cancel_starting`, :func:`stop_ready`).

The run's state (:class:`State`) is four records that the steps change in place - numpy structured
scalars, which numba passes as pointers: :data:`FLEET` (the instances and their totals),
:data:`QUEUE` (the backlog and its totals), :data:`CLOCK` (the step, the countdown to the next
decision, the instance totals) and :data:`REST` (the decision at rest) - and the arrays beside
them: the fleet's :class:`Cohorts`, the backlog's ring and the policy's :class:`Windows`. What a
run reads is a :class:`Reads`; the policies' own states are the rules' named tuples (:class:`Rules`),
replaced at each decision.

Each step holds the lines of the former one-body loop in their order, so every float is the same
sum of the same terms: the results are bit for bit those of that loop, and it runs as fast or
faster (``docs/development.md``; ``python -m benchmarks.kernel_split`` measures both in one
run). How the steps are compiled is what keeps it so:

- a step (``_step``) is compiled on its own by numba and copied into its caller by LLVM
  (``forceinline``): numba types it once, and no call is made. Copying every step into the driver
  with numba's own inliner (``inline="always"``) compiled as fast but took 22 s to compile
  (numba's inliner re-reads each copy into an ever larger function), and steps called as
  functions cost about 50 ns a call (numba passes each array of a tuple as 7 words): 20 times
  slower on the article's sweep. A few lines called from one small caller are copied by numba
  (``_piece``), which costs little there;
- the loop counts no references (``_nrt=False``): numba would otherwise add an atomic increment
  and decrement of every array a step is given, per call, and removes them only where it can
  prove them paired (4 times slower when it could not). The steps never allocate; every array is
  made in :func:`runs`, which outlives the run;
- no division raises (``error_model="numpy"``): every divisor is checked when the settings are
  validated.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._lazy import njit
from .autoscale_records import ARTICLE, FIXED, HPA, KNATIVE, PREDICTIVE, Losses, Run
from .autoscale_rules import (
    NEVER_ENDS,
    ArticleState,
    Events,
    HpaState,
    KnativeState,
    Seen,
    Window,
    _wrap,
    article_ratio,
    article_rule,
    hpa_replicas,
    hpa_rule,
    knative_bounds,
    knative_over,
    knative_rule,
    new_events,
    new_knative_state,
    new_window,
    predictive_desired,
    predictive_rule,
    window_rest,
)

__all__ = [
    "BLOCK",
    "CLOCK",
    "FLEET",
    "QUEUE",
    "REST",
    "Cohorts",
    "Reads",
    "Rules",
    "State",
    "Windows",
    "run_one",
    "runs",
]

#: Steps per block of the demand's largest rates: a quiet stretch passes a block whose largest
#: rate fits at once.
BLOCK = 64

_COUNT, _REAL = np.int64, np.float64

#: A step of the loop (see the module's notes): compiled on its own, copied into its caller by
#: LLVM, without reference counting, callable only from compiled code.
_step = njit(
    error_model="numpy",
    _nrt=False,
    forceinline=True,
    no_cpython_wrapper=True,
    no_cfunc_wrapper=True,
)
#: A few lines copied into their one small caller by numba.
_piece = njit(inline="always")

#: The instances: counts, the cohort structures' cursors, the next loss and the fleet's totals
#: (instances, events, steps).
FLEET = np.dtype(
    [
        ("ready", _COUNT),  # instances ready, warm spares included
        ("starting", _COUNT),  # instances whose cold start is under way
        ("start_first", _COUNT),  # FIFO of starting cohorts: first slot and length
        ("start_len", _COUNT),
        ("ready_top", _COUNT),  # stack of ready cohorts: its size
        ("next_loss", _COUNT),  # the next preemption event
        ("started", _COUNT),
        ("stopped", _COUNT),
        ("up_events", _COUNT),
        ("down_events", _COUNT),
        ("thrash", _COUNT),
        ("cancelled", _COUNT),
        ("wasted", _COUNT),  # cold-start steps of instances cancelled or stopped as thrash
        ("peak_instances", _COUNT),
        ("preempted", _COUNT),
    ]
)
#: The backlog: a FIFO ring of cohorts by arrival step (first step, first slot, length), the
#: requests waiting, and the queue's totals (requests, steps).
QUEUE = np.dtype(
    [
        ("first", _COUNT),
        ("slot", _COUNT),
        ("length", _COUNT),
        ("backlog", _REAL),
        ("late", _REAL),
        ("dropped", _REAL),
        ("peak_backlog", _REAL),
        ("breach_steps", _COUNT),
        ("dropping_steps", _COUNT),
    ]
)
#: The step, the countdown to the next decision (steps), and the totals over steps
#: (instance-steps, steps).
CLOCK = np.dtype(
    [
        ("t", _COUNT),
        ("countdown", _COUNT),
        ("instance_steps", _COUNT),
        ("starting_steps", _COUNT),
        ("panic_steps", _COUNT),
    ]
)
#: The decision at rest: the last decision changed nothing, and one that reads the same (``key``:
#: the article's load band, the HPA's and the predictive policy's desired count, Knative's stable
#: count, with its panic count in ``key2``) with the fleet unchanged answers the same until step
#: ``until`` (-1: not at rest), when the front of one of its windows leaves (window_rest). A quiet
#: stretch takes such decisions as quiet steps, renewing the step of the windows' back entries
#: (``back``, ``back2``) as the push would.
REST = np.dtype(
    [("until", _COUNT), ("key", _COUNT), ("key2", _COUNT), ("back", _COUNT), ("back2", _COUNT)]
)


class Cohorts(NamedTuple):
    """The fleet's cohorts: a FIFO ring of starting ones and a stack of ready ones."""

    start_ready_at: np.ndarray
    """int64: the step each starting cohort becomes ready."""
    start_count: np.ndarray
    """int64: its instances."""
    ready_since: np.ndarray
    """int64: the step each ready cohort became ready."""
    ready_count: np.ndarray
    """int64: its instances."""


class Reads(NamedTuple):
    """What a run reads and never changes: the demand and what is derived from it once per grid."""

    demand: np.ndarray
    """float64[T]: arrival rate per step (requests/s)."""
    block_max: np.ndarray
    """float64: the largest rate of each block of :data:`BLOCK` steps (requests/s)."""
    loads: np.ndarray
    """float64: the mean rate over each decision's period (requests/s)."""
    next_read: np.ndarray
    """int64: for each decision, the first one after it that reads otherwise."""
    table: tuple
    """The predictive policy's forecast reads at each decision (empty for the others)."""
    stable_need: np.ndarray
    """int64: Knative's stable-window pod count at each step (empty for the others)."""
    panic_need: np.ndarray
    """int64: the same over the panic window."""
    losses: Losses
    """The instances lost to preemption (empty arrays: none)."""


class Windows(NamedTuple):
    """The policy's windows of past decisions, updated in place."""

    down: Window
    """HPA, predictive: scale-down stabilisation; Knative: the scale-down delay."""
    up: Window
    """HPA: scale-up stabilisation."""
    events: Events
    """HPA: recent scale events, for the rate policies."""


class Rules(NamedTuple):
    """The policies' own states, replaced at each decision (only the run's policy's changes)."""

    article: ArticleState
    hpa: HpaState
    knative: KnativeState


class State(NamedTuple):
    """What a run changes in place: its four records and the arrays beside them."""

    fleet: np.void
    """:data:`FLEET` record."""
    queue: np.void
    """:data:`QUEUE` record."""
    clock: np.void
    """:data:`CLOCK` record."""
    rest: np.void
    """:data:`REST` record."""
    cohorts: Cohorts
    ring: np.ndarray
    """float64[tolerance + 1]: the requests of the backlog's cohorts, by arrival step."""
    windows: Windows


# -- the driver -----------------------------------------------------------------------------------
@njit(nogil=True)
def runs(demand, shared, reads, losses, config, grid, metrics, timeline, first, stop):
    """Runs ``first..stop-1`` of ``grid``, which read alike (``reads``), without the GIL.

    The one compiled entry point of the loop: a thread gets a range of runs, and
    :func:`~capnb.kernels.autoscale.simulate` is a grid of one run with a timeline, so the loop is
    compiled (and optimised by LLVM) once, not per caller. Every array the loop uses is made here
    and outlives it (a record does not keep its array alive, and the loop counts no references).
    """
    stable_need, panic_need, table, next_read = reads
    given = Reads(demand, shared[1], shared[2], next_read, table, stable_need, panic_need, losses)
    fleet, queue = np.zeros(1, FLEET), np.zeros(1, QUEUE)
    clock, rest = np.zeros(1, CLOCK), np.zeros(1, REST)
    for i in range(first, stop):
        run = Run(grid.up[i], grid.cooldown[i], grid.cold[i], grid.low[i], grid.buffer[i])
        state = State(
            fleet[0], queue[0], clock[0], rest[0], new_cohorts(config, run),
            np.zeros(config.tolerance_steps + 1), new_windows(config, run),
        )  # fmt: skip
        run_one(given, shared[0], config, run, state, metrics[i], timeline)


@_step
def run_one(reads, arrivals, config, run, state, metrics, timeline):
    """One run: the fleet and the backlog step by step, the policy's rule at its decisions.

    ``arrivals`` is the requests over the trace; ``state`` the run's records (any values: they are
    set here) and new arrays; ``metrics`` gets the run's totals in the order of
    :data:`~capnb.kernels.autoscale_records.METRICS`, and ``timeline`` (unless empty) each step.
    """
    pool = start_fleet(state.fleet, state.cohorts, reads.demand, config, run)
    start_queue(state.queue)
    start_clock(state.clock, state.rest, config)
    rules = Rules(
        ArticleState(0, 0),
        HpaState(0, -1, -1),
        new_knative_state(pool if config.policy == KNATIVE else 0),
    )
    clock, n_steps = state.clock, reads.demand.shape[0]
    while clock.t < n_steps:
        if may_be_quiet(config, state.queue, clock, state.rest):
            rules = quiet_stretch(reads, config, run, state, rules, timeline)
            if clock.t == n_steps:
                break
        if is_saturated(reads, config, state.fleet, state.queue, state.ring, clock.t):
            rules = saturated_stretch(reads, config, run, state, rules, timeline)
            if clock.t == n_steps:
                break
        rules = full_step(reads, config, run, state, rules, timeline)
    write_metrics(metrics, arrivals, state.fleet, state.queue, clock, rules.article)


@_step
def full_step(reads, config, run, state, rules, timeline):
    """Step ``clock.t`` in full: the fleet changes, the backlog is served, the policy decides."""
    fleet, queue, clock, rest, cohorts, ring, _ = state
    t = clock.t
    cohort_ready(fleet, cohorts, rest, t)
    lost = preempt(fleet, cohorts, reads.losses, rest, t)
    arriving = reads.demand[t] * config.step_s
    served, breached = serve(queue, ring, arriving, fleet.ready * _per_step(config), t)
    dropped = drop_expired(queue, ring, t, config.tolerance_steps)
    tally(fleet, queue, clock, breached, rules.knative.panicking)
    if timeline.ready.shape[0] > 0:
        _record(timeline, t, fleet.ready, fleet.starting, served, dropped, queue.backlog, breached)
    pool = fleet.ready + fleet.starting - run.buffer
    target, rules = decide(reads, config, run, state, rules, pool, lost)
    if t + 1 < reads.demand.shape[0]:  # the last step's decision acts after the run: not taken
        scale(fleet, cohorts, target, pool, t, run.cold, config.thrash_steps)
    clock.t = t + 1
    return rules


@_piece
def _per_step(config):
    """Requests one ready instance serves in a step."""
    return config.per_instance_qps * config.step_s


# -- the state at the start -----------------------------------------------------------------------
@njit
def new_cohorts(config, run):
    """Room for every starting cohort (one per step of a cold start) and every ready one."""
    most = config.max_instances + run.buffer + 2
    return Cohorts(
        np.empty(run.cold + 2, np.int64),
        np.empty(run.cold + 2, np.int64),
        np.empty(most, np.int64),
        np.empty(most, np.int64),
    )


@njit
def new_windows(config, run):
    """The policy's windows, empty."""
    return Windows(
        new_window(run.cooldown, config.period_steps),
        new_window(config.up_stabilization_steps, config.period_steps),
        new_events(config),
    )


@_piece
def start_fleet(fleet, cohorts, demand, config, run):
    """The fleet at the start, all ready: the pool the first step needs, and the warm spares.

    The pool is ``ceil(demand[0] / (run.up x per_instance_qps))`` within ``[run.low,
    config.max_instances]`` (``FIXED``: ``run.low``); it is returned.
    """
    low, high = run.low, config.max_instances
    if config.policy == FIXED:
        pool = low
    else:
        need = demand[0] / (run.up * config.per_instance_qps)
        pool = low if need <= low else (high if need >= high else math.ceil(need))
        pool = min(max(pool, low), high)
    ready = pool + run.buffer
    fleet.ready, fleet.starting = ready, 0
    fleet.start_first, fleet.start_len = 0, 0
    cohorts.ready_since[0] = -config.thrash_steps - 1  # ready since before the run: never thrash
    cohorts.ready_count[0] = ready
    fleet.ready_top = 1
    fleet.next_loss = 0
    fleet.started, fleet.stopped, fleet.up_events, fleet.down_events = 0, 0, 0, 0
    fleet.thrash, fleet.cancelled, fleet.wasted, fleet.preempted = 0, 0, 0, 0
    fleet.peak_instances = ready
    return pool


@_piece
def start_queue(queue):
    """An empty backlog (its ring is new) and zero totals."""
    queue.first, queue.slot, queue.length = 0, 0, 0
    queue.backlog = queue.late = queue.dropped = queue.peak_backlog = 0.0
    queue.breach_steps = queue.dropping_steps = 0


@_piece
def start_clock(clock, rest, config):
    """Step 0, a full period to the first decision, zero totals, and no decision at rest."""
    clock.t = 0
    clock.countdown = config.period_steps
    clock.instance_steps = clock.starting_steps = clock.panic_steps = 0
    rest.until = -1
    rest.key = rest.key2 = 0
    rest.back = rest.back2 = -1


# -- quiet stretches: every arrival served in its step --------------------------------------------
@_piece
def may_be_quiet(config, queue, clock, rest):
    """Whether a quiet stretch may start: nothing queued, and a decision that may be taken in one.

    A policy that decides every step leaves no quiet stretch unless at rest; Knative's ticks that
    change nothing are taken inside one.
    """
    if queue.length != 0:
        return False
    look_ahead = config.policy in (FIXED, KNATIVE) or config.period_steps > 1
    return look_ahead or rest.until > clock.t


@_step
def quiet_stretch(reads, config, run, state, rules, timeline):
    """Steps from ``clock.t`` that only serve their arrivals in full, taken at once.

    Nothing is queued, and no cohort becomes ready, no loss and no decision that must run in full
    comes before ``limit``, so a step only serves its arrivals while they fit (blocks of steps
    whose largest rate fits pass whole). A decision at rest is taken here, with every later one
    that reads the same, and so is a Knative tick that changes nothing. Moves the clock to the
    first step that runs in full; returns the rules' states.
    """
    demand, step_s, period = reads.demand, config.step_s, config.period_steps
    fleet, clock = state.fleet, state.clock
    t = clock.t
    limit = _limit(reads, fleet, state.cohorts)
    decide_at = t + clock.countdown - 1
    end = limit
    if config.policy != FIXED and decide_at < end:
        end = decide_at
    capacity = fleet.ready * _per_step(config)
    article, knative = rules.article, rules.knative
    k = t
    while True:
        stop = _fit(demand, reads.block_max, k, end, step_s, capacity)
        _record_quiet(timeline, demand, k, stop, step_s, fleet)
        k = stop
        if k < end or end == limit:
            break  # arrivals that do not fit, or a step that runs in full
        # k decides, before anything else happens
        if demand[k] * step_s > capacity:
            break
        if k < state.rest.until and reads_as_rest(reads, config, run, fleet, state.rest, k):
            k, article = decisions_at_rest(reads, config, run, state, article, timeline, k, limit)
        elif config.policy == KNATIVE and not knative.panicking:
            held, knative = quiet_tick(reads, config, run, state, knative, k)
            if not held:
                break
            _record_quiet(timeline, demand, k, k + 1, step_s, fleet)
            k += 1
        else:
            break
        decide_at = k + period - 1
        end = decide_at if decide_at < limit else limit
    if k > t:
        _account(clock, fleet, k - t, knative.panicking, config.policy, k, decide_at)
    return Rules(article, rules.hpa, knative)


@_step
def decisions_at_rest(reads, config, run, state, article, timeline, k, limit):
    """The decision at rest ending step ``k``, and every later one that reads the same.

    They end before the rest ends, the ``limit`` or arrivals that do not fit. Returns the step
    after the last decision taken and the article's new state.
    """
    period, fleet, rest = config.period_steps, state.fleet, state.rest
    capacity = fleet.ready * _per_step(config)
    d = k // period
    last = reads.next_read[d] - 1
    last = min(last, (rest.until - period) // period, (limit - period) // period)
    stop = _fit(reads.demand, reads.block_max, k, last * period + period, config.step_s, capacity)
    last = min(last, (stop - period) // period)
    stop = last * period + period  # the step after the last decision taken
    _record_quiet(timeline, reads.demand, k, stop, config.step_s, fleet)
    article = _taken_at_rest(config, run, rest, state.windows, stop - 1, last - d + 1, article)
    return stop, article


@_step
def quiet_tick(reads, config, run, state, knative, k):
    """Knative's tick ending step ``k`` if it changes nothing: ``(taken, state)``.

    It changes nothing when the panic condition does not hold and the delayed count is the pool;
    its state and delay window are then updated as knative_rule would, and it is at rest.
    """
    fleet, rest, down = state.fleet, state.rest, state.windows.down
    pool = fleet.ready + fleet.starting - run.buffer
    pods, most, least, panic_limit = knative_bounds(config, fleet.ready - run.buffer, knative)
    if knative_over(config, reads.panic_need[k], pods, panic_limit):
        return False, knative
    wanted = min(max(reads.stable_need[k], least), most)
    low, high = run.low, config.max_instances
    if run.cooldown > 0:
        if not delay_holds(down, k, wanted, run.cooldown, low, high, pool):
            return False, knative
    elif min(max(wanted, low), high) != pool:
        return False, knative
    knative = KnativeState(
        False, knative.panic_since, knative.max_panic, pods, most, least, panic_limit
    )
    # a tick that changed nothing: at rest
    rest.until, rest.back = window_rest(down, run.cooldown)
    rest.key, rest.key2 = reads.stable_need[k], reads.panic_need[k]
    return True, knative


@_step
def delay_holds(delay, k, wanted, cooldown, low, high, pool):
    """Whether Knative's delayed count at tick ``k`` holds the pool; if so, the tick is pushed.

    The delayed count is this tick's ``wanted``, or the first entry of the delay window still
    inside it if larger. If it is the pool (clamped to ``[low, high]``), ``wanted`` is pushed as
    window_push would push it, on the window's arrays held in locals.
    """
    steps, values, ends = delay
    size = steps.shape[0]
    first, length = ends[0], ends[1]
    front, left = first, length
    while left > 0 and steps[front] <= k - cooldown:
        front = _wrap(front + 1, size)
        left -= 1
    held = wanted
    if left > 0 and values[front] > wanted:
        held = values[front]
    if min(max(held, low), high) != pool:
        return False
    while length > 0:
        if values[_wrap(first + length - 1, size)] > wanted:
            break
        length -= 1
    slot = _wrap(first + length, size)
    steps[slot] = k
    values[slot] = wanted
    length += 1
    while steps[first] <= k - cooldown:
        first = _wrap(first + 1, size)
        length -= 1
    ends[0], ends[1] = first, length
    return True


# -- saturated stretches: a full queue under a held rate ------------------------------------------
@_piece
def is_saturated(reads, config, fleet, queue, ring, t):
    """Whether step ``t`` starts a saturated stretch.

    The queue holds ``tolerance`` cohorts of this step's arrivals, more than the ready instances
    serve in a step.
    """
    tolerance = config.tolerance_steps
    if tolerance <= 0 or queue.length != tolerance or queue.first != t - tolerance:
        return False
    arriving = reads.demand[t] * config.step_s
    if not arriving > fleet.ready * _per_step(config):
        return False
    return _all_equal(ring, queue.slot, queue.length, arriving)


@_step
def saturated_stretch(reads, config, run, state, rules, timeline):
    """Steps from ``clock.t`` of a saturated stretch, taken at once; returns the rules' states.

    Each step serves the oldest cohort in part and drops the rest of it, and the queue is as it
    was, one step on, while the arrivals, the fleet and the policy (at rest) stay: the same float
    operations per step as a full step, without the queue's bookkeeping.
    """
    fleet, queue, clock, rest = state.fleet, state.queue, state.clock, state.rest
    t = clock.t
    demand, step_s = reads.demand, config.step_s
    arriving = demand[t] * step_s
    capacity = fleet.ready * _per_step(config)
    dropped_now = arriving - capacity
    limit = _limit(reads, fleet, state.cohorts)
    decide_at = t + clock.countdown - 1
    record = timeline.ready.shape[0] > 0
    backlog, late, dropped, peak = queue.backlog, queue.late, queue.dropped, queue.peak_backlog
    article = rules.article
    k = t
    while k < limit and demand[k] * step_s == arriving:
        if config.policy != FIXED and k == decide_at:
            if k >= rest.until or not reads_as_rest(reads, config, run, fleet, rest, k):
                break  # this decision runs in full
            article = _taken_at_rest(config, run, rest, state.windows, k, 1, article)
            decide_at = k + config.period_steps
        backlog -= capacity
        backlog += arriving
        backlog = backlog - dropped_now
        late += capacity
        dropped += dropped_now
        if backlog > peak:
            peak = backlog
        if record:
            _record(timeline, k, fleet.ready, fleet.starting, capacity, dropped_now, backlog, True)
        k += 1
    queue.backlog, queue.late, queue.dropped, queue.peak_backlog = backlog, late, dropped, peak
    if k > t:
        queue.breach_steps += k - t
        queue.dropping_steps += k - t
        _account(clock, fleet, k - t, rules.knative.panicking, config.policy, k, decide_at)
        queue_moves_on(queue, state.ring, k - t, arriving)
    return Rules(article, rules.hpa, rules.knative)


@_piece
def queue_moves_on(queue, ring, steps, arriving):
    """The queue one step on per step of a saturated stretch: its free slot moves on as many."""
    size = ring.shape[0]
    ring[_wrap(queue.slot + queue.length, size)] = arriving
    queue.first += steps
    queue.slot = (queue.slot + steps) % size
    ring[_wrap(queue.slot + queue.length, size)] = 0.0


# -- a step in full -------------------------------------------------------------------------------
@_piece
def cohort_ready(fleet, cohorts, rest, t):
    """The starting cohort whose cold start ends at ``t`` becomes ready (ending any rest)."""
    first = fleet.start_first
    if fleet.start_len > 0 and cohorts.start_ready_at[first] == t:
        n = cohorts.start_count[first]
        fleet.start_first = _wrap(first + 1, cohorts.start_ready_at.shape[0])
        fleet.start_len -= 1
        fleet.ready += n
        fleet.starting -= n
        top = fleet.ready_top
        cohorts.ready_since[top] = t
        cohorts.ready_count[top] = n
        fleet.ready_top = top + 1
        rest.until = -1  # the fleet the rest was read on has changed


@_piece
def preempt(fleet, cohorts, losses, rest, t):
    """Ready instances lost at ``t``, before the step serves, newest first: returns how many."""
    loss_steps, loss_counts, loss_marks = losses
    lost = 0
    while fleet.next_loss < loss_steps.shape[0] and loss_steps[fleet.next_loss] == t:
        event = fleet.next_loss
        if loss_marks[event] < fleet.ready:
            n = min(loss_counts[event], fleet.ready)
            lost += n
            fleet.ready -= n
            top = fleet.ready_top
            while n > 0:
                k = min(n, cohorts.ready_count[top - 1])
                cohorts.ready_count[top - 1] -= k
                n -= k
                if cohorts.ready_count[top - 1] == 0:
                    top -= 1
            fleet.ready_top = top
        fleet.next_loss = event + 1
    fleet.preempted += lost
    if lost > 0:
        rest.until = -1
    return lost


@_step
def serve(queue, ring, arriving, capacity, t):
    """The ready ``capacity`` serves the backlog, oldest first, then the step's ``arriving``.

    Returns ``(served, breached)``: breach when requests remain after serving (``backlog_in +
    arrivals > capacity``), decided on the cohorts themselves so that no running float sum sits on
    the boundary. What is left joins the backlog as the cohort of step ``t``.
    """
    if queue.length == 0:
        if arriving <= capacity:
            return arriving, False
        _new_backlog(queue, ring, arriving - capacity, t)
        return capacity, True
    budget, late = _serve_backlog(queue, ring, capacity)
    queue.late += late
    if queue.length == 0:
        queue.backlog = 0.0
        if arriving <= budget:
            return late + arriving, False
        _new_backlog(queue, ring, arriving - budget, t)
        return late + budget, True
    # a cohort is left with requests, so this step's arrivals all wait (budget is 0)
    queue.backlog -= late
    ring[_wrap(queue.slot + queue.length, ring.shape[0])] = arriving
    queue.length += 1
    queue.backlog += arriving
    return late, True


@_piece
def _serve_backlog(queue, ring, capacity):
    """The backlog's cohorts served oldest first: ``(capacity left, requests served)``.

    Empty cohorts (steps without arrivals) leave even when there is no capacity left.
    """
    budget = capacity
    late = 0.0
    size = ring.shape[0]
    while queue.length > 0 and (budget > 0.0 or ring[queue.slot] == 0.0):
        waiting = ring[queue.slot]
        if waiting <= budget:
            budget -= waiting
            late += waiting
            ring[queue.slot] = 0.0
            queue.first += 1
            queue.slot = _wrap(queue.slot + 1, size)
            queue.length -= 1
        else:
            ring[queue.slot] = waiting - budget
            late += budget
            budget = 0.0
    return budget, late


@_piece
def _new_backlog(queue, ring, left, t):
    """A backlog of one cohort: the ``left`` requests of step ``t``."""
    queue.first, queue.slot, queue.length = t, 0, 1
    ring[0] = left
    queue.backlog = left


@_piece
def drop_expired(queue, ring, t, tolerance):
    """The oldest cohort dropped once it has waited ``tolerance`` steps: returns its requests."""
    if queue.length == 0 or queue.first != t - tolerance:
        return 0.0
    dropped = ring[queue.slot]
    ring[queue.slot] = 0.0
    queue.first += 1
    queue.slot = _wrap(queue.slot + 1, ring.shape[0])
    queue.length -= 1
    queue.backlog = queue.backlog - dropped if queue.length > 0 else 0.0
    if dropped > 0.0:
        queue.dropping_steps += 1
        queue.dropped += dropped
    return dropped


@_piece
def tally(fleet, queue, clock, breached, panicking):
    """The step's totals: breach, peak backlog, instance-steps, starting steps, panic."""
    if breached:
        queue.breach_steps += 1
    if queue.backlog > queue.peak_backlog:
        queue.peak_backlog = queue.backlog
    clock.instance_steps += fleet.ready + fleet.starting
    clock.starting_steps += fleet.starting
    if panicking:
        clock.panic_steps += 1


# -- decisions ------------------------------------------------------------------------------------
@_step
def decide(reads, config, run, state, rules, pool, lost):
    """The pool the policy wants at the end of step ``clock.t``: ``(target, rules)``.

    ``pool`` itself between decisions. A fixed fleet never decides, but restarts at once what it
    lost (``lost`` instances this step). A decision's target is clamped to ``[run.low,
    config.max_instances]``, and one that changes nothing may leave the policy at rest.
    """
    if config.policy == FIXED:
        return (run.low if lost > 0 else pool), rules
    clock, fleet, rest, windows = state.clock, state.fleet, state.rest, state.windows
    clock.countdown -= 1
    if clock.countdown > 0:
        return pool, rules
    clock.countdown = config.period_steps
    target, rules = apply_rule(reads, config, run, fleet, clock.t, rules, windows, pool)
    target = min(max(target, run.low), config.max_instances)
    if target == pool:
        at_rest(reads, config, run, fleet, rest, rules, windows, clock.t, pool)
    else:
        rest.until = -1
    return target, rules


@_step
def apply_rule(reads, config, run, fleet, t, rules, windows, pool):
    """The policy's rule at the decision ending step ``t``, on what its controller reads."""
    article, hpa, knative = rules
    policy, ready = config.policy, fleet.ready - run.buffer
    if policy == KNATIVE:
        seen = Seen(t, 0.0, reads.stable_need[t], reads.panic_need[t], pool, ready, fleet.starting)
        target, knative = knative_rule(config, run, seen, knative, windows.down)
        return target, Rules(article, hpa, knative)
    seen = Seen(t, reads.loads[t // config.period_steps], 0, 0, pool, ready, fleet.starting)
    if policy == HPA:
        if ready < 1:
            # no ready pod, no metric: the HPA holds (only after a preemption)
            return pool, rules
        target, hpa = hpa_rule(config, run, seen, hpa, windows.up, windows.down, windows.events)
        return target, Rules(article, hpa, knative)
    if policy == PREDICTIVE:
        return predictive_rule(config, run, seen, reads.table, windows.down), rules
    target, article = article_rule(config, run, seen, article)
    return target, Rules(article, hpa, knative)


@_step
def at_rest(reads, config, run, fleet, rest, rules, windows, t, pool):
    """After a decision that changed nothing: whether, and until when, the same reading will not.

    Sets ``rest`` (``until`` -1: not at rest).
    """
    policy = config.policy
    rest.until = -1
    if policy == KNATIVE:
        if not rules.knative.panicking:
            rest.until, rest.back = window_rest(windows.down, run.cooldown)
            rest.key, rest.key2 = reads.stable_need[t], reads.panic_need[t]
        return
    load = reads.loads[t // config.period_steps]
    if policy == HPA:
        # the recommendation is the pool, or beyond the bound that holds it there (the rate
        # policies then give the bound, whatever the recent events)
        rec, high = rules.hpa.rec, config.max_instances
        held = rec == pool or (rec > pool == high) or (rec < pool == run.low)
        if fleet.ready - run.buffer >= 1 and held:
            until, rest.back = window_rest(windows.down, run.cooldown)
            up_until, rest.back2 = window_rest(windows.up, config.up_stabilization_steps)
            rest.until = min(until, up_until)
            rest.key = rules.hpa.desired
    elif policy == PREDICTIVE:
        rest.until, rest.back = window_rest(windows.down, run.cooldown)
        rest.key = predictive_desired(config, run, t, load, reads.table)
    else:
        rest.key = _article_band(load, pool, config, run)
        if rest.key >= 0 or pool == run.low:
            rest.until = NEVER_ENDS
        else:  # below the band, above the floor: until the sustained-low time
            periods = run.cooldown // config.period_steps + 1 - rules.article.low_evals
            rest.until = t + periods * config.period_steps


@_step
def reads_as_rest(reads, config, run, fleet, rest, k):
    """Whether the decision ending step ``k`` reads what the decision at rest read."""
    policy = config.policy
    if policy == KNATIVE:
        return reads.stable_need[k] == rest.key and reads.panic_need[k] == rest.key2
    load = reads.loads[k // config.period_steps]
    if policy == HPA:
        target = run.up * config.per_instance_qps
        ready = fleet.ready - run.buffer
        return hpa_replicas(load, target, ready, fleet.starting, config.hpa_tolerance) == rest.key
    if policy == PREDICTIVE:
        return predictive_desired(config, run, k, load, reads.table) == rest.key
    pool = fleet.ready + fleet.starting - run.buffer
    return _article_band(load, pool, config, run) == rest.key


@_piece
def _article_band(load_qps, pool, config, run):
    """The article's decision band: 1 above the scale-up threshold, -1 below the scale-down one."""
    ratio = article_ratio(load_qps, pool, config.per_instance_qps)
    return 1 if ratio > run.up else (-1 if ratio < config.scale_down_threshold else 0)


@_piece
def _taken_at_rest(config, run, rest, windows, step, taken, article):
    """``taken`` decisions at rest taken at once, the last ending ``step``: the new ArticleState.

    The windows' back entries get the step that pushing the same value again would give them
    (Knative's delay is ``windows.down``); the article's counts move on as its rule would count.
    """
    policy = config.policy
    if policy in (KNATIVE, HPA, PREDICTIVE):
        if rest.back >= 0:
            windows.down.steps[rest.back] = step
        if rest.back2 >= 0:
            windows.up.steps[rest.back2] = step
    elif rest.key < 0:
        return ArticleState(article.low_evals + taken, article.vetoed)
    elif rest.key > 0 and policy == ARTICLE and run.cold >= config.veto_cold_steps:
        return ArticleState(0, article.vetoed + taken)
    return article


# -- the fleet changes ----------------------------------------------------------------------------
@_step
def scale(fleet, cohorts, target, pool, t, cold, thrash_steps):
    """The policy's ``target`` applied to the ``pool`` at the end of step ``t``.

    Added instances serve from ``t + 1 + cold``; removed ones stop at once, starting ones first
    (newest first), then the most recently ready.
    """
    if target > pool:
        start(fleet, cohorts, target - pool, t, cold)
    elif target < pool:
        n = pool - target
        fleet.stopped += n
        fleet.down_events += 1
        n = cancel_starting(fleet, cohorts, n, t, cold)
        stop_ready(fleet, cohorts, n, t, cold, thrash_steps)


@_piece
def start(fleet, cohorts, n, t, cold):
    """``n`` instances start at the end of step ``t``: a new starting cohort."""
    slot = _wrap(fleet.start_first + fleet.start_len, cohorts.start_ready_at.shape[0])
    cohorts.start_ready_at[slot] = t + 1 + cold
    cohorts.start_count[slot] = n
    fleet.start_len += 1
    fleet.starting += n
    fleet.started += n
    fleet.up_events += 1
    if fleet.ready + fleet.starting > fleet.peak_instances:
        fleet.peak_instances = fleet.ready + fleet.starting


@_piece
def cancel_starting(fleet, cohorts, n, t, cold):
    """Up to ``n`` starting instances cancelled, the newest cohort first: returns how many remain."""
    size = cohorts.start_ready_at.shape[0]
    while n > 0 and fleet.start_len > 0:
        slot = _wrap(fleet.start_first + fleet.start_len - 1, size)
        k = min(n, cohorts.start_count[slot])
        fleet.wasted += k * (t + 1 - (cohorts.start_ready_at[slot] - cold))
        fleet.cancelled += k
        fleet.starting -= k
        n -= k
        cohorts.start_count[slot] -= k
        if cohorts.start_count[slot] == 0:
            fleet.start_len -= 1
    return n


@_piece
def stop_ready(fleet, cohorts, n, t, cold, thrash_steps):
    """``n`` ready instances stopped, those ready for the shortest time first (thrash counted)."""
    top = fleet.ready_top
    while n > 0:
        k = min(n, cohorts.ready_count[top - 1])
        if t + 1 - cohorts.ready_since[top - 1] < thrash_steps:
            fleet.thrash += k
            fleet.wasted += k * cold
        fleet.ready -= k
        n -= k
        cohorts.ready_count[top - 1] -= k
        if cohorts.ready_count[top - 1] == 0:
            top -= 1
    fleet.ready_top = top


# -- totals ---------------------------------------------------------------------------------------
@_piece
def write_metrics(metrics, arrivals, fleet, queue, clock, article):
    """The run's totals in the order of METRICS: every request served, dropped or still waiting."""
    backlog, dropped = queue.backlog, queue.dropped
    metrics[0], metrics[1] = arrivals, arrivals - dropped - backlog
    metrics[2], metrics[3] = queue.late, dropped
    metrics[4], metrics[5] = backlog, queue.peak_backlog
    metrics[6], metrics[7] = queue.breach_steps, queue.dropping_steps
    metrics[8], metrics[9] = clock.instance_steps, clock.starting_steps
    metrics[10] = fleet.wasted
    metrics[11], metrics[12] = fleet.up_events, fleet.down_events
    metrics[13], metrics[14] = fleet.started, fleet.stopped
    metrics[15], metrics[16] = fleet.thrash, fleet.cancelled
    metrics[17], metrics[18], metrics[19] = fleet.peak_instances, article.vetoed, clock.panic_steps
    metrics[20] = fleet.preempted


# -- small helpers of the stretches ---------------------------------------------------------------
@_piece
def _fit(demand, block_max, k, stop, step_s, capacity):
    """The first step of ``[k, stop)`` whose arrivals exceed ``capacity``, else ``stop``.

    The rest of a block whose largest rate fits is passed at once (``rate x step_s`` rises with
    the rate).
    """
    while k < stop:
        after = (k // BLOCK + 1) * BLOCK  # the first step of the next block
        if after <= stop and block_max[k // BLOCK] * step_s <= capacity:
            k = after  # the rest of this block fits
        elif demand[k] * step_s > capacity:
            return k
        else:
            k += 1
    return stop


@_piece
def _limit(reads, fleet, cohorts):
    """The step a stretch taken at once ends before: the next cohort ready, the next loss or the end.

    Either changes the fleet, so that step runs in full.
    """
    limit = reads.demand.shape[0]
    if fleet.start_len > 0 and cohorts.start_ready_at[fleet.start_first] < limit:
        limit = cohorts.start_ready_at[fleet.start_first]
    loss_steps = reads.losses.steps
    if fleet.next_loss < loss_steps.shape[0] and loss_steps[fleet.next_loss] < limit:
        limit = loss_steps[fleet.next_loss]
    return limit


@_piece
def _account(clock, fleet, steps, panicking, policy, k, decide_at):
    """A stretch of ``steps`` steps taken at once, ending before step ``k``, the fleet unchanged.

    The totals get the stretch's steps, the countdown is to the next decision (which ends step
    ``decide_at``), and the clock moves to ``k``.
    """
    clock.instance_steps += steps * (fleet.ready + fleet.starting)
    clock.starting_steps += steps * fleet.starting
    if panicking:
        clock.panic_steps += steps
    if policy != FIXED:
        clock.countdown = decide_at - k + 1
    clock.t = k


@_piece
def _all_equal(ring, first, length, value):
    """Whether the ``length`` cohorts of the queue from slot ``first`` all hold ``value``."""
    size = ring.shape[0]
    for i in range(length):  # noqa: SIM110 (a loop numba compiles to a plain loop)
        if ring[_wrap(first + i, size)] != value:
            return False
    return True


@_piece
def _record_quiet(timeline, demand, k, stop, step_s, fleet):
    """The timeline of quiet steps ``[k, stop)``: every arrival served in its step.

    Nothing is queued, so the backlog is 0.0 (an empty queue's backlog is always set to +0.0).
    """
    if timeline.ready.shape[0] > 0:
        for i in range(k, stop):
            _record(timeline, i, fleet.ready, fleet.starting, demand[i] * step_s, 0.0, 0.0, False)


@_piece
def _record(timeline, k, ready, starting, served, dropped, backlog, breach):
    """Step ``k`` of the timeline."""
    timeline.ready[k] = ready
    timeline.starting[k] = starting
    timeline.served[k] = served
    timeline.dropped[k] = dropped
    timeline.backlog[k] = backlog
    timeline.breach[k] = breach

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
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import njit, over_threads, threads_for
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
    NEVER_ENDS,
    ArticleState,
    HpaState,
    KnativeState,
    Seen,
    _wrap,
    article_decision,
    article_ratio,
    article_rule,
    hpa_replicas,
    hpa_rule,
    knative_bounds,
    knative_desired,
    knative_needs,
    knative_over,
    knative_rule,
    new_events,
    new_knative_state,
    new_window,
    predictive_desired,
    predictive_rate,
    predictive_rule,
    predictive_table,
    window_rest,
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


# -- one run --------------------------------------------------------------------------------------
@njit
def _counter(demand):
    """Cumulative rate: ``counter[i] = demand[0] + ... + demand[i - 1]``, added left to right."""
    counter = np.empty(demand.shape[0] + 1)
    counter[0] = 0.0
    for i in range(demand.shape[0]):
        counter[i + 1] = counter[i] + demand[i]
    return counter


@njit(error_model="numpy")
def _run(
    demand,
    shared,
    next_read,
    table,
    stable_need,
    panic_need,
    losses,
    config,
    run,
    metrics,
    timeline,
):
    """One run: the fleet and the backlog step by step, the policy's rule at its decisions.

    ``shared`` is what every run of a grid reads alike (:func:`_shared`): the total arrivals, the
    demand's largest rate per block of steps and the mean rate each decision reads;
    ``next_read[d]`` the first decision after ``d`` that reads otherwise (:func:`_next_read`).

    ``table`` is the predictive policy's reads of its forecast at each decision
    (:func:`~capnb.kernels.autoscale_rules.predictive_table`; empty for the other policies);
    ``stable_need`` and ``panic_need`` are Knative's precomputed counts
    (:func:`~capnb.kernels.autoscale_rules.knative_needs`; empty for the other policies);
    ``losses`` the instances lost to preemption (:class:`Losses`; empty arrays: none). The
    rules are inlined here and no division raises (``error_model="numpy"``), so that the loop
    touches no reference count (see :mod:`capnb.kernels.autoscale_rules`).
    """
    n_steps = demand.shape[0]
    step_s = config.step_s
    per_qps = config.per_instance_qps
    per_step = per_qps * step_s
    tolerance = config.tolerance_steps
    high = config.max_instances
    thrash_steps = config.thrash_steps
    policy = config.policy
    period = config.period_steps
    up, cooldown, cold, low, buffer = run
    record = timeline.ready.shape[0] > 0
    block_max, loads = shared[1], shared[2]

    # the fleet: a FIFO of starting cohorts (ready step, count) and a stack of ready cohorts
    start_ready_at = np.empty(cold + 2, np.int64)
    start_count = np.empty(cold + 2, np.int64)
    # The counts passed to a callee that numba compiles apart (_limit, _account, hpa_replicas)
    # start as int64, not as int literals: numba would otherwise compile that callee once more, for
    # the literal types it sees first while typing the loop.
    zero = np.int64(0)
    start_first, start_len = zero, zero
    ready_since = np.empty(high + buffer + 2, np.int64)
    ready_count = np.empty(high + buffer + 2, np.int64)
    if policy == FIXED:
        pool = low
    else:
        need = demand[0] / (up * per_qps)
        pool = low if need <= low else (high if need >= high else math.ceil(need))
        pool = min(max(pool, low), high)
    ready = pool + buffer
    starting = zero
    ready_since[0] = -thrash_steps - 1  # ready since before the run: never thrash
    ready_count[0] = ready
    ready_top = 1
    # the backlog: a FIFO ring of cohorts by arrival step, contiguous up to the newest (step t)
    ring_size = tolerance + 1
    ring = np.zeros(ring_size)
    queue_first, queue_slot, queue_len = 0, 0, 0
    backlog = 0.0

    late = dropped = peak_backlog = 0.0
    breach_steps = dropping_steps = instance_steps = starting_steps = wasted = zero
    up_events = down_events = started = stopped = thrash = cancelled = panic_steps = zero
    peak_instances = ready
    # preemptions: events by step, the next one at loss_steps[next_loss]
    loss_steps, loss_counts, loss_marks = losses
    n_losses = loss_steps.shape[0]
    next_loss = zero
    preempted = 0

    # the policy: each rule's state (scalars, replaced at each decision) and windows (in place)
    countdown = period
    article = ArticleState(0, 0)
    hpa = HpaState(0, -1, -1)
    knative = new_knative_state(pool if policy == KNATIVE else 0)
    down = new_window(cooldown, period)  # HPA, predictive: scale-down stabilisation; Knative: delay
    up_window = new_window(config.up_stabilization_steps, period)  # HPA: scale-up stabilisation
    events = new_events(config)  # HPA: recent scale events, for the rate policies
    delay_steps, delay_values, delay_ends = down  # Knative's delay, for its quiet ticks
    delay_size = delay_steps.shape[0]

    # Knative's ticks that change nothing are taken inside a quiet stretch (below)
    ticks = policy == KNATIVE
    # a policy that decides every step leaves no quiet stretch unless at rest (below)
    look_ahead = policy == FIXED or period > 1 or ticks
    # At rest: the last decision changed nothing, and a decision that reads the same (`rest_key`:
    # the article's load band, the HPA's and the predictive policy's desired count, Knative's
    # stable count, with its panic count in `rest_key2`) with the fleet unchanged answers the same
    # until step `rest_until`, when the front of one of its windows leaves (window_rest). A quiet
    # stretch takes such decisions as quiet steps, renewing the step of the windows' back entries
    # (`rest_back`, `rest_back2`) as the push would. A cohort becoming ready, a loss or a decision
    # that is not at rest ends the rest (-1).
    rest_until = np.int64(-1)
    rest_key = rest_key2 = zero
    rest_back = rest_back2 = np.int64(-1)
    veto = policy == ARTICLE and cold >= config.veto_cold_steps
    t = zero
    while t < n_steps:
        if (look_ahead or rest_until > t) and queue_len == 0:
            # Quiet stretch: nothing queued, and no cohort becomes ready, no loss and no decision
            # that must run in full before `limit`, so a step only serves its arrivals in full
            # while they fit (blocks of steps whose largest rate fits pass whole). A decision at
            # rest is taken here, with every later one that reads the same.
            limit = _limit(n_steps, start_ready_at, start_first, start_len, loss_steps, next_loss)
            decide_at = t + countdown - 1
            end = limit
            if policy != FIXED and decide_at < end:
                end = decide_at
            capacity = ready * per_step
            k = t
            while True:
                stop = _fit(demand, block_max, k, end, step_s, capacity)
                if record:
                    _record_quiet(timeline, demand, k, stop, step_s, ready, starting, backlog)
                k = stop
                if k < end or end == limit:
                    break  # arrivals that do not fit, or a step that runs in full
                # k decides, before anything else happens
                if demand[k] * step_s > capacity:
                    break
                d = k // period
                if k < rest_until and _reads_as_rest(
                    policy, config, run, k, loads, table, stable_need, panic_need, ready - buffer,
                    starting, ready + starting - buffer, rest_key, rest_key2,
                ):  # fmt: skip
                    # at rest: this decision and every later one that reads the same, before
                    # the rest ends, the limit, or arrivals that do not fit
                    last = next_read[d] - 1
                    last = min(last, (rest_until - period) // period, (limit - period) // period)
                    stop = _fit(demand, block_max, k, last * period + period, step_s, capacity)
                    last = min(last, (stop - period) // period)
                    stop = last * period + period  # the step after the last decision taken
                    if record:
                        _record_quiet(timeline, demand, k, stop, step_s, ready, starting, backlog)
                    article = _taken_at_rest(
                        policy, stop - 1, last - d + 1, rest_key, veto, rest_back, rest_back2,
                        down, up_window, article,
                    )  # fmt: skip
                    k = stop
                elif ticks and not knative.panicking:
                    # Knative's tick ending step k, taken here only if it changes nothing: the
                    # panic condition does not hold, and the delayed count is the pool. Its state
                    # and delay window are then updated as knative_rule would.
                    pool = ready + starting - buffer
                    pods, most, least, panic_limit = knative_bounds(config, ready - buffer, knative)
                    if knative_over(config, panic_need[k], pods, panic_limit):
                        break
                    wanted = min(max(stable_need[k], least), most)
                    if cooldown > 0:
                        # the delayed count: this tick's, or the first entry of the queue still
                        # inside the delay if larger. If that is the pool, the tick is pushed as
                        # window_push would push it, on the queue's arrays held in locals
                        first, length = delay_ends[0], delay_ends[1]
                        front, left = first, length
                        while left > 0 and delay_steps[front] <= k - cooldown:
                            front = _wrap(front + 1, delay_size)
                            left -= 1
                        held = wanted
                        if left > 0 and delay_values[front] > wanted:
                            held = delay_values[front]
                        if min(max(held, low), high) != pool:
                            break
                        while length > 0:
                            if delay_values[_wrap(first + length - 1, delay_size)] > wanted:
                                break
                            length -= 1
                        slot = _wrap(first + length, delay_size)
                        delay_steps[slot] = k
                        delay_values[slot] = wanted
                        length += 1
                        while delay_steps[first] <= k - cooldown:
                            first = _wrap(first + 1, delay_size)
                            length -= 1
                        delay_ends[0], delay_ends[1] = first, length
                    elif min(max(wanted, low), high) != pool:
                        break
                    knative = KnativeState(
                        False,
                        knative.panic_since,
                        knative.max_panic,
                        pods,
                        most,
                        least,
                        panic_limit,
                    )
                    # a tick that changed nothing: at rest
                    rest_until, rest_back = window_rest(down, cooldown)
                    rest_key, rest_key2 = stable_need[k], panic_need[k]
                    if record:
                        _record_quiet(timeline, demand, k, k + 1, step_s, ready, starting, backlog)
                    k += 1
                else:
                    break
                decide_at = k + period - 1
                end = decide_at if decide_at < limit else limit
            if k > t:
                instance_steps, starting_steps, panic_steps, countdown = _account(
                    k - t, ready, starting, knative.panicking, policy, k, decide_at,
                    instance_steps, starting_steps, panic_steps, countdown,
                )  # fmt: skip
                t = k
                if t == n_steps:
                    break
        if (
            tolerance > 0
            and queue_len == tolerance
            and queue_first == t - tolerance
            and demand[t] * step_s > ready * per_step
            and _all_equal(ring, queue_slot, queue_len, demand[t] * step_s)
        ):
            # Saturated stretch: the queue holds `tolerance` cohorts of this step's arrivals, more
            # than the ready instances serve in a step. Each step then serves the oldest cohort
            # in part and drops the rest of it, and the queue is as it was, one step on, while the
            # arrivals, the fleet and the policy (at rest) stay. The same float operations per
            # step as a full step, without the queue's bookkeeping.
            arriving = demand[t] * step_s
            capacity = ready * per_step
            dropped_now = arriving - capacity
            limit = _limit(n_steps, start_ready_at, start_first, start_len, loss_steps, next_loss)
            decide_at = t + countdown - 1
            k = t
            while k < limit and demand[k] * step_s == arriving:
                if policy != FIXED and k == decide_at:
                    if k >= rest_until or not _reads_as_rest(
                        policy, config, run, k, loads, table, stable_need, panic_need,
                        ready - buffer, starting, ready + starting - buffer, rest_key, rest_key2,
                    ):  # fmt: skip
                        break  # this decision runs in full
                    article = _taken_at_rest(
                        policy, k, 1, rest_key, veto, rest_back, rest_back2, down, up_window,
                        article,
                    )  # fmt: skip
                    decide_at = k + period
                backlog -= capacity
                backlog += arriving
                backlog = backlog - dropped_now
                late += capacity
                dropped += dropped_now
                if backlog > peak_backlog:
                    peak_backlog = backlog
                if record:
                    _record(timeline, k, ready, starting, capacity, dropped_now, backlog, True)
                k += 1
            if k > t:
                steps = k - t
                breach_steps += steps
                dropping_steps += steps
                instance_steps, starting_steps, panic_steps, countdown = _account(
                    steps, ready, starting, knative.panicking, policy, k, decide_at,
                    instance_steps, starting_steps, panic_steps, countdown,
                )  # fmt: skip
                # the queue one step on per step: its free slot moves on as many
                ring[_wrap(queue_slot + queue_len, ring_size)] = arriving
                queue_first += steps
                queue_slot = (queue_slot + steps) % ring_size
                ring[_wrap(queue_slot + queue_len, ring_size)] = 0.0
                t = k
                if t == n_steps:
                    break
        if start_len > 0 and start_ready_at[start_first] == t:
            n = start_count[start_first]
            start_first = _wrap(start_first + 1, start_ready_at.shape[0])
            start_len -= 1
            ready += n
            starting -= n
            ready_since[ready_top] = t
            ready_count[ready_top] = n
            ready_top += 1
            rest_until = -1  # the fleet the rest was read on has changed
        # preemption: ready instances lost before the step serves, newest first
        lost_now = 0
        while next_loss < n_losses and loss_steps[next_loss] == t:
            if loss_marks[next_loss] < ready:
                n = min(loss_counts[next_loss], ready)
                lost_now += n
                ready -= n
                while n > 0:
                    k = min(n, ready_count[ready_top - 1])
                    ready_count[ready_top - 1] -= k
                    n -= k
                    if ready_count[ready_top - 1] == 0:
                        ready_top -= 1
            next_loss += 1
        preempted += lost_now
        if lost_now > 0:
            rest_until = -1
        capacity = ready * per_step
        rate = demand[t]
        arriving = rate * step_s
        served_now = 0.0
        dropped_now = 0.0
        # breach: requests remain after serving, i.e. backlog_in + arrivals > capacity, decided
        # on the cohorts themselves so that no running float sum sits on the boundary
        breached = False
        if queue_len == 0:
            if arriving <= capacity:
                served_now = arriving
            else:
                breached = True
                served_now = capacity
                queue_first, queue_slot, queue_len = t, 0, 1
                ring[0] = arriving - capacity
                backlog = arriving - capacity
        else:
            budget = capacity
            late_now = 0.0
            # empty cohorts (steps without arrivals) leave even when there is no budget left
            while queue_len > 0 and (budget > 0.0 or ring[queue_slot] == 0.0):
                waiting = ring[queue_slot]
                if waiting <= budget:
                    budget -= waiting
                    late_now += waiting
                    ring[queue_slot] = 0.0
                    queue_first += 1
                    queue_slot = _wrap(queue_slot + 1, ring_size)
                    queue_len -= 1
                else:
                    ring[queue_slot] = waiting - budget
                    late_now += budget
                    budget = 0.0
            if queue_len == 0:
                backlog = 0.0
                if arriving <= budget:
                    served_now = late_now + arriving
                else:
                    breached = True
                    served_now = late_now + budget
                    queue_first, queue_slot, queue_len = t, 0, 1
                    ring[0] = arriving - budget
                    backlog = arriving - budget
            else:
                # a cohort is left with requests, so this step's arrivals all wait (budget is 0)
                breached = True
                served_now = late_now
                backlog -= late_now
                ring[_wrap(queue_slot + queue_len, ring_size)] = arriving
                queue_len += 1
                backlog += arriving
            late += late_now
        if queue_len > 0 and queue_first == t - tolerance:
            dropped_now = ring[queue_slot]
            ring[queue_slot] = 0.0
            queue_first += 1
            queue_slot = _wrap(queue_slot + 1, ring_size)
            queue_len -= 1
            backlog = backlog - dropped_now if queue_len > 0 else 0.0
            if dropped_now > 0.0:
                dropping_steps += 1
                dropped += dropped_now
        if breached:
            breach_steps += 1
        if backlog > peak_backlog:
            peak_backlog = backlog
        instance_steps += ready + starting
        starting_steps += starting
        if knative.panicking:
            panic_steps += 1
        if record:
            _record(timeline, t, ready, starting, served_now, dropped_now, backlog, breached)

        if policy == FIXED:
            if lost_now == 0:
                t += 1
                continue
            # a fixed fleet restarts what it lost at once
            pool = ready + starting - buffer
            target = low
        else:
            countdown -= 1
            if countdown > 0:
                t += 1
                continue
            countdown = period

            pool = ready + starting - buffer
            if policy == KNATIVE:
                seen = Seen(t, 0.0, stable_need[t], panic_need[t], pool, ready - buffer, starting)
                target, knative = knative_rule(config, run, seen, knative, down)
            else:
                seen = Seen(t, loads[t // period], 0, 0, pool, ready - buffer, starting)
                if policy == HPA:
                    if ready - buffer < 1:
                        # no ready pod, no metric: the HPA holds (only after a preemption)
                        target = pool
                    else:
                        target, hpa = hpa_rule(config, run, seen, hpa, up_window, down, events)
                elif policy == PREDICTIVE:
                    target = predictive_rule(config, run, seen, table, down)
                else:
                    target, article = article_rule(config, run, seen, article)
            target = min(max(target, low), high)
            # at rest if this decision changed nothing and the same reading will change nothing
            rest_until = -1
            if target == pool:
                if policy == KNATIVE:
                    if not knative.panicking:
                        rest_until, rest_back = window_rest(down, cooldown)
                        rest_key, rest_key2 = stable_need[t], panic_need[t]
                elif policy == HPA:
                    # the recommendation is the pool, or beyond the bound that holds it there
                    # (the rate policies then give the bound, whatever the recent events)
                    held = hpa.rec == pool or (hpa.rec > pool == high) or (hpa.rec < pool == low)
                    if ready - buffer >= 1 and held:
                        rest_until, rest_back = window_rest(down, cooldown)
                        until, rest_back2 = window_rest(up_window, config.up_stabilization_steps)
                        rest_until = min(rest_until, until)
                        rest_key = hpa.desired
                elif policy == PREDICTIVE:
                    rest_until, rest_back = window_rest(down, cooldown)
                    rest_key = predictive_desired(config, run, t, seen.load_qps, table)
                else:
                    rest_key = _article_band(
                        seen.load_qps, pool, per_qps, up, config.scale_down_threshold
                    )
                    if rest_key >= 0 or pool == low:
                        rest_until = NEVER_ENDS
                    else:  # below the band, above the floor: until the sustained-low time
                        rest_until = t + (cooldown // period + 1 - article.low_evals) * period

        if target > pool:
            n = target - pool
            slot = _wrap(start_first + start_len, start_ready_at.shape[0])
            start_ready_at[slot] = t + 1 + cold
            start_count[slot] = n
            start_len += 1
            starting += n
            started += n
            up_events += 1
            if ready + starting > peak_instances:
                peak_instances = ready + starting
        elif target < pool:
            n = pool - target
            stopped += n
            down_events += 1
            while n > 0 and start_len > 0:  # newest starting cohort first
                slot = _wrap(start_first + start_len - 1, start_ready_at.shape[0])
                k = min(n, start_count[slot])
                wasted += k * (t + 1 - (start_ready_at[slot] - cold))
                cancelled += k
                starting -= k
                n -= k
                start_count[slot] -= k
                if start_count[slot] == 0:
                    start_len -= 1
            while n > 0:  # then the instance ready for the shortest time
                k = min(n, ready_count[ready_top - 1])
                if t + 1 - ready_since[ready_top - 1] < thrash_steps:
                    thrash += k
                    wasted += k * cold
                ready -= k
                n -= k
                ready_count[ready_top - 1] -= k
                if ready_count[ready_top - 1] == 0:
                    ready_top -= 1
        t += 1

    # every request is served, dropped or still waiting at the end
    arrivals = shared[0]
    metrics[0], metrics[1] = arrivals, arrivals - dropped - backlog
    metrics[2], metrics[3] = late, dropped
    metrics[4], metrics[5] = backlog, peak_backlog
    metrics[6], metrics[7] = breach_steps, dropping_steps
    metrics[8], metrics[9], metrics[10] = instance_steps, starting_steps, wasted
    metrics[11], metrics[12] = up_events, down_events
    metrics[13], metrics[14], metrics[15], metrics[16] = started, stopped, thrash, cancelled
    metrics[17], metrics[18], metrics[19] = peak_instances, article.vetoed, panic_steps
    metrics[20] = preempted


#: Steps per block of the demand's largest rates (:func:`_shared`): a quiet stretch passes a
#: block whose largest rate fits at once.
BLOCK = 64


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


@njit(inline="always")
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


# _limit and _account are compiled apart (plain @njit, one call per stretch): inlined by numba
# (inline="always") at their two call sites each, the article policy's sweep timed up to 25% slower
# (on a noisy machine); compiled apart, it timed as before.


@njit
def _limit(n_steps, start_ready_at, start_first, start_len, loss_steps, next_loss):
    """The step a stretch taken at once ends before: the next cohort ready, the next loss or the end.

    Either changes the fleet, so that step runs in full.
    """
    limit = n_steps
    if start_len > 0 and start_ready_at[start_first] < limit:
        limit = start_ready_at[start_first]
    if next_loss < loss_steps.shape[0] and loss_steps[next_loss] < limit:
        limit = loss_steps[next_loss]
    return limit


@njit
def _account(
    steps, ready, starting, panicking, policy, k, decide_at, instance_steps, starting_steps,
    panic_steps, countdown,
):  # fmt: skip
    """A stretch of ``steps`` steps taken at once, ending before step ``k``, the fleet unchanged.

    Returns ``(instance_steps, starting_steps, panic_steps, countdown)``: the totals with the
    stretch's steps added, and the countdown to the next decision, which ends step ``decide_at``.
    """
    instance_steps += steps * (ready + starting)
    starting_steps += steps * starting
    if panicking:
        panic_steps += steps
    if policy != FIXED:
        countdown = decide_at - k + 1
    return instance_steps, starting_steps, panic_steps, countdown


@njit(inline="always")
def _all_equal(ring, first, length, value):
    """Whether the ``length`` cohorts of the queue from slot ``first`` all hold ``value``."""
    size = ring.shape[0]
    for i in range(length):  # noqa: SIM110 (a loop numba compiles to a plain loop)
        if ring[_wrap(first + i, size)] != value:
            return False
    return True


@njit(inline="always")
def _record_quiet(timeline, demand, k, stop, step_s, ready, starting, backlog):
    """The timeline of quiet steps ``[k, stop)``: every arrival served in its step."""
    for i in range(k, stop):
        _record(timeline, i, ready, starting, demand[i] * step_s, 0.0, backlog, False)


@njit(inline="always")
def _record(timeline, k, ready, starting, served, dropped, backlog, breach):
    """Step ``k`` of the timeline."""
    timeline.ready[k] = ready
    timeline.starting[k] = starting
    timeline.served[k] = served
    timeline.dropped[k] = dropped
    timeline.backlog[k] = backlog
    timeline.breach[k] = breach


@njit(inline="always")
def _taken_at_rest(policy, step, taken, key, veto, back, back2, down, up_window, article):
    """``taken`` decisions at rest taken at once, the last ending ``step``: the new ArticleState.

    The windows' back entries get the step that pushing the same value again would give them
    (Knative's delay is ``down``); the article's counts move on as its rule would count.
    """
    if policy in (KNATIVE, HPA, PREDICTIVE):
        if back >= 0:
            down.steps[back] = step
        if back2 >= 0:
            up_window.steps[back2] = step
    elif key < 0:
        return ArticleState(article.low_evals + taken, article.vetoed)
    elif key > 0 and veto:
        return ArticleState(0, article.vetoed + taken)
    return article


@njit(inline="always")
def _reads_as_rest(
    policy, config, run, k, loads, table, stable_need, panic_need, ready, starting, pool, key, key2
):
    """Whether the decision ending step ``k`` reads what the decision at rest read."""
    if policy == KNATIVE:
        return stable_need[k] == key and panic_need[k] == key2
    load = loads[k // config.period_steps]
    if policy == HPA:
        target = run.up * config.per_instance_qps
        return hpa_replicas(load, target, ready, starting, config.hpa_tolerance) == key
    if policy == PREDICTIVE:
        return predictive_desired(config, run, k, load, table) == key
    band = _article_band(load, pool, config.per_instance_qps, run.up, config.scale_down_threshold)
    return band == key


@njit(inline="always")
def _article_band(load_qps, pool, per_qps, up, down):
    """The article's decision band: 1 above the scale-up threshold, -1 below the scale-down one."""
    ratio = article_ratio(load_qps, pool, per_qps)
    return 1 if ratio > up else (-1 if ratio < down else 0)


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


@njit(nogil=True)
def _runs(demand, shared, reads, losses, config, runs, metrics, timeline, first, stop):
    # runs first..stop-1 of the grid, which read alike (`reads`), without the GIL: a thread gets
    # a range. The one compiled entry point of the loop: simulate is a grid of one run with a
    # timeline, so the simulator's loop is compiled (and optimised by LLVM) once, not per caller.
    stable_need, panic_need, table, next_read = reads
    for i in range(first, stop):
        run = Run(runs.up[i], runs.cooldown[i], runs.cold[i], runs.low[i], runs.buffer[i])
        _run(
            demand, shared, next_read, table, stable_need, panic_need, losses, config, run,
            metrics[i], timeline,
        )  # fmt: skip


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
        _runs(demand, shared, reads, losses, config, runs, metrics, timeline, i, j)
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

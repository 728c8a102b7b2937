"""Autoscaling simulator kernels: a fleet of GPU instances serving a demand series under a policy.

One run steps through ``T`` steps of ``step_s`` seconds. Per step ``t``:

1. starting instances whose cold start ends at ``t`` become ready;
2. the ready instances serve up to ``ready x per_instance_qps x step_s`` requests, oldest first: the
   backlog carried in, then this step's arrivals ``demand[t] x step_s``. Requests served after their
   own step are *late*;
3. what is left joins the backlog; a request that has waited ``tolerance`` steps unserved is dropped,
   so per step ``backlog_in + arrivals = served + dropped + backlog_out`` (tolerance 0 drops at once);
4. the step is in SLA breach when requests are left after serving: ``backlog_in + arrivals``
   exceeds the ready capacity;
5. at the policy's decision steps (every ``period`` steps, after a full period), the policy reads
   what a real controller would see - the arrival rate over its window, the ready and starting
   instance counts and its own state - and sets the pool size. Added instances serve from step
   ``t + 1 + cold_start`` (a decision ends step ``t``); removed ones stop at once, starting ones
   first, then the most recently ready (Kubernetes' ReplicaSet deletes not-ready pods first, then
   those ready for the shortest time).

The instances are a pool the policy manages (``min_pool`` to ``max_instances``) plus ``buffer``
warm spares held on top that the policy never sees. Policies (``config[POLICY]``):

``ARTICLE``
    The article's decision engine: load ratio = rate / pool capacity (ready + starting); above the
    scale-up threshold add ``ceil(pool x (ratio / threshold - 1))`` (at least 1) unless the cold
    start exceeds half the latency tolerance (then no action: the article's veto); below the
    scale-down threshold for longer than the cool-down remove one per evaluation.
``FIXED_ELASTIC``
    The same rule without the veto: the pool floor ``min_pool`` is fixed capacity that carries
    the load through cold starts; the elastic part above it grows for long bursts.
``HPA``
    Kubernetes HPA v2 on a per-pod requests/s metric: desired = ceil(ratio x ready) outside the
    tolerance, starting pods counted as unready, scale-up/scale-down stabilisation windows, rate
    policies (Pods and Percent, ``selectPolicy: Max``) and min/max replicas.
``KNATIVE``
    Knative's KPA in requests/s mode: stable and panic windows (the stable one read from a
    cumulative request counter, as a metrics pipeline reads a rate), panic when the panic-window load
    needs at least ``panic_threshold`` x the ready pods, no scale-down while panicking, max
    scale-up and scale-down rates, and the scale-down delay as a windowed maximum.
``FIXED``
    ``min_pool`` instances throughout.

The scale-down window of each policy is the ``cooldown`` argument (article: sustained-low time; HPA:
scale-down stabilisation window; Knative: scale-down delay). Windowed maxima and minima are kept in
O(1) amortised per decision with monotone queues. Everything is in whole steps; the step module
converts seconds and validates. Metrics are written to ``metrics`` in the order of :data:`METRICS`.
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import njit, over_threads, threads_for
from .autoscale_rules import (
    _DOWN_PERIOD,
    _DOWN_THRESHOLD,
    _HPA_TOLERANCE,
    _MAX,
    _MAX_DOWN_RATE,
    _MAX_UP_RATE,
    _PANIC,
    _PANIC_THRESHOLD,
    _PER_QPS,
    _PERIOD,
    _POLICY,
    _STABLE,
    _STEP_S,
    _THRASH,
    _TOLERANCE,
    _UP_PERIOD,
    _UP_WINDOW,
    ARTICLE,
    CONFIG_FIELDS,
    FIXED,
    FIXED_ELASTIC,
    HPA,
    KNATIVE,
    _hpa_rate_limit,
    _window_push,
    _wrap,
    article_decision,
    hpa_replicas,
    knative_desired,
)

__all__ = [
    "ARTICLE",
    "CONFIG_FIELDS",
    "FIXED",
    "FIXED_ELASTIC",
    "HPA",
    "KNATIVE",
    "METRICS",
    "article_decision",
    "hpa_replicas",
    "knative_desired",
    "simulate",
    "simulate_many",
]

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
)
_N_METRICS = len(METRICS)


# -- one run --------------------------------------------------------------------------------------
@njit
def _counter(demand):
    """Cumulative rate: ``counter[i] = demand[0] + ... + demand[i - 1]``, added left to right."""
    counter = np.empty(demand.shape[0] + 1)
    counter[0] = 0.0
    for i in range(demand.shape[0]):
        counter[i + 1] = counter[i] + demand[i]
    return counter


@njit
def _knative_needs(demand, arrived, per_pod, stable_steps, panic_window):
    """Knative's unclamped pod counts at every step: ``(stable, panic)``, int64[T] each.

    They depend on the demand, the windows and the per-pod target only, not on the fleet, so a
    sweep computes them once per target (a handful) instead of once per policy and step: the
    window sum and the four divisions a tick needs are most of what a Knative step costs.
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
        # the stable window from a cumulative counter, as a metrics pipeline reads a rate
        stable[t] = math.ceil((arrived[t + 1] - arrived[t + 1 - seen]) / seen / per_pod)
        panic[t] = math.ceil(panic_sum / recent / per_pod)
    return stable, panic


@njit
def _run(
    demand,
    stable_need,
    panic_need,
    up,
    cooldown,
    cold,
    low,
    buffer,
    config,
    metrics,
    ready_out,
    starting_out,
    served_out,
    dropped_out,
    backlog_out,
    breach_out,
):
    n_steps = demand.shape[0]
    step_s = config[_STEP_S]
    per_qps = config[_PER_QPS]
    per_step = per_qps * step_s
    tolerance = int(config[_TOLERANCE])
    high = int(config[_MAX])
    thrash_steps = int(config[_THRASH])
    policy = int(config[_POLICY])
    period = int(config[_PERIOD])
    record = ready_out.shape[0] > 0
    veto = policy == ARTICLE and 2 * cold > tolerance

    # the fleet: a FIFO of starting cohorts (ready step, count) and a stack of ready cohorts
    start_ready_at = np.empty(cold + 2, np.int64)
    start_count = np.empty(cold + 2, np.int64)
    start_first, start_len = 0, 0
    ready_since = np.empty(high + buffer + 2, np.int64)
    ready_count = np.empty(high + buffer + 2, np.int64)
    if policy == FIXED:
        pool = low
    else:
        need = demand[0] / (up * per_qps)
        pool = low if need <= low else (high if need >= high else math.ceil(need))
        pool = min(max(pool, low), high)
    ready = pool + buffer
    starting = 0
    ready_since[0] = -thrash_steps - 1  # ready since before the run: never thrash
    ready_count[0] = ready
    ready_top = 1
    # the backlog: a FIFO ring of cohorts by arrival step, contiguous up to the newest (step t)
    ring_size = tolerance + 1
    ring = np.zeros(ring_size)
    queue_first, queue_slot, queue_len = 0, 0, 0
    backlog = 0.0

    arrivals = served = late = dropped = peak_backlog = 0.0
    breach_steps = dropping_steps = instance_steps = starting_steps = wasted = 0
    up_events = down_events = started = stopped = thrash = cancelled = vetoed = panic_steps = 0
    peak_instances = ready

    # policy state
    countdown = period
    load_sum = 0.0
    low_evals = 0
    window_len = cooldown // period + 2
    down_steps = np.empty(window_len, np.int64)
    down_values = np.empty(window_len, np.int64)
    down_state = np.zeros(2, np.int64)
    up_window = int(config[_UP_WINDOW])
    up_steps = np.empty(up_window // period + 2, np.int64)
    up_values = np.empty(up_window // period + 2, np.int64)
    up_state = np.zeros(2, np.int64)
    events = max(int(config[_UP_PERIOD]), int(config[_DOWN_PERIOD])) // period + 2
    up_event_steps = np.full(events, -(1 << 40), np.int64)
    up_event_changes = np.zeros(events, np.int64)
    down_event_steps = np.full(events, -(1 << 40), np.int64)
    down_event_changes = np.zeros(events, np.int64)
    event_next = 0
    stable_steps = int(config[_STABLE])
    # Knative starts in panic mode when more than one pod is ready, holding the current scale
    panicking = policy == KNATIVE and pool > 1
    panic_since = -1
    max_panic = pool
    bounds_pods, most, least, panic_limit = -1, 0, 0, 0.0

    counts_load = policy not in (FIXED, KNATIVE)
    # a policy that decides every step leaves no quiet stretch: no look-ahead
    look_ahead = policy == FIXED or period > 1
    t = 0
    while t < n_steps:
        if look_ahead and queue_len == 0:
            # Quiet stretch: nothing queued, and no cohort becomes ready and no decision falls
            # before `end`, so a step only adds its arrivals, served in full while they fit.
            # The same sums in the same order as the full steps below: the same bits, at a few
            # instructions a step instead of the whole plant and policy.
            end = n_steps
            if policy != FIXED and t + countdown - 1 < end:
                end = t + countdown - 1  # that step decides: it runs in full
            if start_len > 0 and start_ready_at[start_first] < end:
                end = start_ready_at[start_first]
            if end > t:
                capacity = ready * per_step
                k = t
                while k < end:
                    rate = demand[k]
                    arriving = rate * step_s
                    if arriving > capacity:
                        break
                    arrivals += arriving
                    served += arriving
                    if counts_load:
                        load_sum += rate
                    if record:
                        ready_out[k] = ready
                        starting_out[k] = starting
                        served_out[k] = arriving
                        dropped_out[k] = 0.0
                        backlog_out[k] = backlog
                        breach_out[k] = False
                    k += 1
                if k > t:
                    quiet = k - t
                    instance_steps += quiet * (ready + starting)
                    starting_steps += quiet * starting
                    if panicking:
                        panic_steps += quiet
                    if policy != FIXED:
                        countdown -= quiet
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
        capacity = ready * per_step
        rate = demand[t]
        arriving = rate * step_s
        arrivals += arriving
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
        served += served_now
        if backlog > peak_backlog:
            peak_backlog = backlog
        instance_steps += ready + starting
        starting_steps += starting
        if panicking:
            panic_steps += 1
        if record:
            ready_out[t] = ready
            starting_out[t] = starting
            served_out[t] = served_now
            dropped_out[t] = dropped_now
            backlog_out[t] = backlog
            breach_out[t] = breached

        if policy == FIXED:
            t += 1
            continue
        if policy != KNATIVE:
            load_sum += rate
        countdown -= 1
        if countdown > 0:
            t += 1
            continue
        countdown = period

        pool = ready + starting - buffer
        ready_pool = ready - buffer
        target = pool
        if policy in (ARTICLE, FIXED_ELASTIC):
            target, low_evals, was_vetoed = article_decision(
                load_sum / period,
                pool,
                per_qps,
                up,
                config[_DOWN_THRESHOLD],
                low_evals,
                period,
                cooldown,
                veto,
            )
            load_sum = 0.0
            if was_vetoed:
                vetoed += 1
        elif policy == HPA:
            desired = hpa_replicas(
                load_sum / period, up * per_qps, ready_pool, starting, config[_HPA_TOLERANCE]
            )
            load_sum = 0.0
            ceiling = desired
            if cooldown > 0:
                ceiling = _window_push(
                    down_steps, down_values, down_state, t, desired, cooldown, True
                )
            floor = desired
            if up_window > 0:
                floor = _window_push(up_steps, up_values, up_state, t, desired, up_window, False)
            rec = pool
            if rec < floor:
                rec = floor
            if rec > ceiling:
                rec = ceiling
            target = rec
            if rec != pool:  # only then: passing the event arrays costs reference counting
                target = _hpa_rate_limit(
                    rec,
                    pool,
                    low,
                    high,
                    t,
                    up_event_steps,
                    up_event_changes,
                    down_event_steps,
                    down_event_changes,
                    config,
                )
            if target != pool:
                slot = event_next
                event_next = _wrap(event_next + 1, events)
                up_event_steps[slot] = t if target > pool else -(1 << 40)
                up_event_changes[slot] = target - pool if target > pool else 0
                down_event_steps[slot] = t if target < pool else -(1 << 40)
                down_event_changes[slot] = pool - target if target < pool else 0
        elif policy == KNATIVE:
            # knative_desired's formulas: the unclamped counts come precomputed (_knative_needs),
            # and what depends only on the ready pods (the rate bounds and the panic limit) is
            # kept until they change, so a tick usually divides nothing
            pods = max(ready_pool, 1)
            if pods != bounds_pods:
                bounds_pods = pods
                most = math.ceil(config[_MAX_UP_RATE] * pods)
                least = math.floor(pods / config[_MAX_DOWN_RATE])
                panic_limit = config[_PANIC_THRESHOLD] * pods
            stable = stable_need[t]
            needed = panic_need[t]
            stable_pods = min(max(stable, least), most)
            panic_pods = min(max(needed, least), most)
            # needed / pods >= threshold, decided without dividing unless it is a near tie
            if needed > panic_limit * (1.0 + 1e-12):
                over = True
            elif needed < panic_limit * (1.0 - 1e-12):
                over = False
            else:
                over = needed / pods >= config[_PANIC_THRESHOLD]
            if over:  # enter panic, or extend it
                panicking = True
                panic_since = t
            elif panicking and panic_since + stable_steps < t:
                # the surge has had a whole stable window to show in the stable average
                panicking = False
                max_panic = 0
            target = stable_pods
            if panicking:
                if target < panic_pods:
                    target = panic_pods
                if target > max_panic:
                    max_panic = target
                target = max_panic
            if cooldown > 0:
                target = _window_push(
                    down_steps, down_values, down_state, t, target, cooldown, True
                )
        target = min(max(target, low), high)

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

    metrics[0], metrics[1], metrics[2], metrics[3] = arrivals, served, late, dropped
    metrics[4], metrics[5] = backlog, peak_backlog
    metrics[6], metrics[7] = breach_steps, dropping_steps
    metrics[8], metrics[9], metrics[10] = instance_steps, starting_steps, wasted
    metrics[11], metrics[12] = up_events, down_events
    metrics[13], metrics[14], metrics[15], metrics[16] = started, stopped, thrash, cancelled
    metrics[17], metrics[18], metrics[19] = peak_instances, vetoed, panic_steps


@njit
def simulate(
    demand,
    up,
    cooldown,
    cold,
    low,
    buffer,
    config,
    metrics,
    ready,
    starting,
    served,
    dropped,
    backlog,
    breach,
):
    """One run with its timeline.

    Parameters
    ----------
    demand : float64[T]
        Arrival rate per step (requests/s).
    up : float
        Scale-up threshold (article) or target utilisation (HPA, Knative), as a share of
        ``per_instance_qps``.
    cooldown, cold, low, buffer : int
        Scale-down window and cold start (steps), pool floor and warm spares (instances).
    config : float64[len(CONFIG_FIELDS)]
        The rest of the settings, in the order of :data:`CONFIG_FIELDS`.
    metrics : float64[len(METRICS)]
        Output: the run's totals.
    ready, starting : int64[T]
        Output: instances ready and starting during each step.
    served, dropped, backlog : float64[T]
        Output: requests served and dropped in each step, and the backlog at its end.
    breach : bool[T]
        Output: whether requests were left after serving (the step is in SLA breach).
    """
    stable_need, panic_need = _needs(demand, _counter(demand), up, config)
    _run(
        demand,
        stable_need,
        panic_need,
        up,
        cooldown,
        cold,
        low,
        buffer,
        config,
        metrics,
        ready,
        starting,
        served,
        dropped,
        backlog,
        breach,
    )


@njit
def _needs(demand, arrived, up, config):
    # Knative's precomputed pod counts for target `up`; no arrays for the other policies
    if int(config[_POLICY]) != KNATIVE:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return _knative_needs(
        demand, arrived, up * config[_PER_QPS], int(config[_STABLE]), int(config[_PANIC])
    )


@njit(nogil=True)
def _runs(demand, arrived, up, cooldown, cold, low, buffer, config, metrics, first, stop):
    # runs first..stop-1 of the grid, without the GIL: simulate_many gives each thread a range
    no_ints = np.empty(0, np.int64)
    no_floats = np.empty(0)
    no_flags = np.empty(0, np.bool_)
    if first >= stop:
        return
    # the grid varies the target slowest: recompute Knative's counts only when it changes
    stable_need, panic_need = _needs(demand, arrived, up[first], config)
    for i in range(first, stop):
        if i > first and up[i] != up[i - 1]:
            stable_need, panic_need = _needs(demand, arrived, up[i], config)
        _run(
            demand,
            stable_need,
            panic_need,
            up[i],
            cooldown[i],
            cold[i],
            low[i],
            buffer[i],
            config,
            metrics[i],
            no_ints,
            no_ints,
            no_floats,
            no_floats,
            no_floats,
            no_flags,
        )


@njit
def _runs_serial(demand, up, cooldown, cold, low, buffer, config, metrics):
    _runs(
        demand, _counter(demand), up, cooldown, cold, low, buffer, config, metrics, 0, up.shape[0]
    )


def simulate_many(demand, up, cooldown, cold, low, buffer, config, metrics):
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
    up : float64[P]
    cooldown, cold, low, buffer : int64[P]
        One value per run (see :func:`simulate`).
    config : float64[len(CONFIG_FIELDS)]
        Settings shared by every run.
    metrics : float64[P, len(METRICS)]
        Output.
    """
    runs = up.shape[0]
    if threads_for(runs, runs * demand.shape[0]) < 2:
        _runs_serial(demand, up, cooldown, cold, low, buffer, config, metrics)
        return
    arrived = _counter(demand)
    # a few pieces per thread: runs differ in cost (a bursty policy queues), so they balance
    over_threads(
        lambda a, b: _runs(demand, arrived, up, cooldown, cold, low, buffer, config, metrics, a, b),
        runs,
        runs * demand.shape[0],
        pieces=4,
    )

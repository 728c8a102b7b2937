"""The autoscaling simulator in numpy, vectorised over policies (a reference and a benchmark baseline).

Time is a Python loop; every step updates arrays over the ``P`` runs at once. State per run: ready
and starting counts; starting instances in a ring indexed by the step they become ready; instances
that became ready recently (within the thrash window) in a ring by that step, so that stopping the
newest first is a walk back through it; the backlog in a ring of cohorts by arrival step. Stops are
rare, so the runs that stop instances in a step are handled one by one. It models no preemption
(its ``preempted`` metric is 0): the plain-Python reference checks the kernel's losses.
"""

from __future__ import annotations

import numpy as np

from capnb.kernels.autoscale_records import (
    ARTICLE,
    CONFIG_FIELDS,
    FIXED,
    FIXED_ELASTIC,
    HPA,
    KNATIVE,
    METRICS,
    PREDICTIVE,
)

__all__ = ["simulate_numpy"]


def _settings(config) -> dict:
    s = dict(zip(CONFIG_FIELDS, (float(v) for v in config), strict=True))
    for key in CONFIG_FIELDS:
        if key.endswith("_steps") or key in ("max_instances", "policy"):
            s[key] = int(s[key])
    return s


def _ceil_int(x: np.ndarray) -> np.ndarray:
    return np.ceil(np.minimum(x, 2.0**40)).astype(np.int64)


def _sequential_sum(values) -> float:
    total = 0.0
    for value in values.tolist():  # left to right, as the kernel adds
        total += value
    return total


def _article(load, pool, q, up, s, low_evals, cooldown, veto):
    held = pool > 0
    safe_pool = np.maximum(pool, 1)
    ratio = np.where(held, load / (safe_pool * q), np.where(load > 0, np.inf, 0.0))
    over, under = ratio > up, ratio < s["scale_down_threshold"]
    finite_ratio = np.where(held & over, ratio, up)
    extra = np.where(held, safe_pool * (finite_ratio / up - 1.0), load / (up * q))
    add = np.where(extra <= 1.0, 1, _ceil_int(np.maximum(extra, 1.0)))
    vetoed = over & veto
    low_evals = np.where(under, low_evals + 1, 0)
    shrink = under & (low_evals * s["period_steps"] > cooldown)
    target = np.where(over & ~veto, pool + add, np.where(shrink, pool - 1, pool))
    return target, low_evals, vetoed


def _hpa_replicas(load, target, ready, unready, tolerance):
    current = ready + unready
    ratio = load / ready / target
    plain = (unready == 0) | (ratio <= 1.0)
    first = np.where(np.abs(1.0 - ratio) <= tolerance, current, _ceil_int(ratio * ready))
    new_ratio = load / current / target
    keep = (np.abs(1.0 - new_ratio) <= tolerance) | (new_ratio < 1.0)
    second = np.where(keep, current, np.maximum(_ceil_int(new_ratio * current), current))
    return np.where(plain, first, second)


def _predictive(demand, forecast, t, period, cold, up, q):
    """The predictive policy's desired count for every run (the span ahead depends on the cold start)."""
    last = forecast.size - 1
    ends = np.minimum(t + period + cold, last)
    ahead = np.array([forecast[min(t + 1, last) : end + 1].max() for end in ends.tolist()])
    observed = _sequential_sum(demand[t - period + 1 : t + 1]) / period
    expected = _sequential_sum(forecast[t - period + 1 : t + 1]) / period
    need = (ahead + max(observed - expected, 0.0)) / (up * q)
    return np.where(need > 1e12, 1 << 40, _ceil_int(need))


def simulate_numpy(demand, up, cooldown, cold, low, buffer, config, forecast=None):
    """Simulate ``P`` runs at once; return metrics as a ``(P, len(METRICS))`` float64 array.

    The knobs of :class:`~capnb.kernels.autoscale_records.Run` as ``P``-arrays, one by one, and
    the settings ``config`` (a :class:`~capnb.kernels.autoscale_records.Config`, or any sequence
    in the order of ``CONFIG_FIELDS``); ``forecast`` (requests/s per step) for the predictive
    policy.
    """
    s = _settings(config)
    demand = np.asarray(demand, dtype=np.float64)
    s["_counter"] = np.concatenate([[0.0], np.cumsum(demand)])  # cumulative requests/s, in order
    up, cooldown, cold = (np.asarray(a) for a in (up, cooldown, cold))
    low, buffer = np.asarray(low), np.asarray(buffer)
    longest_cooldown = int(cooldown.max())
    runs, policy = up.shape[0], s["policy"]
    step_s, q, high = s["step_s"], s["per_instance_qps"], s["max_instances"]
    tolerance, window, period = s["tolerance_steps"], s["thrash_steps"], s["period_steps"]
    everyone = np.arange(runs)

    if policy == FIXED:
        pool = low.copy()
    else:
        need = demand[0] / (up * q)
        pool = np.where(need <= low, low, np.where(need >= high, high, _ceil_int(need)))
        pool = np.minimum(np.maximum(pool, low), high)
    ready = pool + buffer
    starting = np.zeros(runs, np.int64)
    lanes = int(cold.max()) + 2
    pipeline = np.zeros((runs, lanes), np.int64)  # starting instances by ready step % lanes
    young = np.zeros((runs, max(window, 1)), np.int64)  # ready instances by ready step % window
    ring = np.zeros((runs, tolerance + 1))  # backlog cohorts by arrival step % (tolerance + 1)
    backlog = np.zeros(runs)

    m = {name: np.zeros(runs) for name in METRICS}
    m["peak_instances"] = ready.astype(np.float64)
    veto = np.full(runs, policy == ARTICLE) & (2 * cold > tolerance)
    low_evals = np.zeros(runs, np.int64)
    recommendations = []  # HPA: (step, desired array)
    events = []  # HPA: (step, change array)
    delayed = []  # Knative: (step, desired array)
    panicking = np.full(runs, policy == KNATIVE) & (pool > 1)
    panic_since = np.full(runs, -1)
    max_panic = pool.copy()
    up_window = s["up_stabilization_steps"]

    for t, rate in enumerate(demand):
        lane = t % lanes
        arrived_ready = pipeline[:, lane]
        ready = ready + arrived_ready
        starting = starting - arrived_ready
        if window > 0:
            young[:, t % window] = arrived_ready
        pipeline[:, lane] = 0

        capacity = ready * (q * step_s)
        arriving = rate * step_s
        m["arrivals"] += arriving
        budget = capacity
        late_now = np.zeros(runs)
        if backlog.any():
            for age in range(tolerance, 0, -1):  # oldest cohort first
                slot = (t - age) % (tolerance + 1)
                take = np.minimum(ring[:, slot], budget)
                ring[:, slot] -= take
                budget = budget - take
                late_now += take
        queued = ring.any(axis=1)
        taken = np.where(queued, 0.0, np.minimum(arriving, budget))
        ring[:, t % (tolerance + 1)] = arriving - taken
        m["breach_steps"] += ring.any(axis=1)  # requests left over after serving
        slot = (t - tolerance) % (tolerance + 1)
        dropped_now = ring[:, slot].copy()
        ring[:, slot] = 0.0
        m["dropping_steps"] += dropped_now > 0.0
        m["served"] += late_now + taken
        m["late"] += late_now
        m["dropped"] += dropped_now
        backlog = ring.sum(axis=1)
        m["peak_backlog"] = np.maximum(m["peak_backlog"], backlog)
        m["instance_steps"] += ready + starting
        m["starting_steps"] += starting
        m["panic_steps"] += panicking

        if policy == FIXED or (t + 1) % period != 0:
            continue
        pool = ready + starting - buffer
        ready_pool = ready - buffer
        if policy in (ARTICLE, FIXED_ELASTIC):
            load = _sequential_sum(demand[t - period + 1 : t + 1]) / period
            target, low_evals, vetoed = _article(load, pool, q, up, s, low_evals, cooldown, veto)
            m["vetoed_scale_ups"] += vetoed
        elif policy == HPA:
            load = _sequential_sum(demand[t - period + 1 : t + 1]) / period
            desired = _hpa_replicas(load, up * q, ready_pool, starting, s["hpa_tolerance"])
            recommendations.append((t, desired))
            horizon = t - max(up_window, int(cooldown.max()))
            recommendations = [(step, r) for step, r in recommendations if step > horizon]
            lowest = np.min(
                [np.where(step > t - up_window, r, desired) for step, r in recommendations], 0
            )
            highest = np.max(
                [np.where(step > t - cooldown, r, desired) for step, r in recommendations], 0
            )
            target = np.minimum(np.maximum(pool, lowest), highest)
            longest = max(s["up_period_steps"], s["down_period_steps"])
            events = [(step, c) for step, c in events if step > t - longest]
            target = _hpa_limits(target, pool, low, high, t, events, s)
            events.append((t, target - pool))
        elif policy == PREDICTIVE:
            desired = _predictive(demand, np.asarray(forecast, float), t, period, cold, up, q)
            target = _windowed_max(delayed, t, desired, cooldown)
        else:
            target = _knative(demand, t, s, up * q, ready_pool, panicking, panic_since, max_panic)
            if (cooldown > 0).any():
                delayed.append((t, target))
                delayed = [(step, d) for step, d in delayed if step > t - longest_cooldown]
                steps = np.array([step for step, _ in delayed])[:, None]
                held = np.where(steps > t - cooldown, np.array([d for _, d in delayed]), 0).max(0)
                target = np.where(cooldown > 0, held, target)
        target = np.minimum(np.maximum(target, low), high)
        if t == demand.size - 1:  # the last step's decision acts after the run: not taken
            continue

        growing = target > pool
        added = np.where(growing, target - pool, 0)
        lanes_at = (t + 1 + cold) % lanes
        pipeline[everyone[growing], lanes_at[growing]] += added[growing]
        starting = starting + added
        m["scale_up_events"] += growing
        m["instances_started"] += added
        m["peak_instances"] = np.maximum(m["peak_instances"], ready + starting)
        for run in np.flatnonzero(target < pool):
            n = int(pool[run] - target[run])
            m["scale_down_events"][run] += 1
            m["instances_stopped"][run] += n
            for ready_at in range(t + 1 + int(cold[run]), t, -1):  # newest start first
                k = min(n, int(pipeline[run, ready_at % lanes]))
                pipeline[run, ready_at % lanes] -= k
                starting[run] -= k
                m["cancelled"][run] += k
                m["wasted_starting_steps"][run] += k * (t + 1 - (ready_at - int(cold[run])))
                n -= k
            from_ready = n
            for since in range(t, t + 1 - window, -1):  # newest ready first, within the window
                k = min(n, int(young[run, since % window]))
                young[run, since % window] -= k
                m["thrash"][run] += k
                m["wasted_starting_steps"][run] += k * int(cold[run])
                n -= k
            ready[run] -= from_ready
    m["final_backlog"] = backlog
    return np.stack([m[name] for name in METRICS], axis=1).astype(np.float64)


def _windowed_max(history, t, desired, window):
    """The largest desired count over each run's last ``window`` steps (``history`` is updated)."""
    history.append((t, desired))
    history[:] = [(step, d) for step, d in history if step > t - max(int(window.max()), 1)]
    held = np.max([np.where(step > t - window, d, desired) for step, d in history], 0)
    return np.where(window > 0, held, desired)


def _hpa_limits(rec, pool, low, high, t, events, s):
    def changes(period):
        recent = [c for step, c in events if step > t - period]
        added = np.sum([np.maximum(c, 0) for c in recent], 0) if recent else 0
        removed = np.sum([np.maximum(-c, 0) for c in recent], 0) if recent else 0
        return added, removed

    added, removed = changes(s["up_period_steps"])
    start = pool - added + removed
    proposals = []
    if s["up_pods"] >= 0:
        proposals.append(start + int(s["up_pods"]))
    if s["up_percent"] >= 0:
        proposals.append(_ceil_int(start * (1.0 + s["up_percent"] / 100.0)))
    up_limit = np.minimum(high, np.max([*proposals, pool], 0))
    added, removed = changes(s["down_period_steps"])
    start = pool - added + removed
    proposals = []
    if s["down_pods"] >= 0:
        proposals.append(start - int(s["down_pods"]))
    if s["down_percent"] >= 0:
        proposals.append(np.floor(start * (1.0 - s["down_percent"] / 100.0)).astype(np.int64))
    down_limit = np.maximum(low, np.min([*proposals, pool], 0))
    return np.where(
        rec > pool,
        np.minimum(rec, up_limit),
        np.where(rec < pool, np.maximum(rec, down_limit), rec),
    )


def _knative(demand, t, s, target, ready_pool, panicking, panic_since, max_panic):
    """One KPA tick for every run; updates the panic state arrays in place."""
    seen = min(t + 1, s["stable_steps"])
    recent = min(t + 1, s["panic_steps"])
    counter = s["_counter"]
    stable_rate = (counter[t + 1] - counter[t + 1 - seen]) / seen
    panic_rate = _sequential_sum(demand[t - recent + 1 : t + 1]) / recent
    pods = np.maximum(ready_pool, 1)
    most = _ceil_int(s["max_scale_up_rate"] * pods)
    least = np.floor(pods / s["max_scale_down_rate"]).astype(np.int64)
    stable_need = _ceil_int(np.full(pods.shape, stable_rate / target))
    panic_need = _ceil_int(np.full(pods.shape, panic_rate / target))
    stable_pods = np.minimum(np.maximum(stable_need, least), most)
    panic_pods = np.minimum(np.maximum(panic_need, least), most)
    over = panic_need / pods >= s["panic_threshold"]
    calm = ~over & panicking & (panic_since + s["stable_steps"] < t)
    panicking |= over
    panic_since[over] = t
    panicking &= ~calm
    max_panic[calm] = 0
    grown = np.maximum(max_panic, np.maximum(stable_pods, panic_pods))
    max_panic[panicking] = grown[panicking]
    return np.where(panicking, max_panic, stable_pods)

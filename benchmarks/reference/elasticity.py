"""Plain-Python reference of the autoscaling simulator (see :mod:`capnb.kernels.autoscale`).

Written for clarity, not speed: every instance is a list entry holding the step it became (or will
become) ready, the backlog is a deque of ``[arrival_step, requests]`` cohorts, and each policy is a
small class that sees only what its real controller sees. The kernel must produce the same metrics
and timeline. A numpy version vectorised over policies lives in
:mod:`benchmarks.reference.elasticity_numpy`; :data:`REGISTRY` names both.
"""

from __future__ import annotations

import itertools
import math
from collections import deque

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

from .elasticity_numpy import simulate_numpy

__all__ = ["REGISTRY", "hpa_replicas_python", "simulate_python"]


def hpa_replicas_python(total_metric, target_per_pod, ready, unready, tolerance):
    """Kubernetes' replica calculation for a per-pod metric (pending pods count as unready)."""
    current = ready + unready
    ratio = total_metric / ready / target_per_pod
    if unready == 0 or ratio <= 1.0:
        if abs(1.0 - ratio) <= tolerance:
            return current
        return math.ceil(ratio * ready)
    # scaling up while pods are still starting: count them as idle and decide again
    new_ratio = total_metric / current / target_per_pod
    if abs(1.0 - new_ratio) <= tolerance or new_ratio < 1.0:
        return current
    return max(math.ceil(new_ratio * current), current)


class _Article:
    """The article's threshold / cool-down engine (with ``veto=False``: fixed + elastic)."""

    def __init__(self, up, cooldown, settings, veto):
        self.up, self.cooldown, self.veto = up, cooldown, veto
        self.down = settings["scale_down_threshold"]
        self.period = settings["period_steps"]
        self.low_evaluations = 0
        self.vetoed = 0

    def decide(self, t, rates, pool, ready_pool, starting, q):
        load = sum(rates[t - self.period + 1 : t + 1]) / self.period
        ratio = load / (pool * q) if pool > 0 else (math.inf if load > 0 else 0.0)
        if ratio > self.up:
            self.low_evaluations = 0
            if self.veto:  # "cold start time exceeds latency budget"
                self.vetoed += 1
                return pool
            extra = pool * (ratio / self.up - 1.0) if pool > 0 else load / (self.up * q)
            return pool + (1 if extra <= 1.0 else min(math.ceil(extra), 1 << 40))
        if ratio < self.down:
            self.low_evaluations += 1
            if self.low_evaluations * self.period > self.cooldown:
                return pool - 1
            return pool  # "cool-down period not met"
        self.low_evaluations = 0
        return pool  # "load within normal range"


class _HPA:
    """Kubernetes HPA v2 with behaviours: stabilisation windows and rate policies."""

    def __init__(self, up, cooldown, settings, low, high):
        self.target_share, self.down_window = up, cooldown
        self.s, self.low, self.high = settings, low, high
        self.period = settings["period_steps"]
        self.recommendations = []  # (step, desired)
        self.events = []  # (step, change): positive added, negative removed

    def _changes(self, t, period):
        added = sum(c for s, c in self.events if s > t - period and c > 0)
        removed = sum(-c for s, c in self.events if s > t - period and c < 0)
        return added, removed

    def decide(self, t, rates, pool, ready_pool, starting, q):
        if ready_pool < 1:  # no ready pod (after a preemption): no metric, hold
            return pool
        load = sum(rates[t - self.period + 1 : t + 1]) / self.period
        desired = hpa_replicas_python(
            load, self.target_share * q, ready_pool, starting, self.s["hpa_tolerance"]
        )
        up_window = self.s["up_stabilization_steps"]
        lowest = min([desired] + [r for s, r in self.recommendations if s > t - up_window])
        highest = max([desired] + [r for s, r in self.recommendations if s > t - self.down_window])
        self.recommendations.append((t, desired))
        rec = min(max(pool, lowest), highest)
        if rec > pool:
            added, removed = self._changes(t, self.s["up_period_steps"])
            start = pool - added + removed
            proposals = []
            if self.s["up_pods"] >= 0:
                proposals.append(start + int(self.s["up_pods"]))
            if self.s["up_percent"] >= 0:
                proposals.append(math.ceil(start * (1.0 + self.s["up_percent"] / 100.0)))
            rec = min(rec, self.high, max([*proposals, pool]))
        elif rec < pool:
            added, removed = self._changes(t, self.s["down_period_steps"])
            start = pool - added + removed
            proposals = []
            if self.s["down_pods"] >= 0:
                proposals.append(start - int(self.s["down_pods"]))
            if self.s["down_percent"] >= 0:
                proposals.append(math.floor(start * (1.0 - self.s["down_percent"] / 100.0)))
            rec = max(rec, self.low, min([*proposals, pool]))
        if rec != pool:
            self.events.append((t, rec - pool))
        return rec


class _Knative:
    """Knative's KPA in requests/s mode: stable and panic windows, scale-down delay."""

    def __init__(self, up, cooldown, settings, initial_pool, rates):
        self.target_share, self.delay, self.s = up, cooldown, settings
        self.counter = list(itertools.accumulate(rates, initial=0.0))
        self.panicking = initial_pool > 1  # a new autoscaler over >1 pod starts in panic mode
        self.panic_since = -1
        self.max_panic = initial_pool
        self.delayed = []  # (step, desired) for the scale-down delay

    def decide(self, t, rates, pool, ready_pool, starting, q):
        stable_window, panic_window = self.s["stable_steps"], self.s["panic_steps"]
        seen = min(t + 1, stable_window)
        panic_rates = rates[max(0, t - panic_window + 1) : t + 1]
        target = self.target_share * q
        pods = max(ready_pool, 1)
        most = math.ceil(self.s["max_scale_up_rate"] * pods)
        least = math.floor(pods / self.s["max_scale_down_rate"])
        # the stable window from the cumulative counter, as a metrics pipeline reads a rate
        stable_rate = (self.counter[t + 1] - self.counter[t + 1 - seen]) / seen
        stable_need = math.ceil(stable_rate / target)
        panic_need = math.ceil(sum(panic_rates) / len(panic_rates) / target)
        stable_pods = min(max(stable_need, least), most)
        panic_pods = min(max(panic_need, least), most)
        if panic_need / pods >= self.s["panic_threshold"]:
            self.panicking, self.panic_since = True, t
        elif self.panicking and self.panic_since + stable_window < t:
            self.panicking, self.max_panic = False, 0
        desired = stable_pods
        if self.panicking:  # never scale down in panic mode
            self.max_panic = max(self.max_panic, stable_pods, panic_pods)
            desired = self.max_panic
        if self.delay > 0:
            self.delayed.append((t, desired))
            # what left the window never returns to it (t only grows): drop it
            self.delayed = [(s, d) for s, d in self.delayed if s > t - self.delay]
            desired = max(d for s, d in self.delayed)
        return desired


class _Predictive:
    """Provision for the forecast one cold start ahead, plus the load seen above the forecast."""

    def __init__(self, up, cooldown, cold, settings, forecast):
        self.up, self.window, self.cold = up, cooldown, cold
        self.period = settings["period_steps"]
        self.forecast = [float(f) for f in forecast]
        self.desired = []  # (step, desired) for the scale-down stabilisation window

    def decide(self, t, rates, pool, ready_pool, starting, q):
        last = len(self.forecast) - 1
        # what this decision must cover: from the next step (a stop acts at once) until the
        # next decision's instances are ready
        span = self.forecast[min(t + 1, last) : min(t + self.period + self.cold, last) + 1]
        observed = sum(rates[t - self.period + 1 : t + 1]) / self.period
        expected = sum(self.forecast[t - self.period + 1 : t + 1]) / self.period
        rate = max(span) + max(observed - expected, 0.0)
        need = rate / (self.up * q)
        desired = 1 << 40 if need > 1e12 else math.ceil(need)
        if self.window > 0:
            self.desired.append((t, desired))
            desired = max(d for s, d in self.desired if s > t - self.window)
        return desired


def simulate_python(demand, up, cooldown, cold, low, buffer, config, forecast=None, losses=None):
    """Simulate one policy; return ``(metrics, timeline)``.

    The knobs of :class:`~capnb.kernels.autoscale_records.Run` one by one, and the settings
    ``config`` (a :class:`~capnb.kernels.autoscale_records.Config`, or any sequence in the order
    of ``CONFIG_FIELDS``); ``forecast`` (requests/s per step) for the predictive policy;
    ``losses`` (steps, counts, marks: :class:`~capnb.kernels.autoscale_records.Losses`) the
    instances lost to preemption.
    ``metrics`` is a dict keyed by ``METRICS``; ``timeline`` a dict of
    lists: ready, starting, served, dropped, backlog, breach.
    """
    s = dict(zip(CONFIG_FIELDS, (float(v) for v in config), strict=True))
    for key in CONFIG_FIELDS:
        if key.endswith("_steps") or key in ("max_instances", "policy"):
            s[key] = int(s[key])
    step_s, q, policy = s["step_s"], s["per_instance_qps"], s["policy"]
    high, tolerance, thrash_window = s["max_instances"], s["tolerance_steps"], s["thrash_steps"]
    rates = [float(r) for r in demand]
    lost_at = {}  # step -> [(count, mark), ...] in order
    if losses is not None:
        for step, count, mark in zip(*(list(a) for a in losses), strict=True):
            lost_at.setdefault(int(step), []).append((int(count), float(mark)))

    if policy == FIXED:
        pool = low
    else:
        need = rates[0] / (up * q)
        pool = low if need <= low else (high if need >= high else math.ceil(need))
        pool = min(max(pool, low), high)
    ready = [-thrash_window - 1] * (pool + buffer)  # step each became ready; old ones first
    starting = []  # step each will be ready; oldest order first
    queue = deque()  # [arrival_step, requests waiting]

    if policy in (ARTICLE, FIXED_ELASTIC):
        controller = _Article(up, cooldown, s, veto=policy == ARTICLE and 2 * cold > tolerance)
    elif policy == HPA:
        controller = _HPA(up, cooldown, s, low, high)
    elif policy == KNATIVE:
        controller = _Knative(up, cooldown, s, pool, rates)
    elif policy == PREDICTIVE:
        controller = _Predictive(up, cooldown, cold, s, forecast)
    else:
        controller = None

    m = dict.fromkeys(METRICS, 0.0)
    m["peak_instances"] = len(ready)
    names = ("ready", "starting", "served", "dropped", "backlog", "breach")
    timeline = {name: [] for name in names}
    for t, rate in enumerate(rates):
        while starting and starting[0] == t:
            ready.append(starting.pop(0))
        lost_now = 0
        for count, mark in lost_at.get(t, ()):
            if mark < len(ready):  # preempted: the most recently ready first
                for _ in range(min(count, len(ready))):
                    ready.pop()
                    lost_now += 1
        m["preempted"] += lost_now
        capacity = len(ready) * (q * step_s)
        arriving = rate * step_s
        m["arrivals"] += arriving
        room, late_now = capacity, 0.0
        for cohort in queue:  # oldest first
            if room <= 0.0:
                break
            take = min(cohort[1], room)
            cohort[1] -= take
            room -= take
            late_now += take
        while queue and queue[0][1] == 0.0:
            queue.popleft()
        taken = 0.0 if queue else min(arriving, room)
        served_now = late_now + taken
        if arriving - taken > 0.0:
            queue.append([t, arriving - taken])
        breached = bool(queue)  # requests are left over: backlog_in + arrivals > capacity
        m["breach_steps"] += breached
        dropped_now = 0.0
        if queue and queue[0][0] <= t - tolerance:
            dropped_now = queue.popleft()[1]
        if dropped_now > 0.0:
            m["dropping_steps"] += 1
        m["served"] += served_now
        m["late"] += late_now
        m["dropped"] += dropped_now
        backlog = sum(c[1] for c in queue)
        m["peak_backlog"] = max(m["peak_backlog"], backlog)
        m["instance_steps"] += len(ready) + len(starting)
        m["starting_steps"] += len(starting)
        if isinstance(controller, _Knative) and controller.panicking:
            m["panic_steps"] += 1
        values = (len(ready), len(starting), served_now, dropped_now, backlog, breached)
        for name, value in zip(timeline, values, strict=True):
            timeline[name].append(value)

        pool = len(ready) + len(starting) - buffer
        if controller is None:  # a fixed fleet restarts what it lost at once
            if not lost_now:
                continue
            target = low
        elif (t + 1) % s["period_steps"] != 0:
            continue
        else:
            target = controller.decide(t, rates, pool, len(ready) - buffer, len(starting), q)
            target = min(max(target, low), high)
        if t == len(rates) - 1:  # the last step's decision acts after the run: not taken
            continue
        if target > pool:
            starting.extend([t + 1 + cold] * (target - pool))
            m["scale_up_events"] += 1
            m["instances_started"] += target - pool
            m["peak_instances"] = max(m["peak_instances"], len(ready) + len(starting))
        elif target < pool:
            m["scale_down_events"] += 1
            m["instances_stopped"] += pool - target
            for _ in range(pool - target):
                if starting:  # cancel the newest start first
                    ready_at = starting.pop()
                    m["cancelled"] += 1
                    m["wasted_starting_steps"] += t + 1 - (ready_at - cold)
                else:  # then stop the instance that has been ready for the shortest time
                    since = ready.pop()
                    if t + 1 - since < thrash_window:
                        m["thrash"] += 1
                        m["wasted_starting_steps"] += cold
    m["final_backlog"] = sum(c[1] for c in queue)
    m["vetoed_scale_ups"] = controller.vetoed if isinstance(controller, _Article) else 0
    return m, timeline


#: kernel name -> references (plain Python per run, numpy vectorised over runs)
REGISTRY = {
    "autoscale.simulate": {"python": simulate_python, "numpy": simulate_numpy},
    "autoscale.hpa_replicas": {"python": hpa_replicas_python},
}

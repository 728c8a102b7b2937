"""Autoscaling policy rules: the formulas each policy applies at a decision, as numba scalar helpers.

Used by the simulator (:mod:`capnb.kernels.autoscale`), which inlines them. They take and return
plain numbers (whole steps, instances, requests/s); the monotone window helpers keep a windowed
maximum or minimum of decisions in O(1) amortised.
"""

from __future__ import annotations

import math

from ._lazy import njit

__all__ = [
    "ARTICLE",
    "CONFIG_FIELDS",
    "FIXED",
    "FIXED_ELASTIC",
    "HPA",
    "KNATIVE",
    "article_decision",
    "hpa_replicas",
    "knative_desired",
]

#: Policy codes of ``config[POLICY]``.
ARTICLE, HPA, KNATIVE, FIXED, FIXED_ELASTIC = 0, 1, 2, 3, 4

#: Fields of the ``config`` vector (float64), shared by every run of a sweep.
CONFIG_FIELDS = (
    "step_s",  # seconds per step
    "per_instance_qps",  # requests/s one ready instance serves
    "tolerance_steps",  # steps a request may wait before it is dropped (the latency tolerance)
    "max_instances",  # largest pool
    "thrash_steps",  # an instance stopped sooner than this after becoming ready counts as thrash
    "policy",  # ARTICLE, HPA, KNATIVE, FIXED or FIXED_ELASTIC
    "period_steps",  # evaluation (article), sync (HPA) or tick (Knative) period
    "scale_down_threshold",  # article: load ratio below which the pool may shrink
    "hpa_tolerance",  # HPA: ratio band around 1 inside which nothing changes
    "up_stabilization_steps",  # HPA: scale-up stabilisation window
    "up_pods",  # HPA: Pods scale-up policy value (-1: no such policy)
    "up_percent",  # HPA: Percent scale-up policy value (-1: none)
    "up_period_steps",  # HPA: scale-up policies' period
    "down_pods",  # HPA: Pods scale-down policy value (-1: none)
    "down_percent",  # HPA: Percent scale-down policy value (-1: none)
    "down_period_steps",  # HPA: scale-down policies' period
    "stable_steps",  # Knative: stable window
    "panic_steps",  # Knative: panic window
    "panic_threshold",  # Knative: panic when needed pods / ready pods >= this
    "max_scale_up_rate",  # Knative
    "max_scale_down_rate",  # Knative
)
(
    _STEP_S, _PER_QPS, _TOLERANCE, _MAX, _THRASH, _POLICY, _PERIOD, _DOWN_THRESHOLD, _HPA_TOLERANCE,
    _UP_WINDOW, _UP_PODS, _UP_PERCENT, _UP_PERIOD, _DOWN_PODS, _DOWN_PERCENT, _DOWN_PERIOD,
    _STABLE, _PANIC, _PANIC_THRESHOLD, _MAX_UP_RATE, _MAX_DOWN_RATE,
) = range(len(CONFIG_FIELDS))  # fmt: skip


# -- policy rules: scalar helpers that hold the formulas ----------------------------------------
@njit
def article_decision(load_qps, pool, per_instance_qps, up, down, low_evals, period, cooldown, veto):
    """The article's decision for one evaluation: ``(desired_pool, low_evals, vetoed)``.

    ``load_qps`` is the arrival rate (requests/s), ``pool`` the instances the policy holds (ready
    and starting) whose capacity ``pool x per_instance_qps`` is the article's ``max_qps``.
    ``low_evals`` counts consecutive evaluations below ``down``; the low duration is ``low_evals x
    period`` steps and must exceed ``cooldown`` steps. ``veto`` is True when the cold start exceeds
    half the latency tolerance. The caller clamps ``desired_pool`` to the pool bounds.
    """
    if pool > 0:
        ratio = load_qps / (pool * per_instance_qps)
    elif load_qps > 0.0:
        ratio = math.inf
    else:
        ratio = 0.0
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


# -- monotone queues: windowed max/min over decisions, O(1) amortised ---------------------------
@njit
def _wrap(index, size):
    """``index % size`` for 0 <= index < 2 x size, without an integer division on the hot path."""
    return index - size if index >= size else index


@njit
def _window_push(steps, values, state, step, value, window, keep_max):
    """Record ``value`` at ``step``; return the max (or min) over entries with step > step - window.

    ``state`` holds (first, length) of the ring ``steps``/``values``, which must have room for
    every entry inside the window plus one. Values in the queue are monotone (decreasing for a
    max), so the front is the answer once stale entries are gone.
    """
    size = steps.shape[0]
    first, length = state[0], state[1]
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
    while steps[first] <= step - window:
        first = _wrap(first + 1, size)
        length -= 1
    state[0], state[1] = first, length
    return values[first]


@njit
def _changes_since(steps, changes, since):
    total = 0
    for i in range(steps.shape[0]):
        if steps[i] > since:
            total += changes[i]
    return total


@njit
def _hpa_rate_limit(
    rec, current, low, high, t, up_steps, up_changes, down_steps, down_changes, config
):
    """Apply HPA's scale-up/scale-down rate policies and min/max replicas to a recommendation."""
    if rec > current:
        period = int(config[_UP_PERIOD])
        start = (
            current
            - _changes_since(up_steps, up_changes, t - period)
            + _changes_since(down_steps, down_changes, t - period)
        )
        limit = -(1 << 40)
        if config[_UP_PODS] >= 0:
            limit = max(limit, start + int(config[_UP_PODS]))
        if config[_UP_PERCENT] >= 0:
            limit = max(limit, math.ceil(start * (1.0 + config[_UP_PERCENT] / 100.0)))
        limit = max(limit, current)
        return min(rec, min(high, limit))
    if rec < current:
        period = int(config[_DOWN_PERIOD])
        start = (
            current
            - _changes_since(up_steps, up_changes, t - period)
            + _changes_since(down_steps, down_changes, t - period)
        )
        limit = 1 << 40
        if config[_DOWN_PODS] >= 0:
            limit = min(limit, start - int(config[_DOWN_PODS]))
        if config[_DOWN_PERCENT] >= 0:
            limit = min(limit, math.floor(start * (1.0 - config[_DOWN_PERCENT] / 100.0)))
        limit = min(limit, current)
        return max(rec, max(low, limit))
    return rec

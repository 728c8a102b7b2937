"""Capacity kernels: the safe-concurrency search under an SLA and the cheapest-two reduction.

:data:`search` takes one latency curve (a quantile of one metric along an ascending concurrency
grid, already made monotone) and many SLAs. For each SLA it returns the largest integer
concurrency whose interpolated latency is <= the SLA and that fits in memory, which constraint
binds (:data:`BINDING`), and the best operating point under it by Little's law: the concurrency
``c <= safe`` that maximises ``c / mean e2e latency(c)``. Between grid points latency is linear in
concurrency (as :func:`capnb.kernels.latency.interpolate` draws it), so the search is exact for the
curve as drawn and never goes past the last grid point.
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import guvectorize, njit

__all__ = ["BINDING", "search", "two_smallest"]

#: Codes of :data:`search`'s ``binding`` output.
BINDING = (
    "latency",  # 0: one more concurrent request would push the latency quantile over the SLA
    "memory",  # 1: memory holds fewer requests than the SLA allows (or the curve ends there)
    "measured_range",  # 2: still under the SLA at the curve's last point (no extrapolation)
    "infeasible_latency",  # 3: over the SLA at concurrency 1
    "infeasible_memory",  # 4: not even one sequence fits in memory
    "infeasible_unmeasured",  # 5: over the SLA at the first point (> 1); nothing measured below
    "memory_below_range",  # 6: memory fits fewer requests than the curve's first point (safe 0)
    "no_data",  # 7: the curve has no value for this metric and quantile
)
_LATENCY, _MEMORY, _RANGE, _INF_LATENCY, _INF_MEMORY, _INF_UNMEASURED, _BELOW, _NO_DATA = range(8)
#: A latency within this share above the SLA meets it: the rounding of a unit's conversion or of
#: an interpolation, not a measured difference (2,300 ms reads as 2.3000000000000003 s, and 26 and
#: 34 ms draw 0.030000000000000002 s half way; both meet 2.3 s and 30 ms).
_ROUNDING = 1e-9


@njit
def _at(concurrency, values, k, c):
    """Linear interpolation of ``values`` at ``c`` within the segment that starts at index ``k``."""
    if k >= concurrency.shape[0] - 1 or c == concurrency[k]:
        return values[k]
    share = (c - concurrency[k]) / (concurrency[k + 1] - concurrency[k])
    return values[k] + share * (values[k + 1] - values[k])


@njit
def _last_at_most(values, limit):
    """Index of the last element <= limit in an ascending array (-1 if none)."""
    lo, hi = -1, values.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if values[mid] <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _search(
    latency, mean_e2e, concurrency, sla, memory_limit,
    safe, binding, qps, operating, latency_at_safe,
):  # fmt: skip
    n = concurrency.shape[0]
    if math.isnan(latency[0]):
        # return before any comparison could see the NaN (see capnb.kernels.latency)
        safe[:], binding[:], qps[:], operating[:], latency_at_safe[:] = (
            0,
            _NO_DATA,
            math.nan,
            0,
            math.nan,
        )
        return
    # best Little's-law throughput over the grid points up to each index (ties: lower concurrency)
    best_qps = np.empty(n)
    best_c = np.empty(n)
    for k in range(n):
        value = concurrency[k] / mean_e2e[k]
        if k == 0 or value > best_qps[k - 1]:
            best_qps[k], best_c[k] = value, concurrency[k]
        else:
            best_qps[k], best_c[k] = best_qps[k - 1], best_c[k - 1]
    first, last = concurrency[0], concurrency[n - 1]

    for s in range(sla.shape[0]):
        limit = sla[s] * (1.0 + _ROUNDING)
        safe[s], qps[s], operating[s], latency_at_safe[s] = 0, math.nan, 0, math.nan
        if memory_limit < 1:
            binding[s] = _INF_MEMORY
            continue
        if latency[0] > limit:
            binding[s] = _INF_LATENCY if first <= 1.0 else _INF_UNMEASURED
            continue
        k = _last_at_most(latency, limit)
        if k == n - 1:
            latency_safe, code = int(last), _RANGE
        else:
            # largest integer c in [c_k, c_k+1) whose interpolated latency stays <= the limit
            width = concurrency[k + 1] - concurrency[k]
            rise = latency[k + 1] - latency[k]
            c = math.floor(concurrency[k] + (limit - latency[k]) / rise * width)
            c = int(min(max(c, concurrency[k]), concurrency[k + 1] - 1.0))
            while c > concurrency[k] and _at(concurrency, latency, k, c) > limit:
                c -= 1
            while c + 1 < concurrency[k + 1] and _at(concurrency, latency, k, c + 1) <= limit:
                c += 1
            latency_safe, code = c, _LATENCY
        # memory binds where it holds fewer than the SLA allows, and where the curve, still under
        # the SLA, ends at what memory holds (the analytic and engine curves end there)
        if memory_limit < latency_safe or (code == _RANGE and memory_limit == latency_safe):
            if memory_limit < first:  # nothing measured where memory allows: no safe one
                binding[s] = _BELOW
                continue
            latency_safe, code = memory_limit, _MEMORY
        safe[s], binding[s] = latency_safe, code
        j = _last_at_most(concurrency, latency_safe)
        at_safe = _at(concurrency, mean_e2e, j, latency_safe)
        latency_at_safe[s] = _at(concurrency, latency, j, latency_safe)
        best, where = best_qps[j], best_c[j]
        if latency_safe / at_safe > best:
            best, where = latency_safe / at_safe, float(latency_safe)
        qps[s], operating[s] = best, int(where)


_SEARCH_SIG = "void(f8[:], f8[:], f8[:], f8[:], i8, i8[:], i1[:], f8[:], i8[:], f8[:])"

#: Per SLA: safe concurrency, binding code (:data:`BINDING`), per-instance requests/s by Little's
#: law at the best operating point, that operating concurrency, and the latency at the safe one.
#: Inputs: latency quantile (s, non-decreasing; NaN everywhere means no data), mean e2e latency (s)
#: and concurrency (ascending) along the grid, SLAs (s), and the memory limit (requests).
search = guvectorize([_SEARCH_SIG], "(n),(n),(n),(s),()->(s),(s),(s),(s),(s)")(_search)


def _two_smallest(values, first, first_value, second, second_value):
    best, runner_up = math.inf, math.inf  # NaN never enters a comparison (see latency kernels)
    first[0], second[0] = -1, -1
    for i in range(values.shape[0]):
        missing = math.isnan(values[i])
        v = math.inf if missing else values[i]
        if missing:
            continue
        if first[0] < 0 or v < best:
            second[0], runner_up = first[0], best
            first[0], best = i, v
        elif second[0] < 0 or v < runner_up:
            second[0], runner_up = i, v
    first_value[0] = best if first[0] >= 0 else math.nan
    second_value[0] = runner_up if second[0] >= 0 else math.nan


#: Index and value of the smallest and second-smallest non-NaN values along the last axis (-1 and
#: NaN where there are none); ties go to the lower index.
two_smallest = guvectorize(["void(f8[:], i8[:], f8[:], i8[:], f8[:])"], "(n)->(),(),(),()")(
    _two_smallest
)

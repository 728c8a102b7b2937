"""Plain Python and numpy references of the latency and capacity kernels (see :mod:`.reference`).

Written for clarity: the Python versions loop over one cell in the most direct way (the search walks
every integer concurrency); the numpy versions broadcast over whole grids and materialise them.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "REGISTRY",
    "analytic_curve_python",
    "interpolate_numpy",
    "interpolate_python",
    "monotone_envelope_numpy",
    "monotone_envelope_python",
    "search_numpy",
    "search_python",
    "search_python_points",
    "step_seconds_python",
    "two_smallest_numpy",
    "two_smallest_python",
]


# -- curves ----------------------------------------------------------------------------------------
def monotone_envelope_python(values):
    """Running maximum that skips NaN."""
    out, running = [], -math.inf
    for v in values:
        if math.isnan(v):
            out.append(math.nan)
        else:
            running = max(running, v)
            out.append(running)
    return out


def monotone_envelope_numpy(values):
    """Running maximum along the last axis, NaN kept in place."""
    values = np.asarray(values, dtype=float)
    filled = np.where(np.isnan(values), -np.inf, values)
    return np.where(np.isnan(values), np.nan, np.maximum.accumulate(filled, axis=-1))


def interpolate_python(x, y, t):
    """Linear interpolation at one point; NaN outside [x[0], x[-1]]."""
    if math.isnan(t) or t < x[0] or t > x[-1]:
        return math.nan
    for i in range(len(x)):
        if x[i] == t:
            return y[i]
        if x[i] > t:
            return y[i - 1] + (t - x[i - 1]) / (x[i] - x[i - 1]) * (y[i] - y[i - 1])
    return math.nan


def interpolate_numpy(x, y, at):
    """``numpy.interp`` with NaN outside the range instead of the end values."""
    at = np.asarray(at, dtype=float)
    inside = (at >= x[0]) & (at <= x[-1])
    return np.where(inside, np.interp(at, x, y), np.nan)


# -- the analytic model ----------------------------------------------------------------------------
def step_seconds_python(prefill, batch, tokens, model, gpu, tensor_parallel, calibration):
    """One step's seconds, term by term (see :mod:`capnb.kernels.latency`)."""
    flop_per_token, weights, kv_per_token, layers, width, hidden, head, share, window = (
        float(v) for v in model
    )
    flops, bandwidth, interconnect = (float(v) for v in gpu)
    c_eff, b_eff, i_eff, step_overhead, seq_overhead, allreduce = (float(v) for v in calibration)
    if prefill:
        # p^2 / 2 pairs a prompt in full layers; a windowed layer's query q attends min(q, window)
        windowed = (
            sum(min(q, window) for q in range(1, int(tokens) + 1)) - tokens / 2 if share else 0.0
        )
        pairs = (1 - share) * tokens**2 / 2 + share * windowed
        flop = batch * (flop_per_token * tokens + head + 4 * layers * width * pairs)
        moved, wire_tokens = weights, batch * tokens
    else:
        read = (1 - share) * tokens + share * min(tokens, window)
        flop = batch * (flop_per_token + head + 4 * layers * width * read)
        moved, wire_tokens = weights + batch * read * kv_per_token, batch
    seconds = step_overhead + seq_overhead * batch
    if tensor_parallel > 1:
        ring = 2 * (tensor_parallel - 1) / tensor_parallel
        seconds += allreduce * 2 * layers * math.log2(tensor_parallel)
        seconds += 2 * layers * wire_tokens * hidden * 2 * ring / interconnect / i_eff
    return seconds + max(flop / flops / c_eff, moved / bandwidth / b_eff)


def _quantile(sorted_values, q):
    n = len(sorted_values)
    return sorted_values[min(max(math.ceil(q * n - 1e-9) - 1, 0), n - 1)]


def _bisect(cdf, lo, hi, q):
    for _ in range(300):
        mid = (lo + hi) / 2
        if cdf(mid) >= q:
            hi = mid
        else:
            lo = mid
    return hi


def _mixture_quantile(xs, rho, mean_wait, q):
    xs = sorted(xs)
    if rho <= 0 or mean_wait <= 0:
        return _quantile(xs, q)
    n = len(xs)

    def reached(t):
        # CDF(t) >= q, written as count - q n >= rho sum(...) so that no rounding of 1 - tiny
        # to 1 moves the answer at an atom
        below = [x for x in xs if x <= t]
        room = len(below) - q * n
        if room <= 0:  # the waits still pending are positive, however far they have decayed
            return False
        return room >= rho * sum(math.exp(-(t - x) / mean_wait) for x in below)

    lo, hi = xs[0], xs[-1] + mean_wait * max(0.0, math.log(rho / (1 - q))) + 1e-9
    for _ in range(300):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    # the answer may be an atom: the smallest sample at or above the bracket that qualifies
    atoms = [x for x in xs if lo <= x <= hi and reached(x)]
    return min(atoms) if atoms else hi


def _tpot_quantile(output, tpot, variance, step, q):
    sds = [math.sqrt(variance / (o - 1)) for o in output if o > 1]
    if not sds:
        return math.nan
    if max(sds) == 0:
        return max(tpot, step)

    def cdf(t):
        return sum(0.5 * (1 + math.erf((t - tpot) / (sd * math.sqrt(2)))) for sd in sds) / len(sds)

    return max(_bisect(cdf, tpot - 40 * max(sds), tpot + 40 * max(sds), q), step)


def analytic_curve_python(
    model, gpu, tensor_parallel, calibration, prompt, output, concurrency, metrics, quantiles
):
    """One cell of the analytic curve: ``(latency[m][r][q], mean[m][r])`` in seconds."""

    def prefill_time(p):
        return step_seconds_python(True, 1.0, p, model, gpu, tensor_parallel, calibration)

    n = len(prompt)
    prefill = [prefill_time(p) for p in prompt]
    context = sum(o * (p + o / 2) for p, o in zip(prompt, output, strict=True)) / sum(output)
    decode_tokens = sum(max(o - 1, 0) for o in output) / n
    mean_pf = sum(prefill) / n
    mean_pf2 = sum(t * t for t in prefill) / n
    latency, mean = [], []
    for c in concurrency:
        step = step_seconds_python(False, c, context, model, gpu, tensor_parallel, calibration)

        def terms(e2e, c=c, step=step):
            rate = (c - 1) / e2e
            rho = rate * mean_pf
            if rho >= 1:
                return rho, math.inf, math.inf, 0.0, math.inf
            tpot = step / (1 - rho)
            wait = rate * mean_pf2 / (2 * (1 - rho))
            step_wait = step / 2 * (c - 1) / c
            return rho, tpot, wait, step_wait, mean_pf + step_wait + wait + decode_tokens * tpot

        low = mean_pf + step / 2 * (c - 1) / c + decode_tokens * step
        if c <= 1:
            e2e = low
        else:
            high = max(2 * low, 2 * (c - 1) * mean_pf)
            while high - terms(high)[4] <= 0:
                high *= 2
            for _ in range(300):
                mid = (low + high) / 2
                low, high = (low, mid) if mid - terms(mid)[4] > 0 else (mid, high)
            e2e = high
        rho, tpot, wait, step_wait, _ = terms(e2e)
        mean_wait = wait / rho if rho > 0 else 0.0
        rate = (c - 1) / e2e
        row, row_mean = [], []
        for code in metrics:
            if code == 0:
                xs = [t + step_wait for t in prefill]
                row.append([_mixture_quantile(xs, rho, mean_wait, q) for q in quantiles])
                row_mean.append(mean_pf + step_wait + wait)
            elif code == 1:
                variance = rate * tpot * mean_pf2
                row.append([_tpot_quantile(output, tpot, variance, step, q) for q in quantiles])
                row_mean.append(tpot)
            elif code == 2:
                per_gap = rate * tpot
                none = math.exp(-per_gap)
                ordered = sorted(prefill)
                row.append(
                    [
                        step
                        if q <= none
                        else step
                        + per_gap / (1 - none) * _quantile(ordered, (q - none) / (1 - none))
                        for q in quantiles
                    ]
                )
                row_mean.append(tpot)
            else:
                xs = [
                    t + step_wait + max(o - 1, 0) * tpot
                    for t, o in zip(prefill, output, strict=True)
                ]
                row.append([_mixture_quantile(xs, rho, mean_wait, q) for q in quantiles])
                row_mean.append(e2e)
        latency.append(row)
        mean.append(row_mean)
    return latency, mean


# -- the search -----------------------------------------------------------------------------------
#: A latency within this share above the SLA meets it (a unit's conversion or an interpolation
#: rounds 2,300 ms to 2.3000000000000003 s), as in the kernel.
ROUNDING = 1e-9

_CODES = {
    "latency": 0,
    "memory": 1,
    "measured_range": 2,
    "infeasible_latency": 3,
    "infeasible_memory": 4,
    "infeasible_unmeasured": 5,
    "memory_below_range": 6,
    "no_data": 7,
}


def search_python(latency, mean_e2e, concurrency, sla, memory_limit):
    """Walk every integer concurrency of the curve (the article's loop, on the interpolated curve).

    Returns ``(safe, binding, qps, operating, latency_at_safe)`` for one SLA.
    """
    sla = sla * (1.0 + ROUNDING)
    first, last = int(concurrency[0]), int(concurrency[-1])
    if math.isnan(latency[0]):
        return 0, _CODES["no_data"], math.nan, 0, math.nan
    if memory_limit < 1:
        return 0, _CODES["infeasible_memory"], math.nan, 0, math.nan
    if latency[0] > sla:
        code = "infeasible_latency" if first <= 1 else "infeasible_unmeasured"
        return 0, _CODES[code], math.nan, 0, math.nan
    safe, code = first, "latency"
    for c in range(first, last + 1):
        if interpolate_python(concurrency, latency, c) <= sla:
            safe = c
        else:
            break
    else:
        code = "measured_range"
    # memory binds too where the curve, still under the SLA, ends at what memory holds
    if memory_limit < safe or (code == "measured_range" and memory_limit == safe):
        if memory_limit < first:
            return 0, _CODES["memory_below_range"], math.nan, 0, math.nan
        safe, code = memory_limit, "memory"
    best, where = -math.inf, 0
    candidates = [c for c in concurrency if c <= safe] + [safe]
    for c in candidates:
        value = c / interpolate_python(concurrency, mean_e2e, c)
        if value > best:
            best, where = value, int(c)
    return safe, _CODES[code], best, where, interpolate_python(concurrency, latency, safe)


def search_python_points(latency, mean_e2e, concurrency, sla, memory_limit):
    """The article's loop over the measured points, then the crossing segment, then Little's law.

    Same answer as :func:`search_python` in O(points) instead of O(concurrency): the benchmark's
    pure-Python baseline.
    """
    sla = sla * (1.0 + ROUNDING)
    n = len(concurrency)
    first = int(concurrency[0])
    if math.isnan(latency[0]):
        return 0, _CODES["no_data"], math.nan, 0, math.nan
    if memory_limit < 1:
        return 0, _CODES["infeasible_memory"], math.nan, 0, math.nan
    if latency[0] > sla:
        code = "infeasible_latency" if first <= 1 else "infeasible_unmeasured"
        return 0, _CODES[code], math.nan, 0, math.nan
    last_ok = 0
    for k in range(n):  # the article: the largest measured concurrency under the SLA
        if latency[k] <= sla:
            last_ok = k
    if last_ok == n - 1:
        safe, code = int(concurrency[-1]), "measured_range"
    else:
        c0, c1 = concurrency[last_ok], concurrency[last_ok + 1]
        y0, y1 = latency[last_ok], latency[last_ok + 1]
        safe = int(c0)
        for c in range(int(c0) + 1, int(c1)):  # within the crossing segment only
            if y0 + (c - c0) / (c1 - c0) * (y1 - y0) <= sla:
                safe = c
        code = "latency"
    # memory binds too where the curve, still under the SLA, ends at what memory holds
    if memory_limit < safe or (code == "measured_range" and memory_limit == safe):
        if memory_limit < first:
            return 0, _CODES["memory_below_range"], math.nan, 0, math.nan
        safe, code = memory_limit, "memory"
    best, where = -math.inf, 0
    for k in range(n):
        if concurrency[k] <= safe and concurrency[k] / mean_e2e[k] > best:
            best, where = concurrency[k] / mean_e2e[k], int(concurrency[k])
    at_safe = interpolate_python(concurrency, mean_e2e, safe)
    if safe / at_safe > best:
        best, where = safe / at_safe, safe
    return safe, _CODES[code], best, where, interpolate_python(concurrency, latency, safe)


def search_numpy(latency, mean_e2e, concurrency, sla, memory_limit):
    """The search over a whole grid by broadcasting: ``latency`` is (..., n), ``sla`` is (s,).

    Materialises the (..., s, n) comparison; returns arrays of shape (..., s).
    """
    latency = np.asarray(latency, dtype=float)
    mean_e2e = np.asarray(mean_e2e, dtype=float)
    c = np.asarray(concurrency, dtype=float)
    sla = np.asarray(sla, dtype=float) * (1.0 + ROUNDING)
    memory = np.asarray(memory_limit)[..., None]
    n = c.size
    lat = latency[..., None, :]
    k = (lat <= sla[:, None]).sum(axis=-1) - 1  # last index under the SLA (monotone curve)
    kk = np.clip(k, 0, n - 2)
    y0 = np.take_along_axis(lat, kk[..., None], axis=-1)[..., 0]
    y1 = np.take_along_axis(lat, kk[..., None] + 1, axis=-1)[..., 0]
    c0, c1 = c[kk], c[kk + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = np.floor(c0 + (sla - y0) / (y1 - y0) * (c1 - c0))
        inside = np.clip(inside, c0, c1 - 1)
        over = y0 + (inside - c0) / (c1 - c0) * (y1 - y0) > sla
        inside = np.where(over & (inside > c0), inside - 1, inside)
        under = (inside + 1 < c1) & (y0 + (inside + 1 - c0) / (c1 - c0) * (y1 - y0) <= sla)
        inside = np.where(under, inside + 1, inside)
    by_latency = np.nan_to_num(np.where(k >= n - 1, c[-1], inside)).astype(np.int64)
    code = np.where(k >= n - 1, 2, 0)
    # memory binds too where the curve, still under the SLA, ends at what memory holds
    memory_binds = (memory < by_latency) | ((code == 2) & (memory == by_latency))
    safe = np.where(memory_binds, memory, by_latency)
    code = np.where(memory_binds, np.where(memory < c[0], 6, 1), code)
    first_over = latency[..., :1] > sla
    code = np.where(first_over, 3 if c[0] <= 1 else 5, code)
    code = np.where(memory < 1, 4, code)
    code = np.where(np.isnan(latency[..., :1]), 7, code)
    feasible = code <= 2
    safe = np.where(feasible, safe, 0)
    # Little's law: best of c / mean e2e over grid points <= safe and the safe point itself
    with np.errstate(divide="ignore", invalid="ignore"):
        grid_qps = c / mean_e2e
        allowed = c <= safe[..., None]
        grid_best = np.where(allowed, grid_qps[..., None, :], -np.inf)
        best_index = np.argmax(grid_best, axis=-1)
        best = np.take_along_axis(grid_best, best_index[..., None], axis=-1)[..., 0]
        j = (c <= safe[..., None]).sum(axis=-1) - 1
        jj = np.clip(j, 0, n - 1)
        jn = np.clip(jj + 1, 0, n - 1)
        cj, cn = c[jj], c[jn]
        e0 = np.take_along_axis(mean_e2e[..., None, :], jj[..., None], axis=-1)[..., 0]
        e1 = np.take_along_axis(mean_e2e[..., None, :], jn[..., None], axis=-1)[..., 0]
        l0 = np.take_along_axis(lat, jj[..., None], axis=-1)[..., 0]
        l1 = np.take_along_axis(lat, jn[..., None], axis=-1)[..., 0]
        share = np.where(cn > cj, (safe - cj) / (cn - cj), 0.0)
        at_safe = e0 + share * (e1 - e0)
        safe_qps = safe / at_safe
    use_safe = safe_qps > best
    qps = np.where(use_safe, safe_qps, best)
    operating = np.where(use_safe, safe, c[best_index].astype(np.int64))
    latency_at_safe = l0 + share * (l1 - l0)
    qps = np.where(feasible, qps, np.nan)
    operating = np.where(feasible, operating, 0)
    latency_at_safe = np.where(feasible, latency_at_safe, np.nan)
    return safe, code, qps, operating, latency_at_safe


def two_smallest_python(values):
    """(index, value) of the smallest and second smallest non-NaN values."""
    ranked = sorted((v, i) for i, v in enumerate(values) if not math.isnan(v))
    first = (ranked[0][1], ranked[0][0]) if ranked else (-1, math.nan)
    second = (ranked[1][1], ranked[1][0]) if len(ranked) > 1 else (-1, math.nan)
    return (*first, *second)


def two_smallest_numpy(values):
    """The same along the last axis with a stable argsort."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(np.where(np.isnan(values), np.inf, values), axis=-1, kind="stable")
    count = (~np.isnan(values)).sum(axis=-1)
    first_i = np.where(count > 0, order[..., 0], -1)
    second_i = np.where(count > 1, order[..., 1] if values.shape[-1] > 1 else -1, -1)
    first_v = np.where(count > 0, np.take_along_axis(values, order[..., :1], -1)[..., 0], np.nan)
    if values.shape[-1] > 1:
        second_v = np.take_along_axis(values, order[..., 1:2], -1)[..., 0]
    else:
        second_v = np.full(values.shape[:-1], np.nan)
    second_v = np.where(count > 1, second_v, np.nan)
    return first_i, first_v, second_i, second_v


#: kernel name -> references (plain Python per cell, numpy over the grid where there is one)
REGISTRY = {
    "latency.monotone_envelope": {
        "python": monotone_envelope_python,
        "numpy": monotone_envelope_numpy,
    },
    "latency.interpolate": {"python": interpolate_python, "numpy": interpolate_numpy},
    "latency.step_seconds": {"python": step_seconds_python},
    "latency.analytic_curve": {"python": analytic_curve_python},
    "capacity.search": {
        "python": search_python,
        "python_points": search_python_points,
        "numpy": search_numpy,
    },
    "capacity.two_smallest": {"python": two_smallest_python, "numpy": two_smallest_numpy},
}

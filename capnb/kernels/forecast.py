"""Forecast kernels: binning request logs, and the random numbers and bursts of the Monte Carlo.

Conventions: times are int64 nanoseconds on the trace's own clock; an interval is a whole number of
nanoseconds. Random numbers come from Philox4x32-10 (Salmon et al., SC'11, the Random123
generator), keyed by the seed and counted by (draw index, trial, stream): trial ``t`` always sees
the same numbers, whichever thread runs it and however the trials are split into chunks. The months
themselves are walked by :mod:`capnb.kernels.months`.

The forecast selection's calibrated plan, a quantile of a mixture of errors per slot, is found by
bisection (:func:`mixture_bisect`); it gives, bit for bit, what the numpy bisection in the
references gives, 4x faster on a plan's shapes (each point's search narrows with the bracket).

Plain numpy where it does the same job as fast (measured in the forecast benchmark): runs of flags
(:func:`capnb.data._series.long_runs`) and the per-slot statistics
(:func:`capnb.forecast._baseline.slot_statistics`); pyarrow checks a log's UTC offsets as it reads
it (:mod:`capnb.data._traces`). :func:`bin_requests` stays a loop: one pass over the requests beat
``np.bincount`` (a division per request) and ``np.searchsorted`` of the interval edges at every
request density measured.
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import njit

__all__ = ["bin_requests", "burst_minutes", "mixture_bisect", "philox4x32", "uniform53"]

_MASK32 = np.uint64(0xFFFFFFFF)
_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = np.uint64(0x9E3779B9)
_PHILOX_W1 = np.uint64(0xBB67AE85)
_SHIFT32 = np.uint64(32)
_STREAM_NOISE = np.uint64(0)
_STREAM_BURSTS = np.uint64(1)


# -- random numbers ----------------------------------------------------------------------------
@njit
def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of the counter (c0..c3) under the key (k0, k1): four 32-bit words.

    Arguments and results are uint64 holding 32-bit values. Checked against Random123's published
    known-answer vectors in the tests.
    """
    c0, c1, c2, c3 = np.uint64(c0), np.uint64(c1), np.uint64(c2), np.uint64(c3)
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for _ in range(10):
        product0 = _PHILOX_M0 * c0
        product1 = _PHILOX_M1 * c2
        hi0, lo0 = product0 >> _SHIFT32, product0 & _MASK32
        hi1, lo1 = product1 >> _SHIFT32, product1 & _MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + _PHILOX_W0) & _MASK32
        k1 = (k1 + _PHILOX_W1) & _MASK32
    return c0, c1, c2, c3


@njit
def uniform53(high_word, low_word):
    """A float64 in [0, 1) on the 2**-53 grid, from two 32-bit words (27 + 26 bits)."""
    return float((high_word >> np.uint64(5)) * np.uint64(67108864) + (low_word >> np.uint64(6))) * (
        1.0 / 9007199254740992.0
    )


@njit
def _pick(word, size):
    # An index in [0, size) from a 32-bit word by multiply-shift (Lemire, without the rejection
    # step: the bias is below size / 2**32, far under Monte Carlo noise for residual pools).
    return np.int64((word * np.uint64(size)) >> _SHIFT32)


@njit
def _poisson(mean, u):
    """Poisson(mean) by inversion of the CDF at ``u`` (means here are a few bursts per month)."""
    probability = math.exp(-mean)
    cumulative = probability
    count = 0
    while u >= cumulative and count < 100_000:
        count += 1
        probability *= mean / count
        cumulative += probability
        if probability == 0.0 and cumulative < u:
            break  # the tail underflowed; the mean is huge and the count is as far as it goes
    return count


@njit
def burst_minutes(u, duration_low_min, duration_high_min):
    """Length in whole minutes (at least 1) of a burst whose duration is uniform in [low, high]."""
    return max(1, math.floor(duration_low_min + (duration_high_min - duration_low_min) * u + 0.5))


# -- request logs ------------------------------------------------------------------------------
@njit
def bin_requests(
    time_ns, prompt_tokens, output_tokens, origin_ns, interval_ns, requests, prompt_sum, output_sum
):
    """Count requests and sum their tokens per interval ``[origin + i x interval, ... + interval)``.

    ``requests``, ``prompt_sum`` and ``output_sum`` (float64, length = number of intervals) are
    added to, so pass zeros. Token arrays of length 0 are skipped (a log without token counts).
    Requests outside the intervals are ignored; the count of those is returned.
    """
    n_bins = requests.shape[0]
    with_prompt = prompt_tokens.shape[0] > 0
    with_output = output_tokens.shape[0] > 0
    outside = 0
    for i in range(time_ns.shape[0]):
        offset = time_ns[i] - origin_ns
        if offset < 0:
            outside += 1
            continue
        b = offset // interval_ns
        if b >= n_bins:
            outside += 1
            continue
        requests[b] += 1.0
        if with_prompt:
            prompt_sum[b] += prompt_tokens[i]
        if with_output:
            output_sum[b] += output_tokens[i]
    return outside


# -- the calibrated plan: a mixture quantile by bisection ------------------------------------------
@njit
def _pairwise_sum(values, n):
    """The sum of ``values[:n]`` in numpy's order (its pairwise summation, blocks of 8 up to 128).

    The same order as ``np.sum`` along a contiguous row, so that the bisection's shares, and the
    ties the plan's quantiles meet at them, are those of the numpy reference to the last bit.
    """
    if n < 8:
        total = 0.0
        for i in range(n):
            total += values[i]
        return total
    if n <= 128:
        r0, r1, r2, r3 = values[0], values[1], values[2], values[3]
        r4, r5, r6, r7 = values[4], values[5], values[6], values[7]
        i = 8
        while i < n - n % 8:
            r0, r1 = r0 + values[i], r1 + values[i + 1]
            r2, r3 = r2 + values[i + 2], r3 + values[i + 3]
            r4, r5 = r4 + values[i + 4], r5 + values[i + 5]
            r6, r7 = r6 + values[i + 6], r7 + values[i + 7]
            i += 8
        total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            total += values[i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return _pairwise_sum(values[:half], half) + _pairwise_sum(values[half:], n - half)


@njit
def _count_at_or_below(errors, x, low, high):
    """How many of the sorted ``errors`` are <= x, knowing it is in [low, high]."""
    while low < high:
        middle = (low + high) >> 1
        if errors[middle] <= x:
            low = middle + 1
        else:
            high = middle
    return low


@njit
def mixture_bisect(points, seen, low, high, errors, cumulative, q, bisections):
    """Per row and level, the least x whose mixture CDF reaches the level, by bisection.

    Row r's CDF at x is the mean over its points p (``points[r]`` where ``seen[r]`` is 1) of the
    share of ``errors`` (sorted) at or below x - p, ``cumulative[k]`` being the share of the k
    smallest. The bracket [``low[r]``, ``high[r]``] is halved ``bisections`` times; its upper end is
    returned, shape (rows, levels). Each point's count of errors lies between its counts at the
    bracket's ends, so its search is only over that range.
    """
    rows, width = points.shape
    out = np.empty((rows, q.size))
    terms = np.empty(width)
    count = np.empty(width, np.int64)
    at_low = np.empty(width, np.int64)
    at_high = np.empty(width, np.int64)
    for r in range(rows):
        total = 0.0
        for k in range(width):
            total += seen[r, k]
        for j in range(q.size):
            a, b = low[r], high[r]
            at_low[:] = 0
            at_high[:] = errors.size
            for _ in range(bisections):
                middle = 0.5 * (a + b)
                for k in range(width):
                    count[k] = _count_at_or_below(
                        errors, middle - points[r, k], at_low[k], at_high[k]
                    )
                    terms[k] = cumulative[count[k]] * seen[r, k]
                if _pairwise_sum(terms, width) / total >= q[j]:
                    b = middle
                    for k in range(width):  # not at_high[:] = count: see kernels.engine.enqueue
                        at_high[k] = count[k]
                else:
                    a = middle
                    for k in range(width):
                        at_low[k] = count[k]
            out[r, j] = b
    return out


# -- bursts --------------------------------------------------------------------------------------
@njit
def _trial_bursts(
    key0, key1, trial, minutes, mean_count, duration_low, duration_high, mult_low, mult_high
):
    """Start minute, length in minutes and multiplier of each burst of one trial."""
    trial_low = np.uint64(trial) & _MASK32
    trial_high = np.uint64(trial) >> _SHIFT32
    w = philox4x32(0, trial_low, trial_high, _STREAM_BURSTS, key0, key1)
    count = _poisson(mean_count, uniform53(w[0], w[1]))
    starts = np.empty(count, np.int64)
    lengths = np.empty(count, np.int64)
    multipliers = np.empty(count, np.float64)
    for j in range(count):
        a = philox4x32(1 + 2 * j, trial_low, trial_high, _STREAM_BURSTS, key0, key1)
        b = philox4x32(2 + 2 * j, trial_low, trial_high, _STREAM_BURSTS, key0, key1)
        starts[j] = min(minutes - 1, math.floor(uniform53(a[0], a[1]) * minutes))
        lengths[j] = burst_minutes(uniform53(a[2], a[3]), duration_low, duration_high)
        multipliers[j] = mult_low + (mult_high - mult_low) * uniform53(b[0], b[1])
    return starts, lengths, multipliers

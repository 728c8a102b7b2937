"""Forecast kernels: binning request logs, per-slot statistics, burst runs and the Monte Carlo month.

Conventions shared by every kernel here:

- times are int64 nanoseconds on the trace's own clock; an interval is a whole number of nanoseconds;
- a missing interval is NaN (a real zero is 0.0);
- slots are int64 codes in ``[0, n_slots)``;
- random numbers come from Philox4x32-10 (Salmon et al., SC'11, the Random123 generator), keyed by the
  seed and counted by (draw index, trial, stream): trial ``t`` always sees the same numbers, whichever
  thread runs it and however the trials are split into chunks.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ._lazy import njit

__all__ = [
    "NO_ZONE",
    "QUOTED",
    "bin_requests",
    "burst_minutes",
    "long_runs",
    "offset_codes",
    "philox4x32",
    "simulate_months",
    "slot_statistics",
    "uniform53",
]

_MASK32 = np.uint64(0xFFFFFFFF)
_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = np.uint64(0x9E3779B9)
_PHILOX_W1 = np.uint64(0xBB67AE85)
_SHIFT32 = np.uint64(32)
_STREAM_NOISE = np.uint64(0)
_STREAM_BURSTS = np.uint64(1)

#: :func:`offset_codes` for a value without a UTC offset, and for a file a byte scan cannot read.
NO_ZONE = 100_000
QUOTED = 100_001


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


@njit
def _scan_offsets(text, column, start, stop):
    """Offsets of the lines that start in [start, stop), as (first, position, other).

    ``first`` is the first line's code; ``position`` the byte of the first line that differs (-1:
    none) and ``other`` its code. A line belongs to the chunk its first byte is in.
    """
    n = text.shape[0]
    position = start
    first = QUOTED
    while position < stop:
        line_start = position
        field = 0
        field_start = position if column == 0 else -1
        field_end = -1
        # up to the end of the wanted field: commas and quotes matter here
        while position < n and text[position] != 10 and field_end < 0:
            byte = text[position]
            if byte == 34:
                return QUOTED, line_start, QUOTED
            if byte == 44:
                if field == column:
                    field_end = position
                field += 1
                if field == column:
                    field_start = position + 1
            position += 1
        if field_end < 0:  # the wanted field is the last one (or the line is short)
            field_end = position
            if field_end > field_start >= 0 and text[field_end - 1] == 13:
                field_end -= 1
        # the rest of the line: only its end matters (pyarrow does not read newlines in values)
        while position < n and text[position] != 10:
            position += 1
        position += 1
        if field_start >= 0 and field_end > field_start:
            code = _offset_minutes(text, field_start, field_end)
            if first == QUOTED:
                first = code
            elif code != first:
                return first, line_start, code
    return first, -1, first


@njit(parallel=True)
def offset_codes(text, column, start):
    """UTC offsets of one unquoted CSV column, by a parallel scan of the file's bytes.

    ``start`` is the byte where the data rows begin (after the header). Returns ``(code, position,
    other)``: the offset of the first data line in minutes east of UTC (:data:`NO_ZONE` when its
    value has none), and the byte position and offset of the first line whose offset differs
    (position -1: none differs). ``Z`` counts as +00:00. When a quote character in the fields up to
    the wanted one makes a byte scan unsafe, returns ``(QUOTED, position, QUOTED)``.
    """
    n = text.shape[0]
    chunks = 64
    bounds = np.empty(chunks + 1, np.int64)
    for c in range(chunks + 1):
        bounds[c] = start + (n - start) * c // chunks
    firsts = np.empty(chunks, np.int64)
    places = np.empty(chunks, np.int64)
    others = np.empty(chunks, np.int64)
    for c in prange(chunks):
        begin = bounds[c]
        if c > 0:  # a chunk starts at the first line that starts inside it
            while begin < bounds[c + 1] and text[begin - 1] != 10:
                begin += 1
        firsts[c], places[c], others[c] = _scan_offsets(text, column, begin, bounds[c + 1])
    first = QUOTED
    for c in range(chunks):
        same_start = first == QUOTED or firsts[c] == first or firsts[c] == QUOTED
        if places[c] >= 0 and same_start:  # a quote, or a change inside the chunk
            return (first if first != QUOTED else firsts[c]), places[c], others[c]
        if firsts[c] == QUOTED:
            continue  # no line started in this chunk
        if first == QUOTED:
            first = firsts[c]
        elif firsts[c] != first:
            place = bounds[c]
            while place < bounds[c + 1] and text[place - 1] != 10:
                place += 1
            return first, place, firsts[c]
    return first, -1, first


@njit
def _offset_minutes(text, start, end):
    if text[end - 1] == 90:  # "Z"
        return 0
    if end - start >= 6 and text[end - 3] == 58 and (text[end - 6] == 43 or text[end - 6] == 45):
        sign, hours, minutes = text[end - 6], end - 5, end - 2  # +HH:MM
    elif end - start >= 5 and (text[end - 5] == 43 or text[end - 5] == 45):
        sign, hours, minutes = text[end - 5], end - 4, end - 2  # +HHMM
    else:
        return NO_ZONE
    value = (text[hours] - 48) * 600 + (text[hours + 1] - 48) * 60
    value += (text[minutes] - 48) * 10 + (text[minutes + 1] - 48)
    return -value if sign == 45 else value


# -- slot statistics ---------------------------------------------------------------------------
@njit
def _linear_quantile(sorted_values, count, q):
    # numpy's default ("linear", Hyndman-Fan type 7), with its two-sided interpolation
    position = q * (count - 1)
    below = math.floor(position)
    above = min(below + 1, count - 1)
    weight = position - below
    low, high = sorted_values[below], sorted_values[above]
    difference = high - low
    if weight >= 0.5:
        return high - difference * (1.0 - weight)
    return low + difference * weight


@njit
def slot_statistics(values, slot, quantiles, quantile_out, mean_out, count_out):
    """Per slot: the quantiles, mean and count of the non-missing values.

    ``values`` (n,) float64 with NaN for missing intervals; ``slot`` (n,) int64 codes in
    ``[0, n_slots)``; ``quantiles`` (q,); outputs ``quantile_out`` (n_slots, q), ``mean_out``
    (n_slots,), ``count_out`` (n_slots,) int64. A slot with no values gets NaN quantiles and mean.
    Quantiles follow numpy's default (linear) method.
    """
    n_slots = mean_out.shape[0]
    counts = np.zeros(n_slots, np.int64)
    for i in range(values.shape[0]):
        if not math.isnan(values[i]):
            counts[slot[i]] += 1
    starts = np.zeros(n_slots + 1, np.int64)
    for s in range(n_slots):
        starts[s + 1] = starts[s] + counts[s]
    grouped = np.empty(starts[n_slots], np.float64)
    filled = starts[:n_slots].copy()
    for i in range(values.shape[0]):
        if not math.isnan(values[i]):
            grouped[filled[slot[i]]] = values[i]
            filled[slot[i]] += 1
    for s in range(n_slots):
        count = counts[s]
        count_out[s] = count
        if count == 0:
            mean_out[s] = np.nan
            quantile_out[s, :] = np.nan
            continue
        group = np.sort(grouped[starts[s] : starts[s + 1]])
        total = 0.0
        for v in group:
            total += v
        mean_out[s] = total / count
        for j in range(quantiles.shape[0]):
            quantile_out[s, j] = _linear_quantile(group, count, quantiles[j])


# -- bursts --------------------------------------------------------------------------------------
@njit
def long_runs(flags, min_length, out):
    """Mark in ``out`` the runs of True in ``flags`` that are at least ``min_length`` long."""
    n = flags.shape[0]
    i = 0
    while i < n:
        if not flags[i]:
            out[i] = False
            i += 1
            continue
        j = i
        while j < n and flags[j]:
            j += 1
        keep = j - i >= min_length
        for k in range(i, j):
            out[k] = keep
        i = j


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


@njit
def _one_month(
    key0, key1, trial, base, noise, noise_block, mean_count,
    duration_low, duration_high, mult_low, mult_high, capacity_low, capacity_step, histogram,
):  # fmt: skip
    minutes = base.shape[0]
    levels = histogram.shape[0] - 1
    starts, lengths, multipliers = _trial_bursts(
        key0, key1, trial, minutes, mean_count, duration_low, duration_high, mult_low, mult_high
    )
    trial_low = np.uint64(trial) & _MASK32
    trial_high = np.uint64(trial) >> _SHIFT32
    histogram[:] = 0
    peak = 0.0
    total = 0.0
    words = philox4x32(0, trial_low, trial_high, _STREAM_NOISE, key0, key1)
    m = 0
    # Demand is constant while the minute's baseline, its noise draw and the set of bursts over it
    # are: walk the month in such runs (a few thousand per month) rather than minute by minute.
    while m < minutes:
        block = m // noise_block
        if block % 4 == 0 and block > 0:
            words = philox4x32(block // 4, trial_low, trial_high, _STREAM_NOISE, key0, key1)
        level = noise[_pick(words[block % 4], noise.shape[0])]
        block_end = min((block + 1) * noise_block, minutes)
        while m < block_end:
            factor = 1.0
            change = block_end
            for j in range(starts.shape[0]):
                end = starts[j] + lengths[j]
                if starts[j] <= m < end:
                    factor = max(factor, multipliers[j])
                    change = min(change, end)
                elif starts[j] > m:
                    change = min(change, starts[j])
            while m < change:
                run_end = m + 1
                while run_end < change and base[run_end] == base[m]:
                    run_end += 1
                demand = base[m] * level * factor
                total += demand * (run_end - m)
                if demand > peak:
                    peak = demand
                # number of capacity levels strictly below the demand
                position = (demand - capacity_low) / capacity_step
                if position <= 0.0:
                    below = 0
                elif position >= levels:
                    below = levels
                else:
                    below = math.ceil(position)
                histogram[below] += run_end - m
                m = run_end
    return peak, total / minutes


@njit(parallel=True)
def simulate_months(
    key0, key1, first_trial, base, noise, noise_block, mean_count,
    duration_low, duration_high, mult_low, mult_high, capacity_low, capacity_step,
    peak_out, mean_out, minutes_above_out,
):  # fmt: skip
    """Monte Carlo months of per-minute demand = base x noise x burst factor, in parallel over trials.

    Parameters
    ----------
    key0, key1
        The seed as two 32-bit words.
    first_trial
        Global id of the first trial here (so chunks of trials reproduce one big run).
    base
        (minutes,) baseline demand of each minute of the month, requests/s.
    noise
        (k,) multiplicative residuals; each block of ``noise_block`` minutes draws one of them.
    mean_count
        Expected number of bursts in the month (Poisson).
    duration_low, duration_high
        Burst length bounds in minutes (uniform, rounded to whole minutes, at least 1).
    mult_low, mult_high
        Burst multiplier bounds (uniform); overlapping bursts take the larger multiplier.
    capacity_low, capacity_step
        The evenly spaced capacity levels ``capacity_low + j x capacity_step``, j < levels.
    peak_out
        (trials,) the month's highest one-minute demand, requests/s.
    mean_out
        (trials,) the month's mean demand, requests/s.
    minutes_above_out
        (trials, levels) int64: minutes of the month with demand strictly above each level.
    """
    trials, levels = minutes_above_out.shape
    for i in prange(trials):
        histogram = np.empty(levels + 1, np.int64)
        peak_out[i], mean_out[i] = _one_month(
            key0, key1, first_trial + i, base, noise, noise_block, mean_count, duration_low,
            duration_high, mult_low, mult_high, capacity_low, capacity_step, histogram,
        )  # fmt: skip
        # minutes above level j = minutes whose demand has more than j levels strictly below it
        above = 0
        for j in range(levels - 1, -1, -1):
            above += histogram[j + 1]
            minutes_above_out[i, j] = above

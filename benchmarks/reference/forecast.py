"""Plain Python and numpy references of the forecast kernels (see :mod:`benchmarks.reference`).

Some of the computations they check are plain numpy themselves now (runs of flags, per-slot
statistics): the references are the straightforward versions those are held to.
The one-pass Monte Carlo (``simulate_months_*``) is the reference of the two-pass kernels in
:mod:`capnb.kernels.months`.

Besides the references, :func:`expected_month_mean` is the Monte Carlo's analytic mean: what the
average simulated demand converges to, derived from the model (Poisson bursts, uniform starts and
lengths, the larger multiplier where bursts overlap) without simulating.
"""

from __future__ import annotations

import csv
import io
import math
import re

import numpy as np

__all__ = [
    "REGISTRY",
    "bin_requests_numpy",
    "bin_requests_python",
    "expected_month_mean",
    "long_runs_python",
    "mixture_bisect_numpy",
    "offset_codes_python",
    "philox4x32_numpy",
    "philox4x32_python",
    "simulate_months_numpy",
    "simulate_months_python",
    "slot_statistics_numpy",
    "slot_statistics_python",
]

_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
_MASK = 0xFFFFFFFF
NO_ZONE, QUOTED = 100_000, 100_001


# -- Philox4x32-10 -----------------------------------------------------------------------------
def philox4x32_python(counter, key):
    """Philox4x32-10 of a 4-word counter under a 2-word key, with Python integers."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _MASK, (p0 >> 32) ^ c3 ^ k1, p0 & _MASK
        k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
    return c0, c1, c2, c3


def philox4x32_numpy(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 over arrays of counters (uint64 arrays holding 32-bit words)."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in (c0, c1, c2, c3))
    k0, k1 = np.uint64(k0), np.uint64(k1)
    mask, shift = np.uint64(_MASK), np.uint64(32)
    for _ in range(10):
        p0, p1 = np.uint64(_M0) * c0, np.uint64(_M1) * c2
        c0, c1, c2, c3 = (p1 >> shift) ^ c1 ^ k0, p1 & mask, (p0 >> shift) ^ c3 ^ k1, p0 & mask
        k0, k1 = (k0 + np.uint64(_W0)) & mask, (k1 + np.uint64(_W1)) & mask
    return c0, c1, c2, c3


def _uniform53(high, low):
    return ((high >> 5) * 67108864 + (low >> 6)) / 9007199254740992.0


def _minutes(u, low, high):
    return max(1, math.floor(low + (high - low) * u + 0.5))


# -- request logs --------------------------------------------------------------------------------
def bin_requests_python(time_ns, prompt, output, origin_ns, interval_ns, n_bins):
    """Counts and token sums per interval, one request at a time."""
    requests, prompt_sum, output_sum = [0.0] * n_bins, [0.0] * n_bins, [0.0] * n_bins
    for i, t in enumerate(time_ns):
        b = (int(t) - origin_ns) // interval_ns
        if 0 <= b < n_bins:
            requests[b] += 1
            if len(prompt):
                prompt_sum[b] += int(prompt[i])
            if len(output):
                output_sum[b] += int(output[i])
    return np.array(requests), np.array(prompt_sum), np.array(output_sum)


def bin_requests_numpy(time_ns, prompt, output, origin_ns, interval_ns, n_bins):
    """Counts and token sums per interval with ``np.bincount``."""
    b = (np.asarray(time_ns) - origin_ns) // interval_ns
    inside = (b >= 0) & (b < n_bins)
    b = b[inside]

    def total(weights):
        if len(weights) == 0:
            return np.zeros(n_bins)
        return np.bincount(b, weights=np.asarray(weights)[inside], minlength=n_bins).astype(float)

    return np.bincount(b, minlength=n_bins).astype(float), total(prompt), total(output)


def offset_codes_python(text: bytes, column: int, first_line: int):
    """UTC offset codes of a CSV column with the csv module and a regular expression."""
    if b'"' in text:
        return QUOTED
    rows = list(csv.reader(io.StringIO(text.decode())))[first_line:]
    codes = []
    for row in rows:
        if len(row) <= column or not row[column].strip():
            continue
        value = row[column].strip()
        match = re.search(r"(Z|([+-])(\d\d):?(\d\d))$", value)
        if match is None:
            codes.append(NO_ZONE)
        elif match.group(1) == "Z":
            codes.append(0)
        else:
            minutes = int(match.group(3)) * 60 + int(match.group(4))
            codes.append(-minutes if match.group(2) == "-" else minutes)
    return codes


# -- slot statistics -----------------------------------------------------------------------------
def slot_statistics_python(values, slot, quantiles, n_slots):
    """Per slot: numpy-default (linear) quantiles, mean and count, by sorting plain lists."""
    groups = [[] for _ in range(n_slots)]
    for v, s in zip(values, slot, strict=True):
        if not math.isnan(v):
            groups[int(s)].append(float(v))
    out_q = np.full((n_slots, len(quantiles)), np.nan)
    out_mean = np.full(n_slots, np.nan)
    count = np.zeros(n_slots, np.int64)
    for s, group in enumerate(groups):
        count[s] = len(group)
        if not group:
            continue
        group.sort()
        out_mean[s] = sum(group) / len(group)
        for j, q in enumerate(quantiles):
            position = q * (len(group) - 1)
            below = math.floor(position)
            above = min(below + 1, len(group) - 1)
            out_q[s, j] = group[below] + (group[above] - group[below]) * (position - below)
    return out_q, out_mean, count


def slot_statistics_numpy(values, slot, quantiles, n_slots):
    """Per slot: ``np.nanquantile``, ``np.nanmean`` and the count of non-NaN values."""
    values, slot = np.asarray(values, float), np.asarray(slot)
    out_q = np.full((n_slots, len(quantiles)), np.nan)
    out_mean = np.full(n_slots, np.nan)
    count = np.zeros(n_slots, np.int64)
    for s in range(n_slots):
        group = values[(slot == s) & ~np.isnan(values)]
        count[s] = group.size
        if group.size:
            out_q[s] = np.quantile(group, quantiles)
            out_mean[s] = group.mean()
    return out_q, out_mean, count


def long_runs_python(flags, min_length):
    """Runs of True at least ``min_length`` long, with a plain loop over run boundaries."""
    out, i, flags = [], 0, list(flags)
    while i < len(flags):
        j = i
        while j < len(flags) and flags[j] == flags[i]:
            j += 1
        out += [bool(flags[i]) and j - i >= min_length] * (j - i)
        i = j
    return np.array(out, dtype=bool)


# -- Monte Carlo ---------------------------------------------------------------------------------
def _bursts_python(key, trial, minutes, mean_count, d_low, d_high, m_low, m_high):
    lo, hi = trial & _MASK, trial >> 32
    w = philox4x32_python((0, lo, hi, 1), key)
    u = _uniform53(w[0], w[1])
    count, probability = 0, math.exp(-mean_count)
    cumulative = probability
    while u >= cumulative and count < 100_000:
        count += 1
        probability *= mean_count / count
        cumulative += probability
        if probability == 0.0 and cumulative < u:
            break
    bursts = []
    for j in range(count):
        a = philox4x32_python((1 + 2 * j, lo, hi, 1), key)
        b = philox4x32_python((2 + 2 * j, lo, hi, 1), key)
        start = min(minutes - 1, math.floor(_uniform53(a[0], a[1]) * minutes))
        length = _minutes(_uniform53(a[2], a[3]), d_low, d_high)
        bursts.append((start, length, m_low + (m_high - m_low) * _uniform53(b[0], b[1])))
    return bursts


def _pools(base, noise, pool_start, pool_size):
    """Each minute's range of the residuals (all of them when not given)."""
    minutes = len(base)
    start = [0] * minutes if pool_start is None else [int(x) for x in pool_start]
    size = [len(noise)] * minutes if pool_size is None else [int(x) for x in pool_size]
    return start, size


def simulate_months_python(
    key, trials, base, noise, noise_block, mean_count, d_low, d_high, m_low, m_high,
    cap_low, cap_step, levels, pool_start=None, pool_size=None,
):  # fmt: skip
    """The one-pass Monte Carlo minute by minute in plain Python (slow: for a few short months).

    ``trials`` is a list of trial ids; returns (peaks, means, minutes_above): per trial the highest
    and mean demand, and (trials, levels) the minutes with demand strictly above each level.
    Minute m draws from ``noise[pool_start[m] : pool_start[m] + pool_size[m]]`` (default: all).
    """
    key = (int(key[0]), int(key[1]))
    start, size = _pools(base, noise, pool_start, pool_size)
    peaks, means, above = [], [], []
    for trial in trials:
        bursts = _bursts_python(
            key, int(trial), len(base), mean_count, d_low, d_high, m_low, m_high
        )
        lo, hi = int(trial) & _MASK, int(trial) >> 32
        counts = [0] * levels
        peak = total = 0.0
        for m, b in enumerate(base):
            block = m // noise_block
            word = philox4x32_python((block // 4, lo, hi, 0), key)[block % 4]
            level = noise[start[m] + ((word * size[m]) >> 32)]
            factor = max([1.0] + [x for s, n, x in bursts if s <= m < s + n])
            demand = b * level * factor
            total += demand
            peak = max(peak, demand)
            for j in range(levels):
                if (demand - cap_low) / cap_step > j:
                    counts[j] += 1
        peaks.append(peak)
        means.append(total / len(base))
        above.append(counts)
    return np.array(peaks), np.array(means), np.array(above, dtype=np.int64)


def simulate_months_numpy(
    key, trials, base, noise, noise_block, mean_count, d_low, d_high, m_low, m_high,
    cap_low, cap_step, levels, pool_start=None, pool_size=None,
):  # fmt: skip
    """The Monte Carlo with numpy, one trial at a time vectorised over its minutes.

    This is the straightforward array version the tests and the benchmark compare the two-pass
    kernels with: the same random numbers (vectorised Philox), the demand of a month as one array,
    its peak and a histogram of levels by ``np.searchsorted`` semantics.
    """
    base = np.asarray(base, float)
    noise = np.asarray(noise, float)
    minutes = base.size
    first, size = (np.asarray(x, np.uint64) for x in _pools(base, noise, pool_start, pool_size))
    blocks = -(-minutes // noise_block)
    block_of_minute = np.arange(minutes) // noise_block
    level_index = np.arange(levels)
    peaks, means = np.empty(len(trials)), np.empty(len(trials))
    above = np.empty((len(trials), levels), np.int64)
    for i, trial in enumerate(trials):
        lo, hi = np.uint64(int(trial) & _MASK), np.uint64(int(trial) >> 32)
        counters = np.arange(-(-blocks // 4), dtype=np.uint64)
        words = np.stack(philox4x32_numpy(counters, lo, hi, 0, key[0], key[1]), axis=1).ravel()
        picks = first + ((words[block_of_minute] * size) >> np.uint64(32))
        demand = base * noise[picks.astype(np.int64)]
        factor = np.ones(minutes)
        for start, length, multiplier in _bursts_python(
            (int(key[0]), int(key[1])),
            int(trial),
            minutes,
            mean_count,
            d_low,
            d_high,
            m_low,
            m_high,
        ):
            window = factor[start : start + length]
            np.maximum(window, multiplier, out=window)
        demand *= factor
        peaks[i], means[i] = demand.max(), demand.mean()
        # level j is exceeded where (demand - low) / step > j, the kernels' own comparison
        position = np.sort((demand - cap_low) / cap_step)
        above[i] = minutes - np.searchsorted(position, level_index, side="right")
    return peaks, means, above


def expected_month_mean(
    base, noise, noise_block, mean_count, d_low, d_high, m_low, m_high, pool_start=None,
    pool_size=None,
):  # fmt: skip
    """The Monte Carlo's analytic mean demand over a month, requests/s.

    E[demand at minute m] = base[m] x mean(minute m's residuals) x E[factor_m]. The bursts covering
    minute m are Poisson with mean ``mean_count x p_m``, where p_m = E[min(L, m + 1)] / minutes is the chance
    that one burst (uniform start, length L) covers m; given k >= 1 of them, the factor is the
    largest of k uniform multipliers, whose mean is low + (high - low) k / (k + 1). Summing over k:
    E[factor] = e^-mu + low (1 - e^-mu) + (high - low) (1 - (1 - e^-mu) / mu).
    """
    del noise_block  # a block's draw has its minutes' pools' means: the block does not matter
    base = np.asarray(base, float)
    noise = np.asarray(noise, float)
    if pool_start is None:
        noise_mean = np.full(base.size, noise.mean())
    else:  # mean of each minute's range, by prefix sums
        sums = np.r_[0.0, np.cumsum(noise)]
        start, size = np.asarray(pool_start), np.asarray(pool_size)
        noise_mean = (sums[start + size] - sums[start]) / size
    minutes = base.size
    lengths, weights = _length_distribution(d_low, d_high)
    m = np.arange(minutes)
    p = sum(w * np.minimum(length, m + 1) for length, w in zip(lengths, weights, strict=True))
    mu = mean_count * p / minutes
    with np.errstate(invalid="ignore", divide="ignore"):
        tail = np.where(mu > 0, 1 - (1 - np.exp(-mu)) / np.where(mu > 0, mu, 1), 0.0)
    factor = np.exp(-mu) + m_low * (1 - np.exp(-mu)) + (m_high - m_low) * tail
    return float(np.mean(base * factor * noise_mean))


def _length_distribution(low, high):
    """Whole-minute burst lengths and their probabilities, for a uniform duration in [low, high)."""
    if high == low:
        return [max(1, math.floor(low + 0.5))], [1.0]
    lengths, weights = [], []
    for length in range(math.floor(low + 0.5), math.floor(high + 0.5) + 1):
        overlap = min(high, length + 0.5) - max(low, length - 0.5)
        if overlap > 0:
            lengths.append(max(1, length))
            weights.append(overlap / (high - low))
    return lengths, weights


def mixture_bisect_numpy(points, seen, low, high, errors, cumulative, q, bisections):
    """:func:`capnb.kernels.forecast.mixture_bisect` in numpy: every row's bracket halved at once."""
    seen = seen.astype(bool)
    total = seen.sum(axis=1).astype(float)
    out = np.empty((points.shape[0], q.size))
    for j, level in enumerate(q):
        a, b = low.copy(), high.copy()
        for _ in range(bisections):
            middle = 0.5 * (a + b)
            below = np.searchsorted(errors, middle[:, None] - points, side="right")
            share = (cumulative[below] * seen).sum(axis=1) / total
            reached = share >= level
            a, b = np.where(reached, a, middle), np.where(reached, middle, b)
        out[:, j] = b
    return out


#: kernel name -> references (plain Python, numpy)
REGISTRY = {
    "forecast.philox4x32": {"python": philox4x32_python, "numpy": philox4x32_numpy},
    "forecast.bin_requests": {"python": bin_requests_python, "numpy": bin_requests_numpy},
    "forecast.offset_codes": {"python": offset_codes_python},
    "forecast.mixture_bisect": {"numpy": mixture_bisect_numpy},
    "forecast.slot_statistics": {
        "python": slot_statistics_python,
        "numpy": slot_statistics_numpy,
    },
    "forecast.long_runs": {"python": long_runs_python},
    "forecast.simulate_months": {
        "python": simulate_months_python,
        "numpy": simulate_months_numpy,
    },
}

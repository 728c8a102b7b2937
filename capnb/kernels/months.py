"""The burst Monte Carlo in two passes: the months without bursts, then the bursts on top.

A month is per-minute demand = baseline x noise x burst factor; each minute is histogrammed against
evenly spaced capacity levels. Walking each month once with its bursts is the plain reference
(:func:`benchmarks.reference.forecast.simulate_months_numpy`, and minute by minute
``simulate_months_python``). The same numbers come out of two passes that split what depends on the
burst model from what does not:

1. :func:`quiet_months` walks each month without bursts (demand = baseline x noise, the same
   Philox draws) and keeps each trial's peak and total, and how many minutes of all the trials
   fall on each (baseline value, noise draw) pair: a table whose size does not depend on the
   trials or on the capacity levels, filled with integer additions instead of a division per run;
2. :func:`burst_months` draws each trial's bursts (the same stream) and visits only the minutes
   they cover: it moves those minutes from their quiet level to their burst level in a histogram
   over the capacity levels, and raises the peak and the total.

Binning the pair table (:func:`bin_counts`) and adding the corrections gives the histogram of every
minute of every month, the same integers as the one-pass walk; peaks are the same values (a
multiplier is >= 1, so a burst never lowers a minute); totals agree to rounding (the sums run in a
different order). Pass 1 is most of the work and depends only on the baseline, the noise and the
seed, so a worksheet keeps it while the burst model or the plan changes. Everything is integer or
per trial, hence identical for any thread count and any split of the trials.
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import njit
from .forecast import _MASK32, _SHIFT32, _STREAM_NOISE, _pick, _trial_bursts, philox4x32

__all__ = ["bin_counts", "burst_months", "level_bin", "quiet_months"]


@njit
def level_bin(demand, capacity_low, capacity_step, levels):
    """How many of the capacity levels ``low + j x step`` (j < levels) lie strictly below demand.

    The references' own comparison (``(demand - low) / step > j``), so that every path histograms a
    minute identically.
    """
    position = (demand - capacity_low) / capacity_step
    if position <= 0.0:
        return 0
    if position >= levels:
        return levels
    return math.ceil(position)


@njit(nogil=True)
def quiet_months(
    key0, key1, first_trial, trials, base, base_class, run_end, noise, pool_start, pool_size,
    noise_block, peak_out, total_out, counts_out,
):  # fmt: skip
    """Months without bursts: per trial the peak and total demand, and the minutes per pair.

    Parameters
    ----------
    key0, key1, first_trial, trials
        The seed's words and the trials ``first_trial .. first_trial + trials - 1``.
    base, base_class, run_end
        (minutes,) baseline (requests/s), the index of each minute's value among the distinct
        baseline values, and the first later minute whose baseline differs.
    noise, pool_start, pool_size, noise_block
        The residuals (multiplicative) and, per minute, the range of them its draw comes from
        (``noise[pool_start[m] : pool_start[m] + pool_size[m]]``: the residuals of slots of a
        baseline level near the minute's); one 32-bit word is drawn per block of ``noise_block``
        minutes and picks within each minute's range.
    peak_out, total_out
        (trials,) highest minute and sum over minutes of demand (requests/s).
    counts_out
        (distinct baseline values, noise pool) int64, added to: minutes at each pair.
    """
    minutes = base.shape[0]
    for i in range(trials):
        trial = first_trial + i
        trial_low = np.uint64(trial) & _MASK32
        trial_high = np.uint64(trial) >> _SHIFT32
        words = philox4x32(0, trial_low, trial_high, _STREAM_NOISE, key0, key1)
        peak = 0.0
        total = 0.0
        block = 0
        m = 0
        while m < minutes:
            if block % 4 == 0 and block > 0:
                words = philox4x32(block // 4, trial_low, trial_high, _STREAM_NOISE, key0, key1)
            word = words[block % 4]
            block_end = min((block + 1) * noise_block, minutes)
            while m < block_end:
                stop = min(run_end[m], block_end)
                draw = pool_start[m] + _pick(word, pool_size[m])
                demand = base[m] * noise[draw]
                total += demand * (stop - m)
                if demand > peak:
                    peak = demand
                counts_out[base_class[m], draw] += stop - m
                m = stop
            block += 1
        peak_out[i] = peak
        total_out[i] = total


@njit
def burst_months(
    key0, key1, first_trial, base, run_end, noise, pool_start, pool_size, noise_block, mean_count,
    duration_low, duration_high, mult_low, mult_high, capacity_low, capacity_step,
    quiet_peak, quiet_total, peak_out, mean_out, correction_out,
):  # fmt: skip
    """The bursts on top of :func:`quiet_months`: each trial's peak and mean, and the histogram moves.

    ``quiet_peak`` and ``quiet_total`` (trials,) come from :func:`quiet_months` for the same
    trials; ``correction_out`` (levels + 1,) int64 is added to: for every minute a burst covers,
    -1 at its quiet bin and +1 at its burst bin (bins as :func:`level_bin`). Multipliers must be
    >= 1 (:class:`capnb.forecast.BurstModel` ensures it).
    """
    minutes = base.shape[0]
    levels = correction_out.shape[0] - 1
    for i in range(quiet_peak.shape[0]):
        trial = first_trial + i
        starts, lengths, multipliers = _trial_bursts(
            key0, key1, trial, minutes, mean_count, duration_low, duration_high, mult_low,
            mult_high,
        )  # fmt: skip
        peak = quiet_peak[i]
        total = quiet_total[i]
        # the bursts by start (a handful: an insertion sort, which also compiles in no time)
        order = np.arange(starts.shape[0])
        for a in range(1, order.shape[0]):
            moving, b = order[a], a - 1
            while b >= 0 and starts[order[b]] > starts[moving]:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = moving
        trial_low = np.uint64(trial) & _MASK32
        trial_high = np.uint64(trial) >> _SHIFT32
        drawn_for = -1
        words = philox4x32(0, trial_low, trial_high, _STREAM_NOISE, key0, key1)
        done = 0  # minutes before this are visited: overlapping bursts are walked once
        for j in order:
            m = max(starts[j], done)
            covered_end = min(starts[j] + lengths[j], minutes)
            while m < covered_end:
                block = m // noise_block
                if block // 4 != drawn_for:
                    words = philox4x32(block // 4, trial_low, trial_high, _STREAM_NOISE, key0, key1)
                    drawn_for = block // 4
                level = noise[pool_start[m] + _pick(words[block % 4], pool_size[m])]
                change = min(min((block + 1) * noise_block, minutes), run_end[m])
                factor = 1.0
                for b in range(starts.shape[0]):
                    end = starts[b] + lengths[b]
                    if starts[b] <= m < end:
                        factor = max(factor, multipliers[b])
                        change = min(change, end)
                    elif starts[b] > m:
                        change = min(change, starts[b])
                quiet = base[m] * level
                loud = base[m] * level * factor
                n = change - m
                correction_out[level_bin(quiet, capacity_low, capacity_step, levels)] -= n
                correction_out[level_bin(loud, capacity_low, capacity_step, levels)] += n
                total += (loud - quiet) * n
                if loud > peak:
                    peak = loud
                m = change
            done = max(done, covered_end)
        peak_out[i] = peak
        mean_out[i] = total / minutes


@njit
def bin_counts(values, counts, capacity_low, capacity_step, histogram_out):
    """Add ``counts`` (the pair table) to ``histogram_out`` (levels + 1,) at the bins of ``values``."""
    levels = histogram_out.shape[0] - 1
    for c in range(values.shape[0]):
        for k in range(values.shape[1]):
            if counts[c, k]:
                histogram_out[level_bin(values[c, k], capacity_low, capacity_step, levels)] += (
                    counts[c, k]
                )

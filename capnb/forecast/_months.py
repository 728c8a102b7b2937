"""The Monte Carlo of :func:`capnb.forecast.simulate` over a block of trials (private module).

The months run in two passes (:mod:`capnb.kernels.months`): the months without bursts, which
depend only on the baseline, the noise pool, the seed and the trials, and the bursts on top. The
first pass is most of the work; its results are kept (a few per process, keyed by a digest of
their inputs) so that a worksheet changing the burst model or the plan's quantile re-runs only the
second. Both passes give each trial the same numbers whatever the thread count or the split of the
trials into blocks, so dask blocks and threads change nothing.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from ..kernels import months as kernels

__all__ = ["minutes_above", "month_block", "peaks_above"]

_KEPT: OrderedDict[tuple, tuple] = OrderedDict()
_KEEP = 4


def _runs(base: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct baseline values, each minute's index among them, and where its run ends.

    A run is a stretch of minutes with the same baseline; it ends at the first later minute with
    another value.
    """
    values, base_class = np.unique(base, return_inverse=True)
    change = np.flatnonzero(base[1:] != base[:-1]) + 1
    ends = np.r_[change, base.size]
    run_end = np.repeat(ends, np.diff(np.r_[0, ends]))
    return values, base_class.astype(np.int64), run_end.astype(np.int64)


def _quiet(inputs, key, first: int, trials: int):
    """The first pass for trials ``first .. first + trials - 1`` (kept for reuse)."""
    digest = hashlib.blake2b(inputs.base.tobytes(), digest_size=16)
    for part in (inputs.noise, inputs.pool_start, inputs.pool_size):
        digest.update(part.tobytes())
    ident = (digest.hexdigest(), inputs.noise_block, int(key[0]), int(key[1]), first, trials)
    if ident in _KEPT:
        _KEPT.move_to_end(ident)
        return _KEPT[ident]
    values, base_class, run_end = _runs(inputs.base)
    peak, total = np.empty(trials), np.empty(trials)
    # one thread: a second one gained 1.03x here (BENCHMARKS.md), so this pass is not split
    table = np.zeros((values.size, inputs.noise.size), np.int64)
    kernels.quiet_months(
        key[0], key[1], first, trials, inputs.base, base_class, run_end, inputs.noise,
        inputs.pool_start, inputs.pool_size, inputs.noise_block, peak, total, table,
    )  # fmt: skip
    kept = (peak, total, table, np.multiply.outer(values, inputs.noise), run_end)
    _KEPT[ident] = kept
    while len(_KEPT) > _KEEP:
        _KEPT.popitem(last=False)
    return kept


def month_block(trial_ids, *, inputs, bursts, mean_count, key, grid):
    """Peaks and means of a block of consecutive trials, and the block's minutes above each level.

    The minutes above level j (summed over the block's trials) come back on the block's first
    trial, zeros on the others: only their sum over trials means anything (see ``simulate``).
    """
    trial_ids = np.asarray(trial_ids, dtype=np.int64).reshape(-1)
    count = trial_ids.size
    peak, mean = np.empty(count), np.empty(count)
    above = np.zeros((count, grid.size), np.int64)
    if not count:
        return peak, mean, above
    first = int(trial_ids[0])
    quiet_peak, quiet_total, counts, values, run_end = _quiet(inputs, key, first, count)
    low, step = float(grid[0]), float(grid[1] - grid[0])
    histogram = np.zeros(grid.size + 1, np.int64)
    kernels.burst_months(
        key[0], key[1], first, inputs.base, run_end, inputs.noise, inputs.pool_start,
        inputs.pool_size, inputs.noise_block, mean_count, bursts.duration_s[0] / 60,
        bursts.duration_s[1] / 60, *bursts.multiplier, low, step, quiet_peak, quiet_total, peak,
        mean, histogram,
    )  # fmt: skip
    kernels.bin_counts(values, counts, low, step, histogram)
    # minutes above level j: those whose bin (levels strictly below them) is above j
    above[0] = np.cumsum(histogram[::-1])[::-1][1:]
    return peak, mean, above


def peaks_above(peaks: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Share of trials whose peak is strictly above each level (binned as the kernels bin)."""
    low, step, levels = float(grid[0]), float(grid[1] - grid[0]), grid.size
    position = (np.asarray(peaks, float) - low) / step
    bins = np.where(position <= 0, 0, np.where(position >= levels, levels, np.ceil(position)))
    per_bin = np.bincount(bins.astype(np.int64), minlength=levels + 1)
    return np.cumsum(per_bin[::-1])[::-1][1:] / peaks.size


def minutes_above(block_minutes) -> object:
    """Expected minutes per month above each level, from :func:`month_block`'s third output."""
    return block_minutes.sum("trial") / block_minutes.sizes["trial"]

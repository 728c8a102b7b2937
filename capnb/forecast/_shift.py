"""A level shift in a rate series: the weekly mean jumping and staying (read by select and bursts).

:func:`capnb.forecast.select` plans the coming week from the days after a shift alone, and
:func:`capnb.forecast.detect_bursts` measures each side against its own baseline, so that the
shift is no burst. Its own module, so that both read one rule without importing each other.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SHIFT_RATIO", "level_shift_in", "shift_words"]

#: A level shift: the week after a day's start at this many times the week before it (or under
#: its inverse), each side's weekly means flatter than the square root of the jump, a week or
#: more on each side.
SHIFT_RATIO = 1.5


def level_shift_in(values: np.ndarray, per_day: int) -> tuple[int, float, float] | None:
    """The day a level shift starts (interval position) and the weekly mean before and after it.

    Weekly means (over whole days counted from the series' start, so a weekly cycle cancels):
    the week from a day's start against the week before it, at ``SHIFT_RATIO`` or more (or
    its inverse), with every week wholly on either side within the square root of that jump of
    the others on its side, and the weekly mean moving on each side by under half the day's
    share of the jump a day (so a steady trend is not a shift: growth of g a day moves the weekly
    mean g a day on both sides and 7g across a week). The largest such jump; None without one,
    with under a week on either side, or with one week's mean alone on each (a 14-day trace: two
    means cannot tell a step from a trend, so one grown 1.7x in its second week is no shift).
    """
    days = values.size // per_day
    if days < 15:
        return None
    daily = values[: days * per_day].reshape(days, per_day)
    seen = (~np.isnan(daily)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(seen > 0, np.nansum(daily, axis=1) / seen, np.nan)
        weeks = np.array([np.nanmean(means[d : d + 7]) for d in range(days - 6)])
    if not (np.isfinite(weeks) & (weeks > 0)).all():
        return None
    logs = np.log(weeks)
    best = None
    for day in range(7, days - 6):
        jump = abs(logs[day] - logs[day - 7])
        if jump < math.log(SHIFT_RATIO) or (best is not None and jump <= best[0]):
            continue
        sides = [side for side in (logs[: day - 6], logs[day:]) if side.size > 1]
        if not sides:  # a week's mean alone on each side
            continue
        spread = max(np.ptp(side) for side in sides)
        drift = max(np.ptp(side) / (side.size - 1) for side in sides)
        if spread < jump / 2 and drift < jump / 14:
            best = (jump, day)
    if best is None:
        return None
    day = best[1]
    return day * per_day, float(weeks[day - 7]), float(weeks[day])


def shift_words(when: str, shift: tuple[int, float, float]) -> str:
    """A shift found by :func:`level_shift_in`, in words: when, and the weekly mean's move."""
    _, before, after = shift
    return (
        f"{when}: the weekly mean went from {before:.4g} to {after:.4g} requests/s "
        f"({after / before:.2f}x) and stayed"
    )

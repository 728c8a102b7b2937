"""Candidate forecasts of the coming days: plain rules on the history before an origin.

Each candidate maps the values before an origin (requests/s per interval, NaN where missing) to a
point forecast of the intervals after it. The point forecast is not the plan: the plan's
quantiles come from the candidate's own errors on earlier origins (:mod:`._select`), so a rule
only has to put the daily shape and the level in the right place.

- ``seasonal_naive_day``: the last 24 hours, repeated.
- ``seasonal_naive_week``: the last 7 days, repeated (needs 7 days).
- ``last_week``: each time of day at its mean over the last (up to) 7 days.
- ``damped_trend``: the level by Holt's damped trend on log(7-day mean), a mean over each run of
  7 observed days, so that a weekend is no fall (on daily means a trace ending on a Sunday read
  its weekend as a downward trend), times the last week's shape (rate over its day's mean); the
  level is kept inside the range of the past daily levels, and the cap says so when it binds
  (growth never compounds beyond what the history shows). Needs 8 days: two 7-day means.

Every rule counts days back from the origin, so an origin at any time of day works.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FORECAST_MODELS", "Forecast"]


@dataclass(frozen=True)
class Forecast:
    """A point forecast from one origin: ``values`` (requests/s per interval) and a note."""

    values: np.ndarray
    note: str = ""


def _filled(history: np.ndarray, lag: int) -> np.ndarray:
    """The history with each missing value taken from ``lag`` intervals earlier, repeatedly."""
    values = history.copy()
    for _ in range(values.size // lag):
        missing = np.flatnonzero(np.isnan(values[lag:])) + lag
        if missing.size == 0:
            break
        before = values[missing - lag]
        if np.isnan(before).all():
            break
        values[missing] = before
    return values


def _repeat(block: np.ndarray, steps: int) -> np.ndarray:
    return np.resize(block, steps)


def seasonal_naive_day(history: np.ndarray, per_day: int, steps: int) -> Forecast | None:
    if history.size < per_day:
        return None
    last = _filled(history, per_day)[-per_day:]
    return Forecast(_repeat(last, steps))


def seasonal_naive_week(history: np.ndarray, per_day: int, steps: int) -> Forecast | None:
    week = 7 * per_day
    if history.size < week:
        return None
    values = _filled(_filled(history, week), per_day)[-week:]
    return Forecast(_repeat(values, steps))


def _days(history: np.ndarray, per_day: int, most: int) -> np.ndarray:
    """The last whole days before the origin (at most ``most``), one row each."""
    count = min(most, history.size // per_day)
    return history[history.size - count * per_day :].reshape(count, per_day)


def last_week(history: np.ndarray, per_day: int, steps: int) -> Forecast | None:
    if history.size < per_day:
        return None
    days = _days(history, per_day, 7)
    seen = ~np.isnan(days)
    if not seen.any(axis=0).all():
        return None  # a time of day never observed: no profile to repeat
    profile = np.where(seen, days, 0.0).sum(axis=0) / seen.sum(axis=0)
    return Forecast(_repeat(profile, steps))


#: Holt's damped trend: smoothing of the level, of the trend, and the damping, fitted on the grid
#: by the one-step squared error of log(7-day mean) (a handful of points: a grid is exact enough).
_ALPHA = np.linspace(0.1, 1.0, 10)
_BETA = np.array([0.0, 0.05, 0.1, 0.2, 0.3])
_PHI = np.array([0.8, 0.9, 0.98])


def _holt_damped(y: np.ndarray, days_ahead: int) -> np.ndarray:
    """The log level of each day ahead: Holt's damped trend (additive, on logs), grid-fitted."""
    alpha, beta, phi = np.meshgrid(_ALPHA, _BETA, _PHI, indexing="ij")
    alpha, beta, phi = alpha.ravel(), beta.ravel(), phi.ravel()
    level = np.full(alpha.size, y[0])
    trend = np.full(alpha.size, y[1] - y[0])
    error = np.zeros(alpha.size)
    for value in y[1:]:
        guess = level + phi * trend
        error += (value - guess) ** 2
        new = alpha * value + (1 - alpha) * guess
        trend = beta * (new - level) + (1 - beta) * phi * trend
        level = new
    best = int(np.argmin(error))
    damping = np.cumsum(phi[best] ** np.arange(1, days_ahead + 1))
    return level[best] + trend[best] * damping


def damped_trend(history: np.ndarray, per_day: int, steps: int) -> Forecast | None:
    days = _days(history, per_day, history.size // per_day)
    seen = ~np.isnan(days)
    kept = seen.sum(axis=1) >= per_day / 2  # a day observed for less than half says little
    if kept.sum() < 8:
        return None
    means = np.where(seen, days, 0.0).sum(axis=1)[kept] / seen.sum(axis=1)[kept]
    if (means <= 0).any():
        return None
    weeks = np.convolve(means, np.full(7, 1.0 / 7), mode="valid")  # each 7 observed days' mean
    ahead = -(-steps // per_day)
    level = np.exp(_holt_damped(np.log(weeks), ahead))
    low, high = means.min(), means.max()
    capped = np.clip(level, low, high)
    note = ""
    if (capped != level).any():
        note = (
            f"the damped trend's level ({level.min():.4g} to {level.max():.4g} requests/s) was "
            f"kept inside the past daily levels ({low:.4g} to {high:.4g})"
        )
    recent = days[-7:][kept[-7:]]  # the last week's days observed for half their length
    if recent.shape[0] == 0:
        return None
    recent_seen = ~np.isnan(recent)
    ratio = np.where(recent_seen, recent, 0.0) / means[-recent.shape[0] :, None]
    count = recent_seen.sum(axis=0)
    if (count == 0).any():
        return None  # a time of day never observed in the last week: no shape to repeat
    shape = ratio.sum(axis=0) / count
    return Forecast((capped[:, None] * shape[None, :]).ravel()[:steps], note)


#: The candidates, each with the days of history it needs before its first forecast.
FORECAST_MODELS = {
    "seasonal_naive_day": (seasonal_naive_day, 1),
    "seasonal_naive_week": (seasonal_naive_week, 7),
    "last_week": (last_week, 1),
    "damped_trend": (damped_trend, 8),
}

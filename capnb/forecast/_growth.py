"""Growth with its uncertainty: per-slot plans that are quantiles of the coming days' demand.

A slot's quantile of past intervals plans for last week. To plan for the next ``horizon_days`` the
demand of an interval is split into the level of its day (the day's mean rate) and its shape (the
interval's rate over that mean), and the two are forecast separately:

- the level: a least-squares line through log(daily mean) over the fitted days, and the Student-t
  prediction interval of that line for each day ahead (n - 2 degrees of freedom). Its width holds
  the day-to-day scatter of the level, the standard error of the intercept and that of the slope,
  which grows with the distance from the fitted days: the band widens with the horizon. This is
  the textbook regression prediction interval; it has no setting to tune.
- the shape: the slot's own past values of rate / day mean (its empirical distribution).

The plan of a slot at quantile q is the q-quantile of level x shape over the horizon's days: the
solution of ``mean over (day ahead h, past value i) of T((log v - log shape_i - mu_h) / sd_h) = q``
(T the t distribution's CDF), found by bisection. Its ratio to the slot's past quantile is the
``growth_factor``: the per-slot quantile times the growth it takes, trend and uncertainty
included.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .. import _validate, glossary, words
from ..data._series import (
    DAY_NS,
    Slots,
    checked_series,
    duration_text,
    interval_ns_of,
    slot_codes,
)
from ..data._series import slots as slot_spec
from ..errors import InputError

__all__ = [
    "GROWTH_MODELS",
    "MIN_DAYS",
    "carry_forward",
    "fit_growth",
    "observed_days",
    "predict",
]

#: How a plan carries history forward: ``"probabilistic"`` (the default: the level's trend with its
#: prediction band), ``"trend"`` (the fitted compound trend alone, no band) or ``"none"`` (the past
#: quantiles as they are).
GROWTH_MODELS = ("probabilistic", "trend", "none")
#: Days of history a growth model needs (shorter histories are planned as they are).
MIN_DAYS = 7  # a week at least, so that a weekday pattern does not pass for a trend

_MAX_STEPS = 200  # Newton steps, each kept inside the bracket: a few suffice
_TOLERANCE = 1e-13  # of the last Newton step, in log units (relative above 1)


def _attrs(units: str, long_name: str, **extra) -> dict:
    return {"units": units, "long_name": long_name, **extra}


def growth_model(value: object, argument: str = "growth_model") -> str:
    """The name checked against :data:`GROWTH_MODELS`."""
    if value not in GROWTH_MODELS:
        raise InputError(f"{argument} must be one of {list(GROWTH_MODELS)}, got {value!r}")
    return str(value)


def observed_days(series: xr.Dataset) -> int:
    """Days observed for at least half their length (0 if the interval does not divide a day)."""
    series = checked_series(series)
    if DAY_NS % interval_ns_of(series):
        return 0
    return int(_observed(series)[3].sum())


def _observed(series: xr.Dataset):
    """The days of a series and which of them are observed for at least half their length.

    Returns qps, its days (counted from the epoch), each interval's day, the observed days, and
    per day the observed intervals and their summed rate.
    """
    step = interval_ns_of(series)
    ns = series["time"].values.astype("datetime64[ns]").view(np.int64)
    qps = series["qps"].values.astype(float)
    if qps.ndim != 1:
        raise InputError("series: give one series (qps over time only); select the others away")
    days, index = np.unique(ns // DAY_NS, return_inverse=True)
    observed = np.bincount(index, weights=~np.isnan(qps), minlength=days.size)
    total = np.bincount(index, weights=np.nan_to_num(qps), minlength=days.size)
    return qps, days, index, observed >= (DAY_NS // step) / 2, observed, total


# -- the level: log-linear fit of the daily means, and its prediction band ---------------------
def _days(series: xr.Dataset, min_days: int):
    """The days a level is fitted on: those observed for at least half their length.

    Returns qps, those days (counted from the epoch), their mean rates (requests/s), and per
    interval its day's mean rate (NaN for a day left out).
    """
    step = interval_ns_of(series)
    if DAY_NS % step:
        raise InputError(
            f"the series' interval ({duration_text(step)}) does not divide a day: resample it"
        )
    qps, days, index, kept, observed, total = _observed(series)
    if kept.sum() < min_days:
        raise InputError(
            f"series: a growth forecast needs at least {min_days} days observed for at least half "
            f"their length; the series has {int(kept.sum())}"
        )
    means = np.full(days.size, np.nan)
    means[kept] = total[kept] / observed[kept]
    if (means[kept] <= 0).any():
        raise InputError("series: a day with a mean rate of 0 has no level to grow from")
    return qps, days[kept], means[kept], means[index]


def _level(days: np.ndarray, means: np.ndarray, horizon_days: int):
    """The line through log(mean) on the day, and its t prediction for each day ahead."""
    x = (days - days[0]).astype(float)
    y = np.log(means)
    n = x.size
    centre = x.mean()
    sxx = float((x - centre) @ (x - centre))
    slope = float((x - centre) @ (y - y.mean()) / sxx)
    intercept = float(y.mean() - slope * centre)
    residual = y - (intercept + slope * x)
    scatter = math.sqrt(float(residual @ residual) / (n - 2))
    ahead = x[-1] + np.arange(1, horizon_days + 1, dtype=float)
    mu = intercept + slope * ahead
    sd = scatter * np.sqrt(1.0 + 1.0 / n + (ahead - centre) ** 2 / sxx)
    return {
        "slope": slope,
        "slope_se": scatter / math.sqrt(sxx),
        "scatter": scatter,
        "dof": n - 2,
        "mu": mu,
        "sd": sd,
        "days": n,
    }


def _mixture_quantiles(log_shape: np.ndarray, mu, sd, dof: int, quantiles) -> np.ndarray:
    """q-quantiles of exp(log_shape_i + mu_h + sd_h t) over i, h (equal weights): (rows, q).

    ``log_shape`` is (rows, values) padded with NaN (rows without a value give NaN). The root of
    mixture CDF = q in log space, by Newton steps kept inside a bracket that every step narrows
    (a step leaving it is replaced by the bracket's middle) until the steps are below
    ``_TOLERANCE``; the bracket starts at the smallest and
    largest of the components' own q-quantiles, between which the mixture's lies.
    """
    from scipy import special  # imported where used: 0.1 s a process that never forecasts growth

    seen = ~np.isnan(log_shape)
    count = seen.sum(axis=1)
    shape = np.where(seen, log_shape, 0.0)[:, None, None, :]  # (rows, 1, 1, values)
    weight = (seen / np.maximum(count, 1)[:, None] / mu.size)[:, None, None, :]
    mu, sd = mu[None, None, :, None], sd[None, None, :, None]  # (1, 1, h, 1)
    q = np.asarray(quantiles, dtype=float)
    own = shape + mu + sd * special.stdtrit(dof, q)[None, :, None, None]  # (rows, q, h, values)
    low = np.where(seen[:, None, None, :], own, np.inf).min(axis=(2, 3))
    high = np.where(seen[:, None, None, :], own, -np.inf).max(axis=(2, 3))
    density = math.exp(special.gammaln((dof + 1) / 2) - special.gammaln(dof / 2))
    density /= math.sqrt(dof * math.pi)
    with np.errstate(invalid="ignore"):  # a slot with no value: inf - inf, NaN, settled at once
        x = 0.5 * (low + high)
    exact = sd == 0  # every day on the fitted line (a flat series): the level is a point
    for _ in range(_MAX_STEPS):
        above = x[:, :, None, None] - shape - mu
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(exact, np.where(above >= 0, np.inf, -np.inf), above / sd)
            density_z = np.where(exact, 0.0, density * (1 + z * z / dof) ** (-(dof + 1) / 2) / sd)
        gap = (special.stdtr(dof, z) * weight).sum(axis=(2, 3)) - q
        slope = (density_z * weight).sum(axis=(2, 3))
        low = np.where(gap < 0, x, low)
        high = np.where(gap < 0, high, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = x - gap / slope
        settled = ~np.isfinite(x) | (np.abs(step - x) <= _TOLERANCE * np.maximum(1, np.abs(x)))
        if settled.all():
            break
        inside = (step > low) & (step < high)
        x = np.where(settled, x, np.where(inside, step, 0.5 * (low + high)))
    result = np.exp(x)
    result[count == 0] = np.nan
    return result


def _horizon(value: object) -> int:
    return _validate.positive_int(value, "horizon_days")


def fit_growth(
    series: xr.Dataset, *, horizon_days: int = 7, quantiles=(0.5, 0.95, 0.99)
) -> xr.Dataset:
    """The level of the coming days: the daily mean rate's trend and its prediction band.

    Parameters
    ----------
    series
        A QPS series of at least 7 days (each observed for at least half its length), whose interval
        divides a day.
    horizon_days
        How many days after the last fitted day to forecast.
    quantiles
        The quantiles of each day's mean rate to give.

    Returns
    -------
    xarray.Dataset
        ``level_qps`` over (day_ahead, traffic_quantile): quantiles of the daily mean rate
        (requests/s) from the t prediction interval of the log-linear fit; ``level_sd`` over
        day_ahead: the interval's scale in log units (it grows with the horizon);
        ``trend_per_day`` (1/day) with its ``standard_error`` attr. Attrs: ``days`` fitted,
        ``dof`` and ``scatter`` (the residual standard deviation of log(daily mean)).

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> level = fit_growth(load_rate_series("servegen-m-small").isel(time=slice(0, 7 * 144)))
    >>> level.level_qps.dims
    ('day_ahead', 'traffic_quantile')
    """
    from scipy import special

    from ._baseline import _quantiles

    series = checked_series(series)
    horizon = _horizon(horizon_days)
    q = _quantiles(quantiles)
    _, days, means, _ = _days(series, MIN_DAYS)
    fit = _level(days, means, horizon)
    t = special.stdtrit(fit["dof"], q)
    level = np.exp(fit["mu"][:, None] + fit["sd"][:, None] * t[None, :])
    return xr.Dataset(
        {
            "level_qps": (
                ("day_ahead", "traffic_quantile"),
                level,
                _attrs("requests/s", "quantile of the daily mean request rate"),
            ),
            "level_sd": (
                "day_ahead",
                fit["sd"],
                _attrs("1", "scale of the level's t prediction interval, log units"),
            ),
            "trend_per_day": (
                (),
                math.expm1(fit["slope"]),
                glossary.attrs(
                    "trend_per_day", standard_error=math.exp(fit["slope"]) * fit["slope_se"]
                ),
            ),
        },
        coords={
            "day_ahead": (
                "day_ahead",
                np.arange(1, horizon + 1),
                _attrs("d", "days after the fit"),
            ),
            "traffic_quantile": ("traffic_quantile", q, glossary.attrs("traffic_quantile")),
        },
        attrs={
            "days": fit["days"],
            "dof": fit["dof"],
            "scatter": fit["scatter"],
            "method": "least squares of log(daily mean) on the day; Student-t prediction interval",
        },
    )


def predict(
    series: xr.Dataset,
    *,
    slots: str | tuple | Slots = "hour_of_day",
    quantiles=(0.5, 0.95, 0.99),
    horizon_days: int = 7,
) -> xr.Dataset:
    """Per-slot quantiles of the demand of the next ``horizon_days`` days: the probabilistic plan.

    Parameters
    ----------
    series
        A QPS series of at least 7 days (see :func:`fit_growth`).
    slots, quantiles
        As in :func:`capnb.forecast.fit_baseline`.
    horizon_days
        The days the plan is for, counted after the last day of the series.

    Returns
    -------
    xarray.Dataset
        ``target_qps`` over (slot, traffic_quantile): the quantiles of level x shape over the
        horizon (requests/s); ``history_qps``: the slot's past quantiles, as
        :func:`capnb.forecast.fit_baseline` gives them; ``growth_factor`` = target_qps /
        history_qps; and the level's ``trend_per_day``. Attrs as :func:`fit_growth`'s.

    Examples
    --------
    >>> from capnb.data import load_rate_series
    >>> ahead = predict(load_rate_series("servegen-m-small"), quantiles=(0.99,))
    >>> bool((ahead.growth_factor > 1).all())
    True
    """
    from ._baseline import _quantiles, _series_and_slots, slot_statistics

    series, spec = _series_and_slots(series, slots)
    horizon = _horizon(horizon_days)
    q = _quantiles(quantiles)
    qps, days, means, day_mean = _days(series, MIN_DAYS)
    fit = _level(days, means, horizon)
    codes = slot_codes(series["time"], spec)
    with np.errstate(divide="ignore", invalid="ignore"):  # an idle interval: log(0), left out
        shape = np.log(qps / day_mean)  # NaN for a missing interval or a day left out
    shape[~np.isfinite(shape)] = np.nan
    # one row per slot of its past shapes, padded with NaN
    seen = ~np.isnan(shape)
    slot_of, value = codes[seen], shape[seen]
    order = np.argsort(slot_of, kind="stable")
    count = np.bincount(slot_of, minlength=spec.count)
    rank = np.arange(order.size) - np.repeat(np.cumsum(count) - count, count)
    table = np.full((spec.count, max(int(count.max()), 1)), np.nan)
    table[slot_of[order], rank] = value[order]
    target = _mixture_quantiles(table, fit["mu"], fit["sd"], fit["dof"], q)
    history, _, _ = slot_statistics(qps, codes, q, spec.count)
    dims = ("slot", "traffic_quantile")
    return xr.Dataset(
        {
            "target_qps": (dims, target, glossary.attrs("target_qps", horizon_days=horizon)),
            "history_qps": (dims, history, _attrs("requests/s", "quantile of the past intervals")),
            "growth_factor": (
                dims,
                target / history,
                _attrs("1", "probabilistic plan over the slot's past quantile"),
            ),
            "trend_per_day": (
                (),
                math.expm1(fit["slope"]),
                glossary.attrs(
                    "trend_per_day", standard_error=math.exp(fit["slope"]) * fit["slope_se"]
                ),
            ),
        },
        coords={
            "slot": ("slot", np.arange(spec.count), glossary.attrs("slot", kind=spec.kind)),
            "traffic_quantile": ("traffic_quantile", q, glossary.attrs("traffic_quantile")),
        },
        attrs={
            "title": f"probabilistic plan for the next {horizon} days",
            "slots": spec.kind,
            "horizon_days": horizon,
            "days": fit["days"],
            "dof": fit["dof"],
            "scatter": fit["scatter"],
            "method": (
                "per-slot quantiles of (day level x shape): level from the Student-t prediction "
                "interval of log(daily mean) on the day, shape from the slot's past rate / day mean"
            ),
        },
    )


def carry_forward(
    series: xr.Dataset,
    *,
    slots: str | tuple | Slots = "hour_of_day",
    quantile: float = 0.99,
    horizon_days: int = 7,
) -> xr.Dataset:
    """The series with each interval x its slot's ``growth_factor`` at ``quantile`` (see :func:`predict`).

    Slot quantiles scale with their values, so :func:`capnb.forecast.fit_baseline` of the result
    plans each slot on :func:`predict`'s ``target_qps`` at ``quantile``, and the bursts and the
    Monte Carlo of months run on demand carried to the same level. This is what
    :func:`capnb.forecast.target` plans on with ``growth_model="probabilistic"``.
    """
    series = checked_series(series)
    q = _validate.fraction(quantile, "quantile", low_open=True)
    ahead = predict(series, slots=slots, quantiles=(q,), horizon_days=horizon_days)
    factor = ahead.growth_factor.isel(traffic_quantile=0).values
    factor = np.where(np.isfinite(factor), factor, 1.0)
    codes = slot_codes(series["time"], slot_spec(slots))
    result = series.copy()
    per_interval = xr.DataArray(factor[codes], dims="time")
    for name in ("qps", "requests"):
        if name in result:
            result[name] = (result[name] * per_interval).assign_attrs(series[name].attrs)
    result.attrs["growth"] = (
        f"carried {ahead.attrs['horizon_days']} days forward: each slot x its {words.quantile(q)} "
        f"growth factor ({float(factor.min()):.3g} to {float(factor.max()):.3g}; trend "
        f"{float(ahead.trend_per_day):+.2%}/day with its prediction band, fitted on "
        f"{ahead.attrs['days']} days)"
    )
    return result

"""The history carried to the coming days by the chosen growth model (what a target plans on)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import _validate
from ..data._series import checked_series, slot_codes
from ..data._series import slots as slot_spec
from ..errors import InputError
from ._models import FORECAST_MODELS
from ._select import DEFAULT_MODELS, _TooShort, select

__all__ = ["TARGET_GROWTH_MODELS", "carry", "selection_quantiles"]

#: What :func:`capnb.forecast.target` plans on: ``"auto"`` (the default: the candidate chosen by
#: rolling origins inside the history, :func:`capnb.forecast.select`), one candidate by name
#: (:data:`capnb.forecast.FORECAST_MODELS`), ``"probabilistic"`` (the log-linear trend with its
#: Student-t band, :func:`capnb.forecast.predict`) or ``"none"`` (the past quantiles as they are).
TARGET_GROWTH_MODELS = ("auto", *FORECAST_MODELS, "probabilistic", "none")


def selection_quantiles(quantile: float) -> tuple[tuple, tuple]:
    """The quantiles a selection plans (P95, P99 and the plan's) and those it scores (>= 0.9)."""
    planned = tuple(sorted({0.95, 0.99, float(quantile)}))
    scored = tuple(q for q in planned if q >= 0.9)
    return planned, scored


def _scaled(series: xr.Dataset, factor: np.ndarray, slots, words: str) -> xr.Dataset:
    """Every interval times its slot's factor (NaN or inf factors leave the slot as it is)."""
    factor = np.where(np.isfinite(factor), factor, 1.0)
    per_interval = xr.DataArray(factor[slot_codes(series["time"], slot_spec(slots))], dims="time")
    result = series.copy()
    for name in ("qps", "requests"):
        if name in result:
            result[name] = (result[name] * per_interval).assign_attrs(series[name].attrs)
    result.attrs["growth_model"] = words
    return result


def _checked_selection(selection, quantile: float, allowed) -> xr.Dataset:
    if not isinstance(selection, xr.Dataset) or "chosen_model" not in selection.attrs:
        raise InputError("selection must be the output of capnb.forecast.select")
    if quantile not in selection.traffic_quantile.values:
        raise InputError(
            f"selection: its quantiles {selection.traffic_quantile.values.tolist()} lack the "
            f"plan's {quantile:g}"
        )
    if selection.attrs["chosen_model"] not in allowed:
        raise InputError(f"selection chose {selection.attrs['chosen_model']!r}, not in {allowed}")
    return selection


def carry(
    series: xr.Dataset,
    *,
    slots="hour_of_day",
    quantile: float = 0.99,
    growth_model: str = "auto",
    horizon_days: int = 7,
    selection: xr.Dataset | None = None,
) -> xr.Dataset:
    """The history carried to the ``horizon_days`` after it, each slot x its plan's growth factor.

    Slot quantiles scale with their values, so :func:`capnb.forecast.fit_baseline` of the result
    plans each slot on the growth model's plan at ``quantile``. ``attrs["growth_model"]`` says what
    was done, in words starting with the model's name; a history the model cannot forecast (a
    selection with too few origins, a probabilistic plan with under 7 days, a series with extra
    dims) is returned as it is, with ``"none: "`` and why.

    Parameters
    ----------
    growth_model
        One of :data:`TARGET_GROWTH_MODELS`.
    selection
        A :func:`capnb.forecast.select` result on this series to reuse (``"auto"`` or a candidate).
    """
    from ._growth import MIN_DAYS, carry_forward, observed_days

    series = checked_series(series)
    q = _validate.fraction(quantile, "quantile", low_open=True)
    if growth_model not in TARGET_GROWTH_MODELS:
        raise InputError(
            f"growth_model must be one of {list(TARGET_GROWTH_MODELS)}, got {growth_model!r}"
        )
    if isinstance(horizon_days, bool) or not isinstance(horizon_days, int) or horizon_days < 1:
        raise InputError(f"horizon_days must be a positive integer, got {horizon_days!r}")
    same = series.copy()
    if growth_model == "none":
        same.attrs["growth_model"] = "none"
        return same
    if series["qps"].ndim > 1:
        same.attrs["growth_model"] = (
            f"none: the {growth_model} growth takes one series (qps over time only)"
        )
        return same
    if growth_model == "probabilistic":
        if observed_days(series) < MIN_DAYS:
            same.attrs["growth_model"] = (
                f"none: fewer than {MIN_DAYS} days observed, planned on the history as it is"
            )
            return same
        ahead = carry_forward(series, slots=slots, quantile=q, horizon_days=horizon_days)
        ahead.attrs["growth_model"] = f"probabilistic: {ahead.attrs['growth']}"
        return ahead
    allowed = DEFAULT_MODELS if growth_model == "auto" else (growth_model,)
    if selection is None:
        planned, scored = selection_quantiles(q)
        try:
            selection = select(
                series, slots=slots, quantiles=planned, score_quantiles=scored, models=allowed,
                horizon_days=horizon_days,
            )  # fmt: skip
        except _TooShort as error:
            same.attrs["growth_model"] = f"none: {error}; planned on the history as it is"
            return same
    selection = _checked_selection(selection, q, allowed)
    factor = selection.growth_factor.sel(traffic_quantile=q).values
    shown = factor[np.isfinite(factor)]
    words = (
        f"{growth_model}: {selection.attrs['chosen_model']}"
        f"{' (chosen by ' + selection.attrs['origins'].split(',')[0] + ')' if growth_model == 'auto' else ''}"
        f", its P{100 * q:g} for the {selection.attrs['horizon_days']} days after the history: each "
        f"slot x {shown.min():.3g} to {shown.max():.3g} of its past P{100 * q:g}"
    )
    result = _scaled(series, factor, slots, words)
    for name in ("choice", "goals", "origins", "gaps"):
        result.attrs[f"forecast_{name}"] = selection.attrs[name]
    return result

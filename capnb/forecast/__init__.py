"""Step 1, traffic forecasting: the QPS a plan must serve per time slot, and how often bursts exceed it.

The article's first mistake was to plan on the historical mean: bursts were under-estimated by 40 %.
Traffic swings by hour (a chat service carries 5-10x more at 09:00-10:00 than at 03:00-04:00) and by
weekday, so capnb plans per slot on the P95/P99 of the per-interval QPS, and treats bursts (3-5x for
1-2 hours, 1-2 times a month) as probabilistic events to be absorbed by an elastic buffer rather than
by fixed capacity.

The pipeline, one function each::

    load_trace / load_rate_series (capnb.data) -> resample -> fit_baseline -> target_qps
                                                          +-> detect_bursts -> fit_burst_model
                                                          +-> simulate -> exceedance curve, buffer_qps
                                                          +-> backtest, project
                                                          +-> select, carry (the growth model)
                                                          +-> predict, carry_forward, rolling_origin

:func:`target` chains them into the one Dataset the capacity step takes; :func:`target_from`
assembles that Dataset from a baseline and a simulation run separately (as a worksheet does, to keep
the parts between changes). Slot codes: ``hour_of_day`` 0-23, ``hour_of_week`` 0-167 with Monday
00:00 = 0, or a custom ``(slot length, period)``, all on the trace's own clock.
"""

from __future__ import annotations

from ..data._series import Slots, interval_seconds, resample, slot_codes, slots
from ._auto import TARGET_GROWTH_MODELS, carry, selection_quantiles
from ._baseline import DEFAULT_QUANTILES, fit_baseline
from ._bursts import (
    MONTH_DAYS,
    BurstModel,
    MonthInputs,
    detect_bursts,
    fit_burst_model,
    month_inputs,
    noise_pools,
    simulate,
)
from ._growth import GROWTH_MODELS, MIN_DAYS, carry_forward, fit_growth, observed_days, predict
from ._models import FORECAST_MODELS as _RULES
from ._outlook import backtest, fit_trend, plan_name, project, project_factor
from ._rolling import rolling_origin
from ._select import CALIBRATION_DAYS, DEFAULT_MODELS, HOURLY_BELOW_DAYS, select
from ._target import describe, slot_clock, slot_label, target, target_from

#: The candidate forecasts :func:`select` chooses from (see ``capnb/forecast/_models.py``).
FORECAST_MODELS = tuple(_RULES)

__all__ = [
    "CALIBRATION_DAYS",
    "DEFAULT_MODELS",
    "DEFAULT_QUANTILES",
    "FORECAST_MODELS",
    "GROWTH_MODELS",
    "HOURLY_BELOW_DAYS",
    "MIN_DAYS",
    "MONTH_DAYS",
    "TARGET_GROWTH_MODELS",
    "BurstModel",
    "MonthInputs",
    "Slots",
    "backtest",
    "carry",
    "carry_forward",
    "describe",
    "detect_bursts",
    "fit_baseline",
    "fit_burst_model",
    "fit_growth",
    "fit_trend",
    "interval_seconds",
    "month_inputs",
    "noise_pools",
    "observed_days",
    "plan_name",
    "predict",
    "project",
    "project_factor",
    "resample",
    "rolling_origin",
    "select",
    "selection_quantiles",
    "simulate",
    "slot_clock",
    "slot_codes",
    "slot_label",
    "slots",
    "target",
    "target_from",
]

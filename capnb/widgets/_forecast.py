"""The forecasting worksheet's controls."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import ClassVar

import altair as alt
import ipywidgets as widgets
import xarray as xr

from .. import charts, data, forecast
from ..errors import InputError
from ..forecast._bursts import _choose
from ..forecast._target import _target_from
from ._legacy import Worksheet, _same, dropdown, slider_style

__all__ = ["ForecastWorksheet"]

_LOG_INTERVALS = ("1s", "10s", "1min", "5min", "10min", "15min", "30min", "1h")
_SERIES_INTERVALS = ("10min", "20min", "30min", "1h")
_ARTICLE = forecast.BurstModel()


def _note_chart(text: str) -> alt.Chart:
    frame = {"values": [{"text": text}]}
    return (
        alt.Chart(alt.Data(**frame))
        .mark_text(align="left", fontSize=13)
        .encode(text=alt.Text("text:N"), x=alt.XValue(5), y=alt.YValue(15))
        .properties(width=640, height=30)
    )


class ForecastWorksheet(Worksheet):
    """Forecasting worksheet: slot targets at P95/P99, the mean plan's shortfall, and burst buffers.

    Parameters
    ----------
    trace
        A bundled rate series or request log (``capnb.data.list_rate_series()``,
        ``capnb.data.list_traces()``), the path of a request log, or a loaded Dataset (a request log
        or a rate series).
    interval
        Starting interval (default: 10 min for a rate series, 1 min for a log).
    slots, quantile
        Slot kind and the quantile of the fixed plan.
    bursts_per_month, burst_hours, burst_multiplier
        The burst model (the article's default: 1.5 a month, 1-2 hours, 3-5x).
    exceed_probability
        The monthly probability of exceeding capacity that the buffer is sized for.
    trials, seed
        Monte Carlo months and seed.
    """

    chart_keys: ClassVar[Mapping[str, Callable]] = {
        # the series and plans charts draw the baseline's variables of the result
        "series": lambda ws: (ws.series, ws.baseline, ws.inputs["quantile"]),
        "heatmap": lambda ws: (ws.series,),
        "plans": lambda ws: (ws.baseline, ws.inputs["quantile"]),
        "exceedance": lambda ws: (ws.result, ws.skipped),
    }
    chart_makers: ClassVar[Mapping[str, Callable]] = {
        "series": lambda ws: charts.forecast_series(
            ws.series, ws.result, quantile=ws.inputs["quantile"]
        ),
        "heatmap": lambda ws: charts.forecast_heatmap(ws.series),
        "plans": lambda ws: charts.forecast_plans(ws.result, quantile=ws.inputs["quantile"]),
        "exceedance": lambda ws: (
            charts.forecast_exceedance(ws.result)
            if "buffer_qps" in ws.result
            else _note_chart(f"No Monte Carlo: {ws.skipped}")
        ),
    }

    def __init__(
        self,
        trace: str | os.PathLike | xr.Dataset = "servegen-m-large",
        *,
        interval: str | None = None,
        slots: str = "hour_of_day",
        quantile: float = 0.99,
        bursts_per_month: float = _ARTICLE.rate_per_month,
        burst_hours: tuple[float, float] = (1.0, 2.0),
        burst_multiplier: tuple[float, float] = _ARTICLE.multiplier,
        exceed_probability: float = 0.05,
        trials: int = 10_000,
        seed: int = 0,
    ):
        self.trials, self.seed = trials, seed
        self._stages: dict[str, tuple] = {}
        self._sources: dict[str, object] = {
            n: n for n in data.list_rate_series() + data.list_traces()
        }
        self._loaded: dict[str, xr.Dataset] = {}
        name = self._register(trace)
        first = self._load(name)
        intervals = self._intervals(first)
        if interval is None:
            interval = "1min" if "request" in first.dims and "1min" in intervals else intervals[0]
        if interval not in intervals:
            raise InputError(
                f"interval={interval!r} does not suit this trace; choose from {intervals}"
            )
        slider = slider_style
        controls = {
            "trace": dropdown("trace", list(self._sources), name),
            "interval": dropdown("interval", intervals, interval),
            "slots": dropdown("slots", self._slot_kinds(first), slots),
            "quantile": dropdown("plan on", [("P95", 0.95), ("P99", 0.99)], quantile),
            "bursts_per_month": widgets.FloatSlider(
                bursts_per_month,
                min=0.0,
                max=10.0,
                step=0.5,
                description="bursts a month",
                **slider,
            ),
            "burst_hours": widgets.FloatRangeSlider(
                value=burst_hours,
                min=0.25,
                max=12.0,
                step=0.25,
                description="burst length (h)",
                **slider,
            ),
            "burst_multiplier": widgets.FloatRangeSlider(
                value=burst_multiplier,
                min=1.0,
                max=10.0,
                step=0.5,
                description="burst height (x baseline)",
                **slider,
            ),
            "exceed_probability": dropdown(
                "monthly exceedance",
                [("1%", 0.01), ("2%", 0.02), ("5%", 0.05), ("10%", 0.1), ("20%", 0.2)],
                exceed_probability,
            ),
        }
        controls["trace"].observe(self._on_trace, names="value")
        super().__init__(controls)

    # -- sources ------------------------------------------------------------------------------
    def _register(self, trace) -> str:
        if isinstance(trace, xr.Dataset):
            name = str(trace.attrs.get("title") or "your trace")
            self._sources[name] = trace
            return name
        name = str(trace)
        if name not in self._sources:
            self._sources[name] = name
        return name

    def _load(self, name: str) -> xr.Dataset:
        if name not in self._loaded:
            source = self._sources[name]
            if isinstance(source, xr.Dataset):
                self._loaded[name] = source
            elif source in data.list_rate_series():
                self._loaded[name] = data.load_rate_series(source)
            else:
                self._loaded[name] = data.load_trace(source)
        return self._loaded[name]

    @staticmethod
    def _intervals(source: xr.Dataset) -> list[str]:
        if "request" not in source.dims:
            own = float(source.attrs["interval_s"])
            return [i for i in _SERIES_INTERVALS if forecast.interval_seconds(i) % own == 0]
        ns = source["time"].values.astype("datetime64[ns]").view("int64")
        span_s = (ns[-1] - ns[0]) / 1e9
        return [i for i in _LOG_INTERVALS if forecast.interval_seconds(i) * 4 <= span_s] or ["1s"]

    @staticmethod
    def _slot_kinds(source: xr.Dataset) -> list[str]:
        known = source.attrs.get("weekday_known") != "no"
        return ["hour_of_day", "hour_of_week"] if known else ["hour_of_day"]

    def _on_trace(self, change) -> None:
        source = self._load(change["new"])
        self._holding, holding = True, self._holding
        try:
            for name, options in (
                ("interval", self._intervals(source)),
                ("slots", self._slot_kinds(source)),
            ):
                control = self.controls[name]
                keep = control.value if control.value in options else options[0]
                control.options, control.value = options, keep
        finally:
            self._holding = holding

    # -- the step -----------------------------------------------------------------------------
    def burst_model(self) -> forecast.BurstModel:
        """The burst model the controls describe."""
        values = self.inputs
        hours, height = values["burst_hours"], values["burst_multiplier"]
        model = forecast.BurstModel(
            rate_per_month=values["bursts_per_month"],
            duration_s=(hours[0] * 3600, hours[1] * 3600),
            multiplier=tuple(height),
            source="the article's default",
        )
        if model != _ARTICLE:
            model = forecast.BurstModel(
                model.rate_per_month, model.duration_s, model.multiplier, source="set by hand"
            )
        return model

    def _step(self, stage: str, key: tuple, make: Callable[[], object]):
        # Each stage is kept with the inputs it was made from, so that a control change re-runs
        # only the stages downstream of it (the quantile and bursts re-run the Monte Carlo, the
        # exceedance probability only re-chooses from its months). What comes out is what
        # forecast.target gives for the same inputs.
        kept = self._stages.get(stage)
        if kept is not None and _same(kept[0], key):
            return kept[1]
        value = make()
        self._stages[stage] = (key, value)
        return value

    def compute(self) -> None:
        """Resample, fit the slot baselines, detect bursts and run the Monte Carlo."""
        values = self.inputs
        source = self._load(values["trace"])
        resampled = "request" in source.dims or forecast.interval_seconds(
            values["interval"]
        ) != float(source.attrs["interval_s"])
        self.series = self._step(
            "series",
            (source, values["interval"]),
            lambda: forecast.resample(source, values["interval"]) if resampled else source,
        )
        self.baseline = baseline = self._step(
            "baseline",
            (self.series, values["slots"]),
            lambda: forecast.fit_baseline(self.series, slots=values["slots"]),
        )
        self.detected = self._step(
            "detected", (baseline,), lambda: forecast.detect_bursts(self.series, baseline)
        )
        self.fitted = self._step(
            "fitted", (self.detected,), lambda: forecast.fit_burst_model(self.detected)
        )
        self.skipped = self._why_no_simulation(baseline)
        if self.skipped:
            self.result = baseline.assign_attrs(plan_quantile=values["quantile"])
            return
        model = self.burst_model()
        months = self._step(
            "months",
            (baseline, self.detected, model, values["quantile"]),
            lambda: forecast.simulate(
                self.series, baseline, model, trials=self.trials, seed=self.seed,
                exceed_probability=values["exceed_probability"],
                plan_quantile=values["quantile"], exclude=self.detected,
            ),
        )  # fmt: skip
        run = self._step(
            "chosen",
            (months, values["exceed_probability"]),
            lambda: _choose(months, values["exceed_probability"]),
        )
        self.result = self._step(
            "result", (baseline, run), lambda: _target_from(baseline, run, self.detected)
        )

    def _why_no_simulation(self, baseline: xr.Dataset) -> str:
        if float(self.series.attrs["interval_s"]) % 60:
            return "the Monte Carlo runs per minute; choose an interval of 1 min or more"
        if int((baseline.intervals == 0).sum()):
            return (
                f"{int((baseline.intervals == 0).sum())} slots have no data, so a month cannot be "
                "simulated; use a trace that covers every slot"
            )
        return ""

    @property
    def answer(self) -> str:
        """The answer in plain sentences, with the bursts found in this history."""
        text = forecast.describe(self.result)
        found = int(self.detected.sizes["burst"])
        text += (
            f" In this history, {found} burst{'s' if found != 1 else ''} of at least 2x the slot "
            f"median for 30 min or more {'were' if found != 1 else 'was'} found"
            + (f"; fitted to them: {self.fitted.describe()}." if found else ".")
        )
        if self.skipped:
            text += f" No Monte Carlo: {self.skipped}."
        return text

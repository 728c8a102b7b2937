"""Forecast charts: the series in its slot bands, the weekly heatmap, mean vs percentile plans, bursts.

The burst exceedance curve marks the chosen buffer.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import xarray as xr

from .. import words
from ..errors import InputError
from ..memo import Kept
from ._clock import is_undated, slot_axis, slot_title, slot_words, time_columns, time_x
from ._draft import draft

__all__ = ["forecast_exceedance", "forecast_heatmap", "forecast_plans", "forecast_series"]

# Every encoding is a channel object (alt.Y(...), alt.YValue(...)), never a bare string or dict:
# altair turns those into channels through its schema's from_dict, which hashes the whole vega-lite
# schema each time (about 5 ms a channel, most of a redraw). Layers are combined in one alt.layer
# call that takes the title and size, and a param goes on the leaf that uses it: every +,
# .properties or .add_params on a layer deep-copies all its layers again.

_MAX_POINTS = 5000
_PLAN_COLOR = "#4c78a8"
_MEAN_COLOR = "#f58518"
_SHORT_COLOR = "#e45756"
#: The exceedance curve's value, as its axis and tooltip say it.
_EXCEEDS = "P(monthly peak > capacity)"


def _one_series(series: xr.Dataset) -> xr.Dataset:
    if "qps" not in series or series["qps"].dims != ("time",):
        raise InputError("chart: give one series (qps over time only; .sel() the other dims)")
    return series


def _slot_codes(times: np.ndarray, baseline: xr.Dataset) -> np.ndarray:
    """The baseline's slot of each time, by the forecast step's own rule."""
    from ..forecast import slot_codes

    return np.asarray(slot_codes(times.astype("datetime64[ns]"), _slot_spec(baseline)))


def forecast_series(
    series: xr.Dataset, baseline: xr.Dataset | None = None, *, quantile: float | None = None
) -> alt.Chart:
    """QPS over time, with each interval's slot band (P50 to the plan quantile) and the mean plan.

    Missing intervals are marked by red ticks under the axis, never drawn as zero. Series longer
    than 5,000 intervals are averaged down for display (the title says by how much).
    """
    series = _one_series(series)
    # the series as drawn is the same for every baseline and quantile: worked out once per series
    frame, missing, factor, undated = _SERIES.get(series, "drawn", lambda: _series_table(series))
    step = float(series.attrs.get("interval_s", 0))
    shown = f"in intervals of {words.duration(step)}" if step else ""
    if factor > 1:
        shown = f"mean of every {factor} intervals of {words.duration(step)}"
    # the band in a table of its own: a new quantile gives the chart new band values only
    tables = {"frame": frame}
    if baseline is not None:
        q = float(baseline.traffic_quantile[-1]) if quantile is None else float(quantile)
        codes = _slot_codes(series["time"].values, baseline)
        band = pd.DataFrame(
            {
                "low": baseline.target_qps.sel(traffic_quantile=0.5, method="nearest").values[
                    codes
                ],
                "high": baseline.target_qps.sel(traffic_quantile=q).values[codes],
                "mean_plan": baseline.mean_plan_qps.values[codes],
            }
        )
        if factor > 1:
            band = band.groupby(np.arange(len(band)) // factor).mean()
        band.insert(0, "t_ms", frame["t_ms"].to_numpy())
        tables["band"] = band
        title = f"Requests/s {shown}; band: slot P50 to {words.quantile(q)}; dashed: the mean plan"
    else:
        title = f"Requests/s {shown}"
    if len(missing):
        tables["missing"] = missing
        title += f"; red ticks: {len(missing)} missing"
    return draft(
        _series_chart,
        tables=tables,
        values={"title": title},
        shape={"undated": undated},
    )


_SERIES = Kept()  # a series as drawn, per series


def _series_table(series: xr.Dataset) -> tuple[pd.DataFrame, pd.DataFrame, int, bool]:
    """The series as drawn (``t_ms``, ``when``, ``qps``) and its missing intervals.

    With the factor it is averaged down by, and whether its clock is undated (from its attrs).
    """
    frame = pd.DataFrame({"time": series["time"].values, "qps": series["qps"].values})
    factor = int(np.ceil(len(frame) / _MAX_POINTS))
    if factor > 1:
        frame = frame.groupby(np.arange(len(frame)) // factor).agg({"time": "first", "qps": "mean"})
    # the trace's own clock; a placeholder date (a trace with no date) is counted in days instead
    undated = is_undated(series.attrs, frame["time"].to_numpy())
    time_columns(frame, "time", undated=undated)
    frame = frame.drop(columns="time")
    return frame, frame[frame["qps"].isna()], factor, undated


def _series_chart(
    frame: pd.DataFrame,
    band: pd.DataFrame | None = None,
    missing: pd.DataFrame | None = None,
    *,
    title: str,
    undated: bool,
) -> alt.LayerChart:
    """The series chart from its tables (see :mod:`capnb.charts._draft`)."""
    x, when = time_x(undated=undated, title=None)
    base = alt.Chart(frame).encode(x=x)
    layers = []
    if band is not None:
        banded = alt.Chart(band).encode(x=x)
        layers.append(
            banded.mark_area(opacity=0.25, color=_PLAN_COLOR, interpolate="step-after").encode(
                y=alt.Y("low:Q"), y2=alt.Y2("high:Q")
            )
        )
        layers.append(
            banded.mark_line(color=_MEAN_COLOR, strokeDash=[6, 3], interpolate="step-after").encode(
                y=alt.Y("mean_plan:Q")
            )
        )
    layers.append(
        base.mark_line(color="#333", strokeWidth=1).encode(
            y=alt.Y("qps:Q", title="requests/s"),
            tooltip=[when, alt.Tooltip("qps:Q", title="rate (requests/s)", format=",.3~r")],
        )
    )
    if missing is not None:
        layers.append(
            alt.Chart(missing)
            .mark_tick(color=_SHORT_COLOR, thickness=2, size=10)
            .encode(x=x, y=alt.YValue(300), tooltip=[alt.Tooltip("when:N", title="missing")])
        )
    return alt.layer(*layers, title=title, width=640, height=300)


def forecast_heatmap(series: xr.Dataset) -> alt.Chart:
    """Mean QPS by hour of day x weekday (or x day of the trace, when the weekday is not known)."""
    series = _one_series(series)
    times = pd.DatetimeIndex(series["time"].values)
    frame = pd.DataFrame({"qps": series["qps"].values, "hour": times.hour})
    if series.attrs.get("weekday_known") == "no":
        frame["row"] = [f"day {d + 1}" for d in (times.normalize() - times[0].normalize()).days]
        order = sorted(frame["row"].unique(), key=lambda r: int(r.split()[1]))
        title = "Mean requests/s by hour (weekday not known: one row per day of the trace)"
        rows = "day of the trace"
    else:
        frame["row"] = times.day_name().str[:3]
        order = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        title = "Mean requests/s by hour of day and weekday"
        rows = "weekday"
    table = frame.groupby(["row", "hour"], as_index=False)["qps"].mean()
    zone = str(series.attrs.get("timezone", "unknown")).split(" (")[0]  # as forecast.slot_clock
    hours = slot_title("hour of day", zone if zone != "unknown" else "trace's clock")
    return draft(
        _heatmap_chart,
        tables={"table": table},
        values={"title": title, "hours": hours, "rows": rows},
        shape={"order": order},
    )


def _heatmap_chart(
    table: pd.DataFrame, *, title: str, hours: str, rows: str, order: list[str]
) -> alt.Chart:
    """The heatmap from its table (see :mod:`capnb.charts._draft`)."""
    return (
        alt.Chart(table)
        .transform_calculate(when=slot_words("hour_of_day", 24, "hour"))  # '10:00-11:00'
        .mark_rect()
        .encode(
            x=alt.X("hour:O", title=hours, axis=alt.Axis(**slot_axis("hour_of_day", 24))),
            y=alt.Y("row:N", sort=order, title=None),
            color=alt.Color("qps:Q", title="requests/s", scale=alt.Scale(scheme="viridis")),
            tooltip=[
                alt.Tooltip("row:N", title=rows),
                alt.Tooltip("when:N", title="hour of day"),
                alt.Tooltip("qps:Q", title="rate (requests/s)", format=",.3~r"),
            ],
        )
        .properties(title=title, width=560, height=max(120, 16 * len(order)))
    )


def forecast_plans(baseline: xr.Dataset, *, quantile: float | None = None) -> alt.Chart:
    """Per slot: the percentile plan against the mean plan, with the mean plan's shortfall shaded."""
    if "target_qps" not in baseline or "slot" not in baseline.dims:
        raise InputError("chart: give the output of capnb.forecast.fit_baseline or target")
    q = float(baseline.traffic_quantile[-1]) if quantile is None else float(quantile)
    name = words.quantile(q)
    frame = pd.DataFrame(
        {
            "slot": baseline.slot.values,
            "plan": baseline.target_qps.sel(traffic_quantile=q).values,
            "P50": baseline.target_qps.sel(traffic_quantile=0.5, method="nearest").values,
            "mean_plan": baseline.mean_plan_qps.values,
            "shortfall": baseline.shortfall_fraction.sel(traffic_quantile=q).values,
            "quantile": name,  # in the table, not a title: another quantile keeps the chart's shape
        }
    )
    frame["top"] = np.maximum(frame["plan"], frame["mean_plan"])
    # a step line needs the end of the last slot to draw it
    frame = pd.concat([frame, frame.tail(1).assign(slot=len(frame))], ignore_index=True)
    worst = float(frame["shortfall"].max())
    title = (
        f"{name} plan (blue) vs the mean plan (orange, dashed); red: the mean plan's shortfall "
        f"(up to {worst:.0%} of the {name})"
    )
    return draft(
        _plans_chart,
        tables={"frame": frame},
        values={"title": title, "slot_title": _slot_title(baseline)},
        shape={
            "axis": slot_axis(baseline.attrs["slots"], baseline.sizes["slot"], ends=True),
            "words": slot_words(baseline.attrs["slots"], baseline.sizes["slot"]),
        },
    )


def _slot_spec(baseline: xr.Dataset):
    from ..forecast import Slots

    ns = 1_000_000_000
    return Slots(
        baseline.attrs["slots"],
        round(baseline.attrs["slot_s"] * ns),
        round(baseline.attrs["period_s"] * ns),
    )


def _slot_title(baseline: xr.Dataset) -> str:
    """The slot axis's title: 'hour of week (UTC+01:00)'; custom slots by their length and period."""
    from ..forecast import slot_clock

    return slot_title(_slot_spec(baseline).label(), slot_clock(baseline))


def _plans_chart(
    frame: pd.DataFrame, *, title: str, slot_title: str, axis: dict, words: str
) -> alt.LayerChart:
    """The plans chart from its table (see :mod:`capnb.charts._draft`)."""
    base = alt.Chart(frame).encode(x=alt.X("slot:Q", title=slot_title, axis=alt.Axis(**axis)))
    short = base.mark_area(color=_SHORT_COLOR, opacity=0.3, interpolate="step-after").encode(
        y=alt.Y("mean_plan:Q"), y2=alt.Y2("top:Q")
    )
    plan = base.transform_calculate(when=words)  # each slot in words: 'Sat 10:00-11:00'
    plan = plan.mark_line(color=_PLAN_COLOR, interpolate="step-after", strokeWidth=2).encode(
        y=alt.Y("plan:Q", title="requests/s"),
        tooltip=[
            alt.Tooltip("when:N", title=slot_title),
            alt.Tooltip("quantile:N", title="plan on"),
            alt.Tooltip("plan:Q", title="plan (requests/s)", format=",.3~r"),
            alt.Tooltip("mean_plan:Q", title="mean plan (requests/s)", format=",.3~r"),
            alt.Tooltip("shortfall:Q", title="mean plan short by", format=".0%"),
        ],
    )
    median = base.mark_line(
        color=_PLAN_COLOR, opacity=0.5, strokeDash=[2, 2], interpolate="step-after"
    ).encode(y=alt.Y("P50:Q"))
    mean = base.mark_line(color=_MEAN_COLOR, strokeDash=[6, 3], interpolate="step-after").encode(
        y=alt.Y("mean_plan:Q")
    )
    return alt.layer(short, median, plan, mean, title=title, width=640, height=280)


def forecast_exceedance(simulation: xr.Dataset) -> alt.VConcatChart:
    """The burst exceedance curve: P(monthly peak > C) and minutes per month above C, over C.

    Marks the fixed plan (grey) and the capacity for the chosen exceedance probability (red), the
    gap between them being the elastic buffer. A slider (a vega-lite param, live in a static report)
    moves the red rule to other probabilities.
    """
    if "exceed_probability" not in simulation or "capacity_qps" not in simulation.dims:
        raise InputError("chart: give the output of capnb.forecast.simulate or target")
    frame = pd.DataFrame(
        {
            "capacity": simulation.capacity_qps.values,
            "probability": simulation.exceed_probability.values,
            "minutes": simulation.minutes_above.values,
        }
    )
    fixed = float(simulation.attrs["fixed_plan_qps"])
    chosen = float(simulation.attrs["chosen_exceed_probability"])
    required = float(simulation.required_qps)
    last = frame[frame["probability"] > 0]["capacity"].max()
    low = 0.8 * min(fixed, frame[frame["probability"] < 1]["capacity"].min())
    frame = frame[
        (frame["capacity"] <= max(last, required, fixed) * 1.1) & (frame["capacity"] >= low)
    ]
    marks = pd.DataFrame(
        {
            "capacity": [fixed, required],
            "label": [
                f"fixed plan {words.rate(fixed)} requests/s",
                f"{chosen:.0%}: {words.rate(required)} requests/s "
                f"(buffer {words.rate(required - fixed)} requests/s)",
            ],
            "color": ["#888", _SHORT_COLOR],
            "row": [40, 12],  # pixels from the top: the two labels never overlap
        }
    )
    title = (
        f"Monthly exceedance over {simulation.attrs['trials']:,} simulated months: the shaded "
        "gap is the elastic buffer"
    )
    return draft(
        _exceedance_chart,
        tables={
            "frame": frame,
            "marks": marks,
            "gap": pd.DataFrame({"a": [fixed], "b": [max(required, fixed)]}),
        },
        values={
            "title": title,
            "chosen": chosen,
            "domain": [float(frame["capacity"].min()), float(frame["capacity"].max())],
        },
    )


def _exceedance_chart(
    frame: pd.DataFrame,
    marks: pd.DataFrame,
    gap: pd.DataFrame,
    *,
    title: str,
    chosen: float,
    domain: list[float],
) -> alt.VConcatChart:
    """The exceedance charts from their tables (see :mod:`capnb.charts._draft`)."""
    pick = alt.param(
        name="exceed_p",
        value=chosen,
        bind=alt.binding_range(
            min=0.01, max=0.5, step=0.01, name="monthly exceedance probability "
        ),
    )
    x = alt.X("capacity:Q", title="capacity (requests/s)", scale=alt.Scale(domain=domain))
    base = alt.Chart(frame).encode(x=x)
    curve = base.mark_line(color="#333", interpolate="step-after").encode(
        y=alt.Y("probability:Q", title=_EXCEEDS, axis=alt.Axis(format="%")),
        tooltip=[
            alt.Tooltip("capacity:Q", title="capacity (requests/s)", format=",.3~r"),
            alt.Tooltip("probability:Q", title=_EXCEEDS, format=".1%"),
            alt.Tooltip("minutes:Q", title="minutes above / month", format=",.1f"),
        ],
    )
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeWidth=2)
        .encode(x=alt.X("capacity:Q"), color=alt.Color("color:N", scale=None))
    )
    labels = (
        alt.Chart(marks)
        .mark_text(align="left", dx=4)
        .encode(
            x=alt.X("capacity:Q"),
            y=alt.Y("row:Q", scale=None),
            text=alt.Text("label:N"),
            color=alt.Color("color:N", scale=None),
        )
    )
    buffer = (
        alt.Chart(gap)
        .mark_rect(color=_SHORT_COLOR, opacity=0.12)
        .encode(x=alt.X("a:Q", scale=alt.Scale(domain=domain)), x2=alt.X2("b:Q"))
    )
    moving = (
        base.transform_filter(alt.datum.probability <= pick)
        .transform_aggregate(capacity="min(capacity)")
        .mark_rule(color=_SHORT_COLOR, strokeDash=[4, 3])
        .encode(
            x=alt.X("capacity:Q"),
            tooltip=[
                alt.Tooltip(
                    "capacity:Q", title="capacity for the slider's p (requests/s)", format=",.3~r"
                )
            ],
        )
    )
    top = alt.layer(
        buffer, curve, rules, labels, moving.add_params(pick), title=title, width=640, height=240
    )
    minutes = base.mark_line(color=_PLAN_COLOR, interpolate="step-after").encode(
        y=alt.Y("minutes:Q", title="minutes above / month", scale=alt.Scale(type="symlog"))
    )
    bottom = alt.layer(minutes, rules, width=640, height=160)
    return alt.vconcat(top, bottom)

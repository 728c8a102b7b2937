"""Capacity charts: latency vs concurrency under an SLA, throughput by Little's law, cost vs SLA."""

from __future__ import annotations

import textwrap

import altair as alt
import numpy as np
import pandas as pd
import xarray as xr

from .. import glossary
from ..errors import InputError
from ..memo import Kept
from ._draft import draft
from ._titles import titled

__all__ = ["cost_vs_sla", "latency_curve", "plan_contrast", "throughput_curve"]

# Encodings name their field and type explicitly (see _memory: shorthand parsing is slow). Layers
# are combined in one alt.layer(...) call that also takes the title and size, and a param is added
# to the leaf that uses it: each composition (+, .properties, .add_params on a layer) deep-copies
# every layer's schema objects, which cost more than all the rest of a redraw.
_QUANTILE_COLORS = {"P50": "#4c78a8", "P90": "#72b7b2", "P95": "#54a24b", "P99": "#e45756"}
_SLA_COLOR = "#b279a2"
# each value's title, on its axis and in the tooltips, with its unit
_CONCURRENCY = f"concurrency ({glossary.DIMS['concurrency'].long_name})"
_PER_INSTANCE = "requests/s per instance"
_LATENCY_TITLE = titled("latency", "latency")
_SAFE = "safe concurrency"
_TP = titled("tensor-parallel degree", "tensor_parallel")
_USD_PER_HOUR = "USD per hour for the target"
_COMPUTE = "GPU FLOP/s used at the target"


_THROUGHPUT = Kept()  # the curve's Little's law table, per curve
_LATENCY = Kept()  # the curve's latency table, per curve, metric and quantile
_SLIDER = Kept()  # the SLA slider's table and grid, per safe-concurrency table
_COST = Kept()  # the cost table, per sweep and selection


def _single(curve: xr.Dataset, what: str) -> xr.Dataset:
    lead = [d for d in curve.latency.dims if d not in ("concurrency", "metric", "latency_quantile")]
    extra = [d for d in lead if curve.sizes[d] != 1]
    if extra:
        raise InputError(f"{what}: choose one {extra[0]} (the curve has {curve.sizes[extra[0]]})")
    return curve.squeeze(lead, drop=True) if lead else curve


def _label(q: float) -> str:
    return f"P{q * 100:g}"


def latency_curve(
    curve: xr.Dataset,
    *,
    metric: str = "e2e",
    quantile: float = 0.99,
    sla_table: xr.Dataset | None = None,
    sla: float | None = None,
    model_curve: xr.Dataset | None = None,
) -> alt.LayerChart:
    """Latency quantiles vs concurrency, the SLA line and the safe concurrency it allows.

    Parameters
    ----------
    curve
        A latency curve (one cell). Measured points are drawn as dots joined by lines; the P50 and
        the chosen quantile of ``metric`` are shown.
    metric, quantile
        The latency the SLA bounds.
    sla_table
        :func:`capnb.capacity.safe_concurrency` of this curve over a grid of SLAs: the chart gets a
        slider (a vega-lite param, live in a static HTML report too) that moves the SLA line and the
        safe-concurrency marker along that grid.
    sla
        The SLA the slider starts at (s; default: the grid's middle).
    model_curve
        An analytic curve of the same configuration, drawn dashed ("measured vs model").
    """
    cell = _single(curve, "latency_curve")
    if model_curve is None:
        # the same curve, another SLA: the table is the one worked out last time (the attrs it
        # reads are in the key)
        key = (metric, float(quantile), cell.attrs.get("kind"))
        table, shown, compared = _LATENCY.get(
            curve, key, lambda: _latency_table(cell, None, metric, quantile)
        )
    else:
        table, shown, compared = _latency_table(cell, model_curve, metric, quantile)
    name = cell.attrs.get("name") or cell.attrs.get("source", "")
    tables = {"table": table}
    values = {
        "title": f"{_label(quantile)} {metric} latency vs concurrency ({name})",
        "y_title": _LATENCY_TITLE,  # the metric is in the title: another keeps the chart's shape
    }
    shape = {"shown": list(shown), "compared": compared, "slider": None}
    if sla_table is not None:
        tables["slas"], values["sla"], shape["slider"] = _sla_slider(sla_table, sla)
    return draft(_latency_chart, tables=tables, values=values, shape=shape)


def _latency_table(
    cell: xr.Dataset, model_curve: xr.Dataset | None, metric: str, quantile: float
) -> tuple[pd.DataFrame, tuple[str, ...], bool]:
    """The latency chart's table, the quantiles it shows, and whether it holds a model curve."""
    quantiles = sorted({0.5, float(quantile)})
    frames = []
    for source, data in (("measured", cell), ("model", model_curve)):
        if data is None:
            continue
        data = _single(data, "latency_curve") if source == "model" else data
        kind = str(data.attrs.get("kind", source))
        for q in quantiles:
            if q not in data.latency_quantile.values:
                continue
            values = data.latency.sel(metric=metric, latency_quantile=q).values
            if np.isnan(values).all():
                continue
            frames.append(
                pd.DataFrame(
                    {
                        "concurrency": data.concurrency.values,
                        "latency_s": values,
                        "quantile": _label(q),
                        "source": "model" if source == "model" else kind,
                        "compared": source == "model",  # drawn dashed, beside the curve
                    }
                )
            )
    if not frames:
        raise InputError(f"latency_curve: the curve has no {metric} P50 or {_label(quantile)}")
    table = pd.concat(frames, ignore_index=True).dropna()
    shown = tuple(label for label in _QUANTILE_COLORS if label in set(table["quantile"]))
    return table, shown, bool(table["compared"].any())


def _latency_chart(
    table: pd.DataFrame,
    *,
    title: str,
    y_title: str,
    shown: list[str],
    compared: bool,
    slider: dict | None,
    slas: pd.DataFrame | None = None,
    sla: float | None = None,
) -> alt.LayerChart:
    """The latency curve's chart from its tables (see :mod:`capnb.charts._draft`)."""
    x = alt.X(
        field="concurrency",
        type="quantitative",
        scale=alt.Scale(type="log"),
        title=_CONCURRENCY,
    )
    y = alt.Y(
        field="latency_s",
        type="quantitative",
        scale=alt.Scale(type="log"),
        title=y_title,
    )
    color = alt.Color(
        field="quantile",
        type="nominal",
        scale=alt.Scale(domain=shown, range=[_QUANTILE_COLORS[label] for label in shown]),
        legend=alt.Legend(title=None, orient="top"),
    )
    tooltip = [
        alt.Tooltip(field="concurrency", type="quantitative", title=_CONCURRENCY),
        alt.Tooltip(field="quantile", type="nominal", title="latency quantile"),
        alt.Tooltip(field="source", type="nominal", title="curve"),
        alt.Tooltip(field="latency_s", type="quantitative", format=",.3f", title=y_title),
    ]
    base = alt.Chart(table).encode(x=x, y=y, color=color, tooltip=tooltip)
    measured = base.transform_filter("!datum.compared")
    layers = [measured.mark_line(strokeWidth=2), measured.mark_point(filled=True, size=45)]
    if compared:
        # only with a model curve: a layer over no rows gives vega an infinite extent on the
        # log axes, and it logs a warning in the reader's console
        layers.append(
            base.transform_filter("datum.compared").mark_line(strokeDash=[5, 3], opacity=0.8)
        )
    if slider is not None:
        layers += _sla_slider_layers(slas, sla, **slider)
    return alt.layer(*layers, title=title, width=560, height=320)


def _sla_frame(sla_table: xr.Dataset) -> pd.DataFrame:
    table = sla_table.squeeze(drop=True) if sla_table.safe_concurrency.ndim > 1 else sla_table
    if "sla" not in table.dims:
        raise InputError("sla_table: expected a safe_concurrency result over several SLAs")
    # what the slider's layers draw (its tooltip, rules and label), nothing more: the browser
    # parses every row again on each redraw
    return pd.DataFrame(
        {
            "sla": table.sla.values,
            "safe": table.safe_concurrency.values,
            "binding": table.binding.values.astype(str),
            "qps": table.per_instance_qps.values,
        }
    )


def _sla_slider(sla_table, sla) -> tuple[pd.DataFrame, float, dict]:
    """The SLA slider's table, its starting SLA and its grid (``low``, ``high``, ``step``)."""
    # the same table, another SLA: only the starting value is new
    frame, grid, slider = _SLIDER.get(sla_table, None, lambda: _slider_table(sla_table))
    start = float(grid[len(grid) // 2] if sla is None else grid[np.argmin(np.abs(grid - sla))])
    return frame, start, dict(slider)


def _slider_table(sla_table) -> tuple[pd.DataFrame, np.ndarray, dict]:
    """The SLA slider's table, its SLA grid and its range (``low``, ``high``, ``step``)."""
    frame = _sla_frame(sla_table)
    grid = frame.sla.to_numpy()
    steps = np.diff(grid)
    if grid.size < 2 or not np.allclose(steps, steps[0], rtol=1e-6):
        raise InputError("sla_table: the SLA grid must be evenly spaced for the slider")
    from ..capacity import FEASIBLE

    frame["label"] = [
        f"safe {s:,} ({b})" if b in FEASIBLE else f"infeasible ({b})"
        for s, b in zip(frame.safe, frame.binding, strict=True)
    ]
    return frame, grid, {"low": float(grid[0]), "high": float(grid[-1]), "step": float(steps[0])}


def _sla_slider_layers(frame: pd.DataFrame, start: float, *, low, high, step) -> list:
    param = alt.param(
        name="sla",
        value=start,
        bind=alt.binding_range(min=low, max=high, step=step, name="SLA (s) "),
    )
    chosen = (
        alt.Chart(frame)
        .transform_filter(f"abs(datum.sla - sla) < {step / 2}")
        .encode(
            tooltip=[
                alt.Tooltip(field="sla", type="quantitative", format=",.2f", title="SLA (s)"),
                alt.Tooltip(field="safe", type="quantitative", title=_SAFE),
                alt.Tooltip(
                    field="binding", type="nominal", title="what sets the safe concurrency"
                ),
                alt.Tooltip(field="qps", type="quantitative", format=",.3f", title=_PER_INSTANCE),
            ]
        )
    )
    sla_line = (
        chosen.mark_rule(color=_SLA_COLOR, strokeDash=[6, 3], size=2)
        .encode(y=alt.Y(field="sla", type="quantitative"))
        .add_params(param)
    )
    feasible = chosen.transform_filter("datum.safe > 0")
    safe_line = feasible.mark_rule(color="#333333", size=1.5).encode(
        x=alt.X(field="safe", type="quantitative")
    )
    safe_text = chosen.mark_text(align="left", dx=6, dy=-8, color="#333333", fontSize=12).encode(
        x=alt.X(field="safe", type="quantitative"),
        y=alt.Y(field="sla", type="quantitative"),
        text=alt.Text(field="label", type="nominal"),
    )
    return [sla_line, safe_line, safe_text]


def throughput_curve(curve: xr.Dataset, plan: xr.Dataset | None = None) -> alt.LayerChart:
    """Requests/s one instance serves at each concurrency: Little's law vs the article's naive line.

    Little's law: concurrency / mean e2e latency(concurrency). The naive figure assumes every request
    is as fast as one alone: concurrency x QPS at concurrency 1. With ``plan`` (a
    :func:`capnb.capacity.plan` or ``safe_concurrency`` result for one SLA) the safe concurrency and
    the chosen operating point are marked.
    """
    table = _THROUGHPUT.get(curve, None, lambda: _throughput_table(curve))
    tables = {"table": table}
    if plan is not None:
        point = plan.squeeze(drop=True)
        from ..capacity import FEASIBLE

        if str(point.binding.values) in FEASIBLE:
            tables["marks"] = pd.DataFrame(
                {
                    "concurrency": [float(point.operating_concurrency)],
                    "qps": [float(point.per_instance_qps)],
                    "label": [
                        f"operating point: {float(point.per_instance_qps):.3g} requests/s at "
                        f"{int(point.operating_concurrency):,}"
                    ],
                }
            )
            tables["safe"] = pd.DataFrame({"concurrency": [float(point.safe_concurrency)]})
    return draft(_throughput_chart, tables=tables)


def _throughput_table(curve: xr.Dataset) -> pd.DataFrame:
    """Requests/s one instance serves at each concurrency, by each rule (the chart's lines)."""
    from ..latency import envelope

    cell = envelope(_single(curve, "throughput_curve"))
    conc = cell.concurrency.values.astype(float)
    mean = cell.mean_latency.sel(metric="e2e").values
    if np.isnan(mean).any():
        raise InputError("throughput_curve: the curve has no mean e2e latency")
    frames = [pd.DataFrame({"concurrency": conc, "qps": conc / mean, "rule": "Little's law"})]
    if conc[0] == 1:
        frames.append(pd.DataFrame({"concurrency": conc, "qps": conc / mean[0], "rule": "naive"}))
    return pd.concat(frames, ignore_index=True)


def _throughput_chart(
    table: pd.DataFrame, marks: pd.DataFrame | None = None, safe: pd.DataFrame | None = None
) -> alt.LayerChart:
    """The throughput curve's chart from its tables (see :mod:`capnb.charts._draft`)."""
    x = alt.X(
        field="concurrency", type="quantitative", scale=alt.Scale(type="log"),
        title=_CONCURRENCY,
    )  # fmt: skip
    y = alt.Y(
        field="qps", type="quantitative", scale=alt.Scale(type="log"),
        title=_PER_INSTANCE,
    )  # fmt: skip
    color = alt.Color(
        field="rule",
        type="nominal",
        scale=alt.Scale(domain=["Little's law", "naive"], range=["#4c78a8", "#bab0ac"]),
        legend=alt.Legend(title=None, orient="top"),
    )
    lines = (
        alt.Chart(table)
        .mark_line(point=True)
        .encode(
            x=x,
            y=y,
            color=color,
            strokeDash=alt.StrokeDash(field="rule", type="nominal", legend=None),
            tooltip=[
                alt.Tooltip(field="concurrency", type="quantitative", title=_CONCURRENCY),
                alt.Tooltip(field="rule", type="nominal", title="rule"),
                alt.Tooltip(field="qps", type="quantitative", format=",.3f", title=_PER_INSTANCE),
            ],
        )
    )
    layers = [lines]
    if marks is not None:
        layers += [
            alt.Chart(safe)
            .mark_rule(color="#333333", strokeDash=[4, 3])
            .encode(x=alt.X(field="concurrency", type="quantitative")),
            alt.Chart(marks)
            .mark_point(shape="diamond", size=160, filled=True, color="#e45756")
            .encode(x=x, y=y),
            alt.Chart(marks)
            .mark_text(align="left", dx=10, dy=-10, fontSize=12)
            .encode(x=x, y=y, text=alt.Text(field="label", type="nominal")),
        ]
    title = "Per-instance throughput: Little's law vs safe concurrency x single-request QPS"
    return alt.layer(*layers, title=title, width=560, height=280)


def cost_vs_sla(
    sweep: xr.Dataset,
    *,
    model: str | None = None,
    seq_len: int | None = None,
    sla: float | None = None,
    **selection: object,
) -> alt.LayerChart:
    """USD/hour to serve the target vs the SLA, one line per GPU profile (its cheapest TP).

    Takes a :func:`capnb.capacity.sweep` result with a target; other dims (a target's slot, ...)
    must be selected in ``selection``. Infeasible SLAs leave a gap; the tooltip names the
    tensor-parallel degree and instance count; ``sla`` draws a vertical rule.
    """
    if "usd_per_hour" not in sweep:
        raise InputError("cost_vs_sla: the sweep has no cost (give it a target_qps)")
    picked = {"model": model, "seq_len": seq_len, **selection}
    chosen = {k: v for k, v in picked.items() if v is not None}
    # the same sweep, another SLA: the table is the one worked out last time
    table, gpus, target = _COST.get(
        sweep, tuple(sorted(chosen.items())), lambda: _cost_table(sweep, chosen)
    )
    metric = sweep.attrs.get("metric", "latency")
    quantile = sweep.attrs.get("quantile", 0.99)
    title = f"Cost vs {_label(quantile)} {metric} SLA, cheapest TP per GPU"
    if target is not None:
        title += f" ({target:,.3g} requests/s)"
    tables = {"table": table}
    if sla is not None:
        tables["rule"] = pd.DataFrame({"sla": [float(sla)]})
    return draft(_cost_chart, tables=tables, values={"title": title}, shape={"gpus": list(gpus)})


def _cost_table(sweep: xr.Dataset, chosen: dict) -> tuple[pd.DataFrame, tuple[str, ...], object]:
    """Each GPU's cheapest TP per SLA of one cell of a sweep: the table, its GPUs, the target."""
    cell = sweep.sel(chosen)
    for dim in [d for d in cell.usd_per_hour.dims if d not in ("gpu", "tensor_parallel", "sla")]:
        if cell.sizes[dim] != 1:
            raise InputError(f"cost_vs_sla: choose one {dim} (the sweep has {cell.sizes[dim]})")
        cell = cell.squeeze(dim, drop=True)
    from ..capacity import cheapest

    # each GPU's cheapest TP per SLA, by the capacity step's own rule (the options that meet the
    # SLA without a price are not drawn: without ``binding`` cheapest does not name them)
    ranked = cheapest(cell[["usd_per_hour"]], options="tensor_parallel")
    best = ranked.transpose("gpu", "sla")
    tp = best.cheapest_tensor_parallel
    feasible = (tp > 0).values
    at = cell[["instances", "safe_concurrency"]].sel(
        tensor_parallel=tp.where(tp > 0, cell.tensor_parallel[0])
    )
    gpus, slas = best.gpu.values.astype(str), best.sla.values.astype(float)
    table = pd.DataFrame(
        {
            "gpu": np.repeat(gpus, slas.size),
            "sla": np.tile(slas, gpus.size),
            "usd_per_hour": np.where(feasible, best.cheapest_usd_per_hour.values, np.nan).ravel(),
            "tensor_parallel": np.where(feasible, tp.values, np.nan).ravel(),
            "instances": np.where(
                feasible, at.instances.transpose("gpu", "sla").values, np.nan
            ).ravel(),
            "safe": np.where(
                feasible, at.safe_concurrency.transpose("gpu", "sla").values, np.nan
            ).ravel(),
        }
    )
    target = cell.target_qps.values.item() if "target_qps" in cell else None
    return table, tuple(str(g) for g in gpus), target


def _cost_chart(
    table: pd.DataFrame, rule: pd.DataFrame | None = None, *, title: str, gpus: list[str]
) -> alt.LayerChart:
    """The cost chart from its tables (see :mod:`capnb.charts._draft`)."""
    x = alt.X(field="sla", type="quantitative", scale=alt.Scale(type="log"), title="SLA (s)")
    lines = (
        alt.Chart(table)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y(
                field="usd_per_hour",
                type="quantitative",
                scale=alt.Scale(type="log"),
                title=_USD_PER_HOUR,
            ),
            # the default palette has 10 colours: past 10 GPUs two would share one
            color=alt.Color(
                field="gpu",
                type="nominal",
                title="GPU",
                sort=gpus,
                scale=alt.Scale(scheme="tableau20" if len(gpus) > 10 else "tableau10"),
            ),
            tooltip=[
                alt.Tooltip(field="gpu", type="nominal", title="GPU"),
                alt.Tooltip(field="sla", type="quantitative", format=",.2f", title="SLA (s)"),
                alt.Tooltip(field="tensor_parallel", type="quantitative", title=_TP),
                alt.Tooltip(field="instances", type="quantitative", title="instances"),
                alt.Tooltip(field="safe", type="quantitative", title=_SAFE),
                alt.Tooltip(
                    field="usd_per_hour", type="quantitative", format=",.2f", title=_USD_PER_HOUR
                ),
            ],
        )
    )
    layers = [lines]
    if rule is not None:
        layers.append(
            alt.Chart(rule)
            .mark_rule(color=_SLA_COLOR, strokeDash=[6, 3], size=2)
            .encode(x=alt.X(field="sla", type="quantitative"))
        )
    return alt.layer(*layers, title=title, width=560, height=300)


def plan_contrast(contrast: xr.Dataset) -> alt.HConcatChart:
    """The article's mistake: plan by maximum concurrency vs by latency, side by side.

    Left: the latency quantile at each plan's operating concurrency against the SLA. Right: the
    instances each plan holds and the share of the GPUs' FLOP/s the target uses with them.
    """
    sla = float(contrast.attrs["sla"])
    names = {"max_concurrency": "by max concurrency", "latency": "by latency (capnb)"}
    table = pd.DataFrame(
        {
            "plan": [names[str(p)] for p in contrast.plan.values],
            "latency_s": contrast.latency_at_operating.values,
            "concurrency": contrast.operating_concurrency.values,
            "instances": contrast.instances.values,
            "compute": contrast.compute_utilisation.values,
        }
    )
    # a log axis has no zero for bars to start from: draw each value as a stick from the axis floor
    table["floor"] = 0.5 * min(sla, float(np.nanmin(table.latency_s)))
    # the metric in the title, not on the axis: another metric keeps the chart's shape
    latency_title = (
        f"{contrast.attrs['metric']} P{contrast.attrs['quantile'] * 100:g} at the operating point"
        " vs the SLA"
    )
    # compute use needs the model, GPU, degree and token counts: where the curve lacks them, the
    # panel says which instead of drawing no bar on a 0 % axis
    note = contrast.attrs.get("compute_note")
    return draft(
        _contrast_chart,
        tables={"table": table, "slas": pd.DataFrame({"sla": [sla]})},
        values={"latency_title": latency_title},
        shape={"plans": list(names.values()), "compute_note": note},
    )


def _contrast_chart(
    table: pd.DataFrame,
    slas: pd.DataFrame,
    *,
    latency_title: str,
    plans: list[str],
    compute_note: str | None,
) -> alt.HConcatChart:
    """The contrast's charts from their tables (see :mod:`capnb.charts._draft`)."""
    colors = alt.Color(
        field="plan", type="nominal", legend=None,
        scale=alt.Scale(domain=plans, range=["#e45756", "#4c78a8"]),
    )  # fmt: skip
    y = alt.Y(field="plan", type="nominal", title=None, sort=plans)
    x_latency = alt.X(
        field="latency_s",
        type="quantitative",
        scale=alt.Scale(type="log"),
        title=_LATENCY_TITLE,
    )
    tooltip = [
        alt.Tooltip(field="plan", type="nominal", title="plan"),
        alt.Tooltip(field="concurrency", type="quantitative", title="operating concurrency"),
        alt.Tooltip(field="latency_s", type="quantitative", format=",.3f", title=_LATENCY_TITLE),
    ]
    sticks = alt.Chart(table).encode(y=y, color=colors, tooltip=tooltip)
    latency = alt.layer(
        sticks.mark_rule(size=6).encode(x=x_latency, x2=alt.X2(field="floor")),
        sticks.mark_point(filled=True, size=120, opacity=1).encode(x=x_latency),
        alt.Chart(slas)
        .mark_rule(color=_SLA_COLOR, strokeDash=[6, 3], size=2)
        .encode(x=alt.X(field="sla", type="quantitative")),
        title=latency_title,
        width=300,
        height=90,
    )
    if compute_note is not None:
        unknown = (
            alt.Chart(slas)
            .mark_text(align="left", baseline="top", x=0, y=0, fontSize=11,
                       text=textwrap.wrap(compute_note, 40))
            .properties(title="compute in use: not known", width=220, height=90)
        )  # fmt: skip
        return alt.hconcat(latency, unknown)
    usage = (
        alt.Chart(table)
        .mark_bar()
        .encode(
            x=alt.X(
                field="compute",
                type="quantitative",
                axis=alt.Axis(format="%"),
                title=_COMPUTE,
            ),
            y=y,
            color=colors,
            tooltip=[
                alt.Tooltip(field="plan", type="nominal", title="plan"),
                alt.Tooltip(field="instances", type="quantitative", title="instances"),
                alt.Tooltip(field="compute", type="quantitative", format=".1%", title=_COMPUTE),
            ],
        )
        .properties(title="compute in use (the idle GPU)", width=220, height=90)
    )
    return alt.hconcat(latency, usage)

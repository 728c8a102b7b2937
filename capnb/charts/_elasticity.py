"""Elasticity charts: a run's timeline, the policy sweep's cost vs breach front, cold-start stages."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import xarray as xr

from .. import glossary, words
from ..errors import InputError
from ..memo import Kept
from ._clock import is_undated, time_columns, time_x
from ._draft import draft
from ._titles import SETTING_TITLES, SETTINGS, titled

__all__ = ["cold_start_stages", "elasticity_pareto", "elasticity_policies", "elasticity_timeline"]

# Every encoding is a channel object (alt.Y(...), alt.OpacityValue(...)), never a bare string or
# dict: altair turns those into channels through its schema's from_dict, which hashes the whole
# vega-lite schema each time (about 5 ms a channel). Each chart function does its data work and
# hands its tables to draft() with the function that builds the altair chart from them (see
# capnb.charts._draft): a worksheet's redraw of the same shape fills in the spec written last time.

_POLICY_NAMES = words.POLICY_NAMES
_STAGES = {
    "provisioning_s": ("provisioning", "#9d755d"),
    "download_s": ("download", "#4c78a8"),
    "load_s": ("load to GPU", "#f58518"),
    "engine_init_s": ("engine start-up", "#54a24b"),
    "warm_up_s": ("warm-up", "#b279a2"),
}


#: The sweep's share of time in breach, as its axis and tooltips say it.
_BREACH_PCT = "time in SLA breach (%)"


def _buckets(n: int, max_points: int) -> np.ndarray:
    size = max(1, -(-n // max_points))
    return np.arange(n) // size


_TIMELINE_WIDTH = 620  # px


def elasticity_timeline(run: xr.Dataset, *, max_points: int = _TIMELINE_WIDTH) -> alt.VConcatChart:
    """Demand against ready capacity with breaches shaded; instances; backlog.

    Takes a :func:`capnb.elasticity.simulate` result. Long runs are shown in buckets of whole steps
    (at most ``max_points``, by default one per pixel of the chart's width): demand at its highest,
    capacity at its lowest and the backlog at its largest in each bucket, and a bucket is shaded
    when any of its steps is in breach, so the picture never hides a burst. The metrics are
    computed on every step, not on the buckets.
    """
    if "time" not in run.dims or "ready_instances" not in run:
        raise InputError("chart: elasticity_timeline takes a capnb.elasticity.simulate result")
    times = run.time.values
    if times.dtype.kind == "m":  # a bare array's steps: time 0 on the undated placeholder day
        times = np.datetime64(f"{words.PLACEHOLDER_YEAR}-01-01", "ns") + times
    bucket = _buckets(times.size, max_points)
    step_s = float(run.attrs["step_s"])
    # the trace's own clock (drawn on a UTC scale: not shifted into the reader's zone), or days
    # counted from its first day where its date is a placeholder (ServeGen's day 0)
    undated = is_undated(run.attrs, times)
    # buckets are runs of consecutive steps: reduce each with numpy's reduceat (a pandas groupby
    # over a million steps took most of a redraw)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    table = pd.DataFrame(
        {
            "time": times[starts],
            "demand": np.maximum.reduceat(run.qps.values, starts),
            "capacity": np.minimum.reduceat(run.ready_capacity_qps.values, starts),
            "ready": np.minimum.reduceat(run.ready_instances.values, starts),
            "starting": np.maximum.reduceat(run.starting_instances.values, starts),
            "backlog": np.maximum.reduceat(run.backlog.values, starts),
            "breach": np.logical_or.reduceat(run.breach.values, starts),
        }
    )
    time_columns(table, "time", undated=undated)
    table = table.drop(columns="time")
    last_ms = round((times.size - starts[-1]) * step_s * 1000.0)  # the last bucket's length
    table["end_ms"] = np.r_[table["t_ms"].values[1:], table["t_ms"].values[-1] + last_ms]
    share = float(run.breach_share)
    title = (
        f"{_POLICY_NAMES.get(run.attrs['policy'], run.attrs['policy'])}: demand vs ready "
        f"capacity, breach shaded ({share:.2%} of the time)"
    )
    return draft(
        _timeline_chart,
        tables={"table": table},
        values={"title": title},
        shape={"undated": undated},
    )


#: An axis of whole counts (instances).
_WHOLE = alt.Axis(tickMinStep=1, labelExpr="datum.value % 1 ? '' : datum.label")


def _timeline_chart(table: pd.DataFrame, *, title: str, undated: bool) -> alt.VConcatChart:
    """The timeline's charts from their table (see :mod:`capnb.charts._draft`)."""
    x, when = time_x(undated=undated, title=None if undated else "the trace's clock")
    base = alt.Chart().properties(width=_TIMELINE_WIDTH)  # the table goes once, at the top
    shading = (
        base.transform_filter("datum.breach")
        .mark_rect(color="#e45756", opacity=0.25)
        .encode(x=x, x2=alt.X2("end_ms"))
    )
    lines = (
        base.transform_fold(["demand", "capacity"], as_=["series", "requests/s"])
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("requests/s:Q", title="requests/s"),
            color=alt.Color(
                "series:N",
                scale=alt.Scale(domain=["demand", "capacity"], range=["#4c78a8", "#54a24b"]),
                legend=alt.Legend(
                    title=None,
                    orient="top",
                    labelExpr="datum.label == 'capacity' ? 'ready capacity' : "
                    "'demand (highest in bucket)'",
                ),
            ),
        )
    )
    # each bucket's numbers on hover: a transparent band over the bucket (opacity 0 still hovers)
    hover = base.mark_rect(opacity=0).encode(
        x=x,
        x2=alt.X2("end_ms"),
        tooltip=[
            when,
            alt.Tooltip("demand:Q", title="demand, highest (requests/s)", format=",.2f"),
            alt.Tooltip("capacity:Q", title="ready capacity, lowest (requests/s)", format=",.2f"),
            alt.Tooltip("ready:Q", title="ready instances, fewest"),
            alt.Tooltip("starting:Q", title="instances in cold start, most"),
            alt.Tooltip("backlog:Q", title="backlog, largest (requests)", format=",.0f"),
            alt.Tooltip("breach:N", title="in SLA breach"),
        ],
    )
    top = alt.layer(shading, lines, hover, title=title, height=200)
    instances = (
        base.transform_fold(["ready", "starting"], as_=["state", "instances"])
        .mark_area(interpolate="step-after", opacity=0.8)
        .encode(
            x=x,
            # instances are whole: no tick between them (the label hidden where a renderer
            # ignores tickMinStep, as vl-convert does); redraws keep it, it reads no data
            y=alt.Y("instances:Q", title="instances", stack="zero", axis=_WHOLE),
            color=alt.Color(
                "state:N",
                scale=alt.Scale(domain=["ready", "starting"], range=["#54a24b", "#f58518"]),
                legend=alt.Legend(
                    title=None,
                    orient="top",
                    labelExpr="datum.label == 'starting' ? 'in cold start' : 'ready'",
                ),
            ),
            order=alt.Order("state:N", sort="ascending"),
        )
        .properties(height=110)
    )
    backlog = (
        base.mark_area(interpolate="step-after", color="#e45756", opacity=0.6)
        .encode(x=x, y=alt.Y("backlog:Q", title="backlog (requests)"))
        .properties(height=80)
    )
    return alt.vconcat(top, instances, backlog, data=table).resolve_scale(color="independent")


def elasticity_pareto(
    sweep: xr.Dataset,
    *,
    chosen: dict | None = None,
    recommended: dict | None = None,
    cost: str | None = None,
    breach_budget: float | None = None,
) -> alt.LayerChart:
    """Every run of a sweep: cost against the share of time in SLA breach, the Pareto front drawn.

    Click a policy in the legend to highlight it (a vega-lite selection: it works in the HTML
    report). With ``breach_budget`` (a share), a dropdown under the chart (a vega-lite param, live
    in the HTML report too) moves the budget's dotted line over the sweep, and the runs above it
    fade. ``chosen`` and ``recommended`` are selections (dicts of coordinates) marked with a ring
    and a diamond.
    """
    cost = cost or ("usd" if "usd" in sweep else "gpu_hours")
    # the same sweep, another selection or budget: its runs and front are the ones worked out last
    kept_as = (cost, sweep.attrs.get("policy"))
    full, table, front, shown = _RUNS.get(sweep, kept_as, lambda: _runs(sweep, cost))
    tables = {"runs": table, "front": front}
    values: dict = {"x_title": f"cost over the trace ({sweep[cost].attrs.get('units', '')})"}
    budgets = None
    if breach_budget is not None:
        budgets = sorted({0.0001, 0.001, 0.01, 0.05, float(breach_budget)})
        values["budget_pct"] = float(breach_budget) * 100
        tables["budget_label"] = pd.DataFrame({"label": ["breach budget"]})
    for name, selection, label in (
        ("chosen", chosen, "your policy"),
        ("recommended", recommended, "recommended"),
    ):
        if selection is None:
            continue
        mask = np.ones(len(full), bool)
        for key, value in selection.items():
            mask &= full[key].values == value
        rows = table[mask]
        if len(rows):
            tables[name] = rows.assign(label=label)
            if len(rows) > 1:  # the label's table: the first row (one table when there is one)
                tables[f"{name}_label"] = rows.head(1).assign(label=label)
    return draft(
        _pareto_chart,
        tables=tables,
        values=values,
        shape={"cost": cost, "shown": list(shown), "budgets": budgets},
    )


_RUNS = Kept()  # a sweep's runs and Pareto front, per sweep


def _runs(sweep: xr.Dataset, cost: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, tuple]:
    """Every run of a sweep (all its columns, and the columns drawn), its front, the dims shown."""
    from ..elasticity import pareto_front

    front = pareto_front(sweep, cost=cost)
    dims = list(sweep[cost].dims)
    flat = sweep[[cost, "breach_share", "unserved_share", "thrash"]].assign(pareto=front)
    table = flat.to_dataframe().reset_index() if dims else flat.expand_dims("run").to_dataframe()
    if "policy" not in table:
        table["policy"] = sweep.attrs["policy"]
    table["policy_name"] = table.policy.map(lambda p: _POLICY_NAMES.get(p, p)).astype(object)
    table["breach_pct"] = table.breach_share * 100
    table["unserved_pct"] = table.unserved_share * 100
    shown = [c for c in ("policy_name", *dims) if c in table and c != "policy"]
    # only the columns drawn: altair converts every column of every row to JSON on each redraw
    drawn = table[[*shown, cost, "breach_pct", "unserved_pct", "thrash", "pareto"]]
    front_runs = table.loc[table.pareto, [cost, "breach_pct"]].sort_values(cost)
    return table, drawn, front_runs, tuple(shown)


def _pareto_chart(
    runs: pd.DataFrame,
    front: pd.DataFrame,
    budget_label: pd.DataFrame | None = None,
    chosen: pd.DataFrame | None = None,
    chosen_label: pd.DataFrame | None = None,
    recommended: pd.DataFrame | None = None,
    recommended_label: pd.DataFrame | None = None,
    *,
    x_title: str,
    cost: str,
    shown: list[str],
    budgets: list[float] | None,
    budget_pct: float | None = None,
) -> alt.LayerChart:
    """The sweep's chart from its tables (see :mod:`capnb.charts._draft`)."""
    x = alt.X(f"{cost}:Q", title=x_title, scale=alt.Scale(zero=False))
    # symlog: 0 stays on the chart, and each decade from 0.01 % to 100 % gets the same room
    y = alt.Y(
        "breach_pct:Q",
        title=_BREACH_PCT,
        scale=alt.Scale(type="symlog", constant=0.001),
        axis=alt.Axis(values=[0, 0.01, 0.1, 1, 10, 100], format=".2~f"),
    )

    pick = alt.selection_point(fields=["policy_name"], bind="legend")
    tooltip = [alt.Tooltip(c, title=_DIM_TITLES[c]) for c in shown]
    tooltip += [
        alt.Tooltip(f"{cost}:Q", title=x_title, format=",.1f"),
        alt.Tooltip("breach_pct:Q", title=_BREACH_PCT, format=".3f"),
        alt.Tooltip("unserved_pct:Q", title="requests unserved (% of arrivals)", format=".3f"),
        alt.Tooltip("thrash:Q", title=titled("stopped soon after becoming ready", "thrash")),
    ]
    # a run above the breach budget (picked in the dropdown under the chart) fades; otherwise the
    # policy clicked in the legend stands out
    over_budget = (
        [] if budgets is None else [{"test": "datum.breach_pct > budget_pct", "value": 0.12}]
    )
    opacity = alt.OpacityValue(0.08, condition=[*over_budget, {"param": pick.name, "value": 0.75}])
    points = (
        alt.Chart(runs)
        .mark_circle(size=45)
        .encode(
            x=x,
            y=y,
            color=alt.Color("policy_name:N", title="policy", legend=alt.Legend(orient="right")),
            opacity=opacity,
            tooltip=tooltip,
        )
        .add_params(pick)
        .properties(name="runs")  # named: altair would name the view by hashing its whole spec
    )
    front_line = (
        alt.Chart(front)
        .mark_line(color="#333333", strokeDash=[4, 3], interpolate="step-after")
        .encode(x=x, y=y)
    )
    layers = [points, front_line]
    if budgets is not None:
        # the budget is a vega-lite param over the sweep already computed: the dropdown moves the
        # line and fades the runs above it, in a static report too
        budget = alt.param(
            name="budget_pct",
            value=budget_pct,
            bind=alt.binding_select(
                options=[b * 100 for b in budgets],
                labels=[f"{b:.2%}" for b in budgets],
                name="breach budget (share of time) ",
            ),
        )
        layers.append(
            alt.Chart(budget_label)
            .transform_calculate(breach_pct="budget_pct")
            .mark_rule(color="#e45756", strokeDash=[2, 2])
            .encode(y=y)
            .add_params(budget)
        )
    for rows, first, shape, size in (
        (chosen, chosen_label, "circle", 260),
        (recommended, recommended_label, "diamond", 320),
    ):
        if rows is not None:
            ring = (
                alt.Chart(rows)
                .mark_point(
                    shape=shape,
                    size=size,
                    filled=shape == "diamond",
                    color="#222222",
                    strokeWidth=2,
                )
                .encode(x=x, y=y, tooltip=[alt.Tooltip("label:N", title="run"), *tooltip])
            )
            text = (
                alt.Chart(rows if first is None else first)
                .mark_text(align="left", dx=10, dy=-10, fontWeight="bold")
                .encode(x=x, y=y, text=alt.Text("label:N"))
            )
            layers += [ring, text]
    return alt.layer(
        *layers,
        width=560,
        height=320,
        title="Every policy of the sweep: cost vs time in breach (dashed: the Pareto front)",
    )


def cold_start_stages(estimate: xr.Dataset, *, gpu: str | None = None) -> alt.LayerChart:
    """Stacked cold-start stages per model for one GPU, against the article's 40-150 s band.

    Takes a :func:`capnb.coldstart.estimate` result.
    """
    cell = estimate
    if "gpu" in cell.dims:
        if gpu is None and cell.sizes["gpu"] != 1:
            raise InputError(f"chart: choose one gpu (the estimate has {cell.sizes['gpu']})")
        cell = cell.sel(gpu=gpu) if gpu is not None else cell.squeeze("gpu")
    rows = []
    for order, (name, (label, _)) in enumerate(_STAGES.items()):
        for model, seconds in zip(cell.model.values, np.atleast_1d(cell[name].values), strict=True):
            rows.append({"model": str(model), "stage": label, "order": order, "seconds": seconds})
    table = pd.DataFrame(rows)
    low, high = estimate.attrs.get("article_range_s", [40.0, 150.0])
    gpu_name = str(cell.gpu.values) if "gpu" in cell.coords else ""
    return draft(
        _cold_start_chart,
        tables={"band": pd.DataFrame({"low": [low], "high": [high]}), "table": table},
        values={"title": f"Cold start by stage on {gpu_name}"},
        shape={
            "models": list(map(str, cell.model.values)),
            "height": 22 * cell.sizes.get("model", 1),
        },
    )


def _cold_start_chart(
    band: pd.DataFrame, table: pd.DataFrame, *, title: str, models: list[str], height: int
) -> alt.LayerChart:
    """The cold start's chart from its tables (see :mod:`capnb.charts._draft`)."""
    shaded = (
        alt.Chart(band)
        .mark_rect(color="#bab0ac", opacity=0.25)
        .encode(x=alt.X("low:Q"), x2=alt.X2("high:Q"))
    )
    bars = (
        alt.Chart(table)
        .mark_bar()
        .encode(
            y=alt.Y("model:N", title=None, sort=models),
            x=alt.X("sum(seconds):Q", title="cold start (s); shaded: the article's 40-150 s"),
            color=alt.Color(
                "stage:N",
                sort=[v[0] for v in _STAGES.values()],
                scale=alt.Scale(
                    domain=[v[0] for v in _STAGES.values()], range=[v[1] for v in _STAGES.values()]
                ),
                legend=alt.Legend(title=None, orient="top"),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("model:N", title="model"),
                alt.Tooltip("stage:N", title="stage"),
                alt.Tooltip(
                    "seconds:Q", title=titled("time in the stage", "cold_start_s"), format=".1f"
                ),
            ],
        )
    )
    return alt.layer(shaded, bars, width=520, height=height, title=title)


_DIM_TITLES = {"policy_name": "policy", **SETTING_TITLES}


def elasticity_policies(sweep: xr.Dataset, settings: dict, *, cost: str | None = None):
    """Every policy at the same settings: its cost over the trace and its share of time in breach.

    Dropdowns under the chart pick the settings (``settings`` gives their first values: one per
    setting the sweep varies). They are vega-lite params over the sweep already computed, so they
    work in an HTML report too, where a worksheet's controls are only a record of their values.
    """
    cost = cost or ("usd" if "usd" in sweep else "gpu_hours")
    grid = sweep[cost]
    names = [d for d in SETTINGS if d in grid.dims]
    missing = [d for d in names if d not in settings]
    if missing:
        raise InputError(f"elasticity_policies: settings has no value for {missing}")
    # every run as a row: the Pareto chart's table of the same sweep, kept per sweep
    full, _, _, _ = _RUNS.get(sweep, (cost, sweep.attrs.get("policy")), lambda: _runs(sweep, cost))
    runs = full[["policy_name", *names, cost, "breach_share"]].rename(
        columns={"policy_name": "policy"}
    )
    policies = grid.policy.values if "policy" in grid.dims else np.array([sweep.attrs["policy"]])
    options = {d: grid[d].values.tolist() for d in names}
    return draft(
        _policies_chart,
        tables={"runs": runs},
        values={
            "x_title": f"cost over the trace ({grid.attrs.get('units', '')})",
            "cost_max": float(runs[cost].max()),
        },
        shape={
            "cost": cost,
            "options": options,
            "start": {d: np.asarray(settings[d]).item() for d in names},
            "order": [_POLICY_NAMES.get(str(p), str(p)) for p in policies],
        },
    )


def _policies_chart(
    runs: pd.DataFrame,
    *,
    x_title: str,
    cost_max: float,
    cost: str,
    options: dict,
    start: dict,
    order: list[str],
) -> alt.LayerChart:
    """The policies chart from its table (see :mod:`capnb.charts._draft`)."""
    picks = []
    for name, values in options.items():
        words = [f"{v / 60:g} min" if name == "cooldown_s" else f"{v:g}" for v in values]
        binding = alt.binding_select(options=values, labels=words, name=f"{SETTINGS[name]} ")
        picks.append(alt.param(name=f"pick_{name}", value=start[name], bind=binding))
    picked = alt.Chart(runs)
    if options:
        picked = picked.transform_filter(" && ".join(f"datum.{n} == pick_{n}" for n in options))
    x = alt.X(f"{cost}:Q", title=x_title, scale=alt.Scale(domain=[0, cost_max]))  # one axis
    y = alt.Y("policy:N", title=None, sort=order)
    tooltip = [
        alt.Tooltip("policy:N", title="policy"),
        alt.Tooltip(f"{cost}:Q", title=x_title, format=",.1f"),
        alt.Tooltip(
            "breach_share:Q", title=glossary.VARIABLES["breach_share"].long_name, format=".3%"
        ),
    ]
    bars = picked.mark_bar(color="#4c78a8").encode(x=x, y=y, tooltip=tooltip)
    labels = picked.mark_text(align="left", dx=4).encode(
        x=x, y=y, text=alt.Text("breach_share:Q", format=".2%")
    )
    return alt.layer(
        bars,
        labels,
        width=460,
        title="Each policy at the settings picked below: cost, and the share of time in breach",
    ).add_params(*picks)

"""Plan charts: the evidence behind a :func:`capnb.plan.build` recommendation, from the plan Dataset."""

from __future__ import annotations

import itertools
import json

import altair as alt
import numpy as np
import pandas as pd
import xarray as xr

from .. import glossary, words
from ._clock import day_label, is_undated, slot_axis, slot_title, slot_words, time_encoding
from ._titles import SETTING_TITLES, SETTINGS

__all__ = [
    "plan_backtest",
    "plan_held_out",
    "plan_instances",
    "plan_options",
    "plan_policies",
    "plan_slots",
    "plan_timeline",
]

_CHOSEN = "#e45756"


def _config(plan: xr.Dataset) -> dict:
    return json.loads(plan.attrs["config"])


def _answer(plan: xr.Dataset):
    from ..plan import answer

    return answer(plan)


def plan_slots(plan: xr.Dataset) -> alt.Chart:
    """Per slot: the P50/P95/P99 targets, the mean plan, and the capacity of the planned fleet.

    A dropdown (a vega-lite param that works in a static report) picks the traffic quantile the
    fleet line is drawn for: the plan's fixed fleet for that quantile (``fleet_fixed_instances``,
    from :func:`capnb.capacity.fleet`) times the per-instance requests/s.
    """
    a = _answer(plan)
    per_instance = a.per_instance_qps
    target = plan.forecast_target_qps.transpose("slot", "traffic_quantile")
    instances = plan.fleet_fixed_instances.transpose("slot", "traffic_quantile")
    rows = []
    for q in target.traffic_quantile.values:
        values = target.sel(traffic_quantile=q).values
        fleet = instances.sel(traffic_quantile=q).values * per_instance
        rows += [
            {
                "slot": int(s),
                "quantile": float(q),
                "series": f"P{100 * q:g} target",
                "qps": float(v),
            }
            for s, v in zip(target.slot.values, values, strict=True)
        ]
        rows += [
            {
                "slot": int(s),
                "quantile": float(q),
                "series": "fixed fleet capacity",
                "qps": float(v),
            }
            for s, v in zip(target.slot.values, fleet, strict=True)
        ]
    table = pd.DataFrame(rows)
    quantiles = [float(q) for q in target.traffic_quantile.values]
    chosen = float(_config(plan)["traffic_quantile"])
    pick = alt.param(
        name="quantile",
        value=chosen,
        bind=alt.binding_select(options=quantiles, name="traffic quantile "),
    )
    slots = slot_title(a.slots.replace("_", " "), a.clock)
    x = alt.X(field="slot", type="ordinal", title=slots,
              axis=alt.Axis(**slot_axis(a.slots, len(a.slot_labels))))  # fmt: skip
    y = alt.Y(field="qps", type="quantitative", title="requests/s")
    lines = (
        alt.Chart(table)
        .transform_filter(alt.datum.quantile == pick)
        .transform_calculate(when=slot_words(a.slots, len(a.slot_labels)))  # 'Sat 10:00-11:00'
        .mark_line(point=True)
        .encode(
            x=x,
            y=y,
            color=alt.Color(field="series", type="nominal", title=None),
            strokeDash=alt.condition(
                "datum.series == 'fixed fleet capacity'", alt.value([5, 3]), alt.value([1, 0])
            ),
            tooltip=[
                alt.Tooltip(field="when", type="nominal", title=slots),
                alt.Tooltip(field="series", type="nominal"),
                alt.Tooltip(
                    field="qps", type="quantitative", title="rate (requests/s)", format=",.3~r"
                ),
            ],
        )
    )
    mean = float(plan.forecast_mean_plan_qps.max())
    rule = alt.Chart(
        pd.DataFrame({"qps": [mean], "label": [f"mean plan {words.rate(mean)} requests/s"]})
    )
    rule_y = alt.Y(field="qps", type="quantitative")
    layers = (
        lines
        + rule.mark_rule(color="gray", strokeDash=[2, 2]).encode(y=rule_y)
        + rule.mark_text(align="left", dx=4, dy=-6, color="gray").encode(
            y=rule_y, x=alt.value(0), text=alt.Text(field="label", type="nominal")
        )
    )
    title = "Targets per slot and the fleet planned for them (the mean plan for contrast)"
    return layers.add_params(pick).properties(title=title, width=560, height=280)


def whole_ticks(top: int, most: int = 6) -> list[int]:
    """Axis ticks for counts from 0 to ``top``: whole numbers 1, 2 or 5 x 10^k apart, ``most`` at most.

    (Vega's ``tickMinStep`` is not honoured by every renderer: vl-convert drew 0, 1, 1, 2, 2 for
    counts up to 2, ticks at halves formatted as whole numbers.)

    >>> whole_ticks(2), whole_ticks(7), whole_ticks(223)
    ([0, 1, 2], [0, 2, 4, 6, 8], [0, 50, 100, 150, 200, 250])
    """
    steps = (m * 10**k for k in itertools.count() for m in (1, 2, 5))
    step = next(s for s in steps if top <= (most - 1) * s)
    return list(range(0, top + step, step))


def plan_instances(plan: xr.Dataset, *, width: int = 360, height: int = 110) -> alt.Chart:
    """A small chart of the plan's one fleet: the forecast's need per slot over the reserve.

    Bars: the instances the forecast needs per slot; the line: the reserved instances that always
    run.
    """
    a = _answer(plan)
    table = pd.DataFrame(
        {"slot": list(a.slot_labels), "instances": list(a.fixed_instances),
         "reserved": [a.reserved_instances] * len(a.slot_labels)}
    )  # fmt: skip
    slots = a.slots.replace("_", " ")
    title = f"Instances per {slots}, P{100 * a.traffic_quantile:g} (line: {a.reserved_instances:,} reserved)"
    # a week's 168 labels do not fit: one at each day's 00:00 ('Sat 00:00'), as plan_slots
    week = {"values": list(a.slot_labels[::24])} if a.slots == "hour_of_week" else {}
    x = alt.X(field="slot", type="ordinal", title=slot_title(slots, a.clock), sort=None,
              axis=alt.Axis(labelAngle=-90, labelExpr="split(datum.label, '-')[0]", **week))  # fmt: skip
    top = max([*a.fixed_instances, a.reserved_instances, 1])
    whole = alt.Axis(format="d", values=whole_ticks(top))  # instance counts are whole numbers
    bars = (
        alt.Chart(table)
        .mark_bar(color="#4c78a8")
        .encode(
            x=x,
            y=alt.Y(field="instances", type="quantitative", title="instances", axis=whole),
            tooltip=[
                alt.Tooltip(field="slot", type="nominal", title=slot_title(slots, a.clock)),
                alt.Tooltip(field="instances", type="quantitative", format=",.0f"),
            ],
        )
    )
    floor = (
        alt.Chart(table)
        .mark_line(color=_CHOSEN, strokeDash=[4, 3])
        .encode(x=x, y=alt.Y(field="reserved", type="quantitative", axis=whole))
    )
    return (bars + floor).properties(title=title, width=width, height=height)


def plan_options(plan: xr.Dataset) -> alt.Chart:
    """Monthly cost of every feasible (GPU, tensor-parallel) option; the chosen one highlighted."""
    a = _answer(plan)
    monthly = plan.capacity_usd_per_hour.mean("slot") * glossary.HOURS_PER_MONTH
    if "gpu" not in monthly.dims:  # a measured curve: the one configuration it was measured on
        monthly = monthly.drop_vars(
            [c for c in ("gpu", "tensor_parallel") if c in monthly.coords]
        ).expand_dims(gpu=[a.gpu], tensor_parallel=[a.tensor_parallel])
    table = (
        monthly.to_dataframe(name="usd").reset_index()[["gpu", "tensor_parallel", "usd"]].dropna()
    )
    table["option"] = table.tensor_parallel.astype(str) + " x " + table.gpu
    chosen = f"{a.tensor_parallel} x {a.gpu}"
    table["chosen"] = table.option == chosen
    gpus = sorted(table.gpu.unique())
    pick = alt.param(
        name="gpu",
        value=a.gpu,
        bind=alt.binding_select(options=gpus, name="highlight GPU "),
    )
    bars = (
        alt.Chart(table)
        .mark_bar()
        .encode(
            y=alt.Y(
                field="option", type="nominal", sort=alt.EncodingSortField(field="usd"), title=None
            ),
            x=alt.X(
                field="usd",
                type="quantitative",
                title="USD a month, fixed fleet for the plan + buffer",
            ),
            color=alt.condition("datum.chosen", alt.value(_CHOSEN), alt.value("#4c78a8")),
            opacity=alt.condition(alt.datum.gpu == pick, alt.value(1.0), alt.value(0.45)),
            tooltip=[
                alt.Tooltip(field="option", type="nominal"),
                alt.Tooltip(field="usd", type="quantitative", title="USD a month", format=",.0f"),
            ],
        )
    )
    title = f"Cost of each feasible option (chosen: {chosen})"
    return bars.add_params(pick).properties(title=title, width=520, height=16 * len(table) + 20)


def plan_policies(plan: xr.Dataset) -> alt.Chart:
    """Every simulated autoscaling run: monthly cost against time in SLA breach; the choice marked."""
    a = _answer(plan)
    hours = a.simulated_hours
    usd = plan.elasticity_usd / hours * glossary.HOURS_PER_MONTH
    frame = (
        xr.Dataset({"usd": usd, "breach": plan.elasticity_breach_share})
        .to_dataframe()
        .reset_index()
    )
    selection = {k: v for k, v in a.policy.selection.items() if k in frame}
    chosen = np.ones(len(frame), dtype=bool)
    for key, value in selection.items():
        chosen &= frame[key].astype(str).to_numpy() == str(value)
    frame["chosen"] = chosen
    frame["policy"] = [words.POLICY_NAMES.get(p, p) for p in frame.policy.astype(str)]
    frame["breach_pct"] = frame.breach * 100
    budget = float(_config(plan)["breach_budget"]) * 100
    points = (
        alt.Chart(frame)
        .mark_point(filled=True, size=40, opacity=0.7)
        .encode(
            x=alt.X(
                field="breach_pct",
                type="quantitative",
                title="time in SLA breach (%)",
                scale=alt.Scale(type="symlog", constant=0.01),
            ),
            y=alt.Y(
                field="usd", type="quantitative", title="USD a month", scale=alt.Scale(zero=False)
            ),
            color=alt.Color(field="policy", type="nominal"),
            tooltip=[
                alt.Tooltip(field=c, type="nominal", title=title)
                for c, title in (
                    ("policy", "policy"),
                    *((name, SETTING_TITLES[name]) for name in SETTINGS),
                )
            ]
            + [
                alt.Tooltip(field="usd", type="quantitative", title="USD a month", format=",.0f"),
                alt.Tooltip(
                    field="breach_pct",
                    type="quantitative",
                    title="time in SLA breach (%)",
                    format=".3f",
                ),
            ],
        )
    )
    mark = (
        alt.Chart(frame[frame.chosen])
        .mark_point(shape="diamond", size=220, color=_CHOSEN, filled=False, strokeWidth=2)
        .encode(
            x=alt.X(field="breach_pct", type="quantitative"),
            y=alt.Y(field="usd", type="quantitative"),
        )
    )
    rule = (
        alt.Chart(pd.DataFrame({"breach_pct": [budget]}))
        .mark_rule(color="gray", strokeDash=[4, 3])
        .encode(x=alt.X(field="breach_pct", type="quantitative"))
    )
    title = "Autoscaling runs over the trace (diamond: the recommendation; line: the breach budget)"
    return (points + rule + mark).properties(title=title, width=560, height=300)


def plan_timeline(plan: xr.Dataset) -> alt.Chart:
    """The recommended policy over the trace: demand against ready capacity, per forecast interval."""
    per_instance = _answer(plan).per_instance_qps
    times = plan.timeline_time.values
    frame = pd.DataFrame(
        {
            "time": times,
            "demand": plan.timeline_qps.values,
            "ready capacity": plan.timeline_ready_instances.values * per_instance,
            "breach_min": plan.timeline_breach_s.values / 60,
        }
    )
    # the trace's own clock, or days counted from its first day when its date is a placeholder
    clock = {**plan.traffic_qps.attrs, **plan.attrs} if "traffic_qps" in plan else plan.attrs
    x, when = time_encoding(frame, "time", undated=is_undated(clock, times))
    frame = frame.drop(columns="time")
    long = frame.melt(
        id_vars=["t_ms", "when"],
        value_vars=["demand", "ready capacity"],
        var_name="series",
        value_name="qps",
    )
    lines = (
        alt.Chart(long)
        .mark_line(strokeWidth=1)
        .encode(
            x=x,
            y=alt.Y(field="qps", type="quantitative", title="requests/s"),
            color=alt.Color(field="series", type="nominal", title=None),
            tooltip=[
                when,
                alt.Tooltip(field="series", type="nominal"),
                alt.Tooltip(
                    field="qps", type="quantitative", title="rate (requests/s)", format=",.3~r"
                ),
            ],
        )
    )
    breach = (
        alt.Chart(frame[frame.breach_min > 0])
        .mark_bar(color=_CHOSEN, opacity=0.5)
        .encode(
            x=x,
            y=alt.Y(field="breach_min", type="quantitative", title="minutes in breach"),
            tooltip=[
                when,
                alt.Tooltip(
                    field="breach_min",
                    type="quantitative",
                    title="minutes in breach",
                    format=",.1f",
                ),
            ],
        )
    )
    title = "The recommended policy over the trace (mean per interval; red: minutes in SLA breach)"
    if not len(frame[frame.breach_min > 0]):  # no breach: no empty layer (vega warns on one)
        return lines.properties(title=title, width=620, height=260)
    return (
        alt.layer(lines, breach)
        .resolve_scale(y="independent")
        .properties(title=title, width=620, height=260)
    )


def plan_backtest(plan: xr.Dataset) -> alt.Chart:
    """The backtest: each plan's cost against its minutes in SLA breach on the held-out window.

    Reads a plan's ``backtest_*`` variables (:func:`capnb.plan.build` with ``backtest_days``) or
    the table :func:`capnb.plan.backtest` returns. The dashed line is the breach budget over the
    window.
    """
    table = plan if "breach_min" in plan else _unprefixed(plan, "backtest_")
    if "breach_min" not in table:
        raise ValueError("the plan carries no backtest (build it with backtest_days > 0)")
    cost = "usd" if "usd" in table else "gpu_hours"
    frame = table[["breach_min", cost, "policy", "burst_hold_share"]].to_dataframe().reset_index()
    budget = plan.attrs.get("breach_budget")  # the table's; a plan's is in its config
    budget = float(_config(plan)["breach_budget"] if budget is None else budget)
    days = float(table.attrs.get("score_days", 7.0))
    units = table[cost].attrs.get("units", "")
    x = alt.X(
        field="breach_min",
        type="quantitative",
        title="minutes in SLA breach on the held-out window",
        scale=alt.Scale(type="symlog", constant=1),
    )
    y = alt.Y(
        field=cost,
        type="quantitative",
        title=f"{units} over the window",
        scale=alt.Scale(zero=False),
    )
    points = (
        alt.Chart(frame)
        .mark_point(filled=True, size=90)
        .encode(
            x=x,
            y=y,
            color=alt.Color(field="plan", type="nominal", sort=list(frame.plan)),
            tooltip=[
                alt.Tooltip(field="plan", type="nominal"),
                alt.Tooltip(field="policy", type="nominal"),
                alt.Tooltip(
                    field="breach_min",
                    type="quantitative",
                    title="minutes in SLA breach",
                    format=",.1f",
                ),
                alt.Tooltip(
                    field=cost, type="quantitative", title=f"{units} over the window", format=",.0f"
                ),
                alt.Tooltip(
                    field="burst_hold_share",
                    type="quantitative",
                    title="burst draws within the budget",
                    format=".0%",
                ),
            ],
        )
    )
    labels = (
        alt.Chart(frame).mark_text(align="left", dx=8).encode(x=x, y=y, text=alt.Text(field="plan"))
    )
    rule = (
        alt.Chart(pd.DataFrame({"breach_min": [budget * days * 1440]}))
        .mark_rule(color="gray", strokeDash=[4, 3])
        .encode(x=alt.X(field="breach_min", type="quantitative"))
    )
    title = "Backtest: each plan replayed on the held-out window (line: the breach budget)"
    return (points + labels + rule).properties(title=title, width=560, height=300)


def plan_held_out(plan: xr.Dataset) -> alt.Chart:
    """The plan's record on its held-out windows, one point per origin and plan.

    Left: minutes in SLA breach against each window's budget (the grey dashes); right: cost as a
    share of the hindsight plan's (the cheapest of the grid that met the budget, knowing the
    window). Reads the plan's ``held_out_*`` variables (rolling origins, :func:`capnb.plan.build`).
    """
    names = [v for v in plan.data_vars if v.startswith("held_out_")]
    if not names:
        raise ValueError(
            "the plan carries no held-out record (its trace leaves no held-out window)"
        )
    table = plan[names].rename({v: v.removeprefix("held_out_") for v in names})
    table = table.rename({"held_out_origin": "origin", "held_out_plan": "plan"})
    cost = table.usd if bool(np.isfinite(table.usd).all()) else table.gpu_hours
    relative = cost / cost.sel(plan="hindsight")
    frame = pd.DataFrame({
        "origin": np.repeat(table.origin.values, table.sizes["plan"]),
        "plan": np.tile(table.plan.values.astype(str), table.sizes["origin"]),
        "breach_min": table.breach_min.transpose("origin", "plan").values.ravel(),
        "cost_vs_hindsight": relative.transpose("origin", "plan").values.ravel(),
    })  # fmt: skip
    undated = is_undated({}, table.origin.values)
    origins = pd.DatetimeIndex(table.origin.values) if not undated else None
    # a date names an origin when each starts on its own day; sub-day windows add the time
    stamp = "%Y-%m-%d" if undated or origins.normalize().is_unique else "%Y-%m-%d %H:%M"
    labels = day_label(table.origin.values) if undated else list(origins.strftime(stamp))
    frame["when"] = np.repeat(labels, table.sizes["plan"])
    budget = pd.DataFrame({"when": labels, "budget_min": table.budget_min.values})
    x = alt.X(field="when", type="ordinal", title="held-out origin", sort=None)
    tip = [alt.Tooltip(field="when", type="nominal", title="held-out origin"),
           alt.Tooltip(field="plan", type="nominal"),
           alt.Tooltip(field="breach_min", type="quantitative", title="minutes in SLA breach",
                       format=",.1f"),
           alt.Tooltip(field="cost_vs_hindsight", type="quantitative",
                       title="cost / hindsight plan's", format=".2f")]  # fmt: skip
    color = alt.Color(field="plan", type="nominal", sort=list(table.plan.values.astype(str)))
    shown = frame[frame.plan != "instant-bound"]
    breach = alt.Chart(shown).mark_line(point=True).encode(
        x=x, y=alt.Y(field="breach_min", type="quantitative", title="minutes in SLA breach",
                     scale=alt.Scale(type="symlog", constant=1)), color=color, tooltip=tip,
    ) + alt.Chart(budget).mark_tick(color="gray", thickness=2, size=18).encode(
        x=x, y=alt.Y(field="budget_min", type="quantitative"))  # fmt: skip
    spent = alt.Chart(frame).mark_line(point=True).encode(
        x=x, y=alt.Y(field="cost_vs_hindsight", type="quantitative",
                     title="cost / hindsight plan's", scale=alt.Scale(zero=False)),
        color=color, tooltip=tip,
    )  # fmt: skip
    return alt.hconcat(
        breach.properties(title="Breach on each held-out window (ticks: the budget)", width=300,
                          height=240),
        spent.properties(title="Cost against the hindsight plan", width=300, height=240),
    )  # fmt: skip


def _unprefixed(plan: xr.Dataset, prefix: str) -> xr.Dataset:
    names = [v for v in plan.data_vars if v.startswith(prefix)]
    table = plan[names].rename({v: v.removeprefix(prefix) for v in names})
    table.attrs = {"score_days": float(plan.attrs.get("backtest_score_days", 7.0))}
    return table

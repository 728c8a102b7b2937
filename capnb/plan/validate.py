"""The plan on windows it did not see: its held-out record on every bundled multi-day series.

``python -m capnb.plan.validate [--write VALIDATION.md]`` builds the default plan on each series of
:data:`capnb.forecast.validate.SERIES` (the ServeGen aggregates, their top clients, and the first
five days of m-mid, planned on hourly origins), each scaled so that its P99 10-minute rate is
:data:`PEAK_QPS` (the bundled m-large's size: the fleet is tens of instances, as on the default),
and tabulates the plan's rolling-origin record: per held-out origin, the forecast chosen and its
coverage, the policy chosen from the windows before the origin, its breach against the window's
budget and its cost against the hindsight plan, last week's fixed fleet and the instant-scaling
lower bound. The series marked *design* are the ones the selection rule was settled on (the hold
margin of :func:`capnb.elasticity.choose_held_out`); the others are scored as they come.

``--write`` stores the record (``held_out_validation.csv`` beside this module) and replaces the
section of VALIDATION.md; ``tests/test_plan_validation.py`` checks that the stored section is what
the stored record renders, and recomputes one series.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import words

__all__ = ["PEAK_QPS", "RECORD", "SECTION", "check", "markdown", "plan_series", "stored"]

#: The heading of the section this module writes in VALIDATION.md.
SECTION = "## The plan on windows it did not see: its policy chosen by rolling origins"
#: The stored record (CSV) that :func:`stored` reads and ``--write`` replaces.
RECORD = Path(__file__).with_name("held_out_validation.csv")
#: Every series is scaled so that its P99 10-minute rate is this (requests/s).
PEAK_QPS = 440.0


def plan_series(name: str, folder: Path):
    """The default plan on one series (scaled to :data:`PEAK_QPS`), as a user would build it.

    Returns
    -------
    xarray.Dataset
        The plan of :func:`capnb.plan.build`: its variables with the glossary's names and
        ``units`` attrs (``capacity_per_instance_qps`` in requests/s, ...).
    """
    from .. import forecast
    from ..forecast import validate as series_of
    from ._build import build

    series = series_of.load(name)
    peak = float(np.nanquantile(series.qps.values, 0.99))
    path = folder / (name.replace(",", "").replace(" ", "-") + ".csv")
    seconds = (series.time.values - series.time.values[0]) / np.timedelta64(1, "s")
    frame = pd.DataFrame({"timestamp": seconds.astype(np.int64), "qps": series.qps.values})
    frame.dropna().to_csv(path, index=False)
    del forecast
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = f"{words.PLACEHOLDER_YEAR}-01-01"
        return build(trace=str(path), trace_kind="rates", time_unit="s", start=start,
                     demand_scale=PEAK_QPS / peak, disaggregation="none", provider="none")  # fmt: skip


def _model(words: str) -> str:
    """The forecast model's name from the forecast's words ("auto: last_week (chosen by ...")."""
    head, _, rest = words.partition(": ")
    return (rest if head == "auto" else head).split(" (")[0].split(",")[0]


def _rows(name: str, role: str, plan) -> list[dict]:
    from ._answer import answer

    a = answer(plan)
    if a.held_out is None:
        return [{"series": name, "role": role, "origin": "", "why_none": a.held_out_missing}]
    names = [v for v in plan.data_vars if v.startswith("held_out_")]
    table = plan[names].rename({v: v.removeprefix("held_out_") for v in names})
    table = table.rename({"held_out_origin": "origin", "held_out_plan": "plan"})
    rows = []
    for i in range(table.sizes["origin"]):
        one = table.isel(origin=i)
        cost = one.usd if bool(np.isfinite(one.usd).all()) else one.gpu_hours
        rows.append({
            "series": name, "role": role, "origin": str(one.origin.values)[:16],
            "unit": a.held_out.origin_step, "window_days": round(float(one.window_days), 4),
            "forecast": _model(str(one.forecast.item())),
            "coverage_p95": float(one.coverage_p95), "coverage_p99": float(one.coverage_p99),
            "overprovision_ratio": float(one.overprovision_ratio),
            "policy": str(one.policy.item()), "min_instances": int(one.min_instances),
            "buffer_instances": int(one.buffer_instances),
            "breach_min": float(one.breach_min.sel(plan="recommended")),
            "budget_min": float(one.budget_min),
            "hindsight_breach_min": float(one.breach_min.sel(plan="hindsight")),
            "naive_breach_min": float(one.breach_min.sel(plan="naive-last-week")),
            "cost_vs_hindsight": float(cost.sel(plan="recommended") / cost.sel(plan="hindsight")),
            "cost_vs_naive": float(cost.sel(plan="recommended") / cost.sel(plan="naive-last-week")),
            "cost_vs_bound": float(cost.sel(plan="recommended") / cost.sel(plan="instant-bound")),
            "cost": float(cost.sel(plan="recommended")),
            "hindsight_cost": float(cost.sel(plan="hindsight")),
            "steady_cost": float(cost.sel(plan="steady-hindsight")),
            "steady_kept": bool(one.meets_budget.sel(plan="steady-hindsight")),
            "bound_cost": float(cost.sel(plan="instant-bound")),
            "beats_naive": bool(one.beats_naive), "why_none": "",
        })  # fmt: skip
    return rows


def check(names=None) -> pd.DataFrame:
    """The record: one row per series and held-out origin (a series with none: one row, why).

    Breach and its budget in minutes, cost in USD (GPU-hours where a GPU has no price) and as a
    ratio to hindsight's.
    """
    from ..errors import CapnbError
    from ..forecast.validate import SERIES

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, role in SERIES:
            if names is not None and name not in names:
                continue
            try:
                rows += _rows(name, role, plan_series(name, Path(folder)))
            except CapnbError as error:  # a plan that cannot be made is a finding too
                rows.append({"series": name, "role": role, "origin": "", "why_none": str(error)})
    return pd.DataFrame(rows)


def stored() -> pd.DataFrame:
    """The stored record (written by ``--write``): the columns of :func:`check`, in minutes and USD."""
    table = pd.read_csv(RECORD, keep_default_na=False, na_values=[""])
    return table


def _summary(group: pd.DataFrame) -> dict:
    scored = group[group.origin.astype(str) != ""]
    if scored.empty:
        return {}
    held = int((scored.breach_min <= scored.budget_min + 1e-9).sum())
    return {
        "held": held,
        "windows": len(scored),
        "above_hindsight": scored.cost.sum() / scored.hindsight_cost.sum() - 1,
        "above_bound": scored.cost.sum() / scored.bound_cost.sum() - 1,
        "steady": scored.steady_cost.sum() / scored.hindsight_cost.sum() - 1,
        "steady_kept": int(scored.steady_kept.astype(bool).sum()),
        "beats_naive": int(scored.beats_naive.astype(bool).sum()),
        "p95": scored.coverage_p95.mean(),
        "p99": scored.coverage_p99.mean(),
    }


def _pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.1%}"


def markdown(table: pd.DataFrame) -> str:
    """The VALIDATION.md section for a :func:`check` record."""
    lines = [
        SECTION,
        "",
        "Generated by `python -m capnb.plan.validate --write VALIDATION.md` (do not edit by "
        "hand). The default plan (`capnb.plan.build`) on each series, scaled so that its P99 "
        f"10-minute rate is {PEAK_QPS:g} requests/s. At every held-out origin the policy (and its "
        "floor as a share of the forecast's busiest-slot fleet, and its warm spares) was chosen "
        "from the windows before the origin alone, and the forecast was chosen and calibrated on "
        "the history before it; the window after the origin (7 days, cut at the trace's end; 6 "
        "hours from hourly origins on a short trace) scores both. *Hindsight*: the cheapest "
        "configuration of the same grid that kept the budget on the window, knowing it. *Naive*: "
        "a fixed fleet for last week's P99. *Bound*: GPU-hours if instances started at once. "
        "Goals: budget kept at 90 % of origins or more, cost within 1.3x hindsight, better than "
        "the naive fleet on cost or breach at every origin, P99 coverage 97-99.5 %.",
        "",
        "*Design* series: the selection rule's hold margin (a quarter of the budget) was settled "
        "on them; *unseen*: scored as they came, after the rule was fixed.",
        "",
        "*Steady hindsight*: the one configuration of the grid that, knowing every held-out "
        "window, kept its budget in 90 % of them at the least cost: what keeping the goal would "
        "have cost had the windows been known.",
        "",
        "| series | role | budget kept | cost vs hindsight | vs bound | beats naive | P99 coverage "
        "| P95 coverage | steady hindsight: kept, cost |",
        "|---|---|---|---:|---:|---|---:|---:|---|",
    ]
    pooled = []
    for (name, role), group in table.groupby(["series", "role"], sort=False):
        s = _summary(group)
        if not s:
            why = str(group.why_none.iloc[0])
            lines.append(f"| {name} | {role} | none: {why} | | | | | | |")
            continue
        pooled.append((role, s))
        lines.append(
            f"| {name} | {role} | {s['held']} of {s['windows']} | "
            f"{words.signed_percent(s['above_hindsight'])} | "
            f"{words.signed_percent(s['above_bound'])} | {s['beats_naive']} of {s['windows']} | "
            f"{_pct(s['p99'])} | {_pct(s['p95'])} | {s['steady_kept']} of {s['windows']}, "
            f"{words.signed_percent(s['steady'])} |"
        )
    for role in ("design", "unseen", "short"):
        group = [s for r, s in pooled if r == role]
        if group:
            held, windows = sum(s["held"] for s in group), sum(s["windows"] for s in group)
            lines.append(
                f"| **all {role}** | | **{held} of {windows} ({held / windows:.0%})** | | | "
                f"{sum(s['beats_naive'] for s in group)} of {windows} | | | |"
            )
    lines += ["", "Per origin (breach and budget in minutes; cost ratios of the window):", "",
              "| series | origin | forecast | P99 cov. | policy (floor, spares) | breach / budget | "
              "hindsight | naive | cost / hindsight | / naive | / bound |",
              "|---|---|---|---:|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in table[table.origin.astype(str) != ""].itertuples():
        lines.append(
            f"| {row.series} | {row.origin} | {row.forecast} | {_pct(row.coverage_p99)} | "
            f"{row.policy} ({row.min_instances}, {row.buffer_instances}) | "
            f"{row.breach_min:,.1f} / {row.budget_min:,.1f} | {row.hindsight_breach_min:,.1f} | "
            f"{row.naive_breach_min:,.1f} | {row.cost_vs_hindsight:.2f} | {row.cost_vs_naive:.2f} "
            f"| {row.cost_vs_bound:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """The command line: print the section; with ``--write``, store the record and the section."""
    parser = argparse.ArgumentParser(
        prog="python -m capnb.plan.validate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--write", metavar="VALIDATION.md", help="store the record and the section")
    args = parser.parse_args(argv)
    table = check()
    text = markdown(table)
    print(text)
    if args.write:
        from ..data import write_atomic, write_section

        write_atomic(RECORD, table.to_csv(index=False))
        write_section(Path(args.write), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

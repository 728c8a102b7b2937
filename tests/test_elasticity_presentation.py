"""Elasticity charts (through their specs) and the worksheet (notebook 04), driven headless."""

import warnings

import nbformat
import numpy as np
import pytest
import xarray as xr
from traitlets import TraitError

from capnb import charts, coldstart, data, elasticity, notebook, plan, report
from capnb.errors import CapnbError, InputError

#: A short request log and a small grid: the worksheet answers in a second.
SHORT = {
    "TRACE": "azure-conv-2023",
    "PER_INSTANCE_QPS": 1.0,
    "COOLDOWNS_S": [0.0, 300.0],
    "SCALE_UP_THRESHOLDS": [0.6, 0.7],
    "TOLERANCE_S": 120.0,
}


@pytest.fixture(scope="module")
def burst():
    return elasticity.resample_demand(data.load_trace("azure-code-2023"), 1)


@pytest.fixture(scope="module")
def worksheet():
    return notebook.worksheet("04_elasticity", **SHORT)


def _values(spec):
    return [row for rows in spec["datasets"].values() for row in rows]


def test_timeline_buckets_keep_the_extremes(burst):
    run = elasticity.simulate(burst, per_instance_qps=2, policy="hpa", cold_start_s=60)
    spec = charts.elasticity_timeline(run, max_points=200).to_dict()
    rows = _values(spec)
    assert len(rows) <= 200
    assert max(r["demand"] for r in rows) == float(run.qps.max())  # the highest burst is drawn
    assert min(r["capacity"] for r in rows) == float(run.ready_capacity_qps.min())
    assert any(r["breach"] for r in rows) == bool(run.breach.any())
    assert "of the time" in spec["vconcat"][0]["title"]


def test_timeline_tells_each_buckets_numbers_on_hover(burst):
    # the timeline had no tooltip: a reader of the offline report could not read a burst's demand,
    # capacity or backlog off the chart. Each bucket now carries them on a transparent band
    run = elasticity.simulate(burst, per_instance_qps=2, policy="hpa", cold_start_s=60)
    spec = charts.elasticity_timeline(run, max_points=200).to_dict()
    layers = spec["vconcat"][0]["layer"]
    hover = [layer for layer in layers if "tooltip" in layer.get("encoding", {})]
    assert len(hover) == 1 and hover[0]["mark"] == {"type": "rect", "opacity": 0}
    fields = [t["field"] for t in hover[0]["encoding"]["tooltip"]]
    assert fields == ["when", "demand", "capacity", "ready", "starting", "backlog", "breach"]
    rows = _values(spec)
    assert all(row["end_ms"] > row["t_ms"] for row in rows)  # every band has a width
    assert {"when", "demand", "capacity", "backlog"} <= set(rows[0])


def test_pareto_chart_marks_the_front_and_the_picks(burst):
    grid = elasticity.sweep(burst, per_instance_qps=2, policy=["hpa", "fixed"], cold_start_s=60,
                            min_instances=[1, 4, 8], gpu="L4")  # fmt: skip
    front = elasticity.pareto_front(grid)
    pick = {"policy": "fixed", "min_instances": 8}
    spec = charts.elasticity_pareto(grid, chosen=pick, recommended=pick).to_dict()
    rows = _values(spec)
    assert sum(r["pareto"] for r in rows if "pareto" in r) >= int(front.sum())
    marks = [layer["mark"]["shape"] for layer in spec["layer"] if "shape" in layer["mark"]]
    assert marks == ["circle", "diamond"]
    params = spec.get("params", []) + spec["layer"][0].get("params", [])
    assert [p["bind"] for p in params] == ["legend"]


def test_cold_start_chart_stacks_the_stages():
    est = coldstart.estimate(["Llama-3.1-8B", "Llama-2-13B"], ["H100-SXM", "L4"])
    spec = charts.cold_start_stages(est, gpu="L4").to_dict()
    rows = [r for r in _values(spec) if "stage" in r]
    total = sum(r["seconds"] for r in rows if r["model"] == "Llama-2-13B")
    assert total == pytest.approx(float(est.cold_start_s.sel(model="Llama-2-13B", gpu="L4")))
    with pytest.raises(InputError, match="choose one gpu"):
        charts.cold_start_stages(est)


def test_worksheet_answers_and_follows_its_controls(worksheet):
    ws = worksheet
    assert ws.answer.startswith(
        ("Scale elastically", "Hold capacity that needs no cold start", "Run a fixed fleet")
    )
    assert "Your selection:" in ws.answer
    cell = ws["sweep"].sel(ws["selection"])
    assert float(ws["result"].breach_s) == float(cell.breach_s)
    before = float(ws["result"].gpu_hours)
    floors = ws.controls["min_instances"].options
    ws.set(policy="fixed", min_instances=floors[-1])
    assert ws["result"].attrs["policy"] == "fixed" and float(ws["result"].gpu_hours) != before
    assert int(ws["result"].ready_instances.min()) == floors[-1]
    assert float(ws["result"].usd) == float(ws["sweep"].usd.sel(ws["selection"]))
    for name in ("timeline", "pareto", "policies", "cold_start"):
        assert ws.chart(name).to_dict()


def test_worksheet_recomputes_the_sweep_only_for_a_new_cold_start(worksheet):
    ws = worksheet
    sweep, advice = ws["sweep"], ws["recommendation"]
    ws.set(buffer_instances=2)
    assert ws["sweep"] is sweep and ws["recommendation"] is advice
    ws.set(breach_budget=0.01)
    assert ws["sweep"] is sweep and ws["recommendation"] is not advice
    run = ws["result"]
    ws.set(breach_budget=0.001)  # the advice reads the sweep, not the selection: no new run
    assert ws["result"] is run
    ws.set(cold_start_s=10.0)
    assert ws["sweep"] is not sweep and float(ws["sweep"].cold_start_s) == 10.0
    assert any("short enough" in reason for reason in ws["recommendation"].reasons)
    ws.set(tolerance_s=60.0)
    assert float(ws["sweep"].attrs["tolerance_s"]) == 60.0


def test_worksheet_redraws_only_what_a_control_changes(worksheet):
    ws = worksheet
    for name in ws.charts:
        ws.attach(name, type("Handle", (), {"update": lambda self, drawing: None})())
    ws.set(breach_budget=0.01)
    assert ws.last_redrawn == ["pareto"]
    ws.set(cooldown_s=300.0)
    assert ws.last_redrawn == ["timeline", "pareto"]
    ws.set(breach_budget=0.001, cooldown_s=0.0)
    ws.set(tolerance_s=300.0)  # a new sweep: the policies' chart too
    # the selected run is new, but at this tolerance its timeline looks the same: not sent again
    assert ws.last_redrawn == ["pareto", "policies"]


def test_the_report_keeps_a_live_control_over_the_sweep(worksheet):
    """Dropdowns bound in the chart itself (vega-lite params) pick settings of the swept runs."""
    ws = worksheet
    spec = ws.chart("policies").to_dict()
    params = {p["name"]: p for p in spec["params"]}
    settings = ["scale_up_threshold", "cooldown_s", "min_instances", "buffer_instances"]
    assert list(params) == [f"pick_{name}" for name in settings]
    for name in settings:
        assert params[f"pick_{name}"]["bind"]["input"] == "select"
        assert params[f"pick_{name}"]["bind"]["options"] == ws["sweep"][name].values.tolist()
    rows = [row for rows in spec["datasets"].values() for row in rows]
    assert len(rows) == ws["sweep"].usd.size  # every run, filtered in the browser
    pick = {name: params[f"pick_{name}"]["value"] for name in settings}
    hpa = next(
        r
        for r in rows
        if r["policy"] == "Kubernetes HPA" and all(r[k] == v for k, v in pick.items())
    )
    assert hpa["usd"] == float(ws["sweep"].usd.sel(policy="hpa", **pick))


def test_worksheet_keeps_its_grid_and_names_a_bad_trace():
    ws = notebook.worksheet("04_elasticity", **SHORT)
    with pytest.raises(TraitError):  # a selection slider offers the sweep's grid only
        ws.set(cooldown_s=60.0)
    assert ws.controls["cooldown_s"].options == (("0 min", 0.0), ("5 min", 300.0))
    with pytest.raises(CapnbError, match="no-such-trace"):
        notebook.worksheet("04_elasticity", TRACE="no-such-trace")
    assert np.isfinite(ws.inputs["cold_start_s"])


def test_every_control_keeps_a_usable_slider_track(worksheet):
    """A long label ("scale-up threshold / target utilisation") has a fixed width beside the track."""
    widths = {c.style.description_width for c in worksheet.controls.values()}
    assert widths == {"20em"}
    assert all(c.layout.width == "46em" for c in worksheet.controls.values())


def _parameters_cell() -> dict:
    book = nbformat.read(report.worksheet_path("04_elasticity"), as_version=4)
    cell = next(c for c in book.cells if "parameters" in c.metadata.get("tags", []))
    values: dict = {}
    exec(cell.source, values)
    return values


def test_the_worksheets_defaults_are_the_plans():
    values, cfg = _parameters_cell(), plan.PlanConfig()
    traffic, serving, scaling = cfg.traffic, cfg.serving, cfg.elasticity
    for name, value in [
        ("TRACE", traffic.trace), ("TRACE_KIND", traffic.trace_kind), ("START", traffic.start),
        ("INTERVAL", traffic.interval), ("SLOTS", traffic.slots),
        ("DEMAND_SCALE", traffic.demand_scale), ("STEP_S", scaling.step_s),
        ("MODEL", serving.model), ("TOLERANCE_S", scaling.tolerance_s),
        ("BREACH_BUDGET", scaling.breach_budget),
    ]:  # fmt: skip
        assert values[name] == value, name
    assert values["COLD_START_S"] is None and cfg.elasticity.cold_start_s == "estimate"
    assert values["POLICIES"] == list(cfg.elasticity.policies) == list(elasticity.POLICIES)
    for name, field in [
        ("SCALE_UP_THRESHOLDS", "scale_up_threshold"),
        ("COOLDOWNS_S", "cooldown_s"),
        ("BUFFER_INSTANCES", "buffer_instances"),
    ]:
        grid = getattr(cfg.elasticity, field)
        assert values[name] == list(grid) == list(elasticity.POLICY_GRID[field])


def test_worksheet_and_plan_give_the_same_answer(small_plan, tmp_path, monkeypatch):
    """Worksheet 04 on a plan's inputs (as a report passes them) recommends what the plan does."""
    config = plan.read_config(small_plan).replace(
        traffic={"demand_scale": 2.5}
    )  # a scaled trace with holes
    built = []
    build = plan.build

    def keep(cfg):
        built.append(build(cfg))
        return built[-1]

    monkeypatch.setattr(plan, "build", keep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)
        parameters = report._parameters(config, tmp_path)["04_elasticity"]
    (made,) = built
    a = plan.answer(made)
    assert a.filled_share > 0  # the holes were filled from the forecast
    ws = notebook.worksheet("04_elasticity", **parameters)
    advice = ws["recommendation"]
    assert {**a.policy.selection, **advice.selection} == a.policy.selection
    # the page opens on the plan's run: its inputs line and "Your selection" are the plan's policy
    # (they were a mid threshold and half the fleet, a cheaper run than the one recommended)
    assert {k: ws.inputs[k] for k in advice.selection} == advice.selection
    assert advice.kind == a.policy.kind
    assert ws.inputs["cold_start_s"] == a.policy.cold_start_s
    assert ws["sweep"].attrs["per_instance_qps"] == a.per_instance_qps
    # every run of the sweep: the same grid and the same cost and breach figures
    for name in ("usd", "gpu_hours", "breach_s", "breach_share", "unserved_share", "thrash"):
        mine, theirs = ws["sweep"][name], made[f"elasticity_{name}"]
        assert set(mine.dims) == set(theirs.dims), name
        for dim in mine.dims:
            np.testing.assert_array_equal(mine[dim].values, theirs[dim].values)
        np.testing.assert_array_equal(mine.values, theirs.transpose(*mine.dims).values, name)
    # the recommended run, simulated step by step, is the plan's recommended cell
    ws.set(**advice.selection)
    cell = made.sel(advice.selection)
    assert float(ws["result"].usd) == float(cell.elasticity_usd)
    assert float(ws["result"].breach_s) == float(cell.elasticity_breach_s)


def test_describe_given_a_recommendation_says_what_it_takes():
    # describe(recommend(...)) ended in "AttributeError: 'Recommendation' object has no
    # attribute 'dims'"; the recommendation carries its own words
    run = elasticity.sweep(np.full(720, 30.0), step_s=5, per_instance_qps=10,
                           policy=["fixed", "hpa"], min_instances=4)  # fmt: skip
    chosen = elasticity.recommend(run)
    with pytest.raises(InputError, match=r"describe: .*Recommendation.*\.text"):
        elasticity.describe(chosen)
    assert "fixed fleet of 4" in elasticity.describe(run, policy="fixed")


def test_describe_counts_one_scale_event_in_the_singular():
    # found on a three-hour request log: "12.0 GPU-hours, 21.51 USD, 1 scale events, 0 thrash"
    demand = np.r_[np.full(360, 10.0), np.full(360, 25.0)]  # one step up: one scale-up
    run = elasticity.simulate(demand, step_s=5, per_instance_qps=10, policy="hpa",
                              min_instances=1, cold_start_s=30)  # fmt: skip
    assert int(run.scale_events) == 1
    assert ", 1 scale event, 0 thrash." in elasticity.describe(run)


@pytest.mark.slow
def test_the_burst_replay_runs_the_predictive_policy_a_plan_chose():
    """Found reporting a plan that chose the predictive policy (Llama-3.1-70B on servegen-m-mid):
    worksheet 04 replayed its bursty hour through that policy without a forecast, so the report
    left the elasticity step out ('the predictive policy needs the forecast demand per step')."""
    ran = report.execute("04_elasticity", parameters={
        **SHORT, "POLICIES": ["hpa", "predictive"], "POLICY": "predictive"})  # fmt: skip
    said = "".join(o.get("text", "") for c in ran.cells for o in c.get("outputs", []))
    assert "checks passed" in said


def _predictive_plans_parameters(small_plan, tmp_path):
    """Worksheet 04's report parameters for the small plan with the predictive policy swept (no
    held-out days), and the plan they read."""
    config = plan.read_config(small_plan).replace(
        elasticity={"policies": ("hpa", "predictive"), "backtest_days": 0}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)
        parameters = report._parameters(config, tmp_path)["04_elasticity"]
    return parameters, plan.load(parameters["PLAN_FILE"])


def test_the_predictive_policy_reads_the_plans_forecast_in_a_plans_report(small_plan, tmp_path):
    """Found reporting a plan that chose the predictive policy (Llama-3.1-70B on servegen-m-mid):
    worksheet 04 gave it the history's own slot medians, the plan its forecast of the coming week,
    so the page said the recommended run cost 2,256,650 USD and flapped 42 times a day where the
    plan's own page said 2,914,498 USD and 6.8."""
    parameters, made = _predictive_plans_parameters(small_plan, tmp_path)
    ws = notebook.worksheet("04_elasticity", **parameters)
    for name in ("usd", "breach_s", "thrash"):
        mine, theirs = ws["sweep"][name], made[f"elasticity_{name}"]
        np.testing.assert_array_equal(mine.values, theirs.transpose(*mine.dims).values, name)


def test_describe_writes_thousands_of_thrash_as_the_other_counts():
    # found with a breach budget of 0 on a three-week trace: "1,137 scale events, 6262 thrash" and
    # "4358 instance(s) stopped within 15 minutes of becoming ready" beside a table saying 4,358
    demand = np.r_[np.full(360, 10.0), np.full(360, 25.0)]
    run = elasticity.simulate(demand, step_s=5, per_instance_qps=10, policy="hpa",
                              min_instances=1, cold_start_s=30)  # fmt: skip
    run["thrash"] = run.thrash.copy(data=6262)
    assert ", 6,262 thrash." in elasticity.describe(run)


@pytest.mark.slow
def test_a_sweep_without_the_predictive_policy_says_so_not_that_the_trace_is_short(tmp_path):
    """Found reporting a plan on a 9-day rate series with policies hpa, fixed and knative: the
    held-out section said "The trace is too short to hold days out (two whole days at least)" of
    a trace of 9 days; nothing was held out because the predictive policy was not swept."""
    times = np.arange("2026-03-02", "2026-03-05", np.timedelta64(10, "m"), dtype="datetime64[m]")
    rates = 20 + 10 * np.sin(np.arange(times.size) / 144 * 2 * np.pi)
    trace = tmp_path / "three_days.csv"
    trace.write_text(
        "timestamp,qps\n" + "".join(f"{t},{q:.3f}\n" for t, q in zip(times, rates, strict=True))
    )
    ran = report.execute("04_elasticity", parameters={
        **SHORT, "TRACE": str(trace), "PER_INSTANCE_QPS": 10.0, "STEP_S": 5,
        "POLICIES": ["hpa", "fixed"], "POLICY": "hpa"})  # fmt: skip
    said = "".join(o.get("text", "") for c in ran.cells for o in c.get("outputs", []))
    assert "checks passed" in said
    assert "too short" not in said
    assert (
        "Nothing is held out: the predictive policy is not among the policies swept (hpa, fixed)"
        in said
    )


@pytest.mark.slow
def test_a_plans_predictive_choice_keeps_the_elasticity_page(small_plan, tmp_path):
    """Found reporting a 3-day request log (policies hpa, fixed, predictive): the plan chose the
    predictive policy on its own held-out windows (hourly origins), worksheet 04's closing check
    asked that it also win on the worksheet's own later half ('assert wins'), and the report left
    the elasticity step out as a defect. With a plan the plan's choice is the answer."""
    import dataclasses
    import json

    parameters, made = _predictive_plans_parameters(small_plan, tmp_path)
    a = plan.answer(made)
    # the plan's choice, the predictive policy at the same cell, whether or not it wins below
    chosen = dataclasses.replace(a.policy, name="predictive")
    made.attrs["answer"] = json.dumps(dataclasses.replace(a, policy=chosen).to_dict())
    made.to_netcdf(tmp_path / "predictive.nc", engine="h5netcdf")
    ran = report.execute(
        "04_elasticity", parameters={**parameters, "PLAN_FILE": str(tmp_path / "predictive.nc")}
    )
    said = "".join(o.get("text", "") for c in ran.cells for o in c.get("outputs", []))
    assert "checks passed: " in said and "'policy': 'predictive'" in said


def test_timeline_reads_the_trace_clock_not_time_from_its_start():
    # a 2-hour trace from 08:00 at 1-min steps: the axis said "minutes from the start of the
    # trace" (0-120); it is the trace's own clock, 08:00-10:00, as the other charts draw it
    times = np.arange("2026-03-02T08:00", "2026-03-02T10:00", dtype="datetime64[m]")
    rate = np.r_[np.full(60, 10.0), np.full(60, 30.0)]
    demand = elasticity.resample_demand(
        xr.DataArray(rate, dims="time", coords={"time": times.astype("datetime64[ns]")},
                     attrs={"units": "requests/s"}), 60)  # fmt: skip
    run = elasticity.simulate(
        demand, per_instance_qps=10, policy="fixed", min_instances=2, cold_start_s=60
    )
    spec = charts.elasticity_timeline(run).to_dict()
    x = spec["vconcat"][0]["layer"][1]["encoding"]["x"]
    assert x["type"] == "temporal" and x["scale"]["type"] == "utc"
    rows = [r for r in _values(spec) if "demand" in r]
    assert rows[0]["t_ms"] == times[0].astype("datetime64[ms]").astype(np.int64)
    assert rows[-1]["end_ms"] - rows[0]["t_ms"] == 2 * 3_600_000  # the last step's end
    assert rows[0]["when"] == "2026-03-02T08:00"
    # a bare array has no date: its steps are counted in days from the first, "day 1 00:59"
    bare = elasticity.simulate(
        rate, step_s=60, per_instance_qps=10, policy="fixed", cold_start_s=60
    )
    rows = [r for r in _values(charts.elasticity_timeline(bare).to_dict()) if "demand" in r]
    assert rows[59]["when"] == "day 1 00:59"


def test_the_elasticity_charts_tooltips_say_what_each_value_is_in_its_units(burst, tooltips):
    # their tooltips read the tables' field names: 'usd 412.5' (over what?), 'breach_pct 0.012',
    # 'unserved_pct 0', 'thrash 3', 'min_instances 4', 'breach_share 1.2%', 'seconds 38.2'
    grid = elasticity.sweep(burst, per_instance_qps=2, policy=["hpa", "fixed"], cold_start_s=[60, 120],
                            min_instances=[1, 4], gpu="L4")  # fmt: skip
    pick = {"policy": "fixed", "min_instances": 4, "cold_start_s": 60}
    est = coldstart.estimate(["Llama-3.1-8B"], ["L4"])
    drawn = {
        "pareto (USD)": charts.elasticity_pareto(grid, chosen=pick, breach_budget=0.01),
        "pareto (GPU·h)": charts.elasticity_pareto(grid, cost="gpu_hours"),
        "policies": charts.elasticity_policies(grid, {"min_instances": 1}),
        "cold start": charts.cold_start_stages(est),
    }
    for name, chart in drawn.items():
        tips = tooltips(chart.to_dict())
        assert tips, name
        for tip in tips:
            assert "_" not in tip.get("title", tip["field"]), (name, tip)
            assert tip.get("title", tip["field"]) not in {"usd", "thrash", "seconds"}, (name, tip)
    pareto = {t["field"]: t["title"] for t in tooltips(drawn["pareto (USD)"].to_dict())}
    assert pareto["usd"] == "cost over the trace (USD)"
    assert pareto["breach_pct"] == "time in SLA breach (%)"
    assert pareto["cold_start_s"] == "cold start (s)"
    costs = {t["field"]: t["title"] for t in tooltips(drawn["pareto (GPU·h)"].to_dict())}
    assert costs["gpu_hours"] == "cost over the trace (GPU·h)"

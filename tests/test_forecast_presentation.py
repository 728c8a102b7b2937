"""Forecast charts (through to_dict) and the forecasting worksheet, run headless from its notebook."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from capnb import charts, data, forecast, notebook
from capnb.errors import InputError


@pytest.fixture(scope="module")
def worksheet():
    return notebook.worksheet("01_forecasting", TRIALS=300, SEED=1)


class _Handle:
    """A displayed chart without a notebook: renders what it is given, as IPython would."""

    def update(self, drawing) -> None:
        drawing._repr_mimebundle_()


def _layers(spec):
    found = []
    for key in ("layer", "vconcat", "hconcat"):
        for part in spec.get(key, []):
            found += _layers(part)
    return found or [spec]


def test_worksheet_answers_with_the_step_numbers(worksheet):
    result = worksheet["target"]
    direct = forecast.target(
        data.load_rate_series("servegen-m-large"), trials=300, seed=1, plan_quantile=0.99
    )
    np.testing.assert_array_equal(result.target_qps, direct.target_qps)
    assert float(result.buffer_qps) == float(direct.buffer_qps)
    assert f"{float(result.buffer_qps):,.0f} requests/s" in worksheet.answer
    assert "the article's default" in worksheet.answer
    assert worksheet.inputs["slots"] == "hour_of_day"
    assert worksheet.controls["slots"].options == ("hour_of_day",)  # weekday not known
    assert worksheet["notes"] == [] and "Planned at" not in worksheet.answer


def test_controls_recompute_and_describe_the_burst_model(worksheet):
    before = float(worksheet["target"].buffer_qps)
    worksheet.set(bursts_per_month=4.0, burst_multiplier=(5.0, 8.0))
    try:
        assert float(worksheet["target"].buffer_qps) > before
        assert "set by hand" in worksheet.answer
        assert "bursts_per_month = 4," in worksheet.record()
    finally:
        worksheet.set(bursts_per_month=1.5, burst_multiplier=(3.0, 5.0))
    assert float(worksheet["target"].buffer_qps) == before
    assert "the article's default" in worksheet.answer


def test_exceedance_probability_does_not_rerun_the_monte_carlo(worksheet):
    names = ("series", "baseline", "bursts", "months")
    kept = {name: worksheet[name] for name in names}
    before = float(worksheet["target"].buffer_qps)
    for name in worksheet.charts:
        worksheet.attach(name, _Handle())
    try:
        worksheet.set(exceed_probability=0.01)
        # the same objects: kept gave back its answers, the months were not simulated again
        assert all(worksheet[name] is kept[name] for name in names)
        assert worksheet.last_redrawn == ["exceedance"]
        assert float(worksheet["target"].buffer_qps) > before  # a stricter probability
        assert worksheet["target"].attrs["chosen_exceed_probability"] == 0.01
        # the same answer as a new run of the whole step at that probability
        direct = forecast.target(
            data.load_rate_series("servegen-m-large"), trials=300, seed=1, exceed_probability=0.01
        )
        assert float(worksheet["target"].buffer_qps) == float(direct.buffer_qps)

        # the plan's quantile re-runs the months (the fixed plan is on their capacity grid) but
        # nothing before them, and redraws only the charts that show it
        worksheet.set(quantile=0.95)
        assert all(worksheet[name] is kept[name] for name in ("series", "baseline", "bursts"))
        assert worksheet["months"] is not kept["months"]
        assert sorted(worksheet.last_redrawn) == ["exceedance", "plans", "series"]
        assert "P95" in worksheet.answer
    finally:
        worksheet.set(exceed_probability=0.05, quantile=0.99)
        worksheet._handles.clear()
    # back to the first inputs: every stage answers from memory
    assert all(worksheet[name] is kept[name] for name in names)
    assert float(worksheet["target"].buffer_qps) == before


def test_a_new_interval_reruns_what_depends_on_it(worksheet):
    series, months = worksheet["series"], worksheet["months"]
    worksheet.set(interval="20min")
    try:
        assert float(worksheet["series"].attrs["interval_s"]) == 1200
        assert worksheet["months"] is not months and "buffer_qps" in worksheet["target"]
    finally:
        worksheet.set(interval="10min")
    assert worksheet["series"] is series and worksheet["months"] is months


def test_a_short_log_changes_the_interval_says_so_and_keeps_the_monte_carlo(worksheet):
    # the Mooncake log spans 17 min: 10-min intervals would be fewer than 4, and hour-of-day slots
    # would leave 23 of 24 never seen (no month could be simulated)
    with pytest.warns(data.TraceWarning, match="share their timestamp"):
        worksheet.set(trace="mooncake-synthetic")
    try:
        assert worksheet.inputs["interval"] == "10min"  # the control keeps what was asked
        assert worksheet["interval"] == "1min"
        assert float(worksheet["series"].attrs["interval_s"]) == 60
        answer = worksheet.answer
        assert answer.startswith("Planned at 1min intervals, not 10min: mooncake-synthetic spans")
        assert "Planned on one slot" in answer
        assert "buffer_qps" in worksheet["target"] and "No Monte Carlo" not in answer
        assert "elastic buffer of" in answer
        assert "(00:00-01:00) to" not in answer and "at every time (a single slot)" in answer
        curve = worksheet.chart("exceedance").to_dict()
        assert any(p.get("name") == "exceed_p" for p in curve.get("params", []))
        for name in worksheet.charts:
            assert worksheet.chart(name).to_dict()
    finally:
        worksheet.set(trace="servegen-m-large")
    assert worksheet["interval"] == "10min" and worksheet["notes"] == []
    assert "Planned" not in worksheet.answer


def test_a_rate_series_is_not_split_finer_than_it_was_counted(worksheet):
    worksheet.set(interval="1min")
    try:
        assert worksheet["interval"] == "10min"
        note = "Planned at 10min intervals, not 1min: servegen-m-large counts requests per 10 min"
        assert worksheet.answer.startswith(note)
    finally:
        worksheet.set(interval="10min")


def test_a_short_log_at_seconds_states_why_there_is_no_monte_carlo(worksheet):
    worksheet.set(trace="azure-conv-2023")
    try:
        assert "hour_of_week" in worksheet.controls["slots"].options  # the log has real dates
        assert "Too little history" in worksheet.answer
        assert "buffer_qps" in worksheet["target"]  # 10-min intervals fit in its hour
        worksheet.set(interval="1s")
        assert worksheet["interval"] == "1s" and "buffer_qps" not in worksheet["target"]
        assert "No Monte Carlo: the Monte Carlo runs per minute" in worksheet.answer
        assert "No Monte Carlo" in str(worksheet.chart("exceedance").to_dict())
    finally:
        worksheet.set(trace="servegen-m-large", interval="10min")
    assert worksheet.inputs["slots"] == "hour_of_day"


def test_every_chart_draws_the_result(worksheet):
    result = worksheet["target"]
    plans = worksheet.chart("plans").to_dict()
    values = plans["datasets"][next(iter(plans["datasets"]))]
    assert len(values) == 25  # 24 slots and the end of the last step
    np.testing.assert_allclose(
        [row["plan"] for row in values[:24]], result.target_qps.sel(traffic_quantile=0.99).values
    )
    curve = worksheet.chart("exceedance").to_dict()
    assert any(p.get("name") == "exceed_p" for p in curve.get("params", []))
    assert "buffer" in str(curve)
    series = worksheet.chart("series").to_dict()
    assert "day 1 is its first day" in str(series)  # ServeGen's date is a placeholder
    heatmap = worksheet.chart("heatmap").to_dict()
    assert "one row per day" in heatmap["title"]
    with pytest.raises(InputError, match="unknown chart"):
        worksheet.chart("pie")


def test_missing_intervals_are_marked_not_drawn_as_zero():
    small = data.load_rate_series("servegen-m-small")
    spec = charts.forecast_series(small, forecast.fit_baseline(small)).to_dict()
    assert "37 missing" in spec["layer"][0].get("title", "") or "37 missing" in str(spec["title"])
    ticks = [layer for layer in _layers(spec) if layer.get("mark", {}).get("type") == "tick"]
    assert len(ticks) == 1


def test_the_series_title_says_its_interval_in_words():
    # a 10-minute series was titled "Requests/s per 600 s interval"
    small = data.load_rate_series("servegen-m-small")
    assert float(small.attrs["interval_s"]) == 600
    title = str(charts.forecast_series(small).to_dict()["title"])
    assert "in intervals of 10 minutes" in title and "600 s" not in title


def test_charts_refuse_what_they_cannot_draw():
    large = data.load_rate_series("servegen-m-large")
    with pytest.raises(InputError, match="fit_baseline"):
        charts.forecast_plans(large)
    with pytest.raises(InputError, match="simulate"):
        charts.forecast_exceedance(forecast.fit_baseline(large))


def test_the_exceedance_labels_give_a_low_rate_in_its_unit():
    # a service at under 1 request/s: its labels read "fixed plan 1" and "5%: 2 (buffer 1)" for a
    # fixed plan of 0.702 requests/s, whole numbers without a unit; its tooltips "capacity 1"
    small = data.load_rate_series("servegen-m-small")
    slow = small.assign(qps=small.qps / 5000).assign_attrs(small.attrs)
    simulation = forecast.simulate(slow, forecast.fit_baseline(slow), trials=100)
    spec = charts.forecast_exceedance(simulation).to_dict()
    labels = [row["label"] for rows in spec["datasets"].values() for row in rows if "label" in row]
    fixed = simulation.attrs["fixed_plan_qps"]
    required = float(simulation.required_qps)
    assert fixed < 1 and labels == [
        f"fixed plan {fixed:.3g} requests/s",
        f"5%: {required:.3g} requests/s (buffer {required - fixed:.3g} requests/s)",
    ]
    tooltips = [t for layer in _layers(spec) for t in layer.get("encoding", {}).get("tooltip", [])]
    assert all(
        t.get("title", "").endswith("(requests/s)") for t in tooltips if "capacity" in t["field"]
    )


def test_rate_tooltips_name_requests_per_s_and_keep_three_digits():
    # on a service under 1 request/s the tooltips read "plan 0.1" for 0.148 requests/s (",.1f")
    # and gave no unit: they now say "(requests/s)" and keep three significant digits
    small = data.load_rate_series("servegen-m-small")
    slow = small.assign(qps=small.qps / 5000).assign_attrs(small.attrs)
    specs = [charts.forecast_series(slow).to_dict(), charts.forecast_heatmap(slow).to_dict(),
             charts.forecast_plans(forecast.fit_baseline(slow)).to_dict()]  # fmt: skip
    rates = [t for spec in specs for layer in _layers(spec)
             for t in layer.get("encoding", {}).get("tooltip", [])
             if t["field"] in ("qps", "plan", "mean_plan")]  # fmt: skip
    assert len(rates) == 4
    assert all(t["title"].endswith("(requests/s)") and t["format"] == ",.3~r" for t in rates)


def test_a_path_or_dataset_can_be_the_trace(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        + "".join(
            f"2024-05-13 09:{m:02d}:{s:02d},10,5\n" for m in range(20) for s in range(0, 60, 7)
        )
    )
    sheet = notebook.worksheet("01_forecasting", TRACE=str(path), TRIALS=50)
    assert sheet.inputs["trace"] == "log.csv" and sheet["interval"] == "1min"
    assert "Planned at 1min intervals, not 10min: log.csv spans" in sheet.answer
    assert "buffer_qps" in sheet["target"]
    series = data.load_rate_series("servegen-m-small")
    sheet = notebook.worksheet("01_forecasting", TRACE=series, INTERVAL="1h", TRIALS=50)
    assert float(sheet["series"].attrs["interval_s"]) == 3600
    assert sheet.inputs["trace"] == series.attrs["title"]


def test_parameters_outside_the_dropdowns_are_offered():
    # capnb report --config may inject a quantile or a probability the dropdowns do not list
    sheet = notebook.worksheet("01_forecasting", QUANTILE=0.9, EXCEED_PROBABILITY=0.03, TRIALS=50)
    assert sheet["target"].attrs["plan_quantile"] == 0.9
    assert sheet["target"].attrs["chosen_exceed_probability"] == 0.03
    assert "Plan on the P90" in sheet.answer


def test_target_from_assembles_what_target_returns():
    series = data.load_rate_series("servegen-m-large")
    baseline = forecast.fit_baseline(series)
    found = forecast.detect_bursts(series, baseline)
    months = forecast.simulate(series, baseline, trials=200, seed=3, exclude=found)
    # target_from assembles the history's own plan; the default carries it forward a week first
    direct = forecast.target(
        series, trials=200, seed=3, exceed_probability=0.02, growth_model="none"
    )
    parts = forecast.target_from(baseline, months, detected=found, exceed_probability=0.02)
    assert (
        direct.attrs.pop("growth_model") == "none"
    )  # what target was asked; parts know nothing of it
    assert parts.identical(direct)
    assert forecast.target_from(baseline, months).attrs["bursts_detected"] == 0
    with pytest.raises(InputError, match="did not run on this baseline"):
        forecast.target_from(baseline.assign(target_qps=baseline.target_qps * 2), months)
    with pytest.raises(InputError, match="simulate"):
        forecast.target_from(baseline, baseline)


def test_describe_a_single_slot_plan_in_one_rate():
    with pytest.warns(data.TraceWarning, match="share their timestamp"):
        log = data.load_trace("mooncake-synthetic")  # 17 minutes of one hour
    series = forecast.resample(log, "1min")
    one = forecast.describe(forecast.fit_baseline(series, slots=("1D", "1D")))
    assert one.startswith("Plan on the P99: ") and "at every time (a single slot)" in one
    # its time 0 is the first request: no hour of the day until the trace says when that was
    with pytest.raises(InputError, match="counts time from an unknown start"):
        forecast.fit_baseline(series)
    with pytest.warns(data.TraceWarning, match="share their timestamp"):
        dated = data.load_trace("mooncake-synthetic", start="2026-05-04 09:00")
    hourly = forecast.describe(forecast.fit_baseline(forecast.resample(dated, "1min")))
    assert hourly.startswith("Plan on the P99 per hour of day: ")
    assert "in 09:00-10:00, the only one of 24 slots with data" in hourly
    assert "from " not in hourly.split(" A plan at")[0]


def test_describe_a_plan_equal_in_every_slot_in_one_rate():
    # a flat series of mine read "from 50 requests/s (00:00-01:00) to 50 requests/s (00:00-01:00)"
    times = pd.date_range("2024-05-13", periods=7 * 144, freq="10min")
    flat = xr.Dataset(
        {"qps": ("time", np.full(times.size, 50.0))},
        coords={"time": times.values},
        attrs={"interval_s": 600.0, "weekday_known": "yes"},
    )
    text = forecast.describe(forecast.fit_baseline(flat))
    assert text.startswith(
        "Plan on the P99 per hour of day: 50 requests/s in each of the 24 slots; "
    )
    assert "from " not in text.split(" A plan at")[0]


def _cell_value(name: str, cell_id: str, namespace: dict):
    """Run one code cell of a worksheet notebook in ``namespace``; its last expression's value."""
    import ast
    import json

    from capnb.report import worksheet_path

    cells = json.loads(worksheet_path(name).read_text(encoding="utf-8"))["cells"]
    source = "".join(next(c["source"] for c in cells if c.get("id") == cell_id))
    tree = ast.parse(source)
    *body, last = tree.body
    exec(compile(ast.Module(body, []), cell_id, "exec"), namespace)
    return eval(compile(ast.Expression(last.value), cell_id, "eval"), namespace)


def test_the_selection_record_says_when_the_hindsight_plan_held_nothing_idle(tmp_path):
    # an hourly count series that repeats itself exactly: the hindsight plans hold no idle
    # capacity, and worksheet 01's record table showed the over-provisioning ratio as "infx"
    import pandas as pd

    import capnb

    hours = pd.date_range("2026-03-02", periods=14 * 24, freq="1h")
    path = tmp_path / "hourly_counts.csv"
    counts = 10_800 + 5_000 * np.sin(2 * np.pi * hours.hour / 24)
    pd.DataFrame({"time": hours.strftime("%Y-%m-%dT%H:%M"), "requests": counts.round()}).to_csv(
        path, index=False
    )
    sheet = notebook.worksheet("01_forecasting", TRACE=str(path), TRIALS=50, INTERVAL="1h")
    shown = _cell_value("01_forecasting", "select-record", {"capnb": capnb, "pd": pd, "ws": sheet})
    page = shown.to_html()
    assert "infx" not in page
    assert "no ratio: the hindsight plan held none idle" in page
    assert notebook.over_hindsight(1.234) == "1.23x"


def test_the_worksheet_checks_pass_on_a_trace_with_a_burst(tmp_path):
    # a 14-day 10-minute trace with one weekday burst (2 h at 4x): the carried history holds the
    # burst at its slot's median (counted once, in the burst buffer), and the check cell, which
    # asked that every slot's carried rates keep the order of the rates observed, failed with a
    # bare AssertionError (so did `capnb report` on such a trace)
    from capnb import report

    rng = np.random.default_rng(0)
    t = np.arange(14 * 144)
    hour, day = (t % 144) / 6, t // 144
    rate = (0.125 + 0.725 * np.exp(-0.5 * ((hour - 11) / 3.0) ** 2)) * np.where(
        day % 7 >= 5, 0.5, 1.0
    )
    rate = rate * np.where((day == 3) & (hour >= 10) & (hour < 12), 4.0, 1.0)
    times = pd.date_range("2026-03-02", periods=t.size, freq="10min")
    path = tmp_path / "bursty.csv"
    pd.DataFrame({"timestamp": times, "qps": rng.poisson(rate * 600) / 600}).to_csv(
        path, index=False
    )
    ran = report.execute("01_forecasting", parameters={"TRACE": str(path), "TRIALS": 200})
    printed = "".join(
        out.get("text", "")
        for cell in ran.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    )
    assert "checks passed" in printed


def test_describe_says_why_a_one_day_history_is_planned_without_a_forecast():
    # a 1-day-old service of mine: target planned it on the history as it is ("none: series: 1 d
    # leaves 0 origin(s) ..."), and its words said nothing of the forecast, as if one had been made
    times = pd.date_range("2026-03-02", periods=144, freq="10min")
    hour = times.hour.to_numpy()
    day = xr.Dataset(
        {"qps": ("time", 0.5 + 2.0 * np.exp(-(((hour - 11) / 3.0) ** 2)))},
        coords={"time": times.values},
        attrs={"interval_s": 600.0, "weekday_known": "yes"},
    )
    result = forecast.target(day, trials=50, seed=1)
    assert result.attrs["growth_model"].startswith("none: series: 1 d leaves 0 origin(s)")
    text = forecast.describe(result)
    assert "No forecast of the coming days: series: 1 d leaves 0 origin(s)" in text
    assert "planned on the history as it is." in text


def test_the_plans_chart_names_its_slots_as_the_text_does(tmp_path):
    # two weeks at +01:00 planned per hour of week: the x axis read 'hour of week' over 0-168, no
    # clock, and the tooltip 'slot 130' where describe() says 'Sat 10:00-11:00'
    import re

    import vl_convert as vlc
    from test_plan import drawn_for

    times = pd.date_range("2026-03-02", periods=14 * 24, freq="1h", tz="UTC+01:00")
    rates = 10 + 5 * (times.day_of_week == 5) + np.arange(len(times)) % 24
    path = tmp_path / "rates.csv"
    pd.DataFrame({"timestamp": times.strftime("%Y-%m-%dT%H:%M:%S%z"), "qps": rates}).to_csv(
        path, index=False
    )
    baseline = forecast.fit_baseline(data.load_rate_series(path, time_column="timestamp", rate_column="qps"),
                                     slots="hour_of_week")  # fmt: skip
    spec = charts.forecast_plans(baseline).to_dict()
    plan = next(layer for layer in _layers(spec) if layer["encoding"].get("tooltip"))
    assert plan["encoding"]["x"]["title"] == "hour of week (UTC+01:00)"
    shown = re.findall(r"<text[^>]*>([^<]*)</text>", vlc.vegalite_to_svg(spec))
    assert {"Mon 00:00", "Sat 00:00", "Sun 00:00"} <= set(shown) and "120" not in shown
    tip = plan["encoding"]["tooltip"][0]
    assert tip["title"] == "hour of week (UTC+01:00)"
    assert drawn_for(plan, tip["field"], {"slot": 130}) == "Sat 10:00-11:00"


def test_the_heatmap_names_its_hours_as_the_text_does(tmp_path):
    # its x axis read 0 ... 23 under "hour of day (trace's clock)" and its tooltip 'hour 10' for a
    # series at +01:00; the text says '10:00-11:00' and names the zone
    import re

    import vl_convert as vlc
    from test_plan import drawn_for

    times = pd.date_range("2026-03-02", periods=7 * 24, freq="1h", tz="UTC+01:00")
    path = tmp_path / "rates.csv"
    pd.DataFrame({"timestamp": times.strftime("%Y-%m-%dT%H:%M:%S%z"), "qps": 5.0}).to_csv(
        path, index=False
    )
    series = data.load_rate_series(path, time_column="timestamp", rate_column="qps")
    spec = charts.forecast_heatmap(series).to_dict()
    assert spec["encoding"]["x"]["title"] == "hour of day (UTC+01:00)"
    shown = re.findall(r"<text[^>]*>([^<]*)</text>", vlc.vegalite_to_svg(spec))
    assert {"00:00", "09:00", "21:00"} <= set(shown) and "10" not in shown
    tip = next(t for t in spec["encoding"]["tooltip"] if t.get("title") == "hour of day")
    assert drawn_for(spec, tip["field"], {"hour": 10}) == "10:00-11:00"


def test_a_worksheets_own_slot_chart_names_its_slots():
    # worksheet 06 drew its per-slot fleets over x 'slot:O' titled 'hour of day', also for a plan
    # per hour of week (168 codes under 'hour of day'); charts.slot_x gives it the words
    from test_plan import drawn_for

    x, when = charts.slot_x("hour_of_week", 168, "Europe/Berlin")
    assert x.to_dict()["title"] == "hour of week (Europe/Berlin)"
    assert x.to_dict()["axis"]["values"] == list(range(0, 168, 24))
    layer = {"transform": [{"calculate": expr, "as": name} for name, expr in when.items()]}
    assert drawn_for(layer, "when", {"slot": 130}) == "Sat 10:00-11:00"


def test_the_forecast_charts_tooltips_say_what_each_value_is():
    # the heatmap's tooltip read 'row Mon' (or 'row day 3'), the exceedance curve's
    # 'probability 4.2%' (of what?): each tooltip now has a title in words, as the axes say
    small = data.load_rate_series("servegen-m-small")
    dated = small.assign_attrs(weekday_known="yes")
    simulation = forecast.simulate(small, forecast.fit_baseline(small), trials=100)
    specs = {"heatmap (undated)": charts.forecast_heatmap(small).to_dict(),
             "heatmap": charts.forecast_heatmap(dated).to_dict(),
             "exceedance": charts.forecast_exceedance(simulation).to_dict(),
             "series": charts.forecast_series(small, forecast.fit_baseline(small)).to_dict(),
             "plans": charts.forecast_plans(forecast.fit_baseline(small)).to_dict()}  # fmt: skip
    for name, spec in specs.items():
        tips = [t for layer in _layers(spec) for t in layer.get("encoding", {}).get("tooltip", [])]
        assert tips, name
        for tip in tips:
            assert "title" in tip and "_" not in tip["title"], (name, tip)
    rows = {name: next(t["title"] for t in spec["encoding"]["tooltip"] if t["field"] == "row")
            for name, spec in specs.items() if name.startswith("heatmap")}  # fmt: skip
    assert rows == {"heatmap (undated)": "day of the trace", "heatmap": "weekday"}

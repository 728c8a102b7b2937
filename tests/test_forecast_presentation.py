"""Forecast charts (through to_dict) and the worksheet, driven headless."""

import numpy as np
import pytest

from capnb import charts, data, forecast, widgets
from capnb.errors import InputError


@pytest.fixture(scope="module")
def worksheet():
    return widgets.ForecastWorksheet("servegen-m-large", trials=300, seed=1)


def _layers(spec):
    found = []
    for key in ("layer", "vconcat", "hconcat"):
        for part in spec.get(key, []):
            found += _layers(part)
    return found or [spec]


def test_worksheet_answers_with_the_step_numbers(worksheet):
    result = worksheet.result
    direct = forecast.target(
        data.load_rate_series("servegen-m-large"), trials=300, seed=1, plan_quantile=0.99
    )
    np.testing.assert_array_equal(result.target_qps, direct.target_qps)
    assert float(result.buffer_qps) == float(direct.buffer_qps)
    assert f"{float(result.buffer_qps):,.0f} requests/s" in worksheet.answer
    assert "the article's default" in worksheet.answer
    assert worksheet.inputs["slots"] == "hour_of_day"
    assert worksheet.controls["slots"].options == ("hour_of_day",)  # weekday not known


def test_controls_recompute_and_describe_the_burst_model(worksheet):
    before = float(worksheet.result.buffer_qps)
    worksheet.set(bursts_per_month=4.0, burst_multiplier=(5.0, 8.0))
    try:
        assert float(worksheet.result.buffer_qps) > before
        assert "set by hand" in worksheet.answer
        assert "bursts_per_month = 4.0" in worksheet.record()
    finally:
        worksheet.set(bursts_per_month=1.5, burst_multiplier=(3.0, 5.0))
    assert float(worksheet.result.buffer_qps) == before


def test_switching_to_a_short_log_states_why_there_is_no_monte_carlo(worksheet):
    worksheet.set(trace="azure-conv-2023")
    try:
        assert worksheet.inputs["interval"] in worksheet.controls["interval"].options
        assert "buffer_qps" not in worksheet.result
        assert "Too little history" in worksheet.answer and "No Monte Carlo" in worksheet.answer
        assert "No Monte Carlo" in str(worksheet.chart("exceedance").to_dict())
        assert "hour_of_week" in worksheet.controls["slots"].options  # the log has real dates
    finally:
        worksheet.set(trace="servegen-m-large", interval="10min")


def test_every_chart_draws_the_result(worksheet):
    result = worksheet.result
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
    assert "days since day 0" in str(series)  # ServeGen's date is a placeholder
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


def test_charts_refuse_what_they_cannot_draw():
    large = data.load_rate_series("servegen-m-large")
    with pytest.raises(InputError, match="fit_baseline"):
        charts.forecast_plans(large)
    with pytest.raises(InputError, match="simulate"):
        charts.forecast_exceedance(forecast.fit_baseline(large))


def test_a_path_or_dataset_can_be_the_trace(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        + "".join(
            f"2024-05-13 09:{m:02d}:{s:02d},10,5\n" for m in range(20) for s in range(0, 60, 7)
        )
    )
    sheet = widgets.ForecastWorksheet(str(path), trials=50)
    assert sheet.inputs["trace"] == str(path) and sheet.inputs["interval"] == "1min"
    series = data.load_rate_series("servegen-m-small")
    sheet = widgets.ForecastWorksheet(series, interval="1h", trials=50)
    assert float(sheet.series.attrs["interval_s"]) == 3600

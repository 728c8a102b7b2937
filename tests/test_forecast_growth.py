"""Growth with its uncertainty: predict, fit_growth, carry_forward, rolling_origin, and the defaults."""

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from capnb import data, forecast
from capnb.errors import ConfigError, InputError
from capnb.plan import PlanConfig

HOURS = np.arange(24)
SHAPE = 1.0 + 0.6 * np.sin(2 * np.pi * (HOURS - 6) / 24)  # a daily cycle, mean 1


def _series(values, freq="1h"):
    times = pd.date_range("2024-05-13", periods=len(values), freq=freq)
    return xr.Dataset(
        {"qps": ("time", np.asarray(values, float))},
        coords={"time": times.values},
        attrs={"interval_s": pd.Timedelta(freq).total_seconds(), "weekday_known": "yes"},
    )


def _growing(days, *, growth=0.03, day_noise=0.05, hour_noise=0.1, seed=0):
    """Hourly rates: 100 requests/s x (1 + growth)^day x daily cycle, lognormal day and hour noise."""
    rng = np.random.default_rng(seed)
    level = 100 * (1 + growth) ** np.arange(days) * rng.lognormal(0, day_noise, days)
    values = level[:, None] * SHAPE[None, :] * rng.lognormal(0, hour_noise, (days, 24))
    return _series(values.ravel())


# -- the level and its band --------------------------------------------------------------------
def test_fit_growth_recovers_a_known_growth():
    level = forecast.fit_growth(_growing(28, growth=0.03, day_noise=0.02))
    assert float(level.trend_per_day) == pytest.approx(0.03, abs=0.003)
    # the median level of the first day ahead: 100 x 1.03^28 (the fitted line carried one day on)
    median = float(level.level_qps.sel(day_ahead=1, traffic_quantile=0.5))
    assert median == pytest.approx(100 * 1.03**28, rel=0.05)
    assert level.level_qps.attrs["units"] == "requests/s" and level.attrs["dof"] == 26


def test_band_widens_with_the_horizon_and_with_the_scatter():
    calm = forecast.fit_growth(_growing(10, day_noise=0.02), horizon_days=14)
    width = calm.level_qps.sel(traffic_quantile=0.99) / calm.level_qps.sel(traffic_quantile=0.5)
    assert (np.diff(calm.level_sd.values) > 0).all() and (np.diff(width.values) > 0).all()
    noisy = forecast.fit_growth(_growing(10, day_noise=0.2), horizon_days=14)
    assert (noisy.level_sd.values > calm.level_sd.values).all()
    # the plan follows: more scatter of the daily level, a larger P99 growth factor in every slot
    args = {"slots": "hour_of_day", "quantiles": (0.99,)}
    assert (
        forecast.predict(_growing(10, day_noise=0.2), **args).growth_factor
        > forecast.predict(_growing(10, day_noise=0.02), **args).growth_factor
    ).all()


def test_predicted_quantile_against_a_monte_carlo_of_the_model():
    # the plan is the q-quantile of shape x level: draw both by hand and compare
    series = _growing(9, day_noise=0.1)
    ahead = forecast.predict(series, quantiles=(0.5, 0.95, 0.99), horizon_days=3)
    values = series.qps.values.reshape(9, 24)
    day_mean = values.mean(axis=1)
    x = np.arange(9.0)
    slope, intercept = np.polyfit(x, np.log(day_mean), 1)
    residual = np.log(day_mean) - (intercept + slope * x)
    scatter = np.sqrt(residual @ residual / 7)
    future = np.array([9.0, 10.0, 11.0])
    sd = scatter * np.sqrt(1 + 1 / 9 + (future - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum())
    rng = np.random.default_rng(5)
    n = 400_000
    for hour in (3, 15):
        shape = values[:, hour] / day_mean
        h = rng.integers(0, 3, n)
        draws = shape[rng.integers(0, 9, n)] * np.exp(
            intercept + slope * future[h] + sd[h] * rng.standard_t(7, n)
        )
        expected = np.quantile(draws, [0.5, 0.95, 0.99])
        got = ahead.target_qps.sel(slot=hour).values
        np.testing.assert_allclose(got, expected, rtol=0.01)


def test_plans_from_the_model_cover_as_promised_where_the_model_holds():
    # 4 weeks of steady growth with day-level noise: the probabilistic P99 covers ~99 % of the next
    # week at every origin pooled; the past quantiles fall behind the growth
    series = _growing(28, growth=0.02, day_noise=0.05, hour_noise=0.1, seed=3)
    table = forecast.rolling_origin(
        series, growth_models=("none", "probabilistic"), quantiles=(0.99,)
    )
    new = float(table.pooled_coverage.sel(growth_model="probabilistic", traffic_quantile=0.99))
    old = float(table.pooled_coverage.sel(growth_model="none", traffic_quantile=0.99))
    assert 0.975 <= new <= 1.0
    assert old < 0.9


# -- rolling origins against numpy by hand -------------------------------------------------------
def test_rolling_origin_matches_a_hand_count_with_numpy():
    series = _growing(10, seed=7)
    table = forecast.rolling_origin(series, growth_models=("none", "trend"), quantiles=(0.9, 0.99))
    values = series.qps.values.reshape(10, 24)
    assert table.origin.values.tolist() == [7, 8, 9]
    assert table.scored_days.values.tolist() == [3, 2, 1]
    covered = seen = excess = hind = demand = 0.0
    for k in (7, 8, 9):
        scored = values[k:]
        plan = np.quantile(values[:k], 0.99, axis=0)  # one slot per hour: the column's quantile
        own = np.quantile(scored, 0.99, axis=0)
        coverage = np.mean(scored <= plan)
        over = np.mean(np.maximum(plan - scored, 0)) / scored.mean()
        assert float(
            table.coverage.sel(origin=k, growth_model="none", traffic_quantile=0.99)
        ) == pytest.approx(coverage)
        assert float(
            table.overprovision_fraction.sel(origin=k, growth_model="none", traffic_quantile=0.99)
        ) == pytest.approx(over)
        hindsight = np.mean(np.maximum(own - scored, 0)) / scored.mean()
        assert float(
            table.hindsight_overprovision_fraction.sel(origin=k, traffic_quantile=0.99)
        ) == pytest.approx(hindsight)
        covered += np.sum(scored <= plan)
        seen += scored.size
        excess += np.sum(np.maximum(plan - scored, 0))
        hind += np.sum(np.maximum(own - scored, 0))
        demand += scored.sum()
    pooled = table.sel(growth_model="none", traffic_quantile=0.99)
    assert float(pooled.pooled_coverage) == pytest.approx(covered / seen)
    assert float(pooled.pooled_overprovision_fraction) == pytest.approx(excess / demand)
    assert float(pooled.pooled_overprovision_ratio) == pytest.approx(excess / hind)
    # the trend method is backtest's point trend (fit_trend of the fitted days)
    trend = forecast.backtest(series.isel(time=slice(0, 240)), fit="7D", growth_model="trend")
    assert float(
        table.coverage.sel(origin=7, growth_model="trend", traffic_quantile=0.99)
    ) == float(trend.coverage.sel(plan="P99"))


def test_rolling_origin_counts_days_from_a_series_that_starts_at_nine():
    # a log that starts at 09:00 was refused ("start the series at midnight") while select and
    # backtest count their days from the first interval; now days run 09:00 to 09:00, by hand
    series = _growing(11, seed=3).isel(time=slice(9, None))  # 10 days and 15 hours
    table = forecast.rolling_origin(series, growth_models=("none",), quantiles=(0.9, 0.99))
    values = series.qps.values
    hour = (9 + np.arange(values.size)) % 24  # the hour-of-day slot of each interval
    assert table.origin.values.tolist() == [7, 8, 9, 10]
    assert table.scored_days.values.tolist() == [4, 3, 2, 1]
    for k in (7, 8, 9, 10):
        fit, scored = slice(0, 24 * k), slice(24 * k, 24 * (k + 7))
        plan = np.array([np.quantile(values[fit][hour[fit] == h], 0.99) for h in range(24)])
        demand = values[scored]
        capacity = plan[hour[scored]]
        got = table.sel(origin=k, growth_model="none", traffic_quantile=0.99)
        assert float(got.coverage) == pytest.approx(np.mean(demand <= capacity))
        assert float(got.overprovision_fraction) == pytest.approx(
            np.mean(np.maximum(capacity - demand, 0)) / demand.mean()
        )
    assert int(table.scored_intervals.sel(origin=10)) == 15  # the last day is 15 hours long


def test_results_are_deterministic():
    series = _growing(12, seed=1)
    first = forecast.rolling_origin(series, growth_models=("probabilistic",))
    assert first.identical(forecast.rolling_origin(series, growth_models=("probabilistic",)))
    assert forecast.predict(series).identical(forecast.predict(series))


# -- the defaults: backtest, target and the plan ---------------------------------------------------
def test_backtest_defaults_to_and_target_offers_the_probabilistic_plan():
    large = data.load_rate_series("servegen-m-large")
    fitted = large.isel(time=slice(0, 7 * 144))
    score = forecast.backtest(large, fit="7D")
    assert score.attrs["growth_model"] == "probabilistic"
    ahead = forecast.predict(fitted, quantiles=(0.5, 0.95, 0.99), horizon_days=7)
    scored = large.isel(time=slice(7 * 144, None)).qps.values
    plan = ahead.target_qps.sel(traffic_quantile=0.99).values[np.arange(7 * 144) // 6 % 24]
    assert float(score.coverage.sel(plan="P99")) == pytest.approx(np.mean(scored <= plan))

    plan = forecast.target(large, trials=50, seed=1, growth_model="probabilistic")
    expected = forecast.predict(large, quantiles=(0.99,)).target_qps[:, 0]
    np.testing.assert_allclose(plan.target_qps.sel(traffic_quantile=0.99), expected, rtol=1e-9)
    assert plan.attrs["growth_model"].startswith("probabilistic: ")
    assert "coming days" in forecast.describe(plan)
    old = forecast.target(large, trials=50, seed=1, growth_model="none")
    base = forecast.fit_baseline(large)
    np.testing.assert_array_equal(old.target_qps, base.target_qps)


def test_a_flat_series_is_planned_at_its_rate_and_covered():
    # a series of mine at 50 requests/s every hour for 21 days: the level has no scatter, so
    # predict divided 0 by 0 (hundreds of RuntimeWarnings from backtest) and planned 50 - 7e-15,
    # which backtest scored as covering 0 % of the days after, at P50, P95 and P99 alike
    flat = _series(np.full(21 * 24, 50.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ahead = forecast.predict(flat)
        scored = forecast.backtest(flat)
    np.testing.assert_allclose(ahead.target_qps.values, 50.0, rtol=1e-12)
    assert scored.coverage.values.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_a_history_shorter_than_a_week_is_planned_as_it_is():
    short = _growing(5)
    plan = forecast.target(short, trials=20, growth_model="probabilistic")
    assert plan.attrs["growth_model"].startswith("none: fewer than 7 days")
    np.testing.assert_array_equal(plan.target_qps, forecast.fit_baseline(short).target_qps)


def test_the_plan_config_carries_the_setting(tmp_path):
    assert PlanConfig().traffic.growth_model == "auto"  # chosen by rolling origins in the history
    for kind in ("probabilistic", "none"):
        assert PlanConfig().replace(traffic={"growth_model": kind}).traffic.growth_model == kind
    with pytest.raises(ConfigError, match="growth_model"):
        PlanConfig().replace(traffic={"growth_model": "trend"})
    from capnb.plan import save_config

    text = save_config(PlanConfig(), tmp_path / "plan.toml").read_text()
    assert "# auto: the forecast chosen by rolling origins inside the history" in text
    assert 'growth_model = "auto"' in text


# -- bad inputs name their argument -------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda s: forecast.predict(s, horizon_days=0), "horizon_days"),
        (lambda s: forecast.fit_growth(s, horizon_days=1.5), "horizon_days"),
        (lambda s: forecast.predict(s, quantiles=(1.2,)), "quantiles"),
        (lambda s: forecast.carry_forward(s, quantile=0), "quantile"),
        (lambda s: forecast.backtest(s, growth_model="guess"), "growth_model"),
        (lambda s: forecast.backtest(s, trend_per_day=0.01), "trend_per_day"),
        (lambda s: forecast.target(s, trials=10, growth_model="trend"), "growth_model"),
        (lambda s: forecast.target(s, trials=10, days_ahead=3), "days_ahead"),
        (lambda s: forecast.target(s, trials=10, horizon_days=0), "horizon_days"),
        (lambda s: forecast.rolling_origin(s, growth_models=("none", "none")), "growth_models"),
        (lambda s: forecast.rolling_origin(s, growth_models=("magic",)), "growth_models"),
        (lambda s: forecast.rolling_origin(s, min_fit_days=3), "min_fit_days"),
        (lambda s: forecast.rolling_origin(s, min_fit_days=20), "min_fit_days"),
        (lambda s: forecast.predict(s.isel(time=slice(0, 24 * 5))), "at least 7 days"),
    ],
)
def test_bad_inputs_name_the_argument(call, argument):
    with pytest.raises(InputError, match=argument):
        call(_growing(12))


def test_observed_days_counts_a_day_of_zeros_and_refuses_what_is_not_a_series():
    # a 12-day history with one day at 0 requests/s was "0 days observed" (the level fit's own
    # error swallowed), so the probabilistic forecast said "fewer than 7 days observed" and
    # planned on the history as it was; a pandas Series or a list was 0 days, or AttributeError
    history = _growing(12)
    history["qps"][24 * 3 : 24 * 4] = 0.0
    assert forecast.observed_days(history) == 12
    with pytest.raises(InputError, match="a day with a mean rate of 0"):
        forecast.target(history, trials=20, growth_model="probabilistic")
    for wrong in (history["qps"].to_series(), list(history["qps"].values), None):
        with pytest.raises(InputError, match="series must be a Dataset over 'time' with 'qps'"):
            forecast.observed_days(wrong)
    assert forecast.observed_days(_series(np.ones(7 * 24 * 6), freq="7min")) == 0


def test_a_series_in_another_unit_is_refused_not_read_as_requests_per_second():
    # a rate series whose qps said requests/min was planned as requests/s, and the target it
    # returned said requests/s
    history = _growing(12)
    history["qps"].attrs["units"] = "requests/min"
    for call in (forecast.fit_baseline, forecast.carry_forward, forecast.observed_days):
        with pytest.raises(InputError, match=r"series\.qps: its units attr 'requests/min' is not "):
            call(history)
    history["qps"].attrs["units"] = "requests / second"
    assert forecast.observed_days(history) == 12

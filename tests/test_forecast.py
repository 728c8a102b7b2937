"""The forecast step: resampling, slot baselines, shortfall, boundaries, bursts, Monte Carlo, backtest."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from benchmarks.reference.forecast import expected_month_mean
from capnb import data, forecast
from capnb.errors import InputError


@pytest.fixture(scope="module")
def large():
    return data.load_rate_series("servegen-m-large")


@pytest.fixture(scope="module")
def conv():
    return data.load_trace("azure-conv-2023")


def _series(values, start="2024-05-13", freq="10min", **attrs):
    times = pd.date_range(start, periods=len(values), freq=freq)
    step = pd.Timedelta(freq).total_seconds()
    return xr.Dataset(
        {"qps": ("time", np.asarray(values, float))},
        coords={"time": times.values},
        attrs={"interval_s": step, "weekday_known": "yes", **attrs},
    )


# -- resampling against pandas on the real traces -------------------------------------------
@pytest.mark.parametrize("interval", ["1s", "1min", "5min"])
def test_resample_matches_pandas_on_the_conversation_trace(conv, interval):
    series = forecast.resample(conv, interval)
    frame = pd.DataFrame(
        {"n": 1, "p": conv.prompt_tokens.values, "o": conv.output_tokens.values},
        index=pd.DatetimeIndex(conv.time.values),
    )
    by_pandas = frame.resample(interval).sum()
    inside = series.qps.notnull().values
    got = series.to_dataframe()
    np.testing.assert_array_equal(got.requests.values[inside], by_pandas.n.values[inside])
    np.testing.assert_array_equal(got.prompt_tokens.values[inside], by_pandas.p.values[inside])
    np.testing.assert_array_equal(got.output_tokens.values[inside], by_pandas.o.values[inside])
    seconds = pd.Timedelta(interval).total_seconds()
    middle = slice(1, -1)  # edge intervals are scaled by the part observed
    np.testing.assert_allclose(
        got.qps.values[middle], by_pandas.n.values[middle] / seconds, rtol=1e-12
    )
    assert series.qps.attrs["units"] == "requests/s" and series.attrs["interval_s"] == seconds


def test_an_interval_in_words_is_the_same_interval_as_in_short():
    # resample(interval='60 seconds') and '1 minute' were "not a duration" while '1min', '60s',
    # '5 mins' and '1.5 hours' passed (and simulate(step_s='60 seconds') reads 60 s)
    from capnb.data._series import interval_seconds

    for words, short in (("60 seconds", "60s"), ("1 minute", "1min"), ("2 minutes", "2min"),
                         ("1 second", "1s"), ("1.5 hours", "1.5h")):  # fmt: skip
        assert interval_seconds(words) == interval_seconds(short)


def test_a_custom_slots_label_names_its_length_in_any_unit_and_refuses_one_that_is_not():
    # slot_label(3, 'custom', slot_s='nan s') raised "ValueError: cannot convert float NaN to
    # integer" (no argument named) and slot_s='-30 min' said "slot 3 (-1800 s each)"
    assert forecast.slot_label(3, "custom", slot_s="30 min") == "slot 3 (30 min each)"
    assert forecast.slot_label(3, "custom", slot_s=1800) == "slot 3 (30 min each)"
    for slot_s in ("nan s", "-30 min", 0, float("inf")):
        with pytest.raises(InputError, match=r"^slot_s must be a finite number of seconds > 0"):
            forecast.slot_label(3, "custom", slot_s=slot_s)


def test_an_interval_in_any_word_the_unit_boundary_reads_is_the_same_interval():
    # be2de3f added 'second(s)' and 'minute(s)', yet '2 hrs', '1 hr', '500 milliseconds' and
    # '1 msec' were still "not a duration" while simulate(step_s='2 hrs') reads 7200 s
    from capnb.data._series import interval_seconds
    from capnb.units import in_unit

    for text in ("2 hrs", "1 hr", "500 milliseconds", "500 millisecond", "1 msec", "30 secs"):
        assert interval_seconds(text) == pytest.approx(in_unit(text, "s", "step_s"))


def test_resample_of_a_rate_series_is_the_mean_of_its_windows(large):
    hourly = forecast.resample(large, "1h")
    by_pandas = large.qps.to_series().resample("1h").mean()
    np.testing.assert_allclose(hourly.qps.values, by_pandas.values, rtol=1e-12)
    with pytest.raises(InputError, match="whole multiple"):
        forecast.resample(large, "15min")


def test_a_rate_series_without_its_interval_is_an_error_that_says_how_to_give_it():
    # a rate series built by hand (time, qps) without attrs["interval_s"]: resample said
    # "series has no 'interval_s' attr: build it with capnb.forecast.resample", the call itself
    times = pd.date_range("2026-03-04", periods=120, freq="1min")
    mine = xr.Dataset({"qps": ("time", np.full(120, 5.0))}, coords={"time": times})
    with pytest.raises(InputError) as raised:
        forecast.resample(mine, "10min")
    said = str(raised.value)
    assert "build it with capnb.forecast.resample" not in said, said
    assert "series.attrs['interval_s']" in said and "= 60" in said, said
    given = forecast.resample(mine.assign_attrs(interval_s=60), "10min")
    assert given.qps.values.tolist() == [5.0] * 12


def test_a_series_without_its_interval_and_with_times_not_dates_is_an_input_error():
    # the hint for the missing interval_s parsed the time coordinate as dates, so times that are
    # not dates (text labels) ended in numpy's 'Error parsing datetime string' instead
    mine = xr.Dataset(
        {"qps": ("time", np.ones(3), {"units": "requests/s"})},
        coords={"time": np.array(["a", "b", "c"])},
    )
    with pytest.raises(InputError, match=r"series.attrs\['interval_s'\] is missing"):
        forecast.fit_baseline(mine)


def test_slot_codes_count_from_monday_midnight():
    times = np.array(["2024-05-13T00:00", "2024-05-13T23:59", "2024-05-19T23:00"], "datetime64[ns]")
    assert forecast.slot_codes(times, "hour_of_week").tolist() == [0, 23, 167]
    assert forecast.slot_codes(times, "hour_of_day").tolist() == [0, 23, 23]
    assert forecast.slot_codes(times, ("30min", "1D")).tolist() == [0, 47, 46]
    with pytest.raises(InputError, match="whole number of slots"):
        forecast.slots(("7min", "1h"))


# -- slot baselines ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["servegen-m-large", "servegen-m-small"])
def test_slot_quantiles_match_pandas_on_servegen(name):
    series = data.load_rate_series(name)
    base = forecast.fit_baseline(series, quantiles=(0.5, 0.95, 0.99))
    frame = series.qps.to_dataframe()
    grouped = frame.qps.groupby(frame.index.hour)
    expected = grouped.quantile([0.5, 0.95, 0.99]).unstack()
    np.testing.assert_allclose(base.target_qps.values, expected.values, rtol=1e-12)
    np.testing.assert_allclose(base.mean_qps.values, grouped.mean().values, rtol=1e-12)
    assert base.intervals.values.tolist() == grouped.count().values.tolist()
    days_seen = (
        frame.qps.dropna()
        .groupby(frame.dropna().index.hour)
        .apply(lambda x: x.index.normalize().nunique())
    )
    assert base.periods.values.tolist() == days_seen.values.tolist()
    assert min(days_seen) >= 13  # m-small's holes take one day out of a few slots
    assert base.target_qps.attrs["units"] == "requests/s"


def test_slot_quantiles_match_numpy_on_the_azure_trace_per_second(conv):
    series = forecast.resample(conv, "1s")
    base = forecast.fit_baseline(series, slots=("1min", "1h"), quantiles=(0.5, 0.99))
    qps = series.qps.values
    minute = (series.time.dt.minute).values
    for m in (0, 17, 59):
        values = qps[(minute == m) & ~np.isnan(qps)]
        np.testing.assert_allclose(
            base.target_qps.sel(slot=m).values, np.quantile(values, [0.5, 0.99])
        )


def test_mean_plan_shortfall_on_a_worked_example():
    # two days of hourly data: slot h carries h + 1 requests/s, slot 23 doubles on day 2
    day = np.arange(1.0, 25.0)
    values = np.concatenate([day, day * np.r_[np.ones(23), 2.0]])
    base = forecast.fit_baseline(_series(values, freq="1h"), quantiles=(0.5, 0.99))
    mean = values.mean()
    assert float(base.mean_plan_qps[0]) == pytest.approx(mean)
    top = 24 + 0.99 * 24  # slot 23: 24 and 48, linear quantile
    assert float(base.target_qps.sel(slot=23, traffic_quantile=0.99)) == pytest.approx(top)
    assert float(base.shortfall_fraction.sel(slot=23, traffic_quantile=0.99)) == pytest.approx(
        1 - mean / top
    )
    assert float(base.shortfall_qps.sel(slot=0, traffic_quantile=0.99)) == 0.0  # the mean covers it
    assert float(base.overall_underprovisioned_share) == pytest.approx(np.mean(values > mean))
    assert float(base.peak_to_trough) == pytest.approx(36 / 1)
    slot_plan = forecast.fit_baseline(_series(values, freq="1h"), mean_plan="slot")
    assert float(slot_plan.mean_plan_qps.sel(slot=23)) == pytest.approx(36)


def test_boundaries_are_stated_not_hidden(conv):
    short = forecast.fit_baseline(forecast.resample(conv, "1min"))
    assert short.attrs["enough_history"] == "no"
    assert "Too little history" in short.attrs["boundaries"]
    assert "Too little history" in forecast.describe(short)
    rng = np.random.default_rng(0)
    flat = forecast.fit_baseline(_series(100 + rng.uniform(-2, 2, 144 * 3)))
    assert flat.attrs["flat"] == "yes" and "the mean suffices" in flat.attrs["boundaries"]


def test_hour_of_week_needs_a_known_weekday(large):
    with pytest.raises(InputError, match="weekday .*not known"):
        forecast.fit_baseline(large, slots="hour_of_week")
    with pytest.raises(InputError, match="does not divide"):
        forecast.fit_baseline(large, slots=("5min", "1D"))
    with pytest.raises(InputError, match="strictly between 0 and 1"):
        forecast.fit_baseline(large, quantiles=(0.5, 1.0))


def test_baselines_run_on_dask_chunks_unchanged(large, dask_client):
    stacked = xr.concat([large, large * 2], dim="trace").assign_attrs(large.attrs)
    lazy = forecast.fit_baseline(stacked.chunk({"trace": 1}))
    eager = forecast.fit_baseline(stacked)
    np.testing.assert_allclose(lazy.target_qps.values, eager.target_qps.values)
    np.testing.assert_allclose(eager.target_qps.isel(trace=1), 2 * eager.target_qps.isel(trace=0))


# -- bursts -------------------------------------------------------------------------------------
def test_detect_bursts_finds_an_injected_burst():
    rng = np.random.default_rng(1)
    hours = np.arange(24 * 6 * 7) / 6
    values = 100 * (1.5 + np.sin(2 * np.pi * hours / 24)) * rng.lognormal(0, 0.05, hours.size)
    values[300:309] *= 4  # 90 minutes at 4x on day 3
    series = _series(values)
    found = forecast.detect_bursts(series, factor=2.0, min_duration="30min")
    assert found.sizes["burst"] == 1
    assert float(found.duration_s[0]) == 5400
    assert 3.5 < float(found.multiplier[0]) < 4.6
    assert found.in_burst.values.sum() == 9
    model = forecast.fit_burst_model(found)
    assert model.rate_per_month == pytest.approx(30 / 7)
    assert model.duration_s == (5400.0, 5400.0)
    assert "1 burst in 7.0 days" in model.source


def test_a_missing_interval_inside_a_burst_does_not_split_it():
    # a series of mine with 20 % of intervals missing: three planted 2-hour 5x bursts were found as
    # four of 30-110 min, fitted as 7.21 bursts a month where 3 in 16.6 observed days are 5.4
    rng = np.random.default_rng(1)
    hours = np.arange(24 * 6 * 7) / 6
    values = 100 * (1.5 + np.sin(2 * np.pi * hours / 24)) * rng.lognormal(0, 0.05, hours.size)
    values[300:312] *= 5  # 2 hours at 5x on day 3
    values[[304, 305]] = np.nan  # 20 minutes of it not logged
    values[600:602] = np.nan  # a hole outside any burst stays outside
    found = forecast.detect_bursts(_series(values), factor=2.0, min_duration="30min")
    assert found.sizes["burst"] == 1
    assert float(found.duration_s[0]) == 7200
    assert found.in_burst.values.sum() == 12 and not found.in_burst.values[600:602].any()
    assert 4.5 < float(found.multiplier[0]) < 5.8  # over its observed intervals, not NaN
    # a hole longer than the shortest burst is not bridged: what it held is unknown
    values[303:308] = np.nan  # 50 minutes
    found = forecast.detect_bursts(_series(values), factor=2.0, min_duration="30min")
    assert found.duration_s.values.tolist() == [1800.0, 2400.0]  # either side of the hole


def test_fitted_bursts_recover_their_planted_size_and_simulate_as_planted():
    # a 2-hour 6x burst under log-normal noise fitted as 11.8x: the burst's size was its loudest
    # interval over the slot median, and the Monte Carlo then put its own noise on top of that
    rng = np.random.default_rng(0)
    per_day = 288  # 5-minute intervals, 28 days, noise of sigma 0.3 (as simulate draws it)
    hours = np.arange(per_day * 28) / 12
    values = 100 * (1.5 + np.sin(2 * np.pi * hours / 24)) * rng.lognormal(0, 0.3, hours.size)
    for day, hour in ((3, 10), (9, 15), (16, 20), (23, 13)):
        start = per_day * day + 12 * hour
        values[start : start + 24] *= 5  # 2 hours at 5x
    series = _series(values, freq="5min")
    baseline = forecast.fit_baseline(series)
    found = forecast.detect_bursts(series, baseline)
    assert found.sizes["burst"] == 4
    # each burst's mean factor on the baseline: within 25 % of 5, their mean within 10 %
    assert np.all(np.abs(found.multiplier.values / 5 - 1) < 0.25)
    assert abs(found.multiplier.values.mean() / 5 - 1) < 0.10
    assert np.all(found.peak_multiplier.values > found.multiplier.values)  # noise of the loudest
    model = forecast.fit_burst_model(found)
    assert model.duration_s[1] == 7200.0 and model.duration_s[0] >= 6600.0
    planted = forecast.BurstModel(4 * 30 / 28, (7200.0, 7200.0), (5.0, 5.0), source="planted")
    fitted, truth = (
        forecast.simulate(series, baseline, m, trials=2000, exclude=found) for m in (model, planted)
    )
    # the fitted model simulates the months the planted one does: the required capacity within 10 %
    assert float(fitted.required_qps) == pytest.approx(float(truth.required_qps), rel=0.10)


def test_a_burst_model_of_no_bursts_describes_none():
    # bursts = "none" read "With 0 bursts a month (Poisson), each 1-2 h long at 3-5x the baseline"
    none = forecast.BurstModel(rate_per_month=0.0, source="none planned: bursts = 'none'")
    assert none.describe() == "no bursts (none planned: bursts = 'none')"
    assert "x the baseline" in forecast.BurstModel(rate_per_month=0.5).describe()


def test_a_burst_model_set_by_hand_is_not_called_the_articles_default():
    # BurstModel(rate_per_month=0.0) described itself as "no bursts (the article's default)" and
    # BurstModel(rate_per_month=1000, multiplier=(3, 3)) as "1e+03 bursts a month ... at 3x the
    # baseline (the article's default)": the article's model is 1.5 a month, 1-2 h, 3-5x
    assert forecast.BurstModel(rate_per_month=0.0).describe() == "no bursts (set by hand)"
    hand = forecast.BurstModel(rate_per_month=1000, multiplier=(3, 3))
    assert hand.source == "set by hand" and "article" not in hand.describe()
    assert forecast.BurstModel(1.5, (3600, 7200), (3, 5)) == forecast.BurstModel()
    assert forecast.BurstModel().source == "the article's default"
    assert forecast.BurstModel(2.0, source="fitted").source == "fitted"


def test_a_burst_model_spanning_minutes_to_hours_names_both_units():
    # a ServeGen m-large client (chunk 20, 14 days) fits bursts of 30 min to 7 h: the words said
    # "each 30-7 h long", as if they were 30 to 7 hours
    model = forecast.BurstModel(duration_s=(1800.0, 25200.0), multiplier=(1.0, 38.4))
    assert "each 30 min-7 h long" in model.describe()
    assert "each 30 min-1.5 h long" in forecast.BurstModel(duration_s=(1800.0, 5400.0)).describe()
    assert "each 30-45 min long" in forecast.BurstModel(duration_s=(1800.0, 2700.0)).describe()
    assert "each 1-2 h long" in forecast.BurstModel().describe()


def test_burst_model_checks_its_numbers():
    assert "1.5 bursts a month" in forecast.BurstModel().describe()
    with pytest.raises(InputError, match="multiplier"):
        forecast.BurstModel(multiplier=(0.5, 2))
    with pytest.raises(InputError, match="duration_s: low"):
        forecast.BurstModel(duration_s=(7200, 3600))
    with pytest.raises(InputError, match="rate_per_month"):
        forecast.BurstModel(rate_per_month=-1)


# -- Monte Carlo --------------------------------------------------------------------------------
def test_simulate_is_reproducible_per_seed_and_chunking(large):
    base = forecast.fit_baseline(large)
    a = forecast.simulate(large, base, trials=300, seed=7)
    b = forecast.simulate(large, base, trials=300, seed=7, chunks=70)
    c = forecast.simulate(large, base, trials=300, seed=8)
    xr.testing.assert_identical(a, b)
    assert not np.array_equal(a.monthly_peak_qps.values, c.monthly_peak_qps.values)


def test_simulate_on_a_dask_cluster_gives_the_same_months(large, dask_client):
    base = forecast.fit_baseline(large)
    local = forecast.simulate(large, base, trials=200, seed=3)
    spread = forecast.simulate(large, base, trials=200, seed=3, chunks=50)
    np.testing.assert_array_equal(local.monthly_peak_qps.values, spread.monthly_peak_qps.values)


def test_simulated_mean_matches_the_analytic_mean_on_servegen(large):
    base = forecast.fit_baseline(large)
    model = forecast.BurstModel(rate_per_month=4.0, duration_s=(1800, 10800), multiplier=(2, 6))
    run = forecast.simulate(large, base, model, trials=2000, seed=11)
    inputs = forecast.month_inputs(large, base)
    expected = expected_month_mean(
        inputs.base, inputs.noise, inputs.noise_block, 4.0, 30.0, 180.0, 2.0, 6.0,
        inputs.pool_start, inputs.pool_size,
    )  # fmt: skip
    means = run.mean_qps.values
    assert abs(means.mean() - expected) < 4 * means.std(ddof=1) / np.sqrt(means.size)


def test_exceedance_curve_and_buffer_are_consistent(large):
    base = forecast.fit_baseline(large)
    run = forecast.simulate(large, base, trials=1000, seed=5, exceed_probability=0.1)
    peaks = run.monthly_peak_qps.values
    required = float(run.required_qps)
    assert np.mean(peaks > required) <= 0.1 < np.mean(peaks >= required) + 0.1
    assert float(run.buffer_qps) == pytest.approx(required - run.attrs["fixed_plan_qps"])
    curve = run.exceed_probability.values
    assert (np.diff(curve) <= 0).all() and (np.diff(run.minutes_above.values) <= 0).all()
    # a level is exceeded in a month exactly when the month's peak is above it
    np.testing.assert_allclose(curve, [np.mean(peaks > c) for c in run.capacity_qps.values])
    fixed = run.attrs["fixed_plan_qps"]
    assert np.isclose(run.capacity_qps.values, fixed).any()  # the fixed plan is on the grid


def test_simulate_without_bursts_never_exceeds_the_largest_demand(large):
    base = forecast.fit_baseline(large)
    calm = forecast.BurstModel(rate_per_month=0.0)
    run = forecast.simulate(large, base, calm, trials=200, seed=1, exclude=None)
    inputs = forecast.month_inputs(large, base, exclude=None)
    assert run.monthly_peak_qps.max() <= inputs.base.max() * inputs.noise.max() * (1 + 1e-12)


def test_simulate_rejects_bad_settings(large, conv):
    base = forecast.fit_baseline(large)
    with pytest.raises(InputError, match="seed"):
        forecast.simulate(large, base, seed=-1)
    with pytest.raises(InputError, match="evenly spaced"):
        forecast.simulate(large, base, trials=10, capacity_qps=[0, 1, 3])
    # a negative capacity level was taken, its exceedance probability 1 on the curve
    with pytest.raises(InputError, match=r"capacity_qps.*-1.*>= 0"):
        forecast.simulate(large, base, trials=10, capacity_qps=[-1, 5])
    with pytest.raises(InputError, match="plan_quantile"):
        forecast.simulate(large, base, trials=10, plan_quantile=0.9)
    seconds = forecast.resample(conv, "1s")
    with pytest.raises(InputError, match="per minute"):
        forecast.simulate(seconds, forecast.fit_baseline(seconds), trials=10)


# -- forward: projection, trend, backtest, target --------------------------------------------------
def test_project_scales_rates_not_shares(large):
    base = forecast.fit_baseline(large)
    ahead = forecast.project(base, growth=1.1, trend_per_day=0.01, days_ahead=30)
    factor = 1.1 * 1.01**30
    np.testing.assert_allclose(ahead.target_qps, base.target_qps * factor)
    np.testing.assert_allclose(ahead.shortfall_fraction, base.shortfall_fraction)
    with pytest.raises(InputError, match="growth"):
        forecast.project(base, growth=0)


def test_fit_trend_recovers_a_known_growth():
    rng = np.random.default_rng(2)
    days = np.arange(14 * 144) / 144
    values = 200 * 1.02**days * (1.3 + np.sin(2 * np.pi * days)) * rng.lognormal(0, 0.05, days.size)
    fit = forecast.fit_trend(_series(values))
    assert float(fit.trend_per_day) == pytest.approx(0.02, abs=0.004)
    with pytest.raises(InputError, match="at least 7 days"):
        forecast.fit_trend(_series(values[: 144 * 3]))


def test_backtest_on_servegen_week_two(large):
    score = forecast.backtest(large, fit="7D")
    coverage = score.coverage.to_series()
    assert coverage["P99"] >= coverage["P95"] >= coverage["P50"]
    assert coverage["P99"] > coverage["mean"] + 0.2  # percentile planning covers far more
    over = score.overprovision_fraction.to_series()
    assert over["P99"] > over["mean"]  # and pays for it in idle capacity
    assert "first 7 d" in score.attrs["fitted"]
    with pytest.raises(InputError, match="nothing is left to score"):
        forecast.backtest(large, fit="14D")


def test_target_is_what_the_capacity_step_takes(large):
    plan = forecast.target(large, trials=300, seed=4)
    assert plan.target_qps.dims == ("slot", "traffic_quantile")
    assert plan.exceed_probability.dims == ("capacity_qps",)
    assert plan.buffer_qps.attrs["units"] == "requests/s"
    text = forecast.describe(plan)
    assert f"{float(plan.buffer_qps):,.0f} requests/s" in text
    assert "the article's default" in text
    grown = forecast.target(large, trials=300, seed=4, growth=2.0)
    np.testing.assert_allclose(grown.target_qps, 2 * plan.target_qps)
    fitted = forecast.target(large, trials=100, bursts="fitted")
    assert "fitted" in fitted.attrs["burst_model"]


def test_backtest_can_carry_plans_forward_by_a_trend():
    small = data.load_rate_series("servegen-m-small")
    # the history's quantiles carried by a point trend (growth_model="none", no longer the default)
    flat = forecast.backtest(small, fit="7D", growth_model="none")
    carried = forecast.backtest(small, fit="7D", growth_model="none", trend_per_day="fit")
    assert float(carried.coverage.sel(plan="P99")) > float(flat.coverage.sel(plan="P99"))
    doubled = forecast.backtest(small, fit="7D", growth_model="none", growth=2.0)
    assert float(doubled.coverage.sel(plan="mean")) > float(flat.coverage.sel(plan="mean"))
    with pytest.raises(InputError, match="'fit'"):
        forecast.backtest(small, growth_model="none", trend_per_day="guess")


def test_only_periods_longer_than_a_day_need_the_weekday():
    assert not forecast.slots(("30min", "12h")).needs_weekday
    assert not forecast.slots("hour_of_day").needs_weekday
    assert forecast.slots("hour_of_week").needs_weekday
    assert forecast.slots(("1h", "2D")).needs_weekday


def test_a_quiet_logs_empty_stretches_are_idle_not_holes():
    # a Poisson log at 0.003 requests/s: empty 15-minute stretches are common (6.7 % each), and
    # are idle time at that rate, not holes in the log
    rng = np.random.default_rng(5)
    seconds = np.sort(rng.uniform(0, 3 * 86400, rng.poisson(0.003 * 3 * 86400)))
    times = np.datetime64("2024-05-13T00:00", "ns") + (seconds * 1e9).astype("timedelta64[ns]")
    log = xr.Dataset(coords={"time": ("request", times)})
    series = forecast.resample(log, "1min")
    assert series.attrs["missing_intervals"] < 0.01 * series.sizes["time"]
    assert float(series.qps.mean()) == pytest.approx(0.003, rel=0.1)
    assert "are idle, not holes" in series.attrs["notes"]
    strict = forecast.resample(log, "1min", gap=None)  # every empty interval a real zero
    assert strict.attrs["missing_intervals"] <= 2  # the edges


def test_an_idle_night_counted_per_second_is_idle_whatever_the_last_requests_gap():
    # a log at 4 requests/s from 06:00 to midnight, idle every night, a 2-hour outage at noon: per
    # second, the night whose last request came 2.75 s before midnight (its empty run starting at
    # 23:59:58 and ending at 06:00:01) was a hole, 21,603 s missing, and resample_demand refused
    # the log, as the other days' requests in those 3 s at the run's edges made it "improbable";
    # per minute every night was idle
    day = np.arange(6 * 3600 + 0.125, 86400, 0.25)
    seconds = np.concatenate([d * 86400 + day for d in range(4)])
    cut = (seconds > 86400 + 86400 - 2.75) & (seconds < 2 * 86400 + 6 * 3600 + 1)
    outage = (seconds >= 2 * 86400 + 12 * 3600) & (seconds < 2 * 86400 + 14 * 3600)
    seconds = seconds[~cut & ~outage]
    times = np.datetime64("2024-05-06T00:00", "ns") + (seconds * 1e9).astype("timedelta64[ns]")
    log = xr.Dataset(coords={"time": ("request", times)})
    for interval in ("1s", "1min"):
        series = forecast.resample(log, interval)
        missing = series.time.values[np.isnan(series.qps.values)]
        assert missing.min() == np.datetime64("2024-05-08T12:00"), interval
        assert missing.max() < np.datetime64("2024-05-08T14:00"), interval


def test_the_answer_names_the_clock_its_hours_are_on(tmp_path):
    # a series at 5-min windows over 3 days, busiest at 06:00 UTC: the answer's hours say "UTC",
    # and on Berlin's clock the same windows are two hours later (summer time, May)
    times = pd.date_range("2024-05-06", periods=3 * 288, freq="5min", tz="UTC")
    rates = 20 + 10 * np.sin(2 * np.pi * (np.arange(times.size) / 288 - 0.0))
    path = tmp_path / "utc.csv"
    pd.DataFrame({"time": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "qps": rates}).to_csv(
        path, index=False
    )
    utc = forecast.fit_baseline(forecast.resample(data.load_traffic(path), "10min"))
    assert "(06:00-07:00 UTC)" in forecast.describe(utc)
    berlin = data.load_traffic(path, timezone="Europe/Berlin")
    assert "(08:00-09:00 Europe/Berlin)" in forecast.describe(
        forecast.fit_baseline(forecast.resample(berlin, "10min"))
    )
    # a clock the trace does not say: the hours stand alone
    unknown = forecast.fit_baseline(
        forecast.resample(data.load_rate_series("servegen-m-small"), "10min")
    )
    assert " UTC" not in forecast.describe(unknown) and "unknown" not in forecast.describe(unknown)


def test_a_service_idle_at_night_is_described_without_an_infinite_ratio():
    # two weeks of hourly rates, idle 01:00-05:00: the quietest slot's mean is 0
    day = np.where((np.arange(24) >= 1) & (np.arange(24) < 5), 0.0, 5.0 + np.arange(24))
    base = forecast.fit_baseline(_series(np.tile(day, 14), freq="1h"))
    assert np.isinf(float(base.peak_to_trough))
    text = forecast.describe(base)
    assert "the quietest slot has no traffic at all." in text and "infx" not in text


def test_numbers_for_times_are_refused_not_read_as_nanoseconds():
    # a request log built by hand with times in seconds (0.0, 1.0, ...) was read as nanoseconds:
    # "interval 1 min is longer than the trace (3.599e-06 s from first to last)"; a rate series
    # over numeric times was planned on hours of the day of 1970-01-01 00:00:00.000
    seconds = np.arange(7200, dtype=float)
    log = xr.Dataset({"time": ("request", seconds), "prompt_tokens": ("request", np.ones(7200)),
                      "output_tokens": ("request", np.ones(7200))})  # fmt: skip
    with pytest.raises(InputError, match=r"trace\.time holds numbers \(float64\), not dates"):
        forecast.resample(log, "1min")
    series = xr.Dataset({"qps": ("time", np.ones(2016))}, coords={"time": np.arange(2016) * 600},
                        attrs={"interval_s": 600.0})  # fmt: skip
    for call in (
        forecast.fit_baseline,
        forecast.observed_days,
        lambda s: forecast.resample(s, "1h"),
    ):
        with pytest.raises(
            InputError, match=r"\.time holds numbers \(int64\), not dates and times"
        ):
            call(series)


def test_level_pools_draw_a_busy_hours_noise_at_its_level_and_one_pool_is_the_default():
    # 14 days per minute: noon to 14:00 a steady 10 requests/s, the other hours about 1 with wide
    # noise. With one pool (the default) a busy minute draws the quiet hours' ratios (up to 5.4x
    # here) and the months' peaks read 37-54 requests/s; with level pools its own level's, 10
    rng = np.random.default_rng(4)
    minutes = np.arange(14 * 1440)
    busy = (minutes // 60) % 24 // 2 == 6
    values = np.where(busy, 10.0, rng.lognormal(0, 0.5, minutes.size) / np.exp(0.125))
    series = _series(values, freq="1min")
    base = forecast.fit_baseline(series, slots="hour_of_day")
    none = forecast.BurstModel(rate_per_month=0.0)
    pooled = forecast.simulate(series, base, none, trials=50, seed=1, exclude=None)
    assert pooled.attrs["noise_pool_min"] == "all"
    assert float(pooled.monthly_peak_qps.min()) > 30.0
    run = forecast.simulate(series, base, none, trials=50, seed=1, exclude=None, noise_pool_min=200)
    quiet = values[~busy].reshape(-1, 60).mean(axis=1).max()  # no quiet hour's mean is near 10
    assert float(run.monthly_peak_qps.max()) == pytest.approx(10.0) and quiet < 2
    assert run.attrs["noise_pool_min"] == 200


def test_level_pools_truncate_the_tail_where_every_hour_has_the_same_noise():
    # why one pool is the default (a pass's finding): with the same lognormal noise in every hour,
    # a month's peak is about the largest residual its busiest hour draws, and a pool of one
    # hour's 840 residuals has a shorter tail than all 20,160: required_qps 11 % lower
    rng = np.random.default_rng(5)
    minutes = np.arange(14 * 1440)
    shape = 5 + 3 * np.sin(2 * np.pi * minutes / 1440)
    series = _series(shape * rng.lognormal(0, 0.3, minutes.size), freq="1min")
    base = forecast.fit_baseline(series, slots="hour_of_day")
    none = forecast.BurstModel(rate_per_month=0.0)
    one = forecast.simulate(series, base, none, trials=200, seed=0, exclude=None)
    level = forecast.simulate(series, base, none, trials=200, seed=0, exclude=None,
                              noise_pool_min=200)  # fmt: skip
    assert float(level.required_qps) < 0.95 * float(one.required_qps)
    assert "shorter tail" in forecast.noise_pools.__doc__


@pytest.mark.parametrize("fewest", [1, 3, 7, 50])
def test_each_slots_noise_range_holds_its_own_residuals_and_at_least_the_fewest(fewest):
    rng = np.random.default_rng(fewest)
    slot_mean = np.array([0.0, 1.0, 1.0, 2.0, 5.0, 9.0])  # slot 0 idle: no residual of its own
    per_slot = rng.integers(0, 6, slot_mean.size)
    per_slot[0] = 0
    level = np.repeat(slot_mean, per_slot)
    order, start, size = forecast.noise_pools(level, slot_mean, fewest)
    ranked = level[order]
    for s, m in enumerate(slot_mean):
        picked = ranked[start[s] : start[s] + size[s]]
        assert picked.size == max(min(fewest, level.size), np.count_nonzero(level == m))
        assert np.count_nonzero(picked == m) == np.count_nonzero(level == m)
    assert np.array_equal(np.sort(order), np.arange(level.size))


def test_a_level_shift_is_no_burst_and_a_burst_after_it_is_measured_on_its_level():
    # 21 days, tripled from day 14 on: detect_bursts read the last week as one 168-hour burst
    # at 3.0x (fit_burst_model: 1.43 week-long bursts a month); on hour-of-week slots a doubling
    # read as 5 bursts of 30-40 min at 1.6-1.8x
    rng = np.random.default_rng(11)
    t = np.arange(21 * 144)
    level = 20 * (1 + 0.8 * np.sin(2 * np.pi * (t / 144 - 9 / 24)))
    for factor, slots in ((3.0, "hour_of_day"), (2.0, "hour_of_week")):
        rate = level * np.where(t >= 14 * 144, factor, 1.0)
        series = _series(rng.poisson(rate * 600) / 600)
        bursts = forecast.detect_bursts(series, forecast.fit_baseline(series, slots=slots))
        assert bursts.sizes["burst"] == 0
        assert bursts.attrs["level_shift"].startswith("2024-05-27")
        if slots == "hour_of_week":
            continue  # a week after the shift: each hour of the week seen once, a burst its own
        # a 2-hour burst at 4x the new level, on day 17 at noon, is one burst at about 4x
        burst = (t >= 17 * 144 + 72) & (t < 17 * 144 + 84)
        series = _series(rng.poisson(rate * np.where(burst, 4, 1) * 600) / 600)
        bursts = forecast.detect_bursts(series, forecast.fit_baseline(series, slots=slots))
        assert bursts.sizes["burst"] == 1 and bursts.duration_s.item() == 7200
        assert 3.6 < bursts.multiplier.item() < 4.4

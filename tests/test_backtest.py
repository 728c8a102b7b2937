"""capnb.plan.backtest: the plan built on one week, replayed on the next."""

import math

import numpy as np
import pytest
import xarray as xr

from capnb import plan, words
from capnb.errors import InputError
from capnb.plan._backtest import burst_factors

#: A small plan: one GPU, 15-second steps, policies whose periods are whole steps of it.
SMALL = dict(
    gpus=["H100-SXM"], tensor_parallel=[1], trials=200, step_s=15.0, cold_start_s=75.0,
    policies=["article", "hpa", "fixed", "fixed_elastic", "predictive"], breach_budget=0.05,
    backtest_days=0,
)  # fmt: skip


@pytest.fixture(scope="module")
def table():
    return plan.backtest(fit=slice(0, 7), score=slice(7, 14), draws=20, **SMALL)


def test_the_table_has_every_plan_with_units(table):
    assert list(table.plan.values) == ["recommended", "hindsight", "naive-mean", "naive-last",
                                       "fixed-plan"]  # fmt: skip
    for name in ("breach_min", "unserved", "late", "gpu_hours", "usd", "burst_hold_share"):
        assert table[name].attrs["units"], name
    assert table.breach_min.attrs["units"] == "min" and table.usd.attrs["units"] == "USD"
    assert table.attrs["score_days"] == pytest.approx(7.0, abs=0.01)
    assert "held-out week" in table.attrs["summary"]


def test_every_glossary_name_in_the_table_carries_the_glossarys_attrs(table):
    # the table gave glossary names long_names of its own ("warm spares" for buffer_instances,
    # "usd on the score window" for usd, ...), its plan no units and its policy neither: the
    # glossary says a variable of a name it lists carries its units and long_name
    from capnb import glossary

    listed = {**glossary.DIMS, **glossary.VARIABLES}
    for name, var in table.variables.items():
        if name in listed:
            attrs = glossary.attrs(name)
            assert {k: var.attrs.get(k) for k in attrs} == attrs, name


def test_hindsight_is_never_dearer_than_the_recommendation_within_the_budget(table):
    rec, best = table.sel(plan="recommended"), table.sel(plan="hindsight")
    assert bool(rec.meets_budget), "the loose budget should hold on the next week"
    assert bool(best.meets_budget)
    assert float(best.usd) <= float(rec.usd)
    assert float(rec.above_hindsight) >= 0
    # the naive fixed fleets sized on the mean or the last rate breach far more than the plan
    assert float(table.breach_min.sel(plan="naive-mean")) > float(rec.breach_min)


def test_burst_draws_can_only_lower_the_share_a_fixed_fleet_holds(table):
    # a draw without a burst is the week as observed; for a fixed fleet bursts only add breach
    fixed = table.where(table.policy == "fixed", drop=True)
    assert fixed.sizes["plan"] == 3
    observed = fixed.meets_budget.values.astype(float)
    assert (fixed.burst_hold_share.values <= observed + 1e-12).all()
    assert ((table.burst_hold_share >= 0) & (table.burst_hold_share <= 1)).all()
    assert 0 < table.attrs["burst_draws_with_bursts"] < 20


def test_backtest_is_deterministic_for_a_seed(table):
    again = plan.backtest(fit=slice(0, 7), score=slice(7, 14), draws=20, **SMALL)
    xr.testing.assert_identical(table, again)


def test_burst_draws_follow_the_model_and_the_seed():
    from capnb.forecast import BurstModel

    model = BurstModel(rate_per_month=30.0)  # one a day
    one = burst_factors(model, 7 * 1440, 60.0, 50, seed=3)
    again = burst_factors(model, 7 * 1440, 60.0, 50, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(one, again, strict=True))
    counts = [f.size > 0 for f in one]
    assert sum(counts) >= 45  # P(no burst in a week at one a day) = e^-7
    heights = np.concatenate([f[f > 1] for f in one if f.size])
    assert heights.min() >= 3.0 and heights.max() <= 5.0
    assert all(f.size == 0 for f in burst_factors(None, 100, 60.0, 5, seed=0))


@pytest.mark.parametrize(
    ("fit", "score", "message"),
    [
        (slice(0, 8), slice(7, 14), "overlap"),
        # a plan fitted on a later week and scored on an earlier one was scored on days its
        # forecast had seen the aftermath of, and the summary called them "the last held-out week"
        (slice(7, 14), slice(0, 7), "score .* before the fit window ends"),
        ((0, 7), slice(7, 14), "fit must be a slice"),
        (slice(0, 7), slice(7, None), "score: give both ends"),
        (slice(0, 7), slice(30, 37), "score: no traffic"),
        (slice(7, 0), slice(7, 14), "fit: its start"),
        (slice(0, 7), slice("not a date", 14), "score: a window bound"),
    ],
)
def test_bad_windows_are_input_errors_naming_them(fit, score, message):
    with pytest.raises(InputError, match=message):
        plan.backtest(fit=fit, score=score, **SMALL)


def test_bad_draws_is_an_input_error():
    with pytest.raises(plan.PlanError, match="draws must be a whole number"):
        plan.backtest(fit=slice(0, 7), score=slice(7, 14), draws=-1, **SMALL)


def test_dates_and_days_name_the_same_windows(table):
    start = np.datetime64(table.attrs["fit_start"])
    assert not math.isnan(float(table.usd.sel(plan="recommended")))
    day = np.timedelta64(1, "D")
    assert np.datetime64(table.attrs["fit_stop"]) == start + 7 * day
    assert np.datetime64(table.attrs["score_stop"]) == start + 14 * day


def test_a_request_logs_windows_run_midnight_to_midnight_and_are_replayed_whole():
    # a log whose first request is at 00:02:57.7 and last at 23:50 of day 6: the score window's
    # days start at midnight (the fit stops where the score starts), and its replay covers the
    # whole window, idle before the window's first request and after its last
    from capnb.plan._backtest import _over_window, held_out_windows

    first = np.datetime64("2025-03-10T00:02:57.755698")
    times = first + np.arange(0, 6 * 86_400 - 900, 60).astype("timedelta64[s]")
    log = xr.Dataset(coords={"time": ("request", times)})
    fit, score = held_out_windows(log, 2)
    day = np.timedelta64(1, "D")
    assert fit == (np.datetime64("2025-03-10T00:00"), np.datetime64("2025-03-14T00:00"))
    assert score == (fit[1], fit[1] + 2 * day)
    step = np.timedelta64(15, "s")
    grid = np.datetime64("2025-03-14T00:04:30") + np.arange(100) * step
    demand = xr.DataArray(np.arange(1.0, 101.0), dims="time", coords={"time": grid}, attrs={"a": 1})
    whole = _over_window(demand, score, 15.0)
    assert whole.time.values[0] == score[0] and whole.time.values[-1] == score[1] - step
    assert whole.sizes["time"] == 2 * 86_400 // 15 and bool((np.diff(whole.time) == step).all())
    np.testing.assert_array_equal(whole.sel(time=grid).values, demand.values)
    assert float(whole.sum()) == float(demand.sum()) and whole.attrs == {"a": 1}


def test_the_summary_names_the_score_window_it_scored():
    # a score window of one day in the middle of the trace was "the last held-out 1 days"
    table = plan.backtest(fit=slice(0, 3), score=slice(3, 4), draws=0, **SMALL)
    start = words.when(table.attrs["score_start"])  # the bundled trace's clock: "day 4 00:00"
    assert table.attrs["summary"].startswith(f"on the held-out day from {start} this plan")
    week = plan.backtest(fit=slice(0, 7), score=slice(7, 14), draws=0, **SMALL)
    assert week.attrs["summary"].startswith("on the held-out week from ")


def test_the_backtest_chart_draws_the_table_backtest_returns(table):
    # charts.plan_backtest reads "the table capnb.plan.backtest returns", but it looked up the
    # breach budget in a plan's config first, which the table has not: KeyError: 'config'
    from capnb import charts

    spec = charts.plan_backtest(table).to_dict()
    rule = [row["breach_min"] for rows in spec["datasets"].values() for row in rows
            if set(row) == {"breach_min"}]  # fmt: skip
    days = table.attrs["score_days"]
    assert rule == [pytest.approx(SMALL["breach_budget"] * days * 1440)]


def test_the_backtest_chart_tooltips_say_what_each_value_is_in_its_units(table):
    # its tooltips read 'breach_min 3.2', 'usd 9,120', 'burst_hold_share 85%'
    from capnb import charts

    spec = charts.plan_backtest(table).to_dict()
    tips = [t for layer in spec["layer"] for t in layer.get("encoding", {}).get("tooltip", [])]
    assert tips and all("_" not in t.get("title", t["field"]) for t in tips), tips

"""The autoscaling simulator kernel against its plain-Python and numpy references."""

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from benchmarks.reference import REGISTRY
from capnb import data
from capnb.elasticity import resample_demand
from capnb.elasticity._decision import veto_cold_steps
from capnb.kernels import _lazy
from capnb.kernels import autoscale as kernels

simulate_python = REGISTRY["autoscale.simulate"]["python"]
simulate_numpy = REGISTRY["autoscale.simulate"]["numpy"]
hpa_replicas_python = REGISTRY["autoscale.hpa_replicas"]["python"]
INTEGER_METRICS = [m for m in kernels.METRICS if m.endswith(("steps", "events")) or m in (
    "instances_started", "instances_stopped", "thrash", "cancelled", "peak_instances",
    "vetoed_scale_ups")]  # fmt: skip

BASE = {
    "step_s": 5.0, "per_instance_qps": 10.0, "tolerance_steps": 12, "max_instances": 40,
    "thrash_steps": 12, "policy": kernels.ARTICLE, "period_steps": 3, "scale_down_threshold": 0.3,
    "hpa_tolerance": 0.1, "up_stabilization_steps": 0, "up_pods": 4, "up_percent": 100,
    "up_period_steps": 3, "down_pods": -1, "down_percent": 100, "down_period_steps": 3,
    "stable_steps": 12, "panic_steps": 3, "panic_threshold": 2.0, "max_scale_up_rate": 1000.0,
    "max_scale_down_rate": 2.0,
}  # fmt: skip


def config(**changes):
    fields = {**BASE, **changes}
    fields.setdefault("veto_cold_steps", veto_cold_steps(fields["tolerance_steps"]))
    return kernels.Config.of(**fields)


def run_kernel(demand, up, cooldown, cold, low, buffer, cfg):
    n = demand.size
    metrics = np.empty(len(kernels.METRICS))
    timeline = kernels.Timeline.empty(n)
    run = kernels.Run.of(up=up, cooldown=cooldown, cold=cold, low=low, buffer=buffer)
    kernels.simulate(demand, cfg, run, metrics, timeline)
    return dict(zip(kernels.METRICS, metrics, strict=True)), timeline


def assert_same_metrics(got: dict, want: dict, context=""):
    for name in kernels.METRICS:
        if name in INTEGER_METRICS:
            assert got[name] == want[name], (name, got[name], want[name], context)
        else:
            assert got[name] == pytest.approx(want[name], rel=1e-9, abs=1e-6), (name, context)


# -- random runs -------------------------------------------------------------------------------
demand_st = st.lists(
    st.one_of(st.just(0.0), st.floats(0.0, 40.0), st.floats(40.0, 200.0)), min_size=1, max_size=240
).map(np.array)


@st.composite
def runs(draw):
    policy = draw(st.sampled_from([kernels.ARTICLE, kernels.HPA, kernels.KNATIVE, kernels.FIXED,
                                   kernels.FIXED_ELASTIC]))  # fmt: skip
    low = draw(st.integers(1 if policy == kernels.HPA else 0, 4))
    up_pods = draw(st.sampled_from([-1, 0, 2, 4]))
    up = draw(st.floats(0.3, 1.0))
    cfg = config(
        per_instance_qps=draw(st.floats(2.0, 30.0)),
        step_s=draw(st.sampled_from([1.0, 2.0, 5.0])),
        tolerance_steps=draw(st.integers(0, 15)),
        max_instances=draw(st.integers(low, low + 30)),
        thrash_steps=draw(st.integers(0, 20)),
        policy=policy,
        period_steps=draw(st.integers(1, 5)),
        scale_down_threshold=draw(st.floats(0.0, up * 0.9)),
        hpa_tolerance=draw(st.sampled_from([0.0, 0.05, 0.1, 0.2])),
        up_stabilization_steps=draw(st.sampled_from([0, 3, 9])),
        up_pods=up_pods,
        up_percent=draw(st.sampled_from([0, 50, 100, 200] if up_pods < 0 else [-1, 0, 100])),
        up_period_steps=draw(st.integers(1, 9)),
        down_pods=draw(st.sampled_from([-1, 1, 3])),
        down_percent=draw(st.sampled_from([10, 50, 100])),
        down_period_steps=draw(st.integers(1, 9)),
        stable_steps=(stable := draw(st.integers(1, 20))),
        panic_steps=draw(st.integers(1, stable)),
        panic_threshold=draw(st.sampled_from([1.0, 1.5, 2.0])),
        max_scale_up_rate=draw(st.sampled_from([1.5, 10.0, 1000.0])),
        max_scale_down_rate=draw(st.sampled_from([1.5, 2.0, 4.0])),
    )
    return (up, draw(st.integers(0, 30)), draw(st.integers(0, 12)), low,
            draw(st.integers(0, 2)), cfg)  # fmt: skip


@given(demand_st, runs())
def test_kernel_matches_python_reference_run_by_run(demand, run):
    up, cooldown, cold, low, buffer, cfg = run
    got, timeline = run_kernel(demand, up, cooldown, cold, low, buffer, cfg)
    want, want_timeline = simulate_python(demand, up, cooldown, cold, low, buffer, cfg)
    assert_same_metrics(got, want, run)
    np.testing.assert_array_equal(timeline[0], want_timeline["ready"])
    np.testing.assert_array_equal(timeline[1], want_timeline["starting"])
    for got_series, name in zip(timeline[2:5], ("served", "dropped", "backlog"), strict=True):
        np.testing.assert_allclose(got_series, want_timeline[name], rtol=1e-9, atol=1e-6)
    np.testing.assert_array_equal(timeline[5], want_timeline["breach"])
    assert timeline[5].sum() == got["breach_steps"]


# held rates, as a rate series gives them (a 10-minute window is 600 one-second steps): the
# simulator takes a decision that reads what the last one read, at rest, as a quiet step
held_demand_st = st.lists(
    st.tuples(st.one_of(st.just(0.0), st.floats(0.0, 40.0), st.floats(40.0, 200.0)),
              st.integers(1, 90)),
    min_size=1, max_size=12,
).map(lambda blocks: np.repeat([v for v, _ in blocks], [n for _, n in blocks]))  # fmt: skip


@given(held_demand_st, runs(), st.booleans(), st.integers(0, 40))
def test_decisions_at_rest_match_the_python_reference_on_held_rates(demand, run, predictive, shift):
    up, cooldown, cold, low, buffer, cfg = run
    forecast = None
    if predictive:  # the demand held, seen `shift` steps early
        cfg = cfg._replace(policy=kernels.PREDICTIVE)
        forecast = np.concatenate([demand[shift:], np.full(min(shift, demand.size), demand[-1])])
    metrics = np.empty(len(kernels.METRICS))
    timeline = kernels.Timeline.empty(demand.size)
    run_ = kernels.Run.of(up=up, cooldown=cooldown, cold=cold, low=low, buffer=buffer)
    kernels.simulate(demand, cfg, run_, metrics, timeline, forecast=forecast)
    want, want_timeline = simulate_python(demand, up, cooldown, cold, low, buffer, cfg, forecast)
    assert_same_metrics(dict(zip(kernels.METRICS, metrics, strict=True)), want, run)
    np.testing.assert_array_equal(timeline.ready, want_timeline["ready"])
    np.testing.assert_array_equal(timeline.starting, want_timeline["starting"])
    np.testing.assert_array_equal(timeline.breach, want_timeline["breach"])


@pytest.mark.parametrize("policy", [kernels.ARTICLE, kernels.HPA, kernels.KNATIVE, kernels.FIXED,
                                    kernels.FIXED_ELASTIC, kernels.PREDICTIVE])  # fmt: skip
def test_a_saturated_queue_matches_the_python_reference(policy):
    # a fleet held too small for held rates: the queue fills with cohorts of the same arrivals,
    # the oldest served in part and dropped each step; then a quieter rate drains it
    demand = np.repeat([50.0, 200.0, 120.0, 30.0, 260.0, 10.0], [80, 150, 100, 80, 120, 90])
    forecast = np.roll(demand, -20)
    cfg = config(policy=policy, step_s=1.0, per_instance_qps=10.0, tolerance_steps=12,
                 max_instances=4, period_steps={kernels.KNATIVE: 2}.get(policy, 5),
                 thrash_steps=30, stable_steps=10, panic_steps=2)  # fmt: skip
    knobs = [(0.8, 20, 30, 1, 0), (0.6, 0, 3, 2, 1), (0.9, 40, 8, 3, 0)]
    for up, cooldown, cold, low, buffer in knobs:
        metrics = np.empty(len(kernels.METRICS))
        timeline = kernels.Timeline.empty(demand.size)
        run_ = kernels.Run.of(up=up, cooldown=cooldown, cold=cold, low=low, buffer=buffer)
        given_forecast = forecast if policy == kernels.PREDICTIVE else None
        kernels.simulate(demand, cfg, run_, metrics, timeline, forecast=given_forecast)
        want, want_timeline = simulate_python(demand, up, cooldown, cold, low, buffer, cfg,
                                              given_forecast)  # fmt: skip
        got = dict(zip(kernels.METRICS, metrics, strict=True))
        assert_same_metrics(got, want, (policy, up, low))
        for name in ("served", "dropped", "backlog"):
            np.testing.assert_allclose(getattr(timeline, name), want_timeline[name], rtol=1e-9,
                                       atol=1e-6)  # fmt: skip
        np.testing.assert_array_equal(timeline.ready, want_timeline["ready"])
        assert got["dropping_steps"] > 100  # the queue was saturated


@given(demand_st, runs())
def test_every_step_balances_requests(demand, run):
    """backlog_in + arrivals = served + dropped + backlog_out, at every step."""
    up, cooldown, cold, low, buffer, cfg = run
    metrics, (_, _, served, dropped, backlog, _) = run_kernel(demand, up, cooldown, cold, low, buffer,
                                                           cfg)  # fmt: skip
    backlog_in = np.concatenate([[0.0], backlog[:-1]])
    arrivals = demand * cfg[kernels.CONFIG_FIELDS.index("step_s")]
    np.testing.assert_allclose(backlog_in + arrivals, served + dropped + backlog, rtol=1e-9,
                               atol=1e-6)  # fmt: skip
    assert (backlog >= -1e-9).all() and (served >= 0).all() and (dropped >= 0).all()
    assert metrics["served"] + metrics["dropped"] + metrics["final_backlog"] == pytest.approx(
        metrics["arrivals"], rel=1e-9, abs=1e-6
    )


@given(demand_st, runs())
@example(np.array([0.0, 1.0]), (1.0, 0, 0, 0, 0, config(per_instance_qps=2.0, step_s=1.0,
         tolerance_steps=0, max_instances=1, period_steps=1)))  # fmt: skip
def test_every_scale_event_shows_in_the_timeline(demand, run):
    """A decision ending step t changes the fleet from step t + 1: the last step's has no step."""
    up, cooldown, cold, low, buffer, cfg = run
    got, timeline = run_kernel(demand, up, cooldown, cold, low, buffer, cfg)
    changes = np.count_nonzero(np.diff(timeline.ready + timeline.starting))
    assert got["scale_up_events"] + got["scale_down_events"] == changes


@pytest.mark.parametrize(("rates", "events", "started"), [
    ([5.0] * 20 + [45.0], 0, 0),  # the rise comes in the last step: no step serves after it
    ([5.0] * 19 + [45.0, 45.0], 1, 4),  # one step earlier: 4 instances start, seen in the last
])  # fmt: skip
@pytest.mark.parametrize("reference", ["kernel", "python", "numpy"])
def test_the_decision_after_the_last_step_is_not_counted(rates, events, started, reference):
    # HPA deciding every 15 s step on 10 requests/s instances at a 0.7 target: 5 requests/s needs
    # one instance, 45 needs ceil(45 / 7) = 7, so 6 more (the HPA's rate limit: 4 a period)
    demand = np.array(rates)
    cfg = config(policy=kernels.HPA, step_s=15.0, period_steps=1, up_period_steps=1,
                 down_period_steps=1, tolerance_steps=4)  # fmt: skip
    knobs = (0.7, 1, 3, 1, 0)  # up, cooldown (steps), cold (steps), low, buffer
    if reference == "kernel":
        got, _ = run_kernel(demand, *knobs, cfg)
    elif reference == "python":
        got, _ = simulate_python(demand, *knobs, cfg)
    else:
        metrics = simulate_numpy(demand, *([k] for k in knobs), cfg)[0]
        got = dict(zip(kernels.METRICS, metrics, strict=True))
    assert got["scale_up_events"] + got["scale_down_events"] == events
    assert got["instances_started"] == started


@pytest.mark.parametrize("policy", [kernels.ARTICLE, kernels.HPA, kernels.KNATIVE, kernels.FIXED,
                                    kernels.FIXED_ELASTIC])  # fmt: skip
def test_grid_of_runs_matches_numpy_and_python_references(policy):
    rng = np.random.default_rng(policy)
    t = np.arange(2_000)
    bursts = rng.gamma(0.5, 60.0, t.size) * (rng.random(t.size) < 0.1)
    demand = 50 + 40 * np.sin(2 * np.pi * t / 700) + bursts
    n = 24
    up = rng.uniform(0.4, 0.95, n)
    cooldown = rng.integers(0, 90, n)
    cold = rng.integers(0, 40, n)
    low = rng.integers(1, 5, n)
    buffer = rng.integers(0, 3, n)
    cfg = config(policy=policy, period_steps={kernels.KNATIVE: 1, kernels.HPA: 3}.get(policy, 6),
                 tolerance_steps=10, thrash_steps=60)  # fmt: skip
    metrics = np.empty((n, len(kernels.METRICS)))
    kernels.simulate_many(demand, cfg, kernels.Run.grid(up, cooldown, cold, low, buffer), metrics)
    numpy_metrics = simulate_numpy(demand, up, cooldown, cold, low, buffer, cfg)
    for i in range(n):
        got = dict(zip(kernels.METRICS, metrics[i], strict=True))
        assert_same_metrics(got, dict(zip(kernels.METRICS, numpy_metrics[i], strict=True)), i)
        if i % 6 == 0:
            want, _ = simulate_python(demand, up[i], cooldown[i], cold[i], low[i], buffer[i], cfg)
            assert_same_metrics(got, want, i)
    # the grid exercised what it is meant to test
    assert metrics[:, kernels.METRICS.index("breach_steps")].max() > 0
    if policy != kernels.FIXED:
        assert metrics[:, kernels.METRICS.index("scale_down_events")].max() > 0


def test_threads_give_the_same_answer_as_one_thread():
    rng = np.random.default_rng(3)
    demand = rng.gamma(2.0, 20.0, 60_000)
    n = 40
    args = (config(policy=kernels.HPA), kernels.Run.grid(rng.uniform(0.5, 0.9, n),
            rng.integers(0, 60, n), rng.integers(0, 20, n), rng.integers(1, 4, n),
            rng.integers(0, 2, n)))  # fmt: skip
    assert n * demand.size >= _lazy.PARALLEL_MIN_WORK  # the threaded path ran
    threaded = np.empty((n, len(kernels.METRICS)))
    kernels.simulate_many(demand, *args, threaded)
    alone = np.empty((n, len(kernels.METRICS)))
    kernels._runs_serial(demand, *args, alone)
    np.testing.assert_array_equal(threaded, alone)


@pytest.mark.parametrize(
    ("source", "step_s", "policy", "period"),
    [
        ("azure-code-2023", 5, kernels.ARTICLE, 12),
        ("azure-code-2023", 1, kernels.KNATIVE, 2),
        ("azure-conv-2023", 5, kernels.HPA, 3),
        ("servegen-m-large", 60, kernels.FIXED_ELASTIC, 1),
        ("servegen-m-large", 60, kernels.HPA, 1),
        # the worksheet's setting: 10-minute rates held at 1-s steps, decisions mostly at rest
        ("servegen-m-large", 1, kernels.HPA, 15),
        ("servegen-m-large", 1, kernels.KNATIVE, 2),
        ("servegen-m-large", 1, kernels.ARTICLE, 60),
    ],
)
def test_kernel_matches_references_on_real_traces(source, step_s, policy, period):
    if source.startswith("azure"):  # 1,500 steps of the log
        demand = resample_demand(data.load_trace(source), step_s).values[:1500]
        per_instance_qps = 2.0
    else:  # a day of the 10-minute series held per minute, or 6 hours of it held per second
        steps = 1440 if step_s == 60 else 6 * 3600 // step_s
        demand = resample_demand(data.load_rate_series(source), step_s).values[:steps]
        per_instance_qps = 40.0
    cfg = config(policy=policy, step_s=step_s, per_instance_qps=per_instance_qps,
                 period_steps=period, tolerance_steps=max(1, 60 // step_s),
                 stable_steps=60 // step_s, panic_steps=6 // step_s if step_s < 6 else 1,
                 thrash_steps=900 // step_s, max_instances=200)  # fmt: skip
    n = 6
    up = np.array([0.5, 0.6, 0.7, 0.8, 0.9, 0.7])
    cooldown = np.array([0, 60, 300, 900, 1800, 300]) // step_s
    cold = np.array([0, 30, 60, 90, 150, 300]) // step_s
    low, buffer = np.array([1, 1, 2, 2, 3, 1]), np.array([0, 1, 0, 2, 0, 1])
    metrics = np.empty((n, len(kernels.METRICS)))
    kernels.simulate_many(demand, cfg, kernels.Run.grid(up, cooldown, cold, low, buffer), metrics)
    numpy_metrics = simulate_numpy(demand, up, cooldown, cold, low, buffer, cfg)
    for i in range(n):
        got = dict(zip(kernels.METRICS, metrics[i], strict=True))
        want, _ = simulate_python(demand, up[i], cooldown[i], cold[i], low[i], buffer[i], cfg)
        assert_same_metrics(got, want, (source, i))
        assert_same_metrics(got, dict(zip(kernels.METRICS, numpy_metrics[i], strict=True)), i)


# -- the policy rules ----------------------------------------------------------------------------
@given(st.floats(0.0, 1e4), st.floats(0.1, 500.0), st.integers(1, 200), st.integers(0, 50),
       st.sampled_from([0.0, 0.1, 0.25]))  # fmt: skip
def test_hpa_replicas_matches_reference(total, target, ready, unready, tolerance):
    assert kernels.hpa_replicas(total, target, ready, unready, tolerance) == hpa_replicas_python(
        total, target, ready, unready, tolerance
    )


@pytest.mark.parametrize(
    ("total", "target", "ready", "want"),
    [(4 * 90, 60, 4, 6), (10 * 105, 100, 10, 10), (10 * 111, 100, 10, 12)],
)
def test_hpa_replicas_documented_cases(total, target, ready, want):
    """Kubernetes' HPA docs: 4 pods at 90 vs 60 -> 6; 10 pods at 105 vs 100 stay; at 111 -> 12."""
    assert kernels.hpa_replicas(float(total), float(target), ready, 0, 0.1) == want


def test_hpa_counts_starting_pods_when_scaling_up():
    # 4 ready at 90 vs 60 with 2 pods still starting: over 6 pods the ratio is exactly 1 -> keep 6
    assert kernels.hpa_replicas(360.0, 60.0, 4, 2, 0.1) == 6
    # at 120 per ready pod, the 6 pods average 80 vs 60 -> ceil(1.333 x 6) = 8
    assert kernels.hpa_replicas(480.0, 60.0, 4, 2, 0.1) == 8
    # scaling down with starting pods: they are ignored, the ready ones decide
    assert kernels.hpa_replicas(60.0, 60.0, 4, 2, 0.1) == 1


def test_knative_desired_keeps_within_the_rates():
    stable, panic, needed = kernels.knative_desired(0.0, 700.0, 7.0, 10, 1000.0, 2.0)
    assert (stable, panic, needed) == (5, 100, 100)  # halving at most; ready 0 counts as 1 below
    assert kernels.knative_desired(70.0, 70.0, 7.0, 0, 2.0, 2.0) == (2, 2, 10)


# -- preemption: instances lost at given steps ---------------------------------------------------
def run_with_losses(demand, run, cfg, losses, forecast=None):
    metrics = np.empty(len(kernels.METRICS))
    timeline = kernels.Timeline.empty(demand.size)
    kernels.simulate(demand, cfg, kernels.Run.of(**run), metrics, timeline, forecast, losses)
    return dict(zip(kernels.METRICS, metrics, strict=True)), timeline


def test_a_fixed_fleet_that_loses_an_instance_restarts_it_through_the_cold_start():
    # 3 instances of 10 requests/s serve 25 requests/s; one is lost at step 10 and restarted at
    # the end of that step, serving again from 10 + 1 + 5 = 16. Short of it, 2 instances serve
    # 20 of 25 requests/s: 5 requests queue per step for 6 steps, then drain at 5 per step.
    cfg = config(policy=kernels.FIXED, step_s=1.0, tolerance_steps=30, thrash_steps=10)
    lost = np.zeros(40, np.int64)
    lost[10] = 1
    got, timeline = run_with_losses(
        np.full(40, 25.0), dict(up=0.7, cooldown=0, cold=5, low=3, buffer=0), cfg,
        kernels.Losses.of_counts(lost),
    )  # fmt: skip
    assert timeline.ready.tolist() == [3] * 10 + [2] * 6 + [3] * 24
    assert timeline.starting.tolist() == [0] * 11 + [1] * 5 + [0] * 24
    # in breach while short (steps 10-15) and while the 30 queued requests drain at 5 a step
    # (16-20: 30 + 25 arrive, 30 served, 25 left, ... 5 + 25 fit at step 21)
    assert np.flatnonzero(timeline.breach).tolist() == list(range(10, 21))
    assert timeline.backlog[15] == 30.0 and timeline.backlog[20] == 5.0
    assert timeline.backlog[21] == 0.0
    assert got["preempted"] == 1 and got["instances_started"] == 1
    assert got["instances_stopped"] == 0 and got["thrash"] == 0 and got["scale_down_events"] == 0
    assert got["starting_steps"] == 5 and got["instance_steps"] == 40 * 3 - 1
    assert got["dropped"] == 0.0 and got["served"] == got["arrivals"] == 1000.0
    want, _ = simulate_python(np.full(40, 25.0), 0.7, 0, 5, 3, 0, cfg,
                              losses=kernels.Losses.of_counts(lost))  # fmt: skip
    assert_same_metrics(got, want)


def test_a_policy_sees_the_smaller_pool_at_its_next_decision():
    # HPA syncing every 15 steps over a steady load: 2 of 4 instances lost at step 20 (not a
    # sync) are replaced at the sync ending step 29, ready from 29 + 1 + 3 = 33
    cfg = config(policy=kernels.HPA, step_s=1.0, period_steps=15, tolerance_steps=60,
                 per_instance_qps=10.0, hpa_tolerance=0.1)  # fmt: skip
    lost = np.zeros(60, np.int64)
    lost[20] = 2
    got, timeline = run_with_losses(
        np.full(60, 28.0), dict(up=0.7, cooldown=0, cold=3, low=1, buffer=0), cfg,
        kernels.Losses.of_counts(lost),
    )  # fmt: skip
    assert timeline.ready.tolist() == [4] * 20 + [2] * 13 + [4] * 27
    assert timeline.starting[29] == 0 and timeline.starting[30] == 2
    assert got["preempted"] == 2 and got["instances_started"] == 2


def test_a_loss_takes_no_more_than_is_ready_and_a_mark_spares_small_fleets():
    cfg = config(policy=kernels.FIXED, step_s=1.0)
    run = dict(up=0.7, cooldown=0, cold=2, low=2, buffer=1)
    events = kernels.Losses(np.array([3, 3, 8], np.int64), np.array([5, 1, 1], np.int64),
                            np.array([-1.0, -1.0, 2.5]))  # fmt: skip
    got, timeline = run_with_losses(np.full(12, 5.0), run, cfg, events)
    # step 3: all 3 lost (not 5), the second event finds none; step 8: 3 ready > 2.5, one lost
    assert got["preempted"] == 4
    assert timeline.ready.tolist() == [3, 3, 3, 0, 0, 0, 3, 3, 2, 2, 2, 3]
    events = events._replace(marks=np.array([-1.0, -1.0, 3.0]))  # 3 ready is not above 3
    assert run_with_losses(np.full(12, 5.0), run, cfg, events)[0]["preempted"] == 3


@pytest.mark.parametrize("policy", [kernels.ARTICLE, kernels.HPA, kernels.KNATIVE, kernels.FIXED,
                                    kernels.FIXED_ELASTIC, kernels.PREDICTIVE])  # fmt: skip
def test_preemptions_match_the_python_reference_run_by_run(policy):
    rng = np.random.default_rng(10 + policy)
    t = np.arange(1_500)
    demand = 50 + 40 * np.sin(2 * np.pi * t / 500) + rng.gamma(0.5, 40.0, t.size) * (
        rng.random(t.size) < 0.1)  # fmt: skip
    forecast = 50 + 40 * np.sin(2 * np.pi * (t + 20) / 500)
    cfg = config(policy=policy, period_steps={kernels.KNATIVE: 1, kernels.HPA: 3}.get(policy, 6),
                 tolerance_steps=10, thrash_steps=60)  # fmt: skip
    # a rate's thinned candidates (marks in [0, 20)) and a given series (mark -1), both sparse
    steps = np.sort(rng.integers(0, t.size, 120))
    counts = rng.integers(1, 4, steps.size)
    marks = np.where(rng.random(steps.size) < 0.5, -1.0, rng.random(steps.size) * 20)
    losses = kernels.Losses(steps, counts, marks)
    seen = 0
    for i in range(8):
        run = dict(up=float(rng.uniform(0.4, 0.95)), cooldown=int(rng.integers(0, 90)),
                   cold=int(rng.integers(0, 40)), low=int(rng.integers(1, 5)),
                   buffer=int(rng.integers(0, 3)))  # fmt: skip
        got, timeline = run_with_losses(demand, run, cfg, losses, forecast)
        want, want_timeline = simulate_python(demand, *run.values(), cfg, forecast, losses)
        assert_same_metrics(got, want, (policy, i))
        np.testing.assert_array_equal(timeline.ready, want_timeline["ready"])
        np.testing.assert_array_equal(timeline.starting, want_timeline["starting"])
        np.testing.assert_array_equal(timeline.breach, want_timeline["breach"])
        seen += got["preempted"]
        # and a grid of runs gives each run's answer
        grid = np.empty((1, len(kernels.METRICS)))
        kernels.simulate_many(demand, cfg, kernels.Run.grid(*run.values()), grid, forecast, losses)
        np.testing.assert_array_equal(grid[0], [got[m] for m in kernels.METRICS])
    assert seen > 0


def test_no_losses_change_nothing():
    rng = np.random.default_rng(5)
    demand = rng.gamma(2.0, 20.0, 3_000)
    cfg = config(policy=kernels.HPA)
    runs = kernels.Run.grid([0.6, 0.8], [0, 30], [5, 20], [1, 3], [0, 2])
    plain = np.empty((runs.up.size, len(kernels.METRICS)))
    kernels.simulate_many(demand, cfg, runs, plain)
    empty = np.empty_like(plain)
    kernels.simulate_many(demand, cfg, runs, empty, losses=kernels.Losses.none())
    np.testing.assert_array_equal(plain, empty)
    assert (plain[:, kernels.METRICS.index("preempted")] == 0).all()
    with pytest.raises(ValueError, match="losses"):
        kernels.simulate_many(demand, cfg, runs, empty, losses=kernels.Losses(
            np.array([5, 2]), np.array([1, 1]), np.array([-1.0, -1.0])))  # fmt: skip

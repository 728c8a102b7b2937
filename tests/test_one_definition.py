"""Each decision and each name is written once: read from the source.

A rule copied into a second module drifts apart from the first (the cold-start veto lived in four
files; the burst test hard-coded 4x for 1.5 h whatever the burst model said; policy names had three
spellings). The plain reference implementations of the kernels restate the rules on purpose, to
test the kernels against; they live outside ``capnb`` (``benchmarks/reference/``), so are not read.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1] / "capnb"
SOURCES = {
    p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
    for p in sorted(ROOT.rglob("*.py"))
}


def _code(text: str) -> str:
    """The source without comments and docstrings' prose lines (a rule is code, not words)."""
    lines = []
    for line in text.splitlines():
        stripped = line.split("#", 1)[0]
        lines.append(stripped)
    return "\n".join(lines)


def _where(pattern: str) -> list[str]:
    rule = re.compile(pattern)
    return sorted(name for name, text in SOURCES.items() if rule.search(_code(text)))


def test_the_cold_start_rule_is_written_once():
    # "cold start above half the tolerance", in any of the forms it took
    halves = _where(r"toleran\w*\)?\s*/\s*2|2\s*\*\s*\w*cold\w*\s*>|cold\w*\)?\s*>\s*\w*toleran")
    assert halves == ["elasticity/_decision.py"]
    # everyone else asks the rule
    users = _where(r"cold_start_vetoes\(|veto_cold_steps\(")
    assert {"elasticity/_advice.py", "elasticity/_policy.py"} <= set(users)


def test_the_burst_test_is_sized_by_the_burst_model():
    # no burst size of its own: the plan's burst test reads the burst model it was given
    assert _where(r"\*=\s*4\.0|1\.5\s*\*\s*3600") == []
    assert _where(r"def _burst_test\(") == ["plan/_steps.py"]
    from capnb import forecast
    from capnb.plan import PlanConfig
    from capnb.plan._steps import _burst_test, burst_model

    demand_times = np.arange("2024-01-01", "2024-01-03", dtype="datetime64[m]")
    import xarray as xr

    demand = xr.DataArray(np.full(demand_times.size, 10.0), dims="time",
                          coords={"time": demand_times.astype("datetime64[ns]")})  # fmt: skip
    settings = dict(per_instance_qps=2.0, step_s=60.0, cold_start_s=120.0, tolerance_s=120.0,
                    policy="fixed", min_instances=6)  # fmt: skip
    model = forecast.BurstModel(duration_s=(600.0, 1800.0), multiplier=(2.0, 2.5))
    run = _burst_test(
        demand,
        PlanConfig().replace(elasticity={"step_s": 60.0, "policies": ["fixed"]}),
        settings,
        model,
        observed=np.ones(demand.size, bool),
    )
    assert run.attrs["burst_multiplier"] == 2.25 and run.attrs["burst_hours"] == 1200 / 3600
    none = burst_model(PlanConfig().replace(traffic={"bursts": "none"}), None)
    assert (
        none.rate_per_month == 0
        and _burst_test(demand, PlanConfig(), settings, none, observed=np.ones(demand.size, bool))
        is None
    )


def test_the_burst_test_starts_at_the_busiest_stretch_not_a_one_step_spike():
    # a request log's per-second counts peak on noise: the burst went to a lone spike at 03:00
    # (07:06 in a log whose busiest hour was 09:00-10:00) instead of the busiest stretch
    import xarray as xr

    from capnb import forecast
    from capnb.plan import PlanConfig
    from capnb.plan._steps import _burst_test

    times = np.arange("2024-01-01", "2024-01-04", dtype="datetime64[m]")
    hours = (times - times.astype("datetime64[D]")).astype(int) / 60.0
    values = 2.0 + 8.0 * np.exp(-((hours - 10.0) ** 2) / 2.0)  # busiest around 10:00
    values[(times == np.datetime64("2024-01-02T03:00")).argmax()] = 50.0  # one noisy step
    demand = xr.DataArray(values, dims="time", coords={"time": times.astype("datetime64[ns]")})
    settings = dict(per_instance_qps=2.0, step_s=60.0, cold_start_s=120.0, tolerance_s=120.0,
                    policy="fixed", min_instances=30)  # fmt: skip
    model = forecast.BurstModel(duration_s=(600.0, 1800.0), multiplier=(2.0, 2.5))
    run = _burst_test(
        demand,
        PlanConfig().replace(elasticity={"step_s": 60.0, "policies": ["fixed"]}),
        settings,
        model,
        observed=np.ones(demand.size, bool),
    )
    start = np.datetime64(run.attrs["burst_start"])
    # 20 minutes around the 10:00 peak of the middle day
    assert np.datetime64("2024-01-02T09:45") <= start <= np.datetime64("2024-01-02T09:55"), start


def test_the_burst_test_lands_where_the_trace_was_observed():
    # found on a 5-day request log of ours with a gap 08:00-16:00 on its middle day: the 4x
    # 90-minute burst went in at 12:00, inside the gap the replay filled with slot medians
    import xarray as xr

    from capnb import forecast
    from capnb.plan import PlanConfig
    from capnb.plan._steps import _burst_test

    times = np.arange("2024-01-01", "2024-01-04", dtype="datetime64[m]")
    hours = (times - times.astype("datetime64[D]")).astype(int) / 60.0
    values = 2.0 + 8.0 * np.exp(-((hours - 12.0) ** 2) / 8.0)  # busiest around 12:00
    demand = xr.DataArray(values, dims="time", coords={"time": times.astype("datetime64[ns]")})
    gap = (times >= np.datetime64("2024-01-02T08:00")) & (times < np.datetime64("2024-01-02T16:00"))
    settings = dict(per_instance_qps=2.0, step_s=60.0, cold_start_s=120.0, tolerance_s=120.0,
                    policy="fixed", min_instances=30)  # fmt: skip
    model = forecast.BurstModel(duration_s=(3600.0, 7200.0), multiplier=(3.0, 5.0))
    cfg = PlanConfig().replace(elasticity={"step_s": 60.0, "policies": ["fixed"]})
    run = _burst_test(demand, cfg, settings, model, observed=~gap)
    start = np.datetime64(run.attrs["burst_start"])
    # the busiest observed 90 minutes of the middle day: just after the gap, 16:00-17:30
    assert start == np.datetime64("2024-01-02T16:00"), start
    # a middle day observed nowhere: the busiest observed stretch of the trace (day 1 or 3)
    whole_day = (times >= np.datetime64("2024-01-02")) & (times < np.datetime64("2024-01-03"))
    run = _burst_test(demand, cfg, settings, model, observed=~whole_day)
    start = np.datetime64(run.attrs["burst_start"])
    assert not whole_day[times == start].any() and str(start)[11:16] == "11:15", start


def test_policy_names_are_written_once():
    for name in ("Kubernetes HPA", "Knative KPA", "fixed + elastic"):
        found = _where(f"[\"']{re.escape(name)}[\"']\\s*[,):\\]}}]")
        assert found == ["words.py"], (name, found)


def test_times_of_an_undated_trace_are_worded_once():
    # "day 8 22:30" on a trace whose dates are placeholders
    assert _where(r"f\"day \{[^}]*\+ 1\} \{") == ["words.py"]
    assert _where(r"=\s*1970\b|[\"']1970-") == ["words.py"]


def test_no_module_defines_a_top_level_name_twice():
    # a second `def _own_rows` in capnb/latency/validate.py shadowed the first, which the module's
    # own functions still called with other arguments: the later definition silently wins
    import ast

    twice = []
    for name, text in SOURCES.items():
        seen: dict[str, int] = {}
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name in seen:
                    twice.append(f"{name}: {node.name} (lines {seen[node.name]}, {node.lineno})")
                seen[node.name] = node.lineno
    assert not twice, twice


def test_the_engine_models_vllm_release_is_written_once():
    # the release whose KV accounting the serving-engine model sizes its cache by was written as
    # "0.10" in eight places (a default argument, a call, _closecall.VLLM_VERSION): one place now
    # (a doctest's call, >>> or ..., is an example, not the rule)
    written = (
        r"(?m)^(?!\s*(>>>|\.\.\.)).*(vllm_version\s*[:=][^,)\n]*[\"']0\.10[\"']|VLLM_VERSION\s*=)"
    )
    assert _where(written) == ["records.py"]


def test_the_plans_own_run_calibrations_are_decoded_once():
    # the capacity step's own_calibrations attr ({gpu: Calibration's fields}, JSON) was decoded
    # by _steps (the calibration of a GPU) and again by _compose (which GPUs have one); the
    # report, which may use public names only, reads the exported plan's copy
    assert _where(r"loads\([^\n]*own_calibrations") == ["plan/_steps.py", "report.py"]


def test_a_replay_is_scaled_to_a_month_once():
    # a replay's totals (USD, breach seconds) as a month (730 h) were scaled in five places in
    # three forms (value / hours * 730, value * (730 / hours), value / 60 * 730 / hours): the
    # alternatives' records, their sentences, the answer and the export check
    assert _where(r"duration_s\"\]\)\s*/\s*3600|HOURS_PER_MONTH\s*/\s*hours") == ["plan/_steps.py"]


def test_a_deployment_that_is_not_the_record_is_refused_in_one_wording():
    # six functions refused a deployment that was not the record, each in its own words, two
    # spellings between them ("capnb.Deployment" in capacity's arrivals and engine curve,
    # "capnb.records.Deployment" in the other four)
    assert _where(r"expected a capnb(\.records)?\.Deployment") == ["records.py"]


def test_an_sla_that_is_not_the_record_is_refused_in_one_wording():
    # prefix_trade said "expected a capnb.records.SLA, got <its repr>", the arrivals check
    # "expected a capnb.SLA, got <its type>"; the pools' refusal asks for ttft and tpot bounds too
    assert _where(r"expected a capnb(\.records)?\.SLA,") == ["records.py"]


def test_the_breach_budget_a_month_is_written_once():
    # the plan's SLA-breach budget in minutes a month: its check, the mixed fleet's and the
    # prefill/decode pools' words and the alternatives' status all ask budget_minutes
    assert _where(r"breach_budget\s*\*\s*\w*\.?HOURS_PER_MONTH") == ["plan/_steps.py"]


def test_a_cold_start_in_whole_steps_is_written_once():
    # the plan replays a cold start rounded up to whole simulation steps (252.19 s in 1 s steps:
    # 253 s): the chosen run's replay, the mix's pools and the start page each wrote the rounding
    assert _where(r"ceil\([^)]*/\s*[\w.]*step_s\)\s*\*") == ["elasticity/coldstart.py"]
    assert {"plan/_steps.py", "plan/_fleet.py"} <= set(_where(r"\bin_whole_steps\("))
    start = (ROOT.parent / "notebooks" / "00_start_here.ipynb").read_text(encoding="utf-8")
    assert "capnb.coldstart.in_whole_steps(" in start and "math.ceil(" not in start
    from capnb.elasticity.coldstart import in_whole_steps

    assert in_whole_steps(252.19, 1.0) == 253.0 and in_whole_steps(252.19, None) == 252.19

"""Elasticity charts (through their specs) and the worksheet, driven headless."""

import numpy as np
import pytest

from capnb import charts, coldstart, data, elasticity
from capnb.errors import InputError
from capnb.widgets import ElasticityWorksheet


@pytest.fixture(scope="module")
def burst():
    return elasticity.resample_demand(data.load_trace("azure-code-2023"), 1)


@pytest.fixture(scope="module")
def worksheet():
    return ElasticityWorksheet("azure-conv-2023", per_instance_qps=1.0, cooldowns=(0.0, 300.0),
                               thresholds=(0.6, 0.7), cooldown_s=300.0, tolerance_s=120.0)  # fmt: skip


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
    cell = ws.sweep.sel(ws.selection)
    assert float(ws.result.breach_s) == float(cell.breach_s)
    before = float(ws.result.gpu_hours)
    ws.set(policy="fixed fleet", min_instances=ws.floors[-1])
    assert ws.policy == "fixed" and float(ws.result.gpu_hours) != before
    assert int(ws.result.ready_instances.min()) == ws.floors[-1]
    assert list(ws.table().run.values) == ["recommended", "selected"]
    for name in ("timeline", "pareto", "cold_start"):
        assert ws.chart(name).to_dict()


def test_worksheet_recomputes_the_sweep_only_for_a_new_cold_start(worksheet):
    ws = worksheet
    sweep = ws.sweep
    ws.set(buffer_instances=2)
    assert ws.sweep is sweep
    ws.set(cold_start_s=10.0)
    assert ws.sweep is not sweep and float(ws.sweep.cold_start_s) == 10.0
    assert any("short enough" in reason for reason in ws.recommendation.reasons)


def test_worksheet_rejects_values_off_its_grid():
    with pytest.raises(InputError, match="cooldown_s=60.0 is not in the sweep's grid"):
        ElasticityWorksheet("azure-conv-2023", per_instance_qps=1.0, cooldown_s=60.0)
    with pytest.raises(InputError, match="not a bundled trace"):
        ElasticityWorksheet("no-such-trace")
    assert np.isfinite(ElasticityWorksheet("azure-conv-2023", per_instance_qps=1.0,
                                           cooldowns=(0.0, 300.0)).cold_start_estimate_s)  # fmt: skip

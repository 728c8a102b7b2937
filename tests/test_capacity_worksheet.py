"""Capacity charts through ``to_dict()`` and the worksheet driven headless."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capnb import capacity, charts, data, latency, widgets
from capnb.errors import InputError


@pytest.fixture(scope="module")
def short():
    return data.load_latency_curve("dstack-vllm-mi300x-short")


@pytest.fixture(scope="module")
def worksheet():
    return widgets.CapacityWorksheet(
        workload_samples=64, overview_gpus=["A100-80GB", "H100-SXM", "H200"]
    )


def layer_data(spec):
    return {name: rows for name, rows in spec.get("datasets", {}).items()}


def test_latency_curve_draws_the_measured_quantiles_and_a_live_sla_slider(short):
    table = capacity.safe_concurrency(short, np.round(np.arange(0.5, 5.01, 0.5), 10), metric="ttft")
    spec = charts.latency_curve(short, metric="ttft", sla_table=table, sla=2.0).to_dict()
    params = spec["params"]
    assert params[0]["name"] == "sla" and params[0]["value"] == 2.0
    assert params[0]["bind"]["input"] == "range" and params[0]["bind"]["step"] == pytest.approx(0.5)
    rows = [r for rs in layer_data(spec).values() for r in rs]
    p99 = [r for r in rows if r.get("quantile") == "P99"]
    assert [r["concurrency"] for r in p99] == short.concurrency.values.tolist()
    assert p99[-1]["latency_s"] == pytest.approx(253.43471)
    safe_rows = [r for r in rows if "safe" in r]
    assert {r["sla"]: r["safe"] for r in safe_rows}[2.0] == 24
    assert "abs(datum.sla - sla)" in json.dumps(spec)


def test_latency_curve_needs_one_cell_and_an_even_sla_grid(short, worksheet):
    stack = latency.analytic(
        "Llama-3.1-8B",
        ["A100-80GB", "H100-SXM"],
        1,
        workload=worksheet.workload,
        concurrency=[1, 2],
    )
    with pytest.raises(InputError, match="choose one gpu"):
        charts.latency_curve(stack)
    uneven = capacity.safe_concurrency(short, [0.5, 1.0, 3.0], metric="ttft")
    with pytest.raises(InputError, match="evenly spaced"):
        charts.latency_curve(short, metric="ttft", sla_table=uneven)
    with pytest.raises(InputError, match="no e2e P50"):
        charts.latency_curve(short, metric="e2e")


def test_throughput_curve_marks_the_operating_point(short):
    plan = capacity.plan(short, 2.0, 20.0, metric="ttft")
    spec = charts.throughput_curve(short, plan).to_dict()
    rows = [r for rs in layer_data(spec).values() for r in rs]
    littles = [r for r in rows if r.get("rule") == "Little's law"]
    naive = [r for r in rows if r.get("rule") == "naive"]
    assert len(littles) == len(naive) == short.sizes["concurrency"]
    marked = [r for r in rows if "label" in r]
    assert marked[0]["qps"] == pytest.approx(float(plan.per_instance_qps))


def test_cost_vs_sla_picks_each_gpus_cheapest_tp(worksheet):
    sweep = worksheet.overview
    spec = charts.cost_vs_sla(sweep, sla=2.0).to_dict()
    rows = [r for rs in layer_data(spec).values() for r in rs if "gpu" in r]
    for row in rows:
        if row.get("usd_per_hour") is None or "tensor_parallel" not in row:
            continue
        costs = sweep.usd_per_hour.sel(gpu=row["gpu"], sla=row["sla"]).squeeze()
        assert row["usd_per_hour"] == pytest.approx(float(costs.min()))


def test_plan_contrast_shows_both_plans(short):
    spec = charts.plan_contrast(capacity.contrast(short, 2.0, 20.0, metric="ttft")).to_dict()
    rows = [r for rs in layer_data(spec).values() for r in rs if "plan" in r]
    assert {r["plan"] for r in rows} == {"by max concurrency", "by latency (capnb)"}


def test_worksheet_headless_defaults_and_changes(worksheet):
    assert worksheet.inputs["sla"] == 2.0 and worksheet.inputs["metric"] == "ttft"
    assert int(worksheet.result.safe_concurrency) == 24
    assert worksheet.answer.startswith("At ttft P99 <= 2.00 s, one instance of Llama-3.1-405B")
    for name in ("curve", "throughput", "contrast", "cost"):
        worksheet.chart(name).to_dict()
    worksheet.set(sla=0.3)
    assert worksheet.answer.startswith("Infeasible: ttft P99 is already 315 ms")
    assert worksheet.contrast is not None
    worksheet.set(curve="analytic model", metric="e2e", sla=19.0)
    assert worksheet.curve.attrs["kind"] == "analytic"
    assert "Llama-3.1-70B on 4 x H100-SXM" in worksheet.answer
    worksheet.set(curve="dstack-vllm-mi300x-short", metric="ttft", sla=2.0)
    assert worksheet.record().startswith("Inputs: curve = dstack-vllm-mi300x-short")
    with pytest.raises(InputError, match="unknown worksheet input"):
        worksheet.set(slo=1.0)


def test_worksheet_takes_a_users_own_curve():
    from pathlib import Path

    own = data.read_vllm_bench(
        Path(__file__).parent / "fixtures" / "capacity" / "vllm", model="gpt-oss-120b"
    )
    ws = widgets.CapacityWorksheet(
        own, metric="ttft", sla=1.0, workload_samples=32, overview_gpus=["H100-SXM"],
        overview_tensor_parallel=[1],
    )  # fmt: skip
    assert ws.inputs["curve"] == "your curve"
    p32, p64 = (
        float(own.latency.sel(metric="ttft", latency_quantile=0.99, concurrency=c))
        for c in (32, 64)
    )
    assert int(ws.result.safe_concurrency) == int(32 + (1.0 - p32) / (p64 - p32) * 32)
    assert ws.contrast is None  # the curve starts at 32: no single-request baseline
    assert "GPUs and cost not computed" in ws.answer  # the files name no GPU or TP

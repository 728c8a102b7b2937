"""Capacity charts through ``to_dict()`` and the worksheet (notebook 03) driven headless."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from capnb import capacity, charts, data, latency, notebook
from capnb.errors import InputError


@pytest.fixture(scope="module")
def short():
    return data.load_latency_curve("dstack-vllm-mi300x-short")


SMALL = {"WORKLOAD_SAMPLES": 64, "OVERVIEW_GPUS": ["A100-80GB", "H100-SXM", "H200"]}


@pytest.fixture(scope="module")
def worksheet():
    return notebook.worksheet("03_capacity", **SMALL)


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


def test_latency_curve_needs_one_cell_and_an_even_sla_grid(short):
    stack = latency.analytic(
        "Llama-3.1-8B",
        ["A100-80GB", "H100-SXM"],
        1,
        workload=latency.workload(data.load_trace("azure-conv-2023"), samples=64),
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
    sweep = worksheet["overview"]
    spec = charts.cost_vs_sla(sweep, sla=2.0).to_dict()
    rows = [r for rs in layer_data(spec).values() for r in rs if "gpu" in r]
    for row in rows:
        if row.get("usd_per_hour") is None or "tensor_parallel" not in row:
            continue
        costs = sweep.usd_per_hour.sel(gpu=row["gpu"], sla=row["sla"]).squeeze()
        assert row["usd_per_hour"] == pytest.approx(float(costs.min()))


def test_the_cost_chart_gives_every_gpu_its_own_colour():
    import pandas as pd

    from capnb.charts._capacity import _cost_chart

    # the default palette has ten colours; the catalog has twelve GPUs
    for n, scheme in ((3, "tableau10"), (12, "tableau20")):
        gpus = [f"gpu-{i}" for i in range(n)]
        table = pd.DataFrame({"gpu": gpus, "sla": 1.0, "usd_per_hour": 1.0})
        spec = _cost_chart(table, title="cost", gpus=gpus).to_dict()
        assert spec["layer"][0]["encoding"]["color"]["scale"]["scheme"] == scheme


def test_plan_contrast_shows_both_plans(short):
    spec = charts.plan_contrast(capacity.contrast(short, 2.0, 20.0, metric="ttft")).to_dict()
    rows = [r for rs in layer_data(spec).values() for r in rs if "plan" in r]
    assert {r["plan"] for r in rows} == {"by max concurrency", "by latency (capnb)"}


def test_plan_contrast_says_why_compute_is_not_known():
    """A table of one's own with no token counts: compute use is not known, and the chart says so.

    It had drawn an empty panel on a 0 % axis, and the worksheet's table read "nan%".
    """
    import pandas as pd

    table = pd.DataFrame({"concurrency": [1, 8, 64], "ttft_p99_ms": [150, 280, 2070],
                          "e2e_mean_ms": [5674, 6333, 11892]})  # fmt: skip
    curve = data.read_latency_table(table, model="Qwen3-8B", gpu="L40S", tensor_parallel=1)
    contrast = capacity.contrast(curve, 1.0, 30.0, metric="ttft")
    assert np.isnan(contrast.compute_utilisation.values).all()
    assert "prompt_tokens" in contrast.attrs["compute_note"]
    spec = json.dumps(charts.plan_contrast(contrast).to_dict())
    assert "compute in use: not known" in spec and "prompt_tokens" in spec
    known = capacity.contrast(data.load_latency_curve("dstack-vllm-mi300x-short"), 2.0, 20.0,
                              metric="ttft")  # fmt: skip
    assert "compute_note" not in known.attrs
    assert "not known" not in json.dumps(charts.plan_contrast(known).to_dict())


def test_worksheet_headless_defaults_and_changes(worksheet):
    assert worksheet.inputs["sla"] == 2.0 and worksheet.inputs["metric"] == "ttft"
    assert int(worksheet["result"].safe_concurrency) == 24
    assert worksheet.answer.startswith("At ttft P99 <= 2.00 s, one instance of Llama-3.1-405B")
    for name in ("curve", "throughput", "contrast", "cost"):
        worksheet.chart(name).to_dict()
    worksheet.set(sla=0.3)
    assert worksheet.answer.startswith("Infeasible: ttft P99 is already 315 ms")
    assert worksheet["contrast"] is not None
    worksheet.set(curve="analytic model", metric="e2e", sla=19.0)
    assert worksheet["curve"].attrs["kind"] == "analytic"
    assert "Llama-3.1-70B on 4 x H100-SXM" in worksheet.answer
    worksheet.set(curve="dstack-vllm-mi300x-short", metric="ttft", sla=2.0)
    assert worksheet.record().startswith("Inputs: curve = dstack-vllm-mi300x-short")
    with pytest.raises(InputError, match="unknown worksheet input"):
        worksheet.set(slo=1.0)


def test_the_curve_charts_safe_concurrency_is_bound_as_the_answer_says():
    # a report of Qwen3-32B on 2 x H100-SXM (engine model) answered "memory binds: the KV cache
    # holds no more" while the curve chart's label read "safe 196 (measured_range)": the chart's
    # SLA table checked memory at the article's accounting, which holds more than the engine's KV
    # budget, so the curve ended first
    ws = notebook.worksheet("03_capacity", **SMALL, CURVE="engine model", MODEL="Qwen3-32B",
                            GPU="H100-SXM", TENSOR_PARALLEL=2, SLA=1.0, QUANTILE=0.95)  # fmt: skip
    result = ws["result"]
    assert str(result.binding.values) == "memory", ws.answer
    at = ws["sla_table"].sel(sla=1.0, method="nearest")
    assert str(at.binding.values) == "memory"
    assert int(at.safe_concurrency) == int(result.safe_concurrency)


def test_worksheet_takes_a_users_own_curve():
    from pathlib import Path

    files = Path(__file__).parent / "fixtures" / "capacity" / "vllm"
    own = data.read_vllm_bench(files, model="gpt-oss-120b")
    ws = notebook.worksheet(
        "03_capacity", BENCHMARK=str(files), BENCHMARK_SETUP={"model": "gpt-oss-120b"},
        METRIC="ttft", SLA=1.0, WORKLOAD_SAMPLES=32, OVERVIEW_GPUS=["H100-SXM"],
        OVERVIEW_TENSOR_PARALLEL=[1],
    )  # fmt: skip
    assert ws.inputs["curve"] == "your curve"
    p32, p64 = (
        float(own.latency.sel(metric="ttft", latency_quantile=0.99, concurrency=c))
        for c in (32, 64)
    )
    assert int(ws["result"].safe_concurrency) == int(32 + (1.0 - p32) / (p64 - p32) * 32)
    assert ws["contrast"] is None  # the curve starts at 32: no single-request baseline
    assert "GPUs and cost not computed" in ws.answer  # the files name no GPU or TP


def test_the_overview_search_is_kept_and_only_repriced(monkeypatch):
    """The cost chart's search runs once per model and metric; a target or buffer re-prices it."""
    searches = []
    sweep = capacity.sweep

    def counted(*args, **kwargs):
        searches.append(kwargs["metric"])
        return sweep(*args, **kwargs)

    monkeypatch.setattr(capacity, "sweep", counted)
    ws = notebook.worksheet("03_capacity", **SMALL)
    assert searches == ["ttft"]
    overview = ws["overview"]
    ws.set(sla=3.0, gpu="H200", curve="dstack-vllm-mi300x-short")
    assert ws["overview"] is overview and searches == ["ttft"]  # not even re-priced
    ws.set(target_qps=35.0, buffer=1)
    assert searches == ["ttft"] and ws["overview"] is not overview
    # re-pricing the kept search is the capacity step's own answer for this target and buffer
    direct = sweep(
        "Llama-3.1-70B", SMALL["OVERVIEW_GPUS"], [1, 2, 4, 8], int(ws["overview"].seq_len.item()),
        [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0],
        workload=latency.workload(data.load_trace("azure-conv-2023"), samples=64),
        metric="ttft", target_qps=35.0, buffer=1,
    )  # fmt: skip
    assert ws["overview"].identical(direct)
    ws.set(metric="tpot")
    assert searches == ["ttft", "tpot"]
    ws.set(metric="ttft")  # kept: back to the first search without running it again
    assert searches == ["ttft", "tpot"]


def test_charts_redraw_only_when_what_they_read_changes(monkeypatch):
    ws = notebook.worksheet("03_capacity", **SMALL)
    for name in ws.charts:
        ws.attach(name, type("Handle", (), {"update": lambda self, drawing: None})())
    ws.set(target_qps=30.0)  # the operating point and the curve stay: so do their charts
    assert ws.last_redrawn == ["contrast", "cost"]
    ws.set(gpu="H200")  # a measured curve: the GPU only matters to the analytic model
    # the contrast reads the new plan and is drawn again, but looks the same: not sent
    assert ws.last_redrawn == []
    ws.set(sla=3.0)
    assert set(ws.last_redrawn) == {"curve", "throughput", "contrast", "cost"}


def test_every_control_keeps_a_usable_slider_track(worksheet):
    widths = {c.style.description_width for c in worksheet.controls.values()}
    assert widths == {"12em"}
    assert all(c.layout.width == "36em" for c in worksheet.controls.values())


def test_price_takes_a_search_and_names_what_else_it_got(short):
    w = latency.workload(prompt_tokens=[1000] * 8, output_tokens=[200] * 8)
    searched = capacity.sweep("Llama-3.1-8B", ["H100-SXM"], [1], 1200, [1.0], workload=w)
    priced = capacity.price(searched, 10.0)
    assert "usd_per_hour" not in searched and "usd_per_hour" in priced  # the search is untouched
    with pytest.raises(InputError, match="already priced"):
        capacity.price(priced, 20.0)
    with pytest.raises(InputError, match="no dim 'model'"):
        capacity.price(capacity.plan(short, 2.0, 20.0, metric="ttft"), 20.0)
    with pytest.raises(InputError, match="attr 'prompt_tokens'"):
        capacity.price(searched.drop_attrs(), 20.0)


def test_the_engine_curve_choice_runs_in_the_whole_notebook():
    """Worksheet 03 priced on the serving-engine model, every cell run (a later cell must not shadow
    the step's names), and a GPU change re-simulates."""
    import nbformat
    from nbclient import NotebookClient

    from capnb.report import _inject_parameters, worksheet_path

    nb = nbformat.read(worksheet_path("03_capacity"), as_version=4)
    _inject_parameters(nb, {**SMALL, "CURVE": "engine model", "MODEL": "Llama-3.1-8B",
                            "GPU": "H200", "TENSOR_PARALLEL": 1})  # fmt: skip
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "first = ws.answer\nws.set(gpu='H100-SXM')\n"
            "assert ws.error is None, ws.error\nassert ws['curve'].attrs['kind'] == 'engine'\n"
            "assert 'H100-SXM' in ws.answer and ws.answer != first\nprint('engine ok')"
        )
    )
    NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    assert "engine ok" in nb.cells[-1].outputs[0]["text"]


@pytest.mark.parametrize("setup", [{}, {"gpu": "H100-SXM", "tensor_parallel": 8}])
def test_a_users_curve_from_a_higher_concurrency_passes_the_worksheets_checks(setup):
    """Worksheet 03 on a user's own files, every cell run, its checks too: a curve measured from
    concurrency 32 has no single-request naive figure (``overstatement``), and files that name no
    GPU no ``gpus``; the checks read both, and ``capnb report`` dropped the page."""
    from pathlib import Path

    from capnb import report

    files = Path(__file__).parent / "fixtures" / "capacity" / "vllm"
    ran = report.execute("03_capacity", parameters={
        **SMALL, "BENCHMARK": str(files), "BENCHMARK_SETUP": {"model": "gpt-oss-120b", **setup},
        "METRIC": "ttft", "SLA": 1.0})  # fmt: skip
    printed = "".join(
        out.get("text", "")
        for cell in ran.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    )
    assert "checks passed:" in printed


def test_a_users_curve_stays_choosable_after_every_cell_ran():
    """Worksheet 03's calibration section named its calibration ``own``, the step's name for the
    user's benchmark curve: once every cell ran, choosing "your curve" again in the dropdown gave
    "curve: expected a latency curve" instead of the answer it first gave."""
    from pathlib import Path

    import nbformat
    from nbclient import NotebookClient

    from capnb.report import _inject_parameters, worksheet_path

    files = Path(__file__).parent / "fixtures" / "capacity" / "vllm"
    nb = nbformat.read(worksheet_path("03_capacity"), as_version=4)
    _inject_parameters(nb, {**SMALL, "BENCHMARK": str(files), "METRIC": "ttft", "SLA": 1.0,
                            "BENCHMARK_SETUP": {"model": "gpt-oss-120b"}})  # fmt: skip
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "first = ws.answer\nws.set(curve='dstack-vllm-mi300x-short')\n"
            "ws.set(curve='your curve')\nassert ws.error is None, ws.error\n"
            "assert ws.answer == first\nprint('own curve ok')"
        )
    )
    NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    assert "own curve ok" in nb.cells[-1].outputs[0]["text"]


def _own_runs(folder, rates):
    """vllm bench serve result files of Llama-3.1-8B on one H100, made by the engine model."""
    from capnb.latency.calibration import Calibration
    from capnb.records import Deployment, EngineSettings

    truth = Calibration(0.45, 0.7, 0.6, 4e-3, 2e-5, 2e-5, 0.03, fitted_on="truth")
    lengths = latency.workload(prompt_tokens=[512] * 4, output_tokens=[128] * 4)
    for rate in rates:
        curve = latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), lengths,
                               request_rate=[rate], requests=200, calibration=truth,
                               warmup_share=0.0, settings=EngineSettings("vllm-v1"))  # fmt: skip
        lat, mean = curve.latency.sel(request_rate=rate), curve.mean_latency.sel(request_rate=rate)
        record = {"request_rate": rate, "completed": 200, "total_input_tokens": 512 * 200,
                  "total_output_tokens": 128 * 200, "duration": 200 / rate,
                  "request_throughput": 0.98 * rate}  # fmt: skip
        for metric, key in (("ttft", "ttft"), ("tpot", "tpot"), ("e2e", "e2el")):
            record[f"mean_{key}_ms"] = 1000 * float(mean.sel(metric=metric))
            record[f"median_{key}_ms"] = 1000 * float(lat.sel(metric=metric, latency_quantile=0.5))
            record[f"p99_{key}_ms"] = 1000 * float(lat.sel(metric=metric, latency_quantile=0.99))
        (folder / f"rate{rate:g}.json").write_text(json.dumps(record))


def test_the_own_run_section_reads_the_users_runs_from_the_parameters(tmp_path):
    """Worksheet 03's own-run calibration read the bundled 405B runs whatever the parameters said:
    its deployment (Llama-3.1-405B FP8 on 8 x H100), request lengths (ShareGPT's), held-out rate
    (32) and its '10.2 requests/s' were written into the cells. Runs of one's own at 2, 6 and 12
    requests/s now calibrate on 2 and 12, predict 6, and the sentences name their own numbers."""
    from capnb import report

    _own_runs(tmp_path, [2.0, 6.0, 12.0])
    setup = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1, "engine": "vllm",
             "engine_version": "0.11.0"}  # fmt: skip
    ran = report.execute("03_capacity", parameters={
        **SMALL, "OVERVIEW_GPUS": ["H100-SXM"], "RUNS": str(tmp_path), "RUNS_SETUP": setup,
        "SLA": 0.5, "TARGET_QPS": 30.0})  # fmt: skip
    printed = "".join(
        out.get("text", "")
        for cell in ran.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    )
    assert "fitted on own runs on 1 x H100-SXM, vllm-v1 (request_rate 2, 12)" in printed
    # (it said "measured: none read from the runs": read_bench_runs kept no request_throughput)
    assert "up to 13.5 requests/s (measured: 2.0 at 2, 5.9 at 6, 11.8 at 12 requests/s)" in printed
    assert "Llama-3.1-8B on 1 x H100-SXM" in printed and "405B on 8 x H100" not in printed
    assert "10.2" not in printed and "TTFT P99 <= 0.5 s:" in printed
    assert "for 30 requests/s" in printed
    charted = [json.dumps(out.get("data", {})) for cell in ran.cells if cell.cell_type == "code"
               for out in cell.outputs if "your runs" in json.dumps(out.get("data", {}))]  # fmt: skip
    assert len(charted) == 1 and charted[0].count("held out") >= 2  # the 6/s run's P50 and P99


def test_the_own_run_answer_sizes_the_traffic_not_the_runs_one_length(tmp_path):
    """Worksheet 03's own-run answer sized a closed loop of the runs' one mean length (result
    files keep no per-request lengths): identical requests start and finish together, and each
    wave's last prompt waits for the wave's prefill, a lockstep real traffic does not keep (an
    outside user's runs served 7.8 requests/s at P99 TTFT 285 ms; the answer said 2.1). It now
    sizes WORKLOAD's lengths, as a plan does."""
    import nbformat
    from nbclient import NotebookClient

    from capnb.report import _inject_parameters, worksheet_path

    _own_runs(tmp_path, [2.0, 6.0, 12.0])
    setup = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1, "engine": "vllm",
             "engine_version": "0.11.0"}  # fmt: skip
    nb = nbformat.read(worksheet_path("03_capacity"), as_version=4)
    _inject_parameters(nb, {**SMALL, "OVERVIEW_GPUS": ["H100-SXM"], "RUNS": str(tmp_path),
                            "RUNS_SETUP": setup, "SLA": 0.5, "TARGET_QPS": 30.0})  # fmt: skip
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "ran_lengths = (float(run_workload.prompt_tokens.mean()),\n"
            "               float(run_workload.output_tokens.mean()))\n"
            "assert ran_lengths == (512.0, 128.0), ran_lengths\n"
            "drawn, mean = closed.attrs['prompt_tokens'], float(traffic.prompt_tokens.mean())\n"
            "assert abs(drawn / mean - 1) < 0.1 and mean > 1000, (drawn, mean)  # not 512\n"
            "print('sized on the traffic')"
        )
    )
    NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    assert "sized on the traffic" in nb.cells[-1].outputs[0]["text"]


def test_the_own_run_band_is_the_plans_own_run_band():
    """The engine calibrated on one's own runs: worksheet 03 drew and priced it with the bundled
    engine's held-out band (TTFT 0.69-4.70x), where the plan bands such a calibration with the
    own-run held-out error (0.59-2.06x, ``capnb.capacity.engine_sweep``'s ``calibration=``)."""
    import nbformat
    from nbclient import NotebookClient

    from capnb.report import _inject_parameters, worksheet_path

    nb = nbformat.read(worksheet_path("03_capacity"), as_version=4)
    _inject_parameters(nb, SMALL)
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "band = capnb.latency.validate.error_band(METRIC, model='own-run')[:2]\n"
            "assert (low, high) == band, ((low, high), band)\n"
            "again = capnb.capacity.plan(closed, SLA, TARGET_QPS, metric=METRIC, buffer=BUFFER,\n"
            "                            latency_band=band)\n"
            "assert answer.per_instance_qps_low.identical(again.per_instance_qps_low)\n"
            "print('band ok')"
        )
    )
    NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    assert "band ok" in nb.cells[-1].outputs[0]["text"]


def test_the_own_run_section_takes_every_run_for_calibration():
    """RUNS_CALIBRATE naming every bundled run (16, 32 and 1,000 requests/s) left no held-out run
    to take the request lengths from: the section failed on an empty workload. Every run's
    requests give the lengths then; a load the runs lack is an error naming RUNS_CALIBRATE."""
    from capnb import report

    ran = report.execute("03_capacity", parameters={**SMALL, "RUNS_CALIBRATE": [16, 32, 1000]})
    printed = "".join(
        out.get("text", "")
        for cell in ran.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    )
    assert "vllm-v0 (request_rate 16, 32, 1000)" in printed and "checks passed" in printed
    with pytest.raises(Exception, match=r"RUNS_CALIBRATE = \[8\]: the runs' loads are"):
        report.execute("03_capacity", parameters={**SMALL, "RUNS_CALIBRATE": [8]})


def test_the_own_run_answer_says_where_the_band_meets_no_concurrency():
    """Found in ``capnb report`` on a plan whose TPOT bound binds (P99 TPOT <= 50 ms): the own-run
    answer holds 5 concurrent requests of the 405B on 8 x H100, but at the band's slow end none
    meets the SLA, and the cell failed on 'cannot convert float NaN to integer', which dropped
    worksheet 03 from the report; the sentence says so now. (At 50 ms the own-run answer of the
    6 December 2026 refit is infeasible, 52 ms at one request in flight: 60 ms was such a bound;
    on the refit with the serial front end 60 ms has a band at both ends and 50 ms is one again;
    on the refit of the KV cache profiled per GPU, 50 ms has a band at both ends and 47 ms is one;
    on the block-scaled FP8 refit, 47 ms has a band at both ends and 45 ms is one; on the refit
    with vLLM V1's kept preempted blocks, 45 ms has no own-run answer and 50 ms is one again.)"""
    from capnb import report

    ran = report.execute("03_capacity", parameters={**SMALL, "METRIC": "tpot", "SLA": 0.05})
    printed = "".join(
        out.get("text", "")
        for cell in ran.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    )
    assert re.search(
        r"TPOT P99 <= 0\.05 s: [\d.]+ requests/s per instance \(band none meets the SLA-", printed
    )
    assert "checks passed" in printed


def test_the_capacity_charts_tooltips_say_what_each_value_is_in_its_units(
    short, worksheet, tooltips
):
    # their tooltips read the tables' field names: 'usd_per_hour 41.2' (for what?),
    # 'tensor_parallel 2' (or 'TP 2'), 'binding latency', 'compute 3.1%', 'latency_s 0.84',
    # 'requests/s 1.9' (a unit, not a value: per instance)
    table = capacity.safe_concurrency(short, np.round(np.arange(0.5, 5.01, 0.5), 10), metric="ttft")
    drawn = {
        "latency": charts.latency_curve(short, metric="ttft", sla_table=table, sla=2.0),
        "throughput": charts.throughput_curve(
            short, capacity.plan(short, 2.0, 20.0, metric="ttft")
        ),
        "cost": charts.cost_vs_sla(worksheet["overview"], sla=2.0),
        "contrast": charts.plan_contrast(capacity.contrast(short, 2.0, 20.0, metric="ttft")),
    }
    raw = {"usd_per_hour", "tensor_parallel", "TP", "compute", "requests/s", "latency_s"}
    for name, chart in drawn.items():
        tips = tooltips(chart.to_dict())
        assert tips, name
        for tip in tips:
            title = tip.get("title", tip["field"])  # a field's name is no title
            assert "title" in tip and "_" not in title and title not in raw, (name, tip)
    cost = {t["field"]: t["title"] for t in tooltips(drawn["cost"].to_dict())}
    assert cost["tensor_parallel"] == "tensor-parallel degree (GPUs)"
    assert cost["usd_per_hour"] == "USD per hour for the target"

"""Benchmark readers on real files in the tools' formats, the bundled curves, and bad input."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from capnb import capacity, data, latency
from capnb.errors import CapnbError, ConfigError, InputError, UnknownNameError
from capnb.latency import _own

FIXTURES = Path(__file__).parent / "fixtures" / "capacity"
DSTACK = Path(data.dataset_path("benchmarks", "dstack"))


def p(curve, metric, q):
    return curve.latency.sel(metric=metric, latency_quantile=q).values


# -- vllm bench serve ----------------------------------------------------------------------------
def test_vllm_result_files_read_in_seconds_with_their_workload():
    curve = data.read_vllm_bench(sorted((FIXTURES / "vllm").glob("*.json")))
    assert curve.concurrency.values.tolist() == [32, 64, 128]
    # p99_ttft_ms of the 128-concurrency run, as written: 1681.945925400255 ms
    assert p(curve, "ttft", 0.99)[-1] == pytest.approx(1.681945925400255)
    assert p(curve, "tpot", 0.5)[0] == pytest.approx(7.6124500075944596e-3, rel=1e-12)
    assert curve.measured_qps.values[-1] == pytest.approx(17.546790950757263)
    # 500 prompts of 2,048 tokens (1,023,101 input tokens in all)
    assert curve.attrs["prompt_tokens"] == pytest.approx(1023101 / 500)
    assert curve.attrs["engine"] == "openai" and curve.attrs["model_id"] == "openai/gpt-oss-120b"
    # no e2el in these runs: the mean is derived, and says so
    assert any("mean e2e latency derived" in n for n in latency.notes(curve))
    assert np.isnan(p(curve, "e2e", 0.99)).all()


def test_vllm_appended_jsonl_and_a_directory_read_the_same():
    from_files = data.read_vllm_bench(sorted((FIXTURES / "vllm").glob("*.json")))
    from_lines = data.read_vllm_bench(FIXTURES / "vllm_appended.jsonl")
    from_dir = data.read_vllm_bench(FIXTURES / "vllm")
    for other in (from_lines, from_dir):
        np.testing.assert_array_equal(other.latency.values, from_files.latency.values)


def test_vllm_missing_field_names_the_file_and_field():
    with pytest.raises(
        ConfigError, match=r"vllm_missing_field.json: missing field 'total_output_tokens'"
    ):
        data.read_vllm_bench(FIXTURES / "vllm_missing_field.json")


def test_vllm_missing_latency_fields_is_an_error(tmp_path):
    record = json.loads((FIXTURES / "vllm_missing_field.json").read_text())
    record = {k: v for k, v in record.items() if not k.endswith("_ms")}
    record["total_output_tokens"] = 1
    (tmp_path / "run.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="missing latency fields"):
        data.read_vllm_bench(tmp_path / "run.json")


def _detailed_run(concurrency, ttfts, itls, outs, errors):
    latencies = [t + sum(i) for t, i in zip(ttfts, itls, strict=True)]
    return {
        "max_concurrency": concurrency, "completed": sum(1 for e in errors if not e),
        # about concurrency / mean e2e, as a closed loop measures it
        "request_throughput": float(concurrency), "total_input_tokens": 100 * len(ttfts),
        "total_output_tokens": sum(outs), "ttfts": ttfts, "itls": itls, "output_lens": outs,
        "latencies": latencies, "errors": errors, "p99_ttft_ms": 9999.0,
    }  # fmt: skip


def test_vllm_detailed_lists_recompute_percentiles_without_failed_requests(tmp_path):
    # five successful requests and one failure recorded as zero output and zero TTFT
    ttfts = [0.10, 0.20, 0.30, 0.40, 0.50, 0.0]
    itls = [[0.01] * 9, [0.02] * 9, [0.03] * 9, [0.04] * 9, [0.05] * 9, []]
    outs = [10, 10, 10, 10, 10, 0]
    errors = [""] * 5 + ["timeout"]
    for c in (1, 2):
        run = _detailed_run(c, ttfts, itls, outs, errors)
        (tmp_path / f"c{c}.json").write_text(json.dumps(run))
    curve = data.read_vllm_bench(tmp_path)
    # vLLM's percentiles: linear interpolation (P99 of [0.1 .. 0.5] is 0.4 + 0.96 x 0.1); the
    # summary's 9999 ms is ignored
    assert p(curve, "ttft", 0.5)[0] == pytest.approx(0.30)
    assert p(curve, "ttft", 0.99)[0] == pytest.approx(0.496)
    assert p(curve, "tpot", 0.5)[0] == pytest.approx(0.03)
    assert p(curve, "e2e", 0.99)[0] == pytest.approx(0.76 + 0.96 * (0.95 - 0.76))
    assert any("1 failed requests left out" in n for n in latency.notes(curve))


def test_vllm_summary_only_rate_run_is_refused(tmp_path):
    # a rate run has no fixed concurrency; without its per-request lists the requests that
    # produced no output cannot be left out of the throughput that would place it
    # (tests/test_vllm_bench_fixes.py places rate runs that keep their lists)
    record = json.loads((FIXTURES / "vllm_appended.jsonl").read_text().splitlines()[0])
    run = dict(record, max_concurrency=None, request_rate=2.0, request_throughput=2.0)
    run["mean_e2el_ms"] = run["median_e2el_ms"] = 5000.0
    run["p99_e2el_ms"] = 7500.0
    (tmp_path / "rate2.json").write_text(json.dumps(run))
    with pytest.raises(ConfigError, match=r"rate2.json: .*keeps only its summary"):
        data.read_vllm_bench(tmp_path)


def test_vllm_rate_run_without_e2e_cannot_be_placed(tmp_path):
    record = json.loads((FIXTURES / "vllm_appended.jsonl").read_text().splitlines()[0])
    (tmp_path / "r.json").write_text(json.dumps(dict(record, max_concurrency=None, request_rate=3)))
    (tmp_path / "s.json").write_text(json.dumps(dict(record, max_concurrency=None, request_rate=4)))
    with pytest.raises(ConfigError, match="no fixed concurrency"):
        data.read_vllm_bench(tmp_path)


def test_vllm_runs_with_different_percentiles_are_an_error(tmp_path):
    lines = (FIXTURES / "vllm_appended.jsonl").read_text().splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    first["p90_ttft_ms"] = first["p99_ttft_ms"] * 0.9
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    with pytest.raises(ConfigError, match="no ttft P90 although other runs have it"):
        data.read_vllm_bench(tmp_path)


def test_vllm_invalid_json_names_the_file(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json: not valid JSON"):
        data.read_vllm_bench(tmp_path / "bad.json")


# -- where a run goes on the curve: its concurrency, or Little's law ---------------------------------
def _summary_run(concurrency, e2e_s, qps, *, rate="inf", prompts=None, **extra):
    """A vllm bench serve --save-result summary: 128 output tokens, latencies in ms."""
    n = prompts or max(100, 4 * (concurrency or 1))
    ttft = 0.1 * e2e_s
    tpot = (e2e_s - ttft) / 127
    record = {
        "backend": "vllm", "num_prompts": n, "request_rate": rate, "max_concurrency": concurrency,
        "duration": n / qps, "completed": n, "total_input_tokens": 512 * n,
        "total_output_tokens": 128 * n, "request_throughput": qps,
    }  # fmt: skip
    for name, mean in (("ttft", ttft), ("tpot", tpot), ("e2el", e2e_s)):
        record[f"mean_{name}_ms"] = record[f"median_{name}_ms"] = 1000 * mean
        record[f"p99_{name}_ms"] = 1500 * mean
    return record | extra


def _write(folder, runs):
    folder.mkdir(exist_ok=True)
    for name, run in runs.items():
        (folder / name).write_text(json.dumps(run))
    return folder


@pytest.mark.parametrize("ratio", [0.55, 1.0, 1.9])
def test_a_closed_loop_stays_at_its_concurrency_while_its_throughput_agrees(tmp_path, ratio):
    # ratio: max_concurrency / mean e2e against the measured request_throughput
    runs = {f"c{c}.json": _summary_run(c, 2.0 + c / 8, c / (2.0 + c / 8) / ratio) for c in (4, 16)}
    curve = data.read_vllm_bench(_write(tmp_path / "runs", runs))
    assert curve.concurrency.values.tolist() == [4, 16]
    assert not any("Little's law" in n for n in latency.notes(curve))


@pytest.mark.parametrize(("ratio", "apart"), [(2.1, "2.1x apart"), (1 / 2.1, "2.1x apart"),
                                              (1000.0, "1,000.0x apart")])  # fmt: skip
def test_a_closed_loop_whose_throughput_disagrees_is_an_error(tmp_path, ratio, apart):
    # 1000x: seconds written into the *_ms fields; beyond 2x either way: an error naming the file
    runs = {
        "c4.json": _summary_run(4, 2.5, 4 / 2.5),
        "c16.json": _summary_run(16, 4.0, 4.0 / ratio),
    }
    with pytest.raises(ConfigError) as err:
        data.read_vllm_bench(_write(tmp_path / "runs", runs))
    message = str(err.value)
    assert message.startswith("c16.json: the latencies and the throughput this run measured")
    assert "max_concurrency 16 / mean e2e 4 s = 4 requests/s" in message
    assert f"request_throughput {4.0 / ratio:.4g} requests/s, {apart}" in message
    assert "check the latency units" in message.lower() and "held 16 requests" in message


def test_the_bundled_closed_loops_agree_with_their_throughput_well_inside_the_tolerance():
    # the three gpt-oss runs derive their mean e2e (no e2el): C / L is 0.96, 1.05 and 1.25
    curve = data.read_vllm_bench(FIXTURES / "vllm")
    e2e = curve.mean_latency.sel(metric="e2e").values
    ratio = curve.concurrency.values / e2e / curve.measured_qps.values
    assert ((ratio > 0.9) & (ratio < 1.3)).all()


def test_rate_capped_runs_are_placed_by_littles_law_with_a_note(tmp_path):
    runs = {
        "c1.json": _summary_run(1, 1.5, 1 / 1.5),
        # --request-rate 2 --max-concurrency 64: 2 requests/s x 2 s = 4 in flight, never 64
        "r2-c64.json": _summary_run(64, 2.0, 2.0, rate=2.0),
        # --request-rate 4 --max-concurrency 8: 3.9 x 2.2 = 8.58, capped at 8
        "r4-c8.json": _summary_run(8, 2.2, 3.9, rate=4.0),
    }
    curve = data.read_vllm_bench(_write(tmp_path / "runs", runs))
    assert curve.concurrency.values.tolist() == [1, 4, 8]
    notes = latency.notes(curve)
    assert any(n.startswith("r2-c64.json: a run at request_rate 2 with max_concurrency 64") and
               "Little's law" in n and "= 4): concurrency 4" in n for n in notes)  # fmt: skip
    assert any(n.startswith("r4-c8.json") and "capped at 8" in n for n in notes)
    # the plan's throughput is what the files measured (read at 64, it claimed 32 requests/s)
    plan = capacity.plan(curve, 10.0, 10.0, metric="ttft", memory_limit=None)
    assert float(plan.per_instance_qps) <= 1.01 * float(curve.measured_qps.max())


def test_an_unlimited_run_and_a_short_run_are_placed_at_their_mean_in_flight(tmp_path):
    runs = {
        "c8.json": _summary_run(8, 2.0, 4.0),
        # no max_concurrency, request_rate inf: 1000 prompts at once, 5 x 20 s = 100 in flight
        "all.json": _summary_run(None, 20.0, 5.0, prompts=1000),
        # 50 prompts at max_concurrency 256: 4.5 x 8 s = 36 in flight
        "short.json": _summary_run(256, 8.0, 4.5, prompts=50),
    }
    curve = data.read_vllm_bench(_write(tmp_path / "runs", runs))
    assert curve.concurrency.values.tolist() == [8, 36, 100]
    notes = latency.notes(curve)
    assert any(n.startswith("all.json: a run with no max_concurrency") for n in notes)
    assert any(
        n.startswith("short.json: a run of 50 prompts at max_concurrency 256") for n in notes
    )


def test_a_run_holding_more_than_it_could_or_without_a_mean_latency_is_an_error(tmp_path):
    runs = {"c8.json": _summary_run(8, 2.0, 4.0),
            "all.json": _summary_run(None, 2000.0, 5.0, prompts=100)}  # fmt: skip
    with pytest.raises(ConfigError, match=r"all\.json: .* = 10,000 requests in flight on average, "
                                          r"more than the 100 the run could hold"):  # fmt: skip
        data.read_vllm_bench(_write(tmp_path / "big", runs))
    bare = {k: v for k, v in runs["all.json"].items() if not k.startswith("mean_")}
    with pytest.raises(ConfigError, match=r"all\.json: .*no mean e2e latency"):
        data.read_vllm_bench(
            _write(tmp_path / "bare", {"c8.json": runs["c8.json"], "all.json": bare})
        )


def test_rate_runs_rounding_to_one_concurrency_say_where_littles_law_put_them(tmp_path):
    ttfts, itls, outs, errors = [0.05] * 10, [[0.01] * 9] * 10, [10] * 10, [""] * 10
    runs = {}
    for rate, duration in ((0.1, 100.0), (1.0, 10.0), (2.0, 5.0)):  # 0.014, 0.14, 0.28 in flight
        run = _detailed_run(1, ttfts, itls, outs, errors)
        runs[f"rate{rate:g}.json"] = run | {
            "max_concurrency": None, "request_rate": rate, "duration": duration
        }  # fmt: skip
    with pytest.raises(InputError) as err:
        data.read_vllm_bench(_write(tmp_path / "runs", runs))
    message = str(err.value)
    assert "concurrency 1 appears more than once (rate0.1.json, rate1.json, rate2.json)" in message
    assert "placed them by Little's law" in message and "at 0.014, 0.14, 0.28 requests" in message
    assert "--max-concurrency" in message and "keep one measurement" not in message


# -- other result files: appended runs, SGLang, P100, JSON that is no result, file order -----------
def test_an_appended_result_file_with_a_json_suffix_reads_as_read_vllm_bench_reads_it(tmp_path):
    lines = (FIXTURES / "vllm_appended.jsonl").read_text().splitlines()
    path = tmp_path / "results.json"
    path.write_text("\n".join(lines))  # vllm bench serve --append-result: one object a line
    assert data.benchmark_format(path) == "vllm"
    curve = data.read_benchmark(path)
    expected = data.read_vllm_bench(path)
    assert curve.concurrency.values.tolist() == [32, 64, 128]
    np.testing.assert_array_equal(curve.latency.values, expected.latency.values)


def _sglang_run(concurrency, e2e_ms, qps):
    n = 10 * concurrency
    return {
        "backend": "sglang-oai", "dataset_name": "random", "request_rate": math.inf,
        "max_concurrency": concurrency, "random_range_ratio": 0.5, "duration": n / qps,
        "completed": n, "total_input_tokens": 1024 * n, "total_output_tokens": 200 * n,
        "request_throughput": qps, "mean_e2e_latency_ms": e2e_ms, "median_e2e_latency_ms": e2e_ms,
        "std_e2e_latency_ms": 100.0, "p99_e2e_latency_ms": 1.6 * e2e_ms, "mean_ttft_ms": 50.0,
        "median_ttft_ms": 45.0, "p99_ttft_ms": 90.0, "mean_tpot_ms": 10.0, "median_tpot_ms": 9.0,
        "p99_tpot_ms": 14.0, "mean_itl_ms": 10.0, "median_itl_ms": 9.0, "p95_itl_ms": 12.0,
        "p99_itl_ms": 20.0, "concurrency": 0.97 * concurrency,
    }  # fmt: skip


def test_sglang_e2e_latency_keys_are_the_e2e_metric(tmp_path):
    # output lengths vary (random_range_ratio 0.5): mean TTFT + mean TPOT x 199 would be 2.04 s
    path = tmp_path / "sglang.jsonl"
    path.write_text("\n".join(json.dumps(_sglang_run(c, e, c / e * 1000))
                              for c, e in ((4, 2500.0), (16, 3000.0))))  # fmt: skip
    curve = data.read_benchmark(path)
    assert p(curve, "e2e", 0.99).tolist() == pytest.approx([4.0, 4.8])
    assert p(curve, "e2e", 0.5).tolist() == pytest.approx([2.5, 3.0])
    assert curve.mean_latency.sel(metric="e2e").values.tolist() == pytest.approx([2.5, 3.0])
    assert not any("derived" in n for n in latency.notes(curve))
    plan = capacity.plan(curve, 4.5, 10.0, metric="e2e", memory_limit=None)
    assert 4 < int(plan.safe_concurrency) < 16


def test_an_sglang_run_without_max_concurrency_is_placed_at_its_measured_concurrency(tmp_path):
    unlimited = _sglang_run(64, 6000.0, 8.0) | {"max_concurrency": None, "concurrency": 47.6}
    path = tmp_path / "sglang.jsonl"  # SGLang writes no num_prompts
    path.write_text("\n".join(json.dumps(r) for r in (_sglang_run(4, 2500.0, 1.6), unlimited)))
    curve = data.read_vllm_bench(path)
    assert curve.concurrency.values.tolist() == [4, 48]
    assert any("SGLang's measured concurrency = 47.6" in n for n in latency.notes(curve))


def test_sglang_runs_at_request_rates_are_placed_at_their_measured_concurrency(tmp_path):
    # bench_serving --request-rate 2 / 6 / 12, no --max-concurrency, summary only: SGLang writes
    # max_concurrency null and its measured concurrency (sum of e2e / duration); was refused
    runs = [
        _sglang_run(8, e2e, qps) | {"request_rate": rate, "max_concurrency": None, "concurrency": c}
        for rate, e2e, qps, c in ((2.0, 2100.0, 1.98, 4.16), (6.0, 2600.0, 5.9, 15.3),
                                  (12.0, 4200.0, 11.4, 47.9))
    ]  # fmt: skip
    path = tmp_path / "online.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in runs))
    curve = data.read_benchmark(path)
    assert curve.concurrency.values.tolist() == [4, 15, 48]
    assert any(
        n.startswith("online.jsonl line 3: a run at request_rate 12 with no max_concurrency holds")
        and "SGLang's measured concurrency = 47.9" in n
        for n in latency.notes(curve)
    )
    # vllm bench serve's summary of such a run has no measured concurrency: still refused
    del runs[0]["concurrency"]
    path.write_text(json.dumps(runs[0]))
    with pytest.raises(ConfigError, match=r"a run at request_rate 2\.0 has no fixed concurrency"):
        data.read_benchmark(path)


def test_p100_keys_are_skipped_with_a_note_and_a_percentile_above_it_names_file_and_key(tmp_path):
    lines = (FIXTURES / "vllm_appended.jsonl").read_text().splitlines()
    runs = [json.loads(line) for line in lines]
    for run in runs:  # --metric-percentiles 99,100
        for metric in ("ttft", "tpot", "itl"):
            run[f"p100_{metric}_ms"] = 2 * run[f"p99_{metric}_ms"]
    folder = _write(tmp_path / "p100", {f"c{r['max_concurrency']}.json": r for r in runs})
    curve = data.read_benchmark(folder)
    assert curve.concurrency.values.tolist() == [32, 64, 128]
    assert 1.0 not in curve.latency_quantile.values.tolist()
    assert any(n.startswith("p100_*_ms keys (P100, the maximum") for n in latency.notes(curve))
    runs[1]["p150_ttft_ms"] = 1.0
    folder = _write(tmp_path / "p150", {f"c{r['max_concurrency']}.json": r for r in runs})
    with pytest.raises(
        ConfigError, match=r"^c64\.json: key 'p150_ttft_ms': 'p150' is not a percentile"
    ):
        data.read_benchmark(folder)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("profile_export_genai_perf.json",
         {"request_throughput": {"unit": "requests/sec", "avg": 2.5},
          "time_to_first_token": {"unit": "ms", "avg": 48, "p99": 70},
          "input_config": {"concurrency": 8}},
         r"a GenAI-Perf / AIPerf JSON export, not a vllm bench serve result; .*"
         r"analyze_export_genai_perf\.csv"),
        ("llama_1024_256_summary.json",
         {"num_concurrent_requests": 8, "results_ttft_s_quantiles_p99": 0.07,
          "results_num_completed_requests": 80},
         r"an LLMPerf summary .*does not read LLMPerf's format"),
        # LLMPerf's per-request file, beside its summary (ray-project/llmperf-leaderboard)
        ("llama_1024_256_individual_responses.json",
         [{"error_code": None, "error_msg": "", "ttft_s": 0.3, "inter_token_latency_s": 0.02,
           "end_to_end_latency_s": 2.5, "number_output_tokens": 128}],
         r"an LLMPerf per-request file .*does not read LLMPerf's format"),
        # vLLM's nightly-benchmark table, beside the runs it summarises (a JSON list of rows)
        ("benchmark_results.json", [{"Test name": "tp8_qps_01", "Mean TTFT (ms)": 65.3}],
         r"not a vllm bench serve or SGLang bench_serving result \(a JSON list, where a result "
         r"is one JSON object\); capnb reads .*: move other JSON files"),
        ("server_config.json", {"model": "x", "tensor_parallel_size": 1},
         r"not a vllm bench serve or SGLang bench_serving result .*its keys: model, "
         r"tensor_parallel_size\); capnb reads"),
    ],
)  # fmt: skip
def test_json_that_is_no_result_says_what_it_is_and_what_capnb_reads(tmp_path, name, content,
                                                                      message):  # fmt: skip
    path = tmp_path / name
    path.write_text(json.dumps(content))
    with pytest.raises(ConfigError, match=message):
        data.benchmark_format(path)
    folder = tmp_path / "results"  # among good results, named by file, before 'missing field'
    shutil.copytree(FIXTURES / "vllm", folder)
    (folder / name).write_text(json.dumps(content))
    with pytest.raises(ConfigError, match=rf"^{name.replace('.', '[.]')}: (a|an|not) "):
        data.read_benchmark(folder)


def test_files_in_text_order_are_sorted_without_a_note_and_disordered_lines_are_noted(tmp_path):
    # 1p1d_conc128..., conc32..., conc64...: text order is not concurrency order
    assert not any(
        "sorted them" in n for n in latency.notes(data.read_vllm_bench(FIXTURES / "vllm"))
    )
    runs = {f"c{c}.json": _summary_run(c, 2.0 + c / 8, c / (2.0 + c / 8)) for c in (1, 16, 2, 128)}
    curve = data.read_vllm_bench(_write(tmp_path / "runs", runs))
    assert curve.concurrency.values.tolist() == [1, 2, 16, 128]
    assert not any("sorted them" in n for n in latency.notes(curve))
    lines = (FIXTURES / "vllm_appended.jsonl").read_text().splitlines()
    (tmp_path / "shuffled.jsonl").write_text("\n".join([lines[1], lines[0], lines[2]]))
    assert any(
        "sorted them" in n for n in latency.notes(data.read_vllm_bench(tmp_path / "shuffled.jsonl"))
    )


# -- AIPerf and GenAI-Perf ------------------------------------------------------------------------
def test_aiperf_docs_example_reads_in_seconds():
    path = FIXTURES / "aiperf" / "profile_export_aiperf.csv"
    with pytest.raises(InputError, match="needs at least 2 concurrency levels, got 1"):
        data.read_aiperf(path)  # placed by Little's law, but one run is not a curve
    other = FIXTURES / "aiperf" / "dstack_vllm_c8_profile_export_aiperf.csv"
    curve = data.read_aiperf({1: path, 8: other})
    # Time to First Token (ms) p50 787.54 and p99 4119.33; Inter Token Latency (ms) avg 51.76
    assert p(curve, "ttft", 0.5)[0] == pytest.approx(0.78754)
    assert p(curve, "ttft", 0.99)[0] == pytest.approx(4.11933)
    assert curve.mean_latency.sel(metric="tpot").values[0] == pytest.approx(0.05176)
    assert curve.measured_qps.values[0] == pytest.approx(13.16)
    # Request Latency is in the docs example only: dropped, and said so
    assert np.isnan(p(curve, "e2e", 0.99)).all()
    assert any("dropped" in n for n in latency.notes(curve))


def test_an_aiperf_rate_run_holding_more_requests_than_it_sent_is_refused(tmp_path):
    # Little's law placed a run at whatever its throughput x latency gave: a latency a thousand
    # times too large put 200 requests at 86,000 in flight, a concurrency no run held
    fixture = (FIXTURES / "aiperf" / "profile_export_aiperf.csv").read_text()
    seconds = tmp_path / "seconds.csv"
    seconds.write_text(
        fixture.replace("Request Latency (ms),6550.36", "Request Latency (ms),6550360")
    )
    with pytest.raises(ConfigError, match=r"seconds\.csv: .* more than the 200 the run sent"):
        data.read_aiperf(seconds)
    # the file as written: 13.16 requests/s x 6.55 s = 86 in flight, of 200 sent
    fine = tmp_path / "fine.csv"
    fine.write_text(fixture)
    with pytest.raises(InputError, match="needs at least 2 concurrency levels"):
        data.read_aiperf(fine)  # (placed, then refused for being one run: not for the count)


def _aiperf_rate_run(path, qps, latency_ms, ttft_ms=300.0, itl_ms=20.0):
    """A per-run export in AIPerf's format (Metric,avg,... then Metric,Value), of a rate run."""
    rows = [
        "Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std",
        f"Time to First Token (ms),{ttft_ms},,,,,,,{ttft_ms * 0.9},,,,{ttft_ms * 2},",
        f"Inter Token Latency (ms),{itl_ms},,,,,,,{itl_ms * 0.95},,,,{itl_ms * 1.5},",
        "Output Sequence Length (tokens),101.00,,,,,,,,,,,,",
    ]
    if latency_ms is not None:
        rows.insert(
            1, f"Request Latency (ms),{latency_ms},,,,,,,{latency_ms},,,,{latency_ms * 1.6},"
        )
    rows += ["", "Metric,Value", f"Request Throughput (requests/sec),{qps}", ""]
    path.write_text("\n".join(rows))
    return path


def test_aiperf_runs_at_a_request_rate_are_placed_by_littles_law(tmp_path):
    # read_aiperf required a concurrency for every per-run export: runs at --request-rate have none
    slow = _aiperf_rate_run(tmp_path / "rate2.csv", 2.0, 2300.0)  # 2/s x 2.3 s = 4.6 in flight
    fast = _aiperf_rate_run(tmp_path / "rate6.csv", 6.0, 2600.0)  # 6/s x 2.6 s = 15.6
    curve = data.read_aiperf([slow, fast])
    assert curve.concurrency.values.tolist() == [5, 16]
    assert curve.measured_qps.values.tolist() == [2.0, 6.0]
    notes = latency.notes(curve)
    assert any(
        "rate2.csv: a per-run export records no concurrency" in n
        and "Little's law" in n
        and "2 requests/s x 2.3 s mean request latency = 4.6): concurrency 5" in n
        for n in notes
    )
    # mixed with a run at a fixed concurrency; no Request Latency: derived from TTFT and ITL
    derived = _aiperf_rate_run(tmp_path / "rate3.csv", 3.0, None)  # 0.3 + 0.02 x 100 = 2.3 s
    fixed = FIXTURES / "aiperf" / "dstack_vllm_c64_profile_export_aiperf.csv"
    mixed = data.read_aiperf([derived, fixed], concurrency=[None, 64])
    assert mixed.concurrency.values.tolist() == [7, 64]
    assert any("rate3.csv" in n and "(derived: mean TTFT" in n for n in latency.notes(mixed))
    # two rate runs that round to one concurrency: the error says they were placed
    with pytest.raises(InputError, match=r"concurrency 5 appears more than once .*Little's law"):
        data.read_aiperf([slow, _aiperf_rate_run(tmp_path / "again.csv", 2.0, 2400.0)])
    # no throughput: nothing to place it by
    bare = tmp_path / "bare.csv"
    bare.write_text(slow.read_text().split("\n\n")[0] + "\n")
    with pytest.raises(
        ConfigError, match=r"bare\.csv: a run given no concurrency .*Request Throughput"
    ):
        data.read_aiperf([bare, fast])


def test_aiperf_per_run_files_sweep_file_and_analyze_file_agree():
    runs = {
        c: FIXTURES / "aiperf" / f"dstack_vllm_c{c}_profile_export_aiperf.csv"
        for c in (1, 8, 64, 512)
    }
    per_run = data.read_aiperf(runs)
    sweep = data.read_aiperf(FIXTURES / "aiperf" / "dstack_vllm_profile_export_aiperf_sweep.csv")
    analyze = data.read_aiperf(
        FIXTURES / "genai_perf" / "dstack_vllm_analyze_export_genai_perf.csv"
    )
    dstack = data.load_latency_curve("dstack-vllm-mi300x-short")
    at = dstack.sel(concurrency=[1, 8, 64, 512])
    for curve in (per_run, sweep, analyze):
        assert curve.concurrency.values.tolist() == [1, 8, 64, 512]
        np.testing.assert_allclose(p(curve, "ttft", 0.99), p(at, "ttft", 0.99), rtol=1e-6)
        np.testing.assert_allclose(p(curve, "tpot", 0.99), p(at, "tpot", 0.99), rtol=1e-6)
        np.testing.assert_allclose(curve.measured_qps, at.measured_qps, rtol=1e-6)


def test_genai_perf_thousands_separators_and_units():
    curve = data.read_aiperf(
        [
            FIXTURES / "genai_perf" / "deepseek_r1_c1_profile_export_genai_perf.csv",
            FIXTURES / "genai_perf" / "c144_profile_export_genai_perf.csv",
        ],
        concurrency=[1, 144],
    )
    # "5,919.16" ms avg request latency; "101,001.72" ms p99 at concurrency 144
    assert curve.mean_latency.sel(metric="e2e").values[0] == pytest.approx(5.91916)
    assert p(curve, "e2e", 0.99)[1] == pytest.approx(101.00172)
    assert curve.measured_qps.values.tolist() == pytest.approx([0.17, 1.70])
    assert curve.attrs["output_tokens"] == pytest.approx((511.90 + 241.75) / 2)


def test_genai_perf_analyze_example_with_duplicate_concurrency_is_an_error():
    with pytest.raises(InputError, match="concurrency 1 appears more than once"):
        data.read_aiperf(FIXTURES / "genai_perf" / "analyze_export_genai_perf_docs.csv")


def test_aiperf_unknown_unit_names_the_row(tmp_path):
    text = (FIXTURES / "aiperf" / "profile_export_aiperf.csv").read_text()
    (tmp_path / "x.csv").write_text(
        text.replace("Request Latency (ms)", "Request Latency (fortnights)")
    )
    with pytest.raises(InputError, match=r"Request Latency \(fortnights\).*unknown time unit"):
        data.read_aiperf(
            {1: tmp_path / "x.csv", 2: FIXTURES / "aiperf" / "profile_export_aiperf.csv"}
        )


def test_aiperf_file_without_latency_rows_is_an_error(tmp_path):
    (tmp_path / "x.csv").write_text("Metric,Value\nRequest Throughput (requests/sec),1.0\n")
    with pytest.raises(ConfigError, match="no latency rows"):
        data.read_aiperf({1: tmp_path / "x.csv", 2: tmp_path / "x.csv"})


# -- the plain table ---------------------------------------------------------------------------------
def test_table_reads_units_workload_and_throughput():
    curve = data.read_latency_table(FIXTURES / "table_tgi_long.csv", gpu="MI300X", engine="TGI")
    # dstack TGI long, concurrency 64: P99 TTFT 776,547.49 ms... (this file's last row)
    raw = pd.read_csv(DSTACK / "amd_tgi_vs_vllm_tgi_result_tgi_long.csv")
    np.testing.assert_allclose(p(curve, "ttft", 0.99), raw["P99 TTFT (ms)"] / 1e3)
    assert curve.attrs["gpu"] == "MI300X"
    assert curve.attrs["prompt_tokens"] == pytest.approx(10000)


def test_table_from_a_dataframe_needs_units_when_columns_carry_none():
    frame = pd.DataFrame({"concurrency": [1, 2], "e2e_p99": [900, 1000], "e2e_mean": [800, 850]})
    with pytest.raises(ConfigError, match="has no time unit"):
        data.read_latency_table(frame)
    curve = data.read_latency_table(frame, units="ms")
    assert p(curve, "e2e", 0.99).tolist() == pytest.approx([0.9, 1.0])


def test_a_quantile_no_mean_allows_is_a_unit_slip():
    # seconds written in a column named _s while they were ms: a P99 e2e of 2,100 s beside the
    # mean of 2.13 s Little's law gives (1 request in flight at 0.47 requests/s) was read as is.
    # At most 1 % of requests lie above P99, so P99 <= 100 x mean for any latencies
    frame = pd.DataFrame({"concurrency": [1, 4], "e2e_p99_s": [2100, 2400], "qps": [0.47, 1.6]})
    with pytest.raises(
        InputError,
        match=r"e2e P99 \(2100 s\) is 987 times the mean e2e "
        r"\(2\.12766 s\) at concurrency 1 \(row 2\).*units",
    ):
        data.read_latency_table(frame)
    frame = pd.DataFrame(
        {"concurrency": [1, 4], "ttft_p50_ms": [400, 500], "ttft_mean_ms": [100, 150]}
    )  # P50 at most 2 x the mean: 4 x is not
    with pytest.raises(InputError, match=r"ttft P50 .* 4 times the mean ttft"):
        data.read_latency_table(frame)


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("table_empty.csv", InputError, "the curve is empty"),
        ("table_one_point.csv", InputError, "at least 2 concurrency levels"),
        ("table_duplicate.csv", InputError, "concurrency 8 appears more than once"),
        (
            "table_p99_below_p50.csv",
            InputError,
            r"ttft P99 .* is below P50 .* at concurrency 2 \(row 3\)",
        ),
        ("table_nan.csv", InputError, r"tpot P99 is missing \(NaN\) at row 4"),
        ("table_unknown_unit.csv", InputError, r"ttft_p99_min: unknown time unit 'min'"),
    ],
)
def test_table_bad_input_gets_a_clear_error(name, error, message):
    with pytest.raises(error, match=message):
        data.read_latency_table(FIXTURES / name)


@pytest.mark.parametrize(
    ("text", "rename"),
    [
        ("concurrency,p99_latency_ms\n1,3260\n4,3672\n", "rename 'p99_latency_ms' to e2e_p99_ms"),
        ("Concurrency,P99 Latency (ms),Throughput (req/s)\n1,3260,0.38\n4,3672,1.38\n",
         "rename 'P99 Latency (ms)' to e2e_p99_ms"),
        # qps alone would give a mean e2e by Little's law: still no latency the file measured
        ("concurrency,latency_p99_ms,qps\n1,3260,0.38\n4,3672,1.38\n",
         "rename 'latency_p99_ms' to e2e_p99_ms"),
    ],
)  # fmt: skip
def test_a_table_without_a_latency_column_is_refused_naming_what_it_ignored(tmp_path, text, rename):
    path = tmp_path / "t.csv"
    path.write_text(text)
    ignored = text.split("\n")[0].split(",")[1:]
    with pytest.raises(ConfigError) as err:
        data.read_benchmark(path)
    message = str(err.value)
    assert message.startswith(f"{path}: no latency column capnb recognises (columns it ignored: ")
    assert all(repr(c) in message for c in ignored if c not in ("qps",))
    assert "<metric>_<stat>_<unit>" in message and f"(e.g. {rename})" in message


def test_a_curve_of_means_only_says_it_measured_means_and_which_column_a_bound_needs():
    # it said "it measured: nothing" of a table whose e2e_mean_ms it had read
    curve = data.read_latency_table(pd.DataFrame({"concurrency": [1, 2], "e2e_mean_ms": [9, 10]}))
    with pytest.raises(
        InputError,
        match=r"the curve has no e2e P99; it measured: e2e mean \(a mean is not a quantile: a "
        r"P99 bound needs the run's P99, e.g. a e2e_p99_ms column\)$",
    ):
        capacity.safe_concurrency(curve, 1.0)
    both = data.read_latency_table(
        pd.DataFrame({"concurrency": [1, 2], "ttft_mean_s": [0.1, 0.2], "e2e_mean_s": [9, 10]})
    )
    with pytest.raises(InputError, match=r"has no ttft P99; it measured: ttft mean, e2e mean \("):
        capacity.safe_concurrency(both, 1.0, metric="ttft")


def test_table_unsorted_rows_are_sorted_and_noted():
    curve = data.read_latency_table(FIXTURES / "table_unsorted.csv")
    assert (np.diff(curve.concurrency.values) > 0).all()
    assert "capnb sorted them" in curve.attrs["notes"]
    ordered = data.read_latency_table(FIXTURES / "table_tgi_long.csv")
    np.testing.assert_array_equal(curve.latency.values, ordered.latency.values)


def test_table_negative_and_non_integer_concurrency_are_errors():
    frame = pd.DataFrame({"concurrency": [1, 2.5], "e2e_p99_s": [1.0, 2.0], "e2e_mean_s": [1, 2]})
    with pytest.raises(InputError, match="positive integer, got 2.5 at row 3"):
        data.read_latency_table(frame)
    frame = pd.DataFrame({"concurrency": [1, 2], "e2e_p99_s": [1.0, -2.0], "e2e_mean_s": [1, 2]})
    with pytest.raises(InputError, match=r"e2e P99 must be finite and >= 0, got -2.0 at row 3"):
        data.read_latency_table(frame)


def test_errors_are_capnb_errors_and_missing_files_name_the_path(tmp_path):
    with pytest.raises(CapnbError, match="no such file"):
        data.read_latency_table(tmp_path / "absent.csv")
    with pytest.raises(CapnbError, match="no such file or directory"):
        data.read_vllm_bench(tmp_path / "absent")


# -- bundled curves and step times ---------------------------------------------------------------
def test_bundled_dstack_curve_matches_its_source_file():
    curve = data.load_latency_curve("dstack-tgi-mi300x-short")
    raw = pd.read_csv(DSTACK / "amd_tgi_vs_vllm_tgi_result_tgi_short.csv")
    assert curve.concurrency.values.tolist() == raw["Successful requests"].tolist()
    np.testing.assert_allclose(p(curve, "itl", 0.99), raw["P99 ITL (ms)"] / 1e3)
    np.testing.assert_allclose(p(curve, "tpot", 0.5), raw["Median TPOT (ms)"] / 1e3)
    assert (curve.attrs["model"], curve.attrs["gpu"], curve.attrs["tensor_parallel"]) == (
        "Llama-3.1-405B",
        "MI300X",
        8,
    )


def test_every_bundled_curve_loads_and_unknown_names_suggest():
    for name in data.list_latency_curves():
        curve = data.load_latency_curve(name)
        assert curve.sizes["concurrency"] >= 4 and curve.attrs["kind"] == "measured"
    with pytest.raises(UnknownNameError, match="dstack-vllm-mi300x-short"):
        data.load_latency_curve("dstack-vllm-mi300-short")


def test_lmdeploy_curve_has_four_itl_quantiles_from_the_table():
    curve = data.load_latency_curve("lmdeploy-llama2-70b-a100-tp4-p2048-o2048")
    assert curve.concurrency.values.tolist() == [1, 16, 32, 64]
    # published per-token latency at batch 64: 50% 0.055 s, 99% 0.299 s
    assert p(curve, "itl", 0.5)[-1] == pytest.approx(0.055)
    assert p(curve, "itl", 0.99)[-1] == pytest.approx(0.299)


def test_step_times_are_medians_of_the_repeats_and_drop_impossible_rows():
    points = data.load_step_times("splitwise")
    raw = pd.read_csv(data.dataset_path("benchmarks", "splitwise", "perf_model.csv"))
    rows = raw[
        (raw.model == "llama2-70b") & (raw.hardware == "h100-80gb") & (raw.tensor_parallel == 8)
        & (raw.prompt_size == 512) & (raw.batch_size == 1) & (raw.token_size == 128)
    ]  # fmt: skip
    point = points[
        (points.gpu == "H100-SXM") & (points.tensor_parallel == 8) & (points.phase == "prefill")
        & (points.tokens == 512) & (points.batch == 1) & (points.model == "Llama-2-70B")
    ]  # fmt: skip
    assert float(point.seconds.iloc[0]) == pytest.approx(np.median(rows.prompt_time) / 1e3)
    # Splitwise's batch-64 prefill at TP 2 is faster than batch 32: a failed run, dropped
    tp2 = points[(points.tensor_parallel == 2) & (points.phase == "prefill") & (points.batch == 64)]
    assert tp2.empty
    assert any("dropped" in note for note in points.attrs["notes"])
    with pytest.raises(InputError, match="source='x' is not known"):
        data.load_step_times("x")


def test_fixture_directory_is_left_untouched(tmp_path):
    # readers never write: copy a directory, read it, compare bytes
    copy = tmp_path / "vllm"
    shutil.copytree(FIXTURES / "vllm", copy)
    before = {f.name: f.read_bytes() for f in copy.iterdir()}
    data.read_vllm_bench(copy)
    assert {f.name: f.read_bytes() for f in copy.iterdir()} == before


# -- GuideLLM ------------------------------------------------------------------------------------
# A report laid out as GuideLLM writes it (`guidellm benchmark --output-path benchmarks.json`),
# constructed field by field from its pydantic models at vllm-project/guidellm
# ee7a77457ba668b4b5ccb40f110518829893b36a (0.7.3 + 12 commits; schema version 2): benchmarks
# at concurrent streams 4 and 16 and at a constant 6 requests/s. No published report was found.
GUIDELLM = FIXTURES / "guidellm" / "benchmarks.json"


def test_guidellm_report_read_in_seconds_and_placed_like_vllm_bench_runs():
    report = json.loads(GUIDELLM.read_text())
    assert report["metadata"]["version"] == 2
    curve = data.read_benchmark(GUIDELLM)
    assert curve.attrs["format"] == "guidellm"
    # streams 4 and 16 are closed loops; the constant rate goes where Little's law puts it:
    # requests_per_second.successful.mean 6.0 x request_latency.successful.mean 4.0 s = 24
    assert curve.concurrency.values.tolist() == [4, 16, 24]
    assert any("Little's law" in n and "concurrency 24" in n for n in latency.notes(curve))
    # time_to_first_token_ms.successful.percentiles.p99 of streams 16: 610.0 ms
    assert p(curve, "ttft", 0.99)[1] == pytest.approx(0.610)
    # inter_token_latency_ms (per request, after the first token) is vLLM's TPOT: p50 7.4 ms
    assert p(curve, "tpot", 0.5)[0] == pytest.approx(7.4e-3)
    # request_latency is in seconds already: p95 of the constant-rate benchmark, 5.9 s
    assert p(curve, "e2e", 0.95)[2] == pytest.approx(5.9)
    assert curve.mean_latency.sel(metric="e2e").values.tolist() == pytest.approx([2.0, 3.2, 4.0])
    assert curve.measured_qps.values.tolist() == pytest.approx([2.0, 5.0, 6.0])
    assert curve.attrs["prompt_tokens"] == 1024.0 and curve.attrs["output_tokens"] == 256.0
    # no chunk-gap statistic in a GuideLLM report: itl stays empty
    assert np.isnan(p(curve, "itl", 0.99)).all()
    for bench, c in zip(report["benchmarks"], [4, 16, 24], strict=True):
        ttft = bench["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"]["p90"]
        assert curve.latency.sel(concurrency=c, metric="ttft", latency_quantile=0.9) == (
            pytest.approx(ttft / 1000)
        )


def _vllm_twins(report: dict, folder: Path) -> None:
    """The report's benchmarks written as the vllm bench serve results of the same runs."""
    names = {"ttft": "time_to_first_token_ms", "tpot": "inter_token_latency_ms",
             "e2el": "request_latency"}  # fmt: skip
    for bench in report["benchmarks"]:
        strategy, metrics = bench["config"]["strategy"], bench["metrics"]
        ok = metrics["request_totals"]["successful"]
        mean = {name: summary["successful"]["mean"] for name, summary in metrics.items()
                if isinstance(summary.get("successful"), dict)}  # fmt: skip
        record = {"completed": ok, "duration": bench["duration"],
                  "request_throughput": mean["requests_per_second"],
                  "total_input_tokens": ok * mean["prompt_token_count"],
                  "total_output_tokens": ok * mean["output_token_count"]}  # fmt: skip
        if strategy["type_"] == "concurrent":
            record |= {"request_rate": "inf", "max_concurrency": strategy["streams"]}
        else:
            record |= {"request_rate": strategy["rate"], "max_concurrency": None}
        for key, name in names.items():
            summary = metrics[name]["successful"]
            ms = 1.0 if name.endswith("_ms") else 1000.0
            record[f"mean_{key}_ms"] = summary["mean"] * ms
            record[f"median_{key}_ms"] = summary["median"] * ms
            for stat in ("p90", "p95", "p99"):
                record[f"{stat}_{key}_ms"] = summary["percentiles"][stat] * ms
        (folder / f"{bench['config']['id_']}.json").write_text(json.dumps(record))


def test_guidellm_report_calibrates_the_engine_as_the_same_runs_from_vllm_bench(tmp_path):
    from capnb.records import EngineSettings

    deployment = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1,
                  "engine": "vllm", "engine_version": "0.11.0"}  # fmt: skip
    _vllm_twins(json.loads(GUIDELLM.read_text()), tmp_path)
    from_vllm = data.read_bench_runs(tmp_path, **deployment)
    from_guidellm = data.read_bench_runs(GUIDELLM, **deployment)
    # GuideLLM's constant rate sends at even intervals (arrival CV 0), vllm bench at a rate with
    # burstiness 1 as a Poisson process (CV 1): the twin is the same run once its gaps are even
    rate = from_vllm["mode"] == "request_rate"
    assert set(from_vllm.loc[rate, "arrival_cv"]) == {1.0}
    assert set(from_guidellm.loc[rate, "arrival_cv"]) == {0.0}
    from_vllm.loc[rate, "arrival_cv"] = 0.0
    # one table, row for row and bit for bit (the fit below follows the last bit and the order)
    pd.testing.assert_frame_equal(from_vllm, from_guidellm, check_exact=True)
    assert sorted(set(zip(from_guidellm["mode"], from_guidellm["load"], strict=True))) == [
        ("concurrency", 4.0), ("concurrency", 16.0), ("request_rate", 6.0)
    ]  # fmt: skip
    ttft = from_guidellm.query("load == 16 and metric == 'ttft' and stat == 'p99'")["value"]
    assert ttft.item() == pytest.approx(0.610)
    settings = EngineSettings("vllm-v1")

    def calibrated(table):
        # the fixture's figures are made up for the readers: on the refit with the serial front
        # end the calibration refuses them (the run at 6 requests/s 4.3x off), a refusal whose
        # words carry the fitted calibration's simulated figures, so equal words are equal fits
        try:
            return latency.calibrate(table, settings=settings)
        except InputError as error:
            return str(error)

    assert calibrated(from_vllm) == calibrated(from_guidellm)


@pytest.mark.filterwarnings("ignore::capnb.latency.CalibrationWarning")  # runs at one load
def test_own_runs_keep_their_measured_throughput(tmp_path):
    # read_bench_runs kept only the latencies: worksheet 03's own-run section printed "measured:
    # none read from the runs" beside the predicted throughput, though every vllm bench result
    # (and GuideLLM benchmark) records its requests/s, as the bundled runs' tables do
    deployment = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1,
                  "engine": "vllm", "engine_version": "0.11.0"}  # fmt: skip
    run = {"request_rate": 2.0, "completed": 300, "total_input_tokens": 307200,
           "total_output_tokens": 76800, "duration": 152.0, "request_throughput": 1.97,
           "mean_ttft_ms": 140.0, "p99_ttft_ms": 400.0, "mean_tpot_ms": 42.0}  # fmt: skip
    (tmp_path / "rate2.json").write_text(json.dumps(run))
    table = data.read_bench_runs(tmp_path, **deployment)
    served = table.query("metric == 'request_throughput'")
    assert served[["load", "stat", "value", "unit"]].values.tolist() == [
        [2.0, "value", 1.97, "requests/s"]
    ]
    report = data.read_bench_runs(GUIDELLM, **deployment).query("metric == 'request_throughput'")
    assert report[["load", "value"]].values.tolist() == [[4.0, 2.0], [16.0, 5.0], [6.0, 6.0]]
    # the fit reads latencies only: the calibration is the one without the throughput rows
    latencies = table[table["metric"] != "request_throughput"]
    assert latency.calibrate(table) == latency.calibrate(latencies)


def test_own_runs_refuse_an_aiperf_export_or_a_table_naming_what_it_is():
    # an AIPerf sweep given to read_bench_runs (capnb plan --calibrate sweep.csv) was read as
    # flattened vllm bench rows: "row 2: not a vllm bench serve ... result (its keys:
    # concurrency, time_to_first_token_avg_mean, ...); capnb reads ... AIPerf / GenAI-Perf CSV
    # exports ...: move other JSON files ... out of the folder", of a CSV file, not a folder
    deployment = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1,
                  "engine": "vllm"}  # fmt: skip
    sweep = FIXTURES / "aiperf" / "dstack_vllm_profile_export_aiperf_sweep.csv"
    with pytest.raises(
        ConfigError, match=r"sweep.csv: AIPerf or GenAI-Perf exports, not vllm bench"
    ) as err:
        data.read_bench_runs(sweep, **deployment)
    assert "read_benchmark" in str(err.value) and "JSON files" not in str(err.value)
    with pytest.raises(ConfigError, match=r"table_unsorted.csv: a latency table, not vllm bench"):
        data.read_bench_runs(FIXTURES / "table_unsorted.csv", **deployment)


def test_calibrating_on_an_aiperf_sweep_without_lengths_says_how_to_give_them():
    # it said "set them on the curve ... or read the runs with capnb.data.read_bench_runs", which
    # refuses AIPerf exports: the one way it named besides was a loop
    sweep = FIXTURES / "aiperf" / "dstack_vllm_profile_export_aiperf_sweep.csv"
    curve = data.read_benchmark(sweep, model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1)
    with pytest.raises(
        InputError, match=r"curve \(AIPerf or GenAI-Perf exports\) records no"
    ) as err:
        latency.calibrate(curve)
    assert "read_bench_runs" not in str(err.value)
    assert "curve.attrs['prompt_tokens']" in str(err.value)


def test_a_folder_holding_one_guidellm_report_reads_as_the_report(tmp_path):
    # capnb plan --benchmark runs/ (a folder, as the close call's re-plan passes its results)
    # holding GuideLLM's benchmarks.json failed: "a GuideLLM report, not a vllm bench serve
    # result; read it with read_guidellm or read_benchmark (the file, not its folder)", where
    # --calibrate runs/ reads the same folder
    shutil.copy(GUIDELLM, tmp_path / "benchmarks.json")
    attrs = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1}
    assert data.benchmark_format(tmp_path) == "guidellm"
    curve = data.read_benchmark(tmp_path, **attrs)
    want = data.read_benchmark(GUIDELLM, **attrs)
    assert curve.attrs["format"] == "guidellm"
    xr.testing.assert_identical(curve.drop_attrs(), want.drop_attrs())
    # two reports in one folder: each is a curve of its own, named as the flag takes it
    shutil.copy(GUIDELLM, tmp_path / "again.json")
    with pytest.raises(
        ConfigError,
        match=r"again\.json: a GuideLLM report.*give a report file itself \(--benchmark",
    ):
        data.read_benchmark(tmp_path, **attrs)


def test_guidellm_schema_version_1_reads_the_same_benchmarks(tmp_path):
    # GuideLLM 0.5.0-0.6.x wrote metadata.version 1: its per-benchmark fields are those of 2
    report = json.loads(GUIDELLM.read_text())
    report["metadata"] |= {"version": 1, "guidellm_version": "0.6.1"}
    # a concurrent strategy capped below its streams runs at the cap (16 streams, 8 at most)
    report["benchmarks"][1]["config"]["strategy"]["max_concurrency"] = 8
    report["benchmarks"][1]["metrics"]["requests_per_second"]["successful"]["mean"] = 2.5
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(report))
    curve = data.read_guidellm(path)
    assert curve.concurrency.values.tolist() == [4, 8, 24]
    assert p(curve, "ttft", 0.99).tolist() == pytest.approx([0.260, 0.610, 1.250])
    assert latency.notes(curve)[0] == "GuideLLM 0.6.1 report"


def test_aiperf_exports_keep_their_input_sequence_length(tmp_path):
    # the exports' Input Sequence Length was skipped: the curve had no prompt_tokens, so the
    # capacity step checked no memory ("the curve records no workload") and calibrating the
    # engine model on the curve ended in a bare KeyError: 'prompt_tokens'
    curve = data.read_aiperf(
        [
            FIXTURES / "genai_perf" / "deepseek_r1_c1_profile_export_genai_perf.csv",
            FIXTURES / "genai_perf" / "c144_profile_export_genai_perf.csv",
        ],
        concurrency=[1, 144],
    )
    assert curve.attrs["prompt_tokens"] == pytest.approx((127.50 + 4000.03) / 2)
    # an export without it: no prompt length, and calibrating on it names what is missing
    runs = {c: FIXTURES / "aiperf" / f"dstack_vllm_c{c}_profile_export_aiperf.csv" for c in (1, 8)}
    bare = data.read_aiperf(runs, model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1)
    assert "prompt_tokens" not in bare.attrs
    from capnb import latency

    with pytest.raises(InputError, match="prompt_tokens"):
        latency.calibrate(bare)


def test_a_ramp_up_run_is_refused_naming_its_field(tmp_path):
    """vllm bench serve --ramp-up-strategy: its rate climbs during the run; no one load holds it.

    Its request_rate is written "inf": read as a closed loop at its max_concurrency (the curve)
    or as a batch / closed loop (read_bench_runs, which the calibration then simulated as such).
    """
    ramp = {"ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 8}
    # a ramp that climbs to 8 requests/s, its mean e2e 2 s, capped at 16: 4.2 requests/s measured
    runs = {"c4.json": _summary_run(4, 2.0, 2.0), "ramp.json": _summary_run(16, 2.0, 4.2) | ramp}
    folder = _write(tmp_path / "runs", runs)
    for read in (lambda: data.read_vllm_bench(folder),
                 lambda: data.read_bench_runs(folder, model="Llama-3.1-8B", gpu="H100-SXM",
                                              tensor_parallel=1, engine="vllm")):  # fmt: skip
        with pytest.raises(ConfigError, match=r"ramp\.json: 'ramp_up_strategy' is 'linear'"):
            read()


def test_a_guidellm_report_of_another_model_is_an_error_naming_its_field(tmp_path):
    """Each GuideLLM benchmark records its backend's model (config.backend.model, 0.5 to 0.7).

    A report of one model read for another was taken silently, where vllm bench runs of another
    model_id are an error naming both.
    """
    report = json.loads(GUIDELLM.read_text())
    for bench in report["benchmarks"]:
        bench["config"]["backend"] = {"target": "http://localhost:8000", "model": "Qwen/Qwen3-32B"}
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(report))
    given = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1, "engine": "vllm"}
    wrong = (
        r"benchmarks\[0\] \(config\.backend\.model\): the runs measured model_id 'Qwen/Qwen3-32B', "
    )
    for read in (lambda: data.read_benchmark(path, model="Llama-3.1-8B"),
                 lambda: data.read_guidellm(path, model="Llama-3.1-8B"),
                 lambda: data.read_bench_runs(path, **given)):  # fmt: skip
        with pytest.raises(ConfigError, match=wrong + r"not model 'Llama-3\.1-8B'"):
            read()
    assert data.read_benchmark(path, model="Qwen3-32B").attrs["model"] == "Qwen3-32B"
    said = data.read_benchmark(path, model="Llama-3.1-8B", model_id="Qwen/Qwen3-32B")
    assert said.concurrency.size == data.read_guidellm(GUIDELLM).concurrency.size
    assert not data.read_bench_runs(path, model_id="Qwen/Qwen3-32B", **given).empty


def test_vllm_0_4_results_spell_request_throughput_request_inthroughput(tmp_path):
    """benchmark_serving.py of vLLM 0.4 wrote its measured throughput as 'request_inthroughput'.

    Such a file said 'missing field request_throughput' though it holds the figure.
    """
    runs = {f"c{c}.json": _summary_run(c, 2.0 + c / 8, c / (2.0 + c / 8)) for c in (4, 16)}
    expected = data.read_vllm_bench(_write(tmp_path / "new", runs))
    for run in runs.values():
        run["request_inthroughput"] = run.pop("request_throughput")
    curve = data.read_vllm_bench(_write(tmp_path / "old", runs))
    assert curve.measured_qps.values.tolist() == expected.measured_qps.values.tolist()
    assert any("request_inthroughput" in n for n in latency.notes(curve))


def test_a_guidellm_benchmark_at_a_vllm_run_s_load_is_a_second_run_not_dropped(tmp_path):
    """A folder holding vllm bench results and a GuideLLM report of the same loads (mixed tools).

    read_bench_runs refused a second vllm bench run at one load, but a GuideLLM benchmark at a
    vllm run's load (or two reports' benchmarks at one load) was read too, and one run's rows were
    silently dropped in favour of the other's: the calibration fitted whichever came last.
    """
    given = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1, "engine": "vllm"}
    folder = tmp_path / "mixed"
    folder.mkdir()
    _vllm_twins(json.loads(GUIDELLM.read_text()), folder)
    (folder / "bench-0.json").rename(folder / "vllm-c4.json")
    (folder / "bench-1.json").unlink()
    (folder / "bench-2.json").unlink()
    shutil.copy(GUIDELLM, folder / "benchmarks.json")
    # (the folder's files are read in name order: the report's benchmark first)
    with pytest.raises(ConfigError, match=r"^vllm-c4\.json: a second run at concurrency 4 "
                       r"\(the first: benchmarks\.json benchmarks\[0\]\)"):  # fmt: skip
        data.read_bench_runs(folder, **given)
    # two reports of the same benchmarks: the second report's benchmark names its file and entry
    twice = tmp_path / "twice"
    twice.mkdir()
    shutil.copy(GUIDELLM, twice / "a.json")
    shutil.copy(GUIDELLM, twice / "b.json")
    with pytest.raises(
        ConfigError, match=r"b\.json benchmarks\[0\]: a second run at concurrency 4"
    ):
        data.read_bench_runs(twice, **given)


def test_an_aiperf_export_beside_vllm_results_in_a_folder_is_an_error_naming_it(tmp_path):
    """A folder of vllm bench results with an AIPerf run's CSV export beside them (mixed tools).

    A folder is read for its .json / .jsonl results: the CSV was skipped without a word, and the
    curve, the plan and the calibration went on without the run the user had put there.
    """
    folder = tmp_path / "mixed"
    shutil.copytree(FIXTURES / "vllm", folder)
    shutil.copy(FIXTURES / "aiperf" / "dstack_vllm_c8_profile_export_aiperf.csv", folder)
    (folder / "notes.csv").write_text("when,what\n2026-12-01,reran c32\n")  # not a benchmark
    given = {"model": "gpt-oss-120b", "gpu": "H100-SXM", "tensor_parallel": 1, "engine": "vllm"}
    unread = r"dstack_vllm_c8_profile_export_aiperf\.csv \(AIPerf or GenAI-Perf exports\)"
    for read in (lambda: data.read_vllm_bench(folder, model="gpt-oss-120b"),
                 lambda: data.read_benchmark(folder, model="gpt-oss-120b"),
                 lambda: data.read_bench_runs(folder, **given)):  # fmt: skip
        with pytest.raises(ConfigError, match=rf"mixed: .*{unread}.* not read"):
            read()
    (folder / "dstack_vllm_c8_profile_export_aiperf.csv").unlink()
    assert data.read_vllm_bench(folder, model="gpt-oss-120b").concurrency.size == 3


def test_failed_requests_of_a_summary_only_run_are_noted_on_the_curve(tmp_path):
    """vllm bench serve writes 'failed' (requests that errored) beside 'completed'.

    With --save-detailed the curve noted the failed requests left out of its percentiles; a
    summary-only result with failed requests was read without a word (its latencies are of the
    completed requests alone), nor a GuideLLM benchmark's errored requests.
    """
    runs = {"c4.json": _summary_run(4, 2.5, 1.6),
            "c16.json": _summary_run(16, 4.0, 4.0, failed=20) | {"num_prompts": 120}}  # fmt: skip
    notes = latency.notes(data.read_vllm_bench(_write(tmp_path / "runs", runs)))
    assert [n for n in notes if "failed" in n] == [
        "c16.json: 20 of 120 requests failed ('failed'): its latencies and throughput are of the "
        "100 completed"
    ]
    report = json.loads(GUIDELLM.read_text())
    report["benchmarks"][1]["metrics"]["request_totals"] |= {"errored": 7, "total": 607}
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(report))
    assert [n for n in latency.notes(data.read_guidellm(path)) if "failed" in n] == [
        "benchmarks.json benchmarks[1]: 7 of 607 requests failed "
        "('metrics.request_totals.errored'): its latencies and throughput are of the 600 "
        "successful"
    ]


def test_a_rate_run_its_max_concurrency_held_back_is_refused_for_calibration(tmp_path):
    """vllm bench serve --request-rate R --max-concurrency C: the client holds requests past C.

    read_bench_runs read such a run as an open loop at R (C dropped), which the engine model
    simulates with no cap; where C held requests back (their wait in the client is in no
    latency), the calibration fitted a queue the server never had (on runs simulated from a known
    calibration: step overhead 2.0x, HBM efficiency 1.4x of the truth, fit error 8 %, no error).
    """
    given = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1, "engine": "vllm"}
    # 2 requests/s offered, at most 4 in flight: 0.42 requests/s x 9.5 s = 4.0 in flight
    held = _summary_run(4, 9.456, 0.4241, rate=2.0, prompts=300)
    # 0.5 requests/s under a cap of 64: 0.49 requests/s x 10 s = 4.9 in flight, far below it
    free = _summary_run(64, 10.0, 0.49, rate=0.5, prompts=300)
    folder = _write(tmp_path / "runs", {"held.json": held, "free.json": free})
    with pytest.raises(ConfigError, match=r"held\.json: a run at request_rate 2 with "
                       r"max_concurrency 4 held .* \(request_throughput x mean e2e\): .*"
                       r"--max-concurrency"):  # fmt: skip
        data.read_bench_runs(folder, **given)
    (folder / "held.json").unlink()
    runs = data.read_bench_runs(folder, **given)
    assert set(zip(runs["mode"], runs["load"], strict=True)) == {("request_rate", 0.5)}


def test_a_guidellm_constant_rate_is_simulated_at_even_gaps_and_poisson_at_random(tmp_path):
    """GuideLLM's constant strategy sends at uniform intervals, its poisson one at random ones.

    Both were read as request_rate runs that calibrate simulates as Poisson arrivals; the
    constant one now has arrival CV 0 (what the engine model draws for evenly spaced gaps).
    """
    given = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1, "engine": "vllm"}
    report = json.loads(GUIDELLM.read_text())
    path = tmp_path / "benchmarks.json"
    for kind, cv in (("constant", 0.0), ("poisson", 1.0)):
        report["benchmarks"][2]["config"]["strategy"]["type_"] = kind
        path.write_text(json.dumps(report))
        runs = data.read_bench_runs(path, **given)
        assert set(runs.loc[runs["mode"] == "request_rate", "arrival_cv"]) == {cv}, kind
        pts = _own.own_points(runs, engine="vllm-v1")
        assert [pt.run["arrival_cv"] for pt in pts if pt.mode == "request_rate"] == [cv]


def test_a_guidellm_rate_benchmark_its_max_concurrency_held_back_is_refused(tmp_path):
    # GuideLLM's constant / poisson strategies take a max_concurrency too: read as above
    given = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1, "engine": "vllm"}
    report = json.loads(GUIDELLM.read_text())
    path = tmp_path / "benchmarks.json"
    for cap, refused in ((24, True), (64, False)):  # 6 requests/s x 4 s mean e2e: 24 in flight
        report["benchmarks"][2]["config"]["strategy"]["max_concurrency"] = cap
        path.write_text(json.dumps(report))
        if refused:
            with pytest.raises(ConfigError, match=r"benchmarks\[2\]: a run at request_rate 6 "
                               r"with max_concurrency 24 held requests back"):  # fmt: skip
                data.read_bench_runs(path, **given)
        else:
            assert 6.0 in set(data.read_bench_runs(path, **given)["load"])


def test_a_folder_of_renamed_aiperf_exports_says_how_to_read_them(tmp_path):
    """Per-run exports kept side by side need new names (AIPerf writes one name into each run's
    folder): c4_profile_export_aiperf.csv, ... A folder of them said only that it held no vllm
    bench JSON, where a folder of AIPerf's own layout was told how to read its runs.
    """
    folder = tmp_path / "aiperf"
    folder.mkdir()
    for c in (1, 8):
        shutil.copy(FIXTURES / "aiperf" / f"dstack_vllm_c{c}_profile_export_aiperf.csv", folder)
    with pytest.raises(ConfigError, match=r"aiperf: a folder of measured latencies holds vllm "
                       r"bench JSON files, and this one holds none; it holds AIPerf or GenAI-Perf "
                       r"per-run exports \(dstack_vllm_c1_profile_export_aiperf\.csv, "
                       r"dstack_vllm_c8_profile_export_aiperf\.csv\).*read_aiperf"):  # fmt: skip
        data.read_benchmark(folder, model="Llama-3.1-8B")


def test_calibrating_on_a_curve_refuses_its_rate_runs_placed_by_littles_law():
    """A curve's rows placed by Little's law are runs at a request rate, not closed loops.

    calibrate(curve) simulated every row as a closed loop at its rounded mean in flight: on
    SGLang rate runs simulated from a known calibration it fitted a step overhead 1.45x and a
    per-request overhead 1.75x the truth (held-out P99 TTFT -12 %), where the same files read
    with read_bench_runs recovered them within 3 %.
    """
    curve = data.read_benchmark(GUIDELLM, model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1)
    assert curve.attrs["placed_by_littles_law"] == [24]  # (the constant-rate benchmark)
    with pytest.raises(InputError, match=r"runs: the curve's row at concurrency 24: a run at a "
                       r"request rate, placed by Little's law.*read_bench_runs"):  # fmt: skip
        latency.calibrate(curve)
    closed = curve.sel(concurrency=[4, 16])
    assert latency.calibrate(closed).fit_error < 1.0


@pytest.mark.parametrize(
    ("given", "shown"),
    [({"prompt_tokens": -5}, "prompt_tokens = -5"), ({"output_tokens": -200}, "output_tokens = -200"),
     ({"output_tokens": 0}, "output_tokens = 0"), ({"prompt_tokens": math.nan}, "prompt_tokens = nan"),
     ({"output_tokens": "256"}, "output_tokens = '256'")],
)  # fmt: skip
def test_a_workload_that_is_not_a_positive_number_of_tokens_is_refused(given, shown):
    # read_latency_table(..., output_tokens=-200) was stored as given: the plan priced -2.49 USD
    # per million output tokens; prompt_tokens=-5 checked memory at 195 tokens a sequence, and NaN
    # raised "cannot convert float NaN to integer" from the memory step
    table = pd.DataFrame({"concurrency": [1, 8], "ttft_p99_s": [0.1, 0.3], "e2e_mean_s": [3, 4]})
    with pytest.raises(InputError, match=rf"table: {shown}: expected the mean tokens per request"):
        data.read_latency_table(table, **{"prompt_tokens": 1000, "output_tokens": 200, **given})
    runs = data.read_benchmark(FIXTURES / "vllm")  # attrs given to any reader are checked alike
    assert runs.attrs["output_tokens"] > 0
    with pytest.raises(InputError, match=rf"{shown}: expected the mean tokens per request"):
        data.read_benchmark(FIXTURES / "vllm", **given)


@pytest.mark.parametrize("degree", [0, -1, 1.5, "2", True])
def test_a_tensor_parallel_degree_that_is_not_a_positive_integer_is_refused(degree):
    # read_latency_table(..., gpu="H100-SXM", tensor_parallel=-1) was stored as given: the plan
    # counted -6 GPUs at -17.94 USD/hour (0: 0 GPUs at 0 USD; 1.5: 9 GPUs; "2": a numpy
    # UFuncTypeError from the cost; True: 1)
    table = pd.DataFrame({"concurrency": [1, 8], "ttft_p99_s": [0.1, 0.3], "e2e_mean_s": [3, 4]})
    with pytest.raises(
        InputError, match=rf"table: tensor_parallel must be a positive integer, got {degree!r}"
    ):
        data.read_latency_table(table, gpu="H100-SXM", tensor_parallel=degree)
    assert data.read_latency_table(table, tensor_parallel=np.int64(2)).attrs["tensor_parallel"] == 2


def test_runs_whose_backend_names_another_engine_are_not_calibrated_as_the_one_given(tmp_path):
    # SGLang's bench_serving writes "backend": "sglang"; read with engine="vllm" (as capnb plan
    # --calibrate reads every run) they were calibrated as vLLM V1's scheduler: a step overhead of
    # 3.21 ms where the same runs read as SGLang's give 1.72 ms
    runs = [{"backend": "sglang", "request_rate": rate, "completed": 300,
             "total_input_tokens": 307200, "total_output_tokens": 76800, "duration": 152.0,
             "mean_ttft_ms": 140.0 * rate, "p99_ttft_ms": 400.0 * rate, "mean_tpot_ms": 42.0}
            for rate in (1.0, 2.0)]  # fmt: skip
    for run in runs:
        (tmp_path / f"rate{run['request_rate']:g}.json").write_text(json.dumps(run))
    deployment = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1}
    table = data.read_bench_runs(tmp_path, engine="vllm", **deployment)
    assert table.attrs["backends"] == {"rate1.json": "sglang", "rate2.json": "sglang"}
    assert set(table["backend"]) == {"sglang"}
    with pytest.raises(
        InputError,
        match=r"rate1\.json: backend 'sglang' says the run was served "
        r"by SGLang, but the runs were read as engine 'vllm'.*engine='sglang'",
    ):
        latency.calibrate(table)
    with pytest.raises(InputError, match="backend 'sglang'") as said:  # after a filter too
        latency.calibrate(table[table["metric"] != "request_throughput"])
    # a plan reads them as its [serving] engine (since it took one): it said 'capnb plan prices
    # vLLM V1: calibrate it on vLLM runs', untrue of a plan on SGLang
    assert "(capnb plan: --engine sglang, [serving] engine = 'sglang')" in str(said.value)
    assert "prices vLLM V1" not in str(said.value)
    # a client backend that names no engine (vLLM's OpenAI-compatible clients) says nothing
    for backend in ("vllm", "openai", "openai-chat", "sglang-oai"):
        table.attrs["backends"] = {"a.json": backend}
        assert latency.calibrate(table.assign(backend=backend)) is not None


def _backend_run(folder, backend: str, rate: float):
    """``folder`` holding one vllm bench result at ``rate`` requests/s whose backend says ``backend``."""
    folder.mkdir(exist_ok=True)
    run = {"backend": backend, "request_rate": rate, "completed": 300,
           "total_input_tokens": 307200, "total_output_tokens": 76800, "duration": 152.0,
           "mean_ttft_ms": 140.0 * rate, "p99_ttft_ms": 400.0 * rate, "mean_tpot_ms": 42.0}  # fmt: skip
    (folder / f"rate{rate:g}.json").write_text(json.dumps(run))
    return folder


def test_a_runs_backend_is_checked_after_the_tables_are_concatenated(tmp_path):
    # the backends rode in attrs["backends"], which pandas.concat drops where the tables' attrs
    # differ: a folder of vLLM runs and one of SGLang bench_serving runs, each read with
    # engine="vllm" and concatenated, were calibrated as vLLM V1 without a word
    deployment = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1}
    tables = []
    for backend, rate in (("vllm", 1.0), ("sglang", 2.0)):
        folder = _backend_run(tmp_path / backend, backend, rate)
        tables.append(data.read_bench_runs(folder, engine="vllm", **deployment))
    both = pd.concat(tables, ignore_index=True)
    assert both.attrs == {}  # (pandas keeps attrs only where every table's are equal)
    with pytest.raises(
        InputError, match=r"the run at request_rate 2: backend 'sglang' says the run was served"
    ):
        latency.calibrate(both)


def test_a_backend_that_only_named_the_clients_request_format_can_be_set_aside(tmp_path):
    # vLLM's benchmark client wrote its --backend, 'vllm' by default before 'openai' (an OpenAI
    # completions client whatever server it ran against): SGLang runs benchmarked so and read with
    # engine="sglang" were refused with 'read them with read_bench_runs(..., engine='vllm')', the
    # mistake the check guards against, and no word of how to say the server was SGLang; the
    # error now says it (drop the backend column) and a table without it calibrates as SGLang
    deployment = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1}
    folder = _backend_run(tmp_path, "vllm", 1.0)
    _backend_run(tmp_path, "vllm", 2.0)
    table = data.read_bench_runs(folder, engine="sglang", **deployment)
    with pytest.raises(InputError, match=r"backend 'vllm'.*runs\.drop\(columns='backend'\)"):
        latency.calibrate(table)
    assert "sglang" in latency.calibrate(table.drop(columns="backend")).fitted_on


@pytest.mark.parametrize(("backend", "engine", "remedy"), [
    ("sglang", "vllm-v1", "capnb plan: --engine sglang"),
    ("vllm", "sglang", "capnb plan: delete the 'backend' field of the result files"),
])  # fmt: skip
def test_a_backend_refused_in_a_plan_says_what_the_plan_takes(tmp_path, backend, engine, remedy):
    # capnb plan --calibrate runs/ on SGLang bench_serving files said "read them with
    # read_bench_runs(..., engine='sglang') (capnb plan prices vLLM V1: calibrate it on vLLM
    # runs)", though the plan prices SGLang with --engine sglang; and for a vLLM client's 'vllm'
    # against an SGLang server it said only runs.drop(columns='backend'), which a plan has not
    from capnb.plan import PlanConfig
    from capnb.plan._steps import _own_calibration

    _backend_run(tmp_path, backend, 1.0)
    _backend_run(tmp_path, backend, 2.0)
    serving = {"model": "Llama-3.1-8B", "gpus": ("H100-SXM",), "engine": engine,
               "calibration_runs": str(tmp_path)}  # fmt: skip
    with pytest.raises(InputError, match=re.escape(remedy)) as error:
        _own_calibration(PlanConfig().replace(serving=serving))
    assert "prices vLLM V1" not in str(error.value)


@pytest.mark.filterwarnings("ignore::capnb.latency.CalibrationWarning")  # runs at one load
def test_runs_read_as_two_engines_are_not_calibrated_as_one(tmp_path):
    # vLLM runs read with engine="vllm" and SGLang runs with engine="sglang", concatenated, name
    # no single engine, and calibrate fell back to vLLM V1 for both ("fitted_on ... vllm-v1
    # (request_rate 1, 2)"): the SGLang runs fitted as vLLM's scheduler without a word
    deployment = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1}
    tables = []
    for engine, rate in (("vllm", 1.0), ("sglang", 2.0)):
        folder = _backend_run(tmp_path / engine, engine, rate)
        tables.append(data.read_bench_runs(folder, engine=engine, **deployment))
    both = pd.concat(tables, ignore_index=True)
    with pytest.raises(
        InputError, match=r"runs: read as 2 engines \('sglang', 'vllm'\).*calibrate each apart"
    ):
        latency.calibrate(both)
    assert latency.calibrate(tables[1]).fitted_on.count("sglang") >= 1

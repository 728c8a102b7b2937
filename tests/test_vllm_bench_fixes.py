"""read_vllm_bench against vLLM's own arithmetic (benchmarks/benchmark_serving.py @0049e29c).

The files are in vLLM's ``--save-result --save-detailed`` format: per-request lists (``input_lens``,
``output_lens``, ``ttfts``, ``itls``, ``errors``) beside the summary that ``calculate_metrics``
computes from them: percentiles by ``np.percentile`` (linear interpolation) over the requests
counted as successes, ``request_throughput = completed / duration``. Older vLLM versions count a
request that returned no token, with an empty error, as a success (output length 0).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from capnb import data, latency
from capnb.errors import ConfigError


def _vllm_result(ttfts, itls, outs, errors, inputs, duration, *, concurrency=None, rate="inf"):
    """A result file as vLLM writes it: the summary computed the way calculate_metrics does."""
    success = [not e for e in errors]
    ok_ttft = [t for t, s in zip(ttfts, success, strict=True) if s]
    ok_e2e = [t + sum(i) for t, i, s in zip(ttfts, itls, success, strict=True) if s]
    tpots = [
        (t + sum(i) - t) / (o - 1)
        for t, i, o, s in zip(ttfts, itls, outs, success, strict=True)
        if s and o > 1
    ]
    all_itl = [g for i, s in zip(itls, success, strict=True) if s for g in i]
    completed = sum(success)
    record = {
        "date": "20250101-000000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
        "tokenizer_id": "meta-llama/Llama-3.1-8B", "num_prompts": len(ttfts),
        "request_rate": rate, "burstiness": 1.0, "max_concurrency": concurrency,
        "duration": duration, "completed": completed,
        "total_input_tokens": sum(i for i, s in zip(inputs, success, strict=True) if s),
        "total_output_tokens": sum(outs), "request_throughput": completed / duration,
        "input_lens": inputs, "output_lens": outs, "ttfts": ttfts, "itls": itls,
        "generated_texts": ["x" * o for o in outs], "errors": errors,
    }  # fmt: skip
    for name, values in (("ttft", ok_ttft), ("tpot", tpots), ("itl", all_itl), ("e2el", ok_e2e)):
        values = values or [0.0]  # as vLLM: np.percentile(values or 0, p)
        record[f"mean_{name}_ms"] = float(np.mean(values)) * 1000
        record[f"median_{name}_ms"] = float(np.median(values)) * 1000
        record[f"std_{name}_ms"] = float(np.std(values)) * 1000
        for p in (50, 90, 95, 99):
            record[f"p{p}_{name}_ms"] = float(np.percentile(values, p)) * 1000
    return record


def _requests(n, seed, *, empty=0):
    rng = np.random.default_rng(seed)
    outs = [int(v) for v in rng.integers(20, 200, n)]
    ttfts = [float(v) for v in rng.gamma(2.0, 0.05, n)]
    itls = [[float(g) for g in rng.gamma(4.0, 0.005, o - 1)] for o in outs]
    inputs = [int(v) for v in rng.integers(100, 2000, n)]
    for i in range(empty):  # the old stream client: no token, no error, counted as a success
        outs[i], ttfts[i], itls[i] = 0, 0.0, []
    return ttfts, itls, outs, [""] * n, inputs


def _closed_loop_duration(ttfts, itls, concurrency):
    """A closed loop's duration: the requests' e2e latencies, ``concurrency`` at a time."""
    return sum(t + sum(i) for t, i in zip(ttfts, itls, strict=True)) / concurrency


def _p(curve, metric, q):
    return curve.latency.sel(metric=metric, latency_quantile=q).values


def test_recomputed_percentiles_equal_vllms_own(tmp_path):
    # 37 requests: P90/P95/P99 fall between two of them, where nearest rank and linear differ
    for c, seed in ((4, 1), (16, 2)):
        ttfts, itls, outs, errors, inputs = _requests(37, seed)
        duration = _closed_loop_duration(ttfts, itls, c)
        record = _vllm_result(ttfts, itls, outs, errors, inputs, duration, concurrency=c)
        (tmp_path / f"c{c}.json").write_text(json.dumps(record))
    curve = data.read_vllm_bench(tmp_path)
    for c in (4, 16):
        record = json.loads((tmp_path / f"c{c}.json").read_text())
        row = curve.sel(concurrency=c)
        for metric, key in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", "e2el")):
            for q in (0.5, 0.9, 0.95, 0.99):
                got = float(row.latency.sel(metric=metric, latency_quantile=q))
                assert got == pytest.approx(record[f"p{round(q * 100)}_{key}_ms"] / 1000, rel=1e-9)
        # nearest rank would give a recorded request's value; linear interpolation need not
        ordered = np.sort(record["ttfts"])
        nearest = ordered[math.ceil(0.99 * ordered.size) - 1]
        assert float(row.latency.sel(metric="ttft", latency_quantile=0.99)) != pytest.approx(
            nearest, rel=1e-6
        )


def test_requests_without_output_leave_throughput_lengths_and_percentiles(tmp_path):
    ttfts, itls, outs, errors, inputs = _requests(40, 3, empty=8)
    duration = _closed_loop_duration(ttfts, itls, 8)
    record = _vllm_result(ttfts, itls, outs, errors, inputs, duration, concurrency=8)
    assert record["completed"] == 40  # vLLM counted the 8 empty ones as successes
    (tmp_path / "c8.json").write_text(json.dumps(record))
    requests = _requests(40, 7)  # no empty request
    other_duration = _closed_loop_duration(requests[0], requests[1], 16)
    other = _vllm_result(*requests, other_duration, concurrency=16)
    (tmp_path / "c16.json").write_text(json.dumps(other))
    curve = data.read_vllm_bench(tmp_path)
    served = slice(8, None)
    qps = curve.measured_qps.sel(concurrency=8).item()
    assert qps == pytest.approx(32 / duration)
    assert curve.measured_qps.sel(concurrency=16).item() == pytest.approx(40 / other_duration)
    # the workload: means of the runs' served requests
    runs_out = [np.mean(outs[served]), np.mean(other["output_lens"])]
    runs_in = [np.mean(inputs[served]), np.mean(other["input_lens"])]
    assert curve.attrs["output_tokens"] == pytest.approx(np.mean(runs_out))
    assert curve.attrs["prompt_tokens"] == pytest.approx(np.mean(runs_in))
    ttft_p50 = curve.latency.sel(concurrency=8, metric="ttft", latency_quantile=0.5).item()
    assert ttft_p50 == pytest.approx(np.percentile(ttfts[served], 50))
    assert any("8 requests without error but with no output" in n for n in latency.notes(curve))


def test_a_rate_run_is_placed_by_the_throughput_of_served_requests(tmp_path):
    placed = {}
    for rate, seed, duration in ((4.0, 4, 30.0), (8.0, 8, 20.0)):
        ttfts, itls, outs, errors, inputs = _requests(60, seed, empty=12)
        record = _vllm_result(ttfts, itls, outs, errors, inputs, duration, rate=rate)
        (tmp_path / f"rate{rate:g}.json").write_text(json.dumps(record))
        e2e = float(np.mean([t + sum(i) for t, i in zip(ttfts[12:], itls[12:], strict=True)]))
        placed[rate] = (max(1, round(48 / duration * e2e)), round(60 / duration * e2e))
    curve = data.read_vllm_bench(tmp_path)
    assert curve.concurrency.values.tolist() == sorted(v[0] for v in placed.values())
    # vLLM's own throughput (completed, empty requests included) would place them higher
    assert all(vllm > served for served, vllm in placed.values())
    assert any("Little's law" in n for n in latency.notes(curve))


def test_a_summary_only_rate_run_is_refused(tmp_path):
    ttfts, itls, outs, errors, inputs = _requests(20, 5)
    record = _vllm_result(ttfts, itls, outs, errors, inputs, 10.0, rate=2.0)
    for key in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"):
        del record[key]  # what --save-result writes without --save-detailed
    (tmp_path / "rate2.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError, match=r"rate2\.json: a run at request_rate 2\.0 .*summary"):
        data.read_vllm_bench(tmp_path / "rate2.json")


def test_every_request_without_output_is_an_error(tmp_path):
    ttfts, itls, outs, errors, inputs = _requests(5, 6, empty=5)
    record = _vllm_result(ttfts, itls, outs, errors, inputs, 5.0, concurrency=5)
    (tmp_path / "c5.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="c5.json: every request failed or produced no output"):
        data.read_vllm_bench(tmp_path / "c5.json")

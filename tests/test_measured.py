"""The published-measurements table: schema, figures checked against their sources, bad files."""

from __future__ import annotations

import math

import pytest

from capnb.data import _measured, list_gpus, list_measurement_sources, load_measurements
from capnb.errors import InputError, UnknownNameError

COLUMNS = [
    "source", "gpu", "model", "engine", "engine_version", "tensor_parallel", "dtype",
    "input_tokens", "output_tokens", "mode", "load", "metric", "stat", "value", "unit",
]  # fmt: skip


@pytest.fixture(scope="module")
def table():
    return load_measurements()


def test_schema(table):
    assert list(table.columns) == COLUMNS
    assert set(table.gpu) <= set(list_gpus())
    assert set(table["mode"]) <= {"concurrency", "request_rate", "batch"}
    assert set(table.metric) <= {"ttft", "tpot", "itl", "e2e", "output_throughput",
                                 "request_throughput"}  # fmt: skip
    for column in ("input_tokens", "output_tokens", "load", "value", "tensor_parallel"):
        assert (table[column] > 0).all() and table[column].map(math.isfinite).all()
    throughput = table.metric.str.endswith("throughput")
    assert set(table.stat[throughput]) == {"value"}
    assert set(table.stat[~throughput]) <= {"mean", "p50", "p90", "p95", "p99"}
    assert set(table.unit[~throughput]) == {"s"}


def test_sources_and_counts(table):
    sources = list_measurement_sources()
    assert {
        "dstack-mi300x-tgi-vs-vllm",
        "lmdeploy-a100",
        "trtllm-static-batch",
        "datacrunch-h200-sglang",
        "datacrunch-h200-sglang-deepseek-v3",
        "sgl-cookbook-v056",
        "rocm-vllm-mi300x-latency",
        "gpustack-perflab-vllm",
        "gpustack-perflab-sglang",
        "gpustack-perflab-trtllm",
        "sgl-cookbook-mi300x-v057",
    } <= set(sources)
    assert sum(sources.values()) == len(table)
    for name, rows in sources.items():
        one = load_measurements(name)
        assert len(one) == rows and set(one.source) == {name}
    # one figure per row: no configuration repeats a (metric, stat)
    keys = [c for c in COLUMNS if c not in ("value", "unit")]
    assert not table.duplicated(keys).any()


def _figure(table, **where):
    rows = table
    for column, value in where.items():
        rows = rows[rows[column] == value]
    assert len(rows) == 1, where
    return float(rows.value.iloc[0])


def test_dstack_figures():
    """Figures of github.com/dstackai/benchmarks @06c957ab amd/tgi_vs_vllm/*/data/result_*.csv."""
    table = load_measurements("dstack-mi300x-tgi-vs-vllm")
    vllm = table[(table.engine == "vLLM") & (table.engine_version == "0.6.3.dev116+g151ef4ef")]
    # result_vllm_short.csv, 64 requests: P99 TTFT 4723.29 ms, median TPOT 237.99 ms
    short = vllm[(vllm.input_tokens < 100) & (vllm.load == 64)]
    assert _figure(short, metric="ttft", stat="p99") == pytest.approx(4.72329, rel=1e-12)
    assert _figure(short, metric="tpot", stat="p50") == pytest.approx(0.23799, rel=1e-12)
    # the run's mean prompt: 5189 input tokens / 64 requests
    assert set(short.input_tokens) == {5189 / 64}
    tgi = table[(table.engine == "TGI") & (table.load == 2048)]
    assert _figure(tgi, metric="output_throughput", stat="value") == 852.79
    assert set(tgi["mode"]) == {"batch"} and set(tgi.gpu) == {"MI300X"}
    assert set(table.tensor_parallel) == {8} and set(table.model) == {"Llama-3.1-405B"}


def test_lmdeploy_figures():
    """Figures of InternLM/lmdeploy docs/en/benchmark/a100_fp16.md @3e391df4 (v0.1.0a1), @f148d471."""
    table = load_measurements("lmdeploy-a100")
    seventy = table[(table.model == "Llama-2-70B") & (table.engine_version == "0.1.0a1")]
    static = seventy[(seventy.input_tokens == 2048) & (seventy.output_tokens == 2048)]
    static = static[static.load == 64]
    assert set(static.tensor_parallel) == {4}
    # request-throughput run of v0.2.0, llama2-70b, concurrency 256: P99 per-token latency 0.482 s
    v020 = table[(table.engine_version == "0.2.0") & (table.model == "Llama-2-70B")]
    assert _figure(v020, metric="itl", stat="p99") == 0.482
    assert _figure(v020, metric="request_throughput", stat="value") == 7.231
    assert set(v020.load) == {256.0}
    assert set(table.gpu) == {"A100-80GB"} and set(table["mode"]) == {"concurrency"}


def test_trtllm_figures():
    """Figures of NVIDIA/TensorRT-LLM docs/source/performance.md @138f96d4 and blogs/H200launch.md."""
    table = load_measurements("trtllm-static-batch")
    h100 = table[
        (table.gpu == "H100-SXM") & (table.model == "Llama-2-70B") & (table.metric == "ttft")
    ]
    assert _figure(h100, input_tokens=2048, tensor_parallel=4) == pytest.approx(0.109, rel=1e-12)
    # 1,654 output tokens/s per GPU at TP2 -> 3308 for the replica
    h200 = table[(table.gpu == "H200") & (table.engine_version == "0.5.0")]
    assert _figure(h200, model="Llama-2-70B", tensor_parallel=2, load=512) == 3308
    assert set(table["mode"]) == {"batch"}


def test_datacrunch_figures():
    """Figures of datacrunch-research/h200-benchmarks @c091ef53 sglang/outputs/llama_405b_online_output."""
    table = load_measurements("datacrunch-h200-sglang")
    run = table[(table.model == "Llama-3.1-405B") & (table["mode"] == "request_rate")]
    run = run[(run.load == 4) & (run.input_tokens == 615860 / 1200)]
    assert _figure(run, metric="ttft", stat="p50") == pytest.approx(0.6021358293946832, rel=1e-12)
    assert _figure(run, metric="output_throughput") == pytest.approx(1598.64314902264, rel=1e-12)
    assert set(run.tensor_parallel) == {8} and set(run.gpu) == {"H200"}


def test_datacrunch_deepseek_figures():
    """Figures of datacrunch-research/blogs @f5752e89 deepseek-v3-h200-deployment.md."""
    table = load_measurements("datacrunch-h200-sglang-deepseek-v3")
    one_node = table[(table.tensor_parallel == 8) & (table.dtype == "fp8") & (table.load == 1)]
    assert _figure(one_node, metric="e2e", stat="p50") == pytest.approx(147.73543, rel=1e-12)
    two_nodes = table[(table.tensor_parallel == 16) & (table.dtype == "bf16") & (table.load == 8)]
    assert _figure(two_nodes, metric="ttft", stat="p50") == pytest.approx(4072.70672, rel=1e-12)
    assert set(table.model) == {"DeepSeek-V3"} and set(table.input_tokens) == {1024}


def test_sgl_cookbook_figures():
    """Figures of sgl-project/sgl-cookbook @7b5bd9c0 docs/autoregressive/*/*.md, 5.1 Speed Benchmark."""
    table = load_measurements("sgl-cookbook-v056")
    llama = table[(table.model == "Llama-3.1-70B") & (table.load == 16)]
    short = llama[llama.input_tokens == 495.85]  # 39,668 input tokens / 80 requests
    assert _figure(short, metric="ttft", stat="p99") == pytest.approx(0.79193, rel=1e-12)
    assert set(llama.gpu) == {"A100-80GB"}
    qwen = table[(table.model == "Qwen3-235B-A22B") & (table.load == 100)]
    assert _figure(qwen, metric="output_throughput") == 2738.78
    r1 = table[(table.model == "DeepSeek-R1") & (table.load == 1) & (table.output_tokens == 421)]
    r1 = r1[r1.input_tokens == 610.1]
    assert _figure(r1, metric="tpot", stat="p50") == pytest.approx(0.00915, rel=1e-12)
    assert set(r1.dtype) == {"fp8"} and set(r1.engine_version) == {"0.5.6.post1"}
    assert set(table["mode"]) == {"concurrency"} and set(table.tensor_parallel) == {8}
    assert set(table.load) == {1, 16, 64, 100}


def test_rocm_vllm_figures():
    """Figures of ROCm/vllm docs/dev-docker/README.md @7545048a (0.9.1) and @7802e2b7 (0.10.0)."""
    table = load_measurements("rocm-vllm-mi300x-latency")
    v091 = table[(table.engine_version == "0.9.1") & (table.model == "Llama-3.1-70B")]
    assert _figure(v091, load=1) == 17.236
    v0100 = table[(table.engine_version == "0.10.0") & (table.model == "Llama-3.1-405B")]
    assert _figure(v0100, load=128) == 118.212
    # the 2048-token prompts are left out (prefix-cached in the timed iterations)
    assert set(table.input_tokens) == {128} and set(table.output_tokens) == {2048}
    assert set(table.metric) == {"e2e"} and set(table["mode"]) == {"batch"}
    assert len(table) == 32


def test_gpustack_figures():
    """Figures of gpustack/gpustack @47277d79 docs/performance-lab/*/*.md (baseline vLLM runs)."""
    table = load_measurements("gpustack-perflab-vllm")
    qwen = table[(table.model == "Qwen3-235B-A22B") & (table.gpu == "H100-SXM")
                 & (table.tensor_parallel == 8) & (table.input_tokens == 32000)]  # fmt: skip
    assert _figure(qwen, metric="ttft", stat="mean") == pytest.approx(70.40955, rel=1e-12)
    assert set(qwen["mode"]) == {"batch"} and set(qwen.load) == {100}
    small = table[(table.model == "Qwen3-8B") & (table.load == 1)]
    assert _figure(small, metric="tpot", stat="p50") == pytest.approx(0.00722, rel=1e-12)
    assert _figure(small, metric="output_throughput") == 132.86
    assert set(small["mode"]) == {"concurrency"}
    r1 = table[(table.model == "DeepSeek-R1") & (table["mode"] == "concurrency")]
    assert _figure(r1, metric="itl", stat="p99") == pytest.approx(0.04861, rel=1e-12)
    assert set(r1.gpu) == {"H200"} and set(r1.dtype) == {"fp8"}
    oss = table[(table.model == "gpt-oss-120b") & (table.gpu == "H100-SXM")]
    assert set(oss.engine_version) == {"0.10.2"}
    assert set(table.engine) == {"vLLM"} and "e2e" not in set(table.metric)
    assert len(table) == 517


def test_gpustack_sglang_figures():
    """Figures of gpustack/gpustack @47277d79 docs/performance-lab/*/*.md (the SGLang runs)."""
    table = load_measurements("gpustack-perflab-sglang")
    qwen = table[(table.model == "Qwen3-235B-A22B") & (table.gpu == "H100-SXM")]
    assert _figure(qwen, metric="ttft", stat="mean") == pytest.approx(11.71528, rel=1e-12)
    assert set(qwen.load) == {984} and set(qwen.input_tokens) == {217.6189}  # 214137 / 984
    r1 = table[table.model == "DeepSeek-R1"]
    assert (
        set(r1.gpu) == {"H200"} and set(r1.dtype) == {"fp8"} and set(r1.engine_version) == {"0.5.3"}
    )
    long = r1[r1.input_tokens == 31999]  # 3199900 / 100
    assert _figure(long, metric="itl", stat="p99") == pytest.approx(1.68063, rel=1e-12)
    assert _figure(r1[r1.input_tokens == 126.882], metric="request_throughput") == 156.24
    small = table[table.model == "Qwen3-8B"]
    assert set(small["mode"]) == {"concurrency"} and set(small.load) == {4}
    assert _figure(small[small.dtype == "bf16"], metric="tpot", stat="p50") == pytest.approx(
        0.00714, rel=1e-12
    )
    assert _figure(small[small.dtype == "fp8"], metric="ttft", stat="p99") == pytest.approx(
        0.13498, rel=1e-12
    )
    oss = table[(table.model == "gpt-oss-120b") & (table.gpu == "A100-80GB")]
    assert _figure(oss, metric="tpot", stat="p99") == pytest.approx(6.65659, rel=1e-12)
    assert set(table.engine) == {"SGLang"} and "e2e" not in set(table.metric)
    assert len(table) == 143  # 13 runs of 11 figures


def test_gpustack_trtllm_figures():
    """Figures of gpustack/gpustack @47277d79 docs/performance-lab/qwen3-8b/h100-latency.md (TensorRT-LLM)."""
    table = load_measurements("gpustack-perflab-trtllm")
    assert _figure(table, metric="ttft", stat="p99") == pytest.approx(0.13471, rel=1e-12)
    assert _figure(table, metric="itl", stat="mean") == pytest.approx(0.00759, rel=1e-12)
    assert _figure(table, metric="output_throughput") == 487.38
    assert set(table.engine) == {"TensorRT-LLM"} and set(table.engine_version) == {"1.2.0rc1"}
    assert set(table["mode"]) == {"concurrency"} and set(table.load) == {4}
    assert set(table.model) == {"Qwen3-8B"} and set(table.gpu) == {"H100-SXM"}
    assert len(table) == 11  # one run


def test_sgl_cookbook_mi300x_figures():
    """Figures of sgl-project/sgl-cookbook @7b5bd9c0 docs/autoregressive/DeepSeek/DeepSeek-V3_1.md."""
    table = load_measurements("sgl-cookbook-mi300x-v057")
    busy = table[table.load == 100]
    assert _figure(busy, metric="e2e", stat="mean") == pytest.approx(37.8002, rel=1e-12)
    assert _figure(busy, metric="ttft", stat="p99") == pytest.approx(2.86852, rel=1e-12)
    assert _figure(busy, metric="tpot", stat="p50") == pytest.approx(0.07635, rel=1e-12)
    assert set(table.gpu) == {"MI300X"} and set(table.model) == {"DeepSeek-V3"}
    assert set(table.engine_version) == {"0.5.7"} and set(table.tensor_parallel) == {8}
    assert len(table) == 126


def test_runs_the_kv_cache_cannot_hold_are_listed_not_scored():
    # gpustack's Qwen3-32B served 32,000-token prompts on one GPU, where capnb's vLLM accounting of
    # the default launch on an H100 leaves 18,256 tokens of KV cache: simulated with that cache
    # the run is not the one measured, so it is named among what was not simulated. On the A100,
    # vllm serve profiles 256 sequences and 2,048 tokens (not the H100's 1,024 and 8,192): the
    # smaller reserve leaves room for the 32,077-token request, and that run is scored (it was
    # listed while the engine profiled every GPU at the H100's settings)
    from capnb.latency import _fit

    pts, skipped = _fit.points(load_measurements("gpustack-perflab-vllm"))
    named = [s for s in skipped if "Qwen3-32B" in s]
    assert len(named) == 1 and "H100-SXM" in named[0], named
    assert "32,077-token request does not fit the 18,256 tokens" in named[0]
    long = [p for p in pts if p.model == "Qwen3-32B" and p.input_tokens > 30000]
    assert [p.gpu for p in long] == ["A100-80GB"]
    assert all(_fit.setup(p) is not None for p in pts)


def test_unknown_source():
    with pytest.raises(UnknownNameError, match="measurement source"):
        load_measurements("no-such-source")


def _write(folder, name, rows, header=None):
    path = folder / f"{name}.csv"
    header = header or ",".join(COLUMNS)
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


GOOD = "bad,H100-SXM,Llama-3.1-8B,vLLM,0.6.0,1,bf16,1000,100,concurrency,8,ttft,p99,0.5,s"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (GOOD.replace("H100-SXM", "H100-NVL"), "row 3: gpu 'H100-NVL'"),
        (GOOD.replace("concurrency", "closed"), "row 3: mode 'closed'"),
        (GOOD.replace("ttft", "latency"), "row 3: metric 'latency'"),
        (GOOD.replace("p99", "p75"), "row 3: stat 'p75'"),
        (GOOD.replace(",s", ",ms"), "row 3: unit 'ms'"),
        (GOOD.replace("0.5,s", "-0.5,s"), "row 3: value '-0.5'"),
        (GOOD.replace("0.5,s", "nan,s"), "row 3: value 'nan'"),
        (GOOD.replace(",8,", ",inf,"), "row 3: load 'inf'"),
        (GOOD.replace(",1000,", ",many,"), "row 3: input_tokens 'many' is not a number"),
        (GOOD.replace(",vLLM,", ",,"), "row 3: engine is empty"),
        (GOOD.replace("bad,", "other,"), "row 3: source 'other'"),
        (
            GOOD.replace("ttft,p99", "output_throughput,p99"),
            "row 3: stat 'p99' of output_throughput",
        ),
    ],
)
def test_bad_rows_name_file_and_row(tmp_path, monkeypatch, row, message):
    _write(tmp_path, "bad", [GOOD, row])
    monkeypatch.setattr(_measured, "_folder", lambda unseen=False: tmp_path)
    with pytest.raises(InputError, match=f"bad.csv {message}"):
        load_measurements("bad")


def test_bad_columns(tmp_path, monkeypatch):
    _write(tmp_path, "bad", [GOOD + ",x"], header=",".join([*COLUMNS, "extra"]))
    monkeypatch.setattr(_measured, "_folder", lambda unseen=False: tmp_path)
    with pytest.raises(InputError, match="bad.csv: columns must be exactly"):
        load_measurements()
    with pytest.raises(InputError, match="bad.csv"):
        list_measurement_sources()


def test_good_file_reads(tmp_path, monkeypatch):
    _write(tmp_path, "bad", [GOOD])
    monkeypatch.setattr(_measured, "_folder", lambda unseen=False: tmp_path)
    one = load_measurements()
    assert one.value.tolist() == [0.5] and one.tensor_parallel.tolist() == [1]
    assert list_measurement_sources() == {"bad": 1}

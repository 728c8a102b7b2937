"""Every loader under generated input: a valid result or a capnb error, nothing else.

hypothesis writes CSV, JSON and JSON-lines files (and Parquet tables, and config mappings) built
from cells that are right, nearly right and wrong: ISO times with and without UTC offsets, epoch
numbers, NaN and inf, negative and fractional counts, text, empty cells, quotes and commas,
missing and extra columns, truncated text. Each loader must return a result that passes the
checks below or raise a :class:`capnb.errors.CapnbError` - never another exception (which would
reach a user as a traceback from pandas, pyarrow or numba), and never a warning other than the
documented :class:`capnb.data.TraceWarning` (pytest turns the rest into errors).

Inputs are a few rows of short cells, so every example runs in milliseconds: no example can hang.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xarray as xr
from hypothesis import example, given, settings
from hypothesis import strategies as st

from capnb import data
from capnb.data import TraceWarning
from capnb.errors import CapnbError
from capnb.modelspec import ModelSpec

pytestmark = pytest.mark.filterwarnings("ignore::capnb.data.TraceWarning")

# -- cells ----------------------------------------------------------------------------------------
iso_times = st.builds(
    lambda day, second, fraction, zone: (
        f"2024-01-{day:02d}T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        f"{fraction}{zone}"
    ),
    st.integers(1, 28),
    st.integers(0, 86_399),
    st.sampled_from(["", ".5", ".123456", ".1234567"]),
    st.sampled_from(["", "", "Z", "+00:00", "+01:00", "-05:30", "+0200"]),
)
numbers = st.one_of(
    st.integers(-10, 10**4),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
).map(str)
words = st.text(alphabet="ab ,\"';:\\\t-+.eE0123456789nNaAiIfF", max_size=8)
cells = st.one_of(iso_times, numbers, words, st.just(""), st.sampled_from(["nan", "inf", "-1"]))


def rows_of(columns: int):
    return st.lists(st.lists(cells, min_size=columns, max_size=columns), max_size=6)


@st.composite
def csv_text(draw, header_choices):
    """A CSV: a header drawn from plausible and wrong names, rows of cells, sometimes malformed."""
    header = draw(st.lists(st.sampled_from(header_choices), min_size=1, max_size=4, unique=True))
    rows = draw(rows_of(len(header)))
    out = io.StringIO()
    if draw(st.booleans()):  # properly quoted
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    else:  # raw: commas and quotes inside cells break the structure
        out.write(",".join(header) + "\n")
        out.writelines(",".join(row) + "\n" for row in rows)
    text = out.getvalue()
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]  # truncated anywhere
    return text


json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**66), 2**66),
        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6), iso_times,
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6,
)  # fmt: skip


@st.composite
def jsonl_text(draw, keys):
    records = draw(st.lists(st.dictionaries(st.sampled_from(keys), json_values, max_size=len(keys)),
                            min_size=0, max_size=5))  # fmt: skip
    lines = [
        json.dumps(r) if draw(st.booleans()) else json.dumps(list(r.values())) for r in records
    ]
    text = "\n".join(lines) + "\n"
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


# -- running a loader -----------------------------------------------------------------------------
@contextlib.contextmanager
def a_file(name: str, content: str | bytes):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        yield path


def outcome(load):
    """The loader's result, or None when it raised a capnb error; anything else propagates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        try:
            return load()
        except CapnbError as err:
            assert str(err), "a capnb error must say what is wrong"
            return None


def check_request_log(ds):
    assert isinstance(ds, xr.Dataset) and ds.sizes["request"] >= 1
    ns = ds.time.values.astype("datetime64[ns]").view(np.int64)
    assert (np.diff(ns) >= 0).all()
    assert ds.attrs["timezone"] and ds.attrs["weekday_known"] in ("yes", "no")
    for name in ("prompt_tokens", "output_tokens"):
        if name in ds:
            assert ds[name].dtype == np.int64 and (ds[name].values >= 0).all()


def check_rate_series(ds):
    assert isinstance(ds, xr.Dataset) and ds.sizes["time"] >= 1
    qps = ds.qps.values
    assert ((qps >= 0) | np.isnan(qps)).all() and np.isfinite(qps[~np.isnan(qps)]).all()
    steps = np.diff(ds.time.values.astype("datetime64[ns]").view(np.int64))
    assert (steps == round(ds.attrs["interval_s"] * 1e9)).all()


def check_curve(ds):
    assert isinstance(ds, xr.Dataset)
    concurrency = ds.concurrency.values
    assert concurrency.size >= 2 and (concurrency >= 1).all() and (np.diff(concurrency) > 0).all()
    latency = ds.latency.values
    assert ((latency >= 0) | np.isnan(latency)).all()
    assert not np.isnan(latency).all() or not np.isnan(ds.mean_latency.values).all()


# -- request logs ---------------------------------------------------------------------------------
TRACE_COLUMNS = ["timestamp", "time", "TIMESTAMP", "ContextTokens", "GeneratedTokens",
                 "prompt_tokens", "output_tokens", "input_length", "other"]  # fmt: skip


@given(csv_text(TRACE_COLUMNS), st.sampled_from([None, "s", "ms", "ns"]),
       st.sampled_from([None, "UTC", "Europe/Berlin"]))  # fmt: skip
def test_trace_csv(text, time_unit, timezone):
    with a_file("trace.csv", text) as path:
        ds = outcome(lambda: data.load_trace(path, time_unit=time_unit, timezone=timezone))
    if ds is not None:
        check_request_log(ds)


@given(csv_text(TRACE_COLUMNS))
def test_trace_azure_format(text):
    with a_file("trace.csv", text) as path:
        ds = outcome(lambda: data.load_trace(path, format="azure"))
    if ds is not None:
        check_request_log(ds)


@given(jsonl_text(["timestamp", "input_length", "output_length", "hash_ids"]),
       st.sampled_from([None, "2024-05-10 00:00"]))  # fmt: skip
def test_trace_mooncake_jsonl(text, start):
    with a_file("trace.jsonl", text) as path:
        ds = outcome(lambda: data.load_trace(path, start=start))
    if ds is not None:
        check_request_log(ds)


parquet_columns = st.one_of(
    st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=5).map(pa.array),
    st.lists(st.floats(width=64), min_size=1, max_size=5).map(pa.array),
    st.lists(st.one_of(iso_times, st.text(max_size=4)), min_size=1, max_size=5).map(pa.array),
    st.lists(st.integers(0, 2**40), min_size=1, max_size=5).map(
        lambda v: pa.array(np.array(v, "datetime64[ms]"))
    ),
)


@given(st.dictionaries(st.sampled_from(TRACE_COLUMNS), parquet_columns, min_size=1, max_size=3),
       st.sampled_from([None, "s", "ms"]))  # fmt: skip
# a token count below -2**63 as a float: cast to int64 before its sign was checked (numpy's
# "invalid value encountered in cast" where the row should be named)
@example(columns={"timestamp": pa.array(np.array([0], "datetime64[ms]")), "time": pa.array([0]),
                  "ContextTokens": pa.array([-9.223372036854778e18])}, time_unit=None)  # fmt: skip
def test_trace_parquet(columns, time_unit):
    size = min(len(c) for c in columns.values())
    table = pa.table({k: v.slice(0, size) for k, v in columns.items()})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.parquet"
        pq.write_table(table, path)
        ds = outcome(lambda: data.load_trace(path, time_unit=time_unit))
    if ds is not None:
        check_request_log(ds)


@given(st.binary(max_size=64), st.sampled_from(["t.csv", "t.jsonl", "t.parquet", "t.csv.gz"]))
def test_trace_from_arbitrary_bytes(content, name):
    with a_file(name, content) as path:
        ds = outcome(lambda: data.load_trace(path, time_unit="s"))
    if ds is not None:
        check_request_log(ds)


# -- rate series ----------------------------------------------------------------------------------
@given(csv_text(["t", "qps", "requests", "other"]), st.sampled_from([None, "s", "ms"]),
       st.sampled_from([None, 600, "1min"]), st.sampled_from(["qps", "requests"]),
       st.sampled_from([None, "2024-01-01"]))  # fmt: skip
def test_rate_series_csv(text, time_unit, interval, value, start):
    column = {"rate_column": "qps"} if value == "qps" else {"count_column": "requests"}
    with a_file("series.csv", text) as path:
        ds = outcome(lambda: data.load_rate_series(path, time_column="t", time_unit=time_unit,
                                                   interval=interval, start=start, **column))  # fmt: skip
    if ds is not None:
        check_rate_series(ds)


# -- latency tables and benchmark files -----------------------------------------------------------
TABLE_COLUMNS = ["concurrency", "e2e_p99_ms", "e2e_p50_ms", "e2e_mean_ms", "ttft_p99", "ttft_p99_s",
                 "tpot_mean_ms", "qps", "output_tokens", "e2e_p100_ms", "itl_median_us"]  # fmt: skip


@given(csv_text(TABLE_COLUMNS), st.sampled_from([None, "ms", "s"]))
def test_latency_table_csv(text, units):
    with a_file("table.csv", text) as path:
        ds = outcome(lambda: data.read_latency_table(path, units=units))
    if ds is not None:
        check_curve(ds)


@given(jsonl_text(TABLE_COLUMNS))
def test_latency_table_jsonl(text):
    with a_file("table.jsonl", text) as path:
        ds = outcome(lambda: data.read_latency_table(path))
    if ds is not None:
        check_curve(ds)


VLLM_KEYS = ["completed", "request_throughput", "total_input_tokens", "total_output_tokens",
             "max_concurrency", "request_rate", "num_prompts", "p99_ttft_ms", "median_ttft_ms",
             "mean_e2el_ms", "p99_e2el_ms", "mean_tpot_ms", "ttfts", "itls", "output_lens",
             "errors", "latencies", "model_id"]  # fmt: skip
vllm_numbers = st.one_of(st.integers(-5, 2000), st.floats(-1, 5000), st.just("inf"), st.none())
vllm_records = st.dictionaries(
    st.sampled_from(VLLM_KEYS),
    st.one_of(vllm_numbers, st.lists(st.one_of(vllm_numbers, st.lists(st.floats(0, 1), max_size=3)),
                                     max_size=4), st.text(max_size=4)),
)  # fmt: skip


@given(st.lists(vllm_records, min_size=1, max_size=3), st.booleans(), st.booleans())
def test_vllm_bench(records, appended, prefer_detailed):
    with tempfile.TemporaryDirectory() as folder:
        if appended:
            paths = Path(folder) / "runs.jsonl"
            paths.write_text("\n".join(json.dumps(r) for r in records))
        else:
            paths = []
            for i, record in enumerate(records):
                paths.append(Path(folder) / f"run{i}.json")
                paths[-1].write_text(json.dumps(record))
        ds = outcome(lambda: data.read_vllm_bench(paths, prefer_detailed=prefer_detailed))
    if ds is not None:
        check_curve(ds)


AIPERF_NAMES = ["Request Latency (ms)", "Time to First Token (ms)", "Inter Token Latency (ms)",
                "Inter Chunk Latency (us)", "Output Sequence Length (tokens)", "Request Latency",
                "Time To First Token (s)", "Request Throughput (requests/sec)", "Other (ms)"]  # fmt: skip


@st.composite
def aiperf_text(draw):
    stats = draw(st.lists(st.sampled_from(["avg", "min", "max", "p50", "p90", "p99", "std", "x"]),
                          min_size=1, max_size=4, unique=True))  # fmt: skip
    rows = draw(st.lists(st.tuples(st.sampled_from(AIPERF_NAMES),
                                   st.lists(cells, min_size=len(stats), max_size=len(stats))),
                         max_size=5))  # fmt: skip
    lines = ["Metric," + ",".join(stats)] + [",".join([n, *v]) for n, v in rows]
    if draw(st.booleans()):
        lines += ["", "Metric,Value", f"Request Throughput (requests/sec),{draw(cells)}"]
    return "\n".join(lines) + "\n"


@given(st.lists(aiperf_text(), min_size=1, max_size=3))
def test_aiperf_exports(texts):
    with tempfile.TemporaryDirectory() as folder:
        runs = {}
        for i, text in enumerate(texts):
            runs[2**i] = Path(folder) / f"c{2**i}_profile_export_aiperf.csv"
            runs[2**i].write_text(text)
        ds = outcome(lambda: data.read_aiperf(runs))
    if ds is not None:
        check_curve(ds)


@given(csv_text(["concurrency", "request_latency_p99_mean", "request_latency_avg_mean",
                 "time_to_first_token_p99_mean", "request_throughput_avg_mean"]))  # fmt: skip
def test_aiperf_sweep(text):
    with a_file("profile_export_aiperf_sweep.csv", text) as path:
        ds = outcome(lambda: data.read_aiperf(path))
    if ds is not None:
        check_curve(ds)


# -- model configs --------------------------------------------------------------------------------
LLAMA = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
         "torch_dtype": "bfloat16"}  # fmt: skip
CONFIG_KEYS = [*LLAMA, "head_dim", "n_layer", "num_local_experts", "num_experts_per_tok",
               "kv_lora_rank", "qk_rope_head_dim", "quantization_config", "tie_word_embeddings",
               "model_type", "max_position_embeddings"]  # fmt: skip
config_values = st.one_of(
    st.integers(-2, 70_000), st.floats(-1, 1e5), st.sampled_from(["bfloat16", "float8", "x"]),
    st.none(), st.booleans(), st.dictionaries(st.sampled_from(["quant_method", "bits", "fmt"]),
                                              st.one_of(st.integers(0, 16), st.text(max_size=4)),
                                              max_size=2),
)  # fmt: skip


def check_model(spec):
    assert isinstance(spec, ModelSpec)
    assert spec.parameters > 0 and spec.weight_bytes() > 0
    assert spec.kv_bytes_per_token() > 0 and math.isfinite(spec.kv_bytes_per_token())


@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), config_values, max_size=6), st.booleans())
def test_model_config_mapping(changes, start_from_llama):
    config = {**(LLAMA if start_from_llama else {}), **changes}
    spec = outcome(lambda: data.load_model(config))
    if spec is not None:
        check_model(spec)


@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), config_values, max_size=6),
       st.integers(0, 400))  # fmt: skip
def test_model_config_file(changes, cut):
    text = json.dumps({**LLAMA, **changes})
    with a_file("config.json", text[: max(cut, 0)] if cut < len(text) else text) as path:
        spec = outcome(lambda: data.load_model(path))
    if spec is not None:
        check_model(spec)


@settings(max_examples=20, deadline=None)
@given(st.binary(max_size=48))
@example(b"\r\x01")  # AIPerf's CSV reader raised csv.Error on a lone carriage return
def test_every_reader_on_arbitrary_bytes(content):
    readers = [
        ("t.csv", lambda p: data.read_latency_table(p)),
        ("t.jsonl", lambda p: data.read_latency_table(p)),
        ("t.parquet", lambda p: data.read_latency_table(p)),
        ("r.csv", lambda p: data.load_rate_series(p, time_column="t", rate_column="qps")),
        ("r.parquet", lambda p: data.load_rate_series(p, time_column="t", rate_column="qps")),
        ("v.json", lambda p: data.read_vllm_bench(p)),
        ("a.csv", lambda p: data.read_aiperf({1: p})),
        ("config.json", lambda p: data.load_model(p)),
    ]
    for name, read in readers:
        with a_file(name, content) as path:
            outcome(lambda path=path, read=read: read(path))

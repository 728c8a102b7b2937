"""One table of bad inputs across every loader and public function, each with its expected outcome.

A row is the bad input in words, the call, and one of three outcomes:

- :class:`Raises`: a capnb error of exactly this type whose message matches the regex; the regex
  names the argument, field, file or row at fault and, where there is one, what would be valid;
- :class:`Corrects`: a documented correction, announced by a warning (matched) and visible in the
  result (checked);
- :class:`States`: a legitimate answer that is "no" - an infeasible plan - stated in words
  (matched), never a silent fallback such as the article's concurrency of 1.

No row may end in another exception: not a ``KeyError``, a ``TypeError`` or ``ValueError`` from
numpy or pandas, an error from pyarrow, nor a traceback from inside a numba kernel.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import xarray as xr

from capnb import capacity, coldstart, data, elasticity, forecast, latency, memory, plan
from capnb.data import TraceWarning
from capnb.errors import (
    BudgetError,
    CapnbError,
    ConfigError,
    InputError,
    OutputError,
    UnknownNameError,
)

FIXTURES = Path(__file__).parent / "fixtures" / "capacity"


@dataclass(frozen=True)
class Raises:
    error: type[CapnbError]
    match: str


@dataclass(frozen=True)
class Corrects:
    warning: type[Warning]
    match: str
    check: Callable[[object], bool]


@dataclass(frozen=True)
class States:
    answer: Callable[[object], str]
    match: str


@dataclass(frozen=True)
class Row:
    what: str
    call: Callable[[Callable[..., Path]], object]  # takes `write(name, text)`, returns a path
    expect: Raises | Corrects | States


# -- builders that keep the table short -------------------------------------------------------------
def trace(text, name="t.csv", **kw):
    return lambda write: data.load_trace(write(name, text), **kw)


def rates(text, name="r.csv", **kw):
    settings = {"time_column": "t", "rate_column": "qps", "time_unit": "s"} | kw
    return lambda write: data.load_rate_series(write(name, text), **settings)


def table(text, name="t.csv", **kw):
    return lambda write: data.read_latency_table(write(name, text), **kw)


def plan_file(text, name="p.toml"):
    return lambda write: plan.load_config(write(name, text))


def vllm(text, name="v.json"):
    return lambda write: data.read_vllm_bench(write(name, text))


def guidellm(change, name="benchmarks.json", read=None):
    """The GuideLLM fixture report with ``change(report)`` applied, read by read_benchmark."""
    report = json.loads((FIXTURES / "guidellm" / "benchmarks.json").read_text())
    change(report)
    return lambda write: (read or data.read_benchmark)(write(name, json.dumps(report)))


def _synchronous_only(report):
    """The report's first benchmark, as GuideLLM's synchronous strategy: one request at a time."""
    first = report["benchmarks"][0]
    first["config"]["strategy"] = {"type_": "synchronous", "worker_count": None,
                                   "max_concurrency": None}  # fmt: skip
    first["metrics"]["requests_per_second"]["successful"]["mean"] = 0.5  # 1 / 2.0 s mean e2e
    report["benchmarks"] = [first]


def rate_run(**fields):
    """One vllm bench serve result at 2 requests/s: 100 requests, 1.9 requests/s x 2 s in flight."""
    return {"completed": 100, "request_rate": 2.0, "request_throughput": 1.9,
            "total_input_tokens": 50000, "total_output_tokens": 10000, "mean_ttft_ms": 120.0,
            "median_ttft_ms": 100.0, "p99_ttft_ms": 400.0, "mean_e2el_ms": 2000.0,
            "median_e2el_ms": 1900.0, "p99_e2el_ms": 3500.0, **fields}  # fmt: skip


def bench_runs(path_of):
    """read_bench_runs of the path ``path_of(write)`` gives, as runs of Llama-3.1-8B on H100."""
    return lambda write: data.read_bench_runs(
        path_of(write), model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1, engine="vllm"
    )


def _bench(i, path, value):
    """Set ``benchmarks[i].<path>`` (dotted; None deletes it) in a GuideLLM report."""

    def change(report):
        *parents, last = path.split(".")
        node = report["benchmarks"][i]
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value

    return change


def parquet(**columns) -> bytes:
    """A Parquet file of ``columns`` (name: list of values), as bytes."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def parquet_of(names, *columns) -> bytes:
    """A Parquet file of ``columns`` under ``names`` (which may repeat a name), as bytes."""
    import io

    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_arrays([pa.array(c) for c in columns], names=names), sink)
    return sink.getvalue()


def config(**fields):
    """A Llama-2-7B-shaped config.json with ``fields`` replaced (None: removed)."""
    base = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "intermediate_size": 11008, "vocab_size": 32000, "torch_dtype": "float16"}  # fmt: skip
    return {k: v for k, v in (base | fields).items() if v is not None}


@functools.cache
def curve():
    return data.load_latency_curve("dstack-vllm-mi300x-short")


SLA_TTFT = capacity.SLA(ttft_s=1.0)
SHORT = latency.workload(prompt_tokens=[500, 1000], output_tokens=[100, 200])


def ttft(sla, target=10.0, **kw):
    return lambda _: capacity.plan(curve(), sla, target, metric="ttft", **kw)


def simulate(demand=(1.0, 2.0, 3.0), **kw):
    settings = {"step_s": 5, "per_instance_qps": 1.0} | kw
    return lambda _: elasticity.simulate(np.asarray(demand), **settings)


def timed(values, seconds):
    times = pd.Timestamp("2024-01-01") + pd.to_timedelta(seconds, unit="s")
    return xr.DataArray(np.asarray(values, float), dims="time", coords={"time": times})


GOOD_ROW = "2024-01-01T00:00:05"
TRACE_HEAD = "timestamp,prompt_tokens\n"
TABLE_HEAD = "concurrency,e2e_p99_ms,e2e_mean_ms\n"
MEASURED_HEAD = (
    "source,gpu,model,engine,engine_version,tensor_parallel,dtype,input_tokens,"
    "output_tokens,mode,load,metric,stat,value,unit\n"
)
MEASURED_ROW = (
    "src,H200,DeepSeek-V3,SGLang,0.4.1,8,bf16,1024,1024,request_rate,1,e2e,p50,214.92409,s"
)
VLLM_OK = ('{"completed": 10, "request_throughput": 1.0, "total_input_tokens": 100, '
           '"total_output_tokens": 100, "max_concurrency": 4, "p99_e2el_ms": 900}')  # fmt: skip
SERVEGEN = functools.cache(lambda: data.load_rate_series("servegen-m-large"))


# -- issue 31: inputs anyone may give -------------------------------------------------------------
def catalog_config(model_id, **changes):
    """A bundled model's config.json with ``changes`` (None: the key removed)."""
    base = dict(data.load_model(model_id).config)
    return {k: v for k, v in (base | changes).items() if v is not None}


def vllm_run(concurrency, **fields):
    """One closed-loop vllm bench serve result whose latencies and throughput agree."""
    e2e = 1000.0 * (1 + concurrency / 16)
    return {"completed": 10 * concurrency, "num_prompts": 10 * concurrency, "request_rate": "inf",
            "max_concurrency": concurrency, "request_throughput": concurrency / (e2e / 1000),
            "total_input_tokens": 500 * concurrency, "total_output_tokens": 500 * concurrency,
            "p99_e2el_ms": 1.2 * e2e, "mean_e2el_ms": e2e, **fields}  # fmt: skip


#: A Mistral-style 12B dense model's config.json, not in the catalog.
MISTRAL_12B = {"model_type": "mistral", "hidden_size": 5120, "intermediate_size": 14336,
               "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
               "head_dim": 128, "vocab_size": 131072, "torch_dtype": "bfloat16"}  # fmt: skip


def vllm_detailed(concurrency, change=None):
    """A closed-loop vllm bench serve result with its per-request lists (--save-detailed)."""
    n = 10 * concurrency
    run = vllm_run(concurrency, request_throughput=concurrency / 0.19, mean_e2el_ms=190.0,
                   p99_e2el_ms=200.0, ttfts=[0.1] * n, itls=[[0.01] * 9 for _ in range(n)],
                   output_lens=[10] * n, input_lens=[500] * n, errors=[""] * n)  # fmt: skip
    if change:
        change(run)
    return run


def bench_folder(write, runs):
    """A folder of vllm bench serve results, one file per run: its path."""
    folder = write("bench/.keep", "").parent
    for i, run in enumerate(runs):
        write(f"bench/run{i}.json", json.dumps(run))
    return folder


def symlink_loop(write, name):
    first = write("loop/x", "").parent / name
    other = first.with_name("other" + first.suffix)
    first.symlink_to(other.name)
    other.symlink_to(first.name)
    return first


def latin1_log(bad_row):
    """A request log of 3,000 rows whose user column holds one Latin-1 byte, in row ``bad_row``."""
    rows = (b"%d,100,50,%s\n" % (i, b"Jos\xe9" if i == bad_row else b"u") for i in range(3000))
    return b"timestamp,prompt_tokens,output_tokens,user\n" + b"".join(rows)


def dangling_link(write):
    """``out``: a symbolic link to a folder that does not exist."""
    link = write("x/.keep", "").parent / "out"
    link.symlink_to(link.parent / "nowhere")
    return link


def dangling_target(write):
    """``out`` whose ``plan.json`` is a symbolic link to a file that does not exist."""
    folder = write("out/.keep", "").parent
    (folder / "plan.json").symlink_to(folder.parent / "shared" / "plan.json")
    return folder


def folder_named(write, name):
    folder = write(f"{name}/.keep", "").parent
    return folder


BINARY = bytes(range(256)) * 2
#: JSON nested 100,000 deep: past Python's recursion limit in json.loads.
DEEP = "[" * 100_000 + "]" * 100_000


def l4_figure(column, value):
    """A row's call: :func:`own_catalog` with the L4's ``column`` written as ``value`` (text)."""
    return lambda w: own_catalog(
        w, lambda t: t.assign(**{column: t[column].where(t.gpu != "L4", value)})
    )


def own_catalog(write, edit, text=None):
    """Plan with a copied GPU catalog (CAPNB_DATASETS) that ``edit`` changed; its GPUs read.

    ``text``, given, then edits the file's text as a hand would (a comma left unquoted).
    """
    import os
    import shutil

    root = write("catalog/.keep", "").parent / "datasets"
    shutil.copytree(data.dataset_path(), root)
    gpus = pd.read_csv(root / "gpus.csv", dtype=str, keep_default_na=False)
    edit(gpus).to_csv(root / "gpus.csv", index=False)
    if text is not None:
        (root / "gpus.csv").write_text(text((root / "gpus.csv").read_text()))
    before = os.environ.get("CAPNB_DATASETS")
    os.environ["CAPNB_DATASETS"] = str(root)
    try:
        return data.load_gpus()
    finally:
        if before is None:
            del os.environ["CAPNB_DATASETS"]
        else:
            os.environ["CAPNB_DATASETS"] = before


def with_file_size_limit(limit, call):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        return call()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def stale_cleaned(write):
    """A dead writer's staged folder beside the outputs, and the next write: what is left."""
    import subprocess
    import sys

    folder = write("out/.keep", "").parent
    (folder / ".keep").unlink()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    host = data._files._tag().rsplit("-", 1)[0]
    (folder / f".capnb-tmp-{host}-{dead}-x").mkdir()
    (folder / ".plan.nc.tmp").write_bytes(b"half")
    data.write_set(folder, {"plan.json": "{}"})
    return sorted(p.name for p in folder.iterdir())


def read_only(write, call):
    """``call(folder)`` on an empty folder no one may write into: a read-only tmpfs for root.

    Root writes past a folder's permissions, so as root the folder is a read-only mount (skipped
    where the machine lets no test mount one); otherwise its mode is 0o555.
    """
    import os
    import subprocess

    folder = write("ro/.keep", "").parent
    (folder / ".keep").unlink()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return call(folder)
        finally:
            folder.chmod(0o755)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.strip()}")
    try:
        return call(folder)
    finally:
        subprocess.run(["umount", str(folder)], check=False)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
AIPERF_RUN = (FIXTURES / "aiperf" / "profile_export_aiperf.csv").read_text()
TINY_PLAN = {"trials": 50, "gpus": ["H100-SXM"], "tensor_parallel": [1], "policies": ["fixed"],
             "scale_up_threshold": [0.7], "cooldown_s": [900.0], "step_s": 5.0,
             "disaggregation": "none", "provider": "none"}  # fmt: skip


def two_day_rates(write):
    times = pd.date_range("2026-03-02", periods=288, freq="10min")
    qps = 40 + 20 * np.sin(2 * np.pi * np.arange(times.size) / 144)
    return write("two_days.csv", pd.DataFrame({"timestamp": times, "qps": qps}).to_csv(index=False))


def planned(write, **changes):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)
        return plan.build({**TINY_PLAN, "trace": str(two_day_rates(write)), **changes})


ROWS = [
    # -- request logs: capnb.data.load_trace ----------------------------------------------------
    Row("trace: empty file", trace(""), Raises(ConfigError, r"t\.csv: the file is empty")),
    Row("trace: a header and no rows", trace("timestamp\n"),
        Raises(ConfigError, r"t\.csv: holds a header but no rows")),
    Row("trace: one row, resampled to minutes",
        lambda w: forecast.resample(data.load_trace(w("t.csv", f"timestamp\n{GOOD_ROW}\n"))),
        Raises(InputError, r"interval 1 min is longer than the trace \(a single request\)")),
    # found with a ServeGen chunk (data/language/m-large/chunk-0-trace.csv: "0,1.33,8.60,Weibull,
    # ..." on line 1): capnb plan said "no time column among ['window_start', ...]; name it with
    # time_column=", as if the file had columns to name; it has no header line
    Row("trace: a file without a header line",
        trace("2024-05-10 00:00:01,100,10\n2024-05-10 00:00:02,200,20\n"),
        Raises(ConfigError, r"t\.csv: line 1 holds values \('2024-05-10 00:00:01', '100', '10'\), "
                            r"not column names: the file has no header line")),
    Row("traffic: a ServeGen chunk without a header line",
        lambda w: data.load_traffic(w("chunk-0-trace.csv", "0,1.33,8.6,Weibull,0.37,0.39\n"
                                                           "600,0,0,,0,0\n")),
        Raises(ConfigError, r"chunk-0-trace\.csv: line 1 holds values \('0', '1\.33', '8\.6', "
                            r"'Weibull', '0\.37', '0\.39'\), not column names")),
    Row("trace: no time column", trace("when,prompt_tokens\n1,2\n"),
        Raises(ConfigError, r"t\.csv: no time column among .* name it with time_column=")),
    Row("trace: the named time column is absent", trace("timestamp\n1\n", time_column="when"),
        Raises(ConfigError, r"no column 'when' \(time_column\); columns: \['timestamp'\]")),
    Row("trace: numbers without a unit", trace("timestamp\n1700000000\n1700000001\n"),
        Raises(InputError, r"time_unit: column 'timestamp' holds numbers; .*time_unit='s'")),
    Row("trace: an unknown time unit", trace("timestamp\n1\n2\n", time_unit="minutes"),
        Raises(InputError, r"time_unit must be one of \['s', 'ms', 'us', 'ns'\], got 'minutes'")),
    Row("trace: milliseconds read as seconds (wrong unit)",
        trace("timestamp\n1700000000000\n1700000001000\n", time_unit="s"),
        Raises(ConfigError, r"t\.csv, row 1 \(line 2\): .*1700000000000, which as s falls "
                            r"outside the years 1678-2261.*is time_unit right")),
    Row("trace: unsorted timestamps",
        trace("timestamp\n2024-01-01T00:00:05\n2024-01-01T00:00:01\n2024-01-01T00:00:09\n"),
        Corrects(TraceWarning, r"1 row was earlier than the row before it \(first: t\.csv, "
                               r"row 2 \(line 3\)\); the requests were sorted by time",
                 lambda ds: bool((np.diff(ds.time.values) >= np.timedelta64(0)).all()))),
    Row("trace: duplicate timestamps", trace(f"timestamp\n{GOOD_ROW}\n{GOOD_ROW}\n"),
        Corrects(TraceWarning, r"1 request shares its timestamp .*kept",
                 lambda ds: ds.sizes["request"] == 2 and "share" in ds.attrs["notes"])),
    Row("trace: mixed time zones",
        trace("timestamp\n2024-01-01T00:00:05+01:00\n2024-01-01T00:00:06+02:00\n"),
        Raises(ConfigError, r"t\.csv: column 'timestamp' mixes UTC offsets \(UTC\+01:00 in row "
                            r"1, UTC\+02:00 in row 2 .*timezone=")),
    Row("trace: times with and without an offset",
        trace("timestamp\n2024-01-01T00:00:05+01:00\n2024-01-01T00:00:06\n"),
        Raises(ConfigError, r"mixes times with and without a UTC offset: t\.csv, row 1")),
    Row("trace: a time that is not one", trace(f"timestamp\n{GOOD_ROW}\nyesterday\n"),
        Raises(ConfigError, r"t\.csv, row 2 \(line 3\): column 'timestamp' holds 'yesterday', "
                            r"which is not an ISO 8601 time")),
    Row("trace: an infinite numeric time", trace("timestamp\ninf\n5\n", time_unit="s"),
        Raises(ConfigError, r"t\.csv, row 1 \(line 2\): column 'timestamp' holds inf, not a time")),
    Row("trace: a negative token count", trace(f"{TRACE_HEAD}{GOOD_ROW},-3\n"),
        Raises(ConfigError, r"row 1 \(line 2\): column 'prompt_tokens' holds -3, a negative count")),
    # found with a log of my own: 1e20 tokens was "not a whole number of tokens", and 2**64 - 1
    # in a uint64 Parquet column "holds -1, a negative count" (it wrapped in int64)
    Row("trace: a token count of 1e20", trace(f"{TRACE_HEAD}{GOOD_ROW},100000000000000000000\n"),
        Raises(ConfigError, r"row 1 \(line 2\): column 'prompt_tokens' holds "
                            r"100,000,000,000,000,000,000 tokens, over the 9,007,199,254,740,992")),
    Row("trace: a uint64 token count of 2**64 - 1",
        lambda w: data.load_trace(w("t.parquet", parquet(
            timestamp=[0, 1], prompt_tokens=pa.array([2**64 - 1, 2], pa.uint64()))), time_unit="s"),
        Raises(ConfigError, r"t\.parquet, row 1: column 'prompt_tokens' holds "
                            r"18,446,744,073,709,551,615 tokens, over the 9,007,199,254,740,992")),
    # found with a CSV written by hand ("timestamp, prompt_tokens"): capnb's header sniff strips
    # the spaces, pyarrow does not, and load_trace ended in pyarrow's ArrowKeyError
    Row("trace: spaces after the header's commas",
        trace("timestamp, prompt_tokens, output_tokens\n0, 100, 50\n1, 200, 60\n", time_unit="s"),
        States(lambda log: f"{log.sizes['request']} requests, {int(log.prompt_tokens.sum())} "
                           f"prompt tokens", r"^2 requests, 300 prompt tokens$")),
    Row("trace: spaces around a header's offset times",
        trace(" timestamp ,prompt_tokens\n2024-01-01T00:00:05+01:00,1\n2024-01-01T00:00:06+01:00,2\n"),
        States(lambda log: f"{log.sizes['request']} requests", r"^2 requests$")),
    # found with a CSV exported twice into one sheet: "timestamp,prompt_tokens,prompt_tokens" read
    # the first of the two columns (5 and 6 tokens, beside 100 and 200) and said nothing
    Row("trace: a header naming a column twice",
        trace("timestamp,prompt_tokens,prompt_tokens\n0,5,100\n1,6,200\n", time_unit="s"),
        Raises(ConfigError, r"t\.csv: the header names 'prompt_tokens' twice \(columns 2 and 3\); "
                            r"rename one")),
    Row("rates: a header naming a column twice", rates("t,qps,qps\n0,5,100\n60,6,200\n"),
        Raises(ConfigError, r"r\.csv: the header names 'qps' twice \(columns 2 and 3\)")),
    Row("trace: a Parquet schema naming a column twice",
        lambda w: data.load_trace(w("t.parquet", parquet_of(["timestamp", "prompt_tokens",
                                                             "prompt_tokens"], [0, 1], [5, 6],
                                                            [100, 200])), time_unit="s"),
        Raises(ConfigError, r"t\.parquet: the schema names 'prompt_tokens' twice \(columns 2 and "
                            r"3\); rename one")),
    Row("rates: a Parquet schema naming a column twice",
        lambda w: data.load_rate_series(w("r.parquet", parquet_of(["t", "qps", "qps"], [0, 60],
                                                                  [5.0, 6.0], [1.0, 2.0])),
                                        time_column="t", rate_column="qps", time_unit="s"),
        Raises(ConfigError, r"r\.parquet: the schema names 'qps' twice \(columns 2 and 3\)")),
    # found with a JSON-lines log holding token ids, not counts: "column 'prompt_tokens' has type
    # list<item: int64>, not token counts" named no file
    Row("trace: token ids where counts belong",
        lambda w: data.load_trace(w("t.jsonl", '{"timestamp": 0, "prompt_tokens": [1, 2]}\n'),
                                  time_unit="s"),
        Raises(ConfigError, r"^t\.jsonl, line 1: column 'prompt_tokens' has type list<item: "
                            r"int64>, not token counts")),
    Row("trace: a NaN token count", trace(f"{TRACE_HEAD}{GOOD_ROW},nan\n"),
        Raises(ConfigError, r"row 1 \(line 2\): column 'prompt_tokens' is empty \(no token count\)")),
    Row("trace: a fractional token count", trace(f"{TRACE_HEAD}{GOOD_ROW},3.5\n"),
        Raises(ConfigError, r"column 'prompt_tokens' holds '3\.5', not a whole number of tokens")),
    # found with a request log timed in seconds: one fractional token count made the whole file
    # text, and the numeric times were then refused as "not an ISO 8601 time"
    Row("trace: a fractional token count beside numeric times",
        trace("t,prompt_tokens\n1,15\n2,4.5\n", time_column="t", time_unit="s"),
        Raises(ConfigError, r"t\.csv, row 2 \(line 3\): column 'prompt_tokens' holds '4\.5', "
                            r"not a whole number of tokens")),
    Row("trace: a word among numeric times beside a fractional token count",
        trace("t,prompt_tokens\n1,15\nsoon,4.5\n", time_column="t", time_unit="s"),
        Raises(ConfigError, r"t\.csv, row 2 \(line 3\): column 't' holds 'soon', not a time")),
    # found planning a JSON-lines log whose time column is "t": the message said "name the file's
    # columns", not which setting names it
    Row("traffic: a time column it does not know",
        lambda w: data.load_traffic(w("log.jsonl", '{"t": 1.5, "n_in": 10}\n')),
        Raises(ConfigError, r"log\.jsonl: no time column among .*; name it with time_column= "
                            r"\(a plan config's \[traffic\] time_column, capnb plan --time-column\)")),
    # found calling plan.build(model={...config.json fields...}) as docs/plan.md said a mapping
    # works: the error was pydantic's "Input should be a valid string"
    Row("config: a model given as a mapping",
        lambda _: plan.read_config(model={"model_type": "llama", "hidden_size": 4096}),
        Raises(ConfigError, r"model = \{.*\}: a plan's model is a catalog id, a config\.json path "
                            r"or a model folder, not a mapping .*write it to a config\.json")),
    Row("trace: a row with an extra field", trace(f"{TRACE_HEAD}{GOOD_ROW},3\n{GOOD_ROW},4,9\n"),
        Raises(ConfigError, r"t\.csv: row 2 \(line 3\) has 3 fields, not 2; not a well-formed CSV")),
    Row("trace: a first row shorter than the header",
        trace("timestamp,prompt_tokens,output_tokens\n2024-01-01T00:00:05\n"),
        Raises(ConfigError, r"t\.csv: row 1 \(line 2\) has 1 fields, not 3")),
    Row("trace: binary bytes in a .csv", lambda w: data.load_trace(w("t.csv", b"\xff\xfe\x00\x01")),
        Raises(ConfigError, r"t\.csv: UTF-16 text \(it starts with a UTF-16 byte-order mark\)")),
    Row("trace: a truncated .gz",
        lambda w: data.load_trace(w("t.csv.gz", gzip.compress(b"timestamp\n1\n2\n")[:20])),
        Raises(ConfigError, r"t\.csv\.gz: not a readable UTF-8 CSV file")),
    Row("trace: truncated JSON lines",
        trace('{"timestamp": 0, "input_length": 10, "output_length": 5}\n{"timestamp": 5, "inp',
              name="t.jsonl"),
        Raises(ConfigError, r"t\.jsonl, line 2: not valid JSON")),
    Row("trace: a JSON line without a field",
        trace('{"timestamp": 0, "input_length": 10}\n', name="t.jsonl"),
        Raises(ConfigError, r"t\.jsonl: no field 'output_length' \(output column\); fields:")),
    Row("trace: a JSON line that is not an object", trace("[1, 2]\n", name="t.jsonl"),
        Raises(ConfigError, r"t\.jsonl, line 1: not a JSON object")),
    # found with a JSON-lines log of our own whose 51st line wrote a token count as text ("12"):
    # "pyarrow could not read it as JSON lines (fields of mixed types?)" named no line nor field
    Row("trace: a JSON line writing a count as text where the others write numbers",
        trace('{"timestamp": "2026-03-02T00:00:07", "prompt_tokens": 15, "output_tokens": 9}\n'
              '{"timestamp": "2026-03-02T00:00:09", "prompt_tokens": "12", "output_tokens": 3}\n',
              name="t.jsonl"),
        Raises(ConfigError, r"^t\.jsonl, line 2: field 'prompt_tokens' holds a string \('12'\) "
                            r"where line 1 holds a number")),
    Row("trace: an unknown bundled name", lambda _: data.load_trace("azure-code-2099"),
        Raises(UnknownNameError, r"unknown trace 'azure-code-2099'; closest: azure-code-2023")),
    Row("trace: a number instead of a path", lambda _: data.load_trace(42),
        Raises(InputError, r"name_or_path must be a bundled trace name or a path, got int")),
    Row("trace: an unknown time zone", trace(f"timestamp\n{GOOD_ROW}\n", timezone="Mars/Olympus"),
        Raises(InputError, r"timezone='Mars/Olympus' is not a known IANA time zone")),
    Row("trace: a rate series' name", lambda _: data.load_trace("servegen-m-large"),
        Raises(InputError, r"'servegen-m-large' is a rate series .*load_rate_series")),
    Row("trace: an unknown format", trace(f"timestamp\n{GOOD_ROW}\n", format="tsv"),
        Raises(InputError, r"format must be one of \['azure', 'mooncake', 'csv', 'parquet'\]")),
    Row("trace: a suffix that names no format", trace(f"timestamp\n{GOOD_ROW}\n", name="t.xlsx"),
        Raises(ConfigError, r"t\.xlsx: cannot tell the format from the suffix '\.xlsx'; pass format=")),
    Row("trace: a .parquet that is not Parquet", trace("not parquet", name="t.parquet"),
        Raises(ConfigError, r"t\.parquet: not a readable Parquet file")),
    # -- rate series: capnb.data.load_rate_series -----------------------------------------------
    Row("rates: a negative rate", rates("t,qps\n0,5\n600,-1\n"),
        Raises(ConfigError, r"r\.csv, row 2 \(line 3\): column 'qps' holds -1\.0; a rate or "
                            r"count is a finite number >= 0")),
    Row("rates: an infinite rate", rates("t,qps\n0,5\n600,inf\n"),
        Raises(ConfigError, r"r\.csv, row 2 \(line 3\): column 'qps' holds 'inf', not a number")),
    # found with a rate series one of whose cells was empty: "column 'qps' holds '', not a number"
    Row("rates: an empty rate cell", rates("t,qps\n0,5\n600,\n1200,4\n"),
        Raises(ConfigError, r"r\.csv, row 2 \(line 3\): column 'qps' is empty; a rate or count is "
                            r"a number >= 0 in every row \(remove the row")),
    Row("rates: a Parquet rate cell that is null",
        lambda w: data.load_rate_series(w("r.parquet", parquet(t=[0, 60, 120], qps=[1.0, None, 2.0])),
                                        time_column="t", rate_column="qps", time_unit="s"),
        Raises(ConfigError, r"r\.parquet, row 2: column 'qps' is empty; a rate or count is a number")),
    Row("rates: both a rate and a count column", rates("t,qps\n0,5\n", count_column="qps"),
        Raises(InputError, r"give exactly one of rate_column= \(requests/s\) or count_column=")),
    Row("rates: no time column named", rates("t,qps\n0,5\n", time_column=None),
        Raises(InputError, r"r\.csv: name the column of window start times with time_column=")),
    Row("rates: the same window twice, different values", rates("t,qps\n0,5\n0,6\n600,1\n"),
        Raises(ConfigError, r"r\.csv, row 1 \(line 2\) and r\.csv, row 2 \(line 3\) are the same "
                            r"window with different 'qps' \(5\.0 and 6\.0\); remove one, or, for "
                            r"local times over a daylight-saving change, name their zone with "
                            r"timezone=")),
    Row("rates: windows out of order", rates("t,qps\n600,5\n0,6\n1200,1\n"),
        Corrects(TraceWarning, r"r\.csv: windows were out of time order \(first: r\.csv, row 2 "
                               r"\(line 3\)\); sorted",
                 lambda ds: ds.qps.values.tolist() == [6.0, 5.0, 1.0])),
    Row("rates: a rate of exactly 0", rates("t,qps\n0,5\n600,0\n1200,4\n"),
        States(lambda ds: f"{int(ds.qps.isnull().sum())} missing: {ds.attrs['notes']}",
               r"^1 missing: 1 windows with a rate of exactly 0 are marked missing")),
    Row("rates: one window and no interval", rates("t,qps\n0,5\n"),
        Raises(ConfigError, r"r\.csv, row 1 \(line 2\): a single window: a rate series needs "
                            r"two rows or more to tell its step \(load_rate_series' interval=")),
    Row("rates: a window off the grid", rates("t,qps\n0,5\n600,5\n1300,5\n1800,5\n"),
        Raises(ConfigError, r"r\.csv, row 2 \(line 3\): window start is not a whole number of "
                            r"intervals \(500 s\)")),
    Row("rates: mixed time zones",
        rates("t,qps\n2024-01-01T00:00:00+01:00,5\n2024-01-01T00:10:00+02:00,5\n", time_unit=None),
        Raises(ConfigError, r"column 't' mixes UTC offsets \(\+01:00 in r\.csv, row 1 .*\+02:00 "
                            r"in r\.csv, row 2 .*timezone=")),
    Row("rates: a zero-length interval", rates("t,qps\n0,5\n600,1\n", interval=0),
        Raises(InputError, r"interval must be at least 0\.001 s, got 0")),
    Row("rates: milliseconds read as seconds (wrong unit)",
        rates("t,qps\n1700000000000,5\n1700000600000,6\n"),
        Raises(ConfigError, r"r\.csv, row 1 \(line 2\): column 't' holds 1700000000000, which as "
                            r"s falls outside .*is time_unit right")),
    Row("rates: an unknown bundled name", lambda _: data.load_rate_series("servegen-xl"),
        Raises(UnknownNameError, r"unknown rate series 'servegen-xl'; closest: servegen-m-")),
    # found writing a rate series from pandas: a bool column read as 1.0 and missing (a false
    # became 0, then a missing window), a list column ended in numpy's ValueError
    Row("rates: spaces after the header's commas", rates("t, qps\n0, 1\n60, 2\n120, 3\n"),
        States(lambda series: f"{series.qps.values.tolist()}", r"^\[1\.0, 2\.0, 3\.0\]$")),
    # found with a rate of 1e308 requests/s: requests per window became inf (numpy's overflow
    # warning the only sign)
    Row("rates: a rate whose requests per window overflow",
        rates("t,qps\n0,1e308\n60,1\n"),
        Raises(ConfigError, r"r\.csv: the window at 1970-01-01T00:00:00 holds 1e\+308 requests/s, "
                            r"which over its 60 s is more requests than capnb can count")),
    Row("rates: a Parquet rate column of true/false",
        lambda w: data.load_rate_series(w("r.parquet", parquet(t=[0, 60, 120], qps=[True, False, True])),
                                        time_column="t", rate_column="qps", time_unit="s"),
        Raises(ConfigError, r"r\.parquet, row 1: column 'qps' has type bool, not a rate or count")),
    Row("rates: a Parquet rate column of lists",
        lambda w: data.load_rate_series(w("r.parquet", parquet(t=[0, 60, 120], qps=[[1], [2], [3]])),
                                        time_column="t", rate_column="qps", time_unit="s"),
        Raises(ConfigError, r"r\.parquet, row 1: column 'qps' has type list<element: int64>, not a "
                            r"rate or count")),
    # found giving a JSON-lines rate series: it was read as CSV ("no column 't' (time_column);
    # columns: ['{"t": 0', '"qps": 1.5}']"), and a spreadsheet "holds a header but no rows"
    Row("rates: a JSON-lines rate series",
        rates('{"t": 0, "qps": 1.5}\n{"t": 60, "qps": 2}\n', name="r.jsonl"),
        Raises(ConfigError, r"r\.jsonl: capnb reads a rate series from CSV \(\.csv, \.txt, \.gz\) "
                            r"or Parquet \(\.parquet, \.pq\), and '\.jsonl' is neither")),
    Row("traffic: a JSON-lines rate series",
        lambda w: data.load_traffic(w("r.jsonl", '{"t": 0, "qps": 1.5}\n{"t": 60, "qps": 2}\n'),
                                    time_column="t", time_unit="s"),
        Raises(ConfigError, r"r\.jsonl: capnb reads a rate series from CSV")),
    Row("rates: a spreadsheet", rates(b"PK\x03\x04 not a CSV", name="r.xlsx"),
        Raises(ConfigError, r"r\.xlsx: capnb reads a rate series from CSV .* '\.xlsx' is neither")),
    Row("rates: a .parquet that is not Parquet", rates("nope", name="r.parquet"),
        Raises(ConfigError, r"r\.parquet: not a readable Parquet file")),
    # -- latency tables: capnb.data.read_latency_table ------------------------------------------
    Row("table: no concurrency column", table("c,e2e_p99_ms\n1,2\n"),
        Raises(ConfigError, r"t\.csv: no 'concurrency' column \(columns: \['c', 'e2e_p99_ms'\]\)")),
    Row("table: a latency column without a unit", table("concurrency,e2e_p99\n1,2\n2,3\n"),
        Raises(ConfigError, r"column 'e2e_p99' has no time unit; name it e2e_p99_ms \(or _s\)")),
    Row("table: an unknown unit (wrong units)", table("concurrency,e2e_p99_sec\n1,2\n2,3\n"),
        Raises(InputError, r"e2e_p99_sec: unknown time unit 'sec'; capnb reads s, ms, us, ns")),
    # found by an outside pass: a first row ending in an extra comma read each column as its
    # right neighbour's: concurrency 200, 210, 230 (the e2e P99s in ms), e2e P99 5 ms (the qps)
    Row("table: a first row ending in an extra comma",
        table("concurrency,e2e_p99_ms,qps\n1,200,5,\n2,210,9.5\n4,230,17\n"),
        States(lambda t: f"{t.concurrency.values.tolist()} "
                         f"{t.latency.sel(metric='e2e', latency_quantile=0.99).values.tolist()}",
               r"^\[1, 2, 4\] \[0\.2, 0\.21, 0\.23\]$")),
    # found by an outside pass: a throughput of exactly 0 requests/s was kept (the readers of
    # benchmark results refuse it, the shared curve builder did not), its mean e2e then
    # concurrency / 0 = inf, and capacity asked for "the measured throughput" it had been given
    Row("table: a measured throughput of exactly 0",
        table("concurrency,e2e_p99_ms,qps\n1,200,0\n2,210,9.5\n4,230,17\n"),
        Raises(InputError, r"t\.csv: measured throughput \(measured_qps\) must be > 0 requests/s, "
                           r"got 0(\.0)? at row 2")),
    Row("curve: the builder given a measured throughput of exactly 0",
        lambda _: data._curve.build([1, 2], {("e2e", 0.99): [0.2, 0.21]}, measured_qps=[0.0, 9.5],
                                    source="mine"),
        Raises(InputError, r"^mine: measured throughput \(measured_qps\) must be > 0 requests/s, "
                           r"got 0(\.0)? at row 1")),
    # found by an outside pass: "concurrency must be a positive integer, got nan at row 3"
    Row("table: an empty concurrency cell",
        table("concurrency,e2e_p99_ms,qps\n1,200,5\n,210,9.5\n4,230,17\n"),
        Raises(ConfigError, r"t\.csv: column 'concurrency' is empty at row 3; every row needs "
                            r"its requests in flight")),
    Row("table: one row", table(f"{TABLE_HEAD}1,2,1\n"),
        Raises(InputError, r"needs at least 2 concurrency levels, got 1 \(row 2\)")),
    Row("table: NaN inside a measured column", table(f"{TABLE_HEAD}1,2,1\n2,,2\n4,5,3\n"),
        Raises(InputError, r"t\.csv: e2e P99 is missing \(NaN\) at row 3 but measured elsewhere")),
    Row("table: a negative latency", table(f"{TABLE_HEAD}1,2,1\n2,-2,2\n"),
        Raises(InputError, r"e2e P99 must be finite and >= 0, got -0\.002 at row 3")),
    Row("table: an infinite latency", table(f"{TABLE_HEAD}1,inf,1\n2,3,2\n"),
        Raises(InputError, r"e2e P99 must be finite and >= 0, got inf at row 2")),
    Row("table: concurrency 0", table(f"{TABLE_HEAD}0,2,1\n2,3,2\n"),
        Raises(InputError, r"concurrency must be a positive integer, got 0 at row 2")),
    # a corrupt field of 2**63 (the fuzzer's): past int64, it crashed the cast with a warning
    Row("table: a concurrency past any whole number", table(f"{TABLE_HEAD}1,2,1\n9.223372036854776e18,3,2\n"),
        Raises(InputError, r"integer \(at most 1e\+12\), got 9\.22337e\+18 at row 3")),
    Row("table: a concurrency twice", table(f"{TABLE_HEAD}2,2,1\n2,3,2\n"),
        Raises(InputError, r"concurrency 2 appears more than once \(row 2, row 3\)")),
    Row("table: P99 below P50 (units or columns swapped)",
        table("concurrency,e2e_p50_ms,e2e_p99_ms\n1,5,2\n2,6,3\n"),
        Raises(InputError, r"e2e P99 \(0\.002 s\) is below P50 .*check the column order and units")),
    Row("table: text in a latency column", table(f"{TABLE_HEAD}1,fast,1\n2,3,2\n"),
        Raises(ConfigError, r"t\.csv: column 'e2e_p99_ms' holds 'fast' at row 2, not a number")),
    Row("table: an empty file", table(""),
        Raises(ConfigError, r"t\.csv: cannot be read as a csv table")),
    Row("table: truncated JSON lines",
        table('{"concurrency": 1, "e2e_p99_ms": 2}\n{"concurrency": 2, "e2e_p9', name="t.jsonl"),
        Raises(ConfigError, r"t\.jsonl, line 2: not valid JSON")),
    Row("table: a JSON line that is not an object",
        table('{"concurrency": 1, "e2e_p99_ms": 2}\n[2, 3]\n', name="t.jsonl"),
        Raises(ConfigError, r"t\.jsonl, line 2: not a JSON object \(one row per line\)")),
    Row("table: a percentile above 100", table("concurrency,e2e_p200_ms\n1,2\n2,3\n"),
        Raises(ConfigError, r"column 'e2e_p200_ms': 'p200' is not a percentile")),
    Row("table: a throughput its latencies contradict (qps per minute, or a mean in the wrong unit)",
        table("concurrency,e2e_mean_ms,qps\n8,2000,4\n32,4000,480\n"),
        Raises(ConfigError, r"t\.csv, row 3: the latencies and the throughput this run measured "
                            r"disagree: concurrency 32 / mean e2e 4 s = 8 requests/s, but the run "
                            r"measured qps 480 requests/s, 60\.0x apart")),
    Row("table: a number instead of a path", lambda _: data.read_latency_table(12),
        Raises(InputError, r"source must be a path or a pandas DataFrame, got int")),
    # -- vllm bench serve, AIPerf ---------------------------------------------------------------
    Row("vllm: truncated JSON", vllm('{"completed": 10, "request_thr'),
        Raises(ConfigError, r"v\.json: not valid JSON")),
    Row("vllm: a missing field", vllm('{"completed": 10}'),
        Raises(ConfigError, r"v\.json: missing field 'request_throughput'")),
    Row("vllm: a field that is not a number", vllm(VLLM_OK.replace("10,", '"ten",', 1)),
        Raises(ConfigError, r"v\.json: field 'completed' is not a number \('ten'\)")),
    Row("vllm: no request completed", vllm(VLLM_OK.replace("10,", "0,", 1)),
        Raises(ConfigError, r"v\.json: 'completed' is 0\.0: no request succeeded")),
    Row("vllm: one run only", vllm(VLLM_OK),
        Raises(InputError, r"v\.json: a latency curve needs at least 2 concurrency levels")),
    Row("vllm: a number instead of a path", lambda _: data.read_vllm_bench(3),
        Raises(InputError, r"paths must be a path or a list of paths, got 3")),
    # found with vllm bench serve results of our own: a null among the per-request TTFTs ended in
    # numpy's "ValueError: cannot convert float NaN to integer", and a TTFT of -0.5 s was read
    # into the curve (its run's mean TTFT 0.0567 s where the other requests measured 0.0577 s)
    Row("vllm: a null among the per-request TTFTs",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_detailed(2), vllm_detailed(4, lambda r: r["ttfts"].__setitem__(7, None))])),
        Raises(ConfigError, r"run1\.json: ttfts\[7\] is not a latency in seconds \(None\)")),
    Row("vllm: a negative per-request TTFT",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_detailed(2), vllm_detailed(4, lambda r: r["ttfts"].__setitem__(7, -0.5))])),
        Raises(ConfigError, r"run1\.json: ttfts\[7\] is not a latency in seconds \(-0\.5\)")),
    Row("vllm: a negative inter-token gap",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_detailed(2), vllm_detailed(4, lambda r: r["itls"][3].__setitem__(1, -0.02))])),
        Raises(ConfigError, r"run1\.json: itls\[3\]\[1\] is not a latency in seconds "
                            r"\(-0\.02\)")),
    Row("vllm: a negative prompt length",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_detailed(2), vllm_detailed(4, lambda r: r["input_lens"].__setitem__(3, -5))])),
        Raises(ConfigError, r"run1\.json: input_lens\[3\] is not a token count \(-5\)")),
    # found with vllm bench serve summaries of our own: a closed loop whose mean_e2el_ms was 0
    # ended in "ZeroDivisionError: float division by zero", and one of -1 ms was said to have
    # measured -0.007295 requests in flight "(SGLang's concurrency)", a field the run lacked
    Row("vllm: a mean e2e latency of 0 ms",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_run(2), vllm_run(4, mean_e2el_ms=0.0)])),
        Raises(ConfigError, r"run1\.json: the mean e2e latency is 0 s, not > 0 .*mean_e2el_ms")),
    Row("vllm: a negative mean e2e latency",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_run(2), vllm_run(4, mean_e2el_ms=-1.0)])),
        Raises(ConfigError, r"run1\.json: the mean e2e latency is -0\.001 s, not > 0")),
    # found by an outside pass: a request_rate of -1, 0 or NaN was read as a run at a finite rate
    # (noted "a run at request_rate nan ... holds the requests its rate brings"), a num_prompts of
    # -1, 0 or infinity was ignored, a model_id of -1 was taken as no model_id, and a
    # max_concurrency written as the text "4" was read as 4
    # found by an outside pass: a JSON-lines result whose last line is a stray '}' was reported
    # "at line 1, column 1" (each line is parsed alone), not at line 3 where it is
    Row("vllm: a stray '}' on the last line of a JSON-lines result",
        lambda w: data.read_vllm_bench(w("v.jsonl", json.dumps(vllm_run(2)) + "\n\n"
                                         + json.dumps(vllm_run(4)) + "\n}\n")),
        Raises(ConfigError, r"v\.jsonl: not valid JSON \(Expecting value at line 4, column 1\)")),
    Row("vllm: a request_rate of NaN",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_run(2), vllm_run(4, request_rate=float("nan"))])),
        Raises(ConfigError, r"run1\.json: 'request_rate' is nan, not a rate of requests/s > 0")),
    Row("vllm: a request_rate of 0",
        lambda w: data.read_vllm_bench(bench_folder(w, [vllm_run(2), vllm_run(4, request_rate=0)])),
        Raises(ConfigError, r"run1\.json: 'request_rate' is 0, not a rate of requests/s > 0")),
    Row("vllm: a num_prompts of -1",
        lambda w: data.read_vllm_bench(bench_folder(w, [vllm_run(2), vllm_run(4, num_prompts=-1)])),
        Raises(ConfigError, r"run1\.json: 'num_prompts' is -1, not a whole number of requests")),
    Row("vllm: a num_prompts of infinity",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_run(2), vllm_run(4, num_prompts=float("inf"))])),
        Raises(ConfigError, r"run1\.json: 'num_prompts' is inf, not a whole number of requests")),
    Row("vllm: a model_id that is not text",
        lambda w: data.read_vllm_bench(bench_folder(w, [vllm_run(2), vllm_run(4, model_id=-1)])),
        Raises(ConfigError, r"run1\.json: 'model_id' is -1, not a model's name \(text\)")),
    Row("vllm: a max_concurrency written as text",
        lambda w: data.read_vllm_bench(bench_folder(w, [
            vllm_run(2), vllm_run(4, max_concurrency="4")])),
        Raises(ConfigError, r"run1\.json: field 'max_concurrency' is not a number \('4'\): "
                            r"a result's figures are JSON numbers, not text")),
    Row("guidellm: a mean request_latency of 0 s",
        guidellm(_bench(0, "metrics.request_latency.successful.mean", 0.0)),
        Raises(ConfigError, r"benchmarks\[0\]: the mean e2e latency is 0 s, not > 0 "
               r".*request_latency")),
    Row("guidellm: no successful request",
        guidellm(_bench(1, "metrics.request_totals.successful", 0)),
        Raises(ConfigError, r"benchmarks\.json benchmarks\[1\]: field "
               r"'metrics\.request_totals\.successful' is 0: no request succeeded")),
    # found by an outside pass: a constant benchmark at rate -1 was placed by Little's law (noted
    # "at rate -1 requests/s") and calibrated on as a run at load -1; a requests_per_second of 0
    # placed a 6 requests/s run at concurrency 1; 10.5 successful requests were read as 10; a
    # request total of -1 was said to be a run that "could hold -1"; a backend model of -1 was
    # taken as no model
    Row("guidellm: a constant rate of -1",
        guidellm(_bench(2, "config.strategy.rate", -1.0)),
        Raises(ConfigError, r"benchmarks\[2\]: field 'config\.strategy\.rate' is -1, not a rate "
                            r"of requests/s > 0")),
    Row("guidellm: a requests_per_second of 0",
        guidellm(_bench(2, "metrics.requests_per_second.successful.mean", 0.0)),
        Raises(ConfigError, r"benchmarks\[2\]: field 'metrics\.requests_per_second\.successful"
                            r"\.mean' is 0, not a rate of requests/s > 0")),
    Row("guidellm: 10.5 successful requests",
        guidellm(_bench(2, "metrics.request_totals.successful", 10.5)),
        Raises(ConfigError, r"benchmarks\[2\]: field 'metrics\.request_totals\.successful' is "
                            r"10\.5, not a whole number of requests")),
    Row("guidellm: a request total of -1",
        guidellm(_bench(2, "metrics.request_totals.total", -1)),
        Raises(ConfigError, r"benchmarks\[2\]: field 'metrics\.request_totals\.total' is -1, "
                            r"not a whole number of requests at least the 720 successful")),
    Row("guidellm: a backend model that is not text",
        guidellm(lambda r: r["benchmarks"][0]["config"].update(backend={"model": -1})),
        Raises(ConfigError, r"benchmarks\[0\]: field 'config\.backend\.model' is -1, not a "
                            r"model's name \(text\)")),
    Row("guidellm: a percentile the curve needs is missing",
        guidellm(_bench(0, "metrics.time_to_first_token_ms.successful.percentiles.p99", None)),
        Raises(ConfigError, r"benchmarks\.json benchmarks\[0\]: missing field "
               r"'metrics\.time_to_first_token_ms\.successful\.percentiles\.p99'")),
    # found with a GuideLLM report of our own at three rates: a prompt_token_count mean of -1024 in
    # the second benchmark was read, and the curve's workload averaged 341.3 prompt tokens
    Row("guidellm: a negative mean prompt length",
        guidellm(_bench(1, "metrics.prompt_token_count.successful.mean", -1024.0)),
        Raises(ConfigError, r"benchmarks\.json benchmarks\[1\]: field "
               r"'metrics\.prompt_token_count\.successful\.mean' is -1024\.0, not a mean token "
               r"count \(>= 0\)")),
    Row("guidellm: a schema version it does not know",
        guidellm(lambda r: r["metadata"].update(version=3)),
        Raises(ConfigError, r"benchmarks\.json: field 'metadata\.version' is 3 \(written by "
               r"GuideLLM 0\.7\.3\): capnb reads GuideLLM report schema versions 1 and 2")),
    Row("guidellm: a report from before 0.5.0 (no metadata)",
        guidellm(lambda r: r.pop("metadata")),
        Raises(ConfigError, r"benchmarks\.json: field 'metadata\.version' is None")),
    Row("guidellm: a synchronous-only report (one point)",
        guidellm(_synchronous_only),
        Raises(InputError, r"benchmarks\.json: a latency curve needs at least 2 concurrency")),
    Row("guidellm: a strategy it does not know",
        guidellm(_bench(2, "config.strategy.type_", "replay")),
        Raises(ConfigError, r"benchmarks\[2\]: field 'config\.strategy\.type_' is 'replay'")),
    Row("guidellm: request_latency written in milliseconds",
        guidellm(_bench(0, "metrics.request_latency.successful.mean", 2000.0)),
        Raises(ConfigError, r"benchmarks\[0\]: the latencies and the throughput this run "
               r"measured disagree")),
    Row("guidellm: two benchmarks at one concurrency",
        guidellm(lambda r: r["benchmarks"].__setitem__(1, r["benchmarks"][0])),
        Raises(ConfigError, r"benchmarks\[0\] and benchmarks\.json benchmarks\[1\] both fall "
               r"at concurrency 4")),
    Row("guidellm: a report given to the vllm bench reader",
        guidellm(lambda r: None, read=data.read_vllm_bench),
        Raises(ConfigError, r"benchmarks\.json: a GuideLLM report, not a vllm bench serve "
               r"result; .*read_benchmark or read_guidellm")),
    # found by an outside pass calibrating on runs of its own (Qwen3-14B on L40S, vllm bench serve
    # at 0.5 and 1.5 requests/s, and the same as a GuideLLM report): read_bench_runs read a P99
    # TTFT of 1 ms beside a median of 336 ms (calibrate then said "TTFT P99 +28990%"), a
    # total_output_tokens of 0 or -5 (calibrate blamed the deployment: "e2e ... 58.8x off"),
    # 100.5 completed requests as 100, a GuideLLM p50 of -3 ms as no p50, and a rate run whose
    # mean e2e was 1000x too long (0.457 requests/s x 20,943 s = 9,570 in flight of 300
    # requests) as it was, where read_vllm_bench and read_guidellm refuse each
    Row("runs: a vllm run's P99 TTFT below its median",
        bench_runs(lambda w: w("r.json", json.dumps(rate_run(p99_ttft_ms=50.0)))),
        Raises(ConfigError, r"r\.json: field 'p99_ttft_ms' \(0\.05 s\) is below "
                            r"'median_ttft_ms' \(0\.1 s\)")),
    Row("runs: a vllm run with no output tokens",
        bench_runs(lambda w: w("r.json", json.dumps(rate_run(total_output_tokens=0)))),
        Raises(ConfigError, r"r\.json: field 'total_output_tokens' is 0, not a token count of at "
                            r"least one for each of the 100 completed requests")),
    Row("runs: a vllm run with a negative prompt token count",
        bench_runs(lambda w: w("r.json", json.dumps(rate_run(total_input_tokens=-5)))),
        Raises(ConfigError, r"r\.json: field 'total_input_tokens' is -5, not a token count of at "
                            r"least one for each of the 100 completed requests")),
    Row("runs: 100.5 completed requests",
        bench_runs(lambda w: w("r.json", json.dumps(rate_run(completed=100.5)))),
        Raises(ConfigError, r"r\.json: field 'completed' is 100\.5, not a whole number of "
                            r"requests")),
    Row("runs: a rate run's mean e2e 1000x too long",
        bench_runs(lambda w: w("r.json", json.dumps(rate_run(mean_e2el_ms=2.0e6)))),
        Raises(ConfigError, r"r\.json: 1\.9 requests/s x 2000 s mean e2e = 3800 requests in "
                            r"flight on average, more than the 100 the run could hold")),
    Row("runs: a GuideLLM benchmark's p99 TTFT below its p50",
        bench_runs(guidellm(_bench(2, "metrics.time_to_first_token_ms.successful.percentiles.p99",
                                   1.0), read=lambda p: p)),
        Raises(ConfigError, r"benchmarks\[2\]: field "
                            r"'metrics\.time_to_first_token_ms\.successful\.percentiles\.p99' "
                            r"\(0\.001 s\) is below 'metrics\.time_to_first_token_ms\.successful"
                            r"\.percentiles\.p95'")),
    Row("runs: a GuideLLM benchmark's negative p50 TTFT",
        bench_runs(guidellm(_bench(2, "metrics.time_to_first_token_ms.successful.percentiles.p50",
                                   -3.0), read=lambda p: p)),
        Raises(ConfigError, r"benchmarks\[2\]: field "
                            r"'metrics\.time_to_first_token_ms\.successful\.percentiles\.p50' "
                            r"is -3: a latency is never negative")),
    Row("runs: a GuideLLM benchmark with a mean of 0 output tokens",
        bench_runs(guidellm(_bench(2, "metrics.output_token_count.successful.mean", 0.0),
                            read=lambda p: p)),
        Raises(ConfigError, r"benchmarks\[2\]: field "
                            r"'metrics\.output_token_count\.successful\.mean' is 0, not a mean "
                            r"of at least one token")),
    Row("runs: a GuideLLM rate benchmark's request_latency in milliseconds",
        bench_runs(guidellm(_bench(2, "metrics.request_latency.successful.mean", 2000.0),
                            read=lambda p: p)),
        Raises(ConfigError, r"benchmarks\[2\]: 6 requests/s x 2000 s mean e2e = 12,000 "
                            r"requests in flight on average, more than the 720")),
    Row("aiperf: an empty file", lambda w: data.read_aiperf(w("a.csv", "")),
        Raises(ConfigError, r"a\.csv: empty file")),
    Row("aiperf: a unit it does not know",
        lambda w: data.read_aiperf(
            w("a.csv", (FIXTURES / "aiperf" / "profile_export_aiperf.csv").read_text()
              .replace("(ms)", "(fortnights)", 1)), concurrency=[4]),
        Raises(InputError, r"a\.csv row 'Request Latency \(fortnights\)': unknown time unit")),
    # found by an outside pass: a sweep row at concurrency 8 measuring 0 requests/s was read
    Row("aiperf: a sweep row with a request throughput of 0",
        lambda w: data.read_aiperf(w("profile_export_aiperf_sweep.csv", "concurrency,"
                                     "time_to_first_token_p99_mean,request_throughput_avg_mean\n"
                                     "1,300,0.2\n8,600,0\n")),
        Raises(ConfigError, r"profile_export_aiperf_sweep\.csv row 3: request throughput 0 is not "
                            r"a rate of requests/s > 0")),
    Row("aiperf: a sweep row with a negative mean output length",
        lambda w: data.read_aiperf(w("profile_export_aiperf_sweep.csv", "concurrency,"
                                     "time_to_first_token_p99_mean,output_sequence_length_avg_mean\n"
                                     "1,300,256\n8,600,-256\n")),
        Raises(ConfigError, r"profile_export_aiperf_sweep\.csv row 3: output_sequence_length_avg_mean "
                            r"is -256\.0, not a mean token count \(>= 0\)")),
    Row("aiperf: a sweep file with a header only",
        lambda w: data.read_aiperf(w("profile_export_aiperf_sweep.csv", "concurrency\n")),
        Raises(ConfigError, r"profile_export_aiperf_sweep\.csv: a sweep file with a header but "
                            r"no rows")),
    # found by tests/test_fuzz_loaders.py: an unclosed quote made a row shorter than its header
    Row("aiperf: a row shorter than its header",
        lambda w: data.read_aiperf(
            w("a.csv", "Metric,min,avg\nRequest Latency (ms),3247,3300\n"
                       'Output Sequence Length (tokens),",0\n'), concurrency=[1]),
        Raises(ConfigError, r"a\.csv row 'Output Sequence Length \(tokens\)': 2 fields where the "
                            r"header has 3 \(metric, min, avg\): an unclosed quote")),
    # found with AIPerf exports of our own at concurrency 4, 16 and 64: an Output Sequence Length
    # of -256 tokens in the second was read, and the curve's workload averaged 85.3 output tokens
    # (256, -256 and 256) where the runs measured 256
    Row("aiperf: a negative mean output length",
        lambda w: data.read_aiperf({
            4: w("c4.csv", AIPERF_RUN),
            16: w("c16.csv", AIPERF_RUN.replace("Output Sequence Length (tokens),96.85",
                                                "Output Sequence Length (tokens),-96.85"))}),
        Raises(ConfigError, r"c16\.csv row 'Output Sequence Length \(tokens\)': avg is -96\.85, "
                            r"not a mean token count \(>= 0\)")),
    # found by an outside pass: a Request Throughput of 0 at concurrency 16 was read as a
    # measured 0 requests/s, one of -1 in a run given no concurrency was said to be missing ("the
    # export has no Request Throughput"), and a Request Count of -1 or infinity was ignored
    Row("aiperf: a Request Throughput of 0",
        lambda w: data.read_aiperf({
            4: w("c4.csv", AIPERF_RUN),
            16: w("c16.csv", AIPERF_RUN.replace("(requests/sec),13.16", "(requests/sec),0"))}),
        Raises(ConfigError, r"c16\.csv row 'Request Throughput \(requests/sec\)': 0 is not a "
                            r"rate of requests/s > 0")),
    Row("aiperf: a Request Throughput of -1 in a run given no concurrency",
        lambda w: data.read_aiperf([
            w("c4.csv", AIPERF_RUN),
            w("c16.csv", AIPERF_RUN.replace("(requests/sec),13.16", "(requests/sec),-1"))]),
        Raises(ConfigError, r"c16\.csv row 'Request Throughput \(requests/sec\)': -1 is not a "
                            r"rate of requests/s > 0")),
    Row("aiperf: a Request Count of infinity",
        lambda w: data.read_aiperf([
            w("c4.csv", AIPERF_RUN),
            w("c16.csv", AIPERF_RUN.replace("Request Count,200.00", "Request Count,inf"))]),
        Raises(ConfigError, r"c16\.csv row 'Request Count': inf is not a whole number of "
                            r"requests >= 1")),
    # a per-run export given no concurrency is placed by Little's law (a run at a request rate)
    Row("aiperf: one per-run export without its concurrency",
        lambda _: data.read_aiperf(FIXTURES / "aiperf" / "profile_export_aiperf.csv"),
        Raises(InputError, r"needs at least 2 concurrency levels, got 1 "
                           r"\(profile_export_aiperf\.csv\)")),
    # found giving read_aiperf the folder my per-run exports sit in: "aip: no such file"
    Row("aiperf: a folder for a file",
        lambda w: data.read_aiperf(w("aip/c4.csv", "").parent),
        Raises(ConfigError, r"aip: a folder, not an AIPerf export")),
    Row("aiperf: a folder among per-run exports",
        lambda w: data.read_aiperf({4: w("aip/c4.csv", "").parent}),
        Raises(ConfigError, r"aip: a folder, not an AIPerf export")),
    # -- catalogs and model configs -------------------------------------------------------------
    Row("model: a config with missing fields", lambda _: data.load_model({"hidden_size": 4096}),
        Raises(ConfigError, r"config: missing field 'num_hidden_layers' or 'n_layer'")),
    # found with files of our own: a number of 5,001 digits ended in Python's "ValueError: Exceeds
    # the limit (4300 digits) for integer string conversion", naming no file (capnb plan printed
    # it as "capnb plan: ValueError: ..."), in a config.json, a vllm bench result, a JSON-lines
    # request log and a TOML plan config
    Row("model: a number of 5,001 digits in config.json",
        lambda w: data.load_model(w("config.json", '{"vocab_size": 1' + "0" * 5000 + "}")),
        Raises(ConfigError, r"config\.json: a number of more than 4,300 digits")),
    Row("vllm: a number of 5,001 digits",
        lambda w: data.read_vllm_bench(w("v.jsonl", '{"max_concurrency": 1' + "0" * 5000 + "}\n")),
        Raises(ConfigError, r"v\.jsonl, line 1: a number of more than 4,300 digits")),
    # found by an outside pass: an empty token field in a JSON-lines log whose counts are text
    # was reported "holds None, not a whole number of tokens", where other logs say "is empty"
    Row("trace: an empty token field among token counts written as text",
        lambda w: data.load_traffic(w("r.jsonl", '{"timestamp": 1, "prompt_tokens": "100", '
                                      '"output_tokens": 3}\n{"timestamp": 2, "prompt_tokens": '
                                      'null, "output_tokens": 3}\n'), time_unit="s"),
        Raises(ConfigError, r"r\.jsonl, line 2: column 'prompt_tokens' is empty \(no token count\)")),
    Row("trace: a number of 5,001 digits in a JSON-lines request log",
        lambda w: data.load_traffic(w("r.jsonl", '{"timestamp": 1, "prompt_tokens": 1'
                                      + "0" * 5000 + ', "output_tokens": 3}\n'), time_unit="s"),
        Raises(ConfigError, r"r\.jsonl, line 1: a number of more than 4,300 digits")),
    Row("config: a number of 5,001 digits in TOML",
        lambda w: plan.load_config(w("p.toml", "[serving]\nmax_num_seqs = 1" + "0" * 5000 + "\n")),
        Raises(ConfigError, r"p\.toml: a number of more than 4,300 digits")),
    # "ValueError: month must be in 1..12" and "... Exceeds the limit (4300 digits)", no file named
    Row("config: a date PyYAML cannot build",
        lambda w: plan.load_config(w("p.yaml", "traffic:\n  start: 2024-13-45\n")),
        Raises(ConfigError, r"p\.yaml: not valid YAML \(month must be in 1\.\.12\)")),
    Row("config: a number of 5,001 digits in YAML",
        lambda w: plan.load_config(w("p.yaml", "serving:\n  max_num_seqs: 1" + "0" * 5000 + "\n")),
        Raises(ConfigError, r"p\.yaml: a number of more than 4,300 digits")),
    Row("config: a number of 5,001 digits in a plan.json",
        lambda w: plan.load_config(w("plan.json", '{"answer": 1' + "0" * 5000 + "}")),
        Raises(ConfigError, r"plan\.json: a number of more than 4,300 digits")),
    Row("model: a truncated config.json", lambda w: data.load_model(w("config.json", '{"hidd')),
        Raises(ConfigError, r"config\.json: not valid JSON")),
    Row("model: a config.json that is not text", lambda w: data.load_model(w("config.json", b"\x80")),
        Raises(ConfigError, r"config\.json, line 1: byte 0x80 \(byte 0\) is not UTF-8")),
    Row("model: an unknown name", lambda _: data.load_model("Llama-9-1T"),
        Raises(UnknownNameError, r"unknown model 'Llama-9-1T'; closest: Llama-")),
    Row("model: a negative size", lambda _: data.load_model(config(hidden_size=-4096)),
        Raises(ConfigError, r"field 'hidden_size' must be positive, got -4096")),
    Row("model: NaN in a config", lambda _: data.load_model(config(num_hidden_layers=np.nan)),
        Raises(ConfigError, r"field 'num_hidden_layers' must be an integer, got nan")),
    Row("model: heads that do not divide the width",
        lambda _: data.load_model(config(num_attention_heads=30)),
        Raises(ConfigError, r"hidden_size 4096 is not a multiple of 30 attention heads")),
    Row("model: an unknown dtype", lambda _: data.load_model(config(torch_dtype="float7")),
        Raises(InputError, r"'torch_dtype'='float7' is not a known dtype; use one of")),
    # found with config.json files of our own: torch_dtype "" (or 0) was read as absent, planned
    # in bf16 with the note "no field 'torch_dtype': bf16 assumed", and a 'dtype' of 0 was
    # refused as "field 'torch_dtype'=0", a field the config did not have
    Row("model: an empty torch_dtype",
        lambda _: data.load_model(config(torch_dtype="", num_key_value_heads=32)),
        Raises(InputError, r"field 'torch_dtype'='' is not a known dtype; use one of")),
    Row("model: a number for dtype",
        lambda _: data.load_model(config(torch_dtype=None, dtype=0)),
        Raises(InputError, r"field 'dtype'=0 is not a known dtype; use one of")),
    Row("gpu: an unknown name", lambda _: data.load_gpus(["H1000"]),
        Raises(UnknownNameError, r"unknown GPU 'H1000'; closest: H200")),
    # -- memory ---------------------------------------------------------------------------------
    Row("memory: a zero-length concurrency dim",
        lambda _: memory.sweep(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                               concurrency=[], seq_len=1024),
        Raises(InputError, r"concurrency: give at least one value")),
    Row("memory: a grid with a zero-length dim",
        lambda _: memory.sweep(xr.Dataset(coords={"seq_len": np.array([], int)}),
                               model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                               concurrency=[1]),
        Raises(InputError, r"seq_len: give at least one value")),
    # found by a careless caller: a key or dim the grid does not know was dropped, so a typo
    # ('seq_length': 32768 beside seq_len 4096) gave 109 sequences at 4,096 tokens as the answer,
    # and a Dataset grid over region lost its region dim
    Row("memory: a grid mapping with a key it does not know",
        lambda _: memory.max_concurrency({"model": "Llama-3.1-8B", "gpu": "H100-SXM",
                                          "tensor_parallel": 1, "seq_len": 4096,
                                          "seq_length": 32768}),
        Raises(InputError, r"grid: 'seq_length' is not an axis of the grid; its axes: model, gpu, "
                           r"tensor_parallel, seq_len")),
    Row("memory: a grid Dataset over a dim it does not know",
        lambda _: memory.max_concurrency(xr.Dataset(
            coords={"model": ["Llama-3.1-8B"], "gpu": ["H100-SXM"], "tensor_parallel": [1],
                    "seq_len": [4096], "region": ["eu", "us"]})),
        Raises(InputError, r"grid: 'region' is not an axis of the grid; its axes: model, gpu, "
                           r"tensor_parallel, seq_len")),
    Row("memory: a negative sequence length",
        lambda _: memory.max_concurrency(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                                         seq_len=-5),
        Raises(InputError, r"seq_len: values must be positive, got \[-5\]")),
    # found sweeping "unbounded" context: inf became int64's -9223372036854775808 in the message,
    # and 1e19 tokens wrapped the same way
    Row("memory: an infinite sequence length",
        lambda _: memory.max_concurrency(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                                         seq_len=[1024, np.inf]),
        Raises(InputError, r"seq_len: values must be finite, got inf at position 1")),
    Row("memory: a concurrency past int64",
        lambda _: memory.sweep(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                               concurrency=[1e19], seq_len=1024),
        Raises(InputError, r"concurrency: values must be at most 9,007,199,254,740,992 \(2\*\*53\), "
                           r"got 1e\+19 at position 0")),
    Row("memory: NaN concurrency",
        lambda _: memory.sweep(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                               concurrency=[1, np.nan], seq_len=1024),
        Raises(InputError, r"concurrency: contains NaN at position 1")),
    Row("memory: a tensor-parallel degree that cannot shard",
        lambda _: memory.max_concurrency(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=3,
                                         seq_len=1024),
        Raises(InputError, r"tensor_parallel=3 does not divide the 32 attention heads")),
    Row("memory: a model given as a number",
        lambda _: memory.max_concurrency(model=3, gpu="H100-SXM", tensor_parallel=1, seq_len=1),
        Raises(InputError, r"model must be a name, a path or a mapping, got int")),
    # found splitting a sweep for dask: chunks={"seq_len": 0} ended in ZeroDivisionError, 1.5 and
    # a list in dask's ValueError / TypeError, and a dim the sweep lacks was ignored
    # found giving the sequence lengths in a grid: a seq_len coord in kilotokens was read as tokens
    # (max concurrency 447,346 at "1 kilotoken", 436 at 1,024 tokens), one in GB too, while the
    # same DataArray as seq_len= is converted (or refused)
    Row("memory: a grid's sequence lengths in kilotokens",
        lambda _: memory.max_concurrency(
            xr.Dataset(coords={"seq_len": ("seq_len", [1, 4], {"units": "kilotokens"})}),
            model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1),
        States(lambda fit: f"{fit.seq_len.values.tolist()} tokens: "
                           f"{fit.max_concurrency.values.ravel().tolist()}",
               r"^\[1000, 4000\] tokens: \[447, 111\]$")),
    Row("memory: a grid's sequence lengths in GB",
        lambda _: memory.max_concurrency(
            xr.Dataset(coords={"seq_len": ("seq_len", [1, 4], {"units": "GB"})}),
            model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1),
        Raises(InputError, r"grid\.seq_len: 'a DataArray in GB' is gigabyte, not a quantity in "
                           r"tokens")),
    Row("memory: a dask chunk of 0",
        lambda _: memory.max_concurrency(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                                         seq_len=[1024, 2048], chunks={"seq_len": 0}),
        Raises(InputError, r"chunks\['seq_len'\] = 0: a chunk is a whole number of cells >= 1 "
                           r"\(or -1: the whole dim\)")),
    Row("memory: dask chunks over a dim the sweep lacks",
        lambda _: memory.max_concurrency(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                                         seq_len=[1024], chunks={"batch": 2}),
        Raises(InputError, r"chunks: no dim 'batch' to chunk; the dims: .*'seq_len'")),
    Row("latency: dask chunks as a list",
        lambda _: latency.analytic("Llama-3.1-8B", "H100-SXM", 1, concurrency=[1, 2],
                                   workload=latency.workload(prompt_tokens=[5], output_tokens=[5]),
                                   chunks=[1]),
        Raises(InputError, r"chunks: a mapping of dim names to chunk sizes \(e\.g\. \{'gpu': 1\}\), "
                           r"got list")),
    Row("memory: an unknown accounting",
        lambda _: memory.max_concurrency(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
                                         seq_len=1024, accounting="magic"),
        Raises(InputError, r"accounting='magic' is not known; use one of \['article', 'vllm'\]")),
    Row("memory: a model too large for any GPU",
        lambda _: memory.max_concurrency(model="Llama-3.1-405B", gpu=data.list_gpus(),
                                         tensor_parallel=1, seq_len=4096),
        States(lambda ds: f"{int(ds.max_concurrency.max())} fit; "
                          + memory.describe(ds.isel(gpu=int(np.argmax(ds.usable_bytes.values)))),
               r"^0 fit; Infeasible: Llama-3\.1-405B .*does not fit: its weights alone take .* "
               r"the smallest tensor-parallel degree that fits one such sequence is \d+")),
    # -- capacity -------------------------------------------------------------------------------
    Row("capacity: an SLA of 0", ttft(0.0),
        Raises(InputError, r"sla must be > 0 seconds, got 0 .*500 ms is 0\.5")),
    Row("capacity: a NaN SLA", ttft(float("nan")),
        Raises(InputError, r"sla must be > 0 seconds, got nan")),
    Row("capacity: an SLA as text", ttft("500ms"),
        Raises(InputError, r"sla: expected seconds as a number or a list of numbers, got '500ms'")),
    Row("capacity: an SLA below any achievable latency", ttft(0.001),
        States(lambda plan: capacity.describe(plan),
               r"^Infeasible: ttft P99 is already 315 ms at concurrency 1, above the 1 ms SLA")),
    Row("capacity: a model too large for its GPU",
        lambda _: capacity.plan(
            latency.analytic("Llama-3.1-405B", "L4", 1, concurrency=[1, 2],
                             workload=latency.workload(prompt_tokens=[512], output_tokens=[128])),
            10.0, 5.0),
        States(lambda plan: f"{int(plan.safe_concurrency.max())} safe; {capacity.describe(plan)}",
               r"^0 safe; Infeasible: Llama-3\.1-405B on 1 x L4 .*cannot hold its weights")),
    Row("capacity: a metric the curve lacks", lambda _: capacity.safe_concurrency(curve(), 1.0),
        Raises(InputError, r"the curve has no e2e P99; it measured: ttft P50, ttft P99")),
    Row("capacity: an unknown metric",
        lambda _: capacity.plan(curve(), 1.0, 10.0, metric="tbt"),
        Raises(InputError, r"metric='tbt' is not in the curve \(\['ttft', 'tpot', 'itl', 'e2e'\]\)")),
    Row("capacity: a negative target", ttft(1.0, target=-5.0),
        Raises(InputError, r"target_qps must be finite and >= 0 requests/s, got -5")),
    Row("capacity: a target as text", ttft(1.0, target="lots"),
        Raises(InputError, r"target_qps: expected requests/s as numbers, got 'lots'")),
    Row("capacity: a negative buffer", ttft(1.0, buffer=-1),
        Raises(InputError, r"buffer must be a whole number of instances >= 0, got -1")),
    # found by a careless caller: a negative burst rate was reported as the target's
    # ("target_qps must be finite and >= 0 requests/s, got -1"), an argument it was not given
    Row("capacity: a negative burst rate", lambda _: capacity.fleet(2.0, 10.0, buffer_qps=-1.0),
        Raises(InputError, r"^buffer_qps must be finite and >= 0 requests/s, got -1")),
    # per-GPU rates over gpu a, b against targets over b, c: a came out NaN instances (read as
    # "the SLA is not met at any load") and c's target was dropped
    Row("capacity: per-instance rates and targets labelled differently",
        lambda _: capacity.fleet(xr.DataArray([2.0, 3.0], dims="gpu", coords={"gpu": ["a", "b"]}),
                                 xr.DataArray([10.0, 20.0], dims="gpu", coords={"gpu": ["b", "c"]})),
        Raises(InputError, r"target_qps is over gpu \['b', 'c'\], but per_instance_qps over "
                           r"\['a', 'b'\]")),
    Row("capacity: not a curve", lambda _: capacity.safe_concurrency(xr.Dataset(), 1.0),
        Raises(InputError, r"curve: expected a latency curve")),
    # found by a careless caller: a curve with one metric or quantile selected (a scalar coordinate
    # left) ended in xarray's "Could not automatically create PandasIndex for coord 'metric'", and
    # one quantile selected in numpy's "TypeError: iteration over a 0-d array"
    Row("capacity: a curve with its metric selected away",
        lambda _: capacity.plan(curve().sel(metric="ttft"), 1.0, 10.0, metric="ttft"),
        Raises(InputError, r"curve\.latency: over \(concurrency, latency_quantile\), without a "
                           r"metric dim; .*curve\.sel\(metric=\['ttft'\]\)")),
    Row("capacity: a curve with its quantile selected away",
        lambda _: capacity.safe_concurrency(curve().sel(latency_quantile=0.99), SLA_TTFT),
        Raises(InputError, r"curve\.latency: over \(concurrency, metric\), without a "
                           r"latency_quantile dim; .*curve\.sel\(latency_quantile=\[0\.99\]\)")),
    # found with a curve of my own: latency in ms (units attr 'ms') was read as seconds (safe
    # concurrency 67 at a 5 s TTFT either way); concurrency listed high to low, and negative
    # latencies, were called "25x below ... not noise. Was that run saved in other units?"
    Row("capacity: a curve whose latency is in ms",
        lambda _: capacity.safe_concurrency(curve().assign(latency=curve().latency.assign_attrs(
            units="ms")), 5.0, metric="ttft"),
        Raises(InputError, r"curve\.latency: its units attr 'ms' is not s \(1 ms = 0\.001 s\)")),
    Row("capacity: a curve over decreasing concurrency",
        lambda _: capacity.safe_concurrency(curve().isel(concurrency=slice(None, None, -1)), 5.0,
                                            metric="ttft"),
        Raises(InputError, r"curve\.concurrency: 1024 follows 2048 at position 1; list each "
                           r"concurrency once, increasing \(curve\.sortby\('concurrency'\)\)")),
    Row("capacity: a curve with a concurrency twice",
        lambda _: capacity.safe_concurrency(curve().isel(concurrency=[0, 0, 1]), 5.0, metric="ttft"),
        Raises(InputError, r"curve\.concurrency: 1 follows 1 at position 1")),
    Row("capacity: a curve of negative latencies",
        lambda _: capacity.safe_concurrency(curve().assign(latency=-curve().latency), 5.0,
                                            metric="ttft"),
        Raises(InputError, r"curve\.latency: ttft P99 is -\S+ s at concurrency 1; a latency is "
                           r"a number of seconds >= 0")),
    Row("capacity: a sweep over an unknown GPU",
        lambda _: capacity.sweep(["Llama-3.1-8B"], ["H1000"], [1], [2048], [1.0],
                                 workload=latency.workload(prompt_tokens=[5], output_tokens=[5])),
        Raises(UnknownNameError, r"unknown GPU 'H1000'; closest: H200")),
    # found with a 3B model's engine sweep: a degree of 0 was "infeasible: no GPU ... can hold one
    # 900-token sequence: give GPUs with more memory", 2.5 ran as 2, [] ended in Python's "max()
    # arg is an empty sequence", and a GPU named twice answered it twice
    Row("capacity: an engine sweep at tensor parallelism 0",
        lambda _: capacity.sweep_engine("Llama-3.1-8B", ["H200"], [0], SHORT, 1.0, 10.0),
        Raises(InputError, r"tensor_parallel: values must be positive, got \[0\]")),
    Row("capacity: an engine sweep at tensor parallelism 2.5",
        lambda _: capacity.sweep_engine("Llama-3.1-8B", ["H200"], [2.5], SHORT, 1.0, 10.0),
        Raises(InputError, r"tensor_parallel: values must be whole numbers, got \[2\.5\]")),
    Row("capacity: an engine sweep at no tensor parallelism",
        lambda _: capacity.sweep_engine("Llama-3.1-8B", ["H200"], [], SHORT, 1.0, 10.0),
        Raises(InputError, r"tensor_parallel: give at least one value")),
    Row("capacity: an engine sweep naming a GPU twice",
        lambda _: capacity.sweep_engine("Llama-3.1-8B", ["H200", "h200"], [1], SHORT, 1.0, 10.0),
        Raises(InputError, r"gpus: \['H200', 'H200'\] names the same GPU twice")),
    # found with a workload built by hand (not capnb.latency.workload): a NaN prompt ran for
    # minutes without an answer, and one without output_tokens ended in an AttributeError
    Row("capacity: an engine sweep on a hand-made workload with a NaN prompt",
        lambda _: capacity.sweep_engine(
            "Llama-3.1-8B", ["H200"], [1], xr.Dataset({"prompt_tokens": ("request", [np.nan, 5.0]),
                                                       "output_tokens": ("request", [5.0, 5.0])}),
            1.0, 10.0, requests=100),
        Raises(InputError, r"^workload: prompt_tokens must be >= 1 token, got nan at request 0")),
    Row("capacity: an engine sweep on a workload without output_tokens",
        lambda _: capacity.sweep_engine(
            "Llama-3.1-8B", ["H200"], [1], xr.Dataset({"prompt_tokens": ("request", [5.0])}),
            1.0, 10.0),
        Raises(InputError, r"^workload: pass capnb\.latency\.workload\(\.\.\.\) \(a Dataset "
                           r"over 'request'\); this one has no 'output_tokens'")),
    # found with a classifier's workload (every request one output token) under a TPOT bound: the
    # error was "the curve has no tpot P99; it measured: ttft P50, ...", naming no input
    Row("capacity: an engine sweep bounding TPOT where every output is one token",
        lambda _: capacity.sweep_engine(
            "Llama-3.1-8B", ["H200"], [1], latency.workload(prompt_tokens=[500, 900],
                                                            output_tokens=[1, 1]),
            capacity.SLA(ttft_s=1.0, tpot_s=0.05), 10.0),
        Raises(InputError, r"^sla: a TPOT bound \(tpot_s\) on a workload whose every request has "
                           r"1 output token.*no TPOT")),
    # found with Llama-3.1-8B at TP 3 on an H200 (141 GB): "infeasible: no GPU ... can hold one
    # 900-token sequence ...: give GPUs with more memory", where 3 does not divide its 32 heads
    Row("capacity: an engine sweep at a degree that does not shard the model",
        lambda _: capacity.sweep_engine("Llama-3.1-8B", ["H200"], [3], SHORT, 1.0, 10.0),
        Raises(InputError, r"^tensor_parallel: no degree in \[3\] shards Llama-3\.1-8B: "
                           r"tensor_parallel=3 does not divide the 32 attention heads")),
    # the analytic sweep at the same degree: "the curve has no ttft P99; it measured: nothing"
    Row("capacity: an analytic sweep at a degree that does not shard the model",
        lambda _: capacity.sweep("Llama-3.1-8B", ["H100-SXM"], [3], 1200, capacity.SLA(ttft_s=2.0),
                                 workload=SHORT, target_qps=10.0),
        Raises(InputError, r"^tensor_parallel: no degree in \[3\] shards Llama-3\.1-8B: "
                           r"tensor_parallel=3 does not divide the 32 attention heads")),
    # -- elasticity -----------------------------------------------------------------------------
    Row("elasticity: NaN demand", simulate((1.0, np.nan, 2.0)),
        Raises(InputError, r"demand: NaN demand nan at position 1 \(time 5 s\)")),
    Row("elasticity: negative demand", simulate((1.0, -1.0)),
        Raises(InputError, r"demand: negative demand -1\.0 at position 1")),
    Row("elasticity: empty demand", simulate(()),
        Raises(InputError, r"demand must be a non-empty 1-D series, got shape \(0,\)")),
    Row("elasticity: demand as text", simulate(("a", "b")),
        Raises(InputError, r"demand must hold numbers \(requests/s\), got dtype <U1")),
    Row("elasticity: per_instance_qps of 0", simulate(per_instance_qps=0),
        Raises(InputError, r"per_instance_qps must be > 0, got 0")),
    Row("elasticity: an array without step_s", simulate(step_s=None),
        Raises(InputError, r"demand is a plain array; give step_s")),
    Row("elasticity: a cold start that is not whole steps", simulate(cold_start_s=7),
        Raises(InputError, r"cold_start_s=7 s is not a whole number of steps of 5 s")),
    Row("elasticity: a window shorter than one step", simulate(policy="hpa", sync_s=2),
        Raises(InputError, r"sync_s=2 s is shorter than one step of 5 s; simulate with "
                           r"step_s <= 2 s")),
    # found by a careless caller: choose() of the sweep's to_array() said "cost='gpu_hours' is not
    # a variable of the result; use 'usd' or 'gpu_hours'", the cost it was given
    Row("elasticity: a choice among a DataArray",
        lambda _: elasticity.choose(elasticity.sweep(np.ones(20), step_s=5,
                                                     per_instance_qps=1.0).to_array()),
        Raises(InputError, r"result: expected what capnb\.elasticity\.sweep or simulate returns "
                           r"\(a Dataset with breach_share\), got a DataArray")),
    Row("elasticity: an unknown policy", simulate(policy="magic"),
        Raises(InputError, r"policy='magic' is not known; use one of \['article', 'hpa'")),
    Row("elasticity: a threshold above 1", simulate(scale_up_threshold=1.5),
        Raises(InputError, r"scale_up_threshold: values must be in \(0, 1\], got \[1\.5\]")),
    Row("elasticity: an HPA without replicas", simulate(policy="hpa", min_instances=0),
        Raises(InputError, r"min_instances must be at least 1 for the HPA")),
    Row("elasticity: demand in the wrong units", simulate((1e7, 1.0), per_instance_qps=1e-3),
        Raises(InputError, r"demand peaks at 1e\+07 requests/s, which needs 1\.43e\+10 instances "
                           r".*check that demand is in requests/s")),
    Row("elasticity: a cold start of 300,000 years", simulate(cold_start_s=1e13),
        Raises(InputError, r"cold_start_s=1e\+13 s is 2,000,000,000,000 steps of 5 s; capnb "
                           r"simulates windows of up to 1,000,000,000 steps")),
    Row("elasticity: unsorted demand times",
        lambda _: elasticity.simulate(timed([1, 2, 3], [10, 5, 15]), per_instance_qps=1),
        Raises(InputError, r"demand: times run backwards \(-5 s from position 0 to 1\); sort "
                           r"them, one value per step")),
    Row("elasticity: duplicate demand times",
        lambda _: elasticity.simulate(timed([1, 2, 3], [5, 5, 10]), per_instance_qps=1),
        Raises(InputError, r"demand: times do not move \(0 s from position 0 to 1\)")),
    Row("elasticity: a request log as demand",
        lambda _: elasticity.simulate(data.load_trace("azure-code-2023"), per_instance_qps=1),
        Raises(InputError, r"demand is a request log; .*resample_demand\(trace, step_s\)")),
    Row("elasticity: a grid dim given twice the same value",
        lambda _: elasticity.sweep(np.ones(10), step_s=5, per_instance_qps=1, cooldown_s=[0, 0]),
        Raises(InputError, r"cooldown_s: duplicate values in \[0, 0\]")),
    Row("elasticity: a zero-length grid dim",
        lambda _: elasticity.sweep(np.ones(10), step_s=5, per_instance_qps=1, cooldown_s=[]),
        Raises(InputError, r"cooldown_s: expected a number or a 1-D sequence of numbers, got \[\]")),
    # found choosing among 2 windows x 3 configurations by hand: a budget of one number was
    # read as every window's, a cost per configuration summed to one total that ranked nothing,
    # and the others stopped on numpy's "operands could not be broadcast together"
    Row("elasticity: a held-out choice with one budget for two windows",
        lambda _: elasticity.choose_held_out([[0, 5, 30], [0, 50, 0]], [10], [[9, 5, 1]] * 2),
        Raises(InputError, r"budget_s: one breach budget \(s\) per window of breach_s, 2, "
                           r"got shape \(1,\)")),
    Row("elasticity: a held-out choice with a cost per configuration only",
        lambda _: elasticity.choose_held_out([[0, 5, 30], [0, 50, 0]], [10, 10], [9, 5, 1]),
        Raises(InputError, r"cost: windows x configurations as breach_s, \(2, 3\), got shape "
                           r"\(3,\)")),
    Row("elasticity: a held-out choice with a mask of the wrong length",
        lambda _: elasticity.choose_held_out([[0, 5, 30], [0, 50, 0]], [10, 10], [[9, 5, 1]] * 2,
                                             [True, False]),
        Raises(InputError, r"eligible: one flag per configuration of breach_s, 3, got shape "
                           r"\(2,\)")),
    Row("elasticity: a held-out choice with breach of one window as a 1-D list",
        lambda _: elasticity.choose_held_out([0, 5, 30], [10], [9, 5, 1]),
        Raises(InputError, r"breach_s: windows x configurations \(a 2-D array of s\) with at "
                           r"least one of each, got shape \(3,\)")),
    # -- forecast -------------------------------------------------------------------------------
    Row("forecast: a quantile of 1.2",
        lambda _: forecast.fit_baseline(SERVEGEN(), quantiles=[0.5, 1.2]),
        Raises(InputError, r"quantiles must lie strictly between 0 and 1, got \[0\.5, 1\.2\]")),
    # found choosing a forecast by hand: an empty, out-of-range or repeated score_quantiles was
    # blamed on quantiles (which were fine), and a word among either stopped on numpy's "could
    # not convert string to float"
    Row("forecast: select scored on no quantile",
        lambda _: forecast.select(SERVEGEN(), score_quantiles=()),
        Raises(InputError, r"score_quantiles: give a list of numbers in \(0, 1\), got \(\)")),
    Row("forecast: select scored on a quantile of 1.5",
        lambda _: forecast.select(SERVEGEN(), score_quantiles=(1.5,)),
        Raises(InputError, r"score_quantiles must lie strictly between 0 and 1, got \[1\.5\]")),
    Row("forecast: select scored on a word",
        lambda _: forecast.select(SERVEGEN(), score_quantiles=("P99",)),
        Raises(InputError, r"score_quantiles: give a list of numbers in \(0, 1\), got "
                           r"\('P99',\)")),
    Row("forecast: a quantile given as a word",
        lambda _: forecast.fit_baseline(SERVEGEN(), quantiles=(0.5, "P99")),
        Raises(InputError, r"quantiles: give a list of numbers in \(0, 1\), got \(0\.5, 'P99'\)")),
    Row("forecast: hour of week without a known weekday",
        lambda _: forecast.fit_baseline(SERVEGEN(), slots="hour_of_week"),
        Raises(InputError, r"slots='hour_of_week' needs the weekday, .*load the trace with start=")),
    Row("forecast: an interval that is not a duration",
        lambda _: forecast.resample(SERVEGEN(), "5 parsecs"),
        Raises(InputError, r"interval='5 parsecs' is not a duration; write e\.g\. '1s'")),
    # found by an outside pass with --sla ttft=1e400: "(a bound <= 0 can never be met)" of infinity
    Row("sla: an infinite bound",
        lambda _: capacity.SLA(ttft_s=float("inf")),
        Raises(InputError, r"sla: ttft_s = inf: .*\(an infinite bound bounds nothing: leave the "
                           r"metric out\)")),
    Row("capacity: an infinite SLA",
        lambda _: capacity.safe_concurrency(curve(), float("inf")),
        Raises(InputError, r"sla must be > 0 seconds, got inf \(an infinite SLA bounds nothing")),
    # found by an outside pass writing interval = "10M" in a plan config: read as 10 minutes
    # ("10MS" as 10 ms), where pandas reads M as month end and MS as month start
    Row("forecast: an interval in capital M",
        lambda _: forecast.resample(SERVEGEN(), "10M"),
        Raises(InputError, r"interval='10M' is ambiguous: M reads as minutes here but as months")),
    Row("forecast: an interval in capital MS",
        lambda _: forecast.resample(SERVEGEN(), "10MS"),
        Raises(InputError, r"interval='10MS' is ambiguous: .*write 'min' or 'ms'")),
    # found planning a 15-minute rate series on the defaults: the plan stopped on "interval 10 min
    # is not a whole multiple of the series' own interval (15 min)", an interval the user never
    # set, with no word of the setting or a value that works
    Row("plan: a 15-minute rate series with the default 10-minute interval",
        lambda w: plan.build({**TINY_PLAN, "trace": str(w("q.csv", "timestamp,qps\n" + "".join(
            f"2026-03-02T{h:02d}:{m:02d},5\n" for h in range(24) for m in (0, 15, 30, 45))))}),
        Raises(plan.PlanError, r"interval 10 min is not a whole multiple of the series' own "
                               r"interval \(15 min\): give interval '15 min' .*in a plan: "
                               r"\[traffic\] interval = '15 min', or --interval '15 min'")),
    # found planning a 7-minute rate series: "set interval = '14 min'", which the plan's config
    # then refused ("does not divide an hour"); no multiple of 7 minutes divides an hour
    Row("plan: a 7-minute rate series, whose step no plan interval is a multiple of",
        lambda w: plan.build({**TINY_PLAN, "trace": str(w("q.csv", "timestamp,qps\n" + "".join(
            f"2026-03-02T{m // 60:02d}:{m % 60:02d},5\n" for m in range(0, 1440, 7))))}),
        Raises(plan.PlanError, r"interval 10 min is not a whole multiple of the series' own "
                               r"interval \(7 min\), and no multiple of 7 min divides an hour")),
    Row("forecast: a 6-minute series cut into 20 minutes",
        lambda _: forecast.resample(xr.Dataset(
            {"qps": ("time", np.full(240, 5.0))},
            coords={"time": np.arange(240) * np.timedelta64(6, "m") + np.datetime64("2026-03-02")},
            attrs={"interval_s": 360.0}), "20min"),
        Raises(InputError, r"give interval '30 min' \(a multiple of 6 min that divides an hour")),
    # found with Gemma-2-9B on L4 and H20 under an SLA nothing meets: the engine sweep marked the
    # L4, which holds no sequence, with the binding "memory" (one that meets the SLA), so the plan
    # said "no price: 1 x L4 meets P99 TTFT <= 50 ms ..." instead of "infeasible"
    Row("plan: an SLA no GPU meets, beside a GPU the model does not fit",
        lambda w: planned(w, model="Qwen3-32B", gpus=["L40S", "H100-SXM"], latency="engine",
                          sla="ttft=0.01,confirm"),
        Raises(plan.PlanError, r"^infeasible: no GPU in \['L40S', 'H100-SXM'\] .*P99 TTFT <= "
                               r"10 ms.*bindings: infeasible_latency, infeasible_memory")),
    Row("forecast: an interval longer than the trace",
        lambda _: forecast.resample(data.load_trace("azure-conv-2023"), "1D"),
        Raises(InputError, r"interval 1 d is longer than the trace \(58\.4 min from first to last\)")),
    Row("forecast: a negative seed", lambda _: forecast.target(SERVEGEN(), trials=10, seed=-1),
        Raises(InputError, r"seed must be an integer in \[0, 2\*\*64\), got -1")),
    Row("forecast: a series without qps", lambda _: forecast.fit_baseline(xr.Dataset()),
        Raises(InputError, r"series must be a Dataset over 'time' with 'qps'")),
    # found building a series of my own: negative rates planned negative targets (-11 req/s at
    # 00:00), an inf planned inf, and times out of order or given twice were counted as given
    Row("forecast: a series of negative rates",
        lambda _: forecast.fit_baseline(SERVEGEN().assign(qps=-SERVEGEN().qps)),
        Raises(InputError, r"series\.qps holds -212\.78 at position 0 \(time 1970-\S+\); a rate "
                           r"is a finite number of requests/s >= 0")),
    Row("forecast: an infinite rate",
        lambda _: forecast.fit_baseline(SERVEGEN().assign(qps=SERVEGEN().qps.where(
            np.arange(SERVEGEN().sizes["time"]) != 3, np.inf))),
        Raises(InputError, r"series\.qps holds inf at position 3 \(time ")),
    Row("forecast: rates as true/false",
        lambda _: forecast.fit_baseline(SERVEGEN().assign(qps=SERVEGEN().qps > 1)),
        Raises(InputError, r"series\.qps must hold numbers \(requests/s\), got dtype bool")),
    Row("forecast: series times out of order",
        lambda _: forecast.fit_baseline(SERVEGEN().isel(time=np.r_[1, 0, 2:SERVEGEN().sizes["time"]])),
        Raises(InputError, r"series\.time: times run backwards at position 1 \(\S+ after \S+\); "
                           r"sort them")),
    Row("forecast: a series time given twice",
        lambda _: forecast.fit_baseline(SERVEGEN().isel(time=np.r_[0, 0:SERVEGEN().sizes["time"]])),
        Raises(InputError, r"series\.time: position 1 repeats the time before it \(\S+\)")),
    # found with a series indexed on Europe/Berlin times: its values reached the slots as UTC,
    # every hour of the day one hour early (slot 0 planned 12.3 req/s, the 23:00 slot's figure,
    # not 11.0), and the simulator said "demand has no time step; give step_s"
    # found with a series of my own: interval_s = 0 ended in ZeroDivisionError, NaN and '10min' in
    # ValueError ("cannot convert float NaN to integer"), and -600 was taken as given
    Row("forecast: a series whose interval_s is 0",
        lambda _: forecast.fit_baseline(SERVEGEN().assign_attrs(interval_s=0.0)),
        Raises(InputError, r"series\.attrs\['interval_s'\] must be at least 0\.001 s, got 0\.0")),
    Row("forecast: a series whose interval_s is negative",
        lambda _: forecast.fit_baseline(SERVEGEN().assign_attrs(interval_s=-600.0)),
        Raises(InputError, r"series\.attrs\['interval_s'\] must be at least 0\.001 s, got -600\.0")),
    Row("forecast: a series whose interval_s is NaN",
        lambda _: forecast.fit_baseline(SERVEGEN().assign_attrs(interval_s=np.nan)),
        Raises(InputError, r"series\.attrs\['interval_s'\] must be at least 0\.001 s, got nan")),
    # found by a careless caller: 10-minute rates labelled hourly were read as 2,000 hours (span_s
    # 7,200,000 s, not 1,200,000) by fit_baseline, detect_bursts, backtest and predict, while
    # target and select refused them ("not a regular grid of its interval")
    Row("forecast: a series whose interval_s its times contradict",
        lambda _: forecast.fit_baseline(SERVEGEN().assign_attrs(interval_s=3600.0)),
        # the attr is the series' own, not the time coordinate's (series.time.attrs holds none)
        Raises(InputError, r"series\.attrs\['interval_s'\] says 3600 s, but series\.time's times "
                           r"1970-01-01T00:00:00 and 1970-01-01T00:10:00 \(positions 0 and 1\) "
                           r"are 600 s apart; .*resample")),
    Row("forecast: series times with a time zone",
        lambda _: forecast.fit_baseline(SERVEGEN().assign_coords(time=SERVEGEN().indexes["time"]
                                                                 .tz_localize("Europe/Berlin"))),
        Raises(InputError, r"series\.time carries the time zone Europe/Berlin: capnb counts hours "
                           r"of the day on naive times.*tz_localize\(None\).*timezone")),
    # found with a series whose step_s attr was left from an earlier resample: 1-s times read as
    # 5-s steps, a minute of demand simulated as five
    Row("elasticity: a step_s attr its times contradict",
        lambda _: elasticity.simulate(timed([1, 2, 3], [0, 1, 2]).assign_attrs(step_s=5.0),
                                      per_instance_qps=1),
        Raises(InputError, r"demand: its step_s attr says 5 s, but its times are 1 s apart; "
                           r"drop the attr or resample")),
    # found with a pandas Series of 10-s rates (a DatetimeIndex): simulate read it as a bare array
    # at step_s=1, a 10-hour day simulated as one hour (gpu_hours 8.0 instead of 70); a DataArray
    # over the same times was refused
    Row("elasticity: a pandas Series whose times contradict step_s",
        lambda _: elasticity.simulate(pd.Series([1.0, 2, 3], index=pd.date_range(
            "2024-01-01", periods=3, freq="10s")), step_s=1, per_instance_qps=1),
        Raises(InputError, r"step_s=1 does not match the demand's own step of 10 s")),
    Row("elasticity: demand times with a time zone",
        lambda _: elasticity.simulate(timed([1, 2, 3], [0, 5, 10]).assign_coords(
            time=pd.date_range("2024-01-01", periods=3, freq="5s", tz="UTC")), per_instance_qps=1),
        Raises(InputError, r"demand\.time carries the time zone UTC: capnb counts hours of the day "
                           r"on naive times")),
    # found with a pandas Series of 1-min rates over Europe/Berlin times: simulate named the zone,
    # resample_demand (the step that comes before it) ended in ValueError ("Could not convert
    # object to NumPy timedelta")
    Row("elasticity: a rate series with a time zone, resampled",
        lambda _: elasticity.resample_demand(pd.Series([1.0, 2, 3], index=pd.date_range(
            "2024-01-01", periods=3, freq="60s", tz="Europe/Berlin")), 1),
        Raises(InputError, r"source\.time carries the time zone Europe/Berlin: capnb counts hours "
                           r"of the day on naive times")),
    # found with series of my own: a series of no intervals ended in ValueError ("cannot reshape
    # array of size 0") in fit_baseline, select and detect_bursts
    Row("forecast: a series of no intervals",
        lambda _: forecast.select(SERVEGEN().isel(time=slice(0, 0))),
        Raises(InputError, r"series: fewer than two observed intervals \(0 given, 0 observed\)")),
    # found with an idle service's series (every rate 0): target and simulate ended in ValueError
    # ("zero-size array to reduction operation maximum which has no identity")
    Row("forecast: a series of no traffic",
        lambda _: forecast.target(SERVEGEN().assign(qps=SERVEGEN().qps * 0), trials=10),
        Raises(InputError, r"series: every observed interval outside the detected bursts is 0 "
                           r"requests/s \(2016 observed intervals\), so there is no traffic")),
    # found with simulate(baseline, bursts) and detect_bursts(series, bursts), the burst model
    # where the baseline goes: AttributeError "'BurstModel' object has no attribute
    # 'traffic_quantile'", naming neither argument
    Row("forecast: simulate given a burst model as its baseline",
        lambda _: forecast.simulate(SERVEGEN(), forecast.BurstModel()),
        Raises(InputError, r"^baseline must be the output of capnb\.forecast\.fit_baseline, "
                           r"got a BurstModel")),
    Row("forecast: detect_bursts given a series as its baseline",
        lambda _: forecast.detect_bursts(SERVEGEN(), SERVEGEN()),
        Raises(InputError, r"^baseline must be the output of capnb\.forecast\.fit_baseline, "
                           r"got a Dataset without target_qps over slot and traffic_quantile")),
    Row("forecast: bursts lower at the top than the bottom",
        lambda _: forecast.BurstModel(multiplier=(5.0, 3.0)),
        Raises(InputError, r"multiplier: low 5 is above high 3")),
    # -- cold start -----------------------------------------------------------------------------
    Row("coldstart: an unknown setting",
        lambda _: coldstart.estimate("Llama-3.1-8B", "H100-SXM", download_speed=5),
        Raises(InputError, r"estimate: unknown setting\(s\) \['download_speed'\]; known:")),
    Row("coldstart: a negative bandwidth",
        lambda _: coldstart.estimate("Llama-3.1-8B", "H100-SXM", download_bandwidth=-5),
        Raises(InputError, r"download_bandwidth must be in \(0\.0, inf\], got -5")),
    # found comparing the steps on one deployment: memory refuses tensor_parallel=3 for a model of
    # 32 heads, the cold start estimated it (48.2 s of download, its load split three ways)
    # found with a bandwidth typed in GB/s as bytes/s times 1e-9 twice: the download took inf s and
    # the cold start was inf, silently; a provisioning of inf s passed too
    Row("coldstart: a bandwidth too small to finish",
        lambda _: coldstart.estimate("Llama-3.1-8B", "H100-SXM", download_bandwidth=1e-300),
        Raises(InputError, r"download_s is inf s for Llama-3\.1-8B on H100-SXM \(download_bandwidth"
                           r"=1e-300 bytes/s\): a cold start is a finite number of seconds")),
    Row("coldstart: an infinite provisioning time",
        lambda _: coldstart.estimate("Llama-3.1-8B", "H100-SXM", provisioning_s=float("inf")),
        Raises(InputError, r"provisioning_s is inf s for Llama-3\.1-8B on H100-SXM")),
    Row("coldstart: a tensor-parallel degree that cannot shard",
        lambda _: coldstart.estimate("Llama-3.1-8B", "H100-SXM", tensor_parallel=3),
        Raises(InputError, r"^tensor_parallel: tensor_parallel=3 does not divide the 32 attention "
                           r"heads of Llama-3\.1-8B$")),
    # -- a user's own service (the plan's inputs, and the silent answers that became errors) ----
    Row("config: a table name misspelt", plan_file('[trafic]\ntrace = "mine.csv"\n'),
        Raises(ConfigError, r"p\.toml:1: unknown table \[trafic\] \(closest: traffic\); the tables "
                            r"are traffic, serving, sla, elasticity, fleet$")),
    Row("config: a YAML table name misspelt", plan_file("elasticty:\n  cold_start_s: 90\n", "p.yaml"),
        Raises(ConfigError, r"p\.yaml:1: unknown table \[elasticty\] \(closest: elasticity\)")),
    Row("config: a spot preemption rate with no spot in the mix",
        plan_file("[fleet]\nspot_preemption_rate = 2.0\n"),
        Raises(ConfigError, r"p\.toml:2: spot_preemption_rate = 2\.0: preempts spot instances, but "
                            r"spot_preemption = 'none' puts none in the mix; set spot_preemption")),
    Row("config: a spot share with no price provider",
        plan_file('[fleet]\nprovider = "none"\nspot_preemption = 0.1\n'),
        Raises(ConfigError, r"p\.toml:3: spot_preemption = 0\.1: prices spot capacity in the mix, "
                            r"but provider = 'none' plans no mix; name a provider")),
    Row("config: an unknown price provider (named before the plan is built, not after)",
        plan_file('[fleet]\nprovider = "aws-nope"\n'),
        Raises(ConfigError, r"p\.toml:2: provider = 'aws-nope': unknown price provider 'aws-nope'; "
                            r"closest: aws")),
    Row("config: a cold start in words", plan_file('[elasticity]\ncold_start_s = "fast"\n'),
        Raises(ConfigError, r"p\.toml:2: cold_start_s = 'fast': expected a finite number of seconds")),
    Row("config: a negative cold start", plan_file("[elasticity]\ncold_start_s = -30\n"),
        Raises(ConfigError, r"p\.toml:2: cold_start_s = -30: expected a finite number of seconds from 0")),
    Row("config: NaN for a cold start", plan_file("[elasticity]\ncold_start_s = nan\n"),
        Raises(ConfigError, r"cold_start_s = nan")),
    # found with cold_start_s = 90000 (25 h): the rule it broke (at most a day) was not said, only
    # "expected a finite number of seconds >= 0, or 'estimate'", which 90000 is
    Row("config: a cold start past a day", plan_file("[elasticity]\ncold_start_s = 90000\n"),
        Raises(ConfigError, r"p\.toml:2: cold_start_s = 90000: expected a finite number of "
                            r"seconds from 0 to 86,400 \(a day\), or 'estimate'$")),
    Row("config: a demand scale in quotes", plan_file('[traffic]\ndemand_scale = "2"\n'),
        Raises(ConfigError, r"p\.toml:2: demand_scale = '2': Input should be a valid number")),
    Row("config: a quantile as a label", plan_file('[traffic]\ntraffic_quantile = "p99"\n'),
        Raises(ConfigError, r"traffic_quantile = 'p99'")),
    Row("config: a trace as a number", plan_file("trace = 5\n"),
        Raises(ConfigError, r"p\.toml:1: trace = 5: Input should be a valid string")),
    Row("config: a TOML key at the top and in its table",
        plan_file('model = "Llama-3.1-8B"\n[serving]\nmodel = "Qwen3-8B"\n'),
        Raises(ConfigError, r"p\.toml:3: \[serving\] model is given twice \(also as model on line 1\)")),
    Row("config: a YAML key given twice", plan_file("sla:\n  sla_s: 0.1\n  sla_s: 0.2\n", "p.yaml"),
        Raises(ConfigError, r"p\.yaml:3: 'sla_s' is given twice \(also on line 2\)")),
    Row("config: an unknown policy", plan_file('[elasticity]\npolicies = ["hpa", "magic"]\n'),
        Raises(ConfigError, r"policies\[1\] = 'magic': expected one of")),
    Row("traffic: a rate column beside token columns",
        lambda write: data.load_traffic(write("x.csv", "timestamp,qps,prompt_tokens\n"
                                                        "2026-01-01 00:00,5,10\n")),
        Raises(ConfigError, r"x\.csv: column 'qps' reads as a rate series and 'prompt_tokens' as a "
                            r"request log; say which with trace_kind")),
    Row("trace: a date in year 1", trace("timestamp\n0001-01-01 00:00:00\n0001-01-01 00:00:01\n"),
        Raises(ConfigError, r"row 1 \(line 2\): column 'timestamp' holds '0001-01-01 00:00:00', "
                            r"outside the years 1678-2261")),
    Row("model: more experts per token than experts",
        lambda _: data.load_model({**data.load_model("Mixtral-8x7B").config, "num_experts_per_tok": 9}),
        Raises(ConfigError, r"'num_experts_per_tok' = 9 exceeds the 8 experts")),
    Row("model: a boolean written as text",
        lambda _: data.load_model({**data.load_model("Qwen3-8B").config, "tie_word_embeddings": "false"}),
        Raises(ConfigError, r"'tie_word_embeddings' must be true or false, got 'false'")),
    # "false" as text is truthy: a Falcon config read it as multi-query attention, 1 KV head
    # where it has 32 (1/32 of its KV cache), and a Qwen3 config as windowed layers
    Row("model: multi_query written as text",
        lambda _: data.load_model(config(model_type="falcon", multi_query="false")),
        Raises(ConfigError, r"field 'multi_query' must be true or false, got 'false'")),
    Row("model: use_sliding_window written as text",
        lambda _: data.load_model(catalog_config("Qwen3-8B", use_sliding_window="false")),
        Raises(ConfigError, r"field 'use_sliding_window' must be true or false, got 'false'")),
    # a context written as text was read as "not stated": no check of requests past it, and the
    # engine model's max_model_len left at its default
    Row("model: max_position_embeddings written as text",
        lambda _: data.load_model(catalog_config("Qwen3-8B", max_position_embeddings="40960")),
        Raises(ConfigError, r"field 'max_position_embeddings' must be an integer, got '40960'")),
    Row("model: a rope_scaling factor written as text",
        lambda _: data.load_model(catalog_config("Llama-2-7B", rope_scaling={"type": "linear",
                                                                             "factor": "4"})),
        Raises(ConfigError, r"field 'rope_scaling\.factor' must be a number, got '4'")),
    Row("model: compressed-tensors groups given as a list",
        lambda _: data.load_model(catalog_config("Llama-3.1-8B", quantization_config={
            "quant_method": "compressed-tensors", "config_groups": [{"weights": {"num_bits": 8}}]})),
        Raises(ConfigError, r"field 'quantization_config\.config_groups' must be a mapping")),
    Row("model: a compressed-tensors group whose weights are not a mapping",
        lambda _: data.load_model(catalog_config("Llama-3.1-8B", quantization_config={
            "quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": 8}}})),
        Raises(ConfigError, r"field 'quantization_config\.config_groups\.group_0\.weights' must be "
                            r"a mapping")),
    Row("gpu: a family name that fits two profiles", lambda _: data.resolve_gpu("H100"),
        Raises(InputError, r"GPU 'H100' fits 2 catalog profiles \(H100-SXM, H100-PCIe\)")),
    Row("capacity: zero GPUs per instance",
        lambda _: capacity.plan(data.load_latency_curve("dstack-vllm-mi300x-short"), 2.0, 20.0,
                                metric="ttft", tensor_parallel=0),
        Raises(InputError, r"tensor_parallel must be a positive integer, got 0")),
    Row("capacity: a fraction of a GPU per instance",
        lambda _: capacity.plan(data.load_latency_curve("dstack-vllm-mi300x-short"), 2.0, 20.0,
                                metric="ttft", tensor_parallel=2.5),
        Raises(InputError, r"tensor_parallel must be a positive integer, got 2\.5")),
    # an SLA written as the config's table ({"ttft_s": 1, "tpot_s": 0.03}) was read as seconds of
    # E2E: band_ratios answered {'e2e': (0.51, 1.66)}, a band for a bound the SLA does not have
    Row("capacity: the band of an SLA given as a mapping",
        lambda _: capacity.band_ratios({"ttft_s": 1.0, "tpot_s": 0.03}),
        Raises(InputError, r"band_ratios: sla must be a capnb\.records\.SLA or seconds of "
                           r"`metric`, got a dict \(write SLA\(ttft_s=1\.0, tpot_s=0\.03\)\)")),
    # an infinite overhead passed the '>= 0 seconds' check (frontend_s=inf: every request waits
    # for ever in the front end, the curve all NaN)
    Row("latency: a calibration with an infinite front end",
        lambda _: latency.calibration.Calibration(0.5, 0.8, 0.7, 2e-3, 2e-5, 1e-5,
                                                  frontend_s=float("inf")),
        Raises(InputError, r"Calibration\.frontend_s must be a finite number of seconds >= 0, "
                           r"got inf")),
    Row("forecast: hours of the day from an unknown start",
        lambda write: forecast.fit_baseline(forecast.resample(
            data.load_trace(write("rel.csv", "time\n1.5\n2.5\n3600.0\n7300.0\n"), time_unit="s"),
            "10min")),
        Raises(InputError, r"slots='hour_of_day': this series counts time from an unknown start")),
    Row("table: one statistic in two units",
        table("concurrency,e2e_p99_ms,e2e_p99_s\n1,100,0.2\n2,150,0.25\n"),
        Raises(ConfigError, r"columns 'e2e_p99_ms' and 'e2e_p99_s' both give e2e p99; keep one")),

    # -- issue 31: silent answers that became errors, or said ----------------------------------
    Row("model: a Mixtral config without its expert count",
        lambda _: data.load_model(catalog_config("Mixtral-8x7B", num_local_experts=None)),
        Raises(ConfigError, r"missing field 'num_local_experts', which a mixtral "
                            r"\(mixture-of-experts\) config needs")),
    Row("model: a DeepSeek-V3 config without its latent rank",
        lambda _: data.load_model(catalog_config("DeepSeek-V3", kv_lora_rank=None)),
        Raises(ConfigError, r"missing field 'kv_lora_rank', which a deepseek_v3 \(MLA\) config")),
    Row("model: a Qwen3-MoE config without its expert width",
        lambda _: data.load_model(catalog_config("Qwen3-30B-A3B", moe_intermediate_size=None)),
        Raises(ConfigError, r"missing field 'moe_intermediate_size', which a qwen3_moe")),
    Row("model: experts per token and no expert count (any family)",
        lambda _: data.load_model(config(model_type="newfamily", num_experts_per_tok=2,
                                         num_key_value_heads=32)),
        Raises(ConfigError, r"'num_experts_per_tok' routes tokens to experts, but no field names "
                            r"how many experts")),
    Row("model: MLA head sizes without the latent rank (any family)",
        lambda _: data.load_model(config(model_type="newfamily", qk_rope_head_dim=64,
                                         num_key_value_heads=32)),
        Raises(ConfigError, r"field 'qk_rope_head_dim' is MLA's .* 'kv_lora_rank' .* is missing")),
    Row("traffic: trace_kind requests for a rate series",
        lambda w: data.load_traffic(w("r.csv", "timestamp,qps\n2026-01-01 00:00,5\n"
                                               "2026-01-01 00:10,6\n"), kind="requests"),
        Raises(ConfigError, r"r\.csv: trace_kind = 'requests', but column 'qps' holds a rate "
                            r"series' values")),
    # found giving --trace-kind rates to a request log: the error listed the rate columns capnb
    # reads and never said that trace_kind = 'rates' was what made it look for one
    Row("traffic: trace_kind rates for a request log",
        lambda w: data.load_traffic(w("q.csv", "timestamp,prompt_tokens,output_tokens\n"
                                               "2026-01-01 00:00:01,100,20\n"), kind="rates"),
        Raises(ConfigError, r"q\.csv: trace_kind = 'rates', but no column holds a rate series' "
                            r"values: .*its columns read as a request log \('prompt_tokens'\): "
                            r"use trace_kind = 'requests' \(or 'auto'\)")),
    Row("rates: every window 0",
        rates("t,qps\n0,0\n600,0\n1200,0\n"),
        Raises(ConfigError, r"r\.csv: every window's 'qps' is 0 or missing")),
    Row("vllm: a folder with runs of two models",
        lambda w: data.read_benchmark(bench_folder(w, [vllm_run(1, model_id="org/model-a"),
                                                       vllm_run(4, model_id="org/model-b")])),
        Raises(ConfigError, r"bench: the runs are of 2 models \('org/model-a' in run0\.json; "
                            r"'org/model-b' in run1\.json\).*model_id=")),
    Row("vllm: a folder with runs on two GPUs",
        lambda w: data.read_benchmark(bench_folder(w, [vllm_run(1, gpu="H100-SXM"),
                                                       vllm_run(4, gpu="L4")])),
        Raises(ConfigError, r"the runs are of 2 GPUs \('H100-SXM' in run0\.json; 'L4'")),
    Row("vllm: runs of another model than the plan's",
        lambda w: data.read_benchmark(
            bench_folder(w, [vllm_run(c, model_id="deepseek-ai/DeepSeek-R1") for c in (1, 4)]),
            model="Llama-3.1-8B"),
        Raises(ConfigError, r"run0\.json: the runs measured model_id 'deepseek-ai/DeepSeek-R1', "
                            r"not model 'Llama-3\.1-8B'")),
    # found settling a close call of Qwen3-8B (bf16) with runs of the FP8 checkpoint served as
    # MODEL: 'Qwen/Qwen3-8B-FP8' holds 'Qwen3-8B', so FP8 latencies priced the bf16 plan unsaid
    Row("vllm: runs of a quantized checkpoint of the plan's model",
        lambda w: data.read_benchmark(
            bench_folder(w, [vllm_run(c, model_id="Qwen/Qwen3-8B-FP8") for c in (1, 4)]),
            model="Qwen3-8B"),
        Raises(ConfigError, r"run0\.json: the runs measured model_id 'Qwen/Qwen3-8B-FP8', not "
                            r"model 'Qwen3-8B' \(its name says quantized weights: FP8; a model "
                            r"folder whose config\.json says its quantization plans them\)")),
    # found settling a close call of catalog Qwen3-8B served under a fine-tune's name: the only
    # remedy named was model_id=, which neither plan.toml nor the command line has
    Row("vllm: runs of a catalog model served under another name",
        lambda w: data.read_benchmark(
            bench_folder(w, [vllm_run(c, model_id="acme/support-bot") for c in (1, 4)]),
            model="Qwen3-8B"),
        Raises(ConfigError, r"not model 'Qwen3-8B'.*model_id='acme/support-bot' if they are of "
                            r"'Qwen3-8B' \(capnb plan: --model a folder named 'support-bot' "
                            r"holding Qwen3-8B's config\.json\)")),
    # found planning a config.json in a folder of my own name with runs of its Hugging Face id:
    # the hint said pass model_id=, which neither plan.toml nor the command line can
    Row("vllm: runs of a model read from a folder of another name",
        lambda w: data.read_benchmark(
            bench_folder(w, [vllm_run(c, model_id="mistralai/Mistral-Nemo-Instruct-2407")
                             for c in (1, 4)]),
            model=data.load_model(w("my-12b/config.json", json.dumps(MISTRAL_12B))).name),
        Raises(ConfigError, r"not model 'my-12b'.*a model read from a file is known by its "
                            r"folder's name: name the folder 'Mistral-Nemo-Instruct-2407'")),
    Row("vllm: runs of another GPU than the plan's",
        lambda w: data.read_benchmark(
            bench_folder(w, [vllm_run(c, gpu="L4") for c in (1, 4)]), gpu="H100-SXM"),
        Raises(ConfigError, r"run0\.json: the runs measured GPU 'L4', not gpu 'H100-SXM'")),
    # found reading published runs made with --metadata gpu=4xNVIDIA_L40S: 'the runs measured
    # GPU '4xNVIDIA_L40S', not gpu 'L40S' ... plan that GPU', of the GPU the plan named
    Row("vllm: runs recording a count of the plan's GPU (gpu=4xNVIDIA_L40S)",
        lambda w: data.read_benchmark(
            bench_folder(w, [vllm_run(c, gpu="4xNVIDIA_L40S") for c in (1, 4)]), gpu="L40S",
            tensor_parallel=1),
        Raises(ConfigError, r"run0\.json: the runs measured 4 GPUs \('4xNVIDIA_L40S': 4 x L40S\), "
                            r"not tensor_parallel 1: .*tensor_parallel=4.*replicas")),
    Row("vllm: runs recording as many of the plan's GPU as its tensor_parallel",
        lambda w: data.read_benchmark(
            bench_folder(w, [vllm_run(c, gpu="4x L40S") for c in (1, 4)]), gpu="L40S",
            tensor_parallel=4),
        States(lambda curve: f"{curve.attrs['tensor_parallel']} x {curve.attrs['gpu']}",
               r"^4 x L40S$")),
    Row("gpu: a copied catalog with a negative price",
        l4_figure("usd_per_gpu_hour", "-0.44"),
        Raises(ConfigError, r"gpus\.csv, line 3 \(L4\): usd_per_gpu_hour = -0\.44; expected USD "
                            r"per GPU-hour > 0")),
    Row("gpu: a copied catalog with a high but possible price",
        l4_figure("usd_per_gpu_hour", "320"),
        States(lambda gpus: f"{float(gpus.usd_per_gpu_hour.sel(gpu='L4')):g} USD/hour kept",
               r"^320 USD/hour kept")),
    # found adding my own RTX 4090 row without a price, as docs/data.md allows ("a GPU with no
    # price meets the SLA unranked and the plan names it"): the catalog refused to load
    Row("gpu: a copied catalog with a GPU of no price",
        l4_figure("usd_per_gpu_hour", ""),
        States(lambda gpus: f"L4 at {float(gpus.usd_per_gpu_hour.sel(gpu='L4'))} USD/hour, "
                            f"H200 at {float(gpus.usd_per_gpu_hour.sel(gpu='H200'))}",
               r"^L4 at nan USD/hour, H200 at 3\.5$")),
    Row("gpu: a copied catalog with a price in USD per GPU-month",
        l4_figure("usd_per_gpu_hour", "2400"),
        Raises(ConfigError, r"usd_per_gpu_hour = 2400\.0; expected USD per GPU-hour > 0 and at "
                            r"most 1000")),
    # found adding my own 100 GB GPU with its figures as a datasheet writes them: 96 (GB) for
    # memory_bytes passed as 96 bytes (every model "does not fit: 0.0 GiB usable"), and 3350
    # (GB/s) for hbm_bandwidth as 3,350 bytes/s (every latency off by a million)
    # found adding my own 192 GB B200 with the alias "B200": resolve_gpu("B200") (and a plan's
    # gpus = ["B200"]) then gave my row, and the catalog's B200 was out of reach by its own id
    Row("gpu: a copied catalog whose new row takes another GPU's id as its alias",
        lambda w: own_catalog(w, lambda t: t.assign(
            aliases=t.aliases.where(t.gpu != "L4", "L4 24GB;B200"))),
        Raises(ConfigError, r"gpus\.csv, line 3 \(L4\): the name 'B200' \(aliases\) already "
                            r"names B200 \(line \d+\)")),
    # found by an outside pass adding my own 40 GiB lab card as a row "h100-sxm": the id read
    # case-insensitively took the catalog's H100-SXM over, so gpu="H100-SXM" sized Llama-3.1-8B
    # at 4,096 tokens on 40.0 GiB (39 sequences) without a word
    Row("gpu: a copied catalog whose new row's id is another GPU's in another case",
        lambda w: own_catalog(w, lambda t: pd.concat(
            [t, t[t.gpu == "L4"].assign(gpu="h100-sxm", display_name="Lab H100", aliases="")])),
        Raises(ConfigError, r"gpus\.csv, line \d+ \(h100-sxm\): the id 'h100-sxm' names the same "
                            r"GPU as 'H100-SXM' \(line \d+;")),
    # found by an outside pass: a row with an unquoted comma was refused with pandas' message and
    # its trailing newline, "(Error tokenizing data. C error: Expected 16 fields in line 3, saw
    # 17\n)"
    Row("gpu: a copied catalog whose row holds an unquoted comma",
        lambda w: own_catalog(w, lambda t: t, text=lambda s: s.replace("\nL4,", "\nL4,24GB,", 1)),
        Raises(ConfigError, r"gpus\.csv: not a readable GPU catalog \(Error tokenizing data\. "
                            r"C error: Expected \d+ fields in line 3, saw \d+\)$")),
    Row("prices: a row holding an unquoted comma",
        lambda w: data.load_gpu_prices(w("p.csv", "gpu,provider,pricing,usd_per_gpu_hour,source,"
                                         "captured,notes\nL4,x,on_demand,1.0,s,2026-01-01,n\n"
                                         "L4,y,on_demand,1.0,s,2026-01-01,a, b\n")),
        Raises(ConfigError, r"p\.csv: not a readable price table \(Error tokenizing data\. "
                            r"C error: Expected 7 fields in line 3, saw 8\)$")),
    # found by an outside pass: a first row ending in an extra comma made pandas take the first
    # column as the index, every name over its neighbour's values: "line 2: gpu 'x' is not in the
    # GPU catalog" (the provider read as the gpu)
    Row("prices: a first row ending in an extra comma",
        lambda w: data.load_gpu_prices(w("p.csv", "gpu,provider,pricing,usd_per_gpu_hour,source,"
                                         "captured,notes\nL4,x,on_demand,1.5,s,2026-01-01,n,\n"
                                         "L4,y,spot,0.5,s,2026-01-01,n\n")),
        States(lambda t: f"{t.provider.tolist()} {t.usd_per_gpu_hour.tolist()}",
               r"^\['x', 'y'\] \[1\.5, 0\.5\]$")),
    Row("prices: a first row holding a value past the header's columns",
        lambda w: data.load_gpu_prices(w("p.csv", "gpu,provider,pricing,usd_per_gpu_hour,source,"
                                         "captured,notes\nL4,x,on_demand,1.5,s,2026-01-01,n,9\n"
                                         "L4,y,spot,0.5,s,2026-01-01,n\n")),
        Raises(ConfigError, r"^[^(]*/p\.csv, line 2: 8 values where the header names 7 "
                            r"columns \(value 8, '9', has no column; is a comma unquoted\?\)")),
    # the same in a copied catalog: "line 12 (NVIDIA B200 SXM 180GB): hbm_bandwidth = 2.25e+15"
    Row("gpu: a copied catalog whose first row ends in an extra comma",
        lambda w: own_catalog(w, lambda t: t, text=lambda s: s.replace("\n", ",\n", 2)
                              .replace(",\n", "\n", 1)),
        States(lambda g: f"{g.usd_per_gpu_hour.sel(gpu='A10G').item()}", r"^1\.006$")),
    # the same in a measurement source (CAPNB_DATASETS): "row 2: unit is empty" (unit was 's')
    Row("measurements: a source whose first row ends in an extra comma",
        lambda w: data._measured._read(w("src.csv", MEASURED_HEAD + MEASURED_ROW + ",\n"
                                         + MEASURED_ROW.replace(",p50,214.92409", ",p99,300") + "\n")),
        States(lambda t: f"{t.unit.tolist()} {t.value.tolist()}", r"^\['s', 's'\] \[214\.92409, 300\.0\]$")),
    Row("gpu: a copied catalog with one display name on two rows",
        lambda w: own_catalog(w, lambda t: t.assign(
            display_name=t.display_name.where(t.gpu != "A30", "NVIDIA L4"))),
        Raises(ConfigError, r"line \d+ \(A30\): the name 'NVIDIA L4' \(display_name\) already "
                            r"names L4 \(line 3\)")),
    # found writing a gpus.csv of my own with the figure columns only: a KeyError 'display_name'
    Row("gpu: a catalog of one's own without the text columns",
        lambda w: own_catalog(w, lambda t: t.drop(columns=["display_name", "aliases", "notes"])),
        Raises(ConfigError, r"gpus\.csv: missing columns \['display_name', 'aliases', 'notes'\] "
                            r"\(datasets/README\.md")),
    Row("gpu: a copied catalog with memory in GB, not bytes",
        l4_figure("memory_bytes", "96"),
        Raises(ConfigError, r"gpus\.csv, line 3 \(L4\): memory_bytes = 96\.0; expected bytes "
                            r"of at least 1\.07374e\+09 .*wrong unit")),
    # found adding my own 96 GiB GPU with a driver-reported memory of 203,079,215,104 bytes (a
    # digit slip for 103...): vLLM's accounting planned on 170.2 GiB usable, 140 sequences of a
    # 4 B model at 8,192 tokens where the card's 96 GiB hold 66
    Row("gpu: a copied catalog whose reported memory is above the card's",
        lambda w: own_catalog(w, lambda t: t.assign(memory_reported_bytes=t.memory_reported_bytes
                                                    .where(t.gpu != "H100-SXM", "170000000000"))),
        Raises(ConfigError, r"gpus\.csv, line \d+ \(H100-SXM\): memory_reported_bytes = 1\.7e\+11 "
                            r"is more than memory_bytes = 8\.58993e\+10")),
    Row("gpu: a copied catalog with bandwidth in GB/s, not bytes/s",
        l4_figure("hbm_bandwidth", "3350"),
        Raises(ConfigError, r"line 3 \(L4\): hbm_bandwidth = 3350\.0; expected bytes/s of at "
                            r"least 1e\+09")),
    # found adding an H20 row with a word in a figure: a bare ValueError "could not convert
    # string to float: 'abc'" naming neither the file, the line nor the column
    Row("gpu: a copied catalog with a word for a figure",
        l4_figure("dense_bf16_flops", "abc"),
        Raises(ConfigError, r"gpus\.csv, line 3 \(L4\): dense_bf16_flops = 'abc'; expected a "
                            r"number of FLOP/s")),
    # found adding an H20 row with its bandwidth cell left empty: "hbm_bandwidth = nan; expected
    # bytes/s > 0", a figure the row never held
    Row("gpu: a copied catalog with a required figure left empty",
        l4_figure("hbm_bandwidth", ""),
        Raises(ConfigError, r"gpus\.csv, line 3 \(L4\): hbm_bandwidth is empty; every GPU needs "
                            r"it, a number of bytes/s")),
    Row("gpu: a copied catalog with a word for an optional figure",
        l4_figure("usd_per_gpu_hour", "ask us"),
        Raises(ConfigError, r"gpus\.csv, line 3 \(L4\): usd_per_gpu_hour = 'ask us'; expected a "
                            r"number of USD per GPU-hour \(or empty\)")),
    Row("capacity: a negative price", ttft(2.0, usd_per_gpu_hour=-3.0),
        Raises(InputError, r"usd_per_gpu_hour must be >= 0, got -3")),
    Row("capacity: a price that is a word", ttft(2.0, usd_per_gpu_hour="cheap"),
        Raises(InputError, r"usd_per_gpu_hour must be a price in USD/hour .* got 'cheap'")),
    Row("config: a negative spot preemption rate",
        plan_file("[fleet]\nspot_preemption_rate = -1\n"),
        Raises(ConfigError, r"p\.toml:2: spot_preemption_rate = -1: Input should be greater than")),
    Row("config: a share of 1.5", plan_file("[serving]\nprefix_cache_share = 1.5\n"),
        Raises(ConfigError, r"p\.toml:2: prefix_cache_share = 1\.5: Input should be less than 1")),
    Row("prefix: a null among a request's hash_ids",
        lambda w: data.load_block_hashes(w("h.jsonl", '{"timestamp": 0, "input_length": 600, '
                                                      '"output_length": 5, "hash_ids": [1, null]}\n')),
        Raises(ConfigError, r"h\.jsonl, line 1: 'hash_ids' holds a null among its block hashes")),
    Row("prefix: hash_ids written as text",
        lambda w: data.load_block_hashes(w("h.jsonl", '{"timestamp": 0, "input_length": 600, '
                                                      '"output_length": 5, "hash_ids": "1,2"}\n')),
        Raises(ConfigError, r"h\.jsonl: field 'hash_ids' must be a list of integers per line")),
    # an unsigned 64-bit hash (xxhash64's) on line 2 said "field 'hash_ids' must be a list of
    # integers per line", no line, of a list of integers
    Row("prefix: a block hash past 2**63 on the second line",
        lambda w: data.load_block_hashes(w("h.jsonl", '{"input_length": 600, "hash_ids": [1, 2]}\n'
                                                      '{"input_length": 600, "hash_ids": [1, '
                                                      '18446744073709551615]}\n')),
        Raises(ConfigError, r"h\.jsonl, line 2: 'hash_ids' holds 1\.8446744073709552e\+19, not an "
                            r"integer in \[-2\*\*63, 2\*\*63\)")),
    # said "h.jsonl: 'input_length' must hold whole token counts >= 0", no line nor value, and
    # refused 1536.0 (a whole count load_trace reads from the same file)
    Row("prefix: a negative prompt length on the second line",
        lambda w: data.load_block_hashes(w("h.jsonl", '{"input_length": 1536.0, "hash_ids": [1, 2, 3]}\n'
                                                      '{"input_length": -5, "hash_ids": []}\n')),
        Raises(ConfigError, r"h\.jsonl, line 2: column 'input_length' holds -5, a negative count")),
    Row("config: an empty file", plan_file(""),
        Raises(ConfigError, r"p\.toml: holds no settings; an empty config is not the defaults")),
    Row("config: tables without a setting", plan_file("[traffic]\n[serving]\n"),
        Raises(ConfigError, r"p\.toml: holds no settings")),
    Row("config: an empty YAML file", plan_file("# nothing\n", "p.yaml"),
        Raises(ConfigError, r"p\.yaml: holds no settings")),
    Row("plan: a trace too short for weekly held-out windows (two days)",
        lambda w: planned(w, backtest_days=7),
        States(lambda built: f"{plan.answer(built).held_out.origin_step} | said: "
                             f"{'rolling origins every hour' in plan.describe(built)}",
               r"^hour \| said: True$")),
    Row("output: a plan.json the user wrote",
        lambda w: data.write_set(w("plan.json", '{"mine": 1}').parent, {"plan.json": "{}"}),
        Raises(OutputError, r"plan\.json: exists and capnb did not write it .* --force")),
    Row("output: a file-size limit below the file",
        lambda w: with_file_size_limit(
            4096, lambda: data.write_set(w("out/.keep", "").parent, {"plan.nc": b"0" * 10_000})),
        Raises(OutputError, r"out/plan\.nc: 10,000 bytes, above the file-size limit of 4,096 "
                            r"bytes \(ulimit -f\)")),
    Row("output: a folder where the output folder goes",
        lambda w: data.write_set(w("taken", "a file"), {"plan.json": "{}"}),
        Raises(OutputError, r"taken: a file, not a folder to write into")),
    # found with --out pointing at a link to a folder not made yet: check_set let it through,
    # the plan was built, and the write ended in "out: a file, not a folder to write into"
    Row("output: a symbolic link to no folder, checked before the work",
        lambda w: data.check_set(dangling_link(w), ["plan.json"]),
        Raises(OutputError, r"out: a symbolic link to .*nowhere, which does not exist; make "
                            r"that folder or give another --out")),
    Row("output: a symbolic link to no folder, written",
        lambda w: data.write_set(dangling_link(w), {"plan.json": "{}"}),
        Raises(OutputError, r"out: a symbolic link to .*nowhere, which does not exist")),
    Row("output: under a symbolic link to no folder",
        lambda w: data.check_set(dangling_link(w) / "sub", ["plan.json"]),
        Raises(OutputError, r"out: a symbolic link to .*nowhere, which does not exist")),
    # found with plan.json a link to a share not mounted: the link was replaced by a file
    Row("output: a symbolic link to no file where a file goes",
        lambda w: data.write_set(dangling_target(w), {"plan.json": "{}"}),
        Raises(OutputError, r"out/plan\.json: a symbolic link to .*shared/plan\.json, which does "
                            r"not exist; capnb did not make it: move it or pass --force")),
    Row("output: a dead writer's temporaries", stale_cleaned,
        States(lambda names: ", ".join(names), r"^\.capnb-outputs\.json, plan\.json$")),
    # found with capnb plan --out on a read-only mount: the plan was built (minutes on a large
    # trace) before the write failed, and failed as "OSError: [Errno 30] Read-only file system:
    # '.../.capnb-tmp-...'", naming a hidden temporary; capnb config said the same of its own
    # temporary, raised by the clean-up of a temporary never made
    Row("output: a read-only folder, checked before the work",
        lambda w: read_only(w, lambda folder: data.check_set(folder, ["plan.json"])),
        Raises(OutputError, r"ro: cannot write there \((Read-only file system|Permission "
                            r"denied)\); write elsewhere$")),  # (capnb config has no --out)
    Row("output: a set written into a read-only folder",
        lambda w: read_only(w, lambda folder: data.write_set(folder, {"plan.json": "{}"})),
        Raises(OutputError, r"ro: cannot write there \((Read-only file system|Permission "
                            r"denied)\)")),
    Row("output: a file written into a read-only folder",
        lambda w: read_only(w, lambda folder: data.write_atomic(folder / "plan.toml", "x = 1\n")),
        Raises(OutputError, r"ro/plan\.toml: cannot write there \((Read-only file system|"
                            r"Permission denied)\)")),
    Row("html: a chart title holding </script>",
        lambda _: __import__("capnb.notebook").notebook.chart_html(
            {"title": "</script><script>alert(1)</script>", "mark": "point"}),
        States(lambda page: f"{page.count('</script>')} script end, {page.count('<script')} start",
               r"^1 script end, 1 start$")),
    # -- issue 31: tracebacks and exhaustion that became errors -------------------------------
    Row("config: a binary file", lambda w: plan.load_config(w("p.toml", BINARY)),
        Raises(ConfigError, r"p\.toml, line 1: a NUL byte \(byte 0\): a binary file")),
    Row("config: UTF-16 text", lambda w: plan.load_config(w("p.toml", 'trials = 5\n'.encode("utf-16"))),
        Raises(ConfigError, r"p\.toml: UTF-16 text .*save it as UTF-8")),
    # found with a request log exported from a Latin-1 spreadsheet: a byte in its first 8 KiB was
    # "not a readable UTF-8 CSV file ('utf-8' codec can't decode byte 0xe9 in position 73 ...)",
    # no line; the same byte on line 2,002 was read without a word
    Row("trace: a Latin-1 byte on the first row",
        trace(latin1_log(0), time_unit="s"),
        Raises(ConfigError, r"t\.csv, line 2: byte 0xe9 \(byte 55\) is not UTF-8 \(Latin-1")),
    Row("trace: a Latin-1 byte on line 2,002",
        trace(latin1_log(2000), time_unit="s"),
        Raises(ConfigError, r"t\.csv, line 2002: byte 0xe9 \(byte \d+\) is not UTF-8")),
    Row("rates: a Latin-1 byte on line 2,002",
        lambda w: data.load_rate_series(
            w("r.csv", b"t,qps,note\n" + b"".join(
                b"%d,5,%s\n" % (600 * i, b"caf\xe9" if i == 2000 else b"x") for i in range(3000))),
            time_column="t", rate_column="qps", time_unit="s"),
        Raises(ConfigError, r"r\.csv, line 2002: byte 0xe9 \(byte \d+\) is not UTF-8")),
    Row("config: Latin-1 text",
        lambda w: plan.load_config(w("p.yaml", "serving:\n  model: caf\xe9\n".encode("latin-1"))),
        Raises(ConfigError, r"p\.yaml, line 2: byte 0xe9 \(byte 21\) is not UTF-8")),
    Row("config: a NUL byte in a TOML string", plan_file('[serving]\nmodel = "a\\u0000b"\n'),
        Raises(ConfigError, r"p\.toml:2: model = 'a\\x00b': holds the control character '\\x00' "
                            r"at position 1")),
    Row("config: a YAML alias bomb", plan_file(BOMB, "p.yaml"),
        Raises(ConfigError, r"p\.yaml: expands to more than 10,000 values once its aliases")),
    Row("config: a YAML alias inside its own anchor", plan_file("sla: &a\n  sla_s: [*a]\n", "p.yaml"),
        Raises(ConfigError, r"p\.yaml:1: an alias inside its own anchor")),
    Row("config: a YAML merge key",
        plan_file("serving:\n  <<: {gpus: [H100-SXM], tensor_parallel: [1]}\n  model: Qwen3-8B\n",
                  "p.yaml"),
        States(lambda cfg: f"{cfg.serving.model} on {cfg.serving.gpus}",
               r"^Qwen3-8B on \('H100-SXM',\)$")),
    Row("config: a billion trials", plan_file("[traffic]\ntrials = 1000000000\n"),
        Raises(ConfigError, r"p\.toml:2: trials = 1000000000: Input should be less than or "
                            r"equal to 1000000: each trial simulates a month")),
    # found with step_s = 86400 (a day): the bound's advice was "use a step of 0.01 s or more",
    # and trials = 0 was told to "lower trials"; each budget's advice is for its own bound only
    # found clearing a setting with "": the empty path was read from the config's folder, so
    # trace = "" became the folder ("is a directory") and model = "" its missing config.json
    # found listing a GPU twice: the config loaded, and the plan ended in its memory step ("the
    # memory step failed (config: defaults): gpu: ['H100-SXM', 'H100-SXM'] names the same GPU
    # twice"), with no line; a policy or a cooldown listed twice loaded too
    Row("config: a GPU listed twice", plan_file('[serving]\ngpus = ["H100-SXM", "L4", "H100-SXM"]\n'),
        Raises(ConfigError, r"p\.toml:2: gpus = \['H100-SXM', 'L4', 'H100-SXM'\]: lists 'H100-SXM' "
                            r"twice; list each value once")),
    Row("config: a cooldown listed twice", plan_file("[elasticity]\ncooldown_s = [300.0, 300.0]\n"),
        Raises(ConfigError, r"p\.toml:2: cooldown_s = .*lists 300\.0 twice; list each value once")),
    # found passing plan.build the series itself: the message held the Dataset's whole repr (16
    # lines, 849 characters) before "Input should be a valid string"
    Row("config: a trace given as a Dataset",
        lambda _: plan.build(trace=SERVEGEN(), gpus=["H100-SXM"]),
        Raises(ConfigError, r"^defaults: replace\(\): trace = <xarray\.Dataset>: Input should be a "
                            r"valid string$")),
    # found with --interval 600: "interval = '600': is not a duration; write e.g. '1s', ... or a
    # number of seconds" refused the number of seconds it asked for (and '0' the same way)
    Row("config: an interval in seconds as text", plan_file('[traffic]\ninterval = "600"\n'),
        States(lambda cfg: f"{forecast.interval_seconds(cfg.traffic.interval):g} s", r"^600 s$")),
    Row("config: an interval of 0 seconds as text", plan_file('[traffic]\ninterval = "0"\n'),
        Raises(ConfigError, r"p\.toml:2: interval = '0': interval must be at least 0\.001 s")),
    Row("config: an empty trace", plan_file('[traffic]\ntrace = ""\n'),
        Raises(ConfigError, r"p\.toml:2: trace = '': String should have at least 1 character")),
    # found with model = "llama-3.1-8b" in plan.toml: its ".1-8b" read as a file suffix made it
    # the path <config folder>/llama-3.1-8b ("no such model config file"), while --model
    # llama-3.1-8b and plan.build(model="llama-3.1-8b") read the catalog's Llama-3.1-8B
    Row("config: a catalog model id in lower case",
        plan_file('[serving]\nmodel = "llama-3.1-8b"\n'),
        States(lambda cfg: cfg.serving.model, r"^llama-3\.1-8b$")),
    Row("config: an empty model", plan_file('[serving]\nmodel = ""\n'),
        Raises(ConfigError, r"p\.toml:2: model = '': String should have at least 1 character")),
    Row("config: a step of a day", plan_file("[elasticity]\nstep_s = 86400.0\n"),
        Raises(ConfigError, r"p\.toml:2: step_s = 86400\.0: Input should be less than or equal to "
                            r"3600$")),
    Row("config: zero trials", plan_file("[traffic]\ntrials = 0\n"),
        Raises(ConfigError, r"p\.toml:2: trials = 0: Input should be greater than or equal to 1$")),
    Row("config: a microsecond step", plan_file("[elasticity]\nstep_s = 0.000001\n"),
        Raises(ConfigError, r"step_s = 1e-06: Input should be greater than or equal to 0\.01")),
    Row("config: a policy grid of 42,480 cells",
        plan_file("[elasticity]\nscale_up_threshold = [" + ", ".join(f"{i / 100}" for i in range(1, 60))
                  + "]\ncooldown_s = [" + ", ".join(map(str, range(60))) + "]\n"),
        Raises(ConfigError, r"p\.toml: the policy grid has 42,480 cells .* more than the 2,000")),
    Row("config: a file of 3 MB", plan_file("# " + "x" * 3_000_000 + "\n"),
        Raises(ConfigError, r"p\.toml: 3,000,003 bytes; capnb reads a plan config of at most")),
    Row("model: 10**12 layers",
        lambda _: data.load_model(config(num_hidden_layers=10**12)),
        Raises(ConfigError, r"field 'num_hidden_layers' = 1,000,000,000,000 is above "
                            r"2,147,483,647")),
    Row("model: 100,000 layers", lambda _: data.load_model(config(num_hidden_layers=100_000)),
        Raises(ConfigError, r"'num_hidden_layers' = 100,000: capnb plans models of at most 4,096")),
    Row("model: a config.json in UTF-16",
        lambda w: data.load_model(w("config.json", json.dumps(config()).encode("utf-16"))),
        Raises(ConfigError, r"config\.json: UTF-16 text")),
    Row("forecast: a billion trials", lambda _: forecast.target(SERVEGEN(), trials=10**9),
        Raises(BudgetError, r"trials=1,000,000,000 Monte Carlo months of 30 days needs about "
                            r"1\.6 TiB of memory, over capnb's budget .*lower trials")),
    # found by a careless caller: the budget counted the trials but not the month's length, so
    # days=1,000,000 at trials=50 passed it and allocated 10.7 GiB for the minute clock (the OOM
    # killer ended the process)
    Row("forecast: Monte Carlo months of a million days",
        lambda _: forecast.target(SERVEGEN(), trials=50, days=10**6),
        Raises(BudgetError, r"trials=50 Monte Carlo months of 1,000,000 days needs about 42\.9 GiB "
                            r"of memory, over capnb's budget .*or days \(a month is 30 days\)")),
    Row("latency: ten billion simulated requests",
        lambda _: latency.engine(latency.Deployment("Llama-3.1-8B", "H100-SXM", 1), concurrency=[1],
                                 workload=latency.workload(prompt_tokens=[5], output_tokens=[5]),
                                 requests=10**10),
        Raises(BudgetError, r"requests=10,000,000,000 simulated requests needs about 7\.3 TiB")),
    # found by a careless caller: 1e300 passed the record's check and its int64 cast in the kernel
    # wrapped negative, a numba "ValueError: negative dimensions not allowed"
    # found by a careless caller: knee read loads and latencies of different lengths pairwise
    # ("between 1 and 2" of three loads and two latencies), loads high to low as given ("between
    # 3 and 2"), and text ended in numpy's "could not convert string to float"
    Row("latency: a knee of three loads and two latencies",
        lambda _: latency.knee([1, 2, 3], [1.0, 2.0]),
        Raises(InputError, r"knee: load \(3 values\) and p99_ttft \(2 values\) must be of equal "
                           r"length, one latency per load")),
    Row("latency: a knee over loads high to low",
        lambda _: latency.knee([3, 2, 1], [1.0, 2.0, 3.0]),
        Raises(InputError, r"knee: load must not decrease: 2 follows 3 at position 1")),
    Row("latency: a knee of text", lambda _: latency.knee("abc", "def"),
        Raises(InputError, r"knee: load must be numbers, got 'abc'")),
    # envelope of a DataArray ended in "'DataArray' object has no attribute 'assign'", of a curve
    # over another dim in xarray's "tuple.index(x): x not in tuple"; at of a DataFrame in pandas'
    # "'DataFrame' object has no attribute 'concurrency'"
    Row("latency: the envelope of a DataArray", lambda _: latency.envelope(curve().latency),
        Raises(InputError, r"envelope: expected a latency curve \(an xarray Dataset with a "
                           r"'latency' variable\), got a DataArray")),
    Row("latency: the envelope of a curve over another dim",
        lambda _: latency.envelope(curve().rename(concurrency="users")),
        Raises(InputError, r"envelope: a curve's latency is over concurrency; this one is over "
                           r"users, metric, latency_quantile")),
    Row("latency: a curve read at points of a DataFrame",
        lambda _: latency.at(curve().to_dataframe(), [4]),
        Raises(InputError, r"at: expected a latency curve .*got a DataFrame")),
    Row("latency: a running-sequence limit of 1e300",
        lambda _: latency.engine(latency.Deployment("Llama-3.1-8B", "H100-SXM", 1), concurrency=[1],
                                 workload=latency.workload(prompt_tokens=[5], output_tokens=[5]),
                                 settings=latency.EngineSettings(max_num_seqs=1e300)),
        Raises(InputError, r"engine settings: max_num_seqs = 1e\+300: expected a whole number of "
                           r"requests from 0 to 9,007,199,254,740,992 \(2\*\*53\)")),
    Row("elasticity: a millisecond step over two weeks",
        lambda _: elasticity.resample_demand(SERVEGEN(), 0.001),
        Raises(BudgetError, r"1,209,600,000 steps of 0\.001 s needs about 27\.0 GiB of memory.*"
                            r"use a longer step_s")),
    Row("elasticity: 20 million 1 s steps x 20,000 policy cells",
        lambda _: elasticity.sweep(np.ones(20_000_000), step_s=1, per_instance_qps=1,
                                   cooldown_s=list(range(100)), scale_up_threshold=[
                                       i / 201 for i in range(1, 201)]),
        Raises(BudgetError, r"20,000,000 steps of 1 s x 20,000 article policy cells takes about "
                            r"6,400 s of CPU, over capnb's budget of 1,800 s")),
    Row("trace: a symlink loop", lambda w: data.load_trace(symlink_loop(w, "t.csv")),
        Raises(ConfigError, r"t\.csv: a loop of symbolic links \(trace\)")),
    Row("model: a symlink loop", lambda w: data.load_model(symlink_loop(w, "config.json")),
        Raises(ConfigError, r"config\.json: a loop of symbolic links \(model\)")),
    Row("vllm: a symlink loop in a results folder",
        lambda w: data.read_benchmark(symlink_loop(w, "run.json").parent),
        Raises(ConfigError, r"(run|other)\.json: a loop of symbolic links \(benchmark file\)")),
    Row("vllm: a sub-folder named like a result file",
        lambda w: data.read_benchmark(folder_named(w, "results/sub.json").parent),
        Raises(ConfigError, r"results: a folder of measured latencies holds vllm bench JSON")),
    # found pointing --benchmark at AIPerf's artifacts folder (one sub-folder a concurrency): the
    # error said only "a folder of measured latencies holds vllm bench JSON files"
    Row("aiperf: a folder of per-run exports",
        lambda w: data.read_benchmark(w("artifacts/m-openai-chat-concurrency8/"
                                        "profile_export_aiperf.csv", AIPERF_RUN).parent.parent),
        Raises(ConfigError, r"artifacts: a folder of measured latencies holds vllm bench JSON "
                            r"files, and this one holds none; it holds AIPerf or GenAI-Perf "
                            r"per-run exports \(m-openai-chat-concurrency8/profile_export_aiperf"
                            r"\.csv\), which do not record their concurrency: .*read_aiperf")),
    # found following the README's `capnb plan --benchmark results/` with a folder holding one
    # latency table: the error said only that the folder held no vllm bench JSON files
    Row("table: a folder holding a latency table",
        lambda w: data.read_benchmark(w("tab/lat.csv", "concurrency,ttft_p99_ms,qps\n"
                                        "4,120,1.1\n16,200,3.1\n").parent),
        Raises(ConfigError, r"tab: a folder of measured latencies holds vllm bench JSON files, "
                            r"and this one holds none; it holds lat\.csv \(a latency table\): "
                            r"give the file itself \(--benchmark \S*lat\.csv, \[serving\] "
                            r"latency = '\S*lat\.csv'\)")),
    Row("vllm: a sub-folder named .json beside results",
        lambda w: (folder_named(w, "bench/sub.json"),
                   data.read_vllm_bench(bench_folder(w, [vllm_run(1), vllm_run(4)])))[1],
        States(lambda curve: f"{curve.sizes['concurrency']} runs read", r"^2 runs read$")),
    Row("trace: a folder named t.json", lambda w: data.load_trace(folder_named(w, "t.json")),
        Raises(ConfigError, r"t\.json: is a directory, not a trace file")),
    Row("traffic: a folder named t.csv", lambda w: data.load_traffic(folder_named(w, "t.csv")),
        Raises(ConfigError, r"t\.csv: a folder, not a trace file")),
    Row("trace: a binary .jsonl", lambda w: data.load_trace(w("t.jsonl", BINARY)),
        Raises(ConfigError, r"t\.jsonl")),
    Row("vllm: a binary .jsonl", lambda w: data.read_benchmark(w("v.jsonl", BINARY)),
        Raises(ConfigError, r"v\.jsonl, line 1: a NUL byte \(byte 0\)")),
    Row("table: a binary .jsonl", lambda w: data.read_latency_table(w("t.jsonl", BINARY)),
        Raises(ConfigError, r"t\.jsonl.*a NUL byte")),
    Row("prefix: a binary .jsonl", lambda w: data.load_block_hashes(w("h.jsonl", BINARY)),
        Raises(ConfigError, r"h\.jsonl, line 1: not a JSON object")),
    Row("trace: a JSON-lines file of null (pyarrow 26 segfaults on it)",
        lambda w: data.load_trace(w("t.jsonl", "null\n")),
        Raises(ConfigError, r"t\.jsonl, line 1: not a JSON object \(starts 'null'\)")),
    # found with a hostile JSON-lines log: an object holding a list nested 20,000 deep crashed
    # the process in pyarrow's JSON reader (segmentation fault)
    Row("trace: a JSON line nested 20,000 deep (pyarrow segfaults on it)",
        lambda w: data.load_trace(w("t.jsonl", '{"timestamp": 1}\n{"a": ' + "[" * 20_000
                                    + "]" * 20_000 + "}\n"), time_unit="s"),
        Raises(ConfigError, r"t\.jsonl, line 2: JSON nested 20,001 deep; capnb reads JSON nested "
                            r"at most 1,000 deep")),
    # found with the same hostile files given to the other readers: json.loads ended in Python's
    # RecursionError ("maximum recursion depth exceeded while decoding a JSON array")
    Row("trace: a JSON-lines file of a list nested 100,000 deep",
        lambda w: data.load_trace(w("t.jsonl", DEEP + "\n")),
        Raises(ConfigError, r"t\.jsonl, line 1: JSON nested too deeply")),
    Row("traffic: a JSON-lines file of a list nested 100,000 deep",
        lambda w: data.load_traffic(w("t.jsonl", DEEP + "\n")),
        Raises(ConfigError, r"t\.jsonl, line 1: JSON nested too deeply")),
    Row("vllm: a result nested 100,000 deep", lambda w: data.read_benchmark(w("v.json", DEEP)),
        Raises(ConfigError, r"v\.json: JSON nested too deeply")),
    Row("table: JSON lines nested 100,000 deep",
        lambda w: data.read_latency_table(w("t.jsonl", DEEP + "\n")),
        Raises(ConfigError, r"t\.jsonl, line 1: JSON nested too deeply")),
    Row("prefix: a null line among the requests",
        lambda w: data.load_block_hashes(w("h.jsonl", '{"input_length": 1, "hash_ids": [1]}\nnull\n')),
        Raises(ConfigError, r"h\.jsonl, line 2: not a JSON object")),
    Row("trace: a NUL byte in the path", lambda _: data.load_trace("a\x00b.csv"),
        Raises(ConfigError, r"trace 'a\\x00b\.csv': a path cannot hold a NUL byte")),
    Row("model: a NUL byte in the path", lambda _: data.load_model("a\x00b/config.json"),
        Raises(ConfigError, r"model 'a\\x00b/config\.json': a path cannot hold a NUL byte")),
]  # fmt: skip


def test_the_table_covers_every_loader_and_step():
    assert len(ROWS) >= 40
    assert len({row.what for row in ROWS}) == len(ROWS)
    covered = {row.what.split(":")[0] for row in ROWS}
    assert {"trace", "rates", "table", "vllm", "aiperf", "model", "gpu", "memory", "capacity",
            "elasticity", "forecast", "coldstart", "config", "traffic"} <= covered  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[row.what for row in ROWS])
def test_bad_input(row, tmp_path):
    def write(name, content):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    expect = row.expect
    if isinstance(expect, Raises):
        with pytest.raises(CapnbError) as caught:
            row.call(write)
        assert type(caught.value) is expect.error, f"{type(caught.value).__name__}: {caught.value}"
        assert re.search(expect.match, str(caught.value)), str(caught.value)
    elif isinstance(expect, Corrects):
        with pytest.warns(expect.warning, match=expect.match):
            result = row.call(write)
        assert expect.check(result)
    else:
        answer = expect.answer(row.call(write))
        assert re.search(expect.match, answer), answer

"""Anyone's input, generated: a result or a capnb error that names the culprit, within a time budget.

hypothesis writes plan configs from the schema (every field, in its table or at the top level, with
values of the right kind, nearly right and wrong: huge and negative numbers, NaN, control
characters, lists, nested tables, YAML anchors and merge keys), config files in other encodings,
and files of arbitrary and half-structured bytes for every reader. Each call must return a result
or raise a :class:`capnb.errors.CapnbError` whose message names the file (or the field of a
mapping); any other exception fails the test, and so does an example that takes longer than its
deadline (a loader that runs away with a size: the budgets of issue 31).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capnb import data, plan
from capnb.data import TraceWarning
from capnb.errors import CapnbError
from capnb.plan._config import SECTIONS

#: Each example's budget: far above what a good input takes (milliseconds), far below a hang.
BUDGET = settings(
    max_examples=60,
    deadline=datetime.timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

FIELDS = [name for names in SECTIONS.values() for name in names]
SECTION_OF = {name: section for section, names in SECTIONS.items() for name in names}

scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 7, 2**31, 10**12, 0.5, 0.99, 1.5, 1e-9, 1e300]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["", "estimate", "none", "auto", "H100-SXM", "Llama-3.1-8B", "a\x00b",
                     "line\nbreak", "</script>", "../../etc/passwd", "servegen-m-small"]),
)  # fmt: skip
values = st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(st.text(max_size=4),
                                                                           scalars, max_size=2))  # fmt: skip


@st.composite
def settings_mapping(draw):
    """A config as a mapping: fields at the top level or in their table (sometimes the wrong one)."""
    chosen = draw(st.lists(st.sampled_from([*FIELDS, "unknown_field"]), max_size=6, unique=True))
    out: dict = {}
    for name in chosen:
        value = draw(values)
        where = draw(st.sampled_from(["top", "table", "other table"]))
        if where == "top" or name not in SECTION_OF:
            out[name] = value
        else:
            table = SECTION_OF[name] if where == "table" else draw(st.sampled_from(list(SECTIONS)))
            if not isinstance(out.setdefault(table, {}), dict):
                continue  # a field named as its table (sla) already holds a value at the top level
            out[table][name] = value
    return out


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(
            value) else repr(value)  # fmt: skip
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: \\u escapes as JSON writes them
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def _toml(mapping: dict) -> str:
    tables = {k: v for k, v in mapping.items() if k in SECTIONS and isinstance(v, dict)}
    top = [f"{k} = {_toml_value(v)}" for k, v in mapping.items() if k not in tables]
    tables = [f"[{k}]\n" + "\n".join(f"{json.dumps(n)} = {_toml_value(v)}" for n, v in v.items())
              for k, v in tables.items()]  # fmt: skip
    return "\n".join(top + tables) + "\n"


def _yaml(mapping: dict, anchors: bool) -> str:
    import yaml

    text = yaml.safe_dump(mapping, allow_unicode=True)
    if anchors and ":" in text:  # an anchor on the first mapping, merged into a later one
        first, _, rest = text.partition("\n")
        text = f"{first} &first\n{rest}x: {{<<: *first}}\n" if first.endswith(":") else text
    return text


@contextlib.contextmanager
def a_file(name: str, content: str | bytes):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        yield path


def names_the_culprit(call, culprit: str):
    """The call's result, or None for a capnb error whose message holds ``culprit``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        warnings.simplefilter("ignore", plan.PlanWarning)
        try:
            return call()
        except CapnbError as error:
            assert culprit in str(error), f"{culprit!r} not named in: {error}"
            return None


# -- the plan config ----------------------------------------------------------------------------
@BUDGET
@given(settings_mapping(), st.sampled_from(["p.toml", "p.yaml"]), st.booleans(),
       st.sampled_from(["utf-8", "utf-8", "utf-16", "latin-1"]))  # fmt: skip
def test_a_config_file_loads_or_names_itself(mapping, name, anchors, encoding):
    text = _toml(mapping) if name.endswith(".toml") else _yaml(mapping, anchors)
    try:
        content = text.encode(encoding)
    except UnicodeEncodeError:
        content = text.encode("utf-8")
    with a_file(name, content) as path:
        config = names_the_culprit(lambda: plan.load_config(path), name)
    if config is not None:
        assert isinstance(config, plan.PlanConfig)


@BUDGET
@given(settings_mapping())
def test_a_config_mapping_gives_a_config_or_names_the_field(mapping):
    def load():
        return plan.read_config(mapping)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)
        try:
            config = load()
        except CapnbError as error:
            named = [n for n in [*FIELDS, *SECTIONS, "unknown_field", "no settings"]
                     if n in str(error)]  # fmt: skip
            assert named, f"no field named in: {error}"
            return
    assert isinstance(config, plan.PlanConfig)


# -- every reader -------------------------------------------------------------------------------
READERS = {
    "trace.csv": lambda p: data.load_trace(p),
    "trace.jsonl": lambda p: data.load_trace(p),
    "trace.parquet": lambda p: data.load_trace(p),
    "trace.csv.gz": lambda p: data.load_trace(p, time_unit="s"),
    "traffic.csv": lambda p: data.load_traffic(p),
    "traffic.jsonl": lambda p: data.load_traffic(p, kind="requests"),
    "rates.csv": lambda p: data.load_rate_series(p, time_column="t", rate_column="qps"),
    "table.csv": lambda p: data.read_latency_table(p),
    "table.jsonl": lambda p: data.read_latency_table(p),
    "bench.json": lambda p: data.read_benchmark(p),
    "bench.jsonl": lambda p: data.read_vllm_bench(p),
    "profile_export_aiperf.csv": lambda p: data.read_aiperf({4: p}),
    "profile_export_aiperf_sweep.csv": lambda p: data.read_aiperf(p),
    "config.json": lambda p: data.load_model(p),
    "hashes.jsonl": lambda p: data.load_block_hashes(p),
    "prices.csv": lambda p: data.load_gpu_prices(p),
    "plan.toml": lambda p: plan.load_config(p),
    "plan.yaml": lambda p: plan.load_config(p),
}

json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=6)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["timestamp", "qps", "t", "concurrency", "hash_ids", "input_length",
                         "output_length", "completed", "request_throughput", "hidden_size",
                         "num_hidden_layers", "model_id", "e2e_p99_ms", "gpu"]), inner, max_size=4),
    max_leaves=8,
)  # fmt: skip
contents = st.one_of(
    st.binary(max_size=200),
    st.lists(json_like, max_size=4).map(lambda rows: "\n".join(json.dumps(r) for r in rows)),
    st.lists(st.lists(st.one_of(st.text(alphabet="0123456789.,-:eT nai\"", max_size=10),
                                st.sampled_from(["timestamp", "qps", "t", "concurrency",
                                                 "e2e_p99_ms", "Metric", "gpu", "provider"])),
                      min_size=1, max_size=4), max_size=5)
      .map(lambda rows: "\n".join(",".join(r) for r in rows) + "\n"),
)  # fmt: skip


@BUDGET
@given(st.sampled_from(sorted(READERS)), contents)
def test_every_reader_reads_or_names_the_file(name, content):
    with a_file(name, content) as path:
        names_the_culprit(lambda: READERS[name](path), name.split(".")[0])


@pytest.mark.parametrize("name", sorted(READERS))
def test_every_reader_names_a_folder_a_loop_and_a_nul_byte(name, tmp_path):
    folder = tmp_path / name
    folder.mkdir()
    names_the_culprit(lambda: READERS[name](folder), name)
    loop = tmp_path / "loop" / name
    loop.parent.mkdir()
    loop.symlink_to(loop.name)  # a link to itself
    names_the_culprit(lambda: READERS[name](loop), name)
    with pytest.raises(CapnbError, match="NUL byte"):
        READERS[name](str(tmp_path / f"a\x00{name}"))


def test_a_header_whose_quoted_name_pyarrow_splits_otherwise_names_the_file(tmp_path):
    # found by the fuzz test: a header cell with commas inside quotes was split by capnb's sniff
    # and pyarrow differently, and pyarrow's ArrowKeyError ('Column ... does not exist') escaped
    path = tmp_path / "traffic.csv"
    path.write_text('{"timestamp": [], "qps": []}\nnull')
    with pytest.raises(CapnbError, match="traffic.csv"):
        data.load_traffic(path)

"""Latency measurements: readers of users' benchmark files (the bundled ones are in :mod:`._measurements`).

Readers return a latency curve (see :mod:`capnb._curve`): a Dataset over ``concurrency``,
``metric`` and ``latency_quantile`` in seconds, with the workload and every correction in its attrs.

- :func:`read_latency_table`: a plain table (CSV, Parquet, JSON lines or a DataFrame) with one row
  per concurrency and columns such as ``e2e_p99_ms``.
- :func:`read_vllm_bench`: the JSON results of ``vllm bench serve`` (and of SGLang's
  ``bench_serving``, which writes the same keys but ``*_e2e_latency_ms`` for ``*_e2el_ms``), one
  file per run, a file of appended runs (one JSON object a line), or those results flattened to
  CSV.
- :func:`read_aiperf`: NVIDIA AIPerf and GenAI-Perf CSV exports (one run per file, AIPerf's sweep
  file, GenAI-Perf's ``analyze`` summary).
- :func:`read_guidellm`: a GuideLLM report (``guidellm benchmark --output-path benchmarks.json``),
  one benchmark per strategy.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError, InputError
from . import _curve
from ._files import decode_text, json_error_at, parse_json, read_csv_frame, user_path

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import xarray as xr

__all__ = [
    "read_aiperf",
    "read_bench_runs",
    "read_guidellm",
    "read_latency_table",
    "read_vllm_bench",
]

_STAT = re.compile(r"^(mean|avg|median|p\d+(?:\.\d+)?)$")
_METRIC_ALIASES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e", "e2el": "e2e"}


def _quantile_of(stat: str) -> float | None:
    """``median`` -> 0.5, ``p99`` -> 0.99, ``p99.9`` -> 0.999; ``mean``/``avg`` -> None."""
    if stat in ("mean", "avg"):
        return None
    if stat == "median":
        return 0.5
    return float(stat[1:]) / 100.0


def _derive_mean_e2e(concurrency, mean, latency, output_tokens, qps, notes) -> None:
    """Fill ``mean['e2e']`` when the source lacks it; Little's law needs it. Say how."""
    if "e2e" in mean:
        return
    if "ttft" in mean and "tpot" in mean and output_tokens is not None:
        mean["e2e"] = _e2e_of_tokens(mean, output_tokens)
        notes.append(
            "mean e2e latency derived as mean TTFT + mean TPOT x (mean output tokens - 1) (exact "
            "when every request has the same output length)"
        )
    elif qps is not None and np.isfinite(qps).all() and (np.asarray(qps) > 0).all():
        mean["e2e"] = np.asarray(concurrency, dtype=float) / np.asarray(qps, dtype=float)
        notes.append(
            "mean e2e latency derived by Little's law from the measured throughput: concurrency / "
            "requests per second (exact for a closed loop in steady state)"
        )
    else:
        notes.append("no mean e2e latency: Little's law cannot give a per-instance throughput")


def _check_table_loops(name, concurrency, mean, output_tokens, qps, qps_name) -> None:
    """Each row of a table is a closed loop: its mean e2e and its measured throughput agree.

    The mean e2e is the table's own, or mean TTFT + mean TPOT x (output tokens - 1) where the
    table gives output tokens (without them there is nothing to hold the throughput to).
    """
    if "e2e" in mean:
        e2e = np.asarray(mean["e2e"], dtype=float)
    elif output_tokens is not None:
        e2e = np.asarray(_e2e_of_tokens(mean, output_tokens), dtype=float)
    else:
        return
    e2e = np.broadcast_to(e2e, np.shape(concurrency))
    names = (
        "concurrency",
        qps_name,
        "each latency column's unit is its name's last part",
        "its mean e2e column, or mean TTFT + mean TPOT x (output tokens - 1)",
    )
    for i, (limit, rate, seconds) in enumerate(zip(concurrency, qps, e2e, strict=True)):
        # a concurrency that is not a whole number >= 1 is the curve's to refuse, by its row
        if limit >= 1 and limit == int(limit) and math.isfinite(rate) and math.isfinite(seconds):
            _check_closed_loop(f"{name}, row {i + 2}", int(limit), rate, None, seconds, names)


def _e2e_of_tokens(mean, output_tokens):
    """Mean e2e (s) from mean TTFT + mean TPOT x (mean output tokens - 1), scalars or arrays."""
    out = np.asarray(output_tokens, dtype=float)
    return np.asarray(mean["ttft"]) + np.asarray(mean["tpot"]) * np.maximum(out - 1, 0)


# -- a plain table -------------------------------------------------------------------------------
def read_latency_table(
    source,
    *,
    units: str | None = None,
    prompt_tokens: float | None = None,
    output_tokens: float | None = None,
    **attrs: object,
) -> xr.Dataset:
    """Read a latency-concurrency table: one row per concurrency.

    Parameters
    ----------
    source
        A path (``.csv``, ``.parquet``, ``.json``/``.jsonl`` with one record per line) or a pandas
        DataFrame.
    units
        Time unit of latency columns whose name carries none (``"s"``, ``"ms"``, ``"us"``,
        ``"ns"``). A column may carry its own: ``e2e_p99_ms``.
    prompt_tokens, output_tokens
        Mean tokens per request of the workload measured (or columns of the same names).
    **attrs
        Stored on the curve: ``model``, ``gpu``, ``tensor_parallel``, ``engine`` ...

    Returns
    -------
    xarray.Dataset
        The curve: ``latency`` (s) over ``concurrency``, ``metric`` and ``latency_quantile``,
        ``mean_latency`` (s) and ``measured_qps`` (requests/s) where the runs report them.

    Notes
    -----
    Columns: ``concurrency`` (required); latency columns ``<metric>_<stat>[_<unit>]`` with metric
    ``ttft``, ``tpot``, ``itl`` or ``e2e`` (``e2el`` accepted) and stat ``mean``, ``median`` or
    ``pNN`` (``p50``, ``p99``, ``p99.9``); ``qps`` or ``request_throughput`` (requests/s); other
    columns are ignored (and listed in the curve's notes).

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"concurrency": [1, 8, 32], "e2e_p50_ms": [900, 1100, 1900],
    ...                       "e2e_p99_ms": [1200, 1600, 3100], "e2e_mean_ms": [950, 1150, 2000]})
    >>> float(read_latency_table(table).latency.sel(metric="e2e", latency_quantile=0.99)[-1])
    3.1
    """
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        frame, name = source, "table"
    elif not isinstance(source, str | os.PathLike):
        raise InputError(
            f"source must be a path or a pandas DataFrame, got {type(source).__name__}"
        )
    else:
        path = user_path(source, "latency table")
        name = str(path)
        if not path.is_file():
            raise ConfigError(f"{path}: no such file")
        frame = _read_frame(path)
    columns = {str(c).strip().lower(): c for c in frame.columns}
    if "concurrency" not in columns:
        raise ConfigError(f"{name}: no 'concurrency' column (columns: {list(frame.columns)})")
    if units is not None:
        _curve.to_seconds(1.0, units, f"{name}: units")
    latency, mean, ignored = {}, {}, []
    from_column: dict[tuple, str] = {}  # (metric, statistic) -> the column that gave it
    for key, column in columns.items():
        if key in ("concurrency", "qps", "request_throughput", "prompt_tokens", "output_tokens"):
            continue
        parts = key.split("_")
        if parts[0] not in _METRIC_ALIASES:
            ignored.append(str(column))
            continue
        metric = _METRIC_ALIASES[parts[0]]
        if len(parts) == 3:
            stat, unit = parts[1], parts[2]
        elif len(parts) == 2:
            stat, unit = parts[1], units
            if unit is None:
                why = f"{name}: column {column!r} has no time unit; name it {key}_ms (or _s)"
                raise ConfigError(
                    why + ", or pass units='ms'",
                    plan=why + " in the file (a plan reads a table's units from its column names)",
                )
        else:
            raise ConfigError(
                f"{name}: cannot read column {column!r}; expected <metric>_<stat>_<unit>"
            )
        if not _STAT.match(stat):
            raise ConfigError(
                f"{name}: column {column!r}: statistic {stat!r} is not mean, median or pNN"
            )
        values = _curve.to_seconds(_numbers(frame, column, name), unit, f"{name}: {column}")
        q = _quantile_of(stat)
        if q is not None and not 0.0 < q < 1.0:
            raise ConfigError(
                f"{name}: column {column!r}: {stat!r} is not a percentile between p0 and p100"
            )
        if (metric, q) in from_column:
            raise ConfigError(
                f"{name}: columns {from_column[(metric, q)]!r} and {column!r} both give {metric} "
                f"{stat}; keep one"
            )
        from_column[(metric, q)] = str(column)
        if q is None:
            mean[metric] = values
        else:
            latency[(metric, q)] = values
    if not latency and not mean:
        raise ConfigError(_no_latency_column(name, ignored))
    qps_column = columns.get("qps", columns.get("request_throughput"))
    qps = None if qps_column is None else _numbers(frame, qps_column, name)
    workload = {}
    for field, given in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if given is not None:
            workload[field] = _curve.tokens(given, field, name)
        elif field in columns:
            # pandas' mean: empty cells skipped, and NaN (no warning) for a table without rows
            workload[field] = float(pd.Series(_numbers(frame, columns[field], name)).mean())
    notes = [f"ignored columns: {', '.join(ignored)}"] if ignored else []
    per_row_output = (
        _numbers(frame, columns["output_tokens"], name)
        if "output_tokens" in columns
        else workload.get("output_tokens")
    )
    concurrency = _numbers(frame, columns["concurrency"], name)
    if np.isnan(concurrency).any():  # an empty cell (it read as "got nan" in the curve)
        i = int(np.flatnonzero(np.isnan(concurrency))[0])
        raise ConfigError(f"{name}: column {columns['concurrency']!r} is empty at row {i + 2}; "
                          "every row needs its requests in flight")  # fmt: skip
    if qps is not None and ("e2e" in mean or ("ttft" in mean and "tpot" in mean)):
        _check_table_loops(name, concurrency, mean, per_row_output, qps, str(qps_column))
    _derive_mean_e2e(concurrency, mean, latency, per_row_output, qps, notes)
    return _curve.build(
        concurrency,
        latency,
        mean=mean,
        measured_qps=qps,
        rows=[f"row {i + 2}" for i in range(len(frame))],  # +2: the header is line 1
        source=name,
        attrs={**workload, **attrs},
        notes=notes,
    )


def _no_latency_column(name: str, ignored: list[str]) -> str:
    """Why a table without a latency column capnb recognises is refused, and how to name one."""
    example = "rename 'P99 latency (ms)' to e2e_p99_ms"
    for column in ignored:  # the first that reads as a latency statistic: "P99 Latency (ms)"
        words = re.findall(r"[a-z]+\d*(?:\.\d+)?", column.lower())
        stat = next((w for w in words if _STAT.match(w)), None)
        metric = next((_METRIC_ALIASES[w] for w in words if w in _METRIC_ALIASES), None)
        unit = next((w for w in words if w in _curve.UNITS), None)
        if stat is None or (metric is None and unit is None and "latency" not in words):
            continue
        stat = "mean" if stat == "avg" else stat
        example = f"rename {column!r} to {metric or 'e2e'}_{stat}_{unit or 'ms'}"
        break
    listed = ", ".join(repr(c) for c in ignored) if ignored else "none"
    return (
        f"{name}: no latency column capnb recognises (columns it ignored: {listed}); a latency "
        "column is named <metric>_<stat>_<unit>: metric ttft, tpot, itl or e2e, stat mean, "
        f"median or pNN, unit s, ms, us or ns (e.g. {example})"
    )


def _read_frame(path: Path) -> pd.DataFrame:
    """A table file as a DataFrame; a file pandas cannot parse is an error naming it."""
    import pandas as pd

    suffix = path.suffix.lower()
    readers = {
        ".csv": read_csv_frame,
        ".parquet": pd.read_parquet,
        ".json": _json_lines_frame,
        ".jsonl": _json_lines_frame,
    }
    if suffix not in readers:
        raise ConfigError(f"{path}: read_latency_table reads .csv, .parquet or .jsonl files")
    try:
        return readers[suffix](path)
    except ConfigError:  # a value past the header's columns, its line named
        raise
    except (ValueError, TypeError, OSError) as err:
        # pandas' EmptyDataError and ParserError, a truncated JSON line or lines that mix objects
        # and arrays, pyarrow's ArrowInvalid for a file that is not Parquet, bytes that are not
        # UTF-8 (UnicodeDecodeError is a ValueError)
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"{path}: cannot be read as a {suffix[1:]} table ({first})") from None


def _json_lines_frame(path: Path) -> pd.DataFrame:
    """One JSON object per line (blank lines skipped) as rows; anything else names its line."""
    import pandas as pd

    records = []
    for number, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = parse_json(line, f"{path.name}, line {number}")
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}, line {number}: not valid JSON ({err.msg})") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{path}, line {number}: not a JSON object (one row per line)")
        records.append(record)
    return pd.DataFrame.from_records(records)


def _numbers(frame: pd.DataFrame, column, name: str) -> np.ndarray:
    """A column as float64 (empty cells NaN); text that is not a number names its row."""
    import pandas as pd

    values = frame[column]
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(numbers) & values.notna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ConfigError(
            f"{name}: column {column!r} holds {values.iloc[i]!r} at row {i + 2}, not a number"
        )
    return numbers


# -- vllm bench serve ----------------------------------------------------------------------------
# vLLM writes end-to-end latency as `*_e2el_ms`, SGLang's bench_serving as `*_e2e_latency_ms`
_VLLM_METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e", "e2e_latency": "e2e"}
_VLLM_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|e2e_latency)_ms$")
# A closed loop (request_rate inf, max_concurrency C, at least C prompts) holds C requests in
# flight until its queue empties, then drains: its measured mean in flight, L = request_throughput
# x mean e2e, is C / (1 + C x drain / (prompts x mean e2e)), so C / L is 1 + C / prompts for a
# drain of one mean request (fixed output lengths), at most 2 with at least C prompts. Longer
# tails, a mean e2e derived from TTFT and TPOT, and client overhead move it a little (the bundled
# vLLM runs: 0.96-1.25). Seconds written into `*_ms` fields put it 1000x off, a run that never
# held C requests C / L off. C / L beyond this factor, either way, is an error.
_CLOSED_LOOP_TOLERANCE = 2.0


#: Largest benchmark file read whole (``--save-detailed`` results of long runs reach tens of MB).
MAX_BENCHMARK_BYTES = 512 * 2**20


def _text(path: Path, encoding: str = "utf-8") -> str:
    """A benchmark file's text: UTF-8 (a byte-order mark allowed), within the size budget."""
    size = path.stat().st_size
    if size > MAX_BENCHMARK_BYTES:
        raise ConfigError(
            f"{path}: {size:,} bytes; capnb reads benchmark files of at most "
            f"{MAX_BENCHMARK_BYTES:,} bytes (split the runs into one file each)"
        )
    return decode_text(path.read_bytes(), path)


def _result_files(folder: Path) -> list[Path]:
    """The .json/.jsonl files in a folder: files only (a sub-folder named x.json is no result)."""
    found = []
    for path in sorted(folder.glob("*.json")) + sorted(folder.glob("*.jsonl")):
        path = user_path(path, "benchmark file")  # a symbolic-link loop is an error naming it
        if path.is_file():
            found.append(path)
    return found


def _no_unread_exports(folder: Path) -> None:
    """A folder of JSON results that also holds CSV benchmark files is an error naming them.

    A folder is read for its .json / .jsonl results; an AIPerf or GenAI-Perf export, flattened
    vllm bench results or a latency table beside them would be left out without a word (the
    curve, plan or calibration made without a run put there). CSV files of no benchmark form
    (notes, a server log) stay where they are.
    """
    unread = []
    for path in sorted(folder.glob("*.csv")):
        if not path.is_file():
            continue
        try:
            kind = benchmark_format(path)
        except ConfigError:  # no benchmark file: not one capnb would read
            continue
        unread.append(f"{path.name} ({FORMAT_WORDS[kind]})")
    if unread:
        shown = ", ".join(unread[:3]) + (
            f" and {len(unread) - 3:,} more" if len(unread) > 3 else ""
        )
        raise ConfigError(
            f"{folder}: besides its .json / .jsonl results it holds {shown}, not read with them "
            "(a folder is read for its JSON results only): move them out, or read them on their "
            "own (read_benchmark(file), read_aiperf({concurrency: path, ...}))"
        )


def _paths(paths, argument: str) -> list:
    """One path or an iterable of paths, as a list; anything else is an error naming ``argument``."""
    if isinstance(paths, str | os.PathLike):
        return [paths]
    if isinstance(paths, Iterable) and not isinstance(paths, bytes | Mapping):
        listed = list(paths)
        if all(isinstance(p, str | os.PathLike) for p in listed):
            return listed
    raise InputError(f"{argument} must be a path or a list of paths, got {paths!r}")


def _records(paths) -> list[tuple[str, dict]]:
    """(label, record) for every run in the given files, directories or flattened CSVs."""
    paths = _paths(paths, "paths")
    files: list[Path] = []
    for entry in paths:
        path = user_path(entry, "benchmark path")
        if path.is_dir():
            found = _result_files(path)
            if not found:
                raise ConfigError(f"{path}: no .json or .jsonl result files in this directory")
            _no_unread_exports(path)
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"{path}: no such file or directory")
    records = []
    for path in files:
        text = _text(path)
        if path.suffix.lower() == ".csv":
            _flattened_results(path)
            for i, row in enumerate(csv.DictReader(io.StringIO(text))):
                records.append((f"{path.name} row {i + 2}", _CsvRow(row)))
            continue
        records += _json_documents(path, text)
    if not records:
        raise ConfigError("read_vllm_bench: no result files given")
    return records


class _CsvRow(dict):
    """A result flattened to a CSV row: its figures are text, as CSV writes every cell."""


def _flattened_results(path: Path) -> None:
    """A CSV given as results must be vllm bench results flattened to CSV: else say what it is.

    An AIPerf or GenAI-Perf export or a latency table, read row by row as results, was refused
    as "not a vllm bench serve result" with the advice for JSON files in a folder.
    """
    header = [h.strip() for h in _first_line(path).split(",")]
    if "completed" in header or any(map(_VLLM_KEY.match, header)):
        return  # (SGLang's flattened results have a concurrency column, as a table does)
    kind = benchmark_format(path)
    if kind != "vllm":
        raise ConfigError(
            f"{path}: {FORMAT_WORDS[kind]}, not vllm bench serve / SGLang bench_serving results "
            "(JSON, or flattened to CSV) or a GuideLLM report, the runs read_vllm_bench and "
            "read_bench_runs (calibration_runs, --calibrate) read; read it as a curve with "
            "read_benchmark(path, model=..., gpu=..., tensor_parallel=...) (--benchmark), which "
            "capnb.latency.calibrate also takes, at its concurrencies"
        )


def _json_documents(path: Path, text: str) -> list[tuple[str, object]]:
    """(label, document) for a ``.json``/``.jsonl`` file: one document, or one per line.

    A line is named by its number in the file (blank lines count), in labels and in errors.
    """
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if path.suffix.lower() == ".jsonl" or _one_per_line([line for _, line in numbered]):
        documents = []
        for n, line in numbered:
            try:
                documents.append(
                    (f"{path.name} line {n}", parse_json(line, f"{path.name}, line {n}"))
                )
            except json.JSONDecodeError as err:  # (its line is 1: the line was parsed alone)
                raise ConfigError(
                    f"{path}: not valid JSON ({err.msg} at line {n}, column {err.colno})"
                ) from None
        return documents
    try:
        return [(path.name, parse_json(text, path.name))]
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({json_error_at(err)})") from None


def _one_per_line(lines: list[str]) -> bool:
    # --append-result writes one JSON object per line into the same file (with a .json suffix)
    return len(lines) > 1 and all(line.lstrip().startswith("{") for line in lines)


_READS = (
    "capnb reads vllm bench serve / SGLang bench_serving result JSON, AIPerf / GenAI-Perf CSV "
    "exports, or a latency table"
)
_LLMPERF = (
    "capnb does not read LLMPerf's format: write its summaries' figures into a table, one row "
    "per num_concurrent_requests (columns concurrency, ttft_p99_s, e2e_p99_s, e2e_mean_s, qps), "
    "and read that (read_latency_table, or --benchmark table.csv)"
)
_GENAI_PERF_KEYS = ("request_throughput", "request_latency", "time_to_first_token")


def _check_result_json(record: object, where: str) -> None:
    """A JSON document that is no vLLM or SGLang result is an error saying what it is."""
    if not isinstance(record, Mapping):
        if isinstance(record, list) and any(
            isinstance(r, Mapping) and ("ttft_s" in r or "end_to_end_latency_s" in r)
            for r in record
        ):
            raise ConfigError(
                f"{where}: an LLMPerf per-request file (individual_responses: ttft_s, "
                f"end_to_end_latency_s, ...), not a vllm bench serve result; {_LLMPERF}"
            )
        kind = "list" if isinstance(record, list) else type(record).__name__
        raise ConfigError(
            f"{where}: not a vllm bench serve or SGLang bench_serving result (a JSON {kind}, "
            f"where a result is one JSON object); {_READS}: move other JSON files (a "
            "summary table, ...) out of the folder"
        )
    keys = [str(k) for k in record]
    if _is_guidellm(record):
        raise ConfigError(
            f"{where}: a GuideLLM report, not a vllm bench serve result; a folder of measured "
            "latencies holds one report, or vllm bench results: give a report file itself "
            "(--benchmark, latency =; read_benchmark or read_guidellm), or read its runs with "
            "read_bench_runs (--calibrate)"
        )
    if "input_config" in record or any(
        isinstance(record.get(k), Mapping) for k in _GENAI_PERF_KEYS
    ):
        raise ConfigError(
            f"{where}: a GenAI-Perf / AIPerf JSON export, not a vllm bench serve result; capnb "
            "reads their CSV exports instead: pass GenAI-Perf's analyze_export_genai_perf.csv "
            "(genai-perf analyze, one row per concurrency) or AIPerf's "
            "profile_export_aiperf_sweep.csv to read_benchmark / --benchmark, or each run's "
            "profile_export_genai_perf.csv with its concurrency to "
            "read_aiperf({concurrency: path, ...})"
        )
    if any(k.startswith("results_") for k in keys) or "num_concurrent_requests" in record:
        raise ConfigError(
            f"{where}: an LLMPerf summary (results_* keys), not a vllm bench serve result; "
            f"{_LLMPERF}"
        )
    if "completed" in record or "request_throughput" in record or any(map(_VLLM_KEY.match, keys)):
        ramp = record.get("ramp_up_strategy")
        if ramp is not None:  # its request_rate is written "inf": it would read as a closed loop
            raise ConfigError(
                f"{where}: 'ramp_up_strategy' is {ramp!r} (--ramp-up-strategy, from "
                f"{record.get('ramp_up_start_rps')!r} to {record.get('ramp_up_end_rps')!r} "
                "requests/s): its load climbed during the run, so its latencies are of no one "
                "concurrency or request rate; capnb reads runs at a fixed --request-rate or "
                "--max-concurrency: move it out of the files given"
            )
        _check_run_fields(record, where)
        return
    shown = ", ".join(keys[:8]) + (", ..." if len(keys) > 8 else "") if keys else "none"
    raise ConfigError(
        f"{where}: not a vllm bench serve or SGLang bench_serving result (no 'completed', "
        f"'request_throughput' or '<stat>_<metric>_ms' latency key; its keys: {shown}); "
        f"{_READS}: move other JSON files (server_config.json, ...) out of the folder"
    )


def _check_run_fields(record: Mapping, where: str) -> None:
    """A result's request_rate, num_prompts and model_id, where written, are what vLLM writes.

    A request_rate of 0, -1 or NaN was read as a run at a finite rate, a num_prompts of -1 or
    infinity was ignored, and a model_id of -1 was taken as no model_id.
    """
    rate = _number(record, "request_rate", where, required=False)
    if rate is not None and not rate > 0:
        raise ConfigError(
            f"{where}: 'request_rate' is {rate:g}, not a rate of requests/s > 0 (\"inf\": every "
            "prompt sent at once)"
        )
    prompts = _number(record, "num_prompts", where, required=False)
    if prompts is not None and not (
        math.isfinite(prompts) and prompts >= 1 and prompts == round(prompts)
    ):
        raise ConfigError(
            f"{where}: 'num_prompts' is {prompts:g}, not a whole number of requests >= 1"
        )
    model = record.get("model_id")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{where}: 'model_id' is {model!r}, not a model's name (text)")


def _number(record: Mapping, key: str, where: str, *, required: bool = True) -> float | None:
    value = record.get(key)
    if value is None or value == "":
        if required:
            raise ConfigError(f"{where}: missing field {key!r}")
        return None
    if isinstance(value, str) and value.strip().lower() == "inf":
        return math.inf
    if isinstance(value, str | bool) and not isinstance(record, _CsvRow):
        raise ConfigError(
            f"{where}: field {key!r} is not a number ({value!r}): a result's figures are JSON "
            "numbers, not text"
        )
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: field {key!r} is not a number ({value!r})") from None


def _detailed(record: Mapping, where: str) -> dict | None:
    """Per-request values from ``--save-detailed`` lists, keeping only requests that produced output.

    vLLM's ``benchmark_serving.py`` saves one entry per request in ``ttfts``, ``itls``,
    ``output_lens``, ``errors`` (and ``input_lens``); a failed request has a non-empty error and
    output length 0. Older versions also record requests that returned no token with an empty
    error and count them in ``completed`` (and so in ``request_throughput``): both kinds are left
    out here, of the percentiles, of the throughput and of the workload lengths.
    """
    needed = ("ttfts", "itls", "output_lens")
    if not all(isinstance(record.get(k), list) for k in needed):
        return None
    ttfts, itls, outs = record["ttfts"], record["itls"], record["output_lens"]
    errors = record.get("errors") or [""] * len(ttfts)
    latencies = record.get("latencies")
    inputs = record.get("input_lens")
    if not len(ttfts) == len(itls) == len(outs) == len(errors):
        raise ConfigError(f"{where}: per-request lists have different lengths")
    if isinstance(inputs, list) and len(inputs) != len(ttfts):
        raise ConfigError(f"{where}: 'input_lens' has {len(inputs)} entries, 'ttfts' {len(ttfts)}")
    for i, out in enumerate(outs):
        if isinstance(out, bool) or not isinstance(out, int | float) or not out >= 0:
            raise ConfigError(f"{where}: output_lens[{i}] is not a token count ({out!r})")
    for i, count in enumerate(inputs if isinstance(inputs, list) else []):
        if isinstance(count, bool) or not isinstance(count, int | float) or not count >= 0:
            raise ConfigError(f"{where}: input_lens[{i}] is not a token count ({count!r})")
    _latencies(ttfts, "ttfts", where, errors)
    if isinstance(latencies, list) and len(latencies) == len(ttfts):
        _latencies(latencies, "latencies", where, errors)
    for i, gaps in enumerate(itls):
        if errors[i]:
            continue
        if not isinstance(gaps, list):
            raise ConfigError(f"{where}: itls[{i}] is not a list of gaps in seconds ({gaps!r})")
        for j, gap in enumerate(gaps):
            if not _seconds(gap):
                raise ConfigError(f"{where}: itls[{i}][{j}] is not a latency in seconds ({gap!r})")
    failed = [i for i in range(len(ttfts)) if errors[i]]
    empty = [i for i in range(len(ttfts)) if not errors[i] and outs[i] == 0]
    ok = [i for i in range(len(ttfts)) if not errors[i] and outs[i] > 0]
    if not ok:
        raise ConfigError(
            f"{where}: every request failed or produced no output; no latency to read"
        )
    ttft = np.array([ttfts[i] for i in ok], dtype=float)
    if isinstance(latencies, list) and len(latencies) == len(ttfts):
        e2e = np.array([latencies[i] for i in ok], dtype=float)
    else:
        e2e = ttft + np.array([sum(itls[i]) for i in ok], dtype=float)
    out = np.array([outs[i] for i in ok], dtype=float)
    many = out > 1
    tpot = (e2e[many] - ttft[many]) / (out[many] - 1)
    itl = np.array([gap for i in ok for gap in itls[i]], dtype=float)
    values = {"ttft": ttft, "tpot": tpot, "itl": itl, "e2e": e2e}
    prompt = float(np.mean([inputs[i] for i in ok])) if isinstance(inputs, list) else None
    return {
        "values": values,
        "failed": len(failed),
        "empty": len(empty),
        "ok": len(ok),
        "prompt_tokens": prompt,
        "output_tokens": float(out.mean()),
    }


def _seconds(value: object) -> bool:
    """A per-request latency of ``--save-detailed``: a finite number of seconds, at least 0."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value >= 0


def _latencies(values: list, name: str, where: str, errors: list) -> None:
    """Each request's latency in ``values`` (a failed request's is not read): seconds >= 0."""
    for i, value in enumerate(values):
        if not errors[i] and not _seconds(value):
            raise ConfigError(f"{where}: {name}[{i}] is not a latency in seconds ({value!r})")


def _percentile(values: np.ndarray, q: float) -> float:
    # vLLM's benchmark_serving.py: np.percentile with numpy's default (linear) interpolation
    return float(np.percentile(values, q * 100.0))


def read_vllm_bench(
    paths, *, prefer_detailed: bool = True, model_id: str | None = None, **attrs: object
) -> xr.Dataset:
    """Read ``vllm bench serve`` results (one run per concurrency) into a latency curve.

    Parameters
    ----------
    paths
        Result files (``--save-result``: one JSON object each), files of appended runs
        (``--append-result``: one JSON object a line, ``.json`` or ``.jsonl``), a directory of
        them, or CSV files with one flattened result per row.
    prefer_detailed
        When a run kept its per-request lists (``--save-detailed``), recompute P50/P90/P95/P99 of
        every metric from them as vLLM does (``numpy.percentile``, linear interpolation), dropping
        failed requests (those with an error) and those that produced no output (zero
        ``output_lens``: older vLLM versions record them with an empty error and count them as
        successes), instead of using the summary fields.
    model_id
        Read only the runs of this model (their ``model_id``), when the files hold several. By
        default every run is read, and runs of two models (or of two GPUs, where a run records
        one in a ``gpu`` field, as ``--metadata gpu=...`` writes it) are an error: a latency
        curve is one model's on one GPU. Given, it also says that the runs are of ``model``,
        whatever their ``model_id``.
    **attrs
        Stored on the curve: ``model``, ``gpu``, ``tensor_parallel``, ``engine`` ... A ``model``
        or ``gpu`` the runs contradict (their ``model_id`` names another model, their ``gpu``
        another GPU) is an error naming both.

    Returns
    -------
    xarray.Dataset
        The curve: ``latency`` (s) over ``concurrency``, ``metric`` and ``latency_quantile``,
        ``mean_latency`` (s) and ``measured_qps`` (requests/s) where the runs report them.

    Notes
    -----
    A closed loop (``request_rate`` ``"inf"``, ``max_concurrency`` C, at least C prompts) is read
    at C, once its latencies and throughput agree: C / mean e2e and the measured
    ``request_throughput`` more than 2x apart, either way, is an error (latencies in the wrong
    unit, or a run that never held C requests). Every other run holds the requests its load
    brought, and is read where Little's law puts it: at its measured mean in flight,
    ``request_throughput`` x mean e2e (SGLang's ``concurrency``, where written), rounded, and at
    most the requests it could hold (noted on the curve). That is a run at a finite request rate
    (capped at its ``max_concurrency``, if any), a run with no ``max_concurrency`` that sent every
    prompt at once (capped at ``num_prompts``), and a run of fewer prompts than its
    ``max_concurrency``. A run at a finite rate with no ``max_concurrency`` needs its
    per-request lists: the throughput that places it counts only requests that produced output
    (served requests / ``duration``), which a summary-only result cannot tell (it is refused),
    unless it is SGLang's, whose ``concurrency`` (its served requests' summed e2e / duration)
    places it without the throughput.
    Wherever the lists are kept, the measured throughput and the workload's mean prompt and
    output lengths are those of the requests that produced output. Summary fields are
    milliseconds (``*_ms``) and are converted to seconds; per-request lists are seconds.
    ``e2el`` (end-to-end; SGLang's ``e2e_latency``) appears only when the run asked for it
    (``--percentile-metrics ...,e2el``). ``p100_*_ms`` and ``p0_*_ms`` keys (the maximum and the
    minimum) are skipped, and noted. A JSON file that is no vLLM or SGLang result (a GenAI-Perf
    or LLMPerf JSON export, a ``server_config.json``) is an error saying what capnb reads.
    """
    notes: list[str] = []
    records = _records(paths)
    label = str(paths) if isinstance(paths, str | os.PathLike) else "the files given"
    records = _one_configuration(records, model_id, attrs, notes, label)
    runs = [_vllm_run(record, where, prefer_detailed, notes) for where, record in records]
    first = runs[0]["record"]
    # files list in text order (c1, c128, c16, ...): put them in concurrency order here, so that
    # the curve notes an order only when one file's own runs were out of it
    by_file: dict[str, list[int]] = {}
    for r in runs:
        by_file.setdefault(re.sub(r" (line|row) \d+$", "", r["where"]), []).append(r["concurrency"])
    if all(values == sorted(values) for values in by_file.values()):
        runs.sort(key=lambda r: r["concurrency"])
    concurrency = [r["concurrency"] for r in runs]
    metrics_seen = sorted({key for r in runs for key in r["latency"]})
    latency = {}
    for key in metrics_seen:
        missing = [r["where"] for r in runs if key not in r["latency"]]
        if missing:
            raise ConfigError(
                f"{missing[0]}: no {key[0]} P{key[1] * 100:g} although other runs have it; "
                "run every concurrency with the same --percentile-metrics and "
                "--metric-percentiles"
            )
        latency[key] = [r["latency"][key] for r in runs]
    mean = {}
    for metric in {m for r in runs for m in r["mean"]}:
        if all(metric in r["mean"] for r in runs):
            mean[metric] = [r["mean"][metric] for r in runs]
    output = np.array([r["output_tokens"] for r in runs])
    qps = np.array([r["qps"] for r in runs])
    _derive_mean_e2e(concurrency, mean, latency, output, qps, notes)
    workload = {
        "prompt_tokens": float(np.mean([r["prompt_tokens"] for r in runs])),
        "output_tokens": float(np.mean(output)),
    }
    model = first.get("model_id")
    return _curve.build(
        concurrency,
        latency,
        mean=mean,
        measured_qps=qps,
        rows=[r["where"] for r in runs],
        source=", ".join(sorted({r["where"].split(" ")[0] for r in runs})),
        attrs={
            **workload,
            "engine": str(first.get("endpoint_type") or first.get("backend") or "unknown"),
            **({"model_id": str(model)} if model else {}),
            **attrs,
        },
        notes=list(dict.fromkeys(notes)),
        in_flight=[r["in_flight"] for r in runs],
    )


#: Fields a run may record its GPU in (vllm bench serve ``--metadata gpu=H100-SXM``).
_GPU_FIELDS = ("gpu", "gpu_type", "gpu_name", "device_name")


def _recorded(record: object, fields: tuple[str, ...]) -> str | None:
    if not isinstance(record, Mapping):
        return None
    value = next((record[f] for f in fields if isinstance(record.get(f), str)), None)
    return value.strip() or None if value is not None else None


def _squeezed(name: str) -> str:
    return "".join(ch for ch in name.replace("\\", "/").rsplit("/", 1)[-1].lower() if ch.isalnum())


#: Words of a checkpoint's name that say its weights are quantized (``Qwen3-8B-FP8``, ``-AWQ``).
_QUANTIZED = re.compile(r"fp8|fp4|nvfp4|mxfp4|int4|int8|awq|gptq|gguf|bnb|exl2|w\d+a\d+|\d+bit")


def _quantized(name: str) -> set[str]:
    """The quantization words of a model name's last part (``{"FP8"}``), upper-cased."""
    words = re.split(r"[^a-z0-9]+", name.replace("\\", "/").rsplit("/", 1)[-1].lower())
    return {w.upper() for w in words if _QUANTIZED.fullmatch(w)}


def _same_model(model_id: str, model: str) -> bool:
    """Whether a run's ``model_id`` (``org/Name-Instruct``) names ``model`` (an id or a folder).

    One's letters and digits hold the other's, ignoring case and separators, and both say the
    same quantization (``Qwen/Qwen3-8B-FP8`` is not ``Qwen3-8B``: its latencies are FP8's).
    """
    a, b = _squeezed(model_id), _squeezed(model)
    return bool(a and b) and (a in b or b in a) and _quantized(model_id) == _quantized(model)


def _same_gpu(recorded: str, gpu: str) -> bool:
    from ._catalog import resolve_gpu

    try:
        return resolve_gpu(recorded) == resolve_gpu(gpu)
    except (ConfigError, InputError, KeyError):
        return _squeezed(recorded) == _squeezed(gpu)


def _counted_gpu(recorded: str) -> tuple[int, str] | None:
    """(count, GPU) of a GPU field that counts its GPUs (``4xNVIDIA_L40S``, ``8 x H100``), or None."""
    found = re.fullmatch(r"\s*(\d+)\s*[x\u00d7*]\s*(\S.*)", recorded, flags=re.IGNORECASE)
    return (int(found.group(1)), found.group(2)) if found else None


def _check_gpu_count(gpu: tuple[str, str], count: int, wanted: str, tensor_parallel) -> None:
    """Runs recording ``count`` GPUs of the type named: one instance over them, as named, or not."""
    if tensor_parallel is not None and int(tensor_parallel) == count:
        return
    degree = "no tensor_parallel" if tensor_parallel is None else (
        f"not tensor_parallel {int(tensor_parallel)}")  # fmt: skip
    raise ConfigError(
        f"{gpu[1]}: the runs measured {count} GPUs ({gpu[0]!r}: {count} x {wanted}), {degree}: "
        f"if the {count} GPUs served one instance, pass tensor_parallel={count} "
        f"(--tensor-parallel {count}); if they were replicas behind a router, the latencies are "
        "the fleet's, not one instance's: measure one instance"
    )


def _only_one(
    records, fields: tuple[str, ...], what: str, hint: str, label: str
) -> tuple[str, str] | None:
    """(value, first file) of the one model or GPU the runs record, or None; two are an error."""
    first: dict[str, str] = {}
    for where, record in records:
        value = _recorded(record, fields)
        if value is not None:
            first.setdefault(value, where)
    if len(first) > 1:
        shown = "; ".join(f"{v!r} in {w}" for v, w in list(first.items())[:3])
        raise ConfigError(
            f"{label}: the runs are of {len(first)} {what} ({shown}): a latency curve holds for one "
            f"model on one GPU; keep one configuration's files together{hint}"
        )
    return next(iter(first.items()), None)


def _one_configuration(records, model_id, attrs: Mapping, notes: list[str], label: str) -> list:
    """The runs of one model on one GPU, as the caller asked: else an error naming the files."""
    if model_id is not None:
        kept = [(w, r) for w, r in records if _recorded(r, ("model_id",)) == model_id]
        if not kept:
            seen = sorted({m for _, r in records if (m := _recorded(r, ("model_id",)))})
            raise ConfigError(
                f"{label}: no run has model_id {model_id!r}; the runs': {seen or 'none'}"
            )
        if len(kept) < len(records):
            left = len(records) - len(kept)
            notes.append(f"{left} runs of other models left out (model_id={model_id!r})")
        records = kept
    model = _only_one(records, ("model_id",), "models", ", or pick one with model_id=", label)
    gpu = _only_one(records, _GPU_FIELDS, "GPUs", "", label)
    wanted = attrs.get("model")
    if model and wanted is not None and model_id is None and not _same_model(model[0], str(wanted)):
        from ._catalog import _LOADED

        # plan.toml and the command line have no model_id: a file's model is named by its folder
        name = model[0].rsplit("/", 1)[-1]
        folder = (
            f" (a model read from a file is known by its folder's name: name the folder "
            f"{name!r} to plan it with these runs)"
            if str(wanted) in _LOADED
            else f" (capnb plan: --model a folder named {name!r} holding {wanted}'s config.json)"
        )
        quantized = sorted(_quantized(model[0]) ^ _quantized(str(wanted)))
        said = (
            f" (its name says quantized weights: {', '.join(quantized)}; a model folder whose "
            "config.json says its quantization plans them)"
            if quantized
            else ""
        )
        raise ConfigError(
            f"{model[1]}: the runs measured model_id {model[0]!r}, not model {str(wanted)!r}"
            f"{said}: measured latencies hold for the model they measured; plan that model (--model, "
            f"model =), or pass model_id={model[0]!r} if they are of {str(wanted)!r}{folder}"
        )
    wanted = attrs.get("gpu")
    counted = _counted_gpu(gpu[0]) if gpu else None
    if counted and wanted is not None and _same_gpu(counted[1], str(wanted)):
        _check_gpu_count(gpu, counted[0], str(wanted), attrs.get("tensor_parallel"))
    elif gpu and wanted is not None and not _same_gpu(gpu[0], str(wanted)):
        raise ConfigError(
            f"{gpu[1]}: the runs measured GPU {gpu[0]!r}, not gpu {str(wanted)!r}: measured "
            "latencies hold for the GPU they measured; plan that GPU (--gpus, gpus =)"
        )
    return records


def _vllm_run(record: Mapping, where: str, prefer_detailed: bool, notes: list[str]) -> dict:
    _check_result_json(record, where)
    completed = _number(record, "completed", where)
    if not completed or completed <= 0:
        raise ConfigError(f"{where}: 'completed' is {completed}: no request succeeded")
    if not math.isfinite(completed):
        raise ConfigError(f"{where}: 'completed' is {completed}, not a count of requests")
    qps = _number(record, "request_throughput", where, required=False)
    if qps is None and record.get("request_inthroughput") is not None:
        # benchmark_serving.py of vLLM 0.4 spelt it so (the same figure, requests/s)
        qps = _number(record, "request_inthroughput", where)
        notes.append(f"{where}: throughput read from 'request_inthroughput' (vLLM 0.4's name)")
    if qps is None:
        raise ConfigError(f"{where}: missing field 'request_throughput'")
    prompt = _number(record, "total_input_tokens", where) / completed
    output = _number(record, "total_output_tokens", where) / completed
    latency, mean = {}, {}
    lists = _detailed(record, where)
    failed = _number(record, "failed", where, required=False)
    if lists is None and failed is not None and failed > 0:  # (the lists note their own)
        sent = _number(record, "num_prompts", where, required=False) or completed + failed
        notes.append(
            f"{where}: {failed:,.0f} of {sent:,.0f} requests failed ('failed'): its latencies and "
            f"throughput are of the {completed:,.0f} completed"
        )
    if lists is not None:
        # requests that produced no output count in vLLM's `completed` (older versions) but are no
        # served request: the throughput and the workload lengths are those of the others
        duration = _number(record, "duration", where, required=False)
        if duration is not None and duration > 0:
            qps = lists["ok"] / duration
        else:
            qps = qps * lists["ok"] / completed
        output = lists["output_tokens"]
        if lists["prompt_tokens"] is not None:
            prompt = lists["prompt_tokens"]
        if lists["empty"]:
            notes.append(
                f"{where}: {lists['empty']} requests without error but with no output left out "
                "of the throughput, the workload lengths and the percentiles"
            )
    if lists is not None and prefer_detailed:
        for metric, values in lists["values"].items():
            if values.size:
                mean[metric] = float(values.mean())
                for q in _curve.QUANTILES:
                    latency[(metric, q)] = _percentile(values, q)
        if lists["failed"]:
            notes.append(f"{where}: {lists['failed']} failed requests left out of percentiles")
        notes.append(
            "percentiles recomputed from per-request lists (--save-detailed) with numpy's linear "
            "interpolation, as vLLM computes them"
        )
    else:
        for key in record:
            match = _VLLM_KEY.match(str(key))
            if not match:
                continue
            stat, metric = match.group(1), _VLLM_METRICS[match.group(2)]
            if stat == "std":
                continue
            q = _quantile_of(stat)
            if q is not None and not 0.0 < q < 1.0:
                if q in (0.0, 1.0):  # --metric-percentiles 0,...,100: the minimum, the maximum
                    extreme = "the maximum" if q else "the minimum"
                    notes.append(
                        f"{stat}_*_ms keys ({stat.upper()}, {extreme} of each run) skipped: capnb "
                        "plans on percentiles between P0 and P100 (P50, P99, P99.9, ...)"
                    )
                    continue
                raise ConfigError(
                    f"{where}: key {key!r}: {stat!r} is not a percentile between p0 and p100"
                )
            number = _number(record, key, where)
            seconds = float(_curve.to_seconds(number, "ms", f"{where}: {key}"))
            if q is None:
                mean[metric] = seconds
            else:
                latency[(metric, q)] = seconds
        if not latency:
            raise ConfigError(
                f"{where}: missing latency fields: no p<NN>_<metric>_ms or median_<metric>_ms key "
                "(ttft, tpot, itl, e2el; SGLang: e2e_latency); is this a `vllm bench serve` result?"
            )
    concurrency, in_flight = _place(record, where, completed, qps, mean, output, lists, notes)
    return {
        "where": where,
        "record": record,
        "concurrency": concurrency,
        "in_flight": in_flight,
        "latency": latency,
        "mean": mean,
        "qps": qps,
        "prompt_tokens": prompt,
        "output_tokens": output,
    }


def _place(record, where, completed, qps, mean, output, lists, notes) -> tuple[int, float]:
    """Where a run goes on the curve, and its measured mean in flight when that placed it.

    A closed loop (request_rate inf, max_concurrency C, at least C prompts) goes at C, once its
    latencies and throughput agree (:data:`_CLOSED_LOOP_TOLERANCE`). Any other run holds the
    requests in flight its load gave it: it goes where Little's law puts it, request_throughput x
    mean e2e (SGLang's ``concurrency``, where written), rounded, and no higher than the requests
    it could hold (C, the prompts it sent).
    """
    limit = _number(record, "max_concurrency", where, required=False)
    if limit is not None and math.isnan(limit):
        limit = None
    if limit is not None and not (math.isfinite(limit) and limit >= 1 and limit == round(limit)):
        raise ConfigError(
            f"{where}: 'max_concurrency' is {limit:g}, not a whole number of requests >= 1"
        )
    rate = _number(record, "request_rate", where, required=False)
    if limit is None and rate is None:
        raise ConfigError(f"{where}: missing field 'max_concurrency' (and no 'request_rate')")
    sglang = _number(record, "concurrency", where, required=False)
    measured = sglang is not None and math.isfinite(sglang) and sglang > 0
    if limit is None and not math.isinf(rate) and not (lists is None and measured):
        if lists is None:
            raise ConfigError(
                f"{where}: a run at request_rate {rate} has no fixed concurrency, and this "
                "result keeps only its summary: without the per-request lists capnb cannot "
                "leave out the requests that produced no output (older vLLM versions count "
                "them as successes, in request_throughput) and so cannot place the run; rerun "
                "with --max-concurrency, or with --save-result --save-detailed"
            )
        e2e = mean.get("e2e")
        if e2e is None:
            e2e = float(lists["values"]["e2e"].mean())
        notes.append(
            f"{where}: run at request_rate {rate} placed at its mean concurrency by Little's "
            f"law ({qps:.3g} requests/s x {e2e:.3g} s = {qps * e2e:.3g}, rounded)"
        )
        return max(1, round(qps * e2e)), qps * e2e
    in_flight, how, e2e = _in_flight(record, where, qps, mean, output)
    failed = _number(record, "failed", where, required=False) or 0.0
    given = _number(record, "num_prompts", where, required=False)
    usable = given is not None and math.isfinite(given) and given >= 1
    prompts = given if usable else completed + failed
    closed = rate is None or math.isinf(rate)
    if limit is not None and closed and prompts >= limit:
        _check_closed_loop(where, int(limit), qps, in_flight, e2e)
        return int(limit), math.nan
    if limit is None and not closed:  # SGLang's, placed at the concurrency it measured
        cap = int(prompts)
        why = (
            f"a run at request_rate {rate:g} with no max_concurrency holds the requests its rate "
            "brings"
        )
    elif limit is None:
        cap = int(prompts)
        why = (
            f"a run with no max_concurrency at request_rate inf (every one of its {cap} prompts "
            "sent at once) does not hold them all in flight"
        )
    elif not closed:
        cap = int(min(limit, prompts))
        why = (
            f"a run at request_rate {rate:g} with max_concurrency {limit:g} holds the requests "
            "its rate brings, up to that limit"
        )
    else:
        cap = int(prompts)
        why = (
            f"a run of {cap} prompts at max_concurrency {limit:g} never held {limit:g} requests "
            "in flight"
        )
    if in_flight is None:
        raise ConfigError(
            f"{where}: {why}; capnb places such a run at its measured mean requests in flight "
            "(Little's law: request_throughput x mean e2e), but the result has no mean e2e "
            "latency (mean_e2el_ms, or mean_ttft_ms and mean_tpot_ms); rerun with "
            "--percentile-metrics ttft,tpot,itl,e2el"
        )
    placed = _littles_place(
        where, how, in_flight, cap,
        "check the latency units (milliseconds in *_ms fields) and request_throughput "
        "(requests/s)",
    )  # fmt: skip
    capped = f", capped at {cap}" if placed == cap and in_flight > cap else ""
    notes.append(
        f"{where}: {why}: placed where Little's law puts it, at its measured mean in flight "
        f"({how} = {in_flight:.3g}{capped}): concurrency {placed}"
    )
    return placed, in_flight


def _littles_place(where: str, how: str, in_flight: float, cap: int, check: str,
                   held: str = "the run could hold") -> int:  # fmt: skip
    """The concurrency a run at a request rate is read at: its mean in flight (Little's law).

    Rounded, at least 1 and at most ``cap``, the requests the run could hold; more than
    :data:`_CLOSED_LOOP_TOLERANCE` x ``cap`` is no run's (a latency in the wrong unit): refused,
    with ``how`` it was found and what to ``check``.
    """
    if not in_flight <= _CLOSED_LOOP_TOLERANCE * cap:
        raise ConfigError(
            f"{where}: {how} = {_figure(in_flight)} requests in flight on average, more than the "
            f"{cap} {held}: {check}"
        )
    return min(cap, max(1, round(in_flight)))


def _in_flight(record, where, qps, mean, output) -> tuple[float | None, str, float | None]:
    """A run's measured mean requests in flight (None: no figure), how it was found, mean e2e."""
    e2e, derived = mean.get("e2e"), ""
    if e2e is None and "ttft" in mean and "tpot" in mean:
        e2e = float(_e2e_of_tokens(mean, output))
        derived = " (derived: mean TTFT + mean TPOT x (mean output tokens - 1))"
    sglang = _number(record, "concurrency", where, required=False)
    if sglang is not None and math.isfinite(sglang) and sglang > 0:
        return sglang, "SGLang's measured concurrency", e2e
    if e2e is None or math.isnan(qps * e2e):
        return None, "", None
    return qps * e2e, f"{_figure(qps)} requests/s x {_figure(e2e)} s mean e2e{derived}", e2e


def _figure(value: float) -> str:
    """A figure for a message: 4 significant digits, thousands written out (12,500 not 1.25e+04)."""
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


#: The fields _check_closed_loop names: the concurrency, the throughput, a unit slip, the mean e2e.
_VLLM_NAMES = (
    "max_concurrency",
    "request_throughput",
    "seconds written into *_ms fields make every latency 1000x too short",
    "mean_e2el_ms, or mean_ttft_ms + mean_tpot_ms x (output tokens - 1) where it has none",
)
_GUIDELLM_NAMES = (
    "streams",
    "requests_per_second",
    "request_latency is in seconds, the *_ms metrics in milliseconds",
    "metrics.request_latency.successful.mean",
)


def _check_closed_loop(where, limit, qps, in_flight, e2e, names=_VLLM_NAMES) -> None:
    """A closed loop at ``limit``: its latencies and measured throughput must agree."""
    limit_name, qps_name, slip, e2e_name = names
    if e2e is not None and e2e <= 0:
        raise ConfigError(
            f"{where}: the mean e2e latency is {_figure(e2e)} s, not > 0 (a served request takes "
            f"time); check {e2e_name}"
        )
    if e2e is not None and e2e > 0:
        ratio = limit / e2e / qps if qps > 0 else math.inf
        figures = (
            f"{limit_name} {limit} / mean e2e {_figure(e2e)} s = {_figure(limit / e2e)} "
            f"requests/s, but the run measured {qps_name} {_figure(qps)} requests/s"
        )
    elif in_flight is not None:
        ratio = limit / in_flight
        figures = (
            f"{limit_name} {limit}, but the run measured {_figure(in_flight)} requests in flight "
            "on average (SGLang's concurrency)"
        )
    else:
        return  # no mean latency: nothing to hold the throughput to
    if math.isnan(ratio) or 1 / _CLOSED_LOOP_TOLERANCE <= ratio <= _CLOSED_LOOP_TOLERANCE:
        return
    factor = max(ratio, 1 / ratio) if ratio > 0 else math.inf
    requests = "request" if limit == 1 else "requests"
    raise ConfigError(
        f"{where}: the latencies and the throughput this run measured disagree: {figures}, "
        f"{factor:,.1f}x apart (capnb accepts {_CLOSED_LOOP_TOLERANCE:g}x either way). Check the "
        f"latency units ({slip}) "
        f"or whether the run ever held {limit} {requests} in flight (fewer prompts than that, a "
        "server max_num_seqs below it, a client that could not keep up)"
    )


# -- AIPerf and GenAI-Perf -----------------------------------------------------------------------
# Metric names as the tools print them (AIPerf: "Time to First Token"; GenAI-Perf: "Time To First
# Token"). Both tools' "Inter Token Latency" is per request, (request latency - TTFT) / (output
# tokens - 1): what vLLM calls TPOT. AIPerf's "Inter Chunk Latency" is the gap between streamed
# chunks: vLLM's ITL.
_AIPERF_NAMES = {
    "time to first token": "ttft",
    "inter token latency": "tpot",
    "inter chunk latency": "itl",
    "request latency": "e2e",
}
_AIPERF_TAGS = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "inter_chunk_latency": "itl",
    "request_latency": "e2e",
}
_NAME_UNIT = re.compile(r"^(.*?)\s*\(([^)]*)\)\s*$")
_RATE_UNITS = ("requests/sec", "requests/s", "per sec", "req/s")


def _cell(text: str, where: str) -> float:
    cleaned = str(text).strip().replace(",", "")  # GenAI-Perf writes "5,919.16"
    if cleaned == "":
        return math.nan
    try:
        return float(cleaned)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a number") from None


def _whole_count(value: float) -> bool:
    """Whether ``value`` is a finite whole number of requests >= 1."""
    return math.isfinite(value) and value >= 1 and value == round(value)


def _sections(path: Path) -> list[list[list[str]]]:
    text = _text(path, "utf-8-sig")
    sections, current = [], []
    # newline="": a lone carriage return ends a line, as csv reads a file (else csv.Error)
    for row in csv.reader(io.StringIO(text, newline="")):
        if not any(cell.strip() for cell in row):
            if current:
                sections.append(current)
            current = []
        else:
            current.append(row)
    if current:
        sections.append(current)
    if not sections:
        raise ConfigError(f"{path}: empty file")
    return sections


def _aiperf_run(path: Path) -> dict:
    """One profile export (AIPerf or GenAI-Perf): latency and mean per metric, and throughput."""
    sections = _sections(path)
    latency, mean, qps, output, prompt, sent = {}, {}, None, None, None, None
    for section in sections:
        header = [h.strip().lower() for h in section[0]]
        if header[:1] != ["metric"]:
            continue
        if header == ["metric", "value"]:
            for i, row in enumerate(section[1:], start=2):
                if len(row) < 2:
                    raise ConfigError(
                        f"{path}: row {i} of the 'Metric,Value' table ('{row[0]}') has no value "
                        "(a field short: an unclosed quote or a cut line?)"
                    )
                match = _NAME_UNIT.match(row[0].strip())
                name = (match.group(1) if match else row[0]).strip().lower()
                if name == "request throughput":
                    unit = match.group(2).strip().lower() if match else ""
                    if unit not in _RATE_UNITS:
                        raise ConfigError(
                            f"{path}: Request Throughput in unknown unit {unit!r} (row {i})"
                        )
                    qps = _cell(row[1], f"{path} row {i}")
                    if not (math.isnan(qps) or 0 < qps < math.inf):  # (an empty cell: none)
                        raise ConfigError(
                            f"{path} row {row[0].strip()!r}: {qps:g} is not a rate of "
                            "requests/s > 0"
                        )
                elif name == "request count":
                    sent = _cell(row[1], f"{path} row {i}")
                    if not (math.isnan(sent) or _whole_count(sent)):
                        raise ConfigError(
                            f"{path} row {row[0].strip()!r}: {sent:g} is not a whole number of "
                            "requests >= 1"
                        )
            continue
        if "avg" not in header:
            continue  # GPU telemetry and other tables
        for row in section[1:]:
            where = f"{path} row '{row[0]}'"
            if len(row) < len(header):
                raise ConfigError(
                    f"{where}: {len(row)} fields where the header has {len(header)} "
                    f"({', '.join(header)}): an unclosed quote or a cut line?"
                )
            match = _NAME_UNIT.match(row[0].strip())
            name = (match.group(1) if match else row[0]).strip().lower()
            if name in ("output sequence length", "num output token"):
                output = _token_mean(_cell(row[header.index("avg")], where), where, "avg")
                continue
            if name in ("input sequence length", "num input token"):
                prompt = _token_mean(_cell(row[header.index("avg")], where), where, "avg")
                continue
            metric = _AIPERF_NAMES.get(name)
            if metric is None:
                continue
            if not match:
                raise ConfigError(f"{where}: no unit in the metric name (expected e.g. '(ms)')")
            unit = match.group(2)
            for column, cell in zip(header[1:], row[1:], strict=False):
                if column == "avg":
                    mean[metric] = float(_curve.to_seconds(_cell(cell, where), unit, where))
                elif re.fullmatch(r"p\d+", column):
                    value = _cell(cell, where)
                    if not math.isnan(value):
                        q = float(column[1:]) / 100
                        latency[(metric, q)] = float(_curve.to_seconds(value, unit, where))
    if not latency:
        raise ConfigError(
            f"{path}: no latency rows (Time to First Token, Request Latency, Inter Token Latency) "
            "in a 'Metric,avg,...' table: is this an AIPerf or GenAI-Perf profile export?"
        )
    return {
        "latency": latency,
        "mean": mean,
        "qps": qps,
        "output_tokens": output,
        "prompt_tokens": prompt,
        "sent": sent,
    }


def _sweep_table(path: Path) -> tuple[list[str], list[list[str]]] | None:
    first = _sections(path)[0]
    header = [h.strip() for h in first[0]]
    lowered = [h.lower() for h in header]
    if "concurrency" in lowered:
        return header, first[1:]
    return None


def read_aiperf(source, concurrency=None, **attrs: object) -> xr.Dataset:
    """Read NVIDIA AIPerf or GenAI-Perf CSV exports into a latency curve.

    Parameters
    ----------
    source
        One of:

        - a mapping ``{concurrency: path}`` of per-run exports (``profile_export_aiperf.csv`` or
          ``profile_export_genai_perf.csv``), with ``concurrency=None``;
        - a list of such paths (or one path) with ``concurrency`` the matching list of integers,
          None for a run at a request rate; ``concurrency=None``: every run at a request rate;
        - AIPerf's sweep file (``profile_export_aiperf_sweep.csv``) or GenAI-Perf's analyze summary
          (``analyze_export_genai_perf.csv``), which carry a concurrency column.
    concurrency
        Concurrency of each per-run file when ``source`` is a list (per-run exports do not record
        it); None (for all, or for one run) places a run where Little's law puts it (Notes).
    **attrs
        Stored on the curve: ``model``, ``gpu``, ``tensor_parallel``, ``engine`` ...

    Returns
    -------
    xarray.Dataset
        The curve: ``latency`` (s) over ``concurrency``, ``metric`` and ``latency_quantile``,
        ``mean_latency`` (s) and ``measured_qps`` (requests/s) where the runs report them.

    Notes
    -----
    Units come from the metric names (``Time to First Token (ms)``) and are converted to seconds;
    an unknown unit is an error. AIPerf's sweep file writes no units: its latency columns are in
    AIPerf's display unit for them, milliseconds, and the per-trial mean (``<tag>_<stat>_mean``) is
    read. Both tools' *Inter Token Latency* is per request, (latency - TTFT) / (output tokens - 1),
    and is read as ``tpot``; AIPerf's *Inter Chunk Latency* as ``itl``.

    A per-run export records neither its ``--concurrency`` nor its ``--request-rate``. A run given
    no concurrency (one at a request rate holds the requests its rate brings, not a fixed number)
    is read where Little's law puts it, as :func:`read_vllm_bench` and :func:`read_guidellm` read
    rate runs: at its measured mean requests in flight, *Request Throughput* x mean *Request
    Latency* (or mean TTFT + mean ITL x (mean output tokens - 1) where the export has no Request
    Latency), rounded, and at most the export's *Request Count* (a run cannot hold more than it
    sent: twice that is refused, as a latency in the wrong unit); each such placement is noted.
    A run at a fixed ``--concurrency`` holds a
    little less than it on average (the client's gaps between requests): give its concurrency.
    """
    if isinstance(source, Mapping):
        if concurrency is not None:
            raise InputError("read_aiperf: give concurrency either as mapping keys or as a list")
        pairs = list(source.items())
    elif isinstance(source, str | os.PathLike):
        path = _aiperf_file(source)
        table = _sweep_table(path)
        if table is not None:
            return _read_sweep(path, *table, attrs)
        given = concurrency if isinstance(concurrency, list | tuple) else [concurrency]
        if len(given) != 1:
            raise InputError("read_aiperf: give one concurrency per file (concurrency=[...])")
        pairs = [(given[0], path)]
    else:
        paths = _paths(source, "source")
        if concurrency is None:
            concurrency = [None] * len(paths)
        if len(list(concurrency)) != len(paths):
            raise InputError(
                f"read_aiperf: give one concurrency per file (concurrency=[...]: "
                f"{len(list(concurrency))} for {len(paths)} files; None for a run at a request "
                "rate)"
            )
        pairs = list(zip(concurrency, paths, strict=True))
    runs, notes = [], []
    for value, path in pairs:
        path = _aiperf_file(path)
        run = {"concurrency": value, "where": path.name, "in_flight": math.nan, **_aiperf_run(path)}
        if value is None:
            run["concurrency"], run["in_flight"] = _aiperf_place(run, str(path), notes)
        runs.append(run)
    return _curve_from_runs(runs, ", ".join(str(Path(p)) for _, p in pairs), attrs, notes)


def _aiperf_file(source) -> Path:
    """The path of one AIPerf or GenAI-Perf export, or a ConfigError naming it."""
    path = user_path(source, "AIPerf export")
    if path.is_dir():
        raise ConfigError(
            f"{path}: a folder, not an AIPerf export; give its CSV files, as a mapping "
            "{concurrency: path} or a list of paths with concurrency=[...]"
        )
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    return path


def _aiperf_place(run: dict, where: str, notes: list[str]) -> tuple[int, float]:
    """A per-run export given no concurrency: at its measured mean in flight (Little's law)."""
    qps, mean, output = run["qps"], run["mean"], run["output_tokens"]
    if qps is None or not math.isfinite(qps) or qps <= 0:
        raise ConfigError(
            f"{where}: a run given no concurrency is placed at its measured mean requests in "
            "flight (Little's law: Request Throughput x mean Request Latency), but the export "
            "has no Request Throughput (requests/sec) in its 'Metric,Value' table; give the "
            "run's concurrency (concurrency=[...])"
        )
    e2e, derived = mean.get("e2e"), ""
    if e2e is None and "ttft" in mean and "tpot" in mean and output is not None:
        e2e = float(_e2e_of_tokens(mean, output))
        derived = " (derived: mean TTFT + mean ITL x (mean output tokens - 1))"
    if e2e is None:
        raise ConfigError(
            f"{where}: a run given no concurrency is placed at its measured mean requests in "
            "flight (Little's law: Request Throughput x mean Request Latency), but the export "
            "has no mean Request Latency (nor the mean Time to First Token, Inter Token Latency "
            "and Output Sequence Length it follows from); give the run's concurrency "
            "(concurrency=[...])"
        )
    in_flight = qps * e2e
    placed = max(1, round(in_flight))
    sent = run.get("sent")
    if sent is not None and math.isfinite(sent) and sent >= 1:  # no run holds more than it sent
        placed = _littles_place(
            where, f"{_figure(qps)} requests/s x {_figure(e2e)} s mean request latency{derived}",
            in_flight, int(sent),
            "check the latencies' unit (the metric names' '(ms)') and the Request Throughput",
            held="the run sent (Request Count)",
        )  # fmt: skip
    notes.append(
        f"{Path(where).name}: a per-run export records no concurrency (a run at a request rate "
        "has none): placed where Little's law puts it, at its measured mean in flight "
        f"({_figure(qps)} requests/s x {_figure(e2e)} s mean request latency{derived} = "
        f"{in_flight:.3g}): concurrency {placed}"
    )
    return placed, in_flight


def _curve_from_runs(
    runs: list[dict], source: str, attrs: Mapping, placed: Sequence[str] = ()
) -> xr.Dataset:
    keys = set.intersection(*(set(r["latency"]) for r in runs))
    dropped = set.union(*(set(r["latency"]) for r in runs)) - keys
    notes = list(placed) + (
        [f"dropped {len(dropped)} metric/quantile columns missing from some runs"]
        if dropped
        else []
    )
    latency = {k: [r["latency"][k] for r in runs] for k in sorted(keys)}
    mean = {
        m: [r["mean"][m] for r in runs] for m in _curve.METRICS if all(m in r["mean"] for r in runs)
    }
    concurrency = [r["concurrency"] for r in runs]
    qps = [r["qps"] if r["qps"] is not None else math.nan for r in runs]
    outputs = [r["output_tokens"] for r in runs]
    output = None if any(o is None for o in outputs) else np.asarray(outputs, dtype=float)
    if np.isnan(qps).any() and not np.isnan(qps).all():
        raise ConfigError(f"{source}: request throughput missing from some runs")
    qps_array = None if np.isnan(qps).all() else np.asarray(qps)
    _derive_mean_e2e(concurrency, mean, latency, output, qps_array, notes)
    workload = {} if output is None else {"output_tokens": float(output.mean())}
    prompts = [r.get("prompt_tokens") for r in runs]
    if workload and all(v is not None and math.isfinite(v) for v in prompts):
        workload["prompt_tokens"] = float(np.mean(prompts))  # the exports' Input Sequence Length
    return _curve.build(
        concurrency,
        latency,
        mean=mean,
        measured_qps=qps_array,
        rows=[r["where"] for r in runs],
        source=source,
        attrs={**workload, **attrs},
        notes=notes,
        in_flight=[r.get("in_flight", math.nan) for r in runs],
    )


def _read_sweep(path: Path, header: list[str], rows: list[list[str]], attrs) -> xr.Dataset:
    if not rows:
        raise ConfigError(f"{path}: a sweep file with a header but no rows")
    lowered = [h.lower() for h in header]
    at = lowered.index("concurrency")
    runs = []
    genai = any(h.startswith("p99 ") for h in lowered)
    for number, row in enumerate(rows, start=2):
        where = f"{path.name} row {number}"
        latency, mean, qps, output = {}, {}, None, None
        for name, cell in zip(header, row, strict=False):
            key = name.strip()
            if genai:  # analyze summary: "p99 Time To First Token (ms)", "Request Throughput (...)"
                match = _NAME_UNIT.match(key)
                if not match:
                    continue
                words, unit = match.group(1).strip().lower(), match.group(2)
                if words == "request throughput":
                    if unit.strip().lower() not in _RATE_UNITS:
                        raise ConfigError(f"{where}: Request Throughput in unknown unit {unit!r}")
                    qps = _cell(cell, where)
                    continue
                stat, _, metric_name = words.partition(" ")
                if metric_name == "output sequence length" and stat == "avg.":
                    output = _token_mean(_cell(cell, where), where, key)
                metric = _AIPERF_NAMES.get(metric_name)
                if metric and re.fullmatch(r"p\d+", stat):
                    latency[(metric, float(stat[1:]) / 100)] = float(
                        _curve.to_seconds(_cell(cell, where), unit, f"{where}: {key}")
                    )
            else:  # AIPerf sweep: "<tag>_<stat>_mean", milliseconds for latency tags
                match = re.fullmatch(r"(\w+?)_(avg|p\d+)_mean", key.lower())
                if not match:
                    continue
                tag, stat = match.groups()
                if tag == "request_throughput" and stat == "avg":
                    qps = _cell(cell, where)
                elif tag == "output_sequence_length" and stat == "avg":
                    output = _token_mean(_cell(cell, where), where, key)
                elif tag in _AIPERF_TAGS:
                    seconds = float(_curve.to_seconds(_cell(cell, where), "ms", where))
                    if stat == "avg":
                        mean[_AIPERF_TAGS[tag]] = seconds
                    else:
                        latency[(_AIPERF_TAGS[tag], float(stat[1:]) / 100)] = seconds
        if not latency:
            raise ConfigError(f"{where}: no latency percentile columns")
        if qps is not None and not (math.isnan(qps) or 0 < qps < math.inf):  # (empty: none)
            raise ConfigError(
                f"{where}: request throughput {qps:g} is not a rate of requests/s > 0"
            )
        if len(row) <= at:
            raise ConfigError(f"{where}: the row ends before its concurrency column")
        runs.append(
            {
                "concurrency": _cell(row[at], where),
                "where": where,
                "latency": latency,
                "mean": mean,
                "qps": qps,
                "output_tokens": output,
            }
        )
    curve = _curve_from_runs(runs, str(path), attrs)
    if not genai:
        _curve.add_note(curve, "AIPerf sweep columns read in milliseconds (AIPerf's display unit)")
    return curve


# -- GuideLLM ------------------------------------------------------------------------------------
# Read from GuideLLM's own pydantic models (vllm-project/guidellm at ee7a774, 0.7.3 + 12 commits:
# benchmark/schemas/report.py, benchmark.py, metrics.py, schemas/statistics.py,
# scheduler/strategies.py). Schema version 1 (metadata.version, GuideLLM 0.5.0 to 0.6.x) and 2
# (0.7.0 on) differ in the report's own `config`, not in the per-benchmark fields read here;
# reports before 0.5.0 carry no metadata and lay benchmarks out otherwise (args, run_stats).
_GUIDELLM_VERSIONS = (1, 2)
#: (capnb metric, GuideLLM metric, its unit). GuideLLM's inter_token_latency_ms is per request,
#: (last token - first token) / (output tokens - 1): vLLM's TPOT. Its time_per_output_token_ms
#: counts the wait for the first token too (time to the last token / output tokens): not read.
_GUIDELLM_METRICS = (
    ("ttft", "time_to_first_token_ms", "ms"),
    ("tpot", "inter_token_latency_ms", "ms"),
    ("e2e", "request_latency", "s"),
)
_GUIDELLM_RATES = ("constant", "poisson")
#: Arrival gaps' coefficient of variation of GuideLLM's rate strategies: constant sends at uniform
#: intervals (scheduler/strategies.py, AsyncConstantStrategy), poisson at exponential ones.
_GUIDELLM_ARRIVAL_CV = {"constant": 0.0, "poisson": 1.0}
_GUIDELLM_STRATEGIES = ("synchronous", "concurrent", "throughput", *_GUIDELLM_RATES)


def _is_guidellm(record: object) -> bool:
    """Whether a JSON document is a GuideLLM report (``guidellm benchmark --output-path x.json``)."""
    if not isinstance(record, Mapping) or not isinstance(record.get("benchmarks"), list):
        return False
    meta = record.get("metadata")
    return (isinstance(meta, Mapping) and "guidellm_version" in meta) or any(
        isinstance(b, Mapping) and b.get("type_") == "generative_benchmark"
        for b in record["benchmarks"]
    )


def _guidellm_benchmarks(where: str, report: Mapping) -> list[tuple[str, Mapping]]:
    """(label, benchmark) of a GuideLLM report of a schema version capnb reads; else an error."""
    meta = report.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    version = meta.get("version")
    if isinstance(version, bool) or version not in _GUIDELLM_VERSIONS:
        made = f" (written by GuideLLM {meta['guidellm_version']})" if meta else ""
        raise ConfigError(
            f"{where}: field 'metadata.version' is {version!r}{made}: capnb reads GuideLLM report "
            "schema versions 1 and 2 (GuideLLM 0.5.0 to 0.7.x); rerun with one of those, or "
            "write the figures into a latency table (read_latency_table)"
        )
    found = [(f"{where} benchmarks[{i}]", b) for i, b in enumerate(report["benchmarks"])]
    if not found:
        raise ConfigError(f"{where}: field 'benchmarks' is empty: the report holds no benchmark")
    return found


def _guidellm_models(where: str, report: Mapping) -> list[tuple[str, dict]]:
    """(label, {"model_id": model}) of each benchmark that records its backend's model.

    GuideLLM 0.5 to 0.7 keep the backend's settings in each benchmark's ``config.backend``, its
    ``model`` among them: checked as a vllm bench run's ``model_id`` is (:func:`_one_configuration`).
    """
    found = []
    for i, bench in enumerate(report.get("benchmarks") or []):
        config = bench.get("config") if isinstance(bench, Mapping) else None
        backend = config.get("backend") if isinstance(config, Mapping) else None
        model = backend.get("model") if isinstance(backend, Mapping) else None
        if model is not None and not isinstance(model, str):  # (-1 was taken as no model)
            raise ConfigError(
                f"{where} benchmarks[{i}]: field 'config.backend.model' is {model!r}, not a "
                "model's name (text)"
            )
        if isinstance(model, str) and model.strip():
            found.append((f"{where} benchmarks[{i}] (config.backend.model)", {"model_id": model}))
    return found


def _field(record: object, dotted: str, where: str) -> object:
    value = record
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise ConfigError(f"{where}: missing field {dotted!r}")
        value = value[part]
    return value


def _real(record: object, dotted: str, where: str) -> float:
    value = _field(record, dotted, where)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: field {dotted!r} is {value!r}, not a finite number")
    return float(value)


def _positive(record: object, dotted: str, where: str) -> float:
    """A rate of requests/s, > 0: a rate of 0 or -1 was read as a run at that rate."""
    value = _real(record, dotted, where)
    if value <= 0:
        raise ConfigError(f"{where}: field {dotted!r} is {value:g}, not a rate of requests/s > 0")
    return value


def _token_mean(value: float, where: str, what: str) -> float:
    """A run's mean prompt or output length: tokens, >= 0 (NaN where the export left it empty)."""
    if value < 0:
        raise ConfigError(f"{where}: {what} is {value!r}, not a mean token count (>= 0)")
    return value


def _guidellm_tokens(bench: object, kind: str, where: str) -> float:
    field = f"metrics.{kind}_token_count.successful.mean"
    return _token_mean(_real(bench, field, where), where, f"field {field!r}")


def _guidellm_run(bench: object, where: str) -> dict:
    """One GuideLLM benchmark: strategy, successful requests' latencies (s) and means, lengths."""
    kind = _field(bench, "config.strategy.type_", where)
    if kind not in _GUIDELLM_STRATEGIES:
        raise ConfigError(
            f"{where}: field 'config.strategy.type_' is {kind!r}; capnb reads GuideLLM's "
            f"{', '.join(_GUIDELLM_STRATEGIES)} benchmarks"
        )
    ok = _real(bench, "metrics.request_totals.successful", where)
    if ok < 1:
        raise ConfigError(
            f"{where}: field 'metrics.request_totals.successful' is {ok:g}: no request succeeded"
        )
    sent = _real(bench, "metrics.request_totals.total", where)
    for field, value, least in (
        ("successful", ok, ""),
        ("total", sent, f" at least the {ok:g} successful"),
    ):
        if not (_whole_count(value) and value >= ok):
            raise ConfigError(
                f"{where}: field 'metrics.request_totals.{field}' is {value:g}, not a whole number "
                f"of requests{least}"
            )
    latency, mean = {}, {}
    for metric, name, unit in _GUIDELLM_METRICS:
        # ms / 1000.0 as read_bench_runs converts vllm bench's *_ms fields: one set of runs gives
        # one table, bit for bit, whichever tool wrote it (calibrate's fit follows the last bit)
        per_second = {"ms": 1000.0, "s": 1.0}[unit]
        summary = f"metrics.{name}.successful"
        mean[metric] = _real(bench, f"{summary}.mean", where) / per_second
        for q in _curve.QUANTILES:
            value = _real(bench, f"{summary}.percentiles.p{round(q * 100)}", where)
            latency[(metric, q)] = value / per_second
    totals = _field(bench, "metrics.request_totals", where)
    strategy = _field(bench, "config.strategy", where)
    limit = strategy.get("max_concurrency")
    if kind == "synchronous":
        limit = 1
    else:
        if limit is not None:
            limit = _real(bench, "config.strategy.max_concurrency", where)
        if kind == "concurrent":  # streams, fewer where a max_concurrency holds them back
            streams = _real(bench, "config.strategy.streams", where)
            limit = streams if limit is None else min(streams, limit)
    if limit is not None and not (limit >= 1 and limit == round(limit)):
        raise ConfigError(f"{where}: a concurrency of {limit:g} is no whole number of requests")
    return {
        "where": where,
        "kind": kind,
        "limit": None if limit is None else int(limit),
        "rate": _positive(bench, "config.strategy.rate", where)
        if kind in _GUIDELLM_RATES
        else None,
        "latency": latency,
        "mean": mean,
        # the duration-weighted mean of GuideLLM's rate distribution: successful requests / the
        # measured window (schemas/statistics.py, rate_distribution_from_timings)
        "qps": _positive(bench, "metrics.requests_per_second.successful.mean", where),
        "prompt_tokens": _guidellm_tokens(bench, "prompt", where),
        "output_tokens": _guidellm_tokens(bench, "output", where),
        "requests": int(ok),
        "sent": int(sent),
        "errored": _number(totals, "errored", f"{where} (metrics.request_totals)", required=False),
    }


def _guidellm_place(run: dict, notes: list[str]) -> tuple[int, float]:
    """Where a GuideLLM benchmark goes on the curve, as :func:`_place` puts a vllm bench run.

    Synchronous (one request at a time), concurrent (``streams``) and throughput with a
    ``max_concurrency`` are closed loops, read at their concurrency once latencies and throughput
    agree. Constant and poisson rates, and throughput with no limit, hold the requests their load
    brought: placed at successful requests/s x mean e2e (Little's law), rounded, at most the limit
    or the requests sent.
    """
    where, qps, e2e, limit = run["where"], run["qps"], run["mean"]["e2e"], run["limit"]
    closed = run["kind"] in ("synchronous", "concurrent") or (
        run["kind"] == "throughput" and limit is not None and run["sent"] >= limit
    )
    if closed:
        _check_closed_loop(where, limit, qps, qps * e2e, e2e, _GUIDELLM_NAMES)
        return limit, math.nan
    in_flight = qps * e2e
    cap = run["sent"] if limit is None else min(limit, run["sent"])
    how = f"{_figure(qps)} requests/s x {_figure(e2e)} s mean e2e"
    placed = _littles_place(
        where, how, in_flight, cap, "check request_latency (seconds) and requests_per_second"
    )
    load = f"rate {run['rate']:g} requests/s" if run["rate"] is not None else "throughput"
    notes.append(
        f"{where}: a {run['kind']} benchmark at {load} holds the requests its load brings: placed "
        f"where Little's law puts it ({how} = {in_flight:.3g}): concurrency {placed}"
    )
    return placed, in_flight


def read_guidellm(
    path: str | os.PathLike, *, model_id: str | None = None, **attrs: object
) -> xr.Dataset:
    """Read a GuideLLM report (``guidellm benchmark --output-path benchmarks.json``) into a curve.

    Parameters
    ----------
    path
        The report's JSON file: ``metadata`` (schema ``version`` 1 or 2: GuideLLM 0.5.0 to
        0.7.x) and ``benchmarks``, one per strategy GuideLLM ran.
    model_id
        Say that the benchmarks, of this model (their ``config.backend.model``), are of ``model``.
        By default a ``model`` the benchmarks' ``config.backend.model`` does not name is an error
        naming both, as for :func:`read_vllm_bench`'s ``model_id``.
    **attrs
        Stored on the curve: ``model``, ``gpu``, ``tensor_parallel``, ``engine`` ...

    Returns
    -------
    xarray.Dataset
        The curve: ``latency`` (s) over ``concurrency``, ``metric`` and ``latency_quantile``,
        ``mean_latency`` (s) and ``measured_qps`` (requests/s).

    Notes
    -----
    Each benchmark's ``metrics.<name>.successful`` distribution is read (successful requests
    only): its ``mean`` and ``percentiles`` ``p50``, ``p90``, ``p95``, ``p99``, of
    ``time_to_first_token_ms`` (ttft), ``inter_token_latency_ms`` (tpot: per request,
    (last token - first token) / (output tokens - 1), what vLLM calls TPOT) and
    ``request_latency`` (e2e), milliseconds and seconds converted to seconds. The throughput is
    ``requests_per_second.successful.mean``, the workload ``prompt_token_count`` and
    ``output_token_count`` (successful means, averaged over the benchmarks).

    Benchmarks are placed as :func:`read_vllm_bench` places runs: synchronous (at 1), concurrent
    (at ``streams``) and throughput with a ``max_concurrency`` are closed loops, read at their
    concurrency once their latencies and throughput agree (2x either way); a constant or poisson
    rate (like a vllm bench run at a finite ``--request-rate``) and throughput with no limit are
    read at their measured mean in flight, requests/s x mean e2e (Little's law), rounded (noted).
    Two benchmarks at one concurrency are an error: read such a sweep with
    :func:`read_bench_runs`, which keeps each as a run at its rate.
    """
    path = user_path(path, "GuideLLM report")
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    documents = _json_documents(path, _text(path))
    if len(documents) != 1 or not _is_guidellm(documents[0][1]):
        raise ConfigError(
            f"{path}: not a GuideLLM report (a JSON object with 'metadata' and 'benchmarks', as "
            "guidellm benchmark --output-path benchmarks.json writes it)"
        )
    report = documents[0][1]
    runs = [_guidellm_run(b, where) for where, b in _guidellm_benchmarks(path.name, report)]
    notes = [f"GuideLLM {report['metadata'].get('guidellm_version', '?')} report"]
    _one_configuration(_guidellm_models(path.name, report), model_id, attrs, [], str(path))
    seen: dict[int, str] = {}
    for run in runs:
        if run["errored"] is not None and run["errored"] > 0:
            notes.append(
                f"{run['where']}: {run['errored']:,.0f} of {run['sent']:,} requests failed "
                f"('metrics.request_totals.errored'): its latencies and throughput are of the "
                f"{run['requests']:,} successful"
            )
        run["concurrency"], run["in_flight"] = _guidellm_place(run, notes)
        if run["concurrency"] in seen:
            raise ConfigError(
                f"{path}: {seen[run['concurrency']]} and {run['where']} both fall at concurrency "
                f"{run['concurrency']}: a latency curve holds one run per concurrency; read the "
                "report with read_bench_runs (each benchmark a run at its own rate), or keep one"
            )
        seen[run["concurrency"]] = run["where"]
    runs.sort(key=lambda r: r["concurrency"])
    return _curve.build(
        [r["concurrency"] for r in runs],
        {key: [r["latency"][key] for r in runs] for key in runs[0]["latency"]},
        mean={m: [r["mean"][m] for r in runs] for m in runs[0]["mean"]},
        measured_qps=[r["qps"] for r in runs],
        rows=[r["where"] for r in runs],
        source=str(path),
        attrs={
            "prompt_tokens": float(np.mean([r["prompt_tokens"] for r in runs])),
            "output_tokens": float(np.mean([r["output_tokens"] for r in runs])),
            **attrs,
        },
        notes=notes,
        in_flight=[r["in_flight"] for r in runs],
    )


def _guidellm_rows(where: str, report: Mapping, base: Mapping, seen: dict) -> list[dict]:
    """:func:`read_bench_runs`' rows of a GuideLLM report: one run per benchmark.

    ``seen`` maps each (mode, load) already read to where it was read; a benchmark at one of them
    is an error, as a second vllm bench run at one load is.
    """
    rows = []
    for label, bench in _guidellm_benchmarks(where, report):
        run = _guidellm_run(bench, label)
        if run["rate"] is not None:
            mode, load = "request_rate", run["rate"]
        elif run["limit"] is not None:
            mode, load = "concurrency", run["limit"]
        else:
            mode, load = "batch", run["requests"]
        _one_run_per_load(seen, mode, float(load), label)
        _check_guidellm_run(run, label)
        if mode == "request_rate" and run["limit"] is not None:
            how = f"{_figure(run['qps'])} requests/s x {_figure(run['mean']['e2e'])} s mean e2e"
            _check_rate_cap(label, run["rate"], run["limit"], run["qps"] * run["mean"]["e2e"], how)
        head = {**base, "input_tokens": run["prompt_tokens"], "output_tokens": run["output_tokens"],
                "mode": mode, "load": float(load), "requests": run["requests"],
                "arrival_cv": _GUIDELLM_ARRIVAL_CV.get(run["kind"], math.nan)
                if mode == "request_rate" else math.nan, "backend": None}  # fmt: skip
        # in vllm bench runs' order (metric, then mean and percentiles), so that one set of runs
        # gives one table whichever tool wrote it
        for metric, _, _ in _GUIDELLM_METRICS:
            stats = [("mean", run["mean"][metric])]
            stats += [(f"p{round(q * 100)}", run["latency"][(metric, q)]) for q in _curve.QUANTILES]
            rows += [{**head, "metric": metric, "stat": stat, "value": value, "unit": "s"}
                     for stat, value in stats if value > 0]  # fmt: skip
        rows += _throughput_row(head, run["qps"])
    return rows


def _check_guidellm_run(run: dict, where: str) -> None:
    """A GuideLLM benchmark :func:`read_bench_runs` cannot calibrate on: an error naming the field.

    As :func:`read_guidellm` refuses it: a negative latency, a higher percentile below a lower
    one, a mean length under one token, or latencies and throughput that disagree
    (:func:`_guidellm_place`: a closed loop's, or more requests in flight than were sent).
    """
    fields = {}
    for metric, name, unit in _GUIDELLM_METRICS:
        summary = f"metrics.{name}.successful"
        figures = [("mean", f"{summary}.mean", run["mean"][metric])]
        figures += [(f"p{round(q * 100)}", f"{summary}.percentiles.p{round(q * 100)}",
                     run["latency"][(metric, q)]) for q in _curve.QUANTILES]  # fmt: skip
        for stat, field, value in figures:
            if value < 0:
                written = value * {"ms": 1000.0, "s": 1.0}[unit]
                raise ConfigError(f"{where}: field {field!r} is {written:g}: a latency is never "
                                  "negative")  # fmt: skip
            fields[metric, stat] = (field, value)
    _check_percentiles(where, fields)
    for kind in ("prompt", "output"):
        if run[f"{kind}_tokens"] < 1:
            raise ConfigError(
                f"{where}: field 'metrics.{kind}_token_count.successful.mean' is "
                f"{run[f'{kind}_tokens']:g}, not a mean of at least one token per request"
            )
    _guidellm_place(run, [])


def _throughput_row(base: Mapping, qps: float | None) -> list[dict]:
    """A run's measured ``request_throughput`` row (requests/s), as the bundled runs' tables hold.

    The fit reads latencies only; the row is what the run served, for the worksheets to show
    beside the calibrated curve's prediction. None, or not a number > 0: no row.
    """
    if qps is None or not (math.isfinite(qps) and qps > 0):
        return []
    return [{**base, "metric": "request_throughput", "stat": "value", "value": float(qps),
             "unit": "requests/s"}]  # fmt: skip


def _exports_hint(folder: Path) -> str:
    """What to do with AIPerf or GenAI-Perf per-run exports found in a folder or its sub-folders."""
    runs = sorted(
        str(p.relative_to(folder))
        # (kept side by side, a user's runs carry a prefix: c4_profile_export_aiperf.csv)
        for pattern in ("*profile_export*.csv", "*/*profile_export*.csv")
        for p in folder.glob(pattern)
        if not p.name.endswith(("_sweep.csv",))
    )
    if not runs:
        return ""
    shown = ", ".join(runs[:2]) + (f" and {len(runs) - 2:,} more" if len(runs) > 2 else "")
    return (
        f"; it holds AIPerf or GenAI-Perf per-run exports ({shown}), which do not record their "
        "concurrency: give their sweep file (profile_export_aiperf_sweep.csv or "
        "analyze_export_genai_perf.csv), or read the runs with "
        "capnb.data.read_aiperf({concurrency: path, ...}) (runs at a request rate: "
        "read_aiperf([path, ...]), which places them by Little's law)"
    )


def _tables_hint(folder: Path) -> str:
    """The CSV benchmark files (a table, an AIPerf sweep) a folder holds, to give on their own."""
    found = []
    for path in sorted(folder.glob("*.csv")):  # a CSV's form is read from its header
        try:
            kind = benchmark_format(path) if path.is_file() else None
        except ConfigError:  # no benchmark file: not one capnb would read
            continue
        if kind is not None:
            found.append((path, kind))
    if not found:
        return ""
    shown = ", ".join(f"{p.name} ({FORMAT_WORDS[kind]})" for p, kind in found[:3])
    more = f" and {len(found) - 3:,} more" if len(found) > 3 else ""
    return (
        f"; it holds {shown}{more}: give the file itself (--benchmark {found[0][0]}, "
        f"[serving] latency = '{found[0][0]}'), a folder is read for its JSON results only"
    )


#: What each reader of :func:`read_benchmark` reads, in words (its ``format`` attr names the reader).
FORMAT_WORDS = {
    "vllm": "vllm bench serve or SGLang bench_serving results",
    "guidellm": "a GuideLLM report",
    "aiperf": "AIPerf or GenAI-Perf exports",
    "table": "a latency table",
}


def benchmark_format(path: str | os.PathLike) -> str:
    """The reader a measured latency file (or folder) needs: vllm, guidellm, aiperf or table.

    A ``.json`` GuideLLM report (``metadata`` and ``benchmarks``) is ``guidellm``. A folder or a
    ``.json``/``.jsonl`` file of ``vllm bench serve`` or SGLang ``bench_serving`` results (one,
    or several appended one a line) is ``vllm`` (a JSON-lines table with a
    ``concurrency`` field is a ``table``; any other JSON is an error saying what it is); a CSV
    with a ``Metric`` column or AIPerf's ``<tag>_<stat>_mean`` / GenAI-Perf's ``Config Name``
    columns is ``aiperf``; a CSV or Parquet table with a ``concurrency`` column and
    ``<metric>_<stat>[_<unit>]`` columns is a ``table``.

    Raises
    ------
    ConfigError
        The path does not exist, or its form is none of these (the message says what it holds).
    """
    path = user_path(path, "benchmark")
    if path.is_dir():
        files = _result_files(path)
        if len(files) == 1 and files[0].suffix.lower() == ".json":  # one GuideLLM report
            return "guidellm" if benchmark_format(files[0]) == "guidellm" else "vllm"
        if files:
            return "vllm"
        raise ConfigError(
            f"{path}: a folder of measured latencies holds vllm bench JSON files, and this one "
            f"holds none{_exports_hint(path) or _tables_hint(path)}"
        )
    if not path.is_file():
        raise ConfigError(f"{path}: no such benchmark file or folder")
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        if suffix == ".jsonl":
            first = next((line for line in _text(path).splitlines() if line.strip()), "")
            try:
                record = parse_json(first, f"{path.name}, line 1")
            except json.JSONDecodeError as err:
                raise ConfigError(f"{path}: not valid JSON ({err.msg} at line 1)") from None
        else:  # one result, or several appended one a line (vllm bench serve --append-result)
            record = _json_documents(path, _text(path))[0][1]
        if _is_guidellm(record):
            return "guidellm"
        keys = set(record) if isinstance(record, dict) else set()
        if "concurrency" in keys and not keys & {"max_concurrency", "request_throughput"}:
            return "table"
        _check_result_json(record, str(path))
        return "vllm"
    if suffix in (".parquet", ".pq"):
        return "table"
    if suffix == ".csv":
        header = [h.strip() for h in _first_line(path).split(",")]
        lowered = {h.lower() for h in header}
        if "metric" in lowered or "config name" in lowered:
            return "aiperf"
        if any(re.fullmatch(r"[a-z_]+_(avg|p\d+)_mean", h) for h in lowered):
            return "aiperf"
        if "concurrency" in lowered:
            return "table"
        if lowered & {"max_concurrency", "request_throughput", "mean_ttft_ms"}:
            return "vllm"
        raise ConfigError(
            f"{path}: not a latency table (no 'concurrency' column), an AIPerf / GenAI-Perf export "
            f"or flattened vllm bench results; columns: {header[:12]}"
        )
    raise ConfigError(
        f"{path}: measured latencies are vllm bench or GuideLLM JSON, AIPerf / GenAI-Perf CSV, or a CSV / "
        "Parquet table"
    )


def _first_line(path: Path) -> str:
    with path.open("rb") as handle:
        return decode_text(handle.readline(), path).strip()


def read_benchmark(
    path: str | os.PathLike, *, model_id: str | None = None, **attrs: object
) -> xr.Dataset:
    """Read measured latency files of any supported form into a latency curve.

    The form comes from :func:`benchmark_format`; ``attrs`` (``model``, ``gpu``,
    ``tensor_parallel``, ``engine``...) are stored on the curve as by :func:`read_vllm_bench`,
    :func:`read_guidellm`, :func:`read_aiperf` and :func:`read_latency_table`. The curve's
    ``format`` attr names the reader.
    ``model_id`` picks one model's runs from ``vllm bench serve`` files (:func:`read_vllm_bench`),
    or says a GuideLLM report's benchmarks are of ``model`` (:func:`read_guidellm`).
    """
    kind = benchmark_format(path)
    if kind == "vllm":
        curve = read_vllm_bench(path, model_id=model_id, **attrs)
    elif kind == "guidellm":  # (a folder holds the one report)
        found = user_path(path, "benchmark")
        found = _result_files(found)[0] if found.is_dir() else found
        curve = read_guidellm(found, model_id=model_id, **attrs)
    elif kind == "aiperf":
        curve = read_aiperf(path, **attrs)
    else:
        curve = read_latency_table(path, **attrs)
    curve.attrs["format"] = kind
    return curve


#: Latency keys of a vllm bench serve / SGLang bench_serving result: (metric, key names).
_RUN_METRICS = {
    "ttft": ("ttft",),
    "tpot": ("tpot",),
    "itl": ("itl",),
    "e2e": ("e2el", "e2e_latency"),
}
_RUN_STATS = {"mean": "mean", "median": "p50", "p50": "p50", "p90": "p90", "p95": "p95",
              "p99": "p99"}  # fmt: skip


def _check_run_units(where, record, rows, limit: int, output_tokens: float) -> None:
    """A closed-loop run's mean latencies must agree with its measured throughput (Little's law)."""
    qps = _number(record, "request_throughput", where, required=False)
    if qps is None:  # vLLM 0.4's name for it
        qps = _number(record, "request_inthroughput", where, required=False)
    if qps is None or not math.isfinite(qps) or qps <= 0:
        return
    mean = {r["metric"]: r["value"] for r in rows if r["stat"] == "mean"}
    e2e = mean.get("e2e")
    if e2e is None and "ttft" in mean and "tpot" in mean:
        e2e = float(_e2e_of_tokens(mean, output_tokens))
    _check_closed_loop(where, limit, qps, None, e2e)


#: The share of a rate run's arrivals that may find its max_concurrency full for
#: :func:`read_bench_runs` to read it as a rate run with no cap (what calibrate simulates).
HELD_BACK = 0.01


def _vllm_in_flight(record: Mapping, where: str, completed: float) -> tuple[float, str]:
    """A vllm bench / SGLang result's mean requests in flight, and how it was found."""
    measured = _number(record, "concurrency", where, required=False)
    if measured is not None and math.isfinite(measured) and measured > 0:
        return measured, "SGLang's measured concurrency"
    qps = _number(record, "request_throughput", where, required=False)
    e2e_ms = next((v for k in ("mean_e2el_ms", "mean_e2e_latency_ms")
                   if (v := _number(record, k, where, required=False)) is not None), None)  # fmt: skip
    ttft = _number(record, "mean_ttft_ms", where, required=False)
    tpot = _number(record, "mean_tpot_ms", where, required=False)
    derived = ""
    if e2e_ms is None and ttft is not None and tpot is not None:
        output = _number(record, "total_output_tokens", where) / completed
        e2e_ms, derived = ttft + tpot * max(output - 1.0, 0.0), " (mean TTFT + mean TPOT x tokens)"
    if qps is None or e2e_ms is None:
        raise ConfigError(
            f"{where}: a run at a request rate with a max_concurrency needs 'request_throughput' "
            "and a mean e2e latency ('mean_e2el_ms', or 'mean_ttft_ms' and 'mean_tpot_ms') to "
            "tell whether its max_concurrency held requests back"
        )
    e2e = e2e_ms / 1000.0
    return qps * e2e, f"{_figure(qps)} requests/s x {_figure(e2e)} s mean e2e{derived}"


def _check_rate_cap(where: str, rate: float, limit: float, in_flight: float, how: str) -> None:
    """A run at a request rate whose max_concurrency held requests back is an error.

    ``vllm bench serve --request-rate R --max-concurrency C`` (and GuideLLM's rate strategies
    with a ``max_concurrency``) keep a request in the client while C are in flight: its wait is
    in no latency the run measured, and the engine model simulates the rate with no cap. The
    cap is taken to hold nothing back when under :data:`HELD_BACK` of Poisson arrivals at the
    run's measured mean in flight m would find C in flight (P(N >= C), N ~ Poisson(m): the
    number in flight of Poisson arrivals with no cap).
    """
    full = 1.0 - sum(
        math.exp(k * math.log(in_flight) - in_flight - math.lgamma(k + 1))
        for k in range(int(limit))
    ) if in_flight > 0 else 0.0  # fmt: skip
    if full >= HELD_BACK:
        raise ConfigError(
            f"{where}: a run at request_rate {rate:g} with max_concurrency {limit:g} held requests "
            f"back in the client: {how} = {in_flight:.3g} in flight on average (request_throughput "
            f"x mean e2e): {min(full, 1.0):.0%} of its arrivals would find {limit:g} in flight, "
            "and their wait there is in no latency the run measured, while calibrate simulates "
            "the rate with no cap; rerun without --max-concurrency (or with one well above the "
            "load), or at --max-concurrency alone (request rate inf), or leave the run out"
        )


def _one_run_per_load(seen: dict, mode: str, load: float, where: str) -> None:
    """Note a run at (mode, load) read at ``where``; a second run there is an error naming both.

    Whichever tool wrote them (vllm bench, SGLang bench_serving, GuideLLM): the rows of two runs
    at one load would mix into one point, or one run's would be dropped for the other's.
    """
    if (mode, load) in seen:
        raise ConfigError(
            f"{where}: a second run at {mode} {load:g} (the first: {seen[mode, load]}); "
            "keep one run per load (or average the repeats before reading)"
        )
    seen[mode, load] = where


def _arrival_cv(record: Mapping, where: str) -> float:
    """A rate run's arrival gaps' coefficient of variation: 1 / sqrt(vllm bench's ``burstiness``).

    ``--burstiness`` b draws the gaps from a Gamma distribution of shape b: 1 is Poisson (CV 1),
    0.25 bursts (CV 2); a result without the field ran at 1.
    """
    burstiness = _number(record, "burstiness", where, required=False)
    if burstiness is None:
        return 1.0
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise ConfigError(
            f"{where}: field 'burstiness' is {burstiness:g}: vllm bench serve's burstiness is a "
            "number > 0 (1: Poisson arrivals; below 1 burstier, above 1 more even)"
        )
    return 1.0 / math.sqrt(burstiness)


def _check_percentiles(where: str, fields: Mapping) -> None:
    """A run's higher percentile below a lower one of the same metric: an error naming both.

    ``fields`` maps (metric, stat) to (the field's name in the file, its value in seconds).
    """
    for metric in dict.fromkeys(m for m, _ in fields):
        held = [fields[metric, s] for s in ("p50", "p90", "p95", "p99") if (metric, s) in fields]
        for (low_name, low), (high_name, high) in itertools.pairwise(held):
            if high < low:
                raise ConfigError(
                    f"{where}: field {high_name!r} ({high:.6g} s) is below {low_name!r} "
                    f"({low:.6g} s): a higher percentile of one run's latencies is never below a "
                    "lower one (a figure mistyped, or two runs' figures mixed)"
                )


def _run_tokens(where: str, record: Mapping, field: str, completed: float) -> float:
    """A vllm bench result's mean tokens per completed request: ``field`` / ``completed``.

    Every completed request has a prompt and an output of at least one token, so ``field``
    (``total_input_tokens`` or ``total_output_tokens``) below ``completed`` is an error.
    """
    total = _number(record, field, where)
    if not (math.isfinite(total) and total >= completed):
        raise ConfigError(
            f"{where}: field {field!r} is {total:g}, not a token count of at least one for each "
            f"of the {completed:g} completed requests"
        )
    return total / completed


def read_bench_runs(paths, *, model: str, gpu: str, tensor_parallel: int, engine: str,
                    engine_version: str = "", dtype: str = "bf16", source: str = "own run",
                    model_id: str | None = None):  # fmt: skip
    """Read ``vllm bench serve`` / SGLang ``bench_serving`` results or GuideLLM reports as runs.

    Unlike :func:`read_vllm_bench` (a curve over concurrency), each run keeps how it was made: a
    request rate (``--request-rate``: ``mode`` ``request_rate``), a fixed concurrency
    (``--max-concurrency`` with an infinite rate: ``concurrency``) or every prompt at once
    (``batch``), and its number of requests; what :func:`capnb.latency.calibrate` fits the engine
    model on. A run at a request rate with a ``max_concurrency`` (``--request-rate R
    --max-concurrency C``) is read as a rate run only where C held nothing back (under
    :data:`HELD_BACK` of its arrivals would find C in flight at its measured mean in flight);
    otherwise it is an error, as the engine model simulates a rate with no cap. A GuideLLM report
    (:func:`read_guidellm` says which fields are read) gives one run per benchmark: a constant or
    poisson ``rate`` is ``request_rate``, synchronous (1), concurrent (``streams``) and throughput
    with a ``max_concurrency`` are ``concurrency``, throughput with no limit is ``batch``.

    ``model_id``, as in :func:`read_vllm_bench`: read only the runs of this model (their
    ``model_id``) when the files hold several, and take them as runs of ``model`` whatever their
    ``model_id``; by default runs of two models, or of a ``model_id`` that does not name
    ``model``, are an error.

    Returns
    -------
    pandas.DataFrame
        :func:`load_measurements`' columns (``source``, ``gpu``, ``model``, ``engine``,
        ``engine_version``, ``tensor_parallel``, ``dtype``, ``input_tokens``, ``output_tokens``
        (the run's means), ``mode``, ``load``, ``metric``, ``stat``, ``value`` (s), ``unit``;
        the latencies, then the run's measured ``request_throughput``, stat ``value``, in
        requests/s, where the file records it), plus ``requests`` (the run's completed
        requests) and ``arrival_cv`` (a rate run's arrival gaps' coefficient of variation, which
        calibration simulates: 1 / sqrt of vllm bench's ``--burstiness``, 1 for Poisson; NaN for
        the other modes), and ``backend`` (the server the result file says the client was
        pointed at, None where it says none), which :func:`capnb.latency.calibrate` checks
        against ``engine``, a table concatenated with others too. ``attrs["backends"]``: each
        result file's ``backend``, by file, to name it.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> run = {"request_rate": 4.0, "completed": 400, "total_input_tokens": 400000,
    ...        "total_output_tokens": 51200, "duration": 110.0, "mean_ttft_ms": 120.0,
    ...        "median_ttft_ms": 100.0, "p99_ttft_ms": 400.0, "median_tpot_ms": 14.0}
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "rate4.json").write_text(json.dumps(run))
    >>> table = read_bench_runs(folder, model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
    ...                         engine="vllm", engine_version="0.11.0")
    >>> [str(v) for v in table[["mode", "load", "metric", "stat", "value"]].iloc[0]]
    ['request_rate', '4.0', 'ttft', 'mean', '0.12']
    """
    import pandas as pd

    from ._catalog import resolve_gpu

    gpu_id = resolve_gpu(gpu)
    rows = []
    records = _records(paths)
    label = str(paths) if isinstance(paths, str | os.PathLike) else "the files given"
    # runs of two models (or of another model or GPU than the one named) are one error, as in
    # read_vllm_bench: a calibration on them would mix two models' latencies under one name
    reports = [m for w, r in records if _is_guidellm(r) for m in _guidellm_models(w, r)]
    kept = _one_configuration([(w, r) for w, r in records if not _is_guidellm(r)] + reports,
                              model_id, {"model": model, "gpu": gpu_id,
                                         "tensor_parallel": tensor_parallel}, [], label)  # fmt: skip
    kept_ids = {id(r) for _, r in kept}  # (model_id= leaves out the other models' runs)
    records = [(w, r) for w, r in records if _is_guidellm(r) or id(r) in kept_ids]
    seen: dict[tuple[str, float], str] = {}
    backends: dict[str, str] = {}
    for where, record in records:
        if _is_guidellm(record):
            rows += _guidellm_rows(where, record, {
                "source": source, "gpu": gpu_id, "model": model, "engine": engine,
                "engine_version": engine_version, "tensor_parallel": int(tensor_parallel),
                "dtype": dtype}, seen)  # fmt: skip
            continue
        _check_result_json(record, where)
        if isinstance(record.get("backend"), str):  # the server it was pointed at, said
            backends[where] = record["backend"]
        completed = _number(record, "completed", where)
        if not completed or completed < 1:
            raise ConfigError(f"{where}: no completed request")
        if not _whole_count(completed):
            raise ConfigError(
                f"{where}: field 'completed' is {completed:g}, not a whole number of requests"
            )
        rate = _number(record, "request_rate", where, required=False)
        limit = _number(record, "max_concurrency", where, required=False)
        if rate is not None and math.isfinite(rate):
            mode, load = "request_rate", rate
        elif limit is not None and math.isfinite(limit):
            mode, load = "concurrency", limit
        else:
            mode, load = "batch", completed
        _one_run_per_load(seen, mode, float(load), where)
        if mode == "request_rate" and limit is not None and math.isfinite(limit):
            _check_rate_cap(where, rate, limit, *_vllm_in_flight(record, where, completed))
        base = {
            "source": source, "gpu": gpu_id, "model": model, "engine": engine,
            "engine_version": engine_version, "tensor_parallel": int(tensor_parallel),
            "dtype": dtype, "input_tokens": _run_tokens(where, record, "total_input_tokens", completed),
            "output_tokens": _run_tokens(where, record, "total_output_tokens", completed),
            "mode": mode, "load": float(load), "requests": int(completed),
            "arrival_cv": _arrival_cv(record, where) if mode == "request_rate" else math.nan,
            "backend": backends.get(where),
        }  # fmt: skip
        found, fields = 0, {}
        for metric, names in _RUN_METRICS.items():
            for prefix, stat in _RUN_STATS.items():
                for name in names:
                    value = _number(record, f"{prefix}_{name}_ms", where, required=False)
                    if value is not None and value < 0:
                        raise ConfigError(f"{where}: field '{prefix}_{name}_ms' is {value:g}: a "
                                          "latency is never negative")  # fmt: skip
                    if value is not None and math.isfinite(value) and value > 0:
                        rows.append({**base, "metric": metric, "stat": stat,
                                     "value": value / 1000.0, "unit": "s"})  # fmt: skip
                        fields[metric, stat] = (f"{prefix}_{name}_ms", value / 1000.0)
                        found += 1
                        break
        if not found:
            raise ConfigError(f"{where}: no latency figure (mean_ttft_ms, p99_tpot_ms, ...)")
        _check_percentiles(where, fields)
        qps = _number(record, "request_throughput", where, required=False)
        if mode == "request_rate" and qps is not None and math.isfinite(qps) and qps > 0:
            # its mean in flight (Little's law) is at most its requests: more is a latency in the
            # wrong unit (microseconds in *_ms fields), as read_vllm_bench refuses
            mean = {m: fields[m, "mean"][1] for m, stat in fields if stat == "mean"}
            in_flight, how, _ = _in_flight(record, where, qps, mean, base["output_tokens"])
            if in_flight is not None:
                _littles_place(where, how, in_flight, int(completed),
                               "check the latencies' unit (milliseconds in *_ms fields) and "
                               "request_throughput (requests/s)")  # fmt: skip
        if mode == "concurrency" and completed >= 2 * load:  # (fewer: no steady state to hold)
            # as read_vllm_bench: latencies 1000x off their throughput (seconds in *_ms fields)
            _check_run_units(where, record, rows[-found:], int(load), base["output_tokens"])
        rows += _throughput_row(base, _number(record, "request_throughput", where, required=False))
    table = pd.DataFrame(rows)
    table = table.drop_duplicates(["mode", "load", "metric", "stat"], keep="last")
    table = table.reset_index(drop=True)
    table.attrs["backends"] = backends
    return table

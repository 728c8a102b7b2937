"""Published serving-latency measurements in one long table (sources in ``datasets/README.md``).

Each file ``datasets/benchmarks/measured/<source>.csv`` holds one source's figures, one figure a row,
with the columns of :data:`MEASURED_COLUMNS`. :func:`load_measurements` reads and checks them; the
latency model is calibrated on them and validated leaving one source out.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from ..errors import InputError, UnknownNameError
from ._catalog import dataset_path, list_gpus
from ._files import read_csv_frame

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import pandas as pd

__all__ = [
    "MEASURED_COLUMNS",
    "list_measurement_sources",
    "load_measured_requests",
    "load_measurement_runs",
    "load_measurements",
]

MEASURED_COLUMNS = (
    "source",
    "gpu",
    "model",
    "engine",
    "engine_version",
    "tensor_parallel",
    "dtype",
    "input_tokens",
    "output_tokens",
    "mode",
    "load",
    "metric",
    "stat",
    "value",
    "unit",
)
_TEXT = (
    "source",
    "gpu",
    "model",
    "engine",
    "engine_version",
    "dtype",
    "mode",
    "metric",
    "stat",
    "unit",
)
_NUMBERS = ("tensor_parallel", "input_tokens", "output_tokens", "load", "value")
MODES = ("concurrency", "request_rate", "batch")
# metric -> the unit its values are in
METRIC_UNITS = {
    "ttft": "s",
    "tpot": "s",
    "itl": "s",
    "e2e": "s",
    "output_throughput": "tokens/s",
    "request_throughput": "requests/s",
}
LATENCY_STATS = ("mean", "p50", "p90", "p95", "p99")
THROUGHPUT_STATS = ("value",)


#: The folder of the sources the calibration is fitted on, and of those kept from every fit.
_FOLDERS = {False: "measured", True: "unseen"}
#: How each collection's runs were made (:func:`load_measurement_runs`).
_RUN_FILES = {False: "measured_runs.csv", True: "unseen_runs.csv"}


def _folder(unseen: bool = False) -> Path:
    return dataset_path("benchmarks", _FOLDERS[bool(unseen)])


def _files(unseen: bool = False) -> dict[str, Path]:
    return {path.stem: path for path in sorted(_folder(unseen).glob("*.csv"))}


def list_measurement_sources() -> dict[str, int]:
    """The bundled measurement sources and the number of figures (rows) each holds.

    Examples
    --------
    >>> sources = list_measurement_sources()
    >>> sources["dstack-mi300x-tgi-vs-vllm"] > 0
    True
    """
    return {name: len(_read(path)) for name, path in _files().items()}


def load_measurements(source: str | None = None, *, unseen: bool = False) -> pd.DataFrame:
    """Published latency and throughput measurements, one figure per row.

    Parameters
    ----------
    source
        One source's name (see :func:`list_measurement_sources`); ``None`` reads them all.
    unseen
        Read the sources kept out of every calibration (``datasets/benchmarks/unseen/``: bundled
        after the stored fit, scored by :mod:`capnb.latency.unseen`, never fitted) instead of
        those the calibration is fitted on (``measured/``).

    Returns
    -------
    pandas.DataFrame
        Columns ``source``, ``gpu`` (catalog id), ``model`` (catalog id, or the Hugging Face id where
        the catalog lacks the model), ``engine``, ``engine_version``, ``tensor_parallel``, ``dtype``,
        ``input_tokens``, ``output_tokens`` (mean tokens per request of the run), ``mode``
        (``concurrency``: a fixed number of requests in flight, ``load`` = that number;
        ``request_rate``: open-loop arrivals, ``load`` in requests/s; ``batch``: all requests sent at
        once, ``load`` = their number), ``metric`` (``ttft``, ``tpot``, ``itl``, ``e2e`` in seconds;
        ``output_throughput`` in tokens/s; ``request_throughput`` in requests/s), ``stat``
        (``mean``, ``p50``, ``p90``, ``p95``, ``p99``; ``value`` for throughputs), ``value`` and
        ``unit``.

    Raises
    ------
    UnknownNameError
        ``source`` is not a bundled source.
    InputError
        A file breaks the schema; the message names the file and the row (1 = the header).

    Examples
    --------
    >>> table = load_measurements("dstack-mi300x-tgi-vs-vllm")
    >>> sorted(table.engine.unique())
    ['TGI', 'vLLM']
    """
    import pandas as pd

    files = _files(unseen)
    if source is None:
        frames = [_read(path) for path in files.values()]
    elif source in files:
        frames = [_read(files[source])]
    else:
        raise UnknownNameError("measurement source", source, files)
    if not frames:
        return pd.DataFrame({column: [] for column in MEASURED_COLUMNS})
    return pd.concat(frames, ignore_index=True)


def _read(path: Path) -> pd.DataFrame:
    frame = read_csv_frame(path, dtype=str, keep_default_na=False)
    return _validate(frame, path.name, path.stem)


def _validate(frame: pd.DataFrame, file: str, source: str) -> pd.DataFrame:
    """Check one source's table; returns it with numeric columns as numbers."""
    if tuple(frame.columns) != MEASURED_COLUMNS:
        raise InputError(
            f"{file}: columns must be exactly {', '.join(MEASURED_COLUMNS)}; "
            f"found {', '.join(map(str, frame.columns))}"
        )
    gpus = set(list_gpus())
    numbers = {column: [] for column in _NUMBERS}
    for i, row in enumerate(frame.itertuples(index=False), start=2):
        where = f"{file} row {i}"
        fields = row._asdict()
        for column in _TEXT:
            if not fields[column].strip():
                raise InputError(f"{where}: {column} is empty")
        if fields["source"] != source:
            raise InputError(
                f"{where}: source {fields['source']!r} is not the file's name {source!r}"
            )
        if fields["gpu"] not in gpus:
            raise InputError(f"{where}: gpu {fields['gpu']!r} is not in the GPU catalog (gpus.csv)")
        if fields["mode"] not in MODES:
            raise InputError(f"{where}: mode {fields['mode']!r} is not one of {', '.join(MODES)}")
        metric = fields["metric"]
        if metric not in METRIC_UNITS:
            raise InputError(f"{where}: metric {metric!r} is not one of {', '.join(METRIC_UNITS)}")
        stats = THROUGHPUT_STATS if metric.endswith("throughput") else LATENCY_STATS
        if fields["stat"] not in stats:
            raise InputError(
                f"{where}: stat {fields['stat']!r} of {metric} is not one of {', '.join(stats)}"
            )
        if fields["unit"] != METRIC_UNITS[metric]:
            raise InputError(
                f"{where}: unit {fields['unit']!r} of {metric} must be {METRIC_UNITS[metric]!r}"
            )
        for column in _NUMBERS:
            text = fields[column]
            try:
                number = float(text)
            except ValueError:
                raise InputError(f"{where}: {column} {text!r} is not a number") from None
            if not (math.isfinite(number) and number > 0):
                raise InputError(f"{where}: {column} {text!r} must be positive and finite")
            numbers[column].append(number)
        if float(fields["tensor_parallel"]) != int(float(fields["tensor_parallel"])):
            raise InputError(
                f"{where}: tensor_parallel {fields['tensor_parallel']!r} is not a whole number"
            )
    frame = frame.copy()
    for column, values in numbers.items():
        frame[column] = values
    frame["tensor_parallel"] = frame["tensor_parallel"].astype("int64")
    return frame


#: Columns of ``measured_runs.csv``: how each measured run was made (blank: any, or not stated).
RUN_COLUMNS = (
    "source", "engine", "gpu", "tensor_parallel", "model", "mode", "load", "input_tokens",
    "output_tokens", "requests", "lengths", "input_min", "input_max", "output_min", "output_max",
    "max_model_len", "max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "policy",
    "attention_data_parallel", "client", "fp8_scaling", "note",
)  # fmt: skip
#: How an FP8 checkpoint's weights are scaled (``fp8_scaling``): one scale a tensor, a row, or a
#: block of weights (128 x 128 in DeepSeek-V3's and Qwen3's FP8 releases).
FP8_SCALINGS = ("tensor", "channel", "block")
#: How a run's request lengths are known: every request at the mean, uniform between the bounds,
#: each request's own (``requests/<source>.csv``), or drawn from a dataset whose lengths are not
#: bundled (ShareGPT: simulated at the means, and the percentiles of E2E, which follow the
#: output lengths' spread, are not compared), or SGLang's ``bench_serving --dataset-name random``
#: at its default seed (``sglang-random``: see :func:`load_measurement_runs`).
LENGTHS = ("mean", "uniform", "requests", "dataset", "sglang-random")
#: The seed ``sglang.bench_serving`` sets for numpy and Python's ``random`` when none is given.
SGLANG_BENCH_SEED = 1
_RUN_NUMBERS = ("tensor_parallel", "load", "input_tokens", "output_tokens", "requests",
                "input_min", "input_max", "output_min", "output_max", "max_model_len", "max_num_seqs",
                "max_num_batched_tokens", "chunked_prefill", "attention_data_parallel")  # fmt: skip
REQUEST_COLUMNS = ("gpu", "tensor_parallel", "mode", "load", "request", "input_tokens",
                   "output_tokens", "ttft_s", "e2e_s")  # fmt: skip


def load_measurement_runs(*, unseen: bool = False) -> pd.DataFrame:
    """How the measured runs were made: run length, request lengths, the engine's flags.

    ``unseen``: the runs of the sources kept out of every calibration (``unseen_runs.csv``, for
    ``load_measurements(unseen=True)``) instead of ``measured_runs.csv``.

    One row per (source, engine, gpu, tensor_parallel, model, mode, load, input_tokens,
    output_tokens) pattern; a blank key matches any value, a mean token count any run within
    30 % of it (the most specific matching row applies). ``requests``: the run's
    number of requests (blank: not stated); ``lengths``: ``mean``, ``uniform`` (between
    ``input_min``/``input_max`` and ``output_min``/``output_max`` tokens) or ``requests`` (each
    request's own, :func:`load_measured_requests`); ``max_model_len``, ``max_num_seqs``,
    ``max_num_batched_tokens`` (0: no limit), ``chunked_prefill`` (0/1), ``policy``: the flags the
    run set (blank: the engine's default); ``attention_data_parallel``: ranks that run attention
    data-parallel inside the tensor-parallel group (SGLang's ``--enable-dp-attention``: each holds
    the KV cache of its own requests); ``client``: ``offline`` when the run timed the engine in
    its own process (a static batch, an offline latency or throughput script: no HTTP server, no
    tokenising on the way), blank or ``online`` when a client timed requests sent to the server
    (``vllm bench serve``, SGLang's ``bench_serving``, GenAI-Perf and the like);
    ``fp8_scaling``: where the run served FP8 weights, how its checkpoint scales them
    (:data:`FP8_SCALINGS`; blank: as the catalog's config of the model says, where the catalog
    holds the BF16 release of a model whose FP8 release was run). Numbers are NaN where blank.

    ``sglang-random`` lengths: the run is ``sglang.bench_serving --dataset-name random`` at its
    default seed and range ratio, so its ``requests`` prompts are numpy's seeded draws (uniform on
    ``input_min``..``input_max`` tokens), reproduced by the simulation; such a row needs
    ``requests`` and the four length bounds.

    Examples
    --------
    >>> runs = load_measurement_runs()
    >>> int(runs.query("source == 'dstack-h100-vllm-405b-fp8'").max_model_len.iloc[0])
    91680
    """
    import pandas as pd

    path = dataset_path("benchmarks", _RUN_FILES[bool(unseen)])
    frame = read_csv_frame(path, dtype=str, keep_default_na=False)
    if tuple(frame.columns) != RUN_COLUMNS:
        raise InputError(f"{path.name}: columns must be exactly {', '.join(RUN_COLUMNS)}")
    sources = set(_files(unseen))
    out = frame.copy()
    for i, row in enumerate(frame.itertuples(index=False), start=2):
        where = f"{path.name} row {i}"
        if row.source not in sources:
            raise InputError(
                f"{where}: source {row.source!r} has no file in {_FOLDERS[bool(unseen)]}/"
            )
        if row.lengths not in LENGTHS:
            raise InputError(f"{where}: lengths {row.lengths!r} is not one of {', '.join(LENGTHS)}")
        if unseen and row.lengths == "requests":
            raise InputError(f"{where}: lengths 'requests' reads measured requests/ files, which "
                             "hold fitted sources only; give mean or uniform lengths")  # fmt: skip
        if row.policy and row.policy not in ("mixed", "prefill_first"):
            raise InputError(f"{where}: policy {row.policy!r} is not mixed or prefill_first")
        if row.client not in ("", "online", "offline"):
            raise InputError(f"{where}: client {row.client!r} is not online or offline")
        if row.fp8_scaling not in ("", *FP8_SCALINGS):
            raise InputError(f"{where}: fp8_scaling {row.fp8_scaling!r} is not one of "
                             f"{', '.join(FP8_SCALINGS)}")  # fmt: skip
    for column in _RUN_NUMBERS:
        values = pd.to_numeric(frame[column].replace("", None), errors="coerce")
        bad = frame[column].ne("") & values.isna()
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0]) + 2
            raise InputError(
                f"{path.name} row {row}: {column} {frame[column][row - 2]!r} is not a number"
            )
        out[column] = values.astype(float)
    _check_sglang_random(out, path.name)
    return out


def _check_sglang_random(runs, name: str) -> None:
    """Every ``sglang-random`` row gives what the client's draws need, or its row is named."""
    for i, row in enumerate(runs.to_dict("records"), start=2):
        if row["lengths"] != "sglang-random":
            continue
        for column in ("requests", "input_min", "input_max", "output_min", "output_max"):
            if not math.isfinite(row[column]):
                raise InputError(f"{name} row {i}: lengths 'sglang-random' needs {column} (the "
                                 "client's --num-prompts and length bounds)")  # fmt: skip


#: The per-request source whose lengths stand for ShareGPT as the serving benchmarks draw it.
SHAREGPT_SOURCE = "dstack-h100-vllm-405b-fp8"


@functools.cache
def sharegpt_lengths() -> tuple:
    """ShareGPT's request lengths as the serving benchmarks draw them: (prompt, output) tokens.

    No ShareGPT file is bundled; :data:`SHAREGPT_SOURCE`'s run is one: vLLM's
    ``benchmark_serving.py`` drew 1,000 ShareGPT conversations (its filters: 4 to 1,024 prompt
    tokens, 2,048 in all, at least 4 output tokens), Llama-3.1's tokenizer counted them, and the
    run at 16 requests/s kept each request's prompt and output tokens. The prompts are all
    1,000 (mean 215.2 tokens; median 83); the outputs those of the 621 requests whose stream
    carried text (mean 194.3; median 169; the others ended at once and tell no length). The
    two are returned apart (their pairing is not kept: a request that ended at once has no
    output length), in the file's order, read-only (read once a process).

    Examples
    --------
    >>> prompt, output = sharegpt_lengths()
    >>> prompt.size, output.size, round(float(prompt.mean()), 1), round(float(output.mean()), 1)
    (1000, 621, 215.2, 194.3)
    """
    import numpy as np

    table = load_measured_requests(SHAREGPT_SOURCE)
    run = table[table.load == 16].sort_values("request")
    output = run.output_tokens.to_numpy(np.int64)
    prompt, output = run.input_tokens.to_numpy(np.int64), output[output >= 1]
    prompt.flags.writeable = output.flags.writeable = False  # (cached: one read a process)
    return prompt, output


def load_measured_requests(source: str) -> pd.DataFrame:
    """Each request of a source's runs (``datasets/benchmarks/requests/<source>.csv``), in order.

    Columns :data:`REQUEST_COLUMNS`: the run (``gpu``, ``tensor_parallel``, ``mode``, ``load``),
    the request's index in the run, its ``input_tokens`` and ``output_tokens`` (tokens) and its
    measured ``ttft_s`` and ``e2e_s`` (seconds). A request whose stream carried no text (the
    client counted 0 output tokens and no first token: it ended at once) has ``output_tokens`` 0
    and both times 0; it was served (one step of prefill) but not timed.

    Examples
    --------
    >>> table = load_measured_requests("dstack-h100-vllm-405b-fp8")
    >>> len(table), int(table.input_tokens.sum())
    (3000, 645588)
    """
    import pandas as pd

    path = dataset_path("benchmarks", "requests", f"{source}.csv")
    if not path.exists():
        raise UnknownNameError("per-request measurement source", source, sorted(
            p.stem for p in dataset_path("benchmarks", "requests").glob("*.csv")))  # fmt: skip
    frame = pd.read_csv(path)
    if tuple(frame.columns) != REQUEST_COLUMNS:
        raise InputError(f"{path.name}: columns must be exactly {', '.join(REQUEST_COLUMNS)}")
    if (frame.input_tokens < 1).any() or (frame.output_tokens < 0).any():
        raise InputError(f"{path.name}: a request has no input token or a negative output count")
    return frame

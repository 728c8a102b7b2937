"""Published serving-latency measurements in one long table (sources in ``datasets/README.md``).

Each file ``datasets/benchmarks/measured/<source>.csv`` holds one source's figures, one figure a row,
with the columns of :data:`MEASURED_COLUMNS`. :func:`load_measurements` reads and checks them; the
latency model is calibrated on them and validated leaving one source out.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..errors import InputError, UnknownNameError
from ._catalog import dataset_path, list_gpus

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import pandas as pd

__all__ = ["MEASURED_COLUMNS", "list_measurement_sources", "load_measurements"]

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


def _folder() -> Path:
    return dataset_path("benchmarks", "measured")


def _files() -> dict[str, Path]:
    return {path.stem: path for path in sorted(_folder().glob("*.csv"))}


def list_measurement_sources() -> dict[str, int]:
    """The bundled measurement sources and the number of figures (rows) each holds.

    Examples
    --------
    >>> sources = list_measurement_sources()
    >>> sources["dstack-mi300x-tgi-vs-vllm"] > 0
    True
    """
    return {name: len(_read(path)) for name, path in _files().items()}


def load_measurements(source: str | None = None) -> pd.DataFrame:
    """Published latency and throughput measurements, one figure per row.

    Parameters
    ----------
    source
        One source's name (see :func:`list_measurement_sources`); ``None`` reads them all.

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

    files = _files()
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
    import pandas as pd

    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
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

"""Catalogs and readers: the bundled ``datasets/`` and users' own files.

Bundled data is read through :func:`dataset_path`, which finds ``datasets/`` inside an installed wheel
(``capnb/datasets``) or beside the package in a source checkout. Every file's source and license is in
``datasets/README.md``.

- GPU profiles: :func:`list_gpus`, :func:`load_gpus` (an ``xarray.Dataset`` over ``gpu``),
  :func:`resolve_gpu`.
- Models: :func:`list_models`, :func:`load_model` (a catalog name, a path to a ``config.json`` or a
  mapping) returning a :class:`capnb.modelspec.ModelSpec`; :func:`resolve_model`.
- Latency measurements: :func:`read_latency_table`, :func:`read_vllm_bench`, :func:`read_guidellm`,
  :func:`read_aiperf` (users' benchmark files as latency curves), :func:`list_latency_curves`,
  :func:`load_latency_curve` (bundled curves), :func:`load_step_times` (calibration data),
  :func:`load_trtllm_throughput` (published throughput bounds).
- Files: :func:`user_path` and :func:`read_text` check what a user gives where it enters;
  :func:`write_atomic` and :func:`write_set` write capnb's outputs whole (:func:`settle`);
  :func:`check_set` refuses, before the work, a set write_set would refuse at the end.
"""

from ._benchmarks import (
    benchmark_format,
    read_aiperf,
    read_bench_runs,
    read_benchmark,
    read_guidellm,
    read_latency_table,
    read_vllm_bench,
)
from ._blocks import MOONCAKE_BLOCK_TOKENS, load_block_hashes
from ._catalog import (
    catalog_is_own,
    dataset_path,
    gpu_column,
    list_gpus,
    list_models,
    load_gpus,
    load_model,
    own_gpu_figures,
    resolve_gpu,
    resolve_model,
)
from ._files import (
    check_set,
    json_error_at,
    number_too_long,
    read_text,
    settle,
    user_path,
    write_atomic,
    write_section,
    write_set,
)
from ._measured import (
    list_measurement_sources,
    load_measured_requests,
    load_measurement_runs,
    load_measurements,
    sharegpt_lengths,
)
from ._measurements import (
    list_latency_curves,
    load_latency_curve,
    load_step_times,
    load_trtllm_throughput,
)
from ._prices import PRICINGS, gpu_prices, load_gpu_prices
from ._rates import load_rate_series
from ._traces import (
    TRACE_FORMATS,
    TraceWarning,
    list_rate_series,
    list_traces,
    load_trace,
)
from ._traffic import TRAFFIC_KINDS, load_traffic, traffic_columns

__all__ = [
    "MOONCAKE_BLOCK_TOKENS",
    "PRICINGS",
    "TRACE_FORMATS",
    "TRAFFIC_KINDS",
    "TraceWarning",
    "benchmark_format",
    "catalog_is_own",
    "check_set",
    "dataset_path",
    "gpu_column",
    "gpu_prices",
    "json_error_at",
    "list_gpus",
    "list_latency_curves",
    "list_measurement_sources",
    "list_models",
    "list_rate_series",
    "list_traces",
    "load_block_hashes",
    "load_gpu_prices",
    "load_gpus",
    "load_latency_curve",
    "load_measured_requests",
    "load_measurement_runs",
    "load_measurements",
    "load_model",
    "load_rate_series",
    "load_step_times",
    "load_trace",
    "load_traffic",
    "load_trtllm_throughput",
    "number_too_long",
    "own_gpu_figures",
    "read_aiperf",
    "read_bench_runs",
    "read_benchmark",
    "read_guidellm",
    "read_latency_table",
    "read_text",
    "read_vllm_bench",
    "resolve_gpu",
    "resolve_model",
    "settle",
    "sharegpt_lengths",
    "traffic_columns",
    "user_path",
    "write_atomic",
    "write_section",
    "write_set",
]

"""Catalogs and readers: the bundled ``datasets/`` and users' own files.

Bundled data is read through :func:`dataset_path`, which finds ``datasets/`` inside an installed wheel
(``capnb/datasets``) or beside the package in a source checkout. Every file's source and license is in
``datasets/README.md``.

- GPU profiles: :func:`list_gpus`, :func:`load_gpus` (an ``xarray.Dataset`` over ``gpu``),
  :func:`resolve_gpu`.
- Models: :func:`list_models`, :func:`load_model` (a catalog name, a path to a ``config.json`` or a
  mapping) returning a :class:`capnb.modelspec.ModelSpec`; :func:`resolve_model`.
"""

from ._catalog import (
    dataset_path,
    list_gpus,
    list_models,
    load_gpus,
    load_model,
    resolve_gpu,
    resolve_model,
)
from ._rates import load_rate_series
from ._traces import (
    TRACE_FORMATS,
    TraceWarning,
    list_rate_series,
    list_traces,
    load_trace,
)

__all__ = [
    "TRACE_FORMATS",
    "TraceWarning",
    "dataset_path",
    "list_gpus",
    "list_models",
    "list_rate_series",
    "list_traces",
    "load_gpus",
    "load_model",
    "load_rate_series",
    "load_trace",
    "resolve_gpu",
    "resolve_model",
]

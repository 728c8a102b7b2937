"""Latency-concurrency curves: measured ones made monotone and interpolated, and the analytic model.

The article's lesson for step 3 starts here: LLM latency grows non-linearly with concurrency, so the
number an instance can safely hold comes from a latency-concurrency curve, not from memory alone. A
curve (see :mod:`capnb._curve`) is a Dataset over ``concurrency``, ``metric`` (ttft, tpot, itl, e2e)
and ``latency_quantile`` (0.5, 0.9, 0.95, 0.99), in seconds.

Measured curves come from :mod:`capnb.data` (``read_latency_table``, ``read_vllm_bench``,
``read_aiperf``, ``load_latency_curve``). :func:`envelope` makes them monotone (a noisy point never
creates a dip; each raised point is noted) and :func:`at` interpolates between measured points and
never past the last one.

:func:`engine` simulates a serving engine (continuous batching with a waiting queue, admission by
KV blocks and running-sequence limit, a token budget per step, chunked prefill, preemption, prefix
caching; each engine's scheduling policy and defaults by release:
:class:`~capnb.records.EngineSettings`) for one :class:`~capnb.records.Deployment` (model, GPU,
degree, dtypes) request by request, in a closed loop (fixed concurrency) or an open loop (a
request rate), and returns the same curve with its knee; it is calibrated on published latencies
per GPU and engine (:mod:`capnb.latency.validate` reports its leave-one-source-out error).
:func:`calibrate` fits it to your own benchmark runs.

:func:`analytic` computes curves for models and GPUs nobody measured, from the model's architecture,
the GPU's catalog figures, a calibration (:mod:`capnb.calibration`) and the workload's prompt and
output length distribution (:func:`workload`, e.g. from the bundled Azure traces). The model and its
assumptions are described in :mod:`capnb.kernels.latency`.
"""

from __future__ import annotations

from ..records import Deployment, EngineSettings
from . import calibration
from ._curves import (
    METRICS,
    QUANTILES,
    analytic,
    at,
    check,
    concurrency_grid,
    envelope,
    notes,
    workload,
)
from ._engine import engine, knee
from ._engines import ENGINES, engine_settings
from ._fitted import engine_calibration
from ._own import OWN_RUN_MISS, CalibrationWarning, calibrate

__all__ = [
    "ENGINES",
    "METRICS",
    "OWN_RUN_MISS",
    "QUANTILES",
    "CalibrationWarning",
    "Deployment",
    "EngineSettings",
    "analytic",
    "at",
    "calibrate",
    "calibration",
    "check",
    "concurrency_grid",
    "engine",
    "engine_calibration",
    "engine_settings",
    "engine_validation",
    "envelope",
    "knee",
    "notes",
    "workload",
]


def engine_validation():
    """The stored leave-one-dataset-out table of the engine model (a pandas DataFrame).

    Its errors are relative, abs(predicted / measured - 1), as fractions.

    See :func:`capnb.latency.validate.engine_validation` (imported on call, so that ``python -m
    capnb.latency.validate`` runs the module once).
    """
    from . import validate

    return validate.engine_validation()

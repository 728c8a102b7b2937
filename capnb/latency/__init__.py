"""Latency-concurrency curves: measured ones made monotone and interpolated, and the analytic model.

The article's lesson for step 3 starts here: LLM latency grows non-linearly with concurrency, so the
number an instance can safely hold comes from a latency-concurrency curve, not from memory alone. A
curve (see :mod:`capnb._curve`) is a Dataset over ``concurrency``, ``metric`` (ttft, tpot, itl, e2e)
and ``latency_quantile`` (0.5, 0.9, 0.95, 0.99), in seconds.

Measured curves come from :mod:`capnb.data` (``read_latency_table``, ``read_vllm_bench``,
``read_aiperf``, ``load_latency_curve``). :func:`envelope` makes them monotone (a noisy point never
creates a dip; each raised point is noted) and :func:`at` interpolates between measured points and
never past the last one.

:func:`analytic` computes curves for models and GPUs nobody measured, from the model's architecture,
the GPU's catalog figures, a calibration (:mod:`capnb.calibration`) and the workload's prompt and
output length distribution (:func:`workload`, e.g. from the bundled Azure traces). The model and its
assumptions are described in :mod:`capnb.kernels.latency`.
"""

from __future__ import annotations

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

__all__ = [
    "METRICS",
    "QUANTILES",
    "analytic",
    "at",
    "calibration",
    "check",
    "concurrency_grid",
    "envelope",
    "notes",
    "workload",
]

"""The bundled engine calibration: read from ``engine_calibration.json`` beside this module.

The file is written by ``python -m capnb.latency.validate --write VALIDATION.md`` (a joint fit on
every bundled measurement, :mod:`capnb.latency._fit`: per GPU its efficiencies, per serving engine
its step overheads), with the held-out record. Until it exists the engine uses the step-time
calibration (:func:`capnb.latency.calibration.calibration_for`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from . import calibration as _calibration

PATH = Path(__file__).with_name("engine_calibration.json")
#: Fields a GPU's fit sets, and those an engine's fit sets.
GPU_FIELDS = ("compute_efficiency", "bandwidth_efficiency", "interconnect_efficiency")
ENGINE_FIELDS = ("step_overhead_s", "sequence_overhead_s", "allreduce_latency_s",
                 "request_overhead_s", "frontend_s")  # fmt: skip
#: Fields every GPU and engine shares in a fit (stored once).
SHARED_FIELDS = ("expert_efficiency", "expert_compute_efficiency", "fp8_compute_efficiency")


@functools.cache
def stored() -> dict | None:
    """The stored fit and validation (a dict), or None when none was written yet."""
    if not PATH.exists():
        return None
    return json.loads(PATH.read_text(encoding="utf-8"))


def from_record(record: dict, label: str) -> _calibration.Calibration:
    """A Calibration from a stored record (the analytic model's six fields and the engine's own)."""
    fields = {k: float(record[k]) for k in _calibration.kernels.CALIBRATION_FIELDS}
    fields["request_overhead_s"] = float(record.get("request_overhead_s", 0.0))
    fields["expert_efficiency"] = float(record.get("expert_efficiency", 1.0))
    fields["frontend_s"] = float(record.get("frontend_s", 0.0))  # (fits before it had none)
    fields["expert_compute_efficiency"] = float(record.get("expert_compute_efficiency", 1.0))
    fields["fp8_compute_efficiency"] = float(record.get("fp8_compute_efficiency", 1.0))
    return _calibration.Calibration(**fields, fitted_on=label)


def from_fold(fit: dict, gpu: str, engine: str, label: str = "") -> _calibration.Calibration:
    """A GPU and engine's calibration from a stored fit.

    The GPU's efficiencies if it was fitted, the engine's overheads if it was fitted, the pooled
    values otherwise; the values every group shares (the routed experts' efficiencies) as fitted.
    """
    gpu_part = fit["gpus"].get(gpu, fit["pooled"])
    engine_part = fit["engines"].get(engine, fit["pooled"])
    values = {**fit["pooled"], **{k: gpu_part[k] for k in GPU_FIELDS},
              **{k: engine_part[k] for k in ENGINE_FIELDS if k in engine_part},
              **fit.get("shared", {})}  # fmt: skip
    seen = [what for what, known in (("GPU", gpu in fit["gpus"]), ("engine", engine in fit["engines"]))
            if not known]  # fmt: skip
    text = label or f"engine fit, {gpu}, {engine}"
    if seen:
        text += f" ({' and '.join(seen)} not measured: pooled values)"
    return from_record(values, text)


def engine_calibration(gpu: str, engine: str = "vllm-v1") -> _calibration.Calibration:
    """The engine calibration of a GPU and serving engine from the bundled fit.

    The GPU's own efficiencies if a source measured it, the engine's own overheads if a source
    measured it; the values pooled over every source otherwise (and the label says so).

    Examples
    --------
    >>> engine_calibration("H100-SXM").bandwidth_efficiency <= 1.0
    True
    """
    from ._engines import engine_id

    data = stored()
    if data is None or "engines" not in data["calibration"]:  # (none, or of an older layout)
        return _calibration.calibration_for(gpu)
    fit = data["calibration"]
    return from_fold(
        fit, gpu, engine_id(engine), f"engine fit ({fit['fitted_on']}), {gpu}, {engine}"
    )

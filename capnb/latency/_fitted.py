"""The bundled engine calibration: read from ``engine_calibration.json`` beside this module.

The file is written by ``python -m capnb.latency.validate --write VALIDATION.md`` (a joint fit on
every bundled per-request measurement, :mod:`capnb.latency._fit`), with the leave-one-source-out
table. Until it exists the engine uses the step-time calibration (:func:`calibration_for`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from . import calibration as _calibration

PATH = Path(__file__).with_name("engine_calibration.json")


@functools.cache
def stored() -> dict | None:
    """The stored fit and validation (a dict), or None when none was written yet."""
    if not PATH.exists():
        return None
    return json.loads(PATH.read_text(encoding="utf-8"))


def from_record(record: dict, label: str) -> _calibration.Calibration:
    """A Calibration from a stored record (the six fields)."""
    fields = {k: float(record[k]) for k in _calibration.kernels.CALIBRATION_FIELDS}
    fields["request_overhead_s"] = float(record.get("request_overhead_s", 0.0))
    return _calibration.Calibration(**fields, fitted_on=label)


def engine_calibration(gpu: str) -> _calibration.Calibration:
    """The engine calibration of a GPU: its own fit if measured, else the fit pooled over GPUs.

    Examples
    --------
    >>> engine_calibration("H100-SXM").bandwidth_efficiency <= 1.0
    True
    """
    data = stored()
    if data is None:
        return _calibration.calibration_for(gpu)
    fits = data["calibration"]
    if gpu in fits["gpus"]:
        return from_record(fits["gpus"][gpu], f"engine fit ({fits['fitted_on']}), {gpu}")
    return from_record(fits["pooled"], f"engine fit ({fits['fitted_on']}), pooled over GPUs")

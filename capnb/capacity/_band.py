"""The band of a capacity answer: requests/s per instance if latency is off as the model's was held out.

:func:`band_ratios` reads the latency model's held-out ratios measured / predicted, :func:`scaled_sla`
moves an SLA by them and :func:`band` puts the two answers at the scaled SLAs beside the answer
(``capnb.capacity.plan(..., latency_band=...)`` calls all three).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
import xarray as xr

from ..errors import InputError

#: The band's variables: (name, long name, units).
BAND_VARIABLES = (
    ("per_instance_qps_low", "requests/s per instance at the SLA, low end of the model's error band",
     "requests/s"),
    ("per_instance_qps_high",
     "requests/s per instance at the SLA, high end of the model's error band", "requests/s"),
    ("instances_low", "instances the band's high requests/s imply", "instances"),
    ("instances_high", "instances the band's low requests/s imply", "instances"),
)  # fmt: skip
#: The attrs a banded answer carries: the widest ratios over the metrics and the band in words.
BAND_ATTRS = ("band_ratio_low", "band_ratio_high", "band", "band_ratios")


def band_ratios(sla, *, model: str = "engine", metric: str | None = None) -> dict:
    """The latency model's held-out ratio measured / predicted, per metric the SLA bounds.

    Parameters
    ----------
    sla
        A :class:`capnb.records.SLA` (each bound gets its metric's ratio) or seconds of ``metric``.
    model
        ``"engine"`` or ``"analytic"``: whose held-out error (:func:`capnb.latency.validate.error_band`);
        ``"own-run"``: the engine calibrated on a source's own runs, its other rates and lengths.

    Returns
    -------
    dict
        ``{metric: (low, high)}``, the P10 and P90 of measured / predicted (ratios, unit 1); a
        metric with no held-out figure is left out, so ``{}`` means no band can be given.
    """
    from ..latency import validate
    from ..records import SLA

    if isinstance(sla, Mapping):  # the config's table, not seconds of `metric`
        bounds = ", ".join(f"{k}={v!r}" for k, v in sla.items())
        raise InputError(
            "band_ratios: sla must be a capnb.records.SLA or seconds of `metric`, got a "
            f"{type(sla).__name__} (write SLA({bounds}))"
        )
    metrics = list(sla.bounds) if isinstance(sla, SLA) else [metric or "e2e"]
    out = {}
    for name in metrics:
        low, high, figures = validate.error_band(name, model=model)
        if figures:
            out[name] = (float(low), float(high))
    return out


def _ratios(ratio, sla, metric: str | None) -> dict:
    """``(low, high)`` for every bound, or a mapping metric -> (low, high), checked."""
    from ..records import SLA

    metrics = list(sla.bounds) if isinstance(sla, SLA) else [metric or "e2e"]
    if isinstance(ratio, dict):
        pairs = dict(ratio)
        other = [name for name in pairs if name not in metrics]
        if other:
            raise InputError(
                f"latency_band: names {other}, which the SLA does not bound (it bounds {metrics})"
            )
    else:
        pairs = dict.fromkeys(metrics, ratio)
    out = {}
    for name, pair in pairs.items():
        low, high = _pair(pair)
        if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
            raise InputError(
                f"latency_band: {name}: the ratios must be two numbers > 0, low <= high; got {pair!r}"
            )
        out[name] = (low, high)
    return out


def _pair(pair) -> tuple[float, float]:
    """``(low, high)`` as floats; NaN for what is not two numbers (a number, a word, three)."""
    try:
        low, high = (math.nan, math.nan) if isinstance(pair, str) else map(float, pair)
    except (TypeError, ValueError):
        return math.nan, math.nan
    return low, high


def scaled_sla(sla, ratios: dict, side: str, *, metric: str | None = None):
    """The SLA where the model's curve must stand for latency ``side`` of its band to meet ``sla``.

    Latencies ``k`` times the curve's meet a bound where the curve meets ``bound / k``: ``side``
    ``"high"`` divides each bound by its metric's high ratio (a tighter SLA: fewer requests/s),
    ``"low"`` by its low ratio. Bounds of metrics without a ratio stay. A number stays a number
    (seconds of ``metric``); a list or DataArray of them is scaled alike.
    """
    from ..records import SLA

    index = {"low": 0, "high": 1}[side]
    if isinstance(sla, SLA):
        changed = {f"{m}_s": b / ratios[m][index] for m, b in sla.bounds.items() if m in ratios}
        # a scaled bound may leave the plausible range; it is a computation, not a user's slip
        return dataclasses.replace(sla, **changed, confirm=True)
    factor = 1.0 / ratios[metric or "e2e"][index]
    if isinstance(sla, xr.DataArray):
        return sla * factor
    if np.ndim(sla) == 0:
        return float(sla) * factor
    return [float(v) * factor for v in sla]


def band(result: xr.Dataset, tight: xr.Dataset, loose: xr.Dataset, ratio) -> xr.Dataset:
    """A capacity answer with its band: requests/s per instance if latency is off as held out.

    The latency model's held-out error says how far measured latency falls from predicted: its
    ratio measured / predicted lies between a low and a high (the P10 and P90,
    :func:`capnb.latency.validate.error_band`), one pair per metric the SLA bounds. Latencies
    ``k`` times the curve's meet an SLA where the curve meets ``SLA / k``, so the band is the same
    plan at two other SLAs (:func:`scaled_sla`): ``tight`` with every bound divided by its high
    ratio (latency higher than predicted: fewer requests/s per instance, more instances) and
    ``loose`` divided by its low ratio.

    Parameters
    ----------
    ratio
        ``(low, high)`` for every bound, or ``{metric: (low, high)}`` (:func:`band_ratios`).

    Returns
    -------
    xarray.Dataset
        ``result`` with ``per_instance_qps_low`` and ``per_instance_qps_high`` (requests/s) and
        ``instances_low`` and ``instances_high`` (instances; the low count goes with the high
        requests/s), and attrs ``band_ratio_low`` and ``band_ratio_high`` (the widest over the
        metrics), ``band`` (the band in words) and ``band_ratios`` (the ratios alone, "TTFT 0.69
        to 4.70; TPOT 0.74 to 2.83").
    """
    ratios = ratio if isinstance(ratio, dict) else {"": ratio}
    ratios = {m: _pair(pair) for m, pair in ratios.items()}
    for low, high in ratios.values():
        if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
            raise InputError(f"ratio must be two positive numbers, low <= high; got {ratio!r}")
    out = result.copy()
    values = {
        "per_instance_qps_low": tight.per_instance_qps,
        "per_instance_qps_high": loose.per_instance_qps,
    }
    if "instances" in tight and "instances" in loose:
        values |= {"instances_low": loose.instances, "instances_high": tight.instances}
    for name, long_name, units in BAND_VARIABLES:
        if name not in values:
            continue
        var = values[name]
        # the band's plans ran at other SLAs: their values stand at the answer's SLA
        var = (var.assign_coords(sla=result.sla.values) if "sla" in var.dims
               else var.drop_vars("sla", errors="ignore"))  # fmt: skip
        out[name] = var.assign_attrs(long_name=long_name, units=units)
    out.attrs["band_ratio_low"] = min(low for low, _ in ratios.values())
    out.attrs["band_ratio_high"] = max(high for _, high in ratios.values())
    each = "; ".join(
        f"{name.upper() + ' ' if name else ''}{low:.2f} to {high:.2f}"
        for name, (low, high) in ratios.items()
    )
    out.attrs["band"] = (
        f"requests/s per instance if measured latency is {each} times the model's (the P10-P90 "
        "of its held-out ratio measured / predicted)"
    )
    out.attrs["band_ratios"] = each
    return out

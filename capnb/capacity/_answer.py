"""The capacity step's answers in words, and the contrast the article draws (private module).

:func:`describe` turns one cell of a capacity result into the one-sentence answer a worksheet shows;
:func:`applicability` states the article's boundary (latency-constrained planning adds little where
latency barely grows with concurrency, or where memory, not the SLA, sets the limit);
:func:`contrast` puts the article's mistake in numbers: plan by maximum concurrency vs by latency.
All three are public as ``capnb.capacity.describe``, ``applicability`` and ``contrast``.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .. import glossary, words
from .. import latency as _latency
from ..errors import InputError
from ..units import instances_needed
from . import _safe as capacity

__all__ = ["applicability", "contrast", "describe"]


def contrast(
    curve: xr.Dataset,
    sla: float,
    target_qps: float,
    *,
    metric: str = "e2e",
    quantile: float = 0.99,
    buffer: int | None = None,
    memory_limit="auto",
    accounting: str = "article",
    tensor_parallel: int | None = None,
    usd_per_gpu_hour=None,
    by_latency: xr.Dataset | None = None,
) -> xr.Dataset:
    """The article's mistake, in numbers: plan by maximum concurrency vs plan by latency.

    The *max-concurrency* plan runs each instance at the most requests it can hold (the memory
    limit, or the curve's last point if memory allows more than was measured) and assumes each
    request is as fast as alone: per-instance QPS = that concurrency x QPS at concurrency 1. The
    *latency* plan is :func:`plan`. For both: the latency quantile at the operating concurrency
    (the max-concurrency plan's breaches the SLA when the curve is non-linear), the throughput an
    instance really delivers there (Little's law), the instances planned, the share of the target
    they really serve and the share of their GPUs' FLOP/s the requests they serve use (the
    idle GPU; a fleet short of the target computes only what it serves).

    ``by_latency`` is :func:`plan` of the same arguments when the caller has it already (a
    worksheet does); it is computed otherwise.

    Returns
    -------
    xarray.Dataset
        Over ``plan`` = ``["max_concurrency", "latency"]``: ``operating_concurrency``,
        ``latency_at_operating`` (s), ``assumed_qps`` and ``per_instance_qps`` (requests/s),
        ``instances``, ``served_share``, ``compute_utilisation``, ``usd_per_hour``.
    """
    if np.ndim(sla) != 0 or np.ndim(target_qps) != 0:
        raise InputError("contrast: give one SLA and one target_qps (numbers)")
    if int(curve.concurrency[0]) != 1:
        raise InputError(
            "contrast: the curve must start at concurrency 1 (the max-concurrency plan assumes "
            "every request runs as fast as one alone)"
        )
    if by_latency is None:
        by_latency = capacity.plan(
            curve, sla, target_qps, metric=metric, quantile=quantile, buffer=buffer,
            memory_limit=memory_limit, accounting=accounting, tensor_parallel=tensor_parallel,
            usd_per_gpu_hour=usd_per_gpu_hour,
        )  # fmt: skip
    # the curve's envelope, as the search reads it (kept per curve: a worksheet contrasts the same
    # curve again for each new SLA, target or buffer)
    selected, flat = capacity._flat(curve, metric, quantile)
    if selected.ndim != 1:
        raise InputError("contrast: give a single curve (select one model, GPU, ...)")
    last = int(curve.concurrency[-1])
    limit = by_latency.get("max_concurrency")
    held = last if limit is None else int(min(int(limit), last))
    if held < 1:
        raise InputError("contrast: the model does not fit in memory; there is nothing to contrast")
    at_held = capacity._CURVES.get(
        curve, ("at", metric, quantile, held), lambda: _latency.at(flat, [held])
    )
    p_held = float(at_held.latency.squeeze())
    e2e_held = float(at_held.mean_latency.squeeze())
    single = 1.0 / float(flat.mean_latency.isel(concurrency=0))
    assumed = held * single
    real = held / e2e_held
    count = buffer if buffer is not None else 2
    naive_instances = int(instances_needed(target_qps, assumed)) + count
    tp = tensor_parallel if tensor_parallel is not None else curve.attrs.get("tensor_parallel")
    price = capacity._gpu_price(curve.attrs.get("gpu"), usd_per_gpu_hour)
    flops_per_request, flops = capacity._model_flops(curve)

    def utilisation(count_instances, qps):
        if flops_per_request is None or tp is None or count_instances == 0:
            return math.nan  # not modelled, or no instance to use (a target of 0, no buffer)
        # GPUs compute the requests they serve: a fleet short of the target (the max-concurrency
        # plan's) serves count x qps, never more than its FLOP/s
        served = min(target_qps, count_instances * qps)
        return served * flops_per_request / (count_instances * tp * flops)

    lat_instances = float(by_latency.instances)
    operating = int(by_latency.operating_concurrency)
    # past the throughput knee the plan operates below its safe concurrency: its latency there
    p_operating = float(by_latency.latency_at_safe)
    if 1 <= operating < int(by_latency.safe_concurrency):
        p_operating = float(
            capacity._CURVES.get(
                curve, ("at", metric, quantile, operating), lambda: _latency.at(flat, [operating])
            ).latency.squeeze()
        )
    rows = {
        "operating_concurrency": [held, operating],
        "latency_at_operating": [p_held, p_operating],
        "assumed_qps": [assumed, float(by_latency.per_instance_qps)],
        "per_instance_qps": [real, float(by_latency.per_instance_qps)],
        "instances": [float(naive_instances), lat_instances],
        "served_share": [
            min(1.0, naive_instances * real / target_qps) if target_qps > 0 else 1.0,
            min(1.0, lat_instances * float(by_latency.per_instance_qps) / target_qps)
            if target_qps > 0
            else 1.0,
        ],
        "compute_utilisation": [
            utilisation(naive_instances, real),
            utilisation(lat_instances, float(by_latency.per_instance_qps)),
        ],
        "usd_per_hour": [
            math.nan if price is None or tp is None else naive_instances * tp * float(price),
            float(by_latency.get("usd_per_hour", math.nan)),
        ],
    }
    units = {
        "operating_concurrency": glossary.attrs("operating_concurrency"),
        "latency_at_operating": {"units": "s", "long_name": f"{metric} P{quantile * 100:g} there"},
        "assumed_qps": {"units": "requests/s", "long_name": "per-instance QPS the plan assumes"},
        "per_instance_qps": {"units": "requests/s", "long_name": "per-instance QPS delivered"},
        "instances": glossary.attrs("instances"),
        "served_share": {"units": "1", "long_name": "share of the target the plan serves"},
        "compute_utilisation": glossary.attrs("compute_utilisation"),
        "usd_per_hour": glossary.attrs("usd_per_hour"),
    }
    note = (
        {}
        if flops_per_request is not None and tp is not None
        else {"compute_note": _compute_unknown(curve, tp)}
    )
    return xr.Dataset(
        {name: ("plan", values, units[name]) for name, values in rows.items()},
        coords={"plan": ("plan", ["max_concurrency", "latency"], glossary.attrs("plan"))},
        attrs={
            **note,
            "sla": float(sla),
            "target_qps": float(target_qps),
            "metric": metric,
            "quantile": float(quantile),
            "binding": str(by_latency.binding.values),
            "max_concurrency_source": "memory limit"
            if limit is not None and int(limit) <= last
            else f"the curve's last point ({last}): memory allows more than was measured",
        },
    )


def _compute_unknown(curve: xr.Dataset, tensor_parallel) -> str:
    """Why a contrast's compute utilisation is not known: what the curve does not record."""
    missing = [name for name in ("model", "gpu") if capacity._names_of(curve, name) is None]
    if tensor_parallel is None:
        missing.append("tensor_parallel")
    if "prompt_tokens" not in curve.attrs:
        missing.append("prompt_tokens and output_tokens (mean tokens per request measured)")
    return (
        f"the curve does not record its {', '.join(missing)}; give them with the benchmark "
        "(capnb.data.read_benchmark(..., model=, gpu=, tensor_parallel=, prompt_tokens=, "
        "output_tokens=))"
    )


# -- the answer in words -------------------------------------------------------------------------
def _cell(result: xr.Dataset, selection: dict) -> xr.Dataset:
    cell = result.sel(selection) if selection else result
    for dim in list(cell.dims):
        if cell.sizes[dim] == 1:
            cell = cell.squeeze(dim)
    left = [d for d in cell.dims if d not in ("plan",)]
    if left:
        raise InputError(
            f"describe: choose one value of {', '.join(left)} "
            f"(e.g. describe(result, {left[0]}=...))"
        )
    return cell


def _seconds(value: float) -> str:
    return f"{value * 1e3:,.0f} ms" if value < 1 else f"{value:,.2f} s"


def _apart(value: float, bound: float) -> tuple[str, str]:
    """``value`` and ``bound`` in words, with digits enough to tell them apart (12.5 over 12 ms)."""
    texts = _seconds(value), _seconds(bound)
    digits = 3
    while texts[0] == texts[1] and value != bound and digits < 8:
        unit, scale = ("ms", 1e3) if max(value, bound) < 1 else ("s", 1.0)
        texts = tuple(f"{v * scale:.{digits}g} {unit}" for v in (value, bound))
        digits += 1
    return texts


def _where(cell: xr.Dataset) -> str:
    def value(name):
        if name in cell.coords:
            return cell[name].values.item()
        return cell.attrs.get(name)

    model, gpu, tp = value("model"), value("gpu"), value("tensor_parallel")
    where = f"{model} on {tp} x {gpu}" if model and gpu and tp else "this configuration"
    name = cell.attrs.get("curve")
    if cell.attrs.get("curve_kind") == "measured" and name:
        where += f" (measured curve {name})"
    elif cell.attrs.get("curve_kind") == "analytic":
        seq = value("seq_len")
        where += f" (analytic model, {int(seq):,} tokens per sequence)" if seq else " (analytic)"
    return where


def _bound(cell: xr.Dataset) -> tuple[str, float]:
    """The bound a cell's answer is about, in words (``tpot P99``), and its seconds.

    Under an :class:`capnb.records.SLA` of several bounds, the one that decides (``binding_metric``);
    where none does (memory binds), the first bound.
    """
    quantile = cell.attrs.get("quantile", 0.99)
    if "binding_metric" not in cell:
        metric = cell.attrs.get("metric", "latency")
        return f"{metric} P{quantile * 100:g}", float(cell.sla)
    bounds = {
        k.removesuffix("_s"): v for k, v in cell.attrs["sla_bounds"].items() if k.endswith("_s")
    }
    metric = str(cell.binding_metric.values) or next(iter(bounds))
    return f"{metric} P{quantile * 100:g}", float(bounds[metric])


def _drawn_between(cell: xr.Dataset, safe: int) -> str:
    """Where the safe concurrency lies between two points of the curve: its latency is drawn."""
    levels = np.asarray(cell.attrs.get("concurrency_levels", []), dtype=float)
    above = np.flatnonzero(levels > safe)
    if not above.size or not above[0] or levels[above[0] - 1] == safe:
        return ""
    measured = "measured " if cell.attrs.get("curve_kind") == "measured" else ""
    low, high = int(levels[above[0] - 1]), int(levels[above[0]])
    return f", drawn linearly between the {measured}{low:,} and {high:,}"


def describe(result: xr.Dataset, **selection: object) -> str:
    """The answer for one cell of a capacity result, in one plain sentence with its numbers.

    Parameters
    ----------
    result
        The output of :func:`capnb.capacity.safe_concurrency`, :func:`~capnb.capacity.plan` or
        :func:`~capnb.capacity.sweep`.
    **selection
        Coordinates that pick one cell (dims of length 1 need not be given).

    Examples
    --------
    >>> from capnb import capacity
    >>> from capnb.data import load_latency_curve
    >>> curve = load_latency_curve("dstack-vllm-mi300x-short")
    >>> describe(capacity.plan(curve, 0.3, 1.0, metric="ttft"))  # doctest: +ELLIPSIS
    'Infeasible: ttft P99 is already 315 ms at concurrency 1, above the 300 ms SLA...'
    """
    cell = _cell(result, selection)
    label, sla = _bound(cell)
    binding = str(cell.binding.values)
    where = _where(cell)
    floor = float(cell.latency_floor)
    first = cell.attrs.get("first_concurrency", 1)
    if binding == "infeasible_latency":
        floor_text, sla_text = _apart(floor, sla)
        return (
            f"Infeasible: {label} is already {floor_text} at concurrency 1, above the "
            f"{sla_text} SLA, so no concurrency of {where} meets it; a faster GPU, more "
            "tensor parallelism, shorter prompts or outputs, or a looser SLA are the ways out."
        )
    if binding == "infeasible_unmeasured":
        return (
            f"Infeasible as measured: {label} is {_seconds(floor)} at the curve's first point "
            f"(concurrency {first}), above the {_seconds(sla)} SLA, and nothing was measured "
            "below it; benchmark lower concurrencies before concluding."
        )
    if binding == "infeasible_memory":
        return (
            f"Infeasible: {where} cannot hold its weights plus one sequence in memory "
            "(memory step); raise tensor parallelism, pick a GPU with more memory, or quantize."
        )
    if binding == "memory_below_range":
        return (
            f"Memory holds only {int(cell.max_concurrency)} concurrent requests on {where}, below "
            f"the curve's first measured concurrency ({first}); benchmark lower concurrencies to "
            "size it."
        )
    if binding == "invalid_tensor_parallel":
        from ..memory._grid import unshardable_reason

        tp, model = int(cell.tensor_parallel), str(cell.model.values.item())
        why = unshardable_reason(cell.attrs.get("unshardable", []), model, tp)
        return (
            f"No plan for {where}: {why or 'that degree cannot shard the model'}; "
            "vLLM refuses to load it, so pick a degree that shards it."
        )
    if binding == "no_data":
        return (
            f"No latency for {where}: the model cannot price it (an invalid tensor-parallel degree, "
            "or a GPU without the interconnect bandwidth figure tensor parallelism needs)."
        )
    safe = int(cell.safe_concurrency)
    at_safe = float(cell.latency_at_safe)
    if binding == "latency":
        why = f"the SLA binds: {label} reaches {_seconds(at_safe)} there"
        if "binding_metric" in cell and len(cell.attrs["sla_bounds"]) > 2:  # several bounds
            why = f"the {label} bound binds: it reaches {_seconds(at_safe)} there"
        why += _drawn_between(cell, safe)
    elif binding == "memory":
        why = f"memory binds: the KV cache holds no more, while {label} is only {_seconds(at_safe)}"
    else:
        last = cell.attrs.get("last_concurrency", safe)
        why = (
            f"the curve ends at concurrency {last} with {label} still {_seconds(at_safe)}; capnb "
            "does not extrapolate, so measure further to find the real limit"
        )
    if str(cell.attrs.get("memory", "")).startswith("memory not checked"):
        why += f"; {cell.attrs['memory']}"  # the KV cache may hold fewer: said, not left out
    # points above the safe concurrency read at a smaller one's latency: the envelope may set it
    raised = [c for c in cell.attrs.get("raised_concurrency", []) if c > safe]
    if binding == "latency" and raised:
        why += (
            f"; {len(raised)} measured point{'s' if len(raised) > 1 else ''} (concurrency "
            f"{', '.join(map(str, raised))}) {'lie' if len(raised) > 1 else 'lies'} below a "
            f"smaller concurrency's latency and {'are' if len(raised) > 1 else 'is'} read at it, "
            "the curve made non-decreasing, so a noisy point may set this limit: see the result's "
            "notes and re-measure"
        )
    qps = float(cell.per_instance_qps)
    sentence = (
        f"At {cell.attrs.get('sla') or f'{label} <= {_seconds(sla)}'}, one instance of {where} "
        f"safely holds {safe:,} "
        f"concurrent requests ({why}) and serves {qps:.3g} requests/s by Little's law at "
        f"concurrency {int(cell.operating_concurrency):,}"
    )
    if "naive_qps" in cell and np.isfinite(float(cell.naive_qps)):
        naive = f"{float(cell.naive_qps):.3g}"
        sentence += (
            f" (the article's {safe:,} x single-request QPS would claim "
            f"{naive}, {float(cell.overstatement):.1f}x too high)"
            if naive != f"{qps:.3g}"  # at one request in flight it is capnb's figure
            else f" (the article's {safe:,} x single-request QPS gives the same {naive})"
        )
    if "instances" in cell and np.isfinite(float(cell.instances)):
        target = float(cell.target_qps)
        sentence += (
            f"; {words.rate(target)} requests/s need {words.count(cell.instances, 'instance')} "
            f"({cell.attrs.get('buffer', 'buffer')} included)"
        )
        if "gpus" in cell:
            sentence += f" = {words.count(cell.gpus, 'GPU')}"
        if "usd_per_hour" in cell and np.isfinite(float(cell.usd_per_hour)):
            sentence += f" at {float(cell.usd_per_hour):,.2f} USD/hour"
            if "usd_per_million_tokens" in cell and np.isfinite(float(cell.usd_per_million_tokens)):
                sentence += (
                    f" ({float(cell.usd_per_million_tokens):,.2f} USD per million output tokens)"
                )
        sentence += f", {words.percent(float(cell.utilisation))} utilised at the target"
    if "cost" in cell.attrs:
        sentence += f" ({cell.attrs['cost']})"
    return sentence + "."


def applicability(result: xr.Dataset, **selection: object) -> str:
    """The article's boundary for one cell: whether latency-constrained planning matters here.

    It adds little where the curve is close to linear in throughput (latency barely grows up to the
    safe concurrency, so the naive safe x single-request QPS is within 10 % of Little's law) or
    where the SLA is so loose that memory, not latency, sets the limit.

    Examples
    --------
    >>> from capnb import capacity
    >>> from capnb.data import load_latency_curve
    >>> curve = load_latency_curve("dstack-vllm-mi300x-short")
    >>> applicability(capacity.safe_concurrency(curve, 30.0, metric="ttft"))  # doctest: +ELLIPSIS
    'Latency-constrained planning matters here: ...'
    """
    cell = _cell(result, selection)
    binding = str(cell.binding.values)
    if binding not in capacity.FEASIBLE:
        return "The SLA cannot be met here, so the question of how to plan under it does not arise."
    if binding == "memory":
        return (
            "Latency-constrained planning adds little here: at this SLA memory, not latency, sets the "
            "limit; plan by memory and throughput (a looser SLA, or none, changes nothing)."
        )
    over = float(cell.overstatement) if "overstatement" in cell else math.nan
    if binding == "latency" and int(cell.safe_concurrency) <= 1:
        # at one request in flight the naive figure is Little's law by definition: the ratio says
        # nothing about linearity, and the latency bound binds as hard as it can
        held = int(cell.max_concurrency) if "max_concurrency" in cell else 0
        memory = f" (memory holds {held:,})" if held > 1 else ""
        return (
            "Latency-constrained planning matters here: the SLA holds only at one request in "
            f"flight{memory}, so an instance serves one request at a time; sizing it by memory or "
            "by a higher concurrency would break the SLA."
        )
    if np.isfinite(over) and over < 1.1:
        return (
            f"Latency-constrained planning adds little here: latency barely grows up to "
            f"{int(cell.safe_concurrency):,} concurrent requests (the naive safe x single-request "
            f"QPS overstates Little's law by only {max(over - 1, 0):.1%}), so the curve is close "
            "to linear in throughput."
        )
    if not np.isfinite(over):
        return (
            "Latency-constrained planning matters wherever latency grows with concurrency; this curve "
            "does not start at concurrency 1, so the naive figure cannot be compared."
        )
    return (
        f"Latency-constrained planning matters here: latency grows non-linearly with concurrency, "
        f"and planning by safe concurrency x single-request QPS would overstate throughput "
        f"{over:.1f}x."
    )

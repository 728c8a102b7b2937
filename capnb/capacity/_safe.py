"""Safe concurrency under a latency SLA, the per-instance rate, instances and cost of one plan."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .. import _validate, glossary, words
from .. import latency as _latency
from ..errors import InputError
from ..kernels import capacity as kernels
from ..memo import Kept
from ..records import SLA, bound_fault
from ..units import instances_needed, require_units

#: Values of ``binding``: what sets the safe concurrency, or why there is none.
BINDING = kernels.BINDING
#: The ``binding`` values of an option that meets the SLA (a safe concurrency of at least 1); the
#: others say why it cannot. The one place this is decided: the plan, charts and text ask here.
FEASIBLE = BINDING[:3]
_NO_MEMORY_LIMIT = np.iinfo(np.int64).max
#: The ``binding`` values a latency bound decides (so ``binding_metric`` names it).
_BOUND_DECIDES = ("latency", "infeasible_latency", "infeasible_unmeasured")
_LEAD = ("model", "gpu", "tensor_parallel", "seq_len")


# -- what a curve alone decides ------------------------------------------------------------------
# the latency quantile picked, its envelope and the memory limit depend on the curve (and the
# metric, quantile and memory settings in the key) only: a worksheet plans the same curve object
# again for each new SLA, target or buffer, so they are worked out once per curve
_CURVES = Kept()


def _flat(curve: xr.Dataset, metric: str, quantile: float) -> tuple[xr.DataArray, xr.Dataset]:
    """The latency the SLA bounds and the envelope the search reads (quantile and mean e2e)."""

    def make():
        selected = _curve_selection(curve, metric, quantile)
        mean = _mean_e2e(curve, selected)
        flat = _latency.envelope(
            xr.Dataset({"latency": selected, "mean_latency": mean}).assign_attrs(notes="")
        )
        return selected, flat

    return _CURVES.get(curve, ("flat", metric, quantile), make)


def _kept_memory_limit(curve: xr.Dataset, memory_limit, accounting: str, seq_len):
    """:func:`_memory_limit`, kept per curve for ``"auto"`` (the memory step's answer) and None."""
    if not (memory_limit is None or isinstance(memory_limit, str)):
        return _memory_limit(curve, memory_limit, accounting, seq_len)
    key = ("memory", memory_limit, accounting, seq_len)
    return _CURVES.get(curve, key, lambda: _memory_limit(curve, memory_limit, accounting, seq_len))


# -- inputs ---------------------------------------------------------------------------------------
def _sla(sla) -> xr.DataArray:
    if isinstance(sla, xr.DataArray):
        require_units(sla, "s", "sla")  # an SLA in ms is not read as seconds
    values = sla.values if isinstance(sla, xr.DataArray) else sla
    if np.asarray(values).dtype.kind not in "iuf":
        raise InputError(f"sla: expected seconds as a number or a list of numbers, got {values!r}")
    array = np.atleast_1d(np.asarray(values, dtype=float))
    if array.ndim != 1 or array.size == 0:
        raise InputError(f"sla: expected one value or a 1-D list of seconds, got {values!r}")
    bad = ~np.isfinite(array) | (array <= 0)
    if bad.any():
        first = float(array[bad][0])
        raise InputError(
            f"sla must be > 0 seconds, got {first:g} ({bound_fault(first, 'an SLA')}; SLAs are in seconds: "
            "500 ms is 0.5)"
        )
    if np.unique(array).size != array.size:
        raise InputError(f"sla: duplicate values in {array.tolist()}")
    return xr.DataArray(array, dims="sla", coords={"sla": ("sla", array, glossary.attrs("sla"))})


def _curve_selection(curve: xr.Dataset, metric: str, quantile: float) -> xr.DataArray:
    if not isinstance(curve, xr.Dataset) or "latency" not in curve:
        raise InputError("curve: expected a latency curve (capnb.data / capnb.latency)")
    if "concurrency" not in curve.latency.dims:
        over = ", ".join(d for d in curve.latency.dims if d not in ("metric", "latency_quantile"))
        raise InputError(
            f"curve: the safe concurrency is read on a curve over concurrency; this one is over "
            f"{over or 'no load'}"
            + (" (an open-loop capnb.latency.engine curve: simulate the closed loop with "
               "concurrency=..., or leave both out for its default grid)"
               if "request_rate" in curve.latency.dims else "")
        )  # fmt: skip
    _check_levels(curve)
    for dim, value in (("metric", metric), ("latency_quantile", quantile)):
        if dim not in curve.latency.dims:  # one selected: a scalar coordinate .sel cannot index
            raise InputError(
                f"curve.latency: over ({', '.join(curve.latency.dims)}), without a {dim} dim; "
                f"keep it when selecting one: curve.sel({dim}=[{value!r}])"
            )
    if metric not in curve.metric.values:
        raise InputError(f"metric={metric!r} is not in the curve ({curve.metric.values.tolist()})")
    quantiles = [float(q) for q in curve.latency_quantile.values]
    if not any(math.isclose(quantile, q) for q in quantiles):
        raise InputError(f"quantile={quantile} is not in the curve ({quantiles})")
    q = quantiles[[math.isclose(quantile, v) for v in quantiles].index(True)]
    selected = curve.latency.sel(metric=metric, latency_quantile=q, drop=True)
    negative = np.nonzero(selected.values < 0)
    if negative[0].size:
        at = dict(zip(selected.dims, (int(i[0]) for i in negative), strict=True))
        raise InputError(
            f"curve.latency: {metric} P{q * 100:g} is {float(selected[at]):.4g} s at concurrency "
            f"{int(curve.concurrency[at['concurrency']])}; a latency is a number of seconds >= 0"
        )
    if bool(selected.isnull().all()):
        if curve.attrs.get("unmodelled"):  # a modelled curve the model could not price: why
            raise InputError(str(curve.attrs["unmodelled"]))
        measured = [
            f"{m} P{q * 100:g}"
            for m in curve.metric.values
            for q in curve.latency_quantile.values
            if bool(curve.latency.sel(metric=m, latency_quantile=q).notnull().any())
        ]
        means = [
            f"{m} mean"
            for m in curve.metric.values
            if "mean_latency" in curve and bool(curve.mean_latency.sel(metric=m).notnull().any())
        ]
        hint = (
            f" (a mean is not a quantile: a P{quantile * 100:g} bound needs the run's "
            f"P{quantile * 100:g}, e.g. a {metric}_p{quantile * 100:g}_ms column)"
            if means and not measured
            else ""
        )
        raise InputError(
            f"the curve has no {metric} P{quantile * 100:g}; it measured: "
            f"{', '.join(measured + means) or 'nothing'}{hint}"
        )
    return selected


def _check_levels(curve: xr.Dataset) -> None:
    """Latencies in seconds (a curve in ms is not read as s); each concurrency once, increasing."""
    for name in ("latency", "mean_latency"):
        if name in curve:
            require_units(curve[name], "s", f"curve.{name}")
    levels = np.asarray(curve.concurrency.values)
    back = np.flatnonzero(np.diff(levels) <= 0)
    if back.size:
        at = int(back[0]) + 1
        raise InputError(
            f"curve.concurrency: {levels[at]} follows {levels[at - 1]} at position {at}; list "
            "each concurrency once, increasing (curve.sortby('concurrency'))"
        )


def _mean_e2e(curve: xr.Dataset, selected: xr.DataArray) -> xr.DataArray:
    if "mean_latency" not in curve or "e2e" not in curve.metric.values:
        raise InputError("the curve has no mean e2e latency: Little's law needs it")
    mean = curve.mean_latency.sel(metric="e2e", drop=True)
    # cells with latency but no mean e2e (NaN cells of an analytic sweep have neither)
    if bool((selected.notnull() & mean.isnull()).any()):
        raise InputError(
            "the curve has no mean e2e latency where it has latency: Little's law needs it (give "
            "e2e means, or the measured throughput, when reading the benchmark)"
        )
    return mean


def _names_of(curve: xr.Dataset, name: str):
    """A coordinate over a dim (a DataArray), a scalar coordinate's value, or the attr."""
    if name in curve.coords:
        coord = curve[name]
        return coord if coord.ndim else coord.values.item()
    return curve.attrs.get(name)


def _recorded_dtype(curve: xr.Dataset, name: str) -> str | None:
    """A dtype the curve records (``weight_dtype``/``kv_dtype`` coord or attr); None for "auto".

    Analytic curves record ``weight_dtype`` and ``kv_dtype`` in their attrs; a measured curve
    records them when its reader was given them (``read_vllm_bench(..., weight_dtype="fp8")``).
    A per-model coordinate must hold one value: the memory step takes one override.
    """
    value = _names_of(curve, name)
    if isinstance(value, xr.DataArray):
        values = sorted({str(v) for v in np.atleast_1d(value.values)})
        if len(values) > 1:
            raise InputError(
                f"memory_limit='auto': the curve's {name} differs between its models ({values}); "
                "pass memory_limit= from capnb.memory.max_concurrency per model"
            )
        value = values[0]
    if value is None or str(value) in ("auto", "", "None"):
        return None
    from ..data.modelspec import dtype_bytes

    dtype_bytes(str(value), argument=f"the curve's {name}")  # a clear error for a bad one
    return str(value)


def _at_curve_cells(curve: xr.Dataset, limit: xr.DataArray) -> xr.DataArray:
    """A given memory limit at the curve's labels.

    The memory step's answer over a larger grid (more GPUs, degrees or seq_lens) is selected down
    to the curve's; a label the curve has and the limit lacks is an error naming the argument.
    """
    labels = {}
    for dim in limit.dims:
        if dim not in curve.coords or dim not in limit.indexes:
            continue
        held = limit.indexes[dim]
        wanted = curve[dim].values
        missing = [v.item() for v in np.atleast_1d(wanted) if v not in held]
        if missing:
            raise InputError(
                f"memory_limit: its {dim} holds no {', '.join(map(str, missing))} of the curve's "
                f"(it holds {', '.join(map(str, held))}): size memory over the curve's {dim}"
            )
        labels[dim] = wanted
    return limit.sel(labels)


def _memory_limit(curve: xr.Dataset, memory_limit, accounting: str, seq_len: int | None = None):
    """(DataArray or None, note) of the memory limit the search applies."""
    if memory_limit is None:
        return None, "memory not checked (memory_limit=None)"
    if isinstance(memory_limit, xr.DataArray):
        require_units(memory_limit, "requests", "memory_limit")  # not kv_cache_tokens
        values = np.asarray(memory_limit.values)
        if values.dtype.kind not in "iuf" or not (np.isfinite(values) & (values >= 0)).all():
            raise InputError(
                f"memory_limit: requests must be finite and >= 0, got {values.ravel()[:8]}"
            )
        return _at_curve_cells(curve, memory_limit).astype(np.int64), "memory limit given"
    if isinstance(memory_limit, int | np.integer) and not isinstance(memory_limit, bool):
        if memory_limit < 0:
            raise InputError(f"memory_limit must be >= 0 requests, got {memory_limit}")
        return xr.DataArray(np.int64(memory_limit)), "memory limit given"
    if memory_limit != "auto":
        raise InputError(
            f"memory_limit must be 'auto', None, an integer or a DataArray, got {memory_limit!r}"
        )
    from .. import memory

    model, gpu, tp = (_names_of(curve, n) for n in ("model", "gpu", "tensor_parallel"))
    if model is None or gpu is None or tp is None:
        return None, (
            "memory not checked: the curve does not name its model, GPU and tensor parallelism "
            "(read it with model=..., gpu=..., tensor_parallel=...)"
        )
    # the curve's own precision: FP8 weights take half the bytes of bf16 ones
    weight_dtype = _recorded_dtype(curve, "weight_dtype")
    kv_dtype = _recorded_dtype(curve, "kv_dtype") or "auto"
    dtypes = (
        f" ({weight_dtype or 'config-dtype'} weights, {kv_dtype} KV cache, as the curve records)"
        if weight_dtype or kv_dtype != "auto"
        else ""
    )
    if isinstance(model, xr.DataArray):  # an analytic curve or stack: its own coords
        limit = memory.max_concurrency(
            model=[str(v) for v in np.atleast_1d(curve.model.values)],
            gpu=[str(v) for v in np.atleast_1d(curve.gpu.values)],
            tensor_parallel=[int(v) for v in np.atleast_1d(curve.tensor_parallel.values)],
            seq_len=[int(v) for v in np.atleast_1d(curve.seq_len.values)],
            accounting=accounting,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            invalid_tensor_parallel="mask",
        ).max_concurrency
        scalar = [d for d in _LEAD if d not in curve.latency.dims]
        note = f"memory: {accounting} accounting at seq_len per cell{dtypes}"
        return limit.squeeze(scalar, drop=True), note
    if seq_len is not None:
        seq_len = _validate.positive_int(seq_len, "seq_len")
        measured = curve.attrs.get("prompt_tokens", math.nan) + curve.attrs.get("output_tokens", 0)
        where = (
            f"the traffic's, given; the curve was measured at {measured:,.0f}"
            if math.isfinite(measured)
            else "the traffic's, given; the curve records no lengths"
        )
    elif "prompt_tokens" not in curve.attrs or "output_tokens" not in curve.attrs:
        return None, "memory not checked: the curve records no workload (prompt/output tokens)"
    else:
        seq_len = math.ceil(curve.attrs["prompt_tokens"] + curve.attrs["output_tokens"])
        where = "the curve's mean prompt + output"
    limit = memory.max_concurrency(
        model=str(model),
        gpu=str(gpu),
        tensor_parallel=int(tp),
        seq_len=seq_len,
        accounting=accounting,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
    ).max_concurrency.squeeze(drop=True)
    return (
        limit,
        f"memory: {accounting} accounting at {seq_len:,} tokens per sequence ({where}){dtypes}",
    )


def _ordered(result: xr.Dataset, lead: list[str]) -> xr.Dataset:
    """Each variable in the order: the curve's dims (``lead``), sla, then any new dims."""
    moved = {}
    for name, variable in result.data_vars.items():
        first = [d for d in lead if d in variable.dims]
        order = (*first, *[d for d in variable.dims if d not in first])
        if order != variable.dims:
            moved[name] = variable.transpose(*order)
    # one assignment: each one re-aligns every coordinate of the Dataset
    return result.assign(moved) if moved else result


def _labels(codes: xr.DataArray) -> xr.DataArray:
    table = np.asarray(BINDING)
    return xr.apply_ufunc(
        lambda c: table[c], codes, dask="parallelized", output_dtypes=[table.dtype]
    )


# -- the search ----------------------------------------------------------------------------------
def safe_concurrency(
    curve: xr.Dataset,
    sla,
    *,
    metric: str = "e2e",
    quantile: float = 0.99,
    memory_limit="auto",
    accounting: str = "article",
    seq_len: int | None = None,
) -> xr.Dataset:
    """The largest concurrency under the SLA (and in memory), and the best throughput under it.

    Parameters
    ----------
    curve
        A latency curve (measured, :mod:`capnb.data`; or analytic, :func:`capnb.latency.analytic`).
        It is made monotone first (:func:`capnb.latency.envelope`).
    sla
        Latency SLA(s) in seconds (> 0) of one metric: a number, a list, or a DataArray over
        ``sla``; or an :class:`capnb.records.SLA`, bounds on several metrics met together (then
        ``metric`` and ``quantile`` are the record's, and ``binding_metric`` names the bound that
        sets the safe concurrency).
    metric, quantile
        Which latency a number SLA bounds: ``e2e`` (end to end), ``ttft``, ``tpot`` or ``itl``; and
        which quantile of it (0.99 = P99). The condition is quantile <= SLA.
    memory_limit
        ``"auto"``: the memory step's largest fitting concurrency for the curve's model, GPU and
        tensor parallelism (at its mean prompt + output tokens; an analytic curve per seq_len);
        an integer or a DataArray (requests: :func:`capnb.memory.max_concurrency`'s
        ``max_concurrency``, taken at the curve's labels when it spans a larger grid); or None
        (not checked; said in ``attrs``).
    accounting
        Memory accounting for ``"auto"`` (see :func:`capnb.memory.accounting`).
    seq_len
        Tokens per sequence the ``"auto"`` memory check holds for a measured curve, when the
        traffic served is not the benchmark's (default: the curve's mean prompt + output). The
        latency stays the curve's, measured at its own lengths; the note says both.

    Returns
    -------
    xarray.Dataset
        Over the curve's own dims (model, gpu, ... if any) then ``sla``: ``safe_concurrency``
        (requests; 0 when infeasible), ``binding`` (:data:`BINDING`), ``per_instance_qps``
        (requests/s, Little's law at ``operating_concurrency``; NaN when infeasible),
        ``latency_at_safe`` (s), ``naive_qps`` and ``overstatement``, and ``max_concurrency``
        (the memory limit, when checked).

    Examples
    --------
    >>> from capnb.data import load_latency_curve
    >>> curve = load_latency_curve("dstack-vllm-mi300x-short")
    >>> r = safe_concurrency(curve, 1.0, metric="ttft", memory_limit=None)
    >>> int(r.safe_concurrency.item()), str(r.binding.item())
    (10, 'latency')
    """
    if isinstance(sla, SLA):
        return _bounded(curve, sla, memory_limit=memory_limit, accounting=accounting,
                        seq_len=seq_len)  # fmt: skip
    sla_axis = _sla(sla)
    selected, flat = _flat(curve, metric, quantile)
    limit, memory_note = _kept_memory_limit(curve, memory_limit, accounting, seq_len)
    limit_da = xr.DataArray(np.int64(_NO_MEMORY_LIMIT)) if limit is None else limit
    scalar = np.ndim(sla) == 0 and not isinstance(sla, xr.DataArray)
    coords = _one_curve(flat, limit_da)
    if coords is not None:
        result = _searched_one(curve, flat, sla_axis, limit, limit_da, coords, scalar)
    else:
        result = _searched(curve, selected, flat, sla_axis, limit, limit_da, scalar)
    result.attrs = {
        "metric": metric,
        "quantile": float(quantile),
        "condition": f"{metric} P{quantile * 100:g} <= SLA (the article writes <)",
        "memory": memory_note,
        "curve": str(curve.attrs.get("name", curve.attrs.get("source", ""))),
        "curve_kind": str(curve.attrs.get("kind", "")),
        "first_concurrency": int(curve.concurrency[0]),
        "last_concurrency": int(curve.concurrency[-1]),
        "concurrency_levels": [int(c) for c in curve.concurrency.values],
        **{k: curve.attrs[k] for k in ("model", "gpu", "tensor_parallel") if k in curve.attrs},
        **{
            k: float(curve.attrs[k]) for k in ("prompt_tokens", "output_tokens") if k in curve.attrs
        },
        "notes": "\n".join(_latency.notes(curve) + _latency.notes(flat)),
        "raised_concurrency": _raised(selected, flat),
        "unmodelled": str(curve.attrs.get("unmodelled", "")),
    }
    return result


def _raised(selected: xr.DataArray, flat: xr.Dataset) -> list[int]:
    """The concurrencies whose bounded latency the envelope raised (measured below a smaller one's)."""
    up = (flat.latency > selected) & selected.notnull()
    up = up.any([d for d in up.dims if d != "concurrency"])
    return [int(c) for c in up.concurrency.values[up.values]]


def _bounded(curve: xr.Dataset, sla: SLA, **memory) -> xr.Dataset:
    """:func:`safe_concurrency` under every bound of ``sla`` at once.

    The envelope makes each bounded latency non-decreasing in concurrency, so the concurrencies
    that meet one bound run from 1 up to its own safe concurrency, and those that meet them all
    run up to the smallest of these: the bound with the smallest answer binds, and its result
    (its best operating point lies within the others' ranges) is the answer. ``binding_metric``
    names it where a bound decides (it binds, or it is the one not met at any concurrency); ""
    where memory or the measured range sets the limit.
    """
    per_bound = [
        safe_concurrency(curve, bound, metric=metric, quantile=sla.quantile, **memory)
        for metric, bound in sla.bounds.items()
    ]
    if len(per_bound) == 1:
        result = per_bound[0].drop_vars("sla")
        metrics = xr.DataArray(next(iter(sla.bounds)))
    else:
        stacked = xr.concat(
            [r.drop_vars("sla") for r in per_bound], dim="metric", combine_attrs="override"
        ).assign_coords(metric=list(sla.bounds))
        first = stacked.safe_concurrency.argmin("metric")
        result = stacked.isel(metric=first)
        metrics = result.metric.drop_vars(list(result.metric.coords))
        result = result.drop_vars("metric")
    a_bound_decides = result.binding.isin(list(_BOUND_DECIDES))
    # a Variable: the DataArray's coordinates (xr.where drops their attrs) replaced the result's
    # and model, gpu and tensor_parallel lost their glossary units
    result["binding_metric"] = xr.where(a_bound_decides, metrics, "").variable
    result["binding_metric"].attrs.update(glossary.attrs("binding_metric"))
    raised = sorted({c for r in per_bound for c in r.attrs["raised_concurrency"]})
    result.attrs.update(
        per_bound[0].attrs,
        notes=_bound_notes(sla, per_bound),
        raised_concurrency=raised,
        metric=",".join(sla.bounds),
        quantile=sla.quantile,
        sla=str(sla),
        sla_bounds=sla.as_dict(),
        condition=f"{sla} (the article writes <)",
    )
    return result


def _bound_notes(sla: SLA, per_bound: list[xr.Dataset]) -> str:
    """Every bound's notes, once each; a raised point names its bound (``tpot P99``)."""
    lines = []
    for metric, result in zip(sla.bounds, per_bound, strict=True):
        named = f"envelope: {metric} {sla.name} at"
        lines += [
            n.replace("envelope: latency at", named, 1) for n in result.attrs["notes"].split("\n")
        ]
    return "\n".join(dict.fromkeys(n for n in lines if n))


def _one_curve(flat: xr.Dataset, limit: xr.DataArray) -> dict | None:
    """The scalar coordinates of one curve (latency 1-D over concurrency, one memory limit).

    None for anything else (a stack of curves, a memory limit over dims): the general search.
    """
    latency, mean = flat.latency, flat.mean_latency
    if latency.dims != ("concurrency",) or mean.dims != ("concurrency",):
        return None
    if limit.ndim or limit.coords:
        return None
    coords = {n: c.variable for n, c in latency.coords.items() if "concurrency" not in c.dims}
    others = {n: c.variable for n, c in mean.coords.items() if "concurrency" not in c.dims}
    if coords.keys() != others.keys() or not all(c.identical(others[n]) for n, c in coords.items()):
        return None
    return coords


def _searched_one(curve, flat, sla_axis, limit, limit_da, coords: dict, scalar: bool) -> xr.Dataset:
    """:func:`_searched` for one curve: the same Dataset, from numpy, built in one step.

    The search itself takes microseconds; through xarray (apply_ufunc, where, each variable
    added and aligned) one curve's search took ~10 ms, what a worksheet pays on every change of
    its SLA, target or buffer. The same kernel runs on the same arrays, and the variables, their
    attrs, dtypes and coordinates are those :func:`_searched` gives (the tests compare the two).
    """
    latency, mean = flat.latency.values, flat.mean_latency.values
    safe, code, qps, operating, at_safe = kernels.search(
        latency, mean, curve.concurrency.values.astype(float), sla_axis.values, limit_da.values
    )
    dims = ("sla",)
    variables = {
        "safe_concurrency": (dims, safe),
        "binding": (dims, np.asarray(BINDING)[code]),
        "per_instance_qps": (dims, qps),
        "operating_concurrency": (dims, operating),
        "latency_at_safe": (dims, at_safe),
        "latency_floor": ((), latency[0], flat.latency.attrs),
    }
    if int(curve.concurrency[0]) == 1:
        feasible = np.isin(code, [BINDING.index(b) for b in FEASIBLE])
        with np.errstate(all="ignore"):  # as xarray's arithmetic
            single = 1.0 / mean[0]
            naive = np.where(feasible, safe * single, np.nan)
            variables["naive_qps"] = (dims, naive)
            variables["overstatement"] = (dims, naive / qps)
    if limit is not None:
        variables["max_concurrency"] = ((), limit.values, limit.attrs)
    # each variable's attrs as assign_attrs leaves them: its source's, then the glossary's
    data_vars = {
        name: xr.Variable(dims, values, {**(own[0] if own else {}), **glossary.attrs(name)})
        for name, (dims, values, *own) in variables.items()
    }
    sla = sla_axis.sla.variable
    if scalar:  # a number in, a number out (sla stays as a coordinate)
        data_vars = {name: v.squeeze("sla") if v.ndim else v for name, v in data_vars.items()}
        sla = sla.squeeze("sla")
    return xr.Dataset(data_vars, coords={**coords, "sla": sla})


def _searched(curve, selected, flat, sla_axis, limit, limit_da, scalar: bool) -> xr.Dataset:
    """The search over every curve of ``flat`` and every SLA, as a Dataset (attrs aside)."""
    safe, code, qps, operating, at_safe = xr.apply_ufunc(
        kernels.search,
        flat.latency,
        flat.mean_latency,
        curve.concurrency.astype(float),
        sla_axis,
        limit_da,
        input_core_dims=[["concurrency"], ["concurrency"], ["concurrency"], ["sla"], []],
        output_core_dims=[["sla"]] * 5,
        dask="parallelized",
        output_dtypes=[np.int64, np.int8, float, np.int64, float],
    )
    result = xr.Dataset(
        {
            "safe_concurrency": safe.assign_attrs(glossary.attrs("safe_concurrency")),
            "binding": _labels(code).assign_attrs(glossary.attrs("binding")),
            "per_instance_qps": qps.assign_attrs(glossary.attrs("per_instance_qps")),
            "operating_concurrency": operating.assign_attrs(
                glossary.attrs("operating_concurrency")
            ),
            "latency_at_safe": at_safe.assign_attrs(glossary.attrs("latency_at_safe")),
            "latency_floor": flat.latency.isel(concurrency=0, drop=True).assign_attrs(
                glossary.attrs("latency_floor")
            ),
        }
    )
    if int(curve.concurrency[0]) == 1:
        single = 1.0 / flat.mean_latency.isel(concurrency=0, drop=True)
        # from the codes: comparing the label strings cost more than the search itself
        feasible = code.isin([BINDING.index(b) for b in FEASIBLE])
        naive = (result.safe_concurrency * single).where(feasible)
        result["naive_qps"] = naive.assign_attrs(glossary.attrs("naive_qps"))
        result["overstatement"] = (naive / result.per_instance_qps).assign_attrs(
            glossary.attrs("overstatement")
        )
    if limit is not None:
        result["max_concurrency"] = limit.assign_attrs(glossary.attrs("max_concurrency"))
    order = [d for d in selected.dims if d != "concurrency"] + ["sla"]
    result = _ordered(result, order)
    result = result.assign_coords(sla=sla_axis.sla)
    if scalar:
        result = result.squeeze("sla")  # a number in, a number out (sla stays as a coordinate)
    return result


# -- instances and cost --------------------------------------------------------------------------
def _requests_per_second(value, name: str) -> bool:
    """Check ``value`` holds numbers (a DataArray's in requests/s); whether it is a DataArray."""
    is_array = isinstance(value, xr.DataArray)
    raw = value.values if is_array else value
    if np.asarray(raw).dtype.kind not in "iuf":  # None, text
        raise InputError(f"{name}: expected requests/s as numbers, got {raw!r}")
    if is_array:
        require_units(value, "requests/s", name)
    return is_array


def _per_instance(per_instance_qps) -> xr.DataArray:
    """``per_instance_qps`` as a DataArray in requests/s: NaN or 0 (infeasible) or a rate > 0."""
    per_instance = (
        per_instance_qps
        if _requests_per_second(per_instance_qps, "per_instance_qps")
        else xr.DataArray(per_instance_qps)
    )
    values = np.asarray(per_instance.values, dtype=float)
    bad = np.isinf(values) | (values < 0)
    if bad.any():
        raise InputError(
            "per_instance_qps must be >= 0 requests/s (NaN or 0: the SLA is not met at any load), "
            f"got {values[bad][0]:g}"
        )
    return per_instance


def _target(target_qps, name: str = "target_qps", like=None) -> xr.DataArray:
    """A rate to serve (``target_qps``, or the burst rate ``buffer_qps``) as a DataArray in requests/s.

    ``like``: the per-instance rates it meets; a dim the rate leaves unlabelled takes their labels.
    """
    if isinstance(target_qps, xr.Dataset):  # the forecast's whole answer
        raise InputError(
            f"{name}: a Dataset; pass its target_qps (and buffer_qps=its buffer_qps for the "
            "forecast's burst buffer)"
        )
    if _requests_per_second(target_qps, name):
        target = target_qps
    else:
        value = np.asarray(target_qps, dtype=float)
        if value.ndim != 0:
            raise InputError(
                f"{name}: give a number or a DataArray with named dims (e.g. the forecast's "
                "target_qps over slot x traffic_quantile)"
            )
        target = xr.DataArray(value)
    values = np.asarray(target.values, dtype=float)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        raise InputError(f"{name} must be finite and >= 0 requests/s, got {values[bad][0]:g}")
    if "sla" in target.dims:
        raise InputError(f"{name} must not have an 'sla' dim (the SLA is the capacity step's)")
    return _glossary_dims(target.astype(float), like)


def _glossary_dims(target: xr.DataArray, like=None) -> xr.DataArray:
    """The target with the glossary's attrs on its glossary dims (slot, traffic_quantile, ...).

    A target of one's own (bare values) keeps its values; a dim without a coordinate gets
    0 .. n-1, as capacity.mix numbers its slots, or the labels ``like`` gives it (read by position,
    as a bare array is aligned). The attrs of a coordinate that has its own
    ``units`` and ``long_name`` (the forecast's, with ``kind``) are kept as they are.
    """
    for dim in target.dims:
        if dim not in glossary.DIMS:
            continue
        if dim not in target.coords:
            labels = getattr(like, "indexes", {}).get(dim)
            if labels is None or len(labels) != target.sizes[dim]:
                labels = np.arange(target.sizes[dim])
            target = target.assign_coords({dim: labels})
        if not {"units", "long_name"} <= set(target[dim].attrs):
            target[dim].attrs = {**target[dim].attrs, **glossary.attrs(dim)}
    return target


def fleet(
    per_instance_qps, target_qps, *, buffer: int | None = None, buffer_qps=None
) -> xr.Dataset:
    """The fleet a target needs: ``fixed_instances`` for the target, ``burst_instances`` above it.

    This is the one place capnb turns requests/s into instances; :func:`instances`, :func:`plan`,
    :func:`sweep` and the plan's recommendation all read it.

    Parameters
    ----------
    per_instance_qps
        Requests/s one instance serves under the SLA (NaN: infeasible, gives NaN).
    target_qps
        Requests/s to serve: a number or any DataArray (its dims broadcast).
    buffer
        Instances added for bursts (default 2, the article's 1-2 instances).
    buffer_qps
        Instead of ``buffer``: the request rate the elastic buffer must absorb (the forecast's
        burst model); the buffer is then ``ceil(buffer_qps / per_instance_qps)`` instances.

    Returns
    -------
    xarray.Dataset
        ``fixed_instances`` = ``ceil(target_qps / per_instance_qps)``, ``burst_instances`` (the
        buffer) and ``instances``, their sum; NaN where ``per_instance_qps`` is NaN or 0.

    Notes
    -----
    The ceiling is taken after a relative tolerance of 1e-12, so that 10 / 2.5 = 4.000000000001
    is 4 instances, not 5.

    Examples
    --------
    >>> f = fleet(xr.DataArray(2.5), 10.0, buffer_qps=3.0)
    >>> int(f.fixed_instances), int(f.burst_instances), int(f.instances)
    (4, 2, 6)
    """
    per_instance = _per_instance(per_instance_qps)
    return _fleet(per_instance, _target(target_qps, like=per_instance), buffer, buffer_qps)


def _fleet(per_instance: xr.DataArray, target: xr.DataArray, buffer, buffer_qps) -> xr.Dataset:
    """:func:`fleet` on rates already read (:func:`_per_instance`, :func:`_target`): each once."""
    _one_buffer(buffer, buffer_qps)
    _same_labels(target, "target_qps", per_instance)
    rate, count = _burst(buffer, buffer_qps, per_instance)
    if rate is not None:
        _same_labels(rate, "buffer_qps", per_instance)
    out = xr.Dataset(_fleet_terms(per_instance, target, rate, count))
    for name in out.data_vars:
        out[name].attrs = glossary.attrs(name)
    return out


def _same_labels(rate: xr.DataArray, name: str, per_instance: xr.DataArray) -> None:
    """Check that a dim both hold is labelled alike.

    Aligning would drop the labels one lacks: a GPU without a target came out NaN instances (read
    as infeasible), and a target without a GPU was dropped.
    """
    for dim in set(rate.indexes) & set(per_instance.indexes):
        have, want = rate.indexes[dim], per_instance.indexes[dim]
        if not (have.is_unique and set(have) == set(want) and len(have) == len(want)):
            raise InputError(
                f"{name} is over {dim} {have.tolist()}, but per_instance_qps over "
                f"{want.tolist()}: give both the same {dim} labels (.sel({dim}=...) one of them)"
            )


def _fleet_terms(per_instance, target, rate, count) -> dict:
    """:func:`fleet`'s variables (attrs aside), from DataArrays or from aligned Variables.

    ``rate, count``: the burst buffer as :func:`_burst` reads it. Variables
    (``DataArray.variable``) give the same numbers, dims and attrs as their DataArrays when the
    DataArrays' coordinates agree, without aligning them at each step (most of the time of an
    operation on a few hundred numbers); the callers check that they agree.
    """
    serves = per_instance.notnull() & (per_instance > 0)
    if rate is not None:
        extra = instances_needed(
            rate if isinstance(per_instance, xr.DataArray) else rate.variable, per_instance
        )
    else:
        extra = xr.full_like(per_instance, float(count), dtype=float)
    fixed = instances_needed(target, per_instance).where(serves)
    extra = extra.where(serves)
    return {"fixed_instances": fixed, "burst_instances": extra, "instances": fixed + extra}


def _with_attrs(terms: dict, *, keep: bool) -> dict:
    """Variables with their glossary attrs: added to their own (as ``assign_attrs``) or instead."""
    return {
        name: xr.Variable(v.dims, v.data, {**(v.attrs if keep else {}), **glossary.attrs(name)})
        for name, v in terms.items()
    }


def _one_buffer(buffer, buffer_qps) -> None:
    if buffer is not None and buffer_qps is not None:
        raise InputError("give buffer (instances) or buffer_qps (requests/s), not both")


def _burst(buffer, buffer_qps, like=None) -> tuple[xr.DataArray | None, int | None]:
    """The burst buffer asked for: (the rate it absorbs, None) or (None, its instances)."""
    if buffer_qps is not None:
        return _target(buffer_qps, "buffer_qps", like), None
    count = 2 if buffer is None else buffer
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
        raise InputError(f"buffer must be a whole number of instances >= 0, got {count!r}")
    return None, count


def instances(
    per_instance_qps, target_qps, *, buffer: int | None = None, buffer_qps=None
) -> xr.DataArray:
    """``ceil(target_qps / per_instance_qps) + buffer``: instances a target needs.

    The ``instances`` of :func:`fleet` (its parameters); NaN where infeasible.

    Examples
    --------
    >>> int(instances(xr.DataArray(2.5), 10.0))
    6
    """
    return fleet(per_instance_qps, target_qps, buffer=buffer, buffer_qps=buffer_qps).instances


def _gpu_price(gpu, usd_per_gpu_hour):
    if usd_per_gpu_hour is not None:
        try:
            price = np.asarray(usd_per_gpu_hour, dtype=float)
        except (TypeError, ValueError):
            raise InputError(
                f"usd_per_gpu_hour must be a price in USD/hour (a number >= 0), "
                f"got {usd_per_gpu_hour!r}"
            ) from None
        if (~np.isfinite(price) | (price < 0)).any():
            raise InputError(f"usd_per_gpu_hour must be >= 0, got {usd_per_gpu_hour!r}")
        return (
            xr.DataArray(price)
            if not isinstance(usd_per_gpu_hour, xr.DataArray)
            else usd_per_gpu_hour
        )
    if gpu is None:
        return None
    from ..data import gpu_column, resolve_gpu

    if isinstance(gpu, xr.DataArray):
        ids = [resolve_gpu(g) for g in gpu.values]
        return xr.DataArray(
            gpu_column(ids, "usd_per_gpu_hour"),
            dims="gpu",
            coords={"gpu": ids},
            attrs=glossary.attrs("usd_per_gpu_hour"),
        )
    return xr.DataArray(float(gpu_column([resolve_gpu(str(gpu))], "usd_per_gpu_hour")[0]))


def _costs(result, target, tensor_parallel, price, output_tokens, flops_per_request, flops):
    """Add gpus, cost, utilisation and compute utilisation to a result with ``instances``.

    The variables are computed first and added in one step (each assignment to a Dataset aligns
    every coordinate again, which cost more than the arithmetic).
    """
    new = _cost_terms(
        result.instances, result.per_instance_qps, target, tensor_parallel, price, output_tokens,
        flops_per_request, flops,
    )  # fmt: skip
    return result.assign({name: v.assign_attrs(glossary.attrs(name)) for name, v in new.items()})


def _cost_terms(
    instances, per_instance_qps, target, tensor_parallel, price, output_tokens,
    flops_per_request, flops,
) -> dict:  # fmt: skip
    """:func:`_costs`' variables (attrs aside), from DataArrays or aligned Variables alike."""
    new = {"gpus": instances * tensor_parallel}
    if price is not None:
        new["usd_per_hour"] = new["gpus"] * price
        if output_tokens is not None and np.all(output_tokens):
            tokens_per_hour = target * 3600.0 * output_tokens
            per_million = new["usd_per_hour"] / tokens_per_hour * 1e6
            new["usd_per_million_tokens"] = per_million.where(target > 0)
    capacity = instances * per_instance_qps
    new["utilisation"] = target / capacity
    if flops_per_request is not None and flops is not None:
        new["compute_utilisation"] = target * flops_per_request / (new["gpus"] * flops)
    return new


def _dense_flops(specs, gpus: list[str]) -> np.ndarray:
    """Dense FLOP/s per GPU for each model (model x gpu): fp8 for fp8 weights where the GPU has it."""
    from ..data import gpu_column, resolve_gpu

    ids = [resolve_gpu(g) for g in gpus]
    bf16, fp8 = gpu_column(ids, "dense_bf16_flops"), gpu_column(ids, "dense_fp8_flops")
    with_fp8 = np.where(np.isfinite(fp8), fp8, bf16)
    return np.array([with_fp8 if s.weight_dtype == "fp8" else bf16 for s in specs], dtype=float)


def _model_flops(curve):
    """(FLOP per request, FLOP/s per GPU) for compute utilisation, or (None, None)."""
    from ..data import load_model

    model, gpu = _names_of(curve, "model"), _names_of(curve, "gpu")
    if model is None or gpu is None or "prompt_tokens" not in curve.attrs:
        return None, None
    prompt, output = curve.attrs["prompt_tokens"], curve.attrs["output_tokens"]
    models = [str(m) for m in np.atleast_1d(getattr(model, "values", model))]
    specs = [load_model(m) for m in models]
    per_request = np.array([s.request_flop(prompt, output) for s in specs])
    gpus = [str(g) for g in np.atleast_1d(getattr(gpu, "values", gpu))]
    flops = _dense_flops(specs, gpus)
    if isinstance(model, xr.DataArray):
        return (
            xr.DataArray(per_request, dims="model", coords={"model": models}),
            xr.DataArray(flops, dims=("model", "gpu"), coords={"model": models, "gpu": gpus}),
        )
    return float(per_request[0]), float(flops[0, 0])


def plan(
    curve: xr.Dataset,
    sla,
    target_qps,
    *,
    metric: str = "e2e",
    quantile: float = 0.99,
    buffer: int | None = None,
    buffer_qps=None,
    memory_limit="auto",
    accounting: str = "article",
    tensor_parallel: int | None = None,
    usd_per_gpu_hour=None,
    seq_len: int | None = None,
    latency_band=None,
) -> xr.Dataset:
    """Safe concurrency, per-instance throughput, instances, GPUs and cost for a target rate.

    Parameters
    ----------
    curve, sla, metric, quantile, memory_limit, accounting, seq_len
        As in :func:`safe_concurrency`.
    target_qps
        Requests/s to serve: a number or a DataArray over any dims (the forecast's ``target_qps``
        over ``slot`` x ``traffic_quantile`` broadcasts).
    buffer, buffer_qps
        As in :func:`instances` (default 2 instances).
    tensor_parallel
        GPUs per instance (default: the curve's).
    usd_per_gpu_hour
        Price per GPU-hour (default: the catalog price of the curve's GPU).
    latency_band
        ``(low, high)``: the latency model's held-out ratio measured / predicted (P10, P90;
        :func:`capnb.latency.validate.error_band`), for every bound, or ``{metric: (low,
        high)}`` (:func:`capnb.capacity.band_ratios`). Adds the answer's band
        (:func:`capnb.capacity.band`): ``per_instance_qps_low``/``_high`` and
        ``instances_low``/``_high``. None: no band (a measured curve needs none).

    Returns
    -------
    xarray.Dataset
        :func:`safe_concurrency`'s variables plus :func:`fleet`'s (``fixed_instances``,
        ``burst_instances``, ``instances``), ``gpus``, ``usd_per_hour``,
        ``usd_per_million_tokens`` (at the target; the curve's mean output tokens per request),
        ``utilisation`` (target / planned capacity) and ``compute_utilisation`` (share of the GPUs'
        dense FLOP/s the target uses), over the curve's dims, ``sla``, then the target's dims.
        NaN where infeasible.

    Examples
    --------
    >>> from capnb.data import load_latency_curve
    >>> curve = load_latency_curve("dstack-vllm-mi300x-short")
    >>> p = plan(curve, 10.0, 20.0, metric="ttft")
    >>> int(p.instances.item()), int(p.gpus.item())
    (6, 48)
    """
    if latency_band is not None:
        from ._band import _ratios, band, scaled_sla

        args = dict(metric=metric, quantile=quantile, buffer=buffer, buffer_qps=buffer_qps,
                    memory_limit=memory_limit, accounting=accounting,
                    tensor_parallel=tensor_parallel, usd_per_gpu_hour=usd_per_gpu_hour,
                    seq_len=seq_len)  # fmt: skip
        ratios = _ratios(latency_band, sla, metric)
        return band(
            plan(curve, sla, target_qps, **args),
            plan(curve, scaled_sla(sla, ratios, "high", metric=metric), target_qps, **args),
            plan(curve, scaled_sla(sla, ratios, "low", metric=metric), target_qps, **args),
            ratios,
        )
    result = safe_concurrency(
        curve,
        sla,
        metric=metric,
        quantile=quantile,
        memory_limit=memory_limit,
        accounting=accounting,
        seq_len=seq_len,
    )
    target = _target(target_qps, like=result.per_instance_qps)
    # one curve, one SLA, one target (a worksheet's plan): the same formulas on the Variables, the
    # variables added in one step; through DataArrays each of a dozen operations on one number
    # aligned every coordinate and cost more than the search (the tests compare the two paths)
    one = _one_cell(result, curve, target, buffer_qps, tensor_parallel, usd_per_gpu_hour)
    if one:
        _one_buffer(buffer, buffer_qps)
        per_instance, values = result.per_instance_qps.variable, target.variable
        new = {"target_qps": values}
        fleet_terms = _with_attrs(
            _fleet_terms(per_instance, values, *_burst(buffer, buffer_qps, per_instance)),
            keep=False,
        )
    else:
        result["target_qps"] = target.assign_attrs(glossary.attrs("target_qps"))
        planned_fleet = _fleet(_per_instance(result.per_instance_qps), target, buffer, buffer_qps)
        result = result.assign(planned_fleet.data_vars)
    if tensor_parallel is not None:
        tensor_parallel = _validate.positive_int(tensor_parallel, "tensor_parallel")
    tp = tensor_parallel if tensor_parallel is not None else _names_of(curve, "tensor_parallel")
    if tp is None:
        if one:
            planned = fleet_terms["instances"] * per_instance
            new["utilisation"] = values / planned
        else:
            planned = result.instances * result.per_instance_qps
            result["utilisation"] = (target / planned).assign_attrs(glossary.attrs("utilisation"))
        result.attrs["cost"] = (
            "GPUs and cost not computed: the curve does not record its tensor parallelism (read it "
            "with tensor_parallel=..., or pass tensor_parallel= here)"
        )
    else:
        price = _gpu_price(_names_of(curve, "gpu"), usd_per_gpu_hour)
        flops_per_request, flops = _model_flops(curve)
        output_tokens = curve.attrs.get("output_tokens")
        if one:
            new |= _cost_terms(
                fleet_terms["instances"], per_instance, values, tp,
                None if price is None else price.variable, output_tokens, flops_per_request, flops,
            )  # fmt: skip
        else:
            result = _costs(result, target, tp, price, output_tokens, flops_per_request, flops)
        if price is None:
            result.attrs["cost"] = "cost not computed: the curve names no catalog GPU"
    if one:
        new = _with_attrs(new, keep=True)
        result = result.assign({"target_qps": new.pop("target_qps"), **fleet_terms, **new})
    else:
        lead = [
            d for d in curve.latency.dims if d not in ("concurrency", "metric", "latency_quantile")
        ]
        result = _ordered(result, [*lead, "sla"])
    result.attrs["buffer"] = (
        "a buffer of ceil(buffer_qps / per_instance_qps) instances"
        if buffer_qps is not None
        else f"a buffer of {words.count(2 if buffer is None else buffer, 'instance')}"
    )
    return result


def _number(value) -> bool:
    """None, or one number (not an array, not a DataArray)."""
    return value is None or (not isinstance(value, xr.DataArray) and np.ndim(value) == 0)


def _one_cell(result, curve, target, buffer_qps, tensor_parallel, usd_per_gpu_hour) -> bool:
    """Whether :func:`plan` works on one number each: a result and inputs without dims.

    Then nothing needs aligning, and the plan's arithmetic runs on the Variables.
    """
    return (
        not result.dims
        and not target.dims
        and not target.coords
        and not target.attrs
        and _number(buffer_qps)
        and _number(usd_per_gpu_hour)
        and not isinstance(tensor_parallel, xr.DataArray)
        and not any(
            isinstance(_names_of(curve, name), xr.DataArray)
            for name in ("model", "gpu", "tensor_parallel")
        )
    )

"""The capacity sweep: analytic curves over a grid of options, searched by numba kernels (private).

Public as ``capnb.capacity.sweep``, ``capnb.capacity.price`` and ``capnb.capacity.cheapest``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import xarray as xr

from .. import _validate, glossary
from .. import latency as _latency
from ..errors import InputError
from ..kernels import capacity as kernels
from ..records import SLA
from . import _safe as capacity
from ._safe import _number

__all__ = ["cheapest", "price", "sweep"]


def sweep(
    model,
    gpu,
    tensor_parallel,
    seq_len,
    sla,
    *,
    workload: xr.Dataset,
    target_qps=None,
    metric: str = "e2e",
    quantile: float = 0.99,
    buffer: int | None = None,
    buffer_qps=None,
    concurrency=None,
    max_grid_concurrency: int = 4096,
    calibration=None,
    accounting: str = "article",
    chunks: Mapping[str, int] | None = None,
) -> xr.Dataset:
    """Safe concurrency, throughput, instances and cost over sla x model x gpu x TP x seq_len.

    The latency curves are analytic (:func:`capnb.latency.analytic`, with ``seq_len`` rescaling
    the workload to that mean context), the memory limit is the memory step's at ``seq_len``, and
    the search runs in numba kernels over every cell. A tensor-parallel degree that cannot shard a
    model comes out as ``binding="invalid_tensor_parallel"`` (the reasons in the attr
    ``unshardable``) and a GPU without a figure the model needs as ``binding="no_data"`` (or
    ``infeasible_memory``), not as errors.

    Parameters
    ----------
    model, gpu, tensor_parallel, seq_len, sla
        The grid (lists or scalars; ``sla`` in seconds of ``metric``, or one
        :class:`capnb.records.SLA` of bounds met together, which then gives the quantile).
    workload
        Prompt and output length distribution (:func:`capnb.latency.workload`).
    target_qps
        Optional requests/s to size for (a number or any DataArray); adds instances and cost, and
        ``cheapest_*`` per SLA and target: ``sweep(..., target_qps=t)`` is
        ``price(sweep(...), t)``. Without it the result is the search alone, which does not
        depend on the target: keep it and :func:`price` each new target.
    metric, quantile, buffer, buffer_qps, calibration, accounting
        As in :func:`plan` and :func:`capnb.latency.analytic`.
    concurrency
        The curves' concurrency grid (default: :func:`capnb.latency.concurrency_grid` up to the
        largest memory limit in the grid, at most ``max_grid_concurrency``). Between grid points
        latency is interpolated linearly; ``measured_range`` then means "the grid ends here".
    chunks
        Dask chunks per dim for the curve computation (e.g. ``{"gpu": 1}``).

    Returns
    -------
    xarray.Dataset
        :func:`plan`'s variables over model, gpu, tensor_parallel, seq_len, sla (then the target's
        dims), plus ``cheapest_gpu``, ``cheapest_tensor_parallel``, ``cheapest_usd_per_hour``,
        ``runner_up_*`` and ``cost_gap`` when a target is given. Without a target: the search
        (safe concurrency, per-instance throughput, binding), whose attrs carry the workload's
        mean ``prompt_tokens`` and ``output_tokens`` that :func:`price` needs.

    Examples
    --------
    >>> from capnb.latency import workload
    >>> w = workload(prompt_tokens=[1000] * 8, output_tokens=[200] * 8)
    >>> searched = sweep("Llama-3.1-8B", ["H100-SXM", "H200"], [1, 2], 1200, [1.0, 5.0],
    ...                  workload=w, metric="ttft")
    >>> "usd_per_hour" in searched, searched.attrs["output_tokens"]
    (False, 200.0)
    >>> priced = price(searched, 20.0, buffer=2)
    >>> priced.identical(sweep("Llama-3.1-8B", ["H100-SXM", "H200"], [1, 2], 1200, [1.0, 5.0],
    ...                        workload=w, metric="ttft", target_qps=20.0, buffer=2))
    True
    """
    result = _searched(
        model, gpu, tensor_parallel, seq_len, sla, workload=workload, metric=metric,
        quantile=quantile, concurrency=concurrency, max_grid_concurrency=max_grid_concurrency,
        calibration=calibration, accounting=accounting, chunks=chunks,
    )  # fmt: skip
    if target_qps is None:
        return result
    return price(result, target_qps, buffer=buffer, buffer_qps=buffer_qps)


def _some_degree_shards(models, tps) -> None:
    """An error naming ``tensor_parallel`` where no degree shards a model (its heads, experts).

    The sweep masks the degrees that cannot shard a model; where none can, no curve has a figure
    and the search had ended in "the curve has no ttft P99; it measured: nothing".
    """
    from ..data import load_model

    for model in models:
        spec = load_model(model)
        invalid = [r for r in (spec.valid_tensor_parallel(int(tp)) for tp in tps) if r]
        if len(invalid) == len(tps):
            raise InputError(
                f"tensor_parallel: no degree in {[int(t) for t in tps]} shards {spec.name}: "
                + "; ".join(invalid)
            )


def _searched(
    model, gpu, tensor_parallel, seq_len, sla, *, workload, metric, quantile, concurrency,
    max_grid_concurrency, calibration, accounting, chunks,
) -> xr.Dataset:  # fmt: skip
    """:func:`sweep` without a target: the safe-concurrency search, with the workload's lengths."""
    from .. import memory

    models = model if isinstance(model, list | tuple) else [model]
    gpus = gpu if isinstance(gpu, list | tuple) else [gpu]
    tps = _validate.positive_ints(tensor_parallel, "tensor_parallel")
    seqs = _validate.positive_ints(seq_len, "seq_len")
    if isinstance(sla, SLA):  # bounds on several metrics: the record's own quantile
        bounded, quantile, sla_axis = list(sla.bounds), sla.quantile, sla
    else:
        bounded, sla_axis = [metric], capacity._sla(sla)
    _some_degree_shards(models, tps)
    limits = memory.max_concurrency(
        model=models, gpu=gpus, tensor_parallel=tps, seq_len=seqs, accounting=accounting,
        invalid_tensor_parallel="mask",
    ).max_concurrency  # fmt: skip
    limits, too_long = _longest_held(limits, models, gpus, tps, seqs, workload, accounting)
    if concurrency is None:
        upper = int(np.clip(int(limits.max()), 1, max_grid_concurrency))
        concurrency = _latency.concurrency_grid(upper)
    metrics = list(dict.fromkeys([*bounded, "e2e"]))  # the mean e2e gives Little's law
    curves = _latency.analytic(
        models, gpus, tps, workload=workload, concurrency=concurrency, seq_len=seqs,
        metrics=metrics, quantiles=[quantile], calibration=calibration,
        invalid_tensor_parallel="mask", chunks=chunks,
    ).compute()  # fmt: skip
    limits = limits.sel(model=curves.model, gpu=curves.gpu)
    result = capacity.safe_concurrency(
        curves,
        sla_axis,
        metric=metric,
        quantile=quantile,
        memory_limit=limits,
        accounting=accounting,
    )
    result = _unshardable(result, models, tps)
    result.attrs["memory"] = f"memory: {accounting} accounting at seq_len"
    if too_long:  # said with the answer: which options memory ruled out, and why
        from ..data import _curve

        _curve.add_note(result, too_long)
    result.attrs["workload"] = curves.attrs["workload"]
    # what price() needs: the workload's mean lengths (each seq_len rescales them)
    result.attrs["prompt_tokens"] = curves.attrs["prompt_tokens"]
    result.attrs["output_tokens"] = curves.attrs["output_tokens"]
    return result.assign_coords(calibration=curves.calibration)


def _unshardable(result: xr.Dataset, models, tps) -> xr.Dataset:
    """``binding="invalid_tensor_parallel"`` where a degree cannot shard a model.

    As the engine sweep says it (the search saw only NaN latency there, ``no_data``); the reasons
    go in the attr ``unshardable``.
    """
    from ..data import load_model

    specs = [load_model(m) for m in models]
    reasons = [[s.valid_tensor_parallel(int(tp)) for tp in tps] for s in specs]
    said = [r for row in reasons for r in row if r]
    if not said:
        return result
    invalid = xr.DataArray(
        [[bool(r) for r in row] for row in reasons],
        dims=("model", "tensor_parallel"),
        coords={"model": [s.name for s in specs], "tensor_parallel": tps},
    )
    binding = result.binding.where(~invalid, "invalid_tensor_parallel")
    result["binding"] = binding.transpose(*result.binding.dims).assign_attrs(result.binding.attrs)
    result.attrs["unshardable"] = said
    return result


def _longest_held(limits, models, gpus, tps, seqs, workload, accounting):
    """``(limits, note)``: 0 where memory cannot hold the workload's longest request whole.

    vLLM rejects a request its KV cache cannot hold: an option that holds sequences of the mean
    length but not the longest request is ``infeasible_memory``, as on the engine's curves
    (:func:`capnb.capacity.sweep_engine`). The longest request is rescaled with each ``seq_len``
    as the latency curves rescale the workload (times ``seq_len / mean``).
    """
    from .. import memory

    lengths = (workload.prompt_tokens + workload.output_tokens).values.astype(float)
    mean, longest = float(lengths.mean()), float(lengths.max())
    if longest <= mean:  # one length: the limits at seq_len say it all
        return limits, ""
    scaled = [max(seq, math.ceil(longest * seq / mean)) for seq in seqs]
    held = memory.max_concurrency(
        model=models, gpu=gpus, tensor_parallel=tps, seq_len=sorted(set(scaled)),
        accounting=accounting, invalid_tensor_parallel="mask",
    ).max_concurrency  # fmt: skip
    held = held.sel(seq_len=scaled).assign_coords(seq_len=list(seqs))
    ruled_out = (limits >= 1) & (held < 1)
    if not bool(ruled_out.any()):
        return limits, ""
    names = [
        f"{int(t)} x {g}" for g in gpus for t in tps
        if bool(ruled_out.sel(gpu=g, tensor_parallel=t).any())
    ]  # fmt: skip
    note = (
        f"memory: {', '.join(names)} cannot hold the workload's longest request "
        f"({longest:,.0f} tokens, prompt + output, at its own mean length) whole, which vLLM "
        "would reject: infeasible_memory"
    )
    return limits.where(~ruled_out, 0).astype(limits.dtype), note


#: What :func:`price` reads from a searched sweep.
_SEARCHED_DIMS = ("model", "gpu", "tensor_parallel", "seq_len")


def price(searched: xr.Dataset, target_qps, *, buffer=None, buffer_qps=None) -> xr.Dataset:
    """Instances, cost and the cheapest options of a searched :func:`sweep` for a target.

    The search (analytic curves for every option, and the safe concurrency under each SLA) does
    not depend on the target: keep :func:`sweep`'s answer without a target and price it again for
    each new target or buffer. ``sweep(..., target_qps=t, buffer=b)`` is
    ``price(sweep(...), t, buffer=b)``, number for number.

    Parameters
    ----------
    searched
        A :func:`sweep` result without a target (its attrs carry the workload's mean
        ``prompt_tokens`` and ``output_tokens``).
    target_qps
        Requests/s to size for: a number or any DataArray (the forecast's ``target_qps`` over
        slot x traffic_quantile, say); its dims are added to the result.
    buffer, buffer_qps
        Instances added for bursts, as in :func:`plan` (default: the article's 2 instances, or
        ``ceil(buffer_qps / per_instance_qps)`` from the forecast's burst model).

    Returns
    -------
    xarray.Dataset
        ``searched`` with ``target_qps``, the fleet (``instances``, ``fixed_instances``,
        ``burst_instances``), ``gpus``, ``usd_per_hour``, ``usd_per_million_tokens``,
        utilisation, and the cheapest options per remaining cell (:func:`cheapest`).

    Raises
    ------
    InputError
        ``searched`` is not a searched sweep (a :func:`plan` result, or one already priced).

    Examples
    --------
    >>> from capnb.latency import workload
    >>> w = workload(prompt_tokens=[1000] * 8, output_tokens=[200] * 8)
    >>> searched = sweep("Llama-3.1-8B", ["H100-SXM", "H200"], [1, 2], 1200, 5.0, workload=w,
    ...                  metric="ttft")
    >>> for target in (10.0, 100.0):  # the search runs once; each target only re-prices it
    ...     best = price(searched, target, buffer=0)
    ...     print(target, best.cheapest_gpu.item(), round(best.cheapest_usd_per_hour.item(), 2))
    10.0 H100-SXM 2.99
    100.0 H100-SXM 29.9
    """
    if not isinstance(searched, xr.Dataset):
        raise InputError(
            f"price: expected a capnb.capacity.sweep result, got {type(searched).__name__}"
        )
    lacks = [f"dim {d!r}" for d in _SEARCHED_DIMS if d not in searched.dims]
    lacks += [f"attr {k!r}" for k in ("prompt_tokens", "output_tokens") if k not in searched.attrs]
    lacks += [] if "per_instance_qps" in searched else ["variable 'per_instance_qps'"]
    if lacks:
        raise InputError(
            f"price: expected a capnb.capacity.sweep result without a target; this one has no "
            f"{', no '.join(lacks)} (a single curve's capacity.plan takes its target itself)"
        )
    if "target_qps" in searched:
        raise InputError(
            "price: this sweep is already priced (it has target_qps); price the search: "
            "capacity.sweep(...) without target_qps"
        )
    result = searched.copy()
    gpus = [str(g) for g in result.gpu.values]
    target = capacity._target(target_qps, like=result.per_instance_qps)
    # a target and a buffer without dims (a worksheet's): every operand below is a variable of
    # the search or built on its coordinates, so the arithmetic runs on the Variables (the same
    # numbers, dims and attrs) without aligning the coordinates at each step (the tests compare)
    plain = not target.dims and not target.coords and _number(buffer_qps)
    if plain:
        capacity._one_buffer(buffer, buffer_qps)
        per_instance = result.per_instance_qps.variable
        terms = capacity._fleet_terms(
            per_instance, target.variable, *capacity._burst(buffer, buffer_qps, per_instance)
        )
        planned_fleet = capacity._with_attrs(terms, keep=False)
    else:
        per_instance = capacity._per_instance(result.per_instance_qps)
        planned_fleet = capacity._fleet(per_instance, target, buffer, buffer_qps).data_vars
    # variables are added in as few assignments as possible: each re-aligns every coordinate
    result = result.assign(
        target_qps=target.assign_attrs(glossary.attrs("target_qps")), **planned_fleet
    )
    prompt, output = result.attrs["prompt_tokens"], result.attrs["output_tokens"]
    scale = result.seq_len / (prompt + output)
    output_tokens = output * scale
    from ..data import load_model

    price = capacity._gpu_price(result.gpu, None)
    specs = [load_model(m) for m in result.model.values]
    prompt_tokens = result.seq_len - output_tokens
    per_request = xr.concat(
        [spec.request_flop(prompt_tokens, output_tokens) for spec in specs], dim=result.model
    )
    flops = xr.DataArray(
        capacity._dense_flops(specs, gpus),
        dims=("model", "gpu"),
        coords={"model": result.model, "gpu": result.gpu},
    )
    if plain and price.indexes["gpu"].equals(result.indexes["gpu"]):
        terms = capacity._cost_terms(
            result.instances.variable, result.per_instance_qps.variable, target.variable,
            result.tensor_parallel.variable, price.variable, output_tokens.variable,
            per_request.variable, flops.variable,
        )  # fmt: skip
        result = result.assign(capacity._with_attrs(terms, keep=True))
    else:
        result = capacity._costs(
            result, target, result.tensor_parallel, price, output_tokens, per_request, flops
        )
    result = result.assign(cheapest(result).data_vars)
    return capacity._ordered(result, ["model", "gpu", "tensor_parallel", "seq_len", "sla"])


def cheapest(
    result: xr.Dataset,
    variable: str = "usd_per_hour",
    *,
    options=("gpu", "tensor_parallel"),
    over=(),
) -> xr.Dataset:
    """The cheapest and second-cheapest option per remaining cell, the gap, and how many qualify.

    This is the capacity step's one rule for "the cheapest": the plan uses it for the fleet of the
    day (``over="slot"``), the cost chart for each GPU's cheapest tensor-parallel degree
    (``options="tensor_parallel"``). Infeasible options (NaN cost) never win; ties go to the
    earlier GPU, then the smaller TP.

    Parameters
    ----------
    result
        A priced result (:func:`sweep` with a target, or :func:`plan` over gpu/TP).
    variable
        The cost to minimise (USD/hour by default).
    options
        The dims whose combinations are the options (default: each (gpu, tensor_parallel) pair).
    over
        Dims the cost is averaged over first (the mean hourly cost ranks as the total does), so
        that one option serves all of them: an option infeasible at any of them is infeasible
        (``over="slot"`` is one fleet type for the day).

    Returns
    -------
    xarray.Dataset
        ``cheapest_<dim>`` and ``runner_up_<dim>`` for each option dim ("" or 0 where none is
        feasible), ``cheapest_usd_per_hour``, ``runner_up_usd_per_hour``, ``cost_gap`` and
        ``feasible_options``, over every other dim of ``result[variable]`` (less ``over``); and,
        when the result has ``binding``, ``unpriced_options``: the options that meet the SLA but
        have no cost (no price for their GPU), which the ranking cannot place ("2 x MI250X, ...";
        "" when none).
    """
    if variable not in result:
        raise InputError(f"cheapest: the result has no {variable!r} (give a target_qps)")
    options = [options] if isinstance(options, str) else list(options)
    over = [over] if isinstance(over, str) else list(over)
    cost = result[variable]
    missing = [d for d in options + over if d not in cost.dims]
    if missing:
        raise InputError(f"cheapest: {variable} has no dim {missing} (its dims: {cost.dims})")
    if over:
        cost = cost.mean(over, skipna=False)  # the same order as the sum, in USD/hour
    stacked = cost.reset_coords(drop=True).stack(option=options)
    first, first_value, second, second_value = xr.apply_ufunc(
        kernels.two_smallest,
        stacked.drop_vars(["option", *options]),
        input_core_dims=[["option"]],
        output_core_dims=[[], [], [], []],
        dask="parallelized",
        output_dtypes=[np.int64, float, np.int64, float],
    )
    out = {}
    for dim in options:
        values = stacked[dim].values
        if values.dtype.kind in "iu":
            labels = np.append(values.astype(np.int64), 0)
        else:
            labels = np.append(values.astype(str), "")
        out[f"cheapest_{dim}"] = first.copy(data=labels[first.values])
        out[f"runner_up_{dim}"] = second.copy(data=labels[second.values])
    out["cheapest_usd_per_hour"] = first_value
    out["runner_up_usd_per_hour"] = second_value
    out["cost_gap"] = second_value - first_value
    out["feasible_options"] = stacked.notnull().sum("option")
    if "binding" in result and set(options) <= set(result.binding.dims):
        out["unpriced_options"] = _unpriced(result.binding, cost, options, over)
    coords = first.coords
    shared = coords.variables
    if all(
        v.coords.keys() == shared.keys()
        and all(c is shared[k] or c.equals(shared[k]) for k, c in v.coords.variables.items())
        for v in out.values()
    ):  # the remaining cells' coordinates, shared: one Dataset of the variables, not aligned
        variables = {n: xr.Variable(v.dims, v.data, glossary.attrs(n)) for n, v in out.items()}
        out = xr.Dataset(variables, coords=coords)
    else:
        out = xr.Dataset(out)
        for name in out.data_vars:
            out[name].attrs = glossary.attrs(name)
    if over:
        out.attrs["averaged_over"] = ", ".join(over)
    return out


def _unpriced(binding: xr.DataArray, cost: xr.DataArray, options: list, over: list) -> xr.DataArray:
    """Per remaining cell, the options that meet the SLA (in every cell of ``over``) with no cost.

    ``cost`` is already averaged over ``over``; named ``TP x GPU`` for (gpu, tensor_parallel)
    options, ``dim=value`` joined by " x " for others.
    """
    meets = binding.isin(capacity.FEASIBLE)
    meets = meets.all([d for d in over if d in meets.dims])
    left = (meets & cost.isnull()).reset_coords(drop=True).compute().stack(option=options)
    if set(options) == {"gpu", "tensor_parallel"}:
        order = [options.index("tensor_parallel"), options.index("gpu")]
        labels = [f"{o[order[0]]} x {o[order[1]]}" for o in left.option.values]
    else:
        labels = [
            " x ".join(f"{d}={v}" for d, v in zip(options, np.atleast_1d(o), strict=True))
            for o in left.option.values
        ]

    def names(mask: np.ndarray) -> str:
        return ", ".join(label for label, m in zip(labels, mask, strict=True) if m)

    named = np.vectorize(names, signature="(n)->()", otypes=[object])
    rest = [d for d in left.dims if d != "option"]
    values = named(left.transpose(*rest, "option").values).astype(str)
    return xr.DataArray(values, dims=rest, coords={d: left[d] for d in rest if d in left.coords})


#: The band's two ends, as :func:`band_cheapest` ranks them: latency at the high ratio (slow:
#: fewer requests/s per instance, ``instances_high``), then at the low ratio (fast).
BAND_ENDS = ("slow", "fast")


def band_cheapest(result: xr.Dataset, *, over=()) -> dict[str, xr.Dataset]:
    """The cheapest option at each end of a banded answer's band, ranked as :func:`cheapest` ranks.

    Each option's cost at an end is its USD/hour per instance times the instances that end needs
    (``instances_high`` at the slow end, ``instances_low`` at the fast end): the whole model's
    error moved to one end of its held-out band at once, the same ratio for every option, as an
    error shared by the options (one model prices them all) would move them.

    Returns
    -------
    dict
        ``{"slow": cheapest, "fast": cheapest}`` (:func:`capnb.capacity.cheapest` datasets; an
        end where no option meets the SLA has ``feasible_options`` 0); ``{}`` when ``result``
        carries no band or no cost.
    """
    needed = ("instances_low", "instances_high", "instances", "usd_per_hour")
    if any(name not in result for name in needed):
        return {}
    # USD/hour of one instance; a slot that needs none costs none at either end
    per_instance = (result.usd_per_hour / result.instances).where(result.instances > 0, 0.0)
    out = {}
    for end, count in zip(BAND_ENDS, ("instances_high", "instances_low"), strict=True):
        cost = (per_instance * result[count]).where(result[count].notnull())
        cost = cost.where(result.instances.notnull())  # (an option the answer cannot price)
        out[end] = cheapest(xr.Dataset({"usd_per_hour": cost}), over=over)
    return out

"""Latency curves: the analytic model, grids, workloads and reading a curve at a concurrency."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from .. import _validate, glossary
from ..data import _curve
from ..errors import InputError
from ..kernels import latency as kernels
from . import calibration as _calibration

#: Latency metrics every curve carries: ttft, tpot, itl, e2e (:data:`capnb.data` curves).
METRICS = _curve.METRICS
#: Latency quantiles every curve carries (others a source measured are kept too).
QUANTILES = _curve.QUANTILES
notes = _curve.notes


def check(curve: xr.Dataset) -> xr.Dataset:
    """Check a curve built by hand (or edited) the way every reader checks its output; return it.

    The curve holds ``latency`` (s) over ``concurrency``, ``metric`` and ``latency_quantile``.

    Raises
    ------
    InputError
        Not a curve, or any of the faults :func:`capnb._curve.build` rejects.
    """
    if not isinstance(curve, xr.Dataset) or "latency" not in curve:
        raise InputError("expected a latency curve (an xarray Dataset with a 'latency' variable)")
    needed = {"concurrency", "metric", "latency_quantile"}
    if not needed <= set(curve["latency"].dims):
        raise InputError(
            f"a curve's latency must have dims {sorted(needed)}, got {list(curve['latency'].dims)}"
        )
    extra = [d for d in curve["latency"].dims if d not in needed]
    if extra:
        return curve  # a stack of curves (an analytic sweep): checked where it was built
    table = curve["latency"].transpose("concurrency", "metric", "latency_quantile")
    latency = {
        (str(m), float(q)): table.sel(metric=m, latency_quantile=q).values
        for m in table.metric.values
        for q in table.latency_quantile.values
    }
    mean = (
        {str(m): curve["mean_latency"].sel(metric=m).values for m in curve.metric.values}
        if "mean_latency" in curve
        else None
    )
    qps = curve["measured_qps"].values if "measured_qps" in curve else None
    rebuilt = _curve.build(
        curve.concurrency.values,
        latency,
        mean=mean,
        measured_qps=qps,
        source=str(curve.attrs.get("source", "curve")),
        kind=str(curve.attrs.get("kind", "measured")),
        attrs={k: v for k, v in curve.attrs.items() if k not in ("source", "kind", "notes")},
        notes=_curve.notes(curve),
    )
    return rebuilt


def _over_concurrency(curve: object, where: str) -> None:
    """Raise unless ``curve`` is a Dataset whose ``latency`` is over ``concurrency``."""
    if not isinstance(curve, xr.Dataset) or "latency" not in curve:
        raise InputError(
            f"{where}: expected a latency curve (an xarray Dataset with a 'latency' variable), "
            f"got a {type(curve).__name__}"
        )
    if "concurrency" not in curve["latency"].dims:
        raise InputError(
            f"{where}: a curve's latency is over concurrency; this one is over "
            f"{', '.join(map(str, curve['latency'].dims)) or 'no dim'}"
        )


#: The largest dip :func:`envelope` raises as noise: a point this many times below the highest
#: value measured at a smaller concurrency is refused (seconds against milliseconds is 1000x).
LARGEST_DIP = 10.0


def envelope(curve: xr.Dataset) -> xr.Dataset:
    """The curve made non-decreasing in concurrency (running maximum), each raised point noted.

    Latency that falls as concurrency rises is measurement noise (a warm cache, a lucky batch); a
    plan must not read a dip as extra headroom. Applies to ``latency`` and ``mean_latency``. A
    point more than :data:`LARGEST_DIP` times below the highest value at a smaller concurrency is
    not noise (a run saved in other units, a warm-up outlier): an ``InputError`` names it.

    Examples
    --------
    >>> from capnb.data import load_latency_curve
    >>> curve = envelope(load_latency_curve("dstack-vllm-mi300x-short"))
    >>> bool((curve.latency.sel(metric="ttft", latency_quantile=0.99).diff("concurrency") >= 0).all())
    True
    """
    _over_concurrency(curve, "envelope")
    names = [name for name in ("latency", "mean_latency") if name in curve]
    envelopes = {
        name: xr.apply_ufunc(
            kernels.monotone_envelope,
            curve[name],
            input_core_dims=[["concurrency"]],
            output_core_dims=[["concurrency"]],
            dask="parallelized",
            output_dtypes=[float],
        )
        .transpose(*curve[name].dims)
        .assign_attrs(curve[name].attrs)
        for name in names
    }
    result = curve.assign(envelopes)  # one assignment: each re-aligns every coordinate
    result.attrs = dict(curve.attrs)
    for name in names:
        data, raised = curve[name], envelopes[name]
        if "concurrency" in data.dims and data.ndim <= 3 and not data.chunks:
            changed = (raised > data) & data.notnull()
            for index in zip(*np.nonzero(changed.values), strict=True):
                point = {d: data[d].values[i] for d, i in zip(data.dims, index, strict=True)}
                what = " ".join(
                    f"{point[d]:g}" if d == "latency_quantile" else str(point[d])
                    for d in data.dims
                    if d != "concurrency"
                )
                low, high = float(data.values[index]), float(raised.values[index])
                label = f"{name} {what}" if what else name
                if high > LARGEST_DIP * low:
                    source = curve.attrs.get("source", "the curve")
                    raise InputError(
                        f"{source}: {label} at concurrency {point['concurrency']} is "
                        f"{low:.4g} s, {high / low:,.0f}x below the {high:.4g} s measured at a "
                        "smaller concurrency: not noise. Was that run saved in other units "
                        "(seconds in a *_ms field), or is the other a warm-up outlier? Fix or "
                        "drop the run."
                    )
                if f"{low:.4g}" == f"{high:.4g}":  # a dip below the note's 4 digits: no news
                    continue
                _curve.add_note(
                    result,
                    f"envelope: {label} at concurrency {point['concurrency']} raised from "
                    f"{low:.4g} s to {high:.4g} s (a lower value than at a smaller concurrency)",
                )
    return result


def at(curve: xr.Dataset, concurrency) -> xr.Dataset:
    """Latency (s) at the given concurrencies, linear between measured points, NaN outside them.

    Examples
    --------
    >>> from capnb.data import load_latency_curve
    >>> curve = load_latency_curve("dstack-vllm-mi300x-short")
    >>> value = at(curve, [3, 4096]).latency.sel(metric="ttft", latency_quantile=0.5)
    >>> round(float(value[0]), 4), bool(np.isnan(value[1]))
    (0.3851, True)
    """
    _over_concurrency(curve, "at")
    targets = _validate.positive_ints(concurrency, "concurrency").astype(float)
    target = xr.DataArray(targets, dims="at")
    out = {}
    for name in ("latency", "mean_latency", "measured_qps"):
        if name not in curve:
            continue
        out[name] = xr.apply_ufunc(
            kernels.interpolate,
            curve.concurrency.astype(float),
            curve[name],
            target,
            input_core_dims=[["concurrency"], ["concurrency"], ["at"]],
            output_core_dims=[["at"]],
            dask="parallelized",
            output_dtypes=[float],
        ).assign_attrs(curve[name].attrs)
    result = xr.Dataset(out).rename(at="concurrency")
    result = result.assign_coords(
        concurrency=("concurrency", targets.astype(np.int64), glossary.attrs("concurrency"))
    )
    for name in out:
        dims = [d if d != "concurrency" else "concurrency" for d in curve[name].dims]
        result[name] = result[name].transpose(*dims)
    result.attrs = dict(curve.attrs)
    return result


# -- workload ------------------------------------------------------------------------------------
def workload(
    trace: xr.Dataset | None = None,
    *,
    prompt_tokens=None,
    output_tokens=None,
    samples: int | None = 512,
) -> xr.Dataset:
    """The prompt and output length distribution the analytic model prices, as ``samples`` requests.

    Parameters
    ----------
    trace
        A request log with ``prompt_tokens`` and ``output_tokens`` over ``request``
        (:func:`capnb.data.load_trace`), or None with the two arrays given.
    prompt_tokens, output_tokens
        Token counts per request (when no trace is given).
    samples
        How many representative requests to keep (None: all). The requests are ordered by output
        then prompt length and taken at evenly spaced ranks ``(i + 0.5) / samples``: the output
        length distribution, which dominates end-to-end latency, is kept quantile by quantile,
        and each kept request keeps its own prompt. Deterministic.

    Returns
    -------
    xarray.Dataset
        ``prompt_tokens`` and ``output_tokens`` (float64, tokens) over ``request``; attrs
        ``requests`` (in the source), ``mean_prompt_tokens``, ``mean_output_tokens`` (of the source).

    Examples
    --------
    >>> w = workload(prompt_tokens=[100, 200, 300, 400], output_tokens=[10, 20, 30, 40], samples=2)
    >>> w.output_tokens.values.tolist()
    [20.0, 40.0]
    """
    if trace is not None:
        if prompt_tokens is not None or output_tokens is not None:
            raise InputError("workload: give a trace or the two arrays, not both")
        for name in ("prompt_tokens", "output_tokens"):
            if name not in trace:
                raise InputError(f"workload: the trace has no {name!r} variable")
        prompt = _token_counts(trace["prompt_tokens"].values, "prompt_tokens")
        output = _token_counts(trace["output_tokens"].values, "output_tokens")
        source = str(trace.attrs.get("title", trace.attrs.get("source", "trace")))
    else:
        if prompt_tokens is None or output_tokens is None:
            raise InputError("workload: give a trace, or both prompt_tokens and output_tokens")
        prompt = _token_counts(prompt_tokens, "prompt_tokens")
        output = _token_counts(output_tokens, "output_tokens")
        source = "arrays"
    if prompt.size == 0 or prompt.size != output.size:
        raise InputError(
            f"workload: prompt_tokens ({prompt.size}) and output_tokens ({output.size}) must be "
            "non-empty and of equal length"
        )
    for name, values in (("prompt_tokens", prompt), ("output_tokens", output)):
        bad = ~np.isfinite(values) | (values < 1)
        if bad.any():
            index, count = int(np.flatnonzero(bad)[0]), int(bad.sum())
            if trace is None:
                raise InputError(
                    f"workload: {name} must be >= 1 token, got {values[bad][0]:g} at request "
                    f"{index}"
                )
            # the log's own words: which file, which request in time order, and when it came
            times = trace["time"].values.ravel() if "time" in trace else np.array([])
            when = (
                f" (at {np.datetime_as_string(times[index], unit='s')})"
                if times.size == values.size
                else ""
            )
            # the file's own column, as the loader said it read it ("prompt_tokens from 'x'")
            read = re.search(rf"{name} from ('[^']*'|\"[^\"]*\")", str(trace.attrs.get("columns")))
            column = f" in column {read.group(1)}" if read else ""
            raise InputError(
                f"workload: {name} must be >= 1 token; {source}: request {index + 1:,} of "
                f"{values.size:,} in time order{when} holds {values[bad][0]:g}{column} ({count:,} such "
                f"request{'s' if count > 1 else ''}): a request that produced no tokens has no "
                "latency to price; drop such rows from the log"
            )
    order = np.lexsort((prompt, output))
    if samples is not None:
        count = _validate.positive_int(samples, "samples")
        if count < prompt.size:
            ranks = np.floor((np.arange(count) + 0.5) / count * prompt.size).astype(np.int64)
            order = order[ranks]
    return xr.Dataset(
        {
            "prompt_tokens": ("request", prompt[order], glossary.attrs("prompt_tokens")),
            "output_tokens": ("request", output[order], glossary.attrs("output_tokens")),
        },
        attrs={
            "source": source,
            "requests": int(prompt.size),
            "mean_prompt_tokens": float(prompt.mean()),
            "mean_output_tokens": float(output.mean()),
        },
    )


def _token_counts(values, name: str) -> np.ndarray:
    """Token counts as a flat float array, or an InputError naming ``name`` and a value that is not."""
    try:
        return np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        flat = np.asarray(values, dtype=object).ravel()
        bad = next((v for v in flat if not _is_number(v)), flat[0] if flat.size else values)
        bad = bad.item() if isinstance(bad, np.generic) else bad  # 'x', not np.str_('x')
        raise InputError(f"workload: {name} must be token counts (numbers), got {bad!r}") from None


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def concurrency_grid(upper: int, *, dense_up_to: int = 64, per_doubling: int = 8) -> np.ndarray:
    """Concurrencies (requests in flight) from 1 to ``upper``, dense at first, then geometric.

    Every integer up to ``dense_up_to``, then ``per_doubling`` values per doubling, always ending at
    ``upper``.

    Examples
    --------
    >>> concurrency_grid(100, dense_up_to=4, per_doubling=2).tolist()
    [1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 100]
    """
    upper = _validate.positive_int(upper, "upper")
    dense = np.arange(1, min(upper, dense_up_to) + 1)
    if upper <= dense_up_to:
        return dense
    steps = math.ceil(math.log2(upper / dense_up_to) * per_doubling)
    sparse = np.round(dense_up_to * 2.0 ** (np.arange(1, steps + 1) / per_doubling))
    sparse = sparse[sparse < upper].astype(np.int64)
    return np.unique(np.concatenate([dense, sparse, [upper]]))


# -- the analytic model --------------------------------------------------------------------------
def _names(values, argument):
    return _validate.names(values.values if isinstance(values, xr.DataArray) else values, argument)


def analytic(
    model,
    gpu,
    tensor_parallel,
    *,
    workload: xr.Dataset,
    concurrency=None,
    seq_len=None,
    metrics: Sequence[str] = METRICS,
    quantiles: Sequence[float] = QUANTILES,
    calibration=None,
    calibration_source: str = "splitwise",
    kv_dtype: str = "auto",
    weight_dtype: str | None = None,
    invalid_tensor_parallel: str = "raise",
    chunks: Mapping[str, int] | None = None,
) -> xr.Dataset:
    """Analytic latency curves over model x gpu x tensor_parallel [x seq_len] x concurrency.

    Parameters
    ----------
    model, gpu, tensor_parallel
        Catalog ids (or ModelSpecs, config paths for model) and positive integers; scalars or lists.
    workload
        The length distribution (:func:`workload`).
    concurrency
        Concurrencies to evaluate (default :func:`concurrency_grid` up to 256).
    seq_len
        None: the workload as given (the result gets a scalar ``seq_len`` coordinate, its mean prompt
        + output tokens, rounded up: the context the memory check uses). Integers: for each, the
        workload rescaled (prompt and output lengths times ``seq_len / mean(prompt + output)``, not
        rounded) so that its mean context is ``seq_len``; a ``seq_len`` dim.
    metrics, quantiles
        Which of ttft, tpot, itl, e2e and which quantiles in (0, 1) to compute.
    calibration
        None (:func:`capnb.calibration.calibration_for` each GPU, from ``calibration_source``), a
        :class:`~capnb.calibration.Calibration` for all GPUs, or a mapping by GPU.
    kv_dtype, weight_dtype
        As in :func:`capnb.memory.sweep`. FP8 weights are priced at the GPU's FP8 FLOP/s.
    invalid_tensor_parallel
        ``"raise"`` or ``"mask"`` (NaN latency where the degree cannot shard the model).
    chunks
        Dask chunk sizes per dim (e.g. ``{"gpu": 1}``); the result is the same.

    Returns
    -------
    xarray.Dataset
        A curve (``latency`` over ..., concurrency, metric, latency_quantile; ``mean_latency``;
        ``measured_qps`` all NaN) with attrs ``kind="analytic"``, ``prompt_tokens`` and
        ``output_tokens`` (workload means), and a ``calibration`` coordinate over gpu naming the fit.
        NaN latency: the GPU lacks a figure the model needs (interconnect bandwidth at TP > 1).

    Examples
    --------
    >>> w = workload(prompt_tokens=[512] * 4, output_tokens=[128] * 4)
    >>> curve = analytic("Llama-2-70B", "H100-SXM", 4, workload=w, concurrency=[1, 16])
    >>> bool(curve.latency.sel(metric="e2e", latency_quantile=0.99).diff("concurrency") > 0)
    True
    """
    specs, gpus, tps, conc, qs = _analytic_args(
        model, gpu, tensor_parallel, concurrency, metrics, quantiles, invalid_tensor_parallel
    )
    if not isinstance(workload, xr.Dataset) or "prompt_tokens" not in workload:
        raise InputError("workload: pass capnb.latency.workload(...) (a Dataset over 'request')")
    gpu_ids = [str(g) for g in gpus.gpu.values]
    model_vectors = _model_vectors(specs, tps, kv_dtype, weight_dtype, invalid_tensor_parallel)
    gpu_vectors, fitted = _gpu_figures(specs, gpus, weight_dtype, calibration, calibration_source)
    missing = _missing_figures(gpu_ids, gpu_vectors[0], tps)
    prompts, outputs, seq_coord = _scaled_lengths(workload, seq_len)
    arrays = {
        "model": xr.DataArray(model_vectors, dims=("model", "tensor_parallel", "model_field")),
        "gpu": xr.DataArray(gpu_vectors, dims=("model", "gpu", "gpu_field")),
        "tp": xr.DataArray(tps, dims="tensor_parallel"),
        "cal": xr.DataArray(
            np.array([fitted[g].as_array() for g in gpu_ids]), dims=("gpu", "calibration_field")
        ),
    }
    chunks = _validate.chunk_sizes(chunks, ("model", "gpu", "tensor_parallel", "seq_len"))
    latency, mean = _analytic_kernel(arrays, prompts, outputs, conc, metrics, qs, chunks)
    coords = {
        "model": [s.name for s in specs],
        "gpu": gpu_ids,
        "tensor_parallel": tps,
        "concurrency": conc,
        "metric": list(metrics),
        "latency_quantile": qs,
    }
    result = _analytic_curve(
        latency, mean, coords, [fitted[g].fitted_on for g in gpu_ids], seq_coord
    )
    result.attrs = _analytic_attrs(workload, seq_len, kv_dtype, weight_dtype, missing)
    return result


def _analytic_args(model, gpu, tensor_parallel, concurrency, metrics, quantiles, invalid):
    """The checked models (specs), GPUs (catalog rows), degrees, sorted concurrencies, quantiles.

    Also checks ``invalid`` (invalid_tensor_parallel).
    """
    from ..data import load_gpus, load_model

    specs = [load_model(m) for m in _names(model, "model")]
    model_ids = [s.name for s in specs]
    if len(set(model_ids)) != len(model_ids):
        raise InputError(f"model: {model_ids} names the same model twice")
    gpus = load_gpus(_names(gpu, "gpu"))
    tps = _validate.positive_ints(
        tensor_parallel.values if isinstance(tensor_parallel, xr.DataArray) else tensor_parallel,
        "tensor_parallel",
    )
    conc = _validate.positive_ints(
        concurrency_grid(256) if concurrency is None else concurrency, "concurrency"
    )
    conc = np.sort(conc)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise InputError(f"metrics: {unknown or 'none'} not in {METRICS}")
    qs = np.asarray(quantiles, dtype=float)
    if qs.size == 0 or ((qs <= 0) | (qs >= 1)).any():
        raise InputError(f"quantiles must be inside (0, 1), got {list(quantiles)}")
    if invalid not in ("raise", "mask"):
        raise InputError("invalid_tensor_parallel must be 'raise' or 'mask'")
    return specs, gpus, tps, conc, qs


def _model_vectors(specs, tps, kv_dtype, weight_dtype, invalid) -> np.ndarray:
    """The kernel's figures of each model at each degree, over (model, tensor_parallel, field).

    NaN where the degree cannot shard the model; with ``invalid="raise"`` that is an error naming
    every such pair.
    """
    vectors = np.full((len(specs), tps.size, len(kernels.MODEL_FIELDS)), np.nan)
    problems = []
    for i, spec in enumerate(specs):
        for j, tp in enumerate(tps):
            reason = spec.valid_tensor_parallel(int(tp))
            if reason:
                problems.append(reason)
                continue
            vectors[i, j] = _calibration.model_vector(
                spec, int(tp), kv_dtype=kv_dtype, weight_dtype=weight_dtype
            )
    if problems and invalid == "raise":
        raise InputError(
            "tensor_parallel: "
            + "; ".join(problems)
            + " (invalid_tensor_parallel='mask' marks them)"
        )
    return vectors


def _gpu_figures(specs, gpus, weight_dtype, calibration, calibration_source):
    """Each GPU's figures per model, over (model, gpu, field), and its calibration by GPU id."""
    gpu_ids = [str(g) for g in gpus.gpu.values]
    # FP8 weights run at FP8 FLOP/s: the GPU vector depends on the model's weight dtype
    dtypes = [weight_dtype or s.weight_dtype for s in specs]
    vectors = np.array([[_calibration.gpu_vector(gpus, g, d) for g in gpu_ids] for d in dtypes])
    return vectors, _calibration.calibrations(gpu_ids, calibration, calibration_source)


def _scaled_lengths(workload: xr.Dataset, seq_len):
    """The workload's prompt and output tokens (over request[, seq_len]) and the seq_len coordinate.

    None: the workload as given, a scalar ``seq_len`` (its mean context, rounded up). Integers:
    the lengths rescaled so that the mean context is each ``seq_len`` (outputs at least 1 token).
    """
    prompt = workload["prompt_tokens"].values.astype(float)
    output = workload["output_tokens"].values.astype(float)
    mean_context = float(np.mean(prompt + output))
    if seq_len is None:
        prompts = xr.DataArray(prompt, dims="request")
        outputs = xr.DataArray(output, dims="request")
        return (
            prompts,
            outputs,
            {"seq_len": ((), math.ceil(mean_context), glossary.attrs("seq_len"))},
        )
    lengths = _validate.positive_ints(
        seq_len.values if isinstance(seq_len, xr.DataArray) else seq_len, "seq_len"
    )
    scale = xr.DataArray(lengths / mean_context, dims="seq_len")
    prompts = xr.DataArray(prompt, dims="request") * scale
    outputs = np.maximum(xr.DataArray(output, dims="request") * scale, 1.0)
    return prompts, outputs, {"seq_len": ("seq_len", lengths, glossary.attrs("seq_len"))}


def _analytic_kernel(arrays: dict, prompts, outputs, conc, metrics, qs, chunks):
    """Latency quantiles and means from :func:`capnb.kernels.latency.analytic_curve`, broadcast.

    ``arrays``: the model, gpu, tp and cal figures as DataArrays. All are chunked per ``chunks``
    first (dask), which leaves the result the same.
    """
    if chunks:
        arrays = {
            k: v.chunk({d: c for d, c in chunks.items() if d in v.dims}) for k, v in arrays.items()
        }
        if "seq_len" in chunks and "seq_len" in prompts.dims:
            prompts = prompts.chunk({"seq_len": chunks["seq_len"]})
            outputs = outputs.chunk({"seq_len": chunks["seq_len"]})
    codes = np.array([kernels.METRIC_CODES[m] for m in metrics], dtype=np.int64)
    return xr.apply_ufunc(
        kernels.analytic_curve,
        arrays["model"],
        arrays["gpu"],
        arrays["tp"],
        arrays["cal"],
        prompts,
        outputs,
        xr.DataArray(conc.astype(float), dims="concurrency"),
        xr.DataArray(codes, dims="metric"),
        xr.DataArray(qs, dims="latency_quantile"),
        input_core_dims=[
            ["model_field"],
            ["gpu_field"],
            [],
            ["calibration_field"],
            ["request"],
            ["request"],
            ["concurrency"],
            ["metric"],
            ["latency_quantile"],
        ],
        output_core_dims=[["concurrency", "metric", "latency_quantile"], ["concurrency", "metric"]],
        dask="parallelized",
        output_dtypes=[float, float],
    )


def _analytic_curve(latency, mean, coords: dict, fitted_on: list[str], seq_coord: dict):
    """The kernel's output as a curve: ``latency``, ``mean_latency``, ``measured_qps`` (all NaN).

    ``coords``: the values of each dim, given the glossary's attrs; ``fitted_on``: each GPU's
    calibration; ``seq_coord``: the ``seq_len`` coordinate.
    """
    lead = [d for d in ("model", "gpu", "tensor_parallel", "seq_len") if d in latency.dims]
    result = xr.Dataset(
        {
            "latency": latency.transpose(*lead, "concurrency", "metric", "latency_quantile"),
            "mean_latency": mean.transpose(*lead, "concurrency", "metric"),
        }
    )
    result["latency"].attrs = glossary.attrs("latency")
    result["mean_latency"].attrs = glossary.attrs("mean_latency")
    result["measured_qps"] = xr.full_like(result.mean_latency.isel(metric=0), np.nan).assign_attrs(
        glossary.attrs("measured_qps")
    )
    return result.assign_coords(
        **{name: (name, values, glossary.attrs(name)) for name, values in coords.items()},
        calibration=("gpu", fitted_on, {"long_name": "calibration"}),
        **seq_coord,
    )


def _analytic_attrs(workload: xr.Dataset, seq_len, kv_dtype, weight_dtype, missing) -> dict:
    """What an analytic curve says of itself: kind, workload means, dtypes, what it cannot price."""
    prompt = workload["prompt_tokens"].values.astype(float)
    output = workload["output_tokens"].values.astype(float)
    scale_note = (
        "" if seq_len is None else "; lengths rescaled per seq_len to a mean context of seq_len"
    )
    return {
        "source": "capnb analytic model (capnb.kernels.latency)",
        "kind": "analytic",
        "prompt_tokens": float(prompt.mean()),
        "output_tokens": float(output.mean()),
        "workload": f"{workload.attrs.get('source', 'workload')}: {prompt.size} representative "
        f"requests of {workload.attrs.get('requests', prompt.size)}{scale_note}",
        "kv_dtype": kv_dtype,
        # the memory check of capnb.capacity.safe_concurrency reads it ("auto": each config's)
        "weight_dtype": weight_dtype or "auto",
        "notes": "\n".join(missing),
        # the same reasons on their own: which options have no latency, and why ("" if none)
        "unmodelled": "; ".join(missing),
    }


def _missing_figures(gpu_ids: list[str], vectors: np.ndarray, tps: np.ndarray) -> list[str]:
    """Why a GPU gets no latency (NaN): a catalog figure the model needs is missing (one line each).

    ``vectors``: each GPU's (FLOP/s, HBM bytes/s, link bytes/s) as the model reads them.
    """
    lines, unlinked = [], []
    fields = ("dense FLOP/s (dense_bf16_flops)", "HBM bandwidth (hbm_bandwidth)")
    above = [int(tp) for tp in tps if tp > 1]
    for gpu, vector in zip(gpu_ids, vectors, strict=True):
        missing = [name for name, value in zip(fields, vector[:2], strict=True) if not value > 0]
        if missing:
            lines.append(
                f"no latency on {gpu}: the GPU catalog has no {' or '.join(missing)} for it"
            )
        elif above and not vector[2] > 0:
            unlinked.append(gpu)
    if unlinked:
        lines.append(
            f"no latency on {', '.join(unlinked)} at tensor parallelism "
            f"{', '.join(map(str, above))}: the GPU catalog has no GPU-to-GPU link bandwidth "
            f"(interconnect_bandwidth) for {'it' if len(unlinked) == 1 else 'them'}, which the "
            "model needs above TP 1"
        )
    return lines

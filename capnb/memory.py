"""Step 2, memory: weights (fixed) + KV cache (dynamic) + headroom, per model, GPU and tensor parallelism.

The article's lesson: GPU memory holds a fixed part, the weights, and a dynamic part, the KV cache, which
grows with concurrency x sequence length. A plan that looks only at compute runs out of memory at a
concurrency the compute could still serve. Its rule, with capnb's default in brackets::

    total = weights + concurrency x seq_len x kv_bytes_per_token, plus 10-20 % [15 %] headroom

capnb applies it per GPU of a tensor-parallel group, the way serving runtimes shard a model: weights
split across ranks; KV heads split, but replicated when the group is larger than the KV heads (at
least one head per rank); an MLA latent cache replicated on every rank.

Two accountings (:func:`accounting`):

``"article"``
    headroom = 15 % of (weights + KV cache); the whole GPU is usable.
``"vllm"``
    vLLM's: the runtime may use ``gpu_memory_utilization`` (0.90) of the GPU; it reserves memory for
    activations and for non-torch allocations (CUDA graphs, NCCL buffers); the KV cache is allocated
    in 16-token blocks.

Entry points: :func:`sweep` (the full grid as a Dataset), :func:`max_concurrency` (the reduced answer
only) and :func:`describe` (the answer in words).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np
import xarray as xr

from . import _validate, glossary
from .data import load_gpus, load_model
from .errors import InputError
from .kernels import memory as kernels
from .modelspec import ModelSpec, dtype_bytes

__all__ = [
    "ACCOUNTINGS",
    "LIMIT_REASONS",
    "Accounting",
    "accounting",
    "concurrency_ticks",
    "describe",
    "max_concurrency",
    "sweep",
]

GIB = 2**30

#: What limits ``max_concurrency`` in a cell.
LIMIT_REASONS = {
    "kv_cache": "the KV cache fills the memory left after weights and headroom",
    "weights": "the weights (with headroom) alone exceed the GPU's usable memory",
    "one_sequence": "the weights fit, but not even one sequence of this length",
    "tensor_parallel_invalid": "this tensor-parallel degree cannot shard the model",
}

#: Tensor-parallel degrees tried when naming the smallest one that would fit.
_TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Accounting:
    """How memory is counted. Build it with :func:`accounting`.

    Attributes
    ----------
    name
        ``"article"`` or ``"vllm"``.
    headroom_fraction
        Headroom as a share of weights + KV cache (the article's 10-20 %).
    gpu_memory_utilization
        Share of the GPU's memory the runtime may use.
    block_tokens
        KV cache allocation unit in tokens (vLLM: 16; the article: 1).
    non_torch_bytes_single, non_torch_bytes_multi
        Per-GPU memory outside PyTorch's allocator (CUDA context, CUDA graphs, NCCL buffers) at
        tensor_parallel = 1 and >= 2. Defaults: 1.79 GiB and 3.58 GiB, as vLLM's profiler reported
        for Meta-Llama-3-8B on an H100 (vllm-project/vllm pull request 10511, 2024-12).
    max_num_batched_tokens
        Tokens in vLLM's profiling forward pass, which sets the activation reserve.
    """

    name: str
    headroom_fraction: float
    gpu_memory_utilization: float
    block_tokens: int
    non_torch_bytes_single: float = 0.0
    non_torch_bytes_multi: float = 0.0
    max_num_batched_tokens: int = 0

    def reserve_bytes(self, spec: ModelSpec, tensor_parallel: int) -> float:
        """Fixed per-GPU reserve: non-torch memory plus the activation peak (0 for the article)."""
        if self.name == "article":
            return 0.0
        non_torch = (
            self.non_torch_bytes_single if tensor_parallel == 1 else self.non_torch_bytes_multi
        )
        return non_torch + self.activation_bytes(spec, tensor_parallel)

    def activation_bytes(self, spec: ModelSpec, tensor_parallel: int) -> float:
        """Estimated peak activations of one profiling forward pass, per GPU.

        The widest live tensors of a decoder layer for ``max_num_batched_tokens`` tokens in the
        model's 16-bit dtype: the gate/up projection output (2 x intermediate / TP), the activated
        output (intermediate / TP) and two hidden-size buffers (residual and normed input). For
        Meta-Llama-3-8B at 8,192 tokens this is 0.78 GiB; vLLM measured 1.26 GiB (pull request
        10511), the rest being allocator slack and logits. The difference moves the KV budget of that
        example by under 1 %.
        """
        width = 2 * spec.hidden_size + 3 * spec.intermediate_size / tensor_parallel
        return float(self.max_num_batched_tokens * width * 2)


_ACCOUNTINGS = {
    "article": Accounting(
        "article", headroom_fraction=0.15, gpu_memory_utilization=1.0, block_tokens=1
    ),
    "vllm": Accounting(
        "vllm",
        headroom_fraction=0.0,
        gpu_memory_utilization=0.90,
        block_tokens=16,
        non_torch_bytes_single=1.79 * GIB,
        non_torch_bytes_multi=3.58 * GIB,
        max_num_batched_tokens=8192,
    ),
}
ACCOUNTINGS = tuple(_ACCOUNTINGS)


def accounting(name: str | Accounting = "article", **overrides: float) -> Accounting:
    """Return a memory accounting by name, with any field overridden.

    Examples
    --------
    >>> accounting("article", headroom_fraction=0.2).headroom_fraction
    0.2
    >>> accounting("vllm").block_tokens
    16
    """
    if isinstance(name, Accounting):
        base = name
    elif name in _ACCOUNTINGS:
        base = _ACCOUNTINGS[name]
    else:
        raise InputError(f"accounting={name!r} is not known; use one of {list(_ACCOUNTINGS)}")
    fields = set(asdict(base)) - {"name"}
    unknown = set(overrides) - fields
    if unknown:
        raise InputError(
            f"accounting: unknown setting(s) {sorted(unknown)}; known: {sorted(fields)}"
        )
    result = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    _validate.fraction(result.headroom_fraction, "headroom_fraction", high=10.0)
    _validate.fraction(result.gpu_memory_utilization, "gpu_memory_utilization", low_open=True)
    _validate.positive_int(result.block_tokens, "block_tokens")
    for field in ("non_torch_bytes_single", "non_torch_bytes_multi"):
        _validate.fraction(getattr(result, field), field, high=float("inf"))
    return result


# -- inputs ---------------------------------------------------------------------------------------
_AXES = ("model", "gpu", "tensor_parallel", "concurrency", "seq_len")


def _axes(
    grid: object, given: Mapping[str, object], required: tuple[str, ...]
) -> dict[str, object]:
    """Merge a grid (Dataset, Coordinates or mapping) with keyword axes; keep the grid's dim order."""
    axes: dict[str, object] = {}
    if grid is not None:
        source = grid.coords if hasattr(grid, "coords") else grid
        if not isinstance(source, Mapping):
            raise InputError(
                f"grid must be an xarray Dataset or a mapping of axes, got {type(grid).__name__}"
            )
        order = list(getattr(grid, "dims", source))
        axes = {d: source[d] for d in order if d in source and d in _AXES}
    for name, value in given.items():
        if value is not None:
            if name in axes:
                raise InputError(f"{name} is given twice: in grid and as an argument")
            axes[name] = value
    missing = [a for a in required if a not in axes]
    if missing:
        raise InputError(
            f"missing grid axis {', '.join(missing)} (give it in grid= or as an argument)"
        )
    extra = [a for a in axes if a not in required]
    if extra:
        raise InputError(
            f"unexpected grid axis {', '.join(extra)}; this function takes {', '.join(required)}"
        )
    return axes


def _values(axis: object) -> object:
    return axis.values if isinstance(axis, xr.DataArray | xr.Variable) else axis


def _chunks_of(axes: dict[str, object], chunks: Mapping[str, int] | None) -> dict[str, object]:
    found = {
        name: a.chunks[0]
        for name, a in axes.items()
        if isinstance(a, xr.DataArray) and a.chunks is not None
    }
    return {**found, **(chunks or {})}


def _inputs(axes, kv_dtype, weight_dtype, acct, invalid_tensor_parallel) -> xr.Dataset:
    """Per (model, tensor_parallel) and per gpu inputs of the kernels, validated."""
    specs = [load_model(m) for m in _validate.names(_values(axes["model"]), "model")]
    model_ids = [s.name for s in specs]
    if len(set(model_ids)) != len(model_ids):
        raise InputError(f"model: {model_ids} names the same model twice")
    gpus = load_gpus(_validate.names(_values(axes["gpu"]), "gpu"))
    tps = _validate.positive_ints(_values(axes["tensor_parallel"]), "tensor_parallel")
    if kv_dtype != "auto":
        dtype_bytes(kv_dtype, argument="kv_dtype")
    if weight_dtype is not None:
        dtype_bytes(weight_dtype, argument="weight_dtype")
    if invalid_tensor_parallel not in ("raise", "mask"):
        raise InputError(
            f"invalid_tensor_parallel must be 'raise' or 'mask', got {invalid_tensor_parallel!r}"
        )

    shape = (len(specs), len(tps))
    weights, kv_per_token, reserve = (
        np.full(shape, np.nan),
        np.full(shape, np.nan),
        np.full(shape, np.nan),
    )
    problems = []
    for i, spec in enumerate(specs):
        for j, tp in enumerate(tps):
            reason = spec.valid_tensor_parallel(int(tp))
            if reason:
                problems.append(reason)
                continue
            weights[i, j] = spec.weight_bytes(weight_dtype) / tp
            kv_per_token[i, j] = spec.kv_bytes_per_token(kv_dtype, int(tp))
            reserve[i, j] = acct.reserve_bytes(spec, int(tp))
    if problems and invalid_tensor_parallel == "raise":
        raise InputError(
            "tensor_parallel: "
            + "; ".join(problems)
            + " (pass invalid_tensor_parallel='mask' to mark such cells instead)"
        )
    mt = ("model", "tensor_parallel")
    capacity = gpus.memory_bytes.values
    return xr.Dataset(
        {
            "weights_bytes": (mt, weights, glossary.attrs("weights_bytes")),
            "kv_bytes_per_token": (mt, kv_per_token, glossary.attrs("kv_bytes_per_token")),
            "reserve_bytes": (
                mt,
                reserve,
                {"units": "bytes", "long_name": "fixed reserve per GPU"},
            ),
            "capacity_bytes": ("gpu", capacity, glossary.attrs("capacity_bytes")),
            "usable_bytes": (
                "gpu",
                capacity * acct.gpu_memory_utilization,
                glossary.attrs("usable_bytes"),
            ),
        },
        coords={
            "model": ("model", model_ids, glossary.attrs("model")),
            "gpu": ("gpu", list(gpus.gpu.values), glossary.attrs("gpu")),
            "tensor_parallel": ("tensor_parallel", tps, glossary.attrs("tensor_parallel")),
            "weight_dtype": (
                "model",
                [weight_dtype or s.weight_dtype for s in specs],
                {"long_name": "weight dtype"},
            ),
            "kv_dtype": (
                "model",
                [s.torch_dtype if kv_dtype == "auto" else kv_dtype for s in specs],
                {"long_name": "KV cache dtype"},
            ),
            "attention": ("model", [s.attention for s in specs], {"long_name": "attention kind"}),
        },
        attrs={"specs": specs},
    )


def _axis(values: np.ndarray, name: str, chunks: dict[str, object]) -> xr.DataArray:
    array = xr.DataArray(values, dims=name, coords={name: values}, name=name)
    array[name].attrs.update(glossary.attrs(name))
    return array.chunk({name: chunks[name]}) if name in chunks else array


def _chunked(array: xr.DataArray, chunks: dict[str, object]) -> xr.DataArray:
    relevant = {d: c for d, c in chunks.items() if d in array.dims}
    return array.chunk(relevant) if relevant else array


# -- kernel calls through apply_ufunc -------------------------------------------------------------
def _four_d(array: np.ndarray) -> np.ndarray:
    return array.reshape((1,) * (4 - array.ndim) + array.shape)


def _footprint_block(weights, kv_per_token, reserve, concurrency, seq_len, *, fraction, block):
    # apply_ufunc hands over (model, tensor_parallel, concurrency, seq_len) with size-1 axes where an
    # input lacks a dim; the kernel wants 2-D parameters and 1-D grid axes.
    weights, kv_per_token, reserve = (
        _four_d(a)[:, :, 0, 0] for a in (weights, kv_per_token, reserve)
    )
    concurrency, seq_len = _four_d(concurrency)[0, 0, :, 0], _four_d(seq_len)[0, 0, 0, :]
    shape = np.broadcast_shapes(weights.shape, kv_per_token.shape, reserve.shape)
    return kernels.footprint(
        np.broadcast_to(weights, shape),
        np.broadcast_to(kv_per_token, shape),
        concurrency,
        seq_len,
        fraction,
        np.broadcast_to(reserve, shape),
        block,
    )


def _footprint(inputs, concurrency, seq_len, acct, chunks) -> tuple[xr.DataArray, ...]:
    arrays = [
        _chunked(inputs[v], chunks)
        for v in ("weights_bytes", "kv_bytes_per_token", "reserve_bytes")
    ]
    return xr.apply_ufunc(
        _footprint_block,
        *arrays,
        concurrency,
        seq_len,
        kwargs={"fraction": acct.headroom_fraction, "block": acct.block_tokens},
        output_core_dims=[[], [], []],
        dask="parallelized",
        output_dtypes=[np.float64] * 3,
    )


def _largest(inputs, seq_len, acct, chunks) -> xr.DataArray:
    return xr.apply_ufunc(
        kernels.largest_fitting_concurrency,
        _chunked(inputs.weights_bytes, chunks),
        _chunked(inputs.kv_bytes_per_token, chunks),
        _chunked(inputs.usable_bytes, chunks),
        seq_len,
        acct.headroom_fraction,
        _chunked(inputs.reserve_bytes, chunks),
        acct.block_tokens,
        dask="parallelized",
        output_dtypes=[np.int64],
    )


def _fits_block(largest: np.ndarray, concurrency: np.ndarray) -> np.ndarray:
    # total bytes grow with concurrency, so a concurrency fits exactly when it is <= the largest
    return concurrency[:, None] <= largest[..., None, :]


def _fits(largest: xr.DataArray, concurrency: xr.DataArray) -> xr.DataArray:
    return xr.apply_ufunc(
        _fits_block,
        largest,
        concurrency,
        input_core_dims=[["seq_len"], ["concurrency"]],
        output_core_dims=[["concurrency", "seq_len"]],
        dask="parallelized",
        output_dtypes=[bool],
        dask_gufunc_kwargs={"allow_rechunk": True},
    )


def _reduced(inputs, seq_len, acct, chunks) -> xr.Dataset:
    largest = _largest(inputs, seq_len, acct, chunks)
    invalid = inputs.weights_bytes.isnull()
    weights_alone = (
        inputs.weights_bytes * (1 + acct.headroom_fraction) + inputs.reserve_bytes
        > inputs.usable_bytes
    )
    reason = xr.where(largest > 0, "kv_cache", xr.where(weights_alone, "weights", "one_sequence"))
    reason = xr.where(invalid, "tensor_parallel_invalid", reason)
    return xr.Dataset(
        {
            "max_concurrency": largest.assign_attrs(glossary.attrs("max_concurrency")),
            "limit_reason": reason.assign_attrs(
                glossary.attrs("limit_reason", meanings=str(LIMIT_REASONS))
            ),
            "min_tensor_parallel": _min_tensor_parallel(inputs, seq_len, acct),
        }
    )


def _min_tensor_parallel(inputs, seq_len, acct) -> xr.DataArray:
    """Smallest tensor-parallel degree at which one sequence fits, per (model, gpu, seq_len)."""
    specs = inputs.attrs["specs"]
    seq = np.asarray(seq_len.values)
    usable = inputs.usable_bytes.values
    out = np.zeros((len(specs), usable.size, seq.size), dtype=np.int64)
    candidates = sorted(set(_TP_CANDIDATES) | {int(t) for t in inputs.tensor_parallel.values})
    for i, spec in enumerate(specs):
        for tp in reversed([t for t in candidates if spec.valid_tensor_parallel(t) is None]):
            largest = kernels.largest_fitting_concurrency(
                spec.weight_bytes(str(inputs.weight_dtype.values[i])) / tp,
                spec.kv_bytes_per_token(str(inputs.kv_dtype.values[i]), tp),
                usable[:, None],
                seq[None, :],
                acct.headroom_fraction,
                acct.reserve_bytes(spec, tp),
                acct.block_tokens,
            )
            out[i] = np.where(largest > 0, tp, out[i])
    return xr.DataArray(
        out,
        dims=("model", "gpu", "seq_len"),
        coords={"model": inputs.model, "gpu": inputs.gpu, "seq_len": seq_len["seq_len"]},
        attrs=glossary.attrs("min_tensor_parallel", tried=str(candidates)),
    )


def _finish(result: xr.Dataset, order: list[str], acct: Accounting, kv_dtype: str) -> xr.Dataset:
    for name in result.data_vars:
        dims = [d for d in order if d in result[name].dims]
        result[name] = result[name].transpose(*dims)
    result.attrs = {
        "title": "capnb memory sweep: bytes per GPU of weights + KV cache + headroom",
        "accounting": acct.name,
        **{k: v for k, v in asdict(acct).items() if k != "name"},
        "kv_dtype": kv_dtype,
        "convention": "all byte variables are per GPU (per tensor-parallel rank)",
    }
    return result


def sweep(
    grid: xr.Dataset | Mapping | None = None,
    *,
    model=None,
    gpu=None,
    tensor_parallel=None,
    concurrency=None,
    seq_len=None,
    kv_dtype: str = "auto",
    weight_dtype: str | None = None,
    accounting: str | Accounting = "article",
    headroom_fraction: float | None = None,
    gpu_memory_utilization: float | None = None,
    chunks: Mapping[str, int] | None = None,
    invalid_tensor_parallel: str = "raise",
) -> xr.Dataset:
    """Memory per GPU over a grid of model x gpu x tensor_parallel x concurrency x seq_len.

    Parameters
    ----------
    grid
        An ``xarray.Dataset`` (or mapping) whose coordinates are some of the five axes; the rest are
        given as arguments. The result keeps the grid's dim order.
    model, gpu
        Catalog ids (``capnb.data.list_models()``, ``list_gpus()``), paths to ``config.json`` files or
        ModelSpecs (model only).
    tensor_parallel, concurrency, seq_len
        Positive integers: GPUs per model replica, sequences in flight, tokens per sequence.
    kv_dtype
        ``"auto"`` (the model's dtype), ``"bf16"``, ``"fp16"`` or ``"fp8"``.
    weight_dtype
        Override the config's weight dtype (``"bf16"``, ``"fp8"``, ``"int4"`` ...).
    accounting, headroom_fraction, gpu_memory_utilization
        The memory accounting (:func:`accounting`) and overrides of its settings.
    chunks
        Dask chunk sizes per dim (needs dask); the answer is the same as in memory. An axis given as
        a dask-backed DataArray is chunked the same way.
    invalid_tensor_parallel
        ``"raise"`` (default) when a tensor-parallel degree cannot shard a model, or ``"mask"`` to mark
        those cells (NaN bytes, ``fits`` False, ``limit_reason`` ``tensor_parallel_invalid``).

    Returns
    -------
    xarray.Dataset
        ``kv_cache_bytes``, ``headroom_bytes``, ``total_bytes`` over (model, tensor_parallel,
        concurrency, seq_len) (they do not depend on the GPU); ``fits`` over all five dims;
        ``weights_bytes`` and ``kv_bytes_per_token`` over (model, tensor_parallel);
        ``capacity_bytes`` and ``usable_bytes`` over gpu; ``max_concurrency`` and ``limit_reason``
        over (model, gpu, tensor_parallel, seq_len); ``min_tensor_parallel`` over (model, gpu,
        seq_len). Bytes are per GPU. ``max_concurrency`` is the largest integer concurrency that fits,
        not capped by the concurrency axis; 0 means none fits and ``limit_reason`` says why.

    Examples
    --------
    >>> ds = sweep(model="Llama-3.1-70B", gpu="H100-SXM", tensor_parallel=2,
    ...            concurrency=[1, 8, 64], seq_len=8192)
    >>> int(ds.max_concurrency.item())
    3
    """
    acct = globals()["accounting"](
        accounting,
        headroom_fraction=headroom_fraction,
        gpu_memory_utilization=gpu_memory_utilization,
    )
    given = {
        "model": model,
        "gpu": gpu,
        "tensor_parallel": tensor_parallel,
        "concurrency": concurrency,
        "seq_len": seq_len,
    }
    axes = _axes(grid, given, _AXES)
    chunks = _chunks_of(axes, chunks)
    inputs = _inputs(axes, kv_dtype, weight_dtype, acct, invalid_tensor_parallel)
    conc = _axis(
        _validate.positive_ints(_values(axes["concurrency"]), "concurrency"), "concurrency", chunks
    )
    seq = _axis(_validate.positive_ints(_values(axes["seq_len"]), "seq_len"), "seq_len", chunks)

    kv, headroom, total = _footprint(inputs, conc, seq, acct, chunks)
    reduced = _reduced(inputs, seq, acct, chunks)
    fits = _fits(reduced.max_concurrency, conc)
    result = xr.Dataset(
        {
            "weights_bytes": inputs.weights_bytes,
            "kv_bytes_per_token": inputs.kv_bytes_per_token,
            "kv_cache_bytes": kv.assign_attrs(glossary.attrs("kv_cache_bytes")),
            "headroom_bytes": headroom.assign_attrs(glossary.attrs("headroom_bytes")),
            "total_bytes": total.assign_attrs(glossary.attrs("total_bytes")),
            "capacity_bytes": inputs.capacity_bytes,
            "usable_bytes": inputs.usable_bytes,
            "fits": fits.assign_attrs(glossary.attrs("fits")),
            **reduced.data_vars,
        },
        coords=inputs.coords,
    )
    return _finish(result, list(axes), acct, kv_dtype)


def max_concurrency(
    grid: xr.Dataset | Mapping | None = None,
    *,
    model=None,
    gpu=None,
    tensor_parallel=None,
    seq_len=None,
    kv_dtype: str = "auto",
    weight_dtype: str | None = None,
    accounting: str | Accounting = "article",
    headroom_fraction: float | None = None,
    gpu_memory_utilization: float | None = None,
    chunks: Mapping[str, int] | None = None,
    invalid_tensor_parallel: str = "raise",
) -> xr.Dataset:
    """The largest concurrency that fits per (model, gpu, tensor_parallel, seq_len), without the grid.

    Same arguments as :func:`sweep` minus ``concurrency``: the search is over all positive integers
    in closed form, so no concurrency grid is materialised. Returns ``max_concurrency``,
    ``limit_reason``, ``min_tensor_parallel``, ``weights_bytes``, ``kv_bytes_per_token`` and
    ``usable_bytes``; this is what the capacity step takes from memory.

    Examples
    --------
    >>> ds = max_concurrency(model="Llama-3.1-405B", gpu="H100-SXM", tensor_parallel=1, seq_len=8192)
    >>> str(ds.limit_reason.item()), int(ds.min_tensor_parallel.item())
    ('weights', 16)
    """
    acct = globals()["accounting"](
        accounting,
        headroom_fraction=headroom_fraction,
        gpu_memory_utilization=gpu_memory_utilization,
    )
    given = {"model": model, "gpu": gpu, "tensor_parallel": tensor_parallel, "seq_len": seq_len}
    axes = _axes(grid, given, ("model", "gpu", "tensor_parallel", "seq_len"))
    chunks = _chunks_of(axes, chunks)
    inputs = _inputs(axes, kv_dtype, weight_dtype, acct, invalid_tensor_parallel)
    seq = _axis(_validate.positive_ints(_values(axes["seq_len"]), "seq_len"), "seq_len", chunks)
    result = _reduced(inputs, seq, acct, chunks)
    for name in ("weights_bytes", "kv_bytes_per_token", "capacity_bytes", "usable_bytes"):
        result[name] = inputs[name]
    return _finish(result.assign_coords(inputs.coords), list(axes), acct, kv_dtype)


def concurrency_ticks(upper: int, *, count: int = 12, include: tuple[int, ...] = ()) -> np.ndarray:
    """About ``count`` concurrencies from 1 to ``upper`` spaced evenly on a log scale, plus ``include``.

    Values in ``include`` outside [1, upper] are dropped. Used to pick the bars of a breakdown chart.

    Examples
    --------
    >>> concurrency_ticks(64, count=7).tolist()
    [1, 2, 4, 8, 16, 32, 64]
    """
    upper = _validate.positive_int(upper, "upper")
    ticks = np.unique(np.round(np.geomspace(1, upper, max(2, count))).astype(np.int64))
    extra = np.asarray([int(v) for v in include if 1 <= int(v) <= upper], dtype=np.int64)
    return np.union1d(ticks, extra)


def _gib(value: float) -> str:
    return f"{value / GIB:,.1f} GiB"


def describe(result: xr.Dataset, **selection: object) -> str:
    """The answer for one (model, gpu, tensor_parallel, seq_len) cell of a result, in one sentence.

    Parameters
    ----------
    result
        The output of :func:`sweep` or :func:`max_concurrency`.
    **selection
        Coordinates that pick one cell (dims of length 1 need not be given).

    Examples
    --------
    >>> ds = max_concurrency(model="Llama-3.1-70B", gpu="H100-SXM", tensor_parallel=2, seq_len=8192)
    >>> describe(ds)  # doctest: +ELLIPSIS
    'Llama-3.1-70B in bf16 on 2 x H100-SXM fits at most 3 concurrent sequences of 8,192 tokens...'
    """
    cell = result.sel(selection)
    cell = cell.squeeze(
        [
            d
            for d in ("model", "gpu", "tensor_parallel", "seq_len")
            if d in cell.dims and cell.sizes[d] == 1
        ]
    )
    for dim in ("model", "gpu", "tensor_parallel", "seq_len"):
        if dim in cell.dims:
            raise InputError(f"describe: choose one {dim} (it has {cell.sizes[dim]} values)")
    model, gpu = str(cell.model.values), str(cell.gpu.values)
    tp, seq = int(cell.tensor_parallel), int(cell.seq_len)
    largest, reason = int(cell.max_concurrency), str(cell.limit_reason.values)
    weights, usable = float(cell.weights_bytes), float(cell.usable_bytes)
    where = f"{model} in {cell.weight_dtype.values} on {tp} x {gpu}"
    if reason == "kv_cache":
        kv = largest * float(cell.kv_bytes_per_token) * seq
        return (
            f"{where} fits at most {largest:,} concurrent sequences of {seq:,} tokens "
            f"({_gib(weights)} of weights and {_gib(kv)} of KV cache per GPU, "
            f"of {_gib(usable)} usable, with {result.attrs['accounting']} accounting)."
        )
    smallest = int(cell.min_tensor_parallel)
    remedy = (
        f"the smallest tensor-parallel degree that fits one such sequence is {smallest}"
        if smallest
        else "no tensor-parallel degree up to 64 fits it"
    )
    if reason == "weights":
        return (
            f"Infeasible: {where} does not fit: its weights alone take {_gib(weights)} per GPU, "
            f"more than the {_gib(usable)} usable once headroom is counted; {remedy}."
        )
    if reason == "one_sequence":
        return (
            f"Infeasible: {where} holds its weights ({_gib(weights)} per GPU) but not one sequence "
            f"of {seq:,} tokens; shorten sequences, use an fp8 KV cache, or add GPUs: {remedy}."
        )
    return f"Infeasible: tensor_parallel={tp} cannot shard {model}."

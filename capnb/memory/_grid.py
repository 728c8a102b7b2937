"""Internals of :mod:`capnb.memory`: validate a grid, call the kernels on xarray Variables, assemble.

The kernels run through ``xarray.apply_ufunc(..., dask="parallelized")`` on ``xr.Variable`` objects:
dims are matched by name and dask chunks pass straight through, without the index alignment that
DataArrays would repeat for every call (it cost more than the kernels themselves on an 8 M-cell grid).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import xarray as xr

from .. import _validate, glossary
from .._chunks import outer_product
from ..data import gpu_column, load_model, resolve_gpu
from ..data.modelspec import ModelSpec, dtype_bytes
from ..errors import InputError
from ..kernels import memory as kernels
from ..kernels._lazy import over_threads
from ..records import EngineSettings
from ..units import in_unit

AXES = ("model", "gpu", "tensor_parallel", "concurrency", "seq_len")

#: What limits ``max_concurrency`` in a cell.
LIMIT_REASONS = {
    "kv_cache": "the KV cache fills the memory left after weights and headroom",
    "weights": "the weights (with headroom, and any reserve the accounting holds beside them) "
    "exceed the GPU's usable memory",
    "one_sequence": "the weights fit, but not even one sequence of this length",
    "tensor_parallel_invalid": "this tensor-parallel degree cannot shard the model",
}
_REASON_CODES = np.array(list(LIMIT_REASONS))

#: Accounting settings that only a versioned vLLM accounting uses (and records in its attrs).
_VERSIONED = ("vllm_version", "max_num_seqs", "sampler_buffers")

#: Tensor-parallel degrees tried when naming the smallest one that would fit.
TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


@dataclass
class Grid:
    """A validated grid and the per-(model, tensor_parallel) and per-gpu inputs of the kernels."""

    order: list[str]
    chunks: dict[str, object]
    specs: list[ModelSpec]
    gpu: list[str]
    tensor_parallel: np.ndarray
    seq_len: np.ndarray
    concurrency: np.ndarray | None
    weights: np.ndarray  # (model, tensor_parallel) bytes per GPU, NaN where TP is invalid
    kv_per_token: np.ndarray  # (model, tensor_parallel) bytes per token per GPU
    kv_full: np.ndarray  # (model, tensor_parallel) share of the layers in full-attention groups
    kv_windowed: np.ndarray  # (model, tensor_parallel) share of the layers in windowed groups
    kv_window_blocks: np.ndarray  # (model, tensor_parallel) blocks a windowed group keeps, int64
    reserve: np.ndarray  # (model, tensor_parallel) fixed bytes per GPU
    capacity: np.ndarray  # (gpu,) bytes
    usable: np.ndarray  # (gpu,) bytes
    weight_dtype: list[str]
    kv_dtype: list[str]
    reported_fallback: list[str]  # GPUs whose driver-reported memory is not catalogued
    serve_defaults: list[str]  # GPUs where vllm serve's V1 defaults differ from the accounting's
    unshardable: list[str]  # why each masked (model, tensor_parallel) cannot shard, as said

    @property
    def model(self) -> list[str]:
        return [s.name for s in self.specs]

    def variable(self, name: str) -> xr.Variable:
        """An input as a Variable with its dims (chunked where asked)."""
        dims, values = {
            "weights_bytes": (("model", "tensor_parallel"), self.weights),
            "kv_bytes_per_token": (("model", "tensor_parallel"), self.kv_per_token),
            "kv_full": (("model", "tensor_parallel"), self.kv_full),
            "kv_windowed": (("model", "tensor_parallel"), self.kv_windowed),
            "kv_window_blocks": (("model", "tensor_parallel"), self.kv_window_blocks),
            "reserve_bytes": (("model", "tensor_parallel"), self.reserve),
            "capacity_bytes": (("gpu",), self.capacity),
            "usable_bytes": (("gpu",), self.usable),
            "concurrency": (("concurrency",), self.concurrency),
            "seq_len": (("seq_len",), self.seq_len),
        }[name]
        var = xr.Variable(dims, values)
        chunks = {d: self.chunks[d] for d in dims if d in self.chunks}
        return var.chunk(chunks) if chunks else var


def _values(axis: object) -> object:
    return axis.values if isinstance(axis, xr.DataArray | xr.Variable) else axis


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
        unknown = [d for d in order if d not in AXES]
        if unknown:  # a typo's value, or a dim the answer would not have, is not dropped
            raise InputError(
                f"grid: {unknown[0]!r} is not an axis of the grid; its axes: {', '.join(required)}"
            )
        axes = {d: source[d] for d in order if d in source}
        if "seq_len" in axes:  # as seq_len= is: a coord in kilotokens is not read as tokens
            axes["seq_len"] = in_unit(axes["seq_len"], "tokens", "grid.seq_len")
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


def prepare(
    grid, given, required, *, kv_dtype, weight_dtype, acct, invalid_tensor_parallel, chunks
) -> Grid:
    """Validate the axes and options and compute the kernels' inputs."""
    axes = _axes(grid, given, required)
    found = {n: a.chunks[0] for n, a in axes.items() if isinstance(a, xr.DataArray) and a.chunks}
    chunks = {**found, **_validate.chunk_sizes(chunks, required)}
    specs = [load_model(m) for m in _validate.names(_values(axes["model"]), "model")]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise InputError(f"model: {names} names the same model twice")
    gpus = [resolve_gpu(g) for g in _validate.names(_values(axes["gpu"]), "gpu")]
    if len(set(gpus)) != len(gpus):
        raise InputError(f"gpu: {gpus} names the same GPU twice")
    tps = _validate.positive_ints(_values(axes["tensor_parallel"]), "tensor_parallel")
    seq = _validate.positive_ints(_values(axes["seq_len"]), "seq_len")
    conc = None
    if "concurrency" in axes:
        conc = _validate.positive_ints(_values(axes["concurrency"]), "concurrency")
    if kv_dtype != "auto":
        dtype_bytes(kv_dtype, argument="kv_dtype")
    if weight_dtype is not None:
        dtype_bytes(weight_dtype, argument="weight_dtype")
    if invalid_tensor_parallel not in ("raise", "mask"):
        raise InputError(
            f"invalid_tensor_parallel must be 'raise' or 'mask', got {invalid_tensor_parallel!r}"
        )

    weight_dtypes = [weight_dtype or s.weight_dtype for s in specs]
    kv_dtypes = [s.torch_dtype if kv_dtype == "auto" else kv_dtype for s in specs]
    weights, kv_per_token, reserve, problems = _per_model_inputs(
        specs, tps, kv_dtypes, weight_dtypes, acct
    )
    if problems and invalid_tensor_parallel == "raise":
        raise InputError(
            "tensor_parallel: "
            + "; ".join(problems)
            + " (pass invalid_tensor_parallel='mask' to mark such cells instead)"
        )
    layout = _layouts(specs, len(tps), acct)
    capacity = gpu_column(gpus, "memory_bytes")
    base = capacity
    fallback: list[str] = []
    if acct.capacity_column() != "memory_bytes":
        reported = gpu_column(gpus, acct.capacity_column())
        fallback = [g for g, r in zip(gpus, reported, strict=True) if not np.isfinite(r)]
        base = np.where(np.isfinite(reported), reported, capacity)
    return Grid(
        order=list(axes),
        chunks=chunks,
        specs=specs,
        gpu=gpus,
        tensor_parallel=tps,
        seq_len=seq,
        concurrency=conc,
        weights=weights,
        kv_per_token=kv_per_token,
        kv_full=layout[0],
        kv_windowed=layout[1],
        kv_window_blocks=layout[2],
        reserve=reserve,
        capacity=capacity,
        usable=base * acct.gpu_memory_utilization,
        weight_dtype=weight_dtypes,
        kv_dtype=kv_dtypes,
        reported_fallback=fallback,
        serve_defaults=_serve_defaults_differ(gpus, capacity, acct),
        unshardable=problems,
    )


def unshardable_reason(reasons: list[str], model: str, tensor_parallel: int) -> str | None:
    """Of ``reasons`` (a result's attr ``unshardable``), the one for this model and degree; None.

    Each is :meth:`ModelSpec.valid_tensor_parallel`'s sentence, which ends the model's name with
    ':', ' (' or the end.
    """
    own = re.compile(rf"^tensor_parallel={int(tensor_parallel)} .* of {re.escape(model)}(:| \(|$)")
    return next((r for r in reasons if own.search(r)), None)


def serve_defaults(gpu: str, memory_bytes: float) -> EngineSettings:
    """The defaults ``vllm serve`` (V1) sets on a GPU of ``memory_bytes`` (:class:`EngineSettings`)."""
    return EngineSettings("vllm-v1").resolve(gpu=gpu, gpu_memory_bytes=float(memory_bytes))


def _serve_defaults_differ(gpus: list[str], memory: np.ndarray, acct) -> list[str]:
    """The GPUs on which ``vllm serve`` profiles other settings than a V1 bucket's.

    The 0.10 and 0.19 buckets profile ``max_num_seqs`` sequences and ``max_num_batched_tokens``
    tokens (1,024 and 8,192: vllm serve's defaults on GPUs of 70 GiB or more other than A100s);
    on the others vllm serve runs 256 and 2,048, and its sampler peak is a quarter. The V0 bucket
    (0.6) and the accounting without a version are not vllm serve's V1 profile run: none listed.
    """
    if acct.vllm_version in (None, "0.6"):
        return []
    runs = (acct.max_num_seqs, acct.max_num_batched_tokens)
    found = []
    for gpu, memory_bytes in zip(gpus, memory, strict=True):
        served = serve_defaults(gpu, memory_bytes)
        if (served.max_num_seqs, served.max_num_batched_tokens) != runs:
            found.append(gpu)
    return found


@functools.lru_cache(maxsize=4096)
def _rank_inputs(spec: ModelSpec, tp: int, kv_dtype: str, weight_dtype: str, acct) -> tuple:
    """(weights, KV bytes per token, reserve) on one GPU of a TP group, or (why TP is invalid,).

    The reserve holds the windowed groups' blocks of a step's prefill chunk
    (:meth:`Accounting.window_chunk_bytes`; 0 without them) beside the accounting's own.
    """
    reason = spec.valid_tensor_parallel(tp)
    if reason:
        return (reason,)
    kv = spec.kv_bytes_per_token(kv_dtype, tp)
    return (
        spec.weight_bytes_per_gpu(tp, weight_dtype),
        kv,
        acct.reserve_bytes(spec, tp) + acct.window_chunk_bytes(spec, kv),
    )


def _layouts(specs, n_tp: int, acct) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The KV layout per (model, tensor_parallel): full and windowed shares, window blocks.

    vLLM's hybrid KV cache manager (:meth:`Accounting.groups`) where the accounting runs it; a
    full-length count (1, 0, 0) elsewhere. The grouping does not depend on the TP degree.
    """
    shape = (len(specs), n_tp)
    full, windowed, blocks = np.ones(shape), np.zeros(shape), np.zeros(shape, np.int64)
    for i, spec in enumerate(specs):
        groups = acct.groups(spec)
        full[i], windowed[i] = groups.shares(spec.layers)
        blocks[i] = groups.window_blocks
    return full, windowed, blocks


def _per_model_inputs(specs, tps, kv_dtypes, weight_dtypes, acct):
    """Weights, KV bytes per token and reserve per (model, TP) on one GPU; NaN where TP is invalid."""
    shape = (len(specs), len(tps))
    weights, kv_per_token, reserve = (
        np.full(shape, np.nan),
        np.full(shape, np.nan),
        np.full(shape, np.nan),
    )
    problems = []
    for i, spec in enumerate(specs):
        for j, tp in enumerate(int(t) for t in tps):
            values = _rank_inputs(spec, tp, kv_dtypes[i], weight_dtypes[i], acct)
            if len(values) == 1:
                problems.append(values[0])
            else:
                weights[i, j], kv_per_token[i, j], reserve[i, j] = values
    return weights, kv_per_token, reserve, problems


# -- kernel calls ---------------------------------------------------------------------------------
def _plain(array: np.ndarray) -> np.ndarray:
    # the kernels' signatures take writable C-contiguous arrays; broadcast views and xarray's
    # read-only buffers are copied (they are the small inputs, never the outputs)
    return np.require(array, requirements=["C", "W"])


def _rows(kernel, rows: int, cells: int, *args) -> None:
    """Run a row-range kernel (``kernel(*args, first, stop)``) over ``rows`` rows of ``cells`` cells.

    Writing a large grid is the whole cost of the full sweep, fresh memory's page faults included;
    above capnb's one threshold (:data:`capnb.kernels._lazy.PARALLEL_MIN_WORK`) two threads write (and
    fault) two halves at once. Each row is computed the same way, so the result does not depend on
    the thread count.
    """
    over_threads(lambda first, stop: kernel(*args, first, stop), rows, cells)


def _four_d(array: np.ndarray) -> np.ndarray:
    return array.reshape((1,) * (4 - array.ndim) + array.shape)


def _footprint_block(weights, kv_per_token, reserve, full, windowed, window_blocks, concurrency,
                     seq_len, *, fraction, block):  # fmt: skip
    # apply_ufunc hands over (model, tensor_parallel, concurrency, seq_len) with size-1 axes where an
    # input lacks a dim; the kernel wants 2-D parameters, 1-D grid axes and outputs we allocate.
    per_pair = [
        _four_d(a)[:, :, 0, 0]
        for a in (weights, kv_per_token, reserve, full, windowed, window_blocks)
    ]
    concurrency, seq_len = _four_d(concurrency)[0, 0, :, 0], _four_d(seq_len)[0, 0, 0, :]
    shape = np.broadcast_shapes(*(a.shape for a in per_pair))
    outputs = [np.empty((*shape, concurrency.size, seq_len.size)) for _ in range(3)]
    pairs = int(np.prod(shape))
    weights, kv_per_token, reserve, full, windowed, window_blocks = (
        _plain(np.broadcast_to(a, shape)) for a in per_pair
    )
    _rows(
        kernels.footprint_rows,
        pairs,
        sum(out.size for out in outputs),
        weights,
        kv_per_token,
        reserve,
        _plain(concurrency),
        _plain(seq_len),
        fraction,
        block,
        full,
        windowed,
        window_blocks,
        *outputs,
    )
    return tuple(outputs)


def footprint(grid: Grid, acct) -> tuple[xr.Variable, xr.Variable, xr.Variable]:
    """KV cache, headroom and total bytes over (model, tensor_parallel, concurrency, seq_len)."""
    with outer_product():
        return xr.apply_ufunc(
            _footprint_block,
            grid.variable("weights_bytes"),
            grid.variable("kv_bytes_per_token"),
            grid.variable("reserve_bytes"),
            grid.variable("kv_full"),
            grid.variable("kv_windowed"),
            grid.variable("kv_window_blocks"),
            grid.variable("concurrency"),
            grid.variable("seq_len"),
            kwargs={"fraction": acct.headroom_fraction, "block": acct.block_tokens},
            output_core_dims=[[], [], []],
            dask="parallelized",
            output_dtypes=[np.float64] * 3,
        )


def largest(grid: Grid, acct) -> xr.Variable:
    """Largest fitting concurrency over (model, tensor_parallel, gpu, seq_len)."""
    with outer_product():
        return xr.apply_ufunc(
            kernels.largest_fitting_concurrency,
            grid.variable("weights_bytes"),
            grid.variable("kv_bytes_per_token"),
            grid.variable("usable_bytes"),
            grid.variable("seq_len"),
            acct.headroom_fraction,
            grid.variable("reserve_bytes"),
            acct.block_tokens,
            grid.variable("kv_full"),
            grid.variable("kv_windowed"),
            grid.variable("kv_window_blocks"),
            dask="parallelized",
            output_dtypes=[np.int64],
        )


def _fits_block(largest: np.ndarray, concurrency: np.ndarray) -> np.ndarray:
    # blocks over (..., concurrency, seq_len): `largest` repeats along concurrency (a broadcast),
    # `concurrency` has size 1 on every other axis
    cells = largest[..., 0, :]
    conc = concurrency.reshape(-1)
    out = np.empty((*cells.shape[:-1], conc.size, cells.shape[-1]), dtype=bool)
    flat = _plain(cells.reshape(-1, cells.shape[-1]))
    _rows(
        kernels.fits_rows,
        flat.shape[0],
        out.size,
        flat,
        _plain(conc),
        out.reshape(-1, *out.shape[-2:]),
    )
    return out


def fits(largest_concurrency: xr.Variable, grid: Grid) -> xr.Variable:
    """Whether each concurrency fits, over (..., concurrency, seq_len) in the caller's dim order.

    No dim is a core dim, so dask keeps every chunking (a reduction over concurrency and seq_len
    then runs block by block): ``largest_concurrency`` is broadcast over concurrency first, which
    also fixes the output's dim order.
    """
    concurrency = grid.variable("concurrency")
    order = [d for d in grid.order if d in largest_concurrency.dims and d != "seq_len"]
    sizes = {**{d: largest_concurrency.sizes[d] for d in order}, "concurrency": concurrency.size}
    spread = largest_concurrency.set_dims(
        {**sizes, "seq_len": largest_concurrency.sizes["seq_len"]}
    )
    if concurrency.chunks:
        spread = spread.chunk({"concurrency": concurrency.chunks[0]})
    with outer_product():
        return xr.apply_ufunc(
            _fits_block, spread, concurrency, dask="parallelized", output_dtypes=[bool]
        )


def _reason_block(largest, weights, reserve, usable, *, fraction):
    # codes index LIMIT_REASONS: 0 kv_cache, 1 weights, 2 one_sequence, 3 tensor_parallel_invalid
    weights_fit = weights * (1.0 + fraction) + reserve <= usable
    code = (largest <= 0) * (1 + weights_fit)
    code[np.isnan(np.broadcast_to(weights, code.shape))] = 3
    return _REASON_CODES.take(code)


def reasons(largest_concurrency: xr.Variable, grid: Grid, acct) -> xr.Variable:
    """Why ``max_concurrency`` is what it is, as the keys of :data:`LIMIT_REASONS`."""
    with np.errstate(invalid="ignore"), outer_product():  # NaN weights mark invalid TP cells
        return xr.apply_ufunc(
            _reason_block,
            largest_concurrency,
            grid.variable("weights_bytes"),
            grid.variable("reserve_bytes"),
            grid.variable("usable_bytes"),
            kwargs={"fraction": acct.headroom_fraction},
            dask="parallelized",
            output_dtypes=[_REASON_CODES.dtype],
        )


def min_tensor_parallel(grid: Grid, acct) -> np.ndarray:
    """Smallest tensor-parallel degree at which one sequence fits, per (model, gpu, seq_len); 0: none."""
    candidates = np.array(sorted(set(TP_CANDIDATES) | {int(t) for t in grid.tensor_parallel}))
    weights, kv, reserve, _ = _per_model_inputs(
        grid.specs, candidates, grid.kv_dtype, grid.weight_dtype, acct
    )
    out = np.empty((len(grid.specs), len(grid.gpu), grid.seq_len.size), np.int64)
    full, windowed, blocks = (_plain(a[:, 0]) for a in _layouts(grid.specs, 1, acct))
    kernels.smallest_fitting_tensor_parallel(
        weights, kv, reserve, candidates, _plain(grid.usable), _plain(grid.seq_len),
        acct.headroom_fraction, acct.block_tokens, full, windowed, blocks, out,
    )  # fmt: skip
    return out


def kv_cache_tokens(grid: Grid, acct) -> xr.Variable:
    """Tokens of KV cache vLLM allocates, over (model, gpu, tensor_parallel); 0 where none fit.

    ``floor((usable - weights - reserve) / (block_tokens x KV bytes per token)) x block_tokens``,
    per GPU of the tensor-parallel group: vLLM's ``num_gpu_blocks x block_size``. Under vLLM's
    hybrid KV cache manager a block holds a group's layers (:meth:`Accounting.groups`) and the
    log divides the pool's blocks among the groups: ``num_blocks // groups x block_size``, fewer
    tokens than the full-length count where a group is padded (the sequences held are
    ``max_concurrency``'s, not these tokens over the sequence length).
    """
    # vLLM's pool is what its profile leaves; the chunk's blocks are held inside it
    chunk = np.array([[acct.window_chunk_bytes(spec, kv) for kv in row]
                      for spec, row in zip(grid.specs, grid.kv_per_token, strict=True)])  # fmt: skip
    reserve = grid.reserve - chunk
    room = grid.usable[None, :, None] - grid.weights[:, None, :] - reserve[:, None, :]
    groups = [acct.groups(spec) for spec in grid.specs]
    # a block's share of the layers (1 without groups) and the groups the log divides it among
    size = np.array([g.size / spec.layers for g, spec in zip(groups, grid.specs, strict=True)])
    n_groups = np.array([g.full + g.windowed for g in groups], np.int64)[:, None, None]
    per_block = acct.block_tokens * (grid.kv_per_token * size[:, None])[:, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        blocks = np.floor(room / per_block)
    blocks = np.where(np.isfinite(blocks) & (blocks > 0), blocks, 0).astype(np.int64)
    return xr.Variable(("model", "gpu", "tensor_parallel"), blocks // n_groups * acct.block_tokens)


def held_kv_bytes(grid: Grid, acct, largest: xr.Variable) -> xr.Variable:
    """KV cache bytes per GPU of ``largest`` sequences, over (model, gpu, tensor_parallel, seq_len).

    Each sequence in whole blocks, as the accounting holds it (the kernels' ``kv_cache_bytes``:
    under vLLM's hybrid manager, a windowed group keeps only its window's blocks).
    """
    per_sequence = kernels.sequence_bytes(
        grid.seq_len[None, None, :], grid.kv_per_token[:, :, None], acct.block_tokens,
        grid.kv_full[:, :, None], grid.kv_windowed[:, :, None], grid.kv_window_blocks[:, :, None],
    )  # fmt: skip
    sequence = xr.Variable(("model", "tensor_parallel", "seq_len"), per_sequence)
    with outer_product():
        return largest * sequence


# -- the result -----------------------------------------------------------------------------------
def assemble(grid: Grid, variables: dict[str, xr.Variable], acct, kv_dtype: str) -> xr.Dataset:
    """One Dataset: variables in the caller's dim order, glossary attrs, coords, accounting attrs."""
    data = {}
    for name, var in variables.items():
        dims = [d for d in grid.order if d in var.dims]
        var = var.transpose(*dims)
        if name == "kv_cache_tokens":  # not a glossary term: vLLM's own log line
            var.attrs = {
                "units": "tokens",
                "long_name": "KV cache tokens as vLLM logs them ('GPU KV cache size: N tokens'): "
                "KV blocks that fit per GPU x block_tokens; with tensor parallelism every rank "
                "holds its share of the heads for all of them (not multiplied by the TP degree)",
            }
            data[name] = var
            continue
        extra = {"meanings": str(LIMIT_REASONS)} if name == "limit_reason" else {}
        if name == "min_tensor_parallel":
            extra = {
                "tried": str(sorted(set(TP_CANDIDATES) | {int(t) for t in grid.tensor_parallel}))
            }
        var.attrs = glossary.attrs(name, **extra)
        data[name] = var
    conc = None if grid.concurrency is None else tuple(grid.concurrency.tolist())
    coords = _coordinates(
        tuple(grid.order),
        tuple(grid.model),
        tuple(grid.gpu),
        tuple(grid.tensor_parallel.tolist()),
        conc,
        tuple(grid.seq_len.tolist()),
        tuple(grid.weight_dtype),
        tuple(grid.kv_dtype),
        tuple(s.attention for s in grid.specs),
        tuple((s.sliding_layers, s.sliding_window if s.sliding_layers else 0) for s in grid.specs),
        tuple(s.context_tokens or 0 for s in grid.specs),
    ).copy()  # a shallow copy: a caller who edits the result's attrs edits only that result
    attrs = {
        "title": "capnb memory sweep: bytes per GPU of weights + KV cache + headroom",
        "accounting": acct.name,
        **{
            k: v
            for k, v in asdict(acct).items()
            if k not in ("name", "hybrid_kv", "hybrid_chunked")
            and (acct.vllm_version is not None or k not in _VERSIONED)
        },
        "kv_layout": (
            "vLLM's hybrid KV cache manager: sliding-window layers keep their window, in groups "
            "of layers sharing one pool of blocks"
            + (
                ""
                if acct.hybrid_chunked
                else "; chunked-attention layers (Llama 4) at full length, as this vLLM turns "
                "the manager off for them"
            )
            if acct.hybrid_kv
            else "full length: every layer holds the whole sequence"
        ),
        "kv_dtype": kv_dtype,
        "convention": "all byte variables are per GPU (per tensor-parallel rank)",
    }
    if grid.unshardable:  # the masked cells' reasons, as the capacity sweep's attr says them
        attrs["unshardable"] = list(grid.unshardable)
    if acct.vllm_version is not None:
        attrs["vllm_version"] = acct.vllm_version
        attrs["marketed_memory_gpus"] = ", ".join(grid.reported_fallback)
        attrs["serve_defaults_gpus"] = ", ".join(grid.serve_defaults)
        attrs["usable_memory_from"] = (
            "gpu_memory_utilization x the memory the driver reports (memory_reported_bytes)"
            + (
                f"; no reported figure catalogued for {', '.join(grid.reported_fallback)}: "
                "their marketed memory_bytes is used instead"
                if grid.reported_fallback
                else ""
            )
        )

    return xr.Dataset(data, coords=coords, attrs=attrs)


@functools.lru_cache(maxsize=32)
def _coordinates(
    order, model, gpu, tensor_parallel, concurrency, seq_len, weights, kv, attention, windows,
    contexts,
):  # fmt: skip
    # Building the pandas indexes of the coordinates is most of a small sweep's cost; the worksheet
    # repeats the same grids, so the built coordinates are kept (and copied for each result).
    coords = {
        "model": ("model", list(model), glossary.attrs("model")),
        "gpu": ("gpu", list(gpu), glossary.attrs("gpu")),
        "tensor_parallel": (
            "tensor_parallel",
            np.array(tensor_parallel, np.int64),
            glossary.attrs("tensor_parallel"),
        ),
        "seq_len": ("seq_len", np.array(seq_len, np.int64), glossary.attrs("seq_len")),
        "weight_dtype": ("model", list(weights), {"long_name": "weight dtype"}),
        "kv_dtype": ("model", list(kv), {"long_name": "KV cache dtype"}),
        "attention": ("model", list(attention), {"long_name": "attention kind"}),
        "windowed_layers": (
            "model",
            np.array([n for n, _ in windows], np.int64),
            {"long_name": "sliding-window (or chunked) attention layers", "units": "1"},
        ),
        "context_tokens": (
            "model",
            np.array(contexts, np.int64),
            {
                "long_name": "tokens of context the model serves, vLLM's default max_model_len "
                "(0: its config does not say)",
                "units": "tokens",
            },
        ),
        "sliding_window": (
            "model",
            np.array([w for _, w in windows], np.int64),
            {
                "long_name": "tokens a windowed layer attends to (0: none windowed)",
                "units": "tokens",
            },
        ),
    }
    if concurrency is not None:
        coords["concurrency"] = (
            "concurrency",
            np.array(concurrency, np.int64),
            glossary.attrs("concurrency"),
        )
    coords = {k: coords[k] for k in [*order, *coords] if k in coords}  # caller's order first
    return xr.Coordinates(coords)

"""Memory footprint per GPU: the accountings and the step's public verbs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np
import xarray as xr

from .. import _validate, words
from ..data.modelspec import KVGroups, ModelSpec
from ..errors import InputError
from ..records import Deployment, expect_deployment
from ..units import declare_units
from . import _grid as _grid

GIB = 2**30


#: vLLM's profiler, by version (pass ``vllm_version=`` to :func:`accounting`). Each bucket holds the
#: settings of the releases whose profiler counts memory the same way; the sources are in
#: ``datasets/README.md`` (section ``benchmarks/vllm_logs/``) and in VALIDATION.md.
#:
#: ``"0.6"``: the V0 engine after vllm-project/vllm pull request 10511 (merged 2024-12; the V0
#:     releases from 0.6.5 on). KV budget = gpu_memory_utilization x total - weights - non-torch
#:     increase since start-up - activation peak of a profile run of ``max_num_batched_tokens``
#:     tokens over ``max_num_seqs`` (256) sequences. Non-torch: 1.79 GiB at TP 1 and 3.58 GiB per
#:     GPU at TP 2, as that pull request logged for Meta-Llama-3-8B on an H100.
#: ``"0.10"``: the V1 engine as its 2025 releases run it, checked against logs of 0.11 and of mid
#:     2025 (``gpu_worker.determine_available_memory`` with ``memory_profiling``): the same
#:     subtraction; the profile run ends with a dummy sampler run over ``max_num_seqs`` requests
#:     (``vllm serve`` on GPUs of 70 GiB or more other than A100: 1,024; elsewhere 256, pass
#:     ``max_num_seqs=256``). Non-torch: 0.13 GiB at TP 1 and 0.55 GiB per GPU at TP 2, as vLLM
#:     0.11 logged on H100s (llm-d-benchmark's empirical results); TP >= 2 uses the TP 2 figure
#:     (the one TP 8 log, held out, states 0.17-0.21 GiB on PCIe L40S GPUs without vLLM's custom
#:     all-reduce; no NVLink TP 4 or 8 figure was found).
#: ``"0.19"``: the V1 engine of 2026, checked against vLLM 0.19.0's own start-up logs on H100s
#:     (llm-d-planner's accuracy runs): the same subtraction; the profile run's activation peak
#:     ("torch peak memory increase") is the sampler's, much smaller than 0.11's (1.89 GiB for
#:     Llama-3.1-8B with 1,024 sequences, against 4.76), and the same at TP 1, 2 and 4. Non-torch:
#:     0.25 GiB at TP 1 and 2.07 GiB per GPU at TP 2 (NCCL's buffers; 2.13 GiB logged at TP 4).
#:     A mixture of experts adds the fused-MoE workspace, which 0.19 keeps for the life of the
#:     engine, so it is still held while the sampler peaks (:meth:`Accounting.moe_workspace_bytes`;
#:     0.10 counts the per-call buffers of 0.11's fused_experts_impl inside the forward pass).
#:
#: No bucket subtracts CUDA graph memory: each release captures CUDA graphs after the KV cache is
#: sized, out of the (1 - gpu_memory_utilization) share (0.19 logs its estimate, 0.5-1.9 GiB, and
#: sizes the KV cache without it: weights + activation peak + non-torch + KV = the budget). vLLM
#: 0.19.0's ``gpu_worker.determine_available_memory`` measures the graphs' memory
#: (``profile_cudagraph_memory``) but subtracts it only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1
#: (``envs.py`` default 0); its log says a later release makes that the default, which no bucket
#: models yet.
VLLM_VERSIONS = ("0.6", "0.10", "0.19")

#: vLLM 0.11's ``VLLM_FUSED_MOE_CHUNK_SIZE`` default: the tokens one fused-MoE call processes at once.
FUSED_MOE_CHUNK_TOKENS = 32_768

#: fp32 logits-sized buffers live at the sampler's peak (see :meth:`Accounting.activation_bytes`),
#: each from one logged activation peak: 1.26 GiB for Meta-Llama-3-8B with 256 sequences
#: (pull request 10511) and 4.76 GiB for Llama-3.1-8B-Instruct with 1,024 (vLLM 0.11, llm-d).
_VOCAB = 128_256
_SAMPLER_BUFFERS = {
    "0.6": 1.26 * 2**30 / (256 * _VOCAB * 4),
    "0.10": 4.76 * 2**30 / (1024 * _VOCAB * 4),
    "0.19": 1.89
    * 2**30
    / (1024 * _VOCAB * 4),  # Llama-3.1-8B-Instruct, vLLM 0.19.0 (llm-d-planner)
}
_VLLM_PRESETS = {
    "0.6": {
        "non_torch_bytes_single": 1.79 * 2**30,
        "non_torch_bytes_multi": 3.58 * 2**30,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "sampler_buffers": _SAMPLER_BUFFERS["0.6"],
        "block_tokens": 16,
        "moe_workspace": "",
    },
    "0.10": {
        "non_torch_bytes_single": 0.13 * 2**30,
        "non_torch_bytes_multi": 0.55 * 2**30,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 1024,
        "sampler_buffers": _SAMPLER_BUFFERS["0.10"],
        "block_tokens": 16,
        "moe_workspace": "per_call",
        "hybrid_kv": True,
        "hybrid_chunked": False,
    },
    "0.19": {
        "non_torch_bytes_single": 0.25 * 2**30,
        "non_torch_bytes_multi": 2.07 * 2**30,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 1024,
        "sampler_buffers": _SAMPLER_BUFFERS["0.19"],
        "block_tokens": 16,
        "moe_workspace": "held",
        "hybrid_kv": True,
        "hybrid_chunked": True,
    },
}


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
    vllm_version
        ``None`` (capnb's first vLLM-like accounting: the catalog's marketed memory, the forward
        pass's activations only) or a bucket of :data:`VLLM_VERSIONS`: vLLM's profiler as that
        version counts, on the memory the driver reports (``memory_reported_bytes`` in the GPU
        catalog; the marketed ``memory_bytes`` where no reported figure is catalogued).
    max_num_seqs
        Sequences of the profile run (the sampler's dummy batch); used with ``vllm_version``.
    sampler_buffers
        Number of fp32 buffers of ``max_num_seqs x vocab`` live at the sampler's peak; used with
        ``vllm_version``.
    moe_workspace
        How the profile run holds the fused-MoE buffers of a mixture of experts
        (:meth:`moe_workspace_bytes`): ``"held"`` (vLLM 0.19: kept through the sampler's run),
        ``"per_call"`` (vLLM 0.11: allocated and freed within each MoE layer) or ``""`` (not
        counted: the 0.6 bucket, whose source was not checked). Set by ``vllm_version``.
    hybrid_kv
        Whether the KV cache is vLLM's hybrid KV cache manager's (0.10 on; ``True`` for the 0.10
        and 0.19 buckets, ``False`` as ``--disable-hybrid-kv-cache-manager`` runs it): a model's
        sliding-window layers keep only their window, in groups that share one pool of blocks
        (:meth:`groups`). ``False``: every layer holds the whole sequence.
    hybrid_chunked
        Whether the hybrid manager also runs for chunked local attention (Llama 4's
        ``attention_chunk_size``). vLLM 0.10.1 to 0.12 turn it off for such a model unless
        ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1`` (default 0, vllm-project/vllm
        pull request 21761), so its chunked layers hold the whole sequence: ``False`` in the 0.10
        bucket. Later releases default it on (pull request 29627): ``True`` in the 0.19 bucket.
    """

    name: str
    headroom_fraction: float
    gpu_memory_utilization: float
    block_tokens: int
    non_torch_bytes_single: float = 0.0
    non_torch_bytes_multi: float = 0.0
    max_num_batched_tokens: int = 0
    vllm_version: str | None = None
    max_num_seqs: int = 0
    sampler_buffers: float = 0.0
    moe_workspace: str = ""
    hybrid_kv: bool = False
    hybrid_chunked: bool = False

    def groups(self, spec: ModelSpec) -> KVGroups:
        """How the KV cache groups ``spec``'s layers: vLLM's hybrid grouping, or one group.

        With :attr:`hybrid_kv` (and a model with sliding-window layers; a chunked-attention
        model only with :attr:`hybrid_chunked`): the groups of
        :func:`capnb.data.modelspec.kv_groups`, a block of ``block_tokens``; otherwise one group of
        every layer, holding the whole sequence (the full-length count).
        """
        if self.hybrid_kv and (self.hybrid_chunked or not spec.chunked_attention):
            return spec.kv_groups(self.block_tokens)
        return KVGroups(spec.layers, 1, 0, 0)

    def pool_blocks(self, layout: KVGroups, kv_cache_tokens: int, block: int | None = None) -> int:
        """Blocks of vLLM's pool that sequences can hold, from its logged ``kv_cache_tokens``.

        vLLM logs the pool's blocks divided among ``layout``'s groups (``num_blocks // groups x
        block``), so the pool is ``kv_cache_tokens // block x groups``; the windowed groups hold
        one step's prefill chunk (``max_num_batched_tokens``) beside the windows
        (:meth:`window_chunk_bytes`), whose blocks are left out. ``block`` defaults to
        :attr:`block_tokens`. A sequence of ``T`` tokens takes ``layout.blocks(T, block)``.
        """
        block = block or self.block_tokens
        blocks = int(kv_cache_tokens) // block * (layout.full + layout.windowed)
        if layout.windowed:
            blocks -= layout.windowed * -(-self.max_num_batched_tokens // block)
        return max(blocks, 0)

    def window_chunk_bytes(self, spec: ModelSpec, kv_bytes_per_token: float) -> float:
        """KV bytes per GPU the windowed groups hold for one step's prefill chunk (0: none).

        vLLM's hybrid manager allocates a prompt chunk's blocks in every group before it frees
        the blocks that fall out of a window: while a step prefills ``max_num_batched_tokens``
        tokens, each windowed group holds their ``ceil(tokens / block)`` blocks beside the
        window's. One step's worth is held beside the sequences' windows, so it is counted as a
        reserve (its "Maximum concurrency" log line counts such a chunk for every request, the
        most a pool could be asked for, not what decoding sequences hold). NaN ``kv`` (a TP
        degree that cannot shard the model) gives NaN.
        """
        groups = self.groups(spec)
        if not groups.windowed:
            return 0.0
        blocks = -(-self.max_num_batched_tokens // self.block_tokens)
        share = groups.shares(spec.layers)[1]
        return float(share * blocks * self.block_tokens * kv_bytes_per_token)

    def reserve_bytes(self, spec: ModelSpec, tensor_parallel: int) -> float:
        """Fixed per-GPU reserve: non-torch memory, the activation peak and vLLM's rotary cache.

        0 for the article accounting.
        """
        if self.name == "article":
            return 0.0
        non_torch = (
            self.non_torch_bytes_single if tensor_parallel == 1 else self.non_torch_bytes_multi
        )
        return (
            non_torch + self.activation_bytes(spec, tensor_parallel) + self.rope_cache_bytes(spec)
        )

    def rope_cache_bytes(self, spec: ModelSpec) -> float:
        """The rotary cos/sin caches vLLM holds per GPU (:meth:`ModelSpec.rope_cache_bytes`), or 0.

        vLLM builds them with the model, so its "Model loading took" includes them: Llama-4-Scout
        logs 53.12 GiB a GPU at TP 4 where its checkpoint holds 50.6 (llm-d-planner's vLLM 0.19.0
        run), 2.50 GiB of it the cache of 10,485,760 positions (Llama 3.1's 131,072 positions hold
        32 MiB); they are not sharded by TP. Counted with ``vllm_version``; 0 without it.
        """
        if self.vllm_version is None:
            return 0.0
        return spec.rope_cache_bytes()

    def forward_bytes(self, spec: ModelSpec, tensor_parallel: int) -> float:
        """Peak activations of the profiling forward pass, per GPU.

        The widest live tensors of a decoder layer for ``max_num_batched_tokens`` tokens in the
        model's 16-bit dtype: the gate/up projection output (2 x intermediate / TP), the activated
        output (intermediate / TP) and two hidden-size buffers (residual and normed input). For
        Meta-Llama-3-8B at 8,192 tokens this is 0.78 GiB.
        """
        width = 2 * spec.hidden_size + 3 * spec.intermediate_size / tensor_parallel
        return float(self.max_num_batched_tokens * width * 2)

    def sampler_bytes(self, spec: ModelSpec) -> float:
        """Peak of the profile run's sampling step, per GPU: ``sampler_buffers`` fp32 logits.

        Logits are gathered to the full vocabulary on every rank, so this does not shrink with
        tensor parallelism. 0 without ``vllm_version``.
        """
        if self.vllm_version is None:
            return 0.0
        return float(self.sampler_buffers * self.max_num_seqs * spec.vocab_size * 4)

    def moe_workspace_bytes(self, spec: ModelSpec, tensor_parallel: int) -> float:
        """The fused-MoE buffers per GPU of the profile run's forward pass: 0 for a dense model.

        Shapes as vLLM's source allocates them for 16-bit experts on CUDA, in the activation dtype,
        with M the forward pass's tokens (``max_num_batched_tokens``), I the expert's intermediate
        size per rank (sharded by TP), H the hidden size and k the experts per token:

        - ``"held"`` (vLLM 0.19.0): ``fused_moe/oracle/unquantized.py`` picks ``TritonExperts``
          unless FlashInfer is asked for; its ``workspace_shapes`` (``fused_moe/fused_moe.py``) asks
          for ``(M, k, max(I, H))`` and ``(M, k, max(2 I, H))``, unchunked, which
          ``_allocate_buffers`` (``fused_moe/modular_kernel.py``) takes from the engine-wide
          ``WorkspaceManager`` (``v1/worker/workspace.py``; the output shares the first buffer).
        - ``"per_call"`` (vLLM 0.11.0): the TP path calls ``fused_experts_impl``
          (``fused_moe/fused_moe.py``), which allocates ``M' x k x max(2 I, H)`` and
          ``M' x k x I`` elements per call, M' = min(M, :data:`FUSED_MOE_CHUNK_TOKENS`), and
          frees them when the layer returns.

        Quantized experts run other kernels (DeepGEMM, CUTLASS, FlashInfer, Marlin) whose
        buffers this does not check.
        """
        if not (self.moe_workspace and spec.is_moe):
            return 0.0
        per_rank = (spec.moe_intermediate_size or spec.intermediate_size) / tensor_parallel
        hidden, k = spec.hidden_size, spec.experts_per_token
        if self.moe_workspace == "held":
            rows = self.max_num_batched_tokens * k
            return float(rows * (max(per_rank, hidden) + max(2 * per_rank, hidden)) * 2)
        rows = min(self.max_num_batched_tokens, FUSED_MOE_CHUNK_TOKENS) * k
        return float(rows * (max(2 * per_rank, hidden) + per_rank) * 2)

    def activation_bytes(self, spec: ModelSpec, tensor_parallel: int) -> float:
        """Estimated activation peak of vLLM's profile run, per GPU.

        Without ``vllm_version``: the forward pass (:meth:`forward_bytes`); vLLM measured 1.26 GiB
        for Meta-Llama-3-8B where this gives 0.78 GiB (pull request 10511). With it: the larger of
        the forward pass and the sampling step (:meth:`sampler_bytes`), which run one after the
        other and free their tensors in between. The sampling step's fp32 logits
        (``max_num_seqs x vocab``), their sorted copy and indices for top-k/top-p, softmax and
        cumulative sums dominate for every model vLLM's logs show; the count of such buffers is
        one figure per version, taken from one published log (:data:`VLLM_VERSIONS`). A mixture
        of experts adds its fused-MoE buffers (:meth:`moe_workspace_bytes`): held through both
        steps under 0.19, so they add to the peak; freed within the forward pass under 0.10,
        where they sit beside the layer's residual and normed input (two hidden-size buffers).
        """
        forward = self.forward_bytes(spec, tensor_parallel)
        moe = self.moe_workspace_bytes(spec, tensor_parallel)
        if self.moe_workspace == "held":
            return max(forward, self.sampler_bytes(spec)) + moe
        if moe:
            forward = max(forward, self.max_num_batched_tokens * 2 * spec.hidden_size * 2 + moe)
        return max(forward, self.sampler_bytes(spec))

    def capacity_column(self) -> str:
        """The GPU catalog column whose memory the accounting's share applies to."""
        return "memory_reported_bytes" if self.vllm_version is not None else "memory_bytes"


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
#: The memory accountings: "article" (15 % headroom) and "vllm" (90 % of the GPU, as vLLM counts).
ACCOUNTINGS = tuple(_ACCOUNTINGS)


def accounting(name: str | Accounting = "article", **overrides: object) -> Accounting:
    """Return a memory accounting by name, with any field overridden.

    ``vllm_version`` (``"0.6"``, ``"0.10"`` or ``"0.19"``, see :data:`VLLM_VERSIONS`) sets that version's
    profiler settings first; other overrides apply on top of them.

    Examples
    --------
    >>> accounting("article", headroom_fraction=0.2).headroom_fraction
    0.2
    >>> accounting("vllm").block_tokens
    16
    >>> accounting("vllm", vllm_version="0.10").max_num_seqs
    1024
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
    version = overrides.get("vllm_version")
    if version is not None:
        if not isinstance(version, str):
            raise InputError(
                f"vllm_version must be a string such as '0.10', got the {type(version).__name__} "
                f"{version!r} (a number loses a release's trailing zero)"
            )
        if version not in _VLLM_PRESETS:
            raise InputError(
                f"vllm_version={version!r} is not known; use one of {list(VLLM_VERSIONS)} "
                "(0.6: the V0 engine from 0.6.5 on; 0.10: the V1 engine of 2025, checked on 0.11; "
                "0.19: the V1 engine of 2026, checked on 0.19.0)"
            )
        if base.name != "vllm":
            raise InputError(f"vllm_version applies to accounting='vllm', not {base.name!r}")
        if version != base.vllm_version:  # (an accounting of that version keeps its settings)
            base = replace(base, vllm_version=version, **_VLLM_PRESETS[version])
    result = replace(
        base, **{k: v for k, v in overrides.items() if v is not None and k != "vllm_version"}
    )
    _validate.fraction(result.headroom_fraction, "headroom_fraction", high=10.0)
    _validate.fraction(result.gpu_memory_utilization, "gpu_memory_utilization", low_open=True)
    _validate.positive_int(result.block_tokens, "block_tokens")
    for field in ("non_torch_bytes_single", "non_torch_bytes_multi", "sampler_buffers"):
        _validate.fraction(getattr(result, field), field, high=float("inf"))
    for field in ("hybrid_kv", "hybrid_chunked"):
        if not isinstance(getattr(result, field), bool | np.bool_):
            raise InputError(f"{field} must be True or False, got {getattr(result, field)!r}")
    if result.moe_workspace not in ("", "held", "per_call"):
        raise InputError(
            f"moe_workspace must be '', 'held' or 'per_call', got {result.moe_workspace!r}"
        )
    for field in ("max_num_batched_tokens", "max_num_seqs"):
        value = getattr(result, field)
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise InputError(f"{field} must be an integer >= 0 (tokens, sequences), got {value!r}")
    return result


@declare_units(seq_len="tokens")
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
    vllm_version: str | None = None,
    deployment: Deployment | None = None,
) -> xr.Dataset:
    """Memory per GPU over a grid of model x gpu x tensor_parallel x concurrency x seq_len.

    Parameters
    ----------
    grid
        An ``xarray.Dataset`` (or mapping) whose coordinates are some of the five axes; the rest are
        given as arguments. The result keeps the grid's dim order.
    model, gpu
        Catalog ids (``capnb.data.list_models()``, ``list_gpus()``), paths to ``config.json`` files or
        ModelSpecs (model only). The axes are grids (several models, GPUs, degrees at once), so they
        stay arguments; one :class:`capnb.records.Deployment` may be given as ``deployment``
        instead of ``model``, ``gpu``, ``tensor_parallel``, ``kv_dtype`` and ``weight_dtype``.
    tensor_parallel, concurrency, seq_len
        Positive integers: GPUs per model replica, sequences in flight, tokens per sequence.
    kv_dtype
        ``"auto"`` (the model's dtype), ``"fp32"``, ``"bf16"``, ``"fp16"``, ``"fp8"``, ``"int8"``
        or ``"int4"`` (TensorRT-LLM's INT8 and LMDeploy's 8- and 4-bit KV caches; vLLM and SGLang
        store neither): bytes per value 4, 2, 2, 1, 1, 0.5 (quantization scales not counted).
    weight_dtype
        Override the config's weight dtype (``"bf16"``, ``"fp8"``, ``"int4"`` ...).
    accounting, headroom_fraction, gpu_memory_utilization
        The memory accounting (:func:`accounting`) and overrides of its settings.
    chunks
        Dask chunk sizes per dim (needs dask); the answer is the same as in memory. An axis given as
        a dask-backed DataArray is chunked the same way.
    invalid_tensor_parallel
        ``"raise"`` (default) when a tensor-parallel degree cannot shard a model, or ``"mask"`` to mark
        those cells (NaN bytes, ``fits`` False, ``limit_reason`` ``tensor_parallel_invalid``; why
        each degree cannot shard its model in the attr ``unshardable``, which :func:`describe` says).
    vllm_version
        With ``accounting="vllm"``: count memory as that version of vLLM's profiler does
        (``"0.6"``: the V0 engine from 0.6.5 on; ``"0.10"``: the V1 engine of 2025; see
        :data:`VLLM_VERSIONS`), on the memory the driver reports. None (default): capnb's first
        vLLM-like accounting, unchanged.
    deployment
        One model on one GPU at one degree (GPUs) with its dtypes
        (:class:`capnb.records.Deployment`), in place of the five arguments it holds.

    Returns
    -------
    xarray.Dataset
        ``kv_cache_bytes``, ``headroom_bytes``, ``total_bytes`` over (model, tensor_parallel,
        concurrency, seq_len) (they do not depend on the GPU); ``fits`` over all five dims;
        ``weights_bytes`` and ``kv_bytes_per_token`` over (model, tensor_parallel);
        ``capacity_bytes`` and ``usable_bytes`` over gpu; ``max_concurrency`` and ``limit_reason``
        over (model, gpu, tensor_parallel, seq_len); ``min_tensor_parallel`` over (model, gpu,
        seq_len). Bytes are per GPU. ``max_concurrency`` is the largest integer concurrency that fits,
        not capped by the concurrency axis; 0 means none fits and ``limit_reason`` says why. With
        the vllm accounting, ``kv_cache_tokens`` over (model, gpu, tensor_parallel): the figure vLLM
        logs as "GPU KV cache size: N tokens" (per GPU of the group, not multiplied by TP).

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
        vllm_version=vllm_version,
    )
    if deployment is not None:
        model, gpu, tensor_parallel, kv_dtype, weight_dtype = _deployed(
            deployment, model, gpu, tensor_parallel, kv_dtype, weight_dtype
        )
    given = {
        "model": model,
        "gpu": gpu,
        "tensor_parallel": tensor_parallel,
        "concurrency": concurrency,
        "seq_len": seq_len,
    }
    grid = _grid.prepare(
        grid,
        given,
        _grid.AXES,
        kv_dtype=kv_dtype,
        weight_dtype=weight_dtype,
        acct=acct,
        invalid_tensor_parallel=invalid_tensor_parallel,
        chunks=chunks,
    )
    kv, headroom, total = _grid.footprint(grid, acct)
    largest = _grid.largest(grid, acct)
    variables = {
        "weights_bytes": grid.variable("weights_bytes"),
        "kv_bytes_per_token": grid.variable("kv_bytes_per_token"),
        "kv_cache_bytes": kv,
        "headroom_bytes": headroom,
        "total_bytes": total,
        "capacity_bytes": grid.variable("capacity_bytes"),
        "usable_bytes": grid.variable("usable_bytes"),
        "fits": _grid.fits(largest, grid),
        **_reduced(grid, largest, acct),
    }
    return _grid.assemble(grid, variables, acct, kv_dtype)


def _reduced(grid, largest, acct) -> dict[str, xr.Variable]:
    tokens = {"kv_cache_tokens": _grid.kv_cache_tokens(grid, acct)} if acct.name == "vllm" else {}
    return {
        **tokens,
        "max_concurrency": largest,
        "limit_reason": _grid.reasons(largest, grid, acct),
        "min_tensor_parallel": xr.Variable(
            ("model", "gpu", "seq_len"), _grid.min_tensor_parallel(grid, acct)
        ),
    }


@declare_units(seq_len="tokens")
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
    vllm_version: str | None = None,
    deployment: Deployment | None = None,
) -> xr.Dataset:
    """The largest concurrency that fits per (model, gpu, tensor_parallel, seq_len), without the grid.

    Same arguments as :func:`sweep` minus ``concurrency`` (``deployment`` included): the search
    is over all positive integers in closed form, so no concurrency grid is materialised. Returns
    ``max_concurrency``, ``limit_reason``, ``min_tensor_parallel``, ``weights_bytes``,
    ``kv_bytes_per_token`` and ``usable_bytes`` (and ``kv_cache_tokens`` with the vllm
    accounting); this is what the capacity step takes from memory.

    Examples
    --------
    >>> ds = max_concurrency(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1,
    ...                      seq_len=16000, accounting="vllm", vllm_version="0.10")
    >>> int(ds.kv_cache_tokens.item())
    420928
    >>> ds = max_concurrency(model="Llama-3.1-405B", gpu="H100-SXM", tensor_parallel=1, seq_len=8192)
    >>> str(ds.limit_reason.item()), int(ds.min_tensor_parallel.item())
    ('weights', 16)
    """
    acct = globals()["accounting"](
        accounting,
        headroom_fraction=headroom_fraction,
        gpu_memory_utilization=gpu_memory_utilization,
        vllm_version=vllm_version,
    )
    if deployment is not None:
        model, gpu, tensor_parallel, kv_dtype, weight_dtype = _deployed(
            deployment, model, gpu, tensor_parallel, kv_dtype, weight_dtype
        )
    given = {"model": model, "gpu": gpu, "tensor_parallel": tensor_parallel, "seq_len": seq_len}
    grid = _grid.prepare(
        grid,
        given,
        ("model", "gpu", "tensor_parallel", "seq_len"),
        kv_dtype=kv_dtype,
        weight_dtype=weight_dtype,
        acct=acct,
        invalid_tensor_parallel=invalid_tensor_parallel,
        chunks=chunks,
    )
    largest = _grid.largest(grid, acct)
    variables = {
        **_reduced(grid, largest, acct),
        "kv_cache_bytes": _grid.held_kv_bytes(grid, acct, largest),
        **{
            name: grid.variable(name)
            for name in ("weights_bytes", "kv_bytes_per_token", "capacity_bytes", "usable_bytes")
        },
    }
    return _grid.assemble(grid, variables, acct, kv_dtype)


def smallest_degrees(
    model, gpus, tensor_parallel, seq_len: int, *, accounting="article", vllm_version=None
) -> str:
    """Where no degree given holds one sequence: each GPU's smallest degree that would, in words.

    ``"the smallest tensor-parallel degree that holds the weights and one 1,426-token sequence:
    8 x L4, 4 x L40S"`` (:func:`max_concurrency`'s ``min_tensor_parallel``); "" when one of the
    degrees given holds one on some GPU (then memory is not what rules the options out, or not
    alone). ``accounting`` may map each GPU to its own accounting (a server's profile run on it:
    vllm serve profiles 256 sequences on an L4, 1,024 on an H100).
    """
    each_gpu = accounting if isinstance(accounting, Mapping) else dict.fromkeys(gpus, accounting)
    found = {}
    for gpu in gpus:
        ds = max_concurrency(
            model=model, gpu=gpu, tensor_parallel=1, seq_len=int(seq_len),
            accounting=each_gpu[gpu], vllm_version=vllm_version,
        )  # fmt: skip
        found[str(ds.gpu.values[0])] = int(ds.min_tensor_parallel.values.ravel()[0])
    degrees = [int(t) for t in tensor_parallel]
    if any(0 < t <= max(degrees) for t in found.values()):
        return ""
    each = [f"{t} x {g}" if t else f"none up to 64 x {g}" for g, t in found.items()]
    return (
        "the smallest tensor-parallel degree that holds the weights and one "
        f"{int(seq_len):,}-token sequence: {', '.join(each)}"
    )


def _deployed(deployment, model, gpu, tensor_parallel, kv_dtype, weight_dtype) -> tuple:
    """(model, gpu, tensor_parallel, kv_dtype, weight_dtype) of a deployment given alone."""
    expect_deployment(deployment)
    others = {"model": model, "gpu": gpu, "tensor_parallel": tensor_parallel,
              "weight_dtype": weight_dtype}  # fmt: skip
    both = [k for k, v in others.items() if v is not None] + (["kv_dtype"] * (kv_dtype != "auto"))
    if both:
        raise InputError(
            f"deployment: give the deployment or {both[0]}, not both (the deployment holds "
            "model, gpu, tensor_parallel, kv_dtype and weight_dtype)"
        )
    d = deployment
    return d.spec, d.gpu, d.tensor_parallel, d.kv_dtype, d.weight_dtype


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


def _windows(result: xr.Dataset, cell: xr.Dataset, seq_len: int, kept: bool) -> str:
    """The clause on a windowed model's layers: kept to their window, or counted at full length."""
    if kept and str(result.attrs.get("kv_layout", "")).startswith("vLLM's hybrid"):
        return (
            "; its sliding-window layers hold only their window, as vLLM's hybrid KV cache "
            "manager keeps them"
        )
    layers = int(cell.windowed_layers) if "windowed_layers" in cell.coords else 0
    if not layers or seq_len <= int(cell.sliding_window):
        return ""
    return (
        f"; its {layers} sliding-window layers are counted at full length, as vLLM without its "
        f"hybrid KV cache manager (before 0.10) holds them: accounting='vllm' with "
        f"vllm_version='0.19' keeps only their {int(cell.sliding_window):,}-token window"
    )


def _marketed(result: xr.Dataset, gpu: str) -> str:
    """A clause saying the usable memory is a share of the marketed memory, where it is ("" else)."""
    if gpu not in str(result.attrs.get("marketed_memory_gpus", "")).split(", "):
        return ""
    share = float(result.attrs.get("gpu_memory_utilization", 1.0))
    return (
        f"; the usable memory is {share:.0%} of {gpu}'s marketed memory, as the GPU catalog has no "
        "driver-reported memory (memory_reported_bytes) for it"
    )


def _serve_defaults(result: xr.Dataset, gpu: str, capacity: float) -> str:
    """A clause naming vllm serve's own defaults where they differ from the count's ("" else)."""
    if gpu not in str(result.attrs.get("serve_defaults_gpus", "")).split(", "):
        return ""
    served = _grid.serve_defaults(gpu, capacity)
    seqs, tokens = served.max_num_seqs, served.max_num_batched_tokens
    return (
        f"; vllm serve's defaults on {gpu} are max_num_seqs {seqs:,} and max_num_batched_tokens "
        f"{tokens:,}, where this count's profile run has {int(result.attrs['max_num_seqs']):,} and "
        f"{int(result.attrs['max_num_batched_tokens']):,}: pass max_num_seqs={seqs} and "
        f"max_num_batched_tokens={tokens} to accounting() to count as it runs"
    )


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
    marketed = _serve_defaults(result, gpu, float(cell.capacity_bytes)) + _marketed(result, gpu)
    kv_dtype = str(cell.kv_dtype.values) if "kv_dtype" in cell.coords else ""
    other_kv = kv_dtype and kv_dtype != str(cell.weight_dtype.values)
    where = f"{model} in {cell.weight_dtype.values}" + (
        f" with its KV cache in {kv_dtype}" if other_kv else ""
    )
    where += f" on {tp} x {gpu}"
    context = int(cell.context_tokens) if "context_tokens" in cell.coords else 0
    beyond = (
        f"; but {seq:,} tokens is beyond {model}'s context of {context:,} tokens, which vLLM "
        "refuses at any tensor-parallel degree (max_model_len)"
        if 0 < context < seq
        else ""
    )
    if reason == "kv_cache":
        held = cell.kv_cache_bytes if "kv_cache_bytes" in cell else None
        if held is not None and "concurrency" in held.dims:  # a sweep: linear in concurrency
            held = largest * held.isel(concurrency=0) / int(held.concurrency[0])
        full_length = largest * float(cell.kv_bytes_per_token) * seq
        kv = float(held) if held is not None else full_length
        windows = _windows(result, cell, seq, kv < full_length)
        return (
            f"{where} fits at most {words.count(largest, 'concurrent sequence')} of {seq:,} tokens "
            f"({_gib(weights)} of weights and {_gib(kv)} of KV cache per GPU, "
            f"of {_gib(usable)} usable, with {result.attrs['accounting']} accounting{windows})"
            f"{beyond}{marketed}."
        )
    smallest = int(cell.min_tensor_parallel)
    if beyond:  # vLLM refuses such a sequence at any degree: name none
        remedy = (
            f"and no tensor-parallel degree serves one sequence of {seq:,} tokens: it is beyond "
            f"{model}'s context of {context:,} tokens, which vLLM refuses (max_model_len)"
        )
    elif smallest:
        remedy = f"the smallest tensor-parallel degree that fits one such sequence is {smallest}"
    else:
        remedy = "no tensor-parallel degree up to 64 fits it"
    if reason == "weights":
        headroom = float(result.attrs.get("headroom_fraction", 0.0))
        if weights * (1.0 + headroom) <= usable:  # the accounting's reserve tips it over
            return (
                f"Infeasible: {where} does not fit: its weights take {_gib(weights)} per GPU, and "
                f"the reserve {result.attrs['accounting']} accounting holds beside them (the "
                "profile run's activation and sampler peak, memory outside torch and vLLM's rotary cache) "
                "leaves none "
                f"of the {_gib(usable)} usable for the KV cache; {remedy}{marketed}."
            )
        if weights <= usable:  # the headroom on the weights tips it over
            return (
                f"Infeasible: {where} does not fit: its weights take {_gib(weights)} per GPU, "
                f"{_gib(weights * (1.0 + headroom))} with the {headroom:.0%} headroom, more than "
                f"the {_gib(usable)} usable; {remedy}{marketed}."
            )
        return (
            f"Infeasible: {where} does not fit: its weights alone take {_gib(weights)} per GPU, "
            f"more than the {_gib(usable)} usable; {remedy}{marketed}."
        )
    if reason == "one_sequence" and beyond:
        return (
            f"Infeasible: {where} holds its weights ({_gib(weights)} per GPU) but not one sequence "
            f"of {seq:,} tokens, and no tensor-parallel degree serves one: it is beyond {model}'s "
            f"context of {context:,} tokens, which vLLM refuses (max_model_len)."
        )
    if reason == "one_sequence":
        return (
            f"Infeasible: {where} holds its weights ({_gib(weights)} per GPU) but not one sequence "
            f"of {seq:,} tokens; shorten sequences, "
            + ("" if kv_dtype == "fp8" else "use an fp8 KV cache, ")
            + f"or add GPUs: {remedy}."
        )
    why = _grid.unshardable_reason(result.attrs.get("unshardable", []), model, tp)
    return (
        f"Infeasible: {why or f'tensor_parallel={tp} cannot shard {model}'}; vLLM refuses to load "
        "it, so pick a degree that shards it."
    )

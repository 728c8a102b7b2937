"""The model spec: what capacity planning needs to know about a model, read from its ``config.json``.

:func:`parse` turns a Hugging Face ``config.json`` (as a mapping) into a :class:`ModelSpec`: layers,
heads, KV heads, head_dim, attention kind (MHA, GQA, MQA, MLA), mixture-of-experts layout, vocabulary,
tied embeddings and the weight dtype. From those it computes the parameter count, weight bytes and
KV-cache bytes per token, per tensor-parallel rank the way serving runtimes shard them.

Published facts the formulas are checked against (tests/test_modelspec.py):
Llama-3.1-8B keeps 131,072 bytes of bf16 KV cache per token and has 8.03 B parameters;
Llama-3.1-70B 327,680 bytes and 70.6 B; DeepSeek-V3's MLA latent cache is 61 x (512 + 64) x 2 =
70,272 bytes per token and it has 671 B parameters; Mixtral-8x7B has 46.7 B; gpt-oss-120b has
116.8 B (5.1 B active without the input embedding), 36 layers of which 18 attend over a sliding window
of 128 tokens.

gpt-oss's MXFP4 checkpoint: the experts are 4-bit with one 8-bit scale per 32 weights (4.25 bits a
weight); the modules its ``quantization_config`` leaves unconverted (attention, router, embeddings)
stay in ``torch_dtype``. Its attention sinks (one scalar per head and layer) are not counted.

Fields a config omits take the default of that model type's transformers config class (tables below,
each with its source); where capnb has to assume something else, :attr:`ModelSpec.notes` says what.
A multimodal config's text model is read from its ``text_config`` (or where vLLM reads it otherwise:
InternVL's ``llm_config``, DeepSeek-VL2's ``language_config``, Qwen2.5-Omni's thinker's); its
vision tower is counted for the families in ``_VISION_COUNTERS`` and named as not counted in the
notes otherwise.

Sliding-window attention is read as transformers reads each model type (``_WINDOWS``): a config's
``layer_types`` as given; without it, the type's rule (Mistral, Mixtral, Phi-3: every layer;
Gemma-2 and gpt-oss: layers 0, 2, 4, ...; Gemma-3 and Cohere2: all but every
``sliding_window_pattern``-th; Qwen2 and Qwen3: layers from ``max_window_layers`` on, only with
``use_sliding_window``; Llama 4: its chunked layers, at ``attention_chunk_size``). A window capnb
cannot place is not applied, and the notes say so.
"""

from __future__ import annotations

import fnmatch
import itertools
import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import ConfigError, InputError

__all__ = [
    "DTYPE_BYTES",
    "KVGroups",
    "ModelSpec",
    "context_tokens",
    "dtype_bytes",
    "hybrid_kv_gain",
    "kv_groups",
    "parse",
    "rope_cache_positions",
]

#: Bytes per element of the dtypes capnb knows (weights or KV cache).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

_DTYPE_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "uint4": "int4",
}


#: Values per fp32 scale in DeepSeek-V3.2's indexer key cache (vLLM's ``quant_block_size``).
_INDEXER_BLOCK = 128


def dtype_bytes(dtype: str, *, argument: str = "dtype") -> float:
    """Return the bytes per element of a dtype name (``bf16``, ``bfloat16``, ``fp8``, ``int4`` ...).

    Examples
    --------
    >>> dtype_bytes("bfloat16")
    2.0
    """
    return DTYPE_BYTES[_canonical_dtype(dtype, argument)]


def _canonical_dtype(dtype: object, argument: str) -> str:
    name = str(dtype).lower().replace("torch.", "")
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPE_BYTES:
        raise InputError(
            f"{argument}={dtype!r} is not a known dtype; use one of {sorted(DTYPE_BYTES)}"
        )
    return name


@dataclass(frozen=True)
class ModelSpec:
    """Architecture figures of one model (all counts are integers; sizes are per token or layer).

    Build it with :func:`parse` (or :func:`capnb.data.load_model`), not by hand.
    """

    name: str
    source: str
    model_type: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    gated_mlp: bool
    weight_dtype: str
    torch_dtype: str
    experts: int = 0
    experts_per_token: int = 0
    shared_experts: float = 0
    moe_intermediate_size: int = 0
    moe_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    #: DeepSeek-V3.2's sparse-attention indexer: the width of the key it caches per token and
    #: layer beside the MLA latent (0: no indexer).
    index_head_dim: int = 0
    sliding_window: int = 0
    sliding_layers: int = 0
    #: Layers whose attention (and router), shared experts or dense MLP the checkpoint keeps in
    #: ``torch_dtype`` (its ``quantization_config``'s unconverted modules).
    unquantized_attention: int = 0
    unquantized_shared_experts: int = 0
    unquantized_dense_mlp: int = 0
    weight_scale_bytes: float = 0.0
    #: Weights sharing one quantization scale, (output rows, input columns), that a
    #: tensor-parallel shard of an MLP or expert weight must hold whole, as vLLM requires: FP8's
    #: ``weight_block_size``, AWQ/GPTQ's ``(0, group_size)`` (compressed-tensors: its ``"group"``
    #: schemes' group_size, its ``"block"`` ones' block_structure); ``(0, 0)`` where nothing is
    #: grouped.
    weight_group: tuple[int, int] = (0, 0)
    vision_parameters: int = 0
    qkv_bias: bool = False
    extra_norm_parameters: int = 0
    config: Mapping = field(default_factory=dict, repr=False, compare=False)
    #: What capnb assumed or changed while reading the config (defaults, dtype), one sentence each.
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def attention(self) -> str:
        """Attention kind: ``MLA``, ``MHA``, ``MQA`` or ``GQA``."""
        if self.kv_lora_rank:
            return "MLA"
        if self.kv_heads == self.attention_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def is_moe(self) -> bool:
        """Whether the model routes tokens to experts."""
        return self.experts > 0

    # -- parameter counts ---------------------------------------------------------------------
    def _attention_parameters(self) -> int:
        h, heads = self.hidden_size, self.attention_heads
        if self.attention == "MLA":
            qk_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * heads * qk_dim
            else:
                q = h * heads * qk_dim
            kv_down = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv_up = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
            out = heads * self.v_head_dim * h
            return q + kv_down + kv_up + out
        q_and_out = 2 * h * heads * self.head_dim
        k_and_v = 2 * h * self.kv_heads * self.head_dim
        biases = (heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        return q_and_out + k_and_v + biases

    def _mlp_parameters(self, intermediate: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden_size * intermediate

    def _parameters(self, experts_used: int) -> int:
        h = self.hidden_size
        dense_layers = self.layers - self.moe_layers
        per_layer = self._attention_parameters() + 2 * h + self.extra_norm_parameters
        dense = dense_layers * self._mlp_parameters(self.intermediate_size)
        expert = self._mlp_parameters(self.moe_intermediate_size or self.intermediate_size)
        moe_layer = (experts_used + self.shared_experts) * expert + h * self.experts  # + router
        embeddings = self.vocab_size * h * (1 if self.tied_embeddings else 2)
        return round(self.layers * per_layer + dense + self.moe_layers * moe_layer + embeddings + h)

    @property
    def parameters(self) -> int:
        """Total parameter count, with a counted vision tower (``vision_parameters``).

        Two norms per layer (plus ``extra_norm_parameters`` where a family has more); biases
        only where ``qkv_bias`` (the q/k/v biases of Qwen2-family attention); the MTP head of
        DeepSeek-V3 is not counted.
        """
        return self._parameters(self.experts) + self.vision_parameters

    @property
    def active_parameters(self) -> int:
        """Parameters used per text token: dense parts plus routed + shared experts.

        The vision tower runs on images only and is not part of it.
        """
        return self._parameters(self.experts_per_token if self.is_moe else self.experts)

    @property
    def head_parameters(self) -> int:
        """Parameters of the LM head (``vocab_size x hidden_size``), multiplied per sampled token.

        A tied model's head is its embedding table; an untied model has both. An engine computes
        the head's logits only at the positions it samples (the last token of a prompt, every
        decode), not at every prompt token.
        """
        return self.vocab_size * self.hidden_size

    @property
    def layer_parameters(self) -> int:
        """Active parameters multiplied at every computed token.

        ``active_parameters`` without the embedding table (a row lookup, no product) and the LM
        head (:attr:`head_parameters`).

        A forward step computing ``T`` tokens of which ``S`` are sampled costs ``2 x
        layer_parameters x T + 2 x head_parameters x S`` FLOP outside attention. OpenAI's
        "active parameters" of gpt-oss-120b (5.13 B) are ``layer_parameters + head_parameters``.
        """
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)
        return self.active_parameters - embeddings

    def request_flop(self, prompt_tokens, output_tokens):
        """FLOP of one request outside attention.

        ``2 x layer_parameters`` per token it computes (prompt and output) plus ``2 x
        head_parameters`` per token it samples (each output token).

        Numbers or arrays (broadcast); what compute utilisation divides by.
        """
        tokens = prompt_tokens + output_tokens
        return 2.0 * self.layer_parameters * tokens + 2.0 * self.head_parameters * output_tokens

    # -- bytes --------------------------------------------------------------------------------
    @property
    def context_tokens(self) -> int | None:
        """Tokens of context the model serves (vLLM's default ``max_model_len``; None: not stated).

        From its config (:func:`context_tokens`).
        """
        return context_tokens(self.config or {})

    def beyond_context(self, lengths) -> tuple[float, int, int] | None:
        """Requests longer than the model's context (tokens, prompt + output), which vLLM rejects.

        ``(share of them, the longest, the context)``; None when every request fits or the
        context is not stated.
        """
        import numpy as np

        limit = self.context_tokens
        lengths = np.asarray(lengths)
        if limit is None or lengths.size == 0 or int(lengths.max()) <= limit:
            return None
        return float((lengths > limit).mean()), int(lengths.max()), int(limit)

    def weight_bytes(self, dtype: str | None = None) -> float:
        """Bytes of all weights in ``dtype`` (default: the config's weight dtype).

        When the weights are quantized below 16 bits, the embeddings, the LM head and a counted
        vision tower stay in the config's ``torch_dtype`` (as fp8 and int4 checkpoints ship them).
        In the checkpoint's own dtype, the modules its ``quantization_config`` leaves unconverted
        (attention and router, ``unquantized_attention``; a compressed-tensors ``ignore`` pattern
        can also keep the shared experts, ``unquantized_shared_experts``, and the dense layers'
        MLPs, ``unquantized_dense_mlp``) stay in ``torch_dtype`` too, and block
        scales add ``weight_scale_bytes`` per quantized weight (MXFP4: one byte per 32; FP8
        ``weight_block_size`` [128, 128]: four bytes per 16,384; ModelOpt
        NVFP4: one byte per ``group_size``, 16; AWQ,
        GPTQ and grouped compressed-tensors: a 16-bit scale and a packed zero per group;
        bitsandbytes 4-bit: an absmax per 64).
        """
        weight_dtype = _canonical_dtype(dtype or self.weight_dtype, "weight_dtype")
        per_param = DTYPE_BYTES[weight_dtype]
        if per_param >= 2.0:
            return float(self.parameters * per_param)
        kept = self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)
        kept += self.vision_parameters
        own = weight_dtype == self.weight_dtype
        if own:
            kept += self.unquantized_attention * self._attention_parameters()
            routers = min(self.unquantized_attention, self.moe_layers)
            kept += routers * self.hidden_size * self.experts
            expert = self._mlp_parameters(self.moe_intermediate_size or self.intermediate_size)
            kept += self.unquantized_shared_experts * self.shared_experts * expert
            kept += self.unquantized_dense_mlp * self._mlp_parameters(self.intermediate_size)
        if own:
            per_param += self.weight_scale_bytes
        kept_bytes = kept * DTYPE_BYTES[self.torch_dtype]
        return float((self.parameters - kept) * per_param + kept_bytes)

    def weight_bytes_per_gpu(self, tensor_parallel: int = 1, dtype: str | None = None) -> float:
        """Bytes of weights each tensor-parallel rank holds (``dtype`` as in :meth:`weight_bytes`).

        The weights split evenly across the ranks, but for two parts every rank holds more of:

        - the down projections of multi-head latent attention (``q_a_proj`` and
          ``kv_a_proj_with_mqa``, layers x hidden x (q_lora_rank + kv_lora_rank +
          qk_rope_head_dim)), which vLLM's DeepseekV2 attention builds as ``ReplicatedLinear``:
          every rank holds them whole (DeepSeek-V3: 0.86 GiB in fp8);
        - the K and V projections where the degree exceeds the KV heads: vLLM's
          ``QKVParallelLinear`` gives each rank ``max(1, kv_heads / TP)`` heads of them, a head's
          weights and biases copied to ``TP / kv_heads`` ranks (Qwen2.5-72B at TP 16: 168 MB a
          GPU more than an even split).
        """
        total = self.weight_bytes(dtype)
        if tensor_parallel == 1:
            return total
        if self.kv_lora_rank:
            whole = self.layers * self.hidden_size
            whole *= self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim
            held = whole  # on every rank
        elif tensor_parallel > self.kv_heads:
            bias = 1 if self.qkv_bias else 0
            whole = self.layers * 2 * (self.hidden_size + bias) * self.head_dim * self.kv_heads
            held = whole / self.kv_heads  # one head of K and V on every rank
        else:
            return total / tensor_parallel
        weight_dtype = _canonical_dtype(dtype or self.weight_dtype, "weight_dtype")
        per_param = DTYPE_BYTES[weight_dtype]
        if per_param < 2.0 and weight_dtype == self.weight_dtype:  # as weight_bytes counts them
            share = self.unquantized_attention / self.layers  # of the layers, in torch_dtype
            per_param = share * DTYPE_BYTES[self.torch_dtype]
            per_param += (1 - share) * (DTYPE_BYTES[weight_dtype] + self.weight_scale_bytes)
        return (total - whole * per_param) / tensor_parallel + held * per_param

    def kv_heads_per_rank(self, tensor_parallel: int = 1) -> int:
        """KV heads each tensor-parallel rank holds: split, or replicated when TP exceeds KV heads."""
        self.check_tensor_parallel(tensor_parallel)
        return max(1, self.kv_heads // tensor_parallel)

    def rope_cache_bytes(self) -> float:
        """Bytes of the rotary cos/sin caches vLLM builds on every GPU as it loads the model.

        vLLM's ``get_rope`` (``rotary_embedding/__init__.py``) makes one cache per distinct
        rotary embedding, ``positions x rotary_dim`` in the model's dtype (``base.py``), whole on
        every rank: ``positions`` as :func:`rope_cache_positions` reads them, ``rotary_dim`` the
        head (``qk_rope_head_dim`` for MLA) times ``partial_rotary_factor`` (a multimodal config's
        from its ``text_config``, where it is given there). 0 where the config
        states no ``max_position_embeddings``. Llama-4-Scout's 10,485,760 positions: 2.50 GiB.
        """
        if self.attention == "MLA":
            rotary = self.qk_rope_head_dim
        else:
            config = self.config or {}
            text = _nested_text(config)[1]  # a multimodal config's text model's, as parse reads
            factor = text.get("partial_rotary_factor") if isinstance(text, Mapping) else None
            if factor is None:
                factor = config.get("partial_rotary_factor", 1.0)
            if (
                isinstance(factor, bool)
                or not isinstance(factor, numbers.Real)
                or not 0 < factor <= 1
            ):
                raise ConfigError(
                    f"{self.source}: field 'partial_rotary_factor' must be a number in (0, 1], "
                    f"got {factor!r}"
                )
            rotary = int(self.head_dim * factor)
        element = DTYPE_BYTES["fp32"] if self.weight_dtype == "fp32" else DTYPE_BYTES["bf16"]
        return float(rope_cache_positions(self.config or {}) * rotary * element)

    def kv_bytes_per_token(self, kv_dtype: str = "auto", tensor_parallel: int = 1) -> float:
        """KV-cache bytes per token on one tensor-parallel rank.

        GQA/MHA/MQA: 2 (K and V) x layers x KV heads per rank x head_dim x bytes. MLA caches one
        compressed latent per layer, layers x (kv_lora_rank + qk_rope_head_dim) x bytes, replicated
        on every rank; with DeepSeek-V3.2's indexer, its key beside it in any ``kv_dtype``: vLLM's
        ``DeepseekV32IndexerCache`` holds ``index_head_dim`` fp8 values and an fp32 scale per 128
        of them (132 bytes a layer), on every rank too; its fp8 cache is vLLM's ``fp8_ds_mla``
        (the latent in fp8 with an fp32 scale per 128, the rope part in bf16: 656 bytes a layer).
        ``kv_dtype``: ``"fp32"``, ``"bf16"``, ``"fp16"``, ``"fp8"``, ``"int8"`` or ``"int4"``
        (TensorRT-LLM's INT8 and LMDeploy's 8- and 4-bit KV caches; vLLM and SGLang store
        neither), at 4, 2, 2, 1, 1 and 0.5 bytes a value (quantization scales not counted);
        ``kv_dtype="auto"`` uses the model's ``torch_dtype`` (as vLLM does: a float32 config is
        served, and so planned, in 16 bits; see :func:`parse`).

        Examples
        --------
        >>> from capnb.data import load_model
        >>> load_model("Llama-3.1-8B").kv_bytes_per_token("bf16")
        131072.0
        """
        dtype = self.torch_dtype if kv_dtype == "auto" else _canonical_dtype(kv_dtype, "kv_dtype")
        element = DTYPE_BYTES[dtype]
        if self.attention == "MLA":
            self.check_tensor_parallel(tensor_parallel)
            latent = (self.kv_lora_rank + self.qk_rope_head_dim) * element
            if self.index_head_dim and dtype == "fp8":  # vLLM's fp8_ds_mla for V3.2's sparse MLA
                scales = self.kv_lora_rank // _INDEXER_BLOCK * 4  # an fp32 scale per 128
                latent = self.kv_lora_rank + scales + self.qk_rope_head_dim * DTYPE_BYTES["bf16"]
            indexer = self.index_head_dim + self.index_head_dim // _INDEXER_BLOCK * 4
            return float(self.layers * (latent + indexer))
        heads = self.kv_heads_per_rank(tensor_parallel)
        return float(2 * self.layers * heads * self.head_dim * element)

    def kv_bytes_per_sequence(
        self, tokens: float, kv_dtype: str = "auto", tensor_parallel: int = 1
    ) -> float:
        """KV-cache bytes of one sequence of ``tokens`` on one rank, sliding-window layers windowed.

        A sliding-window layer holds ``min(tokens, sliding_window)`` tokens: what a prefill hands to
        decode in disaggregated serving.

        :meth:`kv_bytes_per_token` counts every layer at full length, as a runtime without a hybrid
        (sliding-window aware) KV allocator stores it.

        Examples
        --------
        >>> from capnb.data import load_model
        >>> load_model("gpt-oss-120b").kv_bytes_per_sequence(2048)  # 18 full + 18 windowed layers
        80216064.0
        """
        per_layer = self.kv_bytes_per_token(kv_dtype, tensor_parallel) / self.layers
        full = self.layers - self.sliding_layers
        windowed = min(float(tokens), float(self.sliding_window)) if self.sliding_layers else 0.0
        return float(per_layer * (full * float(tokens) + self.sliding_layers * windowed))

    @property
    def chunked_attention(self) -> bool:
        """Whether the windowed layers attend within chunks (Llama 4), not over a sliding window."""
        return self.model_type == "llama4_text" and self.sliding_layers > 0

    def kv_groups(self, block: int = 16) -> KVGroups:
        """How vLLM's hybrid KV cache manager groups this model's layers (:func:`kv_groups`)."""
        return kv_groups(self.layers, self.sliding_window, self.sliding_layers, block)

    def valid_tensor_parallel(self, tensor_parallel: int) -> str | None:
        """Return why ``tensor_parallel`` cannot shard this model, or None when it can."""
        if (
            isinstance(tensor_parallel, bool)
            or not isinstance(tensor_parallel, numbers.Integral)
            or tensor_parallel < 1
        ):
            return f"tensor_parallel must be a positive integer, got {tensor_parallel!r}"
        if self.attention_heads % tensor_parallel:
            return (
                f"tensor_parallel={tensor_parallel} does not divide the {self.attention_heads} "
                f"attention heads of {self.name}"
            )
        if self.attention != "MLA":
            kv = self.kv_heads
            if tensor_parallel <= kv and kv % tensor_parallel:
                return f"tensor_parallel={tensor_parallel} does not divide the {kv} KV heads of {self.name}"
            if tensor_parallel > kv and tensor_parallel % kv:
                return (
                    f"tensor_parallel={tensor_parallel} is not a multiple of the {kv} KV heads of "
                    f"{self.name} (needed to replicate them evenly)"
                )
        dense = self.layers > self.moe_layers  # vLLM's parallel linear layers: whole shares
        if dense and self.intermediate_size % tensor_parallel:
            return (
                f"tensor_parallel={tensor_parallel} does not divide the MLP of {self.name}: "
                f"intermediate_size={self.intermediate_size} is "
                f"{self.intermediate_size / tensor_parallel:g} per GPU (vLLM refuses to load it)"
            )
        return self._splits_weight_group(tensor_parallel)

    def _splits_weight_group(self, tensor_parallel: int) -> str | None:
        """Why ``tensor_parallel`` splits a quantization group of an MLP or expert weight, or None.

        vLLM shards the gate/up projections' output and the down projection's input; a shard
        that is not whole groups (``weight_group``) is an error at load ("not divisible by weight
        quantization block", "input size is not aligned with the quantized weight shape"). Experts
        are checked in FP8 blocks only: vLLM's 4-bit MoE kernel (``moe_wna16``) halves an AWQ or
        GPTQ group until the expert's shard holds whole ones.
        """
        rows, columns = self.weight_group
        if tensor_parallel == 1 or not (rows or columns):
            return None
        sizes = []
        if self.unquantized_dense_mlp < self.layers - self.moe_layers:  # a quantized dense MLP
            sizes.append(("intermediate_size", self.intermediate_size))
        if self.is_moe and rows:
            expert = ("moe_intermediate_size", self.moe_intermediate_size)
            sizes.append(expert if expert[1] else ("intermediate_size", self.intermediate_size))
        key = "quantization_config." + ("weight_block_size" if rows else "group_size")
        quant = (self.config or {}).get("quantization_config") or {}
        if str(quant.get("quant_method", "")).lower() == "compressed-tensors":
            key = " and ".join(f for f, _ in _group_sizes(quant, self.weight_dtype, self.source))
        for name, size in sizes:
            per_gpu = size / tensor_parallel
            for group in {rows, columns} - {0}:
                if per_gpu % group:
                    return (
                        f"tensor_parallel={tensor_parallel} splits the quantization groups of "
                        f"{self.name}: {name}={size} is {per_gpu:g} per GPU, not a multiple of "
                        f"{key}'s {group} weights (vLLM refuses to load it)"
                    )
        return None

    def check_tensor_parallel(self, tensor_parallel: int) -> None:
        """Raise :class:`InputError` when ``tensor_parallel`` cannot shard this model."""
        reason = self.valid_tensor_parallel(tensor_parallel)
        if reason:
            raise InputError(reason)


# -- parsing ------------------------------------------------------------------------------------
#: Config keys, first match wins: Hugging Face names, then the GPT-style names BLOOM and others use
#: (``n_embed``: Falcon's RW configs; ``num_layers``/``padded_vocab_size``: ChatGLM's).
_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "n_embed", "d_model"),
    "attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}
#: Falcon's model types: today's ``falcon`` and the remote-code RW names it replaced.
_FALCON = {"falcon", "refinedweb", "refinedwebmodel"}
#: Model families whose MLP is up/down only (no gate) and 4 x hidden wide unless stated.
#: transformers 4.57.1: ``PhiMLP`` (fc1, fc2), ``GPTNeoMLP`` and ``Starcoder2MLP`` (c_fc, c_proj),
#: ``CodeGenMLP`` (fc_in, fc_out), ``MptMLP`` and ``NemotronMLP`` (up_proj, down_proj).
_UNGATED = {"bloom", "gpt2", "gpt_neox", "gptj", "opt", "gpt_bigcode", "starcoder"} | _FALCON
_UNGATED |= {"starcoder2", "phi", "gpt_neo", "codegen", "mpt", "nemotron"}

#: ``tie_word_embeddings`` when a config omits it: the default of the model type's config class.
#: Source: transformers 4.57.1, ``src/transformers/models/<type>/configuration_<type>.py``; the
#: classes that do not set it (bloom, gpt2, gpt_bigcode, falcon, opt, mpt, starcoder2) inherit
#: ``PretrainedConfig``'s ``tie_word_embeddings=True`` (``configuration_utils.py``). ``internlm``:
#: the remote-code ``InternLMConfig`` of internlm/internlm-7b (``tie_word_embeddings=False``).
#: A composite config (gemma3, mistral3, llama4) is read through its text config's type.
_TIE_DEFAULTS = {
    **dict.fromkeys(["gemma", "gemma2", "gemma3_text", "cohere"], True),
    **dict.fromkeys(["bloom", "gpt2", "gpt_bigcode", "opt", "mpt", "starcoder2"], True),
    **dict.fromkeys(_FALCON, True),
    **dict.fromkeys(
        ["llama", "llama4_text", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen2_vl", "qwen3"],
        False,
    ),
    **dict.fromkeys(["qwen3_moe", "phi", "phi3", "phimoe", "deepseek_v2", "deepseek_v3"], False),
    **dict.fromkeys(["gpt_neox", "gptj", "olmo", "olmo2", "stablelm", "glm", "glm4"], False),
    **dict.fromkeys(["granite", "nemotron", "internlm"], False),
}

#: Families that use one KV head per attention head when the config names no KV-head count.
#: Source: transformers 4.57.1 config classes. These set ``num_key_value_heads`` to
#: ``num_attention_heads`` when it is absent (llama: Llama-1 and Llama-2-7B/13B configs omit it):
#: llama, phi, phi3, cohere, olmo, olmo2, granite, nemotron, deepseek_v2. These have no KV-head
#: field at all (multi-head only): bloom, gpt2, gpt_neo, gpt_neox, gptj, opt, codegen, mpt, and
#: the remote-code ``InternLMConfig`` (internlm) and ``QWenConfig`` (qwen). Other families
#: (mistral's class defaults to 8, qwen2's to 32, ...) are refused without the field rather than
#: guessed.
_MHA_WHEN_ABSENT = {
    "llama",
    "phi",
    "phi3",
    "cohere",
    "olmo",
    "olmo2",
    "granite",
    "nemotron",
    "deepseek_v2",
    "bloom",
    "gpt2",
    "gpt_neo",
    "gpt_neox",
    "gptj",
    "opt",
    "codegen",
    "mpt",
    "internlm",
    "qwen",
}
#: Of those, the config classes that have the field and fill it in (the rest are multi-head by
#: construction): an omitted field is an assumption, which the notes state.
_KV_HEADS_FILLED = {
    "llama": "LlamaConfig",
    "phi": "PhiConfig",
    "phi3": "Phi3Config",
    "cohere": "CohereConfig",
    "olmo": "OlmoConfig",
    "olmo2": "Olmo2Config",
    "granite": "GraniteConfig",
    "nemotron": "NemotronConfig",
    "deepseek_v2": "DeepseekV2Config",
}

#: Defaults of config fields that public configs of these types omit (the nested ``text_config``
#: of gemma-3 leaves vocab_size and head_dim to them). Source: transformers 4.57.1,
#: ``GemmaConfig``, ``Gemma2Config``, ``Gemma3TextConfig`` and ``Llama4TextConfig`` ``__init__``.
_CLASS_DEFAULTS: dict[str, dict[str, int]] = {
    "gemma": {"head_dim": 256, "num_key_value_heads": 16},
    "gemma2": {"head_dim": 256, "num_key_value_heads": 4},
    "gemma3_text": {
        "vocab_size": 262_208,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
    },
    "llama4_text": {
        "vocab_size": 202_048,
        "intermediate_size": 8_192,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size_mlp": 16_384,
    },
}
_CLASS_NAMES = {
    "gemma": "GemmaConfig",
    "gemma2": "Gemma2Config",
    "gemma3_text": "Gemma3TextConfig",
    "llama4_text": "Llama4TextConfig",
}

#: Defaults of the text config classes a multimodal config nests with only the fields that differ
#: from them: transformers writes a nested config as its diff against its class, so
#: llava-1.5-7b-hf's text_config names no layers, width or heads (Vicuna-7B's are LlamaConfig's),
#: nor does llava-v1.6-mistral-7b-hf's (MistralConfig's). A top-level config is written whole and
#: takes none of them. Source: transformers 4.57.1, ``LlamaConfig`` and ``MistralConfig``
#: ``__init__``.
_NESTED_DEFAULTS: dict[str, dict[str, int]] = {
    "llama": {
        "vocab_size": 32_000,
        "hidden_size": 4_096,
        "intermediate_size": 11_008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
    },
    "mistral": {
        "vocab_size": 32_000,
        "hidden_size": 4_096,
        "intermediate_size": 14_336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
    },
}
_NESTED_CLASS_NAMES = {"llama": "LlamaConfig", "mistral": "MistralConfig"}

#: Fields a nested ``text_config`` takes from the outer config when it lacks them.
_INHERITED = ("vocab_size", "torch_dtype", "dtype", "quantization_config", "tie_word_embeddings")


def _nested_text(config: Mapping) -> tuple[str, object]:
    """(the field a multimodal config nests its text model under, its value); ("", None): none.

    Where vLLM reads it: ``text_config``; where a config has none, InternVL's ``llm_config``
    (model_type ``internvl_chat``, and NVLM-D and Nemotron-Nano-VL after it), which vLLM remaps to
    the text config (``_CONFIG_ATTRS_MAPPING`` in ``vllm/transformers_utils/config.py``),
    DeepSeek-VL2's ``language_config`` (vLLM's ``DeepseekVLV2Config`` reads it as its
    ``text_config``) and Qwen2.5-Omni's ``thinker_config.text_config`` (``get_hf_text_config``;
    vLLM serves the thinker).
    """
    for key in ("text_config", "llm_config", "language_config"):
        if config.get(key) is not None:
            return key, config[key]
    thinker = config.get("thinker_config")
    if isinstance(thinker, Mapping) and thinker.get("text_config") is not None:
        return "thinker_config.text_config", thinker["text_config"]
    return "", None


#: Model types vLLM refuses to run in float16; its ``--dtype auto`` serves their float32
#: checkpoints in bfloat16. Source: vLLM ``vllm/config/model.py``, ``_FLOAT16_NOT_SUPPORTED_MODELS``
#: (gemma2, gemma3, gemma3_text, plamo2, glm4) and ``_resolve_auto_dtype``.
_FP16_UNSUPPORTED = {"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"}


#: Model types whose attention q/k/v projections carry biases: transformers 4.57.1
#: ``modeling_qwen2.py``, ``modeling_qwen2_vl.py``, ``modeling_qwen2_5_vl.py`` and
#: ``modeling_qwen2_5_omni.py`` (the thinker's ``Qwen2_5OmniAttention``) build them with
#: ``nn.Linear(..., bias=True)``; ``modeling_qwen2_moe.py`` with ``bias=self.config.qkv_bias``
#: (``Qwen2MoeConfig``: ``qkv_bias=True``), read in :func:`parse`.
_QKV_BIAS = {
    "qwen2",
    "qwen2_vl",
    "qwen2_vl_text",
    "qwen2_5_vl",
    "qwen2_5_vl_text",
    "qwen2_5_omni_text",
}


#: rope_scaling types whose ``factor`` vLLM does not multiply ``max_position_embeddings`` by.
_ROPE_KEEPS_LENGTH = ("su", "longrope", "llama3", "default", "mrope")

#: ``max_position_embeddings`` of the config classes whose public configs omit it (gemma-3's
#: ``text_config``). Source: transformers 4.57.1, ``Gemma3TextConfig.__init__``.
_CONTEXT_DEFAULTS = {"gemma3_text": 131_072}


def context_tokens(config: Mapping) -> int | None:
    """The context a config serves in tokens (vLLM's default ``max_model_len``); None: unstated.

    ``max_position_embeddings`` (the smallest of it and the other length fields vLLM reads,
    ``_LENGTH_FIELDS``; a ``model_max_length`` over them), times a ``rope_scaling``
    (transformers 5: ``rope_parameters``, one per layer type where nested) factor for the
    scaling types vLLM extends the context by (linear, dynamic; YaRN from its
    ``original_max_position_embeddings``), as vLLM's ``_get_and_verify_max_len`` does; Llama 3's
    and LongRoPE's already include it, and so does Gemma 3's (vLLM skips the factor for gemma3
    model types). A config that omits the field takes
    its class default where capnb knows it (``_CONTEXT_DEFAULTS``).
    """
    config, model_type, length = _positions(config)
    length = _served_length(config, length)
    if length is None:
        return None
    scalings = config.get("rope_scaling") or config.get("rope_parameters")  # transformers 4 / 5
    if not isinstance(scalings, Mapping) or "gemma3" in model_type:
        return int(length)
    if not {"rope_type", "type"} & scalings.keys():  # transformers 5: one per layer type
        scalings = {k: v for k, v in scalings.items() if isinstance(v, Mapping)}
    else:
        scalings = {"": scalings}
    extended = length
    for scaling in scalings.values():
        kind = scaling.get("rope_type", scaling.get("type"))
        factor = scaling.get("factor")
        if kind not in _ROPE_KEEPS_LENGTH and isinstance(factor, int | float) and factor > 1:
            original = scaling.get("original_max_position_embeddings")
            if kind == "yarn" and isinstance(original, int | float) and original > 0:
                extended = original * factor  # vLLM: YaRN extends the pre-training length
            else:
                extended = length * factor
    return int(extended)


#: The length fields vLLM's ``_get_and_verify_max_len`` reads beside max_position_embeddings
#: (GPT-2, MPT, ChatGLM, Whisper and others); it takes the smallest, and a ``model_max_length``
#: (Command-R, Aya Vision) over them all.
_LENGTH_FIELDS = ("n_positions", "max_seq_len", "seq_length", "max_target_positions",
                  "max_sequence_length", "max_seq_length", "seq_len")  # fmt: skip


def _served_length(config: Mapping, length: int | float | None) -> int | float | None:
    """The length vLLM serves before rope scaling: ``length`` and the other fields it reads."""

    def stated(value: object) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and value > 0

    if stated(config.get("model_max_length")):
        return config["model_max_length"]
    found = [config[k] for k in _LENGTH_FIELDS if stated(config.get(k))]
    found += [length] if length is not None else []
    return min(found) if found else None


def _positions(config: Mapping) -> tuple[Mapping, str, int | float | None]:
    """(the language model's config, its model_type, its ``max_position_embeddings``).

    A multimodal config's text model where the outer one states no length; the class default
    where the config omits it (``_CONTEXT_DEFAULTS``); None where none is stated or it is no
    positive number.
    """
    text = _nested_text(config)[1]
    if config.get("max_position_embeddings") is None and isinstance(text, Mapping):
        config = text  # a multimodal config's language model
    model_type = str(config.get("model_type", "")).lower()
    length = config.get("max_position_embeddings", _CONTEXT_DEFAULTS.get(model_type))
    if isinstance(length, bool) or not isinstance(length, int | float) or length <= 0:
        length = None
    return config, model_type, length


def rope_cache_positions(config: Mapping) -> int:
    """Rows of vLLM's rotary cos/sin caches for a config in tokens, summed over its embeddings.

    ``max_position_embeddings`` (the class default where the config omits it), times the factor
    for linear and dynamic scaling (``linear_scaling_rope.py``, ``dynamic_ntk_scaling_rope.py``),
    ``original_max_position_embeddings`` times the factor for YaRN (``yarn_scaling_rope.py``,
    ``deepseek_scaling_rope.py``). Gemma 3's layers carry two embeddings (vLLM's ``gemma3.py``:
    the local layers' default one beside the config's global one); a transformers 5
    ``rope_parameters`` per layer type gives one each. 0 where no length is stated.
    """
    config, model_type, length = _positions(config)
    if length is None:
        return 0
    scalings = config.get("rope_scaling") or config.get("rope_parameters") or {}
    if not isinstance(scalings, Mapping):
        scalings = {}
    if scalings and not {"rope_type", "type"} & scalings.keys():  # one per layer type
        embeddings = [v for v in scalings.values() if isinstance(v, Mapping)]
    else:
        embeddings = [scalings] + ([{}] if "gemma3" in model_type else [])
    rows = 0
    for scaling in embeddings:
        kind, factor = scaling.get("rope_type", scaling.get("type")), scaling.get("factor")
        original = scaling.get("original_max_position_embeddings")
        if not isinstance(factor, int | float) or isinstance(factor, bool) or factor <= 1:
            rows += int(length)
        elif kind in ("linear", "dynamic"):
            rows += int(length * factor)
        elif kind in ("yarn", "deepseek_yarn") and isinstance(original, int | float):
            rows += int(original * factor)
        else:
            rows += int(length)
    return rows


def _extra_norms(model_type: str, hidden: int, head_dim: int) -> int:
    """Norm weights per layer beyond the two hidden-size norms every decoder layer has.

    transformers 4.57.1: ``Gemma2DecoderLayer`` and ``Gemma3DecoderLayer`` have four RMSNorms
    (``input_layernorm``, ``post_attention_layernorm``, ``pre_feedforward_layernorm``,
    ``post_feedforward_layernorm``); ``Gemma3Attention`` adds ``q_norm`` and ``k_norm``, each
    ``head_dim`` wide.
    """
    if model_type == "gemma2":
        return 2 * hidden
    if model_type == "gemma3_text":
        return 2 * hidden + 2 * head_dim
    return 0


_DEEPSEEK_KEYS = (
    "n_routed_experts", "num_experts_per_tok", "n_shared_experts", "moe_intermediate_size",
    "first_k_dense_replace", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
)  # fmt: skip
#: Keys each architecture needs, which transformers' config class would otherwise fill with its
#: own default - and capnb would then plan another model: Mixtral without ``num_local_experts``
#: reads as a dense 7 B model, DeepSeek-V3 without ``kv_lora_rank`` as full K and V (25x the KV
#: bytes). Source: transformers 4.57.1, ``configuration_<type>.py`` (the fields each class
#: defaults); the DeepSeek, Kimi and Qwen-MoE layouts as :func:`parse` reads them.
_REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "mixtral": ("num_local_experts", "num_experts_per_tok"),
    "phimoe": ("num_local_experts", "num_experts_per_tok"),
    "granitemoe": ("num_local_experts", "num_experts_per_tok"),
    "gpt_oss": ("num_local_experts", "num_experts_per_tok"),
    "llama4_text": ("num_local_experts", "num_experts_per_tok"),
    "olmoe": ("num_experts", "num_experts_per_tok"),
    "qwen3_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size"),
    "qwen2_moe": (
        "num_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "shared_expert_intermediate_size",
    ),
    **dict.fromkeys(["deepseek_v2", "deepseek_v3", "kimi_k2"], _DEEPSEEK_KEYS),
}
_EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")


#: Fields of hybrid models whose other layers are not attention (linear attention, Mamba): they
#: keep a fixed recurrent state, not a KV cache per token, which capnb does not model. Qwen3-Next
#: (``full_attention_interval``, ``linear_num_value_heads``), Nemotron-H
#: (``hybrid_override_pattern``; transformers 5: ``mamba_num_heads``), Jamba
#: (``attn_layer_period``), Mamba state sizes, Kimi-Linear (``linear_attn_config``: its KDA
#: layers beside the MLA ones; vLLM's ``KimiLinearConfig.is_kda_layer`` reads it).
_HYBRID_KEYS = (
    "full_attention_interval", "linear_num_value_heads", "hybrid_override_pattern",
    "attn_layer_period", "mamba_d_state", "mamba_num_heads", "linear_attn_config",
)  # fmt: skip
#: ``layer_types`` kinds capnb plans: attention with a KV cache (windowed or chunked).
_ATTENTION_KINDS = {"full_attention", "sliding_attention", "chunked_attention"}
#: ``layers_block_type`` kinds (Nemotron-H in transformers 5: one block a layer) other than a
#: recurrent one: an attention block, or an MLP or MoE block beside it.
_BLOCK_KINDS = {"attention", "mlp", "moe"}
#: Fields listing each layer's kind, with the kinds capnb plans: besides the two above,
#: RecurrentGemma's ``block_types`` (a cycle of "recurrent" and "attention" blocks) and
#: MiniMax's ``attn_type_list`` (one a layer: 0 lightning attention, a linear attention with a
#: fixed state; 1 softmax attention; MiniMax-M2 lists 1 on every layer).
_KIND_FIELDS = (
    ("layer_types", _ATTENTION_KINDS), ("layers_block_type", _BLOCK_KINDS),
    ("block_types", {"attention"}), ("attn_type_list", {1}),
)  # fmt: skip


def _check_attention_only(config: Mapping, source: str) -> None:
    """A ConfigError for a hybrid model: capnb counts a KV cache on every layer it plans."""
    other, field_ = [], "layer_types"
    for field_, allowed in _KIND_FIELDS:
        kinds = config.get(field_)
        kinds = kinds if isinstance(kinds, list) else []
        other = [k for k in kinds if not (type(k) in (str, int) and k in allowed)]
        if other:
            break
    key = next((k for k in _HYBRID_KEYS if config.get(k) is not None), None)
    if not other and key is None:
        return
    what = f"field {field_!r} lists {other[0]!r} layers" if other else f"field {key!r}"
    raise ConfigError(
        f"{source}: {what}: a hybrid model whose non-attention layers (linear attention, "
        "Mamba) keep a fixed recurrent state instead of a KV cache per token; capnb plans "
        "attention-only models and would count K and V on every layer"
    )


def _check_no_cross_attention(config: Mapping, layers: object, source: str) -> None:
    """A ConfigError for a model whose layers cross-attend: an encoder-decoder, or Mllama.

    transformers' ``MllamaTextConfig.cross_attention_layers``: those layers hold the K and V of
    the image's tokens, fixed per request, not a text token's; capnb counts every layer per token.
    """
    if config.get("is_encoder_decoder") is True:
        raise ConfigError(
            f"{source}: field 'is_encoder_decoder' is true: an encoder-decoder model (T5, BART, "
            "Whisper) whose decoder cross-attends to the encoder's output; capnb plans "
            "decoder-only models, whose K and V grow per token on every layer"
        )
    cross = config.get("cross_attention_layers")
    if not cross:
        return
    count = len(cross) if isinstance(cross, list) else cross
    of = f" of {layers}" if isinstance(layers, int) and not isinstance(layers, bool) else ""
    raise ConfigError(
        f"{source}: field 'cross_attention_layers' = {cross!r}: {count}{of} layers "
        "cross-attend to an image and hold its K and V, not a text token's; capnb counts K and "
        "V per token on every layer and would plan another KV cache than the model holds"
    )


#: Attention-free models: a state-space model's ``state_size`` (transformers' ``MambaConfig``,
#: ``Mamba2Config``, ``FalconMambaConfig``), and the recurrent model types with no such field.
_ATTENTION_FREE_KEY = "state_size"
_ATTENTION_FREE_TYPES = {
    "mamba",
    "mamba2",
    "falcon_mamba",
    "rwkv",
    "rwkv5",
    "rwkv6",
    "rwkv7",
    "xlstm",
}


def _check_not_attention_free(config: Mapping, model_type: str, source: str) -> None:
    """A ConfigError for a model with no attention layer (a state-space or recurrent model).

    Its ``num_heads`` are SSM heads, not attention heads: read as attention, they would be a KV
    cache the model does not hold.
    """
    if config.get(_ATTENTION_FREE_KEY) is not None:
        what = f"field {_ATTENTION_FREE_KEY!r} (a state-space model's state)"
    elif model_type in _ATTENTION_FREE_TYPES:
        what = f"model_type {model_type!r}"
    else:
        return
    raise ConfigError(
        f"{source}: {what}: an attention-free model (Mamba, RWKV) keeps a fixed recurrent state "
        "and no KV cache per token; capnb plans models whose layers attend, with a KV cache"
    )


#: Fields that give some layers a head shape of their own, with the field shared by the others:
#: Gemma 4's full-attention layers (``global_head_dim``, ``num_global_key_value_heads``), MiMo-V2's
#: sliding-window layers (``swa_head_dim``, ``swa_num_key_value_heads``). capnb counts one head
#: width and one KV-head count on every layer, so where they differ it would plan another KV cache.
_PER_KIND_HEAD_KEYS = {
    "global_head_dim": "head_dim",
    "num_global_key_value_heads": "num_key_value_heads",
    "swa_head_dim": "head_dim",
    "swa_num_key_value_heads": "num_key_value_heads",
}


#: Fields that give each layer a shape of its own: Nemotron-NAS / DeciLM's ``block_configs``
#: (per layer its KV heads, MLP width, or no attention at all), DeciLM-7B's
#: ``num_key_value_heads_per_layer``.
_PER_LAYER_SHAPE_KEYS = ("block_configs", "num_key_value_heads_per_layer")


def _check_one_head_shape(config: Mapping, source: str) -> None:
    """A ConfigError for a model whose layers differ in head width or KV heads, or share K and V.

    Sharing: Gemma 3n's last ``num_kv_shared_layers`` layers, and every ``cla_share_factor``-th
    layer's K and V shared by the ones after it where Hunyuan's ``use_cla`` is true.
    """
    for key in _PER_LAYER_SHAPE_KEYS:
        listed = config.get(key)
        if isinstance(listed, list) and listed:
            raise ConfigError(
                f"{source}: field {key!r} gives each of {len(listed)} layers a shape of its own "
                "(KV heads, MLP width, or no attention: Nemotron-NAS, DeciLM); capnb counts one "
                "head width and KV-head count on every layer and would plan another KV cache "
                "than the model holds"
            )
    shared_kv = [("num_kv_shared_layers", config.get("num_kv_shared_layers"))]
    if config.get("use_cla") is True:  # Hunyuan's cross-layer attention
        shared_kv.append(("cla_share_factor", config.get("cla_share_factor", 2)))
    for key, value in shared_kv:
        if isinstance(value, numbers.Real) and value > (1 if key == "cla_share_factor" else 0):
            raise ConfigError(
                f"{source}: field {key!r} = {value!r}: some layers reuse another layer's K and "
                "V and hold no KV cache of their own (Gemma 3n, Hunyuan's cross-layer "
                "attention); capnb counts K and V per token on every layer and would plan "
                "another KV cache than the model holds"
            )
    for key, shared in _PER_KIND_HEAD_KEYS.items():
        if config.get(key) is None or config.get(key) == config.get(shared):
            continue
        raise ConfigError(
            f"{source}: field {key!r} = {config[key]!r} beside {shared!r} = "
            f"{config.get(shared)!r}: some layers have a head shape of their own; capnb counts "
            "one head width and KV-head count on every layer and would plan another KV cache "
            "than the model holds"
        )


def _check_architecture(config: Mapping, model_type: str, source: str) -> None:
    """The keys the architecture needs are there, or a ConfigError naming the first missing one.

    Beyond the families in ``_REQUIRED_KEYS``: a config that routes tokens to experts
    (``num_experts_per_tok``) names how many experts there are, and one with MLA's decoupled
    rope/nope head sizes names its latent rank (``kv_lora_rank``); experts named only where capnb
    does not read them (``moe_num_experts``: ERNIE 4.5; DBRX's ``ffn_config``) are refused, not
    planned as a dense model.
    """
    for key in _REQUIRED_KEYS.get(model_type, ()):
        if config.get(key) is None:
            kind = "MLA" if key.startswith(("kv_lora", "qk_", "v_head")) else "mixture-of-experts"
            raise ConfigError(
                f"{source}: missing field {key!r}, which a {model_type} ({kind}) config needs; "
                "capnb does not fill it with transformers' class default (that would plan "
                "another model): copy it from the model's config.json"
            )
    ffn = config.get("ffn_config")  # DBRX nests its experts there
    unread = {"moe_num_experts": config.get("moe_num_experts"),
              "ffn_config.moe_num_experts": ffn.get("moe_num_experts")
              if isinstance(ffn, Mapping) else None}  # fmt: skip
    for where, count in unread.items():
        if count and not any(config.get(k) for k in _EXPERT_KEYS):
            raise ConfigError(
                f"{source}: field {where!r} = {count!r} names experts in a layout capnb does not "
                f"read (ERNIE 4.5, DBRX): it would plan a dense model, without them; capnb reads "
                f"{' or '.join(map(repr, _EXPERT_KEYS))} with 'num_experts_per_tok', "
                "'moe_intermediate_size' and 'n_shared_experts'"
            )
    if config.get("num_experts_per_tok") and not any(config.get(k) for k in _EXPERT_KEYS):
        raise ConfigError(
            f"{source}: field 'num_experts_per_tok' routes tokens to experts, but no field names "
            f"how many experts there are ({' or '.join(map(repr, _EXPERT_KEYS))})"
        )
    mla = [k for k in ("qk_rope_head_dim", "qk_nope_head_dim") if config.get(k) is not None]
    if mla and config.get("kv_lora_rank") is None:
        raise ConfigError(
            f"{source}: field {mla[0]!r} is MLA's (multi-head latent attention), but field "
            "'kv_lora_rank' (the latent rank, what the KV cache holds) is missing"
        )


#: Boolean config fields that change what is counted (KV heads, windowed layers, biases): JSON
#: writes them true or false, and text such as "false" would read as true.
_FLAGS = (
    "multi_query", "multi_query_attention", "new_decoder_architecture", "use_sliding_window",
    "qkv_bias",
)  # fmt: skip


def _check_flags(config: Mapping, source: str) -> None:
    """Each of ``_FLAGS`` the config gives is true or false (or null); else a ConfigError."""
    for key in _FLAGS:
        value = config.get(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{source}: field {key!r} must be true or false, got {value!r}")


def _check_context(config: Mapping, source: str) -> None:
    """The context's fields, where given, are numbers: text read as "no context stated".

    :func:`context_tokens` gives None for a context it cannot read, which skips the check of
    requests past it and leaves the engine model's ``max_model_len`` at its default.
    """
    if config.get("max_position_embeddings") is not None:
        _positive_int(config["max_position_embeddings"], "max_position_embeddings", source)
    for key in ("rope_scaling", "rope_parameters"):
        scaling = config.get(key)
        if not isinstance(scaling, Mapping):
            continue
        nested = [(f"{key}.{k}", v) for k, v in scaling.items() if isinstance(v, Mapping)]
        for where, entry in [(key, scaling), *nested]:
            factor = entry.get("factor")
            if factor is not None and (
                isinstance(factor, bool) or not isinstance(factor, numbers.Real)
            ):
                raise ConfigError(
                    f"{source}: field '{where}.factor' must be a number, got {factor!r}"
                )


#: Largest size any config field may give (2**31 - 1), and the most layers capnb plans: the
#: parsing and the memory step loop over layers; the deepest catalog model has 126.
_MAX_FIELD = 2**31 - 1
_MAX_LAYERS = 4096


def _get(config: Mapping, what: str, source: str, *, required: bool = True) -> int | None:
    for key in _KEYS[what]:
        if config.get(key) is not None:
            value = _positive_int(config[key], key, source)
            if what == "layers" and value > _MAX_LAYERS:
                raise ConfigError(
                    f"{source}: field {key!r} = {value:,}: capnb plans models of at most "
                    f"{_MAX_LAYERS:,} layers (the deepest in its catalog has 126); is it the "
                    "right field?"
                )
            return value
    if required:
        names = " or ".join(repr(k) for k in _KEYS[what])
        raise ConfigError(f"{source}: missing field {names} (the model's {what.replace('_', ' ')})")
    return None


def _positive_int(value: object, key: str, source: str, *, allow_zero: bool = False) -> int:
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:  # NaN and inf are not whole numbers either
        raise ConfigError(f"{source}: field {key!r} must be an integer, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{source}: field {key!r} must be positive, got {value!r}")
    if value > _MAX_FIELD:
        raise ConfigError(
            f"{source}: field {key!r} = {value:,} is above {_MAX_FIELD:,}, larger than any model "
            "capnb plans; is it the right field?"
        )
    return int(value)


def _optional_int(config: Mapping, key: str, source: str) -> int:
    value = config.get(key)
    return 0 if value is None else _positive_int(value, key, source, allow_zero=True)


#: NVIDIA ModelOpt's ``quant_algo`` values capnb reads, with the weights' width: vLLM's
#: ``ModelOptFp8Config`` (per-tensor scales) and ``ModelOptNvFp4Config`` (4-bit floats with an
#: fp8 scale per ``group_size`` weights, 16 by default; ``modelopt.py``).
_MODELOPT_ALGOS = {"FP8": "fp8", "NVFP4": "int4"}
#: Block size of NVFP4 when a ModelOpt config does not give ``group_size``.
_NVFP4_GROUP = 16


def _weight_dtype(config: Mapping, torch_dtype: str, source: str) -> str:
    quant = config.get("quantization_config")
    if not quant:
        return torch_dtype
    if not isinstance(quant, Mapping):
        raise ConfigError(f"{source}: field 'quantization_config' must be a mapping, got {quant!r}")
    method = str(quant.get("quant_method", "")).lower()
    if method in {"fp8", "fbgemm_fp8"}:
        return "fp8"
    if method in {"awq", "gptq", "hqq", "quark", "bitblas", "marlin"} or "bits" in quant:
        bits = quant.get("bits", quant.get("w_bit"))
        if bits in (4, 8):
            return "int4" if bits == 4 else "int8"
    if method == "bitsandbytes":
        if quant.get("load_in_4bit"):
            return "int4"
        if quant.get("load_in_8bit"):
            return "int8"
    if method == "mxfp4":
        return "int4"
    if method == "modelopt":
        algo = str(quant.get("quant_algo", ""))
        if algo.upper() in _MODELOPT_ALGOS:
            return _MODELOPT_ALGOS[algo.upper()]
        raise ConfigError(
            f"{source}: field 'quantization_config' has quant_method 'modelopt' with "
            f"quant_algo={algo!r}, whose weight width capnb does not read (it reads "
            f"{', '.join(_MODELOPT_ALGOS)}); to plan the checkpoint, write its weight width in "
            'the config\'s quantization_config as capnb reads it: {"quant_method": "fp8"} for '
            '8-bit float weights, {"bits": 8} or {"bits": 4} for integer ones'
        )
    if method == "compressed-tensors":
        groups = _weight_schemes(quant, source)
        bits = {weights.get("num_bits") for weights in groups.values()}
        if bits == {8}:
            return "fp8" if "float" in str(quant.get("config_groups")).lower() else "int8"
        if bits == {4}:
            return "int4"
    raise ConfigError(
        f"{source}: field 'quantization_config' has quant_method={method!r} with no weight width "
        "capnb can read (it reads fp8, fbgemm_fp8, mxfp4, modelopt, bitsandbytes, "
        "compressed-tensors, and "
        "awq, gptq and others with 'bits' 4 or 8); to plan the checkpoint, write its weight width "
        'in the config\'s quantization_config as capnb reads it: {"quant_method": "fp8"} for '
        '8-bit float weights, {"bits": 8} or {"bits": 4} for integer ones'
    )


def _modelopt_layout(config: Mapping) -> Mapping:
    """``config`` with a ModelOpt ``quantization_config`` in the layout capnb reads.

    ModelOpt names itself as the ``producer`` and may give no ``quant_method``; its
    ``hf_quant_config.json`` (ModelOpt 0.29 and before) holds the algorithm, group size and
    excluded modules under ``quantization``. vLLM's ``_parse_quant_hf_config`` sets quant_method
    "modelopt" from the producer; the nested fields are lifted to the top, as inline configs
    (ModelOpt 0.31 on) write them.
    """
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping) or quant.get("quant_method"):
        return config
    producer = quant.get("producer")
    if not isinstance(producer, Mapping) or str(producer.get("name", "")).lower() != "modelopt":
        return config
    nested = quant.get("quantization")
    lifted = {**quant, **(nested if isinstance(nested, Mapping) else {})}
    return {**config, "quantization_config": {**lifted, "quant_method": "modelopt"}}


def _scale_bytes(config: Mapping, weight_dtype: str, source: str) -> float:
    """Bytes of block scales (and zeros) per quantized weight, from ``quantization_config``.

    MXFP4 (gpt-oss): one 8-bit scale per 32 weights. FP8 with ``weight_block_size`` (DeepSeek-V3,
    Qwen3's FP8 releases): an fp32 ``weight_scale_inv`` per block of rows x columns weights (4
    bytes per 128 x 128; a partial block at a weight's edge is not counted), as vLLM holds them
    (``create_fp8_scale_parameter``), and so for compressed-tensors' fp8 ``"block"`` schemes.
    AWQ and GPTQ: per ``group_size`` weights of an output column, a 16-bit scale and a zero
    packed at the weight width (AutoAWQ's ``qzeros`` with ``zero_point``, the default; GPTQ
    stores ``qzeros`` even when symmetric). GPTQ's ``g_idx`` (4 bytes per input row of a layer,
    about 0.03 % of the weights) is not counted. A group size
    of -1 (one scale per output column) is negligible and counted as 0. compressed-tensors
    (llm-compressor's w4a16/w8a16): per ``group_size`` weights of a ``"group"`` strategy a 16-bit
    ``weight_scale`` (NVFP4's ``"tensor_group"``: an fp8 one), and a zero point packed at the
    weight width unless ``symmetric``; the largest of its ``config_groups``. bitsandbytes 4-bit
    (nf4, fp4): an fp32 absmax per block of 64 weights (``Params4bit``'s blocksize); with
    ``bnb_4bit_use_double_quant`` an 8-bit absmax plus an fp32 scale per 256 of them.
    """
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping):
        return 0.0
    method = str(quant.get("quant_method", "")).lower()
    if method == "mxfp4":
        return 1.0 / 32.0
    if method == "modelopt" and weight_dtype == "int4":  # NVFP4: an fp8 scale per group
        group = quant.get("group_size", _NVFP4_GROUP)
        return 1.0 / _positive_int(group, "quantization_config.group_size", source)
    fp8_blocks = method == "fp8" and quant.get("weight_block_size") is not None
    if fp8_blocks or (method == "compressed-tensors" and weight_dtype == "fp8"):
        rows, columns = _weight_group(config, weight_dtype, source)  # an fp32 scale per block
        return 4.0 / (rows * columns) if rows and columns else 0.0
    if method == "bitsandbytes" and weight_dtype == "int4":
        return (1.0 + 4.0 / 256.0) / 64.0 if quant.get("bnb_4bit_use_double_quant") else 4.0 / 64.0
    if method == "compressed-tensors" and weight_dtype in {"int4", "int8"}:
        return max(_group_scale_bytes(quant, weight_dtype, source), default=0.0)
    if method not in {"awq", "gptq"} or weight_dtype not in {"int4", "int8"}:
        return 0.0
    key = "group_size" if quant.get("group_size") is not None else "q_group_size"
    group = quant.get(key)
    if group is None or group == -1:
        return 0.0
    group = _positive_int(group, f"quantization_config.{key}", source)
    zero = DTYPE_BYTES[weight_dtype] if method == "gptq" or quant.get("zero_point", True) else 0.0
    return (2.0 + zero) / group


def _weight_group(config: Mapping, weight_dtype: str, source: str) -> tuple[int, int]:
    """The (output rows, input columns) sharing a scale: FP8 blocks, AWQ/GPTQ groups (0, 0: none).

    compressed-tensors: the least common multiple of its grouped schemes' (:func:`_group_sizes`).
    """
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping):
        return (0, 0)
    method = str(quant.get("quant_method", "")).lower()
    block = quant.get("weight_block_size")
    if method == "fp8" and block is not None:
        if not isinstance(block, (list, tuple)) or len(block) != 2:
            raise ConfigError(
                f"{source}: field 'quantization_config.weight_block_size' must be two integers "
                f"(output rows, input columns), got {block!r}"
            )
        key = "quantization_config.weight_block_size"
        return (_positive_int(block[0], key, source), _positive_int(block[1], key, source))
    if method == "compressed-tensors":
        groups = [group for _, group in _group_sizes(quant, weight_dtype, source)]
        if not groups:  # (math.lcm() of nothing is 1)
            return (0, 0)
        return (math.lcm(*(g[0] for g in groups)), math.lcm(*(g[1] for g in groups)))
    if method not in {"awq", "gptq"} or weight_dtype not in {"int4", "int8"}:
        return (0, 0)
    key = "group_size" if quant.get("group_size") is not None else "q_group_size"
    group = quant.get(key)
    if group is None or group == -1:
        return (0, 0)
    return (0, _positive_int(group, f"quantization_config.{key}", source))


def _group_sizes(quant: Mapping, weight_dtype: str, source: str) -> list[tuple[str, tuple]]:
    """(field, (output rows, input columns)) of each grouped scheme of a compressed-tensors config.

    Integer weights in ``"group"`` schemes (``(0, group_size)``): vLLM's ``CompressedTensorsWNA16``
    refuses a tensor-parallel shard of a row-parallel weight that is not whole groups
    (``verify_marlin_supports_shape``: "Weight input_size_per_partition = ... is not divisible by
    group_size"), as for AWQ/GPTQ. FP8 weights in ``"block"`` schemes (``block_structure``):
    ``CompressedTensorsW8A8Fp8`` runs ``validate_fp8_block_shape`` as the fp8 method does.
    """
    found = []
    for name, weights in _weight_schemes(quant, source).items():
        strategy, where = (
            weights.get("strategy"),
            f"quantization_config.config_groups.{name}.weights",
        )
        if strategy == "group" and weight_dtype in {"int4", "int8"}:
            key = f"{where}.group_size"
            found.append((key, (0, _positive_int(weights.get("group_size"), key, source))))
        elif strategy == "block" and weight_dtype == "fp8":
            key, block = f"{where}.block_structure", weights.get("block_structure")
            if not isinstance(block, (list, tuple)) or len(block) != 2:
                raise ConfigError(
                    f"{source}: field {key!r} must be two integers (output rows, input columns), "
                    f"got {block!r}"
                )
            found.append((key, tuple(_positive_int(b, key, source) for b in block)))
    return found


def _weight_schemes(quant: Mapping, source: str) -> dict[str, Mapping]:
    """The ``weights`` scheme of each group of a compressed-tensors config, by group name.

    A group without one (``"weights": null``: its weights are not quantized) is left out; a
    list of groups, or a group or scheme that is not a mapping, is a ConfigError naming it.
    """
    groups = quant.get("config_groups") or {}
    where = "quantization_config.config_groups"
    if not isinstance(groups, Mapping):
        raise ConfigError(
            f"{source}: field {where!r} must be a mapping of group names to schemes, got {groups!r}"
        )
    schemes = {}
    for name, group in groups.items():
        if not isinstance(group, Mapping):
            raise ConfigError(f"{source}: field '{where}.{name}' must be a mapping, got {group!r}")
        weights = group.get("weights")
        if weights is not None and not isinstance(weights, Mapping):
            raise ConfigError(
                f"{source}: field '{where}.{name}.weights' must be a mapping (num_bits, type, "
                f"strategy, ...) or null, got {weights!r}"
            )
        if weights is not None:
            schemes[name] = weights
    return schemes


def _group_scale_bytes(quant: Mapping, weight_dtype: str, source: str):
    """Scale (and zero) bytes per weight of each grouped scheme in a compressed-tensors config."""
    for name, weights in _weight_schemes(quant, source).items():
        strategy = weights.get("strategy")
        if strategy not in ("group", "tensor_group"):
            continue
        key = f"quantization_config.config_groups.{name}.weights.group_size"
        size = _positive_int(weights.get("group_size"), key, source)
        zero = 0.0 if weights.get("symmetric", True) else DTYPE_BYTES[weight_dtype]
        scale = 1.0 if strategy == "tensor_group" else 2.0  # NVFP4: an fp8 scale per group
        yield (scale + zero) / size


def _text_model(config: Mapping, source: str, notes: list[str]) -> Mapping:
    """The text model's config: its nested one (plus the outer fields it lacks) or ``config``."""
    key, text = _nested_text(config)
    if not key:
        return config
    if not isinstance(text, Mapping):
        raise ConfigError(f"{source}: field {key!r} must be a mapping, got {text!r}")
    merged = {k: config[k] for k in _INHERITED if config.get(k) is not None}
    # an explicit null window is kept: it says "no window" where the class default has one
    merged |= {k: v for k, v in text.items() if v is not None or k == "sliding_window"}
    merged.setdefault("model_type", config.get("model_type", ""))
    notes.append(
        f"the text model is read from {key} (model_type {merged['model_type']!r}) of the "
        f"{config.get('model_type', 'multimodal')!r} config"
    )
    kind = str(merged["model_type"]).lower()
    missing = {k: v for k, v in _NESTED_DEFAULTS.get(kind, {}).items() if merged.get(k) is None}
    if missing:
        given = ", ".join(f"{k}={v:,}" for k, v in missing.items())
        notes.append(
            f"fields the {key} omits take transformers' {_NESTED_CLASS_NAMES[kind]} "
            f"defaults, as it writes a nested config without them: {given}"
        )
    return merged | missing


def _class_defaults(config: Mapping, model_type: str, notes: list[str]) -> Mapping:
    defaults = _CLASS_DEFAULTS.get(model_type, {})
    missing = {k: v for k, v in defaults.items() if config.get(k) is None}
    if not missing:
        return config
    given = ", ".join(f"{k}={v:,}" for k, v in missing.items())
    notes.append(
        f"fields the config omits take transformers' {_CLASS_NAMES[model_type]} defaults: {given}"
    )
    return {**config, **missing}


def _kv_heads(config: Mapping, model_type: str, heads: int, source: str) -> tuple[int, str]:
    """(KV heads, the field they were read from): each family's own keys and conventions."""

    def first(*keys: str) -> tuple[int, str] | None:
        for key in keys:
            if config.get(key) is not None:
                return _positive_int(config[key], key, source), key
        return None

    if model_type in _FALCON:
        # transformers' FalconAttention: num_kv_heads if new_decoder_architecture or not
        # multi_query, else 1; FalconConfig defaults multi_query to true and num_kv_heads (formerly
        # n_head_kv) to num_attention_heads
        if config.get("new_decoder_architecture") or not config.get("multi_query", True):
            return first("num_kv_heads", "n_head_kv", "num_key_value_heads") or (heads, "")
        return 1, "multi_query"
    if model_type == "chatglm":
        # THUDM's modeling_chatglm.py: multi_query_group_num KV groups under multi_query_attention
        if not config.get("multi_query_attention"):
            return heads, ""
        found = first("multi_query_group_num")
        if found is None:
            raise ConfigError(
                f"{source}: field 'multi_query_attention' is true but 'multi_query_group_num' "
                "(the number of KV heads) is missing"
            )
        return found
    attn = config.get("attn_config")
    if model_type == "mpt" and isinstance(attn, Mapping) and attn.get("kv_n_heads") is not None:
        # vLLM's MPTAttention: attn_config.kv_n_heads where given (grouped-query), else multi-head
        key = "attn_config.kv_n_heads"
        return _positive_int(attn["kv_n_heads"], key, source), key
    if model_type == "gpt_bigcode":  # GPTBigCodeConfig: multi_query defaults to true
        return (1, "multi_query") if config.get("multi_query", True) else (heads, "")
    found = first("num_key_value_heads", "num_kv_heads", "n_head_kv")
    if found is not None:
        return found
    if config.get("multi_query"):
        return 1, "multi_query"
    if model_type in _MHA_WHEN_ABSENT:
        return heads, ""
    raise ConfigError(
        f"{source}: cannot tell the number of KV heads: no field 'num_key_value_heads' (nor "
        f"'num_kv_heads', 'n_head_kv', 'multi_query'), and model_type {model_type or None!r} is "
        'not a family known to use one KV head per attention head; add "num_key_value_heads" '
        f"to the config (= num_attention_heads, {heads}, for multi-head attention)"
    )


def _tied(config: Mapping, model_type: str, source: str, notes: list[str]) -> bool:
    if "tie_word_embeddings" in config:
        tied = config["tie_word_embeddings"]
        if not isinstance(tied, bool):  # JSON has true/false; "false" would read as true
            raise ConfigError(
                f"{source}: field 'tie_word_embeddings' must be true or false, got {tied!r}"
            )
        return tied
    if model_type in _TIE_DEFAULTS:
        return _TIE_DEFAULTS[model_type]
    notes.append(
        f"no field 'tie_word_embeddings' and model_type {model_type or None!r} is not in capnb's "
        "table of transformers defaults: assumed untied (an LM head of its own, the larger weight "
        "count; transformers' generic PretrainedConfig default would tie them)"
    )
    return False


def _served_dtype(config: Mapping, model_type: str, source: str, notes: list[str]) -> str:
    # the field given, whatever its value ("" or 0 is refused, not read as absent); newer
    # transformers write 'dtype' instead of 'torch_dtype'
    field = "torch_dtype" if config.get("torch_dtype") is not None else "dtype"
    declared = config.get(field)
    if declared is None:
        notes.append("no field 'torch_dtype': bf16 assumed for weights and KV cache")
        return "bf16"
    dtype = _canonical_dtype(declared, f"{source}: field {field!r}")
    if DTYPE_BYTES[dtype] < 2:
        # vLLM's dtype 'auto' (_resolve_auto_dtype in vllm/config/model.py) serves a torch_dtype
        # its platform does not list (CUDA: bfloat16, float16, float32) in the platform's first
        # one, bfloat16, with the warning "Your device ... doesn't support ...  Falling back to";
        # the KV cache (kv_cache_dtype 'auto') follows. Quantized weights come from
        # quantization_config only.
        notes.append(
            f"{field} {declared}: planned in bf16 (2 bytes per weight and KV value), as "
            "vLLM's dtype 'auto' falls back to bfloat16 for a dtype it does not serve models "
            "in; for fp8 weights the config needs a quantization_config (such as "
            '{"quant_method": "fp8"}), or pass weight_dtype and kv_dtype'
        )
        return "bf16"
    if dtype != "fp32":
        return dtype
    # vLLM's engine arguments: '--dtype "auto" will use FP16 precision for FP32 and FP16 models,
    # and BF16 precision for BF16 models' (https://docs.vllm.ai/en/v0.8.3/serving/engine_args.html;
    # newer releases downcast float32 to the platform's first supported 16-bit dtype, and never to
    # float16 for the model types in _FP16_UNSUPPORTED). Either way 2 bytes per value.
    served = "bf16" if model_type in _FP16_UNSUPPORTED else "fp16"
    notes.append(
        f"torch_dtype float32: planned in {served} (2 bytes per weight and KV value), as vLLM's "
        "dtype 'auto' serves float32 checkpoints; pass weight_dtype='fp32' and kv_dtype='fp32' to "
        "plan float32 serving"
    )
    return served


# -- sliding windows ------------------------------------------------------------------------------
class _Window(NamedTuple):
    """How transformers windows a model type's layers when its config names no ``layer_types``."""

    config_class: str  # named in the notes
    layers: str  # "all": every layer; "pattern": all but every pattern-th; "after": i >= first
    window: int | None  # the class's sliding_window default
    pattern: int = 0  # the class's sliding_window_pattern default ("pattern")
    reads_pattern: bool = False  # a config's sliding_window_pattern overrides it
    first: int = 0  # the class's max_window_layers default ("after")
    gated: bool = False  # the window applies only with use_sliding_window (default false)
    reads_layer_types: bool = True  # the model honours a config's layer_types


#: Source: transformers 4.57.1, ``models/<type>/configuration_<type>.py`` (defaults, the
#: ``layer_types`` a class fills in when the config has none) and ``modeling_<type>.py`` (which
#: layers the window reaches):
#: - mistral, mixtral, phi3, phimoe, starcoder2: the attention passes
#:   ``sliding_window=getattr(self.config, "sliding_window", None)`` in every layer; MistralConfig
#:   defaults the window to 4096 (its docstring: "Sliding window attention window size"), the
#:   others to None; MistralConfig warns that a ``layer_types`` is ignored.
#: - gemma2 (``Gemma2Config``) and gpt_oss (``GptOssConfig``): ``layer_types`` default
#:   ``"sliding_attention" if bool((i + 1) % 2)``: layers 0, 2, 4, ... windowed; window 4096 and 128.
#: - gemma3_text and cohere2: the same with ``sliding_window_pattern`` (default 6 and 4, "the
#:   pattern used to be a simple int, and it's still present in configs on the Hub"): every
#:   pattern-th layer attends fully; window 4096. The attention of each reads
#:   ``config.sliding_window if config.layer_types[layer_idx] == "sliding_attention" else None``.
#: - qwen2, qwen3, qwen2_vl(_text), qwen2_5_vl(_text): ``sliding_window`` is set to None unless
#:   ``use_sliding_window`` (default false); ``layer_types`` default: layer i windowed when
#:   ``i >= max_window_layers`` (default 28; 80 for the VL text configs).
#: - qwen2_moe: the same rule in ``Qwen2MoeAttention.forward`` (no ``layer_types``).
#: - qwen3_moe: ``sliding_window`` None unless ``use_sliding_window``; then every layer
#:   (``Qwen3MoeAttention``: ``self.sliding_window = getattr(config, "sliding_window", None)``).
#: - qwen2_5_omni_text (``Qwen2_5OmniTextConfig``, Qwen2.5-Omni's thinker): the qwen2 rule with
#:   window 32768 and ``max_window_layers`` 28.
#: A type outside the table whose config sets ``use_sliding_window`` false has no window (every
#: transformers config with that field sets the window to None without it).
_WINDOWS: dict[str, _Window] = {
    "mistral": _Window("MistralConfig", "all", 4096, reads_layer_types=False),
    "mixtral": _Window("MixtralConfig", "all", None, reads_layer_types=False),
    "phi3": _Window("Phi3Config", "all", None, reads_layer_types=False),
    "phimoe": _Window("PhimoeConfig", "all", None, reads_layer_types=False),
    "starcoder2": _Window("Starcoder2Config", "all", None, reads_layer_types=False),
    "gemma2": _Window("Gemma2Config", "pattern", 4096, pattern=2),
    "gpt_oss": _Window("GptOssConfig", "pattern", 128, pattern=2),
    "gemma3_text": _Window("Gemma3TextConfig", "pattern", 4096, pattern=6, reads_pattern=True),
    "cohere2": _Window("Cohere2Config", "pattern", 4096, pattern=4, reads_pattern=True),
    "qwen2": _Window("Qwen2Config", "after", 4096, first=28, gated=True),
    "qwen3": _Window("Qwen3Config", "after", 4096, first=28, gated=True),
    **dict.fromkeys(
        ["qwen2_vl", "qwen2_vl_text"],
        _Window("Qwen2VLTextConfig", "after", 4096, first=80, gated=True),
    ),
    **dict.fromkeys(
        ["qwen2_5_vl", "qwen2_5_vl_text"],
        _Window("Qwen2_5_VLTextConfig", "after", 4096, first=80, gated=True),
    ),
    "qwen2_moe": _Window(
        "Qwen2MoeConfig", "after", 4096, first=28, gated=True, reads_layer_types=False
    ),
    "qwen3_moe": _Window("Qwen3MoeConfig", "all", 4096, gated=True, reads_layer_types=False),
    "qwen2_5_omni_text": _Window("Qwen2_5OmniTextConfig", "after", 32768, first=28, gated=True),
}


def _layer_list(indices: list[int]) -> str:
    if len(indices) > 4 and len({b - a for a, b in itertools.pairwise(indices)}) > 1:
        # "0, 1, 2, ..., 33" would read as every layer between: say how many instead
        return f"{len(indices)} layers from {indices[0]} to {indices[-1]}"
    shown = [str(i) for i in indices[:3]]
    if len(indices) > 4:
        shown.append(f"..., {indices[-1]}")
    elif len(indices) == 4:
        shown.append(str(indices[-1]))
    return ", ".join(shown)


#: The sequence length (tokens) at which :func:`_window_note` states vLLM's hybrid gain (at least
#: four windows).
_NOTE_TOKENS = 8192


class KVGroups(NamedTuple):
    """How vLLM's hybrid KV cache manager (0.10 on) groups a model's attention layers.

    vLLM (``vllm/v1/core/kv_cache_utils.py``) splits the layers by attention kind into groups of
    ``size`` layers (the smaller kind's count, or the larger's when it is under 1.5 times the
    smaller; a kind's last group padded to ``size``); the groups share one pool of blocks, each
    block ``size`` layers' pages of ``block`` tokens. A sequence of ``T`` tokens holds
    ``ceil(T / block)`` blocks in each of the ``full`` groups and, in each of the ``windowed``
    groups, only the blocks its window spans: ``min(ceil(T / block), window_blocks)``. A model
    without windowed layers is one group of every layer (``full=1``): the full-length count.
    """

    size: int  #: layers per group
    full: int  #: groups of full-attention layers
    windowed: int  #: groups of sliding-window (or chunked) layers
    window_blocks: int  #: blocks a windowed group keeps of a sequence at most (0: none windowed)

    def blocks(self, tokens: int, block: int) -> int:
        """Blocks of the shared pool one sequence of ``tokens`` holds (``block`` tokens each)."""
        span = -(-tokens // block)
        return self.full * span + self.windowed * min(span, self.window_blocks)

    def shares(self, layers: int) -> tuple[float, float]:
        """(full, windowed) group layers over the model's layers: the memory kernels' weights."""
        return self.size * self.full / layers, self.size * self.windowed / layers


def kv_groups(layers: int, window: int, windowed: int, block: int = 16) -> KVGroups:
    """VLLM's grouping of ``layers`` attention layers, ``windowed`` of them over ``window`` tokens.

    See :class:`KVGroups`. A windowed group keeps ``ceil(window / block) + 1`` blocks: the window
    and the block the next token starts (vLLM frees the blocks wholly before the window).

    Examples
    --------
    >>> kv_groups(36, 128, 18)  # gpt-oss: 18 full and 18 windowed layers of 128 tokens
    KVGroups(size=18, full=1, windowed=1, window_blocks=9)
    >>> kv_groups(62, 1024, 52)  # Gemma 3 27B: 10 full layers, 52 windowed (six groups, padded)
    KVGroups(size=10, full=1, windowed=6, window_blocks=65)
    >>> kv_groups(32, 0, 0)  # no windowed layer: one group, the full-length count
    KVGroups(size=32, full=1, windowed=0, window_blocks=0)
    """
    full = layers - windowed
    if windowed == 0 or window <= 0:
        return KVGroups(layers, 1, 0, 0)
    kept = -(-window // block) + 1
    if full == 0:  # one kind of layer: one group, every layer windowed
        return KVGroups(layers, 0, 1, kept)
    size = min(full, windowed)
    if max(full, windowed) < 1.5 * size:
        size = max(full, windowed)
    return KVGroups(size, -(-full // size), -(-windowed // size), kept)


def hybrid_kv_gain(layers: int, window: int, windowed: int, tokens: int, block: int = 16) -> float:
    """The ratio of the sequences vLLM's hybrid KV cache manager holds to a full-length cache's.

    The hybrid pool (:func:`kv_groups`) holds ``size x blocks(tokens)`` layer pages a sequence,
    padding included; a full-length cache every layer's ``ceil(tokens / block)``.

    Parameters
    ----------
    layers, windowed
        The model's attention layers, and how many of them attend over a sliding window.
    window
        The window (tokens; 0: none).
    tokens
        Tokens of each sequence (prompt and output).
    block
        Tokens of a KV block (vLLM's ``block_size``).

    Returns
    -------
    float
        The ratio (1: no gain; the same memory, every page equal).

    Examples
    --------
    >>> round(hybrid_kv_gain(36, 128, 18, 8192), 2)  # gpt-oss: 18 full, 18 windowed layers of 128
    1.97
    >>> hybrid_kv_gain(32, 0, 0, 8192)  # no windowed layer
    1.0
    """
    groups = kv_groups(layers, window, windowed, block)
    return layers * -(-tokens // block) / (groups.size * groups.blocks(tokens, block))


def _window_note(
    layers: int, window: int, windowed: int, chunked: bool, context: int | None
) -> str:
    """What each count does with a model's windowed layers: kept to the window, or full length.

    The gain is stated at :data:`_NOTE_TOKENS` tokens (or four windows, if longer), or at the
    model's ``context`` (tokens) where that is shorter.
    """
    tokens, where = max(_NOTE_TOKENS, 4 * window), ""
    if context is not None and context < tokens:
        tokens, where = context, " (the model's context)"
    gain = hybrid_kv_gain(layers, window, windowed, tokens)
    kind, span = ("chunked-attention", "chunk") if chunked else ("sliding-window", "window")
    hybrid = (
        "capnb.memory's vllm accounting with vllm_version '0.19'"
        if chunked
        else "capnb.memory's vllm accounting (vllm_version '0.10' or '0.19') and the vllm-v1 engine"
    )
    full = (
        "vllm_version '0.10' and the vllm-v1 engine (vLLM 0.10.1 to 0.12 turn the manager off "
        "for chunked attention), "
        if chunked
        else ""
    )
    return (
        f"its {windowed} {kind} layers ({span} {window:,} tokens) keep only their {span} in "
        f"{hybrid}, as vLLM's hybrid KV cache manager does (about {gain:.2g}x the sequences of "
        f"a full-length cache at {tokens:,} tokens{where}); {full}the article accounting, the vllm "
        "accounting without vllm_version or with '0.6' or hybrid_kv=False, and the other engines "
        "(vllm-v0, sglang, tgi, trtllm) count them at full length, as vLLM before 0.10 (or with "
        "--disable-hybrid-kv-cache-manager) stores them"
    )


def _sliding_window(
    config: Mapping, model_type: str, layers: int, source: str, notes: list[str]
) -> tuple[int, int]:
    """(window, number of windowed layers), read as transformers reads the model type.

    A ``layer_types`` in the config is kept as given; without it, the windowed layers follow the
    type's rule in ``_WINDOWS``, and a default capnb applies is named in the notes. A window
    capnb cannot place (a type outside the table) is not applied, and the notes say so.
    """
    layer_types = config.get("layer_types")
    if layer_types is not None and (
        not isinstance(layer_types, list) or len(layer_types) != layers
    ):
        # transformers' layer_type_validation: one entry per layer
        raise ConfigError(
            f"{source}: field 'layer_types' must list one attention kind for each of the "
            f"{layers} layers, got {layer_types!r}"
        )
    if model_type == "llama4_text":
        return _chunked_attention(config, layers, source, notes)
    rule = _WINDOWS.get(model_type)
    declared = "sliding_window" in config
    value = config.get("sliding_window")
    if rule is None:
        if not value or config.get("use_sliding_window") is False:
            return 0, 0
        window = _positive_int(value, "sliding_window", source)
        if layer_types is None:
            notes.append(
                f"sliding_window {window:,} not applied: capnb does not know which layers a "
                f"model_type {model_type or None!r} model windows and the config has no "
                "'layer_types'; every layer is counted at full length"
            )
            return 0, 0
        windowed = sum(1 for kind in layer_types if kind == "sliding_attention")
        return (window, windowed) if windowed else (0, 0)

    assumed: list[str] = []
    if rule.gated and not config.get("use_sliding_window", False):
        if value and "use_sliding_window" not in config:
            notes.append(
                f"sliding_window {value} not applied: no field 'use_sliding_window', and "
                f"transformers' {rule.config_class} defaults it to false (no window)"
            )
        return 0, 0
    if not declared and rule.window:
        value = rule.window
        assumed.append(f"sliding_window {rule.window:,}")
    if not value:
        return 0, 0
    window = _positive_int(value, "sliding_window", source)
    if layer_types is not None:
        windowed = sum(1 for kind in layer_types if kind == "sliding_attention")
        if not rule.reads_layer_types:
            own = "every layer" if rule.layers == "all" else "the layers from max_window_layers on"
            notes.append(
                f"layer_types kept as given ({windowed} of {layers} layers windowed), though "
                f"transformers' {model_type} model ignores it and windows {own}"
            )
    else:
        if rule.layers == "all":
            indices = list(range(layers))
        elif rule.layers == "pattern":
            pattern = rule.pattern
            if rule.reads_pattern and config.get("sliding_window_pattern") is not None:
                pattern = _positive_int(
                    config["sliding_window_pattern"], "sliding_window_pattern", source
                )
            elif rule.reads_pattern:
                assumed.append(f"sliding_window_pattern {rule.pattern}")
            indices = [i for i in range(layers) if (i + 1) % pattern]
        else:
            first = rule.first
            if config.get("max_window_layers") is not None:
                first = _positive_int(
                    config["max_window_layers"], "max_window_layers", source, allow_zero=True
                )
            else:
                assumed.append(f"max_window_layers {rule.first}")
            indices = list(range(first, layers))
        windowed = len(indices)
        if rule.layers != "all":
            chosen = set(indices)
            full = [i for i in range(layers) if i not in chosen]
            assumed.append(
                f"layer_types: {windowed} of {layers} layers windowed ("
                + "; ".join(
                    f"{kind} {_layer_list(group)}"
                    for kind, group in (("windowed", indices), ("full attention", full))
                    if group
                )
                + ")"
            )
    if assumed:
        notes.append(
            f"fields the config omits take transformers' {rule.config_class} defaults: "
            + "; ".join(assumed)
        )
    return (window, windowed) if windowed else (0, 0)


def _within_context(
    window: int, windowed: int, context: int | None, notes: list[str]
) -> tuple[int, int]:
    """The window, or none when it spans the whole context (``context_tokens``).

    Phi-4-mini says 262,144 over 131,072 tokens of context: no sequence vLLM admits outgrows
    such a window, so its layers hold the whole sequence, as full-attention layers do.
    """
    if not windowed or context is None or window < context:
        return window, windowed
    notes.append(
        f"sliding_window {window:,} not applied: it spans the model's whole context "
        f"({context:,} tokens), so every layer holds the whole sequence"
    )
    return 0, 0


def _chunked_attention(
    config: Mapping, layers: int, source: str, notes: list[str]
) -> tuple[int, int]:
    """Llama 4's chunked local attention, as (window, windowed layers): a layer holds one chunk.

    transformers 4.57.1 ``Llama4TextConfig``: ``layer_types`` default ``"chunked_attention"`` on
    the layers of ``no_rope_layers`` (RoPE layers; default: all but every 4th), each attending
    within chunks of ``attention_chunk_size`` tokens; the others attend fully. A chunked layer
    keeps at most one chunk of K and V, counted as a window of that size (an upper bound).
    """
    chunk = config.get("attention_chunk_size")
    if chunk is None:
        return 0, 0
    chunk = _positive_int(chunk, "attention_chunk_size", source)
    layer_types = config.get("layer_types")
    rope = config.get("no_rope_layers")
    if layer_types is not None:
        chunked = [i for i, kind in enumerate(layer_types) if kind == "chunked_attention"]
    elif isinstance(rope, list) and rope:
        if len(rope) != layers:
            raise ConfigError(
                f"{source}: field 'no_rope_layers' must give one flag for each of the {layers} "
                f"layers, got {len(rope)}"
            )
        chunked = [i for i, flag in enumerate(rope) if flag]
    else:
        chunked = [i for i in range(layers) if (i + 1) % 4]
    full = [i for i in range(layers) if i not in set(chunked)]
    notes.append(
        f"chunked attention (attention_chunk_size {chunk:,}) on {len(chunked)} of {layers} layers "
        f"(full attention {_layer_list(full) or 'none'}): counted as a sliding window of "
        f"{chunk:,} tokens, the most a chunked layer holds"
    )
    return (chunk, len(chunked)) if chunked else (0, 0)


# -- vision towers --------------------------------------------------------------------------------
# Each counts the vision encoder and the projector into the text model, by the modules of
# transformers 4.57.1 (``modeling_<type>.py``), defaults from the vision config classes. Checked
# against the published totals of Qwen2-VL-7B-Instruct (8,291,375,616 with the text q/k/v biases),
# Qwen2.5-VL-7B-Instruct (8,292,166,656),
# gemma-3-12b-it (12,187,325,040 with its extra norms) and Mistral-Small-3.1-24B (24,011,361,280),
# and Llama-4-Scout's module by module (871,932,416 in its vision tower and projector).
def _vision_qwen2_vl(outer: Mapping, vision: Mapping, text_hidden: int, read, source) -> int:
    # Qwen2VisionTransformerPretrainedModel: Conv3d patch embedding (no bias); blocks of 2
    # LayerNorms, qkv and proj Linear (biased), fc1/fc2 MLP (biased); PatchMerger: LayerNorm and
    # two biased Linear layers from embed_dim x merge^2 to hidden_size
    embed, depth = read("embed_dim", 1280), read("depth", 32)
    channels = read("in_chans", read("in_channels", 3))
    patch, temporal = read("patch_size", 14), read("temporal_patch_size", 2)
    merged = embed * read("spatial_merge_size", 2) ** 2
    out = read("hidden_size", text_hidden)
    ratio = vision.get("mlp_ratio", 4)
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not ratio > 0:
        raise ConfigError(
            f"{source}: field 'vision_config.mlp_ratio' must be a positive number, got {ratio!r}"
        )
    mlp = int(embed * ratio)
    block = 4 * embed + (3 * embed * embed + 3 * embed) + (embed * embed + embed)
    block += (embed * mlp + mlp) + (mlp * embed + embed)
    merger = 2 * embed + (merged * merged + merged) + (merged * out + out)
    return channels * temporal * patch * patch * embed + depth * block + merger


def _vision_qwen2_5_vl(outer: Mapping, vision: Mapping, text_hidden: int, read, source) -> int:
    # Qwen2_5_VisionTransformerPretrainedModel: Conv3d patch embedding (no bias); blocks of 2
    # RMSNorms, qkv and proj Linear (biased) and a gated MLP intermediate_size wide (biased
    # gate, up and down); Qwen2_5_VLPatchMerger: an RMSNorm over the vision width and two biased
    # Linear layers from hidden_size x merge^2 to out_hidden_size (the text width)
    for key in ("depth", "hidden_size", "intermediate_size"):
        if vision.get(key) is None:
            raise ConfigError(
                f"{source}: missing field 'vision_config.{key}', which capnb needs to count a "
                "qwen2_5_vl vision tower"
            )
    width, depth, inner = read("hidden_size", 0), read("depth", 0), read("intermediate_size", 0)
    channels = read("in_chans", read("in_channels", 3))
    patch, temporal = read("patch_size", 14), read("temporal_patch_size", 2)
    merged = width * read("spatial_merge_size", 2) ** 2
    out = read("out_hidden_size", text_hidden)
    block = 2 * width + (3 * width * width + 3 * width) + (width * width + width)
    block += 2 * (width * inner + inner) + (inner * width + width)
    merger = width + (merged * merged + merged) + (merged * out + out)
    return channels * temporal * patch * patch * width + depth * block + merger


def _vision_gemma3(outer: Mapping, vision: Mapping, text_hidden: int, read, source) -> int:
    # SigLIP vision transformer without its pooling head (vision_use_head false): biased Conv2d
    # patch embedding, learned position embeddings, layers of 2 LayerNorms, 4 biased attention
    # Linear and a biased fc1/fc2 MLP, a post LayerNorm; Gemma3MultiModalProjector: a
    # vision x text projection matrix and an RMSNorm over the vision width
    h, inner, layers = (
        read("hidden_size", 768),
        read("intermediate_size", 3072),
        read("num_hidden_layers", 12),
    )
    patch, image = read("patch_size", 16), read("image_size", 224)
    embeddings = read("num_channels", 3) * patch * patch * h + h + (image // patch) ** 2 * h
    layer = 4 * h + 4 * (h * h + h) + (h * inner + inner) + (inner * h + h)
    return embeddings + layers * layer + 2 * h + (h * text_hidden + h)


def _vision_mistral3(outer: Mapping, vision: Mapping, text_hidden: int, read, source) -> int:
    # PixtralVisionModel: Conv2d patch embedding and Linear layers without bias, RMSNorms (ln_pre,
    # 2 per layer), a gated MLP; Mistral3MultiModalProjector: RMSNorm, the patch merger's Linear
    # (width x merge^2 -> width) and two Linear layers into the text width
    h, inner, layers = (
        read("hidden_size", 1024),
        read("intermediate_size", 4096),
        read("num_hidden_layers", 24),
    )
    tower = read("num_channels", 3) * read("patch_size", 16) ** 2 * h + h
    tower += layers * (2 * h + 4 * h * h + 3 * h * inner)
    merge = _positive_int(outer.get("spatial_merge_size", 2), "spatial_merge_size", source)
    feature = outer.get("vision_feature_layer", -1)
    feature_layers = len(feature) if isinstance(feature, list) and feature else 1
    bias = text_hidden if outer.get("multimodal_projector_bias", False) else 0
    projector = h + h * merge**2 * h
    projector += (h * feature_layers * text_hidden + bias) + (text_hidden * text_hidden + bias)
    return tower + projector


def _vision_llama4(outer: Mapping, vision: Mapping, text_hidden: int, read, source) -> int:
    # Llama4VisionModel: the unfold patch embedding's Linear (no bias), a class embedding and
    # learned position embeddings (patches + 1), LayerNorms before and after, layers of 2
    # LayerNorms, biased q/k/v/o and a biased fc1/fc2 MLP; the pixel-shuffle MLP (fc1 from the
    # intermediate width to projector_input_dim, fc2 projector_output_dim square, no bias);
    # Llama4MultiModalProjector: vision_output_dim x text width (biased with
    # multi_modal_projector_bias). Scout's published config: 871,932,416
    h, inner, layers = (
        read("hidden_size", 768),
        read("intermediate_size", 5632),
        read("num_hidden_layers", 34),
    )
    patch = read("patch_size", 14)
    patches = (read("image_size", 448) // patch) ** 2 + 1
    embeddings = read("num_channels", 3) * patch * patch * h + h + patches * h + 4 * h
    layer = 4 * h + 4 * (h * h + h) + (h * inner + inner) + (inner * h + h)
    adapter = inner * read("projector_input_dim", 4096) + read("projector_output_dim", 4096) ** 2
    bias = text_hidden if vision.get("multi_modal_projector_bias", False) is True else 0
    projector = read("vision_output_dim", 7680) * text_hidden + bias
    return embeddings + layers * layer + adapter + projector


#: Vision counters by the outer config's model_type.
_VISION_COUNTERS = {
    "qwen2_vl": _vision_qwen2_vl,
    "qwen2_5_vl": _vision_qwen2_5_vl,
    "gemma3": _vision_gemma3,
    "mistral3": _vision_mistral3,
    "llama4": _vision_llama4,
}


#: Fields holding encoders or adapters beside the text model that capnb does not count (vision
#: towers in ``vision_config`` are :func:`_vision_parameters`'): audio encoders (Qwen2-Audio),
#: Qwen2.5-Omni's thinker's towers, Phi-4-multimodal's image and audio encoders (``embd_layer``)
#: and its vision and speech LoRA adapters, Ovis's visual tokenizer.
_UNCOUNTED_TOWERS = ("audio_config", "thinker_config.vision_config", "thinker_config.audio_config",
                     "embd_layer", "vision_lora", "speech_lora", "visual_tokenizer_config")  # fmt: skip


def _uncounted_towers(outer: Mapping, notes: list[str]) -> None:
    """Name in the notes the fields of ``_UNCOUNTED_TOWERS`` a config has (weights not counted)."""
    found = []
    for where in _UNCOUNTED_TOWERS:
        value: object = outer
        for key in where.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
        if value:
            found.append(where)
    if found:
        kind = str(outer.get("model_type", "")).lower() or "model"
        notes.append(
            f"the encoders and adapters in {', '.join(found)} are not counted: capnb has no "
            f"checked formula for them in a {kind!r} config; their weights come on top of the "
            "figures here"
        )


def _vision_parameters(outer: Mapping, text_hidden: int, source: str, notes: list[str]) -> int:
    vision = outer.get("vision_config")
    if not vision:
        return 0
    if not isinstance(vision, Mapping):
        raise ConfigError(f"{source}: field 'vision_config' must be a mapping, got {vision!r}")
    kind = str(outer.get("model_type", "")).lower()
    counter = _VISION_COUNTERS.get(kind)
    if kind == "gemma3" and vision.get("vision_use_head", True) is not False:
        counter = None  # a SigLIP pooling head capnb does not count
    if counter is None:
        notes.append(
            f"the vision tower (vision_config, model_type {vision.get('model_type')!r}) is not "
            f"counted: capnb has no checked formula for it in a {kind or 'model'!r} config; its "
            "weights come on top of the figures here"
        )
        return 0

    def read(key: str, default: int) -> int:
        return _positive_int(vision.get(key, default), f"vision_config.{key}", source)

    count = counter(outer, vision, text_hidden, read, source)
    notes.append(
        f"the vision tower and projector (vision_config) are counted: {count:,} parameters, in "
        "the weights but not in active_parameters"
    )
    return count


def parse(config: Mapping, *, name: str | None = None, source: str | None = None) -> ModelSpec:
    """Read a Hugging Face ``config.json`` mapping into a :class:`ModelSpec`.

    A multimodal config's text model is read from its ``text_config`` or, as vLLM reads it,
    InternVL's ``llm_config``, DeepSeek-VL2's ``language_config`` or Qwen2.5-Omni's
    ``thinker_config.text_config`` (with the outer config's vocab_size, torch_dtype,
    quantization_config and tie_word_embeddings where it lacks them).
    Fields a config omits take the defaults of its transformers config class where capnb knows
    them; a float32 config is planned in 16 bits, as vLLM serves it. The spec's ``notes`` say
    what was assumed.

    Parameters
    ----------
    config
        The parsed JSON object.
    name
        Display name (default: ``_name_or_path`` or the model_type).
    source
        Where the mapping came from (a file path); error messages name it.

    Raises
    ------
    ConfigError
        A field is missing or has a value that cannot be read, or the number of KV heads cannot
        be told; the message names the field and the source.
    """
    source = source or "config"
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"{source}: a model config must be a JSON object, got {type(config).__name__}"
        )
    outer = config
    notes: list[str] = []
    config = _modelopt_layout(_text_model(outer, source, notes))
    model_type = str(config.get("model_type", "")).lower()
    _check_attention_only(config, source)
    _check_not_attention_free(config, model_type, source)
    _check_no_cross_attention(config, config.get("num_hidden_layers"), source)
    _check_one_head_shape(config, source)
    _check_architecture(config, model_type, source)
    _check_flags(config, source)
    for read in {id(c): c for c in (outer, config)}.values():
        _check_context(read, source)
    config = _class_defaults(config, model_type, notes)
    layers = _get(config, "layers", source)
    hidden = _get(config, "hidden_size", source)
    heads = _get(config, "attention_heads", source)
    vocab = _get(config, "vocab_size", source)
    head_dim = _head_dim(config, hidden, heads, source)
    torch_dtype = _served_dtype(config, model_type, source, notes)
    weight_dtype = _weight_dtype(config, torch_dtype, source)
    kv_heads, kv_key = _kv_heads(config, model_type, heads, source)
    if not kv_key and model_type in _KV_HEADS_FILLED and not config.get("kv_lora_rank"):
        notes.append(
            f"no field 'num_key_value_heads': {kv_heads} KV heads, one per attention head "
            f"(multi-head attention), as transformers' {_KV_HEADS_FILLED[model_type]} fills it in"
        )
    if heads % kv_heads:
        raise ConfigError(
            f"{source}: field {kv_key or 'num_key_value_heads'!r}={kv_heads} does not divide "
            f"{heads} attention heads"
        )
    gated = model_type not in _UNGATED
    intermediate = _intermediate_size(config, model_type, hidden, gated, source)
    moe = _experts(config, model_type, layers, intermediate, source)
    kv_lora, mla = _mla(config, source)
    sliding_window, sliding_layers = _sliding_window(config, model_type, layers, source, notes)
    sliding_window, sliding_layers = _within_context(
        sliding_window, sliding_layers, context_tokens(outer), notes
    )
    if sliding_layers:
        chunked = model_type == "llama4_text"  # (ModelSpec.chunked_attention)
        notes.append(
            _window_note(layers, sliding_window, sliding_layers, chunked, context_tokens(outer))
        )
    unquantized = _unquantized(config, layers, moe["moe_layers"], source)
    tied = _tied(config, model_type, source, notes)
    vision = _vision_parameters(outer, hidden, source, notes)
    _uncounted_towers(outer, notes)
    return ModelSpec(
        name=name or str(outer.get("_name_or_path") or outer.get("model_type") or "model"),
        source=source,
        model_type=model_type,
        layers=layers,
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=vocab,
        tied_embeddings=tied,
        gated_mlp=gated,
        weight_dtype=weight_dtype,
        torch_dtype=torch_dtype,
        **moe,
        kv_lora_rank=kv_lora,
        sliding_window=sliding_window,
        sliding_layers=sliding_layers,
        unquantized_attention=unquantized["attention"],
        unquantized_shared_experts=unquantized["shared_experts"],
        unquantized_dense_mlp=unquantized["dense_mlp"],
        weight_scale_bytes=_scale_bytes(config, weight_dtype, source),
        weight_group=_weight_group(config, weight_dtype, source),
        vision_parameters=vision,
        qkv_bias=model_type in _QKV_BIAS
        or (model_type == "qwen2_moe" and config.get("qkv_bias", True) is not False),
        extra_norm_parameters=_extra_norms(model_type, hidden, head_dim),
        config=dict(outer),
        notes=tuple(notes),
        **mla,
    )


def _head_dim(config: Mapping, hidden: int, heads: int, source: str) -> int:
    """The width of one attention head: the config's, else hidden_size / attention heads."""
    head_dim_key = next((k for k in ("head_dim", "kv_channels") if config.get(k) is not None), None)
    if head_dim_key is not None:  # kv_channels: ChatGLM's and Megatron's name
        return _positive_int(config[head_dim_key], head_dim_key, source)
    if hidden % heads:
        raise ConfigError(
            f"{source}: no field 'head_dim' and hidden_size {hidden} is not a multiple of "
            f"{heads} attention heads"
        )
    return hidden // heads


def _intermediate_size(config: Mapping, model_type: str, hidden: int, gated: bool, source: str):
    """The width of a dense layer's MLP."""
    if model_type == "llama4_text":  # its dense layers use intermediate_size_mlp (see _experts)
        return _positive_int(config["intermediate_size_mlp"], "intermediate_size_mlp", source)
    if config.get("intermediate_size") is not None:
        width = _positive_int(config["intermediate_size"], "intermediate_size", source)
        # Qwen (v1)'s intermediate_size is twice its MLP: modeling_qwen.py and vLLM's QWenMLP
        # build it intermediate_size // 2 wide
        return width // 2 if model_type == "qwen" else width
    if config.get("ffn_hidden_size") is not None:
        return _positive_int(config["ffn_hidden_size"], "ffn_hidden_size", source)
    if not gated:
        return 4 * hidden  # the GPT/BLOOM architecture fixes the MLP at 4 x hidden
    raise ConfigError(f"{source}: missing field 'intermediate_size' (the MLP width)")


def _experts(config: Mapping, model_type: str, layers: int, intermediate: int, source: str):
    """The mixture-of-experts fields of a :class:`ModelSpec` (experts 0 for a dense model)."""
    experts = 0
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):
        if config.get(key):
            experts = _positive_int(config[key], key, source)
            break
    experts_per_token = _optional_int(config, "num_experts_per_tok", source) if experts else 0
    if experts and not experts_per_token:
        raise ConfigError(
            f"{source}: a mixture-of-experts config needs field 'num_experts_per_tok'"
        )
    if experts_per_token > experts:
        raise ConfigError(
            f"{source}: field 'num_experts_per_tok' = {experts_per_token} exceeds the {experts} "
            "experts of the config (a token cannot use more experts than there are)"
        )
    moe_intermediate = _optional_int(config, "moe_intermediate_size", source)
    shared_key = (
        "num_shared_experts" if config.get("n_shared_experts") is None else "n_shared_experts"
    )
    shared = _optional_int(config, shared_key, source)  # num_shared_experts: Ling (bailing_moe)
    if config.get("shared_expert_intermediate_size"):
        # Qwen2-MoE style: one shared expert of its own width, counted in units of the expert width
        width = _positive_int(
            config["shared_expert_intermediate_size"], "shared_expert_intermediate_size", source
        )
        shared = width / (moe_intermediate or intermediate)
    if experts and model_type == "llama4_text":
        # transformers' Llama4TextMoe: routed experts and one shared expert, all intermediate_size wide
        moe_intermediate = _positive_int(config["intermediate_size"], "intermediate_size", source)
        shared = 1
    return {
        "experts": experts,
        "experts_per_token": experts_per_token,
        "shared_experts": shared,
        "moe_intermediate_size": moe_intermediate,
        "moe_layers": _moe_layers(config, model_type, layers, source) if experts else 0,
    }


def _moe_layers(config: Mapping, model_type: str, layers: int, source: str) -> int:
    """How many of the layers hold experts (the others are dense)."""
    if model_type == "llama4_text":
        # the layers of moe_layers (default: every interleave_moe_layer_step-th)
        step = _optional_int(config, "interleave_moe_layer_step", source) or 1
        listed = config.get("moe_layers")
        return (
            len({i for i in listed if isinstance(i, int)} & set(range(layers)))
            if isinstance(listed, list)
            else sum(1 for i in range(layers) if (i + 1) % step == 0)
        )
    dense_first = _optional_int(config, "first_k_dense_replace", source)
    step = 1
    for key in ("decoder_sparse_step", "moe_layer_freq"):  # transformers divides by it
        if config.get(key) is not None:
            step = _positive_int(config[key], key, source)
    listed = config.get("mlp_only_layers") or []
    if not isinstance(listed, list):
        raise ConfigError(
            f"{source}: field 'mlp_only_layers' must be a list of layer indices, got {listed!r}"
        )
    mlp_only = {_positive_int(i, "mlp_only_layers", source, allow_zero=True) for i in listed}
    return sum(
        1
        for i in range(layers)
        if i >= dense_first and i not in mlp_only and (i + 1 - dense_first) % step == 0
    )


def _mla(config: Mapping, source: str) -> tuple[int, dict]:
    """Multi-head latent attention: ``kv_lora_rank`` (0: none) and the head widths it needs."""
    kv_lora = _optional_int(config, "kv_lora_rank", source)
    mla = {}
    if kv_lora:
        for key in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if config.get(key) is None:
                raise ConfigError(f"{source}: an MLA config (kv_lora_rank set) needs field {key!r}")
            mla[key] = _positive_int(config[key], key, source)
        mla["q_lora_rank"] = _optional_int(config, "q_lora_rank", source)
        mla["index_head_dim"] = _optional_int(config, "index_head_dim", source)
    return kv_lora, mla


#: Where a quantization method lists the modules it leaves in ``torch_dtype`` (FP8: vLLM reads
#: ``ignored_layers``, else the ``modules_to_not_convert`` transformers writes).
_KEPT_MODULES = {
    "mxfp4": ("modules_to_not_convert",),
    "modelopt": ("ignore", "exclude_modules"),
    "compressed-tensors": ("ignore",),
    "fp8": ("ignored_layers", "modules_to_not_convert"),
}
#: Modules of each part capnb counts apart, in layer ``{}``, as DeepSeek-, Kimi- and Qwen-style
#: checkpoints name them: a listed module that matches one keeps that part of that layer in
#: torch_dtype.
_PART_MODULES = {
    "attention": ("model.layers.{}.self_attn.o_proj",),
    "shared_experts": (
        "model.layers.{}.mlp.shared_experts.down_proj",
        "model.layers.{}.mlp.shared_expert.down_proj",
    ),
    "dense_mlp": ("model.layers.{}.mlp.down_proj",),
}


def _unquantized(config: Mapping, layers: int, moe_layers: int, source: str) -> dict[str, int]:
    """How many layers' attention, shared experts and dense MLP stay in ``torch_dtype``.

    The dense layers are taken as the first ``layers - moe_layers``, as DeepSeek's
    ``first_k_dense_replace`` places them; the shared experts are on the others.

    compressed-tensors matches its ``ignore`` entries as vLLM does: a ``re:`` entry as a regular
    expression from the start of the module's name (``re.match``), another only as the whole name
    of one module (a projection's own, which is not read as a part). MXFP4, ModelOpt and FP8: an
    entry with ``*`` as a glob over the module's name or its parents, another as the module or a
    parent of it by its dotted name ("model.layers.0.mlp", "self_attn"), as transformers keeps
    them.
    """
    quant = config.get("quantization_config")
    method = str(quant.get("quant_method", "")).lower() if isinstance(quant, Mapping) else ""
    kept = [str(m) for key in _KEPT_MODULES.get(method, ()) for m in (quant.get(key) or [])]
    if method == "compressed-tensors":
        patterns = []
        for entry in (m for m in kept if m.startswith("re:")):
            try:
                patterns.append(re.compile(entry[3:]))
            except re.error as err:
                raise ConfigError(
                    f"{source}: field 'quantization_config.ignore' entry {entry!r} is not a "
                    f"regular expression ({err})"
                ) from None

        def matched(name: str) -> bool:
            return any(p.match(name) for p in patterns)
    else:

        def matched(name: str) -> bool:
            return any(
                fnmatch.fnmatchcase(name, m) or fnmatch.fnmatchcase(name, m + ".*")
                if "*" in m
                else f".{m}." in f".{name}."
                for m in kept
            )

    dense = layers - moe_layers
    indices = {
        "attention": range(layers),
        "shared_experts": range(dense, layers),
        "dense_mlp": range(dense),
    }
    return {
        part: sum(any(matched(n.format(i)) for n in names) for i in indices[part])
        for part, names in _PART_MODULES.items()
    }

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
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError, InputError

__all__ = ["DTYPE_BYTES", "ModelSpec", "dtype_bytes", "parse"]

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
    sliding_window: int = 0
    sliding_layers: int = 0
    unquantized_attention: bool = False
    weight_scale_bytes: float = 0.0
    config: Mapping = field(default_factory=dict, repr=False, compare=False)

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
        return q_and_out + k_and_v

    def _mlp_parameters(self, intermediate: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden_size * intermediate

    def _parameters(self, experts_used: int) -> int:
        h = self.hidden_size
        dense_layers = self.layers - self.moe_layers
        per_layer = self._attention_parameters() + 2 * h  # two norms per layer
        dense = dense_layers * self._mlp_parameters(self.intermediate_size)
        expert = self._mlp_parameters(self.moe_intermediate_size or self.intermediate_size)
        moe_layer = (experts_used + self.shared_experts) * expert + h * self.experts  # + router
        embeddings = self.vocab_size * h * (1 if self.tied_embeddings else 2)
        return round(self.layers * per_layer + dense + self.moe_layers * moe_layer + embeddings + h)

    @property
    def parameters(self) -> int:
        """Total parameter count (biases and the MTP head of DeepSeek-V3 are not counted)."""
        return self._parameters(self.experts)

    @property
    def active_parameters(self) -> int:
        """Parameters used per token: dense parts plus routed + shared experts."""
        return self._parameters(self.experts_per_token) if self.is_moe else self.parameters

    # -- bytes --------------------------------------------------------------------------------
    def weight_bytes(self, dtype: str | None = None) -> float:
        """Bytes of all weights in ``dtype`` (default: the config's weight dtype).

        When the weights are quantized below 16 bits, the embeddings and the LM head stay in the
        config's ``torch_dtype`` (as fp8 and int4 checkpoints ship them). In the checkpoint's own
        dtype, the modules its ``quantization_config`` leaves unconverted (attention and router,
        ``unquantized_attention``) stay in ``torch_dtype`` too, and block scales add
        ``weight_scale_bytes`` per quantized weight (MXFP4: one byte per 32).
        """
        weight_dtype = _canonical_dtype(dtype or self.weight_dtype, "weight_dtype")
        per_param = DTYPE_BYTES[weight_dtype]
        if per_param >= 2.0:
            return float(self.parameters * per_param)
        kept = self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)
        own = weight_dtype == self.weight_dtype
        if own and self.unquantized_attention:
            kept += self.layers * self._attention_parameters()
            kept += self.moe_layers * self.hidden_size * self.experts  # routers
        if own:
            per_param += self.weight_scale_bytes
        kept_bytes = kept * DTYPE_BYTES[self.torch_dtype]
        return float((self.parameters - kept) * per_param + kept_bytes)

    def kv_heads_per_rank(self, tensor_parallel: int = 1) -> int:
        """KV heads each tensor-parallel rank holds: split, or replicated when TP exceeds KV heads."""
        self.check_tensor_parallel(tensor_parallel)
        return max(1, self.kv_heads // tensor_parallel)

    def kv_bytes_per_token(self, kv_dtype: str = "auto", tensor_parallel: int = 1) -> float:
        """KV-cache bytes per token on one tensor-parallel rank.

        GQA/MHA/MQA: 2 (K and V) x layers x KV heads per rank x head_dim x bytes. MLA caches one
        compressed latent per layer, layers x (kv_lora_rank + qk_rope_head_dim) x bytes, replicated
        on every rank. ``kv_dtype="auto"`` uses the config's ``torch_dtype`` (as vLLM does).

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
            return float(self.layers * (self.kv_lora_rank + self.qk_rope_head_dim) * element)
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
        return None

    def check_tensor_parallel(self, tensor_parallel: int) -> None:
        """Raise :class:`InputError` when ``tensor_parallel`` cannot shard this model."""
        reason = self.valid_tensor_parallel(tensor_parallel)
        if reason:
            raise InputError(reason)


# -- parsing ------------------------------------------------------------------------------------
#: Config keys, first match wins: Hugging Face names, then the GPT-style names BLOOM and others use.
_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}
#: Model families whose MLP is up/down only (no gate) and 4 x hidden wide unless stated.
_UNGATED = {"bloom", "gpt2", "gpt_neox", "gptj", "opt", "falcon", "gpt_bigcode", "starcoder"}
#: Families whose configs omit tie_word_embeddings because the tie is part of the architecture.
_TIED_BY_DEFAULT = {"bloom", "gpt2", "gpt_bigcode", "falcon"}


def _get(config: Mapping, what: str, source: str, *, required: bool = True) -> int | None:
    for key in _KEYS[what]:
        if config.get(key) is not None:
            return _positive_int(config[key], key, source)
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
    return int(value)


def _optional_int(config: Mapping, key: str, source: str) -> int:
    value = config.get(key)
    return 0 if value is None else _positive_int(value, key, source, allow_zero=True)


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
    if method == "compressed-tensors":
        groups = quant.get("config_groups") or {}
        bits = {
            g.get("weights", {}).get("num_bits") for g in groups.values() if isinstance(g, Mapping)
        }
        if bits == {8}:
            return "fp8" if "float" in str(groups).lower() else "int8"
        if bits == {4}:
            return "int4"
    raise ConfigError(
        f"{source}: field 'quantization_config' has quant_method={method!r} with no weight width "
        "capnb can read; pass weight_dtype= explicitly (bf16, fp16, fp8, int8, int4)"
    )


def parse(config: Mapping, *, name: str | None = None, source: str | None = None) -> ModelSpec:
    """Read a Hugging Face ``config.json`` mapping into a :class:`ModelSpec`.

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
        A field is missing or has a value that cannot be read; the message names the field and the
        source.
    """
    source = source or "config"
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"{source}: a model config must be a JSON object, got {type(config).__name__}"
        )
    model_type = str(config.get("model_type", "")).lower()
    layers = _get(config, "layers", source)
    hidden = _get(config, "hidden_size", source)
    heads = _get(config, "attention_heads", source)
    vocab = _get(config, "vocab_size", source)
    if config.get("num_key_value_heads") is not None:
        kv_heads = _positive_int(config["num_key_value_heads"], "num_key_value_heads", source)
    elif config.get("multi_query"):
        kv_heads = 1
    else:  # Hugging Face's own default: no num_key_value_heads means one KV head per query head
        kv_heads = heads
    if config.get("head_dim") is not None:
        head_dim = _positive_int(config["head_dim"], "head_dim", source)
    elif hidden % heads:
        raise ConfigError(
            f"{source}: no field 'head_dim' and hidden_size {hidden} is not a multiple of "
            f"{heads} attention heads"
        )
    else:
        head_dim = hidden // heads
    if heads % kv_heads:
        raise ConfigError(
            f"{source}: field 'num_key_value_heads'={kv_heads} does not divide {heads} attention heads"
        )

    gated = model_type not in _UNGATED
    if config.get("intermediate_size") is not None:
        intermediate = _positive_int(config["intermediate_size"], "intermediate_size", source)
    elif config.get("ffn_hidden_size") is not None:
        intermediate = _positive_int(config["ffn_hidden_size"], "ffn_hidden_size", source)
    elif not gated:
        intermediate = 4 * hidden  # the GPT/BLOOM architecture fixes the MLP at 4 x hidden
    else:
        raise ConfigError(f"{source}: missing field 'intermediate_size' (the MLP width)")

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
    shared = _optional_int(config, "n_shared_experts", source)
    if config.get("shared_expert_intermediate_size"):
        # Qwen2-MoE style: one shared expert of its own width, counted in units of the expert width
        width = _positive_int(
            config["shared_expert_intermediate_size"], "shared_expert_intermediate_size", source
        )
        shared = width / (moe_intermediate or intermediate)
    moe_layers = 0
    if experts:
        dense_first = _optional_int(config, "first_k_dense_replace", source)
        step = _optional_int(config, "decoder_sparse_step", source) or 1
        step = _optional_int(config, "moe_layer_freq", source) or step
        mlp_only = set(config.get("mlp_only_layers") or [])
        moe_layers = sum(
            1
            for i in range(layers)
            if i >= dense_first and i not in mlp_only and (i + 1 - dense_first) % step == 0
        )

    kv_lora = _optional_int(config, "kv_lora_rank", source)
    mla = {}
    if kv_lora:
        for key in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if config.get(key) is None:
                raise ConfigError(f"{source}: an MLA config (kv_lora_rank set) needs field {key!r}")
            mla[key] = _positive_int(config[key], key, source)
        mla["q_lora_rank"] = _optional_int(config, "q_lora_rank", source)

    torch_dtype = _canonical_dtype(
        config.get("torch_dtype") or config.get("dtype") or "bfloat16",
        f"{source}: field 'torch_dtype'",
    )
    sliding_window, sliding_layers = 0, 0
    layer_types = config.get("layer_types")
    if config.get("sliding_window") and isinstance(layer_types, list):
        sliding_layers = sum(1 for kind in layer_types if kind == "sliding_attention")
        if sliding_layers:
            sliding_window = _positive_int(config["sliding_window"], "sliding_window", source)
    quant = config.get("quantization_config")
    mxfp4 = isinstance(quant, Mapping) and str(quant.get("quant_method", "")).lower() == "mxfp4"
    kept = " ".join(str(m) for m in (quant.get("modules_to_not_convert") or [])) if mxfp4 else ""
    if "tie_word_embeddings" in config:
        tied = config["tie_word_embeddings"]
        if not isinstance(tied, bool):  # JSON has true/false; "false" would read as true
            raise ConfigError(
                f"{source}: field 'tie_word_embeddings' must be true or false, got {tied!r}"
            )
    else:
        tied = model_type in _TIED_BY_DEFAULT
    return ModelSpec(
        name=name or str(config.get("_name_or_path") or model_type or "model"),
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
        weight_dtype=_weight_dtype(config, torch_dtype, source),
        torch_dtype=torch_dtype,
        experts=experts,
        experts_per_token=experts_per_token,
        shared_experts=shared,
        moe_intermediate_size=moe_intermediate,
        moe_layers=moe_layers,
        kv_lora_rank=kv_lora,
        sliding_window=sliding_window,
        sliding_layers=sliding_layers,
        unquantized_attention="self_attn" in kept,
        weight_scale_bytes=1.0 / 32.0 if mxfp4 else 0.0,
        config=dict(config),
        **mla,
    )

"""Serving engines as the engine model runs them: scheduling policy and limits, by release.

What differs between engines and releases is how a step is made (:mod:`capnb.kernels.engine`'s
``policy``: prefill chunks beside the decodes, or prefill-only steps first), whether a prompt may
be split over steps (chunked prefill), and the limits: running sequences (``max_num_seqs``) and
tokens per step (``max_num_batched_tokens``). :func:`engine_settings` gives each engine's defaults
as its release sets them; a run's own flags override them. The step-time *overheads* differ too;
they are fitted per engine (:mod:`capnb.latency._fit`), not set here.

Defaults (from the engines' argument parsers at the releases named):

- ``vllm-v1`` (vLLM 0.8 and later, the V1 engine): decode first with chunked prefill in the same
  step; ``max_num_batched_tokens`` 8,192 and ``max_num_seqs`` 1,024 on GPUs of 70 GiB or more other
  than the A100, 2,048 and 256 elsewhere (``vllm/engine/arg_utils.py``, ``get_batch_defaults``).
- ``vllm-v0`` (vLLM up to 0.7, the V0 engine): prefill-first steps without chunked prefill,
  ``max_num_batched_tokens = max(max_model_len, 2048)``, ``max_num_seqs`` 256; when
  ``max_model_len`` exceeds 32,768 (0.5.5 to 0.7) chunked prefill is on by default with a budget of
  512 tokens a step (``vllm/config.py``, ``SchedulerConfig``: "the values that have the best
  balance between ITL and TTFT on A100").
- ``sglang``: prefill-first steps (``--enable-mixed-chunk`` off), chunked prefill of 8,192 tokens
  (2,048 on GPUs under 25 GB), running requests ``min(KV tokens // 2, 2048)``
  (``server_args.py``; ``max_running_requests`` from ``max_total_num_tokens // 2``, capped by the
  request pool).
- ``tgi`` (text-generation-inference 2.x): prefill-first, whole prompts only, 4,096 prefill
  tokens a step (``max_batch_prefill_tokens``), running requests bounded by the KV cache.
- ``trtllm`` (TensorRT-LLM in-flight batching): context and generation in one step, 8,192 tokens
  a step (``max_num_tokens``), 256 running requests (``max_batch_size``).
- ``lmdeploy`` (TurboMind): prefill chunks beside the decodes, 8,192 tokens a step, 256 running
  requests (``max_batch_size``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ..errors import InputError

__all__ = ["ENGINES", "EngineSettings", "engine_id", "engine_settings"]

#: Engine ids the model knows, with their display names.
ENGINES = {
    "vllm-v1": "vLLM (V1 engine, 0.8 and later)",
    "vllm-v0": "vLLM (V0 engine, up to 0.7)",
    "sglang": "SGLang",
    "tgi": "Hugging Face text-generation-inference",
    "trtllm": "TensorRT-LLM",
    "lmdeploy": "LMDeploy TurboMind",
}
#: Name prefixes of the engines other than vLLM.
_NAMES = {
    "sglang": ("sglang",),
    "tgi": ("tgi", "text-generation"),
    "trtllm": ("trt", "tensorrt"),
    "lmdeploy": ("lmdeploy", "turbomind"),
}
#: vLLM's long-context rule: above this ``max_model_len`` V0 turns chunked prefill on by default.
V0_LONG_CONTEXT = 32768
#: GPU memory (bytes) from which vLLM V1 and SGLang take their larger defaults.
_LARGE_GPU = 70 * 2**30
_SGLANG_SMALL_GPU = 25e9


@dataclass(frozen=True)
class EngineSettings:
    """How the engine model schedules one serving engine (one record: they travel together).

    Attributes
    ----------
    engine
        Engine id (:data:`ENGINES`).
    policy
        ``"mixed"`` or ``"prefill_first"`` (:data:`capnb.kernels.engine.POLICIES`).
    chunked_prefill
        Whether a prompt may be split over steps.
    max_num_seqs
        Running sequences at most (requests); 0: bounded by the KV cache only.
    max_num_batched_tokens
        Tokens computed per step at most (tokens).
    block_size
        KV cache block (tokens).
    source
        Where each value comes from (defaults of a release, or the run's flags).
    """

    engine: str
    policy: str
    chunked_prefill: bool
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int = 16
    source: str = "defaults"

    def running_limit(self, kv_tokens: int) -> int:
        """Running sequences the engine allows with ``kv_tokens`` of KV cache (at least 1)."""
        if self.max_num_seqs > 0:
            return self.max_num_seqs
        return max(1, kv_tokens // self.block_size)


def engine_id(engine: str, version: str = "") -> str:
    """The engine model's id for an engine name and release (``"vllm", "0.6.3"`` -> ``vllm-v0``).

    Examples
    --------
    >>> engine_id("vLLM", "0.6.3.post2"), engine_id("vllm", "0.11.0"), engine_id("SGLang")
    ('vllm-v0', 'vllm-v1', 'sglang')
    """
    name = str(engine).strip().lower()
    if name in ENGINES:
        return name
    if name.startswith("vllm"):
        match = re.match(r"v?(\d+)\.(\d+)", str(version).strip())
        if match and (int(match[1]), int(match[2])) < (0, 8):
            return "vllm-v0"
        return "vllm-v1"
    for key, prefixes in _NAMES.items():
        if name.startswith(prefixes):
            return key
    raise InputError(f"engine: {engine!r} is not one of {sorted(ENGINES)} (nor a name of one)")


def engine_settings(engine: str = "vllm-v1", *, gpu_memory_bytes: float = math.inf,
                    gpu: str = "", max_model_len: int | None = None, kv_tokens: int | None = None,
                    **flags) -> EngineSettings:  # fmt: skip
    """An engine's scheduling settings: its release's defaults, then the run's ``flags``.

    Parameters
    ----------
    engine
        Engine id or name (:func:`engine_id`).
    gpu_memory_bytes, gpu
        The GPU's memory and catalog id (some defaults depend on them).
    max_model_len
        The server's context limit (tokens; vLLM V0's defaults depend on it). None: 8,192 or less.
    kv_tokens
        KV cache tokens (SGLang sizes its running-request limit from them).
    flags
        ``max_num_seqs``, ``max_num_batched_tokens``, ``chunked_prefill``, ``policy``,
        ``block_size``: the run's own values (None: the default).

    Examples
    --------
    >>> engine_settings("vllm", max_model_len=91680).max_num_batched_tokens
    Traceback (most recent call last):
    ...
    capnb.errors.InputError: engine: 'vllm' names no release; say 'vllm-v0' or 'vllm-v1'
    >>> s = engine_settings("vllm-v0", max_model_len=91680)
    >>> s.policy, s.chunked_prefill, s.max_num_batched_tokens
    ('mixed', True, 512)
    """
    if str(engine).strip().lower() == "vllm":
        raise InputError("engine: 'vllm' names no release; say 'vllm-v0' or 'vllm-v1'")
    key = engine_id(engine)
    large = gpu_memory_bytes >= _LARGE_GPU and not str(gpu).startswith("A100")
    length = int(max_model_len) if max_model_len else 0
    if key == "vllm-v1":
        base = EngineSettings(key, "mixed", True, 1024 if large else 256, 8192 if large else 2048,
                              source="vLLM V1 defaults (get_batch_defaults)")  # fmt: skip
    elif key == "vllm-v0":
        if length > V0_LONG_CONTEXT:
            base = EngineSettings(key, "mixed", True, 256, 512,
                                  source="vLLM V0 defaults, max_model_len > 32K: chunked prefill "
                                  "of 512 tokens")  # fmt: skip
        else:
            base = EngineSettings(key, "prefill_first", False, 256, max(length, 2048),
                                  source="vLLM V0 defaults (no chunked prefill)")  # fmt: skip
    elif key == "sglang":
        chunk = 8192 if gpu_memory_bytes >= _SGLANG_SMALL_GPU else 2048
        running = 2048 if kv_tokens is None else max(1, min(int(kv_tokens) // 2, 2048))
        base = EngineSettings(key, "prefill_first", True, running, chunk,
                              source="SGLang defaults (chunked prefill, running requests)")  # fmt: skip
    elif key == "tgi":
        base = EngineSettings(key, "prefill_first", False, 0, 4096,
                              source="TGI defaults (max_batch_prefill_tokens)")  # fmt: skip
    elif key == "trtllm":
        base = EngineSettings(key, "mixed", False, 256, 8192,
                              source="TensorRT-LLM defaults (max_batch_size, max_num_tokens)")  # fmt: skip
    else:
        base = EngineSettings(key, "mixed", True, 256, 8192,
                              source="LMDeploy TurboMind defaults (max_batch_size)")  # fmt: skip
    given = {k: v for k, v in flags.items() if v is not None}
    unknown = sorted(set(given) - {"max_num_seqs", "max_num_batched_tokens", "chunked_prefill",
                                   "policy", "block_size"})  # fmt: skip
    if unknown:
        raise InputError(f"engine_settings: unknown setting {unknown[0]!r}")
    if "policy" in given and given["policy"] not in ("mixed", "prefill_first"):
        raise InputError(f"policy must be 'mixed' or 'prefill_first', got {given['policy']!r}")
    for name in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
        if name in given:
            value = given[name]
            if isinstance(value, bool) or not float(value).is_integer() or int(value) < 0:
                raise InputError(f"{name} must be a whole number >= 0, got {value!r}")
            given[name] = int(value)
    if "chunked_prefill" in given:
        given["chunked_prefill"] = bool(given["chunked_prefill"])
    if given:
        base = replace(base, **given, source=f"{base.source}; given: {', '.join(sorted(given))}")
    return base

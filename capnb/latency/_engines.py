"""Serving engines as the engine model runs them: scheduling policy and limits, by release.

What differs between engines and releases is how a step is made (:mod:`capnb.kernels.engine`'s
``policy``: prefill chunks beside the decodes, or prefill-only steps first), whether a prompt may
be split over steps (chunked prefill), and the limits: running sequences (``max_num_seqs``) and
tokens per step (``max_num_batched_tokens``). :class:`capnb.records.EngineSettings` holds them
(:meth:`~capnb.records.EngineSettings.defaults`: each engine's defaults as its release sets them;
the fields given override them). The step-time *overheads* differ too;
they are fitted per engine (:mod:`capnb.latency._fit`), not set here.

Admission reserves (:data:`capnb.records.RESERVES`, :attr:`EngineSettings.reserve`): SGLang admits a
request only if its prompt and its ``max_new_tokens`` (clipped at 4,096) fit beside 0.7 of the
running requests' remaining ``max_new_tokens``, a ratio that falls over 600 decode steps to 0.098 and
starts again after a retraction or an idle spell; TensorRT-LLM (``GUARANTEED_NO_EVICT``) and TGI hold
every running request's whole remainder. vLLM and LMDeploy take blocks as tokens come and preempt
when they run out. A batch of more requests than the cache holds whole thus waits in the queue
on the reserving engines (their TTFT), where vLLM admits and later preempts.

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
  (2,048 on GPUs under 35 GiB, 16,384 from 160 GiB: B200, MI300X; the 0.5 line's tiers, which
  the v0.3 line drew at 25 GB without the top one), running requests ``min(KV tokens // 2, 2048)``
  (``server_args.py``; ``max_running_requests`` from ``max_total_num_tokens // 2``, capped by the
  request pool).
- ``tgi`` (text-generation-inference 2.x): prefill-first, whole prompts only, 4,096 prefill
  tokens a step (``max_batch_prefill_tokens``), running requests bounded by the KV cache; its
  router refuses requests past 128 in flight (``--max-concurrent-requests``): a curve says so.
- ``trtllm`` (TensorRT-LLM in-flight batching): context and generation in one step, 8,192 tokens
  a step (``max_num_tokens``), 256 running requests (``max_batch_size``).
- ``lmdeploy`` (TurboMind): prefill chunks beside the decodes, 8,192 tokens a step, 256 running
  requests (``max_batch_size``): later releases' ``TurbomindEngineConfig``
  (``lmdeploy/messages.py``: ``max_prefill_token_num`` 8,192 from v0.2.5; ``max_batch_size`` 256 on
  an A100 in v0.8.0's ``get_max_batch_size``). v0.1.0a1 scheduled otherwise: each iteration of
  ``LlamaBatch::InternalThreadEntry`` admits the waiting requests (up to ``max_batch_size``, KV
  permitting), prefills every one of them whole (``ContextDecode``: sub-batches of at most
  ``max_context_token_num`` tokens, run one after another; ``max_context_token_num`` at most
  ``max_batch_size`` is multiplied by ``session_len`` in ``LlamaTritonModel.cc``) and then runs the
  decode step that gives them their first token: mixed steps, no chunking, no token limit an
  iteration. The lmdeploy-a100 source's v0.1.0a1 runs say so in ``measured_runs.csv``.
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..records import ENGINES as _ENGINES
from ..records import EngineSettings, engine_id

#: Engine ids the engine model knows, with their display names (:data:`capnb.records.ENGINES`).
ENGINES = _ENGINES

__all__ = ["ENGINES", "EngineSettings", "engine_id", "engine_settings"]

_FLAGS = ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "policy", "block_size")


def engine_settings(engine: str = "vllm-v1", *, gpu_memory_bytes: float = math.inf,
                    gpu: str = "", max_model_len: int | None = None, kv_tokens: int | None = None,
                    **flags) -> EngineSettings:  # fmt: skip
    """An engine's scheduling settings, resolved: its release's defaults, then a run's ``flags``.

    What a benchmark run's flags say (``max_num_seqs``, ``max_num_batched_tokens``,
    ``chunked_prefill``, ``policy``, ``block_size``; None: the default) as one resolved
    :class:`~capnb.records.EngineSettings` on a GPU of ``gpu_memory_bytes`` bytes, for
    ``max_model_len`` and ``kv_tokens`` tokens.

    Examples
    --------
    >>> s = engine_settings("vllm-v0", max_model_len=91680)
    >>> s.policy, s.chunked_prefill, s.max_num_batched_tokens
    ('mixed', True, 512)
    """
    unknown = sorted(k for k, v in flags.items() if v is not None and k not in _FLAGS)
    if unknown:
        raise InputError(f"engine_settings: unknown setting {unknown[0]!r}")
    given = {k: v for k, v in flags.items() if v is not None}
    if "chunked_prefill" in given:  # run files say 0 / 1
        given["chunked_prefill"] = bool(given["chunked_prefill"])
    record = EngineSettings(engine, max_model_len=max_model_len, **given)
    return record.resolve(gpu=gpu, gpu_memory_bytes=gpu_memory_bytes, kv_tokens=kv_tokens)

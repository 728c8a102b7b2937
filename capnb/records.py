"""Settings that travel together, one typed record each.

:class:`Deployment` is what one instance runs: a model on a GPU at a tensor-parallel degree, with
its weight and KV cache dtypes (:func:`capnb.latency.engine`, :func:`capnb.capacity.pool_curves`,
:func:`capnb.capacity.pd_ratio`, :func:`capnb.capacity.disaggregate`,
:func:`capnb.memory.max_concurrency` and :func:`capnb.memory.sweep` take it).
:class:`EngineSettings` is how the serving engine schedules it: engine and release, scheduling
policy, chunked prefill, the limits of running sequences and tokens per step, KV block size and
context limit, each left None to take the engine's own default on the GPU.

:class:`SLA` is the latency a service promises: a quantile (P99 by default) of TTFT, TPOT, ITL and
E2E, each bound optional, all met together. The capacity step takes it
(:func:`capnb.capacity.safe_concurrency`, :func:`capnb.capacity.plan`, :func:`capnb.capacity.sweep`),
the plan config holds it in its ``[sla]`` table and the command line reads it from
``--sla ttft=1.5,tpot=60ms``.

A bound far outside what its metric plausibly is (a time per output token of seconds, a first
token in microseconds) is almost always a unit slip: it is an error naming the field and the unit
it expects, unless the record says ``confirm=True``.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field, fields, replace

import numpy as np

from . import words
from ._validate import MOST_COUNT
from .errors import InputError

__all__ = ["ENGINES", "PLAUSIBLE_S", "SLA", "Deployment", "EngineSettings", "engine_id"]

#: The latency metrics an SLA may bound, in the order they are listed.
METRICS = ("ttft", "tpot", "itl", "e2e")

#: What each metric means, for messages.
_MEANING = {
    "ttft": "time to first token",
    "tpot": "time per output token",
    "itl": "inter-token latency",
    "e2e": "end-to-end latency",
}

#: Plausible bounds per metric (seconds, inclusive): served LLMs measure TTFT in milliseconds to
#: minutes (long prompts queued), TPOT and ITL in milliseconds to about a second (a very large
#: model on slow GPUs), E2E in milliseconds to an hour (long generations).
PLAUSIBLE_S = {
    "ttft": (0.005, 600.0),
    "tpot": (0.001, 1.0),
    "itl": (0.001, 1.0),
    "e2e": (0.01, 3600.0),
}


def bound_fault(seconds: float, what: str = "a bound") -> str:
    """Why ``seconds`` (not finite, or <= 0) is no latency bound, in a few words.

    ``what``: the bound with its article (``"a bound"``, ``"an SLA"``).
    """
    if seconds <= 0:
        return f"{what} <= 0 can never be met"
    if math.isnan(seconds):
        return "not a number"
    return f"an infinite {what.split(' ', 1)[1]} bounds nothing"


@dataclass(frozen=True)
class SLA:
    """Latency bounds a plan meets together: a quantile of TTFT, TPOT, ITL and E2E.

    Parameters
    ----------
    ttft_s, tpot_s, itl_s, e2e_s
        Bounds in seconds (None: that metric is not bounded); at least one is given. TPOT and ITL
        are seconds per token (60 ms is ``0.06``).
    quantile
        The quantile of each metric the bounds hold for (0.99: P99), in (0, 1).
    confirm
        Accept bounds outside :data:`PLAUSIBLE_S` (which otherwise raise, as a likely unit slip).

    Examples
    --------
    >>> sla = SLA(ttft_s=1.5, tpot_s=0.06)
    >>> sla.bounds
    {'ttft': 1.5, 'tpot': 0.06}
    >>> str(sla)
    'P99 TTFT <= 1.5 s and P99 TPOT <= 60 ms'
    >>> SLA.parse("ttft=1.5,tpot=60ms,quantile=0.95") == SLA(ttft_s=1.5, tpot_s=0.06, quantile=0.95)
    True
    >>> SLA(tpot_s=60)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    capnb.errors.InputError: sla: tpot_s = 60: a P99 time per output token of 60 s is outside ...
    """

    ttft_s: float | None = None
    tpot_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None
    quantile: float = 0.99
    confirm: bool = False

    def __post_init__(self) -> None:
        for metric in METRICS:
            value = getattr(self, f"{metric}_s")
            if value is None:
                continue
            if not _real(value):  # a numpy number (np.float32 from an array) is a number too
                raise InputError(
                    f"sla: {metric}_s = {value!r}: expected seconds as a number (or none)"
                    + _write_for(value)
                )
            if not math.isfinite(value) or value <= 0:
                raise InputError(
                    f"sla: {metric}_s = {value!r}: expected a finite number of seconds > 0 "
                    f"({bound_fault(value)}"
                    + (": leave the metric out)" if value == math.inf else ")")
                )
            object.__setattr__(self, f"{metric}_s", float(value))
        if not self.bounds:
            raise InputError(
                "sla: give at least one bound in seconds: ttft_s, tpot_s, itl_s or e2e_s"
            )
        q = self.quantile
        if not _real(q) or not 0 < q < 1:
            raise InputError(f"sla: quantile = {q!r}: expected a share in (0, 1) (0.99 is P99)")
        object.__setattr__(self, "quantile", float(q))
        if not isinstance(self.confirm, bool):
            raise InputError(f"sla: confirm = {self.confirm!r}: expected true or false")
        if not self.confirm:
            for metric, value in self.bounds.items():
                low, high = PLAUSIBLE_S[metric]
                if not low <= value <= high:
                    raise InputError(self._implausible(metric, value, low, high))

    def _implausible(self, metric: str, value: float, low: float, high: float) -> str:
        per = " per token" if metric in ("tpot", "itl") else ""
        hint = (
            f": {words.latency(value / 1000)} is {value / 1000:g}"
            if value > high and low <= value / 1000 <= high
            else ""
        )
        return (
            f"sla: {metric}_s = {value:g}: a {self.name} {_MEANING[metric]} of {words.latency(value)} is "
            f"outside the plausible {words.latency(low)}-{words.latency(high)} ({metric}_s is in "
            f"seconds{per}{hint}); give confirm=True ([sla] confirm = true, --sla ...,confirm) "
            "to plan on it anyway"
        )

    @property
    def bounds(self) -> dict[str, float]:
        """The bounded metrics and their bounds (seconds), in the order ttft, tpot, itl, e2e."""
        return {m: getattr(self, f"{m}_s") for m in METRICS if getattr(self, f"{m}_s") is not None}

    @property
    def name(self) -> str:
        """The quantile's name: ``P99``, ``P99.9``, ``P50``."""
        return f"P{100 * self.quantile:g}"

    def bound_words(self, metric: str) -> str:
        """One bound in words: ``P99 TPOT <= 60 ms``."""
        return f"{self.name} {metric.upper()} <= {words.latency(self.bounds[metric])}"

    def __str__(self) -> str:
        return " and ".join(self.bound_words(m) for m in self.bounds)

    def as_dict(self) -> dict[str, object]:
        """The record as plain values (bounds not given are left out; confirm only when set)."""
        out: dict[str, object] = {f"{m}_s": v for m, v in self.bounds.items()}
        out["quantile"] = self.quantile
        if self.confirm:
            out["confirm"] = True
        return out

    @classmethod
    def from_mapping(cls, values: dict, *, where: str = "sla") -> SLA:
        """An SLA from a mapping of its fields (a config's ``[sla]`` table); unknown keys are errors."""
        if not isinstance(values, dict):
            raise InputError(f"{where}: the SLA is a table of bounds (ttft_s, tpot_s, ...)")
        known = [f.name for f in fields(cls)]
        unknown = [k for k in values if k not in known]
        if unknown:
            raise InputError(
                f"{where}: unknown SLA setting {unknown[0]!r}; known: {', '.join(known)}"
            )
        return cls(**values)

    @classmethod
    def parse(cls, text: str) -> SLA:
        """An SLA from ``metric=value`` pairs: ``"ttft=1.5,tpot=60ms,quantile=0.95,confirm"``.

        Values are seconds, or carry a unit (``s``, ``ms``, ``us``); ``confirm`` alone accepts
        implausible bounds.
        """
        values: dict[str, object] = {}
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            if part == "confirm":
                values["confirm"] = True
                continue
            key, sep, raw = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in (*METRICS, "quantile"):
                raise InputError(
                    f"--sla: {part!r}: expected metric=seconds with metric one of "
                    f"{', '.join(METRICS)} (or quantile=0.99, or confirm), e.g. ttft=1.5,tpot=60ms"
                )
            name = "quantile" if key == "quantile" else f"{key}_s"
            if name in values:  # as a config's setting given twice: not the last one silently
                raise InputError(f"--sla: {key} is given twice in {str(text)!r}; keep one")
            values[name] = _number(raw, part, key)
        return cls(**values)


def _real(value: object) -> bool:
    """A real number, numpy's too (np.float32, np.int64), and not true/false."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


#: Seconds as text: a number, with s, ms or us or none.
_SECONDS = re.compile(r"\s*([0-9.eE+-]+)\s*(s|ms|us)?\s*")


def _write_for(value: object) -> str:
    """For a bound given as text with a unit ("500 ms"), the number of seconds to write instead."""
    match = _SECONDS.fullmatch(value) if isinstance(value, str) else None
    try:
        seconds = float(match.group(1)) * _UNITS[match.group(2) or ""] if match else None
    except ValueError:
        return ""
    return "" if seconds is None else f", not text: write {seconds:g} for {value!r}"


def _number(raw: str, part: str, key: str) -> float:
    match = _SECONDS.fullmatch(raw)
    if match is None or (key == "quantile" and match.group(2)):
        raise InputError(
            f"--sla: {part!r}: expected a number"
            + ("" if key == "quantile" else " of seconds, or one with s, ms or us (60ms)")
        )
    try:
        value = float(match.group(1))
    except ValueError:
        raise InputError(f"--sla: {part!r}: {match.group(1)!r} is not a number") from None
    return value * _UNITS[match.group(2) or ""]


# -- the serving engine ----------------------------------------------------------------------------
#: Engine ids the engine model knows, with their display names.
ENGINES = {
    "vllm-v1": "vLLM (V1 engine, 0.8 and later)",
    "vllm-v0": "vLLM (V0 engine, up to 0.7)",
    "sglang": "SGLang",
    "tgi": "Hugging Face text-generation-inference",
    "trtllm": "TensorRT-LLM",
    "lmdeploy": "LMDeploy TurboMind",
}
#: Name prefixes of the engines other than vLLM.
_ENGINE_NAMES = {
    "sglang": ("sglang",),
    "tgi": ("tgi", "text-generation"),
    "trtllm": ("trt", "tensorrt"),
    "lmdeploy": ("lmdeploy", "turbomind"),
}
#: The scheduling policies of :mod:`capnb.kernels.engine` (``POLICIES``).
SCHEDULING_POLICIES = ("mixed", "prefill_first")
#: vLLM's long-context rule: above this ``max_model_len`` (tokens) V0 turns chunked prefill on.
V0_LONG_CONTEXT = 32768
#: GPU memory (bytes) from which vLLM V1 takes its larger defaults; SGLang's chunked-prefill tiers
#: (bytes): 2,048 tokens under 35 GiB, 8,192 under 160 GiB, 16,384 from 160 GiB (B200, MI300X).
_LARGE_GPU = 70 * 2**30
_SGLANG_SMALL_GPU = 35 * 2**30
_SGLANG_LARGE_GPU = 160 * 2**30
#: KV cache block (tokens): vLLM's default, and the engine model's for every engine.
BLOCK_SIZE = 16
#: The vLLM release whose KV cache accounting (:data:`capnb.memory.accounting`'s ``vllm_version``)
#: sizes the serving-engine model's KV cache, and a serve command's ``--max-model-len``.
VLLM_VERSION = "0.10"


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
    for key, prefixes in _ENGINE_NAMES.items():
        if name.startswith(prefixes):
            return key
    raise InputError(f"engine: {engine!r} is not one of {sorted(ENGINES)} (nor a name of one)")


def _whole(value, name: str, unit: str, *, least: int) -> int | None:
    if value is None:
        return None
    ok = _real(value) and math.isfinite(value)
    if not ok or not float(value).is_integer() or not least <= int(value) <= MOST_COUNT:
        raise InputError(
            f"engine settings: {name} = {value!r}: expected a whole number of {unit} from "
            f"{least} to {MOST_COUNT:,} (2**53) (or None: the engine's default)"
        )
    return int(value)


@dataclass(frozen=True)
class EngineSettings:
    """How a serving engine schedules one instance (the engine model's settings, one record).

    Every field but ``engine`` may be None: the engine's own default, which can depend on the GPU
    (vLLM V1, SGLang), the context limit (vLLM V0) or the KV cache (SGLang);
    :meth:`resolve` fills them for one GPU and :meth:`defaults` shows them.

    Parameters
    ----------
    engine
        Engine id or name (:data:`ENGINES`: ``"vllm-v1"``, ``"vllm-v0"``, ``"sglang"``, ``"tgi"``,
        ``"trtllm"``, ``"lmdeploy"``; ``"vLLM"`` alone names no release and is an error).
    policy
        ``"mixed"`` (prefill chunks beside the decodes) or ``"prefill_first"``.
    chunked_prefill
        Whether a prompt may be split over steps (true or false).
    max_num_seqs
        Running sequences at most (requests); 0: bounded by the KV cache only (TGI).
    max_num_batched_tokens
        Tokens computed per step at most (tokens); 0: no limit (as a run's file may say).
    block_size
        KV cache block (tokens; 16 when None).
    max_model_len
        The server's context limit (tokens); only vLLM V0's defaults depend on it.
    source
        Where the values come from (the release's defaults, then the fields given).

    The KV cache dtype is not an engine setting here: it sizes memory as the weights' dtype does,
    so it is a field of :class:`Deployment`.

    Examples
    --------
    >>> s = EngineSettings.defaults("vllm-v1", gpu="H100-SXM")
    >>> s.policy, s.chunked_prefill, s.max_num_seqs, s.max_num_batched_tokens
    ('mixed', True, 1024, 8192)
    >>> EngineSettings("vllm-v0", max_model_len=91680).resolve().max_num_batched_tokens
    512
    >>> EngineSettings(max_num_seqs=-1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    capnb.errors.InputError: engine settings: max_num_seqs = -1: expected a whole number of ...
    """

    engine: str = "vllm-v1"
    policy: str | None = None
    chunked_prefill: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    max_model_len: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if str(self.engine).strip().lower() == "vllm":
            raise InputError("engine settings: engine = 'vllm' names no release; say 'vllm-v0' "
                             "(up to 0.7) or 'vllm-v1' (0.8 and later)")  # fmt: skip
        object.__setattr__(self, "engine", engine_id(self.engine))
        if self.policy is not None and self.policy not in SCHEDULING_POLICIES:
            raise InputError(
                f"engine settings: policy = {self.policy!r}: expected one of {SCHEDULING_POLICIES}"
            )
        if self.chunked_prefill is not None and not isinstance(self.chunked_prefill, bool):
            raise InputError(
                f"engine settings: chunked_prefill = {self.chunked_prefill!r}: expected true "
                "or false (or None: the engine's default)"
            )
        for name, unit, least in (("max_num_seqs", "requests", 0),
                                  ("max_num_batched_tokens", "tokens", 0),
                                  ("block_size", "tokens", 1), ("max_model_len", "tokens", 1)):  # fmt: skip
            object.__setattr__(self, name, _whole(getattr(self, name), name, unit, least=least))
        if not isinstance(self.source, str):
            raise InputError(f"engine settings: source = {self.source!r}: expected text")

    @property
    def given(self) -> dict[str, object]:
        """The scheduling fields set (not None), by name."""
        names = (
            "policy",
            "chunked_prefill",
            "max_num_seqs",
            "max_num_batched_tokens",
            "block_size",
        )
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def resolve(self, *, gpu: str = "", gpu_memory_bytes: float = math.inf,
                kv_tokens: int | None = None) -> EngineSettings:  # fmt: skip
        """Every field filled: the release's defaults on this GPU, then the fields given.

        ``gpu`` (catalog id) and ``gpu_memory_bytes`` (bytes; default: a GPU of 70 GiB or more)
        choose vLLM V1's and SGLang's defaults; ``kv_tokens`` (tokens of KV cache) SGLang's
        running-request limit.
        """
        base = _release_defaults(self.engine, gpu_memory_bytes, str(gpu), self.max_model_len,
                                 kv_tokens)  # fmt: skip
        given = self.given
        if given:
            base = replace(base, **given,
                           source=f"{base.source}; given: {', '.join(sorted(given))}")  # fmt: skip
        return base

    @classmethod
    def defaults(cls, engine: str = "vllm-v1", *, gpu: str | None = None,
                 max_model_len: int | None = None,
                 kv_tokens: int | None = None) -> EngineSettings:  # fmt: skip
        """An engine's defaults as its release sets them, every field filled.

        On one catalog GPU (its bytes of memory read from the catalog; None: a GPU of 70 GiB or
        more), for a context limit ``max_model_len`` (tokens) and a KV cache of ``kv_tokens``
        tokens where they matter (vLLM V0, SGLang).
        """
        memory = math.inf
        if gpu is not None:
            from .data import load_gpus

            gpus = load_gpus([gpu])
            gpu = str(gpus.gpu.values[0])
            memory = float(gpus.memory_bytes.values[0])
        return cls(engine, max_model_len=max_model_len).resolve(
            gpu=gpu or "", gpu_memory_bytes=memory, kv_tokens=kv_tokens
        )

    @property
    def reserve(self) -> tuple[float, float, float, float]:
        """The engine's admission reserve: the kernel's four ``reserve_*`` settings.

        (ratio at start, least ratio, its fall a decode step, output tokens clipped at):
        a request is admitted only if its prompt and output fit beside ratio x the running
        requests' tokens to come (:func:`capnb.kernels.engine.admit`). :data:`RESERVES` by
        engine; vLLM and LMDeploy reserve none (zeros).
        """
        return RESERVES.get(self.engine, (0.0, 0.0, 0.0, 0.0))

    @property
    def keeps_preempted(self) -> bool:
        """Whether a preempted request's KV blocks stay cached until allocations evict them.

        vLLM V1 (:data:`KEEPS_PREEMPTED`): a readmitted request recomputes only its evicted
        blocks (:func:`capnb.kernels.engine.reused`); elsewhere it recomputes its whole context.
        """
        return self.engine in KEEPS_PREEMPTED

    def running_limit(self, kv_tokens: int) -> int:
        """Running sequences (requests) the engine allows with ``kv_tokens`` tokens of KV cache."""
        if self.max_num_seqs:
            return self.max_num_seqs
        return max(1, kv_tokens // (self.block_size or BLOCK_SIZE))


#: Admission reserves by engine (the engine kernel's ``reserve_*`` settings: ratio at start, least
#: ratio, fall a decode step, output tokens clipped at). SGLang's scheduler admits a request only
#: if its prompt and ``max_new_tokens`` (clipped at ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``,
#: 4,096) fit beside ``new_token_ratio`` x the running requests' remaining ``max_new_tokens``; the
#: ratio starts at 0.7 (``SGLANG_INIT_NEW_TOKEN_RATIO``), falls over 600 decode steps
#: (``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS``) to 0.7 x 0.14 (``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR``)
#: and starts again after a retraction or an idle spell (``managers/scheduler.py``,
#: ``schedule_policy.py``'s ``PrefillAdder``). TensorRT-LLM's default capacity scheduler,
#: ``GUARANTEED_NO_EVICT`` (``SchedulerConfig``), and TGI's router (a batch's token budget counts
#: every request's input and ``max_new_tokens``) hold every running request's whole remainder.
#: The simulated requests' output lengths stand for their ``max_new_tokens``.
RESERVES = {
    "sglang": (0.7, 0.7 * 0.14, 0.7 * (1.0 - 0.14) / 600, 4096.0),
    "trtllm": (1.0, 1.0, 0.0, float(2**31 - 1)),
    "tgi": (1.0, 1.0, 0.0, float(2**31 - 1)),
}


#: Engines whose preempted requests' KV blocks stay cached. vLLM V1 frees a preempted request's
#: blocks into the pool with their hashes kept (prefix caching is on by default from the V1
#: engine; ``v1/core/kv_cache_manager.py`` frees a request's blocks last first into the free
#: queue, ``v1/core/block_pool.py`` evicts a cached block only when an allocation takes it from
#: the queue's front), so a readmitted request finds the blocks no allocation has taken since.
#: vLLM V0 (prefix caching off by default) recomputes; SGLang, TensorRT-LLM and TGI reserve at
#: admission and rarely preempt; LMDeploy recomputes.
KEEPS_PREEMPTED = frozenset({"vllm-v1"})


def _release_defaults(key, gpu_memory_bytes, gpu, max_model_len, kv_tokens) -> EngineSettings:
    """One engine's defaults, by release (the sources are in :mod:`capnb.latency._engines`)."""
    large = gpu_memory_bytes >= _LARGE_GPU and not gpu.upper().startswith("A100")
    length = int(max_model_len) if max_model_len else 0
    rows = {
        "vllm-v1": ("mixed", True, 1024 if large else 256, 8192 if large else 2048,
                    "vLLM V1 defaults (get_batch_defaults)"),
        "tgi": ("prefill_first", False, 0, 4096, "TGI defaults (max_batch_prefill_tokens)"),
        "trtllm": ("mixed", False, 256, 8192,
                   "TensorRT-LLM defaults (max_batch_size, max_num_tokens)"),
        "lmdeploy": ("mixed", True, 256, 8192, "LMDeploy TurboMind defaults (max_batch_size)"),
    }  # fmt: skip
    if key == "vllm-v0" and length > V0_LONG_CONTEXT:
        rows[key] = ("mixed", True, 256, 512,
                     "vLLM V0 defaults, max_model_len > 32K: chunked prefill of 512 tokens")  # fmt: skip
    elif key == "vllm-v0":
        rows[key] = ("prefill_first", False, 256, max(length, 2048),
                     "vLLM V0 defaults (no chunked prefill)")  # fmt: skip
    elif key == "sglang":
        chunk = (
            2048 if gpu_memory_bytes < _SGLANG_SMALL_GPU
            else 8192 if gpu_memory_bytes < _SGLANG_LARGE_GPU else 16384
        )  # fmt: skip
        running = 2048 if kv_tokens is None else max(1, min(int(kv_tokens) // 2, 2048))
        rows[key] = ("prefill_first", True, running, chunk,
                     "SGLang defaults (chunked prefill, running requests)")  # fmt: skip
    policy, chunked, seqs, tokens, source = rows[key]
    return EngineSettings(key, policy, chunked, seqs, tokens, BLOCK_SIZE, max_model_len, source)


# -- the deployment --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Deployment:
    """One instance's hardware and model: a model on a GPU at a tensor-parallel degree, and dtypes.

    Checked when made: the model and GPU are resolved in the catalogs (``gpu`` becomes the
    catalog's id, ``spec`` holds the model's :class:`~capnb.modelspec.ModelSpec`), the degree is a
    positive whole number that shards the model, and the dtypes are known; each error names the
    field.

    Parameters
    ----------
    model
        Catalog model id (``capnb.data.list_models()``), a ``config.json`` path or a ModelSpec.
    gpu
        Catalog GPU name (``capnb.data.list_gpus()``).
    tensor_parallel
        GPUs per instance (a positive whole number of GPUs).
    weight_dtype
        The weights' dtype (``"bf16"``, ``"fp8"``, ``"int4"`` ...; bytes per parameter follow
        from it); None: the model config's.
    kv_dtype
        The KV cache's dtype (``"auto"``: the model's; ``"fp32"``, ``"bf16"``, ``"fp16"``,
        ``"fp8"``, ``"int8"`` or ``"int4"``). int8 and int4 are TensorRT-LLM's INT8 and LMDeploy's 8- and
        4-bit KV caches (vLLM and SGLang store none); their values are counted at 1 and 0.5 bytes,
        their per-head scales not.

    Examples
    --------
    >>> d = Deployment("Llama-3.1-8B", "h100-sxm", 1, kv_dtype="fp8")
    >>> d.gpu, d.spec.name, d.tensor_parallel
    ('H100-SXM', 'Llama-3.1-8B', 1)
    >>> Deployment("Llama-3.1-8B", "H100-SXM", 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    capnb.errors.InputError: deployment: tensor_parallel = 3: ...
    """

    model: object
    gpu: str
    tensor_parallel: int = 1
    weight_dtype: str | None = None
    kv_dtype: str = "auto"
    spec: object = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from .data import load_gpus, load_model
        from .data.modelspec import dtype_bytes

        object.__setattr__(self, "spec", load_model(self.model))
        if not isinstance(self.gpu, str):
            raise InputError(f"deployment: gpu = {self.gpu!r}: expected one catalog GPU name")
        object.__setattr__(self, "gpu", str(load_gpus([self.gpu]).gpu.values[0]))
        tp = self.tensor_parallel
        if isinstance(tp, bool | np.bool_) or not isinstance(tp, numbers.Integral) or tp < 1:
            raise InputError(
                f"deployment: tensor_parallel = {tp!r}: expected a positive whole number of GPUs"
            )
        tp = int(tp)  # np.int64(2), a degree from an array, as 2
        object.__setattr__(self, "tensor_parallel", tp)
        reason = self.spec.valid_tensor_parallel(tp)
        if reason:
            raise InputError(f"deployment: tensor_parallel = {tp}: {reason}")
        if self.weight_dtype is not None:
            dtype_bytes(self.weight_dtype, argument="deployment: weight_dtype")
        if self.kv_dtype != "auto":
            dtype_bytes(self.kv_dtype, argument="deployment: kv_dtype")

    def at(self, tensor_parallel: int) -> Deployment:
        """The same deployment at another tensor-parallel degree (GPUs per instance)."""
        return replace(self, tensor_parallel=tensor_parallel)

    def __str__(self) -> str:
        return f"{self.spec.name} on {self.tensor_parallel} x {self.gpu}"


def expect_deployment(deployment) -> Deployment:
    """``deployment`` if it is the record; else an InputError naming the argument and its type."""
    if not isinstance(deployment, Deployment):
        raise InputError(
            "deployment: expected a capnb.records.Deployment(model, gpu, tensor_parallel), "
            f"got {type(deployment).__name__}"
        )
    return deployment


def expect_sla(sla) -> SLA:
    """``sla`` if it is the record; else an InputError naming the argument and its type."""
    if not isinstance(sla, SLA):
        raise InputError(f"sla: expected a capnb.records.SLA, got {type(sla).__name__}")
    return sla

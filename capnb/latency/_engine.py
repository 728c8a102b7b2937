"""The serving-engine model: latency curves from a simulation of continuous batching.

:func:`engine` samples requests from a workload, simulates vLLM-style continuous batching at each
load (:mod:`capnb.kernels.engine`) and returns a latency curve over ``concurrency`` (closed loop) or
``request_rate`` (open loop), with its knee.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import xarray as xr

from .. import _validate, glossary
from ..data import _curve
from ..data.modelspec import KVGroups
from ..errors import InputError
from ..kernels import engine as kernels
from ..kernels._lazy import over_threads
from ..records import BLOCK_SIZE, VLLM_VERSION, Deployment, EngineSettings, expect_deployment
from . import _fitted
from . import calibration as _calibration

__all__ = ["engine", "knee", "sample_requests"]

UNLIMITED = 1 << 40  # a token budget that never binds (max_num_batched_tokens 0)
WARMUP_SHARE = 0.1  # share of the first requests left out of the statistics
#: Closed loop: the warm-up covers at least this many turns of the loop's requests (the opening
#: wave, all at once, and the next, still bunched), with as many more requests simulated; at 256
#: in flight and 2,000 requests (200 left out) the opening burst made P99 TTFT 6.3 s, not 0.19 s.
WARMUP_WAVES = 2


def sample_requests(workload: xr.Dataset, requests: int, seed: int):
    """``requests`` (prompt, output) token pairs drawn with replacement from a workload (seeded)."""
    check_workload(workload)
    _validate.within_budget(  # measured: about 780 bytes per simulated request
        f"requests={requests:,} simulated requests", nbytes=requests * 800.0,
        lower="lower requests",
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    prompt = np.asarray(workload["prompt_tokens"].values, dtype=float)
    output = np.asarray(workload["output_tokens"].values, dtype=float)
    pick = rng.integers(0, prompt.size, requests)
    as_tokens = lambda v: np.maximum(np.rint(v), 1).astype(np.int64)  # noqa: E731
    return as_tokens(prompt[pick]), as_tokens(output[pick]), rng


def check_workload(workload) -> None:
    """An error unless ``workload`` holds both token counts, each finite and >= 1 token.

    As :func:`capnb.latency.workload` makes it; one built by hand is checked the same way (a NaN
    count became a negative int64 and the simulation never ended).
    """
    use = "workload: pass capnb.latency.workload(...) (a Dataset over 'request')"
    if not isinstance(workload, xr.Dataset):
        raise InputError(use)
    for name in ("prompt_tokens", "output_tokens"):
        if name not in workload:
            raise InputError(f"{use}; this one has no {name!r}")
        values = np.asarray(workload[name].values, dtype=float).ravel()
        bad = ~np.isfinite(values) | (values < 1)
        if bad.any():
            raise InputError(
                f"workload: {name} must be >= 1 token, got {values[bad][0]:g} at request "
                f"{int(np.flatnonzero(bad)[0])}"
            )


def arrival_gaps(rng: np.random.Generator, requests: int, cv: float) -> np.ndarray:
    """Unit-mean inter-arrival gaps: Gamma with shape 1 / cv^2 (cv 1: Poisson, 0: evenly spaced)."""
    if cv == 0.0:
        return np.ones(requests)
    return rng.gamma(1.0 / cv**2, cv**2, requests)


def gpu_vector(gpus, gpu: str, weight_dtype: str) -> np.ndarray:
    """The engine's GPU vector (:data:`capnb.kernels.engine.GPU_FIELDS`).

    The analytic model's (:func:`capnb.latency.calibration.gpu_vector`: the matrix products at
    the weights' dtype, FP8 FLOP/s for FP8 weights), then attention's FLOP/s at BF16's rate:
    the engines' attention kernels (FlashAttention, FlashInfer) multiply queries by a BF16 KV
    cache in BF16 whatever the weights' dtype.
    """
    base = _calibration.gpu_vector(gpus, gpu, weight_dtype)
    return np.append(base, float(gpus.sel(gpu=gpu).dense_bf16_flops))


def model_vector(spec, tensor_parallel: int, *, kv_dtype: str = "auto",
                 weight_dtype: str | None = None, fp8_block: bool | None = None) -> np.ndarray:  # fmt: skip
    """The engine's model vector (:data:`capnb.kernels.engine.MODEL_FIELDS`).

    The analytic model's per-GPU figures (``capnb.kernels.latency.MODEL_FIELDS``), then the
    routed experts' weight bytes per GPU, the experts and the experts each token is routed to
    (0, 0, 0 for a dense model), then 1 where the weights are FP8 scaled by blocks. The weights
    each GPU reads a step are those it holds (:meth:`capnb.data.ModelSpec.weight_bytes_per_gpu`:
    the K/V projections of a KV head on every rank that uses it, and multi-head latent
    attention's down projections whole on every rank), not the analytic model's even split.

    ``fp8_block`` (None: :func:`fp8_block_scaled`) says whether FP8 weights carry a scale per
    block; a measured run whose checkpoint the catalog holds in BF16 states it.
    """
    base = _calibration.model_vector(spec, tensor_parallel, kv_dtype=kv_dtype,
                                     weight_dtype=weight_dtype)  # fmt: skip
    base[1] = spec.weight_bytes_per_gpu(tensor_parallel, weight_dtype)
    fp8 = (weight_dtype or spec.weight_dtype) == "fp8"
    block = fp8 and (fp8_block_scaled(spec) if fp8_block is None else bool(fp8_block))
    if not spec.is_moe or spec.moe_layers == 0:
        return np.append(base, [0.0, 0.0, 0.0, 0.0, float(block)])
    expert = spec._mlp_parameters(spec.moe_intermediate_size or spec.intermediate_size)
    routed = spec.moe_layers * spec.experts * expert
    per_parameter = spec.weight_bytes(weight_dtype) / spec.parameters
    expert_bytes = routed * per_parameter / tensor_parallel
    flop = 2.0 * spec.moe_layers * spec.experts_per_token * expert / tensor_parallel
    return np.append(base, [expert_bytes, float(spec.experts), float(spec.experts_per_token), flop,
                            float(block)])  # fmt: skip


def fp8_block_scaled(spec) -> bool:
    """Whether the model's checkpoint is FP8 with a scale per block of weights.

    Its ``quantization_config`` says so (``weight_block_size``, as DeepSeek-V3's and Qwen3's FP8
    releases do: 128 x 128). FP8 weights quantised at load (vLLM's ``--quantization fp8``) or
    shipped per tensor or per channel (ModelOpt, Meta's Llama-3.1-405B-FP8) are not.
    """
    return spec.weight_dtype == "fp8" and spec.weight_group[0] > 0


def _fp8_scaling(spec, weight_dtype: str | None) -> str:
    """How a curve's FP8 weights are scaled: 'block', 'tensor or channel', '' (not FP8)."""
    if (weight_dtype or spec.weight_dtype) != "fp8":
        return ""
    return "block" if fp8_block_scaled(spec) else "tensor or channel"


def profile_settings(gpu: str, settings: EngineSettings | None = None) -> tuple[int, int]:
    """(sequences, tokens) of vLLM's profile run on ``gpu``: what sizes its activation reserve.

    vLLM V1 profiles a forward pass of ``max_num_batched_tokens`` tokens and a sampler run over
    ``max_num_seqs`` requests before it sizes the KV cache, so the reserve follows the settings
    the server runs: ``settings`` where they are vLLM V1's (the fields given, the rest its
    defaults on this GPU), else ``vllm serve``'s defaults on this GPU (1,024 and 8,192 on GPUs of
    70 GiB or more other than A100s; 256 and 2,048 elsewhere), the stand-in every other engine's
    KV cache is sized with. The sequences are at most the tokens: the profile's forward pass
    spreads its tokens over ``min(max_num_batched_tokens, max_num_seqs)`` requests and samples
    one token for each.

    Examples
    --------
    >>> profile_settings("L40S"), profile_settings("H100-SXM")
    ((256, 2048), (1024, 8192))
    """
    from ..data import load_gpus

    gpus = load_gpus([gpu])
    served = EngineSettings("vllm-v1")
    if settings is not None and settings.engine == "vllm-v1":
        served = settings
    resolved = served.resolve(gpu=str(gpus.gpu.values[0]),
                              gpu_memory_bytes=float(gpus.memory_bytes.values[0]))  # fmt: skip
    tokens = int(resolved.max_num_batched_tokens)
    # the dummy run spreads its tokens over min(tokens, max_num_seqs) requests, one logit each
    # (gpu_model_runner._dummy_run), and the sampler runs over those logits
    return min(int(resolved.max_num_seqs or tokens), tokens), tokens


def served_accounting(gpu: str, settings: EngineSettings | None = None, *, hybrid: bool = True,
                      vllm_version: str = VLLM_VERSION):  # fmt: skip
    """The vllm accounting of a bucket (the engine's by default), profiled as :func:`profile_settings`."""
    from .. import memory

    acct = memory.accounting("vllm", vllm_version=vllm_version, hybrid_kv=bool(hybrid))
    if vllm_version == "0.6":  # V0's profile run: the bucket's own settings
        return acct
    seqs, tokens = profile_settings(gpu, settings)
    return memory.accounting(acct, max_num_seqs=seqs, max_num_batched_tokens=tokens or
                             acct.max_num_batched_tokens)  # fmt: skip


def kv_tokens_auto(spec, gpu: str, tensor_parallel: int, *, kv_dtype: str = "auto",
                   weight_dtype: str | None = None, hybrid: bool = True,
                   settings: EngineSettings | None = None) -> int:  # fmt: skip
    """KV cache tokens vLLM (V1 engine accounting, 0.9-0.11) would allocate, from capnb.memory.

    Profiled as the server runs on this GPU (:func:`served_accounting`: ``settings``' sequences
    and step tokens for vLLM V1, else ``vllm serve``'s defaults on the GPU). ``hybrid``: counted
    as vLLM's hybrid KV cache manager logs them (its groups' pool; fewer tokens where a group is
    padded), else at full length, for an engine that stores every layer whole
    (:func:`hybrid_engine`).
    """
    from .. import memory

    acct = served_accounting(gpu, settings, hybrid=hybrid)
    ds = memory.max_concurrency(
        model=spec, gpu=gpu, tensor_parallel=tensor_parallel, seq_len=BLOCK_SIZE,
        accounting=acct, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
    )  # fmt: skip
    return int(ds.kv_cache_tokens.item())


def hybrid_engine(spec, engine: str) -> bool:
    """Whether ``engine`` runs ``spec`` on vLLM's hybrid KV cache manager (:func:`kv_layout`)."""
    return engine == "vllm-v1" and not spec.chunked_attention


def kv_layout(spec, settings: EngineSettings) -> KVGroups:
    """How the engine's KV cache groups ``spec``'s layers.

    vLLM V1 (``vllm-v1``) runs vLLM's hybrid KV cache manager (0.10 on): a model's sliding-window
    layers keep only their window, in groups sharing the pool (:func:`capnb.data.modelspec.kv_groups`;
    the memory step's vllm accounting counts the same). Every other engine here is simulated with
    a full-length cache, one group of every layer. A model without windowed layers is one group
    everywhere, so its simulation is as it was. A chunked-attention model (Llama 4) is full length
    too: the engine's KV cache is the memory step's 0.10 bucket's (:func:`kv_tokens_auto`), and
    vLLM 0.10.1 to 0.12 turn the hybrid manager off for chunked attention
    (:attr:`capnb.memory.Accounting.hybrid_chunked`).
    """
    block = settings.block_size or BLOCK_SIZE
    if hybrid_engine(spec, settings.engine):
        return spec.kv_groups(block)
    return KVGroups(spec.layers, 1, 0, 0)


def kv_pool(kv_tokens: int, layout: KVGroups, settings: EngineSettings) -> int:
    """Blocks of the engine's pool from ``kv_tokens`` as vLLM logs them ("GPU KV cache size").

    vLLM logs the pool's blocks divided among its groups (``num_blocks // groups x block_size``),
    so the pool is ``kv_tokens // block x groups``. Under the hybrid manager the windowed groups
    also hold a step's prefill chunk beside the windows, which the memory step reserves
    (:meth:`capnb.memory.Accounting.window_chunk_bytes`, a chunk of the ``max_num_batched_tokens``
    the KV cache was profiled with: ``settings``', resolved, as :func:`kv_tokens_auto` profiles
    them): the same blocks are left out of the pool here, so the engine and the memory step hold
    the same sequences.
    """
    from .. import memory

    block = settings.block_size or BLOCK_SIZE
    acct = memory.accounting("vllm", vllm_version=VLLM_VERSION)
    if settings.max_num_batched_tokens:
        acct = memory.accounting(acct, max_num_batched_tokens=int(settings.max_num_batched_tokens))
    return acct.pool_blocks(layout, kv_tokens, block)


def pool_holds(tokens: int, kv_tokens: int, layout: KVGroups, settings: EngineSettings) -> bool:
    """Whether a request of ``tokens`` (prompt + output) fits in the engine's pool.

    :func:`holds` for the engine's layout: the blocks the request holds (in each group,
    :meth:`~capnb.data.modelspec.KVGroups.blocks`) against the pool's (:func:`kv_pool`); under a
    full-length layout the same as :func:`holds`.
    """
    block = settings.block_size or BLOCK_SIZE
    return layout.blocks(int(tokens), block) <= kv_pool(kv_tokens, layout, settings)


def sequences(kv_tokens: int, seq_len: int, layout: KVGroups, settings: EngineSettings) -> int:
    """Sequences of ``seq_len`` tokens the pool of ``kv_tokens`` holds, in whole blocks."""
    block = settings.block_size or BLOCK_SIZE
    return kv_pool(kv_tokens, layout, settings) // layout.blocks(int(seq_len), block)


def _deployed(deployment: Deployment, kv_tokens: int, settings: EngineSettings | None):
    """(layout, settings) of the engine on ``deployment``, for ``kv_tokens`` of KV cache.

    The settings resolved as :func:`engine` resolves them (the GPU's defaults, the model's context).
    """
    from ..data import load_gpus

    spec, gpu_id = deployment.spec, deployment.gpu
    memory = float(load_gpus([gpu_id]).memory_bytes.values[0])
    resolved = _resolved(_settings(settings), spec, gpu_id, memory, int(kv_tokens))
    return kv_layout(spec, resolved), resolved


def held_sequences(deployment: Deployment, kv_tokens: int, seq_len: int,
                   settings: EngineSettings | None = None) -> int:  # fmt: skip
    """Sequences of ``seq_len`` tokens the engine holds in ``kv_tokens`` of KV cache (whole blocks).

    Under the settings as :func:`engine` resolves them for the deployment (its layout and step
    budget): what its "memory holds" counts, and what :func:`capnb.memory.max_concurrency` counts
    with the same vLLM accounting.
    """
    layout, resolved = _deployed(deployment, kv_tokens, settings)
    return sequences(kv_tokens, seq_len, layout, resolved)


def held_request(deployment: Deployment, tokens: int, kv_tokens: int,
                 settings: EngineSettings | None = None) -> bool:  # fmt: skip
    """Whether the engine on ``deployment`` holds a request of ``tokens`` whole (:func:`pool_holds`)."""
    layout, resolved = _deployed(deployment, kv_tokens, settings)
    return pool_holds(tokens, int(kv_tokens), layout, resolved)


def layout_settings(layout: KVGroups) -> tuple[float, float, float]:
    """The kernel's three ``kv_*`` settings (:data:`capnb.kernels.engine.SETTINGS`) of a layout."""
    return float(layout.full), float(layout.windowed), float(layout.window_blocks)


def simulate_points(
    model_vec, gpu_vec, tensor_parallel, calibration_vec, prompt, output, gaps, cached, *,
    closed, loads, max_num_seqs, max_num_batched_tokens, kv_blocks, warmup,
    quantiles=_curve.QUANTILES, policy="mixed", chunked_prefill=True, block_size=BLOCK_SIZE,
    kv_layout=kernels.FULL_LENGTH, reserve=kernels.NO_RESERVE, keep_preempted=False,
):  # fmt: skip
    """Run the kernel at each load; (latency [load, metric, q], mean [load, metric], stats, features)."""
    loads = np.asarray(loads, dtype=float)
    settings = np.zeros((loads.size, len(kernels.SETTINGS)))
    settings[:, 0] = 1.0 if closed else 0.0
    settings[:, 1] = loads
    settings[:, 2] = max_num_seqs
    settings[:, 3] = max_num_batched_tokens
    settings[:, 4] = kv_blocks
    settings[:, 5] = block_size
    settings[:, 6] = warmup
    settings[:, 7] = kernels.POLICIES.index(policy)
    settings[:, 8] = 1.0 if chunked_prefill else 0.0
    settings[:, 9:12] = kv_layout
    settings[:, 12:16] = reserve
    settings[:, 16] = 1.0 if keep_preempted else 0.0
    qs = np.asarray(quantiles, dtype=float)
    shapes = (len(kernels.METRICS), len(kernels.STATS), 3, len(kernels.FEATURES))
    sizes = [np.zeros(s) for s in shapes]
    outputs = (
        np.empty((loads.size, shapes[0], qs.size)),
        np.empty((loads.size, shapes[0])),
        np.empty((loads.size, shapes[1])),
        np.empty((loads.size, shapes[2], shapes[3])),
    )

    def run(first: int, stop: int) -> None:
        part = slice(first, stop)
        kernels.engine_curve.compiled(
            prompt, output, gaps, cached, settings[part], model_vec, gpu_vec,
            int(tensor_parallel), calibration_vec, qs, *sizes, *(o[part] for o in outputs),
        )  # fmt: skip

    # the load points are independent simulations: split over threads when the work pays (each
    # point steps through about every output token of the sample). One part per point: the pool
    # hands them out as threads free up, the costly low loads (one step per token) first.
    work = loads.size * int(output.sum())
    _validate.within_budget(  # measured: about 22 ns of CPU per output token of a load point
        f"{loads.size:,} load points x {output.size:,} requests", seconds=work * 22e-9,
        lower="lower requests or the number of concurrency levels",
    )  # fmt: skip
    over_threads(run, loads.size, work, pieces=loads.size)
    return outputs


def knee(load: np.ndarray, p99_ttft: np.ndarray) -> tuple[float, str]:
    """The load at which P99 TTFT first reaches twice its floor (its value at the lowest load).

    Linear between grid points. (NaN, reason) when the grid never reaches it. The load is in the
    grid's unit: requests in flight (closed loop) or requests/s (open loop).
    """
    load, values = _knee_inputs(load, p99_ttft)
    if values.size == 0 or not np.isfinite(values[0]):
        return math.nan, "no P99 TTFT at the lowest load"
    target = 2.0 * values[0]
    above = np.flatnonzero(values >= target)
    if above.size == 0:
        return math.nan, (
            f"P99 TTFT stays below twice its floor ({values[0]:.4g} s) up to the last load "
            f"{load[-1]:g}: the knee is past the grid"
        )
    i = int(above[0])
    if i == 0:
        return float(load[0]), "reached at the first load"
    share = (target - values[i - 1]) / (values[i] - values[i - 1])
    return float(load[i - 1] + share * (load[i] - load[i - 1])), (
        f"P99 TTFT reaches twice its floor ({target:.4g} s) between {load[i - 1]:g} and {load[i]:g}"
    )


def _knee_inputs(load, p99_ttft) -> tuple[np.ndarray, np.ndarray]:
    """:func:`knee`'s two arrays as floats: one latency per load, the loads not decreasing."""
    arrays = []
    for name, given in (("load", load), ("p99_ttft", p99_ttft)):
        try:
            array = np.asarray(given, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"knee: {name} must be numbers, got {given!r}") from None
        if array.ndim != 1:
            raise InputError(f"knee: {name} must be a 1-D sequence, got shape {array.shape}")
        arrays.append(array)
    load, values = arrays
    if load.size != values.size:
        raise InputError(
            f"knee: load ({load.size} values) and p99_ttft ({values.size} values) must be of equal "
            "length, one latency per load"
        )
    back = np.flatnonzero(np.diff(load) < 0)
    if back.size:
        at = int(back[0]) + 1
        raise InputError(
            f"knee: load must not decrease: {load[at]:g} follows {load[at - 1]:g} at position {at}"
        )
    return load, values


def _loads(values, argument: str, *, integer: bool) -> np.ndarray:
    if integer:
        return np.sort(_validate.positive_ints(values, argument))
    array = np.atleast_1d(np.asarray(values, dtype=float))
    if array.ndim != 1 or array.size == 0 or not (np.isfinite(array) & (array > 0)).all():
        raise InputError(f"{argument} must be positive numbers (requests/s), got {values!r}")
    if np.unique(array).size != array.size:
        raise InputError(f"{argument}: duplicate values in {array.tolist()}")
    return np.sort(array)


def engine(
    deployment: Deployment,
    workload: xr.Dataset,
    *,
    settings: EngineSettings | None = None,
    concurrency=None,
    request_rate=None,
    arrival_cv: float = 1.0,
    requests: int = 2000,
    kv_cache_tokens=None,
    prefix_hit_rate: float = 0.0,
    calibration=None,
    seed: int = 0,
    quantiles: Sequence[float] = _curve.QUANTILES,
    warmup_share: float = WARMUP_SHARE,
) -> xr.Dataset:
    """A latency curve from a simulation of a serving engine's continuous batching.

    Parameters
    ----------
    deployment
        The model, GPU, tensor-parallel degree (GPUs) and dtypes simulated
        (:class:`capnb.records.Deployment`; its ``kv_dtype`` and ``weight_dtype`` size the KV
        cache and the weights' bytes as in :func:`analytic`).
    workload
        Prompt and output length distribution (:func:`capnb.latency.workload`); ``requests`` pairs
        are drawn from it with a numpy Generator seeded by ``seed``.
    concurrency
        Closed loop (a finished request is replaced at once): requests in flight per point.
        Default, when ``request_rate`` is None too: :func:`concurrency_grid` up to twice the
        running-sequence limit.
    request_rate
        Open loop: requests/s per point (arrivals Gamma-distributed with coefficient of variation
        ``arrival_cv``: 1 is Poisson), or ``"auto"``: 16 rates from 5 % to 150 % of the throughput
        simulated at the running-sequence limit. Give ``concurrency`` or ``request_rate``.
    requests
        Requests simulated per point; the first ``warmup_share`` (in [0, 1)) are left out of the
        statistics. A closed loop's warm-up covers its first two turns, with as many more
        requests simulated (its steady state, not its start: :data:`WARMUP_WAVES`).
    settings
        The serving engine and its scheduling (:class:`capnb.records.EngineSettings`: engine,
        policy, chunked prefill, ``max_num_seqs`` sequences and ``max_num_batched_tokens`` tokens
        per step at most, KV block size in tokens, ``max_model_len``); fields left None take the
        engine's defaults on this GPU (vLLM V1 on an H100: 1,024 and 8,192); ``max_model_len``
        None is the model's context, as vLLM defaults it (vLLM V0's budget and chunking follow
        it; requests past it are noted, not refused). The engine also
        picks its own step overheads in the bundled calibration. None: ``EngineSettings()``
        (vLLM V1's defaults).
    kv_cache_tokens
        KV cache capacity per GPU in tokens (in blocks of the settings' ``block_size``). None or
        ``"auto"``: what vLLM would allocate (:func:`capnb.memory.max_concurrency`, vllm
        accounting, V1 engine).
    prefix_hit_rate
        Share of each prompt's tokens found in the prefix cache (whole blocks only): not computed.
    calibration
        None (the bundled engine calibration for the GPU and engine, fitted on published request
        latencies; :func:`capnb.latency.engine_calibration`), or a
        :class:`~capnb.calibration.Calibration` (e.g. from your own runs,
        :func:`capnb.latency.calibrate`).
    seed
        Seeds the request sample and the arrivals: the same seed gives the same curve.
    quantiles, warmup_share
        Latency quantiles reported; share of warm-up requests.

    Returns
    -------
    xarray.Dataset
        A curve: ``latency`` (s) over (concurrency or request_rate, metric, latency_quantile),
        ``mean_latency``, ``measured_qps`` (NaN: nothing was measured), ``throughput``
        (requests/s) and ``output_throughput`` (tokens/s) simulated, ``preemptions``,
        ``mean_batch`` (sequences per step), and ``knee`` (the load where P99 TTFT reaches twice
        its floor; NaN with ``knee.attrs['reason']`` when the grid does not reach it). Attrs name
        every input of the model (``kind="engine"``).

    Examples
    --------
    >>> from capnb.latency import workload
    >>> w = workload(prompt_tokens=[512] * 4, output_tokens=[128] * 4)
    >>> from capnb.records import Deployment
    >>> curve = engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), w, concurrency=[1, 16, 64],
    ...                requests=200)
    >>> bool(curve.latency.sel(metric="e2e", latency_quantile=0.99).diff("concurrency").min() > 0)
    True
    """
    if concurrency is not None and request_rate is not None:
        raise InputError("give concurrency (closed loop) or request_rate (open loop), not both")
    spec, gpu_id, tp, gpus, model_vec, gpu_vec = _option(deployment)
    kv_dtype, weight_dtype = deployment.kv_dtype, deployment.weight_dtype
    settings = _settings(settings)
    n, hit, warmup, qs = _checked(requests, prefix_hit_rate, warmup_share, arrival_cv, seed,
                                  quantiles)  # fmt: skip
    cal = _calibration_of(calibration, gpu_id, settings.engine)
    hybrid = hybrid_engine(spec, settings.engine)
    kv_tokens, kv_from = _kv_tokens(kv_cache_tokens, spec, gpu_id, tp, kv_dtype, weight_dtype,
                                    hybrid, settings)  # fmt: skip
    given_length = settings.max_model_len
    settings = _resolved(settings, spec, gpu_id, float(gpus.memory_bytes.values[0]), kv_tokens)
    block = settings.block_size
    layout = kv_layout(spec, settings)
    kv_blocks = kv_pool(kv_tokens, layout, settings)
    seqs = settings.running_limit(kv_tokens)

    prompt, output, gaps = _requests(workload, n, seed, arrival_cv, kv_tokens, layout, settings)
    context_note = _context_check(prompt + output, spec, given_length)
    cached = np.floor(hit * prompt).astype(np.int64)
    _check_budget(prompt, cached, settings, block)
    run = dict(
        max_num_seqs=seqs, max_num_batched_tokens=settings.max_num_batched_tokens or UNLIMITED,
        kv_blocks=kv_blocks, warmup=warmup, quantiles=qs, policy=settings.policy,
        chunked_prefill=settings.chunked_prefill, block_size=block, reserve=settings.reserve,
        kv_layout=layout_settings(layout), keep_preempted=settings.keeps_preempted,
    )  # fmt: skip
    args = (model_vec, gpu_vec, tp, cal.engine_array(), prompt, output, gaps, cached)

    more = _top_up(workload, seed, hit, kv_tokens, settings, spec)
    dim, loads, lat, mean, stats = _finished(args, run, seqs, concurrency, request_rate, more,
                                             settings)  # fmt: skip
    result, knee_value, knee_reason = _curve_dataset(dim, loads, qs, lat, mean, stats)
    result.attrs = {
        "source": "capnb engine model (capnb.kernels.engine)",
        "kind": "engine",
        "mode": "closed loop (concurrency)" if dim == "concurrency" else "open loop (request rate)",
        "model": spec.name,
        "gpu": gpu_id,
        "tensor_parallel": tp,
        "prompt_tokens": float(prompt.mean()),
        "output_tokens": float(output.mean()),
        "workload": f"{workload.attrs.get('source', 'workload')}: {n} requests drawn (seed {seed})",
        "requests": n,
        "warmup_requests": warmup,
        "kv_cache_tokens": kv_tokens,
        "kv_cache_tokens_from": kv_from,
        "block_size": block,
        "prefix_hit_rate": hit,
        "arrival_cv": float(arrival_cv) if dim == "request_rate" else math.nan,
        "seed": int(seed),
        "calibration": cal.fitted_on,
        "calibration_values": cal.describe(),
        **_engine_attrs(settings, seqs),
        "kv_dtype": kv_dtype,
        # the precision the memory limit sizes: a curve of FP8 weights must not be checked as bf16
        "weight_dtype": weight_dtype or spec.weight_dtype,
        "fp8_scaling": _fp8_scaling(spec, weight_dtype),  # block: priced at their own share
        "knee": knee_value,
        "knee_reason": knee_reason,
        "notes": "",
    }
    _add_notes(result, context_note, tp, settings)
    return result


def _finished(args, run, seqs, concurrency, request_rate, more, settings):
    """The simulated points ``(dim, loads, latency, mean, stats)``; an error if any never ends."""
    with np.errstate(invalid="ignore"):  # a point that never finishes is NaN: an error just below
        dim, loads, (lat, mean, stats, _) = _simulated(
            args, run, seqs, concurrency, request_rate, more
        )
    _check_finished(dim, loads, mean, settings)
    return dim, loads, lat, mean, stats


#: TGI's router refuses (HTTP 429) a request beyond this many in flight unless
#: ``--max-concurrent-requests`` raises it (text-generation-inference's launcher default).
TGI_MAX_CONCURRENT_REQUESTS = 128


def _add_notes(result: xr.Dataset, context_note: str, tp: int, settings: EngineSettings) -> None:
    """The curve's notes: requests past the context, a group wider than one node, TGI's router."""
    if settings.engine == "tgi" and "concurrency" in result.dims:
        over = result.concurrency.values[result.concurrency.values > TGI_MAX_CONCURRENT_REQUESTS]
        if over.size:
            _curve.add_note(
                result,
                f"TGI's router refuses requests beyond {TGI_MAX_CONCURRENT_REQUESTS} in flight "
                "by default (--max-concurrent-requests): the points from concurrency "
                f"{int(over.min()):,} on are what TGI serves with that flag raised",
            )
    if context_note:
        _curve.add_note(result, context_note)
    if tp > 8:
        _curve.add_note(
            result,
            f"tensor_parallel {tp} spans more than one 8-GPU node: all-reduces are priced at the "
            "catalog's intra-node bandwidth, so the curve is optimistic",
        )


def _option(deployment):
    """One deployment (checked when made): its spec, GPU id, degree, GPU row and kernel vectors."""
    from ..data import load_gpus

    expect_deployment(deployment)
    spec, gpu_id, tp = deployment.spec, deployment.gpu, deployment.tensor_parallel
    kv_dtype, weight_dtype = deployment.kv_dtype, deployment.weight_dtype
    gpus = load_gpus([gpu_id])
    model_vec = model_vector(spec, tp, kv_dtype=kv_dtype, weight_dtype=weight_dtype)
    gpu_vec = gpu_vector(gpus, gpu_id, weight_dtype or spec.weight_dtype)
    if not np.isfinite(gpu_vec[:2]).all() or (tp > 1 and not np.isfinite(gpu_vec[2])):
        raise InputError(
            f"gpu: {gpu_id} lacks a figure the model needs (FLOP/s, HBM bandwidth, or the "
            "interconnect bandwidth at tensor_parallel > 1)"
        )
    return spec, gpu_id, tp, gpus, model_vec, gpu_vec


def holds(tokens, kv_tokens, block: int = BLOCK_SIZE):
    """Whether a request of ``tokens`` (prompt + output) fits in ``kv_tokens`` of KV cache.

    In whole blocks of ``block`` tokens, as vLLM allocates them (it rejects a request that does not
    fit); elementwise on arrays.
    """
    return -(-np.asarray(tokens) // block) <= np.asarray(kv_tokens) // block


def warmup_waves(load: float, warmup: int) -> int:
    """Requests to add to a closed loop at ``load`` so its warm-up covers :data:`WARMUP_WAVES` turns."""
    return max(0, WARMUP_WAVES * math.ceil(float(load)) - int(warmup))


def _closed_points(args, run, loads: np.ndarray, top_up):
    """A closed loop's points, each past its opening waves: a steady state, not a start-up burst.

    A closed loop starts with every one of its ``load`` requests arriving at once, and the next
    turn is still bunched. Where the warm-up (``run["warmup"]`` requests) is shorter than those
    :data:`WARMUP_WAVES` turns, their queue would be counted: at 256 requests in flight and
    2,000 requests (200 left out), P99 TTFT came out 6.3 s where the steady loop holds 0.19 s.
    Such points are simulated with ``top_up``'s extra requests and a warm-up that covers the
    largest of them, so every point still reports ``n - warmup`` requests; the other points are
    simulated as given.
    """
    warmup = int(run["warmup"])
    steady = np.array([warmup_waves(load, warmup) == 0 for load in loads])
    if steady.all():
        return simulate_points(*args, closed=True, loads=loads, **run)
    more = warmup_waves(float(loads.max()), warmup)
    longer = dict(run, warmup=warmup + more)
    parts = [
        (steady, simulate_points(*args, closed=True, loads=loads[steady], **run)),
        (
            ~steady,
            simulate_points(*top_up(args, more), closed=True, loads=loads[~steady], **longer),
        ),
    ]
    merged = tuple(np.empty((loads.size, *out.shape[1:])) for out in parts[1][1])
    for where, outputs in parts:
        for into, out in zip(merged, outputs, strict=True):
            into[where] = out
    return merged


def _top_up(workload, seed: int, hit: float, kv_tokens: int, settings: EngineSettings, spec):
    """A function giving the simulation's arguments with ``more`` requests drawn after its own.

    The extra requests come from their own seeded stream, so the requests drawn first (and every
    point that needs no more) are as without them.
    """

    def extend(args, more: int):
        model_vec, gpu_vec, tp, cal, prompt, output, gaps, cached = args
        extra_prompt, extra_output, _ = sample_requests(workload, more, [seed, 1])
        _check_held(extra_prompt, extra_output, kv_tokens, kv_layout(spec, settings), settings)
        extra_cached = np.floor(hit * extra_prompt).astype(np.int64)
        _check_budget(extra_prompt, extra_cached, settings, settings.block_size)
        return (
            model_vec, gpu_vec, tp, cal,
            np.concatenate([prompt, extra_prompt]), np.concatenate([output, extra_output]),
            np.concatenate([gaps, np.ones(more)]), np.concatenate([cached, extra_cached]),
        )  # fmt: skip

    return extend


def _requests(workload, n: int, seed: int, arrival_cv: float, kv_tokens: int, layout: KVGroups,
              settings: EngineSettings):  # fmt: skip
    """``n`` requests' prompt and output tokens drawn from the workload, and their arrival gaps."""
    prompt, output, rng = sample_requests(workload, n, seed)
    _check_held(prompt, output, kv_tokens, layout, settings)
    return prompt, output, arrival_gaps(rng, n, float(arrival_cv))


def _check_held(prompt, output, kv_tokens: int, layout: KVGroups,
                settings: EngineSettings) -> None:  # fmt: skip
    """An InputError when the KV cache cannot hold the longest request drawn (the engine rejects it)."""
    longest = int((prompt + output).max())
    if not pool_holds(longest, kv_tokens, layout, settings):
        raise InputError(
            f"kv_cache_tokens: {kv_tokens:,} tokens cannot hold one request of {longest:,} tokens "
            "(prompt + output); the engine would reject it"
        )


def longest_over_budget(prompt, cached, settings: EngineSettings, block: int) -> int:
    """The most tokens a prompt computes in one step, where that is over the step's budget (else 0).

    Only an engine without chunked prefill computes a prompt whole; the tokens computed are the
    prompt less its prefix-cache hit (``cached``) in whole blocks, never the last token.
    """
    budget = settings.max_num_batched_tokens
    if settings.chunked_prefill or not budget:
        return 0
    computed = prompt - np.minimum((cached // block) * block, prompt - 1)
    longest = int(computed.max())
    return longest if longest > budget else 0


def _check_budget(prompt, cached, settings: EngineSettings, block: int) -> None:
    """An InputError when, without chunked prefill, a prompt is longer than the step's token budget.

    Such an engine computes a prompt in one step (TGI's ``max_batch_prefill_tokens``,
    TensorRT-LLM's ``max_num_tokens``, vLLM V0's ``max_num_batched_tokens``) and refuses one over
    it; simulated, it would wait for ever and the curve would be NaN. The tokens computed are the
    prompt less its prefix-cache hit in whole blocks (never the last token), as the kernel admits.
    """
    longest = longest_over_budget(prompt, cached, settings, block)
    if longest:
        raise InputError(
            f"settings: max_num_batched_tokens = {int(settings.max_num_batched_tokens):,} tokens "
            f"a step without chunked prefill ({settings.engine}), but a prompt needs {longest:,} "
            "tokens computed in one step; the engine would never schedule it. Raise "
            "max_num_batched_tokens or set chunked_prefill=True"
        )


def _check_finished(dim: str, loads: np.ndarray, mean: np.ndarray, settings) -> None:
    """An InputError when a point's requests never all finished (its mean E2E is NaN).

    Every request the inputs admit finishes, but for one: without chunked prefill, a request
    preempted after generating is recomputed (prompt + tokens generated) in one step, and when
    that is over the step's budget the engine never schedules it again.
    """
    stuck = ~np.isfinite(mean[:, kernels.METRICS.index("e2e")])
    if not stuck.any():
        return
    raise InputError(
        f"settings: at {dim} {loads[stuck][0]:g} the simulated requests never finished: a request "
        f"preempted for KV blocks must be recomputed in one step without chunked prefill "
        f"({settings.engine}, max_num_batched_tokens = {int(settings.max_num_batched_tokens or 0):,} "
        "tokens), and its prompt plus the tokens it had generated exceed that. Raise "
        "max_num_batched_tokens or kv_cache_tokens, or set chunked_prefill=True"
    )


def _context_check(lengths: np.ndarray, spec, max_model_len) -> str:
    """Requests longer than the engine's context limit: an error for a given ``max_model_len``.

    Longer than the model's own context (vLLM's default ``max_model_len``,
    :func:`capnb.data.modelspec.context_tokens`), a note: the plan prices them as if served and
    says so in a check.
    """
    longest = int(lengths.max())
    if max_model_len and longest > int(max_model_len):
        raise InputError(
            f"settings: max_model_len = {int(max_model_len):,} tokens, but the workload's longest "
            f"request is {longest:,} tokens (prompt + output); the engine would reject it"
        )
    beyond = spec.beyond_context(lengths)
    if beyond is None:
        return ""
    over, longest, limit = beyond
    return (
        f"{over:.1%} of the requests simulated (the longest {longest:,} tokens, prompt + output) "
        f"are longer than {spec.name}'s context of {limit:,} tokens, which vLLM rejects; they "
        "were simulated as if served"
    )


def _engine_attrs(settings: EngineSettings, running_limit: int) -> dict:
    """The serving engine a curve simulates, as its attrs."""
    return {
        "engine": settings.engine,
        "scheduling_policy": settings.policy,
        "chunked_prefill": int(settings.chunked_prefill),
        "max_num_seqs": running_limit,
        "max_num_batched_tokens": settings.max_num_batched_tokens,
        "engine_settings": settings.source,
    }


def _settings(settings) -> EngineSettings:
    """The engine settings given (None: vLLM V1's defaults), checked to be the record."""
    if settings is None:
        return EngineSettings()
    if not isinstance(settings, EngineSettings):
        raise InputError(
            "settings: expected a capnb.records.EngineSettings (engine, max_num_seqs, ...), "
            f"got {type(settings).__name__}"
        )
    return settings


def _resolved(settings: EngineSettings, spec, gpu_id: str, memory: float, kv_tokens: int):
    """The settings resolved, ``max_model_len`` the model's context when not given (vLLM's default).

    vLLM V0's defaults follow it (a step budget of ``max(max_model_len, 2048)`` tokens without
    chunked prefill, or chunks of 512 past 32K): without it they were 2,048 tokens unchunked for
    every model, a configuration vLLM refuses to start. Requests past the model's context are
    still only noted (:func:`_context_check` reads the ``max_model_len`` given).
    """
    context = None if settings.max_model_len else spec.context_tokens
    if context:
        settings = replace(settings, max_model_len=int(context))
    resolved = settings.resolve(gpu=gpu_id, gpu_memory_bytes=memory, kv_tokens=kv_tokens)
    if context:
        resolved = replace(
            resolved,
            source=f"{resolved.source}; max_model_len: the model's context ({int(context):,} tokens)",
        )
    return resolved


def _calibration_of(calibration, gpu_id: str, engine: str):
    """The calibration to simulate with: the bundled one of the GPU and engine, or the given one."""
    if calibration is None:
        return _fitted.engine_calibration(gpu_id, engine)
    if isinstance(calibration, _calibration.Calibration):
        return calibration
    raise InputError(f"calibration must be None or a Calibration, got {type(calibration).__name__}")


def _kv_tokens(kv_cache_tokens, spec, gpu_id: str, tp: int, kv_dtype, weight_dtype, hybrid: bool,
               settings: EngineSettings):  # fmt: skip
    """KV cache tokens per GPU (given, or vLLM's accounting) and where they come from."""
    if kv_cache_tokens is None or kv_cache_tokens == "auto":
        kv_tokens = kv_tokens_auto(spec, gpu_id, tp, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                                   hybrid=hybrid, settings=settings)  # fmt: skip
        seqs, tokens = profile_settings(gpu_id, settings)
        kv_from = (
            "auto: vLLM V1 accounting (capnb.memory, gpu_memory_utilization 0.9), profiled at "
            f"max_num_seqs {seqs:,} and max_num_batched_tokens {tokens:,}"
        )
    else:
        kv_tokens = _validate.positive_int(kv_cache_tokens, "kv_cache_tokens")
        kv_from = "given"
    if kv_tokens <= 0:
        raise InputError(
            f"kv_cache_tokens: {spec.name} leaves no KV cache on {tp} x {gpu_id} (vLLM accounting); "
            "raise tensor_parallel or give kv_cache_tokens"
        )
    return kv_tokens, kv_from


def _simulated(args, run, seqs, concurrency, request_rate, top_up):
    """(dim, loads, simulated outputs) of a closed loop over concurrencies or an open loop."""
    if request_rate is None:
        loads = (
            _latency_grid(2 * seqs)
            if concurrency is None
            else _loads(concurrency, "concurrency", integer=True)
        )
        return "concurrency", loads, _closed_points(args, run, loads, top_up)
    if isinstance(request_rate, str):
        if request_rate != "auto":
            raise InputError(f"request_rate must be numbers or 'auto', got {request_rate!r}")
        _, _, top, _ = _closed_points(args, run, np.array([float(seqs)]), top_up)
        ceiling = float(top[0, kernels.STATS.index("request_throughput")])
        loads = np.round(ceiling * np.linspace(0.05, 1.5, 16), 6)
    else:
        loads = _loads(request_rate, "request_rate", integer=False)
    return "request_rate", loads, simulate_points(*args, closed=False, loads=loads, **run)


def _checked(requests, prefix_hit_rate, warmup_share, arrival_cv, seed, quantiles):
    """The engine's scalar arguments checked: (requests, hit rate, warm-up requests, quantiles)."""
    n = _validate.positive_int(requests, "requests")
    hit = _validate.fraction(prefix_hit_rate, "prefix_hit_rate")
    warm_share = _validate.fraction(warmup_share, "warmup_share", high_open=True)
    if not (isinstance(arrival_cv, int | float) and math.isfinite(arrival_cv) and arrival_cv >= 0):
        raise InputError(f"arrival_cv must be a number >= 0, got {arrival_cv!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**64:
        raise InputError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    qs = np.asarray(quantiles, dtype=float)
    if qs.size == 0 or ((qs <= 0) | (qs >= 1)).any() or (np.diff(qs) <= 0).any():
        raise InputError(f"quantiles must ascend inside (0, 1), got {list(quantiles)}")
    return n, hit, min(math.ceil(warm_share * n), n - 1), qs


def _curve_dataset(dim, loads, qs, lat, mean, stats):
    """The simulated points as a latency curve over ``dim`` (variables; attrs set by the caller)."""
    at = [i for i, q in enumerate(qs) if math.isclose(q, 0.99)]
    # the knee is read from P99 TTFT (the highest quantile computed when 0.99 is not among them)
    knee_value, knee_reason = knee(loads, lat[:, 0, at[0] if at else -1])
    coords = {
        dim: (dim, loads, glossary.attrs(dim)),
        "metric": ("metric", list(kernels.METRICS), glossary.attrs("metric")),
        "latency_quantile": ("latency_quantile", qs, glossary.attrs("latency_quantile")),
    }
    column = {name: stats[:, i] for i, name in enumerate(kernels.STATS)}
    per_load = {
        "throughput": (column["request_throughput"], "simulated throughput", "requests/s"),
        "output_throughput": (column["output_throughput"], "simulated output throughput",
                              "tokens/s"),
        "preemptions": (column["preemptions"].astype(np.int64), "preemptions (recompute)",
                        "requests"),
        "steps": (column["steps"].astype(np.int64), "engine steps simulated", "1"),
        "mean_batch": (column["mean_batch"], "mean sequences (requests) per step", "requests"),
    }  # fmt: skip
    variables = {
        "latency": ((dim, "metric", "latency_quantile"), lat, glossary.attrs("latency")),
        "mean_latency": ((dim, "metric"), mean, glossary.attrs("mean_latency")),
        "measured_qps": (dim, np.full(loads.size, np.nan), glossary.attrs("measured_qps")),
        **{name: (dim, values, {"long_name": long_name, "units": units})
           for name, (values, long_name, units) in per_load.items()},
        "knee": ((), knee_value, {
            "long_name": "knee: load where P99 TTFT reaches twice its floor",
            "units": "requests" if dim == "concurrency" else "requests/s",
            "reason": knee_reason,
        }),
    }  # fmt: skip
    return xr.Dataset(variables, coords=coords), knee_value, knee_reason


def _latency_grid(upper: int) -> np.ndarray:
    from ._curves import concurrency_grid

    return concurrency_grid(upper, dense_up_to=16, per_doubling=4)

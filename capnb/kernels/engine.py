"""Engine kernel: a request-level simulation of a serving engine's scheduler, step by step.

One call simulates one serving instance (a tensor-parallel group) at one load. The driver,
:func:`simulate`, composes small named steps; each holds one rule of the scheduler:

:func:`arrive`
    Open loop: requests whose arrival time has come join the *waiting* queue (first come first
    served). Closed loop: ``load`` requests wait at time 0 and each finished one is replaced at
    once (:func:`finish`).
:func:`schedule_running`
    Running requests of one kind get their next tokens within the step's token budget
    (``max_num_batched_tokens``), in admission order: a *decoding* request one token, a request
    still *in its prompt* (a chunked prefill) the rest of its prompt up to the budget left. A
    request needs KV blocks for all its computed tokens plus the new ones (``block_size`` tokens a
    block). When the free blocks do not suffice, the most recently admitted running request is
    *preempted* (:func:`preempt_last`): its blocks are freed, its computed tokens forgotten
    (recompute; a token it was given this step is taken back) and it goes back to the front of
    the waiting queue. A request may preempt itself; then nothing more is scheduled this step.
    With ``keep_preempted`` (vLLM V1, whose prefix caching is on by default) the freed blocks
    stay cached until allocations evict them: readmitted, the request recomputes only what was
    evicted (:func:`reused`).
:func:`admit`
    Waiting requests are admitted first come first served while fewer than ``max_num_seqs`` run,
    budget is left and the free blocks hold the request's cached prefix plus its first chunk; the
    first that does not fit stops admission. Without chunked prefill a prompt is admitted only
    when all of it fits in the budget left (and is never split).

The engine's ``policy`` orders these rules:

- ``mixed`` (vLLM V1 and V0 with chunked prefill, TensorRT-LLM, LMDeploy): decodes first, then
  the prompts in progress, then admission (only when nothing was preempted); prefill chunks ride
  in the same step as the decodes.
- ``prefill_first`` (vLLM V0 without chunked prefill, SGLang and TGI by default): prompts in
  progress and admissions make a prefill-only step whenever any can run; the running requests
  decode only in steps where no prompt could be scheduled.

A request's prefix-cache hit (whole blocks, never the last prompt token) is not computed but holds
KV blocks. A step that completes a request's prompt (or recompute) samples a token, as does every
decode; a request ends with its last token and frees its blocks at the end of that step.

Blocks are counted in the pool's own unit (``kv_blocks``). A full-length cache is one group of
every layer: a sequence of ``T`` tokens holds ``ceil(T / block_size)`` blocks. vLLM's hybrid KV
cache manager (the ``kv_*_groups`` settings) groups the layers by attention kind: a block of the
pool is one group's pages, a sequence holds ``ceil(T / block_size)`` blocks in each full group and
at most ``kv_window_blocks`` in each sliding-window group (a window group's blocks grow with the
sequence up to that count; as every block, they are given back when the request ends).

Step time (:func:`step_time`, per GPU of the group; the roofline of :mod:`capnb.kernels.latency`)
    A step computing ``T`` tokens for ``S`` sequences, where sequence ``i`` computes ``n_i`` new
    tokens after ``s_i`` already in its cache::

        FLOP  = layer FLOP per token x T + head FLOP per token x S
                + 4 x layers x attention width x sum(n_i s_i + n_i (n_i+1)/2)
        bytes = weights read + KV bytes per token x sum(s_i + n_i)

    The layer FLOP per token leaves out the embedding table (a lookup) and the LM head, whose
    product is computed once per scheduled sequence (at the position it samples). A model's
    windowed layers (a sliding window or an attention chunk of ``W`` tokens, ``window_share`` of
    its KV bytes) attend to at most ``W`` keys a query and read the last ``W + n_i - 1`` tokens'
    KV: their share of the pair and KV sums is taken over the window
    (:func:`capnb.kernels.latency.attention_work`).
        step  = step_overhead + sequence_overhead x S + allreduce_latency x 2 layers log2(TP)
                + 2 layers x T x hidden x 2 bytes x 2 (TP-1)/TP / (link bandwidth x link efficiency)
                + max(FLOP / (FLOP/s x compute efficiency), bytes / (HBM bytes/s x bandwidth efficiency))

    The weights read are the dense weights plus, in a mixture of experts, the share of the routed
    experts that ``T`` tokens touch: ``1 - (1 - k / E)^T`` of them (``k`` of ``E`` experts per
    token, drawn independently), all of them at large ``T``. The routed experts' bytes count
    ``1 / expert_efficiency`` times (``calibration[7]``): grouped expert kernels reach a share of
    the HBM efficiency dense matrix products reach. A pure decode step of a dense model is
    the analytic model's (:func:`capnb.kernels.latency.decode_seconds`).

The front end (``calibration[8]``, seconds a request; none in a shorter vector): before the
scheduler sees a request, the server's one front-end process (vLLM's API server, SGLang's
tokenizer manager) serves it, one request at a time, first come first served; a request joins
the waiting queue when that process has served it (``max(arrival, front end free) + frontend``)
and is admitted no earlier. Requests that arrive together (a batch, a closed loop's first wave)
queue there: the ``k``-th waits ``k`` services. The wait is in the latencies, not in the
features below (its time is not a step's).

Per reported request (index ``warmup`` to ``n - 1``): TTFT (first token - arrival + the request
overhead, ``calibration[6]``: time outside the GPU's steps, once per request, in parallel), E2E (last token -
arrival + the same overhead), TPOT = (E2E - TTFT) / (output - 1) and every inter-token gap (ITL).
Quantiles use the inverse-CDF definition, as in :mod:`capnb.kernels.latency`.

For the calibration the kernel also returns, per metric, the mean over reported requests of the
step-time *features* their latency is made of (:data:`FEATURES`): a step's time is the
calibration's linear combination of its features, so a closed-loop mean latency is exactly
``features . parameters``.

A prefill pool and a decode pool (disaggregated serving) are two calls with other settings: a pool
that only prefills is a run of one-token outputs, and a decode pool's requests arrive with their
prompt computed elsewhere (a prefix hit of the whole prompt).
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import guvectorize, njit
from .latency import _ACTIVATION_BYTES, _combine, attention_work
from .latency import CALIBRATION_FIELDS as _latency_fields
from .latency import GPU_FIELDS as _latency_gpu_fields
from .latency import MODEL_FIELDS as _latency_model_fields

__all__ = [
    "CALIBRATION_FIELDS",
    "FEATURES",
    "GPU_FIELDS",
    "METRICS",
    "MODEL_FIELDS",
    "POLICIES",
    "SETTINGS",
    "STATS",
    "admit",
    "arrive",
    "engine_curve",
    "finish",
    "mixed_step",
    "preempt_last",
    "reused",
    "schedule_running",
    "simulate",
    "step_time",
]

#: Order of the ``settings`` vector.
SETTINGS = ("closed", "load", "max_num_seqs", "max_num_batched_tokens", "kv_blocks", "block_size",
            "warmup", "policy", "chunked_prefill", "kv_full_groups", "kv_window_groups",
            "kv_window_blocks", "reserve_ratio", "reserve_min_ratio", "reserve_decay",
            "reserve_clip", "keep_preempted")  # fmt: skip
#: No admission reserve (vLLM, LMDeploy): the four ``reserve_*`` settings.
NO_RESERVE = (0.0, 0.0, 0.0, 0.0)
#: The KV layout's three settings of a full-length cache (one group of every layer).
FULL_LENGTH = (1.0, 0.0, 0.0)
#: Scheduling policies (``settings[7]``), in code order.
POLICIES = ("mixed", "prefill_first")
#: The engine's model vector: the analytic model's fields, then the routed experts' weight
#: bytes per GPU (0 for a dense model), the experts, the experts each token is routed to and
#: the FLOP per token per GPU of the routed experts it is routed to (part of the layer FLOP),
#: then 1 where the weights are FP8 scaled by blocks (DeepSeek-V3's and Qwen3's FP8 releases:
#: a scale every 128 x 128 weights, dequantised inside the product), 0 otherwise (per-tensor or
#: per-channel FP8, or not FP8; a twelve-value vector has none).
MODEL_FIELDS = (*_latency_model_fields, "expert_bytes", "experts", "experts_per_token",
                "expert_flop", "fp8_block")  # fmt: skip
_EXPERT_BYTES, _EXPERTS, _EXPERTS_PER_TOKEN, _EXPERT_FLOP, _FP8_BLOCK = range(
    len(_latency_model_fields), len(MODEL_FIELDS)
)
#: The engine's GPU vector: the analytic model's fields (the matrix products' FLOP/s at the
#: weights' dtype, HBM and link bytes/s), then attention's FLOP/s (BF16: FlashAttention over a
#: BF16 KV cache runs at BF16's rate when the weights are FP8; a three-value vector prices it at
#: the weights').
GPU_FIELDS = (*_latency_gpu_fields, "attention_flops")
#: Metrics of the outputs, in order.
METRICS = ("ttft", "tpot", "itl", "e2e")
#: Order of the ``stats`` output: requests/s and output tokens/s completed (by any request) from the
#: ``warmup``-th completion to the last reported one, preemptions, steps, mean sequences per step,
#: simulated seconds.
STATS = ("request_throughput", "output_throughput", "preemptions", "steps", "mean_batch",
         "duration_s")  # fmt: skip
#: Feature columns (seconds at unit efficiency, or counts), their sum weighted by the calibration's
#: inverse efficiencies and overheads is the step time.
FEATURES = ("compute_s", "memory_s", "wire_s", "steps", "sequences", "allreduces", "requests")
_NF = 7
#: The engine's calibration vector: the analytic model's six values, the seconds added once to
#: each request's TTFT outside the steps (tokenising, the server's queues, the network), then the
#: share of the HBM efficiency the routed experts' weight reads reach (1: a dense read; a
#: seven-value vector reads them as dense), then the seconds each request holds the server's one
#: front-end process (a FIFO server before the scheduler: an eight-value vector has none), then
#: the share of the compute efficiency the routed experts' arithmetic reaches (1: dense; a
#: nine-value vector computes them as dense), then the share of the compute efficiency the
#: layers' block-scaled FP8 matrix products reach (1: FP8's catalog rate at the one efficiency;
#: a ten-value vector prices them so).
CALIBRATION_FIELDS = (*_latency_fields, "request_overhead_s", "expert_efficiency", "frontend_s",
                      "expert_compute_efficiency", "fp8_compute_efficiency")  # fmt: skip

# columns of the per-slot integer state ``req``; the last three describe a preempted request's
# blocks left cached (keep_preempted): tokens it had computed, the free blocks ahead of its own in
# the pool's eviction order, the blocks taken from the pool (:func:`_taken`) when it was preempted
_RID, _PLEN, _OLEN, _HIT, _COMP, _GEN, _HELD, _KEPT, _AHEAD, _MARK = range(10)
# columns of the per-slot times ``clock``
_ARR, _FIRST, _LAST, _READY = 0, 1, 2, 3
# the integer scalars ``st``
_HEAD, _NWAIT, _NRUN, _NFREE, _NEXT, _DONE, _PREEMPT = range(7)
_STEPS, _COMPLETED, _WINDOW, _BLOCKS = range(7, 11)
# blocks given back to the pool so far (less a preempted request's own cached blocks found again),
# 1 where a preempted request's computed blocks stay cached (keep_preempted), the pool's blocks
_RETURNED, _KEEP, _POOL = 11, 12, 13
# the float scalars ``ft``
_T, _LAST_DT, _NEXT_T, _BATCH, _WSTART, _WTOKENS0, _OUT_TOKENS, _WTOKENS, _FRONT, _RATIO = range(10)
# the step's scheduling scalars ``sched``: budget left, requests scheduled, preempted, stopped
_BUDGET, _COUNT, _PREEMPTED, _STOPPED = range(4)


@njit(error_model="numpy")
def step_time(tokens, pairs, kv_read, sequences, model, gpu, tensor_parallel, calibration, out):
    """Seconds of one step; ``out`` (7) receives its features (:data:`FEATURES`)."""
    flop_per_token, weights, kv_per_token = model[0], model[1], model[2]
    layers, attention_width, hidden, head = model[3], model[4], model[5], model[6]
    flops, bandwidth, interconnect = gpu[0], gpu[1], gpu[2]
    read = weights
    layer_flop = flop_per_token
    experts = model[_EXPERT_BYTES] if model.shape[0] > _EXPERTS_PER_TOKEN else 0.0
    if experts > 0.0:  # routed experts: only those the tokens touch
        touched = 1.0 - (1.0 - model[_EXPERTS_PER_TOKEN] / model[_EXPERTS]) ** tokens
        # read at their own share of the GPU's HBM efficiency (grouped expert kernels)
        share = calibration[7] if calibration.shape[0] > 7 else 1.0
        read = weights - experts + experts * touched / share
        # and computed at their own share of its compute efficiency
        if model.shape[0] > _EXPERT_FLOP and calibration.shape[0] > 9:
            layer_flop += model[_EXPERT_FLOP] * (1.0 / calibration[9] - 1.0)
    # the layers' block-scaled FP8 matrix products (a scale every 128 x 128 weights, on a GPU
    # with FP8 tensor cores: gpu[0] is FP8's FLOP/s, gpu[3] BF16's) reach their own share of the
    # compute efficiency (the blocks' dequantising); an eleven-field calibration sets it.
    # Per-tensor and per-channel FP8 products run at the one efficiency.
    if (calibration.shape[0] > 10 and model.shape[0] > _FP8_BLOCK and model[_FP8_BLOCK] > 0.0
            and gpu.shape[0] > 3 and gpu[0] > gpu[3]):  # fmt: skip
        layer_flop /= calibration[10]
    # the LM head at each scheduled sequence's sampled position (a prompt's chunk that ends
    # before its last token samples nothing: counted all the same, a bound of one per sequence)
    # attention's products at the rate of its operands' dtype (gpu[3], BF16: the KV cache's),
    # the layers' and the head's at the weights' (FP8 weights: FP8 FLOP/s)
    attention = 4.0 * layers * attention_width * pairs
    compute = (layer_flop * tokens + head * sequences) / flops
    compute += attention / (gpu[3] if gpu.shape[0] > 3 else flops)
    memory = (read + kv_per_token * kv_read) / bandwidth
    if tensor_parallel > 1:
        ring = 2.0 * (tensor_parallel - 1) / tensor_parallel
        wire = 2.0 * layers * tokens * hidden * _ACTIVATION_BYTES * ring / interconnect
        allreduces = 2.0 * layers * math.log2(tensor_parallel)
    else:
        wire = 0.0
        allreduces = 0.0
    if compute / calibration[0] >= memory / calibration[1]:
        out[0] = compute
        out[1] = 0.0
    else:
        out[0] = 0.0
        out[1] = memory
    out[2] = wire
    out[3] = 1.0
    out[4] = sequences
    out[5] = allreduces
    out[6] = 0.0  # the per-request overhead is no part of a step
    return _combine(compute, memory, wire, allreduces, sequences, calibration)


#: The name the analytic comparison and older callers use.
mixed_step = step_time


@njit(inline="always", error_model="numpy")
def _frontend_s(calibration):
    """The front end's seconds a request (``calibration[8]``; none in a shorter vector)."""
    return calibration[8] if calibration.shape[0] > 8 else 0.0


@njit(inline="always", error_model="numpy")
def _blocks_for(tokens, layout):
    """Blocks of the pool a sequence of ``tokens`` holds.

    ``layout``: (block tokens, full groups, window groups, blocks a window group keeps at most);
    (block, 1, 0, 0) is a full-length cache.
    """
    span = (tokens + layout[0] - 1) // layout[0]
    return layout[1] * span + layout[2] * min(span, layout[3])


@njit(inline="always", error_model="numpy")
def _more_blocks(tokens, held, layout):
    """Blocks a sequence holding ``held`` needs besides them to hold ``tokens`` (>= 0).

    Without window groups a sequence holds ``full groups x span`` blocks, so one that already
    holds room for ``tokens`` needs none: answered without the division (most decode steps).
    """
    if layout[2] == 0 and held * layout[0] >= layout[1] * tokens:
        return 0
    return max(_blocks_for(tokens, layout) - held, 0)


@njit(inline="always", error_model="numpy")
def enqueue(s, index, j, at, prompt, output, cached, req, clock, c_arrive, start, waiting, st, ft,
            frontend):  # fmt: skip
    """Request ``index`` (sample ``j``) arrives at ``at`` into slot ``s``, at the waiting tail.

    It is ready for admission once the front end has served it: ``frontend`` seconds after the
    front end is free and it has arrived (one server, first come first served).
    """
    slots = waiting.shape[0]
    req[s, _RID] = index
    req[s, _PLEN] = prompt[j]
    req[s, _OLEN] = output[j]
    req[s, _HIT] = cached[j]
    req[s, _COMP] = 0
    req[s, _GEN] = 0
    req[s, _HELD] = 0
    req[s, _KEPT] = 0
    clock[s, _ARR] = at
    clock[s, _READY] = max(at, ft[_FRONT]) + frontend
    ft[_FRONT] = clock[s, _READY]
    # element by element: an array copied into a slice (c_arrive[s, :] = start) compiles numba's
    # shape-mismatch message with its string formatting, about 5 s of a cold compile
    for f in range(start.size):
        c_arrive[s, f] = start[f]
    waiting[(st[_HEAD] + st[_NWAIT]) % slots] = s
    st[_NWAIT] += 1


@njit(inline="always", error_model="numpy")
def arrive(prompt, output, cached, gaps, load, req, clock, c_arrive, waiting, free_slots, st, ft,
           cumulative, step_features, start, frontend):  # fmt: skip
    """Open loop: every request arrived by now joins the waiting queue (idle: jump to the next).

    A request that arrived during the last step carries the part of that step's features after
    its arrival, so that its features count only the time it was in the system (``start``:
    scratch for them).
    """
    n = prompt.shape[0]
    if st[_NRUN] == 0 and st[_NWAIT] == 0 and st[_NEXT] < n and ft[_NEXT_T] > ft[_T]:
        ft[_T] = ft[_NEXT_T]
        ft[_LAST_DT] = 0.0
    while st[_NEXT] < n and ft[_NEXT_T] <= ft[_T]:
        st[_NFREE] -= 1
        s = free_slots[st[_NFREE]]
        share = (ft[_T] - ft[_NEXT_T]) / ft[_LAST_DT] if ft[_LAST_DT] > 0.0 else 0.0
        for f in range(_NF):
            start[f] = cumulative[f] - share * step_features[f]
        i = st[_NEXT]
        enqueue(s, i, i, ft[_NEXT_T], prompt, output, cached, req, clock, c_arrive, start,
                waiting, st, ft, frontend)  # fmt: skip
        st[_NEXT] += 1
        if st[_NEXT] < n:
            ft[_NEXT_T] = ft[_NEXT_T] + gaps[st[_NEXT]] / load


@njit(inline="always", error_model="numpy")
def preempt_last(req, running, scheduled, waiting, st, sched):
    """Preempt the most recently admitted running request (recompute); returns its slot.

    Where the engine keeps a preempted request's blocks cached (``st[_KEEP]``: vLLM V1's prefix
    caching, on by default), its computed tokens are remembered with the free blocks ahead of its
    own in the eviction order: :func:`reused` finds those not yet evicted when it is admitted again.
    """
    slots = waiting.shape[0]
    j = st[_NRUN] - 1
    victim = running[j]
    if st[_KEEP] == 1:
        req[victim, _KEPT] = req[victim, _COMP]
        req[victim, _AHEAD] = st[_BLOCKS]
        req[victim, _MARK] = _taken(st)
    sched[_BUDGET] += scheduled[j]  # a token scheduled already is given back
    if scheduled[j] > 0:
        sched[_COUNT] -= 1
    scheduled[j] = 0
    st[_NRUN] -= 1
    st[_BLOCKS] += req[victim, _HELD]
    st[_RETURNED] += req[victim, _HELD]
    req[victim, _HELD] = 0
    req[victim, _COMP] = 0
    st[_HEAD] = (st[_HEAD] - 1) % slots
    waiting[st[_HEAD]] = victim
    st[_NWAIT] += 1
    st[_PREEMPT] += 1
    sched[_PREEMPTED] = 1
    return victim


@njit(inline="always", error_model="numpy")
def schedule_running(decoding, req, running, scheduled, start_ctx, waiting, st, sched, layout):
    """Give the running requests of one kind (decoding, or in their prompt) their next tokens.

    Returns how many running requests of the other kind were passed over (a pass over the
    prompts in progress is skipped when the decode pass met none).
    """
    other = 0
    i = 0
    if sched[_STOPPED] == 1:
        return st[_NRUN]
    # the loop's counters are kept in locals (the arrays they live in may alias the others, so
    # the compiler would reload them after every store) and written back before a preemption
    budget, count, free, n_run = sched[_BUDGET], sched[_COUNT], st[_BLOCKS], st[_NRUN]
    while i < n_run and budget > 0:
        s = running[i]
        comp = req[s, _COMP]
        if (comp >= req[s, _PLEN]) != decoding:
            other += 1
            i += 1
            continue
        need = min(req[s, _PLEN] + req[s, _GEN] - comp, budget)
        blocks = _more_blocks(comp + need, req[s, _HELD], layout)
        if blocks > free:
            sched[_BUDGET], sched[_COUNT], st[_BLOCKS] = budget, count, free
            while blocks > st[_BLOCKS]:
                if preempt_last(req, running, scheduled, waiting, st, sched) == s:
                    sched[_STOPPED] = 1
                    break
            if sched[_STOPPED] == 1:
                return other + (st[_NRUN] - i)
            budget, count, free, n_run = sched[_BUDGET], sched[_COUNT], st[_BLOCKS], st[_NRUN]
        free -= blocks
        req[s, _HELD] += blocks
        scheduled[i] = need
        start_ctx[i] = comp
        budget -= need
        count += 1
        i += 1
    sched[_BUDGET], sched[_COUNT], st[_BLOCKS] = budget, count, free
    return other + (st[_NRUN] - i)  # (those not reached are counted as possibly of the other kind)


@njit(inline="always", error_model="numpy")
def admit(req, running, scheduled, start_ctx, waiting, st, sched, max_seqs, layout, chunked,
          whole, clock, now, reserve, ratio):  # fmt: skip
    """Admit waiting requests first come first served while they fit (sequences, budget, blocks).

    A request the front end has not served by ``now`` stops admission (and those behind it).

    ``whole``: the blocks of the whole prompt are taken at admission (prefill-first engines
    reserve them, so a chunked prompt never waits for blocks halfway), else those of its first
    chunk.

    ``reserve`` (the four ``reserve_*`` settings) and ``ratio`` (the reserve's ratio now): an
    engine that admits a request only if the blocks of its whole prompt and of its output tokens
    (up to ``reserve_clip``) fit beside ``ratio`` times the blocks the running requests' remaining
    tokens will take (SGLang, TensorRT-LLM, TGI; ratio 0: vLLM, LMDeploy, which take blocks as
    the tokens come and preempt when they run out).
    """
    slots = waiting.shape[0]
    promised = _promised(req, running, st, layout, reserve, ratio)
    while st[_NWAIT] > 0 and st[_NRUN] < max_seqs and sched[_BUDGET] > 0:
        s = waiting[st[_HEAD]]
        if clock[s, _READY] > now:
            break
        base, kept = reused(req, s, st, layout)
        rest = req[s, _PLEN] + req[s, _GEN] - base
        if not chunked and rest > sched[_BUDGET]:
            break  # the whole prompt must fit in one step
        need = min(rest, sched[_BUDGET])
        blocks = _blocks_for(base + (rest if whole else need), layout)
        future = 0.0
        if reserve[0] > 0.0:  # its whole prompt and its output, beside the running's promise
            left = min(req[s, _OLEN] - req[s, _GEN], int(reserve[3]))
            future = float(_blocks_for(base + rest + left, layout) - blocks)
        if blocks + future + promised > st[_BLOCKS]:
            break
        promised += future
        st[_HEAD] = (st[_HEAD] + 1) % slots
        st[_NWAIT] -= 1
        st[_BLOCKS] -= blocks
        if kept:  # its own cached blocks, found again: taken back, not allocated
            st[_RETURNED] -= _blocks_for(base, layout)
        req[s, _KEPT] = 0
        req[s, _HELD] = blocks
        req[s, _COMP] = base
        running[st[_NRUN]] = s
        scheduled[st[_NRUN]] = need
        start_ctx[st[_NRUN]] = base
        st[_NRUN] += 1
        sched[_BUDGET] -= need
        sched[_COUNT] += 1


@njit(inline="always", error_model="numpy")
def _taken(st):
    """Blocks allocated from the pool so far: those in use and those given back.

    (A preempted request's own cached blocks found again at its readmission are no allocation.)
    """
    return st[_POOL] - st[_BLOCKS] + st[_RETURNED]


@njit(inline="always", error_model="numpy")
def reused(req, s, st, layout):
    """(Tokens of request ``s``'s context already in cached KV blocks, whether its own kept ones).

    Its prefix-cache hit in whole blocks (never the last prompt token); after a preemption by an
    engine that keeps the preempted blocks cached (vLLM V1: the freed blocks keep their hashes and
    are evicted only when an allocation takes them, the least recently freed first and a request's
    last blocks before its first), the whole blocks it had computed less those evicted since: the
    allocations past the blocks that were free at its preemption take its blocks. At least its
    last token is computed again.
    """
    block = layout[0]
    base = min((req[s, _HIT] // block) * block, req[s, _PLEN] - 1)
    whole = (req[s, _KEPT] // block) * block
    if whole <= base:
        return base, False
    held = _blocks_for(whole, layout)
    left = max(held - max(_taken(st) - req[s, _MARK] - req[s, _AHEAD], 0), 0)
    valid = min(((whole // block) * left // held) * block, req[s, _PLEN] + req[s, _GEN] - 1)
    if valid <= base:
        return base, False
    return valid, True


@njit(inline="always", error_model="numpy")
def _promised(req, running, st, layout, reserve, ratio):
    """Blocks the running requests' remaining tokens will take, times ``ratio`` (0: no reserve).

    Each request's tokens to come: its prompt not yet in blocks and its output up to
    ``reserve_clip`` tokens (``reserve[3]``), less the blocks it holds.
    """
    promised = 0.0
    if reserve[0] <= 0.0 or st[_NWAIT] == 0:
        return promised
    clip = int(reserve[3])
    for i in range(st[_NRUN]):
        r = running[i]
        left = min(req[r, _OLEN] - req[r, _GEN], clip)
        more = _blocks_for(req[r, _PLEN] + req[r, _GEN] + left, layout) - req[r, _HELD]
        if more > 0:
            promised += ratio * more
    return promised


@njit(inline="always", error_model="numpy")
def _work(running, scheduled, start_ctx, n_running, model):
    """(tokens, token pairs of attention, KV tokens read) of the scheduled work, in running order.

    Windowed layers attend within their window (:func:`capnb.kernels.latency.attention_work`).
    """
    tokens = 0.0
    pairs = 0.0
    kv_read = 0.0
    for i in range(n_running):
        if scheduled[i] == 0:
            continue
        nn = float(scheduled[i])
        tokens += nn
        p, kv = attention_work(float(start_ctx[i]), nn, model)
        pairs += p
        kv_read += kv
    return tokens, pairs, kv_read


@njit(inline="always", error_model="numpy")
def finish(s, req, clock, c_arrive, c_first, st, ft, cumulative, ttft, e2e, features, warmup,
           request_overhead):  # fmt: skip
    """A request's last token: record its latencies and features, count the window."""
    n = ttft.shape[0]
    reported = n - warmup
    r = req[s, _RID]
    if r < n and r >= warmup:
        ttft[r] = clock[s, _FIRST] - clock[s, _ARR] + request_overhead
        e2e[r] = ft[_T] - clock[s, _ARR] + request_overhead
        c_first[s, _NF - 1] += 1.0  # the request's own overhead, once
        for f in range(_NF):
            ttft_f = c_first[s, f] - c_arrive[s, f]
            e2e_f = cumulative[f] + (f == _NF - 1) - c_arrive[s, f]
            features[0, f] += ttft_f
            features[2, f] += e2e_f
            if req[s, _OLEN] > 1:
                features[1, f] += (e2e_f - ttft_f) / (req[s, _OLEN] - 1)
        st[_DONE] += 1
    st[_COMPLETED] += 1
    ft[_OUT_TOKENS] += req[s, _OLEN]
    if st[_COMPLETED] == warmup:
        ft[_WSTART] = ft[_T]
        ft[_WTOKENS0] = ft[_OUT_TOKENS]
    if st[_DONE] == reported and st[_WINDOW] == 0:
        if st[_COMPLETED] > warmup:
            st[_WINDOW] = st[_COMPLETED] - warmup
            ft[_WTOKENS] = ft[_OUT_TOKENS] - ft[_WTOKENS0]
        else:  # (a warm-up share above one half) count from time 0
            st[_WINDOW] = st[_COMPLETED]
            ft[_WTOKENS] = ft[_OUT_TOKENS]
            ft[_WSTART] = 0.0


@njit(inline="always", error_model="numpy")
def _advance(prompt, output, cached, req, clock, c_arrive, c_first, running, scheduled, waiting,
             free_slots, st, ft, cumulative, closed, ttft, e2e, itl, itl_offset, features, warmup,
             request_overhead, frontend):  # fmt: skip
    """The step's tokens are sampled; finished requests free their blocks (closed loop: refill)."""
    n = prompt.shape[0]
    kept = 0
    for i in range(st[_NRUN]):
        s = running[i]
        done = False
        if scheduled[i] > 0:
            req[s, _COMP] += scheduled[i]
            if req[s, _COMP] == req[s, _PLEN] + req[s, _GEN]:
                req[s, _GEN] += 1
                r = req[s, _RID]
                if req[s, _GEN] == 1:
                    clock[s, _FIRST] = ft[_T]
                    for f in range(cumulative.size):  # as in enqueue: no slice copy
                        c_first[s, f] = cumulative[f]
                elif r < n and r >= warmup:
                    itl[itl_offset[r] + req[s, _GEN] - 2] = ft[_T] - clock[s, _LAST]
                clock[s, _LAST] = ft[_T]
                done = req[s, _GEN] == req[s, _OLEN]
        scheduled[i] = 0  # consumed (the next step starts from none)
        if not done:
            running[kept] = s
            kept += 1
            continue
        st[_BLOCKS] += req[s, _HELD]
        st[_RETURNED] += req[s, _HELD]
        req[s, _HELD] = 0
        finish(s, req, clock, c_arrive, c_first, st, ft, cumulative, ttft, e2e, features, warmup,
               request_overhead)  # fmt: skip
        free_slots[st[_NFREE]] = s
        st[_NFREE] += 1
        if closed:  # the next request takes its place at once
            st[_NFREE] -= 1
            ns = free_slots[st[_NFREE]]
            i_next = st[_NEXT]
            enqueue(ns, i_next, i_next % n, ft[_T], prompt, output, cached, req, clock, c_arrive,
                    cumulative, waiting, st, ft, frontend)  # fmt: skip
            st[_NEXT] += 1
    st[_NRUN] = kept


@njit(inline="always", error_model="numpy")
def _schedule(policy, chunked, max_seqs, layout, budget, req, running, scheduled, start_ctx,
              waiting, st, sched, clock, now, reserve, ft):  # fmt: skip
    """One step's schedule under the engine's policy; the requests scheduled.

    The admission reserve's ratio (``ft[_RATIO]``, SGLang's ``new_token_ratio``) starts at
    ``reserve_ratio`` and again whenever nothing runs or a request was preempted, and falls by
    ``reserve_decay`` with every decode step to ``reserve_min_ratio``.
    """
    sched[_BUDGET] = budget
    sched[_COUNT] = 0
    sched[_PREEMPTED] = 0
    sched[_STOPPED] = 0
    if st[_NRUN] == 0:
        ft[_RATIO] = reserve[0]
    # (scheduled[:n_running] is 0 here: :func:`_advance` clears what it consumed)
    if policy == 0:  # mixed: decodes, prompts in progress, then admission
        if schedule_running(True, req, running, scheduled, start_ctx, waiting, st, sched, layout):
            schedule_running(False, req, running, scheduled, start_ctx, waiting, st, sched, layout)
        if sched[_PREEMPTED] == 0:
            admit(req, running, scheduled, start_ctx, waiting, st, sched, max_seqs, layout, chunked,
                  False, clock, now, reserve, ft[_RATIO])  # fmt: skip
        ft[_RATIO] = max(ft[_RATIO] - reserve[2], reserve[1])
    else:  # prefill first: a prefill-only step when any prompt can run, else the decodes
        schedule_running(False, req, running, scheduled, start_ctx, waiting, st, sched, layout)
        if sched[_PREEMPTED] == 0:
            admit(req, running, scheduled, start_ctx, waiting, st, sched, max_seqs, layout, chunked,
                  True, clock, now, reserve, ft[_RATIO])  # fmt: skip
        if sched[_COUNT] == 0:
            schedule_running(True, req, running, scheduled, start_ctx, waiting, st, sched, layout)
            ft[_RATIO] = max(ft[_RATIO] - reserve[2], reserve[1])
    if sched[_PREEMPTED] > 0:
        ft[_RATIO] = reserve[0]
    return sched[_COUNT]


@njit(error_model="numpy")
def simulate(prompt, output, gaps, cached, settings, model, gpu, tensor_parallel, calibration,
             ttft, e2e, itl, stats, features):  # fmt: skip
    """Simulate one load point; per-request outputs over the ``n`` sampled requests.

    ``ttft``, ``e2e`` (n): seconds, NaN for unreported requests (warm-up, or never run). ``itl``:
    every gap of the reported requests, packed request by request (length sum of max(output - 1,
    0); NaN for a gap never reached); returns that length. ``stats``: :data:`STATS`.
    ``features`` (3, 7): mean features of TTFT, per-request TPOT and E2E over the reported
    requests.
    """
    n = prompt.shape[0]
    closed = settings[0] > 0.5
    load = settings[1]
    budget = int(settings[3])
    if settings.shape[0] < 12:
        raise ValueError("settings: the 12 values of SETTINGS are needed")
    reserve = np.zeros(4)  # (twelve values: no admission reserve)
    if settings.shape[0] >= 16:
        reserve[:] = settings[12:16]
    layout = (int(settings[5]), int(settings[9]), int(settings[10]), int(settings[11]))
    warmup = int(settings[6])
    policy = int(settings[7])
    chunked = settings[8] > 0.5
    concurrency = int(load) if closed else 0
    slots = (concurrency if closed else n) + 1
    # no more sequences run than requests are in the engine: a limit past them (2**31 - 1, or TGI's
    # 0 read as the KV cache's blocks) sizes the running arrays by the requests instead
    max_seqs = min(int(settings[2]), slots)
    req = np.zeros((slots, 10), np.int64)
    clock = np.zeros((slots, 4))
    c_arrive = np.zeros((slots, _NF))  # cumulative features at arrival and first token
    c_first = np.zeros((slots, _NF))
    free_slots = np.arange(slots)[::-1].copy()
    waiting = np.zeros(slots, np.int64)  # a ring of slots: head .. head + n_waiting
    running = np.zeros(max_seqs, np.int64)
    scheduled = np.zeros(max_seqs, np.int64)  # new tokens of running[i] this step
    start_ctx = np.zeros(max_seqs, np.int64)
    st = np.zeros(14, np.int64)
    st[_POOL] = int(settings[4])
    st[_KEEP] = 1 if settings.shape[0] >= 17 and settings[16] > 0.5 else 0
    ft = np.zeros(10)
    ft[_RATIO] = reserve[0]
    sched = np.zeros(4, np.int64)
    st[_NFREE] = slots
    st[_BLOCKS] = int(settings[4])
    itl_offset = np.zeros(n + 1, np.int64)
    for i in range(n):
        extra = output[i] - 1 if i >= warmup and output[i] > 1 else 0
        itl_offset[i + 1] = itl_offset[i] + extra
    ttft[:] = math.nan
    e2e[:] = math.nan
    itl[:] = math.nan  # a request that never runs leaves its gaps unreported, not unwritten memory
    features[:, :] = 0.0
    cumulative = np.zeros(_NF)
    step_features = np.zeros(_NF)
    scratch = np.zeros(_NF)
    if not closed and n > 0:
        ft[_NEXT_T] = gaps[0] / load
    frontend = _frontend_s(calibration)
    for _ in range(concurrency):  # closed loop: the first requests arrive at time 0
        st[_NFREE] -= 1
        i = st[_NEXT]
        enqueue(free_slots[st[_NFREE]], i, i % n, 0.0, prompt, output, cached, req, clock,
                c_arrive, cumulative, waiting, st, ft, frontend)  # fmt: skip
        st[_NEXT] += 1

    _loop(prompt, output, gaps, cached, closed, load, max_seqs, budget, layout, warmup, policy,
          chunked, model, gpu, tensor_parallel, calibration, ttft, e2e, itl, itl_offset, features,
          req, clock, c_arrive, c_first, free_slots, waiting, running, scheduled, start_ctx, st, ft,
          sched, cumulative, step_features, scratch, reserve)  # fmt: skip
    _summary_stats(output, warmup, st, ft, features, stats)
    return itl_offset[n]


@njit(error_model="numpy", _nrt=False)
def _loop(prompt, output, gaps, cached, closed, load, max_seqs, budget, layout, warmup, policy,
          chunked, model, gpu, tensor_parallel, calibration, ttft, e2e, itl, itl_offset, features,
          req, clock, c_arrive, c_first, free_slots, waiting, running, scheduled, start_ctx, st, ft,
          sched, cumulative, step_features, scratch, reserve):  # fmt: skip
    """The steps of :func:`simulate` until every reported request is done.

    Compiled without numba's reference counting (``_nrt=False``; as the autoscaling loop,
    :mod:`capnb.kernels.autoscale_loop`): the steps inlined here pass their arrays on, and numba
    would count a reference per array and step (about half the time of a step at concurrency 1).
    Nothing here allocates: :func:`simulate` makes every array.
    """
    n = prompt.shape[0]
    frontend = _frontend_s(calibration)
    while st[_DONE] < n - warmup:
        if not closed:
            arrive(prompt, output, cached, gaps, load, req, clock, c_arrive, waiting, free_slots,
                   st, ft, cumulative, step_features, scratch, frontend)  # fmt: skip
        count = _schedule(policy, chunked, max_seqs, layout, budget, req, running, scheduled,
                          start_ctx, waiting, st, sched, clock, ft[_T], reserve, ft)  # fmt: skip
        if count == 0:
            if sched[_PREEMPTED] == 1:
                continue  # a prompt preempted itself: the freed blocks let the decodes run next
            if st[_NWAIT] > 0 and clock[waiting[st[_HEAD]], _READY] > ft[_T]:
                # the next request is still in the front end: to its release (or an arrival)
                ready = clock[waiting[st[_HEAD]], _READY]
                if not closed and st[_NEXT] < n:
                    ready = min(ready, ft[_NEXT_T])
                ft[_T] = max(ft[_T], ready)
                ft[_LAST_DT] = 0.0
                continue
            if closed or st[_NEXT] >= n:
                break  # nothing can run and nothing will arrive: cannot happen with valid inputs
            ft[_T] = max(ft[_T], ft[_NEXT_T])
            ft[_LAST_DT] = 0.0
            continue
        tokens, pairs, kv_read = _work(running, scheduled, start_ctx, st[_NRUN], model)
        dt = step_time(tokens, pairs, kv_read, float(count), model, gpu, tensor_parallel,
                       calibration, step_features)  # fmt: skip
        ft[_T] += dt
        ft[_LAST_DT] = dt
        for f in range(_NF):
            cumulative[f] += step_features[f]
        st[_STEPS] += 1
        ft[_BATCH] += count
        _advance(prompt, output, cached, req, clock, c_arrive, c_first, running, scheduled,
                 waiting, free_slots, st, ft, cumulative, closed, ttft, e2e, itl, itl_offset,
                 features, warmup, calibration[6], frontend)  # fmt: skip


@njit(error_model="numpy")
def _summary_stats(output, warmup, st, ft, features, stats):
    n = output.shape[0]
    reported = n - warmup
    with_tpot = 0
    for r in range(warmup, n):
        if output[r] > 1:
            with_tpot += 1
    if reported > 0:
        for f in range(_NF):
            features[0, f] /= reported
            features[2, f] /= reported
            features[1, f] = features[1, f] / with_tpot if with_tpot > 0 else 0.0
    span = ft[_T] - ft[_WSTART]
    stats[0] = st[_WINDOW] / span if span > 0.0 else math.nan
    stats[1] = ft[_WTOKENS] / span if span > 0.0 else math.nan
    stats[2] = st[_PREEMPT]
    stats[3] = st[_STEPS]
    stats[4] = ft[_BATCH] / st[_STEPS] if st[_STEPS] > 0 else 0.0
    stats[5] = ft[_T]


@njit(error_model="numpy")
def _select(values, lo, hi, k):
    """Move the k-th smallest of values[lo:hi] to index k (values[lo:k] <= it <= values[k+1:hi])."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        a, b, c = values[lo], values[mid], values[hi - 1]  # median of three as the pivot
        if a > b:
            a, b = b, a
        if b > c:
            b = c
            if a > b:
                b = a
        pivot = b
        i, j = lo, hi - 1
        while i <= j:
            while values[i] < pivot:
                i += 1
            while values[j] > pivot:
                j -= 1
            if i <= j:
                values[i], values[j] = values[j], values[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j + 1
        elif k >= i:
            lo = i
        else:
            return


@njit(error_model="numpy")
def _quantile_rank(q, n):
    k = math.ceil(q * n - 1e-9) - 1  # inverse-CDF rank (the tolerance keeps q n = 99.0000001 at 99)
    return min(max(k, 0), n - 1)


@njit(error_model="numpy")
def _quantiles(values, count, quantiles, out):
    """Inverse-CDF quantiles of values[:count] (which may be reordered); NaN when count is 0."""
    if count == 0:
        for k in range(quantiles.shape[0]):
            out[k] = math.nan
        return
    if count >= _BRACKETED:
        _bracketed_quantiles(values, count, quantiles, out)
        return
    _selected_quantiles(values, count, quantiles, out)


@njit(error_model="numpy")
def _selected_quantiles(values, count, quantiles, out):
    """:func:`_quantiles` by selection in place, each narrowing the next (ascending quantiles)."""
    lo = 0
    for k in range(quantiles.shape[0]):
        rank = _quantile_rank(quantiles[k], count)
        if rank < lo:
            lo = 0
        _select(values, lo, count, rank)
        out[k] = values[rank]
        lo = rank


#: Values from which :func:`_quantiles` brackets each rank with a sample first (the ITL of a
#: curve's point: 2,000 requests of 200 tokens hold 400,000 gaps).
_BRACKETED = 16384
#: The sample's size, and how many sample positions either side of a rank its bracket spans.
_SAMPLE, _SPREAD = 2048, 64


@njit(error_model="numpy")
def _bracketed_quantiles(values, count, quantiles, out):
    """:func:`_quantiles` of many values: one pass instead of a selection over all of them.

    The k-th smallest value lies, almost surely, between two values of an evenly strided sample
    around its rank; one pass counts the values below each bracket and gathers those inside it,
    and the rank is selected among the gathered. Where the count below a bracket shows the rank
    outside it (or a bracket overflows), that quantile is selected over every value instead: the
    same value either way (the k-th smallest is unique), only the time differs.
    """
    nq = quantiles.shape[0]
    stride = count // _SAMPLE
    sample = np.empty(_SAMPLE)
    for i in range(_SAMPLE):
        sample[i] = values[i * stride]
    sample.sort()
    lower, upper, ranks = np.empty(nq), np.empty(nq), np.empty(nq, np.int64)
    for k in range(nq):
        ranks[k] = _quantile_rank(quantiles[k], count)
        at = ranks[k] * _SAMPLE // count
        lower[k] = sample[at - _SPREAD] if at - _SPREAD >= 0 else -math.inf
        upper[k] = sample[at + _SPREAD] if at + _SPREAD < _SAMPLE else math.inf
    capacity = 8 * _SPREAD * (count // _SAMPLE + 1)
    gathered = np.empty(capacity + 1)  # (the last place takes the writes past capacity)
    for k in range(nq):
        lo, hi = lower[k], upper[k]
        below = 0
        inside = 0
        for i in range(count):  # without branches: a value is written at the gathered end
            v = values[i]  # always, and kept (the end moves on) when it lies inside
            below += v < lo
            gathered[min(inside, capacity)] = v
            inside += (v >= lo) & (v <= hi)
        at = ranks[k] - below
        if 0 <= at < inside and lo == hi:
            out[k] = lo  # (every value inside is that one: many gaps are equal)
        elif 0 <= at < inside <= capacity:
            _select(gathered, 0, inside, at)
            out[k] = gathered[at]
        else:  # the bracket missed the rank (or overflowed): select over every value
            one = np.empty(1)
            _selected_quantiles(values, count, quantiles[k : k + 1], one)
            out[k] = one[0]


@njit(error_model="numpy")
def _summarise(ttft, e2e, output, itl, n_itl, warmup, quantiles, latency_out, mean_out):
    n = ttft.shape[0]
    reported = n - warmup
    values = np.empty(max(reported, 1))
    tpot = np.empty(max(reported, 1))
    n_tpot = 0
    for r in range(warmup, n):
        if output[r] > 1:
            tpot[n_tpot] = (e2e[r] - ttft[r]) / (output[r] - 1)
            n_tpot += 1
    for m in range(4):
        total = 0.0
        if m == 0 or m == 3:
            source = ttft if m == 0 else e2e
            for r in range(warmup, n):
                values[r - warmup] = source[r]
                total += source[r]
            mean_out[m] = total / reported if reported > 0 else math.nan
            _quantiles(values, reported, quantiles, latency_out[m])
        elif m == 1:
            for r in range(n_tpot):
                total += tpot[r]
            mean_out[m] = total / n_tpot if n_tpot > 0 else math.nan
            _quantiles(tpot, n_tpot, quantiles, latency_out[m])
        else:
            for r in range(n_itl):
                total += itl[r]
            mean_out[m] = total / n_itl if n_itl > 0 else math.nan
            _quantiles(itl, n_itl, quantiles, latency_out[m])


@njit(error_model="numpy")
def _engine_curve(prompt, output, gaps, cached, settings, model, gpu, tensor_parallel,
                  calibration, quantiles, latency_out, mean_out, stats_out, features_out):  # fmt: skip
    n = prompt.shape[0]
    warmup = int(settings[6])
    ttft = np.empty(n)
    e2e = np.empty(n)
    size = 0
    for i in range(warmup, n):
        size += max(output[i] - 1, 0)
    itl = np.empty(max(size, 1))
    # simulate sees contiguous arrays here as from Python (the calibration's fit, the tests): one
    # compiled version of it, not one per layout (each costs about 10 s of CPU on a fresh install)
    c = np.ascontiguousarray
    stats = np.empty(stats_out.shape[0])
    features = np.empty((features_out.shape[0], features_out.shape[1]))
    n_itl = simulate(c(prompt), c(output), c(gaps), c(cached), c(settings), c(model), c(gpu),
                     tensor_parallel, c(calibration), ttft, e2e, itl, stats, features)  # fmt: skip
    for i in range(stats.size):  # element by element, as in enqueue
        stats_out[i] = stats[i]
    for i in range(features.shape[0]):
        for f in range(features.shape[1]):
            features_out[i, f] = features[i, f]
    _summarise(ttft, e2e, output, itl, n_itl, warmup, quantiles, latency_out, mean_out)


def _curve_entry(prompt, output, gaps, cached, settings, model, gpu, tensor_parallel, calibration,
                 quantiles, dummy_r, dummy_t, dummy_u, dummy_f, latency_out, mean_out, stats_out,
                 features_out):  # fmt: skip
    _engine_curve(prompt, output, gaps, cached, settings, model, gpu, tensor_parallel,
                  calibration, quantiles, latency_out, mean_out, stats_out, features_out)  # fmt: skip


#: One load point per ``settings`` row: latency quantiles [metric, quantile] (s), means [metric]
#: (s), :data:`STATS`, and mean features [ttft/tpot/e2e, :data:`FEATURES`]. Broadcasts over the
#: leading dims of ``settings`` (the load points) and is split over threads for large calls.
engine_curve = guvectorize(
    [
        "void(i8[:], i8[:], f8[:], i8[:], f8[:], f8[:], f8[:], i8, f8[:], f8[:],"
        " f8[:], f8[:], f8[:], f8[:], f8[:, :], f8[:], f8[:], f8[:, :])"
    ],
    "(n),(n),(n),(n),(s),(k),(g),(),(j),(q),(r),(t),(u),(f)->(r,q),(r),(t),(u,f)",
    threads=True,
)(_curve_entry)

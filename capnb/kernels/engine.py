"""Engine kernel: a request-level simulation of continuous batching, as vLLM (V1) and SGLang schedule.

One call simulates one serving instance (a tensor-parallel group) at one load, step by step:

Scheduling (every step, token budget ``max_num_batched_tokens``)
    1. *Running* requests get their next tokens: first every decoding request one token, then
       each request still in its prompt (a chunked prefill, or a recompute after preemption) the
       rest of its prompt up to the budget left; both in admission order. A request needs KV
       blocks for all its computed tokens plus the new ones (``block_size`` tokens a block).
       When the free blocks do not suffice, the most recently admitted running request is
       *preempted*: its blocks are freed, its computed tokens forgotten (recompute; a decode it
       was given this step is taken back), and it goes back to the front of the waiting queue.
       The request being scheduled may preempt itself (then nothing else is scheduled this step).
    2. If nothing was preempted in this step, *waiting* requests are admitted first come first
       served while fewer than ``max_num_seqs`` run, budget is left and the free blocks hold the
       request's cached prefix plus its first chunk; the first that does not fit stops admission.
    A request's prefix-cache hit (an input share of its prompt, whole blocks only, never the last
    prompt token) is not computed but holds KV blocks. A step that completes a request's prompt
    (or its recompute) samples a token, as does every decode; a request ends with its last token
    and frees its blocks at the end of that step.

Step time (per GPU of the group; the roofline of :mod:`capnb.kernels.latency`)
    A step computing ``T`` tokens for ``S`` sequences, where sequence ``i`` computes ``n_i`` new
    tokens after ``s_i`` already in its cache::

        FLOP  = active FLOP per token x T + 4 x layers x attention width x sum(n_i s_i + n_i (n_i+1)/2)
        bytes = weights + KV bytes per token x sum(s_i + n_i)
        step  = step_overhead + sequence_overhead x S + allreduce_latency x 2 layers log2(TP)
                + 2 layers x T x hidden x 2 bytes x 2 (TP-1)/TP / (link bandwidth x link efficiency)
                + max(FLOP / (FLOP/s x compute efficiency), bytes / (HBM bytes/s x bandwidth efficiency))

    A pure decode step of ``b`` sequences at context ``L`` and a prefill of ``p`` tokens are the
    analytic model's (:func:`capnb.kernels.latency.decode_seconds`, ``prefill_seconds``) up to the
    causal diagonal (``p (p + 1) / 2`` token pairs, not ``p^2 / 2``) and the KV the step writes.

Load
    Closed loop (``closed`` = 1): ``load`` requests start at time 0 and each one that finishes is
    replaced at once by the next; requests past the ``n`` sampled ones reuse the samples cyclically,
    so the reported requests all see the full concurrency. Open loop: request ``i`` arrives at
    ``sum(gaps[:i + 1]) / load`` (``gaps``: unit-mean inter-arrival times drawn by the caller;
    all zero: one batch at time 0).

Per reported request (index ``warmup`` to ``n - 1``): TTFT (first token - arrival + the request
overhead, ``calibration[6]``: time outside the GPU's steps, once per request), E2E (last token -
arrival + the same overhead), TPOT = (E2E - TTFT) / (output - 1) (requests with one output token
have none), and every inter-token gap (ITL). Quantiles use the inverse-CDF definition, as in
:mod:`capnb.kernels.latency`.

For the calibration the kernel also returns, per metric, the mean over reported requests of the
step-time *features* their latency is made of (the roofline arm each step priced, the link term,
1, sequences, all-reduces; :data:`FEATURES`): a step's time is the calibration's linear
combination of its features, so a closed-loop mean latency is exactly ``features . parameters``.
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import guvectorize, njit
from .latency import _ACTIVATION_BYTES, _combine
from .latency import CALIBRATION_FIELDS as _latency_fields

__all__ = [
    "CALIBRATION_FIELDS",
    "FEATURES",
    "METRICS",
    "SETTINGS",
    "STATS",
    "engine_curve",
    "mixed_step",
    "simulate",
]

#: Order of the ``settings`` vector.
SETTINGS = ("closed", "load", "max_num_seqs", "max_num_batched_tokens", "kv_blocks", "block_size",
            "warmup")  # fmt: skip
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
#: The engine's calibration vector: the analytic model's six values, then the seconds added once
#: to each request's TTFT outside the steps (tokenising, the server's queues, the network).
CALIBRATION_FIELDS = (*_latency_fields, "request_overhead_s")


@njit
def mixed_step(tokens, pairs, kv_read, sequences, model, gpu, tensor_parallel, calibration, out):
    """Seconds of one mixed step; ``out`` (6) receives its features (:data:`FEATURES`)."""
    flop_per_token, weights, kv_per_token = model[0], model[1], model[2]
    layers, attention_width, hidden = model[3], model[4], model[5]
    flops, bandwidth, interconnect = gpu[0], gpu[1], gpu[2]
    compute = (flop_per_token * tokens + 4.0 * layers * attention_width * pairs) / flops
    memory = (weights + kv_per_token * kv_read) / bandwidth
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


@njit
def _blocks_for(tokens, block):
    return (tokens + block - 1) // block


@njit
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


@njit
def _quantile_rank(q, n):
    k = math.ceil(q * n - 1e-9) - 1  # inverse-CDF rank (the tolerance keeps q n = 99.0000001 at 99)
    return min(max(k, 0), n - 1)


@njit
def _quantiles(values, count, quantiles, out):
    """Inverse-CDF quantiles of values[:count] (reordered in place); NaN when count is 0."""
    if count == 0:
        for k in range(quantiles.shape[0]):
            out[k] = math.nan
        return
    lo = 0
    for k in range(quantiles.shape[0]):  # quantiles ascend: each selection narrows the next
        rank = _quantile_rank(quantiles[k], count)
        if rank < lo:
            lo = 0
        _select(values, lo, count, rank)
        out[k] = values[rank]
        lo = rank


@njit
def simulate(prompt, output, gaps, cached, settings, model, gpu, tensor_parallel, calibration,
             ttft, e2e, itl, stats, features):  # fmt: skip
    """Simulate one load point; per-request outputs over the ``n`` sampled requests.

    ``ttft``, ``e2e`` (n): seconds, NaN for unreported (warm-up) requests. ``itl``: every gap of
    the reported requests, packed request by request (length sum of max(output - 1, 0)); returns
    the number written. ``stats``: :data:`STATS`. ``features`` (3, 6): mean features of TTFT,
    per-request TPOT and E2E over the reported requests.
    """
    n = prompt.shape[0]
    closed = settings[0] > 0.5
    load = settings[1]
    max_seqs = int(settings[2])
    budget_tokens = int(settings[3])
    free_blocks = int(settings[4])
    block = int(settings[5])
    warmup = int(settings[6])
    request_overhead = calibration[6]
    concurrency = int(load) if closed else 0
    slots = (concurrency if closed else n) + 1
    # per-slot state (a slot holds one request in flight)
    rid = np.zeros(slots, np.int64)
    p_len = np.zeros(slots, np.int64)
    o_len = np.zeros(slots, np.int64)
    hit = np.zeros(slots, np.int64)
    computed = np.zeros(slots, np.int64)
    generated = np.zeros(slots, np.int64)
    held = np.zeros(slots, np.int64)  # KV blocks held
    arrived = np.zeros(slots)
    first = np.zeros(slots)
    last = np.zeros(slots)
    c_arrive = np.zeros((slots, _NF))  # cumulative features at arrival and first token
    c_first = np.zeros((slots, _NF))
    free_slots = np.arange(slots)[::-1].copy()
    n_free = slots
    waiting = np.zeros(slots, np.int64)  # a ring of slots: head .. head + n_waiting
    head = 0
    n_waiting = 0
    running = np.zeros(max_seqs, np.int64)
    n_running = 0
    scheduled = np.zeros(max_seqs, np.int64)  # new tokens of running[i] this step
    start_ctx = np.zeros(max_seqs, np.int64)
    itl_offset = np.zeros(n + 1, np.int64)
    for i in range(n):
        extra = output[i] - 1 if i >= warmup and output[i] > 1 else 0
        itl_offset[i + 1] = itl_offset[i] + extra
    for i in range(n):
        ttft[i] = math.nan
        e2e[i] = math.nan
    for m in range(3):
        for f in range(_NF):
            features[m, f] = 0.0
    cumulative = np.zeros(_NF)
    step_features = np.zeros(_NF)
    reported = n - warmup
    done = 0
    next_request = 0
    next_time = 0.0  # open loop: arrival time of request next_request
    if not closed and n > 0:
        next_time = gaps[0] / load
    t = 0.0
    last_dt = 0.0
    end_tokens = 0.0
    preemptions = 0
    steps = 0
    batch_sum = 0.0
    completions = 0  # every finished request, reported or not
    window_start = (
        0.0  # the steady-state window: from the warmup-th completion to the last reported
    )
    start_tokens = 0.0
    out_tokens = 0.0
    window_completions = 0

    # closed loop: the first ``concurrency`` requests arrive at time 0
    if closed:
        for _ in range(concurrency):
            n_free -= 1
            s = free_slots[n_free]
            j = next_request % n
            rid[s] = next_request
            p_len[s], o_len[s], hit[s] = prompt[j], output[j], cached[j]
            computed[s], generated[s], held[s] = 0, 0, 0
            arrived[s] = 0.0
            c_arrive[s, :] = cumulative
            waiting[(head + n_waiting) % slots] = s
            n_waiting += 1
            next_request += 1

    while done < reported:
        # open-loop arrivals up to now (those during the last step arrived part-way through it)
        if not closed:
            if n_running == 0 and n_waiting == 0 and next_request < n and next_time > t:
                t = next_time  # idle: jump to the next arrival
                last_dt = 0.0
            while next_request < n and next_time <= t:
                n_free -= 1
                s = free_slots[n_free]
                rid[s] = next_request
                p_len[s], o_len[s], hit[s] = prompt[next_request], output[next_request], cached[
                    next_request]  # fmt: skip
                computed[s], generated[s], held[s] = 0, 0, 0
                arrived[s] = next_time
                share = (t - next_time) / last_dt if last_dt > 0.0 else 0.0
                for f in range(_NF):
                    c_arrive[s, f] = cumulative[f] - share * step_features[f]
                waiting[(head + n_waiting) % slots] = s
                n_waiting += 1
                next_request += 1
                if next_request < n:
                    next_time = next_time + gaps[next_request] / load
        # 1. running requests: decodes first (one token each), then the prompts in progress
        #    (chunked prefills and recomputes) take what the budget leaves; each in admission order
        budget = budget_tokens
        preempted = False
        stopped = False  # a request preempted itself: the cache is full, nothing more runs
        count = 0  # requests scheduled this step
        prompts = 0  # running requests still in their prompt
        for i in range(n_running):
            scheduled[i] = 0
        for decodes in (True, False):
            if not decodes and prompts == 0:
                break  # (every running request decodes: no second pass)
            i = 0
            while not stopped and i < n_running and budget > 0:
                s = running[i]
                if (computed[s] >= p_len[s]) != decodes:
                    prompts += decodes
                    i += 1
                    continue
                need = min(p_len[s] + generated[s] - computed[s], budget)
                blocks = 0
                if computed[s] + need > held[s] * block:  # (a new block is needed)
                    blocks = _blocks_for(computed[s] + need, block) - held[s]
                while blocks > free_blocks:  # preempt the last admitted (recompute)
                    j = n_running - 1
                    victim = running[j]
                    budget += scheduled[j]  # a decode scheduled already gives its token back
                    count -= scheduled[j] > 0
                    scheduled[j] = 0
                    n_running -= 1
                    free_blocks += held[victim]
                    held[victim] = 0
                    computed[victim] = 0
                    head = (head - 1) % slots
                    waiting[head] = victim
                    n_waiting += 1
                    preemptions += 1
                    preempted = True
                    if victim == s:
                        stopped = True
                        break
                if stopped:
                    break
                free_blocks -= blocks
                held[s] += blocks
                scheduled[i] = need
                start_ctx[i] = computed[s]
                budget -= need
                count += 1
                i += 1
        # 2. admission, first come first served, only when nothing was preempted
        if not preempted:
            while n_waiting > 0 and n_running < max_seqs and budget > 0:
                s = waiting[head]
                base = (hit[s] // block) * block
                base = min(base, p_len[s] - 1)
                need = min(p_len[s] + generated[s] - base, budget)
                blocks = _blocks_for(base + need, block)
                if blocks > free_blocks:
                    break
                head = (head + 1) % slots
                n_waiting -= 1
                free_blocks -= blocks
                held[s] = blocks
                computed[s] = base
                running[n_running] = s
                scheduled[n_running] = need
                start_ctx[n_running] = base
                n_running += 1
                budget -= need
                count += 1
        if count == 0:
            if closed or next_request >= n:
                break  # nothing can run and nothing will arrive: cannot happen with valid inputs
            t = max(t, next_time)
            last_dt = 0.0
            continue
        # 3. the step's time from what it computes
        tokens = 0.0
        pairs = 0.0
        kv_read = 0.0
        for i in range(n_running):
            if scheduled[i] == 0:
                continue
            nn = float(scheduled[i])
            ss = float(start_ctx[i])
            tokens += nn
            pairs += nn * ss + 0.5 * nn * (nn + 1.0)
            kv_read += ss + nn
        dt = mixed_step(tokens, pairs, kv_read, float(count), model, gpu, tensor_parallel,
                        calibration, step_features)  # fmt: skip
        t += dt
        last_dt = dt
        for f in range(_NF):
            cumulative[f] += step_features[f]
        steps += 1
        batch_sum += count
        # 4. advance: tokens sampled, requests finished (blocks freed, closed loop refilled)
        kept = 0
        for i in range(n_running):
            s = running[i]
            finished = False
            if scheduled[i] > 0:
                computed[s] += scheduled[i]
                if computed[s] == p_len[s] + generated[s]:
                    generated[s] += 1
                    r = rid[s]
                    mine = r < n and r >= warmup
                    if generated[s] == 1:
                        first[s] = t
                        c_first[s, :] = cumulative
                    elif mine:
                        itl[itl_offset[r] + generated[s] - 2] = t - last[s]
                    last[s] = t
                    if generated[s] == o_len[s]:
                        finished = True
            if finished:
                free_blocks += held[s]
                held[s] = 0
                r = rid[s]
                if r < n and r >= warmup:
                    ttft[r] = first[s] - arrived[s] + request_overhead
                    e2e[r] = t - arrived[s] + request_overhead
                    c_first[s, _NF - 1] += 1.0  # the request's own overhead, once
                    for f in range(_NF):
                        ttft_f = c_first[s, f] - c_arrive[s, f]
                        e2e_f = cumulative[f] + (f == _NF - 1) - c_arrive[s, f]
                        features[0, f] += ttft_f
                        features[2, f] += e2e_f
                        if o_len[s] > 1:
                            features[1, f] += (e2e_f - ttft_f) / (o_len[s] - 1)
                    done += 1
                completions += 1
                out_tokens += o_len[s]
                if completions == warmup:
                    window_start = t
                    start_tokens = out_tokens
                if done == reported and window_completions == 0:
                    if completions > warmup:
                        window_completions = completions - warmup
                        end_tokens = out_tokens - start_tokens
                    else:  # (a warm-up share above one half) count from time 0
                        window_completions = completions
                        end_tokens = out_tokens
                        window_start = 0.0
                free_slots[n_free] = s
                n_free += 1
                if closed:  # the next request takes its place at once
                    n_free -= 1
                    ns = free_slots[n_free]
                    j = next_request % n
                    rid[ns] = next_request
                    p_len[ns], o_len[ns], hit[ns] = prompt[j], output[j], cached[j]
                    computed[ns], generated[ns], held[ns] = 0, 0, 0
                    arrived[ns] = t
                    c_arrive[ns, :] = cumulative
                    waiting[(head + n_waiting) % slots] = ns
                    n_waiting += 1
                    next_request += 1
            else:
                running[kept] = s
                kept += 1
        n_running = kept

    with_tpot = 0
    for r in range(warmup, n):
        if output[r] > 1:
            with_tpot += 1
    if reported > 0:
        for f in range(_NF):
            features[0, f] /= reported
            features[2, f] /= reported
            features[1, f] = features[1, f] / with_tpot if with_tpot > 0 else 0.0
    span = t - window_start
    stats[0] = window_completions / span if span > 0.0 else math.nan
    stats[1] = end_tokens / span if span > 0.0 else math.nan
    stats[2] = preemptions
    stats[3] = steps
    stats[4] = batch_sum / steps if steps > 0 else 0.0
    stats[5] = t
    return itl_offset[n]


@njit
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


@njit
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
    n_itl = simulate(prompt, output, gaps, cached, settings, model, gpu, tensor_parallel,
                     calibration, ttft, e2e, itl, stats_out, features_out)  # fmt: skip
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

"""Prefill:decode fleet kernel: every request through both pools and the hand-off between them.

A disaggregated fleet of ``P`` prefill and ``D`` decode instances serves ``n`` requests, each routed
to one instance of each pool (``route_p``, ``route_d``: the router's). Two hand-offs are modelled
(``settings``' ``handoff``), as the engines run them:

*SGLang* (``handoff`` 1; ``python/sglang/srt/disaggregation/{prefill,decode}.py``): the router sends
the request to both instances at once.

1. *decode pre-allocation*: the decode instance's event loop (one pass per decode step, or at once
   when it is idle: ``disaggregation_decode_polling_interval`` 1) pre-allocates the prompt's KV
   blocks, first come first served, while it holds fewer than ``decode_slots`` requests and its
   free KV tokens after the allocation still cover ``decode_reserved_tokens`` (SGLang's
   ``num_reserved_decode_tokens``, 512) for every request it holds, this one included; only then
   does the prefill instance see the request (its bootstrap queue waits for the decode side);
2. *prefill queue* and *prefill*: prefill-only steps of at most ``prefill_budget`` prompt tokens
   (chunked prefill; first come first served); the request leaves at the end of the step that
   computes its last prompt token, with its first token (the prefill samples it);
3. *KV transfer*: its KV bytes cross the link between its two instances, one transfer at a time per
   instance's link (``transfer_s`` seconds on both); then the decode side's work for the request
   outside the GPU (``handoff_s`` seconds: bootstrap, transfer bookkeeping, polling), one request at
   a time per decode instance, first come first served, and a fixed latency (``handoff_delay_s``:
   the router's hop, handshakes, notifications) that occupies nothing (both hand-offs);
4. *decode poll*: the decode instance's next loop pass finds the transfer done and streams the
   first token at once (SGLang's prebuilt batch: no forward); the request joins the running batch
   (up to ``decode_max_seqs``) and every later step gives it one token. A running request that
   needs a KV block when none is free retracts the most recently joined one: its blocks are freed
   and its KV kept on the host (not recomputed); retracted requests resume first, and while any
   waits no new request is pre-allocated.

*vLLM* (``handoff`` 0, its NIXL connector behind a proxy): the request reaches its prefill queue on
arrival; after the transfer it waits in the decode instance's admission queue for a sequence slot
and the KV blocks of its context plus one token (first come first served), and the first token is
the end of its first decode step. Preempted requests free their blocks and recompute their
context when resumed.

TTFT and E2E add ``request_overhead`` (the calibration's time outside the steps; added by the
caller). Step times are the engine model's (:func:`capnb.kernels.engine.step_time`, each pool at its
own degree). Closed loop (``closed`` 1): ``load`` requests start at time 0 and a finished one is
replaced at once by the next (as ``vllm bench serve --max-concurrency`` runs); open loop: arrivals
at ``gaps / load`` (requests/s).

The plain reference is :mod:`benchmarks.reference.pd`.
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import njit
from .engine import step_time
from .latency import attention_work

__all__ = ["SETTINGS", "STAGES", "STATS", "TIMES", "simulate_fleet"]

#: Order of the ``settings`` vector.
SETTINGS = ("closed", "load", "prefill_instances", "decode_instances", "prefill_budget",
            "decode_max_seqs", "decode_kv_blocks", "block_size", "decode_slots",
            "decode_reserved_tokens", "handoff", "handoff_s", "handoff_delay_s")  # fmt: skip
#: Columns of the per-request ``times`` output (s): arrival, decode KV pre-allocated (SGLang; the
#: arrival for vLLM), first prefill chunk, prefill done (on the wire), KV landed at the decode
#: instance, its hand-off done there (``handoff_s`` of work, queued, and ``handoff_delay_s``),
#: first token, last token.
TIMES = ("arrival", "preallocated", "prefill_start", "prefill_end", "kv_landed", "handed_off",
         "first_token", "done")  # fmt: skip
#: The stages of a request's TTFT: the differences of consecutive ``times`` columns up to the first
#: token (``transfer``: the link's queue and the bytes; ``handoff``: the decode side's work queue,
#: its work and the fixed latency; ``decode_poll``: from the hand-off to the first token).
STAGES = ("decode_prealloc", "prefill_queue", "prefill", "transfer", "handoff", "decode_poll")
#: Order of the ``stats`` output: preemptions, decode steps, sequences summed over decode steps,
#: busy seconds summed over the prefill instances and over the decode instances.
STATS = ("preemptions", "decode_steps", "decode_sequences", "prefill_busy_s", "decode_busy_s")

_INF = np.inf
# rows of the decode instances' state: retracted ring head and length, running, pre-allocation
# queue head and tail, landed queue head and tail, requests held (pre-allocated, not done)
_RQ_HEAD, _RQ_LEN, _RUN, _PA_HEAD, _PA_TAIL, _DQ_HEAD, _DQ_TAIL, _HELD = range(8)


@njit(inline="always")
def _blocks(tokens, block):
    return (tokens + block - 1) // block


@njit
def _issue(r, t, sg, route_p, route_d, times, pq, p_tail, pa, ds):
    """Request ``r`` arrives at ``t``: at its decode instance (SGLang) or its prefill queue."""
    times[r, 0] = t
    if sg:
        j = route_d[r]
        pa[j, ds[_PA_TAIL, j]] = r
        ds[_PA_TAIL, j] += 1
    else:
        times[r, 1] = t
        i = route_p[r]
        pq[i, p_tail[i]] = r
        p_tail[i] += 1


@njit
def _prealloc(j, t, prompt, route_p, pa, ds, d_free, held, slots, reserve, block, pq, p_tail,
              times):  # fmt: skip
    """SGLang's pre-allocation pass at decode instance ``j``: each request taken joins its prefill queue."""
    while ds[_PA_HEAD, j] < ds[_PA_TAIL, j] and ds[_HELD, j] < slots and ds[_RQ_LEN, j] == 0:
        r = pa[j, ds[_PA_HEAD, j]]
        need = _blocks(prompt[r], block)
        if need > d_free[j]:
            break
        # a request alone on the instance is taken whenever it fits (no stall below the reserve)
        if ds[_HELD, j] > 0 and (d_free[j] - need) * block < reserve * (ds[_HELD, j] + 1):
            break
        d_free[j] -= need
        held[r] = need
        ds[_HELD, j] += 1
        ds[_PA_HEAD, j] += 1
        times[r, 1] = t
        i = route_p[r]
        pq[i, p_tail[i]] = r
        p_tail[i] += 1


@njit
def _prefill_step(i, t, prompt, budget, pq, p_head, p_tail, computed, p_fin, p_nfin, times,
                  model, gpu, tp, cal, feat):  # fmt: skip
    """Start a prefill-only step at instance ``i``; returns its seconds (0: nothing queued).

    The requests the step finishes leave the queue now and are listed in ``p_fin[i]``.
    """
    left = budget
    tokens = 0.0
    pairs = 0.0
    kv_read = 0.0
    seqs = 0
    p_nfin[i] = 0
    k = p_head[i]
    while k < p_tail[i] and left > 0:
        r = pq[i, k]
        if computed[r] == 0:
            times[r, 2] = t  # its first chunk starts: its queue wait ends
        take = min(prompt[r] - computed[r], left)
        tokens += take
        p, kv = attention_work(float(computed[r]), float(take), model)
        pairs += p
        kv_read += kv
        seqs += 1
        left -= take
        computed[r] += take
        if computed[r] == prompt[r]:
            p_fin[i, p_nfin[i]] = r
            p_nfin[i] += 1
            k += 1
        else:
            break
    p_head[i] += p_nfin[i]
    if seqs == 0:
        return 0.0
    return step_time(tokens, pairs, kv_read, float(seqs), model, gpu, tp, cal, feat)


@njit
def _send(i, t, transfer_s, handoff, route_d, p_fin, p_nfin, link_p, link_d, hand_d, wire, wire_n,
          wire_t, times):  # fmt: skip
    """The requests prefill instance ``i`` finished at ``t`` go on the wire, one at a time per link.

    Then each takes its decode instance's hand-off work (``handoff[0]`` s, one request at a time)
    and the fixed hand-off latency (``handoff[1]`` s).
    """
    for k in range(p_nfin[i]):
        r = p_fin[i, k]
        j = route_d[r]
        start = max(t, link_p[i], link_d[j])
        moved = start + transfer_s[r]
        link_p[i] = moved
        link_d[j] = moved
        worked = max(moved, hand_d[j]) + handoff[0]
        hand_d[j] = worked
        end = worked + handoff[1]
        times[r, 3] = t
        times[r, 4] = moved
        wire[wire_n[0]] = r
        wire_t[wire_n[0]] = end
        wire_n[0] += 1
    p_nfin[i] = 0


@njit
def _land(t, route_d, wire, wire_t, wire_n, dq, ds, times):
    """Transfers that end by ``t`` join their decode instance's landed queue, in wire order."""
    kept = 0
    for w in range(wire_n[0]):
        r = wire[w]
        if wire_t[w] <= t:
            j = route_d[r]
            dq[j, ds[_DQ_TAIL, j]] = r
            ds[_DQ_TAIL, j] += 1
            times[r, 5] = wire_t[w]
        else:
            wire[kept] = r
            wire_t[kept] = wire_t[w]
            kept += 1
    wire_n[0] = kept


@njit
def _resume(j, prompt, gen, held, run, rq, ds, d_free, max_seqs, reserve, block):
    """Retracted requests at decode instance ``j`` rejoin the batch, first in first, while they fit."""
    ring = rq.shape[1]
    while ds[_RQ_LEN, j] > 0 and ds[_RUN, j] < max_seqs:
        r = rq[j, ds[_RQ_HEAD, j]]
        need = _blocks(prompt[r] + gen[r] + 1, block)
        if need > d_free[j]:
            break
        if ds[_RUN, j] > 0 and (d_free[j] - need) * block < reserve * ds[_HELD, j]:
            break
        d_free[j] -= need
        held[r] = need
        ds[_RQ_HEAD, j] = (ds[_RQ_HEAD, j] + 1) % ring
        ds[_RQ_LEN, j] -= 1
        run[j, ds[_RUN, j]] = r
        ds[_RUN, j] += 1


@njit
def _admit(j, t, sg, prompt, output, gen, held, run, dq, ds, d_free, max_seqs, block, times):
    """Landed requests join decode instance ``j``'s batch; returns how many finished on joining.

    SGLang: the first token is streamed now (its KV is pre-allocated); vLLM: each needs a slot and
    the blocks of its context plus one token, first come first served.
    """
    finished = 0
    while ds[_DQ_HEAD, j] < ds[_DQ_TAIL, j] and ds[_RUN, j] < max_seqs:
        r = dq[j, ds[_DQ_HEAD, j]]
        if not sg:
            need = _blocks(prompt[r] + 1, block)
            if need > d_free[j]:
                break
            d_free[j] -= need
            held[r] = need
            ds[_HELD, j] += 1
        ds[_DQ_HEAD, j] += 1
        if sg:
            times[r, 6] = t
            if output[r] <= 1:  # the prefill's token was the only one
                times[r, 7] = t
                d_free[j] += held[r]
                held[r] = 0
                ds[_HELD, j] -= 1
                finished += 1
                continue
        run[j, ds[_RUN, j]] = r
        ds[_RUN, j] += 1
    return finished


@njit
def _decode_step(j, sg, prompt, gen, kv_valid, held, run, rq, ds, d_free, block, counters, model,
                 gpu, tp, cal, feat):  # fmt: skip
    """Start one decode step at instance ``j``; returns its seconds (0: nothing runs).

    First each running request's KV grows by its next token, retracting the last joined when full.
    """
    ring = rq.shape[1]
    k = 0
    while k < ds[_RUN, j]:  # each running request's next token may need a block
        r = run[j, k]
        need = _blocks(prompt[r] + gen[r] + 1, block) - held[r]
        while need > d_free[j] and ds[_RUN, j] > k:
            counters[0] += 1
            ds[_RUN, j] -= 1
            victim = run[j, ds[_RUN, j]]
            d_free[j] += held[victim]
            held[victim] = 0
            if not sg:
                kv_valid[victim] = 0  # vLLM recomputes; SGLang keeps the KV on the host
            ds[_RQ_HEAD, j] = (ds[_RQ_HEAD, j] - 1) % ring
            rq[j, ds[_RQ_HEAD, j]] = victim
            ds[_RQ_LEN, j] += 1
        if ds[_RUN, j] <= k:
            break  # it retracted itself
        d_free[j] -= need
        held[r] += need
        k += 1
    nrun = ds[_RUN, j]
    if nrun == 0:
        return 0.0
    tokens = 0.0
    pairs = 0.0
    kv_read = 0.0
    for k in range(nrun):
        r = run[j, k]
        s = float(kv_valid[r])
        m = float(prompt[r] + gen[r] + 1 - kv_valid[r])  # 1, or the context to recompute
        tokens += m
        p, kv = attention_work(s, m, model)
        pairs += p
        kv_read += kv
    counters[1] += nrun
    counters[2] += 1
    return step_time(tokens, pairs, kv_read, float(nrun), model, gpu, tp, cal, feat)


@njit
def _decode_end(j, t, sg, prompt, output, gen, kv_valid, held, times, run, ds, d_free):
    """Decode instance ``j``'s step ends at ``t``: a token each; returns how many finished."""
    kept = 0
    finished = 0
    first = 1 if sg else 0  # SGLang's first token came from the prefill
    for k in range(ds[_RUN, j]):
        r = run[j, k]
        kv_valid[r] = prompt[r] + gen[r] + 1
        gen[r] += 1
        if math.isnan(times[r, 6]):
            times[r, 6] = t
        if gen[r] + first >= output[r]:
            times[r, 7] = t
            d_free[j] += held[r]
            held[r] = 0
            ds[_HELD, j] -= 1
            finished += 1
        else:
            run[j, kept] = r
            kept += 1
    ds[_RUN, j] = kept
    return finished


@njit
def _next_time(open_next, p_end, d_end, wire_t, wire_n):
    t = open_next
    for i in range(p_end.shape[0]):
        t = min(t, p_end[i])
    for j in range(d_end.shape[0]):
        t = min(t, d_end[j])
    for w in range(wire_n):
        t = min(t, wire_t[w])
    return t


@njit
def _start_steps(t, sg, prompt, output, gen, kv_valid, held, computed, limits, route_p, pq,
                 p_state, p_fin, p_end, pa, dq, rq, ds, d_free, run, d_end, counters, busy, times,
                 model_p, model_d, gpu, tp_p, tp_d, cal, feat):  # fmt: skip
    """Every idle instance runs its loop pass at ``t``; returns the requests finished on joining.

    ``limits``: prefill budget, decode running limit, decode slots, reserved tokens, block size.
    """
    budget, max_seqs, slots, reserve, block = limits[0], limits[1], limits[2], limits[3], limits[4]
    for j in range(d_end.shape[0]):
        if d_end[j] == _INF:
            _resume(j, prompt, gen, held, run, rq, ds, d_free, max_seqs, reserve, block)
            if sg:
                _prealloc(j, t, prompt, route_p, pa, ds, d_free, held, slots, reserve, block, pq,
                          p_state[1], times)  # fmt: skip
    for i in range(p_end.shape[0]):
        if p_end[i] == _INF and p_state[0, i] < p_state[1, i]:
            dt = _prefill_step(i, t, prompt, budget, pq, p_state[0], p_state[1], computed, p_fin,
                               p_state[2], times, model_p, gpu, tp_p, cal, feat)  # fmt: skip
            p_end[i] = t + dt
            busy[0] += dt
    finished = 0
    for j in range(d_end.shape[0]):
        if d_end[j] == _INF:
            finished += _admit(j, t, sg, prompt, output, gen, held, run, dq, ds, d_free, max_seqs,
                               block, times)  # fmt: skip
            dt = _decode_step(j, sg, prompt, gen, kv_valid, held, run, rq, ds, d_free, block,
                              counters, model_d, gpu, tp_d, cal, feat)  # fmt: skip
            if dt > 0.0:
                d_end[j] = t + dt
                busy[1] += dt
    return finished


@njit
def simulate_fleet(prompt, output, transfer_s, route_p, route_d, gaps, settings, model_p, model_d,
                   gpu, tp_p, tp_d, cal, times, stats):  # fmt: skip
    """Simulate the fleet until every request is done (or none can run: ``done`` stays NaN).

    ``times`` (n, 8): :data:`TIMES` per request (s). ``stats`` (5): :data:`STATS`.
    """
    n, m = prompt.shape[0], max(prompt.shape[0], 1)
    closed, load = settings[0] > 0.5, settings[1]
    n_p, n_d = int(settings[2]), int(settings[3])
    sg = settings[10] > 0.5
    limits = np.array([int(settings[4]), int(settings[5]), int(settings[8]), int(settings[9]),
                       int(settings[7])], np.int64)  # fmt: skip
    feat = np.zeros(7)
    pq, p_fin = np.zeros((n_p, m), np.int64), np.zeros((n_p, m), np.int64)
    p_state = np.zeros((3, n_p), np.int64)  # queue head, queue tail, requests the step finishes
    p_end, link_p = np.full(n_p, _INF), np.zeros(n_p)
    pa, dq = np.zeros((n_d, m), np.int64), np.zeros((n_d, m), np.int64)
    rq = np.zeros((n_d, n + 1), np.int64)  # a ring: retracted requests go back to its front
    ds = np.zeros((8, n_d), np.int64)
    d_free = np.full(n_d, int(settings[6]), np.int64)
    run = np.zeros((n_d, max(int(settings[5]), 1)), np.int64)
    d_end, link_d, hand_d = np.full(n_d, _INF), np.zeros(n_d), np.zeros(n_d)
    handoff = settings[11:13]
    computed, gen = np.zeros(n, np.int64), np.zeros(n, np.int64)
    kv_valid, held = prompt.copy(), np.zeros(n, np.int64)  # (the prompt's KV comes with it)
    wire, wire_t, wire_n = np.zeros(m, np.int64), np.zeros(m), np.zeros(1, np.int64)
    times[:, :] = math.nan
    counters = np.zeros(3, np.int64)
    busy = np.zeros(2)
    issued = min(int(load), n) if closed else 0
    for r in range(issued):  # closed loop: the first requests arrive at time 0
        _issue(r, 0.0, sg, route_p, route_d, times, pq, p_state[1], pa, ds)
    open_next = gaps[0] / load if (not closed and n > 0) else _INF
    t = 0.0
    done = 0
    while done < n:
        finished = 1
        while finished > 0:  # a request finished on joining frees its slot at once
            finished = _start_steps(t, sg, prompt, output, gen, kv_valid, held, computed, limits,
                                    route_p, pq, p_state, p_fin, p_end, pa, dq, rq, ds, d_free,
                                    run, d_end, counters, busy, times, model_p, model_d, gpu,
                                    tp_p, tp_d, cal, feat)  # fmt: skip
            done += finished
            for _ in range(finished if closed else 0):
                if issued < n:
                    _issue(issued, t, sg, route_p, route_d, times, pq, p_state[1], pa, ds)
                    issued += 1
        if done >= n:
            break
        t = _next_time(open_next, p_end, d_end, wire_t, wire_n[0])
        if t == _INF:
            break  # nothing can run and nothing will arrive (a request larger than the KV cache)
        while issued < n and open_next <= t:
            _issue(issued, open_next, sg, route_p, route_d, times, pq, p_state[1], pa, ds)
            issued += 1
            open_next = open_next + gaps[issued] / load if issued < n else _INF
        for i in range(n_p):
            if p_end[i] <= t:
                p_end[i] = _INF
                _send(i, t, transfer_s, handoff, route_d, p_fin, p_state[2], link_p, link_d,
                      hand_d, wire, wire_n, wire_t, times)  # fmt: skip
        _land(t, route_d, wire, wire_t, wire_n, dq, ds, times)
        for j in range(n_d):
            if d_end[j] <= t:
                d_end[j] = _INF
                finished = _decode_end(j, t, sg, prompt, output, gen, kv_valid, held, times, run,
                                       ds, d_free)  # fmt: skip
                done += finished
                for _ in range(finished if closed else 0):
                    if issued < n:
                        _issue(issued, t, sg, route_p, route_d, times, pq, p_state[1], pa, ds)
                        issued += 1
    stats[0], stats[1], stats[2] = counters[0], counters[2], counters[1]
    stats[3], stats[4] = busy[0], busy[1]

"""Prefill:decode fleet kernel: every request through both pools and the link between them.

A disaggregated fleet of ``P`` prefill and ``D`` decode instances serves ``n`` requests, one at a
time through four stages, as SGLang, vLLM and Dynamo run them:

1. *prefill queue*: the request waits at its prefill instance (first come first served);
2. *prefill*: the instance makes prefill-only steps of at most ``prefill_budget`` prompt tokens,
   splitting a prompt over steps (chunked prefill); the request leaves at the end of the step
   that computes its last prompt token;
3. *KV transfer*: its KV bytes cross the link between its prefill and its decode instance; each
   instance's link carries one transfer at a time (a transfer takes the later of the sender's and
   the receiver's link to be free, and ``transfer_s`` seconds on both);
4. *decode admission queue*: at its decode instance it waits until fewer than ``decode_max_seqs``
   run and the free KV blocks hold its context plus one token (first come first served); then
   *decode*: every step gives each running request one token. A running request that needs a new
   block when none is free preempts the most recently admitted one (recompute): its blocks are
   freed, it goes back to the front of the admission queue and recomputes its context when
   admitted again.

The client sees the first token at the end of the request's first decode step (the decode
instance streams it), and one token a step after that. TTFT and E2E add ``request_overhead`` (the
calibration's time outside the steps; added by the caller). Step times are the engine model's
(:func:`capnb.kernels.engine.step_time`, each pool at its own degree).

Closed loop (``settings[0]`` 1): ``load`` requests start at time 0 and a finished one is replaced at
once by the next (as ``vllm bench serve --max-concurrency`` runs); open loop: arrivals at ``gaps /
load`` (requests/s). Each request's instances are given (``route_p``, ``route_d``: the router's).

The plain reference is :mod:`benchmarks.reference.pd`.
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import njit
from .engine import step_time

__all__ = ["SETTINGS", "STAGES", "STATS", "TIMES", "simulate_fleet"]

#: Order of the ``settings`` vector.
SETTINGS = ("closed", "load", "prefill_instances", "decode_instances", "prefill_budget",
            "decode_max_seqs", "decode_kv_blocks", "block_size")  # fmt: skip
#: Columns of the per-request ``times`` output (s): arrival, first prefill chunk, prefill done
#: (on the wire), KV landed at the decode instance, admitted there, first token, last token.
TIMES = ("arrival", "prefill_start", "prefill_end", "transfer_end", "admitted", "first_token",
         "done")  # fmt: skip
#: The stages of a request's TTFT: the differences of consecutive ``times`` columns up to the first
#: token.
STAGES = ("prefill_queue", "prefill", "transfer", "decode_admission", "first_step")
#: Order of the ``stats`` output: preemptions, decode steps, sequences summed over decode steps,
#: busy seconds summed over the prefill instances and over the decode instances.
STATS = ("preemptions", "decode_steps", "decode_sequences", "prefill_busy_s", "decode_busy_s")

_INF = np.inf


@njit(inline="always")
def _blocks(tokens, block):
    return (tokens + block - 1) // block


@njit
def _issue(r, t, route_p, arrive_t, pq, p_tail):
    """Request ``r`` arrives at ``t`` at the tail of its prefill instance's queue."""
    i = route_p[r]
    arrive_t[r] = t
    pq[i, p_tail[i]] = r
    p_tail[i] += 1


@njit
def _prefill_step(i, t, prompt, budget, pq, p_head, p_tail, computed, p_fin, p_nfin, prefill_t,
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
            prefill_t[r] = t  # its first chunk starts: its queue wait ends
        take = min(prompt[r] - computed[r], left)
        s = float(computed[r])
        tokens += take
        pairs += take * s + 0.5 * take * (take + 1.0)
        kv_read += s + take
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
def _send(i, t, transfer_s, route_d, p_fin, p_nfin, link_p, link_d, wire, wire_n, wire_t, sent_t):
    """The requests prefill instance ``i`` finished at ``t`` go on the wire, one at a time per link."""
    for k in range(p_nfin[i]):
        r = p_fin[i, k]
        j = route_d[r]
        start = max(t, link_p[i], link_d[j])
        end = start + transfer_s[r]
        link_p[i] = end
        link_d[j] = end
        sent_t[r] = t
        wire[wire_n[0]] = r
        wire_t[wire_n[0]] = end
        wire_n[0] += 1
    p_nfin[i] = 0


@njit
def _preempt_last(j, run, d_nrun, dq, d_head, d_count, held, kv_valid, d_free, ring):
    """Preempt decode instance ``j``'s most recently admitted request; returns it."""
    d_nrun[j] -= 1
    r = run[j, d_nrun[j]]
    d_free[j] += held[r]
    held[r] = 0
    kv_valid[r] = 0
    d_head[j] = (d_head[j] - 1) % ring
    dq[j, d_head[j]] = r
    d_count[j] += 1
    return r


@njit
def _decode_step(j, t, prompt, gen, kv_valid, held, admit_t, run, d_nrun, dq, d_head, d_count,
                 d_free, max_seqs, block, counters, model, gpu, tp, cal, feat):  # fmt: skip
    """Grow, admit and start one decode step at instance ``j``; returns its seconds (0: none)."""
    ring = dq.shape[1]
    k = 0
    while k < d_nrun[j]:  # each running request's next token may need a block
        r = run[j, k]
        need = _blocks(prompt[r] + gen[r] + 1, block) - held[r]
        while need > d_free[j] and d_nrun[j] > k:
            counters[0] += 1
            _preempt_last(j, run, d_nrun, dq, d_head, d_count, held, kv_valid, d_free, ring)
        if d_nrun[j] <= k:
            break  # it preempted itself
        d_free[j] -= need
        held[r] += need
        k += 1
    while d_count[j] > 0 and d_nrun[j] < max_seqs:  # admission, first come first served
        r = dq[j, d_head[j]]
        need = _blocks(prompt[r] + gen[r] + 1, block) - held[r]
        if need > d_free[j]:
            break
        d_free[j] -= need
        held[r] += need
        d_head[j] = (d_head[j] + 1) % ring
        d_count[j] -= 1
        if admit_t[r] < 0.0:
            admit_t[r] = t
        run[j, d_nrun[j]] = r
        d_nrun[j] += 1
    tokens = 0.0
    pairs = 0.0
    kv_read = 0.0
    for k in range(d_nrun[j]):
        r = run[j, k]
        s = float(kv_valid[r])
        m = float(prompt[r] + gen[r] + 1 - kv_valid[r])  # 1, or the context to recompute
        tokens += m
        pairs += m * s + 0.5 * m * (m + 1.0)
        kv_read += s + m
    if d_nrun[j] == 0:
        return 0.0
    counters[1] += d_nrun[j]
    counters[2] += 1
    return step_time(tokens, pairs, kv_read, float(d_nrun[j]), model, gpu, tp, cal, feat)


@njit
def _decode_end(j, t, prompt, output, gen, kv_valid, held, first_t, done_t, run, d_nrun, d_free):
    """Decode instance ``j``'s step ends at ``t``: a token each; returns how many finished."""
    kept = 0
    finished = 0
    for k in range(d_nrun[j]):
        r = run[j, k]
        kv_valid[r] = prompt[r] + gen[r] + 1
        gen[r] += 1
        if gen[r] == 1:
            first_t[r] = t
        if gen[r] >= output[r]:
            done_t[r] = t
            d_free[j] += held[r]
            held[r] = 0
            finished += 1
        else:
            run[j, kept] = r
            kept += 1
    d_nrun[j] = kept
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
def _land(t, route_d, wire, wire_t, wire_n, dq, d_head, d_count, land_t):
    """Transfers that end by ``t`` join their decode instance's admission queue, in wire order."""
    ring = dq.shape[1]
    kept = 0
    for w in range(wire_n[0]):
        r = wire[w]
        if wire_t[w] <= t:
            j = route_d[r]
            dq[j, (d_head[j] + d_count[j]) % ring] = r
            d_count[j] += 1
            land_t[r] = wire_t[w]
        else:
            wire[kept] = r
            wire_t[kept] = wire_t[w]
            kept += 1
    wire_n[0] = kept


@njit
def _start_steps(t, prompt, gen, kv_valid, held, admit_t, computed, budget, max_seqs, block, pq,
                 p_state, p_fin, p_end, dq, d_state, d_free, run, d_end, counters, busy, times,
                 model_p, model_d, gpu, tp_p, tp_d, cal, feat):  # fmt: skip
    """Every idle instance with work starts a step at ``t``."""
    for i in range(p_end.shape[0]):
        if p_end[i] == _INF and p_state[0, i] < p_state[1, i]:
            dt = _prefill_step(i, t, prompt, budget, pq, p_state[0], p_state[1], computed, p_fin,
                               p_state[2], times[:, 1], model_p, gpu, tp_p, cal, feat)  # fmt: skip
            p_end[i] = t + dt
            busy[0] += dt
    for j in range(d_end.shape[0]):
        if d_end[j] == _INF and (d_state[2, j] > 0 or d_state[1, j] > 0):
            dt = _decode_step(j, t, prompt, gen, kv_valid, held, admit_t, run, d_state[2], dq,
                              d_state[0], d_state[1], d_free, max_seqs, block, counters, model_d,
                              gpu, tp_d, cal, feat)  # fmt: skip
            if dt > 0.0:
                d_end[j] = t + dt
                busy[1] += dt


@njit
def simulate_fleet(prompt, output, transfer_s, route_p, route_d, gaps, settings, model_p, model_d,
                   gpu, tp_p, tp_d, cal, times, stats):  # fmt: skip
    """Simulate the fleet until every request is done (or none can run: ``done`` stays NaN).

    ``times`` (n, 7): :data:`TIMES` per request (s). ``stats`` (5): :data:`STATS`.
    """
    n, m = prompt.shape[0], max(prompt.shape[0], 1)
    closed, load = settings[0] > 0.5, settings[1]
    n_p, n_d = int(settings[2]), int(settings[3])
    budget, max_seqs, block = int(settings[4]), int(settings[5]), int(settings[7])
    feat = np.zeros(7)
    pq, p_fin = np.zeros((n_p, m), np.int64), np.zeros((n_p, m), np.int64)
    p_state = np.zeros((3, n_p), np.int64)  # queue head, queue tail, requests the step finishes
    p_end, link_p = np.full(n_p, _INF), np.zeros(n_p)
    dq = np.zeros((n_d, n + 1), np.int64)  # a ring: preempted requests go back to its front
    d_state = np.zeros((3, n_d), np.int64)  # queue head, queue length, running
    d_free = np.full(n_d, int(settings[6]), np.int64)
    run = np.zeros((n_d, max(max_seqs, 1)), np.int64)
    d_end, link_d = np.full(n_d, _INF), np.zeros(n_d)
    computed, gen = np.zeros(n, np.int64), np.zeros(n, np.int64)
    kv_valid, held = prompt.copy(), np.zeros(n, np.int64)  # (the prompt's KV comes with it)
    wire, wire_t, wire_n = np.zeros(m, np.int64), np.zeros(m), np.zeros(1, np.int64)
    times[:, :] = math.nan
    admit_t = np.full(n, -1.0)
    counters = np.zeros(3, np.int64)
    busy = np.zeros(2)
    issued = min(int(load), n) if closed else 0
    for r in range(issued):  # closed loop: the first requests arrive at time 0
        _issue(r, 0.0, route_p, times[:, 0], pq, p_state[1])
    open_next = gaps[0] / load if (not closed and n > 0) else _INF
    t = 0.0
    done = 0
    while done < n:
        _start_steps(t, prompt, gen, kv_valid, held, admit_t, computed, budget, max_seqs, block,
                     pq, p_state, p_fin, p_end, dq, d_state, d_free, run, d_end, counters, busy,
                     times, model_p, model_d, gpu, tp_p, tp_d, cal, feat)  # fmt: skip
        t = _next_time(open_next, p_end, d_end, wire_t, wire_n[0])
        if t == _INF:
            break  # nothing can run and nothing will arrive (a request larger than the KV cache)
        while issued < n and open_next <= t:
            _issue(issued, open_next, route_p, times[:, 0], pq, p_state[1])
            issued += 1
            open_next = open_next + gaps[issued] / load if issued < n else _INF
        for i in range(n_p):
            if p_end[i] <= t:
                p_end[i] = _INF
                _send(i, t, transfer_s, route_d, p_fin, p_state[2], link_p, link_d, wire, wire_n,
                      wire_t, times[:, 2])  # fmt: skip
        _land(t, route_d, wire, wire_t, wire_n, dq, d_state[0], d_state[1], times[:, 3])
        for j in range(n_d):
            if d_end[j] <= t:
                d_end[j] = _INF
                finished = _decode_end(j, t, prompt, output, gen, kv_valid, held, times[:, 5],
                                       times[:, 6], run, d_state[2], d_free)  # fmt: skip
                done += finished
                for _ in range(finished if closed else 0):
                    if issued < n:
                        _issue(issued, t, route_p, times[:, 0], pq, p_state[1])
                        issued += 1
    for r in range(n):
        times[r, 4] = admit_t[r] if admit_t[r] >= 0.0 else math.nan
    stats[0], stats[1], stats[2] = counters[0], counters[2], counters[1]
    stats[3], stats[4] = busy[0], busy[1]

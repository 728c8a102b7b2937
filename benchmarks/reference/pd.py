"""Plain-Python reference for :func:`capnb.kernels.pd.simulate_fleet` (lists and dicts, no numba).

The same rules, written as a direct event loop: requests queue at their prefill instance, are
prefilled in token-budgeted steps, cross the link one transfer at a time per instance, wait for a
decode slot and KV blocks, and decode one token a step (preemption by recompute). ``step`` is a
Python callable ``step(pool, tokens, pairs, kv_read, sequences) -> seconds``.
"""

from __future__ import annotations

import math


def _blocks(tokens: int, block: int) -> int:
    return -(-tokens // block)


def simulate_fleet_python(prompt, output, transfer_s, route_p, route_d, arrivals, *, closed,
                          load, prefill_instances, decode_instances, budget, max_seqs, kv_blocks,
                          block, step):  # fmt: skip
    """Per request: dict of arrival, prefill_start, prefill_end, transfer_end, admitted, first, done."""
    n = len(prompt)
    rec = [dict.fromkeys(("arrival", "prefill_start", "prefill_end", "transfer_end", "admitted",
                          "first_token", "done"), math.nan) for _ in range(n)]  # fmt: skip
    queue = [[] for _ in range(prefill_instances)]
    prefill_end = [math.inf] * prefill_instances
    finishing = [[] for _ in range(prefill_instances)]
    link_p, link_d = [0.0] * prefill_instances, [0.0] * decode_instances
    wire = []  # (end, request)
    admission = [[] for _ in range(decode_instances)]
    running = [[] for _ in range(decode_instances)]
    decode_end = [math.inf] * decode_instances
    free = [kv_blocks] * decode_instances
    computed, gen, valid, held = [0] * n, [0] * n, list(prompt), [0] * n
    state = {"issued": 0, "done": 0, "t": 0.0}

    def issue(at):
        r = state["issued"]
        rec[r]["arrival"] = at
        queue[route_p[r]].append(r)
        state["issued"] += 1

    if closed:
        for _ in range(min(int(load), n)):
            issue(0.0)
    while state["done"] < n:
        t = state["t"]
        for i in range(prefill_instances):
            if prefill_end[i] == math.inf and queue[i]:
                prefill_end[i] = t + _prefill(i, t, queue, finishing, computed, prompt, rec,
                                              budget, step)  # fmt: skip
        for j in range(decode_instances):
            if decode_end[j] == math.inf and (running[j] or admission[j]):
                dt = _decode(j, t, running, admission, free, held, valid, gen, prompt, rec,
                             max_seqs, block, step)  # fmt: skip
                if dt > 0:
                    decode_end[j] = t + dt
        upcoming = [prefill_end[i] for i in range(prefill_instances)]
        upcoming += [decode_end[j] for j in range(decode_instances)] + [w[0] for w in wire]
        if not closed and state["issued"] < n:
            upcoming.append(arrivals[state["issued"]])
        t = min(upcoming)
        if t == math.inf:
            break
        state["t"] = t
        while not closed and state["issued"] < n and arrivals[state["issued"]] <= t:
            issue(arrivals[state["issued"]])
        for i in range(prefill_instances):
            if prefill_end[i] <= t:
                prefill_end[i] = math.inf
                for r in finishing[i]:
                    j = route_d[r]
                    end = max(t, link_p[i], link_d[j]) + transfer_s[r]
                    link_p[i] = link_d[j] = end
                    rec[r]["prefill_end"] = t
                    wire.append((end, r))
                finishing[i] = []
        for end, r in [w for w in wire if w[0] <= t]:
            admission[route_d[r]].append(r)
            rec[r]["transfer_end"] = end
        wire = [w for w in wire if w[0] > t]
        for j in range(decode_instances):
            if decode_end[j] <= t:
                decode_end[j] = math.inf
                for r in list(running[j]):
                    valid[r] = prompt[r] + gen[r] + 1
                    gen[r] += 1
                    if gen[r] == 1:
                        rec[r]["first_token"] = t
                    if gen[r] >= output[r]:
                        rec[r]["done"] = t
                        free[j] += held[r]
                        held[r] = 0
                        running[j].remove(r)
                        state["done"] += 1
                        if closed and state["issued"] < n:
                            issue(t)
    return rec


def _prefill(i, t, queue, finishing, computed, prompt, rec, budget, step):
    left, tokens, pairs, kv_read, seqs = budget, 0, 0.0, 0, 0
    while queue[i] and left > 0:
        r = queue[i][0]
        if computed[r] == 0:
            rec[r]["prefill_start"] = t
        take = min(prompt[r] - computed[r], left)
        s = computed[r]
        tokens, pairs, kv_read = (
            tokens + take,
            pairs + take * s + take * (take + 1) / 2,
            kv_read + s + take,
        )
        seqs += 1
        left -= take
        computed[r] += take
        if computed[r] < prompt[r]:
            break
        finishing[i].append(queue[i].pop(0))
    return step("prefill", tokens, pairs, kv_read, seqs)


def _decode(j, t, running, admission, free, held, valid, gen, prompt, rec, max_seqs, block, step):
    k = 0
    while k < len(running[j]):
        r = running[j][k]
        need = _blocks(prompt[r] + gen[r] + 1, block) - held[r]
        while need > free[j] and len(running[j]) > k:
            victim = running[j].pop()
            free[j] += held[victim]
            held[victim] = valid[victim] = 0
            admission[j].insert(0, victim)
        if len(running[j]) <= k:
            break
        free[j] -= need
        held[r] += need
        k += 1
    while admission[j] and len(running[j]) < max_seqs:
        r = admission[j][0]
        need = _blocks(prompt[r] + gen[r] + 1, block) - held[r]
        if need > free[j]:
            break
        free[j] -= need
        held[r] += need
        running[j].append(admission[j].pop(0))
        if math.isnan(rec[r]["admitted"]):
            rec[r]["admitted"] = t
    if not running[j]:
        return 0.0
    tokens = pairs = kv_read = 0.0
    for r in running[j]:
        s, m = valid[r], prompt[r] + gen[r] + 1 - valid[r]
        tokens, pairs, kv_read = tokens + m, pairs + m * s + m * (m + 1) / 2, kv_read + s + m
    return step("decode", tokens, pairs, kv_read, len(running[j]))


REGISTRY = {"pd.simulate_fleet": {"python": simulate_fleet_python}}

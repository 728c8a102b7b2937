"""Plain-Python reference for :func:`capnb.kernels.pd.simulate_fleet` (lists and dicts, no numba).

The same rules, written as a direct event loop. SGLang's hand-off (``sglang=True``): a request
waits for its decode instance's loop to pre-allocate its prompt's KV (a request slot, and the
reserved tokens of every request it holds kept free), then queues at its prefill instance, is
prefilled in token-budgeted steps, crosses the link one transfer at a time per instance (then the
decode instance's ``handoff_s`` of work for it, one request at a time, and ``handoff_delay_s``), and
streams its first token at the decode instance's next loop pass; vLLM's (``sglang=False``): it
queues at its prefill instance on arrival and after the transfer waits for a decode slot and KV
blocks, its first token the end of its first decode step. Decode makes one token a step;
retracted requests resume first. ``step`` is a Python callable
``step(pool, tokens, pairs, kv_read, sequences) -> seconds``; ``model`` (an engine model vector, or
None: every layer full) gives the windowed layers whose pairs and KV reads are counted within their
window (:func:`benchmarks.reference.engine.attention_python`).
"""

from __future__ import annotations

import math

from .engine import attention_python

COLUMNS = ("arrival", "preallocated", "prefill_start", "prefill_end", "kv_landed", "handed_off",
           "first_token", "done")  # fmt: skip


def _blocks(tokens: int, block: int) -> int:
    return -(-tokens // block)


def simulate_fleet_python(prompt, output, transfer_s, route_p, route_d, arrivals, *, closed,
                          load, prefill_instances, decode_instances, budget, max_seqs, kv_blocks,
                          block, step, sglang=True, slots=None, reserved=512,
                          handoff_s=0.0, handoff_delay_s=0.0, model=None):  # fmt: skip
    """Per request: dict of the :data:`COLUMNS` times (s)."""
    n = len(prompt)
    f = {
        "prompt": prompt, "output": output, "route_p": route_p, "block": block, "step": step,
        "work": lambda s, m: attention_python(
            float(s), float(m), [0.0] * 9 if model is None else model
        ),
        "budget": budget, "max_seqs": max_seqs, "slots": max_seqs if slots is None else slots,
        "reserved": reserved if sglang else 0, "sglang": sglang,
        "rec": [dict.fromkeys(COLUMNS, math.nan) for _ in range(n)],
        "queue": [[] for _ in range(prefill_instances)],
        "prealloc": [[] for _ in range(decode_instances)],
        "landed": [[] for _ in range(decode_instances)],
        "retracted": [[] for _ in range(decode_instances)],
        "running": [[] for _ in range(decode_instances)],
        "holding": [0] * decode_instances, "free": [kv_blocks] * decode_instances,
        "computed": [0] * n, "gen": [0] * n, "valid": list(prompt), "held": [0] * n,
        "preemptions": 0,
    }  # fmt: skip
    rec = f["rec"]
    prefill_end = [math.inf] * prefill_instances
    finishing = [[] for _ in range(prefill_instances)]
    link_p, link_d = [0.0] * prefill_instances, [0.0] * decode_instances
    hand_d = [0.0] * decode_instances  # when each decode instance's hand-off work is free
    wire = []  # (end, request)
    decode_end = [math.inf] * decode_instances
    state = {"issued": 0, "done": 0}

    def issue(at):
        r = state["issued"]
        rec[r]["arrival"] = at
        if sglang:
            f["prealloc"][route_d[r]].append(r)
        else:
            rec[r]["preallocated"] = at
            f["queue"][route_p[r]].append(r)
        state["issued"] += 1

    def finished(count, at):
        state["done"] += count
        for _ in range(count if closed else 0):
            if state["issued"] < n:
                issue(at)

    if closed:
        for _ in range(min(int(load), n)):
            issue(0.0)
    t = 0.0
    while state["done"] < n:
        joined = 1
        while joined:
            for j in range(decode_instances):
                if decode_end[j] == math.inf:
                    _resume(f, j)
                    if sglang:
                        _prealloc(f, j, t)
            for i in range(prefill_instances):
                if prefill_end[i] == math.inf and f["queue"][i]:
                    prefill_end[i] = t + _prefill(f, i, t, finishing)
            joined = 0
            for j in range(decode_instances):
                if decode_end[j] == math.inf:
                    joined += _admit(f, j, t)
                    dt = _decode(f, j)
                    if dt > 0:
                        decode_end[j] = t + dt
            finished(joined, t)
        if state["done"] >= n:
            break
        upcoming = prefill_end + decode_end + [w[0] for w in wire]
        if not closed and state["issued"] < n:
            upcoming.append(arrivals[state["issued"]])
        t = min(upcoming)
        if t == math.inf:
            break
        while not closed and state["issued"] < n and arrivals[state["issued"]] <= t:
            issue(arrivals[state["issued"]])
        for i in range(prefill_instances):
            if prefill_end[i] <= t:
                prefill_end[i] = math.inf
                for r in finishing[i]:
                    j = route_d[r]
                    moved = max(t, link_p[i], link_d[j]) + transfer_s[r]
                    link_p[i] = link_d[j] = moved
                    hand_d[j] = max(moved, hand_d[j]) + handoff_s
                    end = hand_d[j] + handoff_delay_s
                    rec[r]["prefill_end"] = t
                    rec[r]["kv_landed"] = moved
                    wire.append((end, r))
                finishing[i] = []
        for end, r in [w for w in wire if w[0] <= t]:
            f["landed"][route_d[r]].append(r)
            rec[r]["handed_off"] = end
        wire = [w for w in wire if w[0] > t]
        for j in range(decode_instances):
            if decode_end[j] <= t:
                decode_end[j] = math.inf
                finished(_decode_end(f, j, t), t)
    return rec


def _prealloc(f, j, t):
    while f["prealloc"][j] and f["holding"][j] < f["slots"] and not f["retracted"][j]:
        r = f["prealloc"][j][0]
        need = _blocks(f["prompt"][r], f["block"])
        if need > f["free"][j]:
            break
        left = (f["free"][j] - need) * f["block"]
        if f["holding"][j] > 0 and left < f["reserved"] * (f["holding"][j] + 1):
            break
        f["prealloc"][j].pop(0)
        f["free"][j] -= need
        f["held"][r] = need
        f["holding"][j] += 1
        f["rec"][r]["preallocated"] = t
        f["queue"][f["route_p"][r]].append(r)


def _resume(f, j):
    while f["retracted"][j] and len(f["running"][j]) < f["max_seqs"]:
        r = f["retracted"][j][0]
        need = _blocks(f["prompt"][r] + f["gen"][r] + 1, f["block"])
        if need > f["free"][j]:
            break
        left = (f["free"][j] - need) * f["block"]
        if f["running"][j] and left < f["reserved"] * f["holding"][j]:
            break
        f["free"][j] -= need
        f["held"][r] = need
        f["running"][j].append(f["retracted"][j].pop(0))


def _admit(f, j, t):
    done = 0
    while f["landed"][j] and len(f["running"][j]) < f["max_seqs"]:
        r = f["landed"][j][0]
        if not f["sglang"]:
            need = _blocks(f["prompt"][r] + 1, f["block"])
            if need > f["free"][j]:
                break
            f["free"][j] -= need
            f["held"][r] = need
            f["holding"][j] += 1
        f["landed"][j].pop(0)
        if f["sglang"]:
            f["rec"][r]["first_token"] = t
            if f["output"][r] <= 1:
                f["rec"][r]["done"] = t
                f["free"][j] += f["held"][r]
                f["held"][r] = 0
                f["holding"][j] -= 1
                done += 1
                continue
        f["running"][j].append(r)
    return done


def _prefill(f, i, t, finishing):
    left, tokens, pairs, kv_read, seqs = f["budget"], 0, 0.0, 0, 0
    queue, computed, prompt = f["queue"][i], f["computed"], f["prompt"]
    while queue and left > 0:
        r = queue[0]
        if computed[r] == 0:
            f["rec"][r]["prefill_start"] = t
        take = min(prompt[r] - computed[r], left)
        p, kv = f["work"](computed[r], take)
        tokens, pairs, kv_read = tokens + take, pairs + p, kv_read + kv
        seqs += 1
        left -= take
        computed[r] += take
        if computed[r] < prompt[r]:
            break
        finishing[i].append(queue.pop(0))
    return f["step"]("prefill", tokens, pairs, kv_read, seqs)


def _decode(f, j):
    running, held, prompt, gen = f["running"][j], f["held"], f["prompt"], f["gen"]
    k = 0
    while k < len(running):
        r = running[k]
        need = _blocks(prompt[r] + gen[r] + 1, f["block"]) - held[r]
        while need > f["free"][j] and len(running) > k:
            victim = running.pop()
            f["preemptions"] += 1
            f["free"][j] += held[victim]
            held[victim] = 0
            if not f["sglang"]:
                f["valid"][victim] = 0
            f["retracted"][j].insert(0, victim)
        if len(running) <= k:
            break
        f["free"][j] -= need
        held[r] += need
        k += 1
    if not running:
        return 0.0
    tokens = pairs = kv_read = 0.0
    for r in running:
        m = prompt[r] + gen[r] + 1 - f["valid"][r]
        p, kv = f["work"](f["valid"][r], m)
        tokens, pairs, kv_read = tokens + m, pairs + p, kv_read + kv
    return f["step"]("decode", tokens, pairs, kv_read, len(running))


def _decode_end(f, j, t):
    done = 0
    first = 1 if f["sglang"] else 0
    for r in list(f["running"][j]):
        f["valid"][r] = f["prompt"][r] + f["gen"][r] + 1
        f["gen"][r] += 1
        if math.isnan(f["rec"][r]["first_token"]):
            f["rec"][r]["first_token"] = t
        if f["gen"][r] + first >= f["output"][r]:
            f["rec"][r]["done"] = t
            f["free"][j] += f["held"][r]
            f["held"][r] = 0
            f["holding"][j] -= 1
            f["running"][j].remove(r)
            done += 1
    return done


REGISTRY = {"pd.simulate_fleet": {"python": simulate_fleet_python}}

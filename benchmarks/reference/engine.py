"""Plain-Python reference of the engine simulation (see :mod:`capnb.kernels.engine`).

Written for reading, not speed: requests are objects, the queues are a deque and a list, the step
time is computed from the roofline formula directly. Tests compare its per-request times with the
numba kernel's on small cases; they must be identical.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

__all__ = ["REGISTRY", "attention_python", "simulate_python", "step_seconds_python"]


def attention_python(start, new, model):
    """(query-key pairs, KV tokens read) of ``new`` tokens after ``start``, position by position.

    A full layer's query at position ``q`` (1-based) attends to ``q`` keys, a windowed layer's to
    ``min(q, window)``; the step reads every key some query attends to. Windowed layers weigh
    ``model[7]`` of the KV bytes, their window is ``model[8]`` tokens.
    """
    full_pairs = new * start + 0.5 * new * (new + 1.0)  # sum of q over the new positions
    full_kv = start + new
    share = float(model[7]) if len(model) > 8 else 0.0
    if share == 0.0:
        return full_pairs, full_kv
    window = int(model[8])
    last = int(start + new)
    window_pairs = sum(min(q, window) for q in range(int(start) + 1, last + 1))
    first_key = max(1, int(start) + 1 - window + 1)  # the earliest key the first query reads
    window_kv = last - first_key + 1
    return (1 - share) * full_pairs + share * window_pairs, (
        1 - share
    ) * full_kv + share * window_kv


def step_seconds_python(
    tokens, pairs, kv_read, sequences, model, gpu, tensor_parallel, calibration
):
    """Seconds of one step computing ``tokens`` new tokens (the engine kernel's formula)."""
    flop_per_token, weights, kv_per_token, layers, width, hidden, head = (
        float(v) for v in model[:7]
    )
    flops, bandwidth, link = (float(v) for v in gpu[:3])
    attention_flops = float(gpu[3]) if len(gpu) > 3 else flops  # attention at BF16's rate
    compute_eff, bandwidth_eff, link_eff, step_s, sequence_s, allreduce_s = (
        float(v) for v in calibration[:6]
    )
    read = weights
    if len(model) > 11 and model[9] > 0:  # routed experts: the share the step's tokens touch
        expert_bytes, experts, per_token = float(model[9]), float(model[10]), float(model[11])
        touched = 1.0 - (1.0 - per_token / experts) ** tokens
        # read at their own share of the HBM efficiency (1 when the calibration has no such value)
        share = float(calibration[7]) if len(calibration) > 7 else 1.0
        read = weights - expert_bytes + expert_bytes * touched / share
        if len(model) > 12 and len(calibration) > 9:  # their arithmetic at its own share too
            flop_per_token += float(model[12]) * (1.0 / float(calibration[9]) - 1.0)
    block_fp8 = len(model) > 13 and model[13] > 0  # FP8 scaled by blocks: their own share
    if len(calibration) > 10 and block_fp8 and len(gpu) > 3 and gpu[0] > gpu[3]:
        flop_per_token /= float(calibration[10])
    # the LM head once per scheduled sequence (its sampled position), the layers at every token
    compute = (flop_per_token * tokens + head * sequences) / flops
    compute += 4.0 * layers * width * pairs / attention_flops
    memory = (read + kv_per_token * kv_read) / bandwidth
    if tensor_parallel > 1:
        ring = 2.0 * (tensor_parallel - 1) / tensor_parallel  # ring all-reduce: bytes on the wire
        wire = 2.0 * layers * tokens * hidden * 2.0 * ring / link  # bf16 activations, 2 per layer
        hops = 2.0 * layers * math.log2(tensor_parallel)
    else:
        wire, hops = 0.0, 0.0
    return (
        step_s
        + sequence_s * sequences
        + allreduce_s * hops
        + wire / link_eff
        + max(compute / compute_eff, memory / bandwidth_eff)
    )


@dataclass(eq=False)  # identity: requests are dict keys
class _Request:
    index: int  # position in the arrival order (closed loop: past n reuses sample index % n)
    prompt: int
    output: int
    cached: int
    arrival: float
    computed: int = 0
    generated: int = 0
    blocks: int = 0
    first: float = math.nan
    last: float = math.nan
    ready: float = 0.0  # when the front end has served it (it may be admitted from then on)
    kept: int = 0  # tokens it had computed when preempted, their blocks left cached
    ahead: int = 0  # blocks free at that preemption: allocations take them before its own
    mark: int = 0  # the pool's allocations counted then


@dataclass(eq=False)
class _Step:
    """One step's schedule in the making: the queues, what is planned, the budget and blocks."""

    running: list
    waiting: deque
    budget: int
    free: int
    preemptions: int
    block: int
    layout: tuple = (1, 0, 0)  # full groups, window groups, blocks a window group keeps at most
    plan: dict = field(default_factory=dict)  # request -> (new tokens, tokens in its cache)
    preempted: bool = False
    full: bool = False  # a request preempted itself: nothing more is scheduled
    alloc: int = 0  # blocks taken from the free pool since the start (a cached block found: none)
    keep: bool = False  # a preempted request's blocks stay cached until allocations take them


def _held(tokens, step):
    """Blocks of the pool a sequence of ``tokens`` holds (vLLM's groups; (1, 0, 0): full length)."""
    span = -(-tokens // step.block)
    full, windowed, kept = step.layout
    return full * span + windowed * min(span, kept)


def _run_kind(step, decoding):
    """The running requests of one kind (decoding, or in their prompt) get their next tokens."""
    for request in list(step.running):
        if step.full or step.budget == 0:
            return
        if request not in step.running:  # preempted earlier in this loop
            continue
        if (request.computed >= request.prompt) != decoding:
            continue
        want = min(request.prompt + request.generated - request.computed, step.budget)
        extra = max(_held(request.computed + want, step) - request.blocks, 0)
        while extra > step.free:
            victim = step.running.pop()  # the last admitted is preempted (recompute)
            if victim in step.plan:  # its token this step is given back
                step.budget += step.plan.pop(victim)[0]
            if step.keep:  # its blocks go to the back of the free pool, still cached
                victim.kept, victim.ahead, victim.mark = victim.computed, step.free, step.alloc
            step.free += victim.blocks
            victim.blocks = 0
            victim.computed = 0
            step.waiting.appendleft(victim)
            step.preemptions += 1
            step.preempted = True
            if victim is request:
                step.full = True
                return
        step.free -= extra
        step.alloc += extra
        request.blocks += extra
        step.plan[request] = (want, request.computed)
        step.budget -= want


def _promise(step, reserve, ratio):
    """Blocks the running requests' tokens to come will take (prompt and clipped output), x ratio."""
    if reserve[0] <= 0 or not step.waiting:
        return 0.0
    total = 0.0
    for r in step.running:
        left = min(r.output - r.generated, int(reserve[3]))
        more = _held(r.prompt + r.generated + left, step) - r.blocks
        if more > 0:
            total += ratio * more
    return total


def _reuse(request, step):
    """(Tokens of its context in cached blocks at admission, whether they are its own kept ones).

    The prefix hit in whole blocks (never the last prompt token), or, after a preemption with
    ``step.keep``, its computed whole blocks less those evicted since: allocations beyond the
    blocks free at its preemption take its blocks, the last first. At least one token is computed.
    """
    block = step.block
    base = min((request.cached // block) * block, request.prompt - 1)
    whole = (request.kept // block) * block
    if whole <= base:
        return base, False
    held = _held(whole, step)
    evicted = max(step.alloc - request.mark - request.ahead, 0)
    left = max(held - evicted, 0)
    valid = min(((whole // block) * left // held) * block,
                request.prompt + request.generated - 1)  # fmt: skip
    return (valid, True) if valid > base else (base, False)


def _admit_waiting(step, max_num_seqs, chunked_prefill, whole, now, reserve=(0, 0, 0, 0), ratio=0):
    """Waiting requests the front end has served are admitted first come first served while they fit.

    With a reserve (``reserve[0] > 0``), a request is admitted only if its whole prompt and output
    (clipped at ``reserve[3]`` tokens) fit beside ``ratio`` times the running requests' tokens to
    come.
    """
    promised = _promise(step, reserve, ratio)
    while step.waiting and len(step.running) < max_num_seqs and step.budget > 0:
        request = step.waiting[0]
        if request.ready > now:
            return
        reuse, own = _reuse(request, step)
        rest = request.prompt + request.generated - reuse
        if not chunked_prefill and rest > step.budget:
            return
        want = min(rest, step.budget)
        # prefill-first engines reserve the whole prompt's blocks at admission
        blocks = _held(reuse + (rest if whole else want), step)
        future = 0.0
        if reserve[0] > 0:
            left = min(request.output - request.generated, int(reserve[3]))
            future = float(_held(reuse + rest + left, step) - blocks)
        if blocks + future + promised > step.free:
            return
        promised += future
        step.waiting.popleft()
        step.free -= blocks
        step.alloc += blocks - (_held(reuse, step) if own else 0)  # its own cached blocks: found
        request.kept = 0
        request.blocks = blocks
        request.computed = reuse
        step.running.append(request)
        step.plan[request] = (want, reuse)
        step.budget -= want


def simulate_python(prompt, output, gaps, cached, *, closed, load, max_num_seqs,
                    max_num_batched_tokens, kv_blocks, block_size, warmup, model, gpu,
                    tensor_parallel, calibration, policy="mixed", chunked_prefill=True,
                    kv_layout=(1, 0, 0), reserve=(0.0, 0.0, 0.0, 0.0),
                    keep_preempted=False):  # fmt: skip
    """Per-request (ttft, e2e, itls) of the reported requests (index >= warmup), in index order.

    ``policy``: ``"mixed"`` (decodes, prompts in progress, then admission, in one step) or
    ``"prefill_first"`` (a prefill-only step whenever a prompt can run, else the decodes).
    ``chunked_prefill`` False: a waiting prompt is admitted only when all of it fits the budget.
    ``kv_layout``: (full groups, window groups, blocks a window group keeps at most) of vLLM's
    hybrid KV cache manager; ``kv_blocks`` counts the pool's blocks in that unit. ``reserve``:
    the admission reserve (ratio at start and after an idle or preempting step, least ratio,
    fall a decode step, output tokens clip); zeros: none. ``keep_preempted``: a preempted
    request's blocks stay cached until allocations evict them (vLLM V1's prefix caching).

    Returns a dict: ``ttft`` and ``e2e`` (lists, NaN for warm-up requests), ``itl`` (list of
    lists), ``preemptions`` and ``steps``.
    """
    n = len(prompt)
    free = int(kv_blocks)
    waiting: deque[_Request] = deque()
    running: list[_Request] = []
    results = {"ttft": [math.nan] * n, "e2e": [math.nan] * n, "itl": [[] for _ in range(n)]}
    preemptions = steps = alloc = 0
    now = 0.0
    issued = 0
    ratio = reserve[0]

    frontend = float(calibration[8]) if len(calibration) > 8 else 0.0
    front_free = 0.0  # when the front end has served every request that arrived so far

    def new(index, at):
        nonlocal front_free
        j = index % n
        front_free = max(at, front_free) + frontend  # one server, first come first served
        return _Request(index, int(prompt[j]), int(output[j]), int(cached[j]), at, ready=front_free)

    arrivals = []
    if closed:
        for _ in range(int(load)):
            waiting.append(new(issued, 0.0))
            issued += 1
    else:
        clock = 0.0
        for i in range(n):
            clock = clock + float(gaps[i]) / load
            arrivals.append(clock)

    def outstanding():
        return sum(1 for i in range(warmup, n) if math.isnan(results["e2e"][i]))

    while outstanding():
        if not closed:
            if not running and not waiting and issued < n and arrivals[issued] > now:
                now = arrivals[issued]
            while issued < n and arrivals[issued] <= now:
                waiting.append(new(issued, arrivals[issued]))
                issued += 1
        step = _Step(running, waiting, budget=max_num_batched_tokens, free=free,
                     preemptions=preemptions, block=block_size, layout=tuple(kv_layout),
                     alloc=alloc, keep=keep_preempted)  # fmt: skip
        if not running:
            ratio = reserve[0]
        if policy == "mixed":
            _run_kind(step, True)
            _run_kind(step, False)
            if not step.preempted:
                _admit_waiting(step, max_num_seqs, chunked_prefill, False, now, reserve, ratio)
            ratio = max(ratio - reserve[2], reserve[1])
        else:
            _run_kind(step, False)
            if not step.preempted:
                _admit_waiting(step, max_num_seqs, chunked_prefill, True, now, reserve, ratio)
            if not step.plan:
                _run_kind(step, True)
                ratio = max(ratio - reserve[2], reserve[1])
        if step.preempted:
            ratio = reserve[0]
        plan, free, preemptions, alloc = step.plan, step.free, step.preemptions, step.alloc
        if not plan:
            if step.preempted:
                continue  # a prompt preempted itself: the freed blocks let the decodes run next
            if waiting and waiting[0].ready > now:  # still in the front end
                ready = waiting[0].ready
                if not closed and issued < n:
                    ready = min(ready, arrivals[issued])
                now = max(now, ready)
                continue
            now = max(now, arrivals[issued])
            continue
        # in running order, as the kernel sums them (float addition is order-sensitive)
        order = [(r, *plan[r]) for r in running if r in plan]
        tokens = sum(w for _, w, _ in order)
        work = [attention_python(s, w, model) for _, w, s in order]
        pairs = sum(p for p, _ in work)
        kv_read = sum(kv for _, kv in work)
        now += step_seconds_python(
            float(tokens),
            pairs,
            float(kv_read),
            float(len(plan)),
            model,
            gpu,
            tensor_parallel,
            calibration,
        )
        steps += 1
        finished = []
        for request, want, _ in order:
            request.computed += want
            if request.computed != request.prompt + request.generated:
                continue
            request.generated += 1
            reported = warmup <= request.index < n
            if request.generated == 1:
                request.first = now
            elif reported:
                results["itl"][request.index].append(now - request.last)
            request.last = now
            if request.generated == request.output:
                finished.append(request)
        for request in finished:
            running.remove(request)
            free += request.blocks
            request.blocks = 0
            if warmup <= request.index < n:
                overhead = float(calibration[6])  # outside the steps, once per request
                results["ttft"][request.index] = request.first - request.arrival + overhead
                results["e2e"][request.index] = now - request.arrival + overhead
            if closed:
                waiting.append(new(issued, now))
                issued += 1
    results["preemptions"] = preemptions
    results["steps"] = steps
    return results


REGISTRY: dict[str, dict[str, object]] = {
    "engine.simulate": {"python": simulate_python},
    "engine.step_seconds": {"python": step_seconds_python},
}

"""Latency kernels: measured curves made monotone and interpolated, and the analytic serving model.

Measured curves
    :data:`monotone_envelope` (running maximum along concurrency: a noisy point never creates a dip)
    and :data:`interpolate` (piecewise linear, NaN outside the measured range: no extrapolation).

Analytic model (all quantities per GPU of a tensor-parallel group, in seconds, bytes, FLOP)
    One forward step of a batch costs::

        step = step_overhead + sequence_overhead x batch + allreduce_latency x 2 x layers x log2(TP)
               + activation bytes exchanged / (interconnect bandwidth x interconnect efficiency)
               + max(FLOP / (dense FLOP/s x compute efficiency),
                     bytes read / (HBM bandwidth x bandwidth efficiency))

    Prefill of ``p`` prompt tokens does ``2 x layer params x p + 2 x head params + 2 x layers x
    attention width x p^2`` FLOP (the LM head only at the sampled last token) and reads the weights
    once; a decode step of ``b`` sequences holding ``L`` tokens does ``2 x (layer params + head
    params) x b + 4 x layers x attention width x b x L`` FLOP and reads the weights plus
    ``b x L`` tokens of KV cache. The roofline ``max`` makes decode bandwidth-bound at small batch and
    compute-bound at large batch. A model's windowed layers (``window_share`` of its KV bytes, a
    window of ``W`` tokens) count ``min(L, W)`` for ``L`` there, and a query of a prompt attends
    to at most ``W`` keys (:func:`attention_work`).

    :data:`analytic_curve` turns step times into per-request latency at a concurrency ``c`` held
    constant (a closed loop, continuous batching, prefill not chunked): the ``c - 1`` other requests
    arrive at rate ``(c - 1) / E[e2e]``; each arrival's prefill stalls every decoding sequence, so
    the time share of prefill is ``rho = (c - 1) / E[e2e] x E[prefill]`` and the mean time per output
    token is ``step(c) / (1 - rho)``; a new request waits for prefills ahead of it as in an M/G/1
    queue (mean ``lambda E[prefill^2] / (2 (1 - rho))``, zero with probability ``1 - rho``,
    exponential otherwise) plus half a decode step. ``E[e2e]`` is the fixed point of these equations.
    Per-request latencies come from the workload's prompt and output lengths, so P50 and P99 follow
    from the length distribution and the queue, not from a fixed multiplier.

Quantiles use the inverse-CDF definition (the smallest value whose CDF reaches ``q``).
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import guvectorize, njit

__all__ = [
    "CALIBRATION_FIELDS",
    "GPU_FIELDS",
    "METRIC_CODES",
    "MODEL_FIELDS",
    "analytic_curve",
    "interpolate",
    "monotone_envelope",
    "prefill_seconds",
    "step_features",
    "step_seconds",
]

#: Order of the per-(model, tensor_parallel) vector the analytic kernels take (all per GPU).
MODEL_FIELDS = (
    "layer_flop_per_token",  # 2 x active layer parameters / TP (no embedding table, no LM head)
    "weight_bytes",  # weights held (and read each step) by one GPU
    "kv_bytes_per_token",  # KV cache bytes per token on one GPU
    "layers",
    "attention_width",  # query heads x head_dim / TP: attention FLOP scale per token pair
    "hidden_size",  # width of the activations all-reduced after attention and MLP
    "head_flop_per_token",  # 2 x LM head parameters / TP, per *sampled* token
    "window_share",  # share of the KV bytes per token in windowed layers (0: every layer full)
    "window_tokens",  # the tokens a windowed layer attends to (sliding window, attention chunk)
)
#: Order of the per-GPU vector: dense FLOP/s, HBM bytes/s, interconnect bytes/s (NaN: unknown).
GPU_FIELDS = ("flops", "hbm_bandwidth", "interconnect_bandwidth")
#: Order of the calibration vector (see :class:`capnb.calibration.Calibration`).
CALIBRATION_FIELDS = (
    "compute_efficiency",
    "bandwidth_efficiency",
    "interconnect_efficiency",
    "step_overhead_s",
    "sequence_overhead_s",
    "allreduce_latency_s",
)
#: Integer codes of the latency metrics in :data:`analytic_curve`'s ``metrics`` argument.
METRIC_CODES = {"ttft": 0, "tpot": 1, "itl": 2, "e2e": 3}

_ACTIVATION_BYTES = 2.0  # bf16 activations on the wire


# -- measured curves ------------------------------------------------------------------------------
def _monotone_envelope(values, out):
    # No comparison ever sees a NaN: LLVM may evaluate a comparison on either side of a branch, and
    # an ordered comparison with NaN raises the floating-point flag numpy reports as a warning.
    running = -math.inf
    for i in range(values.shape[0]):
        v = values[i]
        missing = math.isnan(v)
        candidate = running if missing else v
        if candidate > running:
            running = candidate
        out[i] = v if missing else running


#: Running maximum along the last axis, skipping NaN (a NaN stays NaN and does not reset it).
monotone_envelope = guvectorize(["void(f8[:], f8[:])"], "(n)->(n)")(_monotone_envelope)


def _interpolate(x, y, at, out):
    n = x.shape[0]
    for j in range(at.shape[0]):
        missing = math.isnan(at[j])
        t = x[0] if missing else at[j]  # keeps NaN out of the comparisons (see above)
        if n == 0 or missing or t < x[0] or t > x[n - 1]:
            out[j] = math.nan
            continue
        lo, hi = 0, n - 1
        while hi - lo > 1:  # binary search for x[lo] <= t <= x[hi]
            mid = (lo + hi) // 2
            if x[mid] <= t:
                lo = mid
            else:
                hi = mid
        if t == x[lo]:
            out[j] = y[lo]
        elif t == x[hi]:
            out[j] = y[hi]
        else:
            share = (t - x[lo]) / (x[hi] - x[lo])
            out[j] = y[lo] + share * (y[hi] - y[lo])


#: Piecewise-linear ``y(x)`` at ``at``; ``x`` ascending; NaN outside ``[x[0], x[-1]]``.
interpolate = guvectorize(["void(f8[:], f8[:], f8[:], f8[:])"], "(n),(n),(m)->(m)")(_interpolate)


# -- step times ----------------------------------------------------------------------------------
@njit(inline="always")
def _window_pairs(start, new, window):
    """Query-key pairs of ``new`` tokens after ``start`` cached ones, each attending to ``window``.

    At most ``window`` keys a query (itself included): the sum over positions ``q = start+1 ..
    start+new`` of ``min(q, window)``.
    """
    last = start + new
    if last <= window:
        return new * start + 0.5 * new * (new + 1.0)
    if start >= window:
        return new * window
    below = window - start  # the positions start+1 .. window attend to all before them
    return below * start + 0.5 * below * (below + 1.0) + (last - window) * window


@njit(inline="always")
def attention_work(start, new, model):
    """(query-key pairs, KV tokens read) of one sequence computing ``new`` tokens after ``start``.

    Full layers: every new token attends to all before it, the step reads the ``start + new``
    tokens' KV. Windowed layers (``window_share`` of the KV bytes, ``model[7]``) attend to at most
    ``window_tokens`` (``model[8]``) and read the last ``window_tokens + new - 1`` tokens' KV. A
    chunked-attention layer (Llama 4) is priced as a window of its chunk: an upper bound (a token
    attends to its chunk's tokens before it). Both are weighted by the layers' share, so that
    ``pairs`` and ``kv_read`` keep the units of a full-length model's.
    """
    pairs = new * start + 0.5 * new * (new + 1.0)
    kv = start + new
    share = model[7]
    if share > 0.0:
        window = model[8]
        pairs = (1.0 - share) * pairs + share * _window_pairs(start, new, window)
        kv = (1.0 - share) * kv + share * min(kv, window + new - 1.0)
    return pairs, kv


@njit
def _features(prefill, batch, tokens, model, gpu, tensor_parallel):
    """Terms of one step at unit efficiency: (compute s, memory s, interconnect s, all-reduces)."""
    flop_per_token, weights, kv_per_token = model[0], model[1], model[2]
    layers, attention_width, hidden, head = model[3], model[4], model[5], model[6]
    flops, bandwidth, interconnect = gpu[0], gpu[1], gpu[2]
    if prefill:  # ``tokens`` = prompt length of each of ``batch`` prompts; the last one sampled
        pairs = 0.5 * tokens * tokens  # (the analytic model's p^2 / 2 pairs a prompt)
        if model[7] > 0.0:
            windowed = _window_pairs(0.0, tokens, model[8]) - 0.5 * tokens
            pairs = (1.0 - model[7]) * pairs + model[7] * windowed
        flop = batch * (flop_per_token * tokens + head + 4.0 * layers * attention_width * pairs)
        moved = weights
        wire_tokens = batch * tokens
    else:  # ``tokens`` = mean context each decoding sequence holds
        read = tokens
        if model[7] > 0.0:
            read = (1.0 - model[7]) * tokens + model[7] * min(tokens, model[8])
        flop = batch * (flop_per_token + head + 4.0 * layers * attention_width * read)
        moved = weights + batch * read * kv_per_token
        wire_tokens = batch
    if tensor_parallel > 1:
        ring = 2.0 * (tensor_parallel - 1) / tensor_parallel
        wire = 2.0 * layers * wire_tokens * hidden * _ACTIVATION_BYTES * ring / interconnect
        allreduces = 2.0 * layers * math.log2(tensor_parallel)
    else:
        wire = 0.0
        allreduces = 0.0
    return flop / flops, moved / bandwidth, wire, allreduces


@njit
def _combine(compute, memory, wire, allreduces, batch, calibration):
    roofline = max(compute / calibration[0], memory / calibration[1])
    fixed = calibration[3] + calibration[4] * batch + calibration[5] * allreduces
    return fixed + wire / calibration[2] + roofline


@njit
def prefill_seconds(prompt, batch, model, gpu, tensor_parallel, calibration):
    """Seconds to prefill ``batch`` prompts of ``prompt`` tokens in one step."""
    compute, memory, wire, allreduces = _features(True, batch, prompt, model, gpu, tensor_parallel)
    return _combine(compute, memory, wire, allreduces, batch, calibration)


@njit
def decode_seconds(batch, context, model, gpu, tensor_parallel, calibration):
    """Seconds of one decode step of ``batch`` sequences that each hold ``context`` tokens."""
    compute, memory, wire, allreduces = _features(
        False, batch, context, model, gpu, tensor_parallel
    )
    return _combine(compute, memory, wire, allreduces, batch, calibration)


def _step_seconds(prefill, batch, tokens, model, gpu, tensor_parallel, calibration, out):
    if prefill:
        out[0] = prefill_seconds(tokens, batch, model, gpu, tensor_parallel, calibration)
    else:
        out[0] = decode_seconds(batch, tokens, model, gpu, tensor_parallel, calibration)


#: Seconds of one step (prefill or decode) from the model and a calibration; broadcasts.
step_seconds = guvectorize(
    ["void(b1, f8, f8, f8[:], f8[:], i8, f8[:], f8[:])"], "(),(),(),(k),(g),(),(j)->()"
)(_step_seconds)


def _step_features(prefill, batch, tokens, model, gpu, tensor_parallel, compute, memory, wire, n):
    compute[0], memory[0], wire[0], n[0] = _features(
        prefill, batch, tokens, model, gpu, tensor_parallel
    )


#: The four terms of a step at unit efficiency (compute s, memory s, interconnect s, all-reduces):
#: the calibration fits the efficiencies and overheads that combine them.
step_features = guvectorize(
    ["void(b1, f8, f8, f8[:], f8[:], i8, f8[:], f8[:], f8[:], f8[:])"],
    "(),(),(),(k),(g),()->(),(),(),()",
)(_step_features)


# -- the analytic curve ---------------------------------------------------------------------------
@njit
def _sorted_quantile(sorted_values, q):
    """Inverse-CDF quantile of equally weighted sorted samples."""
    n = sorted_values.shape[0]
    k = math.ceil(q * n - 1e-9) - 1  # the tolerance keeps q x n = 99.000000001 at 99
    k = min(max(k, 0), n - 1)
    return sorted_values[k]


@njit
def _wait_mixture_quantile(sorted_x, rho, mean_wait, q):
    """Inverse-CDF quantile of x_i + W over equally weighted samples, in one pass.

    W = 0 with probability 1 - rho, else exponential with mean ``mean_wait``. With
    S_j = sum_{i <= j} exp(-(x_j - x_i) / m) (built by S_j = 1 + S_{j-1} exp(-(x_j - x_{j-1}) / m),
    every exponent <= 0, so nothing overflows), the CDF between x_{j-1} and x_j is
    (j - rho S_{j-1} exp(-(t - x_{j-1}) / m)) / n and its root is closed-form.
    """
    n = sorted_x.shape[0]
    if rho <= 0.0 or mean_wait <= 0.0:
        return _sorted_quantile(sorted_x, q)
    target = q * n
    previous_sum = 0.0
    for j in range(n):
        if j == 0:
            running = 1.0
        else:
            # one exp per sample (it was taken twice: the same bits, half the time)
            decayed = previous_sum * math.exp(-(sorted_x[j] - sorted_x[j - 1]) / mean_wait)
            running = 1.0 + decayed
            # the quantile lies in [x_{j-1}, x_j) when the CDF crosses q before the jump at x_j
            if j - rho * decayed >= target:
                if j - target <= 0.0:  # the crossing is at the end of the interval
                    return sorted_x[j]
                return sorted_x[j - 1] + mean_wait * math.log(rho * previous_sum / (j - target))
        if (j + 1) - rho * running >= target:
            return sorted_x[j]
        previous_sum = running
    return sorted_x[n - 1] + mean_wait * math.log(rho * previous_sum / (n - target))


@njit
def _tpot_unit_quantile(outputs, q):
    """The q-quantile of TPOT minus its mean, for a stall variance of 1 s^2.

    Per request, TPOT ~ Normal(mean_tpot, stall_variance / (output - 1)): the prefills that land
    in its decode form a compound Poisson sum spread over its output tokens. Requests with one
    output token have no TPOT (as in vLLM's benchmark) and are left out (NaN when none is left).
    Every request's spread scales with sqrt(stall_variance), so the mixture's quantile is
    ``mean_tpot + sqrt(stall_variance) * unit`` at every concurrency: one solve per curve and
    quantile. Newton's method on the mixture's CDF, kept inside a bisection bracket.
    """
    scales = np.empty(outputs.shape[0])  # sd * sqrt(2) per request with a TPOT
    count = 0
    widest = 0.0
    for i in range(outputs.shape[0]):
        if outputs[i] > 1.0:
            sd = math.sqrt(1.0 / (outputs[i] - 1.0))
            scales[count] = sd * math.sqrt(2.0)
            count += 1
            widest = max(widest, sd)
    if count == 0:
        return math.nan
    lo, hi = -40.0 * widest, 40.0 * widest
    t = 0.0
    for _ in range(200):
        total = 0.0
        density = 0.0
        for j in range(count):
            z = t / scales[j]
            total += math.erf(z)
            density += math.exp(-z * z) / scales[j]
        cdf = 0.5 + 0.5 * total / count
        if cdf >= q:
            hi = t
        else:
            lo = t
        # d/dt of 0.5 * (1 + erf(t / scale)) is exp(-(t / scale)^2) / (scale * sqrt(pi))
        density /= count * math.sqrt(math.pi)
        following = t - (cdf - q) / density if density > 0.0 else lo
        if not lo < following < hi:  # Newton left the bracket (or the density underflowed)
            following = 0.5 * (lo + hi)
        if abs(following - t) <= 1e-14 * widest or hi - lo <= 1e-14 * widest:
            return following
        t = following
    return hi


@njit
def _insertion_order(values, order):
    """Reorder ``order`` so that ``values[order]`` ascends (fast when it nearly does already)."""
    for i in range(1, order.shape[0]):
        moving = order[i]
        key = values[moving]
        j = i - 1
        while j >= 0 and values[order[j]] > key:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = moving


@njit
def _queue(c, mean_prefill, mean_prefill_sq, decode_tokens, step, e2e):
    """Given E[e2e], the queue terms: (rho, mean TPOT, mean prefill wait, step wait, model E[e2e])."""
    others_rate = (c - 1.0) / e2e
    rho = others_rate * mean_prefill
    if rho >= 1.0:
        return rho, math.inf, math.inf, 0.0, math.inf
    tpot = step / (1.0 - rho)
    prefill_wait = others_rate * mean_prefill_sq / (2.0 * (1.0 - rho))
    step_wait = 0.5 * step * (c - 1.0) / c
    model_e2e = mean_prefill + step_wait + prefill_wait + decode_tokens * tpot
    return rho, tpot, prefill_wait, step_wait, model_e2e


@njit
def _solve_e2e(c, mean_prefill, mean_prefill_sq, decode_tokens, step):
    """The fixed point E = model_e2e(E) (unique: the model's E[e2e] falls as E rises)."""
    lo = mean_prefill + 0.5 * step * (c - 1.0) / c + decode_tokens * step
    if c <= 1.0:
        return lo
    hi = max(2.0 * lo, 2.0 * (c - 1.0) * mean_prefill)
    for _ in range(400):
        if hi - _queue(c, mean_prefill, mean_prefill_sq, decode_tokens, step, hi)[4] > 0.0:
            break
        hi *= 2.0
    for _ in range(400):
        mid = 0.5 * (lo + hi)
        if mid - _queue(c, mean_prefill, mean_prefill_sq, decode_tokens, step, mid)[4] > 0.0:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-13 * hi:
            break
    return hi


def _analytic_curve(
    model, gpu, tensor_parallel, calibration, prompt, output, concurrency, metrics, quantiles,
    latency_out, mean_out,
):  # fmt: skip
    missing = math.isnan(gpu[0]) or math.isnan(gpu[1])
    missing = missing or (tensor_parallel > 1 and math.isnan(gpu[2]))
    for v in model:
        missing = missing or math.isnan(v)
    if missing:
        # a figure the model needs is unknown (an invalid TP masked to NaN, or a GPU without an
        # interconnect bandwidth at TP > 1): no curve, and no comparison ever sees the NaN
        latency_out[:] = math.nan
        mean_out[:] = math.nan
        return
    n = prompt.shape[0]
    prefill = prompt.copy()
    total_output = 0.0
    weighted_context = 0.0
    decode_tokens = 0.0
    for i in range(n):
        prefill[i] = prefill_seconds(prompt[i], 1.0, model, gpu, tensor_parallel, calibration)
        total_output += output[i]
        weighted_context += output[i] * (prompt[i] + 0.5 * output[i])
        decode_tokens += max(output[i] - 1.0, 0.0)
    decode_tokens /= n
    # A decoding sequence is met in proportion to its output length: the mean context held by the
    # batch is the output-weighted mean of (prompt + half the output).
    context = weighted_context / total_output
    mean_prefill = 0.0
    mean_prefill_sq = 0.0
    for i in range(n):
        mean_prefill += prefill[i] / n
        mean_prefill_sq += prefill[i] * prefill[i] / n
    # the requests' e2e order changes little from one concurrency to the next (only the TPOT
    # term moves): keep the order and repair it by insertion, instead of sorting from scratch
    # (numpy's sorts would also add a second of compiling on a fresh install)
    order = np.arange(n)
    _insertion_order(prefill, order)
    sorted_prefill = prefill[order]
    e2e_each = prefill.copy()
    e2e_unsorted = prefill.copy()
    # TPOT needs a request with a second token; the unit quantiles stay finite (no NaN may reach
    # a comparison LLVM evaluates on both arms: numpy would report the flag as a warning)
    has_tpot = False
    for i in range(n):
        has_tpot = has_tpot or output[i] > 1.0
    tpot_unit = np.zeros(quantiles.shape[0])
    for r in range(metrics.shape[0]):
        if metrics[r] == 1 and has_tpot:
            for k in range(quantiles.shape[0]):
                tpot_unit[k] = _tpot_unit_quantile(output, quantiles[k])

    for m in range(concurrency.shape[0]):
        c = concurrency[m]
        step = decode_seconds(c, context, model, gpu, tensor_parallel, calibration)
        e2e = _solve_e2e(c, mean_prefill, mean_prefill_sq, decode_tokens, step)
        rho, tpot, prefill_wait, step_wait, _ = _queue(
            c, mean_prefill, mean_prefill_sq, decode_tokens, step, e2e
        )
        # Denominators are kept non-zero: LLVM may evaluate both arms of a conditional, and a 0/0
        # there would raise the floating-point flag numpy reports as a warning.
        mean_wait = prefill_wait / max(rho, 1e-300) if rho > 0.0 else 0.0
        stall_variance = (c - 1.0) / e2e * tpot * mean_prefill_sq
        arrivals_per_gap = (c - 1.0) / e2e * tpot
        for r in range(metrics.shape[0]):
            code = metrics[r]
            if code == 0:  # ttft
                mean_out[m, r] = mean_prefill + step_wait + prefill_wait
                for i in range(n):
                    e2e_each[i] = sorted_prefill[i] + step_wait
                for k in range(quantiles.shape[0]):
                    latency_out[m, r, k] = _wait_mixture_quantile(
                        e2e_each, rho, mean_wait, quantiles[k]
                    )
            elif code == 1:  # tpot
                mean_out[m, r] = tpot
                spread = math.sqrt(stall_variance)
                for k in range(quantiles.shape[0]):
                    if not has_tpot:
                        latency_out[m, r, k] = math.nan
                    else:  # TPOT is at least one decode step
                        latency_out[m, r, k] = max(tpot + spread * tpot_unit[k], step)
            elif code == 2:  # itl: a gap is one step, plus the prefills that land in it
                mean_out[m, r] = tpot
                no_prefill = math.exp(-arrivals_per_gap)
                some_prefill = max(1.0 - no_prefill, 1e-300)
                for k in range(quantiles.shape[0]):
                    q = quantiles[k]
                    if q <= no_prefill:
                        latency_out[m, r, k] = step
                    else:
                        level = (q - no_prefill) / some_prefill
                        stalls = arrivals_per_gap / some_prefill
                        latency_out[m, r, k] = step + stalls * _sorted_quantile(
                            sorted_prefill, level
                        )
            else:  # e2e
                mean_out[m, r] = e2e
                for i in range(n):
                    e2e_unsorted[i] = prefill[i] + step_wait + max(output[i] - 1.0, 0.0) * tpot
                _insertion_order(e2e_unsorted, order)
                for i in range(n):
                    e2e_each[i] = e2e_unsorted[order[i]]
                for k in range(quantiles.shape[0]):
                    latency_out[m, r, k] = _wait_mixture_quantile(
                        e2e_each, rho, mean_wait, quantiles[k]
                    )


_CURVE_SIG = (
    "void(f8[:], f8[:], i8, f8[:], f8[:], f8[:], f8[:], i8[:], f8[:], f8[:, :, :], f8[:, :])"
)
_CURVE_LAYOUT = "(k),(g),(),(j),(n),(n),(m),(r),(q)->(m,r,q),(m,r)"

#: Latency quantiles ``[concurrency, metric, quantile]`` and means ``[concurrency, metric]`` (s) of
#: one (model, gpu, tensor_parallel) cell for a workload of ``n`` (prompt, output) length samples.
#: ``metrics`` holds :data:`METRIC_CODES`.
analytic_curve = guvectorize([_CURVE_SIG], _CURVE_LAYOUT, threads=True)(_analytic_curve)

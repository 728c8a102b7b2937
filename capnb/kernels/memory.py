"""Memory kernels: bytes on one GPU for weights + KV cache + headroom, and the largest fitting batch.

One accounting covers both of capnb's memory models (see :mod:`capnb.memory`)::

    blocks   = ceil(seq_len / block_tokens)
    kv_cache = concurrency x (full x blocks + windowed x min(blocks, window_blocks))
               x block_tokens x kv_bytes_per_token
    headroom = headroom_fraction x (weights + kv_cache) + reserve_bytes
    total    = weights + kv_cache + headroom
    fits     = total <= usable_bytes

The article's rule is ``headroom_fraction=0.15, reserve_bytes=0, block_tokens=1`` with the whole GPU
usable; vLLM's is ``headroom_fraction=0``, a fixed reserve, 16-token blocks and
``usable = gpu_memory_utilization x capacity``. ``full`` and ``windowed`` weigh a model's layers as
vLLM's hybrid KV cache manager groups them (:class:`capnb.data.modelspec.KVGroups`: the layers of
its full-attention and sliding-window groups over the model's layers); a full-length count is
``full=1, windowed=0``, bit for bit the count without them. All byte quantities are per GPU (per
tensor-parallel rank) and float64; concurrency, seq_len and window_blocks are int64.
"""

from __future__ import annotations

import math

import numpy as np

from ._lazy import guvectorize, jit, njit

__all__ = [
    "fits",
    "fits_rows",
    "footprint",
    "footprint_rows",
    "kv_cache_bytes",
    "largest_fitting_concurrency",
    "sequence_bytes",
    "smallest_fitting_tensor_parallel",
    "total_bytes",
]


@njit
def kv_cache_bytes(concurrency, seq_len, kv_bytes_per_token, block_tokens, full=1.0, windowed=0.0,
                   window_blocks=0):  # fmt: skip
    """KV cache bytes of ``concurrency`` sequences of ``seq_len`` tokens, in whole blocks.

    ``full`` and ``windowed``: the shares of the layers in full-attention and windowed groups
    (vLLM's hybrid manager); a windowed group holds ``window_blocks`` of a sequence at most.
    """
    blocks = (seq_len + block_tokens - 1) // block_tokens
    held = full * blocks + windowed * min(blocks, window_blocks)
    return concurrency * (held * block_tokens * kv_bytes_per_token)


@njit
def total_bytes(weights_bytes, kv_bytes, headroom_fraction, reserve_bytes):
    """Weights + KV cache + headroom, where headroom = fraction x (weights + KV) + reserve."""
    return (weights_bytes + kv_bytes) * (1.0 + headroom_fraction) + reserve_bytes


@njit
def _fits_one(concurrency, weights, kv_per_token, usable, seq_len, fraction, reserve, block, full,
             windowed, window_blocks):  # fmt: skip
    kv = kv_cache_bytes(concurrency, seq_len, kv_per_token, block, full, windowed, window_blocks)
    return total_bytes(weights, kv, fraction, reserve) <= usable


@njit(nogil=True)
def footprint_rows(
    weights_bytes, kv_bytes_per_token, reserve_bytes, concurrency, seq_len, headroom_fraction,
    block_tokens, full, windowed, window_blocks, kv_out, headroom_out, total_out, first, stop,
):  # fmt: skip
    """:data:`footprint` for the (model, tensor_parallel) pairs ``first .. stop - 1`` (row-major).

    Without the GIL: the step module gives each thread a range of pairs on large grids, where
    writing the outputs (and the page faults of fresh memory) is the whole cost.
    """
    n_tp = weights_bytes.shape[1]
    per_sequence = np.empty(seq_len.shape[0])
    for pair in range(first, stop):
        m, t = pair // n_tp, pair % n_tp
        weights, reserve = weights_bytes[m, t], reserve_bytes[m, t]
        for j in range(seq_len.shape[0]):
            per_sequence[j] = kv_cache_bytes(
                1,
                seq_len[j],
                kv_bytes_per_token[m, t],
                block_tokens,
                full[m, t],
                windowed[m, t],
                window_blocks[m, t],
            )
        for i in range(concurrency.shape[0]):
            c = concurrency[i]
            kv_row, headroom_row, total_row = (
                kv_out[m, t, i],
                headroom_out[m, t, i],
                total_out[m, t, i],
            )
            for j in range(seq_len.shape[0]):  # contiguous writes, one output at a time
                kv_row[j] = c * per_sequence[j]
            for j in range(seq_len.shape[0]):
                total = total_bytes(weights, kv_row[j], headroom_fraction, reserve)
                total_row[j] = total
                headroom_row[j] = total - weights - kv_row[j]


@jit(
    "void(f8[:, ::1], f8[:, ::1], f8[:, ::1], i8[::1], i8[::1], f8, i8, f8[:, ::1], f8[:, ::1],"
    " i8[:, ::1], f8[:, :, :, ::1], f8[:, :, :, ::1], f8[:, :, :, ::1])"
)
def footprint(
    weights_bytes,
    kv_bytes_per_token,
    reserve_bytes,
    concurrency,
    seq_len,
    headroom_fraction,
    block_tokens,
    full,
    windowed,
    window_blocks,
    kv_out,
    headroom_out,
    total_out,
):
    """KV cache, headroom and total bytes on one GPU over (model, tensor_parallel, concurrency, seq_len).

    Parameters are (model, tensor_parallel) arrays, the grid axes 1-D, all C-contiguous; the caller
    allocates the three outputs; ``full``, ``windowed`` and ``window_blocks`` over (model,
    tensor_parallel) as in :func:`kv_cache_bytes`. The GPU does not enter: what a configuration
    needs does not depend on where it runs (see :func:`fits`).
    """
    footprint_rows(
        weights_bytes, kv_bytes_per_token, reserve_bytes, concurrency, seq_len, headroom_fraction,
        block_tokens, full, windowed, window_blocks, kv_out, headroom_out, total_out, 0,
        weights_bytes.size,
    )  # fmt: skip


@njit(nogil=True)
def fits_rows(largest_concurrency, concurrency, out, first, stop):
    """:data:`fits` for the cells ``first .. stop - 1`` (without the GIL, as :func:`footprint_rows`)."""
    for k in range(first, stop):
        for i in range(concurrency.shape[0]):
            value = concurrency[i]
            for j in range(largest_concurrency.shape[1]):
                out[k, i, j] = value <= largest_concurrency[k, j]


@jit("void(i8[:, ::1], i8[::1], b1[:, :, ::1])")
def fits(largest_concurrency, concurrency, out):
    """``out[k, i, j] = concurrency[i] <= largest_concurrency[k, j]``, for (cells, concurrency, seq_len).

    Because the total grows with concurrency, a concurrency fits exactly when it is at most the
    largest fitting one (:data:`largest_fitting_concurrency`).
    """
    fits_rows(largest_concurrency, concurrency, out, 0, largest_concurrency.shape[0])


@njit
def _largest_one(
    weights_bytes, kv_bytes_per_token, usable_bytes, seq_len, headroom_fraction, reserve_bytes,
    block_tokens, full, windowed, window_blocks,
):  # fmt: skip
    # Solve total(c) <= usable for c in closed form, then step to the exact integer boundary with
    # the same arithmetic the footprint kernel uses, so that fits(c) <=> c <= out for every c.
    per_sequence = kv_cache_bytes(1, seq_len, kv_bytes_per_token, block_tokens, full, windowed,
                                  window_blocks)  # fmt: skip
    room = (usable_bytes - reserve_bytes) / (1.0 + headroom_fraction) - weights_bytes
    # `room != room` is a quiet NaN test (a masked cell); an ordered comparison would raise the
    # floating-point invalid flag, which numpy reports as a RuntimeWarning.
    if room != room or per_sequence != per_sequence or room < 0.0 or per_sequence <= 0.0:
        return 0
    c = math.floor(room / per_sequence)
    w, kv, usable, fraction = weights_bytes, kv_bytes_per_token, usable_bytes, headroom_fraction
    layout = (block_tokens, full, windowed, window_blocks)
    while c > 0 and not _fits_one(c, w, kv, usable, seq_len, fraction, reserve_bytes, *layout):
        c -= 1
    while _fits_one(c + 1, w, kv, usable, seq_len, fraction, reserve_bytes, *layout):
        c += 1
    return c


def _largest_fitting_concurrency(
    weights_bytes,
    kv_bytes_per_token,
    usable_bytes,
    seq_len,
    headroom_fraction,
    reserve_bytes,
    block_tokens,
    full,
    windowed,
    window_blocks,
    out,
):
    out[0] = _largest_one(
        weights_bytes, kv_bytes_per_token, usable_bytes, seq_len, headroom_fraction,
        reserve_bytes, block_tokens, full, windowed, window_blocks,
    )  # fmt: skip


def _sequence_bytes(seq_len, kv_bytes_per_token, block_tokens, full, windowed, window_blocks, out):
    out[0] = kv_cache_bytes(1, seq_len, kv_bytes_per_token, block_tokens, full, windowed,
                            window_blocks)  # fmt: skip


#: KV cache bytes of one sequence (:func:`kv_cache_bytes`), broadcast over its arguments: seq_len,
#: KV bytes per token, block tokens, and the hybrid layout's full and windowed shares and window
#: blocks.
sequence_bytes = guvectorize(["void(i8, f8, i8, f8, f8, i8, f8[:])"], "(),(),(),(),(),()->()")(
    _sequence_bytes
)


#: Per (model, gpu, tensor_parallel, seq_len): the largest integer concurrency that fits (0: none).
#: Arguments: weights, KV bytes per token, usable bytes, seq_len, headroom fraction, reserve, block
#: tokens, and the hybrid layout's full and windowed shares and window blocks (1, 0, 0: full length).
largest_fitting_concurrency = guvectorize(
    ["void(f8, f8, f8, i8, f8, f8, i8, f8, f8, i8, i8[:])"], "(),(),(),(),(),(),(),(),(),()->()"
)(_largest_fitting_concurrency)


@jit(
    "void(f8[:, ::1], f8[:, ::1], f8[:, ::1], i8[::1], f8[::1], i8[::1], f8, i8, f8[::1], f8[::1],"
    " i8[::1], i8[:, :, ::1])"
)
def smallest_fitting_tensor_parallel(
    weights_bytes,
    kv_bytes_per_token,
    reserve_bytes,
    tensor_parallel,
    usable_bytes,
    seq_len,
    headroom_fraction,
    block_tokens,
    full,
    windowed,
    window_blocks,
    out,
):
    """Per (model, gpu, seq_len): the first tensor-parallel degree at which one sequence fits (0: none).

    ``weights_bytes``, ``kv_bytes_per_token`` and ``reserve_bytes`` are per GPU over (model,
    candidate), the candidates ``tensor_parallel`` ascending; ``usable_bytes`` over gpu; ``out``
    (model, gpu, seq_len); ``full``, ``windowed`` and ``window_blocks`` over model (the hybrid
    layout, :func:`kv_cache_bytes`). "Fits" is :data:`largest_fitting_concurrency` > 0; the search
    stops at the first candidate that fits.
    """
    for m in range(out.shape[0]):
        for g in range(out.shape[1]):
            for s in range(out.shape[2]):
                out[m, g, s] = 0
                for k in range(tensor_parallel.shape[0]):
                    largest = _largest_one(
                        weights_bytes[m, k], kv_bytes_per_token[m, k], usable_bytes[g],
                        seq_len[s], headroom_fraction, reserve_bytes[m, k], block_tokens, full[m],
                        windowed[m], window_blocks[m],
                    )  # fmt: skip
                    if largest > 0:
                        out[m, g, s] = tensor_parallel[k]
                        break

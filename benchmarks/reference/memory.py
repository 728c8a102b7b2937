"""Plain Python and numpy references of the memory kernels (see :mod:`benchmarks.reference`)."""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "FULL",
    "REGISTRY",
    "footprint_numpy",
    "footprint_python",
    "largest_fitting_concurrency_closed_numpy",
    "largest_fitting_concurrency_numpy",
    "largest_fitting_concurrency_python",
    "smallest_fitting_tensor_parallel_python",
]


#: The full-length KV layout: every layer holds the whole sequence (vLLM's hybrid manager off).
FULL = (1.0, 0.0, 0)


def footprint_python(weights, kv_per_token, usable, concurrency, seq_len, fraction, reserve, block,
                     layout=FULL):  # fmt: skip
    """One cell of the memory footprint: (kv_cache, headroom, total, fits).

    ``layout``: (full share, windowed share, window blocks) of the layers as vLLM's hybrid KV
    cache manager groups them; a windowed group keeps at most ``window blocks`` of a sequence.
    """
    full, windowed, window_blocks = layout
    blocks = -(-int(seq_len) // int(block))
    held = float(full) * blocks + float(windowed) * min(blocks, int(window_blocks))
    kv = int(concurrency) * (held * int(block) * float(kv_per_token))
    total = (float(weights) + kv) * (1.0 + float(fraction)) + float(reserve)
    return kv, total - weights - kv, total, total <= usable


def footprint_numpy(weights, kv_per_token, usable, concurrency, seq_len, fraction, reserve, block,
                    layout=FULL):  # fmt: skip
    """The memory footprint by numpy broadcasting (materialises every output)."""
    full, windowed, window_blocks = layout
    blocks = -(-np.asarray(seq_len) // block)
    held = full * blocks + windowed * np.minimum(blocks, window_blocks)
    kv = concurrency * (held * block * kv_per_token)
    total = (weights + kv) * (1.0 + fraction) + reserve
    headroom = total - weights - kv
    return kv, headroom, total, total <= usable


def largest_fitting_concurrency_python(
    weights, kv_per_token, usable, seq_len, fraction, reserve, block, layout=FULL
):
    """Count up from 1 until the footprint no longer fits (the dumbest correct search)."""
    cell = (seq_len, fraction, reserve, block, layout)
    seq_len, fraction, reserve, block, layout = cell
    if footprint_python(weights, kv_per_token, usable, 1, *cell)[3]:
        per_seq = footprint_python(0, kv_per_token, math.inf, 1, seq_len, 0.0, 0.0, block, layout)[
            0
        ]
        # jump close to the answer, then walk: a plain walk from 1 would take millions of steps
        c = max(1, int(((usable - reserve) / (1 + fraction) - weights) // per_seq) - 2)
        while not footprint_python(weights, kv_per_token, usable, c, *cell)[3]:
            c -= 1
        while footprint_python(weights, kv_per_token, usable, c + 1, *cell)[3]:
            c += 1
        return c
    return 0


def largest_fitting_concurrency_numpy(
    weights, kv_per_token, usable, concurrency, seq_len, fraction, reserve, block
):
    """Largest value of the ``concurrency`` grid (last axis) that fits, by materialising the grid.

    Inputs broadcast against each other with ``concurrency`` on the last axis; returns 0 where no
    value fits.
    """
    fits = footprint_numpy(
        weights, kv_per_token, usable, concurrency, seq_len, fraction, reserve, block
    )[3]
    return np.where(fits, concurrency, 0).max(axis=-1)


def largest_fitting_concurrency_closed_numpy(
    weights, kv_per_token, usable, seq_len, fraction, reserve, block
):
    """The same answer in closed form with numpy, without a concurrency grid: the best plain version.

    Solves total(c) <= usable for c per cell, then steps each cell to the exact integer boundary
    with the footprint's own arithmetic (as the kernel does), vectorised over cells.
    """
    weights, kv_per_token, usable, seq_len = np.broadcast_arrays(
        np.asarray(weights, float), np.asarray(kv_per_token, float), np.asarray(usable, float),
        np.asarray(seq_len, np.int64),
    )  # fmt: skip

    def fits(c):
        blocks = (seq_len + block - 1) // block
        kv = c * (blocks * block * kv_per_token)
        return (weights + kv) * (1.0 + fraction) + reserve <= usable

    per_sequence = ((seq_len + block - 1) // block) * block * kv_per_token
    room = (usable - reserve) / (1.0 + fraction) - weights
    ok = np.isfinite(room) & np.isfinite(per_sequence) & (room >= 0) & (per_sequence > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.where(ok, np.floor(np.where(ok, room, 0) / np.where(ok, per_sequence, 1)), 0)
    c = c.astype(np.int64)
    while True:  # rounding puts the closed form at most a step or two off the boundary
        down = ok & (c > 0) & ~fits(c)
        up = ok & fits(c + 1)
        if not (down.any() or up.any()):
            return c
        c = c - down + up


def smallest_fitting_tensor_parallel_python(
    weights, kv_per_token, reserve, candidates, usable, seq_len, fraction, block, layout=FULL
):
    """The first candidate (ascending) at which one sequence fits, for one (model, gpu, seq_len).

    ``weights``, ``kv_per_token`` and ``reserve`` hold one value per candidate; 0 when none fits.
    """
    for w, kv, r, tp in zip(weights, kv_per_token, reserve, candidates, strict=True):
        cell = (seq_len, fraction, r, block, layout)
        if not math.isnan(w) and footprint_python(w, kv, usable, 1, *cell)[3]:
            return int(tp)
    return 0


#: kernel name -> references (plain Python per cell, numpy over the grid)
REGISTRY = {
    "memory.footprint": {"python": footprint_python, "numpy": footprint_numpy},
    "memory.largest_fitting_concurrency": {
        "python": largest_fitting_concurrency_python,
        "numpy": largest_fitting_concurrency_numpy,
        "numpy (closed form)": largest_fitting_concurrency_closed_numpy,
    },
    "memory.smallest_fitting_tensor_parallel": {
        "python": smallest_fitting_tensor_parallel_python,
    },
}

"""Prefix-cache benchmark: the LRU replay of the whole bundled Mooncake trace (goal: well under 1 s).

:func:`capnb.memory.prefix_hit_rate` on ``mooncake-synthetic`` (3,993 requests, 121,877 block
uses), 25 cache sizes at once, timed warm: the whole call (reading the JSON lines included), the
kernels alone (one pass gives every size), and the plain-Python ``OrderedDict`` LRU, which replays
the log once per size (timed on 3 sizes, scaled to 25).
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from capnb import data, memory
from capnb.kernels import prefix

from . import Row, best_time
from .reference.prefix import lru_hit_tokens_python


def run(quick: bool = False) -> list[Row]:
    blocks = data.load_block_hashes("mooncake-synthetic")
    if quick:
        stop = int(blocks.block_start[500])
        blocks = blocks.isel(request=slice(0, 500), block=slice(0, stop)).assign_attrs(blocks.attrs)
    curve = memory.prefix_hit_rate(blocks)  # compile (or load from the cache)
    sizes = curve.cache_tokens.values
    t_call = best_time(lambda: memory.prefix_hit_rate("mooncake-synthetic"), repeat=3, warmup=1)
    _, keys = np.unique(blocks.block_hash.values, return_inverse=True)
    keys = keys.astype(np.int64)
    starts = np.append(blocks.block_start.values, keys.size).astype(np.int64)
    held = blocks.block_prompt_tokens.values.astype(np.int64)

    def kernels():
        needs = prefix.prefix_needs(prefix.stack_distances(keys, int(keys.max()) + 1), starts)
        return prefix.hit_tokens_by_capacity(needs, held, int(keys.max()) + 1)

    t_kernels = best_time(kernels, repeat=5, warmup=1)
    bounds = np.append(starts, keys.size)
    hashes = blocks.block_hash.values
    requests = [(hashes[a:b].tolist(), held[a:b].tolist()) for a, b in itertools.pairwise(bounds)]
    picked = sizes[[1, sizes.size // 2, -1]] // int(blocks.attrs["block_tokens"])
    start = time.perf_counter()
    for c in picked:
        lru_hit_tokens_python(requests, int(c))
    t_ref = (time.perf_counter() - start) / picked.size * sizes.size
    return [
        Row(
            "memory.prefix_hit_rate (LRU replay)",
            f"{blocks.sizes['request']:,} requests, {keys.size:,} block uses, {sizes.size} sizes",
            t_call,
            f"hit rate {float(curve.prefix_hit_rate[sizes.size // 2]):.3f} at "
            f"{int(sizes[sizes.size // 2]):,} tokens; kernels alone {t_kernels * 1e3:.1f} ms",
            {
                "Python OrderedDict LRU (per size, x sizes)": t_ref / t_call,
                "the same, against the kernels alone": t_ref / t_kernels,
            },
            "goal well under 1 s warm; the whole call includes reading the JSON lines",
        )
    ]

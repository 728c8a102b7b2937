"""Prefix-cache kernels: an LRU replay of a request log's prefix blocks, every cache size in one pass.

A request log with block hashes (Mooncake's ``hash_ids``) lists, per request, the hashes of its
prompt's consecutive blocks; equal hashes are equal prefixes. A serving engine with prefix caching
(vLLM's automatic prefix caching, SGLang's radix cache) keeps the blocks of past prompts and skips
the prefill of a new prompt's longest cached prefix. The cache here is an LRU cache of whole
blocks: every request touches all its blocks in order (a miss is computed and stored), and a block
is a hit only if it and every block before it in the prompt are cached.

LRU is a stack algorithm: a cache of ``C`` blocks always holds the ``C`` most recently used blocks.
So one pass gives every size at once (Mattson et al., 1970): a block's *stack distance* is the
number of distinct other blocks used since its last use, and it is cached in a cache of ``C``
blocks iff that distance is ``< C``. The prefix rule makes a block's need the largest
``distance + 1`` over its prompt up to it (:func:`prefix_needs`). Distances are counted with a
Fenwick tree over access times, O(n log n) for n block accesses.

The plain references (an ``OrderedDict`` LRU replayed for one size) are in
:mod:`capnb.kernels.prefix_reference`.
"""

from __future__ import annotations

import numpy as np

from ._lazy import njit

__all__ = ["NEVER", "hit_tokens_by_capacity", "prefix_needs", "stack_distances"]

#: A block's need when no cache size hits it (its first use, or a prefix that includes one).
NEVER = np.iinfo(np.int64).max


@njit(nogil=True)
def stack_distances(keys, n_keys):
    """LRU stack distance of every access: distinct other keys used since its last use (-1: first).

    ``keys`` are dense ids in ``0 .. n_keys - 1``, in access order.
    """
    n = keys.size
    tree = np.zeros(n + 1, np.int64)  # Fenwick tree: 1 at the time of each key's latest use
    last = np.full(n_keys, -1, np.int64)
    out = np.empty(n, np.int64)
    distinct = 0
    for t in range(n):
        key = keys[t]
        p = last[key]
        if p < 0:
            out[t] = -1
            distinct += 1
        else:
            seen = 0  # latest uses at times 0..p
            i = p + 1
            while i > 0:
                seen += tree[i]
                i -= i & -i
            out[t] = distinct - seen  # latest uses after p: the distinct keys used since
            i = p + 1
            while i <= n:
                tree[i] -= 1
                i += i & -i
        i = t + 1
        while i <= n:
            tree[i] += 1
            i += i & -i
        last[key] = t
    return out


@njit(nogil=True)
def prefix_needs(distances, starts):
    """Smallest cache (in blocks) at which each block is a prefix hit; :data:`NEVER` if none.

    ``starts`` holds each request's first access index, with the total count appended. A block
    hits in a cache of ``C`` blocks iff it and every earlier block of its prompt are cached:
    ``max(distance + 1)`` over the prompt so far is ``<= C``.
    """
    out = np.empty(distances.size, np.int64)
    for r in range(starts.size - 1):
        need = 0
        for j in range(starts[r], starts[r + 1]):
            d = distances[j]
            if d < 0 or need == NEVER:
                need = NEVER
            elif d + 1 > need:
                need = d + 1
            out[j] = need
    return out


@njit(nogil=True)
def hit_tokens_by_capacity(needs, tokens, max_blocks):
    """Prompt tokens hit in a cache of ``c`` blocks, for every ``c`` in ``0 .. max_blocks``."""
    curve = np.zeros(max_blocks + 1, np.int64)
    for j in range(needs.size):
        if needs[j] <= max_blocks:
            curve[needs[j]] += tokens[j]
    total = 0
    for c in range(max_blocks + 1):
        total += curve[c]
        curve[c] = total
    return curve

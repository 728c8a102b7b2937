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

Routing over ``N`` instances (each with its own cache) splits the log before the replay:
:func:`route_random`, :func:`route_round_robin` and :func:`route_consistent` (prefix-aware: a
consistent-hash ring of ``vnodes`` points per instance, keyed by a hash of the request's first
blocks, :func:`prefix_keys`, so that requests sharing that prefix meet on one instance). Hashes are
splitmix64's finaliser (:func:`mix64`) in wrapping uint64 arithmetic.

The plain references (an ``OrderedDict`` LRU replayed for one size, ``bisect`` on a Python list for
the ring) are in :mod:`capnb.kernels.prefix_reference`.
"""

from __future__ import annotations

import numpy as np

from ._lazy import njit

__all__ = [
    "NEVER",
    "hit_tokens_by_capacity",
    "mix64",
    "prefix_keys",
    "prefix_needs",
    "ring",
    "route_consistent",
    "route_random",
    "route_round_robin",
    "stack_distances",
]

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


# -- routing over instances (numpy: one vectorised pass each, nothing for numba to add) -----------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(x):
    """splitmix64's finaliser of ``x + golden ratio``, element-wise over uint64 (wrapping)."""
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def prefix_keys(hashes, starts, blocks):
    """Per request, the hash of its first ``blocks`` block hashes (fewer if its prompt has fewer).

    ``starts`` holds each request's first block index with the block count appended. A request
    without blocks keys on its own index (it shares no prefix).
    """
    counts = np.diff(starts)
    n = counts.size
    keys = np.where(counts > 0, np.uint64(0), mix64(np.arange(n, dtype=np.uint64) ^ _M2))
    for k in range(blocks):
        has = counts > k
        block = hashes[starts[:-1][has] + k].astype(np.int64).view(np.uint64)
        keys[has] = mix64(keys[has] ^ block)
    return keys


def ring(instances, vnodes, seed):
    """A consistent-hash ring: ``(points, owners)``, points sorted, ``vnodes`` per instance."""
    ids = np.arange(instances * vnodes, dtype=np.uint64)
    points = mix64(ids ^ mix64(np.full(ids.size, seed, dtype=np.uint64)))
    order = np.argsort(points, kind="stable")
    return points[order], (ids[order] // np.uint64(vnodes)).astype(np.int64)


def route_consistent(keys, points, owners):
    """The instance owning each key: the first ring point at or after it (wrapping)."""
    at = np.searchsorted(points, keys, side="left")
    at[at == points.size] = 0
    return owners[at]


def route_round_robin(n_requests, instances):
    """Request ``i`` to instance ``i mod N``."""
    return np.arange(n_requests, dtype=np.int64) % instances


def route_random(n_requests, instances, seed):
    """Each request to an instance drawn uniformly (numpy's PCG64, ``seed``)."""
    return np.random.default_rng(seed).integers(0, instances, size=n_requests, dtype=np.int64)

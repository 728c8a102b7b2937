"""Plain Python reference of the prefix-cache kernels: one LRU cache replayed for one size.

Written for clarity, not speed: an ``OrderedDict`` is the LRU cache, the request log is replayed
once per cache size (:mod:`capnb.kernels.prefix` gets every size in one pass).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

__all__ = ["REGISTRY", "consistent_route_python", "lru_hit_tokens_python", "mix64_python"]


def lru_hit_tokens_python(requests, capacity_blocks):
    """Prompt tokens served from an LRU cache of ``capacity_blocks`` whole blocks.

    ``requests`` is a sequence of ``(hashes, tokens)`` pairs, one per request: its prompt's block
    hashes in order and the prompt tokens each block holds. A block is a hit when it and every
    earlier block of the prompt are in the cache; every block is then used (moved to the most
    recent end, or stored, evicting the least recently used block when the cache is full).
    """
    cache: OrderedDict = OrderedDict()
    hit = 0
    for hashes, tokens in requests:
        prefix = True
        for block, held in zip(hashes, tokens, strict=True):
            if block in cache:
                if prefix:
                    hit += int(held)
                cache.move_to_end(block)
            else:
                prefix = False
                if capacity_blocks > 0:
                    cache[block] = True
                    if len(cache) > capacity_blocks:
                        cache.popitem(last=False)
    return hit


_MASK = (1 << 64) - 1


def mix64_python(x: int) -> int:
    """splitmix64's finaliser of ``x + 0x9E3779B97F4A7C15``, on Python ints modulo 2**64."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def consistent_route_python(requests, instances, vnodes, seed, blocks):
    """The instance of each request on a consistent-hash ring, one request at a time.

    ``requests`` is a sequence of block-hash lists. Instance ``i`` holds ring points
    ``mix64(j ^ mix64(seed))`` for ``j`` in ``i * vnodes .. (i + 1) * vnodes - 1``; a request's key
    chains ``mix64(key ^ hash)`` over its first ``blocks`` hashes (from 0; an empty prompt keys on
    ``mix64(index ^ 0x94D049BB133111EB)``), and its owner is the first point at or after the key,
    wrapping to the first point.
    """
    salt = mix64_python(seed)
    points = sorted((mix64_python(j ^ salt), j // vnodes) for j in range(instances * vnodes))
    values = [p for p, _ in points]
    out = []
    for index, hashes in enumerate(requests):
        if not hashes:
            key = mix64_python(index ^ 0x94D049BB133111EB)
        else:
            key = 0
            for h in hashes[:blocks]:
                key = mix64_python(key ^ (h & _MASK))
        at = bisect.bisect_left(values, key)
        out.append(points[at % len(points)][1])
    return out


REGISTRY: dict[str, dict[str, object]] = {
    "prefix.lru_hit_tokens": {"python": lru_hit_tokens_python},
    "prefix.route_consistent": {"python": consistent_route_python},
}

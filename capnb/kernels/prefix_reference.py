"""Plain Python reference of the prefix-cache kernels: one LRU cache replayed for one size.

Written for clarity, not speed: an ``OrderedDict`` is the LRU cache, the request log is replayed
once per cache size (:mod:`capnb.kernels.prefix` gets every size in one pass).
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["REGISTRY", "lru_hit_tokens_python"]


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


REGISTRY: dict[str, dict[str, object]] = {
    "prefix.lru_hit_tokens": {"python": lru_hit_tokens_python},
}

"""Step 2, memory: weights (fixed) + KV cache (dynamic) + headroom, per model, GPU and tensor parallelism.

The article's lesson: GPU memory holds a fixed part, the weights, and a dynamic part, the KV cache, which
grows with concurrency x sequence length. A plan that looks only at compute runs out of memory at a
concurrency the compute could still serve. Its rule, with capnb's default in brackets::

    total = weights + concurrency x seq_len x kv_bytes_per_token, plus 10-20 % [15 %] headroom

capnb applies it per GPU of a tensor-parallel group, the way serving runtimes shard a model: weights
split across ranks (an MLA model's down projections whole on each); KV heads split, but
replicated when the group is larger than the KV heads (at least one head per rank); an MLA latent
cache replicated on every rank.

Two accountings (:func:`accounting`):

``"article"``
    headroom = 15 % of (weights + KV cache); the whole GPU is usable.
``"vllm"``
    vLLM's: the runtime may use ``gpu_memory_utilization`` (0.90) of the GPU; it reserves memory for
    activations and for non-torch allocations (CUDA graphs, NCCL buffers); the KV cache is allocated
    in 16-token blocks.

Entry points: :func:`sweep` (the full grid as a Dataset), :func:`max_concurrency` (the reduced answer
only) and :func:`describe` (the answer in words); prefix caching: :func:`prefix_hit_rate` (an LRU
replay of a log's block hashes, every cache size at once) and :func:`split_kv` (the KV budget split
between running sequences and the prefix cache); :func:`prefix_routing` (each instance's hit rate when
a fleet shares the log under random, round-robin or prefix-aware routing; :func:`prefix_hit_rate`
takes ``instances`` and ``routing``, and :func:`routing_assumed` says the routing in words).
"""

from __future__ import annotations

from ..records import Deployment
from ._footprint import (
    ACCOUNTINGS,
    Accounting,
    accounting,
    concurrency_ticks,
    describe,
    max_concurrency,
    sweep,
)
from ._grid import LIMIT_REASONS
from ._prefix import ROUTINGS, prefix_hit_rate, prefix_routing, routing_assumed, split_kv

__all__ = [
    "ACCOUNTINGS",
    "LIMIT_REASONS",
    "ROUTINGS",
    "Accounting",
    "Deployment",
    "accounting",
    "concurrency_ticks",
    "describe",
    "max_concurrency",
    "prefix_hit_rate",
    "prefix_routing",
    "routing_assumed",
    "split_kv",
    "sweep",
]

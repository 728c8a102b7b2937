"""Prefix caching: the hit rate a cache of N tokens gets on a request log, and the KV budget's split.

A prefix cache holds the KV blocks of past prompts so that a new prompt sharing their beginning
skips that part of its prefill. Its size comes out of the same KV budget that holds the running
sequences: a larger cache saves prefill but leaves room for fewer concurrent sequences.
:func:`prefix_hit_rate` replays a log's block hashes through an LRU cache of whole blocks (every
size in one pass, :mod:`capnb.kernels.prefix`); :func:`split_kv` prices each share of the budget
given to the cache in concurrent sequences and hit rate. The hit rate feeds
``capnb.latency.engine(..., prefix_hit_rate=...)``.

The cache model: LRU over whole blocks of ``block_tokens``, empty at the log's start; each request
uses all its blocks in order (a miss is computed and stored); a block counts as a hit only when it
and every earlier block of its prompt are cached (the longest cached prefix, as vLLM and SGLang
match). Hit tokens are the prompt tokens of hit blocks (the last block of a prompt may be short).
Blocks of running sequences are not shared with the cache here: it is the budget's split, not
vLLM's one pool where a running sequence's blocks are also cacheable.

A fleet of ``N`` instances holds ``N`` caches, and which requests meet on one depends on routing:
:func:`prefix_routing` replays the log split by each routing of :data:`ROUTINGS` (random,
round-robin, prefix-aware consistent hashing on the first blocks) and gives each instance's hit
rate; :func:`prefix_hit_rate` takes ``instances`` and ``routing`` and states the routing it
assumed in its attrs (one instance, the default, sees the whole log).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import glossary
from ..data.modelspec import KVGroups
from ..errors import InputError

__all__ = ["ROUTINGS", "prefix_hit_rate", "prefix_routing", "split_kv"]

#: How requests reach instances: uniformly at random, in turn, or by a consistent hash of their
#: first prompt blocks (prefix-aware: requests sharing that prefix meet on one instance).
ROUTINGS = ("random", "round_robin", "prefix_aware")
_ROUTING_WORDS = {
    "random": "random routing (each request to an instance drawn uniformly)",
    "round_robin": "round-robin routing",
    "prefix_aware": "prefix-aware routing (a consistent hash of the first {k} prompt block(s))",
}


def _numbers(values, argument: str) -> np.ndarray:
    """A scalar or 1-d sequence of real numbers as a float array, or an InputError naming it."""
    try:
        array = np.atleast_1d(np.asarray(values, dtype=float))
    except (TypeError, ValueError):
        raise InputError(f"{argument} must be numbers, got {values!r}") from None
    if array.ndim != 1 or array.size == 0:
        raise InputError(f"{argument} must be a number or a 1-d sequence of them, got {values!r}")
    return array


def _blocks(trace, block_tokens) -> xr.Dataset:
    from ..data import MOONCAKE_BLOCK_TOKENS, load_block_hashes

    if isinstance(trace, xr.Dataset):
        missing = {"block_hash", "block_start", "block_prompt_tokens"} - set(trace.variables)
        if missing:
            raise InputError(
                f"trace lacks {sorted(missing)}: load it with capnb.data.load_block_hashes"
            )
        if block_tokens is not None and block_tokens != trace.attrs.get("block_tokens"):
            raise InputError(
                f"block_tokens={block_tokens} differs from the trace's "
                f"{trace.attrs.get('block_tokens')} (set when it was loaded)"
            )
        return trace
    return load_block_hashes(
        trace, block_tokens=MOONCAKE_BLOCK_TOKENS if block_tokens is None else block_tokens
    )


def _needs(blocks: xr.Dataset) -> np.ndarray:
    """Per block, the smallest cache (in blocks) holding it as a prefix hit (kernels.prefix)."""
    from ..kernels import prefix

    _, keys = np.unique(blocks.block_hash.values, return_inverse=True)
    keys = keys.astype(np.int64)
    starts = np.append(blocks.block_start.values, keys.size).astype(np.int64)
    distances = prefix.stack_distances(keys, int(keys.max(initial=-1)) + 1)
    return prefix.prefix_needs(distances, starts)


def _cache_sizes(cache_tokens, distinct_tokens: int) -> np.ndarray:
    if cache_tokens is None:  # 0, then 24 sizes from 1/1000 of every distinct block to all of them
        top = max(distinct_tokens, 1)
        return np.unique(np.r_[0, np.geomspace(top / 1000, top, 24)].round().astype(np.int64))
    sizes = _numbers(cache_tokens, "cache_tokens")
    if not np.all(np.isfinite(sizes)) or (sizes < 0).any() or (sizes != np.round(sizes)).any():
        raise InputError(f"cache_tokens must be whole token counts >= 0, got {cache_tokens!r}")
    return sizes.astype(np.int64)


def prefix_hit_rate(
    trace="mooncake-synthetic", *, cache_tokens=None, block_tokens=None, instances: int = 1,
    routing: str = "prefix_aware", seed: int = 0, prefix_blocks: int = 1,
):  # fmt: skip
    """Share of prompt tokens an LRU prefix cache of each size serves, replaying a request log.

    Parameters
    ----------
    trace
        A request log with block hashes: a Dataset from :func:`capnb.data.load_block_hashes`, or
        what it loads (``"mooncake-synthetic"``, a JSON-lines path).
    cache_tokens
        Cache sizes in tokens (whole blocks of ``block_tokens`` are held: ``floor(size /
        block_tokens)``). Default: 0 and 24 sizes up to every distinct block of the log.
    block_tokens
        Tokens per hash block, when ``trace`` is a file (Mooncake: 512).
    instances, routing, seed, prefix_blocks
        A fleet of ``instances``, each with its own cache of ``cache_tokens``, the log split by
        ``routing`` (one of :data:`ROUTINGS`; see :func:`prefix_routing`): the hit rate is the
        fleet's, every instance's hit tokens over the log's prompt tokens. One instance (the
        default) sees the whole log.

    Returns
    -------
    xarray.Dataset
        Over ``cache_tokens``: ``prefix_hit_rate`` (1) and ``hit_tokens`` (tokens). Attrs:
        ``block_tokens``, ``prompt_tokens`` (the log's total), ``distinct_blocks``,
        ``max_prefix_hit_rate`` (an unbounded cache: only first uses miss), ``cache_model``,
        ``instances``, ``routing`` and ``routing_assumed`` (the sentence a plan states), and
        ``load_imbalance``: the busiest instance's prompt tokens over the mean (1: one instance;
        a routing that keeps prefixes together can load one instance far above the others).

    Examples
    --------
    >>> ds = prefix_hit_rate(cache_tokens=[0, 10_000_000])
    >>> [round(float(x), 3) for x in ds.prefix_hit_rate]
    [0.0, 0.577]
    """
    from ..kernels import prefix

    blocks = _blocks(trace, block_tokens)
    size = int(blocks.attrs["block_tokens"])
    held = blocks.block_prompt_tokens.values.astype(np.int64)
    distinct = int(np.unique(blocks.block_hash.values).size)
    sizes = _cache_sizes(cache_tokens, distinct * size)
    total = int(held.sum())
    fleet = _count(instances, "instances")
    _check_routing(routing, seed, prefix_blocks)  # with one instance too: a typo is not ignored
    if fleet == 1:
        needs = _needs(blocks)
        capacity = np.minimum(
            sizes // size, distinct
        )  # more than every distinct block adds nothing
        curve = prefix.hit_tokens_by_capacity(needs, held, distinct)
        hit, most = curve[capacity], int(curve[-1])
        imbalance = 1.0
    else:
        owner = route(blocks, fleet, routing, seed=seed, prefix_blocks=prefix_blocks)
        per = _instance_hits(blocks, owner, fleet, sizes // size)
        hit, most = per["hit"].sum(0), int(per["most"].sum())
        imbalance = float(per["tokens"].max() / per["tokens"].mean())
    return xr.Dataset(
        {
            "prefix_hit_rate": (
                "cache_tokens",
                hit / max(total, 1),
                glossary.attrs("prefix_hit_rate"),
            ),
            "hit_tokens": ("cache_tokens", hit, glossary.attrs("hit_tokens")),
        },
        coords={"cache_tokens": ("cache_tokens", sizes, glossary.attrs("cache_tokens"))},
        attrs={
            "block_tokens": size,
            "prompt_tokens": total,
            "distinct_blocks": distinct,
            "max_prefix_hit_rate": float(most / max(total, 1)),
            "source": blocks.attrs.get("source", ""),
            "cache_model": "LRU of whole blocks, empty at the start; longest cached prefix hits",
            "instances": fleet,
            "routing": "one instance" if fleet == 1 else routing,
            "routing_assumed": routing_assumed(fleet, routing, prefix_blocks),
            "load_imbalance": imbalance,
        },
    )


def _count(value, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise InputError(f"{name} must be a whole number >= {low}, got {value!r}")
    return int(value)


def _check_routing(routing, seed, prefix_blocks) -> None:
    if routing not in ROUTINGS:
        raise InputError(f"routing={routing!r} is not known; use one of {list(ROUTINGS)}")
    _count(seed, "seed", low=0)
    _count(prefix_blocks, "prefix_blocks")


def routing_assumed(instances: int, routing: str, prefix_blocks: int = 1) -> str:
    """The routing a hit rate assumes, in words (what a plan states beside the hit rate)."""
    if instances == 1:
        return "one instance sees the whole log (one cache): no routing"
    words = _ROUTING_WORDS[routing].format(k=prefix_blocks)
    return f"{words} over {instances:,} instances, each with its own cache"


def route(blocks: xr.Dataset, instances: int, routing: str, *, seed: int = 0,
          prefix_blocks: int = 1, vnodes: int = 64) -> np.ndarray:  # fmt: skip
    """The instance each request of ``blocks`` goes to under ``routing`` (int64 over request)."""
    from ..kernels import prefix

    _check_routing(routing, seed, prefix_blocks)
    fleet = _count(instances, "instances")
    n = blocks.sizes["request"]
    if routing == "random":
        return prefix.route_random(n, fleet, seed)
    if routing == "round_robin":
        return prefix.route_round_robin(n, fleet)
    starts = np.append(blocks.block_start.values, blocks.sizes["block"]).astype(np.int64)
    keys = prefix.prefix_keys(
        blocks.block_hash.values, starts, _count(prefix_blocks, "prefix_blocks")
    )
    points, owners = prefix.ring(fleet, _count(vnodes, "vnodes"), seed)
    return prefix.route_consistent(keys, points, owners)


def _instance_hits(blocks: xr.Dataset, owner: np.ndarray, instances: int, capacity) -> dict:
    """Per instance: hit tokens at each capacity (blocks), prompt tokens, requests, most hit."""
    from ..kernels import prefix

    _, keys = np.unique(blocks.block_hash.values, return_inverse=True)
    keys = keys.astype(np.int64)
    n_keys = int(keys.max(initial=-1)) + 1
    starts = np.append(blocks.block_start.values, keys.size).astype(np.int64)
    counts = np.diff(starts)
    held = blocks.block_prompt_tokens.values.astype(np.int64)
    order = np.argsort(owner, kind="stable")  # each instance's requests in arrival order
    edges = np.searchsorted(owner[order], np.arange(instances + 1))
    hit = np.zeros((instances, np.size(capacity)), np.int64)
    tokens, requests, most = (np.zeros(instances, np.int64) for _ in range(3))
    for j in range(instances):
        mine = order[edges[j] : edges[j + 1]]
        if mine.size == 0:
            continue
        at = np.concatenate([np.arange(starts[r], starts[r + 1]) for r in mine])
        sub = np.append(0, np.cumsum(counts[mine]))
        distances = prefix.stack_distances(keys[at], n_keys)
        needs = prefix.prefix_needs(distances, sub)
        distinct = int(np.unique(keys[at]).size)
        curve = prefix.hit_tokens_by_capacity(needs, held[at], distinct)
        hit[j] = curve[np.minimum(capacity, distinct)]
        tokens[j], requests[j], most[j] = held[at].sum(), mine.size, curve[-1]
    return {"hit": hit, "tokens": tokens, "requests": requests, "most": most}


def prefix_routing(
    trace="mooncake-synthetic", *, instances: int, cache_tokens, routing=ROUTINGS,
    block_tokens=None, seed: int = 0, prefix_blocks: int = 1,
) -> xr.Dataset:  # fmt: skip
    """Each instance's prefix-cache hit rate when a fleet of ``instances`` shares the log.

    Every instance holds its own LRU cache of ``cache_tokens`` (the model of
    :func:`prefix_hit_rate`); the log is split by each routing, in arrival order:

    ``"random"``
        each request to an instance drawn uniformly (seeded);
    ``"round_robin"``
        request ``i`` to instance ``i mod N``;
    ``"prefix_aware"``
        a consistent-hash ring (64 points per instance) keyed by a hash of the request's first
        ``prefix_blocks`` blocks: requests sharing that prefix meet on one instance, the way a
        prefix-aware router (llm-d's, SGLang's) keeps a conversation or a system prompt together.

    Parameters
    ----------
    trace, block_tokens
        As for :func:`prefix_hit_rate`.
    instances
        Instances the log is split over.
    cache_tokens
        Cache size of each instance (tokens).
    routing
        Some of :data:`ROUTINGS`.
    seed, prefix_blocks
        The random routing's seed (and the ring's salt); the blocks the prefix-aware key hashes.

    Returns
    -------
    xarray.Dataset
        ``instance_hit_rate`` (routing, instance, cache_tokens): each instance's hit tokens over
        its prompt tokens; ``prefix_hit_rate`` (routing, cache_tokens): the fleet's;
        ``instance_requests`` (routing, instance); ``load_imbalance`` (routing): the busiest
        instance's prompt tokens over the mean; ``one_instance_hit_rate`` (cache_tokens): the
        same cache size seeing the whole log (what :func:`prefix_hit_rate` assumes with one
        instance). Attrs: ``routing_assumed`` per routing (JSON-free: one sentence each).

    Examples
    --------
    >>> ds = prefix_routing(instances=8, cache_tokens=[1_000_000])  # 1M tokens per instance
    >>> [round(float(x), 3) for x in ds.prefix_hit_rate.sel(cache_tokens=1_000_000)]
    [0.104, 0.108, 0.522]
    >>> round(float(ds.one_instance_hit_rate.item()), 3)  # one such cache, the whole log
    0.142
    """
    blocks = _blocks(trace, block_tokens)
    size = int(blocks.attrs["block_tokens"])
    names = [routing] if isinstance(routing, str) else list(routing)
    if not names or len(set(map(str, names))) != len(names):
        raise InputError(
            f"routing must name one or more of {list(ROUTINGS)}, none twice, got {routing!r}"
        )
    fleet = _count(instances, "instances")
    sizes = _numbers(cache_tokens, "cache_tokens")
    if not np.all(np.isfinite(sizes)) or (sizes < 0).any() or (sizes != np.round(sizes)).any():
        raise InputError(f"cache_tokens must be whole token counts >= 0, got {cache_tokens!r}")
    sizes = sizes.astype(np.int64)
    one = prefix_hit_rate(blocks, cache_tokens=sizes).prefix_hit_rate
    per = [_instance_hits(blocks, route(blocks, fleet, name, seed=seed,
                                        prefix_blocks=prefix_blocks), fleet, sizes // size)
           for name in names]  # fmt: skip
    hit = np.stack([p["hit"] for p in per])
    tokens = np.stack([p["tokens"] for p in per])
    requests = np.stack([p["requests"] for p in per])
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(tokens[:, :, None] > 0, hit / tokens[:, :, None], np.nan)
    dims = ("routing", "instance", "cache_tokens")
    return xr.Dataset(
        {
            "instance_hit_rate": (dims, rate, glossary.attrs("prefix_hit_rate")),
            "prefix_hit_rate": (("routing", "cache_tokens"), hit.sum(1) / tokens.sum(1)[:, None],
                                glossary.attrs("prefix_hit_rate")),
            "instance_requests": (dims[:2], requests, glossary.attrs("instance_requests")),
            "load_imbalance": ("routing", tokens.max(1) / tokens.mean(1),
                               glossary.attrs("load_imbalance")),
            "one_instance_hit_rate": ("cache_tokens", one.values, glossary.attrs(
                "prefix_hit_rate", long_name="hit rate of one instance seeing the whole log")),
        },
        coords={
            "routing": ("routing", names, glossary.attrs("routing")),
            "instance": ("instance", np.arange(fleet), glossary.attrs("instance")),
            "cache_tokens": ("cache_tokens", sizes, glossary.attrs("cache_tokens")),
        },
        attrs={
            "instances": fleet,
            "block_tokens": size,
            "source": blocks.attrs.get("source", ""),
            **{f"routing_assumed_{n}": routing_assumed(fleet, n, prefix_blocks) for n in names},
        },
    )  # fmt: skip


def _sequences(running_tokens: np.ndarray, seq_len: int, model) -> tuple[np.ndarray, str]:
    """Sequences of ``seq_len`` tokens ``running_tokens`` of KV cache hold, and how it holds them.

    In whole blocks: ``model``'s groups under vLLM 0.10's accounting (its sliding-window layers
    keep their window), or every layer at full length without a model.
    """
    from ..data import load_model
    from ..records import VLLM_VERSION
    from ._footprint import accounting

    acct = accounting("vllm", vllm_version=VLLM_VERSION)
    layout = acct.groups(load_model(model)) if model is not None else KVGroups(1, 1, 0, 0)
    per_sequence = layout.blocks(int(seq_len), acct.block_tokens)
    held = np.array([acct.pool_blocks(layout, r) // per_sequence for r in np.ravel(running_tokens)])
    how = (
        "vLLM's hybrid KV cache manager (0.10 on): sliding-window layers keep their window"
        if layout.windowed
        else "full length: every layer holds the whole sequence"
    )
    return held.astype(np.int64), how


def split_kv(
    trace="mooncake-synthetic",
    *,
    kv_cache_tokens,
    seq_len,
    cache_share=None,
    block_tokens=None,
    model=None,
):
    """Split a KV budget between running sequences and a prefix cache, for each share of it.

    Parameters
    ----------
    trace, block_tokens
        As for :func:`prefix_hit_rate`.
    kv_cache_tokens
        The KV budget of one instance in tokens (``capnb.memory.max_concurrency(...,
        accounting="vllm", vllm_version=...)`` gives vLLM's ``kv_cache_tokens``).
    seq_len
        Tokens one running sequence holds (prompt + output).
    cache_share
        Shares of the budget held by the prefix cache, in [0, 1). Default 0, 0.1, ..., 0.9.
    model
        The model the budget is for (an id, a config path or folder, a mapping or a spec): its
        sliding-window layers keep only their window, as vLLM's hybrid KV cache manager holds
        them and :func:`capnb.memory.max_concurrency` counts them in vLLM 0.10's accounting.
        None: every layer holds the whole sequence (a windowed model's full-length count, a
        fraction of what vLLM 0.10 on holds: say ``attrs["kv_layout"]``).

    Returns
    -------
    xarray.Dataset
        Over ``cache_share``: ``prefix_cache_tokens``, ``running_tokens`` (tokens),
        ``max_concurrency`` (requests: the sequences of ``seq_len`` the running share holds in
        whole KV blocks of :data:`capnb.records.BLOCK_SIZE` tokens, as vLLM allocates them and
        :func:`capnb.memory.max_concurrency` counts them; ``attrs["kv_layout"]`` says whether
        windowed layers keep their window), ``prefix_hit_rate``
        and ``prefill_share`` (1: prompt tokens still computed, ``1 - prefix_hit_rate``).

    Examples
    --------
    >>> ds = split_kv(kv_cache_tokens=400_000, seq_len=16_000, cache_share=[0.0, 0.5])
    >>> ds.max_concurrency.values.tolist()
    [25, 12]
    """
    for name, value in (("kv_cache_tokens", kv_cache_tokens), ("seq_len", seq_len)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise InputError(f"{name} must be a whole number of tokens >= 1, got {value!r}")
    shares = (
        np.round(np.arange(10) / 10, 1)
        if cache_share is None
        else _numbers(cache_share, "cache_share")
    )
    if not np.all(np.isfinite(shares)) or (shares < 0).any() or (shares >= 1).any():
        raise InputError(f"cache_share must be in [0, 1), got {cache_share!r}")
    cache = np.floor(shares * kv_cache_tokens).astype(np.int64)
    running = int(kv_cache_tokens) - cache
    held, how = _sequences(running, int(seq_len), model)
    hits = prefix_hit_rate(trace, cache_tokens=cache, block_tokens=block_tokens)
    rate = hits.prefix_hit_rate.values
    dim = "cache_share"
    return xr.Dataset(
        {
            "prefix_cache_tokens": (dim, cache, glossary.attrs("prefix_cache_tokens")),
            "running_tokens": (dim, running, glossary.attrs("running_tokens")),
            "max_concurrency": (
                dim,
                held,
                glossary.attrs("max_concurrency"),
            ),
            "prefix_hit_rate": (dim, rate, glossary.attrs("prefix_hit_rate")),
            "prefill_share": (dim, 1.0 - rate, glossary.attrs("prefill_share")),
        },
        coords={dim: (dim, shares, glossary.attrs(dim))},
        attrs={
            **hits.attrs,
            "kv_cache_tokens": int(kv_cache_tokens),
            "seq_len": int(seq_len),
            "kv_layout": how,
        },
    )

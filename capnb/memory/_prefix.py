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
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import glossary
from ..errors import InputError

__all__ = ["prefix_hit_rate", "split_kv"]


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


def prefix_hit_rate(trace="mooncake-synthetic", *, cache_tokens=None, block_tokens=None):
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

    Returns
    -------
    xarray.Dataset
        Over ``cache_tokens``: ``prefix_hit_rate`` (1) and ``hit_tokens`` (tokens). Attrs:
        ``block_tokens``, ``prompt_tokens`` (the log's total), ``distinct_blocks``,
        ``max_prefix_hit_rate`` (an unbounded cache: only first uses miss), ``cache_model``.

    Examples
    --------
    >>> ds = prefix_hit_rate(cache_tokens=[0, 10_000_000])
    >>> [round(float(x), 3) for x in ds.prefix_hit_rate]
    [0.0, 0.577]
    """
    from ..kernels import prefix

    blocks = _blocks(trace, block_tokens)
    size = int(blocks.attrs["block_tokens"])
    needs = _needs(blocks)
    held = blocks.block_prompt_tokens.values.astype(np.int64)
    distinct = int(np.unique(blocks.block_hash.values).size)
    sizes = _cache_sizes(cache_tokens, distinct * size)
    capacity = np.minimum(sizes // size, distinct)  # more than every distinct block adds nothing
    curve = prefix.hit_tokens_by_capacity(needs, held, distinct)
    hit = curve[capacity]
    total = int(held.sum())
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
            "max_prefix_hit_rate": float(curve[-1] / max(total, 1)),
            "source": blocks.attrs.get("source", ""),
            "cache_model": "LRU of whole blocks, empty at the start; longest cached prefix hits",
        },
    )


def split_kv(
    trace="mooncake-synthetic",
    *,
    kv_cache_tokens,
    seq_len,
    cache_share=None,
    block_tokens=None,
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

    Returns
    -------
    xarray.Dataset
        Over ``cache_share``: ``prefix_cache_tokens``, ``running_tokens`` (tokens),
        ``max_concurrency`` (requests: ``floor(running_tokens / seq_len)``), ``prefix_hit_rate``
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
    hits = prefix_hit_rate(trace, cache_tokens=cache, block_tokens=block_tokens)
    rate = hits.prefix_hit_rate.values
    dim = "cache_share"
    return xr.Dataset(
        {
            "prefix_cache_tokens": (dim, cache, glossary.attrs("prefix_cache_tokens")),
            "running_tokens": (dim, running, glossary.attrs("running_tokens")),
            "max_concurrency": (dim, running // int(seq_len), glossary.attrs("max_concurrency")),
            "prefix_hit_rate": (dim, rate, glossary.attrs("prefix_hit_rate")),
            "prefill_share": (dim, 1.0 - rate, glossary.attrs("prefill_share")),
        },
        coords={dim: (dim, shares, glossary.attrs(dim))},
        attrs={
            **hits.attrs,
            "kv_cache_tokens": int(kv_cache_tokens),
            "seq_len": int(seq_len),
        },
    )

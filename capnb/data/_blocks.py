"""Prefix blocks of a request log: the block hashes of each prompt (Mooncake's ``hash_ids``).

Mooncake's traces give each request's prompt as a list of block hashes, one per 512 tokens (the
last block holds the rest); two requests share a hash when they share the prompt up to the end of
that block. The blocks load flat, request by request, over dim ``block``; ``block_start`` says
where each request's blocks begin (the prefix-cache replay, :func:`capnb.memory.prefix_hit_rate`,
reads them in that order: arrival order, the records sorted by their ``timestamp`` when the file's
order is not, as :func:`capnb.data.load_trace` sorts a request log).
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from .. import glossary, words
from ..errors import ConfigError, InputError
from ._files import json_line_of, json_lines_objects
from ._times import TraceWarning
from ._traces import _token_column, _trace_source

__all__ = ["MOONCAKE_BLOCK_TOKENS", "load_block_hashes"]

#: Tokens per hash block in Mooncake's traces (FAST'25 release README: "block size is 512").
MOONCAKE_BLOCK_TOKENS = 512


def load_block_hashes(
    name_or_path: str | os.PathLike = "mooncake-synthetic",
    *,
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
    hash_field: str = "hash_ids",
    prompt_field: str = "input_length",
    time_field: str | None = "timestamp",
):
    """Load a request log's prompt block hashes (JSON lines, Mooncake's format).

    Parameters
    ----------
    name_or_path
        ``"mooncake-synthetic"`` (bundled) or the path of a JSON-lines file whose records hold
        ``hash_field`` (a list of integers) and ``prompt_field`` (prompt tokens).
    block_tokens
        Tokens per hash block (Mooncake: 512). Block ``k`` of a prompt of ``L`` tokens holds
        ``min(block_tokens, L - k * block_tokens)`` tokens.
    time_field
        The records' arrival time (numbers, or times pyarrow reads as such): where the file is
        not in its order (two servers' logs concatenated), the requests are sorted by it (stable)
        with a :class:`capnb.data.TraceWarning` naming the first line out of order, repeated in
        ``attrs["notes"]``. A file without the field, or ``None``, is read in file order.

    Returns
    -------
    xarray.Dataset
        ``prompt_tokens`` and ``block_start`` over ``request`` (file order, which is arrival
        order), ``block_hash`` and ``block_prompt_tokens`` over ``block``; attrs ``block_tokens``,
        ``source`` and ``notes`` (what was sorted, or "").

    Raises
    ------
    ConfigError
        A record lacks a field, or its hash count is not ``ceil(prompt / block_tokens)`` (the
        message names the line).

    Examples
    --------
    >>> blocks = load_block_hashes()
    >>> blocks.sizes["request"], blocks.sizes["block"]
    (3993, 121877)
    """
    import pyarrow as pa
    import pyarrow.json as pajson
    import xarray as xr

    if isinstance(block_tokens, bool) or not isinstance(block_tokens, int | np.integer):
        raise InputError(f"block_tokens must be a whole number of tokens, got {block_tokens!r}")
    if block_tokens < 1:
        raise InputError(f"block_tokens must be >= 1, got {block_tokens}")
    path, _ = _trace_source(name_or_path, "mooncake")
    if path.suffix.lower() in (".csv", ".tsv", ".parquet", ".pq"):
        raise ConfigError(
            f"{path}: prompt block hashes are read from a JSON-lines request log whose records "
            f"hold {hash_field!r} (a list of integer block hashes, Mooncake's format) and "
            f"{prompt_field!r}; a {path.suffix.lstrip('.').upper()} request log carries no "
            "block hashes (a prefix cache's hit rate cannot be replayed from lengths alone)"
        )
    json_lines_objects(path, path.name)
    line = json_line_of(path)  # blank lines are not records
    where = lambda row: f"{path.name}, line {line(row)}"  # noqa: E731
    try:
        table = pajson.read_json(path)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as err:
        first = str(err).splitlines()[0]
        raise ConfigError(f"{path}: not readable as JSON lines ({first})") from None
    for field in (hash_field, prompt_field):
        if field not in table.column_names:
            raise ConfigError(f"{path}: no field {field!r}; fields: {table.column_names}")
    hashes = table.column(hash_field).combine_chunks()
    if pa.types.is_list(hashes.type) and pa.types.is_floating(hashes.type.value_type):
        _hash_not_integer(hashes, hash_field, where)
    if not pa.types.is_list(hashes.type) or not pa.types.is_integer(hashes.type.value_type):
        raise ConfigError(f"{path}: field {hash_field!r} must be a list of integers per line")
    if hashes.null_count:
        row = int(np.flatnonzero(hashes.is_null().to_numpy(zero_copy_only=False))[0])
        raise ConfigError(f"{where(row)}: {hash_field!r} is missing")
    if hashes.values.null_count:  # [1, null]: a list with a hole, not a hash
        holes = hashes.values.is_null().to_numpy(zero_copy_only=False)
        starts = hashes.offsets.to_numpy()
        row = int(np.searchsorted(starts, np.flatnonzero(holes)[0], side="right") - 1)
        raise ConfigError(
            f"{where(row)}: {hash_field!r} holds a null among its block hashes; "
            "each block of the prompt needs its hash (an integer)"
        )
    if prompt_field in table.column_names and table.column(prompt_field).null_count:
        row = int(
            np.flatnonzero(table.column(prompt_field).is_null().to_numpy(zero_copy_only=False))[0]
        )
        raise ConfigError(f"{where(row)}: {prompt_field!r} is missing")
    # as load_trace reads a token column: whole counts >= 0 (1536.0 too), or the line named
    prompt = _token_column(table, prompt_field, where)
    starts = hashes.offsets.to_numpy().astype(np.int64)
    counts = np.diff(starts)
    expected = -(-prompt // block_tokens)
    wrong = np.flatnonzero(counts != expected)
    if wrong.size:
        row = int(wrong[0])
        raise ConfigError(
            f"{where(row)}: {counts[row]} block hashes for {prompt[row]} prompt "
            f"tokens; {block_tokens}-token blocks need {expected[row]} (is block_tokens right?)"
        )
    flat = hashes.values.to_numpy().astype(np.int64)
    order, note = _arrival_order(table, path, time_field, line)
    if order is not None:  # each request's blocks moved whole, in arrival order
        moved = np.repeat(starts[order] - np.cumsum(np.r_[0, counts[order][:-1]]), counts[order])
        flat = flat[moved + np.arange(flat.size)]
        prompt, counts = prompt[order], counts[order]
        starts = np.r_[0, np.cumsum(counts)]
    request = np.repeat(np.arange(prompt.size), counts)
    position = np.arange(flat.size) - starts[request]
    held = np.minimum(block_tokens, prompt[request] - position * block_tokens)
    return xr.Dataset(
        {
            "prompt_tokens": ("request", prompt, glossary.attrs("prompt_tokens")),
            "block_start": ("request", starts[:-1], glossary.attrs("block_start")),
            "block_hash": ("block", flat, glossary.attrs("block_hash")),
            "block_prompt_tokens": ("block", held, glossary.attrs("block_prompt_tokens")),
        },
        attrs={"block_tokens": int(block_tokens), "source": str(path), "notes": note},
    )


def _hash_not_integer(hashes, hash_field: str, where) -> None:
    """The line of the first hash that is no 64-bit signed integer (pyarrow read the list as floats).

    A hash past ``2**63 - 1`` (an unsigned 64-bit one) or with a fraction makes the whole field
    floats; a file of whole floats alone falls through to the caller's error.
    """
    values = hashes.values.to_numpy(zero_copy_only=False)
    outside = (values >= 2.0**63) | (values < -(2.0**63))
    bad = ~np.isfinite(values) | (values != np.round(values)) | outside
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        row = int(np.searchsorted(hashes.offsets.to_numpy(), at, side="right") - 1)
        big = bool(np.isfinite(values[at]) and outside[at])
        fix = (
            "write an unsigned 64-bit hash past 2**63 - 1 minus 2**64"
            if big
            else "give a whole number"
        )
        raise ConfigError(
            f"{where(row)}: {hash_field!r} holds {float(values[at])!r}, not an integer in "
            f"[-2**63, 2**63) (a 64-bit signed hash): {fix}"
        )


def _arrival_order(table, path, time_field: str | None, line) -> tuple[np.ndarray | None, str]:
    """The records' order by ``time_field`` where the file is not in it (None: file order).

    ``line(row)``: the file's line of a record (:func:`capnb.data._files.json_line_of`).
    """
    import pyarrow as pa

    if time_field is None or time_field not in table.column_names:
        return None, ""
    column = table.column(time_field).combine_chunks()
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise ConfigError(f"{path.name}, line {line(row)}: {time_field!r} is missing")
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.int64())
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        raise ConfigError(
            f"{path}: {time_field!r} must hold numbers or times (the requests' arrival), got "
            f"{column.type}; pass time_field=None to replay the file in its own order"
        )
    times = column.to_numpy(zero_copy_only=False)
    back = np.flatnonzero(times[1:] < times[:-1])
    if not back.size:
        return None, ""
    note = (
        f"{words.count(back.size, 'record')} earlier than the one before (first: line "
        f"{line(int(back[0]) + 1)}); the requests were sorted by {time_field!r} (the prefix "
        "cache is replayed in arrival order)"
    )
    warnings.warn(f"{path.name}: {note}", TraceWarning, stacklevel=3)
    return np.argsort(times, kind="stable"), note

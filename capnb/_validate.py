"""Input checks shared by the step modules. Every message names the argument at fault."""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping

import numpy as np

from .errors import InputError

#: The largest count capnb takes (tokens of a request, an engine setting): past 2**53 a float is
#: not an exact count, and past 2**63 - 1 an int64 wraps to a negative number.
MOST_COUNT = 2**53


def positive_ints(values: object, argument: str) -> np.ndarray:
    """Return ``values`` as a 1-D int64 array of distinct positive integers, or raise."""
    array = _one_d(values, argument)
    if array.dtype.kind == "f":
        if np.isnan(array).any():
            raise InputError(
                f"{argument}: contains NaN at position {int(np.flatnonzero(np.isnan(array))[0])}"
            )
        fractional = array[array != np.round(array)]
        if fractional.size:
            raise InputError(
                f"{argument}: values must be whole numbers, got {fractional[:3].tolist()}"
            )
    elif array.dtype.kind not in "iu":
        raise InputError(f"{argument}: values must be integers, got dtype {array.dtype}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        at = int(np.flatnonzero(~np.isfinite(array))[0])
        raise InputError(f"{argument}: values must be finite, got {array[at]} at position {at}")
    if (array > MOST_COUNT).any():
        at = int(np.flatnonzero(array > MOST_COUNT)[0])
        raise InputError(
            f"{argument}: values must be at most {MOST_COUNT:,} (2**53), got {array[at]} at position {at}"
        )
    array = array.astype(np.int64)
    if (array <= 0).any():
        raise InputError(
            f"{argument}: values must be positive, got {array[array <= 0][:3].tolist()}"
        )
    _distinct(array, argument)
    return array


def naive_times(coord, argument: str) -> None:
    """Refuse a time coordinate that carries a zone: its ``.values`` are UTC, not its clock."""
    zone = getattr(getattr(coord, "dtype", None), "tz", None)
    if zone is not None:
        raise InputError(
            f"{argument} carries the time zone {zone}: capnb counts hours of the day on naive "
            "times, and this one's values are UTC; put them on their own clock with "
            ".assign_coords(time=obj.indexes['time'].tz_localize(None)) and say which with "
            f"attrs['timezone'] = {str(zone)!r}"
        )


def chunk_sizes(chunks: object, dims: Iterable[str], argument: str = "chunks") -> dict:
    """Dask chunks as a dict of a sweep's dims to whole sizes >= 1 (or -1), or raise."""
    if chunks is None:
        return {}
    if not isinstance(chunks, Mapping):
        raise InputError(
            f"{argument}: a mapping of dim names to chunk sizes (e.g. {{'gpu': 1}}), got "
            f"{type(chunks).__name__}"
        )
    dims = list(dims)
    for dim, size in chunks.items():
        if dim not in dims:
            raise InputError(f"{argument}: no dim {dim!r} to chunk; the dims: {dims}")
        whole = isinstance(size, numbers.Integral) and not isinstance(size, bool)
        if not whole or (size < 1 and size != -1):  # 0 divided by zero in the grid's chunking
            raise InputError(
                f"{argument}[{dim!r}] = {size!r}: a chunk is a whole number of cells >= 1 (or -1: "
                "the whole dim)"
            )
    return dict(chunks)


def names(values: object, argument: str) -> list[str]:
    """Return a non-empty list of distinct strings."""
    if isinstance(values, str):
        listed = [values]
    elif isinstance(values, Iterable) and not isinstance(values, bytes | Mapping):
        listed = list(values)
    else:
        listed = [values]  # one name, path, config or spec: the loader says if it is not one
    if not listed:
        raise InputError(f"{argument}: give at least one value")
    return listed


def fraction(
    value: object, argument: str, *, low: float = 0.0, high: float = 1.0, low_open: bool = False,
    high_open: bool = False,
) -> float:  # fmt: skip
    """Return a float within [low, high] (open at ``low`` or ``high`` as asked), or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or np.isnan(value):
        raise InputError(f"{argument} must be a number, got {value!r}")
    if value > high or value < low or (low_open and value == low) or (high_open and value == high):
        brackets = ("(" if low_open else "[", ")" if high_open else "]")
        raise InputError(
            f"{argument} must be in {brackets[0]}{low}, {high}{brackets[1]}, got {value!r}"
        )
    return float(value)


def positive_int(value: object, argument: str) -> int:
    """Return a positive integer, or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"{argument} must be a positive integer, got {value!r}")
    return int(value)


def _one_d(values: object, argument: str) -> np.ndarray:
    if isinstance(values, str) or not isinstance(values, Iterable | numbers.Number | np.ndarray):
        raise InputError(f"{argument}: expected numbers, got {values!r}")
    array = np.atleast_1d(np.asarray(values))
    if array.ndim != 1:
        raise InputError(f"{argument}: expected a 1-D sequence, got shape {array.shape}")
    if array.size == 0:
        raise InputError(f"{argument}: give at least one value")
    if array.dtype == object:
        raise InputError(f"{argument}: expected numbers, got {array[:3].tolist()}")
    return array


def _distinct(array: np.ndarray, argument: str) -> None:
    unique, counts = np.unique(array, return_counts=True)
    if (counts > 1).any():
        raise InputError(f"{argument}: duplicate values {unique[counts > 1][:3].tolist()}")


# -- budgets ---------------------------------------------------------------------------------------
#: Most memory (bytes) and CPU time (s, one thread) one call may start on, unless the environment
#: raises them (``CAPNB_MAX_BYTES``, ``CAPNB_MAX_SECONDS``): a size beyond them is refused before
#: the work starts, with the figure and the setting that lowers it, instead of running out of
#: memory or seemingly hanging.
DEFAULT_MAX_BYTES = 8 * 2**30
DEFAULT_MAX_SECONDS = 1800.0


def _limit(variable: str, default: float) -> float:
    text = os.environ.get(variable)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{variable}={text!r} is not a number") from None
    if not value > 0:
        raise InputError(f"{variable}={text!r} must be > 0")
    return value


def _bytes(count: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if count >= size:
            return f"{count / size:,.1f} {unit}"
    return f"{count:,.0f} bytes"


def within_budget(what: str, *, nbytes: float = 0.0, seconds: float = 0.0, lower: str) -> None:
    """Refuse work whose estimated memory or CPU time is over the budget, before it starts.

    ``what`` names the work and its size (``"trials=10**9 Monte Carlo months"``); ``nbytes`` and
    ``seconds`` are the caller's estimates; ``lower`` says how to make it smaller.

    Raises
    ------
    BudgetError
        With the estimate, the budget and ``lower``.
    """
    from .errors import BudgetError

    most_bytes = _limit("CAPNB_MAX_BYTES", DEFAULT_MAX_BYTES)
    if nbytes > most_bytes:
        raise BudgetError(
            f"{what} needs about {_bytes(nbytes)} of memory, over capnb's budget of "
            f"{_bytes(most_bytes)} (CAPNB_MAX_BYTES); {lower}"
        )
    most_seconds = _limit("CAPNB_MAX_SECONDS", DEFAULT_MAX_SECONDS)
    if seconds > most_seconds:
        raise BudgetError(
            f"{what} takes about {seconds:,.0f} s of CPU, over capnb's budget of "
            f"{most_seconds:,.0f} s (CAPNB_MAX_SECONDS); {lower}"
        )

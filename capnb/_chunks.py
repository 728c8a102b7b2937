"""Dask helpers shared by the step modules."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

__all__ = ["outer_product"]


@contextlib.contextmanager
def outer_product() -> Iterator[None]:
    """Silence dask's warning that broadcasting multiplies the number of chunks.

    A sweep is the outer product of its axes: chunking two axes into 4 pieces each is meant to give
    16 blocks, which dask reports as a PerformanceWarning (an error under strict warning filters).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Increasing number of chunks", category=Warning)
        yield

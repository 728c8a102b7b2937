"""Numbers in the steps' sentences, written one way everywhere."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    """``1 instance``, ``1,410 instances``."""
    return f"{int(n):,} {noun}" + ("" if int(n) == 1 else "s")


def rate(value: float) -> str:
    """A rate's digits (requests/s): whole from 100 up, three significant digits below (0.19)."""
    value = float(value)
    return f"{value:,.0f}" if value >= 100 else f"{value:,.3g}"

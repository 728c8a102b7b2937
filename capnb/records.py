"""Settings that travel together, one typed record each.

:class:`SLA` is the latency a service promises: a quantile (P99 by default) of TTFT, TPOT, ITL and
E2E, each bound optional, all met together. The capacity step takes it
(:func:`capnb.capacity.safe_concurrency`, :func:`capnb.capacity.plan`, :func:`capnb.capacity.sweep`),
the plan config holds it in its ``[sla]`` table and the command line reads it from
``--sla ttft=1.5,tpot=60ms``.

A bound far outside what its metric plausibly is (a time per output token of seconds, a first
token in microseconds) is almost always a unit slip: it is an error naming the field and the unit
it expects, unless the record says ``confirm=True``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

from .errors import InputError

__all__ = ["PLAUSIBLE_S", "SLA"]

#: The latency metrics an SLA may bound, in the order they are listed.
METRICS = ("ttft", "tpot", "itl", "e2e")

#: What each metric means, for messages.
_MEANING = {
    "ttft": "time to first token",
    "tpot": "time per output token",
    "itl": "inter-token latency",
    "e2e": "end-to-end latency",
}

#: Plausible bounds per metric (seconds, inclusive): served LLMs measure TTFT in milliseconds to
#: minutes (long prompts queued), TPOT and ITL in milliseconds to about a second (a very large
#: model on slow GPUs), E2E in milliseconds to an hour (long generations).
PLAUSIBLE_S = {
    "ttft": (0.005, 600.0),
    "tpot": (0.001, 1.0),
    "itl": (0.001, 1.0),
    "e2e": (0.01, 3600.0),
}


def _seconds(value: float) -> str:
    """A latency in its natural unit: ``60 ms``, ``1.5 s``."""
    if value < 1.0:
        return f"{value * 1000:.4g} ms"
    return f"{value:.4g} s"


@dataclass(frozen=True)
class SLA:
    """Latency bounds a plan meets together: a quantile of TTFT, TPOT, ITL and E2E.

    Parameters
    ----------
    ttft_s, tpot_s, itl_s, e2e_s
        Bounds in seconds (None: that metric is not bounded); at least one is given. TPOT and ITL
        are seconds per token (60 ms is ``0.06``).
    quantile
        The quantile of each metric the bounds hold for (0.99: P99), in (0, 1).
    confirm
        Accept bounds outside :data:`PLAUSIBLE_S` (which otherwise raise, as a likely unit slip).

    Examples
    --------
    >>> sla = SLA(ttft_s=1.5, tpot_s=0.06)
    >>> sla.bounds
    {'ttft': 1.5, 'tpot': 0.06}
    >>> str(sla)
    'P99 TTFT <= 1.5 s and P99 TPOT <= 60 ms'
    >>> SLA.parse("ttft=1.5,tpot=60ms,quantile=0.95") == SLA(ttft_s=1.5, tpot_s=0.06, quantile=0.95)
    True
    >>> SLA(tpot_s=60)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    capnb.errors.InputError: sla: tpot_s = 60: a P99 time per output token of 60 s is outside ...
    """

    ttft_s: float | None = None
    tpot_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None
    quantile: float = 0.99
    confirm: bool = False

    def __post_init__(self) -> None:
        for metric in METRICS:
            value = getattr(self, f"{metric}_s")
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InputError(
                    f"sla: {metric}_s = {value!r}: expected seconds as a number (or none)"
                )
            if not math.isfinite(value) or value <= 0:
                raise InputError(
                    f"sla: {metric}_s = {value!r}: expected a finite number of seconds > 0 "
                    "(a bound <= 0 can never be met)"
                )
            object.__setattr__(self, f"{metric}_s", float(value))
        if not self.bounds:
            raise InputError(
                "sla: give at least one bound in seconds: ttft_s, tpot_s, itl_s or e2e_s"
            )
        q = self.quantile
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0 < q < 1:
            raise InputError(f"sla: quantile = {q!r}: expected a share in (0, 1) (0.99 is P99)")
        object.__setattr__(self, "quantile", float(q))
        if not isinstance(self.confirm, bool):
            raise InputError(f"sla: confirm = {self.confirm!r}: expected true or false")
        if not self.confirm:
            for metric, value in self.bounds.items():
                low, high = PLAUSIBLE_S[metric]
                if not low <= value <= high:
                    raise InputError(self._implausible(metric, value, low, high))

    def _implausible(self, metric: str, value: float, low: float, high: float) -> str:
        per = " per token" if metric in ("tpot", "itl") else ""
        hint = (
            f": {_seconds(value / 1000)} is {value / 1000:g}"
            if value > high and low <= value / 1000 <= high
            else ""
        )
        return (
            f"sla: {metric}_s = {value:g}: a {self.name} {_MEANING[metric]} of {_seconds(value)} is "
            f"outside the plausible {_seconds(low)}-{_seconds(high)} ({metric}_s is in "
            f"seconds{per}{hint}); give confirm=True ([sla] confirm = true, --sla ...,confirm) "
            "to plan on it anyway"
        )

    @property
    def bounds(self) -> dict[str, float]:
        """The bounded metrics and their bounds (seconds), in the order ttft, tpot, itl, e2e."""
        return {m: getattr(self, f"{m}_s") for m in METRICS if getattr(self, f"{m}_s") is not None}

    @property
    def name(self) -> str:
        """The quantile's name: ``P99``, ``P99.9``, ``P50``."""
        return f"P{100 * self.quantile:g}"

    def bound_words(self, metric: str) -> str:
        """One bound in words: ``P99 TPOT <= 60 ms``."""
        return f"{self.name} {metric.upper()} <= {_seconds(self.bounds[metric])}"

    def __str__(self) -> str:
        return " and ".join(self.bound_words(m) for m in self.bounds)

    def as_dict(self) -> dict[str, object]:
        """The record as plain values (bounds not given are left out; confirm only when set)."""
        out: dict[str, object] = {f"{m}_s": v for m, v in self.bounds.items()}
        out["quantile"] = self.quantile
        if self.confirm:
            out["confirm"] = True
        return out

    @classmethod
    def from_mapping(cls, values: dict, *, where: str = "sla") -> SLA:
        """An SLA from a mapping of its fields (a config's ``[sla]`` table); unknown keys are errors."""
        if not isinstance(values, dict):
            raise InputError(f"{where}: the SLA is a table of bounds (ttft_s, tpot_s, ...)")
        known = [f.name for f in fields(cls)]
        unknown = [k for k in values if k not in known]
        if unknown:
            raise InputError(
                f"{where}: unknown SLA setting {unknown[0]!r}; known: {', '.join(known)}"
            )
        return cls(**values)

    @classmethod
    def parse(cls, text: str) -> SLA:
        """An SLA from ``metric=value`` pairs: ``"ttft=1.5,tpot=60ms,quantile=0.95,confirm"``.

        Values are seconds, or carry a unit (``s``, ``ms``, ``us``); ``confirm`` alone accepts
        implausible bounds.
        """
        values: dict[str, object] = {}
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            if part == "confirm":
                values["confirm"] = True
                continue
            key, sep, raw = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in (*METRICS, "quantile"):
                raise InputError(
                    f"--sla: {part!r}: expected metric=seconds with metric one of "
                    f"{', '.join(METRICS)} (or quantile=0.99, or confirm), e.g. ttft=1.5,tpot=60ms"
                )
            values["quantile" if key == "quantile" else f"{key}_s"] = _number(raw, part, key)
        return cls(**values)


_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


def _number(raw: str, part: str, key: str) -> float:
    match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(s|ms|us)?\s*", raw)
    if match is None or (key == "quantile" and match.group(2)):
        raise InputError(
            f"--sla: {part!r}: expected a number"
            + ("" if key == "quantile" else " of seconds, or one with s, ms or us (60ms)")
        )
    try:
        value = float(match.group(1))
    except ValueError:
        raise InputError(f"--sla: {part!r}: {match.group(1)!r} is not a number") from None
    return value * _UNITS[match.group(2) or ""]

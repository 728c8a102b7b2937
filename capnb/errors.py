"""Exceptions capnb raises. Every message names the argument, field, file or row at fault."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "BudgetError",
    "CapnbError",
    "ConfigError",
    "InfeasibleError",
    "InputError",
    "NotPricedError",
    "OutputError",
    "UnknownNameError",
]


class CapnbError(ValueError):
    """Base class of every error capnb raises on bad input.

    ``plan``: the message as a plan user reads it (``capnb plan``, :func:`capnb.plan.build`),
    where the advice names an argument of the API the plan sets for its user: the same diagnosis,
    with the ``[table] setting`` and ``--flag`` that change it (None: the message holds as it is).
    The plan states a step's failure in it.
    """

    plan: str | None = None

    def __init__(self, *args: object, plan: str | None = None):
        super().__init__(*args)
        self.plan = plan


class InputError(CapnbError):
    """An argument has a value capnb cannot use (wrong type, NaN, out of range)."""


class ConfigError(CapnbError):
    """A file or mapping (model config, benchmark file, trace) lacks a field or has a bad one."""


class BudgetError(InputError):
    """A size a user controls would take more memory or time than capnb allows for one call.

    The message gives the figure, the limit and the setting that lowers it.
    """


class InfeasibleError(InputError):
    """No option meets the SLA or the limits.

    The message starts with "infeasible:" and says why and what to change. A caller that can go on
    without the answer (a worksheet's side analysis) catches this class, never a message's text.
    """


class OutputError(CapnbError):
    """A file capnb writes cannot be written whole, or would replace one capnb did not write.

    No space, a file-size limit, no permission: the message names the path and what to do.
    """


class NotPricedError(InputError):
    """No option can be bought: the prices list none of the GPUs that meet the SLA.

    ``gpus`` names those GPUs (sorted), so that a caller can say what was not priced.
    """

    def __init__(self, gpus: Iterable[str]):
        self.gpus = sorted(set(gpus))
        super().__init__(
            "not priced: no pool has a price (the prices list none of "
            f"{', '.join(self.gpus) or 'the pools'}; check prices' GPUs and pricing kinds)"
        )


class UnknownNameError(CapnbError, KeyError):
    """A catalog name (GPU, model) is not known; the message lists the closest known names."""

    def __init__(self, kind: str, name: object, known: Iterable[str], *, add: str = ""):
        known = sorted(known)
        close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.3)
        close += [k for k in known if str(name).lower() in k.lower() and k not in close]
        hint = f"closest: {', '.join(close[:3])}" if close else f"known: {', '.join(known)}"
        if close and len(known) <= 20:  # a short catalog is listed whole: "closest" can mislead
            hint += f" (all: {', '.join(known)})"
        super().__init__(f"unknown {kind} {name!r}; {hint}" + (f"; {add}" if add else ""))

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])

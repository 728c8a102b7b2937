"""A chart's titles in words with the glossary's units: one place a value's unit is written."""

from __future__ import annotations

from .. import glossary


def titled(words: str, name: str) -> str:
    """``words`` with the glossary unit of ``name``: ``titled("cold start", "cold_start_s")``.

    'cold start (s)'; a unit the words already say, or none (``1``), is not said again:
    ``titled("fewest instances", "min_instances")`` is 'fewest instances'.
    """
    term = glossary.VARIABLES.get(name) or glossary.DIMS[name]
    if term.units == "1" or term.units in words.split():
        return words
    return f"{words} ({term.units})"

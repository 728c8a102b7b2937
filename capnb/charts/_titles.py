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


#: An autoscaling policy's settings in words, as the text and the controls name them.
SETTINGS = {
    "scale_up_threshold": "scale-up threshold",
    "cooldown_s": "scale-down delay",
    "min_instances": "fewest instances",
    "buffer_instances": "warm spares",
}
#: The settings (and the cold start) a chart's tooltip shows, with their units.
SETTING_TITLES = {
    **{name: titled(words, name) for name, words in SETTINGS.items()},
    "scale_up_threshold": "scale-up threshold (utilisation)",
    "cold_start_s": titled("cold start", "cold_start_s"),
}

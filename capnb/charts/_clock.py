"""Time axes on a trace's own clock: dates where the trace has them, "day 1 08:00" where it has not.

A trace whose date is not known (ServeGen's rate series, Mooncake's relative timestamps) is loaded
with time 0 on a placeholder date (1970-01-01) and says so in its clock attrs (``weekday_known`` /
``hours_known`` = ``"no"``). Charts then count days from the trace's first day instead of showing
the placeholder: ``day 1 08:00``. Times go to the browser as milliseconds on a UTC scale, so a
trace's naive clock is drawn as it is, not shifted into the reader's time zone.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from .. import words

__all__ = [
    "day_label",
    "is_undated",
    "slot_axis",
    "slot_title",
    "slot_words",
    "slot_x",
    "time_encoding",
]

_DAY_MS = 86_400_000
_PLACEHOLDER_YEAR = words.PLACEHOLDER_YEAR  # where the loaders put time 0 of an undated trace


def is_undated(attrs: dict, times: np.ndarray) -> bool:
    """Whether a trace's dates are placeholders.

    Its clock attrs say so or, where the attrs were lost on the way (a plan's timeline), its times
    start on the loaders' placeholder date.
    """
    if attrs.get("weekday_known") == "no" or attrs.get("hours_known") == "no":
        return True
    if "weekday_known" in attrs:
        return False
    times = np.asarray(times)
    return bool(times.size) and pd.Timestamp(times[0]).year == _PLACEHOLDER_YEAR


def _origin(times: np.ndarray) -> np.datetime64:
    return np.datetime64(pd.Timestamp(np.asarray(times)[0]).normalize().to_datetime64(), "ns")


def day_label(times, origin=None) -> list[str]:
    """``day 1 08:00`` for each time, counting days from the first one's (or ``origin``'s) day."""
    times = np.asarray(times, dtype="datetime64[ns]")
    start = _origin(times) if origin is None else np.datetime64(origin, "ns")
    minutes = ((times - start) // np.timedelta64(1, "m")).astype(np.int64)
    return [words.day_time(m) for m in minutes]


def time_encoding(frame: pd.DataFrame, column: str, *, undated: bool, title: str | None = None):
    """The x encoding and the tooltip of a time column; adds ``t_ms`` and ``when`` to ``frame``.

    ``t_ms`` holds the milliseconds the axis draws, ``when`` a label for tooltips.
    Dated: the trace's own clock on a UTC time scale. Undated: days counted from the first day.
    """
    time_columns(frame, column, undated=undated)
    return time_x(undated=undated, title=title)


def time_columns(frame: pd.DataFrame, column: str, *, undated: bool) -> None:
    """The data half of :func:`time_encoding`: adds ``t_ms`` and ``when`` to ``frame``."""
    times = frame[column].to_numpy().astype("datetime64[ns]")
    if undated:
        start = _origin(times)
        frame["t_ms"] = ((times - start) // np.timedelta64(1, "ms")).astype(np.int64)
        frame["when"] = day_label(times, start)
    else:
        frame["t_ms"] = (times.astype("datetime64[ms]").astype(np.int64)).astype(np.int64)
        frame["when"] = np.datetime_as_string(times, unit="m")


def time_x(*, undated: bool, title: str | None = None):
    """The chart half of :func:`time_encoding`: the x encoding and the tooltip of ``t_ms``."""
    if undated:
        axis = alt.Axis(
            labelExpr=(
                f"'day ' + (floor(datum.value / {_DAY_MS}) + 1) + "
                "(datum.value % 86400000 ? ' ' + utcFormat(datum.value, '%H:%M') : '')"
            ),
            labelOverlap=True,
        )
        title = (
            title
            if title is not None
            else "the trace's clock (date not known: day 1 is its first day)"
        )
    else:
        axis = alt.Axis(labelOverlap=True)
    x = alt.X(field="t_ms", type="temporal", title=title, scale=alt.Scale(type="utc"), axis=axis)
    return x, alt.Tooltip(field="when", type="nominal", title="time")


def _hour(code: str) -> str:
    """A vega expression: slot ``code``'s hour of day as the text writes it, 9 -> '09:00'."""
    return f"({code} % 24 < 10 ? '0' : '') + ({code} % 24) + ':00'"


def _weekday(code: str) -> str:
    return f"['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'][floor({code} / 24) % 7]"


def slot_axis(kind: str, count: int, *, ends: bool = False) -> dict:
    """A slot axis's labels as the text names slots, as plain JSON for ``alt.Axis(**...)``.

    Hours of the day read ``09:00`` (a tick every 3 hours), hours of the week ``Sat 10:00`` (a
    tick at each day's 00:00); custom slots keep their numbers. ``ends``: the axis also draws the
    end of the last slot (a step line's), slot ``count``, which reads as the period's start.
    """
    stop = count + 1 if ends else count
    if kind == "hour_of_day":
        return {"labelExpr": _hour("datum.value"), "values": list(range(0, stop, 3))}
    if kind == "hour_of_week":
        label = f"{_weekday('datum.value')} + ' ' + {_hour('datum.value')}"
        return {"labelExpr": label, "values": list(range(0, stop, 24))}
    return {"format": "d"}


def slot_words(kind: str, count: int, field: str = "slot") -> str:
    """A vega expression: the slot in ``field`` in words, as :func:`capnb.forecast.slot_label`.

    ``Sat 10:00-11:00``, ``09:00-10:00``, custom slots ``slot 5``; a step line's end (slot
    ``count``) reads as the last slot, whose values it repeats. Worked out in the browser: the
    chart's data stay the codes.
    """
    code = f"min(datum['{field}'], {count - 1})"
    if kind not in ("hour_of_day", "hour_of_week"):
        return f"'slot ' + {code}"
    hours = f"{_hour(code)} + '-' + {_hour(f'({code} + 1)')}"
    return f"{_weekday(code)} + ' ' + {hours}" if kind == "hour_of_week" else hours


def slot_title(label: str, clock: str) -> str:
    """A slot axis's title: the slots in words and the clock they are on, where known.

    >>> slot_title("hour of week", "Europe/Berlin"), slot_title("hour of day", "")
    ('hour of week (Europe/Berlin)', 'hour of day')
    """
    return f"{label} ({clock})" if clock else label


def slot_x(
    kind: str, count: int, clock: str = "", *, field: str = "slot"
) -> tuple[alt.X, dict[str, str]]:
    """An ordinal x of slot codes read as the text names them, and the words of each slot.

    Returns ``(x, when)``: ``chart.transform_calculate(**when)`` adds a ``when`` column
    (``Sat 10:00-11:00``) for a tooltip ``alt.Tooltip("when:N", title=x["title"])``. ``clock``: the
    zone the slots are on (:func:`capnb.forecast.slot_clock`; empty where not known).
    """
    label = kind.replace("_", " ") if kind in ("hour_of_day", "hour_of_week") else "slot"
    x = alt.X(f"{field}:O", title=slot_title(label, clock), axis=alt.Axis(**slot_axis(kind, count)))
    return x, {"when": slot_words(kind, count, field)}

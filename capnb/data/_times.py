"""Timestamps of traces: parsing, time zones and the clock slots are counted in.

capnb keeps a trace's times as naive ``datetime64[ns]`` on the trace's own clock (the wall clock its
slots are read from) and states the time zone in the attrs. Instants written with a UTC offset are
moved onto the clock of that offset when the whole file shares one offset, or onto the clock the
caller names with ``timezone=``; a file mixing offsets without ``timezone=`` is an error, because its
hours of the day would otherwise be counted on a clock nobody chose.
"""

from __future__ import annotations

import re
import warnings
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import words
from ..errors import ConfigError, InputError

#: The requests expected in a window (or an empty stretch of a log) at which finding none is taken
#: for missing data: a Poisson count with this mean is 0 with probability exp(-6.91) = 0.1 %.
IDLE_MEDIAN_COUNT = 6.91

_DAY_NS = 86_400 * 1_000_000_000
_WEEK_NS = 7 * _DAY_NS


def compared_periods(span_ns: int, attrs) -> tuple[tuple[int, ...], str]:
    """The periods (ns) whose other cycles an empty stretch is compared with; or none, and why.

    Traffic has a time of day: an empty night is what a service idle at night has, and a hole
    only where the other nights have traffic. So an empty stretch is judged against the same
    time of day on the other days (the hours must be known and the trace span two days, so that
    every moment of a stretch has one other day); and, when the weekday is known and the trace
    spans two weeks, against the same time of the week on the other weeks too (an idle weekend
    is no hole either). No period: the caller falls back on the trace's mean rate.
    """
    if attrs.get("hours_known") == "no":
        return (), "its hours of the day are not known"
    if span_ns < 2 * _DAY_NS:
        return (), "it spans under two days"
    if attrs.get("weekday_known") != "no" and span_ns >= 2 * _WEEK_NS:
        return (_DAY_NS, _WEEK_NS), ""
    return (_DAY_NS,), ""


def compared_text(periods: tuple[int, ...]) -> str:
    """Words for :func:`compared_periods`' answer, for notes."""
    text = "the same time of day on the other days"
    return text + (" and of the week on the other weeks" if len(periods) > 1 else "")


def emptiness_score(total, exposure, length) -> np.ndarray:
    """-ln P(a stretch of ``length`` is empty), given ``total`` requests seen in ``exposure``.

    ``exposure`` is time at the same time of day elsewhere (in the same unit as ``length``). If
    both had one Poisson rate, the stretch would hold none of the ``total`` requests with
    probability ``(exposure / (exposure + length)) ** total``: the score is ``total x
    ln(1 + length / exposure)``, the expected count ``rate x length`` when the exposure is long,
    and lower when the rate rests on few days. A stretch scoring at least
    :data:`IDLE_MEDIAN_COUNT` is improbably empty (0.1 %). 0 where there is no exposure.
    """
    total, exposure, length = np.broadcast_arrays(
        np.asarray(total, float), np.asarray(exposure, float), np.asarray(length, float)
    )
    score = np.zeros(total.shape)
    seen = exposure > 0
    score[seen] = total[seen] * np.log1p(length[seen] / exposure[seen])
    return score


class TraceWarning(UserWarning):
    """A trace loaded, but something in it was repaired (sorted, merged) and is reported."""


__all__ = [
    "Clock",
    "epoch_ns",
    "naive_ns",
    "origin_ns",
    "origin_text",
    "parse_strings",
    "resolve_timezone",
    "table_times",
    "unit_ns",
]

#: Where time 0 of a trace with no date is put (a placeholder: the clock attrs say so).
_PLACEHOLDER_ORIGIN = f"{words.PLACEHOLDER_YEAR}-01-01"

_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
OFFSET_PATTERN = r"(Z|[+-]\d\d:?\d\d)$"


@dataclass(frozen=True)
class Clock:
    """Which clock a trace's naive times are on: a zone name, a fixed offset, or unknown."""

    timezone: str  # "UTC", "UTC+02:00", "Europe/Berlin", or "unknown"
    weekday_known: bool
    origin: str  # what time 0 means for relative timestamps ("" for absolute ones)
    hours_known: bool = True  # False: time 0 is an unknown moment, so the hour of day is too

    def attrs(self) -> dict[str, str]:
        """The attrs a trace carries to say which clock its times are on."""
        out = {
            "timezone": self.timezone,
            "weekday_known": "yes" if self.weekday_known else "no",
            "hours_known": "yes" if self.hours_known else "no",
        }
        if self.origin:
            out["time_origin"] = self.origin
        return out


def unit_ns(time_unit: str | None, argument: str, column: str) -> int:
    """Nanoseconds per unit of a numeric time column; the unit must be named (never guessed)."""
    if time_unit is None:
        what = "(seconds or milliseconds since the epoch, or since the first request)"
        raise InputError(
            f"{argument}: column {column!r} holds numbers; say what they count with "
            f"time_unit='s', 'ms', 'us' or 'ns' {what}",
            plan=f"{argument}: column {column!r} holds numbers; set [traffic] time_unit "
            f"(--time-unit) to 's', 'ms', 'us' or 'ns' {what}",
        )
    if time_unit not in _UNITS:
        raise InputError(f"time_unit must be one of {list(_UNITS)}, got {time_unit!r}")
    return _UNITS[time_unit]


def resolve_timezone(timezone: str | None) -> str | None:
    """Check a time zone name (IANA, or ``"UTC"``); return it unchanged."""
    if timezone is None:
        return None
    if not isinstance(timezone, str):
        raise InputError(f"timezone must be an IANA name such as 'UTC', got {timezone!r}")
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InputError(
            f"timezone={timezone!r} is not a known IANA time zone (e.g. 'UTC', 'Europe/Berlin')"
        ) from None
    return timezone


def offset_name(minutes: int) -> str:
    """``0`` -> ``"UTC"``, ``120`` -> ``"UTC+02:00"``."""
    if minutes == 0:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def utc_to_clock(
    utc_ns: np.ndarray, timezone: str | None, offset_minutes: int | None
) -> np.ndarray:
    """UTC instants (int64 ns) -> naive wall-clock ns on the named zone or the fixed offset."""
    if timezone is not None:
        import pandas as pd

        index = pd.DatetimeIndex(utc_ns.view("datetime64[ns]"), tz="UTC").tz_convert(timezone)
        return index.tz_localize(None).asi8
    if not offset_minutes:
        return utc_ns
    return utc_ns + np.int64(offset_minutes) * 60_000_000_000


def on_zone(utc_ns: np.ndarray, zone: str) -> tuple[np.ndarray, str]:
    """UTC instants (int64 ns) -> naive ns on a named zone's clock, and that clock's label.

    A trace that crosses a daylight-saving change has no single wall clock to count hours on:
    when the clocks go back, one local hour holds two hours of requests (a slot's rate doubles);
    when they go forward, an hour is missing. Such a trace is put on the zone's standard time
    all year (a fixed offset, the label says which), so every slot holds one real hour; a
    :class:`TraceWarning` says so.
    """
    local = utc_to_clock(utc_ns, zone, None)
    offsets = local - utc_ns
    if not offsets.size or offsets.min() == offsets.max():  # one offset throughout
        return local, zone
    import datetime

    first = datetime.datetime.fromtimestamp(int(utc_ns[0]) // 1_000_000_000, datetime.UTC)
    here = first.astimezone(zoneinfo.ZoneInfo(zone))
    standard = int((here.utcoffset() - (here.dst() or datetime.timedelta(0))).total_seconds() // 60)
    label = f"{zone} standard time ({offset_name(standard)} all year)"
    warnings.warn(
        f"the trace crosses a daylight-saving change of {zone}: its hours are counted on {label}, "
        "so that no local hour holds two hours of requests or none (pass timezone='UTC' or a "
        "fixed offset to choose another clock)",
        TraceWarning,
        stacklevel=3,
    )
    return utc_to_clock(utc_ns, None, standard), label


def naive_on_zone(
    ns: np.ndarray, timezone: str | None, column: str, where: Callable[[int], str]
) -> tuple[np.ndarray, str]:
    """Naive wall-clock ns stated to be on ``timezone`` -> the clock :func:`on_zone` counts on.

    Local times written across a daylight-saving change repeat an hour (clocks back) or skip one
    (clocks forward); taken as they stand, one slot would hold two hours of requests, or a rate
    series two rows for one window. They are placed as instants first (a repeated hour told apart
    by the rows' order), so they get the same clock as times written with offsets.
    """
    if timezone is None or fixed_offset(timezone) is not None:
        return ns, timezone or "unknown"
    import pandas as pd

    local = pd.DatetimeIndex(ns.view("datetime64[ns]"))
    placed = local.tz_localize(timezone, ambiguous=np.ones(ns.size, bool), nonexistent="NaT")
    if placed.isna().any():
        row = int(np.flatnonzero(placed.isna())[0])
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {local[row]}, a local time that {timezone}'s "
            "clock skips when it goes forward; write the times with UTC offsets or in UTC"
        )
    try:
        placed = local.tz_localize(timezone, ambiguous="infer")
    except ValueError:
        unsure = local.tz_localize(timezone, ambiguous="NaT").isna()
        row = int(np.flatnonzero(unsure)[0])
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {local[row]}, in the hour {timezone}'s clock "
            "repeats when it goes back, and the rows' order does not tell which of the two it is; "
            "write the times with UTC offsets or in UTC"
        ) from None
    return on_zone(placed.tz_convert("UTC").as_unit("ns").asi8, timezone)


def epoch_ns(values: np.ndarray, per_unit: int) -> np.ndarray:
    """Numeric times in a unit -> int64 ns (integers stay exact; floats round to the nearest ns)."""
    if values.dtype.kind in "iu":
        return values.astype(np.int64) * np.int64(per_unit)
    # whole units and the fraction apart: 1.7e9 s x 1e9 would not fit a float64's 53 bits
    values = values.astype(np.float64)
    whole = np.floor(values)
    return whole.astype(np.int64) * np.int64(per_unit) + np.round(
        (values - whole) * per_unit
    ).astype(np.int64)


def naive_ns(values: np.ndarray) -> np.ndarray:
    """datetime64 of any unit -> int64 ns."""
    return values.astype("datetime64[ns]").view(np.int64)


def parse_strings(
    strings,
    *,
    column: str,
    where: Callable[[int], str],
    timezone: str | None,
) -> tuple[np.ndarray, str, bool]:
    """Parse ISO 8601 strings (with or without UTC offsets) onto the trace's clock.

    Parameters
    ----------
    strings
        A pyarrow string array or chunked array (nulls are errors).
    column
        The column's name, for messages.
    where
        Row index -> "file, row N" for messages.
    timezone
        The clock to read times on, or None (the offset the file states, or unknown).

    Returns
    -------
    (ns, timezone_label, had_offsets)
        Naive wall-clock int64 nanoseconds; the clock's name for the attrs; whether the strings
        carried UTC offsets.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    strings = pc.utf8_trim_whitespace(strings.cast(pa.string()))
    if strings.null_count:
        row = int(np.flatnonzero(strings.is_null().to_numpy(zero_copy_only=False))[0])
        raise ConfigError(f"{where(row)}: column {column!r} is empty (no timestamp)")
    has_offset = pc.match_substring_regex(strings, OFFSET_PATTERN).to_numpy(zero_copy_only=False)
    text = strings.to_numpy(zero_copy_only=False)
    if has_offset.any() and not has_offset.all():
        with_zone = int(np.flatnonzero(has_offset)[0])
        without = int(np.flatnonzero(~has_offset)[0])
        raise ConfigError(
            f"column {column!r} mixes times with and without a UTC offset: {where(with_zone)} "
            f"holds {text[with_zone]!r}, {where(without)} holds {text[without]!r}; a time without an "
            "offset cannot be placed on the same clock"
        )
    aware = bool(has_offset.all())
    parsed = pd.to_datetime(pd.Series(text), format="ISO8601", errors="coerce", utc=aware)
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {text[row]!r}, which is not an ISO 8601 time "
            f"({bad.size:,} such row{'s' if bad.size > 1 else ''})"
        )
    naive = parsed.dt.tz_localize(None).to_numpy()
    _check_dates(naive, column, where, text)
    ns = naive.astype("datetime64[ns]").view(np.int64)
    if not aware:
        local, label = naive_on_zone(ns, timezone, column, where)
        return local, label, False
    if timezone is not None:
        local, label = on_zone(ns, timezone)
        return local, label, True
    offsets = pc.extract_regex(strings, r"(?P<zone>Z|[+-]\d\d:?\d\d)$")
    zones = offsets.field("zone").to_numpy(zero_copy_only=False)
    minutes = np.array([_zone_minutes(z) for z in np.unique(zones)])
    if np.unique(minutes).size > 1:
        first = zones[0]
        other_row = int(
            np.flatnonzero(np.vectorize(_zone_minutes)(zones) != _zone_minutes(first))[0]
        )
        raise ConfigError(
            f"column {column!r} mixes UTC offsets ({first} in {where(0)}, {zones[other_row]} in "
            f"{where(other_row)}): say which clock to count hours of the day on with timezone= "
            "(e.g. timezone='Europe/Berlin', or 'UTC')"
        )
    offset = int(minutes[0])
    return utc_to_clock(ns, None, offset), offset_name(offset), True


def fixed_offset(zone: str) -> int | None:
    """Minutes east of UTC of a zone written as an offset (``"+02:00"``, ``"UTC"``); None for names."""
    if zone in ("UTC", "Z", "+00:00", "-00:00"):
        return 0
    if re.fullmatch(r"[+-]\d\d:?\d\d", zone):
        return _zone_minutes(zone)
    return None


def _zone_minutes(zone: str) -> int:
    match = re.fullmatch(r"([+-])(\d\d):?(\d\d)", zone)
    if zone == "Z" or match is None:
        return 0
    sign, hours, minutes = match.groups()
    return (-1 if sign == "-" else 1) * (int(hours) * 60 + int(minutes))


def table_times(table, column, where, time_unit, timezone, relative, start, midnight=False):
    """Times of a pyarrow column (timestamp, text or numbers) onto the trace's clock.

    Numbers count from the Unix epoch (UTC), or, ``relative``, from time 0: ``start`` when given,
    else an unknown moment placed at a placeholder date. ``midnight``: time 0 is known to be a
    midnight (ServeGen's day 0), so the hour of the day holds though the date does not. Numbers
    that as Unix times would fall before 2000 are taken to count from an unknown start, not from
    1970 (a clock and a weekday they never had), and the clock says so, unless another unit makes
    them Unix times of 2000-2099 that start long after time 0 (epoch seconds read as ms): that is
    a wrong ``time_unit``, refused with the dates and span each unit gives. Numbers stated to count
    from ``start`` that are plainly Unix times are a :class:`TraceWarning` with both readings.
    """
    import pyarrow as pa
    import pyarrow.types as pat

    values = table.column(column)  # chunked: converted chunk by chunk, copied once at the end
    kind = values.type
    if values.null_count:
        row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise ConfigError(f"{where(row)}: column {column!r} is empty (no time)")
    if pat.is_timestamp(kind):
        _numbers_only(start, time_unit, column, where, values[0])
        own = values.cast(pa.timestamp(kind.unit)).to_numpy().astype(f"datetime64[{kind.unit}]")
        _check_dates(own, column, where, own)  # the text of one row only, when one is wrong
        ns = values.cast(pa.timestamp("ns", tz=kind.tz)).cast(pa.int64()).to_numpy()
        if kind.tz is None:
            local, label = naive_on_zone(ns, timezone, column, where)
            return local, Clock(label, True, "")
        offset = fixed_offset(kind.tz)
        if timezone is None and offset is not None:
            clock = Clock(offset_name(offset), True, "")
            return utc_to_clock(ns, None, offset), clock
        local, label = on_zone(ns, timezone or kind.tz)
        return local, Clock(label, True, "")
    if pat.is_string(kind) or pat.is_large_string(kind):
        numbers = _numbers_as_text(values, column, where)
        if numbers is None:
            _numbers_only(start, time_unit, column, where, values[0])
            ns, label, _ = parse_strings(values, column=column, where=where, timezone=timezone)
            return ns, Clock(label, True, "")
        values, kind = numbers, numbers.type
    if pat.is_integer(kind) or pat.is_floating(kind):
        numbers = values.to_numpy(zero_copy_only=False)
        if pat.is_floating(kind) and not np.isfinite(numbers).all():
            row = int(np.flatnonzero(~np.isfinite(numbers))[0])
            raise ConfigError(
                f"{where(row)}: column {column!r} holds {float(numbers[row])!r}, not a time"
            )
        per_unit = unit_ns(time_unit, f"{where(0)}: time_unit", column)
        stated = relative  # the caller said they count from time 0 (start=, or a bundled series)
        if not relative and float(numbers[0]) * per_unit < _YEAR_2000_NS:
            relative = True  # seconds (or ms) since a start nobody named, not Unix time
        start, timezone = _start_on_clock(start, timezone) if relative else (start, timezone)
        origin, known = origin_ns(start) if relative else (0, True)
        _check_range(numbers, per_unit, origin, column, where, time_unit)
        if relative:
            _check_relative(numbers, time_unit, origin if stated else None, column, where)
            _check_span(numbers, time_unit, column, where)
        ns = epoch_ns(numbers, per_unit)
        if relative and known and timezone is not None and fixed_offset(timezone) is None:
            # time 0 on the zone's wall clock, the rest elapsed time after it: as instants, on
            # the clock dated times get (standard time where the trace crosses a change)
            local, label = on_zone(ns + _zone_instant(origin, timezone, start), timezone)
            return local, Clock(label, known, origin_text(start), True)
        if relative:
            clock = Clock(timezone or "unknown", known, origin_text(start), known or midnight)
            return ns + origin, clock
        if timezone is not None:  # epoch numbers are UTC instants: move them onto that clock
            local, label = on_zone(ns, timezone)
            return local, Clock(label, True, "")
        return ns, Clock("UTC", True, "")
    raise ConfigError(f"{where(0)}: column {column!r} has type {kind}, which is not a time")


def _numbers_only(start, time_unit, column: str, where, first) -> None:
    """``start`` and ``time_unit`` place numeric times: given for a column of dates, an error.

    They were ignored, so ``start = "2026-01-01"`` left the trace on its own dates unsaid, and
    ``start = "yesterday"`` passed.
    """
    given = [f"{n}={v!r}" for n, v in (("start", start), ("time_unit", time_unit)) if v is not None]
    if given:
        raise ConfigError(
            f"{where(0)}: column {column!r} holds dates ({str(first)!r}), which "
            f"{' and '.join(given)} do not apply to: they read numeric times counted from a "
            "start; leave them out"
        )


def _numbers_as_text(values, column: str, where):
    """A text column of numbers as numbers; None when its first value is not one (it holds dates).

    A CSV is read as text when any column did not convert (a fractional token count), and its
    numeric times must still read as numbers for the row at fault to be the one named.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(values.combine_chunks())
    first = text[0].as_py() if len(text) else ""
    try:
        float(first)
    except ValueError:
        return None
    for kind in (pa.int64(), pa.float64()):
        try:
            return pc.cast(text, kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    ok = pc.fill_null(
        pc.match_substring_regex(text, r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"), False
    )
    row = int(np.flatnonzero(~ok.to_numpy(zero_copy_only=False))[0])
    raise ConfigError(f"{where(row)}: column {column!r} holds {text[row].as_py()!r}, not a time")


def _check_dates(values: np.ndarray, column: str, where, shown) -> None:
    """Dates must fit datetime64[ns] (years 1678-2261): a cast would wrap year 1 round to 1754."""
    outside = (values < np.datetime64("1678-01-01")) | (values > np.datetime64("2261-12-31"))
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        text = str(shown[row])
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {text!r}, outside the years 1678-2261 "
            "that capnb can hold"
        )


_FIRST_NS = float(np.datetime64("1678-01-01", "ns").view(np.int64))
_YEAR_2000_NS = float(np.datetime64("2000-01-01", "ns").view(np.int64))
_LAST_NS = float(np.datetime64("2261-12-31", "ns").view(np.int64))


def _check_range(numbers, per_unit, origin, column, where, time_unit) -> None:
    """Numeric times must land on a datetime64[ns] date: a wrong unit overflows silently."""
    with np.errstate(over="ignore"):  # an overflow to inf is caught just below
        instants = numbers.astype(np.float64) * per_unit + origin
    outside = (instants < _FIRST_NS) | (instants > _LAST_NS)
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        other = _unix_unit(numbers, exclude=time_unit)
        hint = ""
        if other is not None:
            hint = (
                f" As Unix times in {_UNIT_WORDS[other]} (time_unit={other!r}) they run "
                f"{_unix_reading(numbers, _UNITS[other])}."
            )
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {numbers[row].item()!r}, which as {time_unit} "
            "falls outside the years 1678-2261 that capnb can hold; is time_unit right ('s', "
            f"'ms', 'us' or 'ns')?{hint}"
        )


#: Unix times outside these years are not taken for a log's dates when a unit is checked.
_YEAR_2100_NS = float(np.datetime64("2100-01-01", "ns").view(np.int64))
_UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def _unix_unit(numbers: np.ndarray, exclude: str | None = None) -> str | None:
    """The unit in which numbers read as Unix times of 2000-2099 that start long after time 0.

    At most one unit fits (the units are 1000x apart, and 2000-2099 spans a factor of 4.3); None
    when none does. "Long after time 0": the first is later than the span from first to last,
    as a log's Unix times are and times counted from its first request are not.
    """
    low, high = float(numbers.min()), float(numbers.max())
    if not low > high - low:
        return None
    for unit, per_unit in _UNITS.items():
        if unit != exclude and _YEAR_2000_NS <= low * per_unit and high * per_unit < _YEAR_2100_NS:
            return unit
    return None


def _unix_reading(numbers: np.ndarray, per_unit: int, origin: int = 0) -> str:
    """'from 2024-05-13 00:00:00 to 2024-05-15 07:33:00 UTC (a span of 2.31 days)'."""
    low = float(numbers.min()) * per_unit + origin
    high = float(numbers.max()) * per_unit + origin
    return f"from {_stamp(low)} to {_stamp(high)} UTC (a span of {_span_text(high - low)})"


def _stamp(ns: float) -> str:
    return str(np.datetime64(int(ns), "ns").astype("datetime64[s]")).replace("T", " ")


def _span_text(ns: float) -> str:
    seconds = ns / 1e9
    for unit, size in (("years", 365.25 * 86_400), ("days", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def _number_text(value: float) -> str:
    """1715558400 -> '1,715,558,400'; 1715558400.214 -> '1,715,558,400.214'."""
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.3f}".rstrip("0") if abs(value) >= 1 else f"{value:.3g}"


def _check_relative(numbers, time_unit, origin, column, where) -> None:
    """Times read as counted from time 0 that are plainly Unix times: refused, or warned about.

    ``origin`` is None when the numbers were taken to count from an unknown start because as Unix
    times in ``time_unit`` they fall before 2000: if another unit makes them Unix times of
    2000-2099, the unit is wrong (epoch seconds read as ms land in January 1970), and the load is
    refused with both readings. Otherwise ``origin`` is the stated time 0 (``start=``): numbers
    that are Unix times in some unit are then warned about, with the dates each reading gives.
    """
    own = _UNITS[time_unit]
    unit = _unix_unit(numbers, exclude=time_unit if origin is None else None)
    if unit is None or (unit == time_unit and origin == 0):  # start= 1970-01-01: Unix times
        return
    row = int(np.argmin(numbers))
    low, high = (_number_text(float(v)) for v in (numbers.min(), numbers.max()))
    first_after = _span_text(float(numbers.min()) * own)
    as_unix = (
        f"as Unix times in {_UNIT_WORDS[unit]} (time_unit={unit!r}) they run "
        f"{_unix_reading(numbers, _UNITS[unit])}"
    )
    if origin is None:
        raise ConfigError(
            f"{where(row)}: column {column!r} holds {low} to {high}: time_unit={time_unit!r} "
            f"reads them as Unix times before 2000, {_unix_reading(numbers, own)}, and so as "
            f"times counted from an unknown start, the first {first_after} after time 0; "
            f"{as_unix}. Pass time_unit={unit!r} if they are Unix times in {_UNIT_WORDS[unit]}, "
            "or start= (the date and time of time 0) if they count from it"
        )
    warnings.warn(
        f"column {column!r} holds {low} to {high}: counted in {_UNIT_WORDS[time_unit]} from time 0 "
        f"(start=) they run {_unix_reading(numbers, own, origin)}, the first {first_after} after "
        f"time 0; {as_unix}: if they are, load them without start="
        + ("" if unit == time_unit else f" and with time_unit={unit!r}"),
        TraceWarning,
        stacklevel=4,
    )


#: A log counted from time 0 that spans more than this in its unit is warned about when the next
#: finer unit reads it as a span a service logs (over an hour): times in ms read as seconds span
#: 1000x too long (a 3-day log becomes 8 years, planned at one request every few hours).
_LONGEST_NS = 366 * 86_400 * 1_000_000_000
_FINER = {"s": "ms", "ms": "us", "us": "ns"}


def _check_span(numbers, time_unit, column, where) -> None:
    """Times counted from time 0 spanning over a year are warned about, with the finer reading."""
    span = (float(numbers.max()) - float(numbers.min())) * _UNITS[time_unit]
    finer = _FINER.get(time_unit)
    if span <= _LONGEST_NS or finer is None or span / 1000 < 3600e9:
        return
    warnings.warn(
        f"{where(int(np.argmax(numbers)))}: column {column!r} counted in {_UNIT_WORDS[time_unit]} "
        f"from time 0 spans {_span_text(span)} ({len(numbers):,} rows, one every "
        f"{_span_text(span / max(len(numbers) - 1, 1))} on average); if the times count "
        f"{_UNIT_WORDS[finer]}, pass time_unit={finer!r} (a span of {_span_text(span / 1000)})",
        TraceWarning,
        stacklevel=4,
    )


def _start_on_clock(start, timezone):
    """``(start, timezone)`` with a ``start`` that carries a UTC offset moved onto the clock.

    numpy reads ``2026-05-01T00:00+09:00`` as its UTC instant (15:00 the day before), which
    shifted every hour of the day by the offset: time 0 is the given wall time on its own offset
    (``UTC+09:00``), or that instant on ``timezone`` when one is named.
    """
    if start is None or not isinstance(start, str):
        return start, timezone
    import pandas as pd

    try:
        stamp = pd.Timestamp(start)
    except (ValueError, TypeError):
        return start, timezone  # origin_ns names the bad start
    if stamp.tzinfo is None:
        return start, timezone
    if timezone is not None:
        wall = stamp.tz_convert(zoneinfo.ZoneInfo(resolve_timezone(timezone))).tz_localize(None)
        return wall.isoformat(), timezone
    minutes = int(stamp.utcoffset().total_seconds() // 60)
    return stamp.tz_localize(None).isoformat(), offset_name(minutes)


def _zone_instant(wall_ns: int, timezone: str, start) -> int:
    """The UTC instant (ns) of a wall time on a named zone; a time its clock skips is an error."""
    import pandas as pd

    stamp = pd.Timestamp(wall_ns, unit="ns")
    try:
        placed = stamp.tz_localize(timezone, ambiguous=True, nonexistent="raise")
    except Exception:  # pytz/zoneinfo raise their own kinds for a skipped wall time
        raise InputError(
            f"start={start!r} is not a time on {timezone}'s clock (the clocks skip it when they "
            "go forward); give a time that exists there"
        ) from None
    return int(placed.tz_convert("UTC").tz_localize(None).value)


def origin_ns(start) -> tuple[int, bool]:
    if start is None:
        return int(np.datetime64(_PLACEHOLDER_ORIGIN, "ns").view(np.int64)), False
    try:
        return int(np.datetime64(start, "ns").view(np.int64)), True
    except ValueError:
        raise InputError(
            f"start must be a date and time such as '2024-05-10 00:00', got {start!r}"
        ) from None


def origin_text(start) -> str:
    if start is None:
        return f"time 0 placed at {_PLACEHOLDER_ORIGIN} 00:00 (real date and weekday not known)"
    return f"time 0 = {start}"

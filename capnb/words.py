"""How capnb writes numbers, spans of time, trace times and policy names, one way everywhere."""

from __future__ import annotations

import math


def count(n: int, noun: str) -> str:
    """``1 instance``, ``1,410 instances``."""
    return f"{int(n):,} {noun}" + ("" if int(n) == 1 else "s")


def over_slots(slots: int) -> str:
    """What a sum over a plan's hourly slots spans: "over the day" (24), "over the week" (168)."""
    return {24: "over the day", 168: "over the week"}.get(int(slots), f"over its {slots} slots")


def minutes(value: float) -> str:
    """A whole number of minutes: ``1 minute``, ``1,250 minutes`` (``0.6`` reads ``1 minute``)."""
    shown = f"{float(value):,.0f}"
    return f"{shown} {'minute' if shown == '1' else 'minutes'}"


def minutes_against(value: float, budget: float) -> str:
    """Minutes of breach against a budget, with the digits that tell them apart.

    Whole from 10 up, two significant digits below: a six-hour window's budget is 0.36 minutes,
    and whole figures read a breach of 0.5 minutes as ``0 minutes against 0``.
    """
    return f"{minutes_figure(value)} minutes against {minutes_figure(budget)}"


def minutes_figure(value: float) -> str:
    """Minutes with the digits that tell small ones apart: whole from 10 up, else 2 significant."""
    x = float(value)
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.2g}"


def percent_against(share: float, *bounds: float) -> str:
    """A share as a percentage with the digits that tell it apart from ``bounds`` (a goal's ends).

    One decimal, more where one would show a share beside a bound as the bound: 0.99550 against a
    goal up to 0.995 reads ``99.55%``, not ``99.5%``. 0 and 1 are bounds too: a share short of
    every interval never reads ``100.0%`` (0.99961 reads ``99.96%``).
    """
    share = float(share)
    for digits in range(1, 5):
        shown = f"{share:.{digits}%}"
        if all(shown != f"{b:.{digits}%}" or share == b for b in (*bounds, 0.0, 1.0)):
            return shown
    return shown


def percent(share: float) -> str:
    """A share as a percentage: ``64%``, and ``0.078%`` where whole digits would read 0.

    Whole from 1 % up; two significant digits below, so a share above 0 never reads ``0%``.
    """
    share = float(share)
    if not 0 < abs(share) < 0.01:
        return f"{share:.0%}"
    decimals = 1 - math.floor(math.log10(abs(share) * 100))
    return f"{share * 100:.{decimals}f}%"


def signed_percent(share: float) -> str:
    """A share with its sign, as :func:`percent` writes it: ``+5%``, ``-0.41%``, never ``-0%``."""
    share = float(share)
    return f"{'+' if share >= 0 else ''}{percent(share)}"


def change(ratio: float) -> str:
    """How far a ratio is from 1 as a percentage: ``22%``, and ``0.3%`` where whole digits read 0.

    Whole from 1 % up; one decimal below (two where one still reads 0.0 %), so a difference there
    is never written as none.
    """
    apart = abs(float(ratio) - 1)
    for digits in range(3):
        shown = f"{apart:.{digits}%}"
        if apart == 0 or float(shown.rstrip("%")) > 0:
            return shown
    return shown


def latency(seconds: float) -> str:
    """A latency in its natural unit: ``60 ms``, ``1.5 s`` (four significant digits)."""
    seconds = float(seconds)
    if seconds < 1.0:
        return f"{seconds * 1000:.4g} ms"
    return f"{seconds:.4g} s"


def quantile(value: float) -> str:
    """A quantile as a percentile's name: 0.99 -> 'P99', 0.995 -> 'P99.5'."""
    return f"P{round(100 * float(value), 6):g}"


def rate(value: float) -> str:
    """A rate's digits (requests/s): whole from 100 up, three significant digits below (0.19)."""
    value = float(value)
    return f"{value:,.0f}" if value >= 100 else f"{value:,.3g}"


def in_seconds(value: float) -> str:
    """Seconds: whole from 10 s up, two significant digits below (``0.4 s``, ``2.5 s``, ``45 s``).

    A stage of 0.4 s reads ``0.4 s``, not ``0 s``: a span that takes time never reads as none.
    """
    value = float(value)
    return f"{value:,.0f} s" if abs(value) >= 10 else f"{value:.2g} s"


def duration(seconds: float) -> str:
    """A span of time: ``0.4 s``, ``45 s``, ``1 minute``, ``30 minutes``, ``1.5 h``."""
    seconds = float(seconds)
    if seconds < 120:
        return in_seconds(seconds)
    if seconds < 7200:
        minutes = round(seconds / 60)
        return f"{minutes} minute" + ("" if minutes == 1 else "s")
    return f"{seconds / 3600:.1f} h"


def day_time(minutes: int) -> str:
    """A time on an undated trace's clock, counted from its first day: ``day 8 22:30``."""
    days, rest = divmod(int(minutes), 1440)
    return f"day {days + 1} {rest // 60:02d}:{rest % 60:02d}"


#: The year the trace loaders put time 0 of a trace with no date in (a placeholder, not a date).
PLACEHOLDER_YEAR = 1970


def when(stamp: str) -> str:
    """A time of a trace in words: ``day 8 22:30`` on an undated trace's clock, else the date.

    >>> when("1970-01-08T22:30:00.000000000"), when("2024-03-04T09:15:00")
    ('day 8 22:30', '2024-03-04 09:15')
    """
    text = str(stamp)
    if text.startswith(f"{PLACEHOLDER_YEAR}-01-"):
        day, hour, minute = int(text[8:10]), int(text[11:13]), int(text[14:16])
        return day_time((day - 1) * 1440 + hour * 60 + minute)
    return text[:16].replace("T", " ")


#: What each kind of chosen policy does (``Recommendation.kind``, ``Answer.policy.kind``), in words.
POLICY_KINDS = {
    "elastic": "scale elastically",
    "fixed_plus_buffer": "hold capacity that needs no cold start and scale elastically above it",
    "fixed": "run a fixed fleet",
}


#: Each autoscaling policy's name on every page (charts, sentences, the report, the CLI).
POLICY_NAMES = {
    "article": "article thresholds",
    "hpa": "Kubernetes HPA",
    "knative": "Knative KPA",
    "fixed": "fixed fleet",
    "fixed_elastic": "fixed + elastic",
    "predictive": "predictive",
}

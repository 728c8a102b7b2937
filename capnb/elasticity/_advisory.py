"""The replay's advisory view: how a policy moves the fleet, read from its run's timeline.

Part of :mod:`capnb.elasticity`. What a planner would do before it controls the fleet, in the four
figures an operator watches for (production planners have shipped 2-to-1 oscillation and
scale-downs that never happen):

- **scale events per hour**: steps where the pool the policy manages (ready plus starting, warm
  spares left out) changes, per hour of the run;
- **reversals** (flapping): a scale event in the opposite direction of the one before it, within
  ``window_s`` of it (default the run's ``thrash_window_s``, 900 s: the article's shortest
  cool-down);
- **time above the need**: steps where the pool holds more instances than the largest need of the
  last ``hold_s`` (default: the run's scale-down window plus 60 s), the need being
  ``ceil(rate / (scale_up_threshold x per_instance_qps))`` within the pool's bounds. Holding the
  peak for the scale-down window is the policy's design; holding more, longer, is capacity that
  is not coming down;
- **cold starts paid**: instances started, and their GPU-hours in cold start (the simulator's).

Preempted instances (a run with ``preemption``) count as scale-downs here: read such runs with care.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from .. import glossary, words
from ..errors import InputError
from ..units import declare_units, instances_needed
from ._policy import Policy
from ._policy import steps as whole_steps

__all__ = ["MOST_REVERSALS_PER_DAY", "advise", "advisory", "flapping_verdict", "flapping_warning"]

#: A policy whose reversals exceed this many a day flaps (a daily cycle needs none: its rises and
#: falls are hours apart, never within a cool-down); in a run shorter than a day, this many in all.
MOST_REVERSALS_PER_DAY = 1.0
_HOUR_S, _DAY_S = 3600.0, 86400.0
#: Added to the scale-down window when reading the need the policy may still hold: a decision
#: period or an averaging window (HPA 15 s, Knative 60 s, the article 60 s).
_GRACE_S = 60.0


def scale_events(pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, directions)`` of the steps where ``pool`` changes (+1 up, -1 down)."""
    change = np.diff(np.asarray(pool, dtype=np.int64))
    steps = np.flatnonzero(change) + 1
    return steps, np.sign(change[steps - 1])


def reversals(steps: np.ndarray, directions: np.ndarray, window_steps: int) -> int:
    """Events whose direction reverses the previous event's within ``window_steps`` steps."""
    flips = directions[1:] != directions[:-1]
    close = np.diff(steps) <= window_steps
    return int(np.count_nonzero(flips & close))


def held_need(need: np.ndarray, hold_steps: int) -> np.ndarray:
    """The largest need over the last ``hold_steps`` steps and this one."""
    series = pd.Series(np.asarray(need, dtype=np.float64))
    return series.rolling(hold_steps + 1, min_periods=1).max().to_numpy()


def _coordinate(run: xr.Dataset, name: str) -> float:
    if name not in run.coords or run[name].ndim:
        raise InputError(
            f"run: expected one simulated run (capnb.elasticity.simulate), no {name!r}"
        )
    return float(run[name])


@declare_units(window_s="s", hold_s="s")
def advise(
    run: xr.Dataset,
    *,
    window_s: float | None = None,
    hold_s: float | None = None,
    most_reversals_per_day: float = MOST_REVERSALS_PER_DAY,
) -> xr.Dataset:
    """The advisory figures of one run (:func:`capnb.elasticity.simulate`'s answer).

    Parameters
    ----------
    run
        One simulated run, with its timeline.
    window_s
        Two opposite scale events this close are a reversal (default: the run's
        ``thrash_window_s``).
    hold_s
        How long the policy may hold a past need (default: its scale-down window + 60 s).
    most_reversals_per_day
        Above this many reversals a day, ``flapping`` is true; a run shorter than a day flaps when
        its reversals exceed this many (one reversal in an hour is not 24 a day).

    Returns
    -------
    xarray.Dataset
        0-d: ``scale_events_per_hour`` (1/hour), ``reversals`` (1), ``reversals_per_day``
        (1/day), ``flapping`` (1, boolean), ``above_need_s`` (s), ``above_need_share`` (1),
        ``excess_instance_hours`` (instance·h), ``cold_starts`` (instances),
        ``cold_starts_per_day`` (instances/day), ``cold_start_gpu_hours`` (GPU·h). Attrs: the
        windows used.

    Examples
    --------
    >>> import numpy as np
    >>> from capnb.elasticity import simulate
    >>> rate = np.r_[np.full(600, 10.0), np.full(600, 60.0), np.full(2400, 10.0)]
    >>> for policy in ("hpa", "article"):  # a 10-minute burst: up, then down 11 minutes later
    ...     run = simulate(rate, step_s=1, per_instance_qps=10, policy=policy, cooldown_s=60,
    ...                    cold_start_s=30)
    ...     view = advise(run)
    ...     print(policy, int(view.scale_events_per_hour), int(view.reversals), float(view.above_need_s))
    hpa 3 1 0.0
    article 7 1 2280.0

    The article's rule scales down only below a 0.3 load ratio: it holds 4 instances where its
    0.7 target needs 2, for the rest of the run.
    """
    if not isinstance(run, xr.Dataset) or "ready_instances" not in run:
        raise InputError("run: expected capnb.elasticity.simulate's answer (it has a timeline)")
    step = float(run.attrs["step_s"])
    spares = _coordinate(run, "buffer_instances")
    pool = run.ready_instances.values + run.starting_instances.values - spares
    # a window given is whole steps (or an error naming the step); the defaults are the run's
    if window_s is None:
        window = float(run.attrs["thrash_window_s"])
        window_steps = int(window // step)
    else:
        window_steps, window = whole_steps(window_s, step, "window_s"), float(window_s)
    if hold_s is None:
        hold_steps = int((_coordinate(run, "cooldown_s") + _GRACE_S) // step)
        hold = hold_steps * step  # the whole steps used, not the seconds they were floored from
    else:
        hold_steps, hold = whole_steps(hold_s, step, "hold_s"), float(hold_s)
    steps, directions = scale_events(pool)
    flips = reversals(steps, directions, window_steps)
    up = _coordinate(run, "scale_up_threshold")
    low = _coordinate(run, "min_instances")
    need = np.clip(instances_needed(run.qps.values, up * float(run.attrs["per_instance_qps"])),
                   low, float(run.attrs["max_instances"]))  # fmt: skip
    excess = np.maximum(pool - held_need(need, hold_steps), 0.0)
    span = pool.size * step
    values = {
        # the simulator's own count, each event seen in the timeline (a decision ending step t
        # changes the pool from step t + 1); a preemption changes the pool but is not an event
        "scale_events_per_hour": int(run.scale_events) / (span / _HOUR_S),
        "reversals": flips,
        "reversals_per_day": flips / (span / _DAY_S),
        # a run shorter than a day shows at most its own reversals, not a day's: held to the count
        "flapping": flips / max(span / _DAY_S, 1.0) > most_reversals_per_day,
        "above_need_s": np.count_nonzero(excess) * step,
        "above_need_share": np.count_nonzero(excess) / pool.size,
        "excess_instance_hours": float(excess.sum()) * step / _HOUR_S,
        "cold_starts": int(run.instances_started),
        "cold_starts_per_day": int(run.instances_started) / (span / _DAY_S),
        "cold_start_gpu_hours": float(run.cold_start_gpu_hours),
    }
    return xr.Dataset(
        {name: ((), value, glossary.attrs(name)) for name, value in values.items()},
        attrs={
            "policy": run.attrs.get("policy", ""),
            "window_s": window,
            "hold_s": hold,
            "most_reversals_per_day": float(most_reversals_per_day),
            "span_s": float(span),
        },
    )


@declare_units(window_s="s", hold_s="s")
def advisory(demand, *, policies, forecast=None, window_s=None, hold_s=None, **settings):
    """Each policy's advisory figures, every policy run at the same settings.

    ``policies``: names, or :class:`Policy` records (each run as itself, named by its policy).

    ``settings`` are :func:`capnb.elasticity.simulate`'s (``per_instance_qps``, ``step_s``,
    ``scale_up_threshold``, ``cooldown_s``, ``min_instances``, ``buffer_instances``, ...: the
    chosen run's); ``cooldown_s=None`` takes each policy's own default. ``forecast`` goes to the
    predictive policy. Returns :func:`advise`'s variables over ``policy``.
    """
    from ._simulate import simulate

    given = [policies] if isinstance(policies, str | Policy) else list(policies)
    if not given:
        raise InputError("policies: give at least one policy")
    # a Policy record runs as itself, and is named by its policy's name
    names = [p.name if isinstance(p, Policy) else p for p in given]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:  # the view is over 'policy' by name: one label twice cannot be selected
        raise InputError(
            f"policies: {twice[0]!r} is given {names.count(twice[0])} times; the view is labelled "
            "by policy name, so compare one policy's settings with advise(simulate(...)) per run"
        )
    views = []
    for policy, name in zip(given, names, strict=True):
        extra = {"forecast": forecast} if name == "predictive" else {}
        run = simulate(demand, policy=policy, **settings, **extra)
        views.append(advise(run, window_s=window_s, hold_s=hold_s))
    out = xr.concat(views, dim="policy", combine_attrs="drop_conflicts")
    return out.assign_coords(policy=("policy", names, glossary.attrs("policy")))


def _one_view(view: xr.Dataset, policy: str | None) -> xr.Dataset:
    """The advisory figures of one policy: ``view`` itself, or its ``policy`` (checked)."""
    held = view.policy.values.tolist() if "policy" in view.dims else None
    if held is not None and policy is None:
        raise InputError(f"policy: the view holds {held}; name the one to warn about")
    if held is not None and policy not in held:
        raise InputError(f"policy={policy!r} is not in the view; it holds {held}")
    return view.sel(policy=policy) if held is not None else view


def _in_the_run(one: xr.Dataset) -> str:
    """Where the reversals are counted: a day's rate, or a run shorter than a day's own hours."""
    span = float(one.attrs.get("span_s", _DAY_S))
    # a run shorter than a day says its own span: 3 reversals in 2 hours are not '36 a day'
    if span >= _DAY_S:
        return f"{float(one.reversals_per_day):.1f} a day"
    return f"in the run's {span / _HOUR_S:.3g} hour{'' if span == _HOUR_S else 's'}"


def flapping_warning(view: xr.Dataset, policy: str | None = None) -> str:
    """A sentence when the policy flaps (``view.flapping``), else ``""``.

    ``view`` is :func:`advise`'s or :func:`advisory`'s answer (then name the ``policy``).
    """
    one = _one_view(view, policy)
    if not bool(one.flapping):
        return ""
    name = policy or one.attrs.get("policy", "the policy")
    rate = _in_the_run(one)
    return (
        f"{name} flaps: {int(one.reversals)} direction reversals within "
        f"{one.attrs['window_s'] / 60:g} min of the scale event before "
        f"({rate}, {float(one.scale_events_per_hour):.1f} scale "
        f"events an hour); lengthen its scale-down window or raise its floor."
    )


def flapping_verdict(view: xr.Dataset, policy: str | None = None) -> str:
    """Whether the policy flaps, in one sentence: :func:`flapping_warning`'s, or that it does not.

    ``view`` and ``policy`` as :func:`flapping_warning` takes them. A calm run says its reversals
    as a day's rate, or, shorter than a day, as its count in the run's hours (one reversal in an
    hour is not '24.0 a day', which the 1-a-day limit would read as flapping).
    """
    one = _one_view(view, policy)
    if bool(one.flapping):
        return flapping_warning(view, policy)
    name = policy or one.attrs.get("policy", "the policy")
    if float(one.attrs.get("span_s", _DAY_S)) >= _DAY_S:
        return f"{name} does not flap: {float(one.reversals_per_day):.1f} reversals a day."
    flips = words.count(int(one.reversals), "direction reversal")
    return f"{name} does not flap: {flips} {_in_the_run(one)}."

"""The plan's policy chosen out of sample: rolling origins inside the user's own trace.

A policy chosen on the week it was fitted on keeps its promise on that week only. Here the plan
is rebuilt at every origin of the trace from the days before it alone (the forecast chosen and
calibrated on them, the burst-free fleet it implies), every configuration of the policy grid is
replayed on the window after it, and the configuration is chosen by how it did on such windows:

- *inner* windows (one unit each: a day, or an hour for a trace under eight days) after every
  origin ``j``, each replayed with the plan of its own origin; summed over spans as long as the
  held-out windows (cut where the history ends, as the trace's end cuts those), they are what the
  elasticity step chooses from (:func:`capnb.elasticity.choose_held_out`);
- *held-out* windows (``backtest_days``, or six hours for a short trace) after the last origins:
  at each, the choice made from the inner windows before it alone is scored on the window, beside
  the hindsight plan (the cheapest configuration of the same grid that met the budget there,
  knowing it, among those the plan's rules allow: :func:`eligible`), naive fixed fleets (last
  week's P99, the history's mean) and the instant-scaling lower bound. That is the plan's held-out record.

A configuration is transferable between origins: its floor is a share of the fleet the origin's
forecast needs at its busiest slot (:data:`FLOOR_SHARES`), not a count. Windows the trace does not
cover are left out of scoring and named; a window with holes is replayed on its observed stretches
only, each starting from the fleet its first step needs.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from .. import words
from ..units import instances_needed
from ..words import when
from ._config import PlanConfig

__all__ = ["FLOOR_SHARES", "Config", "Rolling", "rolling"]

_NS = 1_000_000_000
_DAY_NS = 86_400 * _NS
_HOUR_NS = 3_600 * _NS
#: Pool floors as shares of the fleet the origin's forecast needs at its busiest slot (0: one
#: instance). Shares above 1 leave room for growth the forecast did not see.
FLOOR_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25)
#: A trace shorter than this many days has hourly origins.
HOURLY_BELOW_DAYS = 8
#: The first origin: history enough for per-slot quantiles (2 days; a short trace: 1 day).
_FIRST = {"day": 2, "hour": 24}
#: A short trace's held-out windows (hours); held-out origins every so many hours.
SHORT_WINDOW_H = 6
#: Held-out windows at most (the last ones of the trace).
MOST_HELD_OUT = 7
#: A window observed for less than this share is left out of scoring (named).
MIN_OBSERVED = 0.5
#: The fewest consecutive observed steps replayed as a stretch (shorter ones are left out).
_MIN_STRETCH_S = 3600.0


@dataclass(frozen=True)
class Config:
    """One configuration of the policy grid, as it transfers between origins."""

    policy: str
    scale_up_threshold: float
    cooldown_s: float
    buffer_instances: int
    floor_share: float

    def floor(self, fleet: int) -> int:
        """The pool floor (instances) for a forecast that needs ``fleet`` at its busiest slot."""
        return max(1, math.ceil(self.floor_share * fleet - 1e-9))

    def utilisation(self, load: float, vetoed: bool = False) -> float:
        """The share of its closed-loop requests/s the configuration runs an instance up to.

        ``load``: the forecast's busiest slot in instances' closed-loop requests/s (its need over
        the per-instance rate, a fraction of one instance where the traffic is light); ``vetoed``:
        a cold start vetoes scale-ups (:func:`runs_up_to`). Its floor is ``floor_share`` times
        the whole instances that load needs, its warm spares beside it.
        """
        instances = self.floor(max(1, int(instances_needed(load, 1.0)))) + self.buffer_instances
        return runs_up_to(self.policy, self.scale_up_threshold, instances, load, vetoed)


def runs_up_to(policy: str, threshold: float, instances: int, load: float, vetoed: bool) -> float:
    """The share of its closed-loop requests/s a policy runs an instance up to: the one rule.

    An autoscaler runs an instance up to its scale-up threshold (HPA's and Knative's target
    utilisation). A fixed fleet, and the article's engine when a cold start vetoes its scale-ups
    (it never grows above its floor), serve the forecast's busiest slot on their ``instances``
    (the floor and warm spares: ready instances the replay serves on): ``load``, the slot's
    requests/s over one instance's closed-loop rate, spread over them (0.41 on 1 instance: 41 %).
    """
    if holds_fixed(policy, vetoed):
        return load / instances if instances > 0 else math.inf
    return threshold


def holds_fixed(policy: str, vetoed: bool) -> bool:
    """Whether ``policy`` serves on the instances it holds, never scaling up (see runs_up_to)."""
    return policy == "fixed" or (policy == "article" and vetoed)


def configs(cfg: PlanConfig) -> list[Config]:
    """The policy grid of a config: every policy x threshold x delay x spares x floor share.

    A fixed fleet has no threshold or delay, and its floor is the fleet: one configuration per
    floor share of 1 or more (a fixed fleet below the forecast's need is no plan), with the
    fewest spares swept (its floor shares size it; a spare count the sweep lacks has no cell).
    """
    out, grid = [], cfg.elasticity
    for policy in grid.policies:
        if policy == "fixed":
            spares = min(grid.buffer_instances)
            out += [Config("fixed", grid.scale_up_threshold[0], grid.cooldown_s[0], spares, share)
                    for share in FLOOR_SHARES if share >= 1]  # fmt: skip
            continue
        for up, down, spare, share in itertools.product(
            cfg.elasticity.scale_up_threshold,
            cfg.elasticity.cooldown_s,
            cfg.elasticity.buffer_instances,
            FLOOR_SHARES,
        ):
            out.append(Config(policy, float(up), float(down), int(spare), float(share)))
    return out


# -- origins and windows ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Origins:
    """Where the trace is cut: units from its first midnight, inner and held-out origins."""

    start: np.datetime64  # midnight before the first observed interval
    unit: str  # "day" or "hour"
    unit_ns: int
    units: int  # whole or partial units the trace spans
    inner: tuple[int, ...]  # inner origins (unit index), each scored on one unit
    held_out: tuple[int, ...]  # held-out origins (unit index)
    window_units: int  # a held-out window's length in units
    span_h: float  # h from the first interval's start to the last interval's end

    def time(self, unit: float) -> np.datetime64:
        return self.start + np.timedelta64(round(unit * self.unit_ns), "ns")


def origins_of(series: xr.Dataset, window_days: int) -> Origins | str:
    """The origins of a series, or why it has none (too short to leave a scored window)."""
    times = series.time.values.astype("datetime64[ns]")
    start = times[0].astype("datetime64[D]").astype("datetime64[ns]")
    interval_ns = int(float(series.attrs.get("interval_s", 600)) * _NS)
    span_ns = int((times[-1] - start) / np.timedelta64(1, "ns")) + interval_ns
    own_h = (int((times[-1] - times[0]) / np.timedelta64(1, "ns")) + interval_ns) / _HOUR_NS
    days = span_ns / _DAY_NS
    unit = "day" if days >= HOURLY_BELOW_DAYS else "hour"
    unit_ns = _DAY_NS if unit == "day" else _HOUR_NS
    units = math.ceil(span_ns / unit_ns - 1e-9)
    first = _FIRST[unit]
    window = window_days if unit == "day" else SHORT_WINDOW_H
    step = 1 if unit == "day" else SHORT_WINDOW_H
    # held-out origins: the last ones that leave a window and some inner windows before them; a
    # short trace's windows follow one another, lined up on its end so that each is whole (counted
    # back from its last hour, the last window was that hour alone, or nothing where a request log
    # ends a second short of it); daily ones overlap, one from each of the last days
    earliest = first + 3
    last = units - window if unit == "hour" else units - 1
    held = list(range(last, earliest - 1, -step))[:MOST_HELD_OUT][::-1]
    if not held:
        counted = "" if round(own_h / 24, 1) == round(days, 1) else (
            f" ({days:.1f} from the midnight before it)"
        )  # fmt: skip
        return (
            f"the trace spans {own_h / 24:.1f} days{counted}: too short to leave a held-out "
            f"window{f' of {window} hours' if unit == 'hour' else ''} after {earliest} {unit}s "
            "of history"
        )
    inner = tuple(range(first, units))
    return Origins(start, unit, unit_ns, units, inner, tuple(held), window, own_h)


# -- one origin: the plan on the history before it ------------------------------------------------
@dataclass
class Fit:
    """The forecast an origin's plan rests on, from the history before it alone."""

    target: xr.DataArray  # requests/s over (slot, traffic_quantile)
    baseline: xr.Dataset  # the same as a baseline (the predictive policy reads its median)
    fleet: int  # instances the busiest slot needs at the plan's quantile
    model: str  # the forecast used, in words
    need: float = math.nan  # the busiest slot's requests/s at the plan's quantile


def fit_at(cfg: PlanConfig, series: xr.Dataset, at: np.datetime64, per_instance: float) -> Fit:
    """The forecast of the history before ``at``, as the plan would have made it there."""
    from .. import forecast

    history = series.isel(time=np.flatnonzero(series.time.values < at))
    quantiles = tuple(sorted({0.5, 0.95, 0.99, float(cfg.traffic.traffic_quantile)}))
    carried = forecast.carry(history, slots=cfg.traffic.slots, quantile=cfg.traffic.traffic_quantile,
                             growth_model=cfg.traffic.growth_model)  # fmt: skip
    baseline = forecast.fit_baseline(carried, slots=cfg.traffic.slots, quantiles=quantiles)
    target = baseline.target_qps
    need = float(target.sel(traffic_quantile=cfg.traffic.traffic_quantile).max())
    fleet = max(1, int(instances_needed(need, per_instance))) if np.isfinite(need) else 1
    return Fit(target, baseline, fleet,
               str(carried.attrs.get("growth_model", cfg.traffic.growth_model)), need)  # fmt: skip


# -- replaying a window -----------------------------------------------------------------------------
@dataclass
class Replay:
    """Every configuration replayed on one window: metrics per configuration, with units."""

    breach_s: np.ndarray  # s in SLA breach
    usd: np.ndarray  # USD (GPU-hours x price; NaN without a price)
    gpu_hours: np.ndarray  # GPU·h
    unserved: np.ndarray  # requests dropped or left waiting
    observed_s: float  # seconds of the window the trace covers (what was replayed)
    span_s: float  # seconds of the window
    floors: dict = field(default_factory=dict)  # floor share -> instances at this origin


def _stretches(observed: np.ndarray, least: int) -> list[tuple[int, int]]:
    """Runs of observed steps at least ``least`` long: ``(start, stop)`` step indexes."""
    edges = np.diff(np.r_[0, observed.astype(np.int8), 0])
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(a, b) for a, b in zip(starts, stops, strict=True) if b - a >= least]


def replay(cfg, demand, observed, fit: Fit, grid: list[Config], settings: dict) -> Replay:
    """Every configuration of ``grid`` on ``demand`` (one window), its observed stretches only."""
    from .. import elasticity

    n = len(grid)
    out = Replay(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), 0.0,
                 demand.size * cfg.elasticity.step_s)  # fmt: skip
    floors = {share: Config("", 0, 0, 0, share).floor(fit.fleet) for share in FLOOR_SHARES}
    out.floors = floors
    least = max(1, round(_MIN_STRETCH_S / cfg.elasticity.step_s))
    # each configuration's labels, one vectorised .sel a stretch (a .sel per configuration cost
    # a millisecond each, tens of thousands in a plan's rolling origins)
    labels = {"policy": [c.policy for c in grid],
              "scale_up_threshold": [c.scale_up_threshold for c in grid],
              "cooldown_s": [c.cooldown_s for c in grid],
              "buffer_instances": [c.buffer_instances for c in grid],
              "min_instances": [floors[c.floor_share] for c in grid]}  # fmt: skip
    for a, b in _stretches(observed, least):
        part = demand.isel(time=slice(a, b))
        out.observed_s += (b - a) * cfg.elasticity.step_s
        # a slot the history never observed has no forecast: the predictive policy reads none
        ahead = elasticity.forecast_demand(part, fit.baseline).fillna(0.0)
        scaling = cfg.elasticity
        swept = elasticity.sweep(
            part, policy=list(scaling.policies), scale_up_threshold=list(scaling.scale_up_threshold),
            cooldown_s=list(scaling.cooldown_s), buffer_instances=list(scaling.buffer_instances),
            min_instances=sorted(set(floors.values())), forecast=ahead, **settings,
        )  # fmt: skip
        at = {d: xr.DataArray(v, dims="config") for d, v in labels.items() if d in swept.dims}
        cells = swept[[v for v in ("breach_s", "gpu_hours", "usd", "unserved") if v in swept]]
        cells = cells.sel(at)
        out.breach_s += cells.breach_s.values
        out.gpu_hours += cells.gpu_hours.values
        out.usd += cells.usd.values if "usd" in cells else math.nan
        out.unserved += cells.unserved.values
    return out


# -- the whole rolling evaluation -------------------------------------------------------------------
@dataclass
class Rolling:
    """The choice made out of sample, and its record on held-out windows."""

    grid: list[Config]
    origins: Origins
    choice: Config  # from every inner window of the trace: what the plan deploys
    choice_why: str  # the rule's outcome in words
    table: xr.Dataset  # per held-out origin and plan: breach, cost, bounds, forecast figures
    left_out: list[str]  # windows not scored, each with why


def _observed_steps(series: xr.Dataset, times: np.ndarray) -> np.ndarray:
    """Whether each simulation step falls in an observed interval of the forecast series."""
    interval = np.timedelta64(round(float(series.attrs.get("interval_s", 600)) * _NS), "ns")
    starts = series.time.values.astype("datetime64[ns]")
    index = np.searchsorted(starts, times, side="right") - 1
    ok = (index >= 0) & (times < starts[np.clip(index, 0, None)] + interval)
    present = np.isfinite(series.qps.values)
    return ok & present[np.clip(index, 0, None)]


def _observed_share(seen: np.ndarray) -> float:
    """Share of a window's steps observed; 0 for a window past the demand's end (no steps)."""
    return float(seen.mean()) if seen.size else 0.0


def _window(demand, observed_all, origins: Origins, first_unit: float, units: float):
    a, b = origins.time(first_unit), origins.time(min(first_unit + units, origins.units))
    times = demand.time.values
    pick = np.flatnonzero((times >= a) & (times < b))
    return demand.isel(time=pick), observed_all[pick]


def rolling(cfg: PlanConfig, series: xr.Dataset, demand: xr.DataArray, settings: dict,
            chooser, headroom: float | None = None,
            load: float | None = None) -> Rolling | str:  # fmt: skip
    """The rolling-origin choice and record (see the module), or why the trace has none.

    ``settings``: the simulator's (per-instance requests/s, cold start, price, ...);
    ``chooser(breach_s, budget_s, cost, eligible, windows=...)``: the elasticity step's rule,
    indexes of windows x configurations in, the chosen configuration's index and its words out
    (``windows``: what the windows are called in them);
    ``headroom``: the share of the per-instance rate an instance serves within the SLA under
    Poisson arrivals (:func:`capnb.capacity.arrivals`), or None (not simulated), and ``load``
    the forecast's busiest slot in instances' closed-loop requests/s: see :func:`eligible`. The
    deployed choice reads ``load``; each held-out origin's reads the busiest slot of the forecast
    made at it, from the history before it.
    """
    origins = origins_of(series, cfg.elasticity.backtest_days)
    if isinstance(origins, str):
        return origins
    grid = configs(cfg)
    per_instance = float(settings["per_instance_qps"])
    observed_all = _observed_steps(series, demand.time.values)
    fits = {}

    def fit(unit: int) -> Fit:
        if unit not in fits:
            fits[unit] = fit_at(cfg, series, origins.time(unit), per_instance)
        return fits[unit]

    inner, left_out = {}, []
    for j in origins.inner:
        window, seen = _window(demand, observed_all, origins, j, 1)
        if (share := _observed_share(seen)) < MIN_OBSERVED:
            left_out.append(f"{origins.unit} from {when(origins.time(j))}: observed {share:.0%}")
            continue
        inner[j] = replay(cfg, window, seen, fit(j), grid, settings)
    allowed = eligible(grid, settings, cfg, headroom, load)
    rows, replays = [], []
    for k in origins.held_out:
        spans = _spans(inner, k, origins.window_units, cfg)
        if spans is None:
            left_out.append(
                f"held-out origin {when(origins.time(k))}: fewer than 2 inner windows before it"
            )
            continue
        # the arrivals rule reads the load the forecast made at the origin knew, not the trace's
        allowed_k = (allowed if headroom is None
                     else eligible(grid, settings, cfg, headroom, fit(k).need / per_instance))  # fmt: skip
        chosen, _ = chooser(*spans, allowed_k)
        window, seen = _window(demand, observed_all, origins, k, origins.window_units)
        if (share := _observed_share(seen)) < MIN_OBSERVED:
            left_out.append(f"held-out window from {when(origins.time(k))}: observed {share:.0%}")
            continue
        scored = replay(cfg, window, seen, fit(k), grid, settings)
        if scored.observed_s == 0:  # e.g. a request log's last hour, a second short of one
            left_out.append(
                f"held-out window from {when(origins.time(k))}: no observed stretch of "
                f"{_MIN_STRETCH_S / 60:.0f} minutes to replay"
            )
            continue
        replays.append(scored)
        rows.append(_row(cfg, series, demand, window, seen, origins, k, fit(k), grid, chosen,
                         scored, settings, allowed_k))  # fmt: skip
        if rows[-1]["unplanned"]:
            left_out.append(
                f"held-out window from {when(origins.time(k))}: {rows[-1]['unplanned']} "
                "intervals in slots the history before it never saw, left out of its forecast's "
                "coverage (no forecast there)"
            )
    if not inner:
        return "no inner window of the trace is observed for half its length or more"
    # the deployed choice: made on every window of the trace, none of them held out from it
    choice, why = chooser(*_spans(inner, origins.units, origins.window_units, cfg), allowed,
                          windows="windows of the trace it was chosen on")  # fmt: skip
    if rows:  # the price of the goal: one configuration for every held-out window, in hindsight
        _steady(rows, replays, grid, cfg, allowed)
    table = _table(rows, cfg) if rows else None
    if table is None:
        return "no held-out window could be scored: " + "; ".join(left_out)
    return Rolling(grid, origins, grid[choice], why, table, left_out)


def eligible(grid: list[Config], settings: dict, cfg: PlanConfig,
             headroom: float | None = None, load: float | None = None) -> np.ndarray:  # fmt: skip
    """The configurations the plan's rules allow, a mask over ``grid``.

    - The article's cold-start rule: where a cold start is too long to react in time, only
      capacity that needs none (a fixed fleet, a floor or warm spares); and the article's own
      engine, which then never scales up, only at a floor share of 1 or more: below the
      forecast's need it is a fixed fleet too small, which :func:`configs` leaves out for
      ``fixed`` as well.
    - Arrivals: where ``headroom`` is known, only configurations that run an instance up to that
      share of its closed-loop requests/s (:meth:`Config.utilisation` at ``load``, the forecast's
      busiest slot in instances' closed-loop requests/s; the article's engine with its
      scale-ups vetoed runs its floor as a fixed fleet does): above it, Poisson
      arrivals swing the instance past its SLA. When no configuration the cold-start rule allows
      is within it, this rule is not applied, and the plan's ``arrivals`` check says so.
    """
    from .. import elasticity

    allowed = np.ones(len(grid), bool)
    vetoed = elasticity.cold_start_vetoes(
        float(settings["cold_start_s"]), cfg.elasticity.tolerance_s
    )
    if vetoed:
        # a cold start too long to react in time: capacity that needs no cold start
        allowed = np.array([_holds_without_scaling_up(c) for c in grid])
    if headroom is not None:
        if load is None:
            raise ValueError("eligible: a headroom needs the forecast's load (instances)")
        runs_to = np.array([c.utilisation(load, vetoed) for c in grid])
        within = allowed & (runs_to <= headroom + 1e-9)
        if within.any():
            allowed = within
    return allowed


def _holds_without_scaling_up(config: Config) -> bool:
    """Whether ``config`` serves a burst when no scale-up arrives in time (a vetoing cold start).

    A fixed fleet holds the forecast's need (:func:`configs`); the article's engine vetoes its
    own scale-ups, so it must hold that need as its floor; the other policies still scale up,
    late, above a floor or warm spares.
    """
    if config.policy == "fixed":
        return True
    if config.policy == "article":
        return config.floor_share >= 1
    return config.floor_share > 0 or config.buffer_instances > 0


def _cost(replay: Replay) -> np.ndarray:
    return replay.usd if np.isfinite(replay.usd).all() else replay.gpu_hours


def _spans(inner: dict, until: int, width: int, cfg: PlanConfig):
    """The inner windows before ``until``, grouped as held-out windows are.

    ``width`` units from each origin, cut at ``until`` (as the trace's end cuts the last held-out
    windows). Each unit was replayed with the plan of its own origin; a span sums its units' breach, budget
    and cost. None when fewer than two units come before ``until``.
    """
    units = sorted(j for j in inner if j < until)
    if len(units) < 2:
        return None
    spans = [[d for d in units if j <= d < min(j + width, until)] for j in units]
    breach = np.stack([sum(inner[d].breach_s for d in span) for span in spans])
    budget = np.array(
        [cfg.elasticity.breach_budget * sum(inner[d].observed_s for d in span) for span in spans]
    )
    cost = np.stack([sum(_cost(inner[d]) for d in span) for span in spans])
    return breach, budget, cost


# -- the held-out table ------------------------------------------------------------------------------
PLANS = ("recommended", "hindsight", "steady-hindsight", "naive-last-week", "naive-mean",
         "instant-bound")  # fmt: skip


def _steady(rows: list[dict], replays: list[Replay], grid, cfg: PlanConfig, allowed) -> None:
    """Add the *steady-hindsight* plan to each row: the price of the goal, known afterwards.

    The one configuration of the grid that, knowing every held-out window, kept its budget in 90 %
    of them at the least cost: what a choice made before the windows tries to meet. Chosen among
    the configurations the plan's rules allow (``allowed``, :func:`eligible`), as the plan's is.
    """
    from .. import elasticity

    breach = np.stack([r.breach_s for r in replays])
    budget = np.array([cfg.elasticity.breach_budget * r.observed_s for r in replays])
    cost = np.stack([_cost(r) for r in replays])
    i, _ = elasticity.choose_held_out(breach, budget, cost, allowed, margin=1.0)
    for row, r in zip(rows, replays, strict=True):
        row["breach_min"]["steady-hindsight"] = r.breach_s[i] / 60
        row["usd"]["steady-hindsight"] = r.usd[i]
        row["gpu_hours"]["steady-hindsight"] = r.gpu_hours[i]
        row["steady"] = (
            f"{grid[i].policy} (floor share {grid[i].floor_share:g}, "
            f"{words.count(grid[i].buffer_instances, 'spare')})"
        )


def _fixed(cfg, window, seen, size: int, settings: dict) -> tuple[float, float, float]:
    """A fixed fleet of ``size`` on the window's observed stretches: breach s, USD, GPU-hours."""
    from .. import elasticity

    breach = usd = hours = 0.0
    least = max(1, round(_MIN_STRETCH_S / cfg.elasticity.step_s))
    plain = {k: v for k, v in settings.items() if k != "forecast"}
    for a, b in _stretches(seen, least):
        run = elasticity.sweep(window.isel(time=slice(a, b)), policy="fixed", min_instances=[size],
                               **plain)  # fmt: skip
        breach += float(run.breach_s.sum())
        hours += float(run.gpu_hours.sum())
        usd += float(run.usd.sum()) if "usd" in run else math.nan
    return breach, usd, hours


def _bound(cfg, window, seen, settings) -> tuple[float, float]:
    """The instant-scaling lower bound: GPU-hours if every instance started at once, and USD."""
    values = window.values[seen]
    instances = instances_needed(values, float(settings["per_instance_qps"]))
    from .. import data

    hours = (
        float(instances.sum()) * cfg.elasticity.step_s / 3600 * int(settings["gpus_per_instance"])
    )
    price = float(data.load_gpus([settings["gpu"]]).usd_per_gpu_hour.item())
    return hours, hours * price


def _coverage(series, fit: Fit, a, b, cfg) -> tuple[float, float, float, float, int, int]:
    """The origin's forecast on its window.

    P95, P99 and the plan's quantile's coverage, over-provisioning vs hindsight, the observed
    intervals they count, and the observed intervals left out: those in slots the history before
    the origin never saw, which its forecast does not plan (NaN, not a miss).
    """
    from .. import forecast

    part = series.isel(time=np.flatnonzero((series.time.values >= a) & (series.time.values < b)))
    rates = part.qps.values
    ok = np.isfinite(rates)
    codes = forecast.slot_codes(part.time.values, forecast.slots(cfg.traffic.slots))[ok]
    rates = rates[ok]
    q = float(cfg.traffic.traffic_quantile)
    known = np.isfinite(fit.target.sel(traffic_quantile=q).values)
    known = known[fit.target.get_index("slot").get_indexer(codes)]
    unplanned = int((~known).sum())
    codes, rates = codes[known], rates[known]
    if rates.size == 0:
        return math.nan, math.nan, math.nan, math.nan, 0, unplanned
    planned = fit.target.sel(slot=xr.DataArray(codes, dims="i"))
    cover = {
        p: float((rates <= planned.sel(traffic_quantile=p).values).mean())
        for p in sorted({0.95, 0.99, q})
    }
    plan = planned.sel(traffic_quantile=q).values
    hindsight = np.array([np.quantile(rates[codes == c], q) for c in codes])
    excess = np.clip(plan - rates, 0, None).sum()
    ideal = np.clip(hindsight - rates, 0, None).sum()
    over = float(excess / ideal) if ideal > 0 else math.nan
    return cover[0.95], cover[0.99], cover[q], over, int(rates.size), unplanned


def _row(cfg, series, demand, window, seen, origins, k, fit: Fit, grid, chosen, scored, settings,
         allowed):  # fmt: skip
    """One held-out window's row; the hindsight plan is among the ``allowed`` configurations."""
    budget = cfg.elasticity.breach_budget * scored.observed_s
    cost = scored.usd if np.isfinite(scored.usd).all() else scored.gpu_hours
    ok = (scored.breach_s <= budget) & allowed
    hindsight = (
        int(np.argmin(np.where(ok, cost, np.inf)))
        if ok.any()
        else int(np.argmin(np.where(allowed, scored.breach_s, np.inf)))
    )
    a, b = origins.time(k), origins.time(min(k + origins.window_units, origins.units))
    history = series.isel(time=np.flatnonzero(series.time.values < a))
    last_week = history.isel(
        time=np.flatnonzero(history.time.values >= a - np.timedelta64(7 * _DAY_NS, "ns"))
    )
    per = float(settings["per_instance_qps"])
    # under a week before the origin, "last week" is the whole history
    naive_days = min(7.0, float((a - history.time.values[0]) / np.timedelta64(_DAY_NS, "ns")))
    sizes = {
        "naive-last-week": max(
            1, int(instances_needed(float(np.nanquantile(last_week.qps.values, 0.99)), per))
        ),
        "naive-mean": max(1, int(instances_needed(float(np.nanmean(history.qps.values)), per))),
    }
    naive = {name: _fixed(cfg, window, seen, size, settings) for name, size in sizes.items()}
    bound_hours, bound_usd = _bound(cfg, window, seen, settings)
    p95, p99, planned, over, counted, unplanned = _coverage(series, fit, a, b, cfg)
    c = grid[chosen]
    return {
        "origin": a,
        "window_days": scored.observed_s / 86400,
        "budget_min": budget / 60,
        "forecast": fit.model,
        "coverage_p95": p95,
        "coverage_p99": p99,
        "coverage_plan": planned,
        "coverage_intervals": counted,
        "overprovision_ratio": over,
        "policy": c.policy,
        "floor_share": c.floor_share,
        "min_instances": c.floor(fit.fleet),
        "buffer_instances": c.buffer_instances,
        "scale_up_threshold": c.scale_up_threshold,
        "cooldown_s": c.cooldown_s,
        "breach_min": {
            "recommended": scored.breach_s[chosen] / 60,
            "hindsight": scored.breach_s[hindsight] / 60,
            **{n: v[0] / 60 for n, v in naive.items()},
            "instant-bound": 0.0,
        },
        "usd": {
            "recommended": scored.usd[chosen],
            "hindsight": scored.usd[hindsight],
            **{n: v[1] for n, v in naive.items()},
            "instant-bound": bound_usd,
        },
        "gpu_hours": {
            "recommended": scored.gpu_hours[chosen],
            "hindsight": scored.gpu_hours[hindsight],
            **{n: v[2] for n, v in naive.items()},
            "instant-bound": bound_hours,
        },
        "hindsight": (
            f"{grid[hindsight].policy} (floor {grid[hindsight].floor(fit.fleet)}, "
            f"{words.count(grid[hindsight].buffer_instances, 'spare')})"
        ),
        "observed_share": float(seen.mean()),
        "unplanned": unplanned,
        "naive_days": naive_days,
    }


def _table(rows: list[dict], cfg: PlanConfig) -> xr.Dataset:
    origin = np.array([r["origin"] for r in rows], dtype="datetime64[ns]")
    plans = list(PLANS)

    def per_plan(key):
        return np.array([[r[key][p] for p in plans] for r in rows], dtype=float)

    scalar = {
        "window_days": ("d", "days of the window the trace covers (what was scored)"),
        "budget_min": ("min", "the breach budget of the window"),
        "coverage_p95": ("1", "share of the window's intervals within the forecast's P95"),
        "coverage_p99": ("1", "share of the window's intervals within the forecast's P99"),
        "coverage_plan": (
            "1",
            "share of the window's intervals within the forecast at the plan's quantile",
        ),
        "coverage_intervals": ("1", "observed intervals of the window the coverage counts"),
        "overprovision_ratio": ("1", "the forecast's capacity above demand over hindsight's"),
        "floor_share": ("1", "the chosen floor as a share of the forecast's busiest-slot fleet"),
        "min_instances": ("instances", "the chosen pool floor"),
        "buffer_instances": ("instances", "the chosen warm spares"),
        "scale_up_threshold": ("1", "the chosen scale-up threshold or target utilisation"),
        "cooldown_s": ("s", "the chosen scale-down window"),
        "observed_share": ("1", "share of the window the trace covers"),
        "naive_days": ("d", "days of history last week's fixed fleet was sized on (7 at most)"),
    }
    data = {
        name: ("origin", np.array([r[name] for r in rows], dtype=float),
               {"units": u, "long_name": m})
        for name, (u, m) in scalar.items()
    }  # fmt: skip
    for name, text in (("forecast", "the forecast the origin's plan rests on"),
                       ("policy", "the policy chosen from the windows before the origin"),
                       ("hindsight", "the hindsight plan's policy, floor and spares"),
                       ("steady", "the steady-hindsight configuration")):  # fmt: skip
        data[name] = ("origin", np.array([r[name] for r in rows], dtype=str), {"long_name": text})
    data["breach_min"] = (("origin", "plan"), per_plan("breach_min"),
                          {"units": "min", "long_name": "minutes in SLA breach"})  # fmt: skip
    data["usd"] = (("origin", "plan"), per_plan("usd"), {"units": "USD", "long_name": "cost"})
    data["gpu_hours"] = (("origin", "plan"), per_plan("gpu_hours"),
                         {"units": "GPU·h", "long_name": "GPU time"})  # fmt: skip
    table = xr.Dataset(data, coords={
        "origin": ("origin", origin, {"units": "datetime64",
                                      "long_name": "held-out origin: planned on the trace before it"}),
        "plan": ("plan", plans, {"long_name": "plan replayed on the held-out window"}),
    })  # fmt: skip
    budget = table.budget_min
    table["meets_budget"] = (table.breach_min <= budget + 1e-9).assign_attrs(
        units="1", long_name="minutes in breach within the window's budget"
    )
    cost = (
        table.usd if bool(np.isfinite(table.usd.sel(plan="recommended")).all()) else table.gpu_hours
    )
    table["above_hindsight"] = (cost / cost.sel(plan="hindsight") - 1).assign_attrs(
        units="1", long_name="cost above the hindsight plan's, as a share of it"
    )
    rec = table.sel(plan="recommended")
    naive = table.sel(plan="naive-last-week")
    table["beats_naive"] = (
        (cost.sel(plan="recommended") < cost.sel(plan="naive-last-week"))
        | (rec.breach_min < naive.breach_min)
    ).assign_attrs(units="1", long_name="cheaper than, or less in breach than, last week's fleet")
    same = np.isclose(cost.sel(plan="recommended"), cost.sel(plan="naive-last-week")) & np.isclose(
        rec.breach_min, naive.breach_min
    )
    table["ties_naive"] = xr.DataArray(same, dims=("origin",)).assign_attrs(
        units="1", long_name="as costly and as much in breach as last week's fleet"
    )
    return table


#: Burst draws of the held-out record (each a replay of the last held-out window with bursts).
BURST_DRAWS = 100


def held_out_bursts(cfg, record: Rolling, demand, series, model, settings: dict,
                    draws: int = BURST_DRAWS) -> tuple[float, int, bool]:  # fmt: skip
    """Share of burst draws in which the choice kept its budget on the first full held-out window.

    The window is replayed again ``draws`` times with bursts drawn from the plan's burst
    ``model`` (seeded by the config's ``seed``), with the configuration chosen at that origin
    from the windows before it and the fleet of that origin's forecast; the window's holes are
    filled with that forecast's slot medians (the history before the window), not the trace's.
    A model fitted to the trace (``bursts = "fit"``) is fitted again on the history before the
    window alone. ``(share, draws, held)``: ``held``, whether the window kept its budget without
    a burst (a draw without one is that replay, so when it did not, no draw can).
    """
    from .. import elasticity
    from ..elasticity._simulate import _kernel_inputs
    from ..kernels import autoscale as kernels
    from ._draws import burst_factors, burst_holds

    table, origins = record.table, record.origins
    last = int(np.argmax(table.window_days.values))  # the longest (the first full) window
    at = table.origin.values[last]
    k = round(int((at - origins.start) / np.timedelta64(1, "ns")) / origins.unit_ns)
    fit = fit_at(cfg, series, at, float(settings["per_instance_qps"]))
    if cfg.traffic.bursts == "fit":  # fitted on the history before the window, as its forecast
        from ._draws import burst_model

        model = burst_model(cfg, series.isel(time=np.flatnonzero(series.time.values < at)))
    window, _ = _window(demand, np.ones(demand.size, bool), origins, k, origins.window_units)
    # the trace's holes hold its whole-history slot medians: here, the median before the window
    seen = _observed_steps(series, window.time.values)
    median = elasticity.forecast_demand(window, fit.baseline, quantile=0.5)
    window = window.where(seen, median.values)
    chosen = table.isel(origin=last)
    run = {"policy": str(chosen.policy.item()),
           "scale_up_threshold": float(chosen.scale_up_threshold),
           "cooldown_s": float(chosen.cooldown_s), "min_instances": int(chosen.min_instances),
           "buffer_instances": int(chosen.buffer_instances)}  # fmt: skip

    class _Cell:  # what burst_holds reads of the observed replay
        breach_share = (
            float(chosen.breach_min.sel(plan="recommended"))
            * 60
            / (float(chosen.window_days) * 86400)
        )

    ahead = elasticity.forecast_demand(window, fit.baseline).fillna(0.0)
    factors = burst_factors(model, window.size, cfg.elasticity.step_s, draws, cfg.traffic.seed)
    share = burst_holds([("recommended", run, _Cell)], factors, window, ahead, settings, cfg,
                         model, _kernel_inputs, kernels)["recommended"]  # fmt: skip
    held = _Cell.breach_share <= cfg.elasticity.breach_budget
    return float(share), int(draws), bool(held)

"""The plan's backtest: built on one window of the trace, replayed on a later one.

:func:`run_backtest` takes the plan builder as an argument (``capnb.plan._build`` passes its own),
so that this module does not import the module that imports it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import xarray as xr

from .. import glossary, words
from ..errors import InputError
from ..units import instances_needed
from ._config import PlanConfig
from ._draws import burst_factors, burst_holds
from ._steps import chosen_policy, predictive_forecast, served_demand

_DAY_NS = 86_400 * 1_000_000_000

#: The rows of a backtest's table, in order.
PLANS = ("recommended", "hindsight", "naive-mean", "naive-last", "fixed-plan")

_MEANING = {
    "recommended": "the plan built on the fit window",
    "hindsight": "the cheapest run of the policy grid that met the breach budget on the score window",
    "naive-mean": "a fixed fleet for the fit window's mean rate",
    "naive-last": "a fixed fleet for the fit window's last interval's rate",
    "fixed-plan": "the plan's own fixed fleet (its busiest slot's target), no elasticity",
}


# -- windows --------------------------------------------------------------------------------------
def _times(source: xr.Dataset) -> np.ndarray:
    return np.asarray(source.time.values)


def _bound(value, origin: np.datetime64, name: str) -> np.datetime64:
    if isinstance(value, bool):
        raise InputError(f"{name}: a window bound is a whole day or a date, got {value!r}")
    if isinstance(value, int | np.integer):
        return origin + np.timedelta64(int(value) * _DAY_NS, "ns")
    try:
        return np.datetime64(value, "ns")
    except (TypeError, ValueError) as error:
        raise InputError(
            f"{name}: a window bound is a whole day (int) or a date and time, got {value!r}"
        ) from error


def _window(source: xr.Dataset, window, name: str) -> tuple[np.datetime64, np.datetime64]:
    if not isinstance(window, slice) or window.step is not None:
        raise InputError(
            f"{name} must be a slice(start, stop) of whole days or of dates, got {window!r}"
        )
    if window.start is None or window.stop is None:
        raise InputError(f"{name}: give both ends, e.g. slice(0, 7), got {window!r}")
    times = _times(source)
    if times.dtype.kind != "M":
        raise InputError(f"{name}: the trace has no dates to cut windows from")
    origin = times.min()
    start, stop = _bound(window.start, origin, name), _bound(window.stop, origin, name)
    if not start < stop:
        raise InputError(f"{name}: its start {start} is not before its stop {stop}")
    inside = (times >= start) & (times < stop)
    if not inside.any():
        raise InputError(
            f"{name}: no traffic between {start} and {stop} (the trace runs from {times.min()} to "
            f"{times.max()})"
        )
    return start, stop


def windows_of(source: xr.Dataset, fit, score):
    """``fit`` and ``score`` as (start, stop) datetimes: non-empty, ``score`` after ``fit``.

    The plan forecasts the days after its history, so a score window before the fit window (or
    overlapping it) is not held out.
    """
    fit_window, score_window = _window(source, fit, "fit"), _window(source, score, "score")
    if fit_window[0] < score_window[1] and score_window[0] < fit_window[1]:
        raise InputError(
            f"fit {fit!r} and score {score!r} overlap: the plan would be scored on traffic it saw"
        )
    if score_window[0] < fit_window[1]:
        raise InputError(
            f"score {score!r} starts at {score_window[0]}, before the fit window ends at "
            f"{fit_window[1]}: the plan forecasts the days after its history, so a window before "
            "it is not held out; score a later window"
        )
    return fit_window, score_window


def held_out_windows(source: xr.Dataset, days: int):
    """The last ``days`` whole days of the trace as the score window, the days before as fit.

    Days run midnight to midnight on the trace's clock (a request log's first request is rarely
    at 00:00). None when the trace has no whole day before them (no backtest then).
    """
    times = _times(source)
    if times.dtype.kind != "M":
        return None
    origin, end = times.min().astype("datetime64[D]").astype(times.dtype), times.max()
    span_days = int((end - origin) // np.timedelta64(_DAY_NS, "ns")) + 1
    if span_days <= days:
        return None
    start = origin + np.timedelta64((span_days - days) * _DAY_NS, "ns")
    return (origin, start), (start, origin + np.timedelta64(span_days * _DAY_NS, "ns"))


def _cut(source: xr.Dataset, window) -> xr.Dataset:
    times = _times(source)
    inside = np.flatnonzero((times >= window[0]) & (times < window[1]))
    return source.isel({source.time.dims[0]: inside})


# -- bursts ---------------------------------------------------------------------------------------
# -- the replay -----------------------------------------------------------------------------------
def run_backtest(cfg: PlanConfig, source, fit_window, score_window, *, builder, draws: int = 100):
    """The backtest table (see :func:`capnb.plan.backtest`); ``builder(cfg, source)`` builds a plan."""
    from .. import elasticity
    from ..elasticity._simulate import _kernel_inputs
    from ..kernels import autoscale as kernels

    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 0:
        raise InputError(f"draws must be a whole number >= 0, got {draws!r}")
    with warnings.catch_warnings():  # the plan's checks are about the fit window, not news here
        warnings.simplefilter("ignore", UserWarning)
        _, parts = builder(
            cfg.replace(elasticity={"backtest_days": 0}, serving={"disaggregation": "none"}),
            _cut(source, fit_window),
        )
    fc, advice, chosen = parts["fc"], parts["advice"], parts["chosen"]
    per_instance = float(chosen.per_instance_qps)
    demand = elasticity.prepare_demand(
        _cut(source, score_window),
        cfg.elasticity.step_s,
        baseline=fc,
        scale=cfg.traffic.demand_scale,
    )
    if "request" in source.dims:  # a log is idle before its window's first request, after its last
        demand = _over_window(demand, score_window, cfg.elasticity.step_s)
    demand = served_demand(demand, chosen)
    ahead = predictive_forecast(demand, fc)
    settings = dict(
        per_instance_qps=per_instance,
        step_s=cfg.elasticity.step_s,
        cold_start_s=parts["cold"],
        tolerance_s=cfg.elasticity.tolerance_s,
        gpus_per_instance=parts["tp"],
        gpu=parts["gpu"],
    )
    chosen_run = {"policy": str(cfg.elasticity.policies[0]), **advice.selection}
    grid = elasticity.policy_grid(
        demand,
        per_instance,
        scale_up_threshold=list(cfg.elasticity.scale_up_threshold),
        cooldown_s=list(cfg.elasticity.cooldown_s),
        buffer_instances=list(cfg.elasticity.buffer_instances),
    )
    # the recommended run is one of the hindsight candidates: hindsight is never dearer within budget
    grid["min_instances"] = sorted({*grid["min_instances"], int(chosen_run["min_instances"])})
    policies = list(dict.fromkeys([*cfg.elasticity.policies, chosen_run["policy"]]))
    sweep = elasticity.sweep(demand, policy=policies, **grid, **settings, forecast=ahead)
    cost = "usd" if "usd" in sweep else "gpu_hours"
    hindsight = elasticity.choose(sweep, breach_budget=cfg.elasticity.breach_budget, cost=cost)
    if hindsight is None:
        hindsight = elasticity.least_breach(sweep, cost=cost)
    runs = {"recommended": chosen_run, "hindsight": hindsight}

    # naive fixed fleets
    fit_demand = parts["demand"]
    interval = max(
        1, round(float(parts["series"].attrs.get("interval_s", 600)) / cfg.elasticity.step_s)
    )
    rates = {
        "naive-mean": float(fit_demand.mean()),
        "naive-last": float(fit_demand.values[-interval:].mean()),
    }
    sizes = {k: max(1, int(instances_needed(v, per_instance))) for k, v in rates.items()}
    sizes["fixed-plan"] = int(chosen.fixed_instances.max())
    fixed = elasticity.sweep(
        demand, policy="fixed", min_instances=sorted(set(sizes.values())), **settings
    )
    rows = []
    for name in PLANS:
        if name in sizes:
            cell = fixed.sel(min_instances=sizes[name])
            run = {"policy": "fixed", "scale_up_threshold": math.nan, "cooldown_s": 0.0,
                   "min_instances": sizes[name], "buffer_instances": 0}  # fmt: skip
        else:
            run = runs[name]
            cell = sweep.sel({k: v for k, v in run.items() if k in sweep.dims})
        rows.append((name, run, cell))

    # bursts: each plan again on the score window with bursts drawn from the plan's burst model
    model = parts["bursts"]
    factors = burst_factors(model, demand.size, cfg.elasticity.step_s, draws, cfg.traffic.seed)
    hold = burst_holds(rows, factors, demand, ahead, settings, cfg, model, _kernel_inputs, kernels)

    table = _table(rows, hold, cost, cfg, sweep)
    if parts.get("mixed") is not None:  # the fit window's mix, replayed pool by pool
        from ._fleet import replay_mix

        pools = replay_mix(cfg, parts["mixed"], demand, fc, chosen_policy(cfg, advice.selection))
        table["pool_breach_min"] = pools.breach_s / 60
        table["pool_breach_min"].attrs = {"units": "min", "long_name": "minutes the pool breached"}
        table["pool_usd"] = pools.usd.reset_coords(drop=True)
        table.attrs.update(
            mix_breach_min=float(pools.attrs["breach_s"]) / 60,
            mix_usd=float(pools.attrs["usd"]),
            mix_pricing=str(pools.attrs["pricing"]),
        )
    fit_days = (fit_window[1] - fit_window[0]) / np.timedelta64(_DAY_NS, "ns")
    score_days = demand.size * cfg.elasticity.step_s / 86400
    table.attrs.update(
        fit_start=str(fit_window[0]),
        fit_stop=str(fit_window[1]),
        score_start=str(demand.time.values[0]),
        score_stop=str(score_window[1]),
        fit_days=float(fit_days),
        score_days=float(score_days),
        breach_budget=cfg.elasticity.breach_budget,
        burst_draws=int(draws),
        burst_draws_with_bursts=int(sum(f.size > 0 for f in factors)),
        burst_model=model.describe(),
        seed=int(cfg.traffic.seed),
        cost=cost,
        plans="; ".join(f"{k}: {v}" for k, v in _MEANING.items()),
    )
    table.attrs["summary"] = summary(table)
    return table


def _over_window(demand: xr.DataArray, window, step_s: float) -> xr.DataArray:
    """``demand`` extended to the whole ``(start, stop)`` window with idle steps (0 requests/s)."""
    step = np.timedelta64(round(step_s * 1e9), "ns")
    first, last = demand.time.values[0], demand.time.values[-1]
    before = max(0, int((first - window[0]) // step))
    after = max(0, int((window[1] - last) // step) - 1)
    if not before and not after:
        return demand
    times = np.concatenate([first - np.arange(before, 0, -1) * step,
                            last + np.arange(1, after + 1) * step])  # fmt: skip
    idle = xr.DataArray(np.zeros(times.size), dims="time", coords={"time": times})
    return xr.concat([demand, idle], "time").sortby("time").assign_attrs(demand.attrs)


def _table(rows, hold, cost, cfg, sweep) -> xr.Dataset:
    names = [name for name, _, _ in rows]
    runs = [run for _, run, _ in rows]
    cells = [cell for _, _, cell in rows]
    spent = [float(c[cost]) for c in cells]
    hindsight = spent[names.index("hindsight")]
    columns = {  # name: (values, units, meaning)
        "scale_up_threshold": (
            [r["scale_up_threshold"] for r in runs],
            "1",
            "scale-up threshold or target utilisation (NaN: a fixed fleet)",
        ),
        "cooldown_s": ([r["cooldown_s"] for r in runs], "s", "scale-down window"),
        "min_instances": (
            [int(r["min_instances"]) for r in runs],
            "instances",
            "pool floor (a fixed fleet: its size)",
        ),
        "buffer_instances": (
            [int(r["buffer_instances"]) for r in runs],
            "instances",
            "warm spares",
        ),
        "breach_min": ([float(c.breach_s) / 60 for c in cells], "min", "minutes in SLA breach"),
        "unserved": ([float(c.unserved) for c in cells], "requests", "dropped or left waiting"),
        "late": ([float(c.late) for c in cells], "requests", "served after their own step"),
        "unserved_share": ([float(c.unserved_share) for c in cells], "1", "share unserved"),
        "gpu_hours": ([float(c.gpu_hours) for c in cells], "GPU·h", "GPU time"),
        cost: (spent, str(sweep[cost].attrs.get("units", "")), f"{cost} on the score window"),
        "meets_budget": (
            [float(c.breach_share) <= cfg.elasticity.breach_budget for c in cells],
            "",
            "time in breach within the budget",
        ),
        "above_hindsight": (
            [u / hindsight - 1 if hindsight > 0 else math.nan for u in spent],
            "1",
            f"{cost} above the hindsight plan's, as a share of it",
        ),
        "burst_hold_share": (
            [hold[n] for n in names],
            "1",
            "share of burst draws in which the plan held its breach budget",
        ),
    }
    table = xr.Dataset(
        {
            name: ("plan", np.asarray(values), _attrs(name, units, meaning))
            for name, (values, units, meaning) in columns.items()
        },
        coords={"plan": ("plan", names, _attrs("plan", "1", "plan replayed on the score window"))},
    )
    table["policy"] = ("plan", np.array([str(r["policy"]) for r in runs]), glossary.attrs("policy"))
    return table


def _attrs(name: str, units: str, meaning: str) -> dict:
    """A column's attrs: a glossary name's own, with what it means in this table as its note."""
    if name in glossary.VARIABLES or name in glossary.DIMS:
        return glossary.attrs(name, note=meaning)
    return {"units": units, "long_name": meaning}


def summary(table: xr.Dataset) -> str:
    """The backtest in one sentence: the recommended plan's breach and cost against hindsight."""
    rec = table.sel(plan="recommended")
    days = float(table.attrs["score_days"])
    # the score window is any window after the fit window, not always the trace's last
    span = {1: "day", 7: "week"}.get(round(days), f"{days:.0f} days")
    span = f"{span} from {words.when(table.attrs['score_start'])}"
    above = float(rec.above_hindsight)
    cost = "above" if above >= 0 else "below"
    hold = float(rec.burst_hold_share)
    bursts = (
        f"; with bursts drawn from the plan's burst model it held its breach budget in "
        f"{hold:.0%} of {table.attrs['burst_draws']} draws"
        if not math.isnan(hold)
        else ""
    )
    mix = (
        f"; the mix of GPU types planned on the same fit window, replayed pool by pool, breached for "
        f"{table.attrs['mix_breach_min']:,.0f} minutes at {table.attrs['mix_usd']:,.0f} USD "
        f"(at {table.attrs['mix_pricing']})"
        if "mix_breach_min" in table.attrs
        else ""
    )
    return (
        f"on the held-out {span} this plan ({rec.policy.item()}) breached the SLA for "
        f"{float(rec.breach_min):,.0f} minutes ({'within' if bool(rec.meets_budget) else 'over'} "
        f"its budget of {float(table.attrs['breach_budget']) * days * 1440:,.0f}) at "
        f"{abs(above):.0%} {cost} the hindsight cost "
        f"(hindsight: {table.sel(plan='hindsight').policy.item()}, "
        f"{float(table.sel(plan='hindsight').breach_min):,.0f} minutes){bursts}{mix}."
    )

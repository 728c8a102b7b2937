"""From simulated runs to advice: troughs, the cost vs breach Pareto front, the choice, the rules.

Part of :mod:`capnb.elasticity` (its public names are re-exported there). The recommendation applies
the article's rules to the numbers of a sweep:

1. cold start vs tolerance: when the cold start exceeds half the latency tolerance (the article's
   test), scaling up reacts too late - hold fixed capacity and put an elastic buffer above it;
2. scale-down delay vs troughs: the delay should outlast the dips in traffic, or instances stop in
   every dip and start again at the next rise;
3. when elasticity does not fit: a fixed fleet that meets the same breach budget at nearly the same
   cost (flat traffic), or a cold start so short that a long delay buys nothing.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from .. import glossary, words
from ..errors import InputError
from ..units import declare_units
from ._decision import cold_start_vetoes
from ._demand import demand_values

__all__ = [
    "HOLD_GOAL",
    "HOLD_MARGIN",
    "Recommendation",
    "choose",
    "choose_held_out",
    "demand_summary",
    "describe",
    "least_breach",
    "pareto_front",
    "recommend",
    "recommendation_for",
    "troughs",
]

#: A fixed fleet within this share of the best elastic cost is preferred: elasticity adds cold-start
#: risk and operational work for the saving.
FIXED_MARGIN = 0.10
#: A cold start at most this long makes a scale-down delay nearly free to skip (s).
FAST_COLD_START_S = 10.0
#: The article's thresholds set the default trough level: a fleet sized for the P95 rate at a 0.7
#: load ratio falls below its 0.3 scale-down threshold under 0.3 / 0.7 of the P95 rate.
_TROUGH_LEVEL = 0.3 / 0.7


def _runs_below(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths (steps) of the maximal runs below ``level`` that end inside the series."""
    below = np.r_[False, values < level, False].astype(np.int8)
    edges = np.diff(below)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    inside = (starts > 0) & (ends < values.size)  # a run cut by the series' edge has no length
    return starts[inside], (ends - starts)[inside]


@declare_units(step_s="s", level_qps="requests/s")
def troughs(demand, *, step_s: float | None = None, level_qps: float | None = None) -> xr.DataArray:
    """Dips of the demand: maximal runs below a level, with their durations (s).

    Parameters
    ----------
    demand
        Requests/s per step (see :func:`capnb.elasticity.simulate`).
    step_s
        Seconds per value (default: the demand's own step).
    level_qps
        The level (requests/s). Default: 0.3 / 0.7 of the P95 rate - where a fleet sized for the
        P95 at the article's 0.7 threshold drops below its 0.3 scale-down threshold.

    Returns
    -------
    xarray.DataArray
        ``duration_s`` over dim ``trough`` with each dip's start ``time``; runs cut by the start or
        end of the series are left out. Attr ``level_qps``.

    Examples
    --------
    >>> troughs([9.0, 2, 2, 9, 9, 1, 9], step_s=60, level_qps=5).values.tolist()
    [120.0, 60.0]
    """
    values, times, step = demand_values(demand, step_s)
    level = float(np.quantile(values, 0.95)) * _TROUGH_LEVEL if level_qps is None else level_qps
    real = isinstance(level, numbers.Real) and not isinstance(level, bool)
    if not (real and math.isfinite(level) and level >= 0):
        # a NaN level finds no dip at all: the answer would be [], as for a smooth series
        raise InputError(f"level_qps must be a finite number of requests/s >= 0, got {level!r}")
    starts, lengths = _runs_below(values, level)
    return xr.DataArray(
        lengths * step,
        dims="trough",
        coords={"time": ("trough", times[starts])},
        name="duration_s",
        attrs={"units": "s", "long_name": "dip below level_qps", "level_qps": level},
    )


def demand_summary(values: np.ndarray, step_s: float) -> dict[str, float]:
    """Attrs that describe a demand series for the advice: rates (requests/s) and dips (s)."""
    p50, p95 = (float(q) for q in np.quantile(values, [0.5, 0.95]))
    level = p95 * _TROUGH_LEVEL
    _, lengths = _runs_below(values, level)
    durations = lengths * step_s
    return {
        "demand_mean_qps": float(values.mean()),
        "demand_p50_qps": p50,
        "demand_p95_qps": p95,
        "demand_peak_qps": float(values.max()),
        "trough_level_qps": level,
        "troughs": int(durations.size),
        "trough_median_s": float(np.median(durations)) if durations.size else 0.0,
        "trough_p90_s": float(np.quantile(durations, 0.9)) if durations.size else 0.0,
    }


# -- Pareto front and choice --------------------------------------------------------------------
def _cost_name(result: xr.Dataset, cost: str | None) -> str:
    if not isinstance(result, xr.Dataset) or "breach_share" not in result:
        raise InputError(
            "result: expected what capnb.elasticity.sweep or simulate returns (a Dataset with "
            f"breach_share), got a {type(result).__name__}"
            + ("" if not isinstance(result, xr.Dataset) else f" of {sorted(map(str, result))}")
        )
    name = cost or ("usd" if "usd" in result else "gpu_hours")
    if name not in result:
        raise InputError(f"cost={name!r} is not a variable of the result; use 'usd' or 'gpu_hours'")
    return name


def _flat(result: xr.Dataset, *values) -> tuple[xr.DataArray, list[np.ndarray]]:
    """Every run of a sweep in one flat order: the first value's grid, and each value over it.

    ``values`` are variable names or DataArrays over some of the grid's dims; each comes back as
    a flat array in the C order of the first one's dims (``np.unravel_index`` finds a run's cell).
    """
    arrays = [result[v] if isinstance(v, str) else v for v in values]
    grid = arrays[0]
    flat = []
    for array in arrays:
        if array.dims != grid.dims:
            array = array.broadcast_like(grid).transpose(*grid.dims)
        flat.append(np.ravel(array.values))
    return grid, flat


def _selection(grid: xr.DataArray, i: int) -> dict[str, object]:
    """The coordinates of run ``i`` of :func:`_flat`'s order, as a selection for ``.sel``."""
    cell = np.unravel_index(i, grid.shape) if grid.dims else ()
    return {d: grid[d].values[j].item() for d, j in zip(grid.dims, cell, strict=True)}


def pareto_front(result: xr.Dataset, *, cost: str | None = None, breach: str = "breach_s"):
    """Whether each run is on the Pareto front of cost against SLA breach (both minimised).

    A run is on the front when no other run is at most as costly and at most as much in breach,
    and better in one. Of runs with the same cost and breach, one (the first) is marked.

    Parameters
    ----------
    result
        A :func:`capnb.elasticity.sweep` result.
    cost
        ``"usd"`` (default when the sweep has a price) or ``"gpu_hours"``.
    breach
        The breach variable (``"breach_s"``, ``"unserved"``, ...).

    Returns
    -------
    xarray.DataArray
        ``pareto`` (bool) over the result's dims.
    """
    cost = _cost_name(result, cost)
    if breach not in result:
        raise InputError(f"breach={breach!r} is not a variable of the result")
    grid, (c, b) = _flat(result, cost, breach)
    order = np.lexsort((b, c))
    on_front = np.zeros(c.size, bool)
    best = math.inf
    for i in order:
        if b[i] < best:
            on_front[i] = True
            best = b[i]
    marked = xr.DataArray(on_front.reshape(grid.shape), dims=grid.dims, coords=grid.coords)
    return marked.rename("pareto").assign_attrs(glossary.attrs("pareto"), cost=cost, breach=breach)


def _policy_names(result: xr.Dataset) -> xr.DataArray:
    return result.policy if "policy" in result.coords else xr.DataArray(result.attrs["policy"])


def choose(
    result: xr.Dataset,
    *,
    breach_budget: float = 0.001,
    cost: str | None = None,
    policies: list[str] | None = None,
    where: xr.DataArray | None = None,
) -> dict[str, object] | None:
    """The cheapest run whose breach share is within the budget, as a selection for ``.sel``.

    Ties go to the smaller breach. ``policies`` restricts the choice to those policies, ``where``
    (a boolean DataArray over some of the result's dims) to the runs where it holds. Returns
    ``None`` when no run qualifies.
    """
    cost = _cost_name(result, cost)
    if not 0 <= breach_budget <= 1:
        raise InputError(f"breach_budget must be a share in [0, 1], got {breach_budget}")
    rules = [_policy_names(result).isin(policies)] if policies is not None else []
    rules += [where] if where is not None else []
    grid, (c, b, *allowed) = _flat(result, cost, "breach_share", *rules)
    keep = np.logical_and.reduce([b <= breach_budget, *allowed])
    if not keep.any():
        return None
    i = int(np.lexsort((b, np.where(keep, c, np.inf)))[0])
    return _selection(grid, i)


def least_breach(result: xr.Dataset, *, cost: str | None = None) -> dict[str, object]:
    """The run least in SLA breach (the cheaper of equals), as a selection for ``.sel``.

    What to show when no run meets the breach budget (:func:`choose` returns None).
    """
    cost = _cost_name(result, cost)
    grid, (c, b) = _flat(result, cost, "breach_share")
    return _selection(grid, int(np.lexsort((c, b))[0]))


#: The share of held-out windows a configuration must keep its breach budget in to be chosen.
HOLD_GOAL = 0.9
#: The share of its budget a configuration may use on a window it is chosen on: the windows it will
#: serve hold events the ones it was chosen on did not (level shifts, sharper steps), so it is held
#: to a quarter of its budget there. Set on the bundled design series (ServeGen m-large and m-small)
#: and scored on the others (VALIDATION.md, "The plan on weeks it did not see").
HOLD_MARGIN = 0.25


@declare_units(breach_s="s", budget_s="s")
def _held_out_arrays(breach_s, budget_s, cost, eligible):
    """:func:`choose_held_out`'s arguments as arrays, their shapes checked against ``breach_s``."""
    breach = np.asarray(breach_s, dtype=float)
    if breach.ndim != 2 or 0 in breach.shape:
        raise InputError(
            "breach_s: windows x configurations (a 2-D array of s) with at least one of each, "
            f"got shape {breach.shape}"
        )
    windows, configs = breach.shape
    budget, cost = np.asarray(budget_s, dtype=float), np.asarray(cost, dtype=float)
    if budget.shape != (windows,):
        raise InputError(
            f"budget_s: one breach budget (s) per window of breach_s, {windows}, got shape "
            f"{budget.shape}"
        )
    if cost.shape != breach.shape:
        raise InputError(
            f"cost: windows x configurations as breach_s, {breach.shape}, got shape {cost.shape}"
        )
    allowed = np.ones(configs, bool) if eligible is None else np.asarray(eligible, bool)
    if allowed.shape != (configs,):
        raise InputError(
            f"eligible: one flag per configuration of breach_s, {configs}, got shape "
            f"{allowed.shape}"
        )
    return breach, budget, cost, allowed


@declare_units(breach_s="s", budget_s="s")
def choose_held_out(
    breach_s, budget_s, cost, eligible=None, *, goal: float = HOLD_GOAL,
    margin: float = HOLD_MARGIN, windows: str = "held-out windows",
) -> tuple[int, str]:  # fmt: skip
    """The configuration to deploy, chosen on windows it was not fitted on.

    The cheapest configuration (total cost over the windows; the less breach of equals) that
    used at most ``margin`` of its breach budget in at least ``goal`` of them; when none did, the
    cheapest that stayed within its whole budget in ``goal`` of them; when none did either, the
    one that kept the budget most often, the least breach of equals (then the cheapest): a configuration
    that keeps a few quiet windows and breaches the others for hours is not the safe choice. The
    words say which rule chose.

    Parameters
    ----------
    breach_s
        Seconds in SLA breach, windows x configurations (each window replayed with the plan its
        origin's history gave).
    budget_s
        Each window's breach budget (s).
    cost
        USD or GPU-hours, windows x configurations.
    eligible
        Configurations the rules allow (default all); with none eligible, all are.
    goal
        Share of windows within budget a configuration needs.
    margin
        Share of each window's budget a configuration may use (1: the budget itself).
    windows
        What the windows are, in the words (the plan's deployed choice is made on the whole
        trace's windows, which its held-out record does not count).

    Returns
    -------
    (int, str)
        The index of the chosen configuration, and the outcome in words.

    Examples
    --------
    >>> breach = [[0, 5, 30], [0, 50, 0]]  # two windows, three configurations
    >>> choose_held_out(breach, [10, 10], [[9, 5, 1], [9, 5, 1]], margin=1.0)[0]
    0
    >>> print(choose_held_out([[0, 5], [0, 2]], [40, 40], [[9, 5], [9, 5]])[1][:64])
    it used at most 25% of its breach budget in 2 of 2 held-out wind
    """
    breach, budget, cost, allowed = _held_out_arrays(breach_s, budget_s, cost, eligible)
    held = breach <= margin * budget[:, None]
    total = cost.sum(axis=0)
    if not allowed.any():
        allowed = np.ones_like(allowed)
    share = held.mean(axis=0)
    count = breach.shape[0]
    good = allowed & (share >= goal - 1e-12)
    if good.any():
        i = int(np.lexsort((breach.sum(axis=0), np.where(good, total, np.inf)))[0])
        return i, (
            f"it used at most {margin:.0%} of its breach budget in {int(held[:, i].sum())} of "
            f"{count} {windows}, the cheapest that did in {goal:.0%} or more"
        )
    missed = f"no configuration used at most {margin:.0%} of its breach budget"
    kept = breach <= budget[:, None]
    at_budget = allowed & (kept.mean(axis=0) >= goal - 1e-12)
    if margin < 1.0 and at_budget.any():
        i = int(np.lexsort((breach.sum(axis=0), np.where(at_budget, total, np.inf)))[0])
        return i, (
            f"{missed} in {goal:.0%} of the {count} {windows}; this one stayed within its whole "
            f"budget in {int(kept[:, i].sum())} of {count}, the cheapest that did in {goal:.0%} "
            "or more"
        )
    # none at the goal: the most windows within the budget, then the least breach over them
    order = (np.where(allowed, total, np.inf), np.where(allowed, breach.sum(axis=0), np.inf),
             -np.where(allowed, kept.mean(axis=0), -1))  # fmt: skip
    i = int(np.lexsort(order)[0])
    return i, (
        f"{missed}{', nor stayed within its whole budget,' if margin < 1.0 else ''} in "
        f"{goal:.0%} of the {count} {windows}; this one stayed within its budget most often "
        f"({int(kept[:, i].sum())} of {count}), the least breach of those"
    )


# -- the recommendation ---------------------------------------------------------------------------
@dataclass
class Recommendation:
    """The advice for one trace: what to run, with its numbers and the rules behind it.

    Attributes
    ----------
    kind
        ``"fixed"`` (a fixed fleet), ``"fixed_plus_buffer"`` (an elastic policy holding capacity
        that needs no cold start: a floor above one instance or warm spares) or ``"elastic"``.
    selection
        Coordinates of the chosen run in the sweep (``result.sel(**selection)``).
    meets_budget
        Whether the chosen run's breach share is within the budget.
    follows_rules
        Whether the run is of the kind the article's rules ask for (False when none of that kind
        meets the budget and another run is shown instead).
    metrics
        The chosen run's breach (s and share), cost, GPU-hours, unserved share, scale events, thrash.
    reasons
        One sentence per rule, with its numbers.
    text
        The answer in one sentence.
    cold_start_vetoes
        Whether the cold start is too long for scale-ups to count (:func:`cold_start_vetoes`):
        the rule the choice followed.
    """

    kind: str
    selection: dict[str, object]
    meets_budget: bool
    follows_rules: bool
    metrics: dict[str, float]
    reasons: list[str] = field(default_factory=list)
    text: str = ""
    cold_start_vetoes: bool = False


def _policy_of(cell: xr.Dataset, result: xr.Dataset) -> str:
    return str(cell.policy.item()) if "policy" in cell.coords else str(result.attrs["policy"])


def _run_words(cell: xr.Dataset, policy: str) -> str:
    floor, threshold = int(cell.min_instances), float(cell.scale_up_threshold)
    name = words.POLICY_NAMES[policy]
    phrase = {
        "article": f"the {name} policy (scale up above {threshold:g})",
        "hpa": f"{name} (target utilisation {threshold:g})",
        "knative": f"{name} (target utilisation {threshold:g})",
        "fixed": f"a {name} of {words.count(floor, 'instance')}",
        "fixed_elastic": f"{name}: {words.count(floor, 'fixed instance')} with the article's rule "
        f"above (scale up above {threshold:g}, no cold-start veto)",
        "predictive": f"the {name} policy (the forecast one cold start ahead, target "
        f"utilisation {threshold:g}, corrected when load exceeds it)",
    }[policy]
    if policy in ("article", "hpa", "knative", "predictive") and floor > 1:
        phrase += f", never below {words.count(floor, 'instance')}"
    if policy != "fixed":
        phrase += f", scale-down delay {words.duration(float(cell.cooldown_s))}"
    spares = int(cell.buffer_instances)
    return phrase + (f", {words.count(spares, 'warm spare')}" if spares else "")


def recommend(
    result: xr.Dataset,
    *,
    breach_budget: float = 0.001,
    cost: str | None = None,
    held_out=None,
    **selection: object,
) -> Recommendation:
    """Apply the article's rules to a sweep and pick a policy.

    The predictive policy's forecast may have seen the traffic it is tested on, so it is chosen
    only when it also wins on ``held_out`` traffic: a sweep of the same policies over traffic its
    forecast was not fitted to (or a function that returns one, called only when the predictive
    policy would be chosen; it may return None: nothing to hold out). There, its cheapest run within
    the budget must cost less than every other policy's; otherwise the choice is made again without
    it. The comparison is in the reasons.

    Parameters
    ----------
    result
        A :func:`capnb.elasticity.sweep` result, ideally over several policies including
        ``"fixed"`` and ``"fixed_elastic"`` (the rules compare them).
    breach_budget
        Largest acceptable share of the time in SLA breach (0.001: 43 min a month).
    cost
        ``"usd"`` or ``"gpu_hours"`` (default: ``"usd"`` when the sweep has a price).
    **selection
        Coordinates that fix dims before choosing; ``cold_start_s`` must be fixed when it is a dim
        (the cold start is a fact of the deployment, not a choice).

    Returns
    -------
    Recommendation
    """
    first = _recommend(result, breach_budget, cost, selection)
    if first.selection.get("policy") != "predictive":
        return first
    others = result.drop_sel(policy="predictive")
    held = held_out() if callable(held_out) else held_out
    if held is None:
        advice = _recommend(others, breach_budget, cost, selection)
        advice.reasons.append(
            "The predictive policy was cheapest here, but without held-out traffic to test its "
            "forecast on it is not recommended."
        )
        return advice
    name = _cost_name(held, cost)
    mine = choose(held, breach_budget=breach_budget, cost=name, policies=["predictive"])
    rest = [str(p) for p in held.policy.values if p != "predictive"]
    best = choose(held, breach_budget=breach_budget, cost=name, policies=rest)

    def price(sel):
        return math.inf if sel is None else float(held[name].sel(sel))

    versus = f"its cheapest run within the budget costs {price(mine):,.1f} {held[name].units}" + (
        f" against {price(best):,.1f} for {best['policy']}" if best else ""
    )
    if price(mine) < price(best):
        first.reasons.append(f"The predictive policy also wins on held-out traffic: {versus}.")
        return first
    advice = _recommend(others, breach_budget, cost, selection)
    advice.reasons.append(
        "The predictive policy was cheapest here, where its forecast saw the traffic, but not on "
        f"held-out traffic ({versus}); it is not recommended."
    )
    return advice


def _select(result: xr.Dataset, selection: dict) -> xr.Dataset:
    """``result.sel(selection)``, or an error naming the coordinate or value the sweep lacks."""
    for name, value in selection.items():
        if name not in result.dims:
            raise InputError(f"{name} is not a coordinate of the sweep; it has {list(result.dims)}")
        known = result[name].values
        missing = [v for v in np.atleast_1d(value).tolist() if v not in known.tolist()]
        if missing:
            raise InputError(f"{name}={missing[0]!r} is not in the sweep; it has {known.tolist()}")
    return result.sel(selection) if selection else result


def _recommend(result, breach_budget, cost, selection) -> Recommendation:
    cost = _cost_name(result, cost)
    result = _select(result, selection)
    if "cold_start_s" in result.dims:
        if result.sizes["cold_start_s"] != 1:
            raise InputError(
                "recommend: choose one cold_start_s (it is a fact of the deployment): "
                "recommend(result, cold_start_s=...)"
            )
        result = result.squeeze("cold_start_s")
    cold, tolerance = float(result.cold_start_s), float(result.attrs["tolerance_s"])
    vetoed = cold_start_vetoes(cold, tolerance)
    names = _policy_names(result)
    elastic = names != "fixed"
    # capacity that needs no cold start: a floor above one instance, or warm spares
    holds_capacity = (result.min_instances > 1) | (result.buffer_instances > 0)
    preferred = elastic & holds_capacity if vetoed else elastic
    shape = "elastic runs holding a floor or warm spares" if vetoed else "elastic runs"
    kw = {"breach_budget": breach_budget, "cost": cost}
    best_shape = choose(result, where=preferred, **kw)
    best_fixed = choose(result, policies=["fixed"], **kw)
    best_any = choose(result, **kw)

    def cost_of(sel):
        return float(result[cost].sel(sel))

    notes, follows = [], True
    if best_fixed and (
        best_shape is None or cost_of(best_fixed) <= (1 + FIXED_MARGIN) * cost_of(best_shape)
    ):
        chosen, meets = best_fixed, True
        if best_shape is not None:
            fixed, other = cost_of(best_fixed), cost_of(best_shape)
            how = (
                f"for {1 - fixed / other:.0%} less than the cheapest of the {shape}"
                if fixed < other
                else f"within {FIXED_MARGIN:.0%} of the cheapest of the {shape}"
            )
            notes.append(
                f"A fixed fleet meets the budget {how} ({fixed:,.1f} vs {other:,.1f} "
                f"{result[cost].units}): elasticity does not pay on this traffic."
            )
    elif best_shape is not None:
        chosen, meets = best_shape, True
        if best_any is not None and cost_of(best_any) < cost_of(best_shape):
            notes.append(
                f"A run without capacity in reserve costs less ({cost_of(best_any):,.1f} "
                f"{result[cost].units}) within the budget on this trace, but leans on scale-ups "
                "that arrive after the tolerance."
            )
    elif best_any is not None:
        chosen, meets, follows = best_any, True, False
        notes.append(f"None of the {shape} meets the budget; the cheapest run that does is shown.")
    else:
        chosen, meets, follows = least_breach(result, cost=cost), False, False
        notes.append(
            f"No run meets the breach budget of {breach_budget:.2%}: the run with the least "
            "breach is shown."
        )

    advice = _advice_for(result, chosen, meets=meets, follows=follows, notes=notes, cost=cost,
                         breach_budget=breach_budget, vetoed=vetoed)  # fmt: skip
    # the coordinates given to fix dims (the cold start) are part of the run's place in the sweep
    advice.selection = {**selection, **chosen}
    return advice


def recommendation_for(
    result: xr.Dataset, selection: dict, *, breach_budget: float, reasons=(), cost=None
) -> Recommendation:
    """The advice for a run chosen elsewhere (on held-out windows): its kind, numbers and words.

    ``selection`` picks one run of the sweep ``result``; ``reasons`` say how it was chosen and
    come first. The rules' own sentences (cold start, troughs, swing) follow.
    """
    cost = _cost_name(result, cost)
    if "cold_start_s" in result.dims:
        result = result.squeeze("cold_start_s")
    cell = result.sel(selection)
    meets = float(cell.breach_share) <= breach_budget
    vetoed = cold_start_vetoes(float(result.cold_start_s), float(result.attrs["tolerance_s"]))
    advice = _advice_for(result, selection, meets=meets, follows=True, notes=[], cost=cost,
                         breach_budget=breach_budget, vetoed=vetoed)  # fmt: skip
    advice.reasons[:0] = list(reasons)
    return advice


def _advice_for(result, chosen, *, meets, follows, notes, cost, breach_budget, vetoed):
    """The Recommendation of the run ``chosen`` (a selection of ``result``)."""
    cold, tolerance = float(result.cold_start_s), float(result.attrs["tolerance_s"])
    cell = result.sel(chosen)
    policy = _policy_of(cell, result)
    in_reserve = int(cell.min_instances) > 1 or int(cell.buffer_instances) > 0
    kind = "fixed" if policy == "fixed" else ("fixed_plus_buffer" if in_reserve else "elastic")
    metrics = {
        "breach_s": float(cell.breach_s),
        "breach_share": float(cell.breach_share),
        cost: float(cell[cost]),
        "gpu_hours": float(cell.gpu_hours),
        "unserved_share": float(cell.unserved_share),
        "scale_events": int(cell.scale_events),
        "thrash": int(cell.thrash),
        "mean_instances": float(cell.mean_instances),
    }
    reasons = [
        (
            f"Cold start {cold:.0f} s exceeds half the {tolerance:.0f} s tolerance: the article's "
            "engine would not scale up in time, so hold fixed capacity and scale an elastic "
            "buffer above it."
            if vetoed
            else f"Cold start {cold:.0f} s is within half the {tolerance:.0f} s tolerance: new "
            "instances arrive before the SLA counts as breached."
        )
    ]
    if int(result.attrs.get("troughs", 0)) and policy != "fixed":
        delay = float(cell.cooldown_s)
        median, p90 = float(result.attrs["trough_median_s"]), float(result.attrs["trough_p90_s"])
        longer = (
            "longer"
            if delay >= p90
            else ("shorter than some of" if delay >= median else "shorter than most of")
        )
        level = words.rate(result.attrs["trough_level_qps"])
        reasons.append(
            f"Dips below {level} requests/s last {words.duration(median)} "
            f"(median) to {words.duration(p90)} (P90); the scale-down delay of {words.duration(delay)} is "
            f"{longer} {'than them' if longer == 'longer' else 'them'}"
            + (
                f", and {words.count(metrics['thrash'], 'instance')} stopped within "
                f"{words.duration(float(result.attrs['thrash_window_s']))} of becoming ready."
                if metrics["thrash"]
                else ", and no instance stopped soon after becoming ready."
            )
        )
    swing = result.attrs["demand_p95_qps"] / max(result.attrs["demand_p50_qps"], 1e-12)
    reasons.append(f"Traffic's P95 is {swing:.1f}x its median rate.")
    if cold <= FAST_COLD_START_S:
        reasons.append(
            f"A cold start of {cold:.0f} s is short enough that scaling down promptly costs "
            "little: a long scale-down delay buys nothing."
        )
    reasons += notes
    lead = words.POLICY_KINDS[kind].capitalize()
    verdict = "within" if meets else "missing"
    text = (
        f"{lead}: {_run_words(cell, policy)} - {metrics['breach_share']:.2%} of the time in breach "
        f"({verdict} the {breach_budget:.2%} budget), {metrics['unserved_share']:.2%} of requests "
        f"unserved, {metrics[cost]:,.1f} {result[cost].units} over the trace."
    )
    return Recommendation(kind, chosen, meets, follows, metrics, reasons, text, vetoed)


def describe(result: xr.Dataset, **selection: object) -> str:
    """One run (a :func:`simulate` result or one cell of a sweep) in one sentence with its numbers.

    Examples
    --------
    >>> import numpy as np
    >>> from capnb.elasticity import simulate
    >>> run = simulate(np.full(720, 30.0), step_s=5, per_instance_qps=10, policy="fixed",
    ...                min_instances=4)
    >>> describe(run)  # doctest: +ELLIPSIS
    'a fixed fleet of 4 instances: 0.00% of the time in SLA breach, 0.00% of requests unserved...'
    """
    if isinstance(result, Recommendation):
        raise InputError(
            "describe: expected a simulate or sweep result (a Dataset), got a Recommendation: "
            "its words are its .text, or describe(result, **recommendation.selection)"
        )
    if not isinstance(result, xr.Dataset):
        raise InputError(
            f"describe: expected a simulate or sweep result (a Dataset), got "
            f"{type(result).__name__}"
        )
    cell = _select(result, selection)
    grid = [d for d in cell.dims if d != "time"]
    if any(cell.sizes[d] != 1 for d in grid):
        raise InputError(f"describe: choose one run (the result has dims {dict(cell.sizes)})")
    cell = cell.squeeze(grid)
    policy = _policy_of(cell, result)
    cost = f", {float(cell.usd):,.2f} USD" if "usd" in cell else ""
    return (
        f"{_run_words(cell, policy)}: {float(cell.breach_share):.2%} of the time in SLA breach, "
        f"{float(cell.unserved_share):.2%} of requests unserved, {float(cell.late_share):.2%} late, "
        f"{float(cell.gpu_hours):,.1f} GPU-hours{cost}, "
        f"{words.count(int(cell.scale_events), 'scale event')}, {int(cell.thrash):,} thrash."
    )

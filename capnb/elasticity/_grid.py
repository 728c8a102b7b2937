"""The policy grid the elasticity step sweeps, decided in one place.

The plan and the elasticity worksheet both sweep :func:`policy_grid`'s answer, so that they
recommend the same policy on the same inputs.
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..units import declare_units
from ._demand import demand_values
from ._simulate import fixed_instances

__all__ = ["FLOOR_SHARES", "POLICY_GRID", "policy_grid"]

#: The swept policy settings by default: scale-up thresholds (load ratio or HPA/Knative target
#: utilisation), scale-down delays (s) and warm spare instances.
POLICY_GRID: dict[str, tuple] = {
    "scale_up_threshold": (0.6, 0.7, 0.8),
    "cooldown_s": (300.0, 900.0, 1800.0),
    "buffer_instances": (0, 2),
}

#: Pool floors, as shares of the fixed fleet that serves the demand's P99 (and a floor of 1).
FLOOR_SHARES = (0.25, 0.5, 0.75, 1.0)


def _values(values, name: str, kind) -> list:
    items = [values] if isinstance(values, int | float) else list(values)
    if not items:
        raise InputError(f"{name}: give at least one value")
    try:
        return [kind(v) for v in items]
    except (TypeError, ValueError) as error:
        raise InputError(f"{name} must hold numbers, got {values!r}") from error


@declare_units(per_instance_qps="requests/s", cooldown_s="s", step_s="s")
def policy_grid(
    demand,
    per_instance_qps: float,
    *,
    scale_up_threshold=POLICY_GRID["scale_up_threshold"],
    cooldown_s=POLICY_GRID["cooldown_s"],
    buffer_instances=POLICY_GRID["buffer_instances"],
    floor_shares=FLOOR_SHARES,
    quantile: float = 0.99,
    step_s: float | None = None,
) -> dict[str, list]:
    """The grid of policy settings to sweep: thresholds, delays, warm spares and pool floors.

    The floors (``min_instances``) are 1 and ``ceil(share x fleet)`` for each share, where the
    fleet is :func:`capnb.elasticity.fixed_instances` at the demand's ``quantile`` (the P99 fixed
    fleet): from a floor that lets the pool shrink to one instance up to a fixed fleet that never
    needs a cold start.

    Parameters
    ----------
    demand
        Requests/s per step (as :func:`capnb.elasticity.simulate` takes).
    per_instance_qps
        Requests/s one instance serves under the SLA.
    scale_up_threshold, cooldown_s, buffer_instances
        The swept values (default :data:`POLICY_GRID`).
    floor_shares
        Shares of the P99 fleet used as floors (default :data:`FLOOR_SHARES`).
    quantile, step_s
        As in :func:`capnb.elasticity.fixed_instances`.

    Returns
    -------
    dict
        ``scale_up_threshold``, ``cooldown_s``, ``min_instances``, ``buffer_instances``: lists to
        pass to :func:`capnb.elasticity.sweep`.

    Examples
    --------
    >>> policy_grid([10.0, 20.0, 40.0, 30.0], 5.0, quantile=1.0, step_s=60)["min_instances"]
    [1, 2, 4, 6, 8]
    """
    demand_values(demand, step_s)  # validated here, so the error names the demand
    fleet = fixed_instances(demand, per_instance_qps, quantile=quantile, step_s=step_s)
    shares = _values(floor_shares, "floor_shares", float)
    if any(not 0 < s <= 1 for s in shares):
        raise InputError(f"floor_shares must lie in (0, 1], got {floor_shares!r}")
    return {
        "scale_up_threshold": _values(scale_up_threshold, "scale_up_threshold", float),
        "cooldown_s": _values(cooldown_s, "cooldown_s", float),
        "min_instances": sorted({1, *(math.ceil(fleet * s) for s in shares)}),
        "buffer_instances": _values(buffer_instances, "buffer_instances", int),
    }

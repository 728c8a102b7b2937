"""Step 4, elasticity: cold starts and autoscaling policies simulated over real traffic.

The article's third mistake: elastic scaling that ignores cold start. A new instance needs 40-150 s to
download, load and warm up its model, so a burst inside that window breaches the SLA; and scaling down
at every trough then up at the next peak piles up cold-start cost. Its rules: the scale-up response
time must be below the latency tolerance - otherwise hold fixed capacity plus an elastic buffer - and
scale down only after traffic stays low for 15-30 minutes.

capnb answers with a simulator (:mod:`capnb.kernels.autoscale`) that steps through a demand series
(requests/s per step of ``step_s`` seconds) and keeps ready and starting instances, the backlog (a
request waits at most ``tolerance_s``, then is dropped) and the policy's own state. Policies:

``"article"``
    The article's decision engine (:func:`decide_scaling_action`), thresholds 0.7 / 0.3, cool-down.
``"hpa"``
    Kubernetes HPA v2 as documented: ratio, tolerance, stabilisation windows, rate policies.
``"knative"``
    Knative's KPA: stable and panic windows, panic threshold, scale-down delay.
``"fixed"``
    ``min_instances`` throughout (for example the forecast's P99 baseline: :func:`fixed_instances`).
``"fixed_elastic"``
    Fixed capacity at ``min_instances`` with the article's rule above it, without its cold-start
    veto: the baseline carries the load while the elastic part starts.
``"predictive"``
    Instances started one cold start ahead of the forecast's per-slot quantile
    (:func:`forecast_demand`), with the load seen above the forecast added (a reactive correction),
    and scale-down following the forecast's troughs after a stabilisation window.

The article's "latency budget" is the response tolerance ``tolerance_s``: how long a request may
wait before it is dropped (unserved); a cold start above half of it vetoes the article's
scale-ups. A step is in SLA breach as soon as requests are left over, whatever the tolerance.

Entry points: :func:`resample_demand` (a trace or rate series at the simulation step),
:func:`simulate` (one policy, with its timeline), :func:`sweep` (a policy grid, run in parallel,
as a Dataset over the grid's dims), :func:`pareto_front`, :func:`choose`, :func:`least_breach`,
:func:`recommend` and :func:`describe`; :func:`advise` and :func:`advisory` (the advisory view:
scale events per hour, reversals within the 900 s thrash window, time above the need, cold starts
paid), :func:`flapping_warning` and :func:`flapping_verdict`.
"""

from __future__ import annotations

from ..words import POLICY_NAMES as _WORDS
from . import coldstart
from ._advice import (
    HOLD_GOAL,
    HOLD_MARGIN,
    Recommendation,
    choose,
    choose_held_out,
    describe,
    least_breach,
    pareto_front,
    recommend,
    recommendation_for,
    troughs,
)
from ._advisory import (
    MOST_REVERSALS_PER_DAY,
    advise,
    advisory,
    flapping_verdict,
    flapping_warning,
)
from ._decision import NoAction, ScaleDown, ScaleUp, cold_start_vetoes, decide_scaling_action
from ._demand import (
    PREDICTIVE_QUANTILE,
    forecast_demand,
    prepare_demand,
    resample_demand,
    smooth_demand,
)
from ._grid import FLOOR_SHARES, POLICY_GRID, policy_grid
from ._policy import OPTIONS, POLICIES, Policy
from ._pools import pool_demand, simulate_pools
from ._simulate import fixed_instances, simulate, sweep

#: Each policy's name in words (``"hpa"``: ``"Kubernetes HPA"``), as the step's sentences, the
#: charts and the report write it; for a worksheet's own tables.
POLICY_NAMES = dict(_WORDS)

__all__ = [
    "FLOOR_SHARES",
    "HOLD_GOAL",
    "HOLD_MARGIN",
    "MOST_REVERSALS_PER_DAY",
    "OPTIONS",
    "POLICIES",
    "POLICY_GRID",
    "POLICY_NAMES",
    "PREDICTIVE_QUANTILE",
    "NoAction",
    "Policy",
    "Recommendation",
    "ScaleDown",
    "ScaleUp",
    "advise",
    "advisory",
    "choose",
    "choose_held_out",
    "cold_start_vetoes",
    "coldstart",
    "decide_scaling_action",
    "describe",
    "fixed_instances",
    "flapping_verdict",
    "flapping_warning",
    "forecast_demand",
    "least_breach",
    "pareto_front",
    "policy_grid",
    "pool_demand",
    "prepare_demand",
    "recommend",
    "recommendation_for",
    "resample_demand",
    "simulate",
    "simulate_pools",
    "smooth_demand",
    "sweep",
    "troughs",
]

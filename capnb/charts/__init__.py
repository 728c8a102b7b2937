"""Charts: pure functions from a capnb Dataset to an ``altair.Chart``, one module per step.

Nothing here computes a result; each function selects, reshapes to a long table and draws. Test them
through ``chart.to_dict()``. Each function does its data work first and builds the altair chart
from its tables through :func:`capnb.charts._draft.draft`, so a worksheet's redraw of the same chart
can fill in the spec it wrote out last time instead of building the chart again. Rendering (in
JupyterLab and in offline HTML reports) is set up once by :func:`capnb.notebook.setup`.
"""

from ._altair import quick_build
from ._capacity import cost_vs_sla, latency_curve, plan_contrast, throughput_curve
from ._clock import day_label, is_undated, slot_x
from ._draft import Draft, drafting, written
from ._elasticity import (
    cold_start_stages,
    elasticity_pareto,
    elasticity_policies,
    elasticity_timeline,
)
from ._forecast import forecast_exceedance, forecast_heatmap, forecast_plans, forecast_series
from ._memory import memory_breakdown, memory_heatmap
from ._plan import (
    plan_backtest,
    plan_held_out,
    plan_instances,
    plan_options,
    plan_policies,
    plan_slots,
    plan_timeline,
)

__all__ = [
    "Draft",
    "cold_start_stages",
    "cost_vs_sla",
    "day_label",
    "drafting",
    "elasticity_pareto",
    "elasticity_policies",
    "elasticity_timeline",
    "forecast_exceedance",
    "forecast_heatmap",
    "forecast_plans",
    "forecast_series",
    "is_undated",
    "latency_curve",
    "memory_breakdown",
    "memory_heatmap",
    "plan_backtest",
    "plan_contrast",
    "plan_held_out",
    "plan_instances",
    "plan_options",
    "plan_policies",
    "plan_slots",
    "plan_timeline",
    "quick_build",
    "slot_x",
    "throughput_curve",
    "written",
]

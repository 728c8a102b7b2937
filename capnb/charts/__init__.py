"""Charts: pure functions from a capnb Dataset to an ``altair.Chart``, one module per step.

Nothing here computes a result; each function selects, reshapes to a long table and draws. Test them
through ``chart.to_dict()``. Rendering (in JupyterLab and in offline HTML reports) is set up once by
:func:`capnb.notebook.setup`.
"""

from ._forecast import forecast_exceedance, forecast_heatmap, forecast_plans, forecast_series
from ._memory import memory_breakdown, memory_heatmap

__all__ = [
    "forecast_exceedance",
    "forecast_heatmap",
    "forecast_plans",
    "forecast_series",
    "memory_breakdown",
    "memory_heatmap",
]

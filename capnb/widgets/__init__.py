"""Worksheet controls: ipywidgets that re-run a worksheet's visible step calls.

A worksheet's step calls are a function in the notebook (``compute``) that a researcher reads and
edits; :class:`Worksheet` wires controls to it. Changing a control runs the function again with the
controls' values, re-reads the answer and updates every displayed chart whose content changed in
place (IPython display ids), so the charts stay ordinary cell outputs: they update live in JupyterLab
and appear in an exported report. In a live page, a chart drawn again in its shape goes to the page
as a widget message instead (:class:`LiveCharts`, an anywidget): the vega view already drawn takes
the new data and no output is touched until the controls rest. :func:`kept` remembers a stage's
answers so that controls that do not change its arguments do not recompute it. Tests drive a
worksheet headless with :meth:`Worksheet.set` and read its results (``ws["result"]``).
"""

from ._base import Chart, Drawing, Worksheet, dropdown, kept, slider_style
from ._live import LiveCharts

__all__ = [
    "Chart",
    "Drawing",
    "LiveCharts",
    "Worksheet",
    "dropdown",
    "kept",
    "slider_style",
]

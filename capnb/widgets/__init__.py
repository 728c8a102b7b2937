"""Worksheet controls: ipywidgets wired to the step functions and to :mod:`capnb.charts`.

A worksheet object holds its controls, its current ``inputs`` and ``result``, and the charts it has
displayed. Changing a control recomputes the result through the step module (no maths here) and
updates every displayed chart in place (IPython display ids), so the charts stay ordinary cell outputs:
they update live in JupyterLab and appear in an exported report. Tests drive a worksheet headless with
:meth:`Worksheet.set` and read :attr:`Worksheet.result`.
"""

from ._base import Worksheet
from ._capacity import CapacityWorksheet
from ._elasticity import ElasticityWorksheet
from ._forecast import ForecastWorksheet
from ._memory import MemoryWorksheet

__all__ = [
    "CapacityWorksheet",
    "ElasticityWorksheet",
    "ForecastWorksheet",
    "MemoryWorksheet",
    "Worksheet",
]

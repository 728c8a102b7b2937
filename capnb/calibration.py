"""The old name of :mod:`capnb.latency.calibration`, kept so that existing code keeps importing it.

``capnb.calibration`` is the same module object as ``capnb.latency.calibration``.
"""

import sys

from .latency import calibration as _module

sys.modules[__name__] = _module

"""The old name of :mod:`capnb.elasticity.coldstart`, kept so that existing code keeps importing it.

``capnb.coldstart`` is the same module object as ``capnb.elasticity.coldstart``.
"""

import sys

from .elasticity import coldstart as _module

sys.modules[__name__] = _module

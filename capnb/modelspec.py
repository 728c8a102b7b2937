"""The old name of :mod:`capnb.data.modelspec`, kept so that existing code keeps importing it.

``capnb.modelspec`` is the same module object as ``capnb.data.modelspec``.
"""

import sys

from .data import modelspec as _module

sys.modules[__name__] = _module

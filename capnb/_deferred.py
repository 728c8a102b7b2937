"""Defer one third-party import that costs every capnb process about a second of CPU.

altair imports jsonschema, and jsonschema imports ``rfc3987_syntax`` (when it is installed, which
JupyterLab's ``jupyter-events`` brings through ``jsonschema[format-nongpl]``) to check the ``iri``
format. ``rfc3987_syntax`` builds an Earley parser of RFC 3987's grammar when it is imported: 0.94
s of a 1.4 s ``import altair`` on the 2-core machine (``python -X importtime -c "import altair"``),
paid by every worksheet kernel, every ``capnb`` command and every report, although altair never
checks that format (jsonschema's upstream issue 1428 asks for the same deferral).

:func:`install` puts a stand-in module under that name before jsonschema imports it. jsonschema
takes ``is_valid_syntax`` from it; the stand-in's function imports the real package on its first
call and hands over, and so does any other attribute asked of it. A check of an ``iri`` runs the
real parser, as before; only the moment the parser is built moves from import to first use.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

NAME = "rfc3987_syntax"


def _real() -> types.ModuleType:
    """The real package, imported now (the stand-in steps aside first)."""
    if isinstance(sys.modules.get(NAME), _StandIn):
        del sys.modules[NAME]
    return importlib.import_module(NAME)


class _StandIn(types.ModuleType):
    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(_real(), attr)


def _is_valid_syntax(term: str, value: str) -> bool:
    return _real().is_valid_syntax(term, value)


def install() -> bool:
    """Stand in for ``rfc3987_syntax`` until it is used; True if the stand-in was installed.

    Nothing is done when the package is not installed or was imported already.
    """
    spec = None if NAME in sys.modules else importlib.util.find_spec(NAME)
    if spec is None:
        return False
    stand_in = _StandIn(NAME, __doc__)
    stand_in.is_valid_syntax = _is_valid_syntax
    stand_in.__path__ = list(spec.submodule_search_locations or [])  # its submodules import
    sys.modules[NAME] = stand_in
    return True

"""Defer two third-party imports that cost every capnb process CPU it does not use.

**rfc3987_syntax** (about a second a process).

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

**dask.array** (about 0.3 s a process: ``dask.array`` brings ``scipy.fft`` with it). xarray asks,
the first time it wraps an array, whether the array is a dask array: it imports ``dask.array``
whenever dask is installed (capnb's scale-out needs it), although a worksheet or a ``capnb plan``
never makes one. :func:`install` has xarray's answer for dask (its cached duck-array module,
``xarray.namedarray.pycompat``) read ``dask.array`` only once something else imported it: before
that, no object can be a dask array, and the answer (no array type) is the one dask would give for
every object. Once ``dask.array`` is imported (``Dataset.chunk``, a dask cluster), the real types
answer. Nothing is done if xarray answered already or dask.array is loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

NAME = "rfc3987_syntax"
PYCOMPAT = "xarray.namedarray.pycompat"


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

    Nothing is done when the package is not installed or was imported already. xarray's check for
    dask arrays is deferred too (:func:`defer_dask_check`), now or when xarray is imported.
    """
    if PYCOMPAT in sys.modules:
        defer_dask_check(sys.modules[PYCOMPAT])
    elif not any(isinstance(finder, _AfterPycompat) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterPycompat())
    spec = None if NAME in sys.modules else importlib.util.find_spec(NAME)
    if spec is None:
        return False
    stand_in = _StandIn(NAME, __doc__)
    stand_in.is_valid_syntax = _is_valid_syntax
    stand_in.__path__ = list(spec.submodule_search_locations or [])  # its submodules import
    sys.modules[NAME] = stand_in
    return True


def defer_dask_check(pycompat: types.ModuleType) -> bool:
    """Have xarray's duck-array check import ``dask.array`` only once it is imported elsewhere.

    True if the deferral was put in place (False: xarray answered already, dask.array is loaded,
    or this xarray keeps no such cache).
    """
    cache = getattr(pycompat, "_cached_duck_array_modules", None)
    duck = getattr(pycompat, "DuckArrayModule", None)
    if not isinstance(cache, dict) or duck is None or "dask" in cache:
        return False
    if "dask.array" in sys.modules:
        return False

    class DaskOnceImported(duck):
        """xarray's record of dask: no array type until ``dask.array`` is imported."""

        def __init__(self) -> None:  # nothing imported yet
            pass

        @staticmethod
        def _real():
            cache["dask"] = real = duck("dask")  # the real record from now on
            return real

        @property
        def type(self):
            return self._real().type if "dask.array" in sys.modules else ()

        module = property(lambda self: self._real().module)
        version = property(lambda self: self._real().version)
        available = property(lambda self: self._real().available)

    cache["dask"] = DaskOnceImported()
    return True


class _AfterPycompat:
    """A finder that runs :func:`defer_dask_check` once xarray's pycompat module has executed."""

    def find_spec(self, name, path, target=None):
        if name != PYCOMPAT:
            return None
        sys.meta_path.remove(self)  # once: the module is found by the finders after this one
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            defer_dask_check(module)

        spec.loader.exec_module = exec_module
        return spec

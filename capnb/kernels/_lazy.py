"""Lazy compilation: a kernel is declared at import time and compiled on its first call.

numba compiles a gufunc with explicit signatures at decoration time, which would make ``import
capnb.memory`` pay for every kernel. :func:`guvectorize` here defers that to the first call and caches
the machine code on disk. When the package directory is read-only (a system-wide install) and numba
has no cache directory set, the cache goes to a per-user directory instead of failing.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["cache_dir", "guvectorize", "jit", "njit"]


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError:
        return False
    return True


def cache_dir() -> str:
    """Return the directory numba caches capnb's kernels in, choosing a writable one if needed.

    numba's own choice (``__pycache__`` beside the source, then its user-wide locator) is kept when
    the package directory is writable or ``NUMBA_CACHE_DIR`` is set. Otherwise the cache goes to
    ``$XDG_CACHE_HOME/capnb/numba`` (``~/.cache/capnb/numba``) or, failing that, the temp directory.
    """
    import numba

    if numba.config.CACHE_DIR:
        return numba.config.CACHE_DIR
    here = Path(__file__).parent
    if _writable(here / "__pycache__"):
        return str(here / "__pycache__")
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    for candidate in (Path(xdg) / "capnb" / "numba", Path(tempfile.gettempdir()) / "capnb-numba"):
        if _writable(candidate):
            numba.config.CACHE_DIR = str(candidate)
            return str(candidate)
    return ""  # nothing writable: numba compiles without a disk cache


class _LazyKernel:
    """A kernel compiled on first use; calls pass straight through to the compiled object."""

    def __init__(self, build: Callable[[], Callable], pyfunc: Callable):
        self._build = build
        self._compiled: Callable | None = None
        self._lock = threading.Lock()  # dask runs blocks in threads: compile once, not concurrently
        self.py_func = pyfunc
        self.__name__ = pyfunc.__name__
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc

    @property
    def compiled(self) -> Callable:
        """The numba object (compiled on first access)."""
        if self._compiled is None:
            with self._lock:
                if self._compiled is None:
                    self._compiled = self._build()
        return self._compiled

    def __call__(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    def __reduce__(self):
        # dask.distributed ships functions to workers by pickle: send the kernel's module and name
        # and let the worker compile (or load from its cache) its own copy.
        module = importlib.import_module(self.py_func.__module__)
        name = next(k for k, v in vars(module).items() if v is self)
        return (_kernel_by_name, (module.__name__, name))

    def __repr__(self) -> str:
        state = "compiled" if self._compiled is not None else "not compiled yet"
        return f"<capnb kernel {self.__name__} ({state})>"


def _kernel_by_name(module: str, name: str) -> _LazyKernel:
    return getattr(importlib.import_module(module), name)


def guvectorize(signatures: list[str], layout: str, *, parallel: bool = False):
    """Declare a numba gufunc with explicit dtype signatures and core-dim layout, compiled lazily.

    ``parallel=True`` selects numba's ``parallel`` target (threads over the broadcast dims).
    """

    def decorate(pyfunc: Callable) -> _LazyKernel:
        def build() -> Callable:
            import numba

            use_cache = bool(cache_dir())
            target = "parallel" if parallel else "cpu"
            return numba.guvectorize(
                signatures, layout, nopython=True, cache=use_cache, target=target
            )(pyfunc)

        return _LazyKernel(build, pyfunc)

    return decorate


def jit(signature: str, **options):
    """Declare an ``@njit`` loop with an explicit signature, compiled lazily on first call.

    numba compiles a function with an explicit signature at decoration time; this defers it to the
    first call (and caches it on disk), so that importing a step module compiles nothing.
    """

    def decorate(pyfunc: Callable) -> _LazyKernel:
        def build() -> Callable:
            import numba

            return numba.njit(signature, cache=bool(cache_dir()), **options)(pyfunc)

        return _LazyKernel(build, pyfunc)

    return decorate


def njit(pyfunc: Callable | None = None, **options):
    """``numba.njit`` with an on-disk cache in a writable directory.

    Without explicit signatures numba compiles on the first call, so this costs nothing at import
    beyond importing numba. Use it for the small scalar helpers that hold the formulas; they stay
    callable from other kernels.
    """

    def decorate(func: Callable) -> Callable:
        import numba

        return numba.njit(cache=bool(cache_dir()), **options)(func)

    return decorate(pyfunc) if pyfunc is not None else decorate

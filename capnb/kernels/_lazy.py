"""Lazy compilation: a kernel is declared at import time and compiled on its first call.

numba compiles a gufunc with explicit signatures at decoration time, which would make ``import
capnb.memory`` pay for every kernel. :func:`guvectorize` here defers that to the first call and caches
the machine code on disk. When the package directory is read-only (a system-wide install) and numba
has no cache directory set, the cache goes to a per-user directory instead of failing.

No kernel uses numba's ``parallel`` target: work is split over plain threads by :func:`over_threads`,
so any number of threads (dask's) may call any kernel at once, whatever numba's threading layer.

numba keys a cached kernel on its own source file only, so a kernel that calls a helper from another
module (the P:D fleet kernel calls the engine's step time) would load machine code compiled from
the helper's old source after an upgrade in place. Every capnb kernel's cache entry is therefore
stamped with a digest of the whole kernel package as well (:func:`stamp_kernel_caches`): any change
to any kernel module recompiles them all.

Processes that share the disk cache compile a kernel one at a time (:func:`compile_lock`, a lock
per kernel). numba's cache is not safe against two processes writing one function's entries at
once: each numbers a function's data files in the order it compiles its overloads, so two
processes can file different overloads under one number, and a gufunc's two files can come from
different processes (numba issues #4807 and #10128). A kernel then loads another overload's
machine code and crashes (a fresh install did, running the report's plan beside its worksheets'
kernels). Under the kernel's lock a second process finds the first one's work in the cache and
loads it; two processes compile two different kernels at once (a cold cache is filled on every
core). A kernel's helpers are compiled inside its compile, each under its own lock: the locks are
taken from caller to callee, and kernels do not call each other in a cycle, so no two processes
can each hold a lock the other waits for.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import itertools
import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "PARALLEL_MIN_WORK",
    "cache_dir",
    "compile_lock",
    "guvectorize",
    "jit",
    "kernels_digest",
    "njit",
    "over_threads",
    "stamp_kernel_caches",
    "threads_for",
]


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError:
        return False
    return True


@functools.cache
def kernels_digest() -> bytes:
    """SHA-256 of every module of the kernel package (names and contents, in name order)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.digest()


def _in_kernels(py_file: str) -> bool:
    try:
        return Path(py_file).resolve().parent == Path(__file__).resolve().parent
    except (OSError, TypeError):
        return False


def stamp_kernel_caches() -> bool:
    """Make numba's cache of each capnb kernel depend on the whole kernel package's source.

    numba stores with a cached function the stamp of its own source file and reloads the machine
    code while that stamp holds; callees from other modules are compiled into it but not stamped.
    Each of numba's source-file cache locators is replaced by a subclass whose stamp, for a
    function defined in ``capnb/kernels``, also holds :func:`kernels_digest` (other functions keep
    numba's stamp). Returns False when this numba lays its cache out otherwise (nothing changed;
    ``tests/test_lazy.py`` fails on that numba).
    """
    try:
        from numba.core import caching

        impl = caching.CacheImpl
        backed = caching._SourceFileBackedLocatorMixin
        classes = list(impl._locator_classes)
    except AttributeError:
        return False
    if getattr(impl, "_capnb_stamped", False):
        return True

    def stamped(base):
        def get_source_stamp(self):
            stamp = base.get_source_stamp(self)
            return (stamp, kernels_digest()) if _in_kernels(self._py_file) else stamp

        return type(f"Capnb{base.__name__}", (base,), {"get_source_stamp": get_source_stamp})

    impl._locator_classes = [stamped(c) if issubclass(c, backed) else c for c in classes]
    impl._capnb_stamped = True
    return True


def cache_dir() -> str:
    """Return the directory numba caches capnb's kernels in, choosing a writable one if needed.

    numba's own choice (``__pycache__`` beside the source, then its user-wide locator) is kept when
    the package directory is writable or ``NUMBA_CACHE_DIR`` is set. Otherwise the cache goes to
    ``$XDG_CACHE_HOME/capnb/numba`` (``~/.cache/capnb/numba``) or, failing that, the temp directory.
    """
    import numba

    stamp_kernel_caches()
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


_FILE_LOCKS: dict = {}
#: How long a compile waits for another process's (a cold compile of every kernel takes minutes).
LOCK_TIMEOUT_S = 900.0


@contextlib.contextmanager
def compile_lock(kernel: str):
    """Hold ``kernel``'s compile lock: one process at a time loads or writes its disk cache.

    ``kernel`` names the Python function (``module.qualname``). numba's own (re-entrant, per
    process) compiler lock is taken first, then a file lock in the cache directory
    (``capnb-compile/<kernel>.lock``, the ``filelock`` package), always in that order, so nested
    compiles (a kernel's helpers) and threads cannot deadlock. Without a disk cache there is
    nothing to share and only numba's lock is held.
    """
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        directory = cache_dir()
        if not directory:
            yield
            return
        path = os.path.join(directory, "capnb-compile", f"{kernel}.lock")
        lock = _FILE_LOCKS.get(path)
        if lock is None:
            from filelock import FileLock

            os.makedirs(os.path.dirname(path), exist_ok=True)
            lock = _FILE_LOCKS[path] = FileLock(path, timeout=LOCK_TIMEOUT_S)
        from filelock import Timeout

        try:
            lock.acquire()
        except Timeout:
            raise RuntimeError(
                f"another process has held capnb's compile lock {lock.lock_file} for "
                f"{LOCK_TIMEOUT_S:.0f} s; if no capnb process is compiling, delete that file (or "
                "set NUMBA_CACHE_DIR to another directory)"
            ) from None
        try:
            yield
        finally:
            lock.release()


def _name(func: Callable) -> str:
    """``module.qualname`` of a kernel's Python function, as a file name (``<locals>`` -> ``_locals_``)."""
    return re.sub(r"[^\w.-]", "_", f"{func.__module__}.{func.__qualname__}")


def _locked(dispatcher):
    """A numba dispatcher whose compiles (and cache loads) happen under :func:`compile_lock`."""
    compile_one = dispatcher.compile
    kernel = _name(dispatcher.py_func)

    def compile(sig):
        if isinstance(sig, tuple) and sig in dispatcher.overloads:
            return compile_one(sig)  # compiled already in this process: nothing to load or write
        with compile_lock(kernel):
            return compile_one(sig)

    dispatcher.compile = compile
    return dispatcher


class _LazyKernel:
    """A kernel compiled on first use; calls pass straight through to the compiled object."""

    def __init__(
        self,
        build: Callable[[], Callable],
        pyfunc: Callable,
        *,
        core_ndims: tuple[int, ...] | None = None,
    ):
        self._build = build
        self._core_ndims = core_ndims  # set: a gufunc whose outer loop may be split over threads
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
                    with compile_lock(_name(self.py_func)):
                        self._compiled = self._build()
        return self._compiled

    def __call__(self, *args, **kwargs):
        if self._core_ndims is not None and not kwargs:
            return _over_threads(self.compiled, args, self._core_ndims)
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


# -- parallelism: one policy ---------------------------------------------------------------------
#: capnb's one parallelism threshold. A call is split over threads when it does at least this much
#: work (its independent pieces times the elementary steps of each); below it, one thread does all,
#: since starting threads costs more than they save. Used only where a benchmark shows a second
#: thread pays (BENCHMARKS.md): the autoscaling sweep, the analytic latency curves and the memory
#: sweep's large grids. Scale-out beyond one machine is dask's (``chunks=``).
PARALLEL_MIN_WORK = 2_000_000


def threads_for(size: int, work: int) -> int:
    """Threads a call of ``size`` independent pieces and ``work`` elementary steps gets.

    numba's thread count (``numba.set_num_threads``), at most one per piece; 1 below
    :data:`PARALLEL_MIN_WORK`.
    """
    import numba

    if work < PARALLEL_MIN_WORK:
        return 1
    return max(1, min(numba.get_num_threads(), size))


def over_threads(
    run: Callable[[int, int], object],
    size: int,
    work: int,
    *,
    pieces: int = 1,
    cuts: list[int] | None = None,
):
    """Run ``run(first, stop)`` over ``range(size)``: once, or in contiguous parts on threads.

    The kernels release the GIL (numba ``nogil`` loops, numpy's ufunc machinery around a gufunc),
    so plain Python threads share the cores, and every piece is computed as in one call: the
    answer is the same on any number of threads. ``pieces`` parts per thread balance pieces of
    unequal cost. ``cuts`` (sorted, within ``range(size)``) are where a part may end, when the
    work of a part is cheaper if it stays between two cuts; each part then ends at the cut closest
    to where ``pieces`` would end it. (numba's ``parallel`` target would compile each kernel a
    second time, seconds on a fresh install, and needs a thread-safe threading layer under dask.)
    """
    threads = threads_for(size, work)
    if threads < 2:
        run(0, size)
        return
    parts = min(size, pieces * threads)
    bounds = [size * k // parts for k in range(parts + 1)]
    if cuts:
        ends = sorted({0, size, *cuts})
        bounds = sorted({min(ends, key=lambda c, b=b: abs(c - b)) for b in bounds})
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        done = [pool.submit(run, a, b) for a, b in itertools.pairwise(bounds)]
        for future in done:
            future.result()


def _over_threads(func: Callable, args: tuple, core_ndims: tuple[int, ...]):
    """Call a gufunc with its outer loop split along its longest loop axis, by :func:`over_threads`.

    The work of a call is its cells times the core elements each cell reads.
    """
    import numpy as np

    arrays = [np.asarray(a) for a in args]
    loops = [a.shape[: a.ndim - k] for a, k in zip(arrays, core_ndims, strict=True)]
    shape = np.broadcast_shapes(*loops)
    cells = int(np.prod(shape)) if shape else 1
    per_cell = sum(
        int(np.prod(a.shape[a.ndim - k :])) for a, k in zip(arrays, core_ndims, strict=True)
    )
    if not shape or threads_for(max(shape), cells * max(per_cell, 1)) < 2:
        return func(*args)
    # cut the longest loop axis; inputs that span it are cut, the others (broadcast) go whole
    axis = int(np.argmax(shape))
    depth = len(shape)
    spans = [len(loop) - depth + axis if len(loop) > depth - 1 - axis else None for loop in loops]
    cut = [s is not None and s >= 0 and loops[i][s] == shape[axis] for i, s in enumerate(spans)]

    def inputs(part: slice) -> list:
        return [
            x[(slice(None),) * spans[i] + (part,)] if cut[i] else x for i, x in enumerate(arrays)
        ]

    # the first row gives the outputs' dtypes and core shapes; the rest write in place
    first = func(*inputs(slice(0, 1)))
    single = not isinstance(first, tuple)
    first = (first,) if single else first
    outputs = [np.empty(shape + part.shape[depth:], dtype=part.dtype) for part in first]
    head = (slice(None),) * axis
    for out, part in zip(outputs, first, strict=True):
        out[(*head, slice(0, 1))] = part

    def run(a: int, b: int) -> None:
        part = slice(a + 1, b + 1)
        if b > a:
            func(*inputs(part), *(out[(*head, part)] for out in outputs))

    over_threads(run, shape[axis] - 1, cells * max(per_cell, 1), pieces=4)
    return outputs[0] if single else tuple(outputs)


def _core_ndims(layout: str) -> tuple[int, ...]:
    inputs = layout.split("->")[0]
    return tuple(0 if part.strip("()") == "" else part.count(",") + 1 for part in
                 inputs.replace("),(", ")|(").split("|"))  # fmt: skip


def guvectorize(signatures: list[str], layout: str, *, threads: bool = False):
    """Declare a numba gufunc with explicit dtype signatures and core-dim layout, compiled lazily.

    ``threads=True`` splits large calls over Python threads (see :func:`_over_threads`), for
    kernels whose cells are costly.
    """

    def decorate(pyfunc: Callable) -> _LazyKernel:
        def build() -> Callable:
            import numba

            use_cache = bool(cache_dir())
            return numba.guvectorize(signatures, layout, nopython=True, cache=use_cache)(pyfunc)

        cores = _core_ndims(layout) if threads else None
        return _LazyKernel(build, pyfunc, core_ndims=cores)

    return decorate


def _refuse_parallel(options: dict) -> None:
    if options.get("parallel"):
        raise ValueError(
            "capnb kernels do not use numba's parallel target: split the work with over_threads"
        )


def jit(signature: str, **options):
    """Declare an ``@njit`` loop with an explicit signature, compiled lazily on first call.

    numba compiles a function with an explicit signature at decoration time; this defers it to the
    first call (and caches it on disk), so that importing a step module compiles nothing.
    """
    _refuse_parallel(options)

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
    callable from other kernels. ``parallel=True`` is refused (see the module docstring).
    """
    _refuse_parallel(options)

    def decorate(func: Callable) -> Callable:
        import numba

        compiled = numba.njit(cache=bool(cache_dir()), **options)(func)
        return _locked(compiled) if cache_dir() else compiled

    return decorate(pyfunc) if pyfunc is not None else decorate

"""Kernels compile on first use, are cached on disk, and find a writable cache directory."""

import pickle
import subprocess
import sys

import numba
import pytest

from capnb.kernels import _lazy
from capnb.kernels import memory as kernels


def test_importing_step_modules_compiles_no_kernel():
    code = (
        "import capnb.memory, capnb.kernels.memory as k; "
        "print(k.footprint._compiled is None and k.largest_fitting_concurrency._compiled is None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_cache_falls_back_to_a_user_directory_when_the_package_is_read_only(monkeypatch, tmp_path):
    package = _lazy.__file__.rsplit("/", 1)[0]
    monkeypatch.setattr(
        _lazy,
        "_writable",
        lambda path: (
            not str(path).startswith(package)
            and _lazy.Path(path).mkdir(parents=True, exist_ok=True) is None
        ),
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    assert _lazy.cache_dir() == str(tmp_path / "capnb" / "numba")
    assert numba.config.CACHE_DIR == str(tmp_path / "capnb" / "numba")


def test_an_explicit_numba_cache_dir_is_respected(monkeypatch, tmp_path):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    assert _lazy.cache_dir() == str(tmp_path)


def test_kernels_pickle_by_name_for_dask_workers():
    restored = pickle.loads(pickle.dumps(kernels.largest_fitting_concurrency))
    assert restored is kernels.largest_fitting_concurrency
    assert "largest_fitting_concurrency" in repr(restored)


def test_compiled_code_is_cached_on_disk(tmp_path):
    code = (
        "import capnb.memory as m; m.max_concurrency(model='Llama-3.1-8B', gpu='L4', "
        "tensor_parallel=1, seq_len=1024)"
    )
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    assert list(tmp_path.rglob("*.nbi")), "numba wrote no cache index"


def test_numbas_parallel_target_is_refused():
    # work is split over plain threads (over_threads): no kernel may launch numba parallel regions
    with pytest.raises(ValueError, match="over_threads"):
        _lazy.njit(parallel=True)
    with pytest.raises(ValueError, match="over_threads"):
        _lazy.jit("void()", parallel=True)


def test_a_second_process_compiles_only_after_the_first_lets_go_of_the_cache(tmp_path):
    # numba's cache is not safe against two processes writing one function's entries at once
    # (numba #4807, #10128): a process that holds a kernel's compile lock keeps every other
    # process's compile of that kernel waiting (here: every kernel of the memory step)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import contextlib, sys, time; from capnb.kernels import _lazy, memory\n"
         "kernels = [k.py_func for k in vars(memory).values() if hasattr(k, 'py_func')]\n"
         "with contextlib.ExitStack() as held:\n"
         "    for k in kernels: held.enter_context(_lazy.compile_lock(_lazy._name(k)))\n"
         "    print('held', flush=True); time.sleep(4)\n"
         "print('released', flush=True)"],
        env={"NUMBA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    code = (
        "import time; t = time.monotonic(); import capnb.memory as m; "
        "m.max_concurrency(model='Llama-3.1-8B', gpu='L4', tensor_parallel=1, seq_len=1024); "
        "print(time.monotonic() - t)"
    )
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    waited = subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True,
                            text=True)  # fmt: skip
    assert holder.wait(timeout=30) == 0
    with holder.stdout:
        assert holder.stdout.read().strip() == "released"
    # it started while the lock was held, so its first compile waited for the rest of the 4 s
    assert float(waited.stdout.split()[-1]) > 2.0
    assert list(tmp_path.rglob("*.nbi")), "numba wrote no cache index"


def test_a_held_kernel_lock_does_not_hold_other_kernels(tmp_path):
    # a cold cache fills on every core: another kernel compiles while one kernel's lock is held
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from capnb.kernels import _lazy, memory\n"
         "with _lazy.compile_lock(_lazy._name(memory.footprint.py_func)):\n"
         "    print('held', flush=True); time.sleep(120)"],
        env={"NUMBA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        code = ("import numpy; from capnb.kernels import latency\n"
                "print(latency._sorted_quantile(numpy.arange(5.0), 0.5))")  # fmt: skip
        env = {"NUMBA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
        done = subprocess.run([sys.executable, "-c", code], check=True, env=env,
                              capture_output=True, text=True, timeout=100)  # fmt: skip
        assert float(done.stdout) == 2.0
        assert holder.poll() is None  # compiled and cached while the other lock was still held
        assert list((tmp_path).rglob("*_sorted_quantile*.nbi"))
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_helpers_compile_under_the_compile_lock(monkeypatch):
    entered = []
    real = _lazy.compile_lock

    def counting(kernel):
        entered.append(kernel)
        return real(kernel)

    monkeypatch.setattr(_lazy, "compile_lock", counting)

    @_lazy.njit
    def twice(x):
        return 2 * x

    assert twice(3) == 6 and twice(2.5) == 5.0  # two overloads, each compiled under the lock
    assert len(entered) == 2 and set(entered) == {_lazy._name(twice.py_func)}
    assert entered[0].endswith("._locals_.twice")  # a file name on every system
    assert twice(4) == 8 and len(entered) == 2  # a compiled overload takes no lock


def test_every_reference_module_is_in_the_one_registry():
    import importlib
    from pathlib import Path

    from benchmarks import reference

    folder = Path(reference.__file__).parent
    modules = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    assert modules  # the references the tests and benchmarks compare the kernels with
    for name in modules:
        module = importlib.import_module(f"benchmarks.reference.{name}")
        if name == "elasticity_numpy":
            continue  # elasticity's table names its numpy half
        assert module.REGISTRY, name
        for kernel, implementations in module.REGISTRY.items():
            assert reference.REGISTRY[kernel] is implementations, (name, kernel)


def test_a_compile_lock_held_too_long_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_lazy, "LOCK_TIMEOUT_S", 0.2)
    monkeypatch.setattr(_lazy, "_FILE_LOCKS", {})
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from filelock import FileLock\n"
         f"with FileLock({str(tmp_path / 'capnb-compile' / 'some.kernel.lock')!r}):\n"
         "    print('held', flush=True); time.sleep(3)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    with holder.stdout:
        assert holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(RuntimeError, match="capnb-compile/some.kernel.lock"),
            _lazy.compile_lock("some.kernel"),
        ):
            pass
    holder.wait(timeout=30)


def test_over_threads_ends_parts_at_the_cuts_given(monkeypatch):
    # parts of work that is cheaper between two cuts (Knative's counts per target) end at them
    import numba

    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    parts = []
    _lazy.over_threads(lambda a, b: parts.append((a, b)), 90, 10**9, pieces=4, cuts=[30, 60])
    assert sorted(parts) == [(0, 30), (30, 60), (60, 90)]
    parts.clear()
    _lazy.over_threads(lambda a, b: parts.append((a, b)), 90, 10**9, pieces=4)
    assert len(parts) == 8 and sorted(parts)[0][0] == 0 and sorted(parts)[-1][1] == 90


def test_a_kernels_cache_is_stamped_with_the_whole_kernel_package():
    # numba stamps a cached function with its own file only: the P:D fleet kernel (pd.py) kept the
    # engine's old step time (engine.py) from the disk cache after the step changed. Every capnb
    # kernel's stamp now also holds a digest of the kernel package; other functions keep numba's.
    from numba.core import caching

    from capnb.kernels import _lazy, pd

    assert _lazy.stamp_kernel_caches()  # this numba's cache layout is the one patched
    classes = caching.CacheImpl._locator_classes
    assert any(c.__name__.startswith("Capnb") for c in classes)

    def stamp_of(py_file):
        def probe():
            pass

        locator = next(filter(None, (c.from_function(probe, py_file) for c in classes)))
        return locator.get_source_stamp()

    kernel = stamp_of(pd.__file__)
    assert isinstance(kernel, tuple) and kernel[1] == _lazy.kernels_digest()
    assert not isinstance(stamp_of(__file__), tuple)  # a function outside the kernels: numba's

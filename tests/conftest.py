"""Shared test fixtures: hypothesis settings, the plan cache, a dask cluster and the shared report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, settings

# capnb.plan._cache.VARIABLE, named here: capnb is not imported before the tests
PLAN_CACHE = "CAPNB_PLAN_CACHE"

# Kernels compile on their first call, so no example may have a deadline. The suite draws the same
# examples on every run (derandomize: CI on a clean clone is the same run twice); the "explore"
# profile draws new ones, more of them (CAPNB_HYPOTHESIS_PROFILE=explore pytest tests/test_fuzz_*),
# and a failure it finds becomes an @example or a row of test_bad_inputs.
settings.register_profile(
    "capnb",
    deadline=None,
    max_examples=60,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore", deadline=None, max_examples=600, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("CAPNB_HYPOTHESIS_PROFILE", "capnb"))


def pytest_configure(config):
    """Share built plans between this run's processes (``capnb.plan._cache``), in a fresh folder.

    Set here, in the first process, before pytest-xdist starts its workers: the workers and every
    kernel they start (nbval's, JupyterLab's, the report's) inherit it, so the bundled defaults'
    plan is built once a run and read back by every test and worksheet that asks for it again.
    """
    # Python's bytecode cache on for the run (Python's default; some containers turn it off): the
    # suite starts about a hundred processes (workers, kernels, `capnb` commands), and without the
    # cache each compiles capnb's sources again on import and pytest rewrites every test module
    # in each worker. Popped here, before pytest-xdist starts its workers, so they inherit it.
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        _compile_early(config)
    if os.environ.get(PLAN_CACHE) or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    folder = tempfile.mkdtemp(prefix="capnb-plan-cache-")
    os.environ[PLAN_CACHE] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


#: What each early compiling process runs: a share of the heaviest kernels, by tiny calls.
_COMPILE_SHARE = """
import sys
from benchmarks import _first_calls
if sys.argv[1] == "engine":
    from capnb.kernels import engine
    engine.engine_curve.compiled
else:
    for group in (_first_calls.elasticity, _first_calls.forecast):
        for _, call in group():
            call()
"""


def _compile_early(config) -> None:
    """Under pytest-xdist, two processes compile the heaviest kernels while the workers start.

    With a cold kernel cache, the first plan a worker builds needs the engine curve's kernel (about
    11 CPU-seconds to compile) and the autoscaling loop's (about 10): both workers' first tests
    need both, and one waited for the other's compile lock (``capnb.kernels._lazy``), about twenty
    core-seconds of a fresh run's first minute. Started here, in the first process, before the
    workers: one process compiles the engine curve (the first plans wait for it first), the other
    the autoscaling loop and the Monte Carlo months, into the shared cache; with a warm cache they
    only load them. Processes, not threads: a compile's ``warnings.catch_warnings`` would reset a
    test's warning filters under it. A failure is left to the tests that call the kernel, which
    compile it again and say what failed.
    """
    if not config.pluginmanager.hasplugin("xdist") or not config.getoption("numprocesses", None):
        return
    root = str(config.rootpath)
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _COMPILE_SHARE, share],
            cwd=root,
            env={**os.environ, "PYTHONPATH": path},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for share in ("engine", "loop")
    ]

    def stop():  # long done by the end of a run; a run stopped early does not wait for them
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()

    config.add_cleanup(stop)


@pytest.fixture(autouse=True)
def _no_plan_cache_when_patched(request):
    """A test that patches capnb builds its plans afresh: a stored plan would not see the patch."""
    if "monkeypatch" in request.fixturenames:
        request.getfixturevalue("monkeypatch").delenv(PLAN_CACHE, raising=False)


@pytest.fixture(scope="session")
def dask_client():
    """A two-worker dask.distributed LocalCluster (threads, no dashboard) for the whole session."""
    distributed = pytest.importorskip("distributed")
    # ":0": the scheduler's HTTP server takes a free port (None still binds 8787, which another
    # test session on the same machine may hold)
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def full_report(tmp_path_factory, worker_id):
    """The main job's report on the bundled defaults: every worksheet, executed once per session.

    Under pytest-xdist the workers share one report: the first to ask writes it into the run's
    common temporary folder, holding a lock, and the others read the list of files it wrote.
    """
    import fcntl
    import json
    from pathlib import Path

    from capnb.report import run_report

    if worker_id == "master":  # one process
        return run_report(None, tmp_path_factory.mktemp("report"), jobs=2, progress=False)
    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker
    listing = shared / "full_report.json"
    with open(shared / "full_report.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not listing.exists():
            written = run_report(None, shared / "report", jobs=2, progress=False)
            listing.write_text(json.dumps([str(p) for p in written]))
    return [Path(p) for p in json.loads(listing.read_text())]


@pytest.fixture(scope="session")
def small_plan(tmp_path_factory, worker_id):
    """A plan config small enough for a test (the m-small trace, two GPUs, two policies), saved.

    One file for the whole run (under pytest-xdist, in the workers' common temporary folder): the
    tests that build it (a report, ``capnb plan``, the report's parameters) share one build
    through the plan cache, which knows a plan by its config's path too.
    """
    import fcntl

    from capnb.plan import PlanConfig, save_config

    config = PlanConfig().replace(
        traffic={"trace": "servegen-m-small", "trials": 200},
        serving={"gpus": ("H100-SXM", "H200"), "tensor_parallel": (1,)},
        elasticity={"policies": ("hpa", "fixed"), "scale_up_threshold": (0.7,),
                    "cooldown_s": (900.0,)},
    )  # fmt: skip
    if worker_id == "master":
        return save_config(config, tmp_path_factory.mktemp("small_plan") / "plan.toml")
    folder = tmp_path_factory.getbasetemp().parent / "small_plan"
    folder.mkdir(exist_ok=True)
    with open(folder / "plan.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "plan.toml").is_file():
            save_config(config, folder / "plan.toml")
    return folder / "plan.toml"


def _tooltips(spec: dict) -> list[dict]:
    """Every tooltip encoding of a Vega-Lite spec, its layers and concatenations included."""
    found = list(spec.get("encoding", {}).get("tooltip", []))
    for key in ("layer", "vconcat", "hconcat"):
        for part in spec.get(key, []):
            found += _tooltips(part)
    return found


@pytest.fixture
def tooltips():
    """The tooltips of a chart's spec (``chart.to_dict()``): the chart tests' one walker."""
    return _tooltips

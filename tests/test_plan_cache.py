"""The suite's plan cache (``capnb.plan._cache``): a stored plan is the plan, found only by its inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from capnb import plan
from capnb.plan import _cache


@pytest.fixture
def config(tmp_path):
    """A small plan on a two-day rate series of its own (a file the config names)."""
    times = pd.date_range("2026-03-02", periods=288, freq="10min")
    qps = 40 + 20 * np.sin(2 * np.pi * np.arange(times.size) / 144)
    trace = tmp_path / "rates.csv"
    pd.DataFrame({"timestamp": times, "qps": qps}).to_csv(trace, index=False)
    return plan.read_config(
        traffic={"trace": str(trace), "trials": 50},
        serving={"gpus": ("H100-SXM",), "tensor_parallel": (1,)},
        elasticity={"policies": ("fixed",), "scale_up_threshold": (0.7,),
                    "cooldown_s": (900.0,), "step_s": 5.0, "backtest_days": 0},
    )  # fmt: skip


def test_a_stored_plan_is_the_built_plan_with_its_warnings(config, tmp_path, monkeypatch):
    monkeypatch.setenv(_cache.VARIABLE, str(tmp_path / "cache"))
    with warnings.catch_warnings(record=True) as first:
        warnings.simplefilter("always")
        built = plan.build(config)
    assert len(list((tmp_path / "cache").glob("*.pickle"))) == 1
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        read = plan.build(config)
    xr.testing.assert_identical(read, built)
    assert read.attrs == built.attrs and read is not built
    said = [(w.category, str(w.message)) for w in first]
    assert said and [(w.category, str(w.message)) for w in again] == said
    monkeypatch.delenv(_cache.VARIABLE)  # and it is the plan a build without the cache gives
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)
        xr.testing.assert_identical(plan.build(config), built)


def test_the_key_follows_every_input(config, tmp_path):
    key = _cache.key(config)
    assert _cache.key(plan.read_config(config)) == key
    assert _cache.key(config.replace(sla="tpot=60ms")) != key
    assert _cache.key(config.replace(elasticity={"step_s": 10.0})) != key
    trace = tmp_path / "rates.csv"
    trace.write_text(trace.read_text().replace("40.0", "41.0", 1))  # the file the config names
    assert _cache.key(config) != key


def test_caching_is_off_without_the_variable_and_a_failure_stores_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(_cache.VARIABLE, raising=False)
    assert _cache.folder() is None
    calls = []
    assert _cache.cached_build(plan.PlanConfig(), lambda: calls.append(1) or "built") == (
        "built",
        [],
    )
    monkeypatch.setenv(_cache.VARIABLE, str(tmp_path))

    def fails():
        raise plan.PlanError("infeasible")

    with pytest.raises(plan.PlanError):
        _cache.cached_build(plan.PlanConfig(), fails)
    assert not list(tmp_path.glob("*.pickle"))


@pytest.mark.parametrize("stop", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_store_that_fails_leaves_no_partial_file(tmp_path, monkeypatch, stop):
    # a full disk or Ctrl-C while the plan was stored left <key>.<pid>.partial in the cache for
    # good, and a full disk failed the build the cache was only to save
    monkeypatch.setenv(_cache.VARIABLE, str(tmp_path))

    def replace(source, target):
        raise stop

    monkeypatch.setattr(_cache.os, "replace", replace)
    if isinstance(stop, OSError):  # the plan was built: it is the answer, only not kept
        assert _cache.cached_build(plan.PlanConfig(), lambda: "built") == ("built", [])
    else:
        with pytest.raises(KeyboardInterrupt):
            _cache.cached_build(plan.PlanConfig(), lambda: "built")
    assert [p.suffix for p in tmp_path.iterdir()] == [".lock"]

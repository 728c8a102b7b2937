"""The capacity step's quick paths give the Dataset its general path gives, to the attribute.

A worksheet plans one curve at one SLA and one target on every change of a control: the search of
one curve, the plan of one cell and the pricing of a sweep for one number run on numpy and xarray
Variables instead of aligned DataArrays, and what a curve alone decides is kept per curve. Each is
compared here with the general path (the quick path switched off).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
import xarray as xr

from capnb import capacity, charts, data, latency
from capnb.capacity import _safe, _sweep
from capnb.errors import InputError
from capnb.memo import Kept


def _same(quick: xr.Dataset, general: xr.Dataset) -> None:
    assert quick.identical(general)
    assert list(quick.data_vars) == list(general.data_vars)
    assert list(quick.coords) == list(general.coords)
    for name, variable in quick.variables.items():
        other = general.variables[name]
        assert (variable.dims, variable.dtype, variable.attrs) == (
            other.dims,
            other.dtype,
            other.attrs,
        ), name
    assert quick.attrs == general.attrs


@pytest.fixture
def general_path(monkeypatch):
    """Run a call with every quick path switched off (and nothing kept per curve)."""

    def run(function, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(_safe, "_one_curve", lambda *a: None)
            m.setattr(_safe, "_one_cell", lambda *a: False)
            m.setattr(_sweep, "_number", lambda value: False)
            m.setattr(_safe, "_CURVES", Kept())
            return function(*args, **kwargs)

    return run


@pytest.fixture(scope="module")
def curves():
    measured = [data.load_latency_curve(n) for n in ("dstack-vllm-mi300x-short",
                                                      "dstack-tgi-mi300x-long")]  # fmt: skip
    work = latency.workload(prompt_tokens=[1000] * 8, output_tokens=[200] * 8)
    analytic = latency.analytic(
        "Llama-3.1-8B", "H100-SXM", 1, workload=work, concurrency=latency.concurrency_grid(128)
    ).squeeze(["model", "gpu", "tensor_parallel"])  # scalar coordinates, as the worksheet's
    analytic.attrs.update(name="analytic", model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1)
    return [*measured, analytic]


@pytest.mark.parametrize("metric", ["ttft", "tpot"])
@pytest.mark.parametrize("sla", [0.05, 0.4, 2.0, 1e4, [0.05, 0.5, 2.0, 100.0]])
@pytest.mark.parametrize("memory_limit", ["auto", None, 3, 0])
def test_the_search_of_one_curve_is_the_general_search(curves, general_path, metric, sla,
                                                       memory_limit):  # fmt: skip
    for curve in curves:
        kwargs = {"metric": metric, "memory_limit": memory_limit}
        _same(
            capacity.safe_concurrency(curve, sla, **kwargs),
            general_path(capacity.safe_concurrency, curve, sla, **kwargs),
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"buffer": 2},
        {"buffer": 0},
        {"buffer_qps": 3.0},
        {"usd_per_gpu_hour": 1.5, "tensor_parallel": 2},
        {"memory_limit": None, "buffer": None},
    ],
)
@pytest.mark.parametrize("target", [0.0, 7.5, 300.0, xr.DataArray(4.0)])
def test_the_plan_of_one_cell_is_the_general_plan(curves, general_path, kwargs, target):
    for curve in curves:
        for sla in (0.3, 2.0, 50.0):
            _same(
                capacity.plan(curve, sla, target, metric="ttft", **kwargs),
                general_path(capacity.plan, curve, sla, target, metric="ttft", **kwargs),
            )
    # no tensor parallelism or GPU recorded: no cost, the same way
    for drop in ("tensor_parallel", "gpu"):
        bare = curves[0].copy()
        bare.attrs = {k: v for k, v in bare.attrs.items() if k != drop}
        _same(
            capacity.plan(bare, 2.0, target, metric="ttft", **kwargs),
            general_path(capacity.plan, bare, 2.0, target, metric="ttft", **kwargs),
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"buffer": 2, "buffer_qps": 1.0},
        {"buffer": -1},
        {"buffer_qps": -1.0},
        {"buffer": -1, "tensor_parallel": 0},
        {"tensor_parallel": 0, "usd_per_gpu_hour": -1},
    ],
)
def test_a_plan_of_one_cell_refuses_what_the_general_plan_refuses(curves, general_path, kwargs):
    with pytest.raises(InputError) as general:
        general_path(capacity.plan, curves[0], 2.0, 1.0, metric="ttft", **kwargs)
    with pytest.raises(InputError, match=None) as quick:
        capacity.plan(curves[0], 2.0, 1.0, metric="ttft", **kwargs)
    assert str(quick.value) == str(general.value)


@pytest.fixture(scope="module")
def searched():
    work = latency.workload(prompt_tokens=[1000] * 8, output_tokens=[200] * 8)
    return capacity.sweep(
        ["Llama-3.1-8B", "Llama-3.1-70B"], ["H100-SXM", "A100-80GB", "L4"], [1, 2, 4], [1200, 4096],
        [0.5, 5.0], workload=work, metric="ttft",
    )  # fmt: skip


@pytest.mark.parametrize("target", [0.0, 20.0, 1e4, xr.DataArray(3.0)])
@pytest.mark.parametrize("kwargs", [{}, {"buffer": 0}, {"buffer_qps": 4.0}])
def test_a_sweep_priced_for_one_number_is_priced_as_for_any_target(searched, general_path, target,
                                                                   kwargs):  # fmt: skip
    _same(
        capacity.price(searched, target, **kwargs),
        general_path(capacity.price, searched, target, **kwargs),
    )


def test_a_target_over_slots_is_priced_the_general_way(searched, general_path):
    slots = xr.DataArray([1.0, 30.0], dims="slot", coords={"slot": [0, 1]})
    _same(capacity.price(searched, slots), general_path(capacity.price, searched, slots))


def test_what_a_curve_decides_is_kept_only_while_it_lives_unchanged(curves):
    curve = curves[0].copy()
    first = capacity.plan(curve, 2.0, 20.0, metric="ttft")
    assert capacity.plan(curve, 2.0, 20.0, metric="ttft").identical(first)
    # another tensor parallelism recorded: the memory limit is worked out again
    curve.attrs["tensor_parallel"] = 4
    fresh = curve.copy()  # a new object: nothing kept for it
    _same(capacity.plan(curve, 2.0, 20.0, metric="ttft"),
          capacity.plan(fresh, 2.0, 20.0, metric="ttft"))  # fmt: skip
    # a variable replaced: the envelope is worked out again
    curve["latency"] = curve.latency * 2
    assert float(capacity.safe_concurrency(curve, 2.0, metric="ttft").latency_floor) == 2 * float(
        first.latency_floor
    )
    # the entry goes with its curve
    kept = _safe._CURVES
    del curve, fresh
    gc.collect()
    assert not any(entry[0]() is None for entry in kept._entries.values())


def test_the_contrast_reads_the_kept_envelope_as_it_would_its_own(curves):
    curve = curves[0].copy()
    once = capacity.contrast(curve, 2.0, 20.0, metric="ttft")
    again = capacity.contrast(curve, 2.0, 20.0, metric="ttft")  # from what is kept
    assert again.identical(once)
    assert capacity.contrast(curve.copy(), 2.0, 20.0, metric="ttft").identical(once)


def test_the_sla_slider_sends_only_what_it_draws(curves):
    grid = np.round(np.arange(0.1, 5.01, 0.1), 10)
    table = capacity.safe_concurrency(curves[0], grid, metric="ttft")
    spec = charts.latency_curve(curves[0], metric="ttft", sla_table=table, sla=2.0).to_dict()
    rows = [r for rs in spec["datasets"].values() for r in rs if "safe" in r]
    assert len(rows) == grid.size
    assert set(rows[0]) == {"sla", "safe", "binding", "qps", "label"}
    # another starting SLA from the same table: the same rows, another value
    moved = charts.latency_curve(curves[0], metric="ttft", sla_table=table, sla=0.5).to_dict()
    assert moved["datasets"] == spec["datasets"] and moved["params"][0]["value"] == 0.5

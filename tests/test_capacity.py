"""The capacity step: safe concurrency, Little's law, instances, cost, the sweep, and the answers."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from capnb import capacity, data, latency, memory
from capnb.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures" / "capacity"


@pytest.fixture(scope="module")
def short():
    return data.load_latency_curve("dstack-vllm-mi300x-short")


@pytest.fixture(scope="module")
def conv():
    return latency.workload(data.load_trace("azure-conv-2023"), samples=96)


# -- the search on a measured curve ----------------------------------------------------------------
def test_safe_concurrency_by_hand_on_dstacks_curve(short):
    # P99 TTFT: 796.26 ms at concurrency 8, 1,413.84 ms at 16; the 1 s SLA is crossed between them
    r = capacity.safe_concurrency(short, 1.0, metric="ttft", memory_limit=None)
    p8, p16 = 0.79626, 1.41384
    expected = math.floor(8 + (1.0 - p8) / (p16 - p8) * 8)
    assert int(r.safe_concurrency) == expected == 10
    assert str(r.binding.values.item()) == "latency"
    assert float(r.latency_at_safe) <= 1.0 < p8 + (expected + 1 - 8) / 8 * (p16 - p8)
    assert "<= SLA" in r.attrs["condition"] and "article writes <" in r.attrs["condition"]


def test_a_latency_at_the_sla_meets_it_after_the_unit_conversion():
    # condition P99 <= SLA: 2,300 ms measured at 8 is 2300 * 1e-3 = 2.3000000000000003 s, and
    # 26 ms and 34 ms at 4 and 8 draw 30 ms at 6 (0.030000000000000002 s): both meet it
    table = pd.DataFrame(
        {
            "concurrency": [1, 4, 8, 16],
            "ttft_p99_ms": [100, 1300, 2300, 4300],
            "tpot_p99_ms": [20, 26, 34, 50],
            "e2e_mean_ms": [1900, 2600, 3400, 5000],
        }
    )
    curve = data.read_latency_table(table)
    ttft = capacity.safe_concurrency(curve, 2.3, metric="ttft", memory_limit=None)
    assert int(ttft.safe_concurrency) == 8  # measured at 2.3 s exactly
    tpot = capacity.safe_concurrency(curve, 0.030, metric="tpot", memory_limit=None)
    assert int(tpot.safe_concurrency) == 6  # 26 + 2 x 2 ms = 30 ms
    assert float(tpot.per_instance_qps) == pytest.approx(6 / 3.0)  # mean e2e 3.0 s at 6


def test_littles_law_is_the_best_concurrency_over_mean_e2e_up_to_safe(short):
    r = capacity.safe_concurrency(short, [0.5, 2.0, 10.0], metric="ttft", memory_limit=None)
    flat = latency.envelope(short)
    for s, safe in zip(r.sla.values, r.safe_concurrency.values, strict=True):
        grid = np.arange(1, int(safe) + 1)
        e2e = latency.at(flat, grid).mean_latency.sel(metric="e2e").values
        best = np.max(grid / e2e)
        assert float(r.per_instance_qps.sel(sla=s)) == pytest.approx(best, rel=1e-12)
        assert int(r.operating_concurrency.sel(sla=s)) == int(grid[np.argmax(grid / e2e)])


def test_the_naive_figure_never_understates(short):
    r = capacity.safe_concurrency(short, [0.4, 1.0, 5.0, 30.0, 300.0], metric="ttft")
    ok = r.binding.isin(["latency", "memory", "measured_range"])
    assert bool((r.overstatement.where(ok) >= 1 - 1e-12).all())
    # at 30 s the naive figure (safe x 1 / 4.53 s) is several times Little's law
    assert float(r.overstatement.sel(sla=30.0)) > 3


def test_infeasible_is_said_never_a_fallback_to_one(short):
    p = capacity.plan(short, 0.2, 5.0, metric="ttft")
    assert int(p.safe_concurrency) == 0 and str(p.binding.values) == "infeasible_latency"
    assert np.isnan(float(p.instances)) and np.isnan(float(p.per_instance_qps))
    sentence = capacity.describe(p)
    assert sentence.startswith("Infeasible: ttft P99 is already 315 ms at concurrency 1")


def test_memory_binds_when_it_holds_fewer_than_the_sla_allows(short):
    r = capacity.safe_concurrency(short, 10.0, metric="ttft", memory_limit=20)
    assert int(r.safe_concurrency) == 20 and str(r.binding.values.item()) == "memory"
    none = capacity.safe_concurrency(short, 10.0, metric="ttft", memory_limit=0)
    assert str(none.binding.values.item()) == "infeasible_memory"
    assert "cannot hold its weights" in capacity.describe(none)


def test_auto_memory_limit_is_the_memory_steps(short):
    r = capacity.safe_concurrency(short, 10.0, metric="ttft")
    seq = math.ceil(short.attrs["prompt_tokens"] + short.attrs["output_tokens"])
    direct = memory.max_concurrency(
        model="Llama-3.1-405B", gpu="MI300X", tensor_parallel=8, seq_len=seq
    ).max_concurrency.item()
    assert int(r.max_concurrency) == direct
    unnamed = data.read_vllm_bench(FIXTURES / "vllm")  # names no catalog model or GPU
    checked = capacity.safe_concurrency(unnamed, 5.0, metric="ttft")
    assert "memory not checked" in checked.attrs["memory"] and "max_concurrency" not in checked


def test_the_curve_end_is_reported_not_extrapolated(short):
    r = capacity.safe_concurrency(short, 1e6, metric="ttft", memory_limit=None)
    assert int(r.safe_concurrency) == 2048 and str(r.binding.values.item()) == "measured_range"
    assert "does not extrapolate" in capacity.describe(r)


def test_bad_input_gets_a_clear_error(short):
    with pytest.raises(InputError, match=r"sla must be > 0 seconds, got 0 "):
        capacity.safe_concurrency(short, 0.0, metric="ttft")
    with pytest.raises(InputError, match="sla must be > 0 seconds, got -1"):
        capacity.safe_concurrency(short, [1.0, -1.0], metric="ttft")
    with pytest.raises(InputError, match="sla: duplicate"):
        capacity.safe_concurrency(short, [1.0, 1.0], metric="ttft")
    with pytest.raises(InputError, match=r"the curve has no e2e P99; it measured: ttft P50"):
        capacity.safe_concurrency(short, 1.0)  # dstack measured no e2e percentiles
    with pytest.raises(InputError, match="quantile=0.42 is not in the curve"):
        capacity.safe_concurrency(short, 1.0, metric="ttft", quantile=0.42)
    with pytest.raises(InputError, match="metric='p99'"):
        capacity.safe_concurrency(short, 1.0, metric="p99")
    with pytest.raises(InputError, match="target_qps must be finite and >= 0"):
        capacity.plan(short, 1.0, -3.0, metric="ttft")
    with pytest.raises(InputError, match="memory_limit must be >= 0"):
        capacity.safe_concurrency(short, 1.0, metric="ttft", memory_limit=-1)
    with pytest.raises(InputError, match="buffer must be a whole number"):
        capacity.plan(short, 1.0, 3.0, metric="ttft", buffer=1.5)
    with pytest.raises(InputError, match="not both"):
        capacity.plan(short, 1.0, 3.0, metric="ttft", buffer=1, buffer_qps=2.0)


def test_a_curve_without_mean_e2e_is_refused():
    frame = pd.DataFrame(
        {"concurrency": [1, 2], "ttft_p99_ms": [100, 200], "ttft_p50_ms": [90, 150]}
    )
    curve = data.read_latency_table(frame)
    with pytest.raises(InputError, match="no mean e2e latency.*Little's law needs it"):
        capacity.safe_concurrency(curve, 1.0, metric="ttft")


# -- instances and cost ------------------------------------------------------------------------------
def test_plan_instances_gpus_and_cost_by_hand(short):
    p = capacity.plan(short, 10.0, 20.0, metric="ttft")
    qps = float(p.per_instance_qps)
    assert int(p.instances) == math.ceil(20.0 / qps) + 2
    assert int(p.gpus) == 8 * int(p.instances)
    assert float(p.usd_per_hour) == pytest.approx(int(p.gpus) * 4.50)  # MI300X catalog price
    tokens_per_hour = 20.0 * 3600 * short.attrs["output_tokens"]
    assert float(p.usd_per_million_tokens) == pytest.approx(
        float(p.usd_per_hour) / tokens_per_hour * 1e6
    )
    assert float(p.utilisation) == pytest.approx(20.0 / (int(p.instances) * qps))
    assert 0 < float(p.compute_utilisation) < 1


def test_instances_exact_multiples_do_not_round_up():
    assert int(capacity.instances(xr.DataArray(2.5), 10.0, buffer=0)) == 4
    assert int(capacity.instances(xr.DataArray(0.1), 0.3, buffer=0)) == 3  # 0.3 / 0.1 = 2.9999999


def test_target_over_slots_and_traffic_quantiles_broadcasts(short):
    # the forecast's hand-off: target_qps over slot x traffic_quantile, plus a buffer_qps
    target = xr.DataArray(
        np.array([[2.0, 3.0, 4.0]] * 24) * np.linspace(1, 6, 24)[:, None],
        dims=("slot", "traffic_quantile"),
        coords={"slot": np.arange(24), "traffic_quantile": [0.5, 0.95, 0.99]},
    )
    p = capacity.plan(short, [2.0, 10.0], target, metric="ttft", buffer_qps=xr.DataArray(6.0))
    assert p.instances.dims == ("sla", "slot", "traffic_quantile")
    qps = p.per_instance_qps
    expected = np.ceil(target / qps * (1 - 1e-12)) + np.ceil(6.0 / qps * (1 - 1e-12))
    xr.testing.assert_equal(p.instances.drop_attrs(), expected.transpose(*p.instances.dims))
    assert p.attrs["buffer"].startswith("a buffer of ceil(buffer_qps")


def test_a_bare_targets_glossary_dims_come_back_with_the_glossarys_attrs(short):
    # a target_qps of one's own over slot x traffic_quantile (bare values, as pandas gives them)
    # came back over a slot and traffic_quantile with no units or long_name from plan, fleet and
    # instances, while the forecast's target and capacity.mix's demand carry the glossary's
    from capnb import glossary

    target = xr.DataArray(np.full((24, 3), 5.0), dims=("slot", "traffic_quantile"),
                          coords={"traffic_quantile": [0.5, 0.95, 0.99]})  # fmt: skip
    for out in (capacity.plan(short, 10.0, target, metric="ttft"),
                capacity.fleet(2.0, target), capacity.instances(2.0, target).to_dataset()):  # fmt: skip
        for dim in ("slot", "traffic_quantile"):
            assert out[dim].attrs == glossary.attrs(dim), dim
        assert out.slot.values.tolist() == list(range(24))
    mine = {**glossary.attrs("slot"), "kind": "hour_of_week"}  # the user's own attrs stay
    weekly = xr.DataArray(np.full(168, 5.0), dims="slot",
                          coords={"slot": ("slot", np.arange(168), mine)})  # fmt: skip
    assert capacity.fleet(2.0, weekly).slot.attrs == mine


def test_a_bare_target_over_a_dim_the_rates_label_takes_their_labels():
    # a target without a coordinate was numbered 0 .. n-1 (the glossary's attrs) and then refused
    # as labelled unlike the per-instance rates ("target_qps is over gpu [0, 1], but
    # per_instance_qps over ['A100-80GB', 'H100-SXM']"), labels the caller never gave; before
    # both fixes it was read by position, as a bare array is
    per = xr.DataArray([2.0, 3.0], dims="gpu", coords={"gpu": ["A100-80GB", "H100-SXM"]},
                       attrs={"units": "requests/s"})  # fmt: skip
    bare = xr.DataArray([10.0, 20.0], dims="gpu", attrs={"units": "requests/s"})
    out = capacity.fleet(per, bare, buffer_qps=bare / 10)
    assert out.instances.values.tolist() == [5.0 + 1.0, 7.0 + 1.0]
    assert out.gpu.values.tolist() == ["A100-80GB", "H100-SXM"]
    labelled = bare.assign_coords(gpu=["H100-SXM", "B200"])  # labels of one's own still checked
    with pytest.raises(InputError, match="give both the same gpu labels"):
        capacity.fleet(per, labelled)


def test_fleet_reads_each_rate_once(short, monkeypatch):
    # fleet() read buffer_qps into requests/s twice (once to check its labels, once for the
    # buffer), and plan() read target_qps, then fleet() read the DataArray it got again: each
    # rate is read once per call now
    from capnb.capacity import _safe

    reads = []
    read = _safe._target
    monkeypatch.setattr(
        _safe,
        "_target",
        lambda rate, name="target_qps", like=None: reads.append(name) or read(rate, name, like),
    )
    target = xr.DataArray(np.full(24, 5.0), dims="slot")
    capacity.fleet(2.0, target, buffer_qps=target / 10)
    assert sorted(reads) == ["buffer_qps", "target_qps"]
    reads.clear()
    capacity.plan(short, [2.0, 10.0], target, metric="ttft", buffer_qps=target / 10)
    assert sorted(reads) == ["buffer_qps", "target_qps"]


@settings(max_examples=40)
@given(
    st.lists(st.floats(0.3, 400.0), min_size=2, max_size=6, unique=True),
    st.floats(0.0, 200.0),
    st.floats(0.0, 200.0),
)
def test_stricter_sla_and_less_traffic_never_need_more_instances(slas, target, extra):
    curve = data.load_latency_curve("dstack-vllm-mi300x-short")
    ordered = sorted(slas)
    p = capacity.plan(curve, ordered, target, metric="ttft", memory_limit=None)
    more = capacity.plan(curve, ordered, target + extra, metric="ttft", memory_limit=None)
    count = p.instances.values
    feasible = ~np.isnan(count)
    # a stricter SLA (earlier in the list) never needs fewer instances
    assert (np.diff(count[feasible]) <= 0).all()
    assert (np.diff(feasible.astype(int)) >= 0).all()  # feasible at one SLA: at every looser one
    assert (more.instances.values[feasible] >= count[feasible]).all()


def test_stricter_sla_never_lowers_instances_in_the_sweep(conv):
    r = capnb_sweep(conv, sla=[20.0, 40.0, 80.0, 160.0], target_qps=3.0)
    tighter = r.instances.isel(sla=slice(0, -1)).values
    looser = r.instances.isel(sla=slice(1, None)).values
    both = ~np.isnan(tighter) & ~np.isnan(looser)
    assert (tighter[both] >= looser[both]).all()
    # a cell infeasible at a looser SLA is infeasible at every stricter one
    assert (np.isnan(tighter) | ~np.isnan(looser)).all()
    assert both.any()


def capnb_sweep(conv, **kwargs):
    base = {
        "model": ["Llama-3.1-8B", "Llama-3.1-70B"],
        "gpu": ["A100-80GB", "H100-SXM", "L40S"],
        "tensor_parallel": [1, 2, 4],
        "seq_len": [1024, 4096],
        "sla": [30.0],
    }
    base.update(kwargs)
    return capacity.sweep(**base, workload=conv)


# -- the sweep ------------------------------------------------------------------------------------
def test_sweep_dims_memory_and_cheapest_by_brute_force(conv):
    r = capnb_sweep(conv, sla=[30.0, 120.0], target_qps=4.0)
    assert r.safe_concurrency.dims == ("model", "gpu", "tensor_parallel", "seq_len", "sla")
    limit = memory.max_concurrency(
        model=["Llama-3.1-8B", "Llama-3.1-70B"], gpu=["A100-80GB", "H100-SXM", "L40S"],
        tensor_parallel=[1, 2, 4], seq_len=[1024, 4096], invalid_tensor_parallel="mask",
    ).max_concurrency  # fmt: skip
    assert bool((r.safe_concurrency <= limit).all())
    memory_bound = r.binding == "memory"
    assert bool((r.safe_concurrency.where(memory_bound) == limit).where(memory_bound, True).all())
    # L40S cannot hold Llama-3.1-70B at TP 1: the memory step says so
    assert (
        str(
            r.binding.sel(
                model="Llama-3.1-70B", gpu="L40S", tensor_parallel=1, seq_len=1024, sla=30.0
            ).values
        )
        == "infeasible_memory"
    )
    cost = r.usd_per_hour.stack(option=("gpu", "tensor_parallel"))
    for m in r.model.values:
        for s in r.seq_len.values:
            for sla in r.sla.values:
                values = cost.sel(model=m, seq_len=s, sla=sla)
                feasible = values.dropna("option")
                cell = r.sel(model=m, seq_len=s, sla=sla)
                if feasible.size == 0:
                    assert str(cell.cheapest_gpu.values) == ""
                    continue
                order = np.argsort(feasible.values, kind="stable")
                best = feasible.isel(option=order[0])
                assert str(cell.cheapest_gpu.values) == str(best.gpu.values)
                assert int(cell.cheapest_tensor_parallel) == int(best.tensor_parallel)
                assert float(cell.cheapest_usd_per_hour) == float(best)
                if feasible.size > 1:
                    second = feasible.isel(option=order[1])
                    assert float(cell.cost_gap) == pytest.approx(float(second) - float(best))


def test_sweep_with_a_target_over_slots(conv):
    target = xr.DataArray([1.0, 4.0, 9.0], dims="slot", coords={"slot": [3, 9, 15]})
    r = capnb_sweep(conv, target_qps=target, model=["Llama-3.1-8B"], seq_len=[2048])
    assert r.instances.dims[-1] == "slot"
    assert r.cheapest_gpu.dims == ("model", "seq_len", "sla", "slot")
    assert bool(
        (r.instances.diff("slot") >= 0).where(r.instances.notnull().all("slot"), True).all()
    )


def test_sweep_on_a_dask_cluster_matches_in_memory(dask_client, conv):
    plain = capnb_sweep(conv, target_qps=2.0)
    chunked = capnb_sweep(conv, target_qps=2.0, chunks={"gpu": 1, "seq_len": 1})
    xr.testing.assert_identical(plain, chunked)


def test_gpu_without_interconnect_figure_is_no_data_not_an_error(conv):
    r = capacity.sweep("Llama-3.1-8B", "A10G", [1, 2], 1024, 60.0, workload=conv)
    assert str(r.binding.sel(tensor_parallel=2).values.item()) == "no_data"
    assert str(r.binding.sel(tensor_parallel=1).values.item()) in (
        "latency",
        "memory",
        "measured_range",
    )
    assert "interconnect bandwidth" in capacity.describe(r, tensor_parallel=2)


def test_a_degree_that_cannot_shard_the_model_is_named_so_not_no_data(conv, tmp_path):
    # a Qwen2.5-72B-shaped config (64 heads, 8 KV heads) at TP 3 and 8: the analytic sweep said
    # binding "no_data" for TP 3, as if a figure were missing, where the engine sweep says
    # "invalid_tensor_parallel"; and describe() said "the model cannot price it (an invalid
    # tensor-parallel degree, or a GPU without the interconnect bandwidth figure ...)"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568,
        "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
        "vocab_size": 152064, "torch_dtype": "bfloat16", "max_position_embeddings": 32768,
    }))  # fmt: skip
    r = capacity.sweep(str(config), "H100-SXM", [3, 8], 1024, 60.0, workload=conv)
    assert str(r.binding.sel(tensor_parallel=3).values.item()) == "invalid_tensor_parallel"
    assert str(r.binding.sel(tensor_parallel=8).values.item()) in capacity.FEASIBLE
    said = capacity.describe(r, tensor_parallel=3)
    assert "tensor_parallel=3 does not divide the 64 attention heads" in said, said
    assert "interconnect" not in said, said


# -- contrast and boundary -------------------------------------------------------------------------
def test_plan_by_max_concurrency_breaches_the_sla_and_leaves_gpus_idle(short):
    c = capacity.contrast(short, 1.0, 5.0, metric="ttft")
    naive, by_latency = c.sel(plan="max_concurrency"), c.sel(plan="latency")
    assert float(naive.latency_at_operating) > 100 * 1.0  # P99 TTFT at 2,048 in flight: 253 s
    assert float(by_latency.latency_at_operating) <= 1.0
    assert float(naive.assumed_qps) > 10 * float(naive.per_instance_qps)
    assert float(naive.compute_utilisation) < 0.05  # the GPUs idle while the SLA breaks
    assert float(naive.instances) < float(by_latency.instances)
    with pytest.raises(InputError, match="give one SLA"):
        capacity.contrast(short, [1.0, 2.0], 5.0, metric="ttft")


def test_a_max_concurrency_fleet_uses_at_most_its_gpus_compute_on_what_it_serves():
    # the max-concurrency plan's compute_utilisation divided the whole target's FLOP/s by its GPUs'
    # peak although it serves a fraction of the target: 8 x H100 for 500 requests/s of which they
    # serve 14% read "131% of their compute in use" (Mistral-Nemo-12B on 2 x H20 for 569
    # requests/s: 1407%); it is the FLOP/s of the requests they serve: 18% here
    curve = latency.analytic(
        "Llama-3.1-8B", "H100-SXM", 1,
        workload=latency.workload(data.load_trace("azure-conv-2023"), samples=64),
        concurrency=[1, 2, 4, 8, 16, 32, 64, 128, 256],
    ).squeeze(["model", "gpu", "tensor_parallel"])  # fmt: skip
    curve.attrs.update(model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1)
    small, large = (capacity.contrast(curve, 0.05, t, metric="tpot") for t in (5.0, 500.0))
    # the FLOP/s of one request per second, over the GPUs' peak, from the fleet that serves it all
    per_request = float(small.compute_utilisation.sel(plan="latency")) * 3 / 5.0
    naive = large.sel(plan="max_concurrency")
    assert float(naive.served_share) < 0.2
    served = float(naive.instances) * float(naive.per_instance_qps)
    assert float(naive.compute_utilisation) == pytest.approx(
        served * per_request / float(naive.instances)
    )
    assert 0 < float(naive.compute_utilisation) < 1
    held = large.sel(plan="latency")  # a fleet serving the whole target: unchanged
    assert float(held.compute_utilisation) == pytest.approx(
        500.0 * per_request / float(held.instances)
    )


def test_a_contrasts_latency_plan_gives_the_latency_where_it_operates():
    # past the throughput knee the latency plan runs at 8 in flight (1 / 8 / 16 / 32 in flight: a
    # mean e2e of 1, 2, 6, 20 s, 4 requests/s at 8), safe up to 32; its latency_at_operating was
    # the P99 TTFT at 32 (0.45 s), not at 8 where it operates (0.2 s)
    curve = data.read_latency_table(
        pd.DataFrame({"concurrency": [1, 8, 16, 32], "ttft_p99_s": [0.1, 0.2, 0.3, 0.45],
                      "e2e_mean_s": [1.0, 2.0, 6.0, 20.0]})
    )  # fmt: skip
    c = capacity.contrast(curve, 0.5, 40.0, metric="ttft")
    row = c.sel(plan="latency")
    assert int(row.operating_concurrency) == 8 and float(row.per_instance_qps) == 4.0
    assert float(row.latency_at_operating) == pytest.approx(0.2)
    held = c.sel(plan="max_concurrency")
    assert int(held.operating_concurrency) == 32
    assert float(held.latency_at_operating) == pytest.approx(0.45)


def test_a_contrast_with_no_traffic_and_no_buffer_holds_no_instance(short):
    c = capacity.contrast(short, 1.0, 0.0, buffer=0, metric="ttft")
    assert c.instances.values.tolist() == [0.0, 0.0]
    assert c.served_share.values.tolist() == [1.0, 1.0]
    assert np.isnan(c.compute_utilisation.values).all()  # no instance to use, not a division by 0


def test_a_contrasts_plan_dim_carries_the_glossarys_attrs(short):
    # its plan (max_concurrency, latency) had a long_name of its own ("planning rule") and no
    # units, under a glossary dim whose meaning named only the backtests' plans
    from capnb import glossary

    c = capacity.contrast(short, 1.0, 5.0, metric="ttft")
    assert c.plan.attrs == glossary.attrs("plan")
    assert "max_concurrency" in glossary.DIMS["plan"].long_name


def test_applicability_states_the_articles_boundary(short):
    strict = capacity.safe_concurrency(short, 0.5, metric="ttft")
    assert float(strict.overstatement) < 1.1
    assert "adds little" in capacity.applicability(strict)
    loose = capacity.safe_concurrency(short, 30.0, metric="ttft")
    assert "matters here" in capacity.applicability(loose)
    capped = capacity.safe_concurrency(short, 30.0, metric="ttft", memory_limit=4)
    assert "memory, not latency" in capacity.applicability(capped)


def test_applicability_at_one_request_in_flight_says_latency_binds(short):
    # at safe concurrency 1 the naive figure equals Little's law by definition (overstatement
    # 1.0): that is the latency bound binding hardest, not a curve "close to linear"; the plan
    # turned it into the check "adds little ... plan by memory and throughput"
    one = capacity.safe_concurrency(short, 0.35, metric="ttft", memory_limit=500)
    assert int(one.safe_concurrency) == 1 and str(one.binding.values) == "latency"
    text = capacity.applicability(one)
    assert "matters here" in text and "adds little" not in text
    assert "one request in flight (memory holds 500)" in text


def test_describe_gives_the_numbers_it_computed(short):
    p = capacity.plan(short, 10.0, 20.0, metric="ttft")
    text = capacity.describe(p)
    assert f"safely holds {int(p.safe_concurrency):,} concurrent requests" in text
    assert f"{int(p.instances):,} instances" in text and f"{int(p.gpus):,} GPUs" in text
    assert f"{float(p.usd_per_hour):,.2f} USD/hour" in text
    with pytest.raises(InputError, match="choose one value of sla"):
        capacity.describe(capacity.plan(short, [5.0, 10.0], 20.0, metric="ttft"))


def test_describe_writes_one_instance_and_one_gpu_in_the_singular(short):
    # a small target on one instance read "need 1 instances ... = 1 GPUs"
    p = capacity.plan(short, 10.0, 0.01, metric="ttft", buffer=0)
    text = capacity.describe(p)
    assert int(p.instances) == 1 and int(p.gpus) == int(short.attrs["tensor_parallel"])
    assert "need 1 instance (" in text and "1 instances" not in text, text


def test_describe_writes_thousands_of_requests_per_second_in_digits(short):
    # a target of 4,580 requests/s read "4.58e+03 requests/s need ... instances" (the format of
    # three significant digits turns to an exponent from 1,000 up): now "4,580 requests/s"
    text = capacity.describe(capacity.plan(short, 10.0, 4580.0, metric="ttft"))
    assert "e+0" not in text and "4,580 requests/s need" in text, text


def test_describe_never_writes_a_service_with_traffic_as_0_percent_utilised(short):
    # 0.01 requests/s on 3 instances of 4.29 requests/s is 0.078 % of them: the sentence read
    # "0.01 requests/s need 3 instances ..., 0% utilised at the target", as if nothing were served
    p = capacity.plan(short, 10.0, 0.01, metric="ttft")
    text = capacity.describe(p)
    assert 0 < float(p.utilisation) < 0.001
    assert " 0% utilised" not in text and re.search(r" 0\.0\d+% utilised at the target", text), text
    assert "% utilised at the target" in capacity.describe(
        capacity.plan(short, 10.0, 20.0, metric="ttft")
    )


def test_hand_off_to_elasticity_is_one_rate_and_one_count(short):
    p = capacity.plan(short, 10.0, 20.0, metric="ttft").squeeze()
    assert p.per_instance_qps.attrs["units"] == "requests/s" and p.per_instance_qps.ndim == 0
    assert p.instances.attrs["units"] == "instances" and p.instances.ndim == 0


def test_a_floor_just_over_the_sla_is_written_with_the_digits_that_show_it():
    # P99 12.48 ms against a 12 ms SLA read "already 12 ms ..., above the 12 ms SLA"
    from capnb.capacity._answer import _apart

    assert _apart(0.01248, 0.012) == ("12.5 ms", "12 ms")
    assert _apart(0.315, 0.3) == ("315 ms", "300 ms")
    assert _apart(1.2041, 1.2) == ("1.204 s", "1.2 s")


def test_an_option_that_cannot_hold_the_longest_request_is_ruled_out_by_memory():
    """vLLM rejects a request its KV cache cannot hold whole: the analytic sweep rules such an
    option out (infeasible_memory) and says so in its notes, as the engine sweep does."""
    import capnb

    w = capnb.latency.workload(prompt_tokens=[800] * 31 + [60_000], output_tokens=[200] * 32)
    mean = math.ceil(float((w.prompt_tokens + w.output_tokens).mean()))
    swept = capnb.capacity.sweep("Llama-3.1-8B", ["L4", "H100-SXM"], [1, 2], mean, 5.0,
                                 workload=w, metric="ttft").squeeze()  # fmt: skip
    held = capnb.memory.max_concurrency(model="Llama-3.1-8B", gpu=["L4"], tensor_parallel=[1, 2],
                                        seq_len=[60_200]).max_concurrency.squeeze()  # fmt: skip
    assert int(held.sel(tensor_parallel=1)) == 0 and int(held.sel(tensor_parallel=2)) >= 1
    assert str(swept.binding.sel(gpu="L4", tensor_parallel=1).item()) == "infeasible_memory"
    assert np.isnan(swept.per_instance_qps.sel(gpu="L4", tensor_parallel=1))
    assert (
        "1 x L4 cannot hold the workload's longest request (60,200 tokens" in swept.attrs["notes"]
    )
    for gpu, tp in (("L4", 2), ("H100-SXM", 1), ("H100-SXM", 2)):  # these hold it
        assert str(swept.binding.sel(gpu=gpu, tensor_parallel=tp).item()) != "infeasible_memory"
    # one length (the mean is the longest): nothing changes
    even = capnb.latency.workload(prompt_tokens=[800] * 32, output_tokens=[200] * 32)
    plain = capnb.capacity.sweep("Llama-3.1-8B", ["L4"], [1], 1000, 5.0, workload=even,
                                 metric="ttft")  # fmt: skip
    assert "longest request" not in str(plain.attrs.get("notes", ""))


def test_an_open_loop_curve_is_refused_by_name():
    """A curve over request_rate (engine(..., request_rate=...)) is an error saying so."""
    from capnb.records import SLA, Deployment

    w = latency.workload(prompt_tokens=[512] * 4, output_tokens=[128] * 4)
    curve = latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), w, request_rate=[1.0, 4.0],
                           requests=50)  # fmt: skip
    for sla in (1.0, SLA(ttft_s=1.0)):
        with pytest.raises(InputError, match="curve: .* over request_rate .* concurrency="):
            capacity.plan(curve, sla=sla, target_qps=10.0, metric="ttft")


def test_instances_refuse_a_rate_that_is_not_requests_per_second_or_not_a_rate():
    # per_instance_qps = -10 or 0 gave NaN instances ("infeasible") and 1e-300 gave inf; '10'
    # ended in numpy's UFuncTypeError; a DataArray in requests/min was read as requests/s
    from capnb.capacity import instances

    for bad, said in [(-10.0, "per_instance_qps must be >= 0 requests/s"),
                      (float("inf"), "per_instance_qps must be >= 0 requests/s"),
                      ("10", "per_instance_qps: expected requests/s as numbers, got '10'"),
                      (None, "per_instance_qps: expected requests/s as numbers, got None"),
                      (xr.DataArray([5.0, -1.0], dims="gpu"), "got -1")]:  # fmt: skip
        with pytest.raises(InputError, match=re.escape(said)):
            instances(bad, 100.0)
    in_minutes = xr.DataArray(10.0, attrs={"units": "requests/min"})
    with pytest.raises(InputError, match=r"per_instance_qps: its units attr 'requests/min' is not"):
        instances(in_minutes, 100.0)
    with pytest.raises(InputError, match=r"target_qps: its units attr 'requests/min' is not"):
        instances(10.0, in_minutes)
    assert float(instances(xr.DataArray(10.0, attrs={"units": "requests/s"}), 100.0)) == 12
    assert np.isnan(float(instances(0.0, 100.0)))  # no request served: infeasible, as documented
    assert np.isnan(float(instances(float("nan"), 100.0)))


def test_an_sla_record_keeps_the_glossary_attrs_of_the_curves_coordinates():
    # with an SLA record, the model, gpu and tensor_parallel coordinates of safe_concurrency and
    # plan lost their units and long_name (tensor_parallel in GPUs), which a number SLA keeps
    from capnb.records import SLA

    w = latency.workload(prompt_tokens=[800] * 4, output_tokens=[200] * 4)
    curve = latency.analytic("Qwen3-32B", ["A100-80GB", "L40S"], [2, 4], workload=w,
                             concurrency=[1, 4, 16])  # fmt: skip
    for sla in (SLA(e2e_s=60.0), SLA(e2e_s=60.0, ttft_s=5.0)):
        for result in (capacity.safe_concurrency(curve, sla), capacity.plan(curve, sla, 20.0)):
            for name in ("model", "gpu", "tensor_parallel"):
                assert result[name].attrs == curve[name].attrs, (sla, name)
            assert result.tensor_parallel.attrs["units"] == "GPUs"


def test_a_memory_limit_over_a_larger_grid_is_taken_at_the_curves_cells():
    # memory.max_concurrency over more degrees (or seq_lens) than the curve holds, passed as
    # memory_limit, failed in xarray's "cannot align objects with join='exact'", naming neither
    # the argument nor the dim
    w = latency.workload(prompt_tokens=[800] * 4, output_tokens=[200] * 4)
    curve = latency.analytic("Qwen3-32B", ["A100-80GB", "L40S"], [2, 4], workload=w,
                             concurrency=[1, 4, 16, 64])  # fmt: skip
    seq_len = int(curve.seq_len)
    grid = {"model": "Qwen3-32B", "gpu": ["A100-80GB", "L40S"]}
    wide = memory.max_concurrency(**grid, tensor_parallel=[1, 2, 4, 8], seq_len=[seq_len, 8192])
    exact = memory.max_concurrency(**grid, tensor_parallel=[2, 4], seq_len=seq_len)
    got = capacity.safe_concurrency(curve, 60.0, memory_limit=wide.max_concurrency)
    assert got.equals(capacity.safe_concurrency(curve, 60.0, memory_limit=exact.max_concurrency))
    assert got.safe_concurrency.identical(capacity.safe_concurrency(curve, 60.0).safe_concurrency)
    narrow = memory.max_concurrency(**grid, tensor_parallel=[1, 2], seq_len=seq_len)
    with pytest.raises(InputError, match=r"memory_limit: its tensor_parallel holds no 4 "):
        capacity.safe_concurrency(curve, 60.0, memory_limit=narrow.max_concurrency)


def test_the_forecasts_whole_answer_as_target_qps_is_an_error_that_names_its_variable():
    # capacity.fleet/instances/plan given forecast.target()'s Dataset failed in numpy ("cannot
    # directly convert an xarray.Dataset into a numpy array"), naming no argument
    forecast = xr.Dataset({"target_qps": xr.DataArray([5.0, 9.0], dims="slot")})
    forecast["target_qps"].attrs["units"] = "requests/s"
    for call in (capacity.fleet, capacity.instances):
        with pytest.raises(InputError, match=r"target_qps: a Dataset; pass its target_qps"):
            call(xr.DataArray(2.0), forecast)
    assert capacity.instances(xr.DataArray(2.0), forecast.target_qps, buffer=0).values.tolist() == [
        3,
        5,
    ]


def test_a_memory_limit_dataarray_is_checked_as_the_integer_is():
    # memory_limit=-3 is an error, but a DataArray of -3 or NaN passed silently: NaN became
    # -9223372036854775808 requests in max_concurrency and every cell 'infeasible_memory'
    w = latency.workload(prompt_tokens=[800] * 4, output_tokens=[200] * 4)
    curve = latency.analytic("Qwen3-8B", "L40S", 1, workload=w, concurrency=[1, 4, 16])
    for bad in (xr.DataArray(-3), xr.DataArray(np.nan), xr.DataArray([5.0, np.inf], dims="gpu")):
        with pytest.raises(InputError, match=r"memory_limit: requests must be finite and >= 0"):
            capacity.safe_concurrency(curve, 60.0, memory_limit=bad)
    assert (
        capacity.safe_concurrency(curve, 60.0, memory_limit=xr.DataArray(4.0)).max_concurrency == 4
    )


def test_an_sla_dataarray_in_milliseconds_is_refused_not_read_as_seconds():
    # sla=xr.DataArray([500.0], dims="sla", attrs={"units": "ms"}) was read as 500 s
    w = latency.workload(prompt_tokens=[800] * 4, output_tokens=[200] * 4)
    curve = latency.analytic("Qwen3-8B", "L40S", 1, workload=w, concurrency=[1, 4, 16])
    in_ms = xr.DataArray([500.0], dims="sla", attrs={"units": "ms"})
    for call in (lambda s: capacity.safe_concurrency(curve, s, metric="ttft"),
                 lambda s: capacity.plan(curve, s, 10.0, metric="ttft")):  # fmt: skip
        with pytest.raises(
            InputError, match=r"sla: its units attr 'ms' is not s \(1 ms = 0.001 s\)"
        ):
            call(in_ms)
        in_s = in_ms.copy(data=[0.5]).assign_attrs(units="s")
        assert call(in_s).identical(call([0.5]))


def test_a_memory_limit_in_tokens_is_refused_not_read_as_requests():
    # the vLLM accounting's kv_cache_tokens (tokens) passed as memory_limit was read as requests
    w = latency.workload(prompt_tokens=[800] * 4, output_tokens=[200] * 4)
    curve = latency.analytic("Qwen3-8B", "L40S", 1, workload=w, concurrency=[1, 4, 16])
    fit = memory.max_concurrency(model="Qwen3-8B", gpu="L40S", tensor_parallel=1,
                                 seq_len=int(curve.seq_len), accounting="vllm")  # fmt: skip
    with pytest.raises(InputError, match=r"memory_limit: .*tokens"):
        capacity.safe_concurrency(curve, 60.0, memory_limit=fit.kv_cache_tokens)
    capacity.safe_concurrency(curve, 60.0, memory_limit=fit.max_concurrency)


def test_describe_says_when_a_raised_point_sets_the_safe_concurrency():
    # one noisy point (P99 TTFT 0.8 s at 2 in flight, 0.3-0.4 s at 4-16) sets the safe concurrency
    # at 1 under a 0.5 s SLA; describe said only "the SLA binds: ttft P99 reaches 200 ms there",
    # a 200 ms latency binding a 500 ms bound, and not that the curve was raised
    noisy = data.read_latency_table(
        pd.DataFrame({"concurrency": [1, 2, 4, 8, 16, 32],
                      "ttft_p99_s": [0.2, 0.8, 0.3, 0.35, 0.4, 2.0],
                      "e2e_mean_s": [3.0, 3.1, 3.2, 3.5, 4.0, 8.0]})
    )  # fmt: skip
    p = capacity.plan(noisy, 0.5, 10.0, metric="ttft")
    assert int(p.safe_concurrency) == 1 and str(p.binding.values) == "latency"
    text = capacity.describe(p)
    assert "3 measured points (concurrency 4, 8, 16) lie below a smaller concurrency's" in text
    assert "read at 800 ms" not in text  # the sentence names where, the notes say how much
    assert "re-measure" in text, text
    # one raised point is said in the singular
    one = capacity.plan(noisy.sel(concurrency=[1, 2, 4, 32]), 0.5, 10.0, metric="ttft")
    assert (
        "1 measured point (concurrency 4) lies below a smaller concurrency's latency and is "
        "read at it" in capacity.describe(one)
    )
    clean = capacity.plan(noisy.sel(concurrency=[1, 4, 8, 16, 32]), 0.5, 10.0, metric="ttft")
    assert "below a smaller concurrency's" not in capacity.describe(clean)


def test_memory_below_the_curves_first_point_is_no_safe_concurrency():
    # P99 TTFT measured at 400 and 800 in flight, memory holds 356: the answer said
    # safe_concurrency 356 beside binding memory_below_range and NaN requests/s, where the other
    # infeasible answers (infeasible_unmeasured: nothing measured below the first point) say 0
    curve = data.read_latency_table(
        pd.DataFrame({"concurrency": [400, 800], "ttft_p99_ms": [300, 900],
                      "e2e_mean_ms": [8000, 15000]})
    )  # fmt: skip
    p = capacity.plan(curve, 1.0, 20.0, metric="ttft", memory_limit=356)
    assert str(p.binding.values) == "memory_below_range" and str(p.binding.values) not in (
        capacity.FEASIBLE
    )
    assert int(p.safe_concurrency) == 0 and math.isnan(float(p.per_instance_qps))
    assert int(p.max_concurrency) == 356
    assert capacity.describe(p).startswith(
        "Memory holds only 356 concurrent requests on this configuration (measured curve table), "
        "below the curve's first measured concurrency (400)"
    )
    stacked = capacity.safe_concurrency(curve, [0.5, 1.0], metric="ttft", memory_limit=356)
    assert stacked.safe_concurrency.values.tolist() == [0, 0]


def test_an_sla_of_several_bounds_keeps_every_bounds_notes():
    # under SLA(ttft, tpot) the answer kept the notes of the first bound's search only: a TPOT
    # curve raised at 4, 8 and 16 in flight (30 ms at 2, 12-18 ms above) set the safe concurrency
    # at 1 with the answer's notes empty
    curve = data.read_latency_table(
        pd.DataFrame({"concurrency": [1, 2, 4, 8, 16, 32],
                      "ttft_p99_s": [0.1, 0.12, 0.15, 0.2, 0.3, 0.6],
                      "tpot_p99_ms": [10, 30, 12, 14, 18, 40],
                      "e2e_mean_s": [3.0, 3.1, 3.2, 3.5, 4.0, 8.0]})
    )  # fmt: skip
    p = capacity.plan(curve, capacity.SLA(ttft_s=1.0, tpot_s=0.025), 10.0)
    assert int(p.safe_concurrency) == 1 and str(p.binding_metric.values) == "tpot"
    notes = p.attrs["notes"].splitlines()
    assert "envelope: tpot P99 at concurrency 4 raised from 0.012 s to 0.03 s" in notes[0], notes
    assert len([n for n in notes if n.startswith("envelope: tpot P99")]) == 3
    assert not any(n.startswith("envelope: ttft") for n in notes)


def test_describe_says_when_memory_was_not_checked():
    # a curve naming no model (a vllm bench run records only its model_id) is searched without
    # the memory limit; describe said "safely holds 92 concurrent requests (the SLA binds ...)"
    # and left the unchecked KV cache to result.attrs["memory"]
    curve = data.read_latency_table(
        pd.DataFrame({"concurrency": [1, 64, 128], "ttft_p99_ms": [40, 600, 1500],
                      "e2e_mean_ms": [1660, 4500, 8190]}),
        gpu="H100-SXM", tensor_parallel=1, prompt_tokens=1000, output_tokens=256,
    )  # fmt: skip
    p = capacity.plan(curve, 1.0, 50.0, metric="ttft")
    assert int(p.safe_concurrency) == 92 and "max_concurrency" not in p
    assert (
        "safely holds 92 concurrent requests (the SLA binds: ttft P99 reaches 994 ms there, "
        "drawn linearly between the measured 64 and 128; memory not checked: the curve does not "
        "name its model, GPU and tensor parallelism"
    ) in capacity.describe(p)
    checked = capacity.plan(curve.assign_attrs(model="Llama-3.1-8B"), 1.0, 50.0, metric="ttft")
    assert "memory not checked" not in capacity.describe(checked)


def test_a_safe_concurrency_between_measured_points_is_said_interpolated():
    # P99 TTFT 400 ms at 4 and 800 ms at 8: 500 ms is reached at 5, which nothing measured; the
    # sentence read "the SLA binds: ttft P99 reaches 500 ms there" as if 5 had been measured
    table = pd.DataFrame(
        {
            "concurrency": [1, 2, 4, 8, 16],
            "ttft_p99_ms": [100, 200, 400, 800, 1600],
            "e2e_mean_ms": [2000, 2200, 2600, 3400, 5000],
        }
    )
    curve = data.read_latency_table(table)
    text = capacity.describe(capacity.plan(curve, 0.5, 10.0, metric="ttft", memory_limit=None))
    assert "holds 5 concurrent requests" in text
    assert "reaches 500 ms there, drawn linearly between the measured 4 and 8" in text
    at_point = capacity.describe(capacity.plan(curve, 0.8, 10.0, metric="ttft", memory_limit=None))
    assert "holds 8 concurrent requests" in at_point and "drawn linearly" not in at_point


def test_the_naive_figure_is_not_called_too_high_where_it_is_not():
    # P99 TTFT 400 ms at 1 and 800 ms at 4 under 500 ms: safe 1, where the article's figure is
    # capnb's (1 / 1.9 s = 0.526 requests/s); the sentence said "0.526, 1.0x too high"
    table = pd.DataFrame(
        {
            "concurrency": [1, 4, 8],
            "ttft_p99_ms": [400, 800, 1200],
            "e2e_mean_ms": [1900, 2200, 2800],
        }
    )
    p = capacity.plan(data.read_latency_table(table), 0.5, 10.0, metric="ttft", memory_limit=None)
    text = capacity.describe(p)
    assert int(p.safe_concurrency) == 1 and float(p.overstatement) == 1.0
    assert "too high" not in text
    assert "(the article's 1 x single-request QPS gives the same 0.526)" in text

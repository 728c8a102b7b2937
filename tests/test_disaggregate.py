"""Disaggregated serving: the balance kernel against a plain scan, the pools, the plan, the dstack check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import capnb
from benchmarks.reference.disagg import balance_python
from capnb.capacity import validate_disagg
from capnb.errors import InputError
from capnb.kernels import disagg as kernels
from capnb.records import SLA, Deployment

GPT_OSS = Deployment("gpt-oss-120b", "H200", 2)


def _kernel(*args):
    out = np.zeros(4)
    kernels.balance(*(float(a) if np.isscalar(a) else a for a in args), out)
    return out


@settings(max_examples=60, deadline=None)
@given(
    c=st.integers(1, 400),
    p=st.integers(1, 4),
    d=st.integers(1, 4),
    transfer=st.floats(0, 0.05),
    slope_p=st.floats(0.5, 10),
    cap_p=st.floats(1, 80),
    slope_d=st.floats(0.05, 2),
    cap_d=st.floats(1, 40),
)
def test_balance_matches_the_plain_scan(c, p, d, transfer, slope_p, cap_p, slope_d, cap_d):
    k = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128], float)
    x_p = np.minimum(slope_p * k, cap_p)
    x_d = np.minimum(slope_d * k, cap_d)
    fast = _kernel(c, p, d, transfer, k, x_p, k, x_d)
    plain = balance_python(c, p, d, transfer, k, x_p, k, x_d, steps=20_000)
    assert fast[3] == plain[3]
    np.testing.assert_allclose(fast[:3], plain[:3], rtol=2e-3, atol=2e-3)
    # Little's law: the requests held add up to c
    held = p * fast[1] + fast[0] * transfer + d * fast[2]
    assert held == pytest.approx(c, rel=1e-6)


def test_balance_by_hand():
    # linear pools, no saturation: prefill 2 req/s per request held, decode 0.5; P=1, D=1:
    # c = X/2 + X/0.5 = 2.5 X
    k = np.array([1.0, 100.0])
    out = _kernel(10, 1, 1, 0.0, k, 2 * k, k, 0.5 * k)
    assert out[0] == pytest.approx(4.0) and out[1] == pytest.approx(2.0)
    assert out[2] == pytest.approx(8.0) and out[3] == 0
    # a saturated decode pool (1 req/s at most) takes every request the prefill does not hold
    out = _kernel(50, 1, 1, 0.0, k, 2 * k, k, np.minimum(k, 1.0))
    assert out[0] == pytest.approx(1.0) and out[3] == 2
    assert out[1] == pytest.approx(0.5) and out[2] == pytest.approx(49.5)


def test_gpt_oss_120b_published_figures():
    spec = capnb.data.load_model("gpt-oss-120b")
    # OpenAI's model card: 116.83 B parameters, 5.13 B active (without the input embedding)
    assert spec.parameters == pytest.approx(116.83e9, rel=0.005)
    embedding = spec.vocab_size * spec.hidden_size
    assert spec.active_parameters - embedding == pytest.approx(5.13e9, rel=0.01)
    # KV per token from the config: 2 x 36 layers x 8 KV heads x 64 x 2 bytes (bf16)
    assert spec.kv_bytes_per_token() == 2 * 36 * 8 * 64 * 2 == 73_728
    assert (spec.sliding_layers, spec.sliding_window) == (18, 128)
    # a 2,048-token prompt: 18 full layers at 2,048 tokens, 18 windowed at 128
    assert spec.kv_bytes_per_sequence(2048) == 2 * 8 * 64 * 2 * (18 * 2048 + 18 * 128)
    assert spec.kv_bytes_per_sequence(100) == 100 * 73_728
    # MXFP4 experts (4.25 bits a weight), attention, routers and embeddings in bf16: about 65 GB
    assert spec.weight_bytes() == pytest.approx(65.2e9, rel=0.01)
    assert spec.weight_bytes("fp8") < 2 * spec.parameters  # another dtype: no MXFP4 scales


def test_other_models_keep_their_figures():
    spec = capnb.data.load_model("Llama-3.1-8B")
    assert spec.sliding_layers == 0
    assert spec.kv_bytes_per_sequence(1000) == 1000 * spec.kv_bytes_per_token()


def test_kv_transfer_against_a_plain_sum():
    spec = capnb.data.load_model("gpt-oss-120b")
    prompts = np.array([10, 128, 129, 2048, 32_784])
    got = capnb.capacity.kv_transfer_s(spec, prompts, tensor_parallel=2, link_bandwidth=50e9)
    per_layer_rank = 2 * 4 * 64 * 2  # K and V, 4 of the 8 KV heads on each of 2 ranks, bf16
    for tokens, seconds in zip(prompts, got, strict=True):
        layers = [tokens if i % 2 else min(tokens, 128) for i in range(36)]
        assert seconds == pytest.approx(per_layer_rank * sum(layers) / 50e9)


@pytest.fixture(scope="module")
def small():
    w = capnb.latency.workload(prompt_tokens=[1024] * 32, output_tokens=[128] * 32)
    curves = capnb.capacity.pool_curves(
        GPT_OSS, w, concurrency=[1, 2, 4, 8, 16, 32, 64], requests=200
    )  # fmt: skip
    agg = capnb.latency.engine(GPT_OSS, w, concurrency=[1, 2, 4, 8, 16, 32, 64], requests=200)
    return w, curves, agg


def test_pool_curves_have_a_pool_dim(small):
    _, curves, _ = small
    assert list(curves.pool.values) == ["prefill", "decode"]
    assert curves.pool.attrs["units"] == "1"
    # the prefill pool computes prompts only: no TPOT; the decode pool finds them cached
    assert np.isnan(curves.latency.sel(pool="prefill", metric="tpot")).all()
    assert (curves.latency.sel(pool="decode", metric="tpot") > 0).all()
    ttft = curves.latency.sel(metric="ttft", latency_quantile=0.99, concurrency=1)
    assert ttft.sel(pool="decode") < ttft.sel(pool="prefill")


def test_pd_ratio_picks_the_most_tokens_per_gpu_within_the_sla(small):
    w, curves, agg = small
    ds = capnb.capacity.pd_ratio(
        GPT_OSS, w, concurrency=[16, 64], sla=SLA(ttft_s=1.0, tpot_s=0.05),
        ratios=["1:1", (1, 3), "3:1"], curves=curves, aggregated_curve=agg,
    )  # fmt: skip
    assert list(ds.ratio.values) == ["1:1", "1:3", "3:1"]
    assert ds.gpus.values.tolist() == [4, 8, 8]
    for c in ds.concurrency.values:
        one = ds.sel(concurrency=c)
        ok = one.meets_sla.values
        assert ok.any()
        assert one.best_ratio.item() == str(
            one.ratio.values[ok][np.argmax(one.output_tokens_per_gpu.values[ok])]
        )
        # the pools hold every request in flight
        held = (one.pool_concurrency * ds.instances).sum("pool") + one.fleet_qps * float(
            w.prompt_tokens.mean() * 0 + ds.attrs["kv_transfer_mean_s"]
        )
        np.testing.assert_allclose(held.values, c, rtol=1e-6)
    assert set(ds.serving.values) <= {"aggregated", "disaggregated"}
    for name in ("latency", "output_tokens_per_gpu", "kv_transfer_s", "pool_concurrency"):
        assert ds[name].attrs["units"]


def test_pd_ratio_is_deterministic_for_a_seed():
    w = capnb.latency.workload(prompt_tokens=[512] * 8, output_tokens=[64] * 8)
    run = lambda: capnb.capacity.pd_ratio(  # noqa: E731
        GPT_OSS, w, concurrency=8, sla=SLA(ttft_s=1.0, tpot_s=0.05), ratios=["1:1"],
        requests=100, seed=3,
    )  # fmt: skip
    a, b = run(), run()
    assert a.identical(b)


def test_disaggregate_plans_each_pool_per_slot(small):
    w, curves, agg = small
    demand = np.array([2.0, 10.0, 30.0])
    ds = capnb.capacity.disaggregate(
        GPT_OSS, w, target_qps=demand, sla=SLA(ttft_s=1.0, tpot_s=0.05),
        curves=curves, aggregated_curve=agg,
    )  # fmt: skip
    r = ds.per_instance_qps.values
    np.testing.assert_array_equal(ds.instances.sel(pool="prefill"), np.ceil(demand / r[0]))
    np.testing.assert_array_equal(ds.instances.sel(pool="decode"), np.ceil(demand / r[1]))
    np.testing.assert_array_equal(
        ds.gpus.sel(serving="disaggregated"), 2 * ds.instances.sum("pool")
    )
    assert (ds.latency.sel(serving="disaggregated", metric="ttft") <= 1.0).item()
    assert (ds.latency.sel(serving="disaggregated", metric="tpot") <= 0.05).item()
    assert ds.attrs["serving"] in {"aggregated", "disaggregated"}
    totals = ds.gpus.sum("slot")
    cheaper = (
        "aggregated"
        if totals.sel(serving="aggregated") <= totals.sel(serving="disaggregated")
        else "disaggregated"
    )
    assert ds.attrs["serving"] == cheaper
    assert ds.attrs["recommendation"].startswith(f"Serve {cheaper}")


def test_disaggregate_says_infeasible_never_falls_back(small):
    w, curves, agg = small
    ds = capnb.capacity.disaggregate(
        GPT_OSS, w, target_qps=5.0, sla=SLA(ttft_s=1.0, tpot_s=0.001),
        curves=curves, aggregated_curve=agg,
    )  # fmt: skip
    assert ds.attrs["serving"] == "infeasible"
    assert not ds.meets_sla.any()
    assert "TPOT" in ds.serving_reason.sel(serving="disaggregated").item()
    assert np.isnan(ds.instances).all()


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"sla": SLA(ttft_s=1.0)}, "has no tpot_s"),
        ({"sla": 1.0}, "sla: expected a capnb.records.SLA"),
        ({"ratios": ["1-3"]}, "ratios"),
        ({"ratios": [(0, 1)]}, "ratios"),
        ({"tensor_parallel": {"prefill": 2}}, "tensor_parallel"),
        ({"tensor_parallel": 0}, "tensor_parallel"),
        ({"link_bandwidth": 0}, "link_bandwidth"),
        ({"concurrency": [0]}, "concurrency"),
        ({"aggregated_gpus": 1}, "aggregated_gpus"),
    ],
)
def test_bad_inputs_name_the_argument(small, kwargs, argument):
    w, curves, agg = small
    args = dict(
        concurrency=8, sla=SLA(ttft_s=1.0, tpot_s=0.05), tensor_parallel=2, curves=curves,
        aggregated_curve=agg,
    )  # fmt: skip
    args.update(kwargs)
    with pytest.raises(InputError, match=argument):
        capnb.capacity.pd_ratio(GPT_OSS, w, **args)


def test_disaggregate_bad_target(small):
    w, curves, agg = small
    with pytest.raises(InputError, match="target_qps"):
        capnb.capacity.disaggregate(
            GPT_OSS, w, target_qps=[-1.0], sla=SLA(ttft_s=1.0, tpot_s=0.05),
            curves=curves, aggregated_curve=agg,
        )  # fmt: skip
    with pytest.raises(InputError, match="workload"):
        capnb.capacity.disaggregate(
            GPT_OSS, {"prompt": 1}, target_qps=1.0, sla=SLA(ttft_s=1.0, tpot_s=0.05)
        )


def test_output_lengths_keep_the_measured_mean():
    lengths = validate_disagg.output_lengths(539.0, 2048.0, samples=4096)
    assert lengths.max() <= 2048 and lengths.mean() == pytest.approx(539.0, rel=0.01)


def test_the_stored_dstack_check_matches_a_rerun():
    stored = validate_disagg.stored()
    group = (2048, 2048, 32)
    again = validate_disagg.check(groups=[group])
    mine = stored[(stored.isl == 2048) & (stored.osl == 2048) & (stored.conc == 32)]
    assert mine.ratio.tolist() == again.ratio.tolist()
    for column in ("predicted_ttft_s", "predicted_tpot_s", "predicted_tokens_per_gpu"):
        np.testing.assert_allclose(mine[column].to_numpy(), again[column].to_numpy(), rtol=1e-4)
    # the record covers every run of the data, and the picks are those of VALIDATION.md
    assert len(stored) == len(validate_disagg.load_runs())
    text = (validate_disagg.RECORD.parents[2] / "VALIDATION.md").read_text(encoding="utf-8")
    assert validate_disagg.markdown(stored) in text
    assert math.isfinite(float(again.tpot_error.abs().median()))

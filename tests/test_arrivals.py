"""The chosen instance under Poisson arrivals: capnb.capacity.arrivals and the plan's check."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import capnb
from capnb.errors import InputError
from capnb.records import SLA, Deployment

W = capnb.latency.workload(prompt_tokens=[300, 900, 1500, 2400] * 8,
                           output_tokens=[60, 180, 320, 500] * 8)  # fmt: skip
D = Deployment("Llama-3.1-8B", "H100-SXM", 1)
LOOSE = SLA(ttft_s=1.0, tpot_s=0.05)


def test_arrivals_swing_the_p99_above_the_closed_loop_at_the_same_rate():
    closed = capnb.capacity.engine_curve_of(D, W, requests=1000)
    at = closed.sel(concurrency=closed.concurrency.values[-3])
    qps = float(at.throughput)
    tpot_closed = float(at.latency.sel(metric="tpot", latency_quantile=0.99))
    sla = SLA(ttft_s=5.0, tpot_s=tpot_closed)  # the closed loop just meets it
    a = capnb.capacity.arrivals(D, W, sla=sla, per_instance_qps=qps, requests=3000)
    # at the closed loop's own rate the swings in flight put the P99 above it
    assert float(a.latency.sel(share=1.0, metric="tpot")) > tpot_closed
    assert float(a.headroom) < 1.0
    # P99 grows with the share, and the headroom is the last share of an unbroken run that meets
    tpot = a.latency.sel(metric="tpot").values
    assert (np.diff(tpot) > -0.05 * tpot[:-1]).all()
    held = a.share.values[np.cumprod(a.meets_sla.values).astype(bool)]
    assert float(a.headroom) == (held[-1] if held.size else 0.0)


def test_arrivals_names_its_arguments():
    with pytest.raises(InputError, match="per_instance_qps"):
        capnb.capacity.arrivals(D, W, sla=LOOSE, per_instance_qps=-1.0)
    with pytest.raises(InputError, match="sla"):
        capnb.capacity.arrivals(D, W, sla="ttft=1", per_instance_qps=1.0)
    with pytest.raises(InputError, match="deployment"):
        capnb.capacity.arrivals("Llama-3.1-8B", W, sla=LOOSE, per_instance_qps=1.0)


def test_arrivals_dims_are_glossary_names_with_their_attrs():
    # the result's share and metric coordinates had no units or long_name, and share was not a
    # glossary name at all, against the glossary's rule that every Dataset speaks its names
    from capnb import glossary

    a = capnb.capacity.arrivals(D, W, sla=LOOSE, per_instance_qps=2.0, requests=200)
    for dim in a.dims:
        assert a[dim].attrs == glossary.attrs(dim), dim


SMALL = dict(trace="servegen-m-small", trials=50, gpus=("H100-SXM",), tensor_parallel=(1,),
             policies=("hpa",), scale_up_threshold=(0.8,), cooldown_s=(900.0,),
             buffer_instances=(0,), backtest_days=0, provider="none")  # fmt: skip


def _checks(**changes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = capnb.plan.build(capnb.plan.read_config({**SMALL, **changes}))
    return {c.name: c for c in capnb.plan.answer(plan).checks}


def test_the_plan_checks_its_policy_against_the_instance_under_arrivals():
    checks = _checks(latency="engine")
    check = checks["arrivals"]
    share = float(check.finding.split("up to ")[1].split("%")[0]) / 100
    assert "runs instances up to 80%" in check.finding
    assert check.passed == (0.8 <= share + 1e-9)
    assert bool(check.action) == (not check.passed)
    # the analytic model simulates no arrivals: no such check
    assert "arrivals" not in _checks(latency="model")


def test_an_instance_missing_the_sla_at_every_share_is_said_so():
    from capnb.plan._answer import Policy
    from capnb.plan._compose import _arrivals_checks

    a = capnb.capacity.arrivals(D, W, sla=SLA(ttft_s=0.02, tpot_s=0.05), per_instance_qps=20.0,
                                requests=300)  # fmt: skip
    assert float(a.headroom) == 0.0
    policy = Policy(name="hpa", scale_up_threshold=0.7, cooldown_s=300.0, min_instances=1,
                    buffer_instances=0, kind="elastic", cold_start_s=60.0,
                    cold_start_vetoes=False)  # fmt: skip
    (check,) = _arrivals_checks(a, policy, 1.0, (0.7,))
    assert not check.passed and "misses the SLA even at 50%" in check.finding
    assert "up to 0%" not in check.finding and "loosen the SLA" in check.action


def test_the_plan_chooses_among_policies_that_run_instances_within_the_arrivals_headroom(tmp_path):
    # nine days of a smooth daily cycle: HPA at 0.8 was the cheapest that kept its budget inside
    # the trace, so chosen, and the plan failed its own arrivals check (headroom 70 %)
    import pandas as pd

    rng = np.random.default_rng(0)
    t = np.arange(9 * 288) * 300
    qps = 11 + 5 * np.sin(2 * np.pi * t / 86_400) + rng.normal(0, 0.5, t.size)
    pd.DataFrame({"timestamp": t, "qps": qps.round(3)}).to_csv(tmp_path / "d.csv", index=False)
    cfg = dict(trace=str(tmp_path / "d.csv"), trace_kind="rates", time_unit="s",
               start="2026-10-19", interval="5min", model="Qwen3-8B", gpus=("A100-80GB",),
               tensor_parallel=(2,), sla="ttft=1,tpot=40ms", latency="engine", policies=("hpa",),
               scale_up_threshold=(0.6, 0.7, 0.8), trials=50, provider="none",
               disaggregation="none")  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answer = capnb.plan.answer(capnb.plan.build(capnb.plan.read_config(cfg)))
    check = {c.name: c for c in answer.checks}["arrivals"]
    share = float(check.finding.split("up to ")[1].split("%")[0]) / 100
    assert share < 0.8
    assert answer.policy.scale_up_threshold <= share and check.passed


def test_eligible_configurations_run_instances_within_the_headroom_or_all_are():
    from capnb.plan._origins import Config, eligible

    grid = [Config("hpa", t, 300.0, 0, 0.5) for t in (0.6, 0.7, 0.8)]
    grid += [Config("fixed", 0.6, 300.0, 0, share) for share in (1.0, 1.25)]
    cfg = capnb.plan.read_config(SMALL)
    quick = {"cold_start_s": 0.0}
    assert [c.utilisation(4.0) for c in grid] == [0.6, 0.7, 0.8, 1.0, 0.8]
    assert eligible(grid, quick, cfg, None, 4.0).all()
    assert eligible(grid, quick, cfg, 0.75, 4.0).tolist() == [True, True, False, False, False]
    assert eligible(grid, quick, cfg, 0.8, 4.0).tolist() == [True, True, True, False, True]
    # no configuration within: the rule is not applied (the plan's arrivals check says so)
    assert eligible(grid, quick, cfg, 0.5, 4.0).all()
    # with the cold-start rule vetoing elasticity, the headroom narrows what it allows
    slow = {"cold_start_s": 10_000.0}
    assert eligible(grid, slow, cfg, 0.8, 4.0).tolist() == [True, True, True, False, True]
    assert eligible(grid, slow, cfg, 0.5, 4.0).tolist() == [True] * 5


def test_the_article_engine_with_vetoed_scale_ups_runs_instances_as_a_fixed_fleet_does():
    # with a cold start over half the tolerance the article's engine never scales up: its floor
    # serves the busiest slot as a fixed fleet does, up to 1 / floor share of the closed-loop
    # rate (100% at a floor share of 1), yet eligible() and the arrivals check read its scale-up
    # threshold (70%): within a headroom of 85% it passed where 'fixed' at the same floor failed
    import dataclasses

    import xarray as xr

    from capnb.plan._answer import Policy
    from capnb.plan._compose import _arrivals_checks
    from capnb.plan._origins import Config, eligible

    grid = [Config(p, 0.7, 300.0, 0, share) for p in ("article", "fixed") for share in (1.0, 1.25)]
    cfg = capnb.plan.read_config(SMALL)
    slow = {"cold_start_s": 10_000.0}
    assert eligible(grid, slow, cfg, 0.85, 4.0).tolist() == [False, True, False, True]
    quick = {"cold_start_s": 0.0}  # it scales up: its threshold is what it runs to
    assert eligible(grid, quick, cfg, 0.85, 4.0).tolist() == [True, True, False, True]
    arrivals = xr.Dataset(
        {"headroom": 0.85, "latency": (("share", "metric"), [[0.1, 0.02], [0.55, 0.0755]])},
        coords={"share": [0.85, 1.0], "metric": ["ttft", "tpot"]},
        attrs={"per_instance_qps": 20.0},
    )
    article = Policy("article", 0.7, 900.0, 4, 0, "fixed_plus_buffer", 254.0, True)
    (check,) = _arrivals_checks(arrivals, article, 4.0, (0.7,))
    assert not check.passed and "the article policy runs instances up to 100% of it" in (
        check.finding
    )
    scaling = dataclasses.replace(article, cold_start_s=20.0, cold_start_vetoes=False)
    assert _arrivals_checks(arrivals, scaling, 4.0, (0.7,))[0].passed


def test_the_kv_budget_of_a_deployment_is_its_own_dtypes():
    """engine_curve_of and arrivals size the KV cache with the deployment's weight and KV dtypes.

    Both sized it at the model's own dtypes: Llama-3.1-8B on an L4 with an FP8 KV cache held 11
    sequences of 1,200 tokens, as in BF16 (FP8 holds twice the tokens), and Llama-3.1-70B with
    FP8 weights on two H100s (35 GB a GPU) had the 1,584 tokens its BF16 weights leave, too few
    for one 2,200-token request: an error.
    """
    work = capnb.latency.workload(prompt_tokens=[1000] * 4, output_tokens=[200] * 4)
    l4 = capnb.capacity.engine_curve_of(Deployment("Llama-3.1-8B", "L4", 1), work, requests=60)
    fp8_kv = capnb.capacity.engine_curve_of(
        Deployment("Llama-3.1-8B", "L4", 1, kv_dtype="fp8"), work, requests=60
    )
    assert fp8_kv.attrs["kv_cache_tokens"] == pytest.approx(2 * l4.attrs["kv_cache_tokens"], abs=16)
    assert fp8_kv.attrs["memory_limit"] >= 2 * l4.attrs["memory_limit"]
    big = Deployment("Llama-3.1-70B", "H100-SXM", 2, weight_dtype="fp8")
    long = capnb.latency.workload(prompt_tokens=[2000] * 4, output_tokens=[200] * 4)
    out = capnb.capacity.arrivals(big, long, sla=SLA(ttft_s=5.0, tpot_s=0.1),
                                  per_instance_qps=0.5, requests=60)  # fmt: skip
    assert np.isfinite(out.latency).all()


def test_the_arrivals_kv_budget_is_profiled_at_the_servers_own_limits():
    # a vLLM V1 server started with --max-num-seqs 64 profiles a sampler batch of 64, not vllm
    # serve's 1,024 on an H100: its KV cache is larger, and the open-loop check ran on the
    # default launch's cache whatever settings it was given
    from capnb.latency import _engine
    from capnb.records import EngineSettings

    dep = Deployment("Llama-3.1-8B", "H100-SXM", 1)
    work = capnb.latency.workload(prompt_tokens=[1000] * 4, output_tokens=[200] * 4)
    fewer = EngineSettings("vllm-v1", max_num_seqs=64)
    sla = SLA(ttft_s=5.0, tpot_s=0.1)
    out = capnb.capacity.arrivals(dep, work, sla=sla, per_instance_qps=2.0, requests=60,
                                  settings=fewer)  # fmt: skip
    default = capnb.capacity.arrivals(dep, work, sla=sla, per_instance_qps=2.0, requests=60)
    assert out.attrs["kv_cache_tokens"] == _engine.kv_tokens_auto(dep.spec, "H100-SXM", 1,
                                                                  settings=fewer)  # fmt: skip
    assert out.attrs["kv_cache_tokens"] > default.attrs["kv_cache_tokens"]


def test_arrivals_take_one_cell_of_safe_concurrencys_per_instance_qps():
    # the capacity step's own per_instance_qps (a DataArray of one cell) was refused as
    # "per_instance_qps must be requests/s > 0, got <xarray.DataArray ...>"
    import xarray as xr

    cell = xr.DataArray([[20.0]], dims=("model", "gpu"), attrs={"units": "requests/s"})
    given = capnb.capacity.arrivals(D, W, sla=LOOSE, per_instance_qps=cell, requests=300)
    assert given.identical(capnb.capacity.arrivals(D, W, sla=LOOSE, per_instance_qps=20.0,
                                                   requests=300))  # fmt: skip
    with pytest.raises(InputError, match=r"per_instance_qps: one number, not a DataArray over"):
        capnb.capacity.arrivals(D, W, sla=LOOSE, per_instance_qps=xr.concat([cell, cell], "gpu"))


def test_a_fixed_fleet_runs_its_instances_at_the_load_not_at_whole_instances(tmp_path):
    # nine days of 0.3-1.7 requests/s on one Qwen3-8B A100 instance (6.6 requests/s closed
    # loop, 65% of it under Poisson arrivals): the check counted the forecast's need in whole
    # instances (1 of 1), said the fixed fleet 'runs instances up to 100%', failed, and advised
    # sweeping a threshold at or below 0.65 as if 'none was' (0.6 was); it runs at 29%
    import pandas as pd

    rng = np.random.default_rng(5)
    t = np.arange(9 * 288) * 300
    qps = 1 + 0.7 * np.sin(2 * np.pi * t / 86_400) + rng.normal(0, 0.05, t.size)
    pd.DataFrame({"timestamp": t, "qps": qps.round(3)}).to_csv(tmp_path / "d.csv", index=False)
    cfg = dict(trace=str(tmp_path / "d.csv"), trace_kind="rates", time_unit="s",
               start="2026-10-19", interval="5min", model="Qwen3-8B", gpus=("A100-80GB",),
               tensor_parallel=(1,), sla="ttft=1,tpot=40ms", latency="engine",
               policies=("fixed",), trials=50, provider="none",
               disaggregation="none")  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answer = capnb.plan.answer(capnb.plan.build(capnb.plan.read_config(cfg)))
    check = {c.name: c for c in answer.checks}["arrivals"]
    runs_to = float(check.finding.split("runs instances up to ")[1].split("%")[0]) / 100
    need = max(answer.fixed_instances)
    assert need == 1 and answer.policy.min_instances + answer.policy.buffer_instances == 1
    assert 0.2 < runs_to < 0.35 and check.passed and not check.action


def test_the_arrivals_advice_names_what_would_keep_within_the_headroom():
    # a failing check advised 'sweep a scale-up threshold at or below 0.85 (... none was)' for a
    # fixed fleet, which has no threshold, while 0.6-0.8 were swept
    import xarray as xr

    from capnb.plan._answer import Policy
    from capnb.plan._compose import _arrivals_checks

    arrivals = xr.Dataset(
        {"headroom": 0.5, "latency": (("share", "metric"), [[0.1, 0.02], [0.55, 0.0755]])},
        coords={"share": [0.5, 1.0], "metric": ["ttft", "tpot"]},
        attrs={"per_instance_qps": 20.0},
    )
    fixed = Policy("fixed", 0.6, 300.0, 2, 0, "fixed_plus_buffer", 75.0, True)
    (check,) = _arrivals_checks(arrivals, fixed, 1.7, (0.6, 0.7, 0.8))
    assert not check.passed and "runs instances up to 85% of it" in check.finding
    assert check.action.startswith("hold 4 instances at the busiest slot (each then runs up to 42%")
    hpa = Policy("hpa", 0.6, 300.0, 1, 0, "elastic", 75.0, False)
    (check,) = _arrivals_checks(arrivals, hpa, 1.7, (0.6, 0.7, 0.8))
    assert "at or below 0.5" in check.action and "the lowest swept is 0.6" in check.action


def test_the_plan_s_arrivals_check_holds_the_prefix_cache_its_rate_was_priced_with():
    # found planning my own log of 8 system prompts of 4,096 tokens shared across sessions with
    # prefix_cache_share = 0.2: the closed loop priced 7.98 requests/s an instance with the cache
    # serving 80.2% of prompt tokens on the 336,743 KV tokens left to running sequences, but the
    # Poisson check simulated that rate with no cache and the whole KV budget, every prompt
    # computed in full: "misses the SLA even at 50% ... (at 100 %: TTFT 388 s)", a failed check
    # telling me to loosen the SLA. The check must simulate the instance the rate was priced on.
    import json

    import xarray as xr

    from capnb.plan import _steps

    prompts = [4096 + 600 + 37 * (i % 9) for i in range(32)]
    w = capnb.latency.workload(prompt_tokens=prompts, output_tokens=[150, 250, 300, 200] * 8)
    sla, qps, hit, running = SLA(ttft_s=2.0, tpot_s=0.05), 6.0, 0.8, 200_000
    cfg = capnb.plan.read_config(dict(SMALL, latency="engine", prefix_cache_share=0.2,
                                      sla={"ttft_s": 2.0, "tpot_s": 0.05}))  # fmt: skip
    cap = xr.Dataset(attrs={"latency_models": json.dumps({"ttft": "engine", "tpot": "engine"})})
    chosen = xr.Dataset({"binding_metric": "ttft", "per_instance_qps": qps,
                         "prefix_hit_rate": hit, "running_tokens": running})  # fmt: skip
    got = _steps.arrivals_of(cfg, cap, chosen, "H100-SXM", 1, w)
    settings = _steps.engine_settings(cfg)
    cached = capnb.capacity.arrivals(D, w, sla=sla, per_instance_qps=qps, settings=settings,
                                     prefix_hit_rate=hit, kv_cache_tokens=running)  # fmt: skip
    bare = capnb.capacity.arrivals(D, w, sla=sla, per_instance_qps=qps, settings=settings)
    # the cache's hits leave a fifth of each prompt to compute: its TTFT is far below the bare one's
    ttft = lambda a: float(a.latency.sel(share=1.0, metric="ttft"))  # noqa: E731
    assert ttft(cached) < 0.5 * ttft(bare)
    assert cached.attrs["kv_cache_tokens"] == running and cached.attrs["prefix_hit_rate"] == hit
    np.testing.assert_allclose(got.latency.values, cached.latency.values)
    assert float(got.headroom) == float(cached.headroom)

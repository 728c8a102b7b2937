"""latency = "auto": each SLA bound is checked on the latency model its held-out error prefers."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from capnb import capacity, latency, plan
from capnb.capacity._engine_sweep import _analytic_metrics, engine_curve
from capnb.latency import validate
from capnb.records import SLA, Deployment

W = latency.workload(prompt_tokens=[512] * 4, output_tokens=[128] * 4)


def test_the_named_metrics_come_from_the_analytic_model_at_the_engines_concurrencies():
    curve = engine_curve(Deployment("Llama-3.1-8B", "H100-SXM", 1), W, fits=64,
                         running_tokens=64 * 640, hit_rate=0.0, requests=300, seed=0)  # fmt: skip
    mixed = _analytic_metrics(curve, ("ttft",), "Llama-3.1-8B", "H100-SXM", 1, W)
    analytic = latency.analytic("Llama-3.1-8B", "H100-SXM", 1, workload=W,
                                concurrency=curve.concurrency.values.tolist())  # fmt: skip
    ttft = analytic.latency.sel(metric="ttft").squeeze(drop=True)
    np.testing.assert_array_equal(
        mixed.latency.sel(metric="ttft").values, ttft.transpose("concurrency", ...).values
    )
    for m in ("tpot", "itl", "e2e"):  # the other metrics stay the engine's
        np.testing.assert_array_equal(mixed.latency.sel(metric=m), curve.latency.sel(metric=m))
    assert _analytic_metrics(curve, (), "Llama-3.1-8B", "H100-SXM", 1, W) is curve


def test_each_bound_gets_its_own_models_band():
    sla = SLA(ttft_s=2.0, tpot_s=0.05)
    mixed = capacity._engine_sweep._band_ratio("held-out", sla, None, ("ttft",))
    assert mixed["ttft"] == capacity.band_ratios(sla, model="analytic")["ttft"]
    assert mixed["tpot"] == capacity.band_ratios(sla, model="engine")["tpot"]


def test_an_auto_plan_checks_each_bound_on_the_preferred_model_and_says_so():
    # without the policy's held-out choice (most of the plan's time): this is the latency choice
    config = plan.read_config(dict(trace="servegen-m-small", gpus=("H100-SXM",),
                                   tensor_parallel=(1,), policies=("hpa",), trials=100,
                                   latency="auto", backtest_days=0))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)
        built = plan.build(config)
    a = plan.answer(built)
    preferred = {m: validate.preferred_model(m)["model"] for m in config.sla.bounds}
    assert a.latency_model == preferred[a.binding_metric]
    for m, model in preferred.items():
        assert f"{m.upper()} {model}" in a.inputs
    # why the binding bound's model: its reason, the held-out figures of both, said in words
    assert a.latency_choice == validate.preferred_model(a.binding_metric)["reason"]
    assert f"Why this model for {a.binding_metric.upper()}: {a.latency_choice}" in plan.describe(
        built
    )
    earlier = a.to_dict()  # a plan.json written before the field: read with it empty
    del earlier["latency_choice"]
    assert plan.Answer.from_dict(earlier).latency_choice == ""


def test_the_per_metric_choice_is_scored_on_sources_it_was_not_picked_on():
    """Each source's pick comes from the other sources alone: a source where the other model is
    better is scored with the model the others prefer, so the choice's error is not the best
    model's error on each source (which would be tuned)."""
    from capnb.latency.validate import choice_held_out

    def row(source, engine, analytic, metric="ttft"):
        return {"source": source, "metric": metric, "below_knee": True, "measured": 1.0,
                "engine": engine, "analytic": analytic}  # fmt: skip

    record = {"rows": [row("a", 1.1, 1.5), row("b", 1.2, 1.6), row("c", 1.9, 1.05),
                       row("solo", 1.3, 1.1, metric="tpot")]}  # fmt: skip
    ttft, tpot, e2e = choice_held_out(record)
    # without a: engine 0.2/0.9 (median 0.55) vs analytic 0.6/0.05 (0.325) -> analytic
    assert ttft["picks"] == {"a": "analytic", "b": "analytic", "c": "engine"}
    assert ttft["chosen"] == pytest.approx(0.6)  # a: 0.5, b: 0.6, c: 0.9
    assert ttft["engine"] == pytest.approx(0.2) and ttft["analytic"] == pytest.approx(0.5)
    assert tpot["picks"] == {} and tpot["sources"] == 1 and math.isnan(tpot["chosen"])
    assert e2e["sources"] == 0


def test_preferred_model_reads_the_gpu_as_the_catalog_names_it():
    """A GPU alias compares on that GPU's figures; an unknown or ambiguous name is an error."""
    from capnb.errors import InputError, UnknownNameError

    exact = validate.preferred_model("ttft", gpu="MI300X")
    assert "on MI300X" in exact["reason"]
    assert validate.preferred_model("ttft", gpu="mi300x") == exact  # was: pooled, silently
    with pytest.raises(InputError, match="A100"):
        validate.preferred_model("ttft", gpu="A100")  # fits three catalog profiles
    with pytest.raises(UnknownNameError, match="NotAGPU"):
        validate.preferred_model("ttft", gpu="NotAGPU")

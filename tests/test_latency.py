"""Latency curves: envelope, interpolation, workload, the analytic model and its calibration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from capnb import calibration, data, latency, memory
from capnb.errors import InputError

W_FIXED = latency.workload(prompt_tokens=[512] * 8, output_tokens=[128] * 8)


@pytest.fixture(scope="module")
def conv():
    return latency.workload(data.load_trace("azure-conv-2023"), samples=128)


# -- measured curves ------------------------------------------------------------------------------
def test_envelope_raises_dips_notes_them_and_keeps_the_rest():
    curve = data.load_latency_curve("dstack-vllm-mi300x-short")
    flat = latency.envelope(curve)
    rise = flat.latency.diff("concurrency")
    assert bool(((rise >= 0) | rise.isnull()).all())
    # dstack's median ITL at concurrency 8 (52.68 ms) is below the one at 4 (54.54 ms)
    itl = flat.latency.sel(metric="itl", latency_quantile=0.5)
    assert float(itl.sel(concurrency=8)) == pytest.approx(0.05454)
    assert any("itl 0.5 at concurrency 8 raised from 0.05268 s" in n for n in latency.notes(flat))
    untouched = curve.latency.sel(metric="ttft", latency_quantile=0.99)
    assert (flat.latency.sel(metric="ttft", latency_quantile=0.99) == untouched).all()


def test_envelope_raises_a_dip_below_its_notes_precision_without_a_note():
    # a simulated curve's P50 TPOT 1e-9 s lower at a higher concurrency was noted as "raised
    # from 0.007647 s to 0.007647 s": raised, as every dip is, but no note a reader can't see
    curve = data.load_latency_curve("dstack-vllm-mi300x-short")
    itl = curve.latency.sel(metric="itl", latency_quantile=0.5)
    tiny = curve.copy(deep=True)
    low = float(itl.sel(concurrency=4)) - 1e-9
    tiny.latency.loc[{"metric": "itl", "latency_quantile": 0.5, "concurrency": 8}] = low
    flat = latency.envelope(tiny)
    assert float(flat.latency.sel(metric="itl", latency_quantile=0.5, concurrency=8)) == float(
        itl.sel(concurrency=4)
    )
    assert not any("itl 0.5 at concurrency 8" in n for n in latency.notes(flat))


def test_envelope_refuses_a_dip_too_deep_to_be_noise():
    curve = data.load_latency_curve("dstack-vllm-mi300x-short")
    odd = curve.copy(deep=True)
    point = {"metric": "ttft", "latency_quantile": 0.99, "concurrency": 8}
    odd.latency.loc[point] = float(curve.latency.sel(point)) / 1000  # one run saved in seconds/1000
    with pytest.raises(InputError, match=r"ttft 0.99 at concurrency 8 is .*x below.*other units"):
        latency.envelope(odd)
    before = float(curve.latency.sel({**point, "concurrency": 4}))
    odd.latency.loc[point] = before / 1.5  # a dip of noise size below concurrency 4's: raised
    assert any(
        "ttft 0.99 at concurrency 8 raised" in n for n in latency.notes(latency.envelope(odd))
    )


def test_at_interpolates_linearly_and_never_extrapolates():
    curve = data.load_latency_curve("dstack-vllm-mi300x-short")
    values = latency.at(curve, [8, 12, 16, 2048, 2049]).latency.sel(
        metric="ttft", latency_quantile=0.99
    )
    p8, p16 = 0.79626, 1.41384
    assert values.values[:3].tolist() == pytest.approx([p8, (p8 + p16) / 2, p16])
    assert np.isfinite(values.values[3]) and np.isnan(values.values[4])


def test_check_accepts_a_hand_built_curve_and_rejects_a_bad_one():
    curve = data.load_latency_curve("dstack-tgi-mi300x-long")
    np.testing.assert_array_equal(latency.check(curve).latency.values, curve.latency.values)
    broken = curve.copy(deep=True)
    broken["latency"].loc[{"metric": "ttft", "latency_quantile": 0.5, "concurrency": 8}] = 1e9
    with pytest.raises(InputError, match="ttft P99 .* is below P50"):
        latency.check(broken)
    with pytest.raises(InputError, match="expected a latency curve"):
        latency.check(xr.Dataset())


# -- workload ---------------------------------------------------------------------------------------
def test_workload_keeps_the_output_quantiles_and_is_deterministic():
    trace = data.load_trace("azure-code-2023")
    w = latency.workload(trace, samples=200)
    again = latency.workload(trace, samples=200)
    assert w.identical(again)
    outputs = np.sort(trace.output_tokens.values)
    n = outputs.size
    for q in (0.1, 0.5, 0.9, 0.99):
        # the k-th kept request is the one at rank floor((k + 0.5) / 200 x n) in output order
        k = int(q * 200)
        assert w.output_tokens.values[k] == outputs[int((k + 0.5) / 200 * n)]
    assert w.attrs["requests"] == n
    assert w.attrs["mean_output_tokens"] == pytest.approx(trace.output_tokens.mean())


def test_workload_bad_input():
    with pytest.raises(InputError, match="equal length"):
        latency.workload(prompt_tokens=[1, 2], output_tokens=[1])
    with pytest.raises(InputError, match=r"output_tokens must be >= 1 token, got 0 at request 1"):
        latency.workload(prompt_tokens=[5, 5], output_tokens=[3, 0])
    with pytest.raises(InputError, match="give a trace, or both"):
        latency.workload(prompt_tokens=[5])
    # a word among the lengths was numpy's bare "could not convert string to float: 'abc'"
    with pytest.raises(InputError, match=r"workload: prompt_tokens must be token counts.*'abc'"):
        latency.workload(prompt_tokens=["abc"], output_tokens=[1])
    with pytest.raises(InputError, match=r"workload: output_tokens must be token counts"):
        latency.workload(prompt_tokens=[5], output_tokens=[{"tokens": 3}])
    log = xr.Dataset({"prompt_tokens": ("request", ["x"]), "output_tokens": ("request", [1])})
    with pytest.raises(InputError, match=r"workload: prompt_tokens must be token counts.* 'x'$"):
        latency.workload(log)


def test_workload_from_a_log_names_the_file_and_the_request_with_no_output(tmp_path):
    # a request log with one aborted request (0 output tokens) loads, and the plan then failed
    # with "workload: output_tokens must be >= 1 token, got 0 at request 7": no file, and an
    # index into the sorted log the user cannot find
    path = tmp_path / "log.csv"
    path.write_text(
        "timestamp,prompt_tokens,output_tokens\n"
        "2026-03-20T10:00:01Z,100,20\n2026-03-20T10:00:02Z,90,0\n2026-03-20T10:00:03Z,80,9\n"
    )
    trace = data.load_trace(path)
    with pytest.raises(InputError) as caught:
        latency.workload(trace)
    text = str(caught.value)
    assert "log.csv: request 2 of 3 in time order (at 2026-03-20T10:00:02) holds 0" in text
    assert "drop such rows from the log" in text


def test_workload_from_a_log_names_the_file_s_column_with_no_tokens(tmp_path):
    # BurstGPT logs its failed requests as 0 request and 0 response tokens: the error named
    # capnb's prompt_tokens, not the file's column the user has to filter on
    path = tmp_path / "burstgpt.csv"
    path.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n1106,ChatGPT,0,0,0,Conversation log\n"
    )
    trace = data.load_trace(path, time_unit="s")
    with pytest.raises(InputError) as caught:
        latency.workload(trace)
    text = str(caught.value)
    assert "burstgpt.csv: request 2 of 2 in time order (at 1970-01-01T00:18:26) holds 0" in text
    assert "in column 'Request tokens'" in text


def test_concurrency_grid():
    grid = latency.concurrency_grid(4096)
    assert grid[:64].tolist() == list(range(1, 65)) and grid[-1] == 4096
    assert (np.diff(grid) > 0).all()


# -- the analytic model -----------------------------------------------------------------------------
def test_analytic_curve_grows_with_concurrency(conv):
    curve = latency.analytic("Llama-3.1-70B", "H100-SXM", 4, workload=conv)
    for metric in ("ttft", "tpot", "e2e"):
        p99 = curve.latency.sel(metric=metric, latency_quantile=0.99).squeeze()
        assert bool((p99.diff("concurrency") >= -1e-12).all()), metric
    mean = curve.mean_latency.sel(metric="e2e").squeeze()
    assert bool((mean.diff("concurrency") > 0).all())
    # quantiles are ordered at every concurrency
    assert bool((curve.latency.diff("latency_quantile") >= -1e-12).all())


def test_a_faster_gpu_never_raises_latency(conv):
    """H200 has H100-SXM's FLOP/s and interconnect and more HBM bandwidth; same calibration.

    Per-token and end-to-end latency never rise. Time to first token, at a *fixed* concurrency,
    may: a faster GPU finishes requests sooner, so in a closed loop the other requests' prefills
    arrive more often and the prefill queue grows (a property of fixed-concurrency benchmarks, which
    capnb's curves are). The test pins that cause: the prefill time share rises with the mean rate.
    """
    shared = calibration.calibration_for("H100-SXM")
    curve = latency.analytic(
        ["Llama-3.1-8B", "Llama-3.1-70B"], ["H100-SXM", "H200"], [2, 4], workload=conv,
        calibration=shared,
    )  # fmt: skip
    slow = curve.sel(gpu="H100-SXM", metric=["tpot", "itl", "e2e"])
    fast = curve.sel(gpu="H200", metric=["tpot", "itl", "e2e"])
    assert bool((fast.latency <= slow.latency * (1 + 1e-12)).all())
    assert bool((fast.mean_latency <= slow.mean_latency * (1 + 1e-12)).all())
    ttft_rose = curve.latency.sel(gpu="H200", metric="ttft") > curve.latency.sel(
        gpu="H100-SXM", metric="ttft"
    )
    e2e = curve.mean_latency.sel(metric="e2e")
    rate = curve.concurrency / e2e  # requests/s in the closed loop
    assert bool(ttft_rose.any())
    assert bool((rate.sel(gpu="H200") >= rate.sel(gpu="H100-SXM")).all())


@settings(max_examples=25)
@given(st.floats(1.0, 8.0), st.floats(1.0, 8.0), st.floats(1.0, 8.0))
def test_faster_gpu_figures_never_raise_latency_in_the_kernel(flops, bandwidth, link):
    from capnb.kernels import latency as kernels

    model = calibration.model_vector(data.load_model("Llama-3.1-70B"), 4)
    gpu = np.array([312e12, 2.0e12, 300e9])
    faster = gpu * np.array([flops, bandwidth, link])
    cal = calibration.calibration_for("A100-80GB").as_array()
    args = (
        np.array([300.0, 2000.0, 800.0]), np.array([50.0, 400.0, 10.0]),
        np.array([1.0, 4.0, 32.0, 200.0]), np.array([1, 2, 3]), np.array([0.5, 0.99]),
    )  # fmt: skip
    base = kernels.analytic_curve(model, gpu, 4, cal, *args)
    quick = kernels.analytic_curve(model, faster, 4, cal, *args)
    assert (quick[0] <= base[0] * (1 + 1e-9)).all() and (quick[1] <= base[1] * (1 + 1e-9)).all()


def test_seq_len_rescales_the_workload_to_that_mean_context(conv):
    curve = latency.analytic(
        "Llama-3.1-8B", "H100-SXM", 1, workload=conv, seq_len=[1024, 4096], concurrency=[1]
    )
    scale = np.array([1024, 4096]) / float((conv.prompt_tokens + conv.output_tokens).mean())
    assert curve.attrs["output_tokens"] == pytest.approx(float(conv.output_tokens.mean()))
    e2e = curve.mean_latency.sel(metric="e2e").squeeze()
    assert float(e2e.sel(seq_len=4096)) > 3 * float(e2e.sel(seq_len=1024))
    assert scale[1] / scale[0] == pytest.approx(4.0)


def test_analytic_bad_input_and_masking():
    with pytest.raises(InputError, match="does not divide the 64 attention heads"):
        latency.analytic("Llama-3.1-70B", "H100-SXM", 3, workload=W_FIXED)
    masked = latency.analytic(
        "Llama-3.1-70B", "H100-SXM", [3, 4], workload=W_FIXED, invalid_tensor_parallel="mask",
        concurrency=[1, 2],
    )  # fmt: skip
    assert bool(masked.latency.sel(tensor_parallel=3).isnull().all())
    assert bool(masked.latency.sel(tensor_parallel=4).notnull().all())
    with pytest.raises(InputError, match="metrics"):
        latency.analytic("Llama-3.1-8B", "H100-SXM", 1, workload=W_FIXED, metrics=["p99"])
    with pytest.raises(InputError, match="quantiles must be inside"):
        latency.analytic("Llama-3.1-8B", "H100-SXM", 1, workload=W_FIXED, quantiles=[1.0])


def test_analytic_on_a_dask_cluster_matches_in_memory(dask_client, conv):
    args = (["Llama-3.1-8B", "Qwen3-8B"], ["A100-80GB", "H100-SXM", "L40S"], [1, 2])
    plain = latency.analytic(*args, workload=conv, seq_len=[1024, 8192], concurrency=[1, 8, 64])
    chunked = latency.analytic(
        *args, workload=conv, seq_len=[1024, 8192], concurrency=[1, 8, 64],
        chunks={"gpu": 1, "seq_len": 1},
    )  # fmt: skip
    assert chunked.latency.chunks is not None
    xr.testing.assert_allclose(chunked.compute(), plain, rtol=1e-12)


# -- calibration ------------------------------------------------------------------------------------
def test_the_fitter_recovers_known_parameters_exactly():
    # step times priced by the model itself with known values must be fitted back to them
    points = data.load_step_times("splitwise")
    truth = calibration.Calibration(0.55, 0.7, 0.4, 0.004, 2e-4, 3e-5)
    exact = points.assign(seconds=calibration.predict(truth, points))
    fitted = calibration.fit(exact)
    for field in ("compute_efficiency", "bandwidth_efficiency", "interconnect_efficiency"):
        assert getattr(fitted, field) == pytest.approx(getattr(truth, field), rel=1e-6)
    for field in ("step_overhead_s", "sequence_overhead_s", "allreduce_latency_s"):
        assert getattr(fitted, field) == pytest.approx(getattr(truth, field), rel=1e-5)
    assert fitted.fit_error < 1e-9


def test_held_out_error_stays_under_the_stated_bounds():
    """The calibration's error on measured step times it was not fitted on.

    Bounds, and why: fitted on its own points the model is off by 7-10 % on average (Splitwise,
    per GPU), while repeated runs of one configuration differ by 0.3 % (median): the error is the
    model's own (it has no tensor-parallel-dependent GEMM efficiency, no kernel-level detail), not
    noise. A held-out error up to twice the in-sample one, 20 % mean, shows the model extrapolates
    to an unseen tensor-parallel degree or model rather than memorising the fitted points; across
    GPUs (fit one, predict the other) the serving stack's per-GPU efficiency differs as well, so
    the bound is 25 %. No single held-out point may be off by more than half.
    """
    report = calibration.holdout_report("splitwise").set_index("label")
    within = report.loc[[label for label in report.index if ":" in label]]
    across = report.loc[[label for label in report.index if "other GPU" in label]]
    assert (within.mean_error <= 0.20).all(), within
    assert (across.mean_error <= 0.25).all(), across
    assert (report.max_error <= 0.50).all(), report
    lmdeploy = calibration.holdout_report("lmdeploy").set_index("label")
    assert (lmdeploy.mean_error <= 0.20).all() and (lmdeploy.max_error <= 0.50).all()
    spread = data.load_step_times("splitwise").spread
    assert spread.median() < 0.01  # the repeats agree: the residual error is the model's


def test_calibration_for_uses_a_gpus_own_fit_else_the_pooled_one():
    own = calibration.calibration_for("A100-80GB")
    pooled = calibration.calibration_for("B200")
    assert own.fitted_on == "splitwise, A100-80GB" and pooled.fitted_on.endswith("pooled")
    assert 0 < own.compute_efficiency <= 1 and 0 < own.bandwidth_efficiency <= 1
    with pytest.raises(InputError, match="compute_efficiency must be in"):
        calibration.Calibration(1.5, 0.5, 0.5, 0, 0, 0)
    with pytest.raises(InputError, match="step_overhead_s must be a finite number of seconds >= 0"):
        calibration.Calibration(0.5, 0.5, 0.5, -1, 0, 0)


def test_modelled_throughput_stays_under_tensorrt_llms_published_maximum():
    """TensorRT-LLM's published maximum output throughput is an upper bound for the model.

    The analytic model (calibrated on Splitwise's vLLM-era runs, FP8 weights and KV cache, vLLM
    memory accounting) at its best concurrency must not beat NVIDIA's tuned engine on the same
    GPU, ISL/OSL and TP. Llama-3.1-70B stands in for Llama-3.3-70B (same architecture).
    """
    table = data.load_trtllm_throughput()
    rows = table[
        table.gpu.isin(["H100", "H200"])
        & table.model.isin(["Llama-3.3-70B-Instruct", "Llama-3.1-8B-Instruct"])
        & table.isl.isin([128, 2048])
        & table.osl.isin([128, 2048])
    ]
    assert len(rows) == 16
    for _, row in rows.iterrows():
        model = "Llama-3.1-70B" if "70B" in row.model else "Llama-3.1-8B"
        gpu = {"H100": "H100-SXM", "H200": "H200"}[row.gpu]
        kw = {"weight_dtype": "fp8", "kv_dtype": "fp8"}
        limit = memory.max_concurrency(
            model=model, gpu=gpu, tensor_parallel=int(row.tp), seq_len=int(row.isl + row.osl),
            accounting="vllm", **kw,
        ).max_concurrency.item()  # fmt: skip
        grid = latency.concurrency_grid(int(min(limit, 4096)))
        work = latency.workload(prompt_tokens=[row.isl], output_tokens=[row.osl])
        curve = latency.analytic(
            model, gpu, int(row.tp), workload=work, concurrency=grid, metrics=["e2e"],
            quantiles=[0.5], **kw,
        )  # fmt: skip
        tokens_per_s = float((grid / curve.mean_latency.squeeze().values).max() * row.osl)
        assert tokens_per_s <= row.total_output_tokens_per_s, (row.to_dict(), tokens_per_s)


def test_splitwise_step_times_are_reproduced_on_average():
    points = data.load_step_times("splitwise")
    predicted = np.concatenate(
        [
            calibration.predict(calibration.calibration_for(g), points[points.gpu == g])
            for g in ("A100-80GB", "H100-SXM")
        ]
    )
    measured = pd.concat([points[points.gpu == g] for g in ("A100-80GB", "H100-SXM")]).seconds
    error = np.abs(predicted / measured.to_numpy() - 1)
    assert error.mean() < 0.10
    # published example (Splitwise SOURCES): Llama-2-70B decode at batch 1, prompt 512, H100 TP8:
    # 30.6 ms per token (median over runs and generation lengths); the fit lands within 15 %
    h100 = points[
        (points.gpu == "H100-SXM") & (points.phase == "decode") & (points.batch == 1)
        & (points.tensor_parallel == 8) & (points.model == "Llama-2-70B")
    ]  # fmt: skip
    model = calibration.predict(calibration.calibration_for("H100-SXM"), h100)
    assert np.median(model) == pytest.approx(0.0306, rel=0.15)


def test_a_gpu_measured_on_one_model_and_engine_is_not_identified():
    # one model on one engine cannot tell the GPU from that model's kernels on that engine
    from capnb.latency import _fit

    def point(gpu, model, engine):
        config = ("s", gpu, model, engine, "1", 8, "bf16", 512.0, 512.0, "request_rate")
        return _fit.Point(config, 1.0, {("ttft", "p50"): 0.1})

    pts = [
        point("H200", "DeepSeek-V3", "SGLang"),
        point("H200", "DeepSeek-V3", "SGLang"),
        point("A100-80GB", "Llama-2-7B", "SGLang"),
        point("A100-80GB", "Llama-2-13B", "SGLang"),
        point("MI300X", "Llama-3.1-405B", "TGI"),
        point("MI300X", "Llama-3.1-405B", "vLLM"),
        # an alias of the catalog's name is the same model
        point("L40S", "meta-llama/Llama-3.3-70B-Instruct", "SGLang"),
        point("L40S", "Llama-3.1-70B", "SGLang"),
    ]
    assert _fit.identified_gpus(pts) == {"A100-80GB", "MI300X"}


def test_every_stored_fit_holds_only_the_gpus_its_sources_identify():
    from capnb.latency import _fit, _fitted, validate

    record = _fitted.stored()
    if record is None or record["data_hash"] != validate.data_hash():
        pytest.skip("no stored engine calibration of these measurements")
    # (the fit's own rule: runs it does not express, DP attention, identify nothing)
    pts = [pt for pt in _fit.points(data.load_measurements())[0] if _fit.expressed(pt)]
    assert set(record["calibration"]["gpus"]) == _fit.identified_gpus(pts)
    for source, fold in record["folds"].items():
        train = [pt for pt in pts if pt.source != source]
        assert set(fold["gpus"]) == _fit.identified_gpus(train), source
    # a GPU left out is predicted with the pooled values and the table says it was unseen (B200:
    # sgl-cookbook-v056 alone measured it); one the other sources identify is seen (H200)
    rows = [r for r in record["rows"] if r["source"] == "sgl-cookbook-v056" and r["gpu"] == "B200"]
    assert rows and not any(r["gpu_seen"] for r in rows)
    assert "B200" not in record["folds"]["sgl-cookbook-v056"]["gpus"]
    rows = [r for r in record["rows"] if r["source"] == "datacrunch-h200-sglang"]
    assert rows and all(r["gpu_seen"] for r in rows)
    assert "H200" in record["folds"]["datacrunch-h200-sglang"]["gpus"]


def test_a_partial_rerun_names_an_unknown_source_and_refuses_other_measurements():
    from capnb.latency import _fitted, validate

    record = _fitted.stored()
    if record is None or record["data_hash"] != validate.data_hash():
        pytest.skip("no stored engine calibration of these measurements")
    with pytest.raises(InputError, match="no measured source.*'nope'"):
        validate.refresh(record, ["nope"])
    with pytest.raises(InputError, match="other measurements"):
        validate.refresh({**record, "data_hash": "0" * 16}, ["lmdeploy-a100"])


@pytest.mark.parametrize("field", ["expert_efficiency", "bandwidth_efficiency", "step_overhead_s"])
@pytest.mark.parametrize("value", ["0.3", None, True])
def test_calibration_rejects_a_value_that_is_no_number_naming_the_field(field, value):
    """A string, None or a bool is an InputError naming the field, not a TypeError from '<'."""
    values = dict(compute_efficiency=0.7, bandwidth_efficiency=0.7, interconnect_efficiency=0.5,
                  step_overhead_s=0.003, sequence_overhead_s=1e-5, allreduce_latency_s=1e-5)  # fmt: skip
    with pytest.raises(InputError, match=f"Calibration.{field} must be a number"):
        calibration.Calibration(**{**values, field: value})
    assert calibration.Calibration(**{**values, field: np.float32(0.5)}).as_array().size == 6


def test_describe_claims_no_fit_count_or_error_the_calibration_does_not_hold():
    """The bundled engine calibration holds no point count or error: no '0 points, ... nan%'."""
    text = latency.engine_calibration("H100-SXM").describe()
    assert "nan" not in text and "0 points" not in text
    assert "routed experts read at" in text and "(fitted on engine fit" in text
    given = calibration.Calibration(0.7, 0.7, 0.5, 0.003, 1e-5, 1e-5).describe()
    assert given.endswith("(fitted on given)")


def test_a_stopped_parallel_validation_leaves_no_worker_running(tmp_path):
    # the workers of `validate --jobs N` end when their parent is killed (they used to run on)
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "tasks.py").write_text(
        "import os, time\n"
        "def task(seconds):\n"
        "    print(os.getpid(), flush=True)\n"
        "    time.sleep(seconds)\n",
        encoding="utf-8",
    )
    script = tmp_path / "parent.py"
    script.write_text(
        "from capnb.latency import validate\n"
        "import tasks\n"
        "if __name__ == '__main__':\n"
        "    validate._in_order(tasks.task, [120, 120], 2, lambda words: None)\n",
        encoding="utf-8",
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              cwd=tmp_path)  # fmt: skip
    try:
        workers = [int(parent.stdout.readline()) for _ in range(2)]
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while workers and time.monotonic() < deadline:
            for worker in list(workers):
                try:
                    os.kill(worker, 0)
                except ProcessLookupError:
                    workers.remove(worker)
            time.sleep(0.2)
        for worker in workers:
            os.kill(worker, signal.SIGKILL)
        assert not workers, "a worker outlived its parent by 30 s"
    finally:
        parent.kill()
        parent.wait(timeout=30)
        parent.stdout.close()

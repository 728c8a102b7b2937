"""The engine model: the kernel against the plain-Python simulator, invariants, inputs, the stored fit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import capnb
from benchmarks.reference.engine import simulate_python
from capnb import latency
from capnb.data import load_gpus, load_model
from capnb.errors import InputError
from capnb.kernels import engine as kernels
from capnb.kernels import latency as latency_kernels
from capnb.latency import calibration as cal
from capnb.latency._engine import gpu_vector
from capnb.latency._engine import model_vector as _engine_model_vector
from capnb.records import SLA, Deployment, EngineSettings

SPEC = load_model("Llama-3.1-8B")
GPUS = load_gpus(["H100-SXM"])


def _vectors(tp):
    return (
        cal.model_vector(SPEC, tp),
        cal.gpu_vector(GPUS, "H100-SXM", SPEC.weight_dtype),
        latency.engine_calibration("H100-SXM").engine_array(),
    )


CASES = {
    "closed, light": dict(closed=True, load=4, tp=1),
    "closed, TP 2": dict(closed=True, load=20, tp=2),
    "open, Poisson, TP 4": dict(closed=False, load=50.0, tp=4),
    "open, prefix hits": dict(closed=False, load=3.0, tp=1, hit=0.5),
    "closed, tiny KV cache (preemption)": dict(closed=True, load=30, tp=1, kv=1200),
    # vLLM V1: a preempted request's blocks stay cached until allocations evict them
    "closed, tiny KV cache, preempted blocks kept": dict(
        closed=True, load=30, tp=1, kv=1200, keep=True
    ),
    "batch at time 0, preempted blocks kept": dict(
        closed=False, load=1.0, tp=1, zero_gaps=True, warmup=0, kv=1500, budget=256, keep=True
    ),
    "hybrid groups, preempted blocks kept": dict(
        closed=True, load=30, tp=1, kv=2400, layout=(1, 2, 3), hit=0.3, keep=True
    ),
    "batch at time 0": dict(closed=False, load=1.0, tp=1, zero_gaps=True, warmup=0),
    "small token budget": dict(closed=True, load=12, tp=1, budget=64),
    "a request overhead": dict(closed=False, load=20.0, tp=2, overhead=0.0123),
    "a front end, open loop": dict(closed=False, load=20.0, tp=2, overhead=0.004, frontend=0.03),
    "a front end, closed loop": dict(closed=True, load=12, tp=1, frontend=0.02),
    "a front end, batch at time 0": dict(
        closed=False, load=1.0, tp=1, zero_gaps=True, warmup=0, frontend=0.01
    ),
    "prefill first, no chunking": dict(
        closed=False, load=30.0, tp=1, policy=1, chunked=0, budget=900
    ),
    "prefill first, chunked, preemption": dict(closed=True, load=30, tp=2, policy=1, kv=1500),
    "prefill first, batch at time 0": dict(
        closed=False, load=1.0, tp=1, policy=1, chunked=0, zero_gaps=True, warmup=0, budget=2048
    ),
    "mixed, no chunking": dict(closed=True, load=16, tp=1, chunked=0, budget=800),
    "mixture of experts": dict(closed=False, load=40.0, tp=2, moe=True),
    # vLLM's hybrid KV cache manager: one full and two window groups of 3 blocks, a small pool
    "hybrid groups (preemption)": dict(closed=True, load=30, tp=1, kv=2400, layout=(1, 2, 3)),
    "hybrid groups, prefill first": dict(
        closed=True, load=30, tp=2, policy=1, kv=3000, layout=(1, 1, 5)
    ),
    # admission reserves: SGLang's falling ratio (fast here: 0.05 a decode step), a batch whose
    # outputs cannot all be held; TensorRT-LLM's guaranteed remainder in a closed loop
    "a falling reserve, batch at time 0": dict(
        closed=False,
        load=1.0,
        tp=1,
        policy=1,
        zero_gaps=True,
        warmup=0,
        budget=2048,
        kv=3000,
        reserve=(0.7, 0.1, 0.05, 40.0),
    ),
    "a falling reserve, open loop with preemption": dict(
        closed=False,
        load=40.0,
        tp=1,
        policy=1,
        kv=1600,
        reserve=(0.7, 0.1, 0.02, 4096.0),
    ),
    "a guaranteed reserve, closed loop": dict(
        closed=True,
        load=20,
        tp=1,
        chunked=0,
        budget=800,
        kv=2000,
        reserve=(1.0, 1.0, 0.0, 1e9),
    ),
    # attention at half the layers' FLOP/s (BF16 attention beside FP8 weights)
    "attention at its own rate": dict(closed=True, load=12, tp=1, budget=2048, attention=0.5),
    # and the layers' FP8 products at 60 % of the compute efficiency
    "FP8 products at their own share": dict(
        closed=True, load=12, tp=1, budget=2048, attention=0.5, fp8=0.6
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_kernel_matches_the_python_simulator(case):
    c = {"hit": 0.0, "kv": 4000, "zero_gaps": False, "warmup": 5, "budget": 512, "overhead": None,
         "frontend": None, "policy": 0, "chunked": 1, "moe": False, "layout": (1, 0, 0),
         "reserve": kernels.NO_RESERVE, "attention": None, "fp8": None, "keep": False,
         **CASES[case]}  # fmt: skip
    rng = np.random.default_rng(1)
    n = 60
    prompt = rng.integers(1, 700, n)
    output = rng.integers(1, 60, n)
    gaps = np.zeros(n) if c["zero_gaps"] else rng.exponential(1.0, n)
    cached = (c["hit"] * prompt).astype(np.int64)
    model, gpu, calibration = _vectors(c["tp"])
    if c["moe"]:  # half the weights in 8 routed experts, 2 per token, read at 60 % of HBM's share
        # (their FLOP a token a third of the layers', computed at half the compute efficiency)
        model = np.append(model, [0.5 * model[1], 8.0, 2.0, model[0] / 3.0])
        calibration = calibration.copy()
        calibration[7] = 0.6
        calibration[9] = 0.5
    if c["overhead"] is not None:
        calibration = calibration.copy()
        calibration[6] = c["overhead"]
    if c["frontend"] is not None:
        calibration = np.append(calibration[:8], c["frontend"])
    if c["attention"] is not None:
        gpu = np.append(gpu[:3], c["attention"] * gpu[0])
    if c["fp8"] is not None:  # FP8 weights scaled by blocks (the model vector's last field)
        model = np.append(model, [0.0, 0.0, 0.0, 0.0, 1.0]) if model.size < 14 else model
        calibration = calibration.copy()
        calibration[10] = c["fp8"]
    settings = np.array([float(c["closed"]), c["load"], 8, c["budget"], c["kv"] // 16, 16,
                         c["warmup"], c["policy"], c["chunked"], *c["layout"], *c["reserve"],
                         float(c["keep"])])  # fmt: skip
    ttft, e2e = np.empty(n), np.empty(n)
    itl = np.empty(max(int(np.maximum(output[c["warmup"] :] - 1, 0).sum()), 1))
    stats, features = np.empty(len(kernels.STATS)), np.empty((3, len(kernels.FEATURES)))
    written = kernels.simulate(
        prompt, output, gaps, cached, settings, model, gpu, c["tp"], calibration,
        ttft, e2e, itl, stats, features,
    )  # fmt: skip
    ref = simulate_python(
        prompt, output, gaps, cached, closed=c["closed"], load=c["load"], max_num_seqs=8,
        max_num_batched_tokens=c["budget"], kv_blocks=c["kv"] // 16, block_size=16,
        warmup=c["warmup"], model=model, gpu=gpu, tensor_parallel=c["tp"], calibration=calibration,
        policy=kernels.POLICIES[c["policy"]], chunked_prefill=bool(c["chunked"]),
        kv_layout=c["layout"], reserve=c["reserve"], keep_preempted=c["keep"],
    )  # fmt: skip
    w = c["warmup"]
    assert np.array_equal(ttft[w:], np.array(ref["ttft"][w:]))  # identical, not close
    assert np.array_equal(e2e[w:], np.array(ref["e2e"][w:]))
    assert np.array_equal(itl[:written], np.concatenate([ref["itl"][i] for i in range(w, n)]))
    assert stats[kernels.STATS.index("preemptions")] == ref["preemptions"]
    assert stats[kernels.STATS.index("steps")] == ref["steps"]
    if case.startswith("closed, tiny") or "preempted blocks kept" in case:
        assert ref["preemptions"] > 0


def test_a_pure_decode_step_is_the_analytic_models():
    model, gpu, calibration = _vectors(2)
    features = np.empty(len(kernels.FEATURES))
    batch, context = 24.0, 1500.0
    pairs = batch * ((context - 1) + 1.0)  # one new token after context - 1 cached ones
    mine = kernels.mixed_step(batch, pairs, batch * context, batch, model, gpu, 2, calibration,
                              features)  # fmt: skip
    theirs = latency_kernels.decode_seconds(batch, context, model, gpu, 2, calibration)
    assert mine == pytest.approx(theirs, rel=1e-12)
    # the features, weighted by the calibration, are the step time
    weights = np.array(
        [1 / calibration[0], 1 / calibration[1], 1 / calibration[2], *calibration[3:7]]
    )  # (the request overhead's feature is 0 in a step; a dense model has no routed experts)
    assert features @ weights == pytest.approx(mine, rel=1e-12)


@pytest.mark.parametrize("spelling", ["fp8_e4m3", "FP8", "float8_e4m3fn"])
def test_fp8_weights_spelt_otherwise_are_priced_as_fp8(spelling):
    # Deployment and analytic accepted 'fp8_e4m3' (vLLM's spelling) as 1-byte weights, but the
    # FLOP side compared the string with "fp8" and priced them at BF16 FLOP/s: Llama-3.1-70B at
    # TP 2 on H100-SXM, an 8,000-token prompt, TTFT 1,029 ms on the engine against 618 ms as 'fp8'
    w = latency.workload(prompt_tokens=[8000], output_tokens=[16])
    ttft = {}
    for dtype in ("fp8", spelling):
        sim = latency.engine(Deployment("Llama-3.1-70B", "H100-SXM", 2, weight_dtype=dtype), w,
                             concurrency=[1], requests=5)  # fmt: skip
        curve = latency.analytic("Llama-3.1-70B", "H100-SXM", 2, workload=w, concurrency=[1],
                                 weight_dtype=dtype)  # fmt: skip
        ttft[dtype] = (sim.mean_latency.sel(metric="ttft").item(),
                       curve.mean_latency.sel(metric="ttft").item())  # fmt: skip
    assert ttft[spelling] == pytest.approx(ttft["fp8"], rel=1e-9)
    assert cal.gpu_vector(GPUS, "H100-SXM", spelling)[0] == 1978e12


def test_quantile_selection_is_the_inverse_cdf():
    rng = np.random.default_rng(3)
    values = rng.exponential(1.0, 1001)
    out = np.empty(4)
    qs = np.array([0.5, 0.9, 0.95, 0.99])
    kernels._quantiles(values.copy(), values.size, qs, out)
    assert np.array_equal(out, np.quantile(values, qs, method="inverted_cdf"))


# -- the public function ----------------------------------------------------------------------
W = latency.workload(prompt_tokens=[200, 800, 1500, 3000], output_tokens=[50, 150, 300, 100])


SETTINGS = ("engine", "chunked_prefill", "max_num_seqs", "max_num_batched_tokens", "max_model_len")


def _engine(**kw):
    args = {"requests": 300, "seed": 0, **kw}
    given = {k: args.pop(k) for k in SETTINGS if k in args}
    settings = args.pop("settings", None) or EngineSettings(**given)
    return latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), W, settings=settings, **args)


def test_ttft_grows_with_load_and_the_knee_is_past_max_num_seqs():
    curve = _engine(concurrency=[1, 4, 8, 16, 24, 32, 48, 64], max_num_seqs=16)
    ttft = curve.mean_latency.sel(metric="ttft").values
    assert (np.diff(ttft) > 0).all()
    p99 = curve.latency.sel(metric="ttft", latency_quantile=0.99)
    assert float(p99.sel(concurrency=32)) > 3 * float(p99.sel(concurrency=16))
    # past max_num_seqs a request waits for a whole request to finish: TTFT jumps
    assert float(p99.sel(concurrency=24)) > 5 * float(p99.sel(concurrency=16))
    assert math.isfinite(float(curve.knee)) and float(curve.knee) <= 24
    # read from max_num_seqs on, the knee is the first point past it
    grid = curve.concurrency.values[3:]
    assert latency.knee(grid, p99.values[3:])[0] == pytest.approx(17.0, abs=7.0)
    assert curve.attrs["kind"] == "engine" and curve.knee.attrs["units"] == "requests"


def test_open_loop_above_the_throughput_saturates():
    closed = _engine(concurrency=[256], requests=900)  # max_num_seqs in flight: the capacity
    capacity = float(closed.throughput[0])
    short = _engine(request_rate=[0.3 * capacity, 2 * capacity], requests=300)
    long = _engine(request_rate=[0.3 * capacity, 2 * capacity], requests=900)
    ttft = lambda c: c.mean_latency.sel(metric="ttft").values  # noqa: E731
    assert ttft(long)[0] == pytest.approx(ttft(short)[0], rel=0.5)  # below capacity: steady
    assert ttft(long)[1] > 2.5 * ttft(short)[1]  # above: the queue grows with the run
    # served: about the closed loop's capacity, far below the 2 x capacity offered
    assert 0.7 * capacity < float(long.throughput[1]) < 0.7 * 2 * capacity
    assert "request_rate" in long.dims and long.knee.attrs["units"] == "requests/s"


def test_prefix_hits_lower_ttft():
    plain = _engine(concurrency=[8])
    cached = _engine(concurrency=[8], prefix_hit_rate=0.8)
    # the steps' share of TTFT halves at least; the request's own overhead outside them does not
    outside = latency.engine_calibration("H100-SXM", "vllm-v1").request_overhead_s
    assert outside > 0.0
    ttft = lambda c: float(c.mean_latency.sel(metric="ttft")[0]) - outside  # noqa: E731
    assert 0.0 < ttft(cached) < 0.5 * ttft(plain)


def test_a_tiny_kv_cache_preempts():
    roomy = _engine(concurrency=[32])
    tight = _engine(concurrency=[32], kv_cache_tokens=8000)
    assert int(roomy.preemptions[0]) == 0 and int(tight.preemptions[0]) > 0
    assert float(tight.mean_latency.sel(metric="e2e")[0]) > float(
        roomy.mean_latency.sel(metric="e2e")[0]
    )


def test_the_same_seed_gives_the_same_curve():
    a = _engine(request_rate=[5.0, 20.0], seed=7)
    b = _engine(request_rate=[5.0, 20.0], seed=7)
    c = _engine(request_rate=[5.0, 20.0], seed=8)
    assert a.identical(b)
    assert not np.array_equal(a.latency.values, c.latency.values)


def test_threads_give_the_same_answer():
    import numba

    grid = np.arange(1, 41)
    many = latency.engine(
        Deployment("Llama-3.1-8B", "H100-SXM", 1), W, concurrency=grid, requests=2000
    )
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = latency.engine(
            Deployment("Llama-3.1-8B", "H100-SXM", 1), W, concurrency=grid, requests=2000
        )
    finally:
        numba.set_num_threads(threads)
    assert many.identical(one)


def test_an_engine_curve_plans_like_any_curve():
    curve = _engine(concurrency=[1, 2, 4, 8, 16, 32, 64])
    plan = capnb.capacity.plan(curve, 2.0, 10.0, metric="ttft")
    assert int(plan.safe_concurrency) >= 1 and float(plan.per_instance_qps) > 0
    assert int(plan.gpus) == int(plan.instances)  # tensor_parallel 1, read from the curve


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"concurrency": [0, 4]}, "concurrency"),
        ({"request_rate": [-1.0]}, "request_rate"),
        ({"request_rate": "fast"}, "request_rate"),
        ({"concurrency": [4], "request_rate": [1.0]}, "not both"),
        ({"prefix_hit_rate": 1.5}, "prefix_hit_rate"),
        ({"kv_cache_tokens": 1000}, "kv_cache_tokens"),
        ({"max_num_seqs": -1}, "max_num_seqs"),
        ({"max_num_seqs": 2.5}, "max_num_seqs"),
        ({"settings": {"max_num_seqs": 8}}, "settings"),
        ({"max_num_batched_tokens": -5}, "max_num_batched_tokens"),
        ({"arrival_cv": -1.0}, "arrival_cv"),
        ({"requests": 0}, "requests"),
        ({"seed": 1.5}, "seed"),
        ({"calibration": "fast"}, "calibration"),
        # every request left out: the figures came from the last one (P99 TTFT of 1 request)
        ({"warmup_share": 1.0}, r"warmup_share must be in \[0.0, 1.0\)"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs, named):
    with pytest.raises(InputError, match=named):
        _engine(**kwargs)


def test_an_invalid_tensor_parallel_is_named():
    with pytest.raises(InputError, match="tensor_parallel"):
        latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 3), W, concurrency=[1, 2])


# -- the stored calibration and validation ------------------------------------------------------
def test_the_stored_fit_is_of_the_current_measurements():
    from capnb.latency import _fit, _fitted, validate

    record = _fitted.stored()
    if record is None:
        pytest.skip("no stored engine calibration yet")
    assert record["data_hash"] == validate.data_hash(), (
        "the measurement files changed: run python -m capnb.latency.validate --write VALIDATION.md"
    )
    # a few stored held-out predictions are reproduced from the stored fold calibration
    from capnb.data import load_measurements

    pts, _ = _fit.points(load_measurements())
    by_key = {(pt.source, tuple(_fit.curve_key(pt)), pt.load): pt for pt in pts}
    checked = 0
    for row in record["rows"][:: max(len(record["rows"]) // 5, 1)]:
        pt = by_key[(row["source"], tuple(row["curve"]), row["load"])]
        fold = record["folds"][row["source"]]
        calibration = _fitted.from_fold(fold, row["gpu"], row["engine_id"]).engine_array()
        got, _ = _fit.simulate_point(pt, calibration, requests=validate.REQUESTS)
        # (a request that never runs is NaN in the record and again here)
        assert got[(row["metric"], row["stat"])] == pytest.approx(row["engine"], rel=1e-9,
                                                                  nan_ok=True)  # fmt: skip
        checked += 1
    assert checked >= 3
    text = json.dumps(record["calibration"])
    assert "NaN" not in text


def test_own_run_rows_in_two_processes_are_the_stored_rows_of_one():
    # validate --jobs N: each curve's or configuration's own-run fits in a process of its own,
    # the rows put back in the order one process writes them (a source with five configurations)
    from capnb.data import load_measurements
    from capnb.latency import _fit, _fitted, validate

    record = _fitted.stored()
    if record is None or record["data_hash"] != validate.data_hash():
        pytest.skip("no stored engine calibration of the current measurements")
    source = "trtllm-static-batch"
    pts = [pt for pt in _fit.points(load_measurements())[0] if pt.source == source]
    rows = validate.own_run_rows(pts, record["folds"], jobs=2)
    one = validate.own_run_rows(pts, record["folds"], jobs=1)
    assert json.dumps(rows, default=float) == json.dumps(one, default=float)
    # the stored rows were written with other releases of numpy and scipy: the same to 1e-9
    stored = [r for r in record["own_run"] if r["source"] == source]
    assert len(rows) == len(stored) > 0
    for got, want in zip(rows, stored, strict=True):
        assert {k: v for k, v in got.items() if k != "predicted"} == {
            k: v for k, v in want.items() if k != "predicted"
        }
        assert got["predicted"] == pytest.approx(want["predicted"], rel=1e-9, nan_ok=True)


def test_the_validation_section_is_the_stored_records():
    from pathlib import Path

    from capnb.latency import _fitted, validate

    record = _fitted.stored()
    if record is None:
        pytest.skip("no stored engine calibration yet")
    text = (Path(__file__).resolve().parents[1] / "VALIDATION.md").read_text(encoding="utf-8")
    assert validate.markdown(record) in text
    assert validate.own_run_markdown(record) in text


def test_a_request_that_never_runs_reports_nan_gaps_and_the_same_results_each_call():
    # TGI on MI300X does not chunk prefill: dstack's 128,000-token prompt never fits a step, so the
    # request never runs; its 149 gaps were left as unwritten memory (np.empty), which the fit read
    # as inter-token latencies that changed from call to call
    from capnb.data import load_measurements
    from capnb.latency import _fit

    frame = load_measurements()
    points, _ = _fit.points(frame[frame.source == "dstack-mi300x-tgi-vs-vllm"])
    point = next(p for p in points if p.config[7] == 128000.0 and p.config[-1] == "batch")
    s = _fit.setup(point, requests=400, seed=0)
    vec = np.array([_fit._START[k] for k in kernels.CALIBRATION_FIELDS])
    runs = []
    for _ in range(2):
        ttft, e2e, itl, _stats, _features = _fit.simulate_setup(s, vec)
        runs.append((ttft, e2e, itl))
    assert np.isnan(runs[0][0]).all() and np.isnan(runs[0][1]).all()  # it never ran
    assert itl.size == 149 and np.isnan(runs[0][2]).all()
    for a, b in zip(*runs, strict=True):
        assert np.array_equal(a, b, equal_nan=True)


def test_runs_with_attention_data_parallel_are_predicted_not_fitted():
    # SGLang --enable-dp-attention (DeepSeek-V3 on 8 x H200) replicates attention on every rank;
    # the step prices sharded attention and two all-reduces a layer, so the fit must not take
    # those runs' time into the H200's efficiencies or SGLang's overheads
    from capnb.data import load_measurements
    from capnb.latency import _fit

    pts, _ = _fit.points(load_measurements())
    left_out = {pt.source for pt in pts if not _fit.expressed(pt)}
    assert left_out == {"datacrunch-h200-sglang-deepseek-v3"}
    with pytest.raises(InputError, match="fit_all: no measured point"):
        _fit.fit_all([pt for pt in pts if not _fit.expressed(pt)])


def test_routed_experts_read_at_their_own_share_of_the_hbm_efficiency():
    # a mixture of experts' routed weights count 1 / expert_efficiency times in a step's bytes; a
    # dense model's step does not depend on it, and a seven-value calibration reads them as dense
    model, gpu, calibration = _vectors(1)
    moe = np.append(model, [0.5 * model[1], 8.0, 2.0])  # half the weights in 8 experts, 2 a token
    dense_features, moe_features = np.empty(len(kernels.FEATURES)), np.empty(len(kernels.FEATURES))
    tokens, kv_read = 1.0, 1000.0
    at = {}
    for share in (1.0, 0.5):
        c = calibration.copy()
        c[7] = share
        at[share] = kernels.step_time(tokens, tokens, kv_read, 1.0, moe, gpu, 1, c, moe_features)
        dense = kernels.step_time(tokens, tokens, kv_read, 1.0, model, gpu, 1, c, dense_features)
        assert dense == kernels.step_time(tokens, tokens, kv_read, 1.0, model, gpu, 1,
                                          calibration[:7], dense_features)  # fmt: skip
    touched = 1.0 - (1.0 - 2.0 / 8.0) ** tokens  # one token reads 2 of 8 experts
    extra = 0.5 * model[1] * touched / gpu[1] / calibration[1]  # read twice as long at 0.5
    assert at[0.5] - at[1.0] == pytest.approx(extra, rel=1e-9)
    assert at[1.0] == kernels.step_time(tokens, tokens, kv_read, 1.0, moe, gpu, 1, calibration[:7],
                                        moe_features)  # fmt: skip


def _prefill_at_shares(field, shares, model, gpu, calibration, tokens=8192.0):
    """{share: seconds} of a compute-bound step of ``tokens`` prompt tokens, ``calibration[field]``
    set to each share."""
    out = np.empty(len(kernels.FEATURES))
    at = {}
    for share in shares:
        c = calibration.copy()
        c[field] = share
        at[share] = kernels.step_time(tokens, tokens, tokens, 1.0, model, gpu, 1, c, out)
        assert out[0] > 0.0  # compute-bound
    return at


def test_routed_experts_compute_at_their_own_share_of_the_compute_efficiency():
    # the routed experts' FLOP a token (expert_flop, part of the layer FLOP) count
    # 1 / expert_compute_efficiency times in a compute-bound step (8,192 prompt tokens); a decode
    # step of one token stays bound by its reads; a nine-value calibration computes them as dense
    model, gpu, calibration = _vectors(1)
    moe = np.append(model, [0.5 * model[1], 8.0, 2.0, model[0] / 3.0])
    out = np.empty(len(kernels.FEATURES))
    tokens = 8192.0
    at = _prefill_at_shares(9, (1.0, 0.4), moe, gpu, calibration, tokens)
    extra = model[0] / 3.0 * tokens * (1.0 / 0.4 - 1.0) / gpu[0] / calibration[0]
    assert at[0.4] - at[1.0] == pytest.approx(extra, rel=1e-9)
    assert at[1.0] == kernels.step_time(tokens, tokens, tokens, 1.0, moe, gpu, 1, calibration[:9],
                                        out)  # fmt: skip
    decode = {}
    for share in (1.0, 0.4):
        c = calibration.copy()
        c[9] = share
        decode[share] = kernels.step_time(1.0, 1.0, 1000.0, 1.0, moe, gpu, 1, c, out)
    assert decode[0.4] == decode[1.0]  # (one token's arithmetic hides under its reads)


def test_fp8_products_compute_at_their_own_share_of_the_compute_efficiency():
    # FP8 weights scaled by blocks on an H100: the layers' FLOP at FP8's catalog rate count
    # 1 / share times in a compute-bound step; attention (BF16) and the reads do not change; BF16
    # weights (the GPU vector's products at attention's rate), per-tensor FP8 weights (vLLM's
    # --quantization fp8 of a BF16 checkpoint) and a ten-value calibration are untouched
    spec = load_model("Llama-3.1-8B")
    model = _engine_model_vector(spec, 1, weight_dtype="fp8", fp8_block=True)
    per_tensor = _engine_model_vector(spec, 1, weight_dtype="fp8")
    assert model[-1] == 1.0 and per_tensor[-1] == 0.0 and (model[:-1] == per_tensor[:-1]).all()
    fp8_gpu = gpu_vector(GPUS, "H100-SXM", "fp8")
    bf16_gpu = gpu_vector(GPUS, "H100-SXM", "bf16")
    assert fp8_gpu[0] == 2.0 * bf16_gpu[0] and fp8_gpu[3] == bf16_gpu[0]
    calibration = latency.engine_calibration("H100-SXM").engine_array()
    out = np.empty(len(kernels.FEATURES))
    tokens = 8192.0
    at = _prefill_at_shares(10, (1.0, 0.5), model, fp8_gpu, calibration, tokens)
    # BF16 products and per-tensor FP8 keep their rate whatever the share
    for vector, g in ((model, bf16_gpu), (per_tensor, fp8_gpu)):
        unshared = kernels.step_time(tokens, tokens, tokens, 1.0, vector, g, 1, calibration[:10],
                                     out)  # fmt: skip
        assert set(_prefill_at_shares(10, (1.0, 0.5), vector, g, calibration, tokens).values()) == {
            unshared
        }
    extra = model[0] * tokens * (1.0 / 0.5 - 1.0) / fp8_gpu[0] / calibration[0]
    assert at[0.5] - at[1.0] == pytest.approx(extra, rel=1e-9)
    assert at[1.0] == kernels.step_time(tokens, tokens, tokens, 1.0, model, fp8_gpu, 1,
                                        calibration[:10], out)  # fmt: skip
    # at a share of 0.5 a prefill step of FP8 products costs what BF16's would (same FLOP/s;
    # the LM head's products, one a sequence, stay at FP8's rate: 1 ppm apart)
    bf16_step = kernels.step_time(tokens, tokens, tokens, 1.0, model, bf16_gpu, 1, calibration, out)
    assert at[0.5] == pytest.approx(bf16_step, rel=1e-5) and at[0.5] < bf16_step


def test_a_curve_says_how_its_fp8_weights_are_scaled(tmp_path):
    # a checkpoint with weight_block_size (Qwen3-8B-FP8's quantization_config) is block-scaled;
    # vLLM's --quantization fp8 of the BF16 checkpoint is not (one scale a tensor); BF16 is no FP8
    import json

    config = dict(load_model("Qwen3-8B").config)
    config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    work = latency.workload(prompt_tokens=500, output_tokens=50)
    scaling = {}
    for key, deployment in {"block": Deployment(str(path), "H100-SXM", 1),
                            "online": Deployment("Qwen3-8B", "H100-SXM", 1, weight_dtype="fp8"),
                            "bf16": Deployment("Qwen3-8B", "H100-SXM", 1)}.items():  # fmt: skip
        curve = latency.engine(deployment, work, concurrency=[1], requests=50)
        scaling[key] = (curve.attrs["weight_dtype"], curve.attrs["fp8_scaling"])
    assert scaling == {"block": ("fp8", "block"), "online": ("fp8", "tensor or channel"),
                       "bf16": ("bf16", "")}  # fmt: skip


def test_expert_flop_is_the_routed_experts_share_of_the_active_layer_flop():
    # gpt-oss-120b: 36 layers of 128 experts, 4 a token; each expert 3 x 2880 x 2880 weights
    # (gate, up, down) and its biases: 4 x 36 x that x 2 FLOP a token (of 2 x layer_parameters)
    spec = load_model("gpt-oss-120b")
    vector = _engine_model_vector(spec, 2)
    expert = spec._mlp_parameters(spec.moe_intermediate_size or spec.intermediate_size)
    assert vector[kernels.MODEL_FIELDS.index("expert_flop")] == 2.0 * 36 * 4 * expert / 2
    assert (
        0.5 < vector[kernels.MODEL_FIELDS.index("expert_flop")] / vector[0] < 1.0
    )  # most of a token's layer FLOP are its experts'
    assert _engine_model_vector(SPEC, 1)[-5:].tolist() == [0.0] * 5  # dense, BF16


def test_the_experts_share_is_fitted_only_where_a_fitted_run_serves_a_mixture_of_experts():
    from capnb.data import load_measurements
    from capnb.latency import _fit

    pts, _ = _fit.points(load_measurements())
    moe = {pt.model for pt in pts if _fit.routes_experts(pt)}
    assert {"Qwen3-235B-A22B", "DeepSeek-R1", "DeepSeek-V3"} <= moe
    assert not {"Llama-3.1-70B", "Llama-2-7B"} & moe
    dense = [pt for pt in pts if pt.source == "sglang-v030-online"]
    layout = _fit.layout_of(dense, pooled=True)
    assert not layout.expert and layout.columns(dense[0].gpu, dense[0].engine_id)[7] == -1
    assert layout.vector(np.ones(layout.size), dense[0].gpu, dense[0].engine_id)[7] == 1.0
    mixed = dense + [pt for pt in pts if pt.source == "sgl-cookbook-v056"]
    layout = _fit.layout_of(mixed, pooled=False)
    assert layout.expert
    positions = {layout.columns(g, e)[7] for g in layout.gpus for e in layout.engines}
    arithmetic = {layout.columns(g, e)[9] for g in layout.gpus for e in layout.engines}
    fp8 = {layout.columns(g, e)[10] for g in layout.gpus for e in layout.engines}
    # one value each, shared by every GPU and engine (the cookbook's FP8 DeepSeek runs fit the
    # FP8 products' share too, last)
    assert layout.fp8 and (positions, arithmetic, fp8) == (
        {layout.size - 3},
        {layout.size - 2},
        {layout.size - 1},
    )
    assert not _fit.layout_of(dense, pooled=True).fp8  # BF16 runs: held at 1
    # a dense model's own runs keep the prior's share (they say nothing about routed experts)
    from capnb.latency import _own

    prior = latency.engine_calibration("A100-80GB", "sglang")
    prior = cal.Calibration(**{**{k: getattr(prior, k) for k in kernels.CALIBRATION_FIELDS},
                               "expert_efficiency": 0.42, "expert_compute_efficiency": 0.31,
                               "fp8_compute_efficiency": 0.55},
                          fitted_on="test")  # fmt: skip
    one_gpu = [pt for pt in dense if pt.gpu == "A100-80GB"]
    own = _own.fit_own(one_gpu, prior)
    assert (own.expert_efficiency, own.expert_compute_efficiency) == (0.42, 0.31)
    assert own.fp8_compute_efficiency == 0.55


def test_each_gpu_fits_its_own_interconnect_efficiency():
    # one interconnect efficiency was shared by every GPU (fitted at 0.25): on the H100, whose
    # runs at TP 4-8 pay mostly all-reduces, the compute efficiency then had to read 0.74 for
    # them to fit, and its one-GPU steps of 8,192 prompt tokens ran twice as fast as the
    # measured ITL of gpustack's Qwen3-32B (665-746 ms simulated, 1,395-1,462 ms measured)
    from capnb.data import load_measurements
    from capnb.latency import _fit

    pts, _ = _fit.points(load_measurements())
    layout = _fit.layout_of(pts, pooled=False)
    links = {g: layout.columns(g, e)[2] for g in layout.gpus for e in layout.engines}
    assert len(set(links.values())) == layout.n_gpu > 1
    per_gpu = {c for g in layout.gpus for e in layout.engines for c in layout.columns(g, e)[:3]}
    assert per_gpu == set(range(3 * layout.n_gpu))
    assert _fit.layout_of(pts, pooled=True).columns(pts[0].gpu, pts[0].engine_id)[:3] == [0, 1, 2]


def test_each_engine_fits_its_own_request_overhead_and_offline_runs_pay_none():
    from capnb.data import load_measurements
    from capnb.latency import _fit

    pts, _ = _fit.points(load_measurements())
    by_source = {}
    for pt in pts:
        by_source.setdefault(pt.source, []).append(pt)
    # the sources timed in the engine's own process, and only those, are offline
    offline = {s for s, group in by_source.items() if _fit.offline(_fit.run_of(group[0]))}
    assert offline == {"trtllm-static-batch", "lmdeploy-a100", "rocm-vllm-mi300x-latency"}
    assert all(_fit.offline(_fit.run_of(pt)) == (pt.source in offline) for pt in pts)
    # per engine a request column and a front-end column, next to its three step overheads
    mixed = by_source["sglang-v030-online"] + by_source["lmdeploy-a100"]
    layout = _fit.layout_of(mixed, pooled=False, request=True)
    assert layout.per_engine == 5
    columns = {e: layout.columns(g, e) for g in layout.gpus for e in layout.engines}
    assert columns["sglang"][6] != columns["lmdeploy"][6]
    assert all(c[6] == c[5] + 1 and c[8] == c[6] + 1 for c in columns.values())
    assert layout.size == 3 * layout.n_gpu + 5 * layout.n_engine
    held = _fit.layout_of(mixed, pooled=False)
    assert held.columns(mixed[0].gpu, mixed[0].engine_id)[6] == -1
    assert held.columns(mixed[0].gpu, mixed[0].engine_id)[8] == -1
    # an online run's TTFT and E2E carry the overhead exactly; an offline run's do not move
    for pt, pays in (
        (by_source["sglang-v030-online"][0], True),
        (by_source["lmdeploy-a100"][0], False),
    ):
        s = _fit.setup(pt, requests=64)
        vec = latency.engine_calibration(pt.gpu, pt.engine_id).engine_array()
        vec[6] = 0.0
        ttft0, e2e0, itl0, *_ = _fit.simulate_setup(s, vec)
        vec[6] = 0.25
        ttft1, e2e1, itl1, *_ = _fit.simulate_setup(s, vec)
        assert np.array_equal(itl0, itl1)
        if not pays:  # nor does the front end move an offline run
            front = vec.copy()
            front[8] = 0.05
            assert np.array_equal(_fit.simulate_setup(s, front)[0], ttft1, equal_nan=True)
        shift = 0.25 if pays else 0.0
        timed = s.timed  # (the warm-up's requests are not recorded)
        assert timed.sum() > 10
        np.testing.assert_allclose(ttft1[timed] - ttft0[timed], shift, atol=1e-12)
        np.testing.assert_allclose(e2e1[timed] - e2e0[timed], shift, atol=1e-12)
    # the sparsity pattern never ties an offline figure to a request column
    sparsity = _fit._sparsity(mixed, layout, None)
    lmdeploy_rows = sum(len(pt.figures) for pt in by_source["sglang-v030-online"])
    for c in (6, 8):
        assert not sparsity[lmdeploy_rows:, columns["lmdeploy"][c]].any()
        assert sparsity[:lmdeploy_rows, columns["sglang"][c]].all()


def test_requests_longer_than_the_context_are_refused_or_noted():
    """vLLM rejects a request over max_model_len: an error when given, a note past the model's."""
    long = latency.workload(prompt_tokens=[150_000] * 4, output_tokens=[100] * 4)
    curve = latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), long, concurrency=[1],
                           requests=8)  # fmt: skip
    assert "longer than Llama-3.1-8B's context of 131,072 tokens" in curve.attrs["notes"]
    with pytest.raises(InputError, match=r"settings: max_model_len = 2,048 tokens, but .* 3,\d{3}"):
        _engine(concurrency=[1], max_model_len=2048)  # W's prompts reach 3,000 tokens
    assert "context" not in _engine(concurrency=[1], requests=20).attrs["notes"]


def test_a_negative_seed_is_an_input_error():
    with pytest.raises(InputError, match=r"seed must be an integer in \[0, 2\*\*64\), got -1"):
        _engine(concurrency=[1], seed=-1)  # was numpy's bare ValueError


def test_the_engine_curves_memory_limit_counts_whole_kv_blocks_as_the_memory_step_does():
    # vLLM allocates a sequence's KV cache in whole blocks: 1,426 tokens take 90 blocks of 16, so
    # the sequences that fit are the blocks over 90, what capnb.memory counts with vLLM's
    # accounting; the engine's limit (the answer's "memory holds") had been the tokens over 1,426
    workload = latency.workload(prompt_tokens=[1215] * 8, output_tokens=[211] * 8)
    curve = capnb.capacity.engine_curve_of(Deployment("Qwen3-8B", "A100-80GB", 2), workload,
                                           requests=200)  # fmt: skip
    # (profiled as vLLM runs the curve's 512 sequences at once on an A100, 2,048 tokens a step:
    # vllm serve's 256 leave room for 631, but a server run at --max-num-seqs 512 holds 616)
    acct = capnb.memory.accounting("vllm", vllm_version="0.10", max_num_seqs=512,
                                   max_num_batched_tokens=2048)  # fmt: skip
    held = capnb.memory.max_concurrency(model="Qwen3-8B", gpu="A100-80GB", tensor_parallel=2,
                                        seq_len=1426, accounting=acct)  # fmt: skip
    assert curve.attrs["memory_limit"] == int(held.max_concurrency.squeeze()) == 616


def test_the_engines_kv_cache_is_profiled_as_vllm_serve_runs_on_each_gpu():
    # vLLM sizes its KV cache after a profile run of max_num_batched_tokens tokens and a sampler
    # run over max_num_seqs requests; vllm serve sets 256 and 2,048 on GPUs under 70 GiB and on
    # A100s, 1,024 and 8,192 on the others. The engine had profiled every GPU at 1,024 and 8,192:
    # Llama-3.1-8B on one L4 got 14,096 tokens where vLLM at its defaults holds 43,344
    from capnb.data import load_model
    from capnb.latency import _engine

    spec = load_model("Llama-3.1-8B")
    for gpu, profile in (("L4", (256, 2048)), ("L40S", (256, 2048)), ("A100-80GB", (256, 2048)),
                         ("H100-SXM", (1024, 8192)), ("H200", (1024, 8192))):  # fmt: skip
        assert _engine.profile_settings(gpu) == profile, gpu
        acct = capnb.memory.accounting("vllm", vllm_version="0.10", max_num_seqs=profile[0],
                                       max_num_batched_tokens=profile[1])  # fmt: skip
        held = capnb.memory.max_concurrency(model=spec, gpu=gpu, tensor_parallel=1, seq_len=16,
                                            accounting=acct)  # fmt: skip
        assert _engine.kv_tokens_auto(spec, gpu, 1) == int(held.kv_cache_tokens.item()), gpu
    assert _engine.kv_tokens_auto(spec, "L4", 1) == 43_344
    # a vLLM V1 server started with other limits profiles them; another engine's cache is sized
    # as vllm serve's on the GPU (the stand-in capnb uses for every engine's KV cache)
    fewer = EngineSettings("vllm-v1", max_num_seqs=64)
    assert _engine.profile_settings("H100-SXM", fewer) == (64, 8192)
    assert _engine.kv_tokens_auto(spec, "H100-SXM", 1, settings=fewer) > _engine.kv_tokens_auto(
        spec, "H100-SXM", 1
    )
    assert _engine.profile_settings("H100-SXM", EngineSettings("tgi")) == (1024, 8192)
    # the sampler's batch is the forward pass's requests: at most one per token of the step
    many = EngineSettings("vllm-v1", max_num_seqs=2**31 - 1)
    assert _engine.profile_settings("H100-SXM", many) == (8192, 8192)


def test_an_option_run_above_the_default_sequences_is_profiled_running_them():
    # Llama-3.1-8B on an L40S holds 484 sequences of 400 tokens in the KV cache vllm serve's
    # profile of 256 sequences leaves (193,888 tokens); the plan then runs 484 at once and its
    # pods and benchmark commands pass --max-num-seqs 484, which vLLM profiles: 1.06 GiB more
    # sampler, a KV cache of 185,200 tokens that holds 463 such sequences, not 484
    from capnb.latency import _engine

    short = latency.workload(prompt_tokens=[300] * 8, output_tokens=[100] * 8)
    option = Deployment("Llama-3.1-8B", "L40S", 1)
    swept = capnb.capacity.sweep_engine(option.model, [option.gpu], [1], short, SLA(e2e_s=30.0),
                                        10.0, requests=100)  # fmt: skip
    held = int(swept.max_concurrency.item())
    assert held > 256  # above vllm serve's default on the L40S: the server runs --max-num-seqs
    served = EngineSettings("vllm-v1", max_num_seqs=held)
    kv = _engine.kv_tokens_auto(load_model(option.model), option.gpu, 1, settings=served)
    assert int(swept.running_tokens.item()) <= kv
    assert _engine.held_sequences(option, kv, 400) >= held
    curve = capnb.capacity.engine_curve_of(option, short, requests=100)
    assert curve.attrs["memory_limit"] == held


@pytest.mark.parametrize("engine", ["tgi", "trtllm"])
def test_a_prompt_over_the_token_budget_without_chunked_prefill_is_an_error_not_nan(engine):
    """TGI and TensorRT-LLM (no chunked prefill) never schedule a prompt over their step budget.

    A 10,000-token prompt on TGI (4,096 prefill tokens a step) or TensorRT-LLM (8,192) gave a
    curve of NaN latencies and a numba RuntimeWarning; the engine refuses such a request.
    """
    long = latency.workload(prompt_tokens=[10_000] * 4, output_tokens=[10] * 4)
    deployment = Deployment("Llama-3.1-8B", "H100-SXM", 1)
    with pytest.raises(InputError, match=r"max_num_batched_tokens = [\d,]+ tokens .* 10,000"):
        latency.engine(deployment, long, concurrency=[1], requests=8,
                       settings=EngineSettings(engine))  # fmt: skip
    chunked = EngineSettings(engine, chunked_prefill=True)
    curve = latency.engine(deployment, long, concurrency=[1], requests=8, settings=chunked)
    assert np.isfinite(curve.latency.sel(metric="ttft")).all()


def test_a_preempted_request_whose_recompute_exceeds_the_budget_is_an_error_not_nan():
    """Without chunked prefill, a request preempted after generating is recomputed in one step.

    Prefill first without chunking, 4,096 tokens a step (TGI's, before its admission reserve was
    modelled; here vLLM V0 set so, which reserves nothing), 4,000-token prompts and 3,000-token
    outputs in 9,008 tokens of KV cache: the request preempted at 500 generated tokens needs
    4,500 tokens recomputed and was never scheduled again; the curve came out NaN. It is now an
    InputError that says why. (TGI itself admits a request only with room for its whole output:
    one at a time here, never preempted.)
    """
    w = latency.workload(prompt_tokens=[4_000] * 4, output_tokens=[3_000] * 4)
    v0 = EngineSettings("vllm-v0", policy="prefill_first", chunked_prefill=False,
                        max_num_batched_tokens=4096)  # fmt: skip
    with pytest.raises(InputError, match=r"never finished.*max_num_batched_tokens = 4,096"):
        latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), w, concurrency=[4],
                       requests=40, kv_cache_tokens=9_008, settings=v0)  # fmt: skip
    tgi = latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), w, concurrency=[4],
                         requests=40, kv_cache_tokens=9_008, settings=EngineSettings("tgi"))  # fmt: skip
    assert np.isfinite(tgi.latency).all() and int(tgi.preemptions.item()) == 0
    assert float(tgi.mean_batch.item()) == 1.0  # one request at a time


def test_vllm_v0_defaults_follow_the_models_context_when_max_model_len_is_not_given():
    """vLLM's max_model_len defaults to the model's context, and V0's step budget follows it.

    With no max_model_len given, vLLM V0 was simulated with a budget of 2,048 tokens and no
    chunked prefill on any model: a configuration vLLM refuses to start (max_num_batched_tokens
    under max_model_len), whose 3,000-token prompts were never scheduled (NaN). Llama-2-7B's
    4,096-token context gives a 4,096-token budget, Llama-3.1-8B's 131,072 chunked prefill of 512.
    """
    w = latency.workload(prompt_tokens=[3_000] * 4, output_tokens=[20] * 4)
    v0 = EngineSettings("vllm-v0")
    short = latency.engine(Deployment("Llama-2-7B", "H100-SXM", 1), w, concurrency=[1],
                           requests=8, settings=v0)  # fmt: skip
    assert (short.attrs["max_num_batched_tokens"], short.attrs["chunked_prefill"]) == (4096, 0)
    assert np.isfinite(short.latency.sel(metric="ttft")).all()
    long = latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), w, concurrency=[1],
                          requests=8, settings=v0)  # fmt: skip
    assert (long.attrs["max_num_batched_tokens"], long.attrs["chunked_prefill"]) == (512, 1)
    assert long.attrs["scheduling_policy"] == "mixed"
    assert "max_model_len: the model's context (131,072 tokens)" in long.attrs["engine_settings"]


def test_fp32_weights_are_not_priced_at_bf16_flops():
    """FP32 weights were priced at the GPU's BF16 tensor FLOP/s: the same prefill as BF16.

    Llama-3.1-8B on an H100 with weight_dtype='fp32' gave a 4,096-token TTFT of 123 ms, BF16's,
    where FP32 matrix products run at a fraction of that rate (the catalog has no FP32 figure).
    Both latency models now say they cannot price it.
    """
    w = latency.workload(prompt_tokens=[4096] * 4, output_tokens=[64] * 4)
    with pytest.raises(InputError, match=r"weight_dtype = 'fp32'.*H100-SXM"):
        latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1, weight_dtype="fp32"), w,
                       concurrency=[1], requests=8)  # fmt: skip
    with pytest.raises(InputError, match=r"weight_dtype = 'fp32'"):
        latency.analytic("Llama-3.1-8B", "H100-SXM", 1, workload=w, concurrency=[1],
                         weight_dtype="fp32")  # fmt: skip


def test_windowed_attention_work_matches_position_by_position():
    from benchmarks.reference.engine import attention_python

    rng = np.random.default_rng(7)
    model = cal.model_vector(load_model("gpt-oss-120b"), 1)
    assert (model[7], model[8]) == (0.5, 128.0)  # 18 of 36 layers in a window of 128 tokens
    for start, new in zip(rng.integers(0, 600, 300), rng.integers(1, 300, 300), strict=True):
        got = latency_kernels.attention_work(float(start), float(new), model)
        want = attention_python(float(start), float(new), model)
        assert got == pytest.approx(want, rel=1e-12)
    # a decode token at 10,000 tokens: full layers read 10,001 keys, windowed ones 128
    assert latency_kernels.attention_work(10000.0, 1.0, model) == (
        0.5 * 10001 + 0.5 * 128,
        0.5 * 10001 + 0.5 * 128,
    )


def test_a_windowed_model_simulates_as_the_python_simulator():
    spec = load_model("gpt-oss-120b")
    model = _engine_model_vector(spec, 1)
    gpu = cal.gpu_vector(load_gpus(["H200"]), "H200", spec.weight_dtype)
    calibration = latency.engine_calibration("H200").engine_array()
    rng = np.random.default_rng(2)
    n = 40
    prompt, output = rng.integers(1, 2000, n), rng.integers(1, 300, n)
    gaps, cached = rng.exponential(0.2, n), np.zeros(n, np.int64)
    settings = np.array([0.0, 5.0, 16, 1024, 4000, 16, 0, 0, 1, 1, 0, 0])
    ttft, e2e = np.empty(n), np.empty(n)
    itl = np.empty(int(np.maximum(output - 1, 0).sum()))
    stats, features = np.empty(len(kernels.STATS)), np.empty((3, len(kernels.FEATURES)))
    kernels.simulate(prompt, output, gaps, cached, settings, model, gpu, 1, calibration,
                     ttft, e2e, itl, stats, features)  # fmt: skip
    ref = simulate_python(
        prompt, output, gaps, cached, closed=False, load=5.0, max_num_seqs=16,
        max_num_batched_tokens=1024, kv_blocks=4000, block_size=16, warmup=0, model=model,
        gpu=gpu, tensor_parallel=1, calibration=calibration, policy="mixed",
        chunked_prefill=True, kv_layout=(1, 0, 0),
    )  # fmt: skip
    assert ttft == pytest.approx(np.array(ref["ttft"]), rel=1e-9)
    assert e2e == pytest.approx(np.array(ref["e2e"]), rel=1e-9)
    assert stats[kernels.STATS.index("steps")] == ref["steps"]


def test_a_running_limit_past_the_requests_in_flight_allocates_only_what_can_run():
    """The kernel sized its running-sequence arrays by ``max_num_seqs`` itself: 2**31 - 1 (or
    TGI's 0 on a cache of 2**40 tokens: 2**36 sequences) asked for three arrays of 16 GiB and the
    process was killed at 4 requests in flight. No more sequences run than requests are in the
    engine, so the limit past them gives the curve the limit of the requests themselves."""
    small = _engine(concurrency=[2, 4], max_num_seqs=4, requests=40)
    huge = _engine(concurrency=[2, 4], max_num_seqs=2**31 - 1, requests=40)
    assert np.array_equal(huge.latency.values, small.latency.values)
    tgi = _engine(concurrency=[2], engine="tgi", kv_cache_tokens=2**40, requests=40)
    assert np.isfinite(tgi.latency.values).all()


def test_requests_sent_together_queue_in_the_front_end_one_at_a_time():
    # 40 requests at time 0 through a front end of 50 ms each: the k-th is admitted no earlier
    # than k x 50 ms after it was sent, and a front end of 0 s is the eight-value calibration's
    # run, bit for bit
    n = 40
    prompt, output = np.full(n, 100), np.full(n, 20)
    model, gpu, calibration = _vectors(1)
    settings = np.array([0.0, 1.0, 256, 8192, 4000, 16, 0, 0, 1, 1, 0, 0])

    def run(vec):
        ttft, e2e = np.empty(n), np.empty(n)
        itl = np.empty(n * 19)
        stats, features = np.empty(len(kernels.STATS)), np.empty((3, len(kernels.FEATURES)))
        kernels.simulate(prompt, output, np.zeros(n), np.zeros(n, np.int64), settings, model, gpu,
                         1, vec, ttft, e2e, itl, stats, features)  # fmt: skip
        return ttft

    base = run(calibration[:8])
    assert np.array_equal(run(np.append(calibration[:8], 0.0)), base)
    queued = run(np.append(calibration[:8], 0.05))
    served = 0.05 * np.arange(1, n + 1)  # when the front end has served each
    assert np.all(queued > served)  # none is admitted before it
    assert np.all(queued - served < base.max())  # nor waits longer than the batch's own time after
    assert queued[-1] > 4 * base[-1]  # the last waits for all 40 (2 s against 0.4 s of GPU time)
    assert np.all(np.diff(queued) > 0.0)  # first come first served


@pytest.mark.parametrize(
    "kind", ["spread", "ties", "sorted", "reversed", "sample misleads", "small", "few"]
)
def test_latency_quantiles_are_numpys_inverse_cdf_whatever_the_order_and_ties(kind):
    # the kernel brackets each rank with a strided sample over many values (a curve point's
    # 400,000 gaps) and falls back to selecting over all where the bracket misses: the same
    # values as numpy's inverted_cdf either way
    rng = np.random.default_rng(3)
    n = 5 if kind == "few" else 1000 if kind == "small" else 200_003
    values = rng.gamma(2.0, 0.01, n)
    if kind == "ties":  # most gaps equal (one sequence decoding alone)
        values = np.where(rng.random(n) < 0.9, 0.0071, values)
    elif kind == "sorted":
        values.sort()
    elif kind == "reversed":
        values = np.sort(values)[::-1].copy()
    elif kind == "sample misleads":  # every value the strided sample sees is the smallest
        stride = n // kernels._SAMPLE
        values[::stride] = 0.0
    quantiles = np.array([0.5, 0.9, 0.95, 0.99])
    out = np.empty(4)
    kernels._quantiles(values.copy(), n, quantiles, out)
    assert out.tolist() == np.quantile(values, quantiles, method="inverted_cdf").tolist()


def test_an_option_that_cannot_run_keeps_its_whole_binding():
    # an option the engine sweep skips took the binding of the first option it ran, a 21-character
    # string column ("infeasible_memory" and "latency" fit it): the sweep and plan.nc read
    # "invalid_tensor_parall" for Llama-3.1-8B at TP 3 (32 heads), which no reader matched
    short = latency.workload(prompt_tokens=[300] * 8, output_tokens=[100] * 8)
    swept = capnb.capacity.sweep_engine("Llama-3.1-8B", ["H100-SXM"], [1, 3], short,
                                        SLA(e2e_s=30.0), 10.0, requests=100)  # fmt: skip
    assert swept.binding.sel(tensor_parallel=3).item() == "invalid_tensor_parallel"
    assert swept.binding.sel(tensor_parallel=1).item() == "measured_range"  # (the curve's top)


def _batch(reserve, kv_blocks=160, n=60):
    """A batch of ``n`` requests at time 0 (200-token prompts, 150-token outputs), prefill first."""
    model, gpu, calibration = _vectors(1)
    prompt, output = np.full(n, 200), np.full(n, 150)
    settings = np.array([0.0, 1.0, 64, 2048, kv_blocks, 16, 0, 1, 1, 1, 0, 0, *reserve])
    ttft, e2e = np.empty(n), np.empty(n)
    itl = np.empty(int((output - 1).sum()))
    stats, features = np.empty(len(kernels.STATS)), np.empty((3, len(kernels.FEATURES)))
    kernels.simulate(prompt, output, np.zeros(n), np.zeros(n, np.int64), settings, model, gpu, 1,
                     calibration, ttft, e2e, itl, stats, features)  # fmt: skip
    return ttft, stats


def test_an_admission_reserve_holds_requests_back_instead_of_preempting_them():
    # 60 requests of 350 tokens (22 blocks each) and 160 blocks: without a reserve the engine
    # admits every prompt it can hold (12 of 13 blocks each), then runs out as they decode and
    # preempts; a guaranteed reserve (TensorRT-LLM, TGI) admits 7 (7 x 22 = 154 blocks) and never
    # preempts; SGLang's 0.7 admits more than 7 and fewer than the unreserved engine
    none, none_stats = _batch(kernels.NO_RESERVE)
    held, held_stats = _batch((1.0, 1.0, 0.0, 1e9))
    sglang, sglang_stats = _batch((0.7, 0.098, 0.7 * 0.86 / 600, 4096.0))
    preemptions = kernels.STATS.index("preemptions")
    assert held_stats[preemptions] == 0 < sglang_stats[preemptions] < none_stats[preemptions]
    # the first wave: the requests whose first token came with the first decode's
    wave = [int(np.sum(t < t.min() + 0.5)) for t in (held, sglang, none)]
    assert wave[0] == 7 and wave[0] < wave[1] < wave[2] == 12
    # with room for every request's whole remainder, a reserve changes nothing
    roomy = [
        _batch(r, kv_blocks=60 * 22 + 1)[0] for r in (kernels.NO_RESERVE, (1.0, 1.0, 0.0, 1e9))
    ]
    np.testing.assert_array_equal(*roomy)


def _long_prompts(keep: bool):
    """Six 3,000-token prompts at time 0 on a cache of 4,500 tokens, vLLM V1's mixed steps."""
    model, gpu, calibration = _vectors(1)
    n = 6
    prompt, output = np.full(n, 3000), np.full(n, 50)
    settings = np.array([0.0, 1.0, 64, 512, 4500 // 16, 16, 0, 0, 1, 1, 0, 0,
                         *kernels.NO_RESERVE, float(keep)])  # fmt: skip
    ttft, e2e = np.empty(n), np.empty(n)
    itl = np.empty(int((output - 1).sum()))
    stats, features = np.empty(len(kernels.STATS)), np.empty((3, len(kernels.FEATURES)))
    kernels.simulate(prompt, output, np.zeros(n), np.zeros(n, np.int64), settings, model, gpu, 1,
                     calibration, ttft, e2e, itl, stats, features)  # fmt: skip
    return e2e, itl, stats


def test_kept_blocks_spare_a_preempted_prompt_its_recompute():
    # one prompt decodes while the next starts in the 1,500 tokens left; its decode then needs a
    # block and preempts the newcomer. Recomputing (vLLM V0, LMDeploy), the newcomer's chunks are
    # computed again at every readmission; with its blocks kept cached (vLLM V1's prefix
    # caching), it finds them when readmitted, cannot add its next chunk, and waits: the decodes
    # run alone, as GPUStack's vLLM 0.11 runs of 32,000-token prompts show (mean TPOT 68 ms on an
    # A100, where recomputing predicted 480 ms)
    lost_e2e, lost_itl, lost = _long_prompts(False)
    kept_e2e, kept_itl, kept = _long_prompts(True)
    steps = kernels.STATS.index("steps")
    preemptions = kernels.STATS.index("preemptions")
    assert 0 < kept[preemptions] < lost[preemptions] and kept[steps] < lost[steps]
    assert np.median(kept_itl) < np.median(lost_itl)
    assert kept_e2e.max() < lost_e2e.max()
    assert capnb.EngineSettings("vllm-v1").keeps_preempted
    assert not any(capnb.EngineSettings(e).keeps_preempted
                   for e in ("vllm-v0", "sglang", "tgi", "trtllm", "lmdeploy"))  # fmt: skip


def test_an_offline_run_drops_only_the_request_and_front_end_overheads():
    # an offline run (a static batch timed in the engine's process) pays no per-request or
    # front-end time; the routed experts' arithmetic share after them still prices its steps (the
    # front end's zeroing once reached every later field: a share of 0, and an infinite step)
    import dataclasses

    from capnb.data import load_measurements
    from capnb.latency import _fit

    pts, _ = _fit.points(load_measurements())
    dense = next(p for p in pts if p.source == "trtllm-static-batch" and p.input_tokens == 2048
                 and p.model == "Llama-2-7B" and p.gpu == "H100-SXM")  # fmt: skip
    config = list(dense.config)
    config[2], config[6] = "gpt-oss-120b", "bf16"  # the same static batch of a mixture of experts
    pt = dataclasses.replace(dense, config=tuple(config), run=_fit.run_of(dense))
    assert _fit.offline(_fit.run_of(pt)) and _fit.routes_experts(pt)
    calibration = latency.engine_calibration("H100-SXM").engine_array()
    at = {}
    for share in (1.0, 0.5):
        c = calibration.copy()
        c[9] = share
        at[share], _ = _fit.simulate_point(pt, c, requests=200)
    for key, value in at[1.0].items():
        assert math.isfinite(value) and 0.0 < value < at[0.5][key]

"""The prefill:decode fleet kernel: against the plain reference, closed-form facts, and its limits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.reference.pd import simulate_fleet_python
from capnb.data import load_gpus, load_model
from capnb.kernels import pd as kernels
from capnb.kernels.engine import step_time
from capnb.latency import _engine, _fitted
from capnb.latency import calibration as _calibration


@pytest.fixture(scope="module")
def vectors():
    spec = load_model("Llama-3.1-8B")
    gpu = _calibration.gpu_vector(load_gpus(["H100-SXM"]), "H100-SXM", spec.weight_dtype)
    cal = _fitted.engine_calibration("H100-SXM", "sglang").engine_array()
    return _engine.model_vector(spec, 1), _engine.model_vector(spec, 2), gpu, cal


def _step(vectors, pool, tokens, pairs, kv_read, seqs):
    model_p, model_d, gpu, cal = vectors
    model, tp = (model_p, 1) if pool == "prefill" else (model_d, 2)
    return step_time(float(tokens), float(pairs), float(kv_read), float(seqs), model, gpu, tp, cal,
                     np.zeros(7))  # fmt: skip


def _run(vectors, prompt, output, transfer, route_p, route_d, gaps, *, closed, load, pools,
         budget=8192, max_seqs=64, kv_blocks=100_000, sglang=False, slots=None,
         reserved=512, handoff_s=0.0, delay_s=0.0):  # fmt: skip
    model_p, model_d, gpu, cal = vectors
    slots = max_seqs if slots is None else slots
    setting = np.array([1.0 if closed else 0.0, load, *pools, budget, max_seqs, kv_blocks, 16.0,
                        slots, reserved if sglang else 0, 1.0 if sglang else 0.0,
                        handoff_s, delay_s])  # fmt: skip
    times = np.empty((len(prompt), len(kernels.TIMES)))
    stats = np.zeros(len(kernels.STATS))
    kernels.simulate_fleet(
        np.asarray(prompt, np.int64), np.asarray(output, np.int64), np.asarray(transfer, float),
        np.asarray(route_p, np.int64), np.asarray(route_d, np.int64), np.asarray(gaps, float),
        setting, model_p, model_d, gpu, 1, 2, cal, times, stats,
    )  # fmt: skip
    return times, stats


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 30),
    pools=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    closed=st.booleans(),
    load=st.integers(1, 12),
    budget=st.sampled_from([256, 1024, 8192]),
    max_seqs=st.integers(1, 8),
    kv_blocks=st.integers(140, 400),
    seed=st.integers(0, 10_000),
    sglang=st.booleans(),
    extra_slots=st.integers(0, 8),
    reserved=st.sampled_from([0, 64, 512]),
    handoff_s=st.sampled_from([0.0, 0.004, 0.05]),
    delay_s=st.sampled_from([0.0, 0.03]),
)
def test_kernel_matches_the_plain_reference(vectors, n, pools, closed, load, budget, max_seqs,
                                            kv_blocks, seed, sglang, extra_slots,
                                            reserved, handoff_s, delay_s):  # fmt: skip
    rng = np.random.default_rng(seed)
    prompt = rng.integers(1, 1500, n)
    output = rng.integers(1, 700, n)  # a request fits in 140 blocks of 16: preemptions happen
    transfer = rng.uniform(0.0, 0.05, n)
    route_p, route_d = rng.integers(0, pools[0], n), rng.integers(0, pools[1], n)
    gaps = rng.exponential(1.0, n)
    rate = float(load)  # requests/s in the open loop
    times, _ = _run(vectors, prompt, output, transfer, route_p, route_d, gaps, closed=closed,
                    load=rate, pools=pools, budget=budget, max_seqs=max_seqs,
                    kv_blocks=kv_blocks, sglang=sglang, slots=max_seqs + extra_slots,
                    reserved=reserved, handoff_s=handoff_s, delay_s=delay_s)  # fmt: skip
    arrivals, at = [], 0.0
    for g in gaps:  # the kernel's running sum
        at = at + g / rate
        arrivals.append(at)
    arrivals[0] = gaps[0] / rate
    ref = simulate_fleet_python(
        prompt.tolist(), output.tolist(), transfer.tolist(), route_p.tolist(), route_d.tolist(),
        arrivals, closed=closed, load=rate, prefill_instances=pools[0],
        decode_instances=pools[1], budget=budget, max_seqs=max_seqs, kv_blocks=kv_blocks,
        block=16, step=lambda *a: _step(vectors, *a), sglang=sglang,
        slots=max_seqs + extra_slots, reserved=reserved, handoff_s=handoff_s,
        handoff_delay_s=delay_s,
    )  # fmt: skip
    expected = np.array([[r[c] for c in kernels.TIMES] for r in ref])
    np.testing.assert_allclose(times, expected, rtol=1e-9, atol=1e-12)


def test_one_request_adds_up_to_prefill_transfer_and_decode_steps(vectors):
    prompt, output, transfer = 1000, 5, 0.0123
    prefill = _step(vectors, "prefill", prompt, prompt * (prompt + 1) / 2, prompt, 1)
    decode = [_step(vectors, "decode", 1, prompt + g + 1, prompt + g + 1, 1) for g in range(output)]
    for sglang in (False, True):
        times, _ = _run(vectors, [prompt], [output], [transfer], [0], [0], [1.0], closed=True,
                        load=1, pools=(1, 1), sglang=sglang)  # fmt: skip
        arrival, pre, start, end, landed, handed, first, done = times[0]
        assert arrival == pre == start == 0.0  # an idle decode instance pre-allocates at once
        assert end == pytest.approx(prefill)
        assert landed == pytest.approx(prefill + transfer)
        assert handed == landed  # no hand-off work, no latency
        if sglang:  # the prefill's token is streamed when the idle decode instance finds the KV
            assert first == landed
            assert done == pytest.approx(prefill + transfer + sum(decode[: output - 1]))
        else:  # TTFT = prefill + transfer + one decode step
            assert first == pytest.approx(prefill + transfer + decode[0])
            assert done == pytest.approx(prefill + transfer + sum(decode))


def test_sglang_prefill_waits_for_the_busy_decode_instances_loop_pass(vectors):
    # request 0 decodes alone; request 1 arrives mid-step and is pre-allocated (so prefilled) only
    # when that step ends, and its first token comes at the pass after its KV lands
    prompt, output = [200, 300], [400, 3]
    times, _ = _run(vectors, prompt, output, [0.001, 0.001], [0, 0], [0, 0], [0.01, 0.205],
                    closed=False, load=1.0, pools=(1, 1), sglang=True)  # fmt: skip
    first0 = times[0, 6]
    steps = np.array([_step(vectors, "decode", 1, 200 + g + 1, 200 + g + 1, 1) for g in range(399)])
    ends = first0 + np.cumsum(steps)
    arrival = times[1, 0]
    assert first0 < arrival < times[1, 1]
    # the first pass after the arrival is the end of the step running then
    assert times[1, 1] == pytest.approx(ends[np.searchsorted(ends, arrival)])
    assert times[1, 2] == times[1, 1]  # the idle prefill instance starts it at once
    assert times[1, 6] > times[1, 5]  # the KV landed during a step of request 0: wait for its end


def test_sglang_reserved_tokens_and_slots_gate_preallocation(vectors):
    # 50 blocks of 16 (800 tokens) hold two prompts of 100 tokens but not 512 reserved tokens for
    # each: the second waits for the first to finish, unless nothing is reserved
    def run(**kw):
        return _run(
            vectors,
            [100, 100],
            [10, 10],
            [0.0, 0.0],
            [0, 0],
            [0, 0],
            np.ones(2),
            closed=True,
            load=2,
            pools=(1, 1),
            kv_blocks=50,
            sglang=True,
            **kw,
        )[0]

    gated = run(reserved=512)
    assert gated[0, 1] == 0.0 and gated[1, 1] == pytest.approx(gated[0, 7])
    free = run(reserved=0)
    assert free[1, 1] == 0.0 and free[1, 7] < gated[1, 7]
    one_slot = run(reserved=0, slots=1)  # a request slot: the same gate
    assert one_slot[1, 1] == pytest.approx(one_slot[0, 7])


def test_the_decode_hand_off_work_queues_one_request_at_a_time(vectors):
    # eight prompts land together at one decode instance: each waits for the hand-off work of those
    # ahead of it, so their KV is ready handoff_s apart (and one request alone pays it once)
    n, handoff = 8, 0.03
    for sglang in (False, True):
        times, _ = _run(vectors, [64] * n, [4] * n, [0.0] * n, [0] * n, [0] * n, np.ones(n),
                        closed=True, load=n, pools=(1, 1), sglang=sglang,
                        handoff_s=handoff)  # fmt: skip
        ready = np.sort(times[:, 5])
        assert ready[0] == pytest.approx(times[0, 3] + handoff)
        np.testing.assert_array_equal(times[:, 4], times[:, 3])  # the KV itself landed at once
        np.testing.assert_allclose(np.diff(ready), handoff, rtol=1e-9)
        # a fixed latency shifts every one by itself and queues nothing
        later, _ = _run(vectors, [64] * n, [4] * n, [0.0] * n, [0] * n, [0] * n, np.ones(n),
                        closed=True, load=n, pools=(1, 1), sglang=sglang, handoff_s=handoff,
                        delay_s=0.2)  # fmt: skip
        np.testing.assert_allclose(np.sort(later[:, 5]), ready + 0.2, rtol=1e-9)


def test_throughput_never_above_either_pools_saturation(vectors):
    n, prompt, output = 400, 2000, 200
    budget, max_seqs = 8192, 32
    # requests/s an instance: a full step's prompts, or a full batch's tokens over the outputs
    ceiling_p = budget / prompt / _step(vectors, "prefill", budget, 0, 0, 1)
    ceiling_d = max_seqs / _step(vectors, "decode", max_seqs, 0, 0, max_seqs) / output
    rng = np.random.default_rng(1)
    for pools in [(1, 1), (1, 3), (3, 1), (2, 2)]:
        for load in (4, 64, 400):
            times, _ = _run(vectors, [prompt] * n, [output] * n, [0.001] * n,
                            rng.integers(0, pools[0], n), rng.integers(0, pools[1], n),
                            np.ones(n), closed=True, load=load, pools=pools, budget=budget,
                            max_seqs=max_seqs)  # fmt: skip
            rate = n / times[:, 7].max()
            assert rate <= min(pools[0] * ceiling_p, pools[1] * ceiling_d) * (1 + 1e-9)


def test_stages_are_ordered_and_every_queue_counts(vectors):
    n = 60
    rng = np.random.default_rng(2)
    times, stats = _run(vectors, rng.integers(100, 3000, n), rng.integers(1, 400, n),
                        np.full(n, 0.02), np.zeros(n), rng.integers(0, 2, n), np.ones(n),
                        closed=True, load=60, pools=(1, 2), max_seqs=4)  # fmt: skip
    assert (np.diff(times, axis=1) >= -1e-12).all()
    assert np.isfinite(times).all()
    # the single prefill instance queues the burst, the link sends one KV at a time, and four
    # sequences a decode instance make the rest wait for admission (more than one decode step)
    assert (times[:, 2] > times[:, 1]).sum() > n / 2
    sent = np.sort(times[:, 4])
    assert (np.diff(sent) >= 0.02 - 1e-9).all()
    assert (times[:, 6] - times[:, 5] > 0.1).sum() > n / 2
    assert stats[kernels.STATS.index("decode_steps")] > 0


def test_the_decode_pool_admits_only_what_its_kv_blocks_hold(vectors):
    # 70 blocks of 16 hold one request of 1,000 + 100 tokens at a time: decodes never overlap; on
    # SGLang the next prefill waits for the decode instance's blocks too
    n = 6
    for sglang in (False, True):
        times, stats = _run(vectors, [1000] * n, [100] * n, [0.0] * n, [0] * n, [0] * n,
                            np.ones(n), closed=True, load=n, pools=(1, 1), kv_blocks=70,
                            sglang=sglang)  # fmt: skip
        order = np.argsort(times[:, 6])
        assert (times[order[1:], 6] >= times[order[:-1], 7] - 1e-12).all()
        if sglang:
            assert (times[order[1:], 2] >= times[order[:-1], 7] - 1e-12).all()
        assert stats[kernels.STATS.index("preemptions")] == 0


@pytest.mark.parametrize("block", [None, 1, 64])
def test_the_pools_count_kv_in_the_engines_own_blocks(block):
    import dataclasses

    from capnb.capacity._pd_fleet import pool_setup
    from capnb.records import EngineSettings

    spec = load_model("Llama-3.1-8B")
    engine = dataclasses.replace(EngineSettings.defaults("sglang"), block_size=block)
    setup = pool_setup(spec, "H100-SXM", {"prefill": 1, "decode": 2}, engine)
    tokens = _engine.kv_tokens_auto(spec, "H100-SXM", 2)
    size = block or _engine.BLOCK_SIZE
    assert setup["block"] == size and setup["kv_blocks"] == tokens // size


def test_the_decode_sides_hand_off_queue_is_its_own_stage_not_the_transfers(vectors):
    # a burst of 32 prompts whose KV crosses the link in 10 us each, behind 20 ms of decode-side
    # work per request: TTFT's queue is the hand-off's (each waits for the work of those ahead),
    # and the transfer stage holds only the link (the stage named the bottleneck was "transfer")
    from capnb.capacity._pd_fleet import fleet_run, pool_setup
    from capnb.records import EngineSettings

    spec = load_model("Llama-3.1-8B")
    setup = pool_setup(spec, "H100-SXM", {"prefill": 1, "decode": 2}, EngineSettings("sglang"))
    setup |= {"handoff_s": 0.02}
    n = 32
    run = fleet_run(setup, vectors[3], (1, 1), np.full(n, 128, np.int64), np.full(n, 50, np.int64),
                    np.full(n, 1e-5), closed=True, load=n, warmup=0, quantile=0.99,
                    router="round_robin", rng=np.random.default_rng(0))  # fmt: skip
    stages = dict(zip(kernels.STAGES, run["stages"], strict=True))
    assert stages["transfer"] < 1e-3
    # the k-th request of the burst waits k - 1 works and does its own: 20 ms x (n + 1) / 2 on average
    assert stages["handoff"] == pytest.approx(0.02 * (n + 1) / 2, rel=0.05)
    assert run["bottleneck"] == "handoff"


def test_the_pools_resolve_vllm_v0_on_the_models_context_as_the_engine_does():
    # vLLM V0's step budget and chunking follow max_model_len (the model's context when not
    # given): the pools ran 2,048 tokens unchunked for every model where the engine curve ran the
    # context's (chunks of 512 for Llama-3.1-8B's 131,072 tokens)
    from capnb import latency
    from capnb.capacity._pd_fleet import pool_setup
    from capnb.data import load_model
    from capnb.records import Deployment, EngineSettings

    spec, v0 = load_model("Llama-3.1-8B"), EngineSettings("vllm-v0")
    pools = pool_setup(spec, "H100-SXM", {"prefill": 1, "decode": 1}, v0)
    w = latency.workload(prompt_tokens=[512] * 4, output_tokens=[64] * 4)
    curve = latency.engine(Deployment("Llama-3.1-8B", "H100-SXM", 1), w, concurrency=[1],
                           requests=20, settings=v0)  # fmt: skip
    assert pools["budget"] == curve.attrs["max_num_batched_tokens"] == 512


@pytest.mark.parametrize("sglang", [False, True])
def test_a_windowed_model_matches_the_plain_reference(sglang):
    # gpt-oss-120b: 18 of its 36 layers attend within 128 tokens, in the kernel's prefill and
    # decode steps (kernels.latency.attention_work); the reference must count the same work
    spec = load_model("gpt-oss-120b")
    gpu = _calibration.gpu_vector(load_gpus(["H200"]), "H200", spec.weight_dtype)
    cal = _fitted.engine_calibration("H200", "sglang").engine_array()
    vectors = (_engine.model_vector(spec, 1), _engine.model_vector(spec, 2), gpu, cal)
    rng = np.random.default_rng(3)
    n = 20
    prompt, output = rng.integers(1, 1500, n), rng.integers(1, 300, n)
    transfer, gaps = rng.uniform(0.0, 0.05, n), rng.exponential(1.0, n)
    route_p, route_d = rng.integers(0, 2, n), rng.integers(0, 2, n)
    times, _ = _run(vectors, prompt, output, transfer, route_p, route_d, gaps, closed=True,
                    load=6, pools=(2, 2), budget=1024, max_seqs=8, kv_blocks=400,
                    sglang=sglang)  # fmt: skip
    ref = simulate_fleet_python(
        prompt.tolist(), output.tolist(), transfer.tolist(), route_p.tolist(), route_d.tolist(),
        [0.0] * n, closed=True, load=6, prefill_instances=2, decode_instances=2, budget=1024,
        max_seqs=8, kv_blocks=400, block=16, step=lambda *a: _step(vectors, *a), sglang=sglang,
        model=vectors[0],
    )  # fmt: skip
    expected = np.array([[r[c] for c in kernels.TIMES] for r in ref])
    np.testing.assert_allclose(times, expected, rtol=1e-9, atol=1e-12)

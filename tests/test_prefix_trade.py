"""capacity.prefix_trade: the KV budget split between a prefix cache and running sequences, priced."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import capnb
from capnb.errors import InputError
from capnb.records import SLA, Deployment, EngineSettings

MODEL, GPU = "Llama-3.1-8B", "H100-SXM"
H100 = Deployment(MODEL, GPU)

# the bundled Mooncake log has requests sharing a timestamp: said once as a TraceWarning, kept
pytestmark = pytest.mark.filterwarnings("ignore::capnb.data.TraceWarning")


@pytest.fixture(scope="module")
def shared_prefix_log(tmp_path_factory):
    """A Mooncake-format log in which every request repeats a 20-block (10,240-token) prefix."""
    rng = np.random.default_rng(5)
    path = tmp_path_factory.mktemp("log") / "shared.jsonl"
    rows, fresh = [], 1000
    for i in range(300):
        own = list(range(fresh, fresh + 2))
        fresh += 2
        output = int(rng.integers(50, 150))
        rows.append({"timestamp": i * 500, "input_length": 22 * 512, "output_length": output,
                     "hash_ids": list(range(20)) + own})  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def test_a_repeated_prefix_pays_for_its_cache(shared_prefix_log):
    trade = capnb.capacity.prefix_trade(
        H100, shared_prefix_log, sla=SLA(ttft_s=3.0), cache_share=[0.0, 0.1, 0.3], target_qps=20.0,
        requests=300,
    )  # fmt: skip
    hit = trade.prefix_hit_rate.values
    assert hit[0] == 0.0 and hit[1] > 0.85  # 20 of 22 blocks, once the prefix is cached
    assert (np.diff(trade.running_tokens.values) < 0).all()
    # less prefill: the floor of P99 TTFT falls, and an instance serves more under the SLA
    assert trade.latency_floor.values[1] < 0.5 * trade.latency_floor.values[0]
    assert trade.per_instance_qps.values[1] > trade.per_instance_qps.values[0]
    assert trade.attrs["best_cache_share"] in (0.1, 0.3)
    assert (trade.instances.values[1:] <= trade.instances.values[0]).all()
    assert trade.attrs["reason"].startswith("a cache of")


def test_a_log_hashed_in_other_blocks_than_mooncakes_is_priced(tmp_path):
    # a log hashed in 64-token blocks: "log.jsonl, line 1: 2 block hashes for 71 prompt tokens;
    # 512-token blocks need 1 (is block_tokens right?)" from a function that took no block_tokens
    path = tmp_path / "log.jsonl"
    rows = [{"timestamp": i, "input_length": 10 * 64, "output_length": 40,
             "hash_ids": [*range(8), 100 + 2 * i, 101 + 2 * i]} for i in range(200)]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    trade = capnb.capacity.prefix_trade(H100, str(path), block_tokens=64, sla=SLA(ttft_s=3.0),
                                        cache_share=[0.0, 0.1], requests=200)  # fmt: skip
    blocks = capnb.data.load_block_hashes(str(path), block_tokens=64)
    hits = capnb.memory.split_kv(blocks, kv_cache_tokens=trade.attrs["kv_cache_tokens"],
                                 seq_len=trade.attrs["seq_len"], cache_share=[0.0, 0.1])  # fmt: skip
    assert trade.prefix_hit_rate.values.tolist() == hits.prefix_hit_rate.values.tolist()
    assert trade.prefix_hit_rate.values[1] > 0.75  # 8 of 10 blocks, once cached
    with pytest.raises(InputError, match="block_tokens must be >= 1"):
        capnb.capacity.prefix_trade(H100, str(path), block_tokens=0, sla=SLA(ttft_s=3.0))


def test_no_cache_that_misses_the_sla_is_said_so_with_units(shared_prefix_log):
    # the reason ended "no cache: 0.000" where no cache meets P99 TTFT <= 0.2 s (its floor is
    # 0.32 s): a bare number, read as requests/s of nothing; a feasible one had no unit either
    trade = capnb.capacity.prefix_trade(H100, shared_prefix_log, sla=SLA(ttft_s=0.2),
                                        cache_share=[0.0, 0.1], requests=300)  # fmt: skip
    assert trade.per_instance_qps.values[0] == 0 and trade.per_instance_qps.values[1] > 0
    floor = float(trade.latency_floor.values[0])
    assert trade.attrs["reason"].endswith(
        f"; no cache: infeasible (at one request in flight {floor:.3g} s, above the SLA)"
    )
    loose = capnb.capacity.prefix_trade(H100, shared_prefix_log, sla=SLA(ttft_s=3.0),
                                        cache_share=[0.0, 0.1], requests=300)  # fmt: skip
    none = float(loose.per_instance_qps.values[0])
    assert loose.attrs["reason"].endswith(f"; no cache: {none:.3f} requests/s per instance")


def test_each_share_is_the_memory_split_then_the_engine_then_the_sla():
    """The composition, by hand: split_kv, then engine at that hit rate and budget, then the SLA."""
    trade = capnb.capacity.prefix_trade(H100, sla=SLA(ttft_s=10.0), cache_share=[0.2], requests=200)
    log = capnb.data.load_trace("mooncake-synthetic")
    work = capnb.latency.workload(log)
    seq_len = math.ceil(float((work.prompt_tokens + work.output_tokens).mean()))
    assert trade.attrs["seq_len"] == seq_len
    split = capnb.memory.split_kv(
        capnb.data.load_block_hashes("mooncake-synthetic"),
        kv_cache_tokens=trade.attrs["kv_cache_tokens"], seq_len=seq_len, cache_share=[0.2],
    )  # fmt: skip
    fits = int(split.max_concurrency.item())
    # the engine-curve rule of every engine search (capacity.sweep_engine's too): 10 geometric
    # points from 1 to what memory holds (at most 512), all of them allowed to run at once
    top = min(fits, 512)
    grid = np.unique(np.round(np.geomspace(1, top, num=min(top, 10))).astype(np.int64))
    curve = capnb.latency.engine(
        Deployment(MODEL, GPU, 1), work, concurrency=grid.tolist(), requests=200,
        kv_cache_tokens=int(split.running_tokens.item()),
        prefix_hit_rate=float(split.prefix_hit_rate.item()),
        settings=EngineSettings(max_num_seqs=top),
    )  # fmt: skip
    by_hand = capnb.capacity.safe_concurrency(curve, 10.0, metric="ttft", memory_limit=fits)
    assert float(trade.per_instance_qps.item()) > 0
    assert float(trade.per_instance_qps.item()) == float(by_hand.per_instance_qps.item())
    assert int(trade.safe_concurrency.item()) == int(by_hand.safe_concurrency.item())
    assert float(trade.prefix_hit_rate.item()) == float(split.prefix_hit_rate.item())


def test_infeasible_is_said_and_bad_arguments_are_named():
    trade = capnb.capacity.prefix_trade(H100, sla=SLA(ttft_s=0.01), cache_share=[0.0], requests=100)
    assert math.isnan(trade.attrs["best_cache_share"])
    assert trade.attrs["reason"].startswith("infeasible: no cache share meets P99 TTFT <= 10 ms")
    assert trade.per_instance_qps.item() == 0.0 and trade.binding.item() != "latency"
    # an instance whose KV cache cannot hold the log's longest request (Mooncake's reach 191,382
    # tokens; Qwen3-30B-A3B on one H100 keeps about 94,000): infeasible and why, never a crash
    # (worksheet 06 on such a plan was skipped whole by the report: the engine raised)
    short = capnb.capacity.prefix_trade(Deployment("Qwen3-30B-A3B", "H100-SXM"), sla=SLA(tpot_s=0.04),
                                        cache_share=[0.0, 0.2], requests=100)  # fmt: skip
    assert (
        short.binding.values.tolist() == ["memory", "memory"]
        and (short.per_instance_qps == 0).all()
    )
    assert short.attrs["reason"].startswith("infeasible: the KV cache (")
    assert "cannot hold the log's longest request (191,382 tokens" in short.attrs["reason"]
    # in whole 16-token blocks, as vLLM allocates them (the engine's own check, shared)
    from capnb.latency._engine import holds

    assert holds(16, 16) and not holds(17, 31) and holds(17, 32)
    assert holds([16, 17], 16).tolist() == [True, False]
    with pytest.raises(InputError, match="sla: expected a capnb.records.SLA"):
        capnb.capacity.prefix_trade(H100, sla=1.0)
    with pytest.raises(InputError, match="deployment: expected a capnb.records.Deployment"):
        capnb.capacity.prefix_trade(MODEL, sla=SLA(ttft_s=1.0))
    with pytest.raises(InputError, match="target_qps"):
        capnb.capacity.prefix_trade(H100, sla=SLA(ttft_s=1.0), target_qps=-1.0)
    with pytest.raises(InputError, match="cache_share"):
        capnb.capacity.prefix_trade(H100, sla=SLA(ttft_s=1.0), cache_share=[1.5])


def test_sweep_engine_is_plan_on_each_engine_curve_and_names_options_that_cannot_run():
    work = capnb.latency.workload(prompt_tokens=[1500] * 32, output_tokens=[200] * 32)
    swept = capnb.capacity.sweep_engine(
        "Qwen3-32B", ["L40S", "H100-SXM"], [1, 2], work, 2.0, 10.0, metric="ttft", requests=300
    )
    assert swept.per_instance_qps.dims == ("gpu", "tensor_parallel")
    # 64 GB of bf16 weights do not fit one 48 GB L40S: said, never a number, and not a binding
    # that meets the SLA (it was "memory", which the plan counted as meeting it unpriced)
    assert str(swept.binding.sel(gpu="L40S", tensor_parallel=1).item()) == "infeasible_memory"
    assert "infeasible_memory" not in capnb.capacity.FEASIBLE
    assert np.isnan(swept.per_instance_qps.sel(gpu="L40S", tensor_parallel=1))
    # an option that runs is capacity.plan on its own engine curve
    one = swept.sel(gpu="H100-SXM", tensor_parallel=2)
    budget = capnb.memory.max_concurrency(model="Qwen3-32B", gpu="H100-SXM", tensor_parallel=2,
                                          seq_len=1700, accounting="vllm", vllm_version="0.10")  # fmt: skip
    fits = int(budget.max_concurrency.item())  # whole KV blocks, as vLLM allocates them
    top = min(fits, 512)
    grid = np.unique(np.round(np.geomspace(1, top, num=min(top, 10))).astype(np.int64))
    curve = capnb.latency.engine(Deployment("Qwen3-32B", "H100-SXM", 2), work,
                                 concurrency=grid.tolist(), requests=300,
                                 settings=EngineSettings(max_num_seqs=top))  # fmt: skip
    by_hand = capnb.capacity.plan(curve, 2.0, 10.0, metric="ttft", memory_limit=fits)
    assert float(one.per_instance_qps) == float(by_hand.per_instance_qps)
    assert int(one.instances) == int(by_hand.instances)
    # the sequences each option's KV cache was profiled at (the plan's memory step reads them):
    # vllm serve's on each GPU (1,024 on an H100, which the 512 run at once do not pass; 256 on
    # an L40S, whose KV cache holds 36 of these sequences on two), none where nothing runs
    assert swept.profiled_sequences.sel(tensor_parallel=2).values.tolist() == [256, 1024]
    assert np.isnan(swept.profiled_sequences.sel(gpu="L40S", tensor_parallel=1))


def test_sweep_engine_carries_the_glossarys_attrs_as_sweep_does():
    # capacity.sweep's gpu and tensor_parallel carry the glossary's units and long_name; the
    # engine's sweep (the plan's default) rebuilt both from bare values, and its prefix_hit_rate
    # had units but no long_name
    from capnb import glossary

    work = capnb.latency.workload(prompt_tokens=[1500] * 16, output_tokens=[200] * 16)
    swept = capnb.capacity.sweep_engine(MODEL, [GPU], [1], work, 2.0, 10.0, metric="ttft",
                                        requests=100)  # fmt: skip
    for name in ("gpu", "tensor_parallel", "prefix_hit_rate", "per_instance_qps"):
        assert swept[name].attrs == glossary.attrs(name), name


def test_sweep_engine_names_the_running_share_running_tokens_not_vllms_kv_cache_tokens(
    shared_prefix_log,
):
    # with a prefix cache, the engine sweep's kv_cache_tokens held the running sequences' share
    # (capnb.memory.split_kv's running_tokens: 294,650 of H100's 420,928 at a 0.3 share), while
    # kv_cache_tokens is the "GPU KV cache size" vLLM logs in the memory step: a plan carried
    # memory_kv_cache_tokens 420,928 beside capacity_kv_cache_tokens 294,650 for one option;
    # it is running_tokens now, as capacity.prefix_trade names it
    from capnb import glossary

    blocks = capnb.data.load_block_hashes(shared_prefix_log)
    work = capnb.latency.workload(prompt_tokens=[11_264] * 16, output_tokens=[100] * 16)
    swept = capnb.capacity.sweep_engine(MODEL, [GPU], [1], work, 5.0, 10.0, metric="ttft",
                                        requests=100, prefix_cache_share=0.3, blocks=blocks)  # fmt: skip
    assert "kv_cache_tokens" not in swept
    assert swept.running_tokens.attrs == glossary.attrs("running_tokens")
    logged = capnb.memory.max_concurrency(deployment=H100, seq_len=11_364, accounting="vllm",
                                          vllm_version="0.10").kv_cache_tokens.item()  # fmt: skip
    split = capnb.memory.split_kv(blocks, kv_cache_tokens=logged, seq_len=11_364, cache_share=[0.3])
    assert int(swept.running_tokens.item()) == int(split.running_tokens.item()) < logged


def test_an_option_whose_kv_cache_cannot_hold_the_longest_request_is_ruled_out_by_memory():
    """vLLM rejects a request its KV cache cannot hold whole: such an option is infeasible_memory,
    said in the sweep's notes, and the others are planned (the engine sweep raised for the whole
    plan; found with a request log of 20 requests of 120,000 tokens, Llama-3.1-8B on L4 and H100)."""
    prompt = [800] * 31 + [50_000]  # one request longer than an L4's 43,344 tokens of KV cache
    work = capnb.latency.workload(prompt_tokens=prompt, output_tokens=[200] * 32)
    swept = capnb.capacity.sweep_engine(
        "Llama-3.1-8B", ["L4", "H100-SXM"], [1], work, 5.0, 10.0, metric="ttft", requests=200
    )
    l4 = swept.sel(gpu="L4", tensor_parallel=1)
    assert str(l4.binding.item()) == "infeasible_memory" and np.isnan(l4.per_instance_qps)
    assert float(swept.per_instance_qps.sel(gpu="H100-SXM", tensor_parallel=1)) > 0
    assert (
        "1 x L4: 43,344 tokens cannot hold the workload's longest request (50,200"
        in (swept.attrs["notes"])
    )
    with pytest.raises(InputError, match=r"hold the workload's longest request \(50,200 tokens"):
        capnb.capacity.sweep_engine("Llama-3.1-8B", ["L4"], [1], work, 2.0, 10.0, metric="ttft",
                                    requests=200)  # fmt: skip


def test_no_option_holding_the_longest_request_does_not_say_none_holds_a_mean_sequence():
    """Qwen3-8B on one L4 holds 34,896 KV tokens (profiled as vllm serve runs there; 4,112 at the
    1,024 sequences and 8,192 tokens first found with): sequences of the mean length (2,613
    tokens here) fit, the longest request (40,200) does not. The error said "no GPU ... can hold
    one 1426-token sequence ..., nor the workload's longest request" of a cache that holds two
    such sequences (found planning
    Qwen3-8B on L4 alone); it now says what does not fit, and what the cache holds."""
    work = capnb.latency.workload(prompt_tokens=[1200] * 31 + [40_000], output_tokens=[200] * 32)
    with pytest.raises(InputError) as raised:
        capnb.capacity.sweep_engine("Qwen3-8B", ["L4"], [1], work, 2.0, 10.0, metric="ttft",
                                    requests=200)  # fmt: skip
    said = str(raised.value)
    assert "can hold one" not in said, said
    assert "can hold the workload's longest request (40,200 tokens, prompt + output)" in said, said
    assert "1 x L4: 34,896 KV cache tokens" in said and "2,613-token sequence" in said, said


def test_engine_curve_of_is_the_curve_the_engine_sweep_searched():
    work = capnb.latency.workload(prompt_tokens=[1500] * 32, output_tokens=[200] * 32)
    swept = capnb.capacity.sweep_engine(
        "Qwen3-32B", ["H100-SXM"], [2], work, 2.0, 10.0, metric="ttft", requests=300
    ).sel(gpu="H100-SXM", tensor_parallel=2)
    curve = capnb.capacity.engine_curve_of(Deployment("Qwen3-32B", "H100-SXM", 2), work,
                                           requests=300)  # fmt: skip
    fits = curve.attrs["memory_limit"]
    assert int(curve.concurrency[-1]) == min(fits, 512)  # up to what memory holds
    mine = capnb.capacity.plan(curve, 2.0, 10.0, metric="ttft", memory_limit=fits)
    assert float(mine.per_instance_qps) == float(swept.per_instance_qps)
    assert int(mine.safe_concurrency) == int(swept.safe_concurrency)
    with pytest.raises(InputError, match="holds no sequence"):  # 64 GB of weights on 48 GB
        capnb.capacity.engine_curve_of(Deployment("Qwen3-32B", "L40S", 1), work)
    with pytest.raises(InputError, match="deployment: expected a capnb.records.Deployment"):
        capnb.capacity.engine_curve_of(("Qwen3-32B", "H100-SXM", 2), work)


def test_sweep_engine_marks_a_gpu_without_a_link_figure_no_data_and_goes_on():
    # the A10G has no interconnect_bandwidth in the catalog: at TP 2 the engine model cannot price
    # it, and the whole sweep (so the whole plan, "capnb plan --gpus A10G,L4 --tensor-parallel
    # 1,2") ended in "gpu: A10G lacks a figure the model needs"; the analytic sweep says no_data
    work = capnb.latency.workload(prompt_tokens=[1000] * 16, output_tokens=[150] * 16)
    swept = capnb.capacity.sweep_engine(
        "Llama-3.1-8B", ["A10G", "L4"], [1, 2], work, 2.0, 10.0, metric="ttft", requests=200
    )
    assert str(swept.binding.sel(gpu="A10G", tensor_parallel=2).item()) == "no_data"
    assert np.isnan(swept.per_instance_qps.sel(gpu="A10G", tensor_parallel=2))
    assert np.isfinite(swept.per_instance_qps.sel(gpu="L4", tensor_parallel=2))
    assert np.isfinite(swept.per_instance_qps.sel(gpu="A10G", tensor_parallel=1))
    assert "no latency on A10G at tensor parallelism 2" in swept.attrs["unmodelled"]
    with pytest.raises(InputError, match="no latency on A10G at tensor parallelism 2"):
        capnb.capacity.sweep_engine("Llama-3.1-8B", ["A10G"], [2], work, 2.0, 10.0,
                                    metric="ttft", requests=200)  # fmt: skip


def test_a_model_whose_weights_leave_no_kv_cache_is_infeasible_and_says_why(shared_prefix_log):
    # Llama-3.1-70B on one L4: vLLM's budget holds no KV cache; prefix_trade raised
    # "kv_cache_tokens must be a whole number of tokens >= 1, got 0", an argument it was not given
    trade = capnb.capacity.prefix_trade(Deployment("Llama-3.1-70B", "L4"), shared_prefix_log,
                                        sla=SLA(ttft_s=3.0), cache_share=[0.0, 0.2])  # fmt: skip
    assert trade.binding.values.tolist() == ["memory", "memory"]
    assert (trade.per_instance_qps == 0).all() and (trade.running_tokens == 0).all()
    assert math.isnan(trade.attrs["best_cache_share"])
    assert trade.attrs["reason"].startswith(
        "infeasible: Llama-3.1-70B in bf16 on 1 x L4 does not fit"
    )
    assert "Infeasible" not in trade.attrs["reason"]

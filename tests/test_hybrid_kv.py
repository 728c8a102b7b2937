"""vLLM's hybrid KV cache manager (0.10 on) against its own start-up logs.

The figures are vLLM 0.19.0's start-up logs on one or two H100 80GB GPUs (llm-d-incubation/llm-d-planner
@3c876c8a, ``accuracy/results/v0.19.0/results_raw.csv``: kv_cache_memory_gib, kv_cache_blocks,
kv_cache_tokens and max_concurrency at max_model_len 8,192, max_num_batched_tokens 8,192, block 16,
bf16 KV cache). The model layouts are the published configs' (layers, KV heads, head_dim, window).
Nothing here is fitted: the block arithmetic either reproduces the logs or it does not.
"""

import math

import pytest

from capnb import memory
from capnb.data.modelspec import kv_groups, parse

GIB = 2**30

#: Published architecture facts (Hugging Face config.json of each model).
CONFIGS = {
    "gemma-2-9b-it": {"model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584,
                      "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                      "intermediate_size": 14336, "vocab_size": 256000, "sliding_window": 4096,
                      "torch_dtype": "bfloat16"},
    "gemma-3-12b-it": {"model_type": "gemma3_text", "num_hidden_layers": 48, "hidden_size": 3840,
                       "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                       "intermediate_size": 15360, "vocab_size": 262208, "sliding_window": 1024,
                       "sliding_window_pattern": 6, "torch_dtype": "bfloat16"},
    "gemma-3-27b-it": {"model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376,
                       "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                       "intermediate_size": 21504, "vocab_size": 262208, "sliding_window": 1024,
                       "sliding_window_pattern": 6, "torch_dtype": "bfloat16"},
    "gpt-oss-20b": {"model_type": "gpt_oss", "num_hidden_layers": 24, "hidden_size": 2880,
                    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                    "intermediate_size": 2880, "vocab_size": 201088, "sliding_window": 128,
                    "num_local_experts": 32, "num_experts_per_tok": 4,
                    "layer_types": ["sliding_attention", "full_attention"] * 12,
                    "torch_dtype": "bfloat16"},
}  # fmt: skip
#: (model, tensor_parallel): logged KV cache GiB, blocks, tokens and maximum concurrency at 8,192.
LOGS = {
    ("gemma-2-9b-it", 1): (54.12, 21110, 168880, 20.60),
    ("gemma-3-12b-it", 1): (47.72, 48867, 130304, 15.88),
    ("gemma-3-27b-it", 1): (19.53, 15997, 36560, 4.46),
    ("gpt-oss-20b", 2): (59.32, 323972, 2591776, 316.07),
}
LEN, BUDGET, BLOCK = 8192, 8192, 16


def _spec(name):
    return parse(CONFIGS[name], name=name)


@pytest.mark.parametrize(("name", "tp"), list(LOGS))
def test_the_pools_blocks_tokens_and_logged_concurrency_are_vllms(name, tp):
    gib, blocks, tokens, concurrency = LOGS[(name, tp)]
    spec = _spec(name)
    groups = spec.kv_groups(BLOCK)
    per_layer_block = BLOCK * spec.kv_bytes_per_token("auto", tp) / spec.layers
    # num_blocks = available // page_size // group_size (the GiB is logged to two decimals)
    pool = gib * GIB / (per_layer_block * groups.size)
    assert pool == pytest.approx(blocks, abs=0.006 * GIB / (per_layer_block * groups.size))
    # "GPU KV cache size": the pool's blocks divided among the groups
    assert blocks // (groups.full + groups.windowed) * BLOCK == tokens
    # "Maximum concurrency": a chunk of the step's budget in every windowed group of every request
    chunk = math.ceil(min(CONFIGS[name]["sliding_window"] - 1 + BUDGET, LEN) / BLOCK) + 1
    worst = groups.full * math.ceil(LEN / BLOCK) + groups.windowed * chunk
    assert round(blocks / worst, 2) == concurrency


def test_the_grouping_is_vllms_on_the_logged_layouts():
    assert kv_groups(42, 4096, 21) == (21, 1, 1, 257)  # Gemma 2: alternating layers
    assert _spec("gemma-3-27b-it").kv_groups() == (10, 1, 6, 65)  # 10 full, 52 windowed (padded)
    assert _spec("gemma-3-12b-it").kv_groups() == (8, 1, 5, 65)
    assert _spec("gpt-oss-20b").kv_groups() == (12, 1, 1, 9)


def test_capnb_holds_decoding_windows_and_one_prefill_chunk():
    """The memory step's sequences: the pool less one step's chunk, over a sequence's blocks."""
    spec = _spec("gemma-3-27b-it")
    acct = memory.accounting("vllm", vllm_version="0.19")
    groups = acct.groups(spec)
    _, blocks, _, logged = LOGS[("gemma-3-27b-it", 1)]
    per_sequence = groups.blocks(LEN, BLOCK)  # 512 + 6 x 65 = 902
    chunk = groups.windowed * math.ceil(BUDGET / BLOCK)  # 6 x 512 blocks while a chunk is in
    held = (blocks - chunk) // per_sequence
    assert (per_sequence, held) == (902, 14)
    assert held > logged  # vLLM's log line counts a chunk in every request: a floor
    kv = spec.kv_bytes_per_token("auto", 1)
    share = groups.size / spec.layers
    assert acct.window_chunk_bytes(spec, kv) == pytest.approx(chunk * BLOCK * kv * share)
    # the full-length count (vLLM before 0.10, or --disable-hybrid-kv-cache-manager) holds fewer
    full = blocks * groups.size // (spec.layers * math.ceil(LEN / BLOCK))
    assert full < held


def _on_and_off(model, seq_len, version):
    """max_concurrency on 1 and 2 x H100 with vLLM's hybrid KV cache manager, then without it."""
    args = dict(model=model, gpu="H100-SXM", tensor_parallel=[1, 2], seq_len=seq_len)
    hybrid = memory.max_concurrency(**args, accounting="vllm", vllm_version=version)
    off = memory.accounting("vllm", vllm_version=version, hybrid_kv=False)
    return hybrid, memory.max_concurrency(**args, accounting=off)


def test_memory_step_counts_the_hybrid_pool_and_says_so():
    """gpt-oss-120b on an H100: the 0.19 accounting (hybrid) against the same with it off."""
    hybrid, off = _on_and_off("gpt-oss-120b", [8192, 65536], "0.19")
    assert "hybrid" in hybrid.attrs["kv_layout"] and "full length" in off.attrs["kv_layout"]
    # the log line's tokens: equal halves of the pool (two groups of 18 layers, no padding)
    assert (hybrid.kv_cache_tokens.values == off.kv_cache_tokens.values).all()
    gain = hybrid.max_concurrency / off.max_concurrency
    # 18 full + 18 windowed layers: about twice the sequences, less one chunk's blocks
    assert 1.6 < float(gain.min()) and float(gain.max()) < 2.2  # (whole sequences: 15 vs 31)
    for tp in (1, 2):
        cell = hybrid.sel(tensor_parallel=tp, seq_len=65536).squeeze()
        spec = _spec_of("gpt-oss-120b")
        groups = spec.kv_groups(16)
        pool = int(cell.kv_cache_tokens) // 16 * 2  # the pool's blocks (two groups)
        chunk = math.ceil(BUDGET / 16)  # one windowed group
        want = (pool - chunk) // groups.blocks(65536, 16)
        assert abs(int(cell.max_concurrency) - want) <= 1  # (the pool's floor division)
    text = memory.describe(hybrid, tensor_parallel=1, seq_len=8192)
    held = int(hybrid.max_concurrency.sel(tensor_parallel=1, seq_len=8192).item())
    assert f"fits at most {held:,} concurrent sequences" in text


def _spec_of(name):
    from capnb.data import load_model

    return load_model(name)


def test_a_dense_model_is_counted_as_before():
    hybrid, off = _on_and_off("Llama-3.1-8B", [1000, 8192], "0.10")
    for name in ("max_concurrency", "kv_cache_tokens", "kv_cache_bytes"):
        assert (hybrid[name].values == off[name].values).all()


def test_hybrid_kv_must_be_a_bool():
    from capnb.errors import InputError

    with pytest.raises(InputError, match="hybrid_kv must be True or False"):
        memory.accounting("vllm", vllm_version="0.10", hybrid_kv="no")


#: Llama 4 Scout's text model (meta-llama/Llama-4-Scout-17B-16E config.json's text_config).
SCOUT = {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
         "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
         "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_local_experts": 16,
         "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "attention_chunk_size": 8192,
         "vocab_size": 202048, "torch_dtype": "bfloat16"}  # fmt: skip


def test_chunked_attention_is_full_length_where_vllm_turns_the_manager_off():
    """vLLM 0.10.1-0.12 (the 0.10 bucket) disable the hybrid manager for chunked local attention
    unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1; later releases (0.19) run it."""
    from capnb.latency._engine import held_sequences, kv_layout, kv_tokens_auto
    from capnb.records import Deployment, EngineSettings

    spec = parse(SCOUT, name="scout")
    assert spec.chunked_attention and not _spec("gemma-3-27b-it").chunked_attention
    args = dict(model=spec, gpu="H100-SXM", tensor_parallel=4, seq_len=[1000, 32768],
                accounting="vllm")  # fmt: skip
    off = {v: memory.accounting("vllm", vllm_version=v, hybrid_kv=False) for v in ("0.10", "0.19")}
    old = memory.max_concurrency(**args, vllm_version="0.10").max_concurrency
    assert (old.values == memory.max_concurrency(**{**args, "accounting": off["0.10"]})
            .max_concurrency.values).all()  # fmt: skip
    assert old.sel(seq_len=32768).item() == 8  # (the hybrid count said 19)
    new = memory.max_concurrency(**args, vllm_version="0.19").max_concurrency.sel(seq_len=32768)
    full = memory.max_concurrency(**{**args, "accounting": off["0.19"]}).max_concurrency
    assert new.item() > 2 * full.sel(seq_len=32768).item()  # three chunked groups keep a chunk each
    # the vllm-v1 engine sizes its cache on the 0.10 bucket: full length for Llama 4 too
    assert kv_layout(spec, EngineSettings()) == (48, 1, 0, 0)
    kv = kv_tokens_auto(spec, "H100-SXM", 4)
    assert held_sequences(Deployment(spec, "H100-SXM", 4), kv, 32768) == 8


def test_describe_says_when_windows_are_kept():
    """The sentence said 14 sequences of Gemma 3 27B where the full-length count says 8, alike."""
    spec = _spec("gemma-3-27b-it")
    args = dict(model=spec, gpu="H100-SXM", tensor_parallel=1, seq_len=8192, accounting="vllm")
    hybrid = memory.max_concurrency(**args, vllm_version="0.19")
    off = memory.accounting("vllm", vllm_version="0.19", hybrid_kv=False)
    text = memory.describe(hybrid)
    assert "its sliding-window layers hold only their window" in text
    assert "hold only" not in memory.describe(memory.max_concurrency(**{**args, "accounting": off}))
    short = memory.max_concurrency(**{**args, "seq_len": 512}, vllm_version="0.19")
    assert "hold only" not in memory.describe(short)  # (no window reached, as full length)
    dense = memory.max_concurrency(**{**args, "model": "Llama-3.1-8B"}, vllm_version="0.19")
    assert "hold only" not in memory.describe(dense)


def test_the_engine_and_the_memory_step_hold_the_same_sequences_on_every_gpu():
    """One chunk reserve for both: vLLM's default step budget on an A100 (2,048), which its
    profile run and its windowed groups' chunk use there, where an H100 runs 8,192."""
    from capnb.latency import _engine
    from capnb.records import Deployment

    spec = _spec("gemma-3-27b-it")
    for gpu, tokens in (("A100-80GB", 2048), ("H100-SXM", 8192)):
        acct = _engine.served_accounting(gpu)
        assert acct.max_num_batched_tokens == tokens
        for length in (16, 1024, 8192):
            ds = memory.max_concurrency(model=spec, gpu=gpu, tensor_parallel=1, seq_len=length,
                                        accounting=acct)  # fmt: skip
            kv = int(ds.kv_cache_tokens.item())
            held = _engine.held_sequences(Deployment(spec, gpu, 1), kv, length)
            assert held == int(ds.max_concurrency.item()), (gpu, length)


def test_a_request_the_hybrid_pool_holds_is_not_refused_at_full_length():
    # Gemma 3 27B on one H100: 20,768 tokens of KV cache as vLLM logs them; a 40,000-token request
    # holds 2,500 blocks in the full group and 65 in each of six window groups (2,890 of 2,967
    # after one chunk), though 40,000 tokens are more than the log line's 20,768
    from capnb import latency
    from capnb.latency import _engine
    from capnb.records import Deployment, EngineSettings

    spec = _spec("gemma-3-27b-it")
    kv = _engine.kv_tokens_auto(spec, "H100-SXM", 1)
    settings = _engine._resolved(EngineSettings(), spec, "H100-SXM", 80e9, kv)
    layout = _engine.kv_layout(spec, settings)
    assert not _engine.holds(40_000, kv) and _engine.pool_holds(40_000, kv, layout, settings)
    work = latency.workload(prompt_tokens=[39_900] * 4, output_tokens=[100] * 4)
    curve = latency.engine(Deployment(spec, "H100-SXM", 1), work, concurrency=[1], requests=6)
    assert float(curve.latency.sel(metric="e2e").max()) > 0
    # an engine that stores every layer whole is sized and checked at full length
    full = _engine.kv_tokens_auto(spec, "H100-SXM", 1, hybrid=False)
    assert full > kv  # (the hybrid pool's padded group: 70 layer slots for 62 layers)
    sglang = _engine._resolved(EngineSettings("sglang"), spec, "H100-SXM", 80e9, full)
    assert _engine.kv_layout(spec, sglang).windowed == 0


def test_the_calibration_simulates_each_engine_with_its_own_kv_layout(monkeypatch):
    # a measured run of a windowed model is simulated as its engine stores the cache: vLLM V1's
    # hybrid pool (a 40,000-token request to Gemma 3 27B on one H100 fits), SGLang's full-length
    # count (it does not: 40,000 tokens are more than the 23,440 it holds)
    from capnb.latency import _engine, _fit

    spec = _spec("gemma-3-27b-it")
    monkeypatch.setattr(_fit, "_spec", lambda name: spec)
    monkeypatch.setattr(_fit, "vectors", _fit.vectors.__wrapped__)
    config = ("own", "H100-SXM", "gemma-3-27b-it", "{}", "0.11.0", 1, "bf16", 39_900.0, 100.0,
              "concurrency")  # fmt: skip
    kv = {}
    for engine in ("vLLM", "SGLang"):
        pt = _fit.Point(tuple(v if v != "{}" else engine for v in config), 1.0, run={})
        _, kv[engine] = _fit._kv_cache(pt, {})
        assert _fit._pool_holds(pt, {}, kv[engine], 40_000) == (engine == "vLLM")
    assert kv["vLLM"] == _engine.kv_tokens_auto(spec, "H100-SXM", 1)
    assert kv["SGLang"] == _engine.kv_tokens_auto(spec, "H100-SXM", 1, hybrid=False)


@pytest.mark.filterwarnings(
    "ignore::capnb.data.TraceWarning"
)  # (the Mooncake log's same-time rows)
def test_the_prefix_trade_counts_the_sequences_the_engine_holds():
    from capnb.capacity._prefix import prefix_trade
    from capnb.latency import _engine
    from capnb.records import SLA, Deployment

    option = Deployment("gpt-oss-120b", "H100-SXM", 2)
    trade = prefix_trade(option, sla=SLA(ttft_s=30.0), cache_share=[0.0, 0.5], requests=40)
    seq_len = int(trade.attrs["seq_len"])
    for share in (0.0, 0.5):
        row = trade.sel(cache_share=share)
        held = _engine.held_sequences(option, int(row.running_tokens), seq_len)
        assert int(row.max_concurrency) == held
    # about twice split_kv's full-length count (18 of 36 layers keep a 128-token window)
    running = int(trade.running_tokens.sel(cache_share=0.0))
    full_length = (running // 16) // -(-seq_len // 16)
    assert int(trade.max_concurrency.sel(cache_share=0.0)) > 1.8 * full_length


def test_describe_says_when_windows_are_counted_at_full_length():
    """Worksheet 02 as it says to use it (MODEL changed, the article accounting kept): Gemma 3 27B
    on 2 x H100 at 8,192 tokens fits 22 sequences, every layer at full length, and the sentence
    did not say so, where vLLM 0.10 on keeps 52 of its 62 layers to their 1,024-token window."""
    spec = _spec("gemma-3-27b-it")
    args = dict(model=spec, gpu="H100-SXM", tensor_parallel=2, seq_len=8192)
    text = memory.describe(memory.max_concurrency(**args))
    assert "at most 22 concurrent" in text
    assert "its 52 sliding-window layers are counted at full length" in text
    assert "vllm_version='0.19'" in text
    off = memory.accounting("vllm", vllm_version="0.19", hybrid_kv=False)
    assert "counted at full length" in memory.describe(
        memory.max_concurrency(**args, accounting=off)
    )
    kept = memory.max_concurrency(**args, accounting="vllm", vllm_version="0.19")
    assert "counted at full length" not in memory.describe(kept)
    short = memory.max_concurrency(**{**args, "seq_len": 1024})  # within the window: no difference
    assert "counted at full length" not in memory.describe(short)
    dense = memory.max_concurrency(**{**args, "model": "Llama-3.1-8B"})
    assert "counted at full length" not in memory.describe(dense)

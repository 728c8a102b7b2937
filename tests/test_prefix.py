"""Prefix caching: the one-pass LRU (stack distances) against an OrderedDict LRU replayed per size."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import xarray as xr

import capnb
from benchmarks.reference.prefix import lru_hit_tokens_python
from capnb.errors import ConfigError, InputError
from capnb.kernels import prefix


def _requests(blocks):
    """(hashes, tokens) per request, for the reference."""
    starts = np.append(blocks.block_start.values, blocks.sizes["block"])
    hashes, held = blocks.block_hash.values, blocks.block_prompt_tokens.values
    return [(hashes[a:b].tolist(), held[a:b].tolist()) for a, b in itertools.pairwise(starts)]


@pytest.fixture(scope="module")
def bundled():
    return capnb.data.load_block_hashes("mooncake-synthetic")


@pytest.fixture(scope="module")
def head(bundled):
    """The first 400 requests of the bundled Mooncake trace."""
    stop = int(bundled.block_start[400])
    return bundled.isel(request=slice(0, 400), block=slice(0, stop)).assign_attrs(bundled.attrs)


def test_stack_distances_by_hand():
    # a b c a b b d a: a's second use saw b, c (2); b's saw c, a (2); b again (0); a's last: b, d (2)
    keys = np.array([0, 1, 2, 0, 1, 1, 3, 0], dtype=np.int64)
    assert prefix.stack_distances(keys, 4).tolist() == [-1, -1, -1, 2, 2, 0, -1, 2]


def test_prefix_rule_stops_at_the_first_miss():
    distances = np.array([0, 5, 1, -1, 0, 3], dtype=np.int64)
    starts = np.array([0, 3, 6], dtype=np.int64)
    needs = prefix.prefix_needs(distances, starts)
    assert needs.tolist() == [1, 6, 6, prefix.NEVER, prefix.NEVER, prefix.NEVER]


def test_every_size_equals_the_ordereddict_lru_on_the_bundled_trace_head(head):
    requests = _requests(head)
    sizes = [0, 1, 2, 5, 40, 79, 80, 200, 1000, 3000, 6000, 100_000]
    ds = capnb.memory.prefix_hit_rate(head, cache_tokens=np.array(sizes) * 512)
    expected = [lru_hit_tokens_python(requests, c) for c in sizes]
    assert ds.hit_tokens.values.tolist() == expected
    assert expected[0] == 0 and expected[-1] > expected[4] > 0  # the sizes span the curve


@pytest.mark.parametrize("capacity", [500, 20_000])
def test_the_whole_bundled_trace_equals_the_reference(bundled, capacity):
    ds = capnb.memory.prefix_hit_rate(bundled, cache_tokens=capacity * 512)
    assert int(ds.hit_tokens.item()) == lru_hit_tokens_python(_requests(bundled), capacity)


def test_random_logs_with_shared_prefixes_equal_the_reference():
    rng = np.random.default_rng(7)
    for _ in range(20):
        # prompts drawn from a few templates, so prefixes repeat and diverge at random depths
        templates = rng.integers(0, 1000, size=(4, 12))
        requests = []
        for _ in range(60):
            t = templates[rng.integers(4)].copy()
            cut = rng.integers(0, 12)
            t[cut:] = rng.integers(1000, 1200, size=12 - cut)  # a private tail, sometimes repeated
            length = int(rng.integers(1, 13))
            hashes = t[:length].tolist()
            tokens = rng.integers(1, 17, size=length).tolist()
            requests.append((hashes, tokens))
        _, keys = np.unique(np.concatenate([h for h, _ in requests]), return_inverse=True)
        starts = np.cumsum([0] + [len(h) for h, _ in requests]).astype(np.int64)
        needs = prefix.prefix_needs(
            prefix.stack_distances(keys.astype(np.int64), keys.max() + 1), starts
        )
        held = np.concatenate([t for _, t in requests]).astype(np.int64)
        curve = prefix.hit_tokens_by_capacity(needs, held, 60)
        for c in (0, 1, 3, 8, 13, 30, 60):
            assert curve[c] == lru_hit_tokens_python(requests, c), c


def test_the_curve_rises_to_the_unbounded_cache(bundled):
    ds = capnb.memory.prefix_hit_rate(bundled)
    rate = ds.prefix_hit_rate.values
    assert rate[0] == 0 and np.all(np.diff(rate) >= 0)
    assert rate[-1] == pytest.approx(ds.attrs["max_prefix_hit_rate"])
    assert ds.cache_tokens.attrs["units"] == "tokens" and ds.prefix_hit_rate.attrs["units"] == "1"


def test_split_kv_trades_sequences_for_hits(bundled):
    ds = capnb.memory.split_kv(
        bundled, kv_cache_tokens=1_000_000, seq_len=20_000, cache_share=[0.0, 0.25, 0.5]
    )
    assert ds.max_concurrency.values.tolist() == [50, 37, 25]
    assert ds.prefix_cache_tokens.values.tolist() == [0, 250_000, 500_000]
    direct = capnb.memory.prefix_hit_rate(bundled, cache_tokens=[0, 250_000, 500_000])
    np.testing.assert_array_equal(ds.prefix_hit_rate.values, direct.prefix_hit_rate.values)
    np.testing.assert_array_equal(ds.prefill_share.values, 1 - direct.prefix_hit_rate.values)


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: capnb.memory.prefix_hit_rate(cache_tokens=[-1]), "cache_tokens"),
        (lambda: capnb.memory.prefix_hit_rate(cache_tokens=[1.5]), "cache_tokens"),
        (lambda: capnb.memory.split_kv(kv_cache_tokens=0, seq_len=10), "kv_cache_tokens"),
        (
            lambda: capnb.memory.split_kv(kv_cache_tokens=10, seq_len=10, cache_share=1.0),
            "cache_share",
        ),
        (lambda: capnb.data.load_block_hashes(block_tokens=0), "block_tokens"),
    ],
)
def test_bad_arguments_are_named(call, names):
    with pytest.raises(InputError, match=names):
        call()


def test_a_hash_count_that_does_not_match_the_prompt_names_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]},
        {"timestamp": 1, "input_length": 600, "output_length": 1, "hash_ids": [1]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(ConfigError, match="line 2"):
        capnb.data.load_block_hashes(path)


#: Three requests out of time order (t = 0, 2, 1 s); with a one-block cache the third reuses the
#: first's block only when replayed in time order.
_OUT_OF_ORDER = [
    {"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]},
    {"timestamp": 2000, "input_length": 512, "output_length": 1, "hash_ids": [2]},
    {"timestamp": 1000, "input_length": 512, "output_length": 1, "hash_ids": [1]},
]


def test_a_log_out_of_time_order_is_replayed_in_time_order(tmp_path):
    # two servers' logs concatenated: the file's order is not arrival order. With a one-block
    # cache, request C (t=1) reuses A's block (t=0) before B (t=2) evicts it; replayed in file
    # order it missed (hit rate 0 where it is 1/3), silently
    rows = _OUT_OF_ORDER
    path = tmp_path / "merged.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.warns(
        capnb.data.TraceWarning, match=r"1 record earlier .*line 3\).* sorted by 'timestamp'"
    ):
        blocks = capnb.data.load_block_hashes(path)
    assert blocks.block_hash.values.tolist() == [1, 1, 2]
    assert blocks.prompt_tokens.values.tolist() == [512, 512, 512]
    assert "sorted by 'timestamp'" in blocks.attrs["notes"]
    rate = capnb.memory.prefix_hit_rate(blocks, cache_tokens=[512]).prefix_hit_rate.item()
    assert rate == pytest.approx(1 / 3)


def test_a_csv_request_log_is_refused_as_carrying_no_block_hashes(tmp_path):
    # a CSV log handed to the prefix replay: the error was "line 1: not a JSON object (starts
    # 'time,prompt_tokens')", which did not say what the replay needs
    path = tmp_path / "log.csv"
    path.write_text("time,prompt_tokens,output_tokens\n2024-05-13 00:00,600,10\n")
    message = r"log\.csv: prompt block hashes are read from a JSON-lines request log .*'hash_ids'"
    with pytest.raises(ConfigError, match=message):
        capnb.data.load_block_hashes(path)
    with pytest.raises(ConfigError, match=message):
        capnb.memory.prefix_routing(str(path), instances=2, cache_tokens=1024)


def test_a_dataset_without_block_hashes_is_refused():
    with pytest.raises(InputError, match="load_block_hashes"):
        capnb.memory.prefix_hit_rate(xr.Dataset({"prompt_tokens": ("request", [512])}))


def test_the_split_counts_running_sequences_in_whole_kv_blocks_as_the_memory_step_does():
    # with no cache, the split's sequences are what capnb.memory holds with vLLM's accounting (a
    # 1,426-token sequence takes 90 blocks of 16 tokens): it said 594 where memory says 588, and
    # the plan's engine (with a prefix cache) and worksheet 06's trade sized on that count
    held = capnb.memory.max_concurrency(model="Qwen3-8B", gpu="A100-80GB", tensor_parallel=2,
                                        seq_len=1426, accounting="vllm", vllm_version="0.10")  # fmt: skip
    split = capnb.memory.split_kv(kv_cache_tokens=int(held.kv_cache_tokens.item()), seq_len=1426,
                                  cache_share=[0.0, 0.3])  # fmt: skip
    assert (
        int(split.max_concurrency.sel(cache_share=0.0)) == int(held.max_concurrency.item()) == 588
    )
    running = int(split.running_tokens.sel(cache_share=0.3))
    assert int(split.max_concurrency.sel(cache_share=0.3)) == (running // 16) // 90


def test_the_split_counts_a_windowed_models_sequences_as_the_memory_step_does():
    # Gemma 3 27B (52 of 62 layers keep a 1,024-token window) on an H200 at 15,837 tokens (the
    # bundled Mooncake log's mean prompt + 512): vLLM's 0.10 accounting holds 37 sequences in its
    # 124,944-token pool, where split_kv counted every layer at full length: 7 (5 with 30 % of the
    # budget cached), the figures worksheet 06 printed beside the memory step's 37
    config = {"model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376,
              "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
              "intermediate_size": 21504, "vocab_size": 262208, "sliding_window": 1024,
              "sliding_window_pattern": 6, "torch_dtype": "bfloat16"}  # fmt: skip
    spec = capnb.data.load_model(config)
    held = capnb.memory.max_concurrency(model=spec, gpu="H200", tensor_parallel=1, seq_len=15_837,
                                        accounting="vllm", vllm_version="0.10")  # fmt: skip
    tokens = int(held.kv_cache_tokens.item())
    split = capnb.memory.split_kv(kv_cache_tokens=tokens, seq_len=15_837, model=spec,
                                  cache_share=[0.0, 0.3])  # fmt: skip
    assert int(split.max_concurrency.sel(cache_share=0.0)) == int(held.max_concurrency.item()) == 37
    assert int(split.max_concurrency.sel(cache_share=0.3)) > 5
    assert "window" in split.attrs["kv_layout"]
    # without the model, every layer at full length, and the result says so
    full = capnb.memory.split_kv(kv_cache_tokens=tokens, seq_len=15_837, cache_share=[0.0])
    assert int(full.max_concurrency.item()) == 7 and "full length" in full.attrs["kv_layout"]


def test_lines_named_in_a_block_log_are_the_files_lines_past_blank_ones(tmp_path):
    # the records' order was named by record (its index + 1 as a "line"): a log with two blank
    # lines after its first record said 'first: line 3' of the record on line 5, and a missing
    # field on line 5 was 'line 3'
    rows = _OUT_OF_ORDER
    path = tmp_path / "merged.jsonl"
    lines = [json.dumps(r) for r in rows]
    path.write_text("\n".join([lines[0], "", "  ", *lines[1:]]) + "\n")
    with pytest.warns(capnb.data.TraceWarning, match=r"\(first: line 5\)"):
        capnb.data.load_block_hashes(path)
    path.write_text("\n".join([lines[0], "", "", lines[1], '{"timestamp": 3000}']) + "\n")
    with pytest.raises(ConfigError, match=r"^merged.jsonl, line 5: 'hash_ids' is missing"):
        capnb.data.load_block_hashes(path)

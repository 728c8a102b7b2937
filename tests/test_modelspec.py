"""The model spec against published facts, and its errors on bad configs."""

import json

import pytest

from capnb.data import list_models, load_model
from capnb.errors import ConfigError, InputError, UnknownNameError
from capnb.modelspec import context_tokens, dtype_bytes, parse

# Published totals (model cards / papers); the bound is 2 %.
PUBLISHED_PARAMETERS = {
    "Llama-3.1-8B": 8.03e9,
    "Llama-3.1-70B": 70.6e9,
    "Llama-3.1-405B": 405.9e9,
    "Mixtral-8x7B": 46.7e9,
    "DeepSeek-V3": 671e9,
    "Llama-2-7B": 6.74e9,
    "Llama-2-13B": 13.0e9,
    "Llama-2-70B": 69.0e9,
    "BLOOM-176B": 176.2e9,
    "Qwen3-14B": 14.8e9,
    "gpt-oss-20b": 20.91e9,
    "Llama-4-Maverick-17B-128E": 400e9,  # (the text model; the vision tower is not in the file)
}


@pytest.mark.parametrize(("model", "published"), PUBLISHED_PARAMETERS.items())
def test_parameter_count_within_two_percent_of_published(model, published):
    assert load_model(model).parameters == pytest.approx(published, rel=0.02)


def test_active_parameters_of_moe_models_match_published():
    assert load_model("Mixtral-8x7B").active_parameters == pytest.approx(12.9e9, rel=0.02)
    assert load_model("DeepSeek-V3").active_parameters == pytest.approx(37e9, rel=0.02)
    for llama4 in ("Llama-4-Scout-17B-16E", "Llama-4-Maverick-17B-128E"):
        assert load_model(llama4).active_parameters == pytest.approx(17e9, rel=0.02)
    assert load_model("Llama-3.1-8B").active_parameters == load_model("Llama-3.1-8B").parameters


@pytest.mark.parametrize(
    ("model", "kv_bytes"),
    [
        ("Llama-3.1-8B", 131_072),  # 2 x 32 layers x 8 KV heads x 128 x 2 bytes
        ("Llama-3.1-70B", 327_680),  # 2 x 80 x 8 x 128 x 2
        ("DeepSeek-V3", 70_272),  # MLA latent: 61 x (512 + 64) x 2
    ],
)
def test_kv_bytes_per_token_published(model, kv_bytes):
    assert load_model(model).kv_bytes_per_token("bf16") == kv_bytes


def test_kv_dtype_fp8_halves_and_auto_uses_config_dtype():
    spec = load_model("Llama-3.1-8B")
    assert spec.kv_bytes_per_token("fp8") == 65_536
    assert spec.kv_bytes_per_token("auto") == 131_072


def test_attention_kinds():
    assert load_model("Llama-3.1-8B").attention == "GQA"
    assert load_model("Llama-2-7B").attention == "MHA"
    assert load_model("DeepSeek-V3").attention == "MLA"
    assert load_model("Kimi-K2").attention == "MLA"


def test_tensor_parallel_splits_kv_heads_then_replicates():
    spec = load_model("Llama-3.1-70B")  # 8 KV heads
    assert spec.kv_heads_per_rank(2) == 4
    assert spec.kv_heads_per_rank(8) == 1
    assert spec.kv_heads_per_rank(16) == 1  # replicated: at least one head per rank
    assert spec.kv_bytes_per_token("bf16", 2) == 327_680 / 2
    assert spec.kv_bytes_per_token("bf16", 16) == spec.kv_bytes_per_token("bf16", 8)


def test_mla_latent_cache_is_replicated_on_every_rank():
    spec = load_model("DeepSeek-V3")
    assert spec.kv_bytes_per_token("bf16", 8) == spec.kv_bytes_per_token("bf16", 1) == 70_272


def test_deepseek_v32_indexer_cache_is_counted_beside_the_latent():
    # DeepSeek-V3.2's sparse attention keeps, beside each layer's MLA latent, its indexer's key
    # (vLLM's DeepseekV32IndexerCache: index_head_dim 128 fp8 values and an fp32 scale per 128,
    # 132 bytes a token, on every rank). It was planned at 70,272 KV bytes a token in bf16, the
    # latent alone, where vLLM holds 61 x (1,152 + 132) = 78,324
    v3 = load_model("DeepSeek-V3").config
    v32 = parse({**v3, "model_type": "deepseek_v32", "index_head_dim": 128, "index_n_heads": 64,
                 "index_topk": 2048})  # fmt: skip
    assert v32.kv_bytes_per_token("bf16") == 78_324
    assert v32.kv_bytes_per_token("bf16", 8) == 78_324
    # an fp8 cache of V3.2 is vLLM's fp8_ds_mla (DeepseekV32ForCausalLM.verify_and_update_config):
    # 512 fp8 latent values, an fp32 scale per 128 of them and the 64 rope values in bf16, 656
    # bytes a layer, not 576 (+ the indexer's 132): 48,068 a token, where 43,188 was counted
    assert v32.kv_bytes_per_token("fp8") == 61 * (656 + 132) == 48_068
    assert parse(v3).kv_bytes_per_token("fp8") == 61 * 576  # V3's fp8 cache: plain fp8
    assert parse(v3).kv_bytes_per_token("bf16") == 70_272  # no indexer: as before


def test_mla_down_projections_are_whole_on_every_rank():
    # vLLM's DeepseekV2 attention builds q_a_proj and kv_a_proj_with_mqa as ReplicatedLinear: every
    # rank holds all 61 x 7,168 x (1,536 + 512 + 64) of them (0.86 GiB in fp8). The memory sweep
    # divided them by TP with the rest: 78.33 GiB a GPU for DeepSeek-V3 at TP 8, not 79.09
    import capnb

    spec = load_model("DeepSeek-V3")
    down = 61 * 7168 * (1536 + 512 + 64) * (1 + spec.weight_scale_bytes)  # fp8 and block scales
    assert spec.weight_bytes_per_gpu(1) == spec.weight_bytes()
    assert spec.weight_bytes_per_gpu(8) == pytest.approx(spec.weight_bytes() / 8 + down * 7 / 8)
    # (79.09 before its fp32 block scales were counted, 163 MB in all)
    assert spec.weight_bytes_per_gpu(8) / 2**30 == pytest.approx(79.105, abs=0.001)
    assert spec.weight_bytes_per_gpu(8, "bf16") == pytest.approx(
        spec.weight_bytes("bf16") / 8 + 61 * 7168 * 2112 * 2 * 7 / 8
    )
    ds = capnb.memory.sweep(model="DeepSeek-V3", gpu="H200", tensor_parallel=[1, 8],
                            concurrency=[1], seq_len=[4096])  # fmt: skip
    assert ds.weights_bytes.values.ravel().tolist() == [
        spec.weight_bytes_per_gpu(1), spec.weight_bytes_per_gpu(8)
    ]  # fmt: skip
    llama = load_model("Llama-3.1-70B")  # no replicated projection: an even split
    assert llama.weight_bytes_per_gpu(8) == llama.weight_bytes() / 8


def test_kv_projections_are_replicated_when_tp_exceeds_kv_heads():
    # vLLM's QKVParallelLinear gives each rank max(1, kv_heads / TP) heads of the K and V
    # projections (a head's weights and biases are copied to TP / kv_heads ranks); Q and O split.
    # Qwen2.5-72B (8 KV heads of 128, hidden 8,192, 80 layers, q/k/v biases) at TP 16: each rank
    # holds one head, 80 x 2 x (8,192 + 1) x 128 weights, not half of one: the even split was
    # 9,088,275,456 bytes a GPU, 167,792,640 short
    spec = parse(QWEN25_72B, name="Qwen2.5-72B")
    kv = 80 * 2 * (8192 + 1) * 128  # K and V of one head on every layer, with biases
    for tp in (16, 32):
        even = (spec.weight_bytes() - 8 * kv * 2) / tp
        assert spec.weight_bytes_per_gpu(tp) == pytest.approx(even + kv * 2)
    assert spec.weight_bytes_per_gpu(16) - spec.weight_bytes() / 16 == pytest.approx(167_792_640)
    assert spec.weight_bytes_per_gpu(8) == spec.weight_bytes() / 8  # one head each: no copy
    # AWQ int4 with groups of 128: the K/V projections are quantized as weight_bytes counts them
    awq = parse({**QWEN25_72B, "intermediate_size": 29696, "quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 128}}, name="Qwen2.5-72B-AWQ")  # fmt: skip
    per_param = 0.5 + awq.weight_scale_bytes
    even = (awq.weight_bytes() - 8 * kv * per_param) / 16
    assert awq.weight_bytes_per_gpu(16) == pytest.approx(even + kv * per_param)
    assert awq.weight_bytes_per_gpu(16, "bf16") == pytest.approx(
        (awq.weight_bytes("bf16") - 8 * kv * 2) / 16 + kv * 2
    )
    mla = load_model("DeepSeek-V3")  # 128 heads of latent attention: no K/V head copied
    down = 61 * 7168 * (1536 + 512 + 64) * (1 + mla.weight_scale_bytes)
    assert mla.weight_bytes_per_gpu(16) == pytest.approx(mla.weight_bytes() / 16 + down * 15 / 16)


def test_quantization_config_overrides_torch_dtype():
    spec = load_model("DeepSeek-V3")  # torch_dtype bfloat16, quantization_config fp8
    assert spec.torch_dtype == "bf16"
    assert spec.weight_dtype == "fp8"
    # fp8 weights with 16-bit embeddings and LM head: about 1 byte per parameter
    assert spec.weight_bytes() == pytest.approx(spec.parameters, rel=0.01)
    assert spec.weight_bytes("bf16") == 2 * spec.parameters


def test_awq_int4_and_bitsandbytes_configs():
    base = dict(load_model("Llama-3.1-8B").config)
    awq = parse({**base, "quantization_config": {"quant_method": "awq", "bits": 4}})
    assert awq.weight_dtype == "int4"
    bnb = parse(
        {**base, "quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True}}
    )
    assert bnb.weight_dtype == "int8"
    assert awq.weight_bytes() < bnb.weight_bytes() < load_model("Llama-3.1-8B").weight_bytes()


def test_unknown_quantization_is_an_error_naming_the_field():
    with pytest.raises(ConfigError, match="quantization_config"):
        parse(
            {
                "num_hidden_layers": 2,
                "hidden_size": 64,
                "num_attention_heads": 4,
                "vocab_size": 10,
                "intermediate_size": 128,
                "quantization_config": {"quant_method": "mystery"},
            }
        )


def test_unknown_quantization_names_a_remedy_that_works():
    # the error said "pass weight_dtype= explicitly", but load_model (and so capnb.memory,
    # capnb.Deployment and a plan) refuses the config before any weight_dtype is read
    base = dict(load_model("Llama-3.1-8B").config)
    with pytest.raises(ConfigError) as err:
        load_model({**base, "quantization_config": {"quant_method": "mystery"}}, name="m")
    message = str(err.value)
    assert "weight_dtype=" not in message
    assert '{"quant_method": "fp8"}' in message and '{"bits": 4}' in message
    remedied = load_model({**base, "quantization_config": {"quant_method": "fp8"}}, name="m8")
    assert remedied.weight_dtype == "fp8"
    assert (
        load_model({**base, "quantization_config": {"bits": 4}}, name="m4").weight_dtype == "int4"
    )


def test_bloom_aliases_and_defaults():
    spec = load_model("BLOOM-176B")
    assert (spec.layers, spec.attention_heads, spec.kv_heads) == (70, 112, 112)
    assert spec.intermediate_size == 4 * spec.hidden_size and not spec.gated_mlp
    assert spec.tied_embeddings


def test_config_as_dict_and_as_path(tmp_path):
    config = dict(load_model("Qwen3-8B").config)
    from_dict = load_model(config, name="mine")
    path = tmp_path / "my-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    from_path = load_model(path)
    assert from_dict.name == "mine" and from_path.name == "my-model"
    assert from_dict.parameters == from_path.parameters == load_model("Qwen3-8B").parameters
    assert from_path.head_dim == 128  # explicit head_dim, not hidden_size / heads (= 128 too here)


def test_missing_field_names_field_and_file(tmp_path):
    config = dict(load_model("Llama-3.1-8B").config)
    del config["num_hidden_layers"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"broken\.json.*num_hidden_layers"):
        load_model(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_attention_heads": 0}, "num_attention_heads"),
        ({"hidden_size": "4096"}, "hidden_size"),
        ({"num_key_value_heads": 7}, "num_key_value_heads"),
        ({"intermediate_size": None}, "intermediate_size"),
        ({"torch_dtype": "complex64"}, "torch_dtype"),
    ],
)
def test_bad_field_values(change, field):
    config = dict(load_model("Llama-3.1-8B").config)
    config.update(change)
    with pytest.raises((ConfigError, InputError), match=field):
        parse(config, source="cfg.json")


def test_not_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json: not valid JSON"):
        load_model(bad)
    with pytest.raises(ConfigError, match="no such model config"):
        load_model(tmp_path / "missing.json")


def test_a_gguf_file_is_named_as_one(tmp_path):
    # a llama.cpp GGUF file (or a folder of them) given as the model was refused as 'line 1: a NUL
    # byte (byte 5): a binary file or UTF-16 without a byte-order mark, not UTF-8 text'
    gguf = tmp_path / "qwen2.5-7b-instruct-q4_k_m.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(16))
    with pytest.raises(ConfigError, match=r"q4_k_m\.gguf: a GGUF file .*config\.json"):
        load_model(gguf)
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(gguf.read_bytes())
    with pytest.raises(ConfigError, match=r"weights\.bin: a GGUF file"):
        load_model(renamed)
    with pytest.raises(ConfigError, match=r"needs a config\.json .*GGUF file"):
        load_model(tmp_path)


def test_unknown_model_lists_closest_names():
    with pytest.raises(UnknownNameError, match="closest: Llama-3.1-8B"):
        load_model("Llama-3-8B")


def test_tensor_parallel_that_does_not_divide_heads():
    spec = load_model("Llama-2-13B")  # 40 heads
    with pytest.raises(InputError, match="does not divide the 40 attention heads"):
        spec.kv_bytes_per_token("bf16", 3)
    assert spec.valid_tensor_parallel(16) is not None
    assert spec.valid_tensor_parallel(8) is None
    with pytest.raises(InputError, match="positive integer"):
        spec.kv_bytes_per_token("bf16", 0)


def test_tensor_parallel_that_does_not_divide_the_mlp_is_refused():
    # 40 heads of 80 (10 KV heads) and a 9,728-wide MLP: TP 5 divides the heads, and was planned
    # at 1,945.6 MLP columns a GPU, a shard vLLM's MergedColumnParallelLinear refuses (divide()
    # asserts whole shares); TP 2 holds 4,864
    spec = parse({**load_model("Llama-3.1-8B").config, "hidden_size": 5120,
                  "num_attention_heads": 40, "num_key_value_heads": 10, "head_dim": 80,
                  "intermediate_size": 9728}, source="x.json")  # fmt: skip
    assert spec.valid_tensor_parallel(2) is None
    reason = spec.valid_tensor_parallel(5)
    assert reason is not None and "intermediate_size=9728 is 1945.6 per GPU" in reason
    with pytest.raises(InputError, match="intermediate_size=9728"):
        spec.kv_bytes_per_token("bf16", 5)


def test_qwen_v1_mlp_is_half_its_intermediate_size():
    # Qwen-7B (model_type 'qwen', QWenLMHeadModel) writes intermediate_size 22,016 for an MLP of
    # 11,008 (its modeling_qwen.py and vLLM's QWenMLP take intermediate_size // 2), and no KV-head
    # field (multi-head). It was refused for want of num_key_value_heads; with it, planned at
    # 12.05 B parameters (22.4 GiB in bf16) where the checkpoint holds 7.72 B
    qwen = {
        "model_type": "qwen", "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "kv_channels": 128, "intermediate_size": 22016,
        "vocab_size": 151936, "max_position_embeddings": 32768, "no_bias": True,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }  # fmt: skip
    spec = parse(qwen, source="x.json")
    assert spec.intermediate_size == 11008 and spec.kv_heads == 32
    assert spec.parameters == pytest.approx(7.72e9, rel=0.01)
    assert spec.kv_bytes_per_token() == 524_288
    assert parse({**qwen, "num_key_value_heads": 32}).intermediate_size == 11008


def test_mpt_reads_its_kv_heads_from_attn_config():
    # MPT's grouped-query attention is attn_config.kv_n_heads (vLLM's MPTAttention reads it):
    # 32 heads of 128 in 8 KV groups were planned as multi-head, 524,288 KV bytes a token where
    # they hold 131,072
    mpt = {
        "model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
        "expansion_ratio": 4, "vocab_size": 50432, "max_seq_len": 2048,
        "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 8},
        "torch_dtype": "bfloat16",
    }  # fmt: skip
    assert parse(mpt).kv_bytes_per_token() == 131_072
    assert parse({**mpt, "attn_config": {"alibi": True}}).kv_bytes_per_token() == 524_288


def test_shared_experts_named_num_shared_experts_are_counted():
    # Ling-lite (bailing_moe) names its 2 shared experts 'num_shared_experts': they were left out,
    # 16.3 B parameters where the model holds 16.8 B, and 2.27 B active where each token uses 2.75 B
    ling = {
        "model_type": "bailing_moe", "hidden_size": 2048, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 5632,
        "moe_intermediate_size": 1408, "num_experts": 64, "num_experts_per_tok": 6,
        "num_shared_experts": 2, "first_k_dense_replace": 0, "vocab_size": 126464,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }  # fmt: skip
    spec = parse(ling)
    assert spec.shared_experts == 2
    shared = 28 * 2 * 3 * 2048 * 1408
    without = parse({**ling, "num_shared_experts": 0})
    assert spec.parameters - without.parameters == shared
    assert spec.parameters == pytest.approx(16.8e9, rel=0.01)
    assert spec.active_parameters == pytest.approx(2.75e9, rel=0.03)


def test_every_bundled_model_parses_with_positive_sizes():
    for name in list_models():
        spec = load_model(name)
        assert spec.parameters > 1e9
        assert spec.kv_bytes_per_token() > 0
        assert spec.active_parameters <= spec.parameters


def test_dtype_bytes():
    assert dtype_bytes("bfloat16") == 2 and dtype_bytes("fp8") == 1 and dtype_bytes("int4") == 0.5
    with pytest.raises(InputError, match="kv_dtype"):
        dtype_bytes("fp7", argument="kv_dtype")


# -- configs outside the catalog (public Hugging Face config.json files, trimmed) ----------------
FALCON_40B = {
    "model_type": "falcon", "new_decoder_architecture": True, "num_attention_heads": 128,
    "num_kv_heads": 8, "num_hidden_layers": 60, "hidden_size": 8192, "vocab_size": 65024,
    "parallel_attn": True, "bias": False, "alibi": False, "torch_dtype": "bfloat16",
}  # fmt: skip
CHATGLM3_6B = {
    "model_type": "chatglm", "num_layers": 28, "hidden_size": 4096, "num_attention_heads": 32,
    "multi_query_attention": True, "multi_query_group_num": 2, "kv_channels": 128,
    "ffn_hidden_size": 13696, "padded_vocab_size": 65024, "add_qkv_bias": True,
    "tie_word_embeddings": False, "torch_dtype": "float16",
}  # fmt: skip
GEMMA2_9B = {
    "model_type": "gemma2", "head_dim": 256, "hidden_size": 3584, "intermediate_size": 14336,
    "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
    "vocab_size": 256000, "sliding_window": 4096, "torch_dtype": "float32",
}  # fmt: skip
GEMMA3_12B = {
    "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
    "text_config": {"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text",
                    "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8,
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16,
                      "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False},
}  # fmt: skip
MISTRAL_SMALL_31 = {
    "model_type": "mistral3", "multimodal_projector_bias": False, "spatial_merge_size": 2,
    "text_config": {"head_dim": 128, "hidden_size": 5120, "intermediate_size": 32768,
                    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40,
                    "num_key_value_heads": 8, "sliding_window": None, "vocab_size": 131072},
    "torch_dtype": "bfloat16",
    "vision_config": {"head_dim": 64, "hidden_size": 1024, "image_size": 1540,
                      "intermediate_size": 4096, "model_type": "pixtral", "num_attention_heads": 16,
                      "num_channels": 3, "num_hidden_layers": 24, "patch_size": 14},
    "vision_feature_layer": -1,
}  # fmt: skip
QWEN2_VL_7B = {
    "model_type": "qwen2_vl", "hidden_size": 3584, "intermediate_size": 18944,
    "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 152064,
    "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16,
                      "in_chans": 3, "hidden_size": 3584, "patch_size": 14,
                      "spatial_merge_size": 2, "spatial_patch_size": 14, "temporal_patch_size": 2},
}  # fmt: skip
LLAMA4_TEXT = {
    "model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192,
    "intermediate_size_mlp": 16384, "num_attention_heads": 40, "num_key_value_heads": 8,
    "head_dim": 128, "num_hidden_layers": 48, "num_experts_per_tok": 1, "vocab_size": 202048,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}  # fmt: skip


def llama4(experts, step):
    text = {**LLAMA4_TEXT, "num_local_experts": experts, "interleave_moe_layer_step": step}
    vision = {"model_type": "llama4_vision_model", "hidden_size": 1408, "num_hidden_layers": 34}
    return {"model_type": "llama4", "text_config": text, "vision_config": vision,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16"}  # fmt: skip


def test_falcon_kv_heads_from_its_own_keys():
    spec = parse(FALCON_40B)  # new decoder architecture: num_kv_heads
    assert (spec.kv_heads, spec.attention) == (8, "GQA")
    assert spec.kv_bytes_per_token() == 122_880  # 2 x 60 layers x 8 KV heads x 64 x 2 bytes
    assert spec.parameters == 41_302_302_720  # not 48.85 B with 128 KV heads
    rw = {k: v for k, v in FALCON_40B.items() if k != "num_kv_heads"} | {"n_head_kv": 8}
    assert parse(rw).kv_heads == 8  # the older RW spelling
    falcon_7b = {**FALCON_40B, "new_decoder_architecture": False, "num_attention_heads": 71,
                 "hidden_size": 4544, "num_hidden_layers": 32, "multi_query": True}  # fmt: skip
    del falcon_7b["num_kv_heads"]
    assert parse(falcon_7b).attention == "MQA"
    # FalconConfig's multi_query defaults to true: no key is still one KV head
    assert parse({k: v for k, v in falcon_7b.items() if k != "multi_query"}).kv_heads == 1


def test_chatglm_kv_groups_and_megatron_names():
    spec = parse(CHATGLM3_6B)
    assert (spec.layers, spec.kv_heads, spec.head_dim, spec.vocab_size) == (28, 2, 128, 65024)
    assert spec.kv_bytes_per_token() == 28_672  # 2 x 28 x 2 x 128 x 2 bytes (fp16)
    # published 6,243,584,000 counts the q/k/v biases (28 x 4,608) that capnb leaves out
    assert spec.parameters == 6_243_584_000 - 28 * 4608


def test_kv_heads_that_cannot_be_read_are_refused():
    config = {k: v for k, v in load_model("Llama-3.1-8B").config.items()}
    del config["num_key_value_heads"]
    with pytest.raises(ConfigError, match=r"cfg\.json: .*KV heads.*'num_key_value_heads'"):
        parse({**config, "model_type": "newfamily"}, source="cfg.json")
    with pytest.raises(ConfigError, match="KV heads"):
        parse({k: v for k, v in config.items() if k != "model_type"})
    # Llama-1/2-7B configs omit the key: LlamaConfig then uses one KV head per attention head
    assert parse({**config, "model_type": "llama"}).attention == "MHA"
    assert load_model("Llama-2-7B").attention == load_model("BLOOM-176B").attention == "MHA"
    assert load_model("InternLM-20B").attention == "MHA"


def test_tied_embeddings_default_follows_the_model_type():
    gemma = parse({**GEMMA2_9B, "torch_dtype": "bfloat16"})  # Gemma2Config ties by default
    assert gemma.tied_embeddings
    # published 9,241,705,984, with Gemma-2's four norms per layer (Gemma2DecoderLayer)
    assert gemma.parameters == 9_241_705_984
    assert gemma.weight_bytes() == 2 * gemma.parameters
    llama = {k: v for k, v in load_model("Llama-3.1-8B").config.items()}
    del llama["tie_word_embeddings"]
    assert not parse(llama).tied_embeddings  # LlamaConfig does not tie
    assert parse(llama).notes == ()
    unknown = parse({**llama, "model_type": "newfamily"})
    assert not unknown.tied_embeddings
    assert any("tie_word_embeddings" in note and "untied" in note for note in unknown.notes)


def test_float32_config_is_planned_at_16_bits_as_vllm_serves_it():
    spec = parse(GEMMA2_9B)  # the base gemma-2-9b declares float32
    assert spec.torch_dtype == spec.weight_dtype == "bf16"  # vLLM refuses fp16 for Gemma-2
    assert spec.weight_bytes() == 2 * spec.parameters
    assert spec.kv_bytes_per_token() == 344_064  # 2 x 42 x 8 x 256 x 2 bytes, not 4 bytes
    assert any("float32" in note for note in spec.notes)
    llama = parse({**load_model("Llama-3.1-8B").config, "torch_dtype": "float32"})
    assert llama.torch_dtype == "fp16" and llama.kv_bytes_per_token() == 131_072
    assert llama.weight_bytes("fp32") == 4 * llama.parameters  # still there when asked


def test_text_config_is_read_with_its_class_defaults_and_the_vision_tower_counted():
    gemma = parse(GEMMA3_12B)
    # Gemma3TextConfig defaults: head_dim 256 (not 3840 / 16), vocab 262,208, tied embeddings
    assert (gemma.head_dim, gemma.vocab_size, gemma.tied_embeddings) == (256, 262_208, True)
    assert gemma.kv_bytes_per_token() == 393_216  # 2 x 48 x 8 x 256 x 2
    assert gemma.vision_parameters == 421_290_864  # SigLIP tower + projector
    # published 12,187,325,040, with Gemma-3's four norms per layer and its q/k norms
    assert gemma.parameters == 12_187_325_040
    mistral = parse(MISTRAL_SMALL_31)
    assert mistral.parameters - mistral.vision_parameters == 23_572_403_200
    assert mistral.parameters == 24_011_361_280  # published, Pixtral tower and projector included
    assert mistral.active_parameters == 23_572_403_200  # text tokens do not run the vision tower
    assert mistral.torch_dtype == "bf16" and not mistral.tied_embeddings  # MistralConfig: untied
    # torch_dtype came from the outer config; the text part alone has none and says so
    assert not any("torch_dtype" in note for note in mistral.notes)
    assert any("torch_dtype" in note for note in parse(MISTRAL_SMALL_31["text_config"]).notes)


def test_a_nested_text_config_takes_its_class_defaults():
    """transformers writes a nested config's fields that differ from its class: llava-1.5-7b-hf's
    text_config names no layers, width or heads (LlamaConfig's 32, 4,096 and 32: Vicuna-7B), and
    llava-v1.6-mistral-7b-hf's none of them either (MistralConfig's). capnb refused both as
    missing 'num_hidden_layers'; Llama-2-7B's 6,738,415,616 parameters with 64 more rows of
    vocabulary are 6,738,939,904, and 2 x 32 x 32 x 128 x 2 = 524,288 bytes of KV a token."""
    llava = {"model_type": "llava", "torch_dtype": "float16",
             "text_config": {"model_type": "llama", "max_position_embeddings": 4096,
                             "torch_dtype": "float16", "vocab_size": 32064},
             "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024}}  # fmt: skip
    spec = parse(llava)
    assert (spec.layers, spec.hidden_size, spec.attention_heads, spec.kv_heads) == (
        32,
        4096,
        32,
        32,
    )
    assert spec.parameters == 6_738_939_904 and spec.kv_bytes_per_token() == 524_288
    assert any("LlamaConfig" in note and "num_hidden_layers=32" in note for note in spec.notes)
    mistral = {"model_type": "llava_next", "torch_dtype": "bfloat16",
               "text_config": {"model_type": "mistral", "intermediate_size": 14336,
                               "max_position_embeddings": 32768, "num_key_value_heads": 8,
                               "sliding_window": None, "vocab_size": 32064}}  # fmt: skip
    spec = parse(mistral)
    assert (spec.layers, spec.hidden_size, spec.kv_heads, spec.sliding_layers) == (32, 4096, 8, 0)
    assert spec.kv_bytes_per_token() == 131_072
    # a top-level config is written whole: one without its layers is still refused
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        parse(llava["text_config"], source="x.json")


def test_vision_tower_of_qwen2_vl_is_counted():
    spec = parse(QWEN2_VL_7B)
    assert spec.vision_parameters == 675_759_104
    # published 8,291,375,616, with the text q/k/v biases (28 x 4,608)
    assert spec.parameters == 8_291_375_616
    assert spec.kv_bytes_per_token() == 57_344


#: An InternVL2.5-8B-shaped config of my own: the remote-code InternVLChatConfig nests its text
#: model (InternLM2.5-7B) under llm_config, not text_config.
INTERNVL_8B = {
    "model_type": "internvl_chat", "torch_dtype": "bfloat16", "template": "internvl2_5",
    "llm_config": {"model_type": "internlm2", "architectures": ["InternLM2ForCausalLM"],
                   "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 92553,
                   "max_position_embeddings": 32768, "bias": False, "tie_word_embeddings": False,
                   "rope_scaling": {"factor": 2.0, "type": "dynamic"}, "torch_dtype": "bfloat16"},
    "vision_config": {"model_type": "intern_vit_6b", "hidden_size": 1024, "num_hidden_layers": 24,
                      "intermediate_size": 4096, "num_attention_heads": 16, "patch_size": 14},
}  # fmt: skip


def test_an_internvl_config_reads_its_text_model_from_llm_config():
    # it was refused as "missing field 'num_hidden_layers'", though vLLM reads llm_config as the
    # text config (_CONFIG_ATTRS_MAPPING in vllm/transformers_utils/config.py)
    spec = parse(INTERNVL_8B)
    assert (spec.layers, spec.attention_heads, spec.kv_heads, spec.head_dim) == (32, 32, 8, 128)
    assert spec.vocab_size == 92_553 and spec.weight_dtype == "bf16"
    # InternLM2.5-7B by hand: 2 x 92,553 x 4,096 untied embeddings, 32 layers of wqkv
    # (4,096 x 6,144), wo (4,096^2), a gated MLP (3 x 4,096 x 14,336) and two norms, a final norm
    assert spec.parameters == 7_737_782_272
    assert spec.kv_bytes_per_token() == 32 * 2 * 8 * 128 * 2  # 131,072
    assert spec.context_tokens == 65_536  # 32,768 positions, dynamic scaling x 2
    assert spec.rope_cache_bytes() == 65_536 * 128 * 2
    assert any("read from llm_config" in note for note in spec.notes)
    assert any("intern_vit_6b" in note and "not counted" in note for note in spec.notes)
    with pytest.raises(ConfigError, match=r"field 'llm_config' must be a mapping, got 7"):
        parse({**INTERNVL_8B, "llm_config": 7})


def test_deepseek_vl2_and_qwen2_5_omni_read_the_text_model_where_vllm_does():
    # both were refused as "missing field 'num_hidden_layers'": vLLM reads DeepSeek-VL2's
    # language_config (DeepseekVLV2Config) and Qwen2.5-Omni's thinker_config.text_config
    # (get_hf_text_config) as the text model
    language = {"model_type": "deepseek_v2", "hidden_size": 2560, "intermediate_size": 12288,
                "num_hidden_layers": 30, "num_attention_heads": 32, "num_key_value_heads": 32,
                "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 72,
                "n_shared_experts": 2, "num_experts_per_tok": 6, "moe_intermediate_size": 1536,
                "first_k_dense_replace": 1, "vocab_size": 129280, "max_position_embeddings": 4096,
                "torch_dtype": "bfloat16"}  # fmt: skip
    vl2 = parse({"model_type": "deepseek_vl_v2", "language_config": language,
                 "vision_config": {"model_type": "vision", "layers": 27, "width": 1152}})  # fmt: skip
    assert (vl2.layers, vl2.attention, vl2.vocab_size) == (30, "MLA", 129_280)
    assert vl2.kv_bytes_per_token() == 30 * (512 + 64) * 2  # 34,560
    assert any("read from language_config" in note for note in vl2.notes)
    text = {"model_type": "qwen2_5_omni_text", "hidden_size": 3584, "intermediate_size": 18944,
            "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
            "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": False}  # fmt: skip
    omni = parse({"model_type": "qwen2_5_omni", "torch_dtype": "bfloat16",
                  "thinker_config": {"model_type": "qwen2_5_omni_thinker", "text_config": text},
                  "talker_config": {"model_type": "qwen2_5_omni_talker", "hidden_size": 896}})  # fmt: skip
    assert (omni.layers, omni.attention_heads, omni.kv_heads, omni.head_dim) == (28, 28, 4, 128)
    assert omni.kv_bytes_per_token() == 28 * 2 * 4 * 128 * 2  # 57,344 bytes of bf16
    assert omni.context_tokens == 32_768 and omni.weight_dtype == "bf16"
    assert any("read from thinker_config.text_config" in note for note in omni.notes)


def test_towers_in_fields_capnb_does_not_count_are_named_in_the_notes():
    # Phi-4-multimodal's image and audio encoders (embd_layer) and LoRA adapters, and
    # Qwen2.5-Omni's thinker's vision and audio encoders, came on top of the weights silently:
    # 3,836,021,760 parameters (the text model) with no note, where the checkpoint holds 5.6 B
    phi4mm = {"model_type": "phi4mm", "hidden_size": 3072, "intermediate_size": 8192,
              "num_hidden_layers": 32, "num_attention_heads": 24, "num_key_value_heads": 8,
              "vocab_size": 200064, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
              "max_position_embeddings": 131072,
              "embd_layer": {"embedding_cls": "image_audio",
                             "image_embd_layer": {"embedding_cls": "tune_image"},
                             "audio_embd_layer": {"embedding_cls": "audio"}},
              "vision_lora": {"r": 256, "lora_alpha": 512},
              "speech_lora": {"r": 320, "lora_alpha": 640}}  # fmt: skip
    spec = parse(phi4mm)
    assert spec.parameters == 3_836_021_760  # the text model alone, as before
    said = [n for n in spec.notes if "not counted" in n]
    assert said == [
        "the encoders and adapters in embd_layer, vision_lora, speech_lora are not counted: capnb "
        "has no checked formula for them in a 'phi4mm' config; their weights come on top of the "
        "figures here"
    ]
    text = {"model_type": "qwen2_5_omni_text", "hidden_size": 3584, "intermediate_size": 18944,
            "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
            "vocab_size": 152064, "max_position_embeddings": 32768}  # fmt: skip
    omni = parse({"model_type": "qwen2_5_omni", "torch_dtype": "bfloat16",
                  "thinker_config": {"text_config": text, "vision_config": {"depth": 32},
                                     "audio_config": {"encoder_layers": 32}}})  # fmt: skip
    assert any("thinker_config.vision_config, thinker_config.audio_config are not counted" in n
               for n in omni.notes)  # fmt: skip
    assert not any("not counted" in n for n in parse(text).notes)


def test_ovis_visual_tokenizer_is_named_as_not_counted():
    # Ovis nests its text model under llm_config (read, as vLLM reads it) and its vision side
    # (an AIMv2 backbone and a visual embedding table) under visual_tokenizer_config, which came on
    # top of the weights with no note
    ovis = {"model_type": "ovis", "torch_dtype": "bfloat16",
            "llm_config": {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
                           "num_hidden_layers": 28, "num_attention_heads": 28,
                           "num_key_value_heads": 4, "vocab_size": 151936,
                           "max_position_embeddings": 32768},
            "visual_tokenizer_config": {"model_type": "aimv2_visual_tokenizer",
                                        "vocab_size": 65536}}  # fmt: skip
    spec = parse(ovis)
    assert spec.kv_bytes_per_token() == 28 * 2 * 4 * 128 * 2
    assert any(n.startswith("the encoders and adapters in visual_tokenizer_config are not counted")
               for n in spec.notes)  # fmt: skip


def test_vision_tower_of_qwen2_5_vl_is_counted():
    # Qwen2.5-VL's tower (RMSNorms, a gated MLP intermediate_size wide, an RMSNorm before its
    # merger) was not counted: 7,615,616,512 parameters where Qwen2.5-VL-7B-Instruct publishes
    # 8,292,166,656 (8.2 % light, 1.35 GB of bf16 weights)
    vision = {"depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420,
              "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14,
              "spatial_merge_size": 2, "spatial_patch_size": 14, "window_size": 112,
              "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2,
              "temporal_patch_size": 2}  # fmt: skip
    text = {k: v for k, v in QWEN2_VL_7B.items() if k != "vision_config"}
    spec = parse({**text, "model_type": "qwen2_5_vl", "vision_config": vision})
    assert spec.vision_parameters == 676_550_144
    assert spec.parameters == 8_292_166_656
    assert spec.active_parameters == 7_615_616_512 and spec.kv_bytes_per_token() == 57_344
    # transformers 5 nests the text model; the same count
    nested = {"model_type": "qwen2_5_vl", "torch_dtype": "bfloat16", "vision_config": vision,
              "text_config": {**text, "model_type": "qwen2_5_vl_text"}}  # fmt: skip
    assert parse(nested).parameters == 8_292_166_656


#: Llama-4-Scout-17B-16E's published vision_config.
LLAMA4_VISION = {"model_type": "llama4_vision_model", "hidden_size": 1408, "image_size": 336,
                 "intermediate_size": 5632, "num_attention_heads": 16, "num_channels": 3,
                 "num_hidden_layers": 34, "patch_size": 14, "pixel_shuffle_ratio": 0.5,
                 "projector_input_dim": 4096, "projector_output_dim": 4096,
                 "multi_modal_projector_bias": False, "vision_output_dim": 4096}  # fmt: skip


def test_llama4_moe_layout_and_vision_tower():
    """The vision tower was not counted: 0.41 GiB a GPU of the 53.12 GiB vLLM 0.19.0 loads for
    Llama-4-Scout-17B-16E-Instruct at TP 4 (llm-d-planner's run; tests/test_memory_vllm_logs.py)."""
    scout, maverick = parse(llama4(16, 1)), parse(llama4(128, 2))
    assert scout.active_parameters == pytest.approx(17e9, rel=0.02)
    assert maverick.active_parameters == pytest.approx(17e9, rel=0.02)
    assert maverick.parameters == pytest.approx(400e9, rel=0.02)
    assert scout.parameters == pytest.approx(109e9, rel=0.02)
    # transformers' Llama4VisionModel with Scout's config, module by module: class and position
    # embeddings (1,408 + 577 x 1,408), the unfold patch Linear (588 x 1,408), two LayerNorms,
    # 34 layers of biased q/k/v/o, fc1/fc2 and two LayerNorms (23,807,872 each), the pixel-shuffle
    # MLP (5,632 x 4,096 + 4,096 x 4,096) and the projector into the text model (4,096 x 5,120)
    published = parse({**llama4(16, 1), "vision_config": LLAMA4_VISION})
    assert published.vision_parameters == 871_932_416
    assert any("vision" in note and "are counted" in note for note in published.notes)
    assert published.active_parameters == scout.active_parameters  # text tokens skip it


def test_awq_and_gptq_group_scales_and_zeros_are_counted():
    base = {k: v for k, v in load_model("Llama-3.1-70B").config.items()}
    awq = parse(
        {
            **base,
            "torch_dtype": "float16",
            "quantization_config": {
                "bits": 4,
                "group_size": 128,
                "quant_method": "awq",
                "version": "gemm",
                "zero_point": True,
            },
        }
    )
    # per 128 weights: an fp16 scale and a packed 4-bit zero (2.5 bytes)
    assert awq.weight_scale_bytes == 2.5 / 128
    assert awq.weight_bytes() == pytest.approx(39.77e9, rel=1e-3)
    gptq = parse(
        {
            **base,
            "quantization_config": {
                "bits": 4,
                "group_size": 128,
                "quant_method": "gptq",
                "sym": True,
                "desc_act": False,
            },
        }
    )
    assert gptq.weight_scale_bytes == 2.5 / 128  # GPTQ stores qzeros even when symmetric
    per_channel = parse({**base, "quantization_config": {"bits": 4, "group_size": -1,
                                                         "quant_method": "gptq"}})  # fmt: skip
    assert per_channel.weight_scale_bytes == 0.0


def test_a_folder_named_like_a_catalog_model_keeps_its_own_figures(tmp_path):
    fp8 = {**load_model("Llama-3.1-8B").config, "quantization_config": {"quant_method": "fp8"}}
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(fp8))
    spec = load_model(folder)
    assert spec.weight_dtype == "fp8" and spec.name != "Llama-3.1-8B"
    assert load_model(spec.name).weight_dtype == "fp8"  # a later step given its name
    assert load_model("Llama-3.1-8B").weight_dtype == "bf16"  # the catalog id, unchanged
    with pytest.raises(InputError, match="Llama-3.1-8B"):
        load_model(folder, name="llama-3.1-8b")
    same = tmp_path / "copy" / "Llama-3.1-8B"
    same.mkdir(parents=True)
    (same / "config.json").write_text(json.dumps(dict(load_model("Llama-3.1-8B").config)))
    assert load_model(same).name == "Llama-3.1-8B"  # the catalog's own config: no clash


# -- sliding-window attention, read as transformers reads each model type ---------------------
MISTRAL_7B_V01 = {
    "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 32000,
}  # fmt: skip
QWEN25_72B = {
    "model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568,
    "max_window_layers": 80, "num_attention_heads": 64, "num_hidden_layers": 80,
    "num_key_value_heads": 8, "sliding_window": 131072, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 152064,
}  # fmt: skip


def window_notes(spec):
    return [note for note in spec.notes if "sliding_window" in note or "layer_types" in note]


def test_mistral_windows_every_layer():
    spec = parse(MISTRAL_7B_V01)  # MistralAttention: the window in every layer
    assert (spec.sliding_window, spec.sliding_layers) == (4096, 32)
    assert spec.kv_bytes_per_token() == 131_072  # every layer at full length, as before
    assert spec.kv_bytes_per_sequence(32_768) == 4096 * 131_072
    assert spec.kv_bytes_per_sequence(1000) == 1000 * 131_072
    assert window_notes(spec) == []  # the config's own window: nothing assumed
    # no field: MistralConfig's default window of 4096, said in the notes
    default = parse({k: v for k, v in MISTRAL_7B_V01.items() if k != "sliding_window"})
    assert (default.sliding_window, default.sliding_layers) == (4096, 32)
    assert any("MistralConfig" in note and "4,096" in note for note in default.notes)
    # Mistral-7B-v0.2 and later say null: no window, also inside a text_config
    assert parse({**MISTRAL_7B_V01, "sliding_window": None}).sliding_layers == 0
    assert parse(MISTRAL_SMALL_31).sliding_layers == 0


def test_gemma2_without_layer_types_alternates_from_layer_0():
    spec = parse(GEMMA2_9B)  # the published config has no layer_types
    assert (spec.sliding_window, spec.sliding_layers) == (4096, 21)
    # 21 full layers at 8,192 tokens + 21 windowed at 4,096; 2 x 8 KV heads x 256 x 2 bytes
    assert spec.kv_bytes_per_sequence(8192) == 2_113_929_216
    assert spec.kv_bytes_per_sequence(8192) == 2 * 8 * 256 * 2 * (21 * 8192 + 21 * 4096)
    assert spec.kv_bytes_per_token() * 8192 == 2_818_572_288  # what was reported before
    assert any("Gemma2Config" in note and "21 of 42" in note for note in window_notes(spec))
    # Gemma2Config: "sliding_attention" if (i + 1) % 2, so layers 0 and 2 of 3 are windowed
    assert parse({**GEMMA2_9B, "num_hidden_layers": 3}).sliding_layers == 2


def test_layer_types_in_the_config_are_kept():
    kinds = ["full_attention"] * 40 + ["sliding_attention"] * 2
    spec = parse({**GEMMA2_9B, "layer_types": kinds})
    assert (spec.sliding_window, spec.sliding_layers) == (4096, 2)
    assert window_notes(spec) == []
    assert load_model("gpt-oss-120b").sliding_layers == 18  # its config lists them
    with pytest.raises(ConfigError, match="layer_types"):
        parse({**GEMMA2_9B, "layer_types": kinds[:41]}, source="cfg.json")
    # a Mistral config's layer_types is kept too, and the note says transformers ignores it
    mistral = parse({**MISTRAL_7B_V01, "layer_types": ["full_attention"] * 32})
    assert mistral.sliding_layers == 0
    assert any("ignores it" in note for note in mistral.notes)


def test_unknown_model_type_with_a_window_says_it_was_not_applied():
    config = {**MISTRAL_7B_V01, "model_type": "newfamily"}
    spec = parse(config)
    assert (spec.sliding_window, spec.sliding_layers) == (0, 0)
    assert any("4,096 not applied" in note for note in spec.notes)
    listed = parse({**config, "layer_types": ["sliding_attention", "full_attention"] * 16})
    assert (listed.sliding_window, listed.sliding_layers) == (4096, 16)


def test_qwen2_window_needs_use_sliding_window_and_starts_at_max_window_layers():
    spec = parse(QWEN25_72B)  # use_sliding_window false: Qwen2Config drops the window
    assert (spec.sliding_window, spec.sliding_layers) == (0, 0)
    assert window_notes(spec) == []
    on = parse({**QWEN25_72B, "use_sliding_window": True, "sliding_window": 4096,
                "max_window_layers": 60})  # fmt: skip
    assert (on.sliding_window, on.sliding_layers) == (4096, 20)  # layers 60..79
    unsaid = parse({k: v for k, v in QWEN25_72B.items() if k != "use_sliding_window"})
    assert unsaid.sliding_layers == 0
    assert any("use_sliding_window" in note for note in unsaid.notes)


def test_gemma3_and_phi3_windows():
    gemma = parse(GEMMA3_12B)  # sliding_window_pattern 6: every sixth layer attends fully
    assert (gemma.sliding_window, gemma.sliding_layers) == (1024, 40)
    assert any("sliding_window_pattern 6" in note for note in gemma.notes)
    phi3 = {**MISTRAL_7B_V01, "model_type": "phi3", "sliding_window": 2047}
    assert (parse(phi3).sliding_window, parse(phi3).sliding_layers) == (2047, 32)


def test_a_window_that_spans_the_whole_context_windows_nothing():
    # Phi-4-mini-instruct (phi3) says sliding_window 262,144 over a 131,072-token context, and
    # Phi-3.5-MoE and Phi-3-medium-128k a window equal to theirs: no sequence vLLM admits outgrows
    # the window, so every layer holds the whole sequence. capnb windowed all 32 layers, and the
    # 0.19 accounting then held an 8,192-token prefill chunk back as a reserve beside windows no
    # sequence reaches: 59 sequences of 8,192 tokens on an H100 where full length held 60
    import capnb

    phi4_mini = {**MISTRAL_7B_V01, "model_type": "phi3", "hidden_size": 3072,
                 "intermediate_size": 8192, "num_attention_heads": 24, "num_key_value_heads": 8,
                 "max_position_embeddings": 131072, "sliding_window": 262144,
                 "tie_word_embeddings": True, "vocab_size": 200064}  # fmt: skip
    spec = parse(phi4_mini, name="phi4-mini")
    assert (spec.sliding_window, spec.sliding_layers) == (0, 0)
    assert any("262,144 not applied" in n and "131,072" in n for n in spec.notes)
    assert not any("sliding-window layers" in n for n in spec.notes)
    assert parse({**phi4_mini, "sliding_window": 131072}).sliding_layers == 0  # equal: the same
    assert parse({**phi4_mini, "sliding_window": 2047}).sliding_layers == 32  # Phi-3-mini-4k's
    held = [
        capnb.memory.max_concurrency(model=spec, gpu="H100-SXM", tensor_parallel=1, seq_len=8192,
                                     accounting=capnb.memory.accounting("vllm", vllm_version="0.19",
                                                                        hybrid_kv=hybrid))
        .max_concurrency.item()
        for hybrid in (False, True)
    ]  # fmt: skip
    assert held == [60, 60]


def test_qwen2_attention_biases_are_counted():
    spec = parse(QWEN25_72B)
    biases = 80 * (64 + 2 * 8) * 128  # q, k and v of every layer
    assert spec.parameters - parse({**QWEN25_72B, "model_type": "llama"}).parameters == biases
    assert spec.parameters == pytest.approx(72.7e9, rel=1e-3)  # model card: 72.7 B


@pytest.mark.parametrize(
    ("field", "value"),
    [("decoder_sparse_step", 0), ("moe_layer_freq", 0), ("mlp_only_layers", "0,1"),
     ("mlp_only_layers", [0, "1"])],
)  # fmt: skip
def test_moe_layer_fields_that_cannot_place_experts_are_errors_naming_the_field(field, value):
    """transformers divides by the step and tests each layer index in the list: 0 or a string is no
    layout (it was read as a step of 1 and as no dense layer, a silently different model)."""
    base = dict(load_model("Qwen3-30B-A3B").config)
    with pytest.raises(ConfigError, match=field):
        parse({**base, field: value})
    assert parse({**base, "mlp_only_layers": [0, 1]}).moe_layers == 46
    assert parse({**base, "decoder_sparse_step": 2}).moe_layers == 24


def test_beyond_context_counts_the_requests_longer_than_the_models_context():
    spec = load_model("Llama-3.1-8B")  # 131,072 tokens of context
    assert spec.beyond_context([1000, 131_072]) is None
    assert spec.beyond_context([1000, 131_073, 200_000, 10]) == (0.5, 200_000, 131_072)


def test_kv_heads_a_config_omits_are_said_in_the_notes():
    # a Llama-2-7B-style config without num_key_value_heads is planned as multi-head (LlamaConfig
    # sets it to num_attention_heads), 4x the KV bytes of 8 KV heads; the notes said nothing
    llama = {k: v for k, v in load_model("Llama-3.1-8B").config.items()}
    del llama["num_key_value_heads"]
    spec = parse(llama)
    assert spec.kv_heads == 32
    assert any("num_key_value_heads" in n and "32" in n and "LlamaConfig" in n for n in spec.notes)
    # a family with no KV-head field at all (multi-head by construction) assumes nothing
    assert not any("num_key_value_heads" in n for n in load_model("BLOOM-176B").notes)


def test_a_layer_list_that_is_not_evenly_spaced_is_not_abbreviated_as_if_it_were():
    # Gemma-3's windowed layers (all but 5, 11, 17, ...) were noted "windowed 0, 1, 2, ..., 33",
    # which reads as every layer from 0 to 33, beside "full attention 5, 11, 17, ..., 29"
    note = next(n for n in parse(GEMMA3_12B).notes if "layer_types" in n)  # 48 layers
    assert "windowed 0, 1, 2, ...," not in note
    assert "windowed 40 layers from 0 to 46" in note
    assert "full attention 5, 11, 17, ..., 47" in note  # evenly spaced: abbreviated


def _compressed_tensors(weights: dict, fmt: str, **extra):
    """Llama-3.1-8B's config with a compressed-tensors quantization of one group of ``weights``."""
    quant = {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        **extra,
    }
    return parse({**load_model("Llama-3.1-8B").config, "quantization_config": quant})


def test_compressed_tensors_group_scales_are_counted():
    # a w4a16 checkpoint (llm-compressor's pack-quantized format): per group of 128 weights a
    # 16-bit weight_scale, and a packed zero point only when the scheme is asymmetric
    def w4a16(symmetric):
        weights = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                   "symmetric": symmetric}  # fmt: skip
        return _compressed_tensors(weights, "pack-quantized", ignore=["lm_head"])

    sym, asym = w4a16(True), w4a16(False)
    assert sym.weight_dtype == "int4"
    assert sym.weight_scale_bytes == 2.0 / 128
    assert asym.weight_scale_bytes == 2.5 / 128
    kept = 2 * 128_256 * 4096  # embeddings and LM head stay in bf16
    quantized = sym.parameters - kept
    assert sym.weight_bytes() == pytest.approx(quantized * (0.5 + 2 / 128) + kept * 2)


def test_compressed_tensors_groups_that_a_degree_splits_are_refused():
    # vLLM's compressed-tensors w4a16/w8a16 (CompressedTensorsWNA16, Marlin kernels) refuses a
    # shard of a row-parallel weight that is not whole groups ("Weight input_size_per_partition =
    # 14784 is not divisible by group_size = 128"), as for AWQ/GPTQ; capnb planned Qwen2.5-72B's
    # 29,568-wide MLP in groups of 128 at TP 2, 4 and 8 (115.5, 57.75, 28.875 groups a GPU)
    def w4a16(intermediate, group_size=128):
        weights = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": group_size,
                   "symmetric": True}  # fmt: skip
        quant = {"quant_method": "compressed-tensors", "format": "pack-quantized",
                 "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
                 "ignore": ["lm_head"]}  # fmt: skip
        config = {**QWEN25_72B, "intermediate_size": intermediate, "quantization_config": quant}
        return parse(config, name="Qwen2.5-72B-w4a16")

    unpadded = w4a16(29568)
    assert unpadded.valid_tensor_parallel(1) is None
    for tp in (2, 4, 8):
        reason = unpadded.valid_tensor_parallel(tp)
        assert reason and "intermediate_size=29568" in reason, tp
        assert "quantization_config.config_groups.group_0.weights.group_size" in reason, reason
    with pytest.raises(InputError, match="14784 per GPU"):
        unpadded.check_tensor_parallel(2)
    assert [w4a16(29696).valid_tensor_parallel(tp) for tp in (1, 2, 4, 8)] == [None] * 4
    # a channel-wise scheme (one scale per output row) has no group to split
    channel = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}
    assert _compressed_tensors(channel, "pack-quantized").valid_tensor_parallel(8) is None


def test_compressed_tensors_fp8_blocks_that_a_degree_splits_are_refused():
    # llm-compressor's FP8_BLOCK scheme (strategy "block", block_structure [128, 128]):
    # vLLM's CompressedTensorsW8A8Fp8 runs validate_fp8_block_shape as the fp8 method does, but
    # capnb read no block from config_groups, so Qwen3-235B-A22B's 1,536-wide experts were valid
    # at TP 8 (192 a GPU, 1.5 blocks), which it refuses for quant_method "fp8"
    weights = {"num_bits": 8, "type": "float", "strategy": "block", "symmetric": True,
               "block_structure": [128, 128]}  # fmt: skip
    quant = {"quant_method": "compressed-tensors", "format": "float-quantized",
             "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}  # fmt: skip
    spec = parse({**load_model("Qwen3-235B-A22B").config, "quantization_config": quant})
    assert spec.weight_dtype == "fp8"
    assert spec.valid_tensor_parallel(4) is None
    reason = spec.valid_tensor_parallel(8)
    assert reason and "moe_intermediate_size=1536 is 192 per GPU" in reason, reason
    assert "quantization_config.config_groups.group_0.weights.block_structure" in reason, reason
    channel = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
    assert _compressed_tensors(channel, "float-quantized").weight_group == (0, 0)  # no block


def test_gemma3_context_is_not_scaled_again_and_takes_its_class_default():
    # vLLM's _get_and_verify_max_len skips the rope factor for gemma3 ("Gemma3's max_model_len
    # (128K) is already scaled by RoPE scaling"); capnb said 1,048,576 tokens (8 x 131,072)
    text = {"model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376,
            "intermediate_size": 21504, "num_attention_heads": 32, "num_key_value_heads": 16,
            "head_dim": 128, "sliding_window": 1024,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}  # fmt: skip
    assert parse({**text, "max_position_embeddings": 131_072}).context_tokens == 131_072
    # gemma-3-27b-it's text_config omits it: Gemma3TextConfig's default, not "not stated"
    multimodal = {"model_type": "gemma3", "torch_dtype": "bfloat16", "text_config": text}
    assert parse(multimodal).context_tokens == 131_072


def test_context_reads_transformers_v5_rope_parameters():
    # transformers 5 writes rope_parameters (rope_theta included) where 4.x wrote rope_scaling;
    # vLLM reads it the same way, one entry per layer type when nested. capnb ignored it: a
    # YaRN-extended Qwen2.5 saved by transformers 5 read as 32,768 tokens instead of 131,072
    base = {"max_position_embeddings": 32768, "model_type": "qwen2"}
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
            "rope_theta": 1e6}  # fmt: skip
    assert context_tokens({**base, "rope_parameters": yarn}) == 131_072
    nested = {"full_attention": yarn, "sliding_attention": {"rope_type": "default"}}
    assert context_tokens({**base, "rope_parameters": nested}) == 131_072
    plain = {"rope_type": "default", "rope_theta": 1e6}
    assert context_tokens({**base, "rope_parameters": plain}) == 32768


def test_context_reads_the_length_fields_vllm_reads_beside_max_position_embeddings():
    # vLLM's _get_and_verify_max_len takes the smallest of max_position_embeddings, n_positions,
    # max_seq_len, seq_length, max_target_positions, max_sequence_length, max_seq_length and
    # seq_len, and a model_max_length (Command-R's) over them. capnb read the first alone:
    # glm-4-9b-chat (chatglm, "seq_length": 131072) had no context, so a 200,000-token request
    # was never called beyond it
    glm4 = {"model_type": "chatglm", "num_layers": 40, "padded_vocab_size": 151552,
            "hidden_size": 4096, "ffn_hidden_size": 13696, "kv_channels": 128,
            "num_attention_heads": 32, "seq_length": 131072, "multi_query_attention": True,
            "multi_query_group_num": 2, "add_qkv_bias": True, "torch_dtype": "bfloat16"}  # fmt: skip
    spec = parse(glm4, name="glm-4-9b-chat")
    assert spec.context_tokens == 131_072
    assert spec.beyond_context([1000, 200_000]) == (0.5, 200_000, 131_072)
    assert context_tokens({"model_type": "mpt", "max_seq_len": 8192}) == 8192
    both = {"model_type": "llama", "max_position_embeddings": 8192, "seq_length": 4096}
    assert context_tokens(both) == 4096  # the smallest
    command_r = {"model_type": "cohere", "max_position_embeddings": 8192,
                 "model_max_length": 131072}  # fmt: skip
    assert context_tokens(command_r) == 131_072
    assert context_tokens({"model_type": "llama"}) is None  # none stated
    assert load_model("Llama-3.1-8B").context_tokens == 131_072


def test_llama4_chunked_attention_is_windowed_at_its_chunk():
    # Llama-4's RoPE layers attend within chunks of attention_chunk_size tokens; every 4th layer
    # (no RoPE) attends fully (transformers' Llama4TextConfig no_rope_layers). The field was
    # ignored without a word: a 32,768-token prompt's KV counted at full length on all 48 layers
    text = {**LLAMA4_TEXT, "num_local_experts": 16, "attention_chunk_size": 8192}
    spec = parse({"model_type": "llama4", "text_config": text, "torch_dtype": "bfloat16"})
    assert (spec.sliding_window, spec.sliding_layers) == (8192, 36)
    per_layer = 2 * 8 * 128 * 2  # K and V, 8 KV heads x 128 x 2 bytes
    assert spec.kv_bytes_per_sequence(32768) == per_layer * (12 * 32768 + 36 * 8192)
    assert any("attention_chunk_size" in note for note in spec.notes)
    listed = {**text, "no_rope_layers": [1, 0] * 24}  # every other layer without RoPE
    assert parse({**listed, "torch_dtype": "bfloat16"}).sliding_layers == 24
    unchunked = {k: v for k, v in text.items() if k != "attention_chunk_size"}
    assert parse({**unchunked, "torch_dtype": "bfloat16"}).sliding_layers == 0


def test_bitsandbytes_4bit_block_scales_are_counted():
    # bitsandbytes' 4-bit weights (nf4/fp4) carry an fp32 absmax per block of 64 weights; with
    # bnb_4bit_use_double_quant the absmax is 8-bit, plus an fp32 scale per 256 of them
    def bnb(double):
        quant = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                 "bnb_4bit_use_double_quant": double}  # fmt: skip
        return parse({**load_model("Llama-3.1-8B").config, "quantization_config": quant})

    assert bnb(False).weight_scale_bytes == 4 / 64
    assert bnb(True).weight_scale_bytes == (1 + 4 / 256) / 64
    kept = 2 * 128_256 * 4096
    single = bnb(False)
    assert single.weight_bytes() == pytest.approx(
        (single.parameters - kept) * (0.5 + 4 / 64) + 2 * kept
    )


def test_fp8_torch_dtype_without_quantization_config_is_planned_in_bf16_as_vllm_serves_it():
    # torch_dtype float8_e4m3fn and no quantization_config: vLLM's dtype 'auto' does not serve a
    # model in fp8 (CUDA's dtypes: bfloat16, float16, float32) and falls back to bfloat16, the KV
    # cache too. capnb planned the whole model in fp8, embeddings included: 8,030,261,248 bytes
    # and 65,536 KV bytes a token for Llama-3.1-8B; by hand in bf16: 8,030,261,248 x 2 bytes, and
    # 32 layers x K and V x 8 heads x 128 x 2 bytes = 131,072 a token
    config = {**load_model("Llama-3.1-8B").config, "torch_dtype": "float8_e4m3fn"}
    spec = parse(config)
    assert (spec.weight_dtype, spec.torch_dtype) == ("bf16", "bf16")
    assert spec.weight_bytes() == 8_030_261_248 * 2
    assert spec.kv_bytes_per_token() == 32 * 2 * 8 * 128 * 2 == 131_072
    assert any("float8_e4m3fn" in note and "quantization_config" in note for note in spec.notes)
    # with a quantization_config the weights are fp8 and the embeddings stay in bf16
    quant = parse({**config, "quantization_config": {"quant_method": "fp8"}})
    assert (quant.weight_dtype, quant.torch_dtype) == ("fp8", "bf16")
    assert quant.weight_bytes() == 9_080_934_400


def test_fp8_block_scales_are_counted():
    # FP8 checkpoints with weight_block_size [128, 128] (DeepSeek-V3, Qwen3-*-FP8) hold an fp32
    # weight_scale_inv per 128 x 128 block; they were not counted (Llama-3.1-8B: 9,080,934,400
    # bytes). By hand, block by block: each layer's q, k, v, o, gate, up and down projections
    # hold 1,024 + 256 + 256 + 1,024 + 3 x 3,584 = 13,312 blocks, 32 layers: 1,703,936 bytes
    import math

    quant = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    spec = parse({**load_model("Llama-3.1-8B").config, "quantization_config": quant})
    shapes = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096)]
    shapes += [(14336, 4096), (14336, 4096), (4096, 14336)]
    blocks = 32 * sum(math.ceil(r / 128) * math.ceil(c / 128) for r, c in shapes)
    assert blocks * 4 == 1_703_936
    unscaled = 9_080_934_400  # fp8 weights, bf16 embeddings and LM head
    # (capnb counts the norms' 266,240 weights as quantized too: 65 bytes more than the blocks)
    assert spec.weight_bytes() - unscaled == pytest.approx(blocks * 4, abs=100)
    assert spec.weight_scale_bytes == 4 / (128 * 128)
    per_tensor = parse({**spec.config, "quantization_config": {"quant_method": "fp8"}})
    assert per_tensor.weight_bytes() == unscaled  # one scale per tensor: none counted


def test_hybrid_linear_attention_configs_are_refused_naming_the_field():
    # Qwen3-Next keeps K and V on every 4th layer only (full_attention_interval); the others are
    # Gated DeltaNet layers with a fixed recurrent state. It was planned as 48 attention layers,
    # 4x its KV bytes per token, without a word
    qwen3_next = {
        "model_type": "qwen3_next", "num_hidden_layers": 48, "hidden_size": 2048,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "intermediate_size": 5120, "vocab_size": 151936, "num_experts": 512,
        "num_experts_per_tok": 10, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "full_attention_interval": 4,
        "linear_num_value_heads": 32, "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'full_attention_interval'"):
        parse(qwen3_next, source="x.json")
    kinds = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 12
    listed = {k: v for k, v in qwen3_next.items() if k != "full_attention_interval"}
    nested = {"model_type": "qwen3_5", "text_config": {**listed, "layer_types": kinds}}
    with pytest.raises(ConfigError, match="'layer_types'.*'linear_attention'"):
        parse(nested, source="x.json")
    # the attention kinds capnb plans pass
    kinds = ["chunked_attention", "full_attention"] * 24
    chunked = {**LLAMA4_TEXT, "num_local_experts": 16, "layer_types": kinds}
    assert parse({**chunked, "attention_chunk_size": 8192}).sliding_layers == 24


def test_nemotron_h_layers_block_type_is_refused_as_hybrid():
    # transformers 5 writes Nemotron-H's layout as 'layers_block_type' (mamba, attention, moe), not
    # 'hybrid_override_pattern': NVIDIA-Nemotron-3.5-Lightning-30B-A3B (6 attention layers of 52)
    # was planned as 52 attention layers with an MoE in each, 102.3 B parameters, without a word
    kinds = (["mamba", "moe"] * 2 + ["mamba", "attention", "moe"]) * 7 + ["mamba", "moe"] * 1
    assert len(kinds) == 51
    config = {
        "model_type": "nemotron_h", "num_hidden_layers": 51, "hidden_size": 2688,
        "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128,
        "intermediate_size": 1856, "moe_intermediate_size": 1856, "n_routed_experts": 128,
        "num_experts_per_tok": 6, "n_shared_experts": 1, "vocab_size": 131072,
        "layers_block_type": kinds, "mamba_num_heads": 64, "ssm_state_size": 128,
        "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'layers_block_type' lists 'mamba'"):
        parse(config, source="x.json")
    unlisted = {k: v for k, v in config.items() if k != "layers_block_type"}
    with pytest.raises(ConfigError, match=r"x\.json: field 'mamba_num_heads'"):
        parse(unlisted, source="x.json")


def test_hybrids_named_by_their_own_fields_are_refused():
    # Three published hybrids passed as attention-only models, with K and V on every layer:
    # MiniMax-Text-01 (attn_type_list: 0 a lightning-attention layer, 1 softmax; 10 of 80
    # attention) at 327,680 KV bytes a token instead of 40,960; RecurrentGemma-2B (block_types:
    # two recurrent blocks per attention block, 8 of 26) at 26,624 instead of 8,192; Kimi-Linear
    # (linear_attn_config: KDA layers beside MLA ones) was refused as lacking
    # 'num_experts_per_tok' (its config says 'num_experts_per_token'), which hid the reason
    minimax = {
        "model_type": "minimax_text_01", "num_hidden_layers": 80, "hidden_size": 6144,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 9216, "num_local_experts": 32, "num_experts_per_tok": 2,
        "vocab_size": 200064, "attn_type_list": ([0] * 7 + [1]) * 10, "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'attn_type_list' lists 0 layers"):
        parse(minimax, source="x.json")
    # MiniMax-M2 lists 1 (softmax attention) on every layer: attention only
    assert parse({**minimax, "attn_type_list": [1] * 80}).kv_bytes_per_token() == 327_680
    recurrent_gemma = {
        "model_type": "recurrent_gemma", "num_hidden_layers": 26, "hidden_size": 2560,
        "num_attention_heads": 10, "num_key_value_heads": 1, "head_dim": 256,
        "intermediate_size": 15360, "vocab_size": 256000, "attention_window_size": 2048,
        "block_types": ["recurrent", "recurrent", "attention"], "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'block_types' lists 'recurrent'"):
        parse(recurrent_gemma, source="x.json")
    kimi_linear = {
        "model_type": "kimi_linear", "num_hidden_layers": 27, "hidden_size": 2304,
        "num_attention_heads": 32, "num_key_value_heads": 32, "kv_lora_rank": 512,
        "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "num_experts": 256, "num_experts_per_token": 8, "moe_intermediate_size": 1024,
        "intermediate_size": 9216, "vocab_size": 163840, "torch_dtype": "bfloat16",
        "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "num_heads": 32},
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'linear_attn_config'"):
        parse(kimi_linear, source="x.json")


def test_attention_free_models_are_refused_as_such():
    # A state-space model keeps no KV cache at all. Mamba-Codestral-7B (mamba2, 'num_heads' 128
    # SSM heads of 'head_dim' 64) was refused for want of 'num_key_value_heads' with the advice to
    # add it as 128: done, it would be planned as 64 attention layers at 2,097,152 KV bytes a
    # token; falcon-mamba-7b was refused as missing 'num_attention_heads'
    codestral = {
        "model_type": "mamba2", "num_hidden_layers": 64, "hidden_size": 4096, "num_heads": 128,
        "head_dim": 64, "state_size": 128, "n_groups": 8, "expand": 2, "conv_kernel": 4,
        "vocab_size": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'state_size'.*no KV cache"):
        parse(codestral, source="x.json")
    with pytest.raises(ConfigError, match=r"field 'state_size'"):
        parse({**codestral, "num_key_value_heads": 128}, source="x.json")
    falcon_mamba = {
        "model_type": "falcon_mamba", "num_hidden_layers": 64, "hidden_size": 4096,
        "state_size": 16, "time_step_rank": 256, "vocab_size": 65024, "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'state_size'.*no KV cache"):
        parse(falcon_mamba, source="x.json")
    rwkv = {"model_type": "rwkv", "num_hidden_layers": 32, "hidden_size": 4096,
            "attention_hidden_size": 4096, "vocab_size": 50277}  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: model_type 'rwkv'.*no KV cache"):
        parse(rwkv, source="x.json")
    # RWKV-7 (fla-hub/rwkv7-1.5B-world: 'num_heads' 32 of 'head_dim' 64, time-mix heads with a
    # fixed state) was refused for want of 'num_key_value_heads' with the advice to add it as 32:
    # done, it was planned as 24 attention layers at 196,608 KV bytes a token
    rwkv7 = {
        "model_type": "rwkv7", "num_hidden_layers": 24, "hidden_size": 2048, "num_heads": 32,
        "head_dim": 64, "intermediate_size": 8192, "vocab_size": 65536, "a_low_rank_dim": 96,
        "torch_dtype": "float32",
    }  # fmt: skip
    for kind in ("rwkv5", "rwkv6", "rwkv7"):
        for config in ({**rwkv7, "model_type": kind}, {**rwkv7, "model_type": kind,
                                                       "num_key_value_heads": 32}):  # fmt: skip
            with pytest.raises(ConfigError, match=rf"x\.json: model_type '{kind}'.*no KV cache"):
                parse(config, source="x.json")


def test_cross_attention_layers_are_refused():
    # Llama-3.2-11B-Vision (mllama): 8 of its 40 text layers cross-attend to the image, holding
    # the image's K and V, not a text token's. It was planned with K and V on all 40 layers,
    # 163,840 KV bytes a token where its 32 self-attention layers hold 131,072, without a word
    text = {
        "model_type": "mllama_text_model", "num_hidden_layers": 40, "hidden_size": 4096,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
        "vocab_size": 128256, "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
        "tie_word_embeddings": False,
    }  # fmt: skip
    config = {"model_type": "mllama", "text_config": text, "torch_dtype": "bfloat16"}
    with pytest.raises(ConfigError, match=r"x\.json: field 'cross_attention_layers'.*8 of"):
        parse(config, source="x.json")
    # an empty list: no cross-attention layer
    empty = {**config, "text_config": {**text, "cross_attention_layers": []}}
    assert parse(empty).kv_bytes_per_token() == 163_840
    # without num_hidden_layers the message said "8 of None layers"
    bare = {k: v for k, v in text.items() if k != "num_hidden_layers"}
    with pytest.raises(ConfigError) as raised:
        parse({**config, "text_config": bare}, source="x.json")
    assert "None" not in str(raised.value) and "8 layers cross-attend" in str(raised.value)


def test_encoder_decoder_models_are_refused_as_such():
    # t5-11b was refused for want of 'num_key_value_heads', with the advice to add it as 128;
    # done, for want of 'intermediate_size': a chase of fields toward a decoder-only reading
    # (head_dim 1024 / 128 = 8 where its d_kv is 128) of a model with an encoder
    t5 = {
        "model_type": "t5", "d_model": 1024, "d_kv": 128, "d_ff": 65536, "num_heads": 128,
        "num_layers": 24, "num_decoder_layers": 24, "vocab_size": 32128,
        "is_encoder_decoder": True,
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'is_encoder_decoder' is true"):
        parse(t5, source="x.json")
    assert parse({**load_model("Llama-3.1-8B").config, "is_encoder_decoder": False}).layers == 32


def test_layers_with_a_head_shape_of_their_own_are_refused():
    # Gemma 4's full-attention layers have a head width and KV heads of their own
    # (global_head_dim 512, num_global_key_value_heads 4 beside head_dim 256 and 16 KV heads):
    # gemma-4-31B was planned with 983,040 KV bytes a token, every layer at head_dim 256 and 16
    # KV heads, without a word; the 26B-A4B was refused as needing 'num_experts_per_tok'
    text = {
        "model_type": "gemma4_text", "num_hidden_layers": 60, "hidden_size": 5376,
        "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 256,
        "global_head_dim": 512, "num_global_key_value_heads": 4, "intermediate_size": 21504,
        "vocab_size": 262144, "sliding_window": 1024,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10,
    }  # fmt: skip
    config = {"model_type": "gemma4", "text_config": text, "torch_dtype": "bfloat16"}
    with pytest.raises(ConfigError, match=r"x\.json: field 'global_head_dim' = 512"):
        parse(config, source="x.json")
    moe = {**text, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704}
    with pytest.raises(ConfigError, match=r"field 'global_head_dim'"):
        parse({**config, "text_config": moe}, source="x.json")
    # MiMo-V2 style: the windowed layers' own KV heads
    swa = {**load_model("Llama-3.1-8B").config, "swa_num_key_value_heads": 4}
    with pytest.raises(ConfigError, match=r"field 'swa_num_key_value_heads' = 4 beside"):
        parse(swa, source="x.json")
    # the same shape under both names is one shape
    assert parse({**swa, "swa_num_key_value_heads": 8}).kv_heads == 8


def test_layers_each_with_a_shape_of_their_own_are_refused():
    # Llama-3.3-Nemotron-Super-49B (nemotron-nas, DeciLM): 'block_configs' gives each layer its
    # own KV heads (attention.n_heads_in_group) and MLP width, and some layers no attention at
    # all (no_op). It was refused as lacking 'num_key_value_heads', with the advice to add it as
    # 64 (multi-head attention); done (and intermediate_size given), 80 layers were planned at 8
    # KV heads, 327,680 KV bytes a token, where this config's 40 attention layers hold 163,840
    attention = {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False}
    blocks = [{"attention": attention, "ffn": {"ffn_mult": 5.25, "no_op": False}}] * 40 + [
        {"attention": {"n_heads_in_group": None, "no_op": True}, "ffn": {"ffn_mult": 2.625}}
    ] * 40
    config = {
        "model_type": "nemotron-nas", "num_hidden_layers": 80, "hidden_size": 8192,
        "num_attention_heads": 64, "vocab_size": 128256, "block_configs": blocks,
        "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'block_configs'.*80 layers"):
        parse(config, source="x.json")
    given = {**config, "num_key_value_heads": 8, "intermediate_size": 28672}
    with pytest.raises(ConfigError, match=r"field 'block_configs'"):
        parse(given, source="x.json")
    # DeciLM-7B: KV heads per layer
    deci = {**load_model("Llama-3.1-8B").config, "model_type": "deci",
            "num_key_value_heads_per_layer": [4] * 20 + [2] * 12}  # fmt: skip
    with pytest.raises(ConfigError, match=r"field 'num_key_value_heads_per_layer'"):
        parse(deci, source="x.json")


def test_layers_sharing_another_layers_kv_are_refused():
    # gemma-3n-E4B: its last 15 of 35 layers reuse K and V of earlier layers
    # (num_kv_shared_layers), which vLLM allocates no cache for. With intermediate_size one
    # number, it was planned at 71,680 KV bytes a token, K and V on all 35 layers, where 20 hold
    # 40,960; Hunyuan's cross-layer attention (use_cla, cla_share_factor 2) shares one layer's
    # K and V between two, and was planned at twice its cache
    text = {
        "model_type": "gemma3n_text", "num_hidden_layers": 35, "hidden_size": 2048,
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
        "intermediate_size": 16384, "vocab_size": 262400, "sliding_window": 512,
        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
        "num_kv_shared_layers": 15,
    }  # fmt: skip
    config = {"model_type": "gemma3n", "text_config": text, "torch_dtype": "bfloat16"}
    with pytest.raises(ConfigError, match=r"x\.json: field 'num_kv_shared_layers' = 15"):
        parse(config, source="x.json")
    cla = {**load_model("Llama-3.1-8B").config, "use_cla": True, "cla_share_factor": 2}
    with pytest.raises(ConfigError, match=r"field 'cla_share_factor' = 2"):
        parse(cla, source="x.json")
    # no layer shares: planned as before
    assert parse({**config, "text_config": {**text, "num_kv_shared_layers": 0}}).layers == 35
    assert parse({**cla, "use_cla": False}).kv_bytes_per_token() == 131_072


def test_experts_in_fields_capnb_does_not_read_are_refused():
    # ERNIE-4.5-21B-A3B names its experts 'moe_num_experts' (64, 'moe_k' 6 of them, 2 shared):
    # it was planned as a dense model of 3.35 B parameters, 6.2 GiB of bf16 weights, where its
    # checkpoint holds about 21.8 B (40.7 GiB). DBRX nests them in 'ffn_config' and was refused
    # for want of num_key_value_heads, with the advice to add it as 48 (its kv_n_heads is 8)
    ernie = {
        "model_type": "ernie4_5_moe", "num_hidden_layers": 28, "hidden_size": 2560,
        "num_attention_heads": 20, "num_key_value_heads": 4, "head_dim": 128,
        "intermediate_size": 12288, "vocab_size": 103424, "tie_word_embeddings": True,
        "moe_num_experts": 64, "moe_k": 6, "moe_num_shared_experts": 2,
        "moe_layer_start_index": 1, "moe_intermediate_size": 1536, "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'moe_num_experts' = 64"):
        parse(ernie, source="x.json")
    dbrx = {
        "model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
        "vocab_size": 100352, "attn_config": {"kv_n_heads": 8},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4},
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.json: field 'ffn_config\.moe_num_experts' = 16"):
        parse(dbrx, source="x.json")
    # no experts there: read as before
    assert not parse({**ernie, "moe_num_experts": 0}).is_moe


def test_compressed_tensors_ignore_patterns_keep_those_modules_in_bf16():
    # Kimi-K2-Thinking and Kimi-K2.5 quantize only their routed experts to int4: the config's
    # compressed-tensors 'ignore' keeps attention, the shared experts and the dense first layer's
    # MLP in bf16 ('re:' patterns). They were counted at int4: 580.7 GB of weights where the
    # checkpoint holds about 594 GB
    weights = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32,
               "symmetric": True}  # fmt: skip
    ignore = ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
              "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]  # fmt: skip
    quant = {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ignore,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
    }  # fmt: skip
    base = {k: v for k, v in load_model("Kimi-K2").config.items() if k != "quantization_config"}
    spec = parse({**base, "torch_dtype": "bfloat16", "quantization_config": quant})
    bf16 = parse({**base, "torch_dtype": "bfloat16"})
    h, expert = spec.hidden_size, 3 * spec.hidden_size * spec.moe_intermediate_size
    kept = 2 * spec.vocab_size * h + spec.layers * bf16._attention_parameters()
    kept += spec.moe_layers * (h * spec.experts + spec.shared_experts * expert)  # routers, shared
    kept += (spec.layers - spec.moe_layers) * 3 * h * spec.intermediate_size  # dense MLP
    assert spec.weight_bytes() == pytest.approx(
        (spec.parameters - kept) * (0.5 + 2 / 32) + 2 * kept
    )
    assert spec.weight_bytes() / 1e9 == pytest.approx(594.0, abs=1.0)
    # a plain name (no 're:') is matched whole, as compressed-tensors matches it: lm_head only
    plain = parse({**base, "quantization_config": {**quant, "ignore": ["lm_head"]}})
    assert plain.weight_bytes() < spec.weight_bytes() - 10e9


def test_compressed_tensors_nvfp4_scales_are_counted():
    # NVFP4 (llm-compressor's nvfp4-pack-quantized, strategy tensor_group): an fp8 scale per
    # 16 weights, 1/16 byte a weight (12.5 % of the 4-bit weights), was not counted
    weights = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
               "symmetric": True}  # fmt: skip
    spec = _compressed_tensors(weights, "nvfp4-pack-quantized")
    assert spec.weight_dtype == "int4"
    assert spec.weight_scale_bytes == 1 / 16


def _hybrid_gain_reference(kinds, window, tokens, block=16):
    """vLLM 0.10's hybrid KV grouping, layer by layer: sequences held over a full-length cache."""
    by_kind = {}
    for i, kind in enumerate(kinds):
        by_kind.setdefault(kind, []).append(i)
    counts = [len(v) for v in by_kind.values()]
    size = min(counts)
    if max(counts) < 1.5 * size:
        size = max(counts)
    groups = []  # (kind, its layers); the last group of a kind padded to `size`
    for kind, layers in by_kind.items():
        for start in range(0, len(layers), size):
            groups.append((kind, layers[start : start + size]))
    assert sum(len(members) for _, members in groups) == len(kinds)
    pool_blocks = 1_000_000 / size  # per-layer pages: the pool is shared by `size` layers a block
    span = -(-tokens // block)
    need = sum(span if kind == "full" else min(span, -(-window // block) + 1) for kind, _ in groups)
    full_length = 1_000_000 / len(kinds) / span  # every layer holds every token
    return (pool_blocks / need) / full_length


@pytest.mark.parametrize(
    "layers, window, windowed, tokens",
    [(36, 128, 18, 8192), (62, 1024, 52, 8192), (62, 1024, 52, 500), (48, 8192, 36, 32768),
     (32, 4096, 32, 8192), (25, 128, 12, 4096), (30, 512, 20, 2048)],
)  # fmt: skip
def test_hybrid_kv_gain_follows_vllms_grouping_layer_by_layer(layers, window, windowed, tokens):
    from capnb.data.modelspec import hybrid_kv_gain

    kinds = ["sliding"] * windowed + ["full"] * (layers - windowed)
    expected = _hybrid_gain_reference(kinds, window, tokens)
    assert hybrid_kv_gain(layers, window, windowed, tokens) == pytest.approx(expected, rel=1e-12)


def test_a_windowed_model_says_which_counts_keep_its_window():
    # gpt-oss: 18 of 36 layers attend over 128 tokens; vLLM 0.10 on keeps only the window, and so
    # do capnb's 0.10 and 0.19 vllm accountings and the vllm-v1 engine (the note said every count
    # held them at full length, a lower bound)
    spec = load_model("gpt-oss-120b")
    note = next(n for n in spec.notes if "sliding-window layers" in n)
    assert "18 sliding-window layers (window 128 tokens) keep only their window" in note
    assert "(vllm_version '0.10' or '0.19') and the vllm-v1 engine" in note and "about 2x" in note
    assert "lower bound" not in note and "hybrid_kv=False" in note
    # Llama 4's chunked layers: only the 0.19 bucket keeps a chunk (vLLM 0.10.1-0.12 turn it off)
    scout = parse({"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
                   "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                   "intermediate_size": 8192, "attention_chunk_size": 8192, "vocab_size": 202048,
                   "num_local_experts": 16, "num_experts_per_tok": 1},
                  name="scout")  # fmt: skip
    note = next(n for n in scout.notes if "chunked-attention layers" in n)
    assert (
        "keep only their chunk in capnb.memory's vllm accounting with vllm_version '0.19'," in note
    )
    assert "vllm_version '0.10' and the vllm-v1 engine" in note and "32,768 tokens" in note
    assert not any("sliding-window layers" in n for n in load_model("Llama-3.1-8B").notes)


def test_modelopt_fp8_and_nvfp4_checkpoints_are_read():
    # NVIDIA's ModelOpt checkpoints (quant_method "modelopt", quant_algo "FP8" or "NVFP4") were
    # refused: "no weight width capnb can read". FP8: one byte a weight, per-tensor scales; NVFP4:
    # half a byte and an fp8 scale per group of 16; lm_head (and embeddings) stay in bf16
    base = dict(load_model("Llama-3.1-8B").config)
    kept = 2 * 128_256 * 4096

    def modelopt(algo, **extra):
        quant = {"quant_method": "modelopt", "quant_algo": algo, "ignore": ["lm_head"], **extra}
        return parse({**base, "quantization_config": quant})

    fp8 = modelopt("FP8", kv_cache_quant_algo=None)
    assert fp8.weight_dtype == "fp8"
    assert fp8.weight_bytes() == pytest.approx((fp8.parameters - kept) * 1.0 + 2 * kept)
    nvfp4 = modelopt("NVFP4", group_size=16)
    assert nvfp4.weight_dtype == "int4"
    assert nvfp4.weight_bytes() == pytest.approx(
        (nvfp4.parameters - kept) * (0.5 + 1 / 16) + 2 * kept
    )
    assert fp8.kv_bytes_per_token() == nvfp4.kv_bytes_per_token() == 131_072  # KV in bf16
    # attention the checkpoint leaves unquantized stays in bf16, as MXFP4's does
    kept_attention = modelopt(
        "NVFP4", group_size=16, ignore=["lm_head", "model.layers.*.self_attn*"]
    )
    assert kept_attention.unquantized_attention
    assert kept_attention.weight_bytes() > nvfp4.weight_bytes()
    with pytest.raises(ConfigError, match=r"quant_algo='W6A6'"):
        modelopt("W6A6")


def test_modelopt_quantization_in_hf_quant_config_json_is_read(tmp_path):
    # ModelOpt 0.29 and before wrote its quantization to hf_quant_config.json beside a config.json
    # without one (nvidia/Llama-3.1-70B-Instruct-FP8), which vLLM reads; capnb read the folder as
    # bf16: 141.1 GB of weights for a 70.6 B checkpoint of fp8 weights (72.7 GB)
    base = {k: v for k, v in load_model("Llama-3.1-70B").config.items()}
    kept = 2 * 128_256 * 8192
    folder = tmp_path / "Llama-3.1-70B-Instruct-FP8"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(base))
    legacy = {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}
    (folder / "hf_quant_config.json").write_text(
        json.dumps({"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": legacy})
    )
    for given in (folder, folder / "config.json"):
        spec = load_model(given)
        assert spec.weight_dtype == "fp8"
        assert spec.weight_bytes() == pytest.approx((spec.parameters - kept) + 2 * kept)
        assert spec.weight_bytes() / 1e9 == pytest.approx(72.66, abs=0.01)
        assert any("hf_quant_config.json" in note for note in spec.notes)
    # NVFP4's group size is read from the nested block too
    nvfp4 = {"quant_algo": "NVFP4", "group_size": 32, "exclude_modules": ["lm_head"]}
    (folder / "hf_quant_config.json").write_text(
        json.dumps({"producer": {"name": "modelopt"}, "quantization": nvfp4})
    )
    spec = load_model(folder)
    assert (spec.weight_dtype, spec.weight_scale_bytes) == ("int4", 1 / 32)
    # a config.json of its own wins over the legacy file, as in vLLM
    (folder / "config.json").write_text(
        json.dumps({**base, "quantization_config": {"quant_method": "fp8"}})
    )
    assert load_model(folder).weight_dtype == "fp8"
    # ModelOpt 0.31 on writes it inline, naming the producer, not always a quant_method
    inline = {"producer": {"name": "modelopt", "version": "0.31.0"}, "quant_algo": "FP8"}
    assert parse({**base, "quantization_config": inline}).weight_dtype == "fp8"


def test_the_hybrid_gain_note_is_stated_within_the_models_context():
    # found with a Phi-3-mini-4k config (a 4,096-token context, every layer windowed at 2,047):
    # its note said vLLM's hybrid manager "holds about 4x the sequences at 8,192 tokens", a length
    # it cannot serve; at its own 4,096 tokens the gain is 256 / 129 blocks, about 2x
    phi3 = {
        "model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "vocab_size": 32064, "max_position_embeddings": 4096, "sliding_window": 2047,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }  # fmt: skip
    note = next(n for n in parse(phi3).notes if "sliding-window" in n)
    assert (
        "about 2x the sequences of a full-length cache at 4,096 tokens (the model's context)"
        in (note)
    ), note
    longer = parse({**phi3, "max_position_embeddings": 131072}).notes
    assert any(
        "about 4x the sequences of a full-length cache at 8,192 tokens)" in n for n in longer
    )


def test_starcoder2_mlp_is_ungated():
    # transformers' Starcoder2MLP is c_fc then c_proj (no gate): a StarCoder2-3B config was
    # counted with a gated MLP, 4.16 B parameters for a 3.03 B model (15B: 21.7 B for about 16)
    starcoder2_3b = {
        "model_type": "starcoder2", "hidden_size": 3072, "intermediate_size": 12288,
        "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,
        "vocab_size": 49152, "max_position_embeddings": 16384, "sliding_window": 4096,
        "use_bias": True, "torch_dtype": "bfloat16",
    }  # fmt: skip
    spec = parse(starcoder2_3b)
    assert not spec.gated_mlp
    assert spec.parameters == pytest.approx(3.03e9, rel=0.02)
    # the same for Phi-2 (PhiMLP fc1, fc2: 3.62 B counted for 2.78 B) and Nemotron-Mini-4B
    # (NemotronMLP up_proj, down_proj: 5.1 B for 4.19 B)
    phi2 = {
        "model_type": "phi", "hidden_size": 2560, "intermediate_size": 10240,
        "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 51200,
        "tie_word_embeddings": False, "torch_dtype": "float16",
    }  # fmt: skip
    assert parse(phi2).parameters == pytest.approx(2.78e9, rel=0.02)
    nemotron_mini = {
        "model_type": "nemotron", "hidden_size": 3072, "intermediate_size": 9216,
        "num_hidden_layers": 32, "num_attention_heads": 24, "num_key_value_heads": 8,
        "head_dim": 128, "vocab_size": 256000, "torch_dtype": "bfloat16",
    }  # fmt: skip
    assert parse(nemotron_mini).parameters == pytest.approx(4.19e9, rel=0.02)


def test_the_flop_counted_per_token_leaves_out_the_embedding_lookup():
    # OpenAI's model cards count the LM head but not the input embedding as active:
    # gpt-oss-120b 5.13 B, gpt-oss-20b 3.61 B active parameters
    for name, active in (("gpt-oss-120b", 5.13e9), ("gpt-oss-20b", 3.61e9)):
        spec = load_model(name)
        assert spec.layer_parameters + spec.head_parameters == pytest.approx(active, rel=0.005)
        assert spec.head_parameters == spec.vocab_size * spec.hidden_size == 201_088 * 2_880
    # Llama-3.1-8B: untied, 128,256 x 4,096 in each of the two tables
    llama = load_model("Llama-3.1-8B")
    assert llama.active_parameters - llama.layer_parameters == 2 * 128_256 * 4_096
    # a request of 1,000 prompt and 200 output tokens: its layers at 1,200 tokens, its head at 200
    assert llama.request_flop(1000, 200) == 2 * llama.layer_parameters * 1200 + 2 * (
        128_256 * 4_096 * 200
    )


def test_layer_parameters_are_qwens_non_embedding_parameters():
    # Qwen3's model cards give the parameters without the embedding table and the (untied) LM
    # head: Qwen3-8B 6.95 B of 8.2 B, Qwen3-14B 13.2 B of 14.8 B, Qwen3-32B 31.2 B of 32.8 B
    for name, total, non_embedding in (
        ("Qwen3-8B", 8.2e9, 6.95e9), ("Qwen3-14B", 14.8e9, 13.2e9), ("Qwen3-32B", 32.8e9, 31.2e9),
    ):  # fmt: skip
        spec = load_model(name)
        assert spec.parameters == pytest.approx(total, rel=0.01)
        assert spec.layer_parameters == pytest.approx(non_embedding, rel=0.005)


def test_tensor_parallel_that_splits_a_quantization_group_is_refused():
    # vLLM refuses a degree whose shard of a quantized weight's input is not whole groups
    # (AWQ/GPTQ group_size; FP8 weight_block_size): Qwen2.5-72B's 29,568-wide MLP splits its
    # 128-weight AWQ groups at TP 2 (14,784 = 115.5 groups), which is why the published AWQ
    # checkpoint pads it to 29,696; Qwen3-235B-A22B-FP8's 1,536-wide experts at TP 8 (192).
    qwen25 = {
        "model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568,
        "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
        "vocab_size": 152064, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128},
    }  # fmt: skip
    awq = parse(qwen25)
    assert awq.valid_tensor_parallel(1) is None
    for tp in (2, 4, 8):
        reason = awq.valid_tensor_parallel(tp)
        assert reason and "intermediate_size=29568" in reason and "group_size" in reason, tp
    with pytest.raises(InputError, match="14784 per GPU"):
        awq.check_tensor_parallel(2)
    padded = parse({**qwen25, "intermediate_size": 29696})
    assert [padded.valid_tensor_parallel(tp) for tp in (1, 2, 4, 8)] == [None] * 4
    base = load_model("Qwen3-235B-A22B").config
    fp8 = parse(
        {**base, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    )
    assert fp8.valid_tensor_parallel(4) is None
    reason = fp8.valid_tensor_parallel(8)
    assert reason and "moe_intermediate_size=1536" in reason and "weight_block_size" in reason
    assert load_model("Qwen3-235B-A22B").valid_tensor_parallel(8) is None  # bf16: no groups
    for name in ("DeepSeek-V3", "Kimi-K2"):
        assert load_model(name).valid_tensor_parallel(8) is None
    # 4-bit experts: vLLM's moe_wna16 halves the group until the shard holds whole ones
    awq_moe = parse(
        {**base, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    )
    assert awq_moe.valid_tensor_parallel(8) is None


OMNI_TEXT = {"model_type": "qwen2_5_omni_text", "hidden_size": 3584, "intermediate_size": 18944,
             "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
             "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": False,
             "sliding_window": 32768, "use_sliding_window": False, "max_window_layers": 28}  # fmt: skip


def test_a_window_the_config_turns_off_is_not_said_to_exist():
    # Qwen2.5-Omni's text config (use_sliding_window false) got the note "sliding_window 32,768
    # not applied: capnb does not know which layers a model_type 'qwen2_5_omni_text' model
    # windows", as if a window were there to place; transformers' Qwen2_5OmniTextConfig sets the
    # window to None unless use_sliding_window, as Qwen2's does
    omni = parse({"model_type": "qwen2_5_omni", "torch_dtype": "bfloat16",
                  "thinker_config": {"model_type": "qwen2_5_omni_thinker",
                                     "text_config": OMNI_TEXT}})  # fmt: skip
    assert not any("sliding_window" in note for note in omni.notes), omni.notes
    assert omni.sliding_layers == 0
    on = parse(
        {**OMNI_TEXT, "use_sliding_window": True, "max_window_layers": 20, "sliding_window": 4096}
    )
    assert (on.sliding_window, on.sliding_layers) == (4096, 8)  # layers 20-27
    # a type capnb has no rule for, whose config turns the window off: no window, no note
    other = parse({**OMNI_TEXT, "model_type": "my_qwen_like"})
    assert other.sliding_layers == 0
    assert not any("sliding_window" in note for note in other.notes), other.notes
    for qwen in ("qwen2", "qwen2_5_vl_text"):  # Qwen2/Qwen2.5 configs with the window off
        assert not any(
            "sliding_window" in n for n in parse({**OMNI_TEXT, "model_type": qwen}).notes
        )


def test_qwen2_5_omni_text_counts_its_q_k_v_biases():
    # Qwen2.5-Omni's thinker attention (Qwen2_5OmniAttention) has nn.Linear(..., bias=True) q/k/v
    # projections, as Qwen2.5-7B's: 28 x (28 + 2 x 4) x 128 = 129,024 biases were not counted
    # (7,615,487,488 text parameters); Qwen2.5-7B's published total is 7,615,616,512
    omni = parse({"model_type": "qwen2_5_omni", "torch_dtype": "bfloat16",
                  "thinker_config": {"model_type": "qwen2_5_omni_thinker",
                                     "text_config": OMNI_TEXT}})  # fmt: skip
    assert omni.qkv_bias
    assert (
        omni.parameters == 7_615_616_512 == parse({**OMNI_TEXT, "model_type": "qwen2"}).parameters
    )


def _llama_8b_kept_by(quant, key, modules):
    base = {k: v for k, v in load_model("Llama-3.1-8B").config.items()}
    return parse({**base, "quantization_config": {**quant, key: modules}})


def test_fp8_modules_kept_in_bf16_are_counted_layer_by_layer():
    # An FP8 checkpoint keeping lm_head, layers 0 and 1's MLPs and layer 31's attention in bf16
    # (quant_method 'fp8': transformers writes 'modules_to_not_convert', vLLM reads it or
    # 'ignored_layers'): capnb counted them at 1 byte a parameter, 9.08 GB where the checkpoint
    # holds 9.48 GB; a compressed-tensors 'ignore' naming the same layers kept every layer's MLP
    # in bf16 instead, 14.72 GB
    h, layers, inter, vocab, kv = 4096, 32, 14_336, 128_256, 8 * 128
    attention, mlp = 2 * h * h + 2 * h * kv, 3 * h * inter
    bf16 = 2 * vocab * h + 2 * h * layers + h + 2 * mlp + attention  # embeddings, norms, kept
    fp8 = layers * (attention + mlp) - 2 * mlp - attention
    checkpoint = 2 * bf16 + fp8 + fp8 * 4 // (128 * 128)  # 9.477 GB, with fp32 block scales
    # (capnb counts the norms, 0.27 MB, at 1 byte: rel 1e-4)
    fp8_quant = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    kept = ["lm_head", "model.layers.0.mlp", "model.layers.1.mlp", "model.layers.31.self_attn"]
    for key in ("modules_to_not_convert", "ignored_layers"):
        spec = _llama_8b_kept_by(fp8_quant, key, kept)
        assert spec.weight_bytes() == pytest.approx(checkpoint, rel=1e-4), key
    weights = {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}
    ct = {"quant_method": "compressed-tensors",
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}  # fmt: skip
    ignore = ["lm_head", r"re:model\.layers\.[01]\.mlp\..*", r"re:model\.layers\.31\.self_attn\..*"]
    spec = _llama_8b_kept_by(ct, "ignore", ignore)
    assert spec.weight_bytes() == pytest.approx(checkpoint, rel=1e-4)
    # a glob over every layer (gpt-oss's and ModelOpt's) keeps every layer's attention
    every = _llama_8b_kept_by(fp8_quant, "modules_to_not_convert", ["model.layers.*.self_attn"])
    assert every.weight_bytes() == pytest.approx(checkpoint - 2 * mlp + 31 * attention, rel=1e-4)

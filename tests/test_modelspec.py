"""The model spec against published facts, and its errors on bad configs."""

import json

import pytest

from capnb.data import list_models, load_model
from capnb.errors import ConfigError, InputError, UnknownNameError
from capnb.modelspec import dtype_bytes, parse

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
}


@pytest.mark.parametrize(("model", "published"), PUBLISHED_PARAMETERS.items())
def test_parameter_count_within_two_percent_of_published(model, published):
    assert load_model(model).parameters == pytest.approx(published, rel=0.02)


def test_active_parameters_of_moe_models_match_published():
    assert load_model("Mixtral-8x7B").active_parameters == pytest.approx(12.9e9, rel=0.02)
    assert load_model("DeepSeek-V3").active_parameters == pytest.approx(37e9, rel=0.02)
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

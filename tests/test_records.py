"""The records of settings that travel together: EngineSettings and Deployment (SLA: test_cli)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import capnb
from capnb import capacity, latency, memory
from capnb.errors import CapnbError, InputError
from capnb.latency import _engines
from capnb.records import Deployment, EngineSettings


def test_the_records_are_exported_where_they_are_used():
    for module in (capnb, capacity, latency):
        assert module.EngineSettings is EngineSettings
    for module in (capnb, capacity, latency, memory):
        assert module.Deployment is Deployment
    assert capnb.SLA is capnb.records.SLA


def test_engine_settings_are_frozen_and_none_means_the_engines_default():
    s = EngineSettings("SGLang", max_num_seqs=64)
    assert s.engine == "sglang" and s.policy is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.max_num_seqs = 8
    small = s.resolve(gpu="L4", gpu_memory_bytes=24e9, kv_tokens=10**5)
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (64, 2048)  # given, SGLang's
    assert small.policy == "prefill_first" and small.chunked_prefill is True
    assert small.source.endswith("given: max_num_seqs")
    # numbers as run files and numpy give them are whole numbers too
    assert EngineSettings(max_num_seqs=np.int64(8), max_model_len=4096.0).max_model_len == 4096


@pytest.mark.parametrize(
    ("engine", "gpu", "want"),
    [("vllm-v1", "H100-SXM", ("mixed", True, 1024, 8192)),
     ("vllm-v1", "A100-80GB", ("mixed", True, 256, 2048)),
     ("vllm-v1", "L4", ("mixed", True, 256, 2048)),
     ("tgi", "H100-SXM", ("prefill_first", False, 0, 4096)),
     ("trtllm", None, ("mixed", False, 256, 8192))],
)  # fmt: skip
def test_defaults_per_engine_and_gpu(engine, gpu, want):
    s = EngineSettings.defaults(engine, gpu=gpu)
    assert (s.policy, s.chunked_prefill, s.max_num_seqs, s.max_num_batched_tokens) == want
    assert s.block_size == 16


def test_the_record_and_the_run_flags_agree():
    """engine_settings (what a benchmark run's flags say) is the record resolved."""
    for engine, flags in [("vllm-v0", {"max_num_seqs": 128}), ("sglang", {"policy": "mixed"}),
                          ("lmdeploy", {"chunked_prefill": 0, "block_size": 64})]:  # fmt: skip
        by_flags = _engines.engine_settings(engine, gpu="H100-SXM", gpu_memory_bytes=80 * 2**30,
                                            max_model_len=4096, **flags)  # fmt: skip
        flags = {k: bool(v) if k == "chunked_prefill" else v for k, v in flags.items()}
        record = EngineSettings(engine, max_model_len=4096, **flags)
        assert record.resolve(gpu="H100-SXM", gpu_memory_bytes=80 * 2**30) == by_flags


@pytest.mark.parametrize(
    ("fields", "named"),
    [({"engine": "vllm"}, "engine = 'vllm' names no release"),
     ({"engine": "fastllm"}, "engine"),
     ({"policy": "fifo"}, "policy = 'fifo'"),
     ({"chunked_prefill": 1}, "chunked_prefill = 1"),
     ({"max_num_seqs": -1}, "max_num_seqs = -1"),
     ({"max_num_batched_tokens": -1}, "max_num_batched_tokens = -1"),
     ({"max_num_batched_tokens": 512.5}, "max_num_batched_tokens = 512.5"),
     ({"block_size": True}, "block_size = True"),
     ({"max_model_len": "long"}, "max_model_len = 'long'")],
)  # fmt: skip
def test_engine_settings_errors_name_the_field(fields, named):
    with pytest.raises(InputError, match=named):
        EngineSettings(**fields)


def test_a_deployment_resolves_catalog_names():
    d = Deployment("Llama-3.1-70B", "h100-sxm", 4, weight_dtype="fp8", kv_dtype="fp8")
    assert d.gpu == "H100-SXM" and d.spec.name == "Llama-3.1-70B"
    assert d.at(8).tensor_parallel == 8 and d.at(8).kv_dtype == "fp8"
    assert d == Deployment("Llama-3.1-70B", "H100-SXM", 4, weight_dtype="fp8", kv_dtype="fp8")
    assert str(d) == "Llama-3.1-70B on 4 x H100-SXM"


@pytest.mark.parametrize(
    ("fields", "named"),
    [({"model": "no-such-model"}, "unknown model 'no-such-model'"),
     ({"gpu": "Z900"}, "unknown GPU 'Z900'"),
     ({"gpu": ["H100-SXM"]}, "deployment: gpu"),
     ({"tensor_parallel": 0}, "deployment: tensor_parallel = 0"),
     ({"tensor_parallel": 2.0}, "deployment: tensor_parallel = 2.0"),
     ({"tensor_parallel": 3}, "deployment: tensor_parallel = 3"),
     ({"weight_dtype": "fp7"}, "deployment: weight_dtype"),
     ({"kv_dtype": "int3"}, "deployment: kv_dtype")],
)  # fmt: skip
def test_deployment_errors_name_the_field(fields, named):
    args = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "tensor_parallel": 1, **fields}
    with pytest.raises(CapnbError, match=named):  # an unknown name: UnknownNameError
        Deployment(**args)


def test_memory_takes_a_deployment_for_its_five_arguments():
    d = Deployment("Llama-3.1-70B", "H100-SXM", 4, kv_dtype="fp8")
    by_record = memory.max_concurrency(deployment=d, seq_len=8192)
    by_name = memory.max_concurrency(model="Llama-3.1-70B", gpu="H100-SXM", tensor_parallel=4,
                                     kv_dtype="fp8", seq_len=8192)  # fmt: skip
    assert by_record.identical(by_name)
    with pytest.raises(InputError, match="deployment: give the deployment or gpu, not both"):
        memory.max_concurrency(deployment=d, gpu="H200", seq_len=8192)
    with pytest.raises(InputError, match="deployment: expected a capnb.records.Deployment"):
        memory.sweep(deployment="Llama-3.1-8B", concurrency=1, seq_len=1024)


def test_the_engine_takes_the_records_only():
    w = latency.workload(prompt_tokens=[100], output_tokens=[10])
    with pytest.raises(InputError, match="deployment: expected a capnb.records.Deployment"):
        latency.engine("Llama-3.1-8B", w, concurrency=[1])
    with pytest.raises(InputError, match="settings: expected a capnb.records.EngineSettings"):
        latency.engine(Deployment("Llama-3.1-8B", "H100-SXM"), w, settings="vllm-v1")


def test_records_take_numpy_numbers_as_the_numbers_they_are():
    """A bound read from an array is a numpy number: ``SLA(ttft_s=np.float32(1.5))`` was refused
    with "expected seconds as a number", and ``Deployment(..., np.int64(2))`` (a degree from
    ``np.array([1, 2, 4])``) with "expected a positive whole number of GPUs"."""
    sla = capacity.SLA(ttft_s=np.float32(1.5), tpot_s=np.float64(0.06), e2e_s=np.int64(30),
                       quantile=np.float32(0.95))  # fmt: skip
    assert sla == capacity.SLA(
        ttft_s=1.5, tpot_s=0.06, e2e_s=30.0, quantile=float(np.float32(0.95))
    )
    assert type(sla.ttft_s) is float and type(sla.quantile) is float
    d = Deployment("Llama-3.1-8B", "H100-SXM", np.int64(2))
    assert d.tensor_parallel == 2 and type(d.tensor_parallel) is int
    assert d == Deployment("Llama-3.1-8B", "H100-SXM", 2)
    for bad in (np.bool_(True), True):
        with pytest.raises(InputError, match="sla: ttft_s"):
            capacity.SLA(ttft_s=bad)
        with pytest.raises(InputError, match="deployment: tensor_parallel"):
            Deployment("Llama-3.1-8B", "H100-SXM", bad)


def test_an_sla_bound_given_as_text_with_a_unit_says_the_seconds_to_write(tmp_path):
    # the config's tolerance_s = "1 min" says "write 60" (fe42138); [sla] ttft_s = "500 ms" said
    # only "expected seconds as a number (or none)", no word of the 0.5 s meant
    with pytest.raises(InputError, match=r"ttft_s = '500 ms': expected seconds as a number "
                       r"\(or none\), not text: write 0.5 for '500 ms'"):  # fmt: skip
        capacity.SLA(ttft_s="500 ms")
    path = tmp_path / "p.toml"
    path.write_text('[sla]\ntpot_s = "60ms"\n')
    with pytest.raises(CapnbError, match=r"tpot_s = '60ms': .*write 0.06 for '60ms'"):
        capnb.plan.load_config(path)
    with pytest.raises(InputError, match=r"= 'fast': expected seconds as a number \(or none\)$"):
        capacity.SLA(ttft_s="fast")


def test_vllm_v1_keeps_an_a100s_small_defaults_whatever_the_spelling():
    # "a100-80gb" (80 GB, lower case) got the 70-GiB-and-over defaults (1,024 and 8,192) that
    # vLLM's get_batch_defaults gives every large GPU but an A100
    for gpu in ("A100-80GB", "a100-80gb"):
        s = EngineSettings("vllm-v1").resolve(gpu=gpu, gpu_memory_bytes=80e9)
        assert (s.max_num_seqs, s.max_num_batched_tokens) == (256, 2048), gpu

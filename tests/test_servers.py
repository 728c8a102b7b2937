"""A plan on another serving engine: its latencies, its benchmark commands, its pods.

``[serving] engine`` names the engine the engine model simulates (its scheduling defaults and
fitted overheads); the plan's commands and manifests then start that engine with its own flags,
and KEDA reads its own request counter.
"""

from __future__ import annotations

import warnings

import pytest
from test_plan import SMALL

from capnb import plan as planning
from capnb.errors import ConfigError
from capnb.plan import SERVERS, PolicyChoice, manifests

#: A small engine plan: one GPU, one degree, no held-out choice (what the engine changes is the
#: latency and the commands, not the policy's selection).
ENGINE_PLAN = dict(SMALL, trials=50, backtest_days=0, gpus=("H100-SXM",), tensor_parallel=(1,),
                   latency="engine", demand_scale=0.01, model="Qwen3-8B")  # fmt: skip


def _build(**changes):
    with warnings.catch_warnings():  # the plan's own checks
        warnings.simplefilter("ignore", planning.PlanWarning)
        return planning.build(planning.read_config(dict(ENGINE_PLAN, **changes)))


@pytest.fixture(scope="module")
def two_engines():
    return _build(), _build(engine="SGLang")


def test_the_engine_is_named_as_its_id_and_an_unknown_one_is_refused():
    assert planning.read_config(dict(ENGINE_PLAN, engine="TensorRT-LLM")).serving.engine == "trtllm"
    assert planning.read_config(dict(ENGINE_PLAN, engine="vLLM")).serving.engine == "vllm-v1"
    with pytest.raises(ConfigError, match=r"engine.*'llama.cpp' is not one of"):
        planning.read_config(dict(ENGINE_PLAN, engine="llama.cpp"))
    # LMDeploy exports no request counter: the plan's KEDA object could not scale on anything
    with pytest.raises(ConfigError, match="engine = 'lmdeploy': its server exports no Prometheus"):
        planning.read_config(dict(ENGINE_PLAN, engine="lmdeploy"))


def test_an_sglang_plan_is_priced_commanded_and_deployed_as_sglang(two_engines):
    vllm, sglang = two_engines
    a, b = planning.answer(vllm), planning.answer(sglang)
    assert (a.engine, b.engine) == ("vllm-v1", "sglang")
    # the engine model ran SGLang's scheduling and fitted overheads: another safe rate
    assert a.per_instance_qps > 0 and b.per_instance_qps > 0
    assert a.per_instance_qps != b.per_instance_qps
    assert "the serving-engine model of SGLang" in b.inputs
    # its KV cache is sized as vLLM's, and the inputs line says so
    assert "for SGLang too (capnb sizes every engine's KV cache with vLLM's" in b.inputs
    assert "for vLLM" not in a.inputs
    assert "the serving-engine model of vLLM (V1" in a.inputs
    # the commands that settle the latency start SGLang and point vLLM's client at it
    if b.settle_commands:
        assert "python3 -m sglang.launch_server --model-path $MODEL --tp 1 --port 8000" in (
            b.settle_commands
        )
        assert "vllm bench serve --backend openai --model $MODEL" in b.settle_commands
    # the pods run SGLang's image, listening on every interface; KEDA reads its counter
    out = manifests(planning.policy_choice(sglang))
    container = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "lmsysorg/sglang"
    assert container["command"] == ["python3", "-m", "sglang.launch_server"]
    assert container["args"][:4] == ["--model-path", "Qwen3-8B", "--tp", "1"]
    assert container["args"][-3:] == ["--host", "0.0.0.0", "--enable-metrics"]
    query = out.documents["keda"][0]["spec"]["triggers"][0]["metadata"]["query"]
    assert query.startswith("sum(rate(sglang:num_requests_total{")
    assert any("sglang:num_requests_total, requests that finished" in n for n in out.notes["keda"])
    # SGLang exports no metrics without --enable-metrics: KEDA's query would return no data
    assert any(
        "sglang:num_requests_total only with --enable-metrics" in n for n in out.notes["keda"]
    )


def test_a_plan_on_auto_latency_names_the_engine_it_simulated():
    # capnb plan --engine vllm-v0 (latency 'auto', the default) said "latency: per bound, the
    # model its held-out error prefers: TTFT engine, TPOT engine": which engine, nowhere
    inputs = planning.answer(_build(engine="vllm-v0", latency="auto")).inputs
    assert "TTFT engine, TPOT engine (the serving-engine model of vLLM (V0 engine" in inputs


def test_each_engines_benchmark_client_is_one_vllm_bench_serve_accepts():
    """``vllm bench serve --backend`` chooses a request format, not a server: its choices are
    vllm, openai, openai-chat (and audio, embedding and pooling APIs); 'sglang' or 'tgi' stops
    the settle loop at argparse's "invalid choice". SGLang, TGI, TensorRT-LLM and LMDeploy all
    serve OpenAI's /v1/completions."""
    for engine, server in SERVERS.items():
        assert server.backend in ("vllm", "openai"), engine


def test_each_engines_container_starts_its_server_with_the_plans_values():
    base = dict(policy="hpa", per_instance_qps=8.0, scale_up_threshold=0.7, cooldown_s=300.0,
                min_instances=1, max_instances=4, model="m", tensor_parallel=2,
                max_model_len=4096, max_num_seqs=300)  # fmt: skip
    expected = {  # (command, args): each engine's flags for the degree, context and running cap
        "vllm-v1": ("", "--model m --tensor-parallel-size 2 --max-model-len 4096 --max-num-seqs 300"),
        "tgi": ("", "--model-id m --num-shard 2 --max-total-tokens 4096 --max-input-tokens 4095 "
                    "--max-concurrent-requests 300 --port 8000"),
        "trtllm": ("trtllm-serve", "m --tp_size 2 --max_seq_len 4096 --max_batch_size 300 "
                                   "--port 8000 --host 0.0.0.0"),
    }  # fmt: skip
    for engine, (command, args) in expected.items():
        out = manifests(PolicyChoice(**base, engine=engine))
        container = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]
        assert container.get("command", []) == command.split(), engine
        assert container["args"] == args.split(), engine
        assert container["image"] == SERVERS[engine].image
        assert container["ports"] == [{"containerPort": 8000}]
    # TGI's router refuses (429) the requests above its limit, it does not queue them: the note
    # said 'or the requests above the default wait', as of vLLM
    seqs = [n for n in manifests(PolicyChoice(**base, engine="tgi")).notes["hpa"] if "300" in n]
    assert "refuses the requests above it (429)" in seqs[0] and " wait" not in seqs[0], seqs
    vllm = [n for n in manifests(PolicyChoice(**base)).notes["hpa"] if "300" in n]
    assert "the requests above the default wait" in vllm[0], vllm
    # TGI counts a request when it arrives: no note that the load reads low
    tgi = manifests(PolicyChoice(**base, engine="tgi"))
    assert (
        "tgi_request_count" in tgi.documents["keda"][0]["spec"]["triggers"][0]["metadata"]["query"]
    )
    assert not any("requests that finished" in n for n in tgi.notes["keda"])
    # TensorRT-LLM exports its counter only with return_perf_metrics, and at /prometheus/metrics
    trtllm = manifests(PolicyChoice(**base, engine="trtllm")).notes["keda"]
    assert any("trtllm_request_success_total only with return_perf_metrics: true" in n
               and "/prometheus/metrics" in n for n in trtllm)  # fmt: skip
    # LMDeploy's metrics are gauges: its counter must be given
    with pytest.raises(Exception, match="arrivals_counter: LMDeploy TurboMind exports no"):
        manifests(PolicyChoice(**base, engine="lmdeploy"))
    given = manifests(PolicyChoice(**base, engine="lmdeploy"), arrivals_counter="gw_requests_total")
    assert (
        "gw_requests_total"
        in given.documents["keda"][0]["spec"]["triggers"][0]["metadata"]["query"]
    )
    with pytest.raises(Exception, match="engine='vllm3' is not known"):
        PolicyChoice(**base, engine="vllm3")


def test_a_measured_curve_plan_names_the_engine_its_commands_and_pods_are_of():
    """TGI's measured curve: the latencies are the run's, the pods TGI's (not vLLM's)."""
    cfg = dict(SMALL, trials=50, backtest_days=0, latency="dstack-tgi-mi300x-short", engine="tgi",
               gpus=("MI300X",), tensor_parallel=(8,), model="Llama-3.1-405B",
               sla={"ttft_s": 600.0})  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = planning.build(planning.read_config(cfg))
    a = planning.answer(built)
    assert a.engine == "tgi"
    assert "engine: Hugging Face text-generation-inference (its serve commands and manifests" in (
        a.inputs
    )
    container = manifests(planning.policy_choice(built)).documents["knative"][0]["spec"][
        "template"
    ]["spec"]["containers"][0]
    # on MI300X: TGI's ROCm build, on the resource AMD's device plugin offers
    assert container["image"] == "ghcr.io/huggingface/text-generation-inference:latest-rocm"
    assert container["resources"] == {"limits": {"amd.com/gpu": 8}}
    assert container["args"][:4] == ["--model-id", "Llama-3.1-405B", "--num-shard", "8"]


def test_an_engine_that_computes_prompts_whole_names_the_setting_a_long_prompt_needs():
    """TGI at its default refuses a prompt past its step's 4,096 tokens: the plan names the knob."""
    with pytest.raises(planning.PlanError, match=r"set \[serving\] max_num_batched_tokens = \d+"):
        _build(engine="tgi", workload="azure-conv-2023")
    given = _build(engine="tgi", workload="azure-conv-2023", max_num_batched_tokens=16384)
    a = planning.answer(given)
    assert a.max_num_batched_tokens == 16384 and a.engine == "tgi"
    container = manifests(planning.policy_choice(given)).documents["knative"][0]["spec"][
        "template"
    ]["spec"]["containers"][0]
    assert "--max-batch-prefill-tokens" in container["args"]
    assert container["args"][container["args"].index("--max-batch-prefill-tokens") + 1] == "16384"


def test_vllm_v0_is_checked_at_the_models_context_as_the_engine_model_runs_it():
    """vLLM V0's step budget follows max_model_len (the model's context by default): past 32K it
    chunks prompts of 512, below it computes up to the context whole. The check resolved V0
    without the context, as 2,048 tokens unchunked, and refused Qwen3-8B (40,960-token context)
    on the Azure conversation workload: 'at most 2,048 tokens (its default)' for a 6,122-token
    prompt its engine model chunks."""
    a = planning.answer(_build(engine="vllm-v0", workload="azure-conv-2023"))
    assert a.engine == "vllm-v0" and a.safe_concurrency > 0


def test_an_unknown_engine_is_told_the_engines_a_plan_runs_on():
    """'llama.cpp' was 'not one of [lmdeploy, sglang, ...]', and lmdeploy, tried next, was then
    refused (no request counter for KEDA); from the command line that refusal named no source."""
    with pytest.raises(ConfigError) as unknown:
        planning.read_config(dict(ENGINE_PLAN, engine="llama.cpp"))
    assert "['sglang', 'tgi', 'trtllm', 'vllm-v0', 'vllm-v1']" in str(unknown.value)
    assert "lmdeploy" not in str(unknown.value)
    with pytest.raises(ConfigError) as refused:
        planning.read_config(None, overrides_from="command line", engine="LMDeploy")
    assert "command line: engine = 'LMDeploy': its server exports no" in str(refused.value)


def test_a_plan_json_built_on_a_relative_path_reads_it_from_any_folder(tmp_path, monkeypatch):
    """A plan built from Python on trace='rates.csv' (relative to the folder it ran in) wrote
    'rates.csv' into plan.json's config, so its settle command, run in the plan's folder, read
    reports/rates.csv, a file that is not there; the config now holds the path read."""
    from capnb import data

    series = data.load_rate_series("servegen-m-small")
    seconds = series.time.values.astype("datetime64[s]").astype("int64") + 1_700_000_000
    (tmp_path / "rates.csv").write_text("timestamp,qps\n" + "".join(
        f"{t},{q}\n" for t, q in zip(seconds, series.qps.values, strict=True) if q == q))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    built = _build(trace="rates.csv", trace_kind="rates", time_unit="s", latency="model")
    files = planning.export(built, tmp_path / "reports")
    monkeypatch.chdir(tmp_path / "reports")  # where the settle commands run
    again = planning.load_config(files["json"])
    assert again.traffic.trace == str(tmp_path / "rates.csv")


def test_tgi_is_told_the_longest_prompt_beside_the_longest_request():
    """TGI's --max-input-tokens defaults to min(its own KV cache, the context) - 1 (its launcher's
    reference), not to --max-total-tokens - 1, and its router refuses to start where it is at
    --max-total-tokens or above, or (computing prompts whole) above --max-batch-prefill-tokens:
    Mistral-Nemo on 1 x L40S ran --max-total-tokens 102064 --max-batch-prefill-tokens 16384 and
    left the input limit at TGI's default (102,063 or more: 'must be >= max_input_tokens')."""
    import xarray as xr

    from capnb.plan._closecall import benchmark_commands

    base = dict(policy="hpa", per_instance_qps=2.0, scale_up_threshold=0.7, cooldown_s=300.0,
                min_instances=1, max_instances=4, model="m", tensor_parallel=1,
                max_model_len=102064, engine="tgi")  # fmt: skip
    for step, longest in ((0, 102063), (16384, 16384)):
        out = manifests(PolicyChoice(**base, max_num_batched_tokens=step))
        args = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
        at = args.index("--max-input-tokens")
        assert (
            args[at + 1] == str(longest) and args[args.index("--max-total-tokens") + 1] == "102064"
        )
        assert f"--max-input-tokens {longest}" in out.notes["hpa"][0], out.notes["hpa"]
    # the benchmark's server too, and vLLM has no such flag (its prompt limit is the context's)
    kv = xr.DataArray([[30000]], coords={"gpu": ["L40S"], "tensor_parallel": [1]},
                      dims=("gpu", "tensor_parallel"))  # fmt: skip
    options = xr.Dataset({"safe_concurrency": kv * 0 + 50, "running_tokens": kv},
                         attrs={"engine": "tgi", "max_num_batched_tokens": 16384})  # fmt: skip
    text = benchmark_commands(options, "L40S", 1, "Qwen3-8B", 1000, 200)
    serve = next(line for line in text.splitlines() if line.startswith("text-generation-launcher"))
    assert "--max-total-tokens 30000 --max-input-tokens 16384 " in serve, serve
    vllm = manifests(PolicyChoice(**{**base, "engine": "vllm-v1"}))
    assert "--max-input-tokens" not in str(vllm.documents["knative"])


def test_tgis_benchmark_server_admits_every_concurrency_the_loop_runs():
    """TGI's router refuses (429) the requests above --max-concurrent-requests (128 by default)
    instead of queueing them: at a predicted safe concurrency of 100 the loop runs 50, 100 and
    200 at once, so the server it starts must admit 200, or a third of the top run fails."""
    import xarray as xr

    from capnb.plan._closecall import benchmark_commands

    safe = xr.DataArray([[100]], coords={"gpu": ["H100-SXM"], "tensor_parallel": [1]},
                        dims=("gpu", "tensor_parallel"))  # fmt: skip
    options = xr.Dataset({"safe_concurrency": safe}, attrs={"engine": "tgi"})
    text = benchmark_commands(options, "H100-SXM", 1, "Qwen3-8B", 1000, 200)
    assert "for c in 50 100 200;" in text
    serve = next(line for line in text.splitlines() if line.startswith("text-generation-launcher"))
    assert "--max-concurrent-requests 200" in serve
    # vLLM queues what it does not run: its serve command is left at its default
    vllm = benchmark_commands(options.assign_attrs(engine="vllm-v1"), "H100-SXM", 1, "Qwen3-8B",
                              1000, 200)  # fmt: skip
    assert "--max-num-seqs" not in vllm


def test_the_settle_commands_replan_on_this_plans_own_inputs(tmp_path):
    """The re-plan line read the bundled defaults: a plan on another model, trace or engine was
    settled on Llama-3.1-8B and vLLM. It now reads the plan's own plan.json. (On the analytic
    model, whose held-out error asks for a benchmark: since the block-scaled FP8 refit the engine
    model's on H100 is 23 %, under the 25 % past which the plan prints the commands.)"""
    sglang = _build(engine="SGLang", latency="model")
    files = planning.export(sglang, tmp_path)
    again = planning.load_config(files["json"])
    built_on = planning.read_config(dict(ENGINE_PLAN, engine="SGLang", latency="model"))
    assert again == built_on  # every setting, the engine and the model among them
    assert again.serving.engine == "sglang" and again.serving.model == "Qwen3-8B"
    line = planning.answer(sglang).settle_commands.split("\n")[3]
    assert line.startswith("capnb plan --config plan.json --gpus H100-SXM --tensor-parallel 1 ")
    # a JSON file capnb did not write is not read as a config
    other = tmp_path / "other.json"
    other.write_text('{"model": "Qwen3-8B"}')
    with pytest.raises(ConfigError, match="not a plan.json capnb wrote"):
        planning.load_config(other)


def test_pods_on_an_amd_gpu_ask_for_amd_gpus_and_run_the_engines_rocm_build():
    """A plan on MI300X exported a Knative Service asking for nvidia.com/gpu and running the CUDA
    images (vllm/vllm-openai, lmsysorg/sglang): on a ROCm cluster, whose device plugin offers
    amd.com/gpu, its pods stayed Pending, and a CUDA image would not have found the GPU."""
    base = dict(policy="hpa", per_instance_qps=8.0, scale_up_threshold=0.7, cooldown_s=300.0,
                min_instances=1, max_instances=4, model="m", tensor_parallel=8, gpu="MI300X")  # fmt: skip
    rocm = {
        "vllm-v1": "vllm/vllm-openai-rocm",
        "sglang": "lmsysorg/sglang:v0.5.5.post3-rocm700-mi30x",
        "tgi": "ghcr.io/huggingface/text-generation-inference:latest-rocm",
    }
    for engine, image in rocm.items():
        out = manifests(PolicyChoice(**base, engine=engine))
        container = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"] == {"limits": {"amd.com/gpu": 8}}, engine
        assert container["image"] == image, engine
        said = [n for n in out.notes["hpa"] if "amd.com/gpu" in n]
        assert said and "AMD" in said[0] and image in said[0], (engine, out.notes["hpa"])
    # an engine with no ROCm build capnb knows runs its own image, and the notes say so
    for engine in ("vllm-v0", "lmdeploy"):
        out = manifests(PolicyChoice(**base, engine=engine), arrivals_counter="gw_requests_total")
        container = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"] == {"limits": {"amd.com/gpu": 8}}, engine
        said = [n for n in out.notes["knative"] if "no ROCm build" in n]
        assert said and SERVERS[engine].image in said[0] and "image=" in said[0], engine
    given = manifests(PolicyChoice(**base, engine="lmdeploy"), arrivals_counter="gw_requests_total",
                      image="my/rocm-lmdeploy")  # fmt: skip
    assert not any("no ROCm build" in n for n in given.notes["knative"])
    # TensorRT-LLM runs on NVIDIA GPUs only
    with pytest.raises(Exception, match=r"engine='trtllm'.*NVIDIA GPUs only.*MI300X"):
        manifests(PolicyChoice(**base, engine="trtllm"))
    # a GPU named by an alias of the catalog is the same GPU
    out = manifests(PolicyChoice(**dict(base, gpu="MI300X 192GB")))
    container = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"amd.com/gpu": 8}}
    # an NVIDIA GPU's pods are as before
    out = manifests(PolicyChoice(**dict(base, gpu="H100-SXM")))
    container = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert container["image"] == "vllm/vllm-openai"
    assert not any("amd.com" in n for n in out.notes["knative"])


def test_a_plan_of_tensorrt_llm_on_an_amd_gpu_is_refused_when_read():
    """TensorRT-LLM runs on NVIDIA GPUs only, yet a config of engine = 'trtllm' on MI300X was read
    and planned: its latencies priced a server that cannot start there, and its export failed
    only at the end. The config is refused, naming the GPU and the engines that run on it."""
    with pytest.raises(ConfigError, match=r"engine = 'trtllm'.*NVIDIA GPUs only.*gpus\[1\] = "
                       r"'MI300X'.*AMD.*vllm-v1, sglang or tgi"):  # fmt: skip
        planning.read_config(dict(ENGINE_PLAN, engine="TensorRT-LLM", gpus=("H100-SXM", "MI300X")))
    assert planning.read_config(dict(ENGINE_PLAN, engine="sglang", gpus=("MI300X",)))
    assert planning.read_config(dict(ENGINE_PLAN, engine="trtllm", gpus=("H100-SXM",)))


def test_a_tensor_parallel_pod_mounts_shared_memory_for_its_gpus():
    """A pod of several GPUs got a container's 64 MiB /dev/shm, too little for NCCL between them."""
    base = dict(policy="hpa", per_instance_qps=8.0, scale_up_threshold=0.7, cooldown_s=300.0,
                min_instances=1, max_instances=4, model="m")  # fmt: skip
    for tp, mounted in ((1, False), (4, True)):
        out = manifests(PolicyChoice(**base, tensor_parallel=tp))
        pod = out.documents["knative"][0]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert ("volumeMounts" in container) == mounted and ("volumes" in pod) == mounted
        assert any("/dev/shm" in n for n in out.notes["knative"]) == mounted
        if mounted:
            assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
            assert pod["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "2Gi"}

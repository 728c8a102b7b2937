"""How each serving engine is started, on a host and in a container, and what it counts.

The plan's commands (the benchmark runs that settle a close call, the pods of the exported
manifests) start the engine the plan priced (``[serving] engine``). Each engine names the same
few settings with its own flags; the values are the plan's (tensor-parallel degree, the
longest request the KV cache holds, the requests one instance runs at once). Flags and images
from each engine's server command-line reference:

- vLLM: ``vllm serve MODEL`` (image ``vllm/vllm-openai``, whose entrypoint is the OpenAI server:
  ``--model MODEL``), ``--tensor-parallel-size``, ``--max-model-len``, ``--max-num-seqs``;
  Prometheus counter ``vllm:request_success_total`` (requests finished).
- SGLang: ``python3 -m sglang.launch_server --model-path MODEL`` (image ``lmsysorg/sglang``),
  ``--tp``, ``--context-length``, ``--max-running-requests``; counter
  ``sglang:num_requests_total`` (requests processed; only with ``--enable-metrics``, which its
  pods carry); it listens on 127.0.0.1 unless ``--host`` says otherwise.
- TGI: ``text-generation-launcher --model-id MODEL`` (image
  ``ghcr.io/huggingface/text-generation-inference``, whose entrypoint is the launcher),
  ``--num-shard``, ``--max-total-tokens``, ``--max-input-tokens`` (the longest prompt: its
  default, min(its own KV cache, the context) - 1, does not follow ``--max-total-tokens``, and
  the launcher refuses to start where it is not below it, or, computing prompts whole, above
  ``--max-batch-prefill-tokens``), ``--max-concurrent-requests`` (its router's limit,
  128 by default, above which it refuses requests with 429); counter ``tgi_request_count``
  (requests received).
- TensorRT-LLM: ``trtllm-serve MODEL`` (image ``nvcr.io/nvidia/tensorrt-llm/release``),
  ``--tp_size``, ``--max_seq_len``, ``--max_batch_size``; counter
  ``trtllm_request_success_total`` (requests finished; only with ``return_perf_metrics: true``
  in its ``--extra_llm_api_options`` file, served at ``/prometheus/metrics``); it listens on
  localhost unless ``--host`` says otherwise.
- LMDeploy: ``lmdeploy serve api_server MODEL`` (image ``openmmlab/lmdeploy``), ``--tp``,
  ``--session-len``, ``--max-batch-size``, ``--server-port``; its metrics are gauges (requests
  running, waiting), no counter of requests.

On AMD GPUs (the catalog's ``display_name`` starting "AMD") the pods ask for ``amd.com/gpu``, the
resource AMD's Kubernetes device plugin offers (NVIDIA's offers ``nvidia.com/gpu``), and run the
engine's ROCm build where it has one: vLLM's ``vllm/vllm-openai-rocm`` (vLLM's ROCm page: the same
OpenAI server as ``vllm/vllm-openai``), TGI's ``latest-rocm`` tag, and for SGLang a tag of
``lmsysorg/sglang`` built for ROCm and MI300X/MI325X (its ROCm builds are tagged per release, none
untagged: the one here is pinned, and the pods' notes say to pin the release measured).
TensorRT-LLM runs on NVIDIA GPUs only; capnb knows no ROCm image of vLLM 0.7.3 or of LMDeploy.

Every server listens on port 8000 here (vLLM's default, the port ``vllm bench serve`` and the
manifests' container port use; the others are told so).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import ENGINES, EngineSettings

__all__ = ["SERVERS", "Server", "server_of"]

#: The port every server command here listens on (vLLM's default).
PORT = 8000


@dataclass(frozen=True)
class Server:
    """One engine's server: its command on a host and in its image, and its flags.

    ``host`` is the command before the model on a host, ``model_flag`` the flag before the model
    there (empty: the model follows the command); ``image`` the serving image, ``entrypoint`` the
    container's command before its arguments (empty: the image's own) and ``container_model_flag``
    the model's flag in the container; ``tensor_parallel``, ``context``, ``running`` and ``port``
    the flags of the degree, the longest request, the requests run at once and the port (empty:
    the server's default is :data:`PORT`); ``step_tokens`` the flag of the tokens a step computes
    at most; ``prompt`` the flag of the longest prompt where the server's default does not follow
    the context flag (empty: it does), given with the context: one token under it, and no more
    than the step's tokens where those are given;
    ``counter`` the Prometheus counter of requests the server exports (empty: none), and
    ``counted_at_end`` whether it counts a request when it finishes (not when it arrives);
    ``bind`` the flag of the address it listens on where its default is the loopback only (a
    pod's server must listen on every interface); ``metrics`` the flag without which the server
    exports no Prometheus metrics (a pod's server carries it, so KEDA's query has its counter),
    ``metrics_setting`` the setting it needs instead where no flag turns them on, and
    ``metrics_path`` the path it serves them at; ``refuses_over_running`` whether it refuses
    (rather than queues) the requests above its ``running`` limit;
    ``rocm_image`` the image built for AMD GPUs (empty: none known), ``rocm_note`` what is
    uncertain of it, ``nvidia_only`` whether the engine runs on NVIDIA GPUs only;
    ``backend`` the ``vllm bench serve --backend``
    that speaks to it (a request format: ``vllm bench serve`` offers ``vllm``, ``openai`` and
    ``openai-chat``, no engine's name; every server here serves OpenAI's ``/v1/completions``).
    """

    host: tuple[str, ...]
    model_flag: str
    image: str
    entrypoint: tuple[str, ...]
    container_model_flag: str
    tensor_parallel: str
    context: str
    running: str
    port: str
    counter: str
    backend: str
    step_tokens: str = ""
    prompt: str = ""
    counted_at_end: bool = True
    bind: str = ""
    metrics: str = ""
    metrics_setting: str = ""
    metrics_path: str = "/metrics"
    refuses_over_running: bool = False
    rocm_image: str = ""
    rocm_note: str = ""
    nvidia_only: bool = False

    def argv(self, model: str, tensor_parallel: int, *, context: int = 0, running: int = 0,
             step_tokens: int = 0, container: bool = False) -> list[str]:  # fmt: skip
        """The server's command (on a host) or the container's command and arguments."""
        flag = self.container_model_flag if container else self.model_flag
        out = [*(self.entrypoint if container else self.host), *([flag] if flag else []), model]
        out += [self.tensor_parallel, str(int(tensor_parallel))]
        if context:
            out += [self.context, str(int(context))]
            if self.prompt:
                out += [self.prompt, str(self.longest_prompt(context, step_tokens))]
        if running:
            out += [self.running, str(int(running))]
        if step_tokens:
            out += [self.step_tokens, str(int(step_tokens))]
        if self.port:
            out += [self.port, str(PORT)]
        if container and self.bind:
            out += [self.bind, "0.0.0.0"]
        if container and self.metrics:
            out += [self.metrics]
        return out

    def longest_prompt(self, context: int, step_tokens: int = 0) -> int:
        """Tokens of the longest prompt at a context (and a step's tokens, 0: not given)."""
        longest = int(context) - 1
        return min(longest, int(step_tokens)) if step_tokens else longest


_VLLM = dict(host=("vllm", "serve"), model_flag="", container_model_flag="--model",
             entrypoint=(), tensor_parallel="--tensor-parallel-size", context="--max-model-len",
             running="--max-num-seqs", port="", counter="vllm:request_success_total",
             backend="vllm", step_tokens="--max-num-batched-tokens")  # fmt: skip
#: Each engine's server (:data:`capnb.records.ENGINES`' ids).
SERVERS = {
    "vllm-v1": Server(image="vllm/vllm-openai", rocm_image="vllm/vllm-openai-rocm", **_VLLM),
    "vllm-v0": Server(image="vllm/vllm-openai:v0.7.3", **_VLLM),
    "sglang": Server(
        host=("python3", "-m", "sglang.launch_server"),
        model_flag="--model-path",
        image="lmsysorg/sglang",
        entrypoint=("python3", "-m", "sglang.launch_server"),
        container_model_flag="--model-path",
        tensor_parallel="--tp",
        context="--context-length",
        running="--max-running-requests",
        port="--port",
        counter="sglang:num_requests_total",
        backend="openai",
        step_tokens="--chunked-prefill-size",
        bind="--host",
        metrics="--enable-metrics",
        rocm_image="lmsysorg/sglang:v0.5.5.post3-rocm700-mi30x",
        rocm_note="a pinned release (SGLang tags each ROCm build, for MI300X and MI325X here; "
        "MI350X and MI355X take the -mi35x tags): pin the release you measured",
    ),
    "tgi": Server(
        host=("text-generation-launcher",),
        model_flag="--model-id",
        image="ghcr.io/huggingface/text-generation-inference",
        entrypoint=(),
        container_model_flag="--model-id",
        tensor_parallel="--num-shard",
        context="--max-total-tokens",
        running="--max-concurrent-requests",
        port="--port",
        counter="tgi_request_count",
        backend="openai",
        step_tokens="--max-batch-prefill-tokens",
        prompt="--max-input-tokens",
        counted_at_end=False,
        refuses_over_running=True,
        rocm_image="ghcr.io/huggingface/text-generation-inference:latest-rocm",
    ),
    "trtllm": Server(
        host=("trtllm-serve",),
        model_flag="",
        image="nvcr.io/nvidia/tensorrt-llm/release",
        entrypoint=("trtllm-serve",),
        container_model_flag="",
        tensor_parallel="--tp_size",
        context="--max_seq_len",
        running="--max_batch_size",
        port="--port",
        counter="trtllm_request_success_total",
        backend="openai",
        step_tokens="--max_num_tokens",
        bind="--host",
        metrics_setting="return_perf_metrics: true in the YAML file its --extra_llm_api_options "
        "names",
        metrics_path="/prometheus/metrics",
        nvidia_only=True,
    ),
    "lmdeploy": Server(
        host=("lmdeploy", "serve", "api_server"),
        model_flag="",
        image="openmmlab/lmdeploy",
        entrypoint=("lmdeploy", "serve", "api_server"),
        container_model_flag="",
        tensor_parallel="--tp",
        context="--session-len",
        running="--max-batch-size",
        port="--server-port",
        counter="",
        backend="openai",
        step_tokens="--max-prefill-token-num",
    ),
}
assert set(SERVERS) == set(ENGINES)


#: The Kubernetes resource each GPU maker's device plugin offers (the catalog's makers).
GPU_RESOURCES = {"AMD": "amd.com/gpu", "NVIDIA": "nvidia.com/gpu"}


def server_of(engine: str) -> Server:
    """The server of an engine id (:data:`SERVERS`)."""
    return SERVERS[engine]


def default_running(engine: str, gpu: str) -> int:
    """The requests the engine runs at once by default on ``gpu`` (TGI: its router's limit)."""
    from ..latency._engine import TGI_MAX_CONCURRENT_REQUESTS

    if engine == "tgi":
        return TGI_MAX_CONCURRENT_REQUESTS
    return int(EngineSettings.defaults(engine, gpu=gpu).max_num_seqs)

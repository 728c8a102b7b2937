"""Is the plan's GPU choice a close call? The latency model's held-out error against the cost gap.

A plan that compares GPUs with a latency model (not measurements) ranks them by a model whose
error on measurements it never saw is known (``capnb.latency.validate``, VALIDATION.md). When the
runner-up costs less extra than that error, the ranking could flip on real hardware: the plan
says so, and prints the benchmark runs that would settle it (``vllm bench serve``, whose result
files ``capnb plan --benchmark`` reads back).
"""

from __future__ import annotations

import math
import shlex

import xarray as xr

from ..latency import validate
from ..records import VLLM_VERSION

#: Concurrencies benchmarked around each option's predicted safe concurrency (multiples of it).
AROUND = (0.5, 1.0, 2.0)

#: ``vllm bench serve --random-range-ratio`` of the settle benchmarks: each prompt and output length
#: drawn uniformly within this share either side of the workload's mean. One length for every
#: request runs a closed loop in lockstep (its requests start and finish together), which the
#: engine model prices at 4.9 s P99 TTFT for SGLang's Qwen3-8B on one H200 at 225 in flight,
#: where the plan's own workload gives 0.22 s: the benchmark would measure another regime.
LENGTH_SPREAD = 0.5


def held_out_error(gpu: str, metric: str, latency_model: str,
                   own_gpus=()) -> tuple[float, str]:  # fmt: skip
    """The latency model's held-out median error on ``metric`` for ``gpu``, and its basis in words.

    ``latency_model``: ``"analytic"`` or ``"engine"`` (:func:`capnb.latency.validate.held_out_error`);
    a GPU of ``own_gpus`` (the engine calibrated on the user's own runs of it) has the own-run
    error: the bundled sources' other rates and lengths, each calibrated on its own runs.
    """
    own = latency_model == "engine" and gpu in own_gpus
    e = validate.held_out_error(gpu, metric, model="own-run" if own else latency_model)
    if not math.isfinite(e["median"]):
        return math.nan, f"no held-out figure scores the {latency_model} model on {metric.upper()}"
    sources = ", ".join(e["sources"])
    kind = "own-run held-out" if own else "held-out"
    basis = (
        f"{e['figures']:,} {kind} figures of {gpu} ({sources})"
        if e["measured_on_gpu"]
        else f"no {kind} figure of {gpu}: pooled over the {e['figures']:,} {kind} figures of {sources}"
    )
    if own:
        basis += ": the engine calibrated on each source's own runs, its other rates and lengths"
    return float(e["median"]), basis


def close_call(
    options: xr.Dataset,
    best: xr.Dataset,
    *,
    model: str,
    metric: str,
    prompt_tokens: float,
    output_tokens: float,
    latency_model: str = "analytic",
    own_gpus=(),
) -> dict[str, object]:
    """Whether the GPU ranking is a close call: the runner-up's extra cost within the model's error.

    Parameters
    ----------
    options
        The capacity step's result over ``gpu`` and ``tensor_parallel`` (``safe_concurrency``).
    best
        :func:`capnb.capacity.cheapest` over the day (``cheapest_*``, ``runner_up_*``,
        ``cost_gap``, ``feasible_options``).
    model, metric
        The model served and the SLA's binding latency metric (ttft, tpot, itl, e2e).
    prompt_tokens, output_tokens
        The workload's mean lengths (tokens), for the benchmark commands.
    latency_model
        Which model ranked the options: ``"analytic"`` or ``"engine"``.
    own_gpus
        GPUs the engine was calibrated on the user's own runs of (their own-run error).

    Returns
    -------
    dict
        ``latency_error`` and ``latency_error_basis`` (the chosen GPU's held-out median error,
        a share, and which figures it is from), ``latency_error_runner_up``, ``cost_gap_share``
        (the runner-up's extra cost over the chosen; NaN with one option), ``band_cheapest``
        (the cheapest option, ``"TP x GPU"``, with latency at the slow and at the fast end of the
        model's held-out band, :func:`capnb.capacity.band_cheapest`; ``""`` where none meets the
        SLA; empty without a band), ``band_flips`` (``(end, "TP x GPU")`` for each end where
        another option than the chosen is the cheapest), ``within_error`` (the runner-up's gap is
        within the larger median error, or an error is unknown), ``close`` (within the error, or
        a band flip), ``settle_options``
        (the options in question, ``"TP x GPU"``: the chosen, the runner-up and the band's) and
        ``settle_commands`` (shell lines benchmarking them); both empty when not a close call.
    """
    chosen = (str(best.cheapest_gpu.item()), int(best.cheapest_tensor_parallel.item()))
    error, basis = held_out_error(chosen[0], metric, latency_model, own_gpus)
    from ..capacity._sweep import BAND_ENDS

    ends = _band_ends(options)
    flips = [(end, option)  # (no band: no ends, so none)
             for end, option in zip(BAND_ENDS, ends, strict=False)
             if option[0] and option != chosen]  # fmt: skip
    out = {"latency_error": error, "latency_error_basis": basis, "close": False,
           "within_error": False, "latency_error_runner_up": math.nan, "cost_gap_share": math.nan,
           "band_cheapest": tuple(option_name(*option) if option[0] else "" for option in ends),
           "band_flips": tuple((end, option_name(*option)) for end, option in flips),
           "settle_options": (), "settle_commands": ""}  # fmt: skip
    if int(best.feasible_options) < 2:
        return out
    runner = (str(best.runner_up_gpu.item()), int(best.runner_up_tensor_parallel.item()))
    gap = float(best.cost_gap) / float(best.cheapest_usd_per_hour)
    other, _ = held_out_error(runner[0], metric, latency_model, own_gpus)
    worst = max(error, other)
    within = not math.isfinite(worst) or gap <= worst
    close = within or bool(flips)
    out.update(latency_error_runner_up=other, cost_gap_share=gap, within_error=within, close=close)
    if close:
        settle = list(dict.fromkeys([chosen, runner, *(option for _, option in flips)]))
        out["settle_options"] = tuple(option_name(*option) for option in settle)
        out["settle_commands"] = "\n".join(
            benchmark_commands(options, gpu, tp, model, prompt_tokens, output_tokens)
            for gpu, tp in settle
        )
    return out


def option_name(gpu: str, tensor_parallel: int) -> str:
    """An option as the plan names it: ``"2 x H100-SXM"`` (tensor-parallel degree x GPU)."""
    return f"{int(tensor_parallel)} x {gpu}"


def _band_ends(options: xr.Dataset) -> list[tuple[str, int]]:
    """The cheapest (gpu, tp) at the band's slow and fast ends (("", 0): none; []: no band)."""
    from ..capacity import band_cheapest

    over = [d for d in ("slot",) if d in options.dims]
    ends = band_cheapest(options, over=over)
    out = []
    for end in ends.values():
        if int(end.feasible_options) == 0:
            out.append(("", 0))
        else:
            out.append((str(end.cheapest_gpu.item()), int(end.cheapest_tensor_parallel.item())))
    return out


def benchmark_commands(options, gpu, tp, model, prompt_tokens, output_tokens) -> str:
    """The engine's server and ``vllm bench serve`` around the option's predicted safe concurrency.

    The engine is the one the options were priced on (their ``engine`` attr; vLLM V1 when none
    is said: the analytic model and measured curves price vLLM's memory).
    """
    from ._servers import server_of

    engine = str(options.attrs.get("engine", "vllm-v1"))
    server = server_of(engine)
    safe = int(options.safe_concurrency.sel(gpu=gpu, tensor_parallel=tp))
    levels = sorted({max(1, round(safe * k)) for k in AROUND})
    prefix = f"capnb-{gpu}-tp{tp}"
    # the block is pasted into a shell: names on one line of the comment (a newline in a model's
    # folder name would start a command), and quoted where they are arguments
    said = {name: " ".join(str(name).split()) for name in (gpu, model)}
    capped = max_model_len(options, gpu, tp, model)
    # a server that refuses the requests above its limit (TGI's router: 429) must admit the
    # loop's busiest run; one that queues them runs the safe concurrency's
    admitted = max(levels) if server.refuses_over_running else safe
    serve = server.argv("$MODEL", tp, context=0 if capped is None else capped[0],
                        running=above_default_seqs(admitted, str(gpu), engine),
                        step_tokens=int(options.attrs.get("max_num_batched_tokens", 0)))  # fmt: skip
    why = (
        ""
        if capped is None
        else f"; its KV cache holds {capped[0]:,} tokens of the model's {capped[1]:,}-token "
        "context, and the server refuses to start at a longer context it cannot hold one request of"
    )
    backend = "" if server.backend == "vllm" else f"--backend {server.backend} "
    # the longest request drawn stays within a --max-model-len the command passes: vllm bench
    # draws each of the lengths it is given up to ceil(length x (1 + ratio)), a token above each
    lengths = round(prompt_tokens), round(output_tokens)
    spread = LENGTH_SPREAD
    if capped is not None:
        room = (capped[0] - len(lengths)) / sum(lengths) - 1
        spread = max(0.0, min(spread, math.floor(room * 100) / 100))
    return "\n".join(
        [
            f"# on {tp} x {said[gpu]} (predicted safe concurrency {safe}){why}; MODEL = the "
            f"Hugging Face id you serve as {said[model]}; the re-plan reads this plan's inputs "
            "from its plan.json (here, the folder the plan was written to)",
            " ".join(serve),
            f"for c in {' '.join(map(str, levels))}; do vllm bench serve {backend}--model $MODEL "
            f"--dataset-name random --random-input-len {lengths[0]} "
            f"--random-output-len {lengths[1]} --random-range-ratio {spread:g} "
            "--max-concurrency $c "
            "--num-prompts $((c * 20)) --percentile-metrics ttft,tpot,itl,e2el "
            "--metric-percentiles 50,90,95,99 --save-result --save-detailed --result-dir "
            f"{shlex.quote(prefix)} --result-filename c$c.json; done",
            f"capnb plan --config plan.json --gpus {shlex.quote(str(gpu))} --tensor-parallel {tp} "
            f"{_replan_flags(options, gpu, tp, shlex.quote(prefix + '/'))} "
            f"--out {shlex.quote(prefix + '-plan')}",
        ]
    )


def _replan_flags(options: xr.Dataset, gpu: str, tp: int, runs: str) -> str:
    """The re-plan's flags for the runs: measured latencies, or own runs calibrating the engine.

    A plan priced on your own runs (its options' ``own_calibrations``) re-plans by calibrating the
    engine model on the new runs of this GPU and degree, so the engine still prices the other
    degrees; ``--benchmark`` on its config also works (the CLI then clears its
    ``calibration_runs``), where measured latencies alone are wanted. So does a plan with a
    prefix cache (its options' ``prefix_cache_share``): only the engine model takes the cache's
    hit rate, and measured latencies (of random prompts, sharing no prefix) refuse its config.
    """
    from ._steps import own_calibrations

    cached = float(options.attrs.get("prefix_cache_share", 0.0)) > 0
    if not own_calibrations(options) and not cached:
        return f"--benchmark {runs}"
    return (
        f"--calibrate {runs} --calibrate-gpu {shlex.quote(str(gpu))} "
        f"--calibrate-tensor-parallel {tp}"
    )


def above_default_seqs(concurrency: int, gpu: str, engine: str = "vllm-v1") -> int:
    """``concurrency`` where above the engine's default running requests on ``gpu``, else 0.

    The engine sweep runs every concurrency memory holds (up to 512), so a plan may price more
    requests in flight than the engine runs at its default (vLLM V1: 256 below 70 GiB and on the
    A100, 1024 above; TGI's router: 128): its serve commands and pods then need the engine's flag
    (vLLM's ``--max-num-seqs``).
    """
    from ._servers import default_running

    if engine == "vllm-v1":  # within every GPU's default: no catalog look-up
        from ..records import EngineSettings

        least = EngineSettings("vllm-v1").resolve(gpu_memory_bytes=0).max_num_seqs
        if int(concurrency) <= least:
            return 0
    default = default_running(engine, gpu)
    return int(concurrency) if default and int(concurrency) > default else 0


def max_model_len(options: xr.Dataset, gpu: str, tp: int, model) -> tuple[int, int] | None:
    """(the longest request the option's KV cache holds, the model's context), when it is shorter.

    vLLM defaults ``max_model_len`` to the model's context and refuses to start when the KV cache
    cannot hold one request that long ("To serve at least one request with the models's max seq
    len ..."): the serve command then needs ``--max-model-len``. Read from the option's
    ``running_tokens`` (the serving-engine model's plans carry it; a plan on another latency
    model gets vLLM's own accounting of the option, which decides whether vLLM starts), as the
    engine's pool holds a request (:func:`capnb.latency._engine.held_request`: whole 16-token
    blocks, a windowed layer's capped at its window).
    """
    from ..capacity._engine_sweep import _kv_tokens
    from ..data import load_model
    from ..latency import _engine
    from ..records import Deployment

    if "running_tokens" in options:
        kv = int(options.running_tokens.sel(gpu=gpu, tensor_parallel=tp))
    else:  # vLLM's budget of the option (at its default gpu_memory_utilization), in the release
        # the serving-engine model sizes its KV cache by (:func:`capnb.capacity.sweep_engine`)
        kv = _kv_tokens(model, gpu, int(tp), 1, VLLM_VERSION)
    if kv <= 0:  # no KV cache figure (nothing fits): no request to cap
        return None
    context = load_model(model).context_tokens
    if not context:
        return None
    # the engine's pool on the option, resolved once for the search (held_request's per call)
    layout, settings = _engine._deployed(Deployment(model, gpu, int(tp)), kv, None)
    if _engine.pool_holds(int(context), kv, layout, settings):
        return None
    low, high = 0, int(context)  # held(low), not held(high)
    while high - low > 1:
        middle = (low + high) // 2
        held = _engine.pool_holds(middle, kv, layout, settings)
        low, high = (middle, high) if held else (low, middle)
    return low, int(context)

"""Is the plan's GPU choice a close call? The latency model's held-out error against the cost gap.

A plan that compares GPUs with a latency model (not measurements) ranks them by a model whose
error on measurements it never saw is known (``capnb.latency.validate``, VALIDATION.md). When the
runner-up costs less extra than that error, the ranking could flip on real hardware: the plan
says so, and prints the benchmark runs that would settle it (``vllm bench serve``, whose result
files ``capnb plan --benchmark`` reads back).
"""

from __future__ import annotations

import math

import xarray as xr

from ..latency import validate

#: Concurrencies benchmarked around each option's predicted safe concurrency (multiples of it).
AROUND = (0.5, 1.0, 2.0)


def close_call(
    options: xr.Dataset,
    best: xr.Dataset,
    *,
    model: str,
    metric: str,
    prompt_tokens: float,
    output_tokens: float,
    latency_model: str = "analytic",
) -> dict[str, object]:
    """The plan's attrs on the choice's uncertainty: ``latency_uncertainty``, ``close_call``, ...

    Parameters
    ----------
    options
        The capacity step's result over ``gpu`` and ``tensor_parallel`` (``safe_concurrency``).
    best
        :func:`capnb.capacity.cheapest` over the day (``cheapest_*``, ``runner_up_*``,
        ``cost_gap``, ``feasible_options``).
    model, metric
        The model served and the SLA's latency metric (ttft, tpot, itl, e2e).
    prompt_tokens, output_tokens
        The workload's mean lengths (tokens), for the benchmark commands.
    latency_model
        Which model ranked the options: ``"analytic"`` or ``"engine"`` (whose held-out error is
        quoted).

    Returns
    -------
    dict
        ``latency_uncertainty`` (a sentence), ``latency_error_chosen`` and
        ``latency_error_runner_up`` (shares, the latency model's held-out median error for the
        metric on each GPU), ``cost_gap_share`` (the runner-up's extra cost over the chosen),
        ``close_call`` (1 when the gap is within the larger error, else 0; an int so the plan
        writes to NetCDF) and ``settle_commands`` (shell lines, empty when not a close call).
    """
    if int(best.feasible_options) < 2:
        return {
            "latency_uncertainty": "only one option meets the SLA: no ranking to doubt",
            "close_call": 0,
            "settle_commands": "",
        }
    chosen = (str(best.cheapest_gpu.item()), int(best.cheapest_tensor_parallel.item()))
    runner = (str(best.runner_up_gpu.item()), int(best.runner_up_tensor_parallel.item()))
    gap = float(best.cost_gap) / float(best.cheapest_usd_per_hour)
    errors = {
        gpu: validate.held_out_error(gpu, metric, model=latency_model)
        for gpu in {chosen[0], runner[0]}
    }
    worst = max(e["median"] for e in errors.values())
    close = bool(math.isfinite(worst) and gap <= worst) or not math.isfinite(worst)

    def words(gpu):
        e = errors[gpu]
        if not math.isfinite(e["median"]):
            return f"{gpu}: not measured"
        where = (
            f"{e['figures']} held-out figures of {', '.join(e['sources'])}"
            if e["measured_on_gpu"]
            else f"no held-out figure of {gpu} scores this model; pooled over the {e['figures']} "
            f"that do, of {', '.join(e['sources'])}"
        )
        return f"{gpu} {e['median']:.0%} ({where})"

    sentence = (
        f"The {'analytic latency' if latency_model == 'analytic' else 'serving-engine'} model's "
        f"held-out median error on {metric.upper()}: "
        + "; ".join(words(g) for g in dict.fromkeys((chosen[0], runner[0])))
        + f". The runner-up, {runner[1]} x {runner[0]}, costs {gap:+.0%}"
        + (
            ": within that error, so the choice is a close call; benchmark both to settle it."
            if close
            else ": beyond that error, so the ranking holds."
        )
    )
    commands = ""
    if close:
        commands = "\n".join(
            _commands(options, gpu, tp, model, prompt_tokens, output_tokens)
            for gpu, tp in (chosen, runner)
        )
    return {
        "latency_uncertainty": sentence,
        "latency_error_chosen": errors[chosen[0]]["median"],
        "latency_error_runner_up": errors[runner[0]]["median"],
        "cost_gap_share": gap,
        "close_call": int(close),
        "settle_commands": commands,
    }


def _commands(options, gpu, tp, model, prompt_tokens, output_tokens) -> str:
    """``vllm serve`` and ``vllm bench serve`` around the option's predicted safe concurrency."""
    safe = int(options.safe_concurrency.sel(gpu=gpu, tensor_parallel=tp))
    levels = sorted({max(1, round(safe * k)) for k in AROUND})
    prefix = f"capnb-{gpu}-tp{tp}"
    return "\n".join(
        [
            f"# on {tp} x {gpu} (predicted safe concurrency {safe}); MODEL = the Hugging Face id "
            f"you serve as {model}",
            f"vllm serve $MODEL --tensor-parallel-size {tp}",
            f"for c in {' '.join(map(str, levels))}; do vllm bench serve --model $MODEL "
            f"--dataset-name random --random-input-len {round(prompt_tokens)} "
            f"--random-output-len {round(output_tokens)} --max-concurrency $c "
            "--num-prompts $((c * 20)) --percentile-metrics ttft,tpot,itl,e2el "
            f"--metric-percentiles 50,90,95,99 --save-result --save-detailed --result-dir {prefix} "
            f"--result-filename c$c.json; done",
            f"capnb plan --gpus {gpu} --tensor-parallel {tp} --benchmark {prefix}/",
        ]
    )

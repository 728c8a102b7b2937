"""The bundled latency measurements (sources and licenses in ``datasets/README.md``).

- :func:`list_latency_curves`, :func:`load_latency_curve`: measured latency-concurrency curves
  (dstack's vLLM and TGI sweeps on 8 x MI300X; LMDeploy on A100).
- :func:`load_step_times`: measured prefill and decode-step times (Splitwise, LMDeploy) that
  calibrate the analytic model.
- :func:`load_trtllm_throughput`: TensorRT-LLM's published maximum throughput, a sanity bound.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from . import _curve
from ._benchmarks import _derive_mean_e2e
from ._catalog import dataset_path

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import xarray as xr

__all__ = ["list_latency_curves", "load_latency_curve", "load_step_times", "load_trtllm_throughput"]


_DSTACK = {
    f"dstack-{engine}-mi300x-{length}": (engine, length)
    for engine in ("vllm", "tgi")
    for length in ("short", "long")
}
_LMDEPLOY_MODELS = {
    "llama2-7b": "Llama-2-7B",
    "llama2-13b": "Llama-2-13B",
    "internlm-20b": "InternLM-20B",
    "llama2-70b": "Llama-2-70B",
}


def _lmdeploy_static():
    import pandas as pd

    frame = pd.read_csv(
        dataset_path("benchmarks", "lmdeploy", "static_inference_latency_percentiles.csv")
    )
    return frame[(frame.lmdeploy_version == "v0.1.0a1") & (frame.prompt_tokens > 1)]


def _lmdeploy_names() -> dict[str, tuple]:
    names = {}
    for (model, tp, prompt, output), _ in _lmdeploy_static().groupby(
        ["model", "tp", "prompt_tokens", "output_tokens"]
    ):
        names[f"lmdeploy-{model}-a100-tp{tp}-p{prompt}-o{output}"] = (model, tp, prompt, output)
    return names


def list_latency_curves() -> list[str]:
    """Names of the bundled measured latency-concurrency curves (see ``datasets/README.md``)."""
    return [*_DSTACK, *_lmdeploy_names()]


def load_latency_curve(name: str) -> xr.Dataset:
    """A bundled measured latency-concurrency curve.

    ``dstack-<vllm|tgi>-mi300x-<short|long>``: Llama-3.1-405B on 8 x MI300X (dstack's benchmark,
    each row sends ``concurrency`` requests at once; short prompts of ~80 tokens or long ones of
    10,000), P50/P99 of TTFT, TPOT and ITL. ``lmdeploy-<model>-a100-tp<N>-p<prompt>-o<output>``:
    LMDeploy TurboMind static batches on A100-80GB, per-token latency P50/P75/P95/P99 (read as
    ITL) and mean TTFT at batch 1, 16, 32, 64.

    Examples
    --------
    >>> curve = load_latency_curve("dstack-vllm-mi300x-short")
    >>> int(curve.concurrency[-1]), curve.attrs["gpu"]
    (2048, 'MI300X')
    """
    if name in _DSTACK:
        return _dstack_curve(name, *_DSTACK[name])
    lmdeploy = _lmdeploy_names()
    if name in lmdeploy:
        return _lmdeploy_curve(name, *lmdeploy[name])
    from ..errors import UnknownNameError

    raise UnknownNameError("latency curve", name, list_latency_curves())


def _dstack_curve(name: str, engine: str, length: str) -> xr.Dataset:
    import pandas as pd

    file = f"amd_tgi_vs_vllm_{engine}_result_{engine}_{length}.csv"
    path = dataset_path("benchmarks", "dstack", file)
    frame = pd.read_csv(path)
    completed = frame["Successful requests"].to_numpy(dtype=float)
    latency, mean = {}, {}
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL")):
        mean[metric] = _curve.to_seconds(frame[f"Mean {label} (ms)"], "ms", file)
        latency[(metric, 0.5)] = _curve.to_seconds(frame[f"Median {label} (ms)"], "ms", file)
        latency[(metric, 0.99)] = _curve.to_seconds(frame[f"P99 {label} (ms)"], "ms", file)
    output = frame["Total generated tokens"].to_numpy(dtype=float) / completed
    qps = frame["Request throughput (req/s)"].to_numpy(dtype=float)
    notes = [
        "concurrency = the run's request count: dstack sent that many requests at once and "
        "measured until all finished"
    ]
    _derive_mean_e2e(completed, mean, latency, output, qps, notes)
    return _curve.build(
        completed.astype(np.int64),
        latency,
        mean=mean,
        measured_qps=qps,
        rows=[f"{file} row {i + 2}" for i in range(len(frame))],
        source=f"dstackai/benchmarks @06c957ab comparison/amd_tgi_vs_vllm/{file}",
        attrs={
            "name": name,
            "model": "Llama-3.1-405B",
            "gpu": "MI300X",
            "tensor_parallel": 8,
            "engine": {"vllm": "vLLM", "tgi": "TGI"}[engine],
            "prompt_tokens": float(frame["Total input tokens"].sum() / completed.sum()),
            "output_tokens": float(output.mean()),
        },
        notes=notes,
    )


def _lmdeploy_curve(name: str, model: str, tp: int, prompt: int, output: int) -> xr.Dataset:
    frame = _lmdeploy_static()
    rows = frame[
        (frame.model == model)
        & (frame.tp == tp)
        & (frame.prompt_tokens == prompt)
        & (frame.output_tokens == output)
    ].sort_values("batch")
    file = "static_inference_latency_percentiles.csv"
    latency = {
        ("itl", q): rows[f"{round(q * 100)}%(s)"].to_numpy(dtype=float)
        for q in (0.5, 0.75, 0.95, 0.99)
    }
    batch = rows.batch.to_numpy()
    qps = rows["throughput(out tok/s)"].to_numpy(dtype=float) / output
    mean = {"ttft": rows["FTL(ave)(s)"].to_numpy(dtype=float)}
    notes = [
        "static batches: concurrency = batch size; per-token latency percentiles read as ITL",
        "requests/s = output tokens/s / output tokens per request",
    ]
    _derive_mean_e2e(batch, mean, latency, None, qps, notes)
    return _curve.build(
        batch,
        latency,
        mean=mean,
        measured_qps=qps,
        rows=[f"{file} row {i + 2}" for i in rows.index],
        source=f"InternLM/lmdeploy @3e391df4 docs/en/benchmark/a100_fp16.md ({file})",
        attrs={
            "name": name,
            "model": _LMDEPLOY_MODELS[model],
            "gpu": "A100-80GB",
            "tensor_parallel": int(tp),
            "engine": "LMDeploy TurboMind v0.1.0a1",
            "prompt_tokens": float(prompt),
            "output_tokens": float(output),
        },
        notes=notes,
    )


_SPLITWISE_GPUS = {"a100-80gb": "A100-80GB", "h100-80gb": "H100-SXM"}
_SPLITWISE_MODELS = {"llama2-70b": "Llama-2-70B", "bloom-176b": "BLOOM-176B"}


def load_step_times(source: str = "splitwise") -> pd.DataFrame:
    """Measured prefill and decode-step times that calibrate the analytic latency model.

    Parameters
    ----------
    source
        ``"splitwise"``: SplitwiseSim's ``perf_model.csv`` (Llama-2-70B on A100-80GB and H100 at
        TP 2/4/8, BLOOM-176B at TP 8; vLLM-era stack), medians of the repeated runs; the
        power-capped H100 rows are left out (no catalog profile). ``"lmdeploy"``: LMDeploy
        TurboMind on A100-80GB (Llama-2-7B/13B, InternLM-20B, Llama-2-70B): decode steps are the
        median per-token latency at each batch; prefill is the first-token latency at batch 1.

    Returns
    -------
    pandas.DataFrame
        One row per measured configuration: ``model``, ``gpu`` (catalog ids), ``tensor_parallel``,
        ``phase`` (``prefill`` or ``decode``), ``batch`` (sequences per step), ``tokens`` (prompt
        tokens for prefill; mean context per sequence for decode), ``seconds`` and ``spread`` (median
        absolute deviation of the repeats / median; NaN with one run). ``attrs["notes"]`` lists the
        rows dropped and why.
    """
    import pandas as pd

    if source == "splitwise":
        frame = pd.read_csv(dataset_path("benchmarks", "splitwise", "perf_model.csv"))
        frame = frame[frame.hardware.isin(list(_SPLITWISE_GPUS))]
        rows = []
        keys = ["model", "hardware", "tensor_parallel", "prompt_size", "batch_size", "token_size"]
        for key, group in frame.groupby(keys):
            model, hardware, tp, prompt, batch, tokens = key
            base = {
                "model": _SPLITWISE_MODELS[model],
                "gpu": _SPLITWISE_GPUS[hardware],
                "tensor_parallel": int(tp),
                "batch": float(batch),
            }
            for phase, column, context in (
                ("prefill", "prompt_time", prompt),
                ("decode", "token_time", prompt + tokens / 2),
            ):
                seconds = group[column].to_numpy(dtype=float) / 1e3
                median = float(np.median(seconds))
                spread = (
                    float(np.median(np.abs(seconds - median)) / median)
                    if seconds.size > 1
                    else np.nan
                )
                rows.append(
                    {**base, "phase": phase, "tokens": float(context), "seconds": median,
                     "spread": spread, "prompt_tokens": float(prompt), "output_tokens": float(tokens)}
                )  # fmt: skip
        table = pd.DataFrame(rows).drop_duplicates(
            ["model", "gpu", "tensor_parallel", "phase", "batch", "tokens"]
        )
        notes = ["h100-80gb-pcap (power-capped) rows left out: no catalog GPU profile"]
    elif source == "lmdeploy":
        frame = _lmdeploy_static()
        rows = []
        for _, r in frame.iterrows():
            base = {
                "model": _LMDEPLOY_MODELS[r.model],
                "gpu": "A100-80GB",
                "tensor_parallel": int(r.tp),
                "spread": np.nan,
                "prompt_tokens": float(r.prompt_tokens),
                "output_tokens": float(r.output_tokens),
            }
            rows.append(
                {**base, "phase": "decode", "batch": float(r.batch),
                 "tokens": float(r.prompt_tokens + r.output_tokens / 2), "seconds": float(r["50%(s)"])}
            )  # fmt: skip
            if r.batch == 1:
                rows.append(
                    {**base, "phase": "prefill", "batch": 1.0, "tokens": float(r.prompt_tokens),
                     "seconds": float(r["FTL(ave)(s)"])}
                )  # fmt: skip
        table = pd.DataFrame(rows).drop_duplicates(
            ["model", "gpu", "tensor_parallel", "phase", "batch", "tokens"]
        )
        notes = ["prompt-length-1 rows and the v0.2.0 rerun left out"]
    else:
        raise InputError(f"source={source!r} is not known; use 'splitwise' or 'lmdeploy'")
    table, dropped = _drop_faster_with_more_work(table)
    if dropped:
        notes.append(
            f"{dropped} rows dropped where a larger batch of the same work ran more than 5 % faster "
            "than a smaller one (physically impossible: failed or truncated runs)"
        )
    table = table.sort_values(["model", "gpu", "tensor_parallel", "phase", "tokens", "batch"])
    table = table.reset_index(drop=True)
    table.attrs["source"] = source
    table.attrs["notes"] = notes
    return table


def _drop_faster_with_more_work(table):
    keep = np.ones(len(table), dtype=bool)
    group_keys = ["model", "gpu", "tensor_parallel", "phase", "prompt_tokens", "output_tokens"]
    for _, group in table.groupby(group_keys):
        slowest = -math.inf
        for index in group.sort_values("batch").index:
            seconds = table.loc[index, "seconds"]
            # more than 5 % faster with more work is a failed run; smaller dips are run-to-run noise
            if seconds < 0.95 * slowest:
                keep[table.index.get_loc(index)] = False
            slowest = max(slowest, seconds)
    return table[keep], int((~keep).sum())


def load_trtllm_throughput() -> pd.DataFrame:
    """TensorRT-LLM's published maximum output throughput (tokens/s) by model, ISL/OSL and GPU.

    From NVIDIA/TensorRT-LLM ``docs/source/performance/perf-overview.md`` @00f37686: offline
    ``trtllm-bench`` runs with FP8/FP4 weights. An upper bound a modelled throughput should not
    exceed. Columns: ``model``, ``isl``, ``osl`` (tokens), ``gpu``, ``tp``, ``pp``, ``precision``,
    ``total_output_tokens_per_s``.
    """
    import pandas as pd

    return pd.read_csv(
        dataset_path("benchmarks", "trtllm", "trtllm_perf_overview_max_throughput.csv")
    )

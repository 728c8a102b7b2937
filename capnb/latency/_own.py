"""Calibrating the engine model on the user's own benchmark runs.

Two or three runs of ``vllm bench serve`` (or SGLang's ``bench_serving``) at other request rates or
concurrencies, on one GPU and engine, say more about that deployment than any published source:
:func:`calibrate` fits the engine calibration to them (:mod:`capnb.latency._fit`'s robust least
squares, with the per-request overhead outside the steps fitted too), pulled towards the bundled
calibration of that GPU and engine, so that a parameter the runs say little about stays where the
published sources put it. The plan then predicts the other rates, lengths and degrees with it.
How well that holds on runs the fit never saw is measured by leaving one rate (or one length) of
each bundled source out (:mod:`capnb.latency.validate`, VALIDATION.md).
"""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import replace

import xarray as xr

from ..errors import InputError
from ..records import EngineSettings
from . import _engine, _engines, _fit, _fitted
from . import calibration as _calibration

__all__ = ["OWN_RUN_MISS", "CalibrationWarning", "calibrate", "fit_own"]

#: In-sample miss (simulated / measured - 1) of a calibration on the user's own runs past which
#: its answer is said to be no surer than that miss, by the plan and worksheet 03 alike.
OWN_RUN_MISS = 0.25


class CalibrationWarning(UserWarning):
    """A calibration that stands on less than it should: runs at one load only."""


#: Simulations of the runs a fit may use (each one every run at one trial calibration).
EVALUATIONS = 40
#: Strength of the pull towards the prior: each parameter counts as this many measured figures
#: (it was 1). Where the prior does not express the run (DeepSeek-V3 on SGLang with attention
#: data parallelism: HBM efficiency 1.0 in the prior, about 0.15 in the runs) a pull of 1 kept the
#: request overhead at 3-5 ms where these runs put it at 0.25-0.35 s, and the held-out rates'
#: median TTFT was half the measured. Chosen out of sample with :data:`REQUEST_OVERHEAD_SCALE`.
PRIOR_PULL = 0.3
#: The move of the per-request overhead (seconds, outside the steps: the server's HTTP path,
#: tokenising, the client) that the pull counts as one figure's worth. The bundled calibration
#: holds the overhead at 0, and at the fit's general scale (20 ms) the pull made 60-120 ms of it
#: cost as much as 9-36 figures each missed by 40 %, so the runs' TTFT floor went into the compute
#: efficiency instead (0.39 -> 0.19 on SGLang's 70B runs), which then missed the prefill of other
#: lengths and loads. Chosen with :data:`PRIOR_PULL` out of sample among four pairs (pull 1 or
#: 0.3; 20 or 200 ms): for each bundled source the pair with the lowest mean own-run error on the
#: other sources (P50 and P99 rows), 0.3 and 200 ms for every source.
REQUEST_OVERHEAD_SCALE = 0.2
#: A calibration whose simulation of the runs it was fitted on misses them by more than this
#: (the median factor between simulated and measured figures, less 1, either way: 3.0 is 4x too
#: long or too short) reproduces nothing of them: :func:`calibrate` refuses it. Latencies in the
#: wrong unit (seconds or microseconds in ``*_ms`` fields, 1000x) or runs of another model, GPU,
#: degree or dtype than named land there.
MISFIT = 3.0


def fit_own(pts: list[_fit.Point], prior: _calibration.Calibration, *,
            label: str = "") -> _calibration.Calibration:  # fmt: skip
    """The calibration fitted on measured points of one GPU and engine, pulled towards ``prior``."""
    layout = _fit.layout_of(pts, pooled=True, request=True)
    start = layout.start(prior.engine_array())
    # the prior counts as PRIOR_PULL measured figures per parameter: the runs decide what they
    # measure, the prior holds what they do not
    figures = sum(len(pt.figures) for pt in pts)
    scales = _fit._SCALES.copy()
    scales[_fit.kernels.CALIBRATION_FIELDS.index("request_overhead_s")] = REQUEST_OVERHEAD_SCALE
    fitted, _, _, _ = _fit.fit(
        pts, pooled=True, prior=start, start=start, request_overhead=True,
        max_evaluations=EVALUATIONS, prior_weight=PRIOR_PULL / math.sqrt(max(figures, 1)),
        scales=scales,
    )  # fmt: skip
    cal = next(iter(fitted.values()))
    fields = {k: float(v) for k, v in zip(_fit.kernels.CALIBRATION_FIELDS, cal.engine_array(),
                                          strict=True)}  # fmt: skip
    if not layout.expert:  # runs of a dense model say nothing of the routed experts
        fields["expert_efficiency"] = prior.expert_efficiency
        fields["expert_compute_efficiency"] = prior.expert_compute_efficiency
    if not layout.fp8:  # nor do runs whose matrix products are not FP8 of FP8 ones
        fields["fp8_compute_efficiency"] = prior.fp8_compute_efficiency
    return _calibration.Calibration(
        **fields, fitted_on=label or f"own runs ({len(pts)} loads; prior: {prior.fitted_on})",
        points=cal.points, fit_error=cal.fit_error,
    )  # fmt: skip


def calibrate(runs, *, model=None, gpu=None, tensor_parallel=None, dtype: str | None = None,
              settings: EngineSettings | None = None, engine_version: str = "",
              prior: _calibration.Calibration | None = None) -> _calibration.Calibration:  # fmt: skip
    """Calibrate the engine model on your own benchmark runs (two or three loads are enough).

    Parameters
    ----------
    runs
        The runs: a table from :func:`capnb.data.read_bench_runs` (``vllm bench serve`` or SGLang
        ``bench_serving`` result files, one run per request rate or concurrency), or a measured
        closed-loop curve (:func:`capnb.data.read_vllm_bench`, :func:`capnb.data.read_aiperf`,
        :func:`capnb.data.read_benchmark`; its points are read as concurrencies).
    model, gpu, tensor_parallel
        What ran (default: the table's or the curve's own). Each overrides one column of the
        runs, so they stay single arguments rather than one :class:`~capnb.records.Deployment`.
    dtype
        ``"fp8"`` for FP8 weights (default: the table's, else the model's own).
    settings
        The serving engine and the server's flags where they were set
        (:class:`capnb.records.EngineSettings`: engine, ``max_model_len``, ``max_num_seqs``,
        ``max_num_batched_tokens``, ``chunked_prefill``, ``policy``; None fields: the engine's
        defaults; None: the defaults of the engine the runs table names (``read_bench_runs``'
        ``engine`` and ``engine_version``), else vLLM V1's; an engine other than the table's is
        an error). The KV cache is simulated in 16-token blocks.
    engine_version
        The engine's release as the runs name it (for the record; ``settings.engine`` decides).
    prior
        The calibration to start from and pull towards (default: the bundled one of this GPU and
        engine, :func:`capnb.latency.engine_calibration`).

    Returns
    -------
    capnb.latency.calibration.Calibration
        Pass it to :func:`capnb.latency.engine` (``calibration=``) to predict other rates,
        lengths and tensor-parallel degrees on that GPU and engine.

    Raises
    ------
    InputError
        No run, runs of several GPUs, models or degrees, a run the model cannot simulate, or
        runs the fitted model misses by a median factor over 1 + :data:`MISFIT` (4x either way:
        latencies in the wrong unit, or another deployment than named), or one run's metric it
        misses so (the error names the run, the metric and both medians).
    """
    read_as = _engine_read_as(runs)
    if read_as:
        _check_backends(runs, read_as[0])
    if settings is None:  # the engine the runs were read as, else vLLM V1
        settings = EngineSettings(read_as[2] if read_as else "vllm-v1")
    if not isinstance(settings, EngineSettings):
        raise InputError(
            "settings: expected a capnb.records.EngineSettings (engine, max_num_seqs, ...), "
            f"got {type(settings).__name__}"
        )
    if settings.block_size not in (None, _engine.BLOCK_SIZE):
        raise InputError(
            f"settings: block_size = {settings.block_size}: calibration simulates the runs in "
            f"{_engine.BLOCK_SIZE}-token KV blocks (leave block_size None)"
        )
    if read_as:
        engine, version, model_id = read_as
        chosen = _engines.engine_id(settings.engine)
        either = (
            str(engine).strip().lower().startswith("vllm")
            and not version
            and (chosen.startswith("vllm"))
        )  # ("vllm" with no release names either vLLM engine)
        if chosen != model_id and not either:
            raise InputError(
                f"settings: engine {settings.engine!r}, but the runs were read as {engine!r} "
                f"{version} (the engine model's {model_id!r}): calibrate simulates the engine "
                "the runs ran on; pass settings=EngineSettings(...) of that engine, or read the "
                "runs with the engine they ran on (read_bench_runs(..., engine=...))"
            )
    flags = {"max_model_len": settings.max_model_len, **settings.given}
    flags.pop("block_size", None)
    pts = own_points(runs, model=model, gpu=gpu, tensor_parallel=tensor_parallel,
                     engine=settings.engine, engine_version=engine_version, dtype=dtype,
                     **flags)  # fmt: skip
    first = pts[0]
    if len({(pt.mode, pt.load) for pt in pts}) == 1:
        warnings.warn(
            CalibrationWarning(
                f"runs: every run is at {first.mode} {first.load:g}: one load sets the engine's "
                "level, but how its latency grows with load still rests on the prior (the "
                "bundled calibration); add a run at another request rate or concurrency (two or "
                "three loads are enough)"
            ),
            stacklevel=2,
        )
    if prior is None:
        prior = _fitted.engine_calibration(first.gpu, first.engine_id)
    elif not isinstance(prior, _calibration.Calibration):
        raise InputError(f"prior must be a Calibration, got {type(prior).__name__}")
    for pt in pts:
        if _fit.setup(pt) is None:
            raise InputError(
                f"runs: the run at {pt.mode} {pt.load:g} cannot be simulated (one request does "
                f"not fit {first.model}'s KV cache on {first.tensor_parallel} x {first.gpu})"
            )
    by_mode: dict[str, list[str]] = {}
    for pt in pts:  # each run under its own mode: "batch 900; request_rate 10, 30"
        by_mode.setdefault(pt.mode, []).append(f"{pt.load:g}")
    loads = "; ".join(f"{mode} {', '.join(each)}" for mode, each in by_mode.items())
    own = fit_own(pts, prior, label=f"own runs on {first.tensor_parallel} x {first.gpu}, "
                  f"{first.engine_id} ({loads}); prior: {prior.fitted_on}")  # fmt: skip
    misses, signed = _misses(pts, own)
    misfit = _factor([m for per_run in misses.values() for m in per_run[0]])
    if misfit > MISFIT:
        raise InputError(
            f"runs: the calibrated engine model misses the runs it was fitted on by a median "
            f"{misfit:,.0%} ({loads}): check the latency units (seconds written "
            f"into *_ms fields make every latency 1000x too short, microseconds 1000x too long) "
            f"and that the runs are of {first.model} on {first.tensor_parallel} x {first.gpu} "
            f"({first.dtype}) as named"
        )
    for (mode, load, metric), (logs, measured, simulated) in misses.items():
        if _factor(logs) > MISFIT:
            raise InputError(
                f"runs: the run at {mode} {load:g}: its {metric} is simulated at a median "
                f"{simulated * 1000:,.1f} ms where it measured {measured * 1000:,.1f} ms "
                f"({_factor(logs) + 1:,.1f}x off) by the engine model calibrated on all "
                f"{len(pts)} runs ({loads}): check that this run is of "
                f"{first.model} on {first.tensor_parallel} x {first.gpu} as named (replicas "
                "behind a router serve several times one instance's load), or leave it out"
            )
    errors = tuple((metric, stat, _median(values), len(values))
                   for (metric, stat), values in sorted(signed.items()) if values)  # fmt: skip
    return replace(own, run_errors=errors)


def _misses(pts: list[_fit.Point], cal: _calibration.Calibration) -> tuple[dict, dict]:
    """Per run and metric, |log(simulated / measured)| and medians; per figure, the signed miss.

    The first: each figure's |log(simulated / measured)| and the run's medians (s) of the metric;
    the second, per (metric, stat): simulated / measured - 1 of each run's figure. ``cal``
    simulates each run as it was run.
    """
    out: dict[tuple, tuple[list, float, float]] = {}
    signed: dict[tuple, list[float]] = {}
    for pt in pts:
        values, _ = _fit.simulate_point(pt, cal.engine_array())
        for key, measured in pt.figures.items():
            got = values[key] if values is not None else math.nan
            if measured > 0 and not math.isnan(got):
                signed.setdefault(key, []).append(got / measured - 1.0)
        for metric in dict.fromkeys(m for m, _ in pt.figures):
            keys = [k for k in pt.figures if k[0] == metric]
            simulated = [values[k] if values is not None else math.nan for k in keys]
            logs = [abs(math.log(v / pt.figures[k])) if v > 0 else math.inf
                    for k, v in zip(keys, simulated, strict=True) if not math.isnan(v)]  # fmt: skip
            out[(pt.mode, pt.load, metric)] = (
                logs,
                _median([pt.figures[k] for k in keys]),
                _median(simulated),
            )
    return out, signed


def _factor(logs: list[float]) -> float:
    """The median factor off, less 1, of |log(simulated / measured)| errors (NaN: none).

    Symmetric: a figure simulated 1000x short and one simulated 1000x long both miss by
    99,900 %, where ``Calibration.fit_error`` (|simulated / measured - 1|) never exceeds 100 %
    for runs slower than the model.
    """
    return math.expm1(_median(logs)) if logs else math.nan


def _median(values: list[float]) -> float:
    """The median of the values that are numbers (NaN: none are)."""
    numbers = [v for v in values if not math.isnan(v)]
    return statistics.median(numbers) if numbers else math.nan


def _engine_family(name: str) -> str | None:
    """The engine a name says (``vllm``, ``sglang``, ...; vLLM's two engines are one), or None."""
    if "oai" in name.lower() or "openai" in name.lower():  # an API, whoever serves it
        return None
    try:
        found = _engines.engine_id(name)
    except InputError:  # a client's name for no engine ("llama.cpp", "deepspeed-mii")
        return None
    return "vllm" if found.startswith("vllm") else found


def _check_backends(runs, engine: str) -> None:
    """A run whose ``backend`` names another engine than the runs were read as: an error.

    The benchmark clients write the server they were pointed at: SGLang's ``bench_serving``
    ``"backend": "sglang"`` (or ``vllm``, ``lmdeploy``, ...), vLLM's ``bench serve`` ``vllm``,
    ``sglang``, ``tgi``, ...; an API's name (``openai``, ``openai-chat``, ``sglang-oai``) names
    no engine and says nothing. :func:`capnb.data.read_bench_runs` keeps it in a ``backend``
    column (attrs, which ``pandas.concat`` drops where tables' differ, name the files).
    """
    given = _engine_family(engine)
    if given is None or "backend" not in runs:
        return
    files = dict(runs.attrs.get("backends") or {})
    named = [c for c in ("backend", "mode", "load") if c in runs]
    for row in runs[named].dropna(subset=["backend"]).drop_duplicates().to_dict("records"):
        backend = str(row["backend"])
        said = _engine_family(backend)
        if said is None or said == given:
            continue
        where = next((w for w, b in files.items() if b == backend), None) or (
            f"the run at {row.get('mode', 'load')} {row.get('load', math.nan):g}"
        )  # fmt: skip
        flag = "vllm-v1" if said == "vllm" else said
        shown = _engines.ENGINES[flag].split(" (")[0]
        raise InputError(
            f"runs: {where}: backend {backend!r} says the run was served by {shown}, but the "
            f"runs were read as engine {engine!r}; the engine model simulates the engine a run "
            f"ran on: read them with read_bench_runs(..., engine={said!r}) (capnb plan: "
            f"--engine {flag}, [serving] engine = {flag!r}); if the server was the engine given "
            "and the backend only chose the client's request format (vLLM's client wrote "
            "'vllm' by default against any server), set it aside: runs.drop(columns='backend') "
            "(capnb plan: delete the 'backend' field of the result files)"
        )


def _engine_read_as(runs) -> tuple[str, str, str] | None:
    """(engine, release, engine model id) a runs table of the user's names, or None.

    None for a curve (its ``engine`` attr is the client's endpoint, not the server), a bundled
    source's table (each run keeps its own) or a table naming no engine; a table of the user's
    naming two engines is an error.
    """
    import pandas as pd

    if not isinstance(runs, pd.DataFrame) or runs.empty or "engine" not in runs:
        return None
    if "source" in runs and set(runs["source"]) <= _bundled_sources():
        return None
    engines = runs["engine"].dropna().astype(str).unique()
    families = sorted({_engine_family(e) or e.strip() for e in engines} - {""})
    if len(families) > 1:  # (vLLM's engines, or one's names for it, are one)
        raise InputError(
            f"runs: read as {len(families)} engines ({', '.join(map(repr, families))}) and one "
            "calibration is of one engine's scheduler: calibrate each apart (the rows of one "
            "engine column), or read them all with the engine they ran on"
        )
    if len(engines) != 1 or not engines[0].strip():
        return None
    versions = runs["engine_version"].dropna().astype(str).unique() if (
        "engine_version" in runs) else []  # fmt: skip
    version = versions[0] if len(versions) == 1 else ""
    return engines[0], version, _engines.engine_id(engines[0], version)


def own_points(runs, **given) -> list[_fit.Point]:
    """The measured points of the user's runs (see :func:`calibrate`)."""
    import pandas as pd

    if isinstance(runs, xr.Dataset):
        runs = _curve_table(runs, given)
    if not isinstance(runs, pd.DataFrame) or runs.empty:
        raise InputError("runs: pass capnb.data.read_bench_runs(...) or a measured curve")
    table = runs.copy()
    for column in ("model", "gpu", "tensor_parallel"):
        if given.get(column) is not None:
            table[column] = given[column]
        if column not in table or table[column].nunique() != 1:
            raise InputError(
                f"runs: one {column} at a time (found {sorted(set(table.get(column, [])))})"
            )
    bundled = "source" in table and set(table["source"]) <= _bundled_sources()
    if not bundled:  # (a bundled source keeps the engine and release it names)
        table["engine"] = given["engine"]
        table["engine_version"] = given.get("engine_version") or ""
    if given.get("dtype"):
        table["dtype"] = given["dtype"]
    if not bundled and "dtype" in table:
        table["dtype"] = [_dtype(d, str(table["model"].iloc[0])) for d in table["dtype"]]
    _engines.engine_id(given["engine"])  # a clear error for an unknown engine
    flags = {k: given.get(k) for k in ("max_model_len", "max_num_seqs", "max_num_batched_tokens",
                                       "chunked_prefill", "policy")}  # fmt: skip
    pts = []
    for (mode, load), rows in table.groupby(["mode", "load"], sort=True):
        first = rows.iloc[0]
        config = (str(first.source if "source" in rows else "own run"), str(first.gpu),
                  str(first.model), str(first.engine), str(first.engine_version),
                  int(first.tensor_parallel), str(first.get("dtype", "bf16")),
                  float(first.input_tokens), float(first.output_tokens), str(mode))  # fmt: skip
        figures = {(m, s): float(v) for m, s, v in zip(rows.metric, rows.stat, rows.value,
                                                       strict=True) if m in _fit.LATENCY_METRICS}  # fmt: skip
        requests = rows["requests"].iloc[0] if "requests" in rows else math.nan
        run = {**{k: v for k, v in flags.items() if v is not None},
               "requests": float(requests), "lengths": "mean"}  # fmt: skip
        cv = float(rows["arrival_cv"].iloc[0]) if "arrival_cv" in rows else math.nan
        if mode == "request_rate" and math.isfinite(cv):  # (--burstiness: Gamma arrivals)
            run["arrival_cv"] = cv
        point = _fit.Point(config, float(load), figures, run=run)
        if config[0] in _bundled_sources():  # a bundled run: simulated as it was run
            point = _fit.Point(config, float(load), figures)
        pts.append(point)
    if not pts:
        raise InputError("runs: no latency figure to fit")
    return pts


def _dtype(dtype, model: str) -> str:
    """The weights' dtype the fit simulates: ``fp8``, or the model's own (16-bit, or its own)."""
    from ..data import load_model

    name = str(dtype).strip().lower()
    own = str(load_model(_fit.MODEL_ALIASES.get(model, model)).weight_dtype).lower()
    if name in ("fp8", "bf16", "fp16", own):
        return name
    raise InputError(
        f"dtype: {dtype!r}: the engine model calibrates FP8 weights ('fp8') or {model}'s own "
        f"({own!r}; 'bf16' and 'fp16' read the same), not other weight dtypes"
    )


def _bundled_sources() -> set[str]:
    from ..data import list_measurement_sources

    return set(list_measurement_sources())


def _curve_table(curve: xr.Dataset, given: dict):
    """A measured closed-loop curve as a runs table (one run per concurrency)."""
    import pandas as pd

    if "concurrency" not in curve.dims or "latency" not in curve:
        raise InputError("runs: a curve must be over 'concurrency' with a 'latency' variable")
    missing = [k for k in ("prompt_tokens", "output_tokens") if k not in curve.attrs]
    if missing:
        from ..data._benchmarks import FORMAT_WORDS

        read = curve.attrs.get("format")
        # (read_bench_runs reads vllm bench and GuideLLM files only: no way out for the others)
        other = " or read the runs with capnb.data.read_bench_runs" if read in (
            "vllm", "guidellm") else ""  # fmt: skip
        raise InputError(
            f"runs: the curve{f' ({FORMAT_WORDS[read]})' if read in FORMAT_WORDS else ''} records "
            f"no {' and no '.join(missing)} (its mean lengths per request, tokens), which the "
            "engine model is calibrated at; set them on the curve (curve.attrs['prompt_tokens'] "
            f"= ..., the lengths the runs sent){other}"
        )
    unstated = [k for k in ("model", "gpu", "tensor_parallel")
                if given.get(k) is None and curve.attrs.get(k) is None]  # fmt: skip
    if unstated:
        raise InputError(
            f"runs: the curve does not say its {', '.join(unstated)}; pass "
            + ", ".join(f"{k}=..." for k in unstated)
            + " to calibrate (what the runs ran on)"
        )
    placed = sorted(set(curve.attrs.get("placed_by_littles_law", ())) &
                    {int(c) for c in curve.concurrency.values})  # fmt: skip
    if placed:
        raise InputError(
            f"runs: the curve's row at concurrency {', '.join(map(str, placed))}: a run at a "
            "request rate, placed by Little's law at its measured mean in flight (the curve's "
            "notes say which), not a closed loop at that concurrency, as the engine model would "
            "simulate it; read the result files with capnb.data.read_bench_runs (each run at its own "
            "request rate), or leave those rows out (curve.drop_sel(concurrency=[...]))"
        )
    rows = []
    for c in curve.concurrency.values:
        point = curve.sel(concurrency=c)
        base = {"source": "own run", "model": given.get("model") or curve.attrs.get("model"),
                "gpu": given.get("gpu") or curve.attrs.get("gpu"),
                "tensor_parallel": given.get("tensor_parallel") or curve.attrs.get("tensor_parallel"),
                "dtype": given.get("dtype") or curve.attrs.get("weight_dtype") or "bf16",
                "input_tokens": float(curve.attrs["prompt_tokens"]),
                "output_tokens": float(curve.attrs["output_tokens"]),
                "mode": "concurrency", "load": float(c)}  # fmt: skip
        for metric in ("ttft", "tpot", "itl", "e2e"):
            for q, stat in ((0.5, "p50"), (0.9, "p90"), (0.95, "p95"), (0.99, "p99")):
                if q in point.latency_quantile.values:
                    value = float(point.latency.sel(metric=metric, latency_quantile=q))
                    if math.isfinite(value) and value > 0:
                        rows.append({**base, "metric": metric, "stat": stat, "value": value})
            if "mean_latency" in curve:
                value = float(point.mean_latency.sel(metric=metric))
                if math.isfinite(value) and value > 0:
                    rows.append({**base, "metric": metric, "stat": "mean", "value": value})
    return pd.DataFrame(rows)

"""Calibrating the engine model on published per-request latencies (:func:`capnb.data.load_measurements`).

Parameters: per GPU the three efficiencies (compute, HBM bandwidth, interconnect: each in (0, 1]);
shared by every GPU three overheads (per step, per sequence in a step, per all-reduce hop: each
>= 0; the engine's per-request overhead is held at 0, see :data:`_SHARED`). They are fitted
jointly, by robust relative least squares, on every measured latency figure (TTFT, TPOT, ITL,
E2E; mean or a percentile): TTFT and E2E at loads up to the measured knee, ITL and TPOT at every
load.

The fit is a fixed-point iteration. A simulated step's time is a linear combination of its
features (:data:`capnb.kernels.engine.FEATURES`) with the inverse efficiencies and the overheads
as coefficients, so a simulated mean latency is ``features . parameters``; the kernel returns the
mean features of each metric. Each iteration simulates every measured point with the current
parameters, writes each measured figure as ``(simulated figure / simulated mean) x mean features
. parameters`` (exact at the current parameters), solves the non-negative least squares problem
(inverse efficiencies as 1 + x, x >= 0), and repeats until the parameters stop moving. In a
closed loop the schedule does not depend on step times, so the linear form of a mean is exact;
in an open loop and for percentiles it is a linearisation around the current parameters.

How each source is simulated is what a user would do with :func:`capnb.latency.engine`: its GPU,
model, tensor parallelism and dtype, every request at the run's mean input and output lengths, the
engine's default limits (``max_num_seqs`` 256, or the engine's own: :func:`engine_max_num_seqs`;
``max_num_batched_tokens`` 8192; KV cache ``"auto"``), and its mode: ``concurrency`` (closed
loop), ``request_rate`` (Poisson arrivals), ``batch`` (all requests at time 0, none left out as
warm-up).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import CapnbError, InputError
from ..kernels import engine as kernels
from . import _engine
from . import calibration as _calibration

__all__ = ["MODEL_ALIASES", "Point", "fit", "measured_knees", "points", "simulate_point"]

#: Measured models the catalog holds under another name, with the same architecture.
MODEL_ALIASES = {"meta-llama/Llama-3.3-70B-Instruct": "Llama-3.1-70B"}
#: GPUs a tensor-parallel group may span on one node's interconnect (NVLink, Infinity Fabric).
GPUS_PER_NODE = 8
#: Scale of the robust (Cauchy) weights: a figure off by more than this relative error counts less.
ROBUST_SCALE = 0.25
#: Parameters shared by every GPU and fitted: step, sequence and all-reduce overheads (seconds).
#: The engine's fourth overhead, per request outside the steps, is held at 0: fitted too, it
#: lowered the in-sample error (10.6 % against 13.9 %) but raised the held-out errors (lmdeploy
#: ITL/TPOT 25 % against 8 %, trtllm TTFT 44 % against 33 %), so it is not fitted.
_SHARED = 3
#: Weight of the pull of each GPU's efficiencies towards the pooled ones (see :func:`fit`).
PRIOR_WEIGHT = 1.0
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
_FEATURE_ROW = {"ttft": 0, "tpot": 1, "itl": 1, "e2e": 2}  # which mean features price a metric
_STAT_QUANTILE = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
_KNEE_STATS = ("p99", "p95", "p90", "p50", "mean")  # the TTFT statistic a knee is read from
_CONFIG = ("source", "gpu", "model", "engine", "tensor_parallel", "dtype", "input_tokens",
           "output_tokens", "mode")  # fmt: skip
_START = {"compute_efficiency": 0.5, "bandwidth_efficiency": 0.8, "interconnect_efficiency": 0.7,
          "step_overhead_s": 2e-3, "sequence_overhead_s": 2e-5, "allreduce_latency_s": 1e-5,
          "request_overhead_s": 0.0}  # fmt: skip


@dataclass
class Point:
    """One measured configuration at one load, with its latency figures ``{(metric, stat): s}``."""

    config: tuple
    load: float
    figures: dict = field(default_factory=dict)

    def __getattr__(self, name):
        if name in _CONFIG:
            return self.config[_CONFIG.index(name)]
        raise AttributeError(name)


def points(frame) -> tuple[list[Point], list[str]]:
    """Measured points of a :func:`load_measurements` table; and what was skipped, with why."""
    from ..data import load_model

    out, skipped = [], []
    latency = frame[frame["metric"].isin(LATENCY_METRICS)]
    for key, rows in latency.groupby([*_CONFIG, "load"], sort=True):
        config, load = tuple(key[:-1]), float(key[-1])
        name = MODEL_ALIASES.get(config[2], config[2])
        try:
            load_model(name)
        except CapnbError:
            note = f"{config[0]}: {config[2]} is not in the model catalog"
            if note not in skipped:
                skipped.append(note)
            continue
        figures = {
            (m, s): float(v) for m, s, v in zip(rows.metric, rows.stat, rows.value, strict=True)
        }
        reason = _unsupported(config)
        if reason:
            if reason not in skipped:
                skipped.append(reason)
            continue
        out.append(Point(config, load, figures))
    return out, skipped


def _unsupported(config) -> str:
    """Why a measured configuration cannot be simulated ('' when it can)."""
    source, gpu, model, _, tp, dtype = config[:6]
    if tp > GPUS_PER_NODE:
        return (
            f"{source}: {model} at tensor_parallel {tp} spans more than one {GPUS_PER_NODE}-GPU "
            "node; the model prices all-reduces at the catalog's intra-node bandwidth only"
        )
    _, gpu_vec, kv = _vectors(model, gpu, tp, dtype)
    if not np.isfinite(gpu_vec[:2]).all() or (tp > 1 and not np.isfinite(gpu_vec[2])):
        return (
            f"{source}: the GPU catalog has no interconnect bandwidth for {gpu} (needed at TP {tp})"
        )
    if kv <= 0:
        return f"{source}: {model} leaves no KV cache on {tp} x {gpu}"
    return ""


@functools.cache
def _vectors(model: str, gpu: str, tensor_parallel: int, dtype: str):
    from ..data import load_gpus, load_model

    spec = load_model(MODEL_ALIASES.get(model, model))
    weight_dtype = "fp8" if dtype == "fp8" else None
    model_vec = _calibration.model_vector(spec, tensor_parallel, weight_dtype=weight_dtype)
    gpu_vec = _calibration.gpu_vector(load_gpus([gpu]), gpu, weight_dtype or spec.weight_dtype)
    from .. import memory

    kv = memory.max_concurrency(
        model=spec, gpu=gpu, tensor_parallel=tensor_parallel, seq_len=_engine.BLOCK_SIZE,
        accounting="vllm", vllm_version="0.10", weight_dtype=weight_dtype,
    )  # fmt: skip
    return model_vec, gpu_vec, int(kv.kv_cache_tokens.item())


def simulate_point(point: Point, calibration_vec: np.ndarray, *, requests: int = 2000,
                   seed: int = 0):  # fmt: skip
    """Simulate a measured point as a user would; (values ``{(metric, stat): s}``, features).

    ``requests`` applies to the concurrency and request-rate modes (a batch is its own size).
    Returns (None, reason) when the point cannot be simulated.
    """
    model_vec, gpu_vec, kv_tokens = _vectors(
        point.model, point.gpu, point.tensor_parallel, point.dtype
    )
    if not np.isfinite(gpu_vec[:2]).all() or (
        point.tensor_parallel > 1 and not np.isfinite(gpu_vec[2])
    ):
        return None, f"{point.gpu} lacks a figure the model needs"
    p, o = max(round(point.input_tokens), 1), max(round(point.output_tokens), 1)
    if -(-(p + o) // _engine.BLOCK_SIZE) > kv_tokens // _engine.BLOCK_SIZE or kv_tokens <= 0:
        return None, "one request does not fit the KV cache"
    if point.mode == "batch":
        n, warmup, closed, load = int(point.load), 0, False, 1.0
        gaps = np.zeros(n)
    else:
        n = requests
        warmup = min(math.ceil(_engine.WARMUP_SHARE * n), n - 1)
        closed = point.mode == "concurrency"
        load = point.load
        gaps = _engine.arrival_gaps(np.random.default_rng(seed), n, 1.0)
    prompt = np.full(n, p, np.int64)
    output = np.full(n, o, np.int64)
    max_num_seqs = engine_max_num_seqs(point.engine, kv_tokens)
    lat, mean, _, features = _engine.simulate_points(
        model_vec, gpu_vec, point.tensor_parallel, calibration_vec, prompt, output, gaps,
        np.zeros(n, np.int64), closed=closed, loads=[load], max_num_seqs=max_num_seqs,
        max_num_batched_tokens=8192, kv_blocks=kv_tokens // _engine.BLOCK_SIZE, warmup=warmup,
    )  # fmt: skip
    values = {}
    for metric, stat in point.figures:
        m = kernels.METRICS.index(metric)
        if stat == "mean":
            values[(metric, stat)] = float(mean[0, m])
        else:
            q = list(_engine._curve.QUANTILES).index(_STAT_QUANTILE[stat])
            values[(metric, stat)] = float(lat[0, m, q])
    return values, features[0]


def engine_max_num_seqs(engine: str, kv_tokens: int) -> int:
    """The running-request limit an engine sets by default (vLLM's 256 for engines without one).

    SGLang sizes it from its KV pool: ``max_total_num_tokens // 2``, capped by its request pool
    (at least 2,048 slots); capnb takes ``min(KV tokens // 2, 2048)``.
    """
    if engine.lower().startswith("sglang"):
        return max(1, min(kv_tokens // 2, 2048))
    return 256


def measured_knees(pts: list[Point]) -> dict[tuple, tuple[float, str, str]]:
    """Per measured curve (:func:`curve_key`): (knee load, TTFT statistic it is read from, reason)."""
    out = {}
    by_curve: dict[tuple, list[Point]] = {}
    for pt in pts:
        by_curve.setdefault(curve_key(pt), []).append(pt)
    for config, group in by_curve.items():
        group.sort(key=lambda q: q.load)
        stat = next((s for s in _KNEE_STATS if all(("ttft", s) in q.figures for q in group)), None)
        if stat is None or len(group) < 2:
            out[config] = (math.nan, stat or "", "fewer than two loads with one TTFT statistic")
            continue
        loads = np.array([q.load for q in group])
        ttft = np.array([q.figures[("ttft", stat)] for q in group])
        value, reason = _engine.knee(loads, ttft)
        out[config] = (value, stat, reason)
    return out


def curve_key(pt: Point) -> tuple:
    """The measured curve a point belongs to: its configuration, lengths within a factor of 1.4.

    A run's mean lengths differ a little from load to load (sampled prompts, early stops); lengths
    are compared on a log2 scale rounded to whole steps, so 113 and 125 output tokens are one curve
    and 128 and 2,048 are two.
    """
    c = pt.config
    return (*c[:6], round(math.log2(c[6])), round(math.log2(c[7])), c[8])


def below_knee(pt: Point, knees) -> bool:
    """Whether a point's load is at or below its curve's measured knee (or no knee seen)."""
    value = knees[curve_key(pt)][0]
    return math.isnan(value) or pt.load <= value


def _groups(gpus: list[str], pooled: bool) -> dict[str, int]:
    return dict.fromkeys(gpus, 0) if pooled else {g: i for i, g in enumerate(gpus)}


def _vector(theta: np.ndarray, group: int) -> np.ndarray:
    inverse = 1.0 + theta[3 * group : 3 * group + 3]
    return np.array([*(1.0 / inverse), *theta[-_SHARED:], 0.0])


def fit(pts: list[Point], *, pooled: bool = False, iterations: int = 12, requests: int = 400,
        tolerance: float = 1e-3, prior=None):  # fmt: skip
    """Fit the engine calibration on measured points (figures at or below each measured knee).

    Returns ``{gpu: Calibration}`` (every GPU the same values when ``pooled``) and the iterations
    run. ``prior`` (the inverse efficiencies minus 1 of a pooled fit) shrinks each GPU's three
    efficiencies towards the pooled ones: one penalty row per parameter, weighted like one source
    whose figures are off by the parameter's relative deviation (:data:`PRIOR_WEIGHT`), so a GPU
    measured by few figures stays near the pooled values unless its figures agree otherwise.
    """
    knees = measured_knees(pts)
    # TTFT and E2E up to the knee (past it they measure a queue that grows with the run's length);
    # ITL and TPOT at every load (they price the steps the batch runs, which is what is fitted)
    used = []
    for pt in pts:
        keep = below_knee(pt, knees)
        figures = {k: v for k, v in pt.figures.items() if keep or k[0] in ("itl", "tpot")}
        if figures:
            used.append(Point(pt.config, pt.load, figures))
    gpus = sorted({pt.gpu for pt in used})
    if not used:
        raise InputError("fit: no measured point to fit")
    groups = _groups(gpus, pooled)
    n_groups = max(groups.values()) + 1
    theta = np.zeros(3 * n_groups + _SHARED)
    start = [_START[k] for k in kernels_fields()]
    for g in range(n_groups):
        theta[3 * g : 3 * g + 3] = [
            1.0 / start[0] - 1.0,
            1.0 / start[1] - 1.0,
            1.0 / start[2] - 1.0,
        ]
    theta[-_SHARED:] = start[3 : 3 + _SHARED]
    rows_per_source: dict[str, int] = {}
    for pt in used:
        rows_per_source[pt.source] = rows_per_source.get(pt.source, 0) + len(pt.figures)
    done = 0
    for iteration in range(1, iterations + 1):
        done = iteration
        design, target, weight = [], [], []
        for pt in used:
            group = groups[pt.gpu]
            cal = _vector(theta, group)
            values, features = simulate_point(pt, cal, requests=requests)
            if values is None:
                continue
            coefficients = np.array([1.0 / cal[0], 1.0 / cal[1], 1.0 / cal[2], *cal[3:]])
            for (metric, stat), measured in pt.figures.items():
                row = features[_FEATURE_ROW[metric]]
                base = float(row @ coefficients)
                simulated = values[(metric, stat)]
                if not (base > 0 and math.isfinite(simulated)):
                    continue
                a = row * (simulated / base)
                line = np.zeros(theta.size)
                line[3 * group : 3 * group + 3] = a[:3]
                line[-_SHARED:] = a[3 : 3 + _SHARED]
                design.append(line)
                target.append(measured - a[:3].sum())
                # relative error; each source counts alike; figures far off count less (Cauchy
                # weights, iteratively re-weighted: one source's unmodelled effect cannot drag
                # every GPU's parameters)
                residual = simulated / measured - 1.0
                robust = 1.0 / math.sqrt(1.0 + (residual / ROBUST_SCALE) ** 2)
                weight.append(robust / (measured * math.sqrt(rows_per_source[pt.source])))
        if prior is not None and not pooled:
            for g in range(n_groups):
                for k in range(3):
                    line = np.zeros(theta.size)
                    line[3 * g + k] = 1.0
                    design.append(line)
                    target.append(prior[k])
                    weight.append(PRIOR_WEIGHT / (1.0 + prior[k]))
        design, target, weight = np.array(design), np.array(target), np.array(weight)
        solved = _calibration._nnls(design * weight[:, None], target * weight)
        change = np.max(np.abs(solved - theta) / np.maximum(np.abs(theta), 1e-6))
        theta = solved
        if change < tolerance:
            break
    # the fit's own error, simulated at the final parameters
    errors = []
    for pt in used:
        values, _ = simulate_point(pt, _vector(theta, groups[pt.gpu]), requests=requests)
        if values is None:
            continue
        errors += [abs(values[k] / v - 1.0) for k, v in pt.figures.items()]
    label = "pooled over GPUs" if pooled else "per GPU"
    sources = sorted({pt.source for pt in used})
    result = {}
    for gpu in gpus:
        cal = _vector(theta, groups[gpu])
        fields = dict(zip(kernels_fields(), (float(v) for v in cal), strict=True))
        result[gpu] = _calibration.Calibration(
            **fields, fitted_on=f"{', '.join(sources)} ({label})", points=len(errors),
            fit_error=float(np.median(errors)) if errors else math.nan,
        )  # fmt: skip
    return result, done


def fit_all(pts: list[Point], **options):
    """The pooled fit, then the per-GPU fit shrunk towards it: ({gpu: Calibration}, pooled, iterations)."""
    pooled, _ = fit(pts, pooled=True, **options)
    base = next(iter(pooled.values()))
    prior = 1.0 / base.as_array()[:3] - 1.0
    per_gpu, iterations = fit(pts, prior=prior, **options)
    return per_gpu, base, iterations


def kernels_fields():
    """The engine's calibration fields, in its vector's order."""
    return kernels.CALIBRATION_FIELDS


def feature_names():
    return kernels.FEATURES

"""Calibrating the engine model on published latencies (:func:`capnb.data.load_measurements`).

Parameters: per GPU the three efficiencies (compute, HBM bandwidth, interconnect: each in (0, 1];
the interconnect per GPU, as its links and the engines' all-reduce kernels differ);
per serving engine (:data:`capnb.latency._engines.ENGINES`: vLLM V0 and V1, SGLang, TGI,
TensorRT-LLM, LMDeploy) three step overheads (per step, per sequence in a step, per all-reduce
hop: each >= 0), as the engines' schedulers, launches and all-reduces differ, and the per-request
overhead outside the steps (>= 0: the server's HTTP path, tokenising, the hand-off to the
scheduler, the first chunk's stream), which every run timed by a client of the server pays and an
offline run (a static batch timed in the engine's process, ``client`` ``offline`` in
``measured_runs.csv``) does not. (One overhead pooled over every source, offline ones included,
lowered the in-sample error but raised the held-out errors; recent servers' clients measure
40-170 ms of TTFT at one request in flight that no step holds.) A user's own runs refit it
(:func:`capnb.latency.calibrate`).

The fit is robust least squares of the log errors (scipy's trust-region solver, :func:`fit`):
every trial calibration simulates every measured point, each figure's error is
``log(simulated / measured)`` under a Cauchy loss, each source weighing alike, with finite
differences over the groups a figure depends on. Each GPU's efficiencies and each engine's
overheads are pulled towards those pooled over every GPU and engine (one penalty row each,
:data:`PRIOR_WEIGHT`), so a group measured by few figures stays near the pooled values unless its
figures agree otherwise. The routed experts' shares of the HBM and of the compute efficiency are
one value each for every GPU and engine, fitted when a fitted run serves a mixture of experts
(1, a dense read and product, otherwise).
Runs the step model does not express (attention data parallelism, :func:`expressed`) are predicted
and scored but never fitted.

Each point is simulated as it was run (:func:`setup`): its GPU, model, tensor parallelism and
dtype; the engine's scheduling policy and limits of that release with the run's own flags
(:func:`capnb.latency._engines.engine_settings`, ``datasets/benchmarks/measured_runs.csv``); the
run's number of requests when the source states it (every request reported, as the benchmark
clients do), else 2,000 with the first tenth left out (a steady state); its request lengths (each
request's own, uniform between the generator's bounds, or all at the run's means); its mode:
``concurrency`` (closed loop), ``request_rate`` (Poisson arrivals), ``batch`` (all at time 0).
Figures are computed from the simulated requests as the clients compute them (mean, and
percentiles by linear interpolation, numpy's default), over the requests the run timed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import CapnbError, InputError
from ..kernels import engine as kernels
from . import _engine, _engines
from . import calibration as _calibration

__all__ = [
    "MODEL_ALIASES",
    "Point",
    "expressed",
    "fit",
    "fit_all",
    "identified_gpus",
    "measured_knees",
    "points",
    "setup",
    "simulate_point",
]

#: Measured models the catalog holds under another name, with the same architecture.
MODEL_ALIASES = {"meta-llama/Llama-3.3-70B-Instruct": "Llama-3.1-70B"}
#: GPUs a tensor-parallel group may span on one node's interconnect (NVLink, Infinity Fabric).
GPUS_PER_NODE = 8
#: Scale of the robust (Cauchy) weights: a figure off by more than this relative error counts less.
ROBUST_SCALE = 0.25
#: The per-request overhead's position among the calibration fields.
_REQUEST = kernels.CALIBRATION_FIELDS.index("request_overhead_s")
#: The front end's position (fitted with the request overhead; an offline run pays neither).
_FRONTEND = kernels.CALIBRATION_FIELDS.index("frontend_s")
#: The routed experts' two shares and the FP8 products' share (no effect on other runs).
_EXPERT_READS = kernels.CALIBRATION_FIELDS.index("expert_efficiency")
_EXPERT_ARITHMETIC = kernels.CALIBRATION_FIELDS.index("expert_compute_efficiency")
_FP8 = kernels.CALIBRATION_FIELDS.index("fp8_compute_efficiency")
#: Weight of the pull of each group's parameters towards the pooled ones (see :func:`fit`).
PRIOR_WEIGHT = 1.0
#: Requests simulated per point when the run's length is not stated (steady state), and at most
#: this many times the concurrency in a closed loop (by then the loop has turned over its
#: requests 14 times past the warm-up).
REQUESTS = 2000
STEADY_TURNS = 16
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
_STAT_QUANTILE = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
_KNEE_STATS = ("p99", "p95", "p90", "p50", "mean")  # the TTFT statistic a knee is read from
_CONFIG = ("source", "gpu", "model", "engine", "engine_version", "tensor_parallel", "dtype",
           "input_tokens", "output_tokens", "mode")  # fmt: skip
_START = {"compute_efficiency": 0.5, "bandwidth_efficiency": 0.8, "interconnect_efficiency": 0.7,
          "step_overhead_s": 2e-3, "sequence_overhead_s": 2e-5, "allreduce_latency_s": 1e-5,
          "request_overhead_s": 0.03, "expert_efficiency": 0.7, "frontend_s": 1e-3,
          "expert_compute_efficiency": 0.7, "fp8_compute_efficiency": 0.7}  # fmt: skip


@dataclass
class Point:
    """One measured configuration at one load, with its latency figures ``{(metric, stat): s}``."""

    config: tuple
    load: float
    figures: dict = field(default_factory=dict)
    run: dict | None = None  # how the run was made (None: measured_runs.csv says)

    def __getattr__(self, name):
        if name in _CONFIG:
            return self.config[_CONFIG.index(name)]
        raise AttributeError(name)

    @property
    def engine_id(self) -> str:
        """The engine model's id (:func:`capnb.latency._engines.engine_id`)."""
        return _engines.engine_id(self.engine, self.engine_version)


def points(frame, runs=None) -> tuple[list[Point], list[str]]:
    """Measured points of a :func:`load_measurements` table; and what was skipped, with why.

    ``runs``: how the runs were made (a :func:`capnb.data.load_measurement_runs` table; default
    ``measured_runs.csv``'s); each point carries its run.
    """
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
        run = run_of(Point(config, load), runs)
        reason = _unsupported(config) or _unheld(Point(config, load, run=run))
        if reason:
            if reason not in skipped:
                skipped.append(reason)
            continue
        out.append(Point(config, load, figures, run))
    return out, skipped


def _unheld(pt: Point) -> str:
    """Why a run's longest request cannot be simulated: its KV cache would not hold it ('' else).

    vLLM rejects such a request (it never starts one its KV cache cannot hold), so a run that
    served it had more KV cache than capnb's vLLM accounting gives the engine's default launch:
    a flag the source does not state (``gpu_memory_utilization``, ``max_num_seqs``), or an
    accounting that is off for that model and GPU. Simulated with the accounting's cache, the
    run would not be the run that was measured, so it is listed, not scored.
    """
    run = run_of(pt)
    _, kv = _kv_cache(pt, run)
    *_, prompt, output, _ = _draw(pt, run, None, 0)  # the requests setup simulates
    longest = int((prompt + output).max())
    if kv > 0 and not _pool_holds(pt, run, kv, longest):
        return (
            f"{pt.source}: {pt.model} on {pt.tensor_parallel} x {pt.gpu}: a {longest:,}-token "
            f"request does not fit the {kv:,} tokens of KV cache vLLM's accounting gives "
            "its default launch (the run had more: a flag not stated, or the accounting is off)"
        )
    return ""


def _unsupported(config) -> str:
    """Why a measured configuration cannot be simulated ('' when it can)."""
    source, gpu, model = config[:3]
    tp, dtype = config[5], config[6]
    if tp > GPUS_PER_NODE:
        return (
            f"{source}: {model} at tensor_parallel {tp} spans more than one {GPUS_PER_NODE}-GPU "
            "node; the model prices all-reduces at the catalog's intra-node bandwidth only"
        )
    _, gpu_vec, kv = vectors(model, gpu, tp, dtype)
    if not np.isfinite(gpu_vec[:2]).all() or (tp > 1 and not np.isfinite(gpu_vec[2])):
        return (
            f"{source}: the GPU catalog has no interconnect bandwidth for {gpu} (needed at TP {tp})"
        )
    if kv <= 0:
        return f"{source}: {model} leaves no KV cache on {tp} x {gpu}"
    return ""


@functools.cache
def _spec(model: str):
    """The catalog's model of a measurement's ``model`` (its aliases resolved)."""
    from ..data import load_model

    return load_model(MODEL_ALIASES.get(model, model))


@functools.cache
def vectors(model: str, gpu: str, tensor_parallel: int, dtype: str, fp8_block: bool | None = None):
    """(engine model vector, GPU vector, KV cache tokens by vLLM's accounting) of a configuration.

    ``fp8_block``: whether FP8 weights are scaled by blocks (None: as the model's config says;
    :func:`fp8_block_of` reads a run's).
    """
    from ..data import load_gpus

    spec = _spec(model)
    weight_dtype = "fp8" if dtype == "fp8" else None
    model_vec = _engine.model_vector(spec, tensor_parallel, weight_dtype=weight_dtype,
                                     fp8_block=fp8_block)  # fmt: skip
    gpu_vec = _engine.gpu_vector(load_gpus([gpu]), gpu, weight_dtype or spec.weight_dtype)
    kv = _engine.kv_tokens_auto(spec, gpu, tensor_parallel, weight_dtype=weight_dtype)
    return model_vec, gpu_vec, kv


@functools.cache
def _runs():
    from ..data import load_measurement_runs

    return load_measurement_runs()


def run_of(pt: Point, runs=None) -> dict:
    """How a point's run was made (a dict).

    Its own record, else the most specific matching row of ``runs`` (default
    ``measured_runs.csv``; {} when none matches: the engine's defaults, every request at the
    means).
    """
    if pt.run is not None:
        return pt.run
    if runs is None:
        runs = _runs()
    best, best_score = {}, -1
    for row in runs[runs.source == pt.source].to_dict("records"):
        checks = (
            (row["engine"], pt.engine),
            (row["gpu"], pt.gpu),
            (row["tensor_parallel"], pt.tensor_parallel),
            (row["model"], pt.model),
            (row["mode"], pt.mode),
            (row["load"], pt.load),
        )
        score, fits = 0, True
        for want, have in checks:
            if want == "" or (isinstance(want, float) and math.isnan(want)):
                continue
            same = (math.isclose(want, float(have)) if isinstance(want, float)
                    else str(want) == str(have))  # fmt: skip
            fits = fits and same
            score += 1
        for column in ("input_tokens", "output_tokens"):
            if math.isfinite(row[column]):
                if abs(getattr(pt, column) / row[column] - 1) > 0.3:
                    fits = False
                score += 1
        if fits and score > best_score:
            best, best_score = row, score
    return best


def fp8_block_of(run: dict) -> bool | None:
    """Whether a run's FP8 weights are scaled by blocks (its ``fp8_scaling``; None: not stated)."""
    scaling = run.get("fp8_scaling") or ""
    return None if scaling == "" else scaling == "block"


def _number(row: dict, name: str):
    value = row.get(name, math.nan)
    return None if value is None or value == "" or math.isnan(value) else value


def engine_settings_of(pt: Point, kv_tokens: int, run: dict) -> _engines.EngineSettings:
    """The engine's scheduling settings for a measured run: its release's defaults, its flags."""
    from ..data import load_gpus

    memory = float(load_gpus([pt.gpu]).memory_bytes.values[0])
    chunked = _number(run, "chunked_prefill")
    settings = _engines.engine_settings(
        pt.engine_id, gpu_memory_bytes=memory, gpu=pt.gpu,
        max_model_len=_number(run, "max_model_len"), kv_tokens=kv_tokens,
        max_num_seqs=_number(run, "max_num_seqs"),
        max_num_batched_tokens=_number(run, "max_num_batched_tokens"),
        chunked_prefill=None if chunked is None else bool(chunked),
        policy=run.get("policy") or None,
    )  # fmt: skip
    return settings


@dataclass(frozen=True)
class Setup:
    """A measured run as the kernel takes it (everything but the calibration)."""

    model: np.ndarray
    gpu: np.ndarray
    tensor_parallel: int
    prompt: np.ndarray
    output: np.ndarray
    gaps: np.ndarray
    settings: np.ndarray
    timed: np.ndarray  # which requests the run timed (reported by the client)
    itl_count: int  # inter-token gaps of the reported requests
    offline: bool = False  # timed in the engine's own process: no time outside the steps

    def itl_timed(self) -> np.ndarray | None:
        """Which packed inter-token gaps belong to timed requests (None: all of them)."""
        if self.timed[int(self.settings[6]) :].all():
            return None
        warmup = int(self.settings[6])
        counts = np.where(np.arange(self.output.size) >= warmup, np.maximum(self.output - 1, 0), 0)
        return np.repeat(self.timed, counts)


#: Setups kept (each holds a run's request arrays; a fit asks for the same few hundred again and
#: again).
_SETUPS = 512


def _kv_cache(pt: Point, run: dict) -> tuple[np.ndarray, int]:
    """(engine model vector, KV cache tokens) of a run, with its attention data parallelism.

    The tokens as the run's engine stores them: vLLM V1's hybrid manager's pool, every other
    engine's full-length count (:func:`capnb.latency._engine.hybrid_engine`; the two differ only
    for a model with sliding-window layers).
    """
    model_vec, _, kv_tokens = vectors(pt.model, pt.gpu, pt.tensor_parallel, pt.dtype,
                                      fp8_block_of(run))  # fmt: skip
    spec = _spec(pt.model)
    windowed = spec.kv_groups(_engine.BLOCK_SIZE).windowed
    hybrid = _engine.hybrid_engine(spec, pt.engine_id)
    # a vLLM V1 run profiles its own max_num_seqs and step tokens (vectors: vllm serve's defaults)
    profiled = {k: _number(run, k) for k in ("max_num_seqs", "max_num_batched_tokens")}
    profiled = {k: int(v) for k, v in profiled.items() if v}
    if (windowed and not hybrid) or (pt.engine_id == "vllm-v1" and profiled):
        weight_dtype = "fp8" if pt.dtype == "fp8" else None
        settings = _engines.EngineSettings(pt.engine_id, **profiled)
        kv_tokens = _engine.kv_tokens_auto(spec, pt.gpu, pt.tensor_parallel, settings=settings,
                                           weight_dtype=weight_dtype, hybrid=hybrid)  # fmt: skip
    dp = int(_number(run, "attention_data_parallel") or 1)
    if dp > 1:  # each attention rank holds and reads the KV cache of its own requests only
        model_vec = model_vec.copy()
        model_vec[2] /= dp
    return model_vec, kv_tokens * dp


def _pool_holds(pt: Point, run: dict, kv_tokens: int, tokens: int) -> bool:
    """Whether a request of ``tokens`` fits the run's engine's pool (its KV layout's blocks)."""
    engine = engine_settings_of(pt, kv_tokens, run)
    layout = _engine.kv_layout(_spec(pt.model), engine)
    return bool(_engine.pool_holds(tokens, kv_tokens, layout, engine))


def _draw(pt: Point, run: dict, requests: int | None, seed: int):
    """(rng, n, warmup, prompt, output, timed): the requests a run is simulated with (seeded)."""
    rng = np.random.default_rng(seed)
    n, warmup = _count(pt, run, requests)
    prompt, output, timed = _lengths(pt, run, n, rng)
    # writable arrays of their own (pandas hands out read-only views): the engine kernel is
    # compiled for writable contiguous arrays, once, and a read-only one would compile it again
    return rng, n, warmup, np.array(prompt, np.int64), np.array(output, np.int64), timed


def _count(pt: Point, run: dict, requests: int | None) -> tuple[int, int]:
    """(requests simulated, requests left out at the start) of a measured point."""
    stated = _number(run, "requests")
    if pt.mode == "batch":
        return int(pt.load), 0
    if stated is not None:
        return int(stated), 0  # the run as it was: every request reported
    n = requests or REQUESTS
    if pt.mode == "concurrency":  # a steady closed loop needs a few turns of its requests
        n = min(n, max(STEADY_TURNS * int(pt.load), 64))
    return n, min(math.ceil(_engine.WARMUP_SHARE * n), n - 1)


@functools.lru_cache(maxsize=_SETUPS)
def _setup(config: tuple, load: float, run_items: tuple, requests: int | None,
           seed: int) -> Setup | None:  # fmt: skip
    run = dict(run_items)
    pt = Point(config, load, run=run)
    gpu_vec = vectors(pt.model, pt.gpu, pt.tensor_parallel, pt.dtype)[1]
    if not np.isfinite(gpu_vec[:2]).all() or (
        pt.tensor_parallel > 1 and not np.isfinite(gpu_vec[2])
    ):
        return None
    rng, n, warmup, prompt, output, timed = _draw(pt, run, requests, seed)
    if pt.mode == "batch":
        gaps, closed, load_value = np.zeros(n), 0.0, 1.0
    else:
        cv = _number(run, "arrival_cv")  # (a user's --burstiness; the sources' runs: Poisson)
        gaps = _engine.arrival_gaps(rng, n, 1.0 if cv is None else float(cv))
        closed, load_value = float(pt.mode == "concurrency"), pt.load
    model_vec, kv_tokens = _kv_cache(pt, run)
    longest = int((prompt + output).max())
    if kv_tokens <= 0:
        return None
    engine = engine_settings_of(pt, kv_tokens, run)
    layout = _engine.kv_layout(_spec(pt.model), engine)
    if not _engine.pool_holds(longest, kv_tokens, layout, engine):
        return None
    blocks = _engine.kv_pool(kv_tokens, layout, engine)
    max_seqs = engine.running_limit(kv_tokens)
    if pt.mode == "batch" and _number(run, "max_num_seqs") is None and pt.engine_id == "trtllm":
        max_seqs = n  # a static batch runs together
    budget = engine.max_num_batched_tokens or _engine.UNLIMITED
    settings = np.array([closed, load_value, max_seqs, budget, blocks, _engine.BLOCK_SIZE, warmup,
                         kernels.POLICIES.index(engine.policy), float(engine.chunked_prefill),
                         *_engine.layout_settings(layout), *engine.reserve,
                         float(engine.keeps_preempted)])  # fmt: skip
    gaps_count = int(np.maximum(output[warmup:] - 1, 0).sum())
    return Setup(model_vec, gpu_vec, int(pt.tensor_parallel), prompt, output, gaps, settings,
                 timed & (np.arange(n) >= warmup), gaps_count, offline(run))  # fmt: skip


def offline(run: dict) -> bool:
    """Whether a run timed the engine in its own process (``client`` ``offline``).

    Such a run (a static batch, an offline latency or throughput script) has no HTTP server,
    tokenising or streaming between the client's clock and the engine's steps, so it is simulated
    without the engine's per-request overhead; every other run (a client timing requests it sent
    to the server, as every user's own benchmark does) pays it.
    """
    return run.get("client") == "offline"


def _lengths(pt: Point, run: dict, n: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompt, output, timed) tokens of the ``n`` requests of a run, as its source states them.

    ``dataset`` (ShareGPT, every such run's): each request's prompt and output drawn apart from
    :func:`capnb.data.sharegpt_lengths` and scaled to the run's mean prompt and output tokens
    (until December 2026 every request was at the means, so TPOT, the mean over requests, equalled
    ITL, the mean over gaps, where the runs measured TPOT 1.8-2.5x ITL).
    """
    kind = run.get("lengths") or "mean"
    timed = np.ones(n, dtype=bool)
    if kind == "requests":
        from ..data import load_measured_requests

        table = load_measured_requests(pt.source)
        mine = table[(table.gpu == pt.gpu) & (table.tensor_parallel == pt.tensor_parallel)
                     & (table["mode"] == pt.mode) & np.isclose(table.load, pt.load)]  # fmt: skip
        mine = mine.sort_values("request")
        prompt = mine.input_tokens.to_numpy(np.int64)
        measured = mine.output_tokens.to_numpy(np.int64)
        # a request whose stream carried no text ended at its first token: served, not timed
        output = np.maximum(measured, 1)
        timed = measured >= 1
        if n != prompt.size:
            pick = np.arange(n) % prompt.size
            prompt, output, timed = prompt[pick], output[pick], timed[pick]
        return prompt, output, timed
    if kind == "sglang-random":
        return (*sglang_random_lengths(run, n), timed)
    if kind == "uniform":
        lo_in, hi_in = int(run["input_min"]), int(run["input_max"])
        lo_out, hi_out = int(run["output_min"]), int(run["output_max"])
        prompt = rng.integers(lo_in, hi_in + 1, n).astype(np.int64)
        output = rng.integers(lo_out, hi_out + 1, n).astype(np.int64)
        return prompt, output, timed
    if kind == "dataset":
        from ..data import sharegpt_lengths

        prompts, outputs = sharegpt_lengths()
        prompt = rng.choice(prompts, n) * (pt.input_tokens / prompts.mean())
        output = rng.choice(outputs, n) * (pt.output_tokens / outputs.mean())
        return (np.maximum(np.rint(prompt), 1).astype(np.int64),
                np.maximum(np.rint(output), 1).astype(np.int64), timed)  # fmt: skip
    p, o = max(round(pt.input_tokens), 1), max(round(pt.output_tokens), 1)
    return np.full(n, p, np.int64), np.full(n, o, np.int64), timed


def sglang_random_lengths(run: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) tokens of ``sglang.bench_serving --dataset-name random`` (seed 1).

    The client seeds numpy's global generator and draws every input length, then every output
    length, uniform between ``int(length * range_ratio)`` (at least 1 for inputs) and the
    nominal; at the default range ratio 0 the outputs start at 0 tokens, simulated as 1 (a
    request streams at least its first token). The bundled runs' published token totals are
    these draws'.
    """
    from ..data._measured import SGLANG_BENCH_SEED

    draws = np.random.RandomState(SGLANG_BENCH_SEED)
    prompt = draws.randint(int(run["input_min"]), int(run["input_max"]) + 1, n)
    output = draws.randint(0, int(run["output_max"]) + 1, n)
    return prompt.astype(np.int64), np.maximum(output, 1).astype(np.int64)


def setup(pt: Point, *, requests: int | None = None, seed: int = 0) -> Setup | None:
    """The kernel's inputs for a measured point (None: it cannot be simulated)."""
    run = run_of(pt)
    if pt.mode == "batch" or _number(run, "requests") is not None:
        requests = None  # (the run's own length: one setup, whatever the caller's default)
    return _setup(pt.config, pt.load, tuple(sorted(run.items())), requests, seed)


def simulate_setup(s: Setup, calibration_vec: np.ndarray):
    """Run the kernel on a setup: (ttft, e2e, itl, stats, features) of every request.

    An offline run (:func:`offline`) is simulated with no per-request overhead and no front end.
    """
    if s.offline and (calibration_vec[_REQUEST] != 0.0 or calibration_vec[_FRONTEND] != 0.0):
        calibration_vec = calibration_vec.copy()
        calibration_vec[_REQUEST] = 0.0
        calibration_vec[_FRONTEND] = 0.0
    n = s.prompt.size
    ttft, e2e = np.empty(n), np.empty(n)
    itl = np.empty(max(s.itl_count, 1))
    stats = np.empty(len(kernels.STATS))
    features = np.empty((3, len(kernels.FEATURES)))
    written = kernels.simulate(
        s.prompt, s.output, s.gaps, np.zeros(n, np.int64), s.settings, s.model, s.gpu,
        s.tensor_parallel, calibration_vec, ttft, e2e, itl, stats, features,
    )  # fmt: skip
    return ttft, e2e, itl[:written], stats, features


def figures_of(s: Setup, ttft, e2e, itl, wanted) -> dict:
    """The wanted figures ``{(metric, stat): s}`` of simulated requests, as the clients compute them."""
    timed = s.timed
    many = timed & (s.output > 1)
    values = {
        "ttft": ttft[timed],
        "e2e": e2e[timed],
        "tpot": (e2e[many] - ttft[many]) / (s.output[many] - 1),
        "itl": itl if (mask := s.itl_timed()) is None or not itl.size else itl[mask],
    }
    out = {}
    for metric, stat in wanted:
        v = values[metric]
        if v.size == 0:
            out[(metric, stat)] = math.nan
        elif stat == "mean":
            out[(metric, stat)] = float(v.mean())
        else:
            out[(metric, stat)] = float(np.percentile(v, 100 * _STAT_QUANTILE[stat]))
    return out


def simulate_point(point: Point, calibration_vec: np.ndarray, *, requests: int | None = None,
                   seed: int = 0):  # fmt: skip
    """Simulate a measured point as it was run; (values ``{(metric, stat): s}``, mean features).

    ``requests``: how many to simulate when the run's length is not stated (None:
    :data:`REQUESTS`); a run of stated length, and a batch, are simulated as they were. Returns
    (None, reason) when the point cannot be simulated.
    """
    s = setup(point, requests=requests, seed=seed)
    if s is None:
        return None, "one request does not fit the KV cache, or the GPU lacks a figure"
    ttft, e2e, itl, _, features = simulate_setup(s, np.asarray(calibration_vec, dtype=float))
    return figures_of(s, ttft, e2e, itl, point.figures), features


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
    return (*c[:7], round(math.log2(pt.input_tokens)), round(math.log2(pt.output_tokens)), pt.mode)


def below_knee(pt: Point, knees) -> bool:
    """Whether a point's load is at or below its curve's measured knee (or no knee seen)."""
    value = knees[curve_key(pt)][0]
    return math.isnan(value) or pt.load <= value


# -- the fit ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Where each group's parameters sit in the fit's vector.

    Per GPU: compute, HBM and interconnect efficiency; per engine: step,
    sequence and all-reduce overheads and, when ``request`` is set, the per-request overhead
    (in parallel) and the front end's seconds a request (serial);
    last, when ``expert`` is set (a fitted run serves a mixture of experts), the routed experts'
    shares of the HBM and of the compute efficiency, shared by every group; after them, when
    ``fp8`` is set (a fitted run's matrix products are block-scaled FP8), the FP8 products'
    share of the compute efficiency, shared by every group too. A field not fitted is held at :data:`_HELD`
    (0 s of request overhead, experts read and computed as dense weights, FP8 products at FP8's
    catalog rate).
    """

    gpus: dict  # gpu -> group index
    engines: dict  # engine id -> group index
    request: bool = False
    expert: bool = False
    fp8: bool = False

    @property
    def n_gpu(self) -> int:
        return max(self.gpus.values()) + 1

    @property
    def n_engine(self) -> int:
        return max(self.engines.values()) + 1

    @property
    def per_engine(self) -> int:
        """Fields fitted per engine: three step overheads, and the request's two if fitted."""
        return 3 + 2 * int(self.request)

    @property
    def size(self) -> int:
        return (3 * self.n_gpu + self.per_engine * self.n_engine + 2 * int(self.expert)
                + int(self.fp8))  # fmt: skip

    def columns(self, gpu: str, engine: str) -> list[int]:
        """The eleven calibration fields' positions (-1: held at :data:`_HELD`)."""
        g, e = self.gpus[gpu], self.engines[engine]
        first = 3 * self.n_gpu + self.per_engine * e
        overheads = [first + k for k in range(3)]
        request = first + 3 if self.request else -1
        frontend = first + 4 if self.request else -1
        shared = 3 * self.n_gpu + self.per_engine * self.n_engine
        reads = shared if self.expert else -1
        arithmetic = shared + 1 if self.expert else -1
        fp8 = self.size - 1 if self.fp8 else -1
        return [3 * g, 3 * g + 1, 3 * g + 2, *overheads, request, reads, frontend, arithmetic, fp8]

    def vector(self, x: np.ndarray, gpu: str, engine: str) -> np.ndarray:
        return np.array([x[c] if c >= 0 else held
                         for c, held in zip(self.columns(gpu, engine), _HELD, strict=True)])  # fmt: skip

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = np.zeros(self.size), np.zeros(self.size)
        for gpu in self.gpus:
            for engine in self.engines:
                for c, (a, b) in zip(self.columns(gpu, engine), _BOUNDS, strict=True):
                    if c >= 0:
                        lo[c], hi[c] = a, b
        return lo, hi

    def start(self, base: np.ndarray) -> np.ndarray:
        x = np.zeros(self.size)
        for gpu in self.gpus:
            for engine in self.engines:
                for c, value in zip(self.columns(gpu, engine), base, strict=True):
                    if c >= 0:
                        x[c] = value
        return x


#: Bounds of the eleven calibration fields in a fit (efficiencies; seconds; a share; seconds;
#: two shares).
_BOUNDS = ((0.05, 1.0), (0.05, 1.0), (0.05, 1.0), (0.0, 0.05), (0.0, 2e-3), (0.0, 5e-4),
           (0.0, 2.0), (0.05, 1.0), (0.0, 0.1), (0.05, 1.0), (0.05, 1.0))  # fmt: skip
#: Their scales (the size of a typical change), for the optimiser and the prior's pull.
_SCALES = np.array([0.2, 0.2, 0.2, 2e-3, 2e-5, 2e-5, 0.02, 0.2, 2e-3, 0.2, 0.2])
#: The values of the fields a layout does not fit (the request's overheads, the experts' and
#: the FP8 products' shares).
_HELD = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0)


#: Where the routed experts' weight bytes sit in the engine's model vector.
_EXPERT_BYTES = kernels.MODEL_FIELDS.index("expert_bytes")
#: Where the flag of FP8 weights scaled by blocks sits in it.
_FP8_BLOCK = kernels.MODEL_FIELDS.index("fp8_block")


def routes_experts(pt: Point) -> bool:
    """Whether a point's model is a mixture of experts (its routed experts' reads are priced)."""
    model_vec = vectors(pt.model, pt.gpu, pt.tensor_parallel, pt.dtype)[0]
    return bool(model_vec[_EXPERT_BYTES] > 0.0)


def fp8_products(pt: Point) -> bool:
    """Whether a point's matrix products are block-scaled FP8 ones (on a GPU with FP8 FLOP/s)."""
    model_vec, gpu_vec, _ = vectors(pt.model, pt.gpu, pt.tensor_parallel, pt.dtype,
                                    fp8_block_of(run_of(pt)))  # fmt: skip
    return bool(model_vec[_FP8_BLOCK] > 0.0 and gpu_vec[0] > gpu_vec[3])


def layout_of(pts: list[Point], pooled: bool, *, request: bool = False) -> Layout:
    """The fit's layout: one group per GPU and per engine, or one of each when ``pooled``.

    The routed experts' efficiencies are fitted when a point serves a mixture of experts, the
    FP8 products' when a point's matrix products run in block-scaled FP8 (:func:`fp8_products`).
    """
    gpus = sorted({pt.gpu for pt in pts})
    engines = sorted({pt.engine_id for pt in pts})
    expert = any(routes_experts(pt) for pt in pts)
    fp8 = any(fp8_products(pt) for pt in pts)
    if pooled:
        return Layout(dict.fromkeys(gpus, 0), dict.fromkeys(engines, 0), request, expert, fp8)
    return Layout({g: i for i, g in enumerate(gpus)}, {e: i for i, e in enumerate(engines)},
                  request, expert, fp8)  # fmt: skip


def fitted_figures(pts: list[Point], knees) -> list[Point]:
    """The figures a fit uses: all of them, each source weighing alike.

    Past the knee TTFT and E2E measure the queue, which the engine model now simulates as the
    run went (its length, its arrivals): they calibrate the saturation throughput, which figures
    below the knee say little about. (``knees`` is kept for callers that select.)
    """
    return [pt for pt in pts if pt.figures]


def _residuals(x, used, layout, requests, shares, prior, prior_weight, scales=_SCALES):
    """Each figure's robust log error (weighted by its source's share), then the prior's pull."""
    out = []
    for pt in used:
        values, _ = simulate_point(pt, layout.vector(x, pt.gpu, pt.engine_id), requests=requests)
        share = math.sqrt(shares[pt.source])
        for key, measured in pt.figures.items():
            simulated = values[key] if values is not None else math.nan
            r = math.log(simulated / measured) if simulated > 0 else 5.0
            r = min(max(r, -5.0), 5.0)  # (a NaN or a collapse counts as a factor of 150)
            out.append(share * math.copysign(math.sqrt(_robust(r)), r))
    if prior is not None:
        for c in range(layout.size):
            field = _field_of(layout, c)
            out.append(prior_weight * (x[c] - prior[c]) / max(scales[field], abs(prior[c])))
    return np.array(out)


def _field_of(layout: Layout, c: int) -> int:
    for gpu in layout.gpus:
        for engine in layout.engines:
            cols = layout.columns(gpu, engine)
            if c in cols:
                return cols.index(c)
    raise IndexError(c)


def _sparsity(used, layout, prior) -> np.ndarray:
    """Which parameters each residual depends on (the experts' and FP8 shares: their runs only)."""
    rows = []
    for pt in used:
        unused = {_REQUEST, _FRONTEND} if offline(run_of(pt)) else set()
        if not routes_experts(pt):
            unused |= {_EXPERT_READS, _EXPERT_ARITHMETIC}
        if not fp8_products(pt):
            unused.add(_FP8)
        cols = [c for i, c in enumerate(layout.columns(pt.gpu, pt.engine_id))
                if c >= 0 and i not in unused]  # fmt: skip
        for _ in pt.figures:
            line = np.zeros(layout.size, dtype=bool)
            line[cols] = True
            rows.append(line)
    if prior is not None:
        rows += list(np.eye(layout.size, dtype=bool))
    return np.array(rows)


def fit(pts: list[Point], *, pooled: bool = False, requests: int = 400, prior=None,
        start=None, request_overhead: bool = False, prior_weight: float | None = None,
        max_evaluations: int = 25, knees=None, scales=None):  # fmt: skip
    """Fit the engine calibration on measured points: robust least squares of the log errors.

    Every figure's error is ``log(simulated / measured)`` under a Cauchy loss (scale
    :data:`ROBUST_SCALE`: a figure far off counts less, so one source's unmodelled effect cannot
    drag every group), each source weighing alike; the simulation is run at each trial (scipy's
    trust-region least squares, finite differences over the groups a figure depends on).
    ``prior`` (a parameter vector of the same layout, e.g. the pooled fit spread over the groups)
    pulls each parameter towards it (:data:`PRIOR_WEIGHT`; a group no figure measures stays there).

    ``max_evaluations`` bounds the trial calibrations (each also costs a finite-difference
    Jacobian: one simulation of every point per group of parameters no figure shares).
    ``scales`` (eleven values, one per calibration field; None: :data:`_SCALES`) set each field's
    typical change: the optimiser's steps and the size of a move the prior's pull counts as one.

    Returns ``({(gpu, engine): Calibration}, x, layout, evaluations)``.
    """
    from scipy.optimize import least_squares

    used = fitted_figures(pts, knees)
    if not used:
        raise InputError("fit: no measured point to fit")
    layout = layout_of(used, pooled, request=request_overhead)
    base = np.array([_START[k] for k in kernels.CALIBRATION_FIELDS])
    x0 = layout.start(base) if start is None else np.asarray(start, dtype=float)
    lo, hi = layout.bounds()
    x0 = np.clip(x0, lo, hi)
    rows: dict[str, int] = {}
    for pt in used:
        rows[pt.source] = rows.get(pt.source, 0) + len(pt.figures)
    shares = {source: 1.0 / count for source, count in rows.items()}
    weight = PRIOR_WEIGHT if prior_weight is None else prior_weight
    scales = _SCALES if scales is None else np.asarray(scales, dtype=float)
    scale = np.array([scales[_field_of(layout, c)] for c in range(layout.size)])
    # tolerances of 1e-3: the figures' own noise (finite runs, percentiles) is larger than that
    result = least_squares(
        _residuals, x0, bounds=(lo, hi), x_scale=scale, diff_step=0.05, method="trf",
        jac_sparsity=_sparsity(used, layout, prior), max_nfev=max_evaluations,
        ftol=1e-3, xtol=1e-3, gtol=1e-3,
        args=(used, layout, requests, shares, prior, weight, scales),
    )  # fmt: skip
    x = result.x
    errors = []
    for pt in used:
        values, _ = simulate_point(pt, layout.vector(x, pt.gpu, pt.engine_id), requests=requests)
        if values is not None:
            errors += [abs(values[k] / v - 1.0) for k, v in pt.figures.items()
                       if math.isfinite(values[k])]  # fmt: skip
    sources = sorted(rows)
    label = "pooled over GPUs and engines" if pooled else "per GPU and engine"
    out = {}
    for gpu in layout.gpus:
        for engine in layout.engines:
            fields = dict(zip(kernels.CALIBRATION_FIELDS,
                              (float(v) for v in layout.vector(x, gpu, engine)), strict=True))  # fmt: skip
            out[(gpu, engine)] = _calibration.Calibration(
                **fields, fitted_on=f"{', '.join(sources)} ({label})", points=len(errors),
                fit_error=float(np.median(errors)) if errors else math.nan,
            )  # fmt: skip
    return out, x, layout, int(result.nfev)


def _robust(residual: float) -> float:
    """Cauchy loss of an error (:data:`ROBUST_SCALE`)."""
    return math.log1p((residual / ROBUST_SCALE) ** 2)


def fit_all(pts: list[Point], **options):
    """The pooled fit, then the per-group fit pulled towards it.

    Returns ``(per_group, pooled, evaluations)``: ``per_group`` maps ``(gpu, engine)`` to a
    :class:`~capnb.latency.calibration.Calibration` for every fitted engine and every GPU the fit
    identifies (:func:`identified_gpus`); ``pooled`` is the one Calibration fitted on every group
    at once. Runs the step model does not express (:func:`expressed`) are left out of the fit.

    Each engine's per-request overhead (the time a client's clock holds outside the steps: the
    HTTP server, tokenising, the hand-off to the scheduler, the stream's first chunk) is fitted
    when a fitted run was timed by a client of the server (:func:`offline` runs have none), and
    pulled towards the overhead pooled over the engines like the step overheads.
    """
    pts = [pt for pt in pts if expressed(pt)]
    if not pts:
        raise InputError("fit_all: no measured point the engine model expresses")
    options.setdefault("request_overhead", any(not offline(run_of(pt)) for pt in pts))
    pooled, _, _, _ = fit(pts, pooled=True, **options)
    base = next(iter(pooled.values()))
    layout = layout_of(fitted_figures(pts, None), pooled=False,
                       request=options["request_overhead"])  # fmt: skip
    prior = layout.start(base.engine_array())
    per_group, _, _, evaluations = fit(pts, prior=prior, start=prior, **options)
    known = identified_gpus(pts)
    per_group = {key: cal for key, cal in per_group.items() if key[0] in known}
    return per_group, base, evaluations


def expressed(pt: Point) -> bool:
    """Whether the step model expresses how a run served: not with attention data parallelism.

    The step prices attention sharded over the TP group and two all-reduces a layer. With
    SGLang's ``--enable-dp-attention`` every rank holds the whole attention weights for its own
    requests and the layers exchange activations by all-gather and scatter instead. The one such
    source (DeepSeek-V3 on 8 x H200, SGLang 0.4.1) measures 100-160 ms ITL at 1 request/s where
    the step's HBM floor is 18 ms (84 GB of FP8 weights a GPU at 4.8 TB/s); fitted on, its
    unexplained time went into the H200's HBM efficiency (0.67 on every source, 0.15 in three
    folds, 1.00 in the fold without it) and SGLang's all-reduce cost (31-35 us a hop, 25 us
    without it), and from there into every H200 and SGLang prediction. Such runs are still
    predicted and scored, as a held-out source.
    """
    return int(_number(run_of(pt), "attention_data_parallel") or 1) == 1


def identified_gpus(pts: list[Point]) -> set[str]:
    """GPUs whose own efficiencies a fit can tell apart: measured on two or more (model, engine).

    One model on one engine cannot separate the GPU from that model's kernels on that engine (an
    engine path far off the roofline, e.g. a run with CUDA graphs off, would pass for a slow GPU
    and be applied to every other model on it), so such a GPU is predicted with the pooled
    efficiencies, as an unmeasured one is. Its group is still fitted (it keeps its figures off
    the engines' overheads).
    """
    pairs: dict[str, set] = {}
    for pt in pts:
        pairs.setdefault(pt.gpu, set()).add((MODEL_ALIASES.get(pt.model, pt.model), pt.engine_id))
    return {gpu for gpu, seen in pairs.items() if len(seen) > 1}


def calibration_for_point(pt: Point, per_group: dict, pooled) -> tuple:
    """The fitted calibration a point is predicted with, and what was missing from the fit.

    A GPU or engine no fitted figure measured takes the pooled values for its part (efficiencies
    or overheads); the routed experts' shares of the HBM and compute efficiencies, and the FP8
    products' share of the compute efficiency, are those every group shares (1 when no fitted run
    served a mixture of experts, or ran its products in FP8). Returns ``(Calibration, gpu_seen,
    engine_seen)``.
    """
    gpus = {g for g, _ in per_group}
    engines = {e for _, e in per_group}
    gpu_seen, engine_seen = pt.gpu in gpus, pt.engine_id in engines
    pooled_values = pooled.engine_array()
    if gpu_seen:
        efficiencies = per_group[(pt.gpu, next(iter(engines)))].engine_array()[:3]
    else:
        efficiencies = pooled_values[:3]
    source = per_group[(next(iter(gpus)), pt.engine_id)] if engine_seen else pooled
    shared = next(iter(per_group.values()))
    overheads = [*source.engine_array()[3:7], shared.expert_efficiency, source.frontend_s,
                 shared.expert_compute_efficiency, shared.fp8_compute_efficiency]  # fmt: skip
    fields = dict(zip(kernels.CALIBRATION_FIELDS, (float(v) for v in (*efficiencies, *overheads)),
                      strict=True))  # fmt: skip
    cal = _calibration.Calibration(**fields, fitted_on=pooled.fitted_on)
    return cal, gpu_seen, engine_seen

"""Calibration of the analytic latency model: efficiencies and overheads fitted to measured step times.

The analytic model (:mod:`capnb.kernels.latency`) prices one forward step from a model's
architecture and a GPU's catalog figures. What no catalog says is how close a serving stack gets to
those figures, so six numbers are fitted by least squares to measured prefill and decode-step
times (:func:`capnb.data.load_step_times`):

- ``compute_efficiency``: share of the dense FLOP/s reached (prefill; decode at large batch);
- ``bandwidth_efficiency``: share of the HBM bandwidth reached (decode at small batch);
- ``interconnect_efficiency``: share of the GPU-to-GPU bandwidth reached by all-reduces;
- ``step_overhead_s``: fixed cost of a step (kernel launches, scheduling);
- ``sequence_overhead_s``: cost per sequence in the step (sampling, bookkeeping);
- ``allreduce_latency_s``: latency of one all-reduce per log2(TP) hop (two per layer).

The fit minimises relative error (each residual divided by the measured time) with non-negative
least squares; efficiencies are held at most 1. Which roofline arm (compute or memory) prices each
point depends on the efficiencies, so the fit alternates: assign arms, solve, repeat until the arms
stop changing. :func:`holdout` fits on some points and reports the error on the others.

Default calibrations (:func:`calibration_for`): a GPU with its own measurements (A100-80GB,
H100-SXM in the Splitwise data) gets its own fit; any other GPU gets the fit pooled over all
measured GPUs, whose error on a GPU it was not fitted on is what :func:`holdout` reports for
"leave one GPU out".
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

from .. import words
from ..data.modelspec import ModelSpec, _canonical_dtype
from ..errors import InputError
from ..kernels import latency as kernels

__all__ = [
    "Calibration",
    "calibration_for",
    "fit",
    "gpu_vector",
    "holdout",
    "holdout_report",
    "model_vector",
    "predict",
]


@dataclass(frozen=True)
class Calibration:
    """Efficiencies and overheads of one serving stack on one GPU (or pooled over GPUs).

    Attributes
    ----------
    compute_efficiency, bandwidth_efficiency, interconnect_efficiency
        Shares (0, 1] of the catalog's dense FLOP/s, HBM bandwidth and interconnect bandwidth.
    step_overhead_s, sequence_overhead_s, allreduce_latency_s
        Seconds per step, per sequence per step, per all-reduce per log2(TP) hop.
    request_overhead_s
        Seconds added once to each request's TTFT outside the GPU's steps (tokenising, the
        server's queues and network); the engine model's only (the analytic model has none).
    expert_efficiency
        Share (0, 1] of ``bandwidth_efficiency`` that a mixture of experts' routed-expert weight
        reads reach (grouped expert kernels; 1: read as dense weights, the value where no
        mixture-of-experts run was fitted); the engine model's only, no effect on a dense model.
    frontend_s
        Seconds each request holds the server's one front-end process before the scheduler sees
        it (one request at a time, first come first served: requests sent together queue
        there); the engine model's only.
    expert_compute_efficiency
        Share (0, 1] of ``compute_efficiency`` that a mixture of experts' routed-expert
        arithmetic reaches (grouped expert kernels, and a quantised format's dequantising; 1:
        computed as dense layers, the value where no mixture-of-experts run was fitted); the
        engine model's only, no effect on a dense model.
    fp8_compute_efficiency
        Share (0, 1] of ``compute_efficiency`` that the layers' matrix products reach when they
        run in FP8 scaled by blocks (a checkpoint with a ``weight_block_size``, as DeepSeek-V3's
        and Qwen3's FP8 releases, on a GPU with FP8 tensor cores, priced at the catalog's FP8
        FLOP/s: dequantising each block inside the product reaches less of that peak than BF16
        GEMMs do of theirs; per-tensor and per-channel FP8 run at the one efficiency; 1: the
        value where no such run was fitted); the engine model's only.
    fitted_on
        What the values were fitted on (source and selection).
    points
        Number of measured step times fitted.
    fit_error
        Absolute relative error on the fitted points (0.1 = 10 %): the mean for a step-time fit
        (:func:`calibrate`), the median for the engine model's fits.
    run_errors
        Per (metric, stat) of the runs it was calibrated on (:func:`capnb.latency.calibrate`):
        ``(metric, stat, median of simulated / measured - 1, runs)``, in sample (those runs);
        empty for a bundled or given calibration.
    """

    compute_efficiency: float
    bandwidth_efficiency: float
    interconnect_efficiency: float
    step_overhead_s: float
    sequence_overhead_s: float
    allreduce_latency_s: float
    request_overhead_s: float = 0.0
    expert_efficiency: float = 1.0
    frontend_s: float = 0.0
    expert_compute_efficiency: float = 1.0
    fp8_compute_efficiency: float = 1.0
    fitted_on: str = "given"
    points: int = 0
    fit_error: float = math.nan
    run_errors: tuple = ()

    def __post_init__(self):
        # (read back from JSON as lists: kept as tuples, so a calibration stays hashable)
        rows = tuple((str(m), str(s), float(e), int(n)) for m, s, e, n in self.run_errors)
        object.__setattr__(self, "run_errors", rows)
        for name in (*kernels.CALIBRATION_FIELDS, "request_overhead_s", "expert_efficiency",
                     "frontend_s", "expert_compute_efficiency", "fp8_compute_efficiency"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise InputError(f"Calibration.{name} must be a number, got {value!r}")
        for name in ("compute_efficiency", "bandwidth_efficiency", "interconnect_efficiency",
                     "expert_efficiency", "expert_compute_efficiency",
                     "fp8_compute_efficiency"):  # fmt: skip
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise InputError(f"Calibration.{name} must be in (0, 1], got {value!r}")
        for name in ("step_overhead_s", "sequence_overhead_s", "allreduce_latency_s",
                     "request_overhead_s", "frontend_s"):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise InputError(
                    f"Calibration.{name} must be a finite number of seconds >= 0, got {value!r}"
                )

    def as_array(self) -> np.ndarray:
        """The six values in :data:`capnb.kernels.latency.CALIBRATION_FIELDS` order."""
        return np.array([getattr(self, name) for name in kernels.CALIBRATION_FIELDS], dtype=float)

    def engine_array(self) -> np.ndarray:
        """The engine model's eleven values (:data:`capnb.kernels.engine.CALIBRATION_FIELDS`)."""
        return np.append(self.as_array(),
                         [self.request_overhead_s, self.expert_efficiency, self.frontend_s,
                          self.expert_compute_efficiency, self.fp8_compute_efficiency])  # fmt: skip

    def describe(self) -> str:
        """One line: the efficiencies and overheads, and the fit's error."""
        return (
            f"compute {self.compute_efficiency:.0%}, HBM {self.bandwidth_efficiency:.0%}, "
            f"interconnect {self.interconnect_efficiency:.0%} of catalog; overheads "
            f"{self.step_overhead_s * 1e3:.1f} ms/step, {self.sequence_overhead_s * 1e3:.2f} "
            f"ms/sequence, {self.allreduce_latency_s * 1e6:.0f} us/all-reduce hop"
            + (
                f", {self.request_overhead_s * 1e3:.1f} ms/request"
                if self.request_overhead_s
                else ""
            )
            + (
                f", {self.frontend_s * 1e3:.2f} ms/request in the front end (serial)"
                if self.frontend_s
                else ""
            )
            + (
                f"; routed experts read at {self.expert_efficiency:.0%} of that HBM efficiency"
                if self.expert_efficiency < 1.0
                else ""
            )
            + (
                f", computed at {self.expert_compute_efficiency:.0%} of that compute efficiency"
                if self.expert_compute_efficiency < 1.0
                else ""
            )
            + (
                f"; block-scaled FP8 matrix products at {self.fp8_compute_efficiency:.0%} of that "
                "compute efficiency"
                if self.fp8_compute_efficiency < 1.0
                else ""
            )
            + f" (fitted on {self.fitted_on}"
            # a stored or given calibration keeps no count or error of its fit: none is claimed
            + (f": {self.points} points, fit error {self.fit_error:.1%})" if self.points else ")")
            + self._run_error_words()
        )

    def _run_error_words(self) -> str:
        """How it reproduces the runs it was calibrated on, metric by metric ("" without them)."""
        by_metric: dict[str, list[str]] = {}
        for metric, stat, error, _ in self.run_errors:
            name = stat.upper() if stat.startswith("p") else stat
            by_metric.setdefault(metric, []).append(f"{name} {words.signed_percent(error)}")
        if not by_metric:
            return ""
        runs = max(n for *_, n in self.run_errors)
        misses = "; ".join(f"{m.upper()} {', '.join(each)}" for m, each in by_metric.items())
        return f"; on the {runs} runs it was fitted on (simulated / measured - 1): {misses}"


# -- model and GPU vectors -----------------------------------------------------------------------
def model_vector(
    spec: ModelSpec,
    tensor_parallel: int,
    *,
    kv_dtype: str = "auto",
    weight_dtype: str | None = None,
) -> np.ndarray:
    """Per-GPU figures of a model sharded over ``tensor_parallel`` GPUs (``MODEL_FIELDS`` order)."""
    if spec.attention == "MLA":
        width = spec.attention_heads * (spec.qk_nope_head_dim + spec.qk_rope_head_dim)
    else:
        width = spec.attention_heads * spec.head_dim
    return np.array(
        [
            2.0 * spec.layer_parameters / tensor_parallel,
            spec.weight_bytes(weight_dtype) / tensor_parallel,
            spec.kv_bytes_per_token(kv_dtype, tensor_parallel),
            float(spec.layers),
            width / tensor_parallel,
            float(spec.hidden_size),
            2.0 * spec.head_parameters / tensor_parallel,
            spec.sliding_layers / spec.layers,  # (every layer holds the same KV bytes a token)
            float(spec.sliding_window if spec.sliding_layers else 0),
        ]
    )


def gpu_vector(gpus, gpu: str, weight_dtype: str) -> np.ndarray:
    """Per-GPU FLOP/s (FP8 when the weights are fp8 and the GPU has FP8), HBM and link bytes/s.

    ``weight_dtype`` in any spelling the memory step reads (``"fp8_e4m3"``, ``"FP8"``,
    ``"float8_e4m3fn"`` are fp8: until 6 December 2026 only ``"fp8"`` was priced at FP8 FLOP/s,
    the others at BF16's while their weights counted 1 byte). FP32 weights are an
    :class:`~capnb.errors.InputError`: FP32 matrix products run at a fraction of the BF16 tensor
    rate and the catalog has no FP32 figure (they were priced at BF16's).
    """
    if weight_dtype is not None:
        weight_dtype = _canonical_dtype(weight_dtype, "weight_dtype")
    if weight_dtype == "fp32":
        raise InputError(
            f"weight_dtype = 'fp32': the GPU catalog has no FP32 FLOP/s for {gpu} (FP32 matrix "
            "products run at a fraction of BF16's tensor rate), so the latency models cannot "
            "price FP32 weights; capnb.memory plans their memory"
        )
    row = gpus.sel(gpu=gpu)
    flops = float(row.dense_bf16_flops)
    if weight_dtype == "fp8" and np.isfinite(float(row.dense_fp8_flops)):
        flops = float(row.dense_fp8_flops)
    return np.array([flops, float(row.hbm_bandwidth), float(row.interconnect_bandwidth)])


def _vectors(points):
    """Model and GPU vectors of every row of a step-times table."""
    from ..data import load_gpus, load_model

    gpus = load_gpus(sorted(set(points["gpu"])))
    specs = {name: load_model(name) for name in set(points["model"])}
    # one vector per distinct model and degree, GPU and dtype: the tables repeat them row by row
    rows = list(
        zip(points["model"], points["tensor_parallel"].astype(int), points["gpu"], strict=True)
    )
    models = {(m, tp): model_vector(specs[m], tp) for m, tp, _ in set(rows)}
    devices = {(g, m): gpu_vector(gpus, g, specs[m].weight_dtype) for m, _, g in set(rows)}
    model = np.array([models[m, tp] for m, tp, _ in rows])
    gpu = np.array([devices[g, m] for m, _, g in rows])
    return model, gpu


def _features(points) -> np.ndarray:
    model, gpu = _vectors(points)
    return kernels.step_features(
        points["phase"].to_numpy() == "prefill",
        points["batch"].to_numpy(dtype=float),
        points["tokens"].to_numpy(dtype=float),
        model,
        gpu,
        points["tensor_parallel"].to_numpy(dtype=np.int64),
    )


def predict(calibration: Calibration, points) -> np.ndarray:
    """Modelled seconds of each measured step in a :func:`capnb.data.load_step_times` table."""
    model, gpu = _vectors(points)
    return kernels.step_seconds(
        points["phase"].to_numpy() == "prefill",
        points["batch"].to_numpy(dtype=float),
        points["tokens"].to_numpy(dtype=float),
        model,
        gpu,
        points["tensor_parallel"].to_numpy(dtype=np.int64),
        calibration.as_array(),
    )


# -- the fit -------------------------------------------------------------------------------------
def _nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares (Lawson and Hanson's active set), on numpy.linalg.lstsq."""
    n = a.shape[1]
    passive = np.zeros(n, dtype=bool)
    x = np.zeros(n)
    scale = float(np.abs(a.T @ b).max()) or 1.0
    for _ in range(10 * n):
        gradient = a.T @ (b - a @ x)
        if passive.all() or (gradient[~passive] <= 1e-12 * scale).all():
            break
        passive[np.argmax(np.where(passive, -np.inf, gradient))] = True
        while True:
            trial = np.zeros(n)
            trial[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (trial[passive] > 0).all():
                x = trial
                break
            blocked = passive & (trial <= 0)
            step = np.min(x[blocked] / (x[blocked] - trial[blocked]))
            x = x + step * (trial - x)
            passive &= x > 1e-15
    return x


def fit(points, *, fitted_on: str | None = None) -> Calibration:
    """Fit a :class:`Calibration` to measured step times.

    Parameters
    ----------
    points
        A table like :func:`capnb.data.load_step_times` returns (``model``, ``gpu``,
        ``tensor_parallel``, ``phase``, ``batch``, ``tokens``, ``seconds``).
    fitted_on
        Label stored on the result (default: the GPUs and models fitted).

    Raises
    ------
    InputError
        Fewer points than parameters, or a non-positive measured time.

    Examples
    --------
    >>> from capnb.data import load_step_times
    >>> calibration = fit(load_step_times("splitwise").query("gpu == 'H100-SXM'"))
    >>> 0.3 < calibration.compute_efficiency <= 1.0
    True
    """
    seconds = points["seconds"].to_numpy(dtype=float)
    if len(points) < 6:
        raise InputError(f"fit: {len(points)} measured points cannot fit 6 parameters")
    if not (np.isfinite(seconds) & (seconds > 0)).all():
        raise InputError("fit: every measured time must be a positive number of seconds")
    compute, memory, wire, allreduces = _features(points)
    batch = points["batch"].to_numpy(dtype=float)
    tp = points["tensor_parallel"].to_numpy()
    weight = 1.0 / seconds
    # inverse efficiencies are 1 + x with x >= 0, so that no efficiency exceeds 1
    inverse = np.array([1.0, 1.0, 1.0])
    compute_arm = compute >= memory
    for _ in range(100):
        roofline = np.where(compute_arm, compute, memory)
        design = np.column_stack(
            [
                np.where(compute_arm, compute, 0.0),
                np.where(compute_arm, 0.0, memory),
                wire,
                np.ones_like(seconds),
                batch,
                allreduces,
            ]
        )
        target = seconds - roofline - wire
        solution = _nnls(design * weight[:, None], target * weight)
        inverse = 1.0 + solution[:3]
        arm = inverse[0] * compute >= inverse[1] * memory
        if (arm == compute_arm).all():
            break
        compute_arm = arm
    if not (tp > 1).any():
        inverse[2] = 1.0  # no all-reduce was measured: the interconnect stays at catalog speed
    values = dict(
        zip(
            kernels.CALIBRATION_FIELDS,
            [float(v) for v in (1 / inverse[0], 1 / inverse[1], 1 / inverse[2], *solution[3:])],
            strict=True,
        )
    )
    label = fitted_on or (
        f"{sorted(set(points['gpu']))} x {sorted(set(points['model']))} "
        f"({points.attrs.get('source', 'measured')})"
    )
    draft = Calibration(**values, fitted_on=label, points=len(points))
    error = float(np.mean(np.abs(predict(draft, points) / seconds - 1)))
    return Calibration(**{**asdict(draft), "fit_error": error})


def holdout(points, test: Callable | np.ndarray, *, label: str = "") -> dict[str, object]:
    """Fit on the points outside ``test`` and measure the error on those inside.

    Parameters
    ----------
    points
        Step times (:func:`capnb.data.load_step_times`).
    test
        A boolean mask over the rows, or a function ``points -> mask``.

    Returns
    -------
    dict
        ``label``, ``fitted`` and ``tested`` point counts, ``mean_error``, ``median_error``,
        ``p90_error`` and ``max_error`` (absolute relative errors on the held-out points), and the
        ``calibration`` fitted on the rest.
    """
    mask = np.asarray(test(points) if callable(test) else test, dtype=bool)
    if mask.all() or not mask.any():
        raise InputError("holdout: the test selection must leave points on both sides")
    calibration = fit(points[~mask])
    held = points[mask]
    error = np.abs(predict(calibration, held) / held["seconds"].to_numpy(dtype=float) - 1)
    return {
        "label": label,
        "fitted": int((~mask).sum()),
        "tested": int(mask.sum()),
        "mean_error": float(error.mean()),
        "median_error": float(np.median(error)),
        "p90_error": float(np.quantile(error, 0.9)),
        "max_error": float(error.max()),
        "calibration": calibration,
    }


def holdout_report(source: str = "splitwise"):
    """Held-out errors of the calibration on the bundled measurements, one row per experiment.

    For the Splitwise data, per GPU: leave out tensor parallelism 4 (fit TP 2 and 8 of
    Llama-2-70B), leave out the model BLOOM-176B (fit Llama-2-70B); and across GPUs: fit one GPU,
    test the other. For the LMDeploy data: leave out Llama-2-70B at TP 4 (fit the three smaller
    models at TP 1-2).

    Returns
    -------
    pandas.DataFrame
        Columns ``label``, ``fitted``, ``tested``, ``mean_error``, ``median_error``, ``p90_error``,
        ``max_error``: relative errors, abs(predicted / measured - 1), as fractions.
    """
    import pandas as pd

    from ..data import load_step_times

    points = load_step_times(source)
    rows = []
    if source == "splitwise":
        for gpu in sorted(set(points["gpu"])):
            here = points[points["gpu"] == gpu]
            llama = here[here["model"] == "Llama-2-70B"]
            rows.append(holdout(llama, llama["tensor_parallel"] == 4, label=f"{gpu}: TP 4"))
            rows.append(holdout(here, here["model"] == "BLOOM-176B", label=f"{gpu}: BLOOM-176B"))
        gpus = sorted(set(points["gpu"]))
        for gpu in gpus:
            rows.append(holdout(points, points["gpu"] == gpu, label=f"other GPU -> {gpu}"))
    elif source == "lmdeploy":
        rows.append(
            holdout(points, points["model"] == "Llama-2-70B", label="A100-80GB: Llama-2-70B")
        )
    else:
        raise InputError(f"source={source!r} is not known; use 'splitwise' or 'lmdeploy'")
    return pd.DataFrame([{k: v for k, v in row.items() if k != "calibration"} for row in rows])


@functools.cache
def _bundled(source: str) -> dict[str, Calibration]:
    from ..data import load_step_times

    points = load_step_times(source)
    fitted = {"*": fit(points, fitted_on=f"{source}, all GPUs pooled")}
    for gpu in sorted(set(points["gpu"])):
        fitted[gpu] = fit(points[points["gpu"] == gpu], fitted_on=f"{source}, {gpu}")
    return fitted


def calibration_for(gpu: str, source: str = "splitwise") -> Calibration:
    """The bundled calibration for a GPU: its own fit if the source measured it, else the pooled one.

    Examples
    --------
    >>> calibration_for("H100-SXM").fitted_on
    'splitwise, H100-SXM'
    >>> calibration_for("L40S").fitted_on
    'splitwise, all GPUs pooled'
    """
    fitted = _bundled(source)
    return fitted.get(gpu, fitted["*"])


def calibrations(gpus, calibration=None, source: str = "splitwise") -> dict[str, Calibration]:
    """Resolve a ``calibration`` argument (None, a Calibration or a mapping by GPU) per GPU."""
    if calibration is None:
        return {g: calibration_for(g, source) for g in gpus}
    if isinstance(calibration, Calibration):
        return dict.fromkeys(gpus, calibration)
    if isinstance(calibration, Mapping):
        missing = [g for g in gpus if g not in calibration]
        if missing:
            raise InputError(f"calibration: no entry for GPU {missing[0]!r}")
        for g in gpus:
            if not isinstance(calibration[g], Calibration):
                raise InputError(f"calibration[{g!r}] must be a Calibration")
        return {g: calibration[g] for g in gpus}
    raise InputError(
        f"calibration must be None, a Calibration or a mapping of them by GPU, got "
        f"{type(calibration).__name__}"
    )

"""Leave-one-dataset-out validation of the engine model, and the bundled engine calibration.

``python -m capnb.latency.validate`` prints the table; ``--write VALIDATION.md`` also stores the
calibration fitted on every source with the table (``capnb/latency/engine_calibration.json``, read
by :func:`capnb.latency.engine` and the capacity worksheet) and replaces the section
``## Latency model: leave-one-dataset-out`` of that file (nothing else in it).

For each measurement source (:func:`capnb.data.load_measurements`): fit the engine calibration on
all the other sources (:mod:`capnb.latency._fit`), then predict the source as a user would (its
GPU, model, tensor parallelism, mean lengths, mode and load; 2,000 requests per point, seed 0)
with the fit for its GPU, or the fit pooled over GPUs when no other source measured that GPU (its
per-GPU error then cannot be measured). Errors are absolute relative errors ``|predicted /
measured - 1|`` of each figure at loads up to the measured knee; the knee error compares the load
where the TTFT statistic reaches twice its floor, measured and predicted over the same loads. The
analytic model (:func:`capnb.latency.analytic`, step-time calibration, no refit) is scored on the
same figures where it applies: a closed loop, at the concurrency the engine runs (its running-request
limit and KV cache; above it only ITL/TPOT, as requests queue), and a batch's TTFT when one step
prefills the whole batch (a batch then decodes with no prefill beside it, unlike a closed loop).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np

from ..errors import InputError
from . import _fit, _fitted

SECTION = "## Latency model: leave-one-dataset-out"
GROUPS = {"ttft": "TTFT", "tpot": "ITL/TPOT", "itl": "ITL/TPOT", "e2e": "E2E"}
REQUESTS = 2000
#: Prompt tokens the engine prefills in one step (max_num_batched_tokens, as the engine model runs).
STEP_TOKENS = 8192


def data_hash() -> str:
    """SHA-256 (first 16 hex) of the bundled measurement files: what the stored fit was made on."""
    from ..data import dataset_path

    digest = hashlib.sha256()
    for path in sorted(dataset_path("benchmarks", "measured").glob("*.csv")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _record(cal) -> dict:
    return {k: float(v) for k, v in zip(_fit.kernels_fields(), cal.engine_array(), strict=True)}


def _fits(pts):
    return _fit.fit_all(pts)


def _running(pt: _fit.Point) -> int:
    """Requests the engine runs at once at a point: its running-request limit and its KV cache.

    A batch of 6,000 requests (or a closed loop above the limit) is not 6,000 sequences decoding
    together: the engine runs what its limit and KV cache hold and queues the rest, as the engine
    model simulates (:func:`capnb.latency._fit.simulate_point`).
    """
    _, _, kv_tokens = _fit._vectors(pt.model, pt.gpu, pt.tensor_parallel, pt.dtype)
    length = max(round(pt.input_tokens), 1) + max(round(pt.output_tokens), 1)
    return max(1, min(_fit.engine_max_num_seqs(pt.engine, kv_tokens), kv_tokens // length))


def _analytic(pt: _fit.Point):
    """The analytic model's figures for a point, NaN where it does not apply (None: none apply).

    The analytic model is a steady closed loop: ``C`` requests in flight, each finished one
    replaced by a new one whose prefill shares the steps. It is scored where a measurement is that:
    a closed loop, read at the concurrency the engine runs (:func:`_running`); above that,
    requests queue, which it does not model, so only the per-token figures (ITL, TPOT), set by the
    running batch, are scored. A batch submitted at once is prefilled first and then decodes with
    no prefill beside it, so only its TTFT is scored, and only when one step prefills the whole
    batch (:data:`STEP_TOKENS`; a larger batch's TTFT is mostly waiting for the others' prefill).
    A request-rate run's concurrency is not known: nothing is scored.
    """
    if pt.mode == "request_rate":
        return None
    if pt.mode == "batch" and pt.load * max(round(pt.input_tokens), 1) > STEP_TOKENS:
        return None
    running = _running(pt)
    queued = int(pt.load) > running
    scored = {"ttft"} if pt.mode == "batch" else {"itl", "tpot"} if queued else None
    from . import _curves

    spec_name = _fit.MODEL_ALIASES.get(pt.model, pt.model)
    w = _curves.workload(
        prompt_tokens=[max(round(pt.input_tokens), 1)],
        output_tokens=[max(round(pt.output_tokens), 1)],
    )
    curve = _curves.analytic(
        spec_name, pt.gpu, pt.tensor_parallel, workload=w,
        concurrency=[min(int(pt.load), running)],
        weight_dtype="fp8" if pt.dtype == "fp8" else None,
    )  # fmt: skip
    out = {}
    for metric, stat in pt.figures:
        if scored is not None and metric not in scored:
            out[(metric, stat)] = math.nan
        elif stat == "mean":
            out[(metric, stat)] = float(curve.mean_latency.sel(metric=metric).squeeze())
        else:
            q = _fit._STAT_QUANTILE[stat]
            out[(metric, stat)] = float(
                curve.latency.sel(metric=metric, latency_quantile=q).squeeze()
            )
    return out


def _predict(held, per_gpu, pooled, knees):
    """Rows of figures (source, curve, metric, stat, load, measured, engine, analytic, below_knee)."""
    rows, curves = [], {}
    for pt in held:
        seen = pt.gpu in per_gpu
        cal = per_gpu[pt.gpu] if seen else pooled
        values, _ = _fit.simulate_point(pt, cal.engine_array(), requests=REQUESTS)
        if values is None:
            continue
        analytic = _analytic(pt)
        key = _fit.curve_key(pt)
        below = _fit.below_knee(pt, knees)
        for (metric, stat), measured in pt.figures.items():
            rows.append({
                "source": pt.source, "gpu": pt.gpu, "gpu_seen": seen, "curve": key,
                "metric": metric, "stat": stat, "load": pt.load, "measured": measured,
                "engine": values[(metric, stat)],
                "analytic": math.nan if analytic is None else analytic[(metric, stat)],
                "below_knee": below,
            })  # fmt: skip
        curves.setdefault(key, []).append((pt.load, values))
    return rows, curves


def _knee_rows(curves, knees):
    out = []
    for key, group in curves.items():
        measured, stat, _ = knees[key]
        if not math.isfinite(measured):
            continue
        group.sort(key=lambda x: x[0])
        loads = np.array([g[0] for g in group])
        ttft = np.array([g[1].get(("ttft", stat), math.nan) for g in group])
        predicted, _ = _fit._engine.knee(loads, ttft)
        error = abs(predicted / measured - 1) if math.isfinite(predicted) else math.inf
        out.append(
            {"source": key[0], "curve": key, "measured": measured, "predicted": predicted,
             "error": error}
        )  # fmt: skip
    return out


def run(progress=None) -> dict:
    """Fit on everything, then leave each source out; the stored record (a dict)."""
    from ..data import load_measurements

    frame = load_measurements()
    pts, skipped = _fit.points(frame)
    knees = _fit.measured_knees(pts)
    sources = sorted({pt.source for pt in pts})
    say = progress or (lambda text: None)
    say("fitting on every source")
    per_gpu, pooled, iterations = _fits(pts)
    rows, knee_rows, folds = [], [], {}
    for source in sources:
        say(f"leaving out {source}")
        train = [pt for pt in pts if pt.source != source]
        held = [pt for pt in pts if pt.source == source]
        fold_gpu, fold_pooled, _ = _fits(train)
        folds[source] = {
            "gpus": {g: _record(c) for g, c in fold_gpu.items()},
            "pooled": _record(fold_pooled),
        }
        fold_rows, curves = _predict(held, fold_gpu, fold_pooled, knees)
        rows += fold_rows
        knee_rows += _knee_rows(curves, knees)
    return {
        "data_hash": data_hash(),
        "calibration": {
            "fitted_on": f"{len(sources)} sources: {', '.join(sources)}",
            "iterations": iterations,
            "gpus": {g: _record(c) for g, c in per_gpu.items()},
            "pooled": _record(pooled),
            "fit_error_median": next(iter(per_gpu.values())).fit_error,
        },
        "folds": folds,
        "skipped": skipped,
        "rows": [{**r, "curve": list(r["curve"])} for r in rows],
        "knees": [{**r, "curve": list(r["curve"])} for r in knee_rows],
    }


def _error(rows, model):
    errors = [abs(r[model] / r["measured"] - 1) for r in rows if math.isfinite(r[model])]
    if not errors:
        return None
    return float(np.median(errors)), float(np.quantile(errors, 0.9)), len(errors)


def table(record: dict) -> list[dict]:
    """Per source and metric group (below the knee): engine and analytic errors, knee error."""
    out = []
    rows = [r for r in record["rows"] if r["below_knee"]]
    for source in sorted({r["source"] for r in rows}):
        mine = [r for r in rows if r["source"] == source]
        unseen = sorted({r["gpu"] for r in mine if not r["gpu_seen"]})
        knees = [k for k in record["knees"] if k["source"] == source]
        knee = float(np.median([k["error"] for k in knees])) if knees else math.nan
        reached = sum(math.isfinite(k["predicted"]) for k in knees)
        for group in ("TTFT", "ITL/TPOT", "E2E"):
            sel = [r for r in mine if GROUPS[r["metric"]] == group]
            engine = _error(sel, "engine")
            if engine is None:
                continue
            out.append({
                "source": source, "metric": group, "figures": engine[2],
                "engine_median": engine[0], "engine_p90": engine[1],
                "analytic": _error(sel, "analytic"), "unseen_gpus": unseen,
                "knee_error": knee, "knees": len(knees), "knees_reached": reached,
            })  # fmt: skip
    return out


def engine_validation():
    """The stored leave-one-dataset-out table (a pandas DataFrame), one row per source and metric.

    Columns: ``source``, ``metric`` (TTFT, ITL/TPOT, E2E), ``figures``, ``engine_median`` and
    ``engine_p90`` (absolute relative errors of the engine model, held out), ``analytic_median``
    (the analytic model on the same figures, NaN where it does not apply), ``knee_error``
    (median over the source's curves; inf when the model's curve never reaches the knee) and
    ``unseen_gpus`` (GPUs no other source measured). Empty when nothing is stored.
    """
    import pandas as pd

    data = _fitted.stored()
    if data is None:
        return pd.DataFrame()
    rows = table(data)
    return pd.DataFrame(
        [
            {
                "source": r["source"],
                "metric": r["metric"],
                "figures": r["figures"],
                "engine_median": r["engine_median"],
                "engine_p90": r["engine_p90"],
                "analytic_median": r["analytic"][0] if r["analytic"] else float("nan"),
                "knee_error": r["knee_error"],
                "unseen_gpus": ", ".join(r["unseen_gpus"]),
            }
            for r in rows
        ]
    )


def markdown(record: dict) -> str:
    """The VALIDATION.md section (from the heading to the end of the section)."""
    cal = record["calibration"]
    lines = [
        SECTION,
        "",
        "Generated by `python -m capnb.latency.validate --write VALIDATION.md` (do not edit by "
        "hand); stored with the calibration in `capnb/latency/engine_calibration.json` "
        f"(measurement files hash `{record['data_hash']}`).",
        "",
        "For each source of `datasets/benchmarks/measured/`, the engine model "
        "(`capnb.latency.engine`) is calibrated on all the *other* sources and predicts the source "
        "as a user would (its GPU, model, TP, dtype, mean lengths, mode and load; engine defaults "
        "max_num_seqs 256, max_num_batched_tokens 8192, KV cache from the vLLM accounting; 2,000 "
        "requests per point). Errors are |predicted / measured - 1| of every latency figure (mean "
        "or percentile) at loads up to the measured knee (the load where the source's TTFT "
        "statistic reaches twice its floor). The analytic model (step-time calibration) is scored "
        "on the same figures where it applies: a closed loop, at the concurrency the engine runs "
        "(its running-request limit and KV cache; above it ITL/TPOT only, as requests queue), and "
        "a batch's TTFT when one step prefills the whole batch (8,192 tokens; a batch then "
        "decodes with no prefill beside it, unlike the analytic model's closed loop).",
        "",
        "| held-out source | metric | figures | engine median | engine P90 | analytic median | "
        "analytic P90 | knee error (median) | GPU not in training |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table(record):
        analytic = row["analytic"]
        knee = (
            f"{row['knee_error']:.0%} ({row['knees_reached']}/{row['knees']} reached)"
            if row["knees"]
            else "no measured knee"
        )
        if row["knee_error"] == math.inf:
            knee = f"not reached ({row['knees_reached']}/{row['knees']})"
        lines.append(
            f"| {row['source']} | {row['metric']} | {row['figures']} | "
            f"{row['engine_median']:.0%} | {row['engine_p90']:.0%} | "
            + (f"{analytic[0]:.0%} | {analytic[1]:.0%} | " if analytic else "n/a | n/a | ")
            + f"{knee} | {', '.join(row['unseen_gpus']) or '-'} |"
        )
    rows = table(record)
    both = [r for r in rows if r["analytic"]]
    better = [r for r in both if r["engine_median"] < r["analytic"][0]]
    met = [f"{r['source']} {r['metric']}" for r in rows if r["engine_median"] <= 0.15]
    knees_met = sorted({r["source"] for r in rows if r["knees"] and r["knee_error"] <= 0.25})
    lines += [
        "",
        f"The engine's median error is below the analytic model's in {len(better)} of "
        f"{len(both)} rows where both apply. Goal (median <= 15 %) met for: "
        f"{', '.join(met) or 'none'}; knee within 25 % (median) for: "
        f"{', '.join(knees_met) or 'none'}.",
        "",
        "`capnb.capacity.sweep` and the plan keep the analytic model as their default: the engine "
        "is better on ITL/TPOT and on the SGLang source's TTFT, but not on every source's TTFT, "
        "and its held-out error is still above the goal on most rows; `capnb.capacity.plan` and "
        "`safe_concurrency` take an engine curve (concurrency mode) like any other.",
        "",
        "Where the GPU column names a GPU, no other source measured it: the source was predicted "
        "with the efficiencies pooled over the other GPUs, so its error is that of an unmeasured "
        "GPU, and the error of that GPU's own calibration cannot be measured held out.",
        "",
        f"Calibration fitted on all sources ({cal['fitted_on']}; {cal['iterations']} iterations; "
        f"median in-sample error {cal['fit_error_median']:.1%}):",
        "",
        "| GPU | compute efficiency | HBM efficiency | interconnect efficiency |",
        "|---|---|---|---|",
    ]
    for gpu, values in [*cal["gpus"].items(), ("pooled (other GPUs)", cal["pooled"])]:
        lines.append(
            f"| {gpu} | {values['compute_efficiency']:.2f} | {values['bandwidth_efficiency']:.2f} | "
            f"{values['interconnect_efficiency']:.2f} |"
        )
    shared = next(iter(cal["gpus"].values()))
    lines += [
        "",
        f"Shared by every GPU: step overhead {shared['step_overhead_s'] * 1e3:.2f} ms, per "
        f"sequence {shared['sequence_overhead_s'] * 1e6:.1f} us, per all-reduce hop "
        f"{shared['allreduce_latency_s'] * 1e6:.1f} us, per request (outside the steps) "
        f"{shared['request_overhead_s'] * 1e3:.2f} ms.",
    ]
    if record["skipped"]:
        lines += ["", "Not simulated: " + "; ".join(record["skipped"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """The command line: print the table; with ``--write``, store the fit and the section."""
    parser = argparse.ArgumentParser(prog="python -m capnb.latency.validate", description=__doc__)
    parser.add_argument("--write", metavar="VALIDATION.md", help="store the fit and the section")
    parser.add_argument(
        "--stored",
        action="store_true",
        help="no refit: the section from the stored record (refused if the measurements changed)",
    )
    args = parser.parse_args(argv)
    if args.stored:
        record = _fitted.stored()
        if record is None or record["data_hash"] != data_hash():
            parser.error(
                "the stored record is missing or of other measurements: run without --stored"
            )
    else:
        record = run(progress=lambda text: print(text, file=sys.stderr))
    text = markdown(record)
    print(text)
    if args.write:
        if not args.stored:
            _fitted.PATH.write_text(
                json.dumps(record, separators=(",", ":"), default=float) + "\n", encoding="utf-8"
            )
        from ..data import write_section

        write_section(Path(args.write), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def held_out_error(gpu: str, metric: str, *, model: str = "analytic") -> dict:
    """The latency model's held-out error for one GPU and SLA metric, from the stored validation.

    Reads the leave-one-dataset-out record (``engine_calibration.json``): the median absolute
    relative error of ``model`` (``"analytic"`` or ``"engine"``) over every held-out figure of the
    metric's group (TTFT; ITL/TPOT; E2E) below the knee, on the sources that measured ``gpu``.
    Where no figure of that GPU scores the model (no source measured it, or not where the model
    applies: the analytic model is not scored on request-rate runs or queued batches), the error
    pooled over every source stands in for it and ``measured_on_gpu`` is False.

    Returns
    -------
    dict
        ``median`` (a share, NaN where the model was scored on no figure of the group),
        ``figures`` (how many), ``sources`` (their names), ``measured_on_gpu`` (bool).

    Examples
    --------
    >>> e = held_out_error("A100-80GB", "tpot", model="engine")
    >>> e["measured_on_gpu"], e["sources"]
    (True, ('lmdeploy-a100',))
    """
    if model not in ("analytic", "engine"):
        raise InputError(f"model must be 'analytic' or 'engine', got {model!r}")
    if metric not in GROUPS:
        raise InputError(f"metric must be one of {sorted(GROUPS)}, got {metric!r}")
    record = _fitted.stored()
    if record is None:
        raise InputError(
            "no stored validation: run python -m capnb.latency.validate --write VALIDATION.md"
        )
    group = GROUPS[metric]
    rows = [
        r
        for r in record["rows"]
        if r["below_knee"] and GROUPS[r["metric"]] == group and math.isfinite(r[model])
    ]
    mine = [r for r in rows if r["gpu"] == gpu]
    used = mine or rows
    errors = [abs(r[model] / r["measured"] - 1) for r in used]
    return {
        "median": float(np.median(errors)) if errors else math.nan,
        "figures": len(errors),
        "sources": tuple(sorted({r["source"] for r in used})),
        "measured_on_gpu": bool(mine),
    }

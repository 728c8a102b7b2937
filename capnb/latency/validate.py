"""Held-out validation of the engine model, and the bundled engine calibration.

``python -m capnb.latency.validate`` prints the tables; ``--write VALIDATION.md`` also stores the
record (``capnb/latency/engine_calibration.json``: the calibration fitted on every source, each
fold's, every held-out figure) and replaces the two latency sections of that file. ``--source
NAME`` reruns only that source's fold on the stored record (:func:`refresh`); ``--own-run`` reruns
only the own-run folds on the stored fold calibrations (:func:`refresh_own_run`); ``--figures NAME``
prints that source's stored held-out figures beside their predictions (:func:`figures_markdown`).
``--jobs N`` runs the fits and the own-run folds in ``N`` processes; the record is the same, row
for row, as one process writes (each job is a whole fit, and their results are put back in order).

Leave one source out
    For each measurement source (:func:`capnb.data.load_measurements`): fit the engine calibration
    on all the *other* sources (:func:`capnb.latency._fit.fit_all`), then predict the source as it
    was run (its GPU, model, TP, dtype, engine and flags, lengths, mode, load and run length). A
    GPU or engine no other source measured takes the values pooled over the others (its error is
    that of an unmeasured one). Errors are ``|predicted / measured - 1|`` of every latency figure,
    reported below and above the measured knee (the load where the source's TTFT statistic
    reaches twice its floor); the knee error compares that load, measured and predicted over the
    same loads. The analytic model (:func:`capnb.latency.analytic`, step-time calibration) is
    scored on the same figures where it applies (:func:`_analytic`).
Calibrated on the user's own run
    What a user does with two or three runs of their own (:func:`capnb.latency.calibrate`): for
    each measured curve of three or more loads, each load in turn is held out and the calibration
    is fitted on the curve's other loads, pulled towards the fold's calibration that never saw the
    source (leave one rate out); for each configuration measured at several lengths, each length
    in turn is held out and the calibration fitted on the others (leave one length out).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

from ..errors import InputError
from . import _fit, _fitted

SECTION = "## Latency model: leave-one-source-out"
OWN_RUN_SECTION = "## Latency model: calibrated on the user's own run"
GROUPS = {"ttft": "TTFT", "tpot": "ITL/TPOT", "itl": "ITL/TPOT", "e2e": "E2E"}
#: Metric groups in table order.
GROUP_ORDER = ("TTFT", "ITL/TPOT", "E2E")
REQUESTS = _fit.REQUESTS
#: Prompt tokens the engine prefills in one step (max_num_batched_tokens, as the engine model runs).
STEP_TOKENS = 8192
#: The goals of issue 30: held-out median error per source, knee error, own-run median error.
SOURCE_GOAL, KNEE_GOAL, OWN_RUN_GOAL = 0.15, 0.25, 0.10
#: Quantiles of the held-out ratio measured / predicted that bound a capacity answer's band.
BAND_QUANTILES = (0.1, 0.9)


def data_hash() -> str:
    """SHA-256 (first 16 hex) of the bundled measurement files: what the stored fit was made on."""
    from ..data import dataset_path

    return files_hash([
        *sorted(dataset_path("benchmarks", "measured").glob("*.csv")),
        dataset_path("benchmarks", "measured_runs.csv"),
        *sorted(dataset_path("benchmarks", "requests").glob("*.csv")),
    ])  # fmt: skip


def files_hash(paths) -> str:
    """SHA-256 (first 16 hex) of files' names and bytes, in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _running(pt: _fit.Point) -> int:
    """Requests the engine runs at once at a point: its running-request limit and its KV cache."""
    s = _fit.setup(pt, requests=REQUESTS)
    _, _, kv_tokens = _fit.vectors(pt.model, pt.gpu, pt.tensor_parallel, pt.dtype)
    length = max(round(pt.input_tokens), 1) + max(round(pt.output_tokens), 1)
    limit = int(s.settings[2]) if s is not None else 256
    return max(1, min(limit, kv_tokens // length))


def _analytic(pt: _fit.Point):
    """The analytic model's figures for a point, NaN where it does not apply (None: none apply).

    The analytic model is a steady closed loop: ``C`` requests in flight, each finished one
    replaced by a new one whose prefill shares the steps. It is scored where a measurement is that:
    a closed loop, read at the concurrency the engine runs (:func:`_running`); above that,
    requests queue, which it does not model, so only the per-token figures (ITL, TPOT), set by the
    running batch, are scored. A batch submitted at once is prefilled first and then decodes with
    no prefill beside it, so only its TTFT is scored, and only when one step prefills the whole
    batch (:data:`STEP_TOKENS`). A request-rate run's concurrency is not known: nothing is scored.
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


def _record_of(cal) -> dict:
    return {k: float(v) for k, v in zip(_fit.kernels.CALIBRATION_FIELDS, cal.engine_array(),
                                        strict=True)}  # fmt: skip


def calibration_record(per_group: dict, pooled) -> dict:
    """A fit as stored: per GPU, per engine, shared by all (the routed experts' two), and pooled."""
    gpus, engines, shared = {}, {}, {}
    for (gpu, engine), cal in per_group.items():
        values = _record_of(cal)
        gpus[gpu] = {k: values[k] for k in _fitted.GPU_FIELDS}
        engines[engine] = {k: values[k] for k in _fitted.ENGINE_FIELDS}
        shared = {k: values[k] for k in _fitted.SHARED_FIELDS}
    return {"gpus": gpus, "engines": engines, "shared": shared, "pooled": _record_of(pooled)}


def _experts_fitted(train) -> bool:
    """Whether a fit on these points fitted the routed experts' efficiency (a fitted MoE run)."""
    return any(_fit.routes_experts(pt) for pt in train if _fit.expressed(pt))


def _predict(held, per_group, pooled, knees, experts_fitted=True):
    """Rows of figures of the held-out points, and their curves' predictions (for the knees)."""
    rows, curves = [], {}
    for pt in held:
        cal, gpu_seen, engine_seen = _fit.calibration_for_point(pt, per_group, pooled)
        experts_seen = experts_fitted or not _fit.routes_experts(pt)
        values, _ = _fit.simulate_point(pt, cal.engine_array(), requests=REQUESTS)
        if values is None:
            continue
        analytic = _analytic(pt)
        key = _fit.curve_key(pt)
        below = _fit.below_knee(pt, knees)
        for (metric, stat), measured in pt.figures.items():
            rows.append({
                "source": pt.source, "gpu": pt.gpu, "engine_id": pt.engine_id,
                "gpu_seen": gpu_seen, "engine_seen": engine_seen,
                "experts_seen": experts_seen, "curve": list(key),
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
        out.append({"source": key[0], "curve": list(key), "measured": measured,
                    "predicted": predicted, "error": error})  # fmt: skip
    return out


def run(progress=None, jobs: int = 1) -> dict:
    """Fit on everything, leave each source out, then each rate and length; the stored record.

    ``jobs``: processes to run the fits in (the record does not depend on it).
    """
    say = progress or (lambda text: None)
    record, pts = leave_sources_out(progress=say, jobs=jobs)
    say("calibrating on each source's own runs")
    record["own_run"] = own_run_rows(pts, record["folds"], progress=say, jobs=jobs)
    return record


_EVERY = "*every source*"  # the job of the fit on every source
_POINTS: list = []  # a worker process's measured points (see _worker_points)


def _worker_points() -> list:
    """The measured points, read once per process."""
    from ..data import load_measurements

    if not _POINTS:
        _POINTS.extend(_fit.points(load_measurements())[0])
    return _POINTS


def _fold_job(job: str):
    """One fit of :func:`leave_sources_out`: on every source, or without one (and its rows)."""
    pts = _worker_points()
    if job == _EVERY:
        per_group, pooled, evaluations = _fit.fit_all(pts)
        fit_error = next(iter(per_group.values())).fit_error
        return calibration_record(per_group, pooled), evaluations, fit_error
    knees = _fit.measured_knees(pts)
    train = [pt for pt in pts if pt.source != job]
    fold_group, fold_pooled, _ = _fit.fit_all(train)
    rows, curves = _predict([pt for pt in pts if pt.source == job], fold_group, fold_pooled, knees,
                            _experts_fitted(train))  # fmt: skip
    return calibration_record(fold_group, fold_pooled), rows, _knee_rows(curves, knees)


def _in_order(function, tasks: list, jobs: int, say) -> list:
    """``[function(t) for t in tasks]``, in ``jobs`` processes when more than one; in task order."""
    if jobs <= 1 or len(tasks) <= 1:
        out = []
        for task in tasks:
            say(f"  {task[0] if isinstance(task, tuple) else task}")
            out.append(function(task))
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    say(f"  {len(tasks)} jobs in {jobs} processes")
    # spawn: a forked child would inherit the parent's kernel threads in an unknown state
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=watch_parent, initargs=(os.getpid(),)) as pool:  # fmt: skip
        return list(pool.map(function, tasks))


#: How often a worker checks that the process that started it still runs (s).
WATCH_S = 2.0


def watch_parent(parent: int) -> None:
    """A worker's guard: end this process when ``parent`` (the one that started it) is gone.

    A stopped ``--jobs`` run (its parent killed) would otherwise leave each worker computing its
    current fit, which can take most of an hour, on cores the next run needs.
    """
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="capnb-watch-parent", daemon=True).start()


def leave_sources_out(progress=None, jobs: int = 1) -> tuple[dict, list]:
    """The fit on every source and the leave-one-source-out rows: (record, the points)."""
    from ..data import load_measurements

    say = progress or (lambda text: None)
    pts, skipped = _fit.points(load_measurements())
    sources = sorted({pt.source for pt in pts})
    say("fitting on every source, then leaving out each source")
    _POINTS[:] = pts
    results = _in_order(_fold_job, [_EVERY, *sources], jobs, say)
    (cal, evaluations, fit_error), fold_results = results[0], results[1:]
    folds = {source: r[0] for source, r in zip(sources, fold_results, strict=True)}
    rows = [row for r in fold_results for row in r[1]]
    knee_rows = [knee for r in fold_results for knee in r[2]]
    record = {
        "data_hash": data_hash(),
        "calibration": {
            "fitted_on": _fitted_label(pts, sources),
            "evaluations": evaluations,
            **cal,
            "fit_error_median": fit_error,
        },
        "folds": folds,
        "skipped": skipped,
        "rows": rows,
        "knees": knee_rows,
    }
    return record, pts


def _fitted_label(pts, sources) -> str:
    """The sources a fit on ``pts`` used, and those it only predicts (:func:`_fit.expressed`)."""
    fitted = sorted({pt.source for pt in pts if _fit.expressed(pt)})
    text = f"{len(fitted)} sources: {', '.join(fitted)}"
    predicted = [s for s in sources if s not in fitted]
    if predicted:
        text += f"; predicted, not fitted (attention data parallel): {', '.join(predicted)}"
    return text


def refresh(record: dict, sources: list[str], progress=None) -> dict:
    """The stored record with the named sources' folds rerun (the others' kept as stored).

    Each named source's fold is refitted without it and its held-out rows, knees and own-run rows
    replaced; the fit on every source and the other folds are not refitted (their GPUs relabelled
    by :func:`capnb.latency._fit.identified_gpus`, a choice made after the fit). A full run is
    still what makes the record whole after a change of the model or the data.
    """
    from ..data import load_measurements

    say = progress or (lambda text: None)
    if record.get("data_hash") != data_hash():
        raise InputError("--source: the stored record is of other measurements; run everything")
    pts, _ = _fit.points(load_measurements())
    known = {pt.source for pt in pts}
    unknown = sorted(set(sources) - known)
    if unknown:
        raise InputError(f"--source: no measured source {unknown}; sources: {sorted(known)}")
    knees = _fit.measured_knees(pts)
    record = json.loads(json.dumps(record))
    _relabel(record["calibration"], pts)
    for source, fold in record["folds"].items():
        _relabel(fold, [pt for pt in pts if pt.source != source])
    for source in sources:
        say(f"leaving out {source}")
        train = [pt for pt in pts if pt.source != source]
        fold_group, fold_pooled, _ = _fit.fit_all(train)
        record["folds"][source] = calibration_record(fold_group, fold_pooled)
        rows, curves = _predict([pt for pt in pts if pt.source == source], fold_group,
                                fold_pooled, knees, _experts_fitted(train))  # fmt: skip
        record["rows"] = [r for r in record["rows"] if r["source"] != source] + rows
        record["knees"] = [k for k in record["knees"] if k["source"] != source]
        record["knees"] += _knee_rows(curves, knees)
        own = own_run_rows([pt for pt in pts if pt.source == source], record["folds"], say)
        record["own_run"] = [r for r in record["own_run"] if r["source"] != source] + own
    return record


def refresh_own_run(record: dict, progress=None, jobs: int = 1) -> dict:
    """The stored record with its own-run rows recomputed (the folds and held-out rows kept).

    The own-run folds start from the stored fold calibrations (:func:`own_run_rows`), so a change
    of :func:`capnb.latency.calibrate` alone is measured without refitting the folds.
    """
    from ..data import load_measurements

    if record.get("data_hash") != data_hash():
        raise InputError("--own-run: the stored record is of other measurements; run everything")
    pts, _ = _fit.points(load_measurements())
    record = json.loads(json.dumps(record))
    record["own_run"] = own_run_rows(pts, record["folds"], progress=progress, jobs=jobs)
    return record


def figures_markdown(record: dict, source: str) -> str:
    """One source's stored held-out figures side by side: measured, predicted, their ratio."""
    rows = [r for r in record["rows"] if r["source"] == source]
    if not rows:
        sources = sorted({r["source"] for r in record["rows"]})
        raise InputError(f"--figures: no held-out rows of {source!r}; sources: {sources}")
    lines = [
        f"Held-out figures of {source} (engine model, calibrated without it):",
        "",
        "| model | TP | dtype | in | out | mode | load | metric | stat | side of knee | measured "
        "(s) | predicted (s) | predicted / measured |",
        "|---|---:|---|---:|---:|---|---:|---|---|---|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (str(r["curve"]), r["load"], r["metric"], r["stat"])):
        c = r["curve"]
        ratio = r["engine"] / r["measured"]
        side = "below" if r["below_knee"] else "above"
        lines.append(f"| {c[2]} | {c[5]} | {c[6]} | 2^{c[7]} | 2^{c[8]} | {c[9]} | {r['load']:g} | "
                     f"{r['metric']} | {r['stat']} | {side} | {r['measured']:.4g} | "
                     f"{r['engine']:.4g} | {ratio:.2f} |")  # fmt: skip
    return "\n".join(lines)


def _relabel(fit: dict, train) -> None:
    """Drop from a stored fit the GPUs its training points do not identify (the pooled values)."""
    known = _fit.identified_gpus([pt for pt in train if _fit.expressed(pt)])
    fit["gpus"] = {gpu: values for gpu, values in fit["gpus"].items() if gpu in known}


# -- calibrated on the user's own run ----------------------------------------------------------
def _curves_and_configs(pts) -> tuple[dict, dict]:
    """The points by curve, and the curves by configuration (every length of one setup)."""
    by_curve: dict[tuple, list] = {}
    for pt in pts:
        by_curve.setdefault(_fit.curve_key(pt), []).append(pt)
    by_config: dict[tuple, dict] = {}
    for key, group in by_curve.items():
        config = (*key[:7], key[9])
        by_config.setdefault(config, {})[(key[7], key[8])] = group
    return by_curve, by_config


def own_run_rows(pts, folds, progress=None, jobs: int = 1) -> list[dict]:
    """Leave-one-rate-out and leave-one-length-out rows (see the module).

    ``jobs``: processes to run the curves' and configurations' fits in (the rows do not depend
    on it). Each process reads the bundled measurements itself
    (:func:`capnb.data.load_measurements`), so with ``jobs > 1`` ``pts`` must be some of those.
    """
    say = progress or (lambda text: None)
    by_curve, by_config = _curves_and_configs(pts)
    tasks = []
    for key, group in sorted(by_curve.items(), key=lambda kv: str(kv[0])):
        if len(group) >= 3:
            label = f"leave one rate out: {key[0]} {key[2]} TP {key[5]} ({len(group)} loads)"
            tasks.append((label, "rate", key, folds[key[0]]))
    for config, lengths in sorted(by_config.items(), key=lambda kv: str(kv[0])):
        if len(lengths) >= 2:
            label = f"leave one length out: {config[0]} {config[2]} TP {config[5]} ({len(lengths)})"
            tasks.append((label, "length", config, folds[config[0]]))
    _POINTS[:] = pts
    return [row for rows in _in_order(_own_job, tasks, jobs, say) for row in rows]


def _own_job(task) -> list[dict]:
    """One curve's leave-one-rate-out, or one configuration's leave-one-length-out, rows."""
    from ._own import fit_own

    _, kind, key, fold = task
    by_curve, by_config = _curves_and_configs(_worker_points())
    rows = []
    if kind == "rate":
        group = by_curve[key]
        prior = _fitted.from_fold(fold, group[0].gpu, group[0].engine_id)
        for held in group:
            cal = fit_own([pt for pt in group if pt is not held], prior)
            rows += _own_rows(held, cal, "rate", key)
        return rows
    lengths = by_config[key]
    any_pt = next(iter(lengths.values()))[0]
    prior = _fitted.from_fold(fold, any_pt.gpu, any_pt.engine_id)
    for held_key, held in lengths.items():
        cal = fit_own([pt for k, group in lengths.items() if k != held_key for pt in group], prior)
        for pt in held:
            rows += _own_rows(pt, cal, "length", _fit.curve_key(pt))
    return rows


def _own_rows(pt, cal, kind, key) -> list[dict]:
    values, _ = _fit.simulate_point(pt, cal.engine_array(), requests=REQUESTS)
    if values is None:
        return []
    return [
        {"source": pt.source, "kind": kind, "curve": list(key), "load": pt.load,
         "metric": metric, "stat": stat, "measured": measured, "predicted": values[(metric, stat)]}
        for (metric, stat), measured in pt.figures.items()
    ]  # fmt: skip


# -- tables ------------------------------------------------------------------------------------
def _errors(rows, model) -> list[float]:
    return [abs(r[model] / r["measured"] - 1) for r in rows if math.isfinite(r[model])]


def _summary(errors):
    if not errors:
        return None
    return float(np.median(errors)), float(np.quantile(errors, 0.9)), len(errors)


def table(record: dict) -> list[dict]:
    """Per source, metric group and side of the knee: both models' held-out errors, knee error."""
    out = []
    for source in sorted({r["source"] for r in record["rows"]}):
        mine = [r for r in record["rows"] if r["source"] == source]
        knees = [k for k in record["knees"] if k["source"] == source]
        knee = float(np.median([k["error"] for k in knees])) if knees else math.nan
        unseen = sorted({f"GPU {r['gpu']}" for r in mine if not r["gpu_seen"]}
                        | {f"engine {r['engine_id']}" for r in mine if not r["engine_seen"]}
                        | {"routed experts" for r in mine if not r.get("experts_seen", True)})  # fmt: skip
        for group in GROUP_ORDER:
            for side in ("below", "above"):
                sel = [r for r in mine if GROUPS[r["metric"]] == group
                       and r["below_knee"] == (side == "below")]  # fmt: skip
                engine = _summary(_errors(sel, "engine"))
                if engine is None:
                    continue
                out.append({
                    "source": source, "metric": group, "side": side, "figures": engine[2],
                    "engine_median": engine[0], "engine_p90": engine[1],
                    "analytic": _summary(_errors(sel, "analytic")), "unseen": unseen,
                    "knee_error": knee, "knees": len(knees),
                    "knees_reached": sum(math.isfinite(k["predicted"]) for k in knees),
                })  # fmt: skip
    return out


def own_run_table(record: dict) -> list[dict]:
    """Per source, kind (rate, length), metric group and statistic: the median error."""
    out = []
    rows = record.get("own_run", [])
    for source in sorted({r["source"] for r in rows}):
        for kind in ("rate", "length"):
            mine = [r for r in rows if r["source"] == source and r["kind"] == kind]
            for group in GROUP_ORDER:
                for stat in ("p50", "p99", "mean", "p90"):
                    sel = [r for r in mine if GROUPS[r["metric"]] == group and r["stat"] == stat]
                    errors = _errors(sel, "predicted")
                    if errors:
                        out.append({"source": source, "kind": kind, "metric": group, "stat": stat,
                                    "figures": len(errors), "median": float(np.median(errors))})  # fmt: skip
    return out


def engine_validation():
    """The stored leave-one-source-out table (a pandas DataFrame), one row per source, metric, side.

    Columns: ``source``, ``metric`` (TTFT, ITL/TPOT, E2E), ``side`` (below or above the knee),
    ``figures``, ``engine_median`` and ``engine_p90`` (absolute relative errors of the engine
    model, held out), ``analytic_median`` (NaN where it does not apply), ``knee_error`` (median
    over the source's curves; inf when the model's curve never reaches the knee) and ``unseen``
    (GPUs and engines no other source measured). Empty when nothing is stored.
    """
    import pandas as pd

    data = _fitted.stored()
    if data is None:
        return pd.DataFrame()
    return pd.DataFrame([
        {"source": r["source"], "metric": r["metric"], "side": r["side"],
         "figures": r["figures"], "engine_median": r["engine_median"],
         "engine_p90": r["engine_p90"],
         "analytic_median": r["analytic"][0] if r["analytic"] else float("nan"),
         "knee_error": r["knee_error"], "unseen": ", ".join(r["unseen"])}
        for r in table(data)
    ])  # fmt: skip


def _percent(value) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.0%}"


def markdown(record: dict) -> str:
    """The leave-one-source-out section of VALIDATION.md."""
    lines = [
        SECTION,
        "",
        "Generated by `python -m capnb.latency.validate --write VALIDATION.md` (do not edit by "
        "hand); stored with the calibration in `capnb/latency/engine_calibration.json` "
        f"(measurement files hash `{record['data_hash']}`).",
        "",
        "For each source of `datasets/benchmarks/measured/`, the engine model "
        "(`capnb.latency.engine`) is calibrated on all the *other* sources and predicts the source "
        "as it was run: its GPU, model, TP and dtype; the engine's scheduling policy and limits of "
        "that release with the run's own flags (`datasets/benchmarks/measured_runs.csv`); the "
        "run's length, request lengths, mode and load. Errors are |predicted / measured - 1| of "
        "every latency figure (mean or percentile), below and above the measured knee (the load "
        "where the source's TTFT statistic reaches twice its floor). The analytic model "
        "(step-time calibration) is scored on the same figures where it applies: a closed loop "
        "at the concurrency the engine runs (above it ITL/TPOT only), and a batch's TTFT when one "
        "step prefills the whole batch; `n/a` where it applies to none. *Unseen* names the GPUs "
        "and engines the other sources do not identify (predicted with the values pooled over "
        "them): an engine no other source measured, a GPU no other source measured on two or "
        "more models or engines (one model on one engine cannot tell the GPU from that model's "
        "kernels on that engine), and *routed experts* where no other source fitted a mixture of "
        "experts (its routed-expert weights read as dense ones).",
        "",
        "| held-out source | metric | side of knee | figures | engine median | engine P90 | "
        "analytic median | knee error (median) | unseen |",
        "|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    rows = table(record)
    for row in rows:
        knee = (
            f"{_percent(row['knee_error'])} ({row['knees_reached']}/{row['knees']} reached)"
            if row["knees"] else "no measured knee"
        )  # fmt: skip
        if row["knee_error"] == math.inf:
            knee = f"not reached ({row['knees_reached']}/{row['knees']})"
        analytic = row["analytic"][0] if row["analytic"] else None
        lines.append(
            f"| {row['source']} | {row['metric']} | {row['side']} | {row['figures']} | "
            f"{_percent(row['engine_median'])} | {_percent(row['engine_p90'])} | "
            f"{_percent(analytic)} | {knee} | {', '.join(row['unseen']) or '-'} |"
        )
    both = [r for r in rows if r["analytic"]]
    better = [r for r in both if r["engine_median"] < r["analytic"][0]]
    met = [r for r in rows if r["engine_median"] <= SOURCE_GOAL]
    knee_sources = sorted({r["source"] for r in rows if r["knees"]})
    knees_met = sorted({r["source"] for r in rows if r["knees"] and r["knee_error"] <= KNEE_GOAL})
    pooled = {g: _summary(_errors([r for r in record["rows"] if GROUPS[r["metric"]] == g],
                                  "engine")) for g in GROUP_ORDER}  # fmt: skip
    lines += [
        "",
        f"Engine better than the analytic model in {len(better)} of {len(both)} rows where both "
        f"apply. Goal (median <= {SOURCE_GOAL:.0%} per source, below and above the knee) met in "
        f"{len(met)} of {len(rows)} rows; knee within {KNEE_GOAL:.0%} for "
        f"{len(knees_met)} of {len(knee_sources)} sources with a measured knee "
        f"({', '.join(knees_met) or 'none'}). Pooled over every held-out figure, the engine's "
        "median error is "
        + ", ".join(
            f"{g} {_percent(pooled[g][0])} ({pooled[g][2]} figures)"
            for g in GROUP_ORDER
            if pooled[g]
        )
        + ".",
        "",
        preferred_sentence(record),
        "",
        choice_sentence(record),
    ]
    lines += _calibration_lines(record)
    if record["skipped"]:
        lines += ["", "Not simulated: " + "; ".join(record["skipped"]) + "."]
    return "\n".join(lines) + "\n"


def _calibration_lines(record) -> list[str]:
    cal = record["calibration"]
    lines = [
        "",
        f"Calibration fitted on every source ({cal['fitted_on']}; {cal['evaluations']} "
        f"simulations of every point; median in-sample error {cal['fit_error_median']:.1%}; a "
        "GPU measured on one model and one engine only takes the pooled efficiencies):",
        "",
        "| GPU | compute efficiency | HBM efficiency | interconnect efficiency |",
        "|---|---:|---:|---:|",
    ]
    for gpu, v in [*sorted(cal["gpus"].items()), ("pooled", cal["pooled"])]:
        lines.append(f"| {gpu} | {v['compute_efficiency']:.2f} | {v['bandwidth_efficiency']:.2f} | "
                     f"{v['interconnect_efficiency']:.2f} |")  # fmt: skip
    lines += [
        "",
        "| engine | step overhead | per sequence | per all-reduce hop | per request |"
        " front end (serial) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for engine, v in [*sorted(cal["engines"].items()), ("pooled", cal["pooled"])]:
        lines.append(f"| {engine} | {v['step_overhead_s'] * 1e3:.2f} ms | "
                     f"{v['sequence_overhead_s'] * 1e6:.1f} us | "
                     f"{v['allreduce_latency_s'] * 1e6:.1f} us | "
                     f"{v.get('request_overhead_s', 0.0) * 1e3:.1f} ms | "
                     f"{v.get('frontend_s', 0.0) * 1e3:.2f} ms |")  # fmt: skip
    lines += [
        "",
        "Per request: the time a client of the server holds outside the steps (HTTP, tokenising, "
        "the hand-off to the scheduler, the first chunk's stream), added to TTFT and E2E; runs "
        "timed offline in the engine's process (`client` `offline` in `measured_runs.csv`) are "
        "simulated without it.",
    ]
    expert = cal.get("shared", {}).get("expert_efficiency")
    arithmetic = cal.get("shared", {}).get("expert_compute_efficiency")
    if expert is not None:
        products = ("" if arithmetic is None else
                    f", their arithmetic at {arithmetic:.2f} of its compute efficiency")  # fmt: skip
        lines += [
            "",
            f"Routed experts (every GPU and engine): weight reads at {expert:.2f} of the GPU's "
            f"HBM efficiency{products}" + (" (no fitted source serves a mixture of experts: "
                                           "read and computed as dense weights)."
                                           if expert == 1.0 else "."),
        ]  # fmt: skip
    fp8 = cal.get("shared", {}).get("fp8_compute_efficiency")
    if fp8 is not None:
        lines += [
            "",
            f"FP8 matrix products scaled by blocks (every GPU and engine; a checkpoint with a "
            f"weight_block_size, as DeepSeek-V3's and Qwen3's FP8 releases, on a GPU with FP8 "
            f"tensor cores, priced at the catalog's FP8 FLOP/s; per-tensor and per-channel FP8 at "
            f"the one efficiency): at {fp8:.2f} of the GPU's compute efficiency"
            + (" (no fitted source runs them: at FP8's rate)." if fp8 == 1.0 else "."),
        ]
    return lines


def own_run_markdown(record: dict) -> str:
    """The own-run (leave-one-rate-out, leave-one-length-out) section of VALIDATION.md."""
    rows = own_run_table(record)
    lines = [
        OWN_RUN_SECTION,
        "",
        "Generated with the section above (same command, same stored record).",
        "",
        "A user calibrates the engine on two or three runs of their own (`capnb.latency.calibrate`: "
        "the GPU's and engine's calibration from the bundled sources, pulled towards their runs). "
        "Here each bundled source plays the user: for every measured curve of three or more "
        "loads, each load in turn is held out and the calibration is fitted on the curve's other "
        "loads, starting from the fold calibration that never saw the source (leave one rate "
        "out); for every configuration measured at several prompt/output lengths, each length is "
        "held out in turn (leave one length out). Median |predicted / measured - 1| per source, "
        "metric and statistic:",
        "",
        "| source | held out | metric | statistic | figures | median error |",
        "|---|---|---|---|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row['source']} | one {row['kind']} | {row['metric']} | {row['stat']} | "
                     f"{row['figures']} | {_percent(row['median'])} |")  # fmt: skip
    goal = [r for r in rows if r["stat"] in ("p50", "p99")]
    met = [r for r in goal if r["median"] <= OWN_RUN_GOAL]
    lines += [
        "",
        f"Goal (median <= {OWN_RUN_GOAL:.0%} for TTFT, TPOT/ITL and E2E at P50 and P99): met in "
        f"{len(met)} of {len(goal)} rows at P50 or P99. Sources without three loads of one curve "
        "or two lengths of one configuration have no row of that kind.",
    ]
    return "\n".join(lines) + "\n"


# -- what the plan reads -----------------------------------------------------------------------
def _stored_record() -> dict:
    record = _fitted.stored()
    if record is None:
        raise InputError(
            "no stored validation: run python -m capnb.latency.validate --write VALIDATION.md"
        )
    return record


def held_out_error(gpu: str, metric: str, *, model: str = "analytic") -> dict:
    """The latency model's held-out error for one GPU and SLA metric, from the stored validation.

    Reads the leave-one-source-out record: the median absolute relative error of ``model``
    (``"analytic"`` or ``"engine"``; ``"own-run"``: the engine calibrated on a source's own runs,
    each of its rates and lengths held out) over every held-out figure of the metric's group (TTFT;
    ITL/TPOT; E2E) below the knee, on the sources that measured ``gpu``. Where no figure of that
    GPU scores the model, the error pooled over every source stands in for it and
    ``measured_on_gpu`` is False.

    Returns
    -------
    dict
        ``median`` (a share, NaN where the model was scored on no figure of the group),
        ``figures`` (how many), ``sources`` (their names), ``measured_on_gpu`` (bool).
    """
    if model == "own-run":  # the engine calibrated on a source's own runs, its other loads
        rows = [
            dict(r, gpu=r["curve"][1], **{model: r["predicted"]}) for r in _own_run_scored(metric)
        ]
    else:
        rows = _scored_rows(metric, model)
    mine = [r for r in rows if r["gpu"] == gpu]
    used = mine or rows
    errors = [abs(r[model] / r["measured"] - 1) for r in used]
    return {
        "median": float(np.median(errors)) if errors else math.nan,
        "figures": len(errors),
        "sources": tuple(sorted({r["source"] for r in used})),
        "measured_on_gpu": bool(mine),
    }


def _own_run_scored(metric: str) -> list[dict]:
    """The stored own-run rows of a metric's group (each rate or length held out of its fit).

    Below the knee, as the sources' rows are read: a figure the leave-one-source-out rows mark
    past its curve's knee (where no SLA is met) is left out.
    """
    if metric not in GROUPS:
        raise InputError(f"metric must be one of {sorted(GROUPS)}, got {metric!r}")
    record = _stored_record()
    below = {(tuple(r["curve"]), r["load"], r["metric"], r["stat"]): r["below_knee"]
             for r in record["rows"]}  # fmt: skip
    return [r for r in record.get("own_run", [])
            if GROUPS[r["metric"]] == GROUPS[metric] and math.isfinite(r["predicted"])
            and below.get((tuple(r["curve"]), r["load"], r["metric"], r["stat"]), False)]  # fmt: skip


def _scored_rows(metric: str, model: str, *, below: bool = True) -> list[dict]:
    if model not in ("analytic", "engine"):
        raise InputError(f"model must be 'analytic' or 'engine', got {model!r}")
    if metric not in GROUPS:
        raise InputError(f"metric must be one of {sorted(GROUPS)}, got {metric!r}")
    group = GROUPS[metric]
    return [
        r for r in _stored_record()["rows"]
        if (r["below_knee"] or not below) and GROUPS[r["metric"]] == group
        and math.isfinite(r[model])
    ]  # fmt: skip


def preferred_model(metric: str, *, gpu: str | None = None) -> dict:
    """Which latency model the plan should use for an SLA metric, from the held-out record.

    The engine model becomes the default when it beats the analytic model on every held-out row
    (source, metric group, side of the knee) where both are scored; until then the model with the
    lower median held-out error on the figures both are scored on (below the knee, where an SLA
    is met) is preferred, and the answer says which and by how much. Where the analytic model
    applies to no figure of the group (open-loop runs, queued batches), the engine is the only
    one measured.

    Parameters
    ----------
    metric
        The SLA metric: ``ttft``, ``tpot``, ``itl`` or ``e2e``.
    gpu
        Compare on that GPU's held-out figures when both models are scored on some; else pooled.

    Returns
    -------
    dict
        ``model`` (``"engine"`` or ``"analytic"``), ``engine_median`` and ``analytic_median``
        (shares, on the figures both are scored on; NaN where none), ``figures`` (how many),
        ``sources``, ``engine_default`` (True when the engine beats the analytic model on every
        held-out row), ``band`` (``(low, high)``: the P10 and P90 of measured / predicted of the
        chosen model, see :func:`error_band`) and ``reason`` (a sentence).

    Examples
    --------
    >>> choice = preferred_model("ttft")
    >>> choice["model"] in ("engine", "analytic")
    True
    """
    record = _stored_record()
    group = GROUPS.get(metric)
    if group is None:
        raise InputError(f"metric must be one of {sorted(GROUPS)}, got {metric!r}")
    if gpu:  # the catalog's id, as the record names it ('mi300x' is MI300X; 'A100' is ambiguous)
        from ..data._catalog import resolve_gpu

        gpu = resolve_gpu(gpu)
    both = [r for r in record["rows"] if r["below_knee"] and GROUPS[r["metric"]] == group
            and math.isfinite(r["engine"]) and math.isfinite(r["analytic"])]  # fmt: skip
    mine = [r for r in both if r["gpu"] == gpu] if gpu else []
    used = mine or both
    rows = [r for r in table(record) if r["analytic"]]
    every = bool(rows) and all(r["engine_median"] < r["analytic"][0] for r in rows)
    if not used:
        engine = _errors(_scored_rows(metric, "engine"), "engine")
        chosen, reason = (
            "engine",
            (
                f"the analytic model is scored on no held-out {group} figure (it applies to closed "
                "loops only); the engine model is the one measured"
            ),
        )
        e_med, a_med, n = (float(np.median(engine)) if engine else math.nan), math.nan, len(engine)
    else:
        e_med = float(np.median(_errors(used, "engine")))
        a_med = float(np.median(_errors(used, "analytic")))
        n = len(used)
        chosen = "engine" if every or e_med <= a_med else "analytic"
        where = f"on {gpu}" if mine else "pooled over the sources"
        reason = (
            f"held-out {group} median error {where}: engine {e_med:.0%}, analytic {a_med:.0%} "
            f"on the {n} figures both are scored on; "
            + ("the engine beats the analytic model on every held-out row, so it is the default"
               if every else f"the {chosen} model is preferred for {metric.upper()}")
        )  # fmt: skip
    return {
        "model": chosen, "engine_median": e_med, "analytic_median": a_med, "figures": n,
        "sources": tuple(sorted({r["source"] for r in used})), "engine_default": every,
        "band": error_band(metric, model=chosen)[:2], "reason": reason,
    }  # fmt: skip


def preferred_sentence(record: dict) -> str:
    """What the plan does with these figures (a paragraph of the section)."""
    rows = [r for r in table(record) if r["analytic"]]
    every = bool(rows) and all(r["engine_median"] < r["analytic"][0] for r in rows)
    if every:
        return ("The engine model beats the analytic model on every held-out row where both are "
                "scored: it is the plan's default latency model.")  # fmt: skip
    worse = [f"{r['source']} {r['metric']} ({r['side']})" for r in rows
             if r["engine_median"] >= r["analytic"][0]]  # fmt: skip
    return (
        "The engine model does not beat the analytic model on every held-out row (not on "
        + ", ".join(worse)
        + "), so it is not the plan's default: `capnb.latency.validate.preferred_model(metric)` "
        "names the model with the lower held-out error for the SLA's metric, with its figures."
    )


def choice_held_out(record: dict) -> list[dict]:
    """The per-metric model choice itself scored out of sample (leave one source out, nested).

    :func:`preferred_model` picks, per metric group, the model with the lower median held-out
    error on the figures both models are scored on (below the knee). Picking on the same figures
    it is then scored on would be tuned; here each source's pick is made from the other sources'
    figures alone and scored on that source's. A group measured by one source only has no pick
    made out of sample (its figures say which model fits that source, not which generalises).

    Returns
    -------
    list of dict
        Per group: ``group``, ``sources`` (how many score both models), ``figures``, ``picks``
        (``{source: model}``, picked without the source), ``chosen``, ``engine`` and ``analytic``
        (median absolute relative error over the figures of the sources that have a pick, as
        shares; NaN where none).
    """
    rows = [r for r in record["rows"] if r["below_knee"]
            and math.isfinite(r["engine"]) and math.isfinite(r["analytic"])]  # fmt: skip
    out = []
    for group in GROUP_ORDER:
        mine = [r for r in rows if GROUPS[r["metric"]] == group]
        sources = sorted({r["source"] for r in mine})
        picks, scored = {}, {"chosen": [], "engine": [], "analytic": []}
        for source in sources:
            train = [r for r in mine if r["source"] != source]
            if not train:
                continue
            engine = np.median(_errors(train, "engine"))
            analytic = np.median(_errors(train, "analytic"))
            picks[source] = "engine" if engine <= analytic else "analytic"
            test = [r for r in mine if r["source"] == source]
            scored["chosen"] += _errors(test, picks[source])
            for model in ("engine", "analytic"):
                scored[model] += _errors(test, model)
        medians = {k: float(np.median(v)) if v else math.nan for k, v in scored.items()}
        out.append({"group": group, "sources": len(sources), "figures": len(scored["chosen"]),
                    "picks": picks, **medians})  # fmt: skip
    return out


def choice_sentence(record: dict) -> str:
    """The out-of-sample check of the per-metric choice, as a paragraph of the section."""
    parts = []
    for g in choice_held_out(record):
        if not g["picks"]:
            parts.append(
                f"{g['group']}: {g['sources']} "
                f"{'source scores' if g['sources'] == 1 else 'sources score'} both models, so no "
                "choice is made out of sample"
            )
            continue
        picked = ", ".join(f"{m} for {s}" for s, m in g["picks"].items())
        parts.append(
            f"{g['group']}: picked without each source ({picked}), the choice's median error on "
            f"the {g['figures']} figures is {_percent(g['chosen'])} (engine alone "
            f"{_percent(g['engine'])}, analytic alone {_percent(g['analytic'])})"
        )
    return (
        "The choice itself, held out (each source's model picked from the other sources' "
        "figures alone, `capnb.latency.validate.choice_held_out`): " + "; ".join(parts) + "."
    )


def error_band(metric: str, *, model: str = "engine") -> tuple[float, float, int]:
    """The P10 and P90 of measured / predicted over the held-out figures of a metric's group.

    Below the knee (where an SLA is met). A capacity answer scales its latencies by these ratios
    to bound the requests/s an instance serves at the SLA (:func:`capnb.capacity.band`).
    ``model``: ``"engine"`` or ``"analytic"`` (held out by source), or ``"own-run"``: the engine
    calibrated on a source's own runs, each rate and length held out of its calibration (the
    band of a plan calibrated on the user's runs, :func:`capnb.latency.calibrate`).
    Returns ``(low, high, figures)``.
    """
    if model == "own-run":
        ratios = [
            r["measured"] / r["predicted"] for r in _own_run_scored(metric) if r["predicted"] > 0
        ]
    else:
        rows = _scored_rows(metric, model)
        ratios = [r["measured"] / r[model] for r in rows if r[model] > 0]
    if not ratios:
        return math.nan, math.nan, 0
    low, high = np.quantile(ratios, BAND_QUANTILES)
    return float(low), float(high), len(ratios)


def main(argv=None) -> int:
    """The command line: print the tables; with ``--write``, store the record and the sections."""
    parser = argparse.ArgumentParser(prog="python -m capnb.latency.validate", description=__doc__)
    parser.add_argument("--write", metavar="VALIDATION.md", help="store the fit and the sections")
    parser.add_argument(
        "--stored",
        action="store_true",
        help="no refit: the sections from the stored record (refused if the measurements changed)",
    )
    parser.add_argument(
        "--source",
        action="append",
        metavar="NAME",
        help="rerun only this source's fold on the stored record (repeatable; see refresh)",
    )
    parser.add_argument(
        "--own-run",
        action="store_true",
        help="rerun only the own-run folds on the stored fold calibrations (see refresh_own_run)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N",
        help="run the fits in N processes (the record is the same; default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--figures",
        metavar="NAME",
        help="print one source's stored held-out figures beside their predictions, then stop",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: expected a whole number of processes, at least 1")
    if args.figures:
        stored = _fitted.stored()
        if stored is None:
            parser.error("--figures needs a stored record: run without it first")
        print(figures_markdown(stored, args.figures))
        return 0
    if args.own_run:
        stored = _fitted.stored()
        if stored is None:
            parser.error("--own-run needs a stored record: run without it first")
        say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
        record = refresh_own_run(stored, progress=say, jobs=args.jobs)
    elif args.source:
        stored = _fitted.stored()
        if stored is None:
            parser.error("--source needs a stored record: run without it first")
        say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
        record = refresh(stored, args.source, progress=say)
    elif args.stored:
        record = _fitted.stored()
        if record is None or record["data_hash"] != data_hash():
            parser.error(
                "the stored record is missing or of other measurements: run without --stored"
            )
    else:
        record = run(progress=lambda text: print(text, file=sys.stderr, flush=True), jobs=args.jobs)
    text, own = markdown(record), own_run_markdown(record)
    print(text)
    print(own)
    if args.write:
        if not args.stored:
            _fitted.PATH.write_text(
                json.dumps(record, separators=(",", ":"), default=float) + "\n", encoding="utf-8"
            )
            _fitted.stored.cache_clear()
        from ..data import write_section

        write_section(Path(args.write), text)
        write_section(Path(args.write), own)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

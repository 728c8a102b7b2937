"""Disaggregated serving checked against dstack's measured prefill:decode runs (gpt-oss-120b, 8 x H200).

``python -m capnb.capacity.validate_disagg`` prints, per (prompt, output, concurrency) group of
``datasets/benchmarks/disaggregated/comparison_pd_ratio_results.csv``, the ratio that served best in
the data (the most output tokens/s per GPU with P99 TTFT and P99 TPOT within the SLA) beside the
one capnb picks (:func:`capnb.capacity.pd_ratio`'s rule on its predictions), and per run the
predicted P99 TTFT and TPOT with their errors. ``--write VALIDATION.md`` also stores the record
(``capnb/capacity/disagg_validation.csv``) and the section "Disaggregated serving: dstack's P:D
runs" of that file (no other section is touched).

The runs (dstack's ``comparison/pd_ratio`` benchmark, SGLang with NIXL transfers, ``vllm bench
serve`` random prompts, 500 prompts per run, a closed loop at ``--max-concurrency``):

- GPUs per worker: dstack's README gives TP 2 for every worker of 3:1, 2:2 and 1:3 (8 GPUs). It
  does not give the 1:1 setup; capnb assumes 4 + 4 GPUs at TP 4 (``--tp-1to1``, default 4), because
  at concurrency 32 the single decode worker of 1:1 streamed faster (mean TPOT 7.0-7.5 ms) than the
  single TP 2 decode worker of 3:1 at the same batch (10.1-11.4 ms). ``--tp-1to1 2`` checks 2 + 2.
- Prompts: each run's mean (``total_input_tokens / completed``), all the same length (vLLM's random
  dataset). Outputs: the model stopped before the nominal length, so each run's real mean
  (``total_output_tokens / completed``) is used, spread as an exponential capped at the nominal
  length (its mean solved to match); the spread is capnb's assumption, the mean is measured.
- The fleet: each run's ``num_prompts`` (500) requests simulated one by one through both pools
  (:func:`capnb.capacity.pd_ratio`, :mod:`capnb.kernels.pd`) as the benchmark ran them: a closed
  loop at the run's concurrency that starts with every slot filled at once, every request counted
  (no warm-up left out); SGLang's defaults (8,192-token prefill chunks, running requests from the
  KV cache) and its bundled calibration (fitted on other sources, none of these runs); SGLang's
  hand-off (:mod:`capnb.kernels.pd`: the decode instance pre-allocates the prompt's KV before the
  prefill starts and streams the prefill's first token when the KV lands); each request's
  instances picked in turn (dstack's README runs ``sglang_router --policy round_robin``); the KV
  transfer over the catalog's NVLink figure (one node).
- The hand-off's time outside the GPU has no published figure: the decode side's work per
  request (``handoff_s``: bootstrap, transfer bookkeeping, polling, one request at a time per
  decode instance), which queues in a burst and so shows in the tail, and a fixed latency per
  request (``handoff_delay_s``: the router's two HTTP legs, tokenizing the prompt at both
  instances, the bootstrap handshake, the loop passes that poll it), which queues nothing and so
  shows in the median request. Both are fitted leave-one-group-out: for each (prompt, output,
  concurrency) group, the pair of :data:`HANDOFF_GRID` with the least mean of the median absolute
  P99 TTFT error and the median absolute median-TTFT error over the other 14 groups' runs predicts
  the group (:func:`held_out`); the group's own runs never choose it.
- A run that did not complete every prompt is left out (the 1:1 run at 2,048 / 32,784 tokens and
  concurrency 128 completed 380 of 500), and said so.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..records import SLA, Deployment, EngineSettings

__all__ = [
    "HANDOFF_GRID",
    "RECORD",
    "SECTION",
    "check",
    "check_grid",
    "held_out",
    "load_runs",
    "main",
    "markdown",
    "output_lengths",
    "picks",
    "stored",
]

#: The heading of the section this module writes in VALIDATION.md.
SECTION = "## Disaggregated serving: dstack's P:D runs"
#: The stored record (CSV) that :func:`stored` reads and ``--write`` replaces.
RECORD = Path(__file__).with_name("disagg_validation.csv")
#: The SLA the check picks by: P99 TTFT and P99 TPOT (s).
#: dstack's SLA for the runs: P99 TTFT <= 2 s and P99 TPOT <= 25 ms.
DSTACK_SLA = SLA(ttft_s=2.0, tpot_s=0.025)
_ORDER = ("1:1", "1:3", "2:2", "3:1")
#: The (work per request, fixed latency) pairs (s) the leave-one-group-out fit chooses among: a
#: decode instance's work, one request at a time, and a latency that holds nothing up. The latency
#: is read off the median request (fitted on P99 TTFT alone, over 0-300 ms, it moved from group to
#: group: the tails of these runs are the opening burst's, which a latency does not make).
HANDOFF_GRID = tuple(
    (work, delay) for work in (0.0, 0.01, 0.02, 0.03) for delay in (0.0, 0.03, 0.06, 0.09, 0.12)
)
_GROUP = ["isl", "osl", "conc"]


def load_runs() -> pd.DataFrame:
    """The measured runs, one row each, with the ratio label and the real mean lengths."""
    from ..data._catalog import dataset_path

    path = dataset_path("benchmarks", "disaggregated", "comparison_pd_ratio_results.csv")
    runs = pd.read_csv(path)
    runs["ratio"] = runs["prefill"].astype(str) + ":" + runs["decode"].astype(str)
    runs["prompt_mean"] = runs["total_input_tokens"] / runs["completed"]
    runs["output_mean"] = runs["total_output_tokens"] / runs["completed"]
    runs["complete"] = runs["completed"] == runs["num_prompts"]
    runs["p99_ttft_s"] = runs["p99_ttft_ms"] / 1e3
    runs["mean_ttft_s"] = runs["mean_ttft_ms"] / 1e3
    runs["median_ttft_s"] = runs["median_ttft_ms"] / 1e3
    runs["p99_tpot_s"] = runs["p99_tpot_ms"] / 1e3
    key = ["isl", "osl", "conc"]
    return runs.sort_values([*key, "ratio"]).reset_index(drop=True)


def output_lengths(mean: float, cap: float, samples: int = 256) -> np.ndarray:
    """``samples`` output lengths: an exponential capped at ``cap`` whose capped mean is ``mean``.

    Evenly spaced quantiles (deterministic). The scale solves ``s (1 - exp(-cap / s)) = mean``.
    """
    if not 0 < mean < cap:
        return np.full(samples, float(min(max(mean, 1.0), cap)))
    lo, hi = mean, 1e3 * cap
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid * (1 - math.exp(-cap / mid)) < mean:
            lo = mid
        else:
            hi = mid
    u = (np.arange(samples) + 0.5) / samples
    return np.minimum(-0.5 * (lo + hi) * np.log1p(-u), cap)


def _tensor_parallel(ratio: str, tp_1to1: int) -> int:
    return tp_1to1 if ratio == "1:1" else 2


def check(
    *,
    sla: SLA = DSTACK_SLA,
    tp_1to1: int = 4,
    groups=None,
    seed: int = 0,
    router: str = "round_robin",
    handoff_s: float = 0.0,
    handoff_delay_s: float = 0.0,
) -> pd.DataFrame:
    """Predicted against measured, one row per run (``groups``: (isl, osl, conc) tuples, or all).

    ``handoff_s``, ``handoff_delay_s``: the hand-off's time outside the GPU (s; a decode
    instance's work per request, one at a time, and a fixed latency: :func:`capnb.capacity.pd_ratio`).

    Returns
    -------
    pandas.DataFrame
        One row per run: the measured and predicted P99 TTFT and TPOT (s) and output tokens/s
        per GPU, with the prediction's relative errors.
    """
    pair = (float(handoff_s), float(handoff_delay_s))
    return check_grid([pair], sla=sla, tp_1to1=tp_1to1, groups=groups, seed=seed, router=router)[
        pair
    ]


def check_grid(handoffs, *, sla: SLA = DSTACK_SLA, tp_1to1: int = 4, groups=None, seed: int = 0,
               router: str = "round_robin") -> dict:  # fmt: skip
    """:func:`check` at each (``handoff_s``, ``handoff_delay_s``) pair: tables by pair.

    The aggregated alternative's curve, the same for every pair, is computed once per run.
    """
    runs = load_runs()
    if groups is not None:
        wanted = {tuple(int(v) for v in g) for g in groups}
        runs = runs[
            [(a, b, c) in wanted for a, b, c in zip(runs.isl, runs.osl, runs.conc, strict=True)]
        ]
    pairs = [(float(a), float(b)) for a, b in handoffs]
    rows = {pair: [] for pair in pairs}
    for _, run in runs.iterrows():
        for pair, row in _predict(run, pairs, sla, tp_1to1, seed, router).items():
            rows[pair].append(row)
    return {pair: _errors(pd.DataFrame(rows[pair]), sla) for pair in pairs}


def _predict(run, pairs, sla, tp_1to1, seed, router) -> dict:
    """One measured run's row per hand-off pair: measured and predicted figures."""
    from .. import latency
    from ..latency import _engine
    from ._disagg import _aggregated_engine, _engine_settings, pd_ratio

    tp = _tensor_parallel(run.ratio, tp_1to1)
    base = {
        "isl": int(run.isl), "osl": int(run.osl), "conc": int(run.conc), "ratio": run.ratio,
        "tensor_parallel": tp, "prompt_mean": round(float(run.prompt_mean), 1),
        "output_mean": round(float(run.output_mean), 1), "complete": bool(run.complete),
        "measured_ttft_s": float(run.p99_ttft_s), "measured_tpot_s": float(run.p99_tpot_s),
        "measured_mean_ttft_s": float(run.mean_ttft_s),
        "measured_median_ttft_s": float(run.median_ttft_s),
        "measured_tokens_per_gpu": float(run.output_throughput) / 8.0
        if run.ratio != "1:1" else float(run.output_throughput) / (2 * tp_1to1),
    }  # fmt: skip
    if not run.complete:
        return {pair: _row(base, pair, [math.nan] * 5, "") for pair in pairs}
    outputs = output_lengths(float(run.output_mean), float(run.osl))
    w = latency.workload(
        prompt_tokens=np.full(outputs.size, round(float(run.prompt_mean))),
        output_tokens=np.maximum(np.rint(outputs), 1),
        samples=None,
    )
    deployment = Deployment("gpt-oss-120b", "H200")
    engine = _engine_settings(int(run.num_prompts), seed, EngineSettings("sglang"), None)
    # the calibration's time outside the steps, which every TTFT holds beside its stages
    overhead = float(_engine._calibration_of(None, "H200", "sglang").engine_array()[6])
    gpus = (int(run.prefill) + int(run.decode)) * tp
    aggregated = _aggregated_engine(
        deployment.at(tp), w, max(1, math.ceil(int(run.conc) / (gpus // tp))), engine
    )
    out = {}
    for pair in pairs:
        ds = pd_ratio(
            deployment, w, concurrency=[int(run.conc)], sla=sla, ratios=[run.ratio],
            tensor_parallel=tp, requests=int(run.num_prompts), warmup_share=0.0,
            settings=EngineSettings("sglang"), seed=seed, router=router, handoff_s=pair[0],
            handoff_delay_s=pair[1], aggregated_curve=aggregated,
        )  # fmt: skip
        one = ds.isel(ratio=0, concurrency=0)
        figures = [
            float(one.latency.sel(metric="ttft")),
            float(one.latency.sel(metric="tpot")),
            float(one.output_tokens_per_gpu),
            float(one.ttft_stages.sum()) + overhead,
            float(one.ttft_median),
        ]
        out[pair] = _row(base, pair, figures, str(one.bottleneck.item()))  # fmt: skip
    return out


def _row(base: dict, pair, figures, bottleneck: str):
    """A run's row at one hand-off pair: its measured figures and the predicted ones.

    ``figures``: P99 TTFT (s), P99 TPOT (s), output tokens/s per GPU, mean and median TTFT (s).
    """
    ttft_s, tpot_s, tokens_per_gpu, mean_ttft_s, median_ttft_s = figures
    return base | {
        "handoff_s": pair[0], "handoff_delay_s": pair[1], "handoff_fit": "given",
        "predicted_ttft_s": ttft_s, "predicted_tpot_s": tpot_s,
        "predicted_tokens_per_gpu": tokens_per_gpu, "predicted_mean_ttft_s": mean_ttft_s,
        "predicted_median_ttft_s": median_ttft_s,
        "bottleneck": bottleneck,
    }  # fmt: skip


def _errors(table: pd.DataFrame, sla: SLA) -> pd.DataFrame:
    """The relative errors and whether each run meets the SLA, measured and predicted."""
    for what in ("ttft", "tpot", "tokens_per_gpu", "mean_ttft", "median_ttft"):
        measured = table[f"measured_{what}" + ("_s" if what != "tokens_per_gpu" else "")]
        predicted = table[f"predicted_{what}" + ("_s" if what != "tokens_per_gpu" else "")]
        table[f"{what}_error"] = predicted / measured - 1.0
    ttft, tpot = sla.bounds["ttft"], sla.bounds["tpot"]
    table["measured_meets"] = (table.measured_ttft_s <= ttft) & (table.measured_tpot_s <= tpot)
    table["predicted_meets"] = (table.predicted_ttft_s <= ttft) & (table.predicted_tpot_s <= tpot)
    return table


def _ttft_loss(table: pd.DataFrame) -> float:
    """The mean of the median absolute P99 and median-TTFT errors over complete runs."""
    done = table[table.complete]
    return 0.5 * float(done.ttft_error.abs().median() + done.median_ttft_error.abs().median())


def held_out(tables: dict) -> pd.DataFrame:
    """Each group's runs (latencies in s, tokens/s per GPU) at the hand-off time fitting the rest.

    ``tables``: :func:`check` tables by hand-off setting (:func:`check_grid`'s). For each (isl,
    osl, conc) group the setting with the least mean of the median absolute P99 TTFT and median
    TTFT errors over the other groups' runs is chosen (the first in sorted order on a tie) and the
    group's rows are taken from its table: leave-one-group-out.
    """
    grid = sorted(tables)
    first = tables[grid[0]]
    keys = sorted({tuple(int(v) for v in k) for k in first[_GROUP].values})
    rows = []
    for key in keys:
        mine = {
            h: (t.isl == key[0]) & (t.osl == key[1]) & (t.conc == key[2]) for h, t in tables.items()
        }
        chosen = min(grid, key=lambda h: _ttft_loss(tables[h][~mine[h]]))
        rows.append(tables[chosen][mine[chosen]].assign(handoff_fit="leave-one-group-out"))
    return pd.concat(rows).sort_values([*_GROUP, "ratio"]).reset_index(drop=True)


def _best(group: pd.DataFrame, prefix: str) -> str:
    ok = group[group[f"{prefix}_meets"] & group.complete]
    if ok.empty:
        return ""
    return str(ok.loc[ok[f"{prefix}_tokens_per_gpu"].idxmax(), "ratio"])


def _close(group: pd.DataFrame, measured: str, predicted: str) -> bool:
    """Whether capnb's pick met the SLA in the measurement with 95 % of the best's tokens/s per GPU."""
    if not measured or not predicted:
        return False
    m = group.set_index("ratio")
    return bool(
        m.measured_meets[predicted]
        and m.measured_tokens_per_gpu[predicted] >= 0.95 * m.measured_tokens_per_gpu[measured]
    )


def picks(table: pd.DataFrame) -> pd.DataFrame:
    """Per (isl, osl, conc): the measured best ratio, capnb's pick, and whether they agree.

    ``within_5pct``: they agree, or capnb's pick met the SLA in the measurement with at least 95 %
    of the best's measured output tokens/s per GPU (the issue's goal counts these).
    """
    out = []
    for (isl, osl, conc), group in table.groupby(["isl", "osl", "conc"], sort=True):
        measured, predicted = _best(group, "measured"), _best(group, "predicted")
        note = ""
        if measured != predicted:
            if not measured:
                m = group.set_index("ratio")
                note = (
                    f"no run met the SLA; capnb predicts {predicted} does (P99 TTFT "
                    f"{m.predicted_ttft_s[predicted]:.3g} s predicted, {m.measured_ttft_s[predicted]:.3g} "
                    f"s measured; TPOT {m.predicted_tpot_s[predicted] * 1e3:.3g} / "
                    f"{m.measured_tpot_s[predicted] * 1e3:.3g} ms)"
                )
            elif not predicted:
                note = f"capnb predicts no ratio meets the SLA (measured: {measured} does)"
            else:
                m = group.set_index("ratio")
                note = (
                    f"capnb ranks {predicted} ({m.predicted_tokens_per_gpu[predicted]:,.0f} "
                    f"tokens/s/GPU predicted, {m.measured_tokens_per_gpu[predicted]:,.0f} measured) "
                    f"above {measured} ({m.predicted_tokens_per_gpu[measured]:,.0f} predicted, "
                    f"{m.measured_tokens_per_gpu[measured]:,.0f} measured)"
                )
                if not m.predicted_meets[measured]:
                    note += f"; it predicts {measured} outside the SLA"
        missing = [r for r in _ORDER if r not in set(group.ratio[group.complete])]
        out.append(
            {"isl": isl, "osl": osl, "conc": conc, "measured_best": measured or "none",
             "capnb_pick": predicted or "none", "agree": measured == predicted,
             "within_5pct": measured == predicted or _close(group, measured, predicted),
             "not_run": ", ".join(missing), "note": note}
        )  # fmt: skip
    return pd.DataFrame(out)


def _signs(errors: pd.Series) -> str:
    """How many runs a figure over- and under-predicts."""
    return f"over-predicted in {int((errors > 0).sum())}, under in {int((errors < 0).sum())}"


def _ttft_by(done: pd.DataFrame) -> str:
    """The median absolute P99 TTFT error per ratio and per prompt/output shape, as a sentence."""
    by_ratio = done.groupby("ratio").ttft_error.apply(lambda e: e.abs().median())
    by_shape = done.groupby(["isl", "osl"]).ttft_error.apply(lambda e: e.abs().median())
    return (
        "P99 TTFT error by ratio: "
        + ", ".join(f"{r} {e:.0%}" for r, e in by_ratio.items())
        + "; by ISL / OSL: "
        + ", ".join(f"{i} / {o} {e:.0%}" for (i, o), e in by_shape.items())
        + "."
    )


def _handoff_sentence(table: pd.DataFrame) -> str:
    """What the hand-off's time outside the GPU was: fitted leave-one-group-out, or given."""
    per_group = table.groupby(_GROUP, sort=True)[["handoff_s", "handoff_delay_s"]].first()
    if (table.handoff_fit == "given").all():
        pairs = sorted(set(map(tuple, per_group.to_numpy().tolist())))
        given = "; ".join(f"{h * 1e3:g} ms of work and {d * 1e3:g} ms of latency" for h, d in pairs)
        return f"The hand-off's time outside the GPU is given ({given}); nothing is fitted on these runs."
    counts = per_group.value_counts().sort_index()
    chosen = ", ".join(f"{h * 1e3:g} + {d * 1e3:g} ms in {n}" for (h, d), n in counts.items())
    works = sorted({h for h, _ in HANDOFF_GRID})
    delays = sorted({d for _, d in HANDOFF_GRID})
    return (
        "The hand-off's time outside the GPU has no published figure: a decode instance's work per "
        "request (bootstrap, transfer bookkeeping, polling; one request at a time, so it queues in "
        "a burst) and a fixed latency per request (the router's two legs, the prompt tokenized at "
        "both instances, the bootstrap handshake; it queues nothing). Both are fitted on these runs "
        "leave-one-group-out: each group is predicted with the pair of work "
        f"({', '.join(f'{h * 1e3:g}' for h in works)} ms) and latency "
        f"({', '.join(f'{d * 1e3:g}' for d in delays)} ms) that gives the other 14 groups the least "
        "mean of the median absolute P99 TTFT error and the median absolute median-TTFT error "
        f"(work + latency: {chosen} of the {len(per_group)} groups); nothing else is fitted on them."
    )


def markdown(table: pd.DataFrame, *, sla: SLA = DSTACK_SLA, tp_1to1: int = 4) -> str:
    """The VALIDATION.md section for a :func:`check` table."""
    chosen = picks(table)
    done = table[table.complete]
    agree, close = int(chosen.agree.sum()), int(chosen.within_5pct.sum())
    med = {
        w: float(done[f"{w}_error"].abs().median())
        for w in ("ttft", "tpot", "tokens_per_gpu", "mean_ttft", "median_ttft")
    }
    lines = [
        SECTION,
        "",
        "Generated by `python -m capnb.capacity.validate_disagg --write VALIDATION.md` (do not edit "
        "by hand). dstack's SGLang prefill/decode runs of gpt-oss-120b on 8 x H200 SXM "
        "(github.com/dstackai/benchmarks @06c957ab, `comparison/pd_ratio`, "
        "`datasets/benchmarks/disaggregated/`) against `capnb.capacity.pd_ratio`: each run's "
        "500 requests simulated one by one through SGLang's hand-off (`capnb.kernels.pd`): the "
        "decode instance's pre-allocation of the prompt's KV (512 reserved tokens a request, "
        "SGLang's default), the prefill queue, prefill, the KV transfer over the link, the decode "
        "side's work per request, and the decode instance's loop pass that streams the first "
        "token; SGLang's defaults and the bundled SGLang calibration (fitted on other sources); "
        "round-robin routing (dstack's `sglang_router --policy round_robin`); every request "
        "counted, as `vllm bench serve` reports. "
        + _handoff_sentence(table)
        + f" SLA: {sla}; the best ratio is the one with the "
        "most output tokens/s per GPU within it. GPUs per worker: TP 2 for 1:3, 2:2 and 3:1 "
        f"(dstack's README), TP {tp_1to1} for 1:1 (capnb's assumption: "
        "`capnb.capacity.validate_disagg` says why).",
        "",
        f"capnb picks the measured best ratio in {agree} of {len(chosen)} groups, and the best or "
        f"a ratio within 5 % of its measured output tokens/s per GPU (within the SLA) in {close} "
        f"of {len(chosen)} (goal: 12). Median absolute error over {len(done)} runs: P99 TTFT "
        f"{med['ttft']:.0%} (goal: 25 %), P99 TPOT {med['tpot']:.0%}, output tokens/s per GPU "
        f"{med['tokens_per_gpu']:.0%}; median TTFT {med['median_ttft']:.0%} "
        f"({_signs(done.median_ttft_error)}), mean TTFT {med['mean_ttft']:.0%} "
        f"({_signs(done.mean_ttft_error)}; dstack's median and mean over the 500 requests). "
        f"{_ttft_by(done)}",
        "",
        "| ISL / OSL | concurrency | measured best | capnb's pick | within 5 % | not run or left "
        "out | why not |",
        "|---|---:|---|---|---|---|---|",
    ]
    for _, r in chosen.iterrows():
        lines.append(
            f"| {r.isl} / {r.osl} | {r.conc} | {r.measured_best} | {r.capnb_pick} | "
            f"{'yes' if r.within_5pct else 'no'} | {r.not_run or '-'} | "
            f"{r.note or ('-' if r.agree else '')} |"
        )
    lines += [
        "",
        "Per run (P99s; error = predicted / measured - 1; tokens/s per GPU of output):",
        "",
        "| ISL / OSL | conc. | ratio | output mean | TTFT meas. / pred. (s) | error | "
        "TPOT meas. / pred. (ms) | error | tokens/s/GPU meas. / pred. | bottleneck |",
        "|---|---:|---|---:|---|---:|---|---:|---|---|",
    ]
    for _, r in table.iterrows():
        if not r.complete:
            lines.append(
                f"| {r.isl} / {r.osl} | {r.conc} | {r.ratio} | {r.output_mean:,.0f} | left out: "
                "not every prompt completed | | | | | |"
            )
            continue
        lines.append(
            f"| {r.isl} / {r.osl} | {r.conc} | {r.ratio} | {r.output_mean:,.0f} | "
            f"{r.measured_ttft_s:.3g} / {r.predicted_ttft_s:.3g} | {r.ttft_error:+.0%} | "
            f"{r.measured_tpot_s * 1e3:.3g} / {r.predicted_tpot_s * 1e3:.3g} | "
            f"{r.tpot_error:+.0%} | {r.measured_tokens_per_gpu:,.0f} / "
            f"{r.predicted_tokens_per_gpu:,.0f} | {r.bottleneck or '-'} |"
        )
    return "\n".join(lines) + "\n"


def stored() -> pd.DataFrame:
    """The stored record of :func:`check` (written by ``--write``): latencies in s, tokens/s per GPU."""
    table = pd.read_csv(RECORD)
    table["bottleneck"] = table["bottleneck"].fillna("")
    return table


def main(argv=None) -> int:
    """The command line: print the table; with ``--write``, store the record and the section."""
    parser = argparse.ArgumentParser(
        prog="python -m capnb.capacity.validate_disagg", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--write", metavar="VALIDATION.md", help="store the record and the section")
    parser.add_argument("--tp-1to1", type=int, default=4, help="GPUs per worker of the 1:1 runs")
    parser.add_argument(
        "--sla", type=SLA.parse, default=DSTACK_SLA, help="the SLA (default ttft=2,tpot=25ms)"
    )
    parser.add_argument(
        "--handoff",
        type=float,
        nargs=2,
        metavar=("WORK_S", "DELAY_S"),
        default=None,
        help="a decode instance's work per request and the fixed latency, s (default: both fitted "
        "leave-one-group-out)",
    )
    args = parser.parse_args(argv)
    if args.handoff is None:
        table = held_out(check_grid(HANDOFF_GRID, sla=args.sla, tp_1to1=args.tp_1to1))
    else:
        work, delay = args.handoff
        table = check(sla=args.sla, tp_1to1=args.tp_1to1, handoff_s=work, handoff_delay_s=delay)
    text = markdown(table, sla=args.sla, tp_1to1=args.tp_1to1)
    print(text)
    if args.write:
        table.to_csv(RECORD, index=False)
        from ..data import write_section

        write_section(Path(args.write), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

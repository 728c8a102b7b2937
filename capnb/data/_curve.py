"""The latency-concurrency curve as an xarray Dataset: its layout, and the checks every curve passes.

A curve holds, over ``concurrency`` (requests in flight on one instance):

- ``latency`` (s) over (concurrency, metric, latency_quantile): quantiles of the per-request latency
  of each metric, NaN where the source did not measure that metric or quantile;
- ``mean_latency`` (s) over (concurrency, metric);
- ``measured_qps`` (requests/s) over concurrency: the throughput the benchmark itself reported.

Its attrs record where it came from (``source``, ``kind``: ``measured`` or ``analytic``), what it
measured (``model``, ``gpu``, ``tensor_parallel``, ``engine``) and its workload (``prompt_tokens``,
``output_tokens``: mean tokens per request), plus ``notes`` on every correction made on the way in.

Both the file readers (:mod:`capnb.data`) and the latency step (:mod:`capnb.latency`) build curves
through :func:`build`, so every curve is checked the same way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from .. import glossary, words
from .._validate import positive_int
from ..errors import InputError

__all__ = ["METRICS", "QUANTILES", "UNITS", "add_note", "build", "notes", "to_seconds"]

#: Latency metrics: time to first token, time per output token (per request, after the first),
#: inter-token latency (every gap between tokens), end-to-end request latency.
METRICS = ("ttft", "tpot", "itl", "e2e")
#: Quantiles every curve carries (others a source measured are kept too).
QUANTILES = (0.5, 0.9, 0.95, 0.99)
#: Most requests in flight a curve's row may hold (a benchmark's are thousands; a float past
#: 2**53 holds no exact whole number, and 2**63 is no int64: a corrupt field, named as such).
MOST_CONCURRENCY = 1e12
#: Seconds per unit of the time units capnb reads.
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def to_seconds(values: object, unit: str, where: str) -> np.ndarray:
    """Convert ``values`` given in ``unit`` to seconds; an unknown unit is an error naming ``where``."""
    key = str(unit).strip().lower()
    if key not in UNITS:
        raise InputError(f"{where}: unknown time unit {unit!r}; capnb reads {', '.join(UNITS)}")
    return np.asarray(values, dtype=float) * UNITS[key]


def notes(ds: xr.Dataset) -> list[str]:
    """The corrections and derivations recorded on a curve, one per line."""
    text = ds.attrs.get("notes", "")
    return [line for line in text.split("\n") if line]


def add_note(ds: xr.Dataset, note: str) -> None:
    """Record a correction or derivation on a curve (in place)."""
    ds.attrs["notes"] = "\n".join([*notes(ds), note])


def _mark_placed(curve: xr.Dataset, in_flight, order, conc) -> None:
    """List the rows a reader placed by Little's law (rate runs: no closed loop at that concurrency)."""
    if in_flight is None:
        return
    placed = np.isfinite(np.asarray(in_flight, float)[order])
    if placed.any():
        curve.attrs["placed_by_littles_law"] = [int(c) for c in conc[placed]]


def build(
    concurrency: Sequence[int] | np.ndarray,
    latency: Mapping[tuple[str, float], Sequence[float]],
    *,
    mean: Mapping[str, Sequence[float]] | None = None,
    measured_qps: Sequence[float] | None = None,
    rows: Sequence[str] | None = None,
    source: str,
    kind: str = "measured",
    attrs: Mapping[str, object] | None = None,
    notes: Sequence[str] = (),
    min_points: int = 2,
    in_flight: Sequence[float] | None = None,
) -> xr.Dataset:
    """Check measured values and return them as a curve Dataset (values in seconds).

    Parameters
    ----------
    concurrency
        Requests in flight at each row: positive integers, distinct. Rows given out of order are
        sorted (and the sort is noted).
    latency
        ``{(metric, quantile): values}`` in seconds, one value per row.
    mean
        ``{metric: values}``: mean latency in seconds per row.
    measured_qps
        The throughput the benchmark reported per row (requests/s).
    rows
        A label per row for error messages (a file name, ``"row 3"``); default ``"row <i>"``.
    source
        Where the values come from (a path, a catalog name).
    kind, attrs, notes
        Stored on the Dataset.
    min_points
        Fewest rows a curve may have (two: one point cannot show how latency grows).
    in_flight
        For rows a reader placed by Little's law (a run at a request rate has no fixed
        concurrency): the measured mean requests in flight before rounding, NaN for rows run at a
        fixed concurrency. Named in the message for two rows on one concurrency, and listed in
        ``attrs["placed_by_littles_law"]``, which :func:`capnb.latency.calibrate` refuses.

    Raises
    ------
    InputError
        Empty or too short, duplicate or non-positive concurrency, NaN or negative latencies inside
        a measured column, a higher quantile below a lower one (P99 below P50), an unknown metric.
    """
    conc = np.asarray(concurrency)
    labels = list(rows) if rows is not None else [f"row {i + 1}" for i in range(conc.size)]
    if conc.ndim != 1 or conc.size == 0:
        raise InputError(f"{source}: the curve is empty (no concurrency rows)")
    if conc.size < min_points:
        raise InputError(
            f"{source}: a latency curve needs at least {min_points} concurrency levels, got "
            f"{conc.size} ({labels[0]}); one point cannot show how latency grows with concurrency"
        )
    conc_f = conc.astype(float)
    bad = ~np.isfinite(conc_f) | (conc_f < 1) | (conc_f != np.round(conc_f))
    bad |= conc_f > MOST_CONCURRENCY  # (past it no whole number is exact, nor an int64 past 2**63)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        most = f" (at most {MOST_CONCURRENCY:.0e})" if conc_f[i] > MOST_CONCURRENCY else ""
        raise InputError(f"{source}: concurrency must be a positive integer{most}, got "
                         f"{conc_f[i]:g} at {labels[i]}")  # fmt: skip
    conc = conc_f.astype(np.int64)
    values, counts = np.unique(conc, return_counts=True)
    if (counts > 1).any():
        twice = int(values[counts > 1][0])
        rows_twice = np.flatnonzero(conc == twice)
        where = [labels[i] for i in rows_twice]
        placed = np.full(conc.size, np.nan) if in_flight is None else np.asarray(in_flight, float)
        placed_rows = [i for i in rows_twice if np.isfinite(placed[i])]
        if placed_rows:
            figures = ", ".join(f"{placed[i]:.3g}" for i in placed_rows)
            runs = "these were rate runs"
            if len(placed_rows) < len(rows_twice):
                runs = f"{', '.join(labels[i] for i in placed_rows)} were rate runs"
            raise InputError(
                f"{source}: concurrency {twice} appears more than once ({', '.join(where)}): "
                f"{runs}, which have no fixed concurrency; capnb placed them by Little's law "
                f"(request_throughput x mean e2e) at {figures} requests in flight, which "
                f"round to {twice}. A curve holds one run per whole number of "
                "requests in flight: keep the one nearest the load you plan for and leave the "
                "others out, or measure these loads at a fixed concurrency "
                "(vllm bench serve --max-concurrency N, aiperf profile --concurrency N, "
                "without --request-rate)"
            )
        raise InputError(
            f"{source}: concurrency {twice} appears more than once ({', '.join(where)}); "
            "keep one measurement per concurrency (or average the repeats before reading)"
        )
    order = np.argsort(conc, kind="stable")
    extra_notes = list(notes)
    if (order != np.arange(conc.size)).any():
        extra_notes.append("rows were not in concurrency order; capnb sorted them")

    unknown = sorted({m for m, _ in latency} - set(METRICS)) + sorted(
        set(mean or {}) - set(METRICS)
    )
    if unknown:
        raise InputError(f"{source}: unknown latency metric {unknown[0]!r}; use one of {METRICS}")
    quantiles = sorted(set(QUANTILES) | {float(q) for _, q in latency})
    for q in quantiles:
        if not 0.0 < q < 1.0:
            raise InputError(f"{source}: latency quantile {q} is not inside (0, 1)")
    table = np.full((conc.size, len(METRICS), len(quantiles)), np.nan)
    for (metric, q), column in latency.items():
        table[:, METRICS.index(metric), quantiles.index(float(q))] = _column(
            column, conc.size, f"{metric} {words.quantile(float(q))}", source, labels
        )
    means = np.full((conc.size, len(METRICS)), np.nan)
    for metric, column in (mean or {}).items():
        means[:, METRICS.index(metric)] = _column(
            column, conc.size, f"mean {metric}", source, labels
        )
    if np.isnan(table).all() and np.isnan(means).all():
        raise InputError(f"{source}: no latency values at all")
    _check_quantile_order(table, quantiles, conc, source, labels)
    _check_quantiles_against_means(table, means, quantiles, conc, source, labels)
    qps = (
        np.full(conc.size, np.nan)
        if measured_qps is None
        else _column(measured_qps, conc.size, "measured throughput (measured_qps)", source, labels,
                     above_zero=("requests/s", "a run that completed no request measured no latency"))
    )  # fmt: skip
    table, means, qps, conc = table[order], means[order], qps[order], conc[order]
    dims = ("concurrency", "metric", "latency_quantile")
    curve = xr.Dataset(
        {
            "latency": (dims, table, glossary.attrs("latency")),
            "mean_latency": (("concurrency", "metric"), means, glossary.attrs("mean_latency")),
            "measured_qps": ("concurrency", qps, glossary.attrs("measured_qps")),
        },
        coords={
            "concurrency": ("concurrency", conc, glossary.attrs("concurrency")),
            "metric": ("metric", list(METRICS), glossary.attrs("metric")),
            "latency_quantile": (
                "latency_quantile",
                np.asarray(quantiles),
                glossary.attrs("latency_quantile"),
            ),
        },
        attrs={"source": str(source), "kind": kind, **dict(attrs or {}), "notes": ""},
    )
    _check_setup(curve.attrs, str(source))
    _mark_placed(curve, in_flight, order, conc)
    for note in extra_notes:
        add_note(curve, note)
    return curve


def _check_setup(attrs: dict, source: str) -> None:
    """The workload's tokens and the tensor-parallel degree a curve records, checked in place."""
    for field in ("prompt_tokens", "output_tokens"):
        if field in attrs:
            attrs[field] = tokens(attrs[field], field, source)
    if "tensor_parallel" in attrs:  # GPUs per instance: it multiplies GPUs and cost
        attrs["tensor_parallel"] = positive_int(
            attrs["tensor_parallel"], f"{source}: tensor_parallel"
        )


def tokens(value: object, field: str, source: str) -> float:
    """A workload's mean ``prompt_tokens`` or ``output_tokens`` per request: a finite number > 0."""
    number = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )
    if not number or not math.isfinite(value) or value <= 0:
        raise InputError(
            f"{source}: {field} = {value!r}: expected the mean tokens per request, a finite "
            "number > 0 (it sizes the KV cache and prices each output token)"
        )
    return float(value)


def _column(values, size, what, source, labels, *, above_zero=None) -> np.ndarray:
    """One value per row, NaN in every row or none; ``above_zero`` (unit, why): 0 is refused."""
    array = np.asarray(values, dtype=float).reshape(-1)
    if array.size != size:
        raise InputError(f"{source}: {what} has {array.size} values for {size} concurrency rows")
    missing = np.isnan(array)
    if missing.any() and not missing.all():
        i = int(np.flatnonzero(missing)[0])
        raise InputError(
            f"{source}: {what} is missing (NaN) at {labels[i]} but measured elsewhere; "
            "a curve needs the metric at every concurrency, or not at all"
        )
    bad = ~missing & (~np.isfinite(array) | (array < 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{source}: {what} must be finite and >= 0, got {array[i]} at {labels[i]}")
    if above_zero and (array == 0).any():  # a throughput of 0: Little's law's mean e2e is inf
        i = int(np.flatnonzero(array == 0)[0])
        raise InputError(f"{source}: {what} must be > 0 {above_zero[0]}, got 0 at {labels[i]}: "
                         f"{above_zero[1]}")  # fmt: skip
    return array


def _check_quantile_order(table, quantiles, conc, source, labels) -> None:
    for m, metric in enumerate(METRICS):
        measured = [k for k in range(len(quantiles)) if not np.isnan(table[0, m, k])]
        for low, high in itertools.pairwise(measured):
            below = table[:, m, high] < table[:, m, low]
            if below.any():
                i = int(np.flatnonzero(below)[0])
                raise InputError(
                    f"{source}: {metric} {words.quantile(quantiles[high])} "
                    f"({table[i, m, high]:.6g} s) is below {words.quantile(quantiles[low])} "
                    f"({table[i, m, low]:.6g} s) at concurrency {conc[i]} ({labels[i]}); a higher "
                    "quantile cannot be lower: check the column order and units"
                )


#: How far a quantile may stand above the most its mean allows (``mean / (1 - q)``) before the
#: curve is refused: room for a mean derived by Little's law from the throughput and for
#: interpolated percentiles. The bundled curves stand at most at 0.65 of the bound.
_MEAN_BOUND_SLACK = 1.5


def _check_quantiles_against_means(table, means, quantiles, conc, source, labels) -> None:
    """No quantile above what its mean allows (far above: one of the two in the wrong unit).

    A share ``1 - q`` of requests lies at or above the ``q`` quantile, so for latencies >= 0 it is
    at most ``mean / (1 - q)``: P99 at most 100 x the mean.
    """
    for m, metric in enumerate(METRICS):
        for k, q in enumerate(quantiles):
            with np.errstate(invalid="ignore", divide="ignore"):
                over = table[:, m, k] * (1.0 - q) > _MEAN_BOUND_SLACK * means[:, m]
            if over.any():
                i = int(np.flatnonzero(over)[0])
                value, mean = table[i, m, k], means[i, m]
                label = words.quantile(q)
                raise InputError(
                    f"{source}: {metric} {label} ({value:.6g} s) is {value / mean:.0f} times the "
                    f"mean {metric} ({mean:.6g} s) at concurrency {conc[i]} ({labels[i]}); at "
                    f"most {1 - q:.0%} of requests lie above {label}, so it cannot exceed "
                    f"{1 / (1 - q):.3g} times the mean: check the columns' units"
                )

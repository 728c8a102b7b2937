"""Mixed fleets by request size: short and long requests sent to different GPU types.

:func:`capnb.capacity.mix` prices one latency curve per GPU for the whole workload, so mixing GPU
types only fills whole instances better. Mélange (Griggs et al., 2024) gets its saving elsewhere: a
small GPU serves short requests more cheaply per token, a large one long requests, so requests are
binned by prompt and output length and each bin is sent where it is cheapest. Here:

- :func:`size_bins` bins a request log by prompt and output length (log-spaced edges by default);
- :func:`size_options` computes each bin's requests/s per instance under the SLA on every GPU and
  tensor-parallel degree, from the bin's own requests (the analytic model as
  :func:`capnb.capacity.sweep` uses it, or the serving-engine model);
- :func:`mix_by_size` is the integer program: per slot, each bin's request rate is split across
  pools (``y``, requests/s), an instance's time is shared by the bins it serves in proportion to
  their load (``sum_b y_b / q_b <= instances``: Mélange's assumption), with a reserved base held
  in every slot and on-demand and spot instances above it, as in :func:`capnb.capacity.mix`:

      minimise   sum_p g_p (S r_p R_p + sum_s (o_p O_ps + v_p V_ps))
      subject to sum_p y_bps = d_bs                                  for every bin b, slot s
                 sum_b y_bps / q_bp <= R_p + O_ps + (1 - preemption) V_ps   for every pool, slot
                 sum_{p of type G} g_p (R_p + O_ps + V_ps) <= limit_G
                 R, O, V whole, y >= 0

  With ``slices=k`` each bin's rate is cut into ``k`` equal slices and each slice goes whole to one
  pool (Mélange's own formulation, binary); the default splits it freely (the limit of many
  slices), never dearer.

Solved by HiGHS (:func:`scipy.optimize.milp`): the reserved base over the day within ``mip_gap``,
then each slot exactly with the base fixed.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .. import glossary, words
from ..errors import InfeasibleError, InputError, NotPricedError
from ._mix import (
    _not_priced,
    _prices,
    checked_demand,
    checked_limits,
    checked_rates,
    checked_share,
    quiet_milp,
    saving,
    unpriced,
)

__all__ = ["mix_by_size", "size_bins", "size_options"]

#: Default bin edges (tokens): Mélange's buckets go 25, 100, 250, 500, 1k, 2k; these double
#: twice per bin up to 16k prompt tokens and 4k output tokens (an open last bin above).
PROMPT_EDGES = (1, 128, 512, 2048, 8192, math.inf)
OUTPUT_EDGES = (1, 64, 256, 1024, math.inf)


def _edges(values, name: str) -> np.ndarray:
    try:
        edges = np.asarray(values, dtype=float)
    except (TypeError, ValueError):  # words, not token counts
        edges = np.empty(0)
    if edges.ndim != 1 or edges.size < 2 or np.isnan(edges).any() or (np.diff(edges) <= 0).any():
        raise InputError(f"{name} must be at least two increasing token counts, got {values!r}")
    finite = edges[np.isfinite(edges)]
    if (finite != np.round(finite)).any() or np.isinf(edges[:-1]).any():
        between = finite[finite != np.round(finite)]
        raise InputError(
            f"{name} must be whole token counts (the last may be inf), got "
            f"{between.tolist() or values!r}: a bin's label names the token counts it holds"
        )
    return edges


def _inside(prompt: np.ndarray, output: np.ndarray, pe: np.ndarray, oe: np.ndarray) -> None:
    """Every request within the edges, or the error names the request, the edge and the side."""
    for name, tokens, edges in (("prompt", prompt, pe), ("output", output, oe)):
        for i, (edge, side, fix) in enumerate(
            ((0, "below", f"start them at {tokens.min():g} or lower"),
             (-1, "at or above", "end them with inf"))
        ):  # fmt: skip
            out = tokens < edges[0] if i == 0 else tokens >= edges[-1]
            if out.any():
                r = int(np.flatnonzero(out)[0])
                raise InputError(
                    f"request {r} ({prompt[r]:g} prompt, {output[r]:g} output tokens) is outside "
                    f"the bin edges: {name} {tokens[r]:g} is {side} {name}_edges[{edge}] = "
                    f"{edges[edge]:g} tokens; {fix}"
                )


def _label(low: float, high: float) -> str:
    return f"{int(low)}+" if math.isinf(high) else f"{int(low)}-{int(high) - 1}"


def size_bins(
    trace=None, *, prompt_tokens=None, output_tokens=None, prompt_edges=PROMPT_EDGES,
    output_edges=OUTPUT_EDGES,
) -> xr.Dataset:  # fmt: skip
    """Bin a request log by prompt and output length.

    Parameters
    ----------
    trace
        A request log with ``prompt_tokens`` and ``output_tokens`` over ``request``
        (:func:`capnb.data.load_trace`), or None with the two arrays given.
    prompt_edges, output_edges
        Bin edges in tokens: bin ``i`` holds ``edges[i] <= length < edges[i + 1]``.

    Returns
    -------
    xarray.Dataset
        Over ``size_bin`` (the non-empty bins, labelled ``"prompt 128-511 / output 64-255"``):
        ``requests``, ``request_share``, ``mean_prompt_tokens``, ``mean_output_tokens`` and the
        edges (``prompt_low``, ``prompt_high``, ``output_low``, ``output_high``); over
        ``request``: ``prompt_tokens``, ``output_tokens`` and ``size_bin_index`` (each request's
        bin, an index along ``size_bin``).

    Examples
    --------
    >>> bins = size_bins(prompt_tokens=[100, 100, 3000], output_tokens=[50, 300, 50])
    >>> bins.size_bin.values.tolist()  # doctest: +NORMALIZE_WHITESPACE
    ['prompt 1-127 / output 1-63', 'prompt 1-127 / output 256-1023',
     'prompt 2048-8191 / output 1-63']
    >>> bins.requests.values.tolist()
    [1, 1, 1]
    """
    from ..latency import workload

    # workload validates the lengths (and sorts them): the bins keep the log's order
    everything = workload(
        trace, prompt_tokens=prompt_tokens, output_tokens=output_tokens, samples=None
    )
    if trace is not None:
        prompt_tokens, output_tokens = trace.prompt_tokens.values, trace.output_tokens.values
    prompt = np.asarray(prompt_tokens, dtype=float).ravel()
    output = np.asarray(output_tokens, dtype=float).ravel()
    pe, oe = _edges(prompt_edges, "prompt_edges"), _edges(output_edges, "output_edges")
    _inside(prompt, output, pe, oe)
    cell = (np.searchsorted(pe, prompt, "right") - 1) * (oe.size - 1) + (
        np.searchsorted(oe, output, "right") - 1
    )
    used, index = np.unique(cell, return_inverse=True)
    counts = np.bincount(index)
    pi, oi = used // (oe.size - 1), used % (oe.size - 1)
    labels = [f"prompt {_label(pe[a], pe[a + 1])} / output {_label(oe[b], oe[b + 1])}"
              for a, b in zip(pi, oi, strict=True)]  # fmt: skip
    bin_dim, tokens = "size_bin", glossary.attrs("prompt_tokens")["units"]
    return xr.Dataset(
        {
            "requests": (bin_dim, counts, glossary.attrs("requests", long_name="requests in the bin")),
            "request_share": (bin_dim, counts / counts.sum(), glossary.attrs("request_share")),
            "mean_prompt_tokens": (bin_dim, np.bincount(index, prompt) / counts,
                                   glossary.attrs("prompt_tokens", long_name="mean prompt tokens")),
            "mean_output_tokens": (bin_dim, np.bincount(index, output) / counts,
                                   glossary.attrs("output_tokens", long_name="mean output tokens")),
            "prompt_tokens": ("request", prompt, glossary.attrs("prompt_tokens")),
            "output_tokens": ("request", output, glossary.attrs("output_tokens")),
            "size_bin_index": ("request", index, glossary.attrs("size_bin_index")),
        },
        coords={
            bin_dim: (bin_dim, labels, glossary.attrs("size_bin")),
            "prompt_low": (bin_dim, pe[pi], {"units": tokens, "long_name": "prompt tokens from"}),
            "prompt_high": (bin_dim, pe[pi + 1], {"units": tokens, "long_name": "prompt tokens below"}),
            "output_low": (bin_dim, oe[oi], {"units": tokens, "long_name": "output tokens from"}),
            "output_high": (bin_dim, oe[oi + 1], {"units": tokens, "long_name": "output tokens below"}),
        },
        attrs={"source": str(everything.attrs.get("source", ""))},
    )  # fmt: skip


def _one_bin(bins: xr.Dataset, i: int):
    from ..latency import workload

    mine = bins.size_bin_index.values == i
    return workload(prompt_tokens=bins.prompt_tokens.values[mine],
                    output_tokens=bins.output_tokens.values[mine])  # fmt: skip


def size_options(
    model, gpu, tensor_parallel, sla, bins: xr.Dataset, *, metric: str = "tpot",
    quantile: float = 0.99, accounting: str = "article", latency: str = "analytic",
    calibration=None,
) -> xr.Dataset:  # fmt: skip
    """Each size bin's requests/s per instance under the SLA, on every GPU and degree.

    The bin's own requests are the workload (``seq_len`` its mean context), so a bin of short
    requests gets the concurrency and throughput short requests allow.

    Parameters
    ----------
    model, gpu, tensor_parallel, sla
        As in :func:`capnb.capacity.sweep`: ``sla`` in seconds of ``metric``, or one
        :class:`capnb.records.SLA` (then it gives the metrics and the quantile).
    bins
        :func:`size_bins`' answer.
    metric, quantile, accounting, calibration
        As in :func:`capnb.capacity.sweep`.
    latency
        ``"analytic"`` (:func:`capnb.capacity.sweep`) or ``"engine"``
        (:func:`capnb.capacity.sweep_engine`, slower).

    Returns
    -------
    xarray.Dataset
        ``per_instance_qps`` (NaN where the SLA is not met) and ``binding`` over (``size_bin``,
        ``gpu``, ``tensor_parallel``), with ``request_share`` over ``size_bin``. Attr
        ``few_requests``, where it applies: the bins (named, with their counts) of fewer than
        ``1 / (1 - quantile)`` requests, whose quantile is their longest request's latency;
        ``beyond_context``: the bins (named, with how many of their requests) holding requests
        longer than the model's context, which vLLM rejects and the bin's rate prices as served.
    """
    from ._engine_sweep import sweep_engine
    from ._sweep import sweep

    if latency not in ("analytic", "engine"):
        raise InputError(f"latency must be 'analytic' or 'engine', got {latency!r}")
    if not isinstance(bins, xr.Dataset) or "size_bin_index" not in bins:
        raise InputError("bins must be capnb.capacity.size_bins' answer")
    # one value or a sequence of them (a list, tuple, range or array), as sweep takes them
    gpus = [gpu] if isinstance(gpu, str) or np.ndim(gpu) == 0 else list(gpu)
    tps = [tensor_parallel] if np.ndim(tensor_parallel) == 0 else list(tensor_parallel)
    parts = []
    for i in range(bins.sizes["size_bin"]):
        load = _one_bin(bins, i)
        if latency == "analytic":
            seq = math.ceil(float((load.prompt_tokens + load.output_tokens).mean()))
            one = sweep(model, gpus, tps, seq, sla, workload=load, metric=metric,
                        quantile=quantile, accounting=accounting, calibration=calibration)  # fmt: skip
            one = one.squeeze([d for d in ("model", "seq_len", "sla") if d in one.dims], drop=True)
        else:
            try:
                one = sweep_engine(model, gpus, tps, load, sla, 1.0, metric=metric,
                                   quantile=quantile)  # fmt: skip
            except InfeasibleError:  # no option's KV cache holds the bin: NaN, the mix names it
                one = _held_by_none(gpus, tps)
        qps = one.per_instance_qps.where(one.per_instance_qps > 0)
        parts.append(xr.Dataset({"per_instance_qps": qps, "binding": one.binding}))
    out = xr.concat(parts, dim="size_bin", coords="minimal", compat="override")
    out = out.drop_vars([c for c in out.coords if c not in ("gpu", "tensor_parallel")])
    out = out.assign_coords(size_bin=bins.size_bin)
    out["per_instance_qps"].attrs = glossary.attrs("per_instance_qps")
    out["request_share"] = bins.request_share
    out.attrs = {"latency": latency, "metric": metric, "quantile": quantile, "sla": str(sla)}
    out.attrs |= _few_requests(bins, getattr(sla, "quantile", quantile))
    out.attrs |= _beyond_context(bins, model)
    return out.transpose("size_bin", "gpu", "tensor_parallel")


def _beyond_context(bins: xr.Dataset, model) -> dict:
    """``beyond_context``: the bins holding requests longer than the model's context.

    vLLM rejects them (its default ``max_model_len``); their bin is priced as if they were served,
    as the plan prices them (its ``context_window`` check), and named here.
    """
    from ..data import load_model

    spec = load_model(model)
    lengths = bins.prompt_tokens.values + bins.output_tokens.values
    said = []
    for i, name in enumerate(bins.size_bin.values):
        mine = lengths[bins.size_bin_index.values == i]
        beyond = spec.beyond_context(mine)
        if beyond is not None:
            over, longest, limit = beyond
            said.append(f"{name} ({round(over * mine.size):,} of {mine.size:,} requests, the "
                         f"longest {longest:,} tokens)")  # fmt: skip
    if not said:
        return {}
    return {"beyond_context": (
        f"{', '.join(said)}: longer than {spec.name}'s context of {limit:,} tokens (prompt + "
        "output; vLLM's default max_model_len), which vLLM rejects; priced as if served: serve "
        "a model with a longer context, or leave those requests out of the mix"
    )}  # fmt: skip


def _few_requests(bins: xr.Dataset, quantile: float) -> dict:
    """``few_requests``: the bins with fewer requests than a ``quantile`` needs to be a tail.

    Below ``1 / (1 - quantile)`` requests (100 for P99) the quantile lies between the bin's two
    longest requests: with 3 it is their maximum, not a P99.
    """
    least = math.ceil(1.0 / (1.0 - float(quantile)) - 1e-9)
    counts = np.bincount(bins.size_bin_index.values, minlength=bins.sizes["size_bin"])
    few = [f"{name} ({int(n)} request{'s' if n != 1 else ''})"
           for name, n in zip(bins.size_bin.values, counts, strict=True) if n < least]  # fmt: skip
    if not few:
        return {}
    return {"few_requests": (
        f"{', '.join(few)}: a P{float(quantile) * 100:g} of fewer than {least} requests is read "
        "from the bin's longest one or two, not from a tail; log more such requests, or widen "
        "the bin edges"
    )}  # fmt: skip


def _held_by_none(gpus, tps) -> xr.Dataset:
    """A bin no option's KV cache holds one request of: no requests/s, ``infeasible_memory``."""
    from ..data import load_gpus

    ids = [str(g) for g in load_gpus(gpus).gpu.values]
    shape = (len(ids), len(tps))
    return xr.Dataset(
        {"per_instance_qps": (("gpu", "tensor_parallel"), np.full(shape, np.nan)),
         "binding": (("gpu", "tensor_parallel"), np.full(shape, "infeasible_memory", object))},
        coords={"gpu": ids, "tensor_parallel": [int(t) for t in tps]},
    )  # fmt: skip


# -- the integer program --------------------------------------------------------------------------
def _pool_table(options: xr.Dataset):
    """``(q, gpus, tps, labels)``: per-bin requests/s per instance as (bin, pool), pools listed."""
    if not isinstance(options, xr.Dataset) or "per_instance_qps" not in options:
        raise InputError("options must be a Dataset with per_instance_qps over size_bin x pools")
    qps = options.per_instance_qps
    if "size_bin" not in qps.dims:
        raise InputError(
            "options.per_instance_qps has no size_bin dim (capnb.capacity.size_options)"
        )
    if "pool" not in qps.dims:
        qps = qps.stack(pool=["gpu", "tensor_parallel"])
    checked_rates(qps)
    q = qps.transpose("size_bin", "pool").values.astype(float)
    q = np.where(q > 0, q, np.nan)  # NaN or 0: the pool misses the SLA for that bin
    serves = ~np.isnan(q).all(axis=0)
    serves[serves] = _undominated(q[:, serves], qps.tensor_parallel.values[serves],
                                  qps.gpu.values[serves])  # fmt: skip
    gpus = [str(g) for g in qps.gpu.values[serves]]
    tps = qps.tensor_parallel.values[serves].astype(float)
    labels = [f"{g} TP{int(t)}" for g, t in zip(gpus, tps, strict=True)]
    return q[:, serves], gpus, tps, labels


def _undominated(q: np.ndarray, tp, gpus) -> np.ndarray:
    """Pools no other pool of the same GPU type beats in every bin.

    As :func:`capnb.capacity.mix` leaves them out: ``k`` instances of the other hold the same
    GPUs and serve at least as much, in every bin.
    """
    keep = np.ones(q.shape[1], bool)
    filled = np.nan_to_num(q, nan=0.0)
    for i in range(q.shape[1]):
        for j in range(q.shape[1]):
            if j == i or gpus[j] != gpus[i] or tp[i] % tp[j] or not keep[j]:
                continue
            more = (tp[i] // tp[j]) * filled[:, j]
            if (more >= filled[:, i]).all() and ((more > filled[:, i]).any() or j < i):
                keep[i] = False
                break
    return keep


def _bin_demand(demand_qps, shares, bins) -> np.ndarray:
    """Requests/s per (bin, slot)."""
    if not isinstance(demand_qps, xr.DataArray) or demand_qps.dims != ("slot",):
        raise InputError("demand_qps must be a DataArray over slot (requests/s)")
    total = checked_demand(demand_qps)
    if not isinstance(shares, xr.DataArray):  # a list or array: one share a bin, in bin order
        try:
            values = np.asarray(shares, dtype=float)
        except (TypeError, ValueError):
            values = None
        if values is None or values.ndim != 1:
            raise InputError(
                f"shares must be {bins} shares over size_bin (a DataArray, or a list in the "
                f"options' bin order), got {shares!r}"
            )
        shares = xr.DataArray(values, dims="size_bin")
    share = shares.transpose(*[d for d in ("size_bin", "slot") if d in shares.dims])
    values = np.asarray(share.values, dtype=float)
    if share.sizes["size_bin"] != bins or not np.isfinite(values).all() or (values < 0).any():
        raise InputError(f"shares must be {bins} finite shares >= 0 over size_bin")
    if not np.allclose(values.sum(axis=0), 1.0, atol=1e-9):
        raise InputError(f"shares must sum to 1 over size_bin, got {values.sum(axis=0)}")
    return (values if values.ndim == 2 else values[:, None]) * total[None, :]


def _by_label(shares, options: xr.Dataset):
    """Shares labelled by ``size_bin``, put in the options' bin order (never read by position)."""
    if not (
        isinstance(shares, xr.DataArray)
        and "size_bin" in shares.coords
        and "size_bin" in options.coords
    ):
        return shares
    have = [str(b) for b in shares.size_bin.values]
    want = [str(b) for b in options.size_bin.values]
    if sorted(have) != sorted(want):
        raise InputError(
            f"shares are labelled by size_bin {sorted(set(have) - set(want))} that the options "
            f"lack, or lack {sorted(set(want) - set(have))}; the options' bins are {want}"
        )
    return shares.sel(size_bin=options.size_bin.values)


def _by_slot(shares, demand_qps):
    """Shares over ``slot`` put in the demand's slot order by their labels (never by position)."""
    if not (
        isinstance(shares, xr.DataArray)
        and "slot" in shares.dims
        and "slot" in shares.coords
        and "slot" in demand_qps.coords
    ):
        return shares
    have, want = shares.slot.values.tolist(), demand_qps.slot.values.tolist()
    if sorted(have) != sorted(want):
        raise InputError(
            f"shares are over slots {have}, but demand_qps over {want}: label the shares with "
            "the demand's slots"
        )
    return shares.sel(slot=demand_qps.slot.values)


def _solve_sizes(demand, *, q, g, gpus, price, keep, limits, gap, slices, held=None,
                 whole_counts=True):  # fmt: skip
    """One program over the given slots; returns ``(R, O, V, served, result)``.

    ``whole_counts=False`` lets the on-demand and spot counts be fractional (the reserved base
    stays whole): the day's program that only chooses the base, and a lower bound on the cost.
    """
    from scipy.optimize import LinearConstraint
    from scipy.sparse import coo_matrix

    n_bin, n_pool = q.shape
    n_slot = demand.shape[1]
    per = 1 if slices is None else slices
    n_int = n_pool * (1 + 2 * n_slot)
    o_at = lambda p, s: n_pool + p * n_slot + s  # noqa: E731
    v_at = lambda p, s: n_pool + n_pool * n_slot + p * n_slot + s  # noqa: E731
    y_at = lambda b, k, p, s: n_int + ((b * per + k) * n_pool + p) * n_slot + s  # noqa: E731
    n = n_int + n_bin * per * n_pool * n_slot
    cost, lower, upper = np.zeros(n), np.zeros(n), np.zeros(n)
    fits = ~np.isnan(q)
    load_alone = np.where(
        fits[:, :, None], demand[:, None, :] / np.where(fits, q, 1)[:, :, None], 0
    )
    need = np.ceil(load_alone.sum(0) - 1e-9)  # (pool, slot): the pool alone, bins it can serve
    for p in range(n_pool):
        for kind, index, bound in (
            ("reserved", [p], [need[p].max()]),
            ("on_demand", [o_at(p, s) for s in range(n_slot)], need[p]),
            ("spot", [v_at(p, s) for s in range(n_slot)], np.ceil(need[p] / max(keep, 1e-9))),
        ):
            if not np.isnan(price[kind][p]):
                upper[index] = bound
                cost[index] = g[p] * price[kind][p] * (n_slot if kind == "reserved" else 1)
    if held is not None:
        lower[:n_pool] = upper[:n_pool] = held
    rows, cols, vals, lo_b, hi_b = [], [], [], [], []

    def add(entries, low, high):
        r = len(lo_b)
        for c, v in entries:
            rows.append(r), cols.append(c), vals.append(v)
        lo_b.append(low), hi_b.append(high)

    for b in range(n_bin):
        for k in range(per):
            for s in range(n_slot):
                part = demand[b, s] / per
                entries = [(y_at(b, k, p, s), 1.0) for p in range(n_pool) if fits[b, p]]
                for p in range(n_pool):
                    if fits[b, p]:
                        upper[y_at(b, k, p, s)] = 1.0 if slices else part
                add(entries, 1.0 if slices else part, 1.0 if slices else part)
    for p in range(n_pool):
        for s in range(n_slot):
            entries = [(p, -1.0), (o_at(p, s), -1.0), (v_at(p, s), -keep)]
            for b in range(n_bin):
                if fits[b, p]:
                    weight = (demand[b, s] / per if slices else 1.0) / q[b, p]
                    entries += [(y_at(b, k, p, s), weight) for k in range(per)]
            add(entries, -np.inf, 0.0)
    for gpu, cap in limits.items():
        for s in range(n_slot):
            add([(i, g[p]) for p in range(n_pool) if gpus[p] == gpu
                 for i in (p, o_at(p, s), v_at(p, s))], -np.inf, cap)  # fmt: skip
    integrality = np.r_[np.ones(n_pool), np.full(n_int - n_pool, 1 if whole_counts else 0),
                        np.full(n - n_int, 1 if slices else 0)]  # fmt: skip
    matrix = coo_matrix((vals, (rows, cols)), shape=(len(lo_b), n)).tocsr()
    result = quiet_milp(cost, constraints=LinearConstraint(matrix, lo_b, hi_b), integrality=integrality,
                  bounds=(lower, upper), options={"mip_rel_gap": gap})  # fmt: skip
    if result.status == 2 or result.x is None:
        raise InfeasibleError(
            f"infeasible: no whole-instance fleet within the limits ({result.message})"
        )
    x = result.x
    counts = np.round(x[:n_int]).astype(np.int64)  # the day's program reads only R (whole)
    y = x[n_int:].reshape(n_bin, per, n_pool, n_slot)
    served = (np.round(y) * (demand[:, None, None, :] / per) if slices else y).sum(1)
    return (counts[:n_pool], counts[n_pool : n_pool + n_pool * n_slot].reshape(n_pool, n_slot),
            counts[n_pool + n_pool * n_slot :].reshape(n_pool, n_slot), served, result)  # fmt: skip


def _single_by_size(demand, q, g, gpus, on_demand, limits) -> np.ndarray:
    """Mean USD per slot-hour of each pool alone on demand, serving every bin.

    NaN where it cannot: a bin it does not serve, or more GPUs in a slot than its type's limit
    (as :func:`capnb.capacity.mix` prices its single types).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        load = np.where(demand[:, None, :] > 0, demand[:, None, :] / q[:, :, None], 0.0)
    count = np.ceil(load.sum(0) - 1e-9)
    cost = (count * g[:, None] * on_demand[:, None]).mean(1)
    for p, gpu in enumerate(gpus):
        if gpu in limits and (count[p] * g[p] > limits[gpu]).any():
            cost[p] = np.nan
    return cost


def mix_by_size(
    options, demand_qps, *, prices, shares=None, reserved: str | None = "reserved",
    spot_preemption: float | None = None, limits=None, mip_gap: float = 0.0,
    slices: int | None = None, exact_base: bool = False,
) -> xr.Dataset:  # fmt: skip
    """The cheapest fleet per slot that sends each size bin to the pools where it is cheapest.

    Parameters
    ----------
    options
        :func:`size_options`' answer: ``per_instance_qps`` over (``size_bin``, ``gpu``,
        ``tensor_parallel``) (or over ``size_bin`` and ``pool`` with ``gpu`` and
        ``tensor_parallel`` coordinates), NaN where a pool does not meet the SLA for that bin.
    demand_qps
        Requests/s per slot (a DataArray over ``slot``).
    prices
        :func:`capnb.data.gpu_prices` of one provider.
    shares
        Each bin's share of the requests: over ``size_bin`` (or ``size_bin`` x ``slot``), summing
        to 1, read by the ``size_bin`` and ``slot`` labels where it has them (slots: the
        demand's); a list is in the options' bin order. Default ``options.request_share``.
    reserved, spot_preemption, limits
        As in :func:`capnb.capacity.mix`.
    mip_gap
        Relative gap at which the day's program that chooses the reserved base may stop.
    exact_base
        False (the default): the day's program counts the instances above the base fractionally
        (with whole counts it took minutes on the defaults' 13 bins x 24 slots); each slot is then
        solved exactly with the base fixed, and ``optimality_gap`` is the final cost over that
        program's lower bound, minus 1 (0.7 % on the defaults). Where the fleet costs over 10 %
        above that bound (a few instances a slot, whose whole counts the fractional program
        misses), other bases are tried too, and the cheapest kept: the instances every slot's own
        fleet holds, and each pool's fewest instances alone in any slot. True: whole counts, the
        optimum proven within ``mip_gap``.
    slices
        None: a bin's rate splits freely across pools. ``k``: each bin in ``k`` equal slices, each
        slice whole on one pool (Mélange's formulation; ``1`` sends every bin whole).

    Returns
    -------
    xarray.Dataset
        ``reserved_instances`` (pool), ``on_demand_instances``, ``spot_instances``,
        ``instances`` (pool, slot), ``served_qps`` (size_bin, pool, slot: each bin's requests/s
        on each pool), ``usd_per_hour`` (slot), ``single_type_usd_per_hour`` (pool: the pool
        alone on demand, every bin on it; NaN where a limit forbids it). Attrs:
        ``mix_usd_per_hour``, ``single_type_pool``, ``single_type_usd_per_hour``, ``saving``
        (against the cheapest pool alone), ``optimality_gap``; where they apply, as
        :func:`capnb.capacity.mix` gives them, ``not_priced`` (GPUs meeting the SLA for some bin
        with no price of the kinds asked: not in the program), ``reserved_unpriced`` and
        ``spot_unpriced``; ``few_requests`` and ``beyond_context`` as the options carry them
        (:func:`size_options`).

    Examples
    --------
    Mélange's own example (its README: 3 A10G and 1 A100 at 6.70 USD/hour, every bin whole):

    >>> options = xr.Dataset({"per_instance_qps": (("size_bin", "pool"),
    ...     [[2, 20], [1, 20], [5, 40], [2, 20]])},
    ...     coords={"pool": ["A10G", "A100"], "gpu": ("pool", ["A10G", "A100-80GB"]),
    ...             "tensor_parallel": ("pool", [1, 1])})
    >>> prices = xr.Dataset({"usd_per_gpu_hour": (("gpu", "pricing"), [[1.01], [3.67]])},
    ...                     coords={"gpu": ["A10G", "A100-80GB"], "pricing": ["on_demand"]})
    >>> demand = xr.DataArray([30.0], dims="slot", coords={"slot": [0]})
    >>> shares = xr.DataArray([0.2, 0.1, 0.5, 0.2], dims="size_bin")
    >>> whole = mix_by_size(options, demand, prices=prices, shares=shares, reserved=None, slices=1)
    >>> whole.instances.values.ravel().tolist(), round(whole.attrs["mix_usd_per_hour"], 2)
    ([3, 1], 6.7)
    >>> split = mix_by_size(options, demand, prices=prices, shares=shares, reserved=None)
    >>> split.instances.values.ravel().tolist(), round(split.attrs["mix_usd_per_hour"], 2)
    ([1, 1], 4.68)
    """
    q, gpus, g, labels = _pool_table(options)
    if shares is None:
        if "request_share" not in options:
            raise InputError("shares: give each size bin's share of requests (or size_options')")
        shares = options.request_share
    shares = _by_slot(_by_label(shares, options), demand_qps)
    demand = _bin_demand(demand_qps, shares, q.shape[0])
    unserved = (demand.sum(axis=1) > 0) & np.isnan(q).all(axis=1)
    if unserved.any():  # said here, by name, not as a program without a solution
        names = [str(n) for n in options.size_bin.values[unserved]]
        share = demand[unserved].sum() / demand.sum()
        raise InfeasibleError(
            f"infeasible: no pool meets the SLA for size bin(s) {', '.join(names)} "
            f"({words.percent(share)} of "
            "the requests): give those requests a looser SLA, add a larger GPU or degree, or serve "
            "them apart from the mix"
        )
    if not isinstance(prices, xr.Dataset) or "usd_per_gpu_hour" not in prices:
        raise InputError("prices must be a Dataset over (gpu, pricing): capnb.data.gpu_prices(...)")
    if spot_preemption is not None:
        checked_share(spot_preemption, "spot_preemption")
    if slices is not None and (
        isinstance(slices, bool) or not isinstance(slices, int) or slices < 1
    ):
        raise InputError(f"slices must be a whole number >= 1 or None, got {slices!r}")
    checked_share(mip_gap, "mip_gap")
    limits = checked_limits(limits, gpus)
    price = {
        "reserved": _prices(prices, gpus, reserved),
        "on_demand": _prices(prices, gpus, "on_demand"),
        "spot": _prices(prices, gpus, "spot" if spot_preemption is not None else None),
    }
    _check_priced(price, q, gpus, demand, options.size_bin.values)
    keep = 1.0 - float(spot_preemption or 0.0)
    problem = dict(q=q, g=g, gpus=gpus, price=price, keep=keep, limits=limits, slices=slices)
    _check_within(demand, problem, options.size_bin.values, demand_qps.slot.values)
    if np.isfinite(price["reserved"]).any():
        # the base over the day, with fractional counts above it (whole ones made this program
        # take minutes): its optimum bounds the cost from below, and the gap to the final fleet
        # is reported
        held, _, _, _, joint = _solve_sizes(demand, **problem, gap=mip_gap,
                                            whole_counts=bool(exact_base))  # fmt: skip
        bound = float(joint.mip_dual_bound)
    else:
        held, bound = np.zeros(q.shape[1], np.int64), None
    held, on_demand, spot, served, slot_cost = _slots_above(demand, held, problem)
    if bound is not None and not exact_base and slot_cost.sum() - bound > _RETRY_GAP * bound:
        # fractional counts above the base undercount what a slot of whole instances costs: a
        # service of one instance a slot got no base (one on demand every slot, 3.2 USD/h where
        # one reserved is 2.72). Far above the bound, other bases are tried: the instances every
        # slot's own fleet holds, and each pool's fewest instances alone in any slot
        alone = (
            on_demand if not held.any() else _slots_above(demand, np.zeros_like(held), problem)[1]
        )
        tried = [alone.min(axis=1)]
        for p, fewest in enumerate(_alone_fewest(demand, problem)):
            tried.append(np.where(np.arange(held.size) == p, fewest, 0).astype(np.int64))
        for base in tried:
            if (base == held).all() or not base.any():
                continue
            other = _slots_above(demand, base, problem)
            if other[4].sum() < slot_cost.sum() - 1e-9:
                held, on_demand, spot, served, slot_cost = other
    day = float(slot_cost.sum())
    bound = day if bound is None else min(bound, day)
    single = _single_by_size(demand, q, g, gpus, price["on_demand"], limits)
    result = _result(options, demand_qps, labels, gpus, g, held, on_demand, spot, served,
                     slot_cost, single, day, bound, reserved, spot_preemption, slices)  # fmt: skip
    # as capacity.mix says them: GPUs that meet the SLA for some bin but have no price asked for
    qps = options.per_instance_qps
    by_pool = qps if "pool" in qps.dims else qps.stack(pool=["gpu", "tensor_parallel"])
    left_out = _not_priced(by_pool.max("size_bin"), prices, reserved, spot_preemption)
    few = {k: options.attrs[k] for k in ("few_requests", "beyond_context") if k in options.attrs}
    return result.assign_attrs(unpriced(price, gpus, reserved, spot_preemption) | left_out | few)


def _check_priced(price: dict, q: np.ndarray, gpus: list[str], demand, names) -> None:
    """Every bin with requests has a pool that meets its SLA and can be bought, or the error says.

    No price at all is :class:`NotPricedError` naming the GPUs (as :func:`capnb.capacity.mix`);
    a bin served only by unpriced pools is infeasible, named with those GPUs.
    """
    buyable = np.zeros(len(gpus), bool)
    for kind in ("reserved", "on_demand", "spot"):
        buyable |= np.isfinite(price[kind])
    if not buyable.any():
        raise NotPricedError(gpus)
    serves = ~np.isnan(q)
    stuck = (demand.sum(axis=1) > 0) & ~(serves & buyable).any(axis=1)
    if stuck.any():
        unpriced = sorted({gpus[p] for p in np.flatnonzero(serves[stuck].any(axis=0))})
        share = demand[stuck].sum() / demand.sum()
        raise InfeasibleError(
            f"infeasible: size bin(s) {', '.join(str(n) for n in names[stuck])} ({share:.1%} of "
            f"the requests) meet the SLA only on {', '.join(unpriced)}, for which prices has no "
            "price: price them, or give those requests a looser SLA or a larger GPU"
        )


def _check_within(demand, problem: dict, names, slots) -> None:
    """Name what no fleet within the limits serves, as :func:`capnb.capacity.mix` names it.

    A bin whose every pool the limits shut (fewer GPUs than one instance holds), then the first
    slot whose demand no fleet within the limits serves even in fractional instances (a linear
    program); a fleet that only whole instances rule out is left to the solver's own word.
    """
    from scipy.optimize import linprog

    q, g, gpus, price, keep, limits = (problem[k] for k in ("q", "g", "gpus", "price", "keep",
                                                             "limits"))  # fmt: skip
    if not limits:
        return
    kept = np.isfinite(price["reserved"]) | np.isfinite(price["on_demand"])
    buyable = kept | np.isfinite(price["spot"])
    held = np.array([limits.get(gpu, math.inf) >= size for gpu, size in zip(gpus, g, strict=True)])
    serves = ~np.isnan(q) & buyable
    stuck = (demand.sum(axis=1) > 0) & ~(serves & held).any(axis=1)
    if stuck.any():
        shut = sorted({gpus[p] for p in np.flatnonzero(serves[stuck].any(axis=0))})
        raise InfeasibleError(
            f"infeasible: size bin(s) {', '.join(str(n) for n in names[stuck])} "
            f"({words.percent(demand[stuck].sum() / demand.sum())} of the requests) meet the SLA "
            f"only on {', '.join(shut)}, which limits hold at "
            f"{', '.join(f'{limits[x]} GPUs' for x in shut)} (fewer than one instance needs): "
            "raise those limits, or give those requests a looser SLA"
        )
    pairs = [(b, p) for b in range(q.shape[0]) for p in range(q.shape[1]) if serves[b, p]]
    rate = np.where(kept, 1.0, keep)  # a spot-only pool serves its surviving share
    # the same constraints every slot: each bin's rate served, each GPU's limit held
    ask = np.array([[1.0 * (b == c) for c, _ in pairs] for b in range(q.shape[0])])
    use = np.array([[g[p] / (q[b, p] * rate[p]) * (gpus[p] == gpu) for b, p in pairs]
                    for gpu in limits])  # fmt: skip
    for s in range(demand.shape[1]):
        solved = linprog(np.zeros(len(pairs)), A_ub=use, b_ub=list(limits.values()), A_eq=ask,
                         b_eq=demand[:, s], bounds=(0, None), method="highs")  # fmt: skip
        if solved.status == 2:
            raise InfeasibleError(
                f"infeasible: slot {slots[s]} needs {demand[:, s].sum():,.1f} requests/s; no "
                "fleet within the limits "
                f"({', '.join(f'{k}: {v} GPUs' for k, v in limits.items())}) serves it"
            )


#: How far above the base program's bound (a share of it) a fleet is for other bases to be tried.
_RETRY_GAP = 0.1


def _alone_fewest(demand, problem) -> np.ndarray:
    """Per pool: the fewest instances it needs alone in any slot (0 where it serves not every bin)."""
    q = problem["q"]
    fits = ~np.isnan(q)
    load = (demand[:, None, :] / np.where(fits, q, np.inf)[:, :, None]).sum(0)  # (pool, slot)
    fewest = np.ceil(load.min(axis=1) - 1e-9)
    reserved = np.isfinite(problem["price"]["reserved"])
    return np.where(fits.all(axis=0) & reserved, fewest, 0).astype(np.int64)


def _slots_above(demand, held, problem):
    """Each slot's cheapest fleet above the reserved base ``held``: (held, O, V, served, cost)."""
    q, g, price = problem["q"], problem["g"], problem["price"]
    n_slot = demand.shape[1]
    on_demand = np.zeros((q.shape[1], n_slot), np.int64)
    spot, served = np.zeros_like(on_demand), np.zeros((q.shape[0], q.shape[1], n_slot))
    for s in range(n_slot):
        _, o, v, y, _ = _solve_sizes(demand[:, s : s + 1], **problem, gap=0.0, held=held)
        on_demand[:, s], spot[:, s], served[:, :, s] = o[:, 0], v[:, 0], y[:, :, 0]
    slot_cost = (
        (g * np.nan_to_num(price["reserved"]) * held).sum()
        + (g[:, None] * np.nan_to_num(price["on_demand"])[:, None] * on_demand).sum(0)
        + (g[:, None] * np.nan_to_num(price["spot"])[:, None] * spot).sum(0)
    )
    return held, on_demand, spot, served, slot_cost


def _result(options, demand_qps, labels, gpus, g, held, on_demand, spot, served, slot_cost,
            single, day, bound, reserved, spot_preemption, slices) -> xr.Dataset:  # fmt: skip
    best = int(np.nanargmin(single)) if np.isfinite(single).any() else None
    mean_cost = float(slot_cost.mean())
    both, three = ("pool", "slot"), ("size_bin", "pool", "slot")
    return xr.Dataset(
        {
            "reserved_instances": ("pool", held, glossary.attrs("reserved_instances")),
            "on_demand_instances": (both, on_demand, glossary.attrs("on_demand_instances")),
            "spot_instances": (both, spot, glossary.attrs("spot_instances")),
            "instances": (both, held[:, None] + on_demand + spot, glossary.attrs("instances")),
            "served_qps": (three, served, glossary.attrs("served_qps")),
            "usd_per_hour": ("slot", slot_cost, glossary.attrs("usd_per_hour")),
            "single_type_usd_per_hour": ("pool", single, glossary.attrs(
                "usd_per_hour", long_name="mean cost of that pool alone on demand, every bin")),
        },
        coords={
            "size_bin": ("size_bin", options.size_bin.values, glossary.attrs("size_bin")),
            "pool": ("pool", labels, glossary.attrs("pool")),
            "gpu": ("pool", gpus, glossary.attrs("gpu")),
            "tensor_parallel": ("pool", g.astype(np.int64), glossary.attrs("tensor_parallel")),
            # the demand's slot, its kind kept, under the glossary's units and long_name
            "slot": ("slot", demand_qps.slot.values,
                     {**demand_qps.slot.attrs, **glossary.attrs("slot")}),
        },
        attrs={
            "mix_usd_per_hour": mean_cost,
            "single_type_pool": "" if best is None else labels[best],
            "single_type_usd_per_hour": np.nan if best is None else float(single[best]),
            "saving": np.nan if best is None else saving(mean_cost, float(single[best])),
            "reserved_pricing": reserved or "none",
            "spot_preemption": np.nan if spot_preemption is None else float(spot_preemption),
            "slices": "free split" if slices is None else int(slices),
            "optimality_gap": float((day - bound) / day) if day > 0 else 0.0,
            "solver": "scipy.optimize.milp (HiGHS): the base within mip_gap, each slot exact",
        },
    )  # fmt: skip


# -- the fleets side by side ----------------------------------------------------------------------
def _only(options: xr.Dataset, pool: str) -> xr.Dataset:
    gpu, tp = pool.rsplit(" TP", 1)
    return options.sel(gpu=[gpu], tensor_parallel=[int(tp)])


def _held(fleet: xr.Dataset) -> str:
    used = fleet.instances.sum("slot").values
    names = fleet.pool.values
    return ", ".join(str(p) for p, n in zip(names, used, strict=True) if n) or "none"


def _one_type_reserved(solve, options, limits: dict) -> tuple[float, str]:
    """The cheapest pool alone with a reserved base: (mean USD/hour, pool); (NaN, "") for none.

    Every pool that serves the whole workload (every bin) is tried, not only the cheapest on
    demand: a type whose reservation is deeper can be the cheaper one reserved.
    """
    qps = options.per_instance_qps
    best = (math.nan, "")
    for gpu in qps.gpu.values:
        for tp in qps.tensor_parallel.values:
            rate = qps.sel(gpu=gpu, tensor_parallel=tp).values
            if not (np.isfinite(rate) & (rate > 0)).all():  # a bin it does not serve
                continue
            pool = f"{gpu} TP{int(tp)}"
            mine = {g: cap for g, cap in limits.items() if g == gpu}  # other types: no pool
            try:
                cost = solve(_only(options, pool), limits=mine).attrs["mix_usd_per_hour"]
            except (InfeasibleError, NotPricedError):  # the limits forbid it, or no price
                continue
            if not cost >= best[0]:  # NaN (none yet) or dearer
                best = (cost, pool)
    return best


def compare_fleets(
    whole: xr.Dataset, by_size: xr.Dataset, demand_qps, *, prices, reserved: str = "reserved",
    mip_gap: float = 1e-3, spot_preemption: float | None = None, limits=None,
) -> xr.Dataset:  # fmt: skip
    """Seven fleets for one demand: what mixing by size adds to a reserved base.

    ``whole``: per-instance requests/s over (``gpu``, ``tensor_parallel``) from one latency curve
    per GPU for the whole workload (the capacity step's); ``by_size``: :func:`size_options`'s.
    Rows (``fleet``): the cheapest single type on demand, the cheapest single type with a
    reserved base (every type that serves every bin tried: a deeper reservation can win), the
    mix of types (:func:`capnb.capacity.mix`), then the same three from the per-bin curves
    (the single type serving every bin) and the mix by size on demand. ``usd_per_hour`` is the
    mean over the slots; ``saving`` is against the first row of the same curves (one type on
    demand). ``limits`` hold for every row; ``spot_preemption`` (spot above the base, as in
    :func:`capnb.capacity.mix`) for the rows with a reserved base, so the types mixed with a
    reserved base are the fleet :func:`capnb.capacity.mix` buys at the same settings. Attrs
    ``reserved_unpriced``, ``spot_unpriced`` and ``not_priced`` say, as the mixes do, what no
    price let a row buy (at a provider with no reserved price, the "reserved base" rows are on
    demand); ``few_requests`` and ``beyond_context``, as ``by_size`` carries them, the bins too
    small for their quantile and the bins with requests longer than the model's context.
    """
    from ._mix import mix

    if not isinstance(reserved, str):  # the rows named "reserved base" need a base to price
        raise InputError(
            f"reserved must name the pricing kind of the reserved base (e.g. 'reserved', as in "
            f"prices.pricing), got {reserved!r}: four of the rows are fleets with a reserved base"
        )
    limits = dict(limits or {})
    rows = []
    one = mix(whole, demand_qps, prices=prices, reserved=None, mip_gap=mip_gap, limits=limits)
    best = one.attrs["single_type_pool"]
    kept = dict(prices=prices, reserved=reserved, spot_preemption=spot_preemption)
    only, only_pool = _one_type_reserved(lambda o, limits: mix(o, demand_qps, **kept,
                                                               mip_gap=mip_gap, limits=limits),
                                         whole, limits)  # fmt: skip
    types = mix(whole, demand_qps, **kept, mip_gap=mip_gap, limits=limits)
    base = one.attrs["single_type_usd_per_hour"]
    rows += [("whole workload", "one type, on demand", base, best or "none within the limits"),
             ("whole workload", "one type, reserved base", only,
              only_pool or "none within the limits"),
             ("whole workload", "types mixed, reserved base", types.attrs["mix_usd_per_hour"],
              _held(types))]  # fmt: skip
    size_od = mix_by_size(by_size, demand_qps, prices=prices, reserved=None, limits=limits)
    best = size_od.attrs["single_type_pool"]
    size_only, size_only_pool = _one_type_reserved(
        lambda o, limits: mix_by_size(o, demand_qps, **kept, limits=limits),
        by_size, limits,
    )  # fmt: skip
    size_res = mix_by_size(by_size, demand_qps, **kept, mip_gap=mip_gap, limits=limits)
    rows += [("by size", "one type, on demand", size_od.attrs["single_type_usd_per_hour"],
              best or "none within the limits"),
             ("by size", "one type, reserved base", size_only,
              size_only_pool or "none within the limits"),
             ("by size", "types mixed by size, on demand", size_od.attrs["mix_usd_per_hour"],
              _held(size_od)),
             ("by size", "types mixed by size, reserved base", size_res.attrs["mix_usd_per_hour"],
              _held(size_res))]  # fmt: skip
    curves, names, cost, pools = (list(x) for x in zip(*rows, strict=True))
    first = {c: cost[curves.index(c)] for c in set(curves)}
    savings = [saving(v, first[c]) for c, v in zip(curves, cost, strict=True)]
    return xr.Dataset(
        {
            "usd_per_hour": ("fleet", cost, glossary.attrs("usd_per_hour")),
            "saving": ("fleet", savings, glossary.attrs("saving")),
            "curves": ("fleet", curves, glossary.attrs("curves")),
            "pools": ("fleet", pools, glossary.attrs("pools")),
        },
        coords={
            "fleet": (
                "fleet",
                [f"{c}: {n}" for c, n in zip(curves, names, strict=True)],
                glossary.attrs("fleet"),
            )
        },
        attrs={
            "reserved_pricing": reserved,
            "spot_preemption": np.nan if spot_preemption is None else float(spot_preemption),
            "limits": types.attrs["limits"],
            "provider": prices.attrs.get("provider", ""),
            "optimality_gap": max(types.attrs["optimality_gap"], size_res.attrs["optimality_gap"]),
        }
        | _left_out(types, size_res)
        | {k: by_size.attrs[k] for k in ("few_requests", "beyond_context") if k in by_size.attrs},
    )


def _left_out(*fleets: xr.Dataset) -> dict:
    """What the fleets' own attrs say was not bought (``capnb.capacity.mix``'s words), merged.

    A GPU with no price at all is named once, in ``not_priced``, as :func:`capnb.capacity.mix`
    names it.
    """
    said, unlisted = {}, set()
    for key in ("not_priced", "reserved_unpriced", "spot_unpriced"):
        names = [n for f in fleets for n in f.attrs.get(key, "").split(", ") if n]
        names = [n for n in dict.fromkeys(names) if n not in unlisted]
        if names:
            said[key] = ", ".join(names)
        if key == "not_priced":
            unlisted = set(names)
    return said

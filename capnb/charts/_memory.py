"""Memory charts: fixed vs dynamic memory per GPU, and the largest fitting concurrency."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import xarray as xr

from ..errors import InputError
from ._draft import draft
from ._titles import titled

__all__ = ["memory_breakdown", "memory_heatmap"]

GIB = 2**30
_COMPONENT_COLORS = {"weights": "#4c78a8", "KV cache": "#f58518", "headroom": "#bab0ac"}
# each value's title, on its axis and in the tooltips, with its unit
_CONCURRENCY = "concurrency (sequences in flight)"
_MEMORY = "memory per GPU (GiB)"
_MAX_CONCURRENCY = titled("max concurrency", "max_concurrency")
_SEQ_LEN = titled("tokens per sequence", "seq_len")
_TP = titled("tensor-parallel degree", "tensor_parallel")


# Encodings name their field and type explicitly: parsing shorthand strings ("GiB:Q") runs altair's
# schema validation per channel, which tripled the time a worksheet took to redraw after a change.


def _one(ds: xr.Dataset, dims: tuple[str, ...], selection: dict[str, object]) -> xr.Dataset:
    cell = ds.sel({k: v for k, v in selection.items() if v is not None})
    for dim in dims:
        if dim in cell.dims:
            if cell.sizes[dim] != 1:
                raise InputError(f"chart: choose one {dim} (the data has {cell.sizes[dim]})")
            cell = cell.squeeze(dim)
    return cell


def memory_breakdown(
    ds: xr.Dataset,
    *,
    model: str | None = None,
    gpu: str | None = None,
    tensor_parallel: int | None = None,
    seq_len: int | None = None,
) -> alt.Chart:
    """Stacked bars of weights / KV cache / headroom per GPU against the GPU's usable memory.

    One bar per ``concurrency`` of a :func:`capnb.memory.sweep` result, for one (model, gpu,
    tensor_parallel, seq_len); bars that do not fit are faded. Dims of length 1 need not be named.
    """
    cell = _one(
        ds,
        ("model", "gpu", "tensor_parallel", "seq_len"),
        {"model": model, "gpu": gpu, "tensor_parallel": tensor_parallel, "seq_len": seq_len},
    )
    concurrency = cell.concurrency.values
    parts = {
        "weights": np.broadcast_to(cell.weights_bytes.values, concurrency.shape),
        "KV cache": cell.kv_cache_bytes.values,
        "headroom": cell.headroom_bytes.values,
    }
    table = pd.concat(
        [
            pd.DataFrame(
                {
                    "concurrency": concurrency,
                    "component": name,
                    "order": i,
                    "GiB": values / GIB,
                    "fits": cell.fits.values,
                }
            )
            for i, (name, values) in enumerate(parts.items())
        ],
        ignore_index=True,
    )
    usable = float(cell.usable_bytes) / GIB
    title = (
        f"{cell.model.item()} on {int(cell.tensor_parallel)} x {cell.gpu.item()}, "
        f"{int(cell.seq_len):,} tokens per sequence: memory per GPU"
    )
    limit = pd.DataFrame({"GiB": [usable], "label": [f"usable {usable:,.1f} GiB"]})
    return draft(_breakdown_chart, tables={"table": table, "limit": limit}, values={"title": title})


def _breakdown_chart(table: pd.DataFrame, limit: pd.DataFrame, *, title: str) -> alt.LayerChart:
    """The breakdown's chart from its tables (see :mod:`capnb.charts._draft`)."""
    bars = (
        alt.Chart(table)
        .mark_bar()
        .encode(
            x=alt.X(field="concurrency", type="ordinal", title=_CONCURRENCY),
            y=alt.Y(
                field="GiB",
                type="quantitative",
                aggregate="sum",
                stack="zero",
                title=_MEMORY,
            ),
            color=alt.Color(
                field="component",
                type="nominal",
                sort=list(_COMPONENT_COLORS),
                scale=alt.Scale(
                    domain=list(_COMPONENT_COLORS), range=list(_COMPONENT_COLORS.values())
                ),
                legend=alt.Legend(title=None, orient="top"),
            ),
            order=alt.Order(field="order", type="quantitative"),
            opacity=alt.condition("datum.fits", alt.value(1.0), alt.value(0.35)),
            tooltip=[
                alt.Tooltip(field="concurrency", type="ordinal", title=_CONCURRENCY),
                alt.Tooltip(field="component", type="nominal", title="component"),
                alt.Tooltip(field="GiB", type="quantitative", format=",.2f", title=_MEMORY),
                alt.Tooltip(field="fits", type="nominal", title="fits in memory"),
            ],
        )
    )
    limit_y = alt.Y(field="GiB", type="quantitative")
    rule = alt.Chart(limit).mark_rule(color="#e45756", strokeDash=[6, 3], size=2).encode(y=limit_y)
    text = (
        alt.Chart(limit)
        .mark_text(align="left", dx=4, dy=-6, color="#e45756")
        .encode(y=limit_y, x=alt.value(0), text=alt.Text(field="label", type="nominal"))
    )
    return (bars + rule + text).properties(title=title, width=520, height=300)


def memory_heatmap(
    ds: xr.Dataset, *, model: str | None = None, tensor_parallel: int | None = None
) -> alt.Chart:
    """Heatmap of the largest fitting concurrency over seq_len x gpu, for one model.

    Takes a :func:`capnb.memory.max_concurrency` (or ``sweep``) result. When the result holds
    several ``tensor_parallel`` values, a dropdown (a vega-lite param, so it works in a static HTML
    report too) picks one, starting at ``tensor_parallel`` (default: the first). Cells where nothing
    fits show the reason.
    """
    cell = _one(ds, ("model",), {"model": model})
    largest = cell.max_concurrency.transpose("gpu", "tensor_parallel", "seq_len")
    table = largest.to_dataframe(name="max_concurrency").reset_index()[
        ["gpu", "tensor_parallel", "seq_len", "max_concurrency"]
    ]
    reason = cell.limit_reason.transpose("gpu", "tensor_parallel", "seq_len").values.ravel()
    short = {
        "kv_cache": "",
        "weights": "weights",
        "one_sequence": "1 seq",
        "tensor_parallel_invalid": "n/a",
    }
    table["label"] = np.where(
        table.max_concurrency > 0,
        table.max_concurrency.map("{:,}".format),
        [short[r] for r in reason],
    )
    table["shown"] = table.max_concurrency.where(table.max_concurrency > 0)
    tps = [int(t) for t in cell.tensor_parallel.values]
    if tensor_parallel is not None and tensor_parallel not in tps:
        raise InputError(f"chart: tensor_parallel={tensor_parallel} is not in the data ({tps})")
    title = f"{cell.model.item()}: largest concurrency that fits in memory"
    return draft(
        _heatmap_chart,
        tables={"table": table},
        values={
            "title": title,
            "tensor_parallel": tps[0] if tensor_parallel is None else int(tensor_parallel),
        },
        shape={"tps": tps, "gpus": [str(g) for g in cell.gpu.values]},
    )


def _heatmap_chart(
    table: pd.DataFrame, *, title: str, tensor_parallel: int, tps: list[int], gpus: list[str]
) -> alt.LayerChart:
    """The heatmap's chart from its table (see :mod:`capnb.charts._draft`)."""
    tp_param = alt.param(
        name="tensor_parallel",
        value=tensor_parallel,
        bind=alt.binding_select(options=tps, name=f"{_TP} ") if len(tps) > 1 else None,
    )
    base = (
        alt.Chart(table)
        .transform_filter(alt.datum.tensor_parallel == tp_param)
        .encode(
            x=alt.X(field="seq_len", type="ordinal", title=_SEQ_LEN),
            y=alt.Y(field="gpu", type="nominal", title=None, sort=gpus),
        )
    )
    rects = base.mark_rect().encode(
        color=alt.Color(
            field="shown",
            type="quantitative",
            title=_MAX_CONCURRENCY,
            scale=alt.Scale(type="log", scheme="viridis"),
        ),
        tooltip=[
            alt.Tooltip(field="gpu", type="nominal", title="GPU"),
            alt.Tooltip(field="tensor_parallel", type="ordinal", title=_TP),
            alt.Tooltip(field="seq_len", type="ordinal", title=_SEQ_LEN),
            alt.Tooltip(field="max_concurrency", type="quantitative", title=_MAX_CONCURRENCY),
        ],
    )
    labels = base.mark_text(fontSize=10).encode(
        text=alt.Text(field="label", type="nominal"),
        color=alt.condition("datum.max_concurrency > 0", alt.value("white"), alt.value("#e45756")),
    )
    chart = (rects + labels).properties(title=title, width=560, height=24 * len(gpus))
    return chart.add_params(tp_param)

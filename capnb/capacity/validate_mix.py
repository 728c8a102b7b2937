"""Mixed fleets by request size against Mélange (Griggs et al., 2024, arXiv 2404.14527).

Three checks, each against a figure Mélange published (github.com/tyler-griggs/melange-release
@d46ab43: ``README.md``, ``melange/config/example.json`` and the figures of ``docs/index.md``):

1. :func:`toy`: its README's example (4 buckets, A10G and A100 at 1.01 and 3.67 USD/hour, 30
   requests/s): 3 A10G + 1 A100 at 6.70 USD/hour with every bucket whole; capnb's
   :func:`capnb.capacity.mix_by_size` with ``slices=1`` must give that fleet, and splitting the
   buckets freely can only be cheaper.
2. :func:`heatmap`: its Plot 1, the relative tokens per dollar of A10G against A100 for Llama-2-7B
   at maximum throughput over 36 (input, output) lengths: which GPU is cheaper per token, by how
   much. capnb's per-bin throughput (the analytic model at one request shape per cell, memory
   bound) at the same prices.
3. :func:`savings`: its Plots 7-12, each single GPU type's cost relative to Mélange's at 1 to 32
   requests/s (read off the bars, about +-0.03): the saving against the best single type. capnb's
   mix by size on Mélange's four GPUs at its prices, Llama-2-7B, P99 TPOT <= 120 ms, with the
   bundled Azure conversation log for the request sizes (Mélange's Arena and PubMed logs are not
   bundled): the same kind of number on a different length distribution.

The three are stored in ``melange_record.json`` beside this module (``python -m
capnb.capacity.validate_mix --write`` computes and stores them; ``tests/test_mix_size.py`` fails
when the stored record differs from a fresh computation): worksheet 06 shows the stored record
(:func:`stored`), since it does not depend on the worksheet's inputs.

Mélange's "up to 77 %" is against the *worst* single type (H100 alone at 1 request/s, 4.4x
Mélange's cost in Plot 7); against the best single type its bars show 15-32 % (Arena, 120 ms),
0-26 % (Arena, 40 ms), 15-24 % (PubMed, 120 ms) and 0-40 % (mixed, 120 ms).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

__all__ = [
    "MELANGE_PRICES", "PLOT1", "PLOT_SAVINGS", "RATES", "RECORD", "heatmap", "main", "record",
    "savings", "stored", "toy",
]  # fmt: skip

#: The stored record of the three checks (:func:`record`, written by ``--write``).
RECORD = Path(__file__).with_name("melange_record.json")
#: Requests/s of the stored savings rows: Plots 7-12's levels.
RATES = (1, 2, 4, 8, 16, 32)

#: USD per GPU-hour in Mélange's evaluation: A10G and A100 as in its example.json; L4 and H100
#: from Plot 7's bars at 1 request/s (H100 alone 4.4x, A100 alone 2.13x, two A10G 1.17x and three
#: L4 1.22x Mélange's one A10G + one L4: 1.71 USD/hour), which agree with 0.70 and 7.516.
MELANGE_PRICES = {"L4": 0.70, "A10G": 1.01, "A100-80GB": 3.67, "H100-SXM": 7.516}

#: Plot 1 (Llama-2-7B, A10G vs A100): percent more tokens per dollar of the better GPU, signed
#: positive where A10G is better (red tiles), negative where A100 is (blue). Rows: output tokens;
#: columns: input tokens. Tiles of 1-4 % are pale: their sign is not read here, only abs(x) >= 5.
PLOT1 = np.array(
    [
        [72, 52, 20, 17, 13, 11],
        [52, 25, 15, 1, 1, -4],
        [28, 11, 2, 1, -8, -13],
        [12, 2, 1, -4, -17, -21],
        [-6, -10, -11, -11, -18, -20],
        [-8, -10, -13, -17, -18, -38],
    ],
    dtype=float,
)
#: Plot 1's columns: input tokens per request.
PLOT1_INPUTS = (25, 100, 250, 500, 1000, 2000)
#: Plot 1's rows: output tokens per request.
PLOT1_OUTPUTS = (25, 100, 250, 500, 1000, 2000)

#: Plots 7, 8, 9 and 11: the best single type's cost over Mélange's, per request rate (read off
#: the bars), so the saving is ``1 - 1 / ratio``.
PLOT_SAVINGS = pd.DataFrame(
    {
        "rate_qps": [1, 2, 4, 8, 16, 32],
        "arena_120ms": [1.17, 1.25, 1.38, 1.47, 1.38, 1.27],
        "arena_40ms": [1.24, 1.00, 1.35, 1.20, 1.27, 1.08],
        "pubmed_120ms": [1.31, 1.18, 1.27, 1.26, 1.24, 1.23],
        "mixed_120ms": [1.00, 1.68, 1.15, 1.31, 1.27, 1.26],
    }
)


def _prices(gpus) -> xr.Dataset:
    return xr.Dataset(
        {"usd_per_gpu_hour": (("gpu", "pricing"), [[MELANGE_PRICES[g]] for g in gpus])},
        coords={"gpu": list(gpus), "pricing": ["on_demand"]},
    )


def toy() -> dict[str, object]:
    """Mélange's README example solved by capnb: every bucket whole, then freely split."""
    from ._mix_size import mix_by_size

    options = xr.Dataset(
        {"per_instance_qps": (("size_bin", "pool"), [[2, 20], [1, 20], [5, 40], [2, 20]])},
        coords={"pool": ["A10G", "A100"], "gpu": ("pool", ["A10G", "A100-80GB"]),
                "tensor_parallel": ("pool", [1, 1])},
    )  # fmt: skip
    demand = xr.DataArray([30.0], dims="slot", coords={"slot": [0]})
    shares = xr.DataArray([0.2, 0.1, 0.5, 0.2], dims="size_bin")
    prices = xr.Dataset(
        {"usd_per_gpu_hour": (("gpu", "pricing"), [[1.01], [3.67]])},
        coords={"gpu": ["A10G", "A100-80GB"], "pricing": ["on_demand"]},
    )
    out = {}
    for name, slices in (("whole", 1), ("split", None)):
        fleet = mix_by_size(options, demand, prices=prices, shares=shares, reserved=None,
                            slices=slices)  # fmt: skip
        out[name] = (fleet.instances.values.ravel().tolist(), fleet.attrs["mix_usd_per_hour"])
    return out


def heatmap(model: str = "Llama-2-7B") -> pd.DataFrame:
    """Capnb's Plot 1: tokens per dollar of A10G over A100 at maximum throughput, per cell.

    Each cell's workload is that one request shape; throughput is :func:`capnb.capacity.sweep`'s
    per-instance requests/s with no latency bound (the memory limit and the throughput knee bind)
    times the output tokens, over the GPU's price.
    """
    from ..latency import workload
    from ._sweep import sweep

    rows = []
    for i, out_tokens in enumerate(PLOT1_OUTPUTS):
        for j, in_tokens in enumerate(PLOT1_INPUTS):
            shape = workload(prompt_tokens=[in_tokens] * 4, output_tokens=[out_tokens] * 4)
            found = sweep(model, ["A10G", "A100-80GB"], 1, in_tokens + out_tokens, 1e6,
                          workload=shape, metric="e2e")  # fmt: skip
            qps = found.per_instance_qps.squeeze().values
            per_usd = (
                qps * out_tokens / np.array([MELANGE_PRICES["A10G"], MELANGE_PRICES["A100-80GB"]])
            )
            ratio = per_usd[0] / per_usd[1]
            signed = 100 * (ratio - 1) if ratio >= 1 else -100 * (1 / ratio - 1)
            rows.append({"input_tokens": in_tokens, "output_tokens": out_tokens,
                         "published_pct": PLOT1[i, j], "capnb_pct": signed})  # fmt: skip
    frame = pd.DataFrame(rows)
    read = frame.published_pct.abs() >= 5
    frame["read"] = read
    frame["same_gpu"] = np.where(read, np.sign(frame.published_pct) == np.sign(frame.capnb_pct),
                                 np.nan)  # fmt: skip
    return frame


def savings(
    trace: str = "azure-conv-2023", *, model: str = "Llama-2-7B", sla_s: float = 0.12,
    rates=(1, 2, 4, 8, 16, 32),
) -> pd.DataFrame:  # fmt: skip
    """Capnb's mix by size on Mélange's setup: the saving against the best single type, per rate.

    Mélange's four GPUs at its prices (:data:`MELANGE_PRICES`), one request/s level per row
    (one slot), on demand only, P99 TPOT <= ``sla_s``; the request sizes from ``trace``.
    """
    from ..data import load_trace
    from ._mix_size import mix_by_size, size_bins, size_options

    gpus = list(MELANGE_PRICES)
    bins = size_bins(load_trace(trace))
    options = size_options(model, gpus, 1, sla_s, bins, metric="tpot")
    rows = []
    for rate in rates:
        demand = xr.DataArray([float(rate)], dims="slot", coords={"slot": [0]})
        fleet = mix_by_size(options, demand, prices=_prices(gpus), reserved=None)
        used = fleet.instances.sum("slot")
        rows.append({
            "rate_qps": rate,
            "mix_usd_per_hour": fleet.attrs["mix_usd_per_hour"],
            "best_single_pool": fleet.attrs["single_type_pool"],
            "best_single_usd_per_hour": fleet.attrs["single_type_usd_per_hour"],
            "saving": fleet.attrs["saving"],
            "worst_single_over_mix": float(np.nanmax(fleet.single_type_usd_per_hour))
            / fleet.attrs["mix_usd_per_hour"],
            "fleet": ", ".join(f"{int(n)} x {p}" for p, n in zip(fleet.pool.values, used.values,
                                                                   strict=True) if n),
        })  # fmt: skip
    return pd.DataFrame(rows)


def record() -> dict[str, object]:
    """The three checks computed now, as the stored record holds them.

    Returns
    -------
    dict
        ``toy``: :func:`toy`'s fleets (instance counts, USD per hour); ``heatmap``: :func:`heatmap`'s
        rows (input and output tokens, published and capnb's percent); ``savings``:
        :func:`savings`' rows at :data:`RATES` (requests/s, USD per hour, shares of cost).
    """
    return {
        "toy": toy(),
        "heatmap": heatmap().to_dict("records"),
        "savings": savings(rates=RATES).to_dict("records"),
    }


def stored() -> tuple[dict[str, object], pd.DataFrame, pd.DataFrame]:
    """The stored record: :func:`toy`'s dict, :func:`heatmap`'s and :func:`savings`' tables.

    Returns
    -------
    tuple
        As :func:`toy`, :func:`heatmap` and ``savings(rates=RATES)`` return them (instance counts,
        USD per hour, percent and shares of cost), read from :data:`RECORD`.
    """
    kept = json.loads(RECORD.read_text(encoding="utf-8"))
    toy_fleets = {name: (list(fleet), cost) for name, (fleet, cost) in kept["toy"].items()}
    cells = pd.DataFrame(kept["heatmap"])
    cells["same_gpu"] = cells["same_gpu"].astype(float)  # NaN where the tile is not read
    return toy_fleets, cells, pd.DataFrame(kept["savings"])


def _same(a, b) -> bool:
    """Equal records, floats to 1e-9 relative (NaN equal to NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def main(argv=None) -> int:
    """The command line: compare a fresh record with the stored one; ``--write`` stores it."""
    parser = argparse.ArgumentParser(
        prog="python -m capnb.capacity.validate_mix", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--write", action="store_true", help=f"store the record in {RECORD.name}")
    args = parser.parse_args(argv)
    now = json.loads(json.dumps(record()))  # as stored: tuples become lists
    if args.write:
        RECORD.write_text(json.dumps(now, indent=1) + "\n", encoding="utf-8")
        print(f"stored {RECORD}")
        return 0
    same = RECORD.is_file() and _same(now, json.loads(RECORD.read_text(encoding="utf-8")))
    print(f"{RECORD.name}: {'the same as' if same else 'differs from'} a fresh computation")
    return 0 if same else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

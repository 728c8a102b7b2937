"""GPU prices by provider and kind: on-demand, reserved (committed) and spot, each with its source.

``datasets/gpu_prices.csv`` is long: one row per (gpu, provider, pricing) with the price per GPU
per hour, where it was read and when. A price that was not found has no row: it stays missing,
never filled in. ``gpus.csv`` keeps its one on-demand price per GPU (the plan's); this table is
for comparing kinds of pricing at one provider (:func:`capnb.capacity.mix`).
"""

from __future__ import annotations

import numpy as np

from .. import glossary
from ..errors import ConfigError
from ._catalog import dataset_path, list_gpus
from ._files import read_csv_frame, user_path

__all__ = ["PRICINGS", "gpu_prices", "load_gpu_prices"]

#: Kinds of pricing. ``reserved`` is a commitment whose term the source does not state.
PRICINGS = ("on_demand", "reserved_1y", "reserved_3y", "reserved", "spot")

_COLUMNS = ("gpu", "provider", "pricing", "usd_per_gpu_hour", "source", "captured", "notes")


def load_gpu_prices(path=None):
    """Read the price table (default: the bundled ``datasets/gpu_prices.csv``) as a DataFrame.

    One row per (gpu, provider, pricing), ``usd_per_gpu_hour`` in USD/hour, with its source and
    capture date.

    Every row is checked: every cell but ``notes`` filled, a catalog GPU, a known pricing kind, a
    finite price > 0, a source, an ISO capture date and no (gpu, provider, pricing) twice; a bad
    row is a ConfigError naming its line.

    Examples
    --------
    >>> prices = load_gpu_prices()
    >>> float(prices.query("gpu == 'H100-SXM' and provider == 'hyperstack' "
    ...                    "and pricing == 'reserved'").usd_per_gpu_hour.item())
    2.72
    """
    import pandas as pd

    path = dataset_path("gpu_prices.csv") if path is None else user_path(path, "price table")
    try:
        table = read_csv_frame(path, dtype={"captured": str}, keep_default_na=False, na_values=[""])
    except ConfigError:  # a value past the header's columns, its line named
        raise
    except (ValueError, OSError) as err:  # text in a number column, bytes that are not UTF-8
        raise ConfigError(f"{path}: not a readable price table ({str(err).strip()})") from None
    missing = [c for c in _COLUMNS if c not in table.columns]
    if missing:
        raise ConfigError(f"{path}: missing columns {missing}")
    gpus = set(list_gpus())
    seen = set()
    for i, row in enumerate(table.itertuples(index=False)):
        where = f"{path}, line {i + 2}"
        empty = [c for c in _COLUMNS[:-1] if not str(getattr(row, c)).strip() or
                 (isinstance(getattr(row, c), float) and np.isnan(getattr(row, c)))]  # fmt: skip
        if empty:  # a row no provider's table could hold, or a price of no source or date
            raise ConfigError(
                f"{where}: {empty[0]} is empty; every price needs a gpu, provider, pricing, "
                "usd_per_gpu_hour (USD/hour), source and captured date"
            )
        if row.gpu not in gpus:
            raise ConfigError(f"{where}: gpu {row.gpu!r} is not in the GPU catalog")
        if row.pricing not in PRICINGS:
            raise ConfigError(f"{where}: pricing {row.pricing!r} is not one of {PRICINGS}")
        try:
            price = float(row.usd_per_gpu_hour)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{where}: usd_per_gpu_hour {row.usd_per_gpu_hour!r} is not a number"
            ) from None
        if not np.isfinite(price) or price <= 0 or price > 1000:
            raise ConfigError(
                f"{where}: usd_per_gpu_hour must be a price per GPU-hour > 0 and at most 1000 "
                f"USD, got {price!r}"
            )
        if not isinstance(row.source, str) or not row.source.strip():
            raise ConfigError(f"{where}: every price needs a source")
        try:
            pd.Timestamp(row.captured)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: captured {row.captured!r} is not a date") from None
        key = (row.gpu, row.provider, row.pricing)
        if key in seen:
            raise ConfigError(f"{where}: {key} is listed twice")
        seen.add(key)
    return table


def gpu_prices(provider: str, *, path=None):
    """One provider's prices as a Dataset over (gpu, pricing); a price not found is NaN.

    ``usd_per_gpu_hour`` (USD/hour) and ``price_source`` (where the price was read).

    Examples
    --------
    >>> p = gpu_prices("hyperstack")
    >>> float(p.usd_per_gpu_hour.sel(gpu="A100-80GB-PCIe", pricing="spot"))
    1.08
    >>> bool(np.isnan(p.usd_per_gpu_hour.sel(gpu="H100-SXM", pricing="spot")))
    True
    >>> float(gpu_prices("HyperStack").usd_per_gpu_hour.sel(gpu="A100-80GB-PCIe", pricing="spot"))
    1.08
    """
    import xarray as xr

    from ..errors import UnknownNameError

    table = load_gpu_prices(path)
    # a provider is named whatever its case ("HyperStack"), as a GPU is
    rows = table[table.provider.str.lower() == str(provider).strip().lower()]
    if rows.empty:
        raise UnknownNameError("price provider", provider, sorted(set(table.provider)))
    gpus = [g for g in list_gpus() if g in set(rows.gpu)]
    price = np.full((len(gpus), len(PRICINGS)), np.nan)
    source = np.full(price.shape, "", dtype=object)
    for row in rows.itertuples(index=False):
        at = (gpus.index(row.gpu), PRICINGS.index(row.pricing))
        price[at], source[at] = float(row.usd_per_gpu_hour), f"{row.source} ({row.captured})"
    return xr.Dataset(
        {
            "usd_per_gpu_hour": (("gpu", "pricing"), price, glossary.attrs("usd_per_gpu_hour")),
            "price_source": (("gpu", "pricing"), source.astype(str)),
        },
        coords={
            "gpu": ("gpu", gpus, glossary.attrs("gpu")),
            "pricing": ("pricing", list(PRICINGS), glossary.attrs("pricing")),
        },
        attrs={"provider": provider, "source": str(path or dataset_path("gpu_prices.csv"))},
    )

"""Forecast benchmarks: reading a 30 M-request trace, and 10,000 Monte Carlo months.

1. Read a CSV in the Azure trace's format (30 M requests over 7 days, with diurnal and weekly
   cycles and bursts, written here once: ``TIMESTAMP`` with ``+00:00`` and mixed fractional
   precision, like the week-long Azure 2024 trace), resample it to per-second counts and fit
   hour-of-week quantiles: :func:`capnb.data.load_trace` + :func:`capnb.forecast.resample` +
   :func:`capnb.forecast.fit_baseline`, against the straightforward pandas version
   (``read_csv``, ``to_datetime``, ``resample("1s")``, ``groupby().quantile``). Goal: under 10 s.
   Its stages each against the best plain version of the same computation, timed in the same run:
   reading against pyarrow's reader with the timestamp type (the same arrays, without checking
   that the offsets agree), binning against ``np.bincount`` and ``np.searchsorted`` +
   ``np.add.reduceat``, slot quantiles against numpy (``lexsort`` + ``bincount``) and pandas
   (``groupby``).
2. 10,000 months of 43,200 minutes (:func:`capnb.forecast.simulate` on the ServeGen m-large
   baseline with the article's burst model), against the same Monte Carlo written with numpy one
   month at a time (same random numbers, so the results are checked equal). Goal: under 5 s.

The CSV goes to ``$CAPNB_BENCH_DIR`` (default: the temp directory) and is reused by later runs.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from capnb import data, forecast
from capnb.data._series import slot_codes
from capnb.forecast._baseline import slot_statistics
from capnb.kernels import forecast as kernels
from capnb.kernels._lazy import njit

from . import Row, best_time
from .reference import REGISTRY

REQUESTS = 30_000_000
QUICK_REQUESTS = 1_000_000
TRIALS = 10_000
QUICK_TRIALS = 500
_START = np.datetime64("2024-05-13T00:00:00", "ns")  # a Monday, like the trace's week
_SEED = 2024


# -- the synthetic week ----------------------------------------------------------------------
def _rate_shape(seconds: np.ndarray) -> np.ndarray:
    """Relative request rate per second of a week.

    A coding service's 10:1 weekday day/night cycle, weekends 55 % lower, and three bursts of 3-5x
    lasting 1-2 hours.
    """
    hours = seconds / 3600.0
    day = (hours // 24).astype(int)
    hour = hours % 24
    daily = 1.0 + 9.0 * np.clip(np.sin(np.pi * (hour - 6.0) / 14.0), 0.0, None) ** 2
    weekly = np.where(day >= 5, 0.45, 1.0)
    shape = daily * weekly
    for start_h, length_h, height in ((30.5, 1.5, 4.0), (77.0, 2.0, 3.0), (129.25, 1.0, 5.0)):
        inside = (hours >= start_h) & (hours < start_h + length_h)
        shape[inside] *= height
    return shape


@njit
def _format_azure(ns, prompt, output, out):  # pragma: no cover - compiled
    """Write ``YYYY-MM-DD HH:MM:SS[.fffffff]+00:00,prompt,output`` lines; returns bytes written.

    Trailing zeros of the fraction are dropped, as in the Azure 2024 files' mixed precision.
    """
    p = 0
    for i in range(ns.shape[0]):
        t = ns[i]
        seconds = t // 1_000_000_000
        fraction = (t % 1_000_000_000) // 100
        days, second = seconds // 86400, seconds % 86400
        z = days + 719468  # civil date from days since 1970 (H. Hinnant's algorithm)
        era = z // 146097
        doe = z - era * 146097
        yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
        doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
        mp = (5 * doy + 2) // 153
        d = doy - (153 * mp + 2) // 5 + 1
        m = mp + 3 if mp < 10 else mp - 9
        y = yoe + era * 400 + (1 if m <= 2 else 0)
        fields = (y, m, d, second // 3600, (second // 60) % 60, second % 60)
        widths = (4, 2, 2, 2, 2, 2)
        separators = (45, 45, 32, 58, 58, 0)
        for k in range(6):
            v = fields[k]
            for j in range(widths[k] - 1, -1, -1):
                out[p + j] = 48 + v % 10
                v //= 10
            p += widths[k]
            if separators[k]:
                out[p] = separators[k]
                p += 1
        if fraction:
            digits = 7
            while fraction % 10 == 0:
                fraction //= 10
                digits -= 1
            out[p] = 46
            p += 1
            for j in range(digits - 1, -1, -1):
                out[p + j] = 48 + fraction % 10
                fraction //= 10
            p += digits
        for c in (43, 48, 48, 58, 48, 48, 44):  # "+00:00,"
            out[p] = c
            p += 1
        for value in (prompt[i], output[i]):
            v, n = value, 1
            while v >= 10**n:
                n += 1
            for j in range(n - 1, -1, -1):
                out[p + j] = 48 + v % 10
                v //= 10
            p += n
            out[p] = 44
            p += 1
        out[p - 1] = 10
    return p


def write_week(path: Path, requests: int, seed: int = _SEED) -> Path:
    """Write the synthetic week (not timed); reuse it when it is already there."""
    if path.is_file() and path.stat().st_size > 0:
        return path
    rng = np.random.default_rng(seed)
    seconds = np.arange(7 * 86_400)
    shape = _rate_shape(seconds.astype(float))
    counts = rng.multinomial(requests, shape / shape.sum())
    offsets = np.repeat(seconds.astype(np.int64) * 1_000_000_000, counts)
    offsets += rng.integers(0, 10_000_000, requests) * 100  # 100 ns resolution, as in Azure
    offsets.sort()
    ns = _START.view(np.int64) + offsets
    prompt = np.minimum(rng.lognormal(7.3, 1.0, requests), 200_000).astype(np.int64)
    output = np.minimum(rng.lognormal(3.3, 1.3, requests), 20_000).astype(np.int64)
    buffer = np.empty(requests * 64, np.uint8)
    used = _format_azure(ns, prompt, output, buffer)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as handle:
        handle.write(b"TIMESTAMP,ContextTokens,GeneratedTokens\n")
        handle.write(buffer[:used].tobytes())
    tmp.replace(path)
    return path


# -- timed versions ----------------------------------------------------------------------------
def _capnb_read(path: Path):
    with warnings.catch_warnings():  # the synthetic week has a few equal 100 ns timestamps
        warnings.simplefilter("ignore", data.TraceWarning)
        trace = data.load_trace(path)
    series = forecast.resample(trace, "1s", gap=None)
    baseline = forecast.fit_baseline(series, slots="hour_of_week")
    return series, baseline


def _pandas_read(path: Path):
    import pandas as pd

    frame = pd.read_csv(path)
    times = pd.to_datetime(frame["TIMESTAMP"], format="ISO8601").dt.tz_localize(None)
    frame = frame.drop(columns="TIMESTAMP").assign(requests=1).set_index(times)
    per_second = frame.resample("1s").sum()
    qps = per_second["requests"].astype(float)
    slot = qps.index.day_of_week * 24 + qps.index.hour
    quantiles = qps.groupby(slot).quantile([0.5, 0.95, 0.99]).unstack()
    return per_second, quantiles


def _arrow_read(path: Path):
    """The plain read: times parsed by pyarrow's reader (to UTC, offsets not compared), tokens."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    types = {
        "TIMESTAMP": pa.timestamp("ns", tz="UTC"),
        "ContextTokens": pa.int64(),
        "GeneratedTokens": pa.int64(),
    }
    table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=types))
    ns = table.column("TIMESTAMP").cast(pa.int64()).to_numpy()
    return ns, table.column("ContextTokens").to_numpy(), table.column("GeneratedTokens").to_numpy()


def _bin_requests_sorted(time_ns, prompt, output, origin_ns, interval_ns, n_bins):
    """Counts and token sums per interval of sorted times: the interval edges by binary search."""
    edges = np.searchsorted(time_ns, origin_ns + np.arange(n_bins + 1) * interval_ns)
    counts = np.diff(edges)
    filled = np.flatnonzero(counts)

    def total(tokens):
        out = np.zeros(n_bins)
        out[filled] = np.add.reduceat(tokens[: edges[-1]], edges[filled])  # exact integer sums
        return out

    return counts.astype(float), total(prompt), total(output)


def _cpu_time(func) -> float:
    """CPU seconds of this process (all its threads) in one call (steadier on a shared machine)."""
    start = time.process_time()
    func()
    return time.process_time() - start


def _slots_numpy(values, slot, quantiles, n_slots):
    """Slot quantiles, means and counts the straightforward numpy way: ``lexsort`` + ``bincount``."""
    seen = ~np.isnan(values)
    values, slot = values[seen], slot[seen]
    grouped = values[np.lexsort((values, slot))]
    count = np.bincount(slot, minlength=n_slots)
    start = np.cumsum(count) - count
    position = quantiles * (count[:, None] - 1)
    below = np.floor(position)
    weight = position - below
    low = grouped[start[:, None] + below.astype(np.int64)]
    high = grouped[start[:, None] + np.minimum(below.astype(np.int64) + 1, count[:, None] - 1)]
    step = high - low
    quantile = np.where(weight >= 0.5, high - step * (1 - weight), low + step * weight)
    mean = np.bincount(slot, weights=values, minlength=n_slots) / count
    return quantile, mean, count


def _slots_pandas(values, slot, quantiles):
    """Slot quantiles, means and counts with a pandas ``groupby``."""
    import pandas as pd

    groups = pd.Series(values).groupby(slot)
    return groups.quantile(list(quantiles)).unstack(), groups.mean(), groups.count()


def _read_rows(quick: bool) -> list[Row]:
    requests = QUICK_REQUESTS if quick else REQUESTS
    folder = Path(os.environ.get("CAPNB_BENCH_DIR", tempfile.gettempdir()))
    path = write_week(folder / f"capnb-azure-week-{requests}-{_SEED}.csv", requests)
    size_mb = path.stat().st_size / 1e6
    series, baseline = _capnb_read(path)  # also the warm-up (kernels from the disk cache)
    start = time.perf_counter()
    per_second, _ = _pandas_read(path)
    theirs = time.perf_counter() - start
    # check: the same counts and token sums per complete second, and the same slot quantiles of
    # those seconds (capnb leaves out the first and last, partly observed, second)
    inside = series.qps.notnull().values
    counts = per_second.iloc[: series.sizes["time"]]
    assert np.array_equal(series.requests.values[inside], counts["requests"].to_numpy()[inside])
    assert np.array_equal(
        series.prompt_tokens.values[inside], counts["ContextTokens"].to_numpy()[inside]
    )
    kept = counts["requests"][inside].astype(float)
    slot = kept.index.day_of_week * 24 + kept.index.hour
    expected = kept.groupby(slot).quantile([0.5, 0.95, 0.99]).unstack().to_numpy()
    np.testing.assert_allclose(baseline.target_qps.values, expected, rtol=1e-9)
    ours = best_time(lambda: _capnb_read(path), repeat=3, warmup=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", data.TraceWarning)
        t_load = best_time(lambda: data.load_trace(path), repeat=3, warmup=0)
        trace = data.load_trace(path)
    t_arrow = best_time(lambda: _arrow_read(path), repeat=3, warmup=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", data.TraceWarning)
        cpu_load = _cpu_time(lambda: data.load_trace(path))
    cpu_arrow = _cpu_time(lambda: _arrow_read(path))
    ns, prompt, output = _arrow_read(path)
    assert np.array_equal(ns, trace.time.values.view(np.int64))  # +00:00: the clock is UTC
    assert np.array_equal(prompt, trace.prompt_tokens.values)
    t_resample = best_time(lambda: forecast.resample(trace, "1s", gap=None), repeat=3)
    t_baseline = best_time(lambda: forecast.fit_baseline(series, slots="hour_of_week"), repeat=3)
    # binning: the requests of the week into seconds
    step = 1_000_000_000
    origin = int(ns[0]) - int(ns[0]) % step
    n_bins = (int(ns[-1]) - origin) // step + 1
    bincount = REGISTRY["forecast.bin_requests"]["numpy"]

    def binned():
        out = np.zeros(n_bins), np.zeros(n_bins), np.zeros(n_bins)
        kernels.bin_requests(ns, prompt, output, origin, step, *out)
        return out

    for plain in (bincount, _bin_requests_sorted):
        for mine, other in zip(
            binned(), plain(ns, prompt, output, origin, step, n_bins), strict=True
        ):
            assert np.array_equal(mine, other)
    t_bin = best_time(binned, repeat=5)
    t_bincount = best_time(lambda: bincount(ns, prompt, output, origin, step, n_bins), repeat=3)
    t_sorted = best_time(
        lambda: _bin_requests_sorted(ns, prompt, output, origin, step, n_bins), repeat=3
    )
    # slot quantiles: the per-second rates into the 168 hours of the week
    qps = series.qps.values
    codes = slot_codes(series.time, "hour_of_week")
    q = np.array([0.5, 0.95, 0.99])
    ours_q, ours_mean, ours_count = slot_statistics(qps, codes, q, 168)
    numpy_q, numpy_mean, numpy_count = _slots_numpy(qps, codes, q, 168)
    pandas_q, pandas_mean, pandas_count = _slots_pandas(qps, codes, q)
    assert np.array_equal(ours_q, numpy_q) and np.array_equal(ours_count, numpy_count)
    assert np.array_equal(ours_q, pandas_q.to_numpy())
    assert np.array_equal(ours_count, pandas_count.to_numpy())
    np.testing.assert_allclose(ours_mean, numpy_mean, rtol=1e-12)
    np.testing.assert_allclose(ours_mean, pandas_mean.to_numpy(), rtol=1e-12)
    t_slots = best_time(lambda: slot_statistics(qps, codes, q, 168), repeat=7)
    t_slots_numpy = best_time(lambda: _slots_numpy(qps, codes, q, 168), repeat=7)
    t_slots_pandas = best_time(lambda: _slots_pandas(qps, codes, q), repeat=7)
    goal = "met" if ours < 10 else "NOT met"
    seconds = series.sizes["time"]
    return [
        Row(
            "load_trace + resample('1s') + fit_baseline(hour_of_week)",
            f"{requests / 1e6:.0f} M requests, {size_mb:,.0f} MB CSV, 7 days",
            ours,
            f"{requests / ours / 1e6:,.1f} M requests/s",
            {"pandas": theirs / ours},
            f"goal < 10 s: {goal}. Stages (best of 3 each): load_trace {t_load:.2f} s, resample "
            f"{t_resample:.2f} s, fit_baseline {t_baseline:.2f} s. pandas: read_csv + "
            "to_datetime(ISO8601) + resample('1s') + groupby quantile, timed once",
        ),
        Row(
            "load_trace (UTC offsets checked as pyarrow reads)",
            f"{requests / 1e6:.0f} M requests, {size_mb:,.0f} MB CSV",
            t_load,
            f"{requests / t_load / 1e6:,.1f} M requests/s",
            {"pyarrow + numpy": t_arrow / t_load},
            "pyarrow + numpy: read_csv with the timestamp type (times to UTC, offsets not "
            "compared) and the columns to numpy; capnb reads the times as text in batches, checks "
            "each batch's offsets and parses it on a thread, and checks tokens and dates; same "
            f"arrays. CPU time of one call (not counting other processes): capnb {cpu_load:.2f} s, "
            f"pyarrow + numpy {cpu_arrow:.2f} s",
        ),
        Row(
            "bin_requests (resample's counts and token sums, numba)",
            f"{requests / 1e6:.0f} M requests into {n_bins:,} seconds",
            t_bin,
            f"{requests / t_bin / 1e6:,.0f} M requests/s",
            {"np.bincount": t_bincount / t_bin, "np.searchsorted + reduceat": t_sorted / t_bin},
            "one pass over the requests; np.bincount: each request's interval by floor division, "
            "three bincounts; np.searchsorted: the interval edges in the sorted times, token sums "
            "by np.add.reduceat; equal arrays",
        ),
        Row(
            "slot_statistics (fit_baseline's slot quantiles)",
            f"{seconds:,} one-second windows, 168 slots, 3 quantiles",
            t_slots,
            f"{seconds / t_slots / 1e6:,.0f} M windows/s",
            {
                "numpy lexsort + bincount": t_slots_numpy / t_slots,
                "pandas": t_slots_pandas / t_slots,
            },
            "plain numpy: a radix sort of the slot codes, one NaN-padded row per slot sorted, "
            "running sums along the rows; quantiles equal to both (numpy's linear method), means "
            "to 1e-12 (summed in another order)",
        ),
    ]


def _month_rows(quick: bool) -> list[Row]:
    from capnb.forecast import _months

    trials = QUICK_TRIALS if quick else TRIALS
    series = data.load_rate_series("servegen-m-large")
    baseline = forecast.fit_baseline(series)
    model = forecast.BurstModel()
    inputs = forecast.month_inputs(series, baseline)
    run = forecast.simulate(series, baseline, model, trials=trials)  # warm-up and reference
    grid = run.capacity_qps.values
    key = (np.uint64(0), np.uint64(0))
    args = (
        inputs.base, inputs.noise, inputs.noise_block, model.rate_per_month,
        model.duration_s[0] / 60, model.duration_s[1] / 60, *model.multiplier,
        float(grid[0]), float(grid[1] - grid[0]),
    )  # fmt: skip

    def fresh():  # the months without bursts are kept between calls: forget them first
        _months._KEPT.clear()
        return forecast.simulate(series, baseline, model, trials=trials)

    numpy_version = REGISTRY["forecast.simulate_months"]["numpy"]
    sample = min(trials, 300)
    pools = (inputs.pool_start, inputs.pool_size)  # each minute's range of the residuals
    check = numpy_version(key, list(range(sample)), *args, grid.size, *pools)
    assert np.array_equal(check[0], run.monthly_peak_qps.values[:sample])
    kw = {"inputs": inputs, "bursts": model, "mean_count": model.rate_per_month, "key": key}
    block = _months.month_block(np.arange(sample), grid=grid, **kw)[2]
    assert np.array_equal(block.sum(axis=0), check[2].sum(axis=0))
    ours = best_time(fresh, repeat=3)
    kept = best_time(
        lambda: forecast.simulate(series, baseline, forecast.BurstModel(multiplier=(3.0, 6.0)),
                                  trials=trials),
        repeat=3,
    )  # fmt: skip
    start = time.perf_counter()
    numpy_version(key, list(range(sample)), *args, grid.size, *pools)
    t_numpy = (time.perf_counter() - start) / sample * trials
    minutes = trials * inputs.base.size
    goal = "met" if ours < 5 else "NOT met"
    return [
        Row(
            "simulate (Monte Carlo months, two passes)",
            f"{trials:,} months x {inputs.base.size:,} minutes, {grid.size} capacity levels",
            ours,
            f"{minutes / ours / 1e6:,.0f} M minutes/s",
            {"numpy": t_numpy / ours},
            f"goal < 5 s: {goal}; numpy (one month at a time, one pass) timed on {sample} months "
            "and scaled; peaks and minutes above checked equal to it",
        ),
        Row(
            "simulate, another burst model (months without bursts kept)",
            f"{trials:,} months",
            kept,
            f"{minutes / kept / 1e6:,.0f} M minutes/s",
            {"fresh": ours / kept},
            "what a worksheet pays when the burst model or the plan quantile changes",
        ),
    ]


def _mixture_rows(quick: bool) -> list[Row]:
    """The selection's calibrated plan at one origin, on a plan's shape (24 slots x 42 points)."""
    rng = np.random.default_rng(_SEED)
    rows, width, n_errors = 24, 42, 3_000
    points = rng.gamma(2.0, 5.0, (rows, width))
    seen = np.ones((rows, width))
    errors = np.sort(rng.standard_t(3, n_errors))
    cumulative = np.arange(n_errors + 1) / n_errors
    low, high = points.min(axis=1) + errors[0], points.max(axis=1) + errors[-1]
    q = np.array([0.5, 0.95])
    args = (points, seen, low, high, errors, cumulative, q, 64)
    reference = REGISTRY["forecast.mixture_bisect"]["numpy"]
    assert np.array_equal(kernels.mixture_bisect(*args), reference(*args))
    calls = 20 if quick else 200
    ours = best_time(lambda: [kernels.mixture_bisect(*args) for _ in range(calls)]) / calls
    theirs = best_time(lambda: [reference(*args) for _ in range(calls)]) / calls
    return [
        Row(
            "mixture_bisect (the forecast selection's calibrated plan, numba)",
            f"{rows} slots x {width} points, {n_errors:,} errors, 2 levels, 64 halvings",
            ours,
            f"{1 / ours:,.0f} plans/s",
            {"numpy": theirs / ours},
            "numpy: every slot's bracket halved at once (np.searchsorted of every point); equal "
            "to the last bit; a small plan's selection makes about 1,900 such calls",
        )
    ]


def run(quick: bool = False) -> list[Row]:
    return _read_rows(quick) + _month_rows(quick) + _mixture_rows(quick)

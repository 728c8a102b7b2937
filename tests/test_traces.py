"""Trace readers: bundled traces against their published figures, every format, and bad input."""

import gzip
import json
import re
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xarray as xr

from benchmarks.reference.forecast import NO_ZONE, offset_codes_python
from capnb import data, forecast
from capnb.data import _traces
from capnb.data._times import offset_name
from capnb.errors import ConfigError, InputError, UnknownNameError
from capnb.kernels import forecast as kernels

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _ns(trace):
    return trace.time.values.astype("datetime64[ns]").view(np.int64)


# -- bundled data against the figures in its SOURCES.md -------------------------------------
@pytest.mark.parametrize(
    (
        "name",
        "rows",
        "minutes",
        "prompt_mean",
        "prompt_p50",
        "output_mean",
        "output_p50",
        "per_second",
    ),
    [
        # per-second counts p50/p95/p99/max, seconds counted from the first request
        ("azure-code-2023", 8819, 57.3, 2048, 1469, 28, 13, (0, 13, 28, 67)),
        ("azure-conv-2023", 19366, 58.4, 1155, 1020, 211, 129, (5, 11, 13, 16)),
    ],
)
def test_bundled_azure_traces_match_published_figures(
    name, rows, minutes, prompt_mean, prompt_p50, output_mean, output_p50, per_second
):
    trace = data.load_trace(name)
    assert trace.sizes["request"] == rows
    assert trace.prompt_tokens.dtype == np.int64 and trace.time.dtype == "datetime64[ns]"
    ns = _ns(trace)
    assert round((ns[-1] - ns[0]) / 60e9, 1) == minutes
    assert round(float(trace.prompt_tokens.mean())) == prompt_mean
    assert np.median(trace.prompt_tokens) == prompt_p50
    assert round(float(trace.output_tokens.mean())) == output_mean
    assert np.median(trace.output_tokens) == output_p50
    span = (ns[-1] - ns[0]) // 10**9 + 1
    counts = [np.zeros(span) for _ in range(3)]
    kernels.bin_requests(ns, np.zeros(0, np.int64), np.zeros(0, np.int64), ns[0], 10**9, *counts)
    figures = [*np.round(np.quantile(counts[0], [0.5, 0.95, 0.99])).tolist(), counts[0].max()]
    assert figures == list(per_second)
    assert trace.attrs["timezone"] == "unknown" and trace.attrs["notes"] == "none"


def test_bundled_rate_series_match_published_figures():
    large = data.load_rate_series("servegen-m-large")
    small = data.load_rate_series("servegen-m-small")
    for series in (large, small):
        assert series.sizes["time"] == 14 * 144
        assert series.attrs["interval_s"] == 600 and series.attrs["weekday_known"] == "no"
    assert (round(float(large.qps.min())), round(float(large.qps.max()))) == (48, 583)
    assert round(float(large.qps.mean())) == 196
    # 37 all-zero windows in m-small are holes, not idle service: missing, and left out of the mean
    assert int(small.qps.isnull().sum()) == 37 == small.attrs["missing_windows"]
    assert round(float(small.qps.sum()) / 2016) == 1174  # the published mean counts them as 0
    kept = data.load_rate_series("servegen-m-small", zero_is_missing=False)
    assert int((kept.qps == 0).sum()) == 37


def test_bundled_mooncake_trace_is_relative_and_says_so():
    with pytest.warns(data.TraceWarning, match="share their timestamp"):
        trace = data.load_trace("mooncake-synthetic")
    assert trace.sizes["request"] == 3993
    ns = _ns(trace)
    assert 16 < (ns[-1] - ns[0]) / 60e9 < 18  # "3,993 requests over 17 minutes"
    assert trace.attrs["weekday_known"] == "no" and "placeholder" not in trace.attrs["notes"]
    assert "not known" in trace.attrs["time_origin"]


def test_names_and_kinds_are_checked():
    assert data.list_traces()[:2] == ["azure-code-2023", "azure-conv-2023"]
    assert data.list_rate_series() == ["servegen-m-large", "servegen-m-mid", "servegen-m-small"]
    with pytest.raises(UnknownNameError, match="azure-code-2023"):
        data.load_trace("azure-code")
    with pytest.raises(InputError, match="load_rate_series"):
        data.load_trace("servegen-m-large")
    with pytest.raises(InputError, match="load_trace"):
        data.load_rate_series("azure-conv-2023")
    with pytest.raises(InputError, match="format"):
        data.load_trace("azure-code-2023", format="xlsx")


# -- formats ----------------------------------------------------------------------------------
def test_azure_2024_style_offsets_and_mixed_precision(tmp_path):
    path = _write(
        tmp_path,
        "week.csv",
        AZURE_HEADER
        + "2024-05-10 00:00:00+00:00,10,2\n"
        + "2024-05-10 00:00:00.5+00:00,11,3\n"
        + "2024-05-10 00:00:01.1234567+00:00,12,4\n",
    )
    trace = data.load_trace(path)
    assert trace.attrs["format"] == "azure" and trace.attrs["timezone"] == "UTC"
    assert (_ns(trace) - _ns(trace)[0]).tolist() == [0, 500_000_000, 1_123_456_700]
    assert trace.prompt_tokens.values.tolist() == [10, 11, 12]


def test_one_offset_keeps_the_local_clock(tmp_path):
    path = _write(
        tmp_path,
        "local.csv",
        AZURE_HEADER + "2024-05-10 09:00:00+02:00,1,1\n2024-05-10 10:00:00+02:00,1,1\n",
    )
    trace = data.load_trace(path)
    assert trace.attrs["timezone"] == "UTC+02:00"
    assert str(trace.time.values[0]) == "2024-05-10T09:00:00.000000000"  # wall clock kept
    utc = data.load_trace(path, timezone="UTC")
    assert str(utc.time.values[0]) == "2024-05-10T07:00:00.000000000"


def test_mixed_offsets_need_a_named_clock(tmp_path):
    # the night Europe/Berlin leaves summer time: 02:30 +02:00 then 02:15 +01:00
    path = _write(
        tmp_path,
        "dst.csv",
        AZURE_HEADER + "2024-10-27 01:30:00+02:00,1,1\n2024-10-27 02:15:00+01:00,1,1\n",
    )
    with pytest.raises(ConfigError, match=r"mixes UTC offsets .*timezone="):
        data.load_trace(path)
    # the two rows straddle the change: counted on Berlin's standard time, one hour apart
    with pytest.warns(data.TraceWarning, match="daylight-saving change of Europe/Berlin"):
        berlin = data.load_trace(path, timezone="Europe/Berlin")
    assert berlin.attrs["timezone"] == "Europe/Berlin standard time (UTC+01:00 all year)"
    assert [str(t)[11:16] for t in berlin.time.values] == ["00:30", "02:15"]
    with pytest.raises(InputError, match="timezone"):
        data.load_trace(path, timezone="Mars/Olympus")


def test_relative_times_on_a_named_zone_cross_its_daylight_saving_change_as_dated_ones(tmp_path):
    # BurstGPT-style seconds from 0, time 0 = 2024-10-26 00:00 Berlin summer time, one request
    # two days on (after the clocks went back): elapsed time was added to the wall time of
    # time 0, so the second read as 00:00 on the 28th (Berlin's clock says 23:00 on the 27th)
    # under the label 'Europe/Berlin'; it is counted on standard time, as dated times are
    path = _write(
        tmp_path,
        "burst.csv",
        "Timestamp,Request tokens,Response tokens\n0,10,2\n172800,10,2\n",
    )
    with pytest.warns(data.TraceWarning, match="daylight-saving change of Europe/Berlin"):
        trace = data.load_trace(
            path, time_unit="s", start="2024-10-26 00:00", timezone="Europe/Berlin"
        )
    assert trace.attrs["timezone"] == "Europe/Berlin standard time (UTC+01:00 all year)"
    assert [str(t)[:16] for t in trace.time.values] == ["2024-10-25T23:00", "2024-10-27T23:00"]
    dated = _write(
        tmp_path,
        "dated.csv",
        AZURE_HEADER + "2024-10-26 00:00:00+02:00,10,2\n2024-10-27 23:00:00+01:00,10,2\n",
    )
    with pytest.warns(data.TraceWarning, match="daylight-saving change"):
        same = data.load_trace(dated, timezone="Europe/Berlin")
    np.testing.assert_array_equal(_ns(same), _ns(trace))
    # no change inside the trace: its zone's own clock, and nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summer = data.load_trace(
            path, time_unit="s", start="2024-07-01 00:00", timezone="Europe/Berlin"
        )
    assert summer.attrs["timezone"] == "Europe/Berlin"
    assert [str(t)[:16] for t in summer.time.values] == ["2024-07-01T00:00", "2024-07-03T00:00"]


def test_times_with_and_without_offsets_are_refused_by_row(tmp_path):
    path = _write(
        tmp_path,
        "mixed.csv",
        AZURE_HEADER + "2024-05-10 00:00:00+00:00,1,1\n2024-05-10 00:00:01,1,1\n",
    )
    with pytest.raises(ConfigError, match=r"with and without a UTC offset.*row 2"):
        data.load_trace(path)


@pytest.mark.parametrize(
    "text",
    [
        b"t,a\n2024-05-10 00:00:00+00:00,1\n2024-05-10 00:00:01Z,2\n2024-05-10 00:00:02+02:00,3\n",
        b"a,t\n1,2024-05-10 00:00:00.5-0530\n2,2024-05-10 00:00:01-05:30\r\n",
        b"t\n2023-11-16 18:17:03.9799600\n2023-11-16 18:17:04\n",
        b"t,a\n2024-05-10 00:00:00+01:00,1\n\n2024-05-10 00:00:00,2\n",
        b"t,a\n2024-05-10 00:00:00Z,1\n2024-05-10 00:00:01+0000,2\n 2024-05-10 00:00:02+00:00 ,3\n",
        b"t,a\n2024-05-10 00:00:00+01:00,1\n2024-05-10 00:00:01+03:00,2\n2024-05-10 00:00:02,3\n",
        b"t,a\n2024-05-10 00:00:00+01:00,1\n2024-05-10 00:00:01,2\n2024-05-10 00:00:02+03:00,3\n",
    ],
)
@pytest.mark.parametrize("small", [False, True])
def test_utc_offsets_are_read_as_the_reference_reads_them(tmp_path, monkeypatch, text, small):
    # one offset: the trace is on its clock; another offset first: an error naming both rows; a
    # time without an offset first: the error of a log mixing times with and without offsets
    if small:  # small batches and parts: rows across batches and threads
        _small_parts(monkeypatch, block=48, part=40)
    path = tmp_path / "t.csv"
    path.write_bytes(text)
    codes = offset_codes_python(text, text.split(b"\n")[0].decode().split(",").index("t"), 1)
    differ = [k for k, code in enumerate(codes) if code != codes[0]]
    if not differ:
        trace = data.load_trace(path, time_column="t")
        expected = "unknown" if codes[0] == NO_ZONE else offset_name(codes[0])
        assert trace.attrs["timezone"] == expected
    elif codes[differ[0]] == NO_ZONE:
        with pytest.raises(
            ConfigError, match=rf"with and without a UTC offset.*row {differ[0] + 1}"
        ):
            data.load_trace(path, time_column="t")
    else:
        first, other = offset_name(codes[0]), offset_name(codes[differ[0]])
        with pytest.raises(
            ConfigError,
            match=rf"mixes UTC offsets \({re.escape(first)} in row 1, {re.escape(other)} in row "
            rf"{differ[0] + 1} ",
        ):
            data.load_trace(path, time_column="t")


def _small_parts(monkeypatch, block: int, part: int) -> None:
    monkeypatch.setattr(_traces, "_BLOCK_BYTES", block)
    monkeypatch.setattr(_traces, "_PART_BYTES", part)
    monkeypatch.setattr(_traces, "_MAX_PARTS", 7)


@pytest.mark.parametrize("rows", [1, 2, 63, 64, 65, 1000])
@pytest.mark.parametrize("small", [False, True])
def test_the_first_other_offset_is_found_whatever_the_parts(tmp_path, monkeypatch, rows, small):
    if small:
        _small_parts(monkeypatch, block=200, part=500)
    for changed in sorted({0, rows // 2, rows - 1}):
        lines = [
            f"2024-05-10 00:00:{i % 60:02d}+0{2 if i == changed else 1}:00,{i}" for i in range(rows)
        ]
        path = tmp_path / f"t{changed}.csv"
        path.write_text("t,n\n" + "\n".join(lines) + "\n")
        if rows == 1:
            assert data.load_trace(path, time_column="t").attrs["timezone"] == "UTC+02:00"
            continue
        first, other, row = (
            ("+02:00", "+01:00", 2) if changed == 0 else ("+01:00", "+02:00", changed + 1)
        )
        said = rf"mixes UTC offsets \(UTC\{first} in row 1, UTC\{other} in row {row} "
        with pytest.raises(ConfigError, match=said + rf"\(line {row + 1}\)"):
            data.load_trace(path, time_column="t")


def test_quoted_and_compressed_times_with_offsets_load_as_plain_ones(tmp_path):
    times = [f"2024-05-10 09:00:{i:02d}.5+02:00" for i in range(30)]
    body = "".join(f"{t},{i},1\n" for i, t in enumerate(times))
    plain = _write(tmp_path, "plain.csv", AZURE_HEADER + body)
    quoted = _write(
        tmp_path,
        "quoted.csv",
        AZURE_HEADER + "".join(f'"{t}",{i},1\n' for i, t in enumerate(times)),
    )
    packed = tmp_path / "packed.csv.gz"
    packed.write_bytes(gzip.compress((AZURE_HEADER + body).encode()))
    reference = data.load_trace(plain)
    assert reference.attrs["timezone"] == "UTC+02:00"
    assert str(reference.time.values[0]) == "2024-05-10T09:00:00.500000000"
    for path in (quoted, packed):
        other = data.load_trace(path)
        xr.testing.assert_identical(other.drop_attrs(), reference.drop_attrs())
        assert other.attrs["timezone"] == "UTC+02:00"


def test_naive_times_with_a_named_zone_are_labelled_not_shifted(tmp_path):
    path = _write(
        tmp_path, "naive.csv", AZURE_HEADER + "2024-05-10 09:00:00,1,1\n2024-05-10 09:00:02,1,1\n"
    )
    trace = data.load_trace(path, timezone="America/New_York")
    assert trace.attrs["timezone"] == "America/New_York"
    assert str(trace.time.values[0]).startswith("2024-05-10T09:00:00")


def test_generic_csv_with_epoch_seconds_and_milliseconds(tmp_path):
    path = _write(tmp_path, "epoch.csv", "id,ts,input_tokens\n1,1715328000.25,5\n2,1715328001,6\n")
    with pytest.raises(InputError, match="time_unit"):
        data.load_trace(path, time_column="ts")
    trace = data.load_trace(path, time_column="ts", time_unit="s")
    assert str(trace.time.values[0]) == "2024-05-10T08:00:00.250000000"
    assert "output_tokens" not in trace and trace.prompt_tokens.values.tolist() == [5, 6]
    assert "no output_tokens" in trace.attrs["columns"]
    assert "prompt_tokens from 'input_tokens'" in trace.attrs["columns"]
    berlin = data.load_trace(path, time_column="ts", time_unit="s", timezone="Europe/Berlin")
    assert str(berlin.time.values[0]) == "2024-05-10T10:00:00.250000000"  # epochs are UTC instants
    ms = _write(tmp_path, "ms.csv", "timestamp\n1715328000250\n1715328001000\n")
    assert _ns(data.load_trace(ms, time_unit="ms"))[0] == 1715328000250 * 10**6


def test_generic_csv_without_a_time_column_names_the_columns(tmp_path):
    path = _write(tmp_path, "cols.csv", "when,tokens\n2024-05-10 00:00:00,1\n")
    with pytest.raises(ConfigError, match=r"time_column.*\['when', 'tokens'\]"):
        data.load_trace(path)
    with pytest.warns(data.TraceWarning, match="'tokens' looks like token counts"):
        assert data.load_trace(path, time_column="when").sizes["request"] == 1


def test_parquet_with_aware_naive_and_text_times(tmp_path):
    times = pd.date_range("2024-05-10 09:00", periods=4, freq="15s", tz="Europe/Paris")
    frame = pd.DataFrame(
        {"timestamp": times, "prompt_tokens": [1, 2, 3, 4], "output_tokens": [4, 3, 2, 1]}
    )
    aware = tmp_path / "aware.parquet"
    frame.to_parquet(aware)
    trace = data.load_trace(aware)
    assert trace.attrs["timezone"] == "Europe/Paris"
    assert str(trace.time.values[0]).startswith("2024-05-10T09:00:00")
    naive = tmp_path / "naive.parquet"
    frame.assign(timestamp=times.tz_localize(None)).to_parquet(naive)
    assert data.load_trace(naive).attrs["timezone"] == "unknown"
    text = tmp_path / "text.parquet"
    pq.write_table(pa.table({"time": ["2024-05-10T09:00:00Z", "2024-05-10T09:00:01Z"]}), text)
    assert data.load_trace(text).attrs["timezone"] == "UTC"


def test_mooncake_jsonl_with_a_start_date(tmp_path):
    path = _write(
        tmp_path,
        "trace.jsonl",
        '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
        '{"timestamp": 1500, "input_length": 20, "output_length": 3, "hash_ids": [2]}\n',
    )
    trace = data.load_trace(path, start="2024-05-13 09:00")
    assert trace.attrs["weekday_known"] == "yes"
    assert str(trace.time.values[1]) == "2024-05-13T09:00:01.500000000"
    broken = _write(
        tmp_path, "broken.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": 1}\n{oops\n'
    )
    with pytest.raises(ConfigError, match="line 2"):
        data.load_trace(broken)


def test_a_start_with_a_utc_offset_keeps_its_wall_time(tmp_path):
    # numpy read "2024-05-13T09:00+09:00" as its UTC instant (00:00): every hour of the day moved
    # by the offset, and with timezone="Asia/Tokyo" the UTC hours were labelled Tokyo's
    path = _write(
        tmp_path,
        "trace.jsonl",
        '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
        '{"timestamp": 1500, "input_length": 20, "output_length": 3, "hash_ids": [2]}\n',
    )
    own = data.load_trace(path, start="2024-05-13T09:00+09:00")
    assert str(own.time.values[0]) == "2024-05-13T09:00:00.000000000"
    assert own.attrs["timezone"] == "UTC+09:00"
    tokyo = data.load_trace(path, start="2024-05-13T09:00+09:00", timezone="Asia/Tokyo")
    assert str(tokyo.time.values[0]) == "2024-05-13T09:00:00.000000000"
    assert tokyo.attrs["timezone"] == "Asia/Tokyo"
    utc = data.load_trace(path, start="2024-05-13T09:00+09:00", timezone="UTC")
    assert str(utc.time.values[1]) == "2024-05-13T00:00:01.500000000"
    assert utc.attrs["timezone"] == "UTC"


# -- bad input ----------------------------------------------------------------------------------
def test_unsorted_rows_are_sorted_and_reported(tmp_path):
    path = _write(
        tmp_path,
        "unsorted.csv",
        AZURE_HEADER
        + "2023-11-16 18:00:02,3,3\n2023-11-16 18:00:00,1,1\n2023-11-16 18:00:01,2,2\n",
    )
    with pytest.warns(data.TraceWarning, match=r"1 row was earlier .*row 2.*sorted"):
        trace = data.load_trace(path)
    assert trace.prompt_tokens.values.tolist() == [1, 2, 3]
    assert "sorted" in trace.attrs["notes"]


def test_duplicate_timestamps_are_kept_and_reported(tmp_path):
    path = _write(
        tmp_path,
        "dups.csv",
        AZURE_HEADER
        + "2023-11-16 18:00:00,1,1\n2023-11-16 18:00:00,2,2\n2023-11-16 18:00:01,3,3\n",
    )
    with pytest.warns(data.TraceWarning, match="1 request shares its timestamp"):
        trace = data.load_trace(path)
    assert trace.sizes["request"] == 3


def test_empty_file_and_header_only(tmp_path):
    with pytest.raises(ConfigError, match="empty"):
        data.load_trace(_write(tmp_path, "empty.csv", ""))
    with pytest.raises(ConfigError, match="header but no rows"):
        data.load_trace(_write(tmp_path, "header.csv", AZURE_HEADER))
    with pytest.raises(ConfigError, match="empty"):
        data.load_rate_series(_write(tmp_path, "empty2.csv", ""), rate_column="qps")


def test_a_single_row_loads_but_gives_no_rate(tmp_path):
    trace = data.load_trace(_write(tmp_path, "one.csv", AZURE_HEADER + "2023-11-16 18:00:00,1,1\n"))
    assert trace.sizes["request"] == 1
    with pytest.raises(InputError, match="single request"):
        forecast.resample(trace, "1s")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("2023-11-16 18:00:00,12,abc\n", r"row 1 \(line 2\).*'GeneratedTokens' holds 'abc'"),
        (
            "2023-11-16 18:00:00,1,1\n2023-11-16 18:00:01,1.5,1\n",
            r"row 2.*'ContextTokens' holds '1.5'",
        ),
        ("2023-11-16 18:00:00,-4,1\n", r"row 1.*negative"),
        ("2023-11-16 18:00:00,1,1\n2023-11-16 18:00:01,,1\n", r"row 2.*'ContextTokens'"),
        (
            "2023-11-16 18:00:00,1,1\nyesterday,1,1\n",
            r"row 2 \(line 3\).*'TIMESTAMP' holds 'yesterday'",
        ),
    ],
)
def test_non_numeric_and_bad_values_name_the_row(tmp_path, body, match):
    with pytest.raises(ConfigError, match=match):
        data.load_trace(_write(tmp_path, "bad.csv", AZURE_HEADER + body))


def test_interval_longer_than_the_trace():
    trace = data.load_trace("azure-code-2023")  # 57.3 minutes
    with pytest.raises(InputError, match=r"1 h is longer than the trace \(57.3 min"):
        forecast.resample(trace, "1h")
    with pytest.raises(InputError, match="interval"):
        forecast.resample(trace, "0.5s")
    with pytest.raises(InputError, match="interval"):
        forecast.resample(trace, "soon")


def test_gaps_in_a_log_are_missing_not_zero(tmp_path):
    times = pd.date_range("2024-05-10 00:00", "2024-05-10 02:00", freq="10s")
    times = times[(times < "2024-05-10 00:40") | (times >= "2024-05-10 01:10")]  # a 30-minute hole
    path = tmp_path / "gap.csv"
    pd.DataFrame(
        {"TIMESTAMP": times.strftime("%Y-%m-%d %H:%M:%S"), "ContextTokens": 1, "GeneratedTokens": 1}
    ).to_csv(path, index=False)
    series = forecast.resample(data.load_trace(path), "1min")
    hole = series.sel(time=slice("2024-05-10 00:40", "2024-05-10 01:09"))
    assert hole.qps.isnull().all() and hole.requests.isnull().all()
    assert float(series.qps.sel(time="2024-05-10 00:20")) == pytest.approx(6 / 60)
    assert "30 intervals in empty runs" in series.attrs["notes"]
    assert series.attrs["missing_intervals"] == 31  # and the last minute, observed for 0 s
    assert "not the time of day: it spans under two days" in series.attrs["notes"]
    zeros = forecast.resample(data.load_trace(path), "1min", gap=None)
    assert float(zeros.qps.sel(time="2024-05-10 00:50")) == 0.0


def test_rate_series_gaps_zeros_duplicates_and_order(tmp_path):
    body = "start,rate\n0,5\n1200,7\n600,6\n1800,0\n1800,0\n2400,8\n"  # 600 late; 1800 zero
    path = _write(tmp_path, "rates.csv", body + "4200,9\n")
    with pytest.warns(data.TraceWarning, match="sorted.*merged|merged.*sorted|sorted"):
        series = data.load_rate_series(path, time_column="start", rate_column="rate", time_unit="s")
    assert series.qps.values.tolist()[:3] == [5, 6, 7]
    assert np.isnan(series.qps.values[3]) and np.isnan(series.qps.values[5])  # zero, absent
    assert series.sizes["time"] == 8 and series.attrs["missing_windows"] == 3  # 3000, 3600 absent
    clash = _write(tmp_path, "clash.csv", "start,rate\n0,5\n600,6\n600,7\n")
    with pytest.raises(ConfigError, match=r"row 2 .*row 3 .*same window"):
        data.load_rate_series(clash, time_column="start", rate_column="rate", time_unit="s")
    words = _write(tmp_path, "words.csv", "start,rate\n0,5\n600,n/a\n")
    with pytest.raises(ConfigError, match=r"row 2.*'n/a', not a number"):
        data.load_rate_series(words, time_column="start", rate_column="rate", time_unit="s")
    with pytest.raises(InputError, match="exactly one"):
        data.load_rate_series(words, time_column="start", time_unit="s")


def test_one_merged_repeated_window_is_said_in_the_singular(tmp_path):
    # one timestamp written twice with the same rate: the note said "1 repeated windows ... were"
    path = _write(tmp_path, "twice.csv", "start,qps\n0,5\n600,5\n600,5\n1200,5\n")
    with pytest.warns(data.TraceWarning) as caught:
        series = data.load_rate_series(path, time_column="start", rate_column="qps", time_unit="s")
    said = " ".join(str(w.message) for w in caught)
    assert series.sizes["time"] == 3
    assert "1 repeated window with the same value was merged" in said


def test_a_rate_series_merging_a_repeated_night_hour_names_the_clock_change_and_timezone(tmp_path):
    # Naive Europe/Berlin times over the 2026-10-25 change (02:00-02:59 twice) of a flat 5
    # requests/s: the repeated hour's 6 windows were merged (576 -> 570 windows) with a warning
    # that said 'merged' only, not that this may be a clock change nor how to name the zone
    utc = pd.date_range("2026-10-23 22:00", periods=576, freq="10min", tz="UTC")
    local = utc.tz_convert("Europe/Berlin").tz_localize(None).strftime("%Y-%m-%d %H:%M")
    path = tmp_path / "fallback.csv"
    pd.DataFrame({"time": local, "qps": 5.0}).to_csv(path, index=False)
    with pytest.warns(data.TraceWarning) as caught:
        series = data.load_rate_series(path, time_column="time", rate_column="qps")
    said = " ".join(str(w.message) for w in caught)
    assert series.sizes["time"] == 570
    assert "6 repeated windows" in said and "2026-10-25 02:00 to 02:50" in said
    assert "daylight-saving" in said and "timezone=" in said
    with pytest.warns(data.TraceWarning, match="standard time"):
        kept = data.load_rate_series(
            path, time_column="time", rate_column="qps", timezone="Europe/Berlin"
        )
    assert kept.sizes["time"] == 576  # with the zone named, both hours are kept
    # repeats of relative times (seconds from time 0) are no clock change: no such words
    relative = _write(tmp_path, "relative.csv", "start,rate\n0,5\n600,6\n600,6\n1200,7\n")
    with pytest.warns(data.TraceWarning) as caught:
        data.load_rate_series(relative, time_column="start", rate_column="rate", time_unit="s")
    assert not any("daylight-saving" in str(w.message) for w in caught)


def test_counts_per_window_become_rates(tmp_path):
    path = _write(tmp_path, "counts.csv", "t,n\n2024-05-10 00:00,600\n2024-05-10 00:10,1200\n")
    series = data.load_rate_series(path, time_column="t", count_column="n")
    assert series.qps.values.tolist() == [1.0, 2.0] and series.attrs["interval_s"] == 600
    assert series.attrs["weekday_known"] == "yes"


def _named_columns(path) -> tuple:
    """(time, prompt, output): the columns capnb.data.traffic_columns names for a file."""
    found = data.traffic_columns(path)
    return found["time"], found["prompt"], found["output"]


def _diurnal_log(tmp_path, name, rate_by_hour, days=4, seed=11, drop=None):
    """A Poisson request log (CSV) from 2024-05-13 00:00, requests/s by hour of day.

    ``drop``: a (start, stop) pair of times with no requests (a hole in the logging)."""
    rng = np.random.default_rng(seed)
    seconds = np.arange(days * 86_400)
    arrivals = np.repeat(seconds, rng.poisson(np.asarray(rate_by_hour)[seconds % 86_400 // 3600]))
    times = pd.Timestamp("2024-05-13") + pd.to_timedelta(
        np.sort(arrivals + rng.random(arrivals.size)), unit="s"
    )
    if drop is not None:
        times = times[(times < drop[0]) | (times >= drop[1])]
    path = tmp_path / name
    pd.DataFrame({"timestamp": times.strftime("%Y-%m-%d %H:%M:%S.%f"), "prompt_tokens": 100,
                  "output_tokens": 10}).to_csv(path, index=False)  # fmt: skip
    return path


def test_a_service_idle_every_night_has_idle_nights_not_holes(tmp_path):
    # busy 06:00-22:00, no request at all 22:00-06:00: the log's mean rate (0.13/s) expects 7
    # requests in a minute, but at night the other nights expect none, so the empty nights are
    # idle time (zeros), not holes; they used to be missing, and the plan then had no night slots
    day = [0.0] * 6 + [0.2] * 16 + [0.0] * 2
    series = forecast.resample(data.load_trace(_diurnal_log(tmp_path, "idle.csv", day)), "1min")
    night = series.qps.where(series.time.dt.hour.isin([22, 23, 0, 1, 2, 3, 4, 5]), drop=True)
    assert night.size == 3 * 480 and (night.fillna(-1) == 0).all()  # the log is from 06:00
    assert series.attrs["missing_intervals"] <= 2  # the edges, if observed under half a minute
    assert "3 empty run(s) of at least 15 min are idle, not holes" in series.attrs["notes"]
    plan = forecast.target(series, trials=200)
    p99 = plan.target_qps.sel(traffic_quantile=0.99).values
    assert (p99[[22, 23, 0, 1, 2, 3, 4, 5]] == 0).all() and (p99[6:22] > 0.2).all()
    # hours of the day not known (times from an unknown start): the mean rate decides, and says so
    log = data.load_trace(tmp_path / "idle.csv").assign_attrs(hours_known="no")
    unknown = forecast.resample(log, "1min")
    assert unknown.qps.sel(time="2024-05-14 02:00").isnull()
    assert "not the time of day: its hours of the day are not known" in unknown.attrs["notes"]


def test_one_empty_night_among_busy_ones_is_a_hole_and_a_daily_pause_is_not(tmp_path):
    # traffic day and night but none 03:00-03:30 every day (a daily pause), and none at all in
    # the night of 2024-05-15 00:00-06:00 (logging was down): that night is missing, the pauses
    # are idle time (the old mean-rate rule made every pause a hole too)
    rates = [0.05] * 24
    path = _diurnal_log(tmp_path, "busy.csv", rates, drop=("2024-05-15 00:00", "2024-05-15 06:00"))
    trace = data.load_trace(path)
    keep = ~((trace.time.dt.hour == 3) & (trace.time.dt.minute < 30))
    series = forecast.resample(trace.isel(request=keep.values), "1min")
    hole = series.qps.sel(time=slice("2024-05-15 00:00", "2024-05-15 05:58"))
    assert hole.isnull().all() and hole.size == 359  # the first request can fall at 05:59
    pauses = series.qps.where(series.time.dt.hour == 3, drop=True)
    pauses = pauses.where(pauses.time.dt.minute < 30, drop=True)
    assert pauses.sel(time=slice("2024-05-14 03:00", "2024-05-14 03:29")).sum() == 0
    assert int(pauses.isnull().sum()) == 30  # those of the missing night only
    assert series.attrs["missing_intervals"] == int(series.qps.isnull().sum())
    assert re.search(r"1 empty run\(s\) of at least 15 min are missing", series.attrs["notes"])
    assert "3 empty run(s) of at least 15 min are idle, not holes" in series.attrs["notes"]


def test_zeros_at_night_of_a_rate_series_are_idle_and_a_zero_night_among_busy_ones_missing(
    tmp_path,
):
    # 10-minute counts over 4 days, 600 a window by day: explicit zeros every night are idle
    # (they were all missing, as the median window holds 600 requests)
    rng = np.random.default_rng(5)
    times = pd.date_range("2024-05-13", periods=4 * 144, freq="10min")
    busy_night = rng.poisson(600, times.size)
    idle_night = np.where((times.hour >= 6) & (times.hour < 22), busy_night, 0)
    for name, counts in (("idle.csv", idle_night), ("hole.csv", busy_night.copy())):
        if name == "hole.csv":
            counts[(times >= "2024-05-15 00:00") & (times < "2024-05-15 06:00")] = 0
        pd.DataFrame({"timestamp": times.strftime("%Y-%m-%d %H:%M"), "requests": counts}).to_csv(
            tmp_path / name, index=False
        )
    idle = data.load_traffic(tmp_path / "idle.csv")
    assert idle.attrs["missing_windows"] == 0 and int((idle.qps == 0).sum()) == 4 * 48
    assert "192 windows with a rate of 0 are kept as idle, not missing" in idle.attrs["notes"]
    plan = forecast.target(idle, trials=200)
    assert (
        plan.target_qps.sel(traffic_quantile=0.99).values[[22, 23, 0, 1, 2, 3, 4, 5]] == 0
    ).all()
    hole = data.load_traffic(tmp_path / "hole.csv")
    assert hole.attrs["missing_windows"] == 36 == int(hole.qps.isnull().sum())
    assert hole.qps.sel(time=slice("2024-05-15 00:00", "2024-05-15 05:50")).isnull().all()
    assert "36 windows with a rate of exactly 0 are marked missing" in hole.attrs["notes"]


def test_slots_without_a_baseline_are_all_named_with_advice_for_their_cause():
    times = pd.date_range("2024-05-13", periods=4 * 24, freq="1h")
    qps = np.where((times.hour >= 6) & (times.hour < 22), 1.0 + 0.1 * (times.hour % 3), np.nan)
    series = xr.Dataset({"qps": ("time", qps)}, coords={"time": times}, attrs={"interval_s": 3600})
    with pytest.raises(InputError) as raised:
        forecast.target(series, trials=50)
    assert "8 hour of day slots (22:00-06:00) have no observed interval" in str(raised.value)
    assert "coarser slots or more history" not in str(raised.value)
    assert "gap=None" in str(raised.value) and "zero_is_missing=False" in str(raised.value)


def test_no_warnings_on_clean_bundled_loads():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data.load_trace("azure-conv-2023")
        data.load_rate_series("servegen-m-small")


# -- users' own logs: column names, JSON lines, time units, kinds --------------------------------
EPOCH_S = 1715558400  # 2024-05-13 00:00 UTC, a Monday


def _jsonl(tmp_path, name, records):
    import json

    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_token_columns_under_other_names_are_read_and_unread_ones_said(tmp_path):
    # BurstGPT's names (seconds from 0) and capitalised ones: read, and the two readers agree
    burst = _write(
        tmp_path,
        "burstgpt.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5.0,ChatGPT,472,18,490,Conversation log\n7.5,ChatGPT,1021,310,1331,API log\n",
    )
    assert _named_columns(burst) == ("Timestamp", "Request tokens", "Response tokens")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every token column read: nothing to report
        trace = data.load_trace(burst, time_unit="s", start="2024-05-13 00:00")
        traffic = data.load_traffic(burst, time_unit="s", start="2024-05-13 00:00")
    assert trace.prompt_tokens.values.tolist() == [472, 1021]
    assert trace.output_tokens.values.tolist() == [18, 310]
    assert "prompt_tokens from 'Request tokens'" in trace.attrs["columns"]
    xr.testing.assert_identical(traffic.drop_attrs(), trace.drop_attrs())
    case = _write(
        tmp_path,
        "case.csv",
        "TimeStamp,PROMPT_TOKENS,Completion Tokens\n2024-05-13 09:00:00,10,2\n",
    )
    trace = data.load_trace(case)
    assert (int(trace.prompt_tokens[0]), int(trace.output_tokens[0])) == (10, 2)
    assert data.traffic_columns(case)["output"] == "Completion Tokens"
    # a column that looks like token counts under no known name: said, not "no such column"
    odd = _write(tmp_path, "odd.csv", "time,tokens_in,tokens_out\n2024-05-13 09:00:00,10,2\n")
    with pytest.warns(data.TraceWarning, match=r"'tokens_in', 'tokens_out' look like token counts"):
        trace = data.load_trace(odd)
    assert "prompt_tokens" not in trace and "no such column" not in trace.attrs["columns"]
    assert "name it with prompt_column=" in trace.attrs["columns"]
    assert "not read" in trace.attrs["notes"]
    named = data.load_trace(odd, prompt_column="tokens_in", output_column="tokens_out")
    assert int(named.output_tokens[0]) == 2
    # two spellings of one name, neither exact: which one is the caller's to say
    twice = _write(tmp_path, "twice.csv", "Time,TIME\n2024-05-13 09:00:00,2024-05-13 09:00:01\n")
    with pytest.raises(
        ConfigError, match=r"columns \['Time', 'TIME'\] both read as .*time_column="
    ):
        data.load_trace(twice)


def test_vidur_and_sarathi_trace_columns_are_read_by_their_names(tmp_path):
    # Vidur's processed traces (data/processed_traces/splitwise_conv.csv): seconds from 0 in
    # arrived_at, prompt and output tokens as num_prefill_tokens and num_decode_tokens; they
    # were refused as 'no time column' and their token columns only reported
    vidur = _write(
        tmp_path,
        "splitwise_conv.csv",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,374,44\n4.314579,396,109\n",
    )
    assert _named_columns(vidur) == ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = data.load_trace(vidur, time_unit="s")
    assert trace.prompt_tokens.values.tolist() == [374, 396]
    assert trace.output_tokens.values.tolist() == [44, 109]
    assert _ns(trace).tolist() == [0, 4_314_579_000]


def test_openai_response_objects_are_read_with_their_nested_usage(tmp_path):
    # chat completion objects logged one a line: Unix seconds in 'created', the token counts
    # under 'usage'; they read as 'no prompt_tokens (the file has no such column)' and the plan
    # priced other lengths. A CSV of them flattened (pandas json_normalize) names usage.*
    records = [
        {
            "id": f"chatcmpl-{i}",
            "object": "chat.completion",
            "created": EPOCH_S + 60 * i,
            "model": "gpt-4o-mini",
            "usage": {"prompt_tokens": 10 + i, "completion_tokens": 5 + i, "total_tokens": 15},
        }
        for i in range(2)
    ]
    logged = _jsonl(tmp_path, "responses.jsonl", records)
    flat = _write(
        tmp_path,
        "responses.csv",
        "created,model,usage.prompt_tokens,usage.completion_tokens,usage.total_tokens\n"
        f"{EPOCH_S},gpt-4o-mini,10,5,15\n{EPOCH_S + 60},gpt-4o-mini,11,6,17\n",
    )
    for path in (logged, flat):
        assert _named_columns(path) == ("created", "usage.prompt_tokens", "usage.completion_tokens")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            trace = data.load_trace(path, time_unit="s")
            traffic = data.load_traffic(path, time_unit="s")
        assert trace.prompt_tokens.values.tolist() == [10, 11]
        assert trace.output_tokens.values.tolist() == [5, 6]
        assert _ns(trace).tolist() == [EPOCH_S * 10**9, (EPOCH_S + 60) * 10**9]
        assert "prompt_tokens from 'usage.prompt_tokens'" in trace.attrs["columns"]
        xr.testing.assert_identical(traffic.drop_attrs(), trace.drop_attrs())
    # times with offsets are re-read as text for their clock: the objects stay read
    dated = _jsonl(
        tmp_path,
        "dated.jsonl",
        [{"created_at": "2024-05-13T09:00:00+02:00", "usage": {"prompt_tokens": 3}}],
    )
    trace = data.load_trace(dated)
    assert trace.prompt_tokens.values.tolist() == [3] and trace.attrs["timezone"] == "UTC+02:00"


def test_the_named_time_column_is_not_also_read_as_the_count(tmp_path):
    # a request log timed by 'arrival_s' (time_column, time_unit = 's'), with token columns: the
    # kind was refused as "column 'arrival_s' reads as a rate series and 'input_len' as a request
    # log", the time column also taken for a count of arrivals ('arrival_s' is 'arrivals' without
    # its '_'): a file with one reading asked the user to choose between two
    path = _write(tmp_path, "rel.csv", "arrival_s,input_len,output_len\n0.5,100,20\n1.25,200,30\n")
    columns = data.traffic_columns(
        path, time_column="arrival_s", prompt_column="input_len", output_column="output_len"
    )
    assert columns["time"] == "arrival_s" and columns["count"] is None
    traffic = data.load_traffic(
        path,
        time_column="arrival_s",
        time_unit="s",
        prompt_column="input_len",
        output_column="output_len",
    )
    assert traffic.attrs["traffic_kind"].startswith("request log")
    assert traffic.prompt_tokens.values.tolist() == [100, 200]


def test_a_time_column_read_as_a_count_is_named_as_the_missing_time(tmp_path):
    # the same log with no column named: "column 'arrival_s' reads as a rate series and
    # 'input_tokens' as a request log; say which with trace_kind", and either kind then failed
    # ('rates' on no time column, 'requests' on "no time column among [...]"); the file has one
    # reading, the times in 'arrival_s', and the error now says to name it
    path = _write(tmp_path, "rel.csv", "arrival_s,input_tokens\n0.5,100\n1.25,200\n")
    with pytest.raises(ConfigError) as raised:
        data.load_traffic(path)
    message = str(raised.value)
    assert "rel.csv: no time column among" in message and "trace_kind" not in message
    assert "name it with time_column='arrival_s'" in message
    traffic = data.load_traffic(path, time_column="arrival_s", time_unit="s")
    assert traffic.attrs["traffic_kind"].startswith("request log")
    assert traffic.prompt_tokens.values.tolist() == [100, 200]


def test_a_rate_series_with_an_unknown_time_column_is_told_to_name_that_column(tmp_path):
    # hourly counts under 'hour,requests': the error said "name it with time_column='requests'",
    # the column it had just read as the counts; following it failed again. It now names 'hour'
    path = _write(
        tmp_path, "hourly.csv", "hour,requests\n2025-03-03 00:00,9000\n2025-03-03 01:00,9400\n"
    )
    with pytest.raises(ConfigError) as raised:
        data.load_traffic(path)
    message = str(raised.value)
    assert "hourly.csv: no time column among" in message
    assert "time_column='hour'" in message and "time_column='requests'" not in message
    series = data.load_traffic(path, time_column="hour")
    assert series.attrs["interval_s"] == 3600.0 and series.sizes["time"] == 2


def test_splitwise_sim_traces_are_read_by_their_names(tmp_path):
    # splitwise-sim's traces (traces/test_trace.csv): prompt_size and token_size (the output);
    # token_size alone was reported, as a candidate for the prompt too, and prompt_size not at all
    sim = _write(
        tmp_path,
        "trace.csv",
        "request_id,request_type,application_id,arrival_timestamp,batch_size,prompt_size,"
        "token_size\n0,2,0,1,1,4096,32\n1,2,0,3,1,2048,8\n",
    )
    found = data.traffic_columns(sim)
    assert (found["prompt"], found["output"]) == ("prompt_size", "token_size")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = data.load_trace(sim, time_unit="s")
    assert trace.prompt_tokens.values.tolist() == [4096, 2048]
    assert trace.output_tokens.values.tolist() == [32, 8]


def test_a_log_mixing_models_says_so(tmp_path):
    # BurstGPT logs ChatGPT and GPT-4 requests in one file: capnb plans one model, so reading
    # both as one service's traffic is said, with each model's count (it was silent)
    burst = _write(
        tmp_path,
        "burstgpt.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,230,1317,Conversation log\n"
        "118,GPT-4,417,276,693,Conversation log\n",
    )
    with pytest.warns(
        data.TraceWarning,
        match=r"column 'Model' names 2 models \(ChatGPT: 2 requests, GPT-4: 1 request\)",
    ):
        trace = data.load_trace(burst, time_unit="s")
    assert trace.sizes["request"] == 3
    assert "read together as one service's traffic" in trace.attrs["notes"]
    records = [
        {
            "created_at": "2024-05-13T09:00:00Z",
            "model": m,
            "prompt_tokens": 9,
            "completion_tokens": 3,
        }
        for m in ("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-8b")
    ]
    with pytest.warns(data.TraceWarning, match=r"column 'model' names 2 models"):
        data.load_trace(_jsonl(tmp_path, "api.jsonl", records))
    table = pa.table({"time": pd.to_datetime(["2024-05-13 09:00"] * 2), "model_name": ["a", "b"]})
    pq.write_table(table, tmp_path / "log.parquet")
    with pytest.warns(data.TraceWarning, match=r"column 'model_name' names 2 models"):
        data.load_trace(tmp_path / "log.parquet")
    one = _write(tmp_path, "one.csv", "Timestamp,Model,Request tokens\n5,ChatGPT,4\n6,ChatGPT,5\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one model: nothing to say
        data.load_trace(one, time_unit="s")


def test_json_lines_are_mooncakes_by_their_fields_and_other_logs_by_the_csv_rules(tmp_path):
    times = EPOCH_S + np.arange(0.0, 3 * 3600, 7.5)  # 3 h, one request every 7.5 s
    # a generic log: the CSV column rules, and a numeric time needs its unit, as in a CSV
    generic = _jsonl(
        tmp_path,
        "generic.jsonl",
        [{"timestamp": int(t * 1000), "prompt_tokens": 500, "output_tokens": 9} for t in times],
    )
    with pytest.raises(InputError, match="time_unit"):
        data.load_trace(generic)
    trace = data.load_trace(generic, time_unit="ms")
    assert trace.attrs["format"] == "jsonl" and trace.attrs["hours_known"] == "yes"
    assert str(trace.time.values[0]) == "2024-05-13T00:00:00.000000000"
    assert trace.sizes["request"] == times.size and int(trace.output_tokens[0]) == 9
    iso = _jsonl(
        tmp_path,
        "iso.jsonl",
        [
            {"created_at": "2024-05-13T09:00:00Z", "Input Tokens": 3, "completion_tokens": 1},
            {"created_at": "2024-05-13T09:00:02Z", "Input Tokens": 4, "completion_tokens": 2},
        ],
    )
    trace = data.load_trace(iso)
    assert trace.attrs["timezone"] == "UTC" and trace.prompt_tokens.values.tolist() == [3, 4]
    # Mooncake's fields, Unix times in ms: its unit, said in the notes, and real dates
    epoch = _jsonl(
        tmp_path,
        "epoch.jsonl",
        [{"timestamp": int(t * 1000), "input_length": 500, "output_length": 9} for t in times],
    )
    trace = data.load_trace(epoch)
    assert trace.attrs["format"] == "mooncake" and trace.attrs["timezone"] == "UTC"
    assert trace.attrs["hours_known"] == "yes" and "time_origin" not in trace.attrs
    assert str(trace.time.values[-1]) == "2024-05-13T02:59:52.500000000"
    assert "read as milliseconds (Mooncake's unit)" in trace.attrs["notes"]
    forecast.fit_baseline(forecast.resample(trace, "1min"))  # hours of the day are known
    # Mooncake's fields holding seconds: read as ms, 1000x too short, and said
    seconds = _jsonl(
        tmp_path,
        "seconds.jsonl",
        [
            {"timestamp": round(t - EPOCH_S + 0.25, 3), "input_length": 5, "output_length": 1}
            for t in times
        ],
    )
    with pytest.warns(data.TraceWarning, match=r"fractions of a millisecond.*time_unit='s'"):
        data.load_trace(seconds, start="2024-05-13 00:00")
    trace = data.load_trace(seconds, time_unit="s", start="2024-05-13 00:00")
    assert round((_ns(trace)[-1] - _ns(trace)[0]) / 3600e9, 2) == 3.0
    assert "milliseconds" not in trace.attrs["notes"]
    # the bundled one: relative ms, as before, and its unit said
    with pytest.warns(data.TraceWarning, match="share their timestamp"):
        bundled = data.load_trace("mooncake-synthetic")
    assert bundled.attrs["format"] == "mooncake" and bundled.attrs["hours_known"] == "no"
    assert "read as milliseconds" in bundled.attrs["notes"]


def test_a_time_unit_that_puts_unix_times_in_1970_is_refused_with_both_readings(tmp_path):
    seconds = EPOCH_S + np.cumsum(np.full(1000, 2.0))  # 0.5 req/s for 33 min, Unix seconds
    path = tmp_path / "epoch_s.csv"
    pd.DataFrame({"timestamp": seconds, "prompt_tokens": 5}).to_csv(path, index=False)
    with pytest.raises(
        ConfigError,
        match=r"row 1 \(line 2\): column 'timestamp' holds 1,715,558,402 to 1,715,560,400: "
        r"time_unit='ms' reads them as Unix times before 2000, from 1970-01-20 20:32:38 .*"
        r"a span of 2 s\).*19\.9 days after time 0; as Unix times in seconds \(time_unit='s'\) "
        r"they run from 2024-05-13 00:00:02 to 2024-05-13 00:33:20 UTC \(a span of 33.3 min\)\. "
        r"Pass time_unit='s'",
    ):
        data.load_trace(path, time_unit="ms")
    assert str(data.load_trace(path, time_unit="s").time.values[0]).startswith(
        "2024-05-13T00:00:02"
    )
    with pytest.raises(ConfigError, match=r"time_unit='s'.*2024-05-13 00:00:02"):
        data.load_rate_series(path, time_column="timestamp", count_column="prompt_tokens",
                              time_unit="ms")  # fmt: skip
    # the reverse: ms read as s lands past 2261, and the message says what ms would give
    ms = tmp_path / "epoch_ms.csv"
    pd.DataFrame({"timestamp": (seconds * 1000).astype(np.int64)}).to_csv(ms, index=False)
    with pytest.raises(
        ConfigError, match=r"outside the years 1678-2261.*time_unit='ms'\) they run from 2024-05-13"
    ):
        data.load_trace(ms, time_unit="s")
    us = _write(tmp_path, "us.csv", "timestamp\n1715558400000000\n1715558401000000\n")
    with pytest.raises(ConfigError, match=r"in microseconds \(time_unit='us'\)"):
        data.load_trace(us, time_unit="ns")  # Unix us read as ns: 1970-01-20
    # start= says they count from time 0: kept, with a warning giving both readings
    with pytest.warns(data.TraceWarning, match=r"2078-09-2.*load them without start="):
        data.load_trace(path, time_unit="s", start="2024-05-13 00:00")
    # times that count from 0 are not Unix times in any unit: no word
    relative = _write(tmp_path, "rel.csv", "timestamp\n0.5\n60\n3600\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert data.load_trace(relative, time_unit="s").attrs["hours_known"] == "no"


def test_a_rate_series_read_as_a_request_log_is_warned_about(tmp_path):
    path = _write(
        tmp_path,
        "rates.csv",
        "time,qps\n2024-05-13 00:00,5\n2024-05-13 00:01,6\n2024-05-13 00:02,5\n",
    )
    with pytest.warns(data.TraceWarning, match=r"column 'qps' looks like a rate series"):
        assert data.load_trace(path).sizes["request"] == 3
    assert float(data.load_traffic(path).qps.mean()) == pytest.approx(16 / 3)
    # a trace kind that contradicts the columns is an error, not one request per row
    with pytest.raises(ConfigError, match=r"trace_kind = 'requests', but column 'qps' holds"):
        data.load_traffic(path, kind="requests")


def test_a_rate_series_in_a_column_of_another_name_is_not_read_as_one_request_a_row(tmp_path):
    # requests/minute in a column no rate reader knows: before, 3 rows read as 3 requests
    path = _write(
        tmp_path,
        "rpm.csv",
        "time,requests_per_minute\n2024-05-13 00:00,300\n2024-05-13 00:10,360\n"
        "2024-05-13 00:20,300\n",
    )
    with pytest.raises(
        ConfigError,
        match=r"rpm\.csv: column 'requests_per_minute' looks like a rate series' values .*"
        r"requests/s in a column named 'qps'.*trace_kind = 'requests'",
    ):
        data.load_traffic(path)
    with pytest.warns(data.TraceWarning, match=r"column 'requests_per_minute' looks like a rate"):
        assert data.load_traffic(path, kind="requests").sizes["request"] == 3
    for name in ("arrivalRate", "RPM", "reqs_per_sec"):
        other = _write(tmp_path, "other.csv", f"time,{name}\n2024-05-13 00:00,5\n")
        with pytest.raises(ConfigError, match=f"column '{name}' looks like a rate"):
            data.load_traffic(other)
    # a request log's other columns are no rate: it reads as one request a row, without a word
    log = _write(
        tmp_path,
        "log.csv",
        "time,request_id,status\n2024-05-13 00:00,a,200\n2024-05-13 00:01,b,200\n",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert data.load_traffic(log).sizes["request"] == 2
        # nor is the time column, whatever its name
        timed = _write(
            tmp_path, "timed.csv", "arrival_rate_ts\n2024-05-13 00:00\n2024-05-13 00:01\n"
        )
        assert data.load_trace(timed, time_column="arrival_rate_ts").sizes["request"] == 2
        assert data.load_traffic(timed, time_column="arrival_rate_ts").sizes["request"] == 2


def test_a_count_column_of_another_name_is_told_the_option_that_reads_it(tmp_path):
    # 5-minute counts under 'n_requests': the error asked to rename the file's column to 'requests'
    # and never said that count_column= (or rate_column=) reads it as it is
    path = _write(
        tmp_path,
        "five.csv",
        "window_start,n_requests\n2025-03-03 00:00,9124\n2025-03-03 00:05,9079\n",
    )
    with pytest.raises(ConfigError) as raised:
        data.load_traffic(path)
    message = str(raised.value)
    assert "count_column='n_requests'" in message and "rate_column='n_requests'" in message
    series = data.load_traffic(path, count_column="n_requests")
    assert series.attrs["interval_s"] == 300.0
    assert series.qps.values.tolist() == pytest.approx([9124 / 300, 9079 / 300])


def test_a_file_separated_by_semicolons_or_tabs_is_named_as_such(tmp_path):
    # a European CSV: one column "timestamp;prompt_tokens;completion_tokens", and the error was
    # "no time column among [...]; name it with time_column="
    rows = "2024-05-13 00:00:00{0}100{0}20\n2024-05-13 00:00:01{0}200{0}30\n"
    for sep, words in ((";", "';'"), ("\t", "tabs"), ("|", "'|'")):
        path = _write(tmp_path, "log.csv", f"timestamp{sep}prompt_tokens{sep}completion_tokens\n"
                      + rows.format(sep))  # fmt: skip
        message = rf"log\.csv: its header is one column, .* which holds {re.escape(words)}: capnb"
        for load in (data.load_traffic, data.load_trace):
            with pytest.raises(ConfigError, match=message):
                load(path)
        with pytest.raises(ConfigError, match=message):
            data.load_rate_series(path, time_column="timestamp", rate_column="qps")


def test_an_excel_separator_line_is_named_as_such(tmp_path):
    # Grafana's 'Download CSV for Excel' starts with 'sep=,' (after a BOM): the error was "no time
    # column among [...]", read from the header 'sep='
    rows = '"Time","qps"\n2026-03-02 00:00:00,2.5\n2026-03-02 00:05:00,3.5\n'
    for line in ("sep=,", "sep=;"):
        path = tmp_path / "grafana.csv"
        path.write_text(f"{line}\n{rows}", encoding="utf-8-sig")
        message = rf"grafana\.csv: line 1, {re.escape(repr(line))}, is the separator line .*delete"
        for load in (data.load_traffic, data.load_trace):
            with pytest.raises(ConfigError, match=message):
                load(path)
    # without it the file reads as it is
    path.write_text(rows)
    assert data.load_traffic(path).qps.values.tolist() == [2.5, 3.5]


def test_a_byte_order_mark_before_a_quoted_header_is_not_part_of_its_name(tmp_path):
    # Grafana's CSV with a BOM: '\ufeff"Time","qps"' named its first column '"Time"' (quotes and
    # all), and pyarrow, which drops the BOM, had no such column: "not a well-formed CSV file"
    path = tmp_path / "grafana.csv"
    path.write_text('"Time","qps"\n2026-03-02 00:00:00,2.5\n2026-03-02 00:05:00,3.5\n',
                    encoding="utf-8-sig")  # fmt: skip
    assert data.load_traffic(path).qps.values.tolist() == [2.5, 3.5]
    log = tmp_path / "log.csv"
    log.write_text('"timestamp","prompt_tokens"\n2026-03-02 00:00:00,7\n', encoding="utf-8-sig")
    assert data.load_trace(log).prompt_tokens.values.tolist() == [7]


def test_a_rate_series_with_irregular_steps_says_so(tmp_path):
    # rows 3 to 16 minutes apart: the error said only "window start is not a whole number of
    # intervals (540 s) after the first window"
    rng = np.random.default_rng(2)
    times = pd.Timestamp("2024-05-13") + pd.to_timedelta(np.cumsum(rng.integers(3, 17, 300)), "min")
    path = tmp_path / "jitter.csv"
    pd.DataFrame({"time": times.strftime("%Y-%m-%d %H:%M"), "qps": 2.0}).to_csv(path, index=False)
    with pytest.raises(
        ConfigError,
        match=r"jitter\.csv, row \d+ \(line \d+\): window start is not a whole number of intervals "
        r"\(\d+ s\) after the first window \(the interval: the most common step between rows\); a "
        r"rate series is read on a regular grid, .* rows are 180 s to 960 s apart \(14 different "
        r"steps, \d+ rows off the grid\): put it on windows of one length first",
    ):
        data.load_traffic(path)


def test_the_forecasting_worksheet_reads_its_trace_as_the_plan_does(tmp_path):
    from capnb import notebook

    # a rate series of 3 days at 5 requests/s: its rates, not one request per row
    rng = np.random.default_rng(42)
    minutes = pd.date_range("2024-05-13", periods=3 * 1440, freq="1min")
    shape = 1 + 0.5 * np.sin(2 * np.pi * minutes.hour / 24)
    path = tmp_path / "rates.csv"
    pd.DataFrame(
        {"time": minutes.strftime("%Y-%m-%d %H:%M"), "qps": rng.poisson(300 * shape) / 60}
    ).to_csv(path, index=False)
    sheet = notebook.worksheet("01_forecasting", TRACE=str(path), TRIALS=50)
    source = data.load_traffic(path)
    assert float(sheet["series"].qps.mean()) == pytest.approx(float(source.qps.mean()))
    assert 4.5 < float(sheet["target"].mean_plan_qps[0]) < 5.5
    direct = forecast.target(forecast.resample(source, "10min"), trials=50, seed=0)
    np.testing.assert_array_equal(sheet["target"].target_qps, direct.target_qps)
    # a log whose times count from 0 over 2 days: one slot without START, hours of day with it
    times = np.cumsum(rng.exponential(2.0, 86_400))
    log = _jsonl(
        tmp_path,
        "log.jsonl",
        [{"timestamp": int(t * 1000), "input_length": 5, "output_length": 1} for t in times],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", data.TraceWarning)  # simultaneous arrivals
        undated = notebook.worksheet("01_forecasting", TRACE=str(log), TRIALS=50)
        dated = notebook.worksheet("01_forecasting", TRACE=str(log), TRIALS=50,
                                   START="2024-05-13 00:00")  # fmt: skip
        # a log with a rate-like column beside its token counts: the stated kind decides
        both = tmp_path / "both.csv"
        pd.read_csv(path).assign(prompt_tokens=5).to_csv(both, index=False)
        kind = notebook.worksheet("01_forecasting", TRACE=str(both), TRIALS=50, INTERVAL="1h",
                                  TRACE_KIND="requests")  # fmt: skip
    assert undated["slots"] == ("1D", "1D")
    assert "its hours of the day are not known; set START" in undated.answer
    assert dated["slots"] == "hour_of_day" and dated["notes"] == []
    assert str(dated["series"].time.values[0]).startswith("2024-05-13")
    assert float(kind["series"].qps.mean()) == pytest.approx(1 / 60, rel=0.01)  # one per row


def test_a_trace_across_a_daylight_saving_change_counts_each_hour_once(tmp_path):
    # flat 2 requests/s over New York's fall-back: on the local wall clock 01:00-02:00 would hold
    # two hours of requests; on the zone's standard time every hour holds one
    import pandas as pd

    from capnb import forecast

    rng = np.random.default_rng(9)
    seconds = np.sort(rng.uniform(0, 3 * 86400, rng.poisson(2 * 3 * 86400)))
    start = pd.Timestamp("2024-11-02 00:00", tz="America/New_York").tz_convert("UTC")
    times = start + pd.to_timedelta(np.round(seconds * 1e6).astype(np.int64), unit="us")
    path = tmp_path / "dst.parquet"
    pd.DataFrame({"timestamp": times.tz_convert("America/New_York"), "prompt_tokens": 100,
                  "output_tokens": 10}).to_parquet(path)  # fmt: skip
    with pytest.warns(data.TraceWarning, match="daylight-saving change of America/New_York"):
        trace = data.load_trace(path)
    assert trace.attrs["timezone"] == "America/New_York standard time (UTC-05:00 all year)"
    hourly = forecast.resample(trace, "1h").qps.values[1:-1]
    assert hourly.max() < 2.3 and hourly.min() > 1.7  # no hour holds two


def test_naive_times_that_step_back_say_the_step_and_name_timezone(tmp_path):
    # found on a 2-day log of Berlin wall-clock times over the fall-back night, read without
    # timezone=: the rows were sorted and the repeated hour held 1,299 requests beside 638, with a
    # warning that said only "1 rows were earlier than the row before them"
    import pandas as pd

    rng = np.random.default_rng(2)
    seconds = np.sort(rng.uniform(0, 2 * 86400, 20_000))
    start = pd.Timestamp("2024-10-26 12:00", tz="UTC")
    local = (start + pd.to_timedelta(seconds, unit="s")).tz_convert("Europe/Berlin")
    path = tmp_path / "fall.csv"
    pd.DataFrame({"timestamp": local.strftime("%Y-%m-%d %H:%M:%S.%f"), "prompt_tokens": 100,
                  "output_tokens": 50}).to_csv(path, index=False)  # fmt: skip
    with pytest.warns(data.TraceWarning) as caught:
        data.load_trace(path)
    said = " ".join(str(w.message) for w in caught)
    assert re.search(r"1 row was earlier than the row before it .*the requests were sorted by "
                     r"time \(the largest step back: 60 minutes\)", said)  # fmt: skip
    assert "timezone=" in said and "daylight-saving" in said


def test_naive_local_times_across_a_daylight_saving_change_count_each_hour_once(tmp_path):
    # found trying a 15-minute rate series written in Berlin wall-clock time over the night the
    # clocks go back: with timezone='Europe/Berlin' the repeated 02:00-03:00 was read as the
    # same four windows twice ("the same window with different 'rps'"), and a request log's
    # 02:00 slot held two hours of requests; they are now placed as offsets would place them
    rows = [f"2024-10-27 {h:02d}:{m:02d},{v}" for h, m, v in
            [(1, 30, 1), (1, 45, 2), (2, 0, 3), (2, 15, 4), (2, 30, 5), (2, 45, 6), (2, 0, 7),
             (2, 15, 8), (2, 30, 9), (2, 45, 10), (3, 0, 11)]]  # fmt: skip
    naive = _write(tmp_path, "naive.csv", "time,qps\n" + "\n".join(rows) + "\n")
    offsets = ["+02:00"] * 6 + ["+01:00"] * 5
    stamped = [r.replace(",", f"{o},") for r, o in zip(rows, offsets, strict=True)]
    aware = _write(tmp_path, "aware.csv", "time,qps\n" + "\n".join(stamped) + "\n")
    with pytest.warns(data.TraceWarning, match="daylight-saving change of Europe/Berlin"):
        series = data.load_traffic(naive, timezone="Europe/Berlin")
    with pytest.warns(data.TraceWarning, match="daylight-saving change"):
        expected = data.load_traffic(aware, timezone="Europe/Berlin")
    assert series.sizes["time"] == 11
    np.testing.assert_array_equal(series.time.values, expected.time.values)
    np.testing.assert_array_equal(series.qps.values, np.arange(1, 12))
    # a request log: the same, row by row
    log = _write(tmp_path, "log.csv", AZURE_HEADER + "".join(f"{r[:16]}:00,1,1\n" for r in rows))
    with pytest.warns(data.TraceWarning, match="daylight-saving change"):
        trace = data.load_trace(log, timezone="Europe/Berlin")
    assert [str(t)[11:16] for t in trace.time.values][:3] == ["00:30", "00:45", "01:00"]
    assert np.all(np.diff(trace.time.values).astype(np.int64) == 15 * 60 * 10**9)
    # an hour the clock skips, and a repeated hour whose order says nothing, name the row
    skipped = _write(tmp_path, "skip.csv", AZURE_HEADER + "2024-03-31 02:30:00,1,1\n")
    with pytest.raises(ConfigError, match=r"skip.csv, row 1 .*clock skips"):
        data.load_trace(skipped, timezone="Europe/Berlin")
    unsure = _write(tmp_path, "unsure.csv", AZURE_HEADER + "2024-10-27 02:30:00,1,1\n")
    with pytest.raises(ConfigError, match=r"unsure.csv, row 1 .*repeats when it goes back"):
        data.load_trace(unsure, timezone="Europe/Berlin")


def test_times_counted_from_zero_in_ms_read_as_seconds_are_warned_about(tmp_path):
    # three days of a log counted in milliseconds from its first request: read as seconds they
    # span 8.2 years (one request every 3.6 h), which nothing flagged
    rng = np.random.default_rng(0)
    ms = np.sort(rng.choice(3 * 86_400_000, 20_000, replace=False))  # no two at one time
    path = tmp_path / "relative_ms.csv"
    pd.DataFrame({"timestamp": ms, "prompt_tokens": 5, "output_tokens": 7}).to_csv(
        path, index=False
    )
    with pytest.warns(
        data.TraceWarning,
        match=r"relative_ms\.csv, row 20000 \(line 20001\): column 'timestamp' counted in seconds "
        r"from time 0 spans 8\.21 years \(20,000 rows, one every 3\.6 h on average\); if the "
        r"times count milliseconds, pass time_unit='ms' \(a span of 3 days\)",
    ):
        data.load_trace(path, time_unit="s")
    with warnings.catch_warnings():
        warnings.simplefilter("error", data.TraceWarning)
        trace = data.load_trace(path, time_unit="ms")  # read as they are: no span warning
    assert round((_ns(trace)[-1] - _ns(trace)[0]) / 86_400e9) == 3
    # a year-long log in seconds that would read as under an hour in ms is left alone
    long = tmp_path / "long_s.csv"
    pd.DataFrame({"timestamp": np.linspace(0, 400 * 86_400 / 1000 * 0.1, 50), "prompt_tokens": 5,
                  "output_tokens": 7}).to_csv(long, index=False)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", data.TraceWarning)
        data.load_trace(long, time_unit="s")


def test_idle_nights_beside_one_busy_night_stay_idle(tmp_path):
    # 10-minute counts over 5 days, idle every night but one (a batch job ran all of one night):
    # the busy night's 600 requests a window were pooled into every other night's comparison,
    # so each idle night was "improbably empty" and marked missing (then filled from the busy
    # night); the median night is idle, so they are idle; an empty night among busy ones is
    # still a hole (the test above)
    rng = np.random.default_rng(6)
    times = pd.date_range("2024-05-13", periods=5 * 144, freq="10min")
    counts = rng.poisson(600, times.size)
    night = (times.hour < 6) | (times.hour >= 22)
    batch = (times >= "2024-05-15 22:00") & (times < "2024-05-16 06:00")
    counts = np.where(night & ~batch, 0, counts)
    pd.DataFrame({"timestamp": times.strftime("%Y-%m-%d %H:%M"), "requests": counts}).to_csv(
        tmp_path / "batch.csv", index=False
    )
    series = data.load_traffic(tmp_path / "batch.csv")
    assert series.attrs["missing_windows"] == 0
    assert int((series.qps == 0).sum()) == int((night & ~batch).sum())
    # a request log of the same service: its idle nights are idle too
    day = [0.0] * 6 + [0.2] * 16 + [0.0] * 2
    log = pd.read_csv(_diurnal_log(tmp_path, "log.csv", day, days=5))
    batch_times = pd.date_range("2024-05-15 22:00", "2024-05-16 05:59:55", freq="5s")
    extra = pd.DataFrame({"timestamp": batch_times.strftime("%Y-%m-%d %H:%M:%S.%f"),
                          "prompt_tokens": 100, "output_tokens": 10})  # fmt: skip
    both = pd.concat([log, extra])
    both.iloc[np.argsort(both.timestamp.values, kind="stable")].to_csv(
        tmp_path / "log2.csv", index=False
    )
    resampled = forecast.resample(data.load_trace(tmp_path / "log2.csv"), "1min")
    quiet = resampled.qps.sel(time=slice("2024-05-14 22:00", "2024-05-15 05:59"))
    assert quiet.size == 480 and (quiet.fillna(-1) == 0).all()


@pytest.mark.parametrize(
    ("trace", "option", "said"),
    [
        ("servegen-m-large", "prompt_column", "a request log's column"),
        ("servegen-m-large", "output_column", "a request log's column"),
        ("azure-conv-2023", "rate_column", "a rate series' column"),
        ("azure-conv-2023", "count_column", "a rate series' column"),
    ],
)
def test_a_bundled_trace_refuses_the_other_kinds_column_by_name(trace, option, said):
    # capnb plan --prompt-column p on the default trace (a bundled rate series) ended in
    # "TypeError: load_rate_series() got an unexpected keyword argument 'prompt_column'"
    from capnb.data import load_traffic
    from capnb.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"{option} = 'x' names {said}, and '{trace}' is"):
        load_traffic(trace, **{option: "x"})


def test_a_count_column_on_a_bundled_series_is_looked_up_not_called_a_second_column():
    # capnb plan --count-column n on the default trace said "give exactly one of rate_column=
    # (requests/s) or count_column= (requests)": one was given, the bundled rate column added
    with pytest.raises(ConfigError, match=r"no column 'n' \(rate/count column\); columns: \["):
        data.load_traffic("servegen-m-large", count_column="n")


def test_a_rate_column_and_a_count_column_together_are_refused(tmp_path):
    # capnb plan --rate-column qps --count-column n read 'qps' as requests/s and dropped the
    # count column without a word (5.0 requests/s); a series' values are one column or the other
    path = _write(tmp_path, "both.csv", "t,qps,n\n0,5,3000\n600,6,3600\n")
    for trace in (path, "servegen-m-large"):
        with pytest.raises(ConfigError, match=r"rate_column = 'qps' and count_column = 'n'.*one"):
            data.load_traffic(trace, time_column="t", rate_column="qps", count_column="n")


def test_a_json_lines_log_names_its_lines_past_blank_ones(tmp_path):
    # a row of a JSON-lines log was named by its index ('line 3' for the record on line 5 after
    # two blank lines), in the out-of-order warning and in every error of a row
    path = tmp_path / "log.jsonl"
    records = [
        {"timestamp": 0, "input_length": 10, "output_length": 1},
        {"timestamp": 5, "input_length": 10, "output_length": 1},
        {"timestamp": 2, "input_length": 10, "output_length": 1},
    ]
    lines = [json.dumps(r) for r in records]
    path.write_text("\n".join([lines[0], "", "", *lines[1:]]) + "\n")
    with pytest.warns(data.TraceWarning, match=r"first: log.jsonl, line 5\)"):
        data.load_trace(path, time_unit="s")
    bad = {"timestamp": 7, "input_length": -3, "output_length": 1}
    path.write_text("\n".join([lines[0], "", "", lines[1], json.dumps(bad)]) + "\n")
    with pytest.raises(ConfigError, match=r"^log.jsonl, line 5: "):
        data.load_trace(path, time_unit="s")


def _counter_csv(tmp_path, name, column, resets=()):
    """Three days of 5-minute windows, a daily cycle of 2-18 requests/s, as a running total."""
    steps = np.arange(864)
    qps = 10 + 8 * np.sin(2 * np.pi * (steps / 12 - 6) / 24)
    total = np.cumsum(qps * 300).round()
    for at in resets:  # a restarted exporter counts from 0 again
        total[at:] -= total[at - 1]
    times = pd.date_range("2026-03-02", periods=steps.size, freq="5min")
    rows = "".join(f"{t:%Y-%m-%dT%H:%M:%SZ},{n:.0f}\n" for t, n in zip(times, total, strict=True))
    return _write(tmp_path, name, f"timestamp,{column}\n{rows}")


def test_a_cumulative_counter_is_not_read_as_each_windows_requests(tmp_path):
    # a Prometheus counter exported as it is (requests since start): read as each window's
    # requests, its 3 days at a mean of 10 requests/s loaded as a mean of 4,321 requests/s
    path = _counter_csv(tmp_path, "counter.csv", "requests")
    with pytest.raises(
        ConfigError,
        match=r"counter\.csv, row 1 \(line 2\) to row 864: column 'requests' rises at 863 of its 863 steps "
        r"\(600 to 2,592,000\) and never falls: a cumulative counter.*increase\(",
    ):
        data.load_traffic(path)
    with pytest.raises(ConfigError, match=r"rises at 862 of its 863 steps .* falls once"):
        data.load_rate_series(
            _counter_csv(tmp_path, "reset.csv", "n", resets=(400,)),
            time_column="timestamp",
            count_column="n",
        )
    # a service idle from 00:00 to 08:00: its counter is flat a third of the night's steps, and
    # rising at 576 of 863 it loaded as a mean of 2,884 requests/s (the true mean 6.7)
    idle = np.where(pd.date_range("2026-03-02", periods=864, freq="5min").hour >= 8, 10.0, 0.0)
    flat = "".join(f"{t:%Y-%m-%dT%H:%M:%SZ},{n:.0f}\n" for t, n in zip(
        pd.date_range("2026-03-02", periods=864, freq="5min"), np.cumsum(idle * 300),
        strict=True))  # fmt: skip
    with pytest.raises(ConfigError, match=r"rises at 576 of its 863 steps .* never falls"):
        data.load_traffic(_write(tmp_path, "idle.csv", f"timestamp,requests\n{flat}"))
    # each window's increase reads as it is: a mean of 10 requests/s
    counts = np.diff(np.concatenate([[0.0], np.loadtxt(path, delimiter=",", skiprows=1,
                                                        usecols=1)]))  # fmt: skip
    times = pd.date_range("2026-03-02", periods=counts.size, freq="5min")
    rows = "".join(f"{t:%Y-%m-%dT%H:%M:%SZ},{n:.0f}\n" for t, n in zip(times, counts, strict=True))
    series = data.load_traffic(_write(tmp_path, "increase.csv", f"timestamp,requests\n{rows}"))
    assert float(series.qps.mean()) == pytest.approx(10.0, abs=0.01)


def test_a_running_total_reads_as_its_increases_and_a_ramp_as_given(tmp_path):
    # running_total = true: the counter of three days at a mean of 10 requests/s (with a restart)
    # reads as each window's increase, the window starting at the earlier row; false: a young
    # service's rate rising at every step of its first day (2 to 25 requests/s) reads as given
    for resets in ((), (400,)):
        path = _counter_csv(tmp_path, f"counter{len(resets)}.csv", "requests", resets=resets)
        series = data.load_traffic(path, running_total=True)
        assert series.sizes["time"] == 863 and str(series.time.values[0])[:16] == "2026-03-02T00:00"
        assert float(series.qps.mean()) == pytest.approx(10.0, abs=0.05)
        assert "running total (running_total=True)" in series.attrs["notes"]
    hours = pd.date_range("2026-03-02", periods=24, freq="1h")
    ramp = "".join(f"{t:%Y-%m-%dT%H:%M:%SZ},{2 + i}\n" for i, t in enumerate(hours))
    path = _write(tmp_path, "ramp.csv", f"timestamp,qps\n{ramp}")
    with pytest.raises(ConfigError, match=r"rises at 23 of its 23 steps .*running_total = false"):
        data.load_traffic(path)
    series = data.load_traffic(path, running_total=False)
    assert series.qps.values.tolist() == [2.0 + i for i in range(24)]
    with pytest.raises(ConfigError, match=r"running_total = true with rate_column = 'qps'"):
        data.load_rate_series(path, time_column="timestamp", rate_column="qps", running_total=True)
    with pytest.raises(InputError, match=r"running_total must be true, false or None.*'yes'"):
        data.load_rate_series(path, time_column="timestamp", rate_column="qps", running_total="yes")
    with pytest.raises(ConfigError, match=r"running_total = True is a rate series' setting"):
        data.load_traffic(_write(tmp_path, "log.csv", "timestamp,input_tokens,output_tokens\n"
                                 "2026-03-02T00:00:00Z,10,20\n"), running_total=True)  # fmt: skip
    with pytest.raises(ConfigError, match=r"running_total = True names a rate series' setting"):
        data.load_traffic("azure-code-2023", running_total=True)


def test_a_prometheus_total_column_is_not_read_as_one_request_a_row(tmp_path):
    # 'vllm:request_success_total' beside the time: before, its 864 rows loaded as 864 requests
    path = _counter_csv(tmp_path, "total.csv", "vllm:request_success_total")
    with pytest.raises(
        ConfigError, match=r"total\.csv: column 'vllm:request_success_total' looks like a rate"
    ):
        data.load_traffic(path)
    with pytest.raises(ConfigError, match=r"rises at 863 of its 863 steps"):
        data.load_traffic(path, count_column="vllm:request_success_total")


def test_a_prometheus_query_response_is_named_as_such(tmp_path):
    # the JSON of Prometheus' /api/v1/query_range: load_traffic said "no time column among [...]"
    # and load_trace "pyarrow could not read it as JSON lines (fields of mixed types?)"
    body = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"job": "vllm"}, "values": [[1772409600, "2.5"], [1772409900, "3.5"]]}]}}  # fmt: skip
    path = _write(tmp_path, "prom.json", json.dumps(body) + "\n")
    message = (
        r"prom\.json, line 1: a Prometheus query response \(resultType 'matrix', 1 series\).*"
        r"timestamp,qps.*time_unit='s'"
    )
    for load in (data.load_traffic, data.load_trace):
        with pytest.raises(ConfigError, match=message):
            load(path)
    # saved as curl | jq or a browser writes it, over several lines: load_traffic said 'line 1:
    # not valid JSON (Expecting property name ...)' and load_trace 'line 2: not a JSON object'
    pretty = _write(tmp_path, "pretty.json", json.dumps(body, indent=2) + "\n")
    for load in (data.load_traffic, data.load_trace):
        with pytest.raises(ConfigError, match=r"pretty\.json: a Prometheus query response"):
            load(pretty)
    # any other document over several lines is named as one, not as a bad line 1
    log = _write(tmp_path, "log.json", json.dumps([{"time": 1, "prompt_tokens": 5}], indent=2))
    for load in (data.load_traffic, data.load_trace):
        with pytest.raises(
            ConfigError, match=r"log\.json: a JSON array of 1 item over 6 lines, not JSON"
        ):
            load(log)
    other = _write(tmp_path, "other.json", json.dumps({"rows": [1, 2]}, indent=2))
    for load in (data.load_traffic, data.load_trace):
        with pytest.raises(ConfigError, match=r"other\.json: one JSON document over 6 lines, not"):
            load(other)
    # its samples as the message says: 2.5 and 3.5 requests/s
    rows = "".join(f"{t},{v}\n" for t, v in body["data"]["result"][0]["values"])
    series = data.load_traffic(
        _write(tmp_path, "prom.csv", "timestamp,qps\n" + rows), time_unit="s"
    )
    assert series.qps.values.tolist() == [2.5, 3.5]


def test_a_metric_exports_value_column_is_not_read_as_one_request_a_row(tmp_path):
    # Prometheus' and Grafana's exports name a sample 'value' ('Series,Time,Value' in Grafana's
    # series-as-rows CSV): 864 five-minute samples at 10 requests/s loaded as a log of 864 requests
    times = pd.date_range("2026-03-02", periods=864, freq="5min")
    rows = "".join(f"{t:%Y-%m-%dT%H:%M:%SZ},10.5\n" for t in times)
    for header in ("timestamp,value", "Time,Value"):
        path = _write(tmp_path, "export.csv", f"{header}\n{rows}")
        name = header.split(",")[1]
        with pytest.raises(ConfigError, match=rf"export\.csv: column '{name}' looks like a rate"):
            data.load_traffic(path)
        series = data.load_traffic(path, rate_column=name)
        assert float(series.qps.mean()) == 10.5


def test_a_grafana_series_per_column_export_is_not_read_as_one_request_a_row(tmp_path):
    # Grafana's 'Series joined by time' CSV: a column per series, named after it ('pod-a',
    # 'pod-b'); 864 five-minute rows at 10 requests/s in all loaded as a log of 864 requests
    times = pd.date_range("2026-03-02", periods=864, freq="5min")
    rows = "".join(f"{t:%Y-%m-%d %H:%M:%S},{4.0 + (i % 2) / 2},5.75\n" for i, t in enumerate(times))
    path = _write(tmp_path, "wide.csv", f'"Time","pod-a","pod-b"\n{rows}')
    with pytest.raises(
        ConfigError,
        match=r"wide\.csv: its 864 rows are each 300 s after the one before, as a rate series' "
        r"windows are.*'pod-a', 'pod-b'.*rate_column=.*sum them.*trace_kind = 'requests'",
    ):
        data.load_traffic(path)
    assert float(data.load_traffic(path, rate_column="pod-a").qps.mean()) == 4.25  # 4.0, 4.5
    assert data.load_traffic(path, kind="requests").sizes["request"] == 864  # as stated
    # a window the scrape missed (863 rows, one step of 600 s) is still a rate series' grid: it
    # loaded as a log of 863 requests without a word
    gap = path.read_text().splitlines()
    gapped = _write(tmp_path, "gapped.csv", "\n".join(gap[:100] + gap[101:]) + "\n")
    with pytest.raises(
        ConfigError,
        match=r"gapped\.csv: its 863 rows are each 300 s after the one before \(or a whole "
        r"number of steps: 1 window missing\), as a rate series' windows are",
    ):
        data.load_traffic(gapped)
    # a request log's arrivals are not that regular: it reads as one request a row
    uneven = "".join(f"{t + pd.Timedelta(seconds=i % 7):%Y-%m-%d %H:%M:%S},200\n"
                     for i, t in enumerate(times))  # fmt: skip
    log = _write(tmp_path, "log.csv", f"time,status\n{uneven}")
    assert data.load_traffic(log).sizes["request"] == 864
    # nor is a log with token columns, however regular its arrivals (a synthetic load)
    even = "".join(f"{t:%Y-%m-%d %H:%M:%S},900\n" for t in times)
    tokens = _write(tmp_path, "tokens.csv", f"time,prompt_tokens\n{even}")
    assert data.load_traffic(tokens).sizes["request"] == 864


def test_slots_without_a_baseline_are_named_by_weekday_and_hour_not_by_code():
    # a week of hour-of-week slots with a 6-hour outage on Saturday was refused for "6 hour of week
    # slots (130-135)", codes a reader has to decode; the rest of the forecast's words say
    # "Sat 10:00-16:00"
    times = pd.date_range("2026-01-05", periods=7 * 24 * 60, freq="1min")  # a Monday
    outage = (times.day_of_week == 5) & (times.hour >= 10) & (times.hour < 16)
    qps = np.where(outage, np.nan, 5.0 + np.sin(np.arange(times.size) / 60.0))
    series = xr.Dataset({"qps": ("time", qps)}, coords={"time": times}, attrs={"interval_s": 60})
    baseline = forecast.fit_baseline(series, slots="hour_of_week")
    with pytest.raises(InputError) as raised:
        forecast.month_inputs(series, baseline)
    assert "6 hour of week slots (Sat 10:00-16:00) have no observed interval" in str(raised.value)
    # a run across midnight, and one across the end of the period, are one stretch of time
    day, hour = times.day_of_week, times.hour
    late, early = hour >= 22, hour < 2
    gaps = (late & day.isin([2, 6])) | (early & day.isin([3, 0]))  # Wed-Thu, Sun-Mon
    qps = np.where(gaps, np.nan, 5.0)
    series = series.assign(qps=("time", qps))
    with pytest.raises(InputError) as raised:
        forecast.month_inputs(series, forecast.fit_baseline(series, slots="hour_of_week"))
    assert "8 hour of week slots (Wed 22:00-Thu 02:00, Sun 22:00-Mon 02:00) have" in str(
        raised.value
    )

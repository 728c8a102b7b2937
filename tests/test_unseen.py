"""The stored calibration scored on sources no fit ever read (capnb.latency.unseen)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capnb.data import load_measurement_runs, load_measurements
from capnb.errors import InputError
from capnb.latency import _fitted, unseen, validate

ROOT = Path(__file__).resolve().parents[1]


def test_no_unseen_source_is_among_the_fitted_ones():
    fitted = set(load_measurements().source)
    kept = set(load_measurements(unseen=True).source)
    assert kept and not kept & fitted
    # the fit's data hash reads measured/ only: the unseen files are no part of it
    assert validate.data_hash() == _fitted.stored()["data_hash"]
    runs = load_measurement_runs(unseen=True)
    assert set(runs.source) <= kept


def test_the_record_is_of_the_unseen_files_and_the_stored_calibration():
    record = unseen.stored()
    assert record is not None, "run python -m capnb.latency.unseen --write VALIDATION.md"
    assert record["data_hash"] == unseen.data_hash(), (
        "the unseen files changed: run python -m capnb.latency.unseen --write VALIDATION.md"
    )
    assert record["calibration_hash"] == unseen.calibration_hash(), (
        "the calibration was refitted: run python -m capnb.latency.unseen --write VALIDATION.md"
    )


def test_scoring_again_gives_the_record_and_the_section_is_its():
    record = unseen.stored()
    again = unseen.run()
    assert len(again["rows"]) == len(record["rows"]) > 100
    for got, want in zip(again["rows"], record["rows"], strict=True):
        assert {k: v for k, v in got.items() if k not in ("engine", "analytic")} == {
            k: v for k, v in want.items() if k not in ("engine", "analytic")
        }
        assert got["engine"] == pytest.approx(want["engine"], rel=1e-9, nan_ok=True)
        assert got["analytic"] == pytest.approx(want["analytic"], rel=1e-9, nan_ok=True)
    text = (ROOT / "VALIDATION.md").read_text(encoding="utf-8")
    assert unseen.markdown(record) in text


def test_every_unseen_figure_is_predicted():
    # every model of the unseen sources is in the catalog and every run fits its KV cache: nothing
    # skipped, every figure scored
    record = unseen.stored()
    assert record["skipped"] == []
    frame = load_measurements(unseen=True)
    latency = frame[frame.metric.isin(["ttft", "tpot", "itl", "e2e"])]
    assert len(record["rows"]) == len(latency)


def test_a_run_of_a_source_not_in_unseen_is_refused_naming_the_folder(monkeypatch, tmp_path):
    from capnb.data import _measured

    (tmp_path / "unseen").mkdir()
    header = ",".join(_measured.RUN_COLUMNS)
    row = "nowhere,vLLM,H100-SXM,1,Qwen3-14B,batch,10,100,10,10,mean" + "," * 13
    (tmp_path / "unseen_runs.csv").write_text(f"{header}\n{row}\n", encoding="utf-8")
    monkeypatch.setattr(_measured, "dataset_path", lambda *parts: tmp_path.joinpath(*parts[1:]))
    with pytest.raises(InputError, match=r"unseen_runs.csv row 2: source 'nowhere' has no file in "
                                         r"unseen/"):  # fmt: skip
        load_measurement_runs(unseen=True)

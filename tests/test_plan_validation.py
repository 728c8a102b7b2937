"""VALIDATION.md's held-out section is what the stored record renders; the record is reproducible."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from capnb.plan import validate

VALIDATION = Path(__file__).resolve().parents[1] / "VALIDATION.md"


def _section(text: str) -> str:
    start = text.index(validate.SECTION)
    rest = text[start + len(validate.SECTION) :]
    end = rest.find("\n## ")
    return validate.SECTION + (rest if end < 0 else rest[: end + 1])


def test_the_stored_section_is_what_the_stored_record_renders():
    stored = validate.stored()
    assert _section(VALIDATION.read_text(encoding="utf-8")) == validate.markdown(stored)
    # every bundled multi-day series is there, and every origin row has a budget and a choice
    assert {"servegen-m-large", "servegen-m-small", "servegen-m-mid"} <= set(stored.series)
    rows = stored[stored.origin.astype(str) != ""]
    assert (rows.budget_min > 0).all() and rows.policy.notna().all()


@pytest.mark.slow
def test_one_series_is_reproduced_from_the_plan():
    again = validate.check(["servegen-m-small"]).reset_index(drop=True)
    stored = validate.stored()
    stored = stored[stored.series == "servegen-m-small"].reset_index(drop=True)
    numbers = [c for c in again.columns if again[c].dtype.kind == "f"]
    for column in numbers:
        np.testing.assert_allclose(again[column].to_numpy(), stored[column].to_numpy(),
                                   rtol=1e-9, err_msg=column)  # fmt: skip
    for column in ("origin", "policy", "forecast"):
        pd.testing.assert_series_equal(again[column].astype(str), stored[column].astype(str))

"""capnb's data transformer writes exactly the inline values altair's default writes."""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd
import pytest
from altair.utils.data import to_values

from capnb import notebook


@pytest.fixture
def transformer():
    """Restore altair's active data transformer after the test."""
    before = alt.data_transformers.active
    yield
    alt.data_transformers.enable(before)


def _nulled(rows: list[dict]) -> list[dict]:
    # altair 6 under pandas 3 leaves a missing value of an object column as NaN (not JSON)
    return [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for row in rows
    ]


def test_plain_columns_become_python_values_with_nulls():
    table = pd.DataFrame(
        {
            "f": [1.5, np.nan, np.inf, -np.inf],
            "i": np.array([1, 2, 3, 4], dtype=np.int64),
            "b": [True, False, True, False],
            "s": pd.array(["a", None, "c", "d"], dtype="str"),
            "o": pd.Series(["w", "x", None, "z"], dtype=object),
        }
    )
    values = notebook.records(table)["values"]
    assert values == _nulled(to_values(table)["values"])
    assert values[0] == {"f": 1.5, "i": 1, "b": True, "s": "a", "o": "w"}
    assert values[1]["f"] is None and values[2]["f"] is None and values[3]["f"] is None
    assert values[1]["s"] is None and values[2]["o"] is None
    assert all(type(v["i"]) is int and type(v["b"]) is bool for v in values)


@pytest.mark.parametrize(
    "table",
    [
        pd.DataFrame({"t": pd.to_datetime(["2024-05-01T00:00", "2024-05-01T01:00"]), "x": [1, 2]}),
        pd.DataFrame({"c": pd.Categorical(["a", "b"]), "x": [1.0, 2.0]}),
        pd.DataFrame({"n": pd.array([1, None], dtype="Int64")}),
        pd.DataFrame({"mixed": [1, "a"]}),
        {"values": [{"x": 1}]},
        pd.DataFrame(index=[0, 1]),
    ],
    ids=["datetime", "categorical", "nullable-int", "mixed-object", "dict", "no-columns"],
)
def test_other_tables_get_altairs_own_values(table):
    assert notebook.records(table) == to_values(table)


def _specs(worksheet) -> dict[str, dict]:
    names = getattr(worksheet, "chart_makers", None) or worksheet.charts
    return {name: worksheet.chart(name).to_dict() for name in names}


@pytest.mark.parametrize(
    "make",
    [
        lambda: notebook.worksheet("02_memory"),
        lambda: notebook.worksheet("03_capacity"),
        lambda: notebook.worksheet("01_forecasting", TRIALS=200),
        lambda: notebook.worksheet("04_elasticity", TRACE="azure-code-2023", PER_INSTANCE_QPS=1.0),
    ],
    ids=["memory", "capacity", "forecast", "elasticity"],
)
def test_every_worksheet_chart_has_the_same_spec_either_way(make, transformer):
    worksheet = make()
    notebook.setup()
    assert alt.data_transformers.active == notebook.RENDERER
    ours = _specs(worksheet)
    alt.data_transformers.enable("default", max_rows=None)
    theirs = _specs(worksheet)
    assert ours == theirs
    # and the charts do carry data (the comparison is not between two empty specs)
    assert all(spec.get("datasets") for spec in ours.values())
    assert not any(
        isinstance(v, float) and not math.isfinite(v)
        for spec in ours.values()
        for rows in spec["datasets"].values()
        for row in rows
        for v in row.values()
    )

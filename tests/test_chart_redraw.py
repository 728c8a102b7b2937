"""A worksheet's redraw fills in the spec of a chart drawn before: the same spec altair writes out."""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import pytest

from capnb import charts, notebook
from capnb.charts import _draft

# each control changed to a value and back, as a reader would
CHANGES = {
    "02_memory": [
        ("gpu", "H200"),
        ("seq_len", 4096),
        ("tensor_parallel", 4),
        ("axis_up_to", 128),
        ("kv_dtype", "fp8"),
        ("headroom", 0.2),
        ("model", "Llama-3.1-8B"),
        ("accounting", "vllm"),
    ],
    "01_forecasting": [
        ("quantile", 0.95),
        ("exceed_probability", 0.01),
        ("bursts_per_month", 2.0),
        ("burst_multiplier", (3.0, 6.0)),
        ("burst_hours", (1.0, 3.0)),
    ],
    "03_capacity": [
        ("sla", 0.3),
        ("target_qps", 2.0),
        ("buffer", 0),
        ("metric", "tpot"),
        ("gpu", "A10G"),
        ("curve", "dstack-vllm-mi300x-long"),
    ],
    # the cheap controls, and one new cold start (the policy sweep runs again: new tables, new
    # values in the same shapes)
    "04_elasticity": [
        ("cold_start_s", 30.0),
        ("policy", "knative"),
        ("scale_up_threshold", 0.8),
        ("cooldown_s", 900.0),
        ("min_instances", 6),
        ("buffer_instances", 2),
        ("breach_budget", 0.01),
        ("policy", "fixed"),
    ],
}
# charts a notebook draws with altair itself (no capnb chart function): never drafts
NOTEBOOK_CHARTS: dict[str, set[str]] = {}


def _full(ws, name) -> dict:
    """The spec as the worksheet wrote it out before drafts: the altair chart built and written."""
    with charts.quick_build():
        return charts.written(ws.charts[name].draw(ws.results, ws.inputs))


def _drafted(ws, name) -> tuple[object, dict]:
    with charts.quick_build():
        with charts.drafting():
            drawn = ws.charts[name].draw(ws.results, ws.inputs)
        return drawn, charts.written(drawn)


@pytest.mark.parametrize("path", sorted(CHANGES))
def test_every_chart_drawn_again_is_the_spec_altair_writes(path):
    notebook.setup()
    ws = notebook.worksheet(path, **({"TRIALS": 200} if path == "01_forecasting" else {}))
    own = NOTEBOOK_CHARTS.get(path, set())
    assert own <= set(ws.charts)
    filled = dict.fromkeys(set(ws.charts) - own, 0)  # drawings filled in from a kept template

    def check(when):
        for name in ws.charts:
            drawn, spec = _drafted(ws, name)
            full = _full(ws, name)
            # identical, down to the order of keys (the HTML output is this spec as JSON)
            assert json.dumps(spec) == json.dumps(full), (when, name)
            if isinstance(drawn, charts.Draft):
                filled[name] += _draft._TEMPLATES.get(drawn._key()) is not None
            else:
                assert name in own, (when, name)

    check("first")
    for control, value in CHANGES[path]:
        before = ws.inputs[control]
        ws.set(**{control: value})
        check(f"{control}={value}")
        ws.set(**{control: before})
        check(f"{control}={before}")
    # every capnb chart came as a draft, and was filled in from its template each time
    assert all(n == 1 + 2 * len(CHANGES[path]) for n in filled.values()), filled


def test_a_worksheet_draws_drafts_and_still_hands_out_altair_charts():
    notebook.setup()
    ws = notebook.worksheet("02_memory")
    drawing = ws.drawing("breakdown")
    assert isinstance(drawing._chart, charts.Draft)
    assert isinstance(drawing.chart, alt.LayerChart)  # built when asked for
    assert drawing.to_dict()["datasets"]  # validated, as before
    assert isinstance(ws.chart("heatmap"), alt.LayerChart)
    html = drawing._repr_mimebundle_()["text/html"]
    assert "vegaEmbed" in html


def test_a_drawing_that_composes_a_capnb_chart_is_drawn_without_drafts():
    notebook.setup()
    ws = notebook.worksheet("02_memory")

    def composed(results, inputs):  # altair's own function, handed what a capnb chart returns
        return alt.vconcat(charts.memory_breakdown(results["result"]))

    ws.charts["composed"] = type(ws.charts["breakdown"])(composed)
    drawing = ws.drawing("composed")
    assert isinstance(drawing.chart, alt.VConcatChart)
    assert drawing._repr_mimebundle_()["text/html"]


def _layers(table, *, title, shape_mark="point"):
    return alt.layer(alt.Chart(table).mark_point(shape=shape_mark).encode(x="a:Q"), title=title)


def _spec_of(build, tables, values, shape=None):
    with charts.drafting():
        drawn = _draft.draft(build, tables=tables, values=values, shape=shape)
    return drawn, drawn.spec()


def test_a_new_shape_takes_the_full_path_and_then_has_its_own_template():
    _draft._TEMPLATES.clear()
    table = pd.DataFrame({"a": [1.0, 2.0]})
    first, spec = _spec_of(_layers, {"table": table}, {"title": "one"}, {"shape_mark": "circle"})
    assert spec == first.chart().to_dict(validate=False, context={"pre_transform": False})
    other, spec = _spec_of(
        _layers, {"table": table * 2}, {"title": "two"}, {"shape_mark": "square"}
    )
    assert other._key() != first._key() and len(_draft._TEMPLATES) == 2
    assert spec["layer"][0]["mark"]["shape"] == "square" and spec["title"] == "two"
    again, spec = _spec_of(_layers, {"table": table * 3}, {"title": "3"}, {"shape_mark": "square"})
    assert again._key() == other._key() and len(_draft._TEMPLATES) == 2
    assert spec == again.chart().to_dict(validate=False, context={"pre_transform": False})


def _titled(table, *, title):
    return alt.Chart(table).mark_point().encode(x="a:Q").properties(title=f"about {title}")


def _own_data(table, *, title):
    extra = alt.Chart(pd.DataFrame({"a": [len(table)]})).mark_rule().encode(x="a:Q")
    return alt.layer(alt.Chart(table).mark_point().encode(x="a:Q"), extra, title=title)


def _two(one, two, *, title):
    return alt.layer(alt.Chart(one).mark_point(), alt.Chart(two).mark_line(), title=title)


@pytest.mark.parametrize(
    ("build", "tables", "kept"),
    [
        (_titled, {"table": pd.DataFrame({"a": [1.0]})}, True),  # a value inside a string
        (_own_data, {"table": pd.DataFrame({"a": [1.0]})}, True),  # data the build made
        (_two, {"one": pd.DataFrame({"a": [1.0]}), "two": pd.DataFrame({"a": [1.0]})}, False),
    ],
    ids=["value-in-a-string", "own-data", "same-values"],
)
def test_a_spec_that_does_not_check_out_is_written_the_full_way(build, tables, kept):
    _draft._TEMPLATES.clear()
    for title in ("first", "second"):
        drawn, spec = _spec_of(build, tables, {"title": title})
        assert spec == drawn.chart().to_dict(validate=False, context={"pre_transform": False})
        assert _draft._TEMPLATES.get(drawn._key()) is None
        assert (drawn._key() in _draft._TEMPLATES) == kept  # a refusal remembered, unless by data


def test_outside_a_worksheet_chart_functions_return_altair_charts():
    notebook.setup()
    ws = notebook.worksheet("02_memory")
    chart = charts.memory_breakdown(ws["result"])
    assert isinstance(chart, alt.LayerChart) and chart.to_dict()["title"].startswith("Llama")


@pytest.fixture(scope="module")
def small_sweep():
    from capnb import data, elasticity

    burst = elasticity.resample_demand(data.load_trace("azure-code-2023"), 1)
    return elasticity.sweep(burst, per_instance_qps=2, policy=["hpa", "fixed"], cold_start_s=60,
                            min_instances=[1, 4, 8], gpu="L4")  # fmt: skip


@pytest.mark.parametrize(
    "kwargs",
    [
        {"chosen": {"policy": "fixed", "min_instances": 8}, "breach_budget": 0.001},
        # the same run ringed twice; a selection of several runs (labelled at its first)
        {"chosen": {"policy": "fixed", "min_instances": 8}, "recommended": {"policy": "fixed"}},
        {"chosen": {"policy": "hpa"}, "recommended": {"policy": "hpa"}, "cost": "gpu_hours"},
        {"chosen": {"policy": "none of them"}, "breach_budget": 0.05},
    ],
    ids=["budget", "several-rows", "same-picks", "no-rows"],
)
def test_the_pareto_chart_drawn_again_is_the_spec_altair_writes(small_sweep, kwargs):
    for _ in range(2):  # the template written, then filled in
        with charts.quick_build():
            with charts.drafting():
                drawn = charts.elasticity_pareto(small_sweep, **kwargs)
            assert json.dumps(charts.written(drawn)) == json.dumps(charts.written(drawn.chart()))
    assert _draft._TEMPLATES.get(drawn._key()) is not None


def test_what_a_chart_worked_out_is_kept_only_while_its_input_lives_unchanged(small_sweep):
    import gc

    from capnb.memo import Kept

    kept, calls = Kept(), []

    def make():
        calls.append(1)
        return len(calls)

    one = small_sweep.copy()
    assert kept.get(one, "k", make) == kept.get(one, "k", make) == 1
    assert kept.get(one, "other", make) == 2 and kept.get(one, ["unhashable"], make) == 3
    one["usd"] = one.usd * 2  # a variable replaced: worked out again
    assert kept.get(one, "k", make) == 4 and kept.get(one, "k", make) == 4
    one.attrs["gpu"] = "H200"  # an attribute replaced: worked out again
    assert kept.get(one, "k", make) == 5 and kept.get(one, "k", make) == 5
    # the entry goes with its object: a new object (perhaps at the same address) starts afresh
    del one
    gc.collect()
    assert not kept._entries
    assert kept.get(small_sweep.copy(), "k", make) == 6
    gc.collect()
    assert not kept._entries


def test_a_chart_of_a_changed_sweep_shows_the_change(small_sweep):
    chart = charts.elasticity_pareto(small_sweep)
    changed = small_sweep.copy()
    assert json.dumps(charts.elasticity_pareto(changed).to_dict()) == json.dumps(chart.to_dict())
    changed["usd"] = changed.usd * 2
    doubled = charts.elasticity_pareto(changed).to_dict()
    first = next(iter(doubled["datasets"].values()))[0]
    assert first["usd"] == 2 * float(small_sweep.usd.values.ravel()[0])


def test_a_kept_table_is_written_out_once_while_it_lives():
    import gc

    table = pd.DataFrame({"a": [1.0, 2.0]})
    name, values = _draft._dataset(table)
    assert _draft._dataset(table)[1] is values  # the same table again: not written again
    other = pd.DataFrame({"a": [1.0, 3.0]})
    assert _draft._dataset(other)[0] != name  # another table: its own values and name
    assert _draft._dataset(table.copy())[0] == name  # the same values: the same digest
    del table, other
    gc.collect()
    assert all(entry[0]() is not None for entry in _draft._DATASETS._entries.values())

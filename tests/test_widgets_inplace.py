"""A worksheet's charts drawn again: the same chart with new data keeps its shape; altair unchanged."""

import json

import pytest

from capnb import notebook
from capnb.widgets import _base


@pytest.fixture(scope="module")
def memory():
    notebook.setup()
    return notebook.worksheet("02_memory")


def _spec(ws, name):
    drawing = ws._drawing(name, "key")
    return drawing.chart.to_dict(validate=False, context={"pre_transform": False})


def test_new_data_keeps_the_shape_and_names_datasets_by_position(memory):
    before = notebook._named_datasets(_spec(memory, "breakdown"))
    memory.set(gpu="H200")
    try:
        after = notebook._named_datasets(_spec(memory, "breakdown"))
    finally:
        memory.set(gpu="H100-SXM")
    spec, datasets, signals, shape = after
    assert shape == before[3]  # same chart, new data: the same shape
    assert list(datasets) == [f"capnb-data-{i}" for i in range(len(datasets))]
    assert datasets != before[1]
    # the title carries the GPU: a param's value, not part of the shape
    assert any("H200" in str(v) for v in signals.values())
    assert "H200" not in shape and "H200" in json.dumps(spec)
    assert {"name": "capnb_title_0"} in json.loads(shape)["params"]


def test_a_new_structure_is_a_new_shape():
    point = {"mark": "point", "data": {"values": [{"a": 1}]}, "encoding": {"x": {"field": "a"}}}
    line = {**point, "mark": "line"}
    assert notebook._named_datasets(point)[3] != notebook._named_datasets(line)[3]


def test_param_values_and_titles_are_lifted():
    spec = {
        "params": [
            {"name": "sla", "value": 2.0, "bind": {"input": "range"}},
            {"name": "pick", "select": "point", "value": [{"x": 1}]},
        ],
        "title": {"text": "2 x H100", "anchor": "start"},
        "layer": [{"mark": "rule", "title": ["a", "b"]}],
    }
    spec_out, _, signals, shape = notebook._named_datasets(spec)
    assert signals == {"sla": 2.0, "capnb_title_0": "2 x H100", "capnb_title_1": ["a", "b"]}
    assert spec_out["title"] == {"text": {"expr": "capnb_title_0"}, "anchor": "start"}
    form = json.loads(shape)
    assert "value" not in form["params"][0]  # a variable param's value is not shape
    assert form["params"][1]["value"] == [{"x": 1}]  # a selection's is


def test_numeric_scale_domains_are_lifted_and_shared_between_layers():
    def layered(domain):
        y = {"field": "y", "type": "quantitative", "scale": {"domain": domain, "type": "log"}}
        colour = {"field": "c", "type": "nominal", "scale": {"domain": ["a", "b"]}}
        return {
            "layer": [
                {"mark": "line", "encoding": {"y": y, "color": colour}},
                {"mark": "rule", "encoding": {"y": {**y, "scale": {"domain": [0, 1]}}}},
            ]
        }

    spec, _, signals, shape = notebook._named_datasets(layered([1.5, 30]))
    assert signals == {"capnb_domain_0": [1.5, 30], "capnb_domain_1": [0, 1]}
    line = spec["layer"][0]["encoding"]
    assert line["y"]["scale"] == {"domain": {"expr": "capnb_domain_0"}, "type": "log"}
    assert line["color"]["scale"] == {"domain": ["a", "b"]}  # categories are the chart's shape
    other = notebook._named_datasets(layered([2.5, 40]))
    assert other[3] == shape and other[2]["capnb_domain_0"] == [2.5, 40]
    # layers that share a domain share its param
    same = notebook._named_datasets(layered([0, 1]))[2]
    assert same == {"capnb_domain_0": [0, 1]}


def test_chart_html_keeps_views_only_with_a_key():
    spec = {"mark": "point", "datasets": {"data-abc": [{"a": 1}]}, "data": {"name": "data-abc"}}
    plain = notebook.chart_html(spec)
    keyed = notebook.chart_html(spec, key="k1")
    assert "capnbViews" not in plain and '"data-abc"' in plain
    assert "capnbViews" in keyed and '"capnb-data-0"' in keyed
    # the digest name only in the map the page uses to skip the datasets its view holds already
    assert keyed.count("data-abc") == 1 and 'var digests = {"capnb-data-0": "data-abc"}' in keyed
    assert 'class="capnb-chart"' in keyed and "capnbVegaQueue" in keyed


def _tables(html: str) -> list:
    """The datasets of a keyed chart's HTML, as the page parses them (JSON, strictly)."""
    parts = html.split('<script type="application/json"')[1:]
    return [json.loads(p.split(">", 1)[1].split("</script>", 1)[0]) for p in parts]


def test_a_keyed_chart_s_tables_are_strict_json_that_no_text_can_end():
    values = [{"a": float("nan"), "b": "</script><b>", "c": float("inf")}, {"a": 1.5}]
    spec = {"mark": "point", "datasets": {"data-x": values}, "data": {"name": "data-x"}}
    html = notebook.chart_html(spec, key="k2")
    assert html.count("</script>") == 2  # the table's element and the script's: nothing in between
    assert _tables(html) == [[{"a": None, "b": "</script><b>", "c": None}, {"a": 1.5}]]


def test_a_table_named_by_its_digest_is_written_out_once():
    from altair.vegalite.v6.api import _dataset_name

    values = [{"x": i, "y": i * i} for i in range(50)]
    name = _dataset_name(values)
    spec = {"mark": "point", "datasets": {name: values}, "data": {"name": name}}
    first = notebook.chart_html(spec, key="k3")
    assert notebook._TEXTS[name] and _tables(first) == [values]
    notebook._TEXTS[name] = notebook._TEXTS[name].replace('"y": 0', '"y": -1')  # marked
    assert _tables(notebook.chart_html(spec, key="k3"))[0][0] == {"x": 0, "y": -1}
    other = {"mark": "point", "datasets": {"data-abc": values}, "data": {"name": "data-abc"}}
    assert _tables(notebook.chart_html(other, key="k3")) == [values]  # not a digest: written out
    del notebook._TEXTS[name]


def test_show_draws_with_a_key_and_full_redraw_without(memory, monkeypatch):
    drawn = []

    class Handle:
        def update(self, drawing):
            drawn.append(drawing)

    def display(drawing, display_id=False):
        drawn.append(drawing)
        return Handle()

    monkeypatch.setattr("IPython.display.display", display)
    memory.show("breakdown")
    memory.set(seq_len=4096)
    assert len(drawn) == 2 and drawn[0].key and drawn[0].key == drawn[1].key
    html = drawn[1]._repr_mimebundle_()["text/html"]
    assert f'"{drawn[0].key}"' in html and "capnbViews" in html
    monkeypatch.setenv("CAPNB_REDRAW", "full")
    memory.set(seq_len=8192)
    assert drawn[2].key is None
    assert "capnbViews" not in drawn[2]._repr_mimebundle_()["text/html"]


@pytest.mark.parametrize("name", ["breakdown", "heatmap"])
def test_a_quick_build_draws_the_same_chart(memory, name):
    from capnb.charts._altair import quick_build

    checked = notebook._named_datasets(memory.chart(name).to_dict())
    with quick_build():
        quick = memory.charts[name].draw(memory.results, memory.inputs)
    assert notebook._named_datasets(quick.to_dict()) == checked
    with quick_build():  # written out as a worksheet writes it: its copies made inside too
        quick = memory.charts[name].draw(memory.results, memory.inputs)
        written = quick.to_dict(validate=False)
    assert notebook._named_datasets(written) == checked


@pytest.mark.parametrize("path", ["01_forecasting", "03_capacity", "04_elasticity"])
def test_every_chart_of_a_worksheet_is_the_same_built_quickly(path):
    """altair's copies and channel conversions done the quick way give the same specs (issue 16)."""
    from altair.utils import schemapi

    from capnb.charts._altair import quick_build

    ws = notebook.worksheet(path)
    for name in ws.charts:
        checked = notebook._named_datasets(ws.chart(name).to_dict())
        with quick_build():
            assert schemapi._deep_copy.capnb_copies_less
            assert schemapi._FromDict.capnb_converts_once
            written = ws.charts[name].draw(ws.results, ws.inputs).to_dict(validate=False)
        assert notebook._named_datasets(written) == checked, name
    assert not hasattr(schemapi._deep_copy, "capnb_copies_less")
    assert isinstance(schemapi._FromDict, type)


def test_a_quick_build_leaves_altair_as_it_was_and_still_refuses_bad_specs():
    import altair as alt
    import jsonschema
    from altair.utils import schemapi

    from capnb.charts._altair import quick_build

    validate, naming, debug, copy, converter = (
        schemapi.validate_jsonschema,
        alt.Chart._compute_hash,
        schemapi.DEBUG_MODE,
        schemapi._deep_copy,
        schemapi._FromDict,
    )
    bad = {"field": "a", "type": "no such type"}
    for _ in range(2):  # the second verdict is remembered, and still an error
        with quick_build(), pytest.raises(jsonschema.ValidationError):
            alt.X.validate(bad)
    with quick_build():
        alt.X.validate({"field": "a", "type": "quantitative"})
        alt.X.validate({"field": "a", "type": "quantitative"})
    assert schemapi.validate_jsonschema is validate
    assert alt.Chart._compute_hash is naming and schemapi.DEBUG_MODE is debug
    assert schemapi._deep_copy is copy and schemapi._FromDict is converter


def test_worksheet_chart_keeps_altair_checks(memory):
    from altair.utils import schemapi

    assert schemapi.DEBUG_MODE
    memory.chart("breakdown")
    assert schemapi.DEBUG_MODE and not _base._full_redraw()


def test_a_staged_step_shows_each_stage_as_it_comes():
    """A step that yields a quick stage: its charts redraw before the slow stage runs (issue 16)."""
    import ipywidgets as widgets

    from capnb.errors import InputError

    seen = []  # (what was drawn, the answer then), in order
    box = {}

    class Handle:
        def __init__(self, name):
            self.name = name

        def update(self, drawing):
            seen.append((self.name, ws.answer))

    def step(x):
        yield {"quick": x}
        if x == 3:
            raise InputError("no 3")
        if "ws" in box:  # the answer shown while the slow stage runs
            seen.append(("slow stage ran", box["ws"].answer_widget.value))
        yield {"quick": x, "slow": 2 * x}

    def answer(results, inputs):
        return f"slow {results['slow']}" if "slow" in results else "slow pending"

    charts = {
        "quick": _base.Chart(lambda r, i: r["quick"], ("quick",)),
        "slow": _base.Chart(lambda r, i: r["slow"], ("slow",)),
    }
    ws = box["ws"] = _base.Worksheet(
        step, {"x": widgets.IntSlider(1)}, charts=charts, answer=answer
    )
    for name in charts:
        ws.attach(name, Handle(name))
    ws.controls["x"].value = 2
    assert seen == [
        ("quick", "slow pending"),
        ("slow stage ran", "<b>slow pending</b>"),
        ("slow", "slow 4"),
    ]
    assert ws.results == {"quick": 2, "slow": 4} and ws.last_redrawn == ["quick", "slow"]
    ws.controls["x"].value = 3  # a later stage fails: the last results that worked are kept
    assert ws.error == "no 3" and ws.results == {"quick": 2, "slow": 4}
    assert ws.answer_widget.value == "<b>Not computed: no 3</b>"


def test_a_new_result_that_draws_the_same_picture_is_not_sent_again():
    """A chart whose inputs changed is drawn again, and sent only when its spec changed."""
    import altair as alt
    import ipywidgets as widgets
    import pandas as pd

    sent = []

    class Handle:
        def update(self, drawing):
            sent.append(drawing.spec)

    def step(x):  # a new table on every change; its values only follow x // 2
        return {"table": pd.DataFrame({"a": [0, 1], "b": [x // 2, 1]})}

    def draw(results, inputs):
        return alt.Chart(results["table"]).mark_point().encode(x="a:Q", y="b:Q")

    ws = _base.Worksheet(
        step, {"x": widgets.IntSlider(2)}, charts={"c": _base.Chart(draw, ("table",))}
    )
    ws.attach("c", Handle())
    ws.set(x=4)  # new values: sent
    assert ws.last_redrawn == ["c"] and len(sent) == 1
    ws.set(x=5)  # a new table with the same values: drawn, not sent
    assert ws.last_redrawn == [] and len(sent) == 1
    ws.set(x=2)
    assert ws.last_redrawn == ["c"] and len(sent) == 2 and sent[0] != sent[1]


def test_the_answer_view_follows_the_controls_and_reads_as_its_sentence():
    """The answer a worksheet shows below its charts is a view of the panel's answer: after a
    control changes it describes the same run as the charts (a printed sentence did not)."""
    import ipywidgets as widgets

    from capnb.widgets import Worksheet

    ws = Worksheet(
        lambda n: {"square": n * n},
        controls={"n": widgets.IntSlider(3, min=1, max=9)},
        answer=lambda results, inputs: f"{inputs['n']} squared is {results['square']}",
    )
    view = ws.answer_view()
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == "3 squared is 9"
    model = bundle["application/vnd.jupyter.widget-view+json"]["model_id"]
    ws.controls["n"].value = 4
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == "4 squared is 16" == str(view)
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == model
    assert "4 squared is 16" in ws.answer_widget.value

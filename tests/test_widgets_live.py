"""A live page's charts: new data as a widget message to the kept view, the outputs once at rest."""

import asyncio

import altair as alt
import ipywidgets as widgets
import pandas as pd
import pytest

from capnb import notebook
from capnb.widgets import _base


class Handle:
    def __init__(self):
        self.outputs = []

    def update(self, drawing):
        self.outputs.append(drawing.spec)


@pytest.fixture
def ws():
    """A worksheet whose chart keeps its shape below x = 8 (points) and from 8 on (a line)."""

    def step(x):
        return {"table": pd.DataFrame({"a": [0, 1], "b": [x, 1]}), "x": x}

    def draw(results, inputs):
        base = alt.Chart(results["table"]).encode(x="a:Q", y="b:Q")
        return base.mark_point() if results["x"] < 8 else base.mark_line()

    sheet = _base.Worksheet(
        step, {"x": widgets.IntSlider(2, max=20)}, charts={"c": _base.Chart(draw, ("table",))}
    )
    sheet.handle = Handle()
    sheet.attach("c", sheet.handle)
    sheet.messages = []
    sheet.live.draw = sheet.messages.append  # what would go to the page
    sheet.rest_s = 0.05
    return sheet


def test_no_page_no_message(ws):
    ws.set(x=3)
    ws.set(x=4)
    assert ws.messages == [] and len(ws.handle.outputs) == 2


def test_a_live_page_gets_the_new_data_and_the_output_follows_at_rest(ws):
    async def changes():
        ws.set(x=3)  # the first drawing the worksheet sends is an output
        ws.live._received(ws.live, {"here": True}, [])
        ws.set(x=4)
        assert len(ws.handle.outputs) == 1 and len(ws.messages) == 1
        (update,) = ws.messages[0]
        held = notebook.chart_update(ws.handle.outputs[0], ws._keys["c"])
        assert update["shape"] == held["shape"] and update["digests"] != held["digests"]
        assert update["key"] == ws._keys["c"] and ws.last_redrawn == ["c"]
        # only the new table goes: one dataset, its values
        assert list(update["tables"].values()) == ['[{"a": 0, "b": 4}, {"a": 1, "b": 1}]']
        ws.set(x=5)
        assert len(ws.handle.outputs) == 1 and len(ws.messages) == 2
        await asyncio.sleep(ws.rest_s * 4)  # at rest: the output shows what the page shows
        assert len(ws.handle.outputs) == 2 and ws.handle.outputs[-1] == ws._shown["c"]
        assert ws._stale == {}

    asyncio.run(changes())


def test_a_new_shape_is_a_new_output(ws):
    async def changes():
        ws.set(x=3)
        ws.live._received(ws.live, {"here": True}, [])
        ws.set(x=9)  # a line: a new shape the kept view cannot take
        assert ws.messages == [] and len(ws.handle.outputs) == 2
        ws.set(x=10)  # the line again, new data: a message
        assert len(ws.messages) == 1 and len(ws.handle.outputs) == 2

    asyncio.run(changes())


def test_what_the_page_could_not_draw_is_drawn_as_an_output(ws):
    async def changes():
        ws.set(x=3)
        ws.live._received(ws.live, {"here": True}, [])
        ws.set(x=4)
        assert len(ws.handle.outputs) == 1
        ws.live._received(ws.live, {"missed": [ws._keys["c"]]}, [])  # a reloaded page, say
        assert len(ws.handle.outputs) == 2 and ws._stale == {}
        ws.set(x=5)  # what the page holds is the output's: its shape, its tables
        assert len(ws.messages) == 2 and len(ws.handle.outputs) == 2

    asyncio.run(changes())


def test_without_an_event_loop_the_output_follows_at_once(ws):
    ws.set(x=3)
    ws.live._received(ws.live, {"here": True}, [])
    ws.set(x=4)
    assert len(ws.messages) == 1 and len(ws.handle.outputs) == 2


def test_capnb_redraw_output_draws_outputs_in_a_live_page(ws, monkeypatch):
    monkeypatch.setenv("CAPNB_REDRAW", "output")
    ws.set(x=3)
    ws.live._received(ws.live, {"here": True}, [])
    ws.set(x=4)
    assert ws.messages == [] and len(ws.handle.outputs) == 2

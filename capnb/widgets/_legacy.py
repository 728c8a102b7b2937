"""The former worksheet base class, kept only until every worksheet runs its step calls in view."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import ipywidgets as widgets

from ..errors import InputError

__all__ = ["Drawing", "Worksheet", "dropdown", "slider_style"]


class Drawing:
    """A chart as a worksheet displays it: rendered by altair's active renderer, not re-validated.

    altair validates a spec against the vega-lite schema every time it is displayed, which costs as
    much as building the chart. A worksheet redraws the same tested chart functions on every change
    (the test suite validates each of them through ``to_dict()``), so its drawings skip that step.
    ``to_dict()`` still validates.
    """

    def __init__(self, chart):
        self.chart = chart

    def to_dict(self, *args, **kwargs) -> dict:
        """The chart's vega-lite spec (validated, as ``alt.Chart.to_dict``)."""
        return self.chart.to_dict(*args, **kwargs)

    def _repr_mimebundle_(self, include=None, exclude=None):
        import altair as alt

        spec = self.chart.to_dict(validate=False, context={"pre_transform": False})
        renderer = alt.renderers.get()
        return renderer(spec) if renderer else {}


def _same(a: tuple | None, b: tuple | None) -> bool:
    # results compare by identity (a new object is a new result), settings by value
    if a is None or b is None or len(a) != len(b):
        return False
    return all(
        x is y or (not hasattr(x, "shape") and not hasattr(x, "dims") and x == y)
        for x, y in zip(a, b, strict=True)
    )


class Worksheet:
    """Base of the step worksheets: controls, ``inputs``, ``result``, charts that update in place."""

    #: chart name -> function(worksheet) -> alt.Chart; filled by subclasses
    chart_makers: ClassVar[Mapping[str, Callable]] = {}
    #: chart name -> function(worksheet) -> what the chart shows (results, by identity, and
    #: settings, by value): a displayed chart is redrawn only when this changes. Charts without an
    #: entry are redrawn on every change.
    chart_keys: ClassVar[Mapping[str, Callable]] = {}

    def __init__(self, controls: dict[str, widgets.ValueWidget]):
        self.controls = controls
        self._handles: dict[str, object] = {}
        self._drawn: dict[str, tuple | None] = {}
        self.last_redrawn: list[str] = []
        self._holding = False
        self.answer_widget = widgets.HTML()
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.panel = widgets.VBox([*controls.values(), self.answer_widget])
        self.update()

    @property
    def inputs(self) -> dict[str, object]:
        """Current value of every control."""
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values: object) -> Worksheet:
        """Set several controls, then recompute once (as a user would, one change at a time)."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise InputError(
                f"unknown worksheet input(s) {sorted(unknown)}; known: {sorted(self.controls)}"
            )
        self._holding = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        self.update()
        return self

    def _on_change(self, change) -> None:
        if not self._holding:
            self.update()

    def update(self) -> None:
        """Recompute the result from the controls and refresh the answer and displayed charts."""
        self.compute()
        self.answer_widget.value = f"<b>{self.answer}</b>"
        self.last_redrawn = self.redraw()

    def redraw(self) -> list[str]:
        """Redraw the displayed charts whose content changed; returns their names."""
        redrawn = []
        for name, handle in self._handles.items():
            key = self._key(name)
            if _same(key, self._drawn.get(name)):
                continue
            handle.update(self.drawing(name))
            self._drawn[name] = key
            redrawn.append(name)
        return redrawn

    def _key(self, name: str) -> tuple | None:
        maker = self.chart_keys.get(name)
        return tuple(maker(self)) if maker is not None else None

    def compute(self) -> None:  # pragma: no cover - subclasses define it
        """Recompute ``self.result`` from ``self.inputs`` through the step module."""
        raise NotImplementedError

    @property
    def answer(self) -> str:  # pragma: no cover - subclasses define it
        """The answer for the current inputs, in one plain sentence with its numbers."""
        raise NotImplementedError

    def chart(self, name: str):
        """The named chart (an ``alt.Chart``) for the current result."""
        if name not in self.chart_makers:
            raise InputError(
                f"unknown chart {name!r}; this worksheet draws {sorted(self.chart_makers)}"
            )
        return self.chart_makers[name](self)

    def drawing(self, name: str) -> Drawing:
        """The named chart as it is displayed (see :class:`Drawing`)."""
        return Drawing(self.chart(name))

    def show(self, name: str):
        """Display the named chart as a cell output that follows every later change of the controls."""
        from IPython.display import display

        self.attach(name, display(self.drawing(name), display_id=True))

    def attach(self, name: str, handle) -> None:
        """Keep the named chart drawn on ``handle`` (anything with ``update(drawing)``)."""
        if name not in self.chart_makers:
            raise InputError(
                f"unknown chart {name!r}; this worksheet draws {sorted(self.chart_makers)}"
            )
        self._handles[name] = handle
        self._drawn[name] = self._key(name)

    def record(self) -> str:
        """The inputs as plain text (what a static report shows in place of the controls)."""
        return "Inputs: " + ", ".join(f"{k} = {v}" for k, v in self.inputs.items())

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = self.record()
        return bundle


def dropdown(description: str, options, value) -> widgets.Dropdown:
    """A dropdown with the label style every worksheet uses."""
    return widgets.Dropdown(
        description=description,
        options=options,
        value=value,
        style={"description_width": "initial"},
    )


#: Keyword arguments of sliders that start a kernel: recompute on release, not on every pixel.
slider_style = {"continuous_update": False, "style": {"description_width": "initial"}}

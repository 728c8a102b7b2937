"""The worksheet base class: controls, inputs, result, and charts that update in place."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import ipywidgets as widgets

from ..errors import InputError

__all__ = ["Worksheet", "dropdown", "slider_style"]


class Worksheet:
    """Base of the step worksheets: controls, ``inputs``, ``result``, charts that update in place."""

    #: chart name -> function(worksheet) -> alt.Chart; filled by subclasses
    chart_makers: ClassVar[Mapping[str, Callable]] = {}

    def __init__(self, controls: dict[str, widgets.ValueWidget]):
        self.controls = controls
        self._handles: dict[str, object] = {}
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
        for name, handle in self._handles.items():
            handle.update(self.chart(name))

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

    def show(self, name: str):
        """Display the named chart as a cell output that follows every later change of the controls."""
        from IPython.display import display

        self._handles[name] = display(self.chart(name), display_id=True)

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

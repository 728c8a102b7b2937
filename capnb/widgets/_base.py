"""A worksheet: controls that re-run a visible step function, its answer, and charts that follow.

The step calls live in the notebook, in a function a researcher reads and edits (``compute``); this
module only wires controls to it: when a control changes, the function runs again with the
controls' values, the answer is re-read and the charts whose content changed are redrawn in place.
Nothing here computes or decides anything about capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import html
import itertools
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import ipywidgets as widgets

from ..errors import CapnbError, InputError
from ._live import LiveCharts

__all__ = ["Chart", "Drawing", "Worksheet", "dropdown", "kept", "slider_style"]


class Drawing:
    """A chart as a worksheet displays it: rendered by altair's active renderer, not re-validated.

    altair validates a spec against the vega-lite schema every time it is displayed, which costs as
    much as building the chart. A worksheet redraws the same tested chart functions on every change
    (the test suite validates each of them through ``to_dict()``), so its drawings skip that step.
    ``to_dict()`` still validates.

    ``chart`` may come as a draft (:mod:`capnb.charts._draft`: a capnb chart's data, its altair chart
    not built yet): its spec is then filled into the one written out for the last drawing of the
    same shape, and the altair chart is built only when asked for (``drawing.chart``).

    ``key`` names the place the chart is displayed (one per display of a worksheet's chart): with
    capnb's offline renderer, a chart drawn again under the same key with the same spec apart from
    its data keeps its vega view in the page and only swaps the data (see
    :func:`capnb.notebook.chart_html`).
    """

    def __init__(self, chart, key: str | None = None):
        self._chart = chart
        self.key = key
        self._spec: dict | None = None

    @property
    def spec(self) -> dict:
        """The vega-lite spec as drawn (written out once; not validated: see the class)."""
        if self._spec is None:
            from ..charts import written

            with _unchecked():
                self._spec = written(self._chart)
        return self._spec

    @property
    def chart(self):
        """The altair chart (built now, if it came as a draft)."""
        from ..charts import Draft

        return self._chart.chart() if isinstance(self._chart, Draft) else self._chart

    def to_dict(self, *args, **kwargs) -> dict:
        """The chart's vega-lite spec (validated, as ``alt.Chart.to_dict``)."""
        return self.chart.to_dict(*args, **kwargs)

    def _repr_mimebundle_(self, include=None, exclude=None):
        import altair as alt

        from ..notebook import RENDERER, chart_html

        spec = self.spec
        if self.key is not None and alt.renderers.active == RENDERER:
            return {"text/html": chart_html(spec, key=self.key)}
        renderer = alt.renderers.get()
        return renderer(spec) if renderer else {}


def _spec_or_none(drawing: Drawing) -> dict | None:
    # a spec that cannot be written out is sent as before: the display shows why
    try:
        return drawing.spec
    except Exception:
        return None


def _full_redraw() -> bool:
    """``CAPNB_REDRAW=full``: redraw as before issue 16 (a new chart each time, altair's checks)."""
    return os.environ.get("CAPNB_REDRAW", "").strip().lower() == "full"


def _by_message() -> bool:
    """Whether a live page's charts take new data as a message (see ``_live``).

    ``CAPNB_REDRAW=output`` (or ``full``) redraws them as outputs, as before, to compare.
    """
    return os.environ.get("CAPNB_REDRAW", "").strip().lower() not in ("full", "output")


def _unchecked():
    """Build a worksheet's drawings without altair's repeated checks (see ``quick_build``).

    altair (in its default debug mode) validates each object it builds against the vega-lite
    schema, and matches each encoding given as a dict against its channel's alternatives by
    validating it against each: most of the time to build a chart. The chart functions a worksheet
    draws are tested through ``to_dict()``, which still validates; :meth:`Worksheet.chart` keeps the
    checks.
    """
    if _full_redraw():
        return contextlib.nullcontext()
    from ..charts import quick_build

    return quick_build()


_displays = itertools.count()


def _same(a: tuple | None, b: tuple | None) -> bool:
    # results compare by identity (a new object is a new result), settings by value
    if a is None or b is None or len(a) != len(b):
        return False
    return all(
        x is y or (not hasattr(x, "shape") and not hasattr(x, "dims") and x == y)
        for x, y in zip(a, b, strict=True)
    )


def _token(value: object) -> object:
    """What an argument of a :func:`kept` function is remembered by: arrays by identity."""
    if hasattr(value, "shape") or hasattr(value, "dims"):
        return ("id", id(value))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_token(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _token(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


def kept(func: Callable | None = None, *, size: int = 4):
    """Remember a step function's last ``size`` answers: unchanged arguments do not run it again.

    Arguments are remembered by value, arrays and Datasets by identity (a new object is a new
    input); the objects are held while remembered, so an identity is never reused. Use it on the
    stages of a worksheet's ``compute`` that only some controls change (a sweep that does not depend
    on the SLA, say), in the notebook where the reader sees it.

    Examples
    --------
    >>> calls = []
    >>> @kept
    ... def slow(x):
    ...     calls.append(x)
    ...     return 2 * x
    >>> slow(3), slow(3), len(calls)
    (6, 6, 1)
    >>> slow.remembers(3), slow.remembers(4)
    (True, False)
    """

    def decorate(function: Callable) -> Callable:
        memory: OrderedDict = OrderedDict()

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            key = (_token(args), _token(kwargs))
            if key in memory:
                memory.move_to_end(key)
                return memory[key][0]
            value = function(*args, **kwargs)
            memory[key] = (value, args, kwargs)  # the arguments stay alive with their answer
            while len(memory) > size:
                memory.popitem(last=False)
            return value

        def remembers(*args, **kwargs) -> bool:
            """Whether a call with these arguments would answer from memory."""
            return (_token(args), _token(kwargs)) in memory

        wrapper.clear = memory.clear
        wrapper.remembers = remembers
        return wrapper

    return decorate(func) if func is not None else decorate


@dataclass(frozen=True)
class Chart:
    """A worksheet chart: ``draw(results, inputs)`` and the names of what it reads.

    ``reads`` names entries of the results and of the inputs; the chart is redrawn only when one of
    them changes (results by identity, inputs by value). None: redrawn on every change.
    """

    draw: Callable[[Mapping, Mapping], object]
    reads: tuple[str, ...] | None = None


def _plain_value(value) -> str:
    """A control's value as a reader reads it: 469.94, not 469.93882953232725."""
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


class _AnswerView:
    """A worksheet's answer as a live widget view, with the sentence as its plain text."""

    def __init__(self, worksheet: Worksheet):
        self.worksheet = worksheet

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.worksheet.answer_widget._repr_mimebundle_(**kwargs)
        return {**bundle, "text/plain": self.worksheet.answer}

    def __str__(self) -> str:
        return self.worksheet.answer


class Worksheet:
    """Controls that re-run a visible step function; its answer; charts that update in place.

    Parameters
    ----------
    compute
        ``compute(**inputs) -> dict``: the worksheet's step calls, defined in the notebook. Its
        keyword arguments are the controls' names; it returns the named results the answer and the
        charts read (``ws["result"]``). A generator that yields dicts shows each as it comes: a
        quick first stage (the charts it can draw, an answer that says what is still running),
        then the full results (see :meth:`update`).
    controls
        Name -> ipywidgets control; its value is passed to ``compute`` under that name.
    charts
        Name -> :class:`Chart` (or a plain ``draw(results, inputs)`` function).
    answer
        ``answer(results, inputs) -> str``: the answer in one plain sentence with its numbers.

    Notes
    -----
    When ``compute`` raises a capnb error (an input the step refuses, an infeasible plan), the
    answer shows the message and the charts keep their last drawing; the results stay those of the
    last inputs that worked, and ``error`` holds the message.

    In a live page, ``live`` (a :class:`LiveCharts` widget) carries the new data of a chart drawn
    again in its shape to the vega view already drawn; the outputs follow once the controls have
    rested ``rest_s`` seconds (``sync()`` does it at once).
    """

    def __init__(
        self,
        compute: Callable[..., Mapping[str, object]],
        controls: Mapping[str, widgets.ValueWidget],
        *,
        charts: Mapping[str, Chart | Callable] | None = None,
        answer: Callable[[Mapping, Mapping], str] | None = None,
    ):
        self.compute = compute
        self.controls = dict(controls)
        self.charts = {
            name: c if isinstance(c, Chart) else Chart(c) for name, c in (charts or {}).items()
        }
        self._answer = answer
        self.results: dict[str, object] = {}
        self.error: str | None = None
        self._handles: dict[str, object] = {}
        self._keys: dict[str, str | None] = {}
        self._drawn: dict[str, tuple | None] = {}
        self._shown: dict[str, dict] = {}  # the spec each displayed chart last sent
        # in a live page (see ``_live``): what the page holds per chart (its last chart_update),
        # and the drawings sent as messages whose outputs are not brought up to date yet
        self.live = LiveCharts(on_missed=self._missed)
        self.rest_s = 2.0
        self._page: dict[str, dict] = {}
        self._stale: dict[str, Drawing] = {}
        self._resting = None
        self.last_redrawn: list[str] = []
        self._holding = False
        self.answer_widget = widgets.HTML()
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.panel = widgets.VBox([*self.controls.values(), self.answer_widget])
        self.update(raise_errors=True)

    def __getitem__(self, name: str) -> object:
        return self.results[name]

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

    def follow(self, source: str, target: str, options: Callable[[object], Iterable]) -> None:
        """Keep ``target``'s options those that ``options(source value)`` allows.

        When the source changes, the target keeps its value if still allowed, else takes the first
        allowed one; ``compute`` then runs once.
        """

        def changed(change) -> None:
            control = self.controls[target]
            allowed = list(options(change["new"]))
            holding, self._holding = self._holding, True
            try:
                value = control.value if control.value in allowed else allowed[0]
                control.options, control.value = allowed, value
            finally:
                self._holding = holding

        # registered before the recompute: ipywidgets calls observers in order of registration,
        # and the source's own recompute was registered first, so run it again after the update
        self.controls[source].observe(changed, names="value")
        self.controls[source].unobserve(self._on_change, names="value")
        self.controls[source].observe(self._on_change, names="value")
        changed({"new": self.controls[source].value})

    def _on_change(self, change) -> None:
        if not self._holding:
            self.update()

    def update(self, *, raise_errors: bool = False) -> None:
        """Run ``compute`` on the controls' values; refresh the answer and the displayed charts.

        A ``compute`` that yields its results in stages (a generator of dicts) is shown stage by
        stage: after each one the answer is re-read and the charts whose inputs are all there are
        redrawn at once, while the next stage runs (the browser draws them meanwhile). Charts that
        read a result no stage has produced yet keep their drawing until it comes. ``results``
        holds the last stage's once every stage has run.
        """
        inputs = self.inputs
        before = self.results
        redrawn: list[str] = []
        try:
            produced = self.compute(**inputs)
            stages = [produced] if isinstance(produced, Mapping) else produced
            shown = False
            for stage in stages:  # each stage shown as it comes, while the next one runs
                self._show(dict(stage), redrawn)
                shown = True
            if not shown:
                raise InputError("the worksheet's compute produced no results")
        except CapnbError as error:
            self.results = before  # the last inputs that worked
            if raise_errors:
                raise
            self.error = str(error)
            self.answer_widget.value = f"<b>Not computed: {html.escape(self.error)}</b>"
            self.last_redrawn = redrawn
            return
        self.last_redrawn = list(dict.fromkeys(redrawn))

    def _show(self, results: dict, redrawn: list[str]) -> None:
        self.results, self.error = results, None
        self.answer_widget.value = f"<b>{html.escape(self.answer)}</b>"  # plain text, not HTML
        redrawn.extend(self.redraw())

    def answer_view(self) -> _AnswerView:
        """The answer where a worksheet shows it: it follows the controls in a live notebook.

        Displayed, it is a second view of the panel's answer (one widget model): after a control
        changes, the sentence and every chart describe the same run. Its plain text is the
        sentence itself, which a report or a headless run keeps.
        """
        return _AnswerView(self)

    @property
    def answer(self) -> str:
        """The answer for the current inputs, in one plain sentence with its numbers."""
        if self.error is not None:
            return f"Not computed: {self.error}"
        return self._answer(self.results, self.inputs) if self._answer else ""

    def redraw(self) -> list[str]:
        """Redraw the displayed charts whose content changed; returns their names.

        A chart is drawn again when what it reads changed; it is sent to the page only when its
        spec changed too (a new result can draw the same picture: the selected run's timeline
        at another latency tolerance, say), so the page has nothing to redo for it.
        """
        redrawn, messages = [], []
        for name in self._handles:
            if not self._ready(name):  # a staged update has not produced what it reads yet
                continue
            key = self._key(name)
            if _same(key, self._drawn.get(name)):
                continue
            drawing = self._drawing(name, self._keys.get(name))
            self._drawn[name] = key
            if _full_redraw():
                self._output(name, drawing)
            else:
                spec = _spec_or_none(drawing)
                if spec is not None and self._shown.get(name) == spec:
                    continue  # the same picture: nothing to send
                before, self._shown[name] = self._shown.get(name), spec
                message = self._message(name, before, spec)
                if message is None:
                    self._output(name, drawing)
                else:  # the page's kept view takes the new data
                    messages.append(message)
                    self._stale[name] = drawing
            redrawn.append(name)
        if messages:
            self.live.draw(messages)
            self._rest()
        return redrawn

    def _message(self, name: str, before: dict | None, spec: dict | None) -> dict | None:
        """The live page's message for a chart drawn again in its shape; None: draw an output."""
        from ..notebook import chart_update

        key = self._keys.get(name)
        if not (self.live.here and _by_message()) or key is None or before is None or spec is None:
            self._page.pop(name, None)
            return None
        held = self._page.get(name) or chart_update(before, key)
        update = self._page[name] = chart_update(spec, key)
        if update["shape"] != held["shape"]:
            return None
        # the tables the view holds already are not sent again
        tables = {
            n: t
            for n, t in update["tables"].items()
            if held["digests"].get(n) != update["digests"][n]
        }
        return {**update, "tables": tables}

    def _output(self, name: str, drawing: Drawing) -> None:
        self._stale.pop(name, None)
        self._handles[name].update(drawing)

    def _missed(self, keys: list[str]) -> None:
        """The page could not draw these charts from a message (no kept view): draw their outputs."""
        for name, key in self._keys.items():
            if key in keys and name in self._stale:
                self._page.pop(name, None)
                self._output(name, self._stale[name])

    def _rest(self) -> None:
        """Bring the outputs up to date once the controls have rested ``rest_s`` seconds."""
        if self._resting is not None:
            self._resting.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a script): now
            self._resting = None
            self.sync()
            return
        self._resting = loop.call_later(self.rest_s, self.sync)

    def sync(self) -> None:
        """Bring every output the live page drew from a message up to date (a saved notebook shows it)."""
        self._resting = None
        for name, drawing in list(self._stale.items()):
            self._output(name, drawing)

    def _ready(self, name: str) -> bool:
        reads = self.charts[name].reads
        return reads is None or all(r in self.results or r in self.controls for r in reads)

    def _key(self, name: str) -> tuple | None:
        reads = self.charts[name].reads
        if reads is None:
            return None
        inputs = self.inputs
        return tuple(self.results[r] if r in self.results else inputs[r] for r in reads)

    def _known(self, name: str) -> None:
        if name not in self.charts:
            raise InputError(f"unknown chart {name!r}; this worksheet draws {sorted(self.charts)}")

    def chart(self, name: str):
        """The named chart (an ``alt.Chart``) for the current results."""
        self._known(name)
        return self.charts[name].draw(self.results, self.inputs)

    def drawing(self, name: str) -> Drawing:
        """The named chart as it is displayed (see :class:`Drawing`)."""
        return self._drawing(name, None)

    def _drawing(self, name: str, key: str | None) -> Drawing:
        """The named chart for the current results, as a draft where its chart function makes one.

        A draft skips building the altair chart when it is drawn again in the same shape (see
        :class:`Drawing`). A draw that fails on drafts (a notebook's drawing that hands a capnb
        chart to altair's own ``alt.layer``, say) is drawn again without them.
        """
        from ..charts import drafting

        self._known(name)
        draw = self.charts[name].draw
        full = _full_redraw()
        with _unchecked():
            try:
                with drafting() if not full else contextlib.nullcontext():
                    chart = draw(self.results, self.inputs)
            except Exception:
                if full:
                    raise
                chart = draw(self.results, self.inputs)
        return Drawing(chart, key=None if full else key)

    def _new_key(self, name: str) -> str:
        return f"capnb-{id(self):x}-{name}-{next(_displays)}"

    def show(self, name: str):
        """Display the named chart as a cell output that follows every later change of the controls."""
        from IPython.display import display

        self._known(name)
        key = self._new_key(name)
        drawing = self._drawing(name, key)
        handle = display(drawing, display_id=True)
        self._attach(name, handle, key, None if _full_redraw() else _spec_or_none(drawing))

    def attach(self, name: str, handle) -> None:
        """Keep the named chart drawn on ``handle`` (anything with ``update(drawing)``)."""
        self._attach(name, handle, self._new_key(name))

    def _attach(self, name: str, handle, key: str, shown: dict | None = None) -> None:
        self._known(name)
        self._handles[name] = handle
        self._keys[name] = key
        self._drawn[name] = self._key(name)
        if shown is None:
            self._shown.pop(name, None)
        else:
            self._shown[name] = shown
        self._page.pop(name, None)
        self._stale.pop(name, None)

    def record(self) -> str:
        """The inputs as plain text (what a static report shows in place of the controls)."""
        return "Inputs: " + ", ".join(f"{k} = {_plain_value(v)}" for k, v in self.inputs.items())

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


#: Keyword arguments of sliders that start a kernel: recompute on release, not on every pixel. The
#: label has a fixed width and the control a wider one, so a long label ("burst height (x
#: baseline)") never squeezes the slider's track: the track keeps about 20em (260 px).
slider_style = {
    "continuous_update": False,
    "style": {"description_width": "14em"},
    "layout": {"width": "40em"},
}

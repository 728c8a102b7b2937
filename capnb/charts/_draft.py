"""A chart as its data and its shape: a worksheet's redraw fills in a spec instead of building one.

Each chart function does its data work (select, reshape to long tables, write the title) and hands
the result to :func:`draft` with the function that builds the altair chart from it. Called as
usual, :func:`draft` builds the chart at once: the function returns an altair chart, as always.
Inside :func:`drafting` (a worksheet drawing its charts again) it returns a :class:`Draft` instead,
and :meth:`Draft.spec` writes the vega-lite spec out.

Why: building a layered altair chart and writing it out (copies of every schema object, channel
lookups, the layers' data and params lifted) costs a worksheet's redraw more than the data work,
and a redraw of the same chart almost always has the same shape: only its tables, its title and
its params' values are new. So the first drawing of a shape writes the spec out once, with each
table's dataset name and each value marked, and keeps it as a template; a later drawing of the same
shape copies the template with the new datasets and values put in. The result is the spec that
altair writes out for the same chart, to the key (the tests check every worksheet chart over
several changes of its controls).

What a chart function passes to :func:`draft` (``build(**tables, **values, **shape)``):

``tables``
    The tables the chart draws, each the data of one or more of its charts as it is. A dataset is
    named after its values (``data-`` and a digest, as altair names it), so the template holds the
    names' places and each new table is written out and named as altair would.
``values``
    Plain values (strings, numbers, lists of them) that ``build`` puts in the spec as they are and
    decides nothing on: titles with numbers in them, a slider's starting value.
``shape``
    Everything else ``build`` reads, as plain JSON values. A new shape is a new template.

A template is kept only when the spec it was written from checks out: every dataset came from a
table, tables of different values, each value found whole where it is (not inside another string),
and no layer named after its data (altair names layers after a digest of their data when a selection
needs their names). Anything else is written out the full way each time.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping

from ..memo import Kept

__all__ = ["Draft", "draft", "drafting", "written"]

_DRAFTING = contextvars.ContextVar("capnb_drafting", default=False)
_TEMPLATES: OrderedDict = OrderedDict()
_TEMPLATES_KEPT = 64
_MARK = "\x00capnb:"  # no chart's text holds a NUL character
_PLAIN = (str, int, float, bool, type(None))


@contextlib.contextmanager
def drafting():
    """Within it, chart functions return a :class:`Draft` instead of an altair chart."""
    token = _DRAFTING.set(True)
    try:
        yield
    finally:
        _DRAFTING.reset(token)


def draft(
    build: Callable[..., object],
    *,
    tables: Mapping[str, object],
    values: Mapping[str, object] | None = None,
    shape: Mapping[str, object] | None = None,
):
    """The chart ``build(**tables, **values, **shape)``, built now (or a :class:`Draft` when drafting)."""
    made = Draft(build, tables, values or {}, shape or {})
    return made if _DRAFTING.get() else made.chart()


def written(chart) -> dict:
    """A chart's spec as a worksheet displays it: altair's ``to_dict``, not validated again."""
    if isinstance(chart, Draft):
        return chart.spec()
    return chart.to_dict(validate=False, context={"pre_transform": False})


class Draft:
    """A chart not built yet: the function that builds it, and its tables, values and shape.

    Anything asked of it that a chart has (``.properties(...)``, ``+``, ``to_dict()``) is asked of
    the chart, built then: a notebook's drawing that changes a capnb chart gets an altair chart.
    """

    def __init__(self, build, tables: Mapping, values: Mapping, shape: Mapping):
        self.build, self.tables, self.values, self.shape = build, dict(tables), values, shape

    def chart(self):
        """The altair chart."""
        return self.build(**self.tables, **self.values, **self.shape)

    def spec(self) -> dict:
        """The spec, as ``written(self.chart())`` is: from a kept template when there is one."""
        key = self._key()
        if key is None:
            return written(self.chart())
        datasets = {name: _dataset(table) for name, table in self.tables.items()}
        if key in _TEMPLATES:
            _TEMPLATES.move_to_end(key)
            template = _TEMPLATES[key]
        else:
            template, final = _Template.make(self, datasets)
            if final:  # not kept when a later drawing might do (two tables of the same values)
                _TEMPLATES[key] = template
                while len(_TEMPLATES) > _TEMPLATES_KEPT:
                    _TEMPLATES.popitem(last=False)
        filled = template.fill(self, datasets) if template is not None else None
        return filled if filled is not None else written(self.chart())

    def _key(self) -> tuple | None:
        """What a template is kept under: the shape, the tables' columns, altair's settings."""
        import altair as alt
        import pandas as pd

        if not all(type(t) is pd.DataFrame for t in self.tables.values()):
            return None
        if not all(_plain(v) for v in self.values.values()):
            return None
        try:
            shape = json.dumps(self.shape, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):
            return None
        columns = tuple(
            (name, tuple(map(str, t.columns)), tuple(map(str, t.dtypes)))
            for name, t in self.tables.items()
        )
        settings = (
            alt.theme.active,
            alt.data_transformers.active,
            alt.data_transformers.consolidate_datasets,
        )
        return (self.build, shape, columns, tuple(self.values), settings)

    def __getattr__(self, name: str):
        if name.startswith("__"):  # copy, pickle and the like ask for these; a Draft has none
            raise AttributeError(name)
        return getattr(self.chart(), name)

    def __add__(self, other):
        return self.chart() + other

    def __or__(self, other):
        return self.chart() | other

    def __and__(self, other):
        return self.chart() & other


def _plain(value) -> bool:
    if type(value) in _PLAIN:
        return True
    if type(value) is list:
        return all(_plain(v) for v in value)
    return False


_DATASETS = Kept(objects=64, answers=2)  # a table's dataset, per table object while it lives


def _dataset(table) -> tuple[str, list] | None:
    """A table's dataset name and values, as altair's ``to_dict`` writes them (None: otherwise).

    A table a chart function kept (:class:`capnb.memo.Kept`: the same object on each redraw) is
    written out once: its rows and the digest that names them are kept while it lives (tables are
    made new for new data, never edited).
    """
    import altair as alt

    return _DATASETS.get(table, alt.data_transformers.active, lambda: _written_out(table))


def _written_out(table) -> tuple[str, list] | None:
    import altair as alt
    from altair.vegalite.v6.api import _dataset_name

    data = alt.data_transformers.get()(table)
    if not isinstance(data, dict) or list(data) != ["values"]:
        return None  # a transformer that writes a file or a URL: altair's own path
    return _dataset_name(data["values"]), data["values"]


class _Template:
    """A chart's spec with each dataset name and each value marked, to be filled in."""

    def __init__(self, spec: dict, order: list[str]):
        self.spec = spec  # without its datasets
        self.order = order  # the tables whose datasets it has, in altair's order

    @classmethod
    def make(cls, draft: Draft, datasets: dict) -> tuple[_Template | None, bool]:
        """The template of a draft's shape (None: none checks out), and whether that is final.

        ``datasets`` holds each table's dataset (name, values), as :func:`_dataset` writes it.
        """
        marks = {name: f"{_MARK}value:{name}" for name in draft.values}
        spec = written(draft.build(**draft.tables, **marks, **draft.shape))
        if any(named is None for named in datasets.values()):
            return None, True
        tables = {named[0]: table for table, named in datasets.items()}
        if len(tables) < len(datasets):  # two tables of the same values: whose name is whose?
            return None, False
        order = list(spec.pop("datasets", {}))
        if not set(order) <= set(tables):  # data the build made itself
            return None, True
        named = {name: f"{_MARK}table:{table}" for name, table in tables.items()}
        spec = _marked(spec, named)
        text = json.dumps(spec)
        if '"view_' in text:  # layers named after their data (a selection's views)
            return None, True
        whole = _count_whole(spec, {*marks.values(), *named.values()})
        if text.count(json.dumps(_MARK)[1:-1]) != whole:
            return None, True  # a value inside another string (or a key): not a value
        return cls(spec, [tables[name] for name in order]), True

    def fill(self, draft: Draft, datasets: dict) -> dict | None:
        """The spec of a draft of this shape (None: a table that cannot be written out here)."""
        written_out, filling = {}, {}
        for table in self.order:
            if datasets[table] is None:
                return None
            name, values = datasets[table]
            written_out[name] = values
            filling[f"{_MARK}table:{table}"] = name
        for name, value in draft.values.items():
            filling[f"{_MARK}value:{name}"] = value
        spec = _filled(self.spec, filling)
        if written_out:
            spec["datasets"] = written_out
        return spec


def _marked(node, marks: dict):
    """A copy of a spec with each string that ``marks`` names replaced by its mark."""
    if isinstance(node, dict):
        return {k: _marked(v, marks) for k, v in node.items()}
    if isinstance(node, list):
        return [_marked(v, marks) for v in node]
    if isinstance(node, str):
        return marks.get(node, node)
    return node


def _count_whole(node, marks: set) -> int:
    """How many of a spec's strings are one of ``marks``, whole."""
    if isinstance(node, dict):
        return sum(_count_whole(v, marks) for v in node.values())
    if isinstance(node, list):
        return sum(_count_whole(v, marks) for v in node)
    return int(isinstance(node, str) and node in marks)


def _filled(node, filling: dict):
    """A copy of a template with each mark replaced by what it marks."""
    if isinstance(node, dict):
        return {k: _filled(v, filling) for k, v in node.items()}
    if isinstance(node, list):
        return [_filled(v, filling) for v in node]
    if isinstance(node, str) and node in filling:
        value = filling[node]
        return copy.deepcopy(value) if isinstance(value, list) else value
    return node

"""The context in which worksheets build charts again without altair's repeated checks.

(``import capnb`` defers the optional jsonschema grammar altair's import would build:
:mod:`capnb._deferred`.)
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
from collections import OrderedDict

__all__ = ["quick_build"]

_MATCHES: OrderedDict = OrderedDict()
_MATCHES_SIZE = 8_192
_LONGEST_KEY = 20_000


def _remembering(validate):
    """``validate_jsonschema`` that remembers its verdict on small specs (a pure function of both)."""

    def remembered(spec, schema, rootschema=None, *, raise_error=True):
        try:
            text = json.dumps(spec, sort_keys=True)
        except (TypeError, ValueError):
            return validate(spec, schema, rootschema, raise_error=raise_error)
        if len(text) > _LONGEST_KEY:
            return validate(spec, schema, rootschema, raise_error=raise_error)
        key = (text, id(schema), id(rootschema))
        if key in _MATCHES:
            _MATCHES.move_to_end(key)
            error = _MATCHES[key][0]
        else:
            error = validate(spec, schema, rootschema, raise_error=False)
            _MATCHES[key] = (error, schema, rootschema)  # the schemas stay alive with their ids
            while len(_MATCHES) > _MATCHES_SIZE:
                _MATCHES.popitem(last=False)
        if error is not None and raise_error:
            raise error.with_traceback(None)
        return error

    remembered.capnb_remembers = True
    return remembered


def _quick_hash(naming):
    """Name a layer's view as altair does, with a table's values digested instead of printed.

    altair names each layer of a layered chart after a hash that includes ``str(data)``: a
    DataFrame printed as text, on every build. The digest of its values (pandas' own row hashes)
    tells tables apart as well, and is deterministic; anything else is named as altair names it.
    """

    def quick(chart):
        data = getattr(chart, "data", None)
        try:
            import pandas as pd

            if not isinstance(data, pd.DataFrame) or chart._kwds.get("_cached_hash") is not None:
                return naming(chart)
            rows = pd.util.hash_pandas_object(data, index=True).to_numpy().tobytes()
        except (TypeError, ValueError):
            return naming(chart)
        digest = hashlib.sha256(rows + json.dumps(list(map(str, data.columns))).encode())
        described = {
            "class": type(chart).__name__,
            "mark": getattr(chart, "mark", None),
            "encoding": getattr(chart, "encoding", None),
            "data": digest.hexdigest(),
            "transform": getattr(chart, "transform", None),
        }
        text = json.dumps(described, sort_keys=True, default=str)
        return f"view_{hashlib.sha256(text.encode()).hexdigest()[:16]}"

    return quick


def _parsing_once(parse):
    """``parse_shorthand`` that parses each field of one table once (within one quick build).

    altair parses every encoding's shorthand against the chart's table each time it writes the
    chart out, and infers the table's column types (narwhals' schema, which reads object columns)
    for each: dozens of times for one table. The answer depends only on the shorthand and the
    table, which is held here while its answers are, so its identity is not reused.
    """
    memory: dict = {}

    def parsed(shorthand, data=None, *args, **kwargs):
        try:
            key = (json.dumps(shorthand, sort_keys=True), id(data), args, tuple(kwargs.items()))
            hash(key)
        except (TypeError, ValueError):
            return parse(shorthand, data, *args, **kwargs)
        if key not in memory:
            memory[key] = (parse(shorthand, data, *args, **kwargs), data)
        return copy.deepcopy(memory[key][0])  # callers edit what they are given

    return parsed


def _copying_less(deep_copy, schemapi):
    """The ``_deep_copy`` of altair, with the values that need no copy returned where they are met.

    Every altair object holds each of its schema's properties, most of them ``Undefined``, and a
    layered chart is deep-copied several times as it is built and written out: most of the calls
    were for values that are returned as they are (``Undefined``, strings, numbers, tables). The
    copies are the same objects altair makes; anything with its own ``__deepcopy__`` goes to
    altair's function.
    """
    base, undefined, debug_mode = schemapi.SchemaBase, schemapi.Undefined, schemapi.debug_mode
    atoms = (str, int, float, bool, type(None), type(undefined))
    own_copier: dict[type, bool] = {}

    def copy(obj, by_ref):
        kind = type(obj)
        if kind in atoms:
            return obj
        if isinstance(obj, base):
            if kind not in own_copier:
                own_copier[kind] = hasattr(kind, "__deepcopy__")
            if own_copier[kind]:
                return deep_copy(obj, by_ref)
            args = [copy(a, by_ref) for a in obj._args]
            kwds = {
                k: v if (type(v) in atoms or k in by_ref) else copy(v, by_ref)
                for k, v in obj._kwds.items()
            }
            with debug_mode(False):
                return kind(*args, **kwds)
        if kind is list:
            return [v if type(v) in atoms else copy(v, by_ref) for v in obj]
        if kind is dict:
            return {
                k: v if (type(v) in atoms or k in by_ref) else copy(v, by_ref)
                for k, v in obj.items()
            }
        if isinstance(obj, list | dict):  # subclasses: as altair copies them
            return deep_copy(obj, by_ref)
        return obj

    copy.capnb_copies_less = True
    return copy


_CONVERTERS: dict = {}


def _converting_once(converter_class):
    """The ``_FromDict`` of altair, made once per set of classes instead of once per encoding.

    An encoding given as a string or a dict (``color="gpu:N"``) becomes its channel's class through
    ``from_dict``, which first hashes the schema of every one of altair's ~900 schema classes into
    a table: about 3 ms, for each such encoding of each chart drawn. The table depends only on the
    classes (fixed once altair is imported), so it is made once and kept.
    """

    def converter(wrapper_classes):
        classes = tuple(wrapper_classes)
        made = _CONVERTERS.get(classes)
        if made is None:
            made = _CONVERTERS[classes] = converter_class(classes)
        return made

    converter.capnb_converts_once = True
    return converter


@contextlib.contextmanager
def quick_build():
    """Build charts without altair's repeated schema checks (a worksheet's redraws).

    Two costs of building an altair chart repeat on every redraw of a worksheet, with the same
    inputs each time: altair's debug mode checks every schema object against the vega-lite schema as
    it is built, and each encoding given as a dict is matched against the alternatives (``anyOf``)
    of its channel's schema by validating it against each in turn. Inside this context the first is
    off and the verdicts of the second are remembered (a spec's verdict against a schema does not
    change; specs longer than 20,000 characters of JSON are checked every time). A third: a layered
    chart names its layers after their data printed as text; here after a digest of the values. A
    fourth: each encoding's shorthand is parsed against the table, its column types inferred
    again each time; here once per shorthand and table. A fifth: altair deep-copies each layered
    chart several times, calling itself for every one of each object's mostly undefined
    properties; here values that need no copy are returned where they are met
    (:func:`_copying_less`). A sixth: each encoding given as a string or dict hashes altair's
    whole schema class table; here the table is made once (:func:`_converting_once`).
    ``to_dict()`` outside of it validates as always.
    """
    import altair as alt
    from altair.utils import schemapi

    try:
        from altair.vegalite.v6.schema import channels
    except ImportError:  # another altair: its shorthands are parsed as it parses them
        channels = None

    original = schemapi.validate_jsonschema
    nested = getattr(original, "capnb_remembers", False)
    deep_copy, from_dict = schemapi._deep_copy, schemapi._FromDict
    if not nested:
        schemapi.validate_jsonschema = _remembering(original)
        schemapi._deep_copy = _copying_less(deep_copy, schemapi)
        schemapi._FromDict = _converting_once(from_dict)
        naming = alt.Chart.__dict__.get("_compute_hash")
        if naming is not None:
            alt.Chart._compute_hash = _quick_hash(naming)
        parse = getattr(channels, "parse_shorthand", None)
        if parse is not None:
            channels.parse_shorthand = _parsing_once(parse)
    try:
        with schemapi.debug_mode(False):
            yield
    finally:
        if not nested:
            schemapi.validate_jsonschema = original
            schemapi._deep_copy, schemapi._FromDict = deep_copy, from_dict
            if parse is not None:
                channels.parse_shorthand = parse
            if naming is not None:
                alt.Chart._compute_hash = naming

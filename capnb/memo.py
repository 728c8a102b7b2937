"""Work kept per input object while it lives: :class:`Kept`.

Charts keep the tables they draw from a result, and the capacity step the envelope it searches on
a curve, so that a worksheet's redraw or re-plan of the same object does that work once.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping

__all__ = ["Kept"]

_PLAIN = (str, int, float, bool, type(None))


class Kept:
    """What was worked out from an input Dataset (or table), kept while that object lives.

    A worksheet hands its charts the same result object until the result changes (a control that
    moves only a chart's marker, an SLA, redraws from the same overview), and plans the same curve
    again for each new SLA, target or buffer, so the work that depends on the object alone is done
    once per object. An entry is found by the object's identity and is dropped when the object is
    collected (a weak reference's callback, run before its address can be reused), so a new object
    never finds an old object's answers. An object whose variables or attributes were replaced
    since (``ds["x"] = ...``, ``ds.attrs["gpu"] = ...``) is worked out again; numbers changed in
    place inside an array are not noticed (results and curves are new objects, never edited).
    Nothing is kept when the work raises.
    """

    def __init__(self, objects: int = 8, answers: int = 8):
        self._entries: OrderedDict = OrderedDict()
        self._objects, self._answers = objects, answers

    def get(self, obj, key: Hashable, make: Callable[[], object]):
        """``make()``, or what it returned before for this object and ``key``."""
        try:
            hash(key)
        except TypeError:
            return make()
        held = getattr(obj, "variables", None)  # a Dataset's; a table (DataFrame) has none
        variables = tuple(held.values()) if isinstance(held, Mapping) else ()
        ident, attrs = id(obj), dict(getattr(obj, "attrs", {}))
        entry = self._entries.get(ident)
        if (
            entry is None
            or entry[0]() is not obj
            or len(entry[1]) != len(variables)
            or any(a is not b for a, b in zip(entry[1], variables, strict=True))
            or not _same_attrs(entry[3], attrs)
        ):
            entries = self._entries

            def forget(_, ident=ident):
                entries.pop(ident, None)

            entry = (weakref.ref(obj, forget), variables, OrderedDict(), attrs)
            self._entries[ident] = entry
            while len(self._entries) > self._objects:
                self._entries.popitem(last=False)
        self._entries.move_to_end(ident)
        answers = entry[2]
        if key in answers:
            answers.move_to_end(key)
        else:
            answers[key] = make()  # nothing kept when it raises
            while len(answers) > self._answers:
                answers.popitem(last=False)
        return answers[key]


def _same_attrs(kept: dict, attrs: dict) -> bool:
    # the kept dict holds its values, so an identity is never reused; plain values compare by value
    return kept.keys() == attrs.keys() and all(
        a is b or (type(a) is type(b) and type(a) in _PLAIN and a == b)
        for a, b in zip(kept.values(), (attrs[k] for k in kept), strict=True)
    )

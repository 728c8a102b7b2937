"""Units declared at a public function's boundary: checked and converted there, once.

capnb's public functions take plain numbers in the unit their argument's name and docstring give
(``cold_start_s`` in seconds, ``per_instance_qps`` in requests/s). :func:`declare_units` states
that unit in code, from the glossary's unit strings (:mod:`capnb.glossary`), and lets a caller
give a quantity in another unit instead:

- a pint quantity (``capnb.glossary.unit_registry()("90 s")``, ``ureg.Quantity(1.5, "min")``);
- a string with its unit (``"90 s"``, ``"1.5 min"``, ``"60 ms"``);
- an xarray DataArray whose ``units`` attr names its unit (converted, its attr set to the
  declared unit);
- or a plain number, list or array: taken to be in the declared unit already.

A quantity of another kind (a rate given for a time, ``"5 GB"`` for ``cold_start_s``) is an
error naming the argument, the unit given and the unit expected; nothing is converted silently.
The declared units travel with the function (``function.__capnb_units__``), where the docs and
the tests read them.

Examples
--------
>>> @declare_units(cold_start_s="s", per_instance_qps="requests/s")
... def replay(cold_start_s, per_instance_qps=1.0):
...     return cold_start_s, per_instance_qps
>>> replay("1.5 min", per_instance_qps="600 requests/min")
(90.0, 10.0)
>>> replay("5 GB")
Traceback (most recent call last):
...
capnb.errors.InputError: cold_start_s: '5 GB' is gigabyte, not a time in s ([time])
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import re

import numpy as np

from .errors import InputError

__all__ = ["declare_units", "declared", "require_units"]


def _registry():
    from .glossary import unit_registry

    return unit_registry()


def _dimension(ureg, unit: str) -> str:
    return str(ureg(unit).dimensionality)


def _convert(value, unit: str, argument: str):
    """``value`` in ``unit``: plain values as they are, quantities converted (or an error)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Number) and not isinstance(value, complex):
        return value
    import xarray as xr

    if isinstance(value, xr.DataArray):
        given = value.attrs.get("units")
        if not given or given == unit:
            return value
        factor = _factor(given, unit, argument, value)
        return (value * factor).assign_attrs({**value.attrs, "units": unit})
    if not isinstance(value, str) and not _is_quantity(value):
        return value  # a list, an array: in the declared unit already (pint is not loaded)
    ureg = _registry()
    if isinstance(value, str):
        try:
            quantity = ureg(value)
        except Exception as error:  # pint raises several kinds on text it cannot read
            if _NUMBER_FIRST.match(value):  # a number with a unit pint does not know
                raise _unread(value, unit, argument, error) from None
            return value  # not a quantity: a keyword ("estimate") the function reads itself
        if not hasattr(quantity, "to"):
            return value
        return _to(quantity, unit, argument, value)
    if isinstance(value, ureg.Quantity):
        return _to(value, unit, argument, value)
    return value


#: Text that starts with a number is meant as a quantity, never as a keyword ("estimate").
_NUMBER_FIRST = re.compile(r"\s*[-+]?\.?\d")


def _unread(text: str, unit: str, argument: str, error: Exception) -> InputError:
    """The error for a number whose unit pint cannot read: the unit named, and the one expected."""
    names = getattr(error, "unit_names", None)
    names = (names,) if isinstance(names, str) else names
    what = ", ".join(map(repr, names)) if names else "pint cannot read it"
    return InputError(
        f"{argument}: {text!r} has a unit capnb does not read ({what}); give a {_kind(unit)} "
        f"in {unit}, as a number or with a unit ('10 {unit}')"
    )


def in_unit(value, unit: str, argument: str):
    """``value`` in ``unit``, as :func:`declare_units` converts an argument (or an InputError)."""
    return _convert(value, unit, argument)


def _is_quantity(value) -> bool:
    """A pint quantity, told without loading pint (about 0.3 s a process) for values that are not."""
    return type(value).__module__.split(".")[0] == "pint"


def _to(quantity, unit: str, argument: str, shown):
    import pint

    try:
        return quantity.to(unit).magnitude
    except pint.DimensionalityError:
        raise InputError(
            f"{argument}: {shown!r} is {quantity.units}, not a {_kind(unit)} in {unit} "
            f"({_dimension(_registry(), unit)})"
        ) from None


def _factor(given: str, unit: str, argument: str, shown) -> float:
    ureg = _registry()
    try:
        quantity = ureg.Quantity(1.0, given)
    except Exception:
        raise InputError(
            f"{argument}: its units attr {given!r} is not a unit capnb reads"
        ) from None
    return float(_to(quantity, unit, argument, f"a DataArray in {given}"))


_KINDS = {"[time]": "time", "[request] / [time]": "rate", "[byte]": "size"}


def _kind(unit: str) -> str:
    return _KINDS.get(_dimension(_registry(), unit), "quantity")


def declare_units(**units: str):
    """Declare the units of a function's arguments: quantities given in others are converted.

    Parameters
    ----------
    **units
        Argument name -> the glossary unit string it is taken in (``"s"``, ``"requests/s"``,
        ``"bytes"``, ``"USD/hour"``). Every name must be a parameter of the function.

    Returns
    -------
    Callable
        A decorator. The decorated function carries ``__capnb_units__`` (the mapping).
    """
    from .glossary import unit_strings

    known = unit_strings()  # the glossary's units (all read by its pint registry, tested there)
    for name, unit in units.items():
        if unit not in known:
            raise ValueError(
                f"declare_units: {name}={unit!r} is not a unit of capnb's glossary "
                f"({', '.join(sorted(known))})"
            )

    def decorate(function):
        signature = inspect.signature(function)
        missing = sorted(set(units) - set(signature.parameters))
        if missing:
            raise TypeError(f"declare_units: {function.__qualname__} has no parameter {missing}")

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            bound = signature.bind_partial(*args, **kwargs)
            for name, unit in units.items():
                if name in bound.arguments:
                    bound.arguments[name] = _each(bound.arguments[name], unit, name)
            return function(*bound.args, **bound.kwargs)

        wrapper.__capnb_units__ = dict(units)
        return wrapper

    return decorate


def _each(value, unit: str, argument: str):
    """A value, or each value of a list or tuple (a swept grid, a table of them), in ``unit``."""
    if isinstance(value, list | tuple):
        return type(value)(_each(v, unit, argument) for v in value)
    return _convert(value, unit, argument)


def declared(function) -> dict[str, str]:
    """The units a function declares (``{}`` when it declares none)."""
    return dict(getattr(function, "__capnb_units__", {}))


def require_units(array, unit: str, argument: str) -> None:
    """Refuse a DataArray whose ``units`` attr is another unit than ``unit`` (or not a unit).

    For inputs a function reads as they are (a demand series, a rate series): a spelling of the
    same unit passes; one that would need converting is an error naming both units and the
    factor, as is a unit of another kind; an array without a ``units`` attr is taken as ``unit``.
    """
    given = array.attrs.get("units")
    if given is None or given == unit:
        return
    factor = _factor(str(given), unit, argument, array)
    if not math.isclose(factor, 1.0, rel_tol=1e-12):
        raise InputError(
            f"{argument}: its units attr {given!r} is not {unit} (1 {given} = {factor:.6g} "
            f"{unit}): convert the values to {unit} and set units={unit!r}"
        )


def one_value(value, unit: str, argument: str):
    """One cell of a step's answer (a DataArray of one value, in ``unit``) as its number.

    Anything else is returned as given, for the caller's own check. A DataArray of more than one
    value is an error that says to select one cell; dims of one (the model a capacity sweep
    keeps) are one cell.
    """
    if type(value).__name__ != "DataArray":  # xarray is not imported for a number
        return value
    if value.size != 1:
        raise InputError(
            f"{argument}: one number, not a DataArray over {value.dims}: select one cell of the "
            "step's answer (e.g. .sel(gpu=..., tensor_parallel=...))"
        )
    require_units(value, unit, argument)
    return value.values.item()


def instances_needed(rate, per_instance):
    """Instances that serve ``rate`` (requests/s) at ``per_instance`` requests/s each: the one rule.

    ``ceil(rate / per_instance)`` taken after a relative tolerance of 1e-12, so that float noise
    (30.000000000000004 / 3) is 10 instances, not 11. Numbers, arrays or DataArrays (floats).

    >>> float(instances_needed(30.000000000000004, 3.0)), float(instances_needed(30.1, 3.0))
    (10.0, 11.0)
    """
    return np.ceil(rate / per_instance * (1.0 - 1e-12))

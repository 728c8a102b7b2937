"""capnb defers rfc3987_syntax's grammar (``capnb._deferred``) without changing what it checks."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("rfc3987_syntax")

IRIS = ["http://example.com/ä", "http://exa mple.com", "urn:isbn:0451450523", "", "::", "a:b#c"]

_CHECK = """
import json, sys
{first}
from jsonschema import Draft7Validator, FormatChecker
before = type(sys.modules["rfc3987_syntax"]).__name__
iri = Draft7Validator({{"format": "iri"}}, format_checker=FormatChecker())
ref = Draft7Validator({{"format": "iri-reference"}}, format_checker=FormatChecker())
out = [[iri.is_valid(s), ref.is_valid(s)] for s in json.loads(sys.argv[1])]
print(json.dumps([before, type(sys.modules["rfc3987_syntax"]).__name__, out]))
"""


def _run(first: str) -> list:
    code = _CHECK.format(first=first)
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(IRIS)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_the_iri_checks_are_the_real_parsers_after_import_capnb():
    with_capnb = _run("import capnb, altair")
    without = _run("import altair")
    assert with_capnb[0] == "_StandIn" and without[0] == "module"  # deferred, then not
    assert with_capnb[1] == "module"  # the first check brought the real package in
    assert with_capnb[2] == without[2]  # the same answers
    assert [v for v, _ in without[2]] != [True] * len(IRIS)  # and the check does reject some


def test_nothing_is_installed_over_an_imported_package():
    from capnb import _deferred

    # the real package imported (the suite loads capnb first, so the stand-in may be there until
    # a first check): the stand-in must then stay out
    _deferred._real()

    assert _deferred.install() is False
    assert type(sys.modules["rfc3987_syntax"]).__name__ == "module"


def test_its_submodules_still_import_under_the_stand_in():
    code = "import capnb, rfc3987_syntax.utils as u; print(u.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "rfc3987_syntax.utils"


_DASK = """
import sys
{first}
import numpy as np
import xarray as xr
ds = xr.Dataset({{"a": ("x", np.arange(4.0))}}, coords={{"x": [1, 2, 3, 4]}})
(ds.a * 2).sel(x=2), repr(ds), ds.to_dataframe()
loaded = "dask.array" in sys.modules
import dask.array as da
chunked = xr.DataArray(da.ones(4, chunks=2), dims="x")
masked = xr.DataArray(da.ma.masked_less(da.arange(4, chunks=2), 1), dims="x")
print(loaded, chunked.chunks, type(chunked.data).__module__.split(".")[0],
      float(masked.sum()), bool(masked.isnull()[0]))
"""


@pytest.mark.parametrize("first", ["import capnb", "import xarray; import capnb", ""])
def test_xarray_imports_dask_array_only_for_dask_arrays(first):
    pytest.importorskip("dask.array")
    done = subprocess.run(
        [sys.executable, "-c", _DASK.format(first=first)], capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    loaded, *rest = done.stdout.split(" ", 1)
    assert loaded == ("True" if not first else "False")  # xarray alone imports it; capnb defers
    assert rest == ["((2, 2),) dask 6.0 True\n"]  # dask arrays are dask arrays, masks and all

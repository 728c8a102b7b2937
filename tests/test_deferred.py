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
    import rfc3987_syntax  # noqa: F401  (imported: the stand-in must stay out)

    from capnb import _deferred

    assert _deferred.install() is False
    assert type(sys.modules["rfc3987_syntax"]).__name__ == "module"


def test_its_submodules_still_import_under_the_stand_in():
    code = "import capnb, rfc3987_syntax.utils as u; print(u.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "rfc3987_syntax.utils"

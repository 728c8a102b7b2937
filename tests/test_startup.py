"""Start-up costs a worksheet pays before its first chart."""

import subprocess
import sys


def test_charts_do_not_import_the_slow_optional_iri_parser():
    # jsonschema's optional rfc3987-syntax builds an Earley parser on import (a second); capnb
    # defers it (capnb._deferred), and charts still validate without building it
    code = (
        "import sys, capnb.charts, altair as alt; "
        "alt.Chart({'values': [{'a': 1}]}).mark_point().encode(x='a:Q').to_dict(); "
        "print(type(sys.modules.get('rfc3987_syntax')).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() in {"_StandIn", "NoneType"}  # deferred, or not installed

"""How capnb's worksheets draw charts with no network, in JupyterLab and in exported HTML.

altair 6 emits vega-lite v6. JupyterLab 4's built-in vega extension draws only v3-v5, and altair's
default HTML output loads vega from a CDN, so offline neither draws anything. capnb's way, used by
every worksheet and by the report:

1. :func:`setup` (the first code cell of a worksheet) displays one HTML output that holds the vega +
   vega-lite + vega-embed bundle from ``vl-convert-python`` (no download: the bundle ships in that
   wheel). It runs once per page; a second copy is a no-op.
2. It enables the ``capnb`` altair renderer: each chart becomes a ``<div>`` and a small script that
   calls ``vegaEmbed`` once the bundle is there (charts output before the bundle wait in a queue).
3. It enables the ``capnb`` data transformer (:func:`records`): the same inline values as altair's
   default, built from each column's ``tolist()``. altair's default copies and converts the table
   through pandas first: a quarter of the time to draw the elasticity worksheet's Pareto chart.

Because the bundle is an ordinary cell output, an executed worksheet exported to HTML carries it
exactly once, and every chart in the file draws offline with its vega-lite params (sliders,
dropdowns) still live. :mod:`capnb.report` does that export.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
from pathlib import Path

__all__ = ["bundle_html", "chart_html", "records", "setup", "worksheet"]

RENDERER = "capnb"
_BUNDLE_MARK = "capnb-vega-bundle"
_counter = itertools.count()

_SNIPPET = """
window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;
var waiting = window.capnbVegaQueue || [];
window.capnbVegaQueue = { push: function (draw) { draw(); } };
waiting.forEach(function (draw) { draw(); });
"""


def _vegalite_version() -> str:
    import altair as alt
    import vl_convert as vlc

    wanted = ".".join(alt.VEGALITE_VERSION.split(".")[:2])
    if wanted not in vlc.get_vegalite_versions():
        raise RuntimeError(
            f"vl-convert-python {vlc.__version__} has no vega-lite {wanted} bundle (altair "
            f"{alt.__version__} needs it); upgrade vl-convert-python"
        )
    return wanted


@functools.cache
def _bundle_js() -> str:
    """The vega bundle, cached on disk (building it takes about 2 s)."""
    import vl_convert as vlc

    version = _vegalite_version()
    key = hashlib.sha1(f"{vlc.__version__}|{version}|{_SNIPPET}".encode()).hexdigest()[:16]
    cache = Path.home() / ".cache" / "capnb"
    path = cache / f"vega-bundle-{key}.js"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    js = vlc.javascript_bundle(_SNIPPET, vl_version=version)
    with contextlib.suppress(OSError):  # no writable cache: build the bundle again next time
        from .data import write_atomic

        write_atomic(path, js)
    return js


def bundle_html() -> str:
    """The ``<script>`` that defines ``vegaEmbed`` offline; a second copy on a page does nothing.

    The bundle declares top-level constants, so it is wrapped in a function to keep a second copy
    from clashing with the first.
    """
    return (
        f'<div class="{_BUNDLE_MARK}" style="display:none"></div>\n'
        '<script type="text/javascript">\n'
        'if (!window.vegaEmbed) { (function () { "use strict";\n'
        f"{_bundle_js()}\n"
        "})(); }\n</script>"
    )


def chart_html(spec: dict, *, embed_options: dict | None = None) -> str:
    """HTML for one chart: a div and a script that draws it with the offline ``vegaEmbed``."""
    text = json.dumps(spec, sort_keys=True)
    div = f"capnb-chart-{hashlib.sha1(text.encode()).hexdigest()[:10]}-{next(_counter)}"
    options = json.dumps({"renderer": "svg", "actions": False, **(embed_options or {})})
    return f"""<div id="{div}" class="capnb-chart"></div>
<script type="text/javascript">
(function () {{
  var draw = function () {{
    window.vegaEmbed("#{div}", {text}, {options}).catch(function (error) {{
      document.getElementById("{div}").textContent = "chart failed: " + error;
    }});
  }};
  if (window.vegaEmbed) {{ draw(); }}
  else {{ (window.capnbVegaQueue = window.capnbVegaQueue || []).push(draw); }}
}})();
</script>"""


def records(data) -> dict:
    """A chart's table as inline vega-lite values: altair's ``to_values``, faster on plain tables.

    A pandas DataFrame whose columns are all booleans, integers, floats or strings (what capnb's
    charts draw) is listed row by row from each column's ``tolist()``, with NaN and infinities as
    ``null``, as altair's default transformer writes them (tested on every chart; a missing value
    of an object column is ``null`` too, where altair 6 under pandas 3 leaves a NaN). Anything
    else (dates, categoricals, nullable dtypes, other data types) goes through altair's own
    ``to_values``, so the result is the same either way.
    """
    import numpy as np
    import pandas as pd
    from altair.utils.data import to_values

    plain = (
        isinstance(data, pd.DataFrame)
        and not isinstance(data.index, pd.MultiIndex)
        and not isinstance(data.columns, pd.MultiIndex)
        and data.columns.is_unique
        and all(isinstance(name, str) for name in data.columns)
    )
    if not plain or not len(data.columns):
        return to_values(data)
    columns = []
    for name in data.columns:
        column = data[name]
        kind = column.dtype.kind if isinstance(column.dtype, np.dtype) else ""
        if kind and kind in "biu":
            values = column.to_numpy().tolist()
        elif kind == "f":
            array = column.to_numpy()
            values = array.tolist()
            for i in np.flatnonzero(~np.isfinite(array)).tolist():
                values[i] = None
        elif kind == "O" or isinstance(column.dtype, pd.StringDtype):
            values = column.tolist()
            missing = column.isna().to_numpy()
            if missing.any():
                for i in np.flatnonzero(missing).tolist():
                    values[i] = None
            if not all(v is None or isinstance(v, str) for v in values):
                return to_values(data)
        else:
            return to_values(data)
        columns.append(values)
    names = list(data.columns)
    return {"values": [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]}


def _render(spec: dict, **embed_options) -> dict:
    return {"text/html": chart_html(spec, embed_options=embed_options or None)}


def setup():
    """Make altair charts draw offline; display the returned object once at the top of a worksheet.

    Returns
    -------
    IPython.display.HTML
        The vega bundle as an HTML output (hidden; about 0.9 MB).

    Examples
    --------
    >>> import capnb
    >>> capnb.notebook.setup()  # doctest: +SKIP
    """
    from IPython.display import HTML

    from .charts import import_altair

    alt = import_altair()  # skips a slow optional import of jsonschema's (see capnb.charts._altair)
    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, _render)
    alt.renderers.enable(RENDERER)
    if RENDERER not in alt.data_transformers.names():
        alt.data_transformers.register(RENDERER, records)
    alt.data_transformers.enable(RENDERER)
    return HTML(bundle_html())


def worksheet(path: str | Path, **parameters: object):
    """Run a worksheet notebook's cells headless up to its worksheet, and return it.

    The cells run in order in a fresh namespace (the ``parameters`` cell, then ``parameters`` as
    overrides, as :mod:`capnb.report` injects them) until one assigns ``ws``; that worksheet comes
    back with the notebook's own step function, so a script, a test or a benchmark drives exactly
    what a reader sees (``ws.set(...)``, ``ws["result"]``). Charts are not displayed.

    Parameters
    ----------
    path
        A worksheet name (``"02_memory"``) or a path to an ``.ipynb`` file.
    **parameters
        Values that override the notebook's ``parameters`` cell (``MODEL="Llama-3.1-8B"``).
    """
    import ast

    from .report import worksheet_path

    file = Path(path) if str(path).endswith(".ipynb") else worksheet_path(str(path))
    # the notebook's JSON read as is (nbformat would validate it through jsonschema: seconds)
    cells = json.loads(file.read_text(encoding="utf-8"))["cells"]
    namespace: dict[str, object] = {"__name__": f"worksheet_{file.stem}"}
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        exec(compile(source, str(file), "exec"), namespace)  # the reader's own code
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            namespace.update(parameters)
        assigned = {
            target.id
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        if "ws" in assigned:
            return namespace["ws"]
    raise ValueError(f"{file}: no cell assigns the worksheet `ws`")

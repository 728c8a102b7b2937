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
import html
import itertools
import json
import math
import os
import re
import warnings
from collections import OrderedDict
from pathlib import Path

__all__ = [
    "bundle_html",
    "chart_html",
    "chart_update",
    "keep_freed_memory",
    "over_hindsight",
    "rate",
    "records",
    "setup",
    "table",
    "trace_times",
    "worksheet",
]

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
    """The vega bundle, cached on disk (building it takes about 2 s).

    In ``$XDG_CACHE_HOME/capnb`` (``~/.cache/capnb``), beside the kernels' fallback cache.
    """
    import vl_convert as vlc

    version = _vegalite_version()
    key = hashlib.sha1(f"{vlc.__version__}|{version}|{_SNIPPET}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "capnb"
    path = cache / f"vega-bundle-{key}.js"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    js = vlc.javascript_bundle(_SNIPPET, vl_version=version)
    from .data import write_atomic
    from .errors import OutputError

    # no writable cache (a file where its folder goes, a full disk): build it again next time
    with contextlib.suppress(OSError, OutputError):  # write_atomic says OutputError, not OSError
        write_atomic(path, js)
    return js


# the one way a kept vega view takes new data, for a chart's script (chart_html) and for the live
# page's message (capnb.widgets.LiveCharts): the tables whose digest changed (``values(name)``
# gives their values), the param values, then one run
_GIVE = """window.capnbGive = function (kept, digests, signals, values) {
  Object.keys(digests).forEach(function (name) {
    // the same digest: the view holds these values already
    if (kept.digests[name] !== digests[name]) kept.view.data(name, values(name));
  });
  Object.keys(signals).forEach(function (name) { kept.view.signal(name, signals[name]); });
  kept.digests = digests;
  kept.view.runAsync().catch(function (error) {
    kept.element.textContent = "chart failed: " + error;
  });
};"""


def bundle_html() -> str:
    """The ``<script>`` that defines ``vegaEmbed`` offline; a second copy on a page does nothing.

    The bundle declares top-level constants, so it is wrapped in a function to keep a second copy
    from clashing with the first. The same script defines how a kept view takes new data
    (``capnbGive``).
    """
    return (
        f'<div class="{_BUNDLE_MARK}" style="display:none"></div>\n'
        '<script type="text/javascript">\n'
        f"{_GIVE}\n"
        'if (!window.vegaEmbed) { (function () { "use strict";\n'
        f"{_bundle_js()}\n"
        "})(); }\n</script>"
    )


_VIEW_NAME = re.compile(r'"view_[0-9a-f]{16}"')


_VIEW_KEYS = ("mark", "layer", "vconcat", "hconcat", "concat", "facet", "repeat")


def _nodes(node, skip: tuple[str, ...]):
    """Every dict of a spec, each before what it holds, not entering the keys in ``skip``.

    A caller may replace a value of the dict it is given: what it holds is read after.
    """
    if isinstance(node, list):
        for item in node:
            yield from _nodes(item, skip)
    elif isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key not in skip:
                yield from _nodes(value, skip)


def _lift_titles(spec, titles: list) -> None:
    """Make each chart title a param's value (``capnb_title_0``...), in place; list the texts."""
    for node in _nodes(spec, ("title", "data", "datasets")):
        title = node.get("title")
        if not any(k in node for k in _VIEW_KEYS) or title is None:
            continue
        text = title.get("text") if isinstance(title, dict) else title
        if isinstance(text, str) or (
            isinstance(text, list) and all(isinstance(t, str) for t in text)
        ):
            name = f"capnb_title_{len(titles)}"
            titles.append(text)
            expr = {"expr": name}
            node["title"] = {**title, "text": expr} if isinstance(title, dict) else {"text": expr}


def _numbers(value) -> bool:
    return (
        isinstance(value, list)
        and len(value) >= 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )


def _lift_domains(spec, domains: dict) -> None:
    """Make each numeric scale domain a param's value (``capnb_domain_0``...), in place.

    ``domains`` maps each domain (as JSON) to its param's name: layers that share a domain share
    its param.
    """
    for node in _nodes(spec, ("data", "datasets", "params", "config")):
        scale = node.get("scale")
        if isinstance(scale, dict) and _numbers(scale.get("domain")):
            text = json.dumps(scale["domain"])
            name = domains.setdefault(text, f"capnb_domain_{len(domains)}")
            node["scale"] = {**scale, "domain": {"expr": name}}


def _param_values(spec, values: dict, *, strip: bool) -> None:
    """Collect the values of variable params (no ``select``) by name; with ``strip``, remove them."""
    for node in _nodes(spec, ("data", "datasets")):
        for param in node.get("params") or []:
            if isinstance(param, dict) and "select" not in param and "value" in param:
                values[param["name"]] = param.pop("value") if strip else param["value"]


def _named_datasets(spec: dict) -> tuple[dict, dict, dict, str]:
    """A chart's spec as a worksheet draws it again: spec, datasets, param values, and its shape.

    altair names a dataset, and each layer of a layered chart, after a hash of its values, so new
    values give the spec new names; here they are named by position (``capnb-data-0``...). Chart
    titles often carry numbers of the data: each becomes the value of a top-level param
    (``capnb_title_0``...). The shape is the spec without its datasets and without the values of
    its variable params (titles included): a chart drawn again with the same shape differs only in
    data and param values, which a live vega view takes without being built again. Numeric scale
    domains (an axis fitted to the data) become param values too (``capnb_domain_0``...).
    """
    datasets = spec.get("datasets") or {}
    rest = {k: v for k, v in spec.items() if k != "datasets"}
    text = json.dumps(rest, sort_keys=True)
    views: dict[str, str] = {}
    text = _VIEW_NAME.sub(
        lambda m: views.setdefault(m.group(0), f'"capnb-view-{len(views)}"'), text
    )
    renamed = {}
    for i, (name, values) in enumerate(datasets.items()):
        new = f"capnb-data-{i}"
        text = text.replace(json.dumps(name), json.dumps(new))
        renamed[new] = values
    rest = json.loads(text)
    titles: list = []
    _lift_titles(rest, titles)
    domains: dict[str, str] = {}
    _lift_domains(rest, domains)
    lifted = [{"name": f"capnb_title_{i}", "value": t} for i, t in enumerate(titles)]
    lifted += [{"name": name, "value": json.loads(text)} for text, name in domains.items()]
    if lifted:
        rest["params"] = [*rest.get("params", []), *lifted]
    signals: dict = {}
    _param_values(rest, signals, strip=False)
    shape = json.loads(json.dumps(rest))
    _param_values(shape, {}, strip=True)
    return rest, renamed, signals, json.dumps(shape, sort_keys=True)


def _finite(value):
    # JSON has no NaN or infinity: vega reads null as missing, as it reads NaN
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _json(values) -> str:
    """A dataset's values as strict JSON (``JSON.parse`` reads no NaN): non-finite numbers as null."""
    try:
        return json.dumps(values, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(values), allow_nan=False)


_TEXTS: OrderedDict = OrderedDict()  # altair's dataset name -> its values as JSON, the last few
_TEXTS_SIZE = 32
_DIGEST_NAME = re.compile(r"data-[0-9a-f]{32}")


def _table_text(name: str, values) -> str:
    """A dataset's values as the text of a JSON script element: ``<`` escaped, so no text ends it.

    A dataset altair named after a digest of its values is written out once per name (the last
    few): the same name means the same values, so a chart drawn again with a table it drew before
    (the Pareto chart's runs, a forecast's series) does not write it out again.
    """
    if not _DIGEST_NAME.fullmatch(name):
        return _escaped(values)
    text = _TEXTS.get(name)
    if text is None:
        text = _TEXTS[name] = _escaped(values)
        while len(_TEXTS) > _TEXTS_SIZE:
            _TEXTS.popitem(last=False)
    else:
        _TEXTS.move_to_end(name)
    return text


def _escaped(values) -> str:
    return _in_script(_json(values))


#: Characters a JSON text is written with as escapes inside an HTML ``<script>`` element: ``<``
#: and ``>`` (no ``</script>`` or ``<!--`` can end or bend the element), ``&`` (for XHTML-minded
#: readers), and U+2028/U+2029 (line breaks to older JavaScript parsers). json.dumps escapes none.
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


def _in_script(text: str) -> str:
    """A JSON text made safe inside a ``<script>`` element: the same value, no HTML in it."""
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group()], text)


def script_json(value, **options) -> str:
    """``json.dumps(value)`` safe to write inside an HTML ``<script>`` element (see _in_script)."""
    return _in_script(json.dumps(value, **options))


def _keyed(spec: dict) -> tuple[dict, dict]:
    """A spec drawn under a key: the spec without its data, and what a kept view of it needs."""
    rest, datasets, signals, form = _named_datasets(spec)
    digests = dict(zip(datasets, spec.get("datasets") or {}, strict=True))
    update = {
        "shape": hashlib.sha1(form.encode()).hexdigest()[:16],
        "digests": digests,
        "tables": {name: _table_text(digests[name], v) for name, v in datasets.items()},
        "signals": signals,
    }
    return rest, update


def chart_update(spec: dict, key: str) -> dict:
    """A chart drawn again under ``key``, as a message for its kept vega view in a live page.

    The message holds the chart's shape (see :func:`_named_datasets`), each dataset's digest and
    its values as JSON text, and its param values: what :func:`chart_html`'s script gives a kept
    view, without a new output. :class:`capnb.widgets.Worksheet` sends it through the notebook's
    live channel when the chart keeps its shape; the page draws it in the view already there.
    """
    return {"key": key, **_keyed(spec)[1]}


def chart_html(spec: dict, *, embed_options: dict | None = None, key: str | None = None) -> str:
    """HTML for one chart: a div and a script that draws it with the offline ``vegaEmbed``.

    With a ``key`` (a worksheet's displayed chart: one per display), the drawn vega view is kept in
    the page under that key. When the chart is drawn again under the same key with the same shape
    (the spec apart from its data, its titles and its params' values: see :func:`_named_datasets`),
    the script puts the kept view in place of the new div and gives it the new datasets
    (``view.data``) and param values (``view.signal``): vega updates its SVG in place instead of
    compiling, parsing and laying out a new chart. A dataset whose values the view holds already
    (altair names a dataset after a digest of its values: the same name, the same values) is not
    given again, so vega does not run the marks drawn from it again, nor does the page read it: each
    dataset comes in a JSON script element of its own, parsed only when it is given to a view.
    Anything else (a first drawing, a new shape, a kept view still on the page, an error) draws the
    chart from scratch.
    The output still holds the whole spec, so a saved notebook or an exported report draws it as
    any other chart.
    """
    # every value written into the script is JSON with "<", ">" and "&" escaped: a title, label
    # or path holding "</script>" stays a string (user strings reach the spec as chart text)
    if key is None:
        text = json.dumps(spec, sort_keys=True)
        shape = hashlib.sha1(text.encode()).hexdigest()[:16]
        text = _in_script(text)
    else:
        rest, update = _keyed(spec)
        shape, digests, signals = update["shape"], update["digests"], update["signals"]
        text = script_json(rest, sort_keys=True)
    div = f"capnb-chart-{shape[:10]}-{next(_counter)}"
    options = script_json({"renderer": "svg", "actions": False, **(embed_options or {})})
    if key is None:
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
    # each dataset as JSON in an element of its own ("<" escaped, so no text ends the element)
    tables = div.replace("capnb-chart-", "capnb-tables-")
    elements = "".join(
        f'<script type="application/json" id="{html.escape(f"{tables}-{name}")}">{table}</script>\n'
        for name, table in update["tables"].items()
    )
    return f"""<div id="{div}" class="capnb-chart"></div>
{elements}<script type="text/javascript">
(function () {{
  var key = {script_json(key)}, shape = "{shape}", signals = {script_json(signals)};
  var digests = {script_json(digests)};
  var views = (window.capnbViews = window.capnbViews || {{}});
  var values = function (name) {{
    return JSON.parse(document.getElementById("{tables}-" + name).textContent);
  }};
  var embed = function () {{
    var spec = {text};
    spec.datasets = {{}};
    Object.keys(digests).forEach(function (name) {{ spec.datasets[name] = values(name); }});
    window.vegaEmbed("#{div}", spec, {options}).then(function (result) {{
      views[key] = {{ shape: shape, view: result.view, element: document.getElementById("{div}"),
                     digests: digests }};
    }}).catch(function (error) {{
      document.getElementById("{div}").textContent = "chart failed: " + error;
    }});
  }};
  var reuse = function () {{
    // the same chart with new data: keep its vega view (no compile, no new layout), swap the data
    var kept = views[key], element = document.getElementById("{div}");
    if (!kept || kept.shape !== shape || kept.element.isConnected || !element) return false;
    element.replaceWith(kept.element);
    try {{
      window.capnbGive(kept, digests, signals, values);
    }} catch (error) {{
      kept.element.replaceWith(element);
      delete views[key];
      return false;
    }}
    return true;
  }};
  var draw = function () {{ if (!reuse()) embed(); }};
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


# Python's own format, for every other warning (not whatever formatwarning is at import: the
# command line installs its own while it runs)
_FORMAT = getattr(warnings, "_formatwarning_orig", warnings.formatwarning)


def _one_line(message, category, filename, lineno, line=None) -> str:
    """A warning of capnb's as a reader sees it: the kind and the message, no source path."""
    if category.__module__.split(".")[0] == "capnb":
        return f"{category.__name__}: {message}\n"
    return _FORMAT(message, category, filename, lineno, line)


def setup(*, keep_memory: bool | None = None):
    """Make altair charts draw offline; display the returned object once at the top of a worksheet.

    Also prints capnb's own warnings as one line each (``TraceWarning: ...``), without the path of
    the module that raised them: a report's readers see what was repaired, not capnb's files. And,
    unless ``keep_memory=False`` (or, when it is not given, ``CAPNB_KEEP_MEMORY=0`` in the
    kernel's environment, to measure both), the kernel keeps the memory it frees for its next
    changes (:func:`keep_freed_memory`).

    Returns
    -------
    IPython.display.HTML
        The vega bundle as an HTML output (hidden; about 0.9 MB).

    Examples
    --------
    >>> import capnb
    >>> capnb.notebook.setup()  # doctest: +SKIP
    """
    import altair as alt
    from IPython.display import HTML

    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, _render)
    alt.renderers.enable(RENDERER)
    if RENDERER not in alt.data_transformers.names():
        alt.data_transformers.register(RENDERER, records)
    alt.data_transformers.enable(RENDERER)
    warnings.formatwarning = _one_line
    if keep_memory is None:
        keep_memory = os.environ.get("CAPNB_KEEP_MEMORY", "1").strip().lower() not in _OFF
    if keep_memory:
        keep_freed_memory()
    return HTML(bundle_html())


_OFF = ("0", "false", "no", "off")

# glibc's mallopt parameters (malloc.h) and the values keep_freed_memory gives them
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's ceiling for it on 64-bit systems
_TRIM_THRESHOLD = 2**31 - 1  # the largest value mallopt takes (a C int): never give the heap back


def keep_freed_memory() -> bool:
    """Keep the memory this process frees for its next allocations; True if it could (glibc).

    Each change of a worksheet allocates per-step arrays of a whole trace and frees the last ones:
    about 100 MB for a new tolerance on the elasticity worksheet's 1.2M steps. glibc gives such
    blocks back to the operating system when they are freed (blocks above its mmap threshold, and
    a heap top larger than its trim threshold), and takes new pages for the next change. On a
    virtual machine whose host takes back the guest's free pages (virtio-balloon free page
    reporting, as on the Firecracker VMs capnb's benchmarks run on), each new page then costs what
    the host pays to give it again: measured there, 18-36 us per 4-KiB page against 0.6 us for a
    page the process reuses. With blocks up to 32 MiB taken from the heap and the heap never
    trimmed, the process reuses its own pages. There, on worksheet 04, a change that simulates a
    new run took 0.07-0.10 s instead of 0.12-0.16 s, a new cold start 0.54-0.66 s instead of
    0.59-0.90 s. Changes between values already visited gain nothing (BENCHMARKS.md, round 7). The
    process stays at its peak size (worksheet 04: 0.88-0.99 GB against 0.70-0.75 GB).

    Does nothing (returns False) where malloc is not glibc's.
    """
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:  # pragma: no cover - glibc always has it
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success
    return bool(
        mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
        and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    )


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
    import linecache

    from .report import worksheet_path

    file = Path(path) if str(path).endswith(".ipynb") else worksheet_path(str(path))
    # the notebook's JSON read as is (nbformat would validate it through jsonschema: seconds)
    cells = json.loads(file.read_text(encoding="utf-8"))["cells"]
    namespace: dict[str, object] = {"__name__": f"worksheet_{file.stem}"}
    sources = [
        "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for cell in cells
        if cell["cell_type"] == "code"
    ]
    assigns_ws = [
        "ws"
        in {
            target.id
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for source in sources
    ]
    if not any(assigns_ws):  # a worksheet without controls (00, 05): said before anything runs
        raise ValueError(
            f"{file}: no cell assigns a worksheet `ws` (it has no controls to drive); run it "
            f"whole with capnb.report.execute({str(path)!r}, parameters={{...}}), which returns "
            "the executed notebook, or capnb.report.run_worksheet for its HTML page"
        )
    code_cells = [cell for cell in cells if cell["cell_type"] == "code"]
    for number, (cell, source) in enumerate(zip(code_cells, sources, strict=True), 1):
        # each cell under a name of its own, its code in linecache: a traceback shows the cell's
        # line that raised, not the line of the notebook's JSON with the same number
        name = f"{file}, code cell {number}"
        linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
        exec(compile(source, name, "exec"), namespace)  # the reader's own code
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            namespace.update(parameters)
        if assigns_ws[number - 1]:
            return namespace["ws"]
    raise AssertionError("unreachable: a cell assigns `ws`")


def rate(value: float) -> str:
    """A rate in requests/s as the plan's words write it, with its unit.

    Whole from 100 up, three significant digits below.

    >>> rate(1.1612), rate(257.3)
    ('1.16 requests/s', '257 requests/s')
    """
    from . import words

    return f"{words.rate(value)} requests/s"


def over_hindsight(value: float) -> str:
    """An over-provisioning ratio over the hindsight plan's, as a worksheet's table shows it.

    Where the hindsight plan (the scored days' own quantiles) held no idle capacity, as on a series
    that repeats itself exactly, the ratio has no finite value: it says so instead of ``infx``.

    >>> over_hindsight(1.234), over_hindsight(float("inf"))
    ('1.23x', 'no ratio: the hindsight plan held none idle')
    """
    if math.isinf(value):
        return "no ratio: the hindsight plan held none idle"
    return f"{value:.2f}x"


def trace_times(times) -> list[str]:
    """Times of a trace as capnb's words write them, one string each (no unit: text).

    ``2026-10-19 00:00``, or ``day 8 22:30`` for a trace with no date (its loader's placeholder
    year), as the plan's sentences write them: for a table's index or a chart's labels.

    >>> trace_times(["2026-10-19T00:00:00", "2026-10-19T22:30:00"])
    ['2026-10-19 00:00', '2026-10-19 22:30']
    """
    import numpy as np

    from . import words

    return [words.when(str(time)) for time in np.asarray(times, dtype="datetime64[ns]")]


def table(frame, *formats, na_rep: str | None = None):
    """A worksheet's table: a pandas Styler whose every cell and label is HTML-escaped.

    A table shows the user's own names (a GPU, a model, a series), and pandas' Styler writes them
    into the page as they are: a name holding ``<script>`` would run in the report. Every cell is
    escaped first, then each format is laid over its columns (escaped as well).

    Parameters
    ----------
    frame
        The pandas DataFrame to show.
    *formats
        Each a format for every cell (``"{:.1%}"``), a mapping column -> format, or a pair
        ``(format, columns)``; later ones win where they overlap.
    na_rep
        What a missing value reads as (e.g. ``"no data"``).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"gpu": ["<b>H100</b>"], "share": [0.25]})
    >>> html = table(frame, {"share": "{:.0%}"}).to_html()
    >>> "&lt;b&gt;H100&lt;/b&gt;" in html and "25%" in html
    True
    """
    styler = frame.style.format(None, na_rep=na_rep, escape="html")
    for fmt in formats:
        fmt, subset = fmt if isinstance(fmt, tuple) else (fmt, None)
        styler = styler.format(fmt, subset=subset, na_rep=na_rep, escape="html")
    return styler.format_index(escape="html", axis=0).format_index(escape="html", axis=1)

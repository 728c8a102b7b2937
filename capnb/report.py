"""Execute worksheets and write them as self-contained HTML reports that draw offline, for readers.

A report is the executed worksheets exported with capnb's nbconvert template
(``capnb/templates/capnb_report``): JupyterLab's look, no script loaded from the network, the vega bundle
carried once by the worksheet's :func:`capnb.notebook.setup` output, and each widget panel replaced by
the record of its values (a report has no kernel to drive widgets). For its readers:

- the combined report opens on the plan in numbers (:func:`summary_html`, read from the plan
  Dataset and its text: capnb.plan decides, the report only shows), then a linked table of
  contents, then one titled section per step with its charts and the sentences that explain them;
- code is hidden unless asked for (``show_code``); a worksheet's checks (the cells tagged
  ``checks``, or under its ``## Checks`` heading) are never shown: they ran, or there would be no
  report;
- the answer cells (tagged ``answer``) are set as prose with their numbers in bold;
- print CSS keeps each chart on one page and hides the controls.

Files are written atomically: a failed run leaves any previous report in place.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from . import words
from .data import check_set, write_atomic, write_set
from .errors import ConfigError, InputError, OutputError

__all__ = [
    "REPORT_NAME",
    "WORKSHEETS",
    "check_plan_inputs",
    "combine",
    "elasticity_parameters",
    "execute",
    "export_html",
    "run_report",
    "run_worksheet",
    "summary_html",
    "worksheet_path",
]

#: The worksheets the main job runs, in order.
WORKSHEETS = (
    "00_start_here",
    "01_forecasting",
    "02_memory",
    "03_capacity",
    "04_elasticity",
    "05_plan",
    "06_serving",
)

#: File name of the combined report.
REPORT_NAME = "capnb_report.html"


def _page_name(worksheet: str) -> str:
    """File name of one worksheet's page (``03_capacity`` -> ``03_capacity.html``)."""
    return f"{worksheet}.html"


_BUNDLE_MARK = 'class="capnb-vega-bundle"'

_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def worksheet_path(name: str) -> Path:
    """Path of a bundled worksheet (``"02_memory"`` or ``"02_memory.ipynb"``)."""
    stem = name.removesuffix(".ipynb")
    if "/" in stem or os.sep in stem or stem in {"", ".", ".."}:
        raise FileNotFoundError(
            f"worksheet {name!r}: give a bundled worksheet's name, not a path (known: "
            f"{', '.join(WORKSHEETS)}); run a notebook of your own with capnb.report.execute"
        )
    installed = resources.files("capnb") / "notebooks"
    root = Path(str(installed)) if installed.is_dir() else Path(__file__).parents[1] / "notebooks"
    path = root / f"{stem}.ipynb"
    if not path.is_file():
        from .errors import UnknownNameError

        known = sorted(p.stem for p in root.glob("*.ipynb"))
        # a name the user gave (capnb report --worksheet): said as capnb says an unknown GPU
        raise UnknownNameError("worksheet", name, known, add=f"the worksheets are in {root}")
    return path


def _inject_parameters(notebook, parameters: Mapping[str, object]) -> None:
    """Insert a cell assigning ``parameters`` after the cell tagged ``parameters`` (papermill's way)."""
    import nbformat

    lines = [f"{name} = {value!r}" for name, value in parameters.items()]
    cell = nbformat.v4.new_code_cell("# Parameters injected by capnb report\n" + "\n".join(lines))
    cell.metadata["tags"] = ["injected-parameters"]
    for index, existing in enumerate(notebook.cells):
        if "parameters" in existing.get("metadata", {}).get("tags", []):
            notebook.cells.insert(index + 1, cell)
            return
    raise ValueError("the worksheet has no cell tagged 'parameters' to override")


def _static_widgets(notebook) -> None:
    # Keep the plain record a worksheet puts beside its widget view, set as a line of prose; drop
    # the view itself.
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if _WIDGET_MIME in data:
                del data[_WIDGET_MIME]
                record = "".join(data.get("text/plain", ""))
                if record and "text/html" not in data:
                    data["text/html"] = f'<p class="capnb-record">{html.escape(record)}</p>'
    notebook.metadata.pop("widgets", None)


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _heading(cell) -> tuple[int, str] | None:
    """(level, text) of a markdown cell that opens with a heading."""
    if cell.cell_type != "markdown":
        return None
    first = cell.source.lstrip().split("\n", 1)[0]
    match = re.match(r"(#{1,6})\s+(.*)", first)
    return (len(match.group(1)), match.group(2).strip()) if match else None


def _plain(text: str) -> str:
    """A heading's text without its markdown: `code`, **bold** and *emphasis* marks."""
    return re.sub(r"[`*_]", "", text).strip()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", _plain(text).lower()).strip("-")[:60] or "section"


def _anchor(name: str) -> str:
    """A worksheet's section id: ``01_forecasting`` -> ``step-01-forecasting``."""
    return "step-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _checks(notebook) -> set[int]:
    """Indexes of a worksheet's check cells: tagged ``checks``, or under its ``## Checks`` heading."""
    found, inside = set(), False
    for index, cell in enumerate(notebook.cells):
        heading = _heading(cell)
        if heading and heading[0] <= 2:
            inside = _plain(heading[1]).lower() == "checks"
        if inside or "checks" in _tags(cell):
            found.add(index)
    return found


# 1,414 is one number; the comma after "in 6 of 7," is the sentence's
_ONE = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?::\d\d)?"
# not inside a date (2025-03-12), a word (5-minute, 314,080-token) or a number: no word character
# or dash on either side, no digit and comma before or comma and digit after
_NUMBER = re.compile(
    rf"(?<![\w.\-+/:])(?<!\d,)([-+]?{_ONE}(?:(?:\s?%)?\s?[-\u2013]\s?{_ONE})?(?:\s?%|x)?)"
    r"(?![\w\-]|,\d)"
)
# a time on the loaders' placeholder date (a trace with no date), as the plan's text writes it
_PLACEHOLDER_TIME = re.compile(
    rf"\b{words.PLACEHOLDER_YEAR}-01-(\d\d)[T ](\d\d:\d\d)(?::\d\d(?:\.\d+)?)?"
)


def _bold_numbers(escaped: str) -> str:
    """Numbers of an (escaped) sentence set apart in bold: 8.80, 1,414, 13%, 4x, 36-58, 18:00."""
    return _NUMBER.sub(r"<strong>\1</strong>", escaped)


def _undated(text: str) -> str:
    """``1970-01-08T22:30`` (a trace with no date) as the reader's ``day 8 22:30``."""
    return _PLACEHOLDER_TIME.sub(lambda m: words.when(m.group(0).replace(" ", "T")), text)


#: The lines of the commands a plan gives to settle a close call (``plan._closecall.benchmark_commands``):
#: shown as they are to be pasted, in a block of their own, numbers not set apart.
_COMMAND = re.compile(r"^(# on \d+ x |for c in |capnb plan )")


def _is_command(line: str) -> bool:
    """Whether a line of a plan's text is one of its commands (the engines' servers' too)."""
    from .plan import SERVERS

    return bool(_COMMAND.match(line)) or any(
        line.startswith(" ".join(server.host) + " ") for server in SERVERS.values()
    )


def _prose(text: str) -> str:
    """Lines of plain text as HTML paragraphs, numbers in bold; ``- `` lines a list, commands a block."""
    parts, items, commands = [], [], []

    def close() -> None:
        if items:
            parts.append("<ul>" + "".join(items) + "</ul>")
            items.clear()
        if commands:
            parts.append(f'<pre class="capnb-commands">{html.escape(chr(10).join(commands))}</pre>')
            commands.clear()

    for line in _undated(text).strip().splitlines():
        line = line.strip()
        if not line:
            continue
        if _is_command(line):
            if items:
                close()
            commands.append(line)
        elif line.startswith("- "):
            if commands:
                close()
            items.append(f"<li>{_bold_numbers(html.escape(line[2:]))}</li>")
        else:
            close()
            parts.append(f"<p>{_bold_numbers(html.escape(line))}</p>")
    close()
    return "".join(parts)


def _answer_outputs(cell) -> None:
    """An answer cell's printed text, set as prose (a proportional font, numbers in bold)."""
    import nbformat

    def live(output) -> bool:  # a worksheet's answer view: a widget, its sentence as plain text
        return _WIDGET_MIME in output.get("data", {})

    text = "".join(
        "".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("name") == "stdout"
    ) + "".join(
        "".join(o["data"].get("text/plain", "")) + "\n" for o in cell.get("outputs", []) if live(o)
    )
    if not text.strip():
        return
    others = [o for o in cell.outputs if o.get("output_type") != "stream" and not live(o)]
    answer = nbformat.v4.new_output(
        "display_data",
        data={
            "text/html": f'<div class="capnb-answer">{_prose(text)}</div>',
            "text/plain": text,
        },
    )
    cell.outputs = [answer, *others]


def _raw(source: str):
    """A raw cell capnb's template writes out as it is (capnb's own HTML, never the worksheet's)."""
    import nbformat

    cell = nbformat.v4.new_raw_cell(source)
    cell.metadata["capnb"] = True
    return cell


def _for_readers(notebook, *, show_code: bool, prefix: str) -> list[tuple[int, str, str]]:
    """Shape an executed worksheet for readers, in place; return its contents ``(level, id, text)``.

    Check cells go; answer cells become prose; without ``show_code``, code cells that show nothing
    go (their inputs are left out by the exporter), and so does the prose about the code (cells
    tagged ``about-code``: the inputs cell, the step function); every heading of level 1-2 gets an anchor
    (``prefix``-slug), the first one the section's own id (``prefix``).
    """
    checks = _checks(notebook)
    kept, contents, seen = [], [], set()
    notes = notebook.metadata.setdefault("capnb_notes", [])
    for index, cell in enumerate(notebook.cells):
        if index in checks:
            continue
        _take_warnings(cell, notes)
        if not show_code and "about-code" in _tags(cell):
            continue  # prose about the code (the parameters cell, the step function): with the code
        if cell.cell_type == "code":
            if "answer" in _tags(cell):
                _answer_outputs(cell)
            if not show_code and not cell.get("outputs"):
                continue
        heading = _heading(cell)
        if heading and heading[0] <= 2:
            anchor = prefix if not contents else f"{prefix}-{_slug(heading[1])}"
            while anchor in seen:
                anchor += "-x"
            seen.add(anchor)
            contents.append((heading[0], anchor, _plain(heading[1])))
            kind = "capnb-section" if not kept and heading[0] == 1 else "capnb-anchor"
            kept.append(_raw(f'<div id="{anchor}" class="{kind}"></div>'))
        kept.append(cell)
    notebook.cells = kept
    if contents:
        notebook.metadata["title"] = f"{contents[0][2]} — capnb report"
    return contents


_WARNING_LINE = re.compile(r"^(?:capnb: )?[A-Z]\w*Warning: .+$")


def _take_warnings(cell, notes: list[str]) -> None:
    """Move the warnings a cell printed (capnb's one-line form) into ``notes``, each once.

    A reader sees a warning once, among the notes on the inputs, not as a box in every section
    that read the same file.
    """
    for output in cell.get("outputs", []):
        if output.get("output_type") != "stream" or output.get("name") != "stderr":
            continue
        lines = "".join(output.get("text", "")).splitlines()
        for line in lines:
            if _WARNING_LINE.match(line) and line not in notes:
                notes.append(line)
        output["text"] = "".join(f"{kept}\n" for kept in lines if not _WARNING_LINE.match(kept))
    if cell.get("outputs"):
        cell["outputs"] = [
            o for o in cell["outputs"] if o.get("output_type") != "stream" or o.get("text")
        ]


def _notes_by_section(sections) -> list[str]:
    """Each note once, with the sections that read that input.

    A worksheet may read a bundled file of its own (a trace with block hashes), which the reader
    must not take for theirs.
    """
    where: dict[str, list[str]] = {}
    for nb in sections:
        title = nb.metadata.get("title", "").removesuffix(" — capnb report")
        for note in nb.metadata.get("capnb_notes", []):
            where.setdefault(note, [])
            if title and title not in where[note]:
                where[note].append(title)
    return [f"{n} (read in: {'; '.join(t)})" if t else n for n, t in where.items()]


def _notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f'<div class="capnb-notes"><p>Notes on reading the inputs:</p><ul>{items}</ul></div>'


def _toc(entries: list[tuple[int, str, str]], *, title: str = "Contents") -> str:
    """A linked table of contents: level-1 entries, each with its level-2 entries below."""
    rows, open_sub = [], False
    top = min((level for level, _, _ in entries), default=1)
    for level, anchor, text in entries:
        level -= top - 1  # a page's own contents (its sections only) are one flat list
        link = f'<a href="#{anchor}">{html.escape(text)}</a>'
        if level <= 1:
            if open_sub:
                rows.append("</ol></li>")
                open_sub = False
            elif rows:
                rows.append("</li>")
            rows.append(f"<li>{link}")
        else:
            if not open_sub:
                rows.append("<ol>")
                open_sub = True
            rows.append(f"<li>{link}</li>")
    rows.append("</ol></li>" if open_sub else "</li>" if rows else "")
    return f'<nav class="capnb-toc" id="contents"><h2>{title}</h2><ol>{"".join(rows)}</ol></nav>'


def export_html(notebook, *, show_code: bool = False, prepared: bool = False) -> str:
    """Export an executed notebook node to capnb's offline HTML, for readers.

    Parameters
    ----------
    notebook
        An executed worksheet (:func:`execute`) or a combined report (:func:`combine`).
    show_code
        Include the code cells' inputs (the check cells stay out either way).
    prepared
        The notebook was already shaped for readers (:func:`combine` does it).
    """
    from nbconvert import HTMLExporter

    if not prepared:
        notebook = _page(notebook, show_code=show_code)
    _static_widgets(notebook)
    templates = resources.files("capnb") / "templates"
    exporter = HTMLExporter(
        template_name="capnb_report",
        extra_template_basedirs=[str(templates)],
        exclude_input=not show_code,
        exclude_input_prompt=not show_code,
        exclude_output_prompt=True,
    )
    title = notebook.metadata.get("title", "capnb report")
    page, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": title}})
    return page


def _page(notebook, *, show_code: bool):
    """One worksheet's page: titled, its contents linked under its introduction."""
    import copy

    notebook = copy.deepcopy(notebook)
    name = notebook.metadata.get("capnb_worksheet", "worksheet")
    contents = _for_readers(notebook, show_code=show_code, prefix=_anchor(name))
    first = next((i for i, c in enumerate(notebook.cells) if c.cell_type == "markdown"), -1)
    if len(contents) > 1:
        notebook.cells.insert(first + 1, _raw(_toc(contents[1:], title="On this page")))
    if notebook.metadata.get("capnb_notes"):
        notebook.cells.insert(first + 1, _raw(_notes_html(notebook.metadata["capnb_notes"])))
    return notebook


def execute(
    name: str | os.PathLike,
    *,
    parameters: Mapping[str, object] | None = None,
    timeout: int = 600,
    kernel: _Kernel | None = None,
):
    """Execute a worksheet headless and return the executed notebook node.

    In a fresh kernel, or in ``kernel`` (:func:`run_report`'s kernels, each reset to its state at
    start before the worksheet runs: see :class:`_Kernel`).

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        A cell failed; the message names the worksheet and shows the cell.
    """
    import nbformat
    from nbclient.exceptions import CellExecutionError

    path = Path(name) if str(name).endswith(".ipynb") else worksheet_path(str(name))
    notebook = nbformat.read(path, as_version=4)
    if parameters:
        _inject_parameters(notebook, parameters)
    try:
        if kernel is not None:
            kernel.run(notebook, path.parent, timeout)
        else:
            with _Kernel() as fresh:
                fresh.run(notebook, path.parent, timeout)
    except CellExecutionError as error:
        ename, evalue = _shown_error(error)
        raised = CellExecutionError(f"worksheet {path.name} failed:\n{error}", ename, evalue)
        # an error of any kind in a closing check is capnb's (its checks read the worksheet's
        # numbers), not an input the worksheet cannot apply to: run_report words it as such
        raised.in_checks = any(
            "checks" in cell.metadata.get("tags", ()) and cell.source.strip()
            and cell.source.strip() in str(error)
            for cell in notebook.cells
        )  # fmt: skip
        raise raised from None
    notebook.metadata["capnb_worksheet"] = path.stem
    return notebook


def _shown_error(error) -> tuple[str, str]:
    """The error's type and message; for an error while showing a cell's result, the traceback's.

    ipykernel replies to an error raised by the display hook (a chart's or table's repr) with no
    exception: type ``NoneType``, message ``None``; the traceback's last ``Type: message`` line
    names it.
    """
    if (error.ename, error.evalue) != ("NoneType", "None"):
        return error.ename, error.evalue
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).splitlines()
    kinds = r"([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)): ?(.*)"
    for i in range(len(plain) - 1, -1, -1):
        named = re.match(kinds, plain[i])
        if named:
            return named[1], "\n".join([named[2], *plain[i + 1 :]]).strip()
    return "error while showing the cell's result", "(no exception given by the kernel)"


#: Run in a kernel as it starts: what a worksheet may change and the next must not see.
_SNAPSHOT = """
def _capnb_snapshot():
    import os, sys, types, warnings
    sys.modules["_capnb_kernel_start"] = types.SimpleNamespace(
        environ=dict(os.environ), path=list(sys.path), filters=list(warnings.filters))
_capnb_snapshot()
del _capnb_snapshot
"""

#: Run in a kept kernel before its next worksheet (``{folder!r}``: the worksheet's folder).
_RESET = """
def _capnb_reset(folder):
    import itertools, os, sys, warnings
    start = sys.modules["_capnb_kernel_start"]
    os.environ.clear()
    os.environ.update(start.environ)
    sys.path[:] = start.path
    warnings.resetwarnings()  # also forgets which warnings were shown once
    warnings.filters[:] = start.filters
    os.chdir(folder)
    for module, name in _COUNTERS:  # chart and view ids count from 0, as in a fresh kernel
        if module in sys.modules:
            setattr(sys.modules[module], name, itertools.count())
_COUNTERS = {counters!r}
_capnb_reset({folder!r})
get_ipython().reset(new_session=False)
"""
#: The module-level counters of ids that capnb writes into a page (a div's, a kept view's).
_COUNTERS = (("capnb.notebook", "_counter"), ("capnb.widgets._base", "_displays"))


class _Kernel:
    """A Python kernel that runs one worksheet after another, as if each had a fresh one.

    Started once, with a snapshot of its environment variables, ``sys.path`` and warning filters;
    before each worksheet after the first, those are put back, the working folder set to the
    worksheet's, capnb's chart ids restarted, and the user namespace cleared (IPython's
    ``reset``). What stays: imported modules and the numba kernels they loaded, and capnb's
    caches of bundled tables, which a worksheet reads and never changes: starting a kernel and
    importing capnb, xarray, numba and altair is about 1.5 CPU-seconds of each worksheet. After a
    worksheet that failed, the kernel is shut down and the next worksheet gets a new one (a
    timeout may leave a cell running). The kernel talks over Unix sockets in a private folder: no
    open TCP port, and none of ipykernel 7's warnings about unencrypted TCP.
    """

    def __init__(self):
        self._manager = None
        self._sockets = None

    def __enter__(self) -> _Kernel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, notebook, folder: Path, timeout: int) -> None:
        from jupyter_core.utils import run_sync
        from nbclient import NotebookClient

        fresh = self._manager is None or not run_sync(self._manager.is_alive)()
        if fresh:
            self.close()
            self._start(folder)
        client = NotebookClient(
            notebook,
            km=self._manager,  # kept: the client neither starts nor shuts it down
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(folder)}},
        )
        try:
            if not fresh:
                self._silent(_RESET.format(folder=str(folder), counters=_COUNTERS), timeout)
            client.execute()
        except BaseException:
            self.close()
            raise
        finally:
            if client.kc is not None:
                client.kc.stop_channels()

    def _start(self, folder: Path) -> None:
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync
        from traitlets.config import Config

        self._sockets = tempfile.TemporaryDirectory(prefix="capnb-kernel-")
        ipc = {"KernelManager": {"transport": "ipc", "ip": str(Path(self._sockets.name) / "k")}}
        self._manager = AsyncKernelManager(kernel_name="python3", config=Config(ipc))
        run_sync(self._manager.start_kernel)(
            cwd=str(folder), extra_arguments=["--HistoryManager.hist_file=:memory:"]
        )
        self._silent(_SNAPSHOT, 60)

    def _silent(self, code: str, timeout: int) -> None:
        client = self._manager.blocking_client()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=60)
            reply = client.execute_interactive(
                code, silent=True, store_history=False, timeout=timeout, output_hook=lambda m: None
            )
        finally:
            client.stop_channels()
        if reply["content"]["status"] != "ok":
            raise RuntimeError(
                f"a kept kernel could not be reset: {reply['content'].get('evalue', '')}"
            )

    def close(self) -> None:
        from jupyter_core.utils import run_sync

        if self._manager is not None:
            try:
                if run_sync(self._manager.is_alive)():
                    run_sync(self._manager.shutdown_kernel)(now=False)
            finally:
                run_sync(self._manager.cleanup_resources)()
                self._manager = None
        if self._sockets is not None:
            self._sockets.cleanup()
            self._sockets = None


def run_worksheet(
    name: str | os.PathLike,
    out_dir: str | os.PathLike = "reports",
    *,
    parameters: Mapping[str, object] | None = None,
    timeout: int = 600,
    show_code: bool = False,
) -> Path:
    """Execute a worksheet headless and write its HTML report; return the report's path.

    Parameters
    ----------
    name
        A bundled worksheet name (``"02_memory"``) or a path to a notebook.
    out_dir
        Directory of the report (created if needed); the file is ``<worksheet>.html``.
    parameters
        Values that override the worksheet's ``parameters`` cell.
    timeout
        Seconds a single cell may run.
    show_code
        Include the code (the worksheet's checks are never shown).

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        A cell failed; the message names the worksheet and shows the cell. No file is written.
    """
    notebook = execute(name, parameters=parameters, timeout=timeout)
    target = Path(out_dir) / _page_name(notebook.metadata["capnb_worksheet"])
    write_atomic(target, export_html(notebook, show_code=show_code))
    return target


def combine(
    notebooks: list,
    *,
    skipped: Mapping[str, str] | None = None,
    plan=None,
    show_code: bool = False,
) -> object:
    """One notebook of several executed worksheets, for readers, with the vega bundle kept once.

    It opens on the plan in numbers (:func:`summary_html`, when a ``plan`` Dataset is given) and a
    linked table of contents, then one titled section per worksheet. ``skipped`` names worksheets
    that could not apply to the inputs, each with its reason: the first page lists them. The result
    is ready for :func:`export_html` (``prepared=True``).
    """
    import copy

    import nbformat

    sections, contents = [], []
    for notebook in notebooks:
        notebook = copy.deepcopy(notebook)
        name = notebook.metadata.get("capnb_worksheet", "worksheet")
        contents += _for_readers(notebook, show_code=show_code, prefix=_anchor(name))
        if plan is not None:  # under its heading: the inputs the section was computed on
            at = next((i for i, c in enumerate(notebook.cells) if _heading(c)), -1) + 1
            notebook.cells.insert(at, _raw(_computed_on(plan)))
        sections.append(notebook)
    notes = _notes_by_section(sections)
    combined = nbformat.v4.new_notebook(metadata=copy.deepcopy(notebooks[0].metadata))
    combined.metadata.pop("capnb_worksheet", None)
    combined.metadata.pop("capnb_notes", None)
    front = [(1, "the-plan", "The plan in numbers")] if plan is not None else []
    if plan is not None:
        from . import plan as planning

        record = planning.answer(plan)
        combined.metadata["title"] = (
            f"Capacity plan: {record.model} on {record.tensor_parallel} x {record.gpu} — capnb report"
        )
    else:
        combined.metadata["title"] = "capnb report"
    combined.cells.append(
        _raw(summary_html(plan, skipped=skipped, notes=notes) if plan is not None
             else _intro(skipped) + _notes_html(notes))
    )  # fmt: skip
    appendix = (
        [(1, "appendix", "Appendix: the policy as cluster objects")] if plan is not None else []
    )
    combined.cells.append(_raw(_toc(front + contents + appendix)))
    bundle_seen = False
    for notebook in sections:
        for cell in notebook.cells:
            kept = []
            for output in cell.get("outputs", []):
                page = "".join(output.get("data", {}).get("text/html", ""))
                if _BUNDLE_MARK in page:
                    if bundle_seen:
                        continue  # every worksheet carries the bundle; one copy per page is enough
                    bundle_seen = True
                kept.append(output)
            if cell.cell_type == "code":
                cell.outputs = kept
            combined.cells.append(cell)
    if plan is not None:
        combined.cells.append(_raw(_appendix(plan)))
    return combined


def _appendix(plan) -> str:
    """The chosen policy as the cluster objects ``capnb plan`` writes beside ``plan.json``."""
    from . import plan as planning

    objects = planning.manifests(planning.policy_choice(plan))
    parts = [
        '<section class="capnb-appendix" id="appendix"><h1>Appendix: the policy as cluster '
        'objects</h1><p class="capnb-prose">The chosen policy with the values its replay used, '
        "as written beside <code>plan.json</code> (<code>capnb export</code> writes them again "
        "from a plan). Whether each object replays as the chosen run, and what it assumes, is "
        "in its comments.</p>"
    ]
    for kind, text in ((k, objects.yaml(k)) for k in objects.documents):
        parts.append(f"<h2>{html.escape(kind)}.yaml</h2><pre>{html.escape(text)}</pre>")
    return "".join(parts) + "</section>"


def _computed_on(plan) -> str:
    """The line under each section's heading: the plan's own inputs it was computed on."""
    from . import plan as planning

    a = planning.answer(plan)
    trace = json.loads(plan.attrs["config"])["trace"]
    return (
        '<p class="capnb-inputs">Computed on the plan\'s own inputs: '
        f"<strong>{html.escape(a.model)}</strong> on <strong>{a.tensor_parallel} x "
        f"{html.escape(a.gpu)}</strong>, trace {html.escape(str(trace))}, "
        f"{html.escape(str(a.sla))}.</p>"
    )


def _intro(skipped: Mapping[str, str] | None) -> str:
    """The first page of a report without a plan (a run of some worksheets only)."""
    text = (
        '<section class="capnb-front" id="the-plan"><h1>capnb report</h1>'
        '<p class="capnb-lede">The worksheets of a capacity plan, executed on the same inputs and '
        "rendered for reading offline: charts keep their own controls; widget panels show the "
        "values they were run with.</p>"
    )
    return text + _skipped_html(skipped) + "</section>"


#: How the report words a worksheet left out because one of its closing checks failed: unlike an
#: input it cannot apply to, a failed check is a defect (a number the worksheet shows is wrong).
FAILED_CHECK = "failed a closing check"


def _skipped_html(skipped: Mapping[str, str] | None) -> str:
    if not skipped:
        return ""

    def items(pairs) -> str:
        return "".join(
            f"<li><code>{html.escape(n)}</code>: {html.escape(w)}</li>" for n, w in pairs
        )

    failed = [(n, w) for n, w in skipped.items() if w.startswith(FAILED_CHECK)]
    moot = [(n, w) for n, w in skipped.items() if not w.startswith(FAILED_CHECK)]
    text = ""
    if moot:
        text += f"<p>Not in this report, because they cannot apply to these inputs:</p><ul>{items(moot)}</ul>"
    if failed:
        text += (
            '<p class="capnb-failed">Not in this report, because a closing check failed on these '
            "inputs: a number the worksheet shows disagrees with another, which is a defect in "
            f"capnb (please report it with the inputs):</p><ul>{items(failed)}</ul>"
        )
    return text


# -- the first page: the plan in numbers --------------------------------------------------------
def _num(value: float, digits: int = 0) -> str:
    return f"<strong>{value:,.{digits}f}</strong>"


def _rate(value: float) -> str:
    """A rate (requests/s) in bold, with the digits the plan's words give it (1.16, 14.6, 257)."""
    return f"<strong>{words.rate(value)}</strong>"


def _sentence(text: str) -> str:
    """A sentence of the plan's text, escaped, its numbers in bold."""
    return _bold_numbers(html.escape(text))


def summary_html(
    plan, *, skipped: Mapping[str, str] | None = None, notes: list[str] | None = None
) -> str:
    """The report's first page: the plan's answer record (:func:`capnb.plan.answer`), typeset.

    One fleet, one monthly cost, the expected breach and the held-out record, in the words of
    :func:`capnb.plan.describe` (the same renderers): nothing here computes or decides. The
    alternatives the plan costed (a mix of GPU types, prefill/decode pools) are named with a link
    to their section; their costs are there, not here.
    """
    from . import plan as planning

    a = planning.answer(plan)
    said = planning.sections(a)
    sla = html.escape(str(a.sla)).replace("&lt;=", "&le;")
    rows: list[tuple[str, str]] = [
        ("What to deploy", _sentence(said["serve"])),
        ("Fleet", _sentence(said["fleet"].removeprefix("Fleet: "))),
        ("Monthly cost", _sentence(said["cost"].removeprefix("Cost: "))),
        ("Held out", _sentence(said["held_out"].removeprefix("Held out: "))),
        ("Burst test", _sentence(said["burst"].removeprefix("Burst test: "))),
        ("Latencies", _sentence(said["latency"].removeprefix("Latencies: "))),
    ]  # fmt: skip
    if a.settle_commands:
        rows.append(("To settle it", f"<pre>{html.escape(a.settle_commands)}</pre>"))
    numbers = "".join(f"<dt>{html.escape(k)}</dt><dd>{v}</dd>" for k, v in rows)
    slot = a.target_qps.index(max(a.target_qps))
    steps = [
        ("1. forecast", f"the P{100 * a.traffic_quantile:g} of the busiest slot, "
         f"{html.escape(' '.join(filter(None, (a.slot_labels[slot], a.clock))))}: "
         f"{_rate(a.target_qps[slot])} requests/s; bursts add "
         f"{_rate(a.burst_qps)} requests/s"),
        ("2. memory", f"{_num(a.memory_concurrency)} sequences of {_num(a.seq_len)} tokens fit "
         f"beside the weights on {a.tensor_parallel} x {html.escape(a.gpu)}"
         if a.memory_concurrency >= 0 else "not checked"),
        ("3. capacity", _capacity_row(a, sla)),
        ("4. elasticity", f"cold start {_num(a.policy.cold_start_s)} s"
         + (" (too long for scale-ups to count: hold capacity that needs none)"
            if a.policy.cold_start_vetoes else "")
         + f"; {html.escape(words.POLICY_NAMES[a.policy.name])}: "
         f"{words.POLICY_KINDS[a.policy.kind]}"),
    ]  # fmt: skip
    binds = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in steps)
    article = [c for c in a.checks if c.kind == "article"]
    fired = (
        "<ul>" + "".join(f"<li>{_sentence(c.finding)}</li>" for c in article) + "</ul>"
        if article
        else "<p>None: the article's method applies to these inputs as it stands.</p>"
    )
    others = ", ".join(html.escape(alt.name) for alt in a.alternatives)
    alternatives = (
        f'<p class="capnb-prose">Also costed on the same inputs, in '
        f'<a href="#{_anchor("06_serving")}">the serving choices</a>: {others}.</p>'
        if others
        else ""
    )
    failed = bool(a.failed)
    return (
        '<section class="capnb-front" id="the-plan">'
        f"<h1>Capacity plan for {html.escape(a.model)}</h1>"
        f'<p class="capnb-lede">{_sentence(_lede(a))}</p>'
        f'<p class="capnb-headline{" capnb-caution" if failed else ""}">'
        f"{_sentence(said['headline'])}</p>"
        f'<h2>The plan in numbers</h2><dl class="capnb-numbers">{numbers}</dl>'
        f'<figure class="capnb-figure">{_static_chart(plan)}</figure>'
        f'<h2>What binds at each step</h2><table class="capnb-steps">{binds}</table>'
        f"<h2>The article's checks</h2>{fired}{alternatives}"
        f'<p class="capnb-prose">Inputs: {html.escape(a.inputs)}. Every section below ran on '
        "them and passed its closing checks.</p>"
        + _notes_html(notes or [])
        + _skipped_html(skipped)
        + "</section>"
    )


#: What sets the safe concurrency, in a reader's words (the record's ``binding`` values).
_BINDS = {"measured_range": "end of the curve"}


def _capacity_row(a, sla: str) -> str:
    """The first page's capacity row: what binds (``sla`` escaped) and the requests in flight."""
    binds = _BINDS.get(a.binding, a.binding)
    return (
        f"<strong>{html.escape(binds)}</strong>"
        + (f" ({html.escape(a.binding_metric.upper())} bound of {sla})" if a.binding_metric else "")
        + f": {_num(a.safe_concurrency)} request{'' if a.safe_concurrency == 1 else 's'} in flight"
    )


def _lede(a) -> str:
    """The answer in one sentence: model, GPU and fleet (the cost and breach follow, once each)."""
    name = words.POLICY_NAMES[a.policy.name]
    if a.policy.name == "fixed":
        grows = f"and run {'it' if a.reserved_instances == 1 else 'them'} all month"
    elif a.policy.name == "article" and a.policy.cold_start_vetoes:
        # the replay may start above the reserve (its first step's need), but the rule adds none
        grows = (
            f"; {name} adds none: the {a.policy.cold_start_s:g} s cold start vetoes its scale-ups"
        )
    elif a.peak_serving_instances > a.reserved_instances:
        grows = (
            f"and let {name} add on-demand ones as traffic needs "
            f"(up to {a.peak_serving_instances:,} serving at once)"
        )
    else:  # the replay never went above the reserve: the policy only stands ready
        grows = f"with {name} ready to add on-demand ones (the replay needed none)"
    return (
        f"Serve {a.model} on {a.tensor_parallel} x {a.gpu} per instance: reserve "
        f"{words.count(a.reserved_instances, 'instance')} {grows}."
    )


def _static_chart(plan) -> str:
    """The instances-per-slot chart as an SVG drawn here (vl-convert): no script, prints as is."""
    import altair as alt
    import vl_convert as vlc

    from .charts import plan_instances

    try:
        svg = vlc.vegalite_to_svg(
            plan_instances(plan).to_dict(), vl_version=".".join(alt.VEGALITE_VERSION.split(".")[:2])
        )
    except (ValueError, RuntimeError) as error:  # a vl-convert without altair's vega-lite version
        return f'<p class="capnb-prose">(chart not drawn: {html.escape(str(error))})</p>'
    return f'<div class="capnb-static-chart">{svg}</div>'


def _inputs(plan) -> str:
    from . import plan as planning

    return planning.inputs_used(plan)


def run_report(
    config=None,
    out_dir: str | os.PathLike = "reports",
    *,
    worksheets: tuple[str, ...] = WORKSHEETS,
    jobs: int = 2,
    progress: bool = True,
    timeout: int = 600,
    show_code: bool = False,
    force: bool = False,
) -> list[Path]:
    """Execute the worksheets and write one HTML per worksheet plus the combined report.

    Parameters
    ----------
    config
        A plan config (:class:`capnb.plan.PlanConfig`, mapping or TOML/YAML path), or None for
        the bundled defaults: the plan is built once, exported to ``out_dir`` (``plan.nc``,
        ``plan.json``, ``plan.toml``), and every worksheet runs on the config's inputs and the
        plan's choices; the report's first page renders the plan's answer.
    out_dir
        Where the reports go (created if needed). Every file is written atomically.
    worksheets
        Which worksheets, in order.
    jobs
        Worksheets executed at once: each of ``jobs`` kernels runs one worksheet after another,
        reset between them to its state at start (see ``_Kernel``).
    progress
        Show a progress bar (on a terminal; elsewhere one line per worksheet).
    show_code
        Include the worksheets' code (their checks are never shown).
    force
        Replace files in ``out_dir`` that capnb did not write (a ``plan.toml`` of the user's,
        an edited report); without it they are an error before any work (nothing is written).

    Returns
    -------
    list of pathlib.Path
        The combined report first, then one file per worksheet.
    """
    worksheets = tuple(str(name).removesuffix(".ipynb") for name in worksheets)
    for name in worksheets:  # an unknown name fails now, not after the plan is built
        worksheet_path(name)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs = {jobs!r}: expected a whole number of kernels, at least 1")
    check_set(out_dir, [])  # the folder itself, before Path("") becomes the current one
    out_dir = Path(out_dir)
    from .plan import export_names

    pages = {name: _page_name(name) for name in worksheets}
    toml = out_dir / "plan.toml"
    if isinstance(config, str | os.PathLike) and toml.is_file() and toml.samefile(config):
        raise OutputError(
            f"{toml}: the config the report reads, where it would write the plan.toml of its "
            "plan: give another --out, or keep the config elsewhere"
        )
    # a file in the way fails now, not after the plan and the worksheets have run
    check_set(out_dir, [REPORT_NAME, *pages.values(), *export_names(), "plan.toml"], force=force)
    stage = Path(tempfile.mkdtemp(prefix="capnb-report-"))  # the plan's files, until the end
    try:
        return _run_staged(config, out_dir, stage, pages, jobs=jobs, progress=progress,
                           timeout=timeout, show_code=show_code, force=force)  # fmt: skip
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _run_staged(config, out_dir: Path, stage: Path, pages: dict[str, str], *, jobs: int,
                progress: bool, timeout: int, show_code: bool, force: bool) -> list[Path]:  # fmt: skip
    """:func:`run_report` after its checks: the plan, the worksheets, the files written.

    The plan is exported into ``stage`` (a private folder the worksheets read it from), the
    worksheets run, and then the plan's files and the pages are written into ``out_dir``
    together: a run that ends early leaves ``out_dir`` as it was.
    """
    from concurrent.futures import ThreadPoolExecutor

    from nbclient.exceptions import CellExecutionError

    worksheets = tuple(pages)
    kept: list = []
    written: list = []  # the plan's exports, staged: written with the pages, as one set
    defaults = config is None
    # The plan is built first, before any worksheet's kernel starts, and every worksheet runs on
    # its inputs (the bundled defaults when no config is given). First, not beside them: this
    # process and the kernels compile the same numba kernels (the engine model, the autoscaler)
    # into one on-disk cache, and numba's cache index is not safe against processes writing it
    # at once (a kernel with several overloads, compiled by two processes in a different order,
    # can end up indexed under the other overload's machine code: a segmentation fault on a fresh
    # install). Built first, the plan fills the cache; the worksheets then load it.
    parameters = _parameters(config, out_dir, keep=kept, written=written, force=force, stage=stage)
    bar = _progress(len(worksheets), progress)
    executed, skipped = {}, {}
    kernels = threading.local()  # one kept kernel per worker thread (see _Kernel)
    started: list[_Kernel] = []
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:

            def run(name: str):
                if getattr(kernels, "one", None) is None:
                    kernels.one = _Kernel()
                    started.append(kernels.one)  # list.append holds the GIL: no lock needed
                return execute(
                    name, parameters=parameters.get(name), timeout=timeout, kernel=kernels.one
                )

            futures = {name: pool.submit(run, name) for name in worksheets}
            try:
                for name in worksheets:
                    try:
                        executed[name] = futures[name].result()
                    except CellExecutionError as error:
                        if defaults:  # the bundled defaults must always run: a bug, not data
                            raise
                        # on a user's inputs a worksheet may not apply: say why in one line
                        skipped[name] = _why(error)
                    bar(name)
            except BaseException:  # an interrupt (Ctrl-C) or a defect: the run ends now
                for future in futures.values():
                    future.cancel()  # the worksheets not started (the pool would run them all)
                raise
    finally:
        for kernel in started:
            kernel.close()
        bar(None)
    if not executed:  # nothing written: the plan's files stayed in the stage
        raise CellExecutionError(
            "no worksheet could run on these inputs: "
            + "; ".join(f"{n}: {why}" for n, why in skipped.items()),
            "",
            "",
        )
    ran = [n for n in worksheets if n in executed]
    for name in ran:  # the paths the worksheets read the plan from, as they are after the run
        for cell in executed[name].cells:
            if "injected-parameters" in _tags(cell):
                cell.source = cell.source.replace(str(stage.resolve()), str(out_dir.resolve()))
    notebook = combine(
        [executed[n] for n in ran],
        skipped=skipped,
        plan=kept[0] if kept else None,
        show_code=show_code,
    )
    contents = {REPORT_NAME: export_html(notebook, show_code=show_code, prepared=True)}
    contents |= {pages[n]: export_html(executed[n], show_code=show_code) for n in ran}
    contents |= {Path(p).name: Path(p).read_bytes() for p in written}  # the plan, with its pages
    # the report and its plan, whole, as one set; an earlier report's pages of worksheets not
    # run now (not asked for, or not applicable) go, not left as pages of this plan
    earlier = [_page_name(name) for name in WORKSHEETS if name not in ran]
    files = write_set(out_dir, contents, force=force, remove=earlier)
    combined, paths = files[REPORT_NAME], [files[pages[n]] for n in ran]
    for name, why in skipped.items():
        if why.startswith(FAILED_CHECK):  # a defect, not an input: said as the report says it
            warnings.warn(f"worksheet {name} left out: it {why}, a defect in capnb (please "
                          "report it with the inputs)", stacklevel=2)  # fmt: skip
        else:
            warnings.warn(f"worksheet {name} cannot apply to these inputs: {why}", stacklevel=2)
    return [combined, *paths]


def _why(error) -> str:
    """One line on why a worksheet did not run: its error, or the closing check that failed."""
    if error.ename != "AssertionError" and not getattr(error, "in_checks", False):
        return f"{error.ename}: {error.evalue}".strip(": ")
    # the failing line of the check cell, from the traceback (its "----> 3" or "---> 18" marker)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line for line in plain.splitlines() if re.match(r"\s*-{3,}>", line)]
    where = re.split(r"-{3,}>", lines[-1], maxsplit=1)[1].strip() if lines else ""
    where = re.sub(r"^\d+\s*", "", where)
    return (
        f"{FAILED_CHECK}"
        + (f": {where}" if where else "")
        + (f" ({error.evalue})" if error.evalue and error.ename == "AssertionError" else "")
        + (f" ({error.ename}: {error.evalue})" if error.ename != "AssertionError" else "")
    )


def _progress(total: int, enabled: bool):
    """A progress bar on a terminal; elsewhere (a log, CI) one plain line per worksheet.

    The bar is redrawn only when a worksheet ends (its name and the count move together), and it
    is closed (its last state on its own line) before anything else is printed.
    """
    if not enabled:
        return lambda name: None
    import sys
    import time

    stream = sys.stderr
    if not stream.isatty():
        start, done = time.perf_counter(), [0]

        def line(name: str | None) -> None:
            if name is not None:
                done[0] += 1
                elapsed = time.perf_counter() - start
                print(
                    f"capnb report: {name} done ({done[0]}/{total}, {elapsed:.0f} s)",
                    file=stream,
                    flush=True,
                )

        return line
    from tqdm import tqdm

    bar = tqdm(total=total, unit="worksheet", desc="capnb report", file=stream, leave=True)

    def step(name: str | None) -> None:
        if name is None:  # the end (or a failure): the bar closes, nothing trails the output
            if not bar.disable:
                bar.close()
                stream.flush()
            return
        bar.set_postfix_str(name, refresh=False)
        bar.update(1)

    return step


def _own_calibration(plan, gpu: str) -> dict | None:
    """``{"gpu": gpu, "values": Calibration's fields}`` the plan priced ``gpu`` on (None: bundled)."""
    values = json.loads(str(plan.attrs.get("own_calibrations", "{}"))).get(gpu)
    return None if values is None else {"gpu": gpu, "values": values}


def _curve_parameters(cfg, gpu: str, tp: int, binding_model: str) -> dict[str, object]:
    """Worksheet 03's curve: the model, a bundled measured curve, or the user's measured files.

    ``latency = "auto"``: the model the plan priced its binding bound on (``binding_model``,
    the answer's ``latency_model``: "analytic" or "engine"); the engine model simulates the
    plan's engine (``engine``) with its ``max_num_batched_tokens``.
    """
    from . import data

    if cfg.serving.latency == "model" or (
        cfg.serving.latency == "auto" and binding_model == "analytic"
    ):
        return {"CURVE": "analytic model"}
    if cfg.serving.latency in ("engine", "auto"):  # the engine the plan simulated, its flags too
        tokens = cfg.serving.max_num_batched_tokens
        return {
            "CURVE": "engine model",
            "ENGINE_NAME": cfg.serving.engine,
            "ENGINE_SETTINGS": {"max_num_batched_tokens": tokens} if tokens else {},
        }
    if cfg.serving.latency in data.list_latency_curves():
        return {"CURVE": cfg.serving.latency}
    setup = {"model": data.load_model(cfg.serving.model).name, "gpu": gpu, "tensor_parallel": tp}
    return {"BENCHMARK": cfg.serving.latency, "BENCHMARK_SETUP": setup}


def _start_parameters(cfg, a) -> dict[str, object]:
    """Worksheet 00's parameters: the plan's traffic, as it scales it, and its instance's cold start.

    ``cfg`` the plan's config, ``a`` its answer record.
    """
    from . import plan as planning

    return {
        "SHOW_TRACE": cfg.traffic.trace,
        "SHOW_TRACE_OPTIONS": {
            "kind": cfg.traffic.trace_kind,
            "start": cfg.traffic.start,
            **planning.trace_options(cfg),
        },
        "SHOW_INTERVAL": cfg.traffic.interval,
        "SHOW_DEMAND_SCALE": cfg.traffic.demand_scale,  # the plan's traffic, not the trace's
        "SHOW_MODELS": [cfg.serving.model],
        "SHOW_GPU": a.gpu,
        "SHOW_TENSOR_PARALLEL": a.tensor_parallel,  # the plan's instance, as step 4 replays it
        # a cold start the config gives (measured): the one the plan replays, not the estimate
        "SHOW_COLD_START_S": None
        if cfg.elasticity.cold_start_s == "estimate"
        else a.policy.cold_start_s,
        "SHOW_STEP_S": cfg.elasticity.step_s,  # the plan replays the estimate in whole steps
    }


def _parameters(
    config,
    out_dir: Path,
    *,
    keep: list | None = None,
    written: list | None = None,
    force: bool = False,
    stage: Path | None = None,
) -> dict[str, dict[str, object]]:
    """Each worksheet's parameters for a plan config, from the config and the plan built on it.

    Every worksheet runs on the plan's own inputs and choices: its model, GPU and degree, SLA,
    trace and clock, burst model, prices and policy grid. ``keep``: a list the plan Dataset is
    appended to (the report's first page reads it); ``written``: a list the paths of the files
    written (the plan's exports) are appended to; ``stage``: the folder they are written into
    (default ``out_dir``).
    """
    from . import plan as planning

    cfg = planning.read_config(config)
    check_set(out_dir, (), reads=cfg.runs_read())  # not among the runs the plan reads
    with warnings.catch_warnings():  # the checks are part of the plan's text and of 05_plan
        warnings.simplefilter("ignore", planning.PlanWarning)
        plan = planning.build(cfg)
    if keep is not None:
        keep.append(plan)
    into = out_dir if stage is None else stage
    files = planning.export(plan, into, force=force)
    files |= write_set(into, {"plan.toml": cfg.to_toml()}, force=force)
    if written is not None:
        written.extend(files.values())
    a = planning.answer(plan)
    gpu, tp = a.gpu, a.tensor_parallel
    metric = a.binding_metric or next(iter(a.sla.bounds))
    return {
        "00_start_here": _start_parameters(cfg, a),
        "01_forecasting": {
            **_trace_parameters(cfg),
            "QUANTILE": cfg.traffic.traffic_quantile,
            "BURSTS_PER_MONTH": a.bursts.rate_per_month,
            "BURST_HOURS": tuple(s / 3600 for s in a.bursts.duration_s),
            "BURST_MULTIPLIER": a.bursts.multiplier,
            "GROWTH_MODEL": cfg.traffic.growth_model,  # the forecast the plan carried its trace forward by
            "EXCEED_PROBABILITY": cfg.traffic.exceed_probability,
            "TRIALS": cfg.traffic.trials,
            "SEED": cfg.traffic.seed,
        },
        "02_memory": {
            "MODEL": cfg.serving.model,
            "GPU": gpu,
            "TENSOR_PARALLEL": tp,
            "SEQ_LEN": a.seq_len,
            "ACCOUNTING": str(plan.attrs["memory_accounting"]),  # the plan's (engine: vLLM's)
            "VLLM_VERSION": str(plan.attrs.get("memory_vllm_version", "")) or None,
            # the profile run the plan's KV cache was sized with (vllm serve's, on this GPU)
            "VLLM_PROFILE": planning.memory_profile(plan, gpu, tp),
            "PLAN_FILE": str(files["netcdf"].resolve()),  # its prefix cache's share, said
        },
        "03_capacity": {
            **_curve_parameters(cfg, gpu, tp, a.latency_model),
            "METRIC": metric,
            "QUANTILE": a.sla.quantile,
            "SLA": a.sla.bounds[metric],
            "TARGET_QPS": max(a.target_qps),
            # the busiest slot's fleet (the plan's largest fixed_instances): the plan holds the
            # burst buffer elastically (step 4 scales for it), not as fixed instances
            "BUFFER": 0,
            "MODEL": cfg.serving.model,
            "GPU": gpu,
            "TENSOR_PARALLEL": tp,
            # the lengths and representative requests the plan priced
            "WORKLOAD": str(plan.attrs["workload_trace"]),
            "WORKLOAD_SAMPLES": int(plan.attrs["workload_samples"]),
            # the plan's own trace as its workload: read with the options the plan read it with
            "WORKLOAD_OPTIONS": (
                {
                    k: v
                    for k, v in {"start": cfg.traffic.start, **planning.trace_options(cfg)}.items()
                    if v is not None
                }
                if str(plan.attrs["workload_trace"]) == cfg.traffic.trace
                else planning.workload_options(cfg, str(plan.attrs["workload_trace"]))
            ),
            # the memory accounting the plan sized its options with (the analytic curve's limit)
            "ACCOUNTING": str(plan.attrs["memory_accounting"]),
            "OVERVIEW_GPUS": list(cfg.serving.gpus),
            "OVERVIEW_TENSOR_PARALLEL": list(cfg.serving.tensor_parallel),
            # the engine the plan priced its GPU on, where the user's own runs calibrated it
            "CALIBRATION": _own_calibration(plan, gpu),
        },
        # the plan's elasticity stage, input for input: the worksheet gives the plan's answer
        "04_elasticity": {
            **elasticity_parameters(plan),
            "PLAN_FILE": str(files["netcdf"].resolve()),  # its policy, chosen out of sample
        },
        "05_plan": {"PLAN_FILE": str(files["netcdf"].resolve())},
        "06_serving": {
            "CONFIG": str(files["plan.toml"].resolve()),
            "PLAN_FILE": str(files["netcdf"].resolve()),  # its prefill/decode comparison, read
            "MODEL": cfg.serving.model,
            "GPU": gpu,
            "TENSOR_PARALLEL": tp,
            "ROUTE_INSTANCES": max(a.fixed_instances),  # the plan's busiest slot's fleet
            "PROVIDER": cfg.fleet.provider if cfg.fleet.provider != "none" else "hyperstack",
            "RESERVED": None if cfg.fleet.reserved == "none" else cfg.fleet.reserved,
            "SPOT_PREEMPTION": None
            if cfg.fleet.spot_preemption == "none"
            else cfg.fleet.spot_preemption,
            # the prefix-cache trade at the plan's TTFT bound (the latency a cache shortens)
            **(
                {"PREFIX_SLA": {"ttft_s": a.sla.bounds["ttft"], "quantile": a.sla.quantile}}
                if "ttft" in a.sla.bounds
                else {}
            ),
            **_prefix_parameters(cfg, plan, a.seq_len),
        },
    }


def _trace_parameters(cfg) -> dict[str, object]:
    """The plan's trace as the plan reads it (its kind, clock, options, slots and scale)."""
    from . import plan as planning

    return {
        "TRACE": cfg.traffic.trace,
        "TRACE_KIND": cfg.traffic.trace_kind,
        "START": cfg.traffic.start,
        "TRACE_OPTIONS": planning.trace_options(cfg),
        "INTERVAL": cfg.traffic.interval,
        "SLOTS": cfg.traffic.slots,
        "DEMAND_SCALE": cfg.traffic.demand_scale,
    }


def elasticity_parameters(plan) -> dict[str, object]:
    """Worksheet 04's parameters for a built plan (all but ``PLAN_FILE``).

    Its trace, as the plan reads and scales it, its instance, cold start and policy grid: the
    inputs its policy was chosen on.
    """
    from . import plan as planning

    cfg = planning.read_config(json.loads(plan.attrs["config"]))
    a = planning.answer(plan)
    return {
        **_trace_parameters(cfg),
        "STEP_S": cfg.elasticity.step_s,
        "PER_INSTANCE_QPS": a.per_instance_qps,
        "LATENCY_S": float(plan.attrs["demand_smoothed_over_s"]),
        "MODEL": cfg.serving.model,
        "GPU": a.gpu,
        "TENSOR_PARALLEL": a.tensor_parallel,
        "COLD_START_S": a.policy.cold_start_s,
        "TOLERANCE_S": cfg.elasticity.tolerance_s,
        "BREACH_BUDGET": cfg.elasticity.breach_budget,
        "POLICIES": list(cfg.elasticity.policies),
        "SCALE_UP_THRESHOLDS": list(cfg.elasticity.scale_up_threshold),
        "COOLDOWNS_S": list(cfg.elasticity.cooldown_s),
        "BUFFER_INSTANCES": list(cfg.elasticity.buffer_instances),
        "POLICY": a.policy.name,
    }


def check_plan_inputs(plan, given: Mapping[str, object]) -> None:
    """Raise :class:`ConfigError` where worksheet 04's inputs are not those of ``plan``.

    ``given``: the worksheet's inputs by parameter name, a cold start or degree it derived as
    derived; they must be those ``plan``'s policy was chosen on (:func:`elasticity_parameters`).
    ``POLICY``, the run drawn first, may differ. The message names each that is not, and the plan's.
    """
    import math

    def same(mine, theirs) -> bool:
        if isinstance(mine, int | float) and isinstance(theirs, int | float):
            return math.isclose(mine, theirs, rel_tol=1e-9)
        if isinstance(mine, list | tuple) and isinstance(theirs, list | tuple):
            return len(mine) == len(theirs) and all(map(same, mine, theirs))
        return mine == theirs

    wanted = elasticity_parameters(plan)
    differ = [
        f"{name} = {given[name]!r}, the plan's {value!r}"
        for name, value in wanted.items()
        if name != "POLICY" and name in given and not same(given[name], value)
    ]
    if differ:
        raise ConfigError(
            "PLAN_FILE: the plan's policy was chosen on its own inputs, and these are not "
            f"them: {'; '.join(differ)}. Set them as the plan's "
            "(capnb.report.elasticity_parameters(capnb.plan.load(PLAN_FILE)) gives them all), "
            "or leave PLAN_FILE = None to choose a policy on these inputs"
        )


def _prefix_parameters(cfg, plan, seq_len: int | None = None) -> dict[str, object]:
    """Worksheet 06's ``TRACE``: the log whose block hashes the plan's prefix cache replayed.

    The plan replays its workload's log (its own trace's or ``workload``'s); without a prefix
    cache it replayed none, and the worksheet picks its log itself (the plan's trace, else a
    bundled one, and says which). ``seq_len`` (tokens), given: the plan's, the length of the
    sequences the worksheet's split holds (``SEQ_LEN``), so its count is the plan's.
    """
    length = {} if seq_len is None else {"SEQ_LEN": int(seq_len)}
    if cfg.serving.prefix_cache_share > 0 and plan.attrs.get("workload_trace"):
        return {"TRACE": str(plan.attrs["workload_trace"]), **length}
    return length

"""Execute worksheets and write them as self-contained HTML reports that draw offline.

A report is the executed worksheet exported with capnb's nbconvert template
(``capnb/templates/capnb_report``): JupyterLab's look, no script loaded from the network, the vega bundle
carried once by the worksheet's :func:`capnb.notebook.setup` output, and each widget panel replaced by
the plain-text record of its values (a report has no kernel to drive widgets). Files are written
atomically: a failed run leaves any previous report in place.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

__all__ = ["WORKSHEETS", "export_html", "run_worksheet", "worksheet_path"]

#: The worksheets the main job runs, in order.
WORKSHEETS = ("01_forecasting", "02_memory", "03_capacity", "04_elasticity")

_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def worksheet_path(name: str) -> Path:
    """Path of a bundled worksheet (``"02_memory"`` or ``"02_memory.ipynb"``)."""
    stem = name.removesuffix(".ipynb")
    installed = resources.files("capnb") / "notebooks"
    root = Path(str(installed)) if installed.is_dir() else Path(__file__).parents[1] / "notebooks"
    path = root / f"{stem}.ipynb"
    if not path.is_file():
        known = sorted(p.stem for p in root.glob("*.ipynb"))
        raise FileNotFoundError(f"no worksheet {name!r} in {root}; known: {', '.join(known)}")
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
    # Keep the text/plain record a worksheet puts beside its widget view; drop the view itself.
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if _WIDGET_MIME in data:
                del data[_WIDGET_MIME]
    notebook.metadata.pop("widgets", None)


def export_html(notebook) -> str:
    """Export an executed notebook node to capnb's offline HTML."""
    from nbconvert import HTMLExporter

    _static_widgets(notebook)
    templates = resources.files("capnb") / "templates"
    exporter = HTMLExporter(template_name="capnb_report", extra_template_basedirs=[str(templates)])
    html, _ = exporter.from_notebook_node(notebook)
    return html


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; a report is for sharing
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_worksheet(
    name: str | os.PathLike,
    out_dir: str | os.PathLike = "reports",
    *,
    parameters: Mapping[str, object] | None = None,
    timeout: int = 600,
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

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        A cell failed; the message names the worksheet and shows the cell. No file is written.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = Path(name) if str(name).endswith(".ipynb") else worksheet_path(str(name))
    notebook = nbformat.read(path, as_version=4)
    if parameters:
        _inject_parameters(notebook, parameters)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    except CellExecutionError as error:
        raise CellExecutionError(f"worksheet {path.name} failed:\n{error}", "", "") from None
    target = Path(out_dir) / f"{path.stem}.html"
    _write_atomic(target, export_html(notebook))
    return target

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
import warnings
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from .data import write_atomic

__all__ = [
    "REPORT_NAME",
    "WORKSHEETS",
    "combine",
    "execute",
    "export_html",
    "run_report",
    "run_worksheet",
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
)

#: File name of the combined report.
REPORT_NAME = "capnb_report.html"

_BUNDLE_MARK = 'class="capnb-vega-bundle"'

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


def execute(
    name: str | os.PathLike, *, parameters: Mapping[str, object] | None = None, timeout: int = 600
):
    """Execute a worksheet headless (a fresh kernel) and return the executed notebook node.

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        A cell failed; the message names the worksheet and shows the cell.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from traitlets.config import Config

    path = Path(name) if str(name).endswith(".ipynb") else worksheet_path(str(name))
    notebook = nbformat.read(path, as_version=4)
    if parameters:
        _inject_parameters(notebook, parameters)
    # the kernel talks over Unix sockets in a private directory: no open TCP port, and none of
    # ipykernel 7's warnings about unencrypted TCP (one per worksheet) in the main job's output
    with tempfile.TemporaryDirectory(prefix="capnb-kernel-") as sockets:
        ipc = {"KernelManager": {"transport": "ipc", "ip": str(Path(sockets) / "kernel")}}
        client = NotebookClient(  # it makes (and shuts down) its own kernel manager
            notebook,
            config=Config(ipc),
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        try:
            client.execute()
        except CellExecutionError as error:
            raise CellExecutionError(
                f"worksheet {path.name} failed:\n{error}", error.ename, error.evalue
            ) from None
    notebook.metadata["capnb_worksheet"] = path.stem
    return notebook


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
    notebook = execute(name, parameters=parameters, timeout=timeout)
    target = Path(out_dir) / f"{notebook.metadata['capnb_worksheet']}.html"
    write_atomic(target, export_html(notebook))
    return target


def combine(notebooks: list, *, skipped: Mapping[str, str] | None = None) -> object:
    """One notebook of several executed worksheets, in order, with the vega bundle kept once.

    ``skipped`` names worksheets that could not apply to the inputs, each with its reason: the
    report lists them after its contents.
    """
    import copy

    import nbformat

    titles = []
    for notebook in notebooks:
        first = next((c for c in notebook.cells if c.cell_type == "markdown"), None)
        heading = first.source.splitlines()[0].lstrip("# ").strip() if first else "worksheet"
        titles.append((notebook.metadata.get("capnb_worksheet", "worksheet"), heading))
    contents = "\n".join(
        f"{i + 1}. {heading} (`{name}`)" for i, (name, heading) in enumerate(titles)
    )
    if skipped:
        contents += (
            "\n\nNot in this report, because they cannot apply to these inputs:\n\n"
            + "\n".join(f"- `{name}`: {why}" for name, why in skipped.items())
        )
    combined = nbformat.v4.new_notebook(metadata=copy.deepcopy(notebooks[0].metadata))
    combined.cells.append(
        nbformat.v4.new_markdown_cell(
            "# capnb report\n\nThe worksheets of a capacity plan, executed on the same inputs and rendered "
            "for reading offline: charts keep their own controls; widget panels show the values they "
            f"were run with.\n\n{contents}"
        )
    )
    bundle_seen = False
    for notebook in notebooks:
        for cell in notebook.cells:
            cell = copy.deepcopy(cell)
            kept = []
            for output in cell.get("outputs", []):
                html = "".join(output.get("data", {}).get("text/html", ""))
                if _BUNDLE_MARK in html:
                    if bundle_seen:
                        continue  # every worksheet carries the bundle; one copy per page is enough
                    bundle_seen = True
                kept.append(output)
            if cell.cell_type == "code":
                cell.outputs = kept
            combined.cells.append(cell)
    return combined


def run_report(
    config=None,
    out_dir: str | os.PathLike = "reports",
    *,
    worksheets: tuple[str, ...] = WORKSHEETS,
    jobs: int = 2,
    progress: bool = True,
    timeout: int = 600,
) -> list[Path]:
    """Execute the worksheets and write one HTML per worksheet plus the combined report.

    Parameters
    ----------
    config
        None (every worksheet on its bundled defaults), or a plan config (:class:`capnb.plan.PlanConfig`,
        mapping or TOML/YAML path): the plan is built once, exported to ``out_dir`` (``plan.nc``,
        ``plan.json``), and each worksheet runs on the config's inputs and the plan's choices.
    out_dir
        Where the reports go (created if needed). Every file is written atomically.
    worksheets
        Which worksheets, in order.
    jobs
        Worksheets executed at once (each in its own kernel).
    progress
        Show a progress bar.

    Returns
    -------
    list of pathlib.Path
        The combined report first, then one file per worksheet.
    """
    from concurrent.futures import ThreadPoolExecutor

    from nbclient.exceptions import CellExecutionError

    out_dir = Path(out_dir)
    parameters = _parameters(config, out_dir) if config is not None else {}
    bar = _progress(len(worksheets), progress)
    executed, skipped = {}, {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {
                name: pool.submit(execute, name, parameters=parameters.get(name), timeout=timeout)
                for name in worksheets
            }
            for name in worksheets:
                try:
                    executed[name] = futures[name].result()
                except CellExecutionError as error:
                    if config is None:  # the bundled defaults must always run: a bug, not data
                        raise
                    # on a user's inputs a worksheet may not apply: say why in one line, go on
                    skipped[name] = f"{error.ename}: {error.evalue}".strip(": ")
                bar(name)
    finally:
        bar(None)
    if not executed:
        raise CellExecutionError(
            "no worksheet could run on these inputs: "
            + "; ".join(f"{n}: {why}" for n, why in skipped.items()),
            "",
            "",
        )
    ran = [n for n in worksheets if n in executed]
    paths = []
    for name in ran:
        target = out_dir / f"{name}.html"
        write_atomic(target, export_html(executed[name]))
        paths.append(target)
    combined = out_dir / REPORT_NAME
    write_atomic(combined, export_html(combine([executed[n] for n in ran], skipped=skipped)))
    for name, why in skipped.items():
        warnings.warn(f"worksheet {name} cannot apply to these inputs: {why}", stacklevel=2)
    return [combined, *paths]


def _progress(total: int, enabled: bool):
    if not enabled:
        return lambda name: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="worksheet", desc="capnb report")

    def step(name: str | None) -> None:
        if name is None:  # the end (or a failure): the bar closes, nothing trails the output
            bar.close()
            return
        bar.set_postfix_str(name)
        bar.update(1)

    return step


def _curve_parameters(cfg, gpu: str, tp: int) -> dict[str, object]:
    """Worksheet 03's curve: the model, a bundled measured curve, or the user's measured files."""
    from . import data

    if cfg.latency == "model":
        return {"CURVE": "analytic model"}
    if cfg.latency in data.list_latency_curves():
        return {"CURVE": cfg.latency}
    setup = {"model": data.load_model(cfg.model).name, "gpu": gpu, "tensor_parallel": tp}
    return {"BENCHMARK": cfg.latency, "BENCHMARK_SETUP": setup}


def _parameters(config, out_dir: Path) -> dict[str, dict[str, object]]:
    """Each worksheet's parameters for a plan config, from the config and the plan built on it."""
    from . import plan as planning

    cfg = planning.read_config(config)
    with warnings.catch_warnings():  # the checks are part of the plan's text and of 05_plan
        warnings.simplefilter("ignore", planning.PlanWarning)
        plan = planning.build(cfg)
    files = planning.export(plan, out_dir)
    planning.save_config(cfg, out_dir / "plan.toml")
    gpu, tp = plan.attrs["gpu"], int(plan.attrs["tensor_parallel"])
    per_instance = float(plan.attrs["per_instance_qps"])
    target = plan.forecast_target_qps.sel(traffic_quantile=cfg.traffic_quantile)
    # the lengths the plan priced (workload "auto" or "trace": the trace's own, when it has them)
    workload = str(plan.attrs["workload_trace"])
    return {
        "01_forecasting": {
            "TRACE": cfg.trace,
            "INTERVAL": cfg.interval,
            "SLOTS": cfg.slots,
            "QUANTILE": cfg.traffic_quantile,
            "EXCEED_PROBABILITY": cfg.exceed_probability,
            "TRIALS": cfg.trials,
            "SEED": cfg.seed,
        },
        "02_memory": {
            "MODEL": cfg.model,
            "GPU": gpu,
            "TENSOR_PARALLEL": tp,
            "SEQ_LEN": int(plan.attrs["seq_len"]),
            "ACCOUNTING": cfg.accounting,
        },
        "03_capacity": {
            **_curve_parameters(cfg, gpu, tp),
            "METRIC": cfg.sla_metric,
            "QUANTILE": cfg.sla_quantile,
            "SLA": cfg.sla_s,
            "TARGET_QPS": float(target.max()) * 1.0,
            "BUFFER": int(plan.attrs["buffer_instances"]),
            "MODEL": cfg.model,
            "GPU": gpu,
            "TENSOR_PARALLEL": tp,
            "WORKLOAD": workload,
        },
        # the plan's elasticity stage, input for input: the worksheet gives the plan's answer
        "04_elasticity": {
            "TRACE": cfg.trace,
            "TRACE_KIND": cfg.trace_kind,
            "START": cfg.start,
            "INTERVAL": cfg.interval,
            "SLOTS": cfg.slots,
            "DEMAND_SCALE": cfg.demand_scale,
            "STEP_S": cfg.step_s,
            "PER_INSTANCE_QPS": per_instance,
            "MODEL": cfg.model,
            "GPU": gpu,
            "TENSOR_PARALLEL": tp,
            "COLD_START_S": float(plan.attrs["cold_start_s"]),
            "TOLERANCE_S": cfg.tolerance_s,
            "BREACH_BUDGET": cfg.breach_budget,
            "POLICIES": list(cfg.policies),
            "SCALE_UP_THRESHOLDS": list(cfg.scale_up_threshold),
            "COOLDOWNS_S": list(cfg.cooldown_s),
            "BUFFER_INSTANCES": list(cfg.buffer_instances),
        },
        "05_plan": {"PLAN_FILE": str(files["netcdf"].resolve())},
    }

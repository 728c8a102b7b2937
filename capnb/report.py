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


_ONE = r"\d[\d,]*(?:\.\d+)?(?::\d\d)?"
# not inside a date (2025-03-12) or a word (5-minute): no word character or dash on either side
_NUMBER = re.compile(rf"(?<![\w.\-+/])([-+]?{_ONE}(?:\s?[-\u2013]\s?{_ONE})?(?:\s?%|x)?)(?![\w\-])")
# a time on the loaders' placeholder date (a trace with no date), as the plan's text writes it
_PLACEHOLDER_TIME = re.compile(r"\b1970-01-(\d\d)[T ](\d\d:\d\d)(?::\d\d(?:\.\d+)?)?")


def _bold_numbers(escaped: str) -> str:
    """Numbers of an (escaped) sentence set apart in bold: 8.80, 1,414, 13%, 4x, 36-58, 18:00."""
    return _NUMBER.sub(r"<strong>\1</strong>", escaped)


def _undated(text: str) -> str:
    """``1970-01-08T22:30`` (a trace with no date) as the reader's ``day 8 22:30``."""
    return _PLACEHOLDER_TIME.sub(lambda m: f"day {int(m.group(1))} {m.group(2)}", text)


def _prose(text: str) -> str:
    """Lines of plain text as HTML paragraphs (``- `` lines as a list), numbers in bold."""
    parts, items = [], []
    for line in _undated(text).strip().splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("- "):
            items.append(f"<li>{_bold_numbers(html.escape(line[2:]))}</li>")
            continue
        if items:
            parts.append("<ul>" + "".join(items) + "</ul>")
            items = []
        parts.append(f"<p>{_bold_numbers(html.escape(line))}</p>")
    if items:
        parts.append("<ul>" + "".join(items) + "</ul>")
    return "".join(parts)


def _answer_outputs(cell) -> None:
    """An answer cell's printed text, set as prose (a proportional font, numbers in bold)."""
    import nbformat

    text = "".join(
        "".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("name") == "stdout"
    )
    if not text.strip():
        return
    others = [o for o in cell.outputs if o.get("output_type") != "stream"]
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
    for index, cell in enumerate(notebook.cells):
        if index in checks:
            continue
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
    if len(contents) > 1:
        first = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "markdown")
        notebook.cells.insert(first + 1, _raw(_toc(contents[1:], title="On this page")))
    return notebook


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
    target = Path(out_dir) / f"{notebook.metadata['capnb_worksheet']}.html"
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
        sections.append(notebook)
    combined = nbformat.v4.new_notebook(metadata=copy.deepcopy(notebooks[0].metadata))
    combined.metadata.pop("capnb_worksheet", None)
    front = [(1, "the-plan", "The plan in numbers")] if plan is not None else []
    if plan is not None:
        combined.metadata["title"] = (
            f"Capacity plan: {plan.attrs.get('model', '')} on {plan.attrs.get('tensor_parallel')} x "
            f"{plan.attrs.get('gpu')} — capnb report"
        )
    else:
        combined.metadata["title"] = "capnb report"
    combined.cells.append(
        _raw(summary_html(plan, skipped=skipped) if plan is not None else _intro(skipped))
    )
    combined.cells.append(_raw(_toc(front + contents)))
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
    return combined


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
_POLICY_WORDS = {
    "article": "the article's thresholds",
    "hpa": "Kubernetes HPA",
    "knative": "Knative KPA",
    "fixed": "a fixed fleet",
    "fixed_elastic": "fixed capacity + an elastic buffer",
}


def _lines(plan) -> dict[str, str]:
    """The recommendation's lines by their lead word (``Run``, ``Cost``, ``Check`` ...)."""
    from . import plan as planning

    found: dict[str, str] = {}
    for line in planning.describe(plan).splitlines():
        head, _, rest = line.partition(": ")
        if rest and head in ("Run", "Cost", "Burst test", "Traffic", "Note"):
            found.setdefault(head, rest)
    return found


def _num(value: float, digits: int = 0) -> str:
    return f"<strong>{value:,.{digits}f}</strong>"


def _slot_words(slot: int, kind: str) -> str:
    if kind == "hour_of_day":
        return f"{slot:02d}:00-{(slot + 1) % 24:02d}:00"
    if kind == "hour_of_week":
        days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
        return f"{days[slot // 24]} {slot % 24:02d}:00"
    return f"slot {slot}"


def _when(stamp: str) -> str:
    """A time of the trace: ``day 8 22:30`` when its date is a placeholder, else as it is."""
    import numpy as np

    from .charts import day_label, is_undated

    time = np.datetime64(stamp[:19])
    if is_undated({}, np.array([time])):
        return day_label([time], np.datetime64("1970-01-01"))[0]
    return str(time)[:16].replace("T", " ")


def _chosen(plan):
    """The plan's variables at its chosen GPU and tensor-parallel degree."""
    if "capacity_binding" in plan and "gpu" in plan.capacity_binding.dims:
        return plan.sel(gpu=plan.attrs["gpu"], tensor_parallel=int(plan.attrs["tensor_parallel"]))
    return plan


def _item(plan, name: str):
    """A scalar of the chosen option (the first value of a variable with other dims left)."""
    if name not in plan:
        return None
    value = plan[name]
    return value.values.ravel()[0].item() if value.size else None


def summary_html(plan, *, skipped: Mapping[str, str] | None = None) -> str:
    """The report's first page: the plan's answer in numbers, typeset (HTML).

    Everything is read from the plan Dataset (:func:`capnb.plan.build` or :func:`capnb.plan.load`)
    and its words (:func:`capnb.plan.describe`): the GPU and tensor parallelism, the fixed instances
    per slot (a small chart) and the elastic buffer, the policy, the monthly cost, the expected
    breach minutes, what binds at each step and the checks that fired. The latency model's
    uncertainty and a backtest of the plan are shown when the plan carries them (attrs
    ``latency_uncertainty``, ``backtest``).
    """
    from . import glossary

    a = plan.attrs
    config = json.loads(a["config"])
    chosen = _chosen(plan)
    words = _lines(plan)
    gpu, tp, model = a["gpu"], int(a["tensor_parallel"]), a.get("model", config.get("model"))
    quantile = float(config["traffic_quantile"])
    esc = html.escape
    sla = (
        f"{esc(config['sla_metric'])} P{100 * float(config['sla_quantile']):g} &le; "
        f"{float(config['sla_s']):g} s"
    )
    rows: list[tuple[str, str]] = []

    # which GPU, and why this one
    options = _item(plan, "choice_feasible_options")
    why = ""
    if options and int(options) > 1 and "choice_runner_up_gpu" in plan:
        gap = float(plan.choice_cost_gap) / float(plan.choice_cheapest_usd_per_hour)
        why = (
            f" &mdash; the cheapest of <strong>{int(options)}</strong> feasible options; next: "
            f"{int(plan.choice_runner_up_tensor_parallel)} x "
            f"{esc(str(plan.choice_runner_up_gpu.item()))} at <strong>{gap:+.0%}</strong>"
        )
    rows.append(
        ("GPU and tensor parallelism", f"<strong>{tp} x {esc(gpu)}</strong> per instance{why}")
    )
    safe = _item(chosen, "capacity_safe_concurrency")
    rows.append(
        (
            "One instance serves",
            f"{_num(float(a['per_instance_qps']), 2)} requests/s at {sla}"
            + (f", {_num(float(safe))} requests in flight" if safe is not None else ""),
        )
    )

    # instances per slot: the small chart, and the numbers under it
    fixed = plan.fleet_fixed_instances.sel(traffic_quantile=quantile).values
    slots = str(config.get("slots", "slot"))
    chart = _static_chart(plan)
    rows.append(
        (
            "Instances",
            f"{_num(float(fixed.min()))}-{_num(float(fixed.max()))} fixed instances per "
            f"{esc(slots.replace('_', ' '))} slot (P{100 * quantile:g} plan), plus an elastic "
            f"buffer of {_num(float(a['buffer_instances']))} instances for bursts"
            f'<figure class="capnb-figure">{chart}</figure>',
        )
    )

    # the policy
    policy = json.loads(a["policy"])
    settings = []
    if "scale_up_threshold" in policy:
        settings.append(
            f"scale up above <strong>{float(policy['scale_up_threshold']):g}</strong> load"
        )
    if "cooldown_s" in policy:
        settings.append(
            f"scale down after <strong>{float(policy['cooldown_s']) / 60:g}</strong> min low"
        )
    if "min_instances" in policy:
        settings.append(f"at least <strong>{int(policy['min_instances'])}</strong> instances")
    if "buffer_instances" in policy:
        settings.append(f"<strong>{int(policy['buffer_instances'])}</strong> warm spares")
    name = _POLICY_WORDS.get(policy.get("policy", ""), esc(str(policy.get("policy", ""))))
    run = words.get("Run", "")
    rows.append(
        (
            "Autoscaling policy",
            f"<strong>{name}</strong>"
            + (f" ({', '.join(settings)})" if settings else "")
            + (f'<div class="capnb-prose">{_bold_numbers(esc(run))}</div>' if run else ""),
        )
    )

    # money and breaches
    fixed_usd = float(a.get("fixed_monthly_usd", float("nan")))
    rows.append(
        (
            "Monthly cost",
            f"{_num(float(a['monthly_usd']))} USD a month ({glossary.HOURS_PER_MONTH:.0f} h) with "
            "this policy"
            + (
                f"; a fixed fleet for the plan plus the buffer: {_num(fixed_usd)} USD"
                if fixed_usd == fixed_usd  # NaN: no price for a fixed fleet (not computed)
                else ""
            ),
        )
    )
    budget = float(config["breach_budget"]) * glossary.HOURS_PER_MONTH * 60
    rows.append(
        (
            "Expected SLA breach",
            f"{_num(float(a['breach_minutes_per_month']))} minutes a month (budget: "
            f"{_num(budget)} min, {float(config['breach_budget']):.2%} of the time), simulated over "
            f"{_num(float(a['simulated_hours']))} h of the trace",
        )
    )
    burst = words.get("Burst test")  # the plan's own sentence, its placeholder date as "day N"
    if burst:
        rows.append(
            (
                "Burst test",
                f'<span class="capnb-prose">{_bold_numbers(esc(_undated(burst)))}</span>',
            )
        )
    else:
        rows.append(
            (
                "Burst test",
                f"from {esc(_when(str(a['burst_test_start'])))}: "
                f"{_num(float(a['burst_test_breach_minutes']))} min in breach, "
                f"{_num(100 * float(a['burst_test_unserved_share']), 2)}% of requests unserved",
            )
        )

    # the serving mode and the mixed fleet: below the first screen's answer
    if a.get("serving"):  # prefill and decode pools against the aggregated fleet
        rows.append(
            (
                "Serving mode",
                f'<span class="capnb-prose">{_bold_numbers(esc(str(a["serving"])))}</span>',
            )
        )
    if a.get("fleet"):  # one type on demand beside the cheapest mix, planned and replayed
        rows.append(
            (
                "Mixed fleet",
                f'<span class="capnb-prose">{_bold_numbers(esc(str(a["fleet"])))}</span>',
            )
        )
    # -- later work: the latency model's uncertainty and a backtest of the plan. Shown only when
    # the plan Dataset carries them (attrs "latency_uncertainty", "backtest": a sentence each).
    later = [
        (label, a[key])
        for key, label in (
            ("latency_uncertainty", "Latency model uncertainty"),
            ("backtest", "Backtest"),
        )
        if a.get(key)
    ]
    for label, text in later:
        rows.append((label, f'<span class="capnb-later">{_bold_numbers(esc(str(text)))}</span>'))

    numbers = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in rows)

    # what binds at each step
    kind = slots
    target = plan.forecast_target_qps.sel(traffic_quantile=quantile)
    busiest = int(target.argmax("slot"))
    forecast_bind = (
        f"the P{100 * quantile:g} of the busiest slot, {esc(_slot_words(int(target.slot[busiest]), kind))}: "
        f"{_num(float(target.max()))} requests/s"
    )
    if "forecast_buffer_qps" in plan:
        forecast_bind += (
            f"; bursts add {_num(float(plan.forecast_buffer_qps))} requests/s (the buffer)"
        )
    memory_fits = _item(chosen, "memory_max_concurrency")
    memory_bind = (
        f"{_num(float(memory_fits))} sequences of {_num(float(a['seq_len']))} tokens fit beside the "
        f"weights on {tp} x {esc(gpu)}"
        if memory_fits is not None
        else "not computed for a measured curve"
    )
    binding = _item(chosen, "capacity_binding")
    latency_at = _item(chosen, "capacity_latency_at_safe")
    capacity_bind = f"<strong>{esc(str(binding))}</strong>"
    if binding == "latency" and latency_at is not None:
        capacity_bind += (
            f": {_num(float(latency_at), 3)} s at the safe concurrency against the {sla} SLA"
        )
    elif binding == "memory":
        capacity_bind += ": memory fills before latency reaches the SLA"
    elif binding == "measured_range":
        capacity_bind += ": the measured curve ends before the SLA binds"
    cold, tolerance = float(a["cold_start_s"]), float(config["tolerance_s"])
    kind_words = {"fixed_plus_buffer": "fixed capacity plus an elastic buffer"}.get(
        str(a.get("policy_kind", "")), esc(str(a.get("policy_kind", "")).replace("_", " "))
    )
    elastic_bind = (
        f"cold start {_num(cold)} s against a {_num(tolerance)} s latency budget"
        + (" (more than half: scale-ups come too late)" if cold > tolerance / 2 else "")
        + f"; the cheapest run within the breach budget is {kind_words}"
    )
    steps = [
        ("1. forecast", forecast_bind),
        ("2. memory", memory_bind),
        ("3. capacity", capacity_bind),
        ("4. elasticity", elastic_bind),
    ]
    binds = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in steps)

    checks = a.get("warnings", [])
    if isinstance(checks, str):
        try:
            checks = json.loads(checks)
        except ValueError:
            checks = [checks]
    fired = (
        "<ul>" + "".join(f"<li>{_bold_numbers(esc(str(c)))}</li>" for c in checks) + "</ul>"
        if checks
        else "<p>None: the article's method applies to these inputs as it stands.</p>"
    )
    note = words.get("Note")
    lede = (
        f"Serve <strong>{esc(str(model))}</strong> on <strong>{tp} x {esc(gpu)}</strong> per "
        f"instance, <strong>{fixed.min():.0f}-{fixed.max():.0f}</strong> instances per slot plus "
        f"<strong>{int(a['buffer_instances'])}</strong> for bursts, scaled by {name}: about "
        f"<strong>{float(a['monthly_usd']):,.0f} USD</strong> a month and "
        f"<strong>{float(a['breach_minutes_per_month']):,.0f}</strong> minutes of SLA breach."
    )
    return (
        '<section class="capnb-front" id="the-plan">'
        f"<h1>Capacity plan for {esc(str(model))}</h1>"
        f'<p class="capnb-lede">{lede}</p>'
        f'<h2>The plan in numbers</h2><dl class="capnb-numbers">{numbers}</dl>'
        "<!-- capnb: the latency model's uncertainty and the plan's backtest are listed above when "
        "the plan carries them (attrs latency_uncertainty, backtest) -->"
        f'<h2>What binds at each step</h2><table class="capnb-steps">{binds}</table>'
        f"<h2>Checks that fired</h2>{fired}"
        + (f'<p class="capnb-prose">{_bold_numbers(esc(note))}</p>' if note else "")
        + f'<p class="capnb-prose">Inputs: {esc(_inputs(plan))}. Every worksheet below ran on '
        "them and passed its closing checks.</p>" + _skipped_html(skipped) + "</section>"
    )


def _static_chart(plan) -> str:
    """The instances-per-slot chart as an SVG drawn here (vl-convert): no script, prints as is."""
    import vl_convert as vlc

    from .charts import import_altair, plan_instances

    alt = import_altair()
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
) -> list[Path]:
    """Execute the worksheets and write one HTML per worksheet plus the combined report.

    Parameters
    ----------
    config
        None (every worksheet on its bundled defaults), or a plan config (:class:`capnb.plan.PlanConfig`,
        mapping or TOML/YAML path): the plan is built once, exported to ``out_dir`` (``plan.nc``,
        ``plan.json``), and each worksheet runs on the config's inputs and the plan's choices.
        On the defaults, when ``05_plan`` is among the worksheets, the plan is built once too
        (first, before the worksheets' kernels start: they share numba's on-disk cache), exported,
        and both the plan worksheet and the report's first page read it.
    out_dir
        Where the reports go (created if needed). Every file is written atomically.
    worksheets
        Which worksheets, in order.
    jobs
        Worksheets executed at once (each in its own kernel).
    progress
        Show a progress bar (on a terminal; elsewhere one line per worksheet).
    show_code
        Include the worksheets' code (their checks are never shown).

    Returns
    -------
    list of pathlib.Path
        The combined report first, then one file per worksheet.
    """
    from concurrent.futures import ThreadPoolExecutor

    from nbclient.exceptions import CellExecutionError

    out_dir = Path(out_dir)
    kept: list = []
    written: list = []  # the plan's exports: removed again if no worksheet runs
    parameters = (
        _parameters(config, out_dir, keep=kept, written=written) if config is not None else {}
    )
    bar = _progress(len(worksheets), progress)
    executed, skipped = {}, {}
    try:
        planned = None
        if config is None and "05_plan" in worksheets:
            # Built before any worksheet's kernel starts, not beside them: this process and the
            # kernels compile the same numba kernels (the engine model, the autoscaler) into one
            # on-disk cache, and numba's cache index is not safe against processes writing it at
            # once. A kernel with several overloads, compiled by two processes in a different
            # order, can end up indexed under the other overload's machine code: a segmentation
            # fault on a fresh install (seen with the serving comparison's engine runs). Built
            # first, the plan fills the cache; the worksheets then load it.
            planned = _default_plan(out_dir)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:

            def run(name: str):
                given = parameters.get(name)
                if name == "05_plan" and planned is not None:
                    given = {"PLAN_FILE": str(planned.resolve())}
                return execute(name, parameters=given, timeout=timeout)

            futures = {name: pool.submit(run, name) for name in worksheets}
            for name in worksheets:
                try:
                    executed[name] = futures[name].result()
                except CellExecutionError as error:
                    if config is None:  # the bundled defaults must always run: a bug, not data
                        raise
                    # on a user's inputs a worksheet may not apply: say why in one line, go on
                    skipped[name] = _why(error)
                bar(name)
            if planned is not None:
                from . import plan as planning

                kept.append(planning.load(planned))
    finally:
        bar(None)
    if not executed:
        for path in written:  # nothing half written: no report, so none of its files
            Path(path).unlink(missing_ok=True)
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
        write_atomic(target, export_html(executed[name], show_code=show_code))
        paths.append(target)
    combined = out_dir / REPORT_NAME
    notebook = combine(
        [executed[n] for n in ran],
        skipped=skipped,
        plan=kept[0] if kept else None,
        show_code=show_code,
    )
    write_atomic(combined, export_html(notebook, show_code=show_code, prepared=True))
    for name, why in skipped.items():
        warnings.warn(f"worksheet {name} cannot apply to these inputs: {why}", stacklevel=2)
    return [combined, *paths]


def _why(error) -> str:
    """One line on why a worksheet did not run: its error, or the closing check that failed."""
    if error.ename != "AssertionError":
        return f"{error.ename}: {error.evalue}".strip(": ")
    # the failing line of the check cell, from the traceback (its "---->" marker)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line for line in plain.splitlines() if line.lstrip().startswith("---->")]
    where = lines[-1].split("---->", 1)[1].strip() if lines else ""
    where = re.sub(r"^\d+\s*", "", where)
    return (
        f"{FAILED_CHECK}"
        + (f": {where}" if where else "")
        + (f" ({error.evalue})" if error.evalue else "")
    )


def _default_plan(out_dir: Path) -> Path:
    """The plan on the bundled defaults, built once and exported; the path of its NetCDF file."""
    from . import plan as planning

    with warnings.catch_warnings():  # the checks are part of the plan's text and of 05_plan
        warnings.simplefilter("ignore", planning.PlanWarning)
        plan = planning.build()
    return planning.export(plan, out_dir)["netcdf"]


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


def _curve_parameters(cfg, gpu: str, tp: int) -> dict[str, object]:
    """Worksheet 03's curve: the model, a bundled measured curve, or the user's measured files."""
    from . import data

    if cfg.latency == "model":
        return {"CURVE": "analytic model"}
    if cfg.latency == "engine":
        return {"CURVE": "engine model"}
    if cfg.latency in data.list_latency_curves():
        return {"CURVE": cfg.latency}
    setup = {"model": data.load_model(cfg.model).name, "gpu": gpu, "tensor_parallel": tp}
    return {"BENCHMARK": cfg.latency, "BENCHMARK_SETUP": setup}


def _parameters(
    config, out_dir: Path, *, keep: list | None = None, written: list | None = None
) -> dict[str, dict[str, object]]:
    """Each worksheet's parameters for a plan config, from the config and the plan built on it.

    ``keep``: a list the plan Dataset is appended to (the report's first page reads it);
    ``written``: a list the paths of the files written (the plan's exports) are appended to.
    """
    from . import plan as planning

    cfg = planning.read_config(config)
    with warnings.catch_warnings():  # the checks are part of the plan's text and of 05_plan
        warnings.simplefilter("ignore", planning.PlanWarning)
        plan = planning.build(cfg)
    if keep is not None:
        keep.append(plan)
    files = planning.export(plan, out_dir)
    planning.save_config(cfg, out_dir / "plan.toml")
    if written is not None:
        written.extend([*files.values(), out_dir / "plan.toml"])
    gpu, tp = plan.attrs["gpu"], int(plan.attrs["tensor_parallel"])
    per_instance = float(plan.attrs["per_instance_qps"])
    target = plan.forecast_target_qps.sel(traffic_quantile=cfg.traffic_quantile)
    # the lengths the plan priced (workload "auto" or "trace": the trace's own, when it has them)
    workload = str(plan.attrs["workload_trace"])
    return {
        "01_forecasting": {  # the trace read as the plan reads it: its kind and clock too
            "TRACE": cfg.trace,
            "TRACE_KIND": cfg.trace_kind,
            "START": cfg.start,
            "TRACE_OPTIONS": planning.trace_options(cfg),
            "INTERVAL": cfg.interval,
            "SLOTS": cfg.slots,
            "DEMAND_SCALE": cfg.demand_scale,
            "QUANTILE": cfg.traffic_quantile,
            "GROWTH_MODEL": cfg.growth_model,  # the forecast the plan carried its trace forward by
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
            # the plan's representative requests, so that the worksheet prices what the plan did
            "WORKLOAD_SAMPLES": int(plan.attrs["workload_samples"]),
        },
        # the plan's elasticity stage, input for input: the worksheet gives the plan's answer
        "04_elasticity": {
            "TRACE": cfg.trace,
            "TRACE_KIND": cfg.trace_kind,
            "START": cfg.start,
            "TRACE_OPTIONS": planning.trace_options(cfg),
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
        "06_serving": {"CONFIG": str((out_dir / "plan.toml").resolve())},
    }

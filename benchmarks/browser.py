"""Worksheets in the browser: from a control's change to its charts' SVG changing, in JupyterLab.

What a person feels is measured where the person is. Each worksheet notebook (a copy) runs in
JupyterLab with a real kernel, in Debian's chromium driven by playwright (as ``tests/test_browser.py``
does). Each control is then changed the way a person changes it: a dropdown through its ``<select>``,
a slider by the keyboard on its handle (one step). In the page, a capture listener notes the time of
the control's event (``performance.now()``) and a MutationObserver the time of the last change inside
each chart's cell; the figure is the time from the event to the last chart's SVG change, once the page
has been quiet for a second, and the time to the first chart's first change (a worksheet whose step
shows a quick first stage redraws some charts before the others). The time to the answer's last
change is shown too; for a change that redraws no chart (its pictures stay the same) it is the
figure. The kernel's own time for the
same change (the worksheet's update: the step function, the answer, the charts re-rendered and sent:
what the ``worksheets`` step times headless) is shown beside it.

The floor: each notebook gets one more worksheet, a dropdown whose step function does nothing and a
one-point chart that shows the dropdown's value, measured the same way in the same page; no control
can respond faster than that. Controls that re-run a simulation or a sweep (a new cold start, a new
tolerance, a new interval; the capacity worksheet's model, GPU and TP on the analytic and the engine
curves) walk
through values never visited before, so the notebook's kept stages cannot answer from memory; the
others flip between two values and report the median of the changes.

Needs chromium (``CAPNB_CHROMIUM`` or ``chromium`` on PATH) and playwright (the ``test`` extra).
``CAPNB_WORKSHEETS=04_elasticity`` (comma-separated) measures only those worksheets.
``CAPNB_REDRAW=full`` in the environment makes the worksheets redraw as before the in-place update
(issue 16), to measure both on the same machine in the same hour.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from capnb import words

from . import Row

GOAL_S = 0.150
GOAL_SIMULATION_S = 1.0
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: Appended to each notebook copy: the floor worksheet, and the kernel's time of each worksheet update.
_FLOOR_CELL = """
import time as _time
import altair as _alt
import ipywidgets as _widgets
from capnb.widgets import Chart as _Chart, Worksheet as _Worksheet, dropdown as _dropdown

def _nothing(floor):
    return {"value": floor}

def _point(results, inputs):
    return (_alt.Chart(_alt.Data(values=[{"v": results["value"]}])).mark_text(fontSize=20)
            .encode(text="v:N").properties(width=60, height=30))

capnb_floor = _Worksheet(_nothing, {"floor": _dropdown("floor control", ["a", "b"], "a")},
                         charts={"floor": _Chart(_point, reads=("value",))})
capnb_kernel = _widgets.Label("kernel -")
capnb_updates = [0]

def _timed(update):
    def timed(*args, **kwargs):
        start = _time.perf_counter()
        update(*args, **kwargs)
        capnb_updates[0] += 1
        capnb_kernel.value = f"kernel {(_time.perf_counter() - start) * 1e3:.1f} ms #{capnb_updates[0]}"
    return timed

ws.update = _timed(ws.update)
capnb_floor.update = _timed(capnb_floor.update)
display(capnb_floor.panel, capnb_kernel)
print("capnb floor ready")
"""
_FLOOR_CHART_CELL = 'capnb_floor.show("floor")'

# the kernel's label (its element found once); it and the wait for a change's end run in the page: a
# wait from Python (a CSS and text query of the page every 100 ms, each a round trip through the
# driver) cost the page's main thread and the machine's two cores during the change it measured
_KERNEL = """() => {
  const found = window.capnbKernelLabel;
  if (found && found.isConnected) return found.textContent;
  window.capnbKernelLabel = [...document.querySelectorAll('.widget-label')]
    .find((e) => /^kernel /.test(e.textContent));
  return window.capnbKernelLabel ? window.capnbKernelLabel.textContent : null;
}"""

# JavaScript: the page's record of one change
_INSTALL = """() => {
  const cells = () => [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  window.capnbCells = cells;
  window.capnbTrial = null;
  window.capnbKernel = @KERNEL@;
  const note = (e) => {
    const t = window.capnbTrial;
    if (t && t.t0 === null) t.t0 = performance.now();
  };
  for (const kind of ['keydown', 'input', 'change']) document.addEventListener(kind, note, true);
  const observer = new MutationObserver((records) => {
    const t = window.capnbTrial;
    if (!t || t.t0 === null) return;
    const now = performance.now();
    const all = cells();
    for (const r of records) {
      const node = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      if (node && node.closest('.widget-html-content')) t.answer = now;  // a worksheet's answer
      const cell = node && node.closest('.jp-Cell');
      if (!cell || !cell.querySelector('.capnb-chart')) continue;
      const i = all.indexOf(cell);
      if (!(i in t.first)) t.first[i] = now;
      t.last[i] = now;
    }
  });
  observer.observe(document.querySelector('.jp-Notebook'),
                   {subtree: true, childList: true, attributes: true, characterData: true});
}""".replace("@KERNEL@", _KERNEL)

_START = """() => {
  const snap = {};
  window.capnbCells().forEach((c, i) => {
    const svg = c.querySelector('.capnb-chart svg.marks');
    if (svg) snap[i] = svg.outerHTML;
  });
  window.capnbTrial = {t0: null, first: {}, last: {}, snap, answer: null};
}"""

# the kernel's label changed (it follows the update's last stage: a staged update goes quiet
# between its stages), then quiet for `quiet` ms after the last chart change, or after the label's
# change when no chart changed (a change whose pictures stay the same); false after `wait` ms
_WAIT = """async ([before, quiet, wait]) => {
  const t = window.capnbTrial, kernel = window.capnbKernel, end = performance.now() + wait;
  let done = null;
  while (performance.now() < end) {
    if (done === null && kernel() !== before) done = performance.now();
    const times = Object.values(t.last);
    const last = Math.max(done === null ? Infinity : done, ...times);
    if (done !== null && performance.now() - last > quiet) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}"""

_RESULT = """() => {
  const t = window.capnbTrial;
  const all = window.capnbCells();
  const changed = {};
  const first = {};
  for (const [i, when] of Object.entries(t.last)) {
    const svg = all[i] && all[i].querySelector('.capnb-chart svg.marks');
    if (svg && svg.outerHTML !== t.snap[i]) {
      changed[i] = when - t.t0;
      first[i] = t.first[i] - t.t0;
    }
  }
  return {t0: t.t0, changed, first, answer: t.answer === null ? null : t.answer - t.t0};
}"""


def _chromium() -> str | None:
    return (
        os.environ.get("CAPNB_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _copy(name: str, root: Path) -> None:
    from capnb.report import worksheet_path

    notebook = json.loads(worksheet_path(name).read_text(encoding="utf-8"))
    for source in (_FLOOR_CELL, _FLOOR_CHART_CELL):
        notebook["cells"].append(
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": source.strip(),
            }
        )
    (root / f"{name}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")


class _Lab:
    """JupyterLab on localhost, serving copies of the worksheets."""

    def __init__(self, root: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                f"--port={self.port}",
                "--ip=127.0.0.1",
                "--ServerApp.token=",
                "--ServerApp.password=",
                f"--ServerApp.root_dir={root}",
                "--LabApp.news_url=",
                "--allow-root",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{self.url}/api", timeout=1)
                return
            except OSError:
                time.sleep(0.5)
        self.close()
        raise RuntimeError("JupyterLab did not start")

    def close(self) -> None:
        self.server.terminate()
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()


#: JupyterLab has a kernel for the open notebook: the toolbar names one and the execution indicator
#: is idle (not "connecting" or "starting").
_KERNEL = (
    "[...document.querySelectorAll('.jp-Toolbar-kernelName')]"
    " .some(e => e.textContent.trim() !== '' && e.textContent.trim() !== 'No Kernel')"
    " && [...document.querySelectorAll('.jp-Notebook-ExecutionIndicator')]"
    " .some(e => e.dataset.status === 'idle')"
)
#: ... or it asks which kernel to start.
_DIALOG = "document.querySelector('.jp-Dialog') !== null"


def start_kernel(page) -> None:
    """Wait until the open notebook's kernel is up, answering Lab's kernel dialog if it asks.

    Lab either starts the notebook's kernel on its own or asks which to start; waiting a fixed
    time for a dialog that may never come idled 10 s a notebook.
    """
    page.wait_for_function(f"() => {_DIALOG} || ({_KERNEL})", timeout=60_000)
    if page.locator(".jp-Dialog").count():
        page.get_by_role("button", name="Select", exact=True).click()
        page.wait_for_function(f"() => {_KERNEL}", timeout=60_000)


def _run_all(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    start_kernel(page)
    page.get_by_role("menuitem", name="Run").click()
    page.get_by_text("Run All Cells", exact=True).click()
    ready = page.locator(".jp-OutputArea-output").filter(has_text="capnb floor ready").first
    failed = page.locator(".jp-OutputArea-output").filter(has_text="Traceback").first
    deadline = time.monotonic() + 600
    while ready.count() == 0:
        if failed.count():
            raise RuntimeError(f"{url}: a cell failed: {failed.text_content()[-2_000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url}: the worksheet did not finish in 600 s")
        page.wait_for_timeout(500)
    total = page.locator(".capnb-chart").count()
    page.wait_for_function(
        f"document.querySelectorAll('.capnb-chart svg.marks').length >= {total}", timeout=120_000
    )
    page.wait_for_timeout(1_500)


def _control(page, label: str):
    pattern = re.compile(f"^{re.escape(label)}$")
    return (
        page.locator(".jp-OutputArea .widget-inline-hbox")
        .filter(has=page.locator("label.widget-label", has_text=pattern))
        .first
    )


def _act(page, label: str, action: str) -> None:
    """Change a control as a person would: an option by its label, or a key on a slider's handle."""
    box = _control(page, label)
    if action.startswith("key:"):
        handle = box.locator(".noUi-handle").last  # a range slider: its upper handle
        handle.focus()
        page.keyboard.press(action[4:])
    else:
        box.locator("select").select_option(label=action)


def _kernel_ms(page) -> str:
    return page.evaluate("() => window.capnbKernel()")


def _measure(page, label: str, action: str, *, quiet_ms: int = 1_000, wait_s: float = 120) -> dict:
    page.evaluate(_START)
    before = _kernel_ms(page)
    _act(page, label, action)
    if not page.evaluate(_WAIT, [before, quiet_ms, wait_s * 1e3]):
        return {"seconds": None, "first": None, "charts": 0, "kernel": None, "answer": None}
    result = page.evaluate(_RESULT)
    kernel = _kernel_ms(page)
    match = re.match(r"kernel ([\d.]+) ms", kernel or "")
    times = list(result["changed"].values())
    return {
        "seconds": max(times) / 1e3 if times else None,
        # a staged update (a worksheet step that yields a quick first stage) redraws some charts
        # before the others: the first chart's first change
        "first": min(result["first"].values()) / 1e3 if times else None,
        "charts": len(times),
        "answer": result["answer"] / 1e3 if result["answer"] is not None else None,
        "kernel": float(match.group(1)) / 1e3 if match and kernel != before else None,
    }


def _flip(a: str, b: str, n: int) -> list[str]:
    return [a, b] * n


#: Per worksheet: (label, what changes, the actions in order, "flip" or "new" values). A flip returns
#: to values already seen (the kept stages answer); a walk visits a new value every time.
def _cases(quick: bool) -> dict[str, list[tuple[str, str, list[str], str]]]:
    n = 1 if quick else 3
    right_left = _flip("key:ArrowRight", "key:ArrowLeft", n)
    walk = ["key:ArrowRight"] * (2 if quick else 4)
    return {
        "01_forecasting": [
            ("plan on", "quantile P95 <-> P99", _flip("P95", "P99", n), "flip"),
            ("monthly exceedance", "exceed_probability 1% <-> 5%", _flip("1%", "5%", n), "flip"),
            ("bursts a month", "bursts_per_month one step", right_left, "flip"),
            ("burst length (h)", "burst_hours (upper) one step", right_left, "flip"),
            ("burst height (x baseline)", "burst_multiplier (upper) one step", right_left, "flip"),
            (
                "interval",
                "interval, new values",
                ["15min", "20min", "30min", "1h"][: len(walk)],
                "new",
            ),
        ],
        "02_memory": [
            ("GPU", "gpu H200 <-> H100-SXM", _flip("H200", "H100-SXM", n), "flip"),
            ("tokens per sequence", "seq_len one step", right_left, "flip"),
            ("tensor parallel (GPUs)", "tensor_parallel 4 <-> 2", _flip("4", "2", n), "flip"),
            ("concurrency axis up to", "axis_up_to one step", right_left, "flip"),
            ("KV cache dtype", "kv_dtype fp8 <-> auto", _flip("fp8", "auto", n), "flip"),
            ("headroom (share)", "headroom one step", right_left, "flip"),
            ("model", "model 8B <-> 70B", _flip("Llama-3.1-8B", "Llama-3.1-70B", n), "flip"),
            ("accounting", "accounting vllm <-> article", _flip("vllm", "article", n), "flip"),
        ],
        "03_capacity": [
            ("P99 SLA (s)", "sla one step", right_left, "flip"),
            ("target (requests/s)", "target_qps one step", right_left, "flip"),
            ("buffer (instances)", "buffer one step", right_left, "flip"),
            ("SLA metric", "metric tpot <-> ttft", _flip("tpot", "ttft", n), "flip"),
            (
                "latency curve",
                "curve long <-> short",
                _flip("dstack-vllm-mi300x-long", "dstack-vllm-mi300x-short", n),
                "flip",
            ),
            ("latency curve", "curve -> analytic model (new)", ["analytic model"], "new"),
            (
                "GPU",
                "gpu, analytic curve, new values",
                ["H200", "B200", "A100-80GB", "H100-PCIe"][: len(walk)],
                "new",
            ),
            ("tensor parallel (GPUs)", "tensor_parallel, analytic, new values", ["8", "2"], "new"),
            ("model", "model, analytic, new values", ["Llama-3.1-8B", "Qwen3-32B"], "new"),
            ("latency curve", "curve -> engine model (new)", ["engine model"], "new"),
            (
                "GPU",
                "gpu, engine curve, new values",
                ["H200", "B200", "A100-80GB", "L40S"][: len(walk)],
                "new",
            ),
            ("tensor parallel (GPUs)", "tensor_parallel, engine, new values", ["4", "1"], "new"),
            ("model", "model, engine, new values", ["Llama-3.1-70B", "Qwen3-8B"], "new"),
        ],
        "04_elasticity": [
            (
                "policy",
                "policy article <-> hpa",
                _flip(words.POLICY_NAMES["article"], words.POLICY_NAMES["hpa"], n),
                "flip",
            ),
            (
                "scale-up threshold / target utilisation",
                "scale_up_threshold one step",
                right_left,
                "flip",
            ),
            ("scale-down delay", "cooldown_s one step", right_left, "flip"),
            ("fewest instances (the fixed part)", "min_instances one step", right_left, "flip"),
            ("warm spare instances", "buffer_instances 0 <-> 2", right_left, "flip"),
            (
                "breach budget (share of time)",
                "breach_budget 0.0001 <-> 0.001",
                _flip("0.0001", "0.001", n),
                "flip",
            ),
            (
                "latency tolerance (s)",
                "tolerance_s, new values",
                ["120.0", "300.0", "600.0", "30.0"][: len(walk)],
                "new",
            ),
            ("cold start (s)", "cold_start_s one step up, new values", walk, "new"),
        ],
    }


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.0f} ms"


def _summary(values: list[float | None]) -> tuple[float | None, str]:
    got = [v for v in values if v is not None]
    if not got:
        return None, "-"
    return statistics.median(got), f"{_fmt(min(got))}-{_fmt(max(got))}"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min), {five:.2f} (5 min)"


def run(quick: bool = False, worksheets: list[str] | None = None) -> list[Row]:
    chromium = _chromium()
    if chromium is None:
        raise RuntimeError("the browser benchmark needs chromium (CAPNB_CHROMIUM or on PATH)")
    from playwright.sync_api import sync_playwright

    cases = _cases(quick)
    # CAPNB_WORKSHEETS=04_elasticity (comma-separated): only those worksheets
    chosen = [w.strip() for w in os.environ.get("CAPNB_WORKSHEETS", "").split(",") if w.strip()]
    names = worksheets or chosen or list(cases)
    rows: list[Row] = []
    mode = os.environ.get("CAPNB_REDRAW", "in place")
    with tempfile.TemporaryDirectory(prefix="capnb-browser-") as tmp:
        root = Path(tmp)
        for name in names:
            _copy(name, root)
        lab = _Lab(root)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=ARGS)
                try:
                    for name in names:
                        try:
                            rows.extend(
                                _worksheet(browser, lab.url, name, cases[name], quick, mode)
                            )
                        except RuntimeError as error:  # one worksheet failing leaves the others
                            rows.append(
                                Row(f"{name}: not measured", mode, float("nan"), str(error))
                            )
                finally:
                    browser.close()
        finally:
            lab.close()
    return rows


def _worksheet(browser, url: str, name: str, controls, quick: bool, mode: str) -> list[Row]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.perf_counter()
    _run_all(page, f"{url}/lab/workspaces/bench-{name}/tree/{name}.ipynb?reset")
    opened = time.perf_counter() - start
    page.evaluate(_INSTALL)
    rows = [
        Row(
            f"{name}: open and run all",
            mode,
            opened,
            f"{opened:.1f} s from opening to every chart drawn",
            {},
            f"not an interaction; {_load()}",
        )
    ]
    floor_runs = [_measure(page, "floor control", v) for v in _flip("b", "a", 1 if quick else 3)]
    floor, floor_range = _summary([r["seconds"] for r in floor_runs])
    rows.append(
        Row(
            f"{name}: floor (a dropdown whose step does nothing, a one-point chart)",
            mode,
            floor or float("nan"),
            f"{_fmt(floor)} median, {floor_range}",
            {},
            f"kernel {_fmt(_summary([r['kernel'] for r in floor_runs])[0])}; {_load()}",
        )
    )
    for label, what, actions, kind in controls:
        runs = [_measure(page, label, action) for action in actions]
        seconds, spread = _summary([r["seconds"] for r in runs])
        if seconds is None:  # no chart changed (the same pictures): the figure is the answer's
            seconds, spread = _summary([r["answer"] for r in runs])
            spread += ", the answer (no chart changed)"
        kernel, _ = _summary([r["kernel"] for r in runs])
        first, first_spread = _summary([r["first"] for r in runs])
        answer, _ = _summary([r["answer"] for r in runs])
        goal = GOAL_SIMULATION_S if kind == "new" else GOAL_S
        met = "-" if seconds is None else ("met" if seconds < goal else "NOT met")
        first_met = "-" if first is None else ("met" if first < goal else "NOT met")
        charts = sorted({r["charts"] for r in runs})
        rows.append(
            Row(
                f"{name}: {what}",
                mode,
                seconds if seconds is not None else float("nan"),
                f"{_fmt(seconds)} median, {spread} (floor {_fmt(floor)}; goal < {goal * 1e3:,.0f} ms: {met})",
                {},
                f"first chart redrawn {_fmt(first)} median, {first_spread} (goal: {first_met}); "
                f"answer {_fmt(answer)}; kernel {_fmt(kernel)}; {len(runs)} changes, charts "
                f"changed {charts}; {_load()}",
            )
        )
        print(rows[-1].kernel, rows[-1].throughput, rows[-1].note, file=sys.stderr, flush=True)
    page.close()
    return rows

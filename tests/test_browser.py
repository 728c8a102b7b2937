"""Worksheets in a real browser with no network: JupyterLab live, and the exported HTML report.

Both use Debian's chromium driven by playwright (no browser download); `.ci/run` installs chromium and
sets CAPNB_REQUIRE_BROWSER so that these tests fail rather than skip in CI.
"""

import json
import os
import shutil

import pytest

from benchmarks import browser as bench
from benchmarks.browser import ARGS  # chromium flags, shared with the benchmark
from capnb import notebook

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None and not os.environ.get("CAPNB_REQUIRE_BROWSER"),
        reason="needs Debian's chromium (.ci/run installs it and sets CAPNB_REQUIRE_BROWSER)",
    ),
]


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM, "CAPNB_REQUIRE_BROWSER is set but chromium is not on PATH"
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


def _watch(page):
    """Record page errors and every request that leaves the machine."""
    seen = {"errors": [], "external": []}
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    page.on(
        "request",
        lambda request: (
            None
            if request.url.startswith(("http://127.0.0.1", "file:", "data:", "blob:"))
            else seen["external"].append(request.url)
        ),
    )
    return seen


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on localhost serving a copy of the memory worksheet."""
    root = tmp_path_factory.mktemp("lab")
    from capnb.report import WORKSHEETS, worksheet_path

    for name in WORKSHEETS:
        shutil.copy(worksheet_path(name), root / f"{name}.ipynb")
    from benchmarks.browser import _Lab  # the benchmark's own JupyterLab, one place

    server = _Lab(root)  # raises if JupyterLab does not answer
    yield server.url
    server.close()


def _run_all(page, url: str, screenshot) -> None:
    """Open a worksheet in JupyterLab, start its kernel, run every cell and wait for the last one."""
    from benchmarks.browser import start_kernel

    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    start_kernel(page)  # a fresh server may ask which kernel to start
    page.get_by_role("menuitem", name="Run").click()
    page.get_by_text("Run All Cells", exact=True).click()
    try:  # every worksheet ends by printing "checks passed"
        done = page.locator(".jp-OutputArea-output").filter(has_text="checks passed")
        done.first.wait_for(timeout=240_000)
    finally:
        page.screenshot(path=str(screenshot), full_page=False)


#: The worksheets with controls, run in Lab (02 is the memory page's below). The two without (00,
#: 05: text, tables and charts) draw through the same output path in Lab as these, and their own
#: pages draw offline in the report's test below; nbval and the report run them whole.
@pytest.mark.parametrize("worksheet", ["01_forecasting", "03_capacity", "04_elasticity"])
def test_every_worksheet_runs_and_draws_in_jupyterlab(browser, lab, tmp_path, worksheet):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    seen = _watch(page)
    # a workspace of its own, so that Lab does not reopen the other worksheets
    _run_all(
        page, f"{lab}/lab/workspaces/{worksheet}/tree/{worksheet}.ipynb?reset", tmp_path / "lab.png"
    )
    _drawn_whole(page, worksheet, seen)
    page.close()


def _drawn_whole(page, worksheet: str, seen) -> None:
    """Every chart of a worksheet run in Lab drew, no cell failed, its controls have room."""
    charts = page.locator(".capnb-chart")
    total = charts.count()
    assert total >= 2, worksheet
    page.wait_for_function(
        f"document.querySelectorAll('.capnb-chart svg.marks').length >= {total}", timeout=60_000
    )
    assert (
        page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        .filter(has_text="Traceback")
        .count()
        == 0
    )
    # the step worksheets show their controls
    assert (
        page.locator(".jp-OutputArea .widget-dropdown, .jp-OutputArea .widget-slider").count() >= 2
    )
    # a long label has a fixed width beside the slider: every track keeps room to drag
    tracks = page.locator(".jp-OutputArea .widget-slider .slider-container").evaluate_all(
        "es => es.map(e => e.getBoundingClientRect().width)"
    )
    assert tracks and min(tracks) > 100, tracks
    assert seen["errors"] == [] and seen["external"] == []


@pytest.fixture(scope="module")
def memory_page(browser, lab, tmp_path_factory):
    """The memory worksheet run whole in JupyterLab: its page, which the tests below go on using.

    In order: the run and its drawing, then one control (the GPU) through the kernel, then the
    in-place updates of the kept vega views (a param from the kernel, a dataset not given again,
    outputs that follow at rest).
    """
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.seen = _watch(page)
    _run_all(page, f"{lab}/lab/workspaces/widget/tree/02_memory.ipynb?reset",
             tmp_path_factory.mktemp("memory") / "lab.png")  # fmt: skip
    yield page
    page.close()


_TITLES = "[...document.querySelectorAll('svg.marks .role-title-text')].map(t => t.textContent)"


def _mark_svgs(page) -> None:
    page.evaluate(
        "document.querySelectorAll('.capnb-chart svg.marks').forEach(s => s.capnbOld = 1)"
    )


def test_the_memory_worksheet_runs_and_a_widget_change_redraws_its_chart(memory_page):
    page = memory_page
    _drawn_whole(page, "02_memory", page.seen)
    _mark_svgs(page)
    assert "on 2 x H100-SXM" in page.evaluate(_TITLES)[0]
    # the change goes through the kernel and updates the displayed chart in place: the
    # breakdown's svg is the one drawn before, its view took the new data and title
    bench._act(page, "GPU", "H200")
    page.wait_for_function(f"{_TITLES}.some(t => t.includes('2 x H200'))", timeout=60_000)
    kept = page.evaluate(
        "[...document.querySelectorAll('.capnb-chart svg.marks')]"
        ".filter(s => s.textContent.includes('2 x H200')).map(s => s.capnbOld === 1)"
    )
    assert kept == [True]
    assert page.seen["errors"] == [] and page.seen["external"] == []


def test_a_param_value_from_the_kernel_moves_the_kept_view(memory_page):
    page = memory_page
    _mark_svgs(page)
    heatmap = "document.querySelectorAll('.capnb-chart svg.marks')[1]"
    before = page.evaluate(f"{heatmap}.innerHTML")
    bench._act(page, "tensor parallel (GPUs)", "4")
    page.wait_for_function(f"{heatmap}.innerHTML !== {before!r}", timeout=60_000)
    page.wait_for_timeout(500)
    assert page.evaluate(f"{heatmap}.capnbOld") == 1
    assert page.locator(".capnb-chart").count() == page.locator(".capnb-chart svg.marks").count()
    assert page.seen["errors"] == []


def _layered(second: list[dict], title: str) -> dict:
    """Two layers, each from its own dataset, named as altair names them."""
    import altair as alt
    import pandas as pd

    first = alt.Chart(pd.DataFrame({"x": [1, 2, 3], "y": [1, 4, 9]})).mark_line()
    other = alt.Chart(pd.DataFrame(second)).mark_point()
    chart = alt.layer(first.encode(x="x:Q", y="y:Q"), other.encode(x="x:Q", y="y:Q"), title=title)
    return chart.to_dict()


def _draw(page, html: str) -> None:
    """Put a chart's HTML in the page as an output would: its div and tables, then its script run."""
    head, script = html.rsplit('<script type="text/javascript">', 1)
    body = script.rsplit("</script>", 1)[0]
    page.evaluate(
        "([head, body]) => { const box = document.createElement('div'); box.className = 'capnb-test';"
        " box.innerHTML = head; document.body.appendChild(box); (0, eval)(body); }",
        [head, body],
    )


def test_a_dataset_the_view_holds_already_is_not_given_again(memory_page):
    page = memory_page
    first = _layered([{"x": 1, "y": 2}], "before")
    _draw(page, notebook.chart_html(first, key="capnb-test-key"))
    page.wait_for_function("window.capnbViews && window.capnbViews['capnb-test-key']")
    # a new output replaces the old one (JupyterLab removes it); the kept view records its data
    page.evaluate(
        "() => { const kept = window.capnbViews['capnb-test-key']; kept.given = [];"
        " const data = kept.view.data.bind(kept.view);"
        " kept.view.data = (name, values) => { if (values !== undefined) kept.given.push(name);"
        " return data(name, values); };"
        " document.querySelectorAll('.capnb-test').forEach(b => b.remove()); }"
    )
    second = _layered([{"x": 2, "y": 3}, {"x": 3, "y": 1}], "after")
    _draw(page, notebook.chart_html(second, key="capnb-test-key"))
    page.wait_for_function(
        "[...document.querySelectorAll('.capnb-test svg .role-title-text')]"
        ".some(t => t.textContent === 'after')",
        timeout=30_000,
    )
    kept = page.evaluate("window.capnbViews['capnb-test-key'].given")
    # only the point layer's new values went to vega: the line's dataset is the same digest
    assert kept == ["capnb-data-1"], kept
    assert page.locator(".capnb-test svg .mark-symbol path").count() == 2
    assert page.seen["errors"] == []


_TABLES = "[...document.querySelectorAll('.capnb-chart ~ script[type=\"application/json\"]')].map(s => s.id)"


def test_new_data_comes_as_a_message_and_the_outputs_follow_at_rest(memory_page):
    """In a live page no output is redrawn on a change; once the controls rest, the outputs are."""
    page = memory_page
    _mark_svgs(page)
    outputs = page.evaluate(_TABLES)
    assert outputs, "the charts' outputs hold their tables"
    bench._act(page, "GPU", "B200")
    page.wait_for_function(f"{_TITLES}.some(t => t.includes('B200'))", timeout=60_000)
    assert page.evaluate(_TABLES) == outputs  # the same outputs: the view took a message
    page.wait_for_function(
        f"JSON.stringify({_TABLES}) !== {json.dumps(json.dumps(outputs))}", timeout=30_000
    )  # at rest: new outputs, drawn by the kept views
    kept = page.evaluate(
        "[...document.querySelectorAll('.capnb-chart svg.marks')]"
        ".filter(s => s.textContent.includes('B200')).map(s => s.capnbOld === 1)"
    )
    assert kept and all(kept)
    assert page.seen["errors"] == []


def _controls_redraw(page) -> int:
    """Every control a chart of the page binds (a vega-lite param: dropdown or slider) redraws it."""
    charts = page.locator(".capnb-chart")
    tried = 0
    for i in range(charts.count()):
        chart = charts.nth(i)
        controls = chart.locator(".vega-bindings select, .vega-bindings input[type=range]")
        for j in range(controls.count()):
            control = controls.nth(j)
            before = chart.locator("svg.marks").inner_html()
            if control.evaluate("e => e.tagName") == "SELECT":
                current = control.input_value()
                options = control.locator("option").evaluate_all("os => os.map(o => o.value)")
                control.select_option(next(o for o in options if o != current))
            else:
                control.evaluate("e => { e.value = e.min; e.dispatchEvent(new Event('input')); }")
            page.wait_for_timeout(300)
            assert chart.locator("svg.marks").inner_html() != before, (
                f"chart {i} control {j} did nothing"
            )
            tried += 1
    return tried


def _console(page):
    """Record the console's warnings and errors (vega logs "WARN ..." there) and page errors."""
    seen = []
    page.on(
        "console",
        lambda message: (
            seen.append(f"{message.type}: {message.text}")
            if message.type in ("warning", "error") or "WARN" in message.text
            else None
        ),
    )
    page.on("pageerror", lambda error: seen.append(f"pageerror: {error}"))
    return seen


def _open_drawn(page, path) -> int:
    page.goto(path.as_uri())
    total = page.locator(".capnb-chart").count()
    page.wait_for_function(
        f"document.querySelectorAll('.capnb-chart svg.marks').length >= {total}", timeout=90_000
    )
    page.wait_for_timeout(300)  # vega logs its warnings as it renders
    return total


_VISIBLE_CODE = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea')]
    .filter(e => e.offsetParent !== null && e.getBoundingClientRect().height > 0).length"""

_TOC_MISSING = """() => [...document.querySelectorAll('nav.capnb-toc a')]
    .map(a => a.getAttribute('href'))
    .filter(h => !h.startsWith('#') || !document.getElementById(h.slice(1)))"""


def test_report_answers_on_its_first_screen_for_readers(browser, full_report):
    """The reader's report, offline: the answer in numbers first, no code, no checks, titled,
    linked, every chart drawn and every control it binds working (one drawing of each page)."""
    combined, *pages = full_report
    context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    for path in [combined, *pages]:
        page = context.new_page()
        console = _console(page)
        seen = _watch(page)  # nothing leaves the machine
        _open_drawn(page, path)
        title = page.title()
        assert title and "Notebook" not in title and "capnb report" in title, (path.name, title)
        assert page.evaluate(_VISIBLE_CODE) == 0, f"{path.name}: code shown by default"
        text = page.locator("body").inner_text()
        assert "checks passed" not in text and "assert " not in text, f"{path.name}: a check cell"
        assert page.evaluate(_TOC_MISSING) == [], f"{path.name}: a contents link goes nowhere"
        assert page.locator("nav.capnb-toc a").count() >= 2, path.name
        assert console == [], f"{path.name}: {console}"  # no vega warning (infinite extents ...)
        if path == combined:
            assert title.startswith("Capacity plan: ")
            # the first screen holds the answer: what to deploy, the fleet and its policy (a drawn
            # chart), the cost with the breach minutes; how it did held out follows
            for term in ("What to deploy", "Fleet", "Monthly cost"):
                box = page.locator("dl.capnb-numbers dt", has_text=term).first.bounding_box()
                assert box is not None and box["y"] + 30 <= 900, term  # its first line shows
            assert page.locator("dl.capnb-numbers dt", has_text="Held out").count() == 1
            assert page.locator("dl.capnb-numbers dd strong").count() >= 8  # numbers set apart
            assert page.locator("#the-plan .capnb-static-chart svg.marks").count() == 1
            assert page.locator("#the-plan table.capnb-steps tr").count() == 4  # one per step
            assert page.locator("#the-plan h2", has_text="The article's checks").count() == 1
            assert "1970" not in page.locator("#the-plan").inner_text()
            # the steps follow, each a titled section
            assert page.locator(".capnb-section").count() == len(pages)
            # offline, every chart drew and every control a chart binds redraws it
            assert page.locator(".capnb-chart").count() >= 15
            assert _controls_redraw(page) >= 3
            assert [line for line in console if line.startswith("pageerror")] == []
        assert seen["errors"] == [] and seen["external"] == [], (path.name, seen)
        page.close()
    context.close()


def test_a_report_with_code_still_leaves_the_checks_out(browser, tmp_path):
    from capnb.report import run_worksheet

    path = run_worksheet("02_memory", tmp_path, show_code=True)
    context = browser.new_context(offline=True)
    page = context.new_page()
    console = _console(page)
    _open_drawn(page, path)
    assert page.evaluate(_VISIBLE_CODE) >= 3  # the code is there when asked for
    text = page.locator("body").inner_text()
    assert "memory_step" in text
    assert "checks passed" not in text and "assert " not in text
    # printed lines (a pre in an output area, as nbconvert writes print()) wrap at spaces, never
    # inside a word: JupyterLab's own rule for them breaks anywhere
    printed = page.evaluate(
        "() => { const area = document.createElement('div');"
        " area.className = 'jp-RenderedText jp-OutputArea-output';"
        " const pre = area.appendChild(document.createElement('pre'));"
        " document.body.appendChild(area); return getComputedStyle(pre).wordBreak; }"
    )
    assert printed == "normal", printed
    assert page.evaluate(_TOC_MISSING) == []
    assert console == []
    context.close()

"""In JupyterLab (chromium, a real kernel): a control's change updates the drawn vega view in place."""

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from benchmarks import browser as bench
from capnb import notebook

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(bench._chromium() is None, reason="needs Debian's chromium"),
]

_TITLES = "[...document.querySelectorAll('svg.marks .role-title-text')].map(t => t.textContent)"


@pytest.fixture(scope="module")
def page():
    playwright = pytest.importorskip("playwright.sync_api")
    root = Path(tempfile.mkdtemp(prefix="capnb-widgets-"))
    bench._copy("02_memory", root)
    lab = bench._Lab(root)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=bench._chromium(), args=bench.ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            bench._run_all(page, f"{lab.url}/lab/workspaces/inplace/tree/02_memory.ipynb?reset")
            page.errors = errors
            yield page
            browser.close()
    finally:
        lab.close()
        shutil.rmtree(root, ignore_errors=True)


def _mark_svgs(page) -> None:
    page.evaluate(
        "document.querySelectorAll('.capnb-chart svg.marks').forEach(s => s.capnbOld = 1)"
    )


def test_new_data_and_title_update_the_same_svg(page):
    _mark_svgs(page)
    assert any("2 x H100-SXM" in t for t in page.evaluate(_TITLES))
    bench._act(page, "GPU", "H200")
    page.wait_for_function(f"{_TITLES}.some(t => t.includes('2 x H200'))", timeout=60_000)
    # the breakdown's svg is the one drawn before: its view took the new data and title
    kept = page.evaluate(
        "[...document.querySelectorAll('.capnb-chart svg.marks')]"
        ".filter(s => s.textContent.includes('2 x H200')).map(s => s.capnbOld === 1)"
    )
    assert kept == [True]
    assert page.errors == []


def test_a_param_value_from_the_kernel_moves_the_kept_view(page):
    _mark_svgs(page)
    heatmap = "document.querySelectorAll('.capnb-chart svg.marks')[1]"
    before = page.evaluate(f"{heatmap}.innerHTML")
    bench._act(page, "tensor parallel (GPUs)", "4")
    page.wait_for_function(f"{heatmap}.innerHTML !== {before!r}", timeout=60_000)
    page.wait_for_timeout(500)
    assert page.evaluate(f"{heatmap}.capnbOld") == 1
    assert page.locator(".capnb-chart").count() == page.locator(".capnb-chart svg.marks").count()
    assert page.errors == []


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


def test_a_dataset_the_view_holds_already_is_not_given_again(page):
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
    assert page.errors == []


_TABLES = "[...document.querySelectorAll('.capnb-chart ~ script[type=\"application/json\"]')].map(s => s.id)"


def test_new_data_comes_as_a_message_and_the_outputs_follow_at_rest(page):
    """In a live page no output is redrawn on a change; once the controls rest, the outputs are."""
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
    assert page.errors == []

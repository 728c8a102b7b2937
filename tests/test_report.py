"""The main job: execute a worksheet, write its HTML atomically, and check it draws offline."""

import functools
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import xarray as xr
from nbclient.exceptions import CellExecutionError

from capnb import report
from capnb.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def memory_report(tmp_path_factory):
    return report.run_worksheet("02_memory", tmp_path_factory.mktemp("reports"))


@pytest.mark.slow
def test_report_is_self_contained(memory_report):
    html = memory_report.read_text()
    assert not re.search(r"<script[^>]+src=", html), "a script would be loaded from elsewhere"
    assert not re.search(r"<link[^>]+href=\"http", html)
    assert html.count("if (!window.vegaEmbed)") == 1  # the vega bundle, inlined exactly once
    assert html.count('class="capnb-chart"') == 2
    assert "Inputs: model = Llama-3.1-70B" in html  # the widget panel, as a record of its values
    assert "application/vnd.jupyter.widget-view+json" not in html
    # for readers: titled, the code and the worksheet's checks left out, the answer set as prose
    assert "<title>Step 2 — Memory" in html
    assert "memory_step" not in html and "checks passed" not in html and "assert " not in html
    assert '<div class="capnb-answer"><p>' in html
    assert len(html) < 5_000_000


@pytest.mark.slow
def test_main_job_writes_one_combined_report_and_one_per_worksheet(full_report):
    combined, *pages = full_report
    assert combined.name == report.REPORT_NAME
    assert [p.stem for p in pages] == list(report.WORKSHEETS)
    charts = 0
    for page in pages:
        html = page.read_text()
        assert html.count("if (!window.vegaEmbed)") == 1, page.name
        assert "Traceback (most recent call last)" not in html, page.name
        assert not re.search(r"<script[^>]+src=", html), page.name
        assert len(html) < 5_000_000, page.name
        charts += html.count('class="capnb-chart"')
    html = combined.read_text()
    assert html.count("if (!window.vegaEmbed)") == 1  # the bundle once for the whole report
    assert html.count('class="capnb-chart"') == charts
    assert "Traceback (most recent call last)" not in html
    assert len(html) < 5_000_000
    # the plan in numbers first, then the contents, then one section per worksheet in order
    order = ['id="the-plan"', 'id="contents"'] + [
        f'id="step-{name.replace("_", "-")}"' for name in report.WORKSHEETS
    ]
    assert [html.index(mark) for mark in order] == sorted(html.index(mark) for mark in order)


def html_unescape(text: str) -> str:
    """A page's text: its tags dropped (the answers set numbers in bold), its entities read."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", text))


@pytest.mark.slow
def test_failed_run_leaves_the_previous_report_intact(memory_report):
    before = memory_report.read_text()
    with pytest.raises(CellExecutionError, match="02_memory.ipynb failed"):
        report.run_worksheet("02_memory", memory_report.parent, parameters={"GPU": "H1000"})
    assert memory_report.read_text() == before
    assert [p.name for p in memory_report.parent.iterdir()] == [memory_report.name]


def test_unknown_worksheet_and_missing_parameters_cell(tmp_path, capsys):
    # an unknown --worksheet printed "capnb report: FileNotFoundError: no worksheet 'bogus'", a
    # builtin exception's name; it is capnb's unknown-name error now, with the closest names
    from capnb.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="unknown worksheet 'nope'.*02_memory"):
        report.worksheet_path("nope")
    capsys.readouterr()
    assert main(["report", "--worksheet", "04_elastcity", "--out", str(tmp_path)]) == 1
    said = capsys.readouterr().err
    assert "unknown worksheet '04_elastcity'; closest: 04_elasticity" in said
    assert "FileNotFoundError" not in said


def test_a_report_worksheet_given_as_a_path_is_refused_before_the_work(tmp_path, monkeypatch):
    # --worksheet ../notebooks/02_memory (or an absolute path) found the bundled notebook, ran
    # it without the plan's parameters, and wrote its page outside --out (out/../notebooks/...)
    def built(*args, **kwargs):
        raise AssertionError("built a plan for a worksheet it could not write")

    monkeypatch.setattr(report, "_parameters", built)
    bundled = str(report.worksheet_path("02_memory").with_suffix(""))
    for name in ("../notebooks/02_memory", bundled):
        with pytest.raises(FileNotFoundError, match=r"a bundled worksheet's name, not a path"):
            report.run_report(None, tmp_path / "out", worksheets=(name,), progress=False)
    assert not (tmp_path / "out").exists()
    assert report.worksheet_path("02_memory.ipynb") == report.worksheet_path("02_memory")


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CAPNB_REQUIRE_BROWSER"),
    reason="needs Debian's chromium (.ci/run installs it and sets CAPNB_REQUIRE_BROWSER)",
)
def test_report_draws_every_chart_with_no_network(memory_report):
    # Every request that is not a file is sent to a dead proxy: if the page needed the network,
    # its charts would not draw.
    assert CHROMIUM, "CAPNB_REQUIRE_BROWSER is set but chromium is not on PATH"
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--proxy-server=127.0.0.1:9",
                "--proxy-bypass-list=<-loopback>",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                memory_report.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    # each chart's div runs from its id to the script that follows it
    charts = [part.split("<script", 1)[0] for part in dom.split('id="capnb-chart-')[1:]]
    assert len(charts) == 2
    assert all('class="marks"' in chart for chart in charts), "a chart drew no SVG"
    assert ">chart failed:" not in dom  # the text a chart shows when vega-embed rejects it


def test_progress_closes_before_anything_else_is_printed(capsys):
    step = report._progress(2, True)  # not a terminal under pytest: one plain line per worksheet
    step("02_memory")
    step("05_plan")
    step(None)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "capnb report: 02_memory done",
        "capnb report: 05_plan done",
    ]
    assert "\r" not in "".join(lines) and "0/2" not in "".join(lines)


def test_readme_links_resolve_inside_the_repository():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.*)$", text, flags=re.M)
    }
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        assert not re.match(r"[a-z]+:", link), f"{link}: a README link leaves the repository"
        path, _, anchor = link.partition("#")
        if path:
            assert (root / path).exists(), f"{link}: no such file in the repository"
        else:
            assert anchor in anchors, f"{link}: no such heading"


@pytest.mark.slow
def test_the_first_page_renders_the_answer_record_and_nothing_else(small_plan):
    """Every figure of the first page comes from the plan's answer: a record changed by hand is
    what the page, describe() and plan.json then show, and the old figures are gone from all."""
    import dataclasses
    import warnings

    from capnb import plan as planning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", planning.PlanWarning)
        built = planning.build(small_plan)
    a = planning.answer(built)
    page = html_unescape(report.summary_html(built))
    assert f"{a.tensor_parallel} x {a.gpu} per instance" in page
    assert page.count(f"{a.monthly_usd:,.0f} USD a month") >= 1
    assert "1970" not in page  # ServeGen has no date: the burst test starts on "day N hh:mm"
    assert re.search(r"from day \d+ \d\d:\d\d ", page)
    said = planning.sections(built)
    assert said["headline"] in page
    # told once: the held-out record is its row of the numbers, not repeated under the headline
    assert page.count(said["held_out"].removeprefix("Held out: ")) == 1
    # the alternatives are named on the first page; their costs are in their own section
    for alt in a.alternatives:
        assert alt.name in page and alt.words not in page
    changed = dataclasses.replace(
        a,
        monthly_usd=123_456.0,
        breach_minutes_per_month=7.0,
        gpu="B200",
        peak_serving_instances=4321,
    )
    built.attrs["answer"] = json.dumps(changed.to_dict())
    page = html_unescape(report.summary_html(built))
    text = planning.describe(built)
    for new in ("123,456 USD a month", "7 minutes a month", "1 x B200", "4,321"):
        assert new in page and new in text, new
    for old in (f"{a.monthly_usd:,.0f} USD", f"x {a.gpu} per"):
        assert old not in page and old not in text, old


@pytest.mark.slow
def test_the_first_pages_elasticity_row_names_the_chosen_policy(small_plan):
    """Found on a plan that chose Kubernetes HPA with a floor of 2 instances: its first page said
    "Kubernetes HPA (target 0.7, ...)" in the numbers and "4. elasticity ... ; fixed plus buffer"
    under what binds, the record's kind code, read as a second, different policy."""
    import dataclasses
    import warnings

    from capnb import plan as planning
    from capnb import words

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", planning.PlanWarning)
        built = planning.build(small_plan)
    a = planning.answer(built)
    hpa = dataclasses.replace(a.policy, name="hpa", min_instances=2, kind="fixed_plus_buffer")
    built.attrs["answer"] = json.dumps(dataclasses.replace(a, policy=hpa).to_dict())
    page = html_unescape(report.summary_html(built))
    assert "fixed plus buffer" not in page
    assert f"; Kubernetes HPA: {words.POLICY_KINDS['fixed_plus_buffer']}" in page
    fixed = dataclasses.replace(a.policy, name="fixed", min_instances=3, kind="fixed")
    built.attrs["answer"] = json.dumps(dataclasses.replace(a, policy=fixed).to_dict())
    page = html_unescape(report.summary_html(built))
    assert "; fixed fleet: run a fixed fleet" in page


def test_the_plan_is_built_before_any_worksheet_kernel_starts(monkeypatch, tmp_path):
    """This process and the worksheets' kernels share numba's on-disk cache, which is not safe
    against processes writing it at once: the plan (which compiles the engine and the autoscaler)
    runs alone first, on the defaults too, and only then do kernels start."""
    import nbformat

    events = []

    def plan_first(config, out_dir, **kwargs):
        events.append("plan")
        raise RuntimeError("stop here")  # what follows is not under test

    def kernel(name, **kwargs):
        events.append(name)
        return nbformat.v4.new_notebook()

    monkeypatch.setattr(report, "_parameters", plan_first)
    monkeypatch.setattr(report, "execute", kernel)
    with pytest.raises(RuntimeError, match="stop here"):
        report.run_report(None, tmp_path, worksheets=("02_memory", "05_plan"), progress=False)
    assert events == ["plan"]  # no kernel started beside the plan


def _parameters_and_plan(config, out_dir):
    """The report's worksheet parameters for a plan config, and the plan they were read from."""
    import warnings

    from capnb import plan as planning

    kept = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", planning.PlanWarning)
        parameters = report._parameters(config, out_dir, keep=kept)
    return parameters, kept[0]


@pytest.mark.slow
def test_the_forecasting_worksheet_plans_the_plans_trace_as_the_plan_does(small_plan, tmp_path):
    """Worksheet 01 on a report's parameters reads the trace as the plan does (its kind and the
    start of its clock) and gives the plan's forecast, slot for slot."""

    import numpy as np

    from capnb import notebook
    from capnb import plan as planning

    config = planning.read_config(small_plan).replace(
        traffic={
            "trace_kind": "rates",
            "start": "2024-05-06 00:00",
            "slots": "hour_of_week",  # needs the weekday
            "demand_scale": 1.5,  # growth: the worksheet scales the trace as the plan does
        },
        gpus=("H200",),  # the forecast is all this test reads: no mixed fleet to search
        # nor the policy's held-out choice, which leaves the plan's forecast as it is (both are
        # fitted on the whole trace: the choice re-fits at its origins only)
        elasticity={"backtest_days": 0},
    )
    parameters, made = _parameters_and_plan(config, tmp_path)
    parameters = parameters["01_forecasting"]
    assert (parameters["TRACE_KIND"], parameters["START"]) == ("rates", "2024-05-06 00:00")
    assert parameters["TRACE_OPTIONS"] == {}  # a bundled trace: the loader needs nothing said
    assert parameters["DEMAND_SCALE"] == 1.5
    sheet = notebook.worksheet("01_forecasting", **parameters)
    assert sheet["slots"] == "hour_of_week" and sheet["notes"] == []
    target = sheet["target"]
    np.testing.assert_array_equal(
        target.target_qps.values, made.forecast_target_qps.transpose(*target.target_qps.dims)
    )
    assert float(target.buffer_qps) == float(made.forecast_buffer_qps)


def test_the_trace_worksheets_take_the_loaders_options(tmp_path):
    """A file whose times need saying (epoch seconds as numbers) runs in worksheet 01 with the
    options the plan config gives (``TRACE_OPTIONS``, as the report passes them to 01 and 04)."""
    import numpy as np

    from capnb import data, notebook

    series = data.load_rate_series("servegen-m-small")
    seconds = series.time.values.astype("datetime64[s]").astype(np.int64) + 1_700_000_000
    path = tmp_path / "epoch.csv"
    path.write_text("timestamp,qps\n" + "".join(
        f"{t},{q}\n" for t, q in zip(seconds, series.qps.values, strict=True) if q == q))  # fmt: skip
    options = {"TRACE": str(path), "TRACE_KIND": "rates", "TRACE_OPTIONS": {"time_unit": "s"}}
    sheet = notebook.worksheet("01_forecasting", **options)
    assert float(sheet["target"].target_qps.max()) > 0
    with pytest.raises(Exception, match="time_unit"):
        notebook.worksheet("01_forecasting", TRACE=str(path), TRACE_KIND="rates")


def test_a_headless_run_of_a_worksheet_without_controls_says_how_to_run_it(capsys):
    """Found running worksheet 05 headless as worksheets.md says (capnb.notebook.worksheet with
    CONFIG = a plan.toml): it built the plan, printed every answer, then failed in its held-out
    table's cell with "NameError: name 'display' is not defined"; worksheet 00 ran whole and
    then said 'no cell assigns the worksheet `ws`'. Neither has controls: it says so before
    running anything, and names the calls that run it whole."""
    from capnb import notebook

    for name in ("05_plan", "00_start_here"):
        with pytest.raises(ValueError) as raised:
            notebook.worksheet(name, CONFIG="plan.toml")
        said = str(raised.value)
        assert f"{name}.ipynb: no cell assigns a worksheet `ws`" in said, said
        assert f"capnb.report.execute('{name}'" in said and "run_worksheet" in said
    assert capsys.readouterr().out == ""  # nothing ran


def test_a_headless_worksheets_traceback_shows_its_cells_code(tmp_path):
    """A cell failing under notebook.worksheet was reported at "01_forecasting.ipynb, line 45"
    with line 45 of the notebook's JSON (a markdown cell's prose) under it; the frame now names
    the code cell and shows the line of its code that raised."""
    import traceback

    from capnb import notebook

    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# a worksheet\n", "prose\n"]},
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["TRACE = 'x'\n"]},
        {
            "cell_type": "code",
            "metadata": {},
            "source": ["a = 1\n", "b = a / 0  # the failing line\n"],
        },
        {"cell_type": "code", "metadata": {}, "source": ["ws = None\n"]},  # its worksheet
    ]
    path = tmp_path / "mine.ipynb"
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    with pytest.raises(ZeroDivisionError) as raised:
        notebook.worksheet(str(path))
    frame = traceback.extract_tb(raised.tb)[-1]
    assert frame.filename == f"{path}, code cell 2" and frame.lineno == 2
    assert frame.line == "b = a / 0  # the failing line"


def test_a_failed_check_is_reported_as_a_defect_not_as_inputs_it_cannot_apply_to():
    from nbclient.exceptions import CellExecutionError

    failed = CellExecutionError(
        "\x1b[0;32m----> 3\x1b[0m assert fit_stop == score_start\n", "AssertionError", ""
    )
    why = report._why(failed)
    assert why == f"{report.FAILED_CHECK}: assert fit_stop == score_start"
    # IPython's arrow is one dash shorter at line 10 and after ("---> 18"): the report then said
    # "failed a closing check" without the check (worksheet 01 on servegen-m-small)
    failed = CellExecutionError(
        "\x1b[0;32m---> 18\x1b[0m assert (np.diff(carried) >= 0).all()\n", "AssertionError", ""
    )
    assert report._why(failed) == f"{report.FAILED_CHECK}: assert (np.diff(carried) >= 0).all()"
    moot = report._why(CellExecutionError("", "InputError", "slots [0] have no data"))
    assert moot == "InputError: slots [0] have no data"
    page = report._skipped_html({"05_plan": why, "01_forecasting": moot})
    cannot, defect = page.split('<p class="capnb-failed">')
    assert "01_forecasting" in cannot and "05_plan" not in cannot
    assert "05_plan" in defect and "defect" in defect


def test_an_error_of_any_kind_in_a_closing_check_is_a_defect(tmp_path):
    # worksheet 03's checks read result.overstatement, which a user's curve from concurrency 32
    # lacks: the AttributeError was reported as an input the worksheet "cannot apply to"
    import nbformat
    from nbclient.exceptions import CellExecutionError

    sheet = nbformat.v4.new_notebook()
    sheet.cells = [nbformat.v4.new_code_cell("result = {'safe': 3}"),
                   nbformat.v4.new_code_cell("assert result.overstatement >= 1",
                                             metadata={"tags": ["checks"]})]  # fmt: skip
    path = tmp_path / "mine.ipynb"
    nbformat.write(sheet, path)
    with pytest.raises(CellExecutionError) as caught:
        report.execute(str(path))
    why = report._why(caught.value)
    assert why.startswith(f"{report.FAILED_CHECK}: assert result.overstatement >= 1")
    assert why.endswith("(AttributeError: 'dict' object has no attribute 'overstatement')")
    # outside the checks, the same error is one the inputs may cause: said as it is
    sheet.cells[1].metadata = {}
    nbformat.write(sheet, path)
    with pytest.raises(CellExecutionError) as caught:
        report.execute(str(path))
    assert report._why(caught.value).startswith("AttributeError: 'dict' object")


def test_an_error_while_showing_a_cells_result_is_named(tmp_path):
    # a cell whose last value fails to render (a chart's or table's repr raising) is an error
    # ipykernel replies without its exception: the report said "cannot apply to these inputs:
    # NoneType: None"; it names the error the traceback shows
    import nbformat
    from nbclient.exceptions import CellExecutionError

    shown = "class Shown:\n    def _repr_html_(self):\n        raise ValueError('no rows: p99')\n"
    sheet = nbformat.v4.new_notebook()
    sheet.cells = [nbformat.v4.new_code_cell(shown + "Shown()")]
    path = tmp_path / "mine.ipynb"
    nbformat.write(sheet, path)
    with pytest.raises(CellExecutionError) as caught:
        report.execute(str(path))
    assert (caught.value.ename, caught.value.evalue) == ("ValueError", "no rows: p99")
    assert report._why(caught.value) == "ValueError: no rows: p99"


def test_a_report_that_runs_no_worksheet_leaves_no_plan_files(tmp_path, monkeypatch):
    from nbclient.exceptions import CellExecutionError

    def parameters(config, out_dir, *, keep=None, written=None, force=False, stage=None):
        for name in ("plan.nc", "plan.json", "plan.toml"):  # staged: written with the pages
            (stage / name).write_text("x")
            written.append(stage / name)
        return {}

    def fails(name, parameters=None, timeout=None, kernel=None):
        raise CellExecutionError("", "InputError", f"{name} cannot apply")

    monkeypatch.setattr(report, "_parameters", parameters)
    monkeypatch.setattr(report, "execute", fails)
    with pytest.raises(CellExecutionError, match="no worksheet could run"):
        report.run_report({"model": "x"}, tmp_path, worksheets=("02_memory",), progress=False)
    assert list(tmp_path.iterdir()) == []


def test_the_serving_worksheet_replays_the_log_the_plans_prefix_cache_was_priced_on():
    # a plan of a rate series with workload = a Mooncake-style log and prefix_cache_share = 0.2
    # priced a hit rate of 83.6% replayed on that log; worksheet 06 in its report replayed
    # mooncake-synthetic instead (9.5% at a 30% share), saying the plan's trace had no block
    # hashes to replay: the report's prefix cache was another log's
    from capnb import plan as planning

    made = xr.Dataset(attrs={"workload_trace": "/logs/rag.jsonl"})
    cfg = planning.read_config({"prefix_cache_share": 0.2, "latency": "engine"})
    assert report._prefix_parameters(cfg, made) == {"TRACE": "/logs/rag.jsonl"}
    # without a prefix cache the plan replayed nothing: the worksheet chooses its log as before
    assert report._prefix_parameters(cfg.replace(prefix_cache_share=0.0), made) == {}


def test_the_capacity_worksheet_prices_what_the_plan_priced(small_plan, tmp_path):
    """Worksheet 03 in a report: the plan's curve parameters and representative requests, so its
    safe concurrency and throughput are the plan's (it sampled 256 requests against the plan's
    512, and disagreed with the plan's first page)."""
    from capnb import notebook, plan

    parameters, made = _parameters_and_plan(small_plan, tmp_path)
    a = plan.answer(made)
    # worksheet 06 splits the KV budget of the plan's instance: its degree too (a 70B plan at TP 4
    # had 06 price the prefix cache on one GPU, where the weights leave no KV cache at all)
    assert (parameters["06_serving"]["GPU"], parameters["06_serving"]["TENSOR_PARALLEL"]) == (
        a.gpu, a.tensor_parallel)  # fmt: skip
    # and worksheet 00 starts the plan's instance: its cold start on the plan's degree
    assert (parameters["00_start_here"]["SHOW_GPU"],
            parameters["00_start_here"]["SHOW_TENSOR_PARALLEL"]) == (a.gpu, a.tensor_parallel)  # fmt: skip
    # its cold start estimated, as the plan's (cold_start_s = "estimate")
    assert parameters["00_start_here"]["SHOW_COLD_START_S"] is None
    assert parameters["00_start_here"]["SHOW_STEP_S"] == 1.0  # the plan's simulation step
    # and its traffic at the plan's scale
    assert (
        parameters["00_start_here"]["SHOW_DEMAND_SCALE"]
        == plan.read_config(json.loads(made.attrs["config"])).traffic.demand_scale
    )
    parameters = parameters["03_capacity"]
    assert parameters["WORKLOAD_SAMPLES"] == int(made.attrs["workload_samples"]) == 512
    sheet = notebook.worksheet("03_capacity", **parameters)
    result = sheet["result"].squeeze(drop=True)
    mine = {"gpu": a.gpu, "tensor_parallel": a.tensor_parallel}
    planned = made.capacity_safe_concurrency.sel(mine)
    assert int(result.safe_concurrency.max()) == int(planned.max())
    # within 0.5 %: the worksheet's curve has its own concurrency grid to interpolate on (256
    # against 512 requests had put it 5 % off: 9.20 against 8.80 requests/s)
    qps = float(result.per_instance_qps.max())
    assert qps == pytest.approx(a.per_instance_qps, rel=0.005)


@pytest.mark.slow
def test_the_elasticity_worksheet_prints_the_plans_exported_objects(small_plan, tmp_path):
    """Worksheet 04 in a report printed its own HPA beside the one capnb export writes: a TGI plan
    of Mistral-Nemo on 1 x L40S showed maxReplicas 3 (its replay's peak) in step 4 and 7 (the
    busiest slot's 2 and the burst buffer's 5) in the appendix, without the pods' flags."""
    import nbformat
    from nbclient import NotebookClient

    from capnb import plan
    from capnb.report import _inject_parameters, worksheet_path

    parameters, made = _parameters_and_plan(small_plan, tmp_path)
    nb = nbformat.read(worksheet_path("04_elasticity"), as_version=4)
    _inject_parameters(nb, parameters["04_elasticity"])
    nb.cells.append(nbformat.v4.new_code_cell("print(exported.yaml('hpa'), end='')"))
    NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    exported = plan.manifests(plan.policy_choice(made))
    assert nb.cells[-1].outputs[0]["text"] == exported.yaml("hpa")


@pytest.mark.slow
def test_the_memory_worksheet_counts_the_kv_cache_the_plan_sized(small_plan, tmp_path):
    """Worksheet 02 in a report profiled vLLM at 1,024 sequences and 8,192 tokens where the plan
    profiles as vllm serve runs on the GPU (256 and 2,048 on an L40S): a TGI plan of Mistral-Nemo
    on 1 x L40S said 'memory holds 67' of 1,518 tokens on its first page, and step 2 said 51."""
    from capnb import notebook
    from capnb import plan as planning

    config = planning.read_config(small_plan).replace(
        serving={"gpus": ("L40S",), "latency": "engine"},
        elasticity={"backtest_days": 0},
    )
    parameters, made = _parameters_and_plan(config, tmp_path)
    a = planning.answer(made)
    assert parameters["02_memory"]["VLLM_PROFILE"]["max_num_batched_tokens"] == 2048
    sheet = notebook.worksheet("02_memory", **parameters["02_memory"])
    assert int(sheet["result"].max_concurrency.max()) == a.memory_concurrency


def test_worksheets_print_capnbs_warnings_as_one_line_without_paths():
    import warnings

    from capnb import notebook
    from capnb.data import TraceWarning

    before = warnings.formatwarning
    try:
        notebook.setup()
        text = warnings.formatwarning("3 rows merged", TraceWarning, "/work/x/_traffic.py", 193)
        assert text == "TraceWarning: 3 rows merged\n"
        other = warnings.formatwarning("x", UserWarning, "/work/x/y.py", 1)
        assert "/work/x/y.py:1" in other  # not capnb's: Python's own format
    finally:
        warnings.formatwarning = before


def test_numbers_are_set_apart_but_not_inside_dates_or_words():
    bold = report._bold_numbers
    assert bold("on 2025-03-12 at 18:00") == "on 2025-03-12 at <strong>18:00</strong>"
    assert bold("36-58 requests, 13% and 4x") == (
        "<strong>36-58</strong> requests, <strong>13%</strong> and <strong>4x</strong>"
    )
    assert bold("a 5-minute gap") == "a 5-minute gap"
    # a range of percentages is one figure (the second was set apart as a negative number)
    assert bold("(goal 97%-99.5%)") == "(goal <strong>97%-99.5%</strong>)"
    # a time zone's offset is part of the time, not a number of its own
    assert bold("(02:00-03:00 UTC-04:00)") == "(<strong>02:00-03:00</strong> UTC-04:00)"
    # a comma after a number ends the number: thousands are groups of three digits
    assert bold("in 6 of 7, 1,414 and 12,5") == (
        "in <strong>6</strong> of <strong>7</strong>, <strong>1,414</strong> and 12,5"
    )
    assert bold("a 314,080-token budget") == "a 314,080-token budget"


def test_an_answers_benchmark_commands_are_a_block_to_paste_not_prose(tmp_path):
    import shutil

    from capnb.data import dataset_path, load_model
    from capnb.plan._closecall import benchmark_commands

    # a model read from a folder of the user's, named as its folder is (the command reads its
    # context, as a plan names the model it loaded)
    folder = tmp_path / "<my> model"
    folder.mkdir()
    shutil.copy(dataset_path("models", "Llama-3.1-8B.json"), folder / "config.json")
    assert load_model(folder).name == "<my> model"
    options = xr.Dataset({"safe_concurrency": (("gpu", "tensor_parallel"), [[75]])},
                         coords={"gpu": ["H100-SXM"], "tensor_parallel": [1]})  # fmt: skip
    commands = benchmark_commands(options, "H100-SXM", 1, "<my> model", 1214, 211)
    text = f"Serve 1 x H100-SXM.\nTo settle the latency, benchmark:\n{commands}\n- then 2 more"
    page = report._prose(text)
    block = page.split('<pre class="capnb-commands">', 1)[1].split("</pre>", 1)[0]
    assert html.unescape(block) == commands  # every line, as generated, none bold
    assert page.endswith("<ul><li>then <strong>2</strong> more</li></ul>")
    assert page.startswith("<p>Serve <strong>1</strong> x H100-SXM.</p><p>To settle")


def test_only_the_inputs_heading_is_left_out_with_the_code():
    # a cell tagged about-code leaves the report with the code: a section heading there took its
    # section out of the contents (worksheet 06 lost five of its seven sections)
    import nbformat

    for path in sorted(Path(report.worksheet_path("00_start_here")).parent.glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        hidden = [report._heading(c) for c in notebook.cells if "about-code" in report._tags(c)]
        assert [h for h in hidden if h and h[1] != "Inputs"] == [], path.name


def test_the_plan_worksheet_gives_the_held_out_window_its_configured_length():
    # a report of a plan with backtest_days = 1 said each held-out window was "a week, cut at the
    # trace's end" two lines above its own table of one-day windows
    import nbformat

    sheet = nbformat.read(report.worksheet_path("05_plan"), as_version=4)
    prose = "".join(c.source for c in sheet.cells if c.cell_type == "markdown")
    held = prose[prose.index("## Held out") :]
    held = held[: held.index("\n## ")] if "\n## " in held else held
    assert "(a week, cut at" not in held and "`backtest_days` long" in held, held


def test_the_plan_worksheet_names_the_mean_its_traffic_chart_draws():
    # a report of a 12-day request log growing 3 % a day: the prose over worksheet 05's traffic
    # chart called its grey line 'a plan on the historical mean' (the log's mean: 0.300
    # requests/s), where the line is the plan's mean plan, the mean of the demand carried forward
    # (0.374 requests/s, as the chart's label and the plan's Traffic line say)
    import nbformat

    sheet = nbformat.read(report.worksheet_path("05_plan"), as_version=4)
    prose = "\n".join(c.source for c in sheet.cells if c.cell_type == "markdown")
    traffic = prose[prose.index("## Why: the traffic") :]
    traffic = traffic[: traffic.index("\n## ")]
    assert "historical mean" not in traffic and "carried forward" in traffic, traffic


def test_the_plan_worksheet_says_what_its_option_costs_are_not():
    # a report of Qwen3-14B on a 12-day request log: worksheet 05's option chart drew the chosen
    # 1 x A100-80GB at 2,613 USD a month (its slots' fixed instances plus the burst buffer held
    # all month, the basis options are ranked on) under prose calling it 'every feasible option's
    # monthly cost for the same plan', two sections below the recommendation's 1,307 USD a month
    # (its policy replayed: one reserved instance, the autoscaler adding none)
    import nbformat

    sheet = nbformat.read(report.worksheet_path("05_plan"), as_version=4)
    prose = "\n".join(c.source for c in sheet.cells if c.cell_type == "markdown")
    options = prose[prose.index("## Why: the GPU") :]
    options = " ".join(options[: options.index("\n## ")].split())
    assert "monthly cost for the same plan" not in options
    assert "burst buffer" in options and "not the recommendation's cost" in options, options


def test_the_serving_worksheet_gives_the_kv_budget_to_the_instance_not_one_gpu():
    # a plan of Llama-3.1-70B on 4 x H200 read "a prefix cache of 30 % of H200's 1,163,072-token
    # KV budget": the budget of one instance, four GPUs (one H200 holds no such budget)
    import nbformat

    sheet = nbformat.read(report.worksheet_path("06_serving"), as_version=4)
    code = "".join(c.source for c in sheet.cells if c.cell_type == "code")
    assert "{GPU}'s {kv_tokens:,}-token KV budget" not in code
    assert "of one {TENSOR_PARALLEL} x {GPU} instance's {kv_tokens:,}-token KV budget" in code


def test_the_first_pages_capacity_row_words_a_curves_end_for_readers():
    # a plan on a measured curve that ends before any bound binds showed "3. capacity |
    # measured_range: 127 requests in flight", the record's code, beside the answer's words
    from types import SimpleNamespace

    from capnb.report import _capacity_row

    def answer(binding, metric=""):
        return SimpleNamespace(binding=binding, binding_metric=metric, safe_concurrency=127)

    row = _capacity_row(answer("measured_range"), "P99 TTFT &le; 2 s")
    assert "measured_range" not in row and row.startswith("<strong>end of the curve</strong>: ")
    assert _capacity_row(answer("memory"), "P99 TTFT &le; 2 s") == (
        "<strong>memory</strong>: <strong>127</strong> requests in flight"
    )
    assert _capacity_row(answer("latency", "ttft"), "P99 TTFT &le; 2 s").startswith(
        "<strong>latency</strong> (TTFT bound of P99 TTFT &le; 2 s): "
    )


def test_the_lede_says_on_demand_instances_only_where_the_replay_added_some():
    from types import SimpleNamespace

    from capnb.report import _lede, _rate

    def answer(policy, reserved, peak):
        return SimpleNamespace(model="m", tensor_parallel=1, gpu="H100-SXM",
                               policy=SimpleNamespace(name=policy, cold_start_vetoes=False),
                               reserved_instances=reserved,
                               peak_serving_instances=peak)  # fmt: skip

    assert "add on-demand ones as traffic needs (up to 7 serving at once)" in _lede(
        answer("hpa", 4, 7)
    )
    # reserving 4 and "adding on-demand ones up to 4" added none: a plan of a small service
    said = _lede(answer("article", 4, 4))
    assert "up to" not in said and "ready to add on-demand ones (the replay needed none)" in said
    assert "run them all month" in _lede(answer("fixed", 4, 4))
    # a small service's busiest slot keeps its digits on the first page (it read "1 requests/s")
    assert _rate(1.1612) == "<strong>1.16</strong>" and _rate(257.3) == "<strong>257</strong>"


def test_the_lede_does_not_promise_scale_ups_the_cold_start_vetoes():
    from types import SimpleNamespace

    from capnb.report import _lede

    # Mistral-Small-24B on one H200, a 188 s cold start against a 60 s budget: the article's
    # rule adds no instance; the replay's second one was the pool it started with, yet the
    # lede read "let article thresholds add on-demand ones as traffic needs (up to 2 ...)"
    # while the Fleet row below it said "adds none"
    policy = SimpleNamespace(name="article", cold_start_vetoes=True, cold_start_s=188.0)
    said = _lede(SimpleNamespace(model="m", tensor_parallel=1, gpu="H200", policy=policy,
                                 reserved_instances=1, peak_serving_instances=2))  # fmt: skip
    assert "as traffic needs" not in said and "up to 2" not in said
    assert "adds none: the 188 s cold start vetoes its scale-ups" in said


def test_a_warning_is_shown_once_among_the_notes_not_as_a_box_in_each_section():
    import nbformat

    def worksheet(name):
        nb = nbformat.v4.new_notebook(metadata={"capnb_worksheet": name})
        cell = nbformat.v4.new_code_cell("x")
        cell.outputs = [
            nbformat.v4.new_output(
                "stream",
                name="stderr",
                text="TraceWarning: t.jsonl: 11 requests share a time\nother\n",
            )
        ]
        nb.cells = [nbformat.v4.new_markdown_cell(f"# {name}"), cell]
        return nb

    combined = report.combine([worksheet("01_a"), worksheet("02_b")])
    page = report.export_html(combined, prepared=True)
    assert page.count("11 requests share a time") == 1 and "Notes on reading the inputs" in page
    assert "11 requests share a time (read in: 01a; 02b)" in page  # the sections that read it
    assert page.count("other") >= 2  # what is not a warning stays where it was printed


def test_the_start_and_serving_worksheets_read_the_trace_as_the_plan_does(tmp_path):
    """Found running capnb report on a 15-minute rate series in Berlin time (offsets change on
    the night clocks go back): worksheet 00 cut it at a fixed 10 minutes and 06 read it without
    the config's timezone, so both were skipped as 'cannot apply to these inputs'."""
    import pandas as pd

    times = pd.date_range("2024-10-26 00:00", periods=4 * 24 * 3, freq="15min", tz="Europe/Berlin")
    path = tmp_path / "berlin.csv"
    pd.DataFrame({"time": times.strftime("%Y-%m-%dT%H:%M:%S%z"), "qps": 5.0}).to_csv(
        path, index=False
    )
    config = tmp_path / "plan.toml"
    config.write_text(
        f'[traffic]\ntrace = "{path}"\ntimezone = "Europe/Berlin"\ninterval = "15min"\n'
        '[serving]\nmodel = "Llama-3.1-8B"\ngpus = ["L40S"]\ntensor_parallel = [1]\n'
        "[sla]\nttft_s = 2.0\n"
    )
    start = report.execute("00_start_here", parameters={
        "SHOW_TRACE": str(path), "SHOW_TRACE_OPTIONS": {"timezone": "Europe/Berlin"},
        "SHOW_INTERVAL": "15min"})  # fmt: skip
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert "of 15min intervals under-provisioned" in said
    # it ran; and with a GPU its provider does not price (hyperstack lists no L40S), it says so
    # where the fleet would be and runs the parts that need no price (it was skipped whole)
    serving = report.execute("06_serving", parameters={"CONFIG": str(config)})
    said = "".join(o.get("text", "") for c in serving.cells for o in c.get("outputs", []))
    assert said.count("No fleet is priced: not priced: no pool has a price") == 2  # both answers
    assert "P:D per hour" in said and "Mélange's example" in said


@pytest.mark.slow
def test_the_forecasting_checks_hold_on_a_history_just_over_a_week(tmp_path):
    """Found on a user's 10-day series: worksheet 01's check of the out-of-sample record took an
    origin with 7 days before it, where ``select`` alone picks hourly origins (under 8 days) and
    so another calibration; the report then skipped 01 as 'cannot apply to these inputs'."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(7)
    times = pd.date_range("2026-09-07", periods=10 * 24 * 12, freq="5min", tz="Asia/Tokyo")
    hours = (times.hour + times.minute / 60).to_numpy()
    qps = 30 + 25 * np.exp(-(((hours - 13) / 3) ** 2)) + rng.gamma(2, 1.5, times.size)
    qps[rng.integers(0, times.size, 5)] *= 3  # five spikes
    path = tmp_path / "tokyo.csv"
    pd.DataFrame({"ts": times.strftime("%Y-%m-%d %H:%M:%S%z"), "rps": qps}).to_csv(
        path, index=False
    )
    ran = report.execute("01_forecasting", parameters={
        "TRACE": str(path), "TRACE_OPTIONS": {"time_column": "ts"}, "GROWTH_MODEL": "auto"})  # fmt: skip
    said = "".join(o.get("text", "") for c in ran.cells for o in c.get("outputs", []))
    assert "checks passed" in said and "one every day" in said


def _notebook(path: Path, *cells: str) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)
    return path


def _printed(notebook) -> list[str]:
    """Each code cell's printed text and plain results (stream outputs joined: how a kernel
    splits one cell's prints into messages depends on its timing)."""
    texts = [
        "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in c.outputs)
        for c in notebook.cells
        if c.cell_type == "code"
    ]
    # what differs between any two kernels: objects' addresses, the kernel's own process id
    return [re.sub(r" at 0x[0-9a-f]+|ipykernel_\d+", "", text) for text in texts]


def test_a_kept_kernel_gives_each_worksheet_a_fresh_kernels_state(tmp_path):
    """run_report's kernels run worksheet after worksheet: nothing one leaves reaches the next."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    leaves = _notebook(
        first / "leaves.ipynb",
        "import os, sys, warnings\nLEFT = 1\nos.environ['CAPNB_LEFT'] = '1'\n"
        "sys.path.insert(0, '/nowhere')\nos.chdir('/')\nwarnings.simplefilter('ignore')",
        "import capnb.notebook\nprint(capnb.notebook.chart_html({'mark': 'point'})[:40])",
    )
    finds = _notebook(
        second / "finds.ipynb",
        "import os, sys, warnings\nprint('LEFT' in globals(), os.environ.get('CAPNB_LEFT'),"
        " '/nowhere' in sys.path, os.getcwd())",
        "warnings.warn('shown in every worksheet', UserWarning)",
        "import capnb.notebook\nprint(capnb.notebook.chart_html({'mark': 'point'})[:40])",
    )
    with report._Kernel() as kernel:
        report.execute(leaves, kernel=kernel)
        kept = report.execute(finds, kernel=kernel)
        before = kernel._manager.provisioner.process.pid
        with pytest.raises(CellExecutionError, match="ZeroDivisionError"):
            report.execute(_notebook(first / "fails.ipynb", "1 / 0"), kernel=kernel)
        fresh = report.execute(finds, kernel=kernel)  # a new kernel: a failure ends the old one
        assert kernel._manager.provisioner.process.pid != before
    assert _printed(fresh)[0] == f"False None False {second}\n"
    assert "shown in every worksheet" in str(fresh.cells[1].outputs)
    assert _printed(kept) == _printed(fresh)  # the warning shown again, the chart counted from 0


@pytest.mark.slow
def test_a_report_in_kept_kernels_says_what_fresh_kernels_say(tmp_path):
    """A worksheet run in a kept kernel after another prints and displays what it prints in a
    kernel of its own (the first in a kept kernel runs on a fresh one by construction)."""
    import warnings

    from capnb import plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)
        parameters = report._parameters(None, tmp_path)
    with report._Kernel() as kernel:
        report.execute("02_memory", parameters=parameters.get("02_memory"), kernel=kernel)
        kept = report.execute("05_plan", parameters=parameters.get("05_plan"), kernel=kernel)
    fresh = report.execute("05_plan", parameters=parameters.get("05_plan"))
    assert _printed(kept) == _printed(fresh)

    def ids(notebook):  # a chart's id and a kept view's count (its key holds an address)
        return [re.findall(r"capnb-chart-\w+|-\d+\b(?=\\?[\"'])", str(c.get("outputs", [])))
                for c in notebook.cells]  # fmt: skip

    assert any(ids(kept)) and ids(kept) == ids(fresh)


@pytest.mark.slow
def test_the_capacity_worksheet_reads_the_plans_own_log_as_the_plan_does(tmp_path):
    """A request log whose columns need naming ([traffic] time_column, prompt_column, ...) is the
    plan's workload; worksheet 03 read it with load_trace(WORKLOAD) alone and the report dropped
    it as "cannot apply to these inputs" (no time column among ...)."""
    import numpy as np
    import pandas as pd

    from capnb import notebook
    from capnb import plan as planning

    rng = np.random.default_rng(3)
    seconds = np.sort(rng.uniform(0, 2 * 86400, 20_000))
    times = pd.Timestamp("2026-03-02") + pd.to_timedelta(seconds, unit="s")
    pd.DataFrame({
        "Req Time": times.strftime("%Y-%m-%d %H:%M:%S.%f"),
        "in_toks": rng.integers(50, 3000, seconds.size),
        "out_toks": rng.integers(5, 500, seconds.size),
    }).to_csv(tmp_path / "log.csv", index=False)  # fmt: skip
    config = planning.PlanConfig().replace(
        traffic={"trace": str(tmp_path / "log.csv"), "time_column": "Req Time",
                 "prompt_column": "in_toks", "output_column": "out_toks", "timezone": "UTC",
                 "trials": 100},
        serving={"gpus": ("H100-SXM",), "tensor_parallel": (1,), "disaggregation": "none"},
        elasticity={"policies": ("fixed",), "backtest_days": 0},
        fleet={"provider": "none"},
    )  # fmt: skip
    parameters, made = _parameters_and_plan(config, tmp_path / "out")
    parameters = parameters["03_capacity"]
    assert parameters["WORKLOAD"] == str(tmp_path / "log.csv")
    assert parameters["WORKLOAD_OPTIONS"] == {
        "time_column": "Req Time", "prompt_column": "in_toks", "output_column": "out_toks",
        "timezone": "UTC"}  # fmt: skip
    sheet = notebook.worksheet("03_capacity", **parameters)
    result = sheet["result"].squeeze(drop=True)
    planned = made.capacity_safe_concurrency.sel(gpu="H100-SXM", tensor_parallel=1)
    assert int(result.safe_concurrency.max()) == int(planned.max())
    # the capacity step's fleet is the plan's busiest slot's: the burst buffer is held elastically
    # (step 4), so worksheet 03 does not add it as fixed instances (it said 22 instances where the
    # plan held at most 7 at once and reserved 2)
    answer = planning.answer(made)
    assert parameters["BUFFER"] == 0
    assert int(result.instances) == max(answer.fixed_instances)


@pytest.mark.slow
def test_the_capacity_worksheet_prices_the_requests_within_the_models_context(tmp_path):
    """The plan prices the requests within the model's context (vLLM rejects the longer ones) and
    worksheet 03 priced every request of the log: a log of Llama-2-7B (4,096 tokens) with a fifth
    of its requests at 5,000-token prompts had the plan at 68 in flight and 8.02 requests/s an
    instance on 1 x H100-SXM, the report's worksheet 03 at 40 and 4.78."""
    import warnings

    import numpy as np
    import pandas as pd

    from capnb import notebook
    from capnb import plan as planning
    from capnb.data import TraceWarning

    rng = np.random.default_rng(5)
    seconds = np.sort(rng.uniform(0, 2 * 86400, 20_000))
    prompt = rng.integers(50, 3000, seconds.size)
    prompt[::5] = 5000  # over the 4,096-token context: rejected, not priced
    pd.DataFrame({
        "timestamp": (pd.Timestamp("2026-03-02") + pd.to_timedelta(seconds, unit="s")).strftime(
            "%Y-%m-%d %H:%M:%S.%f"),
        "prompt_tokens": prompt,
        "output_tokens": rng.integers(5, 500, seconds.size),
    }).to_csv(tmp_path / "log.csv", index=False)  # fmt: skip
    config = planning.PlanConfig().replace(
        traffic={"trace": str(tmp_path / "log.csv"), "trials": 100},
        serving={"model": "Llama-2-7B", "gpus": ("H100-SXM",), "tensor_parallel": (1,),
                 "disaggregation": "none"},
        elasticity={"policies": ("fixed",), "backtest_days": 0},
        fleet={"provider": "none"},
    )  # fmt: skip
    parameters, made = _parameters_and_plan(config, tmp_path / "out")
    sheet = notebook.worksheet("03_capacity", **parameters["03_capacity"])
    result = sheet["result"].squeeze(drop=True)
    answer = planning.answer(made)
    assert int(result.safe_concurrency.max()) == answer.safe_concurrency
    assert float(result.per_instance_qps.max()) == pytest.approx(answer.per_instance_qps, rel=0.005)
    # worksheet 06's fleet prices the same requests (its workload read the whole log: 5,000-token
    # prompts on a 4,096-token model)
    cells = {c.get("id"): "".join(c["source"]) for c in json.loads(
        report.worksheet_path("06_serving").read_text(encoding="utf-8"))["cells"]}  # fmt: skip
    namespace = {}
    exec(compile(cells["1dac0153"], "parameters", "exec"), namespace)
    namespace.update(parameters["06_serving"])
    exec(compile(cells["9ba0a21b"], "imports", "exec"), namespace)
    with warnings.catch_warnings():  # the fleet's cell, as the worksheet runs it
        warnings.simplefilter("ignore", TraceWarning)
        fleet = cells["72024f8e"]  # up to the lengths it prices
        exec(compile(fleet[: fleet.index("plan_seq_len =")], "fleet", "exec"), namespace)
    lengths = namespace["workload"].prompt_tokens + namespace["workload"].output_tokens
    assert 0 < int(lengths.max()) <= 4096


def test_the_serving_worksheet_says_which_log_its_prefix_cache_is_replayed_on(tmp_path, capsys):
    # worksheet 06 replayed the prefix cache on the bundled mooncake-synthetic whatever the plan's
    # trace, and only its routing sentence named it; its fleet section spoke of "the plan's default
    # trace" on a user's own plan
    import warnings

    import capnb
    from capnb import notebook

    rates = tmp_path / "rates.csv"
    rates.write_text(
        "time,qps\n" + "".join(f"2024-05-13 {h:02d}:00,{5 + h % 7}\n" for h in range(24))
    )
    config = tmp_path / "plan.toml"
    config.write_text(f'[traffic]\ntrace = "{rates}"\ninterval = "1h"\n')
    cells = json.loads(report.worksheet_path("06_serving").read_text(encoding="utf-8"))["cells"]
    source = {c.get("id"): "".join(c["source"]) for c in cells}
    assert "default trace" not in "".join(source.values())

    def replay(
        **parameters,
    ):  # the cell that reads the prefix cache's log, as the worksheet runs it
        namespace = {"capnb": capnb, "TRACE": None, "CONFIG": str(config), "MODEL": "Llama-3.1-8B",
                     "GPU": "H100-SXM", "TENSOR_PARALLEL": 1, "CACHE_SHARE": None,
                     "SEQ_LEN": None, **parameters}  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(source["caba1ded"], "caba1ded", "exec"), namespace)
        return namespace["prefix_trace"], capsys.readouterr().out

    used, said = replay()
    assert used == "mooncake-synthetic"
    assert (
        "The prefix cache is replayed on mooncake-synthetic, a bundled log with block hashes, in "
        f"place of the plan's trace {rates}, which has none to replay (only a JSON-lines request "
        "log carries them, as Mooncake's hash_ids)." in said
    )
    log = tmp_path / "hashes.jsonl"  # a log that carries block hashes: the plan's own is replayed
    shutil.copy(
        Path(capnb.__file__).parents[1] / "datasets/traces/mooncake_synthetic_trace.jsonl", log
    )
    config.write_text(f'[traffic]\ntrace = "{log}"\n')
    used, said = replay()
    assert used == str(log) and f"The prefix cache is replayed on the plan's trace, {log}." in said
    used, said = replay(TRACE="mooncake-synthetic")
    assert used == "mooncake-synthetic" and "replayed on mooncake-synthetic (TRACE)" in said
    # the answers name the log too
    assert "replayed on {prefix_trace}" in source["48cc09ee"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        notebook.worksheet("06_serving")  # the defaults' plan: its trace is a rate series
    assert "in place of the plan's trace servegen-m-large" in capsys.readouterr().out


def test_the_start_worksheet_says_infeasible_where_no_concurrency_meets_its_sla():
    """Found with SLA_S below the curve's TTFT at one request: worksheet 00's second mistake
    failed with 'cannot convert float NaN to integer' (the latency plan has no concurrency), and
    its checks with a bare AssertionError; it says the capacity step's infeasible sentence now."""
    start = report.execute("00_start_here", parameters={"SLA_S": 0.001})
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert "Infeasible: ttft P99 is already" in said and "checks passed" in said


def test_the_start_worksheet_holds_where_the_sla_is_looser_than_the_curve():
    """Found with SLA_S = 300 s on the default curve (its P99 TTFT ends at 253 s at 2,048 in
    flight): both plans hold 2,048, yet worksheet 00's checks asserted the max-concurrency plan
    breaks the SLA, a bare AssertionError that kept the page out of a report; the worksheet now
    says the curve ends before the SLA binds and checks the instances, which still differ."""
    start = report.execute("00_start_here", parameters={"SLA_S": 300.0})
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert "TTFT P99 253.4 s against a 300 s SLA, 3 instances" in said
    assert (
        "the curve ends before the SLA binds (measured_range)" in said and "checks passed" in said
    )


#: A benchmark table of one's own (concurrency, requests/s, TTFT P50/P99 and mean E2E in ms).
OWN_BENCHMARK = (
    "concurrency,qps,ttft_p50_ms,ttft_p99_ms,e2e_mean_ms\n"
    "1,0.40,56,155,2506\n8,2.76,131,365,2898\n32,7.54,391,1085,4242\n"
    "64,10.6,736,2045,6034\n128,13.3,1427,3965,9618\n"
)


def test_the_start_worksheet_reads_a_benchmark_file_of_ones_own_as_its_curve(tmp_path):
    """Found setting SHOW_CURVE to a plain benchmark table, as worksheet 00 invites ('change the
    one cell tagged parameters to use your own ... benchmark files'): it failed with "unknown
    latency curve '.../bench.csv'", since it only loaded bundled curves by name; a path is now
    read as worksheet 03 reads BENCHMARK (capnb.data.read_benchmark)."""
    path = tmp_path / "bench.csv"
    path.write_text(OWN_BENCHMARK)
    start = report.execute("00_start_here", parameters={"SHOW_CURVE": str(path), "SLA_S": 1.5})
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert "Planned by maximum concurrency (128 in flight): TTFT P99 4.0 s" in said
    assert "Planned by the SLA (45 in flight)" in said and "checks passed" in said


def test_the_start_worksheet_names_the_hour_and_p99_its_mean_plan_falls_short_of(tmp_path):
    """Found reporting a user's three weeks (busiest mean at 10:00, one 3.5x burst at 14:00): the
    start page said 'a plan at the mean falls 78% short of the P99 in the busiest hour' of 'a real
    production series', where the first page and step 1 named 10:00-11:00 the busiest slot, 55%
    short of its P99: the 78% was the history's P99 of 14:00-15:00, the burst's hour (188
    requests/s), unnamed. It names the hour, its P99 and the mean, and calls the series the trace."""
    import numpy as np
    import pandas as pd

    times = pd.date_range("2026-10-01", periods=21 * 24 * 6, freq="10min", tz="UTC")
    hours = (times.hour + times.minute / 60).to_numpy()
    qps = 20 + 60 * np.exp(-((hours - 11) ** 2) / 18)
    qps[(times >= "2026-10-13 14:00") & (times < "2026-10-13 15:30")] *= 3.5
    path = tmp_path / "rates.csv"
    pd.DataFrame({"timestamp": times.strftime("%Y-%m-%dT%H:%M:%S%z"), "qps": qps}).to_csv(
        path, index=False
    )
    start = report.execute("00_start_here", parameters={"SHOW_TRACE": str(path)})
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert "real production series" not in said and "Warning" not in said
    assert re.search(
        r"a plan at its mean \([\d.]+ requests/s\) falls \d+% short of the history's P99 in its "
        r"busiest hour \(14:00-15:00 UTC, [\d.]+ requests/s\)",
        said,
    ), said


def test_the_start_worksheet_gives_a_quiet_traces_rates_their_digits(tmp_path):
    """Found running worksheet 00 on a request log of 0.1-0.6 requests/s: it said 'a plan at its
    mean (0.3 requests/s) falls 65% short of the history's P99 in its busiest hour (14:00-15:00,
    0.9 requests/s)', rates cut to one decimal (0.2995 and 0.8593), so the shortfall did not
    follow from its own figures (1 - 0.3/0.9 is 67%) and its P99 was 5% off; it gives them in the
    plan's digits (capnb.words.rate: 0.3 and 0.859)."""
    import numpy as np
    import pandas as pd

    from capnb import data, forecast, words

    times = pd.date_range("2026-03-02", periods=9 * 24 * 6, freq="10min")
    hours = (times.hour + times.minute / 60).to_numpy()
    qps = 0.1 + 0.5 * np.exp(-(((hours - 14) / 4) ** 2)) + 0.01 * (times.day_of_year % 3)
    path = tmp_path / "quiet.csv"
    pd.DataFrame({"timestamp": times.strftime("%Y-%m-%d %H:%M:%S"), "qps": qps}).to_csv(
        path, index=False
    )
    baseline = forecast.fit_baseline(forecast.resample(data.load_traffic(str(path)), "10min"))
    busiest = int(baseline.shortfall_fraction.sel(traffic_quantile=0.99).argmax("slot"))
    mean = words.rate(float(baseline.mean_plan_qps[busiest]))
    p99 = words.rate(float(baseline.target_qps.sel(traffic_quantile=0.99)[busiest]))
    assert len(p99) > 3  # the figure has digits past the first decimal
    start = report.execute("00_start_here", parameters={"SHOW_TRACE": str(path)})
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert f"a plan at its mean ({mean} requests/s)" in said, said
    assert f"14:00-15:00, {p99} requests/s)" in said and "checks passed" in said


def test_the_start_worksheet_scales_the_trace_as_the_plan_does(tmp_path):
    """Found reporting a plan with demand_scale = 3: its first page and step 1 planned three
    times the trace (a mean of 0.76 requests/s), where the start page, 'the traffic the plan's',
    said a plan at the trace's own mean (0.253 requests/s) falls short of its P99: the report
    gave it no scale. SHOW_DEMAND_SCALE multiplies every rate, as the plan's demand_scale."""
    import numpy as np
    import pandas as pd

    from capnb import data, forecast, words

    times = pd.date_range("2026-03-02", periods=9 * 24 * 6, freq="10min")
    hours = (times.hour + times.minute / 60).to_numpy()
    qps = 0.1 + 0.5 * np.exp(-(((hours - 14) / 4) ** 2))
    path = tmp_path / "quiet.csv"
    pd.DataFrame({"timestamp": times.strftime("%Y-%m-%d %H:%M:%S"), "qps": qps}).to_csv(
        path, index=False
    )
    baseline = forecast.fit_baseline(forecast.resample(data.load_traffic(str(path)), "10min"))
    busiest = int(baseline.shortfall_fraction.sel(traffic_quantile=0.99).argmax("slot"))
    mean = words.rate(3 * float(baseline.mean_plan_qps[busiest]))
    start = report.execute(
        "00_start_here", parameters={"SHOW_TRACE": str(path), "SHOW_DEMAND_SCALE": 3.0}
    )
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert f"a plan at its mean ({mean} requests/s)" in said and "checks passed" in said, said


def test_the_start_worksheet_starts_the_instance_of_the_degree_it_is_given():
    """Found reporting a plan of Mixtral-8x7B on 2 x H200: the start page said 'Mixtral-8x7B on
    1 x H200 starts in 354 s' (the fewest GPUs that hold it) where the plan serves 2 x H200."""
    start = report.execute("00_start_here", parameters={
        "SHOW_MODELS": ["Mixtral-8x7B"], "SHOW_GPU": "H200", "SHOW_TENSOR_PARALLEL": 2})  # fmt: skip
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert "Mixtral-8x7B on 2 x H200 starts in" in said and "checks passed" in said


def test_the_start_worksheet_says_the_cold_start_the_plan_replays():
    """Found reporting a plan whose config gives cold_start_s = 45 (measured): the plan and step 4
    replayed 45 s, while the start page, whose cold starts are 'the plan's' in a report, said
    only 'Qwen3-14B on 1 x A100-80GB starts in 124 s', capnb's estimate. It says the plan's now."""
    start = report.execute("00_start_here", parameters={
        "SHOW_MODELS": ["Qwen3-14B"], "SHOW_GPU": "A100-80GB", "SHOW_TENSOR_PARALLEL": 1,
        "SHOW_COLD_START_S": 45.0})  # fmt: skip
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert "Qwen3-14B on 1 x A100-80GB starts in 124 s" in said  # the estimate, for contrast
    assert "The plan replays a cold start of 45 s, as its config gives it" in said
    assert "checks passed" in said


def test_the_start_worksheet_says_the_estimate_in_the_plans_whole_steps():
    """Found reporting gpt-oss-120b on 1 x H200 (its cold start estimated, 252.19 s): the start
    page said it 'starts in 252 s' while the plan, its checks and step 4 said 253 s, the estimate
    rounded up to whole 1 s steps of the simulator. In a report it says the plan's figure too."""
    start = report.execute("00_start_here", parameters={
        "SHOW_MODELS": ["gpt-oss-120b"], "SHOW_GPU": "H200", "SHOW_TENSOR_PARALLEL": 1,
        "SHOW_STEP_S": 1.0})  # fmt: skip
    said = "".join(o.get("text", "") for c in start.cells for o in c.get("outputs", []))
    assert "gpt-oss-120b on 1 x H200 starts in 252 s" in said
    assert "The plan replays it as 253 s, in whole 1 s steps of its simulation." in said
    assert "checks passed" in said


def test_the_forecasting_worksheet_says_why_a_short_log_has_no_forecast_chosen_on_its_past(
    tmp_path,
):
    """Found running worksheet 01 on a request log of three hours: its step planned the log as it
    is, then the section on the forecast chosen on the trace's own past failed with '_TooShort:
    series: 3 h leaves 0 origin(s) after its first day' (a report left the step out)."""
    import pandas as pd

    times = pd.Timestamp("2026-03-11 08:00") + pd.to_timedelta(range(0, 3 * 3600, 2), unit="s")
    path = tmp_path / "requests.csv"
    pd.DataFrame({"timestamp": times.strftime("%Y-%m-%d %H:%M:%S"), "prompt_tokens": 900,
                  "output_tokens": 200}).to_csv(path, index=False)  # fmt: skip
    ran = report.execute("01_forecasting", parameters={"TRACE": str(path), "INTERVAL": "5min"})
    said = "".join(o.get("text", "") for c in ran.cells for o in c.get("outputs", []))
    assert "No forecast chosen on this trace's past: series: 3 h leaves 0 origin(s)" in said
    assert "checks passed" in said


def test_the_serving_worksheet_says_infeasible_where_its_limits_cannot_carry_the_demand():
    """Found with LIMITS too small for the plan's busiest hour: worksheet 06 stopped at the fleet
    with an InfeasibleError traceback (and every later cell on 'ws' not defined), where its own
    section 'When the answer is infeasible' has the words; it says them and runs the rest now."""
    limits = {gpu: 1 for gpu in ("L4", "L40S", "A100-80GB", "H100-SXM", "H200", "B200")}
    serving = report.execute("06_serving", parameters={"LIMITS": limits})
    said = "".join(o.get("text", "") for c in serving.cells for o in c.get("outputs", []))
    assert "No fleet within the limits: infeasible: slot" in said and "Raise a limit" in said
    assert "P:D per hour" in said  # the parts that need no fleet ran


def test_the_plan_worksheet_says_infeasible_where_no_gpu_meets_the_sla():
    """Found with an SLA no GPU meets: worksheet 05 stopped at the build with a PlanError
    traceback and every later cell failed on 'plan' not defined; it says why and where the ways
    out are now, and its checks say there is no plan to check."""
    from nbclient.exceptions import CellExecutionError

    overrides = {"sla": {"ttft_s": 0.01}, "serving": {"gpus": ["L4"], "tensor_parallel": [1]}}
    with pytest.raises(CellExecutionError) as raised:
        report.execute("05_plan", parameters={"OVERRIDES": overrides})
    assert "no plan to check: infeasible" in str(raised.value)
    assert "NameError" not in str(raised.value) and raised.value.in_checks


@pytest.mark.slow
def test_the_forecasting_checks_hold_on_a_bundled_series_with_missing_intervals():
    """Found reporting a plan on servegen-m-small (37 of its 2,016 intervals missing): worksheet
    01's check that the carried history keeps each slot's order sorted the missing intervals
    (NaN) among the rates and failed, so the report left the forecasting step out as a defect."""
    ran = report.execute("01_forecasting", parameters={
        "TRACE": "servegen-m-small", "GROWTH_MODEL": "auto", "TRIALS": 50})  # fmt: skip
    said = "".join(o.get("text", "") for c in ran.cells for o in c.get("outputs", []))
    assert "checks passed" in said


@pytest.mark.slow
def test_the_serving_worksheet_shows_the_plans_own_prefill_decode_pools(small_plan, tmp_path):
    """Worksheet 06 in a report said "Serve disaggregated: 5 prefill (TP2) and 25 decode (TP2) H200
    instances" under "the plan's demand served both ways", for a plan of Qwen3-8B on A100-80GB
    whose first page said 11 prefill and 6 decode A100-80GB instances: it sized gpt-oss-120b on
    H200 at dstack's SLA. In a report it reads the plan's own comparison."""
    from capnb import plan

    parameters, made = _parameters_and_plan(small_plan, tmp_path)
    pools = next(x for x in plan.answer(made).alternatives if x.name == "prefill/decode pools")
    assert parameters["06_serving"]["PLAN_FILE"] == parameters["05_plan"]["PLAN_FILE"]
    serving = report.execute("06_serving", parameters=parameters["06_serving"])
    said = "".join(o.get("text", "") for c in serving.cells for o in c.get("outputs", []))
    assert pools.words in said
    ratio = made.serving_instances.transpose("slot", "serving_pool").values
    assert "P:D per hour: " + ", ".join(f"{int(p)}:{int(d)}" for p, d in ratio) in said
    assert "H200 instances" not in said or plan.answer(made).gpu == "H200"


@pytest.mark.slow
def test_the_serving_worksheets_routed_caches_fit_the_plans_instances(small_plan, tmp_path):
    """Found reporting Qwen3-14B on 2 x A100-80GB: worksheet 06 said "a prefix cache of 30 % of
    one 2 x A100-80GB instance's 682,192-token KV budget" and, a cell before, "With 1,000,000
    tokens of prefix cache per instance ... over 64 instances": each routed cache larger than the
    instance's whole KV budget, over a fixed 64 instances where the plan held 16 at its busiest
    slot. In a report the routed fleet is the plan's, each cache the share the mix prices."""
    from capnb import plan

    parameters, made = _parameters_and_plan(small_plan, tmp_path)
    busiest = max(plan.answer(made).fixed_instances)
    assert parameters["06_serving"].get("ROUTE_INSTANCES") == busiest
    serving = report.execute("06_serving", parameters=parameters["06_serving"])
    said = "".join(
        o.get("text", "") + "".join(str(v) for v in o.get("data", {}).values())
        for c in serving.cells
        for o in c.get("outputs", [])
    )
    budget = int(re.search(r"instance's ([\d,]+)-token KV budget", said).group(1).replace(",", ""))
    routed = re.search(r"With ([\d,]+) tokens of prefix cache per instance .*? over (\d+) instances",
                       said)  # fmt: skip
    assert int(routed.group(1).replace(",", "")) == round(0.3 * budget)
    assert int(routed.group(2)) == busiest


@pytest.mark.slow
def test_the_serving_worksheet_prices_the_plans_own_mix(small_plan, tmp_path):
    """Found reporting Qwen3-8B on 2 x A100-80GB: the plan's page priced one type on demand at
    16,255 USD a month and its cheapest mix at 14,561, worksheet 06 at 109.07 and 99.71 USD an hour
    (79,621 and 72,788 a month): 06 priced its options on the analytic model, the plan on the
    model its held-out error prefers. In a report 06 prices the plan's own options, target and gap."""
    import warnings

    from capnb import notebook, plan

    parameters, made = _parameters_and_plan(small_plan, tmp_path)
    mix = next(x for x in plan.answer(made).alternatives if x.name.startswith("mixed fleet"))
    monthly = re.search(r"one type on demand \(([^)]+)\) costs ([\d,]+) USD a month and the "
                        r"cheapest mix \(([^;)]+)[^)]*\) ([\d,]+) USD a month", mix.words)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prefix-cache log's shared timestamps
        ws = notebook.worksheet("06_serving", **parameters["06_serving"])
    hourly = re.search(r"the cheapest mix \((.+?) reserved, [a-z ]+ above\) costs ([\d,.]+) "
                       r"USD/hour, against ([\d,.]+) for (.+?) alone on demand", ws.answer)  # fmt: skip
    assert hourly.group(4) == monthly.group(1)
    for shown, planned in (
        (hourly.group(3), monthly.group(2)),
        (hourly.group(2), monthly.group(4)),
    ):
        assert float(shown.replace(",", "")) * 730 == pytest.approx(
            float(planned.replace(",", "")), abs=0.005 * 730 + 1
        )


def _cells_until(name: str, parameters: dict, text: str) -> dict:
    """A worksheet's code cells run headless, as notebook.worksheet runs them, up to and
    including the first that holds ``text`` (past the worksheet itself); their namespace."""
    cells = json.loads(report.worksheet_path(name).read_text(encoding="utf-8"))["cells"]
    namespace: dict = {"__name__": f"worksheet_{name}"}
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        exec(compile(source, name, "exec"), namespace)
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            namespace.update(parameters)
        if text in source:
            return namespace
    raise AssertionError(f"{name}: no code cell holds {text!r}")


@pytest.mark.slow
def test_the_serving_worksheet_compares_fleets_by_size_on_one_latency_model(small_plan, tmp_path):
    """Found reading the default report: worksheet 06's fleets by request size set the plan's
    options (the serving-engine model: B200 on demand 52,925 USD a month) beside per-bin curves on
    the analytic model (H200 on demand 159,713), so mixing by size looked 3x dearer; on one model
    (the worksheet alone) the per-bin curves cost 2.7 % less. Both rows now come from one model."""
    import warnings

    from capnb import capacity

    parameters, _ = _parameters_and_plan(small_plan, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prefix-cache log's shared timestamps
        ran = _cells_until("06_serving", parameters["06_serving"], "compare_fleets(")
    assert ran["by_size"].attrs["latency"] == "analytic"
    whole = xr.Dataset(
        {"per_instance_qps": ran["sweep"].per_instance_qps.squeeze(["model", "seq_len"], drop=True)}
    )
    alone = capacity.mix(whole, ran["demand"], prices=ran["prices"], reserved=None)
    shown = ran["fleets"].usd_per_hour.sel(fleet="whole workload: one type, on demand")
    assert float(shown) == pytest.approx(alone.attrs["single_type_usd_per_hour"])


def test_the_capacity_worksheet_sizes_memory_with_the_plans_accounting(tmp_path):
    """A plan on the analytic model with [serving] accounting = "vllm" held 309 requests in flight
    (memory binding) on its first page; worksheet 03, on the article's accounting, 313."""
    from capnb import notebook, plan

    config = plan.PlanConfig().replace(
        traffic={"trace": "servegen-m-small", "trials": 50},
        serving={"gpus": ("H100-SXM",), "tensor_parallel": (1,), "latency": "model",
                 "accounting": "vllm"},
        sla={"ttft_s": 30.0, "confirm": True},
        elasticity={"policies": ("hpa",), "scale_up_threshold": (0.7,), "cooldown_s": (900.0,),
                    "backtest_days": 0},
    )  # fmt: skip
    parameters, made = _parameters_and_plan(config, tmp_path)
    a = plan.answer(made)
    assert a.binding == "memory" and a.safe_concurrency == a.memory_concurrency
    sheet = notebook.worksheet("03_capacity", **parameters["03_capacity"])
    result = sheet["result"].squeeze(drop=True)
    assert str(result.binding.values) == "memory"
    assert int(result.safe_concurrency) == a.safe_concurrency


def _stub_worksheets(monkeypatch, heading: str) -> list[bool]:
    """The report without its work: no plan built, each worksheet one markdown cell ``heading``.

    Returns the list the stubbed parameters step appends each call's ``force`` to.
    """
    import nbformat

    built: list[bool] = []

    def parameters(config, out_dir, *, keep=None, written=None, force=False, stage=None):
        built.append(force)
        return {}

    def executed(name, **kwargs):
        notebook = nbformat.v4.new_notebook()
        notebook.cells.append(nbformat.v4.new_markdown_cell(heading))
        notebook.metadata["capnb_worksheet"] = name
        return notebook

    monkeypatch.setattr(report, "_parameters", parameters)
    monkeypatch.setattr(report, "execute", executed)
    return built


def test_a_report_refuses_files_it_did_not_write_before_the_work_and_replaces_its_own(
    tmp_path, monkeypatch
):
    # the report replaced a plan.toml of the user's in --out (and any page named like one of
    # its own) without a word, and a plan.json of the user's ended the run after the plan was
    # built, saying "pass --force", a flag capnb report did not have
    from capnb.errors import OutputError

    built = _stub_worksheets(monkeypatch, "# Step 2 — Memory")
    run = functools.partial(report.run_report, None, tmp_path, worksheets=("02_memory",),
                            progress=False)  # fmt: skip
    for name in ("plan.toml", "plan.json", "02_memory.html", report.REPORT_NAME):
        (tmp_path / name).write_text("mine")
        with pytest.raises(OutputError, match=rf"{re.escape(name)}: exists and capnb did not"):
            run()
        assert built == [] and [p.name for p in tmp_path.iterdir()] == [name]
        assert (tmp_path / name).read_text() == "mine"
        (tmp_path / name).unlink()
    (tmp_path / "02_memory.html").write_text("mine")
    first = run(force=True)
    assert "mine" not in (tmp_path / "02_memory.html").read_text()
    assert run() == first  # its own pages: replaced without force
    assert built == [True, False]
    assert main(["report", "--force", "--out", str(first[0])]) == 1  # a flag now, as advised


def test_a_report_of_fewer_worksheets_removes_its_earlier_pages_of_another_plan(
    tmp_path, monkeypatch
):
    # a report of 02_memory after one of 02_memory and 03_capacity left 03_capacity.html, a page
    # of the earlier run's plan and inputs, beside this run's plan.json and combined report
    _stub_worksheets(monkeypatch, "# A step")
    run = functools.partial(report.run_report, None, tmp_path, progress=False)
    run(worksheets=("02_memory", "03_capacity"))
    (tmp_path / "04_elasticity.html").write_text("mine")  # a page capnb did not write: kept
    written = run(worksheets=("02_memory",))
    pages = sorted(p.name for p in tmp_path.glob("*.html"))
    assert pages == ["02_memory.html", "04_elasticity.html", report.REPORT_NAME]
    assert [p.name for p in written] == [report.REPORT_NAME, "02_memory.html"]
    assert (tmp_path / "04_elasticity.html").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".capnb-tmp")]


def test_an_interrupted_report_stops_at_once_and_says_so(tmp_path, monkeypatch, capsys):
    # Ctrl-C during the first worksheet let every other worksheet run to its end (the pool
    # waited for them) before a KeyboardInterrupt traceback; now the worksheets not started are
    # dropped, and the command says it was interrupted
    ran = []

    def parameters(config, out_dir, *, keep=None, written=None, force=False, stage=None):
        return {}

    def execute(name, **kwargs):  # Ctrl-C while the first worksheet runs
        import signal
        import time

        import nbformat

        ran.append(name)
        if len(ran) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
        return nbformat.v4.new_notebook()

    monkeypatch.setattr(report, "_parameters", parameters)
    monkeypatch.setattr(report, "execute", execute)
    names = ("02_memory", "03_capacity", "04_elasticity")
    with pytest.raises(KeyboardInterrupt):
        report.run_report(None, tmp_path, worksheets=names, jobs=1, progress=False)
    assert ran == ["02_memory"]
    ran.clear()
    args = ["report", "--out", str(tmp_path)] + [a for n in names for a in ("--worksheet", n)]
    assert main(args) == 130
    assert capsys.readouterr().err == "capnb report: interrupted\n"
    assert ran == ["02_memory"] and list(tmp_path.iterdir()) == []


def test_the_serving_answer_names_the_plans_own_traffic_quantile(tmp_path):
    """Found with a plan config at traffic_quantile = 0.95: worksheet 06 sized its mix on the
    P95 demand (300-452 requests/s on servegen-m-large) but its answer said 'for the plan's P99
    demand'; the quantile is the config's now."""
    import warnings

    from capnb import notebook

    config = tmp_path / "plan.toml"
    config.write_text(
        "[traffic]\ntraffic_quantile = 0.95\n"
        '[serving]\nmodel = "Llama-3.1-8B"\ngpus = ["H100-SXM"]\ntensor_parallel = [1]\n'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prefix-cache log's shared timestamps
        ws = notebook.worksheet("06_serving", CONFIG=str(config))
    assert "for the plan's P95 demand" in ws.answer and "P99" not in ws.answer


def test_the_serving_worksheet_prices_the_prefix_cache_of_the_configs_model(tmp_path):
    """Found with a plan config of Qwen3-8B as worksheet 06's one change (CONFIG, said to give
    "its demand, model, GPUs and SLA"): the mix priced Qwen3-8B, but the prefix-cache section
    and the answer's KV budget were Llama-3.1-8B's, MODEL's default, without a word. MODEL is
    None by default now: the config's model."""
    import warnings

    config = tmp_path / "plan.toml"
    config.write_text('[serving]\nmodel = "Qwen3-8B"\ngpus = ["H100-SXM"]\ntensor_parallel = [1]\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prefix-cache log's shared timestamps
        serving = report.execute("06_serving", parameters={"CONFIG": str(config)})
    said = "".join(o.get("text", "") for c in serving.cells for o in c.get("outputs", []))
    assert "Prefix cache on 1 x H100-SXM for Qwen3-8B" in said and "Llama-3.1-8B" not in said


def test_the_serving_worksheet_draws_no_empty_prefix_trade_chart():
    """Found with Qwen3-8B on one L40S: its 138,000-token KV cache cannot hold mooncake-synthetic's
    longest request (191,382 tokens), so every cache share of the prefix trade is infeasible, and
    the trade's chart drew a flat line at 0 requests/s beside an empty P99 TTFT panel above the
    sentence saying so; a panel with nothing to draw is left out now, the chart when both are."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prefix-cache log's shared timestamps
        serving = report.execute("06_serving", parameters={"MODEL": "Qwen3-8B", "GPU": "L40S"})
    cell = next(c for c in serving.cells if c.get("id") == "70dc7127")
    shown = "".join(str(o.get("data", {})) for o in cell.get("outputs", []))
    assert "vega" not in shown and "share of the KV budget" not in shown
    said = "".join(o.get("text", "") for c in serving.cells for o in c.get("outputs", []))
    assert "cannot hold the log's longest request (191,382 tokens" in said


def test_the_capacity_worksheet_prices_the_gpu_on_the_plans_own_calibration(tmp_path):
    """A plan calibrated on the user's runs (1 x H100-SXM at 8.07 requests/s): worksheet 03 of
    its report simulated the bundled calibration, 20.4 requests/s, two figures for one instance
    in one report; it now takes the plan's calibration of that GPU (CALIBRATION) and agrees."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_engine_queueing import _write_runs
    from test_plan import CHEAPER

    from capnb import notebook, plan
    from capnb.latency.calibration import Calibration

    runs = tmp_path / "runs"
    runs.mkdir()
    _write_runs(runs, Calibration(0.35, 0.5, 0.6, 6e-3, 3e-5, 2e-5, 0.03, fitted_on="t"),
                [2.0, 12.0])  # fmt: skip
    config = dict(CHEAPER, gpus=("H100-SXM",), tensor_parallel=(1,), latency="engine",
                  sla={"ttft_s": 2.0, "tpot_s": 0.05}, calibration_runs=str(runs))  # fmt: skip
    parameters, made = _parameters_and_plan(config, tmp_path / "out")
    a = plan.answer(made)
    parameters = parameters["03_capacity"]
    assert parameters["CALIBRATION"]["gpu"] == "H100-SXM"
    sheet = notebook.worksheet("03_capacity", **parameters)
    qps = float(sheet["result"].squeeze(drop=True).per_instance_qps.max())
    assert qps == pytest.approx(a.per_instance_qps, rel=0.005)
    # another GPU chosen in the worksheet keeps the bundled calibration
    sheet.set(gpu="H200")
    assert sheet.error is None


def test_run_report_from_python_refuses_an_empty_output_folder(tmp_path, monkeypatch):
    # the CLI refused --out '' (an unset shell variable), but run_report(out_dir="") turned it
    # into Path(""), the current folder, and wrote the report there
    from capnb import report
    from capnb.errors import OutputError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match="output folder '': an empty path"):
        report.run_report(out_dir="", worksheets=["02_memory"])
    assert list(tmp_path.iterdir()) == []


def test_a_report_that_ends_early_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    # the plan's files (plan.nc, plan.json, plan.toml, the YAML) were written into --out before
    # the worksheets ran: a report interrupted (or killed, or failing) after its plan left the
    # new plan beside the earlier report's pages, which showed another plan (capnb export then
    # exported the new one); now the plan is written with the pages, as one set, at the end
    import nbformat

    from capnb.data import write_set

    old = {"plan.json": "old plan", "plan.toml": "old config", "capnb_report.html": "old pages"}
    write_set(tmp_path, old)
    seen = {}

    def parameters(config, out_dir, *, keep=None, written=None, force=False, stage=None):
        files = write_set(stage or out_dir, {"plan.json": "new", "plan.toml": "new"}, force=force)
        seen["plan"] = files["plan.json"]
        written.extend(files.values())
        return {"05_plan": {"PLAN_FILE": str(files["plan.json"])}}

    def interrupted(name, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "_parameters", parameters)
    monkeypatch.setattr(report, "execute", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.run_report(None, tmp_path, worksheets=("05_plan",), jobs=1, progress=False)
    assert {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()} == {
        **old,
        ".capnb-outputs.json": (tmp_path / ".capnb-outputs.json").read_text(),
    }
    assert not seen["plan"].exists()  # nothing of the run is left, here or elsewhere

    def ran(name, parameters=None, **kwargs):
        notebook = nbformat.v4.new_notebook()
        notebook.cells.append(nbformat.v4.new_code_cell(f"PLAN_FILE = {parameters['PLAN_FILE']!r}"))
        notebook.cells[0].metadata["tags"] = ["injected-parameters"]
        return notebook

    monkeypatch.setattr(report, "execute", ran)
    report.run_report(
        None, tmp_path, worksheets=("05_plan",), jobs=1, progress=False, show_code=True
    )
    assert (tmp_path / "plan.json").read_text() == "new" == (tmp_path / "plan.toml").read_text()
    assert "old pages" not in (tmp_path / "capnb_report.html").read_text()
    page = (tmp_path / "05_plan.html").read_text()
    assert repr(str((tmp_path / "plan.json").resolve())) in html.unescape(page)  # where it is now
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [
        ".capnb-outputs.json"
    ]


def test_the_serving_worksheet_prices_the_plans_own_prefix_cache_share(tmp_path):
    """Found reporting Qwen3-14B on 2 x A100-80GB with prefix_cache_share = 0.2: the plan said
    "A prefix cache holds 20% of each instance's KV budget" and "memory holds 95"; worksheet 06
    said "a prefix cache of 30 % of one 2 x A100-80GB instance's 682,192-token KV budget ...
    leaves 78 instead of 111 concurrent sequences" and routed 204,658-token caches (30 %), a
    share the plan never chose. The share is the plan's now, 30 % only where it holds none."""
    import shutil
    import warnings

    import altair as alt

    import capnb

    log = tmp_path / "hashes.jsonl"
    shutil.copy(
        Path(capnb.__file__).parents[1] / "datasets/traces/mooncake_synthetic_trace.jsonl", log
    )
    cells = json.loads(report.worksheet_path("06_serving").read_text(encoding="utf-8"))["cells"]
    source = {c.get("id"): "".join(c["source"]) for c in cells}
    assert "0.3" not in source["72024f8e"] and "30 %" not in source["72024f8e"]

    def shares(config_text):
        config = tmp_path / "plan.toml"
        config.write_text(f'[traffic]\ntrace = "{log}"\n' + config_text)
        namespace = {"capnb": capnb, "alt": alt, "TRACE": None, "CONFIG": str(config), "MODEL": "Qwen3-8B",
                     "GPU": "H100-SXM", "TENSOR_PARALLEL": 1, "ROUTE_INSTANCES": 4,
                     "ROUTE_CACHE_TOKENS": None, "CACHE_SHARE": None,
                     "SEQ_LEN": None}  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for cell in ("caba1ded", "63a9b6cc"):  # the split, then the routed fleet
                exec(compile(source[cell], cell, "exec"), namespace)
        return namespace

    held = shares('[serving]\nlatency = "engine"\nprefix_cache_share = 0.2\n')
    assert held["cache_share"] == 0.2 and 0.2 in held["split"].cache_share.values
    assert held["route_cache"] == round(0.2 * held["kv_tokens"])
    plain = shares("")  # a plan with no cache: the worksheet's own 30 %
    assert plain["cache_share"] == 0.3 and plain["route_cache"] == round(0.3 * plain["kv_tokens"])


def test_the_serving_worksheet_holds_sequences_of_the_plans_length(tmp_path):
    """Found reporting Qwen3-14B on 2 x A100-80GB with prefix_cache_share = 0.2: the plan said
    "memory holds 95" (sequences of its 5,703 tokens) and worksheet 02 "at most 119 concurrent
    sequences of 5,703 tokens"; worksheet 06 said "a prefix cache of 20% ... leaves 89 instead of
    111 concurrent sequences", its sequences its log's mean prompt + 512 (6,144 tokens). In a
    report 06's sequences are the plan's length: 95 instead of 119."""
    import shutil
    import warnings

    import capnb
    from capnb import plan as planning

    made = xr.Dataset(attrs={"workload_trace": "/logs/rag.jsonl"})
    cfg = planning.read_config({"prefix_cache_share": 0.2, "latency": "engine"})
    assert report._prefix_parameters(cfg, made, 5703) == {
        "TRACE": "/logs/rag.jsonl",
        "SEQ_LEN": 5703,
    }
    log = tmp_path / "hashes.jsonl"
    shutil.copy(
        Path(capnb.__file__).parents[1] / "datasets/traces/mooncake_synthetic_trace.jsonl", log
    )
    config = tmp_path / "plan.toml"
    config.write_text(f'[traffic]\ntrace = "{log}"\n')
    cells = json.loads(report.worksheet_path("06_serving").read_text(encoding="utf-8"))["cells"]
    split_cell = next("".join(c["source"]) for c in cells if c.get("id") == "caba1ded")
    for given, held in ((5703, 5703), (None, None)):
        namespace = {"capnb": capnb, "TRACE": None, "CONFIG": str(config), "MODEL": "Qwen3-8B",
                     "GPU": "H100-SXM", "TENSOR_PARALLEL": 1, "CACHE_SHARE": None,
                     "SEQ_LEN": given}  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(split_cell, "caba1ded", "exec"), namespace)
        blocks = namespace["blocks"]
        assert namespace["seq_len"] == (held or int(blocks.prompt_tokens.mean()) + 512)
        assert namespace["split"].attrs["seq_len"] == namespace["seq_len"]


def test_the_memory_worksheet_says_what_the_plans_prefix_cache_takes(monkeypatch, capsys):
    """Found reporting Qwen3-14B on 2 x A100-80GB with prefix_cache_share = 0.2: worksheet 02
    said "fits at most 119 concurrent sequences of 5,703 tokens" and nothing of the cache, the
    plan "memory holds 95" (20 % of the budget held by the cache). With the plan (PLAN_FILE, as
    in a report) the memory answer says what its cache takes."""
    from types import SimpleNamespace

    import capnb

    held = SimpleNamespace(prefix_cache_share=0.2, memory_concurrency=95)
    monkeypatch.setattr(capnb.plan, "load", lambda path: path)
    monkeypatch.setattr(capnb.plan, "answer", lambda plan: held)
    parameters = {"MODEL": "Qwen3-14B", "GPU": "A100-80GB", "TENSOR_PARALLEL": 2,
                  "SEQ_LEN": 5703, "ACCOUNTING": "vllm", "VLLM_VERSION": "0.10",
                  "PLAN_FILE": "plan.nc"}  # fmt: skip
    _cells_until("02_memory", parameters, "ws.answer_view())")
    said = capsys.readouterr().out
    assert (
        "fits at most 119 concurrent sequences of 5,703 tokens" in said
    )  # the answer, still shown
    assert (
        "The plan gives 20% of each instance's KV budget to a prefix cache (worksheet 06): "
        "the rest holds 95 sequences of 5,703 tokens in flight (the plan's 'memory holds 95')."
    ) in said
    held.prefix_cache_share = 0.0  # no cache: nothing to say
    _cells_until("02_memory", parameters, "ws.answer_view())")
    assert "prefix cache" not in capsys.readouterr().out


def _by_size_cells(**settings) -> dict:
    """Worksheet 06's fleets by request size (its cells 5769b14b, fbb733fb, d5f170b6) run on a
    small log of two request shapes (200 chats of 300 + 150 tokens, 200 RAG prompts of 3,000 +
    100), Llama-3.1-8B on H100-PCIe and A100-80GB-PCIe at hyperstack: their namespace."""
    from types import SimpleNamespace

    import altair as alt
    import numpy as np
    import pandas as pd

    import capnb

    cells = json.loads(report.worksheet_path("06_serving").read_text(encoding="utf-8"))["cells"]
    source = {c.get("id"): "".join(c["source"]) for c in cells}
    gpus = ["H100-PCIe", "A100-80GB-PCIe"]
    lengths = xr.Dataset({"prompt_tokens": ("request", [300] * 200 + [3000] * 200),
                          "output_tokens": ("request", [150] * 200 + [100] * 200)})  # fmt: skip
    whole = xr.Dataset({"per_instance_qps": (("gpu", "tensor_parallel"), [[6.0], [4.0]])},
                       coords={"gpu": gpus, "tensor_parallel": [1]})  # fmt: skip
    namespace = {
        "capnb": capnb, "alt": alt, "pd": pd, "np": np, "xr": xr, "ws": object(),
        "lengths": lengths, "whole_analytic": whole, "mix_settings": {}, "not_priced": None,
        "serving": SimpleNamespace(model="Llama-3.1-8B", gpus=gpus, tensor_parallel=(1,),
                                   accounting="article"),
        "cfg": SimpleNamespace(sla=capnb.capacity.SLA(ttft_s=2.0, tpot_s=0.06)),
        "demand": xr.DataArray([20.0, 35.0, 50.0], dims="slot", coords={"slot": [0, 1, 2]}),
        "prices": capnb.data.gpu_prices("hyperstack"), "PROVIDER": "hyperstack",
        "RESERVED": "reserved", "SPOT_PREEMPTION": None, "LIMITS": {},
    } | settings  # fmt: skip
    for cell in ("5769b14b", "fbb733fb", "d5f170b6"):
        exec(compile(source[cell], cell, "exec"), namespace)
    return namespace


@pytest.mark.parametrize("settings", [{"RESERVED": None, "SPOT_PREEMPTION": 0.1}, {}])
def test_the_serving_worksheets_chart_by_size_draws_the_fleet_of_a_row_of_its_table(settings):
    """Worksheet 06 solved the fleet by size twice: the table (compare_fleets) at the mix's gap
    (1e-3 by default) and on demand without spot for its on-demand row, the chart of where each
    bin is served (mix_by_size) at gap 0 with RESERVED and SPOT_PREEMPTION as given. With
    RESERVED=None and SPOT_PREEMPTION=0.1 the chart drew a fleet with spot that no row of the
    table holds. It now draws the row it names, solved as the table solved it."""
    ran = _by_size_cells(**settings)
    fleet, table = ran["by_size_fleet"], ran["fleets"]
    row = ran["by_size_row"]
    assert row in table.fleet.values
    assert fleet.attrs["mix_usd_per_hour"] == pytest.approx(
        float(table.usd_per_hour.sel(fleet=row)), rel=1e-9
    )


def test_the_serving_worksheets_line_by_size_says_what_the_fleets_could_not_buy(capsys):
    """At gcp (an on-demand and a spot price for H100-SXM, nothing reserved, no L40S) with a
    third request shape of 3 requests (9,000 + 80 tokens), worksheet 06 said "one type with a
    reserved base (H100-SXM TP1) saves 0.0%; mixing GPU types by size saves 0.0% ..." and nothing
    of why: compare_fleets carries reserved_unpriced ('H100-SXM'), not_priced ('L40S') and
    few_requests (the 3-request bin), which the line now says."""
    from types import SimpleNamespace

    import capnb

    gpus = ["H100-SXM", "L40S"]
    lengths = xr.Dataset({"prompt_tokens": ("request", [300] * 200 + [3000] * 200 + [9000] * 3),
                          "output_tokens": ("request", [150] * 200 + [100] * 200 + [80] * 3)})  # fmt: skip
    whole = xr.Dataset({"per_instance_qps": (("gpu", "tensor_parallel"), [[6.0], [4.0]])},
                       coords={"gpu": gpus, "tensor_parallel": [1]})  # fmt: skip
    _by_size_cells(
        prices=capnb.data.gpu_prices("gcp"), PROVIDER="gcp", lengths=lengths, whole_analytic=whole,
        serving=SimpleNamespace(model="Llama-3.1-8B", gpus=gpus, tensor_parallel=(1,),
                                accounting="article"),
    )  # fmt: skip
    said = capsys.readouterr().out
    assert "No reserved price at gcp for H100-SXM" in said
    assert "L40S meets the SLA for some size bin but has no price at gcp" in said
    assert "prompt 8192+ / output 64-255 (3 requests)" in said


def test_the_serving_worksheets_cheapest_fleet_says_what_it_could_not_buy():
    """At hyperstack with a spot share (SPOT_PREEMPTION = 0.1), H100-SXM (no spot price there)
    and L40S (no price at all there): worksheet 06's sentence after the fleet controls said
    "the cheapest mix (4 x H100-SXM TP1 reserved, on demand above) costs 18.35 USD/hour, against
    20.27 for H100-SXM TP1 alone on demand (9% less)" and nothing of mix's spot_unpriced ('H100-SXM') or
    not_priced ('L40S'), which its by-size line and the plan's mixed-fleet words say."""
    import ast
    from types import SimpleNamespace

    import capnb

    cells = json.loads(report.worksheet_path("06_serving").read_text(encoding="utf-8"))["cells"]
    source = next("".join(c["source"]) for c in cells if c.get("id") == "72024f8e")
    tree = ast.parse(source)
    defined = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "answer"]
    gpus = ["H100-SXM", "L40S"]
    options = xr.Dataset({"per_instance_qps": (("gpu", "tensor_parallel"), [[6.0], [3.0]])},
                         coords={"gpu": gpus, "tensor_parallel": [1]})  # fmt: skip
    demand = xr.DataArray([20.0, 35.0, 50.0], dims="slot", coords={"slot": [0, 1, 2]})
    fleet = capnb.capacity.mix(options, demand, prices=capnb.data.gpu_prices("hyperstack"),
                               reserved="reserved", spot_preemption=0.1)  # fmt: skip
    assert fleet.attrs["spot_unpriced"] == "H100-SXM" and fleet.attrs["not_priced"] == "L40S"
    split = xr.Dataset({"prefix_hit_rate": ("cache_share", [0.0, 0.3]),
                        "max_concurrency": ("cache_share", [100, 70])},
                       coords={"cache_share": [0.0, 0.3]})  # fmt: skip
    namespace = {"prefix_trace": "a trace", "cache_share": 0.3, "TENSOR_PARALLEL": 1,
                 "GPU": "H100-SXM", "kv_tokens": 100_000, "split": split, "demand": demand,
                 "traffic": SimpleNamespace(traffic_quantile=0.99), "PROVIDER": "hyperstack"}  # fmt: skip
    exec(compile(ast.Module(defined, type_ignores=[]), "72024f8e", "exec"), namespace)
    said = namespace["answer"]({"fleet": fleet}, {})
    assert "no spot price at hyperstack for H100-SXM" in said, said
    assert "L40S meets the SLA but has no price at hyperstack" in said, said


def test_the_start_worksheet_names_the_curve_of_ones_own_not_the_bundled_one(tmp_path):
    """Found setting SHOW_CURVE to one's own vllm bench serve results (Llama-3.1-8B on one H100):
    the page said it showed 'a measured latency curve of Llama-3.1-405B on 8 x MI300X (dstack's
    benchmark)' and then 'The same benchmark, planned two ways' with the 8B's numbers (64 in
    flight, TTFT P99 2.1 s), never naming the files they came from. It names the curve it plans."""
    path = tmp_path / "bench.csv"
    path.write_text(OWN_BENCHMARK)
    start = report.execute("00_start_here", parameters={"SHOW_CURVE": str(path), "SLA_S": 1.5})
    shown = "".join(c.source if c.cell_type == "markdown" else "" for c in start.cells) + "".join(
        o.get("text", "") for c in start.cells for o in c.get("outputs", [])
    )
    assert "405B on 8 x MI300X" not in shown and "dstack" not in shown.replace("dstack-", "")
    assert "bench.csv" in shown
    default = report.execute("00_start_here")
    said = "".join(o.get("text", "") for c in default.cells for o in c.get("outputs", []))
    assert "dstack-vllm-mi300x-short (Llama-3.1-405B on 8 x MI300X)" in said


@pytest.mark.slow
def test_the_elasticity_worksheet_refuses_a_plan_file_with_other_inputs(small_plan, tmp_path):
    """Found setting PLAN_FILE in worksheet 04 ('its policy, chosen out of sample, is the answer')
    and leaving the other inputs at their defaults (servegen-m-large at 20 requests/s an instance,
    where the plan was of another trace at 27): the plan's policy was replayed on those inputs as
    the answer, and where its exported objects replay exactly (a Knative plan) the worksheet failed
    in its checks with a bare AssertionError (they are the plan's run, not the worksheet's). It now
    names each input that is not the plan's, and the plan's value (here, a plan of m-small)."""
    parameters, made = _parameters_and_plan(small_plan, tmp_path)
    plan_file = parameters["04_elasticity"]["PLAN_FILE"]
    with pytest.raises(CellExecutionError) as raised:
        report.execute("04_elasticity", parameters={"PLAN_FILE": plan_file})
    said = str(raised.value)
    assert "ConfigError" in said and not raised.value.in_checks
    assert (
        f"PER_INSTANCE_QPS = 20.0, the plan's {parameters['04_elasticity']['PER_INSTANCE_QPS']!r}"
        in said
    )
    assert "TRACE = 'servegen-m-large', the plan's 'servegen-m-small'" in said
    assert report.elasticity_parameters(made) == {
        k: v for k, v in parameters["04_elasticity"].items() if k != "PLAN_FILE"
    }

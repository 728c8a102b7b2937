"""A service no bundled default resembles, made here: its own model, clock, traffic and benchmarks.

- a model config that is not in the catalog (a 5 B-parameter GQA model, by config.json and by folder);
- a request log with its own clock (UTC+02:00 offsets) and token columns, three days long;
- a rate series file (``timestamp,qps``) at 100-150 requests/s;
- ``vllm bench serve`` result files of its own, one per concurrency.

``capnb plan`` runs on every combination (model by folder or by config.json, request log or rate
series, latency model or benchmark files) through the command line; the plan's instance counts are
checked against a hand computation; ``capnb report --config`` runs on two of them: the request
log with the latency model, and the rate series with the benchmark files under hostile names.

Hostile names: the model's folder, the GPU (a row of a copied GPU catalog: its id and display
name), the rate series' and the benchmark files' folders and file name, and the config's own path
each hold ``</script><script>...`` (which ends a script element: ``json.dumps`` does not escape
it) and ``"'><img onerror=...>`` (which ends an attribute). Every payload calls ``capnbPwned``, a
function the test page exposes: the report, opened in chromium with no network, must call it zero
times and still draw its charts. One report checks both (every worksheet ran on the user's own
files; none of their strings runs as a script): a report is the heaviest thing the suite builds.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.browser import ARGS
from capnb import data, latency, plan
from capnb.cli import main

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DATASETS = Path(__file__).resolve().parents[1] / "datasets"
SCRIPT = "</script><script>capnbPwned('{}')</script>"
ATTRIBUTE = "\"'><img src=x onerror=capnbPwned('{}')>"

DAYS = 3


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("service")
    rng = np.random.default_rng(42)
    # a model no catalog entry matches: 28 layers, hidden 3072, GQA 24 query / 4 KV heads
    folder = root / "acme-5b"
    folder.mkdir()
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 28,
        "num_attention_heads": 24,
        "num_key_value_heads": 4,
        "vocab_size": 64000,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    (folder / "config.json").write_text(json.dumps(config))
    # a request log on its own clock: UTC+02:00, a daily cycle, prompt and output token counts
    seconds = DAYS * 86400
    hours = np.arange(seconds) / 3600
    rate = 2.0 + 1.5 * np.sin(2 * np.pi * (hours - 9) / 24)  # about 0.5-3.5 requests/s
    arrivals = rng.poisson(rate)
    times = np.repeat(np.arange(seconds), arrivals) + rng.uniform(0, 1, arrivals.sum())
    start = pd.Timestamp("2026-06-01 00:00:00+02:00")
    stamps = start + pd.to_timedelta(np.sort(times), unit="s")
    log = pd.DataFrame(
        {
            "timestamp": stamps.strftime("%Y-%m-%dT%H:%M:%S.%f%z").str.replace(
                r"(\d\d)(\d\d)$", r"\1:\2", regex=True
            ),
            "input_tokens": rng.integers(200, 3000, stamps.size),
            "output_tokens": rng.integers(20, 600, stamps.size),
        }
    )
    log.to_csv(root / "requests.csv", index=False)
    # a rate series: one row a minute, 100-150 requests/s
    minutes = pd.date_range("2026-06-01", periods=DAYS * 1440, freq="1min")
    qps = 125 + 25 * np.sin(2 * np.pi * (np.arange(minutes.size) / 1440 - 0.4))
    pd.DataFrame({"timestamp": minutes, "qps": qps + rng.normal(0, 2, minutes.size)}).to_csv(
        root / "rates.csv", index=False
    )
    # vllm bench serve results of its own: one JSON file per concurrency (milliseconds)
    bench = root / "bench"
    bench.mkdir()
    for c in (1, 2, 4, 8, 16, 32, 64, 128):
        tpot = 9.0 * (1 + c / 48) ** 1.3
        ttft = 45.0 * (1 + c / 20)
        e2e = ttft + 300 * tpot
        record = {
            "backend": "vllm",
            "model_id": "acme/acme-5b",
            "num_prompts": 20 * c,
            "request_rate": "inf",
            "max_concurrency": c,
            "completed": 20 * c,
            "total_input_tokens": 1200 * 20 * c,
            "total_output_tokens": 300 * 20 * c,
            "request_throughput": c / (e2e / 1000),
            "mean_ttft_ms": ttft,
            "median_ttft_ms": ttft,
            "p99_ttft_ms": 1.8 * ttft,
            "mean_tpot_ms": tpot,
            "median_tpot_ms": tpot,
            "p99_tpot_ms": 1.25 * tpot,
            "mean_itl_ms": tpot,
            "median_itl_ms": tpot,
            "p99_itl_ms": 2.5 * tpot,
            "mean_e2el_ms": e2e,
            "median_e2el_ms": e2e,
            "p99_e2el_ms": 1.4 * e2e,
        }
        (bench / f"acme-5b-c{c}.json").write_text(json.dumps(record))
    return {"root": root, "model": folder, "requests": root / "requests.csv",
            "rates": root / "rates.csv", "bench": bench}  # fmt: skip


def _config(service, model, trace, latency, *, folder=None, names=None, **extra) -> Path:
    """A user's config file, with paths relative to its own folder (or as ``names`` gives them)."""
    names = names or {}
    gpus = names.get("gpus", ["H100-SXM"] if latency != "model" else ["H100-SXM", "L40S"])
    lines = [
        "[traffic]",
        f"trace = {json.dumps(str(names.get('trace', trace)))}",
        "trials = 100",
        "[serving]",
        f"model = {json.dumps(str(names.get('model', model)))}",
        f"gpus = {json.dumps(gpus)}",
        "tensor_parallel = [1]",
        f"latency = {json.dumps(str(names.get('latency', latency)))}",
        "[sla]",  # two bounds met together
        "ttft_s = 1.5",
        "tpot_s = 0.05",
        "[elasticity]",
        'policies = ["hpa", "fixed"]',
        "scale_up_threshold = [0.7]",
        "cooldown_s = [900.0]",
        "step_s = 5.0",
        *extra.get("lines", []),
    ]
    if folder is not None:
        path = folder / "plan.toml"
    else:
        path = service["root"] / f"plan-{model}-{trace}-{latency}.toml".replace("/", "_")
    path.write_text("\n".join(lines) + "\n")
    return path


MODELS = ["acme-5b", "acme-5b/config.json"]
TRACES = ["requests.csv", "rates.csv"]
LATENCY = ["model", "bench"]


@pytest.mark.parametrize(
    ("model", "trace", "latency"),
    list(itertools.product(MODELS, TRACES, LATENCY)),
)
def test_capnb_plan_runs_on_the_users_own_files(service, model, trace, latency, capsys, tmp_path):
    # the policy's held-out choice (two thirds of a plan's time here) reads the trace and the
    # per-instance rate (a number, whichever latency source gave it), not how the model was named:
    # it runs once per kind of trace, on the request log here (the report below reads this plan)
    # and on the rate series in the hostile report; the other combinations are planned without it
    held_out = model == "acme-5b" and trace == "requests.csv" and latency == "model"
    lines = [] if held_out else ["backtest_days = 0"]
    path = _config(service, model, trace, latency, lines=lines)
    assert main(["plan", "--config", str(path), "--out", str(tmp_path)]) == 0, (
        capsys.readouterr().err
    )
    out = capsys.readouterr().out
    used = out.split("Inputs: ", 1)[1].split("\n", 1)[0]
    assert "acme-5b" in used and str(service["root"]) in used
    assert ("request log" if trace == "requests.csv" else "rate series") in used
    if latency == "bench":
        assert "measured latencies (vllm bench serve or SGLang bench_serving results)" in used
    else:
        assert "calibrated analytic model" in used
    if trace == "requests.csv":  # the log has its own token counts: the plan prices them
        assert "the plan's own trace" in used
    assert ("Held out: the plan kept its breach budget" in out) == held_out
    summary = json.loads((tmp_path / "plan.json").read_text())
    assert summary["answer"]["gpu"] in ("H100-SXM", "L40S")
    assert summary["answer"]["per_instance_qps"] > 0
    assert summary["answer"]["sla"] == {"ttft_s": 1.5, "tpot_s": 0.05, "quantile": 0.99}


def test_the_instance_counts_follow_by_hand(service):
    config = plan.load_config(_config(service, "acme-5b", "rates.csv", "bench"))
    config = config.replace(
        traffic={"growth_model": "none"}
    )  # the history's own quantiles, as by hand below
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plan.PlanWarning)
        built = plan.build(config)
    # the forecast by hand: 10-minute means, then the P99 of each hour of the day
    table = pd.read_csv(service["rates"], parse_dates=["timestamp"])
    windows = table.set_index("timestamp").qps.resample("10min").mean()
    target = windows.groupby(windows.index.hour).quantile(0.99, interpolation="linear")
    np.testing.assert_allclose(
        built.forecast_target_qps.sel(traffic_quantile=0.99).values, target.values, rtol=1e-9
    )
    # instances by hand: ceil(target / per-instance) per slot, the buffer on top
    per_instance = plan.answer(built).per_instance_qps
    fixed = np.ceil(target.values / per_instance - 1e-9)
    chosen = built.sel(gpu="H100-SXM", tensor_parallel=1)
    np.testing.assert_array_equal(chosen.capacity_fixed_instances.values, fixed)
    buffer = math.ceil(float(built.forecast_buffer_qps) / per_instance - 1e-9)
    np.testing.assert_array_equal(chosen.capacity_instances.values, fixed + buffer)
    # and the per-instance rate is Little's law on the benchmark itself at the safe concurrency
    curve = latency.envelope(data.read_benchmark(service["bench"]))
    safe = int(chosen.capacity_safe_concurrency)
    at = latency.at(curve, [safe, safe + 1])  # measured points, interpolated between
    # both bounds hold at the safe concurrency, and the one the plan names binds one step on
    metric = plan.answer(built).binding_metric
    bound = {"ttft": 1.5, "tpot": 0.05}
    for m in bound:
        assert float(at.latency.sel(metric=m, latency_quantile=0.99)[0]) <= bound[m]
    assert float(at.latency.sel(metric=metric, latency_quantile=0.99)[1]) > bound[metric]
    mean_e2e = float(at.mean_latency.sel(metric="e2e")[0])
    assert per_instance <= safe / mean_e2e * (1 + 1e-9)


def _hostile_folder(root: Path, what: str) -> Path:
    """A folder whose path holds both payloads (a path component cannot hold "/": split at it)."""
    folder = root / "<" / f"script><script>capnbPwned('{what}')<" / "script>"
    folder = folder / ATTRIBUTE.format(f"{what}-attr").replace("/", "")
    folder.mkdir(parents=True)
    return folder


@pytest.fixture(scope="module")
def hostile_report(service, tmp_path_factory):
    """``capnb report`` on the rate series and benchmark files, every name a user controls hostile.

    Returns the report's folder and what the command printed (stdout, then stderr).
    """
    root = tmp_path_factory.mktemp("hostile")
    catalog = root / "datasets"
    shutil.copytree(DATASETS, catalog)
    gpu = "H100" + SCRIPT.format("gpu") + ATTRIBUTE.format("gpu-attr")
    gpus = pd.read_csv(catalog / "gpus.csv", dtype=str, keep_default_na=False)
    row = gpus[gpus.gpu == "H100-SXM"].copy()
    row["gpu"], row["display_name"], row["aliases"] = gpu, SCRIPT.format("gpu-name"), ""
    pd.concat([gpus, row]).to_csv(catalog / "gpus.csv", index=False)
    prices = pd.read_csv(catalog / "gpu_prices.csv", dtype=str, keep_default_na=False)
    own = prices[(prices.gpu == "H100-SXM") & (prices.provider == "hyperstack")].copy()
    pd.concat([prices, own.assign(gpu=gpu)]).to_csv(catalog / "gpu_prices.csv", index=False)
    # a folder named like a catalog model but holding another: capnb names it by its full path
    model = _hostile_folder(root, "model") / "acme-5b"
    shutil.copytree(service["model"], model)
    trace = _hostile_folder(root, "trace") / (ATTRIBUTE.format("trace-file").replace("/", "")
                                              + ".csv")  # fmt: skip
    shutil.copy(service["rates"], trace)
    bench = _hostile_folder(root, "bench") / "bench"
    shutil.copytree(service["bench"], bench)
    # without the policy's held-out choice (half the plan's time): the request log's report runs
    # it through every worksheet, and a rate series' is the bundled default report's
    path = _config(service, "acme-5b", "rates.csv", "bench", folder=_hostile_folder(root, "config"),
                   names={"trace": trace, "model": model, "latency": bench, "gpus": [gpu]},
                   lines=["backtest_days = 0"])  # fmt: skip
    out = root / "report"
    run = subprocess.run(
        [sys.executable, "-m", "capnb", "report", "--config", str(path), "--out", str(out),
         "--quiet"],
        env={**os.environ, "CAPNB_DATASETS": str(catalog)}, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return out, run.stdout + run.stderr


@pytest.mark.parametrize(("trace", "latency"), [("requests.csv", "model"), ("rates.csv", "bench")])
def test_capnb_report_runs_every_worksheet_on_the_users_files(
    service, trace, latency, tmp_path, capsys, request
):
    if latency == "bench":  # the benchmark files, under hostile names
        out, printed = request.getfixturevalue("hostile_report")
    else:
        path = _config(service, "acme-5b", trace, latency)
        out = tmp_path / "report"
        assert main(["report", "--config", str(path), "--out", str(out), "--quiet"]) == 0
        printed = "".join(capsys.readouterr())  # a worksheet left out is said on stderr
    assert "Inputs: config: " in printed
    assert "cannot apply" not in printed  # every worksheet ran on the user's files
    combined = (out / "capnb_report.html").read_text(encoding="utf-8")
    assert "acme-5b" in combined
    assert len(list(out.glob("*.html"))) == 8  # the report and the seven worksheets
    # one record behind every answer: plan.json, describe() and the report's first page
    summary = json.loads((out / "plan.json").read_text())
    built = plan.load(out / "plan.nc")
    a = plan.answer(built)
    assert summary["answer"] == a.to_dict() and summary["text"] == plan.describe(built)
    assert (out / "plan.toml").is_file()  # the config the plan was built from, beside it
    plan_page = _text((out / "05_plan.html").read_text(encoding="utf-8"))
    assert summary["text"].split("\n")[0] in plan_page  # the plan worksheet says the answer
    # chosen out of sample, or said not to be
    assert ("Held out: the plan kept its breach budget" in summary["text"]) == (latency == "model")
    front = _text(combined.split('id="the-plan"', 1)[1].split("</section>", 1)[0])
    assert "The plan in numbers" in front and "What binds at each step" in front
    for number in _numbers(front):  # every figure on the first page is one the record renders
        assert number in _numbers(plan.describe(built)) | _fields(a), number
    assert f"{a.monthly_usd:,.0f} USD a month" in front and front.count(" USD a month") == 1
    # every worksheet section says it ran on the plan's model and GPU
    sections = combined.split('class="capnb-section"')[1:]
    assert len(sections) == 7
    for section in sections:
        said = _text(section.split('class="capnb-inputs"', 1)[1].split("</p>", 1)[0])
        assert f"{a.model} on {a.tensor_parallel} x {a.gpu}" in said


@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CAPNB_REQUIRE_BROWSER"),
    reason="needs Debian's chromium (.ci/run installs it and sets CAPNB_REQUIRE_BROWSER)",
)
def test_no_script_of_the_users_strings_runs(hostile_report):
    playwright = pytest.importorskip("playwright.sync_api")
    pages = sorted(hostile_report[0].glob("*.html"))
    assert len(pages) == 8  # the combined report and one page per worksheet
    raw = "".join(p.read_text(encoding="utf-8") for p in pages)
    for what in ("model", "gpu", "trace", "bench", "config"):  # every payload reached the pages
        assert f"capnbPwned('{what}')" in raw or f"capnbPwned(\\u0027{what}" in raw, what
    calls, charts, failed, errors = [], {}, {}, []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for path in pages:
            page = browser.new_page()
            page.expose_function(
                "capnbPwned", lambda what, path=path: calls.append((path.name, what))
            )
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(path.as_uri())
            page.wait_for_function("() => !(window.capnbVegaQueue || []).length", timeout=60_000)
            # charts draw asynchronously after vegaEmbed is defined: wait until each has drawn or failed
            page.wait_for_function(
                "() => [...document.querySelectorAll('.capnb-chart')]"
                ".every(e => e.querySelector('svg') || e.textContent.includes('failed'))",
                timeout=60_000,
            )
            charts[path.name] = page.eval_on_selector_all(
                ".capnb-chart svg, .capnb-static-chart svg", "found => found.length"
            )
            failed[path.name] = page.eval_on_selector_all(
                ".capnb-chart", "els => els.filter(e => e.textContent.includes('failed')).length"
            )
            page.close()
        browser.close()
    assert calls == []
    assert errors == []
    assert sum(failed.values()) == 0, failed
    assert charts["capnb_report.html"] >= 10, charts  # the charts were drawn, strings and all


def _text(page: str) -> str:
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<svg.*?</svg>", "", page, flags=re.S)))


def _numbers(text: str) -> set[str]:
    import re

    return {m.replace(",", "") for m in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}


def _fields(a) -> set[str]:
    """The record's numbers as a page may write them (whole, two decimals, percentages)."""
    found: set[str] = set()

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            for text in (f"{value:.0f}", f"{value:.2f}", f"{value:g}", f"{100 * value:.0f}",
                         f"{100 * value:.1f}", f"{100 * value:.2f}"):  # fmt: skip
                found.add(text)
        elif isinstance(value, str):
            found.update(_numbers(value))

    walk(a.to_dict())
    return found

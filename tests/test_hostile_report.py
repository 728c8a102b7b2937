"""A report built on hostile strings in every field a user controls runs none of their scripts.

The model (a folder named like a catalog model but holding another, so capnb names it by its full
path), the GPU (a row of a copied GPU catalog: its id and display name), the trace (its folders and
file name), the config's own path: each holds ``</script><script>...`` (which ends a script
element: ``json.dumps`` does not escape it) and ``"'><img onerror=...>`` (which ends an attribute).
Every payload calls ``capnbPwned``, a function the test page exposes: the report, opened in
chromium with no network, must call it zero times, and still draw its charts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.browser import ARGS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DATASETS = Path(__file__).resolve().parents[1] / "datasets"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None and not os.environ.get("CAPNB_REQUIRE_BROWSER"),
        reason="needs Debian's chromium (.ci/run installs it and sets CAPNB_REQUIRE_BROWSER)",
    ),
]

SCRIPT = "</script><script>capnbPwned('{}')</script>"
ATTRIBUTE = "\"'><img src=x onerror=capnbPwned('{}')>"


def _hostile_folder(root: Path, what: str) -> Path:
    """A folder whose path holds both payloads (a path component cannot hold "/": split at it)."""
    folder = root / "<" / f"script><script>capnbPwned('{what}')<" / "script>"
    folder = folder / ATTRIBUTE.format(f"{what}-attr").replace("/", "")
    folder.mkdir(parents=True)
    return folder


def _inputs(root: Path) -> tuple[Path, Path]:
    """A copied catalog with a hostile GPU, a hostile model folder and trace; the config's path."""
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
    model = _hostile_folder(root, "model") / "Llama-3.1-8B"
    model.mkdir()
    config = json.loads((DATASETS / "models" / "Llama-3.1-8B.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "torch_dtype": "float16"}))
    trace = _hostile_folder(root, "trace") / (
        ATTRIBUTE.format("trace-file").replace("/", "") + ".csv"
    )
    times = pd.date_range("2026-03-02", periods=288, freq="10min")
    qps = 40 + 20 * np.sin(2 * np.pi * np.arange(times.size) / 144)
    pd.DataFrame({"timestamp": times, "qps": qps}).to_csv(trace, index=False)
    path = _hostile_folder(root, "config") / "plan.toml"
    path.write_text(
        "\n".join([
            "[traffic]", f"trace = {json.dumps(str(trace))}", "trials = 100",
            "[serving]", f"model = {json.dumps(str(model))}", f"gpus = [{json.dumps(gpu)}]",
            "tensor_parallel = [1]",
            "[elasticity]", 'policies = ["hpa", "fixed"]', "scale_up_threshold = [0.7]",
            "cooldown_s = [900.0]", "step_s = 5.0", "backtest_days = 0",
        ]) + "\n"
    )  # fmt: skip
    return catalog, path


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    catalog, config = _inputs(root)
    out = root / "report"
    run = subprocess.run(
        [sys.executable, "-m", "capnb", "report", "--config", str(config), "--out", str(out),
         "--quiet"],
        env={**os.environ, "CAPNB_DATASETS": str(catalog)}, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return out


def test_no_script_of_the_users_strings_runs(hostile_report):
    playwright = pytest.importorskip("playwright.sync_api")
    pages = sorted(hostile_report.glob("*.html"))
    assert len(pages) >= 7  # the combined report and one page per worksheet
    raw = "".join(p.read_text(encoding="utf-8") for p in pages)
    for what in ("model", "gpu", "trace", "config"):  # every payload reached the pages
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

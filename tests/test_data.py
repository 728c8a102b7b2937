"""Catalogs: GPU profiles, model files, and reaching datasets/ from an installed wheel."""

import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from capnb import data, glossary
from capnb.errors import InputError, UnknownNameError

REQUIRED_GPUS = [
    "A10G",
    "L4",
    "L40S",
    "A100-40GB",
    "A100-80GB",
    "H100-SXM",
    "H100-PCIe",
    "H200",
    "B200",
    "MI300X",
]


def test_catalog_has_the_required_gpus_with_prices_and_sources():
    gpus = data.load_gpus()
    assert set(REQUIRED_GPUS) <= set(gpus.gpu.values)
    assert (gpus.memory_bytes > 0).all() and (gpus.hbm_bandwidth > 0).all()
    assert (gpus.dense_bf16_flops > 0).all()
    assert (gpus.usd_per_gpu_hour > 0).all()
    assert all(src.strip() for src in gpus.price_source.values)
    assert gpus.memory_bytes.attrs["units"] == "bytes"
    assert gpus.usd_per_gpu_hour.attrs["units"] == "USD/hour"


def test_gpu_figures_against_their_datasheets():
    gpus = data.load_gpus(["H100-SXM", "H200", "A100-80GB", "L4"])
    h100 = gpus.sel(gpu="H100-SXM")
    assert h100.memory_bytes.item() == 80 * 2**30
    assert h100.hbm_bandwidth.item() == 3.35e12 and h100.dense_bf16_flops.item() == 989e12
    assert gpus.sel(gpu="H200").hbm_bandwidth.item() == 4.8e12
    assert gpus.sel(gpu="A100-80GB").dense_bf16_flops.item() == 312e12
    assert np.isnan(gpus.sel(gpu="A100-80GB").dense_fp8_flops.item())  # Ampere has no FP8


def test_gpu_aliases_resolve_case_insensitively():
    assert data.resolve_gpu("h100 sxm") == "H100-SXM"
    assert data.resolve_gpu("NVIDIA H200 SXM 141GB") == "H200"
    assert list(data.load_gpus(["a100-sxm-80gb", "L4"]).gpu.values) == ["A100-80GB", "L4"]


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("AMD Instinct MI300X", "MI300X"),
    ],
)
def test_the_name_the_driver_reports_resolves(name, gpu):
    # nvidia-smi's and torch.cuda.get_device_name()'s names, as benchmark write-ups quote them:
    # "NVIDIA H100 80GB HBM3" was an unknown GPU whose closest ids were the three A100s
    assert data.resolve_gpu(name) == gpu


@pytest.mark.parametrize(
    ("name", "fits"),
    [("H100", "H100-SXM, H100-PCIe"), ("a100", "A100-40GB, A100-80GB, A100-80GB-PCIe")],
)
def test_a_gpu_family_name_is_never_a_silent_pick(name, fits):
    with pytest.raises(InputError, match=f"fits [0-9] catalog profiles \\({fits}\\)"):
        data.resolve_gpu(name)


def test_unknown_gpu_lists_closest_and_duplicates_are_refused():
    with pytest.raises(UnknownNameError, match="unknown GPU 'H1000'; closest: "):
        data.load_gpus(["H1000"])
    with pytest.raises(InputError, match="names the same GPU twice"):
        data.load_gpus(["H100 SXM", "H100-SXM"])
    with pytest.raises(InputError, match="at least one"):
        data.load_gpus([])


def test_every_bundled_model_is_listed():
    assert {
        "Llama-3.1-8B",
        "Llama-3.1-70B",
        "Llama-3.1-405B",
        "Mixtral-8x7B",
        "DeepSeek-V3",
        "Kimi-K2",
        "Qwen3-235B-A22B",
        "BLOOM-176B",
    } <= set(data.list_models())


def test_datasets_readme_names_every_bundled_file():
    readme = data.dataset_path("README.md").read_text()
    for path in data.dataset_path().rglob("*"):
        if path.is_file() and path.name != "README.md" and not path.name.startswith("LICENSE"):
            assert path.name in readme or path.parent.name in readme, path


def test_glossary_attrs():
    assert glossary.attrs("total_bytes") == {
        "units": "bytes",
        "long_name": glossary.VARIABLES["total_bytes"].long_name,
    }
    with pytest.raises(KeyError, match="not in capnb's glossary"):
        glossary.attrs("speed")


def test_the_docs_render_the_glossary():
    """The glossary page is the table itself, rendered when the site is built (no hand copy)."""
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "glossary.md").read_text()
    assert "```{capnb-glossary}" in page
    assert "| `" not in page  # no copied rows


def test_import_is_lazy():
    """`import capnb` loads no heavy library and compiles nothing; its time is in the benchmarks."""
    code = (
        "import sys, capnb; heavy = {'numpy', 'numba', 'xarray', 'pandas', 'altair'} & "
        "set(sys.modules); print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_datasets_reachable_from_an_installed_wheel(tmp_path):
    """Build the wheel, unpack it away from the source tree and load catalogs from it."""
    from pathlib import Path

    root = Path(__file__).parents[1]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(root),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("capnb-*.whl"))
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
    assert "capnb/datasets/gpus.csv" in names
    assert "capnb/notebooks/02_memory.ipynb" in names
    assert "capnb/templates/capnb_report/index.html.j2" in names
    # the benchmarks and the kernels' plain references stay in the repository (benchmarks/)
    outside = [n for n in names if n.split("/")[0] == "benchmarks" or "reference" in n]
    assert outside + [n for n in names if n.startswith("capnb/benchmarks/")] == []
    code = (
        "import capnb.data as d, capnb.report as r; p = d.dataset_path('gpus.csv'); "
        "print(p); print(len(d.load_gpus().gpu)); print(d.load_model('Llama-3.1-8B').parameters); "
        "print(r.worksheet_path('02_memory'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    path, count, params, notebook = out.stdout.split()
    assert path.startswith(str(site)) and notebook.startswith(str(site))
    assert int(count) == len(data.list_gpus())
    assert int(params) == data.load_model("Llama-3.1-8B").parameters


def test_write_section_replaces_one_section_and_appends_a_new_one(tmp_path):
    path = tmp_path / "V.md"
    path.write_text("# V\n\n## A\nold a\n\n## B\nb\n", encoding="utf-8")
    data.write_section(path, "## A\nnew a\n")
    assert path.read_text(encoding="utf-8") == "# V\n\n## A\nnew a\n\n## B\nb\n"
    data.write_section(path, "## C\nc\n")
    assert path.read_text(encoding="utf-8").endswith("## B\nb\n\n## C\nc\n")
    with pytest.raises(ValueError, match="'## ' heading"):
        data.write_section(path, "no heading\n")


def test_empty_windows_of_a_quiet_service_are_idle_not_missing(tmp_path):
    # 1-minute counts of a service at 0.02 requests/s: a third of the windows are empty, as a
    # Poisson process at that rate leaves them; they are idle time, not holes in the data
    rng = np.random.default_rng(3)
    counts = rng.poisson(0.02 * 60, 7 * 1440)
    times = np.datetime64("2024-05-13T00:00") + np.arange(counts.size).astype("timedelta64[m]")
    path = tmp_path / "quiet.csv"
    path.write_text("time,requests\n" + "".join(
        f"{t},{c}\n" for t, c in zip(times.astype(str), counts, strict=True)))  # fmt: skip
    quiet = data.load_rate_series(path, time_column="time", count_column="requests")
    assert quiet.attrs["missing_windows"] == 0
    assert float(quiet.qps.mean()) == pytest.approx(counts.sum() / (counts.size * 60))
    assert "kept as idle, not missing" in quiet.attrs["notes"]
    holes = data.load_rate_series(
        path, time_column="time", count_column="requests", zero_is_missing=True
    )
    assert holes.attrs["missing_windows"] == int((counts == 0).sum()) > 2000


def test_an_unknown_gpu_lists_the_catalog_and_says_how_to_add_one():
    with pytest.raises(
        UnknownNameError, match=r"unknown GPU 'RTX-4090'.*all: .*MI300X.*CAPNB_DATASETS"
    ):
        data.resolve_gpu("RTX-4090")


def test_a_rate_series_error_after_a_merged_repeat_names_the_file_row_it_is_on(tmp_path):
    """Merging a repeated window must not shift the rows later errors name."""
    from capnb.data import load_rate_series
    from capnb.errors import ConfigError

    path = tmp_path / "rates.csv"
    path.write_text("time,qps\n0,5\n600,6\n600,6\n1200,7\n1500,8\n")
    with pytest.raises(ConfigError, match=r"row 5 \(line 6\): window start is not a whole number"):
        load_rate_series(path, time_column="time", rate_column="qps", time_unit="s",
                         start="2026-01-01", interval="10min")  # fmt: skip


@pytest.mark.parametrize(
    ("options", "given"),
    [({"start": "yesterday"}, r"start='yesterday'"), ({"start": "2020-01-01"}, r"start='2020-01"),
     ({"time_unit": "ms"}, r"time_unit='ms'")],
)  # fmt: skip
def test_start_or_time_unit_for_a_column_of_dates_is_an_error(tmp_path, options, given):
    # they read numeric times only, and were ignored for dates: start='yesterday' passed, and
    # start='2020-01-01' left the trace on its own dates without a word
    from capnb.data import load_traffic
    from capnb.errors import ConfigError

    path = tmp_path / "rates.csv"
    path.write_text("time,qps\n2026-03-01T00:00:00Z,5\n2026-03-01T00:10:00Z,6\n")
    with pytest.raises(
        ConfigError, match=rf"row 1 \(line 2\): column 'time' holds dates .*{given}"
    ):
        load_traffic(path, **options)
    naive = tmp_path / "naive.csv"
    naive.write_text("time,qps\n2026-03-01 00:00:00,5\n2026-03-01 00:10:00,6\n")
    with pytest.raises(ConfigError, match=given):
        load_traffic(naive, **options)


def test_a_hugging_face_id_of_a_catalog_model_says_which_catalog_id_to_use(tmp_path, monkeypatch):
    """vllm bench records its model as a Hugging Face id ('Qwen/Qwen3-8B'), which users pass on.

    Read as a path (it holds a '/'), it ended in "Qwen/Qwen3-8B: no such model config file" with
    no word of the catalog's Qwen3-8B.
    """
    from capnb.errors import ConfigError

    monkeypatch.chdir(tmp_path)  # (no folder Qwen/ here)
    said = (r"^Qwen/Qwen3-8B: no such model config file; as a Hugging Face id it names the "
            r"catalog's 'Qwen3-8B': pass model='Qwen3-8B'")  # fmt: skip
    with pytest.raises(ConfigError, match=said):
        data.load_model("Qwen/Qwen3-8B")
    with pytest.raises(ConfigError, match=r"^acme/acme-5b: no such model config file$"):
        data.load_model("acme/acme-5b")


@pytest.mark.parametrize(
    ("hub_id", "catalog"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "Llama-3.1-70B"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B"),
    ],
)
def test_a_hugging_face_id_of_an_instruct_tune_names_its_base_in_the_catalog(
    tmp_path, monkeypatch, hub_id, catalog
):
    # the ids vllm bench records for the most served models: the hint above fired for
    # 'Qwen/Qwen3-8B' only, and 'meta-llama/Llama-3.1-8B-Instruct' ended in "no such model
    # config file" with no word of the catalog's Llama-3.1-8B (the same architecture)
    from capnb.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    said = (rf"^{re.escape(hub_id)}: no such model config file; as a Hugging Face id it names an "
            rf"instruction-tuned release of the catalog's '{catalog}': pass model='{catalog}' if "
            r"its config.json")  # fmt: skip
    with pytest.raises(ConfigError, match=said):
        data.load_model(hub_id)
    with pytest.raises(ConfigError, match=r"^acme/acme-5b-Instruct: no such model config file$"):
        data.load_model("acme/acme-5b-Instruct")


@pytest.mark.parametrize(
    ("name", "other"), [("L40", "L40S"), ("H20", "H200"), ("MI300", "MI300X"), ("B20", "B200")]
)
def test_a_gpu_name_cut_short_is_not_read_as_the_longer_gpu(name, other):
    # the L40 and the H20 are other GPUs than the L40S and the H200 (half the tensor FLOP/s, a
    # fraction of the compute): a prefix match priced them as the catalog's profile without a word
    from capnb.data._catalog import resolve_gpu

    with pytest.raises(UnknownNameError, match=rf"unknown GPU '{name}'; closest: {other}"):
        resolve_gpu(name)


@pytest.mark.parametrize(
    ("name", "gpu"),
    [("H100SXM", "H100-SXM"), ("h100_sxm", "H100-SXM"), ("H100 SXM5", "H100-SXM"),
     ("nvidia l40s", "L40S"), ("a100-80gb", "A100-80GB"), ("L40S 48GB", "L40S")],
)  # fmt: skip
def test_a_gpu_name_written_otherwise_is_still_its_profile(name, gpu):
    from capnb.data._catalog import resolve_gpu

    assert resolve_gpu(name) == gpu


def test_the_gpu_catalog_follows_capnb_datasets_and_edits_in_one_process(tmp_path, monkeypatch):
    """A catalog read once is not kept past a move of CAPNB_DATASETS or an edit of its gpus.csv."""
    import shutil

    import pandas as pd

    assert data.gpu_column(["L4"], "usd_per_gpu_hour").tolist() == [0.44]  # the bundled catalog
    root = tmp_path / "datasets"  # a copy holding the GPU catalog alone is enough here
    root.mkdir()
    shutil.copy(data.dataset_path("gpus.csv"), root)
    gpus = pd.read_csv(root / "gpus.csv", dtype=str, keep_default_na=False)
    gpus.loc[gpus.gpu == "L4", "usd_per_gpu_hour"] = "9.99"
    mine = gpus[gpus.gpu == "L4"].assign(gpu="L4-mine", display_name="My L4", aliases="")
    pd.concat([gpus, mine]).to_csv(root / "gpus.csv", index=False)
    monkeypatch.setenv("CAPNB_DATASETS", str(root))
    assert data.gpu_column(["L4"], "usd_per_gpu_hour").tolist() == [9.99]
    assert float(data.load_gpus(["L4"]).usd_per_gpu_hour[0]) == 9.99
    assert data.resolve_gpu("my l4") == "L4-mine" and data.list_gpus()[-1] == "L4-mine"
    gpus.loc[gpus.gpu == "L4", "usd_per_gpu_hour"] = "1.23"  # edited in place, same path
    gpus.to_csv(root / "gpus.csv", index=False)
    assert data.gpu_column(["L4"], "usd_per_gpu_hour").tolist() == [1.23]
    assert "L4-mine" not in data.list_gpus()
    monkeypatch.delenv("CAPNB_DATASETS")
    assert data.gpu_column(["L4"], "usd_per_gpu_hour").tolist() == [0.44]


def test_the_model_catalog_follows_capnb_datasets_and_edits_in_one_process(tmp_path, monkeypatch):
    """A bundled model read once is not kept past a move of CAPNB_DATASETS or an edit of its file."""
    import json
    import shutil

    assert data.load_model("Qwen3-8B").context_tokens == 40960  # the bundled config
    root = tmp_path / "datasets"  # a copy holding the model catalog alone is enough here
    shutil.copytree(data.dataset_path("models"), root / "models")
    path = root / "models" / "Qwen3-8B.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**config, "max_position_embeddings": 131072}), encoding="utf-8")
    monkeypatch.setenv("CAPNB_DATASETS", str(root))
    assert data.load_model("Qwen3-8B").context_tokens == 131072
    (root / "models" / "Qwen3-8B-long.json").write_text(path.read_text(encoding="utf-8"))
    assert "Qwen3-8B-long" in data.list_models()
    path.write_text(json.dumps({**config, "max_position_embeddings": 65536}), encoding="utf-8")
    assert data.load_model("Qwen3-8B").context_tokens == 65536  # edited in place
    monkeypatch.delenv("CAPNB_DATASETS")
    assert data.load_model("Qwen3-8B").context_tokens == 40960
    assert "Qwen3-8B-long" not in data.list_models()


def test_a_capnb_datasets_copy_lacking_a_file_is_named_as_the_users_copy(tmp_path, monkeypatch):
    # a copy holding gpus.csv alone (as the catalog tests above make) was said to be capnb's own
    # data: "capnb's bundled data has no models at .../datasets/models", though the bundled
    # catalog has them and CAPNB_DATASETS, which moved it, went unnamed
    import shutil

    root = tmp_path / "datasets"
    root.mkdir()
    shutil.copy(data.dataset_path("gpus.csv"), root)
    monkeypatch.setenv("CAPNB_DATASETS", str(root))
    assert float(data.load_gpus(["L4"]).usd_per_gpu_hour[0]) == 0.44
    said = re.escape(f"CAPNB_DATASETS={root} has no models ({root / 'models'}); copy")
    with pytest.raises(FileNotFoundError, match=f"^{said}"):
        data.load_model("Qwen3-8B")
    monkeypatch.delenv("CAPNB_DATASETS")
    assert data.load_model("Qwen3-8B").context_tokens == 40960

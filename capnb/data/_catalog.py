"""Bundled catalogs: GPU profiles and model configs (see ``datasets/README.md``)."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from .. import glossary
from ..errors import ConfigError, InputError, UnknownNameError
from ._files import (
    file_version,
    json_error_at,
    parse_json,
    read_csv_frame,
    read_text,
    user_path,
)
from .modelspec import ModelSpec, parse

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr

__all__ = [
    "dataset_path",
    "list_gpus",
    "list_models",
    "load_gpus",
    "load_model",
    "resolve_gpu",
    "resolve_model",
]

_GPU_NUMERIC = (
    "memory_bytes",
    "hbm_bandwidth",
    "dense_bf16_flops",
    "dense_fp8_flops",
    "interconnect_bandwidth",
    "usd_per_gpu_hour",
)
_GPU_TEXT = (
    "display_name",
    "interconnect",
    "price_source",
    "price_captured",
    "spec_source",
    "notes",
)
#: Columns outside the glossary: the memory the driver reports (``torch.cuda.mem_get_info`` total),
#: empty where no published figure was found (the memory step then falls back to ``memory_bytes``).
_GPU_REPORTED = ("memory_reported_bytes",)
_GPU_REPORTED_TEXT = ("memory_reported_source",)


def dataset_path(*parts: str) -> Path:
    """Return the path of a bundled data file (or of ``datasets/`` itself with no arguments).

    ``CAPNB_DATASETS`` overrides the location (useful to test a modified catalog).

    Examples
    --------
    >>> dataset_path("gpus.csv").name
    'gpus.csv'
    """
    override = os.environ.get("CAPNB_DATASETS")
    root = Path(override) if override else _bundled_root()
    path = root.joinpath(*parts)
    if not path.exists():
        what = "/".join(parts) or "datasets/"
        if override:  # the user's copy, not capnb's own data, lacks it
            raise FileNotFoundError(
                f"CAPNB_DATASETS={override} has no {what} ({path}); copy capnb's datasets/ "
                "folder whole and edit the copy, or unset CAPNB_DATASETS for the bundled data"
            )
        raise FileNotFoundError(f"capnb's bundled data has no {what} at {path}")
    return path


@functools.cache
def _bundled_root() -> Path:
    """The bundled ``datasets/`` (source checkout or installed wheel), whatever CAPNB_DATASETS says.

    Found once: it does not move while capnb runs, and every catalog lookup (a GPU's figures, a
    model's file, inside a sweep's loops) starts from it.
    """
    installed = resources.files("capnb") / "datasets"
    return Path(str(installed)) if installed.is_dir() else Path(__file__).parents[2] / "datasets"


def catalog_is_own() -> bool:
    """Whether CAPNB_DATASETS points at a catalog other than capnb's bundled one."""
    return dataset_path().resolve() != _bundled_root().resolve()


# -- GPUs ---------------------------------------------------------------------------------------
#: Range of each numeric catalog column: (unit, required, smallest, largest). A value outside is a
#: unit slip (a monthly price in the hourly column, GB for bytes, TFLOP/s for FLOP/s) in a catalog
#: a user copied and edited (``CAPNB_DATASETS``), and would plan with it: a negative price, a
#: negative monthly cost, a GPU of 96 bytes. ``smallest`` 0 means any figure above 0; the others
#: sit far below any GPU's (1 GiB of memory, 1 GB/s, 1 TFLOP/s) and above its figure in the
#: datasheet's unit.
_GPU_RANGES = {
    "memory_bytes": ("bytes", True, 2.0**30, 2.0**44),
    "hbm_bandwidth": ("bytes/s", True, 1e9, 1e15),
    "dense_bf16_flops": ("FLOP/s", True, 1e12, 1e18),
    "dense_fp8_flops": ("FLOP/s", False, 1e12, 1e18),
    "interconnect_bandwidth": ("bytes/s", False, 1e9, 1e15),
    # a GPU of your own may have no price yet: the capacity step names it unranked (docs/data.md)
    "usd_per_gpu_hour": ("USD per GPU-hour", False, 0.0, 1000.0),
    "memory_reported_bytes": ("bytes", False, 2.0**30, 2.0**44),
}


def _gpu_table():
    """The GPU catalog as ``gpus.csv`` is now: read again after an edit or a new CAPNB_DATASETS."""
    return _gpu_table_of(file_version(dataset_path("gpus.csv")))


@functools.lru_cache(maxsize=4)
def _gpu_table_of(version: tuple[str, int, int]):
    path = Path(version[0])
    try:
        table = read_csv_frame(
            path,
            dtype={"aliases": str},
            keep_default_na=False,
            na_values={c: [""] for c in (*_GPU_NUMERIC, *_GPU_REPORTED)},
        )
    except ConfigError:  # a value past the header's columns, its line named
        raise
    except (ValueError, OSError) as err:  # a number column holding text, bytes not UTF-8
        # (pandas' ParserError, for a row with an unquoted comma, ends in a newline)
        raise ConfigError(f"{path}: not a readable GPU catalog ({str(err).strip()})") from None
    _check_gpu_table(table, path)
    return table.set_index("gpu")


def _check_gpu_table(table, path) -> None:
    """Every GPU row has its figures in range; else a ConfigError naming the line and column."""
    import numpy as np
    import pandas as pd

    needed = ("gpu", "display_name", "aliases", *_GPU_TEXT[1:], *_GPU_RANGES, *_GPU_REPORTED_TEXT)
    missing = [c for c in needed if c not in table.columns]
    if missing:
        raise ConfigError(
            f"{path}: missing columns {missing} (datasets/README.md lists every column; a text "
            "column may be left empty)"
        )
    for column, (unit, required, smallest, largest) in _GPU_RANGES.items():
        raw = table[column]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        text = np.flatnonzero(raw.notna().to_numpy() & np.isnan(values))
        if text.size:  # a column of numbers holding words: pandas read it as text
            row = int(text[0])
            raise ConfigError(
                f"{path}, line {row + 2} ({table['gpu'].iloc[row]}): {column} = "
                f"{str(raw.iloc[row])!r}; expected a number of {unit}"
                + ("" if required else " (or empty)")
            )
        empty = np.flatnonzero(np.isnan(values)) if required else []
        if len(empty):  # a cell left empty is no figure: name the cell, not the NaN read from it
            row = int(empty[0])
            raise ConfigError(
                f"{path}, line {row + 2} ({table['gpu'].iloc[row]}): {column} is empty; every "
                f"GPU needs it, a number of {unit}"
            )
        bad = ~((values > 0) & (values >= smallest) & (values <= largest))
        if not required:
            bad &= ~np.isnan(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            low = (
                f"of at least {smallest:g} (a smaller figure is in the wrong unit)"
                if smallest and values[row] > 0
                else "> 0"
            )
            raise ConfigError(
                f"{path}, line {row + 2} ({table['gpu'].iloc[row]}): {column} = {float(values[row])!r}; "
                f"expected {unit} {low} and at most {largest:g}"
                + ("" if required else " (or empty)")
            )
    # a driver reports no more than the card holds (the bundled rows: 1-2 % less); a marketed
    # figure in decimal GB where the card holds GiB leaves the reported one up to 2**30 / 1e9 above
    marketed = pd.to_numeric(table["memory_bytes"]).to_numpy(dtype=float)
    reported = pd.to_numeric(table["memory_reported_bytes"]).to_numpy(dtype=float)
    above = np.flatnonzero(reported > marketed * 2.0**30 / 1e9)
    if above.size:
        row = int(above[0])
        raise ConfigError(
            f"{path}, line {row + 2} ({table['gpu'].iloc[row]}): memory_reported_bytes = "
            f"{reported[row]:g} is more than memory_bytes = {marketed[row]:g} "
            f"({reported[row] / marketed[row]:.2f}x); a driver reports no more memory than the "
            "card holds: one of the two is mistyped"
        )
    twice = table["gpu"][table["gpu"].duplicated()]
    if len(twice):
        raise ConfigError(f"{path}: gpu {twice.iloc[0]!r} is listed twice")
    _check_gpu_names(table, path)


def _check_gpu_names(table, path) -> None:
    """No display name or alias names two GPUs; else a ConfigError naming both lines.

    :func:`resolve_gpu` reads every name case-insensitively into one table, where a later row's
    id or alias that spells another GPU's id, display name or alias (in any case) would take that
    name over: a plan's ``gpus = ["B200"]`` would then be priced and sized as the row that took
    it, without a word.
    """
    owner: dict[str, tuple[str, int]] = {}
    for row, gpu in enumerate(table["gpu"]):
        first = owner.setdefault(str(gpu).strip().lower(), (gpu, row))
        if first[0] != gpu:  # ids differing in case only: names are read case-insensitively
            raise ConfigError(
                f"{path}, line {row + 2} ({gpu}): the id {gpu!r} names the same GPU as "
                f"{first[0]!r} (line {first[1] + 2}; names are read whatever their case): give "
                "the row an id of its own"
            )
    for column in ("display_name", "aliases"):
        if column not in table.columns:
            continue
        for row, (gpu, names) in enumerate(zip(table["gpu"], table[column], strict=True)):
            for name in str(names).split(";") if column == "aliases" else [str(names)]:
                first = owner.setdefault(name.strip().lower(), (gpu, row))
                if name.strip() and first[0] != gpu:
                    raise ConfigError(
                        f"{path}, line {row + 2} ({gpu}): the name {name.strip()!r} ({column}) "
                        f"already names {first[0]} (line {first[1] + 2}); a name must name one "
                        f"GPU: remove it from one of the two rows"
                    )


def _gpu_names() -> dict[str, str]:
    return _gpu_names_of(file_version(dataset_path("gpus.csv")))


@functools.lru_cache(maxsize=4)
def _gpu_names_of(version: tuple[str, int, int]) -> dict[str, str]:
    names: dict[str, str] = {}
    for gpu, row in _gpu_table_of(version).iterrows():
        for alias in [gpu, row["display_name"], *str(row["aliases"]).split(";")]:
            if alias.strip():
                names[alias.strip().lower()] = gpu
    return names


def list_gpus() -> list[str]:
    """Return the ids of the bundled GPU profiles, in catalog order."""
    return list(_gpu_table().index)


#: GPU makers whose Kubernetes device plugin capnb names, by the first word of ``display_name``.
GPU_MAKERS = ("AMD", "NVIDIA")


def gpu_maker(gpu: str) -> str:
    """The maker of a catalog GPU (``"AMD"``, ``"NVIDIA"``), ``""`` where not known.

    The first word of its ``display_name`` where it is one of :data:`GPU_MAKERS` (``"AMD
    Instinct MI300X"``: ``"AMD"``); ``""`` for a GPU not in the catalog or another maker's. The
    GPU is its id, display name or an alias, as :func:`resolve_gpu` reads them exactly.

    Examples
    --------
    >>> gpu_maker("MI300X"), gpu_maker("mi300x 192gb"), gpu_maker("H100-SXM"), gpu_maker("x")
    ('AMD', 'AMD', 'NVIDIA', '')
    """
    table = _gpu_table()
    gpu = _gpu_names().get(str(gpu).strip().lower(), "")
    if gpu not in table.index:
        return ""
    first = (str(table.loc[gpu, "display_name"]).split() or [""])[0].upper()
    return first if first in GPU_MAKERS else ""


def _squeezed(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _tokens(text: str) -> list[str]:
    return ["".join(ch for ch in word if ch.isalnum()) for word in re.split(r"[^0-9a-z]+", text.lower())
            if word]  # fmt: skip


def _names_the_same(name: str, alias: str) -> bool:
    """Whether ``name`` is ``alias`` written otherwise, or its first words (a family).

    The same letters and digits (``"H100SXM"``, ``"h100_sxm"``), or the alias's first words in
    full, the last of them possibly a leading part of a number (``"a100-80"`` of ``"a100-80gb"``).
    A word cut short is no match: ``"L40"`` is not the L40S, nor ``"H20"`` the H200, nor
    ``"MI300"`` (an APU in its A form) the MI300X: other GPUs.
    """
    if _squeezed(name) and _squeezed(name) == _squeezed(alias):
        return True
    words, full = _tokens(name), _tokens(alias)
    if not words or len(words) > len(full):
        return False
    *head, last = words
    if head != full[: len(head)]:
        return False
    target = full[len(head)]
    return last == target or (last.isdigit() and target.startswith(last))


def resolve_gpu(name: str) -> str:
    """Return the catalog id of a GPU given its id, display name or an alias (case-insensitive).

    A family name that fits several profiles (``"H100"``: SXM or PCIe; ``"A100"``: 40 or 80 GB) is
    an error naming them, never a silent pick.

    Raises
    ------
    UnknownNameError
        The name is not in the catalog; the message lists the closest ids.
    InputError
        The name fits more than one profile; the message lists them.

    Examples
    --------
    >>> resolve_gpu("h100 sxm")
    'H100-SXM'
    """
    gpu = _gpu_names().get(str(name).strip().lower())
    if gpu is not None:
        return gpu
    fitting = sorted(
        {gpu for alias, gpu in _gpu_names().items() if _names_the_same(str(name), alias)},
        key=list_gpus().index,
    )
    if len(fitting) > 1:
        raise InputError(
            f"GPU {name!r} fits {len(fitting)} catalog profiles ({', '.join(fitting)}); give one "
            "of these ids (memory, bandwidth and price differ between them)"
        )
    if len(fitting) == 1:
        return fitting[0]
    raise UnknownNameError(
        "GPU",
        name,
        list_gpus(),
        add="to add your own, copy capnb's datasets folder, add a row to its gpus.csv and set "
        "CAPNB_DATASETS to the copy (docs/data.md: 'Your own GPU')",
    )


def _gpu_columns() -> dict[str, dict[str, float]]:
    return _gpu_columns_of(file_version(dataset_path("gpus.csv")))


@functools.lru_cache(maxsize=4)
def _gpu_columns_of(version: tuple[str, int, int]) -> dict[str, dict[str, float]]:
    table = _gpu_table_of(version)
    return {
        c: dict(zip(table.index, table[c].to_numpy(dtype=float), strict=True))
        for c in (*_GPU_NUMERIC, *_GPU_REPORTED)
    }


def gpu_column(ids: list[str], column: str):
    """One numeric catalog column for GPU ids (already resolved), as a float64 numpy array.

    Returns
    -------
    numpy.ndarray
        The column's values in the catalog's units (``memory_bytes`` in bytes, ``hbm_bandwidth``
        in bytes/s, ``usd_per_gpu_hour`` in USD/hour: the glossary's names and units).
    """
    import numpy as np

    values = _gpu_columns()[column]
    return np.array([values[i] for i in ids], dtype=float)


#: How a plan's words give each catalog figure: (divisor, unit).
_FIGURE_WORDS = {
    "memory_bytes": (2.0**30, "GiB"),
    "memory_reported_bytes": (2.0**30, "GiB reported"),
    "hbm_bandwidth": (1e9, "GB/s"),
    "dense_bf16_flops": (1e12, "BF16 TFLOP/s"),
    "dense_fp8_flops": (1e12, "FP8 TFLOP/s"),
    "interconnect_bandwidth": (1e9, "GB/s link"),
    "usd_per_gpu_hour": (1.0, "USD per GPU-hour"),
}


def _figure(column: str, value: float) -> str:
    divisor, unit = _FIGURE_WORDS[column]
    return f"no {column}" if value != value else f"{value / divisor:,.6g} {unit}"


def _same(a: float, b: float) -> bool:
    return a == b or (a != a and b != b)  # two empty cells (NaN) are the same figure


def own_gpu_figures(ids: Iterable[str]) -> str:
    """Which of these GPUs' figures come from a catalog of the user's (CAPNB_DATASETS), in words.

    ``""`` on the bundled catalog. Otherwise the copy's path, each GPU the bundled catalog lacks
    with all its figures, and each figure of a bundled GPU the copy changed with the bundled one
    (``"H100-SXM (2.5 USD per GPU-hour where the bundled has 2.99 USD per GPU-hour)"``).
    """
    if not catalog_is_own():
        return ""
    mine = _gpu_table()
    bundled = _gpu_table_of(file_version(_bundled_root() / "gpus.csv"))
    said = []
    for gpu in ids:
        if gpu not in bundled.index:
            figures = [_figure(c, float(mine.at[gpu, c])) for c in _FIGURE_WORDS]
            said.append(f"{gpu} (a row the bundled catalog lacks: {', '.join(figures)})")
            continue
        changed = [
            f"{_figure(c, float(mine.at[gpu, c]))} where the bundled has "
            f"{_figure(c, float(bundled.at[gpu, c]))}"
            for c in _FIGURE_WORDS
            if not _same(float(mine.at[gpu, c]), float(bundled.at[gpu, c]))
        ]
        if changed:
            said.append(f"{gpu} ({', '.join(changed)})")
    return f"your catalog {dataset_path('gpus.csv')} (CAPNB_DATASETS): " + (
        ", ".join(said) if said else "the bundled figures for every GPU compared"
    )


def load_gpus(names: Iterable[str] | str | None = None) -> xr.Dataset:
    """Return GPU profiles as a Dataset over ``gpu`` (memory, bandwidth, FLOP/s, price, sources).

    Parameters
    ----------
    names
        GPU ids or aliases (default: the whole catalog). The ``gpu`` coordinate holds catalog ids.

    Examples
    --------
    >>> float(load_gpus(["H100-SXM"]).memory_bytes.sel(gpu="H100-SXM"))
    85899345920.0
    """
    import xarray as xr

    table = _gpu_table()
    if names is None:
        ids = list(table.index)
    else:
        names = [names] if isinstance(names, str) else list(names)
        if not names:
            raise InputError("gpus: give at least one GPU name")
        ids = [resolve_gpu(n) for n in names]
        if len(set(ids)) != len(ids):
            raise InputError(f"gpus: {names} names the same GPU twice")
    rows = table.loc[ids]
    data = {c: ("gpu", rows[c].to_numpy(dtype=float), glossary.attrs(c)) for c in _GPU_NUMERIC}
    data |= {
        c: ("gpu", rows[c].to_numpy(dtype=str), {"long_name": c.replace("_", " ")})
        for c in _GPU_TEXT
    }
    data["memory_reported_bytes"] = (
        "gpu",
        rows["memory_reported_bytes"].to_numpy(dtype=float),
        {
            "units": "bytes",
            "long_name": "GPU memory as the driver reports it (torch.cuda.mem_get_info total); "
            "NaN where no published figure was found",
        },
    )
    data["memory_reported_source"] = (
        "gpu",
        rows["memory_reported_source"].to_numpy(dtype=str),
        {"long_name": "memory reported source"},
    )
    return xr.Dataset(
        data,
        coords={"gpu": ("gpu", ids, glossary.attrs("gpu"))},
        attrs={"source": str(dataset_path("gpus.csv")), "see": "datasets/README.md"},
    )


# -- models -------------------------------------------------------------------------------------
def _model_files() -> dict[str, Path]:
    """The model catalog's files as the folder is now (a file added, a new CAPNB_DATASETS)."""
    return _model_files_of(file_version(dataset_path("models")))


@functools.lru_cache(maxsize=4)
def _model_files_of(version: tuple[str, int, int]) -> dict[str, Path]:
    return {p.stem: p for p in sorted(Path(version[0]).glob("*.json"))}


def list_models() -> list[str]:
    """Return the ids of the bundled model configs."""
    return list(_model_files())


def resolve_model(name: str) -> str:
    """Return the catalog id of a bundled model (case-insensitive)."""
    files = _model_files()
    by_lower = {k.lower(): k for k in files}
    model = by_lower.get(str(name).strip().lower())
    if model is None:
        raise UnknownNameError("model", name, files)
    return model


def _bundled_model(model_id: str) -> ModelSpec:
    """A catalog model as its file is now: read again after an edit."""
    return _bundled_model_of(model_id, file_version(_model_files()[model_id]))


@functools.lru_cache(maxsize=128)
def _bundled_model_of(model_id: str, version: tuple[str, int, int]) -> ModelSpec:
    path = Path(version[0])
    return parse(json.loads(path.read_text(encoding="utf-8")), name=model_id, source=str(path))


#: What to give capnb instead of a GGUF file.
_GGUF_REMEDY = (
    "not a Hugging Face config.json, which is what capnb reads a model from: give the config.json "
    "of the model it was converted from, with the GGUF's weight width written in its "
    'quantization_config ({"bits": 4} or {"bits": 8}; a k-quant such as Q4_K_M stores more '
    "bits a weight than its name says)"
)


def _is_gguf(path: Path) -> bool:
    """Whether ``path`` is a GGUF file: its suffix, or the magic bytes a GGUF file starts with."""
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False  # the reader names what is wrong with the file


#: A release name's instruction-tune mark after the base model's name (``Llama-3.1-8B-Instruct``,
#: ``Mixtral-8x7B-Instruct-v0.1``, ``Llama-2-7b-chat-hf``), and the ``Meta-`` of Meta's older ids.
_TUNE = re.compile(r"^(?:meta-)?(?P<base>.+?)-(?:instruct(?:-v\d+(?:\.\d+)*)?|chat(?:-hf)?)$")


def _hub_id_hint(model: str) -> str:
    """For an ``org/name`` Hugging Face id whose name is a catalog id: which id to pass.

    An instruction-tuned release of a catalog model (``meta-llama/Llama-3.1-8B-Instruct``) is
    named with its base, on the condition that its config.json has the base's architecture.
    """
    parts = model.split("/")
    if len(parts) != 2 or not all(parts) or parts[1].lower().endswith(".json"):
        return ""
    by_lower = {k.lower(): k for k in _model_files()}
    found = by_lower.get(parts[1].lower())
    if found is not None:
        return (
            f"; as a Hugging Face id it names the catalog's {found!r}: pass model={found!r} (or "
            "a folder holding the model's config.json)"
        )
    tune = _TUNE.match(parts[1].lower())
    base = by_lower.get(tune["base"]) if tune else None
    if base is None:
        return ""
    return (
        f"; as a Hugging Face id it names an instruction-tuned release of the catalog's {base!r}: "
        f"pass model={base!r} if its config.json has the same architecture, else a folder "
        "holding that config.json"
    )


def load_model(
    model: str | os.PathLike | Mapping | ModelSpec, *, name: str | None = None
) -> ModelSpec:
    """Return the :class:`~capnb.modelspec.ModelSpec` of a model.

    Parameters
    ----------
    model
        A bundled model id (``"Llama-3.1-70B"``), a path to a Hugging Face ``config.json`` or to a
        model folder holding one, a mapping holding such a config, or a ModelSpec (returned as is).
        A model read from a file is known by its name for the rest of the process, so a result
        that names it (``model="my-llm"``) can be read by the next step. A catalog id always
        means the bundled model: a file whose folder is named like one (``Llama-3.1-8B/``) but
        holds a different model is named by its full path instead (which later steps read again).
    name
        Name to give the model (default: the catalog id, the file's parent folder, or ``"custom"``).

    Raises
    ------
    UnknownNameError
        ``model`` is a string that is neither a bundled id nor an existing file.
    ConfigError
        The config lacks a field or has a bad one; the message names the field and the file.
    InputError
        ``name`` (or a mapping's ``_name_or_path``) is a catalog id but the config differs from
        the bundled model's: a later step given that name would read the catalog's.
    """
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, Mapping):
        spec = parse(
            model, name=name or str(model.get("_name_or_path") or "custom"), source="config"
        )
        _check_clash(spec, "the config given")
        return spec
    if not isinstance(model, str | os.PathLike):
        raise InputError(f"model must be a name, a path or a mapping, got {type(model).__name__}")
    path = user_path(model, "model")
    looks_like_path = path.suffix == ".json" or os.sep in str(model) or path.exists()
    if not looks_like_path:
        if str(model) in _LOADED and str(model).lower() not in {m.lower() for m in _model_files()}:
            spec = _LOADED[str(model)]  # a model this process read from a file, by its name
        else:
            spec = _bundled_model(resolve_model(str(model)))
        return spec if name in (None, spec.name) else dataclasses.replace(spec, name=name)
    if path.is_dir():  # a Hugging Face model folder: its config.json
        if not (path / "config.json").is_file():
            gguf = sorted(p.name for p in path.glob("*.gguf"))
            held = f" (it holds GGUF files, {gguf[0]!r} ...: {_GGUF_REMEDY})" if gguf else ""
            raise ConfigError(f"{path}: a model folder needs a config.json (none there){held}")
        path = path / "config.json"
    if not path.is_file():
        raise ConfigError(f"{path}: no such model config file{_hub_id_hint(str(model))}")
    if _is_gguf(path):
        raise ConfigError(f"{path}: a GGUF file (llama.cpp's weights), {_GGUF_REMEDY}")
    try:
        config = parse_json(read_text(path, "model config"), str(path))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({json_error_at(err)})") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid JSON (nested too deeply)") from None
    default_name = path.parent.name if path.name == "config.json" else path.stem
    config, legacy = _hf_quant_config(config, path)
    spec = parse(config, name=name or default_name, source=str(path))
    if legacy:
        spec = dataclasses.replace(spec, notes=(*spec.notes, legacy))
    if name is not None:
        _check_clash(spec, str(path))
    elif _clashing_id(spec) is not None:
        # a later step given the folder's name would read the catalog model: name it by its
        # path, which the next step reads again (folder for a config.json, else the file)
        where = (path.parent if path.name == "config.json" else path).absolute()
        spec = dataclasses.replace(
            spec,
            name=str(where),
            notes=(
                *spec.notes,
                f"named by its path: its name {default_name!r} is the bundled catalog model "
                f"{_clashing_id(spec)!r}, which has different figures",
            ),
        )
    _LOADED[spec.name] = spec  # later steps may name it: the plan's capacity step, a worksheet
    return spec


def _hf_quant_config(config: object, path: Path) -> tuple[object, str]:
    """A model folder's ``hf_quant_config.json`` as the quantization of a config.json without one.

    NVIDIA ModelOpt 0.29 and before wrote the quantization there (nvidia/Llama-3.1-70B-Instruct-FP8),
    and vLLM reads it when config.json has no ``quantization_config`` (``get_config``); read
    without it, such a checkpoint would be planned in its 16-bit ``torch_dtype``. Returns the
    config (with the file's contents as its ``quantization_config``) and a note ("" if unused).
    """
    legacy = path.parent / "hf_quant_config.json"
    if not isinstance(config, Mapping) or path.name != "config.json" or not legacy.is_file():
        return config, ""  # parse names a config that is not a JSON object
    text = config.get("text_config")
    if config.get("quantization_config") is not None or (
        isinstance(text, Mapping) and text.get("quantization_config") is not None
    ):
        return config, ""
    try:
        quant = json.loads(read_text(legacy, "quantization config"))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{legacy}: not valid JSON ({json_error_at(err)})") from None
    if not isinstance(quant, Mapping):
        raise ConfigError(f"{legacy}: a quantization config must be a JSON object")
    note = (
        f"quantization read from {legacy.name} beside config.json (which has no "
        "quantization_config), as vLLM reads a ModelOpt checkpoint's"
    )
    return {**config, "quantization_config": quant}, note


def _clashing_id(spec: ModelSpec) -> str | None:
    """The catalog id ``spec.name`` spells (any case) when its figures differ from that model's."""
    model_id = {m.lower(): m for m in _model_files()}.get(spec.name.strip().lower())
    if model_id is None:
        return None
    bundled = _bundled_model(model_id)
    same = dataclasses.replace(spec, name=bundled.name, source=bundled.source) == bundled
    return None if same else model_id


def _check_clash(spec: ModelSpec, where: str) -> None:
    model_id = _clashing_id(spec)
    if model_id is not None:
        raise InputError(
            f"model name {spec.name!r} is the bundled catalog model {model_id!r}, but {where} "
            "holds a different model (another dtype, quantization or shape); a later step given "
            "that name would read the catalog's: choose another name (load_model(..., name=...))"
        )


#: Models read from files in this process, by name, so that a step given the name finds them.
_LOADED: dict[str, ModelSpec] = {}

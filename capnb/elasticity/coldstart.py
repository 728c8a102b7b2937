"""Cold start: how long a new GPU instance takes from the scaling decision until it serves.

The article's third planning mistake is elastic scaling that ignores cold start: download the model,
load it to the GPU, warm it up - 40-150 s in all - so a burst inside that window breaches the SLA.
capnb estimates each stage from the model's weight bytes and a bandwidth, with defaults taken from
published figures (``DEFAULTS``; every one is a parameter)::

    cold_start = provisioning + weights / download_bandwidth
                 + weights / min(load_bandwidth, tensor_parallel x host_to_device_bandwidth)
                 + engine_init + warm_up

Sources of the defaults:

- ``download_bandwidth`` 10 GB / 30 s: the fast end of the article's "5-10 GB, about 30 s - 2 min".
- ``load_bandwidth``: Llama-2-70B's bf16 weights (137.95 GB) in 84 s, the load time ServerlessLLM
  (OSDI'24) measured with standard checkpoint loaders; its own loader is 3.6-8.2x faster (pass
  ``load_bandwidth=5e9`` for its 5 GB/s).
- ``host_to_device_bandwidth`` 32 GB/s per GPU: PCIe Gen4 x16 in one direction, the slowest host
  link of the catalog's GPUs. With standard loaders storage, not this link, sets the load time.
- ``engine_init_s`` 14 s: vLLM engine start-up for Llama-3-8B in its maintainers' logs (39 s with
  full torch.compile). That figure may already include reading the weights from a warm local disk,
  so the default errs long by a few seconds.
- ``warm_up_s`` 3 s: the middle of the article's 1-5 s warm-up inference.
- ``provisioning_s`` 0 s: an instance on an existing node. A new node adds minutes; BLIS
  (inference-sim) uses 240 +/- 30 s from Kubernetes node to serving.

With these defaults the 7-13 B models land inside the article's 40-150 s on every catalog GPU
(Llama-3.1-8B: 75 s). Pass ``weights_cached=True`` when the weights are already on the node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import xarray as xr

from .. import _validate, glossary, words
from ..data import list_gpus, load_gpus, load_model
from ..errors import InputError
from ..units import in_unit

__all__ = [
    "ARTICLE_RANGE_S",
    "DEFAULTS",
    "ColdStartSettings",
    "describe",
    "estimate",
    "in_whole_steps",
]

#: The article's total cold start for mid-size models (s).
ARTICLE_RANGE_S = (40.0, 150.0)

_LLAMA2_70B_BF16_BYTES = 137_953_296_384  # capnb.data.load_model("Llama-2-70B").weight_bytes()
_SERVERLESSLLM_STANDARD_LOAD_S = 84.0


@dataclass(frozen=True)
class ColdStartSettings:
    """The stages of a cold start. Bandwidths in bytes/s, times in s.

    Attributes
    ----------
    provisioning_s
        Node or image provisioning before the model can be fetched (0: the node exists).
    download_bandwidth
        Fetching the weights from the model registry or object store.
    load_bandwidth
        Reading the weights from local storage into GPU memory, whole node.
    host_to_device_bandwidth
        Host-to-GPU link of one GPU; ``tensor_parallel`` GPUs load their shards side by side.
    engine_init_s
        Serving engine start-up: process, CUDA context, memory profiling, graph capture.
    warm_up_s
        First inferences before the instance takes traffic.
    weights_cached
        The weights are already on the node: no download.
    """

    provisioning_s: float = 0.0
    download_bandwidth: float = 10e9 / 30.0
    load_bandwidth: float = _LLAMA2_70B_BF16_BYTES / _SERVERLESSLLM_STANDARD_LOAD_S
    host_to_device_bandwidth: float = 32e9
    engine_init_s: float = 14.0
    warm_up_s: float = 3.0
    weights_cached: bool = False

    def validated(self) -> ColdStartSettings:
        """These settings in s and bytes/s, checked field by field (an error names the field).

        A field given with its unit (``"1 min"``, ``"3e9 B/s"``) is converted as a declared-unit
        argument is (:mod:`capnb.units`); the record returned holds the plain numbers.
        """
        settings = replace(self, **{n: in_unit(getattr(self, n), u, n) for n, u in _UNITS.items()})
        for name in ("provisioning_s", "engine_init_s", "warm_up_s"):
            _validate.fraction(getattr(settings, name), name, high=float("inf"))
        for name in ("download_bandwidth", "load_bandwidth", "host_to_device_bandwidth"):
            _validate.fraction(getattr(settings, name), name, high=float("inf"), low_open=True)
        if not isinstance(settings.weights_cached, bool):
            raise InputError(f"weights_cached must be True or False, got {self.weights_cached!r}")
        return settings


#: The unit each cold-start setting is read in.
_UNITS = {
    "provisioning_s": "s", "engine_init_s": "s", "warm_up_s": "s", "download_bandwidth": "bytes/s",
    "load_bandwidth": "bytes/s", "host_to_device_bandwidth": "bytes/s",
}  # fmt: skip


#: capnb's defaults (see the module docstring for their sources).
DEFAULTS = ColdStartSettings()


def _tensor_parallel(models: list, gpus: list[str], tensor_parallel, weight_dtype) -> np.ndarray:
    """GPUs per instance over (model, gpu): the degree given, or the smallest that holds the model."""
    from .. import memory

    tp = (
        1 if tensor_parallel is None else _validate.positive_int(tensor_parallel, "tensor_parallel")
    )
    for spec in models:  # as the memory step refuses it: a group that cannot shard the model
        reason = spec.valid_tensor_parallel(tp)
        if reason:
            raise InputError(f"tensor_parallel: {reason}")
    fit = memory.max_concurrency(
        model=models, gpu=gpus, tensor_parallel=[tp], seq_len=[1], weight_dtype=weight_dtype
    )
    if tensor_parallel is not None:  # an instance that cannot hold the model never starts
        held = fit.max_concurrency.isel(tensor_parallel=0, seq_len=0).transpose("model", "gpu")
        if (held.values == 0).any():
            i, j = np.argwhere(held.values == 0)[0]
            per_gpu = float(fit.weights_bytes.isel(model=i, tensor_parallel=0))
            raise InputError(
                f"tensor_parallel={tp}: {fit.model.values[i]} needs {per_gpu / 1e9:.0f} GB of "
                f"weights per GPU, and one {gpus[j]} has "
                f"{float(fit.usable_bytes.isel(gpu=j)) / 1e9:.0f} GB usable, so the instance holds "
                f"no request (memory limit: "
                f"{fit.limit_reason.isel(tensor_parallel=0, seq_len=0).values[i, j]}); "
                "give a larger tensor_parallel or a smaller weight_dtype"
            )
        return np.full((len(models), len(gpus)), tp, dtype=np.int64)
    smallest = fit.min_tensor_parallel.isel(seq_len=0).transpose("model", "gpu").values
    if (smallest == 0).any():
        i, j = np.argwhere(smallest == 0)[0]
        raise InputError(
            f"model {fit.model.values[i]} does not fit on any tensor-parallel group of up to 64 "
            f"x {gpus[j]}; give tensor_parallel= explicitly"
        )
    return smallest


def estimate(
    model: str | Sequence[str] = "Llama-3.1-8B",
    gpu: str | Sequence[str] | None = None,
    *,
    tensor_parallel: int | None = None,
    weight_dtype: str | None = None,
    settings: ColdStartSettings = DEFAULTS,
    **overrides: float,
) -> xr.Dataset:
    """Cold start of one instance per (model, gpu), by stage.

    Parameters
    ----------
    model
        Catalog ids, ``config.json`` paths or ModelSpecs (``capnb.data.list_models()``).
    gpu
        Catalog GPU ids (default: every catalog GPU).
    tensor_parallel
        GPUs per instance. Default: the smallest degree whose weights (in ``weight_dtype``) fit
        (:func:`capnb.memory.max_concurrency`'s ``min_tensor_parallel``).
    weight_dtype
        Override the config's weight dtype (``"fp8"`` halves the bytes to move).
    settings, **overrides
        The stages (:class:`ColdStartSettings`); keyword overrides replace single fields, e.g.
        ``provisioning_s=240``.

    Returns
    -------
    xarray.Dataset
        Over (model, gpu): ``model_bytes`` (whole model), ``tensor_parallel`` (GPUs),
        ``provisioning_s``, ``download_s``, ``load_s``, ``engine_init_s``, ``warm_up_s`` and their
        sum ``cold_start_s`` (s). The settings are in attrs.

    Examples
    --------
    >>> ds = estimate("Llama-2-70B", "H100-SXM")
    >>> round(float(ds.load_s.item()))
    84
    >>> round(float(estimate("Llama-3.1-8B", "H100-SXM").cold_start_s.item()))
    75
    """
    unknown = set(overrides) - set(asdict(settings))
    if unknown:
        raise InputError(
            f"estimate: unknown setting(s) {sorted(unknown)}; known: {sorted(asdict(settings))}"
        )
    settings = replace(settings, **overrides).validated()
    models = [model] if isinstance(model, str) or not isinstance(model, Sequence) else list(model)
    specs = [load_model(m) for m in _validate.names(models, "model")]
    gpu_ids = [str(g) for g in load_gpus(list_gpus() if gpu is None else gpu).gpu.values]
    weights = np.array([s.weight_bytes(weight_dtype) for s in specs])[:, None]
    tp = _tensor_parallel(specs, gpu_ids, tensor_parallel, weight_dtype)

    download = np.zeros_like(weights) if settings.weights_cached else weights
    link = np.minimum(settings.load_bandwidth, tp * settings.host_to_device_bandwidth)
    with np.errstate(over="ignore"):  # a stage that never ends is named by _check_finite
        download = download / settings.download_bandwidth
        load = weights / link
    shape = tp.shape

    def stage(name, values):
        return (
            ("model", "gpu"),
            np.broadcast_to(values, shape).astype(float),
            glossary.attrs(name),
        )

    parts = {
        "provisioning_s": stage("provisioning_s", settings.provisioning_s),
        "download_s": stage("download_s", download),
        "load_s": stage("load_s", load),
        "engine_init_s": stage("engine_init_s", settings.engine_init_s),
        "warm_up_s": stage("warm_up_s", settings.warm_up_s),
    }
    _check_finite(parts, specs, gpu_ids, settings)
    total = sum(np.asarray(p[1]) for p in parts.values())
    return xr.Dataset(
        {
            "model_bytes": stage("model_bytes", weights),
            "tensor_parallel": (("model", "gpu"), tp, glossary.attrs("tensor_parallel")),
            **parts,
            "cold_start_s": (("model", "gpu"), total, glossary.attrs("cold_start_s")),
        },
        coords={
            "model": ("model", [s.name for s in specs], glossary.attrs("model")),
            "gpu": ("gpu", gpu_ids, glossary.attrs("gpu")),
        },
        attrs={
            "title": "capnb cold start estimate",
            **{k: (str(v) if isinstance(v, bool) else v) for k, v in asdict(settings).items()},
            "article_range_s": list(ARTICLE_RANGE_S),
        },
    )


#: The setting behind each stage, named when the stage does not end.
_STAGE_SETTINGS = {"download_s": "download_bandwidth", "load_s": "load_bandwidth"}


def _check_finite(parts: dict, specs: list, gpu_ids: list[str], settings) -> None:
    """Every stage of every cold start ends (a bandwidth of 1e-300 bytes/s took inf s)."""
    for name, (_, values, _) in parts.items():
        bad = np.argwhere(~np.isfinite(values))
        if bad.size:
            i, j = bad[0]
            setting = _STAGE_SETTINGS.get(name, name)
            unit = " bytes/s" if setting.endswith("bandwidth") else " s"
            raise InputError(
                f"{name} is {values[i, j]} s for {specs[i].name} on {gpu_ids[j]} ({setting}="
                f"{getattr(settings, setting):g}{unit}): a cold start is a finite number of seconds"
            )


def in_whole_steps(cold_start_s: float, step_s: float | None) -> float:
    """A cold start (s) as a plan replays it: rounded up to whole simulation steps of ``step_s`` (s).

    The simulator counts a cold start in whole steps, so a plan replays ``ceil(cold / step)`` steps
    (252.19 s in 1 s steps: 253 s); ``step_s`` None or 0 gives the cold start as it is.

    Examples
    --------
    >>> in_whole_steps(252.19, 1.0)
    253.0
    """
    if not step_s:
        return float(cold_start_s)
    return float(math.ceil(cold_start_s / step_s) * step_s)


def describe(result: xr.Dataset, **selection: object) -> str:
    """One (model, gpu) cell of :func:`estimate` in a sentence.

    Examples
    --------
    >>> describe(estimate("Llama-3.1-8B", "H100-SXM"))  # doctest: +ELLIPSIS
    "Llama-3.1-8B on 1 x H100-SXM starts in 75 s: 48 s download, 9.8 s load, 14 s engine..."
    """
    model = selection.get("model")
    if isinstance(model, str) and "model" in result.coords and model not in result.model:
        selection["model"] = load_model(model).name  # a config.json path: its model's name
    cell = result.sel(selection) if selection else result
    cell = cell.squeeze([d for d in ("model", "gpu") if d in cell.dims and cell.sizes[d] == 1])
    for dim in ("model", "gpu"):
        if dim in cell.dims:
            raise InputError(f"describe: choose one {dim} (it has {cell.sizes[dim]} values)")
    low, high = ARTICLE_RANGE_S
    total = float(cell.cold_start_s)
    where = "inside" if low <= total <= high else ("below" if total < low else "above")
    provisioning = float(cell.provisioning_s)
    lead = f"{words.in_seconds(provisioning)} provisioning, " if provisioning else ""
    stages = (cell.download_s, cell.load_s, cell.engine_init_s, cell.warm_up_s)
    download, load, init, warm_up = (words.in_seconds(stage) for stage in stages)
    return (
        f"{cell.model.item()} on {int(cell.tensor_parallel)} x {cell.gpu.item()} starts in "
        f"{words.in_seconds(total)}: {lead}{download} download, {load} load, {init} engine "
        f"start-up and {warm_up} warm-up ({where} the article's {low:.0f}-{high:.0f} s)."
    )

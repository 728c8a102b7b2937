"""The plan's inputs: one flat, validated record, read from and written to TOML or YAML files."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..data import write_atomic
from ..errors import ConfigError

#: Which table of a config file each field lives in (files group them; the record is flat).
SECTIONS = {
    "traffic": (
        "trace",
        "interval",
        "slots",
        "traffic_quantile",
        "demand_scale",
        "bursts",
        "exceed_probability",
        "trials",
        "seed",
    ),
    "serving": ("model", "gpus", "tensor_parallel", "latency", "workload", "accounting"),
    "sla": ("sla_metric", "sla_quantile", "sla_s"),
    "elasticity": (
        "policies",
        "scale_up_threshold",
        "cooldown_s",
        "buffer_instances",
        "step_s",
        "cold_start_s",
        "tolerance_s",
        "breach_budget",
    ),
}


@dataclass(frozen=True)
class PlanConfig:
    """Everything a plan needs, with the bundled defaults.

    Traffic
        ``trace`` a bundled trace or rate series name (``capnb.data.list_traces()``,
        ``list_rate_series()``) or a path; ``interval`` of the forecast series; ``slots``
        (``hour_of_day`` / ``hour_of_week``); ``traffic_quantile`` the plan's quantile;
        ``demand_scale`` multiplies the traffic (growth, or a smaller service); ``bursts``
        ``"article"`` (1-2 a month, 1-2 h, 3-5x), ``"fit"`` (detected in the trace) or ``"none"``;
        ``exceed_probability`` for the burst buffer; Monte Carlo ``trials`` and ``seed``.
    Serving
        ``model`` (id or config path); candidate ``gpus`` and ``tensor_parallel`` degrees;
        ``latency`` ``"model"`` (the calibrated analytic model) or a bundled measured curve name;
        ``workload`` the trace whose prompt/output lengths the model prices; memory ``accounting``.
    SLA
        ``sla_metric`` (ttft, tpot, itl, e2e), ``sla_quantile``, ``sla_s`` seconds.
    Elasticity
        ``policies`` and the swept ``scale_up_threshold``, ``cooldown_s``, ``buffer_instances``;
        ``step_s`` of the simulation; ``cold_start_s`` (``"estimate"`` or seconds);
        ``tolerance_s`` the latency budget of scaling decisions; ``breach_budget`` the share of
        time in SLA breach accepted.
    """

    trace: str = "servegen-m-large"
    interval: str = "10min"
    slots: str = "hour_of_day"
    traffic_quantile: float = 0.99
    demand_scale: float = 1.0
    bursts: str = "article"
    exceed_probability: float = 0.05
    trials: int = 2000
    seed: int = 0
    model: str = "Llama-3.1-8B"
    gpus: tuple[str, ...] = ("L4", "L40S", "A100-80GB", "H100-SXM", "H200", "B200")
    tensor_parallel: tuple[int, ...] = (1, 2, 4)
    latency: str = "model"
    workload: str = "azure-conv-2023"
    accounting: str = "article"
    sla_metric: str = "tpot"
    sla_quantile: float = 0.99
    sla_s: float = 0.05
    policies: tuple[str, ...] = ("article", "hpa", "knative", "fixed", "fixed_elastic")
    scale_up_threshold: tuple[float, ...] = (0.6, 0.7, 0.8)
    cooldown_s: tuple[float, ...] = (300.0, 900.0, 1800.0)
    buffer_instances: tuple[int, ...] = (0, 2)
    step_s: float = 1.0
    cold_start_s: float | str = "estimate"
    tolerance_s: float = 60.0
    breach_budget: float = 0.001
    source: str = field(default="defaults", compare=False)

    def replace(self, **changes: object) -> PlanConfig:
        """A copy with some fields changed (unknown names are an error naming them)."""
        return from_mapping({**self.as_dict(), **changes}, source=self.source)

    def as_dict(self) -> dict[str, object]:
        """The fields as plain Python values (lists for tuples), without ``source``."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "source"}


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


_TUPLES = {f.name for f in fields(PlanConfig) if str(f.type).startswith("tuple")}
_KNOWN = {f.name for f in fields(PlanConfig)} - {"source"}


def from_mapping(values: dict, *, source: str = "config") -> PlanConfig:
    """A :class:`PlanConfig` from a flat or sectioned mapping; unknown keys name themselves."""
    flat: dict[str, object] = {}
    for key, value in values.items():
        if key in SECTIONS and isinstance(value, dict):
            for inner, item in value.items():
                if inner not in SECTIONS[key]:
                    raise ConfigError(
                        f"{source}: [{key}] has no setting {inner!r}; "
                        f"known: {', '.join(SECTIONS[key])}"
                    )
                flat[inner] = item
        elif key in _KNOWN:
            flat[key] = value
        else:
            raise ConfigError(
                f"{source}: unknown setting {key!r}; known: {', '.join(sorted(_KNOWN))}"
            )
    for key in _TUPLES & set(flat):
        item = flat[key]
        flat[key] = tuple(item) if isinstance(item, list | tuple) else (item,)
    try:
        return PlanConfig(**flat, source=source)
    except TypeError as error:  # pragma: no cover - every key was checked above
        raise ConfigError(f"{source}: {error}") from None


def load_config(path: str | os.PathLike) -> PlanConfig:
    """Read a plan config from a ``.toml`` or ``.yaml``/``.yml`` file.

    Raises
    ------
    ConfigError
        The file is missing, not valid TOML/YAML, or has an unknown setting (named in the message).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such plan config file")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        try:
            values = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML ({error})") from None
    elif path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            values = yaml.safe_load(text) or {}
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: not valid YAML ({error})") from None
    else:
        raise ConfigError(f"{path}: a plan config is a .toml, .yaml or .yml file")
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: a plan config is a mapping of settings")
    return from_mapping(values, source=str(path))


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


def save_config(config: PlanConfig, path: str | os.PathLike) -> Path:
    """Write a plan config as TOML (atomically), one table per section; return the path."""
    path = Path(path)
    if path.suffix != ".toml":
        raise ConfigError(f"{path}: capnb writes plan configs as .toml")
    values = config.as_dict()
    lines = ["# capnb plan config (see capnb.plan.PlanConfig for every setting)"]
    for section, names in SECTIONS.items():
        lines += ["", f"[{section}]"] + [f"{name} = {_toml_value(values[name])}" for name in names]
    write_atomic(path, "\n".join(lines) + "\n")
    return path


# every field is in exactly one section, so a saved file loads back to the same record
assert sorted(n for names in SECTIONS.values() for n in names) == sorted(_KNOWN)

"""The plan's inputs: one typed, validated record per table of a TOML or YAML config file.

A config file's tables (``[traffic]``, ``[serving]``, ``[sla]``, ``[elasticity]``, ``[fleet]``)
are the records :class:`PlanConfig` holds, named as the tables are: a file's ``[serving] model``
is ``cfg.serving.model``. Each record is a pydantic dataclass: every field has its type, range,
unit and meaning in one place, and is checked where it enters, whether from a file, a mapping,
keyword overrides or the command line. pydantic because its dataclasses keep the plain dataclass
API (``fields``, frozen records, ``Serving(...)`` validates on construction) while each error
carries the field, the rule it broke and the value, which is what a message naming the field
needs. TOML is written by tomlkit, which keeps comments, so ``capnb config`` writes a file that
documents every field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import ConfigDict, Field, field_validator, model_validator

from ..data import write_atomic
from ..errors import CapnbError, ConfigError
from ..records import SLA
from ..units import in_unit

__all__ = [
    "SECTIONS",
    "TABLES",
    "Elasticity",
    "Fleet",
    "PlanConfig",
    "Serving",
    "Traffic",
    "from_mapping",
    "load_config",
    "save_config",
    "trace_options",
    "workload_options",
]

#: Sections that are one record each: the table's keys are the record's fields.
RECORDS = {"sla": SLA}

#: Settings of earlier releases, each with what replaced it (one name per quantity).
RETIRED = {
    "sla_s": "the SLA is a table of bounds: [sla] tpot_s = 0.05 (ttft_s, tpot_s, itl_s, e2e_s)",
    "sla_metric": "name the metric in the bound's key: [sla] ttft_s, tpot_s, itl_s or e2e_s",
    "sla_quantile": "[sla] quantile = 0.99",
    "disaggregation_sla_s": (
        "the prefill/decode comparison bounds TTFT and TPOT with the SLA's own ttft_s and tpot_s"
    ),
}

#: Fields that may name a file: relative paths in a config file are read from the file's folder.
PATH_FIELDS = ("trace", "model", "latency", "workload", "calibration_runs")


def _doc(meaning: str, unit: str = "") -> Any:
    return Field(description=meaning, json_schema_extra={"unit": unit})


Share = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Policy = Literal["article", "hpa", "knative", "fixed", "fixed_elastic", "predictive"]
#: A name or a path: at most 4,096 characters (PATH_MAX on Linux).
Name = Annotated[str, Field(min_length=1, max_length=4096)]
#: Upper bounds of the sizes and durations a config sets: a value beyond them is a typo or a unit
#: slip (a month typed in seconds as milliseconds), and would run out of memory or time.
DAY_S = 86_400.0
#: Seconds: an SLA, a response tolerance, a cold start of at most a day; a cooldown of a week.
Seconds = Annotated[float, Field(ge=0, le=DAY_S, allow_inf_nan=False)]
#: Most values one swept setting may list, and most cells the policy grid may hold.
MAX_VALUES = 64
MAX_GRID_CELLS = 2_000


_RECORD = {
    "frozen": True,
    "config": ConfigDict(extra="forbid", strict=True, validate_default=False),
}


@pydantic.dataclasses.dataclass(**_RECORD)
class _Table:
    """What every table's record checks: names and paths hold no control character."""

    @field_validator("*", mode="before")
    @classmethod
    def _printable(cls, value: object) -> object:
        """Names and paths hold no control character (a NUL byte a TOML string escaped)."""
        for text in value if isinstance(value, list | tuple) else (value,):
            if isinstance(text, str):
                at = next((i for i, ch in enumerate(text) if ord(ch) < 32 or ord(ch) == 127), None)
                if at is not None:
                    raise ValueError(
                        f"holds the control character {text[at]!r} at position {at}; names and "
                        "paths are printable text"
                    )
        return value


def _distinct(values: tuple) -> tuple:
    """A swept setting lists each value once (a GPU listed twice failed the memory step)."""
    twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if twice is not None:
        raise ValueError(f"lists {twice!r} twice; list each value once")
    return values


def _one_or_many(value: object) -> object:
    """A list (as TOML, YAML and JSON write them) or one value stands for a tuple."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return (value,)
    return value


@pydantic.dataclasses.dataclass(**_RECORD)
class Traffic(_Table):
    """The ``[traffic]`` table: the trace, its forecast and the bursts' Monte Carlo months.

    ``trace`` a bundled trace or rate series name (``capnb.data.list_traces()``,
    ``list_rate_series()``) or a path to a request log (CSV, Parquet, JSON lines) or a rate
    series; ``trace_kind`` ``"auto"`` (read from its columns), ``"requests"`` or ``"rates"``;
    ``start`` the date and time its clock starts, for times counted from an unknown start;
    ``time_column``, ``time_unit`` and ``timezone`` as the trace loaders take them
    (:func:`capnb.data.load_trace`), for files whose times capnb cannot read alone, and
    ``prompt_column`` / ``output_column`` for token columns of names it does not know,
    ``rate_column`` (requests/s) / ``count_column`` (requests per window) for a rate series' value
    column of a name it does not know (a Grafana or Datadog export's query), ``running_total``
    whether that column is a running total (:func:`capnb.data.load_rate_series`);
    ``interval`` of the forecast series; ``slots`` (``hour_of_day`` / ``hour_of_week``);
    ``traffic_quantile`` the plan's quantile; ``demand_scale`` multiplies the traffic (growth,
    or a smaller service); ``growth_model`` ``"auto"`` (the forecast chosen by rolling
    origins inside the history, :func:`capnb.forecast.select`), a candidate by name,
    ``"probabilistic"`` (the log-linear trend with its prediction band) or ``"none"`` (the
    history's own quantiles); ``bursts`` ``"article"`` (1-2 a month, 1-2 h, 3-5x), ``"fit"``
    (detected in the trace) or ``"none"``; ``exceed_probability`` for the burst buffer; Monte
    Carlo ``trials`` and ``seed``.
    """

    trace: Annotated[Name, _doc("bundled trace or rate series name, or a file path")] = (
        "servegen-m-large"
    )
    trace_kind: Annotated[
        Literal["auto", "requests", "rates"],
        _doc(
            "auto: read from the file's columns; requests: one row per request; rates: requests/s"
        ),
    ] = "auto"
    start: Annotated[
        Name | None,
        _doc("date and time the trace's clock starts, for times counted from an unknown start"),
    ] = None
    time_column: Annotated[
        Name | None, _doc("the trace file's time column, when capnb cannot tell which it is")
    ] = None
    prompt_column: Annotated[
        Name | None, _doc("a request log's prompt-token column, when its name is not a common one")
    ] = None
    output_column: Annotated[
        Name | None, _doc("a request log's output-token column, when its name is not a common one")
    ] = None
    rate_column: Annotated[
        Name | None, _doc("a rate series' requests/s column, when its name is not a common one")
    ] = None
    count_column: Annotated[
        Name | None,
        _doc("a rate series' requests-per-window column, when its name is not a common one"),
    ] = None
    running_total: Annotated[
        bool | None,
        _doc(
            "whether a rate series' count column is a running total (a Prometheus counter): "
            "true reads each window's increase; false reads the values as given (a service "
            "ramping up); unset refuses a column that rises at nearly every step"
        ),
    ] = None
    time_unit: Annotated[
        Literal["s", "ms", "us", "ns"] | None,
        _doc(
            "what a numeric time column counts (the trace's and a workload file's): since the "
            "epoch, or since start"
        ),
    ] = None
    timezone: Annotated[
        str | None,
        _doc(
            "the clock of times without an offset, or of times whose offsets change (a zone name)"
        ),
    ] = None
    interval: Annotated[Name, _doc("window of the forecast series (e.g. 10min, 1h)")] = "10min"
    slots: Annotated[
        Literal["hour_of_day", "hour_of_week"], _doc("seasonal slots of the forecast")
    ] = "hour_of_day"
    traffic_quantile: Annotated[Share, _doc("quantile of the request rate the plan serves")] = 0.99
    demand_scale: Annotated[
        Positive, Field(le=1e6), _doc("multiplies every request rate of the trace")
    ] = 1.0
    growth_model: Annotated[
        Literal[
            "auto",
            "seasonal_naive_day",
            "seasonal_naive_week",
            "last_week",
            "damped_trend",
            "probabilistic",
            "none",
        ],
        _doc(
            "auto: the forecast chosen by rolling origins inside the history (calibrated on its "
            "held-out errors); a candidate by name; probabilistic: the log-linear trend with its "
            "band; none: the history's own quantiles"
        ),
    ] = "auto"
    bursts: Annotated[
        Literal["article", "fit", "none"],
        _doc("burst model: the article's (1-2 a month, 1-2 h, 3-5x), fitted to the trace, or none"),
    ] = "article"
    exceed_probability: Annotated[
        Share, _doc("monthly probability that demand may exceed the buffered capacity")
    ] = 0.05
    trials: Annotated[int, Field(ge=1, le=1_000_000), _doc("Monte Carlo months")] = 2000
    seed: Annotated[int, Field(ge=0, lt=2**64), _doc("Monte Carlo seed")] = 0

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: str) -> str:
        """A duration that divides an hour, the length of the forecast's slots."""
        from ..data._series import interval_ns

        try:
            ns = interval_ns(value, "interval")
        except CapnbError as error:
            raise ValueError(str(error).removeprefix(f"interval={value!r} ")) from None
        if (3600 * 10**9) % ns:
            raise ValueError(
                "does not divide an hour, the length of the forecast's slots; use e.g. '10min', "
                "'15min' or '1h'"
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        """An IANA time zone name."""
        from ..data._times import resolve_timezone

        try:
            return resolve_timezone(value)
        except CapnbError as error:
            raise ValueError(str(error).removeprefix(f"timezone={value!r} ")) from None


@pydantic.dataclasses.dataclass(**_RECORD)
class Serving(_Table):
    """The ``[serving]`` table: the model, the candidate GPUs and degrees, and how latency is priced.

    ``model`` (catalog id, a ``config.json`` path or a Hugging Face model folder); candidate
    ``gpus`` and ``tensor_parallel`` degrees; ``latency`` ``"auto"`` (the default: each SLA
    bound on the model whose held-out error is lower for its metric), ``"model"`` (the calibrated
    analytic model), ``"engine"`` (the calibrated serving-engine simulation, one curve per GPU
    and degree), a bundled measured curve name or a path to measured latency files (``vllm bench
    serve`` JSON, AIPerf / GenAI-Perf CSV, a table); ``engine`` the serving engine the engine
    model simulates (``"vllm-v1"``, ``"sglang"``, ... : its scheduling defaults, its fitted
    overheads, its serve commands); ``prefix_cache_share`` the share of each
    instance's KV budget held by a prefix cache, its hit rate replayed from the trace's block
    hashes (``latency = "engine"`` only); ``disaggregation`` ``"compare"`` sizes prefill and
    decode pools on the chosen GPU against the aggregated fleet (the engine model), under the
    SLA's TTFT and TPOT bounds (both needed); ``workload`` the trace whose prompt/output lengths
    the model prices (``"trace"``: the plan's own trace; ``"auto"``: the trace's when it has
    token columns, else the Azure conversation trace); memory ``accounting``;
    ``calibration_runs`` your own benchmark runs of a server of ``engine`` (``vllm bench
    serve`` or SGLang ``bench_serving`` result files, GuideLLM reports: two or three rates or
    concurrencies; runs whose ``backend`` names another engine than ``engine`` are refused) of
    one GPU (``calibration_gpu``, default the plan's only GPU) at ``calibration_tensor_parallel``
    GPUs, which calibrate the engine model (:func:`capnb.latency.calibrate`) for that GPU at
    every degree (``latency = "engine"`` or ``"auto"``; its answers banded by the own-run
    held-out error).
    """

    model: Annotated[Name, _doc("model catalog id, config.json path or Hugging Face folder")] = (
        "Llama-3.1-8B"
    )
    gpus: Annotated[
        tuple[Name, ...],
        Field(min_length=1, max_length=MAX_VALUES),
        _doc("candidate GPU catalog ids"),
    ] = (
        "L4",
        "L40S",
        "A100-80GB",
        "H100-SXM",
        "H200",
        "B200",
    )
    tensor_parallel: Annotated[
        tuple[Annotated[int, Field(ge=1, le=64)], ...],
        Field(min_length=1, max_length=MAX_VALUES),
        _doc("candidate tensor-parallel degrees", "GPUs"),
    ] = (1, 2, 4)
    latency: Annotated[
        Name,
        _doc(
            "'model' (calibrated analytic model), 'engine' (the serving-engine simulation), "
            "'auto' (each SLA bound on the model whose held-out error is lower for its metric), "
            "a bundled curve name or latency files"
        ),
    ] = "auto"
    engine: Annotated[
        Name,
        _doc(
            "the serving engine the engine model simulates, with its scheduling defaults and "
            "fitted overheads: vllm-v1 (vLLM 0.8 and later), vllm-v0, sglang, trtllm, tgi, or a "
            "name of one ('vLLM', 'SGLang', 'TensorRT-LLM')"
        ),
    ] = "vllm-v1"
    prefix_cache_share: Annotated[
        float,
        Field(ge=0, lt=1, allow_inf_nan=False),
        _doc(
            "share of each instance's KV budget held by a prefix cache (latency = 'engine' and a "
            "trace with block hashes)"
        ),
    ] = 0.0
    disaggregation: Annotated[
        Literal["compare", "none"],
        _doc("compare aggregated with disaggregated prefill/decode serving on the chosen GPU"),
    ] = "compare"
    workload: Annotated[
        Name, _doc("prompt/output lengths: 'auto', 'trace', a bundled trace name or a path")
    ] = "auto"
    accounting: Annotated[
        Literal["article", "vllm"], _doc("memory accounting: the article's headroom, or vLLM's")
    ] = "article"
    calibration_runs: Annotated[
        str,
        Field(max_length=4096),
        _doc(
            "your own benchmark run files (vllm bench serve / bench_serving JSON, GuideLLM "
            "reports) of one GPU that calibrate the engine model ('': none)"
        ),
    ] = ""
    calibration_gpu: Annotated[
        str,
        Field(max_length=64),
        _doc("the GPU the calibration runs measured ('': the plan's only GPU)"),
    ] = ""
    calibration_tensor_parallel: Annotated[
        int, Field(ge=1, le=64), _doc("the tensor-parallel degree of the calibration runs", "GPUs")
    ] = 1
    max_num_batched_tokens: Annotated[
        int,
        Field(ge=0, le=10_000_000),
        _doc(
            "tokens the engine computes a step at most (vLLM's --max-num-batched-tokens, "
            "SGLang's --chunked-prefill-size, TGI's --max-batch-prefill-tokens, TensorRT-LLM's "
            "--max_num_tokens); 0: the engine's default",
            "tokens",
        ),
    ] = 0

    @field_validator("engine", mode="after")
    @classmethod
    def _engine_id(cls, value: str) -> str:
        """The engine model's id of a name (``"SGLang"`` -> ``"sglang"``; vLLM alone is V1).

        Only an engine whose server exports a request counter (the plan's KEDA object scales on
        it) is planned: an unknown name is told those.
        """
        from ..records import engine_id
        from ._servers import SERVERS

        planned = sorted(key for key, server in SERVERS.items() if server.counter)
        try:
            key = engine_id(value)
        except CapnbError:
            raise ValueError(f"{value!r} is not one of {planned} (nor a name of one)") from None
        if key not in planned:
            raise ValueError(
                "its server exports no Prometheus counter of requests (its metrics "
                "are gauges), which the plan's KEDA ScaledObject scales on; plan on one of "
                f"{planned}, or price it with capnb.capacity.sweep_engine(..., settings="
                f"capnb.records.EngineSettings({key!r})) and export with capnb.plan.manifests(..., "
                "arrivals_counter=...)"
            )
        return key

    @model_validator(mode="after")
    def _calibration_needs_the_engine(self) -> Serving:
        """Own runs calibrate the serving-engine model: a plan on another latency never reads them."""
        if self.calibration_runs and self.latency not in ("engine", "auto"):
            raise ValueError(
                f"calibration_runs = {self.calibration_runs!r} calibrates the serving-engine "
                f"model; latency = {self.latency!r} does not use it (set latency = 'engine')"
            )
        given = [f"{name} = {value!r}" for name, value in (
            ("calibration_gpu", self.calibration_gpu),
            ("calibration_tensor_parallel", self.calibration_tensor_parallel),
        ) if value not in ("", 1)]  # fmt: skip
        if given and not self.calibration_runs:
            raise ValueError(
                f"{' and '.join(given)} describe the runs of calibration_runs, which is not set: "
                "give the run files too (--calibrate), or leave these out"
            )
        return self

    _one_or_many = field_validator("gpus", "tensor_parallel", mode="before")(
        staticmethod(_one_or_many)
    )
    _distinct = field_validator("gpus", "tensor_parallel")(staticmethod(_distinct))

    @field_validator("model", mode="before")
    @classmethod
    def _model_named(cls, value: object) -> object:
        """A config names its model (a file stores the name): a mapping is for load_model."""
        if isinstance(value, Mapping):
            raise ValueError(
                "a plan's model is a catalog id, a config.json path or a model folder, not a "
                "mapping (capnb.data.load_model and the steps take one): write it to a "
                "config.json and give its path"
            )
        return value


@pydantic.dataclasses.dataclass(**_RECORD)
class Elasticity(_Table):
    """The ``[elasticity]`` table: the autoscaling policies swept, and how they are judged.

    ``policies`` and the swept ``scale_up_threshold``, ``cooldown_s``, ``buffer_instances``;
    ``step_s`` of the simulation; ``cold_start_s`` (``"estimate"``, rounded up to whole steps,
    or seconds, a whole number of steps);
    ``tolerance_s`` the latency budget (a waiting request is dropped after it; a cold start
    above half of it vetoes the article policy's scale-ups); ``breach_budget`` the share of
    time in SLA breach accepted; ``backtest_days`` the length of each held-out window, one
    after each of the trace's last (up to 7) daily origins (0: no backtest; a trace under 8 days
    has hourly origins and 6-hour windows, whatever the length given).
    """

    policies: Annotated[
        tuple[Policy, ...],
        Field(min_length=1, max_length=MAX_VALUES),
        _doc("autoscaling policies to simulate"),
    ] = ("article", "hpa", "knative", "fixed", "fixed_elastic", "predictive")
    scale_up_threshold: Annotated[
        tuple[Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)], ...],
        Field(min_length=1, max_length=MAX_VALUES),
        _doc("load ratios (or HPA/Knative target utilisations) above which to scale up"),
    ] = (0.6, 0.7, 0.8)
    cooldown_s: Annotated[
        tuple[Annotated[float, Field(ge=0, le=7 * DAY_S, allow_inf_nan=False)], ...],
        Field(min_length=1, max_length=MAX_VALUES),
        _doc("scale-down delays", "s"),
    ] = (300.0, 900.0, 1800.0)
    buffer_instances: Annotated[
        tuple[Annotated[int, Field(ge=0, le=100_000)], ...],
        Field(min_length=1, max_length=MAX_VALUES),
        _doc("warm spare instances", "instances"),
    ] = (0, 2)
    step_s: Annotated[
        float, Field(ge=0.01, le=3600, allow_inf_nan=False), _doc("simulation step", "s")
    ] = 1.0
    cold_start_s: Annotated[
        Seconds | Literal["estimate"],
        _doc("cold start: seconds, or 'estimate' from the model and GPU", "s"),
    ] = "estimate"
    tolerance_s: Annotated[
        Seconds,
        _doc(
            "the latency budget: how long a request waits before it is dropped (unserved); a "
            "cold start above half of it vetoes the article policy's scale-ups (breach counts "
            "every step with requests left over, whatever it is)",
            "s",
        ),
    ] = 60.0
    breach_budget: Annotated[
        float, Field(ge=0, lt=1, allow_inf_nan=False), _doc("share of time in SLA breach accepted")
    ] = 0.001
    backtest_days: Annotated[
        int,
        Field(ge=0, le=366),
        _doc(
            "length of each held-out window, one after each of the last (up to 7) daily origins "
            "(0: no backtest; a trace under 8 days: 6-hour windows)",
            "days",
        ),
    ] = 7

    _one_or_many = field_validator(
        "policies", "scale_up_threshold", "cooldown_s", "buffer_instances", mode="before"
    )(staticmethod(_one_or_many))
    _distinct = field_validator("policies", "scale_up_threshold", "cooldown_s", "buffer_instances")(
        staticmethod(_distinct)
    )

    @field_validator("step_s")
    @classmethod
    def _step_divides_periods(cls, value: float, info: pydantic.ValidationInfo) -> float:
        """Every period the simulation counts in steps is a whole number of them.

        The policies' own periods (HPA's 15-s sync, Knative's 2-s tick, ...), the scale-down
        delays and the thrash window; ``tolerance_s`` (a later field) is checked on its own.
        """
        from ..elasticity._policy import OPTIONS
        from ..elasticity._simulate import _DEFAULTS

        times = [(f"cooldown_s = {c:g} s", c) for c in info.data.get("cooldown_s", ())]
        for policy in info.data.get("policies", ()):
            times += [
                (f"{policy}'s {name} = {v:g} s", v)
                for name, v in OPTIONS[policy].items()
                if name.endswith("_s") and isinstance(v, float)
            ]
        thrash = _DEFAULTS["thrash_window_s"]
        times.append((f"the thrash window ({thrash:g} s)", thrash))
        return _whole_steps(value, times)

    @field_validator("cold_start_s")
    @classmethod
    def _cold_start_in_steps(cls, value, info: pydantic.ValidationInfo):
        """A cold start given in seconds is whole steps: the simulator would round it up unsaid."""
        if value != "estimate" and "step_s" in info.data:
            _whole_steps(info.data["step_s"], [(f"cold_start_s = {value:g} s", value)])
        return value

    @field_validator("tolerance_s")
    @classmethod
    def _tolerance_in_steps(cls, value: float, info: pydantic.ValidationInfo) -> float:
        if "step_s" in info.data:
            _whole_steps(info.data["step_s"], [(f"tolerance_s = {value:g} s", value)])
        return value

    @model_validator(mode="after")
    def _grid_size(self) -> Elasticity:
        """The policy grid is simulated cell by cell over the whole trace: its size is bounded."""
        sizes = [len(self.policies), len(self.scale_up_threshold), len(self.cooldown_s)]
        sizes.append(len(self.buffer_instances))
        cells = math.prod(sizes)
        if cells > MAX_GRID_CELLS:
            raise ValueError(
                f"the policy grid has {cells:,} cells (policies x scale_up_threshold x "
                f"cooldown_s x buffer_instances = {' x '.join(map(str, sizes))}), more than the "
                f"{MAX_GRID_CELLS:,} one plan simulates; list fewer values"
            )
        return self


@pydantic.dataclasses.dataclass(**_RECORD)
class Fleet(_Table):
    """The ``[fleet]`` table: the mix of GPU types, reserved and spot, that prices the plan.

    ``provider`` whose prices (``capnb.data.gpu_prices``) price the cheapest mix of GPU types
    per slot beside the single type on demand (``"none"``: no mix); ``reserved`` the pricing
    of the base held in every slot (``"none"``: on demand only); ``spot_preemption`` the
    share of spot capacity the mix counts as lost (``"none"``: no spot);
    ``spot_preemption_rate`` the preemptions per spot instance-hour the replay draws (each
    replaced after a cold start; providers publish no rate: state yours). Spot needs a provider
    and a rate needs spot: either one alone would change nothing, and is an error.
    """

    provider: Annotated[
        Name, _doc("price provider of the fleet mix (capnb.data.gpu_prices), or 'none'")
    ] = "hyperstack"
    reserved: Annotated[
        Literal["reserved", "reserved_1y", "reserved_3y", "none"],
        _doc("pricing of the mix's base held in every slot, or 'none'"),
    ] = "reserved"
    spot_preemption: Annotated[
        Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] | Literal["none"],
        _doc("share of spot capacity lost to preemption, or 'none' (no spot)"),
    ] = "none"
    spot_preemption_rate: Annotated[
        Annotated[float, Field(ge=0, le=60, allow_inf_nan=False)],
        _doc(
            "preemptions per spot instance-hour replayed over the trace (providers publish none)",
            "1/(instance·h)",
        ),
    ] = 0.0

    @field_validator("spot_preemption")
    @classmethod
    def _spot_needs_a_provider(cls, value: object, info: pydantic.ValidationInfo) -> object:
        """Spot capacity is priced in the mix alone: with no provider it would do nothing."""
        if value != "none" and info.data.get("provider") == "none":
            raise ValueError(
                "prices spot capacity in the mix, but provider = 'none' plans no mix; name a "
                "provider (capnb.data.gpu_prices) or leave spot_preemption at 'none'"
            )
        return value

    @field_validator("spot_preemption_rate")
    @classmethod
    def _rate_needs_spot(cls, value: float, info: pydantic.ValidationInfo) -> float:
        """Preemptions are replayed on the mix's spot instances alone: with none, on nothing."""
        if value > 0 and info.data.get("spot_preemption") == "none":
            raise ValueError(
                "preempts spot instances, but spot_preemption = 'none' puts none in the mix; set "
                "spot_preemption (the share of spot capacity counted lost, e.g. 0.05) or leave "
                "the rate at 0"
            )
        return value


def _whole_steps(step_s: float, times: list[tuple[str, float]]) -> float:
    """``step_s``, or an error naming the times it does not divide and a step that divides all."""
    bad = [what for what, t in times if t and abs(t / step_s - round(t / step_s)) > 1e-9 * t]
    if bad:
        ms = [round(t * 1000) for _, t in times if t] + [round(step_s * 1000)]
        largest = math.gcd(*ms) / 1000 if all(m > 0 for m in ms) else None
        fits = f" ({largest:g} s divides them all)" if largest else ""
        raise ValueError(
            f"the simulation counts time in whole steps of step_s = {step_s:g} s: "
            f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not; use a step_s that "
            f"divides each{fits}"
        )
    return step_s


#: The record of each table of a config file but ``[sla]`` (a :class:`capnb.records.SLA`).
TABLES = {"traffic": Traffic, "serving": Serving, "elasticity": Elasticity, "fleet": Fleet}


@pydantic.dataclasses.dataclass(**_RECORD)
class PlanConfig:
    """Everything a plan needs, with the bundled defaults: one record per table of a config file.

    ``cfg.traffic`` (:class:`Traffic`), ``cfg.serving`` (:class:`Serving`), ``cfg.sla`` (a
    :class:`capnb.records.SLA`, the bounds met together), ``cfg.elasticity``
    (:class:`Elasticity`) and ``cfg.fleet`` (:class:`Fleet`): a file's ``[serving] model = ...``
    is ``cfg.serving.model``. Each record is frozen and validated on construction; change one
    with :meth:`replace`, e.g. ``cfg.replace(serving={"gpus": ("H100-SXM",)})``.
    """

    traffic: Traffic = Traffic()
    serving: Serving = Serving()
    sla: Annotated[
        SLA,
        _doc(
            "latency bounds met together: a quantile of TTFT, TPOT, ITL, E2E (each optional)", "s"
        ),
    ] = SLA(ttft_s=2.0, tpot_s=0.05)
    elasticity: Elasticity = Elasticity()
    fleet: Fleet = Fleet()
    source: str = dataclasses.field(default="defaults", compare=False)

    @field_validator("sla", mode="before")
    @classmethod
    def _sla_record(cls, value: object) -> object:
        """An SLA table (a mapping of its fields) or its text stands for the record.

        The text is the command line's ``--sla``: ``"ttft=1.5,tpot=60ms"``.
        """
        if isinstance(value, dict | str):
            try:
                return SLA.from_mapping(value) if isinstance(value, dict) else SLA.parse(value)
            except CapnbError as error:
                raise ValueError(str(error).removeprefix("sla: ")) from None
        return value

    def replace(self, **changes: object) -> PlanConfig:
        """A copy with some settings changed, validated as a file's settings are.

        The keywords are what a config file's top level holds: a table by its name, or a
        setting by its own name (names are unique across tables). ``traffic``, ``serving``,
        ``elasticity`` and ``fleet`` take a mapping of the keys to change (the table's other keys
        are kept) or a whole record (:class:`Traffic`, ...); ``sla`` is given whole (a
        :class:`capnb.records.SLA`, a mapping of its fields, or its text
        ``"ttft=1.5,tpot=60ms"``), as its bounds are met together. So
        ``cfg.replace(serving={"gpus": ("H200",)})`` and ``cfg.replace(gpus=("H200",))`` are the
        same copy. An unknown name, or a setting given twice, is a :class:`ConfigError` naming it.
        """
        return self._changed("replace()", changes)

    def _changed(self, origin: str, changes: dict) -> PlanConfig:
        """:meth:`replace`, its errors naming where the changes came from (``origin``)."""
        given = {k: _plain(v) if isinstance(v, _Table) else v for k, v in changes.items()}
        flat, where = _flatten(given, f"{self.source}: {origin}")
        config = _build({**self.as_dict(), **flat}, self.source, where)
        check_names(config, where)
        return config

    def tables(self) -> dict[str, dict[str, object]]:
        """The settings as a config file holds them: one mapping per table, plain values."""
        return {name: _plain(getattr(self, name)) for name in SECTIONS}

    def to_toml(self) -> str:
        """The config as commented TOML, the text :func:`save_config` writes."""
        return _toml_text(self)

    def runs_read(self) -> dict[str, str]:
        """The folders or files of measured runs the plan reads, by setting ('' where none).

        Every file in such a folder is read as a run, so no output may be written there
        (:func:`capnb.data.check_set`'s ``reads``).
        """
        latency = self.serving.latency
        named = latency in ("model", "engine", "auto")  # the models, not a path
        return {
            "latency": "" if named else latency,
            "calibration_runs": self.serving.calibration_runs,
        }

    def as_dict(self) -> dict[str, object]:
        """Every setting under its own name (one mapping, the form a plan's ``config`` stores).

        A setting's name is unique across tables, so this flat form and :meth:`tables` load to
        the same record (:func:`from_mapping` reads either).
        """
        flat: dict[str, object] = {}
        for name, values in self.tables().items():
            flat.update({name: values} if name in RECORDS else values)
        return flat


def _plain(value: object) -> object:
    if isinstance(value, SLA):
        return value.as_dict()
    if isinstance(value, _Table):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return list(value) if isinstance(value, tuple) else value


#: Which table of a config file each setting lives in.
SECTIONS = {
    **{
        name: tuple(f.name for f in dataclasses.fields(TABLES[name]))
        for name in ("traffic", "serving")
    },
    "sla": ("sla",),
    **{
        name: tuple(f.name for f in dataclasses.fields(TABLES[name]))
        for name in ("elasticity", "fleet")
    },
}
_TABLE_OF = {name: table for table, names in SECTIONS.items() for name in names}
_KNOWN = set(_TABLE_OF)


def _line_of(text: str, section: str | None, key: str, suffix: str) -> int | None:
    """The line a key is set on in a TOML or YAML file's text (where the parser does not say)."""
    if suffix == ".toml":
        current, pattern = None, re.compile(rf"^\s*{re.escape(key)}\s*=")
        for number, line in enumerate(text.splitlines(), 1):
            table = re.match(r"^\s*\[([^\]]+)\]", line)
            if table:
                current = table.group(1).strip()
                if section is None and current == key:  # the key is a table's own name
                    return number
            elif pattern.match(line) and current == section:
                return number
        return None
    pattern = re.compile(rf"^(\s*){re.escape(key)}\s*:")
    inside = section is None
    for number, line in enumerate(text.splitlines(), 1):
        if section is not None and re.match(rf"^{re.escape(section)}\s*:", line):
            inside = True
            continue
        match = pattern.match(line)
        if match and inside and (section is None) == (match.group(1) == ""):
            return number
    return None


#: Fields whose type is a choice of kinds: one message instead of one per kind.
_UNION_RULES = {
    "cold_start_s": "expected a finite number of seconds from 0 to 86,400 (a day), or 'estimate'",
    "spot_preemption": "expected a share in [0, 1), or 'none'",
}


#: What a bound on a size protects, said beside a value past it: the bounds it is said at
#: (pydantic's error types: "less_than" for an upper bound) and the advice.
_BUDGETS = {
    "trials": (
        ("less_than",),
        "each trial simulates a month minute by minute (2,000 resolve a 5 % exceedance to "
        "about 0.5 %); lower trials",
    ),
    "step_s": (
        ("greater_than",),
        "the simulation takes one step per step_s over the whole trace, for every policy grid "
        "cell; use a step of 0.01 s or more",
    ),
    "seed": (("less_than", "greater_than"), "a seed is an integer in [0, 2**64)"),
}


def _shown(value: object) -> str:
    """A refused value as a message shows it: its repr, or a short stand-in for a long one."""
    text = repr(value)
    if "\n" not in text and len(text) <= 80:
        return text
    if isinstance(value, list | tuple):  # a list of 1,000 SLAs printed 5,000 characters
        return f"{text[:60]}... ({len(value):,} values)"
    # an xarray Dataset printed its whole repr, 16 lines, into a one-line message
    return f"<{type(value).__module__.split('.')[0]}.{type(value).__name__}>"


def _text_for_number(name: str, text: str) -> str | None:
    """The rule for text given to a setting of numbers in a unit ("1 min" for tolerance_s).

    The Python API converts such text (:mod:`capnb.units`); a config holds the number itself, and
    the message says which. ``None`` for a setting without a unit.
    """
    unit = _unit_of(name)
    return _quantity_rule(name, text, unit) or (f"expected a number of {unit}" if unit else None)


def _unit_of(name: str) -> str | None:
    """The unit a setting is in (its schema's ``unit``), or None."""
    table = _TABLE_OF.get(name)
    if table not in TABLES:
        return None
    return pydantic.TypeAdapter(TABLES[table]).json_schema()["properties"][name].get("unit")


def setting_units() -> dict[str, str]:
    """Each table's settings by name with their unit ("1": a share, a count, text or a choice).

    The names :meth:`PlanConfig.as_dict` gives them; the SLA's fields are not among them.
    """
    out = {}
    for record in TABLES.values():
        schema = pydantic.TypeAdapter(record).json_schema()["properties"]
        out.update({name: field.get("unit") or "1" for name, field in schema.items()})
    return out


def _quantity_rule(name: str, text: str, unit: str | None) -> str | None:
    """The rule for a quantity given as text ("1 min": write 60), or None for a keyword's text."""
    if not unit:
        return None
    try:
        value = in_unit(text, unit, name)
    except CapnbError as error:
        return str(error).removeprefix(f"{name}: ")
    if isinstance(value, str):
        return None
    return f"expected a number of {unit}, not text: write {value:g} for {text!r}"


def _message(errors: list[dict], source: str, where: dict[str, str]) -> str:
    """Every field the schema refused, each with its value, the rule, and its file and line."""
    by_field: dict[str, list[dict]] = {}
    for item in errors:
        name = str(item["loc"][0]) if item["loc"] else "config"
        by_field.setdefault(name, []).append(item)
    lines = []
    for name, items in by_field.items():
        place = where.get(name, source)
        if items[0]["type"] == "unexpected_keyword_argument":
            lines.append(f"{place}: unknown setting {name!r}; known: {', '.join(sorted(_KNOWN))}")
            continue
        if name == "config":  # the record's own rule (the policy grid): no one value to show
            lines += [f"{place}: {item['msg'].removeprefix('Value error, ')}" for item in items]
            continue
        if name in _UNION_RULES and items[0]["type"] != "value_error":  # not a rule of its own
            given = items[0]["input"]
            rule = _UNION_RULES[name]
            if isinstance(given, str) and (said := _quantity_rule(name, given, _unit_of(name))):
                rule = f"{said} (or {rule.rsplit(', or ', 1)[1]})"  # "1 min" for cold_start_s
            lines.append(f"{place}: {name} = {_shown(given)}: {rule}")
            continue
        if any(len(i["loc"]) > 1 for i in items):  # an item's own error says more than the count
            items = [i for i in items if len(i["loc"]) > 1]
        for item in items:
            index = "".join(f"[{p}]" for p in item["loc"][1:] if isinstance(p, int))
            rule = item["msg"].removeprefix("Value error, ")
            if item["type"] == "literal_error":
                rule = f"expected one of {item['ctx']['expected']}"
            elif name in _BUDGETS and item["type"].startswith(_BUDGETS[name][0]):
                rule = f"{rule}: {_BUDGETS[name][1]}"
            elif item["type"] == "float_type" and isinstance(item["input"], str):
                rule = _text_for_number(name, item["input"]) or rule
            lines.append(f"{place}: {name}{index} = {_shown(item['input'])}: {rule}")
    return "; ".join(lines)


def from_mapping(
    values: dict, *, source: str = "config", text: str | None = None, suffix: str = ""
) -> PlanConfig:
    """A :class:`PlanConfig` from a flat or sectioned mapping, validated field by field.

    A setting given twice (at the top level and in its table, or in two tables) is an error, as
    is an unknown one; each message names the field and, for a file, the line.
    """
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: a plan config is a mapping of settings")
    flat, where = _flatten(values, source, text, suffix)
    if not flat:
        raise ConfigError(
            f"{source}: holds no settings; an empty config is not the defaults (name the "
            "settings to change, or plan on the defaults without a config)"
        )
    config = _build(flat, source, where)
    check_names(config, where)
    return config


def _flatten(
    values: dict, source: str, text: str | None = None, suffix: str = ""
) -> tuple[dict[str, object], dict[str, str]]:
    """Each setting of a flat or sectioned mapping under its own name, with its place.

    The place is ``file:line`` when the text of a file is given, else ``source``.
    """
    flat: dict[str, object] = {}
    where: dict[str, str] = {}
    labels: dict[str, str] = {}  # how each setting was named: ``[table] key`` or ``key``
    for key, value in values.items():
        if key in RECORDS and isinstance(value, dict):
            items, section = [(key, _record_table(key, value, source, text, suffix))], None
        elif key in SECTIONS and isinstance(value, dict):
            items, section = value.items(), key
        else:
            items, section = [(key, value)], None
        for inner, item in items:
            line = _line_of(text, section, inner, suffix) if text is not None else None
            place = f"{source}:{line}" if line else source
            label = f"[{section}] {inner}" if section else inner
            if inner in RETIRED:
                raise ConfigError(f"{place}: {label} is no longer a setting: {RETIRED[inner]}")
            if section is not None and inner not in SECTIONS[section]:
                raise ConfigError(
                    f"{place}: [{section}] has no setting {inner!r}; "
                    f"known: {', '.join(SECTIONS[section])}"
                )
            if section is None and inner in SECTIONS and inner not in _KNOWN:
                raise ConfigError(
                    f"{place}: {inner} is a table of settings (a [{inner}] table, or "
                    f"{inner}.<setting> = ...), not {type(item).__name__} {item!r:.60}"
                )
            if section is None and inner not in _KNOWN and isinstance(item, dict):
                close = difflib.get_close_matches(inner, list(SECTIONS), n=1, cutoff=0.6)
                raise ConfigError(
                    f"{place}: unknown table [{inner}]"
                    + (f" (closest: {close[0]})" if close else "")
                    + f"; the tables are {', '.join(SECTIONS)}"
                )
            if section is None and inner not in _KNOWN:
                raise ConfigError(
                    f"{place}: unknown setting {inner!r}; known: {', '.join(sorted(_KNOWN))}"
                )
            if inner in flat:
                before = where[inner].removeprefix(f"{source}:")
                line_before = f" on line {before}" if before.isdigit() else ""
                raise ConfigError(
                    f"{place}: {label} is given twice (also as {labels[inner]}{line_before}); "
                    "keep one"
                )
            flat[inner], where[inner], labels[inner] = item, place, label
    return flat, where


def _build(flat: dict[str, object], source: str, where: dict[str, str]) -> PlanConfig:
    """The record of every table from the settings given, the others at their defaults.

    Every table is checked before any error is raised, so one message names every bad setting.
    """
    records: dict[str, object] = {}
    errors: list[dict] = []
    for table, names in SECTIONS.items():
        given = {name: flat[name] for name in names if name in flat}
        if table in RECORDS:
            records.update(given)
            continue
        try:
            records[table] = TABLES[table](**given)
        except pydantic.ValidationError as error:
            errors += error.errors(include_url=False)
    try:
        config = PlanConfig(**records, source=source) if not errors else None
    except pydantic.ValidationError as error:
        errors += error.errors(include_url=False)
    if errors:
        raise ConfigError(_message(errors, source, where))
    return config


def _record_table(key: str, table: dict, source: str, text: str | None, suffix: str) -> dict:
    """A record's table (``[sla]``): its keys checked against the record's fields, with lines."""
    known = [f.name for f in dataclasses.fields(RECORDS[key])]
    for inner in table:
        if inner in known:
            continue
        line = _line_of(text, key, inner, suffix) if text is not None else None
        place = f"{source}:{line}" if line else source
        if inner in RETIRED:
            raise ConfigError(f"{place}: [{key}] {inner} is no longer a setting: {RETIRED[inner]}")
        raise ConfigError(f"{place}: [{key}] has no setting {inner!r}; known: {', '.join(known)}")
    try:
        RECORDS[key].from_mapping(table)
    except CapnbError as error:  # the message names the field; the place is the field's line
        message = str(error).removeprefix(f"{key}: ")
        field = message.partition(" = ")[0]
        line = _line_of(text, key, field, suffix) if text is not None else None
        place = f"{source}:{line}" if line else source
        raise ConfigError(f"{place}: [{key}] {message}") from None
    return table


def check_names(config: PlanConfig, where: dict[str, str] | None = None) -> None:
    """The model, GPUs and price provider a config names exist, else a ConfigError with the line.

    ``where``: each field's place (``file:line``) when the config came from a file.
    """
    from .. import data
    from ..errors import CapnbError

    def place(name: str) -> str:
        return (where or {}).get(name, config.source)

    try:
        data.load_model(config.serving.model)
    except (CapnbError, OSError) as error:
        raise ConfigError(f"{place('model')}: model = {config.serving.model!r}: {error}") from None
    latency, curves = config.serving.latency, data.list_latency_curves()
    if latency not in ("auto", "model", "engine", *curves) and not Path(latency).exists():
        raise ConfigError(
            f"{place('latency')}: latency = {latency!r}: neither 'auto', 'model', 'engine', a "
            f"bundled curve ({len(curves)}: capnb.data.list_latency_curves()) nor an existing "
            "file or folder of measured latencies"
        )
    for i, gpu in enumerate(config.serving.gpus):
        try:
            data.resolve_gpu(gpu)
        except CapnbError as error:
            raise ConfigError(f"{place('gpus')}: gpus[{i}] = {gpu!r}: {error}") from None
    _check_engine_runs_on(config, place)
    _calibration_gpu(config, place)
    if config.fleet.provider != "none":  # else the fleet step, the plan's last, finds it
        try:
            data.gpu_prices(config.fleet.provider)
        except CapnbError as error:
            raise ConfigError(
                f"{place('provider')}: provider = {config.fleet.provider!r}: {error}"
            ) from None


def _check_engine_runs_on(config: PlanConfig, place) -> None:
    """An engine of NVIDIA's GPUs only (TensorRT-LLM) is not planned on an AMD GPU."""
    from .. import data
    from ..data._catalog import gpu_maker
    from ..records import ENGINES
    from ._servers import server_of

    engine = config.serving.engine
    if not server_of(engine).nvidia_only:
        return
    for i, gpu in enumerate(config.serving.gpus):
        resolved = data.resolve_gpu(gpu)
        if gpu_maker(resolved) == "AMD":
            raise ConfigError(
                f"{place('engine')}: engine = {engine!r}: {ENGINES[engine]} runs on NVIDIA GPUs "
                f"only, and gpus[{i}] = {gpu!r} ({resolved}) is an AMD GPU; plan it with "
                "vllm-v1, sglang or tgi, or leave it out of gpus"
            )


def _calibration_gpu(config: PlanConfig, place) -> None:
    """Own runs measured one GPU among the candidates, named where there are several."""
    from .. import data
    from ..errors import CapnbError

    serving = config.serving
    if not serving.calibration_runs:
        return
    if not serving.calibration_gpu and len(serving.gpus) > 1:
        raise ConfigError(
            f"{place('calibration_runs')}: calibration_runs: which GPU did the runs measure? set "
            f"calibration_gpu (--calibrate-gpu) to one of the candidate gpus {list(serving.gpus)}"
        )
    try:
        gpu = data.resolve_gpu(serving.calibration_gpu) if serving.calibration_gpu else None
    except CapnbError as error:
        raise ConfigError(
            f"{place('calibration_gpu')}: calibration_gpu = {serving.calibration_gpu!r}: {error}"
        ) from None
    if gpu is not None and gpu not in [data.resolve_gpu(g) for g in serving.gpus]:
        raise ConfigError(
            f"{place('calibration_gpu')}: calibration_gpu = {serving.calibration_gpu!r} is not "
            f"among the candidate gpus {list(serving.gpus)}: the calibration prices the GPU its "
            "runs measured"
        )


#: Largest plan config file read (a config holds a few dozen settings: about 2 KB).
MAX_CONFIG_BYTES = 2**20
#: Most values a YAML config may expand to, each alias counted at every use: a config holds a
#: few dozen, while a "billion laughs" of a few hundred bytes expands to billions.
MAX_YAML_VALUES = 10_000


def _expanded_size(node, path: Path) -> int:
    """Values a YAML node stands for once its aliases are expanded (capped past the limit)."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ConfigError(
                f"{path}:{node.start_mark.line + 1}: an alias inside its own anchor (a recursive "
                "structure); a plan config is a tree of settings"
            )
        open_nodes.add(key)
        if isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            total = 1
        open_nodes.discard(key)
        sizes[key] = min(total, MAX_YAML_VALUES + 1)
        return sizes[key]

    return size(node)


def _load_yaml(text: str, path: Path) -> object:
    """A YAML config through PyYAML's safe loader, its size checked before anything is built.

    Merge keys (``<<``) work; a key given twice is an error; the document's size with its
    aliases expanded is bounded (``MAX_YAML_VALUES``).
    """
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # merged keys may be overridden by the mapping's own (YAML's rule)
            key = loader.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"{path}:{line}: {key!r} is given twice (also on line {seen[key]}); keep one"
                )
            seen[key] = line
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        values = _expanded_size(node, path)
        if values > MAX_YAML_VALUES:
            raise ConfigError(
                f"{path}: expands to more than {MAX_YAML_VALUES:,} values once its aliases (*name) "
                "are expanded; a plan config holds a few dozen: write the settings out"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _resolve_paths(values: dict, folder: Path) -> dict:
    """Relative file paths of a config file, read from the file's folder."""
    from .. import data

    bundled = {
        "trace": {*data.list_traces(), *data.list_rate_series()},
        "model": set(data.list_models()),
        "latency": {"auto", "model", "engine", *data.list_latency_curves()},
        "workload": {"auto", "trace", *data.list_traces()},
        "calibration_runs": {""},
    }

    models = {m.lower() for m in bundled["model"]}  # catalog ids are case-insensitive

    def resolve(name: str, value: object) -> object:
        if not isinstance(value, str) or not value or value in bundled[name]:
            return value  # "" is no path (the folder itself): the field's own rule refuses it
        if name == "model" and value.strip().lower() in models and not (folder / value).exists():
            return value  # 'llama-3.1-8b' is the catalog's id, not a file named with a suffix
        if Path(value).is_absolute():
            return value
        if Path(value).suffix or os.sep in value or "/" in value or (folder / value).exists():
            return str((folder / value).resolve())
        return value

    out = {}
    for key, value in values.items():
        if key in SECTIONS and isinstance(value, dict):
            out[key] = {k: resolve(k, v) if k in PATH_FIELDS else v for k, v in value.items()}
        else:
            out[key] = resolve(key, value) if key in PATH_FIELDS else value
    return out


def _plan_json_config(path: Path) -> PlanConfig:
    """The config a plan was built on, from the ``plan.json`` it wrote (its ``config`` mapping).

    Its paths were resolved when the plan was built (absolute), so it reads from any folder.
    """
    import json

    from ..data import number_too_long, read_text

    text = read_text(path, "plan.json", limit=64 * MAX_CONFIG_BYTES)
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise ConfigError(f"{path}: not valid JSON ({error})") from None
    except ValueError:  # an integer past Python's 4,300 digits
        raise number_too_long(str(path)) from None
    values = document.get("config") if isinstance(document, dict) else None
    if not isinstance(values, dict) or "answer" not in document:
        raise ConfigError(
            f"{path}: not a plan.json capnb wrote (no 'config' and 'answer' in it); a plan config "
            "is a .toml, .yaml or .yml file"
        )
    return from_mapping(values, source=str(path))


def load_config(path: str | os.PathLike) -> PlanConfig:
    """Read a plan config from a ``.toml`` or ``.yaml``/``.yml`` file, or a plan's ``plan.json``.

    Relative paths in it (trace, model, latency files, workload) are read from the file's folder.
    A ``plan.json`` (:func:`capnb.plan.export`) gives the config the plan was built on, so a plan
    is built again on the same inputs (the benchmark commands' re-plan reads it).

    Raises
    ------
    ConfigError
        The file is missing, not valid TOML/YAML, sets a key twice, or has an unknown or invalid
        setting (named in the message, with its line).
    """
    from ..data import number_too_long, read_text, user_path

    path = user_path(path, "plan config")
    if path.suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ConfigError(
            f"{path}: a plan config is a .toml, .yaml or .yml file (or a plan's plan.json)"
        )
    if path.suffix == ".json":  # a plan's output: the set a killed writer committed, as plan.load
        from ..data import settle

        with contextlib.suppress(OSError):
            settle(path.parent)
    if not path.exists():
        raise ConfigError(f"{path}: no such plan config file")
    if path.suffix == ".json":
        return _plan_json_config(path)
    text = read_text(path, "plan config", limit=MAX_CONFIG_BYTES)
    if path.suffix == ".toml":
        try:
            values = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML ({error})") from None
        except RecursionError:
            raise ConfigError(f"{path}: not valid TOML (nested too deeply)") from None
        except ValueError:  # an integer past Python's 4,300 digits
            raise number_too_long(str(path)) from None
    else:
        import yaml

        try:
            values = _load_yaml(text, path)
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from None
        except CapnbError:
            raise
        except ValueError as error:  # a value PyYAML cannot build: 2024-13-45, 5,001 digits
            if "integer string conversion" in str(error):
                raise number_too_long(str(path)) from None
            raise ConfigError(f"{path}: not valid YAML ({error})") from None
        except RecursionError:
            raise ConfigError(f"{path}: not valid YAML (nested too deeply)") from None
    if values is None or values == {}:
        raise ConfigError(
            f"{path}: holds no settings; an empty config is not the defaults: write them with "
            f"`capnb config {path.name}` and edit, or leave out --config to plan on the defaults"
        )
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: a plan config is a mapping of settings")
    values = _resolve_paths(values, path.resolve().parent)
    return from_mapping(values, source=str(path), text=text, suffix=path.suffix)


def _comment(table: str, name: str) -> str:
    record = TABLES[table]
    field = next(f for f in dataclasses.fields(record) if f.name == name)
    info = next(
        (m for m in getattr(field.type, "__metadata__", ()) if getattr(m, "description", None)),
        None,
    )
    if info is None:  # the annotation is a string under postponed evaluation: read the schema
        schema = pydantic.TypeAdapter(record).json_schema()["properties"][name]
        meaning, unit = schema.get("description", ""), schema.get("unit", "")
    else:
        meaning, unit = info.description, (info.json_schema_extra or {}).get("unit", "")
    default = _plain(field.default)
    units = f" [{unit}]" if unit else ""
    return f"{meaning}{units}{_choices(record, name)}; default: {default!r}"


def _choices(record: type, name: str) -> str:
    """``; one of 'a', 'b'`` for a setting of fixed choices (``each one of`` for a list of them)."""
    schema = pydantic.TypeAdapter(record).json_schema()["properties"][name]
    if "enum" in schema:
        return f"; one of {', '.join(map(repr, schema['enum']))}"
    if "enum" in schema.get("items", {}):
        return f"; each one of {', '.join(map(repr, schema['items']['enum']))}"
    return ""


#: What each field of the [sla] table means, for the written config's comments.
_SLA_FIELDS = {
    "ttft_s": "bound on the time to first token [s]",
    "tpot_s": "bound on the time per output token [s per token: 60 ms is 0.06]",
    "itl_s": "bound on the inter-token latency [s]",
    "e2e_s": "bound on the end-to-end latency [s]",
    "quantile": "the quantile of each latency the bounds hold for (0.99: P99)",
    "confirm": "true accepts a bound outside its metric's plausible range",
}


def _record_comments(table, values: dict) -> None:
    """The [sla] table: each bound set, the others as comments, every key explained."""
    import tomlkit

    table.add(tomlkit.comment("latency bounds met together; give at least one (each optional)"))
    for name, meaning in _SLA_FIELDS.items():
        table.add(tomlkit.comment(meaning))
        if name in values:
            table.add(name, values[name])
        else:
            table.add(tomlkit.comment(f"{name} = ..."))


def save_config(config: PlanConfig, path: str | os.PathLike, *, force: bool = False) -> Path:
    """Write a plan config as commented TOML (atomically), one table per section.

    Each setting carries a comment: its meaning, unit and default. An existing file (your edited
    config) is a :class:`~capnb.errors.ConfigError`, left as it was; ``force=True`` replaces it.
    """
    if not os.fspath(path).strip():  # Path("") is the current folder, which no one named
        raise ConfigError(
            f"plan config {os.fspath(path)!r}: an empty path (an unset shell variable?); give the "
            "file to write, e.g. plan.toml"
        )
    path = Path(path)
    if path.suffix != ".toml":
        raise ConfigError(f"{path}: capnb writes plan configs as .toml")
    if path.is_dir():  # not something force could replace: said, not "pass --force"
        raise ConfigError(f"{path}: a folder, not a file to write the plan config into")
    if not force and path.is_symlink() and not path.exists():  # kept, said as write_set says it
        raise ConfigError(
            f"{path}: a symbolic link to {os.readlink(path)}, which does not exist; capnb did not "
            "make it: move it or pass --force (force=True) to replace it"
        )
    if not force and path.exists():
        raise ConfigError(f"{path}: exists; pass --force (force=True) to overwrite it")
    write_atomic(path, _toml_text(config))
    return path


def _toml_text(config: PlanConfig) -> str:
    import tomlkit

    values = config.tables()
    document = tomlkit.document()
    document.add(tomlkit.comment("capnb plan config: edit, then `capnb plan --config FILE`"))
    document.add(tomlkit.comment("Relative paths are read from this file's folder."))
    for section, names in SECTIONS.items():
        table = tomlkit.table()
        if section in RECORDS:
            _record_comments(table, values[section])
            document.add(section, table)
            continue
        for name in names:
            value = values[section][name]
            table.add(tomlkit.comment(_comment(section, name)))
            if value is None:  # TOML has no null: an unset optional setting stays a comment
                table.add(tomlkit.comment(f"{name} = ..."))
                continue
            table.add(name, value)
        document.add(section, table)
    return tomlkit.dumps(document)


# a setting's name is unique across tables, so a flat mapping names each setting once
assert len(_KNOWN) == sum(len(names) for names in SECTIONS.values())


def trace_options(cfg: PlanConfig) -> dict:
    """The config's options for the trace loaders (:func:`capnb.data.load_traffic`): those set."""
    traffic = cfg.traffic
    given = {
        "time_column": traffic.time_column,
        "prompt_column": traffic.prompt_column,
        "output_column": traffic.output_column,
        "rate_column": traffic.rate_column,
        "count_column": traffic.count_column,
        "running_total": traffic.running_total,
        "time_unit": traffic.time_unit,
        "timezone": traffic.timezone,
    }
    return {name: value for name, value in given.items() if value is not None}


def workload_options(cfg: PlanConfig, name: str) -> dict:
    """The options a ``workload`` log is read with (:func:`capnb.data.load_trace`): those set.

    A file of the user's: its numeric times count in ``[traffic] time_unit`` (only its lengths
    are priced, but the reader places every time); a bundled trace: none (it knows its own).
    """
    from .. import data

    if name in data.list_traces() or cfg.traffic.time_unit is None:
        return {}
    return {"time_unit": cfg.traffic.time_unit}

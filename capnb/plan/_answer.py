"""The plan's answer: one typed record, built by :func:`capnb.plan.build` and nothing else.

Every page that tells the answer (:func:`capnb.plan.describe`, ``plan.json``, the report's first
page, the command line, worksheet 05) renders this record; none of them computes or decides
anything, and none reads a sentence back. The record travels inside the plan Dataset as JSON
(``attrs["answer"]``), so a plan written to NetCDF and loaded again gives the same record
(:func:`answer`).

Each field carries its unit and meaning in its metadata (:func:`units`), in the glossary's words.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import typing
from dataclasses import dataclass, field

from ..data._files import json_error_at
from ..errors import InputError
from ..records import SLA

#: How a measured curve's ``latency_error_basis`` begins (then where the measurements came from).
MEASURED_BASIS = "no model error: "

__all__ = [
    "Advisory",
    "Answer",
    "BurstTest",
    "Bursts",
    "Check",
    "HeldOut",
    "Policy",
    "answer",
    "units",
]


def _f(units: str, meaning: str, **kw):
    return field(metadata={"units": units, "long_name": meaning}, **kw)


@dataclass(frozen=True)
class Policy:
    """The autoscaling policy the elasticity step chose, with the settings the replay used."""

    name: str = _f("1", "policy: article, hpa, knative, fixed, fixed_elastic or predictive")
    scale_up_threshold: float = _f(
        "1", "load ratio (or target utilisation) that scales up (a fixed fleet: the sweep's cell)"
    )
    cooldown_s: float = _f("s", "the policy's scale-down window")
    min_instances: int = _f("instances", "fewest instances the autoscaler keeps (its floor)")
    buffer_instances: int = _f("instances", "warm spare instances held above the pool")
    kind: str = _f("1", "fixed, fixed_plus_buffer (capacity needing no cold start) or elastic")
    cold_start_s: float = _f("s", "time from a scale-up decision until the instance serves")
    cold_start_vetoes: bool = _f("1", "whether the cold start is too long for scale-ups to count")

    @property
    def record(self):
        """The policy and its settings as a :class:`capnb.elasticity.Policy`, to replay it.

        ``simulate(demand, policy=answer.policy.record, cold_start_s=answer.policy.cold_start_s,
        ...)``.
        """
        from ..elasticity import Policy as Settings

        return Settings(
            self.name,
            scale_up_threshold=self.scale_up_threshold,
            cooldown_s=self.cooldown_s,
            min_instances=self.min_instances,
            buffer_instances=self.buffer_instances,
        )

    @property
    def selection(self) -> dict[str, object]:
        """The chosen run's cell of the elasticity step's sweep (``sweep.sel(**selection)``)."""
        return {
            "policy": self.name,
            "scale_up_threshold": self.scale_up_threshold,
            "cooldown_s": self.cooldown_s,
            "min_instances": self.min_instances,
            "buffer_instances": self.buffer_instances,
        }


@dataclass(frozen=True)
class Advisory:
    """How the chosen policy moves the fleet over the replay (what an operator watches for)."""

    scale_events_per_hour: float = _f("1/hour", "scale events of the pool per hour")
    reversals_per_day: float = _f(
        "1/day",
        "scale events reversing the one before within 900 s of it (the replay's thrash window, "
        "the article's shortest cool-down, whatever the policy's own)",
    )
    flapping: bool = _f("1", "whether the policy flaps (more than 1 reversal a day)")
    above_need_share: float = _f("1", "share of the time the pool held more than its recent need")
    cold_starts_per_day: float = _f("instances/day", "instances started a day (each a cold start)")


@dataclass(frozen=True)
class Bursts:
    """The burst model the plan used, decided once (the forecast, burst test and backtest)."""

    rate_per_month: float = _f("1/month", "expected bursts in a 30-day month (Poisson)")
    duration_s: tuple[float, ...] = _f("s", "shortest and longest burst")
    multiplier: tuple[float, ...] = _f("1", "lowest and highest factor on the demand")
    source: str = _f("1", "where the numbers come from")


@dataclass(frozen=True)
class BurstTest:
    """The chosen run replayed with one burst of the configured burst model."""

    multiplier: float = _f("1", "the burst's factor on the demand")
    hours: float = _f("h", "the burst's length")
    start: str = _f("1", "when the burst starts, on the trace's clock")
    breach_minutes: float = _f("min", "minutes in SLA breach during the replay with the burst")
    unserved_share: float = _f("1", "share of requests unserved during the replay")
    model: str = _f("1", "the burst model the test's size comes from")
    added_minutes: float = _f(
        "min", "minutes in breach the burst added to the replay without it", default=math.nan
    )


def coverage_goal(quantile: float) -> tuple[float, float]:
    """The share of held-out intervals a forecast at ``quantile`` should cover.

    Issue 29's goals: P99 97-99.5 %, P95 93-97 %; other quantiles by the rule both follow: from
    two points below the quantile to the nearer of two points above it and halfway to 100 %.
    """
    high = quantile + min(0.02, (1.0 - quantile) / 2)
    return round(quantile - 0.02, 6), round(high, 6)


@dataclass(frozen=True)
class HeldOut:
    """How the plan's choices did on windows they were not made on (rolling origins)."""

    windows: int = _f("1", "held-out windows scored")
    held: int = _f("1", "windows in which the plan kept its breach budget")
    window_days: float = _f(
        "days", "length of the longest held-out window (backtest_days, cut at the trace's end)"
    )
    origin_step: str = _f("1", "origins every day, or every hour for a short trace")
    worst_breach_minutes: float = _f("min", "minutes in breach in the plan's worst window")
    worst_budget_minutes: float = _f("min", "that window's breach budget")
    above_hindsight: float = _f("1", "cost above the hindsight plans', over all windows")
    above_bound: float = _f("1", "cost above the instant-scaling lower bound, over all windows")
    beats_naive: int = _f(
        "1", "windows in which it was cheaper or less in breach than last week's fleet"
    )
    coverage_p95: float = _f("1", "share of held-out intervals within the forecast's P95")
    coverage_p99: float = _f("1", "share of held-out intervals within the forecast's P99")
    burst_hold_share: float = _f("1", "share of burst draws in which the plan kept its budget")
    burst_draws: int = _f("1", "burst draws replayed (on the first full held-out window)")
    how: str = _f("1", "how the choice was made and scored")
    left_out: tuple[str, ...] = _f(
        "1",
        "windows not scored (the trace does not cover them), and intervals left out of the "
        "forecast's coverage (slots the history before their origin never saw), why",
    )
    ties_naive: int = _f(
        "1", "windows in which it cost and breached as much as last week's fleet", default=0
    )
    burst_window_held: bool = _f(
        "1",
        "whether the burst draws' window kept its budget without a burst (else no draw can)",
        default=True,
    )
    plan_quantile: float = _f("1", "the traffic quantile the plan serves", default=0.99)
    naive_days: float = _f(
        "days", "the shortest history last week's fixed fleet was sized on (7: a whole week)",
        default=7.0,
    )  # fmt: skip
    coverage_plan: float = _f(
        "1", "share of held-out intervals within the forecast at the plan's quantile",
        default=math.nan,
    )  # fmt: skip


@dataclass(frozen=True)
class Check:
    """One check of the plan against its own evidence, or one of the article's boundaries."""

    name: str = _f("1", "which check")
    passed: bool = _f("1", "whether the plan passes it")
    finding: str = _f("1", "what was found, with its numbers")
    action: str = _f("1", "what to do about it (empty when it passed)")
    kind: str = _f("1", "own (the plan's evidence against itself) or article (a boundary)")


@dataclass(frozen=True)
class Alternative:
    """Another way to serve the same traffic, costed on the same inputs (not the answer)."""

    name: str = _f("1", "what the alternative is")
    monthly_usd: float = _f(
        "USD/month", "its cost a month, as replayed or planned (see words; NaN: not costed)"
    )
    breach_minutes_per_month: float = _f(
        "min/month", "its SLA-breach minutes a month (NaN: not costed)"
    )
    words: str = _f("1", "the alternative in a sentence, with its basis")
    status: str = _f(
        "1",
        "not_costed (no numbers: words say why), misses_sla (its own per-request check at the "
        "busiest slot misses the SLA: words say which bound), over_budget (replayed above the "
        "plan's breach budget) or within_budget; empty: a plan written before the field",
        default="",
    )


@dataclass(frozen=True)
class Answer:
    """What to deploy, what it costs and how sure the plan is; each field with its unit."""

    model: str = _f("1", "model served")
    gpu: str = _f("1", "GPU profile of every instance")
    tensor_parallel: int = _f("GPUs", "GPUs per instance")
    options_compared: int = _f(
        "1", "GPU and tensor-parallel options that met the SLA and were ranked"
    )
    runner_up: str = _f("1", "the next cheapest option (TP x GPU), or empty")
    runner_up_above: float = _f(
        "1", "the runner-up's extra cost as a share of the chosen's (NaN: no runner-up)"
    )
    not_compared: tuple[str, ...] = _f("1", "options left out of the ranking, each with why")
    sla: SLA = _f("s", "the latency bounds met together")
    binding: str = _f("1", "what sets the safe concurrency: latency, memory or measured_range")
    binding_metric: str = _f("1", "the SLA bound that binds (empty when memory does)")
    safe_concurrency: int = _f("requests", "requests in flight one instance holds under the SLA")
    memory_concurrency: int = _f("requests", "requests in flight memory holds (-1: not checked)")
    seq_len: int = _f("tokens", "tokens held per sequence (prompt + output) memory is checked at")
    per_instance_qps: float = _f("requests/s", "requests per second one instance serves")
    latency_model: str = _f(
        "1", "analytic, engine or measured: where the binding metric's latencies come from"
    )
    latency_error: float = _f(
        "1",
        "the latency model's held-out median error on the binding metric (NaN: measured "
        "latencies, see latency_error_basis)",
    )
    latency_error_basis: str = _f("1", "which held-out figures the error is from")
    latency_notes: tuple[str, ...] = _f("1", "what was done to measured latencies, one note each")
    prefix_cache_share: float = _f("1", "share of each instance's KV budget held by a prefix cache")
    prefix_hit_rate: float = _f("1", "share of prompt tokens the prefix cache serves (replayed)")
    slots: str = _f("1", "seasonal slots of the forecast (hour_of_day, hour_of_week)")
    slot_labels: tuple[str, ...] = _f("1", "each slot in words")
    traffic_quantile: float = _f("1", "quantile of the request rate the fixed part serves")
    target_qps: tuple[float, ...] = _f("requests/s", "demand to serve per slot at that quantile")
    fixed_instances: tuple[int, ...] = _f("instances", "instances the forecast needs per slot")
    bursts: Bursts = _f("1", "the burst model the plan used")
    burst_instances: int = _f("instances", "instances above the slot plan for bursts")
    burst_qps: float = _f("requests/s", "requests/s of bursts the burst buffer holds")
    policy: Policy = _f("1", "the autoscaling policy")
    advisory: Advisory = _f("1", "how the chosen policy moves the fleet in the replay")
    reserved_instances: int = _f("instances", "instances always running: reserve them")
    peak_instances: int = _f(
        "instances",
        "most instances up at once in the replay, serving or still starting (a start later "
        "cancelled counts while it starts): what a bound on the pool must allow",
    )
    peak_serving_instances: int = _f(
        "instances", "most instances ready (serving) at once in the replay"
    )
    cancelled_starts: int = _f(
        "instances", "instances the replay started and cancelled before they were ready"
    )
    on_demand_instance_hours: float = _f("instance·h/month", "instance-hours above the reserve")
    usd_per_gpu_hour: float = _f("USD/hour", "price of one GPU-hour the cost uses")
    monthly_usd: float = _f("USD/month", "the plan's cost a month")
    cost_includes: str = _f("1", "what the monthly cost includes and leaves out")
    breach_minutes_per_month: float = _f("min/month", "SLA-breach minutes a month, replayed")
    breach_budget_minutes: float = _f("min/month", "the breach budget a month")
    unserved_share: float = _f("1", "share of requests unserved in the replay")
    simulated_hours: float = _f("h", "hours of traffic replayed")
    filled_share: float = _f("1", "share of the replayed steps missing from the trace, filled")
    held_out: HeldOut | None = _f("1", "the plan's held-out record (None: no held-out window)")
    held_out_missing: str = _f("1", "why there is no held-out record (empty when there is one)")
    burst_test: BurstTest | None = _f("1", "the chosen run under one burst (None: no burst model)")
    checks: tuple[Check, ...] = _f("1", "the plan's own checks and the article's boundaries")
    settle_commands: str = _f("1", "benchmark commands that settle a close call (empty: none)")
    alternatives: tuple[Alternative, ...] = _f(
        "1", "other ways to serve, costed on the same inputs"
    )
    traffic: str = _f("1", "the forecast in words")
    inputs: str = _f("1", "the inputs the plan was built on")
    latency_choice: str = _f(
        "1",
        "why the binding bound was priced on its model (latency = 'auto'; else empty)",
        default="",
    )
    max_model_len: int = _f(
        "tokens",
        "the longest request one instance's KV cache holds, where shorter than the model's context "
        "(vLLM's --max-model-len, without which it refuses to start); 0: the context fits",
        default=0,
    )
    clock: str = _f(
        "1",
        "the clock slot_labels and the burst test's start are on: the trace's zone (empty: the "
        "trace does not say)",
        default="",
    )
    latency_band: str = _f(
        "1",
        "the latency model's held-out P10-P90 of measured / predicted latency, per SLA bound, the "
        "band below is priced at (empty: no band, e.g. measured latencies)",
        default="",
    )
    per_instance_qps_band: tuple[float, ...] = _f(
        "requests/s",
        "requests/s one instance serves if measured latency is at the band's slow end, then at "
        "its fast end (NaN: no load meets the SLA there; empty: no band)",
        default=(),
    )
    instances_band: tuple[float, ...] = _f(
        "instances",
        "instances the busiest slot's target needs at those two ends (NaN: none suffices)",
        default=(),
    )
    band_cheapest: tuple[str, ...] = _f(
        "1",
        "the cheapest option (TP x GPU) if latency is at the band's slow end, then at its fast "
        "end, ranked as the plan ranks (empty string: no option meets the SLA there)",
        default=(),
    )
    engine: str = _f(
        "1",
        "the serving engine the plan's latencies, commands and manifests are of (capnb's engine "
        "id: vllm-v1, vllm-v0, sglang, trtllm, tgi)",
        default="vllm-v1",
    )
    max_num_batched_tokens: int = _f(
        "tokens",
        "tokens the engine computes a step at most, as the config set it (0: the engine's default)",
        default=0,
    )
    ruled_out: tuple[str, ...] = _f(
        "1",
        "options that miss the SLA or cannot hold the workload in memory, per reason: how many "
        "and the nearest to meeting it (empty: none)",
        default=(),
    )
    operating_concurrency: int = _f(
        "requests",
        "requests in flight at which one instance serves per_instance_qps, at most "
        "safe_concurrency (0: not recorded)",
        default=0,
    )

    @property
    def failed(self) -> tuple[Check, ...]:
        """The plan's own checks it fails (held-out budget, bursts, close call, latency error)."""
        return tuple(c for c in self.checks if c.kind == "own" and not c.passed)

    def to_dict(self) -> dict:
        """Plain JSON-ready values (records as mappings, tuples as lists, NaN as None)."""
        return _plain(self)

    @classmethod
    def from_dict(cls, values: dict) -> Answer:
        """The record from :meth:`to_dict`'s mapping."""
        return _build(cls, values, "answer")


def _plain(value):
    if isinstance(value, SLA):
        return value.as_dict()
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _build(kind, value, where: str = ""):
    """``value`` (plain JSON) as ``kind``: records, tuples of records, floats (None: NaN).

    ``where`` names the field for an InputError (``answer.policy``): a record that is not a
    mapping, that lacks a field without a default or holds one the record does not have.
    """
    origin = typing.get_origin(kind)
    if kind is SLA:
        return SLA.from_mapping(value)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise InputError(
                f"not a capnb plan: its {where} is {type(value).__name__} {value!r:.60}, not a "
                f"mapping of {kind.__name__}'s fields"
            )
        hints = typing.get_type_hints(kind)
        unknown = [k for k in value if k not in hints]
        if unknown:
            raise InputError(
                f"not a capnb plan: {unknown[0]!r} is not a field of its {where} ({kind.__name__})"
            )
        missing = [
            f.name
            for f in dataclasses.fields(kind)
            if f.name not in value
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            more = f" (nor {len(missing) - 1} more of its fields)" if len(missing) > 1 else ""
            raise InputError(f"not a capnb plan: its {where} has no {missing[0]!r}{more}")
        return kind(**{k: _build(hints[k], v, f"{where}.{k}") for k, v in value.items()})
    if origin is tuple:
        (inner, *_) = typing.get_args(kind)
        if not isinstance(value, list | tuple):
            raise InputError(f"not a capnb plan: its {where} is {value!r:.60}, not a list")
        return tuple(_build(inner, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        return None if value is None else _build(args[0], value, where)
    if kind is float:
        if value is None:
            return math.nan
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InputError(f"not a capnb plan: its {where} is {value!r:.60}, not a number")
        return float(value)
    if kind is str and not isinstance(value, str):
        raise InputError(f"not a capnb plan: its {where} is {value!r:.60}, not text")
    if kind is bool and not isinstance(value, bool):
        raise InputError(f"not a capnb plan: its {where} is {value!r:.60}, not true or false")
    if kind is int:  # (a whole number written as 15.0 reads as 15)
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not float(value).is_integer()
        ):
            raise InputError(f"not a capnb plan: its {where} is {value!r:.60}, not a whole number")
        return int(value)
    return value


def units(record=Answer) -> dict[str, str]:
    """Each field's unit, nested records by ``parent.field`` (what ``plan.json`` lists)."""
    if record is SLA:
        return {f.name: "s" if f.name.endswith("_s") else "1" for f in dataclasses.fields(SLA)}
    return _by_field(record, "units", units)


def meanings(record=Answer) -> dict[str, str]:
    """Each field's meaning, with what a null, empty or sentinel value says, keyed as :func:`units`.

    The SLA's fields are its bounds (``sla.ttft_s``, ...), said under ``sla``.
    """
    return {} if record is SLA else _by_field(record, "long_name", meanings)


def _by_field(record, key: str, nested) -> dict[str, str]:
    """Each field's ``key`` metadata, then each nested record's by ``parent.field``."""
    out = {}
    hints = typing.get_type_hints(record)
    for f in dataclasses.fields(record):
        out[f.name] = f.metadata[key]
        for kind in (hints[f.name], *typing.get_args(hints[f.name])):
            if dataclasses.is_dataclass(kind):
                out.update({f"{f.name}.{k}": v for k, v in nested(kind).items()})
    return out


def answer(plan) -> Answer:
    """The typed answer of a plan (:func:`capnb.plan.build`, :func:`capnb.plan.load`).

    Also takes the mapping ``plan.json`` holds.

    Examples
    --------
    >>> plan = capnb.plan.build()  # doctest: +SKIP
    >>> a = capnb.plan.answer(plan)  # doctest: +SKIP
    >>> a.gpu, a.tensor_parallel, a.monthly_usd  # doctest: +SKIP
    """
    if isinstance(plan, Answer):
        return plan
    stored = plan.get("answer") if isinstance(plan, dict) else plan.attrs.get("answer")
    if stored is None:
        raise InputError("not a capnb plan: it carries no answer (build one with capnb.plan.build)")
    if isinstance(stored, str):
        try:
            stored = json.loads(stored)
        except json.JSONDecodeError as error:
            raise InputError(
                f"not a capnb plan: its answer is not JSON ({json_error_at(error)})"
            ) from None
    return _build(Answer, stored, "answer")

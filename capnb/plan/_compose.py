"""The plan's answer made from the steps' results, and the checks the plan holds itself to.

:func:`make_answer` reads what each step decided (the capacity step's option and fleet, the
elasticity step's policy and its cold-start rule, the forecast's burst model) and adds the plan's
own checks: is the GPU ranking a close call, is the latency model's held-out error small enough,
did the plan keep its breach budget on traffic it was not built on, and under the burst model's
bursts. :func:`with_held_out` adds the held-out record once the backtest has run.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import xarray as xr

from .. import glossary, units, words
from ..latency import OWN_RUN_MISS
from ._answer import (
    MEASURED_BASIS,
    Advisory,
    Answer,
    Bursts,
    BurstTest,
    Check,
    HeldOut,
    Policy,
    coverage_goal,
)
from ._config import PlanConfig
from ._steps import (
    _first,
    forecast_load,
    latency_model_of,
    own_calibration_of,
    own_calibrations,
    per_month,
    replay_hours,
)
from ._steps import budget_minutes as budget_of
from ._text import naive_words, ties_words, unscored_coverage_words

__all__ = ["LATENCY_ERROR_LIMIT", "make_answer", "with_held_out"]

#: A latency model whose held-out median error on the binding metric exceeds this is a check the
#: plan fails: its per-instance throughput may be off by as much.
LATENCY_ERROR_LIMIT = 0.25


def _per_slot(values: xr.DataArray) -> list:
    return [
        v.item()
        for v in values.transpose("slot", ...).values.reshape(values.sizes["slot"], -1)[:, 0]
    ]


def _policy(cfg: PlanConfig, advice, cold: float) -> Policy:
    """The chosen run's settings (:func:`chosen_policy`), with what the step decided of them."""
    from ._steps import chosen_policy

    chosen = chosen_policy(cfg, advice.selection)
    return Policy(
        name=chosen.name,
        scale_up_threshold=float(chosen.scale_up_threshold),
        cooldown_s=float(chosen.cooldown_s),
        min_instances=int(chosen.min_instances),
        buffer_instances=int(chosen.buffer_instances),
        kind=advice.kind,
        cold_start_s=float(cold),
        cold_start_vetoes=bool(advice.cold_start_vetoes),
    )


def _advisory(run) -> tuple[Advisory, str]:
    """The replay's advisory figures (:func:`capnb.elasticity.advise`), and its warning if it flaps."""
    from .. import elasticity

    view = elasticity.advise(run)
    figures = Advisory(
        scale_events_per_hour=float(view.scale_events_per_hour),
        reversals_per_day=float(view.reversals_per_day),
        flapping=bool(view.flapping),
        above_need_share=float(view.above_need_share),
        cold_starts_per_day=float(view.cold_starts_per_day),
    )
    return figures, elasticity.flapping_warning(view)


def _burst(run, without_minutes: float) -> BurstTest | None:
    """The one-burst replay's record; ``without_minutes``: the chosen run's breach over the trace."""
    if run is None:
        return None
    return BurstTest(
        multiplier=float(run.attrs["burst_multiplier"]),
        hours=float(run.attrs["burst_hours"]),
        start=str(run.attrs["burst_start"]),
        breach_minutes=float(run.breach_s) / 60,
        unserved_share=float(run.unserved_share),
        model=str(run.attrs["burst_model"]),
        added_minutes=max(0.0, float(run.breach_s) / 60 - without_minutes),
    )


def _burst_test_check(test: BurstTest, budget_minutes: float, a_month: float, cfg) -> Check:
    """Whether a month of the chosen run with one burst kept the month's breach budget.

    The in-sample test of the burst model (its middle-size burst on the trace); where held-out
    windows exist, their burst draws are the check instead (:func:`with_held_out`). The test
    replays the whole trace, so a month with it is the chosen run's month (``a_month``, minutes)
    plus the minutes the burst added.
    """
    month = a_month + test.added_minutes
    kept = month <= budget_minutes
    shown = words.minutes_figure(test.added_minutes)
    return Check(
        "burst_test", kept,
        f"its burst test ({test.multiplier:.3g}x for {words.duration(test.hours * 3600)}) added "
        f"{shown} minutes in breach to the replay's {a_month:,.0f} a month, {month:,.0f} "
        f"minutes a month with it against the month's budget of {budget_minutes:,.0f} minutes "
        f"({words.percent(test.unserved_share)} of requests unserved)",
        "" if kept else spares_action(cfg), "own",
    )  # fmt: skip


def _cold_start_finding(cold: float, tolerance_s: float) -> str:
    """The cold-start check's finding, as the article's rule reads (capnb.elasticity's veto)."""
    from ..elasticity._decision import cold_start_limit_s

    return (
        f"Cold start ({cold:.0f} s) is longer than half the latency budget "
        f"({cold_start_limit_s(tolerance_s):g} s of {tolerance_s:g} s: how long a request may wait "
        "to be served before it is dropped unserved, [elasticity] tolerance_s): pure elasticity "
        "cannot react to a burst in time."
    )


def _flat_check(fc: xr.Dataset) -> Check | None:
    """The article's boundary on flat traffic, in the forecast's own statement of it, or None.

    The forecast's ``flat`` attr ("yes"/"no") decides; the finding is its flat-traffic statement
    alone, not the other boundaries (too little history) beside it.
    """
    if fc.attrs.get("flat") != "yes":
        return None
    boundaries = str(fc.attrs.get("boundaries", ""))
    at = boundaries.find("Traffic is flat")
    finding = boundaries[at:] if at >= 0 else "Traffic is flat: planning on the mean would do."
    action = "a plan on the mean rate would do (traffic_quantile = 0.5)"
    return Check("flat_traffic", False, finding, action, "article")


def _article_checks(cfg, fc, chosen, advice, demand, cold) -> list[Check]:
    """The article's applicability checks that fire: the method holds, but a simpler one may do."""
    from .. import capacity

    checks = [] if (flat := _flat_check(fc)) is None else [flat]
    one = chosen.isel({d: 0 for d in chosen.dims if d == "slot"})
    applicability = capacity.applicability(one)
    if "adds little" in applicability:
        checks.append(Check("latency_curve", False, applicability,
                            "plan by memory and throughput", "article"))  # fmt: skip
    if advice.cold_start_vetoes:
        checks.append(Check(
            "cold_start", False,
            _cold_start_finding(cold, cfg.elasticity.tolerance_s),
            "hold fixed capacity plus an elastic buffer (the chosen policy does)", "article",
        ))  # fmt: skip
    checks += _trough_checks(cfg, demand)
    return checks


def _trough_checks(cfg, demand) -> list[Check]:
    """The article's "long troughs" check: dips far longer than any scale-down delay swept."""
    from .. import elasticity

    dips = elasticity.troughs(demand)
    # long: 4x the longest delay swept, and never under 4x the article's shortest (15 min): with
    # delays of 0 s, dips of a minute read "long troughs (up to 0.0 h)"
    delays = cfg.elasticity.cooldown_s
    if dips.size and float(dips.max()) > max(*delays, _ARTICLE_SHORTEST_DELAY_S) * 4:
        swept = "-".join(dict.fromkeys(f"{d / 60:g}" for d in (min(delays), max(delays))))
        return [Check(
            "long_troughs", False,
            f"Long troughs (up to {float(dips.max()) / 3600:.1f} h below the scale-down level): "
            "scaling down in them pays whatever the delay, so the scale-down delay matters little "
            f"here (the swept {swept} min).",
            "scale down in the troughs", "article",
        )]  # fmt: skip
    return []


#: The article's shortest scale-down delay (15-30 minutes of low load) [s].
_ARTICLE_SHORTEST_DELAY_S = 900.0


def _context_checks(cfg, workload) -> list[Check]:
    """Requests of the workload longer than the model's context, which vLLM rejects.

    Read on the whole log the workload was sampled from (``attrs["log_tokens"]``, which the
    plan's workload carries, sampled from the requests within the context alone); a workload
    without it is a whole log itself.
    """
    from .. import data

    spec = data.load_model(cfg.serving.model)
    lengths = workload.attrs.get("log_tokens")
    if lengths is None:
        lengths = (workload.prompt_tokens + workload.output_tokens).values
    beyond = spec.beyond_context(lengths)
    if beyond is None:
        return []
    over, longest, limit = beyond
    total = len(lengths)
    rejected = round(over * total)
    return [Check(
        "context_window", False,
        f"{rejected:,} of the workload's {total:,} requests ({words.percent(over)}; the longest "
        f"{longest:,} tokens, prompt + output) are longer than {spec.name}'s context of "
        f"{limit:,} tokens (vLLM's default max_model_len, read from its config), which vLLM "
        f"rejects: the plan counts them as rejected and prices the other {total - rejected:,}",
        "serve a model with a longer context, or plan on a workload whose requests fit "
        "([serving] workload)",
        "own",
    )]  # fmt: skip


def latency_error_check(named: str, metric: str, error: float, measure: str) -> Check:
    """Whether the latency model's held-out error is within :data:`LATENCY_ERROR_LIMIT`.

    The error is written in whole percent, with the digits that tell it apart from the limit
    where whole ones read as the limit (``25.3% (over 25%)``, not ``25% (over 25%)``).
    """
    passed = math.isfinite(error) and error <= LATENCY_ERROR_LIMIT
    shown = f"{error:.0%}" if math.isfinite(error) else "unknown"
    if shown == f"{LATENCY_ERROR_LIMIT:.0%}" and error != LATENCY_ERROR_LIMIT:
        shown = words.percent_against(error, LATENCY_ERROR_LIMIT)
    return Check(
        "latency_error", passed,
        f"the {named} model's held-out {metric.upper()} error is {shown}"
        + f" (over {LATENCY_ERROR_LIMIT:.0%})" * (not passed),
        "" if passed else measure,
        "own",
    )  # fmt: skip


def _latency_checks(cfg, cap, best, answer_kw, workload) -> tuple[list[Check], str]:
    """The close call and the latency model's error, and the benchmark commands that settle them."""
    from ._closecall import benchmark_commands, close_call, option_name

    metric = answer_kw["binding_metric"] or next(iter(cfg.sla.bounds))
    model_name = latency_model_of(cap, metric)
    if model_name == "measured":  # measured latencies: no model error to doubt
        return [], ""
    prompt, output = float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean())
    if best is None:
        return [], ""
    call = close_call(cap, best, model=answer_kw["model"], metric=metric, prompt_tokens=prompt,
                      output_tokens=output, latency_model=model_name,
                      own_gpus=list(own_calibrations(cap)))  # fmt: skip
    answer_kw["latency_error"] = call["latency_error"]
    answer_kw["latency_error_basis"] = call["latency_error_basis"]
    answer_kw["band_cheapest"] = call["band_cheapest"]
    checks, commands = [], call["settle_commands"]
    named = "analytic latency" if model_name == "analytic" else "serving-engine"
    measure = settle_words(
        call["settle_options"] if call["close"] else [],
        option_name(answer_kw["gpu"], answer_kw["tensor_parallel"]),
        own=bool(own_calibrations(cap)),
    )
    if answer_kw["options_compared"] > 1:
        gap = call["cost_gap_share"]
        checks.append(Check(
            "close_call", not call["close"],
            f"the runner-up ({answer_kw['runner_up']}, {gap:+.0%}) is "
            + ("within" if call["within_error"] else "beyond")
            + f" the {named} model's error"
            + "".join(f"; {name} would be the cheapest with latency at the {end} end of the "
                      "model's held-out band" for end, name in call["band_flips"]),
            measure if call["close"] else "",
            "own",
        ))  # fmt: skip
    checks.append(latency_error_check(named, metric, call["latency_error"], measure))
    if not checks[-1].passed and not commands:
        commands = benchmark_commands(cap, answer_kw["gpu"], answer_kw["tensor_parallel"],
                                      answer_kw["model"], prompt, output)  # fmt: skip
    return checks, commands


def settle_words(settled: list[str], chosen: str, own: bool = False) -> str:
    """What to benchmark: the options a close call names ("TP x GPU"), or the chosen one alone.

    ``own``: the plan was priced on your own runs, so its re-plan calibrates on the new ones.
    """
    then = f" and re-plan with {'--calibrate' if own else '--benchmark'}"
    if not settled:
        return f"benchmark {chosen} (the commands below){then}"
    gpus = {option.split(" x ", 1)[1] for option in settled}
    if len(settled) == 2 and len(gpus) == 2:
        return f"benchmark both GPUs (the commands below){then}"
    if len(settled) == 2:  # two degrees of one GPU
        return f"benchmark both options ({settled[0]} and {settled[1]}; the commands below){then}"
    return f"benchmark the {len(settled)} options ({', '.join(settled)}; the commands below){then}"


def _arrivals_checks(arrivals, policy: Policy, load: float,
                     thresholds: tuple[float, ...]) -> list[Check]:  # fmt: skip
    """Whether the chosen policy runs instances within what they serve under Poisson arrivals.

    ``arrivals``: :func:`capnb.capacity.arrivals` of the chosen instance, or None (not priced on
    the serving-engine model: no check). ``load``: the forecast's busiest slot over one
    instance's closed-loop requests/s. A fixed fleet runs its instances at that load over its size,
    warm spares included (the replay serves on them: they are ready instances), and so does the
    article's engine when the cold start vetoes its scale-ups (it never grows above them); the
    other policies up to their scale-up threshold (HPA's and Knative's target utilisation), as
    the policy's choice counts it (:func:`capnb.plan._origins.runs_up_to`). ``thresholds``: the
    scale-up thresholds swept, which the advice names.
    """
    from ._origins import holds_fixed, runs_up_to

    if arrivals is None:
        return []
    share = float(arrivals.headroom)
    held = policy.min_instances + policy.buffer_instances
    vetoed = policy.cold_start_vetoes
    target = runs_up_to(policy.name, float(policy.scale_up_threshold), held, load, vetoed)
    full = arrivals.latency.sel(share=1.0)
    at_full = ", ".join(
        f"{m.upper()} {float(v) * (1e3 if m != 'ttft' else 1):.3g} {'ms' if m != 'ttft' else 's'}"
        for m, v in zip(full.metric.values, full.values, strict=True)
    )
    qps = float(arrivals.attrs["per_instance_qps"])
    lowest = float(arrivals.share.min())
    meets = (
        f"meets the SLA up to {share:.0%} of its closed-loop {qps:.3g} requests/s"
        if share > 0
        else f"misses the SLA even at {lowest:.0%} of its closed-loop {qps:.3g} requests/s (the "
        "lowest share simulated)"
    )
    finding = (
        f"under Poisson arrivals (the serving-engine model, open loop) an instance {meets} (at "
        f"100 %: {at_full}); the {policy.name} policy runs instances up to {target:.0%} of it"
    )
    passed = target <= share + 1e-9
    if passed:
        action = ""
    elif share <= 0:
        action = (
            "loosen the SLA or plan on a lower per-instance rate: arrivals that do not wait for "
            "one another swing this instance past its SLA (long prompts queue behind each other)"
        )
    elif holds_fixed(policy.name, vetoed):
        more = max(held + 1, math.ceil(load / share - 1e-9))
        action = (
            f"hold {words.count(more, 'instance')} at the busiest slot (each then runs up to "
            f"{load / more:.0%} of its closed-loop rate), or plan on {share:.0%} of the "
            "per-instance rate"
        )
    else:
        below = [f"{t:g}" for t in sorted(thresholds) if t <= share + 1e-9]
        swept = (
            f"the swept {', '.join(below)} {'was' if len(below) == 1 else 'were'} not chosen"
            if below
            else f"the lowest swept is {min(thresholds):g}"
        )
        action = (
            f"scale up at a threshold at or below {share:.2g} ([elasticity] scale_up_threshold; "
            f"{swept}), or plan on {share:.0%} of the per-instance rate"
        )
    return [Check("arrivals", passed, finding, action, "own")]


def _replay_check(breach_minutes: float, budget_minutes: float, hours: float,
                  cfg: PlanConfig) -> Check:  # fmt: skip
    """Whether the chosen policy kept its breach budget replayed over the whole trace.

    A policy chosen out of sample is scored on held-out windows, each started from the fleet its
    first step needs; over the whole trace (from its first, quiet hour) the same settings may
    breach far more, and the answer's own breach figure then says what the checks must say too.
    Minutes a month (``breach_minutes``, ``budget_minutes``) over ``hours`` of replay.
    """
    passed = breach_minutes <= budget_minutes
    finding = (
        f"replayed over the trace ({hours:,.0f} h), the chosen policy was in SLA breach "
        f"{words.minutes_figure(breach_minutes)} minutes a month against a budget of "
        f"{words.minutes_figure(budget_minutes)}"
    )
    return Check("replay_budget", passed, finding, "" if passed else spares_action(cfg), "own")


#: The forecast's mean rate over the replayed trace's past which the plan says the traffic grew.
GROWTH_WARNING = 1.25


def _growth_check(fixed: list[int], run, tp: int, price: float, cfg: PlanConfig,
                  rates: tuple[float, float] = (math.nan, math.nan)) -> Check:  # fmt: skip
    """Whether the trace replayed is a fair sample of the days the forecast plans for.

    The replay prices the policy over the past; the forecast plans the coming days. Where even
    the forecast's quietest slot needs more instances than the replay ever ran at once, or the
    forecast's mean rate is more than :data:`GROWTH_WARNING` times the replayed trace's
    (``rates``: the forecast's mean and the trace's, requests/s; a young service growing 12 % a
    day, 5 days old, forecast 1.53x its past's mean while its quietest slot stayed within the
    replay's peak), the traffic grew (the forecast carried the growth forward) and the replayed
    cost is the past's: the check fails and says what a fleet following the forecast slot by
    slot costs (its mean instances x GPUs x the price, a month).
    """
    peak = int(run.ready_instances.max())
    quantile = f"P{100 * cfg.traffic.traffic_quantile:g}"
    ahead, past = rates
    ratio = ahead / past if past > 0 else math.nan
    above = not fixed or min(fixed) <= peak
    passed = above and not ratio > GROWTH_WARNING
    usd = float(np.mean(fixed)) * tp * price * glossary.HOURS_PER_MONTH if fixed else math.nan
    cost = f"about {usd:,.0f} USD a month" if math.isfinite(usd) else "more (no price)"
    grew = (
        f"the forecast's mean rate for the coming days is {ratio:.2f}x the replayed trace's "
        f"({words.rate(ahead)} against {words.rate(past)} requests/s)"
    )
    if not above:
        finding = (
            f"the {quantile} forecast for the coming days needs {min(fixed)}-{max(fixed)} "
            f"instances per slot, more in its quietest slot than the replay of the trace ever ran "
            f"at once ({peak})"
        )
    elif not passed:
        finding = grew
    if not passed:
        finding += (
            f": the traffic grew, so the replayed cost is the past's; a fleet following the "
            f"forecast slot by slot costs {cost}"
        )
    else:
        finding = (
            f"the {quantile} forecast's quietest slot needs "
            f"{words.count(min(fixed, default=0), 'instance')}, within the {peak} the replay "
            f"ran at once" + (f"; {grew}" if math.isfinite(ratio) else "")
        )
    action = "" if passed else (
        f"budget for the forecast's fleet ({cost}) and re-plan as the growth is confirmed")  # fmt: skip
    return Check("traffic_growth", passed, finding, action, "own")


def _held_context(cap, gpu: str, tp: int, model) -> int:
    """The longest request the chosen option's KV cache holds, where shorter than the context.

    0 where the context fits (or the latency model gives no KV cache): vLLM's own default.
    """
    from ._closecall import max_model_len

    capped = max_model_len(cap, gpu, int(tp), model)
    return 0 if capped is None else int(capped[0])


def make_answer(cfg: PlanConfig, *, plan, fc, cap, best, chosen, advice, run, burst, gpu, tp,
                cold, estimated, demand, workload, seq_len, unshardable, alternatives,
                inputs, bursts, arrivals=None) -> Answer:  # fmt: skip
    """The plan's answer from the steps' results (see :mod:`capnb.plan._answer`)."""
    from .. import data, forecast
    from ._closecall import option_name
    from ._steps import ruled_out, unmodelled

    del estimated, plan
    unpriced = (
        str(best.unpriced_options.item()) if best is not None and "unpriced_options" in best else ""
    )
    not_compared = [*unshardable.values()]
    if unmodelled(cap):
        not_compared.append(unmodelled(cap))
    if unpriced:
        not_compared.append(
            f"{unpriced} also meet{'s' if ', ' not in unpriced else ''} the SLA but the GPU "
            "catalog has no price for it (add a usd_per_gpu_hour to rank it)"
        )
    hit = float(_first(chosen.prefix_hit_rate)) if "prefix_hit_rate" in chosen else 0.0
    hours = replay_hours(run)
    month = per_month(hours)
    options = int(best.feasible_options) if best is not None else 1
    runner, above = "", math.nan
    binding_metric = str(_first(chosen.binding_metric)) if "binding_metric" in chosen else ""
    latency_model = latency_model_of(cap, binding_metric)
    if best is not None and options > 1:
        runner = option_name(best.runner_up_gpu.item(), best.runner_up_tensor_parallel)
        above = float(best.cost_gap) / float(best.cheapest_usd_per_hour)
    kw = dict(
        model=data.load_model(cfg.serving.model).name,
        gpu=gpu,
        tensor_parallel=int(tp),
        options_compared=options,
        runner_up=runner,
        runner_up_above=above,
        not_compared=tuple(not_compared),
        sla=cfg.sla,
        binding=str(_first(chosen.binding)),
        binding_metric=binding_metric,
        safe_concurrency=int(_first(chosen.safe_concurrency)),
        memory_concurrency=int(_first(chosen.max_concurrency)) if "max_concurrency" in chosen else -1,
        seq_len=int(seq_len),
        per_instance_qps=float(_first(chosen.per_instance_qps)),
        operating_concurrency=int(_first(chosen.operating_concurrency))
        if "operating_concurrency" in chosen else 0,
        latency_model=latency_model,
        latency_error=math.nan,
        latency_error_basis=f"{MEASURED_BASIS}{cap.attrs.get('latency_source', 'measured')}"
        if latency_model == "measured" else "",
        latency_notes=tuple(n for n in str(cap.attrs.get("notes", "")).split("\n") if n)
        + _own_run_notes(cap, gpu, int(cfg.serving.calibration_tensor_parallel), cfg.sla,
                         chosen_tensor_parallel=int(tp)),
        latency_choice=json.loads(cap.attrs.get("latency_choices", "{}")).get(binding_metric, ""),
        prefix_cache_share=float(cfg.serving.prefix_cache_share),
        prefix_hit_rate=hit,
        max_model_len=_held_context(cap, gpu, tp, cfg.serving.model),
        engine=cfg.serving.engine,
        max_num_batched_tokens=int(cfg.serving.max_num_batched_tokens),
        ruled_out=ruled_out(cap, cfg),
    )  # fmt: skip
    kw.update(_band_fields(cap, chosen, gpu))
    checks, commands = _latency_checks(cfg, cap, best, kw, workload)
    checks += _context_checks(cfg, workload)
    policy = _policy(cfg, advice, cold)
    advisory, flaps = _advisory(run)
    if flaps:
        checks.append(Check("flapping", False, flaps.split(";")[0],
                            "lengthen its scale-down window or raise its floor", "own"))  # fmt: skip
    load = forecast_load(fc, cfg, float(_first(chosen.per_instance_qps)))
    checks += _arrivals_checks(arrivals, policy, load, cfg.elasticity.scale_up_threshold)
    budget_minutes = budget_of(cfg)
    checks.append(_replay_check(float(run.breach_s) / 60 * month, budget_minutes, hours, cfg))
    reserved = policy.min_instances + policy.buffer_instances
    price = (
        float(run.attrs["usd_per_gpu_hour"])
        if run.attrs["usd_per_gpu_hour"] != "none"
        else math.nan
    )
    fixed = [int(v) for v in _per_slot(chosen.fixed_instances)]
    rates = (float(fc.mean_qps.mean()) if "mean_qps" in fc else math.nan, float(demand.mean()))
    checks.append(_growth_check(fixed, run, int(tp), price, cfg, rates))
    if (tested := _burst(burst, float(run.breach_s) / 60)) is not None:
        checks.append(_burst_test_check(tested, budget_minutes, float(run.breach_s) / 60 * month,
                                        cfg))  # fmt: skip
    gpu_hours = float(run.gpu_hours) * month
    on_demand = max(0.0, float(run.mean_instances) - reserved) * glossary.HOURS_PER_MONTH
    slots = [int(s) for s in fc.slot.values]
    kind = str(fc.attrs.get("slots", cfg.traffic.slots))
    return Answer(
        **kw,
        slots=kind,
        slot_labels=tuple(forecast.slot_label(s, kind) for s in slots),
        clock=forecast.slot_clock(fc),
        traffic_quantile=float(cfg.traffic.traffic_quantile),
        target_qps=tuple(float(v) for v in _per_slot(chosen.target_qps)),
        fixed_instances=tuple(fixed),
        bursts=Bursts(
            rate_per_month=float(bursts.rate_per_month),
            duration_s=tuple(float(v) for v in bursts.duration_s),
            multiplier=tuple(float(v) for v in bursts.multiplier),
            source=str(bursts.source),
        ),
        burst_instances=int(chosen.burst_instances.max()),
        burst_qps=float(fc.buffer_qps) if "buffer_qps" in fc else 0.0,
        policy=policy,
        advisory=advisory,
        reserved_instances=reserved,
        peak_instances=int(run.peak_instances),
        peak_serving_instances=int(run.ready_instances.max()),
        cancelled_starts=int(run.cancelled_starts),
        on_demand_instance_hours=on_demand,
        usd_per_gpu_hour=price,
        monthly_usd=float(run.usd) * month if "usd" in run else math.nan,
        cost_includes=(
            f"{gpu_hours:,.0f} GPU-hours a month: the {words.count(reserved, 'reserved instance')} "
            "all month "
            + (
                f"(a fixed fleet: none above {'it' if reserved == 1 else 'them'})"
                if policy.name == "fixed"
                else f"and the autoscaler's instances above {'it' if reserved == 1 else 'them'}"
            )
            + f", as replayed over {hours:,.0f} h of the trace, "
            f"at {price:g} USD per GPU-hour ({gpu}'s on-demand price in the GPU catalog, the price "
            "the GPUs were ranked by); not included: bursts the trace did not contain (see the "
            "burst test), committed-use discounts"
            + (
                " (see the mixed fleet)"
                if any(a.name.startswith("mixed fleet") for a in alternatives)
                else ""
            )
            + ", hosts, storage, network"
        ),
        breach_minutes_per_month=float(run.breach_s) / 60 * month,
        breach_budget_minutes=budget_minutes,
        unserved_share=float(run.unserved_share),
        simulated_hours=hours,
        filled_share=float(demand.attrs.get("filled_share", 0.0)),
        held_out=None,
        held_out_missing="",
        burst_test=tested,
        checks=tuple(checks + _article_checks(cfg, fc, chosen, advice, demand, cold)),
        settle_commands=commands,
        alternatives=tuple(alternatives),
        traffic=forecast.describe(fc),
        inputs=inputs,
    )


def _own_run_notes(cap: xr.Dataset, gpu: str, tp: int, sla, *,
                   chosen_tensor_parallel: int | None = None) -> tuple[str, ...]:  # fmt: skip
    """How the engine calibrated on the user's runs of ``tp`` x ``gpu`` reproduces them (in sample).

    ``tp``: the runs' degree (``calibration_tensor_parallel``), which the plan's chosen degree
    (``chosen_tensor_parallel``; None: the runs') need not be (the calibration prices the GPU at
    every degree); where it is not, the note says the own-run band (other rates and lengths at
    the runs' degree) does not cover it.

    The SLA's metrics at its quantile, as :func:`capnb.latency.calibrate` scored the runs it was
    fitted on; nothing where ``gpu`` is priced on the bundled calibration, or the runs state
    none of them.
    """
    own = own_calibration_of(cap, gpu)
    if own is None or not own.run_errors:
        return ()
    stat = f"p{sla.quantile * 100:g}"
    found = [(m, e, n) for m, st, e, n in own.run_errors if st == stat and m in sla.bounds]
    if not found:
        return ()
    errors = " and ".join(
        f"{words.signed_percent(e)} on {stat.upper()} {m.upper()}" for m, e, _ in found
    )
    runs = max(n for *_, n in found)
    worst = max(abs(e) for _, e, _ in found)
    advice = (
        ": it misses them by more than a quarter, so its answer is no surer than that; benchmark "
        "at the plan's concurrency and re-plan on those runs (the commands below), or on the "
        "runs as measured latencies (--benchmark instead of --calibrate: no engine model)"
        if worst > OWN_RUN_MISS
        else ""
    )
    chosen = chosen_tensor_parallel
    if chosen is not None and int(chosen) != int(tp):
        advice += (
            f"; the plan's {chosen} x {gpu} is a degree your runs did not measure: the own-run "
            f"band holds other rates and lengths at the runs' {tp} x {gpu}, not another degree "
            f"(the step's weight reads and overheads split differently over {chosen} GPUs), so "
            f"benchmark {chosen} x {gpu} and calibrate on those runs "
            f"(calibration_tensor_parallel = {chosen}, --calibrate-tensor-parallel {chosen})"
        )
    return (
        f"the engine calibrated on your runs of {tp} x {gpu} reproduces them, in sample, to a "
        f"median {errors} (simulated / measured - 1 over the {runs} runs it was fitted on){advice}"
        f"; {_moved_words(own, gpu, str(cap.attrs.get('engine', 'vllm-v1')))}",
    )


def _moved_words(own, gpu: str, engine: str) -> str:
    """The own-run fit's efficiencies beside the bundled fit's of that GPU and engine.

    A fit can reproduce runs of another GPU, model or degree than named in sample (A100 runs
    named H100: compute efficiency 24 % against the bundled 55 %, every run within 1 %), so the
    values it moved to are said: a far move is the sign to check what the runs were.
    """
    from ..latency import engine_calibration

    bundled = engine_calibration(gpu, engine)
    return (
        f"it puts {gpu}'s compute efficiency at {own.compute_efficiency:.0%} and its HBM "
        f"efficiency at {own.bandwidth_efficiency:.0%} of the catalog's (the bundled fit: "
        f"{bundled.compute_efficiency:.0%} and {bundled.bandwidth_efficiency:.0%}; far from "
        "these, check that the runs are of the GPU, model, degree and dtype named)"
    )


def _band_fields(cap: xr.Dataset, chosen: xr.Dataset, gpu: str) -> dict:
    """The chosen option's band: requests/s an instance and the busiest slot's instances at its ends.

    The slow end first (latency at the high ratio), then the fast end; none without a band. Its
    ratios are the own-run band's where ``gpu`` is priced on the user's runs.
    """
    if "per_instance_qps_low" not in chosen:
        return {}
    qps = (float(_first(chosen.per_instance_qps_low)), float(_first(chosen.per_instance_qps_high)))
    busiest = float(chosen.target_qps.max())
    counts = tuple(float(units.instances_needed(busiest, q)) if q > 0 else math.nan for q in qps)
    own = "own_band_ratios" in cap.attrs and gpu in own_calibrations(cap)
    ratios = cap.attrs.get("own_band_ratios" if own else "band_ratios", "")
    return {"latency_band": str(ratios),
            "per_instance_qps_band": qps, "instances_band": counts}  # fmt: skip


#: The plan's goals on held-out windows (issue 29): its budget kept in this share of them, at
#: most this far above the hindsight plans' cost, and the forecast at the plan's quantile covering
#: :func:`capnb.plan._answer.coverage_goal` (beside the record the text reads it from).
HELD_GOAL, COST_GOAL = 0.9, 0.3


def spares_action(cfg: PlanConfig) -> str:
    """What to do when the choice breached its budget: spares beyond the ones it tried.

    The floor is no setting: every share of the forecast's busiest-slot fleet up to the largest
    of :data:`capnb.plan._origins.FLOOR_SHARES` is tried already.
    """
    from ._origins import FLOOR_SHARES

    tried = sorted(int(n) for n in cfg.elasticity.buffer_instances)
    most = tried[-1]
    wider = sorted({*tried, 2 * most or 2, 4 * most or 4})
    return (
        f"hold more warm spares: set [elasticity] buffer_instances = {wider} (now {tried}; floors "
        f"up to {FLOOR_SHARES[-1]:g}x the forecast's busiest-slot fleet were tried already)"
    )


def _pooled(table: xr.Dataset, plan: str, against: str) -> float:
    cost = table.usd if bool(np.isfinite(table.usd).all()) else table.gpu_hours
    return float(cost.sel(plan=plan).sum() / cost.sel(plan=against).sum() - 1)


def _pooled_coverage(table: xr.Dataset, name: str) -> float:
    """Share of the held-out intervals within a forecast quantile.

    Each window's share is weighted by the observed intervals it counts (a plain mean of the
    shares weighed a one-day window as much as a seven-day one).
    """
    share, counted = table[name].values, table.coverage_intervals.values
    ok = np.isfinite(share) & (counted > 0)
    if not ok.any():
        return math.nan
    return float((share[ok] * counted[ok]).sum() / counted[ok].sum())


def _held_out_record(rolling, burst, quantile: float) -> HeldOut:
    table, origins = rolling.table, rolling.origins
    rec = table.sel(plan="recommended")
    breach, budget = rec.breach_min.values, table.budget_min.values
    # a window's breach against its budget (a zero budget: any breach is the worst)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(budget > 0, breach / budget, np.where(breach > 0, np.inf, 0.0))
    worst = int(np.argmax(ratio))
    share, draws, window_held = burst if burst is not None else (math.nan, 0, True)
    unit = origins.unit
    # the longest window scored: the first one's, cut where the trace ends (a 9-day trace's
    # first held-out window is 4 days however long backtest_days asks for)
    first = round(
        (table.origin.values.min() - origins.start) / np.timedelta64(origins.unit_ns, "ns")
    )
    longest = min(origins.window_units, origins.units - first)
    length = longest * (1 if unit == "day" else 1 / 24)
    return HeldOut(
        windows=table.sizes["origin"],
        held=int(rec.meets_budget.sum()),
        window_days=float(length),
        origin_step=unit,
        worst_breach_minutes=float(rec.breach_min[worst]),
        worst_budget_minutes=float(table.budget_min[worst]),
        above_hindsight=_pooled(table, "recommended", "hindsight"),
        above_bound=_pooled(table, "recommended", "instant-bound"),
        beats_naive=int(table.beats_naive.sum()),
        coverage_p95=_pooled_coverage(table, "coverage_p95"),
        coverage_p99=_pooled_coverage(table, "coverage_p99"),
        plan_quantile=float(quantile),
        coverage_plan=_pooled_coverage(table, "coverage_plan"),
        burst_hold_share=float(share),
        burst_draws=int(draws),
        burst_window_held=bool(window_held),
        how=(
            f"rolling origins every {unit} inside the trace: at each, the policy was chosen from "
            f"the windows before it alone ({rolling.choice_why.split(',')[0]} for the plan) and "
            f"scored on the window after it; {_held_out_span(origins, first)}"
        ),
        left_out=tuple(rolling.left_out),
        ties_naive=int(table.ties_naive.sum()) if "ties_naive" in table else 0,
        naive_days=float(table.naive_days.min()) if "naive_days" in table else 7.0,
    )


def _held_out_span(origins, first: int) -> str:
    """What the held-out windows cover together, and for a short trace what they cannot test."""
    from ._origins import HOURLY_BELOW_DAYS, SHORT_WINDOW_H

    covered = words.count(origins.units - first, origins.unit)
    # a short trace's origins are a window apart (they follow one another); daily ones overlap
    # where a window is longer than a day
    step = 1 if origins.unit == "day" else SHORT_WINDOW_H
    placed = "overlap" if origins.window_units > step else "follow one another"
    span = f"the windows {placed}, together the trace's last {covered}"
    if origins.unit == "day":
        return span
    return (
        f"{span} (the trace spans {origins.span_h:.0f} hours, under the {HOURLY_BELOW_DAYS} days "
        "whole-day windows need: no whole day is held out, so the daily cycle is not tested out "
        "of sample)"
    )


def _burst_window_words(held: HeldOut) -> str:
    """Said when the draws' window breached its budget without a burst: no draw could keep it."""
    if held.burst_window_held:
        return ""
    return ", on a held-out window it breached without a burst too (a draw adds to that breach)"


def _coverage_check(held: HeldOut) -> Check:
    """Whether the forecast at the plan's quantile covered the held-out intervals within its goal.

    The goal is :func:`capnb.plan._answer.coverage_goal`'s: P99 97-99.5 %, P95 93-97 %.
    """
    low, high = coverage_goal(held.plan_quantile)
    if not math.isfinite(held.coverage_plan):  # every held-out window in a hole of the trace
        return Check(
            "forecast_coverage", False,
            unscored_coverage_words(held.plan_quantile),
            "give a trace that covers the held-out days", "own",
        )  # fmt: skip
    covered = low <= held.coverage_plan <= high
    shown = words.percent_against(held.coverage_plan, low, high)
    return Check(
        "forecast_coverage", covered,
        f"its forecast's {words.quantile(held.plan_quantile)} covered {shown} of held-out "
        f"intervals (goal {_goal_percent(low)}-{_goal_percent(high)})",
        "" if covered else "a longer history calibrates it better", "own",
    )  # fmt: skip


def _goal_percent(bound: float) -> str:
    """A goal's end as a percentage with the decimals it has (up to 4): ``97%``, ``99.5%``.

    P99's goal reads ``97%-99.5%``, P95's ``93%-97%``, P97.5's ``95.5%-98.75%``.
    """
    digits = 0
    exact = round(bound * 100, 6)
    while digits < 4 and round(exact, digits) != exact:
        digits += 1
    return f"{exact:.{digits}f}%"


#: The checks :func:`with_held_out` writes (a record passed again has its old ones replaced).
HELD_OUT_CHECKS = frozenset({"held_out", "held_out_budget", "held_out_cost", "held_out_naive",
                             "forecast_coverage", "burst_draws"})  # fmt: skip


def with_held_out(record: Answer, rolling, cfg: PlanConfig, burst) -> Answer:
    """The answer with its held-out record and the checks on it.

    ``rolling``: the rolling-origin record (:func:`capnb.plan._origins.rolling`) or why there is
    none; ``burst``: ``(share, draws, held)`` of the burst replays
    (:func:`capnb.plan._origins.held_out_bursts`), or None.
    """
    own = [c for c in record.checks if c.name not in HELD_OUT_CHECKS]
    if isinstance(rolling, str):
        action = (
            "set backtest_days (7 holds out the last week)"
            if cfg.elasticity.backtest_days == 0
            else "give a longer trace (two days at least; eight for whole days held out)"
        )
        missing = Check("held_out", False, f"its policy was chosen on the trace itself, with no "
                        f"held-out record ({rolling})", action, "own")  # fmt: skip
        return dataclasses.replace(record, held_out=None, held_out_missing=rolling,
                                   checks=(missing, *own))  # fmt: skip
    held = _held_out_record(rolling, burst, cfg.traffic.traffic_quantile)
    n = held.windows
    checks = [
        Check("held_out_budget", held.held >= HELD_GOAL * n,
              f"it kept its breach budget in {held.held} of {n} held-out windows (worst: "
              f"{words.minutes_against(held.worst_breach_minutes, held.worst_budget_minutes)})",
              "" if held.held >= HELD_GOAL * n else spares_action(cfg), "own"),
        Check("held_out_cost", held.above_hindsight <= COST_GOAL,
              f"it cost {words.signed_percent(held.above_hindsight)} against the hindsight plans",
              "" if held.above_hindsight <= COST_GOAL else "a longer history narrows the choice",
              "own"),
        Check("held_out_naive", held.beats_naive == n,
              f"it beat {naive_words(held.naive_days)} (on cost or breach) in {held.beats_naive} "
              f"of {n}" + ties_words(held.ties_naive),
              "" if held.beats_naive == n else "compare with a fixed fleet for "
              + ("last week's P99" if held.naive_days >= 7 else "the history's P99"),
              "own"),
    ]  # fmt: skip
    checks.append(_coverage_check(held))
    if held.burst_draws and math.isfinite(held.burst_hold_share):
        enough = held.burst_hold_share >= 1 - cfg.traffic.exceed_probability
        checks.append(Check(
            "burst_draws", enough,
            f"it kept its budget in {held.burst_hold_share:.0%} of {held.burst_draws} burst draws"
            + _burst_window_words(held),
            "" if enough else spares_action(cfg), "own",
        ))  # fmt: skip
        # the held-out draws score the burst model out of sample: the one-burst test steps aside
        own = [c for c in own if c.name != "burst_test"]
    return dataclasses.replace(record, held_out=held, held_out_missing="",
                               checks=(*checks, *own))  # fmt: skip


def export_check(record: Answer, demand, cfg: PlanConfig, gpu: str) -> Check:
    """Whether an object ``capnb export`` writes replays as the chosen run, and if not, how it does.

    The objects are :func:`capnb.plan.manifests` of the answer's choice; the one that holds the
    chosen policy (knative.yaml for Knative, hpa.yaml otherwise) is replayed on the plan's demand
    when it is a different run (Knative's warm spares folded into min-scale, a policy with no
    Kubernetes form), its SLA-breach minutes a month set against the chosen run's and the budget.
    """
    from .. import elasticity
    from ._manifests import manifests, policy_choice

    objects = manifests(policy_choice(record))
    exact = [f"{kind}.yaml" for kind, same in objects.exact.items() if same]
    if exact:
        return Check("export", True, f"{', '.join(exact)} replay(s) as the chosen run", "", "own")
    kind = "knative" if record.policy.name == "knative" else "hpa"
    run = elasticity.simulate(
        demand, step_s=cfg.elasticity.step_s, cold_start_s=record.policy.cold_start_s,
        tolerance_s=cfg.elasticity.tolerance_s, gpu=gpu, **objects.replays[kind],
    )  # fmt: skip
    breach = float(run.breach_s) / 60 * per_month(replay_hours(run))
    passed = breach <= record.breach_budget_minutes
    # the note that says why: a policy the object cannot hold, or a value Kubernetes caps
    why = next(
        (n for n in objects.notes[kind] if "different run" in n or " is written as " in n),
        "a different run",
    )
    return Check(
        "export",
        passed,
        f"no object capnb export writes is the chosen run: {kind}.yaml ({why}) replays with "
        f"{words.minutes(breach)} of SLA breach a month against the chosen run's "
        f"{words.minutes(record.breach_minutes_per_month)} (budget "
        f"{words.minutes(record.breach_budget_minutes)})",
        ""
        if passed
        else "plan with a policy the cluster objects hold exactly (Knative without warm spares, "
        "or the HPA) in [elasticity] policies / buffer_instances",
        "own",
    )

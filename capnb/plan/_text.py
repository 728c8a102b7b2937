"""The plan's answer in words: a rendering of the record, deciding nothing.

:func:`render_text` is what :func:`capnb.plan.describe` prints and the command line shows; the
report's first page renders the same record as HTML (:func:`capnb.report.summary_html`). Both ask
the record for every number, and the helpers here (:func:`headline`, :func:`fleet_words`, ...)
give the report the same sentences.
"""

from __future__ import annotations

import math

from .. import words
from ..records import ENGINES
from ._answer import MEASURED_BASIS, Answer, coverage_goal
from ._servers import server_of

__all__ = ["render_text", "sections"]


def _span(values, noun: str) -> str:
    low, high = min(values), max(values)
    if noun == "instance":
        return words.count(low, noun) if low == high else f"{low:,}-{high:,} {noun}s"
    a, b = words.rate(low), words.rate(high)
    return f"{a} {noun}" if a == b else f"{a}-{b} {noun}"


def ties_words(ties: int) -> str:
    """`` (tied in N: ...)`` for held-out windows where the plan did exactly what last week's did."""
    if not ties:
        return ""
    return (f" (tied in {ties}: there its cost and its minutes in breach were last week's fixed "
            "fleet's, which would have done as well)")  # fmt: skip


def naive_words(history_days: float) -> str:
    """The naive fixed fleet by name: where an origin had under a week before it, what it read."""
    if history_days >= 7:
        return "last week's fixed fleet"
    return (
        "last week's fixed fleet (sized on the P99 of the whole history before each origin: "
        f"{history_days:.1f} days at the first, under a week)"
    )


def _slot_noun(kind: str) -> str:
    return kind.replace("_", " ")


def headline(a: Answer) -> str:
    """One sentence: the plan fails its own checks (which, and what to do), or it passes them."""
    failed = a.failed
    if not failed:
        return (
            "The plan passes its own checks (held-out budget, bursts, GPU ranking, latency model)."
        )
    findings = [c.finding for c in failed]
    actions = list(dict.fromkeys(c.action for c in failed if c.action))
    listed = findings[0] if len(findings) == 1 else f"{', '.join(findings[:-1])} and {findings[-1]}"
    todo = actions[0] if len(actions) == 1 else f"{', '.join(actions[:-1])}, and {actions[-1]}"
    count = "one of its own checks" if len(failed) == 1 else f"{len(failed)} of its own checks"
    return f"Caution: the plan fails {count}: {listed}; {todo}."


def _curve_ends(a: Answer) -> str:
    """Why the safe concurrency is the curve's last point: a measured or a modelled curve's end."""
    if a.latency_model == "measured":
        return (
            "the measured curve ends before any bound binds (capnb does not extrapolate: "
            "benchmark higher concurrencies to find more)"
        )
    model, done = {
        "engine": ("the serving-engine model's", "simulated"),
        "analytic": ("the analytic model's", "computed"),
    }.get(a.latency_model, (f"the {a.latency_model} model's", "computed"))
    return (
        f"{model} curve, {done} up to {words.count(a.safe_concurrency, 'request')} in flight, "
        "ends before any bound binds (capnb searches no further; more may meet the SLA: "
        "benchmark higher concurrencies to find out)"
    )


def serve_words(a: Answer) -> str:
    """What one instance is and serves, and why this GPU."""
    from ..memory._prefix import routing_assumed

    why = ""
    if a.options_compared > 1:
        why = (
            f" (the cheapest of {a.options_compared} options that meet the SLA; next: "
            f"{a.runner_up} at {a.runner_up_above:+.0%})"
        )
    binds = {
        "latency": f"the {a.binding_metric.upper()} bound binds",
        "memory": "memory binds before latency",
        "measured_range": _curve_ends(a),
    }.get(a.binding, a.binding)
    memory = f"; memory holds {a.memory_concurrency:,}" if a.memory_concurrency >= 0 else ""
    left = f" Not compared: {'; '.join(a.not_compared)}." if a.not_compared else ""
    left += f" Ruled out: {'; '.join(a.ruled_out)}." if a.ruled_out else ""
    cache = (
        f" A prefix cache holds {a.prefix_cache_share:.0%} of each instance's KV budget and serves "
        f"{a.prefix_hit_rate:.1%} of prompt tokens (replayed from the workload's block hashes: "
        f"{routing_assumed(1, 'random')}; the fleet's instances each hold their own cache, and "
        "how requests are routed among them changes the rate: capnb.memory.prefix_routing "
        "gives it per routing)."
        if a.prefix_cache_share > 0
        else ""
    )
    server = "vLLM" if a.engine.startswith("vllm") else ENGINES[a.engine]
    held = (
        f" with {server}'s {server_of(a.engine).context} {a.max_model_len} (its KV cache holds "
        "no longer request than that, less than the model's context; longer ones are refused)"
        if a.max_model_len
        else ""
    )
    # past a throughput knee the best rate is served below the safe concurrency
    held_up_to = (
        f"{words.count(a.operating_concurrency, 'request')} in flight, and holds up to "
        f"{a.safe_concurrency:,}"
        if 0 < a.operating_concurrency < a.safe_concurrency
        else f"{words.count(a.safe_concurrency, 'request')} in flight"
    )
    return (
        f"Serve {a.model} on {a.tensor_parallel} x {a.gpu} per instance{held}{why}. One instance "
        "serves "
        f"{words.rate(a.per_instance_qps)} requests/s within {a.sla}, at "
        f"{held_up_to} ({binds}{memory}).{cache}{left}"
    )


def latency_words(a: Answer) -> str:
    """Where the latencies come from, and how far they were off on data they never saw."""
    model = {
        "analytic": "the calibrated analytic latency model",
        "engine": "the serving-engine model",
        "measured": "measured latencies",
    }[a.latency_model]
    notes = "".join(f" Note: {n}." for n in a.latency_notes)
    if a.latency_model == "measured":
        basis = a.latency_error_basis
        source = basis.removeprefix(MEASURED_BASIS) if basis.startswith(MEASURED_BASIS) else ""
        return f"Latencies: {f'{source}; no model error' if source else model}.{notes}"
    error = f"{a.latency_error:.0%}" if math.isfinite(a.latency_error) else "unknown"
    metric = (a.binding_metric or next(iter(a.sla.bounds))).upper()
    chosen = f" Why this model for {metric}: {a.latency_choice}." if a.latency_choice else ""
    return (
        f"Latencies: {model}; its held-out median {metric} error is {error} "
        f"({a.latency_error_basis}).{chosen}{band_words(a)}{notes}"
    )


def band_words(a: Answer) -> str:
    """The answer's band: requests/s an instance and the busiest slot's instances at its two ends."""
    if not a.per_instance_qps_band:
        return ""
    (slow, fast), (most, fewest) = a.per_instance_qps_band, a.instances_band
    gpu = f"{a.tensor_parallel} x {a.gpu}"

    def end(qps: float, count: float, name: str) -> str:
        if not math.isfinite(qps):
            return f"no load on {gpu} meets the SLA at the {name} end"
        return (f"{words.rate(qps)} requests/s an instance ({words.count(count, 'instance')} at "
                f"the busiest slot) at the {name} end")  # fmt: skip

    rate = f"{end(slow, most, 'slow')}, {end(fast, fewest, 'fast')}"
    return (
        f" If measured latency is off as the model's held-out P10-P90 ({a.latency_band} times "
        f"predicted): {rate}."
    )


def policy_words(a: Answer) -> str:
    """The policy with the settings the replay used."""
    p = a.policy
    name = words.POLICY_NAMES[p.name]
    if p.name == "fixed":
        spares = (
            f" and {words.count(p.buffer_instances, 'warm spare')}" if p.buffer_instances else ""
        )
        return f"a {name} of {words.count(p.min_instances, 'instance')}{spares}"
    settings = []
    if math.isfinite(p.scale_up_threshold):
        target = "scale up above load" if p.name in ("article", "fixed_elastic") else "target"
        settings.append(f"{target} {p.scale_up_threshold:g}")
    settings.append(f"scale-down delay {words.duration(p.cooldown_s)}")
    settings.append(f"floor {words.count(p.min_instances, 'instance')}")
    if p.buffer_instances:
        settings.append(words.count(p.buffer_instances, "warm spare"))
    return f"{name} ({', '.join(settings)})"


def fleet_words(a: Answer) -> str:
    """The one fleet: what to reserve, how the autoscaler grows it, what the forecast needs."""
    per = f"per {_slot_noun(a.slots)}"
    plan = f"P{100 * a.traffic_quantile:g}"
    need = f"{_span(a.fixed_instances, 'instance')} {per} for the {plan} forecast " + (
        f"({_span(a.target_qps, 'requests/s')})"
    )
    bursts = (
        f", and up to {words.count(a.burst_instances, 'more instance')} in a burst "
        f"({words.rate(a.burst_qps)} requests/s)"
        if a.burst_instances
        else ""
    )
    if a.policy.name == "fixed":
        short = max(a.fixed_instances, default=0) + a.burst_instances > a.reserved_instances
        return (
            f"Fleet: reserve {words.count(a.reserved_instances, 'instance')} "
            f"({words.count(a.reserved_instances * a.tensor_parallel, f'{a.gpu} GPU')}) and run "
            f"{'it' if a.reserved_instances == 1 else 'them'} all month, "
            f"{policy_words(a)}; the forecast needs {need}{bursts}"
            + (", more than a fixed fleet holds (it adds none)" if short else "")
            + "."
        )
    least = min(a.fixed_instances, default=0)
    floor = (
        f"; the P{100 * a.traffic_quantile:g} forecast needs at least "
        f"{words.count(least, 'instance')} in every {_slot_noun(a.slots)} slot, those above the "
        "reserve on demand (reserving more is the mixed fleet's question)"
        if least > a.reserved_instances
        else ""
    )
    # a floor over the forecast's peak and burst buffer leaves the autoscaler nothing to add
    top = max(a.fixed_instances, default=0) + a.burst_instances
    covered = a.peak_instances <= a.reserved_instances and top <= a.reserved_instances
    # the article's engine vetoes every scale-up when the cold start is over half the budget
    vetoed = a.policy.name == "article" and a.policy.cold_start_vetoes
    if covered:
        grows = "adds none, its floor covering"
    elif vetoed:
        grows = (
            f"adds none (the {a.policy.cold_start_s:g} s cold start, over half the latency "
            "budget, vetoes its scale-ups), though load needs"
        )
    else:
        grows = "adds on-demand instances above the reserve as load needs them; load needs"
    return (
        f"Fleet: reserve {words.count(a.reserved_instances, 'instance')} "
        f"({words.count(a.reserved_instances * a.tensor_parallel, f'{a.gpu} GPU')}, always "
        f"running){floor}; "
        f"{policy_words(a)} {grows} {need}{bursts}; at most "
        f"{words.count(a.peak_serving_instances, 'instance')} served at once in the replay"
        f"{_starting_words(a)}, with {_events_words(a)}."
    )


def _events_words(a: Answer) -> str:
    """The replay's scale events, reversals and cold starts: a day's, or a trace under a day's own.

    A replay shorter than a day says its counts in its own hours (three reversals in two hours are
    not '36 a day', which the flapping limit of one a day would read otherwise).
    """
    v, hours = a.advisory, a.simulated_hours
    flaps = " (it flaps)" if v.flapping else ""
    if not hours < 24:
        return (f"{24 * v.scale_events_per_hour:,.1f} scale events, {v.reversals_per_day:,.1f} "
                f"reversals{flaps} and {v.cold_starts_per_day:,.1f} cold starts a day")  # fmt: skip
    events = words.count(round(v.scale_events_per_hour * hours), "scale event")
    flips = words.count(round(v.reversals_per_day * hours / 24), "reversal")
    starts = words.count(round(v.cold_starts_per_day * hours / 24), "cold start")
    return f"{events}, {flips}{flaps} and {starts} in the trace's {hours:g} hours"


def _starting_words(a: Answer) -> str:
    """The pool's peak counting instances still starting, where it is above the serving peak."""
    if a.peak_instances <= a.peak_serving_instances:
        return ""
    cancelled = (
        f"; {words.count(a.cancelled_starts, 'start')} "
        f"{'was' if a.cancelled_starts == 1 else 'were'} cancelled before ready"
        if a.cancelled_starts
        else ""
    )
    return f" ({a.peak_instances:,} up at once counting those still starting{cancelled})"


def cost_words(a: Answer) -> str:
    """The one monthly cost, what it includes, and the breach it buys."""
    cost = (
        f"{a.monthly_usd:,.0f} USD a month"
        if math.isfinite(a.monthly_usd)
        else f"not priced ({a.gpu} has no price in the GPU catalog)"
    )
    filled = (
        f" {a.filled_share:.1%} of the trace was missing; the replay filled those steps with "
        "their slot's median demand."
        if a.filled_share
        else ""
    )
    # the replay is of the trace the policy was chosen on: in sample, whatever its record held out
    held = "; the held-out record says how it did on windows it never saw" if a.held_out else ""
    return (
        f"Cost: {cost} ({a.cost_includes}). SLA breach in that replay (in sample: the trace the "
        f"policy was chosen on{held}): "
        f"{words.minutes_figure(a.breach_minutes_per_month)} minutes a month against a budget "
        f"of {words.minutes_figure(a.breach_budget_minutes)}; "
        f"{a.unserved_share:.2%} of requests unserved.{filled}"
    )


def held_out_words(a: Answer) -> str:
    """The plan's record on windows its choices never saw."""
    h = a.held_out
    if h is None:
        return f"Held out: none: its policy was chosen on the trace itself ({a.held_out_missing})."
    span, unit = (h.window_days, "day") if h.origin_step == "day" else (h.window_days * 24, "hour")
    length = f"{span:g} {unit}{'' if span == 1 else 's'}"
    bursts = (
        f"; with bursts drawn from its burst model it kept its budget in "
        f"{h.burst_hold_share:.0%} of {h.burst_draws} draws"
        + ("" if h.burst_window_held else ", on a window it breached without a burst too")
        if h.burst_draws and math.isfinite(h.burst_hold_share)
        else ""
    )
    left = f" Not scored: {'; '.join(h.left_out)}." if h.left_out else ""
    worst = words.minutes_against(h.worst_breach_minutes, h.worst_budget_minutes)
    above = words.signed_percent(h.above_hindsight)
    return (
        f"Held out: the plan kept its breach budget in {h.held} of {h.windows} held-out windows of "
        f"up to {length} (worst: {worst}), at {above} against the hindsight "
        f"plans and {words.signed_percent(h.above_bound)} above the instant-scaling bound, "
        f"beating {naive_words(h.naive_days)} in {h.beats_naive} of {h.windows}"
        f"{ties_words(h.ties_naive)}; "
        f"{_coverage_words(h)}{bursts}. "
        f"How: {h.how}.{left}"
    )


def unscored_coverage_words(quantile: float) -> str:
    """Why a held-out record has no coverage: no held-out interval was observed."""
    return (
        f"no held-out interval was observed to score its forecast's {words.quantile(quantile)} on"
    )


def _coverage_words(h) -> str:
    """The forecast's coverage at the plan's quantile against its goal, and the other quantile's.

    "its forecast's P99 covered 95.8% (P95 91.0%) of held-out intervals"; or that no held-out
    interval was observed to score.
    """
    if h.coverage_plan is None:  # a record from before the plan's own quantile was scored
        return (
            f"its forecast's P99 covered "
            f"{words.percent_against(h.coverage_p99, *coverage_goal(0.99))} "
            f"(P95 {words.percent_against(h.coverage_p95, *coverage_goal(0.95))}) of held-out "
            "intervals"
        )
    if not math.isfinite(h.coverage_plan):  # every held-out window in a hole of the trace
        return unscored_coverage_words(h.plan_quantile)
    other = (0.95, h.coverage_p95) if h.plan_quantile != 0.95 else (0.99, h.coverage_p99)
    return (
        f"its forecast's {words.quantile(h.plan_quantile)} covered "
        f"{words.percent_against(h.coverage_plan, *coverage_goal(h.plan_quantile))} "
        f"({words.quantile(other[0])} "
        f"{words.percent_against(other[1], *coverage_goal(other[0]))}) of held-out intervals"
    )


def burst_words(a: Answer) -> str:
    """The chosen run under one burst of the plan's burst model."""
    b = a.burst_test
    if b is None:
        return "Burst test: none (the burst model draws no bursts)."
    # the replay with the burst runs the whole trace: what the burst added is over its replay
    added = (
        f", {words.minutes_figure(b.added_minutes)} more than without"
        if math.isfinite(b.added_minutes)  # (a record saved before the figure was kept)
        else ""
    )
    # the breach with the digits of what the burst added (whole from 10 up, else 2 significant)
    breach = words.minutes_figure(b.breach_minutes)
    breach += " minute" if breach == "1" else " minutes"
    return (
        f"Burst test: one burst of {b.multiplier:.3g}x for {words.duration(b.hours * 3600)} from "
        f"{words.when(b.start)}{' ' + a.clock if a.clock else ''} (the middle size of {b.model}): "
        f"{breach} in breach over the {a.simulated_hours:,.0f} h of the "
        f"trace replayed with it{added}; "
        f"{words.percent(b.unserved_share)} of requests unserved."
    )


def sections(a: Answer) -> dict[str, str]:
    """The answer's paragraphs by name, each a sentence or two with its numbers.

    ``serve``, ``headline``, ``fleet``, ``cost``, ``held_out``, ``burst``, ``latency`` and, when
    there are any, ``settle`` (benchmark commands), then ``traffic``, the article's checks
    (``check_<name>``) and the alternatives (``alternative_<n>``). :func:`render_text` joins them;
    the report typesets the same ones.
    """
    out = {
        "serve": serve_words(a),
        "headline": headline(a),
        "fleet": fleet_words(a),
        "cost": cost_words(a),
        "held_out": held_out_words(a),
        "burst": burst_words(a),
        "latency": latency_words(a),
    }
    if a.settle_commands:
        out["settle"] = "To settle the latency, benchmark:\n" + a.settle_commands
    out["traffic"] = f"Traffic: {a.traffic}"
    for c in a.checks:
        if c.kind == "article":
            out[f"check_{c.name}"] = f"Check: {c.finding}"
    for i, alt in enumerate(a.alternatives):
        out[f"alternative_{i}"] = f"Alternative, {alt.name}: {alt.words}"
    return out


def render_text(a: Answer) -> str:
    """The whole answer as text, one paragraph a line (what :func:`capnb.plan.describe` returns)."""
    return "\n".join(sections(a).values())

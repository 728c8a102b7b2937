"""The plan in words: the article's applicability checks and the recommendation.

Everything here reads decisions the steps made and stored (the capacity step's cheapest option
over the day and its fleet, the elasticity step's recommendation); nothing is decided again.
"""

from __future__ import annotations

import numpy as np

from .. import _words, glossary


def _checks(cfg, fc, chosen, advice, demand, estimated) -> list[str]:
    """The article's applicability checks, as sentences (empty when the full method pays)."""
    from .. import capacity, elasticity

    checks = []
    flat = fc.attrs.get("boundary_flat") or fc.attrs.get("flat")
    statements = " ".join(
        str(v) for k, v in fc.attrs.items() if "boundar" in k or k in ("flat", "history")
    )
    if (
        flat in (True, "yes", "True")
        or "mean suffices" in statements
        or "flat" in statements.lower()
    ):
        checks.append(
            f"Flat traffic: {statements.strip()}"
            if statements.strip()
            else "Flat traffic: planning on the mean would do."
        )
    applicability = capacity.applicability(chosen.isel(slot=0) if "slot" in chosen.dims else chosen)
    if "adds little" in applicability:
        checks.append(applicability)
    if estimated > cfg.tolerance_s / 2:
        checks.append(
            f"Cold start ({estimated:.0f} s) exceeds half the {cfg.tolerance_s:g} s latency budget: pure "
            "elasticity cannot react to a burst in time; hold fixed capacity plus an elastic buffer."
        )
    dips = elasticity.troughs(demand)
    if dips.size and float(dips.max()) > max(cfg.cooldown_s) * 4:
        checks.append(
            f"Long troughs (up to {float(dips.max()) / 3600:.1f} h below the scale-down level): "
            "scaling down in them pays whatever the delay, so a scale-down cool-down is unnecessary "
            f"here (the swept {min(cfg.cooldown_s) / 60:g}-{max(cfg.cooldown_s) / 60:g} min change little)."
        )
    return checks


def _when(stamp: str) -> str:
    """A time of the trace in words: ``day 8 22:30`` on an undated trace's clock, else the date.

    The loaders put time 0 of a trace with no date on 1970-01-01 (its clock attrs say so), so a
    time in January 1970 is a day count, not a date.
    """
    if stamp.startswith("1970-01-"):
        return f"day {int(stamp[8:10])} {stamp[11:16]}"
    return stamp[:16].replace("T", " ")


def _choice_words(plan) -> str:
    """The chosen option in words, with the runner-up and its extra cost when there is one."""
    gpu, tp = plan.attrs["gpu"], plan.attrs["tensor_parallel"]
    words = f"{tp} x {gpu} per instance"
    if "choice_feasible_options" in plan and int(plan.choice_feasible_options) > 1:
        best = float(plan.choice_cheapest_usd_per_hour)
        runner = (
            str(plan.choice_runner_up_gpu.item()),
            int(plan.choice_runner_up_tensor_parallel),
        )
        gap = float(plan.choice_cost_gap) / best
        words += (
            f" (the cheapest of {int(plan.choice_feasible_options)} feasible GPU and "
            f"tensor-parallel options; next: {runner[1]} x {runner[0]} at {gap:+.0%})"
        )
    skipped = plan.attrs.get("unshardable")
    if skipped:
        words += f"; not compared: {skipped}"
    unmodelled = plan.attrs.get("unmodelled")
    if unmodelled:
        words += f"; not compared: {unmodelled}"
    unpriced = _unpriced(plan)
    if unpriced:
        words += (
            f"; {', '.join(unpriced)} also meet{'s' if len(unpriced) == 1 else ''} the SLA but "
            "ha" + ("s" if len(unpriced) == 1 else "ve") + " no price in the catalog, so "
            "could not be ranked (add a usd_per_gpu_hour to compare)"
        )
    return words


def _unpriced(plan) -> list[str]:
    """Options (``TP x GPU``) that meet the SLA but have no price: the capacity step names them."""
    if "choice_unpriced_options" not in plan:
        return []
    names = str(plan.choice_unpriced_options.item())
    return names.split(", ") if names else []


def _span(low, high, unit: str) -> str:
    """``low-high unit`` (instances counted, rates with their digits); one value when equal."""
    if unit == "instance":
        low, high = int(low), int(high)
        return _words.count(low, unit) if low == high else f"{low:,}-{high:,} {unit}s"
    low, high = _words.rate(low), _words.rate(high)
    return f"{low} {unit}" if low == high else f"{low}-{high} {unit}"


def _recommendation(plan, cfg, fc, chosen, advice, checks) -> str:
    from .. import forecast

    per_instance = plan.attrs["per_instance_qps"]
    binding = str(chosen.binding.item())
    memory_limit = (
        f"; memory holds {int(chosen.max_concurrency)}" if "max_concurrency" in chosen else ""
    )
    lines = [
        f"Serve {plan.attrs['model']} on {_choice_words(plan)}: one instance serves {per_instance:.2f} "
        f"requests/s at {cfg.sla_metric} P{100 * cfg.sla_quantile:g} <= {cfg.sla_s:g} s, at a safe "
        f"concurrency of {int(chosen.safe_concurrency)} (binding: {binding}{memory_limit}).",
    ]
    if binding == "measured_range":
        lines[0] += (
            " The SLA is met at the curve's last measured concurrency, so the safe concurrency is "
            "that point: capnb does not extrapolate past what was measured; benchmark higher "
            "concurrencies to find more."
        )
    if cfg.prefix_cache_share > 0 and "prefix_hit_rate" in chosen:
        lines.append(
            f"Prefix cache: {cfg.prefix_cache_share:.0%} of each instance's KV budget holds a prefix "
            f"cache; replayed over the block hashes of {plan.attrs['workload_trace']}, it serves "
            f"{float(chosen.prefix_hit_rate):.1%} of prompt tokens (their prefill skipped) and "
            f"leaves {int(chosen.kv_cache_tokens):,} tokens to running sequences."
        )
    if plan.attrs.get("close_call"):
        lines.append(f"Close call: {plan.attrs['latency_uncertainty']}")
        lines.append("To settle it, on each GPU:\n" + plan.attrs["settle_commands"])
    elif "latency_uncertainty" in plan.attrs:
        lines.append(f"Latency model: {plan.attrs['latency_uncertainty']}")
    target = chosen.target_qps
    fixed = np.asarray(chosen.fixed_instances.values, dtype=float)
    buffer_qps = float(fc.buffer_qps) if "buffer_qps" in fc else 0.0
    buffer = plan.attrs["buffer_instances"]
    lines.append(
        f"Fixed part: {_span(fixed.min(), fixed.max(), 'instance')} per "
        f"{fc.attrs.get('slots', 'slot')} slot for the P{100 * cfg.traffic_quantile:g} plan "
        f"({_span(float(target.min()), float(target.max()), 'requests/s')}); elastic buffer: "
        f"{_words.count(buffer, 'instance')} for {_words.rate(buffer_qps)} requests/s of bursts."
    )
    lines.append(f"Run: {advice.text}")
    filled = plan.attrs.get("demand_filled_share", 0.0)
    if filled:
        lines.append(
            f"Note: {filled:.1%} of the trace was missing; the simulation filled those steps "
            "with their slot's median demand."
        )
    lines.append(
        f"Cost: {plan.attrs['monthly_usd']:,.0f} USD a month ({glossary.HOURS_PER_MONTH:.0f} h) "
        f"with this policy and {plan.attrs['breach_minutes_per_month']:,.0f} SLA-breach minutes a "
        f"month (simulated over {plan.attrs['simulated_hours']:.0f} h of the trace); a fixed fleet "
        f"for the plan plus the burst buffer would cost {plan.attrs['fixed_monthly_usd']:,.0f} USD "
        "a month."
    )
    if plan.attrs.get("fleet"):
        lines.append(plan.attrs["fleet"])
    if plan.attrs.get("serving"):
        lines.append(f"Serving mode: {plan.attrs['serving']}")
    lines.append(
        f"Burst test: under one burst of 4x for 1.5 h at the busiest hour (from "
        f"{_when(plan.attrs['burst_test_start'])}), this policy is in SLA breach for "
        f"{plan.attrs['burst_test_breach_minutes']:,.0f} min and leaves "
        f"{plan.attrs['burst_test_unserved_share']:.2%} of requests unserved"
        + (
            ": hold more warm spares or a higher floor if that is too much."
            if plan.attrs["burst_test_breach_minutes"] > 1
            else "."
        )
    )
    lines.append(f"Traffic: {forecast.describe(fc)}")
    lines += [f"Check: {c}" for c in checks]
    return "\n".join(lines)

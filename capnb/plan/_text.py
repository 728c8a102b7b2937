"""The plan in words: the article's applicability checks and the recommendation."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

HOURS_PER_MONTH = 730.0  # 8,760 / 12


def _checks(cfg, fc, cap, chosen, advice, sweep, demand, estimated) -> list[str]:
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


def _options_by_cost(cap: xr.Dataset) -> list[tuple[str, int, float]]:
    """Feasible (gpu, tensor_parallel, USD per day) options, cheapest first."""
    if "gpu" not in cap.dims:
        return []
    daily = (
        cap.usd_per_hour.sum("slot", skipna=False)
        if "slot" in cap.usd_per_hour.dims
        else cap.usd_per_hour
    )
    options = [
        (str(g), int(t), float(daily.sel(gpu=g, tensor_parallel=t)))
        for g in cap.gpu.values
        for t in cap.tensor_parallel.values
    ]
    return sorted((o for o in options if np.isfinite(o[2])), key=lambda o: o[2])


def _recommendation(plan, cfg, fc, cap, chosen, advice, checks, forecast) -> str:
    per_instance = plan.attrs["per_instance_qps"]
    gpu, tp = plan.attrs["gpu"], plan.attrs["tensor_parallel"]
    options = _options_by_cost(cap)
    choice = f"{tp} x {gpu} per instance"
    if len(options) > 1:
        runner = options[1]
        choice += (
            f" (the cheapest of {len(options)} feasible GPU and tensor-parallel options; next: "
            f"{runner[1]} x {runner[0]} at {runner[2] / options[0][2] - 1:+.0%})"
        )
    binding = str(chosen.binding.item())
    memory_limit = (
        f"; memory holds {int(chosen.max_concurrency)}" if "max_concurrency" in chosen else ""
    )
    lines = [
        f"Serve {cfg.model} on {choice}: one instance serves {per_instance:.2f} requests/s at "
        f"{cfg.sla_metric} P{100 * cfg.sla_quantile:g} <= {cfg.sla_s:g} s, at a safe concurrency of "
        f"{int(chosen.safe_concurrency)} (binding: {binding}{memory_limit}).",
    ]
    target = fc.target_qps.sel(traffic_quantile=cfg.traffic_quantile)
    fixed = np.ceil(target.values / per_instance - 1e-12).astype(int)
    buffer_qps = float(fc.buffer_qps) if "buffer_qps" in fc else 0.0
    buffer = math.ceil(buffer_qps / per_instance - 1e-12)
    lines.append(
        f"Fixed part: {fixed.min()}-{fixed.max()} instances per {fc.attrs.get('slots', 'slot')} slot for "
        f"the P{100 * cfg.traffic_quantile:g} plan ({float(target.min()):,.0f}-{float(target.max()):,.0f} "
        f"requests/s); elastic buffer: {buffer} instances for {buffer_qps:,.0f} requests/s of bursts."
    )
    lines.append(f"Run: {advice.text}")
    filled = plan.attrs.get("demand_filled_share", 0.0)
    if filled:
        lines.append(
            f"Note: {filled:.1%} of the trace was missing; the simulation filled those steps "
            "with their slot's median demand."
        )
    fixed_monthly = (
        float(chosen.usd_per_hour.mean()) * HOURS_PER_MONTH
        if "usd_per_hour" in chosen
        else math.nan
    )
    lines.append(
        f"Cost: {plan.attrs['monthly_usd']:,.0f} USD a month (730 h) with this policy and "
        f"{plan.attrs['breach_minutes_per_month']:,.0f} SLA-breach minutes a month (simulated over "
        f"{plan.attrs['simulated_hours']:.0f} h of the trace); a fixed fleet for the plan plus the burst "
        f"buffer would cost {fixed_monthly:,.0f} USD a month."
    )
    plan.attrs["fixed_monthly_usd"] = fixed_monthly
    plan.attrs["buffer_instances"] = buffer
    lines.append(
        f"Burst test: under one burst of 4x for 1.5 h at the busiest hour (from "
        f"{plan.attrs['burst_test_start'][:16]}), this policy is in SLA breach for "
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

"""Burst draws: the demand of a window again with bursts drawn from the plan's burst model.

Shared by the backtest (:mod:`capnb.plan._backtest`) and the held-out record
(:mod:`capnb.plan._origins`): how often a plan keeps its breach budget when bursts the trace did
not contain arrive.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["burst_factors", "burst_holds", "burst_model"]


def burst_model(cfg, series):
    """The plan's burst model, decided once: the forecast, the burst test and the backtest use it.

    The held-out burst draws fit it again on the history before their window (``"fit"``).
    ``"article"``: the article's (1-2 a month, 1-2 h, 3-5x); ``"fit"``: fitted to the bursts
    detected in ``series``; ``"none"``: no bursts (a model of rate 0, so that nothing draws one).
    """
    from .. import forecast

    if cfg.traffic.bursts == "article":
        return forecast.BurstModel()
    if cfg.traffic.bursts == "none":
        return forecast.BurstModel(rate_per_month=0.0, source="none planned: bursts = 'none'")
    return forecast.fit_burst_model(
        forecast.detect_bursts(series, forecast.fit_baseline(series, slots=cfg.traffic.slots))
    )


def burst_factors(model, steps: int, step_s: float, draws: int, seed: int) -> list[np.ndarray]:
    """Multipliers of the demand for ``draws`` windows of ``steps`` steps; one array per draw.

    A draw without a burst is an empty array (the window as observed). Bursts arrive as in
    :class:`capnb.forecast.BurstModel`: a Poisson count for the window's share of a 30-day month,
    uniform start (whole minutes), uniform duration rounded to whole minutes, uniform factor; where
    two overlap the larger factor holds.
    """
    from .. import forecast

    rng = np.random.default_rng(seed)
    minute = max(1, round(60 / step_s))
    mean = (
        0.0
        if model is None
        else model.rate_per_month * steps * step_s / 86400 / forecast.MONTH_DAYS
    )
    out = []
    for _ in range(draws):
        count = int(rng.poisson(mean))
        if count == 0:
            out.append(np.empty(0))
            continue
        factor = np.ones(steps)
        for _ in range(count):
            start = int(rng.integers(0, max(1, steps // minute))) * minute
            length = round(rng.uniform(*model.duration_s) / 60) * minute
            height = rng.uniform(*model.multiplier)
            window = factor[start : start + length]
            np.maximum(window, height, out=window)
        out.append(factor)
    return out


def burst_holds(rows, factors, demand, ahead, settings, cfg, model, kernel_inputs, kernels):
    """Per plan: the share of burst draws in which it holds the breach budget.

    A draw without a burst is the window as observed, so it holds when the observed replay does;
    the draws with bursts run on threads (the simulator releases the GIL), each draw on its own,
    so the answer does not depend on the thread count.
    """
    from concurrent.futures import ThreadPoolExecutor

    import numba

    from ..elasticity import Policy

    if not factors:
        return dict.fromkeys((r[0] for r in rows), math.nan)
    observed = demand.values
    held_observed = np.array(
        [float(cell.breach_share) <= cfg.elasticity.breach_budget for _, _, cell in rows]
    )
    bursty = [f for f in factors if f.size]
    held = held_observed * (len(factors) - len(bursty))
    if bursty:
        # a pool large enough for the highest burst: no policy is held back by the maximum
        top = float(np.maximum(observed, ahead.values).max()) * model.multiplier[1]
        high = max(
            1,
            math.ceil(
                top / (settings["per_instance_qps"] * min(cfg.elasticity.scale_up_threshold))
            ),
        )
        inputs = []
        for _, run, _ in rows:
            threshold = run["scale_up_threshold"]
            policy = Policy(
                run["policy"],
                scale_up_threshold=0.7 if math.isnan(threshold) else threshold,
                cooldown_s=run["cooldown_s"],
                min_instances=run["min_instances"],
                buffer_instances=run["buffer_instances"],
                max_instances=max(high, int(run["min_instances"])),
            )
            _, config, runs, forecast = kernel_inputs(
                observed,
                policy=policy,
                per_instance_qps=settings["per_instance_qps"],
                step_s=settings["step_s"],
                cold_start_s=settings["cold_start_s"],
                tolerance_s=settings["tolerance_s"],
                forecast=ahead.values if policy.name == "predictive" else None,
            )
            inputs.append((config, runs, forecast))
        budget_steps = cfg.elasticity.breach_budget * observed.size
        breach = kernels.METRICS.index("breach_steps")

        def one_draw(factor):
            burst = observed * factor
            metrics = np.empty((1, len(kernels.METRICS)))
            out = np.empty(len(inputs), bool)
            for i, (config, runs, forecast) in enumerate(inputs):
                kernels.simulate_many(burst, config, runs, metrics, forecast)
                out[i] = metrics[0, breach] <= budget_steps
            return out

        with ThreadPoolExecutor(max(1, numba.get_num_threads())) as pool:
            for out in pool.map(one_draw, bursty):
                held = held + out
    return {name: float(h) / len(factors) for (name, _, _), h in zip(rows, held, strict=True)}

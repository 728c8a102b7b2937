"""Backtest benchmark: a plan built on 7 days and replayed on the next 7 at 1-second steps.

The bundled defaults (servegen-m-large, every policy of the default grid, 1-s steps): the whole
plan built on week 1 (forecast, capacity over every GPU and tensor-parallel option, the policy
sweep and its held-out check), then week 2 replayed through the simulator - the recommended plan,
the hindsight sweep of every policy, the naive fixed fleets - with and without the burst draws.
Timed warm (the kernels compiled by a first call), as :func:`capnb.plan.backtest` runs in a
worksheet. Wall time and the process's CPU time (both threads) are reported: on a shared machine
the wall time depends on the other load, the CPU time much less.
"""

from __future__ import annotations

import time
import warnings

from capnb import plan

from . import Row

FIT, SCORE = slice(0, 7), slice(7, 14)


def _timed(func) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = func()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def run(quick: bool = False) -> list[Row]:
    overrides = {"gpus": ["H200"], "tensor_parallel": [1], "trials": 200} if quick else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not quick:  # a smoke run runs each once: its times are not figures
            plan.backtest(fit=FIT, score=SCORE, draws=0, **overrides)  # compile and warm the caches
        rows = []
        for draws in (0, 100):
            wall, cpu, table = _timed(
                lambda d=draws: plan.backtest(fit=FIT, score=SCORE, draws=d, **overrides)
            )
            steps = round(float(table.attrs["score_days"]) * 86400)
            rows.append(
                Row(
                    f"plan.backtest ({draws} burst draws)",
                    f"plan on 7 days, replay on {steps:,} steps of 1 s",
                    wall,
                    f"CPU {cpu:.1f} s",
                    {},
                    f"{int(table.attrs['burst_draws_with_bursts'])} draws with bursts; "
                    + table.attrs["summary"][:80],
                )
            )
    return rows

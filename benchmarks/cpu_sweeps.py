"""CPU seconds of one thread for the elasticity sweeps: the benchmark's grid, and the worksheet's.

A comparison that holds on a shared machine, where wall times move by several times between
identical runs.

Run it in a worktree of each commit to compare (``git worktree add /tmp/old <commit>``)::

    NUMBA_NUM_THREADS=1 PYTHONPATH=/tmp/old python -m benchmarks.cpu_sweeps
    NUMBA_NUM_THREADS=1 python -m benchmarks.cpu_sweeps
    NUMBA_NUM_THREADS=1 python -m benchmarks.cpu_sweeps worksheet

Each line: the policy and source, the best of three CPU times after a warm-up call, a checksum over
the sweep's float variables and a SHA-256 over every variable's bytes (equal: bit-identical).

``worksheet``: the elasticity worksheet's (``notebooks/04_elasticity.ipynb``) two sweeps at its
defaults - 6 policies x 90 settings over the 1,209,600 one-second steps of ServeGen m-large and
the held-out sweep over its last 604,800 steps - one policy at a time, at the cold start of a new
value of its slider (``--cold``, default 76 s). Each line: the best CPU time of ``--repeat`` calls
after a warm-up, and a SHA-256 over every output variable's bytes (equal digests: bit-identical
results).
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np

from capnb import elasticity

from . import elasticity as bench

FAMILIES = (("article", 5, 30.0), ("hpa", 5, 30.0), ("knative", 2, 1.0))

#: The worksheet's defaults (its first cell).
WORKSHEET = {
    "trace": "servegen-m-large",
    "interval": "10min",
    "slots": "hour_of_day",
    "step_s": 1,
    "per_instance_qps": 20.0,
    "tolerance_s": 60.0,
    "policies": ("article", "hpa", "knative", "fixed", "fixed_elastic", "predictive"),
    "hold_out_days": 7,
    "scale_up_threshold": [0.6, 0.7, 0.8],
    "cooldown_s": [300.0, 900.0, 1800.0],
    "buffer_instances": [0, 2],
}


def main(policies=None) -> None:
    for source in ("servegen", "azure-code"):
        for policy, step_s, days in FAMILIES:
            if policies and policy not in policies:
                continue
            demand, qps = bench._demand(source, step_s, days)
            kwargs = dict(
                step_s=step_s, per_instance_qps=qps, policy=policy,
                tolerance_s=bench.TOLERANCE_S, **bench.GRID,
            )  # fmt: skip
            swept = elasticity.sweep(demand, **kwargs)
            times = []
            for _ in range(3):
                start = time.process_time()
                elasticity.sweep(demand, **kwargs)
                times.append(time.process_time() - start)
            checksum = sum(
                float(np.nansum(swept[v].values))
                for v in swept.data_vars
                if swept[v].dtype.kind == "f"
            )
            print(
                f"{policy}/{source}: {min(times):.3f} CPU s, checksum {checksum:.6e}, "
                f"sha256 {digest(swept)}"
            )


def worksheet_inputs():
    """The worksheet's demand, forecasts and grids: ``[(label, demand, forecast, grid), ...]``."""
    from capnb import data, forecast

    w = WORKSHEET
    source = data.load_traffic(w["trace"])
    series = forecast.resample(source, w["interval"])
    baseline = forecast.fit_baseline(series, slots=w["slots"])
    demand = elasticity.prepare_demand(source, w["step_s"], baseline=baseline)
    ahead = elasticity.forecast_demand(demand, baseline)
    held_steps = round(w["hold_out_days"] * 86400 / w["step_s"])
    held = demand.isel(time=slice(-held_steps, None))
    earlier = series.isel(time=(series.time < held.time[0]).values)
    held_ahead = elasticity.forecast_demand(held, forecast.fit_baseline(earlier, slots=w["slots"]))
    out = []
    for label, values, fc in (("sweep", demand, ahead), ("held-out", held, held_ahead)):
        grid = elasticity.policy_grid(
            values, w["per_instance_qps"], scale_up_threshold=w["scale_up_threshold"],
            cooldown_s=w["cooldown_s"], buffer_instances=w["buffer_instances"],
        )  # fmt: skip
        out.append((label, values, fc, grid))
    return out


def digest(swept) -> str:
    """SHA-256 over every variable's name and bytes: equal digests, bit-identical sweeps."""
    h = hashlib.sha256()
    for name in sorted(swept.variables):
        h.update(name.encode())
        h.update(np.ascontiguousarray(swept[name].values).tobytes())
    return h.hexdigest()[:16]


def worksheet(cold_start_s: float = 76.0, repeat: int = 3, policies=None) -> None:
    total = 0.0
    for label, demand, fc, grid in worksheet_inputs():
        for policy in policies or WORKSHEET["policies"]:
            kwargs = dict(
                policy=policy, **grid, cold_start_s=cold_start_s,
                tolerance_s=WORKSHEET["tolerance_s"], forecast=fc,
                per_instance_qps=WORKSHEET["per_instance_qps"], step_s=WORKSHEET["step_s"],
                gpus_per_instance=1, gpu="H100-SXM",
            )  # fmt: skip
            swept = elasticity.sweep(demand, **kwargs)
            times = []
            for _ in range(repeat):
                start = time.process_time()
                elasticity.sweep(demand, **kwargs)
                times.append(time.process_time() - start)
            total += min(times)
            print(f"{label} {policy}: {min(times):.3f} CPU s, sha256 {digest(swept)}", flush=True)
    print(f"total: {total:.2f} CPU s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cpu_sweeps")
    parser.add_argument("which", nargs="?", default="grid", choices=("grid", "worksheet"))
    parser.add_argument("--cold", type=float, default=76.0, help="worksheet: cold start (s)")
    parser.add_argument("--repeat", type=int, default=3, help="worksheet: timed calls")
    parser.add_argument("--policy", action="append", help="only these policies")
    args = parser.parse_args()
    if args.which == "grid":
        main(args.policy)
    else:
        worksheet(args.cold, args.repeat, args.policy)

"""CPU seconds of one thread for the elasticity benchmark's sweeps.

A comparison that holds on a shared machine, where wall times move by several times between
identical runs.

Run it in a worktree of each commit to compare (``git worktree add /tmp/old <commit>``)::

    NUMBA_NUM_THREADS=1 PYTHONPATH=/tmp/old python -m capnb.benchmarks.cpu_sweeps
    NUMBA_NUM_THREADS=1 python -m capnb.benchmarks.cpu_sweeps

Each line: the policy and source, the best of three CPU times after a warm-up call, and a checksum
over the sweep's float variables (equal checksums: equal results).
"""

from __future__ import annotations

import time

import numpy as np

from .. import elasticity
from . import elasticity as bench

FAMILIES = (("article", 5, 30.0), ("hpa", 5, 30.0), ("knative", 2, 1.0))


def main() -> None:
    for source in ("servegen", "azure-code"):
        for policy, step_s, days in FAMILIES:
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
            print(f"{policy}/{source}: {min(times):.3f} CPU s, checksum {checksum:.6e}")


if __name__ == "__main__":
    main()

"""The simulator's raw outputs as named, unit-carrying variables (part of :mod:`capnb.elasticity`)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import glossary
from ..kernels.autoscale import METRICS

__all__ = ["metric_variables", "timeline_variables"]

_HOUR_S = 3600.0


def _share(part, whole):
    # a run with no arrivals has nothing unserved: 0, not a 0/0 NaN
    return np.where(whole > 0, part / np.where(whole > 0, whole, 1.0), 0.0)


def metric_variables(
    raw: xr.DataArray,
    n_steps: int,
    step_s: float,
    per_instance_qps: float,
    gpus_per_instance: int,
    usd_per_gpu_hour: float | None,
    preemption: bool = False,
) -> dict:
    """Variables of a run (or a grid of runs) from the kernel's ``metrics`` vector on dim ``metric``.

    ``raw`` may be dask-backed; everything here is elementwise, on the arrays themselves (numpy's
    or dask's): xarray's alignment of each of ~40 operations on a grid of a few hundred runs cost
    more than the arithmetic, about 0.1 s a policy. ``preemption``: the run was given preemptions,
    so ``preempted`` (instances lost) is one of the variables. Returns ``xarray.Variable`` objects
    on ``raw``'s other dims; the caller gives them coordinates.
    """
    dims = tuple(d for d in raw.dims if d != "metric")
    data = raw.transpose(*dims, "metric").data
    m = {name: data[..., i] for i, name in enumerate(METRICS)}
    gpu_hours_per_step = step_s * gpus_per_instance / _HOUR_S
    ready_steps = m["instance_steps"] - m["starting_steps"]
    unserved = m["dropped"] + m["final_backlog"]
    out = {
        "arrivals": m["arrivals"],
        "served": m["served"],
        "late": m["late"],
        "dropped": m["dropped"],
        "unserved": unserved,
        "unserved_share": _share(unserved, m["arrivals"]),
        "late_share": _share(m["late"], m["arrivals"]),
        "breach_s": m["breach_steps"] * step_s,
        "breach_share": m["breach_steps"] / n_steps,
        "dropping_s": m["dropping_steps"] * step_s,
        "peak_backlog": m["peak_backlog"],
        "gpu_hours": m["instance_steps"] * gpu_hours_per_step,
        "cold_start_gpu_hours": m["starting_steps"] * gpu_hours_per_step,
        "wasted_cold_start_gpu_hours": m["wasted_starting_steps"] * gpu_hours_per_step,
        "scale_up_events": m["scale_up_events"].astype(np.int64),
        "scale_down_events": m["scale_down_events"].astype(np.int64),
        "scale_events": (m["scale_up_events"] + m["scale_down_events"]).astype(np.int64),
        "instances_started": m["instances_started"].astype(np.int64),
        "thrash": m["thrash"].astype(np.int64),
        "cancelled_starts": m["cancelled"].astype(np.int64),
        "peak_instances": m["peak_instances"].astype(np.int64),
        "mean_instances": m["instance_steps"] / n_steps,
        "ready_utilisation": _share(m["served"], ready_steps * (per_instance_qps * step_s)),
        "vetoed_scale_ups": m["vetoed_scale_ups"].astype(np.int64),
        "panic_s": m["panic_steps"] * step_s,
    }
    if preemption:
        out["preempted"] = m["preempted"].astype(np.int64)
    if usd_per_gpu_hour is not None:
        out["usd"] = out["gpu_hours"] * usd_per_gpu_hour
    return {name: xr.Variable(dims, value, glossary.attrs(name)) for name, value in out.items()}


def timeline_variables(demand, times, per_instance_qps, ready, starting, served, dropped, backlog,
                       breach) -> dict:  # fmt: skip
    """Per-step variables of one run over ``time``, and ``time`` itself (``breach`` as decided)."""
    columns = {
        "qps": demand,
        "ready_instances": ready,
        "starting_instances": starting,
        "ready_capacity_qps": ready * per_instance_qps,
        "served_in_step": served,
        "dropped_in_step": dropped,
        "backlog": backlog,
        "breach": breach,
    }
    # Variables, and the time coordinate once: DataArrays would each build (and deep-copy) an
    # index of the run's timestamps, which took longer than the simulation
    variables = {
        name: xr.Variable("time", values, glossary.attrs(name)) for name, values in columns.items()
    }
    return variables | {"time": xr.Variable("time", times, glossary.attrs("time"))}

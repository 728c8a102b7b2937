"""The elasticity worksheet's controls."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import ClassVar

import ipywidgets as widgets
import xarray as xr

from .. import charts, data, elasticity
from ..elasticity import coldstart
from ..errors import InputError
from ._legacy import Worksheet, dropdown, slider_style

__all__ = ["ElasticityWorksheet"]

_POLICY_LABELS = {
    "the article's thresholds": "article",
    "Kubernetes HPA": "hpa",
    "Knative KPA": "knative",
    "fixed fleet": "fixed",
    "fixed + elastic buffer": "fixed_elastic",
}


def _demand(trace, step_s: float) -> xr.DataArray:
    if isinstance(trace, xr.DataArray | xr.Dataset) and "request" not in trace.dims:
        return elasticity.resample_demand(trace, step_s)
    if isinstance(trace, xr.Dataset):
        return elasticity.resample_demand(trace, step_s)
    if trace in data.list_traces():
        return elasticity.resample_demand(data.load_trace(trace), step_s)
    if trace in data.list_rate_series():
        return elasticity.resample_demand(data.load_rate_series(trace), step_s)
    known = [*data.list_traces(), *data.list_rate_series()]
    raise InputError(f"trace={trace!r} is not a bundled trace or rate series; known: {known}")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min"


class ElasticityWorksheet(Worksheet):
    """Elasticity worksheet: which autoscaling policy keeps the SLA through cold starts, at what cost.

    Parameters
    ----------
    trace
        A bundled request log or rate series (``capnb.data.list_traces()``,
        ``capnb.data.list_rate_series()``), or your own series of requests/s over ``time``.
    step_s
        Simulation step (s). Knative's 2-s tick and HPA's 15-s sync both need a divisor: 1 s.
    per_instance_qps
        Requests/s one instance serves under the SLA (the capacity worksheet's answer).
    model, gpu
        The deployment: its cold start (:func:`capnb.coldstart.estimate`, rounded up to whole steps)
        unless ``cold_start_s`` is given, its GPUs per instance and its price.
    tolerance_s, breach_budget
        The latency tolerance (s) and the share of time in breach the recommendation accepts.
    policy, scale_up_threshold, cooldown_s, min_instances, buffer_instances
        Starting values of the policy controls (``min_instances`` default: half the P99 fleet).
    thresholds, cooldowns, buffers
        The sweep's grid; the pool floors are 1 and a quarter, half, three quarters and all of
        the fleet that serves the trace's P99 rate.
    """

    chart_keys: ClassVar[Mapping[str, Callable]] = {
        "timeline": lambda ws: (ws.result,),
        "pareto": lambda ws: (
            ws.sweep,
            *ws.selection.values(),
            *ws.recommendation.selection.values(),
            ws.inputs["breach_budget"],
        ),
        "cold_start": lambda ws: (ws.cold_starts,),
    }
    chart_makers: ClassVar[Mapping[str, Callable]] = {
        "timeline": lambda ws: charts.elasticity_timeline(ws.result),
        "pareto": lambda ws: charts.elasticity_pareto(
            ws.sweep,
            chosen=ws.selection,
            recommended=ws.recommendation.selection,
            breach_budget=ws.inputs["breach_budget"],
        ),
        "cold_start": lambda ws: charts.cold_start_stages(ws.cold_starts, gpu=ws.gpu),
    }

    def __init__(
        self,
        trace="servegen-m-large",
        *,
        step_s: float = 1.0,
        per_instance_qps: float = 20.0,
        model: str = "Llama-3.1-8B",
        gpu: str = "H100-SXM",
        cold_start_s: float | None = None,
        tolerance_s: float = 60.0,
        breach_budget: float = 0.001,
        policy: str = "hpa",
        scale_up_threshold: float = 0.7,
        cooldown_s: float = 300.0,
        min_instances: int | None = None,
        buffer_instances: int = 0,
        thresholds=(0.6, 0.7, 0.8),
        cooldowns=(0.0, 300.0, 900.0, 1800.0),
        buffers=(0, 2),
        compare_models=("Llama-2-7B", "Llama-3.1-8B", "Qwen3-8B", "Llama-2-13B", "Llama-3.1-70B"),
    ):
        self.step_s = float(step_s)
        self.per_instance_qps = float(per_instance_qps)
        self.demand = _demand(trace, self.step_s)
        self.gpu = data.resolve_gpu(gpu)
        models = list(dict.fromkeys([*compare_models, data.load_model(model).name]))
        self.cold_starts = coldstart.estimate(models, self.gpu)
        own = self.cold_starts.sel(model=data.load_model(model).name, gpu=self.gpu)
        self.model, self.gpus_per_instance = str(own.model.values), int(own.tensor_parallel)
        estimate = float(own.cold_start_s)
        if cold_start_s is None:  # the simulator needs whole steps: round the estimate up
            cold_start_s = math.ceil(estimate / self.step_s) * self.step_s
        self.cold_start_estimate_s = estimate
        baseline = elasticity.fixed_instances(self.demand, self.per_instance_qps, quantile=0.99)
        self.baseline_instances = baseline
        self.floors = sorted({1, *(math.ceil(baseline * f) for f in (0.25, 0.5, 0.75, 1.0))})
        if min_instances is None:
            min_instances = math.ceil(baseline * 0.5)
        self.grid = {
            "scale_up_threshold": [float(v) for v in thresholds],
            "cooldown_s": [float(v) for v in cooldowns],
            "min_instances": self.floors,
            "buffer_instances": [int(v) for v in buffers],
        }
        starting = {
            "scale_up_threshold": scale_up_threshold,
            "cooldown_s": cooldown_s,
            "min_instances": min_instances,
            "buffer_instances": buffer_instances,
        }
        for name, value in starting.items():
            if value not in self.grid[name]:
                raise InputError(f"{name}={value!r} is not in the sweep's grid {self.grid[name]}")
        self._swept_for = None
        self._advised_for = None
        self._run_for = None
        labels = {v: k for k, v in _POLICY_LABELS.items()}
        selection = {"continuous_update": False, "style": {"description_width": "initial"}}
        controls = {
            "policy": dropdown("policy", list(_POLICY_LABELS), labels[policy]),
            "scale_up_threshold": widgets.SelectionSlider(
                options=self.grid["scale_up_threshold"],
                value=scale_up_threshold,
                description="scale-up threshold / target utilisation",
                **selection,
            ),
            "cooldown_s": widgets.SelectionSlider(
                options=[(_minutes(v), v) for v in self.grid["cooldown_s"]],
                value=cooldown_s,
                description="scale-down delay",
                **selection,
            ),
            "min_instances": widgets.SelectionSlider(
                options=self.floors,
                value=min_instances,
                description="fewest instances (the fixed part)",
                **selection,
            ),
            "buffer_instances": widgets.SelectionSlider(
                options=self.grid["buffer_instances"],
                value=buffer_instances,
                description="warm spare instances",
                **selection,
            ),
            "cold_start_s": widgets.FloatSlider(
                cold_start_s,
                min=0.0,
                max=600.0,
                step=self.step_s,
                description="cold start (s)",
                **slider_style,
            ),
            "tolerance_s": dropdown(
                "latency tolerance (s)", [30.0, 60.0, 120.0, 300.0, 600.0], float(tolerance_s)
            ),
            "breach_budget": dropdown(
                "breach budget (share of time)", [0.0001, 0.001, 0.01, 0.05], breach_budget
            ),
        }
        super().__init__(controls)

    @property
    def policy(self) -> str:
        """The selected policy's name as the step module knows it."""
        return _POLICY_LABELS[self.inputs["policy"]]

    @property
    def selection(self) -> dict[str, object]:
        """The selected policy as coordinates of the sweep."""
        values = self.inputs
        return {
            "policy": self.policy,
            **{name: values[name] for name in self.grid},
        }

    def compute(self) -> None:
        """Run the sweep (when the cold start or tolerance changed) and the selected policy."""
        values = self.inputs
        common = {
            "per_instance_qps": self.per_instance_qps,
            "cold_start_s": values["cold_start_s"],
            "tolerance_s": values["tolerance_s"],
            "gpu": self.gpu,
            "gpus_per_instance": self.gpus_per_instance,
        }
        key = (values["cold_start_s"], values["tolerance_s"])
        if self._swept_for != key:
            self.sweep = elasticity.sweep(
                self.demand, policy=list(elasticity.POLICIES), **self.grid, **common
            )
            self._swept_for = key
        chosen = {k: v for k, v in self.selection.items() if k != "policy"}
        run_key = (key, *self.selection.values())
        if run_key != self._run_for:
            self.result = elasticity.simulate(self.demand, policy=self.policy, **chosen, **common)
            self._run_for = run_key
        advice_key = (key, values["breach_budget"])
        if advice_key != self._advised_for:  # the advice reads the sweep, not the selection
            self.recommendation = elasticity.recommend(
                self.sweep, breach_budget=values["breach_budget"]
            )
            self._advised_for = advice_key

    @property
    def answer(self) -> str:
        """The recommendation, then the selected policy, each in one sentence with its numbers."""
        mine = elasticity.describe(self.result)
        return f"{self.recommendation.text} Your selection: {mine[0].upper()}{mine[1:]}"

    def table(self) -> xr.Dataset:
        """The recommended run and the selected one side by side (for a notebook cell)."""
        picks = {"recommended": self.recommendation.selection, "selected": self.selection}
        names = [
            "breach_share",
            "unserved_share",
            "late_share",
            "usd",
            "gpu_hours",
            "mean_instances",
            "scale_events",
            "thrash",
            "wasted_cold_start_gpu_hours",
        ]
        cells = [
            self.sweep[names].sel(p).drop_vars(list(p), errors="ignore") for p in picks.values()
        ]
        return xr.concat(
            cells,
            dim=xr.DataArray(list(picks), dims="run", name="run"),
            coords="minimal",
            compat="override",
        )

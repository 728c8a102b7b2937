"""The capacity worksheet's controls."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import ClassVar

import ipywidgets as widgets
import numpy as np
import xarray as xr

from .. import capacity, charts, data, latency, memory
from ..capacity._sweep import _priced, _searched
from ._legacy import Worksheet, dropdown, slider_style

__all__ = ["ANALYTIC", "CapacityWorksheet"]

#: The curve choice that uses the analytic model instead of a measured curve.
ANALYTIC = "analytic model"


class CapacityWorksheet(Worksheet):
    """Capacity worksheet: how many requests one instance serves under a P99 SLA, and what it costs.

    Parameters
    ----------
    curve
        A bundled measured curve (``capnb.data.list_latency_curves()``), a curve Dataset of your own
        (read with ``capnb.data.read_vllm_bench`` etc.), or ``"analytic model"``.
    model, gpu, tensor_parallel
        The configuration the analytic model prices (the latency curve in analytic mode, and the
        cost-vs-SLA comparison across GPUs in both modes).
    workload
        A trace name (``capnb.data.list_traces()``) or a :func:`capnb.latency.workload` Dataset: the
        prompt and output lengths the analytic model prices.
    metric, quantile, sla, target_qps, buffer
        Starting values: the SLA bounds ``metric`` P``quantile`` (seconds); ``target_qps`` requests/s
        to serve; ``buffer`` instances added for bursts.
    sla_grid
        (start, stop, step) in seconds of the SLA slider drawn in the curve chart.
    overview_gpus, overview_tensor_parallel, overview_slas
        The cost-vs-SLA comparison's grid (default: every catalog GPU, TP 1/2/4/8).
    """

    chart_keys: ClassVar[Mapping[str, Callable]] = {
        "curve": lambda ws: (ws.curve, ws.sla_table, ws.inputs["sla"], ws.model_curve),
        # the operating point it marks, not the instances (which follow the target)
        "throughput": lambda ws: (
            ws.curve,
            *(
                ws.result[v].values.ravel().tolist()
                for v in (
                    "binding",
                    "operating_concurrency",
                    "per_instance_qps",
                    "safe_concurrency",
                )
            ),
        ),
        "contrast": lambda ws: (ws.contrast,),
        "cost": lambda ws: (ws.overview, ws.inputs["sla"]),
    }
    chart_makers: ClassVar[Mapping[str, Callable]] = {
        "curve": lambda ws: charts.latency_curve(
            ws.curve,
            metric=ws.inputs["metric"],
            quantile=ws.quantile,
            sla_table=ws.sla_table,
            sla=ws.inputs["sla"],
            model_curve=ws.model_curve,
        ),
        "throughput": lambda ws: charts.throughput_curve(ws.curve, ws.result),
        "contrast": lambda ws: charts.plan_contrast(ws.contrast),
        "cost": lambda ws: charts.cost_vs_sla(ws.overview, sla=ws.inputs["sla"]),
    }

    def __init__(
        self,
        curve="dstack-vllm-mi300x-short",
        *,
        model: str = "Llama-3.1-70B",
        gpu: str = "H100-SXM",
        tensor_parallel: int = 4,
        workload="azure-conv-2023",
        metric: str = "ttft",
        quantile: float = 0.99,
        sla: float = 2.0,
        target_qps: float = 20.0,
        buffer: int = 2,
        sla_grid: tuple[float, float, float] = (0.1, 20.0, 0.1),
        overview_gpus=None,
        overview_tensor_parallel=(1, 2, 4, 8),
        overview_slas=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0),
        workload_samples: int = 256,
    ):
        self.quantile = float(quantile)
        self._custom = curve if isinstance(curve, xr.Dataset) else None
        curve_names = [*data.list_latency_curves(), ANALYTIC]
        if self._custom is not None:
            curve_names = ["your curve", *curve_names]
            curve = "your curve"
        self.workload = (
            workload
            if isinstance(workload, xr.Dataset)
            else latency.workload(data.load_trace(workload), samples=workload_samples)
        )
        start, stop, step = sla_grid
        self.sla_grid = np.round(np.arange(start, stop + step / 2, step), 10)
        self.overview_gpus = list(overview_gpus or data.list_gpus())
        self.overview_tensor_parallel = list(overview_tensor_parallel)
        self.overview_slas = list(overview_slas)
        self._overview_key = None
        self._priced_for: tuple | None = None
        self._curve_key: tuple | None = None
        self._table_key: str | None = None
        self.model_curve = None
        slider = slider_style
        controls = {
            "curve": dropdown("latency curve", curve_names, curve),
            "model": dropdown("model", data.list_models(), data.resolve_model(model)),
            "gpu": dropdown("GPU", data.list_gpus(), data.resolve_gpu(gpu)),
            "tensor_parallel": dropdown("tensor parallel (GPUs)", [1, 2, 4, 8, 16], tensor_parallel),
            "metric": dropdown("SLA metric", list(latency.METRICS), metric),
            "sla": widgets.FloatSlider(
                sla, min=float(self.sla_grid[0]), max=float(self.sla_grid[-1]),
                step=float(step), description="P99 SLA (s)", **slider,
            ),
            "target_qps": widgets.FloatLogSlider(
                target_qps, base=10, min=-1, max=3, step=0.05,
                description="target (requests/s)", **slider,
            ),
            "buffer": widgets.IntSlider(
                buffer, min=0, max=6, description="buffer (instances)", **slider
            ),
        }  # fmt: skip
        controls["sla"].description = f"P{self.quantile * 100:g} SLA (s)"
        super().__init__(controls)

    # -- the curve in use ----------------------------------------------------------------------
    def _curve(self) -> xr.Dataset:
        values = self.inputs
        if values["curve"] == "your curve":
            return self._custom
        if values["curve"] != ANALYTIC:
            return data.load_latency_curve(values["curve"])
        seq = math.ceil(float((self.workload.prompt_tokens + self.workload.output_tokens).mean()))
        limit = memory.max_concurrency(
            model=values["model"], gpu=values["gpu"], tensor_parallel=values["tensor_parallel"],
            seq_len=seq, invalid_tensor_parallel="mask",
        ).max_concurrency.item()  # fmt: skip
        grid = latency.concurrency_grid(int(min(max(limit, 2), 2048)))
        analytic = latency.analytic(
            values["model"], values["gpu"], values["tensor_parallel"], workload=self.workload,
            concurrency=grid, invalid_tensor_parallel="mask",
        )  # fmt: skip
        curve = analytic.squeeze(["model", "gpu", "tensor_parallel"])
        curve.attrs.update(
            name=f"analytic: {values['model']} on {values['tensor_parallel']} x {values['gpu']}",
            model=values["model"],
            gpu=values["gpu"],
            tensor_parallel=int(values["tensor_parallel"]),
        )
        return curve

    def compute(self) -> None:
        """Run the capacity step for the current inputs."""
        values = self.inputs
        metric = values["metric"]
        # the curve and its SLA table depend on fewer controls than the plan: keep them
        analytic = values["curve"] == ANALYTIC
        curve_key = (values["curve"], *(
            (values["model"], values["gpu"], values["tensor_parallel"]) if analytic else ()
        ))  # fmt: skip
        if curve_key != self._curve_key:
            self.curve, self._curve_key, self._table_key = self._curve(), curve_key, None
        if metric != self._table_key:
            self.sla_table = capacity.safe_concurrency(
                self.curve, self.sla_grid, metric=metric, quantile=self.quantile
            )
            self._table_key = metric
        self.result = capacity.plan(
            self.curve, values["sla"], values["target_qps"], metric=metric,
            quantile=self.quantile, buffer=int(values["buffer"]),
        )  # fmt: skip
        self.contrast = (
            capacity.contrast(
                self.curve,
                values["sla"],
                values["target_qps"],
                metric=metric,
                quantile=self.quantile,
                buffer=int(values["buffer"]),
                by_latency=self.result,
            )
            if int(self.curve.concurrency[0]) == 1
            and int(self.result.get("max_concurrency", 1)) > 0
            else None
        )
        # the overview's search (analytic curves for every GPU and TP) does not depend on the
        # target: it is kept per model and metric, and priced again for each target and buffer
        key = (values["model"], metric)
        if key != self._overview_key:
            seq = math.ceil(
                float((self.workload.prompt_tokens + self.workload.output_tokens).mean())
            )
            self._searched = _searched(
                values["model"], self.overview_gpus, self.overview_tensor_parallel, [seq],
                self.overview_slas, workload=self.workload, metric=metric, quantile=self.quantile,
                concurrency=None, max_grid_concurrency=4096, calibration=None,
                accounting="article", chunks=None,
            )  # fmt: skip
            self._overview_key, self._priced_for = key, None
        priced_key = (values["target_qps"], values["buffer"])
        if priced_key != self._priced_for:
            self.overview = _priced(
                *self._searched, values["target_qps"], buffer=int(values["buffer"])
            )
            self._priced_for = priced_key

    @property
    def answer(self) -> str:
        """The answer in one sentence (and the article's boundary in a second)."""
        return f"{capacity.describe(self.result)} {capacity.applicability(self.result)}"

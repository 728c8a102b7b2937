"""The memory worksheet's controls."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import ipywidgets as widgets

from .. import charts, data, memory
from ._base import Worksheet, dropdown, slider_style

__all__ = ["MemoryWorksheet"]


class MemoryWorksheet(Worksheet):
    """Memory worksheet: will this model fit, and how many sequences of this length fit.

    Parameters
    ----------
    model
        A bundled model id, a path to a ``config.json`` or a config mapping.
    gpu, tensor_parallel, kv_dtype, seq_len, headroom_fraction, accounting
        Starting values of the controls (see :func:`capnb.memory.sweep`).
    max_concurrency
        Right end of the breakdown chart's concurrency axis.
    heatmap_gpus, heatmap_seq_lens, heatmap_tensor_parallel
        The overview grid (default: every catalog GPU, 1k-128k tokens, TP 1/2/4/8).
    """

    chart_makers: ClassVar[Mapping[str, Callable]] = {
        "breakdown": lambda ws: charts.memory_breakdown(ws.result),
        "heatmap": lambda ws: charts.memory_heatmap(
            ws.overview, tensor_parallel=ws.inputs["tensor_parallel"]
        ),
    }
    chart_keys: ClassVar[Mapping[str, Callable]] = {
        "breakdown": lambda ws: (ws.result,),
        "heatmap": lambda ws: (ws.overview, ws.inputs["tensor_parallel"]),
    }

    def __init__(
        self,
        model="Llama-3.1-70B",
        gpu: str = "H100-SXM",
        tensor_parallel: int = 2,
        kv_dtype: str = "auto",
        seq_len: int = 8192,
        max_concurrency: int = 64,
        headroom_fraction: float = 0.15,
        accounting: str = "article",
        heatmap_gpus=None,
        heatmap_seq_lens=(1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072),
        heatmap_tensor_parallel=(1, 2, 4, 8),
    ):
        spec = data.load_model(model)
        self._overview_key: tuple | None = None
        self._models = {name: name for name in data.list_models()} | {spec.name: spec}
        self.heatmap_gpus = list(heatmap_gpus or data.list_gpus())
        self.heatmap_seq_lens = list(heatmap_seq_lens)
        self.heatmap_tensor_parallel = list(heatmap_tensor_parallel)
        slider = slider_style
        controls = {
            "model": dropdown("model", list(self._models), spec.name),
            "gpu": dropdown("GPU", data.list_gpus(), data.resolve_gpu(gpu)),
            "tensor_parallel": dropdown(
                "tensor parallel (GPUs)", self._tp_options(spec), tensor_parallel
            ),
            "kv_dtype": dropdown("KV cache dtype", ["auto", "bf16", "fp16", "fp8"], kv_dtype),
            "seq_len": widgets.IntSlider(
                seq_len, min=256, max=131072, step=256, description="tokens per sequence", **slider
            ),
            "max_concurrency": widgets.IntSlider(
                max_concurrency, min=2, max=1024, description="concurrency axis up to", **slider
            ),
            "headroom_fraction": widgets.FloatSlider(
                headroom_fraction,
                min=0.0,
                max=0.5,
                step=0.01,
                description="headroom (share)",
                **slider,
            ),
            "accounting": dropdown("accounting", list(memory.ACCOUNTINGS), accounting),
        }
        controls["model"].observe(self._on_model, names="value")
        super().__init__(controls)

    @staticmethod
    def _tp_options(spec) -> list[int]:
        return [tp for tp in (1, 2, 4, 8, 16) if spec.valid_tensor_parallel(tp) is None]

    def _on_model(self, change) -> None:
        tp = self.controls["tensor_parallel"]
        options = self._tp_options(data.load_model(self._models[change["new"]]))
        self._holding, holding = True, self._holding
        try:
            value = tp.value if tp.value in options else options[0]
            tp.options, tp.value = options, value
        finally:
            self._holding = holding

    def _common(self) -> dict[str, object]:
        values = self.inputs
        accounting = values["accounting"]
        return {
            "model": [self._models[values["model"]]],
            "kv_dtype": values["kv_dtype"],
            "accounting": accounting,
            "headroom_fraction": values["headroom_fraction"] if accounting == "article" else None,
        }

    def compute(self) -> None:
        """Run the memory step for the current inputs: the breakdown sweep and the overview."""
        values, common = self.inputs, self._common()
        cell = {
            "gpu": [values["gpu"]],
            "tensor_parallel": [values["tensor_parallel"]],
            "seq_len": [values["seq_len"]],
        }
        largest = int(memory.max_concurrency(**common, **cell).max_concurrency.item())
        ticks = memory.concurrency_ticks(values["max_concurrency"], include=(largest, largest + 1))
        self.result = memory.sweep(**common, **cell, concurrency=ticks)
        # the overview spans every GPU, TP and length: only the model and accounting change it
        key = tuple((k, str(v)) for k, v in common.items())
        if key != self._overview_key:
            self.overview = memory.max_concurrency(
                **common,
                gpu=self.heatmap_gpus,
                tensor_parallel=self.heatmap_tensor_parallel,
                seq_len=self.heatmap_seq_lens,
                invalid_tensor_parallel="mask",
            )
            self._overview_key = key

    @property
    def answer(self) -> str:
        """The answer in one sentence."""
        return memory.describe(self.result)

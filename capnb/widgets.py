"""Worksheet controls: ipywidgets wired to the step functions and to :mod:`capnb.charts`.

A worksheet object holds its controls, its current ``inputs`` and ``result``, and the charts it has
displayed. Changing a control recomputes the result through the step module (no maths here) and
updates every displayed chart in place (IPython display ids), so the charts stay ordinary cell outputs:
they update live in JupyterLab and appear in an exported report. Tests drive a worksheet headless with
:meth:`Worksheet.set` and read :attr:`Worksheet.result`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import ipywidgets as widgets

from . import charts, data, memory
from .errors import InputError

__all__ = ["MemoryWorksheet", "Worksheet"]


class Worksheet:
    """Base of the step worksheets: controls, ``inputs``, ``result``, charts that update in place."""

    #: chart name -> function(worksheet) -> alt.Chart; filled by subclasses
    chart_makers: ClassVar[Mapping[str, Callable]] = {}

    def __init__(self, controls: dict[str, widgets.ValueWidget]):
        self.controls = controls
        self._handles: dict[str, object] = {}
        self._holding = False
        self.answer_widget = widgets.HTML()
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.panel = widgets.VBox([*controls.values(), self.answer_widget])
        self.update()

    @property
    def inputs(self) -> dict[str, object]:
        """Current value of every control."""
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values: object) -> Worksheet:
        """Set several controls, then recompute once (as a user would, one change at a time)."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise InputError(
                f"unknown worksheet input(s) {sorted(unknown)}; known: {sorted(self.controls)}"
            )
        self._holding = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        self.update()
        return self

    def _on_change(self, change) -> None:
        if not self._holding:
            self.update()

    def update(self) -> None:
        """Recompute the result from the controls and refresh the answer and displayed charts."""
        self.compute()
        self.answer_widget.value = f"<b>{self.answer}</b>"
        for name, handle in self._handles.items():
            handle.update(self.chart(name))

    def compute(self) -> None:  # pragma: no cover - subclasses define it
        """Recompute ``self.result`` from ``self.inputs`` through the step module."""
        raise NotImplementedError

    @property
    def answer(self) -> str:  # pragma: no cover - subclasses define it
        """The answer for the current inputs, in one plain sentence with its numbers."""
        raise NotImplementedError

    def chart(self, name: str):
        """The named chart (an ``alt.Chart``) for the current result."""
        if name not in self.chart_makers:
            raise InputError(
                f"unknown chart {name!r}; this worksheet draws {sorted(self.chart_makers)}"
            )
        return self.chart_makers[name](self)

    def show(self, name: str):
        """Display the named chart as a cell output that follows every later change of the controls."""
        from IPython.display import display

        self._handles[name] = display(self.chart(name), display_id=True)

    def record(self) -> str:
        """The inputs as plain text (what a static report shows in place of the controls)."""
        return "Inputs: " + ", ".join(f"{k} = {v}" for k, v in self.inputs.items())

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.panel._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = self.record()
        return bundle


def _dropdown(description: str, options, value) -> widgets.Dropdown:
    return widgets.Dropdown(
        description=description,
        options=options,
        value=value,
        style={"description_width": "initial"},
    )


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
        self._models = {name: name for name in data.list_models()} | {spec.name: spec}
        self.heatmap_gpus = list(heatmap_gpus or data.list_gpus())
        self.heatmap_seq_lens = list(heatmap_seq_lens)
        self.heatmap_tensor_parallel = list(heatmap_tensor_parallel)
        slider = {"continuous_update": False, "style": {"description_width": "initial"}}
        controls = {
            "model": _dropdown("model", list(self._models), spec.name),
            "gpu": _dropdown("GPU", data.list_gpus(), data.resolve_gpu(gpu)),
            "tensor_parallel": _dropdown(
                "tensor parallel (GPUs)", self._tp_options(spec), tensor_parallel
            ),
            "kv_dtype": _dropdown("KV cache dtype", ["auto", "bf16", "fp16", "fp8"], kv_dtype),
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
            "accounting": _dropdown("accounting", list(memory.ACCOUNTINGS), accounting),
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
        self.overview = memory.max_concurrency(
            **common,
            gpu=self.heatmap_gpus,
            tensor_parallel=self.heatmap_tensor_parallel,
            seq_len=self.heatmap_seq_lens,
            invalid_tensor_parallel="mask",
        )

    @property
    def answer(self) -> str:
        """The answer in one sentence."""
        return memory.describe(self.result)

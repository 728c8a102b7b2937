"""Worksheet responsiveness: one control change, from the new value to every changed chart redrawn.

Each worksheet is the notebook's own (``capnb.notebook.worksheet``: its cells run headless up to
its ``ws``), built with its defaults, and every chart is "displayed" on a headless handle that does
what IPython does with a displayed object (asks for its MIME bundle through the active renderer,
here capnb's offline one). A change then runs the worksheet's own path: the notebook's visible step
function again, the answer, the charts whose content changed. Each control
flips between two values so that every timed call is a real change; each direction keeps its best
of several flips, and the row reports the slower direction. Goal (issue 7): under 150 ms for every
control of every worksheet.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from . import Row

GOAL_S = 0.150


class _Handle:
    """A display handle without a notebook: renders what it is given, as IPython would."""

    def update(self, drawing) -> None:
        drawing._repr_mimebundle_()


def _displayed(worksheet) -> None:
    for name in worksheet.charts:
        worksheet.attach(name, _Handle())


def _values(worksheet, control: str, values: tuple | None) -> tuple:
    # no values given: another option of a selection (or a step of a slider) and the current one
    if values is None:
        widget = worksheet.controls[control]
        if hasattr(widget, "options"):
            options = [o[1] if isinstance(o, tuple) else o for o in widget.options]
            other = next(o for o in options if o != widget.value)
        else:
            step = getattr(widget, "step", 1) or 1
            other = (
                widget.value + step if widget.value + step <= widget.max else widget.value - step
            )
        values = (other, widget.value)
    return values


def _forget_months(worksheet) -> None:
    # capnb keeps the last few Monte Carlo months without bursts, and the notebook's kept stages
    # their last answers; a new interval or trace makes new ones, so forget the kept ones to time
    # a first visit, not a return to a value
    from capnb.forecast import _months

    _months._KEPT.clear()
    for value in worksheet.compute.__globals__.values():
        if callable(getattr(value, "clear", None)) and hasattr(value, "__wrapped__"):
            value.clear()


#: Controls whose new values need new Monte Carlo months or a new policy sweep: their first visit
#: is timed (the worksheet's kept stages would otherwise return to a value already computed).
_NEW_MONTHS = {"interval", "trace", "slots", "tolerance_s", "cold_start_s"}


def _flip(
    worksheet, control: str, values: tuple, repeat: int
) -> tuple[dict[object, float], list[str]]:
    """Best time of each change of ``control`` (to each value in turn), and the charts redrawn.

    A change can cost more in one direction than the other (a new metric may need curves the old
    one did not), so each value keeps its own best time; the row reports the slower.
    """
    cycle = itertools.cycle(values)
    best = dict.fromkeys(values, float("inf"))
    redrawn: list[str] = []
    worksheet.set(**{control: next(cycle)})  # warm-up (and a real first change)
    for _ in range(repeat * len(values)):
        value = next(cycle)
        if control in _NEW_MONTHS:
            _forget_months(worksheet)
        start = time.perf_counter()
        worksheet.set(**{control: value})
        best[value] = min(best[value], time.perf_counter() - start)
        redrawn = sorted({*redrawn, *worksheet.last_redrawn})
    return best, redrawn


def _cases(quick: bool) -> list[tuple[str, Callable, list[tuple[str, tuple | None]]]]:
    from capnb.notebook import worksheet

    return [
        (
            "01_forecasting (servegen-m-large, 10,000 months)",
            lambda: worksheet("01_forecasting", TRIALS=1_000 if quick else 10_000),
            [
                ("quantile", (0.95, 0.99)),
                ("exceed_probability", (0.01, 0.05)),
                ("bursts_per_month", (2.0, 1.5)),
                ("burst_multiplier", ((3.0, 6.0), (3.0, 5.0))),
                ("burst_hours", ((1.0, 3.0), (1.0, 2.0))),
                ("interval", ("20min", "10min")),
            ],
        ),
        (
            "02_memory (Llama-3.1-70B, 12 GPUs x 4 TP x 8 lengths overview)",
            lambda: worksheet("02_memory"),
            [
                ("gpu", ("H200", "H100-SXM")),
                ("seq_len", (4096, 8192)),
                ("tensor_parallel", (4, 2)),
                ("axis_up_to", (128, 64)),
                ("kv_dtype", ("fp8", "auto")),
                ("headroom", (0.2, 0.15)),
                ("model", ("Llama-3.1-8B", "Llama-3.1-70B")),
            ],
        ),
        (
            "03_capacity (dstack vLLM MI300X curve, 12 GPUs x 4 TP x 10 SLAs overview)",
            lambda: worksheet("03_capacity"),
            [
                ("sla", None),
                ("target_qps", None),
                ("buffer", None),
                ("metric", None),
                ("gpu", None),
                ("curve", None),
            ],
        ),
        (
            "04_elasticity (servegen-m-large at 1 s steps, 5 policies x the policy grid)",
            lambda: worksheet("04_elasticity"),
            [
                ("policy", None),
                ("scale_up_threshold", None),
                ("cooldown_s", None),
                ("min_instances", None),
                ("buffer_instances", None),
                ("breach_budget", None),
                ("tolerance_s", None),
                ("cold_start_s", None),
            ],
        ),
    ]


def run(quick: bool = False) -> list[Row]:
    from capnb import notebook

    notebook.setup()  # capnb's offline renderer, as in a worksheet's first cell
    repeat = 1 if quick else 4  # a smoke run flips each control once each way
    rows = []
    for label, make, controls in _cases(quick):
        start = time.perf_counter()
        worksheet = make()
        _displayed(worksheet)
        t_first = time.perf_counter() - start
        rows.append(
            Row(
                label.split(" (")[0] + ": first run",
                label[label.index("(") + 1 : -1],
                t_first,
                f"{t_first:.2f} s to the first answer and every chart",
                {},
                "kernels from the on-disk cache; not an interaction",
            )
        )
        for control, values in controls:
            values = _values(worksheet, control, values)
            best, redrawn = _flip(worksheet, control, values, repeat)
            seconds = max(best.values())
            goal = "met" if seconds < GOAL_S else "NOT met"
            each = ", ".join(f"to {v}: {t * 1e3:,.0f} ms" for v, t in best.items())
            rows.append(
                Row(
                    f"{label.split(' (')[0]}: {control}",
                    " <-> ".join(str(v) for v in values),
                    seconds,
                    f"{seconds * 1e3:,.0f} ms, the slower way (goal < 150 ms: {goal})",
                    {},
                    f"{each}; redrawn: {', '.join(redrawn) or 'none'}",
                )
            )
    return rows

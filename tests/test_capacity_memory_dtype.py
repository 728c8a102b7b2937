"""safe_concurrency(memory_limit="auto") sizes memory with the curve's own weight and KV dtypes."""

from __future__ import annotations

import pandas as pd
import pytest

from capnb import capacity, data, latency, memory
from capnb.errors import InputError

W = latency.workload(prompt_tokens=[6000] * 4, output_tokens=[2000] * 4)
GRID = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def _memory(weight_dtype=None, seq_len=8000):
    return int(
        memory.max_concurrency(
            model="Llama-3.1-70B", gpu="H100-SXM", tensor_parallel=2, seq_len=seq_len,
            weight_dtype=weight_dtype,
        ).max_concurrency.item()
    )  # fmt: skip


def test_an_fp8_analytic_curve_is_capped_by_fp8_memory_not_bf16():
    fp8, bf16 = _memory("fp8"), _memory()
    assert bf16 <= 3 and fp8 > 8 * bf16  # the bug: FP8 at TP 2 capped at a few bf16 requests
    curve = latency.analytic(
        "Llama-3.1-70B", "H100-SXM", 2, workload=W, weight_dtype="fp8", concurrency=GRID
    )
    assert curve.attrs["weight_dtype"] == "fp8"
    result = capacity.safe_concurrency(curve, 1e6, metric="e2e")  # an SLA that never binds
    assert int(result.safe_concurrency.item()) == fp8
    assert str(result.binding.item()) == "memory"
    assert "fp8 weights" in result.attrs["memory"]
    # the same curve in the config's bf16 is capped at bf16's limit
    plain = latency.analytic("Llama-3.1-70B", "H100-SXM", 2, workload=W, concurrency=GRID)
    assert plain.attrs["weight_dtype"] == "auto"
    assert int(capacity.safe_concurrency(plain, 1e6, metric="e2e").safe_concurrency.item()) == bf16


def test_a_measured_curve_names_its_precision_through_the_reader():
    table = pd.DataFrame(
        {"concurrency": [1, 8, 64], "e2e_p99_s": [10.0, 12.0, 20.0], "e2e_mean_s": [9, 11, 18]}
    )
    curve = data.read_latency_table(
        table, prompt_tokens=6000, output_tokens=2000, model="Llama-3.1-70B", gpu="H100-SXM",
        tensor_parallel=2, weight_dtype="fp8",
    )  # fmt: skip
    result = capacity.safe_concurrency(curve, 100.0, metric="e2e")
    assert int(result.safe_concurrency.item()) == min(64, _memory("fp8"))
    bad = curve.assign_attrs(weight_dtype="fp7")
    with pytest.raises(InputError, match="weight_dtype"):
        capacity.safe_concurrency(bad, 100.0, metric="e2e")

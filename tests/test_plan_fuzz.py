"""Random plan configs, valid and not: ``capnb.plan.build`` gives a plan or a capnb error, nothing else."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capnb import plan
from capnb.errors import CapnbError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    """Two days of a rate series at 10-minute windows, 20-60 requests/s."""
    path = tmp_path_factory.mktemp("fuzz") / "rates.csv"
    times = pd.date_range("2026-03-02", periods=2 * 144, freq="10min")
    qps = 40 + 20 * np.sin(2 * np.pi * np.arange(times.size) / 144)
    pd.DataFrame({"timestamp": times, "qps": qps}).to_csv(path, index=False)
    return str(path)


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.integers(-5, 5),
    st.text(max_size=4),
    st.booleans(),
    st.none(),
)
FIELDS = {
    "traffic_quantile": st.one_of(st.sampled_from([0.5, 0.95, 0.99]), numbers),
    "demand_scale": st.one_of(st.sampled_from([0.05, 1.0, 3.0]), numbers),
    "sla_s": st.one_of(st.sampled_from([0.02, 0.05, 0.5, 5.0]), numbers),
    "sla_metric": st.one_of(st.sampled_from(["ttft", "tpot", "e2e", "itl"]), st.text(max_size=5)),
    "cold_start_s": st.one_of(st.sampled_from(["estimate", 0.0, 30.0, 600.0]), numbers),
    "gpus": st.one_of(
        st.lists(
            st.sampled_from(["H100-SXM", "L4", "B200", "H100", "nope"]), min_size=0, max_size=2
        ),
        numbers,
    ),
    "tensor_parallel": st.one_of(st.lists(st.sampled_from([1, 2, 0, 3]), max_size=2), numbers),
    "policies": st.one_of(
        st.lists(st.sampled_from(["hpa", "fixed", "article", "magic"]), max_size=2), numbers
    ),
    "bursts": st.one_of(st.sampled_from(["article", "none", "fit"]), numbers),
    "trace_kind": st.one_of(st.sampled_from(["auto", "rates", "requests"]), numbers),
}


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.fixed_dictionaries({}, optional=FIELDS))
def test_a_plan_or_a_capnb_error(small_trace, changes):
    base = {
        "trace": small_trace,
        "trials": 50,
        "gpus": ["H100-SXM"],
        "tensor_parallel": [1],
        "policies": ["fixed"],
        "scale_up_threshold": [0.7],
        "cooldown_s": [900.0],
        "buffer_instances": [0],
        "step_s": 60.0,
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", plan.PlanWarning)
            built = plan.build({**base, **changes})
    except CapnbError as error:
        assert str(error)  # a message, naming what is wrong
        return
    assert built.attrs["per_instance_qps"] > 0
    assert math.isfinite(built.attrs["monthly_usd"])

"""The Policy record: one typed record of an autoscaling policy's settings, taken as ``policy=``."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from capnb import elasticity
from capnb.elasticity import OPTIONS, Policy
from capnb.errors import InputError

RATE = 20 + 15 * np.sin(np.arange(3000) * 2 * np.pi / 1000)
RUN = {"step_s": 5, "per_instance_qps": 10, "cold_start_s": 30}


def identical(a: xr.Dataset, b: xr.Dataset) -> bool:
    """The same variables, coordinates and attrs, every value bit for bit."""
    return a.identical(b) and all(
        a[k].values.tobytes() == b[k].values.tobytes() for k in a.variables if a[k].dtype != object
    )


KEYWORDS = [
    {"policy": "article"},
    {"policy": "hpa", "scale_up_threshold": 0.6, "cooldown_s": 600, "min_instances": 2,
     "buffer_instances": 1, "sync_s": 30, "scale_up_pods": 2},
    {"policy": "fixed_elastic", "min_instances": 3, "max_instances": 9, "scale_down_threshold": 0.2},
    {"policy": "fixed", "min_instances": 4},
    {"policy": "predictive", "cooldown_s": 0, "buffer_instances": 2},
]  # fmt: skip


@pytest.mark.parametrize("keywords", KEYWORDS, ids=[k["policy"] for k in KEYWORDS])
def test_the_record_and_the_keywords_give_the_same_run_bit_for_bit(keywords):
    extra = {"forecast": RATE * 1.1} if keywords["policy"] == "predictive" else {}
    by_keywords = elasticity.simulate(RATE, **RUN, **keywords, **extra)
    record = Policy.from_settings(keywords)
    assert identical(by_keywords, elasticity.simulate(RATE, **RUN, policy=record, **extra))
    # and the record says the same keywords back
    assert identical(by_keywords, elasticity.simulate(RATE, **RUN, **record.settings(), **extra))


def test_the_record_fills_the_policy_defaults_and_compares_by_value():
    hpa = Policy("hpa")
    assert hpa.cooldown_s == 300.0 and hpa.options == OPTIONS["hpa"]
    assert hpa == Policy("hpa", cooldown_s=300.0, options={"sync_s": 15.0})
    assert Policy("article").cooldown_s == 900.0
    assert Policy("hpa", cooldown_s="5 min").cooldown_s == 300.0  # a quantity is converted
    assert Policy(min_instances=2.0).min_instances == 2 and Policy().min_instances is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "magic"}, r"policy='magic' is not known"),
        ({"name": ["hpa", "fixed"]}, r"policy: name = \['hpa', 'fixed'\]"),
        ({"scale_up_threshold": 1.5}, r"scale_up_threshold: values must be in \(0, 1\]"),
        ({"scale_up_threshold": "high"}, r"scale_up_threshold: expected a number"),
        ({"scale_up_threshold": [0.6, 0.7]}, r"policy: scale_up_threshold = \[0\.6, 0\.7\]: one"),
        ({"cooldown_s": -1}, r"cooldown_s: values must be >= 0 s"),
        ({"cooldown_s": "5 GB"}, r"cooldown_s: '5 GB' is gigabyte, not a time in s"),
        ({"min_instances": 1.5}, r"min_instances: values must be whole numbers >= 0"),
        ({"buffer_instances": -2}, r"buffer_instances: values must be whole numbers >= 0"),
        ({"name": "hpa", "min_instances": 0}, r"min_instances must be at least 1 for the HPA"),
        ({"max_instances": 2.5}, r"max_instances must be a whole number, got 2\.5"),
        ({"min_instances": 5, "max_instances": 3}, r"min_instances=5 is more than max_instances=3"),
        ({"options": {"sync_s": 30}}, r"policy 'article' has no option\(s\) \['sync_s'\]"),
        ({"options": [1, 2]}, r"policy: options = \[1, 2\]: expected a mapping"),
    ],
)
def test_a_bad_value_names_its_field(fields, message):
    with pytest.raises(InputError, match=message):
        Policy(**fields)


def test_a_record_with_its_settings_also_as_keywords_is_refused():
    with pytest.raises(InputError, match="give cooldown_s, sync_s in it, not as keywords"):
        elasticity.simulate(RATE, **RUN, policy=Policy("hpa"), cooldown_s=60, sync_s=30)
    # a keyword left at its default is no conflict
    assert identical(
        elasticity.simulate(RATE, **RUN, policy=Policy("hpa"), scale_up_threshold=0.7),
        elasticity.simulate(RATE, **RUN, policy="hpa"),
    )
    with pytest.raises(InputError, match="not a policy's settings"):
        Policy.from_settings({"policy": "hpa", "tolerance_s": 60})


def test_simulate_pools_takes_the_record_for_every_pool():
    times = pd.date_range("2024-05-13", periods=3600, freq="s").values
    demand = xr.DataArray(25 + 10 * np.sin(np.arange(3600) / 300), dims="time",
                          coords={"time": times})  # fmt: skip
    fleet = xr.Dataset(
        {"instances": (("pool", "slot"), np.full((2, 24), 3)),
         "reserved_instances": ("pool", [2, 0])},
        coords={"pool": ["A", "B"], "per_instance_qps": ("pool", [10.0, 5.0]),
                "tensor_parallel": ("pool", [1, 1]), "gpu": ("pool", ["L4", "L4"]),
                "slot": np.arange(24)},
    )  # fmt: skip
    run = {"cold_start_s": 60, "tolerance_s": 60}
    keywords = elasticity.simulate_pools(
        demand, fleet, policy="hpa", scale_up_threshold=0.6, cooldown_s=120, sync_s=30, **run
    )
    record = Policy("hpa", scale_up_threshold=0.6, cooldown_s=120, options={"sync_s": 30})
    assert identical(keywords, elasticity.simulate_pools(demand, fleet, policy=record, **run))
    # without a floor the record leaves each pool its reserved base (HPA: at least 1), as the
    # keywords do; a floor in the record is every pool's, as min_instances= is
    assert identical(
        elasticity.simulate_pools(demand, fleet, policy=Policy("hpa"), **run),
        elasticity.simulate_pools(demand, fleet, policy="hpa", **run),
    )
    assert identical(
        elasticity.simulate_pools(demand, fleet, policy=Policy("hpa", min_instances=3), **run),
        elasticity.simulate_pools(demand, fleet, policy="hpa", min_instances=3, **run),
    )
    with pytest.raises(InputError, match="give cooldown_s in it"):
        elasticity.simulate_pools(demand, fleet, policy=record, cooldown_s=60, **run)


def test_a_plans_answer_gives_its_policy_as_a_record():
    from capnb.plan._answer import Policy as Chosen

    chosen = Chosen(name="hpa", scale_up_threshold=0.7, cooldown_s=900.0, min_instances=2,
                    buffer_instances=1, kind="fixed_plus_buffer", cold_start_s=30.0,
                    cold_start_vetoes=False)  # fmt: skip
    assert chosen.record == Policy("hpa", cooldown_s=900.0, min_instances=2, buffer_instances=1)
    assert identical(
        elasticity.simulate(RATE, **RUN, policy=chosen.record),
        elasticity.simulate(RATE, **RUN, **chosen.selection),
    )


def test_a_plan_of_one_policy_replays_that_policy():
    # a sweep of one policy has no policy dim, so the chosen cell does not name it: the plan's
    # replay once fell back to simulate's default (the article's rule) while the answer said hpa
    from capnb.plan import PlanConfig
    from capnb.plan._steps import chosen_policy

    cfg = PlanConfig().replace(
        elasticity={"policies": ("hpa",), "scale_up_threshold": (0.6,), "cooldown_s": (300.0,)}
    )
    cell = {"scale_up_threshold": 0.6, "cooldown_s": 300.0, "min_instances": 3,
            "buffer_instances": 2}  # fmt: skip
    assert chosen_policy(cfg, cell) == Policy("hpa", 0.6, 300.0, 3, 2)
    assert chosen_policy(cfg, {**cell, "policy": "knative"}).name == "knative"


def test_a_rate_rule_set_to_none_is_absent_as_in_a_manifest_without_it():
    """HPA's scale-up Pods rule given as None is no rule (a manifest with the Percent rule only),
    not the default 4 pods: from 1 instance a 10x step grows to 2 (100 %) in one period, and
    further with the Pods rule."""
    assert Policy("hpa", options={"scale_up_pods": None}).options["scale_up_pods"] is None
    step = np.r_[np.full(200, 5.0), np.full(400, 100.0)]
    run = {"step_s": 5, "per_instance_qps": 10, "cold_start_s": 0, "policy": "hpa",
           "scale_up_threshold": 1.0, "sync_s": 15}  # fmt: skip
    both = elasticity.simulate(step, **run)
    percent_only = elasticity.simulate(step, **run, scale_up_pods=None)
    first = int(np.argmax(both.ready_instances.values > 1))
    assert int(percent_only.ready_instances[first]) == 2
    assert int(both.ready_instances[first]) > 2
    with pytest.raises(InputError, match="give scale_up_pods or scale_up_percent"):
        elasticity.simulate(step, **run, scale_up_pods=None, scale_up_percent=None)


def test_a_policy_of_no_instances_is_refused_where_it_is_made():
    # max_instances = 0 was accepted by the record and refused only when a run used it
    from capnb.elasticity import Policy
    from capnb.errors import InputError

    with pytest.raises(InputError, match="max_instances must be at least 1 instance, got 0"):
        Policy("hpa", max_instances=0)
    assert Policy("hpa", max_instances=1).max_instances == 1


def test_sweep_given_a_record_says_how_to_sweep_its_settings():
    # sweep(..., policy=Policy("knative", ...)) ended in "TypeError: 'Policy' object is not
    # iterable"; a record is one run, and its settings() are sweep's keywords
    record = Policy("hpa", min_instances=2, options={"sync_s": 30})
    for given in (record, [record, "fixed"]):
        with pytest.raises(InputError, match=r"policy: sweep takes policy names.*settings\(\)"):
            elasticity.sweep(RATE, **RUN, policy=given)
    swept = elasticity.sweep(RATE, **RUN, **record.settings())
    assert float(swept.gpu_hours) == float(
        elasticity.simulate(RATE, **RUN, policy=record).gpu_hours
    )

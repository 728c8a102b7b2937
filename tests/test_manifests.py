"""capnb.plan.manifests: the chosen policy as HPA / Knative / KEDA objects, schema-valid, replayed.

The round trip: a choice -> its YAML -> parsed back -> capnb's own simulator gives the same run,
step for step, as the choice's own settings. The schemas are the published ones, vendored in
datasets/schemas/ (Kubernetes 1.33 via kubernetes-validate, Knative Serving's and KEDA's CRDs), checked
offline with jsonschema.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import capnb
from capnb.errors import InputError
from capnb.plan import PolicyChoice, manifest_settings, manifests
from capnb.plan._manifests import KINDS

SCHEMAS = Path(__file__).resolve().parents[1] / "datasets" / "schemas"
SCHEMA_FILES = {
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "horizontalpodautoscaler-autoscaling-v2.json",
    ("serving.knative.dev/v1", "Service"): "service-serving-knative-v1.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject-keda-v1alpha1.json",
    ("v1", "ConfigMap"): "configmap-v1.json",
}


def schema_errors(doc: dict) -> list[str]:
    import jsonschema

    schema = json.loads((SCHEMAS / SCHEMA_FILES[(doc["apiVersion"], doc["kind"])]).read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def parsed(out, kind: str) -> list[dict]:
    """The objects as a cluster would read them: the YAML text, parsed."""
    return list(yaml.safe_load_all(out.yaml(kind)))


CHOICES = {
    "hpa": PolicyChoice("hpa", per_instance_qps=30.0, scale_up_threshold=0.7, cooldown_s=900.0,
                        min_instances=2, max_instances=120),
    "hpa with spares": PolicyChoice("hpa", per_instance_qps=30.0, scale_up_threshold=0.8,
                                    cooldown_s=300.0, min_instances=3, max_instances=120,
                                    buffer_instances=2,
                                    options={"scale_down_pods": 2, "scale_up_pods": None}),
    "knative": PolicyChoice("knative", per_instance_qps=8.798333690623629, scale_up_threshold=0.6,
                            cooldown_s=1800.0, min_instances=1, max_instances=400),
    "knative, own rates": PolicyChoice("knative", per_instance_qps=30.0, scale_up_threshold=0.7,
                                       cooldown_s=0.0, min_instances=1, max_instances=120,
                                       options={"max_scale_down_rate": 4.0,
                                                "stable_window_s": 120.0,
                                                "panic_window_s": 12.0}),
    "article": PolicyChoice("article", per_instance_qps=30.0, scale_up_threshold=0.7,
                            cooldown_s=900.0, min_instances=4, max_instances=120),
    "fixed": PolicyChoice("fixed", per_instance_qps=30.0, scale_up_threshold=0.7, cooldown_s=0.0,
                          min_instances=40, max_instances=40),
}  # fmt: skip


@pytest.mark.parametrize("case", CHOICES)
def test_every_object_is_valid_against_its_published_schema(case):
    out = manifests(CHOICES[case])
    for kind in ("hpa", "knative", "keda"):
        for doc in parsed(out, kind):
            assert schema_errors(doc) == [], (kind, doc["kind"])


def test_the_schemas_are_strict_a_misspelt_field_fails():
    out = manifests(CHOICES["hpa"])
    hpa, (service,) = parsed(out, "hpa")[0], parsed(out, "knative")
    hpa["spec"]["behavior"]["scaleDown"]["stabilisationWindowSeconds"] = 60
    assert any("stabilisationWindowSeconds" in e for e in schema_errors(hpa))
    service["spec"]["template"]["spec"]["containers"][0]["imag"] = "x"
    assert schema_errors(service)
    keda = parsed(out, "keda")[0]
    keda["spec"]["minReplicaCount"] = "two"
    assert schema_errors(keda)


@pytest.fixture(scope="module")
def demand():
    """One day of the bundled servegen-m-small trace at 1-second steps (requests/s)."""
    from capnb.data import load_rate_series
    from capnb.forecast import fit_baseline

    series = load_rate_series("servegen-m-small")
    full = capnb.elasticity.prepare_demand(series, 1.0, baseline=fit_baseline(series))
    return full.isel(time=slice(0, 86_400))


def same_run(a, b) -> bool:
    return set(a.data_vars) == set(b.data_vars) and all(
        np.array_equal(a[name].values, b[name].values) for name in a.data_vars
    )


@pytest.mark.parametrize("case", ["hpa", "hpa with spares", "knative", "knative, own rates"])
def test_the_exported_values_replay_the_chosen_run_step_for_step(case, demand):
    choice = CHOICES[case]
    out = manifests(choice)
    run = dict(step_s=1.0, cold_start_s=90.0, tolerance_s=60.0)
    chosen = capnb.elasticity.simulate(demand, **run, **choice.settings())
    assert int(chosen.scale_events) > 0  # the run does scale: the round trip has work to do
    kinds = ["hpa", "keda"] if choice.policy == "hpa" else ["knative"]
    for kind in kinds:
        assert out.exact[kind], (kind, out.notes[kind])
        settings = manifest_settings(parsed(out, kind))
        assert settings == choice.settings()
        assert same_run(chosen, capnb.elasticity.simulate(demand, **run, **settings))


def test_what_cannot_be_said_is_noted_and_replayed_as_written(demand):
    run = dict(step_s=1.0, cold_start_s=90.0, tolerance_s=60.0)
    spares = CHOICES["hpa with spares"]
    knative = manifests(PolicyChoice("knative", **{
        k: getattr(spares, k) for k in ("per_instance_qps", "scale_up_threshold", "cooldown_s",
                                        "min_instances", "max_instances", "buffer_instances")}))  # fmt: skip
    assert not knative.exact["knative"] and "folded into min-scale" in knative.notes["knative"][0]
    folded = manifest_settings(parsed(knative, "knative"))
    assert (folded["min_instances"], folded["buffer_instances"]) == (5, 0)
    replay = capnb.elasticity.simulate(demand, **run, **folded)
    assert same_run(replay, capnb.elasticity.simulate(demand, **run, **knative.replays["knative"]))
    # a policy with no Kubernetes form: the HPA that holds its target, floor and window
    article = manifests(CHOICES["article"])
    assert not article.exact["hpa"] and "no Kubernetes form" in article.notes["hpa"][0]
    assert article.replays["hpa"]["policy"] == "hpa"
    assert article.replays["hpa"]["cooldown_s"] == 900.0
    # a fixed fleet: min = max, and the HPA's replay is the fixed run
    fixed = manifests(CHOICES["fixed"])
    spec = fixed.documents["hpa"][0]["spec"]
    assert spec["minReplicas"] == spec["maxReplicas"] == 40
    a = capnb.elasticity.simulate(demand, **run, **CHOICES["fixed"].settings())
    b = capnb.elasticity.simulate(demand, **run, **fixed.replays["hpa"])
    assert np.array_equal(a.ready_instances, b.ready_instances)


@pytest.mark.parametrize("spares", [0, 2])
def test_a_fixed_fleet_pinned_by_each_object_is_said_to_replay_as_the_chosen_run(demand, spares):
    # every object pins the fleet (min = max) and replays the fixed run step for step, yet
    # exact was false and capnb export said each "replays as a different run"
    run = dict(step_s=1.0, cold_start_s=90.0, tolerance_s=60.0)
    choice = dataclasses.replace(CHOICES["fixed"], buffer_instances=spares)
    out = manifests(choice)
    chosen = capnb.elasticity.simulate(demand, **run, **choice.settings())
    for kind in KINDS:
        assert out.exact[kind], (kind, out.notes[kind])
        replay = capnb.elasticity.simulate(demand, **run, **out.replays[kind])
        for name in ("ready_instances", "starting_instances", "backlog", "served"):
            assert np.array_equal(chosen[name].values, replay[name].values), (kind, name)
    article = manifests(CHOICES["article"])  # an autoscaler that moves is still a different run
    assert not any(article.exact.values())


def test_the_objects_of_a_vetoed_article_policy_say_they_scale_up_where_the_plan_did_not():
    # Mistral-Small-24B on 1 x H200: a 188 s cold start against a 60 s budget vetoed every
    # scale-up of the article rule, so the plan's 2,714 USD a month held 1 instance; hpa.yaml
    # (maxReplicas 9) said only "holds its target utilisation (0.6), floor (1) and scale-down
    # window (300 s) with HPA's own rules", not that it adds up to 8 instances the plan did not
    choice = PolicyChoice("article", per_instance_qps=8.36, scale_up_threshold=0.6,
                          cooldown_s=300.0, min_instances=1, max_instances=9,
                          cold_start_s=188.0, cold_start_vetoes=True)  # fmt: skip
    out = manifests(choice)
    for kind in ("hpa", "knative", "keda"):
        said = " ".join(out.notes[kind])
        assert "188 s cold start vetoed every scale-up" in said, (kind, said)
        assert "this object scales up to 9 instances" in said, (kind, said)
    plain = manifests(dataclasses.replace(choice, cold_start_vetoes=False))
    assert not any("vetoed" in n for n in plain.notes["hpa"])


def test_one_warm_spare_is_named_in_the_singular():
    # policies = ["fixed"], buffer_instances = [1]: hpa.yaml said "hold the 1 warm spares as a
    # second Deployment", knative.yaml "the 1 warm spares are folded into min-scale"
    for spares, said in ((1, "hold the 1 warm spare as a second Deployment"),
                         (2, "hold the 2 warm spares as a second Deployment")):  # fmt: skip
        out = manifests(dataclasses.replace(CHOICES["fixed"], buffer_instances=spares))
        for kind in ("hpa", "keda"):
            assert any(n.startswith(said) for n in out.notes[kind]), (kind, out.notes[kind])
        folded = f"the {spares} warm spare{'s are' if spares > 1 else ' is'} folded into min-scale"
        assert any(folded in n for n in out.notes["knative"]), out.notes["knative"]


def test_an_hpas_per_pod_metric_with_warm_spares_counts_their_arrivals_too():
    # hpa.yaml with 2 warm spares (a second Deployment behind the same Service) scaled on a
    # Pods metric of "arrival requests/s per pod": each of the 3 autoscaled pods' own arrivals
    # average 3/5 of the rate over those pods the replay's ratio reads (rate / ready), so the
    # HPA scaled up at 0.8 / 0.6 = 1.33 of the target while the object said it was the chosen run
    choice = CHOICES["hpa with spares"]  # floor 3, 2 spares, target 0.8
    out = manifests(choice)
    assert out.exact["hpa"]
    (hpa,) = parsed(out, "hpa")
    said = hpa["metadata"]["annotations"]["capnb.io/metric"]
    assert "the Service's arrival requests/s (the pods of the 2 warm spares included)" in said
    assert "over this Deployment's pods" in said
    note = next(n for n in out.notes["hpa"] if n.startswith("capnb_instance_load reads"))
    assert "60% of the load at the floor of 3" in note
    assert not any(n.startswith("capnb_instance_load reads") for n in out.notes["keda"])
    plain = manifests(CHOICES["hpa"])  # no spares: each pod's own arrivals are the replay's
    assert (
        "arrival requests/s per pod"
        in plain.documents["hpa"][0]["metadata"]["annotations"]["capnb.io/metric"]
    )
    assert not any(n.startswith("capnb_instance_load reads") for n in plain.notes["hpa"])


def test_a_cold_start_beyond_knatives_progress_deadline_is_written_into_the_service():
    # Qwen3-235B-A22B on 8 x A100-80GB starts in 1,714 s (capnb's estimate): knative.yaml left
    # Knative's progress deadline at its 600 s default, so the revision's first pods were still
    # loading the weights when Knative marked it failed (ProgressDeadlineExceeded)
    choice = dataclasses.replace(CHOICES["knative"], cold_start_s=1714.0)
    out = manifests(choice)
    (service,) = parsed(out, "knative")
    notes = service["spec"]["template"]["metadata"]["annotations"]
    assert notes["serving.knative.dev/progress-deadline"] == "3428s"  # twice the cold start
    assert schema_errors(service) == []
    assert any("1714 s cold start" in n and "600 s" in n for n in out.notes["knative"])
    assert any("progressDeadlineSeconds: 3428" in n for n in out.notes["hpa"])
    assert manifest_settings(parsed(out, "knative")) == manifest_settings(
        parsed(manifests(CHOICES["knative"]), "knative")
    )  # the deadline changes no step of the replay
    quick = manifests(dataclasses.replace(CHOICES["knative"], cold_start_s=75.0))
    assert (
        "serving.knative.dev/progress-deadline"
        not in (quick.documents["knative"][0]["spec"]["template"]["metadata"]["annotations"])
    )
    with pytest.raises(InputError, match=r"cold_start_s must be >= 0, got -1"):
        dataclasses.replace(choice, cold_start_s=-1.0)


def test_an_hpa_rate_rule_of_zero_pods_is_refused_as_kubernetes_refuses_it():
    # options={"scale_up_pods": 0} wrote "type: Pods, value: 0" into hpa.yaml and keda.yaml, valid
    # against the published schema, but the API server refuses a policy value that is not
    # greater than zero, while manifests said the objects replay as the chosen run
    for option in ("scale_up_pods", "scale_down_pods"):
        with pytest.raises(InputError, match=rf"options {option}=0: .* greater than zero"):
            PolicyChoice("hpa", per_instance_qps=1.0, scale_up_threshold=0.7, cooldown_s=60.0,
                         min_instances=1, max_instances=3, options={option: 0})  # fmt: skip


def test_an_hpa_with_no_rate_rule_in_a_direction_is_refused_naming_both_options():
    # scale_down_pods=None and scale_down_percent=None passed PolicyChoice, and manifests failed
    # reading its own object back: "behavior.scaleDown: capnb replays one period per direction,
    # got []" (Kubernetes refuses a direction with no policy; the simulator refuses it too)
    for direction in ("up", "down"):
        options = {f"scale_{direction}_pods": None, f"scale_{direction}_percent": None}
        with pytest.raises(InputError, match=rf"scale_{direction}_pods and scale_{direction}_perc"):
            PolicyChoice("hpa", per_instance_qps=1.0, scale_up_threshold=0.7, cooldown_s=60.0,
                         min_instances=1, max_instances=3, options=options)  # fmt: skip


def test_a_target_finer_than_kubernetes_reads_is_rounded_up_and_noted():
    choice = PolicyChoice("hpa", per_instance_qps=10.0, scale_up_threshold=0.8125,
                          cooldown_s=300.0, min_instances=1, max_instances=10)  # fmt: skip
    out = manifests(choice)
    target = out.documents["hpa"][0]["spec"]["metrics"][0]["pods"]["target"]["averageValue"]
    assert target == "813m" and not out.exact["hpa"]
    assert any("read by Kubernetes as 0.813" in n for n in out.notes["hpa"])
    assert manifest_settings(out.documents["hpa"])["scale_up_threshold"] == 0.813


def test_knative_rates_go_to_the_cluster_configmap():
    out = manifests(CHOICES["knative, own rates"])
    service, config = out.documents["knative"]
    assert config["metadata"] == {"name": "config-autoscaler", "namespace": "knative-serving"}
    assert config["data"]["max-scale-down-rate"] == "4"
    notes = service["spec"]["template"]["metadata"]["annotations"]
    assert notes["autoscaling.knative.dev/window"] == "120s"
    assert notes["autoscaling.knative.dev/panic-window-percentage"] == "10"
    assert len(manifests(CHOICES["knative"]).documents["knative"]) == 1  # defaults: no ConfigMap


def test_a_panic_window_below_knatives_one_percent_of_the_window_is_noted():
    # Knative reads panic-window-percentage in [1, 100] of the stable window: a 6 s panic window
    # over a 20-minute window is 0.5 %, written as 1 % (a 12 s panic window), and said so
    choice = PolicyChoice("knative", per_instance_qps=8.0, scale_up_threshold=0.7, cooldown_s=600.0,
                          min_instances=1, max_instances=20, options={"stable_window_s": 1200.0})  # fmt: skip
    out = manifests(choice)
    notes = out.documents["knative"][0]["spec"]["template"]["metadata"]["annotations"]
    assert notes["autoscaling.knative.dev/panic-window-percentage"] == "1"
    assert out.replays["knative"]["panic_window_s"] == 12.0 and not out.exact["knative"]
    assert any("panic_window_s=6 s is written as 1 % of the 1200 s window (12 s)" in n
               for n in out.notes["knative"])  # fmt: skip


def test_a_panic_window_that_is_no_round_percentage_of_the_window_replays_as_chosen():
    # a 1 s panic window over a 30 s window is 3.333... %: written as 3.333333333 it read back as
    # 0.99999999999 s, whose replay failed ("panic_window_s=1 s is shorter than one step of 1 s"),
    # and 6 s over 45 s read back as 5.99999999985 s, "a different run" with no note saying why
    rate = np.r_[np.full(300, 10.0), np.full(120, 90.0), np.full(600, 10.0)]
    for stable, panic in ((30.0, 1.0), (45.0, 6.0), (3600.0, 37.0)):
        choice = PolicyChoice("knative", per_instance_qps=10.0, scale_up_threshold=0.7,
                              cooldown_s=60.0, min_instances=1, max_instances=20,
                              options={"stable_window_s": stable, "panic_window_s": panic})  # fmt: skip
        out = manifests(choice)
        replay = manifest_settings(parsed(out, "knative"))
        assert replay["panic_window_s"] == panic and out.exact["knative"]
        ran = capnb.elasticity.simulate(rate, step_s=1, cold_start_s=30, **replay)
        chosen = capnb.elasticity.simulate(rate, step_s=1, cold_start_s=30, **choice.settings())
        assert np.array_equal(ran.ready_instances.values, chosen.ready_instances.values)


def test_bad_choices_name_the_field():
    with pytest.raises(InputError, match="policy='kpa'"):
        PolicyChoice("kpa", per_instance_qps=1.0, scale_up_threshold=0.7, cooldown_s=0.0,
                     min_instances=1, max_instances=2)  # fmt: skip
    with pytest.raises(InputError, match="max_instances=1 is below min_instances=3"):
        PolicyChoice("hpa", per_instance_qps=1.0, scale_up_threshold=0.7, cooldown_s=0.0,
                     min_instances=3, max_instances=1)  # fmt: skip
    with pytest.raises(InputError, match="panic_window_s"):
        PolicyChoice("hpa", per_instance_qps=1.0, scale_up_threshold=0.7, cooldown_s=0.0,
                     min_instances=1, max_instances=2, options={"panic_window_s": 6.0})  # fmt: skip
    with pytest.raises(InputError, match="scale_up_threshold"):
        PolicyChoice("hpa", per_instance_qps=1.0, scale_up_threshold=1.5, cooldown_s=0.0,
                     min_instances=1, max_instances=2)  # fmt: skip
    with pytest.raises(InputError, match="no HorizontalPodAutoscaler"):
        manifest_settings({"kind": "Deployment"})


def test_a_name_given_must_be_a_kubernetes_name_and_is_not_rewritten():
    # --name "bad name!!" became "bad-name" without a word; the model's own name still is made one
    choice = CHOICES["hpa"]
    with pytest.raises(InputError, match=r"name='bad name!!' is not a Kubernetes name.*'bad-name'"):
        manifests(choice, name="bad name!!")
    with pytest.raises(InputError, match="namespace='Prod'"):
        manifests(choice, name="qwen3-8b", namespace="Prod")
    hpa = manifests(choice, name="qwen3-8b").documents["hpa"][0]
    assert hpa["metadata"]["name"] == "qwen3-8b"
    assert manifests(choice).documents["hpa"][0]["metadata"]["name"]  # from the model, made one


def test_the_objects_name_starts_with_a_letter_as_a_knative_service_needs():
    # '8b-chat' was written into knative.yaml, which Knative's webhook refuses (its Service and
    # revisions are DNS-1035 labels: a letter first); a model named so gave that name unasked
    import dataclasses

    choice = CHOICES["hpa"]
    with pytest.raises(
        InputError, match=r"'8b-chat' does not start with a letter.*Knative.*'model-8b"
    ):
        manifests(choice, name="8b-chat")
    derived = manifests(dataclasses.replace(choice, model="8B-Chat"))
    for docs in derived.documents.values():
        assert docs[0]["metadata"]["name"] == "model-8b-chat"
    assert manifests(choice, name="qwen3-8b", namespace="1234").documents["hpa"][0]


def test_a_model_name_with_no_latin_letter_or_digit_still_exports_and_says_so(tmp_path):
    # a model folder named '模型' (or '___') built the whole plan, printed it, then ended
    # capnb plan with "name='模型' has no letters or digits for a Kubernetes name": no plan.nc
    # nor plan.json written, and plan has no --name to give one
    import dataclasses

    for model in ("模型", "___", "-"):
        out = manifests(dataclasses.replace(CHOICES["hpa"], model=model))
        for kind, docs in out.documents.items():
            assert docs[0]["metadata"]["name"] == "model", kind
            assert docs[0]["metadata"]["annotations"]["capnb.io/model"] == model
            assert any(f"model's name {model!r} holds no letter or digit" in n
                       for n in out.notes[kind]), out.notes[kind]  # fmt: skip
            assert "capnb export --name" in out.yaml(kind)
    with pytest.raises(InputError, match="has no letters or digits for a Kubernetes name"):
        manifests(CHOICES["hpa"], name="模型")  # a name the user gives is never changed


@pytest.fixture(scope="module")
def small_plan_built(tmp_path_factory):
    """A small plan (m-small trace, HPA and Knative, no spares), exported as plan.nc."""
    import warnings

    config = capnb.plan.read_config(dict(
        trace="servegen-m-small", trials=200, gpus=("H100-SXM",), tensor_parallel=(1,),
        policies=("hpa", "knative"), scale_up_threshold=(0.7,), cooldown_s=(900.0,),
        buffer_instances=(0,), backtest_days=0, provider="none",
    ))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", capnb.plan.PlanWarning)
        plan = capnb.plan.build(config)
    out = tmp_path_factory.mktemp("plan")
    capnb.plan.export(plan, out)
    return plan, out / "plan.nc"


@pytest.mark.slow
def test_a_plans_choice_exports_and_replays_as_its_sweep_ran_it(small_plan_built):
    from capnb.cli import main

    plan, path = small_plan_built
    choice = capnb.plan.policy_choice(plan)
    record = capnb.plan.answer(plan)
    selection = record.policy.selection
    assert (choice.policy, choice.min_instances) == (
        selection["policy"],
        selection["min_instances"],
    )
    # plan.json carries the same answer: the same choice
    assert capnb.plan.policy_choice(json.loads((path.parent / "plan.json").read_text())) == choice
    out = manifests(choice)
    kind = "knative" if choice.policy == "knative" else "hpa"
    assert out.exact[kind]
    # the exported values, replayed on the plan's demand, give the sweep's numbers at the choice
    from capnb.data import load_rate_series
    from capnb.forecast import fit_baseline

    series = load_rate_series("servegen-m-small")
    demand = capnb.elasticity.prepare_demand(series, 1.0, baseline=fit_baseline(series))
    # served as the plan serves it: smoothed over a request's time in an instance (Little's law)
    at = {"gpu": record.gpu, "tensor_parallel": record.tensor_parallel}
    latency = float(
        plan.capacity_operating_concurrency.sel(at) / plan.capacity_per_instance_qps.sel(at)
    )
    demand = capnb.elasticity.smooth_demand(demand, latency)
    replay = capnb.elasticity.simulate(
        demand, step_s=1.0, cold_start_s=float(record.policy.cold_start_s), tolerance_s=60.0,
        **manifest_settings(parsed(out, kind)),
    )  # fmt: skip
    grid = {k: v for k, v in selection.items() if k != "policy"}
    swept = plan.sel(policy=selection["policy"], **grid)
    for name in ("breach_s", "gpu_hours", "scale_events", "instances_started"):
        assert float(replay[name]) == pytest.approx(float(swept[f"elasticity_{name}"]), rel=1e-12)
    # capnb export writes the three files beside the plan, every object schema-valid
    assert main(["export", "--plan", str(path)]) == 0
    assert (
        main(["export", "--plan", str(path.parent / "plan.json"), "--out", str(path.parent / "j")])
        == 0
    )
    assert (path.parent / "j" / "hpa.yaml").read_text() == (path.parent / "hpa.yaml").read_text()
    for kind in ("hpa", "knative", "keda"):
        for doc in yaml.safe_load_all((path.parent / f"{kind}.yaml").read_text()):
            assert schema_errors(doc) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [(("policy", "min_instances"), None, r"answer\.policy\.min_instances is None, not a whole"),
     (("burst_instances",), -3, r"answer burst_instances = -3: expected a whole number >= 0"),
     (("fixed_instances",), [4, 2.5], r"answer\.fixed_instances\[1\] is 2\.5, not a whole"),
     (("policy", "per_instance_qps"), -1.0, None),
     # a string where a number goes ended export with "ValueError: could not convert string to
     # float: 'x'", naming neither the file nor the field; a number for the model became its name
     (("per_instance_qps",), "fast", r"its answer\.per_instance_qps is 'fast', not a number"),
     (("policy", "cooldown_s"), "x", r"its answer\.policy\.cooldown_s is 'x', not a number"),
     (("policy", "scale_up_threshold"), [0.7], r"answer\.policy\.scale_up_threshold is \[0\.7\], not a"),
     (("model",), 5, r"its answer\.model is 5, not text"),
     (("gpu",), None, r"its answer\.gpu is None, not text"),
     # min_instances 1e20 was written as minReplicas: 100000000000000000000 (and maxReplicas
     # too), past the int32 a Kubernetes API server takes; exported without a word
     (("policy", "min_instances"), 1e20,
      r"answer policy\.min_instances = 100000000000000000000: expected a whole number from 0 to "
      r"2,147,483,647"),
     (("tensor_parallel",), 2**31, r"answer tensor_parallel = 2147483648: expected a whole"),
     # found by an outside pass: policy.kind 'x' and reserved_instances -1 were exported without
     # a word, and cold_start_s 1e20 wrote a note recommending progressDeadlineSeconds 2e20
     (("policy", "kind"), "x",
      r"answer policy\.kind = 'x': expected one of \['elastic', 'fixed_plus_buffer', 'fixed'\]"),
     (("reserved_instances",), -1, r"answer reserved_instances = -1: expected a whole number"),
     (("policy", "cold_start_s"), 1e20,
      r"answer policy\.cold_start_s = 1e\+20: expected seconds from 0 to 86,400 \(a day\)")],
)  # fmt: skip
def test_an_edited_plan_json_is_refused_naming_the_file_and_the_field(
    small_plan_built, tmp_path, capsys, field, value, message
):
    # policy.min_instances = null ended export with "TypeError: int() argument must be ...", a
    # negative burst_instances shrank maxReplicas without a word, and no error named the file
    from capnb.cli import main

    _, path = small_plan_built
    built = json.loads((path.parent / "plan.json").read_text())
    holder = built["answer"]
    if field[-1] == "per_instance_qps" and message is None:
        field, message = ("per_instance_qps",), r"per_instance_qps must be > 0, got -1"
    for key in field[:-1]:
        holder = holder[key]
    holder[field[-1]] = value
    edited = tmp_path / "plan.json"
    edited.write_text(json.dumps(built))
    with pytest.raises(InputError, match=message):
        capnb.plan.policy_choice(built)
    assert main(["export", "--plan", str(edited), "--out", str(tmp_path / "out")]) == 1
    assert f"capnb export: {edited}: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_kedas_query_rates_over_a_range_prometheus_can_fill():
    # a rate over the 15-s sync period is empty at a 15-30 s scrape interval: KEDA never scaled
    choice = capnb.plan.PolicyChoice("hpa", per_instance_qps=10.0, scale_up_threshold=0.7,
                                     cooldown_s=300.0, min_instances=1, max_instances=8,
                                     buffer_instances=0, model="Llama-3.1-8B", gpu="H100-SXM",
                                     tensor_parallel=1)  # fmt: skip
    out = manifests(choice)
    query = out.documents["keda"][0]["spec"]["triggers"][0]["metadata"]["query"]
    assert "[60s]" in query and "[15s]" not in query
    assert any("rate is over 60 s" in note for note in out.notes["keda"])
    assert out.exact["keda"] and manifest_settings(out.documents["keda"]) == out.replays["keda"]


@pytest.mark.parametrize("case", ["hpa", "knative"])
def test_a_tensor_parallel_choice_replays_its_gpu_hours(case, demand):
    # the objects say 4 GPUs an instance (tensor-parallel annotation, nvidia.com/gpu: 4), yet their
    # replay left gpus_per_instance out: a plan of 4 x B200 instances replayed at 61,294 GPU-hours
    # over 14 days where the plan's own run had 245,175 (instance-hours, a quarter of the GPUs)
    run = dict(step_s=1.0, cold_start_s=90.0, tolerance_s=60.0)
    choice = dataclasses.replace(CHOICES[case], tensor_parallel=4, gpu="B200")
    out = manifests(choice)
    chosen = capnb.elasticity.simulate(demand, **run, **choice.settings())  # 4 GPUs an instance
    for kind in ["hpa", "keda"] if case == "hpa" else ["knative"]:
        settings = manifest_settings(parsed(out, kind))
        assert settings["gpus_per_instance"] == 4, kind
        replay = capnb.elasticity.simulate(demand, **run, **settings)
        assert float(replay.gpu_hours) == float(chosen.gpu_hours), kind
        assert out.exact[kind]


def test_a_fixed_fleets_spares_folded_into_knative_are_not_said_to_be_a_different_run():
    # fixed, 1 instance + 2 spares: knative.yaml pins min-scale = max-scale = 3 and replays as the
    # chosen run (capnb export said so), yet its note said "(a different run from spares held
    # above the pool)"
    choice = dataclasses.replace(CHOICES["fixed"], min_instances=1, max_instances=1,
                                 buffer_instances=2)  # fmt: skip
    out = manifests(choice)
    assert out.exact["knative"]
    notes = out.notes["knative"]
    assert any("folded into min-scale and max-scale (1 + 2)" in n for n in notes), notes
    assert not any("different run" in n for n in notes), notes
    assert "different run" not in out.yaml("knative")


def test_a_per_instance_rate_priced_with_a_prefix_cache_says_the_routing_it_assumes():
    # a plan with prefix_cache_share = 0.3 priced each instance with the hit rate of one cache
    # seeing the whole log, and says so; its hpa.yaml, knative.yaml and keda.yaml said nothing of
    # it, while the Service they scale behind spreads requests over every pod's own cache
    choice = dataclasses.replace(CHOICES["hpa"], prefix_hit_rate=0.35)
    out = manifests(choice)
    for kind in KINDS:
        said = [n for n in out.notes[kind] if "prefix cache" in n]
        assert said and "35.0% of prompt tokens" in said[0], (kind, out.notes[kind])
        assert "one cache seeing the whole log" in said[0] and "route" in said[0]
        assert out.documents[kind][0]["metadata"]["annotations"]["capnb.io/prefix-hit-rate"] == (
            "0.35"
        )
    assert out.exact["hpa"]  # a note, not a different run
    plain = manifests(CHOICES["hpa"])
    assert not any("prefix cache" in n for notes in plain.notes.values() for n in notes)
    assert "capnb.io/prefix-hit-rate" not in plain.documents["hpa"][0]["metadata"]["annotations"]
    with pytest.raises(InputError, match="prefix_hit_rate must be in"):
        dataclasses.replace(CHOICES["hpa"], prefix_hit_rate=35.0)


@pytest.mark.slow
def test_a_plans_prefix_hit_rate_reaches_its_choice(small_plan_built):
    plan, _ = small_plan_built
    record = dataclasses.replace(
        capnb.plan.answer(plan), prefix_cache_share=0.3, prefix_hit_rate=0.2
    )
    assert capnb.plan.policy_choice(record).prefix_hit_rate == 0.2
    assert capnb.plan.policy_choice(plan).prefix_hit_rate == 0.0


def test_kedas_default_counter_is_said_to_count_finished_requests():
    # the query's default counter, vllm:request_success_total, counts requests that finished
    # successfully, yet the objects and docs called its rate the arrival rate: under overload
    # (aborted, timed-out requests) it reads below the arrivals, nothing said
    out = manifests(CHOICES["hpa"])
    said = [n for n in out.notes["keda"] if "vllm:request_success_total" in n]
    assert said and "finished" in said[0] and "arrivals_counter" in said[0], out.notes["keda"]
    own = manifests(CHOICES["hpa"], arrivals_counter="gateway_requests_received_total")
    assert (
        "gateway_requests_received_total"
        in own.documents["keda"][0]["spec"]["triggers"][0]["metadata"]["query"]
    )
    assert not any("finished" in n for n in own.notes["keda"])


def test_the_knative_services_model_argument_is_said_to_be_capnbs_name():
    # knative.yaml's container ran "--model Qwen3-8B" (capnb's catalog id; the Hugging Face id is
    # Qwen/Qwen3-8B) or "--model My Org_Model.v2" (a config folder's name), a model vLLM cannot
    # load, without a word: the pods of an applied Service would fail to start
    out = manifests(dataclasses.replace(CHOICES["knative"], model="Qwen3-8B"))
    args = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["--model", "Qwen3-8B"]
    said = [n for n in out.notes["knative"] if "--model" in n]
    assert said and "'Qwen3-8B'" in said[0] and "Hugging Face id" in said[0], out.notes["knative"]
    assert out.exact["knative"]


def test_load_of_a_plan_json_says_it_is_the_answer_record(tmp_path):
    # capnb.plan.load('.../plan.json') said "not a plan file capnb wrote (not NetCDF: file
    # signature not found)" of the very file capnb plan wrote beside plan.nc
    from capnb import plan
    from capnb.errors import InputError

    path = tmp_path / "plan.json"
    path.write_text('{"answer": {}}\n')
    with pytest.raises(InputError, match=r"plan.json holds the plan's answer record.*plan\.nc"):
        plan.load(path)


def test_the_knative_serve_args_cap_max_model_len_where_the_kv_cache_holds_less_than_the_context():
    # Llama-3.1-8B on one L4: 14,352 tokens of KV cache against a 131,072-token context. The
    # plan's benchmark command passed --max-model-len 14352, but knative.yaml's container ran
    # '--model Llama-3.1-8B --tensor-parallel-size 1', which vLLM refuses to start (its default
    # max_model_len is the context, and the cache must hold one request that long); the HPA and
    # KEDA objects said nothing of it for the Deployment they scale
    choice = dataclasses.replace(CHOICES["knative"], model="Llama-3.1-8B", gpu="L4",
                                 max_model_len=14_352)  # fmt: skip
    out = manifests(choice)
    (service,) = parsed(out, "knative")
    args = service["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--model", "Llama-3.1-8B", "--tensor-parallel-size", "1",
                    "--max-model-len", "14352"]  # fmt: skip
    for kind in KINDS:
        (doc,) = [d for d in parsed(out, kind) if d["kind"] != "ConfigMap"]
        assert doc["metadata"]["annotations"]["capnb.io/max-model-len"] == "14352"
        assert schema_errors(doc) == []
        assert any("--max-model-len 14352" in n for n in out.notes[kind]), out.notes[kind]
    assert out.exact["knative"]
    # a model whose context the cache holds keeps vLLM's default: no flag, no annotation
    plain = manifests(CHOICES["knative"])
    assert "--max-model-len" not in plain.documents["knative"][0]["spec"]["template"]["spec"][
        "containers"][0]["args"]  # fmt: skip
    assert "capnb.io/max-model-len" not in plain.documents["hpa"][0]["metadata"]["annotations"]
    with pytest.raises(InputError, match=r"max_model_len must be a whole number >= 0, got -1"):
        dataclasses.replace(choice, max_model_len=-1)


def test_the_knative_serve_args_raise_max_num_seqs_where_the_plan_runs_more_than_vllms_default():
    # Llama-3.1-8B on one A100-80GB at P99 TTFT <= 10 s, TPOT <= 250 ms: the plan's safe
    # concurrency is 296 requests in flight (the engine simulated with room for them), but
    # knative.yaml ran vLLM at its default --max-num-seqs, 256 on an A100: 40 of them waited
    choice = dataclasses.replace(CHOICES["knative"], gpu="A100-80GB", max_num_seqs=296)
    out = manifests(choice)
    (service,) = parsed(out, "knative")
    args = service["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-2:] == ["--max-num-seqs", "296"]
    assert schema_errors(service) == []
    for kind in KINDS:
        assert parsed(out, kind)[0]["metadata"]["annotations"]["capnb.io/max-num-seqs"] == "296"
        assert any("--max-num-seqs 296" in n for n in out.notes[kind]), out.notes[kind]
    plain = manifests(CHOICES["knative"])
    assert (
        "--max-num-seqs"
        not in plain.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    with pytest.raises(InputError, match=r"max_num_seqs must be a whole number >= 0, got -1"):
        dataclasses.replace(choice, max_num_seqs=-1)


def test_policy_choice_reads_the_answers_max_model_len(small_plan_built):
    _, path = small_plan_built
    built = json.loads((path.parent / "plan.json").read_text())
    assert capnb.plan.policy_choice(built).max_model_len == 0  # H100: the context fits
    assert capnb.plan.policy_choice(built).cold_start_s == built["answer"]["policy"]["cold_start_s"]
    # vLLM's default --max-num-seqs: 1024 on an H100, 256 on an A100
    assert capnb.plan.policy_choice(built).max_num_seqs == 0
    built["answer"]["safe_concurrency"] = 1500
    assert capnb.plan.policy_choice(built).max_num_seqs == 1500
    built["answer"] |= {"safe_concurrency": 296, "gpu": "A100-80GB"}
    assert capnb.plan.policy_choice(built).max_num_seqs == 296
    built["answer"]["max_model_len"] = 14_352
    assert capnb.plan.policy_choice(built).max_model_len == 14_352
    del built["answer"]["max_model_len"]  # a plan.json of an earlier release
    assert capnb.plan.policy_choice(built).max_model_len == 0


@pytest.mark.slow
@pytest.mark.parametrize("latency", ["engine", "model"])
def test_a_plan_on_a_gpu_whose_kv_cache_holds_less_than_the_context_exports_a_startable_server(
    latency,
):
    # Llama-3.1-8B on one L4 (serving-engine model: 43,344 tokens of KV cache, profiled at vllm
    # serve's 256 sequences and 2,048 tokens there; a 131,072-token context): the plan's benchmark
    # command said --max-model-len, knative.yaml did not; on the analytic model (no
    # running_tokens) neither did, though vLLM's own accounting decides whether it starts
    import warnings

    config = capnb.plan.read_config(dict(
        trace="servegen-m-small", trials=200, gpus=("L4",), tensor_parallel=(1,),
        latency=latency, sla="ttft=3,tpot=80ms", disaggregation="none", demand_scale=0.05,
        policies=("knative",), scale_up_threshold=(0.7,), cooldown_s=(900.0,),
        buffer_instances=(0,), backtest_days=0, provider="none",
    ))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", capnb.plan.PlanWarning)
        plan = capnb.plan.build(config)
    record = capnb.plan.answer(plan)
    assert record.max_model_len == 43_344
    # the benchmark commands carry it: printed where the latency model's error is over its limit
    # (the analytic model's), else what capnb would print (the engine's L4 error is within it)
    from capnb.plan._closecall import benchmark_commands

    commands = record.settle_commands or benchmark_commands(
        plan.rename({"capacity_safe_concurrency": "safe_concurrency"}),
        "L4",
        1,
        "Llama-3.1-8B",
        1000.0,
        200.0,
    )
    assert "--max-model-len 43344" in commands
    assert "--max-model-len 43344 (its KV cache" in capnb.plan.describe(plan)
    out = manifests(capnb.plan.policy_choice(plan))
    args = out.documents["knative"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-2:] == ["--max-model-len", "43344"]


def test_a_per_instance_rate_below_knatives_least_target_is_written_as_a_target_knative_takes():
    # a reasoning service: 4 requests of ~20,000 output tokens at once, 1,000 s each, is 0.004
    # requests/s an instance; Knative's webhook refuses autoscaling.knative.dev/target below 0.01
    # (TargetMin) and target-utilization-percentage outside [1, 100], so the Service written as
    # target '0.004' was refused while exact said it replayed as the chosen run
    rate = np.r_[np.full(3600, 0.01), np.full(3600, 0.05), np.full(7200, 0.01)]
    for qps, up in ((0.004, 0.7), (0.0036422204847154065, 0.6), (0.009999, 0.8)):
        choice = PolicyChoice("knative", per_instance_qps=qps, scale_up_threshold=up,
                              cooldown_s=300.0, min_instances=1, max_instances=40)  # fmt: skip
        out = manifests(choice)
        notes = parsed(out, "knative")[0]["spec"]["template"]["metadata"]["annotations"]
        target = float(notes["autoscaling.knative.dev/target"])
        percent = float(notes["autoscaling.knative.dev/target-utilization-percentage"])
        assert target >= 0.01 and 1 <= percent <= 100, (qps, notes)
        assert target * percent / 100 == pytest.approx(qps * up, rel=1e-12)  # the per-pod target
        replay = manifest_settings(parsed(out, "knative"))
        assert replay == choice.settings() and out.exact["knative"], (replay, out.notes["knative"])
        assert any(
            "least target Knative takes (0.01 requests/s)" in n for n in out.notes["knative"]
        )
        ran = capnb.elasticity.simulate(rate, step_s=1, cold_start_s=30, **replay)
        chosen = capnb.elasticity.simulate(rate, step_s=1, cold_start_s=30, **choice.settings())
        assert int(chosen.scale_events) > 0 and same_run(chosen, ran)
    ordinary = manifests(CHOICES["knative"])  # at or above 0.01: target is the rate, no note
    notes = ordinary.documents["knative"][0]["spec"]["template"]["metadata"]["annotations"]
    assert notes["autoscaling.knative.dev/target"] == "8.798333690623629"
    assert not any("least target" in n for n in ordinary.notes["knative"])


def test_a_knative_utilisation_of_many_decimals_replays_as_chosen_or_says_why_not():
    # a target of 0.61803398874989 was written as target-utilization-percentage '61.803398875'
    # (9 decimals), read back as 0.61803398875: exact was false ("a different run (see its
    # notes)") with no note saying why; its full decimal reads back exactly, and a value whose
    # percentage no decimal reads back as (1/3: 33.33333333333333 / 100 is not 1/3) is noted
    for up in (1 / 3, 0.61803398874989, 0.70000000001234, 2 / 3):
        choice = PolicyChoice("knative", per_instance_qps=10.0, scale_up_threshold=up,
                              cooldown_s=300.0, min_instances=1, max_instances=40)  # fmt: skip
        out = manifests(choice)
        read = manifest_settings(parsed(out, "knative"))["scale_up_threshold"]
        said = [n for n in out.notes["knative"] if "target-utilization-percentage" in n]
        assert out.exact["knative"] == (read == up) and (read == up) != bool(said), (up, read)
    assert manifests(PolicyChoice("knative", 10.0, 0.61803398874989, 300.0, 1, 40)).exact["knative"]
    third = manifests(PolicyChoice("knative", 10.0, 1 / 3, 300.0, 1, 40)).notes["knative"]
    assert any("read back as 0.33333333333 (a different run)" in n for n in third)


def test_kedas_query_counts_this_deployments_pods_and_its_spares_only():
    # pod=~"llama-3-1-8b-.*" also counted the pods of a Deployment "llama-3-1-8b-instruct" in the
    # same namespace; PromQL's regex is anchored: a Deployment's pod is <name>-<hash>-<5 chars>
    import re

    out = manifests(CHOICES["hpa"], name="llama-3-1-8b")
    query = parsed(out, "keda")[0]["spec"]["triggers"][0]["metadata"]["query"]
    pods = re.search(r'pod=~"([^"]+)"', query).group(1)
    matches = re.compile(pods).fullmatch
    assert matches("llama-3-1-8b-7d9f8c6b5-x2k4q")
    assert matches("llama-3-1-8b-spares-7d9f8c6b5-x2k4q")  # the warm spares' own Deployment
    assert not matches("llama-3-1-8b-instruct-7d9f8c6b5-x2k4q")
    assert not matches("llama-3-1-8b-instruct-spares-7d9f8c6b5-x2k4q")


def test_the_hpa_says_its_per_pod_metric_needs_an_adapter():
    # without a custom metrics adapter serving capnb_instance_load the HPA never moves; a fixed
    # fleet (min = max) needs none
    out = manifests(CHOICES["hpa"])
    assert any("FailedGetPodsMetric" in n for n in out.notes["hpa"])
    assert not any("FailedGetPodsMetric" in n for n in out.notes["keda"])
    assert not any("FailedGetPodsMetric" in n for n in manifests(CHOICES["fixed"]).notes["hpa"])


def test_knative_says_a_new_revision_starts_at_the_floor():
    # initial-scale is the floor: a rollout under load hands every request to that many pods
    out = manifests(CHOICES["hpa"])
    (note,) = [n for n in out.notes["knative"] if n.startswith("initial-scale is the floor")]
    floor = parsed(out, "knative")[0]["spec"]["template"]["metadata"]["annotations"][
        "autoscaling.knative.dev/initial-scale"
    ]
    assert f"({floor})" in note
    assert not any("initial-scale is" in n for n in manifests(CHOICES["fixed"]).notes["knative"])


def test_knative_says_its_request_timeout_cuts_long_answers():
    # Knative ends a request at the revision's timeoutSeconds (300 s by default); an LLM's long
    # streamed answer (2,048 tokens at 60 ms: 123 s; a 32k-token one: 33 min) can outlast it,
    # and the exported Service set none without saying so
    for policy in ("hpa", "fixed"):
        out = manifests(CHOICES[policy])
        spec = parsed(out, "knative")[0]["spec"]["template"]["spec"]
        assert "timeoutSeconds" not in spec
        (note,) = [n for n in out.notes["knative"] if "timeoutSeconds" in n]
        assert "300 s by default" in note and "max-revision-timeout-seconds" in note
        assert not any("timeoutSeconds" in n for n in out.notes["hpa"])


def _pod_of(deployment: str) -> str:
    """A pod's name as Kubernetes makes it: ``<deployment>-<hash>-`` cut to 58 characters, then 5.

    The ReplicaSet is ``<deployment>-<pod-template-hash>`` (up to 10 characters); its pods'
    ``generateName`` is that plus ``-``, cut to 63 - 5 characters before the random suffix.
    """
    return f"{deployment}-7d9f8c6b5d-"[:58] + "x2k4q"


def test_kedas_query_matches_the_pods_of_a_long_deployment_name():
    # a model folder named at length gave a 63-character name: Kubernetes cuts its pods' names
    # to 58 characters before the 5 random ones, so the pod-template hash (and for the spares
    # '<name>-spares', 70 characters, part of the name) was cut off, the query's regex matched
    # no pod, KEDA read 0 requests/s and never scaled
    import dataclasses
    import re

    for spares in (0, 2):
        choice = dataclasses.replace(CHOICES["hpa"], model="x" * 70, buffer_instances=spares)
        out = manifests(choice)
        name = out.documents["keda"][0]["metadata"]["name"]
        query = out.documents["keda"][0]["spec"]["triggers"][0]["metadata"]["query"]
        matches = re.compile(re.search(r'pod=~"([^"]+)"', query).group(1)).fullmatch
        assert matches(_pod_of(name)), (spares, name)
        if spares:
            assert matches(_pod_of(f"{name}-spares")), name
        for docs in out.documents.values():
            assert docs[0]["metadata"]["name"] == name
    with pytest.raises(InputError, match=r"name='a{47}' is longer than 46 characters.*pods"):
        manifests(CHOICES["hpa"], name="a" * 47)
    spared = dataclasses.replace(CHOICES["hpa"], buffer_instances=1)
    with pytest.raises(InputError, match=r"name='a{40}' is longer than 39 characters.*-spares"):
        manifests(spared, name="a" * 40)
    assert manifests(spared, name="a" * 39).documents["hpa"][0]["metadata"]["name"] == "a" * 39

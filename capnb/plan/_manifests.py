"""The chosen autoscaling policy as cluster objects: Kubernetes HPA v2, Knative KPA and KEDA.

The elasticity step replays every policy over the trace and chooses one; an operator then writes
the same settings by hand. :func:`manifests` writes them: a ``HorizontalPodAutoscaler``
(``autoscaling/v2``), a Knative ``Service`` with the KPA's annotations, and a KEDA ``ScaledObject``,
each from one :class:`PolicyChoice` (the policy, its settings and the pool's bounds).
:func:`manifest_settings` reads such objects back into :func:`capnb.elasticity.simulate`'s
arguments, so an exported object can be replayed: for the policy the object implements (the HPA and
KEDA objects as capnb's HPA, the Knative Service as its KPA) the replay of the exported values is the
replay of the chosen values, step for step, wherever :attr:`Manifests.exact` says so.

What maps to what (``up`` is the target utilisation, ``qps`` the per-instance requests/s):

- the HPA and KEDA scale on the load per pod, arrival requests/s over ``qps``, with the target
  ``up`` (``800m`` for 0.8): the simulator's ratio ``(rate / ready) / (up x qps)``, with ``up``
  written exactly (Kubernetes reads a target to a thousandth; a finer one is rounded up, and
  noted). ``cooldown_s`` is ``behavior.scaleDown.stabilizationWindowSeconds``; the rate policies
  and the scale-up window are ``behavior``'s; the sync period and the tolerance are the
  controller's flags (``--horizontal-pod-autoscaler-sync-period``, ``-tolerance``), carried as
  annotations;
- Knative: ``metric: rps``, ``target: qps``, ``target-utilization-percentage: 100 x up``,
  ``window``, ``panic-window-percentage``, ``panic-threshold-percentage``, ``scale-down-delay``,
  ``min-scale``/``max-scale``/``initial-scale``; the scale rates are the cluster's
  ``config-autoscaler`` (a ConfigMap, written only when they differ from Knative's defaults) and
  the 2 s tick is fixed in Knative;
- warm spares (``buffer_instances``) are pods outside the autoscaler: a second Deployment of the
  same pods (``<name>-spares``) for the HPA and KEDA, whose query reads the whole service's
  arrivals. Knative holds no pod outside its autoscaler: its spares are folded into
  ``min-scale`` (a different run, noted).

A policy with no Kubernetes form (the article's rule, the predictive policy, a fixed fleet) is
exported as the HPA/KPA that holds its target, floor and scale-down window, and noted: its replay
is a different run, which the caller can simulate from :attr:`Manifests.replays`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
from collections.abc import Mapping
from pathlib import Path

from .. import words
from ..errors import InputError
from ..records import ENGINES
from ._servers import GPU_RESOURCES, server_of

__all__ = [
    "KINDS",
    "Manifests",
    "PolicyChoice",
    "manifest_settings",
    "manifests",
    "policy_choice",
]

#: The objects :func:`manifests` writes, by key.
KINDS = ("hpa", "knative", "keda")
_CAPNB = "capnb.io/"
_KNATIVE = "autoscaling.knative.dev/"
#: Knative's cluster-wide defaults (config-autoscaler) and its fixed tick (multiscaler.go).
_KNATIVE_CLUSTER = {"max_scale_up_rate": 1000.0, "max_scale_down_rate": 2.0}
_KNATIVE_TICK_S = 2.0
#: Kubernetes' limits on behavior fields (HPAScalingRules, HPAScalingPolicy).
_MOST_WINDOW_S = 3600
_MOST_PERIOD_S = 1800
#: Knative's and a Deployment's default progress deadline (s): pods not ready by then fail the rollout.
_PROGRESS_DEADLINE_S = 600
#: Knative's limits: window and scale-down delay (6 s to 1 h), panic percentages.
_KNATIVE_WINDOW_S = (6, 3600)
_PANIC_WINDOW_PERCENT = (1.0, 100.0)
_PANIC_THRESHOLD_PERCENT = (110.0, 1000.0)
#: Knative's least per-pod target (autoscaling.knative.dev/target; ``TargetMin`` in its
#: annotation validation): a Service with a lower target is refused by its webhook.
_KNATIVE_TARGET_MIN = 0.01


def _number(value, name: str, *, low: float = 0.0, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InputError(f"{name} must be a finite number, got {value!r}")
    if value < low or (open_low and value == low):
        raise InputError(f"{name} must be {'>' if open_low else '>='} {low:g}, got {value!r}")
    return float(value)


def _count(value, name: str, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise InputError(f"{name} must be a whole number >= {low}, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class PolicyChoice:
    """The autoscaling policy a plan chose, as the replay ran it: the input of :func:`manifests`.

    ``policy`` is one of :data:`capnb.elasticity.POLICIES`; ``scale_up_threshold`` its target
    utilisation (1); ``cooldown_s`` its scale-down window (s); ``min_instances`` and
    ``max_instances`` the pool's bounds, ``buffer_instances`` warm spares above it (instances);
    ``per_instance_qps`` what one instance serves under the SLA (requests/s); ``options`` the
    policy's options (:data:`capnb.elasticity.OPTIONS`; those not given take its defaults);
    ``model``, ``gpu``, ``tensor_parallel`` what one instance runs; ``prefix_hit_rate`` the
    share of prompt tokens a prefix cache served when ``per_instance_qps`` was priced (1; replayed
    as one cache seeing the whole log, 0: no prefix cache); ``max_model_len`` the longest request
    one instance's KV cache holds where shorter than the model's context (tokens; vLLM's
    ``--max-model-len``, without which it refuses to start; 0: the context fits); ``cold_start_s``
    the time from a scale-up until the instance serves (s; 0: not known), for the rollout's
    progress deadline; ``max_num_seqs`` the requests one instance runs at once where the plan's
    safe concurrency is above the engine's default on the GPU (vLLM's ``--max-num-seqs``; 0: the
    default holds it); ``cold_start_vetoes`` whether the cold start vetoed the article policy's
    scale-ups in the replay (no cluster autoscaler has that veto: the objects' notes say so);
    ``engine`` the serving engine the pods run (:data:`capnb.plan.SERVERS`' ids: its image,
    flags and request counter) and ``max_num_batched_tokens`` the tokens it computes a step at
    most where the plan set it (0: the engine's default).
    """

    policy: str
    per_instance_qps: float
    scale_up_threshold: float
    cooldown_s: float
    min_instances: int
    max_instances: int
    buffer_instances: int = 0
    options: Mapping[str, object] = dataclasses.field(default_factory=dict)
    model: str = "model"
    gpu: str = ""
    tensor_parallel: int = 1
    prefix_hit_rate: float = 0.0
    max_model_len: int = 0
    cold_start_s: float = 0.0
    max_num_seqs: int = 0
    cold_start_vetoes: bool = False
    engine: str = "vllm-v1"
    max_num_batched_tokens: int = 0

    def __post_init__(self):
        from ..elasticity import OPTIONS, POLICIES

        if self.policy not in POLICIES:
            raise InputError(f"policy={self.policy!r} is not known; use one of {list(POLICIES)}")
        if self.engine not in ENGINES:
            raise InputError(f"engine={self.engine!r} is not known; use one of {list(ENGINES)}")
        _number(self.per_instance_qps, "per_instance_qps", open_low=True)
        up = _number(self.scale_up_threshold, "scale_up_threshold", open_low=True)
        if up > 1:
            raise InputError(f"scale_up_threshold must be in (0, 1], got {up!r}")
        _number(self.cooldown_s, "cooldown_s")
        low = _count(self.min_instances, "min_instances", low=1)
        if _count(self.max_instances, "max_instances", low=1) < low:
            raise InputError(
                f"max_instances={self.max_instances} is below min_instances={self.min_instances}"
            )
        _count(self.buffer_instances, "buffer_instances")
        _count(self.tensor_parallel, "tensor_parallel", low=1)
        _count(self.max_model_len, "max_model_len")
        _number(self.cold_start_s, "cold_start_s")
        _count(self.max_num_seqs, "max_num_seqs")
        _count(self.max_num_batched_tokens, "max_num_batched_tokens")
        if _number(self.prefix_hit_rate, "prefix_hit_rate") > 1:
            raise InputError(
                f"prefix_hit_rate must be in [0, 1] (a share of prompt tokens), got "
                f"{self.prefix_hit_rate!r}"
            )
        unknown = set(self.options) - set(OPTIONS[self.policy])
        if unknown:
            raise InputError(
                f"options {sorted(unknown)} are not {self.policy!r}'s; its options: "
                f"{sorted(OPTIONS[self.policy])}"
            )
        full = {**OPTIONS[self.policy], **self.options}
        for option in ("scale_up_pods", "scale_down_pods"):
            if full.get(option) is not None and full[option] == 0:
                raise InputError(
                    f"options {option}=0: a Kubernetes HPA policy's value must be greater than "
                    "zero (the API server refuses 0); give 1 or more pods, or None for no Pods rule"
                )
        for direction in ("up", "down"):
            pods, percent = f"scale_{direction}_pods", f"scale_{direction}_percent"
            if self.policy == "hpa" and full[pods] is None and full[percent] is None:
                raise InputError(
                    f"options {pods} and {percent} are both None: a Kubernetes HPA needs at least "
                    f"one scale-{direction} policy (the API server refuses an empty list); give "
                    "one of them"
                )
        object.__setattr__(self, "options", full)

    def settings(self) -> dict[str, object]:
        """The policy's arguments of :func:`capnb.elasticity.simulate`.

        Add the demand, ``step_s``, ``cold_start_s`` and ``tolerance_s`` of the replay.
        ``gpus_per_instance`` is ``tensor_parallel``: a run's ``gpu_hours`` count every GPU.
        """
        return {
            "policy": self.policy,
            "gpus_per_instance": int(self.tensor_parallel),
            "per_instance_qps": float(self.per_instance_qps),
            "scale_up_threshold": float(self.scale_up_threshold),
            "cooldown_s": float(self.cooldown_s),
            "min_instances": int(self.min_instances),
            "max_instances": int(self.max_instances),
            "buffer_instances": int(self.buffer_instances),
            **dict(self.options),
        }


# -- numbers as the objects write them -----------------------------------------------------------
def _decimal(value: float) -> str:
    """The shortest decimal that reads back as ``value`` (``repr``), without a trailing ``.0``."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _milli(value: float) -> tuple[str, float]:
    """A Kubernetes quantity of ``value`` and what it reads back as.

    The controller reads a target to a thousandth (``MilliValue``, rounded up).
    """
    millis = math.ceil(round(value * 1000, 6))
    return f"{millis}m", millis / 1000


def _seconds(value: float, name: str, low: int, high: int, notes: list[str]) -> int:
    """Whole seconds within ``[low, high]``; a value that is not is clamped and noted."""
    whole = min(max(round(value), low), high)
    if whole != value:
        notes.append(f"{name}={value:g} s is written as {whole} s (whole seconds, {low}-{high})")
    return whole


def _percent(value: float, name: str, notes: list[str]) -> int:
    whole = max(1, round(value))
    if whole != value:
        notes.append(f"{name}={value:g} % is written as {whole} % (a whole percentage)")
    return whole


# -- the HPA (and KEDA's HPA) ----------------------------------------------------------------------
def _hpa_values(choice: PolicyChoice, notes: list[str]) -> dict[str, object]:
    """The HPA settings that hold ``choice``.

    Its own for ``"hpa"``; for the other policies, their target, floor and scale-down window with
    HPA's defaults for the rest.
    """
    from ..elasticity import OPTIONS

    values = choice.settings()
    if choice.policy != "hpa":
        values = {k: v for k, v in values.items() if k not in OPTIONS[choice.policy]}
        values |= {**OPTIONS["hpa"], "policy": "hpa"}
        if choice.policy == "fixed":
            values["max_instances"] = values["min_instances"]
            notes.append(
                f"a fixed fleet of {choice.min_instances}: minReplicas = maxReplicas (the HPA "
                "never moves it)"
            )
        else:
            notes.append(
                f"the {choice.policy!r} policy has no Kubernetes form: this HPA holds its target "
                f"utilisation ({choice.scale_up_threshold:g}), floor ({choice.min_instances}) and "
                f"scale-down window ({choice.cooldown_s:g} s) with HPA's own rules; its replay is "
                "a different run (Manifests.replays['hpa'])"
            )
            _vetoed_note(choice, notes)
    return values


def _vetoed_note(choice: PolicyChoice, notes: list[str]) -> None:
    """Say that the object scales up where the plan's replay, its scale-ups vetoed, did not."""
    if choice.policy == "article" and choice.cold_start_vetoes:
        notes.append(
            f"in the plan's replay the {choice.cold_start_s:g} s cold start vetoed every scale-up "
            "of the article policy (the plan's cost counts none); this "
            f"object scales up to {words.count(choice.max_instances, 'instance')} as load needs, "
            "at a cost "
            "above the plan's"
        )


def _rules(values: dict, direction: str, window_s: float, notes: list[str]) -> dict:
    policies = []
    period = _seconds(
        values[f"scale_{direction}_period_s"], f"scale_{direction}_period_s", 1, _MOST_PERIOD_S,
        notes,
    )  # fmt: skip
    if values[f"scale_{direction}_pods"] is not None:
        pods = int(values[f"scale_{direction}_pods"])
        policies.append({"type": "Pods", "value": pods, "periodSeconds": period})
    if values[f"scale_{direction}_percent"] is not None:
        percent = _percent(
            values[f"scale_{direction}_percent"], f"scale_{direction}_percent", notes
        )
        policies.append({"type": "Percent", "value": percent, "periodSeconds": period})
    name = "cooldown_s" if direction == "down" else "scale_up_stabilization_s"
    return {
        "stabilizationWindowSeconds": _seconds(window_s, name, 0, _MOST_WINDOW_S, notes),
        "selectPolicy": "Max",
        "policies": policies,
    }


def _behavior(values: dict, notes: list[str]) -> dict:
    return {
        "scaleUp": _rules(values, "up", values["scale_up_stabilization_s"], notes),
        "scaleDown": _rules(values, "down", values["cooldown_s"], notes),
    }


def _metadata(name: str, namespace: str, annotations: dict) -> dict:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "capnb"},
        "annotations": annotations,
    }


def _annotations(choice: PolicyChoice, values: dict, extra: Mapping[str, object]) -> dict:
    """What the object cannot say in its own fields, for the reader and for the replay."""
    notes = {
        "chosen-policy": choice.policy,
        "model": choice.model,
        "gpu": choice.gpu,
        "tensor-parallel": choice.tensor_parallel,
        "per-instance-qps": _decimal(values["per_instance_qps"]),
        "warm-spares": values["buffer_instances"],
        **extra,
    }
    if choice.prefix_hit_rate:
        notes["prefix-hit-rate"] = _decimal(choice.prefix_hit_rate)
    if choice.max_model_len:
        notes["max-model-len"] = choice.max_model_len
    if choice.max_num_seqs:
        notes["max-num-seqs"] = choice.max_num_seqs
    return {_CAPNB + k: str(v) for k, v in notes.items()}


def _target(values: dict, notes: list[str]) -> str:
    quantity, read = _milli(values["scale_up_threshold"])
    if read != values["scale_up_threshold"]:
        notes.append(
            f"target load {values['scale_up_threshold']:g} is read by Kubernetes as {read:g} (a "
            "thousandth)"
        )
    return quantity


def _hpa_metric(metric: str, spares: int) -> str:
    """What the HPA's per-pod metric must read for the replay's ratio ``(rate / ready) / up x qps``.

    Warm spares behind the same Service take their share of the arrivals, so with spares the
    metric is the Service's arrivals over the autoscaled pods (:func:`_spares_metric_note`).
    """
    if not spares:
        return f"{metric}: arrival requests/s per pod / per-instance-qps"
    return (
        f"{metric}: the Service's arrival requests/s (the pods of the "
        f"{words.count(spares, 'warm spare')} included) over this Deployment's pods / "
        "per-instance-qps"
    )


def _spares_metric_note(metric: str, spares: int, floor: int) -> str:
    """Why the HPA's metric counts the spares' arrivals: each pod's own reads less than the load."""
    return (
        f"{metric} reads the Service's arrivals over this Deployment's pods, as the replay does: "
        f"with the spares taking their share, each pod's own arrival rate averages "
        f"{floor / (floor + spares):.0%} of the load at the floor of {floor} (pods / (pods + "
        f"{spares})), and an HPA on it scales up later than the replay"
    )


def _hpa(choice, values, name, namespace, metric, notes) -> dict:
    said = _hpa_metric(metric, values["buffer_instances"])
    controller = {"sync-period-s": _decimal(values["sync_s"]),
                  "tolerance": _decimal(values["hpa_tolerance"]), "metric": said}  # fmt: skip
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(name, namespace, _annotations(choice, values, controller)),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": values["min_instances"],
            "maxReplicas": values["max_instances"],
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": metric},
                        "target": {"type": "AverageValue", "averageValue": _target(values, notes)},
                    },
                }
            ],
            "behavior": _behavior(values, notes),
        },
    }


#: The shortest range KEDA's Prometheus query takes a rate over (s): Prometheus needs two scrapes
#: in the range, and recommends four (a 15 s scrape interval; kube-prometheus scrapes every 30 s).
#: A range of the 15 s sync period returned no data at those intervals, and KEDA then never scaled.
_PROMETHEUS_RANGE_S = 60.0


#: The pods of Deployment ``name`` (and of its warm spares' ``name-spares``), as PromQL's anchored
#: regex: a Deployment's pod is ``<name>-<pod-template-hash>-<5 characters>``. ``<name>-.*``
#: also counted the pods of every Deployment whose name starts with it (``llama-3-1-8b-instruct``
#: beside ``llama-3-1-8b``).
_PODS = "{name}(-spares)?-[a-z0-9]+-[a-z0-9]{{5}}"


def _query(counter: str, name: str, namespace: str, values: dict) -> str:
    window = _decimal(max(values["sync_s"], _PROMETHEUS_RANGE_S))
    pods = _PODS.format(name=name)
    return (
        f'sum(rate({counter}{{namespace="{namespace}",pod=~"{pods}"}}[{window}s])) / '
        f"{_decimal(values['per_instance_qps'])}"
    )


def _keda(choice, values, name, namespace, counter, prometheus, notes) -> dict:
    controller = {"sync-period-s": _decimal(values["sync_s"]),
                  "tolerance": _decimal(values["hpa_tolerance"])}  # fmt: skip
    threshold = _target(values, [])  # noted once, with the HPA's
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _metadata(name, namespace, _annotations(choice, values, controller)),
        "spec": {
            "scaleTargetRef": {"name": name},
            "pollingInterval": max(1, round(values["sync_s"])),
            "minReplicaCount": values["min_instances"],
            "maxReplicaCount": values["max_instances"],
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behavior(values, [])}},
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": prometheus,
                        "query": _query(counter, name, namespace, values),
                        "threshold": _decimal(int(threshold[:-1]) / 1000),
                    },
                }
            ],
        },
    }


# -- Knative --------------------------------------------------------------------------------------
def _knative_values(choice: PolicyChoice, notes: list[str]) -> dict[str, object]:
    from ..elasticity import OPTIONS

    values = choice.settings()
    if choice.policy != "knative":
        values = {k: v for k, v in values.items() if k not in OPTIONS[choice.policy]}
        values |= {**OPTIONS["knative"], "policy": "knative"}
        if choice.policy == "fixed":
            values["max_instances"] = values["min_instances"]
        else:
            notes.append(
                f"the {choice.policy!r} policy has no Knative form: this KPA holds its target, "
                "floor and scale-down window with the KPA's own rules (a different run)"
            )
            _vetoed_note(choice, notes)
    if values["buffer_instances"]:
        spares = values["buffer_instances"]
        held = f"the {words.count(spares, 'warm spare')} {'is' if spares == 1 else 'are'}"
        if choice.policy == "fixed":  # pinned: the fleet of min + spares never moves, as chosen
            notes.append(
                f"Knative holds no pod outside its autoscaler: {held} "
                f"folded into min-scale and max-scale ({values['min_instances']} + {spares}), a "
                "fixed fleet of that size (the chosen run)"
            )
        else:
            notes.append(
                f"Knative holds no pod outside its autoscaler: {held} "
                f"folded into min-scale ({values['min_instances']} + {spares}), which the KPA "
                "counts (a different run from spares held above the pool)"
            )
        values["min_instances"] += spares
        values["max_instances"] += spares
        values["buffer_instances"] = 0
    if values["tick_s"] != _KNATIVE_TICK_S:
        notes.append(
            f"tick_s={values['tick_s']:g} s: Knative's tick is fixed at {_KNATIVE_TICK_S:g} s"
        )
        values["tick_s"] = _KNATIVE_TICK_S
    return values


def _knative_annotations(values: dict, notes: list[str]) -> dict[str, str]:
    stable = _seconds(values["stable_window_s"], "stable_window_s", *_KNATIVE_WINDOW_S, notes)
    panic_pct = min(max(100.0 * values["panic_window_s"] / stable, _PANIC_WINDOW_PERCENT[0]),
                    _PANIC_WINDOW_PERCENT[1])  # fmt: skip
    if panic_pct != 100.0 * values["panic_window_s"] / stable:
        notes.append(
            f"panic_window_s={values['panic_window_s']:g} s is written as {panic_pct:g} % of the "
            f"{stable} s window ({stable * panic_pct / 100:g} s): Knative takes "
            f"{_PANIC_WINDOW_PERCENT[0]:g}-{_PANIC_WINDOW_PERCENT[1]:g} %"
        )
    threshold = min(max(100.0 * values["panic_threshold"], _PANIC_THRESHOLD_PERCENT[0]),
                    _PANIC_THRESHOLD_PERCENT[1])  # fmt: skip
    if threshold != 100.0 * values["panic_threshold"]:
        notes.append(f"panic_threshold={values['panic_threshold']:g} is written as {threshold:g} %")
    target, percent = _knative_target(values, notes)
    delay = _seconds(values["cooldown_s"], "cooldown_s", 0, _KNATIVE_WINDOW_S[1], notes)
    return {
        _KNATIVE + "class": "kpa.autoscaling.knative.dev",
        _KNATIVE + "metric": "rps",
        _KNATIVE + "target": target,
        _KNATIVE + "target-utilization-percentage": percent,
        _KNATIVE + "min-scale": str(values["min_instances"]),
        _KNATIVE + "max-scale": str(values["max_instances"]),
        _KNATIVE + "initial-scale": str(values["min_instances"]),
        _KNATIVE + "window": f"{stable}s",
        # in full: Knative's panic window is this share of the window, read back to the nanosecond
        _KNATIVE + "panic-window-percentage": _decimal(panic_pct),
        _KNATIVE + "panic-threshold-percentage": _decimal(round(threshold, 9)),
        _KNATIVE + "scale-down-delay": f"{delay}s",
    }


def _knative_target(values: dict, notes: list[str]) -> tuple[str, str]:
    """``(target, target-utilization-percentage)``: their product is the replay's per-pod target.

    The target is the per-instance requests/s, unless that is below the least Knative takes
    (0.01): then the target is 0.01 and the percentage carries the rest (noted), at least 1 %.
    """
    qps, up = values["per_instance_qps"], values["scale_up_threshold"]
    if qps >= _KNATIVE_TARGET_MIN:
        # the shortest decimal that reads back as the target (Knative takes the percentage as a
        # float), or, where none does, the 9-decimal one, noted
        texts = (_decimal(round(100.0 * up, 9)), _decimal(100.0 * up))
        exact = [text for text in texts if float(text) / 100 == up]
        if not exact:
            notes.append(
                f"scale_up_threshold={up!r} is written as target-utilization-percentage "
                f"{texts[0]}, read back as {float(texts[0]) / 100!r} (a different run)"
            )
        return _decimal(qps), (exact or texts)[0]
    percent = 100.0 * up * qps / _KNATIVE_TARGET_MIN
    said = (
        f"per-instance-qps {qps:.4g} requests/s is below the least target Knative takes "
        f"({_KNATIVE_TARGET_MIN:g} requests/s): target is {_KNATIVE_TARGET_MIN:g} and "
        f"target-utilization-percentage {percent:.4g} (the same {up * qps:.4g} requests/s a pod)"
    )
    if percent < 1.0:
        percent = 1.0
        said += (
            f", written as 1 % (the least Knative takes): a pod's target is "
            f"{0.01 * _KNATIVE_TARGET_MIN:g} requests/s, above the replay's (a different run)"
        )
    notes.append(said)
    return _decimal(_KNATIVE_TARGET_MIN), _decimal(percent)


def _container(choice: PolicyChoice) -> dict:
    """The serving container's command and arguments (its image's entrypoint kept where it serves)."""
    server = server_of(choice.engine)
    argv = server.argv(choice.model, choice.tensor_parallel, context=choice.max_model_len,
                       running=choice.max_num_seqs, step_tokens=choice.max_num_batched_tokens,
                       container=True)  # fmt: skip
    entry = len(server.entrypoint)
    return {"command": argv[:entry], "args": argv[entry:]} if entry else {"args": argv}


#: Where a serving flag of the plan goes: the exported Knative Service carries it, the HPA and KEDA
#: objects scale a Deployment the operator writes.
_IN_THE_PODS = "(the Knative container's args; add it to the Deployment the HPA and KEDA scale)"


def _seqs_note(choice: PolicyChoice) -> list[str]:
    """What the pods' engine needs when the plan runs more requests at once than its default."""
    if not choice.max_num_seqs:
        return []
    server = server_of(choice.engine)
    flag = server.running
    # a server that refuses what is above its limit (TGI's router) fails those requests
    short = (
        "the server refuses the requests above it (429), which fail"
        if server.refuses_over_running
        else "the requests above the default wait and per-instance-qps is not met"
    )
    return [
        f"the plan runs up to {choice.max_num_seqs} requests at once on one instance, more than "
        f"{ENGINES[choice.engine]}'s default {flag} on {choice.gpu}: its pods run with {flag} "
        f"{choice.max_num_seqs} {_IN_THE_PODS}, or {short}"
    ]


def _context_note(choice: PolicyChoice) -> list[str]:
    """What the pods' engine needs when one instance's KV cache holds less than the context."""
    if not choice.max_model_len:
        return []
    server = server_of(choice.engine)
    flag = f"{server.context} {choice.max_model_len}"
    if server.prompt:  # the longest prompt, whose default does not follow the context flag
        longest = server.longest_prompt(choice.max_model_len, choice.max_num_batched_tokens)
        flag += f" and {server.prompt} {longest}"
    why = (
        "vLLM refuses to start at its default max_model_len (the context)"
        if choice.engine.startswith("vllm")
        else f"{ENGINES[choice.engine]} is told the longest request its KV cache holds"
    )
    return [
        f"one instance's KV cache ({choice.tensor_parallel} x {choice.gpu}) holds "
        f"{choice.max_model_len:,} tokens, less than {choice.model}'s context: {why}, so its pods "
        f"run with {flag} {_IN_THE_PODS}, and longer requests are refused"
    ]


def _progress_deadline(choice: PolicyChoice) -> int:
    """Seconds a rollout waits for its pods: 0 (the default) unless the cold start nears it.

    A cold start over half the default 600 s is given twice its length (whole seconds).
    """
    if 2 * choice.cold_start_s <= _PROGRESS_DEADLINE_S:
        return 0
    return math.ceil(2 * choice.cold_start_s)


def _deadline_notes(choice: PolicyChoice) -> list[str]:
    """The HPA's and KEDA's note: their Deployment (the user's) needs the same deadline."""
    deadline = _progress_deadline(choice)
    if not deadline:
        return []
    return [
        f"one instance starts in {choice.cold_start_s:g} s, over half a Deployment's default "
        f"progress deadline ({_PROGRESS_DEADLINE_S} s): give the Deployment "
        f"progressDeadlineSeconds: {deadline} (twice the cold start), or its rollouts are "
        "reported failed while the pods still load the model"
    ]


def _pods(choice: PolicyChoice, image: str | None) -> tuple[str, str, list[str]]:
    """The pods' image and GPU resource for the choice's GPU maker, and what the notes say of them."""
    from ..data._catalog import gpu_maker

    server = server_of(choice.engine)
    maker = gpu_maker(choice.gpu) if choice.gpu else ""
    if maker == "AMD" and server.nvidia_only:
        raise InputError(
            f"engine={choice.engine!r}: {ENGINES[choice.engine]} runs on NVIDIA GPUs only, and "
            f"{choice.gpu} is an AMD GPU; plan it with vllm-v1, sglang or tgi"
        )
    resource = GPU_RESOURCES.get(maker, GPU_RESOURCES["NVIDIA"])
    where = "(the Knative container; give the Deployment the HPA and KEDA scale the same)"
    if maker != "AMD":
        if not choice.gpu or maker:
            return server.image if image is None else image, resource, []
        chosen = server.image if image is None else image
        return chosen, resource, [
            f"{choice.gpu} is not an NVIDIA or AMD GPU of the catalog: the pods ask for {resource} "
            f"and run {chosen} {where}; put your device plugin's resource and your image there"
        ]  # fmt: skip
    if image is None and not server.rocm_image:
        return server.image, resource, [
            f"{choice.gpu} is an AMD GPU: the pods ask for {resource}, the resource AMD's device "
            f"plugin offers {where}, but capnb knows no ROCm build of {ENGINES[choice.engine]}: "
            f"the container runs {server.image}, a CUDA build; give your ROCm image "
            "(manifests(..., image=...))"
        ]  # fmt: skip
    chosen = server.rocm_image if image is None else image
    uncertain = f"; {server.rocm_note}" if image is None and server.rocm_note else ""
    return chosen, resource, [
        f"{choice.gpu} is an AMD GPU: the pods ask for {resource}, the resource AMD's device "
        f"plugin offers (not nvidia.com/gpu), and run {chosen}, a ROCm build {where}{uncertain}"
    ]  # fmt: skip


#: The shared memory a tensor-parallel group's processes exchange tensors through (/dev/shm): a
#: container's default is 64 MiB, too little for NCCL between the GPUs of one pod; vLLM's
#: Kubernetes guide mounts a memory-backed emptyDir of 2 GiB there.
_SHM = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}


def _shared_memory(choice: PolicyChoice, notes: list[str]) -> tuple[dict, dict]:
    """(the container's volumeMounts, the pod's volumes) a group of GPUs needs; empty at TP 1."""
    if choice.tensor_parallel < 2:
        return {}, {}
    notes.append(
        f"the {choice.tensor_parallel} GPUs of an instance exchange tensors through /dev/shm, "
        "which a container holds at 64 MiB: the pod mounts a 2 GiB memory-backed emptyDir there "
        "(Knative gates emptyDir volumes behind its config-features flag "
        "kubernetes.podspec-emptydir where your release does; add the same volume to the "
        "Deployment the HPA and KEDA scale)"
    )
    return (
        {"volumeMounts": [{"name": _SHM["name"], "mountPath": "/dev/shm"}]},
        {"volumes": [_SHM]},
    )


#: Knative Serving's request timeout of a revision by default, and its default ceiling (s;
#: config-defaults' revision-timeout-seconds and max-revision-timeout-seconds).
_KNATIVE_TIMEOUT_S = 300
_KNATIVE_MAX_TIMEOUT_S = 600


def _knative(choice, values, name, namespace, pods, notes) -> list[dict]:
    image, resource = pods
    template = _knative_annotations(values, notes)
    if values["min_instances"] < values["max_instances"]:
        notes.append(
            f"initial-scale is the floor ({values['min_instances']}): a new revision takes all "
            f"the traffic once that many pods are ready, however many the old one runs (up to "
            f"{values['max_instances']}); before a rollout under load, raise initial-scale to "
            "the pods running, or shift traffic by the Service's traffic percentages (capnb's "
            "replay holds one revision)"
        )
    deadline = _progress_deadline(choice)
    if deadline:
        template["serving.knative.dev/progress-deadline"] = f"{deadline}s"
        notes.append(
            f"a {choice.cold_start_s:g} s cold start is over half Knative's default progress "
            f"deadline ({_PROGRESS_DEADLINE_S} s), after which a revision whose pods are not "
            f"ready fails: serving.knative.dev/progress-deadline is {deadline}s (twice the cold "
            "start)"
        )
    notes.append(
        "the Service sets no timeoutSeconds: Knative ends a request its pod has not finished "
        f"within the revision's timeout ({_KNATIVE_TIMEOUT_S} s by default, at most "
        f"{_KNATIVE_MAX_TIMEOUT_S} s unless the cluster's config-defaults ConfigMap raises "
        "max-revision-timeout-seconds); capnb's plan holds no longest request, so set "
        "spec.template.spec.timeoutSeconds to your longest streamed answer (its output tokens x "
        "TPOT) before applying"
    )
    flag = server_of(choice.engine).container_model_flag
    notes.append(
        f"the container runs {image} with {flag + ' ' if flag else 'the model '}"
        f"{choice.model!r}, capnb's name for the model: put the Hugging Face id (or the path in "
        "the image) the pods serve there before applying"
    )
    mounts, volumes = _shared_memory(choice, notes)
    service = {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": _metadata(name, namespace, _annotations(choice, values, {})),
        "spec": {
            "template": {
                "metadata": {"annotations": template},
                "spec": {
                    "containers": [
                        {
                            "image": image,
                            **_container(choice),
                            "ports": [{"containerPort": 8000}],
                            "resources": {"limits": {resource: choice.tensor_parallel}},
                            **mounts,
                        }
                    ],
                    **volumes,
                },
            }
        },
    }
    rates = {k: values[k] for k in _KNATIVE_CLUSTER}
    if rates == _KNATIVE_CLUSTER:
        return [service]
    notes.append(
        "the scale rates differ from Knative's defaults: the ConfigMap config-autoscaler sets them "
        "for every service of the cluster"
    )
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "config-autoscaler", "namespace": "knative-serving"},
        "data": {k.replace("_", "-"): _decimal(v) for k, v in rates.items()},
    }
    return [service, config]


# -- reading the objects back ---------------------------------------------------------------------
def _float(text, where: str) -> float:
    try:
        return float(str(text).strip().rstrip("s"))
    except ValueError:
        raise InputError(f"{where}: {text!r} is not a number") from None


def _quantity(text, where: str) -> float:
    text = str(text)
    if text.endswith("m"):
        return _float(text[:-1], where) / 1000
    return _float(text, where)


def _capnb(meta: Mapping, key: str):
    found = (meta.get("annotations") or {}).get(_CAPNB + key)
    if found is None:
        raise InputError(f"{meta.get('name', 'object')}: no annotation {_CAPNB + key}")
    return found


def _gpus(meta: Mapping) -> int:
    """GPUs an instance holds (its tensor-parallel degree), from the capnb annotation."""
    text = str(_capnb(meta, "tensor-parallel")).strip()
    if not text.isdigit() or int(text) < 1:
        raise InputError(
            f"{meta.get('name', 'object')}: {_CAPNB}tensor-parallel = {text!r}: expected a whole "
            "number >= 1 (GPUs an instance holds)"
        )
    return int(text)


def _read_rules(behavior: Mapping, direction: str) -> dict:
    rules = behavior[f"scale{direction.capitalize()}"]
    out = {f"scale_{direction}_pods": None, f"scale_{direction}_percent": None}
    periods = {float(p["periodSeconds"]) for p in rules["policies"]}
    if len(periods) != 1:
        raise InputError(
            f"behavior.scale{direction.capitalize()}: capnb replays one period per direction, got "
            f"{sorted(periods)}"
        )
    for p in rules["policies"]:
        kind = "pods" if p["type"] == "Pods" else "percent"
        out[f"scale_{direction}_{kind}"] = int(p["value"]) if kind == "pods" else float(p["value"])
    out[f"scale_{direction}_period_s"] = periods.pop()
    return out, float(rules["stabilizationWindowSeconds"])


def _read_hpa_like(meta, low, high, target, behavior) -> dict:
    up, up_window = _read_rules(behavior, "up")
    down, down_window = _read_rules(behavior, "down")
    name = meta.get("name", "object")
    return {
        "policy": "hpa",
        "gpus_per_instance": _gpus(meta),
        "per_instance_qps": _float(_capnb(meta, "per-instance-qps"), f"{name}: per-instance-qps"),
        "scale_up_threshold": _quantity(target, f"{name}: target"),
        "cooldown_s": down_window,
        "min_instances": int(low),
        "max_instances": int(high),
        "buffer_instances": int(_capnb(meta, "warm-spares")),
        "sync_s": _float(_capnb(meta, "sync-period-s"), f"{name}: sync-period-s"),
        "hpa_tolerance": _float(_capnb(meta, "tolerance"), f"{name}: tolerance"),
        "scale_up_stabilization_s": up_window,
        **up,
        **down,
    }


def _read_hpa(doc: Mapping) -> dict:
    spec = doc["spec"]
    (metric,) = spec["metrics"]
    target = metric["pods"]["target"]["averageValue"]
    return _read_hpa_like(
        doc["metadata"], spec["minReplicas"], spec["maxReplicas"], target, spec["behavior"]
    )


def _read_keda(doc: Mapping) -> dict:
    spec = doc["spec"]
    (trigger,) = spec["triggers"]
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    settings = _read_hpa_like(
        doc["metadata"], spec["minReplicaCount"], spec["maxReplicaCount"],
        trigger["metadata"]["threshold"], behavior,
    )  # fmt: skip
    divisor = re.search(r"/\s*([0-9.eE+-]+)\s*$", trigger["metadata"]["query"])
    if divisor is None or float(divisor.group(1)) != settings["per_instance_qps"]:
        raise InputError(
            f"{doc['metadata'].get('name')}: the trigger's query must divide the arrival rate by "
            f"the per-instance requests/s ({settings['per_instance_qps']!r})"
        )
    return settings


def _read_knative(docs: list[Mapping]) -> dict:
    service = next(d for d in docs if d["kind"] == "Service")
    config = next((d["data"] for d in docs if d["kind"] == "ConfigMap"), {})
    notes = service["spec"]["template"]["metadata"]["annotations"]

    def one(key):
        return notes[_KNATIVE + key]

    stable = _float(one("window"), "window")
    qps = _float(_capnb(service["metadata"], "per-instance-qps"), "per-instance-qps")
    target = _float(one("target"), "target")
    up = _float(one("target-utilization-percentage"), "utilization") / 100
    if target != qps:  # a rate below Knative's least target: the per-pod target is their product
        up = round(up * target / qps, 11)
    return {
        "policy": "knative",
        "gpus_per_instance": _gpus(service["metadata"]),
        "per_instance_qps": qps,
        "scale_up_threshold": up,
        "cooldown_s": _float(one("scale-down-delay"), "scale-down-delay"),
        "min_instances": int(one("min-scale")),
        "max_instances": int(one("max-scale")),
        "buffer_instances": 0,
        "tick_s": _KNATIVE_TICK_S,
        "stable_window_s": stable,
        # Knative holds the window as a Duration, whole nanoseconds
        "panic_window_s": round(
            stable * _float(one("panic-window-percentage"), "panic window") / 100, 9
        ),
        "panic_threshold": _float(one("panic-threshold-percentage"), "panic threshold") / 100,
        **{k: _float(config.get(k.replace("_", "-"), v), k) for k, v in _KNATIVE_CLUSTER.items()},
    }


def manifest_settings(documents) -> dict[str, object]:
    """The :func:`capnb.elasticity.simulate` arguments an exported object replays as.

    Parameters
    ----------
    documents
        One object of :func:`manifests` (a mapping, as parsed from its YAML), or the list of one
        key's objects (a Knative Service with its ConfigMap).

    Returns
    -------
    dict
        ``policy`` (``"hpa"`` for the HPA and KEDA, ``"knative"``), ``gpus_per_instance`` (the
        ``capnb.io/tensor-parallel`` annotation), ``per_instance_qps``, ``scale_up_threshold``,
        ``cooldown_s``, ``min_instances``, ``max_instances``, ``buffer_instances`` and the
        policy's options: add the demand, ``step_s``, ``cold_start_s`` and ``tolerance_s``.
    """
    docs = [documents] if isinstance(documents, Mapping) else list(documents)
    kinds = {d.get("kind") for d in docs}
    if "HorizontalPodAutoscaler" in kinds:
        return _read_hpa(next(d for d in docs if d["kind"] == "HorizontalPodAutoscaler"))
    if "ScaledObject" in kinds:
        return _read_keda(next(d for d in docs if d["kind"] == "ScaledObject"))
    if "Service" in kinds:
        return _read_knative(docs)
    raise InputError(f"no HorizontalPodAutoscaler, ScaledObject or Knative Service in {kinds}")


# -- the result -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Manifests:
    """:func:`manifests`' answer.

    ``documents``: per key of :data:`KINDS`, its objects (mappings). ``replays``: the
    :func:`capnb.elasticity.simulate` arguments each key replays as (:func:`manifest_settings` of
    its objects). ``exact``: whether that is the chosen policy's own replay, setting for setting.
    ``notes``: what each object could not say as the replay ran it, and what it assumes.
    """

    choice: PolicyChoice
    documents: dict[str, list[dict]]
    replays: dict[str, dict]
    exact: dict[str, bool]
    notes: dict[str, list[str]]

    def yaml(self, kind: str) -> str:
        """One key's objects as a YAML stream, its notes as comments on top."""
        import yaml

        if kind not in self.documents:
            raise InputError(f"kind={kind!r}: use one of {list(self.documents)}")
        head = [f"# capnb: the {self.choice.policy!r} policy as {_TITLES[kind]}"]
        head.append("# the replay of these values: " + json.dumps(self.replays[kind]))
        head += [f"# note: {line}" for line in self.notes[kind]]
        body = yaml.safe_dump_all(self.documents[kind], sort_keys=False, explicit_start=True)
        return "\n".join(head) + "\n" + body

    def write(self, directory, *, force: bool = False) -> dict[str, Path]:
        """Write ``hpa.yaml``, ``knative.yaml`` and ``keda.yaml`` into ``directory``, as one set.

        As :func:`capnb.data.write_set` writes them: whole or not at all, and a file of that name
        capnb did not write there (your own ``hpa.yaml``) is not replaced without ``force``.
        """
        from ..data import write_set

        files = write_set(
            directory, {f"{kind}.yaml": self.yaml(kind) for kind in self.documents}, force=force
        )
        return {kind: files[f"{kind}.yaml"] for kind in self.documents}


_TITLES = {
    "hpa": "a Kubernetes HorizontalPodAutoscaler (autoscaling/v2)",
    "knative": "a Knative Service (KPA)",
    "keda": "a KEDA ScaledObject",
}
_NAME = re.compile(r"[^a-z0-9-]+")

#: The longest Deployment name (characters) whose pods keep the names KEDA's query matches
#: (:data:`_PODS`): Kubernetes cuts a pod's ``<deployment>-<pod-template-hash>-`` (a hash of up
#: to 10 characters) to 63 - 5 = 58 characters before its 5 random ones.
_MOST_DEPLOYMENT = 58 - len("--") - 10


def _dns_name(
    text: str,
    argument: str = "name",
    *,
    given: bool = False,
    letter_first: bool = False,
    longest: int = 63,
) -> str:
    """``text`` as a Kubernetes name (a DNS label); a ``given`` one must already be one.

    ``letter_first``: a DNS-1035 label, as the objects' own name must be (a Knative Service
    makes a Kubernetes Service and revisions of that name, which start with a letter); a name
    made from a model's that starts with a digit is prefixed ``model-``. ``longest``: the most
    characters (a name made from a model's is cut to it; a ``given`` longer one is refused).
    """
    if given and len(str(text)) > longest:
        spares = " and of its warm spares' '<name>-spares'" if longest < _MOST_DEPLOYMENT else ""
        raise InputError(
            f"{argument}={text!r} is longer than {longest} characters: Kubernetes cuts a pod's "
            f"name to 58 characters before its random 5, and KEDA's query would then match none "
            f"of the pods of Deployment '<name>'{spares}"
        )
    name = _NAME.sub("-", str(text).lower()).strip("-")[:longest].strip("-")
    if not name:
        raise InputError(f"{argument}={text!r} has no letters or digits for a Kubernetes name")
    if given and name != text:  # the user's own name: said, not changed behind their back
        raise InputError(
            f"{argument}={text!r} is not a Kubernetes name (lowercase letters, digits and '-', at "
            f"most 63 characters, a letter or digit at each end); e.g. {name!r}"
        )
    if letter_first and not name[0].isalpha():
        fixed = f"model-{name}"[:longest].strip("-")
        if given:
            raise InputError(
                f"{argument}={text!r} does not start with a letter: the name of a Knative Service "
                f"(and of the Kubernetes Service and revisions it makes) is a DNS-1035 label, a "
                f"letter first; e.g. {fixed!r}"
            )
        name = fixed
    return name


def _objects_name(choice: PolicyChoice, name: str | None) -> tuple[str, list[str]]:
    """The objects' name (``name`` as given, else made from the model's) and a note if renamed.

    At most :data:`_MOST_DEPLOYMENT` characters, less ``-spares`` with warm spares, so that KEDA's
    query matches the pods of the Deployment and of its spares' one.
    """
    renamed = []
    if name is None and not re.search(r"[a-z0-9]", str(choice.model).lower()):
        # nothing of the model's name is left for a Kubernetes name: name the objects, and say so
        name = "model"
        renamed.append(
            f"the model's name {choice.model!r} holds no letter or digit a Kubernetes name can "
            "(a-z, 0-9): the objects are named 'model'; name them with capnb export --name NAME "
            "(manifests(..., name=NAME))"
        )
    else:
        longest = _MOST_DEPLOYMENT - (len("-spares") if choice.buffer_instances else 0)
        name = _dns_name(
            choice.model if name is None else name, given=name is not None, letter_first=True,
            longest=longest,
        )  # fmt: skip
    return name, renamed


def manifests(
    choice: PolicyChoice,
    *,
    name: str | None = None,
    namespace: str = "default",
    metric: str = "capnb_instance_load",
    arrivals_counter: str | None = None,
    prometheus: str = "http://prometheus.monitoring.svc:9090",
    image: str | None = None,
) -> Manifests:
    """The chosen policy as a Kubernetes HPA v2, a Knative Service (KPA) and a KEDA ScaledObject.

    Parameters
    ----------
    choice
        The policy and its settings as the replay used them (:class:`PolicyChoice`, or
        :func:`policy_choice` of a plan).
    name, namespace
        The Deployment (HPA, KEDA) or Knative Service the objects scale (default: the model's
        name as a DNS label).
    metric
        The HPA's per-pod metric (a custom metrics adapter serves it): arrival requests/s of the
        pod divided by the per-instance requests/s (the ``capnb.io/per-instance-qps`` annotation).
    arrivals_counter, prometheus
        KEDA's Prometheus trigger: the request counter whose rate is the arrival rate, and the
        server's address. The default is the engine's own counter (:data:`capnb.plan.SERVERS`:
        vLLM's ``request_success_total`` counts requests that finished, noted); an engine that
        exports none (LMDeploy) needs one given: a gateway's counter of arriving requests, which
        is the better choice for any engine.
    image
        The Knative Service's serving image (default: the engine's, its ROCm build on an AMD GPU,
        whose pods ask for ``amd.com/gpu`` rather than ``nvidia.com/gpu``; it runs the model
        capnb names: put the Hugging Face id you serve there).

    Returns
    -------
    Manifests
        The objects per key of :data:`KINDS`, what each replays as, whether that is the chosen
        run (``exact``), and the notes.

    Examples
    --------
    >>> choice = PolicyChoice("hpa", per_instance_qps=8.8, scale_up_threshold=0.8,
    ...                       cooldown_s=300.0, min_instances=2, max_instances=40)
    >>> out = manifests(choice)
    >>> out.documents["hpa"][0]["spec"]["metrics"][0]["pods"]["target"]["averageValue"]
    '800m'
    >>> out.exact
    {'hpa': True, 'knative': False, 'keda': True}
    """
    if not isinstance(choice, PolicyChoice):
        raise InputError(f"choice must be a capnb.plan.PolicyChoice, got {type(choice).__name__}")
    server = server_of(choice.engine)
    image, resource, pod_notes = _pods(choice, image)
    if arrivals_counter is None:
        if not server.counter:
            raise InputError(
                f"arrivals_counter: {ENGINES[choice.engine]} exports no Prometheus counter of "
                "requests for KEDA's trigger (its metrics are gauges): give the counter of arriving "
                "requests your gateway has (manifests(..., arrivals_counter=NAME))"
            )
        arrivals_counter = server.counter
    name, renamed = _objects_name(choice, name)
    namespace = _dns_name(namespace, "namespace", given=True)
    notes = {
        kind: list(renamed)
        + pod_notes
        + _prefix_note(choice)
        + _context_note(choice)
        + _seqs_note(choice)
        for kind in KINDS
    }
    notes["hpa"] += _deadline_notes(choice)
    hpa_values = _hpa_values(choice, notes["hpa"])
    notes["keda"] = list(notes["hpa"])
    documents = {
        "hpa": [_hpa(choice, hpa_values, name, namespace, metric, notes["hpa"])],
        "knative": _knative(
            choice, _knative_values(choice, notes["knative"]), name, namespace,
            (image, resource), notes["knative"],
        ),
        "keda": [_keda(choice, hpa_values, name, namespace, arrivals_counter, prometheus,
                       notes["keda"])],
    }  # fmt: skip
    notes["keda"] = list(dict.fromkeys(notes["keda"] + notes["hpa"]))
    if hpa_values["min_instances"] < hpa_values["max_instances"]:
        notes["hpa"].append(
            f"the HPA reads the per-pod metric {metric!r} through Kubernetes' custom metrics API: "
            "an adapter must serve it (prometheus-adapter, or KEDA's), else the HPA reports "
            "FailedGetPodsMetric and never scales"
        )
    for kind in ("hpa", "keda"):
        if choice.buffer_instances:
            notes[kind].append(
                f"hold the {words.count(choice.buffer_instances, 'warm spare')} as a second "
                "Deployment "
                f"'{name}-spares' of the same pods (replicas: {choice.buffer_instances}), outside "
                "the autoscaler and behind the same Service"
            )
    if choice.buffer_instances and hpa_values["min_instances"] < hpa_values["max_instances"]:
        notes["hpa"].append(  # a fixed fleet's HPA never moves, whatever its metric reads
            _spares_metric_note(metric, hpa_values["buffer_instances"], hpa_values["min_instances"])
        )
    notes["keda"].append(
        "KEDA's HPA reads an external metric: with pods still starting it does not hold the count "
        "as capnb's HPA replay does (Kubernetes' unready-pod rule applies to per-pod metrics only)"
    )
    if arrivals_counter == server.counter and server.counted_at_end:
        notes["keda"].append(
            f"the query counts {server.counter}, requests that finished: a request counts when it "
            "ends, not when it arrives, and one aborted or timed out under overload never counts, "
            "so the load reads below the arrivals capnb's replay scales on; give a counter of "
            "arriving requests if your gateway has one (manifests(..., arrivals_counter=...))"
        )
    if arrivals_counter == server.counter and server.metrics:
        notes["keda"].append(
            f"{ENGINES[choice.engine]} exports {server.counter} only with {server.metrics}: its "
            f"pods run with {server.metrics} {_IN_THE_PODS}, or KEDA's query returns no data and "
            "the object holds its floor whatever the load"
        )
    if arrivals_counter == server.counter and server.metrics_setting:
        notes["keda"].append(
            f"{ENGINES[choice.engine]} exports {server.counter} only with "
            f"{server.metrics_setting}, and serves it at {server.metrics_path}, not /metrics: "
            "give its pods that file and Prometheus that scrape path, or KEDA's query returns no "
            "data and the object holds its floor whatever the load"
        )
    if hpa_values["sync_s"] < _PROMETHEUS_RANGE_S:
        notes["keda"].append(
            f"the query's rate is over {_PROMETHEUS_RANGE_S:g} s (Prometheus needs at least two "
            f"scrapes in its range; {_decimal(hpa_values['sync_s'])} s, the sync period capnb's "
            "replay reads, returns no data at a 15-30 s scrape interval): the object sees a "
            f"burst up to {_PROMETHEUS_RANGE_S - hpa_values['sync_s']:g} s later than the replay"
        )
    replays = {kind: manifest_settings(documents[kind]) for kind in KINDS}
    exact = {kind: _same_run(replays[kind], choice) for kind in KINDS}
    return Manifests(choice, documents, replays, exact, notes)


def _prefix_note(choice: PolicyChoice) -> list[str]:
    """What a per-instance rate priced with a prefix cache assumes of the routing, if it was."""
    if not choice.prefix_hit_rate:
        return []
    return [
        f"per-instance-qps was priced with a prefix cache serving {choice.prefix_hit_rate:.1%} of "
        "prompt tokens, replayed as one cache seeing the whole log; each pod holds its own cache "
        "and a Kubernetes Service spreads requests over the pods at random, which splits the "
        "shared prefixes: route requests by prefix to the pods (a prefix-aware router), or read "
        "the rate a routing keeps with capnb.memory.prefix_routing and re-plan on it"
    ]


def _same_run(replay: dict[str, object], choice: PolicyChoice) -> bool:
    """Whether an object's replay is the chosen run: its very settings, or the fixed fleet pinned.

    An autoscaler held at one size (min = max) with the fixed fleet's instances, spares and all,
    never moves: every step of its replay is the fixed run's.
    """
    if replay == choice.settings():
        return True
    held = replay["min_instances"] + replay["buffer_instances"]
    return (
        choice.policy == "fixed"
        and replay["min_instances"] == replay["max_instances"]
        and held == choice.min_instances + choice.buffer_instances
    )


# -- from a plan ----------------------------------------------------------------------------------
def policy_choice(plan) -> PolicyChoice:
    """The :class:`PolicyChoice` of a plan.

    Takes what :func:`capnb.plan.build` or :func:`capnb.plan.load` gives, the mapping
    ``plan.json`` holds, or its :class:`capnb.plan.Answer`, and reads the answer record: the
    policy and its settings (``answer.policy``), ``per_instance_qps``, ``model``, ``gpu``,
    ``tensor_parallel``, the policy's ``cold_start_s`` and, with a prefix cache, its
    ``prefix_hit_rate``. The pool's largest
    size is the larger of the replay's peak less its warm spares (``peak_instances``: the replay
    never went above it, so a bound there changes no step) and the plan's own fleet at its peak
    (the largest of ``fixed_instances`` plus the burst buffer ``burst_instances``).
    """
    from ._answer import answer
    from ._closecall import above_default_seqs

    record = answer(plan)
    chosen = record.policy
    if chosen.kind not in words.POLICY_KINDS:  # (an edited plan.json: read by none, but no plan's)
        raise InputError(
            f"the plan's answer policy.kind = {chosen.kind!r}: expected one of "
            f"{list(words.POLICY_KINDS)}"
        )
    _whole(record.reserved_instances, "reserved_instances")
    spares = _whole(chosen.buffer_instances, "policy.buffer_instances")
    floor = _whole(chosen.min_instances, "policy.min_instances")
    fleet = [_whole(n, f"fixed_instances[{i}]") for i, n in enumerate(record.fixed_instances)]
    most = max(
        _whole(record.peak_instances, "peak_instances") - spares,
        max(fleet, default=0) + _whole(record.burst_instances, "burst_instances"),
        floor,
    )
    return PolicyChoice(
        policy=chosen.name,
        per_instance_qps=float(record.per_instance_qps),
        scale_up_threshold=float(chosen.scale_up_threshold),
        cooldown_s=float(chosen.cooldown_s),
        min_instances=floor,
        max_instances=most,
        buffer_instances=spares,
        model=str(record.model),
        gpu=str(record.gpu),
        tensor_parallel=_whole(record.tensor_parallel, "tensor_parallel"),
        prefix_hit_rate=float(record.prefix_hit_rate) if record.prefix_cache_share > 0 else 0.0,
        max_model_len=_whole(record.max_model_len, "max_model_len"),
        cold_start_s=_cold_start(chosen.cold_start_s),
        cold_start_vetoes=bool(chosen.cold_start_vetoes),
        max_num_seqs=above_default_seqs(
            _whole(record.safe_concurrency, "safe_concurrency"), str(record.gpu), record.engine
        ),
        engine=str(record.engine),
        max_num_batched_tokens=_whole(record.max_num_batched_tokens, "max_num_batched_tokens"),
    )


def _whole(value: object, field: str) -> int:
    """An instance count of the plan's answer, or an error naming its field.

    At most 2**31 - 1: Kubernetes' replica counts (and vLLM's sizes) are 32-bit integers.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < 0
        or value != round(value)
    ):
        raise InputError(f"the plan's answer {field} = {value!r}: expected a whole number >= 0")
    if value > _INT32:
        raise InputError(
            f"the plan's answer {field} = {value!r}: expected a whole number from 0 to "
            f"{_INT32:,} (a Kubernetes replica count is a 32-bit integer)"
        )
    return int(value)


_INT32 = 2**31 - 1


def _cold_start(value: float) -> float:
    """The policy's cold start, in seconds, at most a day as a plan config's; else an error.

    A cold_start_s of 1e20 s wrote a note recommending progressDeadlineSeconds: 2e+20.
    """
    from ._config import DAY_S

    if not 0 <= value <= DAY_S:  # (NaN too)
        raise InputError(
            f"the plan's answer policy.cold_start_s = {value!r}: expected seconds from 0 to "
            f"{DAY_S:,.0f} (a day)"
        )
    return float(value)

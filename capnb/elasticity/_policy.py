"""Autoscaling policies' settings: defaults, validation, and the kernel's config record.

Every time is given in seconds and must be a whole number of simulation steps; a window or period
shorter than one step is an error that names the largest step it allows.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from .. import glossary
from ..errors import InputError
from ..kernels import autoscale_records as kernels
from ..units import in_unit
from ._decision import veto_cold_steps

__all__ = [
    "COOLDOWN_MEANING",
    "DEFAULT_COOLDOWN_S",
    "OPTIONS",
    "POLICIES",
    "Policy",
    "build_config",
    "steps",
]

#: The policies the simulator knows.
POLICIES = ("article", "hpa", "knative", "fixed", "fixed_elastic", "predictive")

_CODES = {
    "article": kernels.ARTICLE,
    "hpa": kernels.HPA,
    "knative": kernels.KNATIVE,
    "fixed": kernels.FIXED,
    "fixed_elastic": kernels.FIXED_ELASTIC,
    "predictive": kernels.PREDICTIVE,
}

#: Default scale-down window per policy (s): the article's shortest cool-down (15 min), HPA's
#: scale-down stabilisation window (300 s) and Knative's scale-down delay (0 s).
DEFAULT_COOLDOWN_S = {
    "article": 900.0,
    "hpa": 300.0,
    "knative": 0.0,
    "fixed": 0.0,
    "fixed_elastic": 900.0,
    "predictive": 300.0,
}

#: What ``cooldown_s`` means for each policy.
COOLDOWN_MEANING = {
    "article": "time the load must stay below the scale-down threshold before an instance stops",
    "hpa": "scale-down stabilisation window (behavior.scaleDown.stabilizationWindowSeconds)",
    "knative": "scale-down delay (autoscaling.knative.dev/scale-down-delay)",
    "fixed": "not used",
    "fixed_elastic": "time the load must stay below the scale-down threshold before an instance stops",
    "predictive": "scale-down stabilisation window over the forecast-driven counts",
}

#: Policy options and their defaults. Article: the article's thresholds, evaluated once a minute.
#: HPA: Kubernetes' documented defaults (sync period, tolerance, behaviour policies). Knative:
#: the KPA's config-autoscaler defaults (tick, windows, panic threshold, rates). Predictive:
#: evaluated at the HPA's 15-second sync period.
OPTIONS: dict[str, dict[str, object]] = {
    "article": {"scale_down_threshold": 0.3, "evaluation_s": 60.0},
    "fixed_elastic": {"scale_down_threshold": 0.3, "evaluation_s": 60.0},
    "hpa": {
        "sync_s": 15.0,
        "hpa_tolerance": 0.1,
        "scale_up_stabilization_s": 0.0,
        "scale_up_pods": 4,
        "scale_up_percent": 100.0,
        "scale_up_period_s": 15.0,
        "scale_down_pods": None,
        "scale_down_percent": 100.0,
        "scale_down_period_s": 15.0,
    },
    "knative": {
        "tick_s": 2.0,
        "stable_window_s": 60.0,
        "panic_window_s": 6.0,
        "panic_threshold": 2.0,
        "max_scale_up_rate": 1000.0,
        "max_scale_down_rate": 2.0,
    },
    "fixed": {},
    "predictive": {"evaluation_s": 15.0},
}


def _axis(values, name: str, kind: str) -> tuple[np.ndarray, bool]:
    """A parameter as a 1-D array and whether it was given as a sequence (then it is a dim)."""
    is_dim = isinstance(values, Sequence | np.ndarray | xr.DataArray) and not isinstance(
        values, str
    )
    array = np.atleast_1d(np.asarray(values.values if isinstance(values, xr.DataArray) else values))
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iuf":
        raise InputError(f"{name}: expected a number or a 1-D sequence of numbers, got {values!r}")
    if not np.isfinite(array).all():
        raise InputError(f"{name}: values must be finite, got {array.tolist()}")
    if kind == "count":
        if (array != np.round(array)).any() or (array < 0).any():
            raise InputError(f"{name}: values must be whole numbers >= 0, got {array.tolist()}")
        array = array.astype(np.int64)
    elif kind == "share" and ((array <= 0) | (array > 1)).any():
        raise InputError(f"{name}: values must be in (0, 1], got {array.tolist()}")
    elif kind == "seconds" and (array < 0).any():
        raise InputError(f"{name}: values must be >= 0 s, got {array.tolist()}")
    if is_dim and np.unique(array).size != array.size:
        raise InputError(f"{name}: duplicate values in {array.tolist()}")
    return array, is_dim


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InputError(f"{name} must be a finite number, got {value!r}")
    return float(value)


#: Longest window, period or cold start in steps (a year of 1-second steps is 31.5 million).
_LONGEST_STEPS = 1_000_000_000


def steps(seconds: object, step_s: float, name: str, *, allow_zero: bool = True) -> int:
    """Convert a time to whole steps, or raise an error that names what would work."""
    value = _number(seconds, name)
    if value < 0:
        raise InputError(f"{name} must be >= 0 s, got {value:g}")
    if value == 0:
        if allow_zero:
            return 0
        raise InputError(f"{name} must be at least one step ({step_s:g} s), got 0")
    if value < step_s:
        raise InputError(
            f"{name}={value:g} s is shorter than one step of {step_s:g} s; simulate with "
            f"step_s <= {value:g} s (a divisor of {value:g} s; a series whose own step is longer: "
            "resample it with capnb.elasticity.resample_demand)"
        )
    count = value / step_s
    if abs(count - round(count)) > 1e-9 * count:
        raise InputError(
            f"{name}={value:g} s is not a whole number of steps of {step_s:g} s; pick a step_s "
            f"that divides it or a multiple of {step_s:g} s"
        )
    if count > _LONGEST_STEPS:  # the simulator holds a buffer of this many steps
        raise InputError(
            f"{name}={value:g} s is {count:,.0f} steps of {step_s:g} s; capnb simulates windows "
            f"of up to {_LONGEST_STEPS:,} steps"
        )
    return round(count)


def _share(value: object, name: str, *, low: float, high: float, open_low: bool = False) -> float:
    number = _number(value, name)
    if number < low or number > high or (open_low and number == low):
        bracket = "(" if open_low else "["
        raise InputError(f"{name} must be in {bracket}{low:g}, {high:g}], got {number:g}")
    return number


def _count(value: object, name: str, *, allow_none: bool = False) -> int:
    if value is None and allow_none:
        return -1
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InputError(f"{name} must be a whole number >= 0, got {value!r}")
    return int(value)


#: HPA options whose None means the rule is absent (Kubernetes' ``behavior`` policies).
_RATE_RULES = frozenset(f"scale_{d}_{k}" for d in ("up", "down") for k in ("pods", "percent"))


def policy_options(policy: str, given: Mapping[str, object]) -> dict[str, object]:
    """The policy's options: defaults updated with ``given``; unknown names are an error."""
    if policy not in POLICIES:
        raise InputError(f"policy={policy!r} is not known; use one of {list(POLICIES)}")
    known = OPTIONS[policy]
    # None is "unset" for every option but HPA's rate rules, where it is "no such rule" (as a
    # manifest without that policy): reading it as the default would replay a rule the
    # autoscaler does not have.
    options = {k: v for k, v in given.items() if v is not None or k in _RATE_RULES}
    unknown = set(options) - set(known)
    if unknown:
        raise InputError(
            f"policy {policy!r} has no option(s) {sorted(unknown)}; its options: {sorted(known)}"
        )
    return {**known, **options}


def build_config(
    policy: str,
    *,
    step_s: float,
    per_instance_qps: float,
    tolerance_s: float,
    max_instances: int,
    thrash_window_s: float,
    options: Mapping[str, object],
) -> kernels.Config:
    """Validate a policy's settings and build the kernel's :class:`~capnb.kernels.autoscale.Config`.

    The one place the simulator's settings are made from the step's inputs: times become whole
    steps (or an error that names a step that would work), and options the policy does not use
    keep the record's neutral defaults.
    """
    o = policy_options(policy, options)

    def option_steps(name: str, **kw) -> int:  # the policy's own period, said as its option
        return steps(o[name], step_s, f"{policy}'s {name}", **kw)

    tolerance_steps = steps(tolerance_s, step_s, "tolerance_s")
    config = dict(
        step_s=step_s,
        per_instance_qps=per_instance_qps,
        tolerance_steps=tolerance_steps,
        max_instances=max_instances,
        thrash_steps=steps(thrash_window_s, step_s, "thrash_window_s"),
        policy=_CODES[policy],
        veto_cold_steps=veto_cold_steps(tolerance_steps),
    )
    if policy in ("article", "fixed_elastic"):
        config["scale_down_threshold"] = _share(
            o["scale_down_threshold"], "scale_down_threshold", low=0.0, high=1.0
        )
        config["period_steps"] = option_steps("evaluation_s", allow_zero=False)
    elif policy == "predictive":
        config["period_steps"] = option_steps("evaluation_s", allow_zero=False)
    elif policy == "hpa":
        config["period_steps"] = option_steps("sync_s", allow_zero=False)
        config["hpa_tolerance"] = _share(o["hpa_tolerance"], "hpa_tolerance", low=0.0, high=1.0)
        config["up_stabilization_steps"] = option_steps("scale_up_stabilization_s")
        config["up_pods"] = _count(o["scale_up_pods"], "scale_up_pods", allow_none=True)
        config["up_percent"] = (
            -1.0
            if o["scale_up_percent"] is None
            else _share(o["scale_up_percent"], "scale_up_percent", low=0.0, high=1e6)
        )
        config["down_pods"] = _count(o["scale_down_pods"], "scale_down_pods", allow_none=True)
        config["down_percent"] = (
            -1.0
            if o["scale_down_percent"] is None
            else _share(o["scale_down_percent"], "scale_down_percent", low=0.0, high=100.0)
        )
        for direction in ("up", "down"):
            if config[f"{direction}_pods"] < 0 and config[f"{direction}_percent"] < 0:
                raise InputError(
                    f"hpa: give scale_{direction}_pods or scale_{direction}_percent (Kubernetes "
                    f"needs at least one scale-{direction} policy)"
                )
            config[f"{direction}_period_steps"] = option_steps(
                f"scale_{direction}_period_s", allow_zero=False
            )
    elif policy == "knative":
        config["period_steps"] = option_steps("tick_s", allow_zero=False)
        stable = option_steps("stable_window_s", allow_zero=False)
        panic = option_steps("panic_window_s", allow_zero=False)
        if panic > stable:
            raise InputError(
                f"panic_window_s={o['panic_window_s']} must not exceed "
                f"stable_window_s={o['stable_window_s']}"
            )
        config["stable_steps"], config["panic_steps"] = stable, panic
        config["panic_threshold"] = _share(
            o["panic_threshold"], "panic_threshold", low=0.0, high=1e6, open_low=True
        )
        config["max_scale_up_rate"] = _share(
            o["max_scale_up_rate"], "max_scale_up_rate", low=1.0, high=1e9, open_low=True
        )
        config["max_scale_down_rate"] = _share(
            o["max_scale_down_rate"], "max_scale_down_rate", low=1.0, high=1e9, open_low=True
        )
    return kernels.Config.of(**config)


def config_attrs(policy: str, options: Mapping[str, object]) -> dict[str, object]:
    """The policy's options as Dataset attrs (``None`` written as the string ``"none"``)."""
    o = policy_options(policy, options)
    prefix = f"{policy}_"
    return {
        (k if k.startswith(prefix) else prefix + k): ("none" if v is None else v)
        for k, v in o.items()
    }


#: The settings of :class:`Policy` a run takes as numbers, and how :func:`_axis` checks each.
_KINDS = {
    "scale_up_threshold": "share",
    "cooldown_s": "seconds",
    "min_instances": "count",
    "buffer_instances": "count",
}


def _meta(name: str) -> dict[str, object]:
    """A field's metadata: its glossary ``units`` and ``long_name``."""
    return glossary.attrs(name)


@dataclass(frozen=True)
class Policy:
    """An autoscaling policy and its settings: what the autoscaler is configured with.

    :func:`capnb.elasticity.simulate` and :func:`capnb.elasticity.simulate_pools` take one as
    ``policy=`` instead of the settings one by one (``simulate(demand, policy=Policy("hpa",
    scale_up_threshold=0.6), ...)``); the keywords keep working, and a keyword that differs from
    its default next to a record is an error. The cold start (the deployment's), the latency
    tolerance (the service's) and the simulation step are not the policy's: they stay arguments.

    Parameters
    ----------
    name
        One of :data:`POLICIES` (default ``"article"``).
    scale_up_threshold
        Load ratio above which the article's policy adds instances; HPA's and Knative's target
        utilisation of ``per_instance_qps`` (1, in (0, 1]).
    cooldown_s
        The policy's scale-down window (s); None takes the policy's default
        (:data:`DEFAULT_COOLDOWN_S`), which the record then holds. A quantity in another unit
        (``"15 min"``) is converted.
    min_instances
        Fewest instances the policy keeps (instances; ``fixed``: the fleet). None: the caller's
        floor (:func:`~capnb.elasticity.simulate`: 1; :func:`~capnb.elasticity.simulate_pools`:
        each pool's reserved base).
    buffer_instances
        Warm spare instances held above the policy's pool, never scaled (instances).
    max_instances
        Most instances the policy may hold (instances); None: enough for the peak at the
        threshold, never binding.
    options
        The policy's options (:data:`OPTIONS`, e.g. HPA's ``sync_s``); the record holds every
        one, those not given at the policy's defaults.

    Numbers are kept as given once checked (whole counts as ``int``). A bad value is an
    :class:`~capnb.errors.InputError` that names its field.

    Examples
    --------
    >>> Policy("hpa", scale_up_threshold=0.6).cooldown_s
    300.0
    >>> Policy("hpa", min_instances=0)
    Traceback (most recent call last):
    ...
    capnb.errors.InputError: min_instances must be at least 1 for the HPA (minReplicas >= 1)
    """

    name: str = field(default="article", metadata=_meta("policy"))
    scale_up_threshold: float = field(default=0.7, metadata=_meta("scale_up_threshold"))
    cooldown_s: float | None = field(default=None, metadata=_meta("cooldown_s"))
    min_instances: int | None = field(default=None, metadata=_meta("min_instances"))
    buffer_instances: int = field(default=0, metadata=_meta("buffer_instances"))
    max_instances: int | None = field(
        default=None,
        metadata={"units": "instances", "long_name": "most instances the autoscaler may hold"},
    )
    options: Mapping[str, object] = field(
        default_factory=dict,
        metadata={"units": "1", "long_name": "the policy's options, each in its own unit"},
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InputError(f"policy: name = {self.name!r}: expected one of {list(POLICIES)}")
        if not isinstance(self.options, Mapping):
            raise InputError(
                f"policy: options = {self.options!r}: expected a mapping name -> value"
            )
        object.__setattr__(self, "options", policy_options(self.name, dict(self.options)))
        cooldown = self.cooldown_s
        if cooldown is None:
            cooldown = DEFAULT_COOLDOWN_S[self.name]
        object.__setattr__(self, "cooldown_s", in_unit(cooldown, "s", "cooldown_s"))
        for name, kind in _KINDS.items():
            value = getattr(self, name)
            if value is None and name == "min_instances":
                continue
            if isinstance(value, Sequence | np.ndarray | xr.DataArray) and not isinstance(
                value, str
            ):
                raise InputError(
                    f"policy: {name} = {value!r}: one number (sweep takes a grid of them)"
                )
            array, _ = _axis(value, name, kind)
            if kind == "count":
                object.__setattr__(self, name, int(array[0]))
        if self.name == "hpa" and self.min_instances is not None and self.min_instances < 1:
            raise InputError("min_instances must be at least 1 for the HPA (minReplicas >= 1)")
        high = self.max_instances
        if high is not None:
            if isinstance(high, bool) or not isinstance(high, numbers.Integral):
                raise InputError(f"max_instances must be a whole number, got {high!r}")
            if high < 1:  # (simulate refuses it too: said here, where the record is made)
                raise InputError(f"max_instances must be at least 1 instance, got {high!r}")
            if high < (self.min_instances or 0):
                raise InputError(
                    f"min_instances={self.min_instances} is more than max_instances={high}"
                )
            object.__setattr__(self, "max_instances", int(high))

    def settings(self) -> dict[str, object]:
        """The record as :func:`capnb.elasticity.simulate`'s keywords (``policy`` is the name).

        ``min_instances`` is left out when None (the caller's floor).
        """
        out: dict[str, object] = {
            "policy": self.name,
            "scale_up_threshold": self.scale_up_threshold,
            "cooldown_s": self.cooldown_s,
            "min_instances": self.min_instances,
            "buffer_instances": self.buffer_instances,
            "max_instances": self.max_instances,
            **self.options,
        }
        if self.min_instances is None:
            del out["min_instances"]
        return out

    @classmethod
    def from_settings(cls, settings: Mapping[str, object]) -> Policy:
        """A record from :func:`capnb.elasticity.simulate`'s keywords (``policy`` is the name).

        Keys that are not the policy's (``cold_start_s``, ``tolerance_s``, ...) are errors.
        """
        given = dict(settings)
        name = given.pop("policy", "article")
        fields_ = {k: given.pop(k) for k in SETTINGS if k in given}
        known = {k for o in OPTIONS.values() for k in o}
        other = sorted(set(given) - known)
        if other:
            raise InputError(f"policy: {other} are not a policy's settings or options")
        return cls(name, **fields_, options=given)


#: The settings of :class:`Policy` that :func:`capnb.elasticity.simulate` takes as keywords
#: (with ``policy``, the name, and the policy's options).
SETTINGS = (
    "scale_up_threshold",
    "cooldown_s",
    "min_instances",
    "buffer_instances",
    "max_instances",
)


def split_settings(settings: Mapping[str, object]) -> tuple[dict, dict]:
    """``(the policy's settings and options, the rest)`` of a mapping of simulate's keywords."""
    known = {*SETTINGS, *(k for o in OPTIONS.values() for k in o)}
    ours = {k: v for k, v in settings.items() if k in known}
    return ours, {k: v for k, v in settings.items() if k not in known}

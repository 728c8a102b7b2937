"""A closed loop's per-instance rate under arrivals that do not wait for one another.

The capacity step reads an instance's requests/s off a closed-loop curve (a fixed number of
requests in flight, as ``vllm bench serve --max-concurrency`` runs and as the article plans). Real
traffic arrives on its own: the number in flight swings around its mean, and the P99 is the
swings'. :func:`arrivals` simulates one instance (the serving-engine model, open loop, Poisson
arrivals) at shares of that rate and says up to which share the SLA still holds: the utilisation
an autoscaler may run the instance at.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .. import glossary
from ..errors import InputError
from ..records import SLA, VLLM_VERSION, Deployment, EngineSettings, expect_deployment, expect_sla
from ..units import one_value

__all__ = ["SHARES", "arrivals"]

#: Shares of the closed-loop rate simulated under Poisson arrivals.
SHARES = tuple(np.round(np.arange(0.5, 1.0001, 0.05), 2))


def arrivals(
    deployment: Deployment,
    workload: xr.Dataset,
    *,
    sla: SLA,
    per_instance_qps: float,
    requests: int = 4000,
    seed: int = 0,
    settings: EngineSettings | None = None,
    vllm_version: str = VLLM_VERSION,
    calibration=None,
    prefix_hit_rate: float = 0.0,
    kv_cache_tokens: int | None = None,
) -> xr.Dataset:
    """The SLA's quantiles under Poisson arrivals at shares of a closed-loop per-instance rate.

    Parameters
    ----------
    deployment, workload
        The instance and its request lengths, as the plan's engine curve
        (:func:`capnb.capacity.engine_curve_of`): the KV cache vLLM's accounting gives it.
    sla
        The SLA (:class:`capnb.records.SLA`); each of its bounds is read at its quantile.
    per_instance_qps
        The closed loop's requests/s one instance serves within the SLA (requests/s): a number,
        or one cell of :func:`safe_concurrency`'s ``per_instance_qps``.
    requests, seed, settings, vllm_version
        Requests simulated per rate (the first 10 % left out), the seed, the engine's settings
        (None: vLLM V1's defaults) and the vLLM release whose accounting sizes the KV cache.
    calibration
        The engine's (None: the bundled one of the GPU and engine), as the closed loop priced
        ``per_instance_qps`` with: a :func:`capnb.latency.calibrate` of the user's own runs.
    prefix_hit_rate, kv_cache_tokens
        The prefix cache the closed loop priced ``per_instance_qps`` with: the share of prompt
        tokens it serves (1), and the KV cache tokens left to running sequences beside it
        (tokens; None: vLLM's whole KV budget, as without a cache).

    Returns
    -------
    xarray.Dataset
        Over ``share`` (of ``per_instance_qps``, :data:`SHARES`) and ``metric`` (the SLA's
        bounds): ``latency`` (s, at the SLA's quantile), ``meets_sla`` (every bound within), and
        ``headroom`` (the largest share at which it and every lower share meet the SLA; 0 when
        even the lowest does not; 1: the whole closed-loop rate).

    Examples
    --------
    >>> from capnb import latency
    >>> from capnb.records import SLA, Deployment
    >>> w = latency.workload(prompt_tokens=[512] * 4, output_tokens=[128] * 4)
    >>> a = arrivals(Deployment("Llama-3.1-8B", "H100-SXM", 1), w, sla=SLA(ttft_s=1.0, tpot_s=0.05),
    ...              per_instance_qps=20.0, requests=400)
    >>> 0.0 <= float(a.headroom) <= 1.0
    True
    """
    from .. import latency
    from ._engine_sweep import _kv_tokens

    expect_deployment(deployment)
    expect_sla(sla)
    per_instance_qps = one_value(per_instance_qps, "requests/s", "per_instance_qps")
    if (
        isinstance(per_instance_qps, bool)
        or not isinstance(per_instance_qps, int | float | np.floating | np.integer)
        or not math.isfinite(per_instance_qps)
        or per_instance_qps <= 0
    ):
        raise InputError(f"per_instance_qps must be requests/s > 0, got {per_instance_qps!r}")
    seq_len = math.ceil(float((workload.prompt_tokens + workload.output_tokens).mean()))
    kv = kv_cache_tokens
    if kv is None:
        kv = _kv_tokens(deployment.model, deployment.gpu, int(deployment.tensor_parallel), seq_len,
                        vllm_version, kv_dtype=deployment.kv_dtype,
                        weight_dtype=deployment.weight_dtype, settings=settings)  # fmt: skip
    shares = np.array(SHARES)
    curve = latency.engine(
        deployment, workload, request_rate=(shares * float(per_instance_qps)).tolist(),
        requests=requests, seed=seed, settings=settings, kv_cache_tokens=kv,
        calibration=calibration, prefix_hit_rate=prefix_hit_rate,
    )  # fmt: skip
    metrics = list(sla.bounds)
    at = curve.latency.sel(metric=metrics).sel(latency_quantile=sla.quantile, method="nearest")
    values = np.asarray(at.transpose("request_rate", "metric").values, dtype=float)
    bounds = np.array([sla.bounds[m] for m in metrics])
    meets = (values <= bounds[None, :]).all(axis=1)
    held = np.cumprod(meets).astype(bool)  # every lower share meets too
    headroom = float(shares[held][-1]) if held.any() else 0.0
    out = xr.Dataset(
        {
            "latency": (("share", "metric"), values, glossary.attrs("latency")),
            "meets_sla": ("share", meets, glossary.attrs("meets_sla")),
            "headroom": ((), headroom, glossary.attrs("headroom")),
        },
        coords={
            "share": ("share", shares, glossary.attrs("share")),
            "metric": ("metric", metrics, glossary.attrs("metric")),
        },
    )
    out.attrs = {
        "per_instance_qps": float(per_instance_qps),
        "sla": str(sla),
        "arrivals": "Poisson (open loop, capnb.latency.engine)",
        "model": deployment.spec.name,
        "gpu": deployment.gpu,
        "tensor_parallel": int(deployment.tensor_parallel),
        "calibration": str(curve.attrs.get("calibration", "")),
        "kv_cache_tokens": int(kv),  # tokens a GPU, profiled as the server of ``settings`` runs
        "prefix_hit_rate": float(curve.attrs["prefix_hit_rate"]),
    }
    return out

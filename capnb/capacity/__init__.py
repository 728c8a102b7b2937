"""Step 3, capacity: how many requests one instance serves under a P99 latency SLA, and what it costs.

The article's lesson: the safe concurrency of an instance is not what the GPU can hold but the most
it can hold while P99 latency stays under the SLA, and LLM latency grows non-linearly with
concurrency. capnb's rules:

- **safe concurrency** = the largest concurrency whose latency quantile (P99 of the chosen metric) is
  ``<=`` the SLA *and* whose KV cache fits in memory (:func:`capnb.memory.max_concurrency`); the
  article writes ``<``, capnb uses ``<=``. ``binding`` says which limit sets it. Where none
  qualifies the answer is *infeasible*, with the reason: never the article's fallback to 1.
- **per-instance throughput** by Little's law at the best operating point under the SLA: the
  largest ``c / mean e2e latency(c)`` over ``c <= safe`` (past the throughput knee a higher
  concurrency can serve fewer requests/s). The article's naive figure, ``safe x QPS at
  concurrency 1``, is reported beside it (``naive_qps``) with the factor it overstates by.
- **instances** = ``ceil(target_qps / per_instance_qps) + buffer`` (2 by default, the article's
  1-2; or ``ceil(buffer_qps / per_instance_qps)`` from the forecast's burst model); GPUs =
  instances x tensor_parallel; USD per hour, USD per million output tokens and utilisation at the
  target.

Entry points: :func:`safe_concurrency` (the search), :func:`plan` (instances and cost for a curve),
:func:`sweep` (analytic curves over sla x gpu x model x tensor_parallel x seq_len, searched by numba
kernels, with the cheapest option per SLA), :func:`price` (a sweep searched once, priced for each
new target: the search does not depend on it), :func:`cheapest`, :func:`contrast` (plan by maximum
concurrency vs by latency), :func:`describe` and :func:`applicability` (the answer and its limits
in words); :func:`mix` (the cheapest mix of GPU types per slot, a reserved base held all day and
on-demand or spot above it, an integer program solved by scipy's HiGHS); :func:`mix_by_size`
(requests binned by prompt and output length, :func:`size_bins`; each bin's throughput per GPU,
:func:`size_options`; the bins sent to the GPU types where they are cheapest: Mélange's mixed
fleet; :func:`compare_fleets` sets one type, a reserved base and both mixes side by side);
:func:`disaggregate`
(prefill and decode on separate pools: a plan per pool over the slots against the aggregated plan)
and :func:`pd_ratio` (each prefill:decode ratio of a fixed fleet in a closed loop, and the best),
from :func:`pool_curves` (the engine per pool) and :func:`kv_transfer_s`; :func:`prefix_trade`
(each share of the KV budget given to a prefix cache: the hit rate replayed from the trace, the
engine at that hit rate with the rest of the budget, and the requests/s per instance under the SLA);
:func:`arrivals` (an instance under Poisson arrivals at shares of its closed-loop rate: up to
which share the SLA holds); :func:`sweep_engine` (:func:`plan` on a serving-engine curve for
every GPU and degree, with an
optional prefix cache: what the plan uses with ``latency = "engine"``), :func:`engine_curve_of`
(the curve it searches for one deployment); :func:`band` (an answer's
requests/s per instance and instances if the latency model errs as it did on held-out
measurements: ``plan(..., latency_band=...)``).
"""

from __future__ import annotations

from ..records import SLA, Deployment, EngineSettings
from ._answer import applicability, contrast, describe
from ._arrivals import arrivals
from ._band import band, band_ratios, scaled_sla
from ._disagg import POOL_ENGINE, POOLS, disaggregate, kv_transfer_s, pd_ratio, pool_curves
from ._engine_sweep import engine_curve_of, sweep_engine
from ._mix import mix
from ._mix_size import compare_fleets, mix_by_size, size_bins, size_options
from ._prefix import prefix_trade
from ._safe import BINDING, FEASIBLE, fleet, instances, plan, safe_concurrency
from ._sweep import band_cheapest, cheapest, price, sweep

__all__ = [
    "BINDING",
    "FEASIBLE",
    "POOLS",
    "POOL_ENGINE",
    "SLA",
    "Deployment",
    "EngineSettings",
    "applicability",
    "arrivals",
    "band",
    "band_cheapest",
    "band_ratios",
    "cheapest",
    "compare_fleets",
    "contrast",
    "describe",
    "disaggregate",
    "engine_curve_of",
    "fleet",
    "instances",
    "kv_transfer_s",
    "mix",
    "mix_by_size",
    "pd_ratio",
    "plan",
    "pool_curves",
    "prefix_trade",
    "price",
    "safe_concurrency",
    "scaled_sla",
    "size_bins",
    "size_options",
    "sweep",
    "sweep_engine",
]

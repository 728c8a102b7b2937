"""The one glossary of capnb: dimension names, variable names, their units and long names.

Every Dataset that capnb returns uses these names, and every variable carries the ``units`` and
``long_name`` written here (see :func:`attrs`). The docs' glossary page is rendered from this
table when the site is built, so the two cannot drift apart.

Units are plain strings that a reader understands without a units library: ``bytes``, ``s``,
``requests/s``, ``tokens/s``, ``instances``, ``USD/hour``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = [
    "DIMS",
    "HOURS_PER_MONTH",
    "RETIRED",
    "VARIABLES",
    "Term",
    "attrs",
    "describe",
    "unit_registry",
    "unit_strings",
]

#: Hours in a month, 8,760 / 12: every monthly figure capnb gives (cost, breach minutes) uses it.
HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class Term:
    """One glossary entry: a name, its units and a one-line meaning."""

    name: str
    units: str
    long_name: str


def _table(*rows: tuple[str, str, str]) -> dict[str, Term]:
    return {name: Term(name, units, long_name) for name, units, long_name in rows}


#: Dimensions (and their coordinates).
DIMS: dict[str, Term] = _table(
    ("model", "1", "model catalog id (e.g. Llama-3.1-8B)"),
    ("gpu", "1", "GPU profile catalog id (e.g. H100-SXM)"),
    ("tensor_parallel", "GPUs", "tensor-parallel degree: GPUs that share one model replica"),
    ("concurrency", "requests", "requests in flight on one instance"),
    ("request_rate", "requests/s", "requests arriving at one instance (open loop), per second"),
    ("seq_len", "tokens", "tokens held per sequence (prompt + output)"),
    ("sla", "s", "latency service-level objective"),
    ("latency_quantile", "1", "quantile of the per-request latency distribution"),
    ("traffic_quantile", "1", "quantile of the per-interval request rate within a slot"),
    ("metric", "1", "latency metric: ttft, tpot, itl or e2e"),
    (
        "time",
        "datetime64",
        "time of the interval start on the trace's own clock (attrs say what is known)",
    ),
    ("slot", "1", "seasonal slot: hour_of_day 0-23, or hour_of_week 0-167 with Monday 00:00 = 0"),
    ("trial", "1", "Monte Carlo trial"),
    ("request", "1", "one request of a request log"),
    (
        "plan",
        "1",
        "plan compared: a forecast's rule (the mean, or a traffic quantile per slot), a fleet "
        "plan replayed on a score window (capnb.plan.backtest), or a sizing rule "
        "(max_concurrency, latency: capnb.capacity.contrast)",
    ),
    ("burst", "1", "one detected burst"),
    ("capacity_qps", "requests/s", "capacity level of an exceedance curve"),
    ("scale_up_threshold", "1", "load ratio above which the autoscaler adds instances"),
    ("cooldown_s", "s", "time load must stay low before the autoscaler removes an instance"),
    ("cold_start_s", "s", "time from the decision to start an instance until it serves"),
    ("min_instances", "instances", "fewest instances the autoscaler keeps"),
    ("buffer_instances", "instances", "instances held above the computed need for bursts"),
    (
        "policy",
        "1",
        "autoscaling policy: article, hpa, knative, fixed, fixed_elastic or predictive",
    ),
    ("block", "1", "one prefix block of a request's prompt (a block hash of the request log)"),
    ("cache_tokens", "tokens", "size of a prefix cache"),
    ("cache_share", "1", "share of the KV cache budget held by the prefix cache"),
    ("size_bin", "1", "a bin of requests by prompt and output length"),
    ("fleet", "1", "one way to buy the fleet: pricing and the GPU types it mixes"),
    ("routing", "1", "how requests reach instances: random, round_robin or prefix_aware"),
    ("instance", "1", "one instance of a fleet"),
    (
        "pool",
        "1",
        "one group of identical instances: a GPU type and tensor-parallel degree of a mixed "
        "fleet, or the prefill or decode stage of disaggregated serving",
    ),
    (
        "serving_pool",
        "1",
        "inside a plan, the pool dim of its prefill/decode comparison (the mix's pools hold pool)",
    ),
    ("pricing", "1", "price kind: on_demand, reserved_1y, reserved_3y, reserved or spot"),
    ("ratio", "1", "prefill:decode instances of a disaggregated fleet, as P:D"),
    ("stage", "1", "a stage of a disaggregated request's TTFT: decode_prealloc ... decode_poll"),
    (
        "serving",
        "1",
        "serving mode: aggregated (prefill and decode on one instance) or disaggregated",
    ),
    ("share", "1", "Poisson arrival rate as a share of the closed-loop per_instance_qps"),
)

#: Variables (data_vars and non-index coordinates).
VARIABLES: dict[str, Term] = _table(
    # memory
    ("weights_bytes", "bytes", "model weights held on one GPU"),
    ("kv_cache_bytes", "bytes", "KV cache held on one GPU"),
    ("headroom_bytes", "bytes", "reserve for activations, fragmentation and runtime on one GPU"),
    ("total_bytes", "bytes", "memory needed on one GPU: weights + KV cache + headroom"),
    ("capacity_bytes", "bytes", "memory of one GPU as listed in the GPU catalog"),
    ("usable_bytes", "bytes", "share of the GPU's memory the accounting lets the runtime use"),
    ("kv_bytes_per_token", "bytes", "KV cache per token held on one GPU"),
    ("fits", "1", "whether total_bytes <= usable_bytes"),
    ("max_concurrency", "requests", "largest concurrency that fits in memory (0: none fits)"),
    ("limit_reason", "1", "why max_concurrency is what it is"),
    ("min_tensor_parallel", "GPUs", "smallest tensor-parallel degree whose weights fit (0: none)"),
    # model and GPU profiles
    ("parameters", "1", "parameter count"),
    ("active_parameters", "1", "parameters used per token (MoE: routed experts only)"),
    ("memory_bytes", "bytes", "GPU memory"),
    ("hbm_bandwidth", "bytes/s", "GPU memory bandwidth"),
    ("dense_bf16_flops", "FLOP/s", "dense BF16 tensor throughput"),
    ("dense_fp8_flops", "FLOP/s", "dense FP8 tensor throughput"),
    ("interconnect_bandwidth", "bytes/s", "GPU-to-GPU bandwidth within a node, one direction"),
    ("usd_per_gpu_hour", "USD/hour", "on-demand price of one GPU"),
    # capacity
    ("latency", "s", "request latency"),
    (
        "safe_concurrency",
        "requests",
        "largest concurrency with latency quantile <= SLA and memory fit",
    ),
    ("per_instance_qps", "requests/s", "requests per second one instance serves under the SLA"),
    ("instances", "instances", "instances needed"),
    (
        "fixed_instances",
        "instances",
        "instances the target itself needs: ceil(target_qps / per_instance_qps)",
    ),
    (
        "burst_instances",
        "instances",
        "instances above the fixed ones for bursts (the elastic buffer)",
    ),
    ("feasible_options", "1", "options (GPU and tensor-parallel degree) that meet the SLA"),
    ("gpus", "GPUs", "GPUs needed: instances x tensor_parallel"),
    ("usd_per_hour", "USD/hour", "cost per hour"),
    ("usd_per_million_tokens", "USD/Mtoken", "cost per million output tokens"),
    ("mean_latency", "s", "mean request latency"),
    ("measured_qps", "requests/s", "request throughput the benchmark reported"),
    ("binding", "1", "what sets safe_concurrency (latency, memory, measured_range) or blocks it"),
    (
        "binding_metric",
        "1",
        "the latency bound of the SLA that sets safe_concurrency (ttft, tpot, itl, e2e; '' when "
        "latency does not bind)",
    ),
    ("operating_concurrency", "requests", "concurrency of the highest throughput under the SLA"),
    ("latency_at_safe", "s", "latency quantile at the safe concurrency"),
    ("latency_floor", "s", "latency quantile at the curve's first concurrency"),
    ("naive_qps", "requests/s", "the article's figure: safe concurrency x QPS at concurrency 1"),
    ("overstatement", "1", "naive_qps / per_instance_qps"),
    (
        "headroom",
        "1",
        "share of the closed-loop per_instance_qps up to which the SLA holds under Poisson "
        "arrivals (capnb.capacity.arrivals)",
    ),
    ("utilisation", "1", "share of the planned capacity the target uses"),
    ("compute_utilisation", "1", "share of the GPUs' dense FLOP/s in use at the operating point"),
    ("cheapest_gpu", "1", "GPU profile of the cheapest plan"),
    ("cheapest_tensor_parallel", "GPUs", "tensor-parallel degree of the cheapest plan"),
    ("cheapest_usd_per_hour", "USD/hour", "cost per hour of the cheapest plan"),
    ("runner_up_gpu", "1", "GPU profile of the second-cheapest plan"),
    ("runner_up_tensor_parallel", "GPUs", "tensor-parallel degree of the second-cheapest plan"),
    ("runner_up_usd_per_hour", "USD/hour", "cost per hour of the second-cheapest plan"),
    ("cost_gap", "USD/hour", "runner-up cost minus cheapest cost"),
    (
        "unpriced_options",
        "1",
        "options (TP x GPU) that meet the SLA but have no price, so are not ranked",
    ),
    # forecast
    ("qps", "requests/s", "request rate"),
    ("target_qps", "requests/s", "request rate a plan must serve"),
    ("buffer_qps", "requests/s", "request rate an elastic buffer must absorb"),
    (
        "forecast_qps",
        "requests/s",
        "forecast request rate of the step's slot at a traffic quantile (attrs: quantile)",
    ),
    ("prompt_tokens", "tokens", "prompt tokens"),
    ("output_tokens", "tokens", "generated tokens"),
    ("exceed_probability", "1", "probability that demand exceeds capacity_qps in a month"),
    ("minutes_above", "min/month", "expected minutes per month with demand above capacity_qps"),
    ("requests", "requests", "requests arriving in the interval"),
    ("mean_qps", "requests/s", "mean request rate"),
    ("mean_plan_qps", "requests/s", "request rate a plan at the historical mean provides"),
    ("shortfall_qps", "requests/s", "how far a plan at the mean falls below target_qps"),
    ("shortfall_fraction", "1", "share of target_qps that a plan at the mean leaves uncovered"),
    ("underprovisioned_share", "1", "share of intervals whose demand exceeds the mean plan"),
    ("intervals", "1", "observed (non-missing) intervals"),
    ("periods", "1", "distinct days or weeks in which the slot was observed"),
    ("peak_to_trough", "1", "busiest slot's mean rate over the quietest slot's"),
    ("peak_to_mean", "1", "busiest slot's mean rate over the overall mean rate"),
    ("monthly_peak_qps", "requests/s", "highest one-minute request rate of a simulated month"),
    (
        "required_qps",
        "requests/s",
        "capacity whose monthly exceedance probability is the chosen one",
    ),
    ("in_burst", "1", "whether the interval belongs to a detected burst"),
    ("burst_start", "datetime64", "first interval of a burst"),
    ("duration_s", "s", "burst duration"),
    ("peak_qps", "requests/s", "highest request rate in a burst"),
    (
        "multiplier",
        "1",
        "a burst's mean request rate over the slot baseline outside bursts (its factor in the "
        "Monte Carlo)",
    ),
    ("peak_multiplier", "1", "a burst's highest request rate over its slot's median"),
    ("coverage", "1", "share of scored intervals whose demand the plan covers"),
    ("overprovision_fraction", "1", "capacity the plan holds above demand, over mean demand"),
    ("unserved_fraction", "1", "demand above the plan, over mean demand"),
    ("overall_qps", "requests/s", "quantile of the request rate over all intervals pooled"),
    ("overall_shortfall_fraction", "1", "share of overall_qps a plan at the mean leaves uncovered"),
    ("overall_underprovisioned_share", "1", "share of all intervals above the mean plan"),
    ("trend_per_day", "1/day", "relative growth of the daily mean request rate per day"),
    # elasticity
    ("ready_instances", "instances", "instances serving"),
    ("starting_instances", "instances", "instances in cold start"),
    ("backlog", "requests", "requests waiting to be served"),
    ("served", "requests", "requests served"),
    ("dropped", "requests", "requests dropped past the latency tolerance"),
    ("breach_s", "s", "time in SLA breach"),
    ("gpu_hours", "GPU·h", "GPU time"),
    (
        "preempted",
        "instances",
        "ready instances lost to (spot) preemption, replaced as the policy decides",
    ),
    (
        "spot_gpu_hours",
        "GPU·h",
        "GPU-hours priced at spot: the planned spot share of the elastic part",
    ),
    ("scale_events", "1", "scale-up plus scale-down decisions carried out"),
    ("ready_capacity_qps", "requests/s", "requests per second the ready instances can serve"),
    ("served_in_step", "requests", "requests served in the step"),
    ("dropped_in_step", "requests", "requests dropped in the step, past the latency tolerance"),
    ("breach", "1", "whether the step is in SLA breach: backlog + arrivals above ready capacity"),
    ("arrivals", "requests", "requests that arrived"),
    ("late", "requests", "requests served after the step they arrived in"),
    ("unserved", "requests", "requests dropped or still waiting at the end"),
    ("unserved_share", "1", "unserved over arrivals"),
    ("late_share", "1", "late over arrivals"),
    ("breach_share", "1", "share of the time in SLA breach"),
    ("dropping_s", "s", "time during which requests were dropped"),
    ("peak_backlog", "requests", "largest backlog at the end of a step"),
    ("cold_start_gpu_hours", "GPU·h", "GPU time spent in cold starts"),
    (
        "wasted_cold_start_gpu_hours",
        "GPU·h",
        "cold-start GPU time of instances cancelled, or stopped soon after becoming ready",
    ),
    ("usd", "USD", "cost over the simulated span"),
    ("scale_up_events", "1", "scale-up decisions carried out"),
    ("scale_down_events", "1", "scale-down decisions carried out"),
    ("instances_started", "instances", "instances started"),
    ("thrash", "instances", "instances stopped within thrash_window_s of becoming ready"),
    ("cancelled_starts", "instances", "instances stopped before their cold start ended"),
    ("peak_instances", "instances", "largest fleet, ready plus starting"),
    ("mean_instances", "instances", "mean fleet, ready plus starting"),
    ("ready_utilisation", "1", "requests served over the ready instances' capacity"),
    ("vetoed_scale_ups", "1", "article's policy: evaluations whose scale-up the cold start vetoed"),
    ("panic_s", "s", "Knative: time in panic mode"),
    ("pareto", "1", "whether the run is on the cost vs SLA-breach Pareto front"),
    # the replay's advisory view (capnb.elasticity.advise)
    ("scale_events_per_hour", "1/hour", "steps where the policy's pool changes, per hour"),
    ("reversals", "1", "scale events reversing the one before within the window (flapping)"),
    ("reversals_per_day", "1/day", "reversals per day of the run"),
    ("flapping", "1", "whether the reversals per day (under a day: in all) exceed the limit"),
    ("above_need_s", "s", "time the pool holds more than the largest need of its hold window"),
    ("above_need_share", "1", "share of the time the pool is above the need it may hold"),
    ("excess_instance_hours", "instance·h", "instance time above the need the pool may hold"),
    ("cold_starts", "instances", "instances started: each pays a cold start"),
    ("cold_starts_per_day", "instances/day", "instances started per day of the run"),
    ("model_bytes", "bytes", "model weights, whole model"),
    ("provisioning_s", "s", "node provisioning before the model download"),
    ("download_s", "s", "weight download"),
    ("load_s", "s", "weight load into GPU memory"),
    ("engine_init_s", "s", "serving engine start-up"),
    ("warm_up_s", "s", "warm-up inference before taking traffic"),
    # prefix caching and mixed fleets
    ("block_hash", "1", "hash of a prompt block (equal hashes: equal prompts to its end)"),
    ("block_start", "1", "index of a request's first block along dim block"),
    ("block_prompt_tokens", "tokens", "prompt tokens a block holds"),
    ("prefix_hit_rate", "1", "share of prompt tokens served from the prefix cache"),
    ("hit_tokens", "tokens", "prompt tokens served from the prefix cache"),
    ("instance_requests", "requests", "requests the routing sends to the instance"),
    ("load_imbalance", "1", "busiest instance's prompt tokens over the mean instance's"),
    ("prefix_cache_tokens", "tokens", "KV cache tokens held by the prefix cache"),
    ("running_tokens", "tokens", "KV cache tokens left for running sequences"),
    ("profiled_sequences", "requests", "sequences vLLM V1's profile run sizes the KV cache at"),
    ("prefill_share", "1", "share of prompt tokens still computed: 1 - prefix_hit_rate"),
    ("reserved_instances", "instances", "instances on reserved or committed pricing, every slot"),
    ("on_demand_instances", "instances", "instances on on-demand pricing in the slot"),
    ("spot_instances", "instances", "instances on spot pricing in the slot"),
    ("served_qps", "requests/s", "requests per second the slot's fleet serves (spot discounted)"),
    ("size_bin_index", "1", "the request's size bin, an index along size_bin"),
    ("request_share", "1", "share of the requests in the size bin"),
    ("saving", "1", "cost saved against the first fleet of the same latency curves"),
    ("curves", "1", "latency curves the fleet is sized on: whole workload, or per size bin"),
    ("pools", "1", "the pools (GPU and tensor-parallel degree) the fleet holds"),
    # disaggregated serving (prefill and decode pools)
    ("instance_qps", "requests/s", "requests per second one instance completes (simulated)"),
    ("pool_tensor_parallel", "GPUs", "tensor-parallel degree of the pool's instances"),
    ("pool_concurrency", "requests", "requests in flight on one instance of the pool"),
    ("fleet_qps", "requests/s", "requests per second the whole fleet completes"),
    ("output_tokens_per_gpu", "tokens/s", "output tokens per second per GPU of the fleet"),
    ("meets_sla", "1", "whether the latency quantiles are within every SLA"),
    ("bottleneck", "1", "stage whose queue holds most of TTFT: prefill, transfer, handoff, decode"),
    ("ttft_median", "s", "median TTFT over the simulated requests"),
    ("ttft_stages", "s", "mean seconds of each stage of TTFT: queues, prefill, transfer, a step"),
    (
        "kv_transfer_s",
        "s",
        "time to move the KV cache of a prompt at the SLA's quantile of prompt lengths from "
        "prefill to decode",
    ),
    (
        "simulated_latency",
        "s",
        "latency quantile simulated per request over the whole fleet (over 20 instances at the "
        "default 1,000 requests: a share of it at the same requests/s per instance)",
    ),
    ("best_ratio", "1", "the P:D ratio with the most output tokens/s per GPU within the SLA"),
    ("best_reason", "1", "why best_ratio is what it is, in numbers"),
    ("serving_reason", "1", "why the serving mode is chosen, feasible or not, in numbers"),
    ("pd_ratio", "1", "prefill instances per decode instance"),
)


#: Names capnb used for a quantity that now has one name: the old name, where it was, the name now.
RETIRED: tuple[tuple[str, str, str], ...] = (
    (
        "sla_s",
        "plan config, CLI --sla",
        "[sla] ttft_s / tpot_s / itl_s / e2e_s (capnb.records.SLA)",
    ),
    ("sla_metric", "plan config, CLI --sla-metric", "the metric in the bound's name (tpot_s)"),
    ("sla_quantile", "plan config, CLI --sla-quantile", "[sla] quantile"),
    ("disaggregation_sla_s", "plan config", "the SLA's own ttft_s and tpot_s"),
    ("sla_ttft, sla_tpot", "capacity.pd_ratio, capacity.disaggregate", "sla (an SLA record)"),
    ("sla_s", "capacity.prefix_trade, capacity.sweep_engine", "sla"),
    ("recommendation, monthly_usd, ...", "plan attrs", "capnb.plan.answer(plan) fields"),
)


def attrs(name: str, **extra: object) -> dict[str, object]:
    """Return the ``units`` and ``long_name`` attrs of a glossary name.

    Parameters
    ----------
    name
        A dimension or variable name from :data:`DIMS` or :data:`VARIABLES`.
    **extra
        More attrs to add (for example ``accounting="vllm"``).

    Examples
    --------
    >>> attrs("total_bytes")["units"]
    'bytes'
    """
    term = VARIABLES.get(name) or DIMS.get(name)
    if term is None:
        raise KeyError(f"{name!r} is not in capnb's glossary (capnb.glossary)")
    return {"units": term.units, "long_name": term.long_name, **extra}


#: Units that are not quantities: a time coordinate holds numpy datetimes.
NOT_QUANTITIES = frozenset({"datetime64"})


@functools.cache
def unit_strings() -> frozenset[str]:
    """Every unit string of the glossary's dims and variables that is a quantity (pint reads each)."""
    return frozenset(t.units for t in (*DIMS.values(), *VARIABLES.values())) - NOT_QUANTITIES


@functools.cache
def unit_registry():
    """A pint ``UnitRegistry`` that reads every unit string of this glossary.

    The glossary's units stay plain strings a reader understands; this registry lets a machine
    read them too. It adds capnb's counting units to pint's defaults, each its own dimension so that
    requests never convert to tokens: ``request``, ``instance``, ``GPU``, ``token`` (``Mtoken`` is
    pint's mega prefix on it), ``USD`` and ``FLOP``; and reads ``GPU·h`` as ``GPU * h``.

    Returns
    -------
    pint.UnitRegistry
        The registry (one per process: the call is cached).

    Examples
    --------
    >>> ureg = unit_registry()
    >>> (ureg("requests/s") * ureg("30 s")).to("request")
    <Quantity(30.0, 'request')>
    >>> str((ureg("2 GPU") * ureg("3 USD/GPU/hour") * ureg("730 h")).to("USD"))
    '4380.0 USD'
    """
    import pint

    registry = pint.UnitRegistry(preprocessors=[lambda text: text.replace("·", "*")])
    for line in (
        "request = [request]",
        "instance = [instance]",
        "GPU = [gpu]",
        "token = [token]",
        "USD = [currency]",
        "FLOP = [flop]",
    ):
        registry.define(line)
    return registry


def describe() -> str:
    """Return the glossary as a Markdown table (the docs' glossary page renders it)."""
    lines = ["| name | kind | units | meaning |", "|---|---|---|---|"]
    for kind, table in (("dim", DIMS), ("variable", VARIABLES)):
        lines += [f"| `{t.name}` | {kind} | {t.units} | {t.long_name} |" for t in table.values()]
    lines += ["", "Names retired (one name per quantity):", "",
              "| old name | where | the name now |", "|---|---|---|"]  # fmt: skip
    lines += [f"| `{old}` | {where} | {now} |" for old, where, now in RETIRED]
    return "\n".join(lines)


if __name__ == "__main__":  # `python -m capnb.glossary` prints the docs' glossary table
    print(describe())

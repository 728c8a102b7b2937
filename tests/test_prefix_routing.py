"""Prefix caching under routing: N instances, each its own LRU cache, the log split by routing.

The routing kernels against plain Python (a bisect ring, splitmix64 on Python ints), and the hit
rates against an OrderedDict LRU replayed per instance.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.reference.prefix import (
    consistent_route_python,
    lru_hit_tokens_python,
    mix64_python,
)
from capnb import memory
from capnb.data import load_block_hashes
from capnb.errors import InputError
from capnb.kernels import prefix


@pytest.fixture(scope="module")
def blocks():
    return load_block_hashes()


def test_mix64_matches_python_ints():
    values = np.array([0, 1, 2, 2**63, 2**64 - 1, 123456789], dtype=np.uint64)
    assert prefix.mix64(values).tolist() == [mix64_python(int(v)) for v in values]


@pytest.mark.parametrize(("instances", "first"), [(1, 1), (5, 1), (32, 2), (7, 3)])
def test_consistent_routing_matches_a_plain_ring(blocks, instances, first):
    head = 600
    starts = blocks.block_start.values[: head + 1]
    hashes = blocks.block_hash.values
    requests = [hashes[starts[i] : starts[i + 1]].tolist() for i in range(head)]
    keys = prefix.prefix_keys(hashes[: starts[head]], starts, first)
    points, owners = prefix.ring(instances, 16, 3)
    got = prefix.route_consistent(keys, points, owners).tolist()
    assert got == consistent_route_python(requests, instances, 16, 3, first)


def test_a_prefix_always_meets_on_one_instance_and_instances_share_the_ring(blocks):
    owner = memory._prefix.route(blocks, 16, "prefix_aware")
    first = blocks.block_hash.values[blocks.block_start.values]
    for h in np.unique(first)[:200]:
        assert np.unique(owner[first == h]).size == 1
    assert np.unique(owner).size == 16  # every instance gets requests


@pytest.mark.parametrize("routing", memory.ROUTINGS)
def test_each_instances_hit_rate_is_an_lru_replay_of_its_own_requests(blocks, routing):
    head = 800
    stop = int(blocks.block_start[head])
    part = blocks.isel(request=slice(0, head), block=slice(0, stop)).assign_attrs(blocks.attrs)
    cache = 40 * 512
    ds = memory.prefix_routing(part, instances=6, cache_tokens=[cache], routing=routing)
    owner = memory._prefix.route(part, 6, routing)
    starts = np.append(part.block_start.values, stop)
    hashes, held = part.block_hash.values, part.block_prompt_tokens.values
    total_hit = 0
    for j in range(6):
        mine = np.flatnonzero(owner == j)
        requests = [(hashes[starts[r] : starts[r + 1]].tolist(), held[starts[r] : starts[r + 1]].tolist())
                    for r in mine]  # fmt: skip
        hit = lru_hit_tokens_python(requests, 40)
        tokens = sum(sum(t) for _, t in requests)
        assert float(ds.instance_hit_rate.sel(routing=routing, instance=j).item()) == pytest.approx(
            hit / tokens
        )
        assert int(ds.instance_requests.sel(routing=routing, instance=j)) == mine.size
        total_hit += hit
    assert float(ds.prefix_hit_rate.sel(routing=routing).item()) == pytest.approx(
        total_hit / held.sum()
    )


def test_one_instance_is_the_whole_log_and_the_fleet_never_beats_an_unbounded_cache(blocks):
    sizes = [250_000, 1_000_000, 4_000_000]
    one = memory.prefix_routing(blocks, instances=1, cache_tokens=sizes)
    base = memory.prefix_hit_rate(blocks, cache_tokens=sizes).prefix_hit_rate.values
    for routing in memory.ROUTINGS:
        np.testing.assert_allclose(one.prefix_hit_rate.sel(routing=routing).values, base)
    most = memory.prefix_hit_rate(blocks, cache_tokens=[10**12]).attrs["max_prefix_hit_rate"]
    fleet = memory.prefix_routing(blocks, instances=64, cache_tokens=sizes)
    assert (fleet.prefix_hit_rate.values <= most + 1e-12).all()
    # spread at random or in turn, 64 caches of 1M tokens hit less than one; kept together by
    # prefix, they reach every hit an unbounded cache would
    at = {"cache_tokens": 1_000_000}
    assert float(fleet.prefix_hit_rate.sel(routing="random", **at)) < float(base[1])
    assert float(fleet.prefix_hit_rate.sel(routing="round_robin", **at)) < float(base[1])
    assert float(fleet.prefix_hit_rate.sel(routing="prefix_aware", **at)) == pytest.approx(most)
    # ... at a cost in balance: the busiest instance's prompt tokens over the mean
    assert float(fleet.load_imbalance.sel(routing="prefix_aware")) > float(
        fleet.load_imbalance.sel(routing="round_robin")
    )


def test_prefix_hit_rate_states_the_routing_it_assumes(blocks):
    alone = memory.prefix_hit_rate(blocks, cache_tokens=[1_000_000])
    assert (
        alone.attrs["routing"] == "one instance"
        and "one instance" in alone.attrs["routing_assumed"]
    )
    fleet = memory.prefix_hit_rate(blocks, cache_tokens=[1_000_000], instances=64, routing="random")
    assert (
        fleet.attrs["routing_assumed"].startswith("random routing")
        and "64 instances" in (fleet.attrs["routing_assumed"])
    )
    routed = memory.prefix_routing(blocks, instances=64, cache_tokens=[1_000_000], routing="random")
    assert float(fleet.prefix_hit_rate.item()) == pytest.approx(
        float(routed.prefix_hit_rate.item())
    )
    # the same seed gives the same answer
    again = memory.prefix_hit_rate(blocks, cache_tokens=[1_000_000], instances=64, routing="random")
    assert float(again.prefix_hit_rate.item()) == float(fleet.prefix_hit_rate.item())


def test_a_fleet_s_hit_rate_says_how_unevenly_its_routing_loads_the_instances(blocks):
    # found on my own log, whose long documents all begin with one system prompt: prefix-aware
    # routing over 4 instances gave the best hit rate (0.60 against 0.54 random) while sending
    # 3.3x the mean prompt tokens to one instance, which prefix_hit_rate did not say
    routed = memory.prefix_routing(blocks, instances=4, cache_tokens=[1_000_000])
    for name in ("random", "round_robin", "prefix_aware"):
        fleet = memory.prefix_hit_rate(blocks, cache_tokens=[1_000_000], instances=4, routing=name)
        assert fleet.attrs["load_imbalance"] == pytest.approx(
            float(routed.load_imbalance.sel(routing=name))
        )
    assert memory.prefix_hit_rate(blocks, cache_tokens=[10]).attrs["load_imbalance"] == 1.0


def test_bad_routing_arguments_name_themselves(blocks):
    with pytest.raises(InputError, match="routing='sticky'"):
        memory.prefix_routing(blocks, instances=4, cache_tokens=[10], routing="sticky")
    with pytest.raises(InputError, match="instances"):
        memory.prefix_routing(blocks, instances=0, cache_tokens=[10])
    with pytest.raises(InputError, match="cache_tokens"):
        memory.prefix_routing(blocks, instances=2, cache_tokens=[-1])


def test_one_instance_still_checks_the_routing_arguments(blocks):
    # one instance needs no routing, but a typo in it was accepted there and refused at two
    with pytest.raises(InputError, match="routing='round-robin'"):
        memory.prefix_hit_rate(blocks, cache_tokens=[10], routing="round-robin")
    with pytest.raises(InputError, match="prefix_blocks"):
        memory.prefix_hit_rate(blocks, cache_tokens=[10], prefix_blocks=0)
    with pytest.raises(InputError, match="seed"):
        memory.prefix_hit_rate(blocks, cache_tokens=[10], seed=-1)


def test_prefix_routing_needs_distinct_routings(blocks):
    # an empty list was numpy's bare 'need at least one array to stack'; a repeat gave two
    # rows of one routing under one label
    with pytest.raises(InputError, match="routing"):
        memory.prefix_routing(blocks, instances=2, cache_tokens=[10], routing=[])
    with pytest.raises(InputError, match="routing.*twice"):
        memory.prefix_routing(blocks, instances=2, cache_tokens=[10], routing=["random", "random"])

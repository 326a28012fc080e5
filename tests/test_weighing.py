"""Host weighing as Nova weighs hosts: normalisation, multipliers, pack and spread, ties."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from berth.domain.capacity import Inventory, headroom
from berth.domain.weighing import (
    HostFacts,
    Multipliers,
    best_first,
    free_amount,
    host_facts,
    multipliers_for,
    normalise,
    weigh,
)
from berth.domain.weighing_arrays import best_first_of, first_best_of

ONLY_RAM = Multipliers(ram=1.0, cpu=0.0, disk=0.0, instances=0.0)


def test_normalise_maps_lowest_to_zero_and_highest_to_one():
    assert normalise([10.0, 30.0, 20.0]) == [0.0, 1.0, 0.5]
    assert normalise([-5.0, 5.0]) == [0.0, 1.0]


def test_normalise_gives_zero_to_all_when_equal_and_nothing_for_nothing():
    assert normalise([7.0, 7.0, 7.0]) == [0.0, 0.0, 0.0]
    assert normalise([]) == []


def test_each_weigher_is_normalised_before_its_multiplier_applies():
    # RAM in MB and CPUs in units differ by three orders of magnitude; after normalisation each
    # weigher counts by its multiplier alone.
    hosts = [
        HostFacts(free_ram_mb=1000, free_cpus=4),
        HostFacts(free_ram_mb=3000, free_cpus=2),
        HostFacts(free_ram_mb=2000, free_cpus=0),
    ]
    weights = weigh(hosts, Multipliers(ram=1.0, cpu=2.0, disk=0.0, instances=0.0))
    assert weights == pytest.approx([0.0 + 2.0 * 1.0, 1.0 + 2.0 * 0.5, 0.5 + 0.0])


def test_a_multiplier_scales_its_weigher_and_zero_switches_it_off():
    hosts = [HostFacts(free_ram_mb=1000, free_disk_gb=50), HostFacts(free_ram_mb=2000, free_disk_gb=10)]
    assert weigh(hosts, ONLY_RAM) == [0.0, 1.0]
    assert weigh(hosts, Multipliers(ram=3.0, cpu=0.0, disk=0.0)) == [0.0, 3.0]
    assert weigh(hosts, Multipliers(ram=0.0, cpu=0.0, disk=1.0)) == [1.0, 0.0]


def test_spread_prefers_the_freest_host_and_pack_the_fullest():
    hosts = [
        HostFacts(free_ram_mb=8192, free_cpus=8, free_disk_gb=100),
        HostFacts(free_ram_mb=1024, free_cpus=1, free_disk_gb=10),
        HostFacts(free_ram_mb=4096, free_cpus=4, free_disk_gb=50),
    ]
    spread = weigh(hosts, multipliers_for("spread"))
    pack = weigh(hosts, multipliers_for("pack"))
    assert max(range(3), key=spread.__getitem__) == 0
    assert max(range(3), key=pack.__getitem__) == 1
    assert spread[0] == pytest.approx(3.0) and pack[1] == pytest.approx(0.0) and pack[0] == pytest.approx(-3.0)


def test_the_instances_weigher_counts_consumers_with_nova_sign():
    hosts = [HostFacts(instances=5), HostFacts(instances=1)]
    busier = Multipliers(ram=0.0, cpu=0.0, disk=0.0, instances=1.0)
    quieter = Multipliers(ram=0.0, cpu=0.0, disk=0.0, instances=-1.0)
    assert weigh(hosts, busier) == [1.0, 0.0]
    assert weigh(hosts, quieter) == [-1.0, 0.0]


def test_soft_group_weighers_count_members_only_under_their_policy():
    hosts = [HostFacts(group_members=2), HostFacts(group_members=0)]
    none = Multipliers(ram=0.0, cpu=0.0, disk=0.0)
    assert weigh(hosts, none) == [0.0, 0.0]
    assert weigh(hosts, none, "soft-affinity") == [1.0, 0.0]
    assert weigh(hosts, none, "soft-anti-affinity") == [0.0, 1.0]
    assert weigh(hosts, Multipliers(ram=0.0, cpu=0.0, disk=0.0, soft_anti_affinity=2.5), "soft-anti-affinity") == [
        0.0,
        2.5,
    ]


def test_policy_defaults_are_overridden_by_name():
    assert multipliers_for("spread") == Multipliers()
    assert multipliers_for("pack", {"ram": 2.0}) == Multipliers(ram=2.0, cpu=-1.0, disk=-1.0)
    with pytest.raises(ValueError, match="bogus"):
        multipliers_for("spread", {"bogus": 1.0})


def test_free_amounts_are_counted_as_nova_counts_them():
    # CPUs: total x ratio - reserved - used; RAM and disk ignore the allocation ratio.
    assert free_amount("VCPU", Inventory(total=8, reserved=1, allocation_ratio=4.0), 10) == 8 * 4.0 - 1 - 10
    assert free_amount("PCPU", Inventory(total=4), 1) == 3
    assert free_amount("MEMORY_MB", Inventory(total=8192, reserved=512, allocation_ratio=1.5), 1024) == 6656
    assert free_amount("DISK_GB", Inventory(total=100, reserved=10, allocation_ratio=2.0), 30) == 60


def test_free_amounts_differ_from_the_capacity_rules_headroom_where_nova_counts_otherwise():
    # The rule over-commits (total - reserved); Nova's weighers over-commit CPUs only, and by total.
    cpus = Inventory(total=8, reserved=1, allocation_ratio=4.0)
    ram = Inventory(total=8192, reserved=512, allocation_ratio=1.5)
    assert headroom(8, 1, 4.0, 10) == (8 - 1) * 4.0 - 10 == 18
    assert free_amount("VCPU", cpus, 10) == 21
    assert headroom(8192, 512, 1.5, 1024) == 10496
    assert free_amount("MEMORY_MB", ram, 1024) == 6656
    # With nothing reserved and no over-commit, the two agree.
    plain = Inventory(total=64)
    assert free_amount("VCPU", plain, 5) == free_amount("MEMORY_MB", plain, 5) == headroom(64, 0, 1.0, 5) == 59


def test_host_facts_add_up_the_inventories_a_host_counts():
    facts = host_facts(
        [
            ("VCPU", Inventory(total=4), 1),
            ("VCPU", Inventory(total=4), 0),  # a second NUMA cell
            ("PCPU", Inventory(total=2), 0),
            ("MEMORY_MB", Inventory(total=2048), 512),
            ("DISK_GB", Inventory(total=100), 0),
            ("DISK_GB", Inventory(total=1000), 200),  # a shared pool, counted whole
            ("CUSTOM_GPU", Inventory(total=1), 0),
        ],
        instances=3,
        group_members=1,
    )
    assert facts == HostFacts(free_ram_mb=1536, free_cpus=9, free_disk_gb=900, instances=3, group_members=1)


def test_best_first_orders_by_weight():
    assert best_first([0.5, 2.0, 1.0], shuffle=lambda tied: None) == [1, 2, 0]


def test_ties_within_epsilon_are_shuffled_and_no_one_else_is():
    weights = [1.0, 3.0, 3.0 - 1e-12, 3.0, 2.0]
    seen_first = set()
    for seed in range(50):
        ranked = best_first(weights, shuffle=random.Random(seed).shuffle)
        assert set(ranked[:3]) == {1, 2, 3}
        assert ranked[3:] == [4, 0]
        seen_first.add(ranked[0])
    assert seen_first == {1, 2, 3}


def test_weights_further_apart_than_epsilon_are_not_ties():
    for seed in range(20):
        assert best_first([1.0, 1.0 + 1e-6], shuffle=random.Random(seed).shuffle) == [1, 0]


@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.0 + 1e-12]), min_size=1, max_size=30), st.integers(0, 1000))
def test_the_first_best_is_the_first_of_the_best_first_order_with_the_same_draw(weights, seed):
    values = np.array(weights)
    first = first_best_of(values, random.Random(seed).randrange)
    assert first == next(best_first_of(values, random.Random(seed).randrange))
    assert values[first] >= values.max() - 1e-9


_VALUES = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.0 + 1e-12, 2.0, -np.inf])


@given(st.lists(_VALUES, min_size=1, max_size=300), st.integers(0, 1000), st.floats(0.0, 1.0))
# A run of ties whose best comes after another of its weights: drawn in the whole array's order.
@example(weights=[0.5, 1.0, 1.0 + 1e-12, 0.2], seed=0, head_share=1.0)
# A run that reaches below the bound (1.0): drawn whole, over the array.
@example(weights=[2.0, 1.0 + 1e-12, 1.0, 0.0], seed=0, head_share=0.75)
@example(weights=[2.0, 1.0 + 1e-12, 1.0, 0.0], seed=1, head_share=0.75)
def test_the_best_drawn_first_from_a_sample_give_the_order_and_draws_of_the_whole(weights, seed, head_share):
    values = np.array(weights)
    whole = list(best_first_of(values, random.Random(seed).randrange, sample_from=len(values) + 1))
    sampled = list(best_first_of(values, random.Random(seed).randrange, sample_from=1, head_share=head_share))
    assert sampled == whole
    assert sorted(whole) == [index for index, value in enumerate(weights) if value != -np.inf]


def test_a_large_array_is_ordered_from_its_best_first():
    values = np.random.default_rng(7).random(50_000)
    values[123] = 5.0
    values[[7, 40_000]] = 4.0  # a tie, drawn in the order of the whole array
    for seed in range(5):
        first = list(itertools.islice(best_first_of(values, random.Random(seed).randrange), 20))
        whole = list(itertools.islice(best_first_of(values, random.Random(seed).randrange, sample_from=10**9), 20))
        assert first == whole and first[0] == 123 and set(first[1:3]) == {7, 40_000}
        assert list(values[first[3:]]) == sorted(values[first[3:]], reverse=True)

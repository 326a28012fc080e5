"""All weighers together: Nova's sum of normalised values times multipliers, which the service's
weighing (berth.domain.weighing) computes too; multipliers from aggregate metadata; ties."""

from __future__ import annotations

import random

import pytest
from hosthelpers import make_hosts, request
from schedulerhelpers import spec
from weigherhelpers import names, ranked

from berth.domain.weighing import multipliers_for, weigh
from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers import enabled_weighers
from berth.scheduler.weighers.ram import RAMWeigher
from berth.scheduler.weighers.ranking import rank

AGG_A = "aaaaaaaa-0000-4000-8000-000000000001"
AGG_B = "bbbbbbbb-0000-4000-8000-000000000002"


def _random_hosts(seed):
    rng = random.Random(seed)
    return make_hosts(
        {
            f"h{i}": {
                "resources": {
                    "VCPU": (rng.randint(8, 64), rng.randint(0, 8)),
                    "MEMORY_MB": (rng.choice([8192, 16384, 65536]), rng.randint(0, 8192)),
                    "DISK_GB": (rng.randint(100, 1000), rng.randint(0, 100)),
                },
                "instances": {f"i{i}-{n}" for n in range(rng.randint(0, 5))},
                "members": {f"m{i}-{n}" for n in range(rng.randint(0, 2))},
            }
            for i in range(6)
        }
    )


@pytest.mark.parametrize("policy", ["spread", "pack"])
@pytest.mark.parametrize("group_policy", [None, "soft-affinity", "soft-anti-affinity"])
def test_the_scheduler_weighs_as_the_service_does(policy, group_policy):
    overrides = {"instances": -0.5, "soft_affinity": 2.0}
    settings = SelectionSettings(weigh_policy=policy, multipliers=overrides)
    group = ServerGroup("cccccccc-0000-4000-8000-000000000003", group_policy) if group_policy else None
    build = request(spec(), group=group)
    for seed in range(5):
        hosts = _random_hosts(seed)
        expected = weigh([h.facts() for h in hosts], multipliers_for(policy, overrides), group_policy)
        got = dict(ranked(hosts, enabled_weighers(settings), build, weigh_policy=policy, multipliers=overrides))
        assert got == {h.name: round(w, 6) for h, w in zip(hosts, expected, strict=True)}


def test_an_aggregate_overrides_a_multiplier_with_its_lowest_value():
    hosts = make_hosts(
        {
            "big": {"resources": {"MEMORY_MB": (32768, 0)}, "aggregates": [AGG_A, AGG_B]},
            "small": {"resources": {"MEMORY_MB": (8192, 0)}},
        }
    )
    metadata = {AGG_A: {"ram_weight_multiplier": "-1.5"}, AGG_B: {"ram_weight_multiplier": "0.5"}}
    # big weighs 1 x -1.5; small weighs 0 whatever its multiplier.
    assert ranked(hosts, [RAMWeigher()], aggregate_metadata=metadata) == [("small", 0.0), ("big", -1.5)]


def test_a_multiplier_that_is_no_number_is_ignored(caplog):
    hosts = make_hosts({"big": {"aggregates": [AGG_A]}, "small": {"resources": {"MEMORY_MB": (8192, 0)}}})
    metadata = {AGG_A: {"ram_weight_multiplier": "lots"}}
    assert ranked(hosts, [RAMWeigher()], aggregate_metadata=metadata)[0] == ("big", 1.0)
    assert "ram_weight_multiplier='lots' is not a number" in caplog.text


def test_equal_hosts_come_in_random_order():
    hosts = make_hosts({f"h{i}": {} for i in range(6)})
    orders = set()
    for seed in range(20):
        orders.add(tuple(h.name for h in _rank(hosts, seed)))
    assert len(orders) > 1


def _rank(hosts, seed):
    settings = SelectionSettings()
    return [w.host for w in rank(hosts, request(spec()), enabled_weighers(settings), settings, random.Random(seed))]


def test_a_single_host_weighs_0():
    assert ranked(make_hosts({"only": {}}), [RAMWeigher()]) == [("only", 0.0)]


def test_no_weigher_keeps_every_host():
    assert sorted(names(make_hosts({"a": {}, "b": {}}), [])) == ["a", "b"]

"""When the service's pick-and-claim may choose for the scheduler, and what it is asked."""

from __future__ import annotations

from hosthelpers import request
from schedulerhelpers import CONFIG, flavor, spec

from berth.scheduler.filters import enabled_filters
from berth.scheduler.picking import breaks_group, gang_body, pick_body, pick_suits, victims_of
from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.selection import Victim
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers import enabled_weighers

UUID = "4e3d2c1b-0a9f-4e8d-b7c6-a5b4c3d2e1f0"


def _suits(build, **settings):
    chosen = SelectionSettings(**settings)
    return pick_suits(build, enabled_filters(chosen, CONFIG), chosen)


def test_a_plain_request_and_a_server_group_suit_it():
    assert _suits(request(spec()))
    assert _suits(request(spec(availability_zone="az1")))  # the zone's aggregates are in the query
    assert _suits(request(spec(), group=ServerGroup(UUID, "anti-affinity")))
    assert _suits(request(spec(), group=ServerGroup(UUID, "soft-affinity")))


def test_what_only_the_scheduler_can_check_does_not():
    assert not _suits(request(spec(flavor_=flavor({"hw:numa_nodes": "1"}))))  # the agents' snapshots
    assert not _suits(request(spec(flavor_=flavor({"hw:cpu_policy": "dedicated"}))))
    assert not _suits(request(spec({"pci_passthrough:alias": "qat:1"})))
    assert not _suits(request(spec(availability_zone="nova")))  # a zone without aggregates
    assert not _suits(request(spec({"aggregate_instance_extra_specs:ssd": "true"})))
    assert not _suits(request(spec()), isolated_hosts=frozenset({"h1"}))
    assert not _suits(request(spec(), group=ServerGroup(UUID, "anti-affinity", max_server_per_host=2)))
    assert not _suits(request(spec()), aggregate_metadata={UUID: {"ram_weight_multiplier": "2"}})
    # Disabled filters check nothing.
    assert _suits(request(spec(availability_zone="nova")), enabled_filters=("ComputeFilter",))


def test_the_body_carries_the_query_without_its_limit_and_every_multiplier():
    settings = SelectionSettings(weigh_policy="pack", weighers=("RAMWeigher", "ServerGroupSoftAffinityWeigher"))
    build = request(spec(availability_zone="az1"), group=ServerGroup(UUID, "soft-affinity"))
    body = pick_body(build, "i-1", enabled_filters(settings, CONFIG), enabled_weighers(settings), settings)
    assert "limit" not in body["query"]
    assert body["query"]["resources"] == ["DISK_GB:10,MEMORY_MB:4096,VCPU:4"]
    assert body["query"]["member_of"] == ["in:5f0c2a3e-8d7b-4c1a-9e6f-1b2c3d4e5f60"]
    assert body["weigh"] == {
        "policy": "pack",
        "multipliers": {
            "ram": -1.0,
            "cpu": 0.0,
            "disk": 0.0,
            "instances": 0.0,
            "soft_affinity": 1.0,
            "soft_anti_affinity": 0.0,
        },
    }
    assert body["consumer"] == {"uuid": "i-1", "project_id": "project", "user_id": "user", "consumer_type": "INSTANCE"}
    assert body["server_group"] == {"uuid": UUID, "policy": "soft-affinity"}
    unweighed = SelectionSettings(weighers=())
    body = pick_body(build, "i-1", enabled_filters(unweighed, CONFIG), enabled_weighers(unweighed), unweighed)
    assert "server_group" not in body


def test_a_pick_is_checked_against_where_the_members_are():
    anti = request(spec(), group=ServerGroup(UUID, "anti-affinity"))
    assert breaks_group(anti, {"h1": {"m1"}}, "h1")
    assert not breaks_group(anti, {"h1": {"m1"}}, "h2")
    together = request(spec(), group=ServerGroup(UUID, "affinity"))
    assert breaks_group(together, {"h1": {"m1"}}, "h2")
    assert not breaks_group(together, {}, "h2")
    assert not breaks_group(request(spec(), group=ServerGroup(UUID, "soft-anti-affinity")), {"h1": {"m1"}}, "h1")
    assert not breaks_group(request(spec()), {"h1": {"m1"}}, "h1")


def _body(specs, **kwargs):
    settings = SelectionSettings()
    build = request(spec(specs))
    return pick_body(build, "i-1", enabled_filters(settings, CONFIG), enabled_weighers(settings), settings, **kwargs)


def test_every_pick_carries_the_flavor_priority_and_only_one_above_0_preempts():
    plain = _body({})
    assert "priority" not in plain and "preempt" not in plain  # 0, the preemptible level: the default
    high = _body({"berth:priority": "500"})
    assert high["priority"] == 500 and high["preempt"] is True
    low = _body({"berth:priority": "-5"})
    assert low["priority"] == -5 and "preempt" not in low


def test_a_gang_carries_the_priority_and_above_0_preempts_for_the_whole_gang():
    settings = SelectionSettings()
    build = request(spec({"berth:priority": "7"}))
    body = gang_body(build, ["i-1", "i-2"], enabled_filters(settings, CONFIG), enabled_weighers(settings), settings)
    assert body["priority"] == 7 and body["preempt"] is True
    preemptible = request(spec({}))
    body = gang_body(
        preemptible, ["i-1", "i-2"], enabled_filters(settings, CONFIG), enabled_weighers(settings), settings
    )
    assert "priority" not in body and "preempt" not in body


def test_the_victims_of_an_answer():
    answer = {"preempted": [{"consumer_uuid": "v1", "priority": 0, "root_provider_uuid": "rp"}]}
    assert victims_of(answer) == (Victim("v1", 0, "rp"),)
    assert victims_of({}) == ()

"""NumInstancesWeigher: instances on the host; off (0) by default, and then not even counted."""

from __future__ import annotations

from hosthelpers import make_hosts
from weigherhelpers import names, ranked

from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers import counts_instances, enabled_weighers
from berth.scheduler.weighers.num_instances import NumInstancesWeigher

HOSTS = {"busy": {"instances": {"i1", "i2", "i3"}}, "idle": {"instances": set()}, "some": {"instances": {"i4"}}}


def test_off_by_default():
    assert sorted(ranked(make_hosts(HOSTS), [NumInstancesWeigher()])) == [("busy", 0), ("idle", 0), ("some", 0)]
    assert not counts_instances(enabled_weighers(SelectionSettings()), SelectionSettings())


def test_a_positive_multiplier_prefers_busy_hosts_and_a_negative_one_idle_hosts():
    assert ranked(make_hosts(HOSTS), [NumInstancesWeigher()], multipliers={"instances": 1.0}) == [
        ("busy", 1.0),
        ("some", 0.333333),
        ("idle", 0.0),
    ]
    assert names(make_hosts(HOSTS), [NumInstancesWeigher()], multipliers={"instances": -1.0}) == [
        "idle",
        "some",
        "busy",
    ]


def test_instances_are_read_when_a_multiplier_is_set_anywhere():
    on = SelectionSettings(multipliers={"instances": -1.0})
    assert counts_instances(enabled_weighers(on), on)
    by_aggregate = SelectionSettings(aggregate_metadata={"agg": {"num_instances_weight_multiplier": "2"}})
    assert counts_instances(enabled_weighers(by_aggregate), by_aggregate)
    disabled = SelectionSettings(multipliers={"instances": -1.0}, weighers=("RAMWeigher",))
    assert not counts_instances(enabled_weighers(disabled), disabled)


def test_an_instance_placed_by_the_call_counts():
    hosts = make_hosts({"a": {"instances": set()}, "b": {"instances": {"x"}}})
    hosts[0].consume(hosts[0].requests[0], "new1", None, member=False)
    hosts[0].consume(hosts[0].requests[0], "new2", None, member=False)
    assert names(hosts, [NumInstancesWeigher()], multipliers={"instances": 1.0}) == ["a", "b"]

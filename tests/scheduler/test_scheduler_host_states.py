"""Host states from a candidates answer: what is read, and only when something needs it."""

from __future__ import annotations

from hosthelpers import FixedSnapshots, answer, uuid_of

from berth.scheduler.hosts.build import HostReads, build_hosts, member_hosts, place_group
from berth.scheduler.hosts.candidates import Candidates
from berth.scheduler.request.server_group import ServerGroup

AGG = "6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"


class RecordingService:
    """The reads build_hosts makes, answered from tables and recorded."""

    def __init__(self, names=None, members=None, consumers=None, allocations=None, roots=None):
        self.names = names or {}
        self.members = members or {}
        self.consumers = consumers or {}
        self.allocations = allocations or {}
        self.roots = roots or {}
        self.calls = []

    def host_names(self, roots):
        self.calls.append("host_names")
        return {root: self.names.get(root, root) for root in roots}

    def members_of(self, aggregate):
        self.calls.append(f"members_of {aggregate}")
        return self.members.get(aggregate, set())

    def consumers_on(self, provider):
        self.calls.append(f"consumers_on {provider}")
        return self.consumers.get(provider, set())

    def providers_of(self, consumer):
        self.calls.append(f"providers_of {consumer}")
        return self.allocations.get(consumer, set())

    def root_of(self, provider):
        self.calls.append(f"root_of {provider}")
        return self.roots.get(provider)


def _candidates():
    return Candidates.from_dict(answer({"a": {}, "b": {"traits": ["COMPUTE_NODE", "HW_CPU_X86_AVX2"]}}))


def test_only_names_are_read_when_nothing_else_is_needed():
    service = RecordingService(names={uuid_of("a"): "host-a", uuid_of("b"): "host-b"})
    hosts = build_hosts(_candidates(), service, FixedSnapshots(), HostReads())
    assert [(h.name, h.aggregates, h.instances) for h in hosts] == [
        ("host-a", frozenset(), None),
        ("host-b", frozenset(), None),
    ]
    assert hosts[1].traits == {"COMPUTE_NODE", "HW_CPU_X86_AVX2"}
    assert service.calls == ["host_names"]


def test_aggregates_and_instances_when_asked_for():
    service = RecordingService(members={AGG: {uuid_of("b"), "elsewhere"}}, consumers={uuid_of("a"): {"i1", "i2"}})
    hosts = build_hosts(_candidates(), service, FixedSnapshots(), HostReads(frozenset({AGG}), instances=True))
    assert [h.aggregates for h in hosts] == [frozenset(), {AGG}]
    assert [h.instances for h in hosts] == [{"i1", "i2"}, set()]
    assert service.calls == [
        "host_names",
        f"members_of {AGG}",
        f"consumers_on {uuid_of('a')}",
        f"consumers_on {uuid_of('b')}",
    ]


def test_an_empty_answer_reads_nothing():
    service = RecordingService()
    empty = Candidates.from_dict({"allocation_requests": [], "provider_summaries": {}})
    assert build_hosts(empty, service, FixedSnapshots(), HostReads(frozenset({AGG}), instances=True)) == []
    assert service.calls == []


def test_members_are_found_through_their_allocations_on_hosts_candidates_or_not():
    candidates = Candidates.from_dict(answer({"a": {"shared_disk": ("nfs", 100, 0)}, "b": {}}))
    service = RecordingService(
        allocations={
            "m1": {uuid_of("a"), uuid_of("nfs")},  # the pool is no host
            "m2": {"child-of-c"},
            "m3": set(),
        },
        roots={"child-of-c": uuid_of("c")},
    )
    assert member_hosts({"m1", "m2", "m3"}, service, candidates.summaries) == {
        uuid_of("a"): {"m1"},
        uuid_of("c"): {"m2"},
    }
    hosts = build_hosts(candidates, service, FixedSnapshots(), HostReads())
    group = ServerGroup("1d2e3f4a-5b6c-4d7e-8f9a-0b1c2d3e4f5a", "anti-affinity", frozenset({"m1", "m2", "m3"}))
    assert place_group(group, hosts, candidates, service) == {uuid_of("a"), uuid_of("c")}
    assert [h.group_members for h in hosts] == [{"m1"}, set()]

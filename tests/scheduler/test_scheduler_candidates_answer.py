"""The candidates answer, typed: requests by host (sharing providers are nobody's host), and the
books that count what the call takes."""

from __future__ import annotations

from hosthelpers import answer, uuid_of

from berth.scheduler.hosts.books import ProviderBooks
from berth.scheduler.hosts.candidates import AllocationRequest, Candidates


def test_requests_go_to_the_host_whose_tree_they_take_from():
    body = answer({"a": {"shared_disk": ("nfs", 100, 0)}, "b": {}})
    candidates = Candidates.from_dict(body)
    assert list(candidates.by_host()) == [uuid_of("a"), uuid_of("b")]
    [request] = candidates.by_host()[uuid_of("a")]
    assert request.providers() == {uuid_of("a"), uuid_of("nfs")}
    assert candidates.summaries[uuid_of("nfs")].shares
    assert AllocationRequest.from_dict(request.to_dict()) == request


def test_a_child_provider_counts_for_its_root():
    root, child = uuid_of("root"), uuid_of("child")
    body = {
        "allocation_requests": [
            {"allocations": {root: {"resources": {"VCPU": 1}}, child: {"resources": {"CUSTOM_GPU": 1}}}}
        ],
        "provider_summaries": {
            root: {"resources": {"VCPU": {"capacity": 4, "used": 0}}, "traits": [], "root_provider_uuid": root},
            child: {
                "resources": {"CUSTOM_GPU": {"capacity": 1, "used": 0}},
                "traits": [],
                "parent_provider_uuid": root,
                "root_provider_uuid": root,
            },
        },
    }
    candidates = Candidates.from_dict(body)
    assert list(candidates.by_host()) == [root]
    assert [s.uuid for s in candidates.tree(root)] == [root, child]


def test_the_books_count_what_the_call_takes():
    candidates = Candidates.from_dict(answer({"a": {"resources": {"VCPU": (2, 1)}, "ask": {"VCPU": 1}}}))
    books = ProviderBooks(candidates.summaries)
    [request] = candidates.requests
    assert books.has_room(request) and books.free(uuid_of("a"), "VCPU") == 1
    books.take(request)
    assert not books.has_room(request) and books.used(uuid_of("a"), "VCPU") == 2
    assert books.free(uuid_of("a"), "PCPU") == 0

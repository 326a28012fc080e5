"""The search's shortcut for a lone unsuffixed group gives exactly what the general walk gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.domain.candidates import (
    CandidateRequest,
    InventoryData,
    ProviderData,
    RequestGroup,
    SearchBudget,
    TreeView,
    search_tree,
)

CLASSES = [1, 2, 3]
TRAITS = [10, 11, 12]


@st.composite
def trees(draw):
    count = draw(st.integers(min_value=1, max_value=5))
    providers = []
    for n in range(count):
        parent = None if n == 0 else draw(st.integers(min_value=0, max_value=n - 1)) + 1
        provider = ProviderData(n + 1, f"rp-{n + 1}", parent, 1)
        for rc in draw(st.sets(st.sampled_from(CLASSES))):
            total = draw(st.integers(min_value=1, max_value=8))
            provider.inventories[rc] = InventoryData(
                total,
                draw(st.integers(0, 2)),
                1,
                draw(st.integers(1, 8)),
                draw(st.sampled_from([1, 2])),
                draw(st.sampled_from([1.0, 2.0])),
                draw(st.integers(0, 4)),
            )
        provider.traits = frozenset(draw(st.sets(st.sampled_from(TRAITS))))
        providers.append(provider)
    sharing = []
    if draw(st.booleans()):
        shared = ProviderData(99, "share", None, 99, traits=frozenset([10]))
        shared.inventories[3] = InventoryData(100, 0, 1, 100, 1, 1.0, draw(st.integers(0, 100)))
        sharing.append(shared)
    return TreeView(providers[0], providers, sharing)


@st.composite
def requests(draw):
    resources = draw(st.dictionaries(st.sampled_from(CLASSES), st.integers(1, 4), min_size=1))
    required = [
        frozenset(draw(st.sets(st.sampled_from(TRAITS), min_size=1, max_size=2)))
        for _ in range(draw(st.integers(0, 2)))
    ]
    forbidden = frozenset(draw(st.sets(st.sampled_from(TRAITS), max_size=1)))
    group = RequestGroup("", resources, required, forbidden)
    return CandidateRequest([group], one_provider_per_tree=draw(st.booleans()))


@settings(max_examples=400, deadline=None)
@given(tree=trees(), request=requests())
def test_shortcut_matches_general_walk(tree, request):
    fast = list(search_tree(tree, request, SearchBudget(100_000)))
    general = list(search_tree(tree, request, SearchBudget(100_000), shortcut=False))
    assert [(c.allocations, c.mappings) for c in fast] == [(c.allocations, c.mappings) for c in general]


@st.composite
def plain_requests(draw):
    resources = draw(st.dictionaries(st.sampled_from(CLASSES), st.integers(1, 4), min_size=1))
    return CandidateRequest([RequestGroup("", resources)])


@settings(max_examples=400, deadline=None)
@given(tree=trees(), request=plain_requests())
def test_plain_request_shortcut_matches_general_walk(tree, request):
    assert request.plain_resources is not None
    fast = list(search_tree(tree, request, SearchBudget(100_000)))
    general = list(search_tree(tree, request, SearchBudget(100_000), shortcut=False))
    assert [(c.allocations, c.mappings) for c in fast] == [(c.allocations, c.mappings) for c in general]


@st.composite
def lone_hosts(draw):
    """A tree of one provider and no sharing provider: the plain search's path of its own."""
    provider = ProviderData(1, "rp-1", None, 1)
    for rc in draw(st.sets(st.sampled_from(CLASSES))):
        provider.inventories[rc] = InventoryData(
            draw(st.integers(min_value=1, max_value=8)),
            draw(st.integers(0, 2)),
            draw(st.integers(1, 3)),
            draw(st.integers(1, 8)),
            draw(st.sampled_from([1, 2, 3])),
            draw(st.sampled_from([1.0, 1.5])),
            draw(st.integers(0, 4)),
        )
    return TreeView(provider, [provider], [])


@settings(max_examples=400, deadline=None)
@given(tree=lone_hosts(), request=plain_requests())
def test_plain_request_on_a_lone_host_matches_general_walk(tree, request):
    fast = list(search_tree(tree, request, SearchBudget(100_000)))
    general = list(search_tree(tree, request, SearchBudget(100_000), shortcut=False))
    assert [(c.allocations, c.mappings) for c in fast] == [(c.allocations, c.mappings) for c in general]


def test_requests_with_anything_more_than_resources_are_not_plain():
    resources = {1: 1}
    assert CandidateRequest([RequestGroup("", resources)]).plain_resources == [(1, 1)]
    assert CandidateRequest([RequestGroup("", resources, required=[frozenset([10])])]).plain_resources is None
    assert CandidateRequest([RequestGroup("", resources, forbidden=frozenset([10]))]).plain_resources is None
    assert CandidateRequest([RequestGroup("", resources, member_of=[frozenset([5])])]).plain_resources is None
    assert CandidateRequest([RequestGroup("", resources, in_tree_root=1)]).plain_resources is None
    assert CandidateRequest([RequestGroup("", resources), RequestGroup("1", {2: 1})]).plain_resources is None
    assert CandidateRequest([RequestGroup("", resources)], one_provider_per_tree=True).plain_resources is None
    assert CandidateRequest([RequestGroup("", resources)], root_forbidden=frozenset([10])).plain_resources is None
    assert CandidateRequest([RequestGroup("", {})]).plain_resources is None

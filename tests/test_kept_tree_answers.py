"""The answers of whole trees to a plain request, kept with their roots' copies
(``berth.store.candidates.kept``), are never shown once they no longer hold.

A tree's answers are kept with its root's copy; they depend on every member of the tree and on the
sharing providers anchored to it, whose changes do not move the root's revision.  Each test makes a
tree's answers kept, checks that they are read without a view or a search, changes one thing they
depend on, and checks the answer against an application that keeps nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from apihelpers import Api, new_uuid

from berth.api.app import PlacementApp, Settings
from berth.api.handlers.placement import allocation_candidates as candidates_handler
from berth.domain.candidate_request import CandidateRequest, RequestGroup
from berth.domain.candidates import TreeView, plain_tree_answer
from berth.store.candidates import finder as finder_module
from berth.store.candidates import kept as kept_module
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.candidates.roots import forget_wide_hints
from berth.store.placement import names

# A host and its GPU (the answer takes from both), and a host sharing disk (two answers: its own
# disk, and the pool's).
GPU_QUERY = "/allocation_candidates?resources=VCPU:1,VGPU:1"
DISK_QUERY = "/allocation_candidates?resources=VCPU:1,DISK_GB:10"


class Cloud:
    def __init__(self, api: Api):
        self.api = api
        self.aggregate = new_uuid()
        self.host = api.create_provider(inventory={"VCPU": 4, "DISK_GB": 20})
        self.gpu = api.create_provider(parent=self.host, inventory={"VGPU": 2})
        self.sharing_host = api.create_provider(inventory={"VCPU": 4, "DISK_GB": 20}, aggregates=[self.aggregate])
        self.pool = api.create_provider(
            inventory={"DISK_GB": 1000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[self.aggregate]
        )
        self.lone = api.create_provider(inventory={"VCPU": 4, "DISK_GB": 20})

    def generation(self, provider: str) -> int:
        return self.api.get(f"/resource_providers/{provider}").json_body["generation"]

    def set_traits(self, provider: str, traits: list[str]) -> None:
        body = {"traits": traits, "resource_provider_generation": self.generation(provider)}
        assert self.api.put(f"/resource_providers/{provider}/traits", body).status_code == 200

    def set_aggregates(self, provider: str, aggregates: list[str]) -> None:
        body = {"aggregates": aggregates, "resource_provider_generation": self.generation(provider)}
        assert self.api.put(f"/resource_providers/{provider}/aggregates", body).status_code == 200

    def set_total(self, provider: str, rc: str, total: int) -> None:
        body = {"total": total, "resource_provider_generation": self.generation(provider)}
        response = self.api.put(f"/resource_providers/{provider}/inventories/{rc}", body)
        assert response.status_code == 200, response.data


class Reference:
    """The general search's answers: an application that keeps no copy and no answer."""

    def __init__(self, db):
        self.api = Api(PlacementApp(db, Settings(provider_cache_size=0)))

    def get(self, path: str):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(candidates_handler, "kept_shape", lambda version: None)
            return self.api.get(path)


@pytest.fixture
def apis(db):
    return Api(PlacementApp(db)), Reference(db)


@pytest.fixture(autouse=True)
def no_wide_hints():
    """Conditions other tests found wide would send these small clouds' requests through other
    trees (the pool's own, searched each time), and the counts below would say so."""
    forget_wide_hints()


@pytest.fixture
def counted(monkeypatch):
    """How many trees were made into views, and how many trees' answers were decided."""
    counts = {"views": 0, "decided": 0}

    class CountedView(TreeView):
        def __init__(self, root, members, sharing):
            counts["views"] += 1
            super().__init__(root, members, sharing)

    def counted_answer(tree, resources, most):
        counts["decided"] += 1
        return plain_tree_answer(tree, resources, most)

    monkeypatch.setattr(finder_module, "TreeView", CountedView)
    monkeypatch.setattr(kept_module, "plain_tree_answer", counted_answer)
    return counts


def _kept_then_changed(apis, counted, path: str, change: Callable[[], None], shows: bool = True) -> None:
    warm, cold = apis
    before = warm.get(path).data
    counted.update(views=0, decided=0)
    assert warm.get(path).data == before
    # Read as kept: no tree made into a view, none decided again.
    assert counted == {"views": 0, "decided": 0}
    assert before == cold.get(path).data
    change()
    after = warm.get(path)
    assert after.status_code == 200
    assert after.data == cold.get(path).data
    if shows:
        assert after.data != before, "the change should show in the answer"
    assert warm.get(path).data == after.data


def test_trees_of_several_providers_are_decided_once_and_then_read_as_kept(apis, counted):
    warm, cold = apis
    cloud = Cloud(warm)
    first = warm.get(DISK_QUERY).json_body
    requests = [sorted(r["allocations"]) for r in first["allocation_requests"]]
    assert requests == [[cloud.host], [cloud.sharing_host], sorted([cloud.sharing_host, cloud.pool]), [cloud.lone]]
    # The tree of two and the host with a pool anchored to it; the lone host is decided on its own.
    assert counted["decided"] == 2
    counted.update(views=0, decided=0)
    answers = {path: [warm.get(path).data, warm.get(path).data] for path in (DISK_QUERY, GPU_QUERY)}
    # The tree of two, for the GPU query the first time (the only tree with a GPU: the others are
    # not read).
    assert counted == {"views": 0, "decided": 1}
    for path, (first_answer, second) in answers.items():
        assert first_answer == second == cold.get(path).data


@pytest.mark.parametrize(
    "change",
    [
        "member_inventory",
        "member_usage",
        "member_freed",
        "member_traits",
        "member_added",
        "member_deleted",
        "member_aggregates_anchor_a_pool",
    ],
)
def test_a_change_of_a_member_other_than_the_root_is_seen(apis, counted, change):
    warm, _ = apis
    cloud = Cloud(warm)
    consumer = new_uuid()
    if change == "member_freed":
        warm.allocate(consumer, {cloud.gpu: {"VGPU": 1}})
    changes = {
        "member_inventory": lambda: cloud.set_total(cloud.gpu, "VGPU", 3),
        "member_usage": lambda: warm.allocate(consumer, {cloud.gpu: {"VGPU": 1}}),
        "member_freed": lambda: warm.delete(f"/allocations/{consumer}"),
        "member_traits": lambda: cloud.set_traits(cloud.gpu, ["HW_GPU_API_VULKAN"]),
        "member_added": lambda: warm.create_provider(parent=cloud.host, inventory={"VGPU": 1}),
        "member_deleted": lambda: warm.delete(f"/resource_providers/{cloud.gpu}"),
        "member_aggregates_anchor_a_pool": lambda: cloud.set_aggregates(cloud.gpu, [cloud.aggregate]),
    }
    # Asked of the GPU's tree; where the change takes the GPU away, of the host's disk (a request
    # no provider has room for reads no tree at all).
    path = DISK_QUERY if change in ("member_aggregates_anchor_a_pool", "member_deleted") else GPU_QUERY
    _kept_then_changed(apis, counted, path, changes[change])


@pytest.mark.parametrize(
    "change",
    [
        "pool_inventory",
        "pool_usage",
        "pool_traits",
        "pool_leaves_the_aggregate",
        "another_pool_joins",
        "host_leaves_the_aggregate",
    ],
)
@pytest.mark.parametrize(
    "path",
    # Disk alone: the pool's own tree is read too, and its answers (the pool by itself) kept.
    [DISK_QUERY, "/allocation_candidates?resources=DISK_GB:10"],
)
def test_a_change_of_an_anchored_sharing_provider_is_seen(apis, counted, change, path):
    warm, _ = apis
    cloud = Cloud(warm)
    changes = {
        "pool_inventory": lambda: cloud.set_total(cloud.pool, "DISK_GB", 5),
        "pool_usage": lambda: warm.allocate(new_uuid(), {cloud.pool: {"DISK_GB": 995}}),
        "pool_traits": lambda: cloud.set_traits(cloud.pool, []),
        "pool_leaves_the_aggregate": lambda: cloud.set_aggregates(cloud.pool, []),
        "another_pool_joins": lambda: warm.create_provider(
            inventory={"DISK_GB": 500}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[cloud.aggregate]
        ),
        "host_leaves_the_aggregate": lambda: cloud.set_aggregates(cloud.sharing_host, []),
    }
    # Disk alone, a pool's leaving or the host's changes nothing: each still has disk to give.
    shows = path == DISK_QUERY or change not in ("pool_leaves_the_aggregate", "host_leaves_the_aggregate")
    _kept_then_changed(apis, counted, path, changes[change], shows)


def test_a_lone_host_joining_a_pools_aggregate_and_leaving_it_again(apis, counted):
    warm, cold = apis
    cloud = Cloud(warm)
    _kept_then_changed(apis, counted, DISK_QUERY, lambda: cloud.set_aggregates(cloud.lone, [cloud.aggregate]))
    _kept_then_changed(apis, counted, DISK_QUERY, lambda: cloud.set_aggregates(cloud.lone, []))
    assert warm.get(DISK_QUERY).data == cold.get(DISK_QUERY).data


def test_a_tree_of_more_answers_than_are_kept_is_searched_each_time(apis, counted, monkeypatch):
    warm, cold = apis
    monkeypatch.setattr(kept_module, "MOST_KEPT", 1)
    host = warm.create_provider(inventory={"VCPU": 4})
    for _ in range(2):
        warm.create_provider(parent=host, inventory={"VGPU": 1})
    path = "/allocation_candidates?resources=VCPU:1,VGPU:1"
    assert len(warm.get(path).json_body["allocation_requests"]) == 2
    counted.update(views=0, decided=0)
    assert warm.get(path).data == cold.get(path).data
    # Decided, found too many to keep, and searched as any tree: by the warm application and the
    # reference alike.
    assert counted == {"views": 2, "decided": 1}


def test_kept_answers_spend_the_search_budget_as_deciding_them_would(api, db):
    """Under a budget too small for every answer, a kept tree gives as many as its search would."""
    for _ in range(2):
        host = api.create_provider(inventory={"VCPU": 4})
        for _ in range(2):
            api.create_provider(parent=host, inventory={"VGPU": 1})
    cache = ProviderCache()
    with db.engine.connect() as conn:
        ids = names.resource_class_ids(conn, ["VCPU", "VGPU"])
        request = CandidateRequest([RequestGroup("", {ids["VCPU"]: 1, ids["VGPU"]: 1})])

        def found(kept_shape, steps):
            finder = CandidateFinder(
                conn, request, cache, limit=None, max_candidates=1000, max_steps=steps, kept_shape=kept_shape
            )
            return [c.key() for c in finder.find()[0]]

        for steps in (1, 2, 3, 4, 5):
            searched = found(None, steps)
            assert len(searched) == min(steps, 4)
            # Decided and kept, then read as kept: the same answers either way.
            assert found("shape", steps) == found("shape", steps) == searched


@pytest.mark.parametrize("version", ["1.28", "1.29", "1.39"])
def test_an_answer_of_a_pool_alone_kept_with_a_tree_shows_no_summary_of_that_tree(apis, version):
    """A pool's answer reached through a tree anchored to it names only the pool: the tree's own
    providers are not summarised for it, from 1.29 as before."""
    warm, cold = apis
    aggregate = new_uuid()
    host = warm.create_provider(inventory={"VCPU": 4}, aggregates=[aggregate])
    warm.create_provider(parent=host, inventory={"VGPU": 1})
    pool = warm.create_provider(
        inventory={"DISK_GB": 1000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    path = "/allocation_candidates?resources=DISK_GB:10"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(candidates_handler, "kept_shape", lambda version: None)
        expected = cold.api.get(path, version=version)
    assert [list(r["allocations"]) for r in expected.json_body["allocation_requests"]] == [[pool]]
    assert list(expected.json_body["provider_summaries"]) == [pool]
    for _ in range(2):
        assert warm.get(path, version=version).data == expected.data

"""The per-process copies of candidate data (``ProviderCache``) never show what the database no
longer holds.

An application that keeps copies from request to request must answer exactly as one that keeps
none, after every kind of write, including those that leave a provider's generation alone (freeing
allocations, aggregates set before 1.19) and a provider created with the id of a deleted one.
"""

from __future__ import annotations

import random

import orjson
import pytest
from apihelpers import Api, new_uuid
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.api.app import PlacementApp, Settings
from berth.api.handlers.placement import allocation_candidates as candidates_handler
from berth.domain.candidate_request import CandidateRequest, RequestGroup
from berth.domain.candidates import TreeView, lone_host_candidate
from berth.store.candidates import finder as finder_module
from berth.store.candidates import kept as kept_module
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.provider_cache import MOST_MEMOS_PER_COPY, ProviderCache
from berth.store.placement import names

QUERIES = [
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10",
    "resources=VCPU:2&required=CUSTOM_FAST",
    "resources=VCPU:1&member_of=in:{agg0},{agg1}",
    "resources=VCPU:1&resources_GPU=VGPU:1&group_policy=isolate",
    "resources=DISK_GB:50&required=!CUSTOM_FAST",
]
# Older microversions, with the queries they can express.
OLD_VERSIONS = {"1.10": QUERIES[:1], "1.17": QUERIES[:2], "1.24": QUERIES[:3] + QUERIES[4:]}


@pytest.fixture
def apis(db):
    warm = Api(PlacementApp(db))
    cold = Api(PlacementApp(db, Settings(provider_cache_size=0)))
    return warm, cold


def _same_answers(warm, cold, aggregates, version="1.39", queries=QUERIES):
    for query in queries:
        path = "/allocation_candidates?" + query.format(agg0=aggregates[0], agg1=aggregates[1])
        got, expected = warm.get(path, version=version), cold.get(path, version=version)
        assert got.status_code == expected.status_code == 200, (path, got.data)
        assert got.json_body == expected.json_body, (path, version)


def _generation(api, provider):
    return api.get(f"/resource_providers/{provider}").json_body["generation"]


class CloudOfChanges:
    """Random writes of every kind through the API, remembering what exists."""

    def __init__(self, api, rng, aggregates):
        self.api, self.rng, self.aggregates = api, rng, aggregates
        self.roots: list[str] = []
        self.children: dict[str, str] = {}  # child -> parent
        self.consumers: list[str] = []
        api.put("/traits/CUSTOM_FAST")

    def providers(self):
        return self.roots + list(self.children)

    def every_change(self):
        """Each kind of write, claims twice as likely as the others."""
        return [
            self.add_host,
            self.add_sharing_disk,
            self.add_gpu,
            self.change_inventory,
            self.set_traits,
            self.set_aggregates,
            self.claim,
            self.claim,
            self.free,
            self.move,
            self.reparent,
            self.delete_provider,
        ]

    def add_host(self):
        inventory = {"VCPU": self.rng.choice([2, 4, 8]), "MEMORY_MB": 4096, "DISK_GB": self.rng.choice([20, 100])}
        self.roots.append(self.api.create_provider(inventory=inventory))

    def add_sharing_disk(self):
        self.roots.append(
            self.api.create_provider(
                inventory={"DISK_GB": 1000},
                traits=["MISC_SHARES_VIA_AGGREGATE"],
                aggregates=[self.rng.choice(self.aggregates)],
            )
        )

    def add_gpu(self):
        if self.roots:
            parent = self.rng.choice(self.roots)
            self.children[self.api.create_provider(parent=parent, inventory={"VGPU": 2})] = parent

    def change_inventory(self):
        if not self.providers():  # every provider deleted by earlier changes
            return
        provider = self.rng.choice(self.providers())
        current = self.api.get(f"/resource_providers/{provider}/inventories").json_body
        inventories = current["inventories"]
        if not inventories:
            return
        rc = self.rng.choice(sorted(inventories))
        changed = dict(
            inventories[rc],
            total=inventories[rc]["total"] + self.rng.choice([-1, 1, 5]),
            reserved=self.rng.choice([0, 1]),
        )
        changed["max_unit"] = changed["total"]
        self.api.put(
            f"/resource_providers/{provider}/inventories/{rc}",
            dict(changed, resource_provider_generation=current["resource_provider_generation"]),
        )

    def set_traits(self):
        if not self.providers():  # every provider deleted by earlier changes
            return
        provider = self.rng.choice(self.providers())
        traits = self.rng.sample(
            ["CUSTOM_FAST", "HW_CPU_X86_AVX2", "MISC_SHARES_VIA_AGGREGATE"], self.rng.randint(0, 2)
        )
        self.api.put(
            f"/resource_providers/{provider}/traits",
            {"traits": traits, "resource_provider_generation": _generation(self.api, provider)},
        )

    def set_aggregates(self):
        if not self.providers():  # every provider deleted by earlier changes
            return
        provider = self.rng.choice(self.providers())
        chosen = self.rng.sample(self.aggregates, self.rng.randint(0, 2))
        if self.rng.random() < 0.5:  # before 1.19: a bare list, and the generation stays
            response = self.api.put(f"/resource_providers/{provider}/aggregates", chosen, version="1.1")
        else:
            response = self.api.put(
                f"/resource_providers/{provider}/aggregates",
                {"aggregates": chosen, "resource_provider_generation": _generation(self.api, provider)},
            )
        assert response.status_code == 200, response.data

    def claim(self):
        answer = self.api.get("/allocation_candidates?resources=VCPU:1,DISK_GB:10&limit=5").json_body
        if not answer["allocation_requests"]:
            return
        consumer = new_uuid()
        chosen = self.rng.choice(answer["allocation_requests"])
        response = self.api.put(
            f"/allocations/{consumer}",
            {
                "allocations": chosen["allocations"],
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        )
        if response.status_code == 204:
            self.consumers.append(consumer)

    def free(self):
        if self.consumers:
            consumer = self.consumers.pop(self.rng.randrange(len(self.consumers)))
            assert self.api.delete(f"/allocations/{consumer}").status_code == 204

    def move(self):
        """Replace a consumer's allocations with fewer units: freed and taken in one write."""
        if not self.consumers:
            return
        consumer = self.rng.choice(self.consumers)
        current = self.api.get(f"/allocations/{consumer}").json_body
        allocations = {rp: {"resources": {rc: 1 for rc in a["resources"]}} for rp, a in current["allocations"].items()}
        self.api.post(
            "/allocations",
            {
                consumer: {
                    "allocations": allocations,
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": current["consumer_generation"],
                }
            },
        )

    def reparent(self):
        if not self.children or len(self.roots) < 2:
            return
        child = self.rng.choice(sorted(self.children))
        parent = self.rng.choice(self.roots)
        body = self.api.get(f"/resource_providers/{child}").json_body
        response = self.api.put(
            f"/resource_providers/{child}", {"name": body["name"], "parent_provider_uuid": parent}, version="1.37"
        )
        if response.status_code == 200:
            self.children[child] = parent

    def delete_provider(self):
        childless = [p for p in self.providers() if p not in self.children.values()]
        if not childless:
            return
        provider = self.rng.choice(childless)
        if self.api.delete(f"/resource_providers/{provider}").status_code == 204:
            if provider in self.children:
                del self.children[provider]
            else:
                self.roots.remove(provider)


def test_answers_equal_to_an_uncached_application_after_random_writes(apis):
    warm, cold = apis
    rng = random.Random(20261122)
    aggregates = [new_uuid(), new_uuid()]
    cloud = CloudOfChanges(warm, rng, aggregates)
    for _ in range(4):
        cloud.add_host()
    cloud.add_sharing_disk()
    cloud.add_gpu()
    changes = cloud.every_change()
    _same_answers(warm, cold, aggregates)
    for step in range(60):
        rng.choice(changes)()
        _same_answers(warm, cold, aggregates)
        if step % 10 == 0:
            for version, queries in OLD_VERSIONS.items():
                _same_answers(warm, cold, aggregates, version, queries)
    assert len(warm.client.application.provider_cache) > 0
    assert len(cold.client.application.provider_cache) == 0


def test_freeing_allocations_is_seen_although_the_generation_stays(apis):
    warm, _ = apis
    host = warm.create_provider(inventory={"VCPU": 2})
    query = "/allocation_candidates?resources=VCPU:2"
    assert len(warm.get(query).json_body["allocation_requests"]) == 1
    consumer = new_uuid()
    warm.allocate(consumer, {host: {"VCPU": 2}})
    assert warm.get(query).json_body["allocation_requests"] == []
    generation = _generation(warm, host)
    assert warm.delete(f"/allocations/{consumer}").status_code == 204
    assert _generation(warm, host) == generation
    answer = warm.get(query).json_body
    assert len(answer["allocation_requests"]) == 1
    assert answer["provider_summaries"][host]["resources"]["VCPU"]["used"] == 0


def test_aggregates_set_before_1_19_are_seen(apis):
    warm, _ = apis
    host = warm.create_provider(inventory={"VCPU": 2})
    aggregate = new_uuid()
    query = f"/allocation_candidates?resources=VCPU:1&member_of={aggregate}"
    assert warm.get(query).json_body["allocation_requests"] == []
    generation = _generation(warm, host)
    assert warm.put(f"/resource_providers/{host}/aggregates", [aggregate], version="1.1").status_code == 200
    assert _generation(warm, host) == generation
    assert len(warm.get(query).json_body["allocation_requests"]) == 1


def test_a_provider_with_a_deleted_ones_id_is_not_taken_for_it(apis):
    warm, _ = apis
    first = warm.create_provider(inventory={"VCPU": 2}, traits=["CUSTOM_FAST"])
    query = "/allocation_candidates?resources=VCPU:1"
    assert list(warm.get(query).json_body["provider_summaries"]) == [first]
    assert warm.delete(f"/resource_providers/{first}").status_code == 204
    # On SQLite the new row takes the free id again; PostgreSQL draws a new one from its sequence.
    # As many writes as the first had, so that a revision counted from the same start would match.
    second = warm.create_provider(inventory={"VCPU": 4})
    assert (
        warm.put(
            f"/resource_providers/{second}/traits",
            {"traits": [], "resource_provider_generation": _generation(warm, second)},
        ).status_code
        == 200
    )
    summaries = warm.get(query).json_body["provider_summaries"]
    assert list(summaries) == [second]
    assert summaries[second]["resources"]["VCPU"]["capacity"] == 4
    assert summaries[second]["traits"] == []


def test_cache_drops_the_oldest_copies_past_its_capacity(db):
    small = Api(PlacementApp(db, Settings(provider_cache_size=3)))
    hosts = [small.create_provider(inventory={"VCPU": 1}) for _ in range(5)]
    answer = small.get("/allocation_candidates?resources=VCPU:1").json_body
    assert sorted(answer["provider_summaries"]) == sorted(hosts)
    assert len(small.client.application.provider_cache) == 3


def test_a_renamed_custom_class_is_shown_by_its_new_name(apis):
    warm, cold = apis
    assert warm.put("/resource_classes/CUSTOM_FPGA", version="1.7").status_code == 201
    host = warm.create_provider(inventory={"CUSTOM_FPGA": 4})
    before = warm.get("/allocation_candidates?resources=CUSTOM_FPGA:1").json_body
    assert before["allocation_requests"][0]["allocations"][host]["resources"] == {"CUSTOM_FPGA": 1}
    assert list(before["provider_summaries"][host]["resources"]) == ["CUSTOM_FPGA"]
    renamed = warm.put("/resource_classes/CUSTOM_FPGA", {"name": "CUSTOM_ACCELERATOR"}, version="1.2")
    assert renamed.status_code == 200, renamed.data
    query = "/allocation_candidates?resources=CUSTOM_ACCELERATOR:1"
    after = warm.get(query).json_body
    assert after == cold.get(query).json_body
    assert after["allocation_requests"][0]["allocations"][host]["resources"] == {"CUSTOM_ACCELERATOR": 1}
    assert list(after["provider_summaries"][host]["resources"]) == ["CUSTOM_ACCELERATOR"]


def test_pieces_kept_with_a_provider_stay_few_whatever_is_asked(apis):
    warm, _ = apis
    warm.create_provider(inventory={"VCPU": 64})
    for amount in range(1, 40):
        assert len(warm.get(f"/allocation_candidates?resources=VCPU:{amount}").json_body["allocation_requests"]) == 1
    for version in ("1.27", "1.29", "1.30", "1.33", "1.34", "1.35", "1.36", "1.37", "1.38", "1.39"):
        assert warm.get("/allocation_candidates?resources=VCPU:1", version=version).status_code == 200
    cache = warm.client.application.provider_cache
    assert len(cache) == 1
    (provider_id,) = cache._copies
    assert 0 < cache.memo_count(provider_id) <= MOST_MEMOS_PER_COPY


def test_pieces_are_kept_as_their_json_and_answers_stay_byte_for_byte_the_same(apis):
    warm, cold = apis
    host = warm.create_provider(inventory={"VCPU": 8, "MEMORY_MB": 4096}, traits=["HW_CPU_X86_AVX2"])
    query = "/allocation_candidates?resources=VCPU:2,MEMORY_MB:512"
    for version in ("1.12", "1.29", "1.39"):
        first = warm.get(query, version=version).data
        assert warm.get(query, version=version).data == first == cold.get(query, version=version).data
    cache = warm.client.application.provider_cache
    (provider_id,) = cache._copies
    pieces = list(cache._copies[provider_id].memos.values())
    # The allocation requests (with and without mappings) and the summary: written to JSON once
    # each, copied into every later answer as they are.
    assert len(pieces) == 3
    assert all(isinstance(piece, orjson.Fragment) for piece in pieces)
    assert orjson.loads(warm.get(query).data)["provider_summaries"][host]["traits"] == ["HW_CPU_X86_AVX2"]


def test_the_trees_of_a_batch_past_the_limit_are_loaded_but_not_made_into_views(api, db, monkeypatch):
    for _ in range(6):
        api.create_provider(inventory={"VCPU": 4})
    made = []

    class CountedView(TreeView):
        def __init__(self, root, members, sharing):
            made.append(root.id)
            super().__init__(root, members, sharing)

    monkeypatch.setattr(finder_module, "TreeView", CountedView)
    with db.engine.connect() as conn:
        vcpu = names.resource_class_ids(conn, ["VCPU"])["VCPU"]
        request = CandidateRequest([RequestGroup("", {vcpu: 1})])
        candidates, providers = CandidateFinder(conn, request, ProviderCache(), limit=2, max_candidates=1000).find()
    # The first batch (the limit, a quarter more and two) is loaded whole; the search stops at
    # the limit, and only the trees it came to were made into views.
    assert len(candidates) == 2
    assert len(providers) == 4
    assert made == [c.mappings[""][0] for c in candidates]


def _member_rows(db, api, hosts):
    rows = {}
    with db.engine.connect() as conn:
        for host in hosts:
            rows[host] = conn.exec_driver_sql(
                "SELECT id, parent_provider_id, root_provider_id, revision FROM resource_providers WHERE uuid = "
                + ("%(u)s" if conn.dialect.name == "postgresql" else ":u"),
                {"u": host},
            ).one()
    return rows


def test_memo_keeps_a_piece_with_its_copy_and_drops_it_with_the_copy(db):
    api = Api(PlacementApp(db))
    host = api.create_provider(inventory={"VCPU": 2})
    cache = ProviderCache()
    made = []

    def make(label):
        made.append(label)
        return {"piece": label}

    with db.engine.connect() as conn:
        (row,) = _member_rows(db, api, [host]).values()
        (provider,) = cache.providers(conn, [tuple(row)]).values()
        first = cache.memo(provider, "summary", make, "one")
        assert cache.memo(provider, "summary", make, "two") is first
        assert made == ["one"] and cache.memo_count(provider.id) == 1
        # A change moves the revision on: the new copy starts with an empty memo.
        changed = api.put(
            f"/resource_providers/{host}/traits",
            {"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": _generation(api, host)},
        )
        assert changed.status_code == 200, changed.data
    with db.engine.connect() as conn:
        (row,) = _member_rows(db, api, [host]).values()
        (current,) = cache.providers(conn, [tuple(row)]).values()
        assert current is not provider and cache.memo_count(current.id) == 0
        assert cache.memo(current, "summary", make, "three") == {"piece": "three"}
        # The replaced copy is no longer the cache's: its pieces are made each time, never kept.
        assert cache.memo(provider, "summary", make, "four") == {"piece": "four"}
        assert made == ["one", "three", "four"] and cache.memo_count(current.id) == 1


def test_memo_of_a_cache_that_keeps_nothing_computes_every_time(db):
    api = Api(PlacementApp(db))
    host = api.create_provider(inventory={"VCPU": 2})
    cache = ProviderCache(capacity=0)
    with db.engine.connect() as conn:
        (row,) = _member_rows(db, api, [host]).values()
        (provider,) = cache.providers(conn, [tuple(row)]).values()
        assert len(cache) == 0
        assert cache.memo(provider, "k", list, [1]) is not cache.memo(provider, "k", list, [1])
        assert cache.memo_count(provider.id) == 0


def test_memo_empties_when_full(db):
    api = Api(PlacementApp(db))
    host = api.create_provider(inventory={"VCPU": 2})
    cache = ProviderCache()
    with db.engine.connect() as conn:
        (row,) = _member_rows(db, api, [host]).values()
        (provider,) = cache.providers(conn, [tuple(row)]).values()
        for key in range(MOST_MEMOS_PER_COPY):
            cache.memo(provider, key, str, key)
        assert cache.memo_count(provider.id) == MOST_MEMOS_PER_COPY
        cache.memo(provider, "one more", str, "x")
        assert cache.memo_count(provider.id) == 1


# --- the answers of lone hosts, kept with their copies -----------------------------------------

CHANGES = [
    "add_host",
    "add_sharing_disk",
    "add_gpu",
    "change_inventory",
    "set_traits",
    "set_aggregates",
    "claim",
    "free",
    "move",
    "reparent",
    "delete_provider",
]
PLAIN_QUERIES = [
    "resources=VCPU:1",
    "resources=VCPU:2,MEMORY_MB:1024",
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10",
    "resources=DISK_GB:50",
    "resources=VCPU:1&limit=2",
    "resources=VCPU:1,DISK_GB:10&limit=3",
]


def _general_path_answer(api, path, version):
    """The answer of the general search: no answer kept with a lone host's copy."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(candidates_handler, "kept_shape", lambda version: None)
        return api.get(path, version=version)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    changes=st.lists(st.sampled_from(CHANGES), min_size=1, max_size=8),
    version=st.sampled_from(["1.16", "1.27", "1.29", "1.34", "1.36", "1.39"]),
)
def test_kept_answers_of_lone_hosts_agree_with_the_search_byte_for_byte(apis, seed, changes, version):
    warm, _ = apis
    rng = random.Random(seed)
    aggregates = [new_uuid(), new_uuid()]
    cloud = CloudOfChanges(warm, rng, aggregates)
    for _ in range(3):
        cloud.add_host()
    for change in changes:
        getattr(cloud, change)()
        for query in PLAIN_QUERIES:
            path = "/allocation_candidates?" + query
            expected = _general_path_answer(warm, path, version)
            # Made and kept, then read from what was kept: both as the search answers.
            for _ in range(2):
                got = warm.get(path, version=version)
                assert got.status_code == expected.status_code == 200, got.data
                assert got.data == expected.data, (query, version)


def test_a_lone_hosts_kept_answer_is_read_without_a_search_until_its_copy_changes(api, monkeypatch):
    host = api.create_provider(inventory={"VCPU": 4, "MEMORY_MB": 2048})
    other = api.create_provider(inventory={"VCPU": 4, "MEMORY_MB": 2048})
    views, decided = [], []

    class CountedView(TreeView):
        def __init__(self, root, members, sharing):
            views.append(root.id)
            super().__init__(root, members, sharing)

    def counted(provider, resources):
        decided.append(provider.id)
        return lone_host_candidate(provider, resources)

    monkeypatch.setattr(finder_module, "TreeView", CountedView)
    monkeypatch.setattr(kept_module, "lone_host_candidate", counted)
    path = "/allocation_candidates?resources=VCPU:2,MEMORY_MB:1024"
    first = api.get(path)
    assert set(first.json_body["provider_summaries"]) == {host, other}
    assert views == []
    assert len(decided) == 2
    # Read again from the copies, with the pieces written the first time.
    assert api.get(path).data == first.data
    assert len(decided) == 2
    api.allocate(new_uuid(), {host: {"VCPU": 1}})
    answer = api.get(path).json_body
    assert [list(r["allocations"]) for r in answer["allocation_requests"]] == [[host], [other]]
    assert answer["provider_summaries"][host]["resources"]["VCPU"]["used"] == 1
    # Only the host whose copy changed was decided again; no tree was made into a view.
    assert len(decided) == 3
    assert views == []


def test_a_sharing_provider_joining_a_lone_hosts_aggregate_is_seen_although_its_revision_stays(api, db):
    aggregate = new_uuid()
    host = api.create_provider(inventory={"VCPU": 4, "DISK_GB": 10}, aggregates=[aggregate])
    path = "/allocation_candidates?resources=VCPU:1,DISK_GB:5"
    assert len(api.get(path).json_body["allocation_requests"]) == 1
    revision = _member_rows(db, api, [host])[host]
    disk = api.create_provider(
        inventory={"DISK_GB": 1000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    assert _member_rows(db, api, [host])[host] == revision
    answer = api.get(path).json_body
    assert [sorted(r["allocations"]) for r in answer["allocation_requests"]] == [[host], sorted([host, disk])]

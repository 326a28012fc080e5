"""The walk over every tree kept by stretches of provider ids (``berth.store.candidates.kept_walk``):
taken as it is while nothing it read changed, walked again stretch by stretch where something did,
and never an answer other than an application that keeps nothing gives."""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa
from apihelpers import Api, new_uuid
from test_provider_cache import CloudOfChanges

from berth.api.app import PlacementApp, Settings
from berth.store import schema
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.kept_walk import CHUNK
from berth.store.candidates.roots import forget_wide_hints

PLAIN = "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"
LIMITS = ["&limit=3", "&limit=50", "&limit=1000", ""]


@pytest.fixture(autouse=True)
def no_wide_hints():
    forget_wide_hints()


@pytest.fixture
def apis(db):
    return Api(PlacementApp(db)), Api(PlacementApp(db, Settings(provider_cache_size=0)))


@pytest.fixture
def walked(monkeypatch):
    """The stretches of provider ids walked (not taken as kept), by their first id."""
    stretches: list[int] = []
    walk = CandidateFinder.root_batches_between

    def counted(self, statement, lower, upper, seen_roots):
        stretches.append(lower + 1)
        return walk(self, statement, lower, upper, seen_roots)

    monkeypatch.setattr(CandidateFinder, "root_batches_between", counted)
    return stretches


def _answer(api, query):
    response = api.get(f"/allocation_candidates?{query}")
    assert response.status_code == 200, response.data
    return response.json_body


def _hosts(api, count, aggregate=None):
    return [
        api.create_provider(
            f"h{index}",
            inventory={"VCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 100},
            aggregates=[aggregate] if aggregate and index % 7 == 3 else None,
        )
        for index in range(count)
    ]


def test_a_walk_is_kept_and_only_a_changed_stretch_is_walked_again(apis, walked):
    warm, cold = apis
    hosts = _hosts(warm, 3 * CHUNK)
    query = f"{PLAIN}&limit=1000"
    first = _answer(warm, query)
    assert len(first["allocation_requests"]) == len(hosts)
    assert len(walked) >= 3
    walked.clear()
    assert _answer(warm, query) == first
    assert walked == []
    # A claim on one host of the second stretch: that stretch alone is walked again.
    warm.allocate(new_uuid(), {hosts[CHUNK + 5]: {"VCPU": 4}})
    after = _answer(warm, query)
    assert len(walked) == 1
    assert after == _answer(cold, query)
    assert len(after["allocation_requests"]) == len(hosts) - 1


def test_a_limited_walk_reads_the_stretches_it_needs(apis, walked, db):
    warm, _ = apis
    _hosts(warm, 4 * CHUNK)
    assert len(_answer(warm, f"{PLAIN}&limit=3")["allocation_requests"]) == 3
    # The stretches of the first three hosts: one, unless the ids earlier tests used put the first
    # hosts at the end of a stretch.
    with db.engine.connect() as conn:
        first = [row[0] for row in conn.execute(sa.select(schema.resource_providers.c.id).order_by("id").limit(3))]
    assert len(walked) == len({provider_id // CHUNK for provider_id in first}) < 4


def test_walks_over_several_stretches_answer_as_an_application_that_keeps_nothing_after_random_writes(apis):
    warm, cold = apis
    rng = random.Random(20261127)
    aggregates = [new_uuid(), new_uuid()]
    cloud = CloudOfChanges(warm, rng, aggregates)
    cloud.add_sharing_disk()
    cloud.roots += _hosts(warm, 2 * CHUNK, aggregates[0])
    for _ in range(6):
        cloud.add_gpu()
    cloud.add_sharing_disk()
    changes = cloud.every_change()
    queries = [PLAIN + limit for limit in LIMITS] + ["resources=VCPU:1,DISK_GB:500&limit=20"]
    for step in range(40):
        for query in queries:
            assert _answer(warm, query) == _answer(cold, query), (step, query)
        rng.choice(changes)()


def test_a_custom_class_renamed_shows_its_new_name_in_a_kept_walk(apis):
    warm, cold = apis
    assert warm.post("/resource_classes", {"name": "CUSTOM_OLD"}).status_code == 201
    for index in range(2 * CHUNK):
        warm.create_provider(f"h{index}", inventory={"VCPU": 4, "CUSTOM_OLD": 4})
    query = "resources=VCPU:1,CUSTOM_OLD:1&limit=1000"
    assert _answer(warm, query) == _answer(warm, query) == _answer(cold, query)
    # Before 1.7 a custom class may be renamed: no provider's revision moves.
    assert warm.put("/resource_classes/CUSTOM_OLD", {"name": "CUSTOM_NEW"}, version="1.2").status_code == 200
    renamed = _answer(warm, "resources=VCPU:1,CUSTOM_NEW:1&limit=1000")
    assert renamed == _answer(cold, "resources=VCPU:1,CUSTOM_NEW:1&limit=1000")
    assert "CUSTOM_NEW" in str(renamed["allocation_requests"][0]) and "CUSTOM_OLD" not in str(renamed)

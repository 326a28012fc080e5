"""Moving a real OpenStack Placement onto Berth (berth.migration), checked against the API of both.

The source is OpenStack Placement itself, run here on a SQLite file and served on a loopback port,
filled through its own API; the target is a real ``berth serve`` on the database the move wrote.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from dbhelpers import BACKENDS, make_database
from livehelpers import LiveServer
from placementhelpers import served_placement

from berth.migration import (
    Difference,
    LoadCounts,
    NotEmpty,
    TooOld,
    compare,
    load_into_berth,
    read_placement,
)
from berth.migration.reading import cross_check

pytestmark = pytest.mark.slow

VERSION = "placement 1.39"
HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": VERSION, "Accept": "application/json"}
AGGREGATE = "5c4f8a51-9d2e-4b7c-8e1a-2f3d4c5b6a70"
SECOND_AGGREGATE = "7e2d1c3b-4a5f-4e6d-9c8b-1a2b3c4d5e6f"


@pytest.fixture(scope="module")
def placement_url(tmp_path_factory) -> Iterator[str]:
    """OpenStack Placement on a SQLite file, without authentication (noauth2), on a loopback port.

    Its database engine is global to the process, so there is one per test process.
    """
    with served_placement(tmp_path_factory.mktemp("placement")) as url:
        yield url


class _Api:
    """Writes to a Placement endpoint, each answer checked."""

    def __init__(self, url: str):
        self.url = url
        self.session = requests.Session()
        self.session.headers.update(HEADERS)

    def call(self, method: str, path: str, body: Any = None, version: str = VERSION) -> Any:
        response = self.session.request(
            method, self.url + path, json=body, headers={"OpenStack-API-Version": version}, timeout=30
        )
        assert response.status_code < 300, (method, path, response.status_code, response.text)
        return response.json() if response.content else None

    def provider(self, name: str, parent: str | None = None, **parts: Any) -> str:
        body = {"name": name, "uuid": str(uuid.uuid4()), "parent_provider_uuid": parent}
        created = self.call("POST", "/resource_providers", body)["uuid"]
        for part in ("inventories", "traits", "aggregates"):
            if part in parts:
                generation = self.call("GET", f"/resource_providers/{created}")["generation"]
                self.call(
                    "PUT",
                    f"/resource_providers/{created}/{part}",
                    {"resource_provider_generation": generation, part: parts[part]},
                )
        return created

    def allocate(self, consumer: str, held: dict[str, dict[str, int]], owner: tuple[str, str], kind: str) -> None:
        current = self.call("GET", f"/allocations/{consumer}")
        self.call(
            "PUT",
            f"/allocations/{consumer}",
            {
                "allocations": {rp: {"resources": resources} for rp, resources in held.items()},
                "project_id": owner[0],
                "user_id": owner[1],
                "consumer_generation": current.get("consumer_generation"),
                "consumer_type": kind,
            },
        )


@pytest.fixture(scope="module")
def cloud(placement_url) -> dict[str, str]:
    """A cloud in Placement: NUMA trees with devices, a disk pool shared through an aggregate, custom
    classes and traits, and consumers of several types (one written before consumer types)."""
    api = _Api(placement_url)
    for name in ("CUSTOM_FPGA", "CUSTOM_MAGIC"):
        api.call("PUT", f"/resource_classes/{name}")
    for name in ("CUSTOM_GOLD", "CUSTOM_RACK_A"):
        api.call("PUT", f"/traits/{name}")
    ids: dict[str, str] = {}
    ids["cn1"] = api.provider("cn1", traits=["CUSTOM_GOLD", "COMPUTE_VOLUME_MULTI_ATTACH"], aggregates=[AGGREGATE])
    numa = {"traits": ["HW_NUMA_ROOT"]}
    ids["numa0"] = api.provider(
        "cn1-numa0",
        ids["cn1"],
        inventories={"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096, "reserved": 512, "step_size": 256}},
        **numa,
    )
    ids["numa1"] = api.provider(
        "cn1-numa1",
        ids["cn1"],
        inventories={"VCPU": {"total": 8, "allocation_ratio": 4.0}, "MEMORY_MB": {"total": 4096}},
        **numa,
    )
    ids["pf0"] = api.provider(
        "cn1-numa0-pf0", ids["numa0"], inventories={"SRIOV_NET_VF": {"total": 4}}, traits=["HW_NIC_SRIOV"]
    )
    ids["fpga"] = api.provider(
        "cn1-fpga", ids["cn1"], inventories={"CUSTOM_FPGA": {"total": 2}}, traits=["CUSTOM_RACK_A"]
    )
    ids["cn2"] = api.provider(
        "cn2",
        inventories={
            "VCPU": {"total": 16, "max_unit": 8},
            "MEMORY_MB": {"total": 16384, "allocation_ratio": 1.5},
            "DISK_GB": {"total": 100, "reserved": 10, "min_unit": 5, "step_size": 5},
            "CUSTOM_MAGIC": {"total": 10},
        },
        aggregates=[AGGREGATE, SECOND_AGGREGATE],
    )
    ids["pool"] = api.provider(
        "disk-pool",
        inventories={"DISK_GB": {"total": 1000, "reserved": 100}},
        traits=["MISC_SHARES_VIA_AGGREGATE"],
        aggregates=[AGGREGATE],
    )
    ids["spare"] = api.provider("spare", traits=["CUSTOM_RACK_A"])

    ids["instance1"], ids["instance2"], ids["migration"], ids["old"] = (str(uuid.uuid4()) for _ in range(4))
    api.allocate(
        ids["instance1"],
        {ids["numa0"]: {"VCPU": 2, "MEMORY_MB": 1024}, ids["pf0"]: {"SRIOV_NET_VF": 1}, ids["pool"]: {"DISK_GB": 20}},
        ("project-a", "user-x"),
        "INSTANCE",
    )
    api.allocate(ids["instance2"], {ids["cn2"]: {"VCPU": 2}}, ("project-b", "user-y"), "INSTANCE")
    # Written again, so that its consumer's generation and its provider's have moved on.
    api.allocate(
        ids["instance2"],
        {ids["cn2"]: {"VCPU": 4, "MEMORY_MB": 2048, "DISK_GB": 10, "CUSTOM_MAGIC": 3}},
        ("project-b", "user-y"),
        "INSTANCE",
    )
    api.allocate(
        ids["migration"],
        {ids["numa1"]: {"VCPU": 2, "MEMORY_MB": 512}, ids["pool"]: {"DISK_GB": 20}},
        ("project-a", "user-x"),
        "MIGRATION",
    )
    # Before 1.38 a consumer has no type ("unknown" later).
    api.call(
        "PUT",
        f"/allocations/{ids['old']}",
        {
            "allocations": {ids["fpga"]: {"resources": {"CUSTOM_FPGA": 1}}},
            "project_id": "project-c",
            "user_id": "user-z",
            "consumer_generation": None,
        },
        version="placement 1.28",
    )
    return ids


@pytest.fixture(params=BACKENDS)
def berth_database_url(request, tmp_path_factory) -> str:
    """A new, empty Berth database of each kind: its schema is the move's to create."""
    return make_database(request.param, tmp_path_factory, request)


def _load(placement_url: str, tmp_path: Path) -> tuple[str, LoadCounts]:
    database_url = f"sqlite:///{tmp_path / 'berth.sqlite'}"
    return database_url, load_into_berth(read_placement(placement_url), database_url)


# The candidates queries asked of both sides: plain, by trait, by aggregate, through the shared disk
# pool, and granular groups in one NUMA subtree.
CANDIDATE_QUERIES = [
    "resources=VCPU:1,MEMORY_MB:512",
    "resources=VCPU:1&required=HW_NUMA_ROOT",
    "resources=VCPU:1&required=!HW_NUMA_ROOT",
    "resources=VCPU:1&root_required=CUSTOM_GOLD",
    f"resources=VCPU:1&member_of={SECOND_AGGREGATE}",
    "resources=VCPU:1,DISK_GB:10",
    "resources=CUSTOM_MAGIC:1,DISK_GB:5",
    "resources1=VCPU:1&resources2=SRIOV_NET_VF:1&required3=HW_NUMA_ROOT&same_subtree=1,2,3&group_policy=none",
    "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
    "resources=CUSTOM_FPGA:1&resources1=MEMORY_MB:1024&group_policy=none",
]


def _allocation_requests(url: str, query: str) -> set[str]:
    response = requests.get(f"{url}/allocation_candidates?{query}", headers=HEADERS, timeout=30)
    assert response.status_code == 200, (url, query, response.text)
    found = set()
    for request in response.json()["allocation_requests"]:
        request["mappings"] = {group: sorted(providers) for group, providers in request["mappings"].items()}
        found.add(json.dumps(request, sort_keys=True))
    return found


def test_a_placement_moved_onto_berth_answers_the_same(placement_url, cloud, berth_database_url):
    stages: list[tuple[str, int, int]] = []
    books = read_placement(placement_url, progress=lambda *step: stages.append(step))
    assert ("providers", 8, 8) in stages and ("consumers", 4, 4) in stages
    assert books.consumers[cloud["old"]].consumer_type is None
    assert books.consumers[cloud["instance2"]].generation == 2

    database_url = berth_database_url
    counts = load_into_berth(books, database_url)
    assert counts == LoadCounts(
        resource_classes=2, traits=2, providers=8, inventories=11, aggregates=2, consumers=4, allocations=12
    )

    server = LiveServer(database_url, workers=1)
    try:
        assert compare(placement_url, server.url) == []
        for query in CANDIDATE_QUERIES:
            expected = _allocation_requests(placement_url, query)
            assert expected, query
            assert _allocation_requests(server.url, query) == expected, query
    finally:
        server.stop()


def test_compare_names_an_inventory_changed_on_one_side(placement_url, cloud, tmp_path):
    database_url, _ = _load(placement_url, tmp_path)
    server = LiveServer(database_url, workers=1)
    try:
        berth = _Api(server.url)
        cn2 = cloud["cn2"]
        generation = berth.call("GET", f"/resource_providers/{cn2}")["generation"]
        berth.call(
            "PUT",
            f"/resource_providers/{cn2}/inventories/VCPU",
            {"resource_provider_generation": generation, "total": 20, "max_unit": 8},
        )
        found = compare(placement_url, server.url)
    finally:
        server.stop()

    kept = {"reserved": 0, "min_unit": 1, "max_unit": 8, "step_size": 1, "allocation_ratio": 1.0}
    assert [d for d in found if not d.informational] == [
        Difference("inventory", f"provider {cn2} (cn2) class VCPU", {"total": 16, **kept}, {"total": 20, **kept})
    ]
    assert [d for d in found if d.informational] == [
        Difference("generation", f"provider {cn2} (cn2)", generation, generation + 1, informational=True)
    ]
    assert "inventory of provider" in str(found[0])


def test_a_database_with_books_of_its_own_is_refused(placement_url, cloud, berth_database_url):
    assert load_into_berth(read_placement(placement_url), berth_database_url).providers == 8
    with pytest.raises(NotEmpty, match="8 providers, 4 consumers, 12 allocations"):
        load_into_berth(read_placement(placement_url), berth_database_url)


def test_an_endpoint_older_than_consumer_generations_is_refused(placement_url, cloud):
    with pytest.raises(TooOld, match="needs 1.28"):
        read_placement(placement_url, microversion="1.27")


def test_books_that_do_not_add_up_are_found(placement_url, cloud):
    books = read_placement(placement_url)
    seen = {
        uuid_: {c.uuid: dict(c.allocations[uuid_]) for c in books.consumers.values() if uuid_ in c.allocations}
        for uuid_ in books.providers
    }
    assert cross_check(books, seen) == []

    # As if the instance had grown on cn2 between the read of cn2 and the read of the instance.
    books.consumers[cloud["instance2"]].allocations[cloud["cn2"]]["VCPU"] += 1
    problems = cross_check(books, seen)
    assert [p.split(":")[0] for p in problems] == [f"provider {cloud['cn2']}"] * 2
    assert "'VCPU': 4" in problems[0] and "'VCPU': 5" in problems[0]

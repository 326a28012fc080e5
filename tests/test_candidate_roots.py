"""The trees a rare condition narrows the candidate search to: never an answer fewer or more than
the walk over every tree gives, and few trees read when a condition is rare."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from apihelpers import new_uuid
from dbhelpers import reset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import MultiDict

from berth.api.candidates.candidate_query import parse_query
from berth.api.microversion import Version
from berth.domain.candidate_request import CandidateRequest, RequestGroup
from berth.store.candidates import finder as finder_module
from berth.store.candidates import roots
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.names import resolve
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.candidates.roots import forget_wide_hints, narrowed_roots
from berth.store.placement import names

COMPUTE = {"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100}


@pytest.fixture(autouse=True)
def _no_hints():
    forget_wide_hints()
    yield
    forget_wide_hints()


def _ids(db, provider_uuids):
    with db.engine.connect() as conn:
        return {
            row[0]
            for row in conn.exec_driver_sql(
                "SELECT id FROM resource_providers WHERE uuid IN ({})".format(",".join("?" * len(provider_uuids)))
                if db.engine.dialect.name == "sqlite"
                else "SELECT id FROM resource_providers WHERE uuid = ANY(%s)",
                tuple(provider_uuids) if db.engine.dialect.name == "sqlite" else (list(provider_uuids),),
            )
        }


def _narrowed(db, group: RequestGroup, **request):
    with db.engine.connect() as conn:
        finder = CandidateFinder(
            conn, CandidateRequest([group], **request), ProviderCache(), limit=50, max_candidates=1000
        )
        return narrowed_roots(conn, finder.request, finder.sharing, finder.want)


def _class_ids(db, *classes):
    with db.engine.connect() as conn:
        return names.resource_class_ids(conn, classes)


def test_an_amount_no_provider_has_room_for_names_no_tree(api, db):
    api.create_provider("a", inventory=COMPUTE)
    api.create_provider("b", inventory=COMPUTE)
    rc = _class_ids(db, "VCPU", "MEMORY_MB")
    group = RequestGroup("", {rc["VCPU"]: 2, rc["MEMORY_MB"]: 300_000})
    assert _narrowed(db, group) == []
    assert api.get("/allocation_candidates?resources=VCPU:2,MEMORY_MB:300000").json_body["allocation_requests"] == []


def test_a_rare_trait_names_the_trees_that_carry_it_below_the_root_too(api, db):
    plain = api.create_provider("plain", inventory=COMPUTE)
    fast_root = api.create_provider("fast", inventory=COMPUTE)
    api.create_provider("fast-nic", parent=fast_root, traits=["CUSTOM_FAST"])
    rc = _class_ids(db, "VCPU")
    with db.engine.connect() as conn:
        fast = names.trait_ids(conn, ["CUSTOM_FAST"])["CUSTOM_FAST"]
    group = RequestGroup("", {rc["VCPU"]: 1}, required=[frozenset({fast})])
    assert _narrowed(db, group) == sorted(_ids(db, [fast_root]))
    assert (
        plain
        not in api.get("/allocation_candidates?resources=VCPU:1&required=CUSTOM_FAST").json_body["provider_summaries"]
    )


def test_a_trait_a_sharing_provider_has_narrows_nothing(api, db):
    aggregate = new_uuid()
    host = api.create_provider("host", inventory=COMPUTE, aggregates=[aggregate])
    api.create_provider(
        "pool", inventory={"DISK_GB": 1000}, traits=["MISC_SHARES_VIA_AGGREGATE", "CUSTOM_SSD"], aggregates=[aggregate]
    )
    rc = _class_ids(db, "VCPU")
    with db.engine.connect() as conn:
        ssd = names.trait_ids(conn, ["CUSTOM_SSD"])["CUSTOM_SSD"]
    group = RequestGroup("", {rc["VCPU"]: 1}, required=[frozenset({ssd})])
    # The trait may come from the pool for any tree anchored to it: only the amount narrows.
    assert _narrowed(db, group) == sorted(_ids(db, [host]))
    answer = api.get("/allocation_candidates?resources=VCPU:1,DISK_GB:10&required=CUSTOM_SSD").json_body
    assert len(answer["allocation_requests"]) == 1


def test_a_class_only_a_sharing_provider_has_room_for_names_the_trees_anchored_to_it(api, db):
    aggregate = new_uuid()
    anchored = api.create_provider("anchored", inventory=COMPUTE, aggregates=[aggregate])
    api.create_provider("alone", inventory=COMPUTE)
    api.create_provider(
        "pool", inventory={"DISK_GB": 5000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    rc = _class_ids(db, "VCPU", "DISK_GB")
    group = RequestGroup("", {rc["VCPU"]: 1, rc["DISK_GB"]: 1000})
    # Not the lone host; nor the pool's own tree, which has no VCPU.
    assert _narrowed(db, group) == sorted(_ids(db, [anchored]))


def test_a_wide_condition_is_remembered_and_not_read_again(api, db, monkeypatch):
    for name in ("a", "b", "c"):
        api.create_provider(name, inventory=COMPUTE)
    monkeypatch.setattr(roots, "SMALLEST_BOUND", 1)
    monkeypatch.setattr(roots, "LARGEST_BOUND", 1)
    rc = _class_ids(db, "VCPU")
    group = RequestGroup("", {rc["VCPU"]: 1})
    assert _narrowed(db, group) is None
    assert roots._HINTS.is_wide(("room", rc["VCPU"], 1))


# --- no answer changes -----------------------------------------------------------------------------

_TRAITS = ["CUSTOM_A", "CUSTOM_B"]


@st.composite
def clouds(draw):
    aggregates = [new_uuid(), new_uuid()]
    hosts = []
    for _ in range(draw(st.integers(1, 5))):
        hosts.append(
            {
                "vcpu": draw(st.integers(1, 8)),
                "ram": draw(st.sampled_from([512, 2048, 4096])),
                "traits": draw(st.lists(st.sampled_from(_TRAITS), unique=True, max_size=2)),
                "aggregates": draw(st.lists(st.sampled_from(aggregates), unique=True, max_size=1)),
                "child": draw(st.booleans()),
                "child_traits": draw(st.lists(st.sampled_from(_TRAITS), unique=True, max_size=1)),
            }
        )
    pool = draw(st.sampled_from([None, *aggregates]))
    return hosts, pool, aggregates


queries = st.tuples(
    st.sampled_from(
        ["VCPU:1", "VCPU:4,MEMORY_MB:2048", "VCPU:2,DISK_GB:500", "MEMORY_MB:9999", "VCPU:1,SRIOV_NET_VF:1"]
    ),
    st.sampled_from(["", "&required=CUSTOM_A", "&required=in:CUSTOM_A,CUSTOM_B", "&required=!CUSTOM_B"]),
    st.sampled_from(["", "&member_of=AGG0", "&member_of=in:AGG0,AGG1"]),
    st.sampled_from(["", "&resources1=SRIOV_NET_VF:1&required1=CUSTOM_B&group_policy=none"]),
)


def _build(api, hosts, pool, aggregates):
    for trait in _TRAITS:
        api.put(f"/traits/{trait}")
    for index, host in enumerate(hosts):
        root = api.create_provider(
            f"h{index}",
            inventory={"VCPU": host["vcpu"], "MEMORY_MB": host["ram"], "DISK_GB": 100},
            traits=host["traits"],
            aggregates=host["aggregates"],
        )
        if host["child"]:
            api.create_provider(
                f"h{index}-nic", parent=root, inventory={"SRIOV_NET_VF": 2}, traits=host["child_traits"]
            )
    if pool is not None:
        api.create_provider(
            "pool", inventory={"DISK_GB": 1000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[pool]
        )


def _answer(api, query):
    response = api.get(f"/allocation_candidates?{query}")
    assert response.status_code == 200, response.data
    body = response.json_body
    return sorted(
        sorted((rp, rc, n) for rp, entry in ar["allocations"].items() for rc, n in entry["resources"].items())
        for ar in body["allocation_requests"]
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cloud=clouds(), picked=st.lists(queries, min_size=3, max_size=3))
def test_narrowing_never_changes_an_answer(api, db, monkeypatch, cloud, picked):
    reset(db)
    hosts, pool, aggregates = cloud
    _build(api, hosts, pool, aggregates)
    for resources, traits, member_of, granular in picked:
        query = (f"resources={resources}{traits}{member_of}{granular}").replace("AGG0", aggregates[0])
        query = query.replace("AGG1", aggregates[1])
        forget_wide_hints()
        narrowed = _answer(api, query)
        with monkeypatch.context() as walk:
            # Every condition counts as wide: the search walks every tree.
            walk.setattr(roots, "SMALLEST_BOUND", 0)
            walk.setattr(roots, "LARGEST_BOUND", 0)
            forget_wide_hints()
            walked = _answer(api, query)
        assert narrowed == walked, query


def test_a_pool_anchoring_more_trees_than_the_bound_is_remembered_as_wide(api, db, monkeypatch):
    aggregate = new_uuid()
    for name in ("a", "b"):
        api.create_provider(name, inventory=COMPUTE, aggregates=[aggregate])
    api.create_provider(
        "pool", inventory={"DISK_GB": 1000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    monkeypatch.setattr(roots, "LARGEST_BOUND", 1)
    rc = _class_ids(db, "DISK_GB")
    _narrowed(db, RequestGroup("", {rc["DISK_GB"]: 10}))
    # Not read again for every request of the next seconds.
    assert roots._HINTS.is_wide(("room", rc["DISK_GB"], 10))


# --- amounts above every max_unit, disk only pools have, a large limit --------------------------------

# As Nova reports a host: max_unit is the host's size, the ratio over-commits memory beyond it.
OVERCOMMITTED = {
    "VCPU": {"total": 8, "max_unit": 8, "allocation_ratio": 4.0},
    "MEMORY_MB": {"total": 4096, "max_unit": 4096, "allocation_ratio": 4.0},
    "DISK_GB": {"total": 100, "max_unit": 100},
}


def _overcommitted_cloud(api, hosts: int) -> None:
    aggregate = new_uuid()
    for index in range(hosts):
        api.create_provider(f"h{index}", inventory=OVERCOMMITTED, aggregates=[aggregate] if index % 3 == 1 else None)
    api.create_provider(
        "pool", inventory={"DISK_GB": 10_000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )


def _vm_steps(db, query: str, *, limit: int | None = 50) -> int:
    """SQLite virtual machine steps (in hundreds) that finding the candidates of a request takes,
    once the count of trees and the wide conditions are known (both are read once in a while, not
    for each request): what the request itself reads."""
    if db.engine.dialect.name != "sqlite":
        pytest.skip("counts the steps of SQLite's virtual machine")
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    with db.engine.connect() as conn:
        request = resolve(conn, parse_query(MultiDict(parse_qsl(query)), Version(1, 39))).request
        CandidateFinder(conn, request, ProviderCache(), limit=limit, max_candidates=1000).find()
        raw = conn.connection.dbapi_connection
        raw.set_progress_handler(count, 100)
        try:
            CandidateFinder(conn, request, ProviderCache(), limit=limit, max_candidates=1000).find()
        finally:
            raw.set_progress_handler(None, 100)
    return steps[0]


def test_an_amount_above_every_max_unit_names_no_tree_whatever_the_room(api, db):
    _overcommitted_cloud(api, 4)
    rc = _class_ids(db, "VCPU", "MEMORY_MB")
    # Every host has room for 8,000 MB (4,096 x 4), none takes more than 4,096 in one allocation.
    group = RequestGroup("", {rc["VCPU"]: 2, rc["MEMORY_MB"]: 8000})
    assert _narrowed(db, group) == []
    assert api.get("/allocation_candidates?resources=VCPU:2,MEMORY_MB:8000").json_body["allocation_requests"] == []


def test_an_amount_above_every_max_unit_is_refused_without_reading_every_provider(api, db):
    _overcommitted_cloud(api, 10)
    few = _vm_steps(db, "resources=MEMORY_MB:8000")
    reset(db)
    forget_wide_hints()
    _overcommitted_cloud(api, 400)
    many = _vm_steps(db, "resources=MEMORY_MB:8000")
    # The room of every provider admits the amount: read through the headroom range, the 40 times
    # larger cloud costs about 40 times the steps; through the unit range, what the smaller one does.
    assert many <= few + 2, (few, many)


def test_a_class_only_pools_serve_reads_the_anchored_trees_it_needs_not_all(api, db):
    query = "resources=VCPU:2,MEMORY_MB:1024,DISK_GB:500&limit=3"
    _overcommitted_cloud(api, 30)
    few = _vm_steps(db, query, limit=3)
    reset(db)
    forget_wide_hints()
    # Ten times as many trees anchored to the pool.
    _overcommitted_cloud(api, 300)
    many = _vm_steps(db, query, limit=3)
    # Reading every anchored tree would grow with their number (ten times as many here); what
    # grows with the cloud instead is the narrowing's own reads, a few hundred steps (counted in
    # hundreds, so a step more or less rounds either way).
    assert many < 2 * few, (few, many)


BEYOND_MAX_UNIT = "resources=VCPU:2,MEMORY_MB:8000"
POOLS_ONLY = "resources=VCPU:2,MEMORY_MB:1024,DISK_GB:500"
LARGE_LIMIT = "resources=VCPU:2,MEMORY_MB:1024,DISK_GB:20&limit=1000"


@pytest.mark.parametrize(
    "query",
    [
        BEYOND_MAX_UNIT,
        f"{BEYOND_MAX_UNIT}&limit=5",
        "resources=VCPU:12,MEMORY_MB:1024",
        POOLS_ONLY,
        f"{POOLS_ONLY}&limit=3",
        f"{POOLS_ONLY}&required=!CUSTOM_A",
        LARGE_LIMIT,
        f"{LARGE_LIMIT}&required=CUSTOM_A",
    ],
)
def test_the_narrowing_of_these_shapes_answers_as_the_walk(api, db, monkeypatch, query):
    _overcommitted_cloud(api, 12)
    api.put("/traits/CUSTOM_A")
    narrowed = _answer(api, query)
    with monkeypatch.context() as walk:
        walk.setattr(roots, "SMALLEST_BOUND", 0)
        walk.setattr(roots, "LARGEST_BOUND", 0)
        forget_wide_hints()
        walked = _answer(api, query)
    assert narrowed == walked
    if query.startswith(POOLS_ONLY):
        assert narrowed


def test_a_walk_of_the_same_pools_again_reads_its_trees_in_one_window(api, db, monkeypatch):
    # One host in ten anchored to the pool, after many hosts that are not: the first walk widens
    # its window until it holds the trees it wants; the next starts as wide as the first needed.
    aggregate = new_uuid()
    for index in range(300):
        api.create_provider(f"before{index}", inventory=OVERCOMMITTED)
    for index in range(200):
        api.create_provider(f"h{index}", inventory=OVERCOMMITTED, aggregates=[aggregate] if index % 10 == 9 else None)
    api.create_provider(
        "pool", inventory={"DISK_GB": 10_000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    windows: list[tuple[int, int]] = []
    real = finder_module.anchored_between

    def recording(conn, anchored, lowest, highest):
        windows.append((lowest, highest))
        return real(conn, anchored, lowest, highest)

    monkeypatch.setattr(finder_module, "anchored_between", recording)
    with db.engine.connect() as conn:
        request = resolve(conn, parse_query(MultiDict(parse_qsl(f"{POOLS_ONLY}&limit=5")), Version(1, 39))).request
        first, _ = CandidateFinder(conn, request, ProviderCache(), limit=5, max_candidates=1000).find()
        walked_first = list(windows)
        windows.clear()
        again, _ = CandidateFinder(conn, request, ProviderCache(), limit=5, max_candidates=1000).find()
    assert len(first) == len(again) == 5
    assert len(walked_first) > 1
    assert len(windows) == 1, windows


class _TreeRecordingFinder(CandidateFinder):
    """The finder, noting the roots of the trees it searches."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trees_read: list[int] = []

    def _trees(self, root_ids):
        self.trees_read.extend(root_ids)
        return super()._trees(root_ids)


def test_pools_own_trees_without_the_compute_class_are_not_searched(api, db):
    # The pools come first in id order, as a cloud's shared storage often does; only the hosts
    # anchored to them can answer a request for more disk than a host has.
    aggregates = [new_uuid() for _ in range(5)]
    pools = [
        api.create_provider(
            f"pool{index}", inventory={"DISK_GB": 10_000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
        )
        for index, aggregate in enumerate(aggregates)
    ]
    anchored = [
        api.create_provider(f"h{index}", inventory=OVERCOMMITTED, aggregates=[aggregates[index % 5]])
        for index in range(10)
    ]
    for index in range(60):
        api.create_provider(f"plain{index}", inventory=OVERCOMMITTED)
    with db.engine.connect() as conn:
        request = resolve(conn, parse_query(MultiDict(parse_qsl(POOLS_ONLY)), Version(1, 39))).request
        finder = _TreeRecordingFinder(conn, request, ProviderCache(), limit=5, max_candidates=1000)
        found, _ = finder.find()
    assert len(found) == 5
    assert finder.trees_read
    assert not set(finder.trees_read) & _ids(db, pools)
    assert set(finder.trees_read) <= _ids(db, anchored)


def test_a_pools_own_tree_with_the_compute_class_still_answers(api, db):
    aggregate = new_uuid()
    pool = api.create_provider(
        "pool", inventory={"DISK_GB": 10_000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    api.create_provider("pool-numa", parent=pool, inventory=OVERCOMMITTED)
    # Enough hosts that room for the compute classes narrows nothing: the pool's aggregate does.
    for index in range(40):
        api.create_provider(f"h{index}", inventory=OVERCOMMITTED)
    answers = _answer(api, POOLS_ONLY)
    assert len(answers) == 1
    # The pool's disk with its own tree's compute, on either path.
    assert {rc: rp == pool for rp, rc, _ in answers[0]} == {"DISK_GB": True, "VCPU": False, "MEMORY_MB": False}
    assert _answer(api, f"{POOLS_ONLY}&limit=1") == answers


def _in_tree_queries(api):
    hosts = {p["name"]: p["uuid"] for p in api.get("/resource_providers").json_body["resource_providers"]}
    anchored, alone, pool = hosts["h1"], hosts["h0"], hosts["pool"]
    return [
        f"resources=VCPU:2,MEMORY_MB:1024,DISK_GB:20&in_tree={anchored}",
        f"resources=VCPU:2,MEMORY_MB:1024,DISK_GB:20&in_tree={alone}",
        f"resources=VCPU:2&resources1=DISK_GB:20&in_tree1={anchored}&group_policy=none",
        # A sharing pool's own tree: its disk serves every tree anchored to it.
        f"resources=DISK_GB:100&in_tree={pool}",
        f"resources=VCPU:2&resources1=DISK_GB:100&in_tree1={pool}&group_policy=none",
    ]


def test_in_tree_answers_as_the_walk_over_every_tree(api, monkeypatch):
    _overcommitted_cloud(api, 12)
    queries = _in_tree_queries(api)
    answers = [_answer(api, query) for query in queries]
    with monkeypatch.context() as walk:
        walk.setattr(CandidateFinder, "_tree_restriction", lambda self: None)
        assert [_answer(api, query) for query in queries] == answers
    assert all(answers[:3]) and all(answers[3:])


def test_in_tree_naming_a_host_reads_that_tree_alone_though_pools_share(api, db):
    _overcommitted_cloud(api, 30)
    query = _in_tree_queries(api)[0]
    named = api.get("/resource_providers?name=h1").json_body["resource_providers"][0]["uuid"]
    with db.engine.connect() as conn:
        request = resolve(conn, parse_query(MultiDict(parse_qsl(query)), Version(1, 39))).request
        finder = CandidateFinder(conn, request, ProviderCache(), limit=None, max_candidates=1000)
        found, providers = finder.find()
    assert found
    # The named host's tree and the sharing pool, not the 29 other hosts.
    pools = {p.root_id for p in finder.sharing.values()}
    assert {p.root_id for p in providers.values()} == _ids(db, [named]) | pools

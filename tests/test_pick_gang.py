"""POST /berth/pick with ``consumers``: a gang placed all (or at least ``min_count``) or none, in one
write transaction, under the server group's policy and a topology of aggregates; in process on both
databases, against a live multi-worker server, and against an enumeration of every placement of
small clouds."""

from __future__ import annotations

import dataclasses
import itertools
import random
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import sqlalchemy as sa
from apihelpers import error_code, error_detail, new_uuid
from dbhelpers import reset
from hypothesis import given, settings
from hypothesis import strategies as st
from livehelpers import live_host, live_on

from berth.api import microversion as mv
from berth.api.candidates.candidate_query import parse_query
from berth.api.request import QueryArgs
from berth.domain import error_codes
from berth.domain.weighing import Multipliers, multipliers_for
from berth.store import schema
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.pick.board.host_board import HostBoard
from berth.store.pick.gang.on_board import (
    GangBoardPlan,
    PlanOutdated,
    claim_gang_on_board,
    place_gang,
    plan_gang_on_board,
)
from berth.store.pick.gang.plan import MAX_GANG, Dealer, GangTree, Plan, SpreadOver, Within, plan_gang
from berth.store.pick.gang.transaction import GangRequest, pick_gang
from berth.store.pick.request import Consumer


def _clear_groups(db):
    with db.engine.begin() as conn:
        conn.execute(schema.server_group_members.delete())
        conn.execute(schema.server_groups.delete())


@pytest.fixture(params=["board", "every tree"])
def api(request, api, app, db):
    """The API on a database without server groups (the shared test database's reset knows
    nothing of them) or leases; each gang planned on the host board before its write, or (without
    a board) searching every tree in it."""
    _clear_groups(db)
    with db.engine.begin() as conn:
        conn.execute(schema.allocation_leases.delete())
    app.host_board = HostBoard(min_age=0.0, enabled=request.param == "board")
    return api


def _consumer(consumer=None):
    return {"uuid": consumer or new_uuid(), "project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}


def _gang(count=None, *, resources="VCPU:1", consumers=None, group=None, **extra):
    body = {
        "query": {"resources": resources},
        "consumers": [_consumer(c) for c in (consumers or [new_uuid() for _ in range(count)])],
    }
    if group:
        body["server_group"] = {"uuid": group[0], "policy": group[1]}
    body.update(extra)
    return body


def _post(api, body, expect=200):
    r = api.post("/berth/pick", body)
    assert r.status_code == expect, r.data
    return r


def _hosts(api, count, vcpus=2, aggregates=None, prefix="host"):
    return [
        api.create_provider(f"{prefix}-{i}", inventory={"VCPU": vcpus, "MEMORY_MB": 4096}, aggregates=aggregates)
        for i in range(count)
    ]


def _usages(api, hosts):
    return {host: api.get(f"/resource_providers/{host}/usages").json_body["usages"] for host in hosts}


def _members(db):
    with db.engine.connect() as conn:
        return conn.execute(sa.select(schema.server_group_members.c.consumer_uuid)).scalars().all()


def _groups(db):
    with db.engine.connect() as conn:
        return conn.execute(sa.select(schema.server_groups.c.uuid)).scalars().all()


def _roots(answer):
    return [member["root_provider_uuid"] for member in answer["members"]]


# --- placing a gang ----------------------------------------------------------------------------------


def test_a_gang_is_placed_whole_and_answered_in_the_order_asked(api):
    hosts = _hosts(api, 3)
    consumers = [new_uuid() for _ in range(5)]
    answer = _post(api, _gang(consumers=consumers)).json_body
    assert [m["consumer_uuid"] for m in answer["members"]] == consumers
    assert (answer["placed"], answer["asked"], answer["trees_fitted"], answer["trees_weighed"]) == (5, 5, 3, 3)
    assert "not_placed" not in answer
    # Spread (the default weighers): the five go two, two and one over the three hosts.
    assert sorted(Counter(_roots(answer)).values()) == [1, 2, 2]
    for member in answer["members"]:
        root = member["root_provider_uuid"]
        assert member["allocation_request"] == {
            "allocations": {root: {"resources": {"VCPU": 1}}},
            "mappings": {"": [root]},
        }
        held = api.get(f"/allocations/{member['consumer_uuid']}").json_body["allocations"]
        assert held == {root: {"generation": held[root]["generation"], "resources": {"VCPU": 1}}}
    assert sum(usage["VCPU"] for usage in _usages(api, hosts).values()) == 5


def test_a_gang_that_does_not_fit_writes_nothing(api, db):
    hosts = _hosts(api, 2)
    group = new_uuid()
    consumers = [new_uuid() for _ in range(5)]
    r = _post(api, _gang(consumers=consumers, group=(group, "soft-anti-affinity"), lease_seconds=600), 409)
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST
    assert "4 of its 5 members could be placed, fewer than the 5 asked for; stopped by no room" in error_detail(r)
    assert _usages(api, hosts) == {host: {"VCPU": 0, "MEMORY_MB": 0} for host in hosts}
    for consumer in consumers:
        assert api.get(f"/allocations/{consumer}").json_body["allocations"] == {}
    assert api.get("/berth/leases").json_body["leases"] == []
    assert _members(db) == [] and _groups(db) == []


def test_min_count_places_as_many_as_fit_or_none(api):
    hosts = _hosts(api, 3, vcpus=1)
    consumers = [new_uuid() for _ in range(5)]
    answer = _post(api, _gang(consumers=consumers, min_count=3)).json_body
    assert (answer["placed"], answer["asked"]) == (3, 5)
    assert [m["consumer_uuid"] for m in answer["members"]] == consumers[:3]
    assert answer["not_placed"] == consumers[3:]
    assert set(_roots(answer)) == set(hosts)
    for consumer in consumers[3:]:
        assert api.get(f"/allocations/{consumer}").json_body["allocations"] == {}


def test_min_count_not_met_is_a_409_saying_how_many_would_have_fitted(api):
    hosts = _hosts(api, 3, vcpus=1)
    r = _post(api, _gang(5, min_count=4), 409)
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST
    assert "3 of its 5 members could be placed, fewer than the 4 asked for" in error_detail(r)
    assert _usages(api, hosts) == {host: {"VCPU": 0, "MEMORY_MB": 0} for host in hosts}


def test_a_gang_that_places_everyone_says_no_one_is_left_out(api):
    _hosts(api, 2)
    answer = _post(api, _gang(3, min_count=1)).json_body
    assert answer["placed"] == 3 and answer["not_placed"] == []


def test_nothing_fitting_the_query_says_which_condition(api):
    _hosts(api, 2)
    r = _post(api, _gang(2, resources="VCPU:9"), 409)
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST
    assert "0 of its 2 members" in error_detail(r) and "no provider has 9 VCPU free" in error_detail(r)


def test_an_existing_consumer_fails_the_whole_gang(api):
    (host,) = _hosts(api, 1, vcpus=8)
    taken = new_uuid()
    api.allocate(taken, {host: {"VCPU": 1}})
    r = _post(api, _gang(consumers=[new_uuid(), taken]), 409)
    assert error_code(r) == error_codes.CONCURRENT_UPDATE
    assert _usages(api, [host])[host]["VCPU"] == 1


# --- server groups -------------------------------------------------------------------------------------


def test_anti_affinity_puts_each_member_on_its_own_host_and_none_beside_a_member(api, db):
    hosts = _hosts(api, 5, vcpus=8)
    group = new_uuid()
    single = {"query": {"resources": "VCPU:1"}, "consumer": _consumer()}
    single["server_group"] = {"uuid": group, "policy": "anti-affinity"}
    earlier = _post(api, single).json_body["root_provider_uuid"]
    answer = _post(api, _gang(3, group=(group, "anti-affinity"), weigh={"policy": "pack"})).json_body
    roots = _roots(answer)
    assert len(set(roots)) == 3 and earlier not in roots
    assert len(_members(db)) == 4
    r = _post(api, _gang(2, group=(group, "anti-affinity")), 409)
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST
    assert "1 of its 2 members could be placed" in error_detail(r)
    assert f"the anti-affinity policy of server group {group}" in error_detail(r)
    assert sum(usage["VCPU"] for usage in _usages(api, hosts).values()) == 4


def test_affinity_puts_the_gang_on_one_host_and_the_next_beside_it(api):
    _hosts(api, 3, vcpus=4)
    group = new_uuid()
    first = _roots(_post(api, _gang(3, group=(group, "affinity"))).json_body)
    assert len(set(first)) == 1
    second = _roots(_post(api, _gang(1, group=(group, "affinity"))).json_body)
    assert second == first[:1]
    r = _post(api, _gang(2, group=(group, "affinity")), 409)
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST
    assert f"the affinity policy of server group {group}" in error_detail(r)


# --- topology ------------------------------------------------------------------------------------------


def test_within_keeps_the_gang_under_one_aggregate_and_takes_the_next_when_one_is_full(api):
    rack_a, rack_b = new_uuid(), new_uuid()
    in_a = set(_hosts(api, 2, aggregates=[rack_a], prefix="a"))
    in_b = set(_hosts(api, 3, aggregates=[rack_b], prefix="b"))
    _hosts(api, 1, vcpus=8, prefix="loose")
    topology = {"within": [rack_b, rack_a]}
    # Both racks take four; rack a leaves no room over, so it is chosen.
    first = _roots(_post(api, _gang(4, topology=topology)).json_body)
    assert set(first) <= in_a
    second = _roots(_post(api, _gang(4, topology=topology)).json_body)
    assert set(second) <= in_b
    # Rack b has room for two more, the loose host for eight: three under one rack is the topology's no.
    r = _post(api, _gang(3, topology=topology), 409)
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST
    assert "2 of its 3 members could be placed" in error_detail(r) and "the topology asked" in error_detail(r)


def test_within_many_aggregates_chooses_as_the_planner_does(api):
    # More racks than the board plans over at once (WITHIN_AGGREGATES): the choice is still the
    # planner's. A tree counts for at most the gang's size, so every rack of one host that takes a
    # gang of three leaves none over: the best host's rack goes first (spread: the most room), ties
    # to the order given.
    rooms = [5, 3, 8, 3, 2, 6, 4]
    racks = [new_uuid() for _ in rooms]
    hosts = [
        _hosts(api, 1, vcpus=room, aggregates=[rack], prefix=f"r{n}")[0]
        for n, (room, rack) in enumerate(zip(rooms, racks, strict=True))
    ]
    topology = {"within": racks}
    chosen = [_roots(_post(api, _gang(3, topology=topology)).json_body) for _ in range(8)]
    assert chosen == [[hosts[n]] * 3 for n in (2, 5, 0, 2, 6, 1, 3, 5)]
    r = _post(api, _gang(3, topology=topology), 409)
    assert "2 of its 3 members could be placed" in error_detail(r)


@pytest.mark.parametrize(("asked", "max_skew"), [(7, 1), (6, 0), (8, 2)])
def test_spread_over_keeps_the_counts_within_max_skew(api, asked, max_skew):
    racks = [new_uuid() for _ in range(3)]
    rack_of = {}
    for number, (rack, count) in enumerate(zip(racks, (1, 2, 3), strict=True)):
        for host in _hosts(api, count, vcpus=8, aggregates=[rack], prefix=f"r{number}"):
            rack_of[host] = rack
    # Packing would put everyone on one host if the topology let it.
    answer = _post(
        api, _gang(asked, topology={"spread_over": racks, "max_skew": max_skew}, weigh={"policy": "pack"})
    ).json_body
    counts = Counter(rack_of[root] for root in _roots(answer))
    per_rack = [counts[rack] for rack in racks]
    assert sum(per_rack) == asked and max(per_rack) - min(per_rack) <= max_skew


def test_spread_over_a_small_aggregate_places_what_the_skew_allows(api):
    small, large = new_uuid(), new_uuid()
    _hosts(api, 1, vcpus=1, aggregates=[small], prefix="small")
    _hosts(api, 2, vcpus=8, aggregates=[large], prefix="large")
    topology = {"spread_over": [small, large]}
    r = _post(api, _gang(4, topology=topology), 409)
    # One on the small aggregate, so at most two on the large one.
    assert "3 of its 4 members could be placed" in error_detail(r) and "the topology asked" in error_detail(r)
    answer = _post(api, _gang(4, topology=topology, min_count=2)).json_body
    assert answer["placed"] == 3 and len(answer["not_placed"]) == 1


def test_an_unknown_aggregate_is_a_400_writing_nothing(api, db):
    (host,) = _hosts(api, 1)
    r = _post(api, _gang(1, topology={"within": [new_uuid()]}, group=(new_uuid(), "anti-affinity")), 400)
    assert error_code(r) == error_codes.PICK_GANG_UNKNOWN_AGGREGATE
    assert _usages(api, [host])[host]["VCPU"] == 0 and _groups(db) == []


def test_affinity_spread_over_several_aggregates_is_a_contradiction(api):
    _hosts(api, 1, aggregates=[rack := new_uuid()])
    r = _post(api, _gang(2, group=(new_uuid(), "affinity"), topology={"spread_over": [rack, new_uuid()]}), 400)
    assert error_code(r) == error_codes.PICK_GANG_TOPOLOGY_CONFLICT


def test_anti_affinity_within_too_small_a_rack_is_only_a_409(api):
    rack = new_uuid()
    _hosts(api, 2, aggregates=[rack])
    r = _post(api, _gang(3, group=(new_uuid(), "anti-affinity"), topology={"within": [rack]}), 409)
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST


# --- bad input ---------------------------------------------------------------------------------------

_SAME = new_uuid()


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.update(consumers=[]),
        lambda b: b.update(consumers=[_consumer() for _ in range(MAX_GANG + 1)]),
        lambda b: b.update(min_count=0),
        lambda b: b.update(min_count=3),
        lambda b: b.update(consumers=[_consumer(_SAME), _consumer(_SAME.upper())]),
        lambda b: b.update(consumer=_consumer()),
        lambda b: b.pop("consumers"),
        lambda b: b.update(topology={"around": [new_uuid()]}),
        lambda b: b.update(topology={"within": [new_uuid()], "max_skew": 1}),
        lambda b: b.update(topology={"spread_over": [new_uuid()], "max_skew": -1}),
        lambda b: b.update(topology={"within": []}),
        lambda b: b.update(topology={"spread_over": []}),
        lambda b: b.update(alternates=2),
        lambda b: b.update(consumers=[{"uuid": new_uuid()}]),
    ],
    ids=[
        "empty",
        "more than MAX_GANG",
        "min_count 0",
        "min_count above the consumers",
        "a consumer twice",
        "consumer and consumers",
        "neither",
        "unknown topology key",
        "within with max_skew",
        "negative max_skew",
        "empty within",
        "empty spread_over",
        "alternates",
        "consumer without project",
    ],
)
def test_bad_gang_input_is_a_400_with_its_code_writing_nothing(api, db, change):
    (host,) = _hosts(api, 1, vcpus=8)
    body = _gang(2, group=(new_uuid(), "anti-affinity"))
    change(body)
    r = _post(api, body, 400)
    assert error_code(r) == error_codes.PICK_GANG_BAD_REQUEST
    assert _usages(api, [host])[host]["VCPU"] == 0 and _groups(db) == []


# --- leases --------------------------------------------------------------------------------------------


def test_each_member_has_its_own_lease_confirmed_or_released_alone(api):
    hosts = _hosts(api, 3)
    consumers = [new_uuid() for _ in range(3)]
    _post(api, _gang(consumers=consumers, lease_seconds=600))
    leased = {lease["consumer_uuid"] for lease in api.get("/berth/leases").json_body["leases"]}
    assert leased == set(consumers)
    kept, released, waiting = consumers
    assert api.post(f"/berth/leases/{kept}/confirm").status_code == 204
    assert api.delete(f"/berth/leases/{released}").status_code == 204
    assert api.get(f"/allocations/{kept}").json_body["allocations"] != {}
    assert api.get(f"/allocations/{released}").json_body["allocations"] == {}
    assert api.get(f"/allocations/{waiting}").json_body["allocations"] != {}
    assert [lease["consumer_uuid"] for lease in api.get("/berth/leases").json_body["leases"]] == [waiting]
    assert sum(usage["VCPU"] for usage in _usages(api, hosts).values()) == 2


def test_a_single_pick_still_answers_as_before(api):
    _hosts(api, 1)
    body = {"query": {"resources": "VCPU:1"}, "consumer": _consumer()}
    answer = _post(api, body).json_body
    assert set(answer) == {
        "allocation_request",
        "root_provider_uuid",
        "weight",
        "trees_fitted",
        "trees_weighed",
        "alternates",
    }


# --- placed whenever a placement exists: small clouds, every placement enumerated ----------------------


def _exists(rooms, need, asked, policy, topology, rack_of, racks, max_skew):
    """Whether ``asked`` identical members fit, by trying every assignment of members to trees."""
    trees = range(len(rooms))
    for assignment in itertools.combinations_with_replacement(trees, asked):
        counts = Counter(assignment)
        if any(any(need[rc] * count > rooms[tree].get(rc, 0) for rc in need) for tree, count in counts.items()):
            continue
        if policy == "anti-affinity" and any(count > 1 for count in counts.values()):
            continue
        if policy == "affinity" and len(counts) > 1:
            continue
        if topology == "within" and (len({rack_of[tree] for tree in counts}) != 1 or rack_of[assignment[0]] is None):
            continue
        if topology == "spread_over":
            if any(rack_of[tree] is None for tree in counts):
                continue
            per_rack = Counter(rack_of[tree] for tree in assignment)
            values = [per_rack[rack] for rack in racks]
            if max(values) - min(values) > max_skew:
                continue
        return True
    return asked == 0


def _cloud(rng):
    racks = 2
    count = rng.randint(1, 4)
    classes = ["VCPU"] if rng.random() < 0.5 else ["VCPU", "MEMORY_MB"]
    rooms = [{rc: rng.randint(0, 4) for rc in classes} for _ in range(count)]
    rooms = [{rc: amount for rc, amount in room.items() if amount} or {"VCPU": 1} for room in rooms]
    need = {rc: rng.randint(1, 2) for rc in classes}
    rack_of = [rng.choice([0, 1, None]) for _ in range(count)]
    policy = rng.choice([None, "anti-affinity", "affinity"])
    topology = rng.choice([None, "within", "spread_over"])
    if policy == "affinity" and topology == "spread_over":
        topology = "within"
    return rooms, need, rack_of, racks, policy, topology, rng.randint(0, 2), rng.randint(1, 5)


def test_a_gang_is_placed_exactly_when_a_placement_exists(api, app, db):
    rng = random.Random(20260127)
    cases = 40 if db.engine.dialect.name == "sqlite" else 20
    outcomes: Counter[str] = Counter()
    while sum(outcomes.values()) < cases:
        rooms, need, rack_of, racks, policy, topology, max_skew, asked = _cloud(rng)
        if topology and len({rack for rack in rack_of if rack is not None}) < racks:
            continue  # an aggregate no provider is in: a 400, tested above
        reset(db)
        _clear_groups(db)
        rack_uuids = [new_uuid() for _ in range(racks)]
        for number, room in enumerate(rooms):
            rack = rack_of[number]
            api.create_provider(
                f"h{number}", inventory=room, aggregates=[rack_uuids[rack]] if rack is not None else None
            )
        body = _gang(asked, resources=",".join(f"{rc}:{amount}" for rc, amount in need.items()))
        if policy:
            body["server_group"] = {"uuid": new_uuid(), "policy": policy}
        if topology == "within":
            body["topology"] = {"within": rack_uuids}
        elif topology == "spread_over":
            body["topology"] = {"spread_over": rack_uuids, "max_skew": max_skew}
        case = (rooms, need, rack_of, policy, topology, max_skew, asked)
        most = max(
            k for k in range(asked + 1) if _exists(rooms, need, k, policy, topology, rack_of, range(racks), max_skew)
        )
        outcomes["all" if most == asked else "some" if most else "none"] += 1
        r = api.post("/berth/pick", body)
        if most == asked:
            assert r.status_code == 200, (case, r.json_body)
            assert r.json_body["placed"] == asked
            continue
        assert r.status_code == 409, (case, r.json_body)
        assert f"{most} of its {asked} members could be placed" in error_detail(r), (case, error_detail(r))
        # Nothing of the refused gang was written: a gang that settles for one finds as much room.
        r = api.post("/berth/pick", {**body, "min_count": 1, "consumers": [_consumer() for _ in range(asked)]})
        if most:
            assert r.status_code == 200, (case, error_detail(r))
            assert r.json_body["placed"] == most, (case, r.json_body)
        else:
            assert r.status_code == 409, (case, r.json_body)
    # The cases reach every outcome.
    assert set(outcomes) == {"all", "some", "none"}, outcomes


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    capacities=st.lists(st.integers(0, 4), min_size=1, max_size=5),
    racks=st.lists(st.sampled_from([0, 1, 2, None]), min_size=5, max_size=5),
    asked=st.integers(1, 6),
    policy=st.sampled_from([None, "anti-affinity", "affinity"]),
    topology=st.sampled_from([None, "within", "spread_over"]),
    max_skew=st.integers(0, 2),
)
def test_the_plan_places_the_most_any_placement_can(capacities, racks, asked, policy, topology, max_skew):
    if policy == "affinity" and topology == "spread_over":
        topology = None
    rack_of = racks[: len(capacities)]
    trees = [
        GangTree(index, capacity, frozenset({rack}) if rack is not None else frozenset())
        for index, (capacity, rack) in enumerate(zip(capacities, rack_of, strict=True))
    ]
    shape = {"within": Within((0, 1, 2)), "spread_over": SpreadOver((0, 1, 2), max_skew)}.get(topology)
    rooms = [{"VCPU": capacity} for capacity in capacities]
    most = max(
        k for k in range(asked + 1) if _exists(rooms, {"VCPU": 1}, k, policy, topology, rack_of, range(3), max_skew)
    )
    size = len(trees)
    dealer = Dealer(*(np.zeros(size) for _ in range(5)), per_member=[(0.0, 1.0, 0.0)] * size, multipliers=Multipliers())
    plan = plan_gang(trees, asked, 1, policy, shape, dealer)
    placed = len(plan.trees) if isinstance(plan, Plan) else 0
    assert placed == most
    if isinstance(plan, Plan):
        counts = Counter(plan.trees)
        assert all(count <= capacities[tree] for tree, count in counts.items())
        assert _exists(
            [{"VCPU": counts.get(i, 0)} for i in range(size)],
            {"VCPU": 1},
            placed,
            policy,
            topology,
            rack_of,
            range(3),
            max_skew,
        )


# --- live: gangs racing into one anti-affinity group ---------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def live(request, tmp_path):
    yield from live_on(request, tmp_path, "gang")


def test_racing_gangs_of_one_anti_affinity_group_never_share_a_host(live):
    client = live.client()
    hosts = {live_host(client, f"host-{i}", {"VCPU": 8}) for i in range(20)}
    group = str(uuid.uuid4())
    gangs = 32
    bodies = [_gang(2, group=(group, "anti-affinity"), min_count=1) for _ in range(gangs)]
    start = threading.Barrier(gangs)

    def post(body):
        start.wait()
        r = client.request("POST", "/berth/pick", body)
        return r.status_code, r.json()

    try:
        with ThreadPoolExecutor(gangs) as pool:
            outcomes = list(pool.map(post, bodies))
        assert {status for status, _ in outcomes} <= {200, 409}, outcomes
        roots = [root for status, answer in outcomes if status == 200 for root in _roots(answer)]
        # Over-asked (64 members, 20 hosts): every host taken, by one member each.
        assert len(roots) == len(hosts) and set(roots) == hosts
        for status, answer in outcomes:
            if status == 409:
                assert answer["errors"][0]["code"] == error_codes.PICK_GANG_NO_VALID_HOST
        for host in hosts:
            assert len(client.get(f"/resource_providers/{host}/allocations").json()["allocations"]) == 1
    finally:
        client.close()


def test_a_shared_pool_counted_for_every_host_is_planned_again_around(api):
    # Each host sees the whole pool, so the first plan counts on four members where the pool holds
    # two: the write finds it, rolls back to its savepoint and plans again.
    aggregate = new_uuid()
    hosts = _hosts(api, 2, aggregates=[aggregate])
    pool = api.create_provider(
        "pool", inventory={"DISK_GB": 20}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    consumers = [new_uuid() for _ in range(3)]
    r = _post(api, _gang(consumers=consumers, resources="VCPU:1,DISK_GB:10"), 409)
    assert "2 of its 3 members could be placed" in error_detail(r)
    answer = _post(api, _gang(consumers=consumers, resources="VCPU:1,DISK_GB:10", min_count=2)).json_body
    assert answer["placed"] == 2 and answer["not_placed"] == consumers[2:]
    assert api.get(f"/resource_providers/{pool}/usages").json_body["usages"] == {"DISK_GB": 20}
    assert sum(usage["VCPU"] for usage in _usages(api, hosts).values()) == 2
    assert api.get(f"/allocations/{consumers[2]}").json_body["allocations"] == {}


# --- planned on the board, written after ----------------------------------------------------------------


def _fill(api, host, vcpus=2):
    consumer = new_uuid()
    body = {
        "allocations": {host: {"resources": {"VCPU": vcpus}}},
        "project_id": "proj",
        "user_id": "user",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert api.put(f"/allocations/{consumer}", body).status_code == 204
    return consumer


def test_a_plan_whose_room_was_taken_since_writes_nothing_and_the_gang_goes_elsewhere(api, db):
    hosts = _hosts(api, 4)
    consumers = [new_uuid() for _ in range(2)]
    request = GangRequest(
        query=parse_query(QueryArgs([("resources", "VCPU:1")]), mv.MAX),
        multipliers=multipliers_for("pack", None),
        consumers=tuple(Consumer(c, "proj", "user", "INSTANCE") for c in consumers),
        min_count=2,
    )
    cache = ProviderCache()
    plan = db.read(lambda conn: plan_gang_on_board(conn, request, cache, HostBoard(min_age=0.0)))
    assert isinstance(plan, GangBoardPlan) and len(plan.members) == 2
    planned = {member.root_id for member in plan.members}
    # Packed: both on one host, which a claim then fills before the gang's write.
    assert len(planned) == 1
    uuid_of = {member.root_id: plan.providers[member.root_id].uuid for member in plan.members}
    _fill(api, uuid_of[next(iter(planned))])
    with pytest.raises(PlanOutdated):
        db.write(lambda conn: claim_gang_on_board(conn, request, plan))
    for consumer in consumers:
        assert api.get(f"/allocations/{consumer}").json_body["allocations"] == {}
    # Planned again from a new read, which sees the host full.
    placed = place_gang(db, request, cache, HostBoard(min_age=0.0))
    assert len(placed.members) == 2 and not placed.not_placed
    roots = {member.root_provider_uuid for member in placed.members}
    assert roots <= set(hosts) and uuid_of[next(iter(planned))] not in roots
    # Or, with no plan, by the search of every tree.
    others = tuple(Consumer(new_uuid(), "proj", "user", "INSTANCE") for _ in range(2))
    more = dataclasses.replace(request, consumers=others)
    assert len(db.write(lambda conn: pick_gang(conn, more, cache)).members) == 2
    assert sum(usage["VCPU"] for usage in _usages(api, hosts).values()) == 6


def test_a_board_behind_the_books_that_sees_no_room_does_not_refuse_a_gang_that_fits(api, app):
    app.host_board = HostBoard(min_age=3600.0)
    hosts = _hosts(api, 2)
    held = [_fill(api, hosts[0]), _fill(api, hosts[1], vcpus=1)]
    _post(api, _gang(2), 409)  # the board is read now: room for one member
    for consumer in held:
        assert api.delete(f"/allocations/{consumer}").status_code == 204
    answer = _post(api, _gang(4)).json_body
    assert answer["placed"] == 4 and sorted(Counter(_roots(answer)).values()) == [2, 2]


def test_a_rack_the_board_does_not_hold_yet_is_read_before_every_tree_is_searched(api, app, monkeypatch):
    if not app.host_board.enabled:
        pytest.skip("without a board every gang searches every tree")
    app.host_board = HostBoard(min_age=3600.0)
    hosts = _hosts(api, 3, vcpus=4)
    _post(api, _gang(1))  # the board is read now, without the rack
    rack = new_uuid()
    for host in hosts[:2]:
        generation = api.get(f"/resource_providers/{host}").json_body["generation"]
        body = {"aggregates": [rack], "resource_provider_generation": generation}
        assert api.put(f"/resource_providers/{host}/aggregates", body).status_code == 200

    def every_tree(*args, **kwargs):
        raise AssertionError("the gang was placed by a search of every tree in its write")

    monkeypatch.setattr("berth.store.pick.gang.on_board.pick_gang", every_tree)
    answer = _post(api, _gang(4, topology={"within": [rack]})).json_body
    assert answer["placed"] == 4 and set(_roots(answer)) <= set(hosts[:2])


def test_a_topology_may_name_every_rack_of_a_large_cloud_and_no_more_than_its_bound(api):
    _hosts(api, 1)
    racks = [new_uuid() for _ in range(MAX_GANG + 500)]
    # Past the schema: the racks are unknown to the cloud.
    r = _post(api, _gang(1, topology={"within": racks}), 400)
    assert error_code(r) == error_codes.PICK_GANG_UNKNOWN_AGGREGATE
    r = _post(api, _gang(1, topology={"spread_over": racks * 7}), 400)
    assert error_code(r) == error_codes.PICK_GANG_BAD_REQUEST


@pytest.mark.parametrize("room", [1, 8])
def test_an_existing_consumer_fails_the_whole_gang_even_when_min_count_would_leave_it_out(api, room):
    """``min_count`` lets members be left out for lack of room, never for existing: a gang naming a
    consumer that exists is refused whole, whether or not the room would have reached it."""
    (host,) = _hosts(api, 1, vcpus=room + 1)
    taken = new_uuid()
    api.allocate(taken, {host: {"VCPU": 1}})
    fresh = new_uuid()
    r = _post(api, _gang(consumers=[fresh, taken], min_count=1), 409)
    assert error_code(r) == error_codes.CONCURRENT_UPDATE
    assert _usages(api, [host])[host]["VCPU"] == 1
    assert api.get(f"/allocations/{fresh}").json_body["allocations"] == {}

"""POST /berth/pick with ``priority`` and ``preempt``: a pick that finds no room removes consumers of
strictly lower priority from one tree, the cheapest set, and claims it in the same transaction;
GET /berth/preemptions records them. In process on both databases, and against a live multi-worker
server."""

from __future__ import annotations

import datetime
import itertools
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from apihelpers import error_code, error_detail, new_uuid
from hypothesis import given
from hypothesis import strategies as st
from livehelpers import live_on

from berth.domain import error_codes
from berth.store import schema
from berth.store.leases.ledger import reap_expired
from berth.store.pick.board.host_board import HostBoard
from berth.store.pick.preemption import EXACT_UP_TO, Holder, cheapest_victims, cost_of
from berth.store.pick.priorities import MAX_PRIORITY, MIN_PRIORITY


@pytest.fixture
def api(api, app, db):
    with db.engine.begin() as conn:
        conn.execute(schema.server_group_members.delete())
        conn.execute(schema.server_groups.delete())
        conn.execute(schema.allocation_leases.delete())
    app.host_board = HostBoard(min_age=0.0)
    return api


def _body(resources="VCPU:2", *, consumer=None, priority=None, preempt=None, project="proj", **extra):
    body = {
        "query": {"resources": resources},
        "consumer": {
            "uuid": consumer or new_uuid(),
            "project_id": project,
            "user_id": "user",
            "consumer_type": "INSTANCE",
        },
    }
    if priority is not None:
        body["priority"] = priority
    if preempt is not None:
        body["preempt"] = preempt
    body.update(extra)
    return body


def _pick(api, resources="VCPU:2", expect=200, **kw):
    r = api.post("/berth/pick", _body(resources, **kw))
    assert r.status_code == expect, r.data
    return r.json_body


def _hosts(api, count, vcpus=4, prefix="host"):
    return [api.create_provider(f"{prefix}-{i}", inventory={"VCPU": vcpus}) for i in range(count)]


def _place(api, host, vcpus, priority=None, project="low"):
    """A consumer of ``vcpus`` on ``host``, placed by a pick (of that priority) into that tree."""
    consumer = new_uuid()
    query = {"resources": f"VCPU:{vcpus}", "in_tree": host}
    body = _body(consumer=consumer, priority=priority, project=project)
    body["query"] = query
    r = api.post("/berth/pick", body)
    assert r.status_code == 200, r.data
    return consumer


def _held(api, consumer):
    return api.get(f"/allocations/{consumer}").json_body["allocations"]


def _priorities(db):
    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.select(schema.consumer_priorities.c.consumer_uuid, schema.consumer_priorities.c.priority)
        )
        return dict(rows.all())


def _victims(answer):
    return sorted(victim["consumer_uuid"] for victim in answer["preempted"])


# --- the choice of victims on one tree, against every subset ----------------------------------------


def _holders(sizes, priorities, youths):
    return [
        Holder(f"c{i:02d}", priority, None, "p", {(1, 1): size}, youth)
        for i, (size, priority, youth) in enumerate(zip(sizes, priorities, youths, strict=True))
    ]


def _room_for(need, free=0):
    return lambda victims: free + sum(v.held[(1, 1)] for v in victims) >= need


@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(-3, 0), st.integers(0, 3)), min_size=1, max_size=8),
    st.integers(1, 12),
)
def test_the_victims_chosen_are_the_cheapest_of_every_set_that_makes_room(held, need):
    holders = _holders(*zip(*held, strict=True))
    fits = _room_for(need)
    fitting = [
        victims
        for size in range(1, len(holders) + 1)
        for victims in itertools.combinations(holders, size)
        if fits(victims)
    ]
    chosen = cheapest_victims(holders, fits, Counter())
    if not fitting:
        assert chosen is None
    else:
        assert chosen is not None and fits(chosen)
        assert cost_of(chosen) == min(cost_of(victims) for victims in fitting)


def test_fewest_beats_lower_priorities_and_a_tree_needing_more_than_another_is_dropped():
    holders = _holders([1, 1, 2], [-10, -10, 0], [0, 1, 2])
    assert [v.uuid for v in cheapest_victims(holders, _room_for(2), Counter())] == ["c02"]
    assert cheapest_victims(_holders([1, 1], [-9, -9], [0, 1]), _room_for(2), Counter(), most=1) is None


def test_above_the_exact_bound_the_greedy_choice_is_the_cheapest_of_equal_sizes():
    count = EXACT_UP_TO + 8
    holders = _holders([1] * count, [-(i % 3) for i in range(count)], list(range(count)))
    chosen = cheapest_victims(holders, _room_for(5), Counter())
    assert chosen is not None and len(chosen) == 5
    fitting = [victims for victims in itertools.combinations(holders, 5)]
    assert cost_of(chosen) == min(cost_of(victims) for victims in fitting)


# --- priority -------------------------------------------------------------------------------------


@pytest.mark.parametrize("priority", [MIN_PRIORITY - 1, MAX_PRIORITY + 1, 10**9])
def test_a_priority_out_of_range_is_a_400_with_a_code(api, priority):
    _hosts(api, 1)
    r = api.post("/berth/pick", _body(priority=priority))
    assert r.status_code == 400
    assert error_code(r) == error_codes.PICK_PRIORITY_OUT_OF_RANGE
    assert f"from {MIN_PRIORITY} to {MAX_PRIORITY}" in error_detail(r)
    gang = {"query": {"resources": "VCPU:1"}, "consumers": [_body()["consumer"]], "priority": priority}
    assert error_code(api.post("/berth/pick", gang)) == error_codes.PICK_PRIORITY_OUT_OF_RANGE


def test_a_priority_not_an_integer_is_a_400(api):
    _hosts(api, 1)
    assert api.post("/berth/pick", _body(priority="high")).status_code == 400
    assert api.post("/berth/pick", _body(preempt="yes")).status_code == 400


def test_the_priority_is_kept_with_the_consumer_and_goes_with_it_by_every_path(api, db):
    host = _hosts(api, 1, vcpus=64)[0]
    default = _place(api, host, 1)
    highest, lowest = _place(api, host, 1, MAX_PRIORITY), _place(api, host, 1, MIN_PRIORITY)
    # The default is kept as no row at all.
    assert _priorities(db) == {highest: MAX_PRIORITY, lowest: MIN_PRIORITY}
    assert default not in _priorities(db)
    deleted, emptied, leased = _place(api, host, 1, 5), _place(api, host, 1, 6), new_uuid()
    _pick(api, "VCPU:1", consumer=leased, priority=7, lease_seconds=0)
    gang = {"query": {"resources": "VCPU:1"}, "consumers": [_body()["consumer"] for _ in range(2)], "priority": 8}
    members = [m["consumer_uuid"] for m in api.post("/berth/pick", gang).json_body["members"]]
    assert {m: _priorities(db)[m] for m in members} == dict.fromkeys(members, 8)
    assert api.delete(f"/allocations/{deleted}").status_code == 204
    generation = api.get(f"/allocations/{emptied}").json_body["consumer_generation"]
    api.allocate(emptied, {}, project="low", generation=generation)
    # A consumer whose allocations are replaced (moved, resized) keeps its priority.
    generation = api.get(f"/allocations/{highest}").json_body["consumer_generation"]
    api.allocate(highest, {host: {"VCPU": 2}}, project="low", generation=generation)
    with db.engine.begin() as conn:
        assert leased in reap_expired(
            conn, datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=1)
        )
    assert set(_priorities(db)) == {highest, lowest, *members}


# --- preemption -------------------------------------------------------------------------------------


def test_preempt_without_need_does_not_preempt(api, db):
    host = _hosts(api, 1, vcpus=6)[0]
    low = _place(api, host, 2, -5)
    answer = _pick(api, priority=10, preempt=True)
    assert answer["preempted"] == []
    assert _held(api, low)
    assert api.get("/berth/preemptions").json_body == {"preemptions": []}
    # A pick that does not ask to preempt answers as before, without the field.
    assert "preempted" not in _pick(api, "VCPU:1", priority=10)


def test_without_preempt_a_full_cloud_is_a_409_and_nothing_moves(api):
    host = _hosts(api, 1)[0]
    low = _place(api, host, 4, -5)
    r = api.post("/berth/pick", _body(priority=10))
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST
    assert _held(api, low)


def test_the_fewest_victims_win_over_lower_priorities(api):
    host = _hosts(api, 1)[0]
    small = [_place(api, host, 1, -10), _place(api, host, 1, -10)]
    big = _place(api, host, 2, 0)
    answer = _pick(api, priority=10, preempt=True)
    assert _victims(answer) == [big]
    assert answer["preempted"] == [{"consumer_uuid": big, "priority": 0, "root_provider_uuid": host}]
    assert answer["root_provider_uuid"] == host
    assert not _held(api, big)
    assert all(_held(api, consumer) for consumer in small)


def test_then_the_lowest_priority_then_the_lowest_sum(api):
    a, b = _hosts(api, 2)
    _place(api, a, 2, -1)
    _place(api, a, 2, -1)
    lower = [_place(api, b, 2, -9), _place(api, b, 2, -1)]
    # Both hosts need two victims; b's highest is -1 as a's, and its sum lower.
    answer = _pick(api, "VCPU:4", priority=0, preempt=True)
    assert _victims(answer) == sorted(lower)
    assert answer["root_provider_uuid"] == b


def test_the_highest_victim_priority_decides_before_the_sum(api):
    a, b = _hosts(api, 2)
    on_a = [_place(api, a, 2, -2), _place(api, a, 2, -2)]
    _place(api, b, 2, -100)
    _place(api, b, 2, -1)
    answer = _pick(api, "VCPU:4", priority=0, preempt=True)
    assert _victims(answer) == sorted(on_a)


def test_then_the_youngest(api):
    a, b, c = _hosts(api, 3)
    _place(api, a, 4, -3)
    youngest = _place(api, b, 4, -3)
    _place(api, c, 4, -2)
    answer = _pick(api, "VCPU:4", priority=0, preempt=True)
    assert _victims(answer) == [youngest]
    # On one host: the youngest of equals goes first.
    host = _hosts(api, 1, prefix="one")[0]
    older, younger = _place(api, host, 2, -3), _place(api, host, 2, -3)
    answer = _pick(api, priority=0, preempt=True, query={"resources": "VCPU:2", "in_tree": host})
    assert _victims(answer) == [younger]
    assert _held(api, older)


def test_never_a_victim_of_equal_or_higher_priority(api):
    host = _hosts(api, 1)[0]
    equal, higher = _place(api, host, 2, 10), _place(api, host, 2, 11)
    r = api.post("/berth/pick", _body(priority=10, preempt=True))
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST
    assert "preempting consumers of priority below 10" in error_detail(r)
    assert _held(api, equal) and _held(api, higher)
    assert api.get("/berth/preemptions").json_body == {"preemptions": []}


def test_a_moves_migration_consumer_is_never_a_victim(api):
    host = _hosts(api, 1)[0]
    migration = new_uuid()
    body = {
        "allocations": {host: {"resources": {"VCPU": 4}}},
        "consumer_generation": None,
        "project_id": "low",
        "user_id": "user",
        "consumer_type": "MIGRATION",
    }
    assert api.put(f"/allocations/{migration}", body).status_code == 204
    r = api.post("/berth/pick", _body(priority=10, preempt=True))
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST
    assert _held(api, migration)
    assert api.get("/berth/preemptions").json_body == {"preemptions": []}


def test_the_instance_a_move_places_again_is_never_its_victim(api, db):
    # A resize to a flavor of higher priority: the instance, of the old flavor's lower priority,
    # is the cheapest victim there is, and would make room for its own move (its server then ended
    # as preempted). It is not a candidate; a consumer of lower priority elsewhere is.
    a, b, c = _hosts(api, 3)
    instance = _place(api, a, 4, -5)
    _place(api, b, 4, 10)
    other = _place(api, c, 4, -1)
    migration = _body("VCPU:4", priority=5, preempt=True, moving=instance)
    migration["consumer"]["consumer_type"] = "MIGRATION"
    r = api.post("/berth/pick", migration)
    assert r.status_code == 200, r.data
    assert _victims(r.json_body) == [other] and r.json_body["root_provider_uuid"] == c
    assert _held(api, instance)[a]["resources"] == {"VCPU": 4}
    assert _priorities(db)[instance] == -5
    # With no other victim, the move is refused and the instance keeps what it holds.
    again = _body("VCPU:4", priority=5, preempt=True, moving=instance)
    r = api.post("/berth/pick", again)
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST, r.data
    assert _held(api, instance)[a]["resources"] == {"VCPU": 4}
    assert [p["consumer_uuid"] for p in api.get("/berth/preemptions").json_body["preemptions"]] == [other]


def test_a_host_where_removing_every_lower_consumer_would_not_make_room_is_not_touched(api):
    a, b = _hosts(api, 2)
    on_a = [_place(api, a, 1, -1), _place(api, a, 3, 50)]
    on_b = [_place(api, b, 2, -1), _place(api, b, 2, -1)]
    # a would need one victim only if the consumer of priority 50 could go: it cannot.
    answer = _pick(api, "VCPU:4", priority=10, preempt=True)
    assert _victims(answer) == sorted(on_b)
    assert all(_held(api, consumer) for consumer in on_a)
    # And with no such host left, the pick is refused and a keeps everything.
    r = api.post("/berth/pick", _body("VCPU:4", priority=10, preempt=True))
    assert r.status_code == 409
    assert all(_held(api, consumer) for consumer in on_a)


def test_a_victim_is_removed_whole_everywhere_and_its_projects_usage_drops(api):
    a, b = _hosts(api, 2)
    victim = new_uuid()
    api.allocate(victim, {a: {"VCPU": 4}, b: {"VCPU": 1}}, project="low")
    other = _place(api, b, 3, -1)
    answer = _pick(api, "VCPU:4", priority=1, preempt=True)
    # The victim of priority 0 (no row) on a, removed from b too.
    assert _victims(answer) == [victim]
    assert not _held(api, victim)
    assert _held(api, other)
    usage = api.get(f"/resource_providers/{b}/usages").json_body["usages"]
    assert usage == {"VCPU": 3}
    assert api.get("/usages?project_id=low", version="1.9").json_body["usages"] == {"VCPU": 3}


def test_room_on_a_shared_pool_counts_for_every_tree_anchored_to_it_and_the_weighing_decides_a_tie(api):
    aggregate = new_uuid()
    a = api.create_provider("host-a", inventory={"VCPU": 4}, aggregates=[aggregate])
    b = api.create_provider("host-b", inventory={"VCPU": 4}, aggregates=[aggregate])
    pool = api.create_provider(
        "pool", inventory={"DISK_GB": 100}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    on_disk, on_cpus = new_uuid(), new_uuid()
    api.allocate(on_disk, {a: {"VCPU": 1}, pool: {"DISK_GB": 100}}, project="low")
    api.allocate(on_cpus, {a: {"VCPU": 3}}, project="low")
    # b has the CPUs but the pool no disk: removing on_disk makes room on a and on b alike (the same
    # victim, the same cost), and the weighing prefers b, whose CPUs are free (spread).
    answer = _pick(api, "VCPU:1,DISK_GB:50", priority=1, preempt=True)
    assert _victims(answer) == [on_disk]
    assert answer["root_provider_uuid"] == b
    assert answer["allocation_request"]["allocations"] == {
        b: {"resources": {"VCPU": 1}},
        pool: {"resources": {"DISK_GB": 50}},
    }
    assert _held(api, on_cpus)
    assert api.get(f"/resource_providers/{pool}/usages").json_body["usages"] == {"DISK_GB": 50}


def test_a_refused_preemption_writes_nothing(api, db):
    host = _hosts(api, 1)[0]
    low = _place(api, host, 4, -1)
    # The consumer exists already: the claim after the victims' removal is refused, and the whole
    # transaction with it.
    existing = _place(api, api.create_provider("other", inventory={"VCPU": 1}), 1, 0)
    r = api.post("/berth/pick", _body(consumer=existing, priority=5, preempt=True))
    assert r.status_code == 409
    assert error_code(r) == "placement.concurrent_update"
    assert _held(api, low)
    assert api.get("/berth/preemptions").json_body == {"preemptions": []}
    assert _priorities(db)[low] == -1


def test_the_quota_of_the_preempting_project_still_holds(api):
    host = _hosts(api, 1)[0]
    low = _place(api, host, 4, -1)
    assert api.put("/berth/quotas/proj", {"limits": {"VCPU": 1}}).status_code == 200
    r = api.post("/berth/pick", _body(priority=5, preempt=True))
    assert r.status_code == 409 and error_code(r) == error_codes.QUOTA_EXCEEDED
    assert _held(api, low)


def test_trees_the_server_group_forbids_are_not_candidates(api):
    a, b = _hosts(api, 2)
    group = {"uuid": new_uuid(), "policy": "anti-affinity"}
    first = _pick(api, "VCPU:2", priority=5, server_group=group, query={"resources": "VCPU:2", "in_tree": a})
    low_a = _place(api, a, 2, -1)
    low_b = _place(api, b, 4, -9)
    answer = _pick(api, "VCPU:2", priority=5, preempt=True, server_group=group)
    # a would take one victim as b does, but holds a member: b it is.
    assert first["root_provider_uuid"] == a
    assert answer["root_provider_uuid"] == b and _victims(answer) == [low_b]
    assert _held(api, low_a)
    # No tree left the group allows: refused, naming the group, nothing touched.
    r = api.post("/berth/pick", _body(priority=5, preempt=True, server_group=group))
    assert r.status_code == 409
    assert _held(api, low_a)


def _gang(resources="VCPU:2", count=2, *, priority=5, preempt=True, project="high", **extra):
    body = {
        "query": {"resources": resources},
        "consumers": [_body(project=project)["consumer"] for _ in range(count)],
        "priority": priority,
        "preempt": preempt,
    }
    body.update(extra)
    return body


def test_a_gang_with_a_topology_that_asks_to_preempt_is_a_400_with_a_code(api):
    _hosts(api, 1)
    gang = _gang(count=1, topology={"within": [new_uuid()]})
    r = api.post("/berth/pick", gang)
    assert r.status_code == 400
    assert error_code(r) == error_codes.PICK_GANG_PREEMPT_UNSUPPORTED


def test_a_gang_places_what_fits_then_preempts_for_the_rest(api, db):
    free, full = _hosts(api, 2)
    low = [_place(api, full, 2, priority=-1), _place(api, full, 2, priority=-1)]
    gang = _gang("VCPU:4", count=2)
    r = api.post("/berth/pick", gang)
    assert r.status_code == 200, r.data
    answer = r.json_body
    assert [m["consumer_uuid"] for m in answer["members"]] == [c["uuid"] for c in gang["consumers"]]
    assert sorted(m["root_provider_uuid"] for m in answer["members"]) == sorted([free, full])
    assert _victims(answer) == sorted(low)
    assert all(_held(api, victim) == {} for victim in low)
    priorities = _priorities(db)
    for consumer in gang["consumers"]:
        assert _held(api, consumer["uuid"])
        assert priorities[consumer["uuid"]] == 5
    records = api.get("/berth/preemptions").json_body["preemptions"]
    assert {record["preempted_by"] for record in records} == {gang["consumers"][1]["uuid"]}


def test_a_gang_that_fits_as_the_cloud_stands_preempts_nobody(api):
    _hosts(api, 2)
    low = _place(api, _hosts(api, 1, prefix="other")[0], 2, priority=-1)
    r = api.post("/berth/pick", _gang("VCPU:2", count=2))
    assert r.status_code == 200, r.data
    assert r.json_body["preempted"] == []
    assert _held(api, low)


def test_a_gang_that_preemption_cannot_complete_preempts_nobody_and_writes_nothing(api, db):
    (host,) = _hosts(api, 1)
    low = _place(api, host, 2, priority=-1)
    equal = _place(api, host, 2, priority=5)
    gang = _gang("VCPU:2", count=2)
    r = api.post("/berth/pick", gang)
    assert r.status_code == 409
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST
    assert "preempting" in error_detail(r)
    # The one member a preemption could have placed did not take the low consumer's room.
    assert _held(api, low)
    assert _held(api, equal)
    assert all(_held(api, c["uuid"]) == {} for c in gang["consumers"])
    assert api.get("/berth/preemptions").json_body["preemptions"] == []
    assert set(_priorities(db)) == {low, equal}


def test_a_gang_below_min_count_without_preempting_keeps_what_preemption_places(api):
    (host,) = _hosts(api, 1)
    low = _place(api, host, 2, priority=-1)
    _place(api, host, 2, priority=5)
    gang = _gang("VCPU:2", count=3, min_count=1)
    r = api.post("/berth/pick", gang)
    assert r.status_code == 200, r.data
    answer = r.json_body
    assert answer["placed"] == 1
    assert _victims(answer) == [low]
    assert answer["not_placed"] == [c["uuid"] for c in gang["consumers"][1:]]


def test_an_anti_affinity_gang_preempts_on_a_tree_of_its_own_for_each_member(api):
    hosts = _hosts(api, 3)
    lows = [_place(api, host, 4, priority=-1) for host in hosts]
    group = new_uuid()
    r = api.post("/berth/pick", _gang("VCPU:2", count=3, server_group={"uuid": group, "policy": "anti-affinity"}))
    assert r.status_code == 200, r.data
    answer = r.json_body
    assert sorted(m["root_provider_uuid"] for m in answer["members"]) == sorted(hosts)
    assert _victims(answer) == sorted(lows)


# --- the record -------------------------------------------------------------------------------------


def test_the_preemptions_are_listed_newest_first_with_who_and_when(api):
    a, b = _hosts(api, 2)
    first_victim = _place(api, a, 4, -1, project="p-a")
    second_victim = _place(api, b, 4, -2, project="p-b")
    before = datetime.datetime.now(datetime.UTC)
    first = new_uuid()
    _pick(api, "VCPU:4", consumer=first, priority=0, preempt=True)
    between = datetime.datetime.now(datetime.UTC)
    second = new_uuid()
    _pick(api, "VCPU:4", consumer=second, priority=0, preempt=True)
    listed = api.get("/berth/preemptions").json_body["preemptions"]
    # The lower priority (-2, on b) went first.
    assert [(p["consumer_uuid"], p["preempted_by"]) for p in listed] == [(first_victim, second), (second_victim, first)]
    newest = listed[0]
    assert newest["project_id"] == "p-a" and newest["priority"] == -1 and newest["root_provider_uuid"] == a
    moment = datetime.datetime.fromisoformat(newest["preempted_at"].replace("Z", "+00:00"))
    assert between <= moment <= datetime.datetime.now(datetime.UTC)
    assert api.get(f"/berth/preemptions?preempted_by={first}").json_body["preemptions"] == [listed[1]]
    since = between.isoformat().replace("+00:00", "Z")
    assert api.get(f"/berth/preemptions?since={since}").json_body["preemptions"] == [listed[0]]
    assert (
        len(api.get(f"/berth/preemptions?since={before.isoformat().replace('+00:00', 'Z')}").json_body["preemptions"])
        == 2
    )
    assert api.get("/berth/preemptions?limit=1").json_body["preemptions"] == [listed[0]]
    assert api.get(f"/berth/preemptions/{second_victim}").json_body == listed[1]
    assert api.get(f"/berth/preemptions/{new_uuid()}").status_code == 404
    for bad in ("limit=0", "since=yesterday", "preempted_by=nope", "color=red"):
        assert api.get(f"/berth/preemptions?{bad}").status_code == 400, bad


def test_only_admin_or_service_may_read_the_preemptions(api):
    assert api.get("/berth/preemptions", token="alice:tenant").status_code == 403
    assert api.get(f"/berth/preemptions/{new_uuid()}", token="alice:tenant").status_code == 403


# --- live: many preempting claimers at once ---------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def live(request, tmp_path):
    yield from live_on(request, tmp_path, "preempt")


def _full_host(client):
    """A host of 16 VCPUs, full of 16 consumers of priority -1 holding one each; its uuid and theirs."""
    host = str(uuid.uuid4())
    assert client.request("POST", "/resource_providers", {"name": "host", "uuid": host}).status_code == 200
    r = client.request(
        "PUT",
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 16}}},
    )
    assert r.status_code == 200, r.text
    low = []
    for _ in range(16):
        body = _body("VCPU:1", priority=-1, project="low")
        assert client.request("POST", "/berth/pick", body).status_code == 200
        low.append(body["consumer"]["uuid"])
    return host, low


def test_racing_preempting_claimers_preempt_each_victim_once_and_place_what_fits(live):
    client = live.client()
    host, low = _full_host(client)
    bodies = [_body("VCPU:2", priority=5, preempt=True, project="high") for _ in range(64)]
    start = threading.Barrier(len(bodies))

    def send(body):
        start.wait()
        r = client.request("POST", "/berth/pick", body)
        return r.status_code, r.json()

    with ThreadPoolExecutor(len(bodies)) as pool:
        outcomes = list(pool.map(send, bodies))
    statuses = [status for status, _ in outcomes]
    placed = [answer for status, answer in outcomes if status == 200]
    assert set(statuses) <= {200, 409}, outcomes
    assert len(placed) == 8
    assert {answer["errors"][0]["code"] for status, answer in outcomes if status == 409} == {
        error_codes.PICK_NO_VALID_HOST
    }
    victims = [victim["consumer_uuid"] for answer in placed for victim in answer["preempted"]]
    assert sorted(victims) == sorted(low)
    assert all(len(answer["preempted"]) == 2 for answer in placed)
    records = client.request("GET", "/berth/preemptions").json()["preemptions"]
    assert sorted(record["consumer_uuid"] for record in records) == sorted(low)
    placed_by = {
        answer_body["consumer"]["uuid"]
        for answer_body, (status, _) in zip(bodies, outcomes, strict=True)
        if status == 200
    }
    assert {record["preempted_by"] for record in records} == placed_by
    assert client.get(f"/resource_providers/{host}/usages").json()["usages"] == {"VCPU": 16}
    client.close()


def test_racing_preempting_gangs_are_placed_whole_or_not_at_all(live):
    client = live.client()
    host, low = _full_host(client)
    gangs = [_gang("VCPU:2", count=2) for _ in range(8)]
    start = threading.Barrier(len(gangs))

    def send(body):
        start.wait()
        r = client.request("POST", "/berth/pick", body)
        return r.status_code, r.json()

    with ThreadPoolExecutor(len(gangs)) as pool:
        outcomes = list(pool.map(send, gangs))
    placed = [answer for status, answer in outcomes if status == 200]
    assert {status for status, _ in outcomes} <= {200, 409}, outcomes
    # Four gangs of two members of 2 VCPUs fill the 16; each whole, with the four victims it needed.
    assert len(placed) == 4
    assert all(answer["placed"] == 2 and len(answer["preempted"]) == 4 for answer in placed)
    victims = [victim["consumer_uuid"] for answer in placed for victim in answer["preempted"]]
    assert sorted(victims) == sorted(low)
    refused = [gang for gang, (status, _) in zip(gangs, outcomes, strict=True) if status == 409]
    for gang in refused:
        for consumer in gang["consumers"]:
            assert client.get(f"/allocations/{consumer['uuid']}").json()["allocations"] == {}
    assert client.get(f"/resource_providers/{host}/usages").json()["usages"] == {"VCPU": 16}
    client.close()


def test_a_leased_victim_loses_its_lease_with_its_allocations(api):
    _hosts(api, 1)
    victim = new_uuid()
    _pick(api, "VCPU:4", consumer=victim, priority=-1, lease_seconds=600)
    assert api.get(f"/berth/leases/{victim}").status_code == 200
    assert _victims(_pick(api, "VCPU:4", priority=0, preempt=True)) == [victim]
    assert api.get(f"/berth/leases/{victim}").status_code == 404
    # Its conductor, confirming late, learns that nothing is held.
    assert api.post(f"/berth/leases/{victim}/confirm").status_code == 404

"""POST /berth/pick: every fitting tree weighed, one chosen and claimed in the same transaction, with
server group policies kept under concurrency; in process on both databases, and against a live
multi-worker server."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from apihelpers import error_code, error_detail, new_uuid
from livehelpers import live_host, live_on

from berth.domain import error_codes
from berth.store import schema
from berth.store.pick import transaction as pick_store
from berth.store.pick.board.host_board import HostBoard
from berth.store.placement.allocations import ConsumerAllocations, replace_allocations
from berth.store.placement.providers import delete_provider, get_provider

HOST = {"VCPU": 8, "MEMORY_MB": 8192, "DISK_GB": 100}
SMALL = {"VCPU": 1, "MEMORY_MB": 512}


@pytest.fixture(params=["board", "search"])
def api(request, api, app, db):
    """The API on a database without server groups: the shared test database's reset knows nothing
    of them. Every test runs twice: picks weighed on the process's board, read again before each
    pick, and picks that search every tree."""
    with db.engine.begin() as conn:
        conn.execute(schema.server_group_members.delete())
        conn.execute(schema.server_groups.delete())
    app.host_board = HostBoard(min_age=0.0, enabled=request.param == "board")
    return api


def _body(resources=SMALL, *, consumer=None, policy=None, multipliers=None, group=None, query=None, **extra):
    body = {
        "query": query or {"resources": ",".join(f"{rc}:{amount}" for rc, amount in resources.items())},
        "consumer": {
            "uuid": consumer or new_uuid(),
            "project_id": "proj",
            "user_id": "user",
            "consumer_type": "INSTANCE",
        },
    }
    weigh = {}
    if policy:
        weigh["policy"] = policy
    if multipliers is not None:
        weigh["multipliers"] = multipliers
    if weigh:
        body["weigh"] = weigh
    if group:
        body["server_group"] = {"uuid": group[0], "policy": group[1]}
    body.update(extra)
    return body


def _pick(api, resources=SMALL, expect=200, **kw):
    r = api.post("/berth/pick", _body(resources, **kw))
    assert r.status_code == expect, r.data
    return r.json_body


def _hosts(api, count, inventory=HOST):
    return [api.create_provider(f"host-{i}", inventory=inventory) for i in range(count)]


# --- choosing and claiming -----------------------------------------------------------------------


def test_a_fitting_host_is_chosen_and_claimed(api):
    small = api.create_provider("small", inventory={"VCPU": 1, "MEMORY_MB": 256})
    fitting = set(_hosts(api, 2))
    consumer = new_uuid()
    answer = _pick(api, {"VCPU": 2, "MEMORY_MB": 1024}, consumer=consumer)
    root = answer["root_provider_uuid"]
    assert root in fitting and root != small
    assert answer["trees_fitted"] == 2 and answer["trees_weighed"] == 2
    assert answer["allocation_request"] == {
        "allocations": {root: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
        "mappings": {"": [root]},
    }
    held = api.get(f"/allocations/{consumer}").json_body
    assert held["allocations"][root]["resources"] == {"VCPU": 2, "MEMORY_MB": 1024}
    assert (held["project_id"], held["user_id"], held["consumer_type"]) == ("proj", "user", "INSTANCE")
    assert held["consumer_generation"] == 1
    assert api.get(f"/resource_providers/{root}/usages").json_body["usages"] == {
        "VCPU": 2,
        "MEMORY_MB": 1024,
        "DISK_GB": 0,
    }


def test_spread_and_pack_choose_different_hosts(api):
    busy, idle = _hosts(api, 2)
    api.allocate(new_uuid(), {busy: {"VCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 50}})
    spread = _pick(api, policy="spread")
    assert spread["root_provider_uuid"] == idle
    # Each of the three resource weighers gives the freer host 1 after normalisation.
    assert spread["weight"] == pytest.approx(3.0)
    pack = _pick(api, policy="pack")
    assert pack["root_provider_uuid"] == busy
    assert pack["weight"] == pytest.approx(0.0)


def test_multipliers_mean_what_they_mean_in_nova(api):
    more_ram, more_cpu = _hosts(api, 2)
    api.allocate(new_uuid(), {more_ram: {"VCPU": 6}})
    api.allocate(new_uuid(), {more_cpu: {"MEMORY_MB": 6000}})
    assert _pick(api, multipliers={"ram": 1, "cpu": 0, "disk": 0})["root_provider_uuid"] == more_ram
    assert _pick(api, multipliers={"ram": 0, "cpu": 1, "disk": 0})["root_provider_uuid"] == more_cpu
    assert _pick(api, multipliers={"ram": -1, "cpu": 0, "disk": 0})["root_provider_uuid"] == more_cpu


def test_the_instances_weigher_counts_consumers_on_the_tree(api):
    crowded, empty = _hosts(api, 2)
    for _ in range(3):
        api.allocate(new_uuid(), {crowded: {"VCPU": 1}})
    only_instances = {"ram": 0, "cpu": 0, "disk": 0}
    assert _pick(api, multipliers={**only_instances, "instances": 1})["root_provider_uuid"] == crowded
    assert _pick(api, multipliers={**only_instances, "instances": -1})["root_provider_uuid"] == empty


def test_a_shared_disk_pool_counts_whole_for_every_host_anchored_to_it(api):
    aggregate = new_uuid()
    anchored = api.create_provider("anchored", inventory=HOST, aggregates=[aggregate])
    api.create_provider("alone", inventory=HOST)
    api.create_provider(
        "pool", inventory={"DISK_GB": 10000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    answer = _pick(api, {"VCPU": 1}, multipliers={"ram": 0, "cpu": 0, "disk": 1})
    assert answer["root_provider_uuid"] == anchored
    assert answer["trees_fitted"] == 2


def test_a_tree_is_weighed_once_whatever_its_number_of_candidates(api):
    root = api.create_provider("compute", inventory={"MEMORY_MB": 8192})
    for cell in range(2):
        api.create_provider(f"numa-{cell}", parent=root, inventory={"VCPU": 4})
    answer = _pick(api, {"VCPU": 2, "MEMORY_MB": 512})
    assert answer["root_provider_uuid"] == root
    assert answer["trees_fitted"] == 1
    assert len(answer["allocation_request"]["allocations"]) == 2


def test_ties_are_broken_at_random(api):
    hosts = set(_hosts(api, 4, {"VCPU": 1000}))
    # With every weigher off, all hosts weigh 0 on every pick.
    chosen = {
        _pick(api, {"VCPU": 1}, multipliers={"ram": 0, "cpu": 0, "disk": 0})["root_provider_uuid"] for _ in range(40)
    }
    assert chosen <= hosts and len(chosen) > 1


def test_a_host_taken_meanwhile_is_given_up_for_the_next_best(api, app, monkeypatch):
    # The race is made inside the full search (the board's own is in tests/test_host_board.py).
    app.host_board = HostBoard(enabled=False)
    best, second = _hosts(api, 2)
    api.allocate(new_uuid(), {second: {"VCPU": 1}})
    competitor = new_uuid()

    class RacedFinder(pick_store.CandidateFinder):
        def find(self):
            found = super().find()
            # A concurrent writer takes the best host whole after the search read it.
            replace_allocations(
                self.conn,
                [ConsumerAllocations(competitor, {best: {"VCPU": 8}}, "p", "u", None, "INSTANCE")],
            )
            return found

    monkeypatch.setattr(pick_store, "CandidateFinder", RacedFinder)
    consumer = new_uuid()
    assert _pick(api, consumer=consumer, policy="spread")["root_provider_uuid"] == second
    assert set(api.get(f"/allocations/{competitor}").json_body["allocations"]) == {best}
    assert api.get(f"/resource_providers/{best}/usages").json_body["usages"]["VCPU"] == 8
    assert set(api.get(f"/allocations/{consumer}").json_body["allocations"]) == {second}


def test_a_host_deleted_meanwhile_is_given_up_for_the_next_best(api, app, monkeypatch):
    # The claim does not look the searched providers up again: a provider gone since the search
    # has no inventory left to claim, and the next tree is tried.
    app.host_board = HostBoard(enabled=False)
    best, second = _hosts(api, 2)
    api.allocate(new_uuid(), {second: {"VCPU": 1}})

    class RacedFinder(pick_store.CandidateFinder):
        def find(self):
            found = super().find()
            delete_provider(self.conn, get_provider(self.conn, best))
            return found

    monkeypatch.setattr(pick_store, "CandidateFinder", RacedFinder)
    consumer = new_uuid()
    assert _pick(api, consumer=consumer, policy="spread")["root_provider_uuid"] == second
    assert api.get(f"/resource_providers/{best}").status_code == 404
    assert set(api.get(f"/allocations/{consumer}").json_body["allocations"]) == {second}


def test_every_host_taken_meanwhile_is_a_409(api, app, monkeypatch):
    # The race is made inside the full search (the board's own is in tests/test_host_board.py).
    app.host_board = HostBoard(enabled=False)
    (host,) = _hosts(api, 1)

    class RacedFinder(pick_store.CandidateFinder):
        def find(self):
            found = super().find()
            replace_allocations(
                self.conn, [ConsumerAllocations(new_uuid(), {host: {"VCPU": 8}}, "p", "u", None, "INSTANCE")]
            )
            return found

    monkeypatch.setattr(pick_store, "CandidateFinder", RacedFinder)
    r = api.post("/berth/pick", _body())
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST
    assert "taken by concurrent claims" in error_detail(r)


def test_a_lease_is_taken_with_the_claim(api, db):
    _hosts(api, 1)
    consumer = new_uuid()
    _pick(api, consumer=consumer, lease_seconds=600)
    with db.engine.connect() as conn:
        leased = conn.execute(sa.select(schema.allocation_leases.c.consumer_uuid)).scalars().all()
    assert consumer in leased


# --- refusals ------------------------------------------------------------------------------------


def test_nothing_fits_is_a_409_saying_why(api):
    _hosts(api, 2)
    r = api.post("/berth/pick", _body({"VCPU": 9}))
    assert r.status_code == 409
    assert error_code(r) == error_codes.PICK_NO_VALID_HOST
    assert "No valid host: no provider has 9 VCPU free." in error_detail(r)


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ({"resources1": "VCPU:9"}, "no provider has 9 VCPU free (request group '1')."),
        ({"resources": "VCPU:1", "root_required": "CUSTOM_GOLD"}, "no provider's root has trait CUSTOM_GOLD."),
        (
            {"resources1": "VCPU:1", "resources2": "VCPU:1", "group_policy": "isolate"},
            "no tree can hold every part of the request together.",
        ),
    ],
    ids=["suffixed group", "root", "together"],
)
def test_the_refusal_names_what_nothing_meets(api, query, why):
    _hosts(api, 2)
    assert api.put("/traits/CUSTOM_GOLD").status_code == 201
    r = api.post("/berth/pick", _body(query=query))
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST
    assert f"No valid host: {why}" in error_detail(r)


def test_an_existing_consumer_is_refused(api):
    (host,) = _hosts(api, 1)
    consumer = new_uuid()
    api.allocate(consumer, {host: {"VCPU": 1}})
    r = api.post("/berth/pick", _body(consumer=consumer))
    assert r.status_code == 409 and error_code(r) == error_codes.CONCURRENT_UPDATE


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.pop("consumer"),
        lambda b: b.pop("query"),
        lambda b: b["consumer"].pop("project_id"),
        lambda b: b["consumer"].update(uuid="not-a-uuid"),
        lambda b: b.update(weigh={"policy": "scatter"}),
        lambda b: b.update(weigh={"multipliers": {"gpu": 1}}),
        lambda b: b.update(weigh={"multipliers": {"ram": "high"}}),
        lambda b: b.update(server_group={"uuid": new_uuid(), "policy": "together"}),
        lambda b: b.update(lease_seconds=-1),
        lambda b: b.update(extra=1),
        lambda b: b.update(query={"resources": "VCPU:one"}),
        lambda b: b.update(query={"resources": "CUSTOM_NOPE:1"}),
        lambda b: b.update(query={"resources": "VCPU:1", "limit": "5"}),
        lambda b: b.update(query={"resources": "VCPU:1", "bogus": "x"}),
        lambda b: b.update(query={"resources": ["VCPU:1", 2]}),
    ],
    ids=[
        "no consumer",
        "no query",
        "no project",
        "bad consumer uuid",
        "unknown policy",
        "unknown multiplier",
        "multiplier not a number",
        "unknown group policy",
        "negative lease",
        "unknown key",
        "bad resources",
        "unknown class",
        "limit",
        "unknown query key",
        "query value not a string",
    ],
)
def test_bad_input_is_a_400(api, change):
    _hosts(api, 1)
    body = _body()
    change(body)
    r = api.post("/berth/pick", body)
    assert r.status_code == 400, r.data


def test_only_admin_or_service_may_pick(api):
    _hosts(api, 1)
    r = api.post("/berth/pick", _body(), token="alice:tenant")
    assert r.status_code == 403


def test_the_openapi_document_lists_the_route(api):
    document = api.get("/berth/openapi.json").json_body
    operation = document["paths"]["/berth/pick"]["post"]
    schema_ = operation["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema_["required"]) == {"query"}
    # One consumer, or a gang of them: exactly one of the two.
    assert schema_["oneOf"] == [{"required": ["consumer"]}, {"required": ["consumers"]}]
    assert "409" in operation["responses"]


# --- server groups -------------------------------------------------------------------------------


def test_anti_affinity_puts_members_on_distinct_hosts_then_refuses_naming_the_group(api):
    hosts = set(_hosts(api, 3))
    group = new_uuid()
    consumers = [new_uuid() for _ in range(3)]
    chosen = [
        _pick(api, consumer=c, group=(group, "anti-affinity"), policy="pack")["root_provider_uuid"] for c in consumers
    ]
    assert set(chosen) == hosts
    r = api.post("/berth/pick", _body(group=(group, "anti-affinity")))
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST
    assert f"anti-affinity server group {group}" in error_detail(r)
    # A member whose allocations are deleted through the Placement API no longer counts.
    assert api.delete(f"/allocations/{consumers[1]}").status_code == 204
    again = _pick(api, group=(group, "anti-affinity"))
    assert again["root_provider_uuid"] == chosen[1]


def test_membership_is_recorded_with_the_root_it_was_placed_on(api, db):
    _hosts(api, 2)
    group, consumer = new_uuid(), new_uuid()
    root = _pick(api, consumer=consumer, group=(group, "anti-affinity"))["root_provider_uuid"]
    members = schema.server_group_members
    rp = schema.resource_providers
    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.select(members.c.group_uuid, members.c.consumer_uuid, rp.c.uuid).join(
                rp, rp.c.id == members.c.root_provider_id
            )
        ).all()
    assert [tuple(row) for row in rows] == [(group, consumer, root)]


def test_affinity_keeps_members_on_one_host_until_it_is_full(api):
    _hosts(api, 3, {"VCPU": 3, "MEMORY_MB": 8192})
    group = new_uuid()
    chosen = {_pick(api, {"VCPU": 1}, group=(group, "affinity"))["root_provider_uuid"] for _ in range(3)}
    assert len(chosen) == 1
    r = api.post("/berth/pick", _body({"VCPU": 1}, group=(group, "affinity")))
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST
    assert f"affinity server group {group}" in error_detail(r)


def test_soft_anti_affinity_prefers_empty_hosts_but_never_refuses(api):
    hosts = set(_hosts(api, 3))
    group = new_uuid()
    only_group = {"ram": 0, "cpu": 0, "disk": 0}
    chosen = [
        _pick(api, group=(group, "soft-anti-affinity"), multipliers=only_group)["root_provider_uuid"] for _ in range(3)
    ]
    assert set(chosen) == hosts
    assert _pick(api, group=(group, "soft-anti-affinity"), multipliers=only_group)["root_provider_uuid"] in hosts


def test_soft_affinity_prefers_the_members_host(api):
    _hosts(api, 3)
    group = new_uuid()
    only_group = {"ram": 0, "cpu": 0, "disk": 0}
    chosen = {
        _pick(api, group=(group, "soft-affinity"), multipliers=only_group)["root_provider_uuid"] for _ in range(4)
    }
    assert len(chosen) == 1


def test_a_group_keeps_the_policy_it_was_created_with(api):
    _hosts(api, 2)
    group = new_uuid()
    _pick(api, group=(group, "anti-affinity"))
    r = api.post("/berth/pick", _body(group=(group, "affinity")))
    assert r.status_code == 409 and error_code(r) == error_codes.SERVER_GROUP_POLICY_CONFLICT


# --- live: a multi-worker server and many concurrent schedulers -------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def live(request, tmp_path):
    yield from live_on(request, tmp_path, "pick")


def _race(live, bodies, workers):
    """Each body posted by its own thread, all released at once; (status, body, sent, answered) each."""
    client = live.client()
    start = threading.Barrier(workers)

    def post(body):
        if len(bodies) <= workers:
            start.wait()
        sent = time.monotonic()
        r = client.request("POST", "/berth/pick", body)
        return r.status_code, r.json(), sent, time.monotonic()

    try:
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(post, bodies))
    finally:
        client.close()


def test_racing_anti_affinity_members_land_on_distinct_hosts(live):
    client = live.client()
    hosts = {live_host(client, f"host-{i}", {"VCPU": 8, "MEMORY_MB": 8192}) for i in range(20)}
    group = str(uuid.uuid4())
    bodies = [_body({"VCPU": 1}, group=(group, "anti-affinity")) for _ in range(32)]
    outcomes = _race(live, bodies, workers=32)
    placed = [answer["root_provider_uuid"] for status, answer, _, _ in outcomes if status == 200]
    refused = [answer for status, answer, _, _ in outcomes if status == 409]
    assert len(placed) == 20 and set(placed) == hosts
    assert len(refused) == 12
    for answer in refused:
        error = answer["errors"][0]
        assert error["code"] == error_codes.PICK_NO_VALID_HOST and group in error["detail"]
    for host in hosts:
        assert len(client.get(f"/resource_providers/{host}/allocations").json()["allocations"]) == 1
    client.close()


def test_racing_schedulers_fill_a_cloud_without_overcommit_or_early_refusals(live):
    client = live.client()
    per_host = 4
    hosts = [live_host(client, f"host-{i}", {"VCPU": per_host, "MEMORY_MB": per_host * 1024}) for i in range(6)]
    capacity = per_host * len(hosts)
    clients, rounds = 16, 3
    bodies = [_body({"VCPU": 1, "MEMORY_MB": 1024}, policy="pack") for _ in range(clients * rounds)]
    outcomes = _race(live, bodies, workers=clients)
    statuses = [status for status, _, _, _ in outcomes]
    assert set(statuses) <= {200, 409}, outcomes
    assert statuses.count(200) == capacity
    for host in hosts:
        usages = client.get(f"/resource_providers/{host}/usages").json()["usages"]
        assert usages == {"VCPU": per_host, "MEMORY_MB": per_host * 1024}
    # Every request asks the same and nothing is freed, so the room left only shrinks: a refusal is
    # early if any request sent after it was answered still got a host.  Packing sends every
    # scheduler to the same host, so that on PostgreSQL many find it taken by the time they write.
    first_refusal = min((answered for status, _, _, answered in outcomes if status == 409), default=None)
    assert first_refusal is not None
    late_grants = [sent for status, _, sent, _ in outcomes if status == 200 and sent > first_refusal]
    assert late_grants == []
    refusals = [answer["errors"][0]["code"] for status, answer, _, _ in outcomes if status == 409]
    assert set(refusals) == {error_codes.PICK_NO_VALID_HOST}
    client.close()


def test_a_pick_needs_one_provider_or_its_root_in_every_member_of(api):
    agg_a, agg_b = new_uuid(), new_uuid()
    root = api.create_provider("cn", inventory={"MEMORY_MB": 4096}, aggregates=[agg_a])
    api.create_provider("numa-b", parent=root, inventory={"VCPU": 4}, aggregates=[agg_b])
    query = {"resources": "VCPU:1", "member_of": [agg_a, agg_b]}
    r = api.post("/berth/pick", _body(query=query))
    assert r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST, r.data
    both = api.create_provider("numa-ab", parent=root, inventory={"VCPU": 4}, aggregates=[agg_a, agg_b])
    r = api.post("/berth/pick", _body(query=query))
    assert r.status_code == 200, r.data
    assert list(r.json_body["allocation_request"]["allocations"]) == [both]

"""Per-project quotas (/berth/quotas): the limits and their usage through the API, and their
enforcement by the pick and, when the operator turns it on, by PUT and POST /allocations, in the
claim's own transaction; in process on both databases, and against a live multi-worker server."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from apihelpers import Api, error_code, error_detail, new_uuid
from livehelpers import live_host, live_on

from berth.api.app import PlacementApp, Settings
from berth.domain import error_codes
from berth.store.pick.board.host_board import HostBoard
from berth.store.quotas.enforcement import Change, Released, claim_changes
from berth.store.quotas.usage import Usage

HOST = {"VCPU": 16, "MEMORY_MB": 16384, "DISK_GB": 200}


@pytest.fixture
def api(app):
    app.host_board = HostBoard(min_age=0.0)
    return Api(app)


@pytest.fixture
def enforcing(db):
    """An API whose PUT and POST /allocations check quotas too."""
    return Api(PlacementApp(db, Settings(enforce_quotas_on_allocations=True)))


def _pick_body(resources, *, project="proj", user="user", consumer=None):
    return {
        "query": {"resources": ",".join(f"{rc}:{amount}" for rc, amount in resources.items())},
        "consumer": {
            "uuid": consumer or new_uuid(),
            "project_id": project,
            "user_id": user,
            "consumer_type": "INSTANCE",
        },
    }


def _set(api, project, limits, *, user=None, expect=200):
    path = f"/berth/quotas/{project}" + (f"/users/{user}" if user else "")
    r = api.put(path, {"limits": limits})
    assert r.status_code == expect, r.data
    return r


# --- the API -----------------------------------------------------------------------------------


def test_limits_are_set_shown_replaced_and_deleted(api):
    host = api.create_provider("host", inventory=HOST)
    api.allocate(new_uuid(), {host: {"VCPU": 2, "MEMORY_MB": 1024}}, project="p1")
    api.allocate(new_uuid(), {host: {"VCPU": 1}}, project="p1")
    answer = _set(api, "p1", {"VCPU": 64, "DISK_GB": 100, "consumers": 10}).json_body
    assert answer == {
        "project_id": "p1",
        "limits": {"VCPU": 64, "DISK_GB": 100, "consumers": 10},
        "usage": {"DISK_GB": 0, "MEMORY_MB": 1024, "VCPU": 3, "consumers": 2},
        "users": [],
    }
    assert api.get("/berth/quotas/p1").json_body == answer
    # A PUT replaces every limit of the project.
    assert _set(api, "p1", {"MEMORY_MB": 2048}).json_body["limits"] == {"MEMORY_MB": 2048}
    assert api.get("/berth/quotas").json_body["quotas"] == [
        {
            "project_id": "p1",
            "limits": {"MEMORY_MB": 2048},
            "usage": {"MEMORY_MB": 1024, "VCPU": 3, "consumers": 2},
            "users": [],
        }
    ]
    assert api.delete("/berth/quotas/p1").status_code == 204
    assert api.get("/berth/quotas").json_body == {"quotas": []}
    shown = api.get("/berth/quotas/p1").json_body
    assert shown["limits"] == {} and shown["usage"]["VCPU"] == 3
    r = api.delete("/berth/quotas/p1")
    assert r.status_code == 404 and "no quota limits" in error_detail(r)


def test_a_users_limits_are_its_own_and_go_with_the_project(api):
    host = api.create_provider("host", inventory=HOST)
    api.allocate(new_uuid(), {host: {"VCPU": 2}}, project="p1", user="alice")
    api.allocate(new_uuid(), {host: {"VCPU": 5}}, project="p1", user="bob")
    answer = _set(api, "p1", {"VCPU": 4}, user="alice").json_body
    assert answer == {
        "project_id": "p1",
        "user_id": "alice",
        "limits": {"VCPU": 4},
        "usage": {"VCPU": 2, "consumers": 1},
    }
    project = api.get("/berth/quotas/p1").json_body
    assert project["limits"] == {} and project["users"] == ["alice"] and project["usage"]["VCPU"] == 7
    # The project is listed while one of its users has limits.
    assert [q["project_id"] for q in api.get("/berth/quotas").json_body["quotas"]] == ["p1"]
    assert api.delete("/berth/quotas/p1/users/alice").status_code == 204
    assert api.get("/berth/quotas").json_body == {"quotas": []}
    assert api.delete("/berth/quotas/p1/users/alice").status_code == 404
    # Deleting the project's quota deletes its users' too.
    _set(api, "p1", {"VCPU": 4}, user="alice")
    _set(api, "p1", {"VCPU": 40})
    assert api.delete("/berth/quotas/p1").status_code == 204
    assert api.get("/berth/quotas/p1/users/alice").json_body["limits"] == {}


def test_a_limit_below_usage_is_allowed(api):
    host = api.create_provider("host", inventory=HOST)
    api.allocate(new_uuid(), {host: {"VCPU": 6}}, project="p1")
    assert _set(api, "p1", {"VCPU": 4}).json_body["usage"]["VCPU"] == 6


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({"limits": {"VCPU": -1}}, error_codes.QUOTA_BAD_LIMIT, "zero or more"),
        ({"limits": {"CUSTOM_NOPE": 4}}, error_codes.QUOTA_UNKNOWN_RESOURCE, "No such resource class CUSTOM_NOPE"),
        ({"limits": {"VCPU": "4"}}, error_codes.BERTH_UNDEFINED, "JSON does not validate"),
        ({"limits": {"VCPU": 1.5}}, error_codes.BERTH_UNDEFINED, "JSON does not validate"),
        ({"limit": {"VCPU": 4}}, error_codes.BERTH_UNDEFINED, "JSON does not validate"),
        ({}, error_codes.BERTH_UNDEFINED, "JSON does not validate"),
    ],
    ids=["negative", "unknown class", "string", "fraction", "misspelt", "empty"],
)
def test_bad_limits_are_a_400_with_a_code(api, body, code, words):
    for path in ("/berth/quotas/p1", "/berth/quotas/p1/users/u1"):
        r = api.put(path, body)
        assert r.status_code == 400, r.data
        assert error_code(r) == code and words in error_detail(r)
    assert api.get("/berth/quotas").json_body == {"quotas": []}


def test_only_an_admin_may_read_or_set_quotas(api):
    service = {"X-Roles": "service"}
    for method, path, body in [
        ("GET", "/berth/quotas", None),
        ("GET", "/berth/quotas/p1", None),
        ("PUT", "/berth/quotas/p1", {"limits": {"VCPU": 1}}),
        ("DELETE", "/berth/quotas/p1", None),
        ("PUT", "/berth/quotas/p1/users/u1", {"limits": {"VCPU": 1}}),
    ]:
        for token, headers in (("alice:p1", None), ("nova:service", service)):
            r = api.request(method, path, body, token=token, headers=headers)
            assert r.status_code == 403, (method, path, token)
    assert api.get("/berth/quotas").status_code == 200


# --- the pick ------------------------------------------------------------------------------------


def test_a_pick_at_the_limit_is_refused_naming_the_class_and_writing_nothing(api):
    api.create_provider("host", inventory=HOST)
    _set(api, "p1", {"VCPU": 5})
    assert api.post("/berth/pick", _pick_body({"VCPU": 2}, project="p1")).status_code == 200
    assert api.post("/berth/pick", _pick_body({"VCPU": 3}, project="p1")).status_code == 200
    consumer = new_uuid()
    r = api.post("/berth/pick", _pick_body({"VCPU": 1, "MEMORY_MB": 64}, project="p1", consumer=consumer))
    assert r.status_code == 409, r.data
    assert error_code(r) == error_codes.QUOTA_EXCEEDED
    assert "Quota exceeded for VCPU of project p1: limit 5, usage 5, asked 1." in error_detail(r)
    assert api.get(f"/allocations/{consumer}").json_body["allocations"] == {}
    assert api.get("/berth/quotas/p1").json_body["usage"] == {"VCPU": 5, "consumers": 2}
    # Another project, and classes without a limit, are not held back.
    assert api.post("/berth/pick", _pick_body({"VCPU": 1}, project="p2")).status_code == 200
    assert api.post("/berth/pick", _pick_body({"MEMORY_MB": 512}, project="p1")).status_code == 200


def test_the_consumers_limit_counts_consumers_holding_allocations(api):
    host = api.create_provider("host", inventory=HOST)
    _set(api, "p1", {"consumers": 2})
    first = new_uuid()
    api.allocate(first, {host: {"VCPU": 1}}, project="p1")
    assert api.post("/berth/pick", _pick_body({"VCPU": 1}, project="p1")).status_code == 200
    r = api.post("/berth/pick", _pick_body({"VCPU": 1}, project="p1"))
    assert r.status_code == 409 and error_code(r) == error_codes.QUOTA_EXCEEDED
    assert "Quota exceeded for consumers of project p1: limit 2, usage 2, asked 1." in error_detail(r)
    # A consumer whose allocations are gone counts no more.
    assert api.delete(f"/allocations/{first}").status_code == 204
    assert api.post("/berth/pick", _pick_body({"VCPU": 1}, project="p1")).status_code == 200


def test_a_users_limit_holds_the_user_back_and_the_projects_the_whole_project(api):
    api.create_provider("host", inventory=HOST)
    _set(api, "p1", {"VCPU": 6})
    _set(api, "p1", {"VCPU": 2}, user="alice")
    assert api.post("/berth/pick", _pick_body({"VCPU": 2}, project="p1", user="alice")).status_code == 200
    r = api.post("/berth/pick", _pick_body({"VCPU": 1}, project="p1", user="alice"))
    assert r.status_code == 409
    assert "Quota exceeded for VCPU of user alice of project p1: limit 2, usage 2, asked 1." in error_detail(r)
    assert api.post("/berth/pick", _pick_body({"VCPU": 4}, project="p1", user="bob")).status_code == 200
    r = api.post("/berth/pick", _pick_body({"VCPU": 1}, project="p1", user="bob"))
    assert "Quota exceeded for VCPU of project p1: limit 6, usage 6, asked 1." in error_detail(r)


def test_a_gang_is_counted_whole_and_refused_whole(api):
    api.create_provider("host", inventory=HOST)
    _set(api, "p1", {"VCPU": 5})

    def gang(count, project="p1"):
        members = [_pick_body({"VCPU": 2}, project=project)["consumer"] for _ in range(count)]
        return {"query": {"resources": "VCPU:2"}, "consumers": members}, [m["uuid"] for m in members]

    body, members = gang(3)
    r = api.post("/berth/pick", body)
    assert r.status_code == 409 and error_code(r) == error_codes.QUOTA_EXCEEDED
    assert "Quota exceeded for VCPU of project p1: limit 5, usage 0, asked 6." in error_detail(r)
    assert all(api.get(f"/allocations/{m}").json_body["allocations"] == {} for m in members)
    body, members = gang(2)
    assert api.post("/berth/pick", body).status_code == 200
    assert api.get("/berth/quotas/p1").json_body["usage"] == {"VCPU": 4, "consumers": 2}


def test_a_granular_pick_is_counted_whole(api):
    api.create_provider("host", inventory=HOST)
    _set(api, "p1", {"VCPU": 3})
    body = _pick_body({"VCPU": 2}, project="p1")
    body["query"]["resources1"] = "VCPU:2"
    r = api.post("/berth/pick", body)
    assert r.status_code == 409 and "asked 4" in error_detail(r)


# --- preemption: a pick is judged by the usage it leaves ----------------------------------------


def _preempting(resources, *, project, priority=10, consumer=None):
    body = _pick_body(resources, project=project, consumer=consumer)
    body.update(priority=priority, preempt=True)
    return body


def test_a_preempting_pick_at_the_limit_passes_when_its_victims_free_the_projects_room(api):
    api.create_provider("host", inventory={"VCPU": 4})
    _set(api, "p1", {"VCPU": 4})
    low = _pick_body({"VCPU": 4}, project="p1")
    assert api.post("/berth/pick", low).status_code == 200
    # At the limit and the host full: the preemption removes the project's own VCPU:4 and adds 2.
    r = api.post("/berth/pick", _preempting({"VCPU": 2}, project="p1"))
    assert r.status_code == 200, r.data
    assert [v["consumer_uuid"] for v in r.json_body["preempted"]] == [low["consumer"]["uuid"]]
    assert api.get("/berth/quotas/p1").json_body["usage"] == {"VCPU": 2, "consumers": 1}


def test_a_move_of_a_project_at_its_limit_is_picked_and_a_resize_counts_what_it_adds(api):
    """A move's pick names the instance it places again: what the instance holds counts as freed,
    as the claim takes it over when the move lands. A migration at the limit is not refused (Nova
    checks no quota for it: an operator draining a host is not held back by a project's limit); a
    resize is refused for what it adds; an instance of another project frees nothing."""
    source = api.create_provider("source", inventory=HOST)
    api.create_provider("target", inventory=HOST)
    _set(api, "p1", {"VCPU": 4})
    instance = new_uuid()
    api.allocate(instance, {source: {"VCPU": 4}}, project="p1")

    def move(vcpus: int, *, project: str = "p1", moving: str | None = instance) -> dict:
        body = {**_pick_body({"VCPU": vcpus}, project=project), "avoid_trees": [source]}
        if moving is not None:
            body["moving"] = moving
        return body

    refused = api.post("/berth/pick", move(4, moving=None))
    assert (refused.status_code, error_code(refused)) == (409, error_codes.QUOTA_EXCEEDED)
    bigger = api.post("/berth/pick", move(5))
    assert (bigger.status_code, error_code(bigger)) == (409, error_codes.QUOTA_EXCEEDED), bigger.data
    assert "asked 5" in error_detail(bigger)
    migration = move(4)
    assert api.post("/berth/pick", migration).status_code == 200
    # Both count until the move lands and the source's allocations go.
    assert api.get("/berth/quotas/p1").json_body["usage"] == {"VCPU": 8, "consumers": 2}
    api.delete(f"/allocations/{instance}")
    other = new_uuid()
    api.allocate(other, {source: {"VCPU": 1}}, project="p2")
    assert api.post("/berth/pick", move(1, moving=other)).status_code == 409
    gang = {**move(1), "consumers": [migration["consumer"]]}
    del gang["consumer"]
    assert api.post("/berth/pick", gang).status_code == 400


@pytest.mark.parametrize("refused_first", [False, True])
def test_a_resize_is_judged_by_the_usage_it_lands_at_and_its_refusal_says_the_usage_before_it(api, refused_first):
    """The instance a resize's pick places again still holds its source's allocations, which count
    until the move lands: the pick is judged by the usage the move lands at (the instance's given
    back), and a refusal says the usage before the write. A pick refused first leaves the other
    picks of the project to count their consumer themselves on PostgreSQL (``own_count``)."""
    source = api.create_provider("source", inventory=HOST)
    api.create_provider("target", inventory=HOST)
    project = f"p-{refused_first}"
    _set(api, project, {"VCPU": 5})
    instance = new_uuid()
    api.allocate(instance, {source: {"VCPU": 2}}, project=project)
    api.allocate(new_uuid(), {source: {"VCPU": 2}}, project=project)

    def resize(vcpus: int) -> dict:
        return {**_pick_body({"VCPU": vcpus}, project=project), "avoid_trees": [source], "moving": instance}

    for _ in range(2 if refused_first else 0):
        # 4 used, 2 of them the instance's: a resize to 4 lands at 6.
        refused = api.post("/berth/pick", resize(4))
        assert (refused.status_code, error_code(refused)) == (409, error_codes.QUOTA_EXCEEDED), refused.data
        assert (
            f"Quota exceeded for VCPU of project {project}: limit 5, usage 4, of which the instance moved "
            "gives back 2 once the move lands, asked 4." in error_detail(refused)
        )
    # A resize to 3 lands at the limit: 4 - 2 + 3.
    assert api.post("/berth/pick", resize(3)).status_code == 200
    assert api.get(f"/berth/quotas/{project}").json_body["usage"] == {"VCPU": 7, "consumers": 3}


def test_a_pick_moving_its_own_consumer_is_a_400_and_frees_nothing(api):
    """``moving`` names the instance a move places again, never the pick's own new consumer: read
    after the write, that consumer's new allocations would count as freed, and the pick would pass
    any limit."""
    host = api.create_provider("host", inventory=HOST)
    _set(api, "p1", {"VCPU": 4})
    api.allocate(new_uuid(), {host: {"VCPU": 4}}, project="p1")
    body = _pick_body({"VCPU": 2}, project="p1")
    body["moving"] = body["consumer"]["uuid"].upper()
    r = api.post("/berth/pick", body)
    assert (r.status_code, error_code(r)) == (400, error_codes.PICK_BAD_REQUEST), r.data
    assert "moving" in error_detail(r)
    assert api.get(f"/allocations/{body['consumer']['uuid']}").json_body["allocations"] == {}
    assert api.get("/berth/quotas/p1").json_body["usage"] == {"VCPU": 4, "consumers": 1}


def test_a_preempting_pick_whose_victims_are_anothers_is_refused_and_removes_nobody(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    _set(api, "p1", {"VCPU": 4})
    mine = _pick_body({"VCPU": 4}, project="p1")
    mine["priority"] = 5  # above the other project's: the cheapest victim is theirs
    theirs = _pick_body({"VCPU": 4}, project="p2")
    assert api.post("/berth/pick", mine).status_code == 200
    assert api.post("/berth/pick", theirs).status_code == 200
    consumer = new_uuid()
    r = api.post("/berth/pick", _preempting({"VCPU": 2}, project="p1", consumer=consumer))
    assert r.status_code == 409 and error_code(r) == error_codes.QUOTA_EXCEEDED
    assert "Quota exceeded for VCPU of project p1: limit 4, usage 4, asked 2." in error_detail(r)
    # Nothing of it happened: the other project's consumer still holds its room, no preemption is recorded.
    held = api.get(f"/allocations/{theirs['consumer']['uuid']}").json_body["allocations"]
    assert held[host]["resources"] == {"VCPU": 4}
    assert api.get(f"/allocations/{consumer}").json_body["allocations"] == {}
    assert api.get("/berth/preemptions").json_body == {"preemptions": []}


def test_a_users_victims_free_that_users_room_and_the_projects(api):
    api.create_provider("host", inventory={"VCPU": 4})
    _set(api, "p1", {"VCPU": 4})
    _set(api, "p1", {"VCPU": 2}, user="alice")
    alice = _pick_body({"VCPU": 2}, project="p1", user="alice")
    bob = _pick_body({"VCPU": 2}, project="p1", user="bob")
    assert api.post("/berth/pick", alice).status_code == 200
    assert api.post("/berth/pick", bob).status_code == 200
    # alice at her limit: preempting bob frees the project's room, not hers.
    body = _preempting({"VCPU": 2}, project="p1")
    body["consumer"]["user_id"] = "alice"
    r = api.post("/berth/pick", body)
    assert r.status_code == 409 and error_code(r) == error_codes.QUOTA_EXCEEDED
    assert "of user alice of project p1: limit 2, usage 2, asked 2." in error_detail(r)
    # bob at no limit of his own: preempting alice frees room in the project.
    body = _preempting({"VCPU": 2}, project="p1")
    body["consumer"]["user_id"] = "bob"
    body["query"]["in_tree"] = api.get("/resource_providers").json_body["resource_providers"][0]["uuid"]
    r = api.post("/berth/pick", body)
    assert r.status_code == 200, r.data
    assert len(r.json_body["preempted"]) == 1
    assert api.get("/berth/quotas/p1").json_body["usage"] == {"VCPU": 4, "consumers": 2}


def test_a_preempting_gang_is_judged_with_what_all_its_victims_free(api):
    api.create_provider("host", inventory={"VCPU": 4})
    _set(api, "p1", {"VCPU": 4})
    for _ in range(2):
        assert api.post("/berth/pick", _pick_body({"VCPU": 2}, project="p1")).status_code == 200
    members = [_pick_body({"VCPU": 2}, project="p1")["consumer"] for _ in range(2)]
    gang = {"query": {"resources": "VCPU:2"}, "consumers": members, "priority": 10, "preempt": True}
    r = api.post("/berth/pick", gang)
    assert r.status_code == 200, r.data
    assert len(r.json_body["preempted"]) == 2
    assert api.get("/berth/quotas/p1").json_body["usage"] == {"VCPU": 4, "consumers": 2}


# --- PUT and POST /allocations -------------------------------------------------------------------


def test_allocation_writes_are_placements_unless_the_operator_enforces_quotas(api, enforcing):
    host = api.create_provider("host", inventory=HOST)
    _set(api, "p1", {"VCPU": 4})
    api.allocate(new_uuid(), {host: {"VCPU": 3}}, project="p1")
    # Off (the default): accepted, as Placement accepts it.
    api.allocate(new_uuid(), {host: {"VCPU": 2}}, project="p1")
    # On: refused with the code, nothing written.
    consumer = new_uuid()
    r = enforcing.allocate(consumer, {host: {"VCPU": 1}}, project="p1", expect=409)
    assert error_code(r) == error_codes.QUOTA_EXCEEDED
    assert "Quota exceeded for VCPU of project p1: limit 4, usage 5, asked 1." in error_detail(r)
    assert api.get(f"/allocations/{consumer}").json_body["allocations"] == {}
    body = {
        consumer: {
            "allocations": {host: {"resources": {"VCPU": 1}}},
            "project_id": "p1",
            "user_id": "user",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
    }
    r = enforcing.post("/allocations", body)
    assert r.status_code == 409 and error_code(r) == error_codes.QUOTA_EXCEEDED
    assert api.post("/allocations", body).status_code == 204


def test_a_move_counts_what_is_held_and_may_shrink_over_the_limit(enforcing):
    api = enforcing
    source = api.create_provider("source", inventory=HOST)
    target = api.create_provider("target", inventory=HOST)
    _set(api, "p1", {"VCPU": 6})
    instance = new_uuid()
    api.allocate(instance, {source: {"VCPU": 4}}, project="p1")
    # The same consumer's allocations replaced: what it held is freed by the write.
    gen = api.get(f"/allocations/{instance}").json_body["consumer_generation"]
    api.allocate(instance, {target: {"VCPU": 6}}, project="p1", generation=gen)
    # A resize as Nova does it: the migration consumer takes over the source's allocations while
    # the instance holds the target's; both count until the migration consumer's are dropped.
    api.allocate(instance, {source: {"VCPU": 2}}, project="p1", generation=gen + 1)
    migration = new_uuid()
    body = {
        migration: {
            "allocations": {source: {"resources": {"VCPU": 2}}},
            "project_id": "p1",
            "user_id": "user",
            "consumer_generation": None,
            "consumer_type": "MIGRATION",
        },
        instance: {
            "allocations": {target: {"resources": {"VCPU": 4}}},
            "project_id": "p1",
            "user_id": "user",
            "consumer_generation": gen + 2,
            "consumer_type": "INSTANCE",
        },
    }
    assert api.post("/allocations", body).status_code == 204
    assert api.get("/berth/quotas/p1").json_body["usage"]["VCPU"] == 6
    # Lowered below usage: a write that shrinks is still accepted, one that grows is not.
    _set(api, "p1", {"VCPU": 3})
    api.allocate(instance, {target: {"VCPU": 5}}, project="p1", generation=gen + 3, expect=409)
    api.allocate(instance, {target: {"VCPU": 3}}, project="p1", generation=gen + 3)


# --- live: many claimers of one project at once -------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def live(request, tmp_path):
    yield from live_on(request, tmp_path, "quota", extra=["--enforce-quotas-on-allocations"])


def _race(live, requests):
    """Each (method, path, body) sent by its own thread, all released at once; the answers."""
    client = live.client()
    start = threading.Barrier(len(requests))

    def send(request):
        start.wait()
        r = client.request(*request)
        return r.status_code, r.json() if r.content else None

    try:
        with ThreadPoolExecutor(len(requests)) as pool:
            return list(pool.map(send, requests))
    finally:
        client.close()


def test_racing_claimers_of_one_project_never_pass_its_limit(live):
    client = live.client()
    hosts = [live_host(client, f"host-{i}", {"VCPU": 64, "MEMORY_MB": 65536}) for i in range(4)]
    limit, per_claim = 30, 2
    assert client.request("PUT", "/berth/quotas/p1", {"limits": {"VCPU": limit}}).status_code == 200
    picks = [("POST", "/berth/pick", _pick_body({"VCPU": per_claim}, project="p1")) for _ in range(48)]
    # Placement's own writes, with the setting on, are held to the same limit in the same race.
    puts = [
        (
            "PUT",
            f"/allocations/{new_uuid()}",
            {
                "allocations": {hosts[i % 4]: {"resources": {"VCPU": per_claim}}},
                "project_id": "p1",
                "user_id": "user",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        )
        for i in range(16)
    ]
    outcomes = _race(live, picks + puts)
    statuses = [status for status, _ in outcomes]
    assert set(statuses) <= {200, 204, 409}, outcomes
    assert len([s for s in statuses if s in (200, 204)]) == limit // per_claim
    refusals = {answer["errors"][0]["code"] for status, answer in outcomes if status == 409}
    assert refusals == {error_codes.QUOTA_EXCEEDED}
    usage = client.request("GET", "/berth/quotas/p1").json()["usage"]
    assert usage == {"VCPU": limit, "consumers": limit // per_claim}
    held = sum(client.get(f"/resource_providers/{host}/usages").json()["usages"]["VCPU"] for host in hosts)
    assert held == limit
    client.close()


def test_a_claims_changes_count_its_victims_in_their_own_project_and_user():
    changes = claim_changes(
        [("p1", "alice", {"VCPU": 2}), ("p1", "alice", {"VCPU": 2})],
        [
            Released("p1", "bob", {"VCPU": 3}),
            Released("p1", "alice", {}),
            Released("p1", "dave", {}),
            Released("p2", "carol", {"VCPU": 8}),
        ],
    )
    # Another project's victim frees nothing of p1's, and p2, which the claims add nothing to, is not checked.
    assert set(changes) == {"p1"}
    p1 = changes["p1"]
    assert p1.by_user["alice"] == Change({"VCPU": 4}, 2, Usage({}, 1))
    assert p1.by_user["bob"] == Change(held=Usage({"VCPU": 3}, 1))
    # A victim holding none of the classes asked still frees its place among the consumers.
    assert p1.by_user["dave"] == Change(held=Usage({}, 1))
    assert p1.total == Change({"VCPU": 4}, 2, Usage({"VCPU": 3}, 3))

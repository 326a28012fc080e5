"""POST /berth/pick with ``avoid_trees``: the trees named (hosts the caller knows to be down) are
neither chosen, nor named as alternates, nor made room on by preempting, for a single pick and a
gang alike, on the board and by the search of every tree, on both databases."""

from __future__ import annotations

import pytest
from apihelpers import new_uuid
from dbhelpers import clear_groups_and_leases

from berth.store.pick.board.host_board import HostBoard


@pytest.fixture(params=["board", "search"])
def api(request, api, app, db):
    clear_groups_and_leases(db)
    app.host_board = HostBoard(min_age=0.0, enabled=request.param == "board")
    return api


def _consumer():
    return {"uuid": new_uuid(), "project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}


def _pick(api, resources, expect=200, **extra):
    body = {"query": {"resources": resources}, "consumer": _consumer(), **extra}
    r = api.post("/berth/pick", body)
    assert r.status_code == expect, r.data
    return r.json_body


def _hosts(api, vcpus):
    """One host per entry, with that many VCPUs (the largest is the one spread weighs best)."""
    return [api.create_provider(f"host-{i}", inventory={"VCPU": v}) for i, v in enumerate(vcpus)]


def test_the_best_tree_avoided_is_neither_chosen_nor_an_alternate(api):
    best, other, third = _hosts(api, [16, 8, 4])
    plain = _pick(api, "VCPU:1", alternates=2)
    assert plain["root_provider_uuid"] == best
    answer = _pick(api, "VCPU:1", alternates=2, avoid_trees=[best])
    assert answer["root_provider_uuid"] == other
    assert [a["root_provider_uuid"] for a in answer["alternates"]] == [third]


def test_a_provider_below_the_root_names_its_whole_tree(api):
    (host,) = _hosts(api, [8])
    child = api.create_provider("host-0-numa0", parent=host, inventory={"MEMORY_MB": 1024})
    _pick(api, "VCPU:1", expect=409, avoid_trees=[child])
    assert _pick(api, "VCPU:1")["root_provider_uuid"] == host


def test_when_only_avoided_trees_fit_the_pick_is_a_409(api):
    small, large = _hosts(api, [1, 8])
    _pick(api, "VCPU:4", expect=409, avoid_trees=[large])
    # A uuid that names no provider is no error (a host deleted since it was seen down).
    assert _pick(api, "VCPU:4", avoid_trees=[new_uuid()])["root_provider_uuid"] == large


def test_a_preempting_pick_makes_room_only_on_a_tree_not_avoided(api):
    first, second = _hosts(api, [4, 4])
    for host in (first, second):
        body = {"query": {"resources": "VCPU:4", "in_tree": host}, "consumer": _consumer()}
        assert api.post("/berth/pick", body).status_code == 200
    answer = _pick(api, "VCPU:2", priority=10, preempt=True, avoid_trees=[first])
    assert answer["root_provider_uuid"] == second
    assert [v["root_provider_uuid"] for v in answer["preempted"]] == [second]
    _pick(api, "VCPU:4", expect=409, priority=10, preempt=True, avoid_trees=[first, second])


def test_a_gang_avoids_the_trees_named(api):
    hosts = _hosts(api, [8, 8, 8])
    body = {
        "query": {"resources": "VCPU:1"},
        "consumers": [_consumer() for _ in range(6)],
        "avoid_trees": hosts[:2],
    }
    r = api.post("/berth/pick", body)
    assert r.status_code == 200, r.data
    assert {m["root_provider_uuid"] for m in r.json_body["members"]} == {hosts[2]}
    body = {"query": {"resources": "VCPU:8"}, "consumers": [_consumer(), _consumer()], "avoid_trees": hosts[:2]}
    assert api.post("/berth/pick", body).status_code == 409


@pytest.mark.parametrize("value", ["not-a-list", ["not-a-uuid"], [1]])
def test_a_malformed_avoid_trees_is_a_400(api, value):
    _hosts(api, [4])
    r = api.post("/berth/pick", {"query": {"resources": "VCPU:1"}, "consumer": _consumer(), "avoid_trees": value})
    assert r.status_code == 400, r.data

"""Refusals of Berth's claims API, as a scheduler and an operator meet them:
each is a 400 (or a 409) in Placement's error format that says what stopped the request, never a 500
or a detail that names a cause that is not the one. On both databases; the picks on the board and by
the search of every tree."""

from __future__ import annotations

import pytest
from apihelpers import error_code, error_detail, new_uuid
from dbhelpers import clear_groups_and_leases

from berth.domain import error_codes
from berth.store.pick.board.host_board import HostBoard


@pytest.fixture(params=["board", "search"])
def api(request, api, app, db):
    clear_groups_and_leases(db)
    app.host_board = HostBoard(min_age=0.0, enabled=request.param == "board")
    return api


def _consumer():
    return {"uuid": new_uuid(), "project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}


# --- GET /berth/preemptions: its filters -------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        # str.isdigit() is true of a superscript two, which int() refuses: it was a 500.
        "limit=%C2%B2",
        # Valid ISO 8601 times whose offset takes them past year 1 or 9999 in UTC: a 500 too.
        "since=0001-01-01T00:00:00%2B05:00",
        "since=9999-12-31T23:59:59-05:00",
    ],
)
def test_a_filter_of_the_preemptions_out_of_reach_is_a_400(api, query):
    r = api.get(f"/berth/preemptions?{query}")
    assert r.status_code == 400, r.data
    assert error_code(r) == "berth.undefined_code"
    assert ("limit" if query.startswith("limit") else "since") in error_detail(r)


def test_the_filters_of_the_preemptions_still_take_what_they_took(api):
    assert api.get("/berth/preemptions?limit=10000").status_code == 200
    assert api.get("/berth/preemptions?since=0001-01-01T00:00:00Z").status_code == 200
    assert api.get("/berth/preemptions?since=2026-01-01T12:00:00%2B05:00").status_code == 200


# --- a pick whose every fitting tree is one to avoid --------------------------------------------------


def _hosts(api, count, vcpus=4):
    return [api.create_provider(f"host-{i}", inventory={"VCPU": vcpus}) for i in range(count)]


def test_a_pick_refused_because_every_tree_that_fits_is_avoided_says_so(api):
    hosts = _hosts(api, 2)
    r = api.post("/berth/pick", {"query": {"resources": "VCPU:1"}, "consumer": _consumer(), "avoid_trees": hosts})
    assert r.status_code == 409, r.data
    assert error_code(r) == error_codes.PICK_NO_VALID_HOST
    detail = error_detail(r)
    # Not "no tree can hold every part of the request together": both trees can.
    assert "every one of the 2 trees that fit is among the trees to avoid (avoid_trees)" in detail
    assert "every part of the request" not in detail


def test_a_preempting_pick_refused_because_every_tree_is_avoided_says_so(api):
    hosts = _hosts(api, 1)
    r = api.post(
        "/berth/pick",
        {
            "query": {"resources": "VCPU:1"},
            "consumer": _consumer(),
            "avoid_trees": hosts,
            "priority": 5,
            "preempt": True,
        },
    )
    assert r.status_code == 409, r.data
    assert "is among the trees to avoid" in error_detail(r)


def test_a_condition_no_provider_meets_is_still_named_when_trees_are_avoided(api):
    hosts = _hosts(api, 2)
    r = api.post("/berth/pick", {"query": {"resources": "VCPU:8"}, "consumer": _consumer(), "avoid_trees": hosts})
    assert r.status_code == 409, r.data
    assert "no provider has 8 VCPU free" in error_detail(r)


def test_a_gang_refused_because_every_tree_that_fits_is_avoided_says_so(api):
    hosts = _hosts(api, 3)
    r = api.post(
        "/berth/pick",
        {
            "query": {"resources": "VCPU:1"},
            "consumers": [_consumer() for _ in range(2)],
            "min_count": 1,
            "avoid_trees": hosts,
        },
    )
    assert r.status_code == 409, r.data
    assert error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST
    detail = error_detail(r)
    assert "stopped by every one of the 3 trees that fit is among the trees to avoid (avoid_trees)." in detail
    assert "every part of the request" not in detail

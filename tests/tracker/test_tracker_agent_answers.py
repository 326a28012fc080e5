"""The agent's error answers, byte for byte: the contract a conductor's ``AgentClient`` reads.

The application is driven in this process over a stand-in tracker, so each answer comes from one
known refusal: a malformed request, a refusal of the host model, a claim error the tracker raises.
"""

from __future__ import annotations

import pytest
from werkzeug.test import Client

from berth.clients.errors import ClaimFailed, ClaimNotFound, PlacementUnavailable, TrackerUnavailable
from berth.domain.host.records import ClaimRecord
from berth.domain.host.request import Flavor
from berth.tracker.agent.agent_api import AgentApp

INSTANCE = {
    "uuid": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "project_id": "demo",
    "user_id": "demo",
    "flavor": {"name": "small", "vcpus": 1, "memory_mb": 512, "disk_gb": 1},
}


class StandIn:
    """A tracker whose operations each refuse the way the test asks."""

    host = "compute1"
    tree = None

    def __init__(self, refusal):
        self.refusal = refusal

    def instance_claim(self, instance, preempted=(), held=None):
        raise self.refusal

    def get_claim(self, claim_id):
        raise self.refusal

    def resize_claim(self, instance, new_flavor, migration_uuid, source):
        raise AssertionError("a malformed source context is refused before the tracker is asked")

    def begin_move_out(self, instance_uuid, migration_uuid):
        record = ClaimRecord.new(
            host=self.host,
            instance_uuid=instance_uuid,
            consumer_uuid=instance_uuid,
            kind="instance",
            state="active",
            project_id="demo",
            user_id="demo",
            flavor=Flavor.from_dict(INSTANCE["flavor"]),
            allocations={},
        )
        return record.migration  # an active claim takes part in no move


def answer(method, path, body=None, refusal=None):
    response = Client(AgentApp(StandIn(refusal))).open(path, method=method, json=body)
    return response.status_code, response.get_data()


@pytest.mark.parametrize(
    ("method", "path", "body", "refusal", "expected"),
    [
        (
            "POST",
            "/claims/resize",
            {"instance": INSTANCE, "migration_uuid": "m1", "flavor": INSTANCE["flavor"], "source": {"x": 1}},
            None,
            (
                400,
                b'{"error":{"code":"claim.invalid_request","message":"source: \'host\' is a required property",'
                b'"reasons":[]}}',
            ),
        ),
        (
            "POST",
            "/claims/instance",
            {"instance": {**INSTANCE, "flavor": {"name": "bad"}}},
            None,
            (
                400,
                b'{"error":{"code":"claim.invalid_request","message":"instance.flavor: \'vcpus\' is a required '
                b'property","reasons":[]}}',
            ),
        ),
        (
            "POST",
            "/migrations/m1/source",
            {"instance_uuid": INSTANCE["uuid"]},
            None,
            (
                409,
                b'{"error":{"code":"claim.wrong_state","message":"claim CLAIM of '
                + INSTANCE["uuid"].encode()
                + b' (active) takes part in no move","reasons":[]}}',
            ),
        ),
        (
            "POST",
            "/claims/instance",
            {"instance": INSTANCE},
            ClaimFailed(["VCPU: 1 wanted, 0 free", "VCPU: 1 wanted, 0 free"]),
            (
                409,
                b'{"error":{"code":"claim.does_not_fit","message":"the request does not fit this host: '
                b'VCPU: 1 wanted, 0 free","reasons":["VCPU: 1 wanted, 0 free"]}}',
            ),
        ),
        (
            "GET",
            "/claims/c1",
            None,
            ClaimNotFound("no claim c1"),
            (404, b'{"error":{"code":"claim.not_found","message":"no claim c1","reasons":[]}}'),
        ),
        (
            "POST",
            "/claims/instance",
            {"instance": INSTANCE},
            TrackerUnavailable("the host is not reported yet"),
            (
                503,
                b'{"error":{"code":"claim.placement_unavailable","message":"the host is not reported yet",'
                b'"reasons":[]}}',
            ),
        ),
        (
            "POST",
            "/claims/instance",
            {"instance": INSTANCE},
            PlacementUnavailable(0, None, "refused", "GET", "/"),
            (503, b'{"error":{"code":"placement.error","message":"GET /: 0  refused","reasons":[]}}'),
        ),
        (
            "POST",
            "/claims/instance",
            {"instance": "no"},
            None,
            (
                400,
                b'{"error":{"code":"claim.invalid_request","message":"instance: \'no\' is not of type \'object\'",'
                b'"reasons":[]}}',
            ),
        ),
    ],
)
def test_every_refusal_is_answered_as_before(method, path, body, refusal, expected):
    status, raw = answer(method, path, body, refusal)
    expected_status, expected_raw = expected
    if b"claim CLAIM of" in expected_raw:  # the claim's id is made up on each run
        prefix, rest = raw.split(b"claim ", 1)
        raw = prefix + b"claim CLAIM" + rest[rest.index(b" of ") :]
    assert (status, raw) == (expected_status, expected_raw)


def test_an_unknown_path_and_a_wrong_method_are_http_errors():
    assert answer("GET", "/nowhere") == (
        404,
        b'{"error":{"code":"http.error","message":"The requested URL was not found on the server. If you entered '
        b'the URL manually please check your spelling and try again.","reasons":[]}}',
    )
    assert answer("PUT", "/claims") == (
        405,
        b'{"error":{"code":"http.error","message":"The method is not allowed for the requested URL.","reasons":[]}}',
    )

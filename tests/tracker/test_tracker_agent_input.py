"""What the agent's API does with a body it cannot take: a 400 ``claim.invalid_request`` naming the
field, before the tracker acts, never a 500 and never a guess (``"false"`` is not false).

The agent's application runs in this process over a real tracker of a fake host, against the
session's ``berth serve``; each request goes through the whole WSGI application."""

from __future__ import annotations

import pytest
from trackerhelpers import SMALL, flavor, instance, new_uuid
from werkzeug.test import Client

from berth.clients.errors import InvalidRequest
from berth.domain.host.errors import InvalidHostRequest
from berth.domain.host.request import InstanceSpec
from berth.tracker.agent.agent_api import AgentApp
from berth.tracker.auditing.audit import ALLOCATIONS_WITHOUT_CLAIM

INVALID = "claim.invalid_request"
# Values of the wrong kind for any field (each field takes at most one or two of these kinds).
WRONG = ["x", "", "false", 0, -5, 1.5, True, False, [], [1], ["x"], {}, {"a": 1}]


def call(app, method, path, body=None, *, data=None):
    response = Client(app).open(path, method=method, json=body, data=data)
    return response.status_code, response.get_json(silent=True)


def refused(answer, where):
    """The answer is a 400 ``claim.invalid_request`` whose message starts with ``where``."""
    status, body = answer
    assert status == 400, answer
    assert body["error"]["code"] == INVALID, body
    assert body["error"]["message"].startswith(where), body
    return body["error"]["message"]


@pytest.fixture
def host(hosts):
    return hosts(topology=SMALL)


@pytest.fixture
def app(host):
    return AgentApp(host, driver_name="fake")


def _stray(placement, host):
    """A consumer holding allocations on the host with no claim there: the audit's to remove, if healing."""
    consumer = new_uuid()
    placement.write_consumers(
        {
            consumer: {
                "allocations": {host.tree.root.uuid: {"VCPU": 1}},
                "generation": None,
                "project_id": "project-1",
                "user_id": "user-1",
                "consumer_type": "INSTANCE",
            }
        }
    )
    return consumer


def test_heal_is_a_boolean_or_left_out(app, host, placement):
    stray = _stray(placement, host)
    held = {host.tree.root.uuid: {"VCPU": 1}}
    for value in ["false", "true", "no", "", 0, 1, [], {}]:
        message = refused(call(app, "POST", "/audit", {"heal": value}), "heal: ")
        assert "is not of type 'boolean'" in message
        assert placement.consumer(stray).allocations == held  # nothing was healed
    # Left out, null or false: the audit reports (the configuration says not to heal) and leaves it.
    for body in [None, {}, {"heal": None}, {"heal": False}]:
        status, report = call(app, "POST", "/audit", body)
        assert status == 200
        assert ALLOCATIONS_WITHOUT_CLAIM in {f["kind"] for f in report["findings"]}
        assert placement.consumer(stray).allocations == held
    refused(call(app, "POST", "/audit", {"heal": False, "heel": True}), "the body: Additional properties")
    status, report = call(app, "POST", "/audit", {"heal": True})
    assert status == 200 and report["consistent"]
    assert placement.consumer(stray).allocations == {}


def test_older_than_is_a_number_of_seconds_not_below_zero(app, host):
    inst = instance(flavor(1, 512))
    host.instance_claim(inst)
    host.soft_delete_instance(inst.uuid)
    for value in ["abc", "10", True, [], {}]:
        refused(call(app, "POST", "/reclaim", {"older_than": value}), "older_than: ")
    assert "less than the minimum of 0" in refused(call(app, "POST", "/reclaim", {"older_than": -5}), "older_than: ")
    with pytest.raises(InvalidRequest, match="older_than is a number of seconds >= 0"):
        host.reclaim_soft_deleted(-5)  # the tracker refuses it too, called in its own process
    assert [r.state for r in host.store.for_instance(inst.uuid)] == ["soft_deleted"]
    assert call(app, "POST", "/reclaim", {"older_than": 3600}) == (200, {"result": []})
    assert call(app, "POST", "/reclaim", {"older_than": 0.0}) == (200, {"result": [inst.uuid]})
    assert host.store.for_instance(inst.uuid) == []


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"flavor": "x"}, "instance.flavor: 'x' is not of type 'object'"),
        ({"flavor": {"vcpus": 1, "memory_mb": 512, "resources": [1]}}, "instance.flavor.resources: "),
        ({"flavor": {"vcpus": 1, "memory_mb": 512, "resources": {"CUSTOM_X": "1"}}}, "instance.flavor.resources"),
        ({"flavor": {"vcpus": 1, "memory_mb": 512, "numa": "x"}}, "instance.flavor.numa: 'x' is not of type"),
        ({"flavor": {"vcpus": 1, "memory_mb": 512, "numa": {"cells": "2"}}}, "instance.flavor.numa.cells: "),
        ({"flavor": {"vcpus": 1, "memory_mb": 512, "pci": ["x"]}}, "instance.flavor.pci[0]: 'x' is not of type"),
        ({"flavor": {"vcpus": 1, "memory_mb": 512, "pci": [{"count": "1"}]}}, "instance.flavor.pci[0].count: "),
        ({"flavor": {"vcpus": "1", "memory_mb": 512}}, "instance.flavor.vcpus: '1' is not of type 'integer'"),
        ({"flavor": {"vcpus": 1.5, "memory_mb": 512}}, "instance.flavor.vcpus: 1.5 is not of type 'integer'"),
        ({"flavor": {"vcpus": True, "memory_mb": 512}}, "instance.flavor.vcpus: True is not of type 'integer'"),
        ({"flavor": {"memory_mb": 512}}, "instance.flavor: 'vcpus' is a required property"),
        ({"project_id": 7}, "instance.project_id: 7 is not of type 'string'"),
        ({"anti_affinity": "x"}, "instance.anti_affinity: 'x' is not of type"),
    ],
)
def test_a_malformed_instance_is_refused_before_the_tracker_claims(app, host, change, where):
    body = {"instance": {**instance(flavor(1, 512)).to_dict(), **change}}
    refused(call(app, "POST", "/claims/instance", body), where)
    assert host.store.all() == []


@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        ("/claims/instance", "no", "the body must be a JSON object"),
        ("/claims/instance", {"instance": "no"}, "instance: 'no' is not of type 'object'"),
        ("/claims/instance", {"preempted": "x"}, "preempted: 'x' is not of type"),
        ("/claims/instance", {"preempted": [1]}, "preempted[0]: 1 is not of type 'string'"),
        (
            "/claims/instance",
            {"flavor": {}},
            "the body: Additional properties are not allowed ('flavor' was unexpected)",
        ),
        ("/claims/resize", {"migration_uuid": 5}, "migration_uuid: 5 is not of type 'string'"),
        ("/claims/resize", {"source": {"x": 1}}, "source: "),
        ("/claims/resize", {"flavor": {"vcpus": 1, "memory_mb": "512"}}, "flavor.memory_mb: "),
        ("/claims/live_migration", {"source": []}, "source: [] is not of type 'object'"),
        ("/claims/evacuate", {"source_host": 5}, "source_host: 5 is not of type 'string'"),
        ("/claims/rebuild", {"migration_uuid": 5}, "migration_uuid: 5 is not of type"),
        ("/claims/unshelve", {"preempted": {}}, "preempted: {} is not of type"),
    ],
)
def test_every_claim_route_checks_its_fields(app, host, path, body, where):
    inst = instance(flavor(1, 512)).to_dict()
    if isinstance(body, dict):
        body = {"instance": inst, **body}
    refused(call(app, "POST", path, body), where)
    assert host.store.all() == []


@pytest.mark.parametrize(
    ("method", "path", "body", "where"),
    [
        ("POST", "/migrations/m1/source", {"instance_uuid": 5}, "instance_uuid: 5 is not of type 'string'"),
        ("POST", "/migrations/m1/cleanup_evacuated", {"instance_uuid": ["x"]}, "instance_uuid: "),
        ("POST", "/guests/g1", {"claim_id": 5}, "claim_id: 5 is not of type 'string'"),
        ("POST", "/guests/g1", {"claim_id": "c", "state": "running"}, "the body: Additional properties"),
        ("POST", "/guests/g1/migrate", {"destination_host": 5}, "destination_host: 5 is not of type"),
        ("POST", "/guests/g1/migrate", {"claim_id": True}, "claim_id: True is not of type"),
    ],
)
def test_the_other_routes_check_their_fields(app, method, path, body, where):
    refused(call(app, method, path, body), where)


def test_no_wrong_value_of_any_field_makes_a_500(app, host):
    """Every field of every route's body, given each value of the wrong kinds: the agent answers
    each as a refusal or an operation, never as its own failure."""
    source = {
        "host": "elsewhere",
        "instance_uuid": new_uuid(),
        "migration_uuid": new_uuid(),
        "flavor": flavor(1, 512).to_dict(),
        "allocations": {},
        "project_id": "project-1",
        "user_id": "user-1",
    }
    fields = {
        "/claims/instance": {"preempted": []},
        "/claims/resize": {"migration_uuid": new_uuid(), "source": source, "flavor": flavor(1, 512).to_dict()},
        "/claims/live_migration": {"migration_uuid": new_uuid(), "source": source},
        "/claims/evacuate": {"migration_uuid": new_uuid(), "source_host": "elsewhere"},
        "/claims/rebuild": {"migration_uuid": None, "source_host": None},
        "/reclaim": {"older_than": 3600},
        "/audit": {"heal": False},
        "/migrations/m1/source": {"instance_uuid": new_uuid()},
        "/guests/g1": {"claim_id": new_uuid()},
        "/guests/g1/migrate": {"destination_host": "elsewhere", "claim_id": None},
    }
    answered = set()
    for path, base in fields.items():
        claims = path.startswith("/claims/")
        for name in [*base, *(["instance"] if claims else [])]:
            for value in WRONG:
                body = {**base, name: value}
                if claims and name != "instance":
                    body["instance"] = instance(flavor(1, 512)).to_dict()
                status, answer = call(app, "POST", path, body)
                assert status != 500, (path, body, answer)
                answered.add(status)
    flavor_fields = {"name", "vcpus", "memory_mb", "disk_gb", "cpu_policy", "numa", "pci", "resources"}
    for name in sorted(flavor_fields):
        for value in WRONG:
            inst = instance(flavor(1, 512)).to_dict()
            inst["flavor"] = {**inst["flavor"], name: value}
            status, answer = call(app, "POST", "/claims/instance", {"instance": inst})
            assert status != 500, (name, value, answer)
            answered.add(status)
    assert 400 in answered
    for claim in host.store.all():  # the wrong values a flavor's name takes, say, claimed
        host.abort(claim.claim_id)


def test_a_claim_already_gone_is_aborted_again_harmlessly(app, host):
    """``DELETE /claims/{id}`` is idempotent, as the tracker's ``abort``: a conductor that repeats
    it (its answer lost, or the audit released the claim first) is not told of an error. ``GET``
    of that claim is a 404."""
    claim = host.instance_claim(instance(flavor(1, 512)))
    status, first = call(app, "DELETE", f"/claims/{claim.claim_id}")
    assert status == 200 and first["result"] is not None
    assert call(app, "DELETE", f"/claims/{claim.claim_id}") == (200, {"result": None})
    assert call(app, "DELETE", f"/claims/{new_uuid()}") == (200, {"result": None})
    status, missing = call(app, "GET", f"/claims/{claim.claim_id}")
    assert status == 404 and missing["error"]["code"] == "claim.not_found"


@pytest.mark.parametrize(
    "change",
    [
        {"flavor": "x"},
        {"flavor": {"vcpus": 1, "memory_mb": 1, "resources": [1]}},
        {"flavor": {"vcpus": 1, "memory_mb": 1, "numa": "x"}},
        {"flavor": {"vcpus": 1, "memory_mb": 1, "pci": ["x"]}},
    ],
)
def test_the_host_model_refuses_the_same_documents_as_its_own_error(change):
    """Read without the agent (a caller of the host model in its own process), the same malformed
    documents are the host model's ``InvalidHostRequest``, which the tracker answers as a 400."""
    with pytest.raises(InvalidHostRequest, match="invalid (instance|flavor)"):
        InstanceSpec.from_dict({**instance(flavor(1, 512)).to_dict(), **change})

"""The agent's routes that read no body (a move's confirm, revert and drop, an instance's life cycle,
``/sync``) refuse one with keys, as every route refuses a key it does not know: a 400
``claim.invalid_request``, and nothing done. No body, or ``{}``, is what they take.

The agent's application runs in this process over a real tracker of a fake host, against the
session's ``berth serve``; each request goes through the whole WSGI application."""

from __future__ import annotations

import pytest
from trackerhelpers import SMALL, assert_books_agree, instance, new_uuid
from werkzeug.test import Client

from berth.domain.host.records import ACTIVE, SOFT_DELETED
from berth.tracker.agent.agent_api import AgentApp


def call(app, method, path, body=None, *, data=None):
    response = Client(app).open(path, method=method, json=body, data=data)
    return response.status_code, response.get_json(silent=True)


@pytest.fixture
def host(hosts):
    return hosts(topology=SMALL)


@pytest.fixture
def app(host):
    return AgentApp(host, driver_name="fake")


@pytest.mark.parametrize("action", ["delete", "soft_delete", "shelve", "shelve_offload"])
def test_an_instance_action_with_keys_in_its_body_is_refused_and_not_done(host, app, action):
    inst = instance()
    host.instance_claim(inst)
    status, body = call(app, "POST", f"/instances/{inst.uuid}/{action}", {"instance_uuid": new_uuid()})
    assert status == 400, body
    assert body["error"]["code"] == "claim.invalid_request"
    assert "'instance_uuid' was unexpected" in body["error"]["message"]
    assert [c.state for c in host.claims_for_instance(inst.uuid)] == [ACTIVE]
    status, body = call(app, "POST", f"/instances/{inst.uuid}/soft_delete", data=b"not json")
    assert status == 400 and body["error"]["message"] == "the body is not JSON"
    assert call(app, "POST", f"/instances/{inst.uuid}/soft_delete", {})[0] == 200
    assert [c.state for c in host.claims_for_instance(inst.uuid)] == [SOFT_DELETED]
    assert call(app, "POST", f"/instances/{inst.uuid}/delete")[0] == 200
    assert host.claims_for_instance(inst.uuid) == []
    assert_books_agree(host)


@pytest.mark.parametrize("action", ["confirm", "revert", "drop"])
def test_a_move_step_with_keys_in_its_body_is_refused_and_not_done(host, app, action):
    inst = instance()
    host.instance_claim(inst)
    migration = new_uuid()
    host.begin_move_out(inst.uuid, migration)
    status, body = call(app, "POST", f"/migrations/{migration}/{action}", {"instance_uuid": inst.uuid})
    assert status == 400, body
    assert body["error"]["code"] == "claim.invalid_request"
    [claim] = host.claims_for_instance(inst.uuid)
    assert claim.migration_uuid == migration  # still handed over: nothing was done
    status, body = call(app, "POST", f"/migrations/{migration}/revert")
    assert status == 200 and body == {"result": ["restored"]}
    assert_books_agree(host)
    host.delete_instance(inst.uuid)


def test_sync_with_keys_in_its_body_is_refused(app):
    status, body = call(app, "POST", "/sync", {"force": True})
    assert status == 400 and body["error"]["code"] == "claim.invalid_request", body
    assert call(app, "POST", "/sync", {})[0] == 200

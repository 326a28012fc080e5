"""What Berth's own callers say about themselves, checked against a live ``berth serve`` under its
default (secure RBAC) rules, where reshaping is the service role's alone: the service clients (the
agents', the scheduler's and the conductors', the tools') speak with a service user's roles, a
person's tools with their token's roles alone."""

from __future__ import annotations

import uuid

import pytest
from livehelpers import LiveServer

from berth.cli.client.connection import connect
from berth.cli.services import agent
from berth.clients.errors import PlacementError
from berth.clients.placement import SERVICE_ROLES, PlacementClient
from berth.testbed.client import Client


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('callers') / 'placement.sqlite'}", workers=1)
    yield server
    log = server.stop()
    assert "Traceback" not in log, log


def _reshape_body(provider: str) -> dict:
    return {
        "inventories": {provider: {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}},
        "allocations": {},
    }


def _new_provider(client: PlacementClient) -> str:
    provider = str(uuid.uuid4())
    client.request("POST", "/resource_providers", {"name": f"rp-{provider[:8]}", "uuid": provider})
    return provider


def _reshape_status(client: PlacementClient) -> int:
    provider = _new_provider(client)
    try:
        client.request("POST", "/reshaper", _reshape_body(provider))
    except PlacementError as error:
        return error.status
    return 204


def test_the_service_client_speaks_with_a_service_users_roles(live):
    # The tracker's, the scheduler's and the conductors' client, as they make it.
    assert SERVICE_ROLES == ("admin", "service")
    assert _reshape_status(PlacementClient(live.url)) == 204
    # The same token without the roles is a plain admin, which the default rules refuse a reshape.
    assert _reshape_status(PlacementClient(live.url, roles=())) == 403


def test_the_agent_says_the_roles_its_settings_give(live):
    def settings(*argv: str, environ: dict[str, str] | None = None) -> agent.AgentSettings:
        params = agent.agent_command.make_context("agent", ["--placement", live.url, *argv]).params
        return agent.load_config(params, environ or {})[0]

    assert _reshape_status(agent.placement_client(settings())) == 204
    assert _reshape_status(agent.placement_client(settings("--placement-roles", "admin"))) == 403
    assert _reshape_status(agent.placement_client(settings(environ={"BERTH_PLACEMENT_ROLES": "admin"}))) == 403


def test_a_persons_client_commands_send_the_tokens_roles_alone(live):
    # berth provider list and the like: noauth2's admin token is an administrator, not a service.
    client = connect(live.url, None, {})
    assert "X-Roles" not in client.headers
    assert client.get("/resource_providers")["resource_providers"] is not None
    assert _reshape_status(client) == 403


def test_bench_stress_and_sim_drive_the_service_as_a_service(live):
    client = Client(live.url)
    try:
        provider = str(uuid.uuid4())
        client.call("POST", "/resource_providers", {"name": f"rp-{provider[:8]}", "uuid": provider})
        client.call("POST", "/reshaper", _reshape_body(provider), expect=(204,))
    finally:
        client.close()

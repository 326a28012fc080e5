"""What the conductors' live tests ask for: flavors, servers and their operations' ends."""

from __future__ import annotations

import time

import pytest

from berth.clients.conductor import ConductorClient, ConductorError

SMALL = {"name": "small", "vcpus": 1, "ram": 512, "disk": 1}
LARGE = {"name": "large", "vcpus": 2, "ram": 1024, "disk": 2}


def ensure_flavors(client: ConductorClient) -> None:
    known = {f["name"] for f in client.get("/flavors")["flavors"]}
    for flavor in (SMALL, LARGE):
        if flavor["name"] not in known:
            client.request("POST", "/flavors", {"flavor": flavor})


def ended(client: ConductorClient, operation_id: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        operation = client.get(f"/operations/{operation_id}")["operation"]
        if operation["state"] != "running":
            return operation
        time.sleep(0.1)
    raise AssertionError(f"operation {operation_id} still running after {timeout} s")


def build(client: ConductorClient, name: str = "vm", flavor: str = "small", **extra: object) -> dict:
    """A server built and ACTIVE; its view."""
    made = client.request("POST", "/servers", {"server": {"name": name, "flavorRef": flavor, **extra}})["server"]
    operation = ended(client, made["operation_id"])
    assert operation["state"] == "done", operation
    return client.get(f"/servers/{made['id']}")["server"]


def act(client: ConductorClient, server_id: str, action: str, arguments: object = None) -> dict:
    """The action started and ended; the operation as it ended."""
    started = client.request("POST", f"/servers/{server_id}/action", {action: arguments})["operation"]
    return ended(client, started["id"])


def wait_for(predicate, timeout: float = 30.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} did not hold within {timeout} s")


def refused(client: ConductorClient, method: str, path: str, body: object = None) -> ConductorError:
    """The error the conductors answer ``method path`` with (the test fails if they take it)."""
    with pytest.raises(ConductorError) as caught:
        client.request(method, path, body)
    return caught.value

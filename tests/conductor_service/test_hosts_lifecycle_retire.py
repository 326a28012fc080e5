"""A host retired (``DELETE /hosts/{name}``) and registered again by its agent: the host the
conductors show is the host the scheduler sees."""

from __future__ import annotations

import pytest
from servicehelpers import ended, ensure_flavors, wait_for

from berth.scheduler.request.request_spec import DISABLED_TRAIT

pytestmark = pytest.mark.slow


def test_a_disabled_host_retired_and_registered_again_is_enabled_in_the_service_too(cloud):
    """Retired, the host is forgotten, its disabling with it: its agent, still running, registers it
    again at its next beat, enabled, and the scheduler sends servers to it (the service's compute
    node kept the disabled trait, so the host was shown enabled and nothing ever landed there)."""
    client = cloud.client()
    ensure_flavors(client)
    client.request("POST", "/hosts/gamma/disable", {"reason": "to be retired"})
    root = cloud.placement.find_provider("gamma")["uuid"]
    assert DISABLED_TRAIT in cloud.placement.get(f"/resource_providers/{root}/traits")["traits"]

    client.request("DELETE", "/hosts/gamma")
    host = wait_for(
        lambda: next((h for h in client.get("/hosts")["hosts"] if h["name"] == "gamma"), None),
        what="gamma registered again by its agent",
    )
    assert host["status"] == "enabled" and host["state"] == "up", host
    assert DISABLED_TRAIT not in cloud.placement.get(f"/resource_providers/{root}/traits")["traits"]

    made = client.request(
        "POST", "/servers", {"server": {"name": "after-retire", "flavorRef": "small", "availability_zone": "zone-b"}}
    )["server"]
    built = ended(client, made["operation_id"])
    assert built["state"] == "done" and built["host"] == "gamma", built
    assert ended(client, client.request("DELETE", f"/servers/{made['id']}")["operation"]["id"])["state"] == "done"

"""Server groups as Nova's clients make them, against live conductors: before Nova's microversion
2.64 a group's policy is the one item of ``policies``, and Nova's clients still send that by default
(``openstack server group create --policy anti-affinity``); it was a 400."""

from __future__ import annotations

import pytest
from servicehelpers import ended, ensure_flavors, refused

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


def test_a_group_made_with_policies_holds_its_one_policy(cloud):
    client = cloud.client()
    made = client.request("POST", "/os-server-groups", {"server_group": {"name": "old", "policies": ["anti-affinity"]}})
    group = made["server_group"]
    assert group["policy"] == "anti-affinity" and group["rules"] == {}
    assert client.get(f"/os-server-groups/{group['id']}")["server_group"]["policy"] == "anti-affinity"
    # The policy holds: two members of the group are on two hosts.
    hints = {"group": group["id"]}
    members = []
    for i in range(2):
        body = {"server": {"name": f"old-{i}", "flavorRef": "small"}, "os:scheduler_hints": hints}
        server = client.request("POST", "/servers", body)["server"]
        assert ended(client, server["operation_id"])["state"] == "done"
        members.append(client.get(f"/servers/{server['id']}")["server"])
    assert len({m["OS-EXT-SRV-ATTR:host"] for m in members}) == 2
    for member in members:
        assert ended(client, client.request("DELETE", f"/servers/{member['id']}")["operation"]["id"])["state"] == "done"
    client.request("DELETE", f"/os-server-groups/{group['id']}")


@pytest.mark.parametrize(
    "asked",
    [
        {"name": "none"},
        {"name": "both", "policy": "affinity", "policies": ["affinity"]},
        {"name": "two", "policies": ["affinity", "anti-affinity"]},
        {"name": "empty", "policies": []},
        {"name": "unknown", "policies": ["scatter"]},
        {"name": "ruled", "policies": ["affinity"], "rules": {"max_server_per_host": 2}},
    ],
)
def test_a_group_asks_one_policy_one_way(cloud, asked):
    client = cloud.client()
    error = refused(client, "POST", "/os-server-groups", {"server_group": asked})
    assert error.status == 400, error
    if asked["name"] in ("none", "both"):
        assert "not both and not neither" in str(error)
    assert asked["name"] not in {g["name"] for g in client.get("/os-server-groups")["server_groups"]}

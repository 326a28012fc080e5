"""The conductors' API used as a user of Nova's uses it, against live conductors: requests Nova refuses
are refused before anything is written, a list read page by page survives a server deleted between
its pages, ``deleted=1`` lists the deleted servers as Nova's does; and the command's word for a
conductor that took a request and did not answer."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator

import pytest
from servicehelpers import build, ended, ensure_flavors, refused

from berth.cli.compute.connection import explain_failure
from berth.clients.conductor import ConductorClient

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


def named(client: ConductorClient, name: str, query: str = "") -> list[dict]:
    return [s for s in client.get(f"/servers?{query}")["servers"] if s["name"].startswith(name)]


def test_image_properties_that_make_no_request_are_refused_before_anything_is_written(cloud):
    """As a flavor's extra specs are checked when it is made: a single create used to be taken (202)
    and its server written in ERROR, a multi-create answered 500."""
    client = cloud.client()
    before = len(client.get("/operations")["operations"])
    for extra in ({}, {"min_count": 2, "max_count": 2}):
        body = {"server": {"name": "badimage", "flavorRef": "small", "image_properties": {"hw_cpu_policy": "x"}}}
        body["server"].update(extra)
        error = refused(client, "POST", "/servers", body)
        assert error.status == 400 and error.code == "berth.undefined_code", error
        assert "hw_cpu_policy" in error.detail
    assert named(client, "badimage") == [] and named(client, "badimage", "deleted=1") == []
    assert len(client.get("/operations")["operations"]) == before
    # Properties that make a request are taken, as before.
    server = build(client, "goodimage", image_properties={"hw_cpu_policy": "shared"})
    assert server["image"]["properties"] == {"hw_cpu_policy": "shared"}
    assert ended(client, client.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])["state"] == "done"


def test_a_list_read_a_page_at_a_time_goes_on_past_a_server_deleted_between_its_pages(cloud):
    client = cloud.client()
    older, newer = build(client, "paged-1"), build(client, "paged-2")
    [first] = client.get("/servers?limit=1&name=^paged-")["servers"]
    assert first["id"] == newer["id"]
    deleted = client.request("DELETE", f"/servers/{newer['id']}")["operation"]
    assert ended(client, deleted["id"])["state"] == "done"
    # The next page, after the server deleted meanwhile, as Nova reads its marker (it was a 400).
    page = client.get(f"/servers?limit=1&name=^paged-&marker={newer['id']}")["servers"]
    assert [s["id"] for s in page] == [older["id"]]
    assert refused(client, "GET", f"/servers?marker={uuid.uuid4()}").code == "berth.marker.not_found"
    assert ended(client, client.request("DELETE", f"/servers/{older['id']}")["operation"]["id"])["state"] == "done"


def test_deleted_1_lists_the_deleted_servers_only_as_novas_list_does(cloud):
    client = cloud.client()
    kept, gone = build(client, "listed-kept"), build(client, "listed-gone")
    assert ended(client, client.request("DELETE", f"/servers/{gone['id']}")["operation"]["id"])["state"] == "done"
    for query in ("deleted=1", "deleted=true", "status=DELETED", "deleted=1&status=deleted"):
        assert [(s["id"], s["status"]) for s in named(client, "listed-", query)] == [(gone["id"], "DELETED")], query
    assert [s["id"] for s in named(client, "listed-")] == [kept["id"]]
    assert ended(client, client.request("DELETE", f"/servers/{kept['id']}")["operation"]["id"])["state"] == "done"


def test_rules_are_refused_for_any_policy_but_anti_affinity_as_nova_refuses_them(cloud):
    client = cloud.client()
    for policy in ("affinity", "soft-affinity", "soft-anti-affinity"):
        body = {"server_group": {"name": f"ruled-{policy}", "policy": policy, "rules": {"max_server_per_host": 1}}}
        error = refused(client, "POST", "/os-server-groups", body)
        assert error.status == 400 and "Only anti-affinity policy supports rules" in error.detail, error
    groups = client.get("/os-server-groups")["server_groups"]
    assert [g for g in groups if g["name"].startswith("ruled-")] == []
    # Without rules, or with an empty set of them, any policy is taken; anti-affinity takes its rule.
    made = [
        client.request("POST", "/os-server-groups", {"server_group": body})["server_group"]
        for body in (
            {"name": "plain", "policy": "affinity"},
            {"name": "plain", "policy": "soft-affinity", "rules": {}},
            {"name": "plain", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}},
        )
    ]
    assert [g["rules"] for g in made] == [{}, {}, {"max_server_per_host": 2}]
    for group in made:
        client.request("DELETE", f"/os-server-groups/{group['id']}")


def test_a_host_name_longer_than_a_name_may_be_is_refused_and_not_registered(cloud):
    """``PUT /hosts`` refuses a name over 255 characters; ``PUT /hosts/{name}`` used to write it (and
    fail with a 500 on PostgreSQL, whose column holds 255)."""
    client = cloud.client()
    long_name = "h" * 256
    for query in ("", "?dry_run=1"):
        error = refused(client, "PUT", f"/hosts/{long_name}{query}", {"host": {"url": "http://127.0.0.1:9"}})
        assert error.status == 400 and "255" in error.detail, error
    assert long_name not in {h["name"] for h in client.get("/hosts")["hosts"]}


@pytest.fixture
def silent_conductor() -> Iterator[str]:
    """A conductor's address that takes requests and never answers them."""
    listener = socket.create_server(("127.0.0.1", 0))
    taken: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not done.is_set():
            try:
                taken.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    done.set()
    thread.join()
    for conn in taken:
        conn.close()
    listener.close()


def test_a_request_taken_and_not_answered_is_said_to_be_perhaps_carried_out(silent_conductor):
    """Not "no conductor answered ... is one running?": one took the request, and may have acted on
    it, so the command says to look before asking again (a second create would build twice)."""
    client = ConductorClient(silent_conductor, timeout=0.5)
    error = refused(client, "POST", "/servers", {"server": {"name": "x", "flavorRef": "small"}})
    said = str(explain_failure(error, [silent_conductor]))
    assert "did not answer in time" in said and "may have been carried out" in said, said
    assert "berth operation list" in said and "is one running" not in said, said
    # One that refuses the connection is still "no conductor answered".
    closed = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    error = refused(ConductorClient(url, timeout=0.5), "GET", "/servers")
    assert "no conductor answered" in str(explain_failure(error, [url]))

"""The books a simulation reads at its end, from a real ``berth serve``."""

from __future__ import annotations

import uuid

import pytest

from berth.testbed.client import Client
from berth.testbed.services.server import Server
from berth.testbed.sim.checks.books import read_books

pytestmark = pytest.mark.slow


def test_the_books_give_each_provider_its_capacity_by_the_domain_rule(tmp_path):
    server = Server(f"sqlite:///{tmp_path / 'books.sqlite'}", 1, str(tmp_path))
    server.start()
    try:
        client = Client(server.url)
        rp = str(uuid.uuid4())
        client.call("POST", "/resource_providers", {"uuid": rp, "name": "host-1"}, expect=(200, 201))
        inventory = {"total": 9, "reserved": 1, "allocation_ratio": 1.5}
        body = {"resource_provider_generation": 0, "inventories": {"VCPU": inventory}}
        client.call("PUT", f"/resource_providers/{rp}/inventories", body)
        books = read_books(server.url, dict, {})
        client.close()
    finally:
        server.stop(grace=1.0)
    assert books.providers[rp].capacity == {"VCPU": 12}  # (9 - 1) * 1.5
    assert books.providers[rp].usages == {"VCPU": 0}

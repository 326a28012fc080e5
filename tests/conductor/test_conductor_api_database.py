"""The conductors' API while its database cannot be reached (restarting, or failing over to its
standby): a change answers 503 with a code that a client may retry, not an unexpected error's 500;
a read is asked again until the database is back. Through the real WSGI application over a real PostgreSQL."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from conductorhelpers import PLAIN
from psycopg import sql
from werkzeug.test import Client

from berth.conductor.api.app import create_app
from berth.conductor.control.plane import ControlPlane
from berth.scheduler.settings import SelectionSettings

pytestmark = pytest.mark.slow

ADMIN = {"X-Auth-Token": "admin"}


def _allow_connections(postgres_server, name: str, allowed: bool) -> None:
    """The database takes new connections or refuses them; refusing, its open ones are ended."""
    with psycopg.connect(postgres_server.admin_url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as c:
        c.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(sql.Identifier(name), sql.Literal(allowed)))
        if not allowed:
            c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))


def test_a_database_out_of_reach_answers_a_change_503_with_a_code_and_a_read_once_it_is_back(
    postgres_server, placement
):
    name = f"conductors_{uuid.uuid4().hex[:8]}"
    plane = ControlPlane(
        postgres_server.create_database(name), placement, selection=SelectionSettings(enabled_filters=[])
    )
    try:
        plane.flavors.create({"name": PLAIN.name, "vcpus": 1, "ram": 512, "disk": 1})
        web = Client(create_app(plane))
        assert web.get("/flavors", headers=ADMIN).status_code == 200
        _allow_connections(postgres_server, name, False)
        try:
            # A change: refused at once, with a code a client may retry on.
            r = web.post("/flavors", json={"flavor": {"name": "f2", "vcpus": 1, "ram": 64}}, headers=ADMIN)
            assert r.status_code == 503, r.get_data(as_text=True)
            [error] = r.get_json()["errors"]
            assert error["code"] == "berth.database.unavailable"
            assert "try the request again" in error["detail"]
            # A read: asked again until the database is back (a failover takes seconds).
            with ThreadPoolExecutor(1) as pool:
                reading = pool.submit(lambda: web.get("/flavors", headers=ADMIN))
                time.sleep(1.0)
                assert not reading.done()
                _allow_connections(postgres_server, name, True)
                r = reading.result(timeout=60)
        finally:
            _allow_connections(postgres_server, name, True)
        assert r.status_code == 200 and [f["name"] for f in r.get_json()["flavors"]] == [PLAIN.name]
    finally:
        plane.close()

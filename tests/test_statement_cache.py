"""Every statement the service's frequent requests run through SQLAlchemy has a cache key: one
without is compiled again on every run (a few hundred microseconds of Python each time)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from apihelpers import new_uuid
from sqlalchemy.engine.interfaces import CacheStats

from berth.store import schema
from berth.store.pick.board.host_board import HostBoard


@pytest.fixture
def compiled_afresh(db):
    """The SQL of every statement run without a cache key while the test runs."""
    found: list[str] = []

    def check(conn, cursor, statement, parameters, context, executemany):
        # A SAVEPOINT is SQLAlchemy's own short text, built without a compiler.
        if getattr(context, "cache_hit", None) is CacheStats.NO_CACHE_KEY and "SAVEPOINT" not in statement:
            found.append(statement)

    sa.event.listen(db.engine, "after_cursor_execute", check)
    yield found
    sa.event.remove(db.engine, "after_cursor_execute", check)


def _consumer(uuid: str) -> dict:
    return {"uuid": uuid, "project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}


def test_the_requests_of_a_running_cloud_compile_nothing_afresh(db, app, api, compiled_afresh):
    with db.engine.begin() as conn:
        conn.execute(schema.server_group_members.delete())
        conn.execute(schema.server_groups.delete())
    app.host_board = HostBoard(min_age=0.0)
    hosts = [api.create_provider(f"host-{i}", inventory={"VCPU": 16, "MEMORY_MB": 16384}) for i in range(3)]
    for _ in range(2):
        picked, leased, moved = new_uuid(), new_uuid(), new_uuid()
        body = {"query": {"resources": "VCPU:1,MEMORY_MB:512"}, "consumer": _consumer(picked), "lease_seconds": 60}
        assert api.post("/berth/pick", body).status_code == 200
        assert api.post(f"/berth/leases/{picked}/confirm").status_code == 204
        assert api.get(f"/allocations/{picked}").status_code == 200
        assert api.put(f"/berth/leases/{leased}", {"expires_in": 60}).status_code == 200
        api.allocate(leased, {hosts[0]: {"VCPU": 1, "MEMORY_MB": 512}})
        assert api.delete(f"/berth/leases/{leased}").status_code == 204
        assert api.get("/allocation_candidates?resources=VCPU:1").status_code == 200
        generation = api.get(f"/allocations/{picked}").json_body["consumer_generation"]
        both = {
            picked: {
                "allocations": {hosts[1]: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
                "consumer_generation": generation,
                "project_id": "proj",
                "user_id": "user",
                "consumer_type": "INSTANCE",
            },
            moved: {
                "allocations": {hosts[2]: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
                "consumer_generation": None,
                "project_id": "proj",
                "user_id": "user",
                "consumer_type": "MIGRATION",
            },
        }
        assert api.post("/allocations", both).status_code == 204
        assert api.get(f"/resource_providers/{hosts[1]}").status_code == 200
        assert api.get("/resource_providers?required=COMPUTE_STATUS_DISABLED").status_code == 200
        assert api.get(f"/resource_providers/{hosts[1]}/allocations").status_code == 200
        assert api.delete(f"/allocations/{moved}").status_code == 204
        assert api.delete(f"/allocations/{picked}").status_code == 204
        assert api.delete(f"/allocations/{picked}").status_code == 404
    assert compiled_afresh == []

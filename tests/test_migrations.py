"""The migrations build exactly the schema the code describes, and carry existing data forward."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from apihelpers import Api, new_uuid
from dbhelpers import BACKENDS, make_database
from sqlalchemy.schema import CreateIndex

from berth.api.app import PlacementApp
from berth.store import schema
from berth.store.database import Database
from berth.store.migrate import alembic_config, upgrade


@pytest.fixture(params=BACKENDS)
def empty_db(request, tmp_path_factory):
    db = Database(make_database(request.param, tmp_path_factory, request))
    yield db
    db.dispose()


def _migrate(db, target, direction=command.upgrade):
    with db.engine.begin() as conn:
        direction(alembic_config(conn), target)


def test_migrated_schema_matches_the_code(empty_db):
    upgrade(empty_db)
    with empty_db.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), schema.metadata) == []


def test_providers_of_an_older_schema_get_a_revision_and_are_found(empty_db):
    _migrate(empty_db, "0002")
    with empty_db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO resource_providers (id, uuid, name, generation, root_provider_id, created_at, updated_at) "
                "VALUES (1, 'a0b1c2d3-0000-4000-8000-000000000001', 'old-host', 0, 1, :now, :now)"
            ),
            {"now": "2026-01-01 00:00:00"},
        )
    upgrade(empty_db)
    with empty_db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT revision FROM resource_providers")).scalar_one() == 0
    api = Api(PlacementApp(empty_db))
    provider = "a0b1c2d3-0000-4000-8000-000000000001"
    generation = api.get(f"/resource_providers/{provider}").json_body["generation"]
    assert (
        api.put(
            f"/resource_providers/{provider}/inventories",
            {"resource_provider_generation": generation, "inventories": {"VCPU": {"total": 4}}},
        ).status_code
        == 200
    )
    answer = api.get("/allocation_candidates?resources=VCPU:1").json_body
    assert list(answer["provider_summaries"]) == [provider]


def test_the_newest_migration_can_be_undone_and_done_again(empty_db):
    upgrade(empty_db)
    _migrate(empty_db, "0002", command.downgrade)
    with empty_db.engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("resource_providers")}
    assert "revision" not in columns
    _migrate(empty_db, "head")
    with empty_db.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), schema.metadata) == []


HEADROOM_INDEX = "ix_inventories_headroom"


def _index_definition(conn: sa.Connection, name: str) -> str:
    """The database's own text of index ``name`` (SQLite keeps the statement, PostgreSQL rebuilds one
    from the index), with the name taken out and spaces and quotes evened."""
    if conn.dialect.name == "sqlite":
        query = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :name"
    else:
        query = "SELECT indexdef FROM pg_indexes WHERE indexname = :name"
    text = conn.execute(sa.text(query), {"name": name}).scalar_one()
    return " ".join(text.replace(name, "<index>").replace('"', "").split())


def test_the_headroom_index_is_the_expression_the_schema_declares(empty_db):
    # alembic's comparison skips expression indexes (on SQLite always), so this one is compared by the
    # database's text of it: the migrated index against the schema's, built beside it and undone.
    upgrade(empty_db)
    declared = next(index for index in schema.inventories.indexes if index.name == HEADROOM_INDEX)
    with empty_db.engine.connect() as conn, conn.begin() as transaction:
        ddl = str(CreateIndex(declared).compile(dialect=conn.dialect)).replace(HEADROOM_INDEX, "ix_declared_headroom")
        conn.execute(sa.text(ddl))
        migrated = _index_definition(conn, HEADROOM_INDEX)
        assert migrated == _index_definition(conn, "ix_declared_headroom")
        transaction.rollback()


def _assert_a_pick_of_2_vcpus_passes_the_limit_of_6(api, project):
    """A project holding 5 VCPU under a limit of 6 is refused a pick of 2, by its counters."""
    r = api.post(
        "/berth/pick",
        {
            "query": {"resources": "VCPU:2"},
            "consumer": {"uuid": new_uuid(), "project_id": project, "user_id": "u1", "consumer_type": "INSTANCE"},
        },
    )
    assert r.status_code == 409 and "limit 6, usage 5, asked 2" in r.json_body["errors"][0]["detail"]


def test_a_project_with_limits_before_the_counters_is_counted_from_its_sums(empty_db):
    # Limits and allocations written under 0011, when usage was summed on every claim: the upgrade
    # starts the project's counters from what its consumers hold, and the claims then read them.
    upgrade(empty_db)  # the standard names, then back to 0011
    _migrate(empty_db, "0011", command.downgrade)
    api = Api(PlacementApp(empty_db))
    host = api.create_provider("host", inventory={"VCPU": 16})
    api.allocate(new_uuid(), {host: {"VCPU": 3}}, project="p1", user="u1")
    api.allocate(new_uuid(), {host: {"VCPU": 2}}, project="p1", user="u2")
    api.allocate(new_uuid(), {host: {"VCPU": 1}}, project="p2", user="u1")
    with empty_db.engine.begin() as conn:
        for table in ("quota_projects", "quota_limits"):
            assert sa.inspect(conn).has_table(table)
        conn.execute(
            sa.text("INSERT INTO quota_projects (project_id, created_at, updated_at) VALUES ('p1', :now, :now)"),
            {"now": "2026-01-01 00:00:00"},
        )
        conn.execute(
            sa.text(
                "INSERT INTO quota_limits (project_id, user_id, resource, hard_limit, created_at, updated_at) "
                "VALUES ('p1', '', 'VCPU', 6, :now, :now)"
            ),
            {"now": "2026-01-01 00:00:00"},
        )
    _migrate(empty_db, "head")
    with empty_db.engine.connect() as conn:
        counted = conn.execute(
            sa.text(
                "SELECT u.user_pk, u.resource_class_id, u.used FROM quota_usage u "
                "JOIN projects p ON p.id = u.project_pk WHERE p.external_id = 'p1' AND u.user_pk = 0"
            )
        ).all()
    vcpu = next(used for _, class_id, used in counted if class_id != 0)
    consumers = next(used for _, class_id, used in counted if class_id == 0)
    assert (vcpu, consumers) == (5, 2)
    assert api.get("/berth/quotas/p1").json_body["usage"] == {"VCPU": 5, "consumers": 2}
    _assert_a_pick_of_2_vcpus_passes_the_limit_of_6(api, "p1")


def test_a_project_limited_before_its_first_consumer_under_0011_is_counted_after_the_upgrade(empty_db):
    # Limits set under 0011 before the project had a consumer (so no projects row): 0012 left it
    # uncounted, and so did everything since; 0017 counts it, from the sums of what it holds by then.
    upgrade(empty_db)
    _migrate(empty_db, "0011", command.downgrade)
    with empty_db.engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO quota_projects (project_id, created_at, updated_at) VALUES ('early', :now, :now)"),
            {"now": "2026-01-01 00:00:00"},
        )
        conn.execute(
            sa.text(
                "INSERT INTO quota_limits (project_id, user_id, resource, hard_limit, created_at, updated_at) "
                "VALUES ('early', '', 'VCPU', 6, :now, :now)"
            ),
            {"now": "2026-01-01 00:00:00"},
        )
    _migrate(empty_db, "0016")
    api = Api(PlacementApp(empty_db))
    host = api.create_provider("host", inventory={"VCPU": 16})
    api.allocate(new_uuid(), {host: {"VCPU": 4}}, project="early", user="u1")
    counted_sql = (
        "SELECT COUNT(*) FROM quota_counted_projects c JOIN projects p ON p.id = c.project_pk "
        "WHERE p.external_id = 'early'"
    )
    with empty_db.engine.connect() as conn:
        assert conn.execute(sa.text(counted_sql)).scalar_one() == 0  # the defect 0017 mends
    _migrate(empty_db, "head")
    with empty_db.engine.connect() as conn:
        assert conn.execute(sa.text(counted_sql)).scalar_one() == 1
        counters = dict(
            conn.execute(
                sa.text(
                    "SELECT u.resource_class_id, u.used FROM quota_usage u JOIN projects p ON p.id = u.project_pk "
                    "WHERE p.external_id = 'early' AND u.user_pk = 0"
                )
            ).all()
        )
    assert sorted(counters.values()) == [1, 4]  # one consumer, 4 VCPU
    api.allocate(new_uuid(), {host: {"VCPU": 1}}, project="early", user="u2")
    assert api.get("/berth/quotas/early").json_body["usage"] == {"VCPU": 5, "consumers": 2}
    _assert_a_pick_of_2_vcpus_passes_the_limit_of_6(api, "early")

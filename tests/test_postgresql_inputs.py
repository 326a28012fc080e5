"""Input that PostgreSQL is stricter about than SQLite, and writers racing on it: each answered with a
4xx and a code, never a 500, and nothing half-written. The ``api`` and ``db`` fixtures run each test on
both databases; the races can interleave on PostgreSQL alone."""

from __future__ import annotations

import datetime

import pytest
from apihelpers import Api, error_code, error_detail, new_uuid
from dbhelpers import start_until_it_waits_on_a_lock
from test_web_app import make_app
from werkzeug.test import Client

from berth.api.app import PlacementApp
from berth.store import schema

# --- ids longer than the quota tables' columns ---------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/berth/quotas/" + "p" * 256,
        "/berth/quotas/" + "p" * 256 + "/users/u",
        "/berth/quotas/p/users/" + "u" * 256,
    ],
)
def test_a_quota_under_an_id_longer_than_its_column_is_refused_and_writes_nothing(api, path):
    r = api.put(path, {"limits": {"VCPU": 4}})
    assert r.status_code == 400, r.data
    assert error_code(r) == "berth.undefined_code"
    assert "at most 255" in error_detail(r)
    assert api.get("/berth/quotas").json_body["quotas"] == []
    # The longest id the columns hold is taken.
    assert api.put("/berth/quotas/" + "p" * 255 + "/users/" + "u" * 255, {"limits": {"VCPU": 4}}).status_code == 200


# --- a query string that is not UTF-8 --------------------------------------------------------------


@pytest.mark.parametrize("query", [b"name=\xff", b"project_id=\xed\xa0\x80", b"in_tree=\xc3"])
def test_a_query_string_that_is_not_utf8_is_refused(api, query):
    # Raw bytes in the request line, as a client that does not percent-encode sends them (WSGI gives
    # them as Latin-1).
    for path in ("/resource_providers", "/usages", "/allocation_candidates"):
        r = api.client.get(
            path,
            environ_overrides={"QUERY_STRING": query.decode("latin-1")},
            headers={"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest"},
        )
        assert r.status_code == 400, (path, r.data)
        [error] = r.json["errors"]
        assert error["code"] == "placement.undefined_code"
        assert "not UTF-8" in error["detail"]


def test_the_conductors_api_refuses_a_query_string_that_is_not_utf8_too():
    r = Client(make_app()).get(
        "/things/lamp", environ_overrides={"QUERY_STRING": "q=\xff"}, headers={"X-Auth-Token": "admin"}
    )
    assert r.status_code == 400, r.data
    assert r.json["errors"][0]["code"] == "berth.undefined_code"
    assert "not UTF-8" in r.json["errors"][0]["detail"]


# --- a delete racing a write that refers to what it deletes ------------------------------------------
#
# Each write checks what it refers to (or what refers to what it deletes) and then writes; on
# PostgreSQL another transaction may commit in between, and the foreign key refuses the write. The
# write is then run again and answers as if it had come after the other.


def _postgresql_only(db):
    if db.is_sqlite:
        pytest.skip("SQLite writers hold the database lock: no interleaving is possible")


def _while_held(db, hold_sql, params, request):
    """``hold_sql`` run in a transaction that commits once ``request`` (run on a thread of its own)
    waits on a lock it holds; ``request``'s answer."""
    outcome = {}

    def run():
        outcome["response"] = request()

    with db.engine.connect() as holder, holder.begin():
        holder.exec_driver_sql(hold_sql, params)
        racer = start_until_it_waits_on_a_lock(db, run)
        assert racer.is_alive(), outcome
    racer.join(30)
    return outcome["response"]


def _ids(db, rp, rc):
    with db.engine.connect() as conn:
        provider = conn.exec_driver_sql("SELECT id FROM resource_providers WHERE uuid = %s", (rp,)).scalar_one()
        resource_class = conn.exec_driver_sql("SELECT id FROM resource_classes WHERE name = %s", (rc,)).scalar_one()
    return provider, resource_class


_INSERT_INVENTORY = (
    "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, "
    "step_size, allocation_ratio, used, created_at, updated_at) VALUES (%s, %s, 4, 0, 1, 4, 1, 1.0, 0, %s, %s)"
)


def test_a_class_deleted_while_an_inventory_of_it_is_written_is_in_use(db):
    _postgresql_only(db)
    api = Api(PlacementApp(db))
    rp = api.create_provider("host")
    assert api.put("/resource_classes/CUSTOM_GPU").status_code == 201
    now = datetime.datetime(2024, 1, 1)
    r = _while_held(
        db,
        _INSERT_INVENTORY,
        (*_ids(db, rp, "CUSTOM_GPU"), now, now),
        lambda: api.delete("/resource_classes/CUSTOM_GPU"),
    )
    assert r.status_code == 409, r.data
    assert error_code(r) == "placement.undefined_code"
    assert "Class is in use in inventory" in error_detail(r)
    assert api.get("/resource_classes/CUSTOM_GPU").status_code == 200


def test_an_inventory_written_while_its_class_is_deleted_is_refused_and_writes_nothing(db):
    _postgresql_only(db)
    api = Api(PlacementApp(db))
    rp = api.create_provider("host")
    assert api.put("/resource_classes/CUSTOM_GPU").status_code == 201
    body = {"resource_provider_generation": 0, "inventories": {"CUSTOM_GPU": {"total": 4}}}
    r = _while_held(
        db,
        "DELETE FROM resource_classes WHERE name = %s",
        ("CUSTOM_GPU",),
        lambda: api.put(f"/resource_providers/{rp}/inventories", body),
    )
    assert r.status_code == 400, r.data
    assert error_code(r) == "placement.undefined_code"
    assert "CUSTOM_GPU" in error_detail(r)
    assert api.get(f"/resource_providers/{rp}/inventories").json_body == {
        "resource_provider_generation": 0,
        "inventories": {},
    }


def test_a_trait_deleted_while_a_provider_is_given_it_is_in_use(db):
    _postgresql_only(db)
    api = Api(PlacementApp(db))
    rp = api.create_provider("host")
    assert api.put("/traits/CUSTOM_FAST").status_code == 201
    with db.engine.connect() as conn:
        trait = conn.exec_driver_sql("SELECT id FROM traits WHERE name = 'CUSTOM_FAST'").scalar_one()
        provider = conn.exec_driver_sql("SELECT id FROM resource_providers WHERE uuid = %s", (rp,)).scalar_one()
    now = datetime.datetime(2024, 1, 1)
    r = _while_held(
        db,
        "INSERT INTO resource_provider_traits (resource_provider_id, trait_id, created_at, updated_at) "
        "VALUES (%s, %s, %s, %s)",
        (provider, trait, now, now),
        lambda: api.delete("/traits/CUSTOM_FAST"),
    )
    assert r.status_code == 409, r.data
    assert error_code(r) == "placement.undefined_code"
    assert "in use" in error_detail(r)
    assert api.get("/traits/CUSTOM_FAST").status_code == 204


def test_a_provider_deleted_while_a_child_of_it_is_created_is_a_parent(db):
    _postgresql_only(db)
    api = Api(PlacementApp(db))
    parent = api.create_provider("parent")
    child = new_uuid()
    with db.engine.connect() as conn:
        parent_id = conn.exec_driver_sql("SELECT id FROM resource_providers WHERE uuid = %s", (parent,)).scalar_one()
    now = datetime.datetime(2024, 1, 1)
    r = _while_held(
        db,
        "INSERT INTO resource_providers (uuid, name, generation, revision, parent_provider_id, root_provider_id, "
        "created_at, updated_at) VALUES (%s, 'child', 0, 0, %s, %s, %s, %s)",
        (child, parent_id, parent_id, now, now),
        lambda: api.delete(f"/resource_providers/{parent}"),
    )
    assert r.status_code == 409, r.data
    assert error_code(r) == "placement.resource_provider.cannot_delete_parent"
    assert api.get(f"/resource_providers/{parent}").status_code == 200


def test_a_child_created_while_its_parent_is_deleted_is_refused_and_writes_nothing(db):
    _postgresql_only(db)
    api = Api(PlacementApp(db))
    parent = api.create_provider("parent")
    r = _while_held(
        db,
        "DELETE FROM resource_providers WHERE uuid = %s",
        (parent,),
        lambda: api.post("/resource_providers", {"name": "child", "parent_provider_uuid": parent}),
    )
    assert r.status_code == 400, r.data
    assert error_code(r) == "placement.undefined_code"
    assert "parent provider UUID does not exist" in error_detail(r)
    with db.engine.connect() as conn:
        assert conn.execute(schema.resource_providers.select()).all() == []

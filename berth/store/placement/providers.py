"""Resource providers: creation, trees, generations, and the filters that select them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import ColumnElement, Connection, RowMapping, Select

from berth.domain import error_codes
from berth.domain.errors import BadRequest, ConcurrentUpdate, Conflict, DuplicateName, NotFound
from berth.store import capacity_sql
from berth.store.rawsql import db_time, execute, fetch, fetch_records, fetch_value
from berth.store.schema import (
    allocations,
    inventories,
    new_revision,
    placement_aggregates,
    resource_provider_aggregates,
    resource_provider_traits,
)
from berth.store.schema import (
    resource_providers as rp,
)
from berth.store.util import utcnow

_parent = rp.alias("parent")
_root = rp.alias("root")

PROVIDER_COLUMNS = (
    rp.c.id,
    rp.c.uuid,
    rp.c.name,
    rp.c.generation,
    rp.c.created_at,
    rp.c.updated_at,
    rp.c.parent_provider_id,
    rp.c.root_provider_id,
    _parent.c.uuid.label("parent_provider_uuid"),
    _root.c.uuid.label("root_provider_uuid"),
)


def _provider_select() -> Select[Any]:
    return sa.select(*PROVIDER_COLUMNS).select_from(
        rp.outerjoin(_parent, rp.c.parent_provider_id == _parent.c.id).outerjoin(
            _root, rp.c.root_provider_id == _root.c.id
        )
    )


_BY_UUID = """
SELECT rp.id, rp.uuid, rp.name, rp.generation, rp.created_at, rp.updated_at,
       rp.parent_provider_id, rp.root_provider_id,
       parent.uuid AS parent_provider_uuid, root.uuid AS root_provider_uuid
FROM resource_providers rp
LEFT JOIN resource_providers parent ON parent.id = rp.parent_provider_id
LEFT JOIN resource_providers root ON root.id = rp.root_provider_id
WHERE rp.uuid = ?"""
_BUMP = (
    "UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ? "
    "WHERE id = ? AND generation = ?"
)


def get_provider(conn: Connection, uuid: str) -> dict[str, Any] | None:
    rows = fetch_records(conn, _BY_UUID, (uuid,))
    return rows[0] if rows else None


def require_provider(conn: Connection, uuid: str, detail: str | None = None) -> dict[str, Any]:
    row = get_provider(conn, uuid)
    if row is None:
        raise NotFound(detail or f"No resource provider with uuid {uuid} found")
    return row


GENERATION_CONFLICT = (
    "resource provider generation conflict: Another thread concurrently updated the data. Please retry your update"
)
GENERATION_CHANGED = "Resource provider's generation already changed. Please update the generation and try again."


_REVISE = "UPDATE resource_providers SET revision = revision + 1 WHERE id IN {ids}"


def revise(conn: Connection, provider_ids: Iterable[int]) -> None:
    """Mark these providers' candidate data as changed where their generations stay as they are."""
    ids = sorted(provider_ids)
    if ids:
        execute(conn, _REVISE, ids=ids)


def bump_generation(
    conn: Connection,
    provider: dict[str, Any],
    expected_generation: int | None = None,
    conflict_detail: str | None = None,
) -> int:
    """Compare-and-swap the provider's generation; the row stays locked until commit.

    Every change to a provider (inventory, traits, aggregates, allocations) passes through here, so
    two writers that saw the same generation cannot both succeed.
    """
    expected: int = provider["generation"] if expected_generation is None else expected_generation
    if execute(conn, _BUMP, (db_time(conn, utcnow()), provider["id"], expected)) != 1:
        raise ConcurrentUpdate(conflict_detail or GENERATION_CONFLICT)
    return expected + 1


_BUMP_BY_UUID = (
    "UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ? "
    "WHERE uuid = ? AND generation = ? RETURNING id"
)


def bump_generation_by_uuid(conn: Connection, uuid: str, expected_generation: int) -> tuple[dict[str, Any], bool]:
    """The provider and whether its generation was ``expected_generation`` and is now one more.

    A write that names the provider's generation usually has it right: then one statement finds the
    provider, checks the generation and takes the row lock.  Otherwise the provider is read (a 404
    when it does not exist) and False tells the caller to refuse with a 409 at the point where it
    would have compared the generations, after its other checks.  The provider holds only ``id``,
    ``uuid`` and ``generation`` (as it was before the bump) when the bump succeeded.
    """
    provider_id = fetch_value(conn, _BUMP_BY_UUID, (db_time(conn, utcnow()), uuid, expected_generation))
    if provider_id is None:
        return require_provider(conn, uuid), False
    return {"id": provider_id, "uuid": uuid, "generation": expected_generation}, True


_CLASHES = "SELECT uuid, name FROM resource_providers WHERE (uuid = ? OR name = ?) AND id <> ?"
_INSERT = """
INSERT INTO resource_providers
    (uuid, name, generation, revision, created_at, updated_at, parent_provider_id, root_provider_id)
VALUES (?, ?, 0, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id"""
_SET_OWN_ROOT = "UPDATE resource_providers SET root_provider_id = id WHERE id = ?"
# PostgreSQL draws the new id first, so that a root provider is its own root in the same statement
# (one round trip fewer per created provider than the INSERT and UPDATE above).
_INSERT_ROOT_PG = """
INSERT INTO resource_providers
    (id, uuid, name, generation, revision, created_at, updated_at, parent_provider_id, root_provider_id)
SELECT new.id, ?, ?, 0, ?, ?, ?, NULL, new.id
FROM (SELECT nextval(pg_get_serial_sequence('resource_providers', 'id')) AS id) new
ON CONFLICT DO NOTHING RETURNING id"""

# A child on PostgreSQL: its parent is found and it is inserted in one statement.  No row at all: no
# such parent; a row without the new id: the uuid or name is taken.
_INSERT_CHILD_PG = """
WITH parent AS (SELECT id, root_provider_id FROM resource_providers WHERE uuid = ?),
new AS (
    INSERT INTO resource_providers
        (uuid, name, generation, revision, created_at, updated_at, parent_provider_id, root_provider_id)
    SELECT ?, ?, 0, ?, ?, ?, parent.id, parent.root_provider_id FROM parent
    ON CONFLICT DO NOTHING RETURNING id
)
SELECT parent.id, parent.root_provider_id, root.uuid, (SELECT id FROM new)
FROM parent JOIN resource_providers root ON root.id = parent.root_provider_id"""


def _name_or_uuid_taken(conn: Connection, uuid: str | None, name: str, exclude_id: int | None = None) -> None:
    clashes = []
    for row_uuid, row_name in fetch(conn, _CLASHES, (uuid, name, -1 if exclude_id is None else exclude_id)):
        if uuid is not None and row_uuid == uuid:
            clashes.append(f"uuid: {uuid}")
        if row_name == name:
            clashes.append(f"name: {name}")
    if clashes:
        raise DuplicateName(
            f"Conflicting resource provider {', '.join(sorted(set(clashes), reverse=True))} already exists."
        )


def create_provider(conn: Connection, *, uuid: str, name: str, parent_uuid: str | None = None) -> dict[str, Any]:
    parent: dict[str, Any] | None = None
    if parent_uuid is not None and parent_uuid == uuid:
        raise BadRequest(
            f'Unable to create resource provider "{name}", {uuid}: Object action create failed because: '
            "parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if "
            "there is no parent."
        )
    now = utcnow()
    stored_now = db_time(conn, now)
    postgres = conn.dialect.name == "postgresql"
    new_id = None
    if parent_uuid is not None:
        if postgres:
            rows = fetch(conn, _INSERT_CHILD_PG, (parent_uuid, uuid, name, new_revision(), stored_now, stored_now))
            if rows:
                parent_id, root_id, root_uuid, new_id = rows[0]
                parent = {"id": parent_id, "root_provider_id": root_id, "root_provider_uuid": root_uuid}
        else:
            parent = get_provider(conn, parent_uuid)
        if parent is None:
            raise BadRequest(
                f'Unable to create resource provider "{name}", {uuid}: parent provider UUID does not exist.'
            )
        parent["uuid"] = parent_uuid
    # A taken uuid or name inserts nothing (no error, so the transaction stays usable on PostgreSQL,
    # also when a concurrent creation of the same name committed first) and is only then looked up,
    # to say which of the two clashed.
    own_root_in_insert = parent is None and postgres
    if own_root_in_insert:
        new_id = fetch_value(conn, _INSERT_ROOT_PG, (uuid, name, new_revision(), stored_now, stored_now))
    elif not postgres:  # on PostgreSQL a child was inserted along with its parent's lookup above
        new_id = fetch_value(
            conn,
            _INSERT,
            (
                uuid,
                name,
                new_revision(),
                stored_now,
                stored_now,
                parent["id"] if parent else None,
                parent["root_provider_id"] if parent else None,
            ),
        )
    if new_id is None:
        _name_or_uuid_taken(conn, uuid, name)
        raise DuplicateName(f"Conflicting resource provider name: {name} already exists.")
    if parent is None and not own_root_in_insert:
        execute(conn, _SET_OWN_ROOT, (new_id,))
    # Everything the row holds is known: no need to read it back.
    return {
        "id": new_id,
        "uuid": uuid,
        "name": name,
        "generation": 0,
        "created_at": now,
        "updated_at": now,
        "parent_provider_id": parent["id"] if parent else None,
        "root_provider_id": parent["root_provider_id"] if parent else new_id,
        "parent_provider_uuid": parent["uuid"] if parent else None,
        "root_provider_uuid": parent["root_provider_uuid"] if parent else uuid,
    }


def descendant_ids(conn: Connection, provider_id: int) -> set[int]:
    found: set[int] = set()
    frontier = [provider_id]
    while frontier:
        children = conn.execute(sa.select(rp.c.id).where(rp.c.parent_provider_id.in_(frontier))).scalars().all()
        frontier = [c for c in children if c not in found]
        found.update(frontier)
    return found


def update_provider(
    conn: Connection,
    provider: dict[str, Any],
    *,
    name: str,
    parent_uuid: str | None,
    parent_given: bool,
    allow_reparent: bool,
) -> dict[str, Any] | None:
    _name_or_uuid_taken(conn, None, name, exclude_id=provider["id"])
    values = {"name": name, "updated_at": utcnow(), "revision": rp.c.revision + 1}
    if parent_given and parent_uuid != provider["parent_provider_uuid"]:
        _reparent(conn, provider, parent_uuid, allow_reparent)
    conn.execute(rp.update().where(rp.c.id == provider["id"]).values(**values))
    return get_provider(conn, provider["uuid"])


def _reparent(conn: Connection, provider: dict[str, Any], parent_uuid: str | None, allow_reparent: bool) -> None:
    if provider["parent_provider_uuid"] is not None and not allow_reparent:
        if parent_uuid is None:
            raise BadRequest(
                f"Unable to save resource provider {provider['uuid']}: Object action update "
                "failed because: un-parenting a provider is not currently allowed."
            )
        raise BadRequest(
            "Unable to save resource provider "
            f"{provider['uuid']}: Object action update failed because: "
            "re-parenting a provider is not currently allowed."
        )
    subtree = descendant_ids(conn, provider["id"])
    if parent_uuid is None:
        new_root, new_parent = provider["id"], None
    else:
        parent = get_provider(conn, parent_uuid)
        if parent is None:
            raise BadRequest(
                f"Unable to save resource provider {provider['uuid']}: parent provider UUID does not exist."
            )
        if parent["id"] == provider["id"] or parent["id"] in subtree:
            raise BadRequest(
                f"Unable to save resource provider {provider['uuid']}: "
                "creating loop in the provider tree is not allowed."
            )
        new_root, new_parent = parent["root_provider_id"], parent["id"]
    conn.execute(rp.update().where(rp.c.id == provider["id"]).values(parent_provider_id=new_parent))
    conn.execute(
        rp.update()
        .where(rp.c.id.in_(subtree | {provider["id"]}))
        .values(root_provider_id=new_root, revision=rp.c.revision + 1)
    )


def delete_provider(conn: Connection, provider: dict[str, Any]) -> None:
    has_children = conn.execute(sa.select(rp.c.id).where(rp.c.parent_provider_id == provider["id"]).limit(1)).first()
    if has_children:
        raise Conflict(
            f"Unable to delete parent resource provider {provider['uuid']}: It has child resource providers.",
            code=error_codes.PROVIDER_CANNOT_DELETE_PARENT,
        )
    has_allocations = conn.execute(
        sa.select(allocations.c.id).where(allocations.c.resource_provider_id == provider["id"]).limit(1)
    ).first()
    if has_allocations:
        raise Conflict(
            f"Unable to delete resource provider {provider['uuid']}: Resource provider has allocations.",
            code=error_codes.PROVIDER_IN_USE,
        )
    conn.execute(
        inventories.delete().where(inventories.c.resource_provider_id == provider["id"], inventories.c.used == 0)
    )
    for table in (resource_provider_traits, resource_provider_aggregates):
        conn.execute(table.delete().where(table.c.resource_provider_id == provider["id"]))
    result = conn.execute(rp.delete().where(rp.c.id == provider["id"], rp.c.generation == provider["generation"]))
    if result.rowcount != 1:
        raise ConcurrentUpdate(f"resource provider generation conflict: {provider['uuid']} changed while deleting it")


# --- filtering --------------------------------------------------------------------------------


@dataclass
class ProviderFilter:
    """Conditions one provider must meet by itself (not through its tree or sharing providers)."""

    uuid: str | None = None
    name: str | None = None
    in_tree: str | None = None
    # Each inner list is one member_of group: the provider must be in at least one of them.
    member_of: list[list[str]] = field(default_factory=list)
    forbidden_aggregates: list[str] = field(default_factory=list)
    # Each inner list of trait ids is an any-of group; all groups must hold.
    required_traits: list[list[int]] = field(default_factory=list)
    forbidden_traits: list[int] = field(default_factory=list)
    resources: dict[int, int] = field(default_factory=dict)


def capacity_condition(rc_id: int, amount: int) -> ColumnElement[bool]:
    """The inventory row can take ``amount`` more units of its class, within its unit constraints."""
    inv = inventories
    return sa.and_(
        inv.c.resource_class_id == rc_id,
        capacity_sql.has_room(amount),
        capacity_sql.fits_units(amount),
    )


def aggregate_member_condition(provider_id_col: ColumnElement[int], aggregate_uuids: Sequence[str]) -> sa.Exists:
    return sa.exists().where(
        resource_provider_aggregates.c.resource_provider_id == provider_id_col,
        resource_provider_aggregates.c.aggregate_id == placement_aggregates.c.id,
        placement_aggregates.c.uuid.in_(aggregate_uuids),
    )


def filter_conditions(
    conn: Connection, flt: ProviderFilter, id_col: ColumnElement[int] = rp.c.id
) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if flt.uuid is not None:
        conditions.append(rp.c.uuid == flt.uuid)
    if flt.name is not None:
        conditions.append(rp.c.name == flt.name)
    if flt.in_tree is not None:
        tree = sa.select(rp.c.root_provider_id).where(rp.c.uuid == flt.in_tree).scalar_subquery()
        conditions.append(rp.c.root_provider_id == tree)
    for aggregate_uuids in flt.member_of:
        conditions.append(aggregate_member_condition(id_col, aggregate_uuids))
    if flt.forbidden_aggregates:
        conditions.append(~aggregate_member_condition(id_col, flt.forbidden_aggregates))
    for trait_ids in flt.required_traits:
        conditions.append(
            sa.exists().where(
                resource_provider_traits.c.resource_provider_id == id_col,
                resource_provider_traits.c.trait_id.in_(trait_ids),
            )
        )
    if flt.forbidden_traits:
        conditions.append(
            ~sa.exists().where(
                resource_provider_traits.c.resource_provider_id == id_col,
                resource_provider_traits.c.trait_id.in_(flt.forbidden_traits),
            )
        )
    for rc_id, amount in flt.resources.items():
        conditions.append(
            sa.exists().where(inventories.c.resource_provider_id == id_col, capacity_condition(rc_id, amount))
        )
    return conditions


def list_providers(conn: Connection, flt: ProviderFilter) -> Sequence[RowMapping]:
    query = _provider_select().where(*filter_conditions(conn, flt)).order_by(rp.c.id)
    return conn.execute(query).mappings().all()

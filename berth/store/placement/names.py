"""Resource classes and traits: the names providers and requests speak in."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

import os_resource_classes
import os_traits
import sqlalchemy as sa
from sqlalchemy import Connection, Engine, RowMapping
from sqlalchemy.dialects import postgresql, sqlite

from berth.domain.errors import BadRequest, Conflict, DuplicateName, NotFound
from berth.store.rawsql import fetch
from berth.store.schema import (
    allocations,
    inventories,
    resource_classes,
    resource_provider_traits,
    traits,
)
from berth.store.util import utcnow

STANDARD_CLASSES = frozenset(os_resource_classes.STANDARDS)
STANDARD_TRAITS = frozenset(os_traits.get_traits())

# Standard classes and traits can be neither deleted nor renamed (both are refused), so the id read
# once for a standard name, and the name for that id, hold for as long as the database does: most
# requests name only standard classes and traits and need not look them up again.  Custom names
# are always read, as another worker may have deleted and re-created one under a new id.  Keyed by
# engine (one per database), then by the statement that reads them.
_standard_memo: weakref.WeakKeyDictionary[Engine, dict[str, dict[Any, Any]]] = weakref.WeakKeyDictionary()


def _lookup(
    conn: Connection, sql: str, keys: Iterable[Any], standard: frozenset[str], name_is_key: bool
) -> dict[Any, Any]:
    """Names by id or ids by name (``name_is_key``) through ``sql``, standard ones remembered."""
    wanted = set(keys)
    if not wanted:
        return {}
    known = _standard_memo.setdefault(conn.engine, {}).setdefault(sql, {})
    found = {key: known[key] for key in wanted if key in known}
    if len(found) < len(wanted):
        for key, value in fetch(conn, sql, ids=sorted(wanted - found.keys())):
            found[key] = value
            if (key if name_is_key else value) in standard:
                known[key] = value
    return found


# --- resource classes -------------------------------------------------------------------------


def list_resource_classes(conn: Connection) -> Sequence[RowMapping]:
    return (
        conn.execute(
            sa.select(resource_classes.c.name, resource_classes.c.created_at, resource_classes.c.updated_at).order_by(
                resource_classes.c.id
            )
        )
        .mappings()
        .all()
    )


def get_resource_class(conn: Connection, name: str) -> RowMapping | None:
    return conn.execute(sa.select(resource_classes).where(resource_classes.c.name == name)).mappings().first()


def resource_class_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Ids of the named classes; unknown names are absent from the answer."""
    return _lookup(
        conn, "SELECT name, id FROM resource_classes WHERE name IN {ids}", names, STANDARD_CLASSES, name_is_key=True
    )


def resource_class_names_of(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    """Names of the classes with these ids; unknown ids are absent from the answer."""
    return _lookup(
        conn, "SELECT id, name FROM resource_classes WHERE id IN {ids}", ids, STANDARD_CLASSES, name_is_key=False
    )


def _insert_name(conn: Connection, table: sa.Table, name: str) -> bool:
    """Insert the name unless it is there; True when this transaction inserted it. One statement,
    so that concurrent writers of one new name get one creation and no unique-key error (a 500)."""
    now = utcnow()
    values = {"name": name, "created_at": now, "updated_at": now}
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = insert(table).values(**values).on_conflict_do_nothing(index_elements=["name"])
    return conn.execute(statement.returning(table.c.id)).first() is not None


def create_resource_class(conn: Connection, name: str) -> bool:
    """Create the class; True when it was created, False when it existed already."""
    return _insert_name(conn, resource_classes, name)


def update_resource_class(conn: Connection, old_name: str, new_name: str) -> None:
    row = get_resource_class(conn, old_name)
    if row is None:
        raise NotFound(f"No such resource class {old_name}.")
    if old_name in STANDARD_CLASSES:
        raise BadRequest(f"Cannot update standard resource class {old_name}")
    # Renaming a class to its own name changes nothing, and Placement answers it as any rename.
    if new_name != old_name and get_resource_class(conn, new_name) is not None:
        raise DuplicateName(f"Resource class already exists: {new_name}")
    conn.execute(
        resource_classes.update().where(resource_classes.c.id == row["id"]).values(name=new_name, updated_at=utcnow())
    )


def delete_resource_class(conn: Connection, name: str) -> None:
    row = get_resource_class(conn, name)
    if row is None:
        raise NotFound(f"No such resource class {name}.")
    if name in STANDARD_CLASSES:
        raise BadRequest(f"Error in delete resource class: Cannot delete standard resource class {name}.")
    in_use = conn.execute(
        sa.select(sa.literal(1)).where(
            sa.or_(
                sa.exists().where(inventories.c.resource_class_id == row["id"]),
                sa.exists().where(allocations.c.resource_class_id == row["id"]),
            )
        )
    ).first()
    if in_use:
        raise Conflict(
            f"Error in delete resource class: Cannot delete resource class {name}. Class is in use in inventory."
        )
    conn.execute(resource_classes.delete().where(resource_classes.c.id == row["id"]))


# --- traits -----------------------------------------------------------------------------------


class TraitFilters(TypedDict, total=False):
    """The conditions of ``list_traits``: any of these names, names with this prefix, traits that
    some provider has (or none has)."""

    names: list[str]
    prefix: str
    associated: bool


def list_traits(
    conn: Connection, *, names: list[str] | None = None, prefix: str | None = None, associated: bool | None = None
) -> Sequence[RowMapping]:
    query = sa.select(traits.c.name, traits.c.created_at, traits.c.updated_at)
    if names is not None:
        query = query.where(traits.c.name.in_(names))
    if prefix is not None:
        query = query.where(traits.c.name.startswith(prefix, autoescape=True))
    linked = sa.exists().where(resource_provider_traits.c.trait_id == traits.c.id)
    if associated is True:
        query = query.where(linked)
    elif associated is False:
        query = query.where(~linked)
    return conn.execute(query.order_by(traits.c.name)).mappings().all()


def get_trait(conn: Connection, name: str) -> RowMapping | None:
    return conn.execute(sa.select(traits).where(traits.c.name == name)).mappings().first()


def trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Ids of the named traits; unknown names are absent from the answer."""
    return _lookup(conn, "SELECT name, id FROM traits WHERE name IN {ids}", names, STANDARD_TRAITS, name_is_key=True)


def trait_names_of(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    """Names of the traits with these ids; unknown ids are absent from the answer."""
    return _lookup(conn, "SELECT id, name FROM traits WHERE id IN {ids}", ids, STANDARD_TRAITS, name_is_key=False)


class UnknownTraits(BadRequest):
    """Traits named that do not exist: a 400, which each route words as the reference does."""

    def __init__(self, missing: Sequence[str]):
        super().__init__(f"No such trait(s): {', '.join(missing)}.")
        self.missing = tuple(missing)


def require_trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Ids of the named traits, or ``UnknownTraits`` naming those that do not exist."""
    wanted = set(names)
    found = trait_ids(conn, wanted)
    missing = sorted(wanted - set(found))
    if missing:
        raise UnknownTraits(missing)
    return found


def ensure_trait(conn: Connection, name: str) -> bool:
    """Create the trait if missing; True when it was created."""
    return _insert_name(conn, traits, name)


def delete_trait(conn: Connection, name: str) -> None:
    row = get_trait(conn, name)
    if row is None:
        raise NotFound(f"No such trait(s): {name}.")
    if name in STANDARD_TRAITS:
        raise BadRequest(f"Cannot delete standard trait {name}.")
    in_use = conn.execute(
        sa.select(sa.literal(1)).where(resource_provider_traits.c.trait_id == row["id"]).limit(1)
    ).first()
    if in_use:
        raise Conflict(f"The trait {name} is in use by a resource provider.")
    conn.execute(traits.delete().where(traits.c.id == row["id"]))

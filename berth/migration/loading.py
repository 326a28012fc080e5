"""Writing books read from Placement into an empty Berth database, in one transaction.

Rows are written directly rather than through the API, because the API moves every generation it
touches: this way providers and consumers keep their uuids, names and generations, and every
allocation is kept as it was. Each inventory's ``used`` (Berth's running sum of the allocations
against it, berth.store.schema) is set from the allocations written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from berth.migration.books import Books, Progress, no_progress
from berth.migration.errors import NotEmpty
from berth.store import migrate, schema
from berth.store.database import Database
from berth.store.placement.names import STANDARD_CLASSES, STANDARD_TRAITS
from berth.store.util import utcnow


@dataclass(frozen=True)
class LoadCounts:
    """What was written: names created (beyond Berth's standard ones) and rows of each kind."""

    resource_classes: int
    traits: int
    providers: int
    inventories: int
    aggregates: int
    consumers: int
    allocations: int


def load_into_berth(books: Books, database_url: str, *, progress: Progress | None = None) -> LoadCounts:
    """Write ``books`` into the Berth database at ``database_url`` (its schema created or upgraded
    first, as ``berth serve`` does); ``NotEmpty`` if it holds any provider, consumer or custom name."""
    report = progress or no_progress
    db = Database(database_url)
    try:
        migrate.upgrade(db)
        return db.write(lambda conn: _write(conn, books, report))
    finally:
        db.dispose()


# The tables a move writes. On PostgreSQL they are locked against other writers from before the
# target is found empty until the move commits: a second move into the same database (or a server
# writing there) waits, and then finds books. On SQLite the write transaction's lock does it.
_WRITTEN_TABLES = (
    "resource_classes",
    "traits",
    "resource_providers",
    "inventories",
    "placement_aggregates",
    "resource_provider_aggregates",
    "resource_provider_traits",
    "projects",
    "users",
    "consumer_types",
    "consumers",
    "allocations",
)


def _write(conn: sa.Connection, books: Books, report: Progress) -> LoadCounts:
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"LOCK TABLE {', '.join(_WRITTEN_TABLES)} IN SHARE ROW EXCLUSIVE MODE")
    _refuse_non_empty(conn)
    now = utcnow()
    stamps = {"created_at": now, "updated_at": now}
    class_ids, new_classes = _names(conn, schema.resource_classes, books.resource_classes, stamps)
    trait_ids, new_traits = _names(conn, schema.traits, books.traits, stamps)
    report("names", 1, 1)
    provider_ids = _providers(conn, books, stamps)
    report("providers", len(provider_ids), len(books.providers))
    inventories = _inventories(conn, books, provider_ids, class_ids, stamps)
    aggregates = _aggregates_and_traits(conn, books, provider_ids, trait_ids, stamps)
    allocations = _consumers_and_allocations(conn, books, provider_ids, class_ids, stamps)
    report("consumers", len(books.consumers), len(books.consumers))
    return LoadCounts(
        resource_classes=new_classes,
        traits=new_traits,
        providers=len(provider_ids),
        inventories=inventories,
        aggregates=aggregates,
        consumers=len(books.consumers),
        allocations=allocations,
    )


def _refuse_non_empty(conn: sa.Connection) -> None:
    held = {
        "providers": conn.execute(sa.select(sa.func.count()).select_from(schema.resource_providers)).scalar_one(),
        "consumers": conn.execute(sa.select(sa.func.count()).select_from(schema.consumers)).scalar_one(),
        "allocations": conn.execute(sa.select(sa.func.count()).select_from(schema.allocations)).scalar_one(),
    }
    custom_classes = set(conn.execute(sa.select(schema.resource_classes.c.name)).scalars()) - STANDARD_CLASSES
    custom_traits = set(conn.execute(sa.select(schema.traits.c.name)).scalars()) - STANDARD_TRAITS
    held["custom resource classes"] = len(custom_classes)
    held["custom traits"] = len(custom_traits)
    found = {what: count for what, count in held.items() if count}
    if found:
        listed = ", ".join(f"{count} {what}" for what, count in found.items())
        raise NotEmpty(f"the target database is not empty ({listed}); give an empty one")


def _names(
    conn: sa.Connection, table: sa.Table, names: Iterable[str], stamps: dict[str, Any]
) -> tuple[dict[str, int], int]:
    """Ids of every name wanted, and how many of them had to be created."""
    existing = set(conn.execute(sa.select(table.c.name)).scalars())
    missing = sorted(set(names) - existing)
    if missing:
        conn.execute(table.insert(), [{"name": name, **stamps} for name in missing])
    ids = {name: id_ for id_, name in conn.execute(sa.select(table.c.id, table.c.name))}
    return ids, len(missing)


def _providers(conn: sa.Connection, books: Books, stamps: dict[str, Any]) -> dict[str, int]:
    """Every provider, parents first, with its generation; uuid -> new id."""
    table = schema.resource_providers
    ids: dict[str, int] = {}
    for provider in books.tree_order():
        key = conn.execute(
            table.insert().values(uuid=provider.uuid, name=provider.name, generation=provider.generation, **stamps)
        ).inserted_primary_key
        assert key is not None  # an INSERT of one row
        ids[provider.uuid] = int(key[0])
    links = [
        {
            "row_id": ids[p.uuid],
            "parent": ids[p.parent_uuid] if p.parent_uuid else None,
            "root": ids[p.root_uuid],
        }
        for p in books.providers.values()
    ]
    if links:
        conn.execute(
            table.update()
            .where(table.c.id == sa.bindparam("row_id"))
            .values(parent_provider_id=sa.bindparam("parent"), root_provider_id=sa.bindparam("root")),
            links,
        )
    return ids


def _inventories(
    conn: sa.Connection, books: Books, provider_ids: dict[str, int], class_ids: dict[str, int], stamps: dict[str, Any]
) -> int:
    used = books.used()
    rows = [
        {
            "resource_provider_id": provider_ids[provider.uuid],
            "resource_class_id": class_ids[resource_class],
            "total": inventory.total,
            "reserved": inventory.reserved,
            "min_unit": inventory.min_unit,
            "max_unit": inventory.max_unit,
            "step_size": inventory.step_size,
            "allocation_ratio": inventory.allocation_ratio,
            "used": used.get((provider.uuid, resource_class), 0),
            **stamps,
        }
        for provider in books.providers.values()
        for resource_class, inventory in provider.inventories.items()
    ]
    if rows:
        conn.execute(schema.inventories.insert(), rows)
    return len(rows)


def _aggregates_and_traits(
    conn: sa.Connection, books: Books, provider_ids: dict[str, int], trait_ids: dict[str, int], stamps: dict[str, Any]
) -> int:
    """The providers' aggregates and traits; how many aggregates there are."""
    aggregate_ids: dict[str, int] = {}
    for aggregate in sorted(books.aggregates()):
        key = conn.execute(schema.placement_aggregates.insert().values(uuid=aggregate, **stamps)).inserted_primary_key
        assert key is not None  # an INSERT of one row
        aggregate_ids[aggregate] = int(key[0])
    members = [
        {"resource_provider_id": provider_ids[p.uuid], "aggregate_id": aggregate_ids[a], **stamps}
        for p in books.providers.values()
        for a in sorted(p.aggregates)
    ]
    if members:
        conn.execute(schema.resource_provider_aggregates.insert(), members)
    tagged = [
        {"resource_provider_id": provider_ids[p.uuid], "trait_id": trait_ids[t], **stamps}
        for p in books.providers.values()
        for t in sorted(p.traits)
    ]
    if tagged:
        conn.execute(schema.resource_provider_traits.insert(), tagged)
    return len(aggregate_ids)


def _external_ids(
    conn: sa.Connection, table: sa.Table, column: str, values: set[str], stamps: dict[str, Any]
) -> dict[str, int]:
    existing = set(conn.execute(sa.select(table.c[column])).scalars())
    missing = sorted(values - existing)
    if missing:
        conn.execute(table.insert(), [{column: value, **stamps} for value in missing])
    return {value: id_ for id_, value in conn.execute(sa.select(table.c.id, table.c[column]))}


def _consumers_and_allocations(
    conn: sa.Connection, books: Books, provider_ids: dict[str, int], class_ids: dict[str, int], stamps: dict[str, Any]
) -> int:
    """Every consumer with its owner, type and generation, and its allocations; how many allocations."""
    consumers = books.consumers.values()
    projects = _external_ids(conn, schema.projects, "external_id", {c.project_id for c in consumers}, stamps)
    users = _external_ids(conn, schema.users, "external_id", {c.user_id for c in consumers}, stamps)
    types = _external_ids(
        conn, schema.consumer_types, "name", {c.consumer_type for c in consumers if c.consumer_type}, stamps
    )
    rows = [
        {
            "uuid": c.uuid,
            "project_id": projects[c.project_id],
            "user_id": users[c.user_id],
            "generation": c.generation,
            "consumer_type_id": types[c.consumer_type] if c.consumer_type else None,
            **stamps,
        }
        for c in consumers
    ]
    if rows:
        conn.execute(schema.consumers.insert(), rows)
    allocations = [
        {
            "resource_provider_id": provider_ids[provider_uuid],
            "consumer_id": c.uuid,
            "resource_class_id": class_ids[resource_class],
            "used": amount,
            **stamps,
        }
        for c in consumers
        for provider_uuid, classes in c.allocations.items()
        for resource_class, amount in classes.items()
    ]
    if allocations:
        conn.execute(schema.allocations.insert(), allocations)
    return len(allocations)

"""Writing books read from Placement into an empty Berth database, in one transaction.

Rows are written directly rather than through the API, because the API moves every generation it
touches: this way providers and consumers keep their uuids, names and generations, and every
allocation is kept as it was. Each inventory's ``used`` (Berth's running sum of the allocations
against it, berth.store.schema) is set from the allocations written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from berth.migration.books import Books, Progress, no_progress
from berth.migration.errors import NotEmpty
from berth.store import migrate, schema
from berth.store.database import Database, DatabaseUnusable, check_url, normalise_url
from berth.store.held_books import holdings, lock_for_import
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
    first, as ``berth serve`` does); ``NotEmpty`` if it holds any books (those a file import
    refuses: berth.store.held_books.holdings)."""
    report = progress or no_progress
    db = Database(database_url)
    try:
        migrate.upgrade(db)
        return db.write(lambda conn: _write(conn, books, report))
    finally:
        db.dispose()


def check_target(database_url: str) -> None:
    """Refuse, before Placement is read (minutes, for a big cloud), a target ``load_into_berth``
    would refuse after: one that cannot be reached or opened or whose schema is newer than this
    release's (``DatabaseUnusable``), or one that holds books (``NotEmpty``).

    Only reads: a SQLite file that does not exist yet is left for the move to create (its folder
    missing is said), and a database is upgraded by the move, not here. The move checks again, in
    its transaction, as another writer may come first.
    """
    check_url(database_url)
    parsed = sa.engine.make_url(normalise_url(database_url))
    file = parsed.database
    if (
        parsed.get_backend_name() == "sqlite"
        and file
        and not file.startswith("file:")
        and not os.path.exists(file)
        and os.path.isdir(os.path.dirname(os.path.abspath(file)))
    ):
        # A file the move will make: nothing in it yet. (In a folder that does not exist, opening
        # it below fails without making anything, and says that the folder is missing.)
        return
    db = Database(database_url)
    try:
        with db.connect() as conn:
            where = db.engine.url.render_as_string(hide_password=True)
            too_new = migrate.newer_schema(migrate.recorded_revisions(conn), f"the database at {where}")
            if too_new is not None:
                raise DatabaseUnusable(too_new)
            _refuse_non_empty(conn)
    finally:
        db.dispose()


def _write(conn: sa.Connection, books: Books, report: Progress) -> LoadCounts:
    # The tables the move writes and those the emptiness check reads are locked against other
    # writers (on PostgreSQL; SQLite's write transaction does it) from before the target is found
    # empty until the move commits: a second move into the same database (or a server writing
    # there) waits, and then finds books.
    lock_for_import(conn)
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
    """The rule a file import has (without ``--merge``), so that either refuses the same databases."""
    held = holdings(conn)
    if held:
        raise NotEmpty(f"the target database is not empty ({', '.join(held)}); give an empty one")


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

"""Foreign keys and plain indexes set aside while an import fills empty tables on PostgreSQL.

Row by row, PostgreSQL checks each foreign key of a copied row with a lookup of its own and inserts
the row into every index: for the allocations of a large cloud that was most of the server's work.
Put back once the rows are in, a foreign key is checked by one join over the whole table and an
index is built by one sort, a fraction of the cost.  Everything happens inside the import's
transaction (PostgreSQL's DDL is transactional), so a failed import leaves the schema as it was.

Primary keys and unique constraints stay: they are what other tables' foreign keys point at, and
the loader's own checks (every reference to an earlier record, no duplicates) mean the foreign keys
put back find nothing wrong; they stay the database's guarantee all the same.  Setting aside needs
the tables' owner (who runs ``berth db upgrade``); any other role loads with the checks row by row.
While they are set aside the tables are locked against readers too, until the import commits.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection


@dataclass(frozen=True)
class SetAside:
    """What was taken off, as the statements that put it back."""

    indexes: tuple[str, ...]  # CREATE INDEX ...
    foreign_keys: tuple[tuple[str, str, str], ...]  # (table, constraint name, definition)
    tables: tuple[str, ...]


def _regclasses(tables: tuple[str, ...]) -> str:
    # The names are the import's own constants (berth.portability.target), never the file's.
    return "ARRAY[" + ", ".join(f"'{table}'" for table in tables) + "]::regclass[]"


def set_aside(conn: Connection, tables: tuple[str, ...]) -> SetAside | None:
    """Drop the foreign keys and plain indexes of ``tables``; None where nothing is set aside (SQLite,
    or a role that does not own every one of the tables)."""
    if conn.dialect.name != "postgresql":
        return None
    classes = _regclasses(tables)
    owned = conn.exec_driver_sql(
        f"SELECT bool_and(pg_has_role(relowner, 'USAGE')) FROM pg_class WHERE oid = ANY({classes})"
    ).scalar_one()
    if not owned:
        return None
    foreign_keys = tuple(
        (str(table), str(name), str(definition))
        for table, name, definition in conn.exec_driver_sql(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
            f"WHERE contype = 'f' AND conrelid = ANY({classes}) ORDER BY conrelid::regclass::text, conname"
        )
    )
    indexes = conn.exec_driver_sql(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        f"WHERE i.indrelid = ANY({classes}) AND NOT i.indisunique AND NOT i.indisprimary "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) "
        "ORDER BY 1"
    ).all()
    for table, name, _definition in foreign_keys:
        conn.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _definition in indexes:
        conn.exec_driver_sql(f"DROP INDEX {name}")
    return SetAside(tuple(str(definition) for _name, definition in indexes), foreign_keys, tables)


def put_back(conn: Connection, aside: SetAside | None) -> None:
    """Build the indexes again and add the foreign keys again, each checked over the loaded rows."""
    if aside is None:
        return
    for definition in aside.indexes:
        conn.exec_driver_sql(definition)
    # Statistics of the loaded rows, for the checks' joins and for the first queries of a server:
    # before autovacuum's first ANALYZE the planner takes a freshly loaded table for a small one.
    conn.exec_driver_sql(f"ANALYZE {', '.join(aside.tables)}")
    for table, name, definition in aside.foreign_keys:
        conn.exec_driver_sql(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')

"""What the database an import writes into holds already: whether it is empty (``berth.store.held_books``,
the rule a move from Placement keeps too), the ids of the names it knows, and (for a merge) its books
as records to compare the file's with."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import Connection

from berth.portability.export import present_kinds, records
from berth.portability.format import KEYS, KINDS, TargetNotEmpty
from berth.store.held_books import ASSIGNED_IDS, holdings

# A record kind whose records belong to a record of another kind: when that one exists in the
# target, a merge takes its set of these from the target and the file must agree with it.
OWNERS: Final[dict[str, tuple[str, str]]] = {
    "inventory": ("provider", "provider"),
    "provider_traits": ("provider", "provider"),
    "provider_aggregates": ("provider", "provider"),
    "allocation": ("consumer", "consumer"),
    "server_group_member": ("server_group", "group"),
}

RecordKey = tuple[str, tuple[Any, ...]]


def refuse_unless_empty(conn: Connection) -> None:
    held = holdings(conn)
    if held:
        raise TargetNotEmpty(f"The database already holds books ({', '.join(held)}).")


def next_ids(conn: Connection) -> dict[str, int]:
    return {
        table: int(conn.exec_driver_sql(f"SELECT COALESCE(MAX(id), 0) FROM {table}").scalar_one()) + 1
        for table in ASSIGNED_IDS
    }


def id_map(conn: Connection, sql: str) -> dict[Any, int]:
    return {key: int(row_id) for key, row_id in conn.exec_driver_sql(sql)}


def record_key(kind: str, record: dict[str, Any]) -> RecordKey:
    return kind, tuple(record[name] for name in KEYS[kind])


def existing_records(conn: Connection) -> dict[RecordKey, dict[str, Any]]:
    """The target's books as the records an export of it would write, by kind and key."""
    present = present_kinds(conn)
    return {record_key(kind, record): record for kind in KINDS if kind in present for record in records(conn, kind)}


def advance_sequences(conn: Connection) -> None:
    """PostgreSQL's id sequences past the ids the import chose (SQLite takes the highest id + 1)."""
    if conn.dialect.name != "postgresql":
        return
    for table in ASSIGNED_IDS:
        conn.exec_driver_sql(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), MAX(id)) FROM {table} HAVING MAX(id) IS NOT NULL"
        )

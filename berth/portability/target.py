"""What the database an import writes into holds already: whether it is empty, the ids of the names
it knows, and (for a merge) its books as records to compare the file's with."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import Connection

from berth.portability.export import present_kinds, records
from berth.portability.format import KEYS, KINDS, TargetNotEmpty

# What makes a database hold books, with the words for it: standard names do not count, as every
# database has them once upgraded.
_HOLDINGS: Final = (
    ("providers", "SELECT COUNT(*) FROM resource_providers"),
    ("consumers", "SELECT COUNT(*) FROM consumers"),
    ("allocations", "SELECT COUNT(*) FROM allocations"),
    ("aggregates", "SELECT COUNT(*) FROM placement_aggregates"),
    ("custom resource classes", "SELECT COUNT(*) FROM resource_classes WHERE SUBSTR(name, 1, 7) = 'CUSTOM_'"),
    ("custom traits", "SELECT COUNT(*) FROM traits WHERE SUBSTR(name, 1, 7) = 'CUSTOM_'"),
    ("projects", "SELECT COUNT(*) FROM projects"),
    ("users", "SELECT COUNT(*) FROM users"),
    ("consumer types", "SELECT COUNT(*) FROM consumer_types"),
    ("leases", "SELECT COUNT(*) FROM allocation_leases"),
    ("server groups", "SELECT COUNT(*) FROM server_groups"),
    ("quota limits", "SELECT COUNT(*) FROM quota_limits"),
    ("preemptions", "SELECT COUNT(*) FROM preemptions"),
)

# Tables whose ids the import chooses itself (later records refer to them), from past the highest.
ASSIGNED_IDS: Final = (
    "resource_classes",
    "traits",
    "placement_aggregates",
    "resource_providers",
    "projects",
    "users",
    "consumer_types",
)

# The tables an import writes, locked against other writers for its duration on PostgreSQL.
WRITTEN_TABLES: Final = (
    *ASSIGNED_IDS,
    "inventories",
    "resource_provider_traits",
    "resource_provider_aggregates",
    "consumers",
    "allocations",
    "allocation_leases",
    "server_groups",
    "server_group_members",
    "consumer_priorities",
    "preemptions",
    "quota_projects",
    "quota_limits",
    "quota_counted_projects",
    "quota_usage",
)

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


def holdings(conn: Connection) -> list[str]:
    """What the database holds besides the standard names, as ``"3 providers"`` and the like."""
    found = []
    for words, sql in _HOLDINGS:
        count = int(conn.exec_driver_sql(sql).scalar_one())
        if count:
            found.append(f"{count} {words}")
    return found


def refuse_unless_empty(conn: Connection) -> None:
    held = holdings(conn)
    if held:
        raise TargetNotEmpty(f"The database already holds books ({', '.join(held)}).")


def lock_for_import(conn: Connection) -> None:
    """Keep other writers out until the import commits (PostgreSQL; SQLite's write lock does it)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"LOCK TABLE {', '.join(WRITTEN_TABLES)} IN SHARE ROW EXCLUSIVE MODE")


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

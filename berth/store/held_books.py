"""Whether a database holds books, and keeping other writers out while one is loaded into it: the
one rule of every bulk load (a file's import, ``berth.portability``; a move from Placement,
``berth.migration``), so that either refuses the same databases."""

from __future__ import annotations

from typing import Final

from sqlalchemy import Connection, inspect

# What makes a database hold books, with the words for it: standard names do not count, as every
# database has them once upgraded. The one rule for every import, of a file or from Placement.
_HOLDINGS: Final = (
    ("providers", "resource_providers", ""),
    ("consumers", "consumers", ""),
    ("allocations", "allocations", ""),
    ("aggregates", "placement_aggregates", ""),
    ("custom resource classes", "resource_classes", "WHERE SUBSTR(name, 1, 7) = 'CUSTOM_'"),
    ("custom traits", "traits", "WHERE SUBSTR(name, 1, 7) = 'CUSTOM_'"),
    ("projects", "projects", ""),
    ("users", "users", ""),
    ("consumer types", "consumer_types", ""),
    ("leases", "allocation_leases", ""),
    ("server groups", "server_groups", ""),
    ("quota limits", "quota_limits", ""),
    ("preemptions", "preemptions", ""),
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


def holdings(conn: Connection) -> list[str]:
    """What the database holds besides the standard names, as ``"3 providers"`` and the like.

    A database of an older schema, looked at before it is upgraded (a move from Placement checks its
    target before the long read), lacks the later tables: they hold nothing there."""
    tables = set(inspect(conn).get_table_names())
    found = []
    for words, table, condition in _HOLDINGS:
        if table not in tables:
            continue
        count = int(conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table} {condition}").scalar_one())
        if count:
            found.append(f"{count} {words}")
    return found


def lock_for_import(conn: Connection) -> None:
    """Keep other writers out until the import commits (PostgreSQL; SQLite's write lock does it)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"LOCK TABLE {', '.join(WRITTEN_TABLES)} IN SHARE ROW EXCLUSIVE MODE")

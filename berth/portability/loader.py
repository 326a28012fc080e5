"""Turning the records of a snapshot into rows: each record checked against what came before it
(and, in a merge, against what the target holds), then handed to the bulk sink."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

from sqlalchemy import Connection

from berth.portability.format import BooksConflict, BooksFileError, parse_timestamp
from berth.portability.sink import BulkSink
from berth.portability.target import OWNERS, RecordKey, id_map, next_ids, record_key
from berth.store.quotas.limits import CONSUMERS, PROJECT_WIDE
from berth.store.quotas.usage import start_counting
from berth.store.rawsql import db_time, execute_many
from berth.store.schema import new_revision
from berth.store.server_groups.membership import GROUP_POLICIES
from berth.store.util import utcnow

_PROVIDER_COLUMNS: Final = (
    "id", "uuid", "name", "generation", "revision", "created_at", "updated_at", "root_provider_id",
    "parent_provider_id",
)  # fmt: skip
_INVENTORY_COLUMNS: Final = (
    "resource_provider_id", "resource_class_id", "total", "reserved", "min_unit", "max_unit", "step_size",
    "allocation_ratio", "used", "created_at", "updated_at",
)  # fmt: skip
_CONSUMER_COLUMNS: Final = (
    "uuid", "project_id", "user_id", "generation", "consumer_type_id", "created_at", "updated_at",
)  # fmt: skip
_ALLOCATION_COLUMNS: Final = (
    "resource_provider_id", "consumer_id", "resource_class_id", "used", "created_at", "updated_at",
)  # fmt: skip
_NAMED_COLUMNS: Final = ("id", "name", "created_at", "updated_at")
_EXTERNAL_COLUMNS: Final = ("id", "external_id", "created_at", "updated_at")
_LINK_COLUMNS: Final = {
    "resource_provider_traits": ("resource_provider_id", "trait_id", "created_at", "updated_at"),
    "resource_provider_aggregates": ("resource_provider_id", "aggregate_id", "created_at", "updated_at"),
}
# A member whose recorded host is no longer a provider: no provider has id 0.
_NO_PROVIDER: Final = 0


class Loader:
    """Checks each record and queues its rows; ``merge`` holds the target's records when merging."""

    def __init__(self, conn: Connection, merge: dict[RecordKey, dict[str, Any]] | None):
        self._conn = conn
        self._sink = BulkSink(conn)
        # As text on both databases: PostgreSQL's COPY parses it once per row at no cost to this
        # process, where dumping a datetime was a third of the work of writing a row.
        self._now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
        self._existing = merge
        # The records written, by kind (a merge's: those the target did not hold).
        self.added: Counter[str] = Counter()
        self._matched: set[RecordKey] = set()
        self._next = next_ids(conn)
        self.first_new_provider = self._next["resource_providers"]
        self._rc = id_map(conn, "SELECT name, id FROM resource_classes")
        self._traits = id_map(conn, "SELECT name, id FROM traits")
        self._aggregates = id_map(conn, "SELECT uuid, id FROM placement_aggregates")
        self._projects = id_map(conn, "SELECT external_id, id FROM projects")
        self._users = id_map(conn, "SELECT external_id, id FROM users")
        self._types = id_map(conn, "SELECT name, id FROM consumer_types")
        # uuid -> (id, root id); name -> uuid
        self._providers: dict[str, tuple[int, int]] = {
            uuid: (int(pid), int(root or pid))
            for uuid, pid, root in conn.exec_driver_sql("SELECT uuid, id, root_provider_id FROM resource_providers")
        }
        self._provider_names: dict[str, str] = dict(
            conn.exec_driver_sql("SELECT name, uuid FROM resource_providers").all()  # type: ignore[arg-type] # rows of two
        )
        self._inventories: set[tuple[int, int]] = set(
            conn.exec_driver_sql("SELECT resource_provider_id, resource_class_id FROM inventories").all()  # type: ignore[arg-type] # rows of two
        )
        self._consumers: set[str] = set(conn.exec_driver_sql("SELECT uuid FROM consumers").scalars())
        self._finished_consumers: set[str] = set()
        self._current_consumer: str | None = None
        self._current_allocations: set[tuple[int, int]] = set()
        self._leases: set[str] = set()
        self._groups: set[str] = set(conn.exec_driver_sql("SELECT uuid FROM server_groups").scalars())
        self._seen_links: set[tuple[str, int]] = set()
        # (project, user or PROJECT_WIDE, resource) -> limit, written at the end (``write_quotas``).
        self._limits: dict[tuple[str, str, str], int] = {}
        self._priorities: set[str] = set()
        # Existing providers that receive allocations from the file: their generation and revision move.
        self.touched_providers: set[int] = set()
        # What the file's allocations add to each inventory's ``used``, by (provider id, class id).
        self.added_usage: dict[tuple[int, int], int] = {}
        self._handlers: dict[str, Callable[[int, dict[str, Any]], None]] = {
            "resource_class": self._resource_class,
            "trait": self._trait,
            "aggregate": self._aggregate,
            "provider": self._provider,
            "inventory": self._inventory,
            "provider_traits": self._provider_traits,
            "provider_aggregates": self._provider_aggregates,
            "project": self._project,
            "user": self._user,
            "consumer_type": self._consumer_type,
            "consumer": self._consumer,
            "allocation": self._allocation,
            "lease": self._lease,
            "server_group": self._server_group,
            "server_group_member": self._member,
            "quota": self._quota,
            "priority": self._priority,
            "preemption": self._preemption,
        }

    def add(self, line: int, kind: str, record: dict[str, Any]) -> None:
        if self._existing is not None and not self._is_new(line, kind, record):
            return
        self._handlers[kind](line, record)
        self.added[kind] += 1

    def flush(self) -> None:
        self._sink.flush()

    def abort(self, error: BaseException) -> None:
        self._sink.abort(error)

    def finish(self) -> None:
        """Every inventory's ``used`` raised by what the file's allocations hold of it."""
        self._sink.finish(self.added_usage, self.first_new_provider)

    # --- merging -------------------------------------------------------------------------------

    def _is_new(self, line: int, kind: str, record: dict[str, Any]) -> bool:
        """False for a record the target holds as it is; a conflict when it holds it otherwise."""
        assert self._existing is not None  # merging
        key = record_key(kind, record)
        old = self._existing.get(key)
        if old is not None:
            if key in self._matched:
                raise BooksFileError(line, f"{_name(key)} appears twice")
            if _comparable(old) != _comparable(record):
                raise BooksConflict(f"line {line}: the target holds {_name(key)} as {old}, the file as {record}")
            self._matched.add(key)
            return False
        owner = OWNERS.get(kind)
        if owner and (owner[0], (record[owner[1]],)) in self._existing:
            raise BooksConflict(
                f"line {line}: the target holds {owner[0]} {record[owner[1]]} without {_name(key)}, which the file has"
            )
        return True

    def unmatched_in_target(self) -> list[str]:
        """What the target holds of the records it shares with the file that the file does not have."""
        assert self._existing is not None  # merging
        missing = []
        for key, record in self._existing.items():
            owner = OWNERS.get(key[0])
            if owner and key not in self._matched and (owner[0], (record[owner[1]],)) in self._matched:
                missing.append(f"the target's {owner[0]} {record[owner[1]]} has {_name(key)}, the file does not")
        return missing

    # --- names ---------------------------------------------------------------------------------

    def _take_id(self, table: str) -> int:
        new_id = self._next[table]
        self._next[table] = new_id + 1
        return new_id

    def _named(
        self, line: int, what: str, known: dict[Any, int], table: str, columns: tuple[str, ...], name: str
    ) -> None:
        if name in known:
            raise BooksFileError(line, f"{what} {name} appears twice (or is in the database already)")
        known[name] = row_id = self._take_id(table)
        self._sink.add(line, table, columns, (row_id, name, self._now, self._now))

    def _resource_class(self, line: int, record: dict[str, Any]) -> None:
        _require_custom(line, "resource class", record["name"])
        self._named(line, "resource class", self._rc, "resource_classes", _NAMED_COLUMNS, record["name"])

    def _trait(self, line: int, record: dict[str, Any]) -> None:
        _require_custom(line, "trait", record["name"])
        self._named(line, "trait", self._traits, "traits", _NAMED_COLUMNS, record["name"])

    def _aggregate(self, line: int, record: dict[str, Any]) -> None:
        columns = ("id", "uuid", "created_at", "updated_at")
        self._named(line, "aggregate", self._aggregates, "placement_aggregates", columns, record["uuid"])

    def _project(self, line: int, record: dict[str, Any]) -> None:
        self._named(line, "project", self._projects, "projects", _EXTERNAL_COLUMNS, record["external_id"])

    def _user(self, line: int, record: dict[str, Any]) -> None:
        self._named(line, "user", self._users, "users", _EXTERNAL_COLUMNS, record["external_id"])

    def _consumer_type(self, line: int, record: dict[str, Any]) -> None:
        self._named(line, "consumer type", self._types, "consumer_types", _NAMED_COLUMNS, record["name"])

    # --- providers -----------------------------------------------------------------------------

    def _provider_id(self, line: int, uuid: str) -> int:
        found = self._providers.get(uuid)
        if found is None:
            raise BooksFileError(line, f"provider {uuid} is not a provider of an earlier line")
        return found[0]

    def _provider(self, line: int, record: dict[str, Any]) -> None:
        uuid, name, parent, root = record["uuid"], record["name"], record["parent"], record["root"]
        if uuid in self._providers:
            raise BooksFileError(line, f"provider {uuid} appears twice (or is in the database already)")
        holder = self._provider_names.get(name)
        if holder is not None:
            raise BooksFileError(line, f"provider {uuid} has the name {name!r} of provider {holder}")
        provider_id = self._take_id("resource_providers")
        if parent is None:
            if root != uuid:
                raise BooksFileError(line, f"provider {uuid} has no parent, so it is its own root, not {root}")
            parent_id, root_id = None, provider_id
        else:
            parent_id = self._provider_id(line, parent)
            root_id = self._providers[parent][1]
            if self._providers.get(root, (None, None))[0] != root_id:
                raise BooksFileError(line, f"provider {uuid}: the root of its parent {parent} is not {root}")
        self._providers[uuid] = (provider_id, root_id)
        self._provider_names[name] = uuid
        row = (provider_id, uuid, name, record["generation"], new_revision(), self._now, self._now, root_id, parent_id)
        self._sink.add(line, "resource_providers", _PROVIDER_COLUMNS, row)

    def _inventory(self, line: int, record: dict[str, Any]) -> None:
        provider_id = self._provider_id(line, record["provider"])
        rc_id = self._class_id(line, record["resource_class"])
        if (provider_id, rc_id) in self._inventories:
            raise BooksFileError(
                line, f"provider {record['provider']} has two inventories of {record['resource_class']}"
            )
        self._inventories.add((provider_id, rc_id))
        amounts = (record[name] for name in _INVENTORY_COLUMNS[2:8])
        self._sink.add(line, "inventories", _INVENTORY_COLUMNS, (provider_id, rc_id, *amounts, 0, self._now, self._now))

    def _class_id(self, line: int, name: str) -> int:
        rc_id = self._rc.get(name)
        if rc_id is None:
            raise BooksFileError(line, f"resource class {name} is neither standard nor in the file")
        return rc_id

    def _link(self, line: int, record: dict[str, Any], table: str, field: str, known: dict[str, int]) -> None:
        provider_id = self._provider_id(line, record["provider"])
        names = record[field]
        if (table, provider_id) in self._seen_links:
            raise BooksFileError(line, f"provider {record['provider']} has two records of {field}")
        self._seen_links.add((table, provider_id))
        if len(set(names)) != len(names):
            raise BooksFileError(line, f"provider {record['provider']} lists one of its {field} twice")
        for name in names:
            other_id = known.get(name)
            if other_id is None:
                raise BooksFileError(line, f"{name} is not among the {field} the file or the database knows")
            self._sink.add(line, table, _LINK_COLUMNS[table], (provider_id, other_id, self._now, self._now))

    def _provider_traits(self, line: int, record: dict[str, Any]) -> None:
        self._link(line, record, "resource_provider_traits", "traits", self._traits)

    def _provider_aggregates(self, line: int, record: dict[str, Any]) -> None:
        self._link(line, record, "resource_provider_aggregates", "aggregates", self._aggregates)

    # --- consumers -----------------------------------------------------------------------------

    def _consumer(self, line: int, record: dict[str, Any]) -> None:
        uuid, consumer_type = record["uuid"], record["consumer_type"]
        if uuid in self._consumers:
            raise BooksFileError(line, f"consumer {uuid} appears twice (or is in the database already)")
        project_id = _known(line, "project", self._projects, record["project"])
        user_id = _known(line, "user", self._users, record["user"])
        type_id = None if consumer_type is None else _known(line, "consumer type", self._types, consumer_type)
        self._consumers.add(uuid)
        row = (uuid, project_id, user_id, record["generation"], type_id, self._now, self._now)
        self._sink.add(line, "consumers", _CONSUMER_COLUMNS, row)

    def _allocation(self, line: int, record: dict[str, Any]) -> None:
        consumer = record["consumer"]
        if consumer != self._current_consumer:
            if consumer not in self._consumers:
                raise BooksFileError(line, f"consumer {consumer} is not a consumer of an earlier line")
            if consumer in self._finished_consumers:
                raise BooksFileError(line, f"the allocations of consumer {consumer} must be on consecutive lines")
            if self._current_consumer is not None:
                self._finished_consumers.add(self._current_consumer)
            self._current_consumer = consumer
            self._current_allocations.clear()
        provider_id = self._provider_id(line, record["provider"])
        rc_id = self._class_id(line, record["resource_class"])
        key = (provider_id, rc_id)
        if key not in self._inventories:
            raise BooksFileError(
                line, f"provider {record['provider']} has no inventory of {record['resource_class']} to allocate from"
            )
        if key in self._current_allocations:
            raise BooksFileError(line, f"consumer {consumer} has two allocations of one class on one provider")
        self._current_allocations.add(key)
        self.added_usage[key] = self.added_usage.get(key, 0) + record["used"]
        if provider_id < self.first_new_provider:
            self.touched_providers.add(provider_id)
        row = (provider_id, consumer, rc_id, record["used"], self._now, self._now)
        self._sink.add(line, "allocations", _ALLOCATION_COLUMNS, row)

    def _lease(self, line: int, record: dict[str, Any]) -> None:
        consumer = record["consumer"]
        if consumer in self._leases:
            raise BooksFileError(line, f"consumer {consumer} has two leases")
        self._leases.add(consumer)
        try:
            times = [db_time(self._conn, parse_timestamp(record[name])) for name in _LEASE_TIMES]
        except ValueError as error:
            raise BooksFileError(line, f"lease of {consumer}: {error}") from None
        columns = ("consumer_uuid", *_LEASE_TIMES)
        self._sink.add(line, "allocation_leases", columns, (consumer, *times))

    def _server_group(self, line: int, record: dict[str, Any]) -> None:
        uuid, policy = record["uuid"], record["policy"]
        if uuid in self._groups:
            raise BooksFileError(line, f"server group {uuid} appears twice (or is in the database already)")
        if policy not in GROUP_POLICIES:
            raise BooksFileError(
                line, f"server group {uuid}: policy {policy!r} is not one of {', '.join(GROUP_POLICIES)}"
            )
        self._groups.add(uuid)
        columns = ("uuid", "policy", "created_at", "updated_at")
        self._sink.add(line, "server_groups", columns, (uuid, policy, self._now, self._now))

    def _member(self, line: int, record: dict[str, Any]) -> None:
        group, placed_on = record["group"], record["placed_on"]
        if group not in self._groups:
            raise BooksFileError(line, f"server group {group} is not a group of an earlier line")
        root_id = _NO_PROVIDER if placed_on is None else self._provider_id(line, placed_on)
        columns = ("group_uuid", "consumer_uuid", "root_provider_id", "created_at")
        self._sink.add(line, "server_group_members", columns, (group, record["consumer"], root_id, self._now))

    # --- quotas, priorities and preemptions ----------------------------------------------------

    def _quota(self, line: int, record: dict[str, Any]) -> None:
        project, user, resource = record["project"], record["user"] or PROJECT_WIDE, record["resource"]
        if resource != CONSUMERS and resource not in self._rc:
            raise BooksFileError(line, f"quota of project {project}: {resource} is not a resource class")
        key = (project, user, resource)
        if key in self._limits:
            raise BooksFileError(line, f"the limit of {resource} of project {project} appears twice")
        self._limits[key] = record["limit"]

    def write_quotas(self) -> None:
        """The limits of the file, and each project with limits counted from its allocations, as
        setting its first limit through the API starts it (berth.store.quotas.usage)."""
        if not self._limits:
            return
        now = db_time(self._conn, utcnow())
        projects = sorted({project for project, _user, _resource in self._limits})
        execute_many(self._conn, _ADD_QUOTA_PROJECT, [(project, now, now) for project in projects])
        rows = [(*key, limit, now, now) for key, limit in sorted(self._limits.items())]
        execute_many(self._conn, _ADD_LIMIT, rows)
        for project in projects:
            start_counting(self._conn, project)

    def _priority(self, line: int, record: dict[str, Any]) -> None:
        consumer = record["consumer"]
        if consumer not in self._consumers:
            raise BooksFileError(line, f"consumer {consumer} is not a consumer of an earlier line")
        if consumer in self._priorities:
            raise BooksFileError(line, f"consumer {consumer} has two priorities")
        self._priorities.add(consumer)
        columns = ("consumer_uuid", "priority", "created_at")
        self._sink.add(line, "consumer_priorities", columns, (consumer, record["priority"], self._now))

    def _preemption(self, line: int, record: dict[str, Any]) -> None:
        try:
            preempted_at = db_time(self._conn, parse_timestamp(record["preempted_at"]))
        except ValueError as error:
            raise BooksFileError(line, f"preemption of {record['consumer']}: {error}") from None
        columns = ("consumer_uuid", "project_id", "priority", "root_provider_uuid", "preempted_by", "preempted_at")
        row = (
            record["consumer"],
            record["project"],
            record["priority"],
            record["root"],
            record["preempted_by"],
            preempted_at,
        )
        self._sink.add(line, "preemptions", columns, row)


_LEASE_TIMES: Final = ("expires_at", "created_at", "updated_at")
_ADD_QUOTA_PROJECT: Final = """
INSERT INTO quota_projects (project_id, created_at, updated_at) VALUES (?, ?, ?)
ON CONFLICT (project_id) DO NOTHING"""
_ADD_LIMIT: Final = """
INSERT INTO quota_limits (project_id, user_id, resource, hard_limit, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?)"""


def _known(line: int, what: str, known: dict[str, int], name: str) -> int:
    found = known.get(name)
    if found is None:
        raise BooksFileError(line, f"{what} {name} is not a {what} of an earlier line")
    return found


def _require_custom(line: int, what: str, name: str) -> None:
    if not name.startswith("CUSTOM_"):
        raise BooksFileError(line, f"{what} {name}: only custom names (CUSTOM_...) are exported")


def _name(key: RecordKey) -> str:
    kind, values = key
    return f"{kind.replace('_', ' ')} {' / '.join(str(v) for v in values)}"


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record as compared in a merge: a provider's traits and aggregates as sets."""
    return {name: frozenset(value) if isinstance(value, list) else value for name, value in record.items()}

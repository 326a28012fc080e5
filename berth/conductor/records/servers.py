"""``ServerRecords``: the servers as their users see them, one row each, written in the journal's
own transactions (it is the journal's companion): an operation's start takes its server's slot
(one operation at a time, whichever conductor runs it) and its end writes what it made of the
server and frees the slot. A build's start makes the server's row; its request names everything
the row holds, so that a conductor resuming the build needs nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from berth.conductor.errors import SERVER_GROUP_NOT_FOUND, SERVER_NOT_FOUND, InvalidState, ServerBusy
from berth.conductor.journal import Operation, database_clock, read_through_failover
from berth.conductor.operations import build
from berth.conductor.records import server_states
from berth.conductor.records.tables import Record, hosts, records, server_groups, servers
from berth.domain.errors import NotFound
from berth.sql.driver import DriverStatement

# The columns a build's start gives its server's new row (the others are fixed, or the moment).
_CREATED = ("id", "name", "project_id", "user_id", "request", "group_id", "status", "operation_id", "deleted_at")


@dataclass(frozen=True)
class ServerFilter:
    project_id: str | None = None
    host: str | None = None
    status: str | None = None
    name: str | None = None
    # The deleted servers only (else only those not deleted).
    deleted: bool = False


class ServerRecords:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._now = database_clock(engine.dialect.name)
        dialect = engine.dialect
        # The statements of every operation's start and end, written in the journal's transactions,
        # and of every read of one server (each action's, first) go straight to the driver as the
        # journal's own do (``berth.sql.driver``).
        self._held_by = DriverStatement(
            servers.select().where(
                servers.c.id == sa.bindparam("server_id"), servers.c.operation_id == sa.bindparam("holder")
            ),
            dialect,
        )
        by_id = servers.select().where(servers.c.id == sa.bindparam("server_id"))
        self._by_id = DriverStatement(by_id, dialect)
        self._live_by_id = DriverStatement(by_id.where(servers.c.deleted_at.is_(None)), dialect)
        # A start's taking of the slot, by the kind of its operation (the states it may start from).
        self._slot_by_kind: dict[str, DriverStatement] = {}
        created: dict[str, Any] = {
            **{name: sa.bindparam(name, type_=servers.c[name].type) for name in _CREATED},
            "created_at": self._now,
            "updated_at": self._now,
            **{name: sa.null() for name in ("old_request", "host", "move_id", "fault", "fault_at")},
        }
        self._create = DriverStatement(servers.insert().values(created), dialect)
        # A member's row written only while its group is there, the group's row held (FOR SHARE) until
        # the commit: a delete of the group (``ServerGroups.delete``, which locks the row, then counts
        # the members) either counts the new member or is counted by it, never neither.
        group_there = (
            sa.select(server_groups.c.id)
            .where(server_groups.c.id == sa.bindparam("group_id", type_=sa.String))
            .with_for_update(read=True)
        )
        self._create_member = DriverStatement(
            servers.insert()
            .from_select(list(created), sa.select(*created.values()).where(sa.exists(group_there)))
            .returning(servers.c.id),
            dialect,
        )
        # An end's update, by the columns its outcome changes (a handful of sets in all).
        self._end_by_columns: dict[frozenset[str], DriverStatement] = {}

    # -- the journal's companion --------------------------------------------------------------------

    def starting(self, conn: Connection, operation: Operation) -> None:
        if operation.kind in server_states.SLOTLESS:
            return
        if operation.kind == build.KIND:
            self._insert(conn, operation)
            return
        allowed = server_states.ALLOWED[operation.kind]
        if self._take_slot(operation.kind).rows(conn, {"server_id": operation.instance_uuid, "holder": operation.id}):
            return
        row = conn.execute(servers.select().where(servers.c.id == operation.instance_uuid)).mappings().first()
        if row is None or row["deleted_at"] is not None:
            raise NotFound(f"No server with id {operation.instance_uuid}.", code=SERVER_NOT_FOUND)
        if row["operation_id"] is not None:
            raise ServerBusy(
                f"Server {operation.instance_uuid} is busy with operation {row['operation_id']}; "
                "wait for it to end (GET /operations/{id}) and ask again."
            )
        raise InvalidState(
            f"Cannot '{operation.kind}' server {operation.instance_uuid} while it is {row['status']}; "
            f"it must be one of {', '.join(allowed)}."
        )

    def _insert(self, conn: Connection, operation: Operation) -> None:
        # The server as asked; a multi-create's build also names where the gang placed it, which is
        # the build's business and not the server's (the server's host is kept on its own).
        request = {key: value for key, value in operation.request.items() if key != "destination"}
        group = request.get("server_group") or {}
        create = self._create_member if group.get("uuid") else self._create
        written = create.rows(
            conn,
            {
                "id": operation.instance_uuid,
                "name": str(request.get("name") or ""),
                "project_id": str(request["project_id"]),
                "user_id": str(request["user_id"]),
                "request": request,
                "group_id": group.get("uuid"),
                "status": server_states.BUILDING,
                "operation_id": operation.id,
                "deleted_at": None,
            },
        )
        if create is self._create_member and not written:
            raise NotFound(f"No server group with id {group['uuid']}.", code=SERVER_GROUP_NOT_FOUND)

    def ending(self, conn: Connection, operation: Operation, now: float) -> None:
        held = self._held_by.records(conn, {"server_id": operation.instance_uuid, "holder": operation.id})
        if not held:  # a slotless operation, or this end written already
            return
        changes = server_states.outcome(held[0], operation, now)
        if "fault" in changes:
            changes["fault_at"] = now if changes["fault"] else None
        placed = {"placed_on": changes["host"]} if "host" in changes else {}
        self._end(frozenset(changes)).rows(
            conn,
            {**changes, **placed, "server_id": operation.instance_uuid, "holder": operation.id, "updated_at": now},
        )

    def _take_slot(self, kind: str) -> DriverStatement:
        """The start's update that takes the server's slot from one of the states ``kind`` may start
        from, built once (when a conductor first starts an operation of the kind)."""
        statement = self._slot_by_kind.get(kind)
        if statement is None:
            statement = self._slot_by_kind[kind] = DriverStatement(
                servers.update()
                .where(
                    servers.c.id == sa.bindparam("server_id"),
                    servers.c.operation_id.is_(None),
                    servers.c.deleted_at.is_(None),
                    sa.or_(*(servers.c.status == status for status in server_states.ALLOWED[kind])),
                )
                .values(operation_id=sa.bindparam("holder"), updated_at=self._now)
                .returning(servers.c.id),
                self.engine.dialect,
            )
        return statement

    def _end(self, columns: frozenset[str]) -> DriverStatement:
        """The end's update of these columns (besides the slot and the time), built once."""
        statement = self._end_by_columns.get(columns)
        if statement is None:
            values: dict[str, object] = {
                **{name: sa.bindparam(name) for name in columns | {"updated_at"}},
                "operation_id": None,
            }
            if "host" in columns:
                # A server placed on a host takes its zone; one taken off every host keeps the last.
                placed = sa.bindparam("placed_on", type_=sa.String)
                values["zone"] = sa.case(
                    (sa.cast(placed, sa.String).is_(None), servers.c.zone),
                    else_=sa.select(hosts.c.zone).where(hosts.c.name == placed).scalar_subquery(),
                )
            statement = self._end_by_columns[columns] = DriverStatement(
                servers.update()
                .where(servers.c.id == sa.bindparam("server_id"), servers.c.operation_id == sa.bindparam("holder"))
                .values(values),
                self.engine.dialect,
            )
        return statement

    # -- reads ----------------------------------------------------------------------------------------

    def get(self, server_id: str, *, deleted: bool = False) -> Record:
        query = self._by_id if deleted else self._live_by_id
        found = read_through_failover(self.engine, lambda conn: query.records(conn, {"server_id": server_id}))
        if not found:
            raise NotFound(f"No server with id {server_id}.", code=SERVER_NOT_FOUND)
        return found[0]

    def all(self, where: ServerFilter, limit: int | None = None, after: Record | None = None) -> list[Record]:
        """The servers ``where`` picks, newest first (Nova's order: created, then id, descending);
        ``after``: only those that come after this row in that order (the page after it)."""
        query = servers.select().order_by(servers.c.created_at.desc(), servers.c.id.desc())
        if after is not None:
            query = query.where(
                sa.or_(
                    servers.c.created_at < after["created_at"],
                    sa.and_(servers.c.created_at == after["created_at"], servers.c.id < after["id"]),
                )
            )
        # The deleted servers alone, or those not deleted (Nova's ``deleted`` filter).
        query = query.where(servers.c.deleted_at.is_not(None) if where.deleted else servers.c.deleted_at.is_(None))
        for column, value in (
            (servers.c.project_id, where.project_id),
            (servers.c.host, where.host),
            (servers.c.status, where.status),
        ):
            if value is not None:
                query = query.where(column == value)
        if where.name is not None:
            # A regular expression searched in the name, as Nova filters by name (``^web-\d+$``).
            query = query.where(servers.c.name.regexp_match(where.name))
        if limit is not None:
            query = query.limit(limit)
        return read_through_failover(self.engine, lambda conn: records(conn.execute(query).mappings()))

    def count_by_host(self) -> dict[str, int]:
        query = (
            sa.select(servers.c.host, sa.func.count())
            .where(servers.c.deleted_at.is_(None), servers.c.host.is_not(None))
            .group_by(servers.c.host)
        )
        return read_through_failover(self.engine, lambda conn: {str(host): int(n) for host, n in conn.execute(query)})

    def count_by_status(self) -> dict[str, int]:
        """The servers not deleted, by their status (ACTIVE, ERROR, ...)."""
        query = (
            sa.select(servers.c.status, sa.func.count())
            .where(servers.c.deleted_at.is_(None))
            .group_by(servers.c.status)
        )
        return read_through_failover(
            self.engine, lambda conn: {str(status): int(n) for status, n in conn.execute(query)}
        )

    def in_group(self, group_id: str) -> list[str]:
        query = (
            sa.select(servers.c.id)
            .where(servers.c.group_id == group_id, servers.c.deleted_at.is_(None))
            .order_by(servers.c.created_at)
        )
        return read_through_failover(self.engine, lambda conn: [str(r) for r in conn.execute(query).scalars()])

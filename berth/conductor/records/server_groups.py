"""``ServerGroups``: a policy (affinity, anti-affinity and their soft kinds) and its rules; the
members are the servers whose row names the group, so that membership is never out of step with
the servers themselves."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from berth.conductor.errors import SERVER_GROUP_IN_USE, SERVER_GROUP_NOT_FOUND
from berth.conductor.journal import database_clock, read_through_failover
from berth.conductor.records.servers import ServerRecords
from berth.conductor.records.tables import Record, record, records, server_groups, servers
from berth.domain.errors import BadRequest, Conflict, NotFound
from berth.scheduler.errors import SpecError
from berth.scheduler.request.server_group import ServerGroup


class ServerGroups:
    def __init__(self, engine: Engine, servers: ServerRecords):
        self.engine = engine
        self.servers = servers
        self._now = database_clock(engine.dialect.name)

    def create(self, name: str, policy: str, rules: Mapping[str, Any], project_id: str, user_id: str) -> str:
        group_id = str(uuid.uuid4())
        try:
            ServerGroup(group_id, policy, max_server_per_host=int(rules.get("max_server_per_host", 1)))  # type: ignore[arg-type]
        except SpecError as e:
            raise BadRequest(f"Invalid server group: {e.problem}") from None
        with self.engine.begin() as conn:
            conn.execute(
                server_groups.insert().values(
                    id=group_id,
                    name=name,
                    policy=policy,
                    rules=dict(rules),
                    project_id=project_id,
                    user_id=user_id,
                    created_at=self._now,
                )
            )
        return group_id

    def get(self, group_id: str) -> Record:
        query = server_groups.select().where(server_groups.c.id == group_id)
        row = read_through_failover(self.engine, lambda conn: conn.execute(query).mappings().first())
        if row is None:
            raise NotFound(f"No server group with id {group_id}.", code=SERVER_GROUP_NOT_FOUND)
        return record(row)

    def all(self, project_id: str | None = None) -> list[Record]:
        query = server_groups.select().order_by(server_groups.c.created_at)
        if project_id is not None:
            query = query.where(server_groups.c.project_id == project_id)
        return read_through_failover(self.engine, lambda conn: records(conn.execute(query).mappings()))

    def delete(self, group_id: str) -> None:
        """Gone, unless it has members (``Conflict``). A server joining it at the same time writes
        its row only while the group's is there, holding it until its commit
        (``ServerRecords._insert``): the group's row is locked first, then the members counted in
        the statement that deletes it, which on PostgreSQL sees a member that committed meanwhile;
        on SQLite that one statement runs under the write lock, as the member's insert does."""
        self.get(group_id)
        members = sa.select(servers.c.id).where(servers.c.group_id == group_id, servers.c.deleted_at.is_(None))
        with self.engine.begin() as conn:
            conn.execute(sa.select(server_groups.c.id).where(server_groups.c.id == group_id).with_for_update())
            deleted = conn.execute(
                server_groups.delete().where(server_groups.c.id == group_id, ~sa.exists(members))
            ).rowcount
        if not deleted:
            if self.servers.in_group(group_id):
                raise Conflict(
                    f"Server group {group_id} still has members; delete them first.", code=SERVER_GROUP_IN_USE
                )
            raise NotFound(f"No server group with id {group_id}.", code=SERVER_GROUP_NOT_FOUND)

    def scheduling(self, group_id: str) -> ServerGroup:
        """The group as the scheduler takes it, with its members as they are now."""
        row = self.get(group_id)
        return ServerGroup(
            group_id,
            row["policy"],
            frozenset(self.servers.in_group(group_id)),
            int(row["rules"].get("max_server_per_host", 1)),
        )

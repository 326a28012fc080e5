"""The conductors' tables beside the journal's, in the journal's database. A change to them is a
migration too (``berth/conductor/migrations``), which a conductor runs as it opens the database."""

from __future__ import annotations

from typing import Any, TypeAlias, cast

import sqlalchemy as sa
from sqlalchemy.engine import RowMapping

# One row, by column name.
Record: TypeAlias = dict[str, Any]


def record(row: RowMapping) -> Record:
    return cast(Record, dict(row))


def records(rows: Any) -> list[Record]:
    return [record(r) for r in rows]


metadata = sa.MetaData()

flavors = sa.Table(
    "conductor_flavors",
    metadata,
    sa.Column("id", sa.String(255), primary_key=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("ram", sa.Integer, nullable=False),
    sa.Column("disk", sa.Integer, nullable=False),
    sa.Column("ephemeral", sa.Integer, nullable=False),
    sa.Column("swap", sa.Integer, nullable=False),
    sa.Column("extra_specs", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

server_groups = sa.Table(
    "conductor_server_groups",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("policy", sa.String(32), nullable=False),
    sa.Column("rules", sa.JSON, nullable=False),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

hosts = sa.Table(
    "conductor_hosts",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    # Where the host's agent answers.
    sa.Column("url", sa.String(1024), nullable=False),
    # The token its agent's API asks of callers, if any (never shown).
    sa.Column("agent_token", sa.String(255), nullable=True),
    sa.Column("zone", sa.String(255), nullable=True),
    sa.Column("disabled", sa.Boolean, nullable=False, default=False),
    sa.Column("disabled_reason", sa.String(255), nullable=True),
    # The user whose credentials registered the host: only they (or an admin) may speak for it.
    sa.Column("registered_by", sa.String(255), nullable=False),
    sa.Column("registered_at", sa.Float, nullable=False),
    # The database's clock at the agent's last heartbeat.
    sa.Column("heartbeat", sa.Float, nullable=False),
    # The id of the agent that holds the name (a UUID kept in its state folder): the same id is the
    # same agent, restarted perhaps at another address; another id is refused while the host is up.
    # None: a host registered before agents had ids, or by one that sends none.
    sa.Column("agent_id", sa.String(36), nullable=True),
)

servers = sa.Table(
    "conductor_servers",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("project_id", sa.String(255), nullable=False, index=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    # The request as the scheduler and the agents take it (ServerRequest.to_dict): flavor, image,
    # zone, group. A resize's end writes the new flavor here, a revert's the old one back.
    sa.Column("request", sa.JSON, nullable=False),
    # The request before a resize or migration awaiting confirm or revert: what a revert restores.
    sa.Column("old_request", sa.JSON, nullable=True),
    sa.Column("group_id", sa.String(36), nullable=True, index=True),
    sa.Column("status", sa.String(32), nullable=False, index=True),
    sa.Column("host", sa.String(255), nullable=True, index=True),
    # The zone of the host the server was last placed on, kept once it is on none (offloaded): Nova
    # shows that zone for it. A server on a host shows its host's zone as it is now.
    sa.Column("zone", sa.String(255), nullable=True),
    # The operation in flight (one at a time), and the resize or migration awaiting confirm or revert.
    sa.Column("operation_id", sa.String(36), nullable=True),
    sa.Column("move_id", sa.String(36), nullable=True),
    # Why the last operation failed, if it did, and when it ended.
    sa.Column("fault", sa.Text, nullable=True),
    sa.Column("fault_at", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("deleted_at", sa.Float, nullable=True),
)

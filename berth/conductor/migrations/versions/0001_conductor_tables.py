"""The conductors' tables as they were before their migrations: the journal's operations, flavors,
server groups, hosts and servers

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "conductor_operations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("selections", sa.JSON, nullable=False),
        sa.Column("attempts", sa.JSON, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("heartbeat", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_conductor_operations_instance_uuid", "conductor_operations", ["instance_uuid"])
    op.create_index("ix_conductor_operations_state", "conductor_operations", ["state"])
    op.create_table(
        "conductor_flavors",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("ram", sa.Integer, nullable=False),
        sa.Column("disk", sa.Integer, nullable=False),
        sa.Column("ephemeral", sa.Integer, nullable=False),
        sa.Column("swap", sa.Integer, nullable=False),
        sa.Column("extra_specs", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "conductor_server_groups",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("rules", sa.JSON, nullable=False),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "conductor_hosts",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("url", sa.String(1024), nullable=False),
        sa.Column("agent_token", sa.String(255), nullable=True),
        sa.Column("zone", sa.String(255), nullable=True),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("disabled_reason", sa.String(255), nullable=True),
        sa.Column("registered_by", sa.String(255), nullable=False),
        sa.Column("registered_at", sa.Float, nullable=False),
        sa.Column("heartbeat", sa.Float, nullable=False),
    )
    op.create_table(
        "conductor_servers",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("old_request", sa.JSON, nullable=True),
        sa.Column("group_id", sa.String(36), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("operation_id", sa.String(36), nullable=True),
        sa.Column("move_id", sa.String(36), nullable=True),
        sa.Column("fault", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("deleted_at", sa.Float, nullable=True),
    )
    for column in ("project_id", "group_id", "status", "host"):
        op.create_index(f"ix_conductor_servers_{column}", "conductor_servers", [column])


def downgrade() -> None:
    for table in ("conductor_servers", "conductor_hosts", "conductor_server_groups", "conductor_flavors"):
        op.drop_table(table)
    op.drop_table("conductor_operations")

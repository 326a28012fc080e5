"""server_groups and server_group_members: affinity and anti-affinity for pick-and-claim

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "server_groups",
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("policy", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("uuid", name=op.f("pk_server_groups")),
    )
    op.create_table(
        "server_group_members",
        sa.Column("group_uuid", sa.String(length=36), nullable=False),
        sa.Column("consumer_uuid", sa.String(length=36), nullable=False),
        sa.Column("root_provider_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["group_uuid"], ["server_groups.uuid"], name=op.f("fk_server_group_members_group_uuid_server_groups")
        ),
        sa.PrimaryKeyConstraint("group_uuid", "consumer_uuid", name=op.f("pk_server_group_members")),
    )


def downgrade() -> None:
    op.drop_table("server_group_members")
    op.drop_table("server_groups")

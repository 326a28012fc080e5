"""consumer_priorities and preemptions: a pick's priority kept with its consumer, and the consumers
preempting picks removed

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "consumer_priorities",
        sa.Column("consumer_uuid", sa.String(length=36), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("consumer_uuid", name=op.f("pk_consumer_priorities")),
    )
    op.create_index("ix_consumer_priorities_priority", "consumer_priorities", ["priority"])
    op.create_table(
        "preemptions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("consumer_uuid", sa.String(length=36), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("root_provider_uuid", sa.String(length=36), nullable=False),
        sa.Column("preempted_by", sa.String(length=36), nullable=False),
        sa.Column("preempted_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_preemptions")),
    )
    op.create_index("ix_preemptions_consumer_uuid", "preemptions", ["consumer_uuid"])
    op.create_index("ix_preemptions_preempted_by", "preemptions", ["preempted_by"])
    op.create_index("ix_preemptions_preempted_at", "preemptions", ["preempted_at"])


def downgrade() -> None:
    op.drop_table("preemptions")
    op.drop_table("consumer_priorities")

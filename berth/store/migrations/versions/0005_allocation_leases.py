"""allocation_leases: allocations released by the service unless confirmed in time

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "allocation_leases",
        sa.Column("consumer_uuid", sa.String(length=36), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("consumer_uuid", name=op.f("pk_allocation_leases")),
    )
    op.create_index(op.f("ix_allocation_leases_expires_at"), "allocation_leases", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_allocation_leases_expires_at"), table_name="allocation_leases")
    op.drop_table("allocation_leases")

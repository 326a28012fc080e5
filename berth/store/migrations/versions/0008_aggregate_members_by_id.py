"""aggregate members indexed by aggregate and provider, for trees anchored to sharing providers

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_resource_provider_aggregates_aggregate_provider",
        "resource_provider_aggregates",
        ["aggregate_id", "resource_provider_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_resource_provider_aggregates_aggregate_provider", table_name="resource_provider_aggregates")

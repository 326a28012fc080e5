"""resource_providers.revision: when a provider's candidate data last changed, for per-process copies

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("resource_providers", sa.Column("revision", sa.BigInteger, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("resource_providers") as batch:
        batch.drop_column("revision")

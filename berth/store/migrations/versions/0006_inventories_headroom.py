"""inventories indexed by class and headroom, for candidate requests few providers can take

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

from berth.domain.capacity import headroom_sql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_inventories_headroom", "inventories", ["resource_class_id", sa.text(f"({headroom_sql()})")])


def downgrade() -> None:
    op.drop_index("ix_inventories_headroom", table_name="inventories")

"""inventories indexed by class and max_unit, for candidate requests above every provider's max_unit

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_inventories_max_unit", "inventories", ["resource_class_id", "max_unit"])


def downgrade() -> None:
    op.drop_index("ix_inventories_max_unit", table_name="inventories")

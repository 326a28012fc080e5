"""inventories indexed by class and headroom, for candidate requests few providers can take

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


# The expression as this revision made it, written out: a migration is history, and if the
# capacity rule's ``headroom_sql`` ever changes, the schema's index and this one must be seen to
# differ (tests/test_migrations.py compares them), so that a new revision rebuilds the index.
HEADROOM = "(total - reserved) * allocation_ratio - used"


def upgrade() -> None:
    op.create_index("ix_inventories_headroom", "inventories", ["resource_class_id", sa.text(f"({HEADROOM})")])


def downgrade() -> None:
    op.drop_index("ix_inventories_headroom", table_name="inventories")

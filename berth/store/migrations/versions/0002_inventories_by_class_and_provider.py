"""inventories indexed by class then provider, for candidate search in provider order

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_inventories_resource_class_id_used", table_name="inventories")
    op.create_index(
        "ix_inventories_resource_class_id_resource_provider_id",
        "inventories",
        ["resource_class_id", "resource_provider_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_inventories_resource_class_id_resource_provider_id", table_name="inventories")
    op.create_index("ix_inventories_resource_class_id_used", "inventories", ["resource_class_id", "used"])

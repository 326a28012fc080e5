"""conductor_servers.fault_at: when the server's fault happened, which Nova shows as the fault's
``created``

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
    with op.batch_alter_table("conductor_servers") as batch:
        batch.add_column(sa.Column("fault_at", sa.Float, nullable=True))
    # A fault written before has its row's last change as its time: the end that wrote it, unless an
    # operation started since.
    op.execute("UPDATE conductor_servers SET fault_at = updated_at WHERE fault IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("conductor_servers") as batch:
        batch.drop_column("fault_at")

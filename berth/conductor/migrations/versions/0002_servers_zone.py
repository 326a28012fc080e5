"""conductor_servers.zone: the zone of the host a server was last placed on, which Nova shows for a
server on no host (shelved and offloaded)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conductor_servers") as batch:
        batch.add_column(sa.Column("zone", sa.String(255), nullable=True))
    # Servers on a host take its zone now; those offloaded before keep none (their last host is
    # not recorded).
    op.execute(
        "UPDATE conductor_servers SET zone = "
        "(SELECT zone FROM conductor_hosts WHERE conductor_hosts.name = conductor_servers.host) "
        "WHERE host IS NOT NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("conductor_servers") as batch:
        batch.drop_column("zone")

"""conductor_hosts.agent_id: the id of the agent that holds the host's name, so that a second agent
started under a name a live agent holds is refused rather than taking the host's address over

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The hosts registered before have none: the first agent that registers with an id adopts theirs.
    with op.batch_alter_table("conductor_hosts") as batch:
        batch.add_column(sa.Column("agent_id", sa.String(36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conductor_hosts") as batch:
        batch.drop_column("agent_id")

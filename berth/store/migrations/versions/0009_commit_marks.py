"""commit_marks: one row per PostgreSQL write transaction, to resolve a commit whose connection was lost

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "commit_marks",
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.Column("fenced", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("token", name=op.f("pk_commit_marks")),
    )
    op.create_index(op.f("ix_commit_marks_created_at"), "commit_marks", ["created_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_commit_marks_created_at"), table_name="commit_marks")
    op.drop_table("commit_marks")

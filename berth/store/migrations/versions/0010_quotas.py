"""quota_projects and quota_limits: per-project and per-user limits enforced by the claims

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quota_projects",
        sa.Column("project_id", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", name=op.f("pk_quota_projects")),
    )
    op.create_table(
        "quota_limits",
        sa.Column("project_id", sa.String(length=255), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("resource", sa.String(length=255), nullable=False),
        sa.Column("hard_limit", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["quota_projects.project_id"], name=op.f("fk_quota_limits_project_id_quota_projects")
        ),
        sa.PrimaryKeyConstraint("project_id", "user_id", "resource", name=op.f("pk_quota_limits")),
    )


def downgrade() -> None:
    op.drop_table("quota_limits")
    op.drop_table("quota_projects")

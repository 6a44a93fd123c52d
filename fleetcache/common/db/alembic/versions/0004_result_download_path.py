"""Job results record the download path (``rbd`` or ``http``) and why a direct download fell
back to HTTP; both nullable, so results of computes that predate them stay valid.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cache_job_results") as batch:
        batch.add_column(sa.Column("download_path", sa.String(8), nullable=True))
        batch.add_column(sa.Column("fallback_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cache_job_results") as batch:
        batch.drop_column("fallback_reason")
        batch.drop_column("download_path")

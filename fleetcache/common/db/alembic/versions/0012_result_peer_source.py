"""Job results record the peer an image came from and the bytes peers sent (peer
distribution); nullable, so results of computes that predate them stay valid.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cache_job_results") as batch:
        batch.add_column(sa.Column("source_host", sa.String(255), nullable=True))
        batch.add_column(sa.Column("bytes_from_peers", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cache_job_results") as batch:
        batch.drop_column("bytes_from_peers")
        batch.drop_column("source_host")

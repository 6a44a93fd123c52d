"""download_waiters: hosts waiting for a slot of the image service, with their job's
priority, so that a slot goes to a waiting job of a higher priority first, across conductors.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: Microseconds on MariaDB too, as the leases' times (models.PreciseDateTime).
_TIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "download_waiters",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("image_id", sa.String(255), nullable=False),
        sa.Column("job_uuid", sa.String(36), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("expires_at", _TIME, nullable=False),
        # An id is never handed out twice (models.DownloadWaiter).
        sqlite_autoincrement=True,
    )
    op.create_index("ix_download_waiters_holder", "download_waiters", ["holder"])
    op.create_index("ix_download_waiters_image_id", "download_waiters", ["image_id"])
    op.create_index("ix_download_waiters_expires_at", "download_waiters", ["expires_at"])


def downgrade() -> None:
    op.drop_table("download_waiters")

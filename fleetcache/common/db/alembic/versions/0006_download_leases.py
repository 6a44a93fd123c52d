"""download_gates and download_leases: the image service's download slots, shared by every
conductor (``[image_cache] max_concurrent_downloads*``); the one gate row is created here.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Microsecond timestamps on MySQL/MariaDB too (their DATETIME drops fractions by default).
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: The gate of the image service (``fleetcache.common.db.download_leases.IMAGE_SERVICE``).
IMAGE_SERVICE = "image-service"


def upgrade() -> None:
    gates = op.create_table(
        "download_gates",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(gates, [{"name": IMAGE_SERVICE, "generation": 0}])
    op.create_table(
        "download_leases",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("image_id", sa.String(255), nullable=False),
        sa.Column("job_uuid", sa.String(36), nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("expires_at", DATETIME, nullable=False),
    )
    op.create_index("ix_download_leases_holder", "download_leases", ["holder"])
    op.create_index("ix_download_leases_image_id", "download_leases", ["image_id"])
    op.create_index("ix_download_leases_expires_at", "download_leases", ["expires_at"])


def downgrade() -> None:
    op.drop_table("download_leases")
    op.drop_table("download_gates")

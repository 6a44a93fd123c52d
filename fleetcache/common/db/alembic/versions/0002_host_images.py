"""Image cache reports: host_images (what each compute caches), host_image_caches (its usage).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Microsecond timestamps on MySQL/MariaDB too (their DATETIME drops fractions by default).
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_images",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("host", sa.String(255), nullable=False, index=True),
        sa.Column("image_id", sa.String(255), nullable=False, index=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("last_used", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
        sa.UniqueConstraint("host", "image_id", name="uniq_host_images0host0image_id"),
    )
    op.create_table(
        "host_image_caches",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("host", sa.String(255), nullable=False, unique=True),
        sa.Column("usage_bytes", sa.BigInteger(), nullable=False),
        sa.Column("image_count", sa.Integer(), nullable=False),
        sa.Column("reported_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("host_image_caches")
    op.drop_table("host_images")

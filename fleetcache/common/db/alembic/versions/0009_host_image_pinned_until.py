"""host_images.pinned_until: until when a compute reported the image pinned (NULL: no pin).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Microsecond timestamps on MySQL/MariaDB too (their DATETIME drops fractions by default).
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("host_images") as batch:
        batch.add_column(sa.Column("pinned_until", DATETIME, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("host_images") as batch:
        batch.drop_column("pinned_until")

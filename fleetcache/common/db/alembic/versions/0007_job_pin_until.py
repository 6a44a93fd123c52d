"""cache_jobs.pin_until: until when a job's images are pinned on its hosts (NULL: no pin).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Microsecond timestamps on MySQL/MariaDB too (their DATETIME drops fractions by default).
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cache_jobs") as batch:
        batch.add_column(sa.Column("pin_until", DATETIME, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cache_jobs") as batch:
        batch.drop_column("pin_until")

"""Jobs keep their request's terms (window, deadline, per-request limits) and, while they
wait for their window, when it next opens; both nullable: older jobs have none.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

#: Microseconds on MariaDB too, as every time column of the jobs (models.PreciseDateTime).
_TIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("cache_jobs") as batch:
        batch.add_column(sa.Column("terms", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("next_start_at", _TIME, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cache_jobs") as batch:
        batch.drop_column("next_start_at")
        batch.drop_column("terms")

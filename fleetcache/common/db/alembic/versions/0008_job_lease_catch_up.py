"""Pre-cache jobs carry their host list, an owner with a lease (so that another conductor can
take over a job whose conductor died) and the end of their catch-up window; all nullable, so
jobs written before stay readable (a job without a lease is claimable at once).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_TIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("cache_jobs") as batch:
        batch.add_column(sa.Column("hosts", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("owner", sa.String(255), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", _TIME, nullable=True))
        batch.add_column(sa.Column("catch_up_until", _TIME, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cache_jobs") as batch:
        batch.drop_column("catch_up_until")
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner")
        batch.drop_column("hosts")

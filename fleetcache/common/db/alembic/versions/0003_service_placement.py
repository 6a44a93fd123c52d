"""services.placement_synced_at: when the conductor last brought the host's Placement resource
provider in step with the compute's registration (NULL: not yet, so not schedulable).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Microsecond timestamps on MySQL/MariaDB too (their DATETIME drops fractions by default).
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("services") as batch:
        batch.add_column(sa.Column("placement_synced_at", DATETIME, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("services") as batch:
        batch.drop_column("placement_synced_at")

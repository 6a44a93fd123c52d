"""What a server's owner says of it, kept as Nova keeps it: description, access addresses,
disk config and metadata; and a flavor's ``rxtx_factor``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("display_description", sa.Text(), nullable=True))
        batch.add_column(sa.Column("access_ip_v4", sa.String(39), nullable=True))
        batch.add_column(sa.Column("access_ip_v6", sa.String(39), nullable=True))
        # A constant default ("0", false on every backend) lets SQLite add the column in
        # place; an expression (sa.false()) would make alembic copy the whole table.
        batch.add_column(sa.Column("auto_disk_config", sa.Boolean(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("user_metadata", sa.JSON(), nullable=True))
    with op.batch_alter_table("flavors") as batch:
        batch.add_column(sa.Column("rxtx_factor", sa.Float(), nullable=False,
                                   server_default="1.0"))


def downgrade() -> None:
    # In place (SQLite >= 3.35 drops a column itself): a batch copy of "flavors" would drop
    # the table, and SQLite's DROP TABLE deletes its rows first, which cascades to every
    # flavor's extra specs.
    with op.batch_alter_table("flavors", recreate="never") as batch:
        batch.drop_column("rxtx_factor")
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("user_metadata")
        batch.drop_column("auto_disk_config")
        batch.drop_column("access_ip_v6")
        batch.drop_column("access_ip_v4")
        batch.drop_column("display_description")

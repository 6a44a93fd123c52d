"""services.host_ip: the address a compute reports (Nova's ``[DEFAULT] my_ip``); and
flavor_projects: the projects a private flavor is shared with (Nova's flavor access).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("services") as batch:
        # 39: the longest IPv6 address in text (Nova's compute_nodes.host_ip type).
        batch.add_column(sa.Column("host_ip", sa.String(39), nullable=True))
    op.create_table(
        "flavor_projects",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("flavor_id", sa.Integer(), sa.ForeignKey("flavors.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("project_id", sa.String(255), nullable=False, index=True),
        sa.UniqueConstraint("flavor_id", "project_id",
                            name="uniq_flavor_projects0flavor_id0project_id"),
    )


def downgrade() -> None:
    op.drop_table("flavor_projects")
    with op.batch_alter_table("services") as batch:
        batch.drop_column("host_ip")

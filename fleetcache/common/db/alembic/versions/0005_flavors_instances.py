"""The boot path: flavors (with extra specs) and instances (servers).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Microsecond timestamps on MySQL/MariaDB too (their DATETIME drops fractions by default).
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flavors",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("flavorid", sa.String(255), nullable=False, unique=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("vcpus", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("root_gb", sa.Integer(), nullable=False),
        sa.Column("ephemeral_gb", sa.Integer(), nullable=False),
        sa.Column("swap", sa.Integer(), nullable=False),
        sa.Column("is_public", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=True),
    )
    op.create_table(
        "flavor_extra_specs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("flavor_id", sa.Integer(), sa.ForeignKey("flavors.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.String(255), nullable=False),
        sa.UniqueConstraint("flavor_id", "key", name="uniq_flavor_extra_specs0flavor_id0key"),
    )
    op.create_table(
        "instances",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("project_id", sa.String(255), nullable=True, index=True),
        sa.Column("user_id", sa.String(255), nullable=True),
        sa.Column("display_name", sa.String(255), nullable=False),
        sa.Column("image_ref", sa.String(255), nullable=False),
        sa.Column("flavor", sa.JSON(), nullable=False),
        sa.Column("reservation_id", sa.String(255), nullable=False),
        sa.Column("launch_index", sa.Integer(), nullable=False),
        sa.Column("availability_zone", sa.String(255), nullable=True),
        sa.Column("requested_host", sa.String(255), nullable=True),
        sa.Column("host", sa.String(255), nullable=True, index=True),
        sa.Column("node", sa.String(255), nullable=True),
        sa.Column("cell_id", sa.Integer(), nullable=True),
        sa.Column("vm_state", sa.String(16), nullable=False, index=True),
        sa.Column("task_state", sa.String(32), nullable=True),
        sa.Column("conductor_host", sa.String(255), nullable=True),
        sa.Column("fault_message", sa.Text(), nullable=True),
        sa.Column("fault_code", sa.Integer(), nullable=True),
        sa.Column("fault_details", sa.Text(), nullable=True),
        sa.Column("fault_created_at", DATETIME, nullable=True),
        sa.Column("disk", sa.JSON(), nullable=True),
        sa.Column("launched_at", DATETIME, nullable=True),
        sa.Column("terminated_at", DATETIME, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("instances")
    op.drop_table("flavor_extra_specs")
    op.drop_table("flavors")

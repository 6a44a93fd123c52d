"""Initial schema: cells, services, aggregates, pre-cache jobs.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

# Microsecond timestamps on MySQL/MariaDB too (their DATETIME drops fractions by default).
DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _timestamps() -> list[sa.Column[object]]:
    return [
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "cells",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("transport_url", sa.Text(), nullable=False),
        *_timestamps(),
    )
    op.create_table(
        "services",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("host", sa.String(255), nullable=False, index=True),
        sa.Column("binary", sa.String(64), nullable=False),
        sa.Column("topic", sa.String(64), nullable=False),
        sa.Column(
            "cell_id", sa.Integer(), sa.ForeignKey("cells.id", ondelete="RESTRICT"), nullable=True
        ),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.String(255), nullable=True),
        sa.Column("forced_down", sa.Boolean(), nullable=False),
        sa.Column("last_seen_up", DATETIME, nullable=True),
        sa.Column("report_count", sa.Integer(), nullable=False),
        sa.Column("capabilities", sa.JSON(), nullable=False),
        *_timestamps(),
        sa.UniqueConstraint("host", "binary", name="uniq_services0host0binary"),
    )
    op.create_table(
        "aggregates",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        *_timestamps(),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "aggregate_hosts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "aggregate_id",
            sa.Integer(),
            sa.ForeignKey("aggregates.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("host", sa.String(255), nullable=False, index=True),
        sa.UniqueConstraint("aggregate_id", "host", name="uniq_aggregate_hosts0aggregate_id0host"),
    )
    op.create_table(
        "aggregate_metadata",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "aggregate_id",
            sa.Integer(),
            sa.ForeignKey("aggregates.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.String(255), nullable=False),
        sa.UniqueConstraint("aggregate_id", "key", name="uniq_aggregate_metadata0aggregate_id0key"),
    )
    op.create_table(
        "cache_jobs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("aggregate_id", sa.Integer(), nullable=False, index=True),
        sa.Column("aggregate_uuid", sa.String(36), nullable=False),
        sa.Column("image_ids", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("conductor_host", sa.String(255), nullable=True),
        sa.Column("total_hosts", sa.Integer(), nullable=False),
        sa.Column("started_at", DATETIME, nullable=True),
        sa.Column("finished_at", DATETIME, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        *_timestamps(),
    )
    op.create_table(
        "cache_job_results",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "job_id", sa.Integer(), sa.ForeignKey("cache_jobs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("image_id", sa.String(36), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("bytes_downloaded", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
        sa.UniqueConstraint(
            "job_id", "host", "image_id", name="uniq_cache_job_results0job_id0host0image_id"
        ),
    )

"""Runs history: the earlier record of a run that a different record replaced.

Ingesting a record whose ``run_id`` is stored is a no-op when it would store the same rows and is refused
when it differs, unless the caller replaces on purpose (``demuxlab ingest --replace``, or the workflow for a
run it ran again); the record replaced is then kept here, whole (the ``runs`` row as JSONB, the samples as
an array, the op timings as JSONB), so nothing ingested is ever lost (docs/CONTRACTS.md §5).

Revision ID: 0005_runs_history
Revises: 0004_cluster
Create Date: 2026-11-24 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005_runs_history"
down_revision: str | None = "0004_cluster"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runs_history",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("point_id", sa.Integer(), nullable=False),
        sa.Column("repeat_index", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replaced_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("replaced_by", sa.Text(), nullable=False),
        sa.Column("run", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("samples", postgresql.ARRAY(sa.Double()), nullable=False),
        sa.Column("op_timings", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.ForeignKeyConstraint(
            ["point_id"],
            ["points.id"],
            name=op.f("fk_runs_history_point_id_points"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs_history")),
    )
    op.create_index(op.f("ix_runs_history_run_id"), "runs_history", ["run_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_history_run_id"), table_name="runs_history")
    op.drop_table("runs_history")

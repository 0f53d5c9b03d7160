"""A run's costs in the kernel's terms and its validity checks (issue 44): the record's ``costs`` and a
``flagged`` mark on ``runs``, one row per side and metric in ``run_costs``, one per check in ``run_checks``.

Revision ID: 0008_costs
Revises: 0007_adaptive
Create Date: 2026-12-01 23:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008_costs"
down_revision: str | None = "0007_adaptive"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The check verdicts as the migration was written (demuxlab.vocab.CHECK_VERDICTS; tests/unit/test_vocab.py
# checks they agree).
CHECK_VERDICTS = ("pass", "warn", "fail", "unknown")


def upgrade() -> None:
    op.add_column("runs", sa.Column("costs", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column("runs", sa.Column("flagged", sa.Boolean(), nullable=True))
    op.create_table(
        "run_costs",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("side", sa.Text(), nullable=False),
        sa.Column("metric", sa.Text(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("per_message", sa.Double(), nullable=True),
        sa.Column("unavailable", sa.Text(), nullable=True),
        sa.CheckConstraint("side IN ('server', 'client')", name=op.f("ck_run_costs_side")),
        sa.CheckConstraint(
            "(unavailable IS NULL) OR (value IS NULL AND per_message IS NULL)",
            name=op.f("ck_run_costs_unavailable"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_run_costs_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "side", "metric", name=op.f("pk_run_costs")),
    )
    op.create_index(op.f("ix_run_costs_metric_side"), "run_costs", ["metric", "side"], unique=False)
    verdicts = ", ".join(f"'{v}'" for v in CHECK_VERDICTS)
    op.create_table(
        "run_checks",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("check", sa.Text(), nullable=False),
        sa.Column("verdict", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.CheckConstraint(f"verdict IN ({verdicts})", name=op.f("ck_run_checks_verdict")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_run_checks_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "check", name=op.f("pk_run_checks")),
    )


def downgrade() -> None:
    op.drop_table("run_checks")
    op.drop_index(op.f("ix_run_costs_metric_side"), table_name="run_costs")
    op.drop_table("run_costs")
    op.drop_column("runs", "flagged")
    op.drop_column("runs", "costs")

"""Adaptive experiments: what each decided (docs/adaptive.md), one JSONB document per experiment.

Revision ID: 0007_adaptive
Revises: 0006_slurm
Create Date: 2026-11-24 22:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007_adaptive"
down_revision: str | None = "0006_slurm"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "adaptive_decisions",
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("decisions", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_adaptive_decisions_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_adaptive_decisions")),
    )


def downgrade() -> None:
    op.drop_table("adaptive_decisions")

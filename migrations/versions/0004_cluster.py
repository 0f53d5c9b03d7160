"""Cluster sweeps: a run's hardware class and its noise check.

``runs.hardware_class`` is the pair's class id (``hw-…``, from both hosts' CPU model, cores, threads per
core, sockets, NUMA nodes and kernel): the report never averages runs of different classes together.
``runs.noisy`` / ``runs.noise`` are the pre-run noise check of both hosts (remote launcher): a noisy host
delays a run a bounded time, then the run goes ahead flagged. Local runs have NULL in all three.

Revision ID: 0004_cluster
Revises: 0003_bundles
Create Date: 2026-11-23 19:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004_cluster"
down_revision: str | None = "0003_bundles"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("hardware_class", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("noisy", sa.Boolean(), nullable=True))
    op.add_column("runs", sa.Column("noise", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.create_index("ix_runs_host_pair", "runs", ["host_pair"])


def downgrade() -> None:
    op.drop_index("ix_runs_host_pair", table_name="runs")
    op.drop_column("runs", "noise")
    op.drop_column("runs", "noisy")
    op.drop_column("runs", "hardware_class")

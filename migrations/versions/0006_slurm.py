"""Slurm-allocated pairs: each run's Slurm job.

``runs.slurm_job_id`` is the id of the Slurm job that ran the run (its final attempt), ``runs.slurm`` the
record's ``slurm`` section: cluster, partition, account, both nodes and their features, when it was
submitted and started, how the binaries were staged. The nodes themselves are the run's server and client
hosts (``server_host_id``, ``client_host_id``). NULL for runs that no Slurm job ran.

Revision ID: 0006_slurm
Revises: 0005_runs_history
Create Date: 2026-11-24 20:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006_slurm"
down_revision: str | None = "0005_runs_history"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("slurm_job_id", sa.BigInteger(), nullable=True))
    op.add_column("runs", sa.Column("slurm", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.create_index("ix_runs_slurm_job_id", "runs", ["slurm_job_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_slurm_job_id", table_name="runs")
    op.drop_column("runs", "slurm")
    op.drop_column("runs", "slurm_job_id")

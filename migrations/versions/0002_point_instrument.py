"""Calibration points: ``points.instrument`` marks the points whose runs were instrumented.

The CTMC calibration (seed 001 §V-A) runs the lowest-concurrency HSHA and LF points with the server's
per-operation timings on; those runs are kept apart from the measured sweep (their point keys end in
``/instr``). Existing rows are measured points, hence the default ``false``.

Revision ID: 0002_point_instrument
Revises: 0001_initial
Create Date: 2026-11-21 14:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_point_instrument"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("points", sa.Column("instrument", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    op.drop_column("points", "instrument")

"""Bundle reruns: ``experiments.rerun_of_id`` links an experiment rerun from a bundle to its original.

``demuxlab bundle rerun`` runs a bundle's experiments again as new experiments (``<name>-rerun``) and links
each to the imported original, so the dashboard can set them side by side. Deleting the original keeps the
rerun (the link becomes NULL).

Revision ID: 0003_bundles
Revises: 0002_point_instrument
Create Date: 2026-11-23 19:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_bundles"
down_revision: str | None = "0002_point_instrument"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("experiments", sa.Column("rerun_of_id", sa.Integer(), nullable=True))
    op.create_foreign_key(
        op.f("fk_experiments_rerun_of_id_experiments"),
        "experiments",
        "experiments",
        ["rerun_of_id"],
        ["id"],
        ondelete="SET NULL",
    )


def downgrade() -> None:
    op.drop_constraint(op.f("fk_experiments_rerun_of_id_experiments"), "experiments", type_="foreignkey")
    op.drop_column("experiments", "rerun_of_id")

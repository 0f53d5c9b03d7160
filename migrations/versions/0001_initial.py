"""Schema v1: experiments, hosts, points, runs, samples, op_timings, calibrations, predictions.

Also the read-only role ``demuxlab_ro`` (for the dashboard): SELECT on every table of this schema, now and
in the future. Roles are cluster-wide, so the role is created if missing and kept on downgrade; only this
database's grants are revoked.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-21 12:02:14.337693
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("spec_text", sa.Text(), nullable=True),
        sa.Column("spec_sha256", sa.Text(), nullable=False),
        sa.Column("git_rev", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiments")),
        sa.UniqueConstraint("name", "spec_sha256", name=op.f("uq_experiments_name_spec_sha256")),
    )
    op.create_table(
        "hosts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("hostname", sa.Text(), nullable=False),
        sa.Column("facts", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("facts_sha256", sa.Text(), nullable=False),
        sa.Column("numa_nodes", sa.Integer(), nullable=True),
        sa.Column("sockets", sa.Integer(), nullable=True),
        sa.Column("cores", sa.Integer(), nullable=True),
        sa.Column("threads_per_core", sa.Integer(), nullable=True),
        sa.Column("smt", sa.Boolean(), nullable=True),
        sa.Column("governor", sa.Text(), nullable=True),
        sa.Column("turbo", sa.Boolean(), nullable=True),
        sa.Column("irqbalance", sa.Boolean(), nullable=True),
        sa.Column("kernel", sa.Text(), nullable=True),
        sa.Column("cpu_model", sa.Text(), nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hosts")),
        sa.UniqueConstraint("facts_sha256", name=op.f("uq_hosts_facts_sha256")),
    )
    op.create_table(
        "calibrations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("pattern", sa.Text(), nullable=False),
        sa.Column("notifier", sa.Text(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=True),
        sa.Column("rates", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("source_runs", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("artifacts", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("method", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"], name=op.f("fk_calibrations_host_id_hosts")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibrations")),
    )
    op.create_index(
        op.f("ix_calibrations_pattern_notifier"), "calibrations", ["pattern", "notifier"], unique=False
    )
    op.create_table(
        "points",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("point_key", sa.Text(), nullable=False),
        sa.Column("pattern", sa.Text(), nullable=False),
        sa.Column("notifier", sa.Text(), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("work_us", sa.Double(), nullable=False),
        sa.Column("connections", sa.Integer(), nullable=False),
        sa.Column("msg_size", sa.Integer(), nullable=False),
        sa.Column("client_threads", sa.Integer(), nullable=False),
        sa.Column("rate", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_points_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_points")),
        sa.UniqueConstraint("experiment_id", "point_key", name=op.f("uq_points_experiment_id_point_key")),
    )
    op.create_table(
        "predictions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("point_id", sa.Integer(), nullable=False),
        sa.Column("calibration_id", sa.Integer(), nullable=True),
        sa.Column("rates_source", sa.Text(), nullable=False),
        sa.Column("method", sa.Text(), nullable=False),
        sa.Column("parameters", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("throughput_msgs_per_s", sa.Double(), nullable=False),
        sa.Column("ci_halfwidth_rel", sa.Double(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "(rates_source = 'paper') = (calibration_id IS NULL)",
            name=op.f("ck_predictions_calibration_matches_source"),
        ),
        sa.CheckConstraint("method IN ('ssa', 'fluid', 'exact')", name=op.f("ck_predictions_method")),
        sa.CheckConstraint(
            "rates_source IN ('paper', 'calibration')", name=op.f("ck_predictions_rates_source")
        ),
        sa.ForeignKeyConstraint(
            ["calibration_id"],
            ["calibrations.id"],
            name=op.f("fk_predictions_calibration_id_calibrations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["point_id"], ["points.id"], name=op.f("fk_predictions_point_id_points"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_predictions")),
        sa.UniqueConstraint(
            "point_id",
            "rates_source",
            "calibration_id",
            "method",
            name=op.f("uq_predictions_point_id_rates_source_calibration_id_method"),
            postgresql_nulls_not_distinct=True,
        ),
    )
    op.create_index(op.f("ix_predictions_calibration_id"), "predictions", ["calibration_id"], unique=False)
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("point_id", sa.Integer(), nullable=False),
        sa.Column("repeat_index", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("launcher", sa.Text(), nullable=True),
        sa.Column("host_pair", sa.Text(), nullable=True),
        sa.Column("server_host_id", sa.Integer(), nullable=True),
        sa.Column("client_host_id", sa.Integer(), nullable=True),
        sa.Column("pinning", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("oversubscribed", sa.Boolean(), nullable=True),
        sa.Column("server_artifact", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("client_artifact", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("warmup_s", sa.Double(), nullable=False),
        sa.Column("measure_s", sa.Double(), nullable=False),
        sa.Column("cooldown_s", sa.Double(), nullable=False),
        sa.Column("throughput_msgs_per_s", sa.Double(), nullable=True),
        sa.Column("stationary", sa.Boolean(), nullable=True),
        sa.Column("drift_rel", sa.Double(), nullable=True),
        sa.Column("latency_us", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("client_cpu_user_s", sa.Double(), nullable=True),
        sa.Column("client_cpu_sys_s", sa.Double(), nullable=True),
        sa.Column("server_cpu_user_s", sa.Double(), nullable=True),
        sa.Column("server_cpu_sys_s", sa.Double(), nullable=True),
        sa.Column("server_messages", sa.BigInteger(), nullable=True),
        sa.Column("client_messages", sa.BigInteger(), nullable=True),
        sa.Column("errors", sa.BigInteger(), nullable=True),
        sa.Column("orchestration_s", sa.Double(), nullable=True),
        sa.Column("client_result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("server_result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("ingested_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status = 'ok' OR failure_reason IS NOT NULL", name=op.f("ck_runs_failure_reason")
        ),
        sa.CheckConstraint("status IN ('ok', 'failed')", name=op.f("ck_runs_status")),
        sa.ForeignKeyConstraint(["client_host_id"], ["hosts.id"], name=op.f("fk_runs_client_host_id_hosts")),
        sa.ForeignKeyConstraint(
            ["point_id"], ["points.id"], name=op.f("fk_runs_point_id_points"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["server_host_id"], ["hosts.id"], name=op.f("fk_runs_server_host_id_hosts")),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
        sa.UniqueConstraint("point_id", "repeat_index", name=op.f("uq_runs_point_id_repeat_index")),
    )
    op.create_index(op.f("ix_runs_client_host_id"), "runs", ["client_host_id"], unique=False)
    op.create_index(op.f("ix_runs_server_host_id"), "runs", ["server_host_id"], unique=False)
    op.create_table(
        "op_timings",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("op", sa.Text(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=True),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("total_ns", sa.BigInteger(), nullable=True),
        sa.Column("mean_ns", sa.Double(), nullable=True),
        sa.Column("p50_ns", sa.BigInteger(), nullable=True),
        sa.Column("p90_ns", sa.BigInteger(), nullable=True),
        sa.Column("p99_ns", sa.BigInteger(), nullable=True),
        sa.Column("p999_ns", sa.BigInteger(), nullable=True),
        sa.Column("max_ns", sa.BigInteger(), nullable=True),
        sa.CheckConstraint("events IS NULL OR events >= 0", name=op.f("ck_op_timings_events")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_op_timings_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_op_timings")),
        sa.UniqueConstraint(
            "run_id",
            "op",
            "events",
            name=op.f("uq_op_timings_run_id_op_events"),
            postgresql_nulls_not_distinct=True,
        ),
    )
    op.create_table(
        "samples",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("second", sa.Integer(), nullable=False),
        sa.Column("throughput_msgs_per_s", sa.Double(), nullable=False),
        sa.CheckConstraint("second >= 0", name=op.f("ck_samples_second")),
        sa.CheckConstraint("throughput_msgs_per_s >= 0", name=op.f("ck_samples_throughput")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_samples_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "second", name=op.f("pk_samples")),
    )
    _grant_read_only()


def downgrade() -> None:
    _revoke_read_only()
    op.drop_table("samples")
    op.drop_table("op_timings")
    op.drop_index(op.f("ix_runs_server_host_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_client_host_id"), table_name="runs")
    op.drop_table("runs")
    op.drop_index(op.f("ix_predictions_calibration_id"), table_name="predictions")
    op.drop_table("predictions")
    op.drop_table("points")
    op.drop_index(op.f("ix_calibrations_pattern_notifier"), table_name="calibrations")
    op.drop_table("calibrations")
    op.drop_table("hosts")
    op.drop_table("experiments")


READ_ONLY_ROLE = "demuxlab_ro"


def _grant_read_only() -> None:
    # Another database of the same cluster may create the role concurrently: tolerate losing that race.
    op.execute(
        f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{READ_ONLY_ROLE}') THEN
                CREATE ROLE {READ_ONLY_ROLE} LOGIN;
            END IF;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END $$;
        """
    )
    op.execute(
        f"""
        DO $$
        BEGIN
            EXECUTE format('GRANT CONNECT ON DATABASE %I TO {READ_ONLY_ROLE}', current_database());
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO {READ_ONLY_ROLE}', current_schema());
            EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO {READ_ONLY_ROLE}', current_schema());
            EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO {READ_ONLY_ROLE}',
                           current_schema());
        END $$;
        """
    )


def _revoke_read_only() -> None:
    op.execute(
        f"""
        DO $$
        DECLARE
            s text := quote_ident(current_schema());
        BEGIN
            IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{READ_ONLY_ROLE}') THEN
                EXECUTE 'ALTER DEFAULT PRIVILEGES IN SCHEMA ' || s
                    || ' REVOKE SELECT ON TABLES FROM {READ_ONLY_ROLE}';
                EXECUTE 'REVOKE SELECT ON ALL TABLES IN SCHEMA ' || s || ' FROM {READ_ONLY_ROLE}';
                EXECUTE 'REVOKE USAGE ON SCHEMA ' || s || ' FROM {READ_ONLY_ROLE}';
                EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM {READ_ONLY_ROLE}', current_database());
            END IF;
        END $$;
        """
    )

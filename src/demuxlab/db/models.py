"""Schema v1 as SQLAlchemy 2 typed models.

The Alembic migrations (``0001_initial``, ``0002_point_instrument``, ``0003_bundles``,
``0004_cluster``, ``0005_runs_history``, ``0006_slurm``, ``0007_adaptive``, ``0008_costs``) create exactly
these tables;
``demuxlab db check`` (``alembic check``) fails if the two drift apart. Documents (facts, pinning,
artifacts, raw binary outputs, rates) are JSONB; every table that is written by a single actor has a
server-side creation timestamp.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Text,
    UniqueConstraint,
    Uuid,
    false,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from demuxlab.vocab import CHECK_VERDICTS, RUN_OK, RUN_STATUSES

# Constraint names must be deterministic so that migrations can refer to (and drop) them.
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONDoc = dict[str, Any]
intpk = Annotated[int, mapped_column(Integer, primary_key=True, autoincrement=True)]
created_ts = Annotated[dt.datetime, mapped_column(DateTime(timezone=True), server_default=func.now())]


def _sql_list(names: tuple[str, ...]) -> str:
    """``'a', 'b'``: names of the vocabulary as SQL string literals (they hold no quote)."""
    return ", ".join(f"'{name}'" for name in names)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {  # noqa: RUF012 - SQLAlchemy reads this class attribute
        dt.datetime: DateTime(timezone=True),
        float: Double(),
        str: Text(),
        int: Integer(),
        uuid.UUID: Uuid(),
        JSONDoc: JSONB(),
        list[Any]: JSONB(),
        Any: JSONB(),
    }


class Experiment(Base):
    __tablename__ = "experiments"
    __table_args__ = (UniqueConstraint("name", "spec_sha256"),)

    id: Mapped[intpk]
    name: Mapped[str]
    # NULL when the run records carried no spec text and the spec file was missing or had changed.
    spec_text: Mapped[str | None]
    spec_sha256: Mapped[str]
    git_rev: Mapped[str | None]
    created_at: Mapped[created_ts]
    # An experiment rerun from a bundle (``demuxlab bundle rerun``): the original experiment.
    rerun_of_id: Mapped[int | None] = mapped_column(ForeignKey("experiments.id", ondelete="SET NULL"))

    points: Mapped[list[Point]] = relationship(back_populates="experiment", passive_deletes=True)


class Host(Base):
    __tablename__ = "hosts"

    id: Mapped[intpk]
    hostname: Mapped[str]
    facts: Mapped[JSONDoc]
    # sha256 of the canonical JSON of the facts without ``collected_at``: one row per distinct machine state.
    facts_sha256: Mapped[str] = mapped_column(unique=True)
    numa_nodes: Mapped[int | None]
    sockets: Mapped[int | None]
    cores: Mapped[int | None]
    threads_per_core: Mapped[int | None]
    smt: Mapped[bool | None]
    governor: Mapped[str | None]
    turbo: Mapped[bool | None]
    irqbalance: Mapped[bool | None]
    kernel: Mapped[str | None]
    cpu_model: Mapped[str | None]
    first_seen: Mapped[created_ts]


class Point(Base):
    __tablename__ = "points"
    # The unique constraint's index also serves "points by experiment".
    __table_args__ = (UniqueConstraint("experiment_id", "point_key"),)

    id: Mapped[intpk]
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    point_key: Mapped[str]
    pattern: Mapped[str]
    notifier: Mapped[str]
    threads: Mapped[int]
    work_us: Mapped[float]
    connections: Mapped[int]
    msg_size: Mapped[int]
    client_threads: Mapped[int]
    rate: Mapped[float | None]
    # A calibration point (seed 001 §V-A): its runs were instrumented; its key ends in ``/instr``.
    instrument: Mapped[bool] = mapped_column(server_default=false())

    experiment: Mapped[Experiment] = relationship(back_populates="points")
    runs: Mapped[list[Run]] = relationship(back_populates="point", passive_deletes=True)


class Run(Base):
    __tablename__ = "runs"
    # The unique constraint's index also serves "runs by point".
    __table_args__ = (
        UniqueConstraint("point_id", "repeat_index"),
        CheckConstraint(f"status IN ({_sql_list(RUN_STATUSES)})", name="status"),
        CheckConstraint(f"status = '{RUN_OK}' OR failure_reason IS NOT NULL", name="failure_reason"),
        Index(None, "server_host_id"),
        Index(None, "client_host_id"),
        Index(None, "host_pair"),
        Index(None, "slurm_job_id"),
    )

    run_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    point_id: Mapped[int] = mapped_column(ForeignKey("points.id", ondelete="CASCADE"))
    repeat_index: Mapped[int]
    attempt: Mapped[int]
    status: Mapped[str]
    failure_reason: Mapped[str | None]
    started_at: Mapped[dt.datetime]
    finished_at: Mapped[dt.datetime | None]
    launcher: Mapped[str | None]
    host_pair: Mapped[str | None]
    server_host_id: Mapped[int | None] = mapped_column(ForeignKey("hosts.id"))
    client_host_id: Mapped[int | None] = mapped_column(ForeignKey("hosts.id"))
    pinning: Mapped[JSONDoc | None]
    oversubscribed: Mapped[bool | None]
    server_artifact: Mapped[JSONDoc | None]
    client_artifact: Mapped[JSONDoc | None]
    warmup_s: Mapped[float]
    measure_s: Mapped[float]
    cooldown_s: Mapped[float]
    throughput_msgs_per_s: Mapped[float | None]
    stationary: Mapped[bool | None]
    drift_rel: Mapped[float | None]
    latency_us: Mapped[JSONDoc | None]
    client_cpu_user_s: Mapped[float | None]
    client_cpu_sys_s: Mapped[float | None]
    server_cpu_user_s: Mapped[float | None]
    server_cpu_sys_s: Mapped[float | None]
    server_messages: Mapped[int | None] = mapped_column(BigInteger)
    client_messages: Mapped[int | None] = mapped_column(BigInteger)
    errors: Mapped[int | None] = mapped_column(BigInteger)
    orchestration_s: Mapped[float | None]
    # The client's JSON without ``per_second`` (that lives in ``samples``); the server's exit JSON as is.
    client_result: Mapped[JSONDoc | None]
    server_result: Mapped[JSONDoc | None]
    ingested_at: Mapped[created_ts]
    # Cluster runs (0004_cluster): the pair's hardware class id, and the pre-run noise check.
    hardware_class: Mapped[str | None]
    noisy: Mapped[bool | None]
    noise: Mapped[JSONDoc | None]
    # Runs of the slurm profile (0006_slurm): the Slurm job that ran the run, and the record's slurm section.
    slurm_job_id: Mapped[int | None] = mapped_column(BigInteger)
    slurm: Mapped[JSONDoc | None]
    # The kernel's counters over the measure phase (0008_costs): the record's ``costs`` as is (per-message
    # rows in ``run_costs``), and whether a validity check failed (``run_checks``; NULL: not checked).
    costs: Mapped[JSONDoc | None]
    flagged: Mapped[bool | None]

    point: Mapped[Point] = relationship(back_populates="runs")
    samples: Mapped[list[Sample]] = relationship(back_populates="run", passive_deletes=True)
    op_timings: Mapped[list[OpTiming]] = relationship(back_populates="run", passive_deletes=True)
    run_costs: Mapped[list[RunCost]] = relationship(back_populates="run", passive_deletes=True)
    checks: Mapped[list[RunCheck]] = relationship(back_populates="run", passive_deletes=True)


class Sample(Base):
    __tablename__ = "samples"
    __table_args__ = (
        CheckConstraint("second >= 0", name="second"),
        CheckConstraint("throughput_msgs_per_s >= 0", name="throughput"),
    )

    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True)
    second: Mapped[int] = mapped_column(primary_key=True)
    throughput_msgs_per_s: Mapped[float]

    run: Mapped[Run] = relationship(back_populates="samples")


class RunCost(Base):
    """One side's cost of a run in the kernel's terms (``demuxlab.costs``): a counter's delta over the
    measure phase and per message, or why the host could not say (``unavailable``; both values NULL)."""

    __tablename__ = "run_costs"
    __table_args__ = (
        CheckConstraint("side IN ('server', 'client')", name="side"),
        CheckConstraint(
            "(unavailable IS NULL) OR (value IS NULL AND per_message IS NULL)", name="unavailable"
        ),
        Index(None, "metric", "side"),
    )

    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True)
    side: Mapped[str] = mapped_column(primary_key=True)
    metric: Mapped[str] = mapped_column(primary_key=True)
    value: Mapped[float | None]
    per_message: Mapped[float | None]
    unavailable: Mapped[str | None]

    run: Mapped[Run] = relationship(back_populates="run_costs")


class RunCheck(Base):
    """A validity check of a run (``demuxlab.validity``): its verdict and why; a ``fail`` flags the run."""

    __tablename__ = "run_checks"
    __table_args__ = (CheckConstraint(f"verdict IN ({_sql_list(CHECK_VERDICTS)})", name="verdict"),)

    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True)
    check: Mapped[str] = mapped_column(primary_key=True)
    verdict: Mapped[str]
    reason: Mapped[str]
    value: Mapped[float | None]

    run: Mapped[Run] = relationship(back_populates="checks")


class RunHistory(Base):
    """An earlier record of a run, kept when a different record of the same ``run_id`` replaced it
    (``demuxlab ingest --replace``, the workflow ingesting a run it ran again, a bundle import whose run
    differs): nothing ingested is lost.

    ``run`` is the ``runs`` row as it was (every column, as ``to_jsonb`` gives it), ``samples`` its
    per-second series (index = second), ``op_timings`` its timing rows (without their ids). A row
    follows its point (CASCADE), as the run itself would.
    """

    __tablename__ = "runs_history"
    __table_args__ = (Index(None, "run_id"),)

    id: Mapped[intpk]
    run_id: Mapped[uuid.UUID]
    point_id: Mapped[int] = mapped_column(ForeignKey("points.id", ondelete="CASCADE"))
    repeat_index: Mapped[int]
    attempt: Mapped[int]
    status: Mapped[str]
    started_at: Mapped[dt.datetime]
    # When the replaced record had been ingested, and when it was replaced.
    ingested_at: Mapped[dt.datetime]
    replaced_at: Mapped[created_ts]
    # Who replaced it and from where: "ingest --replace: <file>", "workflow rerun: <file>", "bundle import".
    replaced_by: Mapped[str]
    run: Mapped[JSONDoc]
    samples: Mapped[list[float]] = mapped_column(ARRAY(Double()))
    op_timings: Mapped[list[Any]]


class OpTiming(Base):
    """One operation's timing summary of a run.

    ``events`` is NULL for the all-calls row of an operation (from the server's ``ops``) and 1…64 for the
    ``notify`` rows from ``notify_by_events`` (exact counts; 64 = a full cache); the unique key treats NULLs
    as equal.
    """

    __tablename__ = "op_timings"
    __table_args__ = (
        UniqueConstraint("run_id", "op", "events", postgresql_nulls_not_distinct=True),
        CheckConstraint("events IS NULL OR events >= 0", name="events"),
    )

    id: Mapped[intpk]
    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("runs.run_id", ondelete="CASCADE"))
    op: Mapped[str]
    events: Mapped[int | None]
    count: Mapped[int] = mapped_column(BigInteger)
    total_ns: Mapped[int | None] = mapped_column(BigInteger)
    mean_ns: Mapped[float | None]
    p50_ns: Mapped[int | None] = mapped_column(BigInteger)
    p90_ns: Mapped[int | None] = mapped_column(BigInteger)
    p99_ns: Mapped[int | None] = mapped_column(BigInteger)
    p999_ns: Mapped[int | None] = mapped_column(BigInteger)
    max_ns: Mapped[int | None] = mapped_column(BigInteger)

    run: Mapped[Run] = relationship(back_populates="op_timings")


class Calibration(Base):
    """Model rates fitted from instrumented runs (per-µs rates r_l … r_e; r_e may be a table by events)."""

    __tablename__ = "calibrations"
    __table_args__ = (Index(None, "pattern", "notifier"),)

    id: Mapped[intpk]
    pattern: Mapped[str]
    notifier: Mapped[str]
    host_id: Mapped[int | None] = mapped_column(ForeignKey("hosts.id"))
    rates: Mapped[JSONDoc]
    source_runs: Mapped[list[Any]]
    artifacts: Mapped[JSONDoc]
    method: Mapped[str]
    created_at: Mapped[created_ts]


class AdaptiveDecisions(Base):
    """What an adaptive experiment decided (``demuxlab adaptive decisions``, docs/adaptive.md): its rounds
    and every point of its grid, measured (and why) or model-only, as the document ``decisions.json``
    (CONTRACTS.md §7a). One row per experiment (spec version), replaced when stored again; readers (the
    dashboard) draw model-only points from it, never as measured."""

    __tablename__ = "adaptive_decisions"

    experiment_id: Mapped[int] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True
    )
    decisions: Mapped[JSONDoc]
    stored_at: Mapped[created_ts]


class Prediction(Base):
    """A model's throughput for a point; ``calibration_id`` NULL means the paper's rates."""

    __tablename__ = "predictions"
    __table_args__ = (
        UniqueConstraint(
            "point_id", "rates_source", "calibration_id", "method", postgresql_nulls_not_distinct=True
        ),
        CheckConstraint("rates_source IN ('paper', 'calibration')", name="rates_source"),
        CheckConstraint("method IN ('ssa', 'fluid', 'exact')", name="method"),
        CheckConstraint(
            "(rates_source = 'paper') = (calibration_id IS NULL)", name="calibration_matches_source"
        ),
        Index(None, "calibration_id"),
    )

    id: Mapped[intpk]
    point_id: Mapped[int] = mapped_column(ForeignKey("points.id", ondelete="CASCADE"))
    calibration_id: Mapped[int | None] = mapped_column(ForeignKey("calibrations.id", ondelete="CASCADE"))
    rates_source: Mapped[str]
    method: Mapped[str]
    parameters: Mapped[JSONDoc]
    throughput_msgs_per_s: Mapped[float]
    ci_halfwidth_rel: Mapped[float | None]
    created_at: Mapped[created_ts]

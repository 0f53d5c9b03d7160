"""A record whose ``run_id`` is already stored (docs/CONTRACTS.md §5): the same rows are a no-op, a
different record is refused, unless the caller replaces on purpose; the record replaced is kept in
``runs_history``, so nothing ingested is lost.

"The same" means the record would store exactly what is stored: the run's columns (all but
``ingested_at``), its hosts, its per-second samples and its op timings. What ingest does not store (a
host's ``collected_at``, ``experiment.git_rev`` after the first run) does not count.

Who may replace (:data:`Replace`):

- ``"never"``: ``demuxlab ingest`` (the default). A different record is refused with one line naming the
  run and what differs.
- ``"always"``: ``demuxlab ingest --replace``: the user says so.
- ``"rerun"``: the workflow's ingest (:func:`demuxlab.ingest.ingest_for_workflow`). Its records are the
  outputs of its own ``run_point`` jobs, so a different record of a stored run is the run executed again
  (a retry, a forced or resumed rerun, a run whose code or parameters changed). It replaces when its
  ``started_at`` is later than the stored run's: a later execution of the run. A record that is not
  later (edited by hand, restored from a backup, another database's) is refused as with ``"never"``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from sqlalchemy import Connection, select, text

from demuxlab.db.models import OpTiming, Sample
from demuxlab.errors import DemuxlabError
from demuxlab.ingest.record import Prepared

Replace = Literal["never", "rerun", "always"]
REPLACE_POLICIES: tuple[Replace, ...] = ("never", "rerun", "always")
#: How ``runs_history.replaced_by`` names who replaced a run, per policy.
REPLACED_BY: dict[Replace, str] = {"never": "ingest", "rerun": "workflow rerun", "always": "ingest --replace"}


class RunConflict(DemuxlabError):
    """A record of a stored run differs from it and may not replace it: nothing was written."""


# The record field each ``runs`` column comes from (the message speaks of the record, not of the table).
_FIELD_OF_COLUMN = {
    "run_id": "run_id",
    "point_id": "point",
    "repeat_index": "repeat",
    "warmup_s": "phases.warmup_s",
    "measure_s": "phases.measure_s",
    "cooldown_s": "phases.cooldown_s",
    "server_host_id": "hosts.server",
    "client_host_id": "hosts.client",
    "oversubscribed": "pinning.oversubscribed",
    "server_artifact": "artifacts.server",
    "client_artifact": "artifacts.client",
    "throughput_msgs_per_s": "stats.throughput_msgs_per_s",
    "stationary": "stats.stationary",
    "drift_rel": "stats.drift_rel",
    "latency_us": "client.latency_us",
    "client_cpu_user_s": "client.cpu_s.user",
    "client_cpu_sys_s": "client.cpu_s.sys",
    "server_cpu_user_s": "server.cpu_s.user",
    "server_cpu_sys_s": "server.cpu_s.sys",
    "server_messages": "server.messages",
    "client_messages": "client.messages",
    "errors": "client.errors",
    "client_result": "client",
    "server_result": "server",
    "hardware_class": "pair.hardware_class.id",
    "noisy": "noise.flagged",
    "slurm_job_id": "slurm.job_id",
    "costs": "costs",
    "flagged": "the validity checks (runs.flagged)",
}
# What a reader wants to see first: the status and the measurement.
_FIRST = ("status", "failure_reason", "throughput_msgs_per_s")
_NOT_COMPARED = frozenset({"ingested_at"})
# Worked out from the record at ingest (not read from it), in columns added after runs were stored: a run
# stored before them has NULL there, and its identical record ingested again is the same run.
_DERIVED_SINCE = frozenset({"flagged"})
_TIMING_COLUMNS = (
    "op",
    "events",
    "count",
    "total_ns",
    "mean_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p999_ns",
    "max_ns",
)
_SHOWN = 3  # differences named in the message; the rest are counted


def _show(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    text_ = repr(value)
    return text_ if len(text_) <= 40 else text_[:37] + "..."


def _change(column: str, old: Any, new: Any) -> str:
    field = _FIELD_OF_COLUMN.get(column, column)
    if isinstance(old, dict | list) or isinstance(new, dict | list) or column.endswith("_host_id"):
        return f"{field} changed"
    return f"{field} {_show(old)} → {_show(new)}"


def stored_differences(
    conn: Connection, stored: Mapping[str, Any], new_run: Mapping[str, Any], prep: Prepared
) -> list[str]:
    """What the record would change of the stored run ``stored`` (a ``runs`` row); empty: the same rows."""
    changes: list[tuple[int, str]] = []
    for column, value in new_run.items():
        if column in _NOT_COMPARED:
            continue
        old = stored[column]
        if old is None and column in _DERIVED_SINCE:
            continue
        if old != value:
            rank = _FIRST.index(column) if column in _FIRST else len(_FIRST) + 1
            changes.append((rank, _change(column, old, value)))

    run_id = stored["run_id"]
    old_series = np.asarray(
        conn.execute(
            select(Sample.throughput_msgs_per_s).where(Sample.run_id == run_id).order_by(Sample.second)
        )
        .scalars()
        .all(),
        dtype=np.float64,
    )
    new_series = np.asarray(prep.per_second, dtype=np.float64)
    if len(old_series) != len(new_series):
        changes.append((len(_FIRST), f"client.per_second {len(old_series)} → {len(new_series)} samples"))
    elif not np.array_equal(old_series, new_series):
        differ = int(np.count_nonzero(old_series != new_series))
        changes.append((len(_FIRST), f"client.per_second {differ} of {len(new_series)} samples differ"))

    columns = [OpTiming.__table__.c[c] for c in _TIMING_COLUMNS]
    old_timings = sorted(
        (tuple(row) for row in conn.execute(select(*columns).where(OpTiming.run_id == run_id))), key=repr
    )
    new_timings = sorted((tuple(row[c] for c in _TIMING_COLUMNS) for row in prep.op_rows), key=repr)
    if old_timings != new_timings:
        changes.append((len(_FIRST) + 1, "server.ops/notify_by_events changed"))
    return [text_ for _, text_ in sorted(changes, key=lambda c: c[0])]


def _describe_run(prep: Prepared) -> str:
    return (
        f"run {prep.run_id} (experiment {prep.experiment['name']!r}, point {prep.point['point_key']!r}, "
        f"repeat {prep.run['repeat_index']})"
    )


def refuse_or_allow(
    prep: Prepared, stored: Mapping[str, Any], differences: Sequence[str], replace: Replace
) -> None:
    """Raise :class:`RunConflict` unless ``replace`` lets this record replace the different ``stored`` run."""
    if replace == "always":
        return
    started: dt.datetime = prep.run["started_at"]
    if replace == "rerun" and started > stored["started_at"]:
        return
    shown = ", ".join(differences[:_SHOWN])
    more = f" (and {len(differences) - _SHOWN} more)" if len(differences) > _SHOWN else ""
    if replace == "rerun":
        why = (
            f"and this record is not a later run of it (started_at {_show(started)}, the stored run's "
            f"{_show(stored['started_at'])}) though it differs"
        )
    else:
        why = "and this record differs"
    hint = "`demuxlab ingest --replace` replaces it, keeping the stored one in runs_history"
    raise RunConflict(
        f"{prep.source}: {_describe_run(prep)} is already stored, {why}: {shown}{more}; nothing written "
        f"({hint})"
    )


def keep_in_history(conn: Connection, run_ids: Sequence[uuid.UUID], replaced_by: str) -> list[int]:
    """Copy the stored runs ``run_ids`` (their row, samples and op timings) into ``runs_history``."""
    if not run_ids:
        return []
    rows = conn.execute(
        text(
            """
            INSERT INTO runs_history (run_id, point_id, repeat_index, attempt, status, started_at,
                                      ingested_at, replaced_by, run, samples, op_timings)
            SELECT r.run_id, r.point_id, r.repeat_index, r.attempt, r.status, r.started_at, r.ingested_at,
                   :replaced_by, to_jsonb(r),
                   COALESCE((SELECT array_agg(s.throughput_msgs_per_s ORDER BY s.second)
                             FROM samples s WHERE s.run_id = r.run_id), '{}'),
                   COALESCE((SELECT jsonb_agg(to_jsonb(o) - 'id' - 'run_id'
                                              ORDER BY o.op, o.events NULLS FIRST)
                             FROM op_timings o WHERE o.run_id = r.run_id), '[]')
            FROM runs r WHERE r.run_id = ANY(:run_ids)
            ORDER BY r.run_id
            RETURNING id
            """
        ),
        {"replaced_by": replaced_by, "run_ids": list(run_ids)},
    )
    return [int(row[0]) for row in rows]


def drop_unchanged_history(conn: Connection, history_ids: Sequence[int]) -> int:
    """Of the ``runs_history`` rows ``history_ids`` (kept just before their runs were written anew in this
    transaction), delete those whose run is now stored exactly as kept (row but ``ingested_at``, samples,
    op timings): nothing was replaced there. Returns how many rows remain: the runs really replaced."""
    if not history_ids:
        return 0
    conn.execute(
        text(
            """
            DELETE FROM runs_history h USING runs r
            WHERE h.id = ANY(:ids) AND r.run_id = h.run_id
              AND h.run - 'ingested_at' = to_jsonb(r) - 'ingested_at'
              AND h.samples = COALESCE((SELECT array_agg(s.throughput_msgs_per_s ORDER BY s.second)
                                        FROM samples s WHERE s.run_id = r.run_id), '{}')
              AND h.op_timings = COALESCE((SELECT jsonb_agg(to_jsonb(o) - 'id' - 'run_id'
                                                            ORDER BY o.op, o.events NULLS FIRST)
                                           FROM op_timings o WHERE o.run_id = r.run_id), '[]')
            """
        ),
        {"ids": list(history_ids)},
    )
    remaining = conn.execute(
        text("SELECT count(*) FROM runs_history WHERE id = ANY(:ids)"), {"ids": list(history_ids)}
    ).scalar_one()
    return int(remaining)

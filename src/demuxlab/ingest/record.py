"""A run record checked and shaped into rows: pure functions of plain values (no database, no files).

:func:`parse_record` turns a record's bytes into JSON (UTF-8, no duplicate keys, bounded nesting);
:func:`prepare_record` checks it completely (every value finite, the schema of :mod:`.schema`, the point's
key and the run id rule, timestamps in order, the per-second series) and shapes it into the rows of
``experiments``, ``hosts``, ``points``, ``runs`` and ``op_timings``. A problem is one
:class:`DemuxlabError` line naming the source, the field and the value.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from demuxlab.costs import run_costs
from demuxlab.errors import DemuxlabError
from demuxlab.ingest.schema import FORMAT, MAX_RECORD_DEPTH, RECORD_SCHEMA
from demuxlab.point import Point
from demuxlab.spec.expand import run_id_of
from demuxlab.spec.problems import text_problem
from demuxlab.spec.schema import StrictValidator
from demuxlab.validity import flagged, run_checks
from demuxlab.vocab import RUN_OK

# The spec's strict types: an integer is not 2.0, a number is finite.
_VALIDATOR = StrictValidator(RECORD_SCHEMA)


@dataclass(frozen=True)
class Prepared:
    """A validated record, already shaped into rows."""

    source: str
    run_id: uuid.UUID
    experiment: dict[str, Any]
    spec_text: str | None
    point: dict[str, Any]
    hosts: dict[str, dict[str, Any] | None]
    run: dict[str, Any]
    per_second: Sequence[float]
    op_rows: list[dict[str, Any]]
    # The run's costs per message (run_costs) and its validity checks (run_checks), derived from the record.
    cost_rows: list[dict[str, Any]] = field(default_factory=list)
    check_rows: list[dict[str, Any]] = field(default_factory=list)


def _field(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<record>"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fail(source: str, field: str, problem: str) -> DemuxlabError:
    return DemuxlabError(f"{source}: field {field}: {problem}")


def _schema_error(source: str, record: Any) -> DemuxlabError | None:
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(record))
    if error is None:
        return None
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        return _fail(source, _field([*path, missing[0]]), "missing")
    if error.validator == "type":
        expected = error.validator_value
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        return _fail(source, _field(path), f"expected {wanted}, got {_short(error.instance)}")
    return _fail(
        source,
        _field(path),
        f"{_short(error.instance)} is invalid ({error.validator}: {_short(error.validator_value)})",
    )


def _timestamp(source: str, field: str, value: str) -> dt.datetime:
    try:
        stamp = dt.datetime.fromisoformat(value)
    except ValueError:
        raise _fail(source, field, f"not an ISO 8601 timestamp: {_short(value)}") from None
    # The launchers write UTC; a naive stamp is taken as UTC rather than the ingesting host's zone.
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=dt.UTC)


def _int(value: Any) -> int | None:
    return round(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _typed(value: Any, kind: type) -> Any:
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return value if isinstance(value, kind) else None


def facts_sha256(facts: Mapping[str, Any]) -> str:
    """The identity of a host's facts: sha256 of their canonical JSON without the volatile facts
    (``collected_at``, ``load``)."""
    stable = {k: v for k, v in facts.items() if k not in ("collected_at", "load")}
    text = json.dumps(stable, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def host_row(facts: dict[str, Any]) -> dict[str, Any]:
    nodes = facts.get("numa_nodes")
    return {
        "hostname": facts["hostname"],
        "facts": facts,
        "facts_sha256": facts_sha256(facts),
        "numa_nodes": len(nodes) if isinstance(nodes, list) else _typed(nodes, int),
        "sockets": _typed(facts.get("sockets"), int),
        "cores": _typed(facts.get("cores"), int),
        "threads_per_core": _typed(facts.get("threads_per_core"), int),
        "smt": _typed(facts.get("smt"), bool),
        "governor": _typed(facts.get("governor"), str),
        "turbo": _typed(facts.get("turbo"), bool),
        "irqbalance": _typed(facts.get("irqbalance"), bool),
        "kernel": _typed(facts.get("kernel"), str),
        "cpu_model": _typed(facts.get("cpu_model"), str),
    }


def _check_series(source: str, per_second: list[Any]) -> None:
    for i, value in enumerate(per_second):
        if type(value) not in (float, int) or not math.isfinite(value) or value < 0:
            raise _fail(
                source, f"client.per_second[{i}]", f"expected a finite number >= 0, got {_short(value)}"
            )


def _check_values(source: str, record: Any) -> None:
    """Every number finite, every key a string, every string (keys included) Unicode text that can be
    stored, nesting bounded (records may come as Python objects)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(record, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_RECORD_DEPTH:
            raise _fail(source, _field(path[:8]) + "…", f"nested more than {MAX_RECORD_DEPTH} levels deep")
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise _fail(source, _field(path), f"key {_short(k)} is not a string")
                bad_key = text_problem(k)
                if bad_key is not None:  # such a key cannot be part of a printed field path
                    raise _fail(source, _field(path), f"a key is {bad_key}")
                stack.append((v, (*path, k)))
        elif isinstance(value, list | tuple):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
        elif isinstance(value, str):
            bad = text_problem(value)
            if bad is not None:
                raise _fail(source, _field(path), bad)
        elif isinstance(value, float) and not math.isfinite(value):
            raise _fail(source, _field(path), f"{value} is not a finite number")


#: How far an ok record's throughput may be from the mean of its kept samples: rounding where a producer
#: printed it (0.01 %, or 0.01 msg/s near zero), far below the run-to-run noise of any measurement.
THROUGHPUT_TOLERANCE_REL = 1e-4


def expected_samples(measure_s: float) -> int:
    """How many per-second samples the client reports over a measure phase (CONTRACTS.md §2): one per
    whole second measured, and one for a phase under a second."""
    return max(1, math.floor(measure_s))


def _check_evidence(source: str, record: dict[str, Any], per_second: Sequence[float]) -> None:
    """An ``ok`` record carries the evidence its status claims: the client's per-second samples over the
    whole measure phase, and a throughput that is the mean of those it kept (``stats``)."""
    if record["status"] != RUN_OK:
        return
    measure_s = record["phases"]["measure_s"]
    if not measure_s > 0:
        raise _fail(source, "phases.measure_s", f"{measure_s!r}, but status ok claims a measured run (> 0 s)")
    if not isinstance(record.get("client"), dict):
        raise _fail(source, "client", "missing, but status ok claims the client's result and its samples")
    over = f"measure_s {measure_s:g}"
    steady = record.get("steady_stop")
    if isinstance(steady, dict) and steady.get("stopped_early") is True:
        # An adaptive run that ended when steady (docs/adaptive.md) measured fewer seconds than its phase.
        measured = steady.get("measured_s")
        if (
            isinstance(measured, bool)
            or not isinstance(measured, int | float)
            or not 1 <= measured <= measure_s
        ):
            raise _fail(
                source,
                "steady_stop.measured_s",
                f"{_short(measured)}, but a run that stopped early measured 1 to measure_s {measure_s:g} s",
            )
        measure_s, over = measured, f"steady_stop.measured_s {measured:g}"
    expected = expected_samples(measure_s)
    if len(per_second) != expected:
        raise _fail(
            source,
            "client.per_second",
            f"{len(per_second)} samples, but status ok over {over} claims {expected} "
            "(one per second measured)",
        )
    stats: dict[str, Any] = record.get("stats") or {}
    throughput = stats.get("throughput_msgs_per_s")
    if throughput is None:
        raise _fail(
            source,
            "stats.throughput_msgs_per_s",
            "missing, but status ok claims a throughput (the steady state of client.per_second)",
        )
    trimmed = stats.get("trimmed_seconds") or 0
    if trimmed >= len(per_second):
        raise _fail(
            source,
            "stats.trimmed_seconds",
            f"{trimmed}, but client.per_second holds {len(per_second)} samples (a run keeps at least one)",
        )
    kept = per_second[trimmed:]
    mean = math.fsum(kept) / len(kept)
    if abs(throughput - mean) > THROUGHPUT_TOLERANCE_REL * max(abs(mean), 100.0):
        raise _fail(
            source,
            "stats.throughput_msgs_per_s",
            f"{throughput!r} is not what client.per_second[{trimmed}:] gives (their mean is {mean:.10g})",
        )


def _check_identity(source: str, record: dict[str, Any], run_id: uuid.UUID) -> None:
    """The point's fields make its key, and the run id is the rule over (experiment, spec, point, repeat)."""
    point = record["point"]
    try:
        key: str | None = Point.from_json(point).point_key
    except (TypeError, ValueError, OverflowError):
        key = None
    if key != point["point_key"]:
        raise _fail(
            source,
            "point.point_key",
            f"{_short(point['point_key'])} does not match the point's fields (they make {_short(key)})",
        )
    exp = record["experiment"]
    expected = run_id_of(exp["name"], exp["spec_sha256"], point["point_key"], record["repeat"])
    if str(run_id) != expected:
        raise _fail(
            source,
            "run_id",
            f"{run_id} is not the id of experiment {_short(exp['name'])}, spec {exp['spec_sha256'][:12]}…, "
            f"point {_short(point['point_key'])}, repeat {record['repeat']} (expected {expected})",
        )


def prepare_record(
    record: Any,
    source: str = "<record>",
    find_spec_text: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> Prepared:
    """Validate a run record and shape it into rows; raise :class:`DemuxlabError` naming the field.

    ``find_spec_text`` gives the spec as it was run from the record's (checked) ``experiment``
    (:func:`demuxlab.ingest.files.spec_text` looks for the file); without it, the record's own
    ``experiment.spec_text``."""
    run_id, started, finished_at = _checked(source, record)
    client: dict[str, Any] = record.get("client") or {}
    server: dict[str, Any] = record.get("server") or {}
    per_second: list[Any] = client.get("per_second") or []
    _check_series(source, per_second)
    _check_evidence(source, record, per_second)
    seen_events: set[int] = set()
    for i, row in enumerate(server.get("notify_by_events") or []):
        if row["events"] in seen_events:
            raise _fail(source, f"server.notify_by_events[{i}].events", f"duplicate value {row['events']}")
        seen_events.add(row["events"])

    hosts_doc: dict[str, Any] = record.get("hosts") or {}
    hosts = {
        role: host_row(hosts_doc[role]) if hosts_doc.get(role) else None for role in ("server", "client")
    }
    run = _run_row(record, run_id, started, finished_at)
    op_rows = _op_rows(server, run_id)
    cooldown_s = (record.get("phases") or {}).get("cooldown_s")
    costs = [
        {"run_id": run_id, **c.to_row()}
        for c in run_costs(record.get("costs"), run["throughput_msgs_per_s"], cooldown_s)
    ]
    checks = run_checks(record)
    run["flagged"] = flagged(checks) if checks else None
    check_rows = [{"run_id": run_id, **c.to_row()} for c in checks]
    experiment = record["experiment"]
    return Prepared(
        source=source,
        run_id=run_id,
        experiment={
            "name": experiment["name"],
            "spec_sha256": experiment["spec_sha256"],
            "git_rev": experiment.get("git_rev"),
        },
        spec_text=(find_spec_text or embedded_spec_text)(experiment),
        point={
            **{k: record["point"][k] for k in RECORD_SCHEMA["properties"]["point"]["required"]},
            "instrument": bool(record["point"].get("instrument", False)),
        },
        hosts=hosts,
        run=run,
        per_second=per_second,
        op_rows=op_rows,
        cost_rows=costs,
        check_rows=check_rows,
    )


def _checked(source: str, record: Any) -> tuple[uuid.UUID, dt.datetime, dt.datetime | None]:
    """The record's format, values, schema, identity and timestamps checked; its run id, start and end."""
    if not isinstance(record, dict):
        raise _fail(source, "<record>", f"expected a JSON object, got {type(record).__name__}")
    fmt = record.get("format")
    if fmt != FORMAT:
        problem = "missing" if fmt is None else f"unknown format {_short(fmt)} (expected {FORMAT!r})"
        raise _fail(source, "format", problem)
    _check_values(source, record)
    error = _schema_error(source, record)
    if error is not None:
        raise error
    try:
        run_id = uuid.UUID(record["run_id"])
    except ValueError:
        raise _fail(source, "run_id", f"not a UUID: {_short(record['run_id'])}") from None
    _check_identity(source, record, run_id)
    started = _timestamp(source, "started_at", record["started_at"])
    finished = record.get("finished_at")
    finished_at = _timestamp(source, "finished_at", finished) if finished is not None else None
    if finished_at is not None and finished_at < started:
        raise _fail(
            source, "finished_at", f"{_short(finished)} is before started_at {_short(record['started_at'])}"
        )
    return run_id, started, finished_at


def _run_row(
    record: dict[str, Any], run_id: uuid.UUID, started: dt.datetime, finished_at: dt.datetime | None
) -> dict[str, Any]:
    """The ``runs`` row of a checked record."""
    client: dict[str, Any] = record.get("client") or {}
    server: dict[str, Any] = record.get("server") or {}
    stats: dict[str, Any] = record.get("stats") or {}
    pinning = record.get("pinning")
    artifacts: dict[str, Any] = record.get("artifacts") or {}
    phases = record["phases"]
    client_cpu: dict[str, Any] = client.get("cpu_s") or {}
    server_cpu: dict[str, Any] = server.get("cpu_s") or {}
    throughput = stats.get("throughput_msgs_per_s")
    if throughput is None:
        throughput = client.get("throughput_msgs_per_s")
    return {
        "run_id": run_id,
        "repeat_index": record["repeat"],
        "attempt": record["attempt"],
        "status": record["status"],
        "failure_reason": record.get("failure_reason"),
        "started_at": started,
        "finished_at": finished_at,
        "launcher": record.get("launcher"),
        "host_pair": record.get("host_pair"),
        "pinning": pinning,
        "oversubscribed": pinning.get("oversubscribed") if pinning else None,
        "server_artifact": artifacts.get("server"),
        "client_artifact": artifacts.get("client"),
        "warmup_s": phases["warmup_s"],
        "measure_s": phases["measure_s"],
        "cooldown_s": phases["cooldown_s"],
        "throughput_msgs_per_s": throughput,
        "stationary": stats.get("stationary"),
        "drift_rel": stats.get("drift_rel"),
        "latency_us": client.get("latency_us"),
        "client_cpu_user_s": client_cpu.get("user"),
        "client_cpu_sys_s": client_cpu.get("sys"),
        "server_cpu_user_s": server_cpu.get("user"),
        "server_cpu_sys_s": server_cpu.get("sys"),
        "server_messages": server.get("messages"),
        "client_messages": client.get("messages"),
        "errors": client.get("errors"),
        "orchestration_s": record.get("orchestration_s"),
        # The series goes to ``samples``; keeping it here too would double the run's size.
        "client_result": {k: v for k, v in client.items() if k != "per_second"}
        if record.get("client")
        else None,
        "server_result": record.get("server"),
        "hardware_class": ((record.get("pair") or {}).get("hardware_class") or {}).get("id"),
        "noisy": (record.get("noise") or {}).get("flagged"),
        "noise": record.get("noise"),
        "slurm_job_id": (record.get("slurm") or {}).get("job_id"),
        "slurm": record.get("slurm"),
        "costs": record.get("costs"),
    }


def _op_rows(server: dict[str, Any], run_id: uuid.UUID) -> list[dict[str, Any]]:
    """The ``op_timings`` rows: one per operation, one per notifier batch size."""
    op_rows: list[dict[str, Any]] = []
    for name, op in (server.get("ops") or {}).items():
        op_rows.append(
            {
                "run_id": run_id,
                "op": name,
                "events": None,
                "count": op["count"],
                "total_ns": _int(op.get("total_ns")),
                "mean_ns": op.get("mean_ns"),
                **{k: _int(op.get(k)) for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")},
            }
        )
    for row in server.get("notify_by_events") or []:
        op_rows.append(
            {
                "run_id": run_id,
                "op": "notify",
                "events": row["events"],
                "count": row["count"],
                "total_ns": None,
                "mean_ns": row.get("mean_ns"),
                **dict.fromkeys(("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")),
            }
        )
    return op_rows


def embedded_spec_text(experiment: Mapping[str, Any]) -> str | None:
    """The spec text a record carries, if any."""
    text = experiment.get("spec_text")
    return text if isinstance(text, str) else None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {_short(key)}")
            seen.add(key)
    return out


def parse_record(raw: bytes, source: str) -> Any:
    """JSON as run records are written: UTF-8, no duplicate keys, bounded nesting."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DemuxlabError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    try:
        # NaN and Infinity parse (to be refused by field in prepare_record); duplicate keys do not.
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise DemuxlabError(
            f"{source}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError as exc:  # from the hooks
        raise DemuxlabError(f"{source}: not a valid run record: {exc}") from None
    except RecursionError:
        raise DemuxlabError(f"{source}: not a valid run record: JSON nested too deeply") from None

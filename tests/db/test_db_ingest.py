"""Ingest of run records: content, idempotence, replacement, atomicity, validation, concurrency."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.orm import Session

from demuxlab.db.engine import get_engine
from demuxlab.db.models import Experiment, Host, OpTiming, Point, Run, Sample
from demuxlab.errors import DatabaseError, DemuxlabError
from demuxlab.ingest import (
    facts_sha256,
    ingest_files,
    ingest_for_workflow,
    ingest_run_record,
)
from demuxlab.report import point_summaries
from demuxlab.spec import run_id_of

pytestmark = pytest.mark.postgres

MakeRecord = Callable[..., dict[str, Any]]
WriteRecord = Callable[[dict[str, Any]], Path]
TABLES = (Experiment, Host, Point, Run, Sample, OpTiming)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    eng = create_engine(database_url)
    yield eng
    eng.dispose()


def with_samples(record: dict[str, Any], samples: list[float]) -> None:
    """An ok record whose evidence is ``samples``: one per second measured, the throughput their mean."""
    record["client"]["per_second"] = samples
    record["phases"]["measure_s"] = len(samples)
    record["stats"].update(throughput_msgs_per_s=sum(samples) / len(samples), trimmed_seconds=0)


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            t.__tablename__: conn.execute(select(func.count()).select_from(t)).scalar_one() for t in TABLES
        }


def test_ingest_ok_and_failed_records(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    ok, failed = make_record(repeat=0), make_record(repeat=1, status="failed")
    results = ingest_files([write_record(ok), write_record(failed)])

    assert [r.status for r in results] == ["ok", "failed"]
    assert results[0].samples == len(ok["client"]["per_second"])
    n_ops = len(ok["server"]["ops"]) + len(ok["server"]["notify_by_events"])
    assert results[0].op_timings == n_ops
    assert results[1].samples == 0 and results[1].op_timings == 0
    assert results[0].point_id == results[1].point_id
    assert counts(engine) == {
        "experiments": 1,
        "hosts": 2,
        "points": 1,
        "runs": 2,
        "samples": len(ok["client"]["per_second"]),
        "op_timings": n_ops,
    }

    with Session(engine) as s:
        run = s.get(Run, uuid.UUID(ok["run_id"]))
        assert run is not None
        assert run.throughput_msgs_per_s == ok["stats"]["throughput_msgs_per_s"]
        assert run.server_cpu_sys_s == ok["server"]["cpu_s"]["sys"]
        assert run.client_messages == ok["client"]["messages"]
        assert run.latency_us == ok["client"]["latency_us"]
        assert run.pinning == ok["pinning"]
        assert run.client_artifact == ok["artifacts"]["client"]
        assert run.client_result is not None and "per_second" not in run.client_result
        assert run.started_at.isoformat() == "2026-11-21T12:00:00+00:00"
        series = s.scalars(
            select(Sample.throughput_msgs_per_s).where(Sample.run_id == run.run_id).order_by(Sample.second)
        )
        assert list(series) == ok["client"]["per_second"]

        server_host = s.get(Host, run.server_host_id)
        assert server_host is not None
        facts = ok["hosts"]["server"]
        assert (server_host.hostname, server_host.numa_nodes, server_host.cores) == (
            facts["hostname"],
            len(facts["numa_nodes"]),
            facts["cores"],
        )
        assert server_host.turbo is None and server_host.smt is False
        assert server_host.facts_sha256 == facts_sha256(facts)

        notify = s.execute(
            select(OpTiming.events, OpTiming.count, OpTiming.p99_ns)
            .where(OpTiming.run_id == run.run_id, OpTiming.op == "notify")
            .order_by(OpTiming.events.nulls_first())
        ).all()
        assert notify[0] == (
            None,
            ok["server"]["ops"]["notify"]["count"],
            ok["server"]["ops"]["notify"]["p99_ns"],
        )
        assert [row.events for row in notify[1:]] == [r["events"] for r in ok["server"]["notify_by_events"]]

        bad = s.get(Run, uuid.UUID(failed["run_id"]))
        assert bad is not None
        assert (bad.status, bad.failure_reason, bad.throughput_msgs_per_s) == (
            "failed",
            failed["failure_reason"],
            None,
        )

        exp = s.scalars(select(Experiment)).one()
        assert exp.spec_text == ok["experiment"]["spec_text"]
        assert exp.git_rev == ok["experiment"]["git_rev"]


def contents(engine: Engine) -> dict[str, list[str]]:
    """Every row of every table (the migrations' bookkeeping included), as canonical JSON text."""
    with engine.connect() as conn:
        names = conn.execute(
            text("select tablename from pg_tables where schemaname = 'public' order by tablename")
        ).scalars()
        return {
            name: list(conn.execute(text(f'select to_jsonb(t)::text from "{name}" t order by 1')).scalars())
            for name in list(names)
        }


def test_reingest_is_a_no_op_and_a_different_record_is_refused(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    record = make_record()
    path = write_record(record)
    first = ingest_files([path])[0]
    before = contents(engine)
    again = ingest_files([path])[0]
    assert contents(engine) == before
    assert (first.outcome, again.outcome) == ("ingested", "unchanged")
    assert (first.replaced, again.replaced) == (0, 0)
    assert again.describe().startswith(f"unchanged {path}: run {record['run_id']}")

    # The same machine, collected later: ingest stores the same rows, so this is the same record.
    record["hosts"]["server"]["collected_at"] = "2026-11-22T00:00:00Z"
    assert ingest_files([write_record(record)])[0].outcome == "unchanged"
    assert contents(engine) == before

    # Changed values: refused, naming the run and what differs; nothing written.
    record["client"]["per_second"] = [1000.0, 2000.0, 3000.0] + [2000.0] * 7
    record["stats"]["throughput_msgs_per_s"] = 2000.0
    record["server"]["ops"] = {"notify": record["server"]["ops"]["notify"]}
    changed = write_record(record)
    with pytest.raises(DemuxlabError) as info:
        ingest_files([changed])
    message = info.value.message
    assert message.startswith(f"{changed}: run {record['run_id']} (experiment 'dbtest', point "), message
    assert "stats.throughput_msgs_per_s 81231.4 → 2000.0" in message
    assert "client.per_second 10 of 10 samples differ" in message and "nothing written" in message
    assert "--replace" in message and "\n" not in message
    assert contents(engine) == before


def test_a_run_stored_before_its_validity_column_is_the_same_run(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    """runs.flagged is worked out at ingest (schema 0008): a run stored before it has NULL there, and its
    identical record ingested again is unchanged, not refused as different."""
    record = make_record()
    path = write_record(record)
    ingest_files([path])
    with engine.begin() as conn:
        conn.execute(text("UPDATE runs SET flagged = NULL WHERE run_id = :r"), {"r": record["run_id"]})
    assert ingest_files([path])[0].outcome == "unchanged"


def test_replace_keeps_the_replaced_record_in_history(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    from demuxlab.db.models import RunHistory

    record = make_record()
    old_series = list(record["client"]["per_second"])
    old_timings = len(record["server"]["ops"]) + len(record["server"]["notify_by_events"])
    ingest_files([write_record(record)])
    with Session(engine) as s:
        old_run = s.scalars(select(Run)).one()
        old_ingested_at = old_run.ingested_at
    record["client"]["per_second"] = [1000.0, 2000.0, 3000.0] + [2000.0] * 7
    record["stats"]["throughput_msgs_per_s"] = 2000.0
    record["server"]["ops"] = {"notify": record["server"]["ops"]["notify"]}
    result = ingest_files([path := write_record(record)], replace="always")[0]
    assert (result.outcome, result.replaced, len(result.history_ids)) == ("replaced", 1, 1)
    after = counts(engine)
    assert after["runs"] == 1 and after["samples"] == 10 and after["hosts"] == 2
    assert after["op_timings"] == 1 + len(record["server"]["notify_by_events"])
    with Session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.throughput_msgs_per_s == 2000.0
        kept = s.scalars(select(RunHistory)).one()
        assert kept.id == result.history_ids[0] and str(kept.run_id) == record["run_id"]
        assert kept.replaced_by == f"ingest --replace: {path}"
        assert (kept.status, kept.attempt, kept.ingested_at) == ("ok", 1, old_ingested_at)
        assert kept.samples == old_series
        assert kept.run["throughput_msgs_per_s"] == 81231.4
        assert kept.run["point_id"] == run.point_id and kept.point_id == run.point_id
        assert len(kept.op_timings) == old_timings and {t["op"] for t in kept.op_timings} >= {
            "notify",
            "lock",
        }

    # A new attempt of the same (point, repeat) replaces the run too, when the caller says so.
    record["attempt"] = 2
    with pytest.raises(DemuxlabError, match="attempt 1 → 2"):
        ingest_run_record(get_engine(), record)
    result = ingest_run_record(get_engine(), record, replace="always")
    assert result.replaced == 1
    with Session(engine) as s:
        assert [(str(r.run_id), r.attempt) for r in s.scalars(select(Run))] == [(record["run_id"], 2)]
        assert [h.attempt for h in s.scalars(select(RunHistory).order_by(RunHistory.id))] == [1, 1]


def test_a_batch_with_two_different_records_of_one_run_is_refused(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    record = make_record()
    a, same = write_record(record), write_record(record)
    record["attempt"] = 2
    b = write_record(record)
    with pytest.raises(DemuxlabError, match=f"{b}: run {record['run_id']} is also in {a} of this batch"):
        ingest_files([a, b], replace="always")
    assert all(n == 0 for n in counts(engine).values())
    assert [r.outcome for r in ingest_files([a, same])] == ["ingested", "unchanged"]


def test_failure_mid_ingest_leaves_nothing(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    record = make_record()
    short = make_record()
    with_samples(short, short["client"]["per_second"][:3])
    ingest_run_record(get_engine(), short)
    before = counts(engine)
    with engine.begin() as conn:
        # A real constraint failure during COPY, after the run row has been inserted.
        conn.execute(text("ALTER TABLE samples ADD CONSTRAINT test_at_most_5 CHECK (second < 5)"))

    with pytest.raises(DatabaseError) as info:
        ingest_run_record(get_engine(), record, source="rec.json", replace="always")
    assert "test_at_most_5" in info.value.message and "\n" not in info.value.message
    assert counts(engine) == before  # the earlier version is intact

    # Same for a brand-new experiment: not even its experiment/host/point rows remain.
    other = make_record()
    other["experiment"]["name"] = "other"
    other["hosts"]["server"]["hostname"] = "node-z"
    other["run_id"] = new_run_id(other)
    with pytest.raises(DatabaseError):
        ingest_files([write_record(other)])
    assert counts(engine) == before


def new_run_id(record: dict[str, Any]) -> str:
    """The run id rule over the record's (possibly edited) experiment, point and repeat."""
    exp = record["experiment"]
    return run_id_of(exp["name"], exp["spec_sha256"], record["point"]["point_key"], record["repeat"])


def _drop(record: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        record = record[part]
    del record[last]


def _set(record: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        record = record[part]
    record[last] = value


MALFORMED = [
    ("missing point.threads", lambda r: _drop(r, "point.threads"), "point.threads", "missing"),
    ("threads as string", lambda r: _set(r, "point.threads", "4"), "point.threads", "expected integer"),
    ("unknown format", lambda r: _set(r, "format", "demuxlab.run/9"), "format", "unknown format"),
    ("no format", lambda r: _drop(r, "format"), "format", "missing"),
    ("failed, null reason", lambda r: _set(r, "status", "failed"), "failure_reason", "expected string"),
    (
        "failed, no reason",
        lambda r: (_set(r, "status", "failed"), _drop(r, "failure_reason")),
        "failure_reason",
        "missing",
    ),
    ("bad status", lambda r: _set(r, "status", "meh"), "status", "invalid"),
    ("bad sample", lambda r: r["client"]["per_second"].__setitem__(3, "x"), "client.per_second[3]", "finite"),
    (
        "negative sample",
        lambda r: r["client"]["per_second"].__setitem__(0, -1.0),
        "client.per_second[0]",
        ">= 0",
    ),
    ("bad timestamp", lambda r: _set(r, "started_at", "yesterday"), "started_at", "ISO 8601"),
    ("bad run id", lambda r: _set(r, "run_id", "not-a-uuid"), "run_id", "UUID"),
    # The names are demuxlab.vocab's (the database keeps no list of them: test_db_schema.py).
    ("unknown notifier", lambda r: _set(r, "point.notifier", "kqueue"), "point.notifier", "(enum: ["),
    ("unknown pattern", lambda r: _set(r, "point.pattern", "actor"), "point.pattern", "(enum: ["),
    (
        "bad op count",
        lambda r: _set(r, "server.ops.lock.count", 1.5),
        "server.ops.lock.count",
        "expected integer",
    ),
    (
        "duplicate events",
        lambda r: r["server"]["notify_by_events"].append({"events": 1, "count": 1, "mean_ns": 1.0}),
        "server.notify_by_events[4].events",
        "duplicate",
    ),
    # Issue "Crash-safe sweeps and hostile input": values that were accepted and should not be.
    (
        "negative throughput",
        lambda r: _set(r, "stats.throughput_msgs_per_s", -5.0),
        "stats.throughput_msgs_per_s",
        "minimum: 0",
    ),
    ("NaN measure_s", lambda r: _set(r, "phases.measure_s", float("nan")), "phases.measure_s", "finite"),
    ("NaN drift", lambda r: _set(r, "stats.drift_rel", float("nan")), "stats.drift_rel", "finite"),
    ("NaN work", lambda r: _set(r, "point.work_us", float("nan")), "point.work_us", "finite"),
    ("infinite rate", lambda r: _set(r, "point.rate", float("inf")), "point.rate", "finite"),
    ("negative orchestration", lambda r: _set(r, "orchestration_s", -0.5), "orchestration_s", "minimum: 0"),
    (
        "finished before started",
        lambda r: _set(r, "finished_at", "2020-01-01T00:00:00Z"),
        "finished_at",
        "before started_at",
    ),
    ("float repeat", lambda r: _set(r, "repeat", 0.0), "repeat", "expected integer"),
    ("huge repeat", lambda r: _set(r, "repeat", 2**31), "repeat", "invalid (maximum"),
    ("repeat under another id", lambda r: _set(r, "repeat", 7), "run_id", "is not the id of"),
    ("other experiment", lambda r: _set(r, "experiment.name", "other"), "run_id", "experiment 'other'"),
    ("field contradicts key", lambda r: _set(r, "point.threads", 8), "point.point_key", "does not match"),
    ("huge thread count", lambda r: _set(r, "point.threads", 10**30), "point.threads", "maximum"),
    ("negative latency", lambda r: _set(r, "client.latency_us.p99", -1), "client.latency_us.p99", "minimum"),
    (
        "negative lateness",
        lambda r: _set(r, "client.lateness_us", {"p50": 1.0, "p99": -1.0}),
        "client.lateness_us.p99",
        "minimum",
    ),
    ("huge core count", lambda r: _set(r, "hosts.server.cores", 2**40), "hosts.server.cores", "maximum"),
    ("huge op time", lambda r: _set(r, "server.ops.lock.max_ns", 1e300), "server.ops.lock.max_ns", "maximum"),
    # Issue 23: an ok record carries the evidence its status claims; every string is Unicode text.
    (
        "ok without samples",
        lambda r: _set(r, "client.per_second", []),
        "client.per_second",
        "0 samples, but status ok over measure_s 10 claims 10",
    ),
    (
        "ok with 2 of 10 samples",
        lambda r: _set(r, "client.per_second", r["client"]["per_second"][:2]),
        "client.per_second",
        "2 samples",
    ),
    ("ok without client", lambda r: _set(r, "client", None), "client", "missing, but status ok"),
    ("ok without stats", lambda r: _set(r, "stats", None), "stats.throughput_msgs_per_s", "missing"),
    (
        "ok, throughput not its samples'",
        lambda r: _set(r, "stats.throughput_msgs_per_s", 162462.8),
        "stats.throughput_msgs_per_s",
        "162462.8 is not what client.per_second[0:] gives (their mean is 81231.475)",
    ),
    (
        "ok, every sample trimmed",
        lambda r: _set(r, "stats.trimmed_seconds", 10),
        "stats.trimmed_seconds",
        "10, but client.per_second holds 10 samples",
    ),
    ("ok, nothing measured", lambda r: _set(r, "phases.measure_s", 0), "phases.measure_s", "status ok"),
    (
        "lone surrogate",
        lambda r: _set(r, "failure_reason", "reset \ud800 by peer"),
        "failure_reason",
        "not Unicode text: a lone surrogate U+D800, which is not a Unicode scalar value, at character 6 of "
        "'reset \\ud800 by peer'",
    ),
    ("NUL in a string", lambda r: _set(r, "host_pair", "pair\x00"), "host_pair", "U+0000 (NUL)"),
    (
        "lone surrogate in a key",
        lambda r: _set(r, "pinning.\udfff", 1),
        "pinning",
        "a key is not Unicode text: a lone surrogate U+DFFF",
    ),
]


@pytest.mark.parametrize(("label", "mutate", "field", "problem"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_record_names_file_and_field(
    engine: Engine,
    make_record: MakeRecord,
    write_record: WriteRecord,
    label: str,
    mutate: Callable[[dict[str, Any]], None],
    field: str,
    problem: str,
) -> None:
    good = write_record(make_record(repeat=1))
    record = make_record()
    mutate(record)
    bad = write_record(record)
    with pytest.raises(DemuxlabError) as info:
        ingest_files([good, bad])
    message = info.value.message
    assert "\n" not in message
    assert message.startswith(f"{bad}: field {field}: "), message
    assert problem in message, message
    assert all(n == 0 for n in counts(engine).values())


def test_hostile_files_are_one_line_errors(
    tmp_path: Path, engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    import json
    import os

    good = json.dumps(make_record())
    cases = {
        "dup.json": (good[:-1] + ', "repeat": 0}', "duplicate key 'repeat'"),
        "nan.json": (
            good.replace('"drift_rel": ', '"drift_rel": NaN, "x": '),
            "drift_rel: nan is not a finite number",
        ),
        "latin1.json": (None, "not UTF-8 text"),
        "deep.json": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    }
    for name, (content, problem) in cases.items():
        path = tmp_path / name
        if content is None:
            path.write_bytes(good.encode()[:40] + b"\xe4" + good.encode()[40:])
        else:
            path.write_text(content)
        with pytest.raises(DemuxlabError) as info:
            ingest_files([path])
        assert problem in info.value.message and "\n" not in info.value.message, (name, info.value.message)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(DemuxlabError, match="not a regular file"):
        ingest_files([fifo])
    assert all(n == 0 for n in counts(engine).values())


def test_batch_is_all_or_nothing(engine: Engine, make_record: MakeRecord, write_record: WriteRecord) -> None:
    first = write_record(make_record(repeat=0))
    second = write_record(make_record(repeat=1))
    with engine.begin() as conn:
        # A database-level failure of the second record only (its samples break a constraint).
        conn.execute(text("ALTER TABLE runs ADD CONSTRAINT test_repeat_0 CHECK (repeat_index = 0)"))
    with pytest.raises(DatabaseError) as info:
        ingest_files([first, second])
    assert (
        "nothing written" in info.value.message and "batch of 2 records: none written" in info.value.message
    )
    assert all(n == 0 for n in counts(engine).values())  # the first, valid, record is not there either
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE runs DROP CONSTRAINT test_repeat_0"))
    assert len(ingest_files([second, first])) == 2
    assert counts(engine)["runs"] == 2


def test_unreadable_and_non_json_files(tmp_path: Path, engine: Engine) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    with pytest.raises(DemuxlabError, match=r"junk\.json: not JSON"):
        ingest_files([junk])
    with pytest.raises(DemuxlabError, match=r"missing\.json: cannot read"):
        ingest_files([tmp_path / "missing.json"])
    array = tmp_path / "array.json"
    array.write_text("[1, 2]")
    with pytest.raises(DemuxlabError, match=r"array\.json: field <record>: expected a JSON object"):
        ingest_files([array])
    assert all(n == 0 for n in counts(engine).values())


def test_concurrent_ingests_of_one_experiment(engine: Engine, make_record: MakeRecord) -> None:
    records = [make_record(repeat=r, threads=t) for t in (2, 4, 8) for r in range(3)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(records))

    def work(record: dict[str, Any]) -> None:
        own = create_engine(engine.url)  # one connection each, as separate processes would have
        try:
            barrier.wait(timeout=30)
            ingest_run_record(own, record)
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.dispose()

    threads = [threading.Thread(target=work, args=(r,)) for r in records]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    c = counts(engine)
    assert (c["experiments"], c["hosts"], c["points"], c["runs"]) == (1, 2, 3, 9)


def test_point_summaries(engine: Engine, make_record: MakeRecord) -> None:
    ok0, ok1, failed = make_record(repeat=0), make_record(repeat=1), make_record(repeat=2, status="failed")
    with_samples(ok1, [79000.0] * 10)
    other = make_record(repeat=0, threads=8)
    for rec in (ok0, ok1, failed, other):
        ingest_run_record(get_engine(), rec)

    with Session(engine) as s:
        summaries = point_summaries(s, "dbtest")
        with pytest.raises(DemuxlabError, match="'nope'"):
            point_summaries(s, "nope")
    by_key = {p["point_key"]: p for p in summaries}
    assert sorted(by_key) == sorted({ok0["point"]["point_key"], other["point"]["point_key"]})
    main = by_key[ok0["point"]["point_key"]]
    assert (main["runs_ok"], main["runs_failed"]) == (2, 1)
    assert main["throughputs"] == [ok0["stats"]["throughput_msgs_per_s"], 79000.0]
    assert main["repeats"] == [0, 1]
    assert {k: main[k] for k in ok0["point"]} == ok0["point"]
    assert by_key[other["point"]["point_key"]]["threads"] == 8


def test_ingest_within_a_session_uses_a_savepoint(engine: Engine, make_record: MakeRecord) -> None:
    good, bad = make_record(repeat=0), make_record(repeat=1)
    with_samples(bad, [1.0] * 3)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE samples ADD CONSTRAINT test_one CHECK (throughput_msgs_per_s > 1)"))
    with Session(engine) as s:
        ingest_run_record(s, good)
        with pytest.raises(DatabaseError):
            ingest_run_record(s, bad)
        s.commit()
    assert counts(engine)["runs"] == 1


def test_spec_text_from_spec_path(
    engine: Engine, make_record: MakeRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "experiments" / "dbtest.yaml"
    spec.parent.mkdir()
    spec.write_text("name: dbtest\nrepeats: 2\n")
    monkeypatch.setenv("DEMUXLAB_ROOT", str(tmp_path))

    record = make_record()
    record["experiment"].update(
        spec_path="experiments/dbtest.yaml",
        spec_text=None,
        spec_sha256=hashlib.sha256(spec.read_bytes()).hexdigest(),
    )
    record["run_id"] = new_run_id(record)
    ingest_run_record(get_engine(), record)

    # The file changed after the run: its text must not be stored under the old hash.
    stale = make_record()
    stale["experiment"].update(spec_path=str(spec), spec_text=None, spec_sha256="0" * 64)
    stale["run_id"] = new_run_id(stale)
    ingest_run_record(get_engine(), stale)

    with Session(engine) as s:
        texts = dict(s.execute(select(Experiment.spec_sha256, Experiment.spec_text)).tuples().all())
    assert texts == {record["experiment"]["spec_sha256"]: spec.read_text(), "0" * 64: None}


def test_ingest_as_a_non_superuser_keeps_foreign_key_checks(engine: Engine, make_record: MakeRecord) -> None:
    """Superusers COPY samples without per-row trigger checks; other roles take the checked path."""
    role = f"writer_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(text(f"CREATE ROLE {role}"))
        conn.execute(text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"))
        conn.execute(text(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"))
    record = make_record()
    try:
        with Session(engine) as s:
            s.execute(text(f"SET ROLE {role}"))
            assert s.execute(text("SHOW is_superuser")).scalar_one() == "off"
            result = ingest_run_record(s, record)
            assert s.execute(text("SHOW session_replication_role")).scalar_one() == "origin"
            s.commit()
            s.execute(text("RESET ROLE"))
        assert result.samples == len(record["client"]["per_second"]) == counts(engine)["samples"]
        with Session(engine) as s:
            ingest_run_record(s, make_record(repeat=1))
            # The trigger bypass is scoped to the COPY: the caller's transaction is back to normal.
            assert s.execute(text("SHOW session_replication_role")).scalar_one() == "origin"
            s.commit()
    finally:
        engine.dispose()
        with engine.begin() as conn:
            conn.execute(text(f"DROP OWNED BY {role}"))
            conn.execute(text(f"DROP ROLE {role}"))


def test_ingest_for_workflow_writes_the_done_file_after_the_commit(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord, tmp_path: Path
) -> None:
    """The workflow's in-controller ingest: one transaction per record, idempotent, done file and log."""
    record = make_record(repeat=0)
    path = write_record(record)
    done, log = tmp_path / "ingested" / "r.json", tmp_path / "logs" / "r.log"
    result = ingest_for_workflow(path, done, log)
    assert result.status == "ok" and result.replaced == 0
    assert json.loads(done.read_text()) == {"ingested": [str(path)]}
    assert log.read_text().startswith(f"ingested {path}: run {record['run_id']} (ok, 10 samples)")
    before = contents(engine)
    again = ingest_for_workflow(path, done, log)  # the rerun after a crash: the same record, a no-op
    assert again.outcome == "unchanged" and contents(engine) == before
    assert log.read_text().startswith(f"unchanged {path}: ")

    bad = write_record({**make_record(repeat=1), "status": "nope"})
    done_bad, log_bad = tmp_path / "ingested" / "bad.json", tmp_path / "logs" / "bad.log"
    with pytest.raises(DemuxlabError, match="field status"):
        ingest_for_workflow(bad, done_bad, log_bad)
    assert not done_bad.exists() and contents(engine) == before
    assert log_bad.read_text().startswith(f"demuxlab: error: {bad}: field status")


def test_the_workflow_replaces_a_run_it_ran_again(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord, tmp_path: Path
) -> None:
    """The workflow's policy: a different record of a stored run replaces it when it is a later run of it
    (a retry, a forced or resumed rerun), keeping the stored one; one that is not later is refused."""
    from demuxlab.db.models import RunHistory

    record = make_record()
    done, log = tmp_path / "ingested" / "r.json", tmp_path / "logs" / "r.log"
    ingest_for_workflow(write_record(record), done, log)
    first_started = record["started_at"]

    # Edited by hand (same execution, other values): refused, nothing written, no done file.
    record["stats"]["throughput_msgs_per_s"] = 81231.475
    done.unlink()
    before = contents(engine)
    edited = write_record(record)
    with pytest.raises(DemuxlabError) as info:
        ingest_for_workflow(edited, done, log)
    assert "is not a later run of it (started_at 2026-11-21T12:00:00Z" in info.value.message
    assert "stats.throughput_msgs_per_s 81231.4 → 81231.475" in info.value.message
    assert contents(engine) == before and not done.exists()

    # Run again: a later, failed attempt replaces the ok run, which is kept.
    rerun = make_record(status="failed")
    rerun.update(attempt=2, started_at="2026-11-21T13:00:00Z", finished_at="2026-11-21T13:00:02Z")
    path = write_record(rerun)
    result = ingest_for_workflow(path, done, log)
    assert (result.outcome, result.status) == ("replaced", "failed")
    assert log.read_text().startswith(f"replaced {path}: run {rerun['run_id']} (failed, 0 samples)")
    with Session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert (run.status, run.attempt) == ("failed", 2)
        kept = s.scalars(select(RunHistory)).one()
        assert (kept.status, kept.replaced_by) == ("ok", f"workflow rerun: {path}")
        assert (
            kept.started_at.isoformat() == "2026-11-21T12:00:00+00:00" == first_started.replace("Z", "+00:00")
        )
        assert len(kept.samples) == 10
    assert counts(engine)["samples"] == 0

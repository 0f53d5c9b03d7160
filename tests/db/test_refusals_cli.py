"""Issue 23 through the command line, as a user types it: specs in YAML versions the reader does not
implement or with strings that are not Unicode text (``demuxlab validate``, ``plan``), run records without
the evidence their status claims or that would silently replace a stored run (``demuxlab ingest``).

Every refusal is one line naming the file (and the field or the run) with a non-zero exit, and leaves every
table of the database exactly as it was (compared row by row).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))
REPO = Path(__file__).resolve().parents[2]
TINY = (REPO / "tests" / "integration" / "specs" / "tiny.yaml").read_text()

MakeRecord = Callable[..., dict[str, Any]]


def demuxlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DEMUXLAB, *args], capture_output=True, text=True, timeout=180, check=False)


def one_line_error(res: subprocess.CompletedProcess[str], prefix: str) -> str:
    """The single stderr line of a refusal, checked: non-zero exit, no traceback, nothing on stdout."""
    assert res.returncode != 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"demuxlab: error: {prefix}"), lines[0]
    return lines[0]


def contents(url: str) -> dict[str, list[str]]:
    """Every row of every table (Alembic's included), as canonical JSON text."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            names = list(
                conn.execute(
                    text("select tablename from pg_tables where schemaname = 'public' order by 1")
                ).scalars()
            )
            return {
                name: list(
                    conn.execute(text(f'select to_jsonb(t)::text from "{name}" t order by 1')).scalars()
                )
                for name in names
            }
    finally:
        engine.dispose()


# -- specs ---------------------------------------------------------------------------------------------------

SPEC_CASES = [
    ("yaml-1.3", "%YAML 1.3\n---\n" + TINY, "line 1: %YAML 1.3: the spec reader implements YAML 1.1 only"),
    ("yaml-1.2", "%YAML 1.2\n---\n" + TINY, "line 1: %YAML 1.2: the spec reader implements YAML 1.1 only"),
    ("yaml-1.0", "%YAML 1.0\n---\n" + TINY, "line 1: %YAML 1.0:"),
    (
        "surrogate",
        TINY.replace('description: "Workflow test spec', 'description: "Workflow \\ud800 test spec'),
        "description: not Unicode text: a lone surrogate U+D800, which is not a Unicode scalar value, "
        "at character 9 of 'Workflow \\ud800 test spec, the fe",
    ),
    (
        "surrogate-key",
        TINY.replace("launcher: native", 'launcher: native\n"x\\udc80": 1'),
        "(top level): a key is not Unicode text: a lone surrogate U+DC80",
    ),
    (
        "nul",
        TINY.replace("reproduces: none", 'reproduces: "none\\0"'),
        "reproduces: not Unicode text: U+0000 (NUL), which PostgreSQL text cannot hold, at character 4",
    ),
]


@pytest.mark.parametrize(("label", "spec_text", "problem"), SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_spec_is_refused_by_validate_and_plan(
    tmp_path: Path, command: str, label: str, spec_text: str, problem: str
) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(spec_text)
    line = one_line_error(demuxlab(command, str(path)), f"{path}: ")
    assert problem in line, line
    assert "\\ud800" not in line or "'" in line  # the character is shown escaped, never raw


def test_yaml_1_1_and_no_directive_are_read(tmp_path: Path) -> None:
    for text_ in ("%YAML 1.1\n---\n" + TINY, TINY):
        path = tmp_path / "tiny.yaml"
        path.write_text(text_)
        res = demuxlab("validate", str(path))
        assert res.returncode == 0 and res.stdout.startswith(f"{path}: ok: 2 points"), res.stderr
        res = demuxlab("plan", str(path))
        assert res.returncode == 0 and len(json.loads(res.stdout)["runs"]) == 4, res.stderr


# -- run records ---------------------------------------------------------------------------------------------


def _write(tmp_path: Path, name: str, record: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(record))  # a lone surrogate is written as the JSON escape "\ud800"
    return path


@pytest.mark.postgres
def test_ingest_refusals_leave_the_database_as_it_was(
    tmp_path: Path, database_url: str, make_record: MakeRecord
) -> None:
    good = make_record()
    good_path = _write(tmp_path, "good.json", good)
    res = demuxlab("ingest", str(good_path))
    assert res.returncode == 0, res.stderr
    assert res.stderr == f"ingested {good_path}: run {good['run_id']} (ok, 10 samples)\n"
    stored = contents(database_url)
    run = good["run_id"]

    def edited(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        record = make_record()
        change(record)
        return record

    no_samples = edited(lambda r: r["client"].update(per_second=[]))
    failed = make_record(status="failed")
    cases: list[tuple[str, dict[str, Any], str]] = [
        # The record: ok, no samples behind it, would have replaced the good run.
        (
            "empty-samples",
            no_samples,
            "field client.per_second: 0 samples, but status ok over measure_s 10 claims 10 "
            "(one per second measured)",
        ),
        (
            "no-stats",
            edited(lambda r: r.update(stats=None)),
            "field stats.throughput_msgs_per_s: missing, but status ok claims a throughput",
        ),
        (
            "doubled-throughput",
            edited(lambda r: r["stats"].update(throughput_msgs_per_s=162462.8)),
            "field stats.throughput_msgs_per_s: 162462.8 is not what client.per_second[0:] gives",
        ),
        # A failed record of an ok run: refused without --replace, naming the run and what differs.
        (
            "failed-over-ok",
            failed,
            f"run {run} (experiment 'dbtest', point 'hsha/epoll-lt/t4/w10/c64/b1/ct1/rclosed', repeat 0) "
            "is already stored, and this record differs: status 'ok' → 'failed', failure_reason None → "
            "'demux-client: connection reset by pe..., stats.throughput_msgs_per_s 81231.4 → None (and 12 "
            "more); nothing written (`demuxlab ingest --replace` replaces it, keeping the stored one in "
            "runs_history)",
        ),
        (
            "surrogate",
            edited(lambda r: r.update(failure_reason="reset \ud800 by peer")),
            "field failure_reason: not Unicode text: a lone surrogate U+D800",
        ),
        (
            "nul",
            edited(lambda r: r["pinning"]["notes"].append("cpu\x00")),
            "field pinning.notes[1]: not Unicode text: U+0000 (NUL)",
        ),
    ]
    for label, record, problem in cases:
        path = _write(tmp_path, f"{label}.json", record)
        line = one_line_error(demuxlab("ingest", str(path)), f"{path}: ")
        assert problem in line, (label, line)
        assert contents(database_url) == stored, label

    # A batch with one refused record writes none of them.
    other = make_record(repeat=1)
    res = demuxlab(
        "ingest", str(_write(tmp_path, "other.json", other)), str(tmp_path / "failed-over-ok.json")
    )
    assert "(batch of 2 records: none written)" in one_line_error(
        res, f"{tmp_path / 'failed-over-ok.json'}: "
    )
    assert contents(database_url) == stored

    # The same record again: a no-op, said so.
    res = demuxlab("ingest", str(good_path))
    assert res.returncode == 0 and res.stderr == (
        f"unchanged {good_path}: run {run} is stored as this record has it (nothing written)\n"
    )
    assert contents(database_url) == stored

    # On purpose: replaced, and the record it replaced is kept whole.
    failed_path = tmp_path / "failed-over-ok.json"
    res = demuxlab("ingest", "--replace", str(failed_path))
    assert res.returncode == 0, res.stderr
    assert re.fullmatch(
        rf"replaced {re.escape(str(failed_path))}: run {run} \(failed, 0 samples\); the record it replaced "
        r"is kept in runs_history \(id \d+\)\n",
        res.stderr,
    ), res.stderr
    after = contents(database_url)
    assert after["samples"] == [] and len(after["runs_history"]) == 1
    kept = json.loads(after["runs_history"][0])
    assert kept["status"] == "ok" and kept["samples"] == good["client"]["per_second"]
    assert kept["replaced_by"] == f"ingest --replace: {failed_path}"
    assert json.loads(stored["runs"][0]) == kept["run"]

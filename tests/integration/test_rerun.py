"""A run the workflow runs again replaces its stored run, and the record it replaced is kept (issue 23).

The sweep runs once; then one run is forced to run again (``snakemake -R <its record>``), as a user
reruns a run they distrust. The workflow's in-controller ingest sees a different record of a stored run
that started later, replaces the run, and keeps the earlier record whole in ``runs_history``; every other
run stays exactly as it was, and ingesting the first record again by hand is refused (one line).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_workflow import rows, snakemake_cmd

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(900)]

DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))
SPEC = """\
name: again
description: "Rerun test: two short runs."
reproduces: none
launcher: native
seed: 5
repeats: 2
phases: {warmup_s: 0.2, measure_s: 1, cooldown_s: 0}
calibration: {repeats: 0}
client: {threads: 1, rate: null}
designs:
  - {pattern: reactor, notifiers: [epoll-lt]}
matrix: {threads: [1], work_us: [0], connections: [8], msg_size: [1]}
"""
RUNS_SQL = """
select r.run_id::text as run_id, r.status, r.attempt, r.started_at, r.ingested_at, r.throughput_msgs_per_s,
       (select array_agg(s.throughput_msgs_per_s order by s.second) from samples s where s.run_id = r.run_id)
         as samples
from runs r join points p on p.id = r.point_id join experiments e on e.id = p.experiment_id
where e.name = 'again' order by r.run_id
"""


def workflow(work: Path, specs: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = snakemake_cmd(work, "experiments=[again]", specs=specs) + list(extra)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=840, check=False)


def test_a_forced_rerun_replaces_the_run_and_keeps_the_earlier_record(
    tmp_path: Path, database_url: str
) -> None:
    specs, work = tmp_path / "specs", tmp_path / "work"
    specs.mkdir()
    (specs / "again.yaml").write_text(SPEC)
    res = workflow(work, specs)
    assert res.returncode == 0, res.stderr[-3000:]
    first = {r["run_id"]: r for r in rows(database_url, RUNS_SQL)}
    assert len(first) == 2 and all(r["status"] == "ok" for r in first.values())
    assert rows(database_url, "select * from runs_history") == []

    rerun_id, kept_id = sorted(first)
    record = work / "results" / "again" / "runs" / f"{rerun_id}.json"
    earlier_record = json.loads(record.read_text())
    earlier_copy = tmp_path / "earlier.json"
    earlier_copy.write_text(record.read_text())

    res = workflow(work, specs, "--forcerun", f"results/again/runs/{rerun_id}.json")
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(record.read_text())["started_at"] > earlier_record["started_at"]

    after = {r["run_id"]: r for r in rows(database_url, RUNS_SQL)}
    assert sorted(after) == sorted(first)
    assert after[kept_id] == first[kept_id]  # not run again: not touched (ingested_at included)
    assert after[rerun_id]["started_at"] > first[rerun_id]["started_at"]
    log = (work / "logs" / "again" / "ingested" / f"{rerun_id}.log").read_text()
    assert log.startswith(f"replaced results/again/runs/{rerun_id}.json: run {rerun_id} (ok, 1 sample)"), log

    (kept,) = rows(database_url, "select * from runs_history")
    assert str(kept["run_id"]) == rerun_id
    assert kept["replaced_by"] == f"workflow rerun: results/again/runs/{rerun_id}.json"
    assert (kept["started_at"], kept["ingested_at"]) == (
        first[rerun_id]["started_at"],
        first[rerun_id]["ingested_at"],
    )
    assert kept["samples"] == earlier_record["client"]["per_second"] == first[rerun_id]["samples"]
    assert kept["run"]["throughput_msgs_per_s"] == earlier_record["stats"]["throughput_msgs_per_s"]

    # The earlier record by hand: refused (not silently put back), the database as it was.
    before = rows(database_url, RUNS_SQL)
    res = subprocess.run(
        [DEMUXLAB, "ingest", str(earlier_copy)], capture_output=True, text=True, timeout=180, check=False
    )
    assert res.returncode != 0 and len(res.stderr.splitlines()) == 1, res.stderr
    assert f"run {rerun_id} (experiment 'again'" in res.stderr and "is already stored" in res.stderr
    assert (
        rows(database_url, RUNS_SQL) == before and len(rows(database_url, "select id from runs_history")) == 1
    )

"""`snakemake --profile cluster all` on a simulated cluster: the real workflow, scheduler, leases, state
files, ingest and reports, with the ``sim`` launcher (runs wait their duration, no hosts). A pair made to
fail mid-sweep is quarantined and the sweep completes on the other; a controller killed mid-sweep and
rerun as typed leaves every run in the database exactly once, each naming its pair and both hosts.
The same sweeps against the real testbed are in tests/cluster/test_sweep.py.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(600)]

SPEC = """name: simsweep
reproduces: none
launcher: native
seed: 3
repeats: 4
phases: {warmup_s: 0, measure_s: 1, cooldown_s: 0}
calibration: {repeats: 0}
designs:
  - {pattern: reactor, notifiers: [poll, epoll-lt]}
matrix: {threads: [1], work_us: [0], connections: [8], msg_size: [1]}
"""
RUNS = 8


def setup(tmp_path: Path, cluster: str) -> tuple[list[str], dict[str, str]]:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "simsweep.yaml").write_text(SPEC)
    (tmp_path / "cluster.yaml").write_text(cluster)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ)
    env["DEMUXLAB_INVENTORY"] = str(tmp_path / "cluster.yaml")
    env["DEMUXLAB_LEASE_DIR"] = str(tmp_path / "leases")
    # As the README types it, from workflows/, plus the test's own folder and spec.
    cmd = [
        SNAKEMAKE, "--profile", "cluster", "all", "--directory", str(work),
        "--config", "experiments=[simsweep]", f"experiments_dir={specs}",
    ]  # fmt: skip
    return cmd, env


def rows(url: str, sql: str) -> list[dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


RUNS_SQL = """
select r.run_id, r.status, r.host_pair, r.hardware_class, r.launcher, sh.hostname as server_host,
       ch.hostname as client_host
from runs r join hosts sh on sh.id = r.server_host_id join hosts ch on ch.id = r.client_host_id
"""


def test_failing_pair_is_quarantined_and_the_sweep_completes(tmp_path: Path, database_url: str) -> None:
    cmd, env = setup(tmp_path, "simulated: {pairs: 2, failing: [sim-001], fail_from_run: 1}\n")
    res = subprocess.run(
        cmd, cwd=REPO / "workflows", env=env, capture_output=True, text=True, timeout=540, check=False
    )
    assert res.returncode == 0, res.stderr[-3000:]
    runs = rows(database_url, RUNS_SQL)
    assert len(runs) == RUNS and all(r["status"] == "ok" for r in runs)
    for r in runs:
        assert r["launcher"] == "sim" and r["hardware_class"].startswith("hw-")
        assert (
            r["server_host"] == f"{r['host_pair']}-server" and r["client_host"] == f"{r['host_pair']}-client"
        )
    by_pair = {p: sum(1 for r in runs if r["host_pair"] == p) for p in ("sim-000", "sim-001")}
    assert by_pair["sim-001"] == 1  # its first run, before it started failing
    state = json.loads((tmp_path / "work" / "results" / "cluster" / "pairs" / "sim-001.json").read_text())
    assert state["quarantined"] and "simulated host lost" in state["quarantine_reason"]
    with (tmp_path / "work" / "results" / "simsweep" / "report" / "pairs.csv").open() as f:
        table = {row["pair"]: row for row in csv.DictReader(f)}
    assert table["sim-001"]["quarantined"] == "True" and table["sim-000"]["quarantined"] == "False"
    assert int(table["sim-000"]["runs_ok"]) == RUNS - 1
    progress = json.loads((tmp_path / "work" / "results" / "cluster" / "progress.json").read_text())
    assert progress["runs"] == {"planned": RUNS, "finished": RUNS, "remaining": 0}
    with (tmp_path / "work" / "results" / "simsweep" / "report" / "points.csv").open() as f:
        points = list(csv.DictReader(f))
    assert {p["hardware_class"] for p in points} == {runs[0]["hardware_class"]}


def test_controller_killed_mid_sweep_resumes_without_loss_or_duplicates(
    tmp_path: Path, database_url: str
) -> None:
    cmd, env = setup(tmp_path, "simulated: {pairs: 2}\n")
    runs_dir = tmp_path / "work" / "results" / "simsweep" / "runs"
    proc = subprocess.Popen(
        cmd,
        cwd=REPO / "workflows",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(list(runs_dir.glob("*.json"))) < 4:
            time.sleep(0.2)
        assert len(list(runs_dir.glob("*.json"))) >= 4, "the sweep did not get going"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the controller and every job, mid-run
        proc.wait()
    done_before = len(list(runs_dir.glob("*.json")))
    assert done_before < RUNS
    res = subprocess.run(
        cmd, cwd=REPO / "workflows", env=env, capture_output=True, text=True, timeout=540, check=False
    )
    assert res.returncode == 0, res.stderr[-3000:]
    runs = rows(database_url, RUNS_SQL)
    assert len(runs) == RUNS == len({r["run_id"] for r in runs})
    assert all(r["status"] == "ok" and r["host_pair"] in ("sim-000", "sim-001") for r in runs)
    assert len(list(runs_dir.glob("*.json"))) == RUNS


def test_a_second_experiment_in_the_same_folder_runs_all_its_runs(tmp_path: Path, database_url: str) -> None:
    """A new experiment re-plans the sweep (sweep.json, ready.json run again, upstream of every run through
    an `ancient` input): its runs must still all run, not only the re-planning."""
    cmd, env = setup(tmp_path, "simulated: {pairs: 2}\n")
    res = subprocess.run(
        cmd, cwd=REPO / "workflows", env=env, capture_output=True, text=True, timeout=540, check=False
    )
    assert res.returncode == 0, res.stderr[-3000:]
    specs = tmp_path / "specs"
    (specs / "second.yaml").write_text(
        SPEC.replace("name: simsweep", "name: second").replace("seed: 3", "seed: 4")
    )
    second = [*cmd[: cmd.index("--config")], "--config", "experiments=[second]", f"experiments_dir={specs}"]
    res = subprocess.run(
        second, cwd=REPO / "workflows", env=env, capture_output=True, text=True, timeout=540, check=False
    )
    assert res.returncode == 0, res.stderr[-3000:]
    runs = rows(database_url, RUNS_SQL)
    assert len(runs) == 2 * RUNS and all(r["status"] == "ok" for r in runs)
    report = tmp_path / "work" / "results" / "second" / "report"
    assert (report / "points.csv").is_file() and (report / "pairs.csv").is_file()
    progress = json.loads((tmp_path / "work" / "results" / "cluster" / "progress.json").read_text())
    assert progress["runs"] == {"planned": RUNS, "finished": RUNS, "remaining": 0}

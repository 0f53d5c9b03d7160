"""Faults of a cluster sweep on the real testbed (real Ansible, SSH, each host's Docker engine, PostgreSQL),
through the README's command `snakemake --profile cluster all`:

- a host powered off while a run executes on its pair (its container killed, as pulling the plug): only that
  attempt fails, the run is retried on the other pair, the dead pair is quarantined after
  `quarantine_after` failures in a row, and the sweep completes with every planned run exactly once;
- a server host cut off mid-run (every packet to it dropped: SSH dies silently): the same, within bounds;
- the controller killed with SIGKILL (its whole process group, as a crashed controller machine) while runs
  are in flight on both pairs, leaving their server containers running on the hosts; the same command rerun
  finishes the sweep with no lost, duplicate or partial run, no container left, no lease waited for.

Runs after test_sweep.py (file order): the session testbed is provisioned by then. The powered-off host is
started again at the end of its test (`testbed up` restarts it; its engine keeps its images on its volume).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cluster_helpers import Testbed

from helpers.load import Span, settle, under
from helpers.workflow_process import WorkflowProcess

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.cluster, pytest.mark.timeout(900)]

BIN = Path(sys.executable).parent
SPEC = """name: {name}
reproduces: none
launcher: docker
seed: {seed}
repeats: 2
phases: {{warmup_s: 0.5, measure_s: 2, cooldown_s: 0}}
calibration: {{repeats: 0}}
designs:
  - {{pattern: reactor, notifiers: [poll, epoll-lt]}}
matrix: {{threads: [1], work_us: [0], connections: [8], msg_size: [1]}}
"""
QUARANTINE_AFTER = 2


class Sweep(WorkflowProcess):
    """One experiment of the module's work folder, run as the README types the command."""

    def __init__(self, base: Path, testbed: Testbed, db: str, name: str) -> None:
        self.base, self.name = base, name
        specs = base / "specs"
        specs.mkdir(exist_ok=True)
        self.spec = specs / f"{name}.yaml"
        self.spec.write_text(SPEC.format(name=name, seed=len(name)))
        self.work = base / "work"
        self.env = {
            **os.environ,
            "DEMUXLAB_INVENTORY": str(testbed.inventory),
            "DEMUXLAB_DATABASE_URL": db,
            "DEMUXLAB_LEASE_DIR": str(base / "leases"),
        }
        conf = base / "cluster.yaml"
        conf.write_text(
            "host_pair: cluster\n"
            f"cluster: {{quarantine_after: {QUARANTINE_AFTER}, noise_wait_s: 0, pair_wait_s: 600}}\n"
        )
        self.argv = [
            str(BIN / "snakemake"), "--profile", "cluster", "all", "--directory", str(self.work),
            "--configfile", str(conf), "--config", f"experiments=[{name}]", f"experiments_dir={specs}",
        ]  # fmt: skip
        self.log = base / f"{name}.log"

    @property
    def results(self) -> Path:
        return self.work / "results" / self.name

    @property
    def state(self) -> Path:
        return self.work / "results" / "cluster"

    def records(self) -> dict[str, dict[str, Any]]:
        return {p.stem: json.loads(p.read_text()) for p in (self.results / "runs").glob("*.json")}

    def failed_attempts(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in (self.results / "failures").glob("*.json")]


def db_rows(url: str, name: str) -> list[dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [
                dict(r._mapping)
                for r in conn.execute(
                    sa.text(
                        "select r.run_id::text as run_id, r.status, r.attempt, r.host_pair,"
                        " sh.hostname as server_host,"
                        " ch.hostname as client_host from runs r join points p on p.id = r.point_id"
                        " join experiments e on e.id = p.experiment_id"
                        " left join hosts sh on sh.id = r.server_host_id"
                        " left join hosts ch on ch.id = r.client_host_id where e.name = :name"
                    ),
                    {"name": name},
                )
            ]
    finally:
        engine.dispose()


def run_containers(testbed: Testbed, host: str) -> list[str]:
    """Containers of demuxlab runs on a testbed host (running or not)."""
    res = testbed.sh(host, "docker ps -aq --filter label=org.demuxlab.pair", check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def containers_of_runs(testbed: Testbed, host: str) -> set[str]:
    """The run ids of the demuxlab containers on a testbed host."""
    fmt = '{{.Label "org.demuxlab.run_id"}}'
    res = testbed.sh(host, f"docker ps -a --filter label=org.demuxlab.pair --format '{fmt}'", check=False)
    assert res.returncode == 0, res.stderr
    return set(res.stdout.split())


def clients_running(testbed: Testbed, host: str) -> bool:
    res = testbed.sh(host, "docker ps -q --filter label=org.demuxlab.role=client", check=False)
    return bool(res.stdout.split())


def wait_for(what: str, cond: Any, proc: subprocess.Popen[bytes], sweep: Sweep, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"sweep {sweep.name} ended (status {proc.returncode}) before {what}:\n{sweep.tail()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {what} within {timeout:g} s")
        time.sleep(0.3)


def assert_complete(sweep: Sweep, db: str) -> dict[str, dict[str, Any]]:
    """Every planned run has one final, ok record file and exactly one row; nothing else is there."""
    planned = sweep.planned()
    records = sweep.records()
    assert sorted(records) == sorted(planned)
    assert all(r["status"] == "ok" for r in records.values()), [r["failure_reason"] for r in records.values()]
    leftovers = [p.name for p in (sweep.results / "runs").iterdir() if p.suffix != ".json"]
    assert not leftovers  # no half-written record
    rows = db_rows(db, sweep.name)
    assert sorted(r["run_id"] for r in rows) == sorted(planned)  # one row per run id, none missing
    for r in rows:
        record = records[r["run_id"]]
        assert r["status"] == "ok"
        assert (r["host_pair"], r["attempt"]) == (record["host_pair"], record["attempt"])
        pair = r["host_pair"]
        assert (r["server_host"], r["client_host"]) == (f"{pair}-server", f"{pair}-client")
    return records


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture
def powered_off(testbed: Testbed) -> Iterator[list[str]]:
    """Hosts the test powers off; started again (engine too) afterwards, the inventory rewritten."""
    hosts: list[str] = []
    yield hosts
    if not hosts:
        return
    from demuxlab import testbed as tb

    testbed.state = tb.up(testbed.state["pairs"], log=lambda msg: None)
    for host in hosts:
        testbed.sh(host, "/etc/init.d/docker start >/dev/null 2>&1 || true", check=False)
        testbed.sh(host, "timeout 60 sh -c 'until docker info >/dev/null 2>&1; do sleep 0.5; done'")


def test_host_powered_off_mid_run(
    testbed: Testbed, cluster_db: str, base: Path, powered_off: list[str]
) -> None:
    sweep = Sweep(base, testbed, cluster_db, "tbpoweroff")
    with Span() as span:
        proc = sweep.start()
        wait_for("run measuring on tb2", lambda: clients_running(testbed, "tb2-client"), proc, sweep)
        time.sleep(1.0)  # mid-measure
        powered_off.append("tb2-client")
        subprocess.run(["docker", "kill", testbed.container("tb2-client")], check=True, capture_output=True)
        sweep.finish(proc)

    records = assert_complete(sweep, cluster_db)
    # The attempt that was running on tb2 failed there; its run was retried on tb1, avoiding tb2.
    failed = sweep.failed_attempts()
    assert failed and all(a["host_pair"] == "tb2" and a["status"] == "failed" for a in failed)
    for attempt in failed:
        final = records[attempt["run_id"]]
        assert final["host_pair"] == "tb1" and "tb2" in final["scheduling"]["avoided"]
        assert final["attempt"] > attempt["attempt"]
    # The powered-off pair failed QUARANTINE_AFTER attempts in a row (the one in flight, then "unreachable"
    # at once for the next run that tried it) and was quarantined; nothing ran on it after.
    st = json.loads((sweep.state / "pairs" / "tb2.json").read_text())
    assert st["quarantined"] and st["consecutive_failures"] == QUARANTINE_AFTER
    assert "tb2-client" in st["quarantine_reason"]
    assert len(failed) == QUARANTINE_AFTER
    unreachable = [a for a in failed if "unreachable over SSH" in a["failure_reason"]]
    assert unreachable
    # The surviving hosts, the dead host's partner included, keep no container of the failed run.
    for host in ("tb1-server", "tb1-client", "tb2-server"):
        assert run_containers(testbed, host) == [], host
    # The database holds the final attempts only; the failed ones are counted on the pair (pairs.csv).
    lines = (sweep.results / "report" / "pairs.csv").read_text().splitlines()
    table = {row["pair"]: row for row in csv.DictReader(lines)}
    assert table["tb2"]["quarantined"] == "True"
    assert int(table["tb2"]["attempts_failed_on_pair"]) == QUARANTINE_AFTER
    # "Unreachable" at once: well under SSH's connect timeouts, on a quiet host.
    settle(
        span,
        *(
            under("an unreachable attempt's run_wall_s", a["scheduling"]["run_wall_s"], 60)
            for a in unreachable
        ),
    )


def unquarantine(sweep: Sweep, pair: str) -> None:
    """The previous test quarantined the pair in this folder's state; its host is back: into service."""
    subprocess.run(
        [str(BIN / "demuxlab"), "cluster", "unquarantine", "--cluster-state", str(sweep.state), pair],
        env=sweep.env,
        check=True,
        capture_output=True,
    )


DROP = "iptables -{} INPUT ! -i lo -j DROP"


def test_server_host_cut_off_mid_run(testbed: Testbed, cluster_db: str, base: Path) -> None:
    """SSH drops without a word (every packet to the host lost, as a pulled cable): the dead connection is
    noticed by keep-alives, the attempt fails within bounds and is retried on tb1."""
    sweep = Sweep(base, testbed, cluster_db, "tbcutoff")
    unquarantine(sweep, "tb2")
    with Span() as span:
        proc = sweep.start()
        wait_for("run measuring on tb2", lambda: clients_running(testbed, "tb2-client"), proc, sweep)
        time.sleep(1.0)
        testbed.sh("tb2-server", DROP.format("I"))
        try:
            sweep.finish(proc)
        finally:
            testbed.sh("tb2-server", DROP.format("D"), check=False)
    records = assert_complete(sweep, cluster_db)
    failed = sweep.failed_attempts()
    assert 1 <= len(failed) <= QUARANTINE_AFTER
    for attempt in failed:
        assert attempt["host_pair"] == "tb2"
        assert records[attempt["run_id"]]["host_pair"] == "tb1"
    assert json.loads((sweep.state / "pairs" / "tb2.json").read_text())["quarantined"]
    # The cut-off host's server container may live on until the host is reachable again (the next holder
    # of tb2's lease removes it: the next test checks); the reachable hosts keep nothing.
    for host in ("tb1-server", "tb1-client", "tb2-client"):
        assert run_containers(testbed, host) == [], host
    # The keep-alives noticed the dead connection within bounds (on a quiet host).
    settle(
        span, *(under("a cut-off attempt's run_wall_s", a["scheduling"]["run_wall_s"], 120) for a in failed)
    )


def test_controller_killed_and_rerun(testbed: Testbed, cluster_db: str, base: Path) -> None:
    sweep = Sweep(base, testbed, cluster_db, "tbkill")
    unquarantine(sweep, "tb2")
    proc = sweep.start()
    both = lambda: clients_running(testbed, "tb1-client") and clients_running(testbed, "tb2-client")  # noqa: E731
    wait_for("runs in flight on both pairs", both, proc, sweep)
    os.killpg(proc.pid, signal.SIGKILL)  # the controller machine crashed: snakemake and every job
    proc.wait()
    killed = set(sweep.planned()) - set(sweep.records())
    assert len(killed) >= 2
    # What a crash leaves: the killed runs' server containers still running on the pairs' server hosts.
    left = containers_of_runs(testbed, "tb1-server") | containers_of_runs(testbed, "tb2-server")
    assert left & killed

    with Span() as span:
        sweep.finish(sweep.start())  # the same command again
    records = assert_complete(sweep, cluster_db)
    assert {r["host_pair"] for r in records.values()} == {"tb1", "tb2"}
    for host in testbed.hosts:
        assert run_containers(testbed, host) == [], host
    # No lease outlived the dead controller: the rerun's runs took their pairs without waiting (30 s on a
    # quiet host).
    settle(
        span,
        *(
            under(f"{rid}: waited_s for its pair", records[rid]["scheduling"]["waited_s"], 30)
            for rid in killed
        ),
    )

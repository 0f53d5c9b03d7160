"""Cluster sweeps against the testbed, through the README's command: `snakemake --profile cluster all`
from workflows/, with real Ansible (site.yml once), real SSH, each host's own Docker engine, and
PostgreSQL. Two pairs; a second sweep with one pair's engine stopped: that pair is quarantined and the
sweep completes on the other. (A host powered off mid-run and the controller killed and resumed are in
test_sweep_faults.py; the scheduler at scale is tested on a simulated cluster in
tests/integration/test_cluster_sim.py: the same workflow and scheduler.)"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cluster_helpers import ROOT, Testbed

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.cluster, pytest.mark.timeout(1200)]

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SPEC = """name: {name}
reproduces: none
launcher: docker
seed: {seed}
repeats: 2
phases: {{warmup_s: 0.5, measure_s: 1, cooldown_s: 0}}
calibration: {{repeats: 0}}
designs:
  - {{pattern: reactor, notifiers: [poll, epoll-lt]}}
matrix: {{threads: [1], work_us: [0], connections: [8], msg_size: [1]}}
"""


def sweep(tmp: Path, testbed: Testbed, db: str, name: str, *config: str) -> subprocess.CompletedProcess[str]:
    specs = tmp / "specs"
    specs.mkdir(exist_ok=True)
    (specs / f"{name}.yaml").write_text(SPEC.format(name=name, seed=len(name)))
    env = {
        **os.environ,
        "DEMUXLAB_INVENTORY": str(testbed.inventory),
        "DEMUXLAB_DATABASE_URL": db,
        "DEMUXLAB_LEASE_DIR": str(tmp / "leases"),
    }
    # --configfile replaces the profile's (cluster/workflow.yaml), so this one names the cluster too.
    conf = tmp / "cluster.yaml"
    conf.write_text("host_pair: cluster\ncluster: {quarantine_after: 1, noise_wait_s: 0, pair_wait_s: 600}\n")
    cmd = [
        SNAKEMAKE, "--profile", "cluster", "all", "--directory", str(tmp / "work"), "--configfile", str(conf),
        "--config", f"experiments=[{name}]", f"experiments_dir={specs}", *config,
    ]  # fmt: skip
    return subprocess.run(
        cmd, cwd=ROOT / "workflows", env=env, capture_output=True, text=True, timeout=1100, check=False
    )


def rows(url: str, name: str) -> list[dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [
                dict(r._mapping)
                for r in conn.execute(
                    sa.text(
                        "select r.run_id, r.status, r.failure_reason, r.host_pair, r.launcher,"
                        " r.hardware_class,"
                        " r.noisy, r.orchestration_s, r.server_result, sh.hostname as server_host,"
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


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sweep")


def test_sweep_over_two_pairs(testbed: Testbed, cluster_db: str, work: Path) -> None:
    res = sweep(work, testbed, cluster_db, "tbsweep")
    assert res.returncode == 0, res.stderr[-4000:]
    runs = rows(cluster_db, "tbsweep")
    assert len(runs) == 4
    failed = [(r["host_pair"], r["failure_reason"]) for r in runs if r["status"] != "ok"]
    assert not failed
    for r in runs:
        assert r["launcher"] == "remote" and r["host_pair"] in ("tb1", "tb2")
        assert (
            r["server_host"] == f"{r['host_pair']}-server" and r["client_host"] == f"{r['host_pair']}-client"
        )
        assert r["hardware_class"].startswith("hw-") and r["noisy"] is not None
        assert r["server_result"]["connections_accepted"] == 8
    # The client connected to the server host's pair-network address, never loopback, and the traffic
    # came from the client host.
    for path in (work / "work" / "results" / "tbsweep" / "runs").glob("*.json"):
        record = json.loads(path.read_text())
        address = record["pair"]["server"]["address"]
        assert not ipaddress.ip_address(address).is_loopback
        assert record["pair"]["client"]["address"] != address
        assert record["pinning"]["same_host"] is False
        # The server host saw the connections coming from the client host's pair address.
        assert record["network"]["server_peers"] == [record["pair"]["client"]["address"]]
    state = work / "work" / "results" / "cluster"
    assert (state / "provisioned.json").is_file()
    assert sorted(p.stem for p in (state / "facts").glob("*.json")) == sorted(testbed.hosts)


def test_pair_with_its_engine_stopped_is_quarantined(testbed: Testbed, cluster_db: str, work: Path) -> None:
    testbed.sh("tb2-server", "/etc/init.d/docker stop >/dev/null 2>&1 || true")
    try:
        res = sweep(work, testbed, cluster_db, "tbbroken")
    finally:
        testbed.sh("tb2-server", "/etc/init.d/docker start >/dev/null 2>&1 || true", check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    runs = rows(cluster_db, "tbbroken")
    assert len(runs) == 4 and all(r["status"] == "ok" and r["host_pair"] == "tb1" for r in runs)
    state = json.loads((work / "work" / "results" / "cluster" / "pairs" / "tb2.json").read_text())
    assert state["quarantined"] and "tb2" in state["quarantine_reason"]
    table = (work / "work" / "results" / "tbbroken" / "report" / "pairs.csv").read_text()
    assert "tb2" in table and "True" in table

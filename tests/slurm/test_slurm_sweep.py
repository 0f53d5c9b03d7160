"""The slurm profile against a real Slurm (the session's Slurm testbed: slurmctld, slurmdbd with MariaDB, a
slurmd per host, munge), through the README's commands as typed (from the README's Slurm section; each test
adds only its working folder, its experiment and `cluster={noise_wait_s: 0}`: the test hosts share this
machine's load):

- the README's commands: every run on two nodes of a Slurm job, rows in PostgreSQL naming the job and both
  nodes, the partition, account and constraint as set;
- a lane's runs as one group job (slurm.group_runs): K runs in one allocation, one after the other, each its
  own record, pinning and facts; the job's time limit K runs plus the margin;
- a node taken down mid-group: the group's finished runs kept, the run in flight retried on other nodes;
- the controller killed mid-group and rerun: the group job waited for, its runs neither lost nor run twice;
- a node taken down mid-run (`scontrol update … state=down`): only that attempt fails, the retry runs on
  other nodes, every run once;
- the controller killed (SIGKILL to its process group) with jobs running, and the command typed again:
  those jobs are waited for, not submitted again, their measurements kept; nothing lost or doubled;
- bad settings: one line each, before the first job.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from slurm_helpers import SlurmBed

from helpers.workflow_process import WorkflowProcess

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.slurm, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SPEC = """name: {name}
reproduces: none
launcher: native
seed: {seed}
repeats: 2
phases: {{warmup_s: 0.5, measure_s: {measure}, cooldown_s: 0}}
calibration: {{repeats: 0}}
designs:
  - {{pattern: reactor, notifiers: [{notifiers}]}}
matrix: {{threads: [1], work_us: [0], connections: [8], msg_size: [1]}}
"""


def readme_commands() -> list[str]:
    """The snakemake command lines of the README's Slurm section, as typed there."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### On a Slurm cluster", 1)[1].split("\n#", 1)[0]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip().startswith("../.venv/bin/snakemake")]


class Sweep(WorkflowProcess):
    tail_chars = 5000
    timeout_s = 1200.0

    def __init__(
        self,
        bed: SlurmBed,
        db: str,
        name: str,
        command: str,
        measure: float = 1,
        notifiers: str = "poll, epoll-lt",
    ) -> None:
        self.bed, self.db, self.name = bed, db, name
        specs = bed.work / "specs"
        specs.mkdir(exist_ok=True)
        self.spec = specs / f"{name}.yaml"
        self.spec.write_text(SPEC.format(name=name, seed=len(name), measure=measure, notifiers=notifiers))
        self.work = bed.work / name
        argv = shlex.split(command)
        assert argv[:4] == ["../.venv/bin/snakemake", "--profile", "slurm", "all"], command
        argv[0] = str(BIN / "snakemake")
        argv[4:4] = ["--directory", str(self.work)]
        extra = [f"experiments=[{name}]", f"experiments_dir={specs}", "cluster={noise_wait_s: 0}"]
        self.argv = argv + extra if "--config" in argv else [*argv, "--config", *extra]
        self.env = {**bed.env(), "DEMUXLAB_DATABASE_URL": db}
        self.log = bed.work / f"{name}.log"

    @property
    def state(self) -> Path:
        return self.work / "results" / "slurm"

    def records(self) -> dict[str, dict[str, Any]]:
        return {
            p.stem: json.loads(p.read_text())
            for p in (self.work / "results" / self.name / "runs").glob("*.json")
        }

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        path = self.state / "attempts" / f"{run_id}.json"
        return list(json.loads(path.read_text())["attempts"]) if path.exists() else []

    def started(self) -> dict[str, int]:
        """Runs whose job has started its run (run id -> job id), from the attempts the jobs write."""
        out: dict[str, int] = {}
        for path in (self.state / "attempts").glob("*.json"):
            try:
                for a in json.loads(path.read_text())["attempts"]:
                    if a.get("outcome") is None:
                        out[path.stem] = int(a["job_id"])
            except (OSError, ValueError, KeyError):
                continue
        return out

    def queued(self) -> list[str]:
        """This sweep's jobs in Slurm's queue (any state)."""
        out = self.bed.slurm("squeue", "--me", "-h", "-o", "%i|%Z").stdout
        here = os.path.realpath(self.work)
        return [
            j
            for j, _, wd in (line.partition("|") for line in out.splitlines())
            if os.path.realpath(wd) == here
        ]

    def rows(self) -> list[dict[str, Any]]:
        engine = sa.create_engine(self.db)
        try:
            with engine.connect() as conn:
                q = sa.text(
                    "select r.run_id::text as run_id, r.status, r.attempt, r.launcher, r.slurm_job_id,"
                    " r.slurm, r.hardware_class, sh.hostname as server_host, ch.hostname as client_host"
                    " from runs r join points p on p.id = r.point_id"
                    " join experiments e on e.id = p.experiment_id"
                    " left join hosts sh on sh.id = r.server_host_id"
                    " left join hosts ch on ch.id = r.client_host_id"
                    " where e.name = :name"
                )
                return [dict(r._mapping) for r in conn.execute(q, {"name": self.name})]
        finally:
            engine.dispose()


def wait_for(what: str, cond: Any, proc: subprocess.Popen[bytes], sweep: Sweep, timeout: float = 600) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if proc.poll() is not None:
            pytest.fail(f"sweep {sweep.name} ended (status {proc.returncode}) before {what}:\n{sweep.tail()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {what} within {timeout:g} s:\n{sweep.tail()}")
        time.sleep(1)


def assert_once_each(sweep: Sweep) -> dict[str, dict[str, Any]]:
    """Every planned run: one ok record, one row in PostgreSQL naming its Slurm job and both nodes."""
    planned = sweep.planned()
    records = sweep.records()
    assert sorted(records) == planned
    assert all(r["status"] == "ok" for r in records.values()), [r["failure_reason"] for r in records.values()]
    rows = sweep.rows()
    assert sorted(r["run_id"] for r in rows) == planned
    jobs = sweep.bed.slurm("sacct", "-X", "-n", "-P", "-o", "JobIdRaw,NodeList", "-S", "now-2hours").stdout
    nodelists = dict(line.split("|", 1) for line in jobs.splitlines() if "|" in line)
    for row in rows:
        record = records[row["run_id"]]
        assert row["status"] == "ok" and row["launcher"] == "slurm"
        assert row["slurm_job_id"] == record["slurm"]["job_id"]
        assert row["server_host"] != row["client_host"]
        assert {row["server_host"], row["client_host"]} <= set(sweep.bed.nodes)
        assert row["slurm"]["nodes"] == {"server": row["server_host"], "client": row["client_host"]}
        # Slurm's accounting agrees: the job ran on exactly these two nodes.
        listed = sweep.bed.slurm("scontrol", "show", "hostnames", nodelists[str(row["slurm_job_id"])]).stdout
        assert sorted(listed.split()) == sorted([row["server_host"], row["client_host"]])
        # The client reached the server over the nodes' network, never loopback.
        assert record["network"]["server_peers"] == [record["network"]["client_address"]]
        assert record["network"]["server_address"] != record["network"]["client_address"]
        assert record["pinning"]["same_host"] is False
    return records


@pytest.fixture(autouse=True)
def whole_cluster(slurm_bed: SlurmBed) -> Any:
    slurm_bed.resume_all()
    yield
    slurm_bed.resume_all()


def test_readme_commands_run_every_run_as_a_two_node_job(slurm_bed: SlurmBed, slurm_db: str) -> None:
    commands = readme_commands()
    assert len(commands) == 4, commands
    plain, accounted, constrained, _grouped = commands
    sweep = Sweep(slurm_bed, slurm_db, "slurmplain", plain)
    sweep.run()
    records = assert_once_each(sweep)
    assert {r["slurm"]["partition"] for r in records.values()} == {"demux"}  # the default partition
    assert {r["slurm"]["account"] for r in records.values()} == {"demuxlab"}  # the user's default
    nodes = (sweep.work / "results" / "slurmplain" / "report" / "nodes.csv").read_text()
    assert "quarantined" in nodes.splitlines()[0]

    sweep = Sweep(slurm_bed, slurm_db, "slurmacct", accounted)
    sweep.run()
    records = assert_once_each(sweep)
    assert {(r["slurm"]["partition"], r["slurm"]["account"]) for r in records.values()} == {
        ("demux", "demuxlab")
    }

    sweep = Sweep(slurm_bed, slurm_db, "slurmfeat", constrained)
    sweep.run()
    records = assert_once_each(sweep)
    for r in records.values():  # the constraint: only the nodes with feature tbclass1 (pair tb1's hosts)
        assert set(r["slurm"]["nodes"].values()) == {"tb1-server", "tb1-client"}
        assert all("tbclass1" in f for f in r["slurm"]["features"].values())
    # The time margin: a lane's two runs are one job (group_runs: 0 takes the whole lane here), its limit
    # the first run's warm-up + measure (1.5 s) + 30 s slack + 120 s margin (3 min) and the second's 1.5 s +
    # 30 s (1 min): 4 minutes (sacct's Timelimit).
    ids = ",".join(sorted({str(r["slurm"]["job_id"]) for r in records.values()}))
    limits = slurm_bed.slurm("sacct", "-X", "-n", "-P", "-o", "Timelimit", "-j", ids).stdout.split()
    assert limits == ["00:04:00", "00:04:00"]


def assert_failed_by_node(attempt: dict[str, Any], down: str) -> None:
    """The attempt on a node taken down ended in one of the two ways the race allows, each naming the node:
    Slurm ended the job (NODE_FAIL) before the job wrote an outcome, or the job saw its run fail first and
    wrote it, with the node's state Slurm reported."""
    reason = attempt["reason"] or ""
    if attempt["outcome"] == "died":
        assert "NODE_FAIL" in reason and down in reason, attempt
    else:
        assert attempt["outcome"] == "failed" and f"Slurm reports {down} down" in reason, attempt


def test_a_node_down_mid_run_fails_only_that_attempt(slurm_bed: SlurmBed, slurm_db: str) -> None:
    sweep = Sweep(slurm_bed, slurm_db, "slurmdown", readme_commands()[0], measure=20, notifiers="poll")
    proc = sweep.start()
    run_id, job = next(iter(wait_for("a run in flight", sweep.started, proc, sweep).items()))
    nodes = sweep.attempts(run_id)[-1]["nodes"]
    down = nodes[1]  # the client's node
    slurm_bed.slurm("scontrol", "update", f"nodename={down}", "state=down", "reason=demuxlab-test")
    sweep.finish(proc)
    records = assert_once_each(sweep)
    final = records[run_id]
    assert final["attempt"] == 2 and down not in final["slurm"]["nodes"].values()
    attempts = sweep.attempts(run_id)
    first = next(a for a in attempts if a["job_id"] == job)
    assert_failed_by_node(first, down)
    assert [a["outcome"] for a in attempts if a["job_id"] != job] == ["ok"]
    assert json.loads((sweep.state / "nodes" / f"{down}.json").read_text())["failed"] == 1
    # The other run of the sweep was not touched by the fault.
    others = [r for rid, r in records.items() if rid != run_id]
    assert others and all(r["attempt"] == 1 for r in others)


def test_controller_killed_and_rerun_loses_and_doubles_nothing(slurm_bed: SlurmBed, slurm_db: str) -> None:
    sweep = Sweep(slurm_bed, slurm_db, "slurmkill", readme_commands()[0], measure=15)
    proc = sweep.start()
    in_flight = wait_for(
        "two runs in flight", lambda: sweep.started() if len(sweep.started()) >= 2 else None, proc, sweep
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert sweep.queued(), "the killed controller's jobs must still be in Slurm"
    sweep.run()  # the same command, typed again: no --unlock, no cleanup
    records = assert_once_each(sweep)
    for run_id, job in in_flight.items():
        # The job left running was waited for and its measurement kept: the final record is that job's, and
        # the run was started once (the rerun's job only put the record back).
        assert records[run_id]["slurm"]["job_id"] == job
        assert [a["job_id"] for a in sweep.attempts(run_id)] == [job]
    assert not sweep.queued()


def groups_of(records: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Group id -> its runs' ids, in the order they started."""
    out: dict[str, list[str]] = {}
    for rid, r in sorted(records.items(), key=lambda kv: kv[1]["started_at"]):
        out.setdefault(r["slurm"]["group"], []).append(rid)
    return out


def test_a_lanes_runs_are_one_group_job_each_run_its_own_record(slurm_bed: SlurmBed, slurm_db: str) -> None:
    grouped = readme_commands()[3]
    assert "group_runs: 2" in grouped, grouped
    sweep = Sweep(slurm_bed, slurm_db, "slurmgroup", grouped)
    sweep.spec.write_text(sweep.spec.read_text().replace("repeats: 2", "repeats: 4"))  # 8 runs, 2 lanes
    sweep.run()
    records = assert_once_each(sweep)
    groups = groups_of(records)
    plan = json.loads((sweep.work / "results" / "plans" / "slurmgroup.json").read_text())
    order = [r["run_id"] for r in plan["runs"]]
    assert len(groups) == 4 and all(len(g) == 2 for g in groups.values()), groups
    for runs in groups.values():
        # One Slurm job, two nodes, its runs one after the other in the lane's order (runs i, i + lanes).
        assert len({records[r]["slurm"]["job_id"] for r in runs}) == 1
        assert len({records[r]["pair"]["name"] for r in runs}) == 1
        first, second = (order.index(r) for r in runs)
        assert second == first + 2
        assert records[runs[0]]["finished_at"] <= records[runs[1]]["started_at"]
        # Each run its own facts and pinning (the facts step per run), its own attempt.
        assert all(records[r]["attempt"] == 1 and records[r]["pinning"]["same_host"] is False for r in runs)
    # Four jobs for eight runs; each job's limit two runs plus the margin: (1.5 + 30 + 300) s and
    # (1.5 + 30) s, 6 + 1 minutes.
    ids = sorted({str(r["slurm"]["job_id"]) for r in records.values()})
    assert len(ids) == 4
    limits = slurm_bed.slurm("sacct", "-X", "-n", "-P", "-o", "Timelimit", "-j", ",".join(ids)).stdout.split()
    assert limits == ["00:07:00"] * 4
    progress = json.loads(
        subprocess.run(
            [str(BIN / "demuxlab"), "slurm", "progress", "--json", "--slurm-state", str(sweep.state)],
            capture_output=True, text=True, check=True, env=sweep.env,
        ).stdout
    )  # fmt: skip
    assert sorted(g["group"] for g in progress["groups"]) == sorted(groups)
    assert all(g["runs_done"] == 2 for g in progress["groups"])
    nodes = (sweep.work / "results" / "slurmgroup" / "report" / "nodes.csv").read_text().splitlines()
    assert "groups" in nodes[0].split(",")


def test_a_node_down_mid_group_keeps_its_finished_runs(slurm_bed: SlurmBed, slurm_db: str) -> None:
    sweep = Sweep(
        slurm_bed, slurm_db, "slurmgdown",
        "../.venv/bin/snakemake --profile slurm all --config 'slurm={pairs: 1, group_runs: 2}'",
        measure=20, notifiers="poll",
    )  # fmt: skip
    proc = sweep.start()
    # The group's second run in flight: its first is done in the same job.
    second = wait_for(
        "a group's second run in flight", lambda: len(sweep.records()) == 1 and sweep.started(), proc, sweep
    )
    run_id, job = next(iter(second.items()))
    done_id = next(iter(sweep.records()))
    assert done_id != run_id
    down = sweep.attempts(run_id)[-1]["nodes"][1]
    slurm_bed.slurm("scontrol", "update", f"nodename={down}", "state=down", "reason=demuxlab-test")
    sweep.finish(proc)
    records = assert_once_each(sweep)
    # The finished run kept: its record the first job's, started once; the run in flight retried elsewhere.
    assert records[done_id]["slurm"]["job_id"] == job and records[done_id]["attempt"] == 1
    assert [a["job_id"] for a in sweep.attempts(done_id)] == [job]
    final = records[run_id]
    assert final["attempt"] == 2 and down not in final["slurm"]["nodes"].values()
    first = next(a for a in sweep.attempts(run_id) if a["job_id"] == job)
    assert_failed_by_node(first, down)
    assert json.loads((sweep.state / "nodes" / f"{down}.json").read_text())["failed"] == 1


def test_controller_killed_mid_group_and_rerun_runs_nothing_twice(slurm_bed: SlurmBed, slurm_db: str) -> None:
    sweep = Sweep(
        slurm_bed, slurm_db, "slurmgkill",
        "../.venv/bin/snakemake --profile slurm all --config 'slurm={pairs: 1, group_runs: 4}'",
        measure=8,
    )  # fmt: skip
    proc = sweep.start()
    wait_for(
        "a group's second run in flight", lambda: len(sweep.records()) >= 1 and sweep.started(), proc, sweep
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    queued = sweep.queued()
    assert len(queued) == 1, "the killed controller's group job must still be in Slurm"
    sweep.run()  # the same command, typed again
    records = assert_once_each(sweep)
    assert len(records) == 4
    for run_id, record in records.items():
        # Every run measured by the group job the killed controller submitted, and started once: the rerun
        # waited for that job and its new job only put the records back.
        assert str(record["slurm"]["job_id"]) == queued[0]
        assert [a["job_id"] for a in sweep.attempts(run_id)] == [int(queued[0])]
    assert not sweep.queued()


BAD = [
    (
        "slurm={partition: nosuch}",
        r"slurm\.partition: no partition 'nosuch' on this cluster \(partitions: demux, short\)",
    ),
    ("slurm={account: nosuch}", r"slurm\.account: 'nosuch' is not an account of user \S+ on this cluster"),
    ("slurm={account: other}", r"slurm\.account: 'other' is not an account of user \S+ on this cluster"),
    ("slurm={constraint: nosuch}", r"slurm\.constraint: 'nosuch': no node has it in partition 'demux'"),
    (
        "slurm={partition: short}",
        r"slurm\.partition: 'short' allows jobs of 1 min, shorter than a run's time limit",
    ),
    (
        "slurm={constraint: tbclass1}",
        r"slurm\.partition: fewer than 2 nodes available in 'demux' with constraint",
    ),
    ("slurm={conf: no/such/slurm.conf}", r"slurm\.conf: \S*no/such/slurm\.conf: no such file"),
    (
        "slurm={partition: short, time_margin_s: 0, group_runs: 3}",
        r"slurm\.group_runs: 3: a job of 3 runs of 'slurmbad' needs 3 min .* partition 'short' allows 1 min",
    ),
]


@pytest.mark.parametrize(("setting", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_settings_fail_before_the_first_job(
    slurm_bed: SlurmBed, slurm_db: str, setting: str, message: str
) -> None:
    import re

    name = "slurmbad"
    sweep = Sweep(
        slurm_bed, slurm_db, name, f"../.venv/bin/snakemake --profile slurm all --config '{setting}'"
    )
    if "tbclass1" in setting:  # one of the class's two nodes drained: one node left for a run of two
        slurm_bed.slurm("scontrol", "update", "nodename=tb1-client", "state=drain", "reason=demuxlab-test")
    if "conf:" in setting:
        sweep.env.pop("SLURM_CONF")
    before = sweep.queued()
    proc = sweep.start()
    rc = proc.wait(timeout=300)
    out = sweep.log.read_text(errors="replace")
    sweep.log.unlink()
    errors = [line for line in out.splitlines() if line.startswith("demuxlab: error:")]
    assert rc != 0 and len(errors) == 1, out[-3000:]
    assert re.search(message, errors[0]), errors[0]
    assert "Traceback" not in out
    assert sweep.queued() == before == []  # nothing was submitted
    assert not (sweep.work / ".snakemake" / "slurm_logs").exists()
    assert not (sweep.work / "results" / name / "runs").exists()

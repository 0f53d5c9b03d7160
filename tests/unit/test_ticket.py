"""The run ticket (CONTRACTS.md §4a) and the one run entry point, demuxlab-run: the plan writes each run's
ticket, the run job trusts it only for the spec bytes it was made from, its point is the plan's, and the
job's start-up (a whole simulated cluster run) loads no spec library, YAML, numpy or click."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from demuxlab.errors import DemuxlabError
from demuxlab.launch.sim import SimLauncher
from demuxlab.runpoint_lean import main
from demuxlab.spec import load_spec, run_id, run_order
from demuxlab.stats import steady_state
from demuxlab.ticket import read_ticket

BIN = Path(sys.executable).parent
SPEC = """name: lean
reproduces: none
launcher: native
seed: 3
repeats: 2
phases: {warmup_s: 0, measure_s: 0.2, cooldown_s: 0}
calibration: {repeats: 0}
designs:
  - {pattern: reactor, notifiers: [poll, epoll-lt]}
matrix: {threads: [1], work_us: [0], connections: [8], msg_size: [1]}
"""
# What no run job may load (start-up is paid per run on a sweep's controller): the spec package and its
# libraries, the models, the command line's click, the database.
HEAVY = ("numpy", "scipy", "jsonschema", "yaml", "click", "sqlalchemy", "demuxlab.spec", "demuxlab.ctmc")


@pytest.fixture
def planned(tmp_path: Path) -> tuple[Path, Path, dict[str, object]]:
    """A spec, its tickets folder and its plan, as `demuxlab plan SPEC --tickets DIR` writes them."""
    spec_path = tmp_path / "lean.yaml"
    spec_path.write_text(SPEC)
    tickets = tmp_path / "results" / "lean" / "tickets"
    res = subprocess.run(
        [BIN / "demuxlab", "plan", spec_path, "--tickets", tickets],
        capture_output=True,
        text=True,
        check=True,
    )
    return spec_path, tickets, json.loads(res.stdout)


def sim_argv(ticket: Path, tmp_path: Path, out: Path) -> list[str]:
    sim = tmp_path / "sim.json"
    sim.write_text('{"simulated": {"pairs": 2}}')
    return [
        str(ticket), "--out", str(out), "--launcher", "sim", "--pairs-from", str(sim),
        "--cluster-state", str(tmp_path / "results" / "cluster"), "--git-rev", "rev1",
    ]  # fmt: skip


def test_a_runs_point_from_its_ticket_is_the_plans(planned: tuple[Path, Path, dict[str, object]]) -> None:
    spec_path, tickets, plan = planned
    spec = load_spec(spec_path)
    expected = {run_id(spec, point, repeat): (point, repeat) for point, repeat in run_order(spec)}
    runs = plan["runs"]
    assert isinstance(runs, list) and [r["run_id"] for r in runs] == list(expected)
    assert sorted(p.stem for p in tickets.glob("*.json")) == sorted(expected)
    for run in runs:
        ticket = read_ticket(tickets / f"{run['run_id']}.json")
        point, repeat = expected[ticket.run_id]
        assert (ticket.point, ticket.repeat) == (point, repeat)
        assert (run["point_key"], run["repeat"]) == (point.point_key, repeat)
        assert ticket.spec_sha256 == spec.sha256 and ticket.spec_text == SPEC
        assert ticket.phases == spec.phases and ticket.launcher == "native" and ticket.steady is None
        # The plan keeps what the DAG needs; the point itself is the ticket's alone.
        assert set(run) == {"run_id", "point_key", "repeat", "instrument"}


def test_a_ticket_whose_spec_changed_is_refused_in_one_line(
    planned: tuple[Path, Path, dict[str, object]], tmp_path: Path
) -> None:
    spec_path, tickets, plan = planned
    rid = plan["runs"][0]["run_id"]  # type: ignore[index]
    ticket = tickets / f"{rid}.json"
    spec_path.write_text(SPEC.replace("seed: 3", "seed: 4"))
    out = tmp_path / "results" / "lean" / "runs" / f"{rid}.json"
    proc = subprocess.run(
        [BIN / "demuxlab-run", *sim_argv(ticket, tmp_path, out)], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    now, planned_sha = load_spec(spec_path).sha256, hashlib.sha256(SPEC.encode()).hexdigest()
    assert lines[0] == (
        f"demuxlab: error: {ticket}: spec_sha256: {spec_path} now hashes to {now}, the ticket's is "
        f"{planned_sha}: the spec changed since the plan (rerun the workflow, or `demuxlab plan`)"
    )
    assert not out.exists()


def test_run_job_loads_no_spec_yaml_numpy_or_click(
    planned: tuple[Path, Path, dict[str, object]], tmp_path: Path
) -> None:
    """Import time, and a whole simulated cluster run through the entry point, in a fresh interpreter."""
    _, tickets, plan = planned
    rid = plan["runs"][0]["run_id"]  # type: ignore[index]
    out = tmp_path / "results" / "lean" / "runs" / f"{rid}.json"
    imports = (
        "import demuxlab.runpoint_lean, demuxlab.runpoint, demuxlab.ticket, demuxlab.cluster.run,"
        " demuxlab.slurm.job, demuxlab.launch.sim, demuxlab.launch.native, demuxlab.launch.docker"
    )
    probe = (
        f"import sys; print(','.join(m for m in sys.modules if m in {HEAVY!r} or m.split('.')[0] in {HEAVY!r}"
    )
    probe += " or any(m.startswith(h + '.') for h in " + repr(HEAVY) + ")))"
    before = subprocess.run(
        [sys.executable, "-c", f"{imports}; {probe}"], capture_output=True, text=True, check=True
    )
    assert before.stdout.strip() == ""
    argv = sim_argv(tickets / f"{rid}.json", tmp_path, out)
    run = f"import demuxlab.runpoint_lean as m; rc = m.main({argv!r}); assert rc == 0, rc; {probe}"
    env = {**os.environ, "DEMUXLAB_LEASE_DIR": str(tmp_path / "leases")}
    after = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, check=True, env=env)
    assert after.stdout.strip() == "", after.stdout
    assert json.loads(out.read_text())["status"] == "ok"


@pytest.mark.parametrize("n", [1, 2, 3, 60])
def test_sim_statistics_equal_steady_state(n: int) -> None:
    series = [1234.0] * n
    assert SimLauncher().steady_stats(series) == steady_state(series).to_json()


def test_sim_run_writes_the_record_and_counts_its_cpu(
    planned: tuple[Path, Path, dict[str, object]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_path, tickets, _ = planned
    monkeypatch.setenv("DEMUXLAB_LEASE_DIR", str(tmp_path / "leases"))
    spec = load_spec(spec_path)
    point, repeat = run_order(spec)[0]
    rid = run_id(spec, point, repeat)
    record_path = tmp_path / "results" / "lean" / "runs" / f"{rid}.json"
    assert main(sim_argv(tickets / f"{rid}.json", tmp_path, record_path)) == 0
    record = json.loads(record_path.read_text())
    assert record["run_id"] == rid and record["status"] == "ok"
    assert record["point"] == point.to_json() and record["repeat"] == repeat
    assert record["experiment"]["spec_sha256"] == spec.sha256 and record["experiment"]["git_rev"] == "rev1"
    assert record["experiment"]["spec_text"] == SPEC
    assert record["stats"]["stationary"] is None  # 0.2 s: one sample
    assert record["host_pair"] in ("sim-000", "sim-001")
    # The run process's own CPU, start-up included (here the test process's): positive, in seconds, and no
    # more than this process has used by now (not its children's, not a clock's).
    use = resource.getrusage(resource.RUSAGE_SELF)
    assert 0 < record["scheduling"]["runner_cpu_s"] <= use.ru_utime + use.ru_stime + 0.001


def test_run_point_by_hand_builds_the_plans_ticket(
    planned: tuple[Path, Path, dict[str, object]], tmp_path: Path
) -> None:
    """`demuxlab run-point SPEC --run-id ID` runs the ticket the plan would have written, by the same path:
    the same record but for its times, measurements and the revision."""
    spec_path, tickets, plan = planned
    rid = plan["runs"][1]["run_id"]  # type: ignore[index]
    env = {**os.environ, "DEMUXLAB_LEASE_DIR": str(tmp_path / "leases")}
    by_ticket, by_hand = tmp_path / "a" / "runs" / "r.json", tmp_path / "b" / "runs" / "r.json"
    argv = sim_argv(tickets / f"{rid}.json", tmp_path, by_ticket)
    subprocess.run([BIN / "demuxlab-run", *argv], check=True, env=env, capture_output=True)
    subprocess.run(
        [BIN / "demuxlab", "run-point", spec_path, "--run-id", rid, "--out", by_hand, *argv[3:-2]],
        check=True,
        env=env,
        capture_output=True,
    )
    a, b = (json.loads(p.read_text()) for p in (by_ticket, by_hand))
    for key in ("run_id", "point", "repeat", "phases", "launcher", "status"):
        assert a[key] == b[key], key
    a["experiment"].pop("git_rev"), b["experiment"].pop("git_rev")
    assert a["experiment"] == b["experiment"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{}", "format: not a demuxlab.ticket/1 document"),
        ("[1", "ticket unreadable: "),
        ('{"format": "demuxlab.ticket/1", "spec": "/nowhere/x.yaml"}', "spec: /nowhere/x.yaml: cannot read"),
    ],
)
def test_a_bad_ticket_is_one_line(tmp_path: Path, content: str, problem: str) -> None:
    bad = tmp_path / "ticket.json"
    bad.write_text(content)
    proc = subprocess.run(
        [sys.executable, "-m", "demuxlab.runpoint_lean", str(bad), "--out", str(tmp_path / "r.json")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"demuxlab: error: {bad}: {problem}"), proc.stderr


def test_a_ticket_of_another_run_is_refused(planned: tuple[Path, Path, dict[str, object]]) -> None:
    _, tickets, plan = planned
    first, second = (r["run_id"] for r in plan["runs"][:2])  # type: ignore[index]
    with pytest.raises(DemuxlabError, match=f"run_id: '{first}' is not run '{second}'"):
        read_ticket(tickets / f"{first}.json", run_id=second)

"""kill -9 in the middle of a sweep, then the command as typed again (issue "Crash-safe sweeps").

One sweep of six short runs is killed twice: first only the Snakemake controller (its run in flight
lives on as an orphan), then the whole process group of a second controller. The third controller must
finish the sweep. Throughout, /proc is sampled: never two servers of this test alive at once on the one
pair. At the end: every run once in the database, none lost, none duplicated, no process left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from test_workflow import RUNS_SQL, rows, snakemake_cmd

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(600)]

SPEC = """\
name: crash
description: "Crash test: six short runs, no model stages."
reproduces: none
launcher: native
seed: 3
repeats: 3
phases: {warmup_s: 0.3, measure_s: 1.5, cooldown_s: 0}
calibration: {repeats: 0}
client: {threads: 1, rate: null}
designs:
  - {pattern: reactor, notifiers: [epoll-lt, poll]}
matrix: {threads: [1], work_us: [0], connections: [8], msg_size: [1]}
"""
RUNS = 6


def tagged(tag: str, name: str) -> list[int]:
    """Pids of processes running ``name`` whose environment carries this test's tag."""
    found = []
    marker = f"DEMUXLAB_CRASH_TAG={tag}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            if name.encode() not in cmdline.split(b"\0", 1)[0]:
                continue
            if marker in Path(f"/proc/{entry.name}/environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


class Sampler(threading.Thread):
    """Counts this test's live servers every 0.05 s; ``most`` is the largest count seen."""

    def __init__(self, tag: str) -> None:
        super().__init__(daemon=True)
        self.tag, self.most, self.samples, self.stop = tag, 0, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.most = max(self.most, len(tagged(self.tag, "demux-server")))
            self.samples += 1
            time.sleep(0.05)


def start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for(cond, proc: subprocess.Popen[bytes], log: Path, what: str, timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"controller ended before {what}: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_kill_9_then_rerun_as_typed(tmp_path: Path, database_url: str) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "crash.yaml").write_text(SPEC)
    work = tmp_path / "work"
    cmd = snakemake_cmd(work, "experiments=[crash]", specs=specs)
    tag = uuid.uuid4().hex
    env = {**os.environ, "DEMUXLAB_CRASH_TAG": tag}
    ingested = work / "results" / "crash" / "ingested"
    log = tmp_path / "workflow.log"
    sampler = Sampler(tag)
    sampler.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # 1. Kill only the controller while a run is in flight: its run-point, server and client live on.
        first = start(cmd, log, env)
        procs.append(first)
        wait_for(lambda: len(list(ingested.glob("*.json"))) >= 1, first, log, "a first ingested run")
        # in flight: its client alive too (a server alone may be one stopping after its client's end, whose
        # run-point then exits before the kill is seen)
        wait_for(
            lambda: bool(tagged(tag, "demux-server")) and bool(tagged(tag, "demux-client")),
            first,
            log,
            "a run in flight",
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        orphan_runs = tagged(tag, "demux-client") + tagged(tag, "demux-server")

        # 2. The command as typed, at once: it must start (no lock to remove), then is killed whole.
        second = start(cmd, log, env)
        procs.append(second)
        done = len(list(ingested.glob("*.json")))
        wait_for(lambda: len(list(ingested.glob("*.json"))) > done, second, log, "progress after the rerun")
        wait_for(lambda: bool(tagged(tag, "demux-server")), second, log, "a run in flight after the rerun")
        os.killpg(second.pid, signal.SIGKILL)
        second.wait()
        # The server and client of the killed run die with their run-point (PR_SET_PDEATHSIG).
        deadline = time.monotonic() + 5
        while tagged(tag, "demux-server") and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = tagged(tag, "demux-server")

        # 3. Once more as typed: it finishes the sweep.
        third = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400, check=False)
    finally:
        sampler.stop.set()
        sampler.join()
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    text = log.read_text() + third.stderr
    assert third.returncode == 0, third.stderr[-3000:]
    assert "cannot be locked" not in text and "another workflow controller" not in text
    assert orphan_runs, "killing the controller alone should leave its run in flight"
    assert survivors == []
    assert sampler.samples > 100 and sampler.most == 1, f"{sampler.most} servers alive at once"
    runs = rows(database_url, RUNS_SQL, name="crash")
    assert len(runs) == RUNS and len({r["run_id"] for r in runs}) == RUNS
    assert all(r["status"] == "ok" for r in runs), [r["failure_reason"] for r in runs]
    dup = rows(database_url, "select run_id, second, count(*) from samples group by 1, 2 having count(*) > 1")
    assert dup == []
    assert tagged(tag, "demux-server") == [] and tagged(tag, "demux-client") == []
    print(f"crash test: {sampler.samples} samples of /proc, at most {sampler.most} server", file=sys.stderr)


def test_second_live_controller_is_refused(tmp_path: Path) -> None:
    from demuxlab.lease import LeaseBusy, hold_controller

    with hold_controller(tmp_path):
        code = f"from demuxlab.lease import hold_controller; hold_controller({str(tmp_path)!r})"
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert res.returncode != 0 and "another workflow controller is running" in res.stderr
        with pytest.raises(LeaseBusy, match=f"running in {tmp_path} \\(pid {os.getpid()}"):
            hold_controller(tmp_path)
    # Released with its holder: the next one takes it.
    hold_controller(tmp_path).release()


def test_controller_lock_is_held_on_the_controllers_descriptor(tmp_path: Path) -> None:
    """The workflow's onstart (rules/lock.smk): the controller opens the lock file and `demuxlab
    controller-lock` takes the flock on that descriptor. The lock outlives the command (it is the open
    file's), names the controller, refuses a second controller, and goes with the controller's descriptor."""
    from demuxlab.lease import CONTROLLER_LOCK, LeaseBusy, hold_controller

    (tmp_path / ".snakemake").mkdir()
    fd = os.open(tmp_path / CONTROLLER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    cli = [str(Path(sys.executable).with_name("demuxlab")), "controller-lock", str(tmp_path), "--fd", str(fd)]
    try:
        taken = subprocess.run(
            [*cli, "--pid", str(os.getpid())], pass_fds=(fd,), capture_output=True, text=True
        )
        assert taken.returncode == 0, taken.stderr
        with pytest.raises(
            LeaseBusy, match=f"another workflow controller is running .* \\(pid {os.getpid()} on"
        ):
            hold_controller(tmp_path)
        fd2 = os.open(tmp_path / CONTROLLER_LOCK, os.O_RDWR)
        try:
            again = subprocess.run(
                [*cli[:-1], str(fd2), "--pid", "1"], pass_fds=(fd2,), capture_output=True, text=True
            )
        finally:
            os.close(fd2)
        lines = again.stderr.strip().splitlines()
        assert again.returncode != 0 and len(lines) == 1, again.stderr
        assert lines[0].startswith(f"demuxlab: error: another workflow controller is running in {tmp_path}")
    finally:
        os.close(fd)
    hold_controller(tmp_path).release()  # the controller's descriptor closed: free

"""Pair leases (demuxlab.lease): exclusive, named, freed when the holder dies, orphans proven and ended."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from demuxlab import lease
from demuxlab.errors import ConfigError
from helpers.load import Span, within


@pytest.fixture(autouse=True)
def lease_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "leases"
    monkeypatch.setenv("DEMUXLAB_LEASE_DIR", str(d))
    return d


# A holder in another process: takes the lease, optionally starts a child that inherits the lock's
# descriptor (without dying with its parent: a would-be orphan), prints "held <child pid>", sleeps.
HOLDER = textwrap.dedent(
    """
    import subprocess, sys, time
    from demuxlab import lease
    held = lease.acquire(sys.argv[1], "run-holder", wait_s=5)
    child = 0
    if sys.argv[2] == "child":
        p = subprocess.Popen(["sleep", "60"], pass_fds=(held.fd,))
        held.add_child(p.pid, "server")
        child = p.pid
    print("held", child, flush=True)
    time.sleep(60)
    """
)


@pytest.fixture
def spawn_holder() -> Iterator[object]:
    procs: list[subprocess.Popen[str]] = []
    children: list[int] = []

    def spawn(pair: str, child: bool = False) -> tuple[subprocess.Popen[str], int]:
        p = subprocess.Popen(
            [sys.executable, "-c", HOLDER, pair, "child" if child else "none"],
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        procs.append(p)
        assert p.stdout is not None
        line = p.stdout.readline().split()
        assert line and line[0] == "held", line
        if int(line[1]):
            children.append(int(line[1]))
        return p, int(line[1])

    yield spawn
    for p in procs:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_acquire_release_and_holder() -> None:
    assert lease.holder("local") is None
    with lease.acquire("local", "r1", wait_s=0) as held:
        info = lease.holder("local")
        assert info is not None
        assert info["run_id"] == "r1" and info["pid"] == os.getpid() and info["pair"] == "local"
        # The same process cannot take it twice either: flock is per open file.
        assert lease.try_acquire("local", "r2", reap=False) is None
        assert held.held
    assert lease.holder("local") is None
    again = lease.try_acquire("local", "r3")
    assert again is not None
    again.release()
    again.release()  # idempotent


def test_busy_pair_waits_then_names_the_holder(spawn_holder) -> None:  # type: ignore[no-untyped-def]
    proc, _ = spawn_holder("pair-a")
    assert lease.try_acquire("pair-a", "mine") is None  # live holder: not an orphan, nothing killed
    with (
        Span() as span,
        pytest.raises(lease.LeaseBusy, match=r"pair 'pair-a' is held by run 'run-holder' \(pid \d+"),
    ):
        lease.acquire("pair-a", "mine", wait_s=0.3)
    assert span.wall_s >= 0.3
    assert proc.poll() is None
    # Another pair is independent.
    with lease.acquire("pair-b", "mine", wait_s=0):
        pass
    within(span, 3, "giving up on a busy pair after wait_s=0.3")


def test_lease_dies_with_its_holder(spawn_holder) -> None:  # type: ignore[no-untyped-def]
    proc, _ = spawn_holder("local")
    assert lease.holder("local") is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Span() as span, lease.acquire("local", "after", wait_s=5) as held:
        assert held.info["run_id"] == "after"
    within(span, 1.0, "taking the lease of a killed holder")


def test_orphan_that_keeps_the_pair_is_proven_and_ended(spawn_holder) -> None:  # type: ignore[no-untyped-def]
    proc, child = spawn_holder("local", child=True)
    assert lease.orphans("local") == []  # holder alive: its child is no orphan
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # The child outlived its parent and still holds the lock through the inherited descriptor.
    assert Path(f"/proc/{child}").exists()
    assert lease.holder("local") is not None
    assert lease.orphans("local") == [child]
    with lease.acquire("local", "after", wait_s=5):
        time.sleep(0.05)
        stat = Path(f"/proc/{child}/stat")
        assert not stat.exists() or stat.read_text().split(") ")[1].startswith("Z")


def test_waiting_for_a_holder_that_finishes() -> None:
    held = lease.acquire("local", "first", wait_s=0)
    code = "from demuxlab import lease; print(lease.acquire('local', 'second', wait_s=10).info['run_id'])"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert p.poll() is None  # still waiting
    held.release()
    out, _ = p.communicate(timeout=10)
    assert p.returncode == 0 and out.strip() == "second"


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "x" * 101, "sp ace"])
def test_bad_pair_names(bad: str) -> None:
    with pytest.raises(ConfigError, match="not a valid name"):
        lease.try_acquire(bad, "r")

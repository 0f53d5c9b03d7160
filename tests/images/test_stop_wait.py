"""A stop reaches a thread in an instrumented wait (images/server/src/instr.h, notifier_wait_timed).

With --instrument a wait is two calls: a non-blocking one, then a blocking one if it returned nothing.
The stop's wake() comes after the stop flag is set, and every back-end drains its kick (or reaps its no-op)
in any call, so a wake-up that lands just before the first call is taken by it; the second would then block
for good. CI saw it once: LF over select, three threads, under TSan, never exited on SIGTERM. The checks
live in images/server/tests/test_stop_wait.c; this test compiles it with the project's warning flags
against every notifier back-end and runs it.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from demuxlab.vocab import NOTIFIERS
from helpers.cbuild import base_cflags, cc

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "images" / "server" / "src"
COMMON = REPO / "images" / "common"
TEST_C = REPO / "images" / "server" / "tests" / "test_stop_wait.c"
# Every notifier with a back-end (tpc's "none" has none), in the vocabulary's order, the C table's.
READINESS = [n for n in NOTIFIERS if n != "none"]


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("stop-wait") / "test_stop_wait"
    sources = [
        TEST_C,
        *sorted(SRC.glob("notify_*.c")),
        SRC / "notifiers.c",
        SRC / "instr.c",
        SRC / "fatal.c",
        *sorted(COMMON.glob("*.c")),
    ]
    build = subprocess.run(
        [cc(), *base_cflags(), "-pthread", f"-I{SRC}", *map(str, sources), "-o", str(exe), "-luring", "-lm"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert build.returncode == 0, build.stderr
    return exe


def test_a_wait_after_the_stop_wake_up_returns(program: Path) -> None:
    """Every readiness notifier: the stop's wake-up, then an instrumented wait with the stop flag set,
    returns 0 at once (a hung wait is ended by the program's 2 s alarm, and fails here)."""
    run = subprocess.run([str(program), "stop"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, (run.returncode, run.stderr)
    assert run.stdout.split() == [*READINESS, "ok"]


@pytest.mark.parametrize("notifier", READINESS)
def test_without_the_flag_the_wait_would_hang(program: Path, notifier: str) -> None:
    """The check above can fail: with the flag clear the same wait blocks (its first call took the wake-up),
    and the alarm ends it. This is the hang the flag check removes."""
    run = subprocess.run([str(program), "flag-off", notifier], capture_output=True, text=True, timeout=30)
    assert run.returncode == -signal.SIGALRM, (run.returncode, run.stdout, run.stderr)
    assert "returned" not in run.stdout

"""The notifier back-ends keep the contract of images/server/src/notifier.h where it is easy to get wrong:
write interest (arm_write, every readiness notifier), and the failures a real system rarely gives on
demand (issue 48, item 7): a poll notifier whose allocation fails, an io_uring submission that fails. The
checks live in images/server/tests/test_backends.c, which wraps malloc and io_uring_submit so that they
fail when a case asks; this test compiles it with the project's warning flags against every back-end."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from helpers.cbuild import base_cflags, cc

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "images" / "server" / "src"
COMMON = REPO / "images" / "common"
TEST_C = REPO / "images" / "server" / "tests" / "test_backends.c"
READINESS = ["select", "poll", "epoll-lt", "epoll-et", "uring"]


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("backends") / "test_backends"
    sources = [
        TEST_C,
        *sorted(SRC.glob("notify_*.c")),
        SRC / "notifiers.c",
        REPO / "images" / "common" / "sysc.c",
    ]
    build = subprocess.run(
        [
            *(cc(), *base_cflags(), "-pthread", f"-I{SRC}", *map(str, sources), "-o", str(exe)),
            *("-Wl,--wrap=malloc,--wrap=io_uring_submit", "-luring"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert build.returncode == 0, build.stderr
    return exe


def run(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("notifier", READINESS)
def test_write_interest(program: Path, notifier: str) -> None:
    res = run(program, "write", notifier)
    assert res.returncode == 0 and res.stdout.split() == ["ok"], (res.returncode, res.stderr)


def test_a_failed_poll_create_leaves_no_descriptor(program: Path) -> None:
    res = run(program, "poll-leak")
    assert res.returncode == 0 and res.stdout.split() == ["ok"], (res.returncode, res.stderr)


def test_an_arm_whose_submission_failed_stands(program: Path) -> None:
    """Before, arm() reported the failure while its poll stayed queued: the server then closed the
    descriptor, and the next submission polled whatever connection had that number by then."""
    res = run(program, "uring-submit")
    assert res.returncode == 0 and res.stdout.split() == ["ok"], (res.returncode, res.stderr)


def test_a_full_queue_that_cannot_be_submitted_fails_the_arm(program: Path) -> None:
    """Before, get_sqe retried the submission for good under the submission lock (the alarm ends it)."""
    res = run(program, "uring-full")
    assert res.returncode != -signal.SIGALRM, "the arm hung on a full queue"
    assert res.returncode == 0, (res.returncode, res.stderr)
    assert res.stdout.split()[0] == "ok" and int(res.stdout.split()[1]) > 0

"""demux-server under ASan+UBSan and under TSan: every pattern, a short exchange, shutdown."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from demuxlab import vocab
from helpers.server import ROOT, Server, build_target, connect, exchange, recv_exact

pytestmark = pytest.mark.sanitizer

CASES = [
    ("reactor", "epoll-lt", 1),
    ("hsha", "select", 3),
    ("hsha", "poll", 3),
    ("hsha", "epoll-lt", 3),
    ("hsha", "epoll-et", 3),
    ("lf", "select", 3),
    ("lf", "poll", 3),
    ("lf", "epoll-lt", 3),
    ("lf", "epoll-et", 3),
    ("tpc", "none", 4),
    ("proactor", "epoll-et", 3),
    ("uring", "uring", 3),
    ("uring-shared", "uring", 3),
    ("proactor", "poll", 4),
    ("multireactor", "poll", 2),
]
ENV = {
    "asan": {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"},
    "tsan": {"TSAN_OPTIONS": "halt_on_error=0:second_deadlock_stack=1"},
}
MARKERS = ("Sanitizer", "runtime error:", "LeakSanitizer")


@pytest.fixture(scope="session")
def sanitizer_bins() -> dict[str, Path]:
    build_target("../build/asan/bin/demux-server", "../build/tsan/bin/demux-server")
    return {kind: ROOT / "build" / kind / "bin" / "demux-server" for kind in ("asan", "tsan")}


@pytest.mark.parametrize("kind", ["asan", "tsan"])
@pytest.mark.parametrize(("pattern", "notifier", "threads"), CASES)
def test_no_sanitizer_report(
    run_server: Any, sanitizer_bins: dict[str, Path], kind: str, pattern: str, notifier: str, threads: int
) -> None:
    env = {**os.environ, **ENV[kind]}
    srv: Server = run_server(
        [
            "--pattern",
            pattern,
            "--notifier",
            notifier,
            "--threads",
            str(threads),
            "--msg-size",
            "300",
            "--instrument",
        ],
        binary=sanitizer_bins[kind],
        env=env,
    )
    conns = 3
    sent = exchange(srv.port, 300, connections=conns, rounds=15)
    # A disconnect mid-message exercises the close path under every pattern.
    half = connect(srv.port)
    half.sendall(b"x" * 150)
    half.close()
    sent += exchange(srv.port, 300, connections=conns, rounds=5)
    out = srv.stop()
    reports = [ln for ln in out.stderr.splitlines() if any(m in ln for m in MARKERS)]
    assert reports == [], out.stderr[-4000:]
    assert out.rc == 0, out.stderr[-4000:]
    assert out.json is not None
    assert out.json["messages"] == sent


# Every pattern in which a connection passes between threads: the multi-threaded patterns over every
# notifier (re-arm by one thread, EOF and close by the next; the claim protocol under epoll-et), the
# shared-ring proactor (completion thread and handlers), and the two that deal a new connection to
# another thread once (multireactor, uring).
NOTIFIERS = tuple(n for n in vocab.NOTIFIERS if n != "none")  # every readiness notifier
CHURN = [(p, n) for p in ("hsha", "lf", "proactor") for n in NOTIFIERS]
CHURN += [("uring-shared", "uring"), ("multireactor", "epoll-lt"), ("uring", "uring")]
CHURN_CLIENTS = 4
CHURN_EACH = 600  # connections per client thread: about a second at idle, where the old race showed
CHURN_MSG = 16


def _churn(port: int) -> tuple[int, int]:
    """Short connections from several threads: most send one message, read its echo and close at once
    (the server sees EOF right after its re-arm); every fourth sends half a message and closes.  Returns
    (connections made, echoes received)."""
    counts: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def client(seed: int) -> None:
        made = echoed = 0
        try:
            for _ in range(CHURN_EACH):
                with connect(port) as s:
                    made += 1
                    if (made + seed) % 4 == 0:
                        s.sendall(b"h" * (CHURN_MSG // 2))
                        continue
                    payload = os.urandom(CHURN_MSG)
                    s.sendall(payload)
                    assert recv_exact(s, CHURN_MSG) == payload
                    echoed += 1
        except BaseException as e:  # re-raised in the test's thread
            errors.append(e)
        counts.append((made, echoed))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CHURN_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


@pytest.mark.parametrize(("pattern", "notifier"), CHURN)
def test_connection_churn_has_no_race(
    run_server: Any, sanitizer_bins: dict[str, Path], pattern: str, notifier: str
) -> None:
    """Thousands of connections opened and closed while the server hands them between threads, under
    TSan: the thread that closes a descriptor must be ordered after every call another thread made on it
    (before the fix, hsha/lf/proactor over epoll-lt reported conn_close against lt_rearm's epoll_ctl
    within a second)."""
    env = {**os.environ, **ENV["tsan"]}
    srv: Server = run_server(
        ["--pattern", pattern, "--notifier", notifier, "--threads", "3", "--msg-size", str(CHURN_MSG)],
        binary=sanitizer_bins["tsan"],
        env=env,
    )
    made, echoed = _churn(srv.port)
    out = srv.stop()
    reports = [ln for ln in out.stderr.splitlines() if any(m in ln for m in MARKERS)]
    assert reports == [], out.stderr[-6000:]
    assert out.rc == 0, out.stderr[-4000:]
    assert out.json is not None
    assert made == CHURN_CLIENTS * CHURN_EACH and echoed == made * 3 // 4
    assert out.json["messages"] == echoed
    assert echoed <= out.json["connections_accepted"] <= made
    assert out.json["connections_closed"] == out.json["connections_accepted"]


@pytest.mark.parametrize("kind", ["asan", "tsan"])
def test_tpc_shutdown_with_open_connections_is_clean(
    run_server: Any, sanitizer_bins: dict[str, Path], kind: str
) -> None:
    """Connection threads blocked in recv at shutdown are woken, joined and freed: no leak, no race."""
    env = {**os.environ, **ENV[kind]}
    srv: Server = run_server(
        ["--pattern", "tpc", "--notifier", "none", "--threads", "2", "--msg-size", "8", "--instrument"],
        binary=sanitizer_bins[kind],
        env=env,
    )
    sent = exchange(srv.port, 8, connections=4, rounds=3)  # threads that ended before shutdown
    socks = [connect(srv.port) for _ in range(12)]
    try:
        # One echo each, so that all are accepted; then they sit blocked in recv, one mid-message.
        for i, s in enumerate(socks):
            s.sendall(f"open{i:04d}".encode())
        for i, s in enumerate(socks):
            assert recv_exact(s, 8) == f"open{i:04d}".encode()
        socks[6].sendall(b"half")
        out = srv.stop()
    finally:
        for s in socks:
            s.close()
    reports = [ln for ln in out.stderr.splitlines() if any(m in ln for m in MARKERS)]
    assert reports == [], out.stderr[-4000:]
    assert out.rc == 0, out.stderr[-4000:]
    assert out.json is not None
    assert out.json["messages"] == sent + 12
    assert out.json["connections_accepted"] == out.json["connections_closed"] == 4 + 12


def test_version_names_every_sanitizer_flag(sanitizer_bins: dict[str, Path]) -> None:
    """Provenance: the build info keeps flags whole, commas included."""
    import subprocess

    asan = subprocess.run(
        [str(sanitizer_bins["asan"]), "--version"], capture_output=True, text=True, check=True
    )
    assert "-fsanitize=address,undefined" in asan.stdout
    tsan = subprocess.run(
        [str(sanitizer_bins["tsan"]), "--version"], capture_output=True, text=True, check=True
    )
    assert "-fsanitize=thread" in tsan.stdout

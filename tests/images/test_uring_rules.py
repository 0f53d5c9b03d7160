"""The io_uring patterns (`uring`, `uring-shared`) keep issue 48's rules, with the real binaries:

- a slow reader (a connection that sends and never reads) beside others: the others keep being served,
  the server's memory stays bounded (a bounded send backlog per connection; `uring` stops receiving
  from it), and the slow one is closed after --stall-ms and counted in `connections_stalled`;
- a message counts when its echo completes, so `messages` is exactly what clients got back, also when
  a peer leaves with its echo unsent;
- no finished reply waits behind another message's work (seen in the kernel's receive timestamps of the
  replies: each went out at least one work apart, where batched replies leave together);
- rings for any descriptor limit (IORING_SETUP_CLAMP): every pair starts and serves with its tables
  and rings sized for 1,048,576 descriptors (DEMUX_NOFILE, since this host's limit cannot be raised);
- taking a submission queue entry gives up with a reason when submitting keeps failing.

C concurrency runs under ASan+UBSan and TSan too, as test_sanitizers.py does."""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.load import Claim, Span, settle
from helpers.server import ROOT, Server, build_target, connect, exchange, recv_exact

ENV = {
    "release": {},
    "asan": {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"},
    "tsan": {"TSAN_OPTIONS": "halt_on_error=0:second_deadlock_stack=1"},
}
MARKERS = ("Sanitizer", "runtime error:", "LeakSanitizer")
# (pattern, DEMUX_URING_DISABLE): uring with multishot receive (this kernel's default) and with the
# single-shot fallback, uring-shared (single-shot always).
PATHS = {
    "uring": ("uring", ""),
    "uring-single": ("uring", "recv_multishot"),
    "uring-shared": ("uring-shared", ""),
}
SO_TIMESTAMPNS = 35  # asm-generic/socket.h SO_TIMESTAMPNS_OLD (= SCM_TIMESTAMPNS); Python lacks the name
CFLAGS = ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"]  # images/Makefile's
KERNEL_MAX_CQ = 65536  # IORING_MAX_CQ_ENTRIES: what CLAMP gives a ring that asks for more


@pytest.fixture(scope="session")
def binaries() -> dict[str, Path]:
    paths = {kind: f"../build/{kind}/bin/demux-server" for kind in ("asan", "tsan")}
    paths["release"] = "../build/bin/demux-server"
    build_target(*paths.values())
    return {kind: ROOT / "images" / path for kind, path in paths.items()}


def start(
    run_server: Any, binaries: dict[str, Path], kind: str, path: str, args: list[str], **env: str
) -> Server:
    pattern, disable = PATHS[path]
    full = {**os.environ, **ENV[kind], **env}
    full.pop("DEMUX_URING_DISABLE", None)
    if disable:
        full["DEMUX_URING_DISABLE"] = disable
    srv: Server = run_server(
        ["--pattern", pattern, "--notifier", "uring", *args], binary=binaries[kind], env=full
    )
    return srv


def stop_clean(srv: Server) -> dict[str, Any]:
    out = srv.stop()
    reports = [ln for ln in out.stderr.splitlines() if any(m in ln for m in MARKERS)]
    assert reports == [], out.stderr[-4000:]
    assert out.rc == 0, out.stderr[-4000:]
    assert out.json is not None
    assert out.json["connections_accepted"] == out.json["connections_closed"]
    doc: dict[str, Any] = out.json
    return doc


def vm_hwm_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM): no sampling can miss a peak."""
    text = Path(f"/proc/{pid}/status").read_text()
    m = re.search(r"^VmHWM:\s+(\d+) kB", text, re.M)
    assert m is not None, text
    return int(m.group(1))


class SlowSender(threading.Thread):
    """Sends B-byte messages on its own connection as fast as the server takes them and never reads,
    until `limit` bytes are sent or the server closes it. Records the time before its first send, the
    time of its last successful send, and how it ended."""

    def __init__(self, port: int, msg_size: int, limit: int) -> None:
        super().__init__(daemon=True)
        self.sock = connect(port)
        self.sock.setblocking(False)
        self.msg = b"s" * msg_size
        self.limit = limit
        self.sent = 0
        self.started = time.monotonic()
        self.last_send = self.started
        self.ended_at = 0.0
        self.error: int | None = None  # errno of the failed send: the server closed it

    def run(self) -> None:
        self.started = time.monotonic()
        while self.sent < self.limit:
            _, writable, _ = select.select([], [self.sock], [], 1.0)
            if not writable:
                continue
            try:
                n = self.sock.send(self.msg)
            except OSError as e:
                self.error = e.errno
                break
            self.sent += n
            self.last_send = time.monotonic()
        self.ended_at = time.monotonic()


SLOW_CASES = [
    pytest.param("release", "uring", 1, id="release-uring-1"),
    pytest.param("release", "uring", 3, id="release-uring-3"),
    pytest.param("release", "uring-single", 1, id="release-uring-single-1"),
    pytest.param("release", "uring-shared", 1, id="release-uring-shared-1"),
    pytest.param("release", "uring-shared", 3, id="release-uring-shared-3"),
    pytest.param("asan", "uring", 3, marks=pytest.mark.sanitizer, id="asan-uring-3"),
    pytest.param("asan", "uring-shared", 3, marks=pytest.mark.sanitizer, id="asan-uring-shared-3"),
    pytest.param("tsan", "uring", 3, marks=pytest.mark.sanitizer, id="tsan-uring-3"),
    pytest.param("tsan", "uring-shared", 3, marks=pytest.mark.sanitizer, id="tsan-uring-shared-3"),
]


@pytest.mark.parametrize(("kind", "path", "threads"), SLOW_CASES)
def test_slow_reader_beside_others(
    run_server: Any, binaries: dict[str, Path], kind: str, path: str, threads: int
) -> None:
    """One connection sends 64 KiB messages and never reads, beside 8 that echo in a closed loop. The 8
    keep completing rounds while it is blocked and after it is gone; it is closed by the server no
    sooner than --stall-ms after it began, and counted as stalled; the server's peak RSS stays under
    64 MiB (release build), where a server that buffers every echo of the 256 MiB the slow one would
    send exceeds it fourfold."""
    b, stall_ms = 65536, 2000
    srv = start(
        run_server,
        binaries,
        kind,
        path,
        ["--threads", str(threads), "--msg-size", str(b), "--stall-ms", str(stall_ms)],
    )
    slow = SlowSender(srv.port, b, 256 << 20)
    others = [connect(srv.port, timeout=60) for _ in range(8)]
    slow.start()
    done_at: list[float] = []  # when each round of the 8 completed

    def round_trip() -> None:
        payloads = [os.urandom(b) for _ in others]
        for s, p in zip(others, payloads, strict=True):
            s.sendall(p)
        for s, p in zip(others, payloads, strict=True):
            assert recv_exact(s, b) == p
        done_at.append(time.monotonic())

    deadline = time.monotonic() + 120  # a server that never closes it fails here
    with Span() as span:
        while slow.is_alive() or len(done_at) < 20:
            assert time.monotonic() < deadline, f"the slow connection is still open after {slow.sent} bytes"
            round_trip()
    slow.join(timeout=60)
    assert not slow.is_alive()
    rounds = len(done_at)
    while_blocked = sum(1 for t in done_at if slow.last_send < t < slow.ended_at)
    for _ in range(10):  # and after it is gone
        round_trip()
    peak_kib = vm_hwm_kib(srv.proc.pid)
    for s in others:
        s.close()
    slow.sock.close()
    doc = stop_clean(srv)
    if kind == "release":  # the sanitizers' shadow memory and quarantine are not the server's
        assert peak_kib <= 64 * 1024, f"peak RSS {peak_kib} KiB"
    assert slow.error is not None, f"never closed: sent {slow.sent} bytes, all of them taken"
    assert slow.ended_at - slow.started >= stall_ms / 1000
    assert doc["connections_stalled"] == 1
    assert doc["messages"] >= 8 * (rounds + 10)
    # It was blocked for at least --stall-ms, the 8 kept their rounds going meanwhile: a round completed
    # in that window, unless one round outlasted it (its lateness: how long after the window it ended),
    # which a busy host's stall can explain.
    after = [t for t in done_at if t >= slow.ended_at]
    settle(
        span,
        Claim(
            while_blocked >= 1,
            "no round completed while the slow connection was blocked",
            (after[0] if after else float("inf")) - slow.ended_at,
        ),
    )


class Stopped:
    """The server stopped (SIGSTOP) for the block's duration: entered only once every one of its threads
    is stopped (the signal is asynchronous: a thread may run on for a moment after kill returns)."""

    def __init__(self, srv: Server) -> None:
        self.srv = srv

    def __enter__(self) -> None:
        pid = self.srv.proc.pid
        self.srv.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 60
        while not all(thread_state(pid, tid) == "T" for tid in os.listdir(f"/proc/{pid}/task")):
            assert time.monotonic() < deadline, "the server did not stop"
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        self.srv.proc.send_signal(signal.SIGCONT)


def thread_state(pid: int, tid: str) -> str:
    try:
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    except OSError:
        return "T"  # gone: it runs no more
    return stat.rsplit(")", 1)[1].split()[0]


def unread_bytes_out(sock: socket.socket) -> int:
    """Bytes in the socket's send queue the peer has not acknowledged (SIOCOUTQ)."""
    buf = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    value: int = struct.unpack("i", buf)[0]
    return value


@pytest.mark.parametrize(
    ("kind", "path", "threads"),
    [
        ("release", "uring", 1),
        ("release", "uring-single", 1),
        ("release", "uring-shared", 1),
        ("release", "uring-shared", 3),
        pytest.param("tsan", "uring-shared", 3, marks=pytest.mark.sanitizer),
        pytest.param("asan", "uring", 2, marks=pytest.mark.sanitizer),
    ],
)
def test_message_counts_when_its_echo_completes(
    run_server: Any, binaries: dict[str, Path], kind: str, path: str, threads: int
) -> None:
    """`messages` is what the clients got back: 3 connections × 5 rounds completed, and 4 more that each
    send a whole message and reset the connection (SO_LINGER 0) before the server runs again (it is
    stopped meanwhile, so the reset is there before the server reads): the server still reads the
    message and does its work, but its echo fails, and it does not count."""
    b = 64
    srv = start(run_server, binaries, kind, path, ["--threads", str(threads), "--msg-size", str(b)])
    completed = exchange(srv.port, b, connections=3, rounds=5)
    gone = [connect(srv.port) for _ in range(4)]
    completed += exchange(srv.port, b, connections=1, rounds=1)  # every one of them accepted by now
    with Stopped(srv):
        for s in gone:
            s.sendall(os.urandom(b))
        deadline = time.monotonic() + 60
        while any(unread_bytes_out(s) for s in gone):  # acknowledged: in the server's socket
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for s in gone:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
    completed += exchange(srv.port, b, connections=2, rounds=3)  # served after them
    doc = stop_clean(srv)
    assert doc["messages"] == completed


def reply_times(socks: list[socket.socket], size: int) -> list[float]:
    """Each connection's one reply, with the time the kernel received it (SO_TIMESTAMPNS: taken as the
    server's send queues it on loopback, whenever this test reads it)."""
    times = []
    for s in socks:
        data, anc, _, _ = s.recvmsg(size, socket.CMSG_SPACE(16))
        assert len(data) == size, "a reply came in parts"
        stamps = [d for lvl, typ, d in anc if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS]
        assert stamps, anc
        sec, nsec = struct.unpack("qq", stamps[0][:16])
        times.append(sec + nsec / 1e9)
    return times


@pytest.mark.parametrize("kind", ["release", pytest.param("tsan", marks=pytest.mark.sanitizer)])
@pytest.mark.parametrize("path", list(PATHS))
def test_reply_not_held_behind_other_work(
    run_server: Any, binaries: dict[str, Path], kind: str, path: str
) -> None:
    """One server thread, W = 50 ms, 4 connections whose messages arrive together (the server is stopped
    while they are sent). Each reply must leave before the next message's work begins, so consecutive
    replies reach the kernel at least W apart (the work is at least W of wall time, whatever the load);
    replies held for the next wait leave together, microseconds apart. The bound is W / 2."""
    work_us, n, b = 50_000, 4, 32
    srv = start(
        run_server, binaries, kind, path, ["--threads", "1", "--msg-size", str(b), "--work-us", str(work_us)]
    )
    socks = [connect(srv.port, timeout=60) for _ in range(n)]
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    exchange(srv.port, b, connections=1, rounds=1)  # every connection accepted and armed by now
    with Stopped(srv):
        for s in socks:
            s.sendall(os.urandom(b))
        deadline = time.monotonic() + 60
        while any(unread_bytes_out(s) for s in socks):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    times = sorted(reply_times(socks, b))
    gaps_ms = [(later - earlier) * 1e3 for earlier, later in itertools.pairwise(times)]
    for s in socks:
        s.close()
    stop_clean(srv)
    assert min(gaps_ms) >= work_us / 1e3 / 2, f"replies {gaps_ms} ms apart"


def ring_cq_sizes(pid: int) -> list[int]:
    """The completion ring size of each io_uring the process has open (its fdinfo's CqMask + 1)."""
    sizes = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[io_uring]":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        m = re.search(r"^CqMask:\s+(0x[0-9a-f]+|\d+)", info, re.M)
        if m is not None:
            sizes.append(int(m.group(1), 0) + 1)
    return sizes


def test_every_pair_at_a_million_descriptors(
    run_server: Any, binaries: dict[str, Path], valid_pairs: list[dict[str, Any]]
) -> None:
    """DEMUX_NOFILE=1048576 sizes the connection table, every notifier and every ring as a host with that
    descriptor limit would (systemd's and Docker's defaults reach it). Every pair starts, serves and
    exits cleanly; every io_uring asked for more completion entries than the kernel's maximum and got
    that maximum (IORING_SETUP_CLAMP), where it used to be refused (EINVAL) at start."""
    env = {**os.environ, "DEMUX_NOFILE": "1048576"}
    env.pop("DEMUX_URING_DISABLE", None)
    for pair in valid_pairs:
        pattern, notifier = pair["pattern"], pair["notifier"]
        threads = min(max(pair["min_threads"], 2), pair["max_threads"])
        srv: Server = run_server(
            ["--pattern", pattern, "--notifier", notifier, "--threads", str(threads), "--msg-size", "16"],
            binary=binaries["release"],
            env=env,
        )
        sent = exchange(srv.port, 16, connections=3, rounds=3)
        sizes = ring_cq_sizes(srv.proc.pid)
        out = srv.stop()
        assert out.rc == 0 and out.json is not None, f"{pattern}/{notifier}: {out.stderr[-2000:]}"
        assert out.json["messages"] == sent, f"{pattern}/{notifier}"
        if pattern.startswith("uring") or notifier == "uring":
            assert sizes and all(n == KERNEL_MAX_CQ for n in sizes), f"{pattern}/{notifier}: {sizes}"


@pytest.mark.parametrize("value", ["0", "1048577", "lots"])
def test_bad_nofile_knob_is_refused(binaries: dict[str, Path], value: str) -> None:
    res = subprocess.run(
        [
            str(binaries["release"]),
            "--pattern",
            "uring",
            "--notifier",
            "uring",
            "--threads",
            "1",
            "--port",
            "0",
        ],
        env={**os.environ, "DEMUX_NOFILE": value},
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "DEMUX_NOFILE" in res.stderr and value in res.stderr


def test_sqe_gives_up_when_submit_keeps_failing(tmp_path: Path) -> None:
    """uring_sqe() on a full queue whose submits all fail (a single-issuer ring submitted to from a
    thread that is not its owner: -EEXIST, a real ring's refusal) dies naming the reason instead of
    spinning for ever under the caller's lock."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    assert cc is not None
    src = ROOT / "images"
    exe = tmp_path / "uring-sqe-stuck"
    subprocess.run(
        [
            cc,
            *CFLAGS,
            f"-I{src / 'common'}",
            f"-I{src / 'server' / 'src'}",
            "-o",
            str(exe),
            str(Path(__file__).with_name("uring_sqe_stuck.c")),
            str(src / "server" / "src" / "fatal.c"),
            str(src / "common" / "sysc.c"),
            "-luring",
            "-pthread",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=20)
    assert res.returncode == 1, res
    assert res.stderr.strip().startswith("demux-server: io_uring:"), res.stderr
    assert os.strerror(17) in res.stderr, res.stderr  # EEXIST


@pytest.mark.parametrize(
    "kind",
    [
        "release",
        pytest.param("asan", marks=pytest.mark.sanitizer),
        pytest.param("tsan", marks=pytest.mark.sanitizer),
    ],
)
@pytest.mark.parametrize("path", ["uring", "uring-single"])
def test_pipelined_messages_with_work(
    run_server: Any, binaries: dict[str, Path], kind: str, path: str
) -> None:
    """With work, replies go out one message per send, each submitted after its own work: 512 KiB of
    8-byte messages sent in one go while the reader lags (the multishot path pauses its receive when the
    backlog passes 256 KiB, and takes the queued messages one by one) come back whole, in order, and
    each counts once."""
    b = 8
    srv = start(run_server, binaries, kind, path, ["--threads", "1", "--msg-size", str(b), "--work-us", "1"])
    data = os.urandom(512 << 10)
    sock = connect(srv.port, timeout=120)
    got = bytearray()

    def reader() -> None:
        threading.Event().wait(0.3)  # let the backlog build first
        while len(got) < len(data):
            chunk = sock.recv(1 << 16)
            if not chunk:
                return
            got.extend(chunk)

    t = threading.Thread(target=reader)
    t.start()
    sock.sendall(data)
    t.join(timeout=300)
    assert not t.is_alive()
    assert bytes(got) == data
    sock.close()
    doc = stop_clean(srv)
    assert doc["messages"] == len(data) // b

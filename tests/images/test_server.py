"""demux-server: pairs, flags, protocol, instrumentation, robustness and shutdown."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from demuxlab import vocab
from helpers.load import Span, settle, under, within
from helpers.server import Server, connect, exchange, recv_exact

# Every readiness notifier (all but tpc's "none"): the demultiplexing patterns run over each of them.
NOTIFIERS = [n for n in vocab.NOTIFIERS if n != "none"]
EXPECTED_PAIRS = (
    [("reactor", n) for n in NOTIFIERS]
    + [("hsha", n) for n in NOTIFIERS]
    + [("lf", n) for n in NOTIFIERS]
    + [("tpc", "none")]
    + [("proactor", n) for n in NOTIFIERS]
    + [("uring", "uring")]
    + [("multireactor", n) for n in NOTIFIERS]
    + [("uring-shared", "uring")]
)
MIN_THREADS = {
    "reactor": 1,
    "hsha": 2,
    "lf": 1,
    "tpc": 1,
    "proactor": 2,
    "uring": 1,
    "multireactor": 1,
    "uring-shared": 1,
}
MAX_THREADS = {"reactor": 1}


def thread_counts(pattern: str) -> list[int]:
    lo = MIN_THREADS[pattern]
    hi = MAX_THREADS.get(pattern, 1024)
    return sorted({lo, min(max(lo, 2), hi), *([1] if lo == 1 else [])})


def args(pattern: str, notifier: str, threads: int, *extra: str) -> list[str]:
    return ["--pattern", pattern, "--notifier", notifier, "--threads", str(threads), *extra]


def test_list_matches_the_documented_pairs(valid_pairs: list[dict[str, Any]]) -> None:
    assert sorted((p["pattern"], p["notifier"]) for p in valid_pairs) == sorted(EXPECTED_PAIRS)
    for p in valid_pairs:
        assert set(p) == {"pattern", "notifier", "min_threads", "max_threads"}
        assert p["min_threads"] == MIN_THREADS[p["pattern"]]
        assert p["min_threads"] <= p["max_threads"]
    assert {p["max_threads"] for p in valid_pairs if p["pattern"] == "reactor"} == {1}


def test_version_names_source_compiler_and_flags(server_bin: Path) -> None:
    out = subprocess.run([str(server_bin), "--version"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    line = out.stdout.strip()
    assert line.startswith("demux-server source=")
    assert "compiler=" in line and "flags=" in line and "-O2" in line
    assert "source=unknown" not in line


CASES = [
    (p, n, t, size) for p, n in EXPECTED_PAIRS for t in thread_counts(p) for size in (1, 100, 4096, 65536)
]


@pytest.mark.parametrize(("pattern", "notifier", "threads", "size"), CASES)
def test_echo_every_pair(run_server: Any, pattern: str, notifier: str, threads: int, size: int) -> None:
    srv: Server = run_server(args(pattern, notifier, threads, "--msg-size", str(size)))
    conns = 3
    sent = exchange(srv.port, size, connections=conns, rounds=4)
    out = srv.stop()
    assert out.rc == 0, out.stderr
    assert out.json is not None
    assert out.json["messages"] == sent
    assert out.json["connections_accepted"] == conns
    assert out.json["connections_closed"] == conns
    assert out.json["msg_size"] == size
    # tpc: one entry per CPU slot, then its acceptor.
    assert len(out.json["threads_detail"]) == threads + (pattern == "tpc")
    assert sum(t["messages"] for t in out.json["threads_detail"]) == sent
    assert out.json["ops"] == {}
    assert "events_per_call" not in out.json


BAD = [
    (["--pattern", "uring", "--notifier", "select", "--threads", "1", "--port", "0"], "invalid pair"),
    (["--pattern", "tpc", "--notifier", "epoll-lt", "--threads", "1", "--port", "0"], "invalid pair"),
    (["--pattern", "hsha", "--notifier", "none", "--threads", "2", "--port", "0"], "invalid pair"),
    (["--pattern", "nope", "--notifier", "poll", "--threads", "1", "--port", "0"], "'nope'"),
    (["--pattern", "lf", "--notifier", "kqueue", "--threads", "1", "--port", "0"], "'kqueue'"),
    (["--pattern", "hsha", "--notifier", "poll", "--threads", "1", "--port", "0"], "--threads '1'"),
    (["--pattern", "reactor", "--notifier", "poll", "--threads", "2", "--port", "0"], "--threads '2'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "0", "--port", "0"], "--threads '0'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "x", "--port", "0"], "--threads 'x'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "70000"], "--port '70000'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--msg-size", "0"], "'0'"),
    (
        ["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--msg-size", "2000000"],
        "--msg-size",
    ),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--work-us", "-1"], "'-1'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--work-us", "nan"], "'nan'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--cpus", "3-1"], "'3-1'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--max-conns", "0"], "'0'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--bind", "host"], "'host'"),
    (
        ["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--frobnicate"],
        "--frobnicate",
    ),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "extra"], "'extra'"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1", "--port", "0", "--stall-ms", "0"], "'0'"),
    (["--pattern", "hsha", "--notifier", "poll", "--threads", "2", "--port", "0", "--wake", "all"], "'all'"),
    # --wake is a dispatcher's policy: a pattern without a dispatch queue has nothing it could change.
    (["--pattern", "lf", "--notifier", "poll", "--threads", "2", "--port", "0", "--wake", "put"], "'lf'"),
    (["--notifier", "poll", "--threads", "1", "--port", "0"], "--pattern"),
    (["--pattern", "lf", "--notifier", "poll", "--threads", "1"], "--port"),
    (["--pattern", "lf", "--notifier", "poll", "--port", "0", "--threads"], "--threads"),
]


@pytest.mark.parametrize(("argv", "named"), BAD)
def test_bad_input_is_refused_with_one_line(server_bin: Path, argv: list[str], named: str) -> None:
    out = subprocess.run([str(server_bin), *argv], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("demux-server: ")
    assert named in lines[0]


OP_FIELDS = {"count", "total_ns", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"}


def instrumented_run(
    run_server: Any, pattern: str, notifier: str, threads: int, *extra: str
) -> dict[str, Any]:
    srv: Server = run_server(args(pattern, notifier, threads, "--instrument", "--msg-size", "64", *extra))
    sent = exchange(srv.port, 64, connections=4, rounds=10)
    out = srv.stop()
    assert out.rc == 0, out.stderr
    assert out.json is not None
    assert out.json["messages"] == sent
    assert out.json["instrument"] is True
    for name, op in out.json["ops"].items():
        assert set(op) == OP_FIELDS, name
        assert op["count"] > 0, name
        assert op["p50_ns"] <= op["p90_ns"] <= op["p99_ns"] <= op["p999_ns"] <= op["max_ns"], name
        assert op["total_ns"] >= op["max_ns"] and abs(op["mean_ns"] - op["total_ns"] / op["count"]) < 1.0
    return out.json


@pytest.mark.parametrize(
    ("pattern", "notifier", "threads", "present", "absent"),
    [
        (
            "hsha",
            "epoll-lt",
            3,
            {"idle", "lock", "queue_put", "queue_get", "recv", "rearm", "send", "accept"},
            {"promote", "kick"},
        ),
        (
            "hsha",
            "epoll-et",
            3,
            {"idle", "queue_put", "queue_get", "recv", "send"},
            {"rearm", "promote", "kick"},
        ),
        (
            "lf",
            "epoll-lt",
            2,
            {"idle", "lock", "promote", "recv", "rearm", "send"},
            {"queue_put", "queue_get"},
        ),
        ("lf", "epoll-et", 2, {"idle", "lock", "promote", "recv", "send"}, {"rearm", "queue_put"}),
        ("lf", "select", 2, {"idle", "lock", "promote", "rearm"}, {"queue_put"}),
        ("reactor", "poll", 1, {"idle", "recv", "rearm", "send", "accept"}, {"promote", "queue_get"}),
        ("proactor", "poll", 2, {"idle", "queue_put", "queue_get", "recv", "rearm", "send"}, {"promote"}),
        ("uring", "uring", 2, {"idle"}, {"promote", "rearm", "queue_put", "queue_get", "lock", "kick"}),
        ("uring-shared", "uring", 2, {"idle", "queue_put", "queue_get", "send", "rearm"}, {"promote"}),
        # tpc's blocking read that finds nothing waits as `idle` (a poll), like every pattern's wait for work.
        ("tpc", "none", 2, {"idle", "recv", "send", "accept"}, {"rearm", "lock", "kick"}),
        ("multireactor", "epoll-lt", 2, {"idle", "recv", "rearm", "send"}, {"queue_put", "promote"}),
    ],
)
def test_instrumentation_reports_the_operations_performed(
    run_server: Any, pattern: str, notifier: str, threads: int, present: set[str], absent: set[str]
) -> None:
    data = instrumented_run(run_server, pattern, notifier, threads)
    ops = data["ops"]
    assert present <= set(ops), sorted(ops)
    assert not absent & set(ops), sorted(ops)
    if "recv" in ops:
        assert ops["recv"]["count"] >= data["messages"]
    if "send" in ops:
        assert ops["send"]["count"] == data["messages"]
    if "rearm" in ops:
        assert ops["rearm"]["count"] >= data["messages"]
    if notifier != "none":
        epc = data["events_per_call"]
        notify = ops.get("notify", {"count": 0})["count"]
        # Every wait found events at once (notify) or blocked (idle); hsha/proactor/uring-shared
        # handlers blocked on the queue are idle too, without a wait, and so are LF's followers waiting
        # for leadership (images/README.md, "Fairness rules": before, LF booked that wait as `lock`).
        blocked = epc["calls"] - notify
        if pattern in ("hsha", "proactor", "uring-shared"):
            assert 0 < blocked <= ops["idle"]["count"]
        elif pattern == "lf":
            # ≤, not <: a short run on a busy host may see no follower wait for leadership (34 = 34 in CI)
            assert 0 < blocked <= ops["idle"]["count"]
        else:
            assert blocked == ops["idle"]["count"]
        assert 0 < epc["mean"] <= epc["max"] <= epc["cache"] == 64
        by = data["notify_by_events"]
        assert all(1 <= b["events"] <= 64 and b["count"] > 0 and b["mean_ns"] > 0 for b in by)
        assert sum(b["count"] for b in by) == notify  # a notify call always returned events
        assert [b["events"] for b in by] == sorted(b["events"] for b in by)
    else:
        assert data["events_per_call"]["calls"] == 0


@pytest.mark.parametrize("notifier", ["select", "poll"])
@pytest.mark.parametrize("pattern", ["proactor", "hsha"])
def test_a_rearm_while_the_dispatcher_waits_kicks_it(run_server: Any, pattern: str, notifier: str) -> None:
    """select and poll cannot see a descriptor re-armed after their call began: the re-arm writes the
    notifier's eventfd (a kick, CONTRACTS §1 `kick`). A handler re-arms after each response, while the
    dispatcher sleeps in its wait for the next request, so a lightly loaded run kicks; each kick is one
    re-arm's or one add's, and each of a wait's one or two calls drains at most one."""
    data = instrumented_run(run_server, pattern, notifier, 2)
    ops = data["ops"]
    kick = ops["kick"]
    assert 0 < kick["count"] <= ops["rearm"]["count"] + data["connections_accepted"]
    assert kick["count"] <= 2 * data["events_per_call"]["calls"] + 1
    # The kicker's CPU for an eventfd write that wakes a thread: above nothing, below a millisecond.
    assert 0 < kick["p50_ns"] < 1_000_000


@pytest.mark.parametrize(
    ("pattern", "notifier"), [("proactor", "select"), ("lf", "epoll-et"), ("tpc", "none")]
)
def test_every_thread_counts_its_sleeps(run_server: Any, pattern: str, notifier: str) -> None:
    """`sleeps` (voluntary context switches), instrumented or not: a thread that took a message blocked
    at least once, waiting for it (the requests come one round at a time), and no thread blocks more
    often than it could have been woken: by a message's request, its queue item or lock, or the server's
    own start and stop. (A thread the host did not run before the stop, on a loaded host, took nothing
    and counts 0.) What only instrumentation measures (idle_s, notify_s) stays out of a plain run."""

    def check(data: dict[str, Any], sent: int) -> None:
        detail = data["threads_detail"]
        for t in detail:
            assert isinstance(t["sleeps"], int) and 0 <= t["sleeps"] <= 8 * sent + 64, t
            assert t["sleeps"] >= 1 or t["messages"] == 0, t
            assert t["wait_s"] is None or 0.0 <= t["wait_s"] <= data["elapsed_s"] * 64, t
        assert sum(t["sleeps"] for t in detail) >= 1

    data = instrumented_run(run_server, pattern, notifier, 2)
    check(data, data["messages"])
    srv: Server = run_server(args(pattern, notifier, 2, "--msg-size", "64"))
    sent = exchange(srv.port, 64, connections=4, rounds=10)
    out = srv.stop()
    assert out.rc == 0 and out.json is not None and out.json["messages"] == sent, out.stderr
    check(out.json, sent)
    assert all("idle_s" not in t and "notify_s" not in t for t in out.json["threads_detail"])


def test_work_is_spun_for_the_requested_time(run_server: Any) -> None:
    with Span() as span:
        data = instrumented_run(run_server, "lf", "epoll-et", 1, "--work-us", "200")
    work = data["ops"]["work"]
    assert work["count"] == data["messages"]
    assert work["p50_ns"] >= 200_000
    assert data["work_us"] == 200.0
    # The work is on-CPU time (spin_cpu_us): its wall time (`work`) is at least that, and the CPU time the
    # spin counted (`work_cpu`) is 200 us a message, whatever preempted it.
    assert data["work_clock"] == "on_cpu"
    work_cpu = data["ops"]["work_cpu"]
    assert work_cpu["count"] == data["messages"]
    assert 200_000 <= work_cpu["p50_ns"] <= work["p50_ns"]
    assert work_cpu["total_ns"] >= 200_000 * data["messages"]
    # Spinning burns CPU: at least the work time shows up as user+sys CPU.
    assert data["cpu_s"]["user"] + data["cpu_s"]["sys"] >= data["messages"] * 200e-6 * 0.9
    # `work` is wall time: a spin the host preempted takes longer (its CPU, above, does not).
    settle(span, under("the work's wall-time p50 (ns)", work["p50_ns"], 2_000_000, unit_s=1e-9))


def test_cpus_pins_threads_round_robin(run_server: Any) -> None:
    ncpu = len(os.sched_getaffinity(0))
    cpus = sorted(os.sched_getaffinity(0))[: min(2, ncpu)]
    spec = ",".join(str(c) for c in cpus)
    srv: Server = run_server(args("lf", "poll", 3, "--cpus", spec))
    exchange(srv.port, 1, connections=2, rounds=2)
    out = srv.stop()
    assert out.json is not None
    assert [t["cpu"] for t in out.json["threads_detail"]] == [cpus[i % len(cpus)] for i in range(3)]


ROBUST = [
    ("reactor", "epoll-lt", 1),
    ("reactor", "select", 1),
    ("hsha", "epoll-et", 3),
    ("hsha", "poll", 2),
    ("lf", "epoll-lt", 3),
    ("lf", "epoll-et", 3),
    ("lf", "uring", 2),
    ("tpc", "none", 4),
    ("proactor", "epoll-et", 3),
    ("proactor", "select", 2),
    ("uring", "uring", 1),
    ("uring", "uring", 3),
    ("multireactor", "epoll-et", 2),
    ("multireactor", "poll", 2),
]


@pytest.mark.parametrize(("pattern", "notifier", "threads"), ROBUST)
def test_partial_writes_oversize_streams_and_disconnects(
    run_server: Any, pattern: str, notifier: str, threads: int
) -> None:
    size = 100
    srv: Server = run_server(args(pattern, notifier, threads, "--msg-size", str(size)))
    # Byte by byte: the server must assemble the message before echoing.
    a = connect(srv.port)
    payload = os.urandom(size)
    for i, b in enumerate(payload):
        a.send(bytes([b]))
        if i % 25 == 0:
            time.sleep(0.002)
    assert recv_exact(a, size) == payload
    # Three and a half messages in one write: three echoes now, the fourth
    # once the rest arrives.
    stream = os.urandom(4 * size)
    a.sendall(stream[: 3 * size + size // 2])
    assert recv_exact(a, 3 * size) == stream[: 3 * size]
    a.settimeout(0.2)
    with pytest.raises(TimeoutError):
        a.recv(1)
    a.settimeout(10)
    a.sendall(stream[3 * size + size // 2 :])
    assert recv_exact(a, size) == stream[3 * size :]
    # Disconnect mid-message: the partial message is dropped, others go on.
    b = connect(srv.port)
    b.sendall(os.urandom(size // 2))
    b.close()
    c = connect(srv.port)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.sendall(os.urandom(size - 1))
    c.close()  # RST instead of FIN
    assert exchange(srv.port, size, connections=2, rounds=3) == 6
    a.sendall(payload)
    assert recv_exact(a, size) == payload
    a.close()
    out = srv.stop()
    assert out.rc == 0, out.stderr
    assert out.json is not None
    assert out.json["messages"] == 1 + 4 + 6 + 1
    assert out.json["connections_accepted"] == out.json["connections_closed"] == 5


def _low_nofile(limit: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


@pytest.mark.parametrize(
    ("pattern", "notifier", "threads"),
    [
        ("reactor", "epoll-lt", 1),
        ("hsha", "poll", 2),
        ("lf", "epoll-et", 2),
        ("lf", "select", 2),
        ("proactor", "epoll-lt", 2),
        ("uring", "uring", 1),
        ("multireactor", "epoll-et", 2),
        ("tpc", "none", 2),
    ],
)
def test_fd_flood_keeps_existing_connections_served(
    run_server: Any, pattern: str, notifier: str, threads: int
) -> None:
    srv: Server = run_server(args(pattern, notifier, threads, "--msg-size", "8"), preexec_fn=_low_nofile(48))
    keep = connect(srv.port)
    keep.sendall(b"12345678")
    assert recv_exact(keep, 8) == b"12345678"
    flood = []
    try:
        for _ in range(120):
            flood.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
        time.sleep(0.3)
        for i in range(5):
            msg = f"keep{i:04d}".encode()
            keep.sendall(msg)
            assert recv_exact(keep, 8) == msg
        cpu_before = _proc_cpu_s(srv.proc.pid)
        time.sleep(1.0)
        # A server spinning on EMFILE would burn a whole CPU here.
        assert _proc_cpu_s(srv.proc.pid) - cpu_before < 0.3
    finally:
        for s in flood:
            s.close()
    time.sleep(0.2)
    assert exchange(srv.port, 8, connections=3, rounds=2) == 6
    keep.sendall(b"87654321")
    assert recv_exact(keep, 8) == b"87654321"
    keep.close()
    out = srv.stop()
    assert out.rc == 0, out.stderr


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_max_conns_refuses_extra_connections(run_server: Any) -> None:
    srv: Server = run_server(args("reactor", "epoll-et", 1, "--max-conns", "2"))
    a, b = connect(srv.port), connect(srv.port)
    for s in (a, b):
        s.sendall(b"x")
        assert recv_exact(s, 1) == b"x"
    c = connect(srv.port)
    c.settimeout(5)
    try:
        c.sendall(b"y")
        assert c.recv(1) == b""
    except ConnectionResetError:
        pass
    c.close()
    a.sendall(b"z")
    assert recv_exact(a, 1) == b"z"
    a.close()
    b.close()
    out = srv.stop()
    assert out.json is not None
    assert out.json["connections_accepted"] == 2


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize(
    ("pattern", "notifier", "threads"),
    [
        ("hsha", "select", 4),
        ("lf", "poll", 4),
        ("lf", "epoll-lt", 3),
        ("tpc", "none", 3),
        ("proactor", "epoll-et", 3),
        ("uring", "uring", 3),
        ("multireactor", "uring", 3),
        ("reactor", "epoll-et", 1),
    ],
)
def test_signal_shutdown_joins_every_thread(
    run_server: Any, sig: int, pattern: str, notifier: str, threads: int
) -> None:
    srv: Server = run_server(args(pattern, notifier, threads, "--msg-size", "10"))
    exchange(srv.port, 10, connections=2, rounds=2)
    # Connections left open, one of them mid-message, must not hold shutdown.
    idle = connect(srv.port)
    half = connect(srv.port)
    half.sendall(b"abc")
    time.sleep(0.1)
    with Span() as span:
        out = srv.stop(sig)
    idle.close()
    half.close()
    assert out.rc == 0, out.stderr
    assert out.stderr == ""
    assert out.json is not None and out.json["event"] == "exit"
    assert len(out.stdout.splitlines()) == 1  # only the exit line follows "listening"
    detail = out.json["threads_detail"]
    entries = threads + 1 if pattern == "tpc" else threads  # tpc: T CPU slots + the acceptor
    assert [t["index"] for t in detail] == list(range(entries))
    assert out.json["connections_accepted"] == out.json["connections_closed"] == 4
    assert out.json["messages"] == 4
    within(span, 5, f"the server's shutdown on signal {sig}")


# ---- tpc: one thread per connection, --threads = CPU slots ----------------------------------------------


def _tasks(pid: int) -> dict[int, str]:
    """The threads of a process and the CPUs each may run on."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            continue
        line = next(ln for ln in status.splitlines() if ln.startswith("Cpus_allowed_list:"))
        out[int(task.name)] = line.split(":", 1)[1].strip()
    return out


def _wait_tasks(pid: int, count: int, timeout_s: float = 5.0) -> dict[int, str]:
    deadline = time.monotonic() + timeout_s
    tasks = _tasks(pid)
    while len(tasks) != count and time.monotonic() < deadline:
        time.sleep(0.02)
        tasks = _tasks(pid)
    return tasks


def test_tpc_serves_every_connection_at_once_on_one_slot(run_server: Any) -> None:
    srv: Server = run_server(args("tpc", "none", 1, "--msg-size", "16", "--work-us", "100"))
    socks = [connect(srv.port) for _ in range(8)]
    try:
        for r in range(3):
            payloads = [os.urandom(16) for _ in socks]
            for s, p in zip(socks, payloads, strict=True):
                s.sendall(p)
            # Echoes come back on every connection while all of them stay open: a pool of one thread
            # would serve only the first and leave the others in the backlog.
            for i in reversed(range(len(socks))):
                assert recv_exact(socks[i], 16) == payloads[i], f"connection {i} round {r}"
        assert len(_tasks(srv.proc.pid)) == 2 + 8  # main, acceptor, one per connection
    finally:
        for s in socks:
            s.close()
    # Each thread ends with its connection and is joined.
    assert len(_wait_tasks(srv.proc.pid, 2)) == 2
    out = srv.stop()
    assert out.rc == 0, out.stderr
    assert out.json is not None
    assert out.json["messages"] == 24
    assert out.json["connections_accepted"] == out.json["connections_closed"] == 8
    detail = out.json["threads_detail"]
    assert [(t["index"], t["role"]) for t in detail] == [(0, "connection"), (1, "acceptor")]
    assert detail[0]["messages"] == 24 and detail[1]["messages"] == 0


def test_tpc_spreads_connection_threads_over_cpu_slots(run_server: Any) -> None:
    cpus = sorted(os.sched_getaffinity(0))[:2]
    slot_cpu = [cpus[k % len(cpus)] for k in range(2)]
    srv: Server = run_server(
        args("tpc", "none", 2, "--msg-size", "4", "--instrument", "--cpus", ",".join(map(str, cpus)))
    )
    pid = srv.proc.pid
    # Connection k (in accept order) runs in slot k mod 2: connect one at a time.
    rounds = [1, 2, 4]
    socks = []
    for n in rounds:
        s = connect(srv.port)
        for _ in range(n):
            s.sendall(b"ping")
            assert recv_exact(s, 4) == b"ping"
        socks.append(s)
    tasks = _tasks(pid)
    del tasks[pid]  # main is not pinned
    # The acceptor is entry 2 of threads_detail: CPU 2 mod n; the connections: their slot's CPU.
    expected = [str(slot_cpu[k % 2]) for k in range(3)] + [str(cpus[2 % len(cpus)])]
    assert sorted(tasks.values()) == sorted(expected)
    for s in socks:
        s.close()
    assert len(_wait_tasks(pid, 2)) == 2
    out = srv.stop()
    assert out.rc == 0, out.stderr
    assert out.json is not None
    detail = out.json["threads_detail"]
    assert [(t["role"], t["cpu"]) for t in detail] == [
        ("connection", slot_cpu[0]),
        ("connection", slot_cpu[1]),
        ("acceptor", cpus[2 % len(cpus)]),
    ]
    assert [t["messages"] for t in detail] == [rounds[0] + rounds[2], rounds[1], 0]
    ops = out.json["ops"]
    assert ops["send"]["count"] == sum(rounds)
    assert ops["accept"]["count"] == 3
    assert "notify" not in ops


def test_tpc_refuses_a_cpu_outside_its_mask(server_bin: Path) -> None:
    out = subprocess.run(
        [str(server_bin), *args("tpc", "none", 1, "--port", "0", "--cpus", "1000")],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert out.returncode == 1
    assert out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and "CPU 1000" in out.stderr


def test_tpc_thread_creation_failure_drops_only_that_connection(run_server: Any) -> None:
    srv: Server = run_server(args("tpc", "none", 1, "--msg-size", "4"))
    pid = srv.proc.pid
    keep = connect(srv.port)
    keep.sendall(b"keep")
    assert recv_exact(keep, 4) == b"keep"
    # Room for about four more 256 KiB thread stacks: later pthread_create calls fail with EAGAIN.
    vm = int(
        next(
            ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("VmSize:")
        ).split()[1]
    )
    hard = resource.prlimit(pid, resource.RLIMIT_AS)[1]
    resource.prlimit(pid, resource.RLIMIT_AS, ((vm + 1024) * 1024, hard))
    served, dropped = [], 0
    for i in range(16):
        s = connect(srv.port, timeout=5)
        msg = f"m{i:03d}".encode()
        s.sendall(msg)
        try:
            got = s.recv(4)
        except ConnectionResetError:
            got = b""
        if got == msg:
            served.append(s)
        else:
            assert got == b"", got
            dropped += 1
            s.close()
    try:
        assert served and dropped, (len(served), dropped)
        cpu_before = _proc_cpu_s(pid)
        time.sleep(0.5)
        assert _proc_cpu_s(pid) - cpu_before < 0.2  # no retry loop
        for s in [keep, *served]:
            s.sendall(b"more")
            assert recv_exact(s, 4) == b"more"
    finally:
        for s in served:
            s.close()
    # Joined threads give their stacks back: new connections are served again.
    assert len(_wait_tasks(pid, 3)) == 3
    assert exchange(srv.port, 4, connections=2, rounds=2) == 4
    keep.close()
    out = srv.stop()
    assert out.rc == 0, out.stderr
    assert out.json is not None
    assert out.json["connections_accepted"] == out.json["connections_closed"] == 1 + 16 + 2


def test_tpc_shutdown_with_open_connections_joins_every_thread(run_server: Any) -> None:
    srv: Server = run_server(args("tpc", "none", 1, "--msg-size", "8"))
    socks = [connect(srv.port) for _ in range(40)]
    try:
        for i, s in enumerate(socks[:20]):
            s.sendall(f"msg{i:05d}".encode())
        for i, s in enumerate(socks[:20]):
            assert recv_exact(s, 8) == f"msg{i:05d}".encode()
        for s in socks[20:30]:
            s.sendall(b"half")  # blocked mid-message
        assert len(_wait_tasks(srv.proc.pid, 2 + 40)) == 2 + 40
        with Span() as span:
            out = srv.stop()
    finally:
        for s in socks:
            s.close()
    assert out.rc == 0, out.stderr
    assert out.stderr == ""
    assert out.json is not None
    assert out.json["messages"] == 20
    assert out.json["connections_accepted"] == out.json["connections_closed"] == 40
    within(span, 2, "tpc's shutdown with 40 connections open")

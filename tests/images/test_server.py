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

from conftest import Server, connect, exchange, recv_exact

NOTIFIERS = ["select", "poll", "epoll-lt", "epoll-et", "uring"]
EXPECTED_PAIRS = (
    [("reactor", n) for n in NOTIFIERS]
    + [("hsha", n) for n in NOTIFIERS]
    + [("lf", n) for n in NOTIFIERS]
    + [("tpc", "none")]
    + [("proactor", n) for n in NOTIFIERS]
    + [("uring", "uring")]
    + [("multireactor", n) for n in NOTIFIERS]
)
MIN_THREADS = {"reactor": 1, "hsha": 2, "lf": 1, "tpc": 1, "proactor": 2, "uring": 1, "multireactor": 1}
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
    # tpc serves one connection per thread; more would wait in the backlog.
    conns = min(3, threads) if pattern == "tpc" else 3
    sent = exchange(srv.port, size, connections=conns, rounds=4)
    out = srv.stop()
    assert out.rc == 0, out.stderr
    assert out.json is not None
    assert out.json["messages"] == sent
    assert out.json["connections_accepted"] == conns
    assert out.json["connections_closed"] == conns
    assert out.json["msg_size"] == size
    assert len(out.json["threads_detail"]) == threads
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
    sent = exchange(srv.port, 64, connections=2 if pattern == "tpc" else 4, rounds=10)
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
            {"notify", "lock", "queue_put", "queue_get", "recv", "rearm", "send", "accept"},
            {"promote"},
        ),
        ("hsha", "epoll-et", 3, {"notify", "queue_put", "queue_get", "recv", "send"}, {"rearm", "promote"}),
        (
            "lf",
            "epoll-lt",
            2,
            {"notify", "lock", "promote", "recv", "rearm", "send"},
            {"queue_put", "queue_get"},
        ),
        ("lf", "epoll-et", 2, {"notify", "lock", "promote", "recv", "send"}, {"rearm", "queue_put"}),
        ("lf", "select", 2, {"notify", "lock", "promote", "rearm"}, {"queue_put"}),
        ("reactor", "poll", 1, {"notify", "recv", "rearm", "send", "accept"}, {"promote", "queue_get"}),
        ("proactor", "poll", 2, {"notify", "queue_put", "queue_get", "recv", "rearm", "send"}, {"promote"}),
        ("uring", "uring", 2, {"notify", "queue_put", "queue_get"}, {"promote", "rearm"}),
        ("tpc", "none", 2, {"recv", "send", "accept"}, {"notify", "rearm", "lock"}),
        ("multireactor", "epoll-lt", 2, {"notify", "recv", "rearm", "send"}, {"queue_put", "promote"}),
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
        assert epc["calls"] == ops["notify"]["count"]
        assert 0 < epc["mean"] <= epc["max"] <= 64
        by = data["notify_by_events"]
        assert by and all(1 <= b["events"] <= 64 and b["count"] > 0 and b["mean_ns"] > 0 for b in by)
        assert sum(b["count"] for b in by) <= epc["calls"]
        assert [b["events"] for b in by] == sorted(b["events"] for b in by)
    else:
        assert data["events_per_call"]["calls"] == 0


def test_work_is_spun_for_the_requested_time(run_server: Any) -> None:
    data = instrumented_run(run_server, "lf", "epoll-et", 1, "--work-us", "200")
    work = data["ops"]["work"]
    assert work["count"] == data["messages"]
    assert 200_000 <= work["p50_ns"] < 2_000_000
    assert data["work_us"] == 200.0
    # Spinning burns CPU: at least the work time shows up as user+sys CPU.
    assert data["cpu_s"]["user"] + data["cpu_s"]["sys"] >= data["messages"] * 200e-6 * 0.9


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
    if pattern != "tpc":
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
    t0 = time.monotonic()
    out = srv.stop(sig)
    assert time.monotonic() - t0 < 5
    idle.close()
    half.close()
    assert out.rc == 0, out.stderr
    assert out.stderr == ""
    assert out.json is not None and out.json["event"] == "exit"
    assert len(out.stdout.splitlines()) == 1  # only the exit line follows "listening"
    detail = out.json["threads_detail"]
    assert [t["index"] for t in detail] == list(range(threads))
    assert out.json["connections_accepted"] == out.json["connections_closed"] == 4
    assert out.json["messages"] == 4

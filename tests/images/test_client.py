"""demux-client (images/client) against the real demux-server and against small faulty servers.

The faulty servers are written here in Python: one that corrupts a byte, one that stops answering, one
that resets connections, one that closes them; plus a port nobody listens on. Phases are 1-2 s.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.load import Span, within

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("DEMUXLAB_BIN_DIR", REPO / "build" / "bin"))


def _binary(name: str) -> Path:
    path = BIN_DIR / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run `make build`")
    return path


@pytest.fixture(scope="module")
def client_bin() -> Path:
    return _binary("demux-client")


@pytest.fixture(scope="module")
def server_bin() -> Path:
    return _binary("demux-server")


def run_client(client: Path, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(client), *args], capture_output=True, text=True, timeout=timeout)


def load_args(
    port: int, *, conns: int = 8, threads: int = 1, warmup: str = "0.5", duration: str = "2"
) -> list[str]:
    return [
        "--host", "127.0.0.1", "--port", str(port), "--connections", str(conns), "--threads", str(threads),
        "--msg-size", "16", "--warmup", warmup, "--duration", duration,
    ]  # fmt: skip


# ---------------------------------------------------------------- the real server


@pytest.fixture
def real_server(server_bin: Path) -> Iterator[tuple[int, Callable[[], dict[str, Any]]]]:
    """A reactor/epoll-lt demux-server on a kernel-chosen port; yields (port, stop) where stop() returns
    its exit JSON."""
    proc = subprocess.Popen(
        [str(server_bin), "--pattern", "reactor", "--notifier", "epoll-lt", "--threads", "1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    result: dict[str, Any] = {}

    def stop() -> dict[str, Any]:
        if not result:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=15)
            assert proc.returncode == 0, err
            result.update(json.loads(out.strip().splitlines()[-1]))
        return result

    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        port = int(json.loads(line)["port"])
        yield port, stop
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=15)


def test_closed_loop_report(client_bin: Path, real_server: tuple[int, Callable[[], dict[str, Any]]]) -> None:
    port, stop = real_server
    res = run_client(client_bin, *load_args(port, conns=16, threads=2), "--cooldown", "0.2", "--cpus", "0")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["ok"] is True and rep["mode"] == "closed" and rep["rate"] is None
    assert (rep["connections"], rep["threads"], rep["msg_size"], rep["errors"]) == (16, 2, 16, 0)
    assert rep["duration_s"] == 2
    assert rep["messages"] > 100
    assert rep["throughput_msgs_per_s"] == pytest.approx(rep["messages"] / rep["duration_s"], rel=1e-3)
    # Whole seconds of the measure phase, which together hold every measured message.
    assert len(rep["per_second"]) == 2
    assert sum(rep["per_second"]) == pytest.approx(rep["messages"], abs=0.5)
    lat = rep["latency_us"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert lat["p50"] <= lat["max"] and 0 < lat["mean"] <= lat["max"]
    # Little's law for a closed loop: 16 messages always in flight.
    assert lat["mean"] == pytest.approx(16 / rep["throughput_msgs_per_s"] * 1e6, rel=0.25)
    assert rep["cpu_s"]["user"] >= 0 and rep["cpu_s"]["sys"] >= 0
    assert rep["cpu_s"]["user"] + rep["cpu_s"]["sys"] > 0
    # Every wait either finds bytes of an echo or times out at a stall check (every 100 ms per thread).
    # This server frames 1-byte messages, so a 16-byte echo can come back in up to 16 pieces: at least
    # one wait, and no more than the bytes echoed plus those timeouts.
    assert 0 < rep["notify_calls"] <= rep["messages"] * 16 + 2 * (2 / 0.1 + 1)
    # A thread sleeps only inside a wait (its sockets do not block): while it waits for echoes, at times.
    assert isinstance(rep["sleeps"], int) and 0 < rep["sleeps"] <= rep["notify_calls"] + 2
    server = stop()
    # The server also counted warm-up and cool-down, so it saw at least the measured messages.
    assert server["messages"] >= rep["messages"]
    assert server["connections_accepted"] == 16


def test_open_loop_offers_the_rate_and_serves_every_arrival(
    client_bin: Path, real_server: tuple[int, Callable[[], dict[str, Any]]], tmp_path: Path
) -> None:
    """What an open loop promises, from the client's own schedule rather than from how fast a loaded
    machine happened to complete messages in the window: arrivals are intended at R msg/s (`offered`:
    those intended in the measure phase, computed from the schedule, started or not), and every one of
    them is echoed before the run ends (`served`): none dropped, none silently skipped.  The rate is far
    below what 32 connections carry even on a loaded machine (each connection has one message in flight,
    so a rate needing more than 32 in flight would measure the machine's scheduling delays, not the
    client), and the cool-down leaves 1.5 s for the last arrivals."""
    port, _ = real_server
    out = tmp_path / "client.json"
    args = (*load_args(port, conns=32, threads=2), "--cooldown", "1.5", "--rate", "500", "--json", str(out))
    res = run_client(client_bin, *args)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    rep = json.loads(out.read_text())
    assert rep["ok"] is True and rep["mode"] == "open" and rep["rate"] == 500
    # 1000 Poisson arrivals in the 2 s measured (sd 3 %; the schedule is seeded, so the same every run).
    assert rep["offered"] == pytest.approx(500 * 2, rel=0.10)
    assert rep["served"] == rep["offered"]
    assert not list(tmp_path.glob("*.tmp.*")), "temporary report left behind"


def test_open_loop_counts_arrivals_it_never_started(client_bin: Path) -> None:
    """A server that needs 20 ms per message, offered 100 msg/s on one connection: half the arrivals of
    the measure phase never even start before the run ends; they are offered all the same, not served."""
    with FaultServer(delay_s=0.02) as srv:
        res = run_client(client_bin, *load_args(srv.port, conns=1, warmup="0", duration="1"), "--rate", "100")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["offered"] == pytest.approx(100, rel=0.4)  # Poisson, mean 100 (sd 10 %), seeded
    assert rep["served"] <= 60 < rep["offered"]
    # No warm-up, no cool-down: every completion in the window is of an arrival in it.
    assert rep["served"] == rep["messages"]


def test_open_loop_counts_queueing_delay(client_bin: Path) -> None:
    """A server that needs 20 ms per message, offered 100 msg/s on one connection (twice its capacity):
    latency measured from the intended send time must grow far beyond the 20 ms service time."""
    with FaultServer(delay_s=0.02) as srv:
        res = run_client(client_bin, *load_args(srv.port, conns=1, warmup="0", duration="1"), "--rate", "100")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["messages"] <= 60
    assert rep["latency_us"]["p90"] > 150_000


# ---------------------------------------------------------------- faulty servers


class FaultServer:
    """A threaded TCP echo server on 127.0.0.1 that misbehaves after `after` echoed bytes per connection:
    mode "corrupt" flips one byte, "stall" stops answering, "reset" aborts with RST, "close" closes."""

    def __init__(self, mode: str = "echo", after: int = 1000, delay_s: float = 0.0) -> None:
        self.mode, self.after, self.delay_s = mode, after, delay_s
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.sock.settimeout(0.1)
        self.port: int = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []

    def __enter__(self) -> FaultServer:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)
        for c in self.conns:
            c.close()
        self.sock.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.1)
        echoed = 0
        while not self.stop.is_set():
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            if echoed >= self.after and self.mode != "echo":
                if self.mode == "stall":
                    continue  # keep reading, never answer
                if self.mode == "corrupt":
                    data = bytes([data[0] ^ 0xFF]) + data[1:]
                elif self.mode == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.close()
                    return
                elif self.mode == "close":
                    conn.shutdown(socket.SHUT_RDWR)
                    return
            if self.delay_s:
                time.sleep(self.delay_s)
            try:
                conn.sendall(data)
            except OSError:
                return
            echoed += len(data)


def expect_failure(res: subprocess.CompletedProcess[str], needle: str) -> str:
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("demux-client: ")
    assert needle in lines[0], lines[0]
    assert res.stdout == ""
    return lines[0]


def test_wrong_bytes(client_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with FaultServer("corrupt", after=160) as srv:
        res = run_client(client_bin, *load_args(srv.port, conns=2), "--json", str(out))
    line = expect_failure(res, "wrong bytes")
    assert "offset 0" in line
    assert json.loads(out.read_text()) == {"ok": False, "error": line.removeprefix("demux-client: ")}


def test_correct_python_echo_passes(client_bin: Path) -> None:
    """The same server without its fault is accepted, so the failures above come from the faults."""
    with FaultServer("echo") as srv:
        res = run_client(client_bin, *load_args(srv.port, conns=2, warmup="0.2", duration="1"))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["messages"] > 0


def test_stall_detected_within_timeout(client_bin: Path) -> None:
    with FaultServer("stall", after=320) as srv, Span() as span:
        res = run_client(client_bin, *load_args(srv.port, conns=4, duration="30"), "--stall-timeout", "1")
    expect_failure(res, "stall")
    assert span.wall_s >= 1.0
    within(span, 1.0 + 2.0, "the client's stall detection (--stall-timeout 1)")


def test_connection_refused(client_bin: Path, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that was free a moment ago and has no listener
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "r.json"
    res = run_client(client_bin, *load_args(port), "--json", str(out))
    expect_failure(res, "Connection refused")
    assert json.loads(out.read_text())["ok"] is False


def test_reset_mid_run(client_bin: Path) -> None:
    with FaultServer("reset", after=800) as srv:
        res = run_client(client_bin, *load_args(srv.port, conns=2, duration="5"))
    expect_failure(res, "reset")


def test_server_closes_mid_run(client_bin: Path) -> None:
    with FaultServer("close", after=800) as srv:
        res = run_client(client_bin, *load_args(srv.port, conns=2, duration="5"))
    expect_failure(res, "closed the connection")


def test_unresolvable_host(client_bin: Path) -> None:
    args = load_args(1)
    args[1] = "no-such-host.invalid"
    expect_failure(run_client(client_bin, *args), "cannot resolve host 'no-such-host.invalid'")


# ---------------------------------------------------------------- flags

GOOD = load_args(5000)


def _replace(flag: str, value: str) -> list[str]:
    args = list(GOOD)
    args[args.index(flag) + 1] = value
    return args


def _drop(flag: str) -> list[str]:
    args = list(GOOD)
    i = args.index(flag)
    return args[:i] + args[i + 2 :]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (_replace("--port", "0"), "--port"),
        (_replace("--port", "65536"), "--port"),
        (_replace("--port", "http"), "'http'"),
        (_replace("--connections", "-1"), "--connections"),
        (_replace("--threads", "0"), "--threads"),
        (_replace("--threads", "9"), "exceeds --connections"),
        (_replace("--msg-size", "0"), "--msg-size"),
        (_replace("--duration", "0"), "--duration"),
        (_replace("--warmup", "nan"), "--warmup"),
        (_replace("--warmup", "1s"), "--warmup"),
        ([*GOOD, "--rate", "0"], "--rate"),
        ([*GOOD, "--rate", "-5"], "--rate"),
        ([*GOOD, "--stall-timeout", "0"], "--stall-timeout"),
        ([*GOOD, "--cpus", "3-1"], "--cpus"),
        ([*GOOD, "--cpus", "a"], "--cpus"),
        ([*GOOD, "--bogus", "1"], "unknown option '--bogus'"),
        ([*GOOD, "--json"], "needs a value"),
        ([*GOOD, "stray"], "unexpected argument 'stray'"),
        ([*GOOD, "--port", "5001"], "given twice"),
        (_drop("--host"), "missing required option --host"),
        (_drop("--duration"), "missing required option --duration"),
    ],
)
def test_bad_flags(client_bin: Path, args: list[str], needle: str) -> None:
    res = run_client(client_bin, *args, timeout=10)
    assert res.returncode == 2, (args, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("demux-client: "), res.stderr
    assert needle in lines[0]
    assert res.stdout == ""


def test_help_and_version(client_bin: Path) -> None:
    h = run_client(client_bin, "--help", timeout=10)
    assert h.returncode == 0 and "--stall-timeout" in h.stdout
    v = run_client(client_bin, "--version", timeout=10)
    assert v.returncode == 0 and v.stdout.startswith("demux-client source=")
    assert " compiler=" in v.stdout and " flags=" in v.stdout and "-O2" in v.stdout


def test_per_second_under_one_second(client_bin: Path) -> None:
    with FaultServer("echo") as srv:
        res = run_client(client_bin, *load_args(srv.port, conns=2, warmup="0", duration="0.5"))
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert len(rep["per_second"]) == 1
    assert rep["per_second"][0] == pytest.approx(rep["throughput_msgs_per_s"], rel=1e-3)
    assert math.isclose(rep["duration_s"], 0.5)

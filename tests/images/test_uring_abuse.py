"""The io_uring paths of pattern `uring` under abuse, in the release, ASan+UBSan and TSan builds, with
multishot receive and provided buffers (this kernel's default) and with the single-shot fallback forced
(DEMUX_URING_DISABLE): half messages, abrupt closes (RST), a peer that sends far ahead of what it reads
(partial sends, echoes queued behind a send in flight), a buffer ring that runs dry (DEMUX_URING_BUFS=1),
and the exit JSON's record of the features a run used."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers.server import ROOT, Server, build_target, connect, exchange, recv_exact

FEATURES = {"single_issuer", "defer_taskrun", "registered_ring", "buf_ring", "recv_multishot", "fixed_files"}
MODES = {"multishot": "", "single-shot": "recv_multishot"}
ENV = {
    "release": {},
    "asan": {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"},
    "tsan": {"TSAN_OPTIONS": "halt_on_error=0:second_deadlock_stack=1"},
}
URING_ARGS = ["--pattern", "uring", "--notifier", "uring"]
MARKERS = ("Sanitizer", "runtime error:", "LeakSanitizer")
KINDS = [
    "release",
    pytest.param("asan", marks=pytest.mark.sanitizer),
    pytest.param("tsan", marks=pytest.mark.sanitizer),
]


@pytest.fixture(scope="session")
def binaries() -> dict[str, Path]:
    paths = {kind: f"../build/{kind}/bin/demux-server" for kind in ("asan", "tsan")}
    paths["release"] = "../build/bin/demux-server"
    build_target(*paths.values())
    return {kind: ROOT / "images" / path for kind, path in paths.items()}


def start(
    run_server: Any, binaries: dict[str, Path], kind: str, mode: str, msg_size: int, **env: str
) -> Server:
    full = {**os.environ, **ENV[kind], **env}
    if MODES[mode]:
        full["DEMUX_URING_DISABLE"] = MODES[mode]
    else:
        full.pop("DEMUX_URING_DISABLE", None)
    args = ["--pattern", "uring", "--notifier", "uring", "--threads", "2", "--msg-size", str(msg_size)]
    srv: Server = run_server(args, binary=binaries[kind], env=full)
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


def used_multishot(doc: dict[str, Any], mode: str) -> None:
    """The run used what it says: features + unavailable = every feature, and the mode's choice."""
    uring = doc["uring"]
    assert set(uring["features"]) | set(uring["unavailable"]) == FEATURES
    assert not set(uring["features"]) & set(uring["unavailable"])
    if mode == "single-shot":
        assert "recv_multishot" in uring["unavailable"] and "fixed_files" in uring["unavailable"]
    elif "recv_multishot" not in uring["features"]:
        pytest.skip(f"this kernel has no multishot receive ({os.uname().release}): the fallback ran")


def rst_close(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_half_messages(run_server: Any, binaries: dict[str, Path], kind: str, mode: str) -> None:
    srv = start(run_server, binaries, kind, mode, 8)
    whole = connect(srv.port)
    whole.sendall(b"abc")  # a message in two parts, apart
    threading.Event().wait(0.05)
    whole.sendall(b"defgh")
    assert recv_exact(whole, 8) == b"abcdefgh"
    cut = connect(srv.port)
    cut.sendall(b"xyz")  # a part, then the peer leaves
    cut.close()
    eof = connect(srv.port)
    eof.sendall(b"12345678" + b"123")  # a whole message and a part, then end of stream
    eof.shutdown(socket.SHUT_WR)
    assert recv_exact(eof, 8) == b"12345678"
    assert eof.recv(16) == b""  # the server closed it: the part is dropped
    sent = 2 + exchange(srv.port, 8, connections=3, rounds=5)
    whole.close()
    eof.close()
    doc = stop_clean(srv)
    used_multishot(doc, mode)
    assert doc["messages"] == sent


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_abrupt_closes(run_server: Any, binaries: dict[str, Path], kind: str, mode: str) -> None:
    srv = start(run_server, binaries, kind, mode, 16)
    sent = 0
    for wave in range(4):
        socks = [connect(srv.port) for _ in range(12)]
        for i, s in enumerate(socks):
            s.sendall(bytes([65 + wave]) * (16 * (i % 3) + (i % 5)))  # whole messages, parts, nothing
        for s in socks:
            rst_close(s)  # RST, with echoes possibly in flight towards it
        sent += exchange(srv.port, 16, connections=2, rounds=3)
    doc = stop_clean(srv)
    used_multishot(doc, mode)
    assert doc["messages"] >= sent


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_peer_far_ahead(run_server: Any, binaries: dict[str, Path], kind: str, mode: str) -> None:
    """4 MiB of 8-byte messages in one go while the reader lags: the echo backs up in the sockets, sends
    complete in parts, and (multishot) echoes queue behind the send in flight; every byte comes back in
    order."""
    srv = start(run_server, binaries, kind, mode, 8)
    data = os.urandom(1 << 22)
    sock = connect(srv.port, timeout=60)
    got = bytearray()

    def reader() -> None:
        threading.Event().wait(0.3)  # let the server's send side fill up first
        while len(got) < len(data):
            chunk = sock.recv(1 << 16)
            if not chunk:
                return
            got.extend(chunk)

    t = threading.Thread(target=reader)
    t.start()
    sock.sendall(data)
    t.join(timeout=120)
    assert not t.is_alive()
    assert bytes(got) == data
    sock.close()
    doc = stop_clean(srv)
    used_multishot(doc, mode)
    assert doc["messages"] == len(data) // 8


@pytest.mark.parametrize("kind", KINDS)
def test_buffer_ring_runs_dry(run_server: Any, binaries: dict[str, Path], kind: str) -> None:
    """One provided buffer for 16 connections that all send at once: receives find the ring empty
    (ENOBUFS), are armed again, and every echo still comes back whole and in order. "At once" does not
    depend on the host's load: the server is stopped while the 16 send, so its receives all find data
    when it runs on (a server that keeps up with the sends one by one would never run dry)."""
    srv = start(run_server, binaries, kind, "multishot", 4, DEMUX_URING_BUFS="1")
    socks = [connect(srv.port) for _ in range(16)]
    sent = 0
    for rnd in range(20):
        payloads = [os.urandom(4 * 32) for _ in socks]
        srv.proc.send_signal(signal.SIGSTOP)
        try:
            for s, p in zip(socks, payloads, strict=True):
                s.sendall(p)
        finally:
            srv.proc.send_signal(signal.SIGCONT)
        for i, (s, p) in enumerate(zip(socks, payloads, strict=True)):
            assert recv_exact(s, len(p)) == p, f"round {rnd} connection {i}"
        sent += len(socks) * 32
    for s in socks:
        s.close()
    doc = stop_clean(srv)
    used_multishot(doc, "multishot")
    assert doc["uring"]["provided_buffers"] == 1
    assert doc["uring"]["buffers_exhausted"] > 0
    assert doc["messages"] == sent


@pytest.mark.parametrize(
    ("name", "value"),
    [("DEMUX_URING_BUFS", "3"), ("DEMUX_URING_BUFS", "0"), ("DEMUX_URING_DISABLE", "recv_multishot,turbo")],
)
def test_bad_test_knobs_are_refused(binaries: dict[str, Path], name: str, value: str) -> None:
    res = subprocess.run(
        [str(binaries["release"]), *URING_ARGS, "--threads", "1", "--port", "0"],
        env={**os.environ, name: value},
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and name in res.stderr and value in res.stderr

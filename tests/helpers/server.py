"""Driving demux-server from tests: build it, start it, talk to it, stop it.

Imported as ``helpers.server`` (pytest puts ``tests/`` on the path); the fixtures built on it are in
``tests/images/conftest.py``."""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import signal
import socket
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
SOURCES = [
    IMAGES / "Makefile",
    *IMAGES.glob("server/src/*.[ch]"),
    *IMAGES.glob("client/src/*.[ch]"),
    *IMAGES.glob("common/*.[ch]"),
    *IMAGES.glob("bench/*.[ch]"),
]
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 20.0


def _newest_source() -> float:
    return max(p.stat().st_mtime for p in SOURCES)


def build_target(*targets: str) -> None:
    """Builds file targets of images/Makefile if missing or older than the sources. One build at a time
    across processes (the suite's xdist workers): a second waits for the first, then finds them fresh."""

    def stale() -> list[str]:
        return [
            t for t in targets if not (IMAGES / t).exists() or (IMAGES / t).stat().st_mtime < _newest_source()
        ]

    if not stale():
        return
    lock = ROOT / "build" / ".tests-build.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        todo = stale()
        if todo:
            subprocess.run(
                ["make", "-s", "-C", str(IMAGES), *todo], check=True, capture_output=True, timeout=600
            )


@dataclass
class Exit:
    rc: int
    json: dict[str, Any] | None
    stdout: str
    stderr: str


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    args: list[str] = field(default_factory=list)

    def stop(self, sig: int = signal.SIGTERM) -> Exit:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError(
                f"server did not exit within {STOP_TIMEOUT_S}s of signal {sig}: {err}"
            ) from None
        lines = [ln for ln in out.splitlines() if ln.strip()]
        data = json.loads(lines[-1]) if lines else None
        return Exit(self.proc.returncode, data, out, err)


def start_server(
    binary: Path,
    args: Sequence[str],
    env: dict[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    wrapper: Sequence[str] = (),
) -> Server:
    """Starts the server on a kernel-chosen port and waits for its listening line."""
    cmd = [*wrapper, str(binary), *args]
    if "--port" not in args:
        cmd += ["--port", "0"]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=preexec_fn,
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    ready = sel.select(timeout=START_TIMEOUT_S)
    sel.close()
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"server {cmd} did not start: {err.strip()}")
    msg = json.loads(line)
    assert msg["event"] == "listening"
    return Server(proc, int(msg["port"]), list(args))


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    got = 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError(f"closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def exchange(port: int, msg_size: int, connections: int = 3, rounds: int = 5) -> int:
    """Closed-loop echo over several connections with distinct payloads; returns messages exchanged."""
    socks = [connect(port) for _ in range(connections)]
    try:
        for r in range(rounds):
            payloads = [os.urandom(msg_size) for _ in socks]
            for s, p in zip(socks, payloads, strict=True):
                s.sendall(p)
            for i, (s, p) in enumerate(zip(socks, payloads, strict=True)):
                got = recv_exact(s, msg_size)
                assert got == p, f"connection {i} round {r}: echo differs"
    finally:
        for s in socks:
            s.close()
    return connections * rounds

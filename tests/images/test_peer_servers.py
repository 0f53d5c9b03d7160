"""The peer benchmark's servers (bench/peers/): the libuv echo server builds, serves demux-client through the
bench's launcher path and reports the exit line the benchmark reads; its system calls per message are
counted under strace; and bad command lines are refused. The tokio peer is built and run the same way
where cargo is installed (it fetches tokio from crates.io on its first build)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.common import pairs
from bench.peers import peer_servers


def served(argv: tuple[str, ...]) -> pairs.Result:
    return pairs.run_pair(
        pairs.Server(cpus=0, argv=argv), connections=8, warmup=0.2, duration=0.8, client_cpu=0
    )


def check_exit(r: pairs.Result, server: str) -> None:
    assert r.server["event"] == "exit" and r.server["server"] == server
    assert r.server["messages"] >= r.client["messages"] > 0
    assert r.server["cpu_s"]["user"] + r.server["cpu_s"]["sys"] > 0
    assert r.server_cpu_per_msg_us > 0


def test_libuv_peer_serves_the_client() -> None:
    prog = peer_servers.build_libuv()
    r = served((str(prog), "--port", "0"))
    check_exit(r, "libuv")


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (make setup)")
def test_syscalls_are_counted_under_strace() -> None:
    prog = peer_servers.build_libuv()
    entry = peer_servers.Entry("libuv", pairs.Server(cpus=0, argv=(str(prog), "--port", "0")))
    per_msg = peer_servers.syscalls_per_message(entry, 8, 0.2, 0.8, {"client_threads": 1, "client_cpu": "0"})
    assert 1.0 < per_msg < 20.0  # at least a read and a write per message


def test_libuv_peer_refuses_bad_input() -> None:
    prog = peer_servers.build_libuv()
    for args in (["--port", "x"], ["--bogus", "1"], ["--port"], ["--port", "0", "--msg-size", "0"]):
        res = subprocess.run([str(prog), *args], capture_output=True, text=True, timeout=10)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (args, res.stderr)


@pytest.mark.skipif(
    not (shutil.which("cargo") or os.access(Path.home() / ".cargo" / "bin" / "cargo", os.X_OK)),
    reason="cargo is not installed: the tokio peer cannot be built here",
)
def test_tokio_peer_serves_the_client() -> None:
    prog = peer_servers.build_tokio()
    r = served((str(prog), "--port", "0"))
    check_exit(r, "tokio")
    assert r.server["runtime"] == "current_thread"

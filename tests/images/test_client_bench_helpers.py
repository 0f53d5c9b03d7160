"""The C helpers of the benchmarks (images/bench): they build warning-free, notify-scale reports exactly the
ready descriptors for every notifier, and min-echo serves demux-client and accounts its messages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from helpers.server import build_target

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("DEMUXLAB_BIN_DIR", REPO / "build" / "bin"))


def build(name: str) -> Path:
    """images/bench/<name>.c, built by images/Makefile (the flags of the binaries; notify-scale links the
    server's notifier back-ends)."""
    target = f"../build/bench/{name.replace('_', '-')}"
    build_target(target)
    return REPO / "build" / "bench" / name.replace("_", "-")


@pytest.mark.parametrize("notifier", ["select", "poll", "epoll-lt", "epoll-et", "uring"])
def test_notify_scale_counts_ready(notifier: str) -> None:
    prog = build("notify_scale")
    res = subprocess.run(
        [str(prog), "--notifier", notifier, "--fds", "64", "--active", "3", "--iters", "200"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["notifier"], out["fds"], out["active"]) == (notifier, 64, 3)
    assert out["ready_per_call"] == 3
    assert out["us_per_call"] > 0


def test_notify_scale_rejects_bad_input() -> None:
    prog = build("notify_scale")
    for args in (
        ["--notifier", "kqueue", "--fds", "4", "--active", "1"],
        ["--notifier", "none", "--fds", "4", "--active", "1"],
        ["--notifier", "poll", "--fds", "2", "--active", "3"],
    ):
        res = subprocess.run([str(prog), *args], capture_output=True, text=True, timeout=30)
        assert res.returncode == 2 and res.stderr.startswith("notify-scale: ")


def test_min_echo_serves_client(tmp_path: Path) -> None:
    client = BIN_DIR / "demux-client"
    if not os.access(client, os.X_OK):
        pytest.fail(f"{client} is missing: run `make build`")
    prog = build("min_echo")
    proc = subprocess.Popen([str(prog), "--port", "0", "--msg-size", "4"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = json.loads(proc.stdout.readline())["port"]
        cli = subprocess.run(
            [str(client), "--host", "127.0.0.1", "--port", str(port), "--connections", "4", "--threads", "1",
             "--msg-size", "4", "--warmup", "0.2", "--duration", "1"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        report = json.loads(cli.stdout)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
        exit_line = json.loads(out.strip().splitlines()[-1])
        assert exit_line["event"] == "exit"
        assert exit_line["messages"] >= report["messages"] > 0
        assert exit_line["cpu_s"]["user"] + exit_line["cpu_s"]["sys"] > 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)

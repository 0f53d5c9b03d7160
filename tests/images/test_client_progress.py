"""demux-client --progress (runs that end when steady, docs/adaptive.md): a line per measured second on stderr
as it completes, and SIGUSR1 ending the measure phase after the seconds printed, against the real server;
the same under ThreadSanitizer (the main thread reads the workers' counters while they count)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.server import ROOT, build_target

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client_bin() -> Path:
    build_target("../build/bin/demux-client")
    return ROOT / "build" / "bin" / "demux-client"


@pytest.fixture(scope="module")
def tsan_client_bin() -> Path:
    build_target("../build/tsan/bin/demux-client")
    return ROOT / "build" / "tsan" / "bin" / "demux-client"


@pytest.fixture
def server_port(server_bin: Path) -> Iterator[int]:
    proc = subprocess.Popen(
        [str(server_bin), "--pattern", "reactor", "--notifier", "epoll-lt", "--threads", "1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield int(json.loads(proc.stdout.readline())["port"])
    finally:
        proc.kill()
        proc.communicate(timeout=15)


def client(binary: Path, port: int, duration: str, *extra: str) -> subprocess.Popen[str]:
    args = [
        str(binary), "--host", "127.0.0.1", "--port", str(port), "--connections", "8", "--threads", "2",
        "--msg-size", "16", "--warmup", "0.3", "--duration", duration, "--cooldown", "0.3", *extra,
    ]  # fmt: skip
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def progress_lines(proc: subprocess.Popen[str], count: int, timeout: float = 30.0) -> list[dict[str, float]]:
    """Read ``count`` progress lines from the client's stderr, as they come."""
    assert proc.stderr is not None
    out: list[dict[str, float]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        out.append(json.loads(line))
    return out


def test_progress_prints_each_second_and_the_report_agrees(client_bin: Path, server_port: int) -> None:
    proc = client(client_bin, server_port, "3", "--progress")
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines()]
    assert [d["event"] for d in lines] == ["second"] * 3 and [d["second"] for d in lines] == [1, 2, 3]
    report = json.loads(stdout)
    assert report["stopped_early"] is False and report["duration_s"] == 3
    # Printed 20 ms after each second's end: what was counted by then, all of it or very nearly.
    for live, final in zip((d["msgs_per_s"] for d in lines), report["per_second"], strict=True):
        assert live == pytest.approx(final, rel=0.02)


def test_sigusr1_ends_the_measure_phase_after_the_seconds_printed(client_bin: Path, server_port: int) -> None:
    t0 = time.monotonic()
    proc = client(client_bin, server_port, "20", "--progress")
    seen = progress_lines(proc, 2)
    assert [d["second"] for d in seen] == [1, 2]
    proc.send_signal(signal.SIGUSR1)
    stdout, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["stopped_early"] is True
    assert report["duration_s"] == len(report["per_second"]) == 2
    assert report["messages"] == pytest.approx(sum(report["per_second"]), abs=0.5)
    assert report["throughput_msgs_per_s"] == pytest.approx(report["messages"] / 2, rel=1e-6)
    # The histogram is cut with them: the same requests, those sent in the two seconds kept.
    assert report["latency_us"]["count"] == report["messages"]
    assert took < 15, "it did not measure the whole 20 s"
    assert "second" not in stderr or json.loads(stderr.splitlines()[0])["second"] <= 3


def test_without_progress_sigusr1_is_not_taken(client_bin: Path, server_port: int) -> None:
    proc = client(client_bin, server_port, "5")
    time.sleep(1.0)
    proc.send_signal(signal.SIGUSR1)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGUSR1  # its default action: no silent early stop without the flag


def test_progress_and_early_stop_under_thread_sanitizer(tsan_client_bin: Path, server_port: int) -> None:
    env = {**os.environ, "TSAN_OPTIONS": "halt_on_error=1 exitcode=66"}
    args = [
        str(tsan_client_bin), "--host", "127.0.0.1", "--port", str(server_port), "--connections", "8",
        "--threads", "3", "--msg-size", "16", "--warmup", "0.2", "--duration", "10", "--progress",
    ]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = progress_lines(proc, 2, timeout=60)
    assert len(seen) == 2
    proc.send_signal(signal.SIGUSR1)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    assert "ThreadSanitizer" not in stderr
    assert json.loads(stdout)["stopped_early"] is True

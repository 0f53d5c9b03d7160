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

from helpers.load import Claim, Span, settle, within
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
    with Span() as span:
        proc = client(client_bin, server_port, "3", "--progress")
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines()]
    assert [d["event"] for d in lines] == ["second"] * 3 and [d["second"] for d in lines] == [1, 2, 3]
    report = json.loads(stdout)
    assert report["stopped_early"] is False and report["duration_s"] == 3
    # Printed 20 ms after each second's end: what was counted by then, all of it or very nearly (a worker
    # kept from its CPU past those 20 ms counts late: a busy host's, not the client's).
    pairs = list(zip((d["msgs_per_s"] for d in lines), report["per_second"], strict=True))
    assert all(live <= final for live, final in pairs), pairs  # nothing counted that the report has not
    settle(
        span,
        *(
            Claim(
                live == pytest.approx(final, rel=0.02), f"second {i}: {live} printed, {final} counted", 0.02
            )
            for i, (live, final) in enumerate(pairs, 1)
        ),
    )


def test_sigusr1_ends_the_measure_phase_after_the_seconds_printed(client_bin: Path, server_port: int) -> None:
    with Span() as span:
        proc = client(client_bin, server_port, "20", "--progress")
        seen = progress_lines(proc, 2)
        assert [d["second"] for d in seen] == [1, 2]
        proc.send_signal(signal.SIGUSR1)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["stopped_early"] is True
    # The seconds printed before the signal was taken, and no more: 2, unless this test was kept from
    # sending it for a second after it read the 2nd (a busy host: settled below).
    printed = len(seen) + sum(1 for line in stderr.splitlines() if '"event": "second"' in line)
    assert report["duration_s"] == len(report["per_second"]) == printed
    assert report["messages"] == pytest.approx(sum(report["per_second"]), abs=0.5)
    assert report["throughput_msgs_per_s"] == pytest.approx(
        report["messages"] / report["duration_s"], rel=1e-6
    )
    # The histogram is cut with them: the same requests, those sent in the two seconds kept.
    assert report["latency_us"]["count"] == report["messages"]
    assert "second" not in stderr or json.loads(stderr.splitlines()[0])["second"] <= 3
    late = report["duration_s"] - 2  # the signal came that many seconds after the 2nd line was printed
    settle(
        span,
        Claim(late == 0, f"stopped after {report['duration_s']} s, not the 2 printed when it was sent", late),
    )
    within(span, 15, "the client stopped by SIGUSR1 (it did not measure the whole 20 s)")


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
        "--phase-events",
    ]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = progress_lines(proc, 3, timeout=60)
    assert [d["event"] for d in seen] == ["phase", "second", "second"]
    proc.send_signal(signal.SIGUSR1)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    assert "ThreadSanitizer" not in stderr
    assert json.loads(stdout)["stopped_early"] is True


def test_phase_events_mark_the_measure_phase(client_bin: Path, server_port: int) -> None:
    """--phase-events (a launcher reads the kernel's counters there, demuxlab.launch.costs): one line as
    the measure phase starts and one as it ends, each stamped with the boundary's CLOCK_MONOTONIC time,
    the two exactly the measure phase apart, printed no earlier than their boundary."""
    proc = client(client_bin, server_port, "2", "--phase-events", "--progress")
    seen: list[tuple[dict[str, object], int]] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append((json.loads(line), time.monotonic_ns()))
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    events = [d for d, _ in seen]
    assert [d["event"] for d in events] == ["phase", "second", "second", "phase"]
    start, end = events[0], events[-1]
    assert (start["phase"], end["phase"]) == ("measure", "cooldown")
    assert isinstance(start["t_ns"], int) and isinstance(end["t_ns"], int)
    assert end["t_ns"] - start["t_ns"] == 2_000_000_000
    assert seen[0][1] >= start["t_ns"] and seen[-1][1] >= end["t_ns"]


def test_an_early_stop_ends_the_measure_phase_event_at_the_kept_seconds(
    client_bin: Path, server_port: int
) -> None:
    proc = client(client_bin, server_port, "20", "--phase-events", "--progress")
    seen = progress_lines(proc, 3)
    assert [d["event"] for d in seen] == ["phase", "second", "second"]
    proc.send_signal(signal.SIGUSR1)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0
    end = json.loads(stderr.splitlines()[-1])
    assert end["phase"] == "cooldown" and end["t_ns"] - seen[0]["t_ns"] == 2_000_000_000


def test_open_loop_reports_its_gaps_in_equiprobable_bins(client_bin: Path, server_port: int) -> None:
    """``gap_bins``: every arrival of the measure phase gives one gap (those that never started too), so
    the bins sum to ``offered``; an exponential schedule fills the 16 bins alike (chi-square far from
    rejecting); closed loop: null."""
    from scipy import stats

    proc = client(client_bin, server_port, "2", "--rate", "4000")
    stdout, _ = proc.communicate(timeout=60)
    report = json.loads(stdout)
    bins = report["gap_bins"]
    assert len(bins) == 16 and sum(bins) == report["offered"] > 4000
    assert stats.chisquare(bins).pvalue > 1e-4
    closed = client(client_bin, server_port, "1")
    assert json.loads(closed.communicate(timeout=60)[0])["gap_bins"] is None

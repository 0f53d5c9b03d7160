"""demux-client counts one population per run (CONTRACTS.md §2): the requests whose intended start falls in
the measure phase, echoed before the run's end. Messages, the per-second samples, the latency histogram,
offered and served all count it, so they agree exactly whatever the load: under overload (the histogram
used to select by completion time and lose exactly the slowest requests) and after an early stop (which
used to cut `messages` at a whole second and nothing else). Open loop, the client also reports its own
lateness against its schedule (`lateness_us`), for every send of that population.

No timing thresholds: each check is an identity between counts, or an order that holds request by request.
The early stop runs under ASan+UBSan and TSan too (the workers keep unsealed seconds apart while the main
thread seals them and moves the phase's end).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.server import ROOT, Server, build_target

SANITIZER_ENV = {
    "bin": {},
    "asan": {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"},
    "tsan": {"TSAN_OPTIONS": "halt_on_error=1 exitcode=66"},
}
MARKERS = ("Sanitizer", "runtime error:", "LeakSanitizer")


def client_bin(kind: str) -> Path:
    sub = "bin" if kind == "bin" else f"{kind}/bin"
    build_target(f"../build/{sub}/demux-client")
    return ROOT / "build" / sub / "demux-client"


def client_args(
    port: int, *, conns: int, threads: int, warmup: str, duration: str, cooldown: str
) -> list[str]:
    return [
        "--host", "127.0.0.1", "--port", str(port), "--connections", str(conns), "--threads", str(threads),
        "--msg-size", "16", "--warmup", warmup, "--duration", duration, "--cooldown", cooldown,
    ]  # fmt: skip


def run_client(args: list[str], kind: str = "bin", timeout: float = 120) -> dict[str, Any]:
    env = {**os.environ, **SANITIZER_ENV[kind]}
    res = subprocess.run(
        [str(client_bin(kind)), *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert not any(m in res.stderr for m in MARKERS), res.stderr[-3000:]
    report: dict[str, Any] = json.loads(res.stdout)
    return report


@pytest.fixture
def echo_server(run_server: Callable[..., Server]) -> Callable[..., int]:
    def start(*extra: str) -> int:
        args = ["--pattern", "reactor", "--notifier", "epoll-lt", "--threads", "1", *extra]
        return run_server(args).port

    return start


def assert_one_population(rep: dict[str, Any]) -> None:
    """Every count of the report is of the same requests."""
    assert rep["throughput_msgs_per_s"] == pytest.approx(rep["messages"] / rep["duration_s"], rel=1e-6)
    assert len(rep["per_second"]) == int(rep["duration_s"])
    assert sum(rep["per_second"]) == pytest.approx(rep["messages"], abs=0.5)
    if rep["mode"] == "open":
        assert rep["served"] == rep["messages"] <= rep["offered"]
    assert rep["latency_us"]["count"] == rep["messages"]
    if rep["mode"] == "open":
        late = rep["lateness_us"]
        # Every request echoed was sent; every one sent was offered.
        assert rep["served"] <= late["count"] <= rep["offered"]


def test_open_loop_reports_its_lateness(echo_server: Callable[..., int]) -> None:
    """Open loop at a rate far below what the server carries, with a cool-down long enough for every
    arrival to be echoed: the lateness histogram holds one value per send, each no larger than that
    request's latency (it is sent after it is due and echoed after it is sent), so every percentile of the
    lateness is at most the latency's."""
    port = echo_server()
    args = client_args(port, conns=8, threads=2, warmup="0.3", duration="2", cooldown="2")
    rep = run_client([*args, "--rate", "300"])
    assert_one_population(rep)
    late, lat = rep["lateness_us"], rep["latency_us"]
    assert set(late) == {"p50", "p90", "p99", "p999", "max", "mean", "count"}
    assert rep["served"] == rep["offered"] == late["count"] > 0
    assert 0 <= late["p50"] <= late["p90"] <= late["p99"] <= late["p999"] <= late["max"]
    for key in ("p50", "p90", "p99", "p999", "max", "mean"):
        assert late[key] <= lat[key], key
    # Spinning to a due arrival is time the two threads spent in the measure phase, at most all of it.
    assert 0 <= rep["spin_s"] <= 2 * rep["duration_s"]


def test_closed_loop_has_no_schedule_to_be_late_for(echo_server: Callable[..., int]) -> None:
    port = echo_server()
    rep = run_client(client_args(port, conns=4, threads=1, warmup="0.2", duration="1", cooldown="0.2"))
    assert rep["lateness_us"] is None and rep["spin_s"] is None
    assert_one_population(rep)


def test_overload_histogram_counts_what_was_served(echo_server: Callable[..., int]) -> None:
    """2,000 msg/s offered to a server that spends 2 ms on each message (at most 500 msg/s): the backlog
    grows through the measure phase, so its later arrivals are echoed in the cool-down or never. The
    histogram and `messages` count exactly the arrivals served, those echoed in the cool-down included
    (they are the slowest). No warm-up: the first arrivals are served whatever the load, the rest can
    only be later."""
    port = echo_server("--work-us", "2000", "--msg-size", "16")
    args = client_args(port, conns=4, threads=1, warmup="0", duration="2", cooldown="1")
    rep = run_client([*args, "--rate", "2000", "--stall-timeout", "30"])
    assert 0 < rep["served"] < rep["offered"]
    assert_one_population(rep)


def progress_lines(proc: subprocess.Popen[str], count: int, timeout: float) -> list[dict[str, Any]]:
    assert proc.stderr is not None
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        out.append(json.loads(line))
    return out


@pytest.mark.parametrize("kind", ["bin", "asan", "tsan"])
def test_early_stop_cuts_everything_at_one_instant(echo_server: Callable[..., int], kind: str) -> None:
    """An open-loop run told to stop after its second measured second reports those two seconds and
    nothing after them: offered is what the seeded schedule intends in them (the same as a run measuring
    2 s), and messages, served, the histogram and the samples all count the same requests."""
    port = echo_server()
    common = client_args(port, conns=8, threads=2, warmup="0.3", duration="20", cooldown="0.5")
    proc = subprocess.Popen(
        [str(client_bin(kind)), *common, "--rate", "1000", "--progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **SANITIZER_ENV[kind]},
    )
    try:
        seen = progress_lines(proc, 2, timeout=60)
        assert [d["second"] for d in seen] == [1, 2]
        proc.send_signal(signal.SIGUSR1)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    assert not any(m in stderr for m in MARKERS), stderr[-3000:]
    rep = json.loads(stdout)
    assert rep["stopped_early"] is True and rep["duration_s"] == 2
    short = client_args(port, conns=8, threads=2, warmup="0.3", duration="2", cooldown="0.5")
    assert rep["offered"] == run_client([*short, "--rate", "1000"])["offered"]
    assert_one_population(rep)

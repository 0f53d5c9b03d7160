"""The C helpers of the benchmarks (images/bench): they build warning-free, notify-scale reports exactly the
ready descriptors for every notifier, min-echo serves demux-client and accounts its messages, and
cpu-pingpong times a cache line's round trip between two CPUs, wake-cost what waking a sleeping receiver costs
a loopback send."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.server import build_target

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("DEMUXLAB_BIN_DIR", REPO / "build" / "bin"))


def build(name: str) -> Path:
    """images/bench/<name>.c, built by images/Makefile (the flags of the binaries; notify-scale links the
    server's notifier back-ends) into build/bench/, wake-cost into build/bin/ (the launchers run it)."""
    where = "bin" if name == "wake_cost" else "bench"
    target = f"../build/{where}/{name.replace('_', '-')}"
    build_target(target)
    return REPO / "build" / where / name.replace("_", "-")


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


def two_cpus() -> tuple[int, int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("cpu-pingpong needs two CPUs")
    return cpus[0], cpus[1]


def run_two_cpu_helper(name: str, *args: str) -> tuple[tuple[int, int], dict[str, Any]]:
    """(the two CPUs, the JSON line) of a two-CPU helper run on the first two CPUs this process may use."""
    prog = build(name)
    a, b = two_cpus()
    res = subprocess.run([str(prog), "--cpus", f"{a},{b}", *args], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return (a, b), json.loads(res.stdout)


def test_cpu_pingpong_times_the_round_trip() -> None:
    """The two pinned threads pass the counter 1,000 times (5 batches of 200): a round trip takes some
    nanoseconds, well under the 100 µs a round trip through the scheduler would (a side that never
    answered would spin forever: the timeout)."""
    cpus, out = run_two_cpu_helper("cpu_pingpong", "--rounds", "1000")
    assert out["cpus"] == list(cpus) and out["rounds"] == 1000
    assert 0 < out["min_ns"] <= out["round_trip_ns"] < 100_000


def test_wake_cost_times_a_send_that_wakes_its_receiver() -> None:
    """wake-cost times a one-byte loopback send in the sender's CPU time, with the receiver asleep in
    epoll_wait (on an idle, then on a busy CPU) and awake (polling): a send that must wake its receiver
    costs the sender more than one that finds it awake, and every figure is a send's, not a scheduler
    delay's (well under a millisecond). Then the hand-off of a lock to a waiter asleep on it."""
    cpus, out = run_two_cpu_helper("wake_cost", "--sends", "500")
    assert out["cpus"] == list(cpus) and out["sends"] == 500
    assert 0 < out["awake_ns"] < out["asleep_ns"] < 1_000_000 and out["awake_ns"] < out["busy_ns"] < 1_000_000
    assert out["wake_ns"] == out["asleep_ns"] - out["awake_ns"]
    assert out["busy_wake_ns"] == out["busy_ns"] - out["awake_ns"]
    # and a pthread mutex released while its waiter sleeps on it on the other CPU: idle until the waiter
    # runs, a wake-up's latency (20-28 µs on the 2-core VM), not a spin's (tens of ns)
    assert 500 < out["handoff_ns"] < 1_000_000


@pytest.mark.parametrize(
    ("name", "count", "low", "absent_cpu"),
    [
        ("cpu_pingpong", "--rounds", ("4", "5 to 2^32"), "cannot pin to CPU {cpu}: "),
        (
            "wake_cost",
            "--sends",
            ("0", "1 to 1000000"),
            "cannot pin to the second CPU, or epoll failed there: ",
        ),
    ],
)
def test_two_cpu_helpers_reject_bad_input(
    name: str, count: str, low: tuple[str, str], absent_cpu: str
) -> None:
    """cpu-pingpong and wake-cost share their command line (images/bench/helper_args.h): each bad option is
    one line and exit 2; a CPU this process may not run on is exit 1, said, with no spinning on (the other
    side cannot pin itself)."""
    prog, tool = build(name), name.replace("_", "-")
    a, b = two_cpus()
    for args, why in (
        (["--cpus", f"{a},{a}"], "--cpus needs two different CPUs, as A,B"),
        (["--cpus", f"{a},{b},{a}"], "--cpus needs two different CPUs, as A,B"),
        (["--cpus", f"{a},{b}", count, low[0]], f"{count} needs a whole number from {low[1]}"),
        (["--cpus", f"{a},{b}", "--bogus"], "unknown option"),
        ([], "--cpus is required"),
    ):
        res = subprocess.run([str(prog), *args], capture_output=True, text=True, timeout=30)
        assert res.returncode == 2 and res.stderr.startswith(f"{tool}: {why} (usage: {tool} --cpus A,B ["), (
            res.stderr
        )
    absent = max(os.sched_getaffinity(0)) + 1
    res = subprocess.run([str(prog), "--cpus", f"{a},{absent}"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 1 and res.stderr.startswith(f"{tool}: " + absent_cpu.format(cpu=absent)), (
        res.stderr
    )


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


def test_cpu_placement_bench_groups_runs_by_round_trip() -> None:
    """bench/fidelity/cpu_placement.py runs a point again and again with the round trip around each run; with
    --near far above any round trip every run is near, and there is no far group to compare."""
    two_cpus()
    res = subprocess.run(
        [sys.executable, "-m", "bench.fidelity.cpu_placement", "--runs", "2", "--duration", "0.3",
         "--warmup", "0.1", "--connections", "8", "--near", "1e9"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    runs = re.findall(r"^# run (\d)/2: ([\d,]+) msg/s, round trip (\d+)/(\d+) ns$", res.stdout, flags=re.M)
    assert [r[0] for r in runs] == ["1", "2"] and all(int(r[2]) > 0 and int(r[3]) > 0 for r in runs)
    near = re.search(r"^\s*near \(≤ 1e\+09 ns\)\s+(\d+)\s", res.stdout, flags=re.M)
    assert near and near.group(1) == "2", res.stdout
    assert "far (>" not in res.stdout and "far / near" not in res.stdout
    # Each run's row: how busy the server's and the client's CPU were (their softirq share in brackets):
    # both ran, and the softirq is part of the busy time.
    shares = re.findall(r"^\s*[12]\s.*\s(\d+)% \((\d+)%\)\s+(\d+)% \((\d+)%\)$", res.stdout, flags=re.M)
    assert len(shares) == 2, res.stdout
    for row in shares:
        server_busy, server_soft, client_busy, client_soft = map(int, row)
        assert 0 < server_busy <= 100 and 0 < client_busy <= 100
        assert server_soft <= server_busy and client_soft <= client_busy

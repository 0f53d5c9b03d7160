"""Benchmark: does a finished reply wait behind other messages' work? io_uring patterns (issue 48, item 5).

Two measurements, one server thread (pinned to --server-cpu), W µs of work per message:

- burst: --burst connections each send one message while the server is stopped (SIGSTOP), so that all
  of them are reaped in one completion batch when it continues; the kernel's receive timestamps of the
  replies (SO_TIMESTAMPNS) give when each left, counted from the SIGCONT. A server that holds every reply
  until the batch's last work is done sends them all at about k·W (first/last ≈ 1); one that sends each
  reply when its work is done sends the i-th at about i·W (first/last ≈ 1/k). The ratios hold on a busy
  host too, where the times themselves stretch.
- open loop: demux-client (pinned to --client-cpu) at --rate msg/s (Poisson) over --connections: latency
  p50/p90/p99/mean (µs) and the server's CPU per message (µs). On a busy host (where the server's share
  of its CPU varies) these move with the load more than with the design: quote them with it.

With --before OLD-BUILD both builds run, alternating, --rounds times; medians are printed.

    .venv/bin/python -m bench uring_fairness [--before /tmp/old/demux-server] [--rounds 3]
        [--pairs uring,uring-shared] [--work-us 200] [--burst 16] [--rate 1000] [--connections 32]

The load average is printed with every row: on a shared machine say so when quoting.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common.cli import entry, nonnegative_float, positive_float, positive_int
from bench.common.pairs import binary, client_report, cpu_list, load_parser, pattern_list, start_server

FIELDS = ("p50", "p90", "p99", "mean")
SO_TIMESTAMPNS = 35  # asm-generic/socket.h SO_TIMESTAMPNS_OLD (= SCM_TIMESTAMPNS); Python lacks the name


def start(server: Path, pattern: str, a: argparse.Namespace) -> tuple[subprocess.Popen[str], int]:
    argv = f"--pattern {pattern} --notifier uring --threads 1 --msg-size {a.msg_size} --port 0"
    return start_server(
        ["taskset", "-c", a.server_cpu, str(server), *argv.split(), "--work-us", str(a.work_us)]
    )


def stopped(pid: int) -> bool:
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            states.append(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:
            continue
    return all(st == "T" for st in states)


def burst(server: Path, pattern: str, a: argparse.Namespace) -> dict[str, float]:
    """The replies of one batch of --burst messages: when the first, the median and the last left (ms
    after SIGCONT), and first/last."""
    proc, port = start(server, pattern, a)
    try:
        socks = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(a.burst)]
        for s in socks:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        msg = b"m" * a.msg_size
        for s in socks:  # one round trip each: accepted and armed
            s.sendall(msg)
        for s in socks:
            s.recvmsg(a.msg_size, socket.CMSG_SPACE(16))
        proc.send_signal(signal.SIGSTOP)
        while not stopped(proc.pid):
            time.sleep(0.002)
        for s in socks:
            s.sendall(msg)
        zero = struct.pack("i", 0)
        while any(fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, zero) != zero for s in socks):
            time.sleep(0.002)
        t0 = time.time()  # SO_TIMESTAMPNS is CLOCK_REALTIME
        proc.send_signal(signal.SIGCONT)
        left = []
        for s in socks:
            _, anc, _, _ = s.recvmsg(a.msg_size, socket.CMSG_SPACE(16))
            stamp = next(d for lvl, typ, d in anc if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS)
            sec, nsec = struct.unpack("qq", stamp[:16])
            left.append((sec + nsec / 1e9 - t0) * 1e3)
        for s in socks:
            s.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    left.sort()
    return {
        "first": left[0],
        "median": statistics.median(left),
        "last": left[-1],
        "ratio": left[0] / left[-1],
    }


def client_args(a: argparse.Namespace) -> list[str]:
    return (
        f"--connections {a.connections} --threads 1 --msg-size {a.msg_size} "
        f"--warmup {a.warmup} --duration {a.duration} --cpus {a.client_cpu}"
    ).split()


def one_run(server: Path, pattern: str, a: argparse.Namespace) -> dict[str, float]:
    proc, port = start(server, pattern, a)
    try:
        client = client_report(port, [*client_args(a), "--rate", str(a.rate)], timeout=a.duration + 60)
    finally:
        proc.terminate()
        stdout, _ = proc.communicate(timeout=30)
    srv = json.loads(stdout.strip().splitlines()[-1])
    cpu = srv["cpu_s"]["user"] + srv["cpu_s"]["sys"]
    row = {f: float(client["latency_us"][f]) for f in FIELDS}
    row["msgs"] = float(client["throughput_msgs_per_s"])
    row["cpu"] = cpu / max(srv["messages"], 1) * 1e6
    row["load"] = os.getloadavg()[0]
    return row


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=4.0)  # --warmup: the open loop's
    ap.add_argument("--before", default=None, help="an older demux-server build to compare")
    ap.add_argument("--rounds", type=positive_int, default=1)
    ap.add_argument(
        "--pairs",
        type=pattern_list,
        default=pattern_list("uring,uring-shared"),
        help="patterns (notifier uring, 1 thread)",
    )
    ap.add_argument("--work-us", type=nonnegative_float, default=200.0)
    ap.add_argument("--rate", type=positive_float, default=1000.0)
    ap.add_argument("--burst", type=positive_int, default=16, help="messages in the burst's one batch")
    ap.add_argument("--connections", type=positive_int, default=32)
    ap.add_argument("--msg-size", type=positive_int, default=64)
    ap.add_argument("--server-cpu", type=cpu_list, default="0")
    ap.add_argument("--client-cpu", type=cpu_list, default="1")
    a = ap.parse_args(argv)
    builds = {"after": binary("demux-server")}
    if a.before:
        builds = {"before": Path(a.before), **builds}
    print(
        f"host {os.uname().nodename}, {os.cpu_count()} CPUs; 1 server thread, W = {a.work_us:g} µs; "
        f"median of {a.rounds} round(s); load = 1-min average"
    )
    print(f"burst: {a.burst} messages in one batch; when their replies left, ms after the server continued")
    print(
        f"{'pattern':>12} {'build':>6} {'first':>7} {'median':>7} {'last':>7} {'first/last':>10} {'load':>5}"
    )
    for pattern in a.pairs:
        got: dict[str, list[dict[str, float]]] = {b: [] for b in builds}
        for rnd in range(a.rounds):
            for b in list(builds) if rnd % 2 == 0 else list(reversed(builds)):
                got[b].append({**burst(builds[b], pattern, a), "load": os.getloadavg()[0]})
        for b in builds:
            med = {k: statistics.median(r[k] for r in got[b]) for k in got[b][0]}
            print(
                f"{pattern:>12} {b:>6} {med['first']:>7.2f} {med['median']:>7.2f} {med['last']:>7.2f} "
                f"{med['ratio']:>10.3f} {med['load']:>5.1f}"
            )
    print(f"open loop: {a.rate:g} msg/s over {a.connections} connections, {a.duration:g} s; latency in µs")
    print(
        f"{'pattern':>12} {'build':>6} {'msg/s':>7} {'p50':>7} {'p90':>7} {'p99':>7} {'mean':>7} "
        f"{'CPU/msg':>8} {'load':>5}"
    )
    for pattern in a.pairs:
        rows: dict[str, list[dict[str, float]]] = {b: [] for b in builds}
        for rnd in range(a.rounds):
            for b in list(builds) if rnd % 2 == 0 else list(reversed(builds)):
                rows[b].append(one_run(builds[b], pattern, a))
        for b in builds:
            med = {k: statistics.median(r[k] for r in rows[b]) for k in rows[b][0]}
            print(
                f"{pattern:>12} {b:>6} {med['msgs']:>7.0f} {med['p50']:>7.0f} {med['p90']:>7.0f} "
                f"{med['p99']:>7.0f} {med['mean']:>7.0f} {med['cpu']:>8.2f} {med['load']:>5.1f}"
            )


if __name__ == "__main__":
    entry(main)

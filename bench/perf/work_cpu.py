"""Benchmark: is the emulated work CPU time? (issue 48, item 1; target: CPU per message >= 0.97 x W)

For every pattern, at --work-us W (default 2000) with --wakers threads (default 4) that wake often on the
server's CPU (busy 100 us, asleep 100 us: the way the other threads of an oversubscribed server, or a busy
host's daemons, behave), a closed loop of demux-client on another CPU: the server's threads' CPU time per
message (the sum of threads_detail's cpu_s over the messages, both from the server's exit JSON), its
ratio to W, and the verdict. The wakers preempt the spinning thread again and again; a spin to a
wall-clock deadline (the server before issue 48, `--before OLD-BINARY`) then ends with part of its work
undone. The work's own CPU is the largest part of a message at this W, so the ratio is a little above 1
(the message's recv/send and the switches back in add to it).

    .venv/bin/python -m bench work_cpu [--work-us 2000] [--wakers 4] [--duration 3] [--pairs ...]
        [--before /tmp/old/demux-server] [--rounds 1]

Prints the 1-minute load average with every row: on a busy machine the server gets less CPU per second,
not less per message (the ratio does not move), but msg/s does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.cli import entry, nonnegative_int, positive_float, positive_int, print_table
from bench.common.pairs import binary, client_report, load_parser, pair_thread_list, start_server, two_cpus

DEFAULT_PAIRS = (
    "reactor/epoll-et/1,hsha/epoll-lt/2,lf/epoll-et/2,proactor/poll/2,multireactor/epoll-lt/1,"
    "tpc/none/1,uring/uring/1,uring-shared/uring/1"
)
WAKER = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
pc, nap = time.perf_counter, 100e-6
while True:
    end = pc() + 100e-6
    while pc() < end:
        pass
    time.sleep(nap)
"""


def run_point(
    server: Path, pattern: str, notifier: str, threads: int, args: argparse.Namespace, cpus: list[int]
) -> dict[str, Any]:
    server_cpu, client_cpu = cpus[-1], cpus[0]
    wakers = [subprocess.Popen([sys.executable, "-c", WAKER, str(server_cpu)]) for _ in range(args.wakers)]
    try:
        cmd = [str(server), "--pattern", pattern, "--notifier", notifier, "--threads", str(threads)]
        cmd += ["--port", "0", "--msg-size", "16", "--work-us", str(args.work_us), "--cpus", str(server_cpu)]
        srv, port = start_server(cmd)
        try:
            cli = client_report(
                port,
                [
                    *("--connections", str(args.connections), "--threads", "1", "--msg-size", "16"),
                    *("--warmup", str(args.warmup), "--duration", str(args.duration)),
                    *("--cpus", str(client_cpu), "--stall-timeout", "60"),
                ],
                timeout=args.duration + 120,
            )
        except BaseException:
            srv.kill()
            srv.communicate()
            raise
        srv.send_signal(signal.SIGTERM)
        stdout, _ = srv.communicate(timeout=60)
        res: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    finally:
        for w in wakers:
            w.kill()
            w.wait()
    cpu = sum(t["cpu_s"]["user"] + t["cpu_s"]["sys"] for t in res["threads_detail"])
    return {
        "messages": res["messages"],
        "cpu_us_per_msg": cpu / max(res["messages"], 1) * 1e6,
        "msgs_per_s": cli["throughput_msgs_per_s"],
        "work_clock": res.get("work_clock", "wall"),
        "load": os.getloadavg()[0],
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=3.0)
    ap.set_defaults(warmup=0.5)
    ap.add_argument("--work-us", type=positive_float, default=2000.0)
    ap.add_argument("--wakers", type=nonnegative_int, default=4)
    ap.add_argument("--connections", type=positive_int, default=2)
    ap.add_argument(
        "--pairs",
        type=pair_thread_list,
        default=pair_thread_list(DEFAULT_PAIRS),
        help="pattern/notifier/threads list",
    )
    ap.add_argument("--server-bin", default=None, help="demux-server to measure (default: build/bin)")
    ap.add_argument("--before", default=None, help="an older demux-server, measured alternately")
    ap.add_argument("--rounds", type=positive_int, default=1)
    args = ap.parse_args(argv)
    cpus = two_cpus()  # the server's (and its wakers') and the client's
    builds = [("after", Path(args.server_bin or binary("demux-server")))]
    if args.before:
        builds.append(("before", Path(args.before)))
    print(
        f"W = {args.work_us:g} us, {args.wakers} threads busy 100 us / asleep 100 us on the server's CPU "
        f"{cpus[-1]}, client on CPU {cpus[0]}, {args.connections} connections, 16-byte messages, "
        f"median of {args.rounds} round(s); CPU/msg: the server threads' CPU time per message (exit JSON); "
        "load: 1-minute load average"
    )
    header = ["pair", "build", "work_clock", "msg/s", "CPU us/msg", "CPU/W", "verdict", "load"]
    rows: list[list[str]] = []
    for pattern, notifier, threads in args.pairs:
        got: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in builds}
        for r in range(args.rounds):
            order = builds if r % 2 == 0 else list(reversed(builds))
            for name, server in order:
                got[name].append(run_point(server, pattern, notifier, threads, args, cpus))
        for name, _ in builds:
            pts = got[name]
            per = statistics.median(p["cpu_us_per_msg"] for p in pts)
            ratio = per / args.work_us
            rows.append(
                [
                    f"{pattern}/{notifier} t{threads}",
                    name,
                    pts[0]["work_clock"],
                    f"{statistics.median(p['msgs_per_s'] for p in pts):,.0f}",
                    f"{per:,.1f}",
                    f"{ratio:.3f}",
                    "ok" if ratio >= 0.97 else "BELOW 0.97",
                    f"{statistics.median(p['load'] for p in pts):.1f}",
                ]
            )
            print("  ".join(rows[-1]), flush=True)
    print()
    print_table(header, rows)


if __name__ == "__main__":
    entry(main)

"""Benchmark: is the emulated work CPU time? (issue 48, item 1; target: CPU per message >= 0.97 x W)

For every pattern, at --work-us W (default 2000) with --wakers threads (default 4) that wake often on the
server's CPU (busy 100 us, asleep 100 us: the way the other threads of an oversubscribed server, or a busy
host's daemons, behave), a closed loop of demux-client on another CPU: the server's threads' CPU time per
message (the sum of threads_detail's cpu_s over the messages, both from the server's exit JSON), its
ratio to W, and the verdict. The wakers preempt the spinning thread again and again; a spin to a
wall-clock deadline (the server before issue 48, `--before OLD-BINARY`) then ends with part of its work
undone. The work's own CPU is the largest part of a message at this W, so the ratio is a little above 1
(the message's recv/send and the switches back in add to it).

    .venv/bin/python bench/work_cpu.py [--work-us 2000] [--wakers 4] [--duration 3] [--pairs ...]
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
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "build" / "bin"
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


class BenchError(Exception):
    pass


def load() -> float:
    return os.getloadavg()[0]


def run_point(
    server: Path, pattern: str, notifier: str, threads: int, args: argparse.Namespace, cpus: list[int]
) -> dict[str, Any]:
    server_cpu, client_cpu = cpus[-1], cpus[0]
    wakers = [subprocess.Popen([sys.executable, "-c", WAKER, str(server_cpu)]) for _ in range(args.wakers)]
    try:
        cmd = [str(server), "--pattern", pattern, "--notifier", notifier, "--threads", str(threads)]
        cmd += ["--port", "0", "--msg-size", "16", "--work-us", str(args.work_us), "--cpus", str(server_cpu)]
        srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert srv.stdout is not None
        line = srv.stdout.readline()
        if not line:
            raise BenchError(f"{' '.join(cmd)}: did not start: {srv.communicate()[1].strip()}")
        port = json.loads(line)["port"]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "client.json"
            client = subprocess.run(
                [
                    *(str(BIN / "demux-client"), "--host", "127.0.0.1", "--port", str(port)),
                    *("--connections", str(args.connections), "--threads", "1", "--msg-size", "16"),
                    *("--warmup", "0.5", "--duration", str(args.duration), "--cpus", str(client_cpu)),
                    *("--stall-timeout", "60", "--json", str(out)),
                ],
                capture_output=True,
                text=True,
                timeout=args.duration + 120,
            )
            if client.returncode != 0:
                srv.kill()
                raise BenchError(f"demux-client failed: {client.stderr.strip()}")
            cli = json.loads(out.read_text())
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
        "load": load(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-us", type=float, default=2000.0)
    ap.add_argument("--wakers", type=int, default=4)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--pairs", default=DEFAULT_PAIRS, help="pattern/notifier/threads list")
    ap.add_argument("--server-bin", default=str(BIN / "demux-server"))
    ap.add_argument("--before", default=None, help="an older demux-server, measured alternately")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise BenchError("needs two CPUs: one for the server and its wakers, one for the client")
    builds = [("after", Path(args.server_bin))] + ([("before", Path(args.before))] if args.before else [])
    print(
        f"W = {args.work_us:g} us, {args.wakers} threads busy 100 us / asleep 100 us on the server's CPU "
        f"{cpus[-1]}, client on CPU {cpus[0]}, {args.connections} connections, 16-byte messages, "
        f"median of {args.rounds} round(s); CPU/msg: the server threads' CPU time per message (exit JSON); "
        "load: 1-minute load average"
    )
    header = ["pair", "build", "work_clock", "msg/s", "CPU us/msg", "CPU/W", "verdict", "load"]
    rows: list[list[str]] = []
    for spec in args.pairs.split(","):
        pattern, notifier, threads = spec.split("/")
        got: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in builds}
        for r in range(args.rounds):
            order = builds if r % 2 == 0 else list(reversed(builds))
            for name, binary in order:
                got[name].append(run_point(binary, pattern, notifier, int(threads), args, cpus))
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
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    for i, row in enumerate([header, *rows]):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"work_cpu: error: {e}", file=sys.stderr)
        sys.exit(1)

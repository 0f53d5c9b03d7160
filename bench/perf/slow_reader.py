"""Benchmark: one slow reader beside the others (issue 48, item 3; targets: the others keep >= 0.9 x their
throughput, the server's memory stays <= 64 MB).

For each pair: a closed loop of demux-client over --connections connections of --msg-size bytes (default
8 x 64 KiB) for --duration seconds, once against a server alone and once against a server with one more
connection that floods it with messages and never reads (opened and filled before the client starts,
kept until the server stops; --stall-ms is an hour, so it stays parked the whole run). Prints the
others' msg/s in both, their ratio, and the server's peak resident memory (VmHWM from /proc) in the run
with the slow reader. Rounds alternate the two (median); the 1-minute load average is printed with each
row, and a busy machine moves msg/s by more than the target's 10 %: rerun it quiet before reading the
ratio as a verdict.

    .venv/bin/python -m bench slow_reader [--pairs reactor/epoll-lt/1,...] [--rounds 3] [--duration 3]
        [--server-bin PATH]
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import statistics
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.cli import BenchError, entry, positive_int, print_table
from bench.common.pairs import (
    binary,
    client_report,
    cpus_available,
    load_parser,
    pair_thread_list,
    peak_rss_mib,
    start_server,
)

DEFAULT_PAIRS = (
    "reactor/epoll-lt/1,reactor/select/1,hsha/epoll-et/2,hsha/poll/2,lf/epoll-lt/2,lf/uring/2,"
    "proactor/epoll-et/2,proactor/poll/2,multireactor/epoll-et/2,tpc/none/2,uring/uring/1,"
    "uring-shared/uring/2"
)
HOUR_MS = 3_600_000
QUIET_S = 0.3


class SlowReader:
    """A connection that sends whole messages and never reads: it fills until the server stops taking
    them (its socket stays full for QUIET_S), then sits; closed at the end."""

    def __init__(self, port: int, msg_size: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setblocking(False)
        payload = os.urandom(msg_size)
        self.sent = 0
        while self.sent < 1024 * msg_size:
            try:
                self.sent += self.sock.send(payload[self.sent % msg_size :])
            except BlockingIOError:
                _, w, _ = select.select([], [self.sock], [], QUIET_S)
                if not w:
                    break
            except OSError:
                break

    def close(self) -> None:
        self.sock.close()


def run(server: Path, pair: tuple[str, str, int], slow: bool, args: argparse.Namespace) -> dict[str, Any]:
    pattern, notifier, threads = pair
    cpus = cpus_available()
    server_cpus = ",".join(str(c) for c in cpus[: max(1, len(cpus) // 2)])
    client_cpus = ",".join(str(c) for c in cpus[len(cpus) // 2 :] or cpus)
    cmd = [str(server), "--pattern", pattern, "--notifier", notifier, "--threads", str(threads)]
    cmd += ["--port", "0", "--msg-size", str(args.msg_size), "--stall-ms", str(HOUR_MS)]
    cmd += ["--cpus", server_cpus]
    srv, port = start_server(cmd)
    reader: SlowReader | None = None
    try:
        if slow:
            reader = SlowReader(port, args.msg_size)
        rss_peak = [0.0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                rss_peak[0] = max(rss_peak[0], peak_rss_mib(srv.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        failed = False
        try:
            cli = client_report(
                port,
                [
                    *("--connections", str(args.connections), "--threads", "1"),
                    *("--msg-size", str(args.msg_size), "--warmup", str(args.warmup)),
                    *("--duration", str(args.duration), "--cpus", client_cpus, "--stall-timeout", "30"),
                ],
                timeout=args.duration + 120,
            )
        except BenchError:  # counted as 0 msg/s and marked "(client failed)"
            failed, cli = True, {"throughput_msgs_per_s": 0.0}
        done.set()
        sampler.join()
        rss_peak[0] = max(rss_peak[0], peak_rss_mib(srv.pid))
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.communicate()
        if reader is not None:
            reader.close()
    return {
        "msgs_per_s": float(cli["throughput_msgs_per_s"]),
        "rss_mb": rss_peak[0],
        "failed": failed,
        "load": os.getloadavg()[0],
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=3.0)
    ap.set_defaults(warmup=0.5)
    ap.add_argument(
        "--pairs",
        type=pair_thread_list,
        default=pair_thread_list(DEFAULT_PAIRS),
        help="pattern/notifier/threads list",
    )
    ap.add_argument("--connections", type=positive_int, default=8)
    ap.add_argument("--msg-size", type=positive_int, default=64 * 1024)
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--server-bin", default=None, help="demux-server to measure (default: build/bin)")
    args = ap.parse_args(argv)
    server = Path(args.server_bin or binary("demux-server"))
    print(
        f"{args.connections} closed-loop connections x {args.msg_size} B, {args.duration:g} s measured, "
        f"median of {args.rounds} alternating rounds; slow: one more connection that floods and never "
        "reads (--stall-ms an hour); RSS: the server's peak resident set (VmHWM) with the slow reader; "
        "targets: ratio >= 0.9, RSS <= 64 MB; load: 1-minute load average"
    )
    header = ["pair", "alone msg/s", "with slow msg/s", "ratio", "RSS MB", "verdict", "load"]
    rows: list[list[str]] = []
    for pair in args.pairs:
        pattern, notifier, threads = pair
        alone: list[dict[str, Any]] = []
        slow: list[dict[str, Any]] = []
        for r in range(args.rounds):
            for with_slow in (r % 2 == 1, r % 2 == 0):
                (slow if with_slow else alone).append(run(server, pair, with_slow, args))
        a = statistics.median(p["msgs_per_s"] for p in alone)
        b = statistics.median(p["msgs_per_s"] for p in slow)
        rss = max(p["rss_mb"] for p in slow)
        ratio = b / a if a > 0 else float("nan")
        ok = ratio >= 0.9 and rss <= 64.0 and not any(p["failed"] for p in slow)
        rows.append(
            [
                f"{pattern}/{notifier} t{threads}",
                f"{a:,.0f}",
                f"{b:,.0f}" + (" (client failed)" if any(p["failed"] for p in slow) else ""),
                f"{ratio:.2f}",
                f"{rss:.1f}",
                "ok" if ok else "MISSED",
                f"{statistics.median(p['load'] for p in alone + slow):.1f}",
            ]
        )
        print("  ".join(rows[-1]), flush=True)
    print()
    print_table(header, rows)


if __name__ == "__main__":
    entry(main)

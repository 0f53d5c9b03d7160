"""Open-loop arrivals on time (issue 48, item 2): how late demux-client sends against its own schedule,
and what that adds to the open-loop latency, before and after.

"Before" is demux-client as of a git revision (default 807df91: epoll_pwait2 with the default 50 us of
timer slack, no spin), extracted with `git archive` into a temporary directory and built there, with one
probe added that records the same lateness the current client reports (actual send minus the later of the
intended send time and the echo that freed the connection); nothing else of it changes. "After" is
build/bin/demux-client (`make build`).

For each client, --rounds times (the two alternate within a round, so load drifts hit both alike):
  - open loop: --rate msg/s (default 2,000) over --connections (16) on --client-threads (1): the client's
    lateness p50/p99 (the target: p50 <= 5 us), the latency p50/p99, the client's CPU time per second
    of the measure phase (user + sys) and, after, the time it spent spinning to due arrivals (spin_s);
  - closed loop over one connection: the latency p50, and the open loop's p50 minus it (the issue
    measured ~110 us here before: the timer's lateness, on loopback more than the round trip).
The server is demux-server reactor/epoll-lt, one thread, 16-byte messages (one per client message),
pinned to --server-cpu; the client to --client-cpu. It prints the medians over the rounds and the
1-minute load average at the start and the end: on a shared machine the figures move with it.

    .venv/bin/python -m bench client_lateness [--rounds 3] [--duration 5] [--rate 2000]
        [--connections 16] [--client-threads 1] [--before-rev 807df91] [--before-bin PATH]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import REPO
from bench.common.cli import BenchError, entry, positive_float, positive_int
from bench.common.pairs import binary, client_report, cpu_list, load_parser, start_server

# The probe added to the old client: (file under images/client/src, text, replacement), each text once.
PROBE = [
    (
        "client.h",
        "    uint64_t next_arrival; /* open loop: intended time of the next request */",
        "    uint64_t next_arrival; /* open loop: intended time of the next request */\n"
        "    uint64_t free_ns;",
    ),
    ("client.h", "    struct hist lat; /* ns, measure phase only */", "    struct hist lat, late;"),
    (
        "worker.c",
        "    if (rate_per_ns > 0.0 && in_measure(w->run, start))\n        w->offered++;",
        "    if (rate_per_ns > 0.0 && in_measure(w->run, start)) {\n        w->offered++;\n"
        "        uint64_t ref = start > c->free_ns ? start : c->free_ns, sent = now_ns();\n"
        "        hist_add(&w->late, sent > ref ? sent - ref : 0);\n    }",
    ),
    ("worker.c", "    c->busy = 0;\n    c->seq++;", "    c->busy = 0;\n    c->seq++;\n    c->free_ns = t;"),
    ("main.c", "        hist_init(&w->lat);", "        hist_init(&w->lat);\n        hist_init(&w->late);"),
    (
        "main.c",
        "    static struct hist lat;\n",
        "    static struct hist lat, late;\n    hist_init(&late);\n"
        "    for (uint32_t i = 0; i < opt->threads; i++)\n        hist_merge(&late, &ws[i].late);\n",
    ),
    (
        "main.c",
        '    fprintf(f, ", \\"cpu_s\\": ',
        '    fprintf(f, ", \\"lateness_us\\": {\\"p50\\": %.3f, \\"p99\\": %.3f, \\"count\\": %llu}",\n'
        "            hist_percentile(&late, 50) / 1e3, hist_percentile(&late, 99) / 1e3,\n"
        "            (unsigned long long)hist_count(&late));\n"
        '    fprintf(f, ", \\"cpu_s\\": ',
    ),
]


def build_before(rev: str, where: Path) -> Path:
    """demux-client at ``rev`` with the lateness probe, built under ``where``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "images"], capture_output=True)
    if archive.returncode != 0:
        raise BenchError(f"git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    src = where / "images" / "client" / "src"
    for name, old, new in PROBE:
        path = src / name
        text = path.read_text()
        if text.count(old) != 1:
            raise BenchError(f"{rev}'s {name} does not have the probe's anchor once")
        path.write_text(text.replace(old, new))
    build = where / "build"
    res = subprocess.run(
        ["make", "-s", "-C", str(where / "images"), f"BUILD={build}", f"{build}/bin/demux-client"],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise BenchError(f"building {rev}'s demux-client failed: {(res.stderr or res.stdout).strip()[-500:]}")
    return build / "bin" / "demux-client"


def reactor(cpu: str) -> tuple[subprocess.Popen[str], int]:
    return start_server(
        [str(binary("demux-server")), "--pattern", "reactor", "--notifier", "epoll-lt", "--threads", "1",
         "--msg-size", "16", "--cpus", cpu, "--port", "0"]
    )  # fmt: skip


def run_client(client: Path, port: int, args: argparse.Namespace, *, rate: float | None) -> dict[str, Any]:
    conns, threads = (args.connections, args.client_threads) if rate else (1, 1)
    options = [
        "--connections", str(conns), "--threads", str(threads), "--msg-size", "16",
        "--warmup", str(args.warmup), "--duration", str(args.duration), "--cooldown", "0.5",
        "--cpus", str(args.client_cpu),
    ]  # fmt: skip
    if rate:
        options += ["--rate", str(rate)]
    return client_report(port, options, timeout=args.duration + 60, client=client)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=5.0)
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--rate", type=positive_float, default=2000.0)
    ap.add_argument("--connections", type=positive_int, default=16)
    ap.add_argument("--client-threads", type=positive_int, default=1)
    ap.add_argument("--server-cpu", type=cpu_list, default="0")
    ap.add_argument("--client-cpu", type=cpu_list, default="1")
    ap.add_argument("--before-rev", default="807df91")
    ap.add_argument("--before-bin", type=Path, help="an old demux-client with the probe, built before")
    args = ap.parse_args(argv)
    after = binary("demux-client")
    binary("demux-server")  # both built (`make build`) before the old client is

    with tempfile.TemporaryDirectory(prefix="client-lateness-") as tmp:
        before = args.before_bin or build_before(args.before_rev, Path(tmp))
        clients = {f"before ({args.before_rev})": before, "after": after}
        load0 = os.getloadavg()
        rows: dict[str, dict[str, list[float]]] = {name: {} for name in clients}
        server, port = reactor(args.server_cpu)
        try:
            for r in range(args.rounds):
                for name, client in clients.items():
                    row = rows[name]
                    opened = run_client(client, port, args, rate=args.rate)
                    closed = run_client(client, port, args, rate=None)
                    late, lat = opened["lateness_us"], opened["latency_us"]
                    cpu = (opened["cpu_s"]["user"] + opened["cpu_s"]["sys"]) / opened["duration_s"]
                    figures = {
                        "late_p50": late["p50"], "late_p99": late["p99"], "lat_p50": lat["p50"],
                        "lat_p99": lat["p99"], "closed_p50": closed["latency_us"]["p50"],
                        "gap_p50": lat["p50"] - closed["latency_us"]["p50"], "cpu": cpu,
                        "spin": (opened.get("spin_s") or 0.0) / opened["duration_s"],
                        "served": opened["served"] / max(1, opened["offered"]),
                    }  # fmt: skip
                    for key, value in figures.items():
                        row.setdefault(key, []).append(float(value))
                    print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()),
                          file=sys.stderr, flush=True)  # fmt: skip
        finally:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=30)
        load1 = os.getloadavg()

    print(f"open loop {args.rate:g} msg/s over {args.connections} connections, {args.client_threads} client "
          f"thread(s), {args.duration:g} s measured, {args.rounds} round(s), medians; load average (1 min) "
          f"{load0[0]:.2f} at the start, {load1[0]:.2f} at the end")  # fmt: skip
    head = ("client", "lateness p50 us", "p99 us", "latency p50 us", "p99 us", "closed 1-conn p50 us",
            "open - closed p50 us", "client CPU s/s", "spinning s/s", "served/offered")  # fmt: skip
    print(" | ".join(head))
    for name, row in rows.items():
        keys = ["late_p50", "late_p99", "lat_p50", "lat_p99", "closed_p50", "gap_p50"]
        keys += ["cpu", "spin", "served"]
        cells = [f"{median(row[k]):.3f}" if k in ("cpu", "spin", "served") else f"{median(row[k]):.1f}"
                 for k in keys]  # fmt: skip
        print(" | ".join([name, *cells]))


if __name__ == "__main__":
    entry(main)

"""Benchmark: thread scaling per pattern × notifier (issue 10: uring and proactor on many-core hosts).

For each pair and each server thread count: throughput at 0 µs work (512 connections by default), its
ratio to the pair's lowest thread count (`×first`: a scaling pattern never goes below 1), its ratio to the
reference pair at the same thread count (`×ref`, default multireactor/epoll-et), the server's CPU time per
message and that of its thread 0 (the demultiplexer of hsha/proactor, the completion thread of
uring-shared; its cost per message is what caps a central design). The server runs pinned to
--server-cpus, the client (--client-threads threads) to --client-cpus; by default the available CPUs are
split in halves. Pairs the binary does not list (e.g. uring-shared in an old build) are skipped.

    .venv/bin/python bench/images_scaling.py [--threads 1,2,4,8] [--pairs uring/uring,proactor/epoll-et]
        [--server-cpus 0-7 --client-cpus 8-15 --client-threads 8] [--server-bin PATH] [--duration 3]

On a host with fewer cores than threads the server is oversubscribed: the figures then show the
per-message costs, not scaling (say so when you quote them).
"""

from __future__ import annotations

import json
import subprocess

from images_lib import (
    BenchError,
    Server,
    binary,
    cpus_available,
    load_parser,
    main_guard,
    print_table,
    run_pair,
)

DEFAULT_PAIRS = "multireactor/epoll-et,uring/uring,uring-shared/uring,proactor/epoll-et,hsha/epoll-et"


def cpu_list(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)


def main() -> None:
    ap = load_parser(__doc__, duration=3.0)
    ap.add_argument("--threads", default="1,2,4,8", help="server thread counts, e.g. 1,2,4,8")
    ap.add_argument("--pairs", default=DEFAULT_PAIRS, help="pattern/notifier list")
    ap.add_argument("--reference", default="multireactor/epoll-et", help="the ×ref column's pair")
    ap.add_argument("--connections", type=int, default=512)
    ap.add_argument("--server-cpus", default=None, help="CPU list for the server (default: first half)")
    ap.add_argument("--client-cpus", default=None, help="CPU list for the client (default: second half)")
    ap.add_argument("--client-threads", type=int, default=None, help="default: one per client CPU")
    ap.add_argument("--server-bin", default=None, help="demux-server to measure (default: build/bin)")
    ap.add_argument("--work-us", type=float, default=0.0)
    a = ap.parse_args()

    cpus = cpus_available()
    if len(cpus) < 2:
        raise BenchError("needs two CPUs: the server's and the client's")
    half = len(cpus) // 2
    server_cpus = a.server_cpus or cpu_list(cpus[:half])
    client_cpus = a.client_cpus or cpu_list(cpus[half:])
    client_threads = a.client_threads or len(client_cpus.split(","))
    server = a.server_bin or str(binary("demux-server"))
    listed = json.loads(subprocess.run([server, "--list"], capture_output=True, text=True, check=True).stdout)
    ranges = {(p["pattern"], p["notifier"]): (p["min_threads"], p["max_threads"]) for p in listed}
    threads = sorted({int(t) for t in a.threads.split(",")})
    pairs = [tuple(p.split("/", 1)) for p in a.pairs.split(",")]
    ref = tuple(a.reference.split("/", 1))
    if ref not in pairs:
        pairs.insert(0, ref)

    got: dict[tuple[str, str, int], float] = {}
    rows: list[list[object]] = []
    for pair in pairs:
        if pair not in ranges:
            print(f"# {pair[0]}/{pair[1]}: not in {server} --list, skipped", flush=True)
            continue
        lo, hi = ranges[pair]
        first: float | None = None
        for t in threads:
            if not lo <= t <= hi:
                continue
            spec = Server(pair[0], pair[1], t, cpus=server_cpus, work_us=a.work_us, binary=server)
            try:
                r = run_pair(
                    spec,
                    connections=a.connections,
                    warmup=a.warmup,
                    duration=a.duration,
                    client_threads=client_threads,
                    client_cpu=client_cpus,
                )
            except BenchError as exc:
                rows.append([*pair, t, "failed", str(exc)[:50], "", "", ""])
                continue
            tput = r.throughput
            got[(*pair, t)] = tput
            first = first or tput
            ref_tput = got.get((*ref, t))
            t0 = r.server["threads_detail"][0]
            t0_cpu = (t0["cpu_s"]["user"] + t0["cpu_s"]["sys"]) / max(r.server["messages"], 1) * 1e6
            rows.append(
                [
                    *pair,
                    t,
                    tput,
                    tput / first,
                    tput / ref_tput if ref_tput else "",
                    r.server_cpu_per_msg_us,
                    f"{t0['role']} {t0_cpu:.3f}",
                ]
            )
            print(f"# {pair[0]}/{pair[1]} t{t}: {tput:,.0f} msg/s", flush=True)
    print()
    print(
        f"{a.work_us:g} µs work, {a.connections} connections, 1-byte messages; server {server} on CPUs "
        f"{server_cpus}, client ({client_threads} threads) on CPUs {client_cpus}; {len(cpus)} CPUs available"
    )
    print_table(
        [
            "pattern",
            "notifier",
            "threads",
            "msg/s",
            "×first",
            "×ref",
            "server µs CPU/msg",
            "thread 0 µs CPU/msg",
        ],
        rows,
    )


if __name__ == "__main__":
    main_guard(main)

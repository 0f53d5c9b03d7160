"""Benchmark: thread scaling per pattern × notifier (issue 10: uring and proactor on many-core hosts).

For each pair and each server thread count: throughput at 0 µs work (512 connections by default), its
ratio to the pair's lowest thread count (`×first`: a scaling pattern never goes below 1), its ratio to the
reference pair at the same thread count (`×ref`, default multireactor/epoll-et), the server's CPU time per
message and that of its thread 0 (the demultiplexer of hsha/proactor, the completion thread of
uring-shared; its cost per message is what caps a central design). The server runs pinned to
--server-cpus, the client (--client-threads threads) to --client-cpus; by default the available CPUs are
split in halves. Pairs the binary does not list (e.g. uring-shared in an old build) are skipped.

    .venv/bin/python -m bench images_scaling [--threads 1,2,4,8] [--pairs uring/uring,proactor/epoll-et]
        [--server-cpus 0-7 --client-cpus 8-15 --client-threads 8] [--server-bin PATH] [--duration 3]
        [--before OLD-BUILD --rounds 5]

With --before, every point runs on both builds in the same run, alternating (which build goes first
flips every round), --rounds times, and the table gives each build's median messages/s and server CPU per
message, their ratios (after/before: > 1 is faster; before/after CPU: > 1 is cheaper) and the median
1-minute load average while they ran.

On a host with fewer cores than threads the server is oversubscribed: the figures then show the
per-message costs, not scaling (say so when you quote them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from collections.abc import Sequence

from bench.common.cli import BenchError, entry, int_list, nonnegative_float, positive_int, print_table
from bench.common.pairs import Server, binary, cpu_list, cpus_available, cpus_of, load_parser, run_pair

DEFAULT_PAIRS = "multireactor/epoll-et,uring/uring,uring-shared/uring,proactor/epoll-et,hsha/epoll-et"


def cpus_text(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)


def pair_list(text: str) -> list[tuple[str, str]]:
    """A comma list of pattern/notifier pairs."""
    pairs = [tuple(p.split("/", 1)) for p in text.split(",")]
    if not all(len(p) == 2 and all(p) for p in pairs):
        raise argparse.ArgumentTypeError(f"a comma list of pattern/notifier, got {text!r}")
    return pairs  # type: ignore[return-value]


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=3.0)
    ap.add_argument(
        "--threads", type=int_list, default=[1, 2, 4, 8], help="server thread counts, e.g. 1,2,4,8"
    )
    ap.add_argument("--pairs", type=pair_list, default=pair_list(DEFAULT_PAIRS), help="pattern/notifier list")
    ap.add_argument(
        "--reference",
        type=pair_list,
        default=pair_list("multireactor/epoll-et"),
        help="the ×ref column's pair",
    )
    ap.add_argument("--connections", type=positive_int, default=512)
    ap.add_argument(
        "--server-cpus", type=cpu_list, default=None, help="CPU list for the server (default: first half)"
    )
    ap.add_argument(
        "--client-cpus", type=cpu_list, default=None, help="CPU list for the client (default: second half)"
    )
    ap.add_argument("--client-threads", type=positive_int, default=None, help="default: one per client CPU")
    ap.add_argument("--server-bin", default=None, help="demux-server to measure (default: build/bin)")
    ap.add_argument("--work-us", type=nonnegative_float, default=0.0)
    ap.add_argument("--before", default=None, help="an older demux-server build: compare it in the same run")
    ap.add_argument(
        "--rounds", type=positive_int, default=5, help="with --before: alternating rounds per point"
    )
    a = ap.parse_args(argv)
    if len(a.reference) != 1:
        ap.error(f"--reference: one pattern/notifier, got {len(a.reference)}")

    cpus = cpus_available()
    if len(cpus) < 2:
        raise BenchError("needs two CPUs: the server's and the client's")
    half = len(cpus) // 2
    server_cpus = a.server_cpus or cpus_text(cpus[:half])
    client_cpus = a.client_cpus or cpus_text(cpus[half:])
    client_threads = a.client_threads or len(cpus_of(client_cpus))
    server = a.server_bin or str(binary("demux-server"))
    listed = json.loads(subprocess.run([server, "--list"], capture_output=True, text=True, check=True).stdout)
    ranges = {(p["pattern"], p["notifier"]): (p["min_threads"], p["max_threads"]) for p in listed}
    threads = sorted(set(a.threads))
    pairs: list[tuple[str, ...]] = list(a.pairs)
    ref = a.reference[0]
    if ref not in pairs:
        pairs.insert(0, ref)

    if a.before is not None:
        compare(a, server, pairs, threads, ranges, server_cpus, client_cpus, client_threads)
        return

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


def compare(
    a: argparse.Namespace,
    after: str,
    pairs: list[tuple[str, ...]],
    threads: list[int],
    ranges: dict[tuple[str, str], tuple[int, int]],
    server_cpus: str,
    client_cpus: str,
    client_threads: int,
) -> None:
    """Each point on the --before build and on this one, alternating, --rounds times."""
    builds = {"before": a.before, "after": after}
    tput: dict[tuple[str, ...], list[float]] = {}
    cost: dict[tuple[str, ...], list[float]] = {}
    load: dict[tuple[str, ...], list[float]] = {}
    points = [(p, t) for p in pairs if p in ranges for t in threads if ranges[p][0] <= t <= ranges[p][1]]
    for rnd in range(a.rounds):
        for pair, t in points:
            order = ["before", "after"] if rnd % 2 == 0 else ["after", "before"]
            for build in order:
                spec = Server(pair[0], pair[1], t, cpus=server_cpus, work_us=a.work_us, binary=builds[build])
                key = (*pair, str(t), build)
                load.setdefault(key[:3], []).append(os.getloadavg()[0])
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
                    print(f"# round {rnd} {pair[0]}/{pair[1]} t{t} {build}: failed: {exc}", flush=True)
                    continue
                tput.setdefault(key, []).append(r.throughput)
                cost.setdefault(key, []).append(r.server_cpu_per_msg_us)
                print(
                    f"# round {rnd} {pair[0]}/{pair[1]} t{t} {build}: {r.throughput:,.0f} msg/s, "
                    f"{r.server_cpu_per_msg_us:.2f} µs CPU/msg",
                    flush=True,
                )
    rows: list[list[object]] = []
    for pair, t in points:
        k = (*pair, str(t))
        if (*k, "before") not in tput or (*k, "after") not in tput:
            rows.append([*pair, t, "failed", "", "", "", "", ""])
            continue
        tb, ta = statistics.median(tput[(*k, "before")]), statistics.median(tput[(*k, "after")])
        cb, ca = statistics.median(cost[(*k, "before")]), statistics.median(cost[(*k, "after")])
        rows.append(
            [
                *pair,
                t,
                tb,
                ta,
                f"{ta / tb:.2f}",
                cb,
                ca,
                f"{cb / ca:.2f}",
                f"{statistics.median(load[k]):.1f}",
            ]
        )
    print()
    print(
        f"{a.work_us:g} µs work, {a.connections} connections, 1-byte messages; median of {a.rounds} "
        f"alternating rounds; before {a.before}, after {after}; server CPUs {server_cpus}, "
        f"client ({client_threads} threads) CPUs {client_cpus}"
    )
    print_table(
        ["pattern", "notifier", "threads", "before msg/s", "after msg/s", "after/before", "before µs CPU/msg",
         "after µs CPU/msg", "before/after CPU", "load"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    entry(main)

"""Peer benchmark (issue 24): demuxlab's servers against what practitioners would write themselves.

Builds the plainest idiomatic libuv echo server (bench/peers/libuv_echo.c on Debian's libuv1-dev, linked
statically) and tokio echo server (bench/peers/tokio_echo, tokio 1.x from crates.io, Cargo.lock pinned)
into build/peer/, and runs them against demuxlab's servers in one run: every server at every connection
count once per round, the order rotated each round, --rounds rounds, so load drifts on a shared machine
hit every server alike. Each run goes through demuxlab's native launcher (bench/common/pairs.py): the server
pinned to --server-cpus, demux-client (1-byte closed-loop echo) to --client-cpus.

Per server and connection count it prints the medians over the rounds of: messages/s (the client's
measure phase) and its ratio to tokio's; the server's CPU time per message (user + sys of the whole
process from its exit line -- getrusage, the counters /proc/PID/stat shows -- over all messages it
echoed, warm-up included) and tokio's divided by it (> 1: cheaper than tokio); system calls per message,
counted in a separate shorter run under `strace -c -f` (counting slows the server, so those runs give
no timings); and the 1-minute load average when the figure was taken.

    .venv/bin/python -m bench peer_servers [--connections 128 512] [--rounds 5] [--duration 3]
        [--servers tokio,libuv,reactor/epoll-et,uring/uring] [--no-syscalls] [--wide]

--wide is the many-core form (a host with >= 16 CPUs): servers on CPUs 0-7, the client on 8-15 with 8
threads; tokio runs its multi-thread runtime with 8 workers and every demuxlab pattern 8 threads (libuv
has one thread). The default is the one-thread form: server on the first CPU, client on the second.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import REPO
from bench.common.cli import BenchError, OptionError, entry, positive_float, positive_int, print_table
from bench.common.pairs import (
    Server,
    cpu_list,
    cpus_available,
    cpus_of,
    list_pairs,
    load_parser,
    run_pair,
    traced,
)

PEER_SRC = Path(__file__).resolve().parent  # libuv_echo.c, tokio_echo/
PEER_BIN = REPO / "build" / "peer"
LIBUV_STATIC = Path("/usr/lib/x86_64-linux-gnu/libuv_a.a")
CFLAGS = ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror"]

# The one-thread form: every epoll pattern (hsha and proactor at their minimum, 2 threads on the one CPU)
# and both io_uring designs.
ONE_THREAD = [
    "tokio", "libuv",
    "reactor/epoll-lt", "reactor/epoll-et", "lf/epoll-lt", "lf/epoll-et",
    "multireactor/epoll-lt", "multireactor/epoll-et", "hsha/epoll-lt", "hsha/epoll-et",
    "proactor/epoll-lt", "proactor/epoll-et", "uring/uring", "uring-shared/uring",
]  # fmt: skip
WIDE = [
    "tokio", "libuv", "multireactor/epoll-et", "uring/uring", "lf/epoll-et", "hsha/epoll-et",
    "proactor/epoll-et", "uring-shared/uring",
]  # fmt: skip


def build_libuv() -> Path:
    src = PEER_SRC / "libuv_echo.c"
    out = PEER_BIN / "libuv-echo"
    if out.exists() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    if not LIBUV_STATIC.exists():
        raise BenchError(f"{LIBUV_STATIC} is missing: install libuv1-dev (make setup)")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BenchError("no C compiler (cc/gcc) on PATH")
    PEER_BIN.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    res = subprocess.run(
        [cc, *CFLAGS, "-o", str(tmp), str(src), str(LIBUV_STATIC), "-pthread", "-ldl"],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise BenchError(f"building {out} failed: {res.stderr.strip()[-500:]}")
    tmp.replace(out)
    return out


def build_tokio() -> Path:
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not os.access(cargo, os.X_OK):
        raise BenchError("cargo is not installed (https://rustup.rs); it builds the tokio peer")
    target = PEER_BIN / "cargo"
    res = subprocess.run(
        [cargo, "build", "--release", "--locked", "--quiet", "--target-dir", str(target)],
        cwd=PEER_SRC / "tokio_echo",
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise BenchError(f"building the tokio peer failed: {res.stderr.strip()[-500:]}")
    return target / "release" / "tokio-echo"


@dataclass(frozen=True)
class Entry:
    name: str  # "tokio", "libuv", or "pattern/notifier"
    server: Server


def entries(names: list[str], server_cpus: str, threads: int) -> list[Entry]:
    listed = {(p["pattern"], p["notifier"]): p for p in list_pairs()}
    out: list[Entry] = []
    for name in names:
        if name == "tokio":
            argv = (str(build_tokio()), "--port", "0", "--threads", str(0 if threads == 1 else threads))
            out.append(Entry(name, Server(cpus=server_cpus, argv=argv)))
        elif name == "libuv":
            out.append(Entry(name, Server(cpus=server_cpus, argv=(str(build_libuv()), "--port", "0"))))
        else:
            pattern, _, notifier = name.partition("/")
            pair = listed.get((pattern, notifier))
            if pair is None:
                raise OptionError(f"--servers: {name!r} is not tokio, libuv or a pair of demux-server --list")
            t = min(max(threads, pair["min_threads"]), pair["max_threads"])
            out.append(Entry(f"{name} t{t}", Server(pattern, notifier, t, cpus=server_cpus)))
    return out


def syscalls_per_message(
    entry: Entry, conns: int, warmup: float, duration: float, client: dict[str, Any]
) -> float:
    """System calls of every server thread per message echoed, from a run under `strace -c -f`."""
    with tempfile.TemporaryDirectory(prefix="demux-peer-") as tmp:
        log = Path(tmp) / "strace.txt"

        def under_strace(argv: list[str], log: Path = log) -> tuple[str, ...]:
            return traced(argv, log, "-c")

        spec = dataclasses.replace(entry.server, wrapper=under_strace)
        r = run_pair(
            spec, connections=conns, warmup=warmup, duration=duration, stall_timeout_s=60.0, **client
        )
        total = None
        for line in log.read_text().splitlines():
            m = re.match(r"^\s*100\.00\s+\S+\s+\S+\s+(\d+)\s+(?:\d+\s+)?total\s*$", line)
            if m:
                total = int(m.group(1))
        if total is None:
            raise BenchError(f"no strace summary for {entry.name}")
        return total / max(int(r.server["messages"]), 1)


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=3.0)
    ap.add_argument("--connections", type=positive_int, nargs="+", default=[128, 512])
    ap.add_argument("--rounds", type=positive_int, default=5)
    ap.add_argument("--servers", default=None, help="comma list (default: every one-thread server)")
    ap.add_argument("--server-cpus", type=cpu_list, default=None)
    ap.add_argument("--client-cpus", type=cpu_list, default=None)
    ap.add_argument("--wide", action="store_true", help="the many-core form (>= 16 CPUs)")
    ap.add_argument("--no-syscalls", action="store_true", help="skip the strace runs")
    ap.add_argument("--strace-duration", type=positive_float, default=1.5)
    a = ap.parse_args(argv)

    cpus = cpus_available()
    if a.wide:
        if len(cpus) < 16 and not (a.server_cpus and a.client_cpus):
            raise BenchError(f"--wide needs 16 CPUs (this host has {len(cpus)}); or give both CPU lists")
        server_cpus = a.server_cpus or ",".join(map(str, cpus[:8]))
        client_cpus = a.client_cpus or ",".join(map(str, cpus[8:16]))
        threads, names = 8, WIDE
    else:
        if len(cpus) < 2:
            raise BenchError("needs two CPUs: the server's and the client's")
        server_cpus, client_cpus = a.server_cpus or str(cpus[0]), a.client_cpus or str(cpus[1])
        threads, names = 1, ONE_THREAD
    if a.servers is not None:
        names = [n.strip() for n in a.servers.split(",") if n.strip()]
        if not names:
            ap.error(f"--servers: a comma list of servers, got {a.servers!r}")
    if "tokio" not in names:
        names.insert(0, "tokio")
    client_threads = len(cpus_of(client_cpus)) if a.wide else 1
    client: dict[str, Any] = {"client_threads": client_threads, "client_cpu": client_cpus}
    servers = entries(names, server_cpus, threads)
    host = os.uname()
    print(
        f"# host {host.nodename}, kernel {host.release}, {len(cpus)} CPUs; server CPUs {server_cpus}, client "
        f"CPUs {client_cpus} ({client_threads} client threads); {a.rounds} rounds of {a.duration:g} s "
        f"(+{a.warmup:g} s warm-up)",
        flush=True,
    )

    tput: dict[tuple[str, int], list[float]] = {}
    cost: dict[tuple[str, int], list[float]] = {}
    load: dict[tuple[str, int], list[float]] = {}
    notes: dict[str, str] = {}
    for rnd in range(a.rounds):
        shift = rnd % len(servers)
        order = servers[shift:] + servers[:shift]
        for conns in a.connections:
            for e in order:
                key = (e.name, conns)
                load.setdefault(key, []).append(os.getloadavg()[0])
                try:
                    r = run_pair(e.server, connections=conns, warmup=a.warmup, duration=a.duration, **client)
                except BenchError as exc:
                    notes[e.name] = str(exc)[:80]
                    print(f"# round {rnd} {e.name} c{conns}: failed: {exc}", flush=True)
                    continue
                tput.setdefault(key, []).append(r.throughput)
                cost.setdefault(key, []).append(r.server_cpu_per_msg_us)
                if "uring" in r.server:
                    notes[e.name] = "io_uring: " + ", ".join(r.server["uring"].get("features", []))
                print(
                    f"# round {rnd} {e.name} c{conns}: {r.throughput:,.0f} msg/s, "
                    f"{r.server_cpu_per_msg_us:.2f} µs CPU/msg, load {load[key][-1]:.2f}",
                    flush=True,
                )

    calls: dict[tuple[str, int], float] = {}
    if not a.no_syscalls:
        if shutil.which("strace") is None:
            raise BenchError("strace is not installed (make setup), or pass --no-syscalls")
        for conns in a.connections:
            for e in servers:
                try:
                    calls[(e.name, conns)] = syscalls_per_message(e, conns, 0.5, a.strace_duration, client)
                except BenchError as exc:
                    print(f"# strace {e.name} c{conns}: failed: {exc}", flush=True)

    print()
    print(
        f"median of {a.rounds} alternating rounds, 1-byte closed-loop echo, 0 µs work; server CPUs "
        f"{server_cpus}, client CPUs {client_cpus}; ×tokio: messages/s ÷ tokio's; tokio/x CPU: tokio's "
        "server CPU per message ÷ this server's; syscalls/msg from a separate strace -c -f run; "
        "load: 1-min load average"
    )
    rows: list[list[object]] = []
    for conns in a.connections:
        base_t = statistics.median(tput.get(("tokio", conns), [0.0])) or None
        base_c = statistics.median(cost.get(("tokio", conns), [0.0])) or None
        for e in servers:
            key = (e.name, conns)
            if key not in tput:
                rows.append([e.name, conns, "failed", "", "", "", "", ""])
                continue
            t, c = statistics.median(tput[key]), statistics.median(cost[key])
            rows.append(
                [
                    e.name,
                    conns,
                    t,
                    f"{t / base_t:.2f}" if base_t else "",
                    c,
                    f"{base_c / c:.2f}" if base_c else "",
                    f"{calls[key]:.2f}" if key in calls else "",
                    f"{statistics.median(load[key]):.2f}",
                ]
            )
    print_table(
        ["server", "conns", "msg/s", "×tokio", "server µs CPU/msg", "tokio/x CPU", "syscalls/msg", "load"],
        rows,
    )
    for name, note in notes.items():
        print(f"{name}: {note}")


if __name__ == "__main__":
    entry(main)

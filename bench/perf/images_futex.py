"""Benchmark: futex calls per message, per server thread (issue 10: the proactor's hand-off wake-ups).

Runs demux-server under `strace -f -e trace=futex` (pinned to --server-cpu) against demux-client (pinned
to --client-cpu), 0 µs work, and prints per thread (in creation order; main, which only waits for the
signal, is left out) the futex calls and FUTEX_WAKE calls per message. strace slows the server a lot:
read the counts per message, not the throughput.

    .venv/bin/python -m bench images_futex [--pattern proactor --notifier epoll-et] [--threads 2,4,6,8]
        [--server-bin PATH] [--duration 1.5]
"""

from __future__ import annotations

import collections
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common.cli import BenchError, entry, int_list, positive_int, print_table
from bench.common.pairs import Server, binary, cpu_list, load_parser, run_pair, traced
from demuxlab.vocab import NOTIFIERS, PATTERNS


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=1.5)
    ap.add_argument("--pattern", choices=PATTERNS, default="proactor")
    ap.add_argument("--notifier", choices=NOTIFIERS, default="epoll-et")
    ap.add_argument("--threads", type=int_list, default=[2, 4, 6, 8], help="comma list")
    ap.add_argument("--connections", type=positive_int, default=512)
    ap.add_argument("--server-bin", default=None)
    ap.add_argument("--server-cpu", type=cpu_list, default="0")
    ap.add_argument("--client-cpu", type=cpu_list, default="1")
    a = ap.parse_args(argv)
    if shutil.which("strace") is None:
        raise BenchError("strace is not installed")
    server = a.server_bin or str(binary("demux-server"))
    rows: list[list[object]] = []
    for t in a.threads:
        with tempfile.TemporaryDirectory(prefix="demux-futex-") as tmp:
            log = Path(tmp) / "strace.txt"

            def under_strace(argv: list[str], log: Path = log) -> tuple[str, ...]:
                return traced(argv, log, "-e", "trace=futex")

            spec = Server(
                a.pattern,
                a.notifier,
                t,
                cpus=a.server_cpu,
                binary=server,
                wrapper=under_strace,
            )
            r = run_pair(
                spec,
                connections=a.connections,
                warmup=a.warmup,
                duration=a.duration,
                client_cpu=a.client_cpu,
                stall_timeout_s=60.0,
            )
            calls: collections.Counter[int] = collections.Counter()
            wakes: collections.Counter[int] = collections.Counter()
            seen: set[int] = set()  # every thread shows up, at least in its "+++ exited" line
            for line in log.read_text().splitlines():
                pid_s, _, rest = line.partition(" ")
                if not pid_s.isdigit():
                    continue
                seen.add(int(pid_s))
                if "futex(" not in rest:
                    continue
                calls[int(pid_s)] += 1
                wakes[int(pid_s)] += "FUTEX_WAKE" in rest
        msgs = max(r.server["messages"], 1)
        roles = [d["role"] for d in r.server["threads_detail"]]
        # Thread ids rise in creation order: main first, then the pattern's threads as threads_detail.
        pids = sorted(seen)[1:]
        per = [
            f"{role} {calls[p] / msgs:.2f}/{wakes[p] / msgs:.2f}"
            for role, p in zip(roles, pids, strict=False)
        ]
        shown = ", ".join(per[:3] + (["…"] if len(per) > 3 else []))
        rows.append([t, r.server["messages"], sum(calls.values()) / msgs, shown])
        print(f"# t{t}: {sum(calls.values()) / msgs:.3f} futex calls per message", flush=True)
    print()
    print(f"{a.pattern}/{a.notifier}, 0 µs work, {a.connections} connections, server {server} under strace")
    print_table(["threads", "messages", "futex/msg", "per thread: calls/wakes per msg"], rows)


if __name__ == "__main__":
    entry(main)

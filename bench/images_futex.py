"""Benchmark: futex calls per message, per server thread (issue 10: the proactor's hand-off wake-ups).

Runs demux-server under `strace -f -e trace=futex` (pinned to --server-cpu) against demux-client (pinned
to --client-cpu), 0 µs work, and prints per thread (in creation order; main, which only waits for the
signal, is left out) the futex calls and FUTEX_WAKE calls per message. strace slows the server a lot:
read the counts per message, not the throughput.

    .venv/bin/python bench/images_futex.py [--pattern proactor --notifier epoll-et] [--threads 2,4,6,8]
        [--server-bin PATH] [--duration 1.5]
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from images_lib import BenchError, Result, binary, load_parser, main_guard, print_table


def run_traced(cmd: list[str], connections: int, warmup: float, duration: float, client_cpu: str) -> Result:
    """Like images_lib.run_pair, but the SIGTERM goes to the traced server, not to strace (which would
    detach and leave the server running)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise BenchError(f"server exited: {proc.communicate(timeout=10)[1].strip()[-300:]}")
        port = int(json.loads(line)["port"])
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if len(children) != 1:
            raise BenchError(f"cannot find the traced server under strace (children: {children})")
        client = [
            str(binary("demux-client")), "--host", "127.0.0.1", "--port", str(port),
            "--connections", str(connections), "--threads", "1", "--msg-size", "1",
            "--warmup", str(warmup), "--duration", str(duration), "--cpus", client_cpu,
        ]  # fmt: skip
        cli = subprocess.run(client, capture_output=True, text=True, timeout=warmup + duration + 60)
        os.kill(int(children[0]), signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        if cli.returncode != 0:
            raise BenchError(f"client failed: {cli.stderr.strip()}")
        return Result(server=json.loads(out.strip().splitlines()[-1]), client=json.loads(cli.stdout))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def main() -> None:
    ap = load_parser(__doc__, duration=1.5)
    ap.add_argument("--pattern", default="proactor")
    ap.add_argument("--notifier", default="epoll-et")
    ap.add_argument("--threads", default="2,4,6,8")
    ap.add_argument("--connections", type=int, default=512)
    ap.add_argument("--server-bin", default=None)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    a = ap.parse_args()
    strace = shutil.which("strace")
    if strace is None:
        raise BenchError("strace is not installed")
    server = a.server_bin or str(binary("demux-server"))
    rows: list[list[object]] = []
    for t in (int(x) for x in a.threads.split(",")):
        with tempfile.TemporaryDirectory(prefix="demux-futex-") as tmp:
            log = Path(tmp) / "strace.txt"
            cmd = [
                strace, "-f", "-e", "trace=futex", "-o", str(log), server, "--pattern", a.pattern,
                "--notifier", a.notifier, "--threads", str(t), "--port", "0", "--cpus", a.server_cpu,
            ]  # fmt: skip
            r = run_traced(cmd, a.connections, a.warmup, a.duration, a.client_cpu)
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
    main_guard(main)

"""Shared helpers of the bench/images_*.py benchmarks: build the helper programs, run a pinned
demux-server (or min-echo) against a pinned demux-client, and print tables.

Not a benchmark itself; `python bench/images_lib.py` only says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("DEMUXLAB_BIN_DIR", REPO / "build" / "bin"))
BENCH_BIN = REPO / "build" / "bench"
CFLAGS = ["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"]


class BenchError(RuntimeError):
    """A benchmark could not run (missing binary, server failed); printed in one line."""


def binary(name: str) -> Path:
    path = BIN / name
    if not os.access(path, os.X_OK):
        raise BenchError(f"{path} is missing: run `make build`")
    return path


def build_helper(name: str) -> Path:
    """Compiles images/bench/<name>.c (with images/common) into build/bench/<name> when out of date."""
    src = REPO / "images" / "bench" / f"{name}.c"
    common = sorted((REPO / "images" / "common").glob("*.c"))
    out = BENCH_BIN / name.replace("_", "-")
    inputs = [src, *common, *(REPO / "images" / "common").glob("*.h")]
    if out.exists() and all(p.stat().st_mtime <= out.stat().st_mtime for p in inputs):
        return out
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BenchError("no C compiler (cc/gcc) on PATH")
    BENCH_BIN.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    cmd = [cc, *CFLAGS, f"-I{REPO / 'images' / 'common'}", "-static", "-o", str(tmp), str(src)]
    res = subprocess.run([*cmd, *map(str, common), "-pthread", "-luring"], capture_output=True, text=True)
    if res.returncode != 0:
        raise BenchError(f"building {out} failed: {res.stderr.strip()}")
    tmp.replace(out)
    return out


@dataclass
class Result:
    server: dict[str, Any]
    client: dict[str, Any]

    @property
    def throughput(self) -> float:
        return float(self.client["throughput_msgs_per_s"])

    @property
    def server_cpu_per_msg_us(self) -> float:
        cpu = self.server["cpu_s"]["user"] + self.server["cpu_s"]["sys"]
        return float(cpu / max(self.server["messages"], 1) * 1e6)

    @property
    def client_cpu_per_msg_us(self) -> float:
        cpu = self.client["cpu_s"]["user"] + self.client["cpu_s"]["sys"]
        return float(cpu / max(self.client["messages"], 1) * 1e6)


def run_pair(
    server_cmd: Sequence[str],
    *,
    connections: int,
    warmup: float,
    duration: float,
    client_threads: int = 1,
    msg_size: int = 1,
    client_cpu: int | str = 1,
) -> Result:
    """Starts the server (pinned through its own --cpus/--cpu flag in server_cmd), runs the client pinned
    to client_cpu (one CPU, or a --cpus list such as "8-15"), stops the server with SIGTERM and returns
    both JSON reports."""
    proc = subprocess.Popen(list(server_cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise BenchError(f"{server_cmd[0]} exited: {proc.communicate(timeout=10)[1].strip()}")
        port = int(json.loads(line)["port"])
        client_cmd = [
            str(binary("demux-client")), "--host", "127.0.0.1", "--port", str(port),
            "--connections", str(connections), "--threads", str(client_threads),
            "--msg-size", str(msg_size), "--warmup", str(warmup), "--duration", str(duration),
            "--cpus", str(client_cpu),
        ]  # fmt: skip
        cli = subprocess.run(client_cmd, capture_output=True, text=True, timeout=warmup + duration + 60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        if cli.returncode != 0:
            raise BenchError(f"client failed against {' '.join(server_cmd[:5])}: {cli.stderr.strip()}")
        if proc.returncode != 0:
            raise BenchError(f"server {' '.join(server_cmd[:5])} exited {proc.returncode}: {err.strip()}")
        return Result(server=json.loads(out.strip().splitlines()[-1]), client=json.loads(cli.stdout))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def server_cmd(
    pattern: str,
    notifier: str,
    threads: int,
    *,
    cpu: int | str = 0,
    instrument: bool = False,
    work_us: float = 0.0,
) -> list[str]:
    """The server's command line; ``cpu`` is one CPU or a --cpus list ("0-7")."""
    cmd = [
        str(binary("demux-server")), "--pattern", pattern, "--notifier", notifier, "--threads", str(threads),
        "--port", "0", "--cpus", str(cpu), "--max-conns", "20000",
    ]  # fmt: skip
    if work_us:
        cmd += ["--work-us", f"{work_us:.6f}".rstrip("0").rstrip(".")]
    return [*cmd, "--instrument"] if instrument else cmd


def list_pairs() -> list[dict[str, Any]]:
    out = subprocess.run([str(binary("demux-server")), "--list"], capture_output=True, text=True, check=True)
    pairs: list[dict[str, Any]] = json.loads(out.stdout)
    return pairs


def cpus_available() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def load_parser(doc: str | None, duration: float) -> argparse.ArgumentParser:
    """The options every load benchmark shares: measured seconds and warm-up per run."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=duration, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0)
    return ap


def two_cpus() -> list[int]:
    """The CPUs this process may use; server and client need one each."""
    cpus = cpus_available()
    if len(cpus) < 2:
        raise BenchError("needs two CPUs: one for the server, one for the client")
    return cpus


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers], *[[_fmt(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def main_guard(fn: Any) -> None:
    try:
        fn()
    except BenchError as exc:
        print(f"{Path(sys.argv[0]).name}: error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    print("images_lib.py: helpers for bench/images_*.py; nothing to run")

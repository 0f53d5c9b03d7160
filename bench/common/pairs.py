"""What the load benchmarks share (bench/perf/images_*.py, the fidelity studies, the peers): build the
helper programs (images/Makefile), run a pinned demux-server (or min-echo, a peer server, a server under
strace) against a pinned demux-client through demuxlab's native launcher (src/demuxlab/launch/), sample
the CPUs' times and the CPUs' round trip; for the benches that drive the processes themselves (issue 48's
bench/perf/work_cpu.py, slow_reader.py, uring_fairness.py, uring_slow_reader.py, client_lateness.py), start
a server from its command line, take demux-client's report and a process's peak memory; the options' types
for patterns, pairs and CPU lists.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import REPO
from bench.common.cli import BenchError, Parser, nonnegative_float, parser, positive_float
from demuxlab.errors import DemuxlabError
from demuxlab.launch import RunRequest
from demuxlab.launch.base import sha256_file
from demuxlab.launch.native import NativeLauncher, binary_path
from demuxlab.paths import bin_dir
from demuxlab.phases import Phases
from demuxlab.plan import Pinning
from demuxlab.point import Point
from demuxlab.topology import parse_cpu_list
from demuxlab.vocab import NOTIFIERS, PATTERNS

BENCH_BIN = REPO / "build" / "bench"

# Strace's way to be stopped: it ignores the SIGTERM a launcher sends, so the wrapper forwards it to the
# traced server (strace's child) and then waits for strace, which exits with the server's status.
_TRACED = (
    'log=$1; shift; strace -f -o "$log" "$@" & st=$!; '
    "trap 'kill -TERM $(cat /proc/$st/task/$st/children) 2>/dev/null' TERM INT; "
    'wait "$st"; wait "$st"'
)


def binary(name: str) -> Path:
    """A binary of build/bin (where the launcher takes demux-server and demux-client from)."""
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        raise BenchError(f"{path} is missing: run `make build`")
    return path


def start_server(argv: Sequence[str]) -> tuple[subprocess.Popen[str], int]:
    """A server started straight from its command line (a demux-server's with ``--port 0``, perhaps behind
    ``taskset``), its stdout and stderr piped, for benches that drive the processes themselves (a slow
    reader, a stopped server, wakers beside it); returns it and the port of its listening line, or raises
    BenchError with its stderr."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise BenchError(f"{' '.join(argv)}: did not start: {proc.communicate()[1].strip()}")
    return proc, int(json.loads(line)["port"])


def client_report(
    port: int, options: Sequence[str], timeout: float, client: Path | None = None
) -> dict[str, Any]:
    """demux-client (build/bin's, or ``client``) against 127.0.0.1:``port`` with ``options`` (connections,
    phases, ``--cpus``...), for the same benches: its JSON report (stdout), or BenchError with its stderr."""
    prog = client or binary("demux-client")
    res = subprocess.run(
        [str(prog), "--host", "127.0.0.1", "--port", str(port), *options],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if res.returncode != 0:
        raise BenchError(f"{prog} failed: {res.stderr.strip()}")
    report: dict[str, Any] = json.loads(res.stdout)
    return report


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident set (VmHWM of /proc/PID/status) in MiB: no sampling can miss a peak."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def build_helper(name: str, where: Path = BENCH_BIN) -> Path:
    """images/bench/<name>.c, built by images/Makefile into build/bench/ (``where``: wake-cost's is
    build/bin/) when out of date."""
    out = where / name.replace("_", "-")
    res = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO / "images"), f"../{out.relative_to(REPO)}"],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise BenchError(f"building {out} failed: {(res.stderr or res.stdout).strip()[-500:]}")
    return out


class RoundTrip:
    """The round trip of a cache line between the server's and the client's first CPU (cpu-pingpong,
    images/bench/cpu_pingpong.c): on a VM it shows where the hypervisor placed the two virtual CPUs, which
    moves an echo pair's CPU per message by a third on the 2-core host (docs/ctmc-reference.md)."""

    def __init__(self, prog: Path, cpus: tuple[int, int]) -> None:
        self.prog, self.cpus = prog, cpus

    def measure(self, rounds: int = 50_000) -> float:
        res = subprocess.run(
            [str(self.prog), "--cpus", f"{self.cpus[0]},{self.cpus[1]}", "--rounds", str(rounds)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if res.returncode != 0:
            raise BenchError(f"{self.prog.name}: {res.stderr.strip() or f'exit {res.returncode}'}")
        return float(json.loads(res.stdout)["round_trip_ns"])

    def wait_below(self, limit_ns: float, patience_s: float) -> None:
        """Wait (at most ``patience_s``) until the round trip is at most ``limit_ns``."""
        deadline = time.monotonic() + patience_s
        while self.measure(10_000) > limit_ns and time.monotonic() < deadline:
            time.sleep(1.0)


class CpuTimes:
    """The CPUs' times from /proc/stat (user … steal, in clock ticks), per CPU and all together
    (:data:`ALL`), to split the time between two samples into busy (not idle or iowait) and softirq: the
    validation bench's share of the host's CPUs other processes used, cpu_placement's busy share of the
    server's and the client's CPU (on the 2-core host ~99 % each in an echo run, a third of it softirq: the
    loopback's receive path runs in the sender's softirq; docs/ctmc-reference.md "What the client's CPU per
    message follows")."""

    ALL = -1  # the first line of /proc/stat: every CPU together

    def __init__(self) -> None:
        self.ticks: dict[int, list[int]] = {}
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name == "cpu" or (name.startswith("cpu") and name[3:].isdigit()):
                    self.ticks[int(name[3:]) if name[3:] else self.ALL] = [int(v) for v in fields[:8]]

    def _delta(self, later: CpuTimes, cpu: int) -> list[int]:
        return [b - a for a, b in zip(self.ticks[cpu], later.ticks[cpu], strict=True)]

    def split(self, later: CpuTimes, cpu: int = ALL) -> tuple[float, float]:
        """(busy, softirq) shares of ``cpu``'s time (all CPUs': :data:`ALL`) between this sample and
        ``later``."""
        d = self._delta(later, cpu)
        total = max(sum(d), 1)
        return 1.0 - (d[3] + d[4]) / total, d[6] / total

    def busy_s(self, later: CpuTimes) -> float:
        """The CPU seconds all CPUs were busy between this sample and ``later``."""
        d = self._delta(later, self.ALL)
        return (sum(d) - d[3] - d[4]) / os.sysconf("SC_CLK_TCK")


def traced(argv: Sequence[str], log: Path, *strace_args: str) -> tuple[str, ...]:
    """``argv`` run under ``strace -f -o log strace_args...``, stoppable with SIGTERM like the server."""
    return ("sh", "-c", _TRACED, "traced", str(log), *strace_args, "--", *argv)


@dataclass(frozen=True)
class Server:
    """The server side of a pair: a demux-server point (pattern × notifier × threads), or any other echo
    server that prints the same listening and exit lines (``argv``: min-echo, the peers of
    bench/peers/peer_servers.py). ``cpus`` is one CPU or a --cpus list ("0-7")."""

    pattern: str = "reactor"
    notifier: str = "epoll-et"
    threads: int = 1
    cpus: int | str = 0
    instrument: bool = False
    work_us: float = 0.0
    binary: str | None = None  # another demux-server build (--server-bin); default build/bin's
    argv: tuple[str, ...] | None = None  # a whole other server command line instead of demux-server
    wrapper: Callable[[list[str]], Sequence[str]] | None = None  # e.g. lambda a: traced(a, log, "-c")


class BenchLauncher(NativeLauncher):
    """demuxlab's native launcher with the server a benchmark names: another demux-server build, another
    echo server, or demux-server under strace. Everything else (pinning, the client's phases, stopping,
    the record) is the launcher's own."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def _server_argv(self, argv: list[str]) -> list[str]:
        if self.server.argv is not None:
            return list(self.server.argv)
        return [self.server.binary or str(binary_path("server")), *argv[1:]]

    def wrap(self, role: str, argv: list[str], cpus: Sequence[int], run_id: str) -> list[str]:
        if role != "server":
            return super().wrap(role, argv, cpus, run_id)
        real = self._server_argv(argv)
        return list(self.server.wrapper(real)) if self.server.wrapper is not None else real

    def check(self) -> None:
        binary_path("client")
        if self.server.argv is None and self.server.binary is None:
            binary_path("server")

    def artifacts(self) -> dict[str, dict[str, Any]]:
        server = Path(self._server_argv(["demux-server"])[0])
        client = binary_path("client")
        return {
            "server": {"kind": "binary", "path": str(server), "sha256": sha256_file(server)},
            "client": {"kind": "binary", "path": str(client), "sha256": sha256_file(client)},
        }


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


def cpus_of(spec: int | str) -> tuple[int, ...]:
    return tuple(parse_cpu_list(str(spec)))


def cpu_list(text: str) -> str:
    """An option's CPU list ("3", "0-7,16"), checked as the launcher will read it."""
    try:
        cpus = parse_cpu_list(text)
    except ValueError:
        cpus = []
    if not cpus:
        raise argparse.ArgumentTypeError(f"a CPU list such as 0-3,8, got {text!r}")
    return text


def pattern_list(text: str) -> list[str]:
    """An option's comma list of patterns ("uring,uring-shared"), each one demux-server has."""
    names = text.split(",")
    if not all(n in PATTERNS for n in names):
        raise argparse.ArgumentTypeError(f"a comma list of patterns ({', '.join(PATTERNS)}), got {text!r}")
    return names


def pair_thread_list(text: str) -> list[tuple[str, str, int]]:
    """An option's comma list of pattern/notifier/threads ("reactor/epoll-et/1,hsha/poll/2")."""
    out = []
    for item in text.split(","):
        parts = item.split("/")
        if (
            len(parts) != 3
            or parts[0] not in PATTERNS
            or parts[1] not in NOTIFIERS
            or not parts[2].isdigit()
            or int(parts[2]) < 1
        ):
            raise argparse.ArgumentTypeError(
                f"a comma list of pattern/notifier/threads (e.g. reactor/epoll-et/1), got {item!r}"
            )
        out.append((parts[0], parts[1], int(parts[2])))
    return out


def run_pair(
    server: Server,
    *,
    connections: int,
    warmup: float,
    duration: float,
    client_threads: int = 1,
    msg_size: int = 1,
    client_cpu: int | str = 1,
    stall_timeout_s: float = 10.0,
) -> Result:
    """Runs ``server`` against demux-client (``client_threads`` threads pinned to ``client_cpu``: one CPU,
    or a list such as "8-15") through demuxlab's native launcher: warm-up, measure, SIGTERM; returns both
    JSON reports, or raises BenchError with the launcher's one-line failure reason."""
    point = Point(
        pattern=server.pattern,
        notifier=server.notifier,
        threads=server.threads,
        work_us=server.work_us,
        connections=connections,
        msg_size=msg_size,
        client_threads=client_threads,
        rate=None,
        instrument=server.instrument,
    )
    req = RunRequest(
        run_id=f"bench-{uuid.uuid4().hex[:12]}",
        experiment={"name": "bench", "spec_path": None, "spec_sha256": None, "git_rev": None},
        point=point,
        repeat=0,
        phases=Phases(warmup_s=warmup, measure_s=duration, cooldown_s=0.0),
        pinning=Pinning(
            server_cpus=cpus_of(server.cpus),
            client_cpus=cpus_of(client_cpu),
            oversubscribed=False,
            same_host=True,
            notes=(),
        ),
        hosts={},
        instrument=server.instrument,
        stall_timeout_s=stall_timeout_s,
    )
    try:
        record = BenchLauncher(server).run(req)
    except DemuxlabError as exc:
        raise BenchError(str(exc)) from None
    if record["status"] != "ok":
        what = " ".join(server.argv[:1]) if server.argv else f"{server.pattern}/{server.notifier}"
        raise BenchError(f"{what}: {record['failure_reason']}")
    return Result(server=record["server"], client=record["client"])


def list_pairs() -> list[dict[str, Any]]:
    out = subprocess.run([str(binary("demux-server")), "--list"], capture_output=True, text=True, check=True)
    pairs: list[dict[str, Any]] = json.loads(out.stdout)
    return pairs


def cpus_available() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def load_parser(doc: str | None, duration: float) -> Parser:
    """The options every load benchmark shares: measured seconds and warm-up per run."""
    ap = parser(doc)
    ap.add_argument("--duration", type=positive_float, default=duration, help="measured seconds per run")
    ap.add_argument("--warmup", type=nonnegative_float, default=1.0)
    return ap


def two_cpus() -> list[int]:
    """The CPUs this process may use; server and client need one each."""
    cpus = cpus_available()
    if len(cpus) < 2:
        raise BenchError("needs two CPUs: one for the server, one for the client")
    return cpus

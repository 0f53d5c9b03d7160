"""The kernel's counters of a run, read where the client says its measure phase starts and ends.

The record's ``costs`` (docs/CONTRACTS.md §5): per side (server, client), the deltas over the measure phase
of what the kernel counts for the side's process and its CPUs, read at the two phase boundaries the client
prints (``demux-client --phase-events``), never per message:

* the process's CPU time (``/proc/PID/stat``) and, per thread (``/proc/PID/task/TID``): its voluntary and
  involuntary context switches and migrations (``sched``; ``status`` where the kernel has no ``sched``),
  its time on a CPU and waiting for one (``schedstat``), and its system calls: the binary's own count,
  kept per thread where it makes them (images/common/sysc.h: the client prints it in its phase events, the
  server on SIGUSR1, which the collector sends it at each boundary: :meth:`Collector.take_server_lines`
  reads the lines from the server's stdout at its exit); on request (``syscalls=True``) beside it the
  kernel's count, a perf counter on the ``raw_syscalls:sys_enter`` tracepoint opened on each thread at the
  phase's start (:class:`SyscallCounters`), which costs every system call on the host ~+4.5 % of the
  server's CPU per message at W = 0 (``bench/perf/costs_bench.py``), so it is off by default;
* the side's CPUs (the run's pinning): user, nice, system, irq, softirq, steal, idle and iowait time
  (``/proc/stat``), their frequency at both ends (``cpufreq/scaling_cur_freq``), governor, turbo and SMT;
* the side's network namespace (``/proc/PID/net/snmp`` and ``netstat``): TCP retransmits, resets, errors,
  listen overflows and drops;
* energy from RAPL (``/sys/class/powercap/*-rapl:*/energy_uj``) where the host has it;
* the CPU's cycles and instructions, user and kernel mode: a hardware perf counter of each on each of the
  process's threads, opened at the phase's start (:class:`HardwareCounters`), where the host has a PMU
  (this VM has none: the kernel says ENOENT).

Every value the host cannot give is ``"unavailable: <why>"``, never a zero. A side whose process this
launcher cannot see (it runs on another host) is that string as a whole. The readers take a ``Roots``
(``DEMUXLAB_SYS_ROOT`` points sysfs elsewhere: the tests' fake cpufreq and powercap trees); processes and
``/proc/stat`` are always this host's. The readers of one snapshot are :mod:`demuxlab.launch.kernelfiles`;
this module pairs two snapshots into a side's deltas. The launcher makes a :class:`Collector` with
:func:`for_run` before the client starts and feeds it the client's phase events (:meth:`Collector.on_phase`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from demuxlab.launch.kernelfiles import (
    CPU_FIELDS,
    HARDWARE_EVENTS,
    SYSCALLS_KERNEL_SOURCE,
    SYSCALLS_OWN_SOURCE,
    UNAVAILABLE,
    HardwareCounters,
    Roots,
    SyscallCounters,
    read_cpufreq,
    read_netns,
    read_proc_stat,
    read_rapl,
    read_smt,
    read_tcp,
    read_text,
    read_thread,
    read_turbo,
    stat_state,
    stat_times,
    unavailable,
)

__all__ = [
    "UNAVAILABLE",
    "Collector",
    "HardwareCounters",
    "Roots",
    "Side",
    "SyscallCounters",
    "for_run",
    "side_costs",
    "unavailable",
]


# -- one side ------------------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """A side's counters at one boundary."""

    t_ns: int
    process: tuple[int, int, int] | None
    threads: dict[int, dict[str, Any]]
    cpus: dict[int, list[int]]
    tcp: dict[str, int] | str
    netns: str | None
    freq: dict[str, int] | str
    governor: str
    energy: dict[str, dict[str, int]] | str


@dataclass
class Side:
    """What is read for one role: its process (None: ``why``) and its CPUs."""

    role: str
    pid: int | None
    cpus: Sequence[int]
    why: str | None = None
    # Where the pid could not be known yet (a container not started): asked again at the first boundary.
    lookup: Callable[[], tuple[int | None, str | None]] | None = None
    counters: SyscallCounters | None = None
    syscalls: dict[int, int] | None = (
        None  # the kernel's (opt-in tracepoint), read at the measure phase's end
    )
    hardware: HardwareCounters | None = None  # cycles and instructions, opened at the phase's start
    hardware_counts: dict[str, dict[int, int] | str] | None = None  # read at its end
    # The binary's own counts at each boundary: {"t_ns", "threads": {tid: calls}, "total"}; or why not.
    own: list[dict[str, Any]] = field(default_factory=list)
    own_problem: str | None = None
    ask_own: bool = False  # a demux-server: asked for its count with SIGUSR1 at each boundary
    snaps: list[Snapshot] = field(default_factory=list)
    marks: list[int | None] = field(default_factory=list)

    def snapshot(self, roots: Roots) -> Snapshot:
        assert self.pid is not None
        proc_dir = roots.proc / str(self.pid)
        threads: dict[int, dict[str, Any]] = {}
        with contextlib.suppress(OSError):
            for task in (proc_dir / "task").iterdir():
                if task.name.isdigit():
                    row = read_thread(task)
                    if row is not None:
                        threads[int(task.name)] = row
        stat = read_text(proc_dir / "stat")
        all_cpus = read_proc_stat(roots.proc)
        cpus = list(self.cpus) or sorted(all_cpus)
        freq, governor = read_cpufreq(roots, cpus)
        tcp = read_tcp(proc_dir)
        if isinstance(tcp, str) and stat is not None and stat_state(stat) == "Z":
            # A zombie keeps its /proc/PID/stat (so its CPU times read) but not its network namespace.
            tcp = unavailable(
                f"the {self.role} had exited before this reading (pid {self.pid}): its network namespace "
                "went with it"
            )
        return Snapshot(
            t_ns=time.monotonic_ns(),
            process=stat_times(stat) if stat else None,
            threads=threads,
            cpus={c: all_cpus[c] for c in cpus if c in all_cpus},
            tcp=tcp,
            netns=read_netns(roots, self.pid),
            freq=freq,
            governor=governor,
            energy=read_rapl(roots),
        )


def _delta_map(a: Mapping[str, int] | str, b: Mapping[str, int] | str) -> dict[str, int] | str:
    if isinstance(a, str):
        return a
    if isinstance(b, str):
        return b
    return {k: b[k] - a[k] for k in a if k in b}


def _energy(a: dict[str, dict[str, int]] | str, b: dict[str, dict[str, int]] | str) -> dict[str, int] | str:
    if isinstance(a, str):
        return a
    if isinstance(b, str):
        return b
    out: dict[str, int] = {}
    for zone, start in a.items():
        end = b.get(zone)
        if end is None:
            continue
        d = end["uj"] - start["uj"]
        out[zone] = d + end["range_uj"] if d < 0 and end["range_uj"] > 0 else d  # one wrap at most
    return out


def _own_counts(side: Side) -> list[dict[str, Any]] | str:
    """The binary's own counts at the two boundaries, or why not."""
    if side.own_problem is not None:
        return side.own_problem
    if len(side.own) < 2:
        return unavailable(f"the {side.role} did not report its system calls at both phase boundaries")
    return side.own[:2]


def _own_delta(own: list[dict[str, Any]], tid: int, new: bool) -> int | None:
    """A thread's own count over the phase: from 0 for a thread that started within it."""
    end = own[1]["threads"].get(tid)
    start = own[0]["threads"].get(tid, 0 if new else None)
    return end - start if end is not None and start is not None else None


def parse_own(event: Mapping[str, Any], total_key: str) -> dict[str, Any] | None:
    """A binary's report of its system calls (the server's ``syscalls`` event, the client's phase event):
    ``{"t_ns", "threads": {tid: calls}, "total"}``, or None if it carries none (an older binary)."""
    total, t_ns, rows = event.get(total_key), event.get("t_ns"), event.get("threads")
    if not isinstance(total, int) or not isinstance(t_ns, int) or not isinstance(rows, list):
        return None
    threads = {
        r["tid"]: r["syscalls"]
        for r in rows
        if isinstance(r, Mapping) and isinstance(r.get("tid"), int) and isinstance(r.get("syscalls"), int)
    }
    return {"t_ns": t_ns, "threads": threads, "total": total}


def _hardware(side: Side, a: Snapshot, b: Snapshot) -> dict[str, int | str]:
    """A side's ``cycles`` and ``instructions``: each the sum over the threads alive at the phase's start
    (one that ended within it counted until then), or why not: the kernel's refusal, or the threads that
    started within the phase (no counter was opened on them)."""
    counters = side.hardware
    if counters is None:
        return dict.fromkeys(HARDWARE_EVENTS, unavailable("no hardware counters were opened on this side"))
    if counters.problem is not None:
        return dict.fromkeys(HARDWARE_EVENTS, counters.problem)
    counts = side.hardware_counts
    if counts is None:
        return dict.fromkeys(HARDWARE_EVENTS, unavailable("the hardware counters were not read at the end"))
    new = sorted(tid for tid in b.threads if tid not in a.threads)
    out: dict[str, int | str] = {}
    for name in HARDWARE_EVENTS:
        got = counts.get(name)
        if isinstance(got, str):
            out[name] = got
        elif new:
            out[name] = unavailable(f"threads {new} started after the hardware counters were opened")
        elif not got:
            out[name] = unavailable(f"no {name} counter of the side's threads could be read at the end")
        else:
            out[name] = sum(got.values())
    return out


def side_costs(side: Side, roots: Roots) -> dict[str, Any] | str:
    """A side's ``costs`` member (CONTRACTS.md §5) from its two snapshots.

    Long because: it writes the member field by field in the contract's order, each a delta of the two
    snapshots or the reason it is unavailable; the per-thread rows and the binaries' own system-call
    counts (:func:`_own_counts`) are already apart."""
    if side.pid is None:
        return unavailable(side.why or "its process is not visible to this launcher")
    if len(side.snaps) < 2:
        return unavailable("the measure phase's start and end were not both seen (client's phase events)")
    a, b = side.snaps[0], side.snaps[1]
    tick = float(os.sysconf("SC_CLK_TCK"))
    syscalls = side.syscalls or {}
    syscall_problem = side.counters.problem if side.counters is not None else None
    own = _own_counts(side)
    hardware = _hardware(side, a, b)
    threads = []
    ended = sum(1 for tid in a.threads if tid not in b.threads)
    totals = {"voluntary": 0, "involuntary": 0, "migrations": 0, "syscalls": 0}
    migrations_known = syscalls_known = True
    for tid in sorted(set(a.threads) | set(b.threads)):
        t0, t1 = a.threads.get(tid), b.threads.get(tid)
        if t1 is None:  # ended within the phase: its last counts are gone with it
            continue
        base = t0 or {"voluntary": 0, "involuntary": 0, "migrations": 0, "run_ns": 0, "wait_ns": 0}
        row: dict[str, Any] = {"tid": tid, "comm": t1["comm"], "cpus": t1["cpus"], "new": t0 is None}
        for key in ("voluntary", "involuntary", "migrations"):
            v0, v1 = base.get(key), t1.get(key)
            row[key] = v1 - v0 if v0 is not None and v1 is not None else None
        for key in ("run_ns", "wait_ns"):
            v0, v1 = base.get(key), t1.get(key)
            row[key.replace("_ns", "_s")] = (v1 - v0) / 1e9 if v0 is not None and v1 is not None else None
        # The binaries report by the id their threads see (a container's PID namespace: not this host's).
        own_tid = t1.get("ns_tid") or tid
        row["syscalls"] = _own_delta(own, own_tid, t0 is None) if isinstance(own, list) else None
        if side.counters is not None:
            row["syscalls_kernel"] = syscalls.get(tid)
        threads.append(row)
        totals["voluntary"] += row["voluntary"] or 0
        totals["involuntary"] += row["involuntary"] or 0
        if row["migrations"] is None:
            migrations_known = False
        else:
            totals["migrations"] += row["migrations"]
        if row.get("syscalls_kernel") is None:
            syscalls_known = False
        else:
            totals["syscalls"] += row["syscalls_kernel"]
    process: dict[str, Any] | str = unavailable(f"/proc/{side.pid}/stat unreadable")
    if a.process is not None and b.process is not None:
        process = {"user": (b.process[0] - a.process[0]) / tick, "sys": (b.process[1] - a.process[1]) / tick}
    cpu_time: dict[str, float] = dict.fromkeys(CPU_FIELDS, 0.0)
    for cpu, start in a.cpus.items():
        end = b.cpus.get(cpu, start)
        for i, name in enumerate(CPU_FIELDS[: len(start)]):
            cpu_time[name] += (end[i] - start[i]) / tick
    if side.counters is not None and syscall_problem is None and not syscalls_known:
        new = [r["tid"] for r in threads if r.get("syscalls_kernel") is None]
        syscall_problem = unavailable(f"threads {new} started after the counters were opened")
    kernel: dict[str, Any] = {}
    if side.counters is not None:
        kernel = {
            "syscalls_kernel": totals["syscalls"] if syscall_problem is None else syscall_problem,
            "syscalls_kernel_source": SYSCALLS_KERNEL_SOURCE,
        }
    return {
        "pid": side.pid,
        "cpus": sorted(a.cpus),
        "interval_s": (b.t_ns - a.t_ns) / 1e9,
        "lag_s": [
            None if m is None else (s.t_ns - m) / 1e9 for m, s in zip(side.marks, side.snaps, strict=False)
        ],
        "process_cpu_s": process,
        "context_switches": {"voluntary": totals["voluntary"], "involuntary": totals["involuntary"]},
        "migrations": totals["migrations"]
        if migrations_known
        else unavailable(f"/proc/{side.pid}/task/*/sched absent (a kernel without CONFIG_SCHED_DEBUG)"),
        "syscalls": own[-1]["total"] - own[0]["total"] if isinstance(own, list) else own,
        "syscalls_source": SYSCALLS_OWN_SOURCE.get(side.role, f"{side.role}'s own count"),
        "syscalls_interval_s": (own[-1]["t_ns"] - own[0]["t_ns"]) / 1e9 if isinstance(own, list) else None,
        **kernel,
        **hardware,
        "threads": threads,
        "threads_ended": ended,
        "cpu_time_s": cpu_time
        if a.cpus
        else unavailable(f"{roots.proc}/stat has none of CPUs {list(side.cpus)}"),
        "tcp": _delta_map(a.tcp, b.tcp),
        "netns": b.netns or a.netns,
        "frequency_khz": a.freq if isinstance(a.freq, str) else {"start": a.freq, "end": b.freq},
        "governor": b.governor,
        "turbo": read_turbo(roots),
        "smt": read_smt(roots),
        "energy_uj": _energy(a.energy, b.energy),
    }


class Collector:
    """Reads the sides' counters at the measure phase's start and end (:meth:`mark`, called with the
    client's ``phase`` events) and gives the record's ``costs`` (:meth:`result`)."""

    def __init__(self, sides: Sequence[Side], roots: Roots | None = None, syscalls: bool = False) -> None:
        """Made before the measure phase starts: what can be asked early (a pid, the tracepoint's id) is
        asked here, so the reads at the boundaries are only reads. ``syscalls``: the kernel's count of the
        system calls too (the tracepoint), beside the binaries' own."""
        self.roots = roots or Roots.from_env()
        self.sides = list(sides)
        self.phases: list[str] = []
        for side in self.sides:
            if side.pid is None and side.lookup is not None:
                side.pid, side.why = side.lookup()
            if syscalls:
                side.counters = SyscallCounters(self.roots)
            if side.hardware is None:  # the CPU's cycles and instructions: always, they cost no slow path
                side.hardware = HardwareCounters()

    def mark(self, phase: str, t_ns: int | None = None, client_own: Mapping[str, Any] | None = None) -> None:
        """A boundary the client printed: ``measure`` (start) or ``cooldown`` (end); ``t_ns`` its stamp,
        ``client_own`` the client's own system-call counts it carried (:func:`parse_own`)."""
        if phase not in ("measure", "cooldown") or phase in self.phases:
            return
        self.phases.append(phase)
        for side in self.sides:
            if side.pid is None and side.lookup is not None and phase == "measure":
                side.pid, side.why = side.lookup()
            if side.pid is None:
                continue
            if side.ask_own:
                self._ask_server(side)
            elif client_own is not None:
                side.own.append(dict(client_own))
            if phase == "cooldown" and side.counters is not None:
                side.syscalls = side.counters.read()  # first: the count stops at the boundary
                side.counters.close()
            if phase == "cooldown" and side.hardware is not None:
                side.hardware_counts = side.hardware.read()
                side.hardware.close()
            snap = side.snapshot(self.roots)
            side.snaps.append(snap)
            side.marks.append(t_ns)
            if phase == "measure" and side.counters is not None:
                side.counters.open(sorted(snap.threads))
            if phase == "measure" and side.hardware is not None:
                side.hardware.open(sorted(snap.threads))

    @staticmethod
    def _ask_server(side: Side) -> None:
        """SIGUSR1: the server prints its threads' system calls so far on its stdout (CONTRACTS.md §1)."""
        if side.own_problem is not None or side.pid is None:
            return
        try:
            os.kill(side.pid, signal.SIGUSR1)
        except OSError as exc:
            side.own_problem = unavailable(f"cannot signal the server (pid {side.pid}) for its count: {exc}")

    def take_server_lines(self, lines: Sequence[Mapping[str, Any]]) -> None:
        """The server's ``{"event": "syscalls", ...}`` lines, in order, from its stdout after its exit."""
        for side in self.sides:
            if not side.ask_own or side.own_problem is not None:
                continue
            side.own = [p for p in (parse_own(e, "total") for e in lines) if p is not None]

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phases": list(self.phases)}
        for side in self.sides:
            out[side.role] = side_costs(side, self.roots)
        server, client = out.get("server"), out.get("client")
        if isinstance(server, dict) and isinstance(client, dict):
            out["same_netns"] = server["netns"] is not None and server["netns"] == client["netns"]
        return out

    def on_phase(self, event: Mapping[str, Any]) -> None:
        """One of the client's ``{"event": "phase", "phase": ..., "t_ns": ...}`` lines."""
        t_ns = event.get("t_ns")
        self.mark(
            str(event.get("phase")), t_ns if isinstance(t_ns, int) else None, parse_own(event, "syscalls")
        )

    def close(self) -> None:
        for side in self.sides:
            if side.counters is not None:
                side.counters.close()
            if side.hardware is not None:
                side.hardware.close()


def for_run(
    server_cpus: Sequence[int],
    client_cpus: Sequence[int],
    server_pid: tuple[int | None, str | None],
    client_pid: Callable[[], tuple[int | None, str | None]],
    syscalls: bool = False,
) -> Collector:
    """A run's collector: the server's pid (or why none), the client's asked now and, if not known yet (a
    container still starting), again at the measure phase's start. ``syscalls``: the kernel's count too."""
    return Collector(
        [
            Side("server", server_pid[0], server_cpus, server_pid[1], ask_own=True),
            Side("client", None, client_cpus, lookup=client_pid),
        ],
        syscalls=syscalls,
    )

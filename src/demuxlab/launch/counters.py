"""The kernel's counters of a run, read where the client says its measure phase starts and ends.

The record's ``costs`` (docs/CONTRACTS.md §5): per side (server, client), the deltas over the measure phase
of what the kernel counts for the side's process and its CPUs, read at the two phase boundaries the client
prints (``demux-client --phase-events``), never per message:

* the process's CPU time (``/proc/PID/stat``) and, per thread (``/proc/PID/task/TID``): its voluntary and
  involuntary context switches and migrations (``sched``; ``status`` where the kernel has no ``sched``),
  its time on a CPU and waiting for one (``schedstat``), and its system calls: the kernel's own count, a
  perf counter on the ``raw_syscalls:sys_enter`` tracepoint opened on each thread at the phase's start
  (:class:`SyscallCounters`);
* the side's CPUs (the run's pinning): user, nice, system, irq, softirq, steal, idle and iowait time
  (``/proc/stat``), their frequency at both ends (``cpufreq/scaling_cur_freq``), governor, turbo and SMT;
* the side's network namespace (``/proc/PID/net/snmp`` and ``netstat``): TCP retransmits, resets, errors,
  listen overflows and drops;
* energy from RAPL (``/sys/class/powercap/*-rapl:*/energy_uj``) where the host has it.

Every value the host cannot give is ``"unavailable: <why>"``, never a zero. A side whose process this
launcher cannot see (it runs on another host) is that string as a whole. The readers take a ``Roots``
(``DEMUXLAB_SYS_ROOT`` points sysfs elsewhere: the tests' fake cpufreq and powercap trees); processes and
``/proc/stat`` are always this host's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import shutil
import struct
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

UNAVAILABLE = "unavailable: "
#: The TCP counters kept (``/proc/net/snmp`` ``Tcp:``, ``/proc/net/netstat`` ``TcpExt:``): retransmits,
#: resets and errors, the listen queue's overflows and drops, and the receive path's drops.
TCP_COUNTERS: dict[str, tuple[str, ...]] = {
    "Tcp": ("RetransSegs", "InErrs", "OutRsts", "AttemptFails", "EstabResets"),
    "TcpExt": (
        "ListenOverflows",
        "ListenDrops",
        "TCPTimeouts",
        "TCPLostRetransmit",
        "TCPBacklogDrop",
        "TCPRcvQDrop",
        "TCPZeroWindowDrop",
        "TCPOFODrop",
    ),
}
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
SYSCALLS_SOURCE = "kernel: perf counter on the raw_syscalls:sys_enter tracepoint, per thread"


def unavailable(why: str) -> str:
    return UNAVAILABLE + " ".join(why.split())


@dataclass(frozen=True)
class Roots:
    """Where sysfs is (``DEMUXLAB_SYS_ROOT``, for tests) and procfs (always this host's)."""

    sys: Path = Path("/sys")
    proc: Path = Path("/proc")

    @classmethod
    def from_env(cls) -> Roots:
        return cls(sys=Path(os.environ.get("DEMUXLAB_SYS_ROOT") or "/sys"))


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _why(path: Path) -> str:
    """Why ``path`` cannot be read, in a few words."""
    try:
        path.read_bytes()
    except FileNotFoundError:
        return f"{path} absent"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return f"{path} unreadable"


# -- per process and thread --------------------------------------------------------------------------------


def _stat_times(text: str) -> tuple[int, int, int] | None:
    """utime, stime (clock ticks) and num_threads from a ``/proc/PID/stat`` line."""
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return int(rest[11]), int(rest[12]), int(rest[17])
    except (IndexError, ValueError):
        return None


def _key_values(text: str, sep: str = ":") -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, found, value = line.partition(sep)
        if found:
            out[key.strip()] = value.strip()
    return out


def _thread(task: Path) -> dict[str, Any] | None:
    """One thread's counters so far; None once it is gone."""
    status = _read(task / "status")
    if status is None:
        return None
    st = _key_values(status)
    row: dict[str, Any] = {
        "comm": (_read(task / "comm") or "").strip(),
        "cpus": st.get("Cpus_allowed_list"),
        "voluntary": _int(st.get("voluntary_ctxt_switches")),
        "involuntary": _int(st.get("nonvoluntary_ctxt_switches")),
        "migrations": None,
    }
    sched = _read(task / "sched")
    if sched is not None:
        kv = _key_values(sched)
        row["migrations"] = _int(kv.get("se.nr_migrations"))
        row["voluntary"] = _int(kv.get("nr_voluntary_switches"), row["voluntary"])
        row["involuntary"] = _int(kv.get("nr_involuntary_switches"), row["involuntary"])
    schedstat = (_read(task / "schedstat") or "").split()
    row["run_ns"] = _int(schedstat[0]) if len(schedstat) >= 2 else None
    row["wait_ns"] = _int(schedstat[1]) if len(schedstat) >= 2 else None
    return row


def _int(text: str | None, default: int | None = None) -> int | None:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _tcp(proc_dir: Path) -> dict[str, int] | str:
    """The kept TCP counters of the namespace ``proc_dir``'s process lives in."""
    out: dict[str, int] = {}
    for name in ("snmp", "netstat"):
        path = proc_dir / "net" / name
        text = _read(path)
        if text is None:
            return unavailable(_why(path))
        lines = text.splitlines()
        for head, values in zip(lines[::2], lines[1::2], strict=False):
            group, _, names = head.partition(":")
            wanted = TCP_COUNTERS.get(group)
            if wanted is None:
                continue
            for key, value in zip(names.split(), values.partition(":")[2].split(), strict=False):
                if key in wanted:
                    with contextlib.suppress(ValueError):
                        out[key] = int(value)
    return out


# -- per CPU -----------------------------------------------------------------------------------------------


def _proc_stat(proc: Path) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for line in (_read(proc / "stat") or "").splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            with contextlib.suppress(ValueError):
                out[int(name[3:])] = [int(v) for v in values[: len(CPU_FIELDS)]]
    return out


def _cpufreq(roots: Roots, cpus: Sequence[int]) -> tuple[dict[str, int] | str, str]:
    """Each CPU's current frequency (kHz) and the governors (joined, sorted), or why not."""
    base = roots.sys / "devices" / "system" / "cpu"
    freqs: dict[str, int] = {}
    governors: set[str] = set()
    missing: Path | None = None
    for cpu in cpus:
        d = base / f"cpu{cpu}" / "cpufreq"
        khz = _int((_read(d / "scaling_cur_freq") or "").strip() or None)
        gov = (_read(d / "scaling_governor") or "").strip()
        if khz is None:
            missing = missing or d / "scaling_cur_freq"
        else:
            freqs[str(cpu)] = khz
        if gov:
            governors.add(gov)
    if missing is not None and not freqs:
        where = base / f"cpu{cpus[0]}" / "cpufreq" if cpus else base
        why = (
            f"{where} absent: no cpufreq driver (a VM, or frequency not exposed by the platform)"
            if not where.exists()
            else _why(missing)
        )
        return unavailable(why), unavailable(why)
    governor = ",".join(sorted(governors)) if governors else unavailable("no scaling_governor in cpufreq")
    return freqs, governor


def _turbo(roots: Roots) -> bool | str:
    base = roots.sys / "devices" / "system" / "cpu"
    no_turbo = _int((_read(base / "intel_pstate" / "no_turbo") or "").strip() or None)
    if no_turbo is not None:
        return no_turbo == 0
    boost = _int((_read(base / "cpufreq" / "boost") or "").strip() or None)
    if boost is not None:
        return boost == 1
    return unavailable(f"neither {base}/intel_pstate/no_turbo nor {base}/cpufreq/boost")


def _smt(roots: Roots) -> dict[str, Any] | str:
    base = roots.sys / "devices" / "system" / "cpu" / "smt"
    active = _int((_read(base / "active") or "").strip() or None)
    control = (_read(base / "control") or "").strip() or None
    if active is None and control is None:
        return unavailable(f"{base} absent")
    return {"active": None if active is None else active == 1, "control": control}


def _rapl(roots: Roots) -> dict[str, dict[str, int]] | str:
    """Energy counters (µJ) of each RAPL zone and subzone, with their wrap-around range."""
    base = roots.sys / "class" / "powercap"
    try:
        zones = sorted(p for p in base.rglob("energy_uj") if "rapl" in p.parent.name)
    except OSError:
        zones = []
    if not zones:
        return unavailable(f"no RAPL zone under {base} (the host or its VM does not expose RAPL)")
    out: dict[str, dict[str, int]] = {}
    denied: str | None = None
    for path in zones:
        value = _int((_read(path) or "").strip() or None)
        if value is None:
            denied = denied or _why(path)
            continue
        zone = path.parent
        name = (_read(zone / "name") or zone.name).strip()
        key = f"{zone.name}:{name}"
        out[key] = {"uj": value, "range_uj": _int((_read(zone / "max_energy_range_uj") or "").strip()) or 0}
    return out if out else unavailable(denied or "no readable energy_uj")


# -- system calls ------------------------------------------------------------------------------------------

_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_PERF_TYPE_TRACEPOINT = 2
_PERF_FLAG_FD_CLOEXEC = 8
_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: type, size, config, period, sample_type, read_format, flags, ...


def syscall_tracepoint_id(roots: Roots) -> int | str:
    """The id of ``raw_syscalls:sys_enter``: from tracefs where it is mounted; else, as root, from a tracefs
    mounted in a private mount namespace that ends with the one command reading it (this host's mounts
    are left as they are); else why not."""
    rel = Path("events") / "raw_syscalls" / "sys_enter" / "id"
    for tracefs in (roots.sys / "kernel" / "tracing", roots.sys / "kernel" / "debug" / "tracing"):
        found = _int((_read(tracefs / rel) or "").strip() or None)
        if found is not None:
            return found
    if roots.sys != Path("/sys"):
        return unavailable(f"no tracefs with {rel} under {roots.sys}")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return unavailable("tracefs not mounted at /sys/kernel/tracing, and mounting it privately needs root")
    script = f"mount -t tracefs nodev /sys/kernel/tracing && cat /sys/kernel/tracing/{rel}"
    try:
        res = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return unavailable(f"tracefs not mounted, and a private mount failed: {exc}")
    found = _int(res.stdout.strip() or None)
    if res.returncode != 0 or found is None:
        detail = (res.stderr.strip().splitlines() or ["no id"])[-1]
        return unavailable(f"tracefs not mounted, and a private mount failed: {detail}")
    return found


_TRACEPOINT: dict[Path, int | str] = {}


class SyscallCounters:
    """A perf counter of ``raw_syscalls:sys_enter`` on each thread of a process, opened at the measure
    phase's start and read at its end: the system calls each thread made in between, all of them (the
    futexes inside its locks and condition variables too), as the kernel counts them.

    Enabling the tracepoint puts every thread on this host on the system-call slow path while a counter is
    open: part of what collection costs (``bench/perf/costs_bench.py``)."""

    def __init__(self, roots: Roots) -> None:
        self.fds: dict[int, int] = {}
        self.problem: str | None = None
        nr = _PERF_EVENT_OPEN.get(platform.machine())
        if nr is None:
            self.problem = unavailable(f"perf_event_open's number on {platform.machine()} not known here")
            return
        if roots.sys not in _TRACEPOINT:
            _TRACEPOINT[roots.sys] = syscall_tracepoint_id(roots)
        tp = _TRACEPOINT[roots.sys]
        if isinstance(tp, str):
            self.problem = tp
            return
        self._nr, self._tp = nr, tp
        self._libc = ctypes.CDLL(None, use_errno=True)

    def open(self, tids: Sequence[int]) -> None:
        if self.problem is not None:
            return
        buf = ctypes.create_string_buffer(_ATTR_SIZE)
        struct.pack_into("IIQ", buf, 0, _PERF_TYPE_TRACEPOINT, _ATTR_SIZE, self._tp)
        for tid in tids:
            fd = self._libc.syscall(self._nr, buf, tid, -1, -1, _PERF_FLAG_FD_CLOEXEC)
            if fd < 0:
                err = ctypes.get_errno()
                if not self.fds:  # not a thread that ended meanwhile: the host refuses
                    self.problem = unavailable(
                        f"perf_event_open refused ({os.strerror(err)}; kernel.perf_event_paranoid "
                        f"{(_read(Path('/proc/sys/kernel/perf_event_paranoid')) or '?').strip()})"
                    )
                    self.close()
                    return
                continue
            self.fds[tid] = fd

    def read(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for tid, fd in self.fds.items():
            with contextlib.suppress(OSError):
                out[tid] = struct.unpack("Q", os.read(fd, 8))[0]
        return out

    def close(self) -> None:
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = {}


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
    syscalls: dict[int, int] | None = None  # read at the measure phase's end
    snaps: list[Snapshot] = field(default_factory=list)
    marks: list[int | None] = field(default_factory=list)

    def snapshot(self, roots: Roots) -> Snapshot:
        assert self.pid is not None
        proc_dir = roots.proc / str(self.pid)
        threads: dict[int, dict[str, Any]] = {}
        with contextlib.suppress(OSError):
            for task in (proc_dir / "task").iterdir():
                if task.name.isdigit():
                    row = _thread(task)
                    if row is not None:
                        threads[int(task.name)] = row
        stat = _read(proc_dir / "stat")
        all_cpus = _proc_stat(roots.proc)
        cpus = list(self.cpus) or sorted(all_cpus)
        freq, governor = _cpufreq(roots, cpus)
        return Snapshot(
            t_ns=time.monotonic_ns(),
            process=_stat_times(stat) if stat else None,
            threads=threads,
            cpus={c: all_cpus[c] for c in cpus if c in all_cpus},
            tcp=_tcp(proc_dir),
            netns=_netns(roots, self.pid),
            freq=freq,
            governor=governor,
            energy=_rapl(roots),
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


def side_costs(side: Side, roots: Roots) -> dict[str, Any] | str:
    """A side's ``costs`` member (CONTRACTS.md §5) from its two snapshots."""
    if side.pid is None:
        return unavailable(side.why or "its process is not visible to this launcher")
    if len(side.snaps) < 2:
        return unavailable("the measure phase's start and end were not both seen (client's phase events)")
    a, b = side.snaps[0], side.snaps[1]
    tick = float(os.sysconf("SC_CLK_TCK"))
    syscalls = side.syscalls or {}
    syscall_problem = side.counters.problem if side.counters is not None else None
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
        row["syscalls"] = syscalls.get(tid)
        threads.append(row)
        totals["voluntary"] += row["voluntary"] or 0
        totals["involuntary"] += row["involuntary"] or 0
        if row["migrations"] is None:
            migrations_known = False
        else:
            totals["migrations"] += row["migrations"]
        if row["syscalls"] is None:
            syscalls_known = False
        else:
            totals["syscalls"] += row["syscalls"]
    process: dict[str, Any] | str = unavailable(f"/proc/{side.pid}/stat unreadable")
    if a.process is not None and b.process is not None:
        process = {"user": (b.process[0] - a.process[0]) / tick, "sys": (b.process[1] - a.process[1]) / tick}
    cpu_time: dict[str, float] = dict.fromkeys(CPU_FIELDS, 0.0)
    for cpu, start in a.cpus.items():
        end = b.cpus.get(cpu, start)
        for i, name in enumerate(CPU_FIELDS[: len(start)]):
            cpu_time[name] += (end[i] - start[i]) / tick
    if syscall_problem is None and not syscalls_known:
        new = [r["tid"] for r in threads if r["syscalls"] is None]
        syscall_problem = unavailable(f"threads {new} started after the counters were opened")
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
        "syscalls": totals["syscalls"] if syscall_problem is None else syscall_problem,
        "syscalls_source": SYSCALLS_SOURCE,
        "threads": threads,
        "threads_ended": ended,
        "cpu_time_s": cpu_time
        if a.cpus
        else unavailable(f"{roots.proc}/stat has none of CPUs {list(side.cpus)}"),
        "tcp": _delta_map(a.tcp, b.tcp),
        "netns": b.netns or a.netns,
        "frequency_khz": a.freq if isinstance(a.freq, str) else {"start": a.freq, "end": b.freq},
        "governor": b.governor,
        "turbo": _turbo(roots),
        "smt": _smt(roots),
        "energy_uj": _energy(a.energy, b.energy),
    }


def _netns(roots: Roots, pid: int) -> str | None:
    try:
        return os.readlink(roots.proc / str(pid) / "ns" / "net")
    except OSError:
        return None


class Collector:
    """Reads the sides' counters at the measure phase's start and end (:meth:`mark`, called with the
    client's ``phase`` events) and gives the record's ``costs`` (:meth:`result`)."""

    def __init__(self, sides: Sequence[Side], roots: Roots | None = None, syscalls: bool = True) -> None:
        """Made before the measure phase starts: what can be asked early (a pid, the tracepoint's id) is
        asked here, so the reads at the boundaries are only reads."""
        self.roots = roots or Roots.from_env()
        self.sides = list(sides)
        self.phases: list[str] = []
        for side in self.sides:
            if side.pid is None and side.lookup is not None:
                side.pid, side.why = side.lookup()
            if syscalls:
                side.counters = SyscallCounters(self.roots)

    def mark(self, phase: str, t_ns: int | None = None) -> None:
        """A boundary the client printed: ``measure`` (start) or ``cooldown`` (end); ``t_ns`` its stamp."""
        if phase not in ("measure", "cooldown") or phase in self.phases:
            return
        self.phases.append(phase)
        for side in self.sides:
            if side.pid is None and side.lookup is not None and phase == "measure":
                side.pid, side.why = side.lookup()
            if side.pid is None:
                continue
            if phase == "cooldown" and side.counters is not None:
                side.syscalls = side.counters.read()  # first: the count stops at the boundary
                side.counters.close()
            snap = side.snapshot(self.roots)
            side.snaps.append(snap)
            side.marks.append(t_ns)
            if phase == "measure" and side.counters is not None:
                side.counters.open(sorted(snap.threads))

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phases": list(self.phases)}
        for side in self.sides:
            out[side.role] = side_costs(side, self.roots)
        server, client = out.get("server"), out.get("client")
        if isinstance(server, dict) and isinstance(client, dict):
            out["same_netns"] = server["netns"] is not None and server["netns"] == client["netns"]
        return out

    def close(self) -> None:
        for side in self.sides:
            if side.counters is not None:
                side.counters.close()

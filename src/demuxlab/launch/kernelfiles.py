"""What one reading of a side's counters reads (demuxlab.launch.counters): a process's threads in
``/proc/PID/task``, its network namespace's TCP counters, its CPUs' times in ``/proc/stat``, sysfs's
cpufreq, turbo, SMT and RAPL, the kernel's count of system calls (a perf counter on the
``raw_syscalls:sys_enter`` tracepoint per thread), and the CPU's cycles and instructions (hardware perf
counters per thread). Each reader returns a value or ``unavailable: <why>``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import shutil
import struct
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
SYSCALLS_KERNEL_SOURCE = "kernel: perf counter on the raw_syscalls:sys_enter tracepoint, per thread"
#: The record's ``syscalls_source`` by side: each binary's own count (images/common/sysc.h).
SYSCALLS_OWN_SOURCE = {
    "server": "demux-server's own count, per thread where it makes the calls (read on SIGUSR1 at the "
    "client's phase boundaries)",
    "client": "demux-client's own count, per thread where it makes the calls (read at its phase boundaries)",
}


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


def read_text(path: Path) -> str | None:
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


def stat_times(text: str) -> tuple[int, int, int] | None:
    """utime, stime (clock ticks) and num_threads from a ``/proc/PID/stat`` line."""
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return int(rest[11]), int(rest[12]), int(rest[17])
    except (IndexError, ValueError):
        return None


def stat_state(text: str) -> str | None:
    """The process's state letter from a ``/proc/PID/stat`` line (``Z``: exited, not yet reaped)."""
    rest = text[text.rfind(")") + 2 :].split()
    return rest[0] if rest else None


def _key_values(text: str, sep: str = ":") -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, found, value = line.partition(sep)
        if found:
            out[key.strip()] = value.strip()
    return out


def read_thread(task: Path) -> dict[str, Any] | None:
    """One thread's counters so far; None once it is gone."""
    status = read_text(task / "status")
    if status is None:
        return None
    st = _key_values(status)
    row: dict[str, Any] = {
        "comm": (read_text(task / "comm") or "").strip(),
        "cpus": st.get("Cpus_allowed_list"),
        "voluntary": _int(st.get("voluntary_ctxt_switches")),
        "involuntary": _int(st.get("nonvoluntary_ctxt_switches")),
        "migrations": None,
    }
    # The thread's id in its own PID namespace (NSpid's last: a container's), the id the binaries report
    # their counts by (gettid); the host's where it lives in this one.
    nspid = (st.get("NSpid") or "").split()
    if nspid:
        row["ns_tid"] = _int(nspid[-1])
    sched = read_text(task / "sched")
    if sched is not None:
        kv = _key_values(sched)
        row["migrations"] = _int(kv.get("se.nr_migrations"))
        row["voluntary"] = _int(kv.get("nr_voluntary_switches"), row["voluntary"])
        row["involuntary"] = _int(kv.get("nr_involuntary_switches"), row["involuntary"])
    schedstat = (read_text(task / "schedstat") or "").split()
    row["run_ns"] = _int(schedstat[0]) if len(schedstat) >= 2 else None
    row["wait_ns"] = _int(schedstat[1]) if len(schedstat) >= 2 else None
    return row


def _int(text: str | None, default: int | None = None) -> int | None:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def read_tcp(proc_dir: Path) -> dict[str, int] | str:
    """The kept TCP counters of the namespace ``proc_dir``'s process lives in."""
    out: dict[str, int] = {}
    for name in ("snmp", "netstat"):
        path = proc_dir / "net" / name
        text = read_text(path)
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


def read_proc_stat(proc: Path) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for line in (read_text(proc / "stat") or "").splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            with contextlib.suppress(ValueError):
                out[int(name[3:])] = [int(v) for v in values[: len(CPU_FIELDS)]]
    return out


def read_cpufreq(roots: Roots, cpus: Sequence[int]) -> tuple[dict[str, int] | str, str]:
    """Each CPU's current frequency (kHz) and the governors (joined, sorted), or why not."""
    base = roots.sys / "devices" / "system" / "cpu"
    freqs: dict[str, int] = {}
    governors: set[str] = set()
    missing: Path | None = None
    for cpu in cpus:
        d = base / f"cpu{cpu}" / "cpufreq"
        khz = _int((read_text(d / "scaling_cur_freq") or "").strip() or None)
        gov = (read_text(d / "scaling_governor") or "").strip()
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


def read_turbo(roots: Roots) -> bool | str:
    base = roots.sys / "devices" / "system" / "cpu"
    no_turbo = _int((read_text(base / "intel_pstate" / "no_turbo") or "").strip() or None)
    if no_turbo is not None:
        return no_turbo == 0
    boost = _int((read_text(base / "cpufreq" / "boost") or "").strip() or None)
    if boost is not None:
        return boost == 1
    return unavailable(f"neither {base}/intel_pstate/no_turbo nor {base}/cpufreq/boost")


def read_smt(roots: Roots) -> dict[str, Any] | str:
    base = roots.sys / "devices" / "system" / "cpu" / "smt"
    active = _int((read_text(base / "active") or "").strip() or None)
    control = (read_text(base / "control") or "").strip() or None
    if active is None and control is None:
        return unavailable(f"{base} absent")
    return {"active": None if active is None else active == 1, "control": control}


def read_rapl(roots: Roots) -> dict[str, dict[str, int]] | str:
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
        value = _int((read_text(path) or "").strip() or None)
        if value is None:
            denied = denied or _why(path)
            continue
        zone = path.parent
        name = (read_text(zone / "name") or zone.name).strip()
        key = f"{zone.name}:{name}"
        out[key] = {
            "uj": value,
            "range_uj": _int((read_text(zone / "max_energy_range_uj") or "").strip()) or 0,
        }
    return out if out else unavailable(denied or "no readable energy_uj")


# -- perf counters: system calls, cycles, instructions -----------------------------------------------------

_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_PERF_TYPE_HARDWARE = 0
_PERF_TYPE_TRACEPOINT = 2
_PERF_FLAG_FD_CLOEXEC = 8
_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: type, size, config, period, sample_type, read_format, flags, ...
_FORMAT_TIMES = 1 | 2  # read_format PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
_PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
#: The hardware counters kept: the record's key (CONTRACTS.md §5) → perf's type and config
#: (PERF_TYPE_HARDWARE: PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS).
HARDWARE_EVENTS: dict[str, tuple[int, int]] = {
    "cycles": (_PERF_TYPE_HARDWARE, 0),
    "instructions": (_PERF_TYPE_HARDWARE, 1),
}


def _perf_event_open(libc: Any, nr: int, attr: Any, tid: int) -> tuple[int, int]:
    """A counter of ``attr`` on thread ``tid`` (any CPU), counting from now: its fd, or -1 and the errno."""
    fd = int(libc.syscall(nr, attr, tid, -1, -1, _PERF_FLAG_FD_CLOEXEC))
    return (fd, 0) if fd >= 0 else (-1, ctypes.get_errno())


def _refused(err: int) -> str:
    """The kernel's refusal, in its words (and the setting that decides a permission's)."""
    paranoid = (read_text(_PARANOID) or "?").strip()
    return f"perf_event_open refused ({os.strerror(err)}; kernel.perf_event_paranoid {paranoid})"


def hardware_refusal(err: int) -> str:
    """Why hardware counters cannot be had, from perf_event_open's errno: ENOENT or EOPNOTSUPP where the
    host (a VM without a virtual PMU) has none; a permission (EACCES, EPERM) with perf_event_paranoid."""
    said = f"perf_event_open: {os.strerror(err)}"
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return unavailable(f"no hardware performance counters ({said})")
    if err in (errno.EACCES, errno.EPERM):
        return unavailable(f"hardware counters not permitted ({_refused(err)})")
    return unavailable(f"hardware counters refused ({said})")


def syscall_tracepoint_id(roots: Roots) -> int | str:
    """The id of ``raw_syscalls:sys_enter``: from tracefs where it is mounted; else, as root, from a tracefs
    mounted in a private mount namespace that ends with the one command reading it (this host's mounts
    are left as they are); else why not."""
    rel = Path("events") / "raw_syscalls" / "sys_enter" / "id"
    for tracefs in (roots.sys / "kernel" / "tracing", roots.sys / "kernel" / "debug" / "tracing"):
        found = _int((read_text(tracefs / rel) or "").strip() or None)
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
                    self.problem = unavailable(_refused(err))
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


class HardwareCounters:
    """The CPU's cycles and instructions (:data:`HARDWARE_EVENTS`), a hardware perf counter of each on each
    thread of a process, user and kernel mode, opened at the measure phase's start and read at its end.
    Unlike the tracepoint these put no thread on a slow path: the PMU counts, the kernel saves and restores
    the counters when a counted thread is switched. A thread that ends within the phase keeps its count
    (its counter stays readable). Where the PMU is shared out (more events than counters), a count is
    scaled by the time it was enabled over the time it counted, as ``perf stat`` does.

    ``problem``: why there are none, in the kernel's words (this VM has no PMU: ENOENT). ``events``: the
    record's keys and what each counts (the tests count software events with it, on a host without a PMU).
    """

    def __init__(self, events: Mapping[str, tuple[int, int]] = HARDWARE_EVENTS) -> None:
        self.events = dict(events)
        self.fds: dict[str, dict[int, int]] = {name: {} for name in self.events}
        self.problem: str | None = None
        nr = _PERF_EVENT_OPEN.get(platform.machine())
        if nr is None:
            self.problem = unavailable(f"perf_event_open's number on {platform.machine()} not known here")
            return
        self._nr = nr
        self._libc = ctypes.CDLL(None, use_errno=True)

    def open(self, tids: Sequence[int]) -> None:
        """Counters on ``tids``; a thread that ended meanwhile (ESRCH) is left out, any other refusal ends
        them all with its reason."""
        if self.problem is not None:
            return
        try:
            for tid in tids:
                for name, (kind, config) in self.events.items():
                    attr = ctypes.create_string_buffer(_ATTR_SIZE)
                    # flags 0: enabled from now, user, kernel and hypervisor mode all counted
                    struct.pack_into("IIQQQQ", attr, 0, kind, _ATTR_SIZE, config, 0, 0, _FORMAT_TIMES)
                    fd, err = _perf_event_open(self._libc, self._nr, attr, tid)
                    if fd >= 0:
                        self.fds[name][tid] = fd
                    elif err != errno.ESRCH:
                        self.problem = hardware_refusal(err)
                        self.close()
                        return
        except BaseException:
            self.close()
            raise

    def read(self) -> dict[str, dict[int, int] | str]:
        """Each event's count per thread (a thread whose counter cannot be read is absent), or why not."""
        out: dict[str, dict[int, int] | str] = {}
        for name, fds in self.fds.items():
            counts: dict[int, int] = {}
            starved: list[int] = []
            for tid, fd in fds.items():
                try:
                    value, enabled, running = struct.unpack("QQQ", os.read(fd, 24))
                except (OSError, struct.error):
                    continue
                if running == 0 and enabled > 0:
                    starved.append(tid)
                else:
                    counts[tid] = round(value * enabled / running) if 0 < running < enabled else value
            out[name] = (
                unavailable(
                    f"the {name} counters of threads {starved} never got onto the PMU (taken by others)"
                )
                if starved
                else counts
            )
        return out

    def close(self) -> None:
        for fds in self.fds.values():
            for fd in fds.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fds = {name: {} for name in self.events}


def read_netns(roots: Roots, pid: int) -> str | None:
    try:
        return os.readlink(roots.proc / str(pid) / "ns" / "net")
    except OSError:
        return None

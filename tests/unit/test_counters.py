"""The kernel's counters a run reads (demuxlab.launch.counters), each against a known load between its two
readings: system calls (a child making exactly N), voluntary context switches (N sleeps), migrations (a
child moved between CPUs), CPU time (a spin on one CPU), TCP resets and failed connects (in this process's
own network namespace); the sysfs readings through a fake tree (DEMUXLAB_SYS_ROOT): a governor other than
performance and a frequency that moved end as failed checks by demuxlab.validity's own verdicts; RAPL's
energy across a wrap; the CPU's cycles and instructions (hardware perf counters; their reading and summing
through software events where the host has no PMU); and this host's absent counters (cpufreq, RAPL,
hardware events) as ``unavailable: <why>`` in the kernel's words, never a zero."""

from __future__ import annotations

import errno
import os
import platform
import re
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demuxlab.costs import run_costs
from demuxlab.launch.counters import (
    UNAVAILABLE,
    Collector,
    HardwareCounters,
    Roots,
    Side,
    Snapshot,
    SyscallCounters,
    side_costs,
)
from demuxlab.launch.kernelfiles import hardware_refusal, read_thread
from demuxlab.validity import frequency, governor
from demuxlab.vocab import CHECK_FAIL

# A child that waits for "go" on stdin, does its load, says "done" and waits again (until EOF).
CHILD = r"""
import os, signal, sys, time
signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # a server's ask for its own count (Side.ask_own)
kind, n = sys.argv[1], int(sys.argv[2])
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    if kind == "syscalls":
        for _ in range(n):
            os.getppid()
    elif kind == "sleeps":
        for _ in range(n):
            time.sleep(0.001)
    elif kind == "migrate":
        cpus = sorted(os.sched_getaffinity(0))
        for i in range(n):
            os.sched_setaffinity(0, {cpus[i % 2]})
            t = time.perf_counter()
            while time.perf_counter() - t < 0.0005:
                pass
    elif kind == "spin":
        os.sched_setaffinity(0, {int(sys.argv[3])})
        t = time.process_time()
        while time.process_time() - t < n / 1000:
            pass
    sys.stdout.write("done\n"); sys.stdout.flush()
"""


class Child:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def go(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "done\n"

    def close(self) -> None:
        self.proc.communicate(timeout=30)


@pytest.fixture
def child() -> Iterator[Any]:
    made: list[Child] = []

    def make(*args: str) -> Child:
        made.append(Child(*args))
        return made[-1]

    yield make
    for c in made:
        c.close()


def measure(
    pid: int,
    load: Any,
    cpus: list[int] | None = None,
    roots: Roots | None = None,
    own: list[dict[str, Any]] | None = None,
    hardware: HardwareCounters | None = None,
) -> dict[str, Any]:
    """A side's costs over ``load()``: read at a 'measure' and a 'cooldown' boundary, as a run's are, with
    the kernel's count of its system calls (the opt-in tracepoint); ``own``: the lines a demux-server would
    have printed when asked for its own count; ``hardware``: what counts its cycles and instructions (the
    run's own, HardwareCounters(), by default)."""
    side = Side("server", pid, cpus or [], ask_own=own is not None, hardware=hardware)
    collector = Collector([side], roots=roots or Roots(), syscalls=True)
    collector.mark("measure", time.monotonic_ns())
    load()
    collector.mark("cooldown", time.monotonic_ns())
    if own is not None:
        collector.take_server_lines(own)
    result = collector.result()
    collector.close()
    out: dict[str, Any] = result["server"]
    return out


def test_a_child_making_n_system_calls_counts_n(child: Any) -> None:
    """The kernel's count (raw_syscalls:sys_enter, opt-in) of exactly 20,000 getppid calls, and the few the
    child's wait for "go" and its "done" take; a process not a demux-server has no count of its own."""
    c = child("syscalls", "20000")
    costs = measure(c.proc.pid, c.go)
    assert costs["syscalls_kernel_source"].startswith("kernel: perf counter on the raw_syscalls:sys_enter")
    assert 20_000 <= costs["syscalls_kernel"] <= 20_100, costs["syscalls_kernel"]
    assert sum(t["syscalls_kernel"] for t in costs["threads"]) == costs["syscalls_kernel"]
    assert (
        costs["syscalls"]
        == UNAVAILABLE + "the server did not report its system calls at both phase boundaries"
    )


def test_the_server_s_own_count_is_the_record_s_system_calls_over_its_own_interval(child: Any) -> None:
    """A demux-server's reports (its SIGUSR1 lines, CONTRACTS.md §1) make ``syscalls``: the total's delta,
    each live thread's by tid (a thread new in the phase from 0, one absent at an end unknown), and the
    interval between the two reports, over which run_costs counts the messages."""
    c = child("sleeps", "5")
    pid = c.proc.pid
    lines = [
        {"event": "syscalls", "t_ns": 1_000_000_000, "threads": [{"tid": pid, "syscalls": 10}], "total": 500},
        {
            "event": "syscalls",
            "t_ns": 3_000_000_000,
            "threads": [{"tid": pid, "syscalls": 40}],
            "total": 60_500,
        },
    ]
    costs = measure(pid, c.go, own=lines)
    assert costs["syscalls"] == 60_000 and costs["syscalls_interval_s"] == 2.0
    assert costs["syscalls_source"].startswith("demux-server's own count")
    assert [t["syscalls"] for t in costs["threads"] if t["tid"] == pid] == [30]
    assert isinstance(costs["syscalls_kernel"], int)  # the opt-in count beside it
    rows = {r.metric: r for r in run_costs({"server": costs}, 10_000.0)}
    assert rows["syscalls"].per_message == pytest.approx(60_000 / (10_000.0 * 2.0))
    # One report only (the server died, or is an older binary): unavailable, with the reason.
    one = measure(pid, c.go, own=lines[:1])
    assert one["syscalls"].startswith(UNAVAILABLE + "the server did not report")
    assert one["syscalls_interval_s"] is None


def test_n_sleeps_are_n_voluntary_context_switches(child: Any) -> None:
    c = child("sleeps", "200")
    costs = measure(c.proc.pid, c.go)
    assert 200 <= costs["context_switches"]["voluntary"] <= 220
    assert costs["threads"][0]["voluntary"] == costs["context_switches"]["voluntary"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a migration needs two CPUs")
def test_a_child_moved_between_cpus_migrates(child: Any) -> None:
    c = child("migrate", "40")
    costs = measure(c.proc.pid, c.go)
    assert costs["migrations"] >= 39  # every move to the other CPU is one (the first may not be)


def test_a_spin_on_one_cpu_is_its_user_time(child: Any) -> None:
    cpu = sorted(os.sched_getaffinity(0))[0]
    c = child("spin", "300", str(cpu))
    costs = measure(c.proc.pid, c.go, cpus=[cpu])
    assert costs["cpus"] == [cpu]
    assert 0.25 <= costs["process_cpu_s"]["user"] + costs["process_cpu_s"]["sys"] <= 0.40
    # The CPU's own user time holds the spin, and whatever else ran there meanwhile (ticks of 10 ms); a spin
    # under `nice` (a test run niced beside other work) is booked as the CPU's nice time instead.
    cpu_time = costs["cpu_time_s"]
    assert cpu_time["user"] + cpu_time["nice"] + cpu_time["system"] >= 0.25
    per = {c.metric: c for c in run_costs({"server": costs}, 1000.0)}
    assert per["cpu_user_s"].per_message == pytest.approx(
        costs["process_cpu_s"]["user"] / (1000.0 * costs["interval_s"]) * 1e6
    )


def test_tcp_resets_and_refused_connects_in_this_namespace() -> None:
    """30 connections closed with a reset (SO_LINGER 0) and 20 connects to a closed port: the namespace's
    OutRsts and AttemptFails grow by at least that (other traffic of the namespace only adds)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # bound, never listening: connects are refused

    def load() -> None:
        with socket.socket() as srv:
            srv.bind(("127.0.0.1", 0))
            srv.listen(64)
            for _ in range(30):
                cli = socket.create_connection(srv.getsockname())
                conn, _ = srv.accept()
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                conn.close()
                cli.close()
        for _ in range(20):
            with socket.socket() as s, pytest.raises(ConnectionRefusedError):
                s.connect(("127.0.0.1", closed_port))

    costs = measure(os.getpid(), load)
    assert costs["tcp"]["OutRsts"] >= 30 + 20 and costs["tcp"]["AttemptFails"] >= 20
    assert costs["netns"].startswith("net:[")


def _fake_sys(root: Path, governor: str, khz: int, energy: int) -> None:
    for cpu in (0, 1):
        d = root / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq"
        d.mkdir(parents=True, exist_ok=True)
        (d / "scaling_governor").write_text(governor + "\n")
        (d / "scaling_cur_freq").write_text(f"{khz}\n")
    pstate = root / "devices" / "system" / "cpu" / "intel_pstate"
    pstate.mkdir(parents=True, exist_ok=True)
    (pstate / "no_turbo").write_text("1\n")
    pkg = root / "class" / "powercap" / "intel-rapl:0"
    sub = pkg / "intel-rapl:0:0"
    sub.mkdir(parents=True, exist_ok=True)
    (pkg / "name").write_text("package-0\n")
    (pkg / "energy_uj").write_text(f"{energy}\n")
    (pkg / "max_energy_range_uj").write_text("1000000\n")
    (sub / "name").write_text("core\n")
    (sub / "energy_uj").write_text(f"{energy // 2}\n")
    (sub / "max_energy_range_uj").write_text("1000000\n")


def test_a_powersave_governor_and_a_moving_frequency_read_from_sysfs_fail_their_checks(
    tmp_path: Path, child: Any
) -> None:
    """The reading code on a fake sysfs (DEMUXLAB_SYS_ROOT), the verdicts validity's own: the governor read
    at the phase's end, the frequency at both ends, RAPL's package energy across its wrap-around."""
    _fake_sys(tmp_path, "powersave", 3_000_000, 900_000)
    c = child("sleeps", "10")

    def load() -> None:
        c.go()
        _fake_sys(tmp_path, "powersave", 2_200_000, 100_000)  # wrapped: 900,000 → 1,000,000 → 100,000

    costs = measure(c.proc.pid, load, cpus=[0, 1], roots=Roots(sys=tmp_path))
    assert costs["governor"] == "powersave" and costs["turbo"] is False
    assert costs["frequency_khz"] == {
        "start": {"0": 3_000_000, "1": 3_000_000},
        "end": {"0": 2_200_000, "1": 2_200_000},
    }
    assert costs["energy_uj"]["intel-rapl:0:package-0"] == 200_000
    record = {"hosts": {}, "pinning": {"same_host": True}, "costs": {"server": costs}}
    assert governor(record).verdict == CHECK_FAIL and "powersave" in governor(record).reason
    assert frequency(record).verdict == CHECK_FAIL
    energy = {c.metric: c for c in run_costs({"server": costs}, 1000.0)}["energy_uj"]
    assert energy.value == 200_000  # the package only: its subzone is part of it
    # No tracefs under a fake root: the kernel's count of system calls is unavailable, with the reason.
    assert costs["syscalls_kernel"].startswith(UNAVAILABLE + "no tracefs")


def test_absent_counters_are_unavailable_with_the_reason_never_zero(tmp_path: Path, child: Any) -> None:
    """A host without cpufreq, intel_pstate, boost, SMT control or RAPL (an empty sysfs here; on this VM the
    real one lacks cpufreq and RAPL too) says so per value."""
    c = child("sleeps", "5")
    costs = measure(c.proc.pid, c.go, cpus=[0], roots=Roots(sys=tmp_path))
    for key in ("frequency_khz", "governor", "turbo", "smt", "energy_uj", "syscalls", "syscalls_kernel"):
        assert isinstance(costs[key], str) and costs[key].startswith(UNAVAILABLE), (key, costs[key])
    assert "cpufreq absent" in costs["frequency_khz"] and "no RAPL zone" in costs["energy_uj"]
    rows = {r.metric: r for r in run_costs({"server": costs}, 100.0)}
    assert rows["energy_uj"].value is None and rows["energy_uj"].unavailable == costs["energy_uj"]
    assert rows["syscalls"].per_message is None
    if not Path("/sys/class/powercap").exists():  # this host: the real sysfs says the same
        real = measure(c.proc.pid, c.go, cpus=[0])
        assert real["energy_uj"].startswith(UNAVAILABLE + "no RAPL zone under /sys/class/powercap")


def test_a_side_this_host_cannot_see_is_unavailable_as_a_whole() -> None:
    side = Side("client", None, [1], "the remote launcher runs the client where this host cannot read it")
    assert side_costs(side, Roots()) == (
        "unavailable: the remote launcher runs the client where this host cannot read it"
    )
    rows = run_costs({"client": side_costs(side, Roots())}, 1000.0)
    assert rows and all(r.value is None and r.unavailable for r in rows)
    no_end = Side("server", os.getpid(), [0])
    no_end.snaps.append(no_end.snapshot(Roots()))
    assert "start and end were not both seen" in str(side_costs(no_end, Roots()))


def test_a_client_that_exited_before_the_end_reading_is_said_to_have_exited() -> None:
    """With no cooldown the client exits the moment the measure phase ends, often before the end reading:
    a zombie keeps /proc/PID/stat (its CPU times still read) but not its network namespace. The TCP
    counters' reason says the client had exited (the Run page's why panel read "/proc/8592/net/snmp
    absent"), not that a file is missing."""
    side = Side("client", None, [0])
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE)
    try:
        side.pid = proc.pid
        alive = side.snapshot(Roots())
        assert isinstance(alive.tcp, dict)
        assert proc.stdin is not None
        proc.stdin.close()  # it exits; not waited for, it stays a zombie
        stat = Path(f"/proc/{proc.pid}/stat")
        for _ in range(500):
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.01)
        else:
            pytest.fail("the child did not exit")
        gone = side.snapshot(Roots())
        assert isinstance(gone.tcp, str) and gone.tcp.startswith(UNAVAILABLE)
        assert f"the client had exited before this reading (pid {proc.pid})" in gone.tcp
        assert gone.process is not None  # its CPU times still read
        side.snaps = [alive, gone]
        assert side_costs(side, Roots())["tcp"] == gone.tcp  # type: ignore[index]
    finally:
        proc.wait()


def _snapshot(t_ns: int, threads: dict[int, dict[str, Any]]) -> Snapshot:
    return Snapshot(
        t_ns, (0, 0, len(threads)), threads, {}, {}, None, "unavailable: -", "-", "unavailable: -"
    )


def test_a_container_s_threads_are_matched_to_their_own_counts_by_their_namespace_s_ids(
    tmp_path: Path,
) -> None:
    """In a container the binaries report their counts by the thread ids of its PID namespace (gettid: 1,
    7, ...), the host's /proc lists the host's (15541, 15558): each thread's NSpid joins the two, so the
    docker launcher's records have each thread's system calls, not null (as they had)."""
    task = tmp_path / "15558"
    task.mkdir()
    (task / "status").write_text("Name:\tdemux-server\nNSpid:\t15558\t7\nvoluntary_ctxt_switches:\t3\n")
    (task / "comm").write_text("demux-server\n")
    row = read_thread(task)
    assert row is not None and row["ns_tid"] == 7
    here = read_thread(Path(f"/proc/{os.getpid()}/task/{os.getpid()}"))
    assert here is not None and here["ns_tid"] == os.getpid()  # this namespace: the host's own id

    def thread(ns_tid: int, voluntary: int) -> dict[str, Any]:
        return {"comm": "demux-server", "cpus": "0", "voluntary": voluntary, "involuntary": 0,
                "migrations": 0, "run_ns": 0, "wait_ns": 0, "ns_tid": ns_tid}  # fmt: skip

    side = Side("server", 15541, [0], ask_own=True)
    side.snaps = [
        _snapshot(0, {15541: thread(1, 0), 15558: thread(7, 0)}),
        _snapshot(2_000_000_000, {15541: thread(1, 1), 15558: thread(7, 60_000)}),
    ]
    side.own = [
        {"t_ns": 0, "threads": {1: 5, 7: 100}, "total": 105},
        {"t_ns": 2_000_000_000, "threads": {1: 6, 7: 60_528}, "total": 60_534},
    ]
    costs = side_costs(side, Roots(proc=tmp_path))
    assert isinstance(costs, dict)
    assert {t["tid"]: t["syscalls"] for t in costs["threads"]} == {15541: 1, 15558: 60_428}
    assert costs["syscalls"] == 60_429


def test_a_refused_perf_counter_is_unavailable_with_the_reason(tmp_path: Path) -> None:
    counters = SyscallCounters(Roots(sys=tmp_path))
    counters.open([os.getpid()])
    assert counters.problem is not None and counters.problem.startswith(UNAVAILABLE) and counters.fds == {}


#: A PMU-less host's answer (this VM: no core PMU, /sys/bus/event_source/devices has no cpu).
NO_PMU = UNAVAILABLE + "no hardware performance counters (perf_event_open: No such file or directory)"
#: The kernel's software clocks (PERF_TYPE_SOFTWARE: PERF_COUNT_SW_TASK_CLOCK, _CPU_CLOCK), in ns, under the
#: record's keys: what HardwareCounters does with a count, on any host.
SOFTWARE = {"cycles": (1, 1), "instructions": (1, 0)}


def _has_core_pmu() -> bool:
    devices = Path("/sys/bus/event_source/devices")
    return platform.machine() != "x86_64" or any(devices.glob("cpu*"))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_this_host_s_cycles_and_instructions_or_the_kernel_s_reason(child: Any) -> None:
    """A run's own hardware counters on a child's spin: where the host has a PMU, counts that grow with the
    spin (300 ms of it against 100 ms); where it has none (this VM), both unavailable with what
    perf_event_open said (ENOENT), never a zero; and run_costs carries the reason through."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    short, long = child("spin", "100", str(cpu)), child("spin", "300", str(cpu))
    a, b = measure(short.proc.pid, short.go), measure(long.proc.pid, long.go)
    rows = {r.metric: r for r in run_costs({"server": b}, 1000.0)}
    for key in ("cycles", "instructions"):
        if isinstance(b[key], str):
            assert a[key] == b[key]
            assert re.fullmatch(
                UNAVAILABLE + r"(no hardware performance counters|hardware counters not permitted|hardware "
                r"counters refused) \(perf_event_open(: | refused \().+\)",
                b[key],
            ), b[key]
            assert rows[key].value is None and rows[key].unavailable == b[key]
        else:
            assert isinstance(a[key], int) and a[key] > 0 and 1.5 * a[key] < b[key], (a[key], b[key])
            assert rows[key].per_message == pytest.approx(b[key] / (1000.0 * b["interval_s"]))
    if not _has_core_pmu():  # this VM: the kernel has no PMU to count with
        assert b["cycles"] == b["instructions"] == NO_PMU


def test_hardware_counters_are_each_thread_s_count_summed_over_the_side(child: Any) -> None:
    """HardwareCounters' open, read and sum through the kernel's software clocks (task-clock, cpu-clock: ns
    on a CPU) under the record's keys: a 200 ms spin is ~0.2e9 ns in both; a thread that ended within the
    phase keeps its count; every counter is closed after the end reading."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    c = child("spin", "200", str(cpu))
    before = _fds()
    counters = HardwareCounters(SOFTWARE)
    costs = measure(c.proc.pid, c.go, hardware=counters)
    assert 0.18e9 <= costs["cycles"] <= 0.6e9 and 0.18e9 <= costs["instructions"] <= 0.6e9, costs
    assert counters.fds == {"cycles": {}, "instructions": {}} and _fds() == before
    rows = {r.metric: r for r in run_costs({"server": costs}, 1000.0)}
    assert rows["cycles"].per_message == pytest.approx(costs["cycles"] / (1000.0 * costs["interval_s"]))
    assert rows["cycles"].unavailable is None


def test_a_thread_started_within_the_phase_or_a_starved_counter_is_unavailable(tmp_path: Path) -> None:
    """A side's sums are unavailable, naming the threads, where one started after the counters were opened;
    a count the PMU shared out is scaled by its enabled over its running time (as perf stat does), and one
    that never ran on it is unavailable, not 0."""
    counters = HardwareCounters(SOFTWARE)

    def thread() -> dict[str, Any]:
        return {"comm": "demux-server", "cpus": "0", "voluntary": 0, "involuntary": 0, "migrations": 0,
                "run_ns": 0, "wait_ns": 0}  # fmt: skip

    side = Side("server", 15541, [0], hardware=counters)
    side.snaps = [_snapshot(0, {15541: thread()}), _snapshot(10**9, {15541: thread(), 15560: thread()})]
    side.hardware_counts = {"cycles": {15541: 5_000}, "instructions": {15541: 7_000}}
    costs = side_costs(side, Roots(proc=tmp_path))
    assert isinstance(costs, dict)
    assert costs["cycles"] == UNAVAILABLE + "threads [15560] started after the hardware counters were opened"
    side.snaps[1].threads.pop(15560)
    costs = side_costs(side, Roots(proc=tmp_path))
    assert isinstance(costs, dict) and (costs["cycles"], costs["instructions"]) == (5_000, 7_000)
    # What read() makes of the kernel's {value, time enabled, time running}: pipes in for counters' fds.
    pipes = [os.pipe() for _ in range(3)]
    for (_, w), reading in zip(pipes, [(1_000, 200, 100), (10, 50, 50), (0, 80, 0)], strict=True):
        os.write(w, struct.pack("QQQ", *reading))
        os.close(w)
    counters.fds = {"cycles": {1: pipes[0][0], 2: pipes[1][0]}, "instructions": {1: pipes[2][0]}}
    read = counters.read()
    counters.close()
    assert read["cycles"] == {1: 2_000, 2: 10}  # multiplexed half the time: scaled
    assert read["instructions"] == UNAVAILABLE + (
        "the instructions counters of threads [1] never got onto the PMU (taken by others)"
    )


def test_a_refused_hardware_counter_says_what_the_kernel_said_and_closes_the_rest() -> None:
    """No such PMU (a type the kernel does not know: ENOENT, as on a VM without one): the reason in the
    kernel's words, and the counter already opened on the thread (its first event) closed; a permission's
    reason names perf_event_paranoid."""
    before = _fds()
    counters = HardwareCounters({"cycles": (1, 1), "instructions": (0x7FFF_FFF0, 0)})
    counters.open([os.getpid()])
    assert counters.problem == NO_PMU
    assert counters.fds == {"cycles": {}, "instructions": {}} and _fds() == before
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    assert hardware_refusal(errno.EACCES) == UNAVAILABLE + (
        f"hardware counters not permitted (perf_event_open refused (Permission denied; "
        f"kernel.perf_event_paranoid {paranoid}))"
    )
    assert hardware_refusal(errno.EOPNOTSUPP) == UNAVAILABLE + (
        "no hardware performance counters (perf_event_open: Operation not supported)"
    )
    # A side no counters were opened on (built by hand): unavailable, never 0.
    side = Side("server", os.getpid(), [0])
    side.snaps = [side.snapshot(Roots()), side.snapshot(Roots())]
    costs = side_costs(side, Roots())
    assert isinstance(costs, dict) and str(costs["cycles"]).startswith(UNAVAILABLE + "no hardware counters")

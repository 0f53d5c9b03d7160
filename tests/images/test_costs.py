"""A run's costs in the kernel's terms against what the pattern's code says (issue 44), through the native
launcher with the real binaries: one connection, closed loop, so every message is one round of the loop.

The reactor over edge-triggered epoll makes three system calls per message (epoll_wait, the recvmsg that
TCP_INQ says drained the socket, send) and blocks once per message (a voluntary switch: the next message
needs the client's turn); over level-triggered epoll a fourth, the re-activation (epoll_ctl MOD: seed 000's
cost). The client makes three (epoll_wait, recv, send). Each side's cycles and instructions are counts where
the host has a PMU, else the kernel's reason (this VM's: none). A collection turned off leaves no ``costs``.

The record's system calls are the binaries' own counts (images/common/sysc.h), so every pattern's count per
message is what its code says, for every notifier (:data:`CALLS`); where its threads do not hand work over
it is the kernel's count too (the opt-in tracepoint, ``count_syscalls``), within the few calls the two
readings' instants apart make. Counts, not times: one connection in a closed loop makes each message one
round of the server's loop however busy the host is."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import pytest

from demuxlab.costs import run_costs
from demuxlab.launch import RunRequest
from demuxlab.launch.native import NativeLauncher
from demuxlab.phases import Phases
from demuxlab.plan import Pinning
from demuxlab.point import Point
from demuxlab.topology import collect_facts
from demuxlab.validity import run_checks
from helpers.server import build_target

NO_PMU = "unavailable: no hardware performance counters (perf_event_open: No such file or directory)"


@pytest.fixture(scope="module")
def binaries() -> None:
    build_target("../build/bin/demux-server")
    build_target("../build/bin/demux-client")


def run(
    notifier: str,
    *,
    collect: bool = True,
    cpus: tuple[tuple[int, ...], tuple[int, ...]] = ((0,), (1,)),
    pattern: str = "reactor",
    threads: int = 1,
    kernel: bool = False,
) -> dict[str, Any]:
    facts = collect_facts()
    req = RunRequest(
        run_id="00000000-0000-4000-8000-00000000c057",
        experiment={"name": "costs-test", "spec_sha256": "0" * 64, "git_rev": None, "spec_path": None},
        point=Point(pattern, notifier, threads, 0.0, 1, 1, 1, None, False),
        repeat=0,
        phases=Phases(warmup_s=0.3, measure_s=2.0, cooldown_s=0.2),
        pinning=Pinning(cpus[0], cpus[1], False, True, ()),
        hosts={"server": facts, "client": facts},
        collect_costs=collect,
        count_syscalls=kernel,
    )
    record = NativeLauncher().run(req)
    assert record["status"] == "ok", record["failure_reason"]
    return record


def per_message(record: dict[str, Any]) -> dict[tuple[str, str], float | None]:
    return {
        (c.side, c.metric): c.per_message
        for c in run_costs(record["costs"], record["stats"]["throughput_msgs_per_s"])
    }


def test_edge_triggered_reactor_makes_three_system_calls_and_one_sleep_per_message(binaries: None) -> None:
    record = run("epoll-et")
    costs = record["costs"]
    assert costs["phases"] == ["measure", "cooldown"] and costs["same_netns"] is True
    per = per_message(record)
    assert 2.85 <= per["server", "syscalls"] <= 3.15, per["server", "syscalls"]  # type: ignore[operator]
    assert 2.85 <= per["client", "syscalls"] <= 3.15, per["client", "syscalls"]  # type: ignore[operator]
    # Blocks once per message, except where a preemption let the next message arrive first.
    assert 0.5 <= per["server", "ctx_voluntary"] <= 1.05  # type: ignore[operator]
    server = costs["server"]
    assert [t["comm"] for t in server["threads"]] == ["demux-server", "demux-server"]  # main and reactor
    busy = max(server["threads"], key=lambda t: t["syscalls"])
    assert busy["cpus"] == "0" and busy["syscalls"] == server["syscalls"] - min(
        t["syscalls"] for t in server["threads"]
    )
    # The boundaries are read within a fraction of the phase of the client's own stamps.
    assert all(0 <= lag < 0.5 for lag in server["lag_s"])
    assert server["interval_s"] == pytest.approx(2.0, abs=0.5)
    # The CPU's cycles and instructions on each side's threads: counts (a message's three system calls are
    # thousands of each) where the host has a PMU; else the kernel's reason (this VM: ENOENT), never a 0.
    no_pmu = platform.machine() == "x86_64" and not any(Path("/sys/bus/event_source/devices").glob("cpu*"))
    for side in ("server", "client"):
        for key in ("cycles", "instructions"):
            value = costs[side][key]
            if no_pmu:
                assert value == NO_PMU, (side, key, value)
            elif isinstance(value, str):
                assert value.startswith("unavailable: ") and "perf_event_open" in value, value
            else:
                each = per[side, key]
                assert each is not None and each > 1_000, (side, key, each)


def test_level_triggered_reactor_pays_one_more_call_per_message_the_re_activation(binaries: None) -> None:
    per = per_message(run("epoll-lt"))
    assert 3.85 <= per["server", "syscalls"] <= 4.15, per["server", "syscalls"]  # type: ignore[operator]


# (pattern, notifier, threads): the server's system calls per message, one connection, closed loop.
CALLS: dict[tuple[str, str, int], float] = {
    ("reactor", "select", 1): 3,  # select, recv, send (a re-arm is a bit in the set: no call)
    ("reactor", "poll", 1): 3,  # poll, recv, send
    ("reactor", "epoll-lt", 1): 4,  # epoll_wait, recv, send, epoll_ctl MOD
    ("reactor", "epoll-et", 1): 3,  # epoll_wait, recvmsg (TCP_INQ: drained), send
    ("reactor", "uring", 1): 4,  # the poll's re-arm submitted, the wait for its completion, recv, send
    ("multireactor", "epoll-et", 1): 3,  # the reactor's, in each of its reactors
    ("uring", "uring", 1): 2,  # one io_uring_enter submits the send and waits; the receive's re-arm
    ("tpc", "none", 1): 2,  # a blocking recv and a send
    # Hand-offs: the dispatcher's futex wake of the sleeping handler and the handler's wait count one each;
    # the queue lock's own futexes are the library's (not counted, sysc.h).
    ("hsha", "epoll-lt", 2): 6,  # the reactor's 4 (the monitor's wait, MOD; the handler's recv, send) + 2
    ("proactor", "epoll-et", 2): 5,  # epoll-et's 3 + the wake and the wait
    ("lf", "epoll-lt", 2): 6,  # epoll-lt's 4 + the promotion's wake of the follower and its wait
}


@pytest.mark.parametrize("key", list(CALLS), ids=["/".join(map(str, k)) for k in CALLS])
def test_each_pattern_makes_the_system_calls_per_message_its_code_says(
    binaries: None, key: tuple[str, str, int]
) -> None:
    pattern, notifier, threads = key
    record = run(notifier, pattern=pattern, threads=threads)
    per = per_message(record)
    server, want = per["server", "syscalls"], CALLS[key]
    assert server is not None and want - 0.1 <= server <= want + 0.1, (key, server)
    assert 2.9 <= per["client", "syscalls"] <= 3.1, per["client", "syscalls"]  # type: ignore[operator]
    costs = record["costs"]["server"]
    assert costs["syscalls_source"].startswith("demux-server's own count")
    assert "syscalls_kernel" not in costs  # the tracepoint is opt-in
    # The exit JSON counts the whole run, per thread: at least the measure phase's.
    exit_json = record["server"]
    assert exit_json["syscalls"] >= costs["syscalls"]
    assert sum(t["syscalls"] for t in exit_json["threads_detail"]) <= exit_json["syscalls"]


@pytest.mark.parametrize(
    "key",
    [
        ("reactor", "select", 1),
        ("reactor", "poll", 1),
        ("reactor", "epoll-et", 1),
        ("uring", "uring", 1),
        ("tpc", "none", 1),
    ],
    ids=lambda k: "/".join(map(str, k)),
)
def test_the_server_s_own_count_agrees_with_the_kernel_s(binaries: None, key: tuple[str, str, int]) -> None:
    """Patterns that hand nothing over between threads make no system call the code does not name: the
    server's count and the kernel's (the tracepoint) agree within 2 % over the measure phase, the two
    readings' instants apart (a signal's delivery, a perf counter's read) at tens of thousands of calls a
    second. Per side, and for the client too."""
    pattern, notifier, threads = key
    record = run(notifier, pattern=pattern, threads=threads, kernel=True)
    for side in ("server", "client"):
        costs = record["costs"][side]
        own, kernel = costs["syscalls"], costs["syscalls_kernel"]
        assert isinstance(own, int) and isinstance(kernel, int), (own, kernel)
        assert kernel > 10_000 and abs(own - kernel) <= 0.02 * kernel, (side, own, kernel)


def test_a_client_on_the_server_s_cpu_is_flagged_and_collection_off_leaves_no_costs(binaries: None) -> None:
    record = run("epoll-et", cpus=((0,), (0,)))
    core = {c.check: c for c in run_checks(record)}["placement.core"]
    assert core.verdict == "fail" and "0/0" in core.reason
    assert "costs" not in run("epoll-et", collect=False)


def test_no_client_phase_events_without_collection(binaries: None, tmp_path: Path) -> None:
    """The client's command line gets --phase-events only when the counters are read."""
    launcher = NativeLauncher()
    base = dict(
        run_id="x",
        experiment={"name": "t"},
        point=Point("reactor", "epoll-et", 1, 0.0, 1, 1, 1, None, False),
        repeat=0,
        phases=Phases(0.1, 1.0, 0.0),
        pinning=Pinning((0,), (1,), False, True, ()),
        hosts={},
    )
    assert "--phase-events" in launcher.client_args(RunRequest(**base), 1)  # type: ignore[arg-type]
    assert "--phase-events" not in launcher.client_args(RunRequest(**base, collect_costs=False), 1)  # type: ignore[arg-type]

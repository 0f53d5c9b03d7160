"""Emulated work is CPU time (issue 48, item 1): each message gets --work-us of its thread's CPU whatever
the scheduler does (images/common/util.c, spin_cpu_us), in every pattern.

Beside it on the server's CPU run threads that wake often (busy 100 us, asleep 100 us: the way the other
threads of an oversubscribed server, or a busy host's daemons, behave). They preempt the spinning thread
again and again; a spin to a wall-clock deadline, as before, then ended with a fraction of its work done
(0.67-0.80 x W per message measured on a quiet machine, less on a busy one). The check reads the server's
own threads' CPU time from its exit JSON, so how busy the machine is does not enter it: the server gets
less CPU per second on a busier machine, never less per message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.server import Server, connect, recv_exact

W_US = 2000
# (pattern, notifier, threads): every pattern, the notifier its work path does not depend on.
CASES = [
    ("reactor", "epoll-et", 1),
    ("hsha", "epoll-lt", 2),
    ("lf", "epoll-et", 2),
    ("proactor", "poll", 2),
    ("multireactor", "epoll-lt", 1),
    ("tpc", "none", 1),
    ("uring", "uring", 1),
    ("uring-shared", "uring", 1),
]
CONNECTIONS = 2
ROUNDS = 12
WAKERS = 4
WAKER = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
pc, nap = time.perf_counter, 100e-6
while True:
    end = pc() + 100e-6
    while pc() < end:
        pass
    time.sleep(nap)
"""


@pytest.fixture
def server_cpu() -> int:
    return max(os.sched_getaffinity(0))


@pytest.fixture
def wakers(server_cpu: int) -> Iterator[None]:
    procs = [subprocess.Popen([sys.executable, "-c", WAKER, str(server_cpu)]) for _ in range(WAKERS)]
    try:
        yield
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()


@pytest.mark.parametrize(("pattern", "notifier", "threads"), CASES)
def test_each_message_gets_its_work_in_cpu_time(
    run_server: Any, server_cpu: int, wakers: None, pattern: str, notifier: str, threads: int
) -> None:
    srv: Server = run_server(
        [
            "--pattern",
            pattern,
            "--notifier",
            notifier,
            "--threads",
            str(threads),
            "--msg-size",
            "16",
            "--work-us",
            str(W_US),
            "--cpus",
            str(server_cpu),
        ]
    )
    socks = [connect(srv.port, timeout=60) for _ in range(CONNECTIONS)]
    try:
        for r in range(ROUNDS):
            for i, s in enumerate(socks):
                s.sendall(f"m{r:07d}c{i:07d}".encode())
            for i, s in enumerate(socks):
                assert recv_exact(s, 16) == f"m{r:07d}c{i:07d}".encode()
    finally:
        for s in socks:
            s.close()
    out = srv.stop()
    assert out.rc == 0, out.stderr[-2000:]
    data = out.json
    assert data is not None
    assert data["messages"] == CONNECTIONS * ROUNDS
    assert data["work_clock"] == "on_cpu"
    cpu = sum(t["cpu_s"]["user"] + t["cpu_s"]["sys"] for t in data["threads_detail"])
    per_message_us = cpu / data["messages"] * 1e6
    assert per_message_us >= 0.97 * W_US, (per_message_us, data["threads_detail"])

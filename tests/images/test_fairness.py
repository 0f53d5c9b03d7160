"""The fairness rules of the readiness patterns (images/README.md, "Fairness rules"; issue 48, item 5),
checked on the running server through its per-thread operation counts (`op_counts`, --instrument).

- The proactor stays a proactor under every notifier: its demultiplexer does every read, its handlers
  none. Before, under epoll-et a handler that held a connection read and served the messages that came
  meanwhile itself (HSHA in effect); pipelined messages show it.
- LF books its followers' wait for leadership as `idle`, as HSHA books its workers' wait for the queue
  (before: `lock`); `lock` is contention for the mutex alone.
- The dispatcher's wake-up policy is one rule (`--wake batch`), the deviation a named option, and the run
  records which (`wake`)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from helpers.server import Server, connect, recv_exact

NOTIFIERS = ("select", "poll", "epoll-lt", "epoll-et", "uring")
MSG = 512
PIPELINED = 16


def pipelined(port: int, connections: int = 4, rounds: int = 4) -> int:
    """Each round sends PIPELINED messages back to back on every connection before reading any echo, so
    a connection's next messages are in its socket while a handler works on the first."""
    socks = [connect(port) for _ in range(connections)]
    try:
        for _ in range(rounds):
            payloads = [[os.urandom(MSG) for _ in range(PIPELINED)] for _ in socks]
            for s, ps in zip(socks, payloads, strict=True):
                s.sendall(b"".join(ps))
            for s, ps in zip(socks, payloads, strict=True):
                assert recv_exact(s, MSG * PIPELINED) == b"".join(ps)
    finally:
        for s in socks:
            s.close()
    return connections * rounds * PIPELINED


@pytest.mark.parametrize("notifier", NOTIFIERS)
def test_the_proactor_demultiplexer_does_every_read(run_server: Any, notifier: str) -> None:
    srv: Server = run_server(
        [
            *("--pattern", "proactor", "--notifier", notifier, "--threads", "3", "--msg-size", str(MSG)),
            *("--work-us", "50", "--instrument"),
        ]
    )
    sent = pipelined(srv.port)
    out = srv.stop()
    assert out.rc == 0, out.stderr[-2000:]
    data = out.json
    assert data is not None and data["messages"] == sent
    threads = data["threads_detail"]
    demux = [t for t in threads if t["role"] == "demultiplexer"]
    handlers = [t for t in threads if t["role"] == "handler"]
    assert len(demux) == 1 and len(handlers) == 2
    assert demux[0]["op_counts"]["recv"] >= sent
    assert all("recv" not in t["op_counts"] for t in handlers), [t["op_counts"] for t in handlers]
    # ...and the handlers send every echo, the demultiplexer none.
    assert sum(t["op_counts"].get("send", 0) for t in handlers) >= sent
    assert "send" not in demux[0]["op_counts"]


@pytest.mark.parametrize("notifier", ["poll", "epoll-et"])
def test_lf_followers_wait_as_idle(run_server: Any, notifier: str) -> None:
    """Three LF threads and one connection: while one thread processes a message, the next leader waits
    in the notifier, so the first finds leadership taken when it comes back and waits for it. Each of those
    waits is an `idle` op without a notifier call of its own, so `idle` counts more than the blocked
    notifier waits; before, the waits were `lock` ops and `idle` counted the blocked notifier waits
    exactly."""
    srv: Server = run_server(
        ["--pattern", "lf", "--notifier", notifier, "--threads", "3", "--msg-size", str(MSG), "--instrument"]
    )
    sent = pipelined(srv.port, connections=1, rounds=8)
    out = srv.stop()
    data = out.json
    assert data is not None and data["messages"] == sent
    ops = data["ops"]
    blocked = data["events_per_call"]["calls"] - ops.get("notify", {"count": 0})["count"]
    assert ops["idle"]["count"] > blocked


@pytest.mark.parametrize(
    ("pattern", "threads", "flag", "recorded"),
    [
        ("hsha", 2, [], "batch"),
        ("hsha", 2, ["--wake", "put"], "put"),
        ("proactor", 2, [], "batch"),
        ("proactor", 2, ["--wake", "put"], "put"),
        ("proactor", 2, ["--wake", "batch"], "batch"),
        ("uring-shared", 3, [], "batch"),
        ("uring-shared", 3, ["--wake", "put"], "put"),
        ("reactor", 1, [], None),
        ("lf", 2, [], None),
    ],
)
def test_the_wake_up_policy_is_recorded(
    run_server: Any, pattern: str, threads: int, flag: list[str], recorded: str | None
) -> None:
    srv: Server = run_server(
        [
            "--pattern",
            pattern,
            "--notifier",
            "uring" if pattern == "uring-shared" else "epoll-lt",
            "--threads",
            str(threads),
            "--msg-size",
            str(MSG),
            *flag,
        ]
    )
    sent = pipelined(srv.port, connections=2, rounds=2)
    out = srv.stop()
    assert out.json is not None and out.json["messages"] == sent
    assert out.json["wake"] == recorded

"""Reactor CTMC (one thread demultiplexes and handles; also one reactor of a multi-reactor).

Written in the style of seed 001 §IV (populations, generating functions φ, jumps l) for the server's
``reactor.c``: the thread waits on the notifier, takes every descriptor one call returns into its cache
(at most ``CACHE_SIZE``, the server's 64), and handles them one by one: receive, work, send the response,
re-arm (select, poll, epoll-lt, uring; epoll-et has no re-arm: its rate is then instant and its one extra
receive that finds EAGAIN is in the per-message receive rate).

State (13 populations): connections c0 (the client has the response and is sending the next request), c1
(request arrived: ready for the notifier), c2 (returned by the last notifier call: cached), c3 (taken:
being handled); the thread a1 (waiting on the notifier; asleep while c1 = 0), a2 (taking the next cached
descriptor), a3 (receiving), a4 (working), a5 (sending), a6 (re-arming), a7 (the per-message CPU its timed
operations do not cover), tw (its send found the client asleep: waking it); zc (the client so woken, not
yet running). Initial state: c1 = connections, a1 = 1. Throughput = E[φ_send].

Transitions (rates per µs; the thread's are scaled by the processor-sharing pool ``server``):

===========  =========================================  ===========================  ===================
name         rate                                       jump                         fitted from
===========  =========================================  ===========================  ===================
notify       a1·H(c1) / (α + h/r_e), h = min(c1, 64)    c1 −h, c2 +h, a1 → a2        notify_by_events
take         r_t · a2 · H(c2)                           c2 → c3, a2 → a3             paper (10 ns)
recv         r_i · a3                                   a3 → a4                      recv / message
work         r_c · a4                                   a4 → a5                      input: 1/work
send         r_o · a5                                   c3 → c0, a5 → a6 (or tw)     send, less ω·sleeps
send_wake    r_s · tw                                   tw → a6                      wake-cost (ω)
rearm        r_a · a6                                   a6 → a7                      rearm
overhead     r_x · a7                                   a7 → a2 if c2 > 0, else a1   CPU − timed ops
client       r_z · min(c0, k_z) · (1 − S)               c0 → c1                      client CPU
client_wake  (1/r_z + 1/r_v)⁻¹ · min(c0, k_z) · S       c0 → c1                      wake-cost (ω)
client_up    r_u · zc                                   zc → 0                       client's sleeps
===========  =========================================  ===========================  ===================

α = 1/r_n, S = a1 · (1 − H(c1)) (the thread asleep in its notifier). Runnable threads (pool ``server``):
a1·H(c1) + a2 + … + a7 + tw: the thread sleeps only in the notifier with nothing ready. A request that finds
it asleep there wakes it and costs the client ω more (``client_wake``); a send that finds the client asleep
(c0 = 0 before it) goes to tw instead of a6, where the thread pays the client's wake-up ω, and the client
(zc = 1) sends nothing until it runs, after its latency 1/r_u (``client`` and ``client_wake`` carry a factor
1 − zc; parts.waking_client_steps, parts.sending_wakes, docs/ctmc-reference.md "The send that wakes the
client"): the instrumented runs' send costs 11–24 µs more per client sleep per message on the 2-core host
(docs/ctmc.md, "Generalisation"), so the send's measured cost holds its wake-ups at the calibration runs'
rate and r_o is fitted without them. With the paper's rates the client, the overhead, the wake-ups and the
latency are instant (1 ns).

The multi-reactor (``multireactor.py``) is T of these, each with its own connections: the chain of one of
them, the others in the pool's ``load``.
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    RA,
    RC,
    RI,
    RO,
    RT,
    RX,
    FloatArray,
    H,
    ModelStructure,
    Pool,
    mass,
    present,
    total,
)
from demuxlab.ctmc.parts import (
    CLIENT_WAKING,
    SERVER,
    WAKER,
    awake,
    cached,
    notifier_call,
    sending_wakes,
    step,
    waking_client_steps,
)
from demuxlab.ctmc.pattern import OpRole, PatternModel

SPECIES: tuple[str, ...] = (
    "c0",
    "c1",
    "c2",
    "c3",
    "a1",
    "a2",
    "a3",
    "a4",
    "a5",
    "a6",
    "a7",
    WAKER,
    CLIENT_WAKING,
)
C0, C1, C2, C3, A1, A2, A3, A4, A5, A6, A7, TW, ZC = range(13)


def notify_jump(x: FloatArray, d: FloatArray) -> None:
    h = min(x[C1], CACHE_SIZE)
    d[C1] = -h
    d[C2] = h
    d[A1] = -1.0
    d[A2] = 1.0


def send_jump(x: FloatArray, d: FloatArray) -> None:
    """The response to the client; the thread on to its re-arm (a6), or to wake the client (tw, the client
    waking: zc) where the client had no message (asleep; parts.sending_wakes)."""
    d[C3] = -1.0
    d[C0] = 1.0
    d[A5] = -1.0
    d[A6] = H(x[C0])
    d[TW] = 1.0 - H(x[C0])
    d[ZC] = 1.0 - H(x[C0])


def overhead_jump(x: FloatArray, d: FloatArray) -> None:
    d[A7] = -1.0
    # "a2 if c2 > 0, else a1", written with H so that it is also defined on the reals (as HSHA's l6).
    d[A2] = H(x[C2])
    d[A1] = 1.0 - H(x[C2])


STRUCTURE = ModelStructure(
    name="reactor",
    species=SPECIES,
    throughput="send",
    calls="notify",
    pools=(Pool(SERVER, total(awake(A1, C1), A2, A3, A4, A5, A6, A7, TW)),),
    transitions=(
        step(
            "notify",
            "waits on the notifier, caches what it returns",
            mass(notifier_call(cached(C1)), A1) * present(C1),
            notify_jump,
        ),
        step(
            "take",
            "takes the next cached descriptor",
            mass(RT, A2) * present(C2),
            {"c2": -1, "c3": 1, "a2": -1, "a3": 1},
        ),
        step("recv", "receives the request", mass(RI, A3), {"a3": -1, "a4": 1}),
        step("work", "works", mass(RC, A4), {"a4": -1, "a5": 1}),
        step("send", "sends the response", mass(RO, A5), send_jump),
        sending_wakes(SPECIES, "a6"),
        step("rearm", "re-arms the descriptor", mass(RA, A6), {"a6": -1, "a7": 1}),
        step("overhead", "untimed CPU per message", mass(RX, A7), overhead_jump),
        *waking_client_steps(SPECIES, "c1", A1, (C1,)),
    ),
)


def initial_state(threads: int, connections: int) -> FloatArray:
    """One reactor thread with ``connections`` connections (``threads`` must be 1: one reactor)."""
    return STRUCTURE.state(c1=connections, a1=1)


# The reactor's thread does every part of a message: it waits on the notifier, receives, works, sends and
# re-arms (calibrate.py reads its `reactor` thread so).
READINESS_OPS: tuple[tuple[str, str], ...] = (("recv", "r_i"), ("send", "r_o"), ("rearm", "r_a"))
ROLE = OpRole(("reactor",), READINESS_OPS, notifies=True, overhead="r_x", works=True)


def _initial(threads: int, connections: int, full: bool) -> FloatArray:
    return initial_state(1, connections)


MODEL = PatternModel("reactor", STRUCTURE, _initial, (ROLE,), one_thread=True)

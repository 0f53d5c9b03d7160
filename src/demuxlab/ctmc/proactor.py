"""Emulated Proactor CTMC (seed 003's TProactor, the server's ``proactor.c``), written as seed 001 §IV-B
writes HSHA, of which it is a variant: the demultiplexer does the receive itself and queues "read
completed" messages; T − 1 handlers work, send and re-arm.

State (31 populations): connections c0 (the client has it), c1 (ready), c2 (frozen batch of the pending
notifier call, then cached), c3 (read completed: queued or with a handler); demultiplexer m1 (acquires the
notifier lock, freezing the ready list), m2 (notifier call), m3 (releases the notifier lock), m4
(receives one cached message), m5 (acquires the queue lock), m6 (puts it), m7 (releases the queue lock);
queue places q1 (empty) q2 (busy); handlers t1 (idle: waiting for the queue), t2 (get, holding the queue
lock), t3 (releases the queue lock), t4 (work), t5 (send), t6 (acquire the notifier lock), t7 (re-arm),
t8 (release it), t9 (the per-message CPU the timed operations do not cover); the notifier lock s1 (free)
s2 (busy); the queue lock b1 (free) b2 (busy). Initial state: c1 = q1 = connections, m1 = 1, t1 = T − 1,
s1 = b1 = 1. Throughput = E[φ_send].

The notifier lock is seed 001's epoll lock (§II: epoll_wait and epoll_ctl share it); for select and poll it
is the interest-set lock the re-arm takes, and the notifier call's per-call cost α carries the wake-up of
a monitor blocked in it (a re-arm kicks its eventfd). epoll-et has no re-arm: r_a is instant.

==========  ========================================================  ============================
name        rate                                                      fitted from
==========  ========================================================  ============================
lock_wait   r_l·m1·s1·H(c1) / (m1 + t6) · H(m1 + t6)  (freezes h)     lock (median)
notify      m2·s2·H(c2) / (α + c2/r_e)                                notify_by_events, demux CPU
unlock_n    r_l · m3 · s2                                             lock
recv        r_i · m4 · H(c2)                 c2 → c3                  recv / message
lock_q      r_l·m5·b1 / (m5 + t1) · H(m5)                             lock
put         r_p · m6 · b2                    q1 → q2                  queue_put
unlock_q    r_l · m7 · b2                    → m4 if c2 > 0, else m1  lock
get_lock    r_l·t1·b1 / (m5 + t1) · H(q2)                             lock
get         r_g · t2 · b2                    q2 → q1                  queue_get
get_unlock  r_l · t3 · b2                                             lock
work        r_c · t4                                                  input: 1/work
send        r_o · t5                         c3 → c0                  send / message
rearm_lock  r_l·t6·s1 / (m1 + t6) · H(m1 + t6)                        lock
rearm       r_a · t7 · s2                                             rearm
rearm_un    r_l · t8 · s2                                             lock
overhead    r_x · t9                         t9 → t1                  handler CPU − timed ops
client      r_z · min(c0, k_z)               c0 → c1                  client CPU
==========  ========================================================  ============================

h = min(c1, 64) (the server's cache). Runnable (pool ``server``): m2, m3, m4, m6, m7, t2–t5, t7–t9. The
lock-competition denominators are seed 001's (HSHA φ1, φ4, φ7, φ11).
"""

from __future__ import annotations

import numpy as np

from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    KZ,
    RA,
    RC,
    RE,
    RG,
    RI,
    RL,
    RN,
    RO,
    RP,
    RX,
    RZ,
    FloatArray,
    H,
    ModelStructure,
    Pool,
    TransitionClass,
    cmin,
    safe_div,
)

SPECIES: tuple[str, ...] = (
    "c0",
    "c1",
    "c2",
    "c3",
    *(f"m{i}" for i in range(1, 8)),
    "q1",
    "q2",
    *(f"t{i}" for i in range(1, 10)),
    "s1",
    "s2",
    "b1",
    "b2",
)
C0, C1, C2, C3, M1, M2, M3, M4, M5, M6, M7, Q1, Q2 = range(13)
T1, T2, T3, T4, T5, T6, T7, T8, T9, S1, S2, B1, B2 = range(13, 26)


def lock_wait(x: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * x[M1] * x[S1], x[M1] + x[T6]) * H(x[M1] + x[T6]) * H(x[C1])


def lock_wait_jump(x: FloatArray, d: FloatArray) -> None:
    h = min(x[C1], CACHE_SIZE)
    d[C1] = -h
    d[C2] = h
    d[M1] = -1.0
    d[M2] = 1.0
    d[S1] = -1.0
    d[S2] = 1.0


def notify(x: FloatArray, r: FloatArray) -> float:
    return float(safe_div(1.0, 1.0 / r[RN] + x[C2] / r[RE]) * x[M2] * x[S2] * H(x[C2]))


def unlock_n(x: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * x[M3] * x[S2])


def recv(x: FloatArray, r: FloatArray) -> float:
    return float(r[RI] * x[M4] * H(x[C2]))


def lock_q(x: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * x[M5] * x[B1], x[M5] + x[T1]) * H(x[M5])


def put(x: FloatArray, r: FloatArray) -> float:
    return float(r[RP] * x[M6] * x[B2])


def unlock_q(x: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * x[M7] * x[B2])


def unlock_q_jump(x: FloatArray, d: FloatArray) -> None:
    d[M7] = -1.0
    d[B1] = 1.0
    d[B2] = -1.0
    d[M4] = H(x[C2])
    d[M1] = 1.0 - H(x[C2])


def get_lock(x: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * x[T1] * x[B1], x[M5] + x[T1]) * H(x[Q2])


def get(x: FloatArray, r: FloatArray) -> float:
    return float(r[RG] * x[T2] * x[B2])


def get_unlock(x: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * x[T3] * x[B2])


def work(x: FloatArray, r: FloatArray) -> float:
    return float(r[RC] * x[T4])


def send(x: FloatArray, r: FloatArray) -> float:
    return float(r[RO] * x[T5])


def rearm_lock(x: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * x[T6] * x[S1], x[M1] + x[T6]) * H(x[M1] + x[T6])


def rearm(x: FloatArray, r: FloatArray) -> float:
    return float(r[RA] * x[T7] * x[S2])


def rearm_unlock(x: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * x[T8] * x[S2])


def overhead(x: FloatArray, r: FloatArray) -> float:
    return float(r[RX] * x[T9])


def client(x: FloatArray, r: FloatArray) -> float:
    return float(r[RZ] * cmin(x[C0], r[KZ]))


def runnable(x: FloatArray, r: FloatArray) -> float:
    return float(
        x[M2] + x[M3] + x[M4] + x[M6] + x[M7] + x[T2] + x[T3] + x[T4] + x[T5] + x[T7] + x[T8] + x[T9]
    )


def _t(name: str, doc: str, rate: object, jump: object) -> TransitionClass:
    return TransitionClass(name, doc, rate, jump, "server")  # type: ignore[arg-type]


STRUCTURE = ModelStructure(
    name="proactor",
    species=SPECIES,
    throughput="send",
    pools=(Pool("server", runnable),),
    transitions=(
        _t(
            "lock_wait",
            "demultiplexer takes the notifier lock, freezes the ready list",
            lock_wait,
            lock_wait_jump,
        ),
        _t("notify", "demultiplexer's notifier call", notify, {"m2": -1, "m3": 1}),
        _t(
            "unlock_n",
            "demultiplexer releases the notifier lock",
            unlock_n,
            {"m3": -1, "m4": 1, "s2": -1, "s1": 1},
        ),
        _t("recv", "demultiplexer receives a cached message", recv, {"c2": -1, "c3": 1, "m4": -1, "m5": 1}),
        _t("lock_q", "demultiplexer takes the queue lock", lock_q, {"m5": -1, "m6": 1, "b1": -1, "b2": 1}),
        _t(
            "put",
            "demultiplexer queues the read-completed message",
            put,
            {"m6": -1, "m7": 1, "q1": -1, "q2": 1},
        ),
        _t("unlock_q", "demultiplexer releases the queue lock", unlock_q, unlock_q_jump),
        _t("get_lock", "handler takes the queue lock", get_lock, {"t1": -1, "t2": 1, "b1": -1, "b2": 1}),
        _t("get", "handler takes a message", get, {"t2": -1, "t3": 1, "q2": -1, "q1": 1}),
        _t(
            "get_unlock",
            "handler releases the queue lock",
            get_unlock,
            {"t3": -1, "t4": 1, "b2": -1, "b1": 1},
        ),
        _t("work", "handler works", work, {"t4": -1, "t5": 1}),
        _t("send", "handler sends the response", send, {"c3": -1, "c0": 1, "t5": -1, "t6": 1}),
        _t(
            "rearm_lock",
            "handler takes the notifier lock",
            rearm_lock,
            {"t6": -1, "t7": 1, "s1": -1, "s2": 1},
        ),
        _t("rearm", "handler re-arms the descriptor", rearm, {"t7": -1, "t8": 1}),
        _t(
            "rearm_unlock",
            "handler releases the notifier lock",
            rearm_unlock,
            {"t8": -1, "t9": 1, "s2": -1, "s1": 1},
        ),
        _t("overhead", "handler's untimed CPU per message", overhead, {"t9": -1, "t1": 1}),
        TransitionClass("client", "the client sends the next request", client, {"c0": -1, "c1": 1}),
    ),
)


def initial_state(threads: int, connections: int) -> FloatArray:
    """1 demultiplexer and ``threads`` − 1 handlers."""
    x = np.zeros(len(SPECIES), dtype=np.float64)
    x[C1] = connections
    x[Q1] = connections
    x[M1] = 1
    x[T1] = threads - 1
    x[S1] = 1
    x[B1] = 1
    return x

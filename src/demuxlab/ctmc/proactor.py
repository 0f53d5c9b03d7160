"""Emulated Proactor CTMC (seed 003's TProactor, the server's ``proactor.c``), written as seed 001 §IV-B
writes HSHA, of which it is a variant: the demultiplexer does the receive itself and queues "read
completed" messages; T − 1 handlers work, send and re-arm.

State (30 populations): connections c0 (the client has it), c1 (ready), c2 (frozen batch of the pending
notifier call, then cached), c3 (read completed: queued or with a handler); demultiplexer m1 (in its
notifier call's per-call part once a connection is ready: woken, holding no lock), m0 (acquires the
notifier lock, freezing the ready list), m2 (the call returns the batch), m3 (releases the notifier lock),
m4 (receives one cached message), m5 (acquires the queue lock), m6 (puts it), m7 (releases the queue lock);
queue places q1 (empty) q2 (busy); handlers t1 (idle: waiting for the queue), t2 (get, holding the queue
lock), t3 (releases the queue lock), t4 (work), t5 (send), t6 (acquire the notifier lock), t7 (re-arm),
t8 (release it), t9 (the per-message CPU the timed operations do not cover); the notifier lock s1 (free)
s2 (busy); the queue lock b1 (free) b2 (busy); k, a kick pending (select, poll: a re-arm wrote the
eventfd of the demultiplexer asleep in its call, which then calls again); tw, a handler whose send found
the client asleep, waking it; zc, the client so woken, not yet running. Initial state: c1 = q1 =
connections, m1 = 1, t1 = T − 1, s1 = b1 = 1. Throughput = E[φ_send].

The notifier lock is seed 001's epoll lock (§II: epoll_wait and epoll_ctl share it); for select and poll it
is the interest-set lock the re-arm takes, and a re-arm made while the demultiplexer sleeps in its call
kicks its eventfd (``rearm_kick``: the handler pays κ = 1/r_k, fitted from the server's ``kick``; the
demultiplexer wakes and calls again, ``empty`` where its call then finds nothing ready;
docs/ctmc-reference.md, "The re-arm's kick"). The per-call part holds no lock (the kernel takes
epoll's lock, the one epoll_ctl takes, to hand the ready list over, not while epoll_wait sleeps or wakes;
the server's select and poll take theirs to copy the set and to read the result, not for the wait), the
descriptors' part (c2/r_e) holds it. epoll-et has no re-arm: r_a is instant.

===========  ========================================================  ============================
name         rate                                                      fitted from
===========  ========================================================  ============================
alpha        r_n · m1 · H(c1 + k)             m1 → m0, k → 0           demux CPU per call (α)
empty        r_l · m0 · s1 · (1 − H(c1))      m0 → m1                  lock (kicked, nothing ready)
lock_wait    r_l·m0·s1·H(c1) / (m0 + t6) · H(m0 + t6)  (freezes h)     lock (median)
notify       r_e / c2 · m2 · s2 · H(c2)                                notify_by_events (τ)
unlock_n     r_l · m3 · s2                                             lock
recv         r_i · m4 · H(c2)                 c2 → c3                  recv / message
lock_q       r_l·m5·b1 / (m5 + t1) · H(m5)                             lock
put          r_p · m6 · b2                    q1 → q2                  queue_put
unlock_q     r_l · m7 · b2                    → m4 if c2 > 0, else m1  lock
get_lock     r_l·t1·b1 / (m5 + t1) · H(q2)                             lock
get          r_g · t2 · b2                    q2 → q1                  queue_get
get_unlock   r_l · t3 · b2                                             lock
work         r_c · t4                                                  input: 1/work
send         r_o · t5                         c3 → c0, t5 → t6 (tw)    send / message, less ω·f
send_wake    r_s · tw                         tw → t6                  wake-cost (ω, 1/r_s)
rearm_lock   r_l·t6·s1 / (m0 + t6) · H(m0 + t6)                        lock
rearm        r_a · t7 · s2 · (1 − K)                                   rearm (without its kick)
rearm_kick   (1/r_a + 1/r_k)⁻¹ · t7 · s2 · K  → k = 1                  kick (kicker's CPU / kick)
rearm_un     r_l · t8 · s2                                             lock
overhead     r_x · t9                         t9 → t1                  handler CPU − timed ops
client       r_z · min(c0,k_z) · (1 − m1·(1 − H(c1 + k)))   c0 → c1    client CPU
client_wake  (1/r_z+1/r_v)⁻¹ · min(c0,k_z) · m1·(1 − H(c1 + k))    c0 → c1  wake-cost (ω = 1/r_v)
client_up    r_u · zc                         zc → 0                   the client's sleeps / message
===========  ========================================================  ============================

K = m1 · (1 − H(c1 + k)) where r_k is measured, else 0 (epoll never kicks: r_k = 0, and the kick steps
never fire). A send goes to tw instead of t6 where the client had no message (c0 = 0: asleep): the
handler then pays the client's wake-up, ω, and the client (zc = 1) sends nothing until it runs, after its
latency 1/r_u; ``client`` and ``client_wake`` carry a factor (1 − zc) not written above
(parts.sending_wakes, parts.waking_client_steps; the send's measured cost holds its wake-ups at the
calibration runs' rate, so r_o is fitted without them: docs/ctmc-reference.md, "The send that wakes the
client"). h = min(c1, 64) (the server's cache). Runnable (pool ``server``): m1 while c1 + k > 0, m2, m3, m4,
m6, m7, t2–t5, t7–t9, tw. The lock-competition denominators are seed 001's (HSHA φ1, φ4, φ7, φ11).

:data:`SCHEDULED` is this chain on fewer cores than threads with the scheduler's wake-up measured (r_w): run
to block (sched.py), its roles the demultiplexer and the handlers (:data:`ROLES`).
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    RA,
    RC,
    RG,
    RI,
    RL,
    RN,
    RO,
    RP,
    RX,
    FloatArray,
    H,
    ModelStructure,
    Pool,
    absent,
    mass,
    present,
    total,
)
from demuxlab.ctmc.parts import (
    CLIENT_WAKING,
    KICK,
    SEND_WAKE,
    SERVER,
    WAKER,
    awake,
    contended,
    free,
    kicking_steps,
    one_per_item,
    paper_notifier,
    sending_wakes,
    step,
    waiting_for,
    waking_client_steps,
)
from demuxlab.ctmc.pattern import OpRole, PatternModel
from demuxlab.ctmc.sched import Role, scheduled

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
    "m0",
    KICK,
    WAKER,
    CLIENT_WAKING,
)
C0, C1, C2, C3, M1, M2, M3, M4, M5, M6, M7, Q1, Q2 = range(13)
T1, T2, T3, T4, T5, T6, T7, T8, T9, S1, S2, B1, B2, M0, K, TW, ZC = range(13, 30)


def lock_wait_jump(x: FloatArray, d: FloatArray) -> None:
    h = min(x[C1], CACHE_SIZE)
    d[C1] = -h
    d[C2] = h
    d[M0] = -1.0
    d[M2] = 1.0
    d[S1] = -1.0
    d[S2] = 1.0


def alpha_jump(x: FloatArray, d: FloatArray) -> None:
    d[M1] = -1.0
    d[M0] = 1.0
    d[K] = -x[K]  # the call drains a pending kick


def send_jump(x: FloatArray, d: FloatArray) -> None:
    """The handler's send: the response to the client; the handler on to its re-arm (t6), or to wake the
    client (tw, the client waking: zc) where the client had no message (asleep; parts.sending_wakes)."""
    d[C3] = -1.0
    d[C0] = 1.0
    d[T5] = -1.0
    d[T6] = H(x[C0])
    d[TW] = 1.0 - H(x[C0])
    d[ZC] = 1.0 - H(x[C0])


def unlock_q_jump(x: FloatArray, d: FloatArray) -> None:
    d[M7] = -1.0
    d[B1] = 1.0
    d[B2] = -1.0
    d[M4] = H(x[C2])
    d[M1] = 1.0 - H(x[C2])


# The notifier lock's competitors: the demultiplexer back from its call's per-call part (m0), handlers in t6.
NOTIFIER_LOCK = (M0, T6)
QUEUE_LOCK = (M5, T1)

STRUCTURE = ModelStructure(
    name="proactor",
    species=SPECIES,
    throughput="send",
    calls="alpha",  # once per call, as notify; it is the step that charges α
    pools=(Pool(SERVER, total(awake(M1, C1, K), M2, M3, M4, M6, M7, T2, T3, T4, T5, T7, T8, T9, TW)),),
    transitions=(
        step(
            "alpha", "demultiplexer's call, its per-call part (α)", mass(RN, M1) * present(C1, K), alpha_jump
        ),
        step(
            "empty",
            "the kicked call found nothing ready: the demultiplexer calls again",
            mass(RL, M0, S1) * absent(C1),
            {"m0": -1, "m1": 1},
        ),
        step(
            "lock_wait",
            "demultiplexer takes the notifier lock, freezes the ready list",
            contended(RL, (M0, S1), NOTIFIER_LOCK) * present(*NOTIFIER_LOCK) * present(C1),
            lock_wait_jump,
        ),
        step(
            "notify",
            "demultiplexer's notifier call: the descriptors it returns",
            mass(paper_notifier(C2), M2, S2) * present(C2),
            {"m2": -1, "m3": 1},
        ),
        step(
            "unlock_n",
            "demultiplexer releases the notifier lock",
            mass(RL, M3, S2),
            {"m3": -1, "m4": 1, "s2": -1, "s1": 1},
        ),
        step(
            "recv",
            "demultiplexer receives a cached message",
            mass(RI, M4) * present(C2),
            {"c2": -1, "c3": 1, "m4": -1, "m5": 1},
        ),
        step(
            "lock_q",
            "demultiplexer takes the queue lock",
            contended(RL, (M5, B1), QUEUE_LOCK) * present(M5),
            {"m5": -1, "m6": 1, "b1": -1, "b2": 1},
        ),
        step(
            "put",
            "demultiplexer queues the read-completed message",
            mass(RP, M6, B2),
            {"m6": -1, "m7": 1, "q1": -1, "q2": 1},
        ),
        step("unlock_q", "demultiplexer releases the queue lock", mass(RL, M7, B2), unlock_q_jump),
        step(
            "get_lock",
            "handler takes the queue lock",
            contended(RL, (T1, B1), QUEUE_LOCK) * present(Q2),
            {"t1": -1, "t2": 1, "b1": -1, "b2": 1},
        ),
        step("get", "handler takes a message", mass(RG, T2, B2), {"t2": -1, "t3": 1, "q2": -1, "q1": 1}),
        step(
            "get_unlock",
            "handler releases the queue lock",
            mass(RL, T3, B2),
            {"t3": -1, "t4": 1, "b2": -1, "b1": 1},
        ),
        step("work", "handler works", mass(RC, T4), {"t4": -1, "t5": 1}),
        step("send", "handler sends the response", mass(RO, T5), send_jump),
        sending_wakes(SPECIES, "t6"),
        step(
            "rearm_lock",
            "handler takes the notifier lock",
            contended(RL, (T6, S1), NOTIFIER_LOCK) * present(*NOTIFIER_LOCK),
            {"t6": -1, "t7": 1, "s1": -1, "s2": 1},
        ),
        *kicking_steps(
            SPECIES, "rearm", "handler re-arms the descriptor", RA, (T7, S2), {"t7": -1, "t8": 1}, M1, C1
        ),
        step(
            "rearm_unlock",
            "handler releases the notifier lock",
            mass(RL, T8, S2),
            {"t8": -1, "t9": 1, "s2": -1, "s1": 1},
        ),
        step("overhead", "handler's untimed CPU per message", mass(RX, T9), {"t9": -1, "t1": 1}),
        *waking_client_steps(SPECIES, "c1", M1, (C1, K)),
    ),
)


# On fewer cores than threads: run to block (sched.py). The threads that want a CPU, woken ones included:
# the demultiplexer once a connection is ready and the notifier lock free (m1) or the queue lock free
# (m5), and in m2–m4, m6, m7; an idle handler once a message is queued for it and the queue lock is free
# (t1, one per message), a handler whose notifier lock came free (t6), and t2–t5, t7–t9.
ROLES: tuple[Role, ...] = (
    Role(
        "demultiplexer",
        total(awake(M1, C1, K), waiting_for(M0, S1), M2, M3, M4, waiting_for(M5, B1), M6, M7),
        ("alpha", "empty", "lock_wait", "notify", "unlock_n", "recv", "lock_q", "put", "unlock_q"),
    ),
    Role(
        "handler",
        total(one_per_item(T1, Q2) * free(B1), T2, T3, T4, T5, waiting_for(T6, S1), T7, T8, T9, TW),
        (
            "get_lock",
            "get",
            "get_unlock",
            "work",
            "send",
            SEND_WAKE,
            "rearm_lock",
            "rearm",
            "rearm_kick",
            "rearm_unlock",
            "overhead",
        ),
    ),
)
SCHEDULED = scheduled(STRUCTURE, ROLES)


def initial_state(threads: int, connections: int) -> FloatArray:
    """1 demultiplexer and ``threads`` − 1 handlers."""
    return STRUCTURE.state(c1=connections, q1=connections, m1=1, t1=threads - 1, s1=1, b1=1)


# The demultiplexer waits on the notifier, receives and queues; a handler takes, sends, re-arms (and kicks).
DEMULTIPLEXER = OpRole(
    ("demultiplexer",), (("recv", "r_i"), ("queue_put", "r_p")), notifies=True, overhead="r_n", works=False
)
HANDLER_OPS: tuple[tuple[str, str], ...] = (
    ("queue_get", "r_g"),
    ("send", "r_o"),
    ("rearm", "r_a"),
    ("kick", "r_k"),
)


def _initial(threads: int, connections: int, full: bool) -> FloatArray:
    return initial_state(threads, connections)


MODEL = PatternModel(
    "proactor",
    STRUCTURE,
    _initial,
    (DEMULTIPLEXER, OpRole(("handler",), HANDLER_OPS, notifies=False, overhead="r_x", works=True)),
    scheduled=SCHEDULED,
    waiting_dispatcher=True,
)

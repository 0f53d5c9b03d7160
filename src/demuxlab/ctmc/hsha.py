"""Half-Sync/Half-Async CTMC of seed 001 §IV-B, exact to the paper except for the fixes listed here.

State (25 populations): clients c1..c4, monitor m1..m6, queue places q1 (empty) q2 (busy), workers
t1..t9, epoll lock s1 (free) s2 (busy), queue lock b1 (free) b2 (busy). Initial state: c1 = connections,
m1 = 1, q1 = connections, t1 = N − 1 workers, s1 = b1 = 1. Throughput = E[φ15].

Deviations from the printed model (each the smallest change that makes the chain well defined):

1. State descriptor (1) lists ``x_l``, a population of the LF model (the leader lock) that no HSHA
   generating function uses: dropped.
2. l1 prints ``−x_{c,1}δ_{c,1} + x_{c,2}δ_{c,2}``, which doubles x_{c,2} instead of moving the ready list
   into the cache as the text says ("zeroing x_{c,1} and adding that to x_{c,2}"): jump is
   ``−x_{c,1}δ_{c,1} + x_{c,1}δ_{c,2}``.
3. φ1 has no guard on a non-empty ready list. When the monitor returns to m1 with x_{c,1} = 0 (all
   connections with workers), it locks epoll, freezes an empty batch, and φ2 = (r_e/x_{c,2})·H(x_{c,2})
   is 0: the monitor holds the epoll lock forever and every worker blocks in t5 — a reachable absorbing
   state. φ1 gets the factor H(x_{c,1}) (the monitor sleeps in epoll_wait until the ready list is
   non-empty, as LF's φ2 guard ``x_{c,1} > 0`` already says). The denominator x_{m,1} + x_{t,5} is kept.
4. φ12 prints ``r_a x_{s,2}`` without the worker's guard: with the monitor holding the epoll lock it fires
   with x_{t,6} = 0 and drives x_{t,6} negative. φ12 = r_a x_{t,6} x_{s,2}.
5. l15 prints ``− δ_{t,1} + δ_{t,9}`` (flipped signs: a responding worker would multiply). The worker
   leaves t9 for t1: ``+ δ_{t,1} − δ_{t,9}``.

Everything else is literal, including the lock-competition denominators (x_{m,4} + x_{t,1} counts idle
workers even while the queue is empty; φ7 with x_{m,4} + x_{t,1} = 0 has numerator 0 and is taken as 0).

Cores (issue 19): every transition is a step of a server thread, in the processor-sharing pool ``server``
(engine.Pool): the threads that want a CPU are the monitor in m2, m3, m5, m6 and the workers in t2–t4 and
t6–t9; a thread waiting for a lock (m1, m4, t1, t5) or for work (t1) sleeps. With a core per thread the
pool's factor is 1 in every state, and the chain is the paper's.

:data:`FULL` is the chain the calibrated rates drive: the same, plus what the paper's abstraction leaves
out and a calibration measures (docs/ctmc-reference.md): the notifier call costs α + h/r_e for h descriptors
(α = 1/r_n, the per-call part: a call that found nothing sleeps and is woken), the per-call part in a state
of its own (m0 after it) that holds no lock, the epoll lock held for the h/r_e only (the kernel takes the
lock epoll_ctl takes to hand the ready list over, not while epoll_wait sleeps or wakes; with α under the
lock a monitor that calls all the time kept the workers' re-arms waiting), each worker spends 1/r_x
more per message (CPU its timed operations do not cover), and a response goes to the client (c0), which
sends the next request after 1/r_z (k_z messages at once) instead of at once; a request that finds the
monitor asleep in its call (m1, c1 = 0) wakes it, and costs the client ω = 1/r_v more (``client_wake``);
over select and poll a worker's re-arm that finds the monitor asleep in its call kicks it (``phi12_kick``:
κ = 1/r_k more for the worker, a kick pending, k; the monitor wakes and calls again, ``empty`` where that
call finds nothing ready; parts.kicking_steps, docs/ctmc-reference.md "The re-arm's kick"); a worker's
response that finds the client asleep (c0 = 0 before it) costs the worker ω more (tw, ``send_wake`` at r_s),
and the client so woken (zc) sends nothing until it runs, after its latency 1/r_u (``client_up``;
parts.sending_wakes, docs/ctmc-reference.md "The send that wakes the client").

:data:`SCHEDULED` is :data:`FULL` on fewer cores than threads with the scheduler's wake-up measured (r_w):
run to block (sched.py), its roles the monitor and the workers (:data:`ROLES`).
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
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
    calibrated,
    contended,
    free,
    kicking_steps,
    one_per_item,
    paired,
    paper_notifier,
    sending_wakes,
    step,
    waiting_for,
    waking_client_steps,
)
from demuxlab.ctmc.pattern import OpRole, PatternModel
from demuxlab.ctmc.sched import Role, scheduled

SPECIES: tuple[str, ...] = (
    *(f"c{i}" for i in range(1, 5)),
    *(f"m{i}" for i in range(1, 7)),
    "q1",
    "q2",
    *(f"t{i}" for i in range(1, 10)),
    "s1",
    "s2",
    "b1",
    "b2",
)
C1, C2, C3, C4, M1, M2, M3, M4, M5, M6, Q1, Q2 = range(12)
T1, T2, T3, T4, T5, T6, T7, T8, T9, S1, S2, B1, B2 = range(12, 25)


def jump1(x: FloatArray, d: FloatArray) -> None:
    d[C1] = -x[C1]
    d[C2] = x[C1]
    d[M1] = -1.0
    d[M2] = 1.0
    d[S1] = -1.0
    d[S2] = 1.0


def jump6(x: FloatArray, d: FloatArray) -> None:
    d[M6] = -1.0
    d[B1] = 1.0
    d[B2] = -1.0
    # "δ_{m,1} if x_{c,2} = 0, δ_{m,4} otherwise", written with H so that it is also defined on the reals.
    d[M1] = 1.0 - H(x[C2])
    d[M4] = H(x[C2])


# Threads of the pool that want a CPU: monitor in m2, m3, m5, m6; workers in t2–t4, t6–t9.
RUNNABLE = (M2, M3, M5, M6, T2, T3, T4, T6, T7, T8, T9)

# The epoll lock's competitors (the monitor in m1, workers in t5) and the queue lock's (m4, t1).
EPOLL_LOCK = (M1, T5)
QUEUE_LOCK = (M4, T1)

# Every step is a server thread's: all in the pool.
STRUCTURE = ModelStructure(
    name="hsha",
    species=SPECIES,
    throughput="phi15",
    calls="phi2",
    pools=(Pool(SERVER, total(*RUNNABLE)),),
    transitions=(
        step(
            "phi1",
            "monitor acquires epoll lock, freezes the ready list",
            contended(RL, (M1, S1), EPOLL_LOCK) * present(*EPOLL_LOCK) * present(C1),
            jump1,
        ),
        step(
            "phi2",
            "monitor calls epoll_wait",
            mass(paper_notifier(C2), M2, S2) * present(C2),
            {"m2": -1, "m3": 1},
        ),
        step("phi3", "monitor releases epoll lock", mass(RL, M3, S2), {"m3": -1, "m4": 1, "s2": -1, "s1": 1}),
        step(
            "phi4",
            "monitor acquires queue lock",
            contended(RL, (M4, B1), QUEUE_LOCK) * present(M4),
            {"m4": -1, "m5": 1, "b1": -1, "b2": 1},
        ),
        step(
            "phi5",
            "monitor puts a descriptor into the queue",
            mass(RP, M5, B2),
            {"c2": -1, "c3": 1, "m5": -1, "m6": 1, "q1": -1, "q2": 1},
        ),
        step("phi6", "monitor releases queue lock", mass(RL, M6, B2), jump6),
        step(
            "phi7",
            "worker acquires queue lock",
            contended(RL, (T1, B1), QUEUE_LOCK) * present(Q2),
            {"t1": -1, "t2": 1, "b1": -1, "b2": 1},
        ),
        step("phi8", "worker pops a descriptor", mass(RG, T2, B2), {"t2": -1, "t3": 1, "q1": 1, "q2": -1}),
        step("phi9", "worker releases queue lock", mass(RL, T3, B2), {"t3": -1, "t4": 1, "b1": 1, "b2": -1}),
        step(
            "phi10",
            "worker receives the request",
            paired(RI, C3, T4),
            {"c3": -1, "c4": 1, "t4": -1, "t5": 1},
        ),
        step(
            "phi11",
            "worker acquires epoll lock",
            contended(RL, (T5, S1), EPOLL_LOCK) * present(*EPOLL_LOCK),
            {"t5": -1, "t6": 1, "s1": -1, "s2": 1},
        ),
        step("phi12", "worker reactivates the descriptor", mass(RA, T6, S2), {"t6": -1, "t7": 1}),
        step("phi13", "worker releases epoll lock", mass(RL, T7, S2), {"t7": -1, "t8": 1, "s1": 1, "s2": -1}),
        step("phi14", "worker computes", mass(RC, T8), {"t8": -1, "t9": 1}),
        step(
            "phi15",
            "worker responds to the client",
            paired(RO, C4, T9),
            {"c1": 1, "c4": -1, "t1": 1, "t9": -1},
        ),
    ),
)

# -- the calibrated chain --------------------------------------------------------------------------------

FULL_SPECIES: tuple[str, ...] = (*SPECIES, "c0", "t10", "m0", KICK, WAKER, CLIENT_WAKING)
C0, T10, M0, K, TW, ZC = 25, 26, 27, 28, 29, 30

# The epoll lock's competitors in the calibrated chain: the monitor back from its call's per-call part
# (m0), workers in t5.
FULL_EPOLL_LOCK = (M0, T5)


def full_jump1(x: FloatArray, d: FloatArray) -> None:
    """φ1 of :data:`FULL`: jump1 with the monitor coming from m0 (a plain function as jump1 is: a model
    instance is pickled for predict_many's processes, and a closure would not be)."""
    d[C1] = -x[C1]
    d[C2] = x[C1]
    d[M0] = -1.0
    d[M2] = 1.0
    d[S1] = -1.0
    d[S2] = 1.0


def full_jump15(x: FloatArray, d: FloatArray) -> None:
    """φ15 of :data:`FULL`: the response to the client (c0); the worker on to its untimed CPU (t10), or to
    wake the client (tw, the client waking: zc) where the client had no message (asleep;
    parts.sending_wakes)."""
    d[C4] = -1.0
    d[C0] = 1.0
    d[T9] = -1.0
    d[T10] = H(x[C0])
    d[TW] = 1.0 - H(x[C0])
    d[ZC] = 1.0 - H(x[C0])


def alpha_jump(x: FloatArray, d: FloatArray) -> None:
    d[M1] = -1.0
    d[M0] = 1.0
    d[K] = -x[K]  # the call drains a pending kick


# A worker's re-arm while the monitor sleeps in its call (m1, nothing ready, no kick pending) kicks it over
# select and poll (parts.kicking_steps; r_k = 0: never).
phi12, phi12_kick = kicking_steps(
    FULL_SPECIES, "phi12", "worker reactivates the descriptor", RA, (T6, S2), {"t6": -1, "t7": 1}, M1, C1
)

FULL = calibrated(
    STRUCTURE,
    "hsha-full",
    FULL_SPECIES,
    total(*RUNNABLE, T10, TW, awake(M1, C1, K)),
    changed=(
        # The call's per-call part first (the monitor woken; α = 1/r_n), holding no lock, then the epoll
        # lock for the h = x_{c,2} descriptors it returns (h/r_e, φ2 as printed): the kernel takes the
        # lock epoll_ctl takes (ep->mtx) to hand the ready list over, not while epoll_wait sleeps or wakes.
        step(
            "phi1",
            "monitor acquires epoll lock, freezes the ready list",
            contended(RL, (M0, S1), FULL_EPOLL_LOCK) * present(*FULL_EPOLL_LOCK) * present(C1),
            full_jump1,
        ),
        step(
            "phi11",
            "worker acquires epoll lock",
            contended(RL, (T5, S1), FULL_EPOLL_LOCK) * present(*FULL_EPOLL_LOCK),
            {"t5": -1, "t6": 1, "s1": -1, "s2": 1},
        ),
        step(
            "phi15",
            "worker responds; the client has the connection",
            paired(RO, C4, T9),
            full_jump15,
        ),
        phi12,
    ),
    added=(
        step("overhead", "worker's untimed CPU per message", mass(RX, T10), {"t10": -1, "t1": 1}),
        *waking_client_steps(FULL_SPECIES, "c1", M1, (C1, K)),
        sending_wakes(FULL_SPECIES, "t10"),
        step("alpha", "monitor's call, its per-call part (α)", mass(RN, M1) * present(C1, K), alpha_jump),
        phi12_kick,
        step(
            "empty",
            "the kicked call found nothing ready: the monitor calls again",
            mass(RL, M0, S1) * absent(C1),
            {"m0": -1, "m1": 1},
        ),
    ),
    calls="alpha",  # once per call, as φ2; it is the step that charges α
)


# -- the calibrated chain on fewer cores than threads: run to block (sched.py) -----------------------------

# The threads that want a CPU, woken ones included: the monitor once a connection is ready (m1: its call's
# per-call part), back from it once the epoll lock is free (m0), once the queue lock is free (m4), and in
# m2, m3, m5, m6; an idle worker once an item is queued for it and the queue lock is free (t1, one per
# item), a worker whose epoll lock came free (t5), and t2–t4, t6–t10.
ROLES: tuple[Role, ...] = (
    Role(
        "monitor",
        total(awake(M1, C1, K), waiting_for(M0, S1), M2, M3, waiting_for(M4, B1), M5, M6),
        ("alpha", "empty", "phi1", "phi2", "phi3", "phi4", "phi5", "phi6"),
    ),
    Role(
        "worker",
        total(one_per_item(T1, Q2) * free(B1), T2, T3, T4, waiting_for(T5, S1), T6, T7, T8, T9, T10, TW),
        (
            "phi7",
            "phi8",
            "phi9",
            "phi10",
            "phi11",
            "phi12",
            "phi12_kick",
            "phi13",
            "phi14",
            "phi15",
            SEND_WAKE,
            "overhead",
        ),
    ),
)
SCHEDULED = scheduled(FULL, ROLES)


def initial_state(threads: int, connections: int, full: bool = False) -> FloatArray:
    return (FULL if full else STRUCTURE).state(
        c1=connections, m1=1, q1=connections, t1=threads - 1, s1=1, b1=1
    )


# The calibration's roles: the monitor waits on the notifier and queues (its untimed CPU is per notifier
# call, into α); a worker takes, receives, sends, re-arms (and kicks a monitor asleep in select or poll).
MONITOR = OpRole(("monitor",), (("queue_put", "r_p"),), notifies=True, overhead="r_n", works=False)
WORKER_OPS: tuple[tuple[str, str], ...] = (
    ("queue_get", "r_g"), ("recv", "r_i"), ("send", "r_o"), ("rearm", "r_a"), ("kick", "r_k"),
)  # fmt: skip
MODEL = PatternModel(
    "hsha",
    STRUCTURE,
    initial_state,
    (MONITOR, OpRole(("worker",), WORKER_OPS, notifies=False, overhead="r_x", works=True)),
    full=FULL,
    scheduled=SCHEDULED,
    waiting_dispatcher=True,
)

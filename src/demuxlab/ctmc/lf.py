"""Leader/Followers CTMC of seed 001 §IV-C, exact to the paper except for the fixes listed here.

State (19 populations): clients c1..c4, threads t1..t11, epoll lock s1 (free) s2 (busy), leader lock
l1 (free) l2 (busy). Initial state: c1 = connections, t1 = N, s1 = l1 = 1. Throughput = E[φ12].

Deviations from the printed model (each the smallest change that makes the chain well defined):

1. φ2, φ4, φ5, φ6, φ7, φ12 are printed with ``x_{·}`` — populations of the HSHA model — where the LF
   state is ``y``: read as the same-named ``y`` populations.
2. φ9, φ10, φ11 are printed with unit vectors (``r_a δ_{t,8} δ_{s,2}``, ``r_l δ_{t,9} δ_{s,2}``,
   ``r_c δ_{t,10}``) where a rate needs populations: read as ``y_{t,8} y_{s,2}``, ``y_{t,9} y_{s,2}``,
   ``y_{t,10}``.
3. φ2 and φ3 are guarded by ``y_{l,1}`` (leader lock free), but the only thread in t2 got there through φ1,
   which took the leader lock (l1 → l2): as printed neither can ever fire. The leader holds the lock, so
   the guard is ``y_{l,2}``.
4. φ4 is guarded by ``y_{s,1} y_{l,1}`` (both locks free), but the thread in t3 holds both (φ1, φ2): as
   printed epoll_wait never completes. Guard ``y_{s,2} y_{l,2}``.
5. e12 prints ``− δ_{t,1} + δ_{t,11}`` (flipped signs, as HSHA's l15): the responding thread leaves t11
   for t1, ``+ δ_{t,1} − δ_{t,11}``.

Everything else is literal, including the lock-competition denominator y_{t,2} + y_{t,7} in φ2 and φ8.

Cores (issue 19): every transition is a server thread's step, in the processor-sharing pool ``server``;
the threads that want a CPU are those in t3–t6 and t8–t11 (t1 and t7 wait for a lock; the leader in t2 is
about to take a cached descriptor or to sleep in epoll_wait and is not counted). With a core per thread the
pool's factor is 1 in every state and the chain is the paper's.

:data:`FULL` is the chain the calibrated rates drive: epoll_wait returns at most ``cache`` descriptors (the
server's 64) and costs α + h/r_e (α = 1/r_n per call), each thread spends 1/r_x more per message (CPU its
timed operations do not cover, t12), and a response goes to the client (c0), which sends the next request
after 1/r_z (k_z messages at once). A response that finds the client asleep (c0 = 0 before it) costs its
thread ω more (tw, ``send_wake`` at r_s) and the client so woken (zc) sends nothing until it runs, after its
latency 1/r_u (``client_up``; parts.woken_client_steps, parts.sending_wakes, docs/ctmc-reference.md "The
send that wakes the client"). The client's request that wakes the leader asleep in epoll_wait (t2, c1 = c2 =
0) is not charged (no ``client_wake``, as the reactor has): charged at ω it made the held-out error worse,
10.9 % mean against 7.7 % without (docs/ctmc.md, "Generalisation"), and the request's wake-up stays in the
client's turnaround r_z.
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    RA,
    RC,
    RI,
    RL,
    RO,
    RT,
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
    SERVER,
    WAKER,
    cached,
    calibrated,
    contended,
    notifier_call,
    paired,
    paper_notifier,
    sending_wakes,
    step,
    woken_client_steps,
)
from demuxlab.ctmc.pattern import OpRole, PatternModel

SPECIES: tuple[str, ...] = (
    *(f"c{i}" for i in range(1, 5)),
    *(f"t{i}" for i in range(1, 12)),
    "s1",
    "s2",
    "l1",
    "l2",
)
C1, C2, C3, C4 = range(4)
T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11 = range(4, 15)
S1, S2, L1, L2 = range(15, 19)


def jump4(y: FloatArray, d: FloatArray) -> None:
    d[C1] = -y[C1]
    d[C2] = y[C1] - 1.0
    d[C3] = 1.0
    d[T3] = -1.0
    d[T4] = 1.0


# Threads that want a CPU: t3–t6, t8–t11.
RUNNABLE = (T3, T4, T5, T6, T8, T9, T10, T11)
# The epoll lock's competitors: the leader in t2, threads in t7.
EPOLL_LOCK = (T2, T7)

STRUCTURE = ModelStructure(
    name="lf",
    species=SPECIES,
    throughput="phi12",
    calls="phi4",
    pools=(Pool(SERVER, total(*RUNNABLE)),),
    transitions=(
        step(
            "phi1",
            "idle thread acquires leader lock",
            mass(RL, L1) * present(T1),
            {"t1": -1, "t2": 1, "l1": -1, "l2": 1},
        ),
        step(
            "phi2",
            "leader acquires epoll lock",
            # "if y_{c,1} > 0, y_{c,2} = 0, y_{t,2} + y_{t,7} > 0": H(c1)·(1 − H(c2))·H(t2 + t7).
            contended(RL, (T2, L2, S1), EPOLL_LOCK) * (present(C1) * absent(C2) * present(*EPOLL_LOCK)),
            {"t2": -1, "t3": 1, "s1": -1, "s2": 1},
        ),
        step(
            "phi3",
            "leader takes a cached descriptor",
            mass(RT, T2, L2) * present(C2),
            {"c2": -1, "c3": 1, "t2": -1, "t5": 1},
        ),
        step("phi4", "leader calls epoll_wait", mass(paper_notifier(C1), T3, S2, L2) * present(C1), jump4),
        step(
            "phi5",
            "leader releases epoll lock",
            mass(RL, T4, S2, L2),
            {"t4": -1, "t5": 1, "s1": 1, "s2": -1},
        ),
        step("phi6", "thread releases leader lock", mass(RL, T5, L2), {"t5": -1, "t6": 1, "l1": 1, "l2": -1}),
        step(
            "phi7", "thread receives the request", paired(RI, C3, T6), {"c3": -1, "c4": 1, "t6": -1, "t7": 1}
        ),
        step(
            "phi8",
            "thread acquires epoll lock",
            contended(RL, (T7, S1), EPOLL_LOCK) * present(*EPOLL_LOCK),
            {"t7": -1, "t8": 1, "s1": -1, "s2": 1},
        ),
        step("phi9", "thread reactivates the descriptor", mass(RA, T8, S2), {"t8": -1, "t9": 1}),
        step(
            "phi10", "thread releases epoll lock", mass(RL, T9, S2), {"t9": -1, "t10": 1, "s1": 1, "s2": -1}
        ),
        step("phi11", "thread computes", mass(RC, T10), {"t10": -1, "t11": 1}),
        step(
            "phi12",
            "thread responds to the client",
            paired(RO, C4, T11),
            {"c1": 1, "c4": -1, "t1": 1, "t11": -1},
        ),
    ),
)

# -- the calibrated chain --------------------------------------------------------------------------------

FULL_SPECIES: tuple[str, ...] = (*SPECIES, "c0", "t12", WAKER, CLIENT_WAKING)
C0, T12, TW, ZC = 19, 20, 21, 22


def full_jump4(y: FloatArray, d: FloatArray) -> None:
    h = min(y[C1], CACHE_SIZE)
    d[C1] = -h
    d[C2] = h - 1.0
    d[C3] = 1.0
    d[T3] = -1.0
    d[T4] = 1.0


def full_jump12(y: FloatArray, d: FloatArray) -> None:
    """φ12 of :data:`FULL`: the response to the client (c0); the thread on to its untimed CPU (t12), or to
    wake the client (tw, the client waking: zc) where the client had no message (asleep;
    parts.sending_wakes)."""
    d[C4] = -1.0
    d[C0] = 1.0
    d[T11] = -1.0
    d[T12] = H(y[C0])
    d[TW] = 1.0 - H(y[C0])
    d[ZC] = 1.0 - H(y[C0])


FULL = calibrated(
    STRUCTURE,
    "lf-full",
    FULL_SPECIES,
    total(*RUNNABLE, T12, TW),
    changed=(
        # epoll_wait returning h = min(y_{c,1}, cache) descriptors: α + h/r_e.
        step(
            "phi4",
            "leader calls epoll_wait (α + h/r_e)",
            mass(notifier_call(cached(C1)), T3, S2, L2) * present(C1),
            full_jump4,
        ),
        step(
            "phi12",
            "thread responds; the client has the connection",
            paired(RO, C4, T11),
            full_jump12,
        ),
    ),
    added=(
        step("overhead", "thread's untimed CPU per message", mass(RX, T12), {"t12": -1, "t1": 1}),
        sending_wakes(FULL_SPECIES, "t12"),
        # No client_wake: charging the leader's wake-up (t2 holding the leader lock, nothing ready or
        # cached) as the reactor's made the held-out error worse (docs/ctmc.md, "Generalisation").
        *woken_client_steps(FULL_SPECIES, "c1"),
    ),
)


def initial_state(threads: int, connections: int, full: bool = False) -> FloatArray:
    return (FULL if full else STRUCTURE).state(c1=connections, t1=threads, s1=1, l1=1)


MODEL = PatternModel(
    "lf",
    STRUCTURE,
    initial_state,
    (OpRole(("leader-follower",), (("recv", "r_i"), ("send", "r_o"), ("rearm", "r_a")), True, "r_x", True),),
    full=FULL,
)

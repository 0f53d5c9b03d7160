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

:data:`FULL` is the chain the calibrated rates drive: epoll_wait returns at most ``cache`` descriptors
(the server's 64) and costs α + h/r_e (α = 1/r_n per call), each thread spends 1/r_x more per message (CPU
its timed operations do not cover, t12), and a response goes to the client (c0), which sends the next
request after 1/r_z (k_z messages at once).
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    KZ,
    RA,
    RC,
    RE,
    RI,
    RL,
    RN,
    RO,
    RT,
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


def phi1(y: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * y[L1] * H(y[T1]))


def phi2(y: FloatArray, r: FloatArray) -> float:
    # "if y_{c,1} > 0, y_{c,2} = 0, y_{t,2} + y_{t,7} > 0": H(c1)·(1 − H(c2))·H(t2 + t7).
    guard = H(y[C1]) * (1.0 - H(y[C2])) * H(y[T2] + y[T7])
    return safe_div(r[RL] * y[T2] * y[L2] * y[S1], y[T2] + y[T7]) * guard


def phi3(y: FloatArray, r: FloatArray) -> float:
    return float(r[RT] * y[T2] * y[L2] * H(y[C2]))


def phi4(y: FloatArray, r: FloatArray) -> float:
    return float(safe_div(r[RE], y[C1]) * y[T3] * y[S2] * y[L2] * H(y[C1]))


def jump4(y: FloatArray, d: FloatArray) -> None:
    d[C1] = -y[C1]
    d[C2] = y[C1] - 1.0
    d[C3] = 1.0
    d[T3] = -1.0
    d[T4] = 1.0


def phi5(y: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * y[T4] * y[S2] * y[L2])


def phi6(y: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * y[T5] * y[L2])


def phi7(y: FloatArray, r: FloatArray) -> float:
    return float(r[RI] * cmin(y[C3], y[T6]))


def phi8(y: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * y[T7] * y[S1], y[T2] + y[T7]) * H(y[T2] + y[T7])


def phi9(y: FloatArray, r: FloatArray) -> float:
    return float(r[RA] * y[T8] * y[S2])


def phi10(y: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * y[T9] * y[S2])


def phi11(y: FloatArray, r: FloatArray) -> float:
    return float(r[RC] * y[T10])


def phi12(y: FloatArray, r: FloatArray) -> float:
    return float(r[RO] * cmin(y[C4], y[T11]))


def runnable(y: FloatArray, r: FloatArray) -> float:
    """Threads that want a CPU: t3–t6, t8–t11."""
    return float(y[T3] + y[T4] + y[T5] + y[T6] + y[T8] + y[T9] + y[T10] + y[T11])


_PAPER = ModelStructure(
    name="lf",
    species=SPECIES,
    throughput="phi12",
    pools=(Pool("server", runnable),),
    transitions=(
        TransitionClass(
            "phi1", "idle thread acquires leader lock", phi1, {"t1": -1, "t2": 1, "l1": -1, "l2": 1}
        ),
        TransitionClass("phi2", "leader acquires epoll lock", phi2, {"t2": -1, "t3": 1, "s1": -1, "s2": 1}),
        TransitionClass(
            "phi3", "leader takes a cached descriptor", phi3, {"c2": -1, "c3": 1, "t2": -1, "t5": 1}
        ),
        TransitionClass("phi4", "leader calls epoll_wait", phi4, jump4),
        TransitionClass("phi5", "leader releases epoll lock", phi5, {"t4": -1, "t5": 1, "s1": 1, "s2": -1}),
        TransitionClass("phi6", "thread releases leader lock", phi6, {"t5": -1, "t6": 1, "l1": 1, "l2": -1}),
        TransitionClass("phi7", "thread receives the request", phi7, {"c3": -1, "c4": 1, "t6": -1, "t7": 1}),
        TransitionClass("phi8", "thread acquires epoll lock", phi8, {"t7": -1, "t8": 1, "s1": -1, "s2": 1}),
        TransitionClass("phi9", "thread reactivates the descriptor", phi9, {"t8": -1, "t9": 1}),
        TransitionClass(
            "phi10", "thread releases epoll lock", phi10, {"t9": -1, "t10": 1, "s1": 1, "s2": -1}
        ),
        TransitionClass("phi11", "thread computes", phi11, {"t10": -1, "t11": 1}),
        TransitionClass(
            "phi12", "thread responds to the client", phi12, {"c1": 1, "c4": -1, "t1": 1, "t11": -1}
        ),
    ),
)


STRUCTURE = ModelStructure(
    name=_PAPER.name,
    species=_PAPER.species,
    throughput=_PAPER.throughput,
    pools=_PAPER.pools,
    transitions=tuple(
        TransitionClass(tr.name, tr.doc, tr.rate, tr.jump, "server") for tr in _PAPER.transitions
    ),
)

# -- the calibrated chain --------------------------------------------------------------------------------

FULL_SPECIES: tuple[str, ...] = (*SPECIES, "c0", "t12")
C0, T12 = 19, 20


def full_phi4(y: FloatArray, r: FloatArray) -> float:
    """epoll_wait returning h = min(y_{c,1}, cache) descriptors: α + h/r_e."""
    h = cmin(y[C1], CACHE_SIZE)
    return float(safe_div(1.0, 1.0 / r[RN] + h / r[RE]) * y[T3] * y[S2] * y[L2] * H(y[C1]))


def full_jump4(y: FloatArray, d: FloatArray) -> None:
    h = min(y[C1], CACHE_SIZE)
    d[C1] = -h
    d[C2] = h - 1.0
    d[C3] = 1.0
    d[T3] = -1.0
    d[T4] = 1.0


def full_runnable(y: FloatArray, r: FloatArray) -> float:
    return float(y[T3] + y[T4] + y[T5] + y[T6] + y[T8] + y[T9] + y[T10] + y[T11] + y[T12])


def overhead(y: FloatArray, r: FloatArray) -> float:
    return float(r[RX] * y[T12])


def client(y: FloatArray, r: FloatArray) -> float:
    return float(r[RZ] * cmin(y[C0], r[KZ]))


def _full_transitions() -> tuple[TransitionClass, ...]:
    out: list[TransitionClass] = []
    for tr in STRUCTURE.transitions:
        if tr.name == "phi4":
            tr = TransitionClass(
                tr.name, "leader calls epoll_wait (α + h/r_e)", full_phi4, full_jump4, "server"
            )
        elif tr.name == "phi12":
            jump = {"c4": -1, "c0": 1, "t11": -1, "t12": 1}
            tr = TransitionClass(
                tr.name, "thread responds; the client has the connection", phi12, jump, "server"
            )
        out.append(tr)
    out.append(
        TransitionClass(
            "overhead", "thread's untimed CPU per message", overhead, {"t12": -1, "t1": 1}, "server"
        )
    )
    out.append(TransitionClass("client", "the client sends the next request", client, {"c0": -1, "c1": 1}))
    return tuple(out)


FULL = ModelStructure(
    name="lf-full",
    species=FULL_SPECIES,
    throughput="phi12",
    pools=(Pool("server", full_runnable),),
    transitions=_full_transitions(),
)


def initial_state(threads: int, connections: int, full: bool = False) -> FloatArray:
    import numpy as np

    y = np.zeros(len(FULL_SPECIES if full else SPECIES), dtype=np.float64)
    y[C1] = connections
    y[T1] = threads
    y[S1] = 1
    y[L1] = 1
    return y

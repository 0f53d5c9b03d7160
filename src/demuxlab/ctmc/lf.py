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
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
    RA,
    RC,
    RE,
    RI,
    RL,
    RO,
    RT,
    FloatArray,
    H,
    ModelStructure,
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


STRUCTURE = ModelStructure(
    name="lf",
    species=SPECIES,
    throughput="phi12",
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


def initial_state(threads: int, connections: int) -> FloatArray:
    import numpy as np

    y = np.zeros(len(SPECIES), dtype=np.float64)
    y[C1] = connections
    y[T1] = threads
    y[S1] = 1
    y[L1] = 1
    return y

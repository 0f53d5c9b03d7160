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
out and a calibration measures (docs/ctmc.md): the notifier call costs α + h/r_e for h descriptors
(α = 1/r_n, the per-call part: a call that found nothing sleeps and is woken), each worker spends 1/r_x
more per message (CPU its timed operations do not cover), and a response goes to the client (c0), which
sends the next request after 1/r_z (k_z messages at once) instead of at once.
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
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


def phi1(x: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * x[M1] * x[S1], x[M1] + x[T5]) * H(x[M1] + x[T5]) * H(x[C1])


def jump1(x: FloatArray, d: FloatArray) -> None:
    d[C1] = -x[C1]
    d[C2] = x[C1]
    d[M1] = -1.0
    d[M2] = 1.0
    d[S1] = -1.0
    d[S2] = 1.0


def phi2(x: FloatArray, r: FloatArray) -> float:
    return float(safe_div(r[RE], x[C2]) * x[M2] * x[S2] * H(x[C2]))


def phi3(x: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * x[M3] * x[S2])


def phi4(x: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * x[M4] * x[B1], x[M4] + x[T1]) * H(x[M4])


def phi5(x: FloatArray, r: FloatArray) -> float:
    return float(r[RP] * x[M5] * x[B2])


def phi6(x: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * x[M6] * x[B2])


def jump6(x: FloatArray, d: FloatArray) -> None:
    d[M6] = -1.0
    d[B1] = 1.0
    d[B2] = -1.0
    # "δ_{m,1} if x_{c,2} = 0, δ_{m,4} otherwise", written with H so that it is also defined on the reals.
    d[M1] = 1.0 - H(x[C2])
    d[M4] = H(x[C2])


def phi7(x: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * x[T1] * x[B1], x[M4] + x[T1]) * H(x[Q2])


def phi8(x: FloatArray, r: FloatArray) -> float:
    return float(r[RG] * x[T2] * x[B2])


def phi9(x: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * x[T3] * x[B2])


def phi10(x: FloatArray, r: FloatArray) -> float:
    return float(r[RI] * cmin(x[C3], x[T4]))


def phi11(x: FloatArray, r: FloatArray) -> float:
    return safe_div(r[RL] * x[T5] * x[S1], x[M1] + x[T5]) * H(x[M1] + x[T5])


def phi12(x: FloatArray, r: FloatArray) -> float:
    return float(r[RA] * x[T6] * x[S2])


def phi13(x: FloatArray, r: FloatArray) -> float:
    return float(r[RL] * x[T7] * x[S2])


def phi14(x: FloatArray, r: FloatArray) -> float:
    return float(r[RC] * x[T8])


def phi15(x: FloatArray, r: FloatArray) -> float:
    return float(r[RO] * cmin(x[C4], x[T9]))


def runnable(x: FloatArray, r: FloatArray) -> float:
    """Threads of the pool that want a CPU: monitor in m2, m3, m5, m6; workers in t2–t4, t6–t9."""
    return float(x[M2] + x[M3] + x[M5] + x[M6] + x[T2] + x[T3] + x[T4] + x[T6] + x[T7] + x[T8] + x[T9])


SERVER = (Pool("server", runnable),)

_PAPER = ModelStructure(
    name="hsha",
    species=SPECIES,
    throughput="phi15",
    pools=SERVER,
    transitions=(
        TransitionClass("phi1", "monitor acquires epoll lock, freezes the ready list", phi1, jump1),
        TransitionClass("phi2", "monitor calls epoll_wait", phi2, {"m2": -1, "m3": 1}),
        TransitionClass("phi3", "monitor releases epoll lock", phi3, {"m3": -1, "m4": 1, "s2": -1, "s1": 1}),
        TransitionClass("phi4", "monitor acquires queue lock", phi4, {"m4": -1, "m5": 1, "b1": -1, "b2": 1}),
        TransitionClass(
            "phi5",
            "monitor puts a descriptor into the queue",
            phi5,
            {"c2": -1, "c3": 1, "m5": -1, "m6": 1, "q1": -1, "q2": 1},
        ),
        TransitionClass("phi6", "monitor releases queue lock", phi6, jump6),
        TransitionClass("phi7", "worker acquires queue lock", phi7, {"t1": -1, "t2": 1, "b1": -1, "b2": 1}),
        TransitionClass("phi8", "worker pops a descriptor", phi8, {"t2": -1, "t3": 1, "q1": 1, "q2": -1}),
        TransitionClass("phi9", "worker releases queue lock", phi9, {"t3": -1, "t4": 1, "b1": 1, "b2": -1}),
        TransitionClass(
            "phi10", "worker receives the request", phi10, {"c3": -1, "c4": 1, "t4": -1, "t5": 1}
        ),
        TransitionClass("phi11", "worker acquires epoll lock", phi11, {"t5": -1, "t6": 1, "s1": -1, "s2": 1}),
        TransitionClass("phi12", "worker reactivates the descriptor", phi12, {"t6": -1, "t7": 1}),
        TransitionClass("phi13", "worker releases epoll lock", phi13, {"t7": -1, "t8": 1, "s1": 1, "s2": -1}),
        TransitionClass("phi14", "worker computes", phi14, {"t8": -1, "t9": 1}),
        TransitionClass(
            "phi15", "worker responds to the client", phi15, {"c1": 1, "c4": -1, "t1": 1, "t9": -1}
        ),
    ),
)


# Every step is a server thread's: all in the pool.
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

FULL_SPECIES: tuple[str, ...] = (*SPECIES, "c0", "t10")
C0, T10 = 25, 26


def full_phi2(x: FloatArray, r: FloatArray) -> float:
    """epoll_wait over the frozen batch of h = x_{c,2} descriptors: α + h/r_e."""
    return float(safe_div(1.0, 1.0 / r[RN] + x[C2] / r[RE]) * x[M2] * x[S2] * H(x[C2]))


def full_phi15(x: FloatArray, r: FloatArray) -> float:
    return float(r[RO] * cmin(x[C4], x[T9]))


def full_runnable(x: FloatArray, r: FloatArray) -> float:
    return float(
        x[M2] + x[M3] + x[M5] + x[M6] + x[T2] + x[T3] + x[T4] + x[T6] + x[T7] + x[T8] + x[T9] + x[T10]
    )


def overhead(x: FloatArray, r: FloatArray) -> float:
    return float(r[RX] * x[T10])


def client(x: FloatArray, r: FloatArray) -> float:
    return float(r[RZ] * cmin(x[C0], r[KZ]))


def _full_transitions() -> tuple[TransitionClass, ...]:
    out: list[TransitionClass] = []
    for tr in STRUCTURE.transitions:
        if tr.name == "phi2":
            tr = TransitionClass(
                tr.name, "monitor calls epoll_wait (α + h/r_e)", full_phi2, tr.jump, "server"
            )
        elif tr.name == "phi15":
            jump = {"c4": -1, "c0": 1, "t9": -1, "t10": 1}
            tr = TransitionClass(
                tr.name, "worker responds; the client has the connection", full_phi15, jump, "server"
            )
        out.append(tr)
    out.append(
        TransitionClass(
            "overhead", "worker's untimed CPU per message", overhead, {"t10": -1, "t1": 1}, "server"
        )
    )
    out.append(TransitionClass("client", "the client sends the next request", client, {"c0": -1, "c1": 1}))
    return tuple(out)


FULL = ModelStructure(
    name="hsha-full",
    species=FULL_SPECIES,
    throughput="phi15",
    pools=(Pool("server", full_runnable),),
    transitions=_full_transitions(),
)


def initial_state(threads: int, connections: int, full: bool = False) -> FloatArray:
    import numpy as np

    x = np.zeros(len(FULL_SPECIES if full else SPECIES), dtype=np.float64)
    x[C1] = connections
    x[M1] = 1
    x[Q1] = connections
    x[T1] = threads - 1
    x[S1] = 1
    x[B1] = 1
    return x

"""io_uring Proactor CTMC, one ring and its thread (the server's ``uring.c``: T threads, each with its own
ring and its share of the connections; and ``uring_shared.c`` with one thread, which handles inline).

The thread submits what it has prepared and reaps completions in one call (``io_uring_submit_and_get_
events``, timed as ``notify``); the kernel runs the receives and sends (inline at the submit, or as task
work when the owner enters the kernel), so their CPU is in that call, which is fitted per completion
reaped. A message makes two completions: its receive's (the request arrived) and its echo's send.

State (11 populations): connections c0 (the client has the response and is sending the next request), u1
(request arrived: its receive completion is ready), u2 (reaped, cached), u3 (the thread works on it), u4
(its send is prepared, to be submitted by the next call); send completions e1 (ready) e2 (reaped); the
thread g1 (in the submit-and-reap call; asleep while nothing is ready or prepared), g2 (takes the next
cached completion), g3 (works), g4 (prepares the send, and the per-message CPU the timed operations do
not cover). Initial state: u1 = connections, g1 = 1. Throughput = E[φ_work]: every message takes each step
once, so in the steady state that is also the rate of the echoes' send completions, at which the server
counts a message (CONTRACTS §1, since issue 48; not at its submission).

==========  ==========================================================  ==================================
name        rate                                                        jump
==========  ==========================================================  ==================================
reap        g1·H(u1 + e1 + u4) / (α + h/r_e)                            u4 → c0 and → e1 (submitted: the
                                                                        send runs), then he = min(e1, 64)
                                                                        e1 → e2, hu = min(u1, 64 − he)
                                                                        u1 → u2; h = he + hu; g1 → g2
take_send   r_t · g2 · H(e2)                                            e2 − 1 (prepares the next receive)
take_recv   r_t · g2 · H(u2) · (1 − H(e2))                              u2 → u3, g2 → g3
idle        r_t · g2 · (1 − H(e2)) · (1 − H(u2))                        g2 → g1
work        r_c · g3                                                    g3 → g4
prepare     r_x · g4                                                    u3 → u4, g4 → g2
client      r_z · min(c0, k_z)                                          c0 → u1
==========  ==========================================================  ==================================

α = 1/r_n, r_e per completion (``notify_by_events``), r_x: the thread's CPU per message less what
``notify`` and ``work`` cover. Runnable (pool ``server``): g1·H(u1 + e1 + u4) + g2 + g3 + g4. A
distributed ring's other threads are the pool's ``load``.
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    RC,
    RT,
    RX,
    FloatArray,
    ModelStructure,
    Pool,
    absent,
    mass,
    present,
    total,
)
from demuxlab.ctmc.parts import SERVER, awake, client_step, notifier_call, ring_batch, step
from demuxlab.ctmc.pattern import OpRole, PatternModel

SPECIES: tuple[str, ...] = ("c0", "u1", "u2", "u3", "u4", "e1", "e2", "g1", "g2", "g3", "g4")
C0, U1, U2, U3, U4, E1, E2, G1, G2, G3, G4 = range(11)


def reap_jump(x: FloatArray, d: FloatArray) -> None:
    sent = x[U4]
    ready = x[E1] + sent
    he = min(ready, CACHE_SIZE)
    hu = min(x[U1], CACHE_SIZE - he)
    d[U4] = -sent
    d[C0] = sent
    d[E1] = sent - he
    d[E2] = he
    d[U1] = -hu
    d[U2] = hu
    d[G1] = -1.0
    d[G2] = 1.0


# The thread sleeps in the submit-and-reap call while no completion is ready and nothing is prepared.
READY = (U1, E1, U4)

STRUCTURE = ModelStructure(
    name="uring",
    species=SPECIES,
    throughput="work",
    calls="reap",
    events_per_message=2,
    pools=(Pool(SERVER, total(awake(G1, *READY), G2, G3, G4)),),
    transitions=(
        step(
            "reap",
            "submits what is prepared, reaps completions",
            # the prepared sends run at the submit: their completions are reaped with the ready ones
            mass(notifier_call(ring_batch((E1, U4), U1)), G1) * present(*READY),
            reap_jump,
        ),
        step(
            "take_send",
            "a send completion: prepares the next receive",
            mass(RT, G2) * present(E2),
            {"e2": -1},
        ),
        step(
            "take_recv",
            "a receive completion: the request",
            mass(RT, G2) * present(U2) * absent(E2),
            {"u2": -1, "u3": 1, "g2": -1, "g3": 1},
        ),
        step(
            "idle", "no cached completion left", mass(RT, G2) * absent(E2) * absent(U2), {"g2": -1, "g1": 1}
        ),
        step("work", "works", mass(RC, G3), {"g3": -1, "g4": 1}),
        step("prepare", "prepares the send", mass(RX, G4), {"u3": -1, "u4": 1, "g4": -1, "g2": 1}),
        client_step(SPECIES, "u1"),
    ),
)


def initial_state(threads: int, connections: int) -> FloatArray:
    """One ring thread with ``connections`` connections."""
    return STRUCTURE.state(u1=connections, g1=1)


def _initial(threads: int, connections: int, full: bool) -> FloatArray:
    return initial_state(1, connections)


# One call submits and reaps: the ring's thread times no operation but its notifier call; what it does
# beyond it (the work aside) is its untimed CPU per message.
MODEL = PatternModel(
    "uring",
    STRUCTURE,
    _initial,
    (OpRole(("proactor",), (), notifies=True, overhead="r_x", works=True),),
    tagged=True,
    instant={
        "r_i": "runs in the kernel, inside the notifier call",
        "r_o": "runs in the kernel, inside the notifier call",
    },
)

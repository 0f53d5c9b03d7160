"""io_uring Proactor on one shared ring, T ≥ 2 (the server's ``uring_shared.c``): 1 completion thread
reaps completions and queues every received message; T − 1 handlers take one, work and submit its echo
(the send runs inline in their submit). With T = 1 the completion thread handles inline: the chain of
``uring.py`` with one thread.

State (17 populations): connections c0 (the client has it), u1 (request arrived: receive completion
ready), u2 (reaped, cached), u3 (queued or with a handler); send completions e1 (ready) e2 (reaped); queue
places q1 (empty) q2 (busy); completion thread w1 (reaping; asleep while nothing is ready), w2 (takes the
next cached completion), w3 (queues a message), w4 (re-submits a receive); handlers h1 (idle: waiting for
the queue), h2 (working), h3 (submitting the send), h4 (the per-message CPU its timed operations do not
cover). Initial state: u1 = q1 = connections, w1 = 1, h1 = T − 1. Throughput = E[φ_send].

==========  ==============================================  =====================================
name        rate                                            jump
==========  ==============================================  =====================================
reap        w1·H(u1 + e1) / (α + h/r_e)                     he = min(e1, 64) e1 → e2, hu = min(u1,
                                                            64 − he) u1 → u2; w1 → w2
take_send   r_t · w2 · H(e2)                                e2 − 1, w2 → w4
rearm       r_a · w4                                        w4 → w2 (prepares the receive)
take_recv   r_t · w2 · H(u2) · (1 − H(e2))                  u2 → u3, w2 → w3
put         r_p · w3                                        q1 → q2, w3 → w2
idle        r_t · w2 · (1 − H(e2)) · (1 − H(u2))            w2 → w1
get         r_g · h1 · H(q2)                                q2 → q1, h1 → h2
work        r_c · h2                                        h2 → h3
send        r_o · h3                                        u3 → c0, e1 + 1, h3 → h4
overhead    r_x · h4                                        h4 → h1
client      r_z · min(c0, k_z)                              c0 → u1
==========  ==============================================  =====================================

The queue lock and the submission lock are not modelled (their hold times, tens of ns, are far below the
steps here; HSHA's and the proactor's chains model theirs). Runnable (pool ``server``): w1·H(u1 + e1) +
w2 + w3 + w4 + h2 + h3 + h4.

:data:`SCHEDULED` is this chain on fewer cores than threads with the scheduler's wake-up measured (r_w): run
to block (sched.py), its roles the completion thread and the handlers (:data:`ROLES`).
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    RA,
    RC,
    RG,
    RO,
    RP,
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
from demuxlab.ctmc.parts import SERVER, awake, client_step, notifier_call, one_per_item, ring_batch, step
from demuxlab.ctmc.sched import Role, scheduled

SPECIES: tuple[str, ...] = (
    "c0", "u1", "u2", "u3", "e1", "e2", "q1", "q2", "w1", "w2", "w3", "w4", "h1", "h2", "h3", "h4",
)  # fmt: skip
C0, U1, U2, U3, E1, E2, Q1, Q2, W1, W2, W3, W4, H1, H2, H3, H4 = range(16)


def reap_jump(x: FloatArray, d: FloatArray) -> None:
    he = min(x[E1], CACHE_SIZE)
    hu = min(x[U1], CACHE_SIZE - he)
    d[E1] = -he
    d[E2] = he
    d[U1] = -hu
    d[U2] = hu
    d[W1] = -1.0
    d[W2] = 1.0


STRUCTURE = ModelStructure(
    name="uring-shared",
    species=SPECIES,
    throughput="send",
    calls="reap",
    events_per_message=2,
    pools=(Pool(SERVER, total(awake(W1, U1, E1), W2, W3, W4, H2, H3, H4)),),
    transitions=(
        step(
            "reap",
            "completion thread reaps completions",
            mass(notifier_call(ring_batch((E1,), U1)), W1) * present(U1, E1),
            reap_jump,
        ),
        step("take_send", "a send completion", mass(RT, W2) * present(E2), {"e2": -1, "w2": -1, "w4": 1}),
        step("rearm", "prepares the connection's next receive", mass(RA, W4), {"w4": -1, "w2": 1}),
        step(
            "take_recv",
            "a receive completion: the request",
            mass(RT, W2) * present(U2) * absent(E2),
            {"u2": -1, "u3": 1, "w2": -1, "w3": 1},
        ),
        step("put", "queues the message for a handler", mass(RP, W3), {"q1": -1, "q2": 1, "w3": -1, "w2": 1}),
        step(
            "idle", "no cached completion left", mass(RT, W2) * absent(E2) * absent(U2), {"w2": -1, "w1": 1}
        ),
        step(
            "get",
            "a handler takes a message",
            mass(RG, H1) * present(Q2),
            {"q2": -1, "q1": 1, "h1": -1, "h2": 1},
        ),
        step("work", "handler works", mass(RC, H2), {"h2": -1, "h3": 1}),
        step(
            "send",
            "handler submits the echo (the send runs inline)",
            mass(RO, H3),
            {"u3": -1, "c0": 1, "e1": 1, "h3": -1, "h4": 1},
        ),
        step("overhead", "handler's untimed CPU per message", mass(RX, H4), {"h4": -1, "h1": 1}),
        client_step(SPECIES, "u1"),
    ),
)


# On fewer cores than threads: run to block (sched.py). The completion thread wants a CPU once a completion
# is ready (w1) and in w2–w4; an idle handler once a message is queued for it (h1, one per message), and in
# h2–h4.
ROLES: tuple[Role, ...] = (
    Role(
        "completion",
        total(awake(W1, U1, E1), W2, W3, W4),
        ("reap", "take_send", "rearm", "take_recv", "put", "idle"),
    ),
    Role("handler", total(one_per_item(H1, Q2), H2, H3, H4), ("get", "work", "send", "overhead")),
)
SCHEDULED = scheduled(STRUCTURE, ROLES)


def initial_state(threads: int, connections: int) -> FloatArray:
    """1 completion thread and ``threads`` − 1 handlers (``threads`` ≥ 2)."""
    return STRUCTURE.state(u1=connections, q1=connections, w1=1, h1=threads - 1)

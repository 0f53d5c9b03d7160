"""io_uring Proactor on one shared ring, T ≥ 2 (the server's ``uring_shared.c``): 1 completion thread
reaps completions and queues every received message; T − 1 handlers take one, work and submit its echo
(the send runs inline in their submit). With T = 1 the completion thread handles inline: the chain of
``uring.py`` with one thread.

State (21 populations): connections c0 (the client has it), u1 (request arrived: receive completion
ready), u2 (reaped, cached), u3 (queued or with a handler); send completions e1 (ready) e2 (reaped); queue
places q1 (empty) q2 (busy); completion thread w1 (reaping; asleep while nothing is ready), w2 (takes the
next cached completion), w3 (queues a message), w5 (waits for the submission lock), w4 (re-submits a
receive, holding it); handlers h1 (idle: waiting for the queue), h2 (working), h5 (waits for the
submission lock), h3 (submitting the send, holding it), h4 (the per-message CPU its timed operations do not
cover); the ring's submission lock s1 (free), s2 (held), s3 (handed to a waiter asleep on it, who is being
woken). Initial state: u1 = q1 = connections, w1 = 1, h1 = T − 1, s1 = 1. Throughput = E[φ_send].

==================  ===========================================  ===========================================
name                rate                                         jump
==================  ===========================================  ===========================================
reap                w1·H(u1 + e1) / (α + h/r_e)                  he = min(e1, 64) e1 → e2, hu = min(u1,
                                                                 64 − he) u1 → u2; w1 → w2
take_send           r_t · w2 · H(e2)                             e2 − 1, w2 → w5
sq_lock_completion  r_l · w5 · s1 / (w5 + h5)                    w5 → w4, s1 → s2
rearm               r_a · w4                                     w4 → w2 (prepares the receive), s2 → s1,
                                                                 or → s3 while w5 + h5 > 0
woken_completion    r_h · s3 · w5 / (w5 + h5)                    w5 → w4, s3 → s2
take_recv           r_t · w2 · H(u2) · (1 − H(e2))               u2 → u3, w2 → w3
put                 r_p · w3                                     q1 → q2, w3 → w2
idle                r_t · w2 · (1 − H(e2)) · (1 − H(u2))         w2 → w1
get                 r_g · h1 · H(q2)                             q2 → q1, h1 → h2
work                r_c · h2                                     h2 → h5
sq_lock_handler     r_l · h5 · s1 / (w5 + h5)                    h5 → h3, s1 → s2
woken_handler       r_h · s3 · h5 / (w5 + h5)                    h5 → h3, s3 → s2
send                r_o · h3                                     u3 → c0, e1 + 1, h3 → h4, s2 → s1, or → s3
                                                                 while w5 + h5 > 0
overhead            r_x · h4                                     h4 → h1
client              r_z · min(c0, k_z)                           c0 → u1
==================  ===========================================  ===========================================

**The submission lock** (``sq_lock``): the handler holds it across its submit, in which the kernel runs the
send (1/r_o, the server's ``send`` timing: the lock's hold), and the completion thread while it re-submits
a receive (1/r_a, ``rearm``: its ``prep_recv`` and its share of the batch submit before each wait). A
thread that finds it held sleeps on it; the release then hands it to one of the sleepers, who runs after
its wake-up, 1/r_h (the server host's ``handoff_us``: wake-cost's, the waiter on the server's CPU), the
lock idle meanwhile (on fewer cores than threads rates.build leaves the hand-off instant: a waiter there
runs as the cores are shared). On 16 cores this is what stops the server near 60–70k msg/s whatever its
threads (docs/ctmc-reference.md, "uring-shared's submission lock"). Without the timings (runs before them, the
paper's rates) r_o and r_a are instant or the paper's, and without the hand-off's measure it is instant.
The queue lock is not modelled (its hold, tens of ns, is far below the steps here).
Runnable (pool ``server``): w1·H(u1 + e1) + w2 + w3 + w4 + w5·s1 + h2 + h3 + h4 + h5·s1.

:data:`SCHEDULED` is this chain on fewer cores than threads with the scheduler's wake-up measured (r_w): run
to block (sched.py), its roles the completion thread and the handlers (:data:`ROLES`), without the
hand-off: a waiter whose lock came free wants a core, and gets one as the scheduler's chain grants it.
"""

from __future__ import annotations

from dataclasses import replace

from demuxlab.ctmc import uring
from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    RA,
    RC,
    RG,
    RH,
    RL,
    RO,
    RP,
    RT,
    RX,
    FloatArray,
    ModelStructure,
    Pool,
    TransitionClass,
    absent,
    mass,
    present,
    total,
)
from demuxlab.ctmc.parts import (
    SERVER,
    awake,
    client_step,
    contended,
    notifier_call,
    one_per_item,
    ring_batch,
    step,
    waiting_for,
)
from demuxlab.ctmc.pattern import OpRole, PatternModel
from demuxlab.ctmc.sched import Role, scheduled
from demuxlab.ctmc.values import Rates

SPECIES: tuple[str, ...] = (
    "c0", "u1", "u2", "u3", "e1", "e2", "q1", "q2", "w1", "w2", "w3", "w4", "h1", "h2", "h3", "h4",
    "w5", "h5", "s1", "s2", "s3",
)  # fmt: skip
C0, U1, U2, U3, E1, E2, Q1, Q2, W1, W2, W3, W4, H1, H2, H3, H4, W5, H5, S1, S2, S3 = range(21)
# The shared ring's submission lock (sq_lock): the completion thread re-submitting a receive (w5 waiting,
# w4 holding) and a handler submitting its echo (h5 waiting, h3 holding).
SQ_LOCK = (W5, H5)


def reap_jump(x: FloatArray, d: FloatArray) -> None:
    he = min(x[E1], CACHE_SIZE)
    hu = min(x[U1], CACHE_SIZE - he)
    d[E1] = -he
    d[E2] = he
    d[U1] = -hu
    d[U2] = hu
    d[W1] = -1.0
    d[W2] = 1.0


# The submission lock's release (both jumps; numba compiles each jump alone, so each spells it out): free
# (s1) with no one waiting, else handed to a sleeping waiter (s3) until that one is woken, clipped-linear
# in the waiters so that the fluid splits as the SSA does on average.
def rearm_jump(x: FloatArray, d: FloatArray) -> None:
    handed = min(x[W5] + x[H5], 1.0)
    d[W4] = -1.0
    d[W2] = 1.0
    d[S2] = -1.0
    d[S1] = 1.0 - handed
    d[S3] = handed


def send_jump(x: FloatArray, d: FloatArray) -> None:
    handed = min(x[W5] + x[H5], 1.0)
    d[U3] = -1.0
    d[C0] = 1.0
    d[E1] = 1.0
    d[H3] = -1.0
    d[H4] = 1.0
    d[S2] = -1.0
    d[S1] = 1.0 - handed
    d[S3] = handed


def _chain(handoff: bool) -> ModelStructure:
    """The chain; ``handoff``: a lock released while someone waits for it is handed to a sleeping waiter,
    who runs after the wake-up 1/r_h (a core per thread or processor sharing); without (run to block), the
    waiters take it as they get a core, as the scheduler's chain grants them.

    Long because: it is the chain's table of transitions, one ``step`` each in the order of the module's
    table, as every chain module writes its chain; split, no one place would show the chain whole."""
    released = {"s2": -1, "s1": 1}
    woken: tuple[TransitionClass, ...] = ()
    if handoff:
        woken = (
            # the handed lock goes to one sleeper, in the lock-competition shares of the acquisitions
            step(
                "woken_completion",
                "completion thread woken with the lock",
                contended(RH, (W5, S3), SQ_LOCK),
                {"w5": -1, "w4": 1, "s3": -1, "s2": 1},
            ),
            step(
                "woken_handler",
                "handler woken with the lock",
                contended(RH, (H5, S3), SQ_LOCK),
                {"h5": -1, "h3": 1, "s3": -1, "s2": 1},
            ),
        )
    return ModelStructure(
        name="uring-shared",
        species=SPECIES,
        throughput="send",
        calls="reap",
        events_per_message=2,
        pools=(
            Pool(
                SERVER,
                total(awake(W1, U1, E1), W2, W3, W4, waiting_for(W5, S1), H2, H3, H4, waiting_for(H5, S1)),
            ),
        ),
        transitions=(
            step(
                "reap",
                "completion thread reaps completions",
                mass(notifier_call(ring_batch((E1,), U1)), W1) * present(U1, E1),
                reap_jump,
            ),
            step("take_send", "a send completion", mass(RT, W2) * present(E2), {"e2": -1, "w2": -1, "w5": 1}),
            step(
                "sq_lock_completion",
                "completion thread takes the submission lock",
                contended(RL, (W5, S1), SQ_LOCK) * present(*SQ_LOCK),
                {"w5": -1, "w4": 1, "s1": -1, "s2": 1},
            ),
            step(
                "rearm",
                "prepares the connection's next receive, releases the lock",
                mass(RA, W4),
                rearm_jump if handoff else {"w4": -1, "w2": 1, **released},
            ),
            *woken,
            step(
                "take_recv",
                "a receive completion: the request",
                mass(RT, W2) * present(U2) * absent(E2),
                {"u2": -1, "u3": 1, "w2": -1, "w3": 1},
            ),
            step(
                "put",
                "queues the message for a handler",
                mass(RP, W3),
                {"q1": -1, "q2": 1, "w3": -1, "w2": 1},
            ),
            step(
                "idle",
                "no cached completion left",
                mass(RT, W2) * absent(E2) * absent(U2),
                {"w2": -1, "w1": 1},
            ),
            step(
                "get",
                "a handler takes a message",
                mass(RG, H1) * present(Q2),
                {"q2": -1, "q1": 1, "h1": -1, "h2": 1},
            ),
            step("work", "handler works", mass(RC, H2), {"h2": -1, "h5": 1}),
            step(
                "sq_lock_handler",
                "handler takes the submission lock",
                contended(RL, (H5, S1), SQ_LOCK) * present(*SQ_LOCK),
                {"h5": -1, "h3": 1, "s1": -1, "s2": 1},
            ),
            step(
                "send",
                "handler submits the echo (the send runs inline), releases the lock",
                mass(RO, H3),
                send_jump if handoff else {"u3": -1, "c0": 1, "e1": 1, "h3": -1, "h4": 1, **released},
            ),
            step("overhead", "handler's untimed CPU per message", mass(RX, H4), {"h4": -1, "h1": 1}),
            client_step(SPECIES, "u1"),
        ),
    )


STRUCTURE = _chain(handoff=True)

# On fewer cores than threads: run to block (sched.py), without the hand-off: a waiter whose lock came free
# wants a core and gets one as the scheduler grants it. The completion thread wants a CPU once a
# completion is ready (w1), in w2–w4 and once the lock it waits for is free (w5); an idle handler once a
# message is queued for it (h1, one per message), in h2–h4 and once its lock is free (h5).
ROLES: tuple[Role, ...] = (
    Role(
        "completion",
        total(awake(W1, U1, E1), W2, W3, W4, waiting_for(W5, S1)),
        ("reap", "take_send", "sq_lock_completion", "rearm", "take_recv", "put", "idle"),
    ),
    Role(
        "handler",
        total(one_per_item(H1, Q2), H2, H3, H4, waiting_for(H5, S1)),
        ("get", "work", "sq_lock_handler", "send", "overhead"),
    ),
)
SCHEDULED = scheduled(_chain(handoff=False), ROLES)


def initial_state(threads: int, connections: int) -> FloatArray:
    """1 completion thread and ``threads`` − 1 handlers (``threads`` ≥ 2)."""
    return STRUCTURE.state(u1=connections, q1=connections, w1=1, h1=threads - 1, s1=1)


def inline(rates: Rates) -> Rates:
    """uring-shared's rates for its one thread that handles inline (uring's chain, which has no submit or
    re-submission step): the completion thread's re-submission of each receive, which a calibration timed at
    T ≥ 2 under the submission lock and took out of its untimed CPU (r_a), is that thread's CPU per message
    again. The handler's own submit of each echo (r_o) has no inline counterpart: with one thread the echo
    goes out in the loop's batch submit, with the receives. (On the 2-core host, 2026-11-29: with r_o
    folded in too the one-thread points were −22.3 % and −5.5 %, with r_a alone −4.2 % and +12.7 %.)"""
    if not rates.source.get("r_a", "").startswith("op:"):
        return rates
    source = {**rates.source, "r_x": rates.source.get("r_x", "") + " + r_a (inline)"}
    return replace(rates, r_x=1.0 / (1.0 / rates.r_x + 1.0 / rates.r_a), source=source)


def _initial(threads: int, connections: int, full: bool) -> FloatArray:
    return initial_state(threads, connections)


# The completion thread reaps, queues and re-submits each receive under the submission lock (untimed CPU
# per call, into α); a handler takes, works and submits its echo under the lock (the send runs inline).
COMPLETION = OpRole(
    ("completion",), (("queue_put", "r_p"), ("rearm", "r_a")), notifies=True, overhead="r_n", works=False
)
HANDLER = OpRole(
    ("handler",), (("queue_get", "r_g"), ("send", "r_o")), notifies=False, overhead="r_x", works=True
)
MODEL = PatternModel(
    "uring-shared",
    STRUCTURE,
    _initial,
    (COMPLETION, HANDLER),
    scheduled=SCHEDULED,
    inline=uring.MODEL,
    inline_rates=inline,
    instant={"r_i": "runs in the kernel, inside the notifier call"},
    timed_since={
        "r_o": "the runs predate the timing of the handler's submit under the submission lock",
        "r_a": "the runs predate the timing of the receive's re-submission under the submission lock",
    },
    handoff="the submission lock's hand-off to a sleeping waiter",
    peek_only=True,
    waiting_dispatcher=True,
)

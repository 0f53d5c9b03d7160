"""Thread-per-connection CTMC (seed 002's design, the server's ``tpc.c``).

Every connection has its own thread, which blocks in ``recv`` until the request arrives, works, sends the
response and blocks again. ``--threads T`` is the number of CPU slots the threads are pinned to (slot
k mod T, its CPU ``cpus[slot mod n]``): the threads share min(T, n) cores — the model's ``cores``.

State (7 populations): connections, each with its thread, in c0 (the client has the response and is
sending the next request), k1 (the request arrived: the thread is woken and scheduled), k2 (receiving), k3
(working), k4 (sending) or tw (its send found the client asleep: the thread wakes it); and zc (the client so
woken, not yet running). Initial state: k1 = connections. Throughput = E[φ_send].

=========  ======================  ===========  =======================================================
name       rate                    jump         fitted from
=========  ======================  ===========  =======================================================
wake       r_x · k1                k1 → k2      CPU − timed ops per message (the wake-up, the switch)
recv       r_i · k2                k2 → k3      recv / message (its non-blocking part: CONTRACTS §1)
work       r_c · k3                k3 → k4      input: 1/work
send       r_o · k4                k4 → c0 (tw) send / message, less ω × the client's sleeps per message
send_wake  r_s · tw                tw → c0      wake-cost (ω = 1/r_s)
client     r_z · min(c0, k_z)      c0 → k1      client CPU
client_up  r_u · zc                zc → 0       the client's sleeps per message
=========  ======================  ===========  =======================================================

Runnable threads (pool ``server``): k1 + k2 + k3 + k4 + tw (a thread in c0 sleeps in recv). No lock is
shared. A send that finds the client asleep (c0 = tw = 0 before it: no message for it, none on its way) goes
to tw, where the thread pays the client's wake-up ω before the client has the response (c0) and the thread
blocks in recv again, and the client (zc = 1) sends nothing until it runs, after its latency 1/r_u
(``client`` carries a factor 1 − zc; parts.sending_wakes, docs/ctmc-reference.md "The send that wakes the
client"). Every request wakes its thread, asleep in recv: that wake-up is the same at every setting, so the
client's turnaround r_z holds it and the chain has no ``client_wake``. With the paper's rates (recv, send of
seed 001 §V-A) the wake-ups, the latency and the client are instant.
"""

from __future__ import annotations

from demuxlab.ctmc.engine import (
    RC,
    RI,
    RO,
    RX,
    FloatArray,
    H,
    ModelStructure,
    Pool,
    mass,
    total,
)
from demuxlab.ctmc.parts import CLIENT_WAKING, SERVER, WAKER, sending_wakes, step, woken_client_steps
from demuxlab.ctmc.pattern import OpRole, PatternModel

SPECIES: tuple[str, ...] = ("c0", "k1", "k2", "k3", "k4", WAKER, CLIENT_WAKING)
C0, K1, K2, K3, K4, TW, ZC = range(7)


def send_jump(x: FloatArray, d: FloatArray) -> None:
    """The response to the client (c0; its thread back in recv), or, where the client had no message and
    none on its way (asleep), first the thread's wake-up of it (tw, with its connection) and the client
    waking (zc; parts.sending_wakes)."""
    asleep = 1.0 - H(x[C0] + x[TW])
    d[K4] = -1.0
    d[C0] = 1.0 - asleep
    d[TW] = asleep
    d[ZC] = asleep


STRUCTURE = ModelStructure(
    name="tpc",
    species=SPECIES,
    throughput="send",
    pools=(Pool(SERVER, total(K1, K2, K3, K4, TW)),),
    transitions=(
        step("wake", "the connection's thread is woken and scheduled", mass(RX, K1), {"k1": -1, "k2": 1}),
        step("recv", "receives the request", mass(RI, K2), {"k2": -1, "k3": 1}),
        step("work", "works", mass(RC, K3), {"k3": -1, "k4": 1}),
        step("send", "sends the response", mass(RO, K4), send_jump),
        sending_wakes(SPECIES, "c0"),
        *woken_client_steps(SPECIES, "k1"),
    ),
)


def initial_state(threads: int, connections: int) -> FloatArray:
    """``connections`` threads, every request just arrived (``threads`` are CPU slots: see cores)."""
    return STRUCTURE.state(k1=connections)


def _initial(threads: int, connections: int, full: bool) -> FloatArray:
    return initial_state(threads, connections)


MODEL = PatternModel(
    "tpc",
    STRUCTURE,
    _initial,
    (OpRole(("connection",), (("send", "r_o"),), notifies=False, overhead="r_x", works=True),),
    slots=True,
    instant={
        "r_i": "tpc's recv blocks: its time is waiting, its CPU is in r_x",
        "r_a": "tpc does not re-arm",
    },
)

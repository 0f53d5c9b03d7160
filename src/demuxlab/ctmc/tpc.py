"""Thread-per-connection CTMC (seed 002's design, the server's ``tpc.c``).

Every connection has its own thread, which blocks in ``recv`` until the request arrives, works, sends the
response and blocks again. ``--threads T`` is the number of CPU slots the threads are pinned to (slot
k mod T, its CPU ``cpus[slot mod n]``): the threads share min(T, n) cores — the model's ``cores``.

State (5 populations, all connections, each with its thread): c0 (the client has the response and is
sending the next request), k1 (the request arrived: the thread is woken and scheduled), k2 (receiving), k3
(working), k4 (sending). Initial state: k1 = connections. Throughput = E[φ_send].

=========  ======================  ===========  =======================================================
name       rate                    jump         fitted from
=========  ======================  ===========  =======================================================
wake       r_x · k1                k1 → k2      CPU − timed ops per message (the wake-up, the switch)
recv       r_i · k2                k2 → k3      recv / message (its non-blocking part: CONTRACTS §1)
work       r_c · k3                k3 → k4      input: 1/work
send       r_o · k4                k4 → c0      send / message
client     r_z · min(c0, k_z)      c0 → k1      client CPU
=========  ======================  ===========  =======================================================

Runnable threads (pool ``server``): k1 + k2 + k3 + k4 (a thread in c0 sleeps in recv). No lock is shared.
With the paper's rates (recv, send of seed 001 §V-A) the wake-up and the client are instant.
"""

from __future__ import annotations

from demuxlab.ctmc.engine import RC, RI, RO, RX, FloatArray, ModelStructure, Pool, mass, total
from demuxlab.ctmc.parts import SERVER, client_step, step
from demuxlab.ctmc.pattern import OpRole, PatternModel

SPECIES: tuple[str, ...] = ("c0", "k1", "k2", "k3", "k4")
C0, K1, K2, K3, K4 = range(5)

STRUCTURE = ModelStructure(
    name="tpc",
    species=SPECIES,
    throughput="send",
    pools=(Pool(SERVER, total(K1, K2, K3, K4)),),
    transitions=(
        step("wake", "the connection's thread is woken and scheduled", mass(RX, K1), {"k1": -1, "k2": 1}),
        step("recv", "receives the request", mass(RI, K2), {"k2": -1, "k3": 1}),
        step("work", "works", mass(RC, K3), {"k3": -1, "k4": 1}),
        step("send", "sends the response", mass(RO, K4), {"k4": -1, "c0": 1}),
        client_step(SPECIES, "k1"),
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

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

import numpy as np

from demuxlab.ctmc.engine import (
    KZ,
    RC,
    RI,
    RO,
    RX,
    RZ,
    FloatArray,
    ModelStructure,
    Pool,
    TransitionClass,
    cmin,
)

SPECIES: tuple[str, ...] = ("c0", "k1", "k2", "k3", "k4")
C0, K1, K2, K3, K4 = range(5)


def wake(x: FloatArray, r: FloatArray) -> float:
    return float(r[RX] * x[K1])


def recv(x: FloatArray, r: FloatArray) -> float:
    return float(r[RI] * x[K2])


def work(x: FloatArray, r: FloatArray) -> float:
    return float(r[RC] * x[K3])


def send(x: FloatArray, r: FloatArray) -> float:
    return float(r[RO] * x[K4])


def client(x: FloatArray, r: FloatArray) -> float:
    return float(r[RZ] * cmin(x[C0], r[KZ]))


def runnable(x: FloatArray, r: FloatArray) -> float:
    return float(x[K1] + x[K2] + x[K3] + x[K4])


STRUCTURE = ModelStructure(
    name="tpc",
    species=SPECIES,
    throughput="send",
    pools=(Pool("server", runnable),),
    transitions=(
        TransitionClass(
            "wake", "the connection's thread is woken and scheduled", wake, {"k1": -1, "k2": 1}, "server"
        ),
        TransitionClass("recv", "receives the request", recv, {"k2": -1, "k3": 1}, "server"),
        TransitionClass("work", "works", work, {"k3": -1, "k4": 1}, "server"),
        TransitionClass("send", "sends the response", send, {"k4": -1, "c0": 1}, "server"),
        TransitionClass("client", "the client sends the next request", client, {"c0": -1, "k1": 1}),
    ),
)


def initial_state(threads: int, connections: int) -> FloatArray:
    """``connections`` threads, every request just arrived (``threads`` are CPU slots: see cores)."""
    x = np.zeros(len(SPECIES), dtype=np.float64)
    x[K1] = connections
    return x

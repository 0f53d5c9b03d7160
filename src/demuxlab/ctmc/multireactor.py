"""The multi-reactor's model: T reactors, each with its own notifier and its N/T connections (the server's
``multireactor.c``). Its chain is one reactor's (``reactor.py``, with that reactor's share of the
connections and of the client); the other reactors are runnable threads on the same cores, the pool's
``load``, found by a fixed point (predict.py). Calibrated at one thread, one reactor, as the reactor is.
"""

from __future__ import annotations

from demuxlab.ctmc import reactor
from demuxlab.ctmc.pattern import PatternModel

MODEL = PatternModel("multireactor", reactor.STRUCTURE, reactor.MODEL.initial, (reactor.ROLE,), tagged=True)

"""The platform's vocabulary: each name more than one part spells, defined once.

The bottom layer (it imports nothing of demuxlab): the spec's schema, the database's check constraints,
the run record's schema, the CLI's choices and the dashboard's controls take their lists from here, and a
test (tests/unit/test_vocab.py) checks that the copies a tool needs in its own format (the JSON schemas,
the migrations' constraints, the C server's `--list`) say the same.
"""

from __future__ import annotations

from typing import Final

# -- designs -----------------------------------------------------------------------------------------------
# Event-processing design patterns the server implements (`demux-server --list`, images/README.md).
PATTERNS: Final[tuple[str, ...]] = (
    "reactor",
    "hsha",
    "lf",
    "tpc",
    "proactor",
    "uring",
    "multireactor",
    "uring-shared",
)
# I/O notifiers; "none" is thread-per-connection's blocking I/O.
NOTIFIERS: Final[tuple[str, ...]] = ("select", "poll", "epoll-lt", "epoll-et", "uring", "none")

# -- runs --------------------------------------------------------------------------------------------------
RUN_OK: Final = "ok"
RUN_FAILED: Final = "failed"
RUN_STATUSES: Final[tuple[str, ...]] = (RUN_OK, RUN_FAILED)
# The run record's format tag (CONTRACTS.md §5): the launchers write it, ingest accepts only it.
RUN_RECORD_FORMAT: Final = "demuxlab.run/1"

# -- models ------------------------------------------------------------------------------------------------
# How a CTMC is solved: stochastic simulation with batch means (seed 001's method), the mean-field ODE, or
# the exact stationary distribution (small state spaces only).
METHOD_SSA: Final = "ssa"
METHOD_FLUID: Final = "fluid"
METHOD_EXACT: Final = "exact"
SOLVER_METHODS: Final[tuple[str, ...]] = (METHOD_SSA, METHOD_FLUID, METHOD_EXACT)
# Where a prediction's rates came from: the seed paper's table, or a calibration fitted from runs.
SOURCE_PAPER: Final = "paper"
SOURCE_CALIBRATION: Final = "calibration"
RATE_SOURCES: Final[tuple[str, ...]] = (SOURCE_PAPER, SOURCE_CALIBRATION)

# -- claims ------------------------------------------------------------------------------------------------
HOLDS: Final = "holds"
REFUTED: Final = "refuted"
INCONCLUSIVE: Final = "inconclusive"
NOT_TESTABLE: Final = "not testable"
VERDICTS: Final[tuple[str, ...]] = (HOLDS, REFUTED, INCONCLUSIVE, NOT_TESTABLE)

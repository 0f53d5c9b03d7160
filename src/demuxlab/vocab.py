"""The platform's vocabulary: each name more than one part spells, defined once.

The bottom layer (it imports nothing of demuxlab): the spec's schema (filled in when it is loaded), the
database's check constraints, the run record's schema (which ingest checks), the CLI's choices and the
dashboard's controls take their lists from here, and a test (tests/unit/test_vocab.py) checks that the
copies a tool needs in its own format (the migrations' constraints, the C server's `--list`) say the same.
The pattern facts a spec needs live here too (:data:`CALIBRATION_THREADS`), so a spec loads without the
models.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
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
# The concurrency of a pattern's calibration runs (seed 001 §V-A): the lowest thread count that runs every
# role of the pattern, e.g. HSHA's monitor + one worker = 2, LF 1. uring-shared at 1 thread handles inline,
# so its hand-off runs from 2. The spec's calibration points and the CTMC calibration both read it.
CALIBRATION_THREADS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "reactor": 1,
        "hsha": 2,
        "lf": 1,
        "tpc": 1,
        "proactor": 2,
        "uring": 1,
        "multireactor": 1,
        "uring-shared": 2,
    }
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
# A calibration row that stores why an experiment's calibration of a design was not fitted (its method).
CALIBRATION_REFUSED: Final = "refused"
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

# -- validity checks ---------------------------------------------------------------------------------------
# A run's checks (demuxlab.validity, the run_checks table): a fail flags the run (never hides it); a warning
# is a deviation the host leaves no choice about, or one that does not bias the result by itself; unknown:
# the host or the record cannot say (the reason says why).
CHECK_PASS: Final = "pass"
CHECK_WARN: Final = "warn"
CHECK_FAIL: Final = "fail"
CHECK_UNKNOWN: Final = "unknown"
CHECK_VERDICTS: Final[tuple[str, ...]] = (CHECK_PASS, CHECK_WARN, CHECK_FAIL, CHECK_UNKNOWN)
# Every check, in the order a run's are listed: the samples, the schedule, where the sides ran, the CPUs'
# clock, the network; "order" is the experiment's (its runs' order against their results).
CHECKS: Final[tuple[str, ...]] = (
    "independence",
    "stationarity",
    "arrivals",
    "placement.core",
    "placement.cache",
    "placement.numa",
    "placement.irq",
    "cpu.governor",
    "cpu.frequency",
    "cpu.turbo",
    "network",
    "order",
)

"""The models as the solvers take them: seed 001's rates (:func:`paper_rates`), and the chain of a pattern at
a setting (:func:`build`), dispatched through the registry of pattern models (:mod:`demuxlab.ctmc.registry`).
The values the models read (:class:`Rates`, :class:`Host`) are :mod:`demuxlab.ctmc.values`', re-exported
here."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from demuxlab import vocab
from demuxlab.ctmc.engine import (
    CORES,
    KZ,
    LOAD,
    RATE_NAMES,
    RH,
    ModelInstance,
    ModelStructure,
    parameters_read,
)
from demuxlab.ctmc.registry import model_of, patterns
from demuxlab.ctmc.values import (
    ALL_RATE_FIELDS,
    EXTRA_FIELDS,
    INSTANT_RATE,
    NO_REARM_NOTIFIERS,
    RATE_FIELDS,
    REQUIRES,
    UNBOUNDED,
    Host,
    Rates,
    requires,
    workload_key,
)
from demuxlab.errors import DemuxlabError

__all__ = [
    "ALL_RATE_FIELDS", "DESIGNS", "EXTRA_FIELDS", "INSTANT_RATE", "NO_REARM_NOTIFIERS", "PATTERNS",
    "RATE_FIELDS", "REQUIRES", "SCHEDULED", "UNBOUNDED", "Design", "Host", "Rates", "build",
    "calibration_threads", "check_pattern", "min_threads", "paper_rates", "rates_read", "requires",
    "structure", "structures", "tagged_connections", "workload_key",
]  # fmt: skip

PATTERNS: tuple[str, ...] = vocab.PATTERNS


@dataclass(frozen=True)
class Design:
    """What a pattern's chains take of threads (a view of its registry record): the fewest and the most they
    describe (None: no bound of the model's own; the server's range is ``demux-server --list``'s,
    :mod:`demuxlab.designs`), whether its threads are independent copies (one thread's chain, the others
    in the pool's load: ``tagged``), and its calibration concurrency (one thread per role)."""

    pattern: str
    min_threads: int
    max_threads: int | None
    tagged: bool = False

    @property
    def calibration_threads(self) -> int:
        return model_of(self.pattern).calibration_threads


class _Designs(Mapping[str, Design]):
    """:class:`Design` per registered pattern, read from the registry when asked."""

    def __getitem__(self, pattern: str) -> Design:
        if pattern not in patterns():  # a Mapping's KeyError (``in``, ``.get``), as the dict it was
            raise KeyError(pattern)
        m = model_of(pattern)
        return Design(pattern, m.min_threads, m.max_threads, m.tagged)

    def __iter__(self) -> Iterator[str]:
        return iter(patterns())

    def __len__(self) -> int:
        return len(patterns())


class _Scheduled(Mapping[str, ModelStructure]):
    """The run-to-block chain (sched.py) of each pattern that has one: its threads are of several kinds."""

    def __getitem__(self, pattern: str) -> ModelStructure:
        st = model_of(pattern).scheduled if pattern in patterns() else None
        if st is None:
            raise KeyError(pattern)
        return st

    def __iter__(self) -> Iterator[str]:
        return (p for p in patterns() if model_of(p).scheduled is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


DESIGNS: Mapping[str, Design] = _Designs()
SCHEDULED: Mapping[str, ModelStructure] = _Scheduled()


def paper_rates(pattern: str, notifier: str | None = None) -> Rates:
    """Seed 001 §V-A: the rates measured on the paper's 2×8 Opteron (r_e differs between the patterns).

    The other patterns' steps are the same operations (receive, send, re-arm, notifier, queue, lock) and
    get the same rates; what the paper does not measure (per-call notifier cost, untimed CPU, the client)
    is instant. With ``notifier`` epoll-et the re-arm is instant (it never re-arms)."""
    source = {k: "paper" for k in ALL_RATE_FIELDS}
    for k in EXTRA_FIELDS:
        source[k] = "instant:not in seed 001"
    source["r_w"] = "instant:not in seed 001 (more threads than cores share them: processor sharing)"
    source["r_v"] = "instant:not in seed 001 (the client's wake-ups cost it nothing beyond r_z)"
    source["r_k"] = "instant:not in seed 001 (a re-arm does not kick the waiting dispatcher)"
    source["r_u"] = "instant:not in seed 001 (a woken client runs at once)"
    source["r_h"] = "instant:not in seed 001 (a released lock goes to its waiter at once)"
    r_a = 1 / 0.589
    if notifier in NO_REARM_NOTIFIERS:
        r_a = INSTANT_RATE
        source["r_a"] = f"instant:{notifier} does not re-arm"
    return Rates(
        r_l=1 / 0.013,
        r_p=1 / 0.215,
        r_g=1 / 0.256,
        r_t=1 / 0.01,
        r_i=1 / 9.2,
        r_o=1 / 1.9,
        r_a=r_a,
        r_e=1 / 2.9 if model_of(pattern).waiting_dispatcher else 1 / 0.635,
        source=source,
    )


def check_pattern(pattern: str) -> None:
    model_of(pattern)


def structure(
    pattern: str, threads: int | None = None, full: bool = False, scheduled: bool = False
) -> ModelStructure:
    """The chain of ``pattern`` (at ``threads``, where the structure depends on it; ``full``: HSHA's and
    LF's calibrated chains instead of seed 001's; ``scheduled``: the run-to-block chain of a pattern that
    has one, for more threads than cores)."""
    return model_of(pattern).structure(threads, full=full, scheduled=scheduled)


def structures(pattern: str) -> tuple[ModelStructure, ...]:
    """Every chain ``pattern`` may use (to compile them ahead)."""
    return model_of(pattern).structures()


@functools.cache
def rates_read(pattern: str) -> tuple[str, ...]:
    """The rates (:data:`ALL_RATE_FIELDS`, in that order) some chain of ``pattern`` reads: those a change of
    can move its prediction. Read from the chains' own expressions; the vector's r_s is r_v at the server's
    share (:meth:`Rates.vector`)."""
    check_pattern(pattern)
    read: set[str] = set()
    for st in structures(pattern):
        positions = parameters_read(st)
        if positions is None:
            return ALL_RATE_FIELDS
        read |= {RATE_NAMES[i] for i in positions}
    if "r_s" in read:
        read.add("r_v")
    return tuple(k for k in ALL_RATE_FIELDS if k in read)


def min_threads(pattern: str) -> int:
    """The fewest threads ``pattern``'s chains describe (one per role; 1 where one thread does every role's
    part)."""
    return model_of(pattern).min_threads


def calibration_threads(pattern: str) -> int:
    """The concurrency of a pattern's calibration runs: one thread per role (seed 001 §V-A: HSHA 2, LF 1)."""
    return model_of(pattern).calibration_threads


def tagged_connections(pattern: str, threads: int, connections: int) -> int:
    """For a pattern of independent threads (multireactor, uring), the connections of the one thread the
    chain follows: the server deals them out round-robin, N/T each (rounded; at least 1)."""
    if not model_of(pattern).tagged:
        return connections
    return max(1, round(connections / min(threads, connections)))


def build(
    pattern: str,
    threads: int,
    work_us: float,
    connections: int = 512,
    rates: Rates | None = None,
    *,
    host: Host | None = None,
    notifier: str | None = None,
    others: float = 0.0,
) -> ModelInstance:
    """The CTMC of ``pattern`` with ``threads`` threads in total (HSHA: 1 monitor + threads − 1 workers;
    tpc: ``threads`` CPU slots) on ``host`` (default: a core per thread, no client: seed 001).

    For the patterns of independent threads (multireactor, uring) the chain is one thread's, with its
    share of the connections (:func:`tagged_connections`) and of the client; ``others`` is how many of the
    other threads are runnable on average (predict.py finds it by a fixed point), added to the pool's load.
    """
    m = model_of(pattern)
    _check_threads(m.pattern, threads, m.min_threads, m.max_threads)
    if isinstance(connections, bool) or not isinstance(connections, int) or connections < 1:
        raise DemuxlabError(f"connections: must be a positive integer, got {connections!r}")
    h = host if host is not None else Host()
    rates = rates if rates is not None else paper_rates(pattern, notifier)
    cores = h.cores
    n = connections
    kz_scale = 1.0
    if m.slots:
        cores = min(threads, cores) if cores is not None else threads
    if m.tagged:
        n = tagged_connections(pattern, threads, connections)
        kz_scale = 1.0 / min(threads, connections)
    # HSHA's and LF's calibrated chains wherever the rates go beyond seed 001's or the client is modelled
    full = m.full is not None and (rates.extended or h.client_threads is not None)
    st = m.structure(threads, full=full)
    init = m.initial_state(threads, n, full)
    if rates.scheduled and cores is not None and threads > cores:
        # Run to block where the threads outnumber the cores and the scheduler's wake-up was measured: the
        # same state, no core held yet (they are granted at once).
        st = m.structure(threads, full=full, scheduled=True)
        init = np.concatenate([init, np.zeros(len(st.species) - len(init))])
    if m.inline is not None and threads == 1 and m.inline_rates is not None:
        rates = m.inline_rates(rates)
    r = rates.vector(work_us, Host(cores, h.client_threads, h.client_cores, h.load))
    if cores is not None and threads > cores:
        # A lock's hand-off costs its sleeping waiter's wake-up on a core of its own; on shared cores the
        # waiter runs as the cores are shared, and the lock goes to whoever runs first.
        r[RH] = UNBOUNDED
    r[KZ] *= kz_scale
    r[LOAD] += float(others)
    return ModelInstance(
        structure=st,
        initial=init,
        r=r,
        parameters={
            "pattern": pattern,
            "notifier": notifier,
            "threads": threads,
            "work_us": float(work_us),
            "connections": connections,
            "chain_connections": n,
            "cores": None if r[CORES] >= UNBOUNDED else int(r[CORES]),
            "others": float(others),
            "rates": rates.as_dict(),
        },
    )


def _check_threads(pattern: str, threads: int, least: int, most: int | None) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < least:
        raise DemuxlabError(f"threads: {pattern} needs at least {least} thread(s), got {threads!r}")
    if most is not None and threads > most:
        raise DemuxlabError(f"threads: {pattern} runs at most {most} thread(s), got {threads}")

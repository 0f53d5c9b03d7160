"""Service rates of the models (per µs), the host they run on, and the model instances built from them."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from demuxlab import vocab
from demuxlab.ctmc import hsha, lf, proactor, reactor, tpc, uring, uring_shared
from demuxlab.ctmc.engine import (
    CORES,
    KZ,
    LOAD,
    RATE_NAMES,
    RH,
    FloatArray,
    ModelInstance,
    ModelStructure,
    parameters_read,
)
from demuxlab.errors import DemuxlabError

PATTERNS: tuple[str, ...] = vocab.PATTERNS
# Seed 001 §V-A's eight rates, then those the other chains and a calibration add (module docstrings).
RATE_FIELDS: tuple[str, ...] = ("r_l", "r_p", "r_g", "r_t", "r_i", "r_o", "r_a", "r_e")
EXTRA_FIELDS: tuple[str, ...] = ("r_n", "r_x", "r_z", "r_w", "r_v", "r_k", "r_u", "r_h")
ALL_RATE_FIELDS: tuple[str, ...] = RATE_FIELDS + EXTRA_FIELDS
INSTANT_RATE = 1000.0  # per µs: a step of 1 ns, for model steps that cost (next to) nothing
# The rates that take effect only with others (Rates.active): the client's CPU to wake a dispatcher (r_v)
# is paid by a modelled client (r_z); the woken client's latency (r_u) by one whose wake-ups cost (r_v).
REQUIRES: dict[str, tuple[str, ...]] = {"r_v": ("r_z",), "r_u": ("r_v", "r_z")}
NO_REARM_NOTIFIERS = frozenset({"epoll-et"})
UNBOUNDED = 1e9  # "a core per thread", "the client turns every connection around at once"


@dataclass(frozen=True)
class Rates:
    """The service rates, per µs. r_c (work) is an input of each prediction.

    The first eight are seed 001 §V-A's; ``r_n`` (the notifier's per-call cost α = 1/r_n), ``r_x`` (a
    handler's CPU per message that no timed operation covers), ``r_z`` (the client's turnaround of one
    message) and ``r_w`` (how soon a woken thread preempts a busy core, per other runnable thread: the
    scheduler of sched.py) are instant (1 ns) unless a calibration measured them; an instant r_w means
    "not measured": a chain with more threads than cores then shares them (processor sharing). ``r_v``
    (1/ω: the client's CPU to wake a dispatcher asleep in its notifier, on top of its turnaround r_z; HSHA's
    and the proactor's chains) is the client's own, as r_z is; instant means "not measured": the client's
    wake-ups cost nothing beyond r_z (in the parameter vector: unbounded, not 1 ns). The same ω is what a
    server thread pays when its send finds the client asleep (HSHA's workers, the proactor's handlers; the
    vector's ``r_s`` is r_v at the server's share, 1 ns where r_u is not fitted). ``r_u`` (1/the latency of
    a client thread woken by a response before it runs; HSHA's and the proactor's chains) is fitted where
    the client's ``sleeps`` were measured, so that the chain's client sleeps as often per message as the
    real one did; instant means "not fitted": the woken client runs at once and no send pays a wake-up
    (the client's sleeps stay in r_o, as measured). ``r_k`` (1/κ: the
    CPU a handler's re-arm spends to kick a dispatcher waiting in select or poll, which then calls again;
    HSHA's and the proactor's chains) is instant unless measured (the server's ``kick`` operation), and
    instant means "no kicks": the notifier does not kick (epoll) or the runs predate the ``kick`` timing
    (in the parameter vector: 0, which turns the chains' kick steps off). ``r_h`` (1/the latency from a
    lock's release to its waiter, asleep on it, holding it: the futex wake-up of a thread on another
    core; uring-shared's submission lock) is the server host's, measured by wake-cost with the waiter on
    the server's first CPU; instant means "not measured": a released lock goes to its waiter at once (in
    the vector: unbounded; also where the threads outnumber the cores, :func:`build`). ``speed`` is the
    share of its CPUs the server got while the calibration runs ran (1 on a quiet host): every server
    rate, work included, is multiplied by it (``r_z`` is the client's own and already includes its
    share). ``source`` says, per rate, where the value came from (``paper``, ``instant:…`` or what it was
    measured from).
    """

    r_l: float
    r_p: float
    r_g: float
    r_t: float
    r_i: float
    r_o: float
    r_a: float
    r_e: float
    r_n: float = INSTANT_RATE
    r_x: float = INSTANT_RATE
    r_z: float = INSTANT_RATE
    r_w: float = INSTANT_RATE
    r_v: float = INSTANT_RATE
    r_k: float = INSTANT_RATE
    r_u: float = INSTANT_RATE
    r_h: float = INSTANT_RATE
    speed: float = 1.0
    source: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    # A calibration from runs of several workloads: each workload's own rates (workload_key()); these
    # (pooled over them) serve a workload without runs of its own.
    workloads: dict[str, Rates] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        for name in (*ALL_RATE_FIELDS, "speed"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and np.isfinite(v) and v > 0):
                raise DemuxlabError(f"rates: {name}: must be a positive finite number per µs, got {v!r}")
        if self.speed > 1.0:
            raise DemuxlabError(f"rates: speed: a share of the CPUs, at most 1, got {self.speed!r}")

    def active(self, name: str) -> bool:
        """Whether rate ``name`` reaches the chains as its own step: it is set (not instant), and so is every
        rate it needs (:data:`REQUIRES`). An instant r_z, r_w, r_v, r_k, r_u or r_h means "not measured" and
        turns its step off (see the class)."""
        return all(getattr(self, k) != INSTANT_RATE for k in (name, *REQUIRES.get(name, ())))

    @property
    def has_client(self) -> bool:
        """Whether the client's turnaround was measured (the chains then model the client)."""
        return self.active("r_z")

    @property
    def scheduled(self) -> bool:
        """Whether the scheduler's wake-up was measured (sched.py: run to block on fewer cores than
        threads)."""
        return self.active("r_w")

    @property
    def wakes(self) -> bool:
        """Whether the client's CPU to wake a sleeping dispatcher was measured (r_v, with r_z)."""
        return self.active("r_v")

    @property
    def client_sleeps(self) -> bool:
        """Whether the client's sleeps were fitted (r_u, with ω): the chains then charge the sender of a
        response that finds the client asleep its wake-up, and the client its latency."""
        return self.active("r_u")

    @property
    def kicks(self) -> bool:
        """Whether a re-arm's kick of the waiting dispatcher was measured (r_k): the chains then kick."""
        return self.active("r_k")

    @property
    def extended(self) -> bool:
        """Whether anything beyond seed 001's rates is set (HSHA and LF then use their full chains)."""
        return any(getattr(self, k) != INSTANT_RATE for k in EXTRA_FIELDS) or self.speed != 1.0

    def as_dict(self) -> dict[str, float]:
        out = {k: float(getattr(self, k)) for k in ALL_RATE_FIELDS}
        out["speed"] = float(self.speed)
        return out

    def to_doc(self) -> dict[str, Any]:
        """Everything :meth:`from_dict` reads back: the rates, ``source`` and the per-workload rates."""
        doc: dict[str, Any] = {**self.as_dict(), "source": dict(self.source)}
        if self.workloads:
            doc["workloads"] = {k: w.to_doc() for k, w in self.workloads.items()}
        return doc

    def for_workload(self, connections: int, msg_size: int) -> Rates:
        """The rates fitted from the runs of this workload, or these where it had no runs of its own."""
        return self.workloads.get(workload_key(connections, msg_size), self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "rates") -> Rates:
        """Rates from :meth:`to_doc` or :meth:`as_dict` (with ``source``); the fields after seed 001's may
        be missing (stored before issue 19: instant, speed 1)."""
        missing = [k for k in RATE_FIELDS if k not in data]
        if missing:
            raise DemuxlabError(f"{where}: missing rate {missing[0]!r}")
        try:
            values = {k: float(data[k]) for k in (*ALL_RATE_FIELDS, "speed") if k in data}
        except (TypeError, ValueError):
            raise DemuxlabError(f"{where}: rates must be numbers, got {data!r}") from None
        src = data.get("source")
        loads = data.get("workloads")
        if loads is not None and not isinstance(loads, dict):
            raise DemuxlabError(f"{where}: workloads: not an object")
        workloads = {str(k): cls.from_dict(v, f"{where}.workloads.{k}") for k, v in (loads or {}).items()}
        return cls(**values, source=dict(src) if isinstance(src, dict) else {}, workloads=workloads)

    def vector(self, work_us: float, host: Host | None = None) -> FloatArray:
        """The parameter vector the generating functions read (engine.RATE_NAMES order): the server's
        rates times ``speed``, r_c = speed/work_us (work 0: instant), the client's rates, and the host."""
        if not (np.isfinite(work_us) and work_us >= 0):
            raise DemuxlabError(
                f"work_us: must be a non-negative number of µs (r_c = 1/work_us), got {work_us!r}"
            )
        h = host if host is not None else Host()
        r_c = INSTANT_RATE if work_us == 0 else 1.0 / work_us
        s = self.speed
        v = [getattr(self, k) * s for k in RATE_FIELDS]
        v += [r_c * s, self.r_n * s, self.r_x * s, self.r_z]
        v += [h.client_parallelism if self.has_client else UNBOUNDED]
        v += [float(h.cores) if h.cores is not None else UNBOUNDED, float(h.load)]
        v += [self.r_w * s, self.r_v if self.wakes else UNBOUNDED, self.r_k * s if self.kicks else 0.0]
        # r_s: the client's ω, paid by a server thread whose send found the client asleep, where the client's
        # sleeps were fitted (r_u); r_u: the woken client's latency (instant: it runs at once).
        v += [
            self.r_v * s if self.client_sleeps else INSTANT_RATE,
            self.r_u if self.client_sleeps else INSTANT_RATE,
        ]
        # r_h: a latency on the server host (the waiter's wake-up), not CPU: not scaled by the share
        v += [self.r_h if self.active("r_h") else UNBOUNDED]
        out = np.array(v, dtype=np.float64)
        assert len(out) == len(RATE_NAMES)
        return out


def requires(rate: str) -> tuple[str, ...]:
    """The rates ``rate`` needs to take effect in the chains (:data:`REQUIRES`)."""
    return REQUIRES.get(rate, ())


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


def workload_key(connections: int, msg_size: int) -> str:
    """How a calibration names a workload: the connections and the message size (the work is an input)."""
    return f"c{connections}/b{msg_size}"


@dataclass(frozen=True)
class Host:
    """Where the server runs: its cores (None: a core per thread, seed 001's assumption), the client's
    threads and cores (they turn min(threads, cores) messages around at once; used with a measured r_z),
    and ``load``: runnable threads besides the chain's own that share the server's cores."""

    cores: int | None = None
    client_threads: int | None = None
    client_cores: int | None = None
    load: float = 0.0

    def __post_init__(self) -> None:
        for name in ("cores", "client_threads", "client_cores"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise DemuxlabError(f"host: {name}: must be a positive integer or unset, got {v!r}")
        if not (np.isfinite(self.load) and self.load >= 0):
            raise DemuxlabError(f"host: load: must be a non-negative number, got {self.load!r}")

    @property
    def client_parallelism(self) -> float:
        threads = self.client_threads if self.client_threads is not None else UNBOUNDED
        cores = self.client_cores if self.client_cores is not None else threads
        return float(min(threads, cores))


@dataclass(frozen=True)
class Design:
    """How a pattern is modelled: the server's thread range, whether its threads are independent copies (one
    thread's chain, the others in the pool's load: ``tagged``), and the concurrency its calibration runs use
    (seed 001 §V-A: the lowest that runs every role; a fact of the pattern, :data:`demuxlab.vocab.
    CALIBRATION_THREADS`, which the spec's calibration points read without the models)."""

    pattern: str
    min_threads: int
    max_threads: int | None
    tagged: bool = False

    @property
    def calibration_threads(self) -> int:
        return vocab.CALIBRATION_THREADS[self.pattern]


DESIGNS: dict[str, Design] = {
    "reactor": Design("reactor", 1, 1),
    "hsha": Design("hsha", 2, None),
    "lf": Design("lf", 1, None),
    "tpc": Design("tpc", 1, None),
    "proactor": Design("proactor", 2, None),
    "uring": Design("uring", 1, 64, tagged=True),
    "multireactor": Design("multireactor", 1, 64, tagged=True),
    # T = 1 handles inline (uring.py's chain), T ≥ 2 hands off: calibrated at 2, where both roles run.
    "uring-shared": Design("uring-shared", 1, None),
}
assert tuple(sorted(DESIGNS)) == tuple(sorted(PATTERNS))

# r_e of seed 001 §V-A: HSHA's (2.9 µs: a monitor that always waits, and is woken) for the patterns with a
# dedicated waiting thread, LF's (0.635 µs: a thread that finds several events per call) for the others.
_WAITING_MONITOR = frozenset({"hsha", "proactor", "uring-shared"})


def paper_rates(pattern: str, notifier: str | None = None) -> Rates:
    """Seed 001 §V-A: the rates measured on the paper's 2×8 Opteron (r_e differs between the patterns).

    The other patterns' steps are the same operations (receive, send, re-arm, notifier, queue, lock) and
    get the same rates; what the paper does not measure (per-call notifier cost, untimed CPU, the client)
    is instant. With ``notifier`` epoll-et the re-arm is instant (it never re-arms)."""
    check_pattern(pattern)
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
        r_e=1 / 2.9 if pattern in _WAITING_MONITOR else 1 / 0.635,
        source=source,
    )


def check_pattern(pattern: str) -> None:
    if pattern not in PATTERNS:
        raise DemuxlabError(f"pattern: must be one of {', '.join(PATTERNS)}, got {pattern!r}")


# The patterns whose threads are of several kinds (a dispatcher and its handlers): on fewer cores than
# threads, with a measured r_w, their chains take cores by run to block (sched.py).
SCHEDULED: dict[str, ModelStructure] = {
    "hsha": hsha.SCHEDULED,
    "proactor": proactor.SCHEDULED,
    "uring-shared": uring_shared.SCHEDULED,
}


def structure(
    pattern: str, threads: int | None = None, full: bool = False, scheduled: bool = False
) -> ModelStructure:
    """The chain of ``pattern`` (at ``threads``, where the structure depends on it; ``full``: HSHA's and
    LF's calibrated chains instead of seed 001's; ``scheduled``: the run-to-block chain of a pattern of
    :data:`SCHEDULED`, for more threads than cores)."""
    check_pattern(pattern)
    if scheduled and pattern in SCHEDULED and not (pattern == "uring-shared" and threads == 1):
        return SCHEDULED[pattern]
    if pattern == "hsha":
        return hsha.FULL if full else hsha.STRUCTURE
    if pattern == "lf":
        return lf.FULL if full else lf.STRUCTURE
    if pattern in ("reactor", "multireactor"):
        return reactor.STRUCTURE
    if pattern == "tpc":
        return tpc.STRUCTURE
    if pattern == "proactor":
        return proactor.STRUCTURE
    if pattern == "uring" or (pattern == "uring-shared" and threads == 1):
        return uring.STRUCTURE
    return uring_shared.STRUCTURE


def structures(pattern: str) -> tuple[ModelStructure, ...]:
    """Every chain ``pattern`` may use (to compile them ahead)."""
    scheduled = (SCHEDULED[pattern],) if pattern in SCHEDULED else ()
    if pattern in ("hsha", "lf"):
        return (structure(pattern), structure(pattern, full=True), *scheduled)
    if pattern == "uring-shared":
        return (structure(pattern, 1), structure(pattern, 2), *scheduled)
    return (structure(pattern), *scheduled)


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
    check_pattern(pattern)
    return DESIGNS[pattern].min_threads


def calibration_threads(pattern: str) -> int:
    """The concurrency of a pattern's calibration runs (seed 001 §V-A: HSHA 2, LF 1)."""
    check_pattern(pattern)
    return DESIGNS[pattern].calibration_threads


def tagged_connections(pattern: str, threads: int, connections: int) -> int:
    """For a pattern of independent threads (multireactor, uring), the connections of the one thread the
    chain follows: the server deals them out round-robin, N/T each (rounded; at least 1)."""
    if not DESIGNS[pattern].tagged:
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
    check_pattern(pattern)
    d = DESIGNS[pattern]
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < d.min_threads:
        raise DemuxlabError(f"threads: {pattern} needs at least {d.min_threads} thread(s), got {threads!r}")
    if d.max_threads is not None and threads > d.max_threads:
        raise DemuxlabError(f"threads: {pattern} runs at most {d.max_threads} thread(s), got {threads}")
    if isinstance(connections, bool) or not isinstance(connections, int) or connections < 1:
        raise DemuxlabError(f"connections: must be a positive integer, got {connections!r}")
    h = host if host is not None else Host()
    rates = rates if rates is not None else paper_rates(pattern, notifier)
    cores = h.cores
    n = connections
    kz_scale = 1.0
    if pattern == "tpc":
        cores = min(threads, cores) if cores is not None else threads
    if d.tagged:
        n = tagged_connections(pattern, threads, connections)
        kz_scale = 1.0 / min(threads, connections)
    full = pattern in ("hsha", "lf") and (rates.extended or h.client_threads is not None)
    st = structure(pattern, threads, full=full)
    init = _initial_state(st, threads, n, full)
    if rates.scheduled and cores is not None and threads > cores:
        # Run to block where the threads outnumber the cores and the scheduler's wake-up was measured: the
        # same state, no core held yet (they are granted at once).
        st = structure(pattern, threads, full=full, scheduled=True)
        init = np.concatenate([init, np.zeros(len(st.species) - len(init))])
    if pattern == "uring-shared" and threads == 1:
        rates = inline(rates)
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


def _initial_state(st: ModelStructure, threads: int, n: int, full: bool) -> FloatArray:
    """Chain ``st``'s initial state with ``threads`` threads and ``n`` connections (its module's
    ``initial_state``)."""
    if st is hsha.FULL or st is hsha.STRUCTURE:
        return hsha.initial_state(threads, n, full=full)
    if st is lf.FULL or st is lf.STRUCTURE:
        return lf.initial_state(threads, n, full=full)
    if st is reactor.STRUCTURE:
        return reactor.initial_state(1, n)
    if st is tpc.STRUCTURE:
        return tpc.initial_state(threads, n)
    if st is proactor.STRUCTURE:
        return proactor.initial_state(threads, n)
    if st is uring.STRUCTURE:
        return uring.initial_state(1, n)
    return uring_shared.initial_state(threads, n)

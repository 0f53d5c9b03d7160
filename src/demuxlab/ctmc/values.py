"""The values every model reads: the service rates (per µs) and the host they run on (:class:`Rates`,
:class:`Host`), apart from the chains so that a pattern's module can name them (its hooks) without the
registry that imports it (:mod:`demuxlab.ctmc.rates` re-exports all of this)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from demuxlab.ctmc.engine import RATE_NAMES, FloatArray
from demuxlab.errors import DemuxlabError

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

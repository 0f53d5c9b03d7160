"""Calibration of every pattern's rates from instrumented runs at the lowest concurrency (seed 001 §V-A).

The paper measures every rate on the lowest-concurrency deployment (HSHA: monitor + one worker,
``threads = 2``; LF: ``threads = 1``; :func:`demuxlab.ctmc.rates.calibration_threads` for the others).
The server's exit JSON (CONTRACTS.md §1, ``--instrument``) gives, per operation, the wall-clock time of
every call, and per thread its CPU time and the time it waited (``idle_s``). The model's steps are CPU
demands: the chains share the server's cores among the runnable threads themselves (engine.Pool), so a
calibration must not also count the time a thread waited for a CPU. Per *role* (the threads of one kind:
HSHA's monitor and its workers, …; :data:`ROLES`):

1. D = the role's CPU time per message (Σ its threads' user + sys / the server's messages), less the
   work (the spin is the input r_c, not a fitted rate);
2. W = the wall time of the role's timed operations per message (:data:`ROLES`; the notifier's calls
   included for the role that waits on it);
3. where W > D the operations' times include waiting for a CPU (the calibration run's own threads
   sharing a core, or the host's other load) and are scaled by D/W; where W < D, the rest, D − W, is CPU
   the operations do not cover (the loop, wake-ups, a blocking notifier call's own work) and becomes the
   role's overhead: per message (``r_x``) for the role that handles messages, per notifier call (added to
   α) for a role that only waits on the notifier and dispatches;
4. every rate is 1 / its demand in µs, times ``speed``: the share of its CPUs the server got during the
   runs, Σ CPU / Σ (runnable time) over its threads (a thread is runnable when it is neither waiting for
   work, ``idle_s``, nor for a CPU held by the run's own threads: E[(runnable threads − cores)⁺], the
   threads' busy fractions taken as independent), capped at 1: 1 on a quiet host.

=====  ============================================  ===========================================
rate   from                                          note
=====  ============================================  ===========================================
r_l    ``lock`` median                               the uncontended acquisition: the chains model
                                                     contention themselves
r_p    ``queue_put`` / message                       HSHA, proactor, uring-shared
r_g    ``queue_get`` / message                       HSHA, proactor, uring-shared
r_i    ``recv`` / message                            two calls per message under epoll-et (EAGAIN)
r_o    ``send`` / message                            a large message takes several calls; uring-shared:
                                                     the handler's submit, the submission lock's hold
r_a    ``rearm`` / message                           epoll-et never re-arms: instant (a kick's wall
                                                     time is not in ``rearm``); uring-shared: the
                                                     receive's re-submission under the submission lock
r_k    ``kick`` / kick (the kicker's CPU)            select, poll (HSHA, proactor): the re-arm's kick
                                                     of a dispatcher asleep in its call; runs without
                                                     a ``kick``: instant, no kicks in the chain
r_e    ``notify_by_events``                          slope τ of call time against descriptors; then
                                                     per the chain's descriptors per message
r_n    ``notify_by_events`` + overhead per call      intercept α (≥ 0); a dispatching role's α is its
                                                     notifier CPU per call over all its calls, blocking
                                                     ones included (``notify`` + untimed CPU, less τ per
                                                     descriptor; the runs with the least work,
                                                     :func:`_alpha_per_call`); then charged in the
                                                     chain's own calls (:func:`notifier_in_chain`)
r_x    CPU − timed operations, per message           the handling role's untimed CPU
r_z    client CPU per message × its CPU share        the client's turnaround (``clients=``; its share
                                                     from its ``wait_s``, else the server's speed); with
                                                     ``wake_us``, less ω per request that woke the
                                                     dispatcher (the runs' ``idle`` − ``kick``; the
                                                     chain's own where not timed), and less the
                                                     client's sleeps × its CPU per sleep, fitted over
                                                     the settings where their sleeps differ
                                                     (:func:`client_in_chain`)
r_v    ``wake_us`` (ω) × the client's share          HSHA, proactor: the client's CPU to wake a
                                                     dispatcher asleep in its notifier, measured apart
                                                     (``build/bin/wake-cost``); unset: instant
r_h    ``handoff_us``                                uring-shared: the submission lock's hand-off to a
                                                     waiter asleep on it (:data:`HANDOFF`), wake-cost's
                                                     to the server's CPU; unset: instant
r_w    the dispatching role's ``wait_s`` per call    where the runs had more threads than cores (HSHA,
                                                     proactor, uring-shared): the scheduler's wake-up,
                                                     matched in the chain's own waits with α
                                                     (:func:`notifier_in_chain`, sched.py); kept only
                                                     where run to block explains the wait
r_t    —                                             paper (10 ns: a cached descriptor)
=====  ============================================  ===========================================

The notifier fit: a call's mean time against h, the descriptors (io_uring: completions) it returned,
``notify_by_events`` 1..64 weighted by calls: least squares t = α + τh (α ≥ 0, else through the origin as
seed 001's r_e/h). ``notify`` is the service time only: a wait that found nothing and blocked is ``idle``.
A server result without ``events_per_call.cache`` predates that split and is refused. tpc blocks in
``recv`` (the server times the blocking call): its ``recv`` is the thread's waiting, its CPU goes to r_x
and r_i is instant. The io_uring patterns time no recv (the kernel runs it inside the notifier call):
r_i instant; uring times no send either (r_o instant), uring-shared its handler's submit, which runs the
send, as the submission lock's hold (runs from before that timing: r_o and r_a instant, :data:`TIMED_SINCE`).

Refusals (``CalibrationRefused``, naming pattern, notifier, reason and the figure):

- a fitted service time more than ``MAX_RATE_FACTOR`` (100×) away from the paper's, either way (r_e: not
  for a notifier call that only reads the ready count, ``PEEK_ONLY``), or a per-message overhead above
  ``MAX_OVERHEAD_US``: a measurement artefact, not the host;
- a calibration that does not predict its own calibration runs: the model (SSA) with the fitted rates,
  at each run's work, connections, thread count and cores, must be within ``SELF_CHECK_TOLERANCE`` (10 %)
  of the runs' measured throughput (``measured=``, the client's msgs/s; see :func:`self_check`).

(Over 500 lines on purpose: one concern, the fit of every pattern's rates from its runs — which role does
which operation, what the server's JSON holds and how each figure is read from it, the speed, the client,
the notifier's fit, the refusals — kept together so that a rate's source can be followed in one file.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from demuxlab.ctmc.engine import ModelInstance, ModelStructure
from demuxlab.ctmc.parts import CLIENT_WAKE, SEND_WAKE
from demuxlab.ctmc.rates import (
    ALL_RATE_FIELDS,
    INSTANT_RATE,
    NO_REARM_NOTIFIERS,
    SCHEDULED,
    Host,
    Rates,
    build,
    calibration_threads,
    check_pattern,
    paper_rates,
    structure,
    workload_key,
)
from demuxlab.ctmc.sched import GRANT_RATE
from demuxlab.ctmc.ssa import per_message, simulate
from demuxlab.errors import DemuxlabError

CACHE_SIZE = 64  # the server's MAX_EVENTS: no notifier call returns more
MAX_RATE_FACTOR = 100.0  # a fitted service time this many times the paper's (or 1/this) is refused
# Patterns whose timed notifier call only reads how many completions are ready (uring-shared's completion
# thread: uring_wait.h with submit = false; the kernel's work per completion runs in its blocking wait and
# is in its untimed CPU, α): tens of ns whatever the batch, so r_e has no paper value to be judged against
# (HSHA's epoll 2.9 µs): a 2-core host's 31 ns per call was refused as 0.0014× it. The self-check judges.
PEEK_ONLY = frozenset({"uring-shared"})
MAX_OVERHEAD_US = 10_000.0  # an untimed CPU per message or per call beyond this is an artefact
SELF_CHECK_TOLERANCE = 0.10  # |model − measured| / measured on the calibration runs themselves
SELF_CHECK_REL_CI = 0.01
PER_CALL_ITERATIONS = 6  # rounds of notifier_in_chain's fixed point (α, and r_w where it is fitted)
PER_CALL_TOLERANCE = 0.02  # …until α changes by less than this share
PER_CALL_REL_CI = 0.02  # the SSA's CI for the chain's calls and messages in those rounds
# r_w is kept where the chain's wake-up delay (1/r_w) is at most this many times the measured wait per call.
# Only the dispatching role preempts (sched.py): at the calibration runs' two threads on one core the chain's
# dispatcher waits 1/r_w whenever it finds the core busy and a grant's 0.1 µs when free, so a wake-up longer
# than the wait itself says the chain's dispatcher found the core free where the server's did not: the chain
# saturates something else (its client), and the scheduler's wake-up is not what made the server's wait.
WAKE_LIMIT = 1.0
# …and only where the fitted chain's dispatcher then waits what the server's did, within this share.
WAIT_TOLERANCE = 0.10
WAKE_ROUNDS = 6  # rounds of client_in_chain's fixed point, until the base turnaround moves by < 2 %
WAKE_REL_CI = 0.05  # the SSA's CI for the chain's wake-ups in those rounds (at most ssa.COUNT_MAX_EVENTS)
WAKE = CLIENT_WAKE  # the transition of a chain whose client can wake its dispatcher (parts.py)
SLEEPS_TOLERANCE = 0.10  # client_in_chain: the chain's client sleeps per message within 10 % of the real
LATENCY_US = (0.1, 200.0)  # …and the latency 1/r_u that makes them so, within these bounds
# client_in_chain: the client's CPU per sleep of its own is fitted where the calibration settings' client
# sleeps per message differ by at least this much (work 0 against 200 µs: about 0.1 against 1)
SLEEPS_SPREAD = 0.3
SPIN_FLOOR = 0.02  # a handling role's CPU beyond its spin below this × the spin: see calibrate()
KICK_RATE = "r_k"  # fitted per kick (ops.kick), not per message as the other operations' rates


class CalibrationRefused(DemuxlabError):
    """The runs give rates the calibration will not stand behind (see the module's Refusals)."""


@dataclass(frozen=True)
class Role:
    """Threads of one kind: their ``threads_detail`` role names, the timed operations they do per message
    (mapped to the rate each sets), whether they call the notifier, and where their untimed CPU goes:
    ``r_x`` (per message: they handle messages) or ``r_n`` (per notifier call: they only dispatch)."""

    names: tuple[str, ...]
    ops: tuple[tuple[str, str], ...]
    notifies: bool
    overhead: str
    works: bool


ROLES: dict[str, tuple[Role, ...]] = {
    "reactor": (Role(("reactor",), (("recv", "r_i"), ("send", "r_o"), ("rearm", "r_a")), True, "r_x", True),),
    "multireactor": (
        Role(("reactor",), (("recv", "r_i"), ("send", "r_o"), ("rearm", "r_a")), True, "r_x", True),
    ),
    "lf": (
        Role(("leader-follower",), (("recv", "r_i"), ("send", "r_o"), ("rearm", "r_a")), True, "r_x", True),
    ),
    "hsha": (
        Role(("monitor",), (("queue_put", "r_p"),), True, "r_n", False),
        Role(
            ("worker",),
            (("queue_get", "r_g"), ("recv", "r_i"), ("send", "r_o"), ("rearm", "r_a"), ("kick", "r_k")),
            False,
            "r_x",
            True,
        ),
    ),
    "proactor": (
        Role(("demultiplexer",), (("recv", "r_i"), ("queue_put", "r_p")), True, "r_n", False),
        Role(
            ("handler",),
            (("queue_get", "r_g"), ("send", "r_o"), ("rearm", "r_a"), ("kick", "r_k")),
            False,
            "r_x",
            True,
        ),
    ),
    "tpc": (Role(("connection",), (("send", "r_o"),), False, "r_x", True),),
    "uring": (Role(("proactor",), (), True, "r_x", True),),
    "uring-shared": (
        Role(("completion",), (("queue_put", "r_p"), ("rearm", "r_a")), True, "r_n", False),
        Role(("handler",), (("queue_get", "r_g"), ("send", "r_o")), False, "r_x", True),
    ),
}
# Chains that hand a contended lock to a sleeping waiter at r_h (uring_shared.py), and which lock.
HANDOFF: dict[str, str] = {"uring-shared": "the submission lock's hand-off to a sleeping waiter"}
# Operations a server timed only from some version on: runs without them in every run leave the rate
# instant (their time stays in the role's untimed CPU, as before), with the reason.
TIMED_SINCE: dict[str, dict[str, str]] = {
    "uring-shared": {
        "r_o": "the runs predate the timing of the handler's submit under the submission lock",
        "r_a": "the runs predate the timing of the receive's re-submission under the submission lock",
    },
}
# Rates a pattern's chain does not have, or whose operation runs in the kernel: instant, and why.
INSTANT: dict[str, dict[str, str]] = {
    "tpc": {"r_i": "tpc's recv blocks: its time is waiting, its CPU is in r_x", "r_a": "tpc does not re-arm"},
    "uring": {
        "r_i": "runs in the kernel, inside the notifier call",
        "r_o": "runs in the kernel, inside the notifier call",
    },
    "uring-shared": {"r_i": "runs in the kernel, inside the notifier call"},
}


@dataclass(frozen=True)
class SelfCheck:
    """The fitted model against the calibration runs of one workload (work, connections)."""

    work_us: float  # nominal (--work-us)
    work_measured_us: float  # the runs' mean `work` op (0 without work)
    connections: int
    threads: int
    runs: int
    measured_msgs_per_s: float
    predicted_msgs_per_s: float
    cores: int | None = None

    @property
    def rel_error(self) -> float:
        return (self.predicted_msgs_per_s - self.measured_msgs_per_s) / self.measured_msgs_per_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "work_us": self.work_us,
            "work_measured_us": self.work_measured_us,
            "connections": self.connections,
            "threads": self.threads,
            "cores": self.cores,
            "runs": self.runs,
            "measured_msgs_per_s": self.measured_msgs_per_s,
            "predicted_msgs_per_s": self.predicted_msgs_per_s,
            "rel_error": self.rel_error,
        }


def calibrate(
    server_results: Sequence[dict[str, Any]],
    pattern: str,
    labels: Sequence[str] | None = None,
    *,
    measured: Sequence[float | None] | None = None,
    connections: Sequence[int | None] | None = None,
    checks: list[SelfCheck] | None = None,
    clients: Sequence[dict[str, Any] | None] | None = None,
    client_cores: Sequence[int | None] | None = None,
    wake_us: float | None = None,
    handoff_us: float | None = None,
) -> Rates:
    """Rates of ``pattern`` from lowest-concurrency instrumented server exit JSONs (see :func:`_fit`).

    Runs of several workloads (connections × message size; the work is an input and pooled) are fitted
    per workload as well — a message's receive, send and the client's turnaround grow with its size, a
    select call with the descriptors watched — into ``Rates.workloads`` (each checked against its own
    runs); the returned rates pool them all and serve a workload without runs of its own."""
    n = len(server_results)
    if not server_results:
        raise DemuxlabError(f"calibrate {pattern}: no server results given")
    for what, seq in (("labels", labels), ("connections", connections)):
        if seq is not None and len(seq) != n:
            raise DemuxlabError(f"calibrate: {what} and server results differ in number")
    groups: dict[str, list[int]] = {}
    for i, res in enumerate(server_results):
        conns = connections[i] if connections is not None else None
        conns = (
            conns
            if conns is not None
            else (res.get("connections_accepted") if isinstance(res, dict) else None)
        )
        size = res.get("msg_size") if isinstance(res, dict) else None
        groups.setdefault(workload_key(int(conns or 0), int(size or 0)), []).append(i)
    if len(groups) == 1:
        return _fit(
            server_results,
            pattern,
            labels,
            measured=measured,
            connections=connections,
            checks=checks,
            clients=clients,
            client_cores=client_cores,
            wake_us=wake_us,
            handoff_us=handoff_us,
        )

    def pick(seq: Sequence[Any] | None, idx: list[int]) -> list[Any] | None:
        return None if seq is None else [seq[i] for i in idx]

    pooled = _fit(
        server_results, pattern, labels, connections=connections, clients=clients, client_cores=client_cores,
        wake_us=wake_us, handoff_us=handoff_us,
    )  # fmt: skip
    workloads: dict[str, Rates] = {}
    got: list[SelfCheck] = []
    for key, idx in sorted(groups.items()):
        mine: list[SelfCheck] = []
        try:
            workloads[key] = _fit(
                [server_results[i] for i in idx], pattern, pick(labels, idx), measured=pick(measured, idx),
                connections=pick(connections, idx), checks=mine, clients=pick(clients, idx),
                client_cores=pick(client_cores, idx), wake_us=wake_us, handoff_us=handoff_us,
            )  # fmt: skip
        finally:
            got += mine
            if checks is not None:
                checks[:] = got
    return replace(pooled, workloads=workloads)


def _fit(
    server_results: Sequence[dict[str, Any]],
    pattern: str,
    labels: Sequence[str] | None = None,
    *,
    measured: Sequence[float | None] | None = None,
    connections: Sequence[int | None] | None = None,
    checks: list[SelfCheck] | None = None,
    clients: Sequence[dict[str, Any] | None] | None = None,
    client_cores: Sequence[int | None] | None = None,
    wake_us: float | None = None,
    handoff_us: float | None = None,
) -> Rates:
    """Rates of ``pattern`` from lowest-concurrency instrumented server exit JSONs of one workload.

    ``measured`` (one per result: the run's measured throughput in msgs/s, e.g. the client's
    ``throughput_msgs_per_s``; None for a run without one) turns on the self-check: the calibration is
    refused when the model with the fitted rates misses its own runs by more than 10 %. ``connections``
    (one per result) defaults to the server's ``connections_accepted``. ``clients`` (one client JSON per
    result, CONTRACTS §2) gives the client's CPU per message, r_z, and its threads; ``client_cores`` (per
    result) the CPUs it was pinned to (default: one per client thread). ``wake_us`` (ω, µs of the client's
    CPU; ``build/bin/wake-cost`` measures it) is what a request costs the client more when it wakes a
    dispatcher asleep in its notifier: HSHA's and the proactor's chains charge it (r_v) and the client's
    turnaround is fitted without it (:func:`client_in_chain`); None or 0: not charged. ``handoff_us`` (µs
    from a lock's release to its waiter, asleep on it on the server's CPU, holding it; wake-cost
    measures it) is what a chain that hands a contended lock to a sleeper charges (:data:`HANDOFF`: r_h);
    None or 0: not charged. The server's cores
    are the CPUs its threads were pinned to (``threads_detail[].cpu``). ``checks``, if given, receives the
    self-check's comparisons. Raises :class:`CalibrationRefused` (a ``DemuxlabError``) for a refusal,
    ``DemuxlabError`` for bad input.
    """
    check_pattern(pattern)
    names, notifier = _checked_inputs(
        server_results, pattern, labels, measured, clients, client_cores, wake_us, handoff_us
    )
    what = f"calibrate {pattern}/{notifier}"
    paper = paper_rates(pattern, notifier)
    values: dict[str, Any] = {}  # the rates (floats), per µs
    source: dict[str, str] = {}
    measured_us: dict[str, float] = {}  # the operations' own times (before the CPU scaling), µs
    speed = _speed(names, server_results, pattern)
    _role_rates(pattern, notifier, names, server_results, speed, values, source, measured_us)
    client = _other_rates(
        pattern, notifier, server_results, clients, client_cores, speed, paper, values, source, measured_us
    )
    _refuse_artefacts(measured_us, paper, source, what)
    rates = Rates(**values, speed=speed, source=source)
    if _roles(pattern)[0].notifies:
        rates = notifier_in_chain(
            rates, pattern, server_results, connections, clients=clients, client_cores=client_cores
        )
    if wake_us and client is not None:
        rates = client_in_chain(
            rates, pattern, server_results, connections, wake_us / client[1], clients=clients,
            client_cores=client_cores, client_share=client[1],
        )  # fmt: skip
    if handoff_us and pattern in HANDOFF:
        # The lock handed to a waiter asleep on it: the waiter runs after its wake-up (the server host's).
        source = {**rates.source, "r_h": f"handoff_us: {handoff_us:.3g} µs, {HANDOFF[pattern]}"}
        rates = replace(rates, r_h=1.0 / handoff_us, source=source)
    if measured is not None:
        _self_checked(
            rates, pattern, server_results, measured, connections, clients, client_cores, checks, what, speed
        )
    return rates


def _other_rates(
    pattern: str,
    notifier: str,
    server_results: Sequence[dict[str, Any]],
    clients: Sequence[dict[str, Any] | None] | None,
    client_cores: Sequence[int | None] | None,
    speed: float,
    paper: Rates,
    values: dict[str, Any],
    source: dict[str, str],
    measured_us: dict[str, float],
) -> tuple[float, float] | None:
    """The rates no role's demand gives: those instant for the pattern or the notifier, the lock's median,
    the client's turnaround, and the paper's for every rate still unset. Returns the client's (rate, share
    of its CPUs), if its runs measured it."""
    for rate, why in INSTANT.get(pattern, {}).items():
        values[rate] = INSTANT_RATE
        source[rate] = f"instant:{why}"
    for rate, why in TIMED_SINCE.get(pattern, {}).items():
        if rate not in values:
            values[rate] = INSTANT_RATE
            source[rate] = f"instant:{why}"
    if notifier in NO_REARM_NOTIFIERS:
        values["r_a"] = INSTANT_RATE
        source["r_a"] = f"instant:{notifier} does not re-arm"
    lock = _lock_median_us(server_results)
    if lock is not None:
        measured_us["r_l"] = lock
        values["r_l"] = 1.0 / max(lock, 1e-6)
        source["r_l"] = "op:lock median"
    client = _client_rate(clients, client_cores, speed)
    if client is not None:
        values["r_z"] = client[0]
        source["r_z"] = f"client cpu/message × its share {client[1]:.2f}"
    for rate in ALL_RATE_FIELDS:
        if rate not in values:
            values[rate] = float(getattr(paper, rate))
            source[rate] = paper.source.get(rate, "paper")
    source["speed"] = "cpu / runnable time of the server's threads"
    return client


def _refuse_artefacts(measured_us: dict[str, float], paper: Rates, source: dict[str, str], what: str) -> None:
    """Refuse an operation whose own time is more than :data:`MAX_RATE_FACTOR` from the paper's either way."""
    for rate, took in measured_us.items():
        # Judged on the operation's own time: a measurement artefact is in it, not in the CPU scaling.
        paper_us = 1.0 / float(getattr(paper, rate))
        factor = took / paper_us
        if not (1.0 / MAX_RATE_FACTOR <= factor <= MAX_RATE_FACTOR):
            raise CalibrationRefused(
                f"{what}: refused: {rate} ({source[rate]}) is a service time of {took:.4g} µs, "
                f"{factor:.3g}× the paper's {paper_us:.4g} µs (more than {MAX_RATE_FACTOR:g}× either way: a "
                "measurement artefact, not the host)"
            )


def _checked_inputs(
    server_results: Sequence[dict[str, Any]],
    pattern: str,
    labels: Sequence[str] | None,
    measured: Sequence[float | None] | None,
    clients: Sequence[dict[str, Any] | None] | None,
    client_cores: Sequence[int | None] | None,
    wake_us: float | None,
    handoff_us: float | None,
) -> tuple[list[str], str]:
    """:func:`_fit`'s inputs checked: the runs' names and their one notifier; raises for bad input, and
    refuses runs from a server that timed its blocking notifier calls."""
    if not server_results:
        raise DemuxlabError(f"calibrate {pattern}: no server results given")
    names = (
        list(labels) if labels is not None else [f"server result #{i}" for i in range(len(server_results))]
    )
    if len(names) != len(server_results):
        raise DemuxlabError("calibrate: labels and server results differ in number")
    for what, seq in (("clients", clients), ("client_cores", client_cores), ("measured", measured)):
        if seq is not None and len(seq) != len(server_results):
            raise DemuxlabError(f"calibrate: {what} and server results differ in number")
    for name, us in (("wake_us", wake_us), ("handoff_us", handoff_us)):
        number = isinstance(us, int | float) and not isinstance(us, bool)
        if us is not None and not (number and 0 <= us <= MAX_OVERHEAD_US):
            raise DemuxlabError(
                f"calibrate {pattern}: {name}: must be a number of µs in [0, {MAX_OVERHEAD_US:g}], got {us!r}"
            )
    for name, res in zip(names, server_results, strict=True):
        _check_run(name, res, pattern)
    notifiers = sorted({str(res.get("notifier")) for res in server_results})
    if len(notifiers) != 1:
        raise DemuxlabError(f"calibrate {pattern}: the runs mix notifiers {notifiers}; calibrate each apart")
    notifier = notifiers[0]
    what = f"calibrate {pattern}/{notifier}"
    for name, res in zip(names, server_results, strict=True):
        epc = res.get("events_per_call")
        if _roles(pattern)[0].notifies and (
            not isinstance(epc, dict) or not isinstance(epc.get("cache"), int)
        ):
            raise CalibrationRefused(
                f"{what}: refused: {name}: the server's notify times include blocking (no "
                "events_per_call.cache: a demux-server from before the notify/idle split); rebuild the "
                "server and run again"
            )
    return names, notifier


def _role_rates(
    pattern: str,
    notifier: str,
    names: Sequence[str],
    server_results: Sequence[dict[str, Any]],
    speed: float,
    values: dict[str, Any],
    source: dict[str, str],
    measured_us: dict[str, float],
) -> None:
    """Per role, its CPU demands per message pooled over the runs (Σ over runs / Σ messages): the rates of
    its timed operations, its notifier's τ and α, its untimed CPU; into ``values`` and ``source`` (in that
    order, which the rates' ``source`` keeps), each operation's own time into ``measured_us``."""
    what = f"calibrate {pattern}/{notifier}"
    notifies = _roles(pattern)[0].notifies
    alpha_us, tau_us = _fit_notify_us(names, server_results, pattern) if notifies else (0.0, 0.0)
    mean_h = _mean_events(server_results) if notifies else 1.0
    low = _lowest_work(server_results)
    for role in _roles(pattern):
        d = _demand(role, pattern, notifier, names, server_results, speed)
        walls, scale, overhead = d.walls, d.scale, d.overhead
        for rate, wall in walls.items():
            op = dict((b, a) for a, b in role.ops)[rate]
            if rate == KICK_RATE:
                # Per kick, not per message: the chain kicks as often as its own dispatcher waits.
                kicks = _kicks(server_results)
                per_kick = wall * scale * d.messages / kicks
                values[rate] = 1.0 / max(per_kick, 1e-6)
                source[rate] = f"op:kick cpu/kick ({kicks / d.messages:.3g} per message)" + _scaled(scale)
                continue
            measured_us[rate] = wall
            values[rate] = 1.0 / max(wall * scale, 1e-6)
            source[rate] = f"op:{op}/message" + _scaled(scale)
        if role.notifies:
            # Judged per descriptor at the mean batch: a small slope with the cost in the per-call part
            # (io_uring's completion peek) is not an artefact. Not judged where the timed call does no
            # per-completion work at all (PEEK_ONLY).
            if pattern not in PEEK_ONLY:
                measured_us["r_e"] = (alpha_us + tau_us * mean_h) / mean_h
            values["r_e"] = 1.0 / max(tau_us * scale, 1e-6)
            source["r_e"] = "fit:notify_by_events" + _scaled(scale)
            alpha = alpha_us * scale
            if role.overhead == "r_n":
                # Per call where the notifier's share of a message is largest, the runs with the least
                # work (a spinning worker that the dispatcher preempts makes its calls dearer; in the
                # throughput there they hardly count).
                low_names, low_runs = [names[i] for i in low], [server_results[i] for i in low]
                at = d if len(low) == len(server_results) else _demand(
                    role, pattern, notifier, low_names, low_runs, speed
                )  # fmt: skip
                per_call = at.overhead * at.messages / max(at.calls, 1)
                if per_call > MAX_OVERHEAD_US:
                    raise CalibrationRefused(
                        f"{what}: refused: {role.names[0]}'s untimed CPU is {per_call:.4g} µs per notifier "
                        f"call (more than {MAX_OVERHEAD_US:g} µs: an artefact)"
                    )
                alpha = _alpha_per_call(low_names, low_runs, per_call, tau_us, at.scale)
            values["r_n"], source["r_n"] = _rate_or_instant(
                alpha,
                f"fit:{role.names[0]} notify + untimed cpu per call − τ per descriptor"
                if role.overhead == "r_n"
                else "fit:notify_by_events intercept",
                f"{role.names[0]}'s per-call cost",
            )
        if role.overhead == "r_x":
            if overhead > MAX_OVERHEAD_US:
                raise CalibrationRefused(
                    f"{what}: refused: {role.names[0]}'s untimed CPU is {overhead:.4g} µs per message "
                    f"(more than {MAX_OVERHEAD_US:g} µs: an artefact)"
                )
            values["r_x"], source["r_x"] = _rate_or_instant(
                overhead, f"cpu:{role.names[0]} − timed ops, /message", f"{role.names[0]}'s untimed CPU"
            )


def _self_checked(
    rates: Rates,
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    measured: Sequence[float | None],
    connections: Sequence[int | None] | None,
    clients: Sequence[dict[str, Any] | None] | None,
    client_cores: Sequence[int | None] | None,
    checks: list[SelfCheck] | None,
    what: str,
    speed: float,
) -> None:
    """The self-check: refuse the rates where the model misses its own calibration runs by more than
    :data:`SELF_CHECK_TOLERANCE`; the comparisons into ``checks``."""
    got = self_check(
        rates, pattern, server_results, measured, connections, clients=clients, client_cores=client_cores
    )
    if checks is not None:
        checks[:] = got
    worst = max(got, key=lambda c: abs(c.rel_error), default=None)
    if worst is not None and abs(worst.rel_error) > SELF_CHECK_TOLERANCE:
        raise CalibrationRefused(
            f"{what}: refused: the fitted rates predict {worst.predicted_msgs_per_s:,.0f} msg/s for "
            f"their own calibration run(s) at {worst.work_us:g} µs work, {worst.connections} "
            f"connections, {worst.threads} threads on {worst.cores or 'a core each'} core(s), measured "
            f"{worst.measured_msgs_per_s:,.0f} msg/s ({worst.rel_error:+.1%}; the limit is "
            f"±{SELF_CHECK_TOLERANCE:.0%}; the server had {speed:.0%} of its CPUs)"
        )


def self_check(
    rates: Rates,
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    measured: Sequence[float | None],
    connections: Sequence[int | None] | None = None,
    *,
    rel_ci: float = SELF_CHECK_REL_CI,
    clients: Sequence[dict[str, Any] | None] | None = None,
    client_cores: Sequence[int | None] | None = None,
) -> list[SelfCheck]:
    """The model (SSA) with ``rates`` at each workload (work, connections, cores, client) of the
    calibration runs, against the mean measured throughput of its runs. Runs without a measurement are
    left out. Work is the nominal ``work_us`` (the fitted ``speed`` slows it as it slows every step);
    ``work_measured_us`` reports the runs' mean spin."""
    from demuxlab.ctmc.predict import predict

    if len(measured) != len(server_results) or (
        connections is not None and len(connections) != len(measured)
    ):
        raise DemuxlabError("calibrate: measured/connections and server results differ in number")
    groups: dict[Workload, list[tuple[float, float]]] = {}
    for i, res in enumerate(server_results):
        m = measured[i]
        where = _workload(pattern, i, res, connections, clients, client_cores)
        if m is None or where is None:
            continue
        if not isinstance(m, int | float) or not m > 0:
            raise DemuxlabError(f"calibrate {pattern}: measured throughput #{i} must be positive, got {m!r}")
        groups.setdefault(where, []).append((float(m), _work_spun_us(res)))
    threads = calibration_threads(pattern)
    out: list[SelfCheck] = []
    for (work, conns, cores, cthreads, ccores), runs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        host = Host(cores=cores, client_threads=cthreads if rates.has_client else None, client_cores=ccores)
        p = predict(
            pattern, threads, work, method="ssa", connections=conns, rates=rates, rel_ci=rel_ci, host=host
        )
        mean = sum(m for m, _ in runs) / len(runs)
        spun = sum(s for _, s in runs) / len(runs)
        out.append(SelfCheck(work, spun, conns, threads, len(runs), mean, p.throughput_msgs_per_s, cores))
    return out


# A calibration run's setting: (work µs, connections, the server's cores, the client's threads and cores).
Workload = tuple[float, int, int | None, int | None, int | None]


def _workload(
    pattern: str,
    i: int,
    res: dict[str, Any],
    connections: Sequence[int | None] | None,
    clients: Sequence[dict[str, Any] | None] | None,
    client_cores: Sequence[int | None] | None,
) -> Workload | None:
    """Run i's setting, or None where its work is not a non-negative number."""
    work = res.get("work_us")
    conns = connections[i] if connections is not None else None
    conns = conns if conns is not None else res.get("connections_accepted")
    if not isinstance(work, int | float) or work < 0:
        return None
    if not isinstance(conns, int) or conns < 1:
        raise DemuxlabError(f"calibrate {pattern}: connections of run #{i} unknown ({conns!r})")
    client = clients[i] if clients is not None else None
    cthreads = client.get("threads") if isinstance(client, dict) else None
    ccores = client_cores[i] if client_cores is not None else None
    return (float(work), conns, server_cores(res, pattern), cthreads, ccores)


def notifier_in_chain(
    rates: Rates,
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    connections: Sequence[int | None] | None = None,
    *,
    clients: Sequence[dict[str, Any] | None] | None = None,
    client_cores: Sequence[int | None] | None = None,
) -> Rates:
    """``rates`` with the notifier's costs charged in the chain's own descriptors and calls.

    The fit gives the notifier's cost per descriptor (τ = 1/r_e) and per call (α = 1/r_n) as the *server*
    made them, over the calibration runs with the least work (where α was fitted):

    1. **Per descriptor.** The server's calls returned e_real descriptors per message (``events_per_call``
       mean × calls / messages); the chain's return ``ModelStructure.events_per_message`` (1 for a
       readiness notifier, 2 for io_uring: a receive and a send completion). They differ where the kernel
       splits a message: a 16 KiB message over io_uring is about 15 completions (the receives come in
       buffer-ring pieces). τ is scaled by e_real / e_model, so a message costs the chain the notifier
       time per message it cost the server.
    2. **Per call.** The chain makes its own number of calls per message, c_model; how many messages one
       call finds depends on how long its thread is kept from the CPU, and the chain's processor sharing is
       not the kernel's scheduler (on a shared core the kernel lets a worker run on and the dispatcher find
       bigger batches: HSHA at 2 threads on 1 core makes 0.55 calls per message, its chain 0.78). With α
       unchanged the chain would charge the thread c_model/c_real times the CPU per message it measured, so
       α is scaled by c_real / c_model at those runs' settings (messages-weighted SSA at
       :data:`PER_CALL_REL_CI`) until it
       changes by less than :data:`PER_CALL_TOLERANCE` (c_model depends on α; at most
       :data:`PER_CALL_ITERATIONS` rounds).

    The thread's notifier CPU per message in the chain is then the measured one. Rates of a chain without a
    notifier call, or runs without call counts, are returned as they are."""
    threads = calibration_threads(pattern)
    chain = structure(pattern, threads, full=True)
    low = _lowest_work(server_results)
    calls = sum(_calls(server_results[i]) for i in low)
    events = sum(_calls(server_results[i]) * _events_mean(server_results[i]) for i in low)
    msgs = sum(_messages(f"server result #{i}", server_results[i]) for i in low)
    if chain.calls is None or calls <= 0 or msgs <= 0:
        return rates
    fitted = rates
    e_real = events / msgs
    if events > 0 and rates.r_e < INSTANT_RATE and abs(e_real / chain.events_per_message - 1.0) > 0.005:
        why = f"{rates.source.get('r_e', '')}, per message ×{e_real / chain.events_per_message:.3g}"
        fitted = replace(
            fitted, r_e=rates.r_e * chain.events_per_message / e_real, source={**fitted.source, "r_e": why}
        )
    if fitted.r_n >= INSTANT_RATE:
        return fitted
    weights: dict[Workload, int] = {}
    for i in low:
        res = server_results[i]
        where = _workload(pattern, i, res, connections, clients, client_cores)
        if where is not None:
            weights[where] = weights.get(where, 0) + _messages(f"server result #{i}", res)
    if not weights:
        return fitted
    c_real = calls / msgs
    # The scheduler's wake-up (sched.py), where the runs had more threads than cores: the dispatching
    # role's wait for a CPU per notifier call, as measured, is the chain's to match.
    wait_real = _dispatcher_wait_per_call_us(pattern, [server_results[i] for i in low], threads)
    if wait_real is None:
        return _in_chain(fitted, pattern, chain, weights, c_real, None)
    return _with_wake_up(fitted, pattern, chain, weights, c_real, wait_real)


def _with_wake_up(
    fitted: Rates,
    pattern: str,
    chain: ModelStructure,
    weights: dict[Workload, int],
    c_real: float,
    wait_real: float,
) -> Rates:
    """:func:`notifier_in_chain`'s α with the scheduler's wake-up r_w fitted to the dispatcher's measured
    wait per call ``wait_real``, where run to block explains that wait; else α alone, r_w instant with the
    reason (processor sharing)."""
    scheduled = _in_chain(fitted, pattern, chain, weights, c_real, wait_real)
    role = ROLES[pattern][0].names[0]
    if scheduled.r_w * wait_real < 1.0 / WAKE_LIMIT:
        # Run to block explains the measured wait only with a far longer wake-up than the wait itself: the
        # dispatcher waited for something else (the client, the host), and the chain keeps processor sharing.
        why = (
            f"instant:{role} waited {wait_real:.3g} µs per call, which run to block explains only with a "
            f"wake-up of {1.0 / scheduled.r_w:.3g} µs (more than {WAKE_LIMIT:g}× the wait): processor sharing"
        )
    else:
        # Nor where the fit did not reach the measured wait: the chain's dispatcher waits longer even when
        # a woken thread preempts at once (its structure, not the scheduler's wake-up, makes the wait).
        got = _chain_calls(scheduled, pattern, chain, weights)
        wait_model = got[1] if got is not None else 0.0
        if abs(wait_model / wait_real - 1.0) <= WAIT_TOLERANCE:
            return scheduled
        why = (
            f"instant:{role} waited {wait_real:.3g} µs per call; run to block makes it wait "
            f"{wait_model:.3g} µs even with a wake-up of {1.0 / scheduled.r_w:.3g} µs: processor sharing"
        )
    shared = _in_chain(fitted, pattern, chain, weights, c_real, None)
    return replace(shared, source={**shared.source, "r_w": why})


def _chain_calls(
    rates: Rates, pattern: str, chain: ModelStructure, weights: dict[Workload, int]
) -> tuple[float, float] | None:
    """(the chain's notifier calls per message, its dispatching role's wait for a CPU per call in µs, 0
    without run to block) at the calibration runs' settings, weighted by their messages (SSA at
    :data:`PER_CALL_REL_CI`); None where the chain makes no messages or no calls."""
    per_msg = waited = 0.0
    for model, n in _at_settings(rates, pattern, weights):
        msgs_rate = simulate(model, rel_ci=PER_CALL_REL_CI).throughput_per_us
        by_calls = simulate(model, rel_ci=PER_CALL_REL_CI, transition=chain.calls)
        calls_rate = by_calls.throughput_per_us
        if msgs_rate <= 0.0 or calls_rate <= 0.0:
            return None
        per_msg += n * calls_rate / msgs_rate
        if model.structure.pools and model.structure.pools[0].holders is not None:
            waited += n * by_calls.waiting(0) / calls_rate
    total = sum(weights.values())
    return per_msg / total, waited / total


def _at_settings(
    rates: Rates, pattern: str, weights: dict[Workload, int]
) -> Iterator[tuple[ModelInstance, int]]:
    """The chain with ``rates`` at each calibration run setting of ``weights`` (at the pattern's calibration
    concurrency, with the client where the rates have one), and that setting's weight (its messages)."""
    threads = calibration_threads(pattern)
    for (work, conns, cores, cthreads, ccores), n in sorted(weights.items(), key=lambda kv: str(kv[0])):
        client = cthreads if rates.has_client else None
        host = Host(cores=cores, client_threads=client, client_cores=ccores)
        yield build(pattern, threads, work, conns, rates, host=host), n


def _in_chain(
    base: Rates,
    pattern: str,
    chain: ModelStructure,
    weights: dict[Workload, int],
    c_real: float,
    wait_real: float | None,
) -> Rates:
    """notifier_in_chain's fixed point: α scaled until the chain makes the server's calls per message
    (``c_real``) at the least-work runs' settings (``weights``: messages per setting), and, with
    ``wait_real`` (µs per notifier call), r_w until the chain's dispatching role waits that long for a CPU
    per call too (the chain then takes cores by run to block, sched.py)."""
    alpha = 1.0 / base.r_n
    fitted = base if wait_real is None else replace(base, r_w=1.0 / wait_real)
    role = ROLES[pattern][0].names[0]
    for _round in range(PER_CALL_ITERATIONS):
        got = _chain_calls(fitted, pattern, chain, weights)
        if got is None:
            return fitted
        c_model, wait_model = got
        now = 1.0 / fitted.r_n
        new = alpha * c_real / c_model
        why = f"{base.source.get('r_n', '')}, in the chain's calls ×{c_real / c_model:.3g}"
        moved = abs(new - now) > PER_CALL_TOLERANCE * now
        fitted = replace(fitted, r_n=1.0 / new, source={**fitted.source, "r_n": why})
        if wait_real is not None:
            # The chain's wait per call falls as r_w grows (a woken dispatcher preempts sooner), down to
            # what a free core's grant takes: a wake-up is no sooner than that.
            r_w = min(fitted.r_w * max(wait_model, 1e-3 * wait_real) / wait_real, GRANT_RATE)
            moved = moved or abs(r_w / fitted.r_w - 1.0) > PER_CALL_TOLERANCE
            how = f"fit:{role} wait_s per call {wait_real:.3g} µs, in the chain's ×{wait_real * r_w:.3g}"
            fitted = replace(fitted, r_w=r_w, source={**fitted.source, "r_w": how})
        if not moved:
            break
    return fitted


def client_in_chain(
    rates: Rates,
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    connections: Sequence[int | None] | None,
    omega_us: float,
    *,
    clients: Sequence[dict[str, Any] | None] | None = None,
    client_cores: Sequence[int | None] | None = None,
    client_share: float = 1.0,
) -> Rates:
    """``rates`` with the wake-ups between the client and the server charged in the chain's own
    (docs/ctmc-reference.md, "The client that wakes the dispatcher", "The send that wakes the client"): a
    request that finds the dispatcher asleep in its notifier costs the client ``omega_us`` (ω, µs at its share
    of its CPUs) more than one that finds it awake (r_v = 1/ω); where the client's sleeps were measured (the
    client's ``sleeps``, every run), a response that finds the client asleep costs its sender the same ω
    (``send_wake``, r_s: r_v at the server's share) and the client a latency 1/r_u before it runs.

    The client's measured turnaround T = 1/r_z holds its wake-ups at the calibration runs' rate, and the
    server's measured send S = 1/r_o the sender's; the chain must charge them at its own. So the turnaround
    without them, T₀ = T − ω·f, where f is the chain's wake-ups of the dispatcher per message
    (``client_wake`` over the throughput, SSA, weighted by the runs' messages) with r_z = 1/T₀, is found
    by a fixed point, together with the latency L = 1/r_u that makes g, the chain's ``send_wake`` per
    message, the client's measured sleeps per message (from ω, L ← L · (g / sleeps)², at most ×4 either
    way per round: more latency, fewer and longer sleeps). The send without its wake-ups is S₀ = S − ω ·
    the measured sleeps, which is what g is fitted to: charged at the chain's own g, it fed back (a faster
    send, a client that sleeps less, a slower send) and did not settle. At most :data:`WAKE_ROUNDS`
    rounds, until T₀ moves by less than :data:`PER_CALL_TOLERANCE` and g is within
    :data:`SLEEPS_TOLERANCE` of the sleeps. The chain then turns a calibration run's messages
    around in the client's measured CPU and sends them in the server's, and elsewhere charges the
    wake-ups its own sleeps make there (fewer with more handlers: docs/ctmc-reference.md). A chain without a
    ``client_wake`` step, or rates without a client, are returned as they are; a T₀ or S₀ that is not
    positive is refused. Where no latency makes the chain's client sleep as often as the client did (its
    one station against the client's threads), the sends' wake-ups stay in r_o and r_u is instant, its
    source says why.

    Where the calibration runs time the dispatcher's blocking waits (``idle``), f is not the chain's but
    the runs' own count (:func:`_woke`: the blocking waits less the re-arms' kicks, which ended the
    others), as S₀ takes the measured sleeps; T₀ needs no fixed point then. And the client's own sleeps
    cost it CPU too (woken, it calls its notifier again; on a VM its idle CPU wakes), which T holds at the
    calibration runs' rate while the chain has its client wait the latency 1/r_u per sleep of its own
    (fitted to the count): where the calibration settings' client sleeps per message differ by
    :data:`SLEEPS_SPREAD` or more (work 0 against 200 µs), their CPU per sleep c is the slope of the
    client's CPU per message, less ω per request that woke the dispatcher, against its sleeps per message
    (:func:`_client_cpu_per_sleep`), and T is taken less c × the measured sleeps first (where that leaves
    it positive). Without both the chain's client turned a message around in the calibration's T at any
    concurrency, where the client's CPU per message falls as the server's threads grow: on the slow
    2-core host the chain's client became the bottleneck at 3 and 4 threads (docs/ctmc-reference.md, "The
    client's turnaround from what the runs counted")."""
    threads = calibration_threads(pattern)
    steps = {tr.name for tr in structure(pattern, threads, full=True).transitions}
    if not rates.has_client or WAKE not in steps:
        return rates
    weights, sleeps, woken, counted = _client_counts(
        pattern, server_results, connections, clients, client_cores
    )
    if not weights:
        return rates
    real_sleeps = sum(n for n, _ in sleeps) / sum(m for _, m in sleeps) if sleeps else 0.0
    woke = sum(n for n, _ in woken) / sum(m for _, m in woken) if woken else None
    if sleeps and woke is not None:
        rates = _less_sleeps_cpu(rates, counted, omega_us, client_share, real_sleeps)
    if SEND_WAKE in steps and real_sleeps > 0.0:
        fitted, ratio = _wakes_in_chain(rates, pattern, weights, omega_us, real_sleeps, woke)
        if abs(ratio - 1.0) <= SLEEPS_TOLERANCE:
            return fitted
        # The chain's client does not sleep as the real one did at any latency (its one station against
        # the client's threads, each with its own connections): the sends' wake-ups stay in r_o.
        chain, latency = real_sleeps * ratio, 1.0 / fitted.r_u
        why = (
            f"instant:the chain's client sleeps {chain:.3g} per message at a latency of {latency:.3g} µs, "
            f"the client {real_sleeps:.3g}: the sends' wake-ups stay in r_o"
        )
        fitted, _ = _wakes_in_chain(rates, pattern, weights, omega_us, None, woke)
        return replace(fitted, source={**fitted.source, "r_u": why})
    return _wakes_in_chain(rates, pattern, weights, omega_us, None, woke)[0]


def _less_sleeps_cpu(
    rates: Rates, counted: Sequence[_Counted], omega_us: float, client_share: float, real_sleeps: float
) -> Rates:
    """The client's turnaround r_z less the CPU its own sleeps cost it at the calibration runs' rate
    (:func:`_client_cpu_per_sleep`), where their settings tell it and that leaves it positive."""
    per_sleep = _client_cpu_per_sleep(counted, omega_us * client_share)
    if per_sleep is not None:
        c = per_sleep / client_share  # at the client's share, as T is
        less = 1.0 / rates.r_z - c * real_sleeps
        if less > 0.0:
            why = f"less the client's {real_sleeps:.3g} sleeps per message × its cpu per sleep {c:.3g} µs"
            rates = replace(
                rates, r_z=1.0 / less, source={**rates.source, "r_z": f"{rates.source.get('r_z', '')}, {why}"}
            )
    return rates


def _client_counts(
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    connections: Sequence[int | None] | None,
    clients: Sequence[dict[str, Any] | None] | None,
    client_cores: Sequence[int | None] | None,
) -> tuple[
    dict[Workload, int], list[tuple[float, float]] | None, list[tuple[int, int]] | None, list[_Counted]
]:
    """:func:`client_in_chain`'s counts over the runs: the messages per setting, the client's sleeps and
    the dispatcher's wake-ups per run (None unless every run counted them), and the runs that counted both."""
    weights: dict[Workload, int] = {}
    sleeps: list[tuple[float, float]] | None = []
    woken: list[tuple[int, int]] | None = []
    counted: list[_Counted] = []  # the runs whose client counted its sleeps and server its blocking waits
    for i, res in enumerate(server_results):
        where = _workload(pattern, i, res, connections, clients, client_cores)
        if where is not None:
            weights[where] = weights.get(where, 0) + _messages(f"server result #{i}", res)
            client = clients[i] if clients is not None else None
            got = _client_sleeps(pattern, i, client)
            sleeps = None if sleeps is None or got is None else [*sleeps, got]
            w = _woke(i, res)
            woken = None if woken is None or w is None else [*woken, w]
            if got is not None and w is not None and isinstance(client, dict):
                counted.append(_Counted(where, _cpu_s(client.get("cpu_s")), got, w))
    return weights, sleeps, woken, counted


def _wakes_in_chain(
    rates: Rates,
    pattern: str,
    weights: dict[Workload, int],
    omega_us: float,
    real_sleeps: float | None,
    woke: float | None,
) -> tuple[Rates, float]:
    """client_in_chain's fixed point at the calibration runs' settings (``weights``): r_z (T less ω ×
    ``woke``, the requests per message that woke the dispatcher in the runs, where they were counted;
    else less ω × the chain's own, found by the fixed point), and with the client's measured
    ``real_sleeps`` per message r_o and r_u too; and the chain's sleeps over those at the end (1 without
    them)."""
    turnaround = 1.0 / rates.r_z
    base = {"r_z": turnaround}
    fitted = replace(rates, r_v=1.0 / omega_us)
    source = {**fitted.source, "r_v": f"wake-cost {omega_us:.3g} µs at the client's share"}
    ratio = 1.0
    if woke is not None:
        base["r_z"] = _less_wakes(pattern, "the client's turnaround", turnaround, woke, omega_us)
        less = f"less the server's {woke:.3g} blocking waits per message not ended by a kick × ω"
        source["r_z"] = f"{rates.source.get('r_z', '')}, {less}"
    if real_sleeps is not None:
        # The send without the wake-ups the client's sleeps measured; the latency that makes the chain's
        # client sleep as often, from ω.
        send = 1.0 / rates.r_o
        base["r_o"] = _less_wakes(pattern, "the server's send", send, real_sleeps, omega_us)
        base["r_u"] = omega_us
        source["r_o"] = f"{source.get('r_o', '')}, less the client's {real_sleeps:.3g} sleeps per message × ω"
    elif woke is not None:
        return replace(fitted, **_per_us(base), source=source), ratio
    steps = ([] if woke is not None else [WAKE]) + ([] if real_sleeps is None else [SEND_WAKE])
    for _round in range(WAKE_ROUNDS):
        fitted = replace(fitted, **_per_us(base), source=source)
        wakes = _chain_wakes(fitted, pattern, weights, steps)
        moved = False
        if woke is None:
            new = _less_wakes(pattern, "the client's turnaround", turnaround, wakes[WAKE], omega_us)
            moved = abs(new - base["r_z"]) > PER_CALL_TOLERANCE * base["r_z"]
            base["r_z"] = new
            less = f"less {wakes[WAKE]:.3g} wake-ups per message in the chain × ω"
            source = {**source, "r_z": f"{rates.source.get('r_z', '')}, {less}"}
        if real_sleeps is not None:
            # More latency, fewer and longer sleeps: L ← L·(g / sleeps)², at most ×4 either way a round;
            # at a bound that does not reach them, no more rounds.
            ratio = wakes[SEND_WAKE] / real_sleeps
            latency = base["r_u"] * min(max(ratio, 0.5), 2.0) ** 2
            bounded = min(max(latency, LATENCY_US[0]), LATENCY_US[1])
            if abs(ratio - 1.0) > SLEEPS_TOLERANCE and bounded == base["r_u"]:
                break
            moved = moved or abs(ratio - 1.0) > SLEEPS_TOLERANCE
            base["r_u"] = bounded
            source["r_u"] = f"fit:the client's sleeps {real_sleeps:.3g} per message, the chain's ×{ratio:.3g}"
        if not moved:
            break
    return replace(fitted, **_per_us(base), source=source), ratio


def _less_wakes(pattern: str, what: str, cost_us: float, wakes: float, omega_us: float) -> float:
    """``cost_us`` (µs per message) less ``wakes`` per message × ω, refused where that is not positive."""
    left = cost_us - omega_us * wakes
    if left <= 0.0:
        raise CalibrationRefused(
            f"calibrate {pattern}: refused: {what}, {cost_us:.3g} µs per message, does not cover its "
            f"wake-ups ({wakes:.3g} per message × ω {omega_us:.3g} µs)"
        )
    return left


@dataclass(frozen=True)
class _Counted:
    """A calibration run's setting, its client's CPU seconds (:func:`_cpu_s`; None: not reported), its
    client's (sleeps, messages) and its server's (requests that woke the dispatcher, messages): what
    :func:`_client_cpu_per_sleep` fits from."""

    where: Workload
    cpu_s: float | None
    sleeps: tuple[float, float]
    woke: tuple[int, int]


def _client_cpu_per_sleep(runs: Sequence[_Counted], omega_us: float) -> float | None:
    """The client's CPU per sleep of its own (µs of CPU, as ``omega_us`` is): per calibration setting, the
    client's CPU per message less ``omega_us`` per request that woke the dispatcher (:func:`_woke`),
    against its sleeps per message; the slope between the settings with the fewest and the most sleeps.
    None where the settings' sleeps differ by less than :data:`SLEEPS_SPREAD` (one setting: no slope), a
    client lacks its ``cpu_s``, or the slope is not positive."""
    by: dict[Workload, list[float]] = {}
    for run in runs:
        if run.cpu_s is None:
            return None
        cpu_us = run.cpu_s * 1e6
        n, msgs = run.sleeps
        acc = by.setdefault(run.where, [0.0, 0.0, 0.0])
        acc[0] += msgs
        acc[1] += cpu_us - omega_us * run.woke[0] * msgs / run.woke[1]
        acc[2] += n
    points = sorted((sleeps / msgs, cpu / msgs) for msgs, cpu, sleeps in by.values())
    if len(points) < 2 or points[-1][0] - points[0][0] < SLEEPS_SPREAD:
        return None
    (s0, t0), (s1, t1) = points[0], points[-1]
    slope = (t1 - t0) / (s1 - s0)
    return slope if slope > 0.0 else None


def _woke(i: int, res: dict[str, Any]) -> tuple[int, int] | None:
    """(the requests that woke the dispatcher, the messages) of server result #``i``: its blocking waits
    in the notifier (``idle``, CONTRACTS §1) less the waits a re-arm's kick ended (``kick``), at least 0;
    None for a run without the ``idle`` timing (uninstrumented, or from before it)."""
    ops = res.get("ops")
    idle = ops.get("idle") if isinstance(ops, dict) else None
    if not isinstance(ops, dict) or not isinstance(idle, dict):
        return None
    waits = idle.get("count")
    if isinstance(waits, bool) or not isinstance(waits, int) or waits < 0:
        raise DemuxlabError(
            f"calibrate {res.get('pattern')}: server result #{i}: ops.idle.count must be a non-negative "
            f"integer, got {waits!r}"
        )
    return max(waits - _kicks([res]), 0), _messages(f"server result #{i}", res)


def _client_sleeps(pattern: str, i: int, client: dict[str, Any] | None) -> tuple[float, float] | None:
    """The client's sleeps and messages over its measure phase (client result #``i``'s ``sleeps``,
    ``messages``), or None where it did not count them (no ``sleeps``, or null: a client from before the
    count, or one whose threads could not read theirs; or no client). A ``sleeps`` that is not a
    non-negative integer is an error, not "not counted"."""
    if not isinstance(client, dict):
        return None
    n, m = client.get("sleeps"), client.get("messages")
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise DemuxlabError(
            f"calibrate {pattern}: client result #{i}: sleeps must be a non-negative integer or null, "
            f"got {n!r}"
        )
    if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
        return None
    return float(n), float(m)


def _per_us(costs_us: dict[str, float]) -> dict[str, Any]:
    """Rates (per µs) by name from their costs (µs): what :func:`dataclasses.replace` takes."""
    return {rate: 1.0 / cost for rate, cost in costs_us.items()}


def _chain_wakes(
    rates: Rates, pattern: str, weights: dict[Workload, int], steps: Sequence[str]
) -> dict[str, float]:
    """Each of the chain's ``steps`` per message at the calibration runs' settings, weighted by their
    messages (SSA: the throughput at :data:`PER_CALL_REL_CI`, the steps at :data:`WAKE_REL_CI`)."""
    got = dict.fromkeys(steps, 0.0)
    for model, n in _at_settings(rates, pattern, weights):
        msgs = simulate(model, rel_ci=PER_CALL_REL_CI).throughput_per_us
        for step, fired in per_message(model, steps, msgs, rel_ci=WAKE_REL_CI).items():
            got[step] += n * fired
    total = sum(weights.values())
    return {step: v / total for step, v in got.items()}


def _dispatcher_wait_per_call_us(
    pattern: str, results: Sequence[dict[str, Any]], threads: int
) -> float | None:
    """The dispatching role's wait for a CPU per notifier call (µs: its threads' ``wait_s`` over the
    server's calls), where the runs had more threads than cores and the pattern's chain can be scheduled
    (rates.SCHEDULED); None otherwise (no ``wait_s``, a core per thread, no wait)."""
    if pattern not in SCHEDULED:
        return None
    role = ROLES[pattern][0]
    wait = 0.0
    calls = 0
    for res in results:
        cores = server_cores(res, pattern)
        if cores is None or cores >= threads:
            return None
        for t in res["threads_detail"]:
            if t.get("role") in role.names:
                w = t.get("wait_s")
                if not isinstance(w, int | float) or isinstance(w, bool):
                    return None
                wait += float(w)
        calls += _calls(res)
    if calls <= 0 or wait <= 0.0:
        return None
    per_call = wait * 1e6 / calls
    if per_call > MAX_OVERHEAD_US:
        raise CalibrationRefused(
            f"calibrate {pattern}: refused: the {role.names[0]} waited {per_call:.4g} µs for a CPU per "
            f"notifier call (more than {MAX_OVERHEAD_US:g} µs: an artefact)"
        )
    return per_call


@dataclass(frozen=True)
class _Demand:
    """A role's CPU per message over some runs: its operations' wall times per message (``walls``, by
    rate), the scale that makes them CPU, and the CPU no operation covers (``overhead``, per message)."""

    walls: dict[str, float]
    scale: float
    overhead: float
    messages: int
    calls: int


def _demand(
    role: Role,
    pattern: str,
    notifier: str,
    names: Sequence[str],
    results: Sequence[dict[str, Any]],
    speed: float,
) -> _Demand:
    """Steps 1–3 of the module's fit for one role over ``results`` (pooled: Σ over runs / Σ messages)."""
    runs = list(zip(names, results, strict=True))
    msgs = sum(_messages(n, r) for n, r in runs)
    cpu_us = sum(_role_cpu_s(r, role) for r in results) * 1e6 / msgs
    work_us = sum(_work_spun_us(r) * _messages(n, r) for n, r in runs) / msgs
    demand = max(cpu_us - (work_us if role.works else 0.0), 0.0)
    walls: dict[str, float] = {}
    for op, rate in role.ops:
        if rate in INSTANT.get(pattern, {}) or (rate == "r_a" and notifier in NO_REARM_NOTIFIERS):
            continue
        if rate == KICK_RATE:
            # Only select and poll kick, and only servers since the `kick` timing say so: without a kick in
            # any run the chain does not kick (r_k instant) and a kick's CPU, if any, is untimed (r_x).
            if _kicks(results) > 0:
                walls[rate] = sum(_op_total_ns(n, r, op, required=False) for n, r in runs) / msgs / 1000
            continue
        if rate in TIMED_SINCE.get(pattern, {}) and not any(op in (r.get("ops") or {}) for r in results):
            continue
        walls[rate] = sum(_op_total_ns(n, r, op) for n, r in runs) / msgs / 1000
    notify_per_msg = 0.0
    if role.notifies:
        notify_per_msg = sum(_op_total_ns(n, r, "notify", required=False) for n, r in runs) / msgs / 1000
    timed = sum(walls.values()) + notify_per_msg
    if role.works and work_us > 0 and demand < SPIN_FLOOR * work_us:
        # The CPU per message is (nearly) all spin: the spin was cut short by preemption (it ends on the
        # wall clock) and the role's other CPU cannot be told from it; its operations are taken at the
        # server's speed instead.
        demand = speed * timed
    scale = min(1.0, demand / timed) if timed > 0 else 1.0
    overhead = max(demand - timed * scale, 0.0)
    return _Demand(walls, scale, overhead, msgs, sum(_calls(r) for r in results))


def _rate_or_instant(us: float, source: str, what: str) -> tuple[float, str]:
    """A fitted cost of ``us`` µs as (rate, source); one of 1 ns or less is instant, and its source says so
    (the model page draws no bar for an ``instant:`` rate: its placeholder is not a measurement)."""
    if us > 1.0 / INSTANT_RATE:
        return 1.0 / us, source
    return INSTANT_RATE, f"instant:{what} fitted at ≤ 1 ns"


def _lowest_work(results: Sequence[dict[str, Any]]) -> list[int]:
    """The indices of the runs with the least work per message."""
    least = min(_work_spun_us(r) for r in results)
    return [i for i, r in enumerate(results) if _work_spun_us(r) == least]


def _scaled(scale: float) -> str:
    """The source suffix of an operation scaled to the CPU its role used (none within 0.5 %)."""
    return f" ×{scale:.3g} (cpu)" if scale < 0.995 else ""


def server_cores(res: dict[str, Any], pattern: str) -> int | None:
    """The number of distinct CPUs the threads of the pattern's chain roles were pinned to
    (``threads_detail[].cpu``), or None where any of them was not pinned. A thread the chain leaves out
    (tpc's acceptor) can sit on a CPU none of the modelled threads uses (tpc at one thread: its connection
    threads on one CPU, the acceptor on the next); counting that CPU would give them a core they never
    had."""
    detail = res.get("threads_detail")
    if not isinstance(detail, list) or not detail:
        return None
    names = {n for r in _roles(pattern) for n in r.names}
    cpus = [t.get("cpu") for t in detail if isinstance(t, dict) and t.get("role") in names]
    if not cpus:
        return None
    if any(not isinstance(c, int) or isinstance(c, bool) for c in cpus):
        return None
    return len(set(cpus))


# -- reading the server's JSON -------------------------------------------------------------------------------


def _roles(pattern: str) -> tuple[Role, ...]:
    return ROLES[pattern]


def _check_run(name: str, res: Any, pattern: str) -> None:
    if not isinstance(res, dict):
        raise DemuxlabError(f"calibrate: {name}: server result is not a JSON object")
    if res.get("pattern") != pattern:
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: pattern is {res.get('pattern')!r}, not {pattern!r}"
        )
    lo = calibration_threads(pattern)
    if res.get("threads") != lo:
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: threads={res.get('threads')!r}; calibration needs the lowest "
            f"concurrency, threads={lo}"
        )
    if res.get("instrument") is not True or not isinstance(res.get("ops"), dict):
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: not an instrumented run (no ops; use --instrument)"
        )
    _messages(name, res)
    detail = res.get("threads_detail")
    if not isinstance(detail, list) or not detail or not all(isinstance(t, dict) for t in detail):
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: threads_detail is missing (needed for the CPU times)"
        )
    for role in _roles(pattern):
        if not any(t.get("role") in role.names for t in detail):
            raise DemuxlabError(
                f"calibrate {pattern}: {name}: no thread with role {role.names[0]!r} in threads_detail"
            )
    for t in detail:
        cpu = t.get("cpu_s")
        if not isinstance(cpu, dict) or not all(isinstance(cpu.get(k), int | float) for k in ("user", "sys")):
            raise DemuxlabError(
                f"calibrate {pattern}: {name}: threads_detail[{t.get('index')}].cpu_s needs user and sys"
            )


def _messages(name: str, res: dict[str, Any]) -> int:
    m = res.get("messages")
    if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
        raise DemuxlabError(
            f"calibrate {res.get('pattern')}: {name}: messages must be a positive integer, got {m!r}"
        )
    return m


def _events_mean(res: dict[str, Any]) -> float:
    """The descriptors (completions) one notifier call returned on average (``events_per_call.mean``)."""
    epc = res.get("events_per_call")
    mean = epc.get("mean") if isinstance(epc, dict) else None
    return float(mean) if isinstance(mean, int | float) and not isinstance(mean, bool) and mean > 0 else 0.0


def _calls(res: dict[str, Any]) -> int:
    epc = res.get("events_per_call")
    calls = epc.get("calls") if isinstance(epc, dict) else None
    return calls if isinstance(calls, int) and calls > 0 else 0


def _role_cpu_s(res: dict[str, Any], role: Role) -> float:
    return sum(
        float(t["cpu_s"]["user"]) + float(t["cpu_s"]["sys"])
        for t in res["threads_detail"]
        if t.get("role") in role.names
    )


def _work_spun_us(res: dict[str, Any]) -> float:
    """The work per message: the nominal ``work_us`` (the spin's CPU; its wall time, ``work``, may include
    preemption). 0 without work."""
    work = res.get("work_us")
    return float(work) if isinstance(work, int | float) and work > 0 else 0.0


def _op_total_ns(name: str, res: dict[str, Any], op: str, required: bool = True) -> float:
    entry = res["ops"].get(op)
    if entry is None and not required:
        return 0.0
    if not isinstance(entry, dict):
        raise DemuxlabError(f"calibrate {res.get('pattern')}: {name}: op {op!r} is missing from ops")
    count = entry.get("count")
    if not isinstance(count, int) or count <= 0:
        raise DemuxlabError(f"calibrate: {name}: ops.{op}.count must be a positive integer, got {count!r}")
    total = entry.get("total_ns")
    if not isinstance(total, int | float):
        mean = entry.get("mean_ns")
        if not isinstance(mean, int | float):
            raise DemuxlabError(f"calibrate: {name}: ops.{op} has neither total_ns nor mean_ns")
        total = float(mean) * count
    return float(total)


def _kicks(results: Sequence[dict[str, Any]]) -> int:
    """The re-arms' kicks of a waiting dispatcher over the runs (``ops.kick.count``; 0 where none)."""
    got = 0
    for res in results:
        count = (res["ops"].get("kick") or {}).get("count")
        got += count if isinstance(count, int) and count > 0 else 0
    return got


def _lock_median_us(results: Sequence[dict[str, Any]]) -> float | None:
    """The ``lock`` op's median (µs), weighted by the runs' counts; None where no run has it."""
    num = 0.0
    den = 0
    for res in results:
        entry = res["ops"].get("lock")
        if not isinstance(entry, dict):
            continue
        count, p50 = entry.get("count"), entry.get("p50_ns", entry.get("mean_ns"))
        if isinstance(count, int) and count > 0 and isinstance(p50, int | float) and p50 > 0:
            num += count * float(p50)
            den += count
    return num / den / 1000.0 if den else None


def _speed(names: Sequence[str], results: Sequence[dict[str, Any]], pattern: str) -> float:
    """The share of its CPUs the server's threads got: Σ CPU / Σ (runnable time), capped at 1.

    A thread's runnable time is its CPU time plus the time it waited for a CPU held by something other
    than the run's own threads — their sharing is the chain's, not the host's load.

    - With ``wait_s`` (the kernel's run_delay, CONTRACTS §1): a thread can have waited for the run's own
      threads at most as long as they used the CPUs it may run on (Σ of the others' CPU time / cores, where
      the threads outnumber the cores); what it waited beyond that was the host's other load.
    - A server from before ``wait_s``: the time it neither waited for work (``idle_s``; tpc: its blocking
      ``recv``) nor was busy, less elapsed × E[(runnable threads − cores)⁺] (busy fractions taken as
      independent). It misses the waits after a wake-up, which ``idle_s`` holds.
    """
    cpu = 0.0
    runnable = 0.0
    for name, res in zip(names, results, strict=True):
        elapsed = res.get("elapsed_s")
        if not isinstance(elapsed, int | float) or elapsed <= 0:
            raise DemuxlabError(f"calibrate {pattern}: {name}: elapsed_s must be positive, got {elapsed!r}")
        threads = [t for t in res["threads_detail"] if any(t.get("role") in r.names for r in _roles(pattern))]
        # Per thread (a tpc slot's entry sums its connection threads, dealt round-robin): (cpu, idle, wait).
        each: list[tuple[float, float, float | None]] = []
        for t in threads:
            c = float(t["cpu_s"]["user"]) + float(t["cpu_s"]["sys"])
            idle = t.get("idle_s")
            if not isinstance(idle, int | float):
                raise DemuxlabError(
                    f"calibrate {pattern}: {name}: threads_detail[{t.get('index')}].idle_s is missing"
                )
            n = 1
            if pattern == "tpc":
                conns = int(res.get("connections_accepted") or len(threads))
                n = max(1, round(conns / len(threads)))
                if float(idle) == 0.0:  # they block in recv: that is their waiting for work
                    idle = _op_total_ns(name, res, "recv") / 1e9 / len(threads)
            w = t.get("wait_s")
            wait = float(w) / n if isinstance(w, int | float) and not isinstance(w, bool) else None
            each += [(c / n, float(idle) / n, wait)] * n
        cores = server_cores(res, pattern) or len(each)
        total = sum(c for c, _, _ in each)
        if all(w is not None for _, _, w in each):
            crowded = len(each) > cores
            for c, _, w in each:
                own = (total - c) / cores if crowded else 0.0  # the most it can have waited for its own
                cpu += c
                runnable += c + max(float(w or 0.0) - own, 0.0)
            continue
        busy = [max(float(elapsed) - idle, 0.0) for _, idle, _ in each]
        cpu += total
        runnable += sum(busy) - float(elapsed) * _expected_excess(
            [min(b / elapsed, 1.0) for b in busy], cores
        )
    if runnable <= 0.0 or cpu <= 0.0:
        return 1.0
    return max(min(cpu / max(runnable, cpu), 1.0), 1e-3)


def _expected_excess(busy: Sequence[float], cores: int) -> float:
    """E[(Σ Bernoulli(b_i) − cores)⁺]: the threads beyond the cores, busy independently."""
    dist = [1.0]  # dist[k] = P(k of the threads so far are busy)
    for b in busy:
        nxt = [0.0] * (len(dist) + 1)
        for k, p in enumerate(dist):
            nxt[k] += p * (1.0 - b)
            nxt[k + 1] += p * b
        dist = nxt
    return sum(p * (k - cores) for k, p in enumerate(dist) if k > cores)


def _client_rate(
    clients: Sequence[dict[str, Any] | None] | None,
    client_cores: Sequence[int | None] | None,
    speed: float,
) -> tuple[float, float] | None:
    """(the client's turnaround rate per µs, its share of its CPUs) from its CPU per message, pooled over
    the runs; None without client results.

    The share is its CPU over CPU + the time it waited for a CPU (``wait_s``, the kernel's run_delay over
    the measure phase, CONTRACTS §2), less what its threads can have waited for each other where they
    outnumber its CPUs; a client without ``wait_s`` is taken to share the server's ``speed`` (the same
    host's load)."""
    if clients is None:
        return None
    cpu = 0.0
    msgs = 0
    runnable = 0.0
    measured_wait = True
    for i, c in enumerate(clients):
        if not isinstance(c, dict):
            continue
        used, m = _cpu_s(c.get("cpu_s")), c.get("messages")
        if used is None or not isinstance(m, int) or m <= 0:
            continue
        cpu += used
        msgs += m
        wait = c.get("wait_s")
        if not isinstance(wait, int | float) or isinstance(wait, bool):
            measured_wait = False
            continue
        given = c.get("threads")
        threads = given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else 1
        cores = (client_cores[i] if client_cores is not None else None) or threads
        own = (threads - 1) * used / cores if threads > cores else 0.0
        runnable += used + max(float(wait) - own, 0.0)
    if msgs == 0 or cpu <= 0.0:
        return None
    share = min(cpu / runnable, 1.0) if measured_wait and runnable > 0 else speed
    return share / (cpu * 1e6 / msgs), share


def _cpu_s(times: Any) -> float | None:
    """A client's CPU seconds, user + sys, from its ``cpu_s`` (CONTRACTS §2); None where it has none."""
    if not isinstance(times, dict):
        return None
    return float(times.get("user", 0.0)) + float(times.get("sys", 0.0))


def _mean_events(results: Sequence[dict[str, Any]]) -> float:
    """The mean descriptors per notifier call that returned some (``notify_by_events``), at least 1."""
    n = h = 0.0
    for res in results:
        for b in res.get("notify_by_events") or []:
            if isinstance(b, dict) and isinstance(b.get("count"), int) and isinstance(b.get("events"), int):
                n += b["count"]
                h += b["count"] * b["events"]
    return max(h / n, 1.0) if n else 1.0


def _alpha_per_call(
    names: Sequence[str],
    results: Sequence[dict[str, Any]],
    untimed_per_call: float,
    tau_us: float,
    scale: float,
) -> float:
    """α (µs) of a dispatching role: its notifier CPU per call, over *all* its calls, less τ per descriptor.

    The chain charges a call α + τh. The server times only the calls that found descriptors at once
    (``notify``); a call that found none blocked, and its CPU (the empty call, the blocking one, being
    woken) is in the role's untimed CPU with the rest. So α is (the ``notify`` time + the untimed CPU) per
    call less τ × the descriptors per call (``events_per_call``, every call; at least the timed calls'),
    which makes the chain's notifier CPU per message the server's at the server's calls per message.
    With every call a hit this is the intercept of ``notify_by_events`` plus the untimed CPU per call;
    where most calls block (a dispatcher with a core of its own) that sum charges every call what only the
    hits cost, on top of the blocking calls' own CPU: HSHA at 2 threads on a 16-core host (98 % of its
    calls blocked) got α = 6.1 µs against 4.4 µs of CPU per call."""
    calls = max(sum(_calls(r) for r in results), 1)
    notify_us = sum(_op_total_ns(n, r, "notify", required=False) for n, r in zip(names, results, strict=True))
    events = sum(max(_calls(r) * _events_mean(r), _timed_events(r)) for r in results)
    return max(untimed_per_call + (notify_us / 1000.0 - tau_us * events) * scale / calls, 0.0)


def _timed_events(res: dict[str, Any]) -> float:
    """The descriptors the timed notifier calls returned (Σ ``notify_by_events`` events × count)."""
    buckets = res.get("notify_by_events")
    return float(
        sum(b["events"] * b["count"] for b in buckets if isinstance(b, dict))
        if isinstance(buckets, list)
        else 0
    )


def _fit_notify_us(
    names: Sequence[str], results: Sequence[dict[str, Any]], pattern: str
) -> tuple[float, float]:
    """(α, τ) in µs: least squares of call time on descriptors returned, t = α + τh, weighted by calls,
    over the buckets 1..64 of every run; α < 0 (or a single h) falls back to the line through the origin."""
    pts: list[tuple[float, float, float]] = []  # (h, t µs, calls)
    for name, res in zip(names, results, strict=True):
        buckets = res.get("notify_by_events")
        if not isinstance(buckets, list) or not buckets:
            raise DemuxlabError(f"calibrate {pattern}: {name}: notify_by_events is missing (needed for r_e)")
        for b in buckets:
            if not isinstance(b, dict):
                raise DemuxlabError(f"calibrate: {name}: notify_by_events entry {b!r} is not an object")
            h, n, t = b.get("events"), b.get("count"), b.get("mean_ns")
            if not isinstance(h, int) or not isinstance(n, int) or not isinstance(t, int | float):
                raise DemuxlabError(
                    f"calibrate: {name}: notify_by_events entry {b!r} needs events, count, mean_ns"
                )
            if 1 <= h <= CACHE_SIZE and n > 0:
                pts.append((float(h), float(t) / 1000.0, float(n)))
    if not pts or sum(n * h * t for h, t, n in pts) <= 0:
        raise DemuxlabError(
            f"calibrate {pattern}: notify_by_events has no bucket with 1..{CACHE_SIZE} events and calls"
        )
    sw = sum(n for _, _, n in pts)
    mh = sum(n * h for h, _, n in pts) / sw
    mt = sum(n * t for _, t, n in pts) / sw
    var = sum(n * (h - mh) ** 2 for h, _, n in pts)
    if var > 0:
        tau = sum(n * (h - mh) * (t - mt) for h, t, n in pts) / var
        alpha = mt - tau * mh
        if alpha >= 0 and tau > 0:
            return alpha, tau
    tau = sum(n * h * t for h, t, n in pts) / sum(n * h * h for h, _, n in pts)
    return 0.0, tau

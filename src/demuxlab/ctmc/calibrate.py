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
                                                     :func:`_alpha_per_call`), charged per call the
                                                     chain makes
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

The fit is split by concern: this module (the entry point, the self-check and the refusal), ``fit_runs``
(reading the runs' JSON), ``fit_roles`` (each role's demands, the notifier's fit, the speed),
``fit_notifier`` (the notifier in the chain's own descriptors, the scheduler's wake-up) and ``fit_client``
(the client's wake-ups in the chain's own). Which role does which operation, and the rates a pattern's
chain has no step for, are the pattern's model's (:mod:`demuxlab.ctmc.registry`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from demuxlab.ctmc.fit_check import (
    PLAIN,
    SELF_CHECK_TOLERANCE,
    SelfCheck,
    _Check,
    _self_checked,
    _Settings,
    self_check,
)
from demuxlab.ctmc.fit_client import WAKE, WAKE_REL_CI, client_in_chain
from demuxlab.ctmc.fit_notifier import notifier_in_chain
from demuxlab.ctmc.fit_plain import (
    ABLATIONS,
    MAX_PACE_FACTOR,
    PlainRun,
    apply_paces,
    checked_off,
    checked_plain,
    client_pace,
    leave_out,
    pace_note,
    role_paces,
)
from demuxlab.ctmc.fit_roles import MAX_RATE_FACTOR, _other_rates, _refuse_artefacts, _role_rates, _speed
from demuxlab.ctmc.fit_runs import (
    MAX_OVERHEAD_US,
    CalibrationRefused,
    _check_run,
    server_cores,
)
from demuxlab.ctmc.pattern import OpRole
from demuxlab.ctmc.rates import (
    INSTANT_RATE,
    Rates,
    check_pattern,
    paper_rates,
    workload_key,
)
from demuxlab.ctmc.registry import BUILT_IN, model_of
from demuxlab.errors import DemuxlabError

__all__ = [
    "ABLATIONS",
    "HANDOFF",
    "INSTANT",
    "INSTANT_RATE",
    "MAX_OVERHEAD_US",
    "MAX_RATE_FACTOR",
    "PEEK_ONLY",
    "PLAIN",
    "ROLES",
    "SELF_CHECK_TOLERANCE",
    "TIMED_SINCE",
    "WAKE",
    "WAKE_REL_CI",
    "CalibrationRefused",
    "PlainRun",
    "Role",
    "SelfCheck",
    "calibrate",
    "client_in_chain",
    "notifier_in_chain",
    "self_check",
    "server_cores",
]  # fmt: skip

# The built-in patterns' calibration facts, as they were named here before the registry (each pattern's
# model holds them: roles, instant, timed_since, handoff, peek_only).
Role = OpRole
ROLES: dict[str, tuple[OpRole, ...]] = {m.pattern: m.roles for m in BUILT_IN}
INSTANT: dict[str, dict[str, str]] = {m.pattern: dict(m.instant) for m in BUILT_IN if m.instant}
TIMED_SINCE: dict[str, dict[str, str]] = {m.pattern: dict(m.timed_since) for m in BUILT_IN if m.timed_since}
HANDOFF: dict[str, str] = {m.pattern: m.handoff for m in BUILT_IN if m.handoff}
PEEK_ONLY = frozenset(m.pattern for m in BUILT_IN if m.peek_only)


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
    plain: Sequence[PlainRun] = (),
    off: Collection[str] = (),
) -> Rates:
    """Rates of ``pattern`` from lowest-concurrency instrumented server exit JSONs (see :func:`_fit`), with
    the plain runs of the same points (``plain``: their speed and their self-check, :mod:`.fit_plain`) and
    without the parts named in ``off`` (:data:`ABLATIONS`: the rate ablation).

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
    if any(not isinstance(r, PlainRun) for r in plain):
        raise DemuxlabError(f"calibrate {pattern}: plain: each must be a PlainRun")
    settings = _Settings(wake_us, handoff_us, tuple(plain), checked_off(off, pattern))
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
            server_results, pattern, labels, measured=measured, connections=connections, checks=checks,
            clients=clients, client_cores=client_cores, settings=settings,
        )  # fmt: skip

    def pick(seq: Sequence[Any] | None, idx: list[int]) -> list[Any] | None:
        return None if seq is None else [seq[i] for i in idx]

    pooled = _fit(
        server_results, pattern, labels, connections=connections, clients=clients, client_cores=client_cores,
        settings=settings,
    )  # fmt: skip
    workloads: dict[str, Rates] = {}
    got: list[SelfCheck] = []
    for key, idx in sorted(groups.items()):
        mine: list[SelfCheck] = []
        own = replace(settings, plain=tuple(r for r in settings.plain if workload_key(*r.workload) == key))
        try:
            workloads[key] = _fit(
                [server_results[i] for i in idx], pattern, pick(labels, idx), measured=pick(measured, idx),
                connections=pick(connections, idx), checks=mine, clients=pick(clients, idx),
                client_cores=pick(client_cores, idx), settings=own,
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
    settings: _Settings | None = None,
) -> Rates:
    """Rates of ``pattern`` from lowest-concurrency instrumented server exit JSONs of one workload.

    ``measured`` (one per result: the run's measured throughput in msgs/s, e.g. the client's
    ``throughput_msgs_per_s``; None for a run without one) turns on the self-check: the calibration is
    refused when the model with the fitted rates misses its own runs by more than 10 % — the plain runs
    (``settings.plain``) where the workload has some with a measurement, else the instrumented ones.
    ``connections`` (one per result) defaults to the server's ``connections_accepted``. ``clients`` (one
    client JSON per result, CONTRACTS §2) gives the client's CPU per message, r_z, and its threads;
    ``client_cores`` (per result) the CPUs it was pinned to (default: one per client thread).
    ``settings.wake_us`` (ω, µs of the client's CPU; ``build/bin/wake-cost`` measures it) is what a request
    costs the client more when it wakes a dispatcher asleep in its notifier: HSHA's and the proactor's chains
    charge it (r_v) and the client's turnaround is fitted without it (:func:`client_in_chain`); None or 0:
    not charged. ``settings.handoff_us`` (µs from a lock's release to its waiter, asleep on it on the
    server's CPU, holding it; wake-cost measures it) is what a chain that hands a contended lock to a
    sleeper charges (the pattern model's ``handoff``: r_h); None or 0: not charged. The server's cores are
    the CPUs its threads were pinned to (``threads_detail[].cpu``). ``checks``, if given, receives the
    self-check's comparisons. Raises :class:`CalibrationRefused` (a ``DemuxlabError``) for a refusal,
    ``DemuxlabError`` for bad input.
    """
    check_pattern(pattern)
    settings = settings if settings is not None else _Settings()
    off = settings.off
    names, notifier = _checked_inputs(
        server_results,
        pattern,
        labels,
        measured,
        clients,
        client_cores,
        settings.wake_us,
        settings.handoff_us,
    )
    plain_names = checked_plain(settings.plain, pattern, notifier)
    what = f"calibrate {pattern}/{notifier}"
    if "r_k" in off:
        server_results = [_without_op(res, "kick") for res in server_results]
    clients = None if "r_z" in off else clients
    paper = paper_rates(pattern, notifier)
    values: dict[str, Any] = {}  # the rates (floats), per µs
    source: dict[str, str] = {}
    measured_us: dict[str, float] = {}  # the operations' own times (before the CPU scaling), µs
    speed, paces, speed_how = _speed_and_paces(pattern, names, server_results, plain_names, settings, what)
    _role_rates(pattern, notifier, names, server_results, speed, values, source, measured_us)
    client = _other_rates(
        pattern, notifier, server_results, clients, client_cores, speed, paper, values, source, measured_us
    )
    _refuse_artefacts(measured_us, paper, source, what)
    apply_paces(pattern, paces, values, source)
    client = _paced_client(client, server_results, clients, settings, values, source, what)
    leave_out(off, paper, values, source)
    source["speed"] = speed_how
    try:
        rates = _in_chain(
            Rates(**values, speed=speed, source=source), pattern, server_results, connections, clients,
            client_cores, client, settings,
        )  # fmt: skip
    except CalibrationRefused as exc:
        # the in-chain fits know the pattern only: the refusal names the calibration, as every other does
        said = str(exc)
        lead = f"calibrate {pattern}: "
        raise CalibrationRefused(f"{what}: {said[len(lead) :]}" if said.startswith(lead) else said) from None
    if measured is not None or settings.plain:
        _self_checked(
            rates, pattern, _Check.of(server_results, measured, connections, clients, client_cores, settings),
            checks, what, speed,
        )  # fmt: skip
    return rates


def _speed_and_paces(
    pattern: str,
    names: Sequence[str],
    server_results: Sequence[dict[str, Any]],
    plain_names: Sequence[str],
    settings: _Settings,
    what: str,
) -> tuple[float, dict[str, float], str]:
    """The server's share of its CPUs (the plain runs' where there are some), each role's pace (its plain
    runs' CPU per message over its instrumented runs'), and how ``speed``'s source says so. A pace beyond
    :data:`MAX_PACE_FACTOR` either way is refused: the runs are not of the same point."""
    plain = [r.server for r in settings.plain]
    if "speed" in settings.off:
        speed, how = 1.0, "ablation: " + ABLATIONS["speed"]
    elif plain:
        speed = _speed(plain_names, plain, pattern)
        how = f"cpu / runnable time of the server's threads in the {len(plain)} plain runs"
    else:
        speed = _speed(names, server_results, pattern)
        how = "cpu / runnable time of the server's threads (no plain runs: the instrumented ones')"
    paces = {} if "pace" in settings.off or not plain else role_paces(pattern, server_results, plain)
    for role, f in paces.items():
        if not 1.0 / MAX_PACE_FACTOR <= f <= MAX_PACE_FACTOR:
            raise CalibrationRefused(
                f"{what}: refused: the {role}'s cpu per message in the plain runs is {f:.3g}× the "
                f"instrumented runs' (more than {MAX_PACE_FACTOR:g}× either way: not the same point)"
            )
    return speed, paces, how + pace_note(paces)


def _paced_client(
    client: tuple[float, float] | None,
    server_results: Sequence[dict[str, Any]],
    clients: Sequence[dict[str, Any] | None] | None,
    settings: _Settings,
    values: dict[str, Any],
    source: dict[str, str],
    what: str,
) -> tuple[float, float] | None:
    """The client's turnaround r_z at the plain runs' pace (:func:`client_pace`), as every role's rates are
    at theirs; beyond :data:`MAX_PACE_FACTOR` either way it is refused as a role's pace is."""
    if client is None or "pace" in settings.off or not settings.plain:
        return client
    f = client_pace(server_results, clients, settings.plain)
    if f is None:
        return client
    if not 1.0 / MAX_PACE_FACTOR <= f <= MAX_PACE_FACTOR:
        raise CalibrationRefused(
            f"{what}: refused: the client's cpu per message in the plain runs is {f:.3g}× the "
            f"instrumented runs' (more than {MAX_PACE_FACTOR:g}× either way: not the same point)"
        )
    values["r_z"] = values["r_z"] / f
    source["r_z"] = f"{source['r_z']} ×{f:.3g} (plain runs' cpu)"
    return client[0] / f, client[1]


def _in_chain(
    rates: Rates,
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    connections: Sequence[int | None] | None,
    clients: Sequence[dict[str, Any] | None] | None,
    client_cores: Sequence[int | None] | None,
    client: tuple[float, float] | None,
    settings: _Settings,
) -> Rates:
    """The notifier in the chain's own descriptors and the scheduler's wake-up (:func:`notifier_in_chain`),
    the client's wake-ups in the chain's own sleeps (:func:`client_in_chain`), and the lock's hand-off,
    each unless left out (``settings.off``)."""
    off, wake_us, handoff_us = settings.off, settings.wake_us, settings.handoff_us
    if model_of(pattern).notifies:
        rates = notifier_in_chain(
            rates, pattern, server_results, connections, clients=clients, client_cores=client_cores,
            wake_up="r_w" not in off,
        )  # fmt: skip
    if wake_us and client is not None and "r_v" not in off:
        rates = client_in_chain(
            rates, pattern, server_results, connections, wake_us / client[1], clients=clients,
            client_cores=client_cores, client_share=client[1], sleeps="r_u" not in off,
        )  # fmt: skip
    if handoff_us and model_of(pattern).handoff and "r_h" not in off:
        # The lock handed to a waiter asleep on it: the waiter runs after its wake-up (the server host's).
        source = {**rates.source, "r_h": f"handoff_us: {handoff_us:.3g} µs, {model_of(pattern).handoff}"}
        rates = replace(rates, r_h=1.0 / handoff_us, source=source)
    return rates


def _without_op(res: dict[str, Any], op: str) -> dict[str, Any]:
    """``res`` as a server that did not time ``op`` would have written it (the ``r_k`` ablation)."""
    ops = res.get("ops")
    if not isinstance(ops, dict) or op not in ops:
        return res
    return {**res, "ops": {k: v for k, v in ops.items() if k != op}}


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
        if model_of(pattern).notifies and (
            not isinstance(epc, dict) or not isinstance(epc.get("cache"), int)
        ):
            raise CalibrationRefused(
                f"{what}: refused: {name}: the server's notify times include blocking (no "
                "events_per_call.cache: a demux-server from before the notify/idle split); rebuild the "
                "server and run again"
            )
    return names, notifier

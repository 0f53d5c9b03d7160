"""Calibration of the model rates from the server's per-operation timings (seed 001 §V-A).

The paper measures every rate on the lowest-concurrency deployment (HSHA: monitor + one worker,
``threads = 2``; LF: ``threads = 1``), where locks see no contention. From the server exit JSON
(CONTRACTS.md §1, ``--instrument``), rate = 1 / mean service time in µs, pooled over runs as
Σ total_ns / Σ count — per call, or per message (count = the ``work`` op's, one per message) where the
model has one step per message but the server may need several calls for it:

=====  ==============  ===========  =======================================================================
rate   op              per          note
=====  ==============  ===========  =======================================================================
r_l    lock            call         every lock operation of the model uses r_l (§V-A)
r_p    queue_put       call         HSHA only (LF has no queue: paper value kept, the LF model never uses it)
r_g    queue_get       call         HSHA only (as r_p)
r_i    recv            message      edge-triggered servers read until EAGAIN: two recv calls per message
r_o    send            message      a large message may take several send calls
r_a    rearm           call         re-activation (EPOLLONESHOT re-arm, fd set update); see below
r_e    notify          —            fitted from ``notify_by_events``, see below
r_t    —               —            paper value; see below
=====  ==============  ===========  =======================================================================

r_a on a notifier that never re-arms (epoll-et: the descriptor stays armed): the server does no work
for the model's re-activation step, so the step is made instant (``INSTANT_RATE`` per µs, 1 ns) and
its source says so. Any other notifier without a ``rearm`` op is an error.

r_t is *not* the LF promotion: §V-A defines it as the rate of "retrieving a socket descriptor previously
returned by an epoll_wait" (φ3, the leader taking a cached descriptor, 10 ns in the paper). Handing
leadership on is φ6, "thread releasing leader lock", at rate r_l. The server measures no op for the cache
access, so r_t keeps the paper value and ``promote`` is not used.

r_e: the model's epoll_wait takes h / r_e for h returned descriptors (φ2 of HSHA, φ4 of LF; the model's
call returns every ready descriptor, the server's at most its cache size), so r_e is fitted as the slope
of a least-squares line through the origin of mean call time against h, weighted by the number of calls
of each bucket: τ = Σ nₕ h tₕ / Σ nₕ h², r_e = 1/τ. Every bucket is exact, the full-cache one too
(``events_per_call.cache``, 64): at 512 connections almost every LF call returns a full cache, and that
bucket carries the fit. ``notify`` is the notifier's service time only: a wait that found nothing pending
and blocked is the ``idle`` op (CONTRACTS.md §1), which the model has no step for. A server result
without ``events_per_call.cache`` predates that split (its notify times include waiting) and is refused.

Refusals (``CalibrationRefused``, naming pattern, notifier, reason and the figure):

- a fitted service time more than ``MAX_RATE_FACTOR`` (100×) away from the paper's, either way: a rate off
  by orders of magnitude is a measurement artefact, not a property of the host;
- a calibration that does not predict its own calibration runs: the model (SSA) with the fitted rates,
  at each run's work, connections and thread count, must be within ``SELF_CHECK_TOLERANCE`` (10 %) of
  the runs' measured throughput (``measured=``, the client's msgs/s; see :func:`self_check`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.ctmc.rates import RATE_FIELDS, Rates, check_pattern, min_threads, paper_rates
from demuxlab.errors import DemuxlabError

OP_OF_RATE: dict[str, dict[str, str]] = {
    "hsha": {
        "r_l": "lock",
        "r_p": "queue_put",
        "r_g": "queue_get",
        "r_i": "recv",
        "r_o": "send",
        "r_a": "rearm",
    },
    "lf": {"r_l": "lock", "r_i": "recv", "r_o": "send", "r_a": "rearm"},
}
CACHE_SIZE = 64  # the server's MAX_EVENTS: no notifier call returns more
MAX_RATE_FACTOR = 100.0  # a fitted service time this many times the paper's (or 1/this) is refused
SELF_CHECK_TOLERANCE = 0.10  # |model − measured| / measured on the calibration runs themselves
SELF_CHECK_REL_CI = 0.01
PER_MESSAGE_OPS = frozenset({"recv", "send"})
MESSAGE_OP = "work"  # the server calls it exactly once per message
NO_REARM_NOTIFIERS = frozenset({"epoll-et"})
INSTANT_RATE = 1000.0  # per µs: a step of 1 ns, for model steps the server does not perform


class CalibrationRefused(DemuxlabError):
    """The runs give rates the calibration will not stand behind (see the module's Refusals)."""


@dataclass(frozen=True)
class SelfCheck:
    """The fitted model against the calibration runs of one workload (work, connections)."""

    work_us: float  # nominal (--work-us)
    work_measured_us: float  # the runs' mean `work` op: the r_c the check predicts with
    connections: int
    threads: int
    runs: int
    measured_msgs_per_s: float
    predicted_msgs_per_s: float

    @property
    def rel_error(self) -> float:
        return (self.predicted_msgs_per_s - self.measured_msgs_per_s) / self.measured_msgs_per_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "work_us": self.work_us,
            "work_measured_us": self.work_measured_us,
            "connections": self.connections,
            "threads": self.threads,
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
) -> Rates:
    """Rates of ``pattern`` from lowest-concurrency instrumented server exit JSONs.

    ``measured`` (one per result: the run's measured throughput in msgs/s, e.g. the client's
    ``throughput_msgs_per_s``; None for a run without one) turns on the self-check: the calibration is
    refused when the model with the fitted rates misses its own runs by more than 10 %. ``connections``
    (one per result) defaults to the server's ``connections_accepted``. ``checks``, if given, receives the
    self-check's comparisons. Without ``measured`` only the fit and the plausibility refusal run.
    Raises :class:`CalibrationRefused` (a ``DemuxlabError``) for a refusal, ``DemuxlabError`` for bad input.
    """
    check_pattern(pattern)
    if not server_results:
        raise DemuxlabError(f"calibrate {pattern}: no server results given")
    names = (
        list(labels) if labels is not None else [f"server result #{i}" for i in range(len(server_results))]
    )
    if len(names) != len(server_results):
        raise DemuxlabError("calibrate: labels and server results differ in number")
    for name, res in zip(names, server_results, strict=True):
        _check_run(name, res, pattern)

    notifiers = sorted({str(res.get("notifier")) for res in server_results})
    if len(notifiers) != 1:
        raise DemuxlabError(f"calibrate {pattern}: the runs mix notifiers {notifiers}; calibrate each apart")
    for name, res in zip(names, server_results, strict=True):
        epc = res.get("events_per_call")
        if not isinstance(epc, dict) or not isinstance(epc.get("cache"), int):
            raise CalibrationRefused(
                f"calibrate {pattern}/{notifiers[0]}: refused: {name}: the server's notify times include "
                "blocking (no events_per_call.cache: a demux-server from before the notify/idle split); "
                "rebuild the server and run again"
            )
    values: dict[str, float] = {}
    source: dict[str, str] = {}
    for rate, op in OP_OF_RATE[pattern].items():
        if op == "rearm" and notifiers[0] in NO_REARM_NOTIFIERS:
            values[rate] = INSTANT_RATE
            source[rate] = f"instant:{notifiers[0]} does not re-arm"
            continue
        per_message = op in PER_MESSAGE_OPS
        count = 0
        total_ns = 0.0
        for name, res in zip(names, server_results, strict=True):
            c, t = _op_totals(name, res, op)
            count += _op_totals(name, res, MESSAGE_OP)[0] if per_message else c
            total_ns += t
        mean_us = total_ns / count / 1000.0
        if mean_us <= 0.0:
            raise DemuxlabError(f"calibrate {pattern}: op {op!r} has a non-positive mean time ({mean_us} µs)")
        values[rate] = 1.0 / mean_us
        source[rate] = f"op:{op}" + ("/message" if per_message else "")
    values["r_e"] = 1.0 / _fit_notify_us(names, server_results, pattern)
    source["r_e"] = "fit:notify_by_events"
    paper = paper_rates(pattern)
    for rate in RATE_FIELDS:
        if rate not in values:
            values[rate] = float(getattr(paper, rate))
            source[rate] = "paper"
    for rate, value in values.items():
        if source[rate] == "paper" or source[rate].startswith("instant:"):
            continue
        factor = float(getattr(paper, rate)) / value  # fitted service time / paper's
        if not (1.0 / MAX_RATE_FACTOR <= factor <= MAX_RATE_FACTOR):
            raise CalibrationRefused(
                f"calibrate {pattern}/{notifiers[0]}: refused: {rate} ({source[rate]}) is a service time of "
                f"{1.0 / value:.4g} µs, {factor:.3g}× the paper's {1.0 / float(getattr(paper, rate)):.4g} µs "
                f"(more than {MAX_RATE_FACTOR:g}× either way: a measurement artefact, not the host)"
            )
    rates = Rates(**values, source=source)
    if measured is not None:
        got = self_check(rates, pattern, server_results, measured, connections)
        if checks is not None:
            checks[:] = got
        worst = max(got, key=lambda c: abs(c.rel_error), default=None)
        if worst is not None and abs(worst.rel_error) > SELF_CHECK_TOLERANCE:
            raise CalibrationRefused(
                f"calibrate {pattern}/{notifiers[0]}: refused: the fitted rates predict "
                f"{worst.predicted_msgs_per_s:,.0f} msg/s for their own calibration run(s) at "
                f"{worst.work_us:g} µs work, {worst.connections} connections, {worst.threads} threads, "
                f"measured {worst.measured_msgs_per_s:,.0f} msg/s ({worst.rel_error:+.1%}; the limit is "
                f"±{SELF_CHECK_TOLERANCE:.0%})"
            )
    return rates


def self_check(
    rates: Rates,
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    measured: Sequence[float | None],
    connections: Sequence[int | None] | None = None,
    *,
    rel_ci: float = SELF_CHECK_REL_CI,
) -> list[SelfCheck]:
    """The model (SSA) with ``rates`` at each workload (work, connections) of the calibration runs,
    against the mean measured throughput of its runs. Runs without a measurement or with zero work (the
    model needs r_c = 1/work) are left out.

    r_c is not a fitted rate but an input, and the check gives the model the work the runs actually did:
    1 / the mean of their ``work`` op (the spin is timed on the wall clock, so on a host where the server
    shares its CPUs it includes preemption; on a quiet host it is the nominal work). The check so tests
    the fitted rates, not the host's interference with the spin; ``work_measured_us`` reports it."""
    from demuxlab.ctmc.predict import predict

    if len(measured) != len(server_results) or (
        connections is not None and len(connections) != len(measured)
    ):
        raise DemuxlabError("calibrate: measured/connections and server results differ in number")
    groups: dict[tuple[float, int], list[tuple[float, float, int]]] = {}
    for i, res in enumerate(server_results):
        m = measured[i]
        work = res.get("work_us")
        conns = connections[i] if connections is not None else None
        conns = conns if conns is not None else res.get("connections_accepted")
        if m is None or not isinstance(work, int | float) or work <= 0:
            continue
        if not isinstance(m, int | float) or not m > 0:
            raise DemuxlabError(f"calibrate {pattern}: measured throughput #{i} must be positive, got {m!r}")
        if not isinstance(conns, int) or conns < 1:
            raise DemuxlabError(f"calibrate {pattern}: connections of run #{i} unknown ({conns!r})")
        count, total_ns = _op_totals(f"server result #{i}", res, MESSAGE_OP)
        groups.setdefault((float(work), conns), []).append((float(m), total_ns, count))
    threads = min_threads(pattern)
    out: list[SelfCheck] = []
    for (work, conns), runs in sorted(groups.items()):
        spun_us = sum(t for _, t, _ in runs) / sum(c for _, _, c in runs) / 1000.0
        p = predict(pattern, threads, spun_us, method="ssa", connections=conns, rates=rates, rel_ci=rel_ci)
        mean = sum(m for m, _, _ in runs) / len(runs)
        out.append(SelfCheck(work, spun_us, conns, threads, len(runs), mean, p.throughput_msgs_per_s))
    return out


def _check_run(name: str, res: Any, pattern: str) -> None:
    if not isinstance(res, dict):
        raise DemuxlabError(f"calibrate: {name}: server result is not a JSON object")
    if res.get("pattern") != pattern:
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: pattern is {res.get('pattern')!r}, not {pattern!r}"
        )
    lo = min_threads(pattern)
    if res.get("threads") != lo:
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: threads={res.get('threads')!r}; calibration needs the lowest "
            f"concurrency, threads={lo}"
        )
    if res.get("instrument") is not True or not isinstance(res.get("ops"), dict):
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: not an instrumented run (no ops; use --instrument)"
        )


def _op_totals(name: str, res: dict[str, Any], op: str) -> tuple[int, float]:
    entry = res["ops"].get(op)
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
    return count, float(total)


def _fit_notify_us(names: Sequence[str], results: Sequence[dict[str, Any]], pattern: str) -> float:
    num = 0.0
    den = 0.0
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
            if h < 1 or h > CACHE_SIZE or n <= 0:
                continue
            num += n * h * (float(t) / 1000.0)
            den += n * h * h
    if den == 0.0 or num <= 0.0:
        raise DemuxlabError(
            f"calibrate {pattern}: notify_by_events has no bucket with 1..{CACHE_SIZE} events and calls"
        )
    return num / den

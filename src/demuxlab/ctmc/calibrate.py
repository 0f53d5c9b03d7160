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

r_e: the model's epoll_wait takes h / r_e for h returned descriptors (φ2 of HSHA, φ4 of LF), so r_e is
fitted as the slope of a least-squares line through the origin of mean call time against h, weighted by
the number of calls of each bucket: τ = Σ nₕ h tₕ / Σ nₕ h², r_e = 1/τ. The "64 or more" bucket has no
exact h and is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
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
OPEN_BUCKET = 64
PER_MESSAGE_OPS = frozenset({"recv", "send"})
MESSAGE_OP = "work"  # the server calls it exactly once per message
NO_REARM_NOTIFIERS = frozenset({"epoll-et"})
INSTANT_RATE = 1000.0  # per µs: a step of 1 ns, for model steps the server does not perform


def calibrate(
    server_results: Sequence[dict[str, Any]], pattern: str, labels: Sequence[str] | None = None
) -> Rates:
    """Rates of ``pattern`` from lowest-concurrency instrumented server exit JSONs (pure)."""
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
    return Rates(**values, source=source)


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
            if h < 1 or h >= OPEN_BUCKET or n <= 0:
                continue
            num += n * h * (float(t) / 1000.0)
            den += n * h * h
    if den == 0.0 or num <= 0.0:
        raise DemuxlabError(
            f"calibrate {pattern}: notify_by_events has no bucket with 1..63 events and calls"
        )
    return num / den

"""The notifier's cost in the chain's own descriptors (:func:`notifier_in_chain`), and the scheduler's
wake-up r_w where the calibration runs had more threads than cores (run to block, sched.py): the fixed
point that makes the chain's dispatcher at the calibration runs' settings wait per call what the server's
did."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from demuxlab.ctmc.engine import ModelInstance, ModelStructure
from demuxlab.ctmc.fit_runs import (
    MAX_OVERHEAD_US,
    CalibrationRefused,
    Workload,
    _calls,
    _events_mean,
    _lowest_work,
    _messages,
    _workload,
    server_cores,
)
from demuxlab.ctmc.rates import INSTANT_RATE, Host, Rates, build, calibration_threads, structure
from demuxlab.ctmc.registry import model_of
from demuxlab.ctmc.sched import GRANT_RATE
from demuxlab.ctmc.ssa import simulate

PER_CALL_ITERATIONS = 6  # rounds of notifier_in_chain's fixed point on r_w (and fit_client's on T₀)


PER_CALL_TOLERANCE = 0.02  # …until the rate changes by less than this share


PER_CALL_REL_CI = 0.02  # the SSA's CI for the chain's calls and messages in those rounds


# r_w is kept where the chain's wake-up delay (1/r_w) is at most this many times the measured wait per call.
# Only the dispatching role preempts (sched.py): at the calibration runs' two threads on one core the chain's
# dispatcher waits 1/r_w whenever it finds the core busy and a grant's 0.1 µs when free, so a wake-up longer
# than the wait itself says the chain's dispatcher found the core free where the server's did not: the chain
# saturates something else (its client), and the scheduler's wake-up is not what made the server's wait.
WAKE_LIMIT = 1.0


# …and only where the fitted chain's dispatcher then waits what the server's did, within this share.
WAIT_TOLERANCE = 0.10


def notifier_in_chain(
    rates: Rates,
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    connections: Sequence[int | None] | None = None,
    *,
    clients: Sequence[dict[str, Any] | None] | None = None,
    client_cores: Sequence[int | None] | None = None,
    wake_up: bool = True,
) -> Rates:
    """``rates`` with the notifier's costs charged in the chain's own descriptors and calls (and, with
    ``wake_up``, the scheduler's wake-up r_w fitted where the runs had more threads than cores).

    The fit gives the notifier's cost per descriptor (τ = 1/r_e) and per call (α = 1/r_n) as the *server*
    made them, over the calibration runs with the least work (where α was fitted):

    1. **Per descriptor.** The server's calls returned e_real descriptors per message (``events_per_call``
       mean × calls / messages); the chain's return ``ModelStructure.events_per_message`` (1 for a
       readiness notifier, 2 for io_uring: a receive and a send completion). They differ where the kernel
       splits a message: a 16 KiB message over io_uring is about 15 completions (the receives come in
       buffer-ring pieces). τ is scaled by e_real / e_model, so a message costs the chain the notifier
       time per message it cost the server.
    2. **Per call.** α stays the server's CPU per call; the chain charges it per call it makes itself. Up
       to wave 4 α was also scaled until the chain made the server's calls per message (a fixed point on
       the chain's calls: on a shared core the kernel lets a worker run on and the dispatcher find bigger
       batches than processor sharing does). The rate ablation on two data sets the model was not fitted
       to (docs/ctmc.md, "The rate ablation") found that scaling no help (the held-out grid: mean |error|
       8.7 % over 86 points without it, 10.3 % over 74 with it; a third set: 8.1 % against 8.2 %).
       Where the runs had more threads than cores, the wait per call is still matched, by r_w alone.

    Rates of a chain without a notifier call, or runs without call counts, are returned as they are."""
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
    # The scheduler's wake-up (sched.py), where the runs had more threads than cores: the dispatching
    # role's wait for a CPU per notifier call, as measured, is the chain's to match.
    wait_real = (
        _dispatcher_wait_per_call_us(pattern, [server_results[i] for i in low], threads) if wake_up else None
    )
    if wait_real is None:
        return fitted
    return _with_wake_up(fitted, pattern, chain, weights, wait_real)


def _with_wake_up(
    fitted: Rates,
    pattern: str,
    chain: ModelStructure,
    weights: dict[Workload, int],
    wait_real: float,
) -> Rates:
    """:func:`notifier_in_chain`'s α with the scheduler's wake-up r_w fitted to the dispatcher's measured
    wait per call ``wait_real``, where run to block explains that wait; else α alone, r_w instant with the
    reason (processor sharing)."""
    scheduled = _in_chain(fitted, pattern, chain, weights, wait_real)
    role = model_of(pattern).roles[0].names[0]
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
    return replace(fitted, source={**fitted.source, "r_w": why})


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
    wait_real: float | None,
) -> Rates:
    """notifier_in_chain's fixed point: with ``wait_real`` (µs per notifier call), r_w until the chain's
    dispatching role waits that long for a CPU per call at the least-work runs' settings (``weights``:
    messages per setting; the chain then takes cores by run to block, sched.py); α as fitted."""
    if wait_real is None:
        return base
    fitted = replace(base, r_w=1.0 / wait_real)
    role = model_of(pattern).roles[0].names[0]
    for _round in range(PER_CALL_ITERATIONS):
        got = _chain_calls(fitted, pattern, chain, weights)
        if got is None:
            return fitted
        wait_model = got[1]
        # The chain's wait per call falls as r_w grows (a woken dispatcher preempts sooner), down to what a
        # free core's grant takes: a wake-up is no sooner than that.
        r_w = min(fitted.r_w * max(wait_model, 1e-3 * wait_real) / wait_real, GRANT_RATE)
        moved = abs(r_w / fitted.r_w - 1.0) > PER_CALL_TOLERANCE
        how = f"fit:{role} wait_s per call {wait_real:.3g} µs, in the chain's ×{wait_real * r_w:.3g}"
        fitted = replace(fitted, r_w=r_w, source={**fitted.source, "r_w": how})
        if not moved:
            break
    return fitted


def _dispatcher_wait_per_call_us(
    pattern: str, results: Sequence[dict[str, Any]], threads: int
) -> float | None:
    """The dispatching role's wait for a CPU per notifier call (µs: its threads' ``wait_s`` over the
    server's calls), where the runs had more threads than cores and the pattern's chain can be scheduled
    (the model's ``scheduled``); None otherwise (no ``wait_s``, a core per thread, no wait)."""
    if model_of(pattern).scheduled is None:
        return None
    role = model_of(pattern).roles[0]
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

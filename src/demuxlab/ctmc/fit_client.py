"""The wake-ups between the client and the server in the chain's own (:func:`client_in_chain`): the client's
turnaround without the wake-ups of a sleeping dispatcher (ω, r_v), the sends that wake a sleeping client
and its latency (r_u), fitted at the calibration runs' settings so that the chain charges them at its own
rate elsewhere (docs/ctmc-reference.md, "The client that wakes the dispatcher", "The send that wakes the
client")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from demuxlab.ctmc.fit_notifier import PER_CALL_REL_CI, PER_CALL_TOLERANCE, _at_settings
from demuxlab.ctmc.fit_runs import (
    CalibrationRefused,
    Workload,
    _client_sleeps,
    _cpu_s,
    _messages,
    _woke,
    _workload,
)
from demuxlab.ctmc.parts import CLIENT_WAKE, SEND_WAKE
from demuxlab.ctmc.rates import Rates, calibration_threads, structure
from demuxlab.ctmc.ssa import per_message, simulate

WAKE_ROUNDS = 6  # rounds of client_in_chain's fixed point, until the base turnaround moves by < 2 %


WAKE_REL_CI = 0.05  # the SSA's CI for the chain's wake-ups in those rounds (at most ssa.COUNT_MAX_EVENTS)


WAKE = CLIENT_WAKE  # the transition of a chain whose client can wake its dispatcher (parts.py)


SLEEPS_TOLERANCE = 0.10  # client_in_chain: the chain's client sleeps per message within 10 % of the real


LATENCY_US = (0.1, 200.0)  # …and the latency 1/r_u that makes them so, within these bounds


# client_in_chain: the client's CPU per sleep of its own is fitted where the calibration settings' client
# sleeps per message differ by at least this much (work 0 against 200 µs: about 0.1 against 1)
SLEEPS_SPREAD = 0.3


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
    sleeps: bool = True,
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
    wake-ups its own sleeps make there (fewer with more handlers: docs/ctmc-reference.md). A chain with
    neither a ``client_wake`` nor a ``send_wake`` step, or rates without a client, are returned as they are;
    one with a ``send_wake`` only (tpc: no dispatcher to wake, each request wakes its own thread at every
    setting, which T holds) has f = 0; a T₀ or S₀ that is not
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
    client's turnaround from what the runs counted").

    Long because: this docstring is the fit's derivation; the code is its three cases (no wake-ups in
    the chain, the sends' wake-ups fitted, or left in r_o with the reason)."""
    threads = calibration_threads(pattern)
    steps = {tr.name for tr in structure(pattern, threads, full=True).transitions}
    if not rates.has_client or not steps & {WAKE, SEND_WAKE}:
        return rates
    weights, slept, woken, counted = _client_counts(
        pattern, server_results, connections, clients, client_cores
    )
    if not sleeps:  # the r_u ablation: the client's sleeps not fitted (nor its CPU per sleep)
        slept = None
    if not weights:
        return rates
    real_sleeps = sum(n for n, _ in slept) / sum(m for _, m in slept) if slept else 0.0
    woke = sum(n for n, _ in woken) / sum(m for _, m in woken) if woken else None
    if WAKE not in steps:  # no dispatcher to wake (tpc, LF: each request's wake-up is in T at every setting)
        woke = 0.0
    if slept and woke is not None:
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
    if woke:
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

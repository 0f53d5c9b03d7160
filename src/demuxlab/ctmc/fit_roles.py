"""Each role's rates from its CPU time (calibrate.py's fit, steps 1–4): the role's CPU demand per message and
how its timed operations share it, the notifier's cost per descriptor and per call, the server's share of
its CPUs (``speed``), the rates no role's demand gives (the lock, the client, the paper's for the rest),
and the refusal of an operation's time that is an artefact."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.ctmc.fit_runs import (
    CACHE_SIZE,
    KICK_RATE,
    MAX_OVERHEAD_US,
    CalibrationRefused,
    _calls,
    _cpu_s,
    _events_mean,
    _kicks,
    _lock_median_us,
    _lowest_work,
    _mean_events,
    _messages,
    _op_total_ns,
    _role_cpu_s,
    _timed_events,
    _work_spun_us,
    server_cores,
)
from demuxlab.ctmc.pattern import OpRole
from demuxlab.ctmc.rates import ALL_RATE_FIELDS, INSTANT_RATE, NO_REARM_NOTIFIERS, Rates
from demuxlab.ctmc.registry import model_of
from demuxlab.errors import DemuxlabError

MAX_RATE_FACTOR = 100.0  # a fitted service time this many times the paper's (or 1/this) is refused


SPIN_FLOOR = 0.02  # a handling role's CPU beyond its spin below this × the spin: see calibrate()


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
    role: OpRole,
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
        if rate in model_of(pattern).instant or (rate == "r_a" and notifier in NO_REARM_NOTIFIERS):
            continue
        if rate == KICK_RATE:
            # Only select and poll kick, and only servers since the `kick` timing say so: without a kick in
            # any run the chain does not kick (r_k instant) and a kick's CPU, if any, is untimed (r_x).
            if _kicks(results) > 0:
                walls[rate] = sum(_op_total_ns(n, r, op, required=False) for n, r in runs) / msgs / 1000
            continue
        if rate in model_of(pattern).timed_since and not any(op in (r.get("ops") or {}) for r in results):
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
    notifies = model_of(pattern).notifies
    alpha_us, tau_us = _fit_notify_us(names, server_results, pattern) if notifies else (0.0, 0.0)
    mean_h = _mean_events(server_results) if notifies else 1.0
    low = _lowest_work(server_results)
    for role in model_of(pattern).roles:
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
            # per-completion work at all (the model's ``peek_only``).
            if not model_of(pattern).peek_only:
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


def _rate_or_instant(us: float, source: str, what: str) -> tuple[float, str]:
    """A fitted cost of ``us`` µs as (rate, source); one of 1 ns or less is instant, and its source says so
    (the model page draws no bar for an ``instant:`` rate: its placeholder is not a measurement)."""
    if us > 1.0 / INSTANT_RATE:
        return 1.0 / us, source
    return INSTANT_RATE, f"instant:{what} fitted at ≤ 1 ns"


def _scaled(scale: float) -> str:
    """The source suffix of an operation scaled to the CPU its role used (none within 0.5 %)."""
    return f" ×{scale:.3g} (cpu)" if scale < 0.995 else ""


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
        threads = [
            t for t in res["threads_detail"] if any(t.get("role") in r.names for r in model_of(pattern).roles)
        ]
        # Per thread (a tpc slot's entry sums its connection threads, dealt round-robin): (cpu, idle, wait).
        each = _thread_times(name, res, pattern, threads)
        cores = server_cores(res, pattern) or len(each)
        total = sum(c for c, _, _ in each)
        if all(w is not None for _, _, w in each):
            crowded = len(each) > cores
            for c, _, w in each:
                own = (total - c) / cores if crowded else 0.0  # the most it can have waited for its own
                cpu += c
                runnable += c + max(float(w or 0.0) - own, 0.0)
            continue
        lacking = next((t for t in threads if not isinstance(t.get("idle_s"), int | float)), None)
        if lacking is not None:  # a plain run has no idle_s; since wait_s, every run has that instead
            raise DemuxlabError(
                f"calibrate {pattern}: {name}: threads_detail[{lacking.get('index')}].idle_s is missing"
            )
        busy = [max(float(elapsed) - float(idle or 0.0), 0.0) for _, idle, _ in each]
        cpu += total
        runnable += sum(busy) - float(elapsed) * _expected_excess(
            [min(b / elapsed, 1.0) for b in busy], cores
        )
    if runnable <= 0.0 or cpu <= 0.0:
        return 1.0
    return max(min(cpu / max(runnable, cpu), 1.0), 1e-3)


def _thread_times(
    name: str, res: dict[str, Any], pattern: str, threads: list[dict[str, Any]]
) -> list[tuple[float, float | None, float | None]]:
    """Per modelled thread of run ``res``: (its CPU s, the s it waited for work, the s it waited for a CPU),
    the last two None where the run does not say (a plain run has no ``idle_s``; a server before 2026-11-29
    no ``wait_s``). A tpc slot's entry sums its connection threads: split evenly among them; they block in
    ``recv``, which is their waiting for work."""
    each: list[tuple[float, float | None, float | None]] = []
    for t in threads:
        c = float(t["cpu_s"]["user"]) + float(t["cpu_s"]["sys"])
        got = t.get("idle_s")
        idle = float(got) if isinstance(got, int | float) and not isinstance(got, bool) else None
        n = 1
        if model_of(pattern).slots:
            conns = int(res.get("connections_accepted") or len(threads))
            n = max(1, round(conns / len(threads)))
            if idle == 0.0:
                idle = _op_total_ns(name, res, "recv") / 1e9 / len(threads)
        w = t.get("wait_s")
        wait = float(w) / n if isinstance(w, int | float) and not isinstance(w, bool) else None
        each += [(c / n, idle / n if idle is not None else None, wait)] * n
    return each


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
    for rate, why in model_of(pattern).instant.items():
        values[rate] = INSTANT_RATE
        source[rate] = f"instant:{why}"
    for rate, why in model_of(pattern).timed_since.items():
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

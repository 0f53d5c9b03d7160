"""One entry point for every solver: a prediction per (pattern, threads, work) point, one at a time
(:func:`predict`) or in bulk over a process pool (:func:`predict_many`)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.ctmc.engine import ModelInstance
from demuxlab.ctmc.rates import DESIGNS, Host, Rates, build, tagged_connections
from demuxlab.errors import DemuxlabError
from demuxlab.vocab import METHOD_EXACT, METHOD_FLUID, METHOD_SSA, SOLVER_METHODS

# The multireactor's and uring's fixed point on the other threads' runnable share (see predict()).
FIXED_POINT_TOL = 0.01
FIXED_POINT_ITERATIONS = 8
FIXED_POINT_REL_CI = 0.03
# The precision (relative CI) a step's count per message is simulated to, at least (predict's ``counts``).
COUNT_REL_CI = 0.02
# The exact solution where it is cheap (:func:`predict_small`): a chain of at most this many connections
# (the one thread's a tagged design follows) and states. Through the compiled kernel an exact solve takes
# ~40 µs of CPU per state (HSHA, 1,218 states: 47 ms), 10–50 times a fluid point; where it reaches, the
# fluid can be 20–100 % off (docs/ctmc-reference.md, "Small populations").
EXACT_MAX_CONNECTIONS = 8
EXACT_MAX_STATES = 3_000


@dataclass(frozen=True)
class Prediction:
    pattern: str
    threads: int
    work_us: float
    connections: int
    method: str
    throughput_msgs_per_s: float
    ci_halfwidth_rel: float | None
    details: dict[str, Any]

    @property
    def settled(self) -> bool:
        """Whether the value is an answer: false for a fluid approximation that did not settle (its averages
        over the last quarters of the horizon disagree). At one connection per thread or fewer (a
        multireactor or uring thread with one connection; HSHA and the proactor with one) the ODE stalls and
        creeps at a few hundred msg/s, where the SSA gives tens of thousands (docs/ctmc-reference.md, "Where
        the fluid stalls"). The SSA and the exact solution always are."""
        return self.method != METHOD_FLUID or bool(self.details.get("converged", True))

    @property
    def failure(self) -> str | None:
        """Why an unsettled prediction has no value where its solver gave up (the fluid integrator's step
        underflowed: :class:`demuxlab.ctmc.fluid.FluidFailed`); None where it settled or merely stalled."""
        why = self.details.get("failed")
        return str(why) if why else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "threads": self.threads,
            "work_us": self.work_us,
            "connections": self.connections,
            "method": self.method,
            "throughput_msgs_per_s": self.throughput_msgs_per_s,
            "ci_halfwidth_rel": self.ci_halfwidth_rel,
        }


def _solve(
    model: ModelInstance, method: str, rel_ci: float, seed: int, max_states: int, compiled: bool
) -> tuple[float, float | None, float, dict[str, Any]]:
    """(throughput per µs of the chain, its relative CI or None, the mean runnable count of the server
    pool, details)."""
    if method == METHOD_SSA:
        from demuxlab.ctmc.ssa import simulate

        s = simulate(model, rel_ci=rel_ci, seed=seed)
        details = {"events": s.events, "simulated_us": s.simulated_us, "converged": s.converged, "seed": seed}
        return s.throughput_per_us, s.ci_halfwidth_rel, s.runnable, details
    if method == METHOD_FLUID:
        from demuxlab.ctmc.fluid import FluidFailed, solve_fluid

        try:
            f = solve_fluid(model)
        except FluidFailed as exc:
            # One model's integrator giving up is that point's answer missing, not every point's: an
            # unsettled prediction with the reason (Prediction.failure), as a stalled fluid's is.
            return float("nan"), None, 0.0, {"converged": False, "failed": exc.message}
        details = {"horizon_us": f.horizon_us, "residual": f.residual, "converged": f.converged}
        return f.throughput_per_us, None, f.runnable, details
    from demuxlab.ctmc.exact import solve_exact

    e = solve_exact(model, max_states, compiled=compiled)
    return e.throughput_per_us, None, e.runnable, {"states": e.states, "transitions": e.transitions}


def predict(
    pattern: str,
    threads: int,
    work_us: float,
    *,
    method: str = METHOD_SSA,
    connections: int = 512,
    rates: Rates | None = None,
    rel_ci: float = 0.01,
    seed: int = 0,
    host: Host | None = None,
    notifier: str | None = None,
    counts: Sequence[str] = (),
    max_states: int = 200_000,
    compiled: bool = False,
) -> Prediction:
    """The steady-state throughput (msgs/s) of ``pattern`` at ``threads`` threads and ``work_us`` of work
    per message, on ``host`` (default: a core per thread and no client, seed 001's setting).

    ``counts`` names chain steps (transitions) to count too: the details' ``per_message`` gives how often
    each of those the chain has fires per message (SSA only, at ``rel_ci`` or :data:`COUNT_REL_CI`,
    whichever is coarser: ``ssa.per_message``), the figures to hold against what the server or the client
    counted (e.g. ``send_wake`` against the client's ``sleeps``). ``max_states`` bounds the exact
    solution's state space (:class:`demuxlab.ctmc.exact.ExactUnavailable` beyond it); ``compiled`` explores
    it through the model's kernel instead of the Python reference (:func:`demuxlab.ctmc.exact.explore`).

    The multireactor and uring are T independent threads with N/T connections each: the chain follows
    one of them and puts the others into the server pool's load — as many as are runnable on average,
    which is the chain's own mean runnable count u (they are alike): load = (T − 1)·u. Where the threads
    fit the cores that load never slows anything; otherwise u is found by iterating (u from the previous
    solution, coarse SSA at 3 % CI; at most 8 rounds, until u changes by less than 0.01) and the last
    round is solved at ``rel_ci``. The throughput is the thread's times N / (its connections).
    """
    if method not in SOLVER_METHODS:
        raise DemuxlabError(f"method: must be one of {', '.join(SOLVER_METHODS)}, got {method!r}")
    if counts and method != METHOD_SSA:
        raise DemuxlabError(f"counts: only the SSA counts a chain's steps, got method {method!r}")
    h = host if host is not None else Host()
    model = build(pattern, threads, work_us, connections, rates, host=h, notifier=notifier)
    details: dict[str, Any] = {}
    design = DESIGNS[pattern]
    scale = 1.0
    if design.tagged:
        scale = connections / tagged_connections(pattern, threads, connections)
        active = min(threads, connections)
        cores = h.cores if h.cores is not None else threads
        if active > 1 and active + h.load > cores:
            others = _others_runnable(
                pattern, threads, work_us, connections, rates, h, notifier, method, rel_ci, seed, max_states,
                compiled, details,
            )  # fmt: skip
            model = build(
                pattern, threads, work_us, connections, rates, host=h, notifier=notifier, others=others
            )
    thr, ci, runnable, solved = _solve(model, method, rel_ci, seed, max_states, compiled)
    details.update(solved)
    details["runnable"] = runnable
    details["cores"] = model.parameters["cores"]
    if counts:
        from demuxlab.ctmc.ssa import per_message

        details["per_message"] = per_message(model, counts, thr, rel_ci=max(rel_ci, COUNT_REL_CI), seed=seed)
    return Prediction(
        pattern, threads, float(work_us), connections, method, float(thr * scale * 1e6), ci, details
    )


def _others_runnable(
    pattern: str,
    threads: int,
    work_us: float,
    connections: int,
    rates: Rates | None,
    h: Host,
    notifier: str | None,
    method: str,
    rel_ci: float,
    seed: int,
    max_states: int,
    compiled: bool,
    details: dict[str, Any],
) -> float:
    """The other independent threads' mean runnable count, (T' − 1)·u, by :func:`predict`'s fixed point
    (its rounds and the result into ``details``)."""
    active = min(threads, connections)
    u = 1.0
    coarse = max(rel_ci, FIXED_POINT_REL_CI) if method == METHOD_SSA else rel_ci
    rounds = 0
    for rounds in range(1, FIXED_POINT_ITERATIONS + 1):
        trial = build(
            pattern, threads, work_us, connections, rates, host=h, notifier=notifier, others=(active - 1) * u
        )
        _, _, u_new, _ = _solve(trial, method, coarse, seed + rounds, max_states, compiled)
        done = abs(u_new - u) < FIXED_POINT_TOL
        u = u_new
        if done:
            break
    details["others_runnable"] = (active - 1) * u
    details["fixed_point_rounds"] = rounds
    return (active - 1) * u


def predict_small(
    pattern: str,
    threads: int,
    work_us: float,
    *,
    connections: int,
    rates: Rates | None = None,
    host: Host | None = None,
    notifier: str | None = None,
) -> Prediction | None:
    """The exact solution where the chain is small, through the compiled kernel: None where the chain
    holds more than :data:`EXACT_MAX_CONNECTIONS` connections (a tagged design: the one thread's it
    follows), :class:`demuxlab.ctmc.exact.TooManyStates` past :data:`EXACT_MAX_STATES` states and
    :class:`demuxlab.ctmc.exact.IllConditioned` where the sparse LU cannot be trusted. Where the
    populations are this small the fluid approximation is no guide (docs/ctmc-reference.md, "Small
    populations"): with seed 001's rates, 5 µs of work and 2 cores, LF at 1 connection and 16 threads is 115k
    msg/s by the fluid and 57k exactly, HSHA at 2 connections and 3 threads 57k against 95k, the proactor at 2
    connections 26k against 74k."""
    if tagged_connections(pattern, threads, connections) > EXACT_MAX_CONNECTIONS:
        return None
    return predict(
        pattern,
        threads,
        work_us,
        method=METHOD_EXACT,
        connections=connections,
        rates=rates,
        host=host,
        notifier=notifier,
        max_states=EXACT_MAX_STATES,
        compiled=True,
    )


@dataclass(frozen=True)
class PredictRequest:
    """The arguments of one :func:`predict` call."""

    pattern: str
    threads: int
    work_us: float
    connections: int = 512
    method: str = METHOD_SSA
    rates: Rates | None = None
    rel_ci: float = 0.01
    seed: int = 0
    host: Host | None = None
    notifier: str | None = None
    counts: tuple[str, ...] = ()


def _predict_request(req: PredictRequest) -> tuple[Prediction, float]:
    """predict(req) and the seconds it took."""
    t0 = time.perf_counter()
    p = predict(
        req.pattern,
        req.threads,
        req.work_us,
        method=req.method,
        connections=req.connections,
        rates=req.rates,
        rel_ci=req.rel_ci,
        seed=req.seed,
        host=req.host,
        notifier=req.notifier,
        counts=req.counts,
    )
    return p, time.perf_counter() - t0


def _warm(patterns: Sequence[str], cache: str | None = None) -> str | None:
    """Compile the kernels of ``patterns`` in this process, or load them from the kernel cache (``cache``:
    that folder); returns the folder they are cached in, if any."""
    from demuxlab.ctmc.engine import CACHE_ENV, compile_structure
    from demuxlab.ctmc.rates import structures

    if cache is not None:
        os.environ[CACHE_ENV] = cache
    folder: str | None = None
    for p in patterns:
        for st in structures(p):
            k = compile_structure(st)
            k.warm()
            if k.source_path is not None:
                folder = os.path.dirname(k.source_path)
    return folder


def _cost(req: PredictRequest) -> float:
    """A rough relative cost, to start the longest requests first: the simulation's grows with the threads
    (more events per simulated µs, slower mixing), the fluid's and the exact solver's are small."""
    if req.method != METHOD_SSA:
        return 0.0
    return float(req.threads) / max(req.rel_ci, 1e-6) ** 2


def predict_many(
    requests: Sequence[PredictRequest], jobs: int = 1, *, timings: list[float] | None = None
) -> list[Prediction]:
    """Same order as requests; jobs > 1 uses a process pool (jobs=0: one per CPU).

    Every request is an independent :func:`predict` call with its own seed, so the results do not depend
    on ``jobs`` or on which worker ran what. The pool's workers are fresh interpreters (``spawn``: safe in
    a threaded parent); the kernels are compiled here first, and the workers load them from the kernel
    cache (engine.compile_structure) instead of compiling them again. The longest requests (simulations
    with many threads) are started first. ``timings``, if given, receives the seconds each request took
    (in request order), measured where it ran.
    """
    reqs = list(requests)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
        raise DemuxlabError(f"jobs: must be a non-negative integer (0: one per CPU), got {jobs!r}")
    workers = min(jobs if jobs > 0 else (os.cpu_count() or 1), len(reqs))
    done = [_predict_request(r) for r in reqs] if workers <= 1 else _in_pool(reqs, workers)
    if timings is not None:
        timings[:] = [t for _, t in done]
    return [p for p, _ in done]


def _in_pool(reqs: list[PredictRequest], workers: int) -> list[tuple[Prediction, float]]:
    for r in reqs:
        # refuse bad input up front
        build(r.pattern, r.threads, r.work_us, r.connections, r.rates, host=r.host, notifier=r.notifier)
        if r.method not in SOLVER_METHODS:
            raise DemuxlabError(f"method: must be one of {', '.join(SOLVER_METHODS)}, got {r.method!r}")
    patterns = sorted({r.pattern for r in reqs if r.method in (METHOD_SSA, METHOD_FLUID)})
    cache = _warm(patterns)  # the workers load what this compiled, from the same folder

    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    order = sorted(range(len(reqs)), key=lambda i: -_cost(reqs[i]))
    ex = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_warm,
        initargs=(patterns, cache),
    )
    try:
        futures: dict[int, Future[tuple[Prediction, float]]] = {
            i: ex.submit(_predict_request, reqs[i]) for i in order
        }
        out = [futures[i].result() for i in range(len(reqs))]
    except BaseException:
        ex.shutdown(wait=True, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    return out

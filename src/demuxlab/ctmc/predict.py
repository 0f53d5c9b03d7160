"""One entry point for every solver: a prediction per (pattern, threads, work) point, one at a time
(:func:`predict`) or in bulk over a process pool (:func:`predict_many`)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.ctmc.rates import Rates, build
from demuxlab.errors import DemuxlabError
from demuxlab.vocab import SOLVER_METHODS


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


def predict(
    pattern: str,
    threads: int,
    work_us: float,
    *,
    method: str = "ssa",
    connections: int = 512,
    rates: Rates | None = None,
    rel_ci: float = 0.01,
    seed: int = 0,
) -> Prediction:
    if method not in SOLVER_METHODS:
        raise DemuxlabError(f"method: must be one of {', '.join(SOLVER_METHODS)}, got {method!r}")
    model = build(pattern, threads, work_us, connections, rates)
    ci: float | None = None
    details: dict[str, Any] = {}
    if method == "ssa":
        from demuxlab.ctmc.ssa import simulate

        s = simulate(model, rel_ci=rel_ci, seed=seed)
        thr, ci = s.throughput_msgs_per_s, s.ci_halfwidth_rel
        details = {"events": s.events, "simulated_us": s.simulated_us, "converged": s.converged, "seed": seed}
    elif method == "fluid":
        from demuxlab.ctmc.fluid import solve_fluid

        f = solve_fluid(model)
        thr = f.throughput_msgs_per_s
        details = {"horizon_us": f.horizon_us, "residual": f.residual, "converged": f.converged}
    else:
        from demuxlab.ctmc.exact import solve_exact

        e = solve_exact(model)
        thr = e.throughput_msgs_per_s
        details = {"states": e.states, "transitions": e.transitions}
    return Prediction(pattern, threads, float(work_us), connections, method, float(thr), ci, details)


@dataclass(frozen=True)
class PredictRequest:
    """The arguments of one :func:`predict` call."""

    pattern: str
    threads: int
    work_us: float
    connections: int = 512
    method: str = "ssa"
    rates: Rates | None = None
    rel_ci: float = 0.01
    seed: int = 0


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
    )
    return p, time.perf_counter() - t0


def _warm(patterns: Sequence[str], cache: str | None = None) -> str | None:
    """Compile the kernels of ``patterns`` in this process, or load them from the kernel cache (``cache``:
    that folder); returns the folder they are cached in, if any."""
    from demuxlab.ctmc.engine import CACHE_ENV, compile_structure
    from demuxlab.ctmc.rates import structure

    if cache is not None:
        os.environ[CACHE_ENV] = cache
    folder: str | None = None
    for p in patterns:
        k = compile_structure(structure(p))
        k.warm()
        if k.source_path is not None:
            folder = os.path.dirname(k.source_path)
    return folder


def _cost(req: PredictRequest) -> float:
    """A rough relative cost, to start the longest requests first: the simulation's grows with the threads
    (more events per simulated µs, slower mixing), the fluid's and the exact solver's are small."""
    if req.method != "ssa":
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
        build(r.pattern, r.threads, r.work_us, r.connections, r.rates)  # refuse bad input up front
        if r.method not in SOLVER_METHODS:
            raise DemuxlabError(f"method: must be one of {', '.join(SOLVER_METHODS)}, got {r.method!r}")
    patterns = sorted({r.pattern for r in reqs if r.method in ("ssa", "fluid")})
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

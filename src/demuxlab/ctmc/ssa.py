"""Stochastic simulation (Gillespie direct method) with the batch means of seed 001 §V-B.

The compiled kernel (engine.compile_structure) advances the chain over equal time bins and returns, per
bin, ∫ φ_thr(x(t)) dt — the time average of the throughput's generating function, whose steady-state
expectation is the paper's throughput. The run is: warm-up (``warmup_events`` events, discarded), then
bins of fixed length (20 bins ≈ ``min_events`` events); the bins are grouped into 5 equal batches, and the
reported estimate and 95 % confidence interval are those of the 5 batch means (Student t, 4 degrees of
freedom). The run stops once

* that CI is at most ``rel_ci`` of the mean,
* at least ``min_events`` events were simulated after the warm-up, and
* the same standard error estimated from 20 batches (19 degrees of freedom, a far steadier estimate than
  the 5 batches' 4) also puts the 5-batch CI at most ``rel_ci``: with 4 degrees of freedom the sample
  standard deviation is below half its true value one time in eleven, and such a lucky spread alone must
  not end a run early.

Otherwise the run is extended, by the factor the 20-batch standard error says is needed for an expected
5-batch CI of ``AIM`` × ``rel_ci`` (at least ×1.15, at most ×8), instead of being doubled blindly.
``max_events`` bounds the work; a run stopped by it says ``converged = False``. Everything is a function of
the model and the seed (PCG64): the same seed gives the same result, in any process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from demuxlab.ctmc.engine import FloatArray, Kernel, ModelInstance, compile_structure
from demuxlab.errors import DemuxlabError

N_BATCHES = 5
T_975_4 = 2.7764451051977987  # scipy.stats.t.ppf(0.975, 4)
PLAN_BATCHES = 20  # the run is always a multiple of this many bins; it starts with exactly this many
C4_5 = 0.9399856029866254  # E[s]/σ for 5 normal samples: the expected 5-batch CI is C4_5·t₄·SE
AIM = 1.0  # an extension aims at an expected 5-batch CI of AIM × rel_ci
GROWTH_MIN = 1.15
GROWTH_MAX = 8.0
# per_message: a step that never fires (a client that never sleeps, a kick never charged) is counted 0 after
# this many events, not after simulate's 200 million.
COUNT_MAX_EVENTS = 5_000_000


@dataclass(frozen=True)
class SimulationResult:
    throughput_per_us: float
    ci_halfwidth_rel: float
    batch_means_per_us: tuple[float, ...]
    events: int
    simulated_us: float
    converged: bool
    final_state: FloatArray
    runnable: float = 0.0  # time average of the first pool's runnable count over the batches (0: no pool)
    # Per pool (the structure's order), time averages over the batches: its runnable threads, and those of
    # them on a CPU (runnable × the pool's factor). Their difference is the pool's threads waiting for a CPU.
    pool_runnable: tuple[float, ...] = ()
    pool_running: tuple[float, ...] = ()

    def waiting(self, pool: int = 0) -> float:
        """The mean number of pool ``pool``'s threads that wanted a CPU and had none."""
        return max(self.pool_runnable[pool] - self.pool_running[pool], 0.0)

    @property
    def throughput_msgs_per_s(self) -> float:
        return self.throughput_per_us * 1e6


def batch_ci(batch_means: FloatArray) -> tuple[float, float]:
    """(mean, relative 95 % CI half-width) of the batch means."""
    mean = float(np.mean(batch_means))
    if mean <= 0.0:
        return mean, float("inf")
    half = T_975_4 * float(np.std(batch_means, ddof=1)) / np.sqrt(len(batch_means))
    return mean, half / mean


def simulate(
    model: ModelInstance,
    *,
    rel_ci: float = 0.01,
    seed: int = 0,
    warmup_events: int = 50_000,
    min_events: int = 200_000,
    max_events: int = 200_000_000,
    transition: str | None = None,
) -> SimulationResult:
    """Simulate ``model`` until the batch-means CI of the throughput is below ``rel_ci`` (relative).

    ``transition`` names another transition to estimate the rate of in place of the throughput's (the
    result's ``throughput_per_us`` is then that transition's rate: e.g. the notifier calls, ``calls``)."""
    if not (0.0 < rel_ci < 1.0):
        raise DemuxlabError(f"rel_ci: must be in (0, 1), got {rel_ci!r}")
    if warmup_events < 0 or min_events < 1 or max_events < min_events:
        raise DemuxlabError("simulate: need warmup_events >= 0 and 1 <= min_events <= max_events")
    kernel = compile_structure(model.structure)
    st = model.structure
    thr = st.throughput_index if transition is None else st.transition_index(transition)
    rng = np.random.Generator(np.random.PCG64(seed))
    x = model.initial.copy()
    scratch = np.zeros(1)

    # Warm-up: run a fixed number of events, measure how long (simulated) it took, and use that pace to
    # size the bins so that the first PLAN_BATCHES bins together hold about min_events events.
    _warm_up(kernel, x, model, thr, rng, scratch, warmup_events)
    pace_us = _pace(kernel, x, model, thr, rng)
    npools = max(1, len(st.pools))
    obs = np.zeros(1 + 2 * npools)  # ∫ runnable dt, then per pool ∫ runnable and ∫ running dt, over the bins
    bin_us = pace_us * min_events / PLAN_BATCHES

    acc: list[FloatArray] = []
    events = 0
    nbins = PLAN_BATCHES
    converged = False
    while True:
        out, ev, status = kernel.ssa_run(x, model.r, thr, nbins, bin_us, max_events - events, rng, obs)
        _check(status, model)
        events += ev
        acc.append(np.asarray(out, dtype=np.float64))
        if status == 2 or events >= max_events:
            break
        bins = np.concatenate(acc)
        _, rel = batch_ci(_batch_means(bins, N_BATCHES, bin_us))
        guard = _planned_ci(bins, bin_us)
        if rel <= rel_ci and guard <= rel_ci and events >= min_events:
            converged = True
            break
        growth = (C4_5 * guard / (AIM * rel_ci)) ** 2 if np.isfinite(guard) else GROWTH_MAX
        growth = max(growth, min_events / max(events, 1))
        growth = min(max(growth, GROWTH_MIN), GROWTH_MAX)
        total = int(np.ceil(len(bins) * growth / PLAN_BATCHES)) * PLAN_BATCHES
        nbins = total - len(bins)
    bins = np.concatenate(acc)
    usable = (len(bins) // N_BATCHES) * N_BATCHES
    if usable == 0:
        raise DemuxlabError(f"simulate {_name(model)}: max_events={max_events} too small for one batch")
    means = _batch_means(bins[:usable], N_BATCHES, bin_us)
    mean, rel = batch_ci(means)
    span = bin_us * len(bins)
    return SimulationResult(
        throughput_per_us=mean,
        ci_halfwidth_rel=rel,
        batch_means_per_us=tuple(float(v) for v in means),
        events=events,
        simulated_us=bin_us * len(bins),
        converged=converged,
        final_state=x,
        runnable=float(obs[0]) / span if span else 0.0,
        pool_runnable=tuple(float(obs[1 + 2 * q]) / span if span else 0.0 for q in range(len(st.pools))),
        pool_running=tuple(float(obs[2 + 2 * q]) / span if span else 0.0 for q in range(len(st.pools))),
    )


def _warm_up(
    kernel: Kernel,
    x: FloatArray,
    model: ModelInstance,
    thr: int,
    rng: np.random.Generator,
    scratch: FloatArray,
    events: int,
) -> None:
    """Advance ``x`` by ``events`` events (discarded), in runs of a simulated time that doubles."""
    if events > 0:
        step = 1000.0
        left = events
        while left > 0:
            _, ev, status = kernel.ssa_run(x, model.r, thr, 1, step, left, rng, scratch)
            _check(status, model)
            left -= ev
            if status == 0:
                step *= 2.0


def _batch_means(bins: FloatArray, batches: int, bin_us: float) -> FloatArray:
    """Means of φ_thr over ``batches`` equal consecutive batches of the bins (their count divides evenly)."""
    per = len(bins) // batches
    return np.asarray(bins[: per * batches].reshape(batches, per).sum(axis=1) / (bin_us * per))


def _planned_ci(bins: FloatArray, bin_us: float) -> float:
    """The relative 5-batch CI half-width (t₄ · SE / mean) with the standard error of the mean estimated
    from PLAN_BATCHES batches."""
    means = _batch_means(bins, PLAN_BATCHES, bin_us)
    mean = float(np.mean(means))
    if mean <= 0.0:
        return float("inf")
    se = float(np.std(means, ddof=1)) / float(np.sqrt(len(means)))
    return T_975_4 * se / mean


def _pace(kernel: object, x: FloatArray, model: ModelInstance, thr: int, rng: np.random.Generator) -> float:
    """Simulated µs per event near the current state (measured over a short stretch that is kept)."""
    probe = 20_000
    step = 100.0
    total_us = 0.0
    total_ev = 0
    for _ in range(60):
        _, ev, status = kernel.ssa_run(  # type: ignore[attr-defined]
            x, model.r, thr, 1, step, probe - total_ev, rng, np.zeros(1)
        )
        _check(status, model)
        total_ev += ev
        if status == 2:
            break
        total_us += step
        step *= 2.0
    if total_ev == 0 or total_us == 0.0:
        return max(step, 1.0) / max(probe, 1)
    return total_us / total_ev


def per_message(
    model: ModelInstance,
    steps: Sequence[str],
    throughput_per_us: float,
    *,
    rel_ci: float,
    seed: int = 0,
    max_events: int = COUNT_MAX_EVENTS,
) -> dict[str, float]:
    """How often each of ``steps`` that the chain has fires per message: its rate (:func:`simulate` with
    ``transition``, at ``rel_ci``, at most ``max_events`` events) over the chain's ``throughput_per_us``;
    steps the chain lacks are left out, and nothing fires in a chain without throughput."""
    if throughput_per_us <= 0.0:
        return {}
    have = {tr.name for tr in model.structure.transitions}
    fired = {
        step: simulate(model, rel_ci=rel_ci, seed=seed, transition=step, max_events=max_events)
        for step in steps
        if step in have
    }
    return {step: got.throughput_per_us / throughput_per_us for step, got in fired.items()}


def _check(status: int, model: ModelInstance) -> None:
    if status == 1:
        raise DemuxlabError(f"simulate {_name(model)}: reached an absorbing state (no transition enabled)")


def _name(model: ModelInstance) -> str:
    p = model.parameters
    return f"{p.get('pattern')} threads={p.get('threads')} connections={p.get('connections')}"


def reference_path(model: ModelInstance, steps: int, seed: int) -> list[FloatArray]:
    """A path of the chain from the pure-Python definition (no compiled code): states after each event."""
    rng = np.random.Generator(np.random.PCG64(seed))
    x = model.initial.copy()
    path = [x.copy()]
    st = model.structure
    for _ in range(steps):
        a = st.rates(x, model.r)
        a0 = float(a.sum())
        if a0 <= 0.0:
            break
        k = int(np.searchsorted(np.cumsum(a), rng.random() * a0, side="right"))
        k = min(k, len(a) - 1)
        x = x + st.delta(k, x)
        path.append(x.copy())
    return path

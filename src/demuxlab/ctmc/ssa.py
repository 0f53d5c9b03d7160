"""Stochastic simulation (Gillespie direct method) with the batch means of seed 001 §V-B.

The compiled kernel (engine.compile_structure) advances the chain over equal time bins and returns, per
bin, ∫ φ_thr(x(t)) dt — the time average of the throughput's generating function, whose steady-state
expectation is the paper's throughput. The run is: warm-up (``warmup_events`` events, discarded), then
bins of fixed length; the bins are grouped into 5 equal batches, and the run is doubled until the 95 %
confidence interval of the 5 batch means (Student t, 4 degrees of freedom) is below ``rel_ci`` of the
mean, but never stops before ``min_events`` events after the warm-up (a short run can show a small
spread by chance). ``max_events`` bounds the work; a run stopped by it says ``converged = False``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from demuxlab.ctmc.engine import FloatArray, ModelInstance, compile_structure
from demuxlab.errors import DemuxlabError

N_BATCHES = 5
T_975_4 = 2.7764451051977987  # scipy.stats.t.ppf(0.975, 4)
BINS_PER_BATCH_START = 4


@dataclass(frozen=True)
class SimulationResult:
    throughput_per_us: float
    ci_halfwidth_rel: float
    batch_means_per_us: tuple[float, ...]
    events: int
    simulated_us: float
    converged: bool
    final_state: FloatArray

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
) -> SimulationResult:
    """Simulate ``model`` until the batch-means CI of the throughput is below ``rel_ci`` (relative)."""
    if not (0.0 < rel_ci < 1.0):
        raise DemuxlabError(f"rel_ci: must be in (0, 1), got {rel_ci!r}")
    if warmup_events < 0 or min_events < 1 or max_events < min_events:
        raise DemuxlabError("simulate: need warmup_events >= 0 and 1 <= min_events <= max_events")
    kernel = compile_structure(model.structure)
    thr = model.structure.throughput_index
    rng = np.random.Generator(np.random.PCG64(seed))
    x = model.initial.copy()

    # Warm-up: run a fixed number of events, measure how long (simulated) it took, and use that pace to
    # size the bins so that the first 5 batches together hold about min_events events.
    warm_us = 0.0
    if warmup_events > 0:
        step = 1000.0
        left = warmup_events
        while left > 0:
            _, ev, status = kernel.ssa_run(x, model.r, thr, 1, step, left, rng)
            _check(status, model)
            left -= ev
            if status == 0:
                warm_us += step
                step *= 2.0
    pace_us = _pace(kernel, x, model, thr, rng)
    bin_us = pace_us * min_events / (N_BATCHES * BINS_PER_BATCH_START)

    acc: list[FloatArray] = []
    events = 0
    nbins = N_BATCHES * BINS_PER_BATCH_START
    converged = False
    while True:
        out, ev, status = kernel.ssa_run(x, model.r, thr, nbins, bin_us, max_events - events, rng)
        _check(status, model)
        events += ev
        acc.append(np.asarray(out, dtype=np.float64))
        if status == 2:
            break
        bins = np.concatenate(acc)
        means = bins.reshape(N_BATCHES, -1).sum(axis=1) / (bin_us * (len(bins) // N_BATCHES))
        _, rel = batch_ci(means)
        if rel <= rel_ci and events >= min_events:
            converged = True
            break
        nbins = len(bins)  # double the run; the batches stay 5 of equal length
    bins = np.concatenate(acc)
    usable = (len(bins) // N_BATCHES) * N_BATCHES
    if usable == 0:
        raise DemuxlabError(f"simulate {_name(model)}: max_events={max_events} too small for one batch")
    per = usable // N_BATCHES
    means = bins[:usable].reshape(N_BATCHES, per).sum(axis=1) / (bin_us * per)
    mean, rel = batch_ci(means)
    return SimulationResult(
        throughput_per_us=mean,
        ci_halfwidth_rel=rel,
        batch_means_per_us=tuple(float(v) for v in means),
        events=events,
        simulated_us=bin_us * len(bins),
        converged=converged,
        final_state=x,
    )


def _pace(kernel: object, x: FloatArray, model: ModelInstance, thr: int, rng: np.random.Generator) -> float:
    """Simulated µs per event near the current state (measured over a short stretch that is kept)."""
    probe = 20_000
    step = 100.0
    total_us = 0.0
    total_ev = 0
    for _ in range(60):
        _, ev, status = kernel.ssa_run(x, model.r, thr, 1, step, probe - total_ev, rng)  # type: ignore[attr-defined]
        _check(status, model)
        total_ev += ev
        if status == 2:
            break
        total_us += step
        step *= 2.0
    if total_ev == 0 or total_us == 0.0:
        return max(step, 1.0) / max(probe, 1)
    return total_us / total_ev


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

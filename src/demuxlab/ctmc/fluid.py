"""Fluid (mean-field) approximation: dx/dt = Σ_k φ_k(x)·g_k(x)·l_k(x), integrated to steady state.

The generating functions are evaluated on the continuous state exactly as defined for the CTMC; they are
non-smooth, and handled as follows:

* ``H(v)`` is ``min(max(v, 0), 1)`` — equal to the paper's indicator on integers, Lipschitz on the reals;
  a case distinction such as l6's "δ_{m,1} if x_{c,2} = 0, else δ_{m,4}" splits the flow with H(x_{c,2}).
* ``min`` and the lock-competition fractions are used as they are (Lipschitz where the denominator is
  positive; ``safe_div`` returns 0 where it is not, as the numerator is then 0 too).
* g_k = Π H(x_i/ε) over the populations l_k decreases (ε = 10⁻² individuals). It is 1 on every state
  the CTMC reaches with φ_k > 0, so the CTMC is unchanged, but on the reals it stops a flow at the
  boundary, which keeps populations from crossing zero (φ5 moves the cache x_{c,2} at rate
  r_p x_{m,5} x_{b,2} regardless of x_{c,2}; the CTMC only reaches m5 with x_{c,2} ≥ 1, the ODE for HSHA
  with one worker drives x_{c,2} negative without g). With ε = 1 instead, g would multiply every rate of
  a single thread by its own occupancy again and halve throughputs; ε small only acts at the boundary.

Steady state: a compiled linearly implicit integrator (engine's ``fluid_run``: ROS2, L-stable, Jacobian
by finite differences of the compiled drift; the lock rates are ~10⁴ times the work rate, so the system is
stiff) from the initial state; see :func:`solve_fluid`. ``residual`` is the largest drift component at the
end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from demuxlab.ctmc.engine import CORES, RC, RI, RO, RX, RZ, FloatArray, ModelInstance, compile_structure
from demuxlab.errors import DemuxlabError

ODE_RTOL = 1e-3
ODE_ATOL = 1e-5
# The burn-in (the start state's backlog draining, discarded): its accuracy does not matter, only where it
# ends; at these tolerances it takes a quarter of the steps.
BURN_IN_RTOL = 1e-3
BURN_IN_ATOL = 1e-4
MAX_STEPS = 2_000_000  # per integration span; a span takes a few hundred to a few thousand steps


class FluidFailed(DemuxlabError):
    """The integrator gave up on a model (its step underflowed, or a span took more than :data:`MAX_STEPS`):
    that model's fluid approximation has no value (:func:`demuxlab.ctmc.predict.predict` says so in an
    unsettled prediction; the SSA or the exact solution still answers)."""


@dataclass(frozen=True)
class FluidResult:
    throughput_per_us: float
    state: FloatArray
    residual: float
    horizon_us: float
    converged: bool
    runnable: float = 0.0  # the server pool's runnable count in the end state (0: no pool)

    @property
    def throughput_msgs_per_s(self) -> float:
        return self.throughput_per_us * 1e6


def solve_fluid(
    model: ModelInstance,
    *,
    rel_tol: float = 3e-3,
    eps: float = 1e-2,
    horizon_us: float | None = None,
    max_horizon_us: float = 2e6,
) -> FluidResult:
    """Integrate the fluid ODE and return the time-averaged φ_thr over the second half of the horizon.

    The drift is non-smooth, and at the lock populations the ODE can settle into a fast chattering or a
    small limit cycle rather than a point; the time average of φ_thr (the integral over the accepted steps,
    trapezoidal rule) is the mean flow through the throughput transition either way. A burn-in over the
    initial horizon at looser tolerances (discarded) drains the start state's backlog; then spans of half
    the horizon, doubling (continuing from where the last stopped), until the averages over a span's third
    and fourth quarters agree within ``rel_tol``.
    """
    kernel = compile_structure(model.structure)
    r = model.r
    thr = model.structure.throughput_index
    if horizon_us is None:
        # The start state puts every connection in the ready list; draining that backlog takes about
        # connections × (one message's service time) / threads.
        p = model.parameters
        cycle = 1.0 / r[RI] + 1.0 / r[RC] + 1.0 / r[RO] + 1.0 / r[RX] + 1.0 / r[RZ]
        parallel = max(1.0, min(float(p["threads"]), float(r[CORES])))
        conns = float(p.get("chain_connections", p["connections"]))
        horizon_us = max(2_000.0, 2.0 * conns * cycle / parallel)
    x = np.ascontiguousarray(model.initial, dtype=np.float64).copy()
    h = 1e-3
    burn_in = float(horizon_us)
    _, _, h, _, status = kernel.fluid_run(x, r, eps, thr, burn_in, BURN_IN_RTOL, BURN_IN_ATOL, h, MAX_STEPS)
    _check(status, model)
    t_total = burn_in
    span = 0.5 * float(horizon_us)
    while True:
        i3, i4, h, _, status = kernel.fluid_run(x, r, eps, thr, span, ODE_RTOL, ODE_ATOL, h, MAX_STEPS)
        _check(status, model)
        t_total += span
        q3 = i3 / (0.25 * span)
        q4 = i4 / (0.25 * span)
        change = abs(q3 - q4) / max(abs(q4), 1e-300)
        if change <= rel_tol or t_total >= max_horizon_us:
            break
        span *= 2.0
    out = np.empty(len(x), dtype=np.float64)
    kernel.drift(x, r, eps, out)
    return FluidResult(
        throughput_per_us=(i3 + i4) / (0.5 * span),
        state=x,
        residual=float(np.max(np.abs(out))),
        horizon_us=t_total,
        converged=change <= rel_tol,
        runnable=model.structure.runnable(x, r),
    )


def _check(status: int, model: ModelInstance) -> None:
    if status != 0:
        why = "step size underflow" if status == 1 else f"more than {MAX_STEPS} steps"
        raise FluidFailed(f"fluid {model.parameters.get('pattern')}: ODE solver failed: {why}")

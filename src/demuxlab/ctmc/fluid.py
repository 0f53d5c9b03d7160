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

Steady state: LSODA (stiff/non-stiff switching; the lock rates are ~10⁴ times the work rate) from the
initial state; see :func:`solve_fluid`. ``residual`` is the largest drift component at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from demuxlab.ctmc.engine import RC, RI, RO, FloatArray, ModelInstance, compile_structure
from demuxlab.errors import DemuxlabError


@dataclass(frozen=True)
class FluidResult:
    throughput_per_us: float
    state: FloatArray
    residual: float
    horizon_us: float
    converged: bool

    @property
    def throughput_msgs_per_s(self) -> float:
        return self.throughput_per_us * 1e6


def solve_fluid(
    model: ModelInstance,
    *,
    rel_tol: float = 1e-3,
    eps: float = 1e-2,
    horizon_us: float | None = None,
    max_horizon_us: float = 2e6,
) -> FluidResult:
    """Integrate the fluid ODE and return the time-averaged φ_thr over the second half of the horizon.

    The drift is non-smooth, and at the lock populations the ODE can settle into a fast chattering or a
    small limit cycle rather than a point; the time average of φ_thr is the mean flow through the
    throughput transition either way. The horizon doubles (continuing from where it stopped) until the
    averages over its third and fourth quarters agree within ``rel_tol``.
    """
    kernel = compile_structure(model.structure)
    r = model.r
    n = len(model.initial)
    buf = np.empty(n, dtype=np.float64)
    phi = model.structure.transitions[model.structure.throughput_index].rate

    def rhs(_t: float, x: FloatArray) -> FloatArray:
        kernel.drift(x, r, eps, buf)
        return buf.copy()

    if horizon_us is None:
        # The start state puts every connection in the ready list; draining that backlog takes about
        # connections × (one message's service time) / threads.
        p = model.parameters
        cycle = 1.0 / r[RI] + 1.0 / r[RC] + 1.0 / r[RO]
        horizon_us = max(2_000.0, 2.0 * float(p["connections"]) * cycle / float(p["threads"]))
    x = model.initial.astype(np.float64).copy()
    t_total = 0.0
    span = horizon_us
    while True:
        t_eval = np.linspace(span / 2.0, span, 201)
        sol = solve_ivp(rhs, (0.0, span), x, method="LSODA", rtol=1e-4, atol=1e-6, t_eval=t_eval)
        if not sol.success:
            raise DemuxlabError(f"fluid {model.parameters.get('pattern')}: ODE solver failed: {sol.message}")
        t_total += span
        x = np.asarray(sol.y[:, -1], dtype=np.float64)
        values = np.array([phi(np.asarray(sol.y[:, i]), r) for i in range(sol.y.shape[1])])
        q3 = float(values[:100].mean())
        q4 = float(values[100:].mean())
        change = abs(q3 - q4) / max(abs(q4), 1e-300)
        if change <= rel_tol or t_total >= max_horizon_us:
            break
        span *= 2.0
    residual = float(np.max(np.abs(rhs(0.0, x))))
    return FluidResult(
        throughput_per_us=float(values.mean()),
        state=x,
        residual=residual,
        horizon_us=t_total,
        converged=change <= rel_tol,
    )

"""Exact steady state of small configurations: explore the reachable states from the initial state with the
Python-level definition (or, ``compiled``, the model's numba kernel: the what-if's exact points), build the
generator Q (scipy.sparse) and solve πQ = 0, Σπ = 1."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from demuxlab.ctmc.engine import FloatArray, ModelInstance
from demuxlab.errors import DemuxlabError


class ExactUnavailable(DemuxlabError):
    """The exact solution cannot be had for this chain: more reachable states than allowed, or a generator
    too ill-conditioned for the sparse LU (stationary probabilities spanning tens of orders of magnitude:
    io_uring's chain at one thread and 6 or more connections, where the instant steps run 10⁴ times the
    slowest) with more states than GTH takes. A model that is fine otherwise: the SSA and the fluid still
    answer."""


class TooManyStates(ExactUnavailable):
    """More reachable states than ``max_states``."""


class IllConditioned(ExactUnavailable):
    """Neither the sparse LU nor (up to its bound) GTH gives a distribution."""


@dataclass(frozen=True)
class ExactResult:
    throughput_per_us: float
    states: int
    transitions: int
    pi: FloatArray
    state_list: tuple[tuple[int, ...], ...]
    runnable: float = 0.0  # E[the server pool's runnable count] (0: no pool)

    @property
    def throughput_msgs_per_s(self) -> float:
        return self.throughput_per_us * 1e6


def explore(
    model: ModelInstance, max_states: int = 200_000, *, compiled: bool = False
) -> tuple[list[tuple[int, ...]], sp.csr_matrix]:
    """Reachable states and generator Q (rows = from). ``compiled``: the rates and jumps from the model's
    numba kernel (the same definition, tested against the reference on random states, along paths and
    here state by state; ~2.3× faster: HSHA's 1,218 states in 47 ms against 110 ms), else the Python
    reference (the tests' oracle, independent of the kernel the SSA runs)."""
    st = model.structure
    rates, delta = _steps(model, compiled)
    start = tuple(int(v) for v in model.initial)
    index: dict[tuple[int, ...], int] = {start: 0}
    states = [start]
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    i = 0
    while i < len(states):
        x = np.array(states[i], dtype=np.float64)
        a = rates(x)
        out = 0.0
        for k in np.flatnonzero(a > 0.0):
            y = x + delta(int(k), x)
            key = tuple(y.astype(np.int64).tolist())
            if min(key) < 0 or not np.array_equal(key, y):
                name = st.transitions[int(k)].name
                raise DemuxlabError(f"exact {st.name}: {name} leaves the lattice from {states[i]}")
            j = index.get(key)
            if j is None:
                if len(states) >= max_states:
                    raise TooManyStates(
                        f"exact {st.name}: more than max_states={max_states} reachable states"
                    )
                j = len(states)
                index[key] = j
                states.append(key)
            if j != i:
                rows.append(i)
                cols.append(j)
                vals.append(float(a[k]))
                out += float(a[k])
        if out == 0.0:
            raise DemuxlabError(
                f"exact {st.name}: absorbing state {dict(zip(st.species, states[i], strict=True))}"
            )
        rows.append(i)
        cols.append(i)
        vals.append(-out)
        i += 1
    n = len(states)
    q = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    return states, q


def _steps(
    model: ModelInstance, compiled: bool
) -> tuple[Callable[[FloatArray], FloatArray], Callable[[int, FloatArray], FloatArray]]:
    """(x ↦ every φ_k(x) with its pool's factor, (k, x) ↦ l_k(x)): the kernel's or the reference's."""
    st = model.structure
    if not compiled:
        return (lambda x: st.rates(x, model.r)), st.delta
    from demuxlab.ctmc.engine import compile_structure

    kernel = compile_structure(st)

    def rates(x: FloatArray) -> FloatArray:
        out = np.empty(kernel.n_transitions, dtype=np.float64)
        kernel.all_rates(x, model.r, out)
        return out

    def delta(k: int, x: FloatArray) -> FloatArray:
        d = np.empty(kernel.n_species, dtype=np.float64)
        kernel.apply_jump(k, x, d)
        return d

    return rates, delta


# Where the sparse LU's answer is no distribution, chains of up to this many states are solved again by
# GTH (dense, O(n³): 690 states in 0.24 s, 1,218 in ~1 s).
GTH_MAX_STATES = 1_000


def _distribution(pi: FloatArray) -> bool:
    return bool(np.all(np.isfinite(pi)) and pi.min() >= -1e-9)


def _gth(q: sp.csr_matrix) -> FloatArray:
    """The stationary distribution by Grassmann, Taksar and Heyman's state reduction: eliminate the states
    from the last, folding each one's rates into those it connects, then back-substitute. Only sums and
    products of non-negative rates, no subtraction: exact to rounding where the probabilities span tens of
    orders of magnitude (io_uring's chain at one thread and 6–8 connections: down to 10⁻⁶², where the LU
    gives negative ones). NaN where a state has no way back (more than one recurrent class)."""
    a = q.toarray()
    np.fill_diagonal(a, 0.0)
    n = a.shape[0]
    out = np.zeros(n)
    for k in range(n - 1, 0, -1):
        out[k] = a[k, :k].sum()
        if out[k] <= 0.0:
            return np.full(n, np.nan)
        a[:k, :k] += np.outer(a[:k, k], a[k, :k]) / out[k]
    pi = np.zeros(n)
    pi[0] = 1.0
    for k in range(1, n):
        pi[k] = pi[:k] @ a[:k, k] / out[k]
    return np.asarray(pi / pi.sum(), dtype=np.float64)


def solve_exact(model: ModelInstance, max_states: int = 200_000, *, compiled: bool = False) -> ExactResult:
    """πQ = 0, Σπ = 1 over the reachable states (:func:`explore`, ``compiled`` as there): the sparse LU,
    and GTH (:func:`_gth`) where the LU's answer is no distribution and the chain has at most
    :data:`GTH_MAX_STATES` states."""
    states, q = explore(model, max_states, compiled=compiled)
    n = len(states)
    # πQ = 0 ⇔ Qᵀπᵀ = 0; replace one (redundant) balance equation by the normalisation Σπ = 1.
    a = q.T.tolil()
    a[n - 1, :] = np.ones(n)
    b = np.zeros(n)
    b[n - 1] = 1.0
    pi = np.asarray(spla.spsolve(a.tocsc(), b), dtype=np.float64)
    if not _distribution(pi):
        pi = _gth(q) if n <= GTH_MAX_STATES else pi
    if not _distribution(pi):
        raise IllConditioned(
            f"exact {model.structure.name}: singular generator (more than one recurrent class, or too stiff "
            f"for the sparse LU with {n} states, beyond GTH's {GTH_MAX_STATES})"
        )
    pi = np.clip(pi, 0.0, None)
    pi /= pi.sum()
    st = model.structure
    rates, _ = _steps(model, compiled)
    k = st.throughput_index
    thr = 0.0
    run = 0.0
    for p, s in zip(pi, states, strict=True):
        x = np.array(s, dtype=np.float64)
        thr += float(p) * float(rates(x)[k])  # φ_thr with its pool's factor
        run += float(p) * st.runnable(x, model.r)
    return ExactResult(
        throughput_per_us=thr, states=n, transitions=q.nnz - n, pi=pi, state_list=tuple(states), runnable=run
    )

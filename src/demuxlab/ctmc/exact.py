"""Exact steady state of tiny configurations: explore the reachable states from the initial state with the
Python-level definition, build the generator Q (scipy.sparse) and solve πQ = 0, Σπ = 1."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from demuxlab.ctmc.engine import FloatArray, ModelInstance
from demuxlab.errors import DemuxlabError


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


def explore(model: ModelInstance, max_states: int = 200_000) -> tuple[list[tuple[int, ...]], sp.csr_matrix]:
    """Reachable states and generator Q (rows = from)."""
    st = model.structure
    start = tuple(int(v) for v in model.initial)
    index: dict[tuple[int, ...], int] = {start: 0}
    states = [start]
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    i = 0
    while i < len(states):
        x = np.array(states[i], dtype=np.float64)
        a = st.rates(x, model.r)
        out = 0.0
        for k in np.flatnonzero(a > 0.0):
            y = x + st.delta(int(k), x)
            if np.any(y < 0) or np.any(y != np.round(y)):
                name = st.transitions[int(k)].name
                raise DemuxlabError(f"exact {st.name}: {name} leaves the lattice from {states[i]}")
            key = tuple(int(v) for v in y)
            j = index.get(key)
            if j is None:
                if len(states) >= max_states:
                    raise DemuxlabError(
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


def solve_exact(model: ModelInstance, max_states: int = 200_000) -> ExactResult:
    states, q = explore(model, max_states)
    n = len(states)
    # πQ = 0 ⇔ Qᵀπᵀ = 0; replace one (redundant) balance equation by the normalisation Σπ = 1.
    a = q.T.tolil()
    a[n - 1, :] = np.ones(n)
    b = np.zeros(n)
    b[n - 1] = 1.0
    pi = np.asarray(spla.spsolve(a.tocsc(), b), dtype=np.float64)
    if not np.all(np.isfinite(pi)) or pi.min() < -1e-9:
        raise DemuxlabError(
            f"exact {model.structure.name}: singular generator (more than one recurrent class?)"
        )
    pi = np.clip(pi, 0.0, None)
    pi /= pi.sum()
    st = model.structure
    k = st.throughput_index
    thr = 0.0
    run = 0.0
    for p, s in zip(pi, states, strict=True):
        x = np.array(s, dtype=np.float64)
        thr += float(p) * float(st.rates(x, model.r)[k])  # φ_thr with its pool's factor
        run += float(p) * st.runnable(x, model.r)
    return ExactResult(
        throughput_per_us=thr, states=n, transitions=q.nnz - n, pi=pi, state_list=tuple(states), runnable=run
    )

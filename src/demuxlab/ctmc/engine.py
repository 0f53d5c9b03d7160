"""Population CTMCs defined as data, and the compiled kernels generated from that data.

A model is a :class:`ModelStructure`: named populations (the state vector) and transition classes, each a
generating function φ_k(x, r) (plain Python on a float64 state vector ``x`` and a rate vector ``r``) and a
jump l_k, either a constant ``{species: delta}`` mapping or a function ``fill(x, d)`` writing the
(state-dependent) jump into a zeroed vector ``d``. Everything else is derived from that one definition:

* the Python-level reference (:meth:`ModelStructure.rates`, :meth:`ModelStructure.delta`), used by the
  exact solver and by the tests;
* a numba kernel (:func:`compile_structure`): Python source is generated from the same transition list
  (calls to the same φ functions, constant jumps written inline) and compiled with ``@njit``; tests check
  it agrees with the reference on random states.

States are float64 vectors holding integers for the CTMC and reals for the fluid approximation. The
indicator ``H`` is ``min(max(v, 0), 1)``: it equals the paper's H(v) on every non-negative integer and is
Lipschitz on the reals, which is what the fluid ODE needs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from demuxlab.errors import DemuxlabError

FloatArray = npt.NDArray[np.float64]
RateFn = Callable[[FloatArray, FloatArray], float]
JumpFn = Callable[[FloatArray, FloatArray], None]

# Positions of the rates in the rate vector ``r`` every φ receives (all per µs).
RATE_NAMES: tuple[str, ...] = ("r_l", "r_p", "r_g", "r_t", "r_i", "r_o", "r_a", "r_e", "r_c")
RL, RP, RG, RT, RI, RO, RA, RE, RC = range(9)


def H(v: float) -> float:
    """The paper's indicator H(v) (1 if v > 0 else 0) on integers; clipped-linear between 0 and 1."""
    return min(max(v, 0.0), 1.0)


def safe_div(a: float, b: float) -> float:
    """a / b, and 0 where b is not positive (the numerator is then 0 on every reachable state)."""
    if b > 0.0:
        return a / b
    return 0.0


def cmin(a: float, b: float) -> float:
    """min(a, b); named so that generated kernels and the reference call the same function."""
    return min(a, b)


_HELPERS: tuple[Callable[..., float], ...] = (H, safe_div, cmin)


@dataclass(frozen=True)
class TransitionClass:
    """One transition class: generating function φ_k and jump l_k."""

    name: str
    doc: str
    rate: RateFn
    jump: Mapping[str, int] | JumpFn


@dataclass(frozen=True)
class ModelStructure:
    """A population CTMC's structure: species and transition classes; ``throughput`` names the φ whose
    steady-state expectation is the model's message throughput."""

    name: str
    species: tuple[str, ...]
    transitions: tuple[TransitionClass, ...]
    throughput: str

    def index(self, species: str) -> int:
        try:
            return self.species.index(species)
        except ValueError:
            raise DemuxlabError(f"model {self.name}: unknown population {species!r}") from None

    def transition_index(self, name: str) -> int:
        for k, tr in enumerate(self.transitions):
            if tr.name == name:
                return k
        raise DemuxlabError(f"model {self.name}: unknown transition {name!r}")

    @property
    def throughput_index(self) -> int:
        return self.transition_index(self.throughput)

    def rates(self, x: FloatArray, r: FloatArray) -> FloatArray:
        """All φ_k(x), reference implementation."""
        return np.array([tr.rate(x, r) for tr in self.transitions], dtype=np.float64)

    def delta(self, k: int, x: FloatArray) -> FloatArray:
        """The jump l_k(x), reference implementation."""
        d = np.zeros(len(self.species), dtype=np.float64)
        jump = self.transitions[k].jump
        if callable(jump):
            jump(x, d)
        else:
            for sp, v in jump.items():
                d[self.index(sp)] += v
        return d

    def drift(self, x: FloatArray, r: FloatArray, eps: float) -> FloatArray:
        """Fluid drift Σ_k φ_k(x)·g_k(x)·l_k(x); g_k = Π H(x_i/eps) over the populations l_k decreases.

        g_k is 1 on every state the CTMC reaches with φ_k > 0 (populations never go negative, which the
        tests check); on the reals it stops a flow at the boundary so populations stay non-negative.
        """
        out = np.zeros(len(self.species), dtype=np.float64)
        a = self.rates(x, r)
        for k in range(len(self.transitions)):
            if a[k] == 0.0:
                continue
            d = self.delta(k, x)
            g = 1.0
            for i in range(len(d)):
                if d[i] < 0.0:
                    g *= H(float(x[i]) / eps)
            out += a[k] * g * d
        return out


@dataclass(frozen=True)
class ModelInstance:
    """A structure with its initial state and rate vector: what every solver takes."""

    structure: ModelStructure
    initial: FloatArray
    r: FloatArray
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class Kernel:
    """numba-compiled functions generated from one :class:`ModelStructure`."""

    all_rates: Any  # (x, r, out) -> None
    apply_jump: Any  # (k, x, d) -> None, d receives l_k(x)
    ssa_run: Any  # (x, r, thr, nbins, binlen, max_events, rng) -> (acc, events, status)
    drift: Any  # (x, r, eps, out) -> None


_KERNELS: dict[str, Kernel] = {}
_LOCK = threading.Lock()
_REGISTERED: set[int] = set()


def _generate_source(st: ModelStructure) -> str:
    lines = ["def all_rates(x, r, out):"]
    for k in range(len(st.transitions)):
        lines.append(f"    out[{k}] = phi_{k}(x, r)")
    lines += ["", "def apply_jump(k, x, d):", "    d[:] = 0.0"]
    for k, tr in enumerate(st.transitions):
        lines.append(f"    {'if' if k == 0 else 'elif'} k == {k}:")
        if callable(tr.jump):
            lines.append(f"        jump_{k}(x, d)")
        else:
            for sp, v in tr.jump.items():
                lines.append(f"        d[{st.index(sp)}] += {float(v)!r}")
    lines.append("")
    ns = len(st.species)
    nk = len(st.transitions)
    lines += [
        "def ssa_run(x, r, thr, nbins, binlen, max_events, rng):",
        # acc[b] = ∫ φ_thr dt over bin b; status 0 ok, 1 absorbing state, 2 event budget spent.
        "    acc = np.zeros(nbins)",
        f"    a = np.empty({nk})",
        f"    d = np.empty({ns})",
        "    events = 0",
        "    for b in range(nbins):",
        "        left = binlen",
        "        while True:",
        "            all_rates(x, r, a)",
        "            a0 = 0.0",
        f"            for k in range({nk}):",
        "                a0 += a[k]",
        "            if a0 <= 0.0:",
        "                return acc, events, 1",
        "            tau = rng.exponential(1.0 / a0)",
        # Exponential holding times are memoryless: cutting at the bin edge and redrawing is exact.
        "            if tau >= left:",
        "                acc[b] += a[thr] * left",
        "                break",
        "            acc[b] += a[thr] * tau",
        "            left -= tau",
        "            u = rng.random() * a0",
        f"            j = {nk - 1}",
        "            c = 0.0",
        f"            for k in range({nk}):",
        "                c += a[k]",
        "                if u < c:",
        "                    j = k",
        "                    break",
        "            apply_jump(j, x, d)",
        f"            for i in range({ns}):",
        "                x[i] += d[i]",
        "            events += 1",
        "            if events >= max_events:",
        "                return acc, events, 2",
        "    return acc, events, 0",
        "",
        "def drift(x, r, eps, out):",
        f"    a = np.empty({nk})",
        f"    d = np.empty({ns})",
        "    all_rates(x, r, a)",
        "    out[:] = 0.0",
        f"    for k in range({nk}):",
        "        if a[k] == 0.0:",
        "            continue",
        "        apply_jump(k, x, d)",
        "        g = 1.0",
        f"        for i in range({ns}):",
        "            if d[i] < 0.0:",
        "                g *= H(x[i] / eps)",
        f"        for i in range({ns}):",
        "            out[i] += a[k] * g * d[i]",
    ]
    return "\n".join(lines) + "\n"


def compile_structure(st: ModelStructure) -> Kernel:
    """Compile (once per process and structure) the numba kernel generated from ``st``."""
    with _LOCK:
        cached = _KERNELS.get(st.name)
        if cached is not None:
            return cached
        import numba
        from numba.extending import register_jitable

        for fn in _HELPERS:
            if id(fn) not in _REGISTERED:
                register_jitable(fn)
                _REGISTERED.add(id(fn))
        namespace: dict[str, Any] = {"np": np, "H": numba.njit(H)}
        for k, tr in enumerate(st.transitions):
            namespace[f"phi_{k}"] = numba.njit(tr.rate)
            if callable(tr.jump):
                namespace[f"jump_{k}"] = numba.njit(tr.jump)
        source = _generate_source(st)
        code = compile(source, f"<demuxlab.ctmc kernel {st.name}>", "exec")
        exec(code, namespace)
        kernel = Kernel(
            all_rates=numba.njit(namespace["all_rates"]),
            apply_jump=numba.njit(namespace["apply_jump"]),
            ssa_run=None,
            drift=None,
        )
        # The generated functions call each other by global name; rebind them to their compiled versions.
        namespace["all_rates"] = kernel.all_rates
        namespace["apply_jump"] = kernel.apply_jump
        kernel = Kernel(
            all_rates=kernel.all_rates,
            apply_jump=kernel.apply_jump,
            ssa_run=numba.njit(namespace["ssa_run"]),
            drift=numba.njit(namespace["drift"]),
        )
        _KERNELS[st.name] = kernel
        return kernel

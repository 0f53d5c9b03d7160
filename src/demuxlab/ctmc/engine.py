"""Population CTMCs defined as data, and the compiled kernels generated from that data.

A model is a :class:`ModelStructure`: named populations (the state vector) and transition classes, each a
generating function φ_k(x, r) on a float64 state vector ``x`` and a rate vector ``r`` and a jump l_k,
either a constant ``{species: delta}`` mapping or a function ``fill(x, d)`` writing the (state-dependent)
jump into a zeroed vector ``d``. A transition of a :class:`Pool` (threads sharing the server's cores: by
processor sharing, or by run to block with a population of holders, sched.py) is scaled by the pool's
factor. φ_k is an :class:`Expr` (one expression with constant indices, written by
:func:`mass`, :func:`total`, :func:`present`, :func:`absent` and the chains' shared ``parts``), or plain
Python. Everything else is derived from that one definition:

* the Python-level reference (:meth:`ModelStructure.rates`, :meth:`ModelStructure.delta`), used by the
  exact solver and by the tests;
* a numba kernel (:func:`compile_structure`): Python source is generated from the same transition list
  (an Expr written out as a function, calls to the same φ functions otherwise, constant jumps inline)
  and compiled with ``@njit``: the rates, the jumps, the drift, Gillespie's direct method (``ssa_run``;
  after an event only the rates the jump can change are recomputed, see :func:`dependencies`) and a stiff
  integrator for the fluid ODE (``fluid_run``). The generic parts are the ``_ssa_run`` … ``_fluid_run``
  templates below, copied into each generated module. The module is cached on disk with numba's machine
  code (:func:`cache_dir`). Tests check the kernel against the reference on random states and along
  simulated paths.

States are float64 vectors holding integers for the CTMC and reals for the fluid approximation. The
indicator ``H`` is ``min(max(v, 0), 1)``: it equals the paper's H(v) on every non-negative integer and is
Lipschitz on the reals, which is what the fluid ODE needs.

(Over 500 lines on purpose: one concern, a model's definition and the kernels generated from it. The
kernel templates are copied as source into each generated module, so they sit beside the generator that
copies them and the reference they are tested against.)
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import marshal
import os
import re
import sys
import tempfile
import textwrap
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from demuxlab.errors import DemuxlabError
from demuxlab.jsonio import write_text_if_changed

FloatArray = npt.NDArray[np.float64]
RateFn = Callable[[FloatArray, FloatArray], float]
JumpFn = Callable[[FloatArray, FloatArray], None]

# CPython 3.11 keeps the ast module's recursion-depth count once per interpreter, so two threads making or
# reading Python syntax-tree objects at once (``ast.parse``; ``compile`` of a tree) can fail with
# "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905): two dashboard callbacks
# each asking for a chain's rates did, in CI on 2026-11-29. Every such call here holds this lock, and one
# that a thread outside it (another library's) raced is made again: the call is pure, and each starts
# the count afresh.
_AST_LOCK = threading.Lock()
AST_TRIES = 3


def _ast_call(fn: Callable[[], Any]) -> Any:
    for _ in range(AST_TRIES - 1):
        try:
            with _AST_LOCK:
                return fn()
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
    with _AST_LOCK:  # the last try: whatever it raises stands
        return fn()


def parse_expr(text: str) -> ast.Expression:
    """``ast.parse(text, mode="eval")``, safe from other threads' syntax trees (:data:`_AST_LOCK`)."""
    tree: ast.Expression = _ast_call(lambda: ast.parse(text, mode="eval"))
    return tree


def parse_module(text: str) -> ast.Module:
    """``ast.parse(text)``, safe from other threads' syntax trees (:data:`_AST_LOCK`)."""
    tree: ast.Module = _ast_call(lambda: ast.parse(text))
    return tree


def compile_tree(tree: ast.Module | ast.Expression, filename: str, mode: str) -> types.CodeType:
    """``compile(tree, filename, mode)`` of a syntax tree, safe from other threads' (:data:`_AST_LOCK`)."""
    code: types.CodeType = _ast_call(lambda: compile(tree, filename, mode))
    return code


# Positions in the parameter vector ``r`` every φ receives. The first nine are seed 001's rates (per µs; r_c
# is 1/work), then the rates the other chains add (per µs) and the host (not rates: counts).
RATE_NAMES: tuple[str, ...] = (
    "r_l",  # lock acquire/release
    "r_p",  # queue put
    "r_g",  # queue get
    "r_t",  # taking a cached descriptor
    "r_i",  # receiving a message
    "r_o",  # sending the response
    "r_a",  # re-activation (re-arm)
    "r_e",  # notifier, per descriptor returned
    "r_c",  # work (1/work_us)
    "r_n",  # notifier, per call (1/α: the part of a call that does not grow with the descriptors)
    "r_x",  # per-message CPU the timed operations do not cover (loop, wake-ups; calibrated)
    "r_z",  # the client's turnaround of one message (per client server)
    "k_z",  # how many messages the client turns around at once (its threads, at most its cores)
    "cores",  # the server's cores: runnable server threads beyond it share them
    "load",  # runnable threads besides the chain's own on those cores (e.g. a multireactor's others)
    "r_w",  # a woken thread's preemption of a busy core, per µs, per other runnable thread (sched.py)
    "r_v",  # the client's CPU to wake a dispatcher asleep in its notifier (1/ω; per client server)
    "r_k",  # a re-arm's kick of the dispatcher waiting in select/poll (1/κ, the kicker's CPU); 0: no kicks
    "r_s",  # a server thread's CPU to wake the client asleep, after a send (1/ω at the server's share)
    "r_u",  # how soon a client woken by a response runs (1/its wake-up latency; per client server)
    "r_h",  # a released lock's hand-off to a waiter asleep on it (1/the waiter's wake-up latency)
)
RL, RP, RG, RT, RI, RO, RA, RE, RC = range(9)
RN, RX, RZ, KZ, CORES, LOAD, RW, RV, RK, RS, RU, RH = range(9, 21)
# The most descriptors (io_uring: completions) one notifier call returns: the server's MAX_EVENTS.
CACHE_SIZE = 64.0


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


def share(runnable: float, cores: float, load: float) -> float:
    """Processor sharing: the speed of each of ``runnable`` threads on ``cores`` cores that ``load`` other
    runnable threads also use: 1 while they all fit, else cores / (runnable + load)."""
    total = runnable + load
    if total <= cores:
        return 1.0
    return cores / total


def held(holders: float, runnable: float) -> float:
    """Run to block: the speed of each of ``runnable`` threads when ``holders`` of them hold a core (the
    holders spread over the runnable threads): min(holders, runnable) / runnable, 0 with none runnable."""
    if runnable <= 0.0:
        return 0.0
    return min(holders, runnable) / runnable


_HELPERS: tuple[Callable[..., float], ...] = (H, safe_div, cmin, share, held)

# What a rate expression may call (and nothing else: no builtins).
_EXPR_NAMES: dict[str, Any] = {"__builtins__": {}, "H": H, "cmin": cmin, "safe_div": safe_div}


@dataclass(frozen=True)
class Expr:
    """A declarative φ (or pool runnable count): one Python expression over the state ``x`` and the
    parameters ``r``, subscripted by constant integers, calling only ``H``, ``cmin`` and ``safe_div``, e.g.
    ``Expr("r[4] * x[6]")``. The constructors below (:func:`mass`, :func:`total`, :func:`present`,
    :func:`absent`) write it; ``*`` composes two expressions as Python would (``a * b``, the right operand
    in parentheses when it is itself a sum or a product: ``mass(RT, A) * present(C)`` is
    ``r[3] * x[5] * H(x[2])``, computed in that order).

    Why not a function made by a factory: the kernel generator writes the expression itself into the
    generated module (``def phi_k(x, r): return float(<text>)``), so the on-disk kernel cache is keyed by
    it through the module's source, and :func:`dependencies` reads the populations it uses from its
    syntax tree; a closure has neither a source of its own nor a cacheable identity. Calling it evaluates
    the same text in Python (the reference implementation): the kernel and the reference compute the
    same operations in the same order."""

    text: str
    _fn: Callable[[FloatArray, FloatArray], Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            tree = parse_expr(self.text)
        except SyntaxError as exc:
            raise DemuxlabError(f"rate expression {self.text!r}: {exc.msg}") from None
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        unknown = sorted(names - {"x", "r", *_EXPR_NAMES})
        if unknown:
            raise DemuxlabError(f"rate expression {self.text!r}: unknown name {unknown[0]!r}")
        fn = eval(compile(f"lambda x, r: {self.text}", f"<rate {self.text}>", "eval"), dict(_EXPR_NAMES))
        object.__setattr__(self, "_fn", fn)

    def __call__(self, x: FloatArray, r: FloatArray) -> float:
        return float(self._fn(x, r))

    def __mul__(self, other: Expr) -> Expr:
        return Expr(f"{operand(self, left=True)} * {operand(other, left=False)}")

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[type[Expr], tuple[str]]:
        # Pickled as its text (a structure, a model instance stay picklable as with module-level φ).
        return (Expr, (self.text,))


def operand(e: Expr, *, left: bool) -> str:
    """``e``'s text as the left or right operand of ``*`` (or ``/``): as it is where Python's precedence
    and left-to-right order keep its meaning (a call, a subscript, a constant; a product or quotient on the
    left), else in parentheses."""
    node = parse_expr(e.text).body
    if not isinstance(node, ast.BinOp) or (left and isinstance(node.op, ast.Mult | ast.Div)):
        return e.text
    return f"({e.text})"


def _summand(term: int | Expr, *, first: bool) -> str:
    """A population index or an expression as a term of a left-to-right sum."""
    if isinstance(term, int):
        return f"x[{term}]"
    node = parse_expr(term.text).body
    if not first and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        return f"({term.text})"
    return term.text


def mass(rate: int | Expr, *species: int) -> Expr:
    """Mass action: ``r[rate]`` (or a rate expression) times the populations, left to right:
    ``mass(RL, M3, S2)`` is r_l·x_m3·x_s2."""
    head = f"r[{rate}]" if isinstance(rate, int) else operand(rate, left=True)
    return Expr(" * ".join([head, *(f"x[{i}]" for i in species)]))


def total(*terms: int | Expr) -> Expr:
    """The sum of the populations (indices) and expressions, left to right: a pool's runnable count."""
    if not terms:
        raise DemuxlabError("total() of nothing")
    return Expr(" + ".join(_summand(t, first=k == 0) for k, t in enumerate(terms)))


def present(*species: int) -> Expr:
    """H(x_i + x_j + …): 1 while any of the populations is non-empty (clipped-linear on the reals)."""
    return Expr(f"H({total(*species).text})")


def absent(*species: int) -> Expr:
    """1 − H(x_i + x_j + …): 1 while all of the populations are empty."""
    return Expr(f"1.0 - {present(*species).text}")


@dataclass(frozen=True)
class TransitionClass:
    """One transition class: generating function φ_k and jump l_k.

    ``pool`` names the processor-sharing pool (:class:`Pool`) whose threads do this step on the CPU: its
    rate is φ_k times the pool's share (1 while the runnable threads fit on the cores). None: a step that
    needs no CPU of the pool (the client's, a wait)."""

    name: str
    doc: str
    rate: RateFn
    jump: Mapping[str, int] | JumpFn
    pool: str | None = None


@dataclass(frozen=True)
class Pool:
    """Threads of the chain that run on the same cores, and how they get them.

    ``runnable(x, r)`` counts the pool's threads that want a CPU in state x (a φ-like function, compiled
    the same way). Processor sharing (``holders`` None): with ``r[cores]`` cores and ``r[load]`` other
    runnable threads on them, each runnable thread runs at :func:`share` (1 while they fit, else cores /
    (runnable + load)), and every transition of the pool is scaled by it; with a core per thread the factor
    is 1 in every state and the chain is the chain without the pool. Run to block (``holders``: the index
    of the population counting the pool's threads that hold a core): each runnable thread runs at
    :func:`held`, min(holders, runnable) / runnable; the chain's own transitions move cores between pools
    (sched.py)."""

    name: str
    runnable: RateFn
    cores: int = CORES
    load: int = LOAD
    holders: int | None = None

    def factor(self, x: FloatArray, r: FloatArray) -> float:
        """This pool's factor in state x (reference implementation)."""
        if self.holders is not None:
            return held(float(x[self.holders]), float(self.runnable(x, r)))
        return share(float(self.runnable(x, r)), float(r[self.cores]), float(r[self.load]))

    def factor_source(self, runnable: str) -> str:
        """The factor as generated code, given the runnable count's expression ``runnable``."""
        if self.holders is not None:
            return f"held(x[{self.holders}], {runnable})"
        return f"share({runnable}, r[{self.cores}], r[{self.load}])"


@dataclass(frozen=True)
class ModelStructure:
    """A population CTMC's structure: species and transition classes; ``throughput`` names the φ whose
    steady-state expectation is the model's message throughput; ``pools`` the processor-sharing pools
    the transitions' ``pool`` names refer to (the first one's runnable count is also averaged by the
    simulation: :attr:`SimulationResult.runnable`); ``calls`` the transition whose firing is one call of
    the notifier that charges the per-call cost α = 1/r_n (None: the chain has none), so that a
    calibration can count the chain's own calls per message (calibrate.py); ``events_per_message`` what
    the notifier returns per message in the chain (a readiness notifier 1 descriptor; io_uring 2
    completions, a receive and a send)."""

    name: str
    species: tuple[str, ...]
    transitions: tuple[TransitionClass, ...]
    throughput: str
    pools: tuple[Pool, ...] = ()
    calls: str | None = None
    events_per_message: int = 1

    def __post_init__(self) -> None:
        names = [p.name for p in self.pools]
        for tr in self.transitions:
            if tr.pool is not None and tr.pool not in names:
                raise DemuxlabError(f"model {self.name}: transition {tr.name} names unknown pool {tr.pool!r}")
        for named in (self.throughput, self.calls):
            if named is not None:
                self.transition_index(named)

    def pool_index(self, k: int) -> int | None:
        """The index of transition k's pool, or None."""
        name = self.transitions[k].pool
        if name is None:
            return None
        return [p.name for p in self.pools].index(name)

    def factors(self, x: FloatArray, r: FloatArray) -> FloatArray:
        """Each pool's share factor in state x (reference implementation)."""
        return np.array([p.factor(x, r) for p in self.pools], dtype=np.float64)

    def runnable(self, x: FloatArray, r: FloatArray, pool: int = 0) -> float:
        """The runnable count of pool ``pool`` in state x (0 without pools)."""
        if not self.pools:
            return 0.0
        return float(self.pools[pool].runnable(x, r))

    def state(self, **populations: float) -> FloatArray:
        """A state vector: the named populations, every other one 0 (``st.state(c1=512, a1=1)``)."""
        x = np.zeros(len(self.species), dtype=np.float64)
        for sp, v in populations.items():
            x[self.index(sp)] = v
        return x

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
        """All φ_k(x), each times its pool's share factor; reference implementation."""
        f = self.factors(x, r)
        out = np.array([tr.rate(x, r) for tr in self.transitions], dtype=np.float64)
        for k in range(len(out)):
            p = self.pool_index(k)
            if p is not None:
                out[k] *= f[p]
        return out

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
        """Fluid drift Σ_k φ_k(x)·g_k(x)·l_k(x); g_k = Π H(x_i/eps) over the populations l_k decreases by
        a whole individual or more (a constant jump's −1; a state-dependent jump's d_i ≤ −1).

        g_k is 1 on every state the CTMC reaches with φ_k > 0 (populations never go negative, which the
        tests check); on the reals it stops a flow at the boundary so populations stay non-negative. A
        state-dependent decrement smaller than one (a batch −min(x_i, …) with x_i < 1) cannot overshoot
        and is left alone: a compound jump (io_uring's reap) must not be stopped by one of its parts.
        """
        out = np.zeros(len(self.species), dtype=np.float64)
        a = self.rates(x, r)
        for k in range(len(self.transitions)):
            if a[k] == 0.0:
                continue
            d = self.delta(k, x)
            jump = self.transitions[k].jump
            g = 1.0
            for i in range(len(d)):
                if (d[i] <= -1.0) if callable(jump) else (d[i] < 0.0):
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
    ssa_run: Any  # (x, r, thr, nbins, binlen, max_events, rng, obs) -> (acc, events, status)
    drift: Any  # (x, r, eps, out) -> None
    fluid_run: Any  # (x, r, eps, thr, span, rtol, atol, h, max_steps) -> (i3, i4, h, steps, status)
    n_species: int
    n_transitions: int
    source_path: str | None  # the generated module's file where the compiled code is cached on disk

    def warm(self) -> None:
        """Compile (or load from the disk cache) every entry point for the argument types the solvers use."""
        x = np.zeros(self.n_species, dtype=np.float64)
        r = np.ones(len(RATE_NAMES), dtype=np.float64)
        rng = np.random.Generator(np.random.PCG64(0))
        self.all_rates(x, r, np.empty(self.n_transitions))
        self.apply_jump(0, x, np.empty(self.n_species))
        self.ssa_run(x.copy(), r, 0, 1, 1.0, 1, rng, np.zeros(1))
        self.drift(x, r, 1e-2, np.empty(self.n_species))
        self.fluid_run(x.copy(), r, 1e-2, 0, 1.0, 1e-4, 1e-6, 1e-3, 1)


CACHE_ENV = "DEMUXLAB_KERNEL_CACHE"

_KERNELS: dict[int, tuple[ModelStructure, Kernel]] = {}
_LOCK = threading.Lock()
_REGISTERED: set[int] = set()

# ---------------------------------------------------------------------------------------------------------
# Which populations each transition class reads and changes (for the SSA's incremental rate updates).


@dataclass(frozen=True)
class Dependencies:
    """Per transition class k: the populations φ_k reads (``None``: not known, treated as all of them) and
    the populations its jump can change; per pool, the populations its runnable count reads. After
    transition j fires only the φ in ``affected(j)`` can change, and only the pools in
    ``pools_touched(j)`` can change their share factor (which scales every transition of the pool);
    tests check both on random states against the Python definition."""

    reads: tuple[frozenset[int] | None, ...]
    changes: tuple[frozenset[int] | None, ...]
    pool_reads: tuple[frozenset[int] | None, ...] = ()

    def affected(self, j: int) -> tuple[int, ...]:
        ch = self.changes[j]
        return tuple(
            k for k, rd in enumerate(self.reads) if rd is None or ch is None or not rd.isdisjoint(ch)
        )

    def pools_touched(self, j: int) -> tuple[int, ...]:
        ch = self.changes[j]
        return tuple(
            p for p, rd in enumerate(self.pool_reads) if rd is None or ch is None or not rd.isdisjoint(ch)
        )


_INDEX_NODES: tuple[type[ast.AST], ...] = (ast.Name, ast.Attribute, ast.Constant, ast.UnaryOp, ast.BinOp)
_INDEX_NODES += (ast.Load, ast.USub, ast.UAdd, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def _constant_index(node: ast.expr, env: dict[str, Any], size: int) -> int | None:
    """The value of an index such as ``M1`` or ``hsha.M1`` if it is a constant in range, else None."""
    if not all(isinstance(sub, _INDEX_NODES) for sub in ast.walk(node)):
        return None
    try:
        value = eval(compile_tree(ast.Expression(node), "<index>", "eval"), env)
    except Exception:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not -size <= value < size:
        return None
    return int(value) % size


def subscripts(fn: Callable[..., Any], param: int, size: int) -> frozenset[int] | None:
    """The constant indices at which ``fn`` subscripts its parameter number ``param`` (reads or writes),
    or None where the parameter is used in any other way (passed on, aliased, indexed by a variable) or
    the source is not available: then every index has to be assumed. An :class:`Expr` is read from its
    own text (parameters ``x``, ``r``)."""
    if isinstance(fn, Expr):
        if param > 1:
            return None
        return _subscripts_in(parse_expr(fn.text), ("x", "r")[param], {}, size)
    try:
        tree = parse_module(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(defs) != 1 or not _is_source_of(defs[0], fn):
        return None
    fdef = defs[0]
    a = fdef.args
    if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or len(a.args) <= param:
        return None
    env: dict[str, Any] = dict(getattr(fn, "__globals__", {}))
    try:
        env.update(inspect.getclosurevars(fn).nonlocals)
    except (TypeError, ValueError):
        return None
    return _subscripts_in(fdef, a.args[param].arg, env, size)


def _is_source_of(fdef: ast.FunctionDef, fn: Callable[..., Any]) -> bool:
    """Whether ``fdef`` compiles to ``fn``'s own bytecode. inspect.getsource reads the file as it is now, at
    the line the function started when it was imported: a file edited since (a long run while its source
    changes) gives another function's text, whose indices would be taken for this one's."""
    code = getattr(fn, "__code__", None)
    if code is None or fdef.name != fn.__name__:
        return False
    body: list[ast.stmt] = [fdef]
    if code.co_freevars:  # a closure: its free variables are the enclosing function's locals
        free: list[ast.stmt] = [
            ast.Assign(targets=[ast.Name(id=v, ctx=ast.Store())], value=ast.Constant(value=None))
            for v in code.co_freevars
        ]
        no_args = ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
        )
        body = [ast.FunctionDef(name="_enclosing", args=no_args, body=[*free, fdef], decorator_list=[])]
    try:
        tree = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
        consts = compile_tree(tree, "<source check>", "exec").co_consts
    except (SyntaxError, ValueError, TypeError):
        return False
    if code.co_freevars:
        consts = next(c for c in consts if isinstance(c, types.CodeType)).co_consts
    made = [c for c in consts if isinstance(c, types.CodeType) and c.co_name == fdef.name]
    return len(made) == 1 and _same_code(made[0], code)


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """The same instructions, names and constants (an index such as d[1] is a constant), whatever the file
    and lines they came from."""

    def plain(c: types.CodeType) -> tuple[Any, ...]:
        return tuple(k for k in c.co_consts if not isinstance(k, types.CodeType))

    return a.co_code == b.co_code and a.co_names == b.co_names and plain(a) == plain(b)


def _subscripts_in(root: ast.AST, name: str, env: dict[str, Any], size: int) -> frozenset[int] | None:
    """The constant indices at which the code under ``root`` subscripts ``name``, or None (see
    :func:`subscripts`)."""
    found: set[int] = set()
    allowed: set[int] = set()
    for node in ast.walk(root):
        if node is not root and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return None  # a nested scope could shadow or capture the parameter
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
            idx = _constant_index(node.slice, env, size)
            if idx is None:
                return None
            found.add(idx)
            allowed.add(id(node.value))
    for node in ast.walk(root):
        if isinstance(node, ast.Name) and node.id == name and id(node) not in allowed:
            return None
    return frozenset(found)


def _pool_reads(pool: Pool, size: int) -> frozenset[int] | None:
    """The populations a pool's factor reads: its runnable count's, and its holders."""
    reads = subscripts(pool.runnable, 0, size)
    if reads is None or pool.holders is None:
        return reads
    return reads | {pool.holders}


def dependencies(st: ModelStructure) -> Dependencies:
    ns = len(st.species)
    reads = tuple(subscripts(tr.rate, 0, ns) for tr in st.transitions)
    changes: list[frozenset[int] | None] = []
    for tr in st.transitions:
        if callable(tr.jump):
            changes.append(subscripts(tr.jump, 1, ns))
        else:
            changes.append(frozenset(st.index(sp) for sp, v in tr.jump.items() if v != 0))
    pool_reads = tuple(_pool_reads(p, ns) for p in st.pools)
    return Dependencies(reads=reads, changes=tuple(changes), pool_reads=pool_reads)


def parameters_read(st: ModelStructure) -> frozenset[int] | None:
    """The positions of the parameter vector ``r`` (:data:`RATE_NAMES`) that some φ or pool runnable count of
    ``st`` reads, or None where one reads it in a way not known (then every position has to be assumed)."""
    found: set[int] = set()
    for fn in (*(tr.rate for tr in st.transitions), *(p.runnable for p in st.pools)):
        got = subscripts(fn, 1, len(RATE_NAMES))
        if got is None:
            return None
        found |= got
    return frozenset(found)


# ---------------------------------------------------------------------------------------------------------
# Kernel templates. These functions are not called here: their source is copied into every generated
# kernel module, after the model-specific part, which defines the ``_gen_*`` names they call (the stubs
# below only let this file be checked as a whole). numba compiles them per model.

_GEN_NS = 0  # number of populations
_GEN_NK = 0  # number of transition classes
_GEN_NP = 1  # number of processor-sharing pools (at least 1: the arrays below are never empty)


def _gen_all_rates(x: FloatArray, r: FloatArray, out: FloatArray) -> None:
    """out[k] = φ_k(x) times its pool's factor."""
    raise NotImplementedError


def _gen_pools(x: FloatArray, r: FloatArray, fs: FloatArray, rs: FloatArray) -> None:
    """rs[p] = pool p's runnable count, fs[p] = its share factor (rs[0] = 0 without pools)."""
    raise NotImplementedError


def _gen_select_fire(
    u: float, x: FloatArray, r: FloatArray, a: FloatArray, d: FloatArray, fs: FloatArray, rs: FloatArray
) -> None:
    """Fire the first transition j with u < a[0] + … + a[j] (the last one if there is none): x += l_j(x),
    then the pools' runnable counts and factors it can change (rs, fs), then a[k] for every k whose φ or
    factor can have changed (d: scratch)."""
    raise NotImplementedError


def _gen_drift_ws(x: FloatArray, r: FloatArray, eps: float, out: FloatArray, d: FloatArray) -> None:
    """out = Σ_k φ_k(x)·f_k(x)·g_k(x)·l_k(x) (f_k: the pool factor; d: scratch)."""
    raise NotImplementedError


def _ssa_run(
    x: FloatArray,
    r: FloatArray,
    thr: int,
    nbins: int,
    binlen: float,
    max_events: int,
    rng: np.random.Generator,
    obs: FloatArray,
) -> tuple[FloatArray, int, int]:
    """Gillespie's direct method from x (updated in place) over ``nbins`` bins of ``binlen`` µs.

    Returns (acc, events, status): acc[b] = ∫ φ_thr dt over bin b, for the bins completed; status 0 when
    every bin is done, 1 on an absorbing state, 2 when ``max_events`` events have been simulated (the bin
    it stopped in is left out). ``obs[0]`` is increased by ∫ (the first pool's runnable count) dt over the
    same bins; where ``obs`` has room (1 + 2 × pools), ``obs[1 + 2p]`` by ∫ (pool p's runnable count) dt and
    ``obs[2 + 2p]`` by ∫ (its runnable count × its factor) dt: the threads of the pool on a CPU. Direct
    method: an exponential holding time, then a uniform draw picks the transition by cumulative sums of the
    rates; only the rates the fired jump can change are recomputed (all of a pool's when its factor
    changed).
    """
    acc = np.zeros(nbins)
    a = np.empty(_GEN_NK)
    d = np.empty(_GEN_NS)
    fs = np.ones(_GEN_NP)
    rs = np.zeros(_GEN_NP)
    _gen_pools(x, r, fs, rs)
    _gen_all_rates(x, r, a)
    per_pool = obs.shape[0] >= 1 + 2 * _GEN_NP
    po = np.zeros(2 * _GEN_NP)  # this bin's ∫ runnable and ∫ running dt per pool
    events = 0
    for b in range(nbins):
        left = binlen
        s = 0.0
        so = 0.0
        po[:] = 0.0
        while True:
            a0 = 0.0
            for k in range(_GEN_NK):
                a0 += a[k]
            if a0 <= 0.0:
                return acc[:b], events, 1
            tau = rng.exponential(1.0 / a0)
            # Exponential holding times are memoryless: cutting at the bin edge and redrawing is exact.
            dt = min(tau, left)
            if per_pool:
                for p in range(_GEN_NP):
                    po[2 * p] += rs[p] * dt
                    po[2 * p + 1] += rs[p] * fs[p] * dt
            if tau >= left:
                s += a[thr] * left
                so += rs[0] * left
                break
            s += a[thr] * tau
            so += rs[0] * tau
            left -= tau
            _gen_select_fire(rng.random() * a0, x, r, a, d, fs, rs)
            events += 1
            if events >= max_events:
                return acc[:b], events, 2
        acc[b] = s
        obs[0] += so
        if per_pool:
            for i in range(2 * _GEN_NP):
                obs[1 + i] += po[i]
    return acc, events, 0


def _drift(x: FloatArray, r: FloatArray, eps: float, out: FloatArray) -> None:
    """out = the fluid drift at x."""
    d = np.empty(_GEN_NS)
    _gen_drift_ws(x, r, eps, out, d)


def _jacobian(
    x: FloatArray,
    r: FloatArray,
    eps: float,
    f0: FloatArray,
    jac: FloatArray,
    xt: FloatArray,
    ft: FloatArray,
    d: FloatArray,
) -> None:
    """jac = ∂drift/∂x at x by forward differences (f0 = drift(x); xt, ft, d scratch)."""
    n = x.size
    for i in range(n):
        xt[i] = x[i]
    for i in range(n):
        xi = x[i]
        xt[i] = xi + 1e-7 * max(abs(xi), 1.0)
        h = xt[i] - xi
        _gen_drift_ws(xt, r, eps, ft, d)
        for j in range(n):
            jac[j, i] = (ft[j] - f0[j]) / h
        xt[i] = xi


def _lu_factor(w: FloatArray, piv: npt.NDArray[np.int64]) -> bool:
    """LU factorisation with partial pivoting in place (Doolittle, unit L below the diagonal)."""
    n = w.shape[0]
    for k in range(n):
        p = k
        m = abs(w[k, k])
        for i in range(k + 1, n):
            v = abs(w[i, k])
            if v > m:
                m = v
                p = i
        piv[k] = p
        if m == 0.0:
            return False
        if p != k:
            for c in range(n):
                t = w[k, c]
                w[k, c] = w[p, c]
                w[p, c] = t
        inv = 1.0 / w[k, k]
        for i in range(k + 1, n):
            f = w[i, k] * inv
            w[i, k] = f
            if f != 0.0:
                for c in range(k + 1, n):
                    w[i, c] -= f * w[k, c]
    return True


def _lu_solve(w: FloatArray, piv: npt.NDArray[np.int64], b: FloatArray) -> None:
    """b = W⁻¹ b in place, W as factorised by _lu_factor."""
    n = w.shape[0]
    for k in range(n):
        p = piv[k]
        if p != k:
            t = b[k]
            b[k] = b[p]
            b[p] = t
    for i in range(n):
        s = b[i]
        for c in range(i):
            s -= w[i, c] * b[c]
        b[i] = s
    for i in range(n - 1, -1, -1):
        s = b[i]
        for c in range(i + 1, n):
            s -= w[i, c] * b[c]
        b[i] = s / w[i, i]


def _fluid_run(
    x: FloatArray,
    r: FloatArray,
    eps: float,
    thr: int,
    span: float,
    rtol: float,
    atol: float,
    h: float,
    max_steps: int,
) -> tuple[float, float, float, int, int]:
    """Integrate dx/dt = drift(x) from x (updated in place) over [0, span] µs.

    Scheme: ROS2 (Verwer, Spee, Blom, Hundsdorfer 1999), a two-stage linearly implicit (Rosenbrock/W)
    method: order 2 with *any* matrix J in W = I − γhJ, L-stable for γ = 1 + 1/√2 when J is the Jacobian;
    the embedded first-order solution x + h·k1 gives the error estimate (weighted RMS norm, atol + rtol·|x|).
    Being a W-method, it keeps J (forward differences of the compiled drift) and the LU factors of W for
    several steps: J is recomputed after a rejected step and at most every 8 steps, W whenever J or h
    changes, and h is only changed when the controller asks for a decrease or at least ×1.3. Steps end
    exactly on span/2, 3·span/4 and span and are at most span/256 long.

    Returns (∫ φ_thr dt over [span/2, 3span/4], the same over [3span/4, span] (trapezoidal rule on the
    accepted steps), the next step size, steps attempted, status): status 0 ok, 1 the step size fell
    below 1e-12·span, 2 ``max_steps`` attempts were not enough.

    Long because: it is one numerical kernel, the integrator's step loop, copied into every chain's
    generated module and compiled by numba (:data:`_TEMPLATES`); its state (J's age, W's step size, the
    rejected flag, the two integrals) lives in the loop's locals, and split into functions it would pass
    through calls in the hot loop and hide the scheme's order of operations, which fixes its numbers.
    """
    n = x.size
    gamma = 1.0 + 1.0 / np.sqrt(2.0)
    f0 = np.empty(n)
    f1 = np.empty(n)
    k1 = np.empty(n)
    k2 = np.empty(n)
    y1 = np.empty(n)
    xt = np.empty(n)
    ft = np.empty(n)
    jac = np.empty((n, n))
    w = np.empty((n, n))
    piv = np.zeros(n, dtype=np.int64)
    d = np.empty(_GEN_NS)
    a = np.empty(_GEN_NK)
    _gen_drift_ws(x, r, eps, f0, d)
    _gen_all_rates(x, r, a)
    p0 = a[thr]
    half = 0.5 * span
    q3 = 0.75 * span
    hmax = span / 64.0
    i3 = 0.0
    i4 = 0.0
    t = 0.0
    steps = 0
    jac_age = -1  # accepted steps since jac was computed; -1: none yet
    w_h = -1.0  # the step size w was factorised for; -1: w is stale
    rejected = False
    while t < span:
        if steps >= max_steps:
            return i3, i4, h, steps, 2
        edge = half if t < half else (q3 if t < q3 else span)
        hh = min(h, hmax)
        clipped = False
        if t + hh >= edge:
            hh = edge - t
            clipped = True
        if jac_age < 0 or jac_age >= 32 or (rejected and jac_age > 0):
            _jacobian(x, r, eps, f0, jac, xt, ft, d)
            jac_age = 0
            w_h = -1.0
        steps += 1
        if hh != w_h:
            c = -gamma * hh
            for i in range(n):
                for j in range(n):
                    w[i, j] = c * jac[i, j]
                w[i, i] += 1.0
            if not _lu_factor(w, piv):
                w_h = -1.0
                h = 0.5 * hh
                rejected = True
                continue
            w_h = hh
        for i in range(n):
            k1[i] = f0[i]
        _lu_solve(w, piv, k1)
        for i in range(n):
            y1[i] = x[i] + hh * k1[i]
        _gen_drift_ws(y1, r, eps, f1, d)
        for i in range(n):
            k2[i] = f1[i] - 2.0 * k1[i]
        _lu_solve(w, piv, k2)
        acc = 0.0
        for i in range(n):
            ynew = x[i] + 1.5 * hh * k1[i] + 0.5 * hh * k2[i]
            e = 0.5 * hh * (k1[i] + k2[i])
            sc = atol + rtol * max(abs(x[i]), abs(ynew))
            acc += (e / sc) * (e / sc)
            y1[i] = ynew
        err = np.sqrt(acc / n)
        if err <= 1.0:
            t0 = t
            t = edge if clipped else t + hh
            for i in range(n):
                x[i] = y1[i]
            _gen_drift_ws(x, r, eps, f0, d)
            _gen_all_rates(x, r, a)
            p1 = a[thr]
            if t0 >= half:
                if t0 < q3:
                    i3 += 0.5 * (p0 + p1) * (t - t0)
                else:
                    i4 += 0.5 * (p0 + p1) * (t - t0)
            p0 = p1
            jac_age += 1
            fac = 5.0 if err == 0.0 else min(5.0, 0.9 / np.sqrt(err))
            if rejected:
                fac = min(fac, 1.0)
            rejected = False
            if not clipped and (fac < 1.0 or fac >= 1.3):
                h = hh * fac
        else:
            rejected = True
            h = hh * max(0.2, 0.9 / np.sqrt(err))
        if h < 1e-12 * span:
            return i3, i4, h, steps, 1
    return i3, i4, h, steps, 0


_TEMPLATES: tuple[Callable[..., Any], ...] = (_ssa_run, _drift, _jacobian, _lu_factor, _lu_solve, _fluid_run)

# ---------------------------------------------------------------------------------------------------------
# Generation and compilation.


def _factor_suffix(st: ModelStructure, k: int, names: Sequence[str]) -> str:
    """`` * f`` (the pool factor's expression in ``names``) for a transition of a pool, else ``""``."""
    p = st.pool_index(k)
    return "" if p is None else f" * {names[p]}"


def _pool_locals(st: ModelStructure, indent: str) -> tuple[list[str], list[str]]:
    """Statements computing each pool's factor into a local ``f<p>``, and those names."""
    lines = [f"{indent}f{p} = {pool.factor_source(f'run_{p}(x, r)')}" for p, pool in enumerate(st.pools)]
    return lines, [f"f{p}" for p in range(len(st.pools))]


def _generate_source(st: ModelStructure, deps: Dependencies | None = None) -> str:
    """The Python source of one model's kernel module: the model-specific functions, then the templates."""
    deps = deps if deps is not None else dependencies(st)
    ns = len(st.species)
    nk = len(st.transitions)
    lines = [
        f"# Kernel of the CTMC {st.name!r}, generated by demuxlab.ctmc.engine; do not edit.",
        "from __future__ import annotations",
        "",
        "import numpy as np",
        "",
        f"_GEN_NS = {ns}",
        f"_GEN_NK = {nk}",
        f"_GEN_NP = {max(1, len(st.pools))}",
        "",
        "",
    ]
    # Declarative rates (Expr) are written here as functions; the others are put into the module by _compile.
    for p, pool in enumerate(st.pools):
        if isinstance(pool.runnable, Expr):
            lines += [f"def run_{p}(x, r):", f"    return float({pool.runnable.text})", "", ""]
    for k, tr in enumerate(st.transitions):
        if isinstance(tr.rate, Expr):
            lines += [f"def phi_{k}(x, r):", f"    return float({tr.rate.text})", "", ""]
    lines += ["def _gen_pools(x, r, fs, rs):"]
    for p, pool in enumerate(st.pools):
        lines += [
            f"    rs[{p}] = run_{p}(x, r)",
            f"    fs[{p}] = {pool.factor_source(f'rs[{p}]')}",
        ]
    if not st.pools:
        lines += ["    rs[0] = 0.0", "    fs[0] = 1.0"]
    pre, fnames = _pool_locals(st, "    ")
    lines += ["", "", "def _gen_all_rates(x, r, out):", *pre]
    lines += [f"    out[{k}] = phi_{k}(x, r){_factor_suffix(st, k, fnames)}" for k in range(nk)]
    lines += ["", "", "def _gen_apply_jump(k, x, d):", "    d[:] = 0.0"]
    for k, tr in enumerate(st.transitions):
        lines.append(f"    {'if' if k == 0 else 'elif'} k == {k}:")
        if callable(tr.jump):
            lines.append(f"        jump_{k}(x, d)")
        else:
            lines += [f"        d[{st.index(sp)}] += {float(v)!r}" for sp, v in tr.jump.items()]
            lines += ["        pass"] if not tr.jump else []
    fire = _select_fire_source(st, deps, "            ")
    lines += [
        "",
        "",
        "def _gen_drift_ws(x, r, eps, out, d):",
        *pre,
        f"    for i in range({ns}):",
        "        out[i] = 0.0",
    ]
    for k, tr in enumerate(st.transitions):
        lines += [f"    v = phi_{k}(x, r){_factor_suffix(st, k, fnames)}", "    if v != 0.0:"]
        if callable(tr.jump):
            written = deps.changes[k]
            idx = sorted(written) if written is not None else list(range(ns))
            lines += [f"        d[{i}] = 0.0" for i in idx]
            lines.append(f"        jump_{k}(x, d)")
            lines += [f"        if d[{i}] <= -1.0:\n            v *= H(x[{i}] / eps)" for i in idx]
            lines += [f"        out[{i}] += v * d[{i}]" for i in idx]
        else:
            jump = sorted((st.index(sp), float(v)) for sp, v in tr.jump.items() if v != 0)
            lines += [f"        v *= H(x[{i}] / eps)" for i, v in jump if v < 0.0]
            lines += [f"        out[{i}] += v * {v!r}" for i, v in jump]
            lines += ["        pass"] if not jump else []
    lines += ["", ""]
    body = "\n".join(lines)
    templates = "\n\n".join(textwrap.dedent(inspect.getsource(fn)) for fn in _TEMPLATES)
    if templates.count(_SELECT_FIRE_CALL) != 1:
        raise AssertionError("engine: the SSA template lost its _gen_select_fire call")
    return body + templates.replace(_SELECT_FIRE_CALL, fire)


# The call in _ssa_run that _generate_source replaces by the generated code itself: numba inlines calls at
# the IR level, but passing the arrays costs atomic reference count updates and releases per event, which
# took about half of the time per event.
_SELECT_FIRE_CALL = "            _gen_select_fire(rng.random() * a0, x, r, a, d, fs, rs)\n"


def _select_fire_source(st: ModelStructure, deps: Dependencies, indent: str) -> str:
    """Statements drawing u and firing the first transition j with u < a[0] + … + a[j] (the last one if
    there is none): the state update, then the pools' runnable counts the jump can change (and, where a
    pool's share factor changed, the rates of all of its transitions), then the rates whose φ can have
    changed."""
    ns = len(st.species)
    nk = len(st.transitions)
    members = [[k for k in range(nk) if st.pool_index(k) == p] for p in range(len(st.pools))]
    fnames = [f"fs[{p}]" for p in range(len(st.pools))]
    out = [f"{indent}u = rng.random() * a0", f"{indent}c = a[0]"]
    pad = indent
    for k, tr in enumerate(st.transitions):
        last = k == nk - 1
        if not last:
            if k > 0:
                out.append(f"{pad}c += a[{k}]")
            out.append(f"{pad}if u < c:")
        body = pad + "    " if not last else pad
        start = len(out)
        if callable(tr.jump):
            written = deps.changes[k]
            idx = sorted(written) if written is not None else list(range(ns))
            out += [f"{body}d[{i}] = 0.0" for i in idx]
            out.append(f"{body}jump_{k}(x, d)")
            out += [f"{body}x[{i}] += d[{i}]" for i in idx]
        else:
            out += [f"{body}x[{st.index(sp)}] += {float(v)!r}" for sp, v in tr.jump.items() if v != 0]
        affected = deps.affected(k)
        for p in deps.pools_touched(k):
            pool = st.pools[p]
            # A run-to-block pool's factor also changes with its holders, not only with its runnable count.
            changed = "True" if pool.holders is not None else f"rn != rs[{p}]"
            out += [
                f"{body}rn = run_{p}(x, r)",
                f"{body}if {changed}:",
                f"{body}    rs[{p}] = rn",
                f"{body}    fn = {pool.factor_source('rn')}",
                f"{body}    if fn != fs[{p}]:",
                f"{body}        fs[{p}] = fn",
            ]
            out += [f"{body}        a[{m}] = phi_{m}(x, r) * fn" for m in members[p] if m not in affected]
        out += [f"{body}a[{m}] = phi_{m}(x, r){_factor_suffix(st, m, fnames)}" for m in affected]
        if len(out) == start:
            out.append(f"{body}pass")  # a jump that changes nothing
        if not last:
            out.append(f"{pad}else:")
            pad += "    "
    return "\n".join(out) + "\n"


def cache_dir() -> Path | None:
    """Where generated kernels and numba's machine code for them are cached: ``$DEMUXLAB_KERNEL_CACHE``
    (``off`` disables the cache), else ``$XDG_CACHE_HOME/demuxlab/ctmc-kernels`` (``~/.cache/…``) or, if
    that cannot be written, a folder in the temporary directory; None if disabled or nothing is writable.
    Entries are named by a hash of everything they are compiled from, so checkouts and versions can share
    the folder; deleting it only costs a compile."""
    env = os.environ.get(CACHE_ENV)
    if env is not None and env.strip().lower() in ("", "0", "off", "no", "false"):
        return None
    candidates: list[Path] = []
    if env:
        candidates.append(Path(env))
    else:
        try:
            base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            candidates.append(base / "demuxlab" / "ctmc-kernels")
        except RuntimeError:  # no home directory
            pass
        user = os.getuid() if hasattr(os, "getuid") else 0
        candidates.append(Path(tempfile.gettempdir()) / f"demuxlab-ctmc-kernels-{user}")
    for path in candidates:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            return path
    return None


_PACKAGE = Path(__file__).resolve().parents[1]  # src/demuxlab


def _where(f: Path) -> str:
    """A file's name in a cache key: its path inside the demuxlab package (the same in every checkout),
    else its absolute path."""
    try:
        return "demuxlab/" + f.relative_to(_PACKAGE).as_posix()
    except ValueError:
        return str(f)


def _without_file_names(code: types.CodeType) -> types.CodeType:
    """``code`` and the code objects in its constants with an empty file name (marshal keeps it)."""
    consts = tuple(_without_file_names(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename="", co_consts=consts)


def _cache_key(st: ModelStructure, source: str) -> str | None:
    """A hash of everything the compiled code depends on, or None if some of it cannot be pinned down (a
    φ or jump without a source file, or one that closes over values): the generated source, the φ and jump
    functions' files and bytecode, this file, and the numba, numpy and Python versions. Not where the
    checkout is: a file of the package is named by its path inside it and the bytecode without its file
    name, so two clones of the same code share their kernels (a fresh clone compiled every chain again,
    10-60 s each)."""
    import numba

    h = hashlib.sha256()
    h.update(f"{numba.__version__}|{sys.version}|{np.__version__}|".encode())
    files = {Path(__file__).resolve()}
    # An Expr is in the generated source itself (hashed below); a function by its file.
    fns: list[Callable[..., Any]] = [tr.rate for tr in st.transitions if not isinstance(tr.rate, Expr)]
    fns += [tr.jump for tr in st.transitions if callable(tr.jump)]
    fns += [pool.runnable for pool in st.pools if not isinstance(pool.runnable, Expr)]
    for fn in fns:
        code = getattr(fn, "__code__", None)
        if getattr(fn, "__closure__", None) or code is None:
            return None
        try:
            src = inspect.getsourcefile(fn)
        except TypeError:
            return None
        if src is None or not os.path.isfile(src):
            return None
        files.add(Path(src).resolve())
        h.update(f"{fn.__module__}.{fn.__qualname__}|".encode())
        # The code this process runs, too: its file may have been edited since it was imported.
        h.update(marshal.dumps(_without_file_names(code)))
    for f in sorted(files, key=_where):
        h.update(_where(f).encode())
        h.update(f.read_bytes())
    h.update(source.encode())
    return h.hexdigest()[:24]


def compile_structure(st: ModelStructure) -> Kernel:
    """The numba kernel generated from ``st`` (once per process and structure).

    The generated module is written to the kernel cache directory (see :func:`cache_dir`) under a name
    that hashes its source and the source files of the model's φ and jump functions, and compiled with
    numba's ``cache=True``: a later process (a pool worker, the next CLI call) loads the machine code
    instead of compiling it again (≈ 10 s). Without a usable cache directory it is compiled in memory.
    """
    with _LOCK:
        cached = _KERNELS.get(id(st))
        if cached is not None and cached[0] is st:
            return cached[1]
        kernel = _compile(st)
        _KERNELS[id(st)] = (st, kernel)
        return kernel


def _compile(st: ModelStructure) -> Kernel:
    import numba
    from numba.extending import register_jitable

    for fn in _HELPERS:
        if id(fn) not in _REGISTERED:
            register_jitable(fn)
            _REGISTERED.add(id(fn))
    source = _generate_source(st)
    directory = cache_dir()
    key = _cache_key(st, source) if directory is not None else None
    safe = re.sub(r"[^A-Za-z0-9_]", "_", st.name)
    path: Path | None = None
    modname = f"demuxlab_ctmc_kernel_{safe}_{id(st):x}"
    if directory is not None and key is not None:
        path = directory / f"kernel_{safe}_{key}.py"
        modname = f"demuxlab_ctmc_kernel_{safe}_{key}"
        try:
            write_text_if_changed(path, source)
        except OSError:
            path = None
    module = types.ModuleType(modname)
    module.__dict__["np"] = np
    module.__dict__["H"] = numba.njit(H)
    module.__dict__["share"] = numba.njit(share)
    module.__dict__["held"] = numba.njit(held)
    module.__dict__["cmin"] = cmin  # registered as jitable above, as safe_div
    module.__dict__["safe_div"] = safe_div
    for p, pool in enumerate(st.pools):
        if not isinstance(pool.runnable, Expr):
            module.__dict__[f"run_{p}"] = numba.njit(pool.runnable)
    # φ and the jumps are plain calls: LLVM inlines them (numba's IR-level inlining is no faster and
    # doubles the compile time). An Expr's φ is defined in the generated source itself.
    for k, tr in enumerate(st.transitions):
        if not isinstance(tr.rate, Expr):
            module.__dict__[f"phi_{k}"] = numba.njit(tr.rate)
        if callable(tr.jump):
            module.__dict__[f"jump_{k}"] = numba.njit(tr.jump)
    filename = str(path) if path is not None else f"<demuxlab.ctmc kernel {st.name}>"
    module.__file__ = filename
    exec(compile(source, filename, "exec"), module.__dict__)
    if path is not None:
        # numba's cache rebuilds a compiled function's environment by importing its module by name.
        sys.modules[modname] = module
    names = [n for n, v in list(module.__dict__.items()) if isinstance(v, types.FunctionType)]
    names = [n for n in names if getattr(module.__dict__[n], "__module__", None) == modname]
    for n in names:
        fn = module.__dict__[n]
        try:
            module.__dict__[n] = numba.njit(cache=path is not None)(fn)
        except RuntimeError:  # no cache locator for the file after all
            module.__dict__[n] = numba.njit(fn)
    g = module.__dict__
    return Kernel(
        all_rates=g["_gen_all_rates"],
        apply_jump=g["_gen_apply_jump"],
        ssa_run=g["_ssa_run"],
        drift=g["_drift"],
        fluid_run=g["_fluid_run"],
        n_species=len(st.species),
        n_transitions=len(st.transitions),
        source_path=str(path) if path is not None else None,
    )

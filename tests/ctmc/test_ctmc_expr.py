"""Declarative rates (engine.Expr and the constructors of engine and parts): what each expression means,
that the compiled kernel computes exactly what it says, and that the dependency analysis reads from it
exactly the populations a rate depends on, for every chain."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from demuxlab.ctmc import hsha, lf, proactor, reactor, tpc, uring, uring_shared
from demuxlab.ctmc.engine import (
    CORES,
    KZ,
    LOAD,
    RATE_NAMES,
    RE,
    RL,
    RN,
    RZ,
    Expr,
    H,
    ModelStructure,
    _cache_key,
    _generate_source,
    absent,
    compile_structure,
    dependencies,
    mass,
    present,
    total,
)
from demuxlab.ctmc.parts import (
    awake,
    cached,
    closed_client,
    contended,
    notifier_call,
    paired,
    paper_notifier,
    ring_batch,
)
from demuxlab.ctmc.rates import build
from demuxlab.errors import DemuxlabError

STRUCTURES: tuple[ModelStructure, ...] = (
    hsha.STRUCTURE,
    hsha.FULL,
    lf.STRUCTURE,
    lf.FULL,
    reactor.STRUCTURE,
    tpc.STRUCTURE,
    proactor.STRUCTURE,
    uring.STRUCTURE,
    uring_shared.STRUCTURE,
    hsha.SCHEDULED,
    proactor.SCHEDULED,
    uring_shared.SCHEDULED,
)


def _random_rates(rng: np.random.Generator) -> np.ndarray:
    r = rng.random(len(RATE_NAMES)) * 5.0 + 1e-3
    r[KZ] = 2.0
    return r


def test_expressions_mean_their_formulas() -> None:
    rng = np.random.default_rng(5)
    for i in range(200):
        x = rng.integers(0, 5, size=8).astype(np.float64)
        if i % 2:
            x = x * rng.random(8) * (30.0 if i % 3 == 0 else 1.0)
        r = _random_rates(rng)
        cases: list[tuple[Expr, float]] = [
            (mass(RL, 3, 5), r[RL] * x[3] * x[5]),
            (mass(2, 1) * present(4), r[2] * x[1] * H(x[4])),
            (mass(2, 1) * present(4) * absent(5, 6), r[2] * x[1] * H(x[4]) * (1.0 - H(x[5] + x[6]))),
            (mass(2, 1) * total(3, 4), r[2] * x[1] * (x[3] + x[4])),
            (mass(2, 1) * (present(3) * absent(4)), r[2] * x[1] * (H(x[3]) * (1.0 - H(x[4])))),
            (total(awake(0, 1, 2), 3, 4), x[0] * H(x[1] + x[2]) + x[3] + x[4]),
            (total(0, total(1, 2)), x[0] + (x[1] + x[2])),
            (closed_client(6), r[RZ] * min(x[6], r[KZ])),
            (paired(4, 2, 3), r[4] * min(x[2], x[3])),
            (
                contended(RL, (0, 1), (0, 2)) * present(0, 2),
                _div(r[RL] * x[0] * x[1], x[0] + x[2]) * H(x[0] + x[2]),
            ),
            (paper_notifier(2), _div(r[RE], x[2])),
            (
                mass(notifier_call(cached(1)), 0) * present(1),
                _div(1.0, 1.0 / r[RN] + min(x[1], 64.0) / r[RE]) * x[0] * H(x[1]),
            ),
            (notifier_call(total(1, 2)), _div(1.0, 1.0 / r[RN] + (x[1] + x[2]) / r[RE])),
            (ring_batch((5, 4), 1), min(x[5] + x[4], 64.0) + min(x[1], 64.0 - min(x[5] + x[4], 64.0))),
        ]
        for e, want in cases:
            assert e(x, r) == want, (e.text, x)


def _div(a: float, b: float) -> float:
    return a / b if b > 0.0 else 0.0


def test_products_keep_their_order_and_grouping() -> None:
    # The text is what the kernel compiles: a chain of factors left to right, a grouped product grouped.
    assert str(mass(3, 2) * present(1) * absent(4)) == "r[3] * x[2] * H(x[1]) * (1.0 - H(x[4]))"
    assert str(mass(3, 2) * (present(1) * present(4))) == "r[3] * x[2] * (H(x[1]) * H(x[4]))"
    assert str(total(1, 2) * mass(0, 3)) == "(x[1] + x[2]) * (r[0] * x[3])"
    assert (
        str(mass(notifier_call(total(1, 2)), 0)) == "safe_div(1.0, 1.0 / r[9] + (x[1] + x[2]) / r[7]) * x[0]"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [("x[0] + y", "unknown name 'y'"), ("x[", "rate expression"), ("__import__('os')", "unknown name")],
)
def test_a_bad_expression_is_refused(text: str, message: str) -> None:
    with pytest.raises(DemuxlabError, match=message):
        Expr(text)


def test_a_model_instance_still_pickles() -> None:
    m = build("hsha", 3, 10.0, 4)
    back = pickle.loads(pickle.dumps(m))
    assert back.structure == m.structure
    x = m.initial
    np.testing.assert_array_equal(back.structure.rates(x, m.r), m.structure.rates(x, m.r))


def test_a_state_names_its_populations() -> None:
    x = tpc.STRUCTURE.state(k1=3, c0=1)
    assert x.tolist() == [1.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    with pytest.raises(DemuxlabError, match="unknown population 'k9'"):
        tpc.STRUCTURE.state(k9=1)


@pytest.mark.parametrize("st", STRUCTURES, ids=lambda s: s.name)
def test_every_rate_is_declarative_and_the_kernel_computes_it(st: ModelStructure) -> None:
    assert all(isinstance(tr.rate, Expr) for tr in st.transitions)
    assert all(isinstance(p.runnable, Expr) for p in st.pools)
    source = _generate_source(st)
    for k, tr in enumerate(st.transitions):
        assert f"def phi_{k}(x, r):\n    return float({tr.rate})\n" in source
    kernel = compile_structure(st)
    rng = np.random.default_rng(9)
    a = np.empty(len(st.transitions))
    for i in range(400):
        x = rng.integers(0, 5, size=len(st.species)).astype(np.float64)
        if i % 2:
            x = x * rng.random(len(st.species)) * (40.0 if i % 3 == 0 else 1.0)
        r = _random_rates(rng)
        r[CORES], r[LOAD] = (1e9, 0.0) if i % 4 == 0 else (1.0 + i % 3, 0.5 * (i % 4))
        kernel.all_rates(x, r, a)
        f = st.factors(x, r)
        want = [
            tr.rate(x, r) * (1.0 if st.pool_index(k) is None else f[st.pool_index(k)])
            for k, tr in enumerate(st.transitions)
        ]
        np.testing.assert_array_equal(a, want)


def _depends_on(fn: Expr, n: int, rng: np.random.Generator, wide: Sequence[int] = ()) -> frozenset[int]:
    """The populations whose change changes ``fn`` on some of a few hundred random states: each one
    raised by 1, and set to 0. The populations ``wide`` (a run-to-block pool's holders) are drawn from 0–40
    on every other state (a release fires only where they exceed the runnable threads), else from 0–1 (a
    grant only where cores are free)."""
    found: set[int] = set()
    for j in range(600 if wide else 300):
        x = rng.integers(0, 5, size=n).astype(np.float64)
        for i in wide:
            x[i] = float(rng.integers(0, 41 if j % 2 else 2))
        r = _random_rates(rng)
        base = fn(x, r)
        for i in set(range(n)) - found:
            for v in (x[i] + 1.0, 0.0):
                y = x.copy()
                y[i] = v
                if fn(y, r) != base:
                    found.add(i)
                    break
    return frozenset(found)


@pytest.mark.parametrize("st", STRUCTURES, ids=lambda s: s.name)
def test_dependencies_are_the_populations_each_rate_reads(st: ModelStructure) -> None:
    # What the SSA recomputes after a jump comes from the expressions' text: it must be exactly the set of
    # populations the rate depends on (more costs time, fewer gives wrong paths).
    deps = dependencies(st)
    rng = np.random.default_rng(11)
    n = len(st.species)
    holders = [p.holders for p in st.pools if p.holders is not None]
    for k, tr in enumerate(st.transitions):
        assert isinstance(tr.rate, Expr)
        assert deps.reads[k] == _depends_on(tr.rate, n, rng, holders), tr.name
    for p, pool in enumerate(st.pools):
        assert isinstance(pool.runnable, Expr)
        held = (
            {pool.holders} if pool.holders is not None else set()
        )  # a run-to-block pool's factor reads them
        assert deps.pool_reads[p] == _depends_on(pool.runnable, n, rng) | held, pool.name


def test_the_kernel_cache_key_follows_the_expressions() -> None:
    st = tpc.STRUCTURE
    key = _cache_key(st, _generate_source(st))
    assert key is not None  # declarative rates do not turn the disk cache off
    trs = list(st.transitions)
    trs[2] = replace(trs[2], rate=mass(RL, tpc.K3))  # another rate constant, all else the same
    other = replace(st, transitions=tuple(trs))
    assert _cache_key(other, _generate_source(other)) not in (None, key)


def test_every_state_dependent_jump_is_analysed() -> None:
    """The populations each jump function writes are read from its source (checked against its bytecode):
    none of the chains' falls back to "every population", which would recompute every rate after it."""
    from demuxlab.ctmc.rates import PATTERNS, structures

    for pattern in PATTERNS:
        for st in structures(pattern):
            deps = dependencies(st)
            unread = [st.transitions[k].name for k, c in enumerate(deps.changes) if c is None]
            assert unread == [], (st.name, unread)


def test_syntax_trees_are_safe_from_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython 3.11 counts the ast module's recursion depth once per interpreter: two threads parsing at
    once could fail with "AST constructor recursion depth mismatch" (the dashboard's callbacks did, in CI).
    The engine's parses hold one lock, so its own threads agree with one another; one raced by a thread
    outside it is made again, a few times at most, and any other SystemError is not hidden."""
    import ast
    import threading

    from demuxlab.ctmc import engine
    from demuxlab.ctmc.rates import PATTERNS, structures

    chains = [st for p in PATTERNS for st in structures(p)]
    want = [engine.parameters_read(st) for st in chains]
    got: list[list[frozenset[int] | None]] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(5):
                got.append([engine.parameters_read(st) for st in chains])
        except BaseException as exc:  # reported below, with the thread's own error
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 40 and all(g == want for g in got)

    parse = ast.parse
    raced = {"left": 2}

    def racing(*args: object, **kwargs: object) -> ast.AST:
        if raced["left"]:
            raced["left"] -= 1
            raise SystemError("AST constructor recursion depth mismatch (before=72, after=60)")
        return parse(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ast, "parse", racing)
    assert isinstance(engine.parse_expr("r[0] * x[1]").body, ast.BinOp) and raced["left"] == 0
    raced["left"] = engine.AST_TRIES
    with pytest.raises(SystemError, match="recursion depth mismatch"):
        engine.parse_expr("x[0]")
    monkeypatch.setattr(ast, "parse", lambda *a, **k: (_ for _ in ()).throw(SystemError("other")))
    with pytest.raises(SystemError, match="other"):
        engine.parse_module("y = 1")

"""Model definitions: compiled kernel vs the Python definition, invariants, well-definedness."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demuxlab.ctmc import hsha, lf
from demuxlab.ctmc.engine import ModelStructure, compile_structure
from demuxlab.ctmc.exact import explore
from demuxlab.ctmc.rates import build, paper_rates
from demuxlab.ctmc.ssa import reference_path
from demuxlab.errors import DemuxlabError

STRUCTURES = {"hsha": hsha.STRUCTURE, "lf": lf.STRUCTURE}


def _random_states(st: ModelStructure, rng: np.random.Generator, n: int, real: bool) -> list[np.ndarray]:
    out = []
    for _ in range(n):
        x = rng.integers(0, 4, size=len(st.species)).astype(np.float64)
        if real:
            x = x * rng.random(len(st.species))
        out.append(x)
    return out


@pytest.mark.parametrize("pattern", ["hsha", "lf"])
@pytest.mark.parametrize("real", [False, True])
def test_compiled_kernel_agrees_with_definition(pattern: str, real: bool) -> None:
    st = STRUCTURES[pattern]
    kernel = compile_structure(st)
    r = paper_rates(pattern).vector(10.0)
    rng = np.random.default_rng(7)
    a = np.empty(len(st.transitions))
    d = np.empty(len(st.species))
    drift = np.empty(len(st.species))
    for x in _random_states(st, rng, 300, real):
        kernel.all_rates(x, r, a)
        np.testing.assert_allclose(a, st.rates(x, r), rtol=1e-12, atol=0)
        for k in range(len(st.transitions)):
            kernel.apply_jump(k, x, d)
            np.testing.assert_array_equal(d, st.delta(k, x))
        kernel.drift(x, r, 1e-2, drift)
        np.testing.assert_allclose(drift, st.drift(x, r, 1e-2), rtol=1e-10, atol=1e-12)


def _invariants(pattern: str, x: np.ndarray, threads: int, conns: int) -> None:
    st = STRUCTURES[pattern]
    v = dict(zip(st.species, x, strict=True))
    assert (x >= 0).all(), f"negative population in {v}"
    assert sum(v[f"c{i}"] for i in range(1, 5)) == conns
    assert v["s1"] + v["s2"] == 1
    if pattern == "hsha":
        assert sum(v[f"m{i}"] for i in range(1, 7)) == 1
        assert sum(v[f"t{i}"] for i in range(1, 10)) == threads - 1
        assert v["q1"] + v["q2"] == conns and v["b1"] + v["b2"] == 1
        # the epoll lock is held by exactly the monitor in m2/m3 or one worker in t6/t7
        assert v["s2"] == v["m2"] + v["m3"] + v["t6"] + v["t7"] <= 1
        assert v["b2"] == v["m5"] + v["m6"] + v["t2"] + v["t3"] <= 1
    else:
        assert sum(v[f"t{i}"] for i in range(1, 12)) == threads
        assert v["l1"] + v["l2"] == 1
        assert v["s2"] == v["t3"] + v["t4"] + v["t8"] + v["t9"] <= 1
        assert v["l2"] == v["t2"] + v["t3"] + v["t4"] + v["t5"] <= 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=st.sampled_from(["hsha", "lf"]),
    threads=st.integers(2, 6),
    conns=st.integers(1, 12),
    work=st.sampled_from([0.5, 10.0, 50.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_invariants_along_reference_paths(
    pattern: str, threads: int, conns: int, work: float, seed: int
) -> None:
    m = build(pattern, threads, work, conns)
    for x in reference_path(m, 300, seed):
        _invariants(pattern, x, threads, conns)


@settings(max_examples=10, deadline=None)
@given(pattern=st.sampled_from(["hsha", "lf"]), threads=st.integers(2, 8), seed=st.integers(0, 2**31))
def test_invariants_after_compiled_simulation(pattern: str, threads: int, seed: int) -> None:
    m = build(pattern, threads, 10.0, 64)
    kernel = compile_structure(m.structure)
    x = m.initial.copy()
    rng = np.random.Generator(np.random.PCG64(seed))
    for _ in range(20):
        _, _, status = kernel.ssa_run(x, m.r, m.structure.throughput_index, 1, 5.0, 10**6, rng)
        assert status == 0
        _invariants(pattern, x, threads, 64)


@pytest.mark.parametrize(
    ("pattern", "threads", "conns"), [("hsha", 2, 3), ("hsha", 3, 4), ("lf", 1, 3), ("lf", 3, 4)]
)
def test_state_space_has_no_absorbing_state(pattern: str, threads: int, conns: int) -> None:
    # explore() raises on an absorbing state or a jump leaving the non-negative lattice.
    states, q = explore(build(pattern, threads, 10.0, conns))
    assert len(states) > 10
    for s in states:
        _invariants(pattern, np.array(s, dtype=np.float64), threads, conns)
    assert q.shape == (len(states), len(states))


def test_printed_hsha_phi1_without_guard_is_absorbing() -> None:
    """Why deviation 3 exists: without H(x_c1) in φ1 the chain reaches an absorbing state."""
    from dataclasses import replace

    from demuxlab.ctmc.engine import H, safe_div

    def phi1_printed(x: np.ndarray, r: np.ndarray) -> float:
        return float(
            safe_div(r[0] * x[hsha.M1] * x[hsha.S1], x[hsha.M1] + x[hsha.T5]) * H(x[hsha.M1] + x[hsha.T5])
        )

    trs = list(hsha.STRUCTURE.transitions)
    trs[0] = replace(trs[0], rate=phi1_printed)
    printed = replace(hsha.STRUCTURE, name="hsha-printed-phi1", transitions=tuple(trs))
    m = build("hsha", 3, 10.0, 2)
    m = replace(m, structure=printed)
    with pytest.raises(DemuxlabError, match="absorbing state"):
        explore(m)


def test_build_rejects_bad_input() -> None:
    with pytest.raises(DemuxlabError, match="threads"):
        build("hsha", 1, 10.0)
    with pytest.raises(DemuxlabError, match="pattern"):
        build("reactor", 2, 10.0)
    with pytest.raises(DemuxlabError, match="work_us"):
        build("lf", 2, 0.0)

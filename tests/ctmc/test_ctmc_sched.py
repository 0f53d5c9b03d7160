"""Run to block (demuxlab.ctmc.sched): which chain a prediction uses, how the cores move, and what it changes
against processor sharing. The scheduled chains against their exact solutions and the kernels against their
definitions are in test_ctmc_solvers.py, test_ctmc_models.py and test_ctmc_expr.py with every chain."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from demuxlab.ctmc import hsha, proactor
from demuxlab.ctmc.engine import CORES, held
from demuxlab.ctmc.exact import explore
from demuxlab.ctmc.rates import SCHEDULED, Host, Rates, build, paper_rates, structures
from demuxlab.ctmc.sched import Role, scheduled
from demuxlab.ctmc.ssa import simulate
from demuxlab.errors import DemuxlabError


def measured(pattern: str, r_w: float | None) -> Rates:
    """Calibrated-looking rates (α, untimed CPU, a client), with the scheduler's wake-up r_w if given."""
    rates = replace(paper_rates(pattern), r_n=1 / 6.0, r_x=1 / 2.0, r_z=1 / 8.0, r_i=1 / 1.0, r_o=1 / 5.0)
    return rates if r_w is None else replace(rates, r_w=r_w)


def test_held_spreads_the_cores_over_the_runnable_threads() -> None:
    assert held(1.0, 4.0) == 0.25
    assert held(3.0, 2.0) == 1.0  # more holders than runnable threads: one blocked, its core not yet back
    assert held(0.0, 2.0) == 0.0
    assert held(1.0, 0.0) == 0.0


def test_a_prediction_schedules_only_more_threads_than_cores_with_a_measured_wake_up() -> None:
    on_one = Host(cores=1, client_threads=2, client_cores=1)
    assert build("hsha", 3, 0.0, 16, measured("hsha", 1 / 8.0), host=on_one).structure is hsha.SCHEDULED
    assert build("hsha", 3, 0.0, 16, measured("hsha", 1 / 8.0), host=Host(cores=3)).structure is hsha.FULL
    # The wake-up not measured (the paper's rates, or a calibration with a core per thread): sharing.
    assert build("hsha", 3, 0.0, 16, measured("hsha", None), host=on_one).structure is hsha.FULL
    assert build("hsha", 3, 0.0, 16, host=Host(cores=1)).structure is hsha.STRUCTURE
    m = build("proactor", 4, 0.0, 16, measured("proactor", 1 / 8.0), host=Host(cores=2))
    assert m.structure is proactor.SCHEDULED
    # the chain's own start, no core held yet
    np.testing.assert_array_equal(m.initial[: len(proactor.STRUCTURE.species)], proactor.initial_state(4, 16))
    assert m.initial[len(proactor.STRUCTURE.species) :].tolist() == [0.0, 0.0]
    # compiled ahead with the pattern's other chains (predict_many's warm-up)
    for pattern, chain in SCHEDULED.items():
        assert chain in structures(pattern)


@pytest.mark.parametrize("cores", [1, 2])
def test_cores_are_never_held_twice(cores: int) -> None:
    """On every reachable state: no more holders than cores; a grant only where a core is free; and a role
    with more holders than runnable threads (one of them blocked) gives a core back."""
    m = build("hsha", 4, 5.0, 3, measured("hsha", 1 / 5.0), host=Host(cores=cores, client_threads=1))
    st = m.structure
    states, _ = explore(m)
    assert len(states) > 100
    for s in states:
        x = np.array(s, dtype=np.float64)
        held_now = sum(x[p.holders] for p in st.pools if p.holders is not None)
        assert held_now <= cores
        a = st.rates(x, m.r)
        for pool in st.pools:
            assert pool.holders is not None
            grant = a[st.transition_index(f"grant:{pool.name}")]
            release = a[st.transition_index(f"release:{pool.name}")]
            assert grant == 0.0 or held_now < cores
            assert (release > 0.0) == (x[pool.holders] > pool.runnable(x, m.r))


def test_run_to_block_batches_what_sharing_does_not() -> None:
    """On one core with 3 workers, a monitor that waits for a busy core finds bigger batches the longer its
    wake-up, and with a slow one far fewer notifier calls per message than under processor sharing (a
    quick one takes the core whenever it wants it, and may call more often than its 1/4 share lets it)."""
    host = Host(cores=1, client_threads=2, client_cores=1)

    def calls_per_message(r_w: float | None) -> float:
        m = build("hsha", 4, 0.0, 128, measured("hsha", r_w), host=host)
        msgs = simulate(m, rel_ci=0.02, seed=3)
        calls = simulate(m, rel_ci=0.02, seed=3, transition="phi2")
        return calls.throughput_per_us / msgs.throughput_per_us

    shared, quick, slow = calls_per_message(None), calls_per_message(1 / 2.0), calls_per_message(1 / 50.0)
    assert slow < 0.5 * quick
    assert slow < 0.6 * shared


def test_the_dispatchers_wait_is_observed_and_follows_its_wake_up() -> None:
    """The simulation's per-pool averages: the threads on a CPU never exceed the cores, and the monitor
    waits longer for one the slower its wake-up (r_w)."""
    host = Host(cores=1, client_threads=2, client_cores=1)
    waits = []
    for r_w in (1 / 2.0, 1 / 20.0):
        s = simulate(build("hsha", 3, 0.0, 64, measured("hsha", r_w), host=host), rel_ci=0.02, seed=5)
        assert len(s.pool_running) == 2 and sum(s.pool_running) <= 1.0 + 1e-9
        assert all(0.0 <= s.waiting(p) <= s.pool_runnable[p] for p in range(2))
        waits.append(s.waiting(0))
    assert waits[1] > waits[0]
    shared = simulate(build("hsha", 3, 0.0, 64, measured("hsha", None), host=host), rel_ci=0.02, seed=5)
    assert shared.pool_running[0] <= 1.0  # processor sharing reports its pool too (its share in cores)
    assert shared.waiting(0) >= 0.0


def test_only_the_dispatcher_preempts_and_is_not_preempted_back() -> None:
    """The dispatching role (the first) is the only one with wake transitions; at two threads on one core its
    wait per call is then at most its wake-up (1/r_w where the core is busy, a grant where it is free). With
    every role preempting, the handler it preempted took the core straight back and the monitor waited
    10–12 µs per call for a 2–5 µs wake-up (processor sharing at a finer grain)."""
    for module in (hsha, proactor):
        dispatcher, handler = (r.name for r in module.ROLES)
        wakes = [t.name for t in module.SCHEDULED.transitions if t.name.startswith("wake:")]
        assert wakes == [f"wake:{dispatcher}:{handler}"]
    host = Host(cores=1, client_threads=2, client_cores=1)
    for wake_us in (2.0, 5.0):
        m = build("hsha", 2, 0.0, 128, measured("hsha", 1 / wake_us), host=host)
        msgs = simulate(m, rel_ci=0.02, seed=3)
        calls = simulate(m, rel_ci=0.02, seed=3, transition="alpha")
        per_call = msgs.waiting(0) / calls.throughput_per_us
        assert 0.5 * wake_us < per_call < 1.05 * wake_us


def test_roles_must_cover_the_server_steps_once() -> None:
    m1, m2 = hsha.ROLES
    with pytest.raises(DemuxlabError, match="two roles or more"):
        scheduled(hsha.FULL, (m1,))
    with pytest.raises(DemuxlabError, match="step phi7 of pool server is in no role"):
        scheduled(hsha.FULL, (m1, replace(m2, steps=m2.steps[1:])))
    with pytest.raises(DemuxlabError, match="step phi6 is in roles monitor and worker"):
        scheduled(hsha.FULL, (m1, replace(m2, steps=(*m2.steps, "phi6"))))
    with pytest.raises(DemuxlabError, match="step client is in a role but needs no CPU"):
        scheduled(hsha.FULL, (m1, replace(m2, steps=(*m2.steps, "client"))))
    with pytest.raises(DemuxlabError, match="unknown transition 'nope'"):
        scheduled(hsha.FULL, (m1, Role("other", m2.runnable, ("nope",))))


def test_a_core_per_thread_and_load_are_not_the_schedulers() -> None:
    """The cores come from the host as for processor sharing (r[cores]); a scheduled chain's pools have
    holders and the first is the dispatching role's."""
    m = build("proactor", 3, 0.0, 8, measured("proactor", 1 / 4.0), host=Host(cores=2, client_threads=1))
    assert m.r[CORES] == 2.0
    assert [p.name for p in m.structure.pools] == ["demultiplexer", "handler"]
    assert all(p.holders is not None for p in m.structure.pools)

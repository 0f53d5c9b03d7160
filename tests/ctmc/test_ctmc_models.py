"""Model definitions, every chain: compiled kernel vs the Python definition, invariants, well-definedness."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demuxlab.ctmc import hsha, lf, proactor, reactor, tpc, uring, uring_shared
from demuxlab.ctmc.engine import (
    CORES,
    KZ,
    LOAD,
    RATE_NAMES,
    RN,
    RZ,
    Expr,
    ModelInstance,
    ModelStructure,
    compile_structure,
)
from demuxlab.ctmc.exact import explore
from demuxlab.ctmc.rates import Host, Rates, build, paper_rates
from demuxlab.ctmc.ssa import reference_path
from demuxlab.errors import DemuxlabError

# Every chain, by a name, with a small instance builder's pattern and whether it is a full chain.
CHAINS: dict[str, tuple[ModelStructure, str, bool]] = {
    "hsha": (hsha.STRUCTURE, "hsha", False),
    "hsha-full": (hsha.FULL, "hsha", True),
    "lf": (lf.STRUCTURE, "lf", False),
    "lf-full": (lf.FULL, "lf", True),
    "reactor": (reactor.STRUCTURE, "reactor", True),
    "tpc": (tpc.STRUCTURE, "tpc", True),
    "proactor": (proactor.STRUCTURE, "proactor", True),
    "uring": (uring.STRUCTURE, "uring", True),
    "uring-shared": (uring_shared.STRUCTURE, "uring-shared", True),
    # On fewer cores than threads, with the scheduler's wake-up measured: run to block (sched.py).
    "hsha-scheduled": (hsha.SCHEDULED, "hsha", True),
    "proactor-scheduled": (proactor.SCHEDULED, "proactor", True),
    "uring-shared-scheduled": (uring_shared.SCHEDULED, "uring-shared", True),
}
SCHEDULED_CHAINS = [name for name in CHAINS if name.endswith("-scheduled")]

# Conserved populations per chain: (species, …) whose sum never changes.
CONSERVED: dict[str, tuple[tuple[str, ...], ...]] = {
    "hsha": (
        ("c1", "c2", "c3", "c4"),
        tuple(f"m{i}" for i in range(1, 7)),
        tuple(f"t{i}" for i in range(1, 10)),
        ("q1", "q2"),
        ("s1", "s2"),
        ("b1", "b2"),
    ),
    "hsha-full": (
        ("c0", "c1", "c2", "c3", "c4"),
        tuple(f"m{i}" for i in range(0, 7)),
        (*(f"t{i}" for i in range(1, 11)), "tw"),
        ("q1", "q2"),
        ("s1", "s2"),
        ("b1", "b2"),
    ),
    "lf": (("c1", "c2", "c3", "c4"), tuple(f"t{i}" for i in range(1, 12)), ("s1", "s2"), ("l1", "l2")),
    "lf-full": (
        ("c0", "c1", "c2", "c3", "c4"),
        (*(f"t{i}" for i in range(1, 13)), "tw"),
        ("s1", "s2"),
        ("l1", "l2"),
    ),
    "reactor": (("c0", "c1", "c2", "c3"), (*(f"a{i}" for i in range(1, 8)), "tw")),
    "tpc": (("c0", "k1", "k2", "k3", "k4", "tw"),),
    "proactor": (
        ("c0", "c1", "c2", "c3"),
        tuple(f"m{i}" for i in range(0, 8)),
        (*(f"t{i}" for i in range(1, 10)), "tw"),
        ("q1", "q2"),
        ("s1", "s2"),
        ("b1", "b2"),
    ),
    "uring": (("c0", "u1", "u2", "u3", "u4"), ("g1", "g2", "g3", "g4")),
    "uring-shared": (
        ("c0", "u1", "u2", "u3"),
        ("w1", "w2", "w3", "w4", "w5"),
        ("h1", "h2", "h3", "h4", "h5"),
        ("q1", "q2"),
        ("s1", "s2", "s3"),
    ),
}
# The same threads and locks as the chain they schedule; the cores' holders are not conserved.
CONSERVED["hsha-scheduled"] = CONSERVED["hsha-full"]
CONSERVED["proactor-scheduled"] = CONSERVED["proactor"]
CONSERVED["uring-shared-scheduled"] = CONSERVED["uring-shared"]


def _instance(
    name: str, threads: int, conns: int, work: float = 10.0, cores: int | None = None
) -> ModelInstance:
    """A small instance of chain ``name`` (full chains with a client of one thread and some overhead; a
    scheduled chain on fewer cores than threads, ``cores`` or one less than the threads)."""
    st_, pattern, full = CHAINS[name]
    if pattern in ("reactor", "uring"):
        threads = 1
    elif pattern == "hsha" or pattern == "proactor" or pattern == "uring-shared":
        threads = max(threads, 2)
    rates = paper_rates(pattern)
    if name in SCHEDULED_CHAINS and (cores is None or cores >= threads):
        cores = threads - 1
    host = Host(cores=cores)
    if full:
        # r_k: HSHA's and the proactor's re-arms kick their waiting dispatcher (the others have no kick).
        # r_v, r_u: the clients wake their dispatcher and are woken by a send (tpc's: woken only).
        rates = replace(rates, r_n=1 / 0.7, r_x=1 / 1.3, r_z=1 / 4.0, r_k=1 / 2.0, r_v=1 / 8.0, r_u=1 / 5.0)
        host = Host(cores=cores, client_threads=1)
    if name in SCHEDULED_CHAINS:
        rates = replace(rates, r_w=1 / 3.0)
    m = build(pattern, threads, work, conns, rates, host=host)
    assert m.structure is st_
    return m


def _invariants(name: str, x: np.ndarray, start: np.ndarray, cores: float | None = None) -> None:
    st_ = CHAINS[name][0]
    v = dict(zip(st_.species, x, strict=True))
    v0 = dict(zip(st_.species, start, strict=True))
    assert (x >= 0).all(), f"negative population in {v}"
    if name in SCHEDULED_CHAINS:
        # Cores are held by at most as many threads as there are cores, and by threads that exist.
        held = sum(v[s] for s in st_.species if s.startswith("cpu_"))
        assert cores is not None and held <= cores, (held, cores)
    for group in CONSERVED[name]:
        assert sum(v[s] for s in group) == sum(v0[s] for s in group), group
    if "k" in v:
        assert v["k"] in (0.0, 1.0)  # a kick is pending or not: the eventfd is written once per call
    if "zc" in v:
        assert v["zc"] in (0.0, 1.0)  # the client is being woken or not: one wake-up per sleep
        # … by a response it holds (tpc's: or one its thread is still sending, tw, which holds the connection)
        assert v["zc"] <= v["c0"] + (v["tw"] if name == "tpc" else 0.0)
    if name.startswith("hsha"):
        # the epoll lock is held by exactly the monitor in m2/m3 or one worker in t6/t7
        assert v["s2"] == v["m2"] + v["m3"] + v["t6"] + v["t7"] <= 1
        assert v["b2"] == v["m5"] + v["m6"] + v["t2"] + v["t3"] <= 1
    elif name.startswith("lf"):
        assert v["s2"] == v["t3"] + v["t4"] + v["t8"] + v["t9"] <= 1
        assert v["l2"] == v["t2"] + v["t3"] + v["t4"] + v["t5"] <= 1
    elif name.startswith("proactor"):
        assert v["s2"] == v["m2"] + v["m3"] + v["t7"] + v["t8"] <= 1
        assert v["b2"] == v["m6"] + v["m7"] + v["t2"] + v["t3"] <= 1
        assert v["q2"] + v["m5"] + v["m6"] + v["t3"] + v["t4"] + v["t5"] == v["c3"]
    elif name == "uring":
        assert v["e1"] + v["e2"] <= sum(v0[s] for s in CONSERVED[name][0])
    elif name.startswith("uring-shared"):
        assert v["q2"] + v["w3"] + v["h2"] + v["h5"] + v["h3"] == v["u3"]
        # the submission lock is held by the completion thread re-submitting (w4) or one handler submitting
        # (h3), or is being handed to a sleeping waiter (s3), who is then still waiting
        assert v["s2"] == v["w4"] + v["h3"] <= 1
        assert v["s3"] <= v["w5"] + v["h5"]


def _random_states(st_: ModelStructure, rng: np.random.Generator, n: int, real: bool) -> list[np.ndarray]:
    out = []
    for _ in range(n):
        x = rng.integers(0, 4, size=len(st_.species)).astype(np.float64)
        if real:
            x = x * rng.random(len(st_.species))
        out.append(x)
    return out


@pytest.mark.parametrize("name", list(CHAINS))
@pytest.mark.parametrize("real", [False, True])
def test_compiled_kernel_agrees_with_definition(name: str, real: bool) -> None:
    st_ = CHAINS[name][0]
    kernel = compile_structure(st_)
    rng = np.random.default_rng(7)
    a = np.empty(len(st_.transitions))
    d = np.empty(len(st_.species))
    drift = np.empty(len(st_.species))
    for i, x in enumerate(_random_states(st_, rng, 300, real)):
        r = paper_rates(CHAINS[name][1]).vector(10.0)
        r[RZ], r[KZ] = 0.25, 2.0
        if i % 2:  # every other state with shared cores: the pool factor is below 1 there
            r[CORES], r[LOAD] = 1.0 + (i % 3), 0.5 * (i % 4)
        kernel.all_rates(x, r, a)
        np.testing.assert_allclose(a, st_.rates(x, r), rtol=1e-12, atol=0)
        for k in range(len(st_.transitions)):
            kernel.apply_jump(k, x, d)
            np.testing.assert_array_equal(d, st_.delta(k, x))
        kernel.drift(x, r, 1e-2, drift)
        np.testing.assert_allclose(drift, st_.drift(x, r, 1e-2), rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(list(CHAINS)),
    threads=st.integers(1, 6),
    conns=st.integers(1, 12),
    work=st.sampled_from([0.0, 0.5, 10.0, 50.0]),
    cores=st.sampled_from([None, 1, 2]),
    seed=st.integers(0, 2**32 - 1),
)
def test_invariants_along_reference_paths(
    name: str, threads: int, conns: int, work: float, cores: int | None, seed: int
) -> None:
    m = _instance(name, threads, conns, work, cores)
    for x in reference_path(m, 300, seed):
        _invariants(name, x, m.initial, m.r[CORES])


@settings(max_examples=18, deadline=None)
@given(
    name=st.sampled_from(list(CHAINS)),
    threads=st.integers(2, 8),
    cores=st.sampled_from([None, 1, 3]),
    seed=st.integers(0, 2**31),
)
def test_invariants_after_compiled_simulation(name: str, threads: int, cores: int | None, seed: int) -> None:
    m = _instance(name, threads, 64, 10.0, cores)
    kernel = compile_structure(m.structure)
    x = m.initial.copy()
    rng = np.random.Generator(np.random.PCG64(seed))
    for _ in range(20):
        _, _, status = kernel.ssa_run(x, m.r, m.structure.throughput_index, 1, 5.0, 10**6, rng, np.zeros(1))
        assert status == 0
        _invariants(name, x, m.initial, m.r[CORES])


@pytest.mark.parametrize("name", list(CHAINS))
@pytest.mark.parametrize(("threads", "conns", "cores"), [(2, 3, None), (3, 4, 1)])
def test_state_space_has_no_absorbing_state(name: str, threads: int, conns: int, cores: int | None) -> None:
    # explore() raises on an absorbing state or a jump leaving the non-negative lattice.
    m = _instance(name, threads, conns, 10.0, cores)
    states, q = explore(m)
    assert len(states) > 10
    for s in states:
        _invariants(name, np.array(s, dtype=np.float64), m.initial, m.r[CORES])
    assert q.shape == (len(states), len(states))


@pytest.mark.parametrize("name", [n for n in CHAINS if n not in SCHEDULED_CHAINS])
def test_a_core_per_thread_is_the_chain_without_sharing(name: str) -> None:
    """With a core per thread the pool's factor is 1 in every reachable state: seed 001's chains."""
    m = _instance(name, 3, 3, 10.0, cores=None)
    unshared = replace(
        m.structure,
        name=m.structure.name + "-unshared",
        pools=(),
        transitions=tuple(replace(tr, pool=None) for tr in m.structure.transitions),
    )
    states, _ = explore(m)
    for s in states:
        x = np.array(s, dtype=np.float64)
        np.testing.assert_array_equal(m.structure.rates(x, m.r), unshared.rates(x, m.r))
        assert m.structure.factors(x, m.r).tolist() == [1.0]


def test_shared_cores_slow_every_thread_alike() -> None:
    """Two runnable threads on one core each run at half speed; the client's step is not the server's."""
    m = _instance("tpc", 1, 2, 10.0, cores=1)
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0])  # one thread woken, one working
    a = m.structure.rates(x, m.r)
    assert m.structure.runnable(x, m.r) == 2.0
    assert a[m.structure.transition_index("wake")] == pytest.approx(0.5 / 1.3)
    assert a[m.structure.transition_index("work")] == pytest.approx(0.5 / 10.0)
    x = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert m.structure.rates(x, m.r)[m.structure.transition_index("client")] == pytest.approx(0.25)


def test_printed_hsha_phi1_without_guard_is_absorbing() -> None:
    """Why deviation 3 exists: without H(x_c1) in φ1 the chain reaches an absorbing state."""
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
    with pytest.raises(DemuxlabError, match="at most 1"):
        build("reactor", 2, 10.0)
    with pytest.raises(DemuxlabError, match="pattern"):
        build("nope", 2, 10.0)
    with pytest.raises(DemuxlabError, match="work_us"):
        build("lf", 2, -1.0)
    with pytest.raises(DemuxlabError, match="cores"):
        Host(cores=0)
    with pytest.raises(DemuxlabError, match="speed"):
        replace(paper_rates("lf"), speed=1.5)


def test_zero_work_is_an_instant_step() -> None:
    r = paper_rates("lf").vector(0.0)
    assert r[RATE_NAMES.index("r_c")] == 1000.0


def test_rates_round_trip_and_old_calibrations_load() -> None:
    rates = replace(paper_rates("hsha"), r_x=0.5, r_z=0.1, speed=0.8)
    assert Rates.from_dict({**rates.as_dict(), "source": rates.source}) == rates
    old = {
        k: v
        for k, v in paper_rates("lf").as_dict().items()
        if k in ("r_l", "r_p", "r_g", "r_t", "r_i", "r_o", "r_a", "r_e")
    }
    back = Rates.from_dict(old)  # stored before issue 19: the rest instant, speed 1
    assert back == paper_rates("lf") and not back.extended


def test_every_notifying_chain_names_its_notifier_call() -> None:
    """``calls`` (the calibration counts the chain's calls per message by it) is a transition of the chain
    that reads the per-call cost; a name that is not a transition is refused where the chain is made."""
    for st_ in (
        hsha.FULL,
        lf.FULL,
        reactor.STRUCTURE,
        proactor.STRUCTURE,
        uring.STRUCTURE,
        uring_shared.STRUCTURE,
    ):
        assert st_.calls is not None, st_.name
        rate = st_.transitions[st_.transition_index(st_.calls)].rate
        assert isinstance(rate, Expr) and f"r[{RN}]" in rate.text, st_.name  # it charges α = 1/r_n
    assert tpc.STRUCTURE.calls is None  # no notifier
    assert uring.STRUCTURE.events_per_message == 2 and reactor.STRUCTURE.events_per_message == 1
    with pytest.raises(DemuxlabError, match="unknown transition 'nope'"):
        replace(reactor.STRUCTURE, calls="nope")


@pytest.mark.parametrize("pattern", ["hsha", "proactor"])
def test_the_client_pays_omega_only_when_its_request_wakes_the_dispatcher(pattern: str) -> None:
    """The client's step is split where the dispatcher sleeps in its notifier (m1, nothing ready in c1):
    there it takes 1/r_z + 1/r_v, elsewhere 1/r_z; without a measured r_v the two add up to the one step."""
    rates = replace(paper_rates(pattern), r_n=1 / 0.7, r_x=1 / 1.3, r_z=1 / 4.0)
    host = Host(client_threads=1)
    for r_v, asleep_rate in ((1 / 8.0, 1 / 12.0), (None, 1 / 4.0)):
        m = build(pattern, 2, 10.0, 3, rates if r_v is None else replace(rates, r_v=r_v), host=host)
        st_ = m.structure
        sp = st_.species
        client, wake = st_.transition_index("client"), st_.transition_index("client_wake")
        asleep = m.initial.copy()
        asleep[sp.index("c1")], asleep[sp.index("c0")] = 0.0, 3.0
        a = st_.rates(asleep, m.r)
        assert a[client] == 0.0 and a[wake] == pytest.approx(asleep_rate, rel=1e-6)
        ready = asleep.copy()
        ready[sp.index("c1")], ready[sp.index("c0")] = 1.0, 2.0
        a = st_.rates(ready, m.r)
        assert a[wake] == 0.0 and a[client] == pytest.approx(1 / 4.0)
        busy = asleep.copy()  # the dispatcher is not in its notifier: nothing to wake
        busy[sp.index("m1")], busy[sp.index("m2")] = 0.0, 1.0
        a = st_.rates(busy, m.r)
        assert a[wake] == 0.0 and a[client] == pytest.approx(1 / 4.0)


@pytest.mark.parametrize(
    ("pattern", "send", "sender", "conn", "after"),
    [("hsha", "phi15", "t9", "c4", "t10"), ("proactor", "send", "t5", "c3", "t6")],
)
def test_a_send_that_finds_the_client_asleep_wakes_it(
    pattern: str, send: str, sender: str, conn: str, after: str
) -> None:
    """A response sent while the client has no message (c0 = 0: asleep) leaves the sender to wake it (tw:
    ``send_wake`` at r_s = 1/ω, the client's r_v at the server's share) and the client waking (zc = 1),
    which sends nothing, even with the response in hand, until ``client_up`` runs it after its latency
    1/r_u. A response to a client that has a message moves the sender on. Where the client's sleeps were
    not fitted (r_u instant) the wake-up takes 1 ns and the client runs at once."""
    rates = replace(paper_rates(pattern), r_n=1 / 0.7, r_x=1 / 1.3, r_z=1 / 4.0, r_v=1 / 8.0)
    sleeping = replace(rates, r_u=1 / 5.0, speed=0.5)
    host = Host(client_threads=1)
    m = build(pattern, 2, 0.0, 2, sleeping, host=host)
    st_, sp = m.structure, m.structure.species
    steps = (send, "send_wake", "client", "client_wake", "client_up")
    idx = {name: st_.transition_index(name) for name in steps}
    x = m.initial.copy()
    # one connection with the sending thread, the other in the notifier's ready list; the client has none
    x[sp.index("c1")] = 1.0
    x[sp.index(conn)] = 1.0
    x[sp.index("t1")] -= 1.0
    x[sp.index(sender)] = 1.0
    assert x[sp.index("c0")] == 0.0
    sent = x + st_.delta(idx[send], x)
    assert sent[sp.index("c0")] == 1.0 and sent[sp.index(conn)] == 0.0
    assert sent[sp.index("tw")] == 1.0 and sent[sp.index("zc")] == 1.0 and sent[sp.index(after)] == 0.0
    a = st_.rates(sent, m.r)
    assert a[idx["send_wake"]] == pytest.approx(0.5 / 8.0)  # ω at the server's share
    assert a[idx["client"]] == 0.0 and a[idx["client_wake"]] == 0.0  # waking: it sends nothing yet
    assert a[idx["client_up"]] == pytest.approx(1 / 5.0)
    woken = sent + st_.delta(idx["send_wake"], sent)
    assert woken[sp.index("tw")] == 0.0 and woken[sp.index(after)] == 1.0
    up = woken + st_.delta(idx["client_up"], woken)
    assert up[sp.index("zc")] == 0.0 and st_.rates(up, m.r)[idx["client"]] == pytest.approx(1 / 4.0)
    # a client that has a message is awake: the send moves the sender on, nobody waits
    awake = x.copy()
    awake[sp.index("c0")], awake[sp.index("c1")] = 1.0, 0.0
    sent = awake + st_.delta(idx[send], awake)
    assert sent[sp.index(after)] == 1.0 and sent[sp.index("tw")] == 0.0 and sent[sp.index("zc")] == 0.0
    # the client's sleeps not fitted: the same jumps, the wake-up and the latency 1 ns
    plain = build(pattern, 2, 0.0, 2, rates, host=host)
    sent = x + st_.delta(idx[send], x)
    a = st_.rates(sent, plain.r)
    assert a[idx["send_wake"]] == pytest.approx(1000.0) and a[idx["client_up"]] == pytest.approx(1000.0)


@pytest.mark.parametrize(
    ("pattern", "rearm", "holder", "after"),
    [("hsha", "phi12", "t6", "t7"), ("proactor", "rearm", "t7", "t8")],
)
def test_a_rearm_kicks_only_a_dispatcher_in_its_call_and_once(
    pattern: str, rearm: str, holder: str, after: str
) -> None:
    """A re-arm made while the dispatcher sleeps in its select/poll call (m1, nothing ready) costs the
    handler κ = 1/r_k more and leaves a kick pending (k = 1); with a kick pending, the dispatcher woken by a
    request, or past its call, it is the plain re-arm. The kick wakes the dispatcher (its call's α, not
    the client's ω), and a kicked call that finds nothing ready calls again (``empty``). With r_k not
    measured the kick never fires."""
    rates = replace(paper_rates(pattern), r_n=1 / 0.7, r_x=1 / 1.3, r_z=1 / 4.0, r_v=1 / 8.0, r_a=1 / 0.5)
    kicking = replace(rates, r_k=1 / 2.0)
    host = Host(client_threads=1)
    m = build(pattern, 2, 0.0, 2, kicking, host=host)
    st_, sp = m.structure, m.structure.species
    idx = {
        name: st_.transition_index(name) for name in (rearm, f"{rearm}_kick", "alpha", "empty", "client_wake")
    }
    x = m.initial.copy()
    # the dispatcher asleep in m1 (nothing ready), the handler re-arming holding the notifier lock
    x[sp.index("c1")], x[sp.index("c0")] = 0.0, 1.0
    x[sp.index("c3" if pattern == "proactor" else "c4")] = 1.0
    first = "t1"
    x[sp.index(first)] -= 1.0
    x[sp.index(holder)] = 1.0
    x[sp.index("s1")], x[sp.index("s2")] = 0.0, 1.0
    a = st_.rates(x, m.r)
    assert a[idx[rearm]] == 0.0
    assert a[idx[f"{rearm}_kick"]] == pytest.approx(1 / (0.5 + 2.0))
    assert a[idx["alpha"]] == 0.0 and a[idx["client_wake"]] > 0.0  # asleep: a request would wake it
    kicked = x + st_.delta(idx[f"{rearm}_kick"], x)
    assert kicked[sp.index("k")] == 1.0 and kicked[sp.index(after)] == 1.0
    a = st_.rates(kicked, m.r)
    assert a[idx[f"{rearm}_kick"]] == 0.0  # at most one kick per call
    assert a[idx["alpha"]] == pytest.approx(1 / 0.7) and a[idx["client_wake"]] == 0.0  # awake: no ω
    # its call drains the kick; finding nothing ready (and the lock free) it calls again
    called = kicked + st_.delta(idx["alpha"], kicked)
    assert called[sp.index("k")] == 0.0 and called[sp.index("m0")] == 1.0
    assert st_.rates(called, m.r)[idx["empty"]] == 0.0  # the handler still holds the notifier's lock
    called[sp.index(after)], called[sp.index(first)] = 0.0, 1.0  # … and has let it go
    called[sp.index("s1")], called[sp.index("s2")] = 1.0, 0.0
    assert st_.rates(called, m.r)[idx["empty"]] > 0.0
    again = called + st_.delta(idx["empty"], called)
    assert again[sp.index("m1")] == 1.0 and again[sp.index("m0")] == 0.0
    # the dispatcher past its call (m2), or woken by a request (c1 > 0): nothing to kick
    busy = x.copy()
    busy[sp.index("m1")], busy[sp.index("m2")] = 0.0, 1.0
    woken = x.copy()
    woken[sp.index("c1")], woken[sp.index("c0")] = 1.0, 0.0
    for y in (busy, woken):
        a = st_.rates(y, m.r)
        assert a[idx[f"{rearm}_kick"]] == 0.0 and a[idx[rearm]] == pytest.approx(2.0)
    # r_k not measured: the plain re-arm, always
    plain = build(pattern, 2, 0.0, 2, rates, host=host)
    a = st_.rates(x, plain.r)
    assert a[idx[f"{rearm}_kick"]] == 0.0 and a[idx[rearm]] == pytest.approx(2.0)

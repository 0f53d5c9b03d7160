"""The validity checks (demuxlab.validity): each has a constructed failing case — a trending run, a correlated
run, a non-exponential schedule, a client placed on the server's core, a shared cache a bigger host could
have avoided, a role on a NIC IRQ core, a governor other than performance, a frequency that moved, runs whose
result depends on their order — beside a passing one, and says unknown (with why) where it cannot tell."""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import numpy as np
import pytest

from demuxlab.stats import DRIFT_LIMIT_REL, steady_state
from demuxlab.topology import synthetic_topology
from demuxlab.validity import (
    Check,
    arrivals,
    flagged,
    frequency,
    governor,
    independence,
    irq_placement,
    order_effect,
    placement,
    run_checks,
    spearman,
    stationarity,
    turbo,
)
from demuxlab.vocab import CHECK_FAIL, CHECK_PASS, CHECK_UNKNOWN, CHECK_WARN, CHECKS


def _noise(n: int, seed: int = 1, mean: float = 10_000.0, sd: float = 100.0) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


def _ar1(n: int, phi: float, seed: int = 2) -> list[float]:
    """A stationary AR(1) series around 10,000: each second carries phi of the last one's deviation."""
    rng = random.Random(seed)
    x, out = 0.0, []
    for _ in range(n):
        x = phi * x + rng.gauss(0.0, 100.0)
        out.append(10_000.0 + x)
    return out


def test_spearman_agrees_with_scipy() -> None:
    from scipy import stats

    a, b = _noise(40, 3), _ar1(40, 0.5, 4)
    rho, p = spearman(a, b)
    ref = stats.spearmanr(a, b)
    assert rho == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)
    ties = [1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 5.0, 8.0]
    rho, p = spearman(ties, list(range(8)))
    ref = stats.spearmanr(ties, list(range(8)))
    assert rho == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)


def test_a_correlated_run_fails_independence_an_independent_one_passes() -> None:
    correlated = independence(_ar1(60, 0.9))
    assert correlated.verdict == CHECK_FAIL and correlated.value is not None and correlated.value > 0.5
    assert "not independent" in correlated.reason
    assert independence(_noise(60)).verdict == CHECK_PASS
    # The samples the steady-state trimmed as the transient are left out.
    trimmed = [1.0, 2.0, 3.0, *_noise(30)]
    assert independence(trimmed, trimmed=3).verdict == CHECK_PASS
    few = independence(_noise(5))
    assert few.verdict == CHECK_UNKNOWN and "at least 6" in few.reason


def test_a_trending_run_fails_stationarity() -> None:
    trend = [10_000.0 * (1 + 0.01 * i) + x for i, x in enumerate(_noise(20, sd=20.0))]
    state = steady_state(trend).to_json()
    check = stationarity(state)
    assert check.verdict == CHECK_FAIL and "drifts by +" in check.reason
    assert stationarity(steady_state(_noise(20)).to_json()).verdict == CHECK_PASS
    assert stationarity(steady_state([1.0, 2.0]).to_json()).verdict == CHECK_UNKNOWN


def test_a_pass_says_whether_the_drift_was_small_or_only_not_significant() -> None:
    """A large drift over three noisy seconds passes (not significant), and its reason says that, not that
    the drift was within 2 % (the Run page's why panel showed "drift +41.7 %: not beyond 2 % or not
    significant"); a flat run's reason says within 2 %."""
    noisy = steady_state([11_512.0, 10_177.0, 16_865.0]).to_json()  # a real 3-second run, +41.7 %
    check = stationarity(noisy)
    assert check.verdict == CHECK_PASS and abs(noisy["drift_rel"]) > DRIFT_LIMIT_REL
    assert "+41.7%" in check.reason and "not significant" in check.reason and "within" not in check.reason
    assert "not beyond" not in check.reason
    flat = stationarity(steady_state(_noise(20)).to_json())
    assert flat.verdict == CHECK_PASS and "within 2 %" in flat.reason and "significant" not in flat.reason


def _bins(gaps: np.ndarray) -> list[int]:
    """Gaps (in units of their mean) into the client's 16 equiprobable bins (1 - e^-x in sixteenths)."""
    idx = np.minimum(np.floor(16 * (1 - np.exp(-gaps))).astype(int), 15)
    return np.bincount(idx, minlength=16).tolist()


def test_arrivals_that_are_not_exponential_fail() -> None:
    rng = np.random.default_rng(5)
    poisson = {"mode": "open", "gap_bins": _bins(rng.exponential(1.0, 50_000))}
    assert arrivals(poisson).verdict == CHECK_PASS  # type: ignore[union-attr]
    # A schedule of uniform gaps with the same mean: too few short and long gaps.
    uniform = {"mode": "open", "gap_bins": _bins(rng.uniform(0.0, 2.0, 50_000))}
    check = arrivals(uniform)
    assert check is not None and check.verdict == CHECK_FAIL and "not exponential" in check.reason
    # Significant but negligible: a million gaps with one bin 2 % over its share pass.
    near = [62_500] * 16
    near[0], near[1] = 63_750, 61_250
    assert arrivals({"mode": "open", "gap_bins": near}).verdict == CHECK_PASS  # type: ignore[union-attr]
    assert arrivals({"mode": "open", "gap_bins": [1] * 16}).verdict == CHECK_UNKNOWN  # type: ignore[union-attr]
    old = arrivals({"mode": "open"})
    assert old is not None and old.verdict == CHECK_UNKNOWN and "gap_bins" in old.reason
    assert arrivals({"mode": "closed", "gap_bins": None}) is None


def _record(
    facts: dict[str, Any], server_cpus: list[int], client_cpus: list[int], **extra: Any
) -> dict[str, Any]:
    return {
        "status": "ok",
        "hosts": {"server": facts, "client": facts},
        "pinning": {"server_cpus": server_cpus, "client_cpus": client_cpus, "same_host": True},
        **extra,
    }


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.check: c for c in checks}


def test_a_client_on_the_server_s_core_fails_placement() -> None:
    smt = synthetic_topology(1, 2, threads_per_core=2)  # CPUs 0, 1 = cores 0, 1; CPUs 2, 3 their siblings
    shared = _by_name(placement(_record(smt, [0], [2])))["placement.core"]
    assert (
        shared.verdict == CHECK_FAIL and "share a physical core" in shared.reason and "0/2" in shared.reason
    )
    apart = _by_name(placement(_record(smt, [0], [1])))["placement.core"]
    assert apart.verdict == CHECK_PASS
    two_hosts = _record(smt, [0], [2])
    two_hosts["pinning"]["same_host"] = False
    assert {c.verdict for c in placement(two_hosts)} == {CHECK_PASS}
    unpinned = placement(_record(smt, [], [1]))
    assert {c.verdict for c in unpinned} == {CHECK_UNKNOWN}


def test_a_shared_cache_or_node_fails_where_the_host_had_another() -> None:
    two = synthetic_topology(2, 2)  # sockets 0 (CPUs 0, 1) and 1 (CPUs 2, 3), a node each
    two["caches"] = [
        {"level": 3, "type": "Unified", "size_bytes": 1, "cpus": [0, 1]},
        {"level": 3, "type": "Unified", "size_bytes": 1, "cpus": [2, 3]},
    ]
    same = _by_name(placement(_record(two, [0], [1])))
    assert (
        same["placement.cache"].verdict == CHECK_FAIL
        and "though the host has 2" in same["placement.cache"].reason
    )
    assert same["placement.numa"].verdict == CHECK_FAIL
    apart = _by_name(placement(_record(two, [0], [2])))
    assert apart["placement.cache"].verdict == apart["placement.numa"].verdict == CHECK_PASS
    one = synthetic_topology(1, 2)
    one["caches"] = [{"level": 3, "type": "Unified", "size_bytes": 1, "cpus": [0, 1]}]
    only = _by_name(placement(_record(one, [0], [1])))
    assert only["placement.cache"].verdict == CHECK_WARN and "unavoidable" in only["placement.cache"].reason
    assert only["placement.numa"].verdict == CHECK_WARN
    no_caches = _by_name(placement(_record(synthetic_topology(1, 2), [0], [1])))
    assert no_caches["placement.cache"].verdict == CHECK_UNKNOWN


def test_a_role_on_a_nic_irq_core_fails_on_two_hosts() -> None:
    facts = synthetic_topology(1, 4)
    facts["nics"] = [{"name": "eth0", "irqs": [{"irq": 40, "cpus": [0, 1, 2, 3], "effective_cpus": [1]}]}]
    record = _record(facts, [0], [1])
    record["pinning"]["same_host"] = False
    check = irq_placement(record)
    assert check.verdict == CHECK_FAIL and "client CPU 1 takes eth0's IRQ 40" in check.reason
    record["pinning"]["same_host"] = True
    assert irq_placement(record).verdict == CHECK_WARN  # loopback raises no NIC interrupt
    assert irq_placement(_record(facts, [2], [3])).verdict == CHECK_PASS
    everywhere = copy.deepcopy(facts)
    everywhere["nics"][0]["irqs"][0]["effective_cpus"] = None  # allowed on every CPU: nothing to avoid
    assert irq_placement(_record(everywhere, [0], [1])).verdict == CHECK_PASS
    unknown = copy.deepcopy(facts)
    unknown["nics"] = None
    assert irq_placement(_record(unknown, [0], [1])).verdict == CHECK_UNKNOWN


def _costs(gov: Any, freq: Any, boost: Any = False) -> dict[str, Any]:
    side = {"interval_s": 3.0, "governor": gov, "frequency_khz": freq, "turbo": boost}
    return {"server": side, "client": dict(side)}


def test_a_governor_other_than_performance_fails() -> None:
    facts = synthetic_topology(1, 2)
    bad = governor(_record(facts, [0], [1], costs=_costs("powersave", {})))
    assert bad.verdict == CHECK_FAIL and "powersave" in bad.reason
    assert governor(_record(facts, [0], [1], costs=_costs("performance", {}))).verdict == CHECK_PASS
    why = "unavailable: /sys/devices/system/cpu/cpu0/cpufreq absent: no cpufreq driver"
    absent = governor(_record(facts, [0], [1], costs=_costs(why, why)))
    assert absent.verdict == CHECK_UNKNOWN and absent.reason == why
    # A record without costs: the host's facts say.
    facts_gov = dict(facts, governor="schedutil")
    assert governor(_record(facts_gov, [0], [1])).verdict == CHECK_FAIL


def test_the_governor_falls_back_to_the_hosts_facts_and_says_so() -> None:
    # The Run page said "unknown: the governor was not read" for a run whose host facts say performance:
    # the costs' sides did not read it (None), or could not (unavailable); the facts then decide.
    facts = dict(synthetic_topology(1, 2), governor="performance")
    unread = governor(_record(facts, [0], [1], costs=_costs(None, {})))
    assert unread.verdict == CHECK_PASS
    assert (
        unread.reason
        == "governor performance (server: from the host's facts; the run's costs did not read it)"
    )
    why = "unavailable: /sys/devices/system/cpu/cpu0/cpufreq absent: no cpufreq driver"
    absent = governor(_record(facts, [0], [1], costs=_costs(why, why)))
    assert absent.verdict == CHECK_PASS and f"from the host's facts; the run's costs: {why}" in absent.reason
    # What the run read wins over the facts: costs that say powersave fail.
    assert governor(_record(facts, [0], [1], costs=_costs("powersave", {}))).verdict == CHECK_FAIL
    slow = governor(_record(dict(facts, governor="ondemand"), [0], [1], costs=_costs(None, {})))
    assert slow.verdict == CHECK_FAIL and "ondemand" in slow.reason and "host's facts" in slow.reason
    # Turbo, the same way.
    on = turbo(_record(dict(facts, turbo=True), [0], [1], costs=_costs("performance", {}, None)))
    assert on.verdict == CHECK_WARN and "from the host's facts" in on.reason


def test_a_frequency_that_moved_fails() -> None:
    facts = synthetic_topology(1, 2)
    moved = {"start": {"0": 3_000_000, "1": 3_000_000}, "end": {"0": 2_400_000, "1": 3_000_000}}
    check = frequency(_record(facts, [0], [1], costs=_costs("performance", moved)))
    assert (
        check.verdict == CHECK_FAIL
        and "3000 → 2400 MHz" in check.reason
        and check.value == pytest.approx(-0.2)
    )
    still = {"start": {"0": 3_000_000}, "end": {"0": 3_030_000}}
    assert frequency(_record(facts, [0], [1], costs=_costs("performance", still))).verdict == CHECK_PASS
    why = "unavailable: no cpufreq"
    assert frequency(_record(facts, [0], [1], costs=_costs(why, why))).verdict == CHECK_UNKNOWN
    assert turbo(_record(facts, [0], [1], costs=_costs("performance", still, True))).verdict == CHECK_WARN


def test_runs_whose_result_follows_their_order_fail_the_order_test() -> None:
    rng = random.Random(7)
    drifting = [(f"p{i % 5}", float(i), 1000.0 * (1 - 0.002 * i) + rng.gauss(0, 2)) for i in range(50)]
    check = order_effect(drifting)
    assert check.verdict == CHECK_FAIL and "depends on when a run went" in check.reason
    assert check.value is not None and check.value < -0.02
    steady = [(f"p{i % 5}", float(i), 1000.0 * (1 + (i % 5)) + rng.gauss(0, 2)) for i in range(50)]
    assert order_effect(steady).verdict == CHECK_PASS  # the points differ, their runs do not drift
    assert order_effect(drifting[:6]).verdict == CHECK_UNKNOWN


def test_every_check_of_a_run_is_named_in_the_vocabulary_and_a_fail_flags_it() -> None:
    facts = synthetic_topology(1, 2, threads_per_core=2)
    facts["nics"] = []
    record = _record(
        facts,
        [0],
        [2],
        client={"mode": "closed", "per_second": _noise(10)},
        stats=steady_state(_noise(10)).to_json(),
        costs=_costs("performance", {"start": {"0": 1}, "end": {"0": 1}}),
    )
    checks = run_checks(record)
    assert [c.check for c in checks] == [c for c in CHECKS if c not in ("arrivals", "network", "order")]
    assert flagged(checks) and _by_name(checks)["placement.core"].verdict == CHECK_FAIL
    record["pinning"]["client_cpus"] = [1]
    assert not flagged(run_checks(record))
    assert run_checks({**record, "status": "failed"}) == []
    assert all(math.isfinite(c.value) for c in checks if c.value is not None)

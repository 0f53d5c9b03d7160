"""The pinning planner on synthetic machines (seed 000's Opteron, an SMT server, this 2-CPU VM) and here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_topology import _fake_host, fake_nic

from demuxlab.errors import ConfigError
from demuxlab.plan import plan_pinning
from demuxlab.topology import collect_facts, synthetic_topology

OPTERON = synthetic_topology(4, 8)  # seed 000: 4 × 8-core Opteron 6134, one NUMA node per socket
SMT2 = synthetic_topology(2, 4, threads_per_core=2)  # 2 sockets × 4 cores × 2 threads
VM = synthetic_topology(1, 2)  # this machine: one node, 2 CPUs


def core_of(facts: dict[str, Any]) -> dict[int, int]:
    return {row["cpu"]: row["core"] for row in facts["cpus"]}


def node_of(facts: dict[str, Any]) -> dict[int, int]:
    return {row["cpu"]: row["node"] for row in facts["cpus"]}


def test_opteron_gives_each_side_two_sockets() -> None:
    plan = plan_pinning(OPTERON, OPTERON, 16, 16, same_host=True)
    assert plan.server_cpus == tuple(range(16))
    assert plan.client_cpus == tuple(range(16, 32))
    assert not plan.oversubscribed
    assert any("server on nodes [0, 1], client on nodes [2, 3]" in note for note in plan.notes)


def test_opteron_fewer_threads_fill_the_first_node() -> None:
    plan = plan_pinning(OPTERON, OPTERON, 5, 3, same_host=True)
    assert plan.server_cpus == (0, 1, 2, 3, 4)
    assert plan.client_cpus == (16, 17, 18)
    assert {node_of(OPTERON)[c] for c in plan.server_cpus} == {0}


def test_opteron_oversubscribed_server_reuses_its_cpus() -> None:
    plan = plan_pinning(OPTERON, OPTERON, 20, 16, same_host=True)
    assert plan.server_cpus == tuple(range(16))  # thread i → cpus[i % 16]
    assert plan.oversubscribed
    assert any("server: 20 threads on 16 CPUs" in note for note in plan.notes)


def test_smt_machine_uses_cores_before_siblings() -> None:
    four = plan_pinning(SMT2, SMT2, 4, 4, same_host=True)
    assert four.server_cpus == (0, 1, 2, 3) and four.client_cpus == (4, 5, 6, 7)
    assert not any("SMT" in note for note in four.notes)
    six = plan_pinning(SMT2, SMT2, 6, 1, same_host=True)
    assert six.server_cpus == (0, 1, 2, 3, 8, 9)  # all four cores, then siblings of cores 0 and 1
    assert six.client_cpus == (4,)
    assert not six.oversubscribed
    assert any("server: SMT siblings in use" in note for note in six.notes)
    nine = plan_pinning(SMT2, SMT2, 9, 1, same_host=True)
    assert nine.oversubscribed and nine.server_cpus == (0, 1, 2, 3, 8, 9, 10, 11)


def test_vm_server_cpu0_client_cpu1() -> None:
    plan = plan_pinning(VM, VM, 1, 1, same_host=True)
    assert (plan.server_cpus, plan.client_cpus, plan.oversubscribed) == ((0,), (1,), False)
    assert plan.to_json() == {
        "server_cpus": [0],
        "client_cpus": [1],
        "oversubscribed": False,
        "same_host": True,
        "notes": list(plan.notes),
        "irq": plan.irq,
    }


def test_vm_two_server_threads_are_oversubscribed() -> None:
    plan = plan_pinning(VM, VM, 2, 1, same_host=True)
    assert plan.server_cpus == (0,) and plan.client_cpus == (1,)
    assert plan.oversubscribed
    assert any("oversubscribed" in note for note in plan.notes)


def test_single_cpu_host_shares_and_says_so() -> None:
    one = synthetic_topology(1, 1)
    plan = plan_pinning(one, one, 1, 1, same_host=True)
    assert plan.server_cpus == plan.client_cpus == (0,)
    assert plan.oversubscribed
    assert any("share" in note for note in plan.notes)


def test_separate_hosts_use_their_own_cpus() -> None:
    plan = plan_pinning(SMT2, VM, 10, 2, same_host=False)
    assert plan.server_cpus == (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    assert plan.client_cpus == (0, 1)
    assert not plan.oversubscribed and not plan.same_host


def test_three_nodes_give_the_server_the_larger_half() -> None:
    three = synthetic_topology(3, 2)
    plan = plan_pinning(three, three, 4, 2, same_host=True)
    assert plan.server_cpus == (0, 1, 2, 3) and plan.client_cpus == (4, 5)


def test_offline_cpus_are_skipped() -> None:
    facts = dict(VM)
    facts["online_cpus"] = [1]
    plan = plan_pinning(facts, facts, 1, 1, same_host=True)
    assert plan.server_cpus == plan.client_cpus == (1,)


def test_facts_without_topology_still_plan() -> None:
    facts = {"online_cpus": [0, 1, 2, 3], "cpus": None}
    plan = plan_pinning(facts, facts, 2, 2, same_host=True)
    assert plan.server_cpus == (0, 1) and plan.client_cpus == (2, 3)


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match="thread counts"):
        plan_pinning(VM, VM, 0, 1, same_host=True)
    with pytest.raises(ConfigError, match="no CPUs"):
        plan_pinning({"online_cpus": [], "cpus": []}, VM, 1, 1, same_host=True)


def test_this_host_plan_uses_online_cpus() -> None:
    facts = collect_facts()
    plan = plan_pinning(facts, facts, 2, 1, same_host=True)
    online = set(facts["online_cpus"])
    assert set(plan.server_cpus) <= online and set(plan.client_cpus) <= online
    if len(online) >= 2 and (facts["cores"] or 0) >= 2:
        assert not set(plan.server_cpus) & set(plan.client_cpus)


@settings(max_examples=60, deadline=None)
@given(
    sockets=st.integers(1, 4),
    cores=st.sampled_from([1, 2, 4, 6]),
    smt=st.integers(1, 2),
    server_threads=st.integers(1, 40),
    client_threads=st.integers(1, 40),
)
def test_plan_properties(
    sockets: int, cores: int, smt: int, server_threads: int, client_threads: int
) -> None:
    facts = synthetic_topology(sockets, cores, threads_per_core=smt)
    plan = plan_pinning(facts, facts, server_threads, client_threads, same_host=True)
    cores_by_cpu = core_of(facts)
    total_cores = sockets * cores
    if total_cores >= 2:
        # Disjoint physical cores: the sides never share a core, not even through SMT siblings.
        server_cores = {cores_by_cpu[c] for c in plan.server_cpus}
        assert not server_cores & {cores_by_cpu[c] for c in plan.client_cpus}
    if sockets >= 2:
        assert not {node_of(facts)[c] for c in plan.server_cpus} & {
            node_of(facts)[c] for c in plan.client_cpus
        }
    for cpus, threads in ((plan.server_cpus, server_threads), (plan.client_cpus, client_threads)):
        assert len(cpus) == len(set(cpus)) == min(threads, len(cpus))
        used = [cores_by_cpu[c] for c in cpus]
        # Siblings only after every core of the side: the first len(set(used)) CPUs are distinct cores.
        distinct = len(set(used))
        assert len(set(used[:distinct])) == distinct
    over = len(plan.server_cpus) < server_threads or len(plan.client_cpus) < client_threads
    assert plan.oversubscribed == (over or total_cores < 2)


# Rule 5: NIC IRQs, on fake sysfs/procfs trees read by the real collector.
def _irq_host(
    tmp_path: Path, irqs: dict[int, tuple[str, str | None]] | None, node: int = 0
) -> dict[str, Any]:
    """2 sockets × 2 cores, node 0 = CPUs 0-1, node 1 = CPUs 2-3; a NIC with ``irqs`` when given."""
    _fake_host(tmp_path, smt=False, governor=None, no_turbo=None)
    if irqs is not None:
        fake_nic(tmp_path, "eth0", node=node, irqs=irqs)
    return collect_facts(root=tmp_path)


def test_server_threads_avoid_nic_irq_cores_on_the_nic_node(tmp_path: Path) -> None:
    host = _irq_host(tmp_path, {40: ("0-3", "0"), 41: ("0", None)}, node=0)  # both IRQs land on CPU 0
    plan = plan_pinning(host, VM, 1, 1, same_host=False)
    assert plan.server_cpus == (1,)  # node 0 (the NIC's), not CPU 0
    assert plan.irq is not None
    server = plan.irq["server"]
    assert server["applied"] and server["nic_node"] == 0 and server["fallback"] is None
    assert server["avoided_cpus"] == [0] and server["irq_cpus"] == {"0": ["eth0:40", "eth0:41"]}
    assert any("IRQ CPUs 0 avoided" in note for note in plan.notes)
    # The run record carries it.
    assert plan.to_json()["irq"]["server"]["avoided_cpus"] == [0]


def test_too_few_free_cores_fall_back_and_say_so(tmp_path: Path) -> None:
    host = _irq_host(tmp_path, {40: ("0", "0")}, node=0)
    two = plan_pinning(host, VM, 2, 1, same_host=False)
    assert two.server_cpus == (1, 2)  # the free node-0 core, then a free core of node 1
    assert two.irq is not None and "cores on other nodes" in two.irq["server"]["fallback"]
    four = plan_pinning(host, VM, 4, 1, same_host=False)
    assert four.server_cpus == (1, 2, 3, 0)  # the IRQ core only last
    assert four.irq is not None and "cores that receive NIC IRQs" in four.irq["server"]["fallback"]
    assert any("fallback" in note for note in four.notes)
    assert not four.oversubscribed


def test_no_nic_irq_info_leaves_placement_unchanged(tmp_path: Path) -> None:
    host = _irq_host(tmp_path, None)
    assert host["nics"] is None
    for same_host, threads in ((False, 3), (True, 2)):
        plan = plan_pinning(host, host, threads, 1, same_host=same_host)
        bare = {**host, "nics": []}
        assert plan.server_cpus == plan_pinning(bare, bare, threads, 1, same_host=same_host).server_cpus
        assert plan.irq is not None and not plan.irq["server"]["applied"]
        assert "no NIC IRQ information" in plan.irq["server"]["reason"]
        assert any("placement ignores NIC IRQs" in note for note in plan.notes)
    assert plan_pinning(host, host, 3, 1, same_host=False).server_cpus == (0, 1, 2)
    # The synthetic hosts of the other tests have no NIC either: rules 1-4 hold unchanged there.
    assert plan_pinning(OPTERON, OPTERON, 5, 3, same_host=True).server_cpus == (0, 1, 2, 3, 4)


def test_unpinned_irqs_cannot_be_avoided(tmp_path: Path) -> None:
    host = _irq_host(tmp_path, {40: ("0-3", None)}, node=1)  # allowed everywhere, no effective affinity
    plan = plan_pinning(host, VM, 1, 1, same_host=False)
    assert plan.server_cpus == (2,)  # only NUMA-local to the NIC on node 1
    assert plan.irq is not None and plan.irq["server"]["unpinned_irqs"] == ["eth0:40"]
    assert plan.irq["server"]["avoided_cpus"] == []


def test_same_host_keeps_the_numa_split_and_avoids_irq_cores(tmp_path: Path) -> None:
    host = _irq_host(tmp_path, {40: ("2", "2")}, node=1)
    plan = plan_pinning(host, host, 1, 1, same_host=True)
    assert plan.server_cpus == (0,) and plan.client_cpus == (3,)  # client on node 1, off IRQ CPU 2
    assert plan.irq is not None and plan.irq["client"]["avoided_cpus"] == [2]


def test_only_the_nic_routing_the_peer_counts(tmp_path: Path) -> None:
    # eth0: management, node 0, IRQ on CPU 0, default route; eth1: the pair network, node 1, IRQ on CPU 2.
    _fake_host(tmp_path, smt=False, governor=None, no_turbo=None)
    fake_nic(tmp_path, "eth0", node=0, irqs={40: ("0", "0")}, routes=("0.0.0.0/0", "192.168.0.0/24"))
    fake_nic(tmp_path, "eth1", node=1, irqs={50: ("2", "2")}, routes=("10.9.0.0/24",))
    host = collect_facts(root=tmp_path)
    plan = plan_pinning(host, VM, 1, 1, same_host=False, server_peer="10.9.0.5")
    assert plan.server_cpus == (3,)  # eth1's node, off eth1's IRQ CPU
    assert plan.irq is not None and plan.irq["server"]["nics"] == ["eth1"]
    assert plan.irq["server"]["nics_chosen_by"] == "the route to 10.9.0.5"
    assert plan.irq["server"]["avoided_cpus"] == [2]
    # A peer only the default route reaches: eth0 carries it.
    assert plan_pinning(host, VM, 1, 1, same_host=False, server_peer="172.16.0.1").server_cpus == (1,)
    # No peer: every NIC counts; their nodes differ, so no node is preferred, both IRQ CPUs are avoided.
    every = plan_pinning(host, VM, 2, 1, same_host=False)
    assert every.server_cpus == (1, 3)
    assert every.irq is not None and every.irq["server"]["nic_node"] is None
    assert every.irq["server"]["avoided_cpus"] == [0, 2]

"""Topology facts: this host's, a fake sysfs/procfs tree's, and synthetic machines'."""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from pathlib import Path

import pytest

from demuxlab.topology import (
    FACT_KEYS,
    collect_facts,
    format_cpu_list,
    parse_cpu_list,
    synthetic_topology,
)

CONTRACT_KEYS = {
    "hostname",
    "kernel",
    "cpu_model",
    "online_cpus",
    "cpus",
    "numa_nodes",
    "sockets",
    "cores",
    "threads_per_core",
    "smt",
    "governor",
    "turbo",
    "irqbalance",
    "memory_bytes",
    "caches",
    "nics",
    "load",
    "collected_at",
}


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8", [0, 1, 2, 3, 8]), ("0", [0]), ("", []), ("2-3,0-1\n", [0, 1, 2, 3]), ("5,7-7", [5, 7])],
)
def test_cpu_list_round_trip(text: str, cpus: list[int]) -> None:
    assert parse_cpu_list(text) == cpus
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


def test_format_cpu_list_compacts_runs() -> None:
    assert format_cpu_list([8, 0, 1, 2, 3, 10, 11]) == "0-3,8,10-11"


def test_this_host() -> None:
    facts = collect_facts()
    assert set(facts) == CONTRACT_KEYS == set(FACT_KEYS)
    json.dumps(facts)  # JSON-ready
    online_file = Path("/sys/devices/system/cpu/online")
    if online_file.exists():
        assert facts["online_cpus"] == parse_cpu_list(online_file.read_text())
    assert [row["cpu"] for row in facts["cpus"]] == facts["online_cpus"]
    assert facts["hostname"] == os.uname().nodename
    assert facts["kernel"] == os.uname().release
    assert facts["collected_at"].endswith("Z")
    if facts["cores"] is not None:
        assert facts["cores"] * facts["threads_per_core"] >= len(facts["online_cpus"]) >= facts["cores"]
    if facts["numa_nodes"] is not None:
        in_nodes = sorted(cpu for node in facts["numa_nodes"] for cpu in node["cpus"])
        assert in_nodes == facts["online_cpus"]
    meminfo = Path("/proc/meminfo").read_text().split("\n")[0].split()
    assert facts["memory_bytes"] == int(meminfo[1]) * 1024


def _fake_host(root: Path, *, smt: bool, governor: str | None, no_turbo: str | None) -> None:
    """2 sockets × 2 cores (× 2 threads with SMT), one node per socket; core ids sparse like real ones."""
    cpu_dir = root / "sys/devices/system/cpu"
    node_dir = root / "sys/devices/system/node"
    threads = 2 if smt else 1
    n = 4 * threads
    (cpu_dir).mkdir(parents=True)
    (cpu_dir / "online").write_text(f"0-{n - 1}\n")
    nodes: dict[int, list[int]] = {0: [], 1: []}
    for cpu in range(n):
        core = cpu % 4
        socket, core_id = core // 2, (core % 2) * 8  # core_id 0 and 8 in each socket
        topo = cpu_dir / f"cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{socket}\n")
        (topo / "core_id").write_text(f"{core_id}\n")
        nodes[socket].append(cpu)
        if governor is not None:
            (cpu_dir / f"cpu{cpu}/cpufreq").mkdir()
            (cpu_dir / f"cpu{cpu}/cpufreq/scaling_governor").write_text(f"{governor}\n")
    for node, cpus in nodes.items():
        (node_dir / f"node{node}").mkdir(parents=True)
        (node_dir / f"node{node}/cpulist").write_text(format_cpu_list(cpus) + "\n")
    (node_dir / "possible").write_text("0-1\n")
    if no_turbo is not None:
        (cpu_dir / "intel_pstate").mkdir()
        (cpu_dir / "intel_pstate/no_turbo").write_text(no_turbo)
    proc = root / "proc"
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "sys/kernel/hostname").write_text("fakehost\n")
    (proc / "sys/kernel/osrelease").write_text("6.6.6-fake\n")
    (proc / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Fake CPU 9000\n\nprocessor\t: 1\n")
    (proc / "meminfo").write_text("MemTotal:       1024 kB\nMemFree: 1 kB\n")
    (proc / "42").mkdir()
    (proc / "42/comm").write_text("irqbalance\n")


def test_fake_smt_host(tmp_path: Path) -> None:
    _fake_host(tmp_path, smt=True, governor="performance", no_turbo="1\n")
    facts = collect_facts(root=tmp_path)
    assert set(facts) == CONTRACT_KEYS
    assert facts["hostname"] == "fakehost" and facts["kernel"] == "6.6.6-fake"
    assert facts["cpu_model"] == "Fake CPU 9000"
    assert facts["online_cpus"] == list(range(8))
    assert (facts["sockets"], facts["cores"], facts["threads_per_core"], facts["smt"]) == (2, 4, 2, True)
    assert facts["numa_nodes"] == [{"node": 0, "cpus": [0, 1, 4, 5]}, {"node": 1, "cpus": [2, 3, 6, 7]}]
    # cpu 0 and cpu 4 are siblings; core ids repeat across sockets but "core" is host-wide.
    by_cpu = {row["cpu"]: row for row in facts["cpus"]}
    assert by_cpu[0]["core"] == by_cpu[4]["core"]
    assert len({row["core"] for row in facts["cpus"]}) == 4
    assert by_cpu[2] == {"cpu": 2, "core": by_cpu[6]["core"], "socket": 1, "node": 1}
    assert facts["governor"] == "performance"
    assert facts["turbo"] is False
    assert facts["irqbalance"] is True
    assert facts["memory_bytes"] == 1024 * 1024


def test_fake_host_unknowns_are_null(tmp_path: Path) -> None:
    _fake_host(tmp_path, smt=False, governor=None, no_turbo=None)
    (tmp_path / "proc/42/comm").write_text("bash\n")
    facts = collect_facts(root=tmp_path)
    assert facts["governor"] is None
    assert facts["turbo"] is None
    assert facts["irqbalance"] is False
    assert facts["smt"] is False and facts["threads_per_core"] == 1


def test_fake_host_cpufreq_boost(tmp_path: Path) -> None:
    _fake_host(tmp_path, smt=False, governor="schedutil", no_turbo=None)
    (tmp_path / "sys/devices/system/cpu/cpufreq").mkdir()
    (tmp_path / "sys/devices/system/cpu/cpufreq/boost").write_text("1\n")
    facts = collect_facts(root=tmp_path)
    assert facts["turbo"] is True and facts["governor"] == "schedutil"


def test_fake_host_without_numa_or_topology(tmp_path: Path) -> None:
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-2\n")
    facts = collect_facts(root=tmp_path)
    assert facts["online_cpus"] == [0, 1, 2]
    assert facts["numa_nodes"] is None
    assert facts["cores"] is None and facts["sockets"] is None and facts["smt"] is None
    assert facts["cpu_model"] is None and facts["memory_bytes"] is None and facts["irqbalance"] is None
    assert all(row["core"] is None and row["node"] is None for row in facts["cpus"])


def test_synthetic_opteron() -> None:
    facts = synthetic_topology(4, 8)
    assert set(facts) == CONTRACT_KEYS
    assert (facts["sockets"], facts["cores"], facts["threads_per_core"], facts["smt"]) == (4, 32, 1, False)
    assert [n["cpus"] for n in facts["numa_nodes"]] == [list(range(i * 8, i * 8 + 8)) for i in range(4)]


def test_synthetic_smt_numbering_follows_linux() -> None:
    facts = synthetic_topology(2, 4, threads_per_core=2)
    by_cpu = {row["cpu"]: row for row in facts["cpus"]}
    assert facts["online_cpus"] == list(range(16))
    assert by_cpu[0]["core"] == by_cpu[8]["core"] == 0
    assert by_cpu[12] == {"cpu": 12, "core": 4, "socket": 1, "node": 1}
    assert facts["numa_nodes"][0]["cpus"] == [0, 1, 2, 3, 8, 9, 10, 11]


def test_synthetic_sub_numa_nodes() -> None:
    facts = synthetic_topology(1, 8, nodes_per_socket=2)
    assert [n["cpus"] for n in facts["numa_nodes"]] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="divide"):
        synthetic_topology(1, 6, nodes_per_socket=4)


def fake_nic(
    root: Path,
    name: str,
    *,
    node: int,
    irqs: dict[int, tuple[str, str | None]],
    queues: dict[int, str] | None = None,
    routes: tuple[str, ...] = (),
) -> None:
    """A physical NIC in a fake tree: ``irqs`` maps IRQ → (smp_affinity_list, effective_affinity_list or
    None); MSI IRQs in sysfs, ``queues`` (IRQ → action name) only in /proc/interrupts."""
    device = root / "sys/devices/pci0000:00" / name
    (device / "msi_irqs").mkdir(parents=True)
    (device / "numa_node").write_text(f"{node}\n")
    net = root / "sys/class/net" / name
    net.mkdir(parents=True)
    (net / "device").symlink_to(device)
    for irq, (affinity, effective) in {**irqs}.items():
        if irq not in (queues or {}):
            (device / "msi_irqs" / str(irq)).write_text("msix\n")
        irq_dir = root / "proc/irq" / str(irq)
        irq_dir.mkdir(parents=True)
        (irq_dir / "smp_affinity_list").write_text(affinity + "\n")
        if effective is not None:
            (irq_dir / "effective_affinity_list").write_text(effective + "\n")
    route = root / "proc/net/route"
    route.parent.mkdir(parents=True, exist_ok=True)
    if not route.exists():
        route.write_text("Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n")
    with route.open("a") as f:
        for net in routes:  # as the kernel prints them: host-order hex of the network-order address
            n = ipaddress.ip_network(net)
            dest, mask = (int.from_bytes(a.packed, sys.byteorder) for a in (n.network_address, n.netmask))
            f.write(f"{name}\t{dest:08X}\t00000000\t0001\t0\t0\t0\t{mask:08X}\t0\t0\t0\n")
    lines = [f" {irq}:  0  0  PCI-MSI-edge  {action}" for irq, action in (queues or {}).items()]
    with (root / "proc/interrupts").open("a") as f:
        f.write("".join(line + "\n" for line in lines))


def test_fake_host_nic_irq_map(tmp_path: Path) -> None:
    _fake_host(tmp_path, smt=False, governor=None, no_turbo=None)
    (tmp_path / "proc/interrupts").write_text(
        "           CPU0  CPU1\n 99:  0  0  PCI-MSI-edge  eth10-TxRx-0\n"
    )
    fake_nic(
        tmp_path,
        "eth1",
        node=1,
        irqs={40: ("0-3", "2"), 41: ("3", None), 50: ("2", "2")},
        queues={50: "eth1-TxRx-1"},
        routes=("10.9.0.0/24", "0.0.0.0/0"),
    )
    # A virtual interface (no device) is not a NIC.
    (tmp_path / "sys/class/net/veth0").mkdir(parents=True)
    facts = collect_facts(root=tmp_path)
    assert facts["nics"] == [
        {
            "name": "eth1",
            "driver": None,  # no driver link in the fake tree
            "numa_node": 1,
            "routes": ["0.0.0.0/0", "10.9.0.0/24"],
            "irqs": [
                {"irq": 40, "cpus": [0, 1, 2, 3], "effective_cpus": [2]},
                {"irq": 41, "cpus": [3], "effective_cpus": None},
                {
                    "irq": 50,
                    "cpus": [2],
                    "effective_cpus": [2],
                },  # by its queue name; eth10's IRQ 99 is not eth1's
            ],
        }
    ]


def test_fake_host_without_nic_info(tmp_path: Path) -> None:
    _fake_host(tmp_path, smt=False, governor=None, no_turbo=None)
    assert collect_facts(root=tmp_path)["nics"] is None  # no /sys/class/net at all
    (tmp_path / "sys/class/net/eth0").mkdir(parents=True)  # a container's veth end: no device
    assert collect_facts(root=tmp_path)["nics"] == []


def test_fake_host_virtio_nic_irqs_come_from_its_pci_parent(tmp_path: Path) -> None:
    """A VM's virtio NIC: sysfs `device` is virtioN; its MSI IRQs, NUMA node and /proc/interrupts names
    (virtioN-input.0) belong to the PCI function above it."""
    _fake_host(tmp_path, smt=False, governor=None, no_turbo=None)
    pci = tmp_path / "sys/devices/pci0000:00/0000:00:03.0"
    (pci / "virtio2").mkdir(parents=True)
    (pci / "msi_irqs").mkdir()
    for irq in (37, 38):
        (pci / "msi_irqs" / str(irq)).write_text("msix\n")
    (pci / "numa_node").write_text("1\n")
    (tmp_path / "sys/class/net/eth0").mkdir(parents=True)
    (tmp_path / "sys/class/net/eth0/device").symlink_to(pci / "virtio2")
    (tmp_path / "proc/interrupts").write_text(" 39:  0  5  PCI-MSIX-0000:00:03.0  2-edge  virtio2-output.0\n")
    for irq, eff in ((37, "0"), (38, "1"), (39, "1")):
        (tmp_path / f"proc/irq/{irq}").mkdir(parents=True)
        (tmp_path / f"proc/irq/{irq}/smp_affinity_list").write_text("0-3\n")
        (tmp_path / f"proc/irq/{irq}/effective_affinity_list").write_text(eff + "\n")
    (nic,) = collect_facts(root=tmp_path)["nics"]
    assert nic["numa_node"] == 1
    assert [(r["irq"], r["effective_cpus"]) for r in nic["irqs"]] == [(37, [0]), (38, [1]), (39, [1])]

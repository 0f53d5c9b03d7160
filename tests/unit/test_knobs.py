"""The host_tuning role's knob script against a fake sysfs/procfs: apply, record, restore, check mode. The
knobs the role's modules set (the listen backlog, irqbalance) are only recorded by it, before they change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from demuxlab.paths import repo_root

SCRIPT = repo_root() / "playbooks" / "roles" / "host_tuning" / "files" / "demuxlab_knobs.py"


def fake_host(root: Path, *, cpufreq: bool = True) -> None:
    files = {
        "sys/devices/system/cpu/online": "0-3",
        "sys/devices/system/cpu/intel_pstate/no_turbo": "0",
        "sys/devices/system/cpu/smt/control": "on",
        "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never",
        "proc/sys/net/core/somaxconn": "4096",
    }
    if cpufreq:
        files.update(
            {f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor": "powersave" for c in range(4)}
        )
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")


def knobs(root: Path, action: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            action,
            "--root",
            str(root),
            "--state",
            str(root / "state.json"),
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


APPLY = ("--governor", "performance", "--thp", "never", "--measured-cpus", "0-1")
RECORD = ("--record-sysctl", "somaxconn=net.core.somaxconn", "--record-service", "irqbalance")


def read(root: Path, rel: str) -> str:
    return (root / rel).read_text().strip()


def test_apply_records_and_restore_puts_back(tmp_path: Path) -> None:
    fake_host(tmp_path)
    (tmp_path / "proc" / "4711").mkdir()
    (tmp_path / "proc" / "4711" / "comm").write_text("irqbalance\n")
    first = knobs(tmp_path, "apply", *APPLY, *RECORD)
    assert first["changed"] is True
    assert read(tmp_path, "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor") == "performance"
    assert read(tmp_path, "sys/kernel/mm/transparent_hugepage/enabled") == "never"
    # The modules' knobs are recorded, not set: ansible.posix.sysctl and ansible.builtin.service do that.
    assert read(tmp_path, "proc/sys/net/core/somaxconn") == "4096"
    recorded = json.loads((tmp_path / "state.json").read_text())["original"]
    assert recorded["somaxconn"] == {
        "sysctl": "net.core.somaxconn",
        "path": str(tmp_path / "proc/sys/net/core/somaxconn"),
        "value": "4096",
    }
    assert recorded["irqbalance"] == {"service": True, "value": True}
    (tmp_path / "proc/sys/net/core/somaxconn").write_text("65535\n")  # as the role's sysctl task does
    (tmp_path / "proc" / "4711" / "comm").unlink()  # and its service task
    # turbo and SMT are recorded, not changed, unless asked
    assert first["knobs"]["turbo.recorded"]["before"] is True
    assert first["knobs"]["smt.recorded"]["before"] == "on"
    assert read(tmp_path, "sys/devices/system/cpu/smt/control") == "on"
    # no NIC in the fake host: skipped with the reason
    assert "no NIC interrupts" in first["skipped"]["nic_irqs"]
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["original"]["thp"]["value"] == "madvise"
    assert state["original"]["governor.cpu0"]["value"] == "powersave"

    second = knobs(tmp_path, "apply", *APPLY, *RECORD)
    assert second["changed"] is False
    # The original survives a second apply (it is not overwritten by the tuned value).
    assert json.loads((tmp_path / "state.json").read_text())["original"]["somaxconn"]["value"] == "4096"
    assert "irqbalance" in json.loads((tmp_path / "state.json").read_text())["original"]

    restored = knobs(tmp_path, "restore")
    assert restored["changed"] is True
    # The role's restore tasks put the modules' knobs back (they read the state first): not the script.
    assert read(tmp_path, "proc/sys/net/core/somaxconn") == "65535"
    assert json.loads((tmp_path / "state.json").read_text())["original"] == {}
    assert read(tmp_path, "sys/kernel/mm/transparent_hugepage/enabled") == "madvise"
    assert read(tmp_path, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") == "powersave"
    assert knobs(tmp_path, "restore")["changed"] is False


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    fake_host(tmp_path)
    result = knobs(tmp_path, "apply", *APPLY, *RECORD, "--check")
    assert result["changed"] is True
    assert read(tmp_path, "sys/kernel/mm/transparent_hugepage/enabled") == "always [madvise] never"
    assert not (tmp_path / "state.json").exists()


def test_a_first_value_to_record_is_a_change(tmp_path: Path) -> None:
    """On a host already as tuned, keeping the modules' knobs' first values is the one change (check mode
    says so too); once kept, a second apply changes nothing."""
    fake_host(tmp_path)
    (tmp_path / "sys/kernel/mm/transparent_hugepage/enabled").write_text("always madvise [never]\n")
    for c in range(4):
        (tmp_path / f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor").write_text("performance\n")
    assert knobs(tmp_path, "apply", *APPLY, "--check")["changed"] is False
    assert knobs(tmp_path, "apply", *APPLY, *RECORD, "--check")["changed"] is True
    assert knobs(tmp_path, "apply", *APPLY, *RECORD)["changed"] is True
    assert knobs(tmp_path, "apply", *APPLY, *RECORD)["changed"] is False


def test_missing_knobs_are_skipped_with_reason(tmp_path: Path) -> None:
    fake_host(tmp_path, cpufreq=False)
    (tmp_path / "sys/devices/system/cpu/intel_pstate/no_turbo").unlink()
    (tmp_path / "proc/sys/net/core/somaxconn").unlink()
    result = knobs(tmp_path, "apply", *APPLY, *RECORD, "--turbo", "off")
    assert "no cpufreq" in result["skipped"]["governor"]
    assert "turbo unknown" in result["skipped"]["turbo"]
    assert "net/core/somaxconn does not exist" in result["skipped"]["somaxconn"]
    assert result["knobs"]["thp"]["changed"] is True


@pytest.mark.parametrize(("turbo", "want"), [("off", "1"), ("on", "0")])
def test_turbo_and_smt_set_when_asked(tmp_path: Path, turbo: str, want: str) -> None:
    fake_host(tmp_path)
    knobs(tmp_path, "apply", "--turbo", turbo, "--smt", "off")
    assert read(tmp_path, "sys/devices/system/cpu/intel_pstate/no_turbo") == want
    assert read(tmp_path, "sys/devices/system/cpu/smt/control") == "off"
    knobs(tmp_path, "restore")
    assert read(tmp_path, "sys/devices/system/cpu/intel_pstate/no_turbo") == "0"
    assert read(tmp_path, "sys/devices/system/cpu/smt/control") == "on"


def test_nic_irqs_moved_by_the_role_are_what_facts_and_planner_see(tmp_path: Path) -> None:
    """The role moves a virtio NIC's IRQs (found on its PCI parent) off the measured CPUs; the facts
    collector reads the affinities back and the planner keeps the server off them."""
    from demuxlab.plan import plan_pinning
    from demuxlab.topology import collect_facts, synthetic_topology

    fake_host(tmp_path)
    pci = tmp_path / "sys/devices/pci0000:00/0000:00:03.0"
    (pci / "virtio2").mkdir(parents=True)
    (pci / "msi_irqs").mkdir()
    (pci / "msi_irqs" / "37").write_text("msix\n")
    (tmp_path / "sys/class/net/eth0").mkdir(parents=True)
    (tmp_path / "sys/class/net/eth0/device").symlink_to(pci / "virtio2")
    (tmp_path / "proc/interrupts").write_text(
        " 38:  0  0  PCI-MSIX-0000:00:03.0  1-edge  virtio2-input.0\n"
        " 39:  0  0  PCI-MSIX-0000:00:04.0  1-edge  virtio20-input.0\n"  # another device's
    )
    for irq in (37, 38, 39):
        (tmp_path / f"proc/irq/{irq}").mkdir(parents=True)
        (tmp_path / f"proc/irq/{irq}/smp_affinity_list").write_text("0-3\n")
    knobs(tmp_path, "apply", *APPLY)  # measured CPUs 0-1: NIC IRQs go to 2-3
    assert [read(tmp_path, f"proc/irq/{irq}/smp_affinity_list") for irq in (37, 38, 39)] == [
        "2,3",
        "2,3",
        "0-3",
    ]
    (tmp_path / "proc/interrupts").write_text(" 38:  0  0  PCI-MSIX-0000:00:03.0  1-edge  virtio2-input.0\n")
    facts = collect_facts(root=tmp_path)
    facts.update({k: v for k, v in synthetic_topology(1, 4).items() if k in ("online_cpus", "cpus")})
    assert [(r["irq"], r["cpus"]) for r in facts["nics"][0]["irqs"]] == [(37, [2, 3]), (38, [2, 3])]
    plan = plan_pinning(facts, facts, 2, 1, same_host=False)
    assert plan.server_cpus == (0, 1)
    assert plan.irq is not None and plan.irq["server"]["avoided_cpus"] == [2, 3]

#!/usr/bin/env python3
"""The sysfs knobs of a measured host, which no Ansible module sets: apply, or restore what an earlier apply
changed (stdlib only). host_tuning's modules set the rest (ansible.posix.sysctl: the listen backlog;
ansible.builtin.service: irqbalance); this script records their first value too, before they change it.

    demuxlab_knobs.py apply   --state FILE [--check] [--root /] --governor G --thp T
                              [--turbo on|off] [--smt on|off] [--irq-cpus LIST] [--measured-cpus LIST]
                              [--record-sysctl NAME=KEY ...] [--record-service NAME ...]
    demuxlab_knobs.py restore --state FILE [--check] [--root /]

Why a script: the knobs are files of /sys and /proc (each CPU's cpufreq governor, intel_pstate or cpufreq
boost, smt/control, transparent_hugepage, each NIC interrupt's smp_affinity_list) that exist on some hosts
only; ansible.builtin.copy and lineinfile write a temporary file and rename it, which sysfs refuses, and
no module records a knob's first value or skips a missing one with its reason.

Prints one JSON object: {"changed": bool, "knobs": {name: {"before", "after", "changed"}},
"skipped": {name: reason}}. A knob the host does not have (a VM without cpufreq, a container without
IRQs) is skipped with the reason, never an error. The first value seen before any change is kept in the
state file, so ``restore`` puts back what the host had before demuxlab touched it, however often ``apply``
ran; ``restore`` leaves the modules' knobs (``sysctl``, ``service`` entries) to host_tuning's restore
tasks, which read them from the state file first. With --check nothing is written (the state file
neither).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path("/")


def path(rel: str) -> Path:
    return ROOT / rel.lstrip("/")


def read(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None


def bracketed(text: str) -> str:
    """``always [madvise] never`` -> ``madvise``; a plain value stays as it is."""
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip()


class Knobs:
    def __init__(self, state_file: Path, check: bool) -> None:
        self.state_file = state_file
        self.check = check
        try:
            self.state = json.loads(state_file.read_text())
        except (OSError, ValueError):
            self.state = {}
        self.knobs: dict[str, dict[str, object]] = {}
        self.skipped: dict[str, str] = {}
        self.recorded = False  # a first value newly kept in the state file (a change to it)

    def write_file(self, name: str, p: Path, want: str, current: str | None, parse=lambda s: s) -> None:
        if current is None:
            self.skipped[name] = f"{p} does not exist on this host"
            return
        before = parse(current)
        if before == want:
            self.knobs[name] = {"before": before, "after": want, "changed": False}
            return
        if not self.check:
            try:
                p.write_text(want + "\n")
            except OSError as exc:
                self.skipped[name] = f"{p} is not writable here ({exc.strerror})"
                return
            after = parse(read(p) or "")
            if after != want:
                self.skipped[name] = f"{p} did not take {want!r} (reads {after!r})"
                return
            self.state.setdefault("original", {}).setdefault(name, {"path": str(p), "value": before})
        self.knobs[name] = {"before": before, "after": want, "changed": True}

    def save(self) -> None:
        if self.check:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file)

    def result(self) -> dict[str, object]:
        changed = self.recorded or any(k["changed"] for k in self.knobs.values())
        return {"changed": changed, "knobs": self.knobs, "skipped": self.skipped}


def online_cpus() -> list[int]:
    return parse_cpus(read(path("/sys/devices/system/cpu/online")) or "")


def parse_cpus(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus.extend(range(int(lo), int(hi) + 1))
        elif part.strip():
            cpus.append(int(part))
    return sorted(set(cpus))


def running(name: str) -> bool:
    """A process named ``name`` runs (a service's daemon, e.g. irqbalance)."""
    try:
        return any(e.name.isdigit() and read(e / "comm") == name for e in path("/proc").iterdir())
    except OSError:
        return False


def record(k: Knobs, sysctls: list[str], services: list[str]) -> None:
    """The first value of the knobs the modules set, kept before they change it (never overwritten)."""
    originals = k.state.setdefault("original", {})
    for item in sysctls:
        name, _, key = item.partition("=")
        p = path("/proc/sys/" + key.replace(".", "/"))
        current = read(p)
        if current is None:
            k.skipped[name] = f"{p} does not exist on this host"
        elif name not in originals:
            originals[name] = {"sysctl": key, "path": str(p), "value": current}
            k.recorded = True
    for name in services:
        if running(name) and name not in originals:
            originals[name] = {"service": True, "value": True}
            k.recorded = True


def _irq_of(name: str, token: str) -> bool:
    """``eth0`` or one of its queues (``eth0-TxRx-0``), never ``eth10`` for ``eth1`` (as topology.py)."""
    return token == name or (token.startswith(name) and token[len(name)] in "-@:_")


def nic_irqs() -> list[int]:
    """IRQs of network interfaces (sysfs msi_irqs and /proc/interrupts names), found as the facts
    collector (src/demuxlab/topology.py) finds them: a virtio NIC's are its PCI parent's."""
    irqs: set[int] = set()
    net = path("/sys/class/net")
    try:
        ifaces = [p for p in net.iterdir() if (p / "device").exists()]
    except OSError:
        ifaces = []
    names: set[str] = set()
    for iface in ifaces:
        names.add(iface.name)
        sources = [iface / "device"]
        try:
            real = (iface / "device").resolve(strict=True)
        except OSError:
            real = None
        if real is not None and real.name.startswith("virtio") and real.name[6:].isdigit():
            names.add(real.name)
            sources.append(real.parent)
        for source in sources:
            try:
                irqs.update(int(p.name) for p in (source / "msi_irqs").iterdir() if p.name.isdigit())
            except OSError:
                pass
        irq = read(iface / "device" / "irq")
        if irq and irq.isdigit() and irq != "0":
            irqs.add(int(irq))
    text = read(path("/proc/interrupts")) or ""
    for line in text.splitlines():
        head, _, rest = line.partition(":")
        if head.strip().isdigit() and any(_irq_of(n, t) for n in names for t in rest.split()):
            irqs.add(int(head))
    return sorted(irqs)


def apply(args: argparse.Namespace, k: Knobs) -> None:
    cpus = online_cpus()
    cpu_dir = path("/sys/devices/system/cpu")
    # CPU frequency governor, per CPU.
    govs = [cpu_dir / f"cpu{c}" / "cpufreq" / "scaling_governor" for c in cpus]
    if args.governor and not any(g.exists() for g in govs):
        k.skipped["governor"] = "no cpufreq on this host (a VM or a container): governor left as is"
    elif args.governor:
        for c, g in zip(cpus, govs):
            k.write_file(f"governor.cpu{c}", g, args.governor, read(g))
    # Turbo: recorded always, set only when asked.
    no_turbo = cpu_dir / "intel_pstate" / "no_turbo"
    boost = cpu_dir / "cpufreq" / "boost"
    if no_turbo.exists():
        current = read(no_turbo)
        k.knobs.setdefault("turbo.recorded", {"before": current == "0", "after": current == "0", "changed": False})
        if args.turbo:
            k.write_file("turbo", no_turbo, "0" if args.turbo == "on" else "1", current)
    elif boost.exists():
        current = read(boost)
        k.knobs.setdefault("turbo.recorded", {"before": current == "1", "after": current == "1", "changed": False})
        if args.turbo:
            k.write_file("turbo", boost, "1" if args.turbo == "on" else "0", current)
    else:
        k.skipped["turbo"] = "no intel_pstate/no_turbo or cpufreq/boost: turbo unknown"
    # SMT: recorded always, set only when asked.
    smt = cpu_dir / "smt" / "control"
    if smt.exists():
        current = read(smt)
        k.knobs.setdefault("smt.recorded", {"before": current, "after": current, "changed": False})
        if args.smt and current in ("on", "off"):
            k.write_file("smt", smt, args.smt, current)
        elif args.smt:
            k.skipped["smt"] = f"SMT control reads {current!r}: cannot be switched"
    else:
        k.skipped["smt"] = "no smt/control: SMT state unknown"
    # Transparent huge pages.
    thp = path("/sys/kernel/mm/transparent_hugepage/enabled")
    if args.thp:
        k.write_file("thp", thp, args.thp, read(thp), parse=bracketed)
    # NIC interrupts onto the CPUs that are not measured.
    irq_cpus = args.irq_cpus
    if not irq_cpus and args.measured_cpus:
        measured = set(parse_cpus(args.measured_cpus))
        rest = [c for c in cpus if c not in measured]
        irq_cpus = ",".join(str(c) for c in rest)
    if irq_cpus:
        irqs = nic_irqs()
        if not irqs:
            k.skipped["nic_irqs"] = "no NIC interrupts visible on this host (virtual NICs): nothing to move"
        for irq in irqs:
            p = path(f"/proc/irq/{irq}/smp_affinity_list")
            k.write_file(f"irq{irq}", p, irq_cpus, read(p), parse=lambda s: ",".join(map(str, parse_cpus(s))))
    else:
        k.skipped["nic_irqs"] = "every online CPU is measured: no CPUs left for NIC interrupts"
    if not k.check:
        k.state["skipped"] = k.skipped


def restore(k: Knobs) -> None:
    originals = k.state.get("original", {})
    for name, entry in sorted(originals.items()):
        if entry.get("service") or entry.get("sysctl"):
            continue  # put back by host_tuning's restore tasks (modules), which read it before this runs
        p = Path(entry["path"])
        parse = bracketed if name == "thp" else (lambda s: s)
        k.write_file(name, p, str(entry["value"]), read(p), parse=parse)
    if not k.check:
        k.state["original"] = {n: e for n, e in originals.items() if n in k.skipped}


def main() -> int:
    global ROOT
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=("apply", "restore"))
    ap.add_argument("--state", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--root", default="/")
    ap.add_argument("--governor", default="")
    ap.add_argument("--turbo", choices=("", "on", "off"), default="")
    ap.add_argument("--smt", choices=("", "on", "off"), default="")
    ap.add_argument("--thp", default="")
    ap.add_argument("--irq-cpus", default="")
    ap.add_argument("--measured-cpus", default="")
    ap.add_argument("--record-sysctl", action="append", default=[], help="NAME=KEY: keep KEY's first value")
    ap.add_argument("--record-service", action="append", default=[], help="NAME: keep whether it ran")
    args = ap.parse_args()
    ROOT = Path(args.root)
    k = Knobs(Path(args.state), args.check)
    if args.action == "apply":
        record(k, args.record_sysctl, args.record_service)
        apply(args, k)
    else:
        restore(k)
    k.save()
    print(json.dumps(k.result(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

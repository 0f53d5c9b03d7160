"""Topology and noise facts of a host (CONTRACTS.md §3), read from sysfs and procfs.

Every fact is read, never guessed: what a file does not say is ``null``. ``core`` is a host-wide index of
the physical core (cores numbered in (socket, core_id) order), so two CPUs are SMT siblings exactly when
they share ``core``; the kernel's own ``core_id`` is only unique within a socket.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

FACT_KEYS: tuple[str, ...] = (
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
)


def parse_cpu_list(text: str) -> list[int]:
    """Parse a kernel CPU list such as ``0-3,8,10-11`` (empty text → empty list)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            cpus.extend(range(int(low), int(high) + 1))
        else:
            cpus.append(int(part))
    return sorted(set(cpus))


def format_cpu_list(cpus: list[int]) -> str:
    """The inverse of :func:`parse_cpu_list`: ``[0, 1, 2, 3, 8]`` → ``0-3,8``."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        ranges.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(ranges)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _cpu_model(proc: Path) -> str | None:
    text = _read(proc / "cpuinfo")
    if text is None:
        return None
    # x86 says "model name"; arm64 and others use one of the later keys, if any.
    for key in ("model name", "cpu model", "Model", "Processor", "cpu"):
        for line in text.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return None


def _memory_bytes(proc: Path) -> int | None:
    text = _read(proc / "meminfo")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 3 and fields[2] == "kB" and fields[1].isdigit():
                return int(fields[1]) * 1024
    return None


def _irqbalance_running(proc: Path) -> bool | None:
    try:
        entries = list(proc.iterdir())
    except OSError:
        return None
    return any(entry.name.isdigit() and _read(entry / "comm") == "irqbalance" for entry in entries)


def _governor(cpu_dir: Path, online: list[int]) -> str | None:
    governors = {_read(cpu_dir / f"cpu{cpu}" / "cpufreq" / "scaling_governor") for cpu in online}
    governors.discard(None)
    # Several governors at once are reported joined, sorted, so the record shows the mix.
    return ",".join(sorted(g for g in governors if g)) or None


def _turbo(cpu_dir: Path) -> bool | None:
    no_turbo = _read_int(cpu_dir / "intel_pstate" / "no_turbo")
    if no_turbo is not None:
        return no_turbo == 0
    boost = _read_int(cpu_dir / "cpufreq" / "boost")
    if boost is not None:
        return boost == 1
    return None


def _caches(cpu_dir: Path, online: list[int]) -> list[dict[str, Any]] | None:
    """Each cache instance once: level, type, size and the CPUs sharing it (sysfs ``cache/index*``)."""
    seen: dict[tuple[int, str, str], dict[str, Any]] = {}
    for cpu in online:
        base = cpu_dir / f"cpu{cpu}" / "cache"
        try:
            indexes = sorted(p for p in base.iterdir() if p.name.startswith("index"))
        except OSError:
            continue
        for index in indexes:
            level = _read_int(index / "level")
            kind = _read(index / "type")
            shared = _read(index / "shared_cpu_list")
            if level is None or kind is None or shared is None:
                continue
            key = (level, kind, shared)
            if key not in seen:
                seen[key] = {
                    "level": level,
                    "type": kind,
                    "size_bytes": _size_bytes(_read(index / "size")),
                    "cpus": parse_cpu_list(shared),
                }
    if not seen:
        return None
    return sorted(seen.values(), key=lambda c: (c["level"], c["type"], c["cpus"]))


def _size_bytes(text: str | None) -> int | None:
    if not text:
        return None
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if text[-1] in units and text[:-1].isdigit():
        return int(text[:-1]) * units[text[-1]]
    return int(text) if text.isdigit() else None


def _irq_names(name: str, token: str) -> bool:
    """Whether a ``/proc/interrupts`` action name belongs to interface ``name``: ``eth0`` itself or one of
    its queues (``eth0-TxRx-0``, ``eth0-rx-1``, ``eth0@pci…``); never ``eth10`` for ``eth1``."""
    return token == name or (token.startswith(name) and token[len(name)] in "-@:_")


def _routes(proc: Path) -> dict[str, list[str]]:
    """IPv4 networks routed through each interface (``/proc/net/route``), as ``a.b.c.d/len``."""
    out: dict[str, list[str]] = {}
    for line in (_read(proc / "net" / "route") or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            dest, mask = int(fields[1], 16), int(fields[7], 16)
        except ValueError:
            continue
        # The kernel prints the network-order address as a host-order integer.
        net = socket.inet_ntoa(dest.to_bytes(4, sys.byteorder))
        out.setdefault(fields[0], []).append(f"{net}/{bin(mask).count('1')}")
    return {name: sorted(set(nets)) for name, nets in out.items()}


def _nics(root: Path, proc: Path) -> list[dict[str, Any]] | None:
    """Interfaces backed by a device (not lo, veth, bridges): their NUMA node and their IRQs, each with the
    CPUs it may run on (``smp_affinity_list``) and, where the kernel says, the CPUs it is delivered to
    (``effective_affinity_list``)."""
    net = root / "sys" / "class" / "net"
    try:
        names = sorted(p.name for p in net.iterdir() if (p / "device").exists())
    except OSError:
        return None
    interrupts = _read(proc / "interrupts") or ""
    routes = _routes(proc)
    nics: list[dict[str, Any]] = []
    for name in names:
        device = net / name / "device"
        # A virtio NIC's device is a virtio bus device (virtioN) whose interrupts (virtioN-input.0, …)
        # and NUMA node belong to its PCI parent.
        labels = {name}
        sources = [device]
        with contextlib.suppress(OSError):
            real = device.resolve(strict=True)
            if real.name.startswith("virtio") and real.name[6:].isdigit():
                labels.add(real.name)
                sources.append(real.parent)
        irqs: set[int] = set()
        for source in sources:
            with contextlib.suppress(OSError):
                irqs.update(int(p.name) for p in (source / "msi_irqs").iterdir() if p.name.isdigit())
        legacy = _read_int(device / "irq")  # INTx; 0 means none
        if legacy:
            irqs.add(legacy)
        for line in interrupts.splitlines():
            head, _, rest = line.partition(":")
            if head.strip().isdigit() and any(
                _irq_names(lb, token) for lb in labels for token in rest.split()
            ):
                irqs.add(int(head))
        rows = []
        for irq in sorted(irqs):
            affinity = _read(proc / "irq" / str(irq) / "smp_affinity_list")
            effective = _read(proc / "irq" / str(irq) / "effective_affinity_list")
            rows.append(
                {
                    "irq": irq,
                    "cpus": parse_cpu_list(affinity) if affinity is not None else None,
                    "effective_cpus": parse_cpu_list(effective) if effective else None,
                }
            )
        nodes = [n for n in (_read_int(src / "numa_node") for src in sources) if n is not None]
        node = nodes[0] if nodes else None  # -1: the kernel does not know
        nics.append(
            {
                "name": name,
                "driver": _driver(net / name),
                "numa_node": node if node is not None and node >= 0 else None,
                "routes": routes.get(name, []),
                "irqs": rows,
            }
        )
    return nics


def _driver(iface: Path) -> str | None:
    link = iface / "device" / "driver"
    try:
        return link.resolve(strict=True).name
    except OSError:  # no driver bound (or no such link): unknown, not the link's own name
        return None


def _load(proc: Path) -> list[float] | None:
    text = _read(proc / "loadavg")
    try:
        return [float(x) for x in text.split()[:3]] if text else None
    except ValueError:
        return None


def _numa(node_dir: Path, online: list[int]) -> tuple[dict[int, int], list[dict[str, Any]] | None]:
    """CPU → node, and the node list (only nodes with online CPUs); ``None`` without NUMA in sysfs."""
    try:
        names = [p.name for p in node_dir.iterdir() if p.name.startswith("node") and p.name[4:].isdigit()]
    except OSError:
        return {}, None
    node_of: dict[int, int] = {}
    nodes: list[dict[str, Any]] = []
    online_set = set(online)
    for node in sorted(int(name[4:]) for name in names):
        text = _read(node_dir / f"node{node}" / "cpulist")
        if text is None:
            continue
        cpus = [cpu for cpu in parse_cpu_list(text) if cpu in online_set]
        for cpu in cpus:
            node_of[cpu] = node
        if cpus:
            nodes.append({"node": node, "cpus": cpus})
    return node_of, (nodes or None)


def facts_from_cpus(
    cpus: list[dict[str, Any]],
    *,
    hostname: str | None = None,
    kernel: str | None = None,
    cpu_model: str | None = None,
    governor: str | None = None,
    turbo: bool | None = None,
    irqbalance: bool | None = None,
    memory_bytes: int | None = None,
    collected_at: str | None = None,
    smt_active: bool | None = None,
    caches: list[dict[str, Any]] | None = None,
    nics: list[dict[str, Any]] | None = None,
    load: list[float] | None = None,
) -> dict[str, Any]:
    """Facts from per-CPU rows ``{"cpu", "core", "socket", "node"}``; all but ``cpu`` may be null.

    Derived counts are null when a row lacks what they need.
    """
    rows = sorted(cpus, key=lambda row: int(row["cpu"]))
    online = [int(row["cpu"]) for row in rows]
    known_cores = all(row["core"] is not None for row in rows)
    known_sockets = all(row["socket"] is not None for row in rows)
    known_nodes = all(row["node"] is not None for row in rows)

    numa_nodes: list[dict[str, Any]] | None = None
    if known_nodes and rows:
        by_node: dict[int, list[int]] = {}
        for row in rows:
            by_node.setdefault(int(row["node"]), []).append(int(row["cpu"]))
        numa_nodes = [{"node": node, "cpus": by_node[node]} for node in sorted(by_node)]

    cores: int | None = None
    threads_per_core: int | None = None
    if known_cores and rows:
        per_core: dict[int, int] = {}
        for row in rows:
            per_core[int(row["core"])] = per_core.get(int(row["core"]), 0) + 1
        cores = len(per_core)
        threads_per_core = max(per_core.values())
    smt: bool | None = smt_active
    if smt is None and threads_per_core is not None:
        smt = threads_per_core > 1
    return {
        "hostname": hostname,
        "kernel": kernel,
        "cpu_model": cpu_model,
        "online_cpus": online,
        "cpus": [
            {"cpu": int(row["cpu"]), "core": row["core"], "socket": row["socket"], "node": row["node"]}
            for row in rows
        ],
        "numa_nodes": numa_nodes,
        "sockets": len({row["socket"] for row in rows}) if known_sockets and rows else None,
        "cores": cores,
        "threads_per_core": threads_per_core,
        "smt": smt,
        "governor": governor,
        "turbo": turbo,
        "irqbalance": irqbalance,
        "memory_bytes": memory_bytes,
        "caches": caches,
        "nics": nics,
        "load": load,
        "collected_at": collected_at,
    }


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def collect_facts(*, root: Path = Path("/")) -> dict[str, Any]:
    """This host's facts; ``root`` lets tests point at a fake ``sys``/``proc`` tree."""
    cpu_dir = root / "sys" / "devices" / "system" / "cpu"
    proc = root / "proc"
    online_text = _read(cpu_dir / "online")
    if online_text is not None:
        online = parse_cpu_list(online_text)
    else:
        online = sorted(os.sched_getaffinity(0)) if root == Path("/") else []
    node_of, _ = _numa(root / "sys" / "devices" / "system" / "node", online)

    raw: list[tuple[int, int | None, int | None]] = []
    for cpu in online:
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        raw.append((cpu, _read_int(topo / "physical_package_id"), _read_int(topo / "core_id")))
    # A host-wide core index: the kernel's core_id repeats across sockets and may have gaps.
    core_index: dict[tuple[int, int], int] = {}
    for _, sock, core_id in sorted(raw, key=lambda r: (r[1] if r[1] is not None else -1, r[2] or 0, r[0])):
        if sock is not None and core_id is not None and (sock, core_id) not in core_index:
            core_index[(sock, core_id)] = len(core_index)
    rows = [
        {
            "cpu": cpu,
            "core": core_index.get((sock, core_id)) if sock is not None and core_id is not None else None,
            "socket": sock,
            "node": node_of.get(cpu),
        }
        for cpu, sock, core_id in raw
    ]
    smt_active = _read_int(cpu_dir / "smt" / "active")
    uname = platform.uname() if root == Path("/") else None
    return facts_from_cpus(
        rows,
        hostname=socket.gethostname() if root == Path("/") else _read(proc / "sys" / "kernel" / "hostname"),
        kernel=uname.release if uname is not None else _read(proc / "sys" / "kernel" / "osrelease"),
        cpu_model=_cpu_model(proc),
        governor=_governor(cpu_dir, online),
        turbo=_turbo(cpu_dir),
        irqbalance=_irqbalance_running(proc),
        memory_bytes=_memory_bytes(proc),
        collected_at=_now(),
        smt_active=None if smt_active is None else smt_active == 1,
        caches=_caches(cpu_dir, online),
        nics=_nics(root, proc),
        load=_load(proc),
    )


def synthetic_topology(
    sockets: int, cores_per_socket: int, threads_per_core: int = 1, nodes_per_socket: int = 1
) -> dict[str, Any]:
    """Facts of an imaginary host, numbered the way Linux numbers x86 CPUs.

    CPUs ``0 … cores-1`` are the first hardware thread of each core (socket by socket), then come the
    second threads in the same core order, and so on; each socket's cores are split evenly into its nodes.
    """
    if min(sockets, cores_per_socket, threads_per_core, nodes_per_socket) < 1:
        raise ValueError("synthetic_topology: every count must be >= 1")
    if cores_per_socket % nodes_per_socket:
        raise ValueError("synthetic_topology: cores_per_socket must divide evenly into nodes_per_socket")
    total_cores = sockets * cores_per_socket
    cores_per_node = cores_per_socket // nodes_per_socket
    rows: list[dict[str, Any]] = []
    for thread in range(threads_per_core):
        for core in range(total_cores):
            sock = core // cores_per_socket
            node = sock * nodes_per_socket + (core % cores_per_socket) // cores_per_node
            rows.append({"cpu": thread * total_cores + core, "core": core, "socket": sock, "node": node})
    return facts_from_cpus(
        rows,
        hostname=f"synthetic-{sockets}s{cores_per_socket}c{threads_per_core}t{nodes_per_socket}n",
        collected_at=_now(),
    )


if __name__ == "__main__":
    # The host_facts role runs this file on each cluster host with the host's own python3 (stdlib only):
    # one collector for `demuxlab facts` and for Ansible.
    import json

    json.dump(collect_facts(), sys.stdout)
    sys.stdout.write("\n")

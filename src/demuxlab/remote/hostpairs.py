"""The pairs a sweep may use, and their hardware classes.

A *pairs source* is either an Ansible inventory (``playbooks/inventories/NAME``, read by
:func:`demuxlab.inventory.load_inventory`) or a simulated cluster: a YAML/JSON file
``{"simulated": {"pairs": 64, "failing": ["sim-003"], "fail_from_run": 0, "classes": {"sim-001": "b"}}}``
that the ``sim`` launcher runs without any host (the scale benchmark and the scheduler tests use it).

A pair's *hardware class* names what its two hosts are made of (CPU model, cores, threads per core, NUMA
nodes, kernel, on both sides): runs on pairs of different classes are never averaged together.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demuxlab.errors import ConfigError

#: The facts that make up a hardware class (CONTRACTS.md §3 keys), per side.
CLASS_FACTS: tuple[str, ...] = ("cpu_model", "cores", "threads_per_core", "sockets", "kernel")


@dataclass(frozen=True)
class Host:
    """One host of a pair, as the inventory describes it."""

    name: str  # inventory hostname
    ansible_host: str  # where SSH connects
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    address: str | None = None  # the host's address on the pair network (the client connects here)
    cpus: str | None = None  # the CPU set the host may use, if the inventory restricts it
    become: bool = False
    ssh_options: tuple[tuple[str, str], ...] = ()  # from the inventory's ansible_ssh_common_args
    # The inventory's demuxlab_cpus_shared: the host's CPUs are shared with other hosts of one machine (the
    # test cluster): its runs are not performance data (the run record's noise says so).
    cpus_shared: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ansible_host": self.ansible_host,
            "port": self.port,
            "user": self.user,
            "address": self.address,
        }


@dataclass(frozen=True)
class SimBehaviour:
    """How a simulated pair behaves: ``fail_from_run`` ≥ 0 makes every run from that one on fail."""

    fail_from_run: int | None = None
    hardware_class: str = "sim"


@dataclass(frozen=True)
class ClusterPair:
    name: str
    server: Host
    client: Host
    sim: SimBehaviour | None = None

    @property
    def hosts(self) -> tuple[Host, Host]:
        return (self.server, self.client)


@dataclass(frozen=True)
class PairsSource:
    """The pairs of a sweep and where they came from (an inventory path or a simulated cluster file)."""

    path: str
    pairs: tuple[ClusterPair, ...]
    simulated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def by_name(self) -> dict[str, ClusterPair]:
        return {p.name: p for p in self.pairs}

    def hosts(self) -> list[Host]:
        """Every host once, in inventory order."""
        seen: dict[str, Host] = {}
        for pair in self.pairs:
            for host in pair.hosts:
                seen.setdefault(host.name, host)
        return list(seen.values())


def _simulated(path: Path, doc: dict[str, Any]) -> PairsSource:
    sim = doc["simulated"]
    if not isinstance(sim, dict):
        raise ConfigError(f"{path}: simulated: expected a mapping, got {sim!r}")
    count = sim.get("pairs")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 4096:
        raise ConfigError(f"{path}: simulated.pairs: expected an integer 1..4096, got {count!r}")
    width = max(3, len(str(count - 1)))
    names = [f"sim-{i:0{width}d}" for i in range(count)]
    failing = sim.get("failing", [])
    if not isinstance(failing, list) or any(name not in names for name in failing):
        raise ConfigError(f"{path}: simulated.failing: expected a list of pair names out of {names[0]}…")
    fail_from = sim.get("fail_from_run", 0)
    if not isinstance(fail_from, int) or fail_from < 0:
        raise ConfigError(f"{path}: simulated.fail_from_run: expected an integer >= 0, got {fail_from!r}")
    classes = sim.get("classes", {})
    if not isinstance(classes, dict) or any(name not in names for name in classes):
        raise ConfigError(f"{path}: simulated.classes: expected a mapping of pair names to class names")
    pairs = []
    for name in names:
        behaviour = SimBehaviour(
            fail_from_run=fail_from if name in failing else None,
            hardware_class=str(classes.get(name, "sim")),
        )
        pairs.append(
            ClusterPair(
                name=name,
                server=Host(name=f"{name}-server", ansible_host="sim", address=f"sim://{name}/server"),
                client=Host(name=f"{name}-client", ansible_host="sim", address=f"sim://{name}/client"),
                sim=behaviour,
            )
        )
    return PairsSource(path=str(path), pairs=tuple(pairs), simulated=True)


def _from_inventory(path: Path) -> PairsSource:
    from demuxlab.inventory import load_inventory

    inventory = load_inventory(path)
    pairs = []
    for spec in inventory.pairs:
        hosts = []
        for side in (spec.server, spec.client):
            hosts.append(
                Host(
                    name=side.name,
                    ansible_host=side.ansible_host or side.name,
                    port=int(side.port or 22),
                    user=side.user,
                    key_file=str(side.key_file) if side.key_file else None,
                    address=side.address,
                    cpus=_cpus_text(side.cpus),
                    become=bool(side.become),
                    ssh_options=tuple(host_options(side.vars).items()),
                    cpus_shared=bool(side.vars.get("demuxlab_cpus_shared", False)),
                )
            )
        pairs.append(ClusterPair(name=spec.name, server=hosts[0], client=hosts[1]))
    if not pairs:
        raise ConfigError(f"{path}: pairs: the inventory defines no host pair")
    return PairsSource(path=str(path), pairs=tuple(pairs))


def host_options(host_vars: dict[str, object]) -> dict[str, str]:
    """``-o Key=Value`` pairs of the inventory's ``ansible_ssh_common_args`` as ssh_config lines."""
    out: dict[str, str] = {}
    args = shlex.split(str(host_vars.get("ansible_ssh_common_args") or ""))
    for i, arg in enumerate(args):
        opt = None
        if arg.startswith("-o") and len(arg) > 2:
            opt = arg[2:]
        elif arg == "-o" and i + 1 < len(args):
            opt = args[i + 1]
        if opt and "=" in opt:
            key, value = opt.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def _cpus_text(cpus: Any) -> str | None:
    if cpus is None:
        return None
    if isinstance(cpus, (list, tuple)):
        return ",".join(str(c) for c in cpus)
    return str(cpus)


def load_pairs(source: str | Path) -> PairsSource:
    """The pairs of an inventory directory/file, or of a simulated-cluster file."""
    path = Path(source)
    if path.is_file() and path.suffix == ".json":  # no PyYAML for JSON (a run process's start-up)
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the pairs source: {str(exc).splitlines()[0]}") from None
        if isinstance(doc, dict) and "simulated" in doc:
            return _simulated(path, doc)
    elif path.is_file() and path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read the pairs source: {str(exc).splitlines()[0]}") from None
        if isinstance(doc, dict) and "simulated" in doc:
            return _simulated(path, doc)
    if not path.exists():
        raise ConfigError(f"{path}: inventory not found (DEMUXLAB_INVENTORY or the workflow's `inventory`)")
    return _from_inventory(path)


def sim_facts(host: Host, hardware_class: str) -> dict[str, Any]:
    """Topology facts of a simulated host: two cores, one NUMA node, the class as the CPU model."""
    return {
        "hostname": host.name,
        "kernel": "sim",
        "cpu_model": f"simulated ({hardware_class})",
        "online_cpus": [0, 1],
        "cpus": [
            {"cpu": 0, "core": 0, "socket": 0, "node": 0},
            {"cpu": 1, "core": 1, "socket": 0, "node": 0},
        ],
        "numa_nodes": [{"node": 0, "cpus": [0, 1]}],
        "sockets": 1,
        "cores": 2,
        "threads_per_core": 1,
        "smt": False,
        "governor": "performance",
        "turbo": False,
        "irqbalance": False,
        "memory_bytes": 1 << 30,
        "collected_at": "1970-01-01T00:00:00Z",
    }


def _side_class(facts: dict[str, Any]) -> dict[str, Any]:
    out = {key: facts.get(key) for key in CLASS_FACTS}
    nodes = facts.get("numa_nodes")
    out["numa_nodes"] = len(nodes) if isinstance(nodes, list) else None
    return out


def hardware_class(server: dict[str, Any], client: dict[str, Any]) -> dict[str, Any]:
    """The hardware class of a pair from its hosts' facts: ``{"id": "hw-…", "server": …, "client": …}``.

    The id is the first 10 hex digits of the SHA-256 of the canonical JSON of both sides' class facts, so
    pairs built alike share it and any difference (another CPU, another kernel) separates them.
    """
    doc = {"server": _side_class(server), "client": _side_class(client)}
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return {"id": f"hw-{digest[:10]}", **doc}

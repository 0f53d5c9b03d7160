"""The pinning planner: which CPUs the server's and the client's threads run on (CONTRACTS.md §5).

Rules, in order:

1. Different hosts: each side uses its own host's CPUs.
2. Same host with several NUMA nodes: the nodes are split in halves, the server takes the first half
   (the larger one when the count is odd), the client the rest, so they share no cache or memory
   controller (seed 000 gave each side two of four sockets).
3. Same host with one node (or unknown nodes): the physical cores are split in halves the same way;
   SMT siblings stay with their core, so the two sides never share a core.
4. Within a side, one thread per physical core first: the first hardware thread of every core (in node,
   then core order), and only then second siblings, and so on.
5. Away from NIC interrupts (from the facts' ``nics``: what is configured, not what tuning asked for):
   within a side, physical cores whose CPUs receive a NIC IRQ (``effective_cpus``, else ``cpus``) come
   last, and on separate hosts cores on the NICs' NUMA node come first. An IRQ allowed on every CPU
   (not pinned, no effective affinity) cannot be avoided and is only noted. When the preferred cores are
   fewer than the threads, the plan falls back to the other cores and says so (``irq.<side>.fallback``).
   Facts without NIC IRQs (VMs, containers) leave the placement as rules 1–4 make it, and say so.
6. More threads than the side has CPUs is allowed: the CPU list is reused round-robin (thread *i* runs on
   CPU *i mod n*, as ``demux-server --cpus`` does) and the plan says ``oversubscribed``.

The CPU lists hold each CPU once, in thread order: thread *i* runs on ``cpus[i % len(cpus)]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from demuxlab.errors import ConfigError


@dataclass(frozen=True)
class Pinning:
    server_cpus: tuple[int, ...]
    client_cpus: tuple[int, ...]
    oversubscribed: bool
    same_host: bool
    notes: tuple[str, ...]
    irq: dict[str, Any] | None = None  # per side: the NIC IRQ cores avoided and why (rule 5)
    # ω, µs: the client's wake-up of a server thread asleep on the server's first CPU, measured before an
    # instrumented run on one host (demuxlab.launch.wake); None where not measured.
    wake_us: float | None = None
    # µs from a mutex's release to its waiter, asleep on the server's first CPU, holding it: measured with
    # wake_us (demuxlab.launch.wake); None where not measured.
    handoff_us: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "server_cpus": list(self.server_cpus),
            "client_cpus": list(self.client_cpus),
            "oversubscribed": self.oversubscribed,
            "same_host": self.same_host,
            "notes": list(self.notes),
            **({"irq": self.irq} if self.irq is not None else {}),
            **({"wake_us": self.wake_us} if self.wake_us is not None else {}),
            **({"handoff_us": self.handoff_us} if self.handoff_us is not None else {}),
        }


@dataclass(frozen=True)
class _Cpu:
    cpu: int
    core: int  # host-wide physical core; unknown cores count as one core per CPU
    node: int  # unknown nodes count as node 0


def _cpus_of(facts: dict[str, Any], side: str) -> list[_Cpu]:
    online = facts.get("online_cpus")
    rows = facts.get("cpus")
    if not rows and not online:
        raise ConfigError(f"{side} host facts: no CPUs listed (online_cpus and cpus are empty)")
    online_set = set(online) if online else None
    cpus: list[_Cpu] = []
    if rows:
        # Unknown cores get ids past every known one, so each stands alone and collides with nothing.
        spare = 1 + max((int(row["core"]) for row in rows if row.get("core") is not None), default=-1)
        for row in rows:
            cpu = int(row["cpu"])
            if online_set is not None and cpu not in online_set:
                continue
            core = row.get("core")
            node = row.get("node")
            cpus.append(_Cpu(cpu, int(core) if core is not None else spare + cpu, int(node or 0)))
    else:
        cpus = [_Cpu(int(cpu), int(cpu), 0) for cpu in online or []]
    if not cpus:
        raise ConfigError(f"{side} host facts: none of the listed CPUs is online")
    return sorted(cpus, key=lambda c: c.cpu)


def _cores_in_order(cpus: list[_Cpu]) -> list[list[_Cpu]]:
    """Physical cores ordered by (node, lowest CPU), each with its hardware threads in CPU order."""
    by_core: dict[int, list[_Cpu]] = {}
    for cpu in cpus:
        by_core.setdefault(cpu.core, []).append(cpu)
    cores = [sorted(threads, key=lambda c: c.cpu) for threads in by_core.values()]
    return sorted(cores, key=lambda threads: (threads[0].node, threads[0].cpu))


def _spread(cores: list[list[_Cpu]]) -> list[int]:
    """One CPU per core first, then each core's next sibling: rule 4."""
    order: list[int] = []
    depth = max((len(threads) for threads in cores), default=0)
    for level in range(depth):
        order.extend(threads[level].cpu for threads in cores if level < len(threads))
    return order


NO_NIC_INFO = "no NIC IRQ information in the facts (no physical NIC: VM or container)"


@dataclass(frozen=True)
class _Irqs:
    targets: dict[int, list[str]]  # CPU → the NIC IRQs delivered to it ("eth0:40")
    nic_node: int | None  # the one NUMA node of the host's NICs, if they agree
    nics: list[str]
    unpinned: list[str]  # IRQs allowed on every CPU: cannot be avoided
    reason: str | None  # why there is nothing to avoid
    chosen_by: str = "every physical NIC"  # or the route to the peer that picked the traffic's NIC(s)


def _traffic_nics(nics: list[Any], peer: str | None) -> tuple[list[Any], str]:
    """The NICs that carry traffic to ``peer`` (the longest IPv4 route in the facts' ``routes``), or every
    NIC where the peer or the routes are unknown."""
    import ipaddress

    if not peer:
        return nics, "every physical NIC"
    try:
        addr = ipaddress.ip_address(peer)
    except ValueError:
        return nics, f"every physical NIC (peer {peer!r} is not an IP address)"
    best, chosen = -1, []
    for nic in nics:
        for route in nic.get("routes") or []:
            try:
                net = ipaddress.ip_network(route, strict=False)
            except ValueError:
                continue
            if addr.version == net.version and addr in net:
                if net.prefixlen > best:
                    best, chosen = net.prefixlen, [nic]
                elif net.prefixlen == best and nic not in chosen:
                    chosen.append(nic)
    if not chosen:
        return nics, f"every physical NIC (none routes {peer})"
    return chosen, f"the route to {peer}"


def _irqs_of(facts: dict[str, Any], cpus: list[_Cpu], peer: str | None = None) -> _Irqs:
    nics = facts.get("nics")
    if not isinstance(nics, list) or not nics:
        return _Irqs({}, None, [], [], NO_NIC_INFO)
    nics, chosen_by = _traffic_nics([n for n in nics if isinstance(n, dict)], peer)
    online = {c.cpu for c in cpus}
    targets: dict[int, list[str]] = {}
    unpinned: list[str] = []
    nodes = {nic.get("numa_node") for nic in nics if isinstance(nic, dict)}
    names = [str(nic.get("name")) for nic in nics if isinstance(nic, dict)]
    for nic in nics:
        if not isinstance(nic, dict):
            continue
        for row in nic.get("irqs") or []:
            label = f"{nic.get('name')}:{row.get('irq')}"
            cpus_to = row.get("effective_cpus") or row.get("cpus")
            if not cpus_to:
                continue
            hit = set(cpus_to) & online
            if len(online) > 1 and hit == online and not row.get("effective_cpus"):
                unpinned.append(label)
                continue
            for cpu in hit:
                targets.setdefault(cpu, []).append(label)
    nic_node = next(iter(nodes)) if len(nodes) == 1 and None not in nodes else None
    reason = None
    if not targets and nic_node is None:
        reason = (
            f"NICs {', '.join(names)}: no IRQ pinned to a usable CPU"
            + (f" ({len(unpinned)} allowed on every CPU)" if unpinned else "")
            + " and no single NUMA node"
        )
    return _Irqs(targets, nic_node, names, unpinned, reason, chosen_by)


def _away_from_irqs(
    side: str, cores: list[list[_Cpu]], irqs: _Irqs, threads: int, prefer_node: bool
) -> tuple[list[list[_Cpu]], dict[str, Any], str]:
    """Rule 5: the side's cores reordered (NIC-local IRQ-free cores first, IRQ cores last), the record of
    what was avoided, and a note."""
    if irqs.reason is not None:
        return (
            cores,
            {"applied": False, "reason": irqs.reason},
            f"{side}: placement ignores NIC IRQs: {irqs.reason}",
        )
    node = irqs.nic_node if prefer_node else None

    def tier(threads_of_core: list[_Cpu]) -> int:
        if any(c.cpu in irqs.targets for c in threads_of_core):
            return 2
        return 0 if node is None or threads_of_core[0].node == node else 1

    ordered = sorted(cores, key=tier)  # stable: rules 1-4 order within a tier
    preferred = sum(1 for t in ordered if tier(t) == 0)
    avoided = sorted(c.cpu for t in ordered if tier(t) == 2 for c in t)
    fallback: str | None = None
    if threads > preferred:
        spill = ordered[preferred:threads]
        plural = ("s" if threads != 1 else "", "s" if preferred != 1 else "")
        fallback = (
            f"{threads} thread{plural[0]} but {preferred} physical core{plural[1]} "
            f"{'on NIC node ' + str(node) + ' ' if node is not None else ''}free of NIC IRQs: also using "
            + ("cores that receive NIC IRQs" if any(tier(t) == 2 for t in spill) else "cores on other nodes")
        )
    doc: dict[str, Any] = {
        "applied": True,
        "nics": irqs.nics,
        "nics_chosen_by": irqs.chosen_by,
        "nic_node": node,
        "avoided_cpus": avoided,
        "irq_cpus": {str(cpu): labels for cpu, labels in sorted(irqs.targets.items())},
        "unpinned_irqs": irqs.unpinned,
        "fallback": fallback,
    }
    where = f" on NIC node {node}" if node is not None else ""
    nics = ", ".join(irqs.nics)
    note = f"{side}: {preferred} core(s){where} free of IRQs of {nics} ({irqs.chosen_by}) preferred"
    if avoided:
        note += f"; IRQ CPUs {','.join(map(str, avoided))} avoided"
    if irqs.unpinned:
        note += f"; {len(irqs.unpinned)} IRQ(s) allowed on every CPU cannot be avoided"
    if fallback:
        note += f"; fallback: {fallback}"
    return ordered, doc, note


def _assign(pool: list[int], threads: int) -> tuple[tuple[int, ...], bool]:
    return tuple(pool[: min(threads, len(pool))]), threads > len(pool)


def _describe(side: str, threads: int, cpus: tuple[int, ...], oversubscribed: bool) -> str | None:
    if not oversubscribed:
        return None
    return (
        f"{side}: {threads} threads on {len(cpus)} CPU{'s' if len(cpus) != 1 else ''} "
        f"({','.join(map(str, cpus))}): oversubscribed, CPUs reused round-robin"
    )


def plan_pinning(
    server: dict[str, Any],
    client: dict[str, Any],
    server_threads: int,
    client_threads: int,
    same_host: bool,
    *,
    server_peer: str | None = None,
    client_peer: str | None = None,
) -> Pinning:
    """Plan the CPUs of both sides from their hosts' topology facts (the same facts when ``same_host``).

    ``server_peer``/``client_peer``: the address each side's traffic goes to (separate hosts: the client's
    and the server's pair address); rule 5 then counts only the NICs routing it."""
    if server_threads < 1 or client_threads < 1:
        raise ConfigError(
            f"plan_pinning: thread counts must be >= 1 (server {server_threads}, client {client_threads})"
        )
    if same_host:
        pools, notes, irq_doc, shared = _one_host(server, server_threads, client_threads)
    else:
        pools, notes, irq_doc = _two_hosts(
            server, client, server_threads, client_threads, server_peer, client_peer
        )
        shared = False
    server_cpus, server_over = _assign(pools[0], server_threads)
    client_cpus, client_over = _assign(pools[1], client_threads)
    for note in (
        _describe("server", server_threads, server_cpus, server_over),
        _describe("client", client_threads, client_cpus, client_over),
    ):
        if note is not None:
            notes.append(note)
    server_core = {c.cpu: c.core for c in _cpus_of(server, "server")}
    client_core = server_core if same_host else {c.cpu: c.core for c in _cpus_of(client, "client")}
    for side, cpus, core_of in (("server", server_cpus, server_core), ("client", client_cpus, client_core)):
        used = [core_of[cpu] for cpu in cpus]
        if len(set(used)) < len(used):
            notes.append(f"{side}: SMT siblings in use (more threads than the side's physical cores)")
    return Pinning(
        server_cpus=server_cpus,
        client_cpus=client_cpus,
        oversubscribed=server_over or client_over or shared,
        same_host=same_host,
        notes=tuple(notes),
        irq=irq_doc,
    )


Pools = tuple[list[int], list[int]]  # the server's and the client's CPUs, in the order threads take them


def _two_hosts(
    server: dict[str, Any],
    client: dict[str, Any],
    server_threads: int,
    client_threads: int,
    server_peer: str | None,
    client_peer: str | None,
) -> tuple[Pools, list[str], dict[str, Any]]:
    """Rule 1 with rules 4 and 5: each side on its own host, away from the NICs routing its traffic."""
    server_cpus, client_cpus = _cpus_of(server, "server"), _cpus_of(client, "client")
    server_cores, server_irq, server_note = _away_from_irqs(
        "server",
        _cores_in_order(server_cpus),
        _irqs_of(server, server_cpus, server_peer),
        server_threads,
        True,
    )
    client_cores, client_irq, client_note = _away_from_irqs(
        "client",
        _cores_in_order(client_cpus),
        _irqs_of(client, client_cpus, client_peer),
        client_threads,
        True,
    )
    notes = ["separate hosts: each side uses its own host's CPUs", server_note, client_note]
    return (_spread(server_cores), _spread(client_cores)), notes, {"server": server_irq, "client": client_irq}


def _one_host(
    facts: dict[str, Any], server_threads: int, client_threads: int
) -> tuple[Pools, list[str], dict[str, Any], bool]:
    """Rules 2 and 3 with 4 and 5: one host split between the sides (by NUMA node, else by physical core),
    IRQ cores last on each side; whether both sides share the only core."""
    cpus = _cpus_of(facts, "server")
    cores = _cores_in_order(cpus)
    nodes = sorted({threads[0].node for threads in cores})
    if len(nodes) >= 2:
        half = (len(nodes) + 1) // 2
        server_nodes, client_nodes = set(nodes[:half]), set(nodes[half:])
        server_cores = [t for t in cores if t[0].node in server_nodes]
        client_cores = [t for t in cores if t[0].node in client_nodes]
        split = (
            f"NUMA split: server on node{'s' if half > 1 else ''} {sorted(server_nodes)}, "
            f"client on node{'s' if len(client_nodes) > 1 else ''} {sorted(client_nodes)}"
        )
    elif len(cores) >= 2:
        half = (len(cores) + 1) // 2
        server_cores, client_cores = cores[:half], cores[half:]
        split = (
            f"one NUMA node: server on {len(server_cores)} of {len(cores)} physical cores, "
            f"client on the other {len(client_cores)}"
        )
    else:
        server_cores = client_cores = cores
        split = "one physical core: server and client share it"
    shared = server_cores is client_cores
    # One host: the traffic is on loopback and the NUMA split decides the nodes; IRQ cores go last.
    irqs = _irqs_of(facts, cpus, None)
    server_cores, server_irq, server_note = _away_from_irqs(
        "server", server_cores, irqs, server_threads, False
    )
    client_cores, client_irq, client_note = _away_from_irqs(
        "client", client_cores, irqs, client_threads, False
    )
    irq_notes = [server_note, client_note]
    if not server_irq["applied"] and not client_irq["applied"]:
        irq_notes = [server_note.replace("server: ", "")]
    pools = (_spread(server_cores), _spread(client_cores))
    return pools, [split, *irq_notes], {"server": server_irq, "client": client_irq}, shared

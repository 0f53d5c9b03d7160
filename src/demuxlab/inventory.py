"""Host pairs from an Ansible inventory (``playbooks/README.md`` documents the format).

An inventory is a directory holding ``hosts.yml`` (Ansible's YAML inventory format) and optionally
``group_vars/<group>.yml`` and ``host_vars/<host>.yml``. The group ``demuxlab_pairs`` has one child group
per pair; each pair group holds exactly two hosts, one with ``demuxlab_role: server`` and one with
``demuxlab_role: client``.

The file is read here with YAML, not through ``ansible-inventory --list``: that would cost a second and an
Ansible installation on every call (the workflow and the launcher call this per run), and its merged output
no longer says which file a bad value came from, so the error could not read ``file: field: problem``.
Variables are merged the way Ansible merges them (groups by depth then name, ``group_vars/`` over the
inventory file's group vars, host vars over group vars, ``host_vars/`` over inline host vars); a test
checks the result against ``ansible-inventory --list`` for the shipped inventories.

(Over 500 lines on purpose: one concern, Ansible's merge order and each variable's check, read top to
bottom; the value checks are the bulk and only make sense beside the merge that feeds them.)
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from demuxlab.errors import ConfigError
from demuxlab.topology import format_cpu_list, parse_cpu_list

PAIRS_GROUP = "demuxlab_pairs"
ROLES = ("server", "client")
INVENTORY_FILES = ("hosts.yml", "hosts.yaml")

# Every demuxlab_* variable the platform reads; any other demuxlab_* name is a typo and refused.
KNOWN_VARS: dict[str, str] = {
    "demuxlab_role": "server | client (required)",
    "demuxlab_address": "address on the pair network (default: ansible_host; 127.0.0.1 for local)",
    "demuxlab_cpus": "CPU list the measured process is pinned to, e.g. 0-7,16-23 (default: all)",
    "demuxlab_cpus_shared": "true when this host's CPUs are shared with other hosts (testbed)",
    "demuxlab_testbed": "true on hosts made by `demuxlab testbed`",
}

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


@dataclass(frozen=True)
class HostSpec:
    """One host of a pair, with its connection settings as Ansible will use them."""

    name: str
    ansible_host: str
    port: int
    user: str | None
    key_file: Path | None
    address: str
    cpus: str | None
    become: bool
    pair: str
    role: str
    connection: str  # ansible_connection: "ssh" or "local"
    source: Path  # the file that lists the host
    vars: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def cpu_list(self) -> list[int] | None:
        return parse_cpu_list(self.cpus) if self.cpus is not None else None

    @property
    def is_local(self) -> bool:
        return self.connection == "local"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pair": self.pair,
            "role": self.role,
            "ansible_host": self.ansible_host,
            "port": self.port,
            "user": self.user,
            "key_file": str(self.key_file) if self.key_file is not None else None,
            "address": self.address,
            "cpus": self.cpus,
            "become": self.become,
            "connection": self.connection,
            "cpus_shared": bool(self.vars.get("demuxlab_cpus_shared", False)),
        }


@dataclass(frozen=True)
class PairSpec:
    """A server host and the client host that loads it."""

    name: str
    server: HostSpec
    client: HostSpec

    @property
    def hosts(self) -> tuple[HostSpec, HostSpec]:
        return (self.server, self.client)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "server": self.server.to_json(), "client": self.client.to_json()}


@dataclass(frozen=True)
class Inventory:
    path: Path  # the inventory directory
    file: Path  # its hosts.yml
    pairs: list[PairSpec]

    @property
    def hosts(self) -> list[HostSpec]:
        return [host for pair in self.pairs for host in pair.hosts]

    def pair(self, name: str) -> PairSpec:
        for pair in self.pairs:
            if pair.name == name:
                return pair
        known = ", ".join(p.name for p in self.pairs)
        raise ConfigError(f"{self.file}: pair {name!r} is not in this inventory (pairs: {known})")

    def host(self, name: str) -> HostSpec:
        for host in self.hosts:
            if host.name == name:
                return host
        raise ConfigError(f"{self.file}: host {name!r} is not in this inventory")

    def to_json(self) -> dict[str, Any]:
        return {"inventory": str(self.path), "pairs": [pair.to_json() for pair in self.pairs]}


# --- reading ------------------------------------------------------------------------------------------------


def _load_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None


def _mapping(value: Any, source: Path, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {where}: expected a mapping, got {type(value).__name__} {value!r}")
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(f"{source}: {where}: key {key!r} is not a string")
    return value


@dataclass
class _Group:
    name: str
    depth: int = 0
    parents: set[str] = field(default_factory=set)
    vars: dict[str, Any] = field(default_factory=dict)
    var_source: dict[str, str] = field(default_factory=dict)  # var -> "file: path"
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


@dataclass
class _Host:
    name: str
    groups: set[str] = field(default_factory=set)
    vars: dict[str, Any] = field(default_factory=dict)
    var_source: dict[str, str] = field(default_factory=dict)


class _Reader:
    def __init__(self, file: Path) -> None:
        self.file = file
        self.groups: dict[str, _Group] = {}
        self.hosts: dict[str, _Host] = {}

    def group(self, name: str, where: str, doc: Any, depth: int, parent: str | None) -> None:
        body = _mapping(doc, self.file, where)
        unknown = set(body) - {"hosts", "vars", "children"}
        if unknown:
            raise ConfigError(
                f"{self.file}: {where}: unknown key {sorted(unknown)[0]!r} "
                "(a group has hosts, vars, children)"
            )
        grp = self.groups.setdefault(name, _Group(name))
        grp.depth = max(grp.depth, depth)
        if parent is not None:
            grp.parents.add(parent)
        for var, value in _mapping(body.get("vars"), self.file, f"{where}.vars").items():
            grp.vars[var] = value
            grp.var_source[var] = f"{self.file}: {where}.vars.{var}"
        for host, hvars in _mapping(body.get("hosts"), self.file, f"{where}.hosts").items():
            hwhere = f"{where}.hosts.{host}"
            entry = self.hosts.setdefault(host, _Host(host))
            entry.groups.add(name)
            if host not in grp.hosts:
                grp.hosts.append(host)
            for var, value in _mapping(hvars, self.file, hwhere).items():
                entry.vars[var] = value
                entry.var_source[var] = f"{self.file}: {hwhere}.{var}"
        for child, cdoc in _mapping(body.get("children"), self.file, f"{where}.children").items():
            if child == name or child == "all":
                raise ConfigError(f"{self.file}: {where}.children.{child}: a group cannot contain {child!r}")
            if child not in grp.children:
                grp.children.append(child)
            self.group(child, f"{where}.children.{child}", cdoc, depth + 1, name)


def _ancestors(groups: dict[str, _Group], direct: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(direct)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(groups[name].parents)
    seen.add("all")
    return seen


def _vars_files(inv_dir: Path, sub: str, name: str) -> list[Path]:
    base = inv_dir / sub
    found = [base / f"{name}{ext}" for ext in (".yml", ".yaml", "") if (base / f"{name}{ext}").is_file()]
    folder = base / name
    if folder.is_dir():
        found.extend(sorted(p for p in folder.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file()))
    return found


def _merge_file_vars(target: dict[str, Any], sources: dict[str, str], path: Path) -> None:
    for var, value in _mapping(_load_yaml(path), path, "(top level)").items():
        target[var] = value
        sources[var] = f"{path}: {var}"


def _resolve_inventory_file(path: Path) -> tuple[Path, Path]:
    if path.is_dir():
        for name in INVENTORY_FILES:
            if (path / name).is_file():
                return path, path / name
        raise ConfigError(f"{path}: not an inventory: no {' or '.join(INVENTORY_FILES)} in it")
    if path.is_file():
        return path.parent, path
    raise ConfigError(f"{path}: inventory not found")


def load_inventory(path: Path) -> Inventory:
    """Read the pairs of the inventory at ``path`` (a directory, or its ``hosts.yml``).

    Raises :class:`ConfigError` reading ``file: field: problem`` for anything malformed.
    """
    inv_dir, file = _resolve_inventory_file(Path(path))
    doc = _load_yaml(file)
    top = _mapping(doc, file, "(top level)")
    if "all" not in top:
        raise ConfigError(f"{file}: all: missing (an inventory starts with the group 'all')")
    extra = set(top) - {"all"}
    if extra:
        raise ConfigError(f"{file}: {sorted(extra)[0]}: top-level groups go under all.children")
    reader = _Reader(file)
    reader.group("all", "all", top["all"], 0, None)
    if PAIRS_GROUP not in reader.groups:
        raise ConfigError(
            f"{file}: all.children.{PAIRS_GROUP}: missing (the group whose children are the pairs)"
        )
    pairs_group = reader.groups[PAIRS_GROUP]
    if pairs_group.hosts:
        raise ConfigError(
            f"{file}: {PAIRS_GROUP}.hosts.{pairs_group.hosts[0]}: hosts belong in a pair group, "
            f"a child of {PAIRS_GROUP}"
        )
    if not pairs_group.children:
        raise ConfigError(f"{file}: {PAIRS_GROUP}.children: no pairs (expected one child group per pair)")

    # group_vars/ files override the inventory file's group vars (Ansible's precedence).
    for name, grp in reader.groups.items():
        for vfile in _vars_files(inv_dir, "group_vars", name):
            _merge_file_vars(grp.vars, grp.var_source, vfile)

    pair_of: dict[str, str] = {}
    pairs: list[PairSpec] = []
    for pair_name in pairs_group.children:
        pgrp = reader.groups[pair_name]
        where = f"{PAIRS_GROUP}.children.{pair_name}"
        if pgrp.children:
            raise ConfigError(
                f"{file}: {where}.children: a pair group holds its two hosts directly, not child groups"
            )
        if len(pgrp.hosts) != 2:
            raise ConfigError(
                f"{file}: {where}.hosts: a pair has exactly 2 hosts (a server and a client), "
                f"found {len(pgrp.hosts)}"
            )
        by_role: dict[str, HostSpec] = {}
        for host_name in pgrp.hosts:
            if host_name in pair_of:
                raise ConfigError(
                    f"{file}: {where}.hosts.{host_name}: host is already in pair {pair_of[host_name]!r}"
                    " (a host belongs to one pair)"
                )
            pair_of[host_name] = pair_name
            spec, role_where = _host_spec(reader, inv_dir, host_name, pair_name, file)
            if spec.role in by_role:
                raise ConfigError(
                    f"{role_where}: pair {pair_name!r} has two {spec.role} hosts "
                    f"({by_role[spec.role].name}, {host_name}); one server and one client"
                )
            by_role[spec.role] = spec
        pair = PairSpec(name=pair_name, server=by_role["server"], client=by_role["client"])
        _check_pair_addresses(pair, file)
        pairs.append(pair)
    return Inventory(path=inv_dir.resolve(), file=file, pairs=pairs)


def _host_spec(reader: _Reader, inv_dir: Path, name: str, pair: str, file: Path) -> tuple[HostSpec, str]:
    host = reader.hosts[name]
    merged: dict[str, Any] = {}
    source: dict[str, str] = {}
    groups = sorted(
        (reader.groups[g] for g in _ancestors(reader.groups, host.groups)), key=lambda g: (g.depth, g.name)
    )
    for grp in groups:
        merged.update(grp.vars)
        source.update(grp.var_source)
    merged.update(host.vars)
    source.update(host.var_source)
    for vfile in _vars_files(inv_dir, "host_vars", name):
        _merge_file_vars(merged, source, vfile)

    def where(var: str) -> str:
        return source.get(var, f"{file}: {PAIRS_GROUP}.children.{pair}.hosts.{name}.{var}")

    def fail(var: str, problem: str) -> ConfigError:
        return ConfigError(f"{where(var)}: {problem}")

    for var, value in merged.items():
        if var.startswith("demuxlab_") and var not in KNOWN_VARS:
            raise fail(var, f"unknown variable (known: {', '.join(sorted(KNOWN_VARS))})")
        if isinstance(value, str) and "{{" in value and var in _TEMPLATE_FREE:
            raise fail(var, f"templates are not supported here, got {value!r}")

    role = merged.get("demuxlab_role")
    if role is None:
        raise fail("demuxlab_role", "missing (server or client)")
    if role not in ROLES:
        raise fail("demuxlab_role", f"expected server or client, got {role!r}")

    connection = _str_or_none(merged.get("ansible_connection", "ssh"), "ansible_connection", fail) or "ssh"
    if connection not in ("ssh", "local", "paramiko", "smart"):
        raise fail("ansible_connection", f"expected ssh or local, got {connection!r}")
    connection = "local" if connection == "local" else "ssh"

    ansible_host = _str_or_none(merged.get("ansible_host"), "ansible_host", fail) or name
    if any(ch.isspace() for ch in ansible_host):
        raise fail("ansible_host", f"not a host name or address: {ansible_host!r}")

    port_value = merged.get("ansible_port", 22)
    port = _int(port_value, "ansible_port", fail)
    if not 1 <= port <= 65535:
        raise fail("ansible_port", f"expected a TCP port 1-65535, got {port_value!r}")

    user = _str_or_none(merged.get("ansible_user"), "ansible_user", fail)
    key = _str_or_none(merged.get("ansible_ssh_private_key_file"), "ansible_ssh_private_key_file", fail)
    key_file: Path | None = None
    if key is not None:
        key_path = Path(key).expanduser()
        key_file = key_path if key_path.is_absolute() else (inv_dir / key_path)
    become = _bool(merged.get("ansible_become", False), "ansible_become", fail)

    default_address = "127.0.0.1" if connection == "local" else ansible_host
    address = _str_or_none(merged.get("demuxlab_address"), "demuxlab_address", fail) or default_address
    if any(ch.isspace() for ch in address) or address.startswith("-"):
        raise fail("demuxlab_address", f"not a host name or address: {address!r}")

    cpus: str | None = None
    cpus_value = merged.get("demuxlab_cpus")
    if cpus_value is not None:
        text = str(cpus_value) if isinstance(cpus_value, int) and not isinstance(cpus_value, bool) else None
        if isinstance(cpus_value, str):
            text = cpus_value
        if text is None:
            raise fail("demuxlab_cpus", f"expected a CPU list such as 0-3,8, got {cpus_value!r}")
        if any(part.count("-") == 1 and _descending(part) for part in text.split(",")):
            raise fail("demuxlab_cpus", f"range runs backwards in {text!r}")
        try:
            cpu_list = parse_cpu_list(text)
        except ValueError:
            raise fail("demuxlab_cpus", f"not a CPU list (such as 0-3,8): {text!r}") from None
        if not cpu_list or min(cpu_list) < 0:
            raise fail("demuxlab_cpus", f"not a CPU list (such as 0-3,8): {text!r}")
        cpus = format_cpu_list(cpu_list)
    _bool(merged.get("demuxlab_cpus_shared", False), "demuxlab_cpus_shared", fail)
    _bool(merged.get("demuxlab_testbed", False), "demuxlab_testbed", fail)

    spec = HostSpec(
        name=name,
        ansible_host=ansible_host,
        port=port,
        user=user,
        key_file=key_file,
        address=address,
        cpus=cpus,
        become=become,
        pair=pair,
        role=str(role),
        connection=connection,
        source=file,
        vars=merged,
    )
    return spec, where("demuxlab_role")


_TEMPLATE_FREE = frozenset(
    {"ansible_host", "ansible_port", "ansible_user", "demuxlab_role", "demuxlab_address", "demuxlab_cpus"}
)


def _descending(part: str) -> bool:
    low, high = part.split("-", 1)
    try:
        return int(low) > int(high)
    except ValueError:
        return False


def _str_or_none(value: Any, var: str, fail: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise fail(var, f"expected a string, got {value!r}")
    text = str(value).strip()
    if not text:
        raise fail(var, "empty")
    return text


def _int(value: Any, var: str, fail: Any) -> int:
    if isinstance(value, bool):
        raise fail(var, f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise fail(var, f"expected an integer, got {value!r}")


def _bool(value: Any, var: str, fail: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in (
        "true",
        "yes",
        "on",
        "1",
        "false",
        "no",
        "off",
        "0",
    ):
        return value.strip().lower() in ("true", "yes", "on", "1")
    raise fail(var, f"expected true or false, got {value!r}")


def _is_loopback(address: str) -> bool:
    if address.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _check_pair_addresses(pair: PairSpec, file: Path) -> None:
    """Loopback is only an address on a pair whose two hosts are this machine (inventories/local)."""
    both_local = all(h.is_local or _is_loopback(h.ansible_host) for h in pair.hosts)

    def where(host: HostSpec) -> str:
        return f"{file}: {PAIRS_GROUP}.children.{pair.name}.hosts.{host.name}"

    for host in pair.hosts:
        if _is_loopback(host.address) and not both_local:
            raise ConfigError(
                f"{where(host)}.demuxlab_address: {host.address!r} is loopback, but pair {pair.name!r} "
                "spans two machines: give the address the other host reaches it at"
            )
    server, client = pair.hosts
    if server.address == client.address and not both_local:
        raise ConfigError(
            f"{where(client)}.demuxlab_address: {client.address!r} is also the server's address "
            f"in pair {pair.name!r}"
        )


def format_pairs_table(inventory: Inventory) -> str:
    """The pairs as an aligned text table (``demuxlab pairs --inventory``)."""
    header = ("pair", "server", "server address", "server cpus", "client", "client address", "client cpus")
    rows = [header]
    for pair in inventory.pairs:
        s, c = pair.server, pair.client

        def cpus(h: HostSpec) -> str:
            text = h.cpus or "all"
            return text + (" (shared)" if h.vars.get("demuxlab_cpus_shared") else "")

        rows.append((pair.name, s.name, s.address, cpus(s), c.name, c.address, cpus(c)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )

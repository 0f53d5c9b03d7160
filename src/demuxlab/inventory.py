"""Host pairs from an Ansible inventory (``playbooks/README.md`` documents the format).

An inventory is a directory holding ``hosts.yml`` (Ansible's YAML inventory format) and optionally
``group_vars/<group>.yml`` and ``host_vars/<host>.yml``. The group ``demuxlab_pairs`` has one child group
per pair; each pair group holds exactly two hosts, one with ``demuxlab_role: server`` and one with
``demuxlab_role: client``.

Ansible reads it: ``ansible-inventory -i hosts.yml --list`` gives the groups, their hosts and each host's
variables merged in Ansible's own order (``group_vars/``, ``host_vars/``, groups by depth). What this module
keeps is demuxlab's: the shape it asks of the file (no key Ansible would skip, a ``demuxlab_pairs`` group
of two-host pair groups), each variable's check, and where a bad value is written, so that an error reads
``file: field: problem`` (the merged view no longer says which file a value came from: the first place of
the host's own, then of its groups', that writes the very value is named). The merged view is kept in
``<state>/cache/inventory/`` under a hash of the files Ansible read and of its ``ANSIBLE_*`` settings: a
run that loads the inventory again does not pay ansible-inventory's second unless one of them changed.

(Over 500 lines on purpose: one concern, an inventory read as demuxlab's pairs. Ansible's merge is Ansible's
now; what is left is each variable's check and naming the file a bad value is written in, which share the
same walk over the host's places, and the cache of the merged view that the walk reads.)
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from demuxlab.errors import ConfigError
from demuxlab.jsonio import write_json_atomic
from demuxlab.paths import state_dir
from demuxlab.topology import format_cpu_list, parse_cpu_list

PAIRS_GROUP = "demuxlab_pairs"
ROLES = ("server", "client")
INVENTORY_FILES = ("hosts.yml", "hosts.yaml")
CACHE_KEPT = 64  # Ansible's views kept (the newest; each a few kB)

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


# A place of the inventory that writes variables: its label ("file: field." or "file: ") and the variables.
Place = tuple[str, dict[str, Any]]


@dataclass
class _Places:
    """The shape hosts.yml must have (demuxlab's check: Ansible would skip an unknown key with a warning),
    and every place of the inventory that writes a group's or a host's variables, in the order written:
    hosts.yml's entries and ``group_vars/``, ``host_vars/`` (each file checked here, so that a broken one
    is named as ``file: problem``)."""

    file: Path
    inv_dir: Path
    groups: dict[str, list[Place]] = field(default_factory=dict)
    hosts: dict[str, list[Place]] = field(default_factory=dict)

    def _new(self, owners: dict[str, list[Place]], sub: str, name: str) -> list[Place]:
        if name not in owners:
            files = _vars_files(self.inv_dir, sub, name)
            owners[name] = [(f"{p}: ", _mapping(_load_yaml(p), p, "(top level)")) for p in files]
        return owners[name]

    def group(self, name: str, where: str, doc: Any) -> None:
        body = _mapping(doc, self.file, where)
        unknown = set(body) - {"hosts", "vars", "children"}
        if unknown:
            raise ConfigError(
                f"{self.file}: {where}: unknown key {sorted(unknown)[0]!r} "
                "(a group has hosts, vars, children)"
            )
        gvars = _mapping(body.get("vars"), self.file, f"{where}.vars")
        self._new(self.groups, "group_vars", name).insert(0, (f"{self.file}: {where}.vars.", gvars))
        for host, hvars in _mapping(body.get("hosts"), self.file, f"{where}.hosts").items():
            hwhere = f"{where}.hosts.{host}"
            own = self._new(self.hosts, "host_vars", host)
            own.insert(0, (f"{self.file}: {hwhere}.", _mapping(hvars, self.file, hwhere)))
        for child, cdoc in _mapping(body.get("children"), self.file, f"{where}.children").items():
            if child == name or child == "all":
                raise ConfigError(f"{self.file}: {where}.children.{child}: a group cannot contain {child!r}")
            self.group(child, f"{where}.children.{child}", cdoc)


def _vars_files(inv_dir: Path, sub: str, name: str) -> list[Path]:
    base = inv_dir / sub
    found = [base / f"{name}{ext}" for ext in (".yml", ".yaml", "") if (base / f"{name}{ext}").is_file()]
    folder = base / name
    if folder.is_dir():
        found.extend(sorted(p for p in folder.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file()))
    return found


def _resolve_inventory_file(path: Path) -> tuple[Path, Path]:
    if path.is_dir():
        for name in INVENTORY_FILES:
            if (path / name).is_file():
                return path, path / name
        raise ConfigError(f"{path}: not an inventory: no {' or '.join(INVENTORY_FILES)} in it")
    if path.is_file():
        return path.parent, path
    raise ConfigError(f"{path}: inventory not found")


# --- Ansible's merged view -----------------------------------------------------------------------------


def _merged_view(file: Path, inv_dir: Path) -> dict[str, Any]:
    """``ansible-inventory -i file --list``'s JSON (groups, their hosts and children, ``_meta.hostvars``),
    from the cache while what Ansible reads is unchanged."""
    beside = Path(sys.executable).with_name("ansible-inventory")  # the venv's, as the playbooks run it
    exe = str(beside) if os.access(beside, os.X_OK) else shutil.which("ansible-inventory")
    if exe is None:
        raise ConfigError(f"{file}: ansible-inventory not found: Ansible reads the inventory (`make setup`)")
    key = hashlib.sha256(f"{exe} {os.stat(exe).st_mtime_ns}".encode())
    key.update(repr(sorted((k, v) for k, v in os.environ.items() if k.startswith("ANSIBLE_"))).encode())
    # What it reads: the file, group_vars/ and host_vars/ beside it, and the configuration files it would
    # (it runs in the inventory's folder: the caller's working directory does not count).
    configs = [inv_dir / "ansible.cfg", Path("~/.ansible.cfg").expanduser(), Path("/etc/ansible/ansible.cfg")]
    subs = [p for sub in ("group_vars", "host_vars") for p in sorted((inv_dir / sub).rglob("*"))]
    for path in (p for p in (file, *configs, *subs) if p.is_file()):
        key.update(f"\0{path.resolve()}\0".encode() + hashlib.sha256(path.read_bytes()).digest())
    cached = state_dir() / "cache" / "inventory" / f"{key.hexdigest()}.json"
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads(cached.read_text()))
    # hosts.yml is Ansible's YAML format: read by that plugin alone, and a file it cannot parse fails.
    env = {**os.environ, "ANSIBLE_INVENTORY_ENABLED": "yaml", "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"}
    try:
        argv = [exe, "-i", str(file.resolve()), "--list"]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=inv_dir)
        doc = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise ConfigError(f"{file}: ansible-inventory could not read it: {exc}") from None
    if not isinstance(doc, dict):
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        raise ConfigError(f"{file}: ansible-inventory: {lines[-1] if lines else f'exit {proc.returncode}'}")
    with contextlib.suppress(OSError):  # a read-only state folder: the next call asks Ansible again
        write_json_atomic(cached, doc)
        for old in sorted(cached.parent.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-CACHE_KEPT]:
            old.unlink()
    return doc


def _group(view: dict[str, Any], name: str, part: str) -> list[str]:
    """A group's ``hosts`` or ``children`` in Ansible's view (an empty group is left out of it)."""
    return list(view.get(name, {}).get(part, []))


def _groups_of(view: dict[str, Any], host: str) -> list[str]:
    """Every group that holds ``host``, directly or through its child groups (``all`` among them)."""
    found = {g for g in view if host in _group(view, g, "hosts")}
    while grown := {g for g in view if set(_group(view, g, "children")) & found} - found:
        found |= grown
    return [g for g in view if g in found or g == "all"]


# --- the pairs ---------------------------------------------------------------------------------------------


def load_inventory(path: Path) -> Inventory:
    """Read the pairs of the inventory at ``path`` (a directory, or its ``hosts.yml``) through Ansible.

    Raises :class:`ConfigError` reading ``file: field: problem`` for anything malformed.
    """
    inv_dir, file = _resolve_inventory_file(Path(path))
    top = _mapping(_load_yaml(file), file, "(top level)")
    if "all" not in top:
        raise ConfigError(f"{file}: all: missing (an inventory starts with the group 'all')")
    extra = set(top) - {"all"}
    if extra:
        raise ConfigError(f"{file}: {sorted(extra)[0]}: top-level groups go under all.children")
    places = _Places(file, inv_dir)
    places.group("all", "all", top["all"])
    if PAIRS_GROUP not in places.groups:
        raise ConfigError(
            f"{file}: all.children.{PAIRS_GROUP}: missing (the group whose children are the pairs)"
        )
    view = _merged_view(file, inv_dir)
    hostvars: dict[str, dict[str, Any]] = view.get("_meta", {}).get("hostvars", {})
    if direct := _group(view, PAIRS_GROUP, "hosts"):
        raise ConfigError(
            f"{file}: {PAIRS_GROUP}.hosts.{direct[0]}: hosts belong in a pair group, a child of {PAIRS_GROUP}"
        )
    if not _group(view, PAIRS_GROUP, "children"):
        raise ConfigError(f"{file}: {PAIRS_GROUP}.children: no pairs (expected one child group per pair)")

    def places_of(host: str) -> list[Place]:
        """Where the host's variables are written: its own places (hosts.yml's entries, the last first,
        then host_vars/), then its groups' (each group's vars:, then its group_vars/)."""
        groups = [p for g in _groups_of(view, host) for p in places.groups.get(g, [])]
        return [*places.hosts.get(host, []), *groups]

    pair_of: dict[str, str] = {}
    pairs: list[PairSpec] = []
    for pair_name in _group(view, PAIRS_GROUP, "children"):
        where = f"{PAIRS_GROUP}.children.{pair_name}"
        if _group(view, pair_name, "children"):
            raise ConfigError(
                f"{file}: {where}.children: a pair group holds its two hosts directly, not child groups"
            )
        hosts = _group(view, pair_name, "hosts")
        if len(hosts) != 2:
            raise ConfigError(
                f"{file}: {where}.hosts: a pair has exactly 2 hosts (a server and a client), "
                f"found {len(hosts)}"
            )
        by_role: dict[str, HostSpec] = {}
        for host_name in hosts:
            if host_name in pair_of:
                raise ConfigError(
                    f"{file}: {where}.hosts.{host_name}: host is already in pair {pair_of[host_name]!r}"
                    " (a host belongs to one pair)"
                )
            pair_of[host_name] = pair_name
            merged = dict(hostvars.get(host_name, {}))
            spec, role_where = _host_spec(merged, places_of(host_name), inv_dir, host_name, pair_name, file)
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


def _host_spec(
    merged: dict[str, Any], places: list[Place], inv_dir: Path, name: str, pair: str, file: Path
) -> tuple[HostSpec, str]:
    """The host as demuxlab uses it, from Ansible's merged variables ``merged``; each is checked, a bad one
    named at the first of ``places`` that writes that value."""

    def where(var: str) -> str:
        for label, written in places:
            if var in written and written[var] == merged.get(var):
                return f"{label}{var}"
        return f"{file}: {PAIRS_GROUP}.children.{pair}.hosts.{name}.{var}"

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

    cpus = _cpus(merged.get("demuxlab_cpus"), fail)
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


def _cpus(cpus_value: Any, fail: Callable[[str, str], ConfigError]) -> str | None:
    """``demuxlab_cpus`` checked: a CPU list such as ``0-3,8`` (a string, or one CPU as an int), in its
    canonical form; None where the host does not set it."""
    if cpus_value is None:
        return None
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
    return format_cpu_list(cpu_list)


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


_BOOLS = dict.fromkeys(("true", "yes", "on", "1"), True) | dict.fromkeys(("false", "no", "off", "0"), False)


def _bool(value: Any, var: str, fail: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOLS:
        return _BOOLS[value.strip().lower()]
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

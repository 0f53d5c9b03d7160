"""Host pairs from an Ansible inventory: the shipped inventories, bad input, agreement with Ansible."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from demuxlab.cli import main
from demuxlab.errors import ConfigError
from demuxlab.inventory import load_inventory
from demuxlab.paths import repo_root

INVENTORIES = repo_root() / "playbooks" / "inventories"

GOOD = """
all:
  vars: {ansible_user: bench, ansible_become: true}
  children:
    demuxlab_pairs:
      children:
        p1:
          hosts:
            h1: {demuxlab_role: server, ansible_host: 10.0.0.1, demuxlab_cpus: "0-3"}
            h2: {demuxlab_role: client, ansible_host: 10.0.0.2, demuxlab_address: 192.168.9.2}
"""


def write(tmp_path: Path, text: str, files: dict[str, str] | None = None) -> Path:
    (tmp_path / "hosts.yml").write_text(textwrap.dedent(text))
    for rel, body in (files or {}).items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
    return tmp_path


def test_example_cluster() -> None:
    inv = load_inventory(INVENTORIES / "example-cluster")
    assert [p.name for p in inv.pairs] == ["pair-a", "pair-b"]
    b = inv.pair("pair-b")
    assert (b.server.name, b.client.name) == ("numa03", "numa04")
    assert b.server.cpus == "0-7,32-39"
    assert b.server.cpu_list == [*range(8), *range(32, 40)]
    assert b.client.port == 2222 and b.server.port == 22
    assert b.server.address == "192.168.50.13" and b.server.ansible_host == "10.10.0.13"
    assert b.server.user == "bench" and b.server.become is True
    assert b.server.key_file == Path("~/.ssh/id_ed25519").expanduser()
    # group_vars/demuxlab_pairs.yml reaches the hosts
    assert b.server.vars["host_tuning_irq_cpus"] == "16-31"


def test_local_is_loopback_on_one_machine() -> None:
    inv = load_inventory(INVENTORIES / "local")
    (pair,) = inv.pairs
    assert pair.server.is_local and pair.client.is_local
    assert pair.server.address == pair.client.address == "127.0.0.1"


def test_defaults_and_precedence(tmp_path: Path) -> None:
    inv_dir = write(
        tmp_path,
        GOOD,
        {
            "group_vars/all.yml": "ansible_user: ops\n",
            "host_vars/h2.yml": "ansible_port: 2200\ndemuxlab_cpus: 5\n",
        },
    )
    inv = load_inventory(inv_dir)
    h1, h2 = inv.pairs[0].server, inv.pairs[0].client
    # group_vars/all.yml beats the inventory file's all.vars (Ansible's precedence)
    assert h1.user == "ops"
    assert h1.address == "10.0.0.1"  # defaults to ansible_host
    assert h2.address == "192.168.9.2"
    assert h2.port == 2200 and h2.cpus == "5"
    assert h1.port == 22


def test_host_vars_beat_group_vars(tmp_path: Path) -> None:
    text = GOOD.replace("p1:\n", "p1:\n          vars: {demuxlab_cpus: '1'}\n")
    inv = load_inventory(write(tmp_path, text))
    assert inv.pairs[0].server.cpus == "0-3"
    assert inv.pairs[0].client.cpus == "1"


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("all: [1, 2]\n", "hosts.yml: all: expected a mapping"),
        ("other: {}\n", "hosts.yml: all: missing"),
        ("all: {children: {x: {}}}\n", "all.children.demuxlab_pairs: missing"),
        ("all: {children: {demuxlab_pairs: {}}}\n", "demuxlab_pairs.children: no pairs"),
        ("all:\n  children:\n    demuxlab_pairs:\n      hostz: {}\n", "unknown key 'hostz'"),
        ("all: {children: [\n", "not valid YAML at line"),
        (
            GOOD.replace('demuxlab_cpus: "0-3"', 'demuxlab_cpus: "3-x"'),
            "p1.hosts.h1.demuxlab_cpus: not a CPU list",
        ),
        (GOOD.replace('demuxlab_cpus: "0-3"', 'demuxlab_cpus: "3-1"'), "demuxlab_cpus: range runs backwards"),
        (GOOD.replace("role: client", "role: clinet"), "h2.demuxlab_role: expected server or client"),
        (GOOD.replace("demuxlab_role: client, ", ""), "h2.demuxlab_role: missing"),
        (GOOD.replace("role: client", "role: server"), "pair 'p1' has two server hosts"),
        (GOOD.replace("10.0.0.1,", "10.0.0.1, ansible_port: 70000,"), "h1.ansible_port: expected a TCP port"),
        (GOOD.replace("10.0.0.1,", "10.0.0.1, demuxlab_cpu: 1,"), "h1.demuxlab_cpu: unknown variable"),
        (
            GOOD.replace("ansible_become: true", "ansible_become: maybe"),
            "all.vars.ansible_become: expected true",
        ),
        (GOOD.replace("192.168.9.2", "127.0.0.1"), "h2.demuxlab_address: '127.0.0.1' is loopback"),
        (GOOD.replace("192.168.9.2", "10.0.0.1"), "h2.demuxlab_address: '10.0.0.1' is also the server's"),
        (GOOD.replace("ansible_host: 10.0.0.1", "ansible_host: '{{ x }}'"), "templates are not supported"),
        (
            GOOD
            + "        p2:\n          hosts:\n            h1: {}\n            h3: {demuxlab_role: client}\n",
            "p2.hosts.h1: host is already in pair 'p1'",
        ),
        (
            GOOD.replace("            h2:", "            h3: {demuxlab_role: client}\n            h2:"),
            "p1.hosts: a pair has exactly 2 hosts",
        ),
    ],
)
def test_malformed(tmp_path: Path, text: str, expect: str) -> None:
    inv_dir = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_inventory(inv_dir)
    message = info.value.message
    assert message.startswith(str(inv_dir / "hosts.yml") + ": "), message
    assert expect in message, message
    assert "\n" not in message


def test_bad_group_vars_file_is_named(tmp_path: Path) -> None:
    inv_dir = write(tmp_path, GOOD, {"group_vars/p1.yml": "demuxlab_cpus: [1]\n"})
    with pytest.raises(ConfigError, match=r"group_vars/p1.yml: demuxlab_cpus: expected a CPU list"):
        load_inventory(inv_dir)


def test_bad_host_vars_file_is_named(tmp_path: Path) -> None:
    """A bad value is named where it is written, in host_vars/ too (Ansible's merged view says no file)."""
    inv_dir = write(tmp_path, GOOD, {"host_vars/h2/ports.yml": "ansible_port: 70000\n"})
    with pytest.raises(ConfigError, match=r"host_vars/h2/ports.yml: ansible_port: expected a TCP port"):
        load_inventory(inv_dir)


def test_group_priority_is_ansibles(tmp_path: Path) -> None:
    """The variables are Ansible's own merge: of two sibling groups the later name wins, unless the other
    has a higher ansible_group_priority (which a merge by depth and name alone would miss)."""
    text = GOOD + (
        "    alpha: {vars: {ansible_group_priority: 10, demuxlab_cpus: '6'}, hosts: {h1: {}, h2: {}}}\n"
        "    beta: {vars: {demuxlab_cpus: '7'}, hosts: {h2: {}}}\n"
    )
    inv = load_inventory(write(tmp_path, text))
    assert inv.pairs[0].server.cpus == "0-3"  # its own value
    assert inv.pairs[0].client.cpus == "6"  # alpha's priority over beta's name


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    """Ansible's view is kept between calls, never past a change of a file it read."""
    inv_dir = write(tmp_path, GOOD, {"group_vars/p1.yml": "ansible_user: first\n"})
    assert load_inventory(inv_dir).pairs[0].server.user == "first"
    (inv_dir / "group_vars" / "p1.yml").write_text("ansible_user: second\n")
    assert load_inventory(inv_dir).pairs[0].server.user == "second"
    (inv_dir / "host_vars").mkdir()
    (inv_dir / "host_vars" / "h1.yml").write_text("ansible_user: third\n")
    assert load_inventory(inv_dir).pairs[0].server.user == "third"


def test_missing_inventory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="inventory not found"):
        load_inventory(tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"no hosts\.yml"):
        load_inventory(tmp_path)


def test_cli_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    main(["pairs", "--inventory", str(INVENTORIES / "example-cluster")])
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["pair", "server"]
    assert out[1].split() == ["pair-a", "numa01", "192.168.50.11", "0-15", "numa02", "192.168.50.12", "0-15"]
    main(["pairs", "--inventory", str(INVENTORIES / "example-cluster"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs"][1]["client"]["port"] == 2222


def test_cli_malformed_is_one_line(tmp_path: Path) -> None:
    inv_dir = write(tmp_path, GOOD.replace("role: client", "role: x"))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "demuxlab"), "pairs", "--inventory", str(inv_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert (
        "hosts.yml: all.children.demuxlab_pairs.children.p1.hosts.h2.demuxlab_role: expected server or client"
        in proc.stderr
    )


@pytest.mark.parametrize("name", ["example-cluster", "local"])
def test_agrees_with_ansible_inventory(name: str) -> None:
    """The variables are Ansible's merged view: compare with `ansible-inventory --list` run here."""
    exe = Path(sys.executable).parent / "ansible-inventory"
    assert exe.exists(), "ansible-inventory is a dev dependency (make setup)"
    inv_dir = INVENTORIES / name
    proc = subprocess.run(
        [str(exe), "-i", str(inv_dir), "--list"], capture_output=True, text=True, check=True, timeout=120
    )
    hostvars = json.loads(proc.stdout)["_meta"]["hostvars"]
    inv = load_inventory(inv_dir)
    for host in inv.hosts:
        theirs = hostvars[host.name]
        for var, value in host.vars.items():
            assert theirs.get(var) == value, (host.name, var)
        assert set(json.loads(proc.stdout)[host.pair]["hosts"]) == {
            host.name for host in inv.pair(host.pair).hosts
        }

"""The test cluster on one machine (``demuxlab testbed up|down|status``, ``make testbed``).

K pairs of hosts, each a privileged Docker container made from a Debian rootfs this module builds with
debootstrap (from the mirror apt uses) and ``docker import``s once, cached by the hash of its recipe. Each
host has its own hostname, its own address on a private, internal Docker network the testbed makes, a real
sshd with host keys generated here, a user ``demux`` with sudo that logs in with a key generated here, its
own Docker engine (Debian's ``docker.io``, storage on its own volume, started by the ``docker_engine`` role),
and a CPU set. Machine-wide kernel knobs that a privileged container could write (transparent huge pages,
IRQ affinity) are replaced inside each host by private copies, so tuning a test host never changes the
shared machine. docs/ARCHITECTURE.md says why containers and not network namespaces.

Everything made is named ``demuxlab-tb-<id>-…`` and labelled ``demuxlab.testbed=<id>``, ``<id>`` derived
from the state folder, so several checkouts share the engine without touching each other's testbeds;
``down`` removes exactly the labelled objects and the files under ``<state>/testbed``. The host image
``demuxlab-tb-host:<recipe hash>`` is a cache shared by all checkouts and kept by ``down``
(``down --purge`` removes it too).

(Over 500 lines on purpose: one concern, the test cluster's life: the host image's recipe, the hosts,
their network, keys and inventory, and a ``down`` that removes exactly what ``up`` made, read together.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demuxlab.errors import LaunchError
from demuxlab.paths import repo_root, state_dir

PREFIX = "demuxlab-tb-"
LABEL = "demuxlab.testbed"
IMAGE_REPO = "demuxlab-tb-host"
SUITE = "bookworm"
USER = "demux"
# What a host has before Ansible touches it: sshd, Python for Ansible (python3-apt for its apt module),
# sudo, and Debian's Docker engine preinstalled (the hosts have no route to a mirror; provisioning
# finds the package present and configures and starts the engine).
PACKAGES = (
    "openssh-server",
    "python3",
    "python3-apt",
    "sudo",
    "docker.io",
    "iproute2",
    "procps",
    "kmod",
    "iptables",
    # Slurm (`testbed up --slurm`, `make testbed SLURM=1`): the controller daemon, the accounting daemon and
    # its MariaDB on the first host, a slurmd on every host, munge for authentication, the client commands
    # (srun, sbcast) inside the jobs. Unused, and not started, on a testbed without Slurm.
    "slurmd",
    "slurmctld",
    "slurmdbd",
    "slurm-client",
    "munge",
    "mariadb-server",
)

INIT_SCRIPT = r'''#!/usr/bin/python3
"""PID 1 of a demuxlab testbed host: set up keys and private knob views, run sshd, reap orphans."""
import os, shutil, signal, subprocess, sys

SRC = "/demuxlab-tb"
def install(src, dst, mode, uid=0, gid=0):
    shutil.copyfile(src, dst); os.chmod(dst, mode); os.chown(dst, uid, gid)

import pwd
user = pwd.getpwnam("demux")
install(f"{SRC}/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ed25519_key", 0o600)
install(f"{SRC}/ssh_host_ed25519_key.pub", "/etc/ssh/ssh_host_ed25519_key.pub", 0o644)
os.makedirs(f"{user.pw_dir}/.ssh", mode=0o700, exist_ok=True)
os.chown(f"{user.pw_dir}/.ssh", user.pw_uid, user.pw_gid)
install(f"{SRC}/authorized_keys", f"{user.pw_dir}/.ssh/authorized_keys", 0o600, user.pw_uid, user.pw_gid)
os.makedirs("/run/sshd", exist_ok=True)

# Private copies of machine-wide knobs: tuning a test host must not change the shared machine.
views = "/run/demuxlab-tb"
os.makedirs(views, exist_ok=True)
# The host's own cgroup tree (cgroupns private) becomes writable for its Docker engine.
for sub in os.listdir("/sys/fs/cgroup"):
    subprocess.run(["mount", "-o", "remount,rw,bind", f"/sys/fs/cgroup/{sub}"], check=False)
for name, path in (("thp_enabled", "/sys/kernel/mm/transparent_hugepage/enabled"),
                   ("thp_defrag", "/sys/kernel/mm/transparent_hugepage/defrag")):
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
        with open(f"{views}/{name}", "w") as f:
            f.write(text)
        subprocess.run(["mount", "--bind", f"{views}/{name}", path], check=True)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "demuxlab-tb-irq", "/proc/irq"], check=False)

sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e"])
def stop(signum, frame):
    sshd.terminate()
    subprocess.run(["/etc/init.d/docker", "stop"], check=False, capture_output=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
while True:
    try:
        pid, _ = os.wait()
    except ChildProcessError:
        signal.pause()
        continue
    if pid == sshd.pid:
        sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e"])
'''

SETUP_IN_CHROOT = f"""set -e
id {USER} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {USER}
echo '{USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{USER}
chmod 0440 /etc/sudoers.d/{USER}
rm -f /etc/ssh/ssh_host_*
printf 'PasswordAuthentication no\\nKbdInteractiveAuthentication no\\nPermitRootLogin no\\nUseDNS no\\n' \
  > /etc/ssh/sshd_config.d/demuxlab-tb.conf
# This machine's VM lacks CAP_SYS_RESOURCE: the engine's init script cannot raise its limits above the
# container's hard limits, so it keeps those instead of failing (a real host's script is left alone).
sed -i -e 's#ulimit -n 1048576$#ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"#' \\
       -e 's#ulimit -u unlimited$#ulimit -u unlimited 2>/dev/null || true#' \\
       -e 's#ulimit -p unlimited$#ulimit -p unlimited 2>/dev/null || true#' /etc/init.d/docker
# Keys are made per testbed (`up --slurm`), never baked into the image.
rm -f /etc/munge/munge.key
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
"""


def testbed_dir() -> Path:
    """Keys, host keys, state: ``$DEMUXLAB_TESTBED_DIR`` or ``<state>/testbed``."""
    env = os.environ.get("DEMUXLAB_TESTBED_DIR")
    return Path(env).resolve() if env else state_dir() / "testbed"


def testbed_id() -> str:
    """Short id of this testbed (from its folder): names never clash across checkouts or test sessions."""
    return hashlib.sha256(str(testbed_dir()).encode()).hexdigest()[:8]


def inventory_dir() -> Path:
    """``$DEMUXLAB_TESTBED_INVENTORY`` or ``playbooks/inventories/testbed``."""
    env = os.environ.get("DEMUXLAB_TESTBED_INVENTORY")
    return Path(env).resolve() if env else repo_root() / "playbooks" / "inventories" / "testbed"


def _run(
    cmd: list[str], *, what: str, input_bytes: bytes | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.run(cmd, input=input_bytes, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise LaunchError(f"testbed: {what}: {cmd[0]} is not installed (run make setup)") from None
    except subprocess.TimeoutExpired:
        raise LaunchError(f"testbed: {what}: {cmd[0]} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
        raise LaunchError(f"testbed: {what}: {lines[-1]}")
    return proc


def _docker(*args: str, what: str, timeout: float = 120) -> str:
    return _run(["docker", *args], what=what, timeout=timeout).stdout.decode().strip()


def apt_mirror() -> str:
    """The Debian mirror apt here uses (deb822 ``URIs:`` or a ``deb`` line), else deb.debian.org."""
    files = [Path("/etc/apt/sources.list")]
    src_d = Path("/etc/apt/sources.list.d")
    if src_d.is_dir():
        files += sorted(src_d.iterdir())
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            m = re.match(r"^URIs:\s*(\S+)", line) or re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+", line)
            if m and "security" not in m.group(1) and "/debian" in m.group(1):
                return m.group(1).rstrip("/")
    return "http://deb.debian.org/debian"


def image_tag() -> str:
    recipe = json.dumps(
        {"suite": SUITE, "packages": PACKAGES, "init": INIT_SCRIPT, "setup": SETUP_IN_CHROOT}, sort_keys=True
    )
    return f"{IMAGE_REPO}:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def _image_exists(tag: str) -> bool:
    proc = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False)
    return proc.returncode == 0


def build_image(log: Any = print) -> tuple[str, bool]:
    """The host image, built when missing: (tag, built_now). Debootstrap runs once per recipe."""
    tag = image_tag()
    if _image_exists(tag):
        return tag, False
    work = Path(tempfile.mkdtemp(prefix="demuxlab-tb-rootfs-", dir="/var/tmp"))
    try:
        rootfs = work / "rootfs"
        mirror = apt_mirror()
        log(f"testbed: building host image {tag}: debootstrap {SUITE} from {mirror} (once; minutes)")
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(rootfs),
                mirror,
            ],
            what="debootstrap",
            timeout=1800,
        )
        import_rootfs(rootfs, tag)
        return tag, True
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)


def import_rootfs(rootfs: Path, tag: str) -> None:
    """Configure a debootstrapped ``rootfs`` (user, sudo, sshd, init) and ``docker import`` it as ``tag``."""
    init = rootfs / "usr/local/sbin/demuxlab-tb-init"
    init.write_text(INIT_SCRIPT)
    init.chmod(0o755)
    _run(["chroot", str(rootfs), "/bin/sh", "-c", SETUP_IN_CHROOT], what="configure rootfs")
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
    try:
        proc = subprocess.run(
            [
                "docker",
                "import",
                "--change",
                'CMD ["/usr/local/sbin/demuxlab-tb-init"]',
                "--change",
                f"LABEL {LABEL}.image=1",
                "-",
                tag,
            ],
            stdin=tar.stdout,
            capture_output=True,
            timeout=900,
            check=False,
        )
    finally:
        if tar.stdout:
            tar.stdout.close()
        tar.wait()
    if proc.returncode != 0 or tar.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines() or [f"tar exit {tar.returncode}"]
        raise LaunchError(f"testbed: docker import: {err[-1]}")


@dataclass(frozen=True)
class TbHost:
    name: str  # inventory name and hostname, e.g. tb1-server
    pair: str
    role: str
    cpus: str
    shared: bool

    def container(self, tb_id: str) -> str:
        return f"{PREFIX}{tb_id}-{self.name}"

    def volume(self, tb_id: str) -> str:
        return f"{PREFIX}{tb_id}-{self.name}-docker"


def plan_hosts(pairs: int, ncpus: int | None = None) -> list[TbHost]:
    """2K hosts over the machine's CPUs: disjoint sets where there are enough CPUs, else shared (recorded)."""
    n = ncpus or os.cpu_count() or 1
    count = 2 * pairs
    per = n // count
    hosts: list[TbHost] = []
    for i in range(count):
        pair, role = f"tb{i // 2 + 1}", ("server", "client")[i % 2]
        if per >= 1:
            cpus = list(range(i * per, (i + 1) * per))
            shared = False
        else:
            cpus = [i % n]
            shared = True
        text = f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else str(cpus[0])
        hosts.append(TbHost(f"{pair}-{role}", pair, role, text, shared))
    return hosts


def _keygen(path: Path, comment: str) -> None:
    if not path.exists():
        _run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], what="ssh-keygen"
        )


def _labelled(kind: str, tb_id: str) -> list[str]:
    fmt = "{{.Names}}" if kind == "ps" else "{{.Name}}"
    args = {
        "ps": ["ps", "-a", "--filter", f"label={LABEL}={tb_id}", "--format", fmt],
        "network": ["network", "ls", "--filter", f"label={LABEL}={tb_id}", "--format", fmt],
        "volume": ["volume", "ls", "--filter", f"label={LABEL}={tb_id}", "--format", fmt],
    }[kind]
    out = _docker(*args, what=f"list {kind}")
    return [line for line in out.splitlines() if line]


def shared_paths(extra: Sequence[Path | str] = ()) -> list[str]:
    """What a Slurm testbed's hosts share with this machine at the same paths (a cluster's shared
    filesystem): the checkout (workflow, virtualenv, binaries), the Python the virtualenv was made from
    when it lives outside the system's /usr, and ``extra`` (e.g. a test's working folder)."""
    import sys

    paths = [repo_root().resolve()]
    base = Path(sys.base_prefix).resolve()
    if not any(base == Path(p) or Path(p) in base.parents for p in ("/usr", "/bin", "/lib")):
        paths.append(base)
    paths += [Path(p).resolve() for p in extra]
    out: list[str] = []
    for p in sorted(set(paths), key=lambda q: len(q.parts)):
        if not any(Path(o) == p or Path(o) in p.parents for o in out):  # a parent already shares it
            out.append(str(p))
    return out


def up(
    pairs: int = 2, log: Any = print, *, shared: Sequence[str] = (), readonly: Sequence[str] = ()
) -> dict[str, Any]:
    """Create (or complete) the testbed; returns its state (also in ``<state>/testbed/testbed.json``).

    ``shared`` / ``readonly``: folders of this machine mounted at the same path on every host (read-write /
    read-only), as a cluster's shared filesystem (the Slurm testbed, :mod:`demuxlab.slurm.testbed`)."""
    if pairs < 1:
        raise LaunchError("testbed: --pairs must be at least 1")
    t0 = time.monotonic()
    tb_id = testbed_id()
    tdir = testbed_dir()
    tdir.mkdir(parents=True, exist_ok=True)
    existing = _read_state()
    mounts = [[p, "rw"] for p in shared] + [[p, "ro"] for p in readonly]
    if existing and _labelled("ps", tb_id):
        if existing.get("pairs") != pairs:
            raise LaunchError(
                f"testbed: a testbed of {existing.get('pairs')} pairs exists; `demuxlab testbed down` first"
            )
        if (existing.get("mounts") or []) != mounts:
            raise LaunchError(
                "testbed: the existing testbed shares other folders (Slurm or not); "
                "`demuxlab testbed down` first"
            )
    tag, built = build_image(log)
    t_image = time.monotonic() - t0
    _keygen(tdir / "id_ed25519", f"demuxlab-testbed-{tb_id}")
    net = f"{PREFIX}{tb_id}-net"
    if net not in _labelled("network", tb_id):
        # --internal: no route out of the testbed; the controller reaches the hosts over the bridge.
        _docker("network", "create", "--internal", "--label", f"{LABEL}={tb_id}", net, what="create network")
    hosts = plan_hosts(pairs)
    running = set(_labelled("ps", tb_id))
    for host in hosts:
        _start_host(host, tb_id, tdir, tag, net, mounts, running)
    state_hosts = [_host_state(host, tb_id) for host in hosts]
    known = "".join(
        f"{h['address']} {(tdir / 'hosts' / h['name'] / 'ssh_host_ed25519_key.pub').read_text().split()[0]} "
        f"{(tdir / 'hosts' / h['name'] / 'ssh_host_ed25519_key.pub').read_text().split()[1]}\n"
        for h in state_hosts
    )
    (tdir / "known_hosts").write_text(known)
    _wait_ssh(state_hosts, tdir)
    nofile = _docker("exec", hosts[0].container(tb_id), "sh", "-c", "ulimit -Hn", what="nofile limit")
    state: dict[str, Any] = {
        "id": tb_id,
        "pairs": pairs,
        "image": tag,
        "image_built": built,
        "network": net,
        "user": USER,
        "key_file": str(tdir / "id_ed25519"),
        "known_hosts": str(tdir / "known_hosts"),
        "hosts": state_hosts,
        "nofile_hard": int(nofile) if nofile.isdigit() else 1024,
        "inventory": str(inventory_dir()),
        "mounts": mounts,
        "image_s": round(t_image, 2),
        "up_s": round(time.monotonic() - t0, 2),
    }
    write_inventory(state)
    write_state(state)
    return state


def _start_host(
    host: TbHost,
    tb_id: str,
    tdir: Path,
    tag: str,
    net: str,
    mounts: Sequence[Sequence[str]],
    running: set[str],
) -> None:
    """One host's keys and container: started if it is stopped, created (with its volume) if missing."""
    hdir = tdir / "hosts" / host.name
    hdir.mkdir(parents=True, exist_ok=True)
    _keygen(hdir / "ssh_host_ed25519_key", f"{host.name}-hostkey")
    shutil.copyfile(tdir / "id_ed25519.pub", hdir / "authorized_keys")
    name = host.container(tb_id)
    if name in running:
        running_now = _docker("inspect", "-f", "{{.State.Running}}", name, what="inspect host")
        if running_now != "true":
            _docker("start", name, what=f"start {host.name}")
        return
    _docker("volume", "create", "--label", f"{LABEL}={tb_id}", host.volume(tb_id), what="create volume")
    _docker(
        "run",
        "-d",
        "--name",
        name,
        "--hostname",
        host.name,
        "--label",
        f"{LABEL}={tb_id}",
        # Not --privileged: this machine's VM lacks CAP_SYS_RESOURCE, which --privileged asks for.
        # Everything else a Docker engine inside needs: capabilities, its own cgroup namespace
        # (remounted writable by the init), /proc/sys, devices. /sys stays read-only.
        "--cap-add",
        "ALL",
        "--cap-drop",
        "SYS_RESOURCE",
        "--cgroupns",
        "private",
        "--security-opt",
        "seccomp=unconfined",
        "--security-opt",
        "apparmor=unconfined",
        "--security-opt",
        "systempaths=unconfined",
        "--device-cgroup-rule",
        "a *:* rwm",
        "--network",
        net,
        "--cpuset-cpus",
        host.cpus,
        "--memory",
        "2g",
        "--stop-timeout",
        "5",
        "-v",
        f"{host.volume(tb_id)}:/var/lib/docker",
        "-v",
        f"{hdir}:/demuxlab-tb:ro",
        *[arg for path, mode in mounts for arg in ("-v", f"{path}:{path}:{mode}")],
        tag,
        what=f"create host {host.name}",
    )


def _host_state(host: TbHost, tb_id: str) -> dict[str, Any]:
    """A host as ``testbed.json`` lists it, with its address on the testbed's network."""
    ip = _docker(
        "inspect",
        "-f",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        host.container(tb_id),
        what=f"address of {host.name}",
    )
    return {
        "name": host.name,
        "pair": host.pair,
        "role": host.role,
        "container": host.container(tb_id),
        "address": ip,
        "cpus": host.cpus,
        "cpus_shared": host.shared,
    }


def write_state(state: dict[str, Any]) -> None:
    """``<state>/testbed/testbed.json``: what ``up`` made (read by ``status``, the tests and benchmarks)."""
    (testbed_dir() / "testbed.json").write_text(json.dumps(state, indent=1) + "\n")


def _ssh_base(tdir: Path) -> list[str]:
    return [
        "ssh",
        "-i",
        str(tdir / "id_ed25519"),
        "-o",
        f"UserKnownHostsFile={tdir / 'known_hosts'}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=3",
    ]


def _wait_ssh(hosts: list[dict[str, Any]], tdir: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    for host in hosts:
        while True:
            proc = subprocess.run(
                [*_ssh_base(tdir), f"{USER}@{host['address']}", "true"], capture_output=True, check=False
            )
            if proc.returncode == 0:
                break
            if time.monotonic() > deadline:
                err = proc.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
                raise LaunchError(
                    f"testbed: {host['name']} ({host['address']}): ssh does not answer: {err[-1]}"
                )
            time.sleep(0.3)


def write_inventory(state: dict[str, Any]) -> Path:
    """``playbooks/inventories/testbed/hosts.yml`` for the hosts in ``state``."""
    inv = inventory_dir()
    inv.mkdir(parents=True, exist_ok=True)
    pairs: dict[str, dict[str, Any]] = {}
    for h in state["hosts"]:
        pairs.setdefault(h["pair"], {"hosts": {}})["hosts"][h["name"]] = {
            "demuxlab_role": h["role"],
            "ansible_host": h["address"],
            "demuxlab_address": h["address"],
            "demuxlab_cpus": h["cpus"],
            "demuxlab_cpus_shared": h["cpus_shared"],
        }
    doc = {
        "all": {
            "vars": {
                "ansible_user": state["user"],
                "ansible_ssh_private_key_file": state["key_file"],
                "ansible_become": True,
                "ansible_python_interpreter": "/usr/bin/python3",
                "ansible_ssh_common_args": (
                    f"-o UserKnownHostsFile={state['known_hosts']} -o StrictHostKeyChecking=yes"
                ),
                "demuxlab_testbed": True,
                # pam_limits cannot go above the hard limit the hosts start with (no CAP_SYS_RESOURCE).
                "host_tuning_nofile": state["nofile_hard"],
                "docker_engine_users": [state["user"]],
            },
            "children": {"demuxlab_pairs": {"children": pairs}},
        }
    }
    header = (
        f"# Generated by `demuxlab testbed up` (testbed {state['id']}); rewritten on every `up`, removed by\n"
        "# `down`. Hosts share CPUs where demuxlab_cpus_shared is true: their figures are not measurements.\n"
    )
    import yaml

    (inv / "hosts.yml").write_text(header + yaml.safe_dump(doc, sort_keys=False))
    return inv


def _read_state() -> dict[str, Any] | None:
    path = testbed_dir() / "testbed.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def down(purge: bool = False) -> list[str]:
    """Remove this checkout's testbed (containers, volumes, network, keys, inventory); returns what went."""
    tb_id = testbed_id()
    removed: list[str] = []
    for pid_file in sorted((testbed_dir() / "pids").glob("*.pid")):
        # Daemons the testbed started on this machine (the Slurm testbed's munged, for the client commands).
        removed += _stop_local(pid_file)
    with contextlib.suppress(OSError):
        # Folders of this machine outside the testbed's own that it made (the munged's socket folder).
        for line in (testbed_dir() / "local-dirs").read_text().splitlines():
            if line.strip() and Path(line.strip()).is_dir():
                shutil.rmtree(line.strip(), ignore_errors=True)
                removed.append(f"folder {line.strip()}")
    for name in _labelled("ps", tb_id):
        _docker("rm", "-f", "-v", name, what=f"remove {name}", timeout=60)
        removed.append(f"container {name}")
    for name in _labelled("volume", tb_id):
        _docker("volume", "rm", name, what=f"remove {name}")
        removed.append(f"volume {name}")
    for name in _labelled("network", tb_id):
        _docker("network", "rm", name, what=f"remove {name}")
        removed.append(f"network {name}")
    if purge:
        tag = image_tag()
        if _image_exists(tag):
            _docker("rmi", tag, what=f"remove {tag}")
            removed.append(f"image {tag}")
    for path in (testbed_dir(), inventory_dir()):
        if path.exists():
            shutil.rmtree(path)
            removed.append(f"folder {path}")
    return removed


def _stop_local(pid_file: Path) -> list[str]:
    """Stop a daemon of this machine named by its pid file, if that pid still runs what the file says."""
    import signal

    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    comm = pid_file.stem
    try:
        running = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return []
    if running != comm:  # the pid was reused by something else: not ours
        return []
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return []
    for _ in range(50):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    return [f"process {comm} ({pid})"]


def status() -> dict[str, Any]:
    """What exists: the image, the network, each host's container and whether sshd answers."""
    tb_id = testbed_id()
    tag = image_tag()
    state = _read_state() or {}
    containers = set(_labelled("ps", tb_id))
    hosts: list[dict[str, Any]] = []
    for h in state.get("hosts", []):
        running = False
        if h["container"] in containers:
            running = _docker("inspect", "-f", "{{.State.Running}}", h["container"], what="inspect") == "true"
        hosts.append({**h, "exists": h["container"] in containers, "running": running})
    known = {h["container"] for h in hosts}
    return {
        "id": tb_id,
        "image": tag,
        "image_present": _image_exists(tag),
        "network": [n for n in _labelled("network", tb_id)],
        "volumes": _labelled("volume", tb_id),
        "hosts": hosts,
        "unknown_containers": sorted(containers - known),
        "inventory": str(inventory_dir()) if (inventory_dir() / "hosts.yml").exists() else None,
    }


def host_exec(container: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command inside a testbed host (tests break hosts on purpose with this)."""
    return subprocess.run(["docker", "exec", container, *cmd], capture_output=True, text=True, check=check)

"""SSH to the hosts of an inventory: one ``ssh_config`` per sweep, so that ``ssh HOST`` and the Docker
CLI's ``docker -H ssh://HOST`` reach every host with the inventory's user, port, key and options, over one
multiplexed connection per host (ControlMaster), which keeps the per-command cost of SSH small.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from demuxlab.jsonio import write_text_if_changed
from demuxlab.paths import state_dir
from demuxlab.remote.hostpairs import Host

#: Seconds to set up an SSH connection to a host (a powered-off or unplugged host fails within this); a
#: dead peer of an established connection is noticed after ServerAliveInterval x ServerAliveCountMax.
CONNECT_TIMEOUT_S = 10


def ssh_dir() -> Path:
    """``<state>/ssh``: the generated config, the control sockets and the ``ssh`` wrapper Docker uses."""
    path = state_dir() / "ssh"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


@dataclass(frozen=True)
class SshSetup:
    """A generated ``ssh_config`` and the directory of the ``ssh`` wrapper that uses it."""

    config: Path
    bin_dir: Path


def write_config(hosts: Sequence[Host]) -> SshSetup:
    """Write the ``ssh_config`` for ``hosts`` and an ``ssh`` wrapper that uses it, both named by a hash of
    their content: concurrent runs on different pairs never overwrite each other's hosts."""
    base = ssh_dir()
    control = base / "cm"
    control.mkdir(exist_ok=True, mode=0o700)
    lines = []
    for host in hosts:
        lines += [f"Host {host.name}", f"  HostName {host.ansible_host}", f"  Port {host.port}"]
        if host.user:
            lines.append(f"  User {host.user}")
        if host.key_file:
            lines += [f"  IdentityFile {host.key_file}", "  IdentitiesOnly yes"]
        for key, value in host.ssh_options:
            lines.append(f"  {key} {value}")
        lines += [
            "  BatchMode yes",
            f"  ConnectTimeout {CONNECT_TIMEOUT_S}",
            "  ServerAliveInterval 5",
            "  ServerAliveCountMax 3",
            "  ControlMaster auto",
            f"  ControlPath {control}/%C",
            "  ControlPersist 120",
            "",
        ]
    text = "\n".join(lines)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    config = base / f"config-{digest}"
    write_text_if_changed(config, text, mode=0o600)
    wrapper = base / f"bin-{digest}" / "ssh"
    wrapper.parent.mkdir(exist_ok=True)
    # The Docker CLI passes `-o ConnectTimeout=30` after the host: ssh keeps the first value it is given,
    # so this one (the config's) bounds how long a powered-off host can stall a run's docker commands.
    write_text_if_changed(
        wrapper,
        f"#!/bin/sh\nexec /usr/bin/ssh -F {shlex.quote(str(config))}"
        f' -o ConnectTimeout={CONNECT_TIMEOUT_S} "$@"\n',
        mode=0o755,
    )
    return SshSetup(config=config, bin_dir=wrapper.parent)


def env_for_docker(setup: SshSetup) -> dict[str, str]:
    """The environment in which ``docker -H ssh://HOST`` uses ``setup``'s config."""
    env = dict(os.environ)
    env["PATH"] = f"{setup.bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
    env.pop("DOCKER_HOST", None)
    return env


def ssh(
    setup: SshSetup, host: Host, command: str, *, timeout: float = 60.0, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (a shell line) on ``host``; never raises for the command's own failure."""
    return subprocess.run(
        ["/usr/bin/ssh", "-F", str(setup.config), host.name, command],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )

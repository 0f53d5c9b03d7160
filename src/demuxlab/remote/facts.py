"""A remote host's facts, by the one collector there is: :mod:`demuxlab.topology` (standard library
only) is sent to the host's ``python3`` over SSH and run there, so local and remote facts are the same
code and the same JSON contract (CONTRACTS.md §3)."""

from __future__ import annotations

import inspect
import json
import subprocess
from collections.abc import Sequence
from typing import Any

from demuxlab import topology
from demuxlab.errors import LaunchError
from demuxlab.remote.hostpairs import Host
from demuxlab.remote.ssh import ssh, write_config


def remote_facts(host: Host, all_hosts: Sequence[Host], timeout: float = 60.0) -> dict[str, Any]:
    setup = write_config(all_hosts)
    program = inspect.getsource(topology)  # run as __main__: prints the facts as one JSON line
    try:
        res = ssh(setup, host, "python3 -", stdin=program, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{host.name}: facts: no answer over SSH within {timeout:g} s") from None
    if res.returncode != 0:
        detail = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
        raise LaunchError(f"{host.name}: facts: {detail}")
    try:
        doc = json.loads(res.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise LaunchError(f"{host.name}: facts: the collector printed no JSON") from None
    if not isinstance(doc, dict):
        raise LaunchError(f"{host.name}: facts: the collector printed no JSON object")
    return doc

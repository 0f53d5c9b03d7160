"""Preparing a cluster's hosts: ``playbooks/site.yml`` (Docker engine, tuning, facts, images) over an
inventory, as ``demuxlab cluster provision`` and the workflow's ``provision`` rule run it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from demuxlab.errors import ConfigError, LaunchError
from demuxlab.launch.docker import IMAGES
from demuxlab.paths import repo_root


def run_playbook(inventory: Path, playbook: str = "site.yml") -> dict[str, Any]:
    """Run ``playbooks/<playbook>`` against ``inventory``; the marker document the rule writes on success.
    A failed playbook is a :class:`LaunchError` (Ansible has printed which host failed and why)."""
    books = repo_root() / "playbooks"
    exe = Path(sys.executable).with_name("ansible-playbook")
    # The images site.yml distributes are exactly the ones the remote launcher runs (extra vars win over
    # whatever the inventory says).
    images = json.dumps({"images_names": [IMAGES["server"], IMAGES["client"]]})
    cmd = [
        str(exe) if exe.exists() else "ansible-playbook",
        "-i",
        str(inventory.resolve()),
        "-e",
        images,
        playbook,
    ]
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, cwd=books, check=False)
    except FileNotFoundError:
        raise ConfigError("ansible-playbook not found: run `make setup`") from None
    if res.returncode != 0:
        raise LaunchError(f"{books / playbook}: ansible-playbook failed (status {res.returncode})")
    return {
        "inventory": str(inventory.resolve()),
        "playbook": playbook,
        "seconds": round(time.monotonic() - t0, 1),
    }

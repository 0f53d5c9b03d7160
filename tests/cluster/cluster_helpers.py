"""Helpers of the cluster tests: the session testbed and Ansible runs against it.

The host image is built once per recipe and cached in the Docker engine (cold: debootstrap, minutes;
cached: the hosts are up in seconds). The session's testbed has its own folder and inventory under a
temporary directory, so a developer's `make testbed` is never touched; it is removed at the end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
VENV_BIN = Path(sys.executable).parent
RECAP = re.compile(
    r"^(?P<host>\S+)\s+: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)",
    re.M,
)


@dataclass
class Play:
    rc: int
    out: str
    recap: dict[str, dict[str, int]]
    summary: dict[str, str] = field(default_factory=dict)  # host -> "FAILED ..." / "UNREACHABLE ..."


@dataclass
class Testbed:
    __test__ = False  # not a test class

    state: dict[str, Any]
    inventory: Path
    base: Path
    image_names: list[str]

    @property
    def hosts(self) -> list[str]:
        return [h["name"] for h in self.state["hosts"]]

    def container(self, host: str) -> str:
        return next(h["container"] for h in self.state["hosts"] if h["name"] == host)

    def sh(self, host: str, script: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", "exec", self.container(host), "sh", "-c", script],
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def play(self, playbook: str, *args: str, env: dict[str, str] | None = None) -> Play:
        # A fresh SSH control folder per run: a connection kept from an earlier run must not hide a host
        # broken since.
        cp = self.base / f"cp-{os.urandom(4).hex()}"
        cp.mkdir()
        full_env = {
            **os.environ,
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(cp),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            **(env or {}),
        }
        proc = subprocess.run(
            [str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), playbook, *args],
            cwd=PLAYBOOKS,
            capture_output=True,
            text=True,
            env=full_env,
            timeout=900,
            check=False,
        )
        out = proc.stdout + proc.stderr
        recap = {
            m["host"]: {k: int(m[k]) for k in ("ok", "changed", "unreachable", "failed")}
            for m in RECAP.finditer(out)
        }
        summary = {}
        for line in out.splitlines():
            m = re.match(r"^demuxlab: (FAILED|UNREACHABLE) (\S+): (.*)$", line)
            if m:
                summary[m[2]] = f"{m[1]} {m[3]}"
        return Play(proc.returncode, out, recap, summary)

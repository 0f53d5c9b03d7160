"""Helpers of the Slurm tests (tests/slurm/): the session's Slurm testbed as the tests see it."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class SlurmBed:
    __test__ = False

    state: dict[str, Any]
    work: Path  # shared with the nodes

    @property
    def conf(self) -> str:
        return str(self.state["slurm"]["conf"])

    @property
    def nodes(self) -> list[str]:
        return list(self.state["slurm"]["nodes"])

    def container(self, node: str) -> str:
        return next(h["container"] for h in self.state["hosts"] if h["name"] == node)

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": self.conf}

    def slurm(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(cmd), capture_output=True, text=True, env=self.env(), check=check, timeout=60
        )

    def resume_all(self) -> None:
        """Every node back to service (a test that downed or drained one leaves the next a whole cluster)."""
        self.slurm("scontrol", "update", f"nodename={','.join(self.nodes)}", "state=resume", check=False)

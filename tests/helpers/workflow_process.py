"""A sweep run as the README types it, in a process group of its own: start it, wait for it, read its log.

The cluster and Slurm fault tests kill the controller (SIGKILL to its process group) and type the same
command again; both use this one harness, each with its own command line and environment.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


class WorkflowProcess:
    """``argv`` run in ``workflows/`` with ``env``, its output appended to ``log``; ``spec``: its experiment
    (the subclass sets these)."""

    argv: list[str]
    env: dict[str, str]
    log: Path
    spec: Path
    name: str
    tail_chars = 4000
    timeout_s = 600.0

    def start(self) -> subprocess.Popen[bytes]:
        # Its own session: killing its process group kills the controller and every job it started.
        with self.log.open("ab") as log:
            return subprocess.Popen(
                self.argv,
                cwd=ROOT / "workflows",
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def run(self, timeout: float | None = None) -> None:
        self.finish(self.start(), timeout)

    def finish(self, proc: subprocess.Popen[bytes], timeout: float | None = None) -> None:
        timeout = self.timeout_s if timeout is None else timeout
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"sweep {self.name} did not finish within {timeout:g} s:\n{self.tail()}")
        assert rc == 0, self.tail()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-self.tail_chars :]

    def planned(self) -> list[str]:
        """The run ids ``demuxlab plan`` gives for the spec, sorted."""
        out = subprocess.run(
            [str(BIN / "demuxlab"), "plan", str(self.spec)], capture_output=True, text=True, check=True
        ).stdout
        return sorted(r["run_id"] for r in json.loads(out)["runs"])

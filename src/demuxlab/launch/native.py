"""The native launcher: the static binaries of ``build/bin`` as processes pinned with CPU affinity."""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from demuxlab.errors import LaunchError
from demuxlab.launch.base import Launcher, sha256_file
from demuxlab.paths import bin_dir, repo_root

BINARIES = {"server": "demux-server", "client": "demux-client"}


def binary_path(role: str) -> Path:
    path = bin_dir() / BINARIES[role]
    if not os.access(path, os.X_OK):
        raise LaunchError(f"{BINARIES[role]} not found at {path}: run `make build`")
    return path


class NativeLauncher(Launcher):
    name = "native"

    def check(self) -> None:
        for role in BINARIES:
            binary_path(role)

    def artifacts(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for role in BINARIES:
            path = binary_path(role)
            try:
                shown = str(path.relative_to(repo_root()))
            except ValueError:
                shown = str(path)
            out[role] = {"kind": "binary", "path": shown, "sha256": sha256_file(path)}
        return out

    def wrap(self, role: str, argv: list[str], cpus: Sequence[int], run_id: str) -> list[str]:
        return [str(binary_path(role)), *argv[1:]]

    def role_pid(self, role: str, proc: subprocess.Popen[str], run_id: str) -> tuple[int | None, str | None]:
        return proc.pid, None

    def preexec(self, cpus: Sequence[int]) -> Callable[[], None] | None:
        # The binaries pin each of their threads (--cpus); the process mask keeps the main thread and
        # anything unpinned on the same CPUs. The descriptor limit is raised to its hard limit because
        # the notifier-scaling points hold 10,000 connections (the docker launcher sets --ulimit).
        mask = set(cpus)

        def prepare() -> None:
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            if mask:
                os.sched_setaffinity(0, mask)

        return prepare

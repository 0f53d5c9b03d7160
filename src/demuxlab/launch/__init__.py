"""Launchers: run one repeat of one sweep point on a host pair and return its run record.

Every launcher stands behind one interface (:class:`~demuxlab.launch.base.Launcher`) and shares its
orchestration (:mod:`demuxlab.launch.base`); they differ only in how a command line becomes a process and
how the artifact (binary hash or image digest) is identified. The two a spec names, :data:`LAUNCHERS`:
``native`` runs the static binaries as processes pinned with CPU affinity, ``docker`` runs the FROM-scratch
images with ``--cpuset-cpus``. A sweep over pairs uses :mod:`.remote` (each side's Docker engine over SSH)
or :mod:`.sim` (a simulated pair), and a Slurm job its own (:class:`demuxlab.slurm.job.SlurmLauncher`).
"""

from __future__ import annotations

from demuxlab.errors import ConfigError
from demuxlab.launch.base import Launcher, RunRequest
from demuxlab.launch.docker import DockerLauncher
from demuxlab.launch.native import NativeLauncher

LAUNCHERS: dict[str, type[Launcher]] = {"native": NativeLauncher, "docker": DockerLauncher}


def get_launcher(name: str) -> Launcher:
    try:
        cls = LAUNCHERS[name]
    except KeyError:
        raise ConfigError(f"unknown launcher {name!r}; valid: {', '.join(sorted(LAUNCHERS))}") from None
    return cls()


__all__ = ["LAUNCHERS", "Launcher", "RunRequest", "get_launcher"]

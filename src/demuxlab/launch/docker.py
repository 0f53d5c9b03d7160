"""The docker launcher: the FROM-scratch images of ``images/``, one container per role, pinned with
``--cpuset-cpus``.

Containers use the host network namespace so that a run measures the same loopback path as the native
launcher; the launcher's job here is the isolation and provenance of the image, not a different network.
``docker run`` stays attached, so the server's stdout (listening line, exit JSON) and SIGTERM (proxied to
the container) work exactly as for a native process.
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from demuxlab.errors import LaunchError
from demuxlab.launch.base import Launcher, cpu_list

PAIR_LABEL = "org.demuxlab.pair"
IMAGES = {"server": "demuxlab/server:latest", "client": "demuxlab/client:latest"}


def _docker(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


def container_name(run_id: str, role: str) -> str:
    return f"demuxlab-{run_id[:18]}-{role}"


class DockerLauncher(Launcher):
    name = "docker"

    def __init__(self, images: dict[str, str] | None = None) -> None:
        self.images = dict(images or IMAGES)

    def check(self) -> None:
        if shutil.which("docker") is None:
            raise LaunchError("the docker launcher needs the docker CLI: run `make setup`")
        info = _docker("info", "--format", "{{.ServerVersion}}", timeout=30)
        if info.returncode != 0:
            raise LaunchError("the Docker engine does not answer (`docker info` failed): run `make setup`")
        for role, image in self.images.items():
            if _docker("image", "inspect", image, timeout=30).returncode != 0:
                raise LaunchError(f"{role} image {image} not found: run `make images`")

    def artifacts(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for role, image in self.images.items():
            res = _docker("image", "inspect", "--format", "{{json .}}", image, timeout=30)
            if res.returncode != 0:
                raise LaunchError(f"{role} image {image} not found: run `make images`")
            doc = json.loads(res.stdout)
            labels = (doc.get("Config") or {}).get("Labels") or {}
            out[role] = {
                "kind": "image",
                "image": image,
                "digest": doc.get("Id"),
                "labels": {k: v for k, v in labels.items() if k.startswith("org.demuxlab.")},
            }
        return out

    def wrap(self, role: str, argv: list[str], cpus: Sequence[int], run_id: str) -> list[str]:
        # As many descriptors as the host allows (notifier-scaling holds 10,000 connections): an engine
        # without CAP_SYS_RESOURCE cannot give a container more than its own hard limit.
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if nofile == resource.RLIM_INFINITY:
            nofile = 1 << 20
        cmd = [
            "docker", "run", "--rm", "--init=false",
            "--name", container_name(run_id, role),
            # Labels let the next run on this pair find and end containers its killed holder left.
            "--label", f"{PAIR_LABEL}={self.host_pair}",
            "--label", f"org.demuxlab.run_id={run_id}",
            "--label", f"org.demuxlab.role={role}",
            "--network", "host",
            "--ulimit", f"nofile={nofile}:{nofile}",
            "--security-opt", "seccomp=unconfined",  # newer default profiles block io_uring
        ]  # fmt: skip
        if cpus:
            cmd += ["--cpuset-cpus", cpu_list(cpus)]
        return [*cmd, self.images[role], *argv[1:]]

    def role_pid(self, role: str, proc: subprocess.Popen[str], run_id: str) -> tuple[int | None, str | None]:
        # `docker run` is the client of the engine; the container's process is what the kernel counts.
        name = container_name(run_id, role)
        try:
            res = _docker("inspect", "--format", "{{.State.Pid}}", name, timeout=10)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"docker inspect {name} failed: {exc}"
        pid = res.stdout.strip()
        if res.returncode != 0 or not pid.isdigit() or pid == "0":
            return None, f"docker inspect {name} gave no running process"
        return int(pid), None

    def cleanup(self, run_id: str) -> None:
        for role in self.images:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                _docker("rm", "-f", container_name(run_id, role), timeout=30)

    def end_orphans(self, pair: str) -> list[str]:
        # `docker run` dies with the run (PR_SET_PDEATHSIG), its container does not: with the pair's
        # lease held, any container labelled with the pair belongs to a dead run.
        try:
            res = _docker("ps", "-aq", "--filter", f"label={PAIR_LABEL}={pair}", timeout=30)
        except (OSError, subprocess.SubprocessError):
            return []
        ids = res.stdout.split() if res.returncode == 0 else []
        if ids:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                _docker("rm", "-f", *ids, timeout=60)
        return ids

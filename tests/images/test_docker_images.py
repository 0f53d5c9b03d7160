"""The FROM-scratch images: images/build-image.sh builds them with their labels, and a containerized
demux-server answers a containerized demux-client over a private Docker network, by container name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("DEMUXLAB_BIN_DIR", REPO / "build" / "bin"))


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        pytest.fail(f"docker {' '.join(args)} failed: {res.stderr.strip()}")
    return res


@pytest.fixture(scope="module")
def images() -> dict[str, dict[str, Any]]:
    if shutil.which("docker") is None or docker("info", timeout=30, check=False).returncode != 0:
        pytest.fail("the Docker engine is not running (make setup starts it)")
    for name in ("demux-server", "demux-client"):
        if not os.access(BIN_DIR / name, os.X_OK):
            pytest.fail(f"{BIN_DIR / name} is missing: run `make build`")
    res = subprocess.run(
        ["bash", str(REPO / "images" / "build-image.sh")], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    built = [json.loads(line) for line in res.stdout.splitlines()]
    return {b["role"]: b for b in built}


def test_images_carry_labels(images: dict[str, dict[str, Any]]) -> None:
    assert set(images) == {"server", "client"}
    for role, info in images.items():
        version = subprocess.run(
            [str(BIN_DIR / f"demux-{role}"), "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        inspect = json.loads(docker("image", "inspect", info["image"]).stdout)[0]
        labels = inspect["Config"]["Labels"]
        assert inspect["Id"] == info["id"]
        assert inspect["Config"]["Entrypoint"] == [f"/demux-{role}"]
        assert info["image"] == f"demuxlab/{role}:{labels['org.demuxlab.source-sha256'][:12]}"
        # The labels are the binary's own account of its provenance, verbatim.
        assert version == (
            f"demux-{role} source={labels['org.demuxlab.source-sha256']} "
            f"compiler={labels['org.demuxlab.compiler']} flags={labels['org.demuxlab.cflags']}"
        )
        assert "-O2" in labels["org.demuxlab.cflags"]
        assert len(labels["org.demuxlab.binary-sha256"]) == 64
        latest = json.loads(docker("image", "inspect", f"demuxlab/{role}:latest").stdout)[0]
        assert latest["Id"] == info["id"]
        # Nothing but the binary: a scratch image has a single layer.
        assert len(inspect["RootFS"]["Layers"]) == 1


def test_server_answers_client_on_private_network(images: dict[str, dict[str, Any]]) -> None:
    suffix = uuid.uuid4().hex[:8]
    net, server, client = f"demuxlab-test-{suffix}", f"demuxlab-srv-{suffix}", f"demuxlab-cli-{suffix}"
    try:
        docker("network", "create", net)
        docker(
            "run", "--detach", "--name", server, "--network", net, images["server"]["image"],
            "--pattern", "reactor", "--notifier", "epoll-lt", "--threads", "1", "--port", "7000",
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while '"listening"' not in docker("logs", server).stdout:
            assert time.monotonic() < deadline, "server container never reported listening"
            time.sleep(0.1)
        res = docker(
            "run", "--rm", "--name", client, "--network", net, images["client"]["image"],
            "--host", server, "--port", "7000", "--connections", "4", "--threads", "1",
            "--msg-size", "32", "--warmup", "0.3", "--duration", "1",
            timeout=60, check=False,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        report = json.loads(res.stdout)
        assert report["ok"] is True
        assert report["messages"] > 0
        # docker stop sends SIGTERM: the server prints its exit JSON and exits 0.
        docker("stop", "--time", "10", server)
        assert json.loads(docker("inspect", server).stdout)[0]["State"]["ExitCode"] == 0
        exit_line = json.loads(docker("logs", server).stdout.strip().splitlines()[-1])
        assert exit_line["event"] == "exit"
        assert exit_line["messages"] >= report["messages"]
        assert exit_line["connections_accepted"] == 4
    finally:
        docker("rm", "--force", server, client, check=False)
        docker("network", "rm", net, check=False)

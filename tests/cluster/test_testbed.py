"""`demuxlab testbed up|status|down`: a second, one-pair testbed next to the session's; down removes
exactly what its up made."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_helpers import Testbed

from demuxlab.inventory import load_inventory
from demuxlab.testbed import plan_hosts

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.cluster]
DEMUXLAB = str(Path(sys.executable).parent / "demuxlab")


def test_plan_hosts_shares_cpus_only_when_it_must() -> None:
    few = plan_hosts(2, ncpus=2)
    assert [h.cpus for h in few] == ["0", "1", "0", "1"] and all(h.shared for h in few)
    many = plan_hosts(2, ncpus=16)
    assert [h.cpus for h in many] == ["0-3", "4-7", "8-11", "12-15"] and not any(h.shared for h in many)
    assert [h.name for h in many] == ["tb1-server", "tb1-client", "tb2-server", "tb2-client"]


def labelled(kind: str) -> set[str]:
    cmd = {"ps": ["ps", "-a", "--format", "{{.Names}}"], "volume": ["volume", "ls", "--format", "{{.Name}}"]}
    out = subprocess.run(["docker", *cmd[kind]], capture_output=True, text=True, check=True).stdout
    return {line for line in out.split() if line.startswith("demuxlab-tb-")}


def test_up_status_down(testbed: Testbed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMUXLAB_TESTBED_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("DEMUXLAB_TESTBED_INVENTORY", str(tmp_path / "inventory"))
    containers_before, volumes_before = labelled("ps"), labelled("volume")
    up = subprocess.run(
        [DEMUXLAB, "testbed", "up", "--pairs", "1"], capture_output=True, text=True, check=False
    )
    try:
        assert up.returncode == 0, up.stderr
        assert "2 hosts up" in up.stdout and "(image cached)" in up.stdout
        status = json.loads(
            subprocess.run(
                [DEMUXLAB, "testbed", "status", "--json"], capture_output=True, text=True, check=True
            ).stdout
        )
        assert status["image_present"] is True
        assert [(h["name"], h["running"]) for h in status["hosts"]] == [
            ("tb1-server", True),
            ("tb1-client", True),
        ]
        (pair,) = load_inventory(tmp_path / "inventory").pairs
        # Its own hostname, and the other host reachable at its pair address (private network).
        server = status["hosts"][0]["container"]
        ping = subprocess.run(
            [
                "docker",
                "exec",
                server,
                "sh",
                "-c",
                f"hostname; ssh-keyscan -T 3 {pair.client.address} 2>/dev/null",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert ping.stdout.splitlines()[0] == "tb1-server"
        assert "ssh-ed25519" in ping.stdout
    finally:
        down = subprocess.run([DEMUXLAB, "testbed", "down"], capture_output=True, text=True, check=False)
    assert down.returncode == 0, down.stderr
    assert labelled("ps") == containers_before and labelled("volume") == volumes_before
    assert not (tmp_path / "state").exists() and not (tmp_path / "inventory").exists()
    # The session's testbed is untouched.
    for host in testbed.hosts:
        assert testbed.sh(host, "true").returncode == 0
    status = subprocess.run([DEMUXLAB, "testbed", "status"], capture_output=True, text=True, check=True)
    assert "no hosts" in status.stdout

"""The kernel's costs through the docker launcher (issue 44): the server in its container is asked for its
count with SIGUSR1 at the client's phase boundaries (from this host, to the container's process: its
namespace's init, which takes the signal because it blocks it and waits for it), its line comes back
through ``docker run``'s stdout, and the record's system calls per message are what the pattern's code
says, as through the native launcher (tests/images/test_costs.py): the level-triggered reactor's four
(epoll_wait, recv, send, the re-activation's epoll_ctl), the client's three. Each thread's own count is
joined to the host's thread by its id in the container's PID namespace (NSpid).

The images are this checkout's (tagged by the binaries' source hash, images/build-image.sh; built here
when absent). Counts, not times: one connection in a closed loop, so each message is one round."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest

from demuxlab.costs import run_costs
from demuxlab.launch import RunRequest
from demuxlab.launch.docker import DockerLauncher
from demuxlab.phases import Phases
from demuxlab.plan import Pinning
from demuxlab.point import Point
from demuxlab.topology import collect_facts
from helpers.server import ROOT, build_target

pytestmark = pytest.mark.docker


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """This checkout's images, ``demuxlab/<role>:<source hash 12>``: built when the engine lacks them."""
    if shutil.which("docker") is None or _docker("info").returncode != 0:
        pytest.skip("no Docker engine (make setup starts one)")
    out = {}
    for role in ("server", "client"):
        build_target(f"../build/bin/demux-{role}")
        version = subprocess.run(
            [str(ROOT / "build" / "bin" / f"demux-{role}"), "--version"], capture_output=True, text=True
        ).stdout
        found = re.search(r"source=([0-9a-f]{12})", version)
        assert found, version
        out[role] = f"demuxlab/{role}:{found.group(1)}"
    if any(_docker("image", "inspect", image).returncode != 0 for image in out.values()):
        subprocess.run(["bash", str(ROOT / "images" / "build-image.sh")], check=True, capture_output=True)
    return out


def test_the_containers_count_their_system_calls_at_the_phase_boundaries(images: dict[str, str]) -> None:
    facts = collect_facts()
    req = RunRequest(
        run_id="00000000-0000-4000-8000-00000000d057",
        experiment={"name": "costs-test", "spec_sha256": "0" * 64, "git_rev": None, "spec_path": None},
        point=Point("reactor", "epoll-lt", 1, 0.0, 1, 1, 1, None, False),
        repeat=0,
        phases=Phases(warmup_s=0.3, measure_s=2.0, cooldown_s=0.2),
        pinning=Pinning((0,), (1,), False, True, ()),
        hosts={"server": facts, "client": facts},
    )
    record = DockerLauncher(images=images).run(req)
    assert record["status"] == "ok", record["failure_reason"]
    costs: dict[str, Any] = record["costs"]
    assert costs["phases"] == ["measure", "cooldown"]
    server = costs["server"]
    assert isinstance(server, dict), server  # the container's process, seen from this host
    assert server["syscalls_source"].startswith("demux-server's own count")  # its SIGUSR1 lines
    assert server["syscalls_interval_s"] == pytest.approx(2.0, abs=0.5)
    per = {
        (c.side, c.metric): c.per_message
        for c in run_costs(costs, record["stats"]["throughput_msgs_per_s"], req.phases.cooldown_s)
    }
    assert 3.85 <= per["server", "syscalls"] <= 4.15, per["server", "syscalls"]  # type: ignore[operator]
    assert 2.85 <= per["client", "syscalls"] <= 3.15, per["client", "syscalls"]  # type: ignore[operator]
    # Each thread's own count, by its id in the container: the reactor's makes all but a few of them.
    for side in ("server", "client"):
        threads = costs[side]["threads"]
        assert threads and all(isinstance(t["syscalls"], int) for t in threads), (side, threads)
        assert sum(t["syscalls"] for t in threads) == costs[side]["syscalls"]

"""The launchers against the real binaries: records, failures as records, bad input as one-line errors."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from demuxlab.launch import RunRequest, get_launcher
from demuxlab.launch.native import NativeLauncher
from demuxlab.plan import plan_pinning
from demuxlab.spec import Phases, Point
from demuxlab.topology import collect_facts

DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))
REPO = Path(__file__).resolve().parents[2]


def request(point: Point, *, port: int = 0, instrument: bool = False, measure_s: float = 1.0) -> RunRequest:
    facts = collect_facts()
    return RunRequest(
        run_id="00000000-0000-4000-8000-000000000001",
        experiment={"name": "launch-test", "spec_sha256": "0" * 64, "git_rev": None, "spec_path": None},
        point=point,
        repeat=0,
        phases=Phases(warmup_s=0.3, measure_s=measure_s, cooldown_s=0.0),
        pinning=plan_pinning(facts, facts, point.threads, point.client_threads, True),
        hosts={"server": facts, "client": facts},
        port=port,
        instrument=instrument,
    )


def point(pattern: str = "reactor", notifier: str = "epoll-lt", threads: int = 1) -> Point:
    return Point(
        pattern=pattern,
        notifier=notifier,
        threads=threads,
        work_us=0.0,
        connections=8,
        msg_size=64,
        client_threads=1,
        rate=None,
    )


def test_native_run_record_has_every_contract_field(binaries: Path) -> None:
    record = NativeLauncher().run(request(point("hsha", "epoll-lt", 2), instrument=True, measure_s=2))
    assert record["status"] == "ok", record["failure_reason"]
    assert record["format"] == "demuxlab.run/1"
    assert record["point"]["point_key"] == point("hsha", "epoll-lt", 2).point_key
    assert record["server"]["event"] == "exit" and record["server"]["messages"] > 0
    assert {"queue_put", "queue_get", "rearm", "notify"} <= set(record["server"]["ops"])
    assert record["client"]["ok"] is True and len(record["client"]["per_second"]) == 2
    assert record["stats"]["throughput_msgs_per_s"] > 0
    assert record["artifacts"]["server"]["sha256"] != record["artifacts"]["client"]["sha256"]
    assert record["pinning"]["server_cpus"] and record["hosts"]["server"]["hostname"]
    assert 0 <= record["orchestration_s"] < 5


def test_the_wake_up_is_measured_for_instrumented_runs_on_one_host_only(
    binaries: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run point's instrumented run on one host has the client's wake-up of a sleeping server thread
    measured before it, under the pair's lease (wake-cost, client's first CPU to the server's; the
    calibration charges it, docs/ctmc-reference.md); a plain run has none; without the wake-cost binary the
    pinning says why; a pinning on two hosts is not measured."""
    from dataclasses import replace

    from demuxlab.launch.wake import with_wake_cost
    from demuxlab.runpoint import run_leased

    monkeypatch.setenv("DEMUXLAB_HOME", str(tmp_path / "home"))  # the pair's lease lives there
    handler = signal.getsignal(signal.SIGTERM)  # run_leased sets its own (a run point's process)
    try:
        timed = run_leased(NativeLauncher(), request(point(), instrument=True, measure_s=0.5), None)
        record = run_leased(NativeLauncher(), request(point(), measure_s=0.5), None)
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert timed["status"] == "ok", timed["failure_reason"]
    assert 1.0 < timed["pinning"]["wake_us"] < 1000.0 and 0.5 < timed["pinning"]["handoff_us"] < 1000.0
    assert record["status"] == "ok" and not {"wake_us", "handoff_us"} & set(record["pinning"])
    req = request(point(), instrument=True, measure_s=0.5)
    missing = tmp_path / "wake-cost"
    pinned = with_wake_cost(req.pinning, prog=missing)
    assert pinned.wake_us is None and pinned.handoff_us is None
    assert pinned.notes[-1] == (
        f"the client's wake-up cost was not measured: wake-cost not found at {missing}: run `make build`"
    )
    apart = replace(req.pinning, same_host=False)
    assert with_wake_cost(apart) == apart


def test_port_in_use_is_a_failed_record_naming_the_cause(binaries: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        record = NativeLauncher().run(request(point(), port=busy.getsockname()[1]))
    assert record["status"] == "failed"
    assert "server did not start" in record["failure_reason"]
    assert "in use" in record["failure_reason"].lower()
    assert record["client"] is None


def test_unknown_launcher_and_missing_binary_are_one_line_errors(tmp_path: Path, binaries: Path) -> None:
    spec = REPO / "tests" / "integration" / "specs" / "tiny.yaml"
    plan = json.loads(subprocess.run([DEMUXLAB, "plan", str(spec)], capture_output=True, text=True).stdout)
    rid = plan["runs"][0]["run_id"]

    out = str(tmp_path / "r.json")
    res = subprocess.run(
        [DEMUXLAB, "run-point", str(spec), "--run-id", rid, "--out", out, "--launcher", "ssh"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2
    assert res.stderr.strip() == "demuxlab: error: unknown launcher 'ssh'; valid: docker, native"

    res = subprocess.run(
        [DEMUXLAB, "run-point", str(spec), "--run-id", "nope", "--out", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and "run id 'nope' is not a run of this spec" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1

    env = {"DEMUXLAB_BIN": str(tmp_path / "nothing-here"), "PATH": "/usr/bin:/bin"}
    res = subprocess.run(
        [DEMUXLAB, "run-point", str(spec), "--run-id", rid, "--out", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode != 0 and "demux-server not found" in res.stderr and "make build" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "r.json").exists()


def test_docker_asks_for_no_more_descriptors_than_the_host_allows() -> None:
    import resource

    cmd = get_launcher("docker").wrap("server", ["demux-server", "--port", "0"], [0, 1], "r" * 36)
    soft, hard = cmd[cmd.index("--ulimit") + 1].removeprefix("nofile=").split(":")
    host_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert int(soft) == int(hard) and (host_hard == resource.RLIM_INFINITY or int(hard) == host_hard)
    assert cmd[cmd.index("--cpuset-cpus") + 1] == "0,1"
    assert cmd[-3:] == ["demuxlab/server:latest", "--port", "0"]


def test_get_launcher_names() -> None:
    assert get_launcher("native").name == "native"
    assert get_launcher("docker").name == "docker"


@pytest.mark.docker
def test_docker_run_matches_native_contract(binaries: Path, docker_engine: None) -> None:
    subprocess.run(["make", "-C", str(REPO), "images"], check=True, capture_output=True, timeout=600)
    record = get_launcher("docker").run(request(point("lf", "epoll-et", 2)))
    assert record["status"] == "ok", record["failure_reason"]
    assert record["artifacts"]["server"]["kind"] == "image"
    assert record["artifacts"]["server"]["labels"]["org.demuxlab.source-sha256"]
    assert record["server"]["messages"] >= record["client"]["messages"] > 0
    leftover = subprocess.run(
        ["docker", "ps", "-aq", "--filter", "name=demuxlab-00000000-0000-4"], capture_output=True, text=True
    )
    assert leftover.stdout.strip() == ""


@pytest.mark.docker
def test_docker_orphans_of_a_pair_are_ended(binaries: Path, docker_engine: None) -> None:
    """A container left by a killed run (labelled with its pair) is removed by the next run's launcher."""
    import uuid

    from demuxlab.launch.docker import IMAGES, PAIR_LABEL, DockerLauncher

    subprocess.run(["make", "-C", str(REPO), "images"], check=True, capture_output=True, timeout=600)
    pair, other = f"i14-{uuid.uuid4().hex[:8]}", f"i14-{uuid.uuid4().hex[:8]}"
    made = []
    for label in (pair, pair, other):
        res = subprocess.run(
            ["docker", "create", "--label", f"{PAIR_LABEL}={label}", IMAGES["server"], "--list"],
            capture_output=True,
            text=True,
            check=True,
        )
        made.append(res.stdout.strip())
    try:
        ended = DockerLauncher().end_orphans(pair)
        assert {i[:12] for i in ended} == {made[0][:12], made[1][:12]}
        left = subprocess.run(
            ["docker", "ps", "-aq", "--no-trunc", "--filter", f"label={PAIR_LABEL}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        assert made[0] not in left and made[1] not in left and made[2] in left  # another pair's: untouched
    finally:
        subprocess.run(["docker", "rm", "-f", *made], capture_output=True, check=False)

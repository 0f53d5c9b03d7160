"""Pair scheduling without hosts: simulated clusters, hardware classes, the pair lease (real flock),
quarantine, retries on another pair, the per-class report, and the remote launcher's pure parts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from demuxlab import lease
from demuxlab.cluster.schedule import NoPairError, assign_pair, eligible_pairs, preference
from demuxlab.cluster.state import PairState, read_state, record_outcome, write_state
from demuxlab.errors import ConfigError
from demuxlab.launch.remote import LABEL_PAIR, LABEL_RUN, RemoteLauncher, noise_reasons
from demuxlab.remote.hostpairs import hardware_class, load_pairs, sim_facts
from demuxlab.report import PointRows, RunRow, summarize
from helpers.load import Span, within

REPO = Path(__file__).resolve().parents[2]
DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))


@pytest.fixture(autouse=True)
def lease_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "leases"
    monkeypatch.setenv("DEMUXLAB_LEASE_DIR", str(path))
    return path


def sim_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def test_simulated_cluster_pairs(tmp_path: Path) -> None:
    src = load_pairs(
        sim_file(tmp_path, "simulated: {pairs: 3, failing: [sim-001], classes: {sim-002: big}}\n")
    )
    assert src.simulated
    assert [p.name for p in src.pairs] == ["sim-000", "sim-001", "sim-002"]
    assert src.pairs[1].sim is not None and src.pairs[1].sim.fail_from_run == 0
    assert src.pairs[0].sim is not None and src.pairs[0].sim.fail_from_run is None
    assert len(src.hosts()) == 6


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("simulated: {pairs: 0}\n", "simulated.pairs"),
        ("simulated: {pairs: 2, failing: [sim-009]}\n", "simulated.failing"),
        ("simulated: {pairs: 2, fail_from_run: -1}\n", "simulated.fail_from_run"),
        ("simulated: 3\n", "simulated"),
    ],
)
def test_simulated_cluster_errors_name_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = sim_file(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_pairs(path)
    assert err.value.message.startswith(f"{path}: {field}:")


def test_missing_inventory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="inventory not found"):
        load_pairs(tmp_path / "nope")


def test_hardware_class_separates_different_machines(tmp_path: Path) -> None:
    src = load_pairs(sim_file(tmp_path, "simulated: {pairs: 3, classes: {sim-002: big}}\n"))
    a, b, c = src.pairs
    ids = [
        hardware_class(sim_facts(p.server, p.sim.hardware_class), sim_facts(p.client, p.sim.hardware_class))[
            "id"
        ]
        for p in (a, b, c)
        if p.sim is not None
    ]
    assert ids[0] == ids[1] != ids[2]
    server = sim_facts(a.server, "x")
    other_kernel = {**server, "kernel": "6.9"}
    assert hardware_class(server, server)["id"] != hardware_class(other_kernel, server)["id"]
    # Noise facts (governor, load, the time of collection) are not part of the class.
    noisy = {**server, "governor": "powersave", "collected_at": "2030-01-01T00:00:00Z"}
    assert hardware_class(server, server)["id"] == hardware_class(noisy, server)["id"]


def test_preference_rotates_by_lane_and_puts_tried_pairs_last(tmp_path: Path) -> None:
    pairs = load_pairs(sim_file(tmp_path, "simulated: {pairs: 4}\n")).pairs
    assert [p.name for p in preference(pairs, 5, set())] == ["sim-001", "sim-002", "sim-003", "sim-000"]
    assert [p.name for p in preference(pairs, 1, {"sim-001", "sim-003"})] == [
        "sim-002",
        "sim-000",
        "sim-001",
        "sim-003",
    ]
    classes = {"sim-000": "a", "sim-001": "b", "sim-002": "a", "sim-003": "b"}
    assert [p.name for p in eligible_pairs(pairs, classes, "b")] == ["sim-001", "sim-003"]
    assert len(eligible_pairs(pairs, classes, None)) == 4


def test_assign_takes_a_free_pair_under_its_real_lease(tmp_path: Path) -> None:
    pairs = load_pairs(sim_file(tmp_path, "simulated: {pairs: 2}\n")).pairs
    state = tmp_path / "state"
    busy = lease.try_acquire("sim-000", "someone-else")
    assert busy is not None
    try:
        got = assign_pair(pairs, "run-a", state=state, lane=0, wait_s=0)
        assert got.pair.name == "sim-001"  # lane 0 prefers sim-000, which is leased
        assert lease.holder("sim-001")["run_id"] == "run-a"  # type: ignore[index]
        with pytest.raises(NoPairError, match="all leased"):
            assign_pair(pairs, "run-b", state=state, wait_s=0.3, poll_s=0.05)
        got.lease.release()
        assert lease.holder("sim-001") is None
    finally:
        busy.release()


def test_a_retry_waits_for_a_pair_it_has_not_failed_on(tmp_path: Path) -> None:
    pairs = load_pairs(sim_file(tmp_path, "simulated: {pairs: 2}\n")).pairs
    state = tmp_path / "state"
    busy = lease.try_acquire("sim-000", "someone-else")
    assert busy is not None
    try:
        # sim-001 is free, but this run failed there: it waits for sim-000 rather than fail there again.
        with pytest.raises(NoPairError, match="all leased"):
            assign_pair(pairs, "run-a", state=state, tried={"sim-001"}, wait_s=0.3, poll_s=0.05)
        assert lease.holder("sim-001") is None
    finally:
        busy.release()
    got = assign_pair(pairs, "run-a", state=state, tried={"sim-001"}, wait_s=0)
    assert got.pair.name == "sim-000"
    got.lease.release()
    # Every healthy pair tried: it goes back to one of them rather than wait forever.
    got = assign_pair(pairs, "run-a", state=state, lane=1, tried={"sim-000", "sim-001"}, wait_s=0)
    assert got.pair.name == "sim-001"
    got.lease.release()


def test_a_lease_dies_with_its_holder(tmp_path: Path) -> None:
    pairs = load_pairs(sim_file(tmp_path, "simulated: {pairs: 1}\n")).pairs
    code = (
        "import time; from demuxlab import lease; l = lease.try_acquire('sim-000', 'x');"
        " print(l is not None, flush=True); time.sleep(60)"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "True"
            with pytest.raises(NoPairError):
                assign_pair(pairs, "mine", state=tmp_path, wait_s=0.2, poll_s=0.05)
        finally:
            proc.kill()
    got = assign_pair(pairs, "mine", state=tmp_path, wait_s=5, poll_s=0.05)  # no cleanup by hand
    got.lease.release()


def test_quarantined_pairs_get_no_runs(tmp_path: Path) -> None:
    pairs = load_pairs(sim_file(tmp_path, "simulated: {pairs: 2}\n")).pairs
    state = tmp_path / "state"
    write_state(state, PairState(name="sim-000", quarantined=True, quarantine_reason="broken"))
    for lane in range(3):
        got = assign_pair(pairs, f"run-{lane}", state=state, lane=lane, wait_s=0)
        assert got.pair.name == "sim-001"
        got.lease.release()
    write_state(state, PairState(name="sim-001", quarantined=True, quarantine_reason="broken too"))
    with pytest.raises(NoPairError, match="no healthy pair left"):
        assign_pair(pairs, "run-x", state=state, wait_s=10)


def test_quarantine_after_n_failures_in_a_row() -> None:
    st = PairState(name="p")
    assert not record_outcome(st, "r1", False, "ssh dropped", 3)
    assert not record_outcome(st, "r2", False, "ssh dropped", 3)
    assert not record_outcome(st, "r3", True, None, 3)  # a success resets the count
    assert st.consecutive_failures == 0
    assert not record_outcome(st, "r4", False, "a", 3)
    assert not record_outcome(st, "r5", False, "b", 3)
    assert record_outcome(st, "r6", False, "engine down", 3)
    assert st.quarantined and st.quarantine_reason is not None
    assert st.quarantine_reason.startswith("3 runs in a row failed; last: engine down")
    assert (st.done, st.failed) == (1, 5)
    never = PairState(name="q")
    for i in range(10):
        assert not record_outcome(never, f"r{i}", False, "x", 0)
    assert not never.quarantined


def test_state_file_round_trip_and_fresh_default(tmp_path: Path) -> None:
    assert read_state(tmp_path, "nobody") == PairState(name="nobody")
    st = PairState(name="p1", done=3, quarantined=True, quarantine_reason="why")
    write_state(tmp_path, st)
    back = read_state(tmp_path, "p1")
    assert (back.done, back.quarantined, back.quarantine_reason) == (3, True, "why")
    (tmp_path / "pairs" / "p2.json").write_text("{half")
    assert read_state(tmp_path, "p2") == PairState(name="p2")


def _run_point(tmp_path: Path, cluster: Path, rid: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            DEMUXLAB,
            "run-point",
            str(REPO / "tests" / "integration" / "specs" / "tiny.yaml"),
            "--run-id",
            rid,
            "--out",
            str(tmp_path / "res" / "runs" / f"{rid}.json"),
            "--pairs-from",
            str(cluster),
            "--launcher",
            "sim",
            "--cluster-state",
            str(tmp_path / "cs"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
        check=False,
    )


def _run_ids(n: int) -> list[str]:
    res = subprocess.run(
        [DEMUXLAB, "plan", str(REPO / "tests" / "integration" / "specs" / "tiny.yaml")],
        capture_output=True,
        text=True,
        check=True,
    )
    return [r["run_id"] for r in json.loads(res.stdout)["runs"][:n]]


def test_run_point_retries_a_lost_host_on_another_pair_and_quarantines(tmp_path: Path) -> None:
    cluster = sim_file(tmp_path, "simulated: {pairs: 2, failing: [sim-000]}\n")
    rid, rid2 = _run_ids(2)
    first = _run_point(tmp_path, cluster, rid, "--lane", "0", "--attempt", "1", "--max-attempts", "2")
    assert first.returncode == 1, first.stderr
    assert "simulated host lost" in first.stderr
    failed = json.loads((tmp_path / "res" / "failures" / f"{rid}.attempt1.json").read_text())
    assert failed["host_pair"] == "sim-000" and failed["status"] == "failed"
    # The retry, from the same lane, avoids the pair it failed on.
    second = _run_point(tmp_path, cluster, rid, "--lane", "0", "--attempt", "2", "--max-attempts", "2")
    assert second.returncode == 0, second.stderr
    record = json.loads((tmp_path / "res" / "runs" / f"{rid}.json").read_text())
    assert record["status"] == "ok" and record["host_pair"] == "sim-001"
    assert record["pair"]["server"]["name"] == "sim-001-server"
    assert record["pair"]["client"]["name"] == "sim-001-client"
    assert record["hosts"]["server"]["hostname"] == "sim-001-server"
    assert record["pair"]["hardware_class"]["id"].startswith("hw-")
    assert record["scheduling"]["avoided"] == ["sim-000"]
    assert record["pinning"]["same_host"] is False
    # With quarantine after 1 failure, the next failure on sim-000 quarantines it; later runs avoid it.
    third = _run_point(tmp_path, cluster, rid2, "--lane", "0", "--quarantine-after", "1")
    assert third.returncode == 0  # last attempt: recorded as failed
    assert "pair sim-000 quarantined" in third.stderr
    assert read_state(tmp_path / "cs", "sim-000").quarantined
    progress = json.loads((tmp_path / "cs" / "progress.json").read_text())
    states = {p["pair"]: p["state"] for p in progress["pairs"]}
    assert states == {"sim-000": "quarantined", "sim-001": "idle"}


def test_run_point_with_every_pair_quarantined_records_why(tmp_path: Path) -> None:
    cluster = sim_file(tmp_path, "simulated: {pairs: 1}\n")
    write_state(tmp_path / "cs", PairState(name="sim-000", quarantined=True, quarantine_reason="dead"))
    (rid,) = _run_ids(1)
    res = _run_point(tmp_path, cluster, rid)
    assert res.returncode == 0, res.stderr
    record = json.loads((tmp_path / "res" / "runs" / f"{rid}.json").read_text())
    assert record["status"] == "failed"
    assert record["failure_reason"].startswith("no healthy pair left")


def test_report_never_averages_classes() -> None:
    def run(tput: float, cls: str | None) -> RunRow:
        return RunRow("ok", tput, True, None, None, None, None, cls)

    mixed = PointRows("p", {"instrument": False}, [run(100, "hw-a"), run(110, "hw-a"), run(900, "hw-b")])
    single = PointRows("q", {"instrument": False}, [run(5, None), run(7, None)])
    rows = summarize([mixed, single])
    assert [(r["point_key"], r["hardware_class"], r["runs_ok"]) for r in rows] == [
        ("p", "hw-a", 2),
        ("p", "hw-b", 1),
        ("q", None, 2),
    ]
    assert rows[0]["throughput_mean"] == pytest.approx(105)


def test_noise_reasons() -> None:
    quiet = {"governor": "performance", "load1": 0.2, "cpus": 8, "containers": [], "heavy": []}
    assert noise_reasons("h", quiet) == ([], [])
    noisy = {"governor": "powersave", "load1": 9.0, "cpus": 4, "containers": ["x"], "heavy": [[97, "yes"]]}
    transient, persistent = noise_reasons("h", noisy)
    assert persistent == ["h: CPU governor 'powersave', not 'performance'"]
    assert transient == ["h: load 9.00 on 4 CPUs", "h: container x running", "h: process yes at 97% CPU"]
    assert noise_reasons("h", {"governor": None, "load1": 0.5, "cpus": 1})[1] == []


def test_a_run_on_hosts_sharing_one_machine_says_it_is_not_performance_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The test cluster's hosts share this machine's CPUs (the inventory's demuxlab_cpus_shared): their runs
    are flagged and name the hosts, so the dashboard and the report show them as not performance data
    (issue 45: the smoke through --profile cluster looked like a validation)."""
    from demuxlab.remote.hostpairs import ClusterPair, Host

    quiet = {"governor": "performance", "load1": 0.1, "cpus": 8, "containers": [], "heavy": []}
    shared = ClusterPair(
        "tb1", Host("tb1-server", "10.0.0.1", cpus_shared=True), Host("tb1-client", "10.0.0.2")
    )
    launcher = RemoteLauncher(shared)
    monkeypatch.setattr(launcher, "noise_check", lambda: {"tb1-server": quiet, "tb1-client": quiet})
    noise = launcher.wait_quiet()
    assert noise["flagged"] and noise["cpus_shared"] == ["tb1-server"]
    assert "tb1-server: CPUs shared with other hosts of one machine (test cluster)" in noise["reasons"]
    own = RemoteLauncher(ClusterPair("p1", Host("s1", "10.0.0.1"), Host("c1", "10.0.0.2")))
    monkeypatch.setattr(own, "noise_check", lambda: {"s1": quiet, "c1": quiet})
    assert own.wait_quiet()["cpus_shared"] == [] and not own.wait_quiet()["flagged"]


def test_remote_launcher_command_lines(tmp_path: Path) -> None:
    from demuxlab.remote.hostpairs import ClusterPair, Host

    pair = ClusterPair(
        "pair1",
        Host("s1", "10.0.0.1", address="192.168.77.10"),
        Host("c1", "10.0.0.2", address="192.168.77.11"),
    )
    launcher = RemoteLauncher(pair)
    server = launcher.wrap("server", ["demux-server", "--threads", "2"], [2, 3], "abcdef0123456789abcdef")
    client = launcher.wrap(
        "client", ["demux-client", "--host", "192.168.77.10"], [1], "abcdef0123456789abcdef"
    )
    assert server[:3] == ["docker", "-H", "ssh://s1"] and client[:3] == ["docker", "-H", "ssh://c1"]
    assert f"{LABEL_RUN}=abcdef0123456789abcdef" in server and f"{LABEL_PAIR}=pair1" in client
    assert server[server.index("--cpuset-cpus") + 1] == "2,3"
    assert server[server.index("--network") + 1] == "host"
    assert server[-2:] == ["--threads", "2"] and "demuxlab/server:latest" in server


def test_a_spec_pinning_a_hardware_class_runs_only_there(tmp_path: Path) -> None:
    cluster = sim_file(tmp_path, "simulated: {pairs: 3, classes: {sim-002: big}}\n")
    big = load_pairs(cluster).pairs[2]
    cls = hardware_class(sim_facts(big.server, "big"), sim_facts(big.client, "big"))["id"]
    spec = tmp_path / "specs" / "tiny.yaml"
    spec.parent.mkdir()
    text = (REPO / "tests" / "integration" / "specs" / "tiny.yaml").read_text()
    spec.write_text(text + f"hardware_class: {cls}\n")
    plan = subprocess.run([DEMUXLAB, "plan", str(spec)], capture_output=True, text=True, check=True)
    rid = json.loads(plan.stdout)["runs"][0]["run_id"]
    out = tmp_path / "res" / "runs" / f"{rid}.json"
    base = [DEMUXLAB, "run-point", str(spec), "--run-id", rid, "--out", str(out), "--launcher", "sim"]
    res = subprocess.run(
        [*base, "--pairs-from", str(cluster), "--cluster-state", str(tmp_path / "cs"), "--lane", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text())["host_pair"] == "sim-002"
    other = sim_file(tmp_path, "simulated: {pairs: 2}\n")
    res = subprocess.run(
        [*base, "--pairs-from", str(other), "--cluster-state", str(tmp_path / "cs2")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2
    assert res.stderr.strip().startswith(f"demuxlab: error: {spec}: hardware_class: no pair of class '{cls}'")
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_host_that_does_not_answer_fails_the_attempt_at_once() -> None:
    from demuxlab.errors import LaunchError
    from demuxlab.remote.hostpairs import ClusterPair, Host

    # Nothing listens on port 1: the connection is refused at once, as for a host whose sshd is gone.
    pair = ClusterPair("deadpair", Host("dead-s", "127.0.0.1", port=1), Host("dead-c", "127.0.0.1", port=1))
    with (
        Span() as span,
        pytest.raises(LaunchError, match=r"dead-s: unreachable over SSH: .*refused.*; dead-c: unreachable"),
    ):
        RemoteLauncher(pair).reach()
    within(span, 15, "reaching two hosts that refuse SSH")


def test_the_ssh_wrapper_bounds_the_docker_clis_connect_timeout() -> None:
    from demuxlab.remote.hostpairs import Host
    from demuxlab.remote.ssh import CONNECT_TIMEOUT_S, write_config

    setup = write_config([Host("h1", "10.9.9.9")])
    # The Docker CLI runs `ssh -o ConnectTimeout=30 …`: the wrapper's own value, given first, wins.
    out = subprocess.run(
        [str(setup.bin_dir / "ssh"), "-G", "-o", "ConnectTimeout=30", "h1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"connecttimeout {CONNECT_TIMEOUT_S}" in out.splitlines()

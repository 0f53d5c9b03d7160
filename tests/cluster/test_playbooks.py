"""Real Ansible runs against the testbed: provision from scratch, idempotence, check mode, facts in the
database, images with the right digest, restore, and hosts broken on purpose.

The tests run in file order and build on each other (one testbed per session).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cluster_helpers import Play, Testbed
from sqlalchemy import create_engine, text

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.cluster]

THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def assert_all_ok(play: Play, hosts: list[str]) -> None:
    assert play.rc == 0, play.out[-4000:]
    assert set(play.recap) >= set(hosts), play.out[-2000:]
    for host in hosts:
        assert play.recap[host]["failed"] == 0 and play.recap[host]["unreachable"] == 0, play.out[-4000:]


def host_image_id(tb: Testbed, host: str, name: str) -> str:
    return tb.sh(host, f"docker image inspect --format '{{{{.Id}}}}' {name}", check=False).stdout.strip()


def thp(tb: Testbed, host: str) -> str:
    return tb.sh(host, f"cat {THP}").stdout.strip()


@pytest.fixture(scope="module")
def before(testbed: Testbed) -> dict[str, dict[str, str]]:
    """Each host's knobs before any tuning."""
    return {
        h: {
            "thp": thp(testbed, h),
            "somaxconn": testbed.sh(h, "cat /proc/sys/net/core/somaxconn").stdout.strip(),
        }
        for h in testbed.hosts
    }


def test_site_from_scratch(
    testbed: Testbed, before: dict[str, dict[str, str]], image_ids: dict[str, str], cluster_db: str
) -> None:
    for host in testbed.hosts:
        # From scratch: the engine is installed but not configured and not running.
        assert testbed.sh(host, "docker info", check=False).returncode != 0
        assert testbed.sh(host, "test -e /etc/docker/daemon.json", check=False).returncode != 0
    play = testbed.play("site.yml", env={"DEMUXLAB_DATABASE_URL": cluster_db})
    assert_all_ok(play, testbed.hosts)
    for host in testbed.hosts:
        assert play.recap[host]["changed"] > 0
        # Engine running, configured as the role says.
        config = json.loads(testbed.sh(host, "cat /etc/docker/daemon.json").stdout)
        assert config["userland-proxy"] is False and config["log-opts"]["max-file"] == "3"
        assert testbed.sh(host, "sudo -u demux docker info --format '{{.ServerVersion}}'").stdout.strip()
        # Images loaded with the controller's digest.
        for name, want in image_ids.items():
            assert host_image_id(testbed, host, name) == want
        assert testbed.sh(host, "ls /var/tmp/demuxlab-images").stdout.strip() == ""
        # Tuning applied and recorded.
        assert "[never]" in thp(testbed, host) or thp(testbed, host) == "never"
        assert testbed.sh(host, "cat /proc/sys/net/core/somaxconn").stdout.strip() == "65535"
        state = json.loads(testbed.sh(host, "cat /var/lib/demuxlab/tuning.json").stdout)
        assert state["original"]["somaxconn"]["value"] == before[host]["somaxconn"]
        # A knob this host lacks is skipped with its reason, never an error.
        assert "cpufreq" in state["skipped"]["governor"]
    # Facts of every host, from the same collector as `demuxlab facts`, in the hosts table.
    engine = create_engine(cluster_db)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT hostname, facts FROM hosts")).all()
    engine.dispose()
    by_name = {row[0]: row[1] for row in rows}
    assert set(by_name) == set(testbed.hosts)
    from demuxlab.topology import FACT_KEYS

    for host, facts in by_name.items():
        assert set(facts) == set(FACT_KEYS)
        cpus = next(h["cpus"] for h in testbed.state["hosts"] if h["name"] == host)
        # The host's CPU set is what its facts report as online... or the machine's, where the
        # container sees every CPU (sysfs is the machine's); either way, its own CPUs are among them.
        assert int(cpus.split("-")[0]) in facts["online_cpus"]
        # The NIC IRQ map the planner reads (CONTRACTS §3): a list (empty where the host has only veth
        # interfaces, as these containers do), each NIC with its node, routes and IRQs.
        assert isinstance(facts["nics"], list)
        for nic in facts["nics"]:
            assert {"name", "driver", "numa_node", "routes", "irqs"} <= set(nic)
    facts_file = testbed.base / "facts" / f"{testbed.hosts[0]}.json"
    assert json.loads(facts_file.read_text())["hostname"] == testbed.hosts[0]


def test_second_run_changes_nothing(testbed: Testbed, cluster_db: str) -> None:
    play = testbed.play("site.yml", env={"DEMUXLAB_DATABASE_URL": cluster_db})
    assert_all_ok(play, testbed.hosts)
    assert {h: play.recap[h]["changed"] for h in testbed.hosts} == dict.fromkeys(testbed.hosts, 0), play.out[
        -3000:
    ]


def test_check_mode_runs_clean(testbed: Testbed) -> None:
    play = testbed.play("site.yml", "--check")
    assert_all_ok(play, testbed.hosts)
    assert all(play.recap[h]["changed"] == 0 for h in testbed.hosts), play.out[-3000:]


def test_restore_puts_tuning_back(testbed: Testbed, before: dict[str, dict[str, str]]) -> None:
    play = testbed.play("restore.yml")
    assert_all_ok(play, testbed.hosts)
    for host in testbed.hosts:
        assert play.recap[host]["changed"] > 0
        assert thp(testbed, host) == before[host]["thp"] or f"[{thp(testbed, host)}]" in before[host]["thp"]
        assert (
            testbed.sh(host, "cat /proc/sys/net/core/somaxconn").stdout.strip() == before[host]["somaxconn"]
        )
        assert testbed.sh(
            host, "test -e /etc/security/limits.d/90-demuxlab-nofile.conf", check=False
        ).returncode
    # Restoring again changes nothing.
    again = testbed.play("restore.yml")
    assert_all_ok(again, testbed.hosts)
    assert all(again.recap[h]["changed"] == 0 for h in testbed.hosts)


def test_broken_hosts_provision(testbed: Testbed) -> None:
    """Unreachable, wrong key, no sudo: one line each; the healthy host's work is done; a rerun after the
    fix finishes."""
    unreachable, wrong_key, no_sudo, healthy = testbed.hosts
    other_key = testbed.base / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True)
    host_vars = testbed.inventory / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / f"{wrong_key}.yml").write_text(f"ansible_ssh_private_key_file: {other_key}\n")
    testbed.sh(unreachable, "iptables -I INPUT -p tcp --dport 22 -j REJECT --reject-with tcp-reset")
    testbed.sh(no_sudo, "mv /etc/sudoers.d/demux /root/sudoers.demux")
    testbed.sh(healthy, "rm -f /etc/docker/daemon.json")
    try:
        play = testbed.play("provision.yml")
        assert play.rc != 0
        assert play.summary[unreachable].startswith("UNREACHABLE ssh:"), play.summary
        assert "Connection refused" in play.summary[unreachable]
        assert play.summary[wrong_key].startswith("UNREACHABLE ssh:"), play.summary
        assert "Permission denied (publickey" in play.summary[wrong_key]
        assert play.summary[no_sudo].startswith("FAILED"), play.summary
        assert "sudo" in play.summary[no_sudo] and "password" in play.summary[no_sudo]
        assert healthy not in play.summary
        assert play.recap[healthy]["failed"] == 0 and play.recap[healthy]["changed"] > 0
        assert testbed.sh(healthy, "test -s /etc/docker/daemon.json", check=False).returncode == 0
    finally:
        (host_vars / f"{wrong_key}.yml").unlink()
        testbed.sh(unreachable, "iptables -D INPUT -p tcp --dport 22 -j REJECT --reject-with tcp-reset")
        testbed.sh(no_sudo, "mv /root/sudoers.demux /etc/sudoers.d/demux")
    rerun = testbed.play("provision.yml")
    assert_all_ok(rerun, testbed.hosts)
    assert rerun.recap[healthy]["changed"] == 0


def test_broken_hosts_images(testbed: Testbed, image_ids: dict[str, str]) -> None:
    """Engine down, full disk, corrupted tarball: one line each; the healthy host gets its images; a rerun
    after the fix loads the rest, each with the controller's digest."""
    engine_down, full_disk, corrupted, healthy = testbed.hosts
    for host in testbed.hosts:
        testbed.sh(host, "docker rmi " + " ".join(image_ids))
    testbed.sh(engine_down, "/etc/init.d/docker stop >/dev/null; mv /usr/sbin/dockerd /usr/sbin/dockerd.off")
    testbed.sh(
        full_disk,
        "mkdir -p /var/tmp/demuxlab-images && mount -t tmpfs -o size=16k tb /var/tmp/demuxlab-images",
    )
    bad_cache = testbed.base / "bad-images"
    bad_cache.mkdir()
    for image_id in image_ids.values():
        (bad_cache / f"{image_id.removeprefix('sha256:')}.tar").write_bytes(b"not a tarball\n" * 100)
    host_vars = testbed.inventory / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / f"{corrupted}.yml").write_text(f"images_cache_dir: {bad_cache}\n")
    try:
        # images.yml alone: the provision stage would start the engine again.
        play = testbed.play("images.yml")
        assert play.rc != 0
        assert play.summary[engine_down].startswith("FAILED"), play.summary
        assert "Cannot connect to the Docker daemon" in play.summary[engine_down]
        assert play.summary[full_disk].startswith("FAILED image "), play.summary
        assert "no space left on device" in play.summary[full_disk].lower()
        assert play.summary[corrupted].startswith("FAILED image "), play.summary
        assert "docker load" in play.summary[corrupted].lower() or "Load" in play.summary[corrupted]
        assert healthy not in play.summary
        for name, want in image_ids.items():
            assert host_image_id(testbed, healthy, name) == want
            assert host_image_id(testbed, corrupted, name) != want
    finally:
        (host_vars / f"{corrupted}.yml").unlink()
        testbed.sh(engine_down, "mv /usr/sbin/dockerd.off /usr/sbin/dockerd")
        testbed.sh(full_disk, "umount /var/tmp/demuxlab-images")
    # The engine comes back with provisioning; then every host has every image.
    rerun = testbed.play("site.yml", "-e", "host_facts_store=false")
    assert_all_ok(rerun, testbed.hosts)
    for host in testbed.hosts:
        for name, want in image_ids.items():
            assert host_image_id(testbed, host, name) == want


def test_pairs_of_the_testbed_inventory(testbed: Testbed) -> None:
    from demuxlab.inventory import load_inventory

    inv = load_inventory(testbed.inventory)
    assert [p.name for p in inv.pairs] == ["tb1", "tb2"]
    for pair in inv.pairs:
        assert pair.server.address != pair.client.address
        assert not pair.server.address.startswith("127.")
        assert pair.server.key_file is not None and Path(pair.server.key_file).exists()
        assert pair.server.vars["demuxlab_cpus_shared"] is True  # 4 hosts on 2 CPUs

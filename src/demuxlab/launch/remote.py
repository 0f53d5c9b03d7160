"""The ``remote`` launcher: the server container on the pair's server host, the client container on its
client host, through each host's own Docker engine over SSH (``docker -H ssh://HOST``).

The client connects to the server host's address on the pair network (the inventory's
``demuxlab_address``), never to loopback; both sides run with the host's network (no bridge or proxy in the
measured path) and are pinned with ``--cpuset-cpus`` from the planner's plan over both hosts' facts.
``docker run`` stays attached on the controller, so the listening line, the exit JSON and SIGTERM (proxied
by the Docker CLI to the container) work exactly as for the local launchers (:mod:`demuxlab.launch.base`).

Before the run both hosts are checked for noise (:meth:`RemoteLauncher.noise_check`): CPU governor, load,
other containers, heavy processes. A noisy host makes the run wait, at most ``noise_wait_s``, for the
transient causes to pass; then it runs anyway and its record says ``noise.flagged: true`` with the reasons.

Every container carries the labels ``org.demuxlab.run_id`` and ``org.demuxlab.pair`` (as the docker
launcher's): the next holder of a pair's lease removes whatever a crashed run left on it
(:meth:`RemoteLauncher.end_orphans`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from demuxlab.errors import LaunchError
from demuxlab.launch.base import Launcher, RunRequest, cpu_list
from demuxlab.launch.docker import IMAGES, PAIR_LABEL  # the images both docker launchers run
from demuxlab.remote.hostpairs import ClusterPair, Host
from demuxlab.remote.peers import PeerWatch, peer_addresses, ss_established
from demuxlab.remote.ssh import SshSetup, env_for_docker, ssh, write_config

LABEL_RUN = "org.demuxlab.run_id"
LABEL_PAIR = PAIR_LABEL  # the docker launcher's: one label for the orphans of both
# How long a host may take to answer `ssh HOST true` before the run's pair is taken for down.
REACH_TIMEOUT_S = 20.0

# The noise check, run on a host with its own python3 (Ansible needs one there anyway). It prints one JSON
# line: governor(s), 1-minute load, online CPUs, running containers that are not demuxlab runs, and the
# processes above 50% of a CPU (sampled over 0.5 s from /proc).
NOISE_SCRIPT = r"""
import glob, json, os, subprocess, time
def govs():
    out = set()
    for p in glob.glob('/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor'):
        try: out.add(open(p).read().strip())
        except OSError: pass
    return ','.join(sorted(out)) or None
def ticks():
    t = {}
    for d in os.listdir('/proc'):
        if not d.isdigit(): continue
        try:
            s = open('/proc/%s/stat' % d).read()
            f = s[s.rindex(')') + 2:].split()
            t[int(d)] = (int(f[11]) + int(f[12]), s[s.index('(') + 1:s.rindex(')')])
        except (OSError, ValueError, IndexError): pass
    return t
a = ticks(); time.sleep(0.5); b = ticks()
hz = os.sysconf('SC_CLK_TCK'); me = os.getpid()
heavy = sorted(((round(100.0 * (b[p][0] - a[p][0]) / hz / 0.5), b[p][1]) for p in b
                if p in a and p != me and (b[p][0] - a[p][0]) / hz / 0.5 > 0.5), reverse=True)[:5]
try:
    ps = subprocess.run(['docker', 'ps', '--format', '{{.Names}}\t{{.Label "org.demuxlab.run_id"}}'],
                        capture_output=True, text=True, timeout=20)
    containers = [l.split('\t')[0] for l in ps.stdout.splitlines()
                  if l.strip() and l.split('\t')[1:2] in ([], [''])]
except (OSError, subprocess.SubprocessError):
    containers = None
print(json.dumps({'governor': govs(), 'load1': os.getloadavg()[0], 'cpus': os.cpu_count(),
                  'containers': containers, 'heavy': heavy}))
"""


def container_name(run_id: str, role: str) -> str:
    return f"demuxlab-{run_id[:18]}-{role}"


def noise_reasons(host: str, doc: dict[str, Any], load_per_cpu: float = 0.5) -> tuple[list[str], list[str]]:
    """(transient, persistent) reasons why ``host`` is noisy, from its noise check's JSON."""
    transient: list[str] = []
    persistent: list[str] = []
    governor = doc.get("governor")
    if governor is not None and governor != "performance":
        persistent.append(f"{host}: CPU governor {governor!r}, not 'performance'")
    cpus = doc.get("cpus") or 1
    load = doc.get("load1")
    if isinstance(load, (int, float)) and load > max(1.0, load_per_cpu * cpus):
        transient.append(f"{host}: load {load:.2f} on {cpus} CPUs")
    for name in doc.get("containers") or []:
        transient.append(f"{host}: container {name} running")
    for pct, comm in doc.get("heavy") or []:
        transient.append(f"{host}: process {comm} at {pct}% CPU")
    return transient, persistent


class RemoteLauncher(Launcher):
    name = "remote"

    def __init__(
        self,
        pair: ClusterPair,
        *,
        noise_wait_s: float = 60.0,
        noise_poll_s: float = 5.0,
        images: dict[str, str] | None = None,
    ) -> None:
        self.pair = pair
        self.noise_wait_s = noise_wait_s
        self.noise_poll_s = noise_poll_s
        self.images = dict(images or IMAGES)
        self._ssh: SshSetup | None = None
        self._nofile = 0
        self._peers: list[str] | None = None

    def host(self, role: str) -> Host:
        return self.pair.server if role == "server" else self.pair.client

    def _docker(self, host: Host, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", "-H", f"ssh://{host.name}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env_for_docker(self.setup()),
        )

    def _both(self, fn: Any) -> list[Any]:
        self.setup()  # once, before the threads: both would write the same files otherwise
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(fn, self.pair.hosts))

    def setup(self) -> SshSetup:
        if self._ssh is None:
            self._ssh = write_config(self.pair.hosts)
        return self._ssh

    def check(self) -> None:
        if shutil.which("docker") is None:
            raise LaunchError("the remote launcher needs the docker CLI on the controller: run `make setup`")
        # The base class starts `docker` without an env: make this pair's ssh wrapper the one it finds.
        os.environ["PATH"] = env_for_docker(self.setup())["PATH"]

    def artifacts(self) -> dict[str, dict[str, Any]]:
        def inspect(role: str) -> dict[str, Any]:
            host, image = self.host(role), self.images[role]
            try:
                res = self._docker(host, "image", "inspect", "--format", "{{json .}}", image, timeout=60)
            except subprocess.TimeoutExpired:
                raise LaunchError(f"{host.name}: the Docker engine did not answer within 60 s") from None
            if res.returncode != 0:
                detail = (res.stderr.strip().splitlines() or ["no reason given"])[-1]
                raise LaunchError(f"{host.name}: {role} image {image} not usable: {detail}")
            doc = json.loads(res.stdout)
            labels = (doc.get("Config") or {}).get("Labels") or {}
            return {
                "kind": "image",
                "image": image,
                "digest": doc.get("Id"),
                "host": host.name,
                "labels": {k: v for k, v in labels.items() if k.startswith("org.demuxlab.")},
            }

        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            server, client = pool.map(inspect, ("server", "client"))
        return {"server": server, "client": client}

    def wrap(self, role: str, argv: list[str], cpus: Sequence[int], run_id: str) -> list[str]:
        host = self.host(role)
        cmd = [
            "docker", "-H", f"ssh://{host.name}", "run", "--rm", "--init=false",
            "--name", container_name(run_id, role),
            "--label", f"{LABEL_RUN}={run_id}",
            "--label", f"{LABEL_PAIR}={self.pair.name}",
            "--label", f"org.demuxlab.role={role}",
            "--network", "host",
            "--security-opt", "seccomp=unconfined",  # newer default profiles block io_uring
        ]  # fmt: skip
        if self._nofile:
            # Only when the point needs more descriptors than the engine's default: a host's engine cannot
            # give a container more than its own hard limit (the testbed's hosts have 20,000).
            cmd += ["--ulimit", f"nofile={self._nofile}:{self._nofile}"]
        if cpus:
            cmd += ["--cpuset-cpus", cpu_list(cpus)]
        return [*cmd, self.images[role], *argv[1:]]

    def cleanup(self, run_id: str) -> None:
        def remove(role: str) -> None:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self._docker(self.host(role), "rm", "-f", container_name(run_id, role), timeout=30)

        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(remove, ("server", "client")))

    def reach(self) -> None:
        """Fail fast (:class:`LaunchError`) when a host of the pair does not answer over SSH.

        A powered-off or unplugged host would otherwise cost every docker command of the run its own
        timeout; this costs at most ``REACH_TIMEOUT_S`` (a connection multiplexed over a master whose peer
        died waits for the master's keep-alives to give up, within that too).
        """

        def probe(host: Host) -> str | None:
            try:
                res = ssh(self.setup(), host, "true", timeout=REACH_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return f"{host.name}: unreachable over SSH (no answer within {REACH_TIMEOUT_S:g} s)"
            if res.returncode != 0:
                detail = (res.stderr.strip().splitlines() or [f"ssh exited with status {res.returncode}"])[-1]
                return f"{host.name}: unreachable over SSH: {detail}"
            return None

        down = [msg for msg in self._both(probe) if msg]
        if down:
            raise LaunchError("; ".join(down))

    def end_orphans(self, pair: str) -> list[str]:
        """Remove the containers a dead run left on this pair (call while holding the pair's lease).

        Raises :class:`LaunchError` when a host does not answer (:meth:`reach`): the run fails at once.
        """
        self.check()
        self.reach()

        def sweep(host: Host) -> list[str]:
            try:
                res = self._docker(host, "ps", "-aq", "--filter", f"label={LABEL_PAIR}={pair}", timeout=30)
            except (OSError, subprocess.SubprocessError):
                return []
            ids = res.stdout.split()
            if ids:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    self._docker(host, "rm", "-f", *ids, timeout=60)
            return [f"{host.name}:{cid}" for cid in ids]

        return [cid for found in self._both(sweep) for cid in found]

    # -- noise -----------------------------------------------------------------------------------------------

    def noise_check(self) -> dict[str, Any]:
        """One look at both hosts: ``{host: {governor, load1, cpus, containers, heavy}}`` (or an error)."""

        def look(host: Host) -> tuple[str, dict[str, Any]]:
            try:
                res = ssh(self.setup(), host, "python3 -", stdin=NOISE_SCRIPT, timeout=30)
            except subprocess.TimeoutExpired:
                return host.name, {"error": "noise check timed out"}
            line = (res.stdout.strip().splitlines() or [""])[-1]
            try:
                return host.name, json.loads(line)
            except json.JSONDecodeError:
                detail = (res.stderr.strip().splitlines() or ["no output"])[-1]
                return host.name, {"error": f"noise check failed: {detail}"}

        return dict(self._both(look))

    def wait_quiet(self) -> dict[str, Any]:
        """Wait (at most ``noise_wait_s``) for transient noise to pass; the record's ``noise`` section."""
        t0 = time.monotonic()
        while True:
            seen = self.noise_check()
            transient: list[str] = []
            persistent: list[str] = []
            for host, doc in seen.items():
                if "error" in doc:
                    persistent.append(f"{host}: {doc['error']}")
                    continue
                t, p = noise_reasons(host, doc)
                transient += t
                persistent += p
            waited = time.monotonic() - t0
            if not transient or waited >= self.noise_wait_s:
                reasons = transient + persistent
                return {
                    "flagged": bool(reasons),
                    "reasons": reasons,
                    "waited_s": round(waited, 3),
                    "hosts": seen,
                }
            time.sleep(min(self.noise_poll_s, max(0.0, self.noise_wait_s - waited)))

    # -- where the traffic went ------------------------------------------------------------------------

    def server_peers(self, port: int) -> list[str] | None:
        """The remote addresses of the server's established connections, seen on the server host."""
        try:
            res = ssh(self.setup(), self.pair.server, shlex.join(ss_established(port)), timeout=20)
        except subprocess.TimeoutExpired:
            return None
        return peer_addresses(res.stdout) if res.returncode == 0 else None

    def _client(self, req: RunRequest, port: int, out: Any) -> None:
        # While the client measures, look at the server's peers: the record shows the traffic came over the
        # pair network from the client host, not over loopback.
        with PeerWatch(lambda: self.server_peers(port), every_s=0.5) as watch:
            super()._client(req, port, out)
        self._peers = watch.peers

    def run(self, req: RunRequest) -> dict[str, Any]:
        self.check()
        conns = req.point.connections
        self._nofile = conns + 256 if conns > 768 else 0
        noise = self.wait_quiet()
        self._peers = None
        record = super().run(req)
        record["noise"] = noise
        record["network"] = {
            "server_address": req.server_addr,
            "server_peers": self._peers,
            "client_address": self.pair.client.address,
        }
        return record

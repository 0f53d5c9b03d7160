"""One run inside its Slurm job (``demuxlab-run TICKET … --slurm``, the slurm profile's run jobs).

The job holds two whole nodes (``--nodes 2 --ntasks 2 --exclusive``); this process runs on the first, the
job's batch host. In order:

1. **Adopted?** If ``<state>/records/<run id>.json`` already holds the run's final record (an earlier job of
   the run finished it while its controller was dead, and the rerun's Snakemake removed the output as
   incomplete), the record is put back where the workflow expects it and nothing runs.
2. **The job**: its id, nodes, partition and account (``scontrol show job``), each node's address on the
   cluster network and features (``scontrol show node``). The first node runs the server, the second the
   client. Earlier attempts of the run whose jobs died (node failure, time limit) are counted now
   (:func:`demuxlab.slurm.nodes.settle_dead`); this attempt is written down before anything starts.
3. **Facts and noise**: one job step on both nodes (:mod:`demuxlab.slurm.agent`) prints each node's
   topology facts (restricted to the CPUs the job has there) and its noise sample; a noisy node delays the
   run at most ``noise_wait_s`` (the sample is taken again), then it runs flagged, as on a pair.
4. **The run**: :class:`SlurmLauncher` is the shared orchestration of :mod:`demuxlab.launch.base` with each
   side one job step on its node (``srun --overlap -N1 -n1 -w NODE``): the server bound to its node's
   address, the client connecting to it over the nodes' network, both pinned by the planner from their own
   node's facts. ``srun`` forwards the server's stdout (listening line, exit JSON) and SIGTERM. The
   binaries run from the shared filesystem (``stage: shared``) or are first copied to each node's local
   disk with ``sbcast`` (``stage: sbcast``).
5. **Bookkeeping**: the record gains ``slurm`` (job id, partition, account, nodes and their features), the
   node pair and its hardware class; the outcome is counted on both nodes (quarantine after
   ``quarantine_after`` failures in a row), and a final record is also kept in ``<state>/records``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demuxlab.errors import LaunchError
from demuxlab.jsonio import write_json_atomic
from demuxlab.launch.base import Launcher, RunRequest, _utc_now, failed_record, sha256_file
from demuxlab.plan import plan_pinning
from demuxlab.remote.peers import PeerWatch, peer_addresses, ss_established
from demuxlab.slurm import nodes as health

# How long the facts step may take (two Python start-ups on loaded nodes).
FACTS_TIMEOUT_S = 120.0
BINARIES = {"server": "demux-server", "client": "demux-client"}


@dataclass(frozen=True)
class JobOptions:
    state: Path  # results/slurm
    launcher: str = "native"
    stage: str = "shared"  # shared | sbcast
    drain: str = "auto"  # auto | never
    quarantine_after: int = 3
    noise_wait_s: float = 60.0
    out: Path = Path("record.json")
    attempt: int = 1
    max_attempts: int = 1
    noise_poll_s: float = 5.0
    class_features: tuple[str, ...] = ()  # node features naming hardware classes (slurm.classes)
    group: str | None = None  # the run's Snakemake group (K runs of a lane, one job): rules/hosts/slurm.smk


@dataclass(frozen=True)
class SlurmJob:
    job_id: int
    nodes: tuple[str, str]  # server node, client node
    partition: str | None
    account: str | None
    cluster: str | None
    submit_time: str | None
    start_time: str | None
    node_info: dict[str, dict[str, str]]  # scontrol show node: NodeAddr, AvailableFeatures, …
    excluded: str | None = None  # the job's --exclude (ExcNodeList), e.g. the nodes a retry avoids
    cpu_bind: bool = True  # whether the cluster binds tasks (TaskPlugin other than task/none)

    def address(self, node: str) -> str:
        info = self.node_info.get(node, {})
        return info.get("NodeAddr") or info.get("NodeHostName") or node

    def features(self, node: str) -> list[str]:
        text = self.node_info.get(node, {}).get("AvailableFeatures") or ""
        return [f for f in text.split(",") if f and f != "(null)"]


def slurm_env() -> dict[str, str]:
    """The environment of a job step started from inside a step: only the job's identity (the step's
    task and CPU counts would override what each ``srun`` asks for)."""
    keep = {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CONF", "SLURM_CLUSTER_NAME"}
    return {k: v for k, v in os.environ.items() if not (k.startswith(("SLURM_", "SRUN_")) and k not in keep)}


def _run(cmd: Sequence[str], what: str, timeout: float = 60.0) -> str:
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False, env=slurm_env()
        )
    except FileNotFoundError:
        raise LaunchError(f"{what}: {cmd[0]} not found on {os.uname().nodename}") from None
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{what}: no answer within {timeout:g} s") from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise LaunchError(f"{what}: {detail}")
    return proc.stdout


def _fields(line: str) -> dict[str, str]:
    """``key=value`` tokens of one line of ``scontrol`` output (the last of a key wins)."""
    return {key: value for key, sep, value in (t.partition("=") for t in line.split()) if sep}


def current_job() -> SlurmJob:
    """The Slurm job this process runs in (its environment and ``scontrol``)."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id or not job_id.isdigit():
        raise LaunchError(
            "--slurm runs inside a Slurm job (no SLURM_JOB_ID): use the workflow's slurm profile"
        )
    info = _fields(_run(["scontrol", "-o", "show", "job", job_id], "scontrol show job"))
    nodelist = info.get("NodeList") or os.environ.get("SLURM_JOB_NODELIST", "")
    names = _run(["scontrol", "show", "hostnames", nodelist], "scontrol show hostnames").split()
    if len(names) < 2:
        raise LaunchError(f"job {job_id} has {len(names)} node(s) ({nodelist}); a run needs two")
    here = os.uname().nodename.split(".")[0]
    first = here if here in names else names[0]  # the batch host runs the server
    second = next(n for n in names if n != first)
    node_info = {}
    for line in _run(
        ["scontrol", "-o", "show", "node", f"{first},{second}"], "scontrol show node"
    ).splitlines():
        f = _fields(line)
        if f.get("NodeName"):
            node_info[f["NodeName"]] = f
    task_plugin = ""
    for line in _run(["scontrol", "show", "config"], "scontrol show config").splitlines():
        if line.startswith("TaskPlugin "):
            task_plugin = line.partition("=")[2].strip()
    return SlurmJob(
        job_id=int(job_id),
        nodes=(first, second),
        partition=info.get("Partition"),
        account=info.get("Account"),
        cluster=os.environ.get("SLURM_CLUSTER_NAME"),
        submit_time=info.get("SubmitTime"),
        start_time=info.get("StartTime"),
        node_info=node_info,
        excluded=None if info.get("ExcNodeList") in (None, "(null)") else info.get("ExcNodeList"),
        cpu_bind=task_plugin not in ("", "task/none"),
    )


def step(node: str | Sequence[str], *cmd: str, cpu_bind: bool = True) -> list[str]:
    """``srun`` for a step of this job on ``node`` (one task per node), overlapping the step this process
    runs in (the workflow's own), with the binaries' pinning rather than Slurm's (``--cpu-bind=none``,
    where the cluster binds at all: with task/none srun refuses the option)."""
    nodes = [node] if isinstance(node, str) else list(node)
    return [
        "srun", "--overlap", "--quiet", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1", f"--nodelist={','.join(nodes)}", "--kill-on-bad-exit=1",
        *(["--cpu-bind=none"] if cpu_bind else []),
        *cmd,
    ]  # fmt: skip


def look_at_nodes(job: SlurmJob, cache: Path, noise: bool) -> dict[str, dict[str, Any]]:
    """Each node's facts (and noise sample): one step on both nodes running :mod:`demuxlab.slurm.agent`,
    each node's answer a file in a folder of the shared filesystem beside ``cache``."""
    (steps := cache.parent / "facts-steps").mkdir(parents=True, exist_ok=True)
    answers = Path(tempfile.mkdtemp(prefix=f"{job.job_id}-", dir=steps))
    cmd = [sys.executable, "-m", "demuxlab.slurm.agent", "--cache", str(cache), "--out", str(answers)]
    if noise:
        cmd.append("--noise")
    try:
        out = _run(
            step(list(job.nodes), *cmd, cpu_bind=job.cpu_bind), "node facts step", timeout=FACTS_TIMEOUT_S
        )
        seen: dict[str, dict[str, Any]] = {}
        for path in answers.glob("*.json"):
            with contextlib.suppress(OSError, json.JSONDecodeError):
                doc = json.loads(path.read_text())
                if isinstance(doc, dict) and doc.get("host"):
                    seen[str(doc["host"]).split(".")[0]] = doc
    finally:
        shutil.rmtree(answers, ignore_errors=True)
    missing = [n for n in job.nodes if n not in seen]
    if missing:
        got = (out.strip().splitlines() or ["nothing"])[-1][:200]
        raise LaunchError(f"node facts step: no answer from {', '.join(missing)} (it printed: {got})")
    return seen


def noise_section(
    job: SlurmJob, cache: Path, first: dict[str, dict[str, Any]], wait_s: float, poll_s: float
) -> dict[str, Any]:
    """The record's ``noise`` (as the remote launcher's): wait at most ``wait_s`` for transient noise."""
    from demuxlab.launch.remote import noise_reasons

    t0 = time.monotonic()
    seen = first
    while True:
        transient: list[str] = []
        persistent: list[str] = []
        hosts: dict[str, Any] = {}
        for node in job.nodes:
            doc = seen[node].get("noise") or {"error": "no noise sample"}
            hosts[node] = doc
            if "error" in doc:
                persistent.append(f"{node}: {doc['error']}")
                continue
            t, p = noise_reasons(node, doc)
            transient += t
            persistent += p
        waited = time.monotonic() - t0
        if not transient or waited >= wait_s:
            reasons = transient + persistent
            return {
                "flagged": bool(reasons),
                "reasons": reasons,
                "waited_s": round(waited, 3),
                "hosts": hosts,
            }
        time.sleep(min(poll_s, max(0.0, wait_s - waited)))
        seen = look_at_nodes(job, cache, noise=True)


class SlurmLauncher(Launcher):
    """Server and client as job steps on the job's two nodes (see the module's doc)."""

    name = "slurm"

    def __init__(self, job: SlurmJob, binaries: dict[str, str], artifacts: dict[str, dict[str, Any]]):
        self.job = job
        self.binaries = binaries
        self._artifacts = artifacts
        self._peers: list[str] | None = None

    def artifacts(self) -> dict[str, dict[str, Any]]:
        return self._artifacts

    def node(self, role: str) -> str:
        return self.job.nodes[0] if role == "server" else self.job.nodes[1]

    def wrap(self, role: str, argv: list[str], cpus: Sequence[int], run_id: str) -> list[str]:
        cmd = step(self.node(role), self.binaries[role], *argv[1:], cpu_bind=self.job.cpu_bind)
        return [*cmd[:1], f"--job-name=demuxlab-{role}", *cmd[1:]]

    def terminate(self, proc: subprocess.Popen[str]) -> None:
        """SIGTERM to the server's step, not to its ``srun``: srun takes SIGTERM for "cancel the step" and
        the server would be killed before it prints its exit JSON (``scancel --signal`` only signals)."""
        try:
            out = _run(
                ["squeue", "-s", "-h", "-j", str(self.job.job_id), "-o", "%i %j"], "squeue -s", timeout=30
            )
            steps = [line.split()[0] for line in out.splitlines() if line.split()[1:] == ["demuxlab-server"]]
            if steps:
                _run(["scancel", "--quiet", "--signal=TERM", steps[-1]], "scancel --signal", timeout=30)
                return
        except LaunchError:
            pass
        super().terminate(proc)

    def preexec(self, cpus: Sequence[int]) -> Any:
        # srun passes its resource limits on to the task (PropagateResourceLimits): raise the descriptor
        # limit to the hard limit for the points with thousands of connections.
        def prepare() -> None:
            import resource

            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

        return prepare

    def server_peers(self, port: int) -> list[str] | None:
        """The remote addresses of the server's connections, seen on its node (one short step)."""
        try:
            ss = step(self.node("server"), *ss_established(port), cpu_bind=self.job.cpu_bind)
            out = _run(ss, "ss step", 30)
        except LaunchError:
            return None
        return peer_addresses(out)

    def _client(self, req: RunRequest, port: int, out: Any) -> None:
        # Once the client's step has connected, its connections show on the server's node.
        with PeerWatch(lambda: self.server_peers(port), every_s=1.0) as watch:
            super()._client(req, port, out)
        self._peers = watch.peers


def stage_binaries(job: SlurmJob, stage: str) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Where each node runs the binaries from, and their artifacts (path and SHA-256 of what was built)."""
    from demuxlab.launch.native import binary_path
    from demuxlab.paths import repo_root

    paths = {role: binary_path(role) for role in BINARIES}
    artifacts: dict[str, dict[str, Any]] = {}
    for role, path in paths.items():
        try:
            shown = str(path.relative_to(repo_root()))
        except ValueError:
            shown = str(path)
        artifacts[role] = {"kind": "binary", "path": shown, "sha256": sha256_file(path), "stage": stage}
    if stage == "shared":
        return {role: str(p) for role, p in paths.items()}, artifacts
    staged: dict[str, str] = {}
    for role, path in paths.items():
        dest = f"/tmp/demuxlab-{job.job_id}-{BINARIES[role]}"
        _run(["sbcast", "--force", "--preserve", str(path), dest], f"sbcast {BINARIES[role]}", timeout=120)
        staged[role] = dest
        artifacts[role]["staged_as"] = dest
    return staged, artifacts


def unstage(job: SlurmJob, staged: dict[str, str]) -> None:
    with contextlib.suppress(LaunchError):
        cmd = step(list(job.nodes), "rm", "-f", *staged.values(), cpu_bind=job.cpu_bind)
        _run(cmd, "remove staged binaries", timeout=60)


def restore_adopted(state: Path, run_id: str, out: Path) -> bool:
    """Put back the final record an earlier job of this run wrote; whether there was one."""
    spool = state / "records" / f"{run_id}.json"
    try:
        record = json.loads(spool.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if (
        not isinstance(record, dict)
        or record.get("run_id") != run_id
        or record.get("status") not in ("ok", "failed")
    ):
        return False
    write_json_atomic(out, record)
    print(
        f"run {run_id}: final record of Slurm job {(record.get('slurm') or {}).get('job_id')} restored",
        file=sys.stderr,
    )
    return True


def run_in_job(base: RunRequest, opts: JobOptions) -> dict[str, Any] | None:
    """Run ``base`` on this job's two nodes; its record, or None when an earlier job's was restored."""
    run_id = base.run_id
    if restore_adopted(opts.state, run_id, opts.out):
        return None
    if opts.launcher != "native":
        raise LaunchError(f"slurm.launcher: {opts.launcher!r}: the slurm profile runs the native binaries")
    t_job = time.monotonic()
    job = current_job()
    may_drain = opts.drain == "auto"
    for line in health.settle_dead(opts.state, run_id, job.job_id, opts.quarantine_after, may_drain):
        print(line, file=sys.stderr)
    health.start_attempt(
        opts.state,
        run_id,
        {
            "attempt": opts.attempt,
            "job_id": job.job_id,
            "group": opts.group,
            "nodes": list(job.nodes),
            "partition": job.partition,
            "started_at": _utc_now(),
        },
    )
    base = dataclasses.replace(base, host_pair="+".join(job.nodes))
    record, look_s, t_run = _measure(job, base, opts)
    _describe_job(record, job, opts)
    record["scheduling"] = {
        "attempt": opts.attempt,
        "facts_s": round(look_s, 3),
        "job_setup_s": round(t_run - t_job, 3),
        "run_wall_s": round(time.monotonic() - t_run, 3),
        "excluded": job.excluded,
    }
    ok = record["status"] == "ok"
    blamed, reason = health.blame(job.nodes, ok, record.get("failure_reason"))
    if not ok:
        record["failure_reason"] = reason
    for line in health.record_outcome(
        opts.state, blamed, run_id, ok, reason, opts.quarantine_after, may_drain
    ):
        print(line, file=sys.stderr)
        record["pair"]["quarantined"] = line
    health.finish_attempt(opts.state, run_id, job.job_id, "ok" if ok else "failed", reason)
    if ok or opts.attempt >= opts.max_attempts:
        write_json_atomic(opts.state / "records" / f"{run_id}.json", record)
    return record


def _measure(job: SlurmJob, base: RunRequest, opts: JobOptions) -> tuple[dict[str, Any], float, float]:
    """The run on the job's nodes: their facts and noise, the pinning, the staged binaries, the launcher.
    The record (failed when a node or Slurm itself failed the attempt, not the measurement), the seconds
    the facts step took and when the run started (monotonic)."""
    server_node, client_node = job.nodes
    staged: dict[str, str] = {}
    t_look = time.monotonic()
    try:
        seen = look_at_nodes(job, opts.state / "facts", noise=True)
        look_s = time.monotonic() - t_look
        noise = noise_section(job, opts.state / "facts", seen, opts.noise_wait_s, opts.noise_poll_s)
        server, client = seen[server_node]["facts"], seen[client_node]["facts"]
        server_addr, client_addr = job.address(server_node), job.address(client_node)
        pinning = plan_pinning(
            server,
            client,
            base.point.threads,
            base.point.client_threads,
            same_host=False,
            server_peer=client_addr,
            client_peer=server_addr,
        )
        binaries, artifacts = stage_binaries(job, opts.stage)
        staged = binaries if opts.stage == "sbcast" else {}
        req = dataclasses.replace(
            base, pinning=pinning, hosts={"server": server, "client": client}, server_addr=server_addr
        )
        launcher = SlurmLauncher(job, binaries, artifacts)
        t_run = time.monotonic()
        record = launcher.run(req)
        record["noise"] = noise
        record["network"] = {
            "server_address": server_addr,
            "server_peers": launcher._peers,
            "client_address": client_addr,
        }
    except LaunchError as exc:  # a node or Slurm itself failed this attempt (not the measurement)
        record = failed_record(base, f"nodes {base.host_pair}: {exc.message}", SlurmLauncher.name)
        look_s, t_run = time.monotonic() - t_look, time.monotonic()
    finally:
        if staged:
            unstage(job, staged)
    return record, look_s, t_run


def _describe_job(record: dict[str, Any], job: SlurmJob, opts: JobOptions) -> None:
    """The record's ``pair`` (the two nodes, their hardware class) and ``slurm`` (the job) sections."""
    server_node, client_node = job.nodes
    classes = _hardware_class(record, job, opts.class_features)
    if classes is not None and classes.get("features"):
        _learn_class(opts.state, classes["id"], classes["features"])
    record["pair"] = {
        "name": f"{server_node}+{client_node}",
        "server": {"name": server_node, "address": job.address(server_node)},
        "client": {"name": client_node, "address": job.address(client_node)},
        "hardware_class": classes,
    }
    record["slurm"] = {
        "job_id": job.job_id,
        "cluster": job.cluster,
        "partition": job.partition,
        "account": job.account,
        "nodes": {"server": server_node, "client": client_node},
        "features": {n: job.features(n) for n in job.nodes},
        "submit_time": job.submit_time,
        "start_time": job.start_time,
        "stage": opts.stage,
        "group": opts.group,
    }


def _hardware_class(
    record: dict[str, Any], job: SlurmJob, class_features: Sequence[str]
) -> dict[str, Any] | None:
    """The node pair's hardware class from both nodes' facts (the cluster profile's rule); where the
    cluster names its classes by node features (``slurm.classes``), the feature both nodes share is part
    of the class and of its id (nodes alike in their facts but in different classes stay apart)."""
    hosts = record.get("hosts") or {}
    if not hosts.get("server") or not hosts.get("client"):
        return None
    import hashlib

    from demuxlab.remote.hostpairs import hardware_class

    cls = hardware_class(hosts["server"], hosts["client"])
    shared = sorted(set(job.features(job.nodes[0])) & set(job.features(job.nodes[1])) & set(class_features))
    cls["features"] = shared
    if shared:
        doc = {"server": cls["server"], "client": cls["client"], "features": shared}
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        cls["id"] = f"hw-{digest[:10]}"
    return cls


def _learn_class(state: Path, class_id: str, features: list[str]) -> None:
    """``<state>/classes.json``: class id -> node features, so a spec that pins a class becomes a
    ``--constraint`` (rules/slurm.smk)."""
    path = state / "classes.json"
    with health._locked(path):
        known = health._read(path)
        if known.get(class_id) != features:
            known[class_id] = features
            health._write(path, known)

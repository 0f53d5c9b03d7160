"""One run, ticket to record: the one run path of every run job (local, cluster, Slurm) and of ``demuxlab
run-point``.

A run starts from its ticket (:mod:`demuxlab.ticket`: the point, repeat, phases, launcher, pinned class,
spec digest, written by the plan). The caller's :class:`RunPointRequest` says where it goes: this host (a
local launcher, under the pair's lease, :func:`run_leased`), any free healthy pair of an inventory
(:mod:`demuxlab.cluster.run`) or the two nodes of this Slurm job (:mod:`demuxlab.slurm.job`).
:func:`run_ticket` runs it there and writes its record (docs/CONTRACTS.md §5). A failed attempt before the
last is kept under ``failures/`` and reported as to be retried; the command turns that into a non-zero exit.

The workflow's run jobs come here through ``demuxlab-run TICKET`` (:mod:`demuxlab.runpoint_lean`, which
imports no spec library); ``demuxlab run-point SPEC --run-id ID`` loads the spec, builds the run's ticket
in memory and comes here too. This module imports only the standard library and bottom-layer modules at
start-up; every launcher is imported when the run needs it.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demuxlab.errors import LaunchError
from demuxlab.jsonio import read_json, write_json_atomic
from demuxlab.paths import repo_root
from demuxlab.vocab import RUN_FAILED, RUN_OK

if TYPE_CHECKING:
    from demuxlab.cluster.run import ClusterOptions
    from demuxlab.launch.base import Launcher, RunRequest
    from demuxlab.slurm.job import JobOptions
    from demuxlab.ticket import Ticket


@dataclass(frozen=True)
class RunPointRequest:
    """Where and how a ticket's run goes (a command's options, once)."""

    out: Path
    server_facts: Path | None = None  # else collected on this host
    client_facts: Path | None = None  # else the server's
    launcher: str | None = None  # else the ticket's (the spec's)
    host_pair: str = "local"
    attempt: int = 1
    max_attempts: int = 1
    instrument: bool = False
    stall_timeout_s: float = 5.0
    lease_wait_s: float | None = None  # else the longest a run of the spec takes
    git_rev: str | None = None  # the checkout's revision as the workflow's controller saw it; else git's
    cluster: ClusterOptions | None = None  # --pairs-from: on a free healthy pair of an inventory
    slurm: JobOptions | None = None  # --slurm: on the two nodes of this Slurm job


@dataclass(frozen=True)
class RunPointResult:
    """Where the record went and the one line that says how the run ended; ``retry``: a failed attempt
    before the last (its record is under ``failures/``; the workflow runs the job again)."""

    record: dict[str, Any]
    path: Path
    message: str
    retry: bool


def git_revision() -> str | None:
    """The checkout's commit, with ``-dirty`` when tracked files differ from it; None outside git."""
    try:
        res = subprocess.run(
            ["git", "-C", str(repo_root()), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    if res.returncode != 0:
        return None
    rev = res.stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(repo_root()), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return rev + ("-dirty" if dirty.stdout.strip() else "")


def relative_to_repo(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def base_request(ticket: Ticket, req: RunPointRequest) -> RunRequest:
    """The run as its ticket and the options describe it; where it runs adds the hosts and their pinning."""
    from demuxlab.launch.base import RunRequest
    from demuxlab.plan import Pinning

    instrument = req.instrument or ticket.point.instrument
    steady = None
    if ticket.steady is not None and not instrument:
        # An adaptive sweep's measured runs end when steady; calibration runs measure their whole phase.
        from demuxlab.steady import SteadyRule

        steady = SteadyRule(min_s=ticket.steady[0], target_rel=ticket.steady[1])
    git_rev = req.git_rev if req.git_rev is not None else git_revision()
    return RunRequest(
        run_id=ticket.run_id,
        experiment=ticket.experiment_section(git_rev),
        point=ticket.point,
        repeat=ticket.repeat,
        phases=ticket.phases,
        pinning=Pinning((), (), False, False, ()),  # planned once the hosts are known
        hosts={},
        attempt=req.attempt,
        host_pair=req.host_pair,
        instrument=instrument,
        stall_timeout_s=req.stall_timeout_s,
        steady=steady,
    )


def run_ticket(ticket: Ticket, req: RunPointRequest) -> RunPointResult:
    """Perform the ticket's run where ``req`` says and write its record (or, before the last attempt, a
    failed attempt's record under ``failures/``).

    A local run holds its pair's lease (demuxlab.lease) from before its server starts until its server and
    client are gone; they die with this process, however it dies.
    """
    base = base_request(ticket, req)
    if req.slurm is not None:
        from demuxlab.slurm.job import run_in_job

        record = run_in_job(base, req.slurm)
        if record is None:  # an earlier job of this run already wrote its final record (adopted)
            return RunPointResult({}, req.out, f"run {ticket.run_id}: final record restored", retry=False)
        return _write_record(record, req, ticket)
    if req.cluster is not None:
        from demuxlab.cluster.run import run_on_cluster, update_progress

        failures = req.out.parent.parent / "failures"
        record = run_on_cluster(
            base, req.cluster, failures_dir=failures, pinned=ticket.hardware_class, spec_path=str(ticket.spec)
        )
        # The run process's own CPU so far (start-up included): what the controller pays per run, beside
        # Snakemake's share (bench/perf/cluster_sim_bench.py reports both).
        record.setdefault("scheduling", {})["runner_cpu_s"] = round(_cpu_s(), 4)
        try:
            return _write_record(record, req, ticket)
        finally:
            update_progress(req.cluster)
    return _write_record(run_here(ticket, base, req), req, ticket)


def run_here(ticket: Ticket, base: RunRequest, req: RunPointRequest) -> dict[str, Any]:
    """The run on this host (native or docker), pinned from the hosts' facts, under the pair's lease."""
    from demuxlab.launch import get_launcher
    from demuxlab.plan import plan_pinning
    from demuxlab.topology import collect_facts

    server_host = read_json(req.server_facts, "server facts") if req.server_facts else collect_facts()
    client_host = read_json(req.client_facts, "client facts") if req.client_facts else server_host
    same_host = server_host.get("hostname") == client_host.get("hostname")
    point = ticket.point
    run = dataclasses.replace(
        base,
        pinning=plan_pinning(server_host, client_host, point.threads, point.client_threads, same_host),
        hosts={"server": server_host, "client": client_host},
    )
    return run_leased(get_launcher(req.launcher or ticket.launcher), run, req.lease_wait_s)


def _write_record(record: dict[str, Any], req: RunPointRequest, ticket: Ticket) -> RunPointResult:
    rid, point, repeat = ticket.run_id, ticket.point, ticket.repeat
    if record["status"] == RUN_FAILED and req.attempt < req.max_attempts:
        # Keep the failed attempt's record beside the runs; the workflow retries the job.
        failed = req.out.parent.parent / "failures" / f"{rid}.attempt{req.attempt}.json"
        write_json_atomic(failed, record)
        message = f"run {rid}: attempt {req.attempt} failed: {record['failure_reason']}"
        return RunPointResult(record, failed, message, retry=True)
    write_json_atomic(req.out, record)
    if record["status"] == RUN_OK:
        tput = (record.get("stats") or {}).get("throughput_msgs_per_s")
        message = f"run {rid}: {point.point_key} repeat {repeat}: ok, {tput:,.0f} msgs/s"
    else:
        message = f"run {rid}: {point.point_key} repeat {repeat}: failed: {record['failure_reason']}"
    return RunPointResult(record, req.out, message, retry=False)


def run_leased(launcher: Launcher, req: RunRequest, lease_wait: float | None) -> dict[str, Any]:
    """``launcher.run(req)`` holding ``req.host_pair``'s lease; SIGTERM unwinds it (server stopped).

    The launcher is a local one (native, docker): where server and client share this host, an instrumented
    run first has the client's wake-up of a sleeping server thread measured, under the lease, into its
    pinning (``wake_us``, :mod:`demuxlab.launch.wake`: the calibration charges it)."""
    from demuxlab import lease as pair_lease
    from demuxlab.launch.base import SERVER_START_TIMEOUT_S, SERVER_STOP_TIMEOUT_S, total_s
    from demuxlab.launch.wake import with_wake_cost

    if lease_wait is None:  # another run of this spec ends within this
        lease_wait = total_s(req.phases) + req.stall_timeout_s + SERVER_START_TIMEOUT_S
        lease_wait += SERVER_STOP_TIMEOUT_S + 60.0

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise LaunchError(f"run {req.run_id}: terminated (SIGTERM), run stopped", exit_code=143)

    signal.signal(signal.SIGTERM, stop)
    pair, rid = req.host_pair, req.run_id
    busy = pair_lease.holder(pair)
    if busy is not None:
        waiting = f"waiting up to {lease_wait:g} s: {pair_lease.describe(pair, busy)}"
        print(f"run {rid}: {waiting}", file=sys.stderr)
    with pair_lease.acquire(pair, rid, wait_s=lease_wait) as held:
        ended = launcher.end_orphans(pair)
        if ended:
            print(f"run {rid}: ended {len(ended)} orphan(s) left on pair {pair!r}", file=sys.stderr)
        pinning = with_wake_cost(req.pinning) if req.instrument else req.pinning
        record: dict[str, Any] = launcher.run(dataclasses.replace(req, lease=held, pinning=pinning))
    return record


def _cpu_s() -> float:
    import resource

    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime

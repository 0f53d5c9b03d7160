"""One run of a spec, start to record: what ``demuxlab run-point`` does, as a library.

The command builds a :class:`RunPointRequest` once from its options; :func:`run_point` finds the run in the
spec, plans it (or hands it to :mod:`demuxlab.cluster.run` for a pair of an inventory), runs it under its
pair's lease and writes its record (docs/CONTRACTS.md §5). A failed attempt before the last is kept under
``failures/`` and reported as to be retried; the command turns that into a non-zero exit.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demuxlab.errors import LaunchError, SpecError
from demuxlab.jsonio import read_json, write_json_atomic
from demuxlab.paths import repo_root
from demuxlab.vocab import RUN_FAILED, RUN_OK

if TYPE_CHECKING:
    from demuxlab.cluster.run import ClusterOptions
    from demuxlab.launch.base import Launcher, RunRequest
    from demuxlab.point import Point
    from demuxlab.spec import Spec


@dataclass(frozen=True)
class RunPointRequest:
    """Everything ``demuxlab run-point`` was asked for (its options, once)."""

    spec_path: Path
    run_id: str
    out: Path
    point_key: str | None = None  # with repeat: the run is found without listing every run
    repeat: int | None = None
    server_facts: Path | None = None  # else collected on this host
    client_facts: Path | None = None  # else the server's
    launcher: str | None = None  # else the spec's
    host_pair: str = "local"
    attempt: int = 1
    max_attempts: int = 1
    instrument: bool = False
    stall_timeout_s: float = 5.0
    lease_wait_s: float | None = None  # else the longest a run of the spec takes
    cluster: ClusterOptions | None = None  # --pairs-from: on a free healthy pair of an inventory


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


def experiment_of(spec: Spec, spec_path: Path) -> dict[str, Any]:
    """The run record's ``experiment`` (CONTRACTS.md §5)."""
    return {
        "name": spec.name,
        "spec_sha256": spec.sha256,
        "git_rev": git_revision(),
        "spec_path": relative_to_repo(spec_path),
        "spec_text": spec.text,
    }


def run_point(req: RunPointRequest) -> RunPointResult:
    """Perform ``req.run_id`` of the spec and write its record (or, before the last attempt, a failed
    attempt's record under ``failures/``).

    The run holds its pair's lease (demuxlab.lease) from before its server starts until its server and
    client are gone; they die with this process, however it dies.
    """
    from demuxlab.spec import find_run, load_checked_spec

    spec = load_checked_spec(req.spec_path)
    found = find_run(spec, req.run_id, req.point_key, req.repeat)
    if found is None:
        given = f" (point {req.point_key!r}, repeat {req.repeat})" if req.point_key is not None else ""
        raise SpecError(
            f"{req.spec_path}: run id {req.run_id!r}{given} is not a run of this spec "
            f"(see `demuxlab plan {req.spec_path}`)"
        )
    point, repeat = found
    from demuxlab.launch import RunRequest
    from demuxlab.plan import Pinning

    # The run as the spec and the options describe it, built once; where it runs adds hosts and pinning.
    run = RunRequest(
        run_id=req.run_id,
        experiment=experiment_of(spec, req.spec_path),
        point=point,
        repeat=repeat,
        phases=spec.phases,
        pinning=Pinning((), (), False, False, ()),  # planned once the hosts are known
        hosts={},
        attempt=req.attempt,
        host_pair=req.host_pair,
        instrument=req.instrument or point.instrument,
        stall_timeout_s=req.stall_timeout_s,
        # An adaptive sweep's measured runs end when steady; calibration runs measure their whole phase.
        steady=spec.adaptive.steady
        if spec.adaptive is not None and not (req.instrument or point.instrument)
        else None,
    )
    if req.cluster is not None:
        from demuxlab.cluster.run import run_on_cluster, update_progress

        record = run_on_cluster(spec, run, req.cluster, failures_dir=req.out.parent.parent / "failures")
        try:
            return _write_record(record, req, point, repeat)
        finally:
            update_progress(req.cluster)

    from demuxlab.launch import get_launcher
    from demuxlab.plan import plan_pinning
    from demuxlab.topology import collect_facts

    server_host = read_json(req.server_facts, "server facts") if req.server_facts else collect_facts()
    client_host = read_json(req.client_facts, "client facts") if req.client_facts else server_host
    same_host = server_host.get("hostname") == client_host.get("hostname")
    run = dataclasses.replace(
        run,
        pinning=plan_pinning(server_host, client_host, point.threads, point.client_threads, same_host),
        hosts={"server": server_host, "client": client_host},
    )
    record = run_leased(get_launcher(req.launcher or spec.launcher), run, req.lease_wait_s)
    return _write_record(record, req, point, repeat)


def _write_record(record: dict[str, Any], req: RunPointRequest, point: Point, repeat: int) -> RunPointResult:
    rid = req.run_id
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

"""Node health of a Slurm sweep, and each run's attempts: small JSON files on the shared filesystem.

``<state>/nodes/<node>.json`` (one per node, written under an ``flock`` of the file: jobs on different nodes
may count an outcome on the same node): attempts done / failed on the node, failures in a row, quarantine.
A node that fails ``quarantine_after`` runs in a row (the cluster profile's setting) is *quarantined*:
drained with the reason (``scontrol update nodename=N state=drain reason=…``) where the user may, else
(or with ``slurm.drain: never``) only excluded (``sbatch --exclude``) from every later submission of the
sweep; either way ``<state>/quarantine.json`` lists it, the Slurm report names it and why, and it stays
quarantined until ``demuxlab slurm unquarantine NODE`` (after ``scontrol update … state=resume``).

``<state>/attempts/<run id>.json``: the run's attempts, each written by its job as it starts (job id, both
nodes) and finished with its outcome. An attempt that has none when a later attempt (or the end of the
sweep) looks is one whose job died: a node failed, the time limit struck, it was cancelled. Its failure is
counted then, once, on the node(s) Slurm reports down or drained (both nodes when neither is), with the
job's final state from ``sacct``; and the retry excludes the nodes the run failed on (see
:func:`retry_excludes`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Slurm node states (scontrol/sinfo, lower case, any of the flags) that mean the node is not usable.
BAD_STATES = ("down", "drain", "fail", "not_responding", "no_respond", "maint", "reboot", "power_down")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class NodeState:
    name: str
    consecutive_failures: int = 0
    quarantined: bool = False
    quarantine_reason: str | None = None
    quarantined_at: str | None = None
    drained: bool = False  # quarantined by draining it in Slurm (else: excluded by the workflow only)
    done: int = 0
    failed: int = 0
    last_run: str | None = None
    last_status: str | None = None
    updated_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _write(path: Path, doc: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


def node_path(state: Path, node: str) -> Path:
    return state / "nodes" / f"{node}.json"


def read_node(state: Path, node: str) -> NodeState:
    doc = _read(node_path(state, node))
    known = {k: v for k, v in doc.items() if k in NodeState.__dataclass_fields__}
    known["name"] = node
    return NodeState(**known)


def all_nodes(state: Path) -> list[NodeState]:
    return [read_node(state, p.stem) for p in sorted((state / "nodes").glob("*.json"))]


def quarantined(state: Path) -> dict[str, str]:
    """Quarantined nodes and why (``<state>/quarantine.json``, rewritten with every quarantine)."""
    doc = _read(state / "quarantine.json")
    return {str(k): str(v) for k, v in doc.items()}


def _write_quarantine(state: Path) -> None:
    doc = {n.name: n.quarantine_reason or "" for n in all_nodes(state) if n.quarantined}
    _write(state / "quarantine.json", doc)


def drain(node: str, reason: str) -> str | None:
    """Drain ``node`` in Slurm with ``reason``; None when done, else why not (no permission, …)."""
    try:
        proc = subprocess.run(
            ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason[:200]}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or [f"scontrol exited {proc.returncode}"])[-1]
    return None


def record_outcome(
    state: Path,
    nodes: Sequence[str],
    run_id: str,
    ok: bool,
    reason: str | None,
    quarantine_after: int,
    may_drain: bool,
) -> list[str]:
    """Count one finished attempt on each of ``nodes``; the lines saying which were quarantined now."""
    said: list[str] = []
    for node in nodes:
        path = node_path(state, node)
        with _locked(path):
            st = read_node(state, node)
            st.last_run, st.last_status = run_id, "ok" if ok else "failed"
            if ok:
                st.done += 1
                st.consecutive_failures = 0
            else:
                st.failed += 1
                st.consecutive_failures += 1
                if (
                    not st.quarantined
                    and quarantine_after > 0
                    and st.consecutive_failures >= quarantine_after
                ):
                    st.quarantined = True
                    st.quarantined_at = _now()
                    why = (
                        f"{st.consecutive_failures} runs in a row failed; last: {reason or 'no reason given'}"
                    )
                    st.quarantine_reason = why[:500]
                    refused = drain(node, f"demuxlab: {why}") if may_drain else "slurm.drain is never"
                    st.drained = refused is None
                    how = "drained" if st.drained else f"excluded from the sweep (not drained: {refused})"
                    said.append(f"demuxlab: node {node} quarantined, {how}: {why}")
            st.updated_at = _now()
            _write(path, st.to_json())
    if said:
        _write_quarantine(state)
    return said


def unquarantine(state: Path, node: str) -> NodeState:
    path = node_path(state, node)
    with _locked(path):
        st = read_node(state, node)
        st.quarantined, st.quarantine_reason, st.quarantined_at, st.drained = False, None, None, False
        st.consecutive_failures = 0
        st.updated_at = _now()
        _write(path, st.to_json())
    _write_quarantine(state)
    return st


# -- attempts ---------------------------------------------------------------------------------------------


def attempts_path(state: Path, run_id: str) -> Path:
    return state / "attempts" / f"{run_id}.json"


def read_attempts(state: Path, run_id: str) -> list[dict[str, Any]]:
    doc = _read(attempts_path(state, run_id))
    items = doc.get("attempts")
    return [a for a in items if isinstance(a, dict)] if isinstance(items, list) else []


def start_attempt(state: Path, run_id: str, entry: dict[str, Any]) -> None:
    path = attempts_path(state, run_id)
    with _locked(path):
        items = [a for a in read_attempts(state, run_id) if a.get("job_id") != entry.get("job_id")]
        _write(path, {"run_id": run_id, "attempts": [*items, entry]})


def finish_attempt(state: Path, run_id: str, job_id: int, outcome: str, reason: str | None) -> None:
    path = attempts_path(state, run_id)
    with _locked(path):
        items = read_attempts(state, run_id)
        for a in items:
            if a.get("job_id") == job_id:
                a["outcome"], a["reason"], a["finished_at"] = outcome, reason, _now()
        _write(path, {"run_id": run_id, "attempts": items})


def slurm_job_state(job_id: int) -> str | None:
    """The job's state in the accounting (``sacct``), e.g. NODE_FAIL, TIMEOUT, CANCELLED."""
    try:
        proc = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "State"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    return lines[0].split()[0] if proc.returncode == 0 and lines else None


def node_states(nodes: Sequence[str]) -> dict[str, str]:
    """Of ``nodes``, each one's state as Slurm reports it now (``sinfo -N``, lower case); none when sinfo
    cannot be asked."""
    if not nodes:
        return {}
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N %T"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return {p[0]: p[1].lower() for p in (line.split() for line in proc.stdout.splitlines()) if len(p) == 2}


def bad_nodes(nodes: Sequence[str]) -> dict[str, str]:
    """Of ``nodes``, those Slurm now reports unusable, with their state."""
    return {n: st for n, st in node_states(nodes).items() if any(b in st for b in BAD_STATES)}


def blame(nodes: Sequence[str], ok: bool, reason: str | None) -> tuple[list[str], str | None]:
    """The nodes an attempt's outcome counts on, and its reason. A node Slurm has taken down may fail the
    attempt before Slurm ends the job (NODE_FAIL): the reason then says so, and the failure counts on that
    node only, as when the job dies of it (:func:`settle_dead`)."""
    bad = bad_nodes(nodes) if not ok else {}
    if not bad:
        return list(nodes), reason
    said = ", ".join(f"{n} {s}" for n, s in bad.items())
    return list(bad), f"{reason or 'failed'} (Slurm reports {said})"


LIVE_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")


def settle_dead(
    state: Path, run_id: str, current_job: int | None, quarantine_after: int, may_drain: bool
) -> list[str]:
    """Count the failures of this run's earlier attempts whose jobs died without an outcome (once each)."""
    said: list[str] = []
    for a in read_attempts(state, run_id):
        job = a.get("job_id")
        if a.get("outcome") is not None or not isinstance(job, int) or job == current_job:
            continue
        job_state = slurm_job_state(job)
        if job_state is None or job_state.upper() in LIVE_STATES:
            continue  # still running (an adopted job), or unknown: leave it for later
        nodes = [str(n) for n in a.get("nodes") or []]
        bad = bad_nodes(nodes)
        blamed = list(bad) or nodes
        detail = ", ".join(f"{n} {s}" for n, s in bad.items())
        reason = f"job {job} ended {job_state} without a record" + (f" ({detail})" if detail else "")
        finish_attempt(state, run_id, job, "died", reason)
        said += record_outcome(state, blamed, run_id, False, reason, quarantine_after, may_drain)
    return said


def retry_excludes(state: Path, run_id: str, usable: Sequence[str]) -> list[str]:
    """Nodes the next attempt of ``run_id`` must not get: the quarantined ones, and those its earlier
    attempts failed on while at least two other usable nodes remain (a retry goes back to a node it failed
    on only when nothing else is left, as the cluster profile's retry goes back to a pair)."""
    return group_excludes(state, [run_id], usable)


def group_excludes(state: Path, run_ids: Sequence[str], usable: Sequence[str]) -> list[str]:
    """:func:`retry_excludes` for the next job of a group of runs (one allocation for all of them): the
    nodes any of them failed on."""
    quarantine = set(quarantined(state))
    failed_on: list[str] = []
    for a in (a for run_id in run_ids for a in read_attempts(state, run_id)):
        if a.get("outcome") in ("failed", "died") or a.get("outcome") is None:
            failed_on += [str(n) for n in a.get("nodes") or [] if str(n) not in failed_on]
    left = [n for n in usable if n not in quarantine]
    if usable and len(left) < 2:
        # Quarantine left no pair: exclude nothing (Slurm holds the drained nodes back itself) rather than
        # submit jobs no node can take; the runs wait in the queue until a node is resumed.
        return []
    avoid = [n for n in failed_on if n in left]
    if len([n for n in left if n not in avoid]) < 2:
        avoid = []
    return sorted(quarantine | set(avoid))

"""Progress of a Slurm sweep per partition, and its per-node report.

``progress_doc`` (``demuxlab cluster progress`` / ``demuxlab slurm progress``, and
``results/slurm/progress.json``, rewritten by the controller while it runs)::

    {"updated_at": "…", "runs": {"planned": 96, "finished": 40, "remaining": 56},
     "partitions": [{"partition": "demux", "pending": 0, "running": 2, "done": 38, "failed": 3}],
     "nodes": [{"node": "tb1-server", "slurm_state": "allocated", "done": 20, "failed": 1,
                "consecutive_failures": 0, "quarantined": false, "quarantine_reason": null}]}

``pending``/``running`` are this workflow's run jobs in Slurm now (``squeue``: its working folder and the
plugin's comment); ``done``/``failed`` count attempts by the partition they ran in (a retried attempt counts
where it failed; a job that died counts as failed once its failure is settled).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from demuxlab.slurm import nodes as health


def _jobs_here(workdir: Path) -> list[tuple[str, str, str]]:
    """(job id, partition, state) of this workflow's run jobs in the queue."""
    try:
        proc = subprocess.run(
            ["squeue", "--me", "-h", "-o", "%i|%P|%T|%k|%Z"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    here = os.path.realpath(workdir)
    out = []
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 5 or not parts[3].startswith("rule_run_point"):
            continue
        if os.path.realpath(parts[4]) == here:
            out.append((parts[0], parts[1], parts[2]))
    return out


def group_rows(state: Path) -> list[dict[str, Any]]:
    """Per group of runs (one Slurm job each attempt: rules/hosts/slurm.smk's run_group), from the attempts
    the runs wrote: its jobs, its nodes, its runs done / failed / running, and the run in flight."""
    groups: dict[str, dict[str, Any]] = {}
    for path in sorted((state / "attempts").glob("*.json")):
        for a in health._read(path).get("attempts") or []:
            gid = a.get("group")
            if not isinstance(gid, str):
                continue
            g = groups.setdefault(
                gid,
                {"group": gid, "jobs": [], "nodes": [], "runs_done": 0, "runs_failed": 0, "running": None},
            )
            if a.get("job_id") not in g["jobs"]:
                g["jobs"].append(a.get("job_id"))
            g["nodes"] += [str(n) for n in a.get("nodes") or [] if str(n) not in g["nodes"]]
            outcome = a.get("outcome")
            if outcome == "ok":
                g["runs_done"] += 1
            elif outcome in ("failed", "died"):
                g["runs_failed"] += 1
            elif outcome is None:
                g["running"] = path.stem
    return [groups[k] for k in sorted(groups)]


def progress_doc(state: Path) -> dict[str, Any]:
    workdir = state.resolve().parent.parent  # <workdir>/results/slurm
    partitions: dict[str, dict[str, int]] = {}

    def row(name: str) -> dict[str, int]:
        return partitions.setdefault(name or "?", {"pending": 0, "running": 0, "done": 0, "failed": 0})

    for _, partition, job_state in _jobs_here(workdir):
        if job_state == "PENDING":
            row(partition)["pending"] += 1
        else:
            row(partition)["running"] += 1
    for path in sorted((state / "attempts").glob("*.json")):
        for a in health._read(path).get("attempts") or []:
            outcome = a.get("outcome")
            if outcome == "ok":
                row(str(a.get("partition") or ""))["done"] += 1
            elif outcome in ("failed", "died"):
                row(str(a.get("partition") or ""))["failed"] += 1
    states = health.node_states([n.name for n in health.all_nodes(state)])
    nodes = [
        {
            "node": n.name,
            "slurm_state": states.get(n.name),
            "done": n.done,
            "failed": n.failed,
            "consecutive_failures": n.consecutive_failures,
            "quarantined": n.quarantined,
            "drained": n.drained,
            "quarantine_reason": n.quarantine_reason,
        }
        for n in health.all_nodes(state)
    ]
    runs: dict[str, Any] = {"planned": None, "finished": None, "remaining": None}
    sweep = health._read(state / "sweep.json")
    if isinstance(sweep.get("experiments"), dict):
        planned = sum(int(v) for v in sweep["experiments"].values())
        finished = 0
        for exp in sweep["experiments"]:
            folder = state.parent / exp / "runs"
            if folder.is_dir():
                finished += sum(1 for e in os.scandir(folder) if e.name.endswith(".json"))
        runs = {"planned": planned, "finished": finished, "remaining": max(0, planned - finished)}
    return {
        "updated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "runs": runs,
        "partitions": [{"partition": k, **v} for k, v in sorted(partitions.items())],
        "groups": group_rows(state),
        "nodes": nodes,
    }


def write_progress(state: Path, doc: dict[str, Any]) -> Path:
    path = state / "progress.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    health._write(path, doc)
    return path


def format_progress(doc: dict[str, Any]) -> str:
    lines = ["partition  pending  running  done  failed"]
    for p in doc["partitions"]:
        lines.append(
            f"{p['partition']:<10} {p['pending']:>7}  {p['running']:>7}  {p['done']:>4}  {p['failed']:>6}"
        )
    if doc.get("groups"):
        lines.append("")
        lines.append("group                          jobs  done  failed  running")
        for g in doc["groups"]:
            jobs = ",".join(str(j) for j in g["jobs"])
            lines.append(
                f"{g['group']:<30} {jobs:<5} {g['runs_done']:>4}  {g['runs_failed']:>6}  {g['running'] or ''}"
            )
    if doc["nodes"]:
        lines.append("")
        lines.append("node            slurm state   done  failed  quarantined")
        for n in doc["nodes"]:
            why = (
                f"yes ({'drained' if n['drained'] else 'excluded'}): {n['quarantine_reason']}"
                if n["quarantined"]
                else ""
            )
            lines.append(
                f"{n['node']:<15} {n['slurm_state'] or '?'!s:<12} {n['done']:>5}  {n['failed']:>6}  {why}"
            )
    runs = doc["runs"]
    if runs.get("planned") is not None:
        lines.append(f"runs: {runs['finished']} of {runs['planned']} finished, {runs['remaining']} remaining")
    return "\n".join(line.rstrip() for line in lines)


def nodes_report(state: Path, spec: Any, out: Path) -> list[dict[str, Any]]:
    """``report/nodes.csv``: per node of the sweep, the experiment's runs ok / failed in the database with
    the node as server or client, the attempts failed on it, and its quarantine and why."""
    from sqlalchemy import func, select
    from sqlalchemy.orm import aliased

    from demuxlab.db.engine import session
    from demuxlab.db.models import Experiment, Host, Point, Run

    counts: dict[tuple[str, str], int] = {}
    with session() as s:
        for side in ("server_host_id", "client_host_id"):
            h = aliased(Host)
            q = (
                select(h.hostname, Run.status, func.count())
                .join(Point, Run.point_id == Point.id)
                .join(Experiment, Point.experiment_id == Experiment.id)
                .join(h, getattr(Run, side) == h.id)
                .where(Experiment.name == spec.name, Experiment.spec_sha256 == spec.sha256)
                .group_by(h.hostname, Run.status)
            )
            for host, status, n in s.execute(q):
                counts[(host, status)] = counts.get((host, status), 0) + int(n)
    names = sorted({n.name for n in health.all_nodes(state)} | {h for h, _ in counts})
    held: dict[str, set[str]] = {}  # node -> the groups whose jobs held it
    for g in group_rows(state):
        for n in g["nodes"]:
            held.setdefault(n, set()).add(g["group"])
    rows = []
    for name in names:
        st = health.read_node(state, name)
        rows.append(
            {
                "node": name,
                "runs_ok": counts.get((name, "ok"), 0),
                "runs_failed": counts.get((name, "failed"), 0),
                "groups": len(held.get(name, ())),
                "attempts_failed_on_node": st.failed,
                "quarantined": st.quarantined,
                "drained": st.drained,
                "quarantine_reason": st.quarantine_reason,
            }
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(
            f,
            fieldnames=list(rows[0]) if rows else ["node", "runs_ok", "runs_failed", "quarantined"],
        )
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, out)
    return rows


def dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1)


def sweep_doc(plans: list[str]) -> dict[str, Any]:
    """``sweep.json`` from the experiments' plans (checkpoint ``plan``): runs per experiment."""
    experiments: dict[str, int] = {}
    for path in plans:
        plan = json.loads(Path(path).read_text())
        experiments[str(plan["experiment"])] = len(plan["runs"])
    return {"experiments": experiments}


def watch_progress(state: Path, every_s: float = 10.0, while_parent: int | None = None) -> None:
    """Rewrite ``progress.json`` every ``every_s`` seconds, while this process's parent is ``while_parent``
    (the workflow's controller, which started it: once the controller is gone, however it died, the parent
    changes), or forever."""
    import time

    while while_parent is None or os.getppid() == while_parent:
        # Progress is for people watching; the sweep does not depend on it.
        with contextlib.suppress(Exception):
            write_progress(state, progress_doc(state))
        time.sleep(every_s)

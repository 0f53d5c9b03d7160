"""Progress of a sweep per pair (``<state>/progress.json``, read by the dashboard's live view) and the
per-pair table of an experiment's report (``report/pairs.csv``).

``progress.json``::

    {"updated_at": "…", "runs": {"planned": 10000, "finished": 420, "remaining": 9580},
     "pairs": [{"pair": "pair1", "state": "running" | "idle" | "quarantined", "hardware_class": "hw-…",
                "done": 210, "failed": 1, "running": "<run id>" | null, "quarantine_reason": null}]}

``done``/``failed`` count attempts on that pair (a retried attempt counts where it failed); ``planned`` comes
from ``sweep.json`` (written when the workflow starts) and ``finished`` counts the final run records.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from demuxlab.cluster.state import PairState, pairs_dir, read_state
from demuxlab.jsonio import write_json_atomic
from demuxlab.vocab import RUN_FAILED, RUN_OK


def _pair_names(state: Path) -> list[str]:
    return sorted(p.stem for p in pairs_dir(state).glob("*.json"))


def progress_doc(state: Path, names: list[str] | None = None, results: Path | None = None) -> dict[str, Any]:
    """Build the progress document from the pair files (and ``sweep.json`` plus the run records)."""
    from demuxlab import lease

    names = sorted(set(names or []) | set(_pair_names(state)))
    pairs = []
    for name in names:
        st: PairState = read_state(state, name)
        held = lease.holder(name)
        running = held.get("run_id") if held else None
        status = "quarantined" if st.quarantined else "running" if running else "idle"
        pairs.append(
            {
                "pair": name,
                "state": status,
                "hardware_class": st.hardware_class,
                "done": st.done,
                "failed": st.failed,
                "running": running,
                "consecutive_failures": st.consecutive_failures,
                "quarantine_reason": st.quarantine_reason,
            }
        )
    runs: dict[str, Any] = {"planned": None, "finished": None, "remaining": None}
    try:
        sweep = json.loads((state / "sweep.json").read_text())
    except (OSError, json.JSONDecodeError):
        sweep = None
    if isinstance(sweep, dict):
        results = results or state.parent
        planned = sum(int(n) for n in sweep.get("experiments", {}).values())
        finished = 0
        for exp in sweep.get("experiments", {}):
            runs_dir = results / exp / "runs"
            if runs_dir.is_dir():
                finished += sum(1 for e in os.scandir(runs_dir) if e.name.endswith(".json"))
        runs = {"planned": planned, "finished": finished, "remaining": max(0, planned - finished)}
    return {"updated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "runs": runs, "pairs": pairs}


def sweep_doc(plans: list[Path], pairs: Path) -> dict[str, Any]:
    """``sweep.json`` (CONTRACTS.md §5a) from the experiments' plans and ``cluster pairs``' JSON: the runs
    each experiment plans (an adaptive one: at most its fixed design's), the pairs, the inventory."""
    inventory = json.loads(pairs.read_text())
    experiments: dict[str, int] = {}
    for path in plans:
        plan = json.loads(path.read_text())
        experiments[str(plan["experiment"])] = (
            plan["fixed_design_runs"] if plan["adaptive"] else len(plan["runs"])
        )
    return {"experiments": experiments, "pairs": inventory["pairs"], "inventory": inventory["inventory"]}


def write_progress(state: Path, doc: dict[str, Any]) -> Path:
    path = state / "progress.json"
    write_json_atomic(path, doc)
    return path


def format_progress(doc: dict[str, Any]) -> str:
    rows = [("pair", "state", "class", "done", "failed", "running / why quarantined")]
    for p in doc["pairs"]:
        detail = p["quarantine_reason"] if p["state"] == "quarantined" else (p["running"] or "")
        rows.append(
            (p["pair"], p["state"], p["hardware_class"] or "", str(p["done"]), str(p["failed"]), detail)
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5] for r in rows]
    runs = doc["runs"]
    if runs.get("planned") is not None:
        lines.append(f"runs: {runs['finished']} of {runs['planned']} finished, {runs['remaining']} remaining")
    return "\n".join(line.rstrip() for line in lines)


def pairs_report(spec: Any, pairs_from: str, state: Path, out: Path) -> list[dict[str, Any]]:
    """``report/pairs.csv``: per pair, its class, the experiment's runs ok / failed on it, quarantine."""
    from sqlalchemy import func, select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Experiment, Point, Run
    from demuxlab.remote.hostpairs import load_pairs
    from demuxlab.report import write_csv

    source = load_pairs(pairs_from)
    counts: dict[tuple[str | None, str], int] = {}
    with session() as s:
        q = (
            select(Run.host_pair, Run.status, func.count())
            .join(Point, Run.point_id == Point.id)
            .join(Experiment, Point.experiment_id == Experiment.id)
            .where(Experiment.name == spec.name, Experiment.spec_sha256 == spec.sha256)
            .group_by(Run.host_pair, Run.status)
        )
        for pair, status, n in s.execute(q):
            counts[(pair, status)] = int(n)
    rows = []
    names = [p.name for p in source.pairs]
    listed: list[str | None] = [*names, *([None] if any(k[0] is None for k in counts) else [])]
    for name in listed:
        st = read_state(state, name) if name else None
        rows.append(
            {
                "pair": name or "(no pair)",
                "hardware_class": st.hardware_class if st else None,
                "runs_ok": counts.get((name, RUN_OK), 0),
                "runs_failed": counts.get((name, RUN_FAILED), 0),
                "attempts_failed_on_pair": st.failed if st else None,
                "quarantined": bool(st and st.quarantined),
                "quarantine_reason": st.quarantine_reason if st else None,
            }
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out)
    return rows

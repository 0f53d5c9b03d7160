"""The thin database layer in front of :mod:`demuxlab.claims`: an experiment's measured points (repeats
summarized), its newest model predictions and its server hosts' facts, as the plain rows
:func:`demuxlab.claims.evaluate_claims` and :func:`demuxlab.claims.recommend` take.

Runs of different hardware classes (cluster sweeps) are never summarized together: a point gives one row
per class, whose ``host`` is the class id (claims are judged per host, so per class), and a class's
calibrated predictions carry it as their ``host``. Local runs have no class and keep the server's name."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from demuxlab.costs import run_costs
from demuxlab.errors import DemuxlabError
from demuxlab.point import POINT_FIELDS, Point
from demuxlab.stats import point_summary
from demuxlab.validity import point_flags
from demuxlab.vocab import CHECK_FAIL, METHOD_SSA, RUN_OK


@dataclass(frozen=True)
class ClaimInputs:
    points: list[dict[str, Any]]
    predictions: list[dict[str, Any]]
    facts: dict[str, dict[str, Any]]  # server hostname -> topology facts
    failed_points: list[str]  # point keys without a successful run (left out of the claims)


def load_inputs(
    experiment: str, spec_sha256: str, method: str = METHOD_SSA, url: str | None = None
) -> ClaimInputs:
    """The measured (not calibration) points of this exact spec, with their predictions by ``method``."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration, Experiment, Host, Prediction, Run, RunCheck
    from demuxlab.db.models import Point as PointRow

    with session(url) as s:
        exp_id = s.scalar(
            select(Experiment.id).where(Experiment.name == experiment, Experiment.spec_sha256 == spec_sha256)
        )
        if exp_id is None:
            raise DemuxlabError(
                f"experiment {experiment!r} (spec {spec_sha256[:12]}) has no runs in the database "
                "(ingest first)"
            )
        pts = {
            p.id: p
            for p in s.scalars(
                select(PointRow)
                .where(PointRow.experiment_id == exp_id, PointRow.instrument.is_(False))
                .order_by(PointRow.point_key)
            )
        }
        hosts = {h.id: h for h in s.scalars(select(Host))}
        runs: dict[int, list[Run]] = defaultdict(list)
        for run in s.scalars(select(Run).where(Run.point_id.in_(list(pts)))):
            runs[run.point_id].append(run)
        failed_checks: dict[Any, list[str]] = defaultdict(list)
        for run_id, check in s.execute(
            select(RunCheck.run_id, RunCheck.check)
            .join(Run, Run.run_id == RunCheck.run_id)
            .where(Run.point_id.in_(list(pts)), RunCheck.verdict == CHECK_FAIL)
        ):
            failed_checks[run_id].append(check)
        class_of: dict[int, str | None] = {
            cid: (artifacts or {}).get("hardware_class")
            for cid, artifacts in s.execute(select(Calibration.id, Calibration.artifacts))
        }
        newest: dict[tuple[int, str, str | None], Prediction] = {}
        for pred in s.scalars(
            select(Prediction)
            .where(Prediction.point_id.in_(list(pts)), Prediction.method == method)
            .order_by(Prediction.created_at, Prediction.id)
        ):
            cls = class_of.get(pred.calibration_id) if pred.calibration_id is not None else None
            newest[(pred.point_id, pred.rates_source, cls)] = pred  # the newest wins

        points: list[dict[str, Any]] = []
        failed: list[str] = []
        facts: dict[str, dict[str, Any]] = {}
        for pid, p in pts.items():
            every_ok = [r for r in runs[pid] if r.status == RUN_OK and r.throughput_msgs_per_s is not None]
            if not every_ok:
                failed.append(p.point_key)
                continue
            for cls in sorted({r.hardware_class for r in every_ok}, key=lambda c: c or ""):
                ok = [r for r in every_ok if r.hardware_class == cls]
                points.append(_point_row(p, ok, cls, hosts, facts, failed_checks))
        predictions = []
        for (pid, source, cls), pred in sorted(
            newest.items(), key=lambda kv: (pts[kv[0][0]].point_key, kv[0][1], kv[0][2] or "")
        ):
            p = pts[pid]
            predictions.append(
                {
                    **_point_fields(p),
                    "source": source,
                    "mean": pred.throughput_msgs_per_s,
                    "ci_halfwidth_rel": pred.ci_halfwidth_rel,
                    **({"host": cls} if cls else {}),
                }
            )
    return ClaimInputs(points, predictions, facts, failed)


def _kernel_means(ok: list[Any]) -> dict[str, float | None]:
    """The server's costs per message in the kernel's terms (demuxlab.costs), each the mean over the runs
    when every run has it (else None: a mean over some of them would mix populations)."""
    wanted = {
        "syscalls": "syscalls_per_msg",
        "cpu_sys_s": "sys_us_per_msg",
        "ctx_voluntary": "switches_per_msg",
    }
    per_run = [
        {c.metric: c.per_message for c in run_costs(r.costs, r.throughput_msgs_per_s) if c.side == "server"}
        for r in ok
    ]
    out: dict[str, float | None] = {}
    for metric, key in wanted.items():
        values = [v.get(metric) for v in per_run]
        known = [x for x in values if x is not None]
        out[key] = sum(known) / len(known) if known and len(known) == len(values) else None
    return out


def _point_row(
    p: Any,
    ok: list[Any],
    cls: str | None,
    hosts: dict[int, Any],
    facts: dict[str, dict[str, Any]],
    failed_checks: dict[Any, list[str]],
) -> dict[str, Any]:
    tput = point_summary([float(r.throughput_msgs_per_s or 0.0) for r in ok])
    costs = [
        (r.server_cpu_user_s + r.server_cpu_sys_s) / r.server_messages * 1e6
        for r in ok
        if r.server_cpu_user_s is not None and r.server_cpu_sys_s is not None and r.server_messages
    ]
    cost = point_summary(costs) if len(costs) == len(ok) else None
    names = Counter(hosts[r.server_host_id].hostname for r in ok if r.server_host_id in hosts).most_common()
    host = names[0][0] if names else ""
    for r in ok:
        h = hosts.get(r.server_host_id) if r.server_host_id is not None else None
        if h is not None and h.hostname == host:
            facts.setdefault(cls or host, dict(h.facts or {}))  # a class: the facts of its usual server
    if cls:
        host = cls
    cpus = [
        len(r.pinning["server_cpus"])
        for r in ok
        if isinstance(r.pinning, dict) and r.pinning.get("server_cpus")
    ]
    return {
        **_point_fields(p),
        "mean": tput.mean,
        "ci_low": tput.ci_low,
        "ci_high": tput.ci_high,
        "n": tput.n,
        "host": host,
        "server_cpus": min(cpus) if cpus else None,
        "cost_us": cost.mean if cost else None,
        "cost_ci_low": cost.ci_low if cost else None,
        "cost_ci_high": cost.ci_high if cost else None,
        **_kernel_means(ok),
        **point_flags(failed_checks.get(r.run_id, ()) for r in ok),
    }


def _point_fields(row: Any) -> dict[str, Any]:
    """The point of a ``points`` row as JSON: its key and :data:`~demuxlab.point.POINT_FIELDS`."""
    return Point.from_json({name: getattr(row, name) for name in POINT_FIELDS}).to_json()

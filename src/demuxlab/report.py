"""Per-experiment report: each point's throughput as the mean over its repeats with a 95% confidence
interval (seeds 000/001), as a CSV and a throughput-vs-threads figure, and the runs' validity checks
(demuxlab.validity): per point the runs a check flagged (points.csv), per check how its runs fared and the
experiment's order effect (checks.csv).

:func:`summarize`, :func:`check_summary` and :func:`plot_throughput` are pure (rows in, rows/figure out);
:func:`load_rows` is the thin database layer in front of them.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demuxlab import marks
from demuxlab.errors import DemuxlabError
from demuxlab.jsonio import open_atomic, write_text_atomic
from demuxlab.point import POINT_FIELDS
from demuxlab.staticplot import draw_throughput
from demuxlab.stats import point_summary
from demuxlab.validity import order_effect, point_flags
from demuxlab.vocab import CHECK_FAIL, CHECK_VERDICTS, CHECKS, RUN_FAILED, RUN_OK


@dataclass
class RunRow:
    """One run as the report needs it."""

    status: str
    throughput: float | None
    stationary: bool | None
    server_cpu_s: float | None
    server_messages: int | None
    latency_p50_us: float | None
    latency_p99_us: float | None
    hardware_class: str | None = None  # cluster runs: the pair's class (never averaged across classes)
    # Validity (demuxlab.validity): each check's verdict; a run with a fail is flagged (never left out).
    checks: dict[str, str] = field(default_factory=dict)
    started: float | None = None  # when it started (POSIX seconds): the order effect's order
    server_cpus: int | None = None  # the CPUs the server was pinned to (None: the record does not say)
    cpus_shared: tuple[str, ...] = ()  # hosts sharing one machine's CPUs (test cluster): not performance data

    @property
    def failed_checks(self) -> list[str]:
        return [c for c in CHECKS if self.checks.get(c) == CHECK_FAIL]


@dataclass
class PointRows:
    point_key: str
    params: dict[str, Any]
    runs: list[RunRow] = field(default_factory=list)


def load_rows(experiment: str, spec_sha256: str, url: str | None = None) -> list[PointRows]:
    """The experiment's points (this exact spec) and their runs, from the database."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Experiment, Point, Run, RunCheck

    out: dict[int, PointRows] = {}
    with session(url) as s:
        exp = s.scalars(
            select(Experiment).where(Experiment.name == experiment, Experiment.spec_sha256 == spec_sha256)
        ).first()
        if exp is None:
            raise DemuxlabError(
                f"experiment {experiment!r} (spec {spec_sha256[:12]}) has no runs in the database"
            )
        for point in s.scalars(select(Point).where(Point.experiment_id == exp.id).order_by(Point.point_key)):
            out[point.id] = PointRows(point.point_key, {f: getattr(point, f) for f in POINT_FIELDS})
        checks: dict[Any, dict[str, str]] = defaultdict(dict)
        for run_id, check, verdict in s.execute(
            select(RunCheck.run_id, RunCheck.check, RunCheck.verdict)
            .join(Run, Run.run_id == RunCheck.run_id)
            .join(Point)
            .where(Point.experiment_id == exp.id)
        ):
            checks[run_id][check] = verdict
        runs = s.scalars(select(Run).join(Point).where(Point.experiment_id == exp.id))
        for run in runs:
            cpu = None
            if run.server_cpu_user_s is not None and run.server_cpu_sys_s is not None:
                cpu = run.server_cpu_user_s + run.server_cpu_sys_s
            lat = run.latency_us or {}
            out[run.point_id].runs.append(
                RunRow(
                    status=run.status,
                    throughput=run.throughput_msgs_per_s,
                    stationary=run.stationary,
                    server_cpu_s=cpu,
                    server_messages=run.server_messages,
                    latency_p50_us=lat.get("p50"),
                    latency_p99_us=lat.get("p99"),
                    hardware_class=run.hardware_class,
                    checks=checks.get(run.run_id, {}),
                    started=run.started_at.timestamp() if run.started_at is not None else None,
                    server_cpus=_cpus(run.pinning),
                    cpus_shared=tuple((run.noise or {}).get("cpus_shared") or ()),
                )
            )
    return list(out.values())


def shared_hosts(points: Sequence[PointRows]) -> list[str]:
    """The hosts whose CPUs the runs shared with other hosts of one machine (the test cluster)."""
    return sorted({h for p in points for r in p.runs for h in r.cpus_shared})


def _cpus(pinning: Any) -> int | None:
    cpus = pinning.get("server_cpus") if isinstance(pinning, Mapping) else None
    return len(cpus) if isinstance(cpus, list) and cpus else None


def point_summaries(
    session: Any, experiment_name: str, spec_sha256: str | None = None
) -> list[dict[str, Any]]:
    """Per point of an experiment: its parameters, runs ok / failed, and the ok runs' throughputs.

    Without ``spec_sha256`` the experiment's most recently created spec version is used. Points are
    ordered by point_key; ``throughputs`` follow ``repeats`` (ok runs by repeat index).
    """
    from sqlalchemy import select

    from demuxlab.db.models import Experiment, Point, Run

    query = select(Experiment).where(Experiment.name == experiment_name)
    if spec_sha256 is not None:
        query = query.where(Experiment.spec_sha256 == spec_sha256)
    experiment = session.scalars(query.order_by(Experiment.created_at.desc(), Experiment.id.desc())).first()
    if experiment is None:
        suffix = f" with spec_sha256 {spec_sha256}" if spec_sha256 else ""
        raise DemuxlabError(
            f"experiment {experiment_name!r}{suffix}: not in the database (ingest its runs first)"
        )

    rows = session.execute(
        select(Point, Run.repeat_index, Run.status, Run.throughput_msgs_per_s, Run.run_id)
        .outerjoin(Run, Run.point_id == Point.id)
        .where(Point.experiment_id == experiment.id)
        .order_by(Point.point_key, Run.repeat_index)
    ).all()
    out: dict[int, dict[str, Any]] = {}
    for point, repeat, status, throughput, run_id in rows:
        summary = out.get(point.id)
        if summary is None:
            summary = {
                "experiment": experiment.name,
                "spec_sha256": experiment.spec_sha256,
                "point_id": point.id,
                "point_key": point.point_key,
                **{k: getattr(point, k) for k in POINT_FIELDS},
                "runs_ok": 0,
                "runs_failed": 0,
                "repeats": [],
                "throughputs": [],
                "run_ids": [],
            }
            out[point.id] = summary
        if status == RUN_OK:
            summary["runs_ok"] += 1
            if throughput is not None:
                summary["repeats"].append(repeat)
                summary["throughputs"].append(throughput)
                summary["run_ids"].append(str(run_id))
        elif status == RUN_FAILED:
            summary["runs_failed"] += 1
    return list(out.values())


def _mean(values: Sequence[float]) -> float | None:
    # fsum: exactly rounded, so the order the runs were read in cannot change the last bits (a bundle's
    # reproduce compares its tables with the workflow's to the digit).
    return math.fsum(values) / len(values) if values else None


def by_class(points: Sequence[PointRows]) -> list[tuple[PointRows, str | None]]:
    """Each point once per hardware class its runs ran on (runs of different classes are never averaged);
    a point without runs, or whose runs all have one class (or none: local runs), stays one row."""
    out: list[tuple[PointRows, str | None]] = []
    for p in points:
        classes = sorted({r.hardware_class for r in p.runs}, key=lambda c: c or "")
        if len(classes) <= 1:
            out.append((p, classes[0] if classes else None))
            continue
        for cls in classes:
            runs = [r for r in p.runs if r.hardware_class == cls]
            out.append((PointRows(p.point_key, p.params, runs), cls))
    return out


def summarize(points: Sequence[PointRows]) -> list[dict[str, Any]]:
    """One row per point (and hardware class): parameters, run counts, mean throughput with its 95% CI,
    CPU per message, and the fewest CPUs its runs' server had (``oversubscribed``: its threads outnumber
    them)."""
    rows = []
    for p, hardware_class in by_class(points):
        ok = [r for r in p.runs if r.status == RUN_OK and r.throughput is not None]
        tputs = [r.throughput for r in ok if r.throughput is not None]
        summary = point_summary(tputs) if tputs else None
        cpu_per_msg = [
            r.server_cpu_s / r.server_messages * 1e6
            for r in ok
            if r.server_cpu_s is not None and r.server_messages
        ]
        rows.append(
            {
                "point_key": p.point_key,
                **p.params,
                "runs_ok": len(ok),
                "runs_failed": sum(1 for r in p.runs if r.status != RUN_OK),
                "throughput_mean": summary.mean if summary else None,
                "throughput_ci_low": summary.ci_low if summary else None,
                "throughput_ci_high": summary.ci_high if summary else None,
                "throughput_ci_halfwidth_rel": summary.halfwidth_rel if summary else None,
                "nonstationary_runs": sum(1 for r in ok if r.stationary is False),
                "server_cpu_us_per_msg": _mean(cpu_per_msg),
                "latency_p50_us": _mean([r.latency_p50_us for r in ok if r.latency_p50_us is not None]),
                "latency_p99_us": _mean([r.latency_p99_us for r in ok if r.latency_p99_us is not None]),
                "hardware_class": hardware_class,
                **point_flags(r.failed_checks for r in ok),
                "server_cpus": _fewest([r.server_cpus for r in ok]),
                "oversubscribed": _over(p.params.get("threads"), [r.server_cpus for r in ok]),
            }
        )
    return rows


def check_summary(points: Sequence[PointRows]) -> list[dict[str, Any]]:
    """``checks.csv``: per check, how many ok runs it judged and their verdicts; then the experiment's order
    effect (:func:`demuxlab.validity.order_effect`) with its verdict and reason."""
    ok = [(p, r) for p in points for r in p.runs if r.status == RUN_OK]
    rows = []
    for check in CHECKS:
        verdicts = [r.checks[check] for _, r in ok if check in r.checks]
        if not verdicts:
            continue
        rows.append(
            {"check": check, "runs": len(verdicts), **{v: verdicts.count(v) for v in CHECK_VERDICTS}}
            | {"verdict": None, "reason": None}
        )
    order = order_effect(
        [
            (f"{p.point_key}|{r.hardware_class or ''}", r.started, r.throughput)
            for p, r in ok
            if r.started is not None and r.throughput is not None
        ]
    )
    rows.append(
        {"check": "order", "runs": None, **dict.fromkeys(CHECK_VERDICTS)}
        | {"verdict": order.verdict, "reason": order.reason}
    )
    return rows


def _fewest(cpus: Sequence[int | None]) -> int | None:
    known = [c for c in cpus if c is not None]
    return min(known) if known else None


def _over(threads: Any, cpus: Sequence[int | None]) -> bool | None:
    fewest = _fewest(cpus)
    return None if fewest is None or threads is None else int(threads) > fewest


def with_decisions(rows: Sequence[dict[str, Any]], decisions: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An adaptive experiment's rows (docs/adaptive.md, CONTRACTS.md §7a): each measured row says why its
    point was measured (``measured``, ``why``), and every point of the grid that was never measured gets a
    row of its own, marked model-only, with the model's value and no interval."""
    grid = {g["point_key"]: g for g in decisions.get("grid", [])}
    out = []
    for row in rows:
        g = grid.get(row["point_key"])
        why = g["why"] if g is not None else ("calibration run" if row.get("instrument") else "")
        out.append({**row, "measured": True, "why": why})
    for key, g in grid.items():
        if g.get("measured") or any(r["point_key"] == key for r in rows):
            continue
        out.append(
            {
                "point_key": key,
                **{f: g.get(f) for f in POINT_FIELDS},
                "runs_ok": 0,
                "runs_failed": 0,
                "throughput_mean": g.get("mean"),
                "throughput_ci_low": None,
                "throughput_ci_high": None,
                "throughput_ci_halfwidth_rel": None,
                "nonstationary_runs": 0,
                "server_cpu_us_per_msg": None,
                "latency_p50_us": None,
                "latency_p99_us": None,
                "hardware_class": None,
                "runs_flagged": 0,
                "flags": "",
                "server_cpus": None,
                "oversubscribed": None,
                "measured": False,
                "why": g.get("why", "model-only"),
            }
        )
    return out


def write_csv(rows: Sequence[dict[str, Any]], path: Path, fields: Sequence[str] | None = None) -> None:
    """Write ``rows`` as CSV (``fields``: the columns, default the first row's keys), atomically."""
    columns = list(fields) if fields is not None else list(rows[0]) if rows else ["point_key", *POINT_FIELDS]
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=columns)
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    write_text_atomic(path, text.getvalue())


# Metadata that would make two renderings of the same data differ (dates, random ids): left out, so a
# bundle's figures can be regenerated and compared (``demuxlab bundle reproduce``).
_DETERMINISTIC_METADATA: dict[str, dict[str, Any]] = {
    ".png": {},
    ".svg": {"Date": None},
    ".pdf": {"CreationDate": None, "ModDate": None},
}


def save_figure(fig: Any, path: Path) -> None:
    """Save a matplotlib figure atomically (a reader never sees half a PNG) and close it; deterministic:
    the same data give the same bytes (no dates, a fixed SVG hash salt)."""
    import matplotlib
    import matplotlib.pyplot as plt

    metadata = _DETERMINISTIC_METADATA.get(path.suffix.lower())
    try:
        with open_atomic(path) as f, matplotlib.rc_context({"svg.hashsalt": "demuxlab"}):
            fig.savefig(f, format=path.suffix[1:].lower(), dpi=110, metadata=metadata)
    finally:
        plt.close(fig)


def plot_throughput(rows: Sequence[dict[str, Any]], title: str, path: Path) -> None:
    """Throughput vs threads, one panel per workload (work, connections, size, rate), one line per design:
    :func:`draw_throughput` saved to ``path``."""
    save_figure(draw_throughput(rows, title), path)


def write_report(spec: Any, out_dir: Path, decisions: Mapping[str, Any] | None = None) -> list[Path]:
    """Write ``points.csv``, ``throughput_vs_threads.png`` and ``points.html`` (the figure and the table,
    shown inline by ``snakemake --report``) for ``spec`` from the database (``decisions``: an adaptive
    experiment's, to mark its points measured or model-only)."""
    from demuxlab import reporthtml
    from demuxlab.reporthtml import POINT_COLUMNS, describe_points

    out_dir.mkdir(parents=True, exist_ok=True)
    loaded = load_rows(spec.name, spec.sha256)
    rows = summarize(loaded)
    if decisions is not None:
        rows = with_decisions(rows, decisions)
    csv_path, fig_path = out_dir / "points.csv", out_dir / "throughput_vs_threads.png"
    html_path, checks_path = out_dir / "points.html", out_dir / "checks.csv"
    write_csv(rows, csv_path)
    write_csv(check_summary(loaded), checks_path, CHECK_COLUMNS)
    plot_throughput(rows, marks.figure_title(spec.name, spec.reproduces), fig_path)
    sweep = [r for r in rows if not r.get("instrument")]
    calibration = [r for r in rows if r.get("instrument")]
    columns = [c for c in POINT_COLUMNS if any(c in r for r in rows)]
    body = [
        reporthtml.image(fig_path.read_bytes(), "throughput against server threads"),
        "<h2>Points</h2>",
        reporthtml.table(sweep, columns),
    ]
    if calibration:
        body += ["<h2>Calibration points (instrumented)</h2>", reporthtml.table(calibration, columns)]
    lead = describe_points(rows, shared_hosts(loaded))
    write_text_atomic(html_path, reporthtml.page(f"{spec.name}: throughput", body, lead))
    return [csv_path, fig_path, html_path, checks_path]


CHECK_COLUMNS = ("check", "runs", *CHECK_VERDICTS, "verdict", "reason")

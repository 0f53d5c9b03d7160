"""Per-experiment report: each point's throughput as the mean over its repeats with a 95% confidence
interval (seeds 000/001), as a CSV and a throughput-vs-threads figure.

:func:`summarize` and :func:`plot_throughput` are pure (rows in, rows/figure out); :func:`load_rows` is the
thin database layer in front of them.
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
from demuxlab.staticplot import draw_series, legend_below, pyplot, throughput_axis
from demuxlab.stats import point_summary
from demuxlab.vocab import RUN_FAILED, RUN_OK


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
    server_cpus: int | None = None  # the CPUs the server was pinned to (None: the record does not say)
    cpus_shared: tuple[str, ...] = ()  # hosts sharing one machine's CPUs (test cluster): not performance data


@dataclass
class PointRows:
    point_key: str
    params: dict[str, Any]
    runs: list[RunRow] = field(default_factory=list)


def load_rows(experiment: str, spec_sha256: str, url: str | None = None) -> list[PointRows]:
    """The experiment's points (this exact spec) and their runs, from the database."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Experiment, Point, Run

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
                "server_cpus": _fewest([r.server_cpus for r in ok]),
                "oversubscribed": _over(p.params.get("threads"), [r.server_cpus for r in ok]),
            }
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


def draw_throughput(rows: Sequence[dict[str, Any]], title: str) -> Any:
    """Throughput vs threads, one panel per workload, one line per design, in the dashboard's marks (a
    colour per pattern, a dash and marker per notifier, :mod:`demuxlab.marks`' interval rule, a ring round
    an oversubscribed point); an adaptive experiment's model-only points dashed and hollow."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    panels = _throughput_panels(rows)
    n = max(1, len(panels))
    cols = min(3, n)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.8 * nrows + 1.2), squeeze=False)
    notes: list[str] = []
    for ax, (panel, lines) in zip(axes.flat, sorted(panels.items(), key=lambda kv: str(kv[0])), strict=False):
        means: list[float] = []
        highs: list[float] = []
        # the designs of a panel side by side round each thread count: equal means never hide each other
        offsets = marks.dodge(len(lines), DODGE_SPAN if len(lines) > 1 else 0.0)
        for dx, ((pattern, notifier), every) in zip(offsets, sorted(lines.items()), strict=True):
            every = sorted(every, key=lambda r: r["threads"])
            _throughput_line(ax, pattern, notifier, every, means, highs, dx)
        work, conns, size, rate = panel
        load = "closed loop" if rate is None else f"{rate:g} msg/s"
        ax.set_title(f"work {work:g} µs, {conns} conns, {size} B, {load}", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        cut = throughput_axis(ax, means, highs, scale=1e3)
        if cut and cut not in notes:
            notes.append(cut)
        ax.set_xlabel("server threads")
        ax.set_ylabel("throughput (k msg/s)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    if not panels:
        axes.flat[0].text(0.5, 0.5, "no successful runs", ha="center", va="center")
    if any(r.get("oversubscribed") for r in rows):
        notes.append(f"ringed: {marks.OVERSUBSCRIBED_TEXT} (not comparable)")
    notes.append("open markers: 1 run, no interval; error bars: 95 % interval (Student t) from 2 runs")
    legend_below(fig, list(axes.flat), title=f"{title}: mean of repeats, 95 % CI", notes=notes)
    return fig


def _throughput_panels(
    rows: Sequence[dict[str, Any]],
) -> dict[tuple[Any, ...], dict[tuple[str, str], list[Any]]]:
    panels: dict[tuple[Any, ...], dict[tuple[str, str], list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in rows:
        if row["throughput_mean"] is None or row["instrument"]:
            continue  # calibration points are instrumented: not comparable with the sweep
        panel = (row["work_us"], row["connections"], row["msg_size"], row["rate"])
        panels[panel][(row["pattern"], row["notifier"])].append(row)
    return panels


#: The widest spread, in threads, of one thread count's designs in a panel (as validation.png's).
DODGE_SPAN = 0.36


def _throughput_line(
    ax: Any,
    pattern: str,
    notifier: str,
    every: list[dict[str, Any]],
    means: list[float],
    highs: list[float],
    dx: float = 0.0,
) -> None:
    """One design's line of a panel: its measured points, and its model-only points (adaptive) dashed."""
    colour = marks.pattern_colour(pattern)
    marker = marks.MPL_MARKER[marks.notifier_symbol(notifier)]
    pts = [r for r in every if r.get("measured", True)]
    ivs = [
        marks.interval(
            r["throughput_mean"],
            None if r["throughput_ci_high"] is None else r["throughput_ci_high"] - r["throughput_mean"],
            r["runs_ok"],
        )
        for r in pts
    ]
    draw_series(
        ax,
        [r["threads"] + dx for r in pts],
        ivs,
        colour=colour,
        marker=marker,
        dash=marks.notifier_dash(notifier),
        label=f"{pattern}/{notifier}",
        over=[bool(r.get("oversubscribed")) for r in pts],
        scale=1e3,
    )
    means.extend(iv.mean for iv in ivs)
    highs.extend(iv.hi for iv in ivs)
    only = [r for r in every if not r.get("measured", True)]
    if only:
        ax.plot(
            [r["threads"] + dx for r in every],
            [r["throughput_mean"] / 1e3 for r in every],
            ls="--",
            lw=0.8,
            color=colour,
        )
        ax.plot(
            [r["threads"] + dx for r in only],
            [r["throughput_mean"] / 1e3 for r in only],
            ls="none",
            marker=marker,
            ms=4,
            mfc="none",
            color=colour,
            label=f"{pattern}/{notifier} (model only)",
        )
        means.extend(r["throughput_mean"] for r in only)


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
    html_path = out_dir / "points.html"
    write_csv(rows, csv_path)
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
    return [csv_path, fig_path, html_path]

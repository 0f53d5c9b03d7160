"""The model stages of the workflow: calibrate, predict, and validate against the measurements (seed 001).

Everything is keyed by hardware class too (``runs.hardware_class``, cluster sweeps): runs of different
classes are never pooled, calibrated or compared together. A local sweep has one class (none), so it gets
one calibration per (pattern, notifier) and one validation row per point, as before.

1. :func:`calibrate_experiment` fits the CTMC rates of every HSHA/LF (pattern, notifier, hardware class)
   of a spec from the experiment's ingested calibration runs (the instrumented lowest-concurrency points,
   :func:`demuxlab.spec.calibration_points`) and stores them in ``calibrations`` with their provenance
   (source runs, server host, server artifact).
2. :func:`predict_experiment` predicts every measured HSHA/LF point of the experiment from the paper's
   rates and, for each hardware class the point ran on, from that class's calibration — into
   ``predictions``, in one transaction.
3. :func:`validation_rows` joins each (point, hardware class)'s measurement (mean of the repeats, 95 % CI)
   with its predictions and the relative errors; :func:`plot_validation` draws them as seed 001's Fig. 3.

A (pattern, notifier) that cannot be calibrated (every calibration run failed, or its timings are unusable)
is not an error of the workflow: the outcome carries the reason, the predictions of its points are made
from the paper's rates only, and the validation table leaves the calibrated columns empty. Points the
models do not describe are skipped with a reason: zero work (r_c = 1/work is undefined) and open-loop load
(the models are closed: every connection always has its next request).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demuxlab.ctmc.rates import PATTERNS, Rates
from demuxlab.errors import DemuxlabError
from demuxlab.spec import Spec, calibration_points

SOURCES: tuple[str, ...] = ("paper", "calibration")
# How the figure draws each rates source's model: line style and marker.
MODEL_STYLES: tuple[tuple[str, str, str], ...] = (("calibration", "-", "s"), ("paper", "--", "^"))


def _experiment_id(s: Any, spec: Spec) -> int:
    from sqlalchemy import select

    from demuxlab.db.models import Experiment

    exp_id = s.scalar(
        select(Experiment.id).where(Experiment.name == spec.name, Experiment.spec_sha256 == spec.sha256)
    )
    if exp_id is None:
        raise DemuxlabError(
            f"experiment {spec.name!r} (spec {spec.sha256[:12]}) has no runs in the database (ingest first)"
        )
    return int(exp_id)


# -- 1. calibrate --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationOutcome:
    pattern: str
    notifier: str
    calibration_id: int | None
    rates: dict[str, float] | None
    rate_sources: dict[str, str] | None
    source_runs: list[str]
    failed_runs: int
    error: str | None
    self_check: tuple[dict[str, Any], ...] = ()  # SelfCheck.as_dict() per workload, refused ones too
    hardware_class: str | None = None  # the class of its runs (None: a local sweep)

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "notifier": self.notifier,
            "hardware_class": self.hardware_class,
            "calibration_id": self.calibration_id,
            "rates_per_us": self.rates,
            "rate_sources": self.rate_sources,
            "source_runs": self.source_runs,
            "failed_runs": self.failed_runs,
            "error": self.error,
            "self_check": list(self.self_check),
        }


def calibrate_experiment(spec: Spec, url: str | None = None) -> list[CalibrationOutcome]:
    """Fit and store one calibration per (pattern, notifier) of the spec's calibration points and hardware
    class of their runs."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Point, Run

    wanted = sorted({(p.pattern, p.notifier) for p in calibration_points(spec)})
    if not wanted:  # no calibration runs (calibration.repeats 0): nothing to fit, nothing to wait for
        return []
    runs: dict[tuple[str, str, str | None], list[tuple[Run, int]]] = defaultdict(list)
    failed: dict[tuple[str, str, str | None], int] = defaultdict(int)
    with session(url) as s:
        exp_id = _experiment_id(s, spec)
        rows = s.execute(
            select(Point.pattern, Point.notifier, Point.connections, Run)
            .join(Run, Run.point_id == Point.id)
            .where(Point.experiment_id == exp_id, Point.instrument.is_(True))
            .order_by(Point.point_key, Run.repeat_index)
        ).all()
        for pattern, notifier, connections, run in rows:
            key = (pattern, notifier, run.hardware_class)
            if run.status == "ok" and run.server_result is not None:
                runs[key].append((run, connections))
            else:
                failed[key] += 1
        s.expunge_all()

    keys: list[tuple[str, str, str | None]] = []
    for pattern, notifier in wanted:
        classes = {c for (p, n, c) in [*runs, *failed] if (p, n) == (pattern, notifier)} or {None}
        keys.extend((pattern, notifier, c) for c in sorted(classes, key=lambda c: c or ""))
    return [_fit(spec, key, runs.get(key, []), failed[key], url) for key in keys]


def _fit(
    spec: Spec, key: tuple[str, str, str | None], found: list[tuple[Any, int]], failed: int, url: str | None
) -> CalibrationOutcome:
    from demuxlab.ctmc.calibrate import SelfCheck, calibrate
    from demuxlab.ctmc.store import save_calibration

    pattern, notifier, cls = key
    ok = [r for r, _ in found]
    ids = [str(r.run_id) for r in ok]
    if not ok:
        error = f"no successful calibration run ({failed} failed)"
        return CalibrationOutcome(pattern, notifier, None, None, None, ids, failed, error, hardware_class=cls)
    checks: list[SelfCheck] = []
    try:
        rates = calibrate(
            [r.server_result for r in ok],
            pattern,
            [f"run {i}" for i in ids],
            measured=[r.throughput_msgs_per_s for r in ok],
            connections=[c for _, c in found],
            checks=checks,
        )
    except DemuxlabError as exc:
        done = tuple(c.as_dict() for c in checks)
        return CalibrationOutcome(
            pattern, notifier, None, None, None, ids, failed, exc.message, done, hardware_class=cls
        )
    hosts = {r.server_host_id for r in ok}
    artifacts = {
        "experiment": spec.name,
        "spec_sha256": spec.sha256,
        "server_artifacts": _unique([r.server_artifact for r in ok]),
        "launchers": sorted({str(r.launcher) for r in ok}),
        "self_check": [c.as_dict() for c in checks],
        **({"hardware_class": cls} if cls is not None else {}),
    }
    cid = save_calibration(
        rates,
        pattern,
        notifier,
        ids,
        host_id=hosts.pop() if len(hosts) == 1 else None,
        artifacts=artifacts,
        url=url,
    )
    return CalibrationOutcome(
        pattern,
        notifier,
        cid,
        rates.as_dict(),
        dict(rates.source),
        ids,
        failed,
        None,
        tuple(c.as_dict() for c in checks),
        hardware_class=cls,
    )


def _unique(docs: Sequence[Any]) -> list[Any]:
    seen: list[Any] = []
    for d in docs:
        if d not in seen:
            seen.append(d)
    return seen


# -- 2. predict ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelPoint:
    point_id: int
    point_key: str
    pattern: str
    notifier: str
    threads: int
    work_us: float
    connections: int
    rate: float | None
    classes: tuple[str | None, ...] = (None,)  # the hardware classes its runs ran on

    @property
    def skip_reason(self) -> str | None:
        if self.work_us <= 0:
            return "zero work: the models need r_c = 1/work_us"
        if self.rate is not None:
            return "open-loop load: the models are closed-loop"
        return None


def model_points(spec: Spec, url: str | None = None) -> list[ModelPoint]:
    """The experiment's measured (not calibration) HSHA and LF points in the database."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Point, Run

    with session(url) as s:
        exp_id = _experiment_id(s, spec)
        pts = s.scalars(
            select(Point)
            .where(Point.experiment_id == exp_id, Point.instrument.is_(False), Point.pattern.in_(PATTERNS))
            .order_by(Point.point_key)
        ).all()
        classes: dict[int, set[str | None]] = defaultdict(set)
        for point_id, cls in s.execute(
            select(Run.point_id, Run.hardware_class).where(Run.point_id.in_([p.id for p in pts])).distinct()
        ):
            classes[point_id].add(cls)
        return [
            ModelPoint(
                p.id,
                p.point_key,
                p.pattern,
                p.notifier,
                p.threads,
                p.work_us,
                p.connections,
                p.rate,
                tuple(sorted(classes[p.id], key=lambda c: c or "")) or (None,),
            )
            for p in pts
        ]


def predict_experiment(
    spec: Spec,
    calibration_ids: dict[tuple[str, str, str | None], int],
    *,
    method: str = "ssa",
    rel_ci: float = 0.01,
    seed: int = 0,
    jobs: int = 1,
    url: str | None = None,
) -> list[dict[str, Any]]:
    """Predict every measured HSHA/LF point from the paper's rates and from its calibration (if any).

    ``calibration_ids`` maps (pattern, notifier, hardware class) to a stored calibration; a point is
    predicted from the calibration of each class it ran on, never from another class's. Returns one entry
    per point, rates source (and class): the stored prediction, or ``skipped`` with the reason.
    """
    from demuxlab.ctmc.predict import PredictRequest, predict_many
    from demuxlab.ctmc.store import load_calibration, save_predictions

    rates_of: dict[int, Rates] = {}
    for (pattern, notifier, _cls), cid in calibration_ids.items():
        cal_pattern, cal_notifier, rates = load_calibration(cid, url)
        if (cal_pattern, cal_notifier) != (pattern, notifier):
            raise DemuxlabError(
                f"calibration {cid}: calibrates {cal_pattern}/{cal_notifier}, not {pattern}/{notifier}"
            )
        rates_of[cid] = rates

    entries: list[dict[str, Any]] = []
    jobs_of: list[tuple[ModelPoint, int | None]] = []
    requests: list[PredictRequest] = []
    for pt in model_points(spec, url):
        wanted: list[tuple[str, int | None, str | None]] = [("paper", None, None)]
        wanted += [("calibration", calibration_ids.get((pt.pattern, pt.notifier, c)), c) for c in pt.classes]
        for source, cal, cls in wanted:
            reason = pt.skip_reason
            if reason is None and source == "calibration" and cal is None:
                reason = f"no calibration of {pt.pattern}/{pt.notifier}" + (f" on class {cls}" if cls else "")
            if reason is not None:
                skip: dict[str, Any] = {"point_key": pt.point_key, "rates_source": source, "skipped": reason}
                entries.append({**skip, "hardware_class": cls} if cls else skip)
                continue
            jobs_of.append((pt, cal))
            requests.append(
                PredictRequest(
                    pattern=pt.pattern,
                    threads=pt.threads,
                    work_us=pt.work_us,
                    connections=pt.connections,
                    method=method,
                    rates=None if cal is None else rates_of[cal],
                    rel_ci=rel_ci,
                    seed=seed,
                )
            )
    predictions = predict_many(requests, jobs=jobs)
    ids = save_predictions(
        [(p, pt.point_id, cal) for p, (pt, cal) in zip(predictions, jobs_of, strict=True)], url
    )
    class_of = {cid: cls for (_p, _n, cls), cid in calibration_ids.items()}
    for pid, p, (pt, cal) in zip(ids, predictions, jobs_of, strict=True):
        entry: dict[str, Any] = {
            "point_key": pt.point_key,
            "rates_source": "paper" if cal is None else "calibration",
            "calibration_id": cal,
            "prediction_id": pid,
            **p.as_dict(),
        }
        if cal is not None and class_of.get(cal):
            entry["hardware_class"] = class_of[cal]
        entries.append(entry)
    entries.sort(key=lambda e: (e["point_key"], e["rates_source"], e.get("hardware_class") or ""))
    return entries


# -- 3. validate ---------------------------------------------------------------------------------------------


def validation_rows(spec: Spec, method: str = "ssa", url: str | None = None) -> list[dict[str, Any]]:
    """Per measured HSHA/LF point and hardware class: the measurement (that class's runs only) and each
    source's prediction with its relative error. The paper's rates are the same for every class; the
    calibrated prediction is the one from that class's calibration, never another class's.

    relative error = (predicted − measured) / measured. Where a (point, class) has predictions from several
    calibrations, the newest is taken.
    """
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration, Prediction
    from demuxlab.report import load_rows, summarize

    measured: dict[tuple[str, str | None], dict[str, Any]] = {
        (row["point_key"], row["hardware_class"]): row
        for row in summarize(load_rows(spec.name, spec.sha256, url))
        if not row["instrument"] and row["pattern"] in PATTERNS
    }
    points = {pt.point_id: pt for pt in model_points(spec, url)}
    best: dict[tuple[int, str, str | None], Prediction] = {}
    with session(url) as s:
        preds = s.scalars(
            select(Prediction)
            .where(Prediction.point_id.in_(list(points)), Prediction.method == method)
            .order_by(Prediction.created_at, Prediction.id)
        ).all()
        cal_ids = {p.calibration_id for p in preds if p.calibration_id is not None}
        class_of: dict[int, str | None] = {
            cid: (artifacts or {}).get("hardware_class")
            for cid, artifacts in s.execute(
                select(Calibration.id, Calibration.artifacts).where(Calibration.id.in_(list(cal_ids)))
            )
        }
        for pred in preds:
            cls = class_of.get(pred.calibration_id) if pred.calibration_id is not None else None
            best[(pred.point_id, pred.rates_source, cls)] = pred  # the newest wins
        s.expunge_all()

    rows: list[dict[str, Any]] = []
    for pt in sorted(points.values(), key=lambda p: p.point_key):
        classes = sorted({c for (k, c) in measured if k == pt.point_key}, key=lambda c: c or "") or [None]
        for cls in classes:
            rows.append(_validation_row(pt, cls, measured.get((pt.point_key, cls)), best, method))
    return rows


def _validation_row(
    pt: ModelPoint, cls: str | None, m: dict[str, Any] | None, best: dict[Any, Any], method: str
) -> dict[str, Any]:
    mean = m["throughput_mean"] if m else None
    row: dict[str, Any] = {
        "point_key": pt.point_key,
        "hardware_class": cls,
        "pattern": pt.pattern,
        "notifier": pt.notifier,
        "threads": pt.threads,
        "work_us": pt.work_us,
        "connections": pt.connections,
        "runs_ok": m["runs_ok"] if m else 0,
        "measured_msgs_per_s": mean,
        "measured_ci_halfwidth_rel": m["throughput_ci_halfwidth_rel"] if m else None,
        "method": method,
    }
    for source in SOURCES:
        got = best.get((pt.point_id, source, cls if source == "calibration" else None))
        predicted = got.throughput_msgs_per_s if got else None
        row[f"{source}_msgs_per_s"] = predicted
        row[f"{source}_ci_halfwidth_rel"] = got.ci_halfwidth_rel if got else None
        row[f"{source}_rel_error"] = (predicted - mean) / mean if predicted is not None and mean else None
        if source == "calibration":
            row["calibration_id"] = got.calibration_id if got else None
    row["skipped"] = pt.skip_reason or ""
    return row


def summarize_errors(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (pattern, notifier, hardware class, rates source): points compared, mean and largest absolute
    relative error. Classes are never pooled."""
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        for source in SOURCES:
            err = row[f"{source}_rel_error"]
            if err is not None:
                key = (row["pattern"], row["notifier"], row.get("hardware_class") or "", source)
                groups[key].append(abs(err))
    return [
        {
            "pattern": pattern,
            "notifier": notifier,
            "hardware_class": cls or None,
            "rates_source": source,
            "points": len(errs),
            "mean_abs_rel_error": sum(errs) / len(errs),
            "max_abs_rel_error": max(errs),
        }
        for (pattern, notifier, cls, source), errs in sorted(groups.items())
    ]


VALIDATION_FIELDS: tuple[str, ...] = (
    "point_key",
    "hardware_class",
    "pattern",
    "notifier",
    "threads",
    "work_us",
    "connections",
    "runs_ok",
    "measured_msgs_per_s",
    "measured_ci_halfwidth_rel",
    "method",
    "paper_msgs_per_s",
    "paper_ci_halfwidth_rel",
    "paper_rel_error",
    "calibration_id",
    "calibration_msgs_per_s",
    "calibration_ci_halfwidth_rel",
    "calibration_rel_error",
    "skipped",
)
SUMMARY_FIELDS: tuple[str, ...] = (
    "pattern",
    "notifier",
    "hardware_class",
    "rates_source",
    "points",
    "mean_abs_rel_error",
    "max_abs_rel_error",
)


def plot_validation(rows: Sequence[dict[str, Any]], title: str, path: Path) -> None:
    """Seed 001 Fig. 3: per workload, measured throughput (95 % CI) and the models' predictions against
    threads (top), and the relative error of each prediction (bottom). One colour per pattern/notifier;
    solid: calibrated rates, dashed: the paper's rates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from demuxlab.report import save_figure

    panels: dict[tuple[float, int], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        label = f"{row['pattern']}/{row['notifier']}"
        if row.get("hardware_class"):  # classes are drawn apart, never joined by one line
            label += f" [{row['hardware_class']}]"
        panels[(row["work_us"], row["connections"])][label].append(row)
    keys = sorted(panels)
    cols = max(1, len(keys))
    fig, axes = plt.subplots(2, cols, figsize=(max(6.4, 5.0 * cols), 7.4), squeeze=False, sharex="col")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = sorted({label for lines in panels.values() for label in lines})
    colour_of = {label: colours[i % len(colours)] for i, label in enumerate(labels)}
    for col, key in enumerate(keys):
        top, bottom = axes[0][col], axes[1][col]
        for label, pts in sorted(panels[key].items()):
            pts = sorted(pts, key=lambda r: r["threads"])
            c = colour_of[label]
            meas = [r for r in pts if r["measured_msgs_per_s"] is not None]
            top.errorbar(
                [r["threads"] for r in meas],
                [r["measured_msgs_per_s"] / 1e3 for r in meas],
                yerr=[r["measured_msgs_per_s"] * (r["measured_ci_halfwidth_rel"] or 0.0) / 1e3 for r in meas],
                fmt="o",
                ms=4,
                capsize=2,
                color=c,
            )
            for source, style, marker in MODEL_STYLES:
                pred = [r for r in pts if r[f"{source}_msgs_per_s"] is not None]
                if not pred:
                    continue
                x = [r["threads"] for r in pred]
                top.plot(
                    x,
                    [r[f"{source}_msgs_per_s"] / 1e3 for r in pred],
                    style,
                    marker=marker,
                    ms=4,
                    fillstyle="none",
                    color=c,
                    lw=1.2,
                )
                err = [
                    (r["threads"], r[f"{source}_rel_error"])
                    for r in pred
                    if r[f"{source}_rel_error"] is not None
                ]
                if err:
                    bottom.plot(
                        [e[0] for e in err],
                        [100.0 * e[1] for e in err],
                        style,
                        marker=marker,
                        ms=4,
                        fillstyle="none",
                        color=c,
                        lw=1.0,
                    )
        work, conns = key
        top.set_title(f"work {work:g} µs, {conns} connections", fontsize=9)
        top.set_ylim(bottom=0)
        top.set_ylabel("throughput (k msgs/s)")
        top.grid(alpha=0.3)
        bottom.axhline(0.0, color="black", lw=0.6)
        bottom.set_ylabel("model − measured (%)")
        bottom.set_xlabel("threads")
        bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
        bottom.grid(alpha=0.3)
    if not keys:
        axes[0][0].text(0.5, 0.5, "no HSHA or LF points", ha="center", va="center")
        axes[1][0].set_visible(False)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colour_of[label], marker="o", ls="", label=label) for label in labels]
    handles.append(Line2D([], [], color="grey", marker="o", ls="", label="measured (95% CI)"))
    handles += [
        Line2D(
            [], [], color="grey", ls=style, marker=marker, fillstyle="none", label=f"model, {source} rates"
        )
        for source, style, marker in MODEL_STYLES
    ]
    legend_rows = math.ceil(len(handles) / 4)
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=7, frameon=False)
    fig.suptitle(f"{title}\nCTMC model vs measurement", fontsize=10)
    fig.tight_layout(rect=(0.0, 0.03 * legend_rows + 0.02, 1.0, 1.0))
    save_figure(fig, path)


def write_validation(spec: Spec, out_dir: Path, method: str = "ssa", url: str | None = None) -> list[Path]:
    """``validation.csv`` (per point), ``validation_summary.csv`` (per pattern/notifier/source) and
    ``validation.png`` for ``spec``, from the database."""
    from demuxlab.report import write_csv

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = validation_rows(spec, method, url)
    table, summary, figure = (
        out_dir / "validation.csv",
        out_dir / "validation_summary.csv",
        out_dir / "validation.png",
    )
    write_csv(rows, table, VALIDATION_FIELDS)
    write_csv(summarize_errors(rows), summary, SUMMARY_FIELDS)
    plot_validation(rows, f"{spec.name} ({spec.reproduces})", figure)
    return [table, summary, figure]

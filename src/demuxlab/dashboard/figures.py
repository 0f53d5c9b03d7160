"""Figure and table builders: plain functions of small frames (what :mod:`demuxlab.dashboard.data`
returns), so that tests call them directly and the page callbacks stay thin."""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from demuxlab.dashboard import style
from demuxlab.dashboard.data import AXES, PARAMS
from demuxlab.dashboard.plot import Fig, FigureDict, bar, scatter

PARAM_LABEL: dict[str, str] = {"pattern": "pattern", "notifier": "notifier", **AXES}
SOURCES: tuple[str, ...] = ("paper", "calibration")
METHOD_PREFERENCE: tuple[str, ...] = ("ssa", "exact", "fluid")


def empty_figure(message: str, height: int = 320) -> FigureDict:
    """A blank figure that says why it is blank (no data, nothing chosen)."""
    fig = Fig()
    fig.update_layout(**style.base_layout(height=height))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=message, showarrow=False, font={"size": 15, "color": style.MUTED})
    return fig.to_dict()


# -- statistics -----------------------------------------------------------------------------------------


def with_ci(points: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Adds ``half`` (the CI half-width of the mean, Student t over the ok runs; NaN with fewer than two),
    ``lo``/``hi`` and ``half_rel`` to a frame with ``mean``, ``sd`` and ``n_ok``."""
    from scipy.stats import t as student

    out = points.copy()
    n = pd.to_numeric(out["n_ok"], errors="coerce").fillna(0).astype(float).to_numpy()
    sd = pd.to_numeric(out["sd"], errors="coerce").astype(float).to_numpy()
    mean = pd.to_numeric(out["mean"], errors="coerce").astype(float).to_numpy()
    half = np.full(len(out), np.nan)
    ok = n >= 2
    if ok.any():
        q = student.ppf(0.5 + confidence / 2, n[ok] - 1)
        half[ok] = q * sd[ok] / np.sqrt(n[ok])
    out["mean"] = mean
    out["half"] = half
    out["lo"] = mean - half
    out["hi"] = mean + half
    with np.errstate(divide="ignore", invalid="ignore"):
        out["half_rel"] = np.where(mean > 0, half / mean, np.nan)
    return out


def pick_predictions(preds: pd.DataFrame) -> pd.DataFrame:
    """One prediction per point and source: SSA where there is one, else exact, else fluid."""
    if preds.empty:
        return preds
    rank = {m: i for i, m in enumerate(METHOD_PREFERENCE)}
    p = preds.assign(_rank=preds["method"].map(rank).fillna(len(rank)))
    key = ["point_id", "source", *(["hardware_class"] if "hardware_class" in p else [])]
    p = p.sort_values([*key[:2], "_rank"]).drop_duplicates(key)
    return p.drop(columns="_rank")


def _cls(value: Any) -> str | None:
    """A hardware class as a key: None for local runs (NULL/NaN in a frame)."""
    return value if isinstance(value, str) and value else None


def _label(row: Any, keys: Sequence[str]) -> str:
    parts = []
    for k in keys:
        v = row[k]
        if k == "pattern" or k == "notifier":
            parts.append(str(v))
        elif k == "threads":
            parts.append(f"{v} thr")
        elif k == "work_us":
            parts.append(f"{_num(v)} µs")
        elif k == "connections":
            parts.append(f"{v} conn")
        elif k == "msg_size":
            parts.append(f"{v} B")
        elif k in ("hardware_class", "a_hardware_class", "b_hardware_class"):
            side = "" if k == "hardware_class" else f"{k[0].upper()} "
            parts.append(f"{side}class {v}" if _cls(v) else f"{side}local")
        else:
            parts.append(f"{k}={v}")
    return " · ".join(parts)


def _num(v: Any) -> str:
    f = float(v)
    return str(int(f)) if f.is_integer() else f"{f:g}"


def series(frame: pd.DataFrame, keys: Sequence[str], x: str) -> list[list[dict[str, Any]]]:
    """The rows of ``frame`` grouped by ``keys`` (in sorted key order), each group sorted by ``x``: plain
    Python over records, much cheaper than pandas groupby for the few hundred rows a figure has."""
    records: list[dict[str, Any]] = frame.to_dict("records")  # type: ignore[assignment]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in records:
        groups.setdefault(tuple(rec[k] for k in keys), []).append(rec)
    ordered = sorted(groups, key=lambda k: tuple(str(v) for v in k))
    return [sorted(groups[k], key=lambda r: float(r[x])) for k in ordered]


def varying(frame: pd.DataFrame, keys: Iterable[str]) -> list[str]:
    """The keys whose column takes more than one value in ``frame``."""
    return [k for k in keys if k in frame and frame[k].nunique(dropna=False) > 1]


# -- sweep -----------------------------------------------------------------------------------------------


def sweep_figure(
    points: pd.DataFrame,
    repeats: pd.DataFrame | None = None,
    preds: pd.DataFrame | None = None,
    *,
    x: str = "threads",
    colour: str = "pattern",
    facet: str | None = "notifier",
    sources: Sequence[str] = SOURCES,
    residuals: bool = True,
    title: str = "",
) -> FigureDict:
    """Throughput vs ``x``: mean with its 95 % CI band per series, every repeat as a faint marker, the
    model's predictions (per source) as lines with the SSA CI as error bars, and a residual panel
    (model − measured, % of measured) under it. One column per value of ``facet``.

    Grouping is done in plain Python over records (a sweep has hundreds of points, not millions): per-group
    pandas operations would cost more than the rest of the request."""
    if points.empty or points["mean"].notna().sum() == 0:
        return empty_figure("no ok runs to plot for this selection")
    pts = with_ci(points)
    facet = facet if facet and facet != x and facet in pts else None
    facet_values = sorted(pts[facet].unique().tolist()) if facet else [None]
    picked = pick_predictions(preds) if preds is not None and not preds.empty else pd.DataFrame()
    # Keyed by (point, source, hardware class): calibrated predictions belong to their class's rows only.
    pred_by: dict[tuple[int, str, str | None], tuple[float, float]] = {}
    if not picked.empty:
        pcls = picked["hardware_class"] if "hardware_class" in picked else [None] * len(picked)
        for pid, src, val, ci, cls in zip(
            picked["point_id"],
            picked["source"],
            picked["predicted"],
            picked["ci_halfwidth_rel"],
            pcls,
            strict=True,
        ):
            key = (int(pid), str(src), _cls(cls) if src == "calibration" else None)
            pred_by[key] = (float(val), float(ci) if ci is not None and ci == ci else 0.0)
    have_sources = [src for src in sources if any(k[1] == src for k in pred_by)]
    show_res = residuals and bool(have_sources)
    reps_by: dict[tuple[int, str | None], list[tuple[float, str]]] = {}
    if repeats is not None and not repeats.empty:
        rcls = repeats["hardware_class"] if "hardware_class" in repeats else [None] * len(repeats)
        for pid, thr, rid, cls in zip(
            repeats["point_id"], repeats["throughput_msgs_per_s"], repeats["run_id"], rcls, strict=True
        ):
            reps_by.setdefault((int(pid), _cls(cls)), []).append((float(thr), str(rid)))
    rows = 2 if show_res else 1
    fig = Fig(
        rows=rows,
        cols=len(facet_values),
        shared_xaxes=True,
        shared_yaxes=True,
        row_heights=[0.72, 0.28] if show_res else None,
        vertical_spacing=0.06,
        horizontal_spacing=0.04,
        subplot_titles=[f"{PARAM_LABEL.get(facet, facet)}: {_fmt(v)}" for v in facet_values]
        if facet
        else None,
    )
    series_keys = [k for k in PARAMS if k not in (x, facet)]
    if "hardware_class" in pts and facet != "hardware_class":
        pts = pts.assign(hardware_class=[_cls(c) or "" for c in pts["hardware_class"]])
        series_keys.append("hardware_class")  # one line per class: never joined across classes
    label_keys = [k for k in series_keys if k in varying(pts, series_keys)]
    colour_order = sorted(pts[colour].unique().tolist()) if colour in pts else []
    records: list[dict[str, Any]] = pts.to_dict("records")  # type: ignore[assignment]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in records:
        fkey = rec[facet] if facet else None
        groups.setdefault((fkey, *(rec[k] for k in series_keys)), []).append(rec)
    shown: set[str] = set()
    for col, fv in enumerate(facet_values, start=1):
        keys = sorted((k for k in groups if k[0] == fv), key=lambda k: tuple(str(v) for v in k[1:]))
        for key in keys:
            grp = sorted(groups[key], key=lambda r: float(r[x]))
            first = grp[0]
            name = _label(first, label_keys) or _label(first, [colour])
            c = style.colour_for(first[colour], colour_order)
            dash = style.dash_for(first["notifier"]) if colour != "notifier" else "solid"
            symbol = style.symbol_for(first["notifier"])
            legend = name not in shown
            shown.add(name)
            xs = [float(r[x]) for r in grp]
            band = [r for r in grp if r["half"] == r["half"]]
            if band:
                bx = [float(r[x]) for r in band]
                fig.add_trace(
                    scatter(
                        x=bx + bx[::-1],
                        y=[float(r["hi"]) for r in band] + [float(r["lo"]) for r in band][::-1],
                        fill="toself",
                        fillcolor=style.rgba(c, 0.16),
                        line={"width": 0},
                        hoverinfo="skip",
                        showlegend=False,
                        legendgroup=name,
                        name=f"{name} 95% CI",
                    ),
                    row=1,
                    col=col,
                )
            fig.add_trace(
                scatter(
                    x=xs,
                    y=[_f(r["mean"]) for r in grp],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=legend,
                    line={"color": c, "dash": dash, "width": 2},
                    marker={"symbol": symbol, "size": 7, "color": c},
                    customdata=[[int(r["n_ok"]), _f(r["half"]) or 0.0, int(r["n_failed"])] for r in grp],
                    hovertemplate=(
                        f"{name}<br>{PARAM_LABEL[x]} %{{x}}<br>"
                        "mean %{y:,.0f} msg/s ± %{customdata[1]:,.0f}"
                        "<br>runs ok %{customdata[0]}, failed %{customdata[2]}<extra></extra>"
                    ),
                ),
                row=1,
                col=col,
            )
            rx, ry, rid = [], [], []
            for r in grp:
                for thr, run in reps_by.get((int(r["point_id"]), _cls(r.get("hardware_class"))), []):
                    rx.append(float(r[x]))
                    ry.append(thr)
                    rid.append(run)
            if rx:
                fig.add_trace(
                    scatter(
                        x=rx,
                        y=ry,
                        mode="markers",
                        name=f"{name} repeats",
                        legendgroup=name,
                        showlegend=False,
                        marker={"color": style.rgba(c, 0.35), "size": 6, "symbol": symbol},
                        customdata=rid,
                        hovertemplate="run %{customdata}<br>%{y:,.0f} msg/s<extra>repeat</extra>",
                    ),
                    row=1,
                    col=col,
                )
            for source in have_sources:
                pkey = [
                    (
                        r,
                        (
                            int(r["point_id"]),
                            source,
                            _cls(r.get("hardware_class")) if source == "calibration" else None,
                        ),
                    )
                    for r in grp
                ]
                pr = [(r, pred_by[k]) for r, k in pkey if k in pred_by]
                if not pr:
                    continue
                sname = f"{name} · {style.SOURCE_LABEL[source]}"
                err = [val * ci for _, (val, ci) in pr]
                px = [float(r[x]) for r, _ in pr]
                fig.add_trace(
                    scatter(
                        x=px,
                        y=[val for _, (val, _ci) in pr],
                        mode="lines",
                        name=sname,
                        legendgroup=sname,
                        showlegend=sname not in shown,
                        line={"color": c, "dash": style.SOURCE_DASH[source], "width": 1.5},
                        error_y={"type": "data", "array": err, "visible": any(e > 0 for e in err)},
                        hovertemplate=f"{sname}<br>%{{y:,.0f}} msg/s<extra>{source}</extra>",
                    ),
                    row=1,
                    col=col,
                )
                shown.add(sname)
                if show_res:
                    resid = [
                        (val - float(r["mean"])) / float(r["mean"]) * 100.0 if _f(r["mean"]) else None
                        for r, (val, _ci) in pr
                    ]
                    fig.add_trace(
                        scatter(
                            x=px,
                            y=resid,
                            mode="lines+markers",
                            name=f"{sname} residual",
                            legendgroup=sname,
                            showlegend=False,
                            line={"color": c, "dash": style.SOURCE_DASH[source], "width": 1},
                            marker={"symbol": symbol, "size": 5, "color": c},
                            hovertemplate=f"{sname}<br>model − measured %{{y:+.1f}} %<extra></extra>",
                        ),
                        row=2,
                        col=col,
                    )
    fig.update_layout(
        **style.base_layout(
            title={"text": title or "Throughput", "x": 0.01},
            height=560 if show_res else 440,
            hovermode="closest",
        )
    )
    for col in range(1, len(facet_values) + 1):
        fig.update_xaxes(title_text=PARAM_LABEL.get(x, x), row=rows, col=col)
    fig.update_yaxes(title_text="throughput (msg/s)", row=1, col=1, rangemode="tozero")
    if show_res:
        fig.update_yaxes(title_text="model − measured (%)", row=2, col=1, zeroline=True, zerolinewidth=1)
    return fig.to_dict()


def _f(v: Any) -> float | None:
    """A float for JSON, None for missing (NaN/None)."""
    if v is None:
        return None
    f = float(v)
    return None if f != f else f


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return _num(v)
    return str(v)


def sweep_table(points: pd.DataFrame, preds: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per point (and hardware class, where the points have one: a row each, never averaged): parameters,
    runs, mean and its 95 % CI, and each source's prediction and error (%); a calibrated prediction is
    matched to its own class's row."""
    if points.empty:
        return pd.DataFrame(columns=[*PARAMS, "runs_ok", "runs_failed", "mean_msgs_per_s", "ci95_msgs_per_s"])
    pts = with_ci(points)
    out = pts[["point_id", *PARAMS]].copy()
    classed = "hardware_class" in pts
    if classed:
        out["hardware_class"] = [_cls(c) or "" for c in pts["hardware_class"]]
    out["runs_ok"] = pts["n_ok"].astype(int)
    out["runs_failed"] = pts["n_failed"].astype(int)
    out["mean_msgs_per_s"] = pts["mean"].round(1)
    out["ci95_msgs_per_s"] = pts["half"].round(1)
    picked = pick_predictions(preds) if preds is not None and not preds.empty else pd.DataFrame()
    for source in SOURCES:
        if picked.empty:
            break
        pr = picked[picked["source"] == source]
        on = ["point_id"]
        if classed and source == "calibration":
            cls = pr["hardware_class"] if "hardware_class" in pr else [None] * len(pr)
            pr = pr.assign(hardware_class=[_cls(c) or "" for c in cls])
            on.append("hardware_class")
        pr = pr[[*on, "predicted", "ci_halfwidth_rel", "method"]]
        if pr.empty:
            continue
        pr = pr.rename(
            columns={
                "predicted": f"{source}_msgs_per_s",
                "ci_halfwidth_rel": f"{source}_ci_rel",
                "method": f"{source}_method",
            }
        )
        out = out.merge(pr, on=on, how="left")
        out[f"{source}_msgs_per_s"] = out[f"{source}_msgs_per_s"].round(1)
        out[f"{source}_error_pct"] = (
            (out[f"{source}_msgs_per_s"] - out["mean_msgs_per_s"]) / out["mean_msgs_per_s"] * 100
        ).round(2)
    return out.drop(columns="point_id")


def error_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per pattern × notifier (× hardware class, where the table has one) × source: points, mean and max
    |error| (%), from :func:`sweep_table`."""
    rows = []
    keys = ["pattern", "notifier", *(["hardware_class"] if "hardware_class" in table else [])]
    for source in SOURCES:
        col = f"{source}_error_pct"
        if col not in table:
            continue
        for key, grp in table.dropna(subset=[col]).groupby(keys):
            err = grp[col].abs()
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "source": source,
                    "points": len(grp),
                    "mean_abs_error_pct": round(float(err.mean()), 2),
                    "max_abs_error_pct": round(float(err.max()), 2),
                }
            )
    return pd.DataFrame(rows, columns=[*keys, "source", "points", "mean_abs_error_pct", "max_abs_error_pct"])


def sweep_pdf(
    points: pd.DataFrame,
    repeats: pd.DataFrame | None,
    preds: pd.DataFrame | None,
    *,
    x: str = "threads",
    colour: str = "pattern",
    facet: str | None = "notifier",
    sources: Sequence[str] = SOURCES,
    title: str = "",
) -> bytes:
    """The sweep as a vector PDF for papers (matplotlib, same data, palette and line styles)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = with_ci(points)
    facet = facet if facet and facet != x and facet in pts else None
    facet_values = sorted(pts[facet].unique().tolist()) if facet else [None]
    fig, axes = plt.subplots(
        1, len(facet_values), figsize=(4.2 * len(facet_values), 3.6), sharey=True, squeeze=False
    )
    picked = pick_predictions(preds) if preds is not None and not preds.empty else pd.DataFrame()
    series_keys = [k for k in PARAMS if k not in (x, facet)]
    label_keys = varying(pts, series_keys)
    colour_order = sorted(pts[colour].unique().tolist())
    mpl_dash = {
        "solid": "-",
        "dash": "--",
        "dot": ":",
        "dashdot": "-.",
        "longdash": "--",
        "longdashdot": "-.",
    }
    for ax, fv in zip(axes[0], facet_values, strict=True):
        sub_f = pts if facet is None else pts[pts[facet] == fv]
        for _, grp in sub_f.groupby(series_keys, sort=True, dropna=False):
            grp = grp.sort_values(x)
            first = grp.iloc[0]
            c = style.colour_for(first[colour], colour_order)
            name = _label(first, label_keys) or _label(first, [colour])
            ls = mpl_dash[style.dash_for(first["notifier"])] if colour != "notifier" else "-"
            xs = grp[x].astype(float).to_numpy()
            ax.plot(xs, grp["mean"], ls, color=c, marker="o", ms=3, lw=1.5, label=name)
            band = grp.dropna(subset=["half"])
            if not band.empty:
                ax.fill_between(band[x].astype(float), band["lo"], band["hi"], color=c, alpha=0.18, lw=0)
            if repeats is not None and not repeats.empty:
                rep = repeats[repeats["point_id"].isin(grp["point_id"])].merge(
                    grp[["point_id", x]], on="point_id"
                )
                ax.scatter(rep[x].astype(float), rep["throughput_msgs_per_s"], color=c, alpha=0.3, s=6)
            for source in sources if not picked.empty else ():
                pr = picked[(picked["source"] == source) & picked["point_id"].isin(grp["point_id"])]
                if pr.empty:
                    continue
                pr = pr.merge(grp[["point_id", x]], on="point_id").sort_values(x)
                ax.plot(
                    pr[x].astype(float),
                    pr["predicted"],
                    mpl_dash[style.SOURCE_DASH[source]],
                    color=c,
                    lw=1,
                    label=f"{name}, {style.SOURCE_LABEL[source]}",
                )
        ax.set_xlabel(PARAM_LABEL.get(x, x))
        if facet:
            ax.set_title(f"{PARAM_LABEL.get(facet, facet)}: {_fmt(fv)}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("throughput (msg/s)")
    axes[0][0].set_ylim(bottom=0)
    axes[0][-1].legend(fontsize=6, loc="best")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="pdf")
    plt.close(fig)
    return buf.getvalue()


# -- operations -----------------------------------------------------------------------------------------

OPS_ORDER: tuple[str, ...] = ("notify", "queue_put", "queue_get", "lock", "rearm", "recv", "send", "accept")
OP_LABEL: dict[str, str] = {
    "notify": "obtain events (notifier call)",
    "queue_put": "queue put",
    "queue_get": "queue get",
    "lock": "lock wait",
    "rearm": "re-arm",
    "recv": "recv",
    "send": "send",
}


def operations_figure(ops: pd.DataFrame, *, x: str = "threads", statistic: str = "mean_us") -> FigureDict:
    """Per-operation service time vs ``x`` (one panel per operation; colour = pattern, dash = notifier)."""
    if ops.empty:
        return empty_figure("no instrumented runs in this experiment (instrument: true, or calibration runs)")
    present = [op for op in OPS_ORDER if op in set(ops["op"])] + sorted(set(ops["op"]) - set(OPS_ORDER))
    cols = min(3, len(present))
    nrows = math.ceil(len(present) / cols)
    fig = Fig(
        rows=nrows,
        cols=cols,
        subplot_titles=[OP_LABEL.get(str(op), str(op)) for op in present],
        vertical_spacing=0.12,
        horizontal_spacing=0.07,
    )
    keys = [k for k in PARAMS if k != x]
    label_keys = varying(ops, keys) or ["pattern", "notifier"]
    by_op: dict[str, list[list[dict[str, Any]]]] = {}
    for grp in series(ops, ["op", *keys], x):
        by_op.setdefault(str(grp[0]["op"]), []).append(grp)
    shown: set[str] = set()
    for i, op in enumerate(present):
        r, c = i // cols + 1, i % cols + 1
        for grp in by_op.get(op, []):
            first = grp[0]
            name = _label(first, label_keys)
            colour = style.colour_for(first["pattern"])
            fig.add_trace(
                scatter(
                    x=[float(g[x]) for g in grp],
                    y=[_f(g[statistic]) for g in grp],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    line={"color": colour, "dash": style.dash_for(first["notifier"])},
                    marker={"symbol": style.symbol_for(first["notifier"]), "color": colour},
                    customdata=[[int(g["calls"]), int(g["runs"])] for g in grp],
                    hovertemplate=f"{name}<br>{op}: %{{y:.3f}} µs<br>calls %{{customdata[0]:,}}, "
                    "runs %{customdata[1]}<extra></extra>",
                ),
                row=r,
                col=c,
            )
            shown.add(name)
        fig.update_xaxes(title_text=PARAM_LABEL.get(x, x), row=r, col=c)
        fig.update_yaxes(title_text="µs per call" if c == 1 else None, row=r, col=c, rangemode="tozero")
    fig.update_layout(
        **style.base_layout(title={"text": "Service time per operation", "x": 0.01}, height=300 * nrows)
    )
    return fig.to_dict()


def events_figure(ev: pd.DataFrame, *, x: str = "threads") -> FigureDict:
    """Descriptors returned per notifier call vs ``x``."""
    if ev.empty:
        return empty_figure("no notifier calls by events recorded (instrumented runs only)")
    fig = Fig()
    keys = [k for k in PARAMS if k != x]
    label_keys = varying(ev, keys) or ["pattern", "notifier"]
    for grp in series(ev, keys, x):
        first = grp[0]
        colour = style.colour_for(first["pattern"])
        fig.add_trace(
            scatter(
                x=[float(g[x]) for g in grp],
                y=[_f(g["events_per_call"]) for g in grp],
                mode="lines+markers",
                name=_label(first, label_keys),
                line={"color": colour, "dash": style.dash_for(first["notifier"])},
                marker={"symbol": style.symbol_for(first["notifier"]), "color": colour},
            )
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": "Events per notifier call", "x": 0.01},
            height=360,
            xaxis_title=PARAM_LABEL.get(x, x),
            yaxis_title="descriptors per call",
        )
    )
    return fig.to_dict()


# -- one run --------------------------------------------------------------------------------------------


def run_timeline_figure(
    samples: pd.DataFrame,
    *,
    warmup_s: float,
    measure_s: float,
    cooldown_s: float,
    throughput: float | None = None,
    stationary: bool | None = None,
    drift_rel: float | None = None,
    trimmed_seconds: int = 0,
) -> FigureDict:
    """Per-second throughput over the run's timeline: warm-up and cool-down shaded, the measure phase
    marked (samples cover it, one per whole second), the run's throughput as a line, and the
    stationarity verdict in the title."""
    verdict = (
        "stationarity: unknown"
        if stationary is None
        else ("stationary" if stationary else "NOT stationary")
        + (f" (drift {drift_rel * 100:+.1f} %)" if drift_rel is not None else "")
    )
    fig = Fig()
    total = warmup_s + measure_s + cooldown_s
    fig.add_vrect(x0=0, x1=warmup_s, fillcolor=style.rgba("#999999", 0.18), line_width=0, layer="below")
    fig.add_vrect(
        x0=warmup_s,
        x1=warmup_s + measure_s,
        fillcolor=style.rgba(style.OKABE_ITO[0], 0.07),
        line_width=0,
        layer="below",
        annotation_text="measure",
        annotation_position="top left",
    )
    if cooldown_s > 0:
        fig.add_vrect(x0=warmup_s + measure_s, x1=total, fillcolor=style.rgba("#999999", 0.18), line_width=0)
    if warmup_s > 0:
        fig.add_annotation(
            x=warmup_s / 2, y=1, yref="paper", text="warm-up", showarrow=False, yanchor="bottom"
        )
    if not samples.empty:
        xs = (warmup_s + samples["second"].astype(float) + 0.5).tolist()
        colours = [
            style.rgba(style.MUTED, 0.6) if s < trimmed_seconds else style.OKABE_ITO[0]
            for s in samples["second"]
        ]
        fig.add_trace(
            scatter(
                x=xs,
                y=samples["throughput_msgs_per_s"].tolist(),
                mode="lines+markers",
                name="per second",
                line={"color": style.OKABE_ITO[0], "width": 1.5},
                marker={"color": colours, "size": 6},
                customdata=samples["second"].tolist(),
                hovertemplate="second %{customdata} of the measure phase<br>%{y:,.0f} msg/s<extra></extra>",
            )
        )
    if throughput is not None:
        fig.add_hline(
            y=throughput,
            line={"color": style.OKABE_ITO[1], "dash": "dash"},
            annotation_text=f"run throughput {throughput:,.0f} msg/s",
            annotation_position="bottom right",
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": f"Per-second throughput — {verdict}", "x": 0.01},
            height=360,
            xaxis_title="time since start (s)",
            yaxis_title="throughput (msg/s)",
            showlegend=False,
        )
    )
    fig.update_xaxes(range=[0, max(total, 1)])
    fig.update_yaxes(rangemode="tozero")
    return fig.to_dict()


LATENCY_KEYS: tuple[str, ...] = ("p50", "p90", "p99", "p999", "max")


def latency_figure(latency: Mapping[str, Any] | None) -> FigureDict:
    if not latency:
        return empty_figure("no latency percentiles (failed run or open-loop client without them)", 300)
    keys = [k for k in LATENCY_KEYS if latency.get(k) is not None]
    fig = Fig()
    fig.add_trace(
        bar(
            x=keys,
            y=[float(latency[k]) for k in keys],
            marker={"color": [style.OKABE_ITO[i] for i in range(len(keys))]},
            text=[f"{float(latency[k]):,.1f}" for k in keys],
            textposition="outside",
        )
    )
    if latency.get("mean") is not None:
        fig.add_hline(y=float(latency["mean"]), line_dash="dot", annotation_text=f"mean {latency['mean']} µs")
    fig.update_layout(
        **style.base_layout(
            title={"text": "Latency percentiles", "x": 0.01},
            height=300,
            yaxis_title="µs (log)",
            yaxis_type="log",
        )
    )
    return fig.to_dict()


def topology_figure(
    hosts: Sequence[tuple[str, Mapping[str, Any] | None]],
    pinning: Mapping[str, Any] | None = None,
    threads_detail: Sequence[Mapping[str, Any]] | None = None,
    *,
    same_host: bool = False,
    per_row: int = 16,
) -> FigureDict:
    """Each host's CPUs grouped by NUMA node (a square per CPU, labelled with its number and core); with a
    pinning plan, which CPUs the server (and which of its threads) and the client were given."""
    panels = [(label, facts) for label, facts in hosts if facts]
    if not panels:
        return empty_figure("no topology facts for this host", 260)
    fig = Fig(rows=1, cols=len(panels), subplot_titles=[label for label, _ in panels])
    pinning = pinning or {}
    server_cpus = set(pinning.get("server_cpus") or [])
    client_cpus = set(pinning.get("client_cpus") or [])
    roles_by_cpu: dict[int, list[str]] = {}
    for t in threads_detail or []:
        if t.get("cpu") is not None:
            roles_by_cpu.setdefault(int(t["cpu"]), []).append(
                f"T{t.get('index')} {t.get('role', '')}".strip()
            )
    legend_done: set[str] = set()
    max_rows = 1
    for col, (label, facts) in enumerate(panels, start=1):
        cpus = {int(c["cpu"]): c for c in facts.get("cpus") or [] if c.get("cpu") is not None}
        nodes = facts.get("numa_nodes") or [{"node": 0, "cpus": sorted(cpus)}]
        is_server = label.startswith("server") or same_host
        is_client = label.startswith("client") or same_host
        row = 0
        groups: dict[str, dict[str, list[Any]]] = {}
        for node in sorted(nodes, key=lambda n: int(n.get("node", 0))):
            node_cpus = sorted(int(c) for c in node.get("cpus") or [])
            fig.add_annotation(
                x=-0.9,
                y=-row,
                text=f"node {node.get('node')}",
                showarrow=False,
                xanchor="right",
                row=1,
                col=col,
                font={"size": 11, "color": style.MUTED},
            )
            for i, cpu in enumerate(node_cpus):
                r = row + i // per_row
                if is_server and cpu in server_cpus and is_client and cpu in client_cpus:
                    kind = "server + client"
                elif is_server and cpu in server_cpus:
                    kind = "server"
                elif is_client and cpu in client_cpus:
                    kind = "client"
                else:
                    kind = "unused"
                info = cpus.get(cpu, {})
                who = roles_by_cpu.get(cpu, []) if is_server and cpu in server_cpus else []
                g = groups.setdefault(kind, {"x": [], "y": [], "text": [], "hover": []})
                g["x"].append(i % per_row)
                g["y"].append(-r)
                g["text"].append(str(cpu))
                g["hover"].append(
                    f"cpu {cpu} · core {info.get('core')} · socket {info.get('socket')}"
                    + f" · node {node.get('node')}"
                    + (f"<br>{kind}" if kind != "unused" else "")
                    + ("<br>" + "<br>".join(who) if who else "")
                )
            row += max(1, math.ceil(len(node_cpus) / per_row)) + 0
            row += 0
        max_rows = max(max_rows, row)
        palette = {
            "server": style.OKABE_ITO[0],
            "client": style.OKABE_ITO[1],
            "server + client": style.OKABE_ITO[3],
            "unused": "#DDDDDD",
        }
        for kind, g in groups.items():
            fig.add_trace(
                scatter(
                    x=g["x"],
                    y=g["y"],
                    mode="markers+text",
                    text=g["text"],
                    textfont={"color": "#000" if kind == "unused" else "#fff", "size": 10},
                    hovertext=g["hover"],
                    hoverinfo="text",
                    marker={"symbol": "square", "size": 26, "color": palette[kind]},
                    name=kind,
                    legendgroup=kind,
                    showlegend=kind not in legend_done,
                ),
                row=1,
                col=col,
            )
            legend_done.add(kind)
        fig.update_xaxes(visible=False, range=[-2.2, per_row], row=1, col=col)
        fig.update_yaxes(visible=False, row=1, col=col)
    fig.update_layout(
        **style.base_layout(
            title={"text": "Pinning over the topology" if pinning else "Topology", "x": 0.01},
            height=140 + 36 * max_rows,
            legend={"orientation": "h", "y": -0.05},
        )
    )
    return fig.to_dict()


# -- model ----------------------------------------------------------------------------------------------


def rates_table(calibrations: pd.DataFrame, paper: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Per calibration: each rate as mean time per operation (µs = 1/rate), next to the paper's, with the
    ratio and where the value came from; ``paper`` is {pattern: {rate: per µs}}."""
    from demuxlab.ctmc.rates import RATE_FIELDS

    rows = []
    for _, c in calibrations.iterrows():
        rates = c["rates"] or {}
        source = rates.get("source") or {}
        for k in RATE_FIELDS:
            if k not in rates:
                continue
            cal_us = 1.0 / float(rates[k]) if float(rates[k]) > 0 else math.nan
            ref = paper.get(str(c["pattern"]), {}).get(k)
            paper_us = 1.0 / ref if ref else math.nan
            rows.append(
                {
                    "calibration": int(c["id"]),
                    "pattern": c["pattern"],
                    "notifier": c["notifier"],
                    "rate": k,
                    "calibrated_us": round(cal_us, 4),
                    "paper_us": round(paper_us, 4),
                    "ratio": round(cal_us / paper_us, 3) if paper_us == paper_us and paper_us > 0 else None,
                    "from": source.get(k, ""),
                }
            )
    return pd.DataFrame(
        rows,
        columns=["calibration", "pattern", "notifier", "rate", "calibrated_us", "paper_us", "ratio", "from"],
    )


def rates_figure(table: pd.DataFrame) -> FigureDict:
    """Calibrated time per operation vs the paper's (log scale), one group per rate."""
    if table.empty:
        return empty_figure("no calibrations yet (HSHA/LF experiments with calibration runs make them)", 300)
    fig = Fig()
    first = table.drop_duplicates("rate")
    fig.add_trace(bar(x=first["rate"], y=first["paper_us"], name="paper", marker={"color": "#BBBBBB"}))
    for i, (cid, grp) in enumerate(table.groupby("calibration", sort=True)):
        head = grp.iloc[0]
        fig.add_trace(
            bar(
                x=grp["rate"],
                y=grp["calibrated_us"],
                name=f"#{cid} {head['pattern']}/{head['notifier']}",
                marker={"color": style.OKABE_ITO[i % len(style.OKABE_ITO)]},
            )
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": "Rates: time per operation, calibrated vs paper", "x": 0.01},
            barmode="group",
            height=340,
            yaxis_type="log",
            yaxis_title="µs per operation (1/rate)",
        )
    )
    return fig.to_dict()


def whatif_figure(
    fluid: pd.DataFrame,
    ssa: pd.DataFrame | None = None,
    measured: pd.DataFrame | None = None,
    *,
    title: str = "What if",
) -> FigureDict:
    """Predicted throughput vs threads: the fluid curve, SSA points with their CI, measured means."""
    if fluid.empty:
        return empty_figure("no prediction (pick a pattern HSHA or LF)")
    fig = Fig()
    fig.add_trace(
        scatter(
            x=fluid["threads"].tolist(),
            y=fluid["throughput_msgs_per_s"].tolist(),
            mode="lines+markers",
            name="fluid",
            line={"color": style.OKABE_ITO[0]},
        )
    )
    if ssa is not None and not ssa.empty:
        fig.add_trace(
            scatter(
                x=ssa["threads"].tolist(),
                y=ssa["throughput_msgs_per_s"].tolist(),
                mode="markers",
                name="SSA (95 % CI)",
                marker={"color": style.OKABE_ITO[1], "size": 9, "symbol": "diamond"},
                error_y={
                    "type": "data",
                    "array": (ssa["throughput_msgs_per_s"] * ssa["ci_halfwidth_rel"].fillna(0)).tolist(),
                },
            )
        )
    if measured is not None and not measured.empty:
        fig.add_trace(
            scatter(
                x=measured["threads"].tolist(),
                y=measured["mean"].tolist(),
                mode="markers",
                name="measured mean",
                marker={
                    "color": style.OKABE_ITO[2],
                    "size": 9,
                    "symbol": "circle-open",
                    "line": {"width": 2},
                },
            )
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": title, "x": 0.01},
            height=380,
            xaxis_title="server threads",
            yaxis_title="throughput (msg/s)",
        )
    )
    fig.update_yaxes(rangemode="tozero")
    return fig.to_dict()


# -- compare --------------------------------------------------------------------------------------------


def compare_table(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Points present on both sides (same parameters): A and B mean ± 95 % CI, ratio B/A, CI overlap. A
    side whose runs have hardware classes keeps a row per class (``a_hardware_class``/``b_…``): classes
    are compared, never averaged."""
    cols = [*PARAMS, "a_mean", "a_ci95", "b_mean", "b_ci95", "ratio_b_over_a", "cis_overlap"]
    if a.empty or b.empty:
        return pd.DataFrame(columns=cols)
    ca, cb = with_ci(a), with_ci(b)
    classes: list[str] = []
    for side, frame in (("a", ca), ("b", cb)):
        if "hardware_class" in frame and any(_cls(c) for c in frame["hardware_class"]):
            frame[f"{side}_hardware_class"] = [_cls(c) or "" for c in frame["hardware_class"]]
            classes.append(f"{side}_hardware_class")
    cols[len(PARAMS) : len(PARAMS)] = classes
    m = ca[[*PARAMS, *(c for c in classes if c[0] == "a"), "mean", "half", "lo", "hi"]].merge(
        cb[[*PARAMS, *(c for c in classes if c[0] == "b"), "mean", "half", "lo", "hi"]],
        on=list(PARAMS),
        suffixes=("_a", "_b"),
    )
    m = m.dropna(subset=["mean_a", "mean_b"])
    out = m[[*PARAMS, *classes]].copy()
    out["a_mean"] = m["mean_a"].round(1)
    out["a_ci95"] = m["half_a"].round(1)
    out["b_mean"] = m["mean_b"].round(1)
    out["b_ci95"] = m["half_b"].round(1)
    out["ratio_b_over_a"] = (m["mean_b"] / m["mean_a"]).round(4)
    overlap = (m["lo_a"] <= m["hi_b"]) & (m["lo_b"] <= m["hi_a"])
    unknown = m["half_a"].isna() | m["half_b"].isna()
    out["cis_overlap"] = np.where(unknown, "n/a (<2 runs)", np.where(overlap, "yes", "no"))
    return out[cols].reset_index(drop=True)


def compare_figure(
    a: pd.DataFrame, b: pd.DataFrame, *, x: str = "threads", label_a: str = "A", label_b: str = "B"
) -> FigureDict:
    """A and B on the same axes (A solid, B dashed; colour = pattern × notifier series) with their CI
    bands, and the ratio B/A under them (marker filled where the CIs do not overlap)."""
    table = compare_table(a, b)
    if table.empty:
        return empty_figure("the two sides share no point with ok runs")
    fig = Fig(rows=2, cols=1, shared_xaxes=True, row_heights=[0.68, 0.32], vertical_spacing=0.06)
    keys = [k for k in PARAMS if k != x]
    keys += [k for k in ("a_hardware_class", "b_hardware_class") if k in table]  # a line per class
    label_keys = varying(table, keys) or ["pattern", "notifier"]
    groups = series(table, keys, x)
    order = sorted({_label(g[0], label_keys) for g in groups})
    for grp in groups:
        name = _label(grp[0], label_keys)
        c = style.OKABE_ITO[order.index(name) % len(style.OKABE_ITO)]
        xs = [float(g[x]) for g in grp]
        for side, dash, lab in (("a", "solid", label_a), ("b", "dash", label_b)):
            fig.add_trace(
                scatter(
                    x=xs,
                    y=[_f(g[f"{side}_mean"]) for g in grp],
                    mode="lines+markers",
                    name=f"{name} · {lab}",
                    line={"color": c, "dash": dash},
                    marker={"color": c, "symbol": "circle" if side == "a" else "diamond"},
                    error_y={"type": "data", "array": [_f(g[f"{side}_ci95"]) or 0.0 for g in grp]},
                ),
                row=1,
                col=1,
            )
        overlap = [str(g["cis_overlap"]) for g in grp]
        fig.add_trace(
            scatter(
                x=xs,
                y=[_f(g["ratio_b_over_a"]) for g in grp],
                mode="lines+markers",
                name=f"{name} · ratio",
                showlegend=False,
                line={"color": c},
                marker={
                    "color": [c if o == "no" else "white" for o in overlap],
                    "line": {"color": c, "width": 2},
                    "size": 9,
                },
                customdata=overlap,
                hovertemplate="B/A %{y:.3f}<br>CIs overlap: %{customdata}<extra></extra>",
            ),
            row=2,
            col=1,
        )
    fig.add_hline(y=1.0, line={"color": style.MUTED, "dash": "dot"}, row=2, col=1)
    fig.update_layout(**style.base_layout(title={"text": f"{label_b} vs {label_a}", "x": 0.01}, height=560))
    fig.update_yaxes(title_text="throughput (msg/s)", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text=f"{label_b} / {label_a}", row=2, col=1)
    fig.update_xaxes(title_text=PARAM_LABEL.get(x, x), row=2, col=1)
    return fig.to_dict()


def progress_figure(latest: pd.DataFrame) -> FigureDict:
    """The latest runs' throughputs in ingest order (failed runs as crosses at zero)."""
    if latest.empty:
        return empty_figure("no runs yet", 220)
    d = latest.sort_values("ingested_at")
    ok = d[d["status"] == "ok"]
    bad = d[d["status"] != "ok"]
    fig = Fig()
    fig.add_trace(
        scatter(
            x=ok["ingested_at"].tolist(),
            y=ok["throughput_msgs_per_s"].tolist(),
            mode="markers+lines",
            name="ok",
            marker={"color": style.OK},
            text=ok["point_key"].tolist(),
        )
    )
    if not bad.empty:
        fig.add_trace(
            scatter(
                x=bad["ingested_at"].tolist(),
                y=[0] * len(bad),
                mode="markers",
                name="failed",
                marker={"color": style.FAILED, "symbol": "x", "size": 10},
                text=bad["failure_reason"].tolist(),
            )
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": "Latest runs", "x": 0.01},
            height=240,
            margin={"l": 60, "r": 20, "t": 40, "b": 30},
            yaxis_title="msg/s",
        )
    )
    return fig.to_dict()


def humanize_seconds(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"

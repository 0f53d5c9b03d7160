"""``validation.png``: seed 001's Fig. 3 drawn from the validation table's rows (matplotlib, imported only
when a figure is drawn), in the marks every figure of demuxlab draws (:mod:`demuxlab.marks`, through
:mod:`demuxlab.report`'s static helpers): a colour per pattern, a marker per notifier, a dash per rates
source, the one interval rule."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from demuxlab import marks
from demuxlab.vocab import RATE_SOURCES, SOURCE_CALIBRATION, SOURCE_PAPER

# The widest spread, in threads, of one thread count's points across a panel's lines.
DODGE_SPAN = 0.36
#: How each source's model is drawn: its dash (:data:`demuxlab.marks.SOURCE_DASHES`), hollow markers.
SOURCE_ORDER: tuple[str, ...] = (SOURCE_CALIBRATION, SOURCE_PAPER)

Panels = dict[tuple[float, int], dict[str, list[Mapping[str, Any]]]]


def dodge(labels: Sequence[str]) -> dict[str, float]:
    """Each line's x offset in threads: the lines of a panel side by side around the thread count, so that
    equal values (one pattern's paper-rate lines are the same for every notifier) stay visible apart."""
    ordered = sorted(labels)
    return dict(zip(ordered, marks.dodge(len(ordered), DODGE_SPAN), strict=True))


def plot_validation(
    rows: Sequence[Mapping[str, Any]], title: str, path: Path, *, note: str | None = None
) -> None:
    """Seed 001 Fig. 3 (:func:`draw_validation`) saved to ``path``."""
    from demuxlab.report import save_figure

    save_figure(draw_validation(rows, title, note=note), path)


def _label(row: Mapping[str, Any]) -> str:
    label = f"{row['pattern']}/{row['notifier']}"
    if row.get("hardware_class"):  # classes are drawn apart, never joined by one line
        label += f" [{row['hardware_class']}]"
    return label


def panels_of(rows: Sequence[Mapping[str, Any]]) -> Panels:
    """The rows by panel (work, connections) and line (pattern/notifier [class])."""
    panels: Panels = defaultdict(lambda: defaultdict(list))
    for row in rows:
        panels[(row["work_us"], row["connections"])][_label(row)].append(row)
    return panels


def draw_validation(rows: Sequence[Mapping[str, Any]], title: str, *, note: str | None = None) -> Any:
    """Seed 001 Fig. 3: per workload, measured throughput (95 % CI) and the models' predictions against
    threads (top), and the relative error of each prediction (bottom). A colour per pattern, a marker per
    notifier, the source's dash for its model (:mod:`demuxlab.marks`). A panel's lines are drawn side by
    side (:func:`dodge`), each thread count's points within ±DODGE_SPAN/2 of it. ``note``: a line under the
    title (e.g. that the runs are not performance data)."""
    from demuxlab.staticplot import pyplot

    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    panels = panels_of(rows)
    keys = sorted(panels)
    cols = max(1, len(keys))
    fig, axes = plt.subplots(2, cols, figsize=(max(6.4, 5.0 * cols), 7.8), squeeze=False, sharex="col")
    notes: list[str] = []
    for col, key in enumerate(keys):
        top, bottom = axes[0][col], axes[1][col]
        cut = _draw_panel(top, bottom, panels[key])
        if cut and cut not in notes:
            notes.append(cut)
        work, conns = key
        top.set_title(f"work {work:g} µs, {conns} connections", fontsize=9)
        top.set_ylabel("throughput (k msg/s)")
        top.grid(alpha=0.3)
        bottom.axhline(0.0, color="black", lw=0.6)
        bottom.set_ylabel("model − measured (%)")
        bottom.set_xlabel("server threads")
        bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
        bottom.grid(alpha=0.3)
    if not keys:
        axes[0][0].text(0.5, 0.5, "no points", ha="center", va="center")
        axes[1][0].set_visible(False)
    head = f"{title}\nCTMC model vs measurement" + (f"\n{note}" if note else "")
    fig.suptitle(head, fontsize=10)
    _legend(fig, rows, notes, len(head.splitlines()))
    return fig


def _draw_panel(top: Any, bottom: Any, lines: Mapping[str, list[Mapping[str, Any]]]) -> str | None:
    """One workload's lines: measured points with their intervals, each source's model and its error."""
    from demuxlab.staticplot import draw_model, draw_series, throughput_axis

    offset = dodge(list(lines))
    means: list[float] = []
    highs: list[float] = []
    for label, pts in sorted(lines.items()):
        pts = sorted(pts, key=lambda r: r["threads"])
        first = pts[0]
        c = marks.pattern_colour(str(first["pattern"]))
        marker = marks.MPL_MARKER[marks.notifier_symbol(str(first["notifier"]))]
        dx = offset[label]
        meas = [r for r in pts if r["measured_msgs_per_s"] is not None]
        ivs = [
            marks.interval(
                r["measured_msgs_per_s"],
                r["measured_msgs_per_s"] * r["measured_ci_halfwidth_rel"]
                if r.get("measured_ci_halfwidth_rel") is not None
                else None,
                int(r.get("runs_ok") or (2 if r.get("measured_ci_halfwidth_rel") is not None else 1)),
            )
            for r in meas
        ]
        draw_series(
            top, [r["threads"] + dx for r in meas], ivs, colour=c, marker=marker, scale=1e3, line=False
        )
        means.extend(iv.mean for iv in ivs)
        highs.extend(iv.hi for iv in ivs)
        for source in SOURCE_ORDER:
            pred = [r for r in pts if r[f"{source}_msgs_per_s"] is not None]
            if not pred:
                continue
            x = [r["threads"] + dx for r in pred]
            draw_model(
                top,
                x,
                [r[f"{source}_msgs_per_s"] for r in pred],
                colour=c,
                source=source,
                label="",
                scale=1e3,
                marker=marker,
            )
            means.extend(r[f"{source}_msgs_per_s"] for r in pred)
            err = [
                (r["threads"] + dx, r[f"{source}_rel_error"])
                for r in pred
                if r[f"{source}_rel_error"] is not None
            ]
            if err:
                bottom.plot(
                    [e[0] for e in err],
                    [100.0 * e[1] for e in err],
                    linestyle=marks.mpl_dash(marks.SOURCE_DASHES[source]),
                    marker=marker,
                    ms=4,
                    fillstyle="none",
                    color=c,
                    lw=1.0,
                )
    return throughput_axis(top, means, highs, scale=1e3)


def _legend(fig: Any, rows: Sequence[Mapping[str, Any]], notes: Sequence[str], title_lines: int) -> None:
    """Every design (its colour and marker), then how measurements and each source's model are drawn."""
    from matplotlib.lines import Line2D

    designs = sorted({(str(r["pattern"]), str(r["notifier"]), _label(r)) for r in rows}, key=lambda d: d[2])
    handles = [
        Line2D(
            [],
            [],
            color=marks.pattern_colour(p),
            ls="",
            marker=marks.MPL_MARKER[marks.notifier_symbol(n)],
            label=label,
        )
        for p, n, label in designs
    ]
    handles.append(
        Line2D([], [], color="black", marker="o", ls="", label="measured (filled; 95 % CI from 2 runs)")
    )
    handles += [
        Line2D(
            [],
            [],
            color="black",
            ls=marks.mpl_dash(marks.SOURCE_DASHES[source]),
            marker="o",
            mfc="white",
            label=f"model, {source} rates (hollow)",
        )
        for source in RATE_SOURCES
    ]
    ncol = min(4, len(handles))
    rows_of_legend = -(-len(handles) // ncol) + len(notes)
    fig.legend(
        handles=handles,
        loc="lower center",
        ncol=ncol,
        fontsize=7,
        frameon=False,
        bbox_to_anchor=(0.5, 0.01 + 0.025 * len(notes)),
    )
    for i, note in enumerate(notes):
        fig.text(0.01, 0.008 + 0.025 * i, note, fontsize=7, color=marks.MUTED)
    fig.tight_layout(rect=(0.0, 0.03 * rows_of_legend + 0.02, 1.0, 1.0 - 0.025 * title_lines))

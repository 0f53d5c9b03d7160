"""The marks of :mod:`demuxlab.marks` drawn with matplotlib: the report's PNGs (``report``,
``validation.png``) and the dashboard's PDF draw every series, interval, model line and axis through these,
so the static figures look like the dashboard's (a colour per pattern, a dash and marker per notifier, the
one interval rule, a ring round an oversubscribed point); :func:`draw_throughput` is the report's
throughput-vs-threads figure. matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from demuxlab import marks


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (imported only when a figure is drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_series(
    ax: Any,
    xs: Sequence[float],
    intervals: Sequence[marks.Interval],
    *,
    colour: str,
    marker: str,
    dash: marks.Dash = (),
    label: str | None = None,
    over: Sequence[bool] = (),
    scale: float = 1.0,
    line: bool = True,
) -> None:
    """One series as every figure draws it (:mod:`demuxlab.marks`): a line through the means (``line``), a
    marker per point (open: one run, no interval), the 95 % interval as an error bar from 2 runs on
    (clipped at zero), and a ring where the point is oversubscribed; values divided by ``scale``."""
    means = [iv.mean / scale for iv in intervals]
    if line:
        ax.plot(xs, means, linestyle=marks.mpl_dash(dash), color=colour, lw=1.4)
    if label:  # the legend's entry: the series' line and marker together
        ax.plot(
            [],
            [],
            linestyle=marks.mpl_dash(dash) if line else "none",
            marker=marker,
            color=colour,
            label=label,
        )
    drawn = [i for i, iv in enumerate(intervals) if iv.drawn]
    if drawn:
        ax.errorbar(
            [xs[i] for i in drawn],
            [means[i] for i in drawn],
            yerr=[[intervals[i].minus / scale for i in drawn], [intervals[i].plus / scale for i in drawn]],
            fmt="none",
            ecolor=colour,
            capsize=2,
            lw=0.9,
        )
    for i, iv in enumerate(intervals):
        ax.plot([xs[i]], [means[i]], marker, color=colour, ms=4.5, mfc=colour if iv.drawn else "white", mew=1)
    for i, o in enumerate(over):
        if o:
            ax.plot([xs[i]], [means[i]], "o", ms=10, mfc="none", mec=OVERSUBSCRIBED, mew=1.3)


#: The ring round an oversubscribed point (the dashboard's too).
OVERSUBSCRIBED = marks.OVERSUBSCRIBED_COLOUR


def draw_model(
    ax: Any,
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    colour: str,
    source: str,
    label: str,
    scale: float = 1.0,
    marker: str = "o",
) -> None:
    """A model's line in its source's dash (no notifier has it), each prediction a hollow marker of the
    design's shape (a model never reads as a measurement, which is filled)."""
    ax.plot(
        xs,
        [y / scale for y in ys],
        linestyle=marks.mpl_dash(marks.SOURCE_DASHES[source]),
        color=colour,
        lw=1,
        marker=marker,
        ms=4.5,
        mfc="white",
        mew=1,
        label=label,
    )


def throughput_axis(
    ax: Any, means: Sequence[float], highs: Sequence[float], scale: float = 1.0
) -> str | None:
    """The throughput axis from zero to :func:`demuxlab.marks.axis_top` (never above twice the highest
    mean for an interval); the note naming the intervals it cuts, or None."""
    axis = marks.axis_top([m / scale for m in means], [h / scale for h in highs])
    ax.set_ylim(0, axis.top)
    return marks.cut_note(axis.cut, hover=False)


def legend_below(fig: Any, axes: Sequence[Any], *, title: str = "", notes: Sequence[str] = ()) -> None:
    """Every series of ``axes`` named once, in a legend under the panels, the notes under it."""
    handles: list[Any] = []
    labels: list[str] = []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels and not lab.startswith("_"):
                handles.append(h)
                labels.append(lab)
    ncol = min(3, max(1, len(labels)))
    rows = math.ceil(len(labels) / ncol) + len(notes)
    bottom = min(0.45, 0.05 + 0.035 * rows)
    if labels:
        fig.legend(
            handles,
            labels,
            loc="lower center",
            ncol=ncol,
            fontsize=6,
            frameon=False,
            bbox_to_anchor=(0.5, 0.02 + 0.03 * len(notes)),
        )
    for i, note in enumerate(notes):
        fig.text(0.01, 0.01 + 0.03 * i, note, fontsize=6, color=marks.MUTED)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, bottom, 1, 1))


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

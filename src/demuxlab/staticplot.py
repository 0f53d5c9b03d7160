"""The marks of :mod:`demuxlab.marks` drawn with matplotlib: the report's PNGs (``report``,
``validation.png``) and the dashboard's PDF draw every series, interval, model line and axis through these,
so the static figures look like the dashboard's (a colour per pattern, a dash and marker per notifier, the
one interval rule, a ring round an oversubscribed point). matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import math
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

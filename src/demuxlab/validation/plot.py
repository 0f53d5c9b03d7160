"""``validation.png``: seed 001's Fig. 3 drawn from the validation table's rows (matplotlib, imported only
when a figure is drawn)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from demuxlab.vocab import SOURCE_CALIBRATION, SOURCE_PAPER

# How the figure draws each rates source's model: line style and marker.
MODEL_STYLES: tuple[tuple[str, str, str], ...] = ((SOURCE_CALIBRATION, "-", "s"), (SOURCE_PAPER, "--", "^"))

# The widest spread, in threads, of one thread count's points across a panel's lines.
DODGE_SPAN = 0.36


def dodge(labels: Sequence[str]) -> dict[str, float]:
    """Each line's x offset in threads: the lines of a panel side by side around the thread count, so that
    equal values (one pattern's paper-rate lines are the same for every notifier) stay visible apart."""
    n = len(labels)
    step = DODGE_SPAN / (n - 1) if n > 1 else 0.0
    return {label: (i - (n - 1) / 2) * step for i, label in enumerate(sorted(labels))}


def plot_validation(rows: Sequence[Mapping[str, Any]], title: str, path: Path) -> None:
    """Seed 001 Fig. 3 (:func:`draw_validation`) saved to ``path``."""
    from demuxlab.report import save_figure

    save_figure(draw_validation(rows, title), path)


def draw_validation(rows: Sequence[Mapping[str, Any]], title: str) -> Any:
    """Seed 001 Fig. 3: per workload, measured throughput (95 % CI) and the models' predictions against
    threads (top), and the relative error of each prediction (bottom). One colour per pattern/notifier;
    solid: calibrated rates, dashed: the paper's rates. A panel's lines are drawn side by side
    (:func:`dodge`), each thread count's points within ±DODGE_SPAN/2 of it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    panels: dict[tuple[float, int], dict[str, list[Mapping[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
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
        offset = dodge(list(panels[key]))
        for label, pts in sorted(panels[key].items()):
            pts = sorted(pts, key=lambda r: r["threads"])
            c = colour_of[label]
            dx = offset[label]
            meas = [r for r in pts if r["measured_msgs_per_s"] is not None]
            top.errorbar(
                [r["threads"] + dx for r in meas],
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
                x = [r["threads"] + dx for r in pred]
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
                    (r["threads"] + dx, r[f"{source}_rel_error"])
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
        axes[0][0].text(0.5, 0.5, "no points", ha="center", va="center")
        axes[1][0].set_visible(False)

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
    return fig

"""One look for every page, from one place: the marks of :mod:`demuxlab.marks` (a colour per pattern, a
line dash and a marker symbol per notifier, a dash per model source, the interval rule), which the report's
static figures draw too, as Plotly takes them, and the layout every figure starts from. Every page (Sweep,
Compare, Operations, Ranking, History, Model) colours a pattern and marks a notifier through these
functions only."""

from __future__ import annotations

import zlib
from typing import Any

from demuxlab import marks
from demuxlab.marks import OKABE_ITO, PATTERN_COLOUR, SOURCE_LABEL
from demuxlab.vocab import NOTIFIERS, SOURCE_CALIBRATION, SOURCE_PAPER

__all__ = ["OKABE_ITO", "PATTERN_COLOUR", "SOURCE_LABEL"]

#: The palette for values that are not patterns (a notifier or a work value the user colours by): as many
#: distinct colours as the vocabulary has patterns, then by a stable hash.
PALETTE: tuple[str, ...] = marks.colours(max(len(PATTERN_COLOUR), 12))
NOTIFIER_DASH: dict[str, str] = {n: marks.plotly_dash(marks.notifier_dash(n)) for n in NOTIFIERS}
NOTIFIER_SYMBOL: dict[str, str] = dict(marks.NOTIFIER_SYMBOL)
NOTIFIER_HATCH: dict[str, str] = dict(marks.NOTIFIER_HATCH)
# The two model sources, in dash patterns no notifier uses: a model line never reads as a measured series.
SOURCE_DASH: dict[str, str] = {
    SOURCE_PAPER: marks.plotly_dash(marks.SOURCE_DASHES[SOURCE_PAPER]),
    SOURCE_CALIBRATION: marks.plotly_dash(marks.SOURCE_DASHES[SOURCE_CALIBRATION]),
}

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
TEMPLATE = "plotly_white"
FAILED = "#D55E00"
OK = "#009E73"
MUTED = marks.MUTED
GREY = marks.GREY
REGRESSION = "#D55E00"
IMPROVEMENT = "#0072B2"
#: The ring drawn round a point whose server threads outnumber its server's CPUs.
OVERSUBSCRIBED = marks.OVERSUBSCRIBED_COLOUR


def beside(colour: str) -> str:
    """The colour of marks drawn over a series of ``colour`` that are not that series (the SSA's points on
    the what-if's curve): black, or grey where the series is itself black (the multireactor), so the two
    never read as one."""
    return GREY if colour.upper() == "#000000" else "#000000"


def colour_for(value: Any, order: list[Any] | None = None) -> str:
    """A pattern's own colour; any other value (a notifier, a work value when the user colours by it)
    takes the palette by its place in ``order``, else by a stable hash of its text."""
    if isinstance(value, str) and value in PATTERN_COLOUR:
        return PATTERN_COLOUR[value]
    if order is not None and value in order:
        return PALETTE[order.index(value) % len(PALETTE)]
    return PALETTE[zlib.crc32(str(value).encode()) % len(PALETTE)]


def dash_for(notifier: Any) -> str:
    return NOTIFIER_DASH.get(str(notifier), "solid")


def symbol_for(notifier: Any) -> str:
    return NOTIFIER_SYMBOL.get(str(notifier), "circle")


def hatch_for(notifier: Any) -> str:
    return NOTIFIER_HATCH.get(str(notifier), "")


def symbol_of(value: Any, order: list[Any]) -> str:
    """The marker of a value that is not a notifier (a thread count telling two series of one colour apart),
    by its place in ``order``."""
    shapes = [s for s, _ in marks.SYMBOLS]
    return shapes[order.index(value) % len(shapes)] if value in order else shapes[0]


def rgba(hex_colour: str, alpha: float) -> str:
    """``#RRGGBB`` with an alpha, for CI bands and faint markers."""
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def base_layout(**extra: Any) -> dict[str, Any]:
    """Layout settings every figure starts from."""
    layout: dict[str, Any] = {
        "template": TEMPLATE,
        "font": {"family": FONT, "size": 13},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        # no gap between legend groups (a series groups its band, residual and model traces): every entry
        # is then one line high, which base.legend_height sizes the figure for
        "legend": {"orientation": "v", "tracegroupgap": 0},
        "colorway": list(PALETTE),
    }
    layout.update(extra)
    return layout


def log_axis(lo: float, hi: float, unit: str = "") -> dict[str, Any]:
    """A log axis from ``lo`` to ``hi`` with ticks at 1, 2 and 5 of each decade, each labelled as a number
    (:func:`demuxlab.marks.log_ticks`)."""
    import math

    vals, text = marks.log_ticks(lo, hi, unit)
    return {
        "type": "log",
        "range": [math.log10(lo), math.log10(hi)],
        "tickmode": "array",
        "tickvals": vals,
        "ticktext": text,
    }

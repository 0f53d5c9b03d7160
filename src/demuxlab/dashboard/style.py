"""One look for every page, from one place: a colour per pattern (Okabe & Ito's colour-blind-safe palette),
a line dash and a marker symbol per notifier, a dash per model source, and the layout every figure starts
from. The patterns and notifiers are :mod:`demuxlab.vocab`'s, in its order; every page (Sweep, Compare,
Operations, Ranking, History, Model) colours a pattern and marks a notifier through these functions only."""

from __future__ import annotations

import zlib
from typing import Any

from demuxlab.vocab import NOTIFIERS, PATTERNS, SOURCE_CALIBRATION, SOURCE_PAPER

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies.
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#D55E00",  # vermillion
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#999999",  # grey (the palette's ninth; its yellow #F0E442 does not read as a line on white)
)
# Plotly's six line dashes and six distinct marker symbols: one each per notifier of the vocabulary.
DASHES: tuple[str, ...] = ("dot", "dashdot", "solid", "dash", "longdash", "longdashdot")
SYMBOLS: tuple[str, ...] = ("circle", "square", "diamond", "triangle-up", "x", "star")
# Bar fill patterns (bars have no dash or marker): one per notifier.
HATCHES: tuple[str, ...] = ("", "/", "x", "-", "|", "+")

# A pattern's colour is its place in vocab.PATTERNS: the same pattern has the same colour on every page and
# in every experiment, whichever patterns a figure happens to show.
PATTERN_COLOUR: dict[str, str] = dict(zip(PATTERNS, OKABE_ITO, strict=False))
NOTIFIER_DASH: dict[str, str] = dict(zip(NOTIFIERS, DASHES, strict=False))
NOTIFIER_SYMBOL: dict[str, str] = dict(zip(NOTIFIERS, SYMBOLS, strict=False))
NOTIFIER_HATCH: dict[str, str] = dict(zip(NOTIFIERS, HATCHES, strict=False))
# The two model sources: the paper's rates and the calibrated ones, in dash patterns no notifier uses
# (Plotly's six named dashes are the notifiers'): a model line never reads as a measured series.
SOURCE_DASH: dict[str, str] = {SOURCE_PAPER: "10px,3px,2px,3px,2px,3px", SOURCE_CALIBRATION: "2px,5px"}
SOURCE_LABEL: dict[str, str] = {
    SOURCE_PAPER: "model, paper rates",
    SOURCE_CALIBRATION: "model, calibrated rates",
}

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
TEMPLATE = "plotly_white"
FAILED = "#D55E00"
OK = "#009E73"
MUTED = "#6c757d"
REGRESSION = "#D55E00"
IMPROVEMENT = "#0072B2"


def beside(colour: str) -> str:
    """The colour of marks drawn over a series of ``colour`` that are not that series (the SSA's points on
    the what-if's curve): black, or the palette's grey where the series is itself black (the multireactor),
    so the two never read as one."""
    return OKABE_ITO[-1] if colour == "#000000" else "#000000"


def colour_for(value: Any, order: list[Any] | None = None) -> str:
    """A pattern's own colour; any other value (a notifier, a work value when the user colours by it)
    takes the palette by its place in ``order``, else by a stable hash of its text."""
    if isinstance(value, str) and value in PATTERN_COLOUR:
        return PATTERN_COLOUR[value]
    if order is not None and value in order:
        return OKABE_ITO[order.index(value) % len(OKABE_ITO)]
    return OKABE_ITO[zlib.crc32(str(value).encode()) % len(OKABE_ITO)]


def dash_for(notifier: Any) -> str:
    return NOTIFIER_DASH.get(str(notifier), "solid")


def symbol_for(notifier: Any) -> str:
    return NOTIFIER_SYMBOL.get(str(notifier), "circle")


def hatch_for(notifier: Any) -> str:
    return NOTIFIER_HATCH.get(str(notifier), "")


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
        "colorway": list(OKABE_ITO),
    }
    layout.update(extra)
    return layout

"""One look for every page: a colour-blind-safe palette (Okabe & Ito) for patterns, line dashes and marker
symbols for notifiers, the same on every figure; and the few layout constants the pages share."""

from __future__ import annotations

import zlib
from typing import Any

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies.
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#D55E00",  # vermillion
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)

PATTERNS: tuple[str, ...] = ("reactor", "hsha", "lf", "tpc", "proactor", "uring", "multireactor")
NOTIFIERS: tuple[str, ...] = ("select", "poll", "epoll-lt", "epoll-et", "uring", "none")

PATTERN_COLOUR: dict[str, str] = dict(zip(PATTERNS, OKABE_ITO, strict=False))
NOTIFIER_DASH: dict[str, str] = {
    "select": "dot",
    "poll": "dashdot",
    "epoll-lt": "solid",
    "epoll-et": "dash",
    "uring": "longdash",
    "none": "longdashdot",
}
NOTIFIER_SYMBOL: dict[str, str] = {
    "select": "circle",
    "poll": "square",
    "epoll-lt": "diamond",
    "epoll-et": "triangle-up",
    "uring": "x",
    "none": "star",
}
# The two model sources: the paper's rates and the calibrated ones.
SOURCE_DASH: dict[str, str] = {"paper": "dash", "calibration": "dot"}
SOURCE_LABEL: dict[str, str] = {"paper": "model, paper rates", "calibration": "model, calibrated rates"}

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
TEMPLATE = "plotly_white"
FAILED = "#D55E00"
OK = "#009E73"
MUTED = "#6c757d"


def colour_for(value: Any, order: list[Any] | None = None) -> str:
    """A pattern's own colour; any other value cycles through the palette by its place in ``order``."""
    if isinstance(value, str) and value in PATTERN_COLOUR:
        return PATTERN_COLOUR[value]
    if order is not None and value in order:
        return OKABE_ITO[order.index(value) % len(OKABE_ITO)]
    return OKABE_ITO[zlib.crc32(str(value).encode()) % len(OKABE_ITO)]


def dash_for(notifier: Any) -> str:
    return NOTIFIER_DASH.get(str(notifier), "solid")


def symbol_for(notifier: Any) -> str:
    return NOTIFIER_SYMBOL.get(str(notifier), "circle")


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
        "legend": {"orientation": "v"},
        "colorway": list(OKABE_ITO),
    }
    layout.update(extra)
    return layout

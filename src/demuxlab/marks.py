"""How every figure of demuxlab marks what it shows, the dashboard's (Plotly) and the report's (matplotlib)
alike: a colour per pattern, a line dash and a marker per notifier, a dash per model source; when and how a
95 % interval is drawn; how a number, a byte count and a log axis read.

The vocabulary drives the marks: :data:`PATTERN_COLOUR`, :data:`NOTIFIER_DASH` and :data:`NOTIFIER_SYMBOL`
are made from :data:`demuxlab.vocab.PATTERNS` and :data:`~demuxlab.vocab.NOTIFIERS` by :func:`colours`,
:func:`dashes` and :func:`assign`, which give any number of names distinct colours and dashes (a palette,
then generated ones), and distinct marker shapes up to :data:`SYMBOLS` (each drawn alike by both libraries);
a vocabulary longer than the shapes is refused when this module is imported, naming what to add
(tests/unit/test_marks.py holds every mark distinct, for the vocabulary and for longer ones).

The interval rule (:func:`interval`, :func:`axis_top`): a point's 95 % Student-t interval is drawn from
:data:`MIN_RUNS_FOR_INTERVAL` runs on, whatever its width; its lower end is clipped at zero (throughput is
never negative) and the figure says so; the throughput axis is sized to the means and the intervals, but
never above :data:`AXIS_CAP` times the largest mean, so that one 2-run interval of ±372k cannot squash every
mean into the bottom fifth; an interval running past the top is cut there and the figure says which.

Pure: names and numbers in, names, numbers and text out (no plotting library).
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from demuxlab.vocab import NOTIFIERS, PATTERNS, SOURCE_CALIBRATION, SOURCE_PAPER

# -- colours -------------------------------------------------------------------------------------------------

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies
# (their yellow #F0E442 does not read as a line on white; their grey is the figures' own: unused, muted).
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#D55E00",  # vermillion
    "#56B4E9",  # sky blue
    "#000000",  # black
)
# Paul Tol's "muted" scheme (colour-blind safe), for the patterns after Okabe & Ito's seven (its grey left
# out, like theirs).
TOL_MUTED: tuple[str, ...] = (
    "#882255",  # wine
    "#117733",  # green
    "#332288",  # indigo
    "#DDCC77",  # sand
    "#CC6677",  # rose
    "#44AA99",  # teal
    "#999933",  # olive
    "#AA4499",  # purple
    "#88CCEE",  # cyan
)
#: The grey of things that are not a pattern: unused cores, the paper's bars, muted text.
GREY = "#999999"
MUTED = "#6c757d"


def colours(n: int) -> tuple[str, ...]:
    """``n`` distinct colours: Okabe & Ito's, then Tol's muted, then hues around the wheel (golden-angle
    steps at two lightnesses), none of them the figures' grey."""
    out: list[str] = [c for c in (*OKABE_ITO, *TOL_MUTED)][:n]
    seen = {c.upper() for c in out} | {GREY.upper()}
    k = 0
    while len(out) < n:
        hue = (k * 0.618033988749895) % 1.0
        light = 0.38 if k % 2 else 0.5
        r, g, b = colorsys.hls_to_rgb(hue, light, 0.75)
        c = f"#{round(r * 255):02X}{round(g * 255):02X}{round(b * 255):02X}"
        k += 1
        if c.upper() not in seen:
            seen.add(c.upper())
            out.append(c)
    return tuple(out)


# -- dashes --------------------------------------------------------------------------------------------------

#: A dash as on/off lengths (px in Plotly, points × line width in matplotlib); () is a solid line.
Dash = tuple[float, ...]
# The six notifiers' dashes as they always were (Plotly's named dashes, spelt out), then any later one's
# from :func:`dashes`.
NAMED_DASHES: tuple[tuple[str, Dash], ...] = (
    ("dot", (2.0, 3.0)),
    ("dashdot", (8.0, 3.0, 2.0, 3.0)),
    ("solid", ()),
    ("dash", (8.0, 4.0)),
    ("longdash", (14.0, 4.0)),
    ("longdashdot", (14.0, 4.0, 2.0, 4.0)),
)
#: The two model sources' dashes: none a notifier's, so a model line never reads as a measured series.
SOURCE_DASHES: dict[str, Dash] = {
    SOURCE_PAPER: (10.0, 3.0, 2.0, 3.0, 2.0, 3.0),
    SOURCE_CALIBRATION: (2.0, 5.0),
}


def dashes(n: int, avoid: Iterable[Dash] = SOURCE_DASHES.values()) -> tuple[Dash, ...]:
    """``n`` distinct dashes, none in ``avoid``: the named six, then dash-dot patterns with 2…k dots."""
    taken = set(avoid)
    out: list[Dash] = [d for _, d in NAMED_DASHES if d not in taken][:n]
    taken |= set(out)
    dots, on = 2, 6.0
    while len(out) < n:
        d: Dash = (on, 3.0, *((2.0, 3.0) * dots))
        dots += 1
        if dots > 4:
            dots, on = 2, on + 4.0
        if d not in taken:
            taken.add(d)
            out.append(d)
    return tuple(out)


def plotly_dash(d: Dash) -> str:
    """A dash as Plotly draws it: a named dash where it is one, else ``"6px,3px,…"``."""
    for name, named in NAMED_DASHES:
        if named == d:
            return name
    return ",".join(f"{v:g}px" for v in d) if d else "solid"


def mpl_dash(d: Dash) -> str | tuple[float, tuple[float, ...]]:
    """A dash as matplotlib draws it (``linestyle``)."""
    return (0.0, tuple(v / 1.5 for v in d)) if d else "-"


# -- marker shapes -------------------------------------------------------------------------------------------

#: Marker shapes drawn alike by Plotly and by matplotlib: (Plotly's symbol, matplotlib's marker).
SYMBOLS: tuple[tuple[str, str], ...] = (
    ("circle", "o"),
    ("square", "s"),
    ("diamond", "D"),
    ("triangle-up", "^"),
    ("x", "X"),
    ("star", "*"),
    ("triangle-down", "v"),
    ("pentagon", "p"),
    ("hexagon", "h"),
    ("cross", "P"),
    ("triangle-left", "<"),
    ("triangle-right", ">"),
    ("diamond-tall", "d"),
    ("octagon", "8"),
    ("hexagon2", "H"),
)
MPL_MARKER: dict[str, str] = dict(SYMBOLS)
#: Bar fill patterns (bars have no dash or marker), Plotly's: one per notifier where bars tell them.
HATCHES: tuple[str, ...] = ("", "/", "x", "-", "|", "+", ".", "\\")


def assign(names: Sequence[str], marks: Sequence[str], what: str, table: str) -> dict[str, str]:
    """Each of ``names`` its own mark of ``marks``, in order; a vocabulary longer than the marks is refused
    (``what``: the names' list, ``table``: the marks', for the message)."""
    if len(names) > len(marks):
        raise ValueError(
            f"{what} has {len(names)} names and demuxlab.marks.{table} only {len(marks)} distinct marks: "
            f"add {len(names) - len(marks)} to {table}"
        )
    return dict(zip(names, marks[: len(names)], strict=True))


# -- the vocabulary's marks ----------------------------------------------------------------------------------

PATTERN_COLOUR: dict[str, str] = dict(zip(PATTERNS, colours(len(PATTERNS)), strict=True))
NOTIFIER_DASH_OF: dict[str, Dash] = dict(zip(NOTIFIERS, dashes(len(NOTIFIERS)), strict=True))
NOTIFIER_SYMBOL: dict[str, str] = assign(NOTIFIERS, [s for s, _ in SYMBOLS], "vocab.NOTIFIERS", "SYMBOLS")
NOTIFIER_HATCH: dict[str, str] = assign(NOTIFIERS, HATCHES, "vocab.NOTIFIERS", "HATCHES")
SOURCE_LABEL: dict[str, str] = {
    SOURCE_PAPER: "model, paper rates",
    SOURCE_CALIBRATION: "model, calibrated rates",
}
#: The ring drawn round a point whose server threads outnumber the server's CPUs: grey, the colour of
#: nothing else a figure draws (no pattern has it).
OVERSUBSCRIBED_COLOUR = "#7F7F7F"
OVERSUBSCRIBED_TEXT = "oversubscribed: more server threads than server CPUs"


def pattern_colour(pattern: str) -> str:
    return PATTERN_COLOUR.get(pattern, GREY)


def notifier_dash(notifier: str) -> Dash:
    return NOTIFIER_DASH_OF.get(notifier, ())


def notifier_symbol(notifier: str) -> str:
    return NOTIFIER_SYMBOL.get(notifier, "circle")


# -- the interval rule ---------------------------------------------------------------------------------------

#: A point's 95 % interval is drawn from this many runs on (one run has none).
MIN_RUNS_FOR_INTERVAL = 2
#: The throughput axis never reaches above this many times the largest mean for an interval's sake.
AXIS_CAP = 2.0
#: Room above the highest mark drawn.
AXIS_HEADROOM = 1.06


@dataclass(frozen=True)
class Interval:
    """How one point's interval is drawn: ``lo``/``hi`` (``lo`` clipped at zero), or not at all."""

    mean: float
    half: float | None  # the 95 % half-width; None: fewer than two runs
    n: int

    @property
    def drawn(self) -> bool:
        return self.n >= MIN_RUNS_FOR_INTERVAL and self.half is not None and math.isfinite(self.half)

    @property
    def lo(self) -> float:
        return max(0.0, self.mean - (self.half or 0.0)) if self.drawn else self.mean

    @property
    def hi(self) -> float:
        return self.mean + (self.half or 0.0) if self.drawn else self.mean

    @property
    def clipped(self) -> bool:
        """Whether the interval reached below zero and is drawn from zero."""
        return self.drawn and self.mean - (self.half or 0.0) < 0.0

    @property
    def minus(self) -> float:
        """The error bar below the mean, as drawn."""
        return self.mean - self.lo

    @property
    def plus(self) -> float:
        return self.hi - self.mean

    def short(self) -> str:
        """:meth:`note` in a table's few words: ``±7.33k (2 runs)``, ``±372k (2 runs), from 0`` (clipped at
        zero), ``1 run: none``."""
        if self.n == 0:
            return "no ok run"
        if not self.drawn:
            return "1 run: none"
        return f"±{quantity(self.half or 0.0)} ({self.n} runs)" + (", from 0" if self.clipped else "")

    def note(self) -> str:
        """How the interval is shown, in words (hover)."""
        if self.n == 0:
            return "no ok run"
        if not self.drawn:
            return "1 run: no interval (an open marker)"
        text = f"95 % interval ±{quantity(self.half or 0.0)} over {self.n} runs"
        return text + (" (clipped at 0: it reaches below zero)" if self.clipped else "")


def interval(mean: float, half: float | None, n: int) -> Interval:
    """A point's interval as the figures draw it (module doc)."""
    h = None if half is None or not math.isfinite(float(half)) else float(half)
    return Interval(float(mean), h, int(n))


@dataclass(frozen=True)
class Axis:
    """A throughput axis's top and the intervals it cuts."""

    top: float
    cut: int  # intervals that run past the top


def axis_top(means: Iterable[float], highs: Iterable[float] = ()) -> Axis:
    """The top of a throughput axis (zero at the bottom): the highest mean and interval top, but at most
    :data:`AXIS_CAP` × the highest mean, with :data:`AXIS_HEADROOM`; how many interval tops it cuts."""
    ms = [float(m) for m in means if m is not None and math.isfinite(float(m))]
    hs = [float(h) for h in highs if h is not None and math.isfinite(float(h))]
    best = max(ms, default=0.0)
    cap = AXIS_CAP * best if best > 0 else math.inf
    reach = max([best, *[min(h, cap) for h in hs]], default=0.0)
    top = max(reach * AXIS_HEADROOM, 1.0)
    return Axis(top, sum(1 for h in hs if h > top))


def cut_note(cut: int, hover: bool = True) -> str | None:
    """What a figure says of the intervals its axis cuts (``hover``: an interactive figure, whose hover has
    the whole interval; a static one points to its table)."""
    if not cut:
        return None
    where = "hover for the whole interval" if hover else "the table has the whole interval"
    return (
        f"{cut} interval{'s' * (cut != 1)} run{'s' * (cut == 1)} past the top of the axis "
        f"(it stops at {AXIS_CAP:g}× the highest mean): {where}"
    )


# -- numbers -------------------------------------------------------------------------------------------------


def sig(v: float | None, digits: int = 4) -> float | None:
    """``v`` rounded to ``digits`` significant digits (tables: 0.002055, 2664, 67910); None and NaN: None."""
    if v is None:
        return None
    x = float(v)
    if not math.isfinite(x):
        return None
    if x == 0.0:
        return 0.0
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def quantity(v: float, unit: str = "", digits: int = 3) -> str:
    """A number as a reader writes it, in ``digits`` significant digits with an SI prefix: ``67.9k``,
    ``1.25M``, ``0.00206``, ``691``; ``unit`` after a space."""
    x = float(v)
    if not math.isfinite(x):
        text = "—"
    else:
        a = abs(x)
        for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if a >= scale * 0.9995:
                text = f"{_sig_text(x / scale, digits)}{prefix}"
                break
        else:
            text = _sig_text(x, digits)
    return f"{text} {unit}".rstrip()


def _sig_text(x: float, digits: int) -> str:
    """``x`` in ``digits`` significant digits, without trailing zeros (``1``, ``2.5``, ``0.00206``)."""
    if x == 0:
        return "0"
    s = sig(x, digits)
    assert s is not None
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(s))))
    text = f"{s:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def bytes_text(v: float | None) -> str | None:
    """A byte count in binary units, 3 significant digits: ``23.5 GiB``."""
    if v is None:
        return None
    x = float(v)
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        scale = float(1 << {"TiB": 40, "GiB": 30, "MiB": 20, "KiB": 10}[unit])
        if abs(x) >= scale:
            return f"{_sig_text(x / scale, 3)} {unit}"
    return f"{x:g} B"


def log_ticks(lo: float, hi: float, unit: str = "") -> tuple[list[float], list[str]]:
    """Ticks of a log axis from ``lo`` to ``hi`` at 1, 2 and 5 of each decade, labelled as numbers
    (``0.1, 0.2, 0.5, 1, 2, 5, 10``), never Plotly's ``2, 10, 5, 2, 1``; fewer (1 and 10 only) where the axis
    spans more than four decades."""
    lo, hi = min(lo, hi), max(lo, hi)
    if not (lo > 0 and math.isfinite(hi)):
        return [], []
    steps = (1.0,) if math.log10(hi / lo) > 4 else (1.0, 2.0, 5.0)
    vals: list[float] = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in steps:
            v = m * 10.0**e
            if lo <= v * (1 + 1e-9) and v <= hi * (1 + 1e-9):
                vals.append(float(sig(v, 3) or v))
    return vals, [quantity(v, unit) for v in vals]


# -- keeping marks apart -------------------------------------------------------------------------------------


def dodge(count: int, width: float) -> list[float]:
    """Offsets of ``count`` series sharing an x value, side by side within ``width`` around it (0 for one)."""
    if count <= 1:
        return [0.0] * count
    step = width / (count - 1)
    return [(i - (count - 1) / 2) * step for i in range(count)]


def figure_title(name: str, reproduces: str) -> str:
    """A figure's title: the experiment and the paper's figure it reproduces; an experiment that reproduces
    none is titled by its name alone (not "smoke (none)")."""
    return name if reproduces.strip().lower() in ("", "none") else f"{name} ({reproduces})"

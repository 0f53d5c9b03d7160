"""Why a model line is missing, said where it would be seen (Sweep, Ranking, Model): for each design of a
selection and each rates source it has no prediction from, one line naming the reason: the CTMC models have
no rates for the pattern; no prediction is stored (the predict stage has not run); the calibration was
refused, with its reason and its self-check (the fitted model against its own calibration runs); the
design's calibration runs failed; it has no calibration runs; it is not calibrated yet.

Pure: the frames of :mod:`demuxlab.dashboard.data.points` and :mod:`~demuxlab.dashboard.data.models` in,
text out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard.figures import base
from demuxlab.vocab import SOURCE_CALIBRATION, SOURCE_PAPER

#: How each source reads in a line.
SOURCE_WORDS: dict[str, str] = {SOURCE_PAPER: "paper rates", SOURCE_CALIBRATION: "calibrated rates"}


@dataclass(frozen=True)
class Absence:
    """A design (and hardware class) without a model line from ``source``, and why."""

    pattern: str
    notifier: str
    hardware_class: str | None
    source: str
    why: str

    @property
    def short(self) -> str:
        """The reason in a few words (the figure's note: the page lists each line whole)."""
        return self.why.split(":")[0].split(" (")[0]

    @property
    def line(self) -> str:
        on = f" on class {self.hardware_class}" if self.hardware_class else ""
        return f"{self.pattern}/{self.notifier}{on}, {SOURCE_WORDS.get(self.source, self.source)}: {self.why}"


def self_check_text(checks: Any) -> str:
    """The worst workload of a calibration's self-check, in words (empty without one)."""
    found = checks if isinstance(checks, list) else []  # a frame's missing cell is NaN, not a list
    rows = [c for c in found if isinstance(c, Mapping) and c.get("measured_msgs_per_s")]
    if not rows:
        return ""
    worst = max(rows, key=lambda c: abs(float(c.get("rel_error") or 0.0)))
    err = float(worst.get("rel_error") or 0.0)
    return (
        f"self-check: the fitted model gives {marks.quantity(float(worst['predicted_msgs_per_s']), 'msg/s')} "
        f"where its {worst.get('runs', '?')} calibration run(s) measured "
        f"{marks.quantity(float(worst['measured_msgs_per_s']), 'msg/s')} ({err:+.0%}) at "
        f"{worst.get('threads', '?')} threads, {worst.get('connections', '?')} connections"
    )


def absences(
    points: pd.DataFrame,
    preds: pd.DataFrame | None,
    states: pd.DataFrame | None,
    calibration_points: pd.DataFrame | None,
    modelled: Sequence[str],
    sources: Sequence[str] = (SOURCE_PAPER, SOURCE_CALIBRATION),
) -> list[Absence]:
    """Each design × hardware class of ``points`` (measured points) without a prediction from a source of
    ``sources``, with why (module doc)."""
    if points.empty:
        return []
    have = _predicted(points, preds)
    out: list[Absence] = []
    for (pattern, notifier, cls), _ in sorted(_designs(points).items(), key=lambda kv: str(kv[0])):
        for source in sources:
            if (pattern, notifier, cls if source == SOURCE_CALIBRATION else None, source) in have:
                continue
            why = _why(pattern, notifier, cls, source, states, calibration_points, modelled)
            out.append(Absence(pattern, notifier, cls, source, why))
    return out


def _designs(points: pd.DataFrame) -> dict[tuple[str, str, str | None], int]:
    classes = points["hardware_class"] if "hardware_class" in points else [None] * len(points)
    out: dict[tuple[str, str, str | None], int] = {}
    for p, n, c in zip(points["pattern"], points["notifier"], classes, strict=True):
        k = (str(p), str(n), base.cls(c))
        out[k] = out.get(k, 0) + 1
    return out


def _predicted(points: pd.DataFrame, preds: pd.DataFrame | None) -> set[tuple[str, str, str | None, str]]:
    """(pattern, notifier, class or None, source) of every stored prediction of ``points``."""
    if preds is None or preds.empty:
        return set()
    design = {
        int(pid): (str(p), str(n))
        for pid, p, n in zip(points["point_id"], points["pattern"], points["notifier"], strict=True)
    }
    pcls = preds["hardware_class"] if "hardware_class" in preds else [None] * len(preds)
    out = set()
    for pid, src, c in zip(preds["point_id"], preds["source"], pcls, strict=True):
        if int(pid) in design:
            p, n = design[int(pid)]
            out.add((p, n, base.cls(c) if src == SOURCE_CALIBRATION else None, str(src)))
    return out


def _why(
    pattern: str,
    notifier: str,
    cls: str | None,
    source: str,
    states: pd.DataFrame | None,
    calibration_points: pd.DataFrame | None,
    modelled: Sequence[str],
) -> str:
    if pattern not in modelled:
        return f"the CTMC models have no rates for {pattern} (they cover {', '.join(modelled)})"
    if source == SOURCE_PAPER:
        return "no prediction stored (the experiment's predict stage has not run)"
    state = _state(states, pattern, notifier, cls)
    if state is not None and state.get("refused"):
        why = reason(str(state["refused"]), pattern, notifier)
        check = "" if "predict" in why else self_check_text(state.get("self_check"))
        return f"calibration refused: {why}" + (f"; {check}" if check else "")
    if state is not None:
        return (
            f"calibrated (#{int(state['calibration_id'])}), but no prediction stored from it (the "
            "predict stage has not run since)"
        )
    runs, ok = _calibration_runs(calibration_points, pattern, notifier)
    if runs == 0:
        return (
            "no calibration runs (the spec gives this design no calibration point, or calibration.repeats "
            "is 0)"
        )
    if ok == 0:
        return f"its {runs} calibration run(s) failed"
    return "not calibrated yet (the experiment's calibrate stage has not run)"


def reason(error: str, pattern: str, notifier: str) -> str:
    """A refusal's reason without the calibration's own name and verdict it starts with
    (``calibrate lf/select: refused: …``), which the line says already."""
    for head in (f"calibrate {pattern}/{notifier}: ", "refused: "):
        error = error.removeprefix(head)
    return error


def _state(
    states: pd.DataFrame | None, pattern: str, notifier: str, cls: str | None
) -> dict[str, Any] | None:
    """The newest calibration (fitted or refused) of a design and class."""
    if states is None or states.empty:
        return None
    for r in base.records(states):
        if (r["pattern"], r["notifier"], base.cls(r.get("hardware_class"))) == (pattern, notifier, cls):
            return r
    return None


def _calibration_runs(frame: pd.DataFrame | None, pattern: str, notifier: str) -> tuple[int, int]:
    if frame is None or frame.empty:
        return 0, 0
    mine = frame[(frame["pattern"] == pattern) & (frame["notifier"] == notifier)]
    return int(mine["runs"].sum()), int(mine["ok"].sum())


def lines(found: Sequence[Absence]) -> list[str]:
    return [a.line for a in found]


def summary(found: Sequence[Absence], limit: int = 4) -> list[str]:
    """The absences in a few lines, one per source and reason, the designs named (at most ``limit``, then
    how many more): ``calibrated rates, calibration refused: hsha/epoll-et, lf/select and 6 more``."""
    groups: dict[tuple[str, str], list[str]] = {}
    for a in found:
        on = f" [{a.hardware_class}]" if a.hardware_class else ""
        groups.setdefault((SOURCE_WORDS.get(a.source, a.source), a.short), []).append(
            f"{a.pattern}/{a.notifier}{on}"
        )
    out = []
    for (source, why), designs in sorted(groups.items()):
        more = f" and {len(designs) - limit} more" if len(designs) > limit else ""
        out.append(f"{source}, {why}: {', '.join(designs[:limit])}{more}")
    return out

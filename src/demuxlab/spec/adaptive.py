"""A spec's ``adaptive:`` block (docs/adaptive.md): its settings as frozen values, the checks the schema
cannot make, and the first round's design (the coarse design) that a budget must cover.

Pure: the spec's document (defaults filled in) and its points in, settings and problems
(``field: problem``) out. The policy that uses the settings is :mod:`demuxlab.adaptive`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.point import Point
from demuxlab.steady import SteadyRule


@dataclass(frozen=True)
class RepeatRule:
    """Sequential repeats: at least ``min`` runs of a point, then more until its 95 % interval's relative
    half-width is within ``target_rel``, at most ``max``."""

    min: int
    max: int
    target_rel: float

    def to_json(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "target_rel": self.target_rel}


@dataclass(frozen=True)
class PointRule:
    """Model-guided points: ``coarse`` thread counts per curve first, then where the answer can change;
    the model may miss a measured point by ``target_rel`` beyond its interval."""

    coarse: int
    target_rel: float

    def to_json(self) -> dict[str, Any]:
        return {"coarse": self.coarse, "target_rel": self.target_rel}


@dataclass(frozen=True)
class Adaptive:
    """The settings of an adaptive sweep; a mechanism that is None is off (that part of the design is
    fixed: every repeat, the whole measure phase, every point)."""

    budget_h: float | None  # run-hours; None: the fixed design's
    repeats: RepeatRule | None
    steady: SteadyRule | None
    points: PointRule | None

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return tuple(name for name in ("repeats", "steady", "points") if getattr(self, name) is not None)

    def only(self, mechanisms: Sequence[str]) -> Adaptive:
        """These settings with every mechanism not named switched off (the replay's ablations)."""
        return Adaptive(
            budget_h=self.budget_h,
            repeats=self.repeats if "repeats" in mechanisms else None,
            steady=self.steady if "steady" in mechanisms else None,
            points=self.points if "points" in mechanisms else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "budget_h": self.budget_h,
            "repeats": None if self.repeats is None else self.repeats.to_json(),
            "steady": None if self.steady is None else self.steady.to_json(),
            "points": None if self.points is None else self.points.to_json(),
        }


def parse_adaptive(doc: Mapping[str, Any] | None, repeats: int) -> Adaptive | None:
    """The block as settings (``doc``: the schema-checked block, defaults filled in; ``repeats``: the
    spec's, the default maximum of sequential repeats)."""
    if doc is None:
        return None
    rep = doc.get("repeats")
    steady = doc.get("steady")
    points = doc.get("points")
    return Adaptive(
        budget_h=None if doc.get("budget_h") is None else float(doc["budget_h"]),
        repeats=None
        if rep is None
        else RepeatRule(
            min=int(rep["min"]),
            max=int(rep["max"]) if rep.get("max") is not None else repeats,
            target_rel=float(rep["target_rel"]),
        ),
        steady=None
        if steady is None
        else SteadyRule(min_s=float(steady["min_s"]), target_rel=float(steady["target_rel"])),
        points=None
        if points is None
        else PointRule(coarse=int(points["coarse"]), target_rel=float(points["target_rel"])),
    )


def check_adaptive(doc: Mapping[str, Any], problems: list[str]) -> None:
    """The block's settings against each other and the spec (the budget is checked by
    :func:`check_budget`, once the points are known)."""
    block = doc.get("adaptive")
    if block is None:
        return
    rep = block.get("repeats")
    if rep is not None:
        most = rep["max"] if rep.get("max") is not None else doc["repeats"]
        if rep["min"] > most:
            said = f"{most}" if rep.get("max") is not None else f"null: the spec's repeats, {most}"
            problems.append(f"adaptive.repeats.min: {rep['min']} is above adaptive.repeats.max ({said})")
    steady = block.get("steady")
    if steady is not None and steady["min_s"] > doc["phases"]["measure_s"]:
        problems.append(
            f"adaptive.steady.min_s: {steady['min_s']:g} s is more than phases.measure_s "
            f"({doc['phases']['measure_s']:g} s): a run cannot measure longer than its measure phase"
        )


def curve_key(point: Point) -> tuple[Any, ...]:
    """What a curve of the figure shares: every field of the point but its thread count."""
    return (
        point.pattern,
        point.notifier,
        point.work_us,
        point.connections,
        point.msg_size,
        point.client_threads,
        point.rate,
        point.instrument,
    )


def curves(points: Sequence[Point]) -> dict[tuple[Any, ...], list[Point]]:
    """The points by curve, each curve's points by thread count."""
    out: dict[tuple[Any, ...], list[Point]] = {}
    for p in points:
        out.setdefault(curve_key(p), []).append(p)
    for pts in out.values():
        pts.sort(key=lambda p: p.threads)
    return out


def spread(n: int, k: int) -> list[int]:
    """``k`` indices of ``0..n-1`` spread evenly, both ends included (all of them when ``n <= k``)."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def coarse_points(points: Sequence[Point], settings: Adaptive) -> list[Point]:
    """The points of the first round: with model-guided points, ``coarse`` thread counts of each curve
    (its ends and evenly spaced counts between); without, every point. In ``points``' order."""
    if settings.points is None:
        return list(points)
    keep: set[str] = set()
    for pts in curves(points).values():
        keep.update(pts[i].point_key for i in spread(len(pts), settings.points.coarse))
    return [p for p in points if p.point_key in keep]


def first_round_runs(
    points: Sequence[Point], calibration: Sequence[Point], settings: Adaptive, repeats: int, cal_repeats: int
) -> int:
    """How many runs the first round has: the coarse design at the minimum repeats (every repeat without
    sequential repeats), and every calibration run."""
    per_point = settings.repeats.min if settings.repeats is not None else repeats
    return len(coarse_points(points, settings)) * per_point + len(calibration) * cal_repeats


def check_budget(settings: Adaptive | None, runs: int, run_s: float, problems: list[str]) -> None:
    """A budget must pay for the first round (``runs`` runs of ``run_s`` seconds)."""
    if settings is None or settings.budget_h is None:
        return
    need_h = runs * run_s / 3600.0
    if settings.budget_h < need_h:
        problems.append(
            f"adaptive.budget_h: {settings.budget_h:g} h is less than the coarse design needs "
            f"({need_h:.3g} h: {runs} runs of {run_s:g} s in the first round)"
        )


def describe_adaptive(spec: Any, points: Sequence[Point], calibration: Sequence[Point]) -> str:
    """One line for ``demuxlab validate``: the mechanisms, the first round and the budget, in run-hours."""
    a = spec.adaptive
    assert a is not None
    first = first_round_runs(points, calibration, a, spec.repeats, spec.calibration_repeats)
    full_h = (len(points) * spec.repeats + len(calibration) * spec.calibration_repeats) * spec.run_s / 3600
    budget = "the fixed design's" if a.budget_h is None else f"{a.budget_h:g} run-hours"
    return (
        f"adaptive ({', '.join(a.mechanisms) or 'no mechanism on'}): first round {first} runs "
        f"({first * spec.run_s / 3600:.3g} run-hours), budget {budget}; "
        f"the fixed design is {full_h:.3g} run-hours"
    )

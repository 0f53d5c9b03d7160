"""The model that guides which points to measure next: each curve of the figure (a design's throughput over
its thread counts at one workload) predicted at every thread count from the points measured so far.

Where the CTMC models predict every point of a curve (``shapes``: point key → predicted msg/s, from the
calibrated or the paper's rates), the prediction is the model's shape scaled to the measurements: the
ratio measured / model at the measured points, interpolated linearly in threads between them (held
constant beyond the ends). Where they do not, the ratio is taken against 1: the measurements themselves,
interpolated. Either way the prediction goes through every measured point, so whether the model agrees
with the data is judged leave-one-out: at a measured point between two measured neighbours, the
prediction from the neighbours alone against the point's mean.

Pure: points, their summaries and the shapes in; values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from demuxlab.point import Point
from demuxlab.stats import Summary


@dataclass(frozen=True)
class Value:
    """A curve's value at one point: measured (mean and interval) or predicted (model only)."""

    point: Point
    mean: float
    measured: bool
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class Miss:
    """A measured point the model, from its measured neighbours, misses by more than allowed."""

    point: Point
    predicted: float
    measured: float
    allowed: float  # the larger of the difference's 95 % half-width and target × mean
    left: Point  # the measured neighbours the prediction came from
    right: Point

    @property
    def rel(self) -> float:
        return (self.predicted - self.measured) / self.measured if self.measured else float("inf")


def _interp(x: float, x0: float, y0: float, x1: float, y1: float) -> float:
    return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


class Curve:
    """One curve: its points in thread order, the measured ones' summaries, and the model's shape if it
    predicts every point of the curve."""

    def __init__(
        self, points: Sequence[Point], summaries: Mapping[str, Summary], shapes: Mapping[str, float]
    ) -> None:
        self.points = sorted(points, key=lambda p: p.threads)
        self.summaries = {
            p.point_key: summaries[p.point_key] for p in self.points if p.point_key in summaries
        }
        shaped = [shapes.get(p.point_key) for p in self.points]
        self.shape: dict[str, float] | None = (
            {p.point_key: float(s) for p, s in zip(self.points, shaped, strict=True) if s is not None}
            if all(s is not None and s > 0 for s in shaped)
            else None
        )

    @property
    def measured(self) -> list[Point]:
        return [p for p in self.points if p.point_key in self.summaries]

    @property
    def modelled(self) -> bool:
        """Whether the CTMC shape is used (else the measurements are interpolated)."""
        return self.shape is not None

    def _ratio(self, p: Point) -> float:
        mean = self.summaries[p.point_key].mean
        return mean / self.shape[p.point_key] if self.shape is not None else mean

    def _scale(self, p: Point, ratio: float) -> float:
        return ratio * self.shape[p.point_key] if self.shape is not None else ratio

    def _predict_from(self, p: Point, known: Sequence[Point]) -> float | None:
        if not known:
            return None
        left = [q for q in known if q.threads <= p.threads]
        right = [q for q in known if q.threads >= p.threads]
        if left and right:
            a, b = left[-1], right[0]
            r = _interp(p.threads, a.threads, self._ratio(a), b.threads, self._ratio(b))
        else:
            r = self._ratio(left[-1] if left else right[0])
        return self._scale(p, r)

    def predict(self, p: Point) -> float | None:
        """The model's value at ``p`` from every measured point (None before any is measured)."""
        return self._predict_from(p, self.measured)

    def values(self) -> list[Value]:
        """Every point of the curve: its measurement where measured, else the prediction."""
        out = []
        for p in self.points:
            s = self.summaries.get(p.point_key)
            if s is not None:
                out.append(Value(p, s.mean, True, s.ci_low, s.ci_high))
                continue
            pred = self.predict(p)
            if pred is not None:
                out.append(Value(p, pred, False))
        return out

    def misses(self, target_rel: float) -> list[Miss]:
        """Measured points between two measured neighbours that the neighbours' prediction misses by more
        than ``target_rel`` of the point's mean and more than the difference's own 95 % half-width: the
        point's and the prediction's (its neighbours' half-widths, interpolated), combined as for a
        difference of two independent means. On a noisy host a curve that is straight within its intervals
        has no miss."""
        measured = self.measured
        out = []
        for i in range(1, len(measured) - 1):
            p, a, b = measured[i], measured[i - 1], measured[i + 1]
            s = self.summaries[p.point_key]
            pred = self._predict_from(p, [a, b])
            if pred is None:
                continue
            ha, hb = (self.summaries[q.point_key].halfwidth_rel or 0.0 for q in (a, b))
            pred_rel = _interp(p.threads, a.threads, ha, b.threads, hb)
            noise = ((s.halfwidth or 0.0) ** 2 + (pred_rel * abs(pred)) ** 2) ** 0.5
            allowed = max(noise, target_rel * abs(s.mean))
            if abs(pred - s.mean) > allowed:
                out.append(Miss(p, pred, s.mean, allowed, a, b))
        return out

    def between(self, a: Point, b: Point) -> Point | None:
        """The unmeasured point of the curve halfway (by index) between ``a`` and ``b``, if any."""
        idx = {p.point_key: i for i, p in enumerate(self.points)}
        lo, hi = sorted((idx[a.point_key], idx[b.point_key]))
        inside = [p for p in self.points[lo + 1 : hi] if p.point_key not in self.summaries]
        return inside[len(inside) // 2] if inside else None

    def neighbours(self, p: Point) -> list[Point]:
        """The points beside ``p`` on the thread axis."""
        i = [q.point_key for q in self.points].index(p.point_key)
        return [self.points[j] for j in (i - 1, i + 1) if 0 <= j < len(self.points)]

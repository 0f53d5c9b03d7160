"""The answer a sweep gives: the claims' verdicts and the best design per workload, computed by
:mod:`demuxlab.claims` from the measured points' summaries. An adaptive sweep stops once its answer stops
changing; the replay compares it with the full design's.

Pure: summaries in, an :class:`Answer` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.claims import ClaimVerdict, Recommendation, evaluate_claims, recommend
from demuxlab.point import Point
from demuxlab.stats import Summary


@dataclass(frozen=True)
class MeasuredRow:
    """A measured point as the claims read it: its summary, its server host and pinned CPUs."""

    point: Point
    summary: Summary
    host: str
    server_cpus: int | None

    def to_claims(self) -> dict[str, Any]:
        s = self.summary
        return {
            **self.point.to_json(),
            "mean": s.mean,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
            "n": s.n,
            "host": self.host,
            "server_cpus": self.server_cpus,
        }


@dataclass(frozen=True)
class Answer:
    verdicts: tuple[ClaimVerdict, ...]
    recommendations: tuple[Recommendation, ...]

    @property
    def verdict_map(self) -> dict[tuple[str, str], str]:
        """(claim id, host) → verdict."""
        return {(v.claim_id, v.host): v.verdict for v in self.verdicts}

    @property
    def best_map(self) -> dict[tuple[str, str], str]:
        """(host, workload) → the best measured design, ``pattern/notifier/tN``."""
        return {(r.host, str(r.workload)): best_label(r) for r in self.recommendations}

    def key(self) -> tuple[Any, ...]:
        """What must stay the same for the answer to be the same."""
        return (tuple(sorted(self.verdict_map.items())), tuple(sorted(self.best_map.items())))

    def to_json(self) -> dict[str, Any]:
        return {
            "verdicts": [
                {"claim_id": v.claim_id, "host": v.host, "verdict": v.verdict, "reason": v.reason}
                for v in self.verdicts
            ],
            "best": [
                {
                    "host": r.host,
                    "workload": str(r.workload),
                    "best": best_label(r),
                    "mean": r.best.mean,
                    "ci_low": r.best.ci_low,
                    "ci_high": r.best.ci_high,
                    "n": r.best.n,
                    "tied_with": [p.label.replace(" ", "/") for p in r.tied],
                    "model_missing": list(r.model_missing),
                }
                for r in self.recommendations
            ],
        }


def best_label(r: Recommendation) -> str:
    return f"{r.best.pattern}/{r.best.notifier}/t{r.best.threads}"


def answer(
    rows: Sequence[MeasuredRow],
    predictions: Sequence[Mapping[str, Any]] = (),
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    why_missing: Mapping[tuple[str, str], str] | None = None,
) -> Answer:
    """The claims' verdicts and the recommendation from the measured points (calibration points are
    left out, as the claims stage does); ``why_missing``: why a pattern × notifier has no calibration (its
    refusal with the figure, :attr:`demuxlab.adaptive.models.Shapes.why_missing`), as recommendations.csv
    names it."""
    points = [r.to_claims() for r in rows if not r.point.instrument]
    return Answer(
        tuple(evaluate_claims(points, predictions, facts)),
        tuple(recommend(points, predictions, why_missing)),
    )

"""A verdict per claim and server host: :func:`evaluate_claims`.

Pure: plain rows (or typed values) in, :class:`ClaimVerdict` values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.claims.catalog import CLAIMS
from demuxlab.claims.context import Claim, Context, Part
from demuxlab.claims.inputs import MeasuredPoint, ModelPrediction, as_point, as_prediction
from demuxlab.errors import DemuxlabError
from demuxlab.vocab import NOT_TESTABLE, VERDICTS


@dataclass(frozen=True)
class ClaimVerdict:
    claim_id: str
    seed: str
    text: str
    scope: str
    verdict: str
    reason: str
    evidence: tuple[str, ...]
    host: str
    hardware: str
    # The points its evidence cites whose runs a validity check flagged (runs_flagged > 0), from the data:
    # claims.md names them with the checks (demuxlab.claims.markdown.flagged_note).
    flagged: tuple[MeasuredPoint, ...] = ()

    def to_row(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "seed": self.seed,
            "verdict": self.verdict,
            "host": self.host,
            "hardware": self.hardware,
            "reason": self.reason,
            "evidence": " | ".join(self.evidence),
            "text": self.text,
            "scope": self.scope,
        }


def hardware_of(facts: Mapping[str, Any] | None) -> str:
    if not facts:
        return ""
    bits = []
    if facts.get("cores") is not None:
        bits.append(f"{facts['cores']} cores")
    nodes = facts.get("numa_nodes")
    if isinstance(nodes, list):
        bits.append(f"{len(nodes)} NUMA node{'s' if len(nodes) != 1 else ''}")
    elif isinstance(nodes, int):
        bits.append(f"{nodes} NUMA node{'s' if nodes != 1 else ''}")
    if facts.get("cpu_model"):
        bits.append(str(facts["cpu_model"]))
    return ", ".join(bits)


def parse_inputs(
    points: Iterable[Mapping[str, Any] | MeasuredPoint],
    predictions: Iterable[Mapping[str, Any] | ModelPrediction] | None,
) -> tuple[list[MeasuredPoint], list[ModelPrediction]]:
    pts = [as_point(p, f"points[{i}]") for i, p in enumerate(points)]
    preds = [as_prediction(p, f"predictions[{i}]") for i, p in enumerate(predictions or [])]
    return pts, preds


def evaluate_claims(
    points: Iterable[Mapping[str, Any] | MeasuredPoint],
    predictions: Iterable[Mapping[str, Any] | ModelPrediction] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    claims: Sequence[Claim] = CLAIMS,
) -> list[ClaimVerdict]:
    """A verdict per claim and server host (one host: one verdict per claim), in ``claims`` order."""
    pts, preds = parse_inputs(points, predictions)
    hosts = sorted({p.host for p in pts}) or [""]
    out = []
    for host in hosts:
        # A class's calibrated predictions are compared with that class's points only.
        ctx = Context([p for p in pts if p.host == host], [q for q in preds if q.host in (None, host)])
        hw = hardware_of((facts or {}).get(host))
        for claim in claims:
            part = claim.test(ctx) if ctx.points else Part(NOT_TESTABLE, "no measured points")
            if part.verdict not in VERDICTS:
                raise DemuxlabError(f"claim {claim.id}: test returned verdict {part.verdict!r}")
            out.append(
                ClaimVerdict(
                    claim.id,
                    claim.seed,
                    claim.text,
                    claim.scope,
                    part.verdict,
                    part.reason,
                    part.evidence,
                    host,
                    hw,
                    tuple(p for p in part.points if p.runs_flagged),
                )
            )
    return out

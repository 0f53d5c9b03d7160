"""``report/claims.csv``, ``report/recommendations.csv`` and ``report/claims.md`` of an experiment: the thin
outer layer that reads the inputs (:mod:`demuxlab.claims.db`), calls the pure evaluation, and writes the
three files (what ``demuxlab claims``, :mod:`demuxlab.cli.claims`, runs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from demuxlab.claims.catalog import CLAIMS
from demuxlab.claims.evaluation import evaluate_claims
from demuxlab.claims.markdown import render_markdown
from demuxlab.claims.recommendation import recommend
from demuxlab.jsonio import write_text_atomic
from demuxlab.vocab import METHOD_SSA

CLAIM_FIELDS = ("claim_id", "seed", "verdict", "host", "hardware", "reason", "evidence", "text", "scope")
RECOMMENDATION_FIELDS = (
    "host", "work_us", "connections", "msg_size", "rate", "client_threads", "pattern", "notifier", "threads",
    "mean", "ci_low", "ci_high", "n", "candidates", "tied_with", "model_source", "model_best", "model_agrees",
    "model_disagreements", "model_missing", "note",
)  # fmt: skip


def write_claims(
    spec: Any,
    out_dir: Path,
    method: str = METHOD_SSA,
    url: str | None = None,
    extra_notes: Sequence[str] = (),
    why_missing: Mapping[tuple[str, str], str] | None = None,
) -> list[Path]:
    """Evaluate every claim and the recommendation for ``spec`` from the database; write the three files
    (``extra_notes``: more lines for claims.md's head, e.g. an adaptive sweep's model-only points;
    ``why_missing``: why a pattern × notifier has no calibration, for the recommendation's
    ``model_missing``)."""
    from demuxlab.claims.db import load_inputs
    from demuxlab.report import write_csv

    inputs = load_inputs(spec.name, spec.sha256, method, url)
    verdicts = evaluate_claims(inputs.points, inputs.predictions, inputs.facts)
    recs = recommend(inputs.points, inputs.predictions, why_missing)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "claims.csv", out_dir / "recommendations.csv", out_dir / "claims.md"]
    write_csv([v.to_row() for v in verdicts], paths[0], CLAIM_FIELDS)
    write_csv([r.to_row() for r in recs], paths[1], RECOMMENDATION_FIELDS)
    notes = [f"experiment `{spec.name}` (spec {spec.sha256[:12]}), reproduces: {spec.reproduces}"]
    notes.append(
        f"{len(inputs.points)} measured points with a successful run, "
        f"{len(inputs.predictions)} model predictions ({method})"
    )
    if inputs.failed_points:
        notes.append(f"left out (no successful run): {', '.join(inputs.failed_points)}")
    notes += extra_notes
    write_text_atomic(paths[2], render_markdown(spec.name, verdicts, recs, inputs.facts, notes) + "\n")
    return paths


__all__ = ["CLAIMS", "CLAIM_FIELDS", "RECOMMENDATION_FIELDS", "render_markdown", "write_claims"]

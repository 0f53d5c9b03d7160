"""``report/claims.csv``, ``report/recommendations.csv`` and ``report/claims.md`` of an experiment, and the
``demuxlab claims`` command the workflow's ``claims`` rule calls."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from demuxlab.claims import (
    CLAIMS,
    ClaimVerdict,
    Recommendation,
    evaluate_claims,
    fmt_est,
    fmt_rate,
    hardware_of,
    recommend,
)

CLAIM_FIELDS = ("claim_id", "seed", "verdict", "host", "hardware", "reason", "evidence", "text", "scope")
RECOMMENDATION_FIELDS = (
    "host", "work_us", "connections", "msg_size", "rate", "client_threads", "pattern", "notifier", "threads",
    "mean", "ci_low", "ci_high", "n", "candidates", "tied_with", "model_source", "model_best", "model_agrees",
    "model_disagreements", "note",
)  # fmt: skip


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(
    title: str,
    verdicts: Sequence[ClaimVerdict],
    recommendations: Sequence[Recommendation],
    facts: dict[str, dict[str, Any]],
    notes: Sequence[str] = (),
) -> str:
    """claims.md: a summary table, each claim with its evidence, then the recommendation per workload."""
    out = [f"# Seed claims: {title}", ""]
    hosts = sorted({v.host for v in verdicts})
    for host in hosts:
        hw = hardware_of(facts.get(host)) or "hardware unknown"
        out.append(f"- server host `{host or 'unknown'}`: {hw}")
    out += [*(f"- {n}" for n in notes), ""]
    out += [
        "Verdicts follow from the 95 % confidence intervals of the measured means (docs/claims.md): "
        "*holds* / *refuted* when the intervals decide, *inconclusive* when they overlap, *not testable* "
        "when the experiment lacks the points (and why).",
        "",
        "| claim | seed | verdict | why |",
        "|---|---|---|---|",
    ]
    for v in verdicts:
        out.append(
            f"| [{v.claim_id}](#{v.claim_id.lower().replace('.', '')}) | {v.seed} | **{v.verdict}** "
            f"| {_md_cell(v.reason)} |"
        )
    out.append("")
    for v in verdicts:
        out += [
            f"## {v.claim_id}",
            "",
            f"> {v.text} (seed {v.seed})",
            "",
            f"- **verdict: {v.verdict}**" + (f" (host `{v.host}`)" if len(hosts) > 1 else ""),
            f"- why: {v.reason}",
            f"- tested as: {v.scope}",
        ]
        if v.evidence:
            out.append("- evidence (mean [95 % CI], n runs):")
            out += [f"  - {e}" for e in v.evidence]
        out.append("")
    out += ["## Recommendation", ""]
    if not recommendations:
        out += ["No successful measured point: nothing to recommend.", ""]
    else:
        out += [
            "The best measured pattern × notifier × threads per workload (highest mean throughput); designs "
            "whose interval overlaps the best one's are statistically tied with it. Where CTMC predictions "
            "exist, the model's own first choice is given, and every point where the model lies outside the "
            "measurement's interval (and the measurement outside the model's) is named.",
            "",
            "| host | workload | best | throughput (95 % CI) | n | tied with | model's first | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in recommendations:
            tied = ", ".join(p.label for p in r.tied) or "—"
            model = r.model_best or "—"
            out.append(
                f"| {r.host or '?'} | {r.workload} | {r.best.label} | {fmt_est(r.best.est)} | {r.best.n} | "
                f"{_md_cell(tied)} | {_md_cell(model)} | {_md_cell(r.note) or '—'} |"
            )
        out.append("")
        dis = [(r, d) for r in recommendations for d in r.disagreements]
        if dis:
            out += ["Model and measurement disagree beyond their intervals at:", ""]
            out += [f"- {r.workload}: {d}" for r, d in dis]
            out.append("")
    return "\n".join(out)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_claims(spec: Any, out_dir: Path, method: str = "ssa", url: str | None = None) -> list[Path]:
    """Evaluate every claim and the recommendation for ``spec`` from the database; write the three files."""
    from demuxlab.claims.db import load_inputs
    from demuxlab.report import write_csv

    inputs = load_inputs(spec.name, spec.sha256, method, url)
    verdicts = evaluate_claims(inputs.points, inputs.predictions, inputs.facts)
    recs = recommend(inputs.points, inputs.predictions)
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
    _write_text(paths[2], render_markdown(spec.name, verdicts, recs, inputs.facts, notes) + "\n")
    return paths


@click.command("claims")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--out-dir", required=True, type=click.Path(file_okay=False), help="Where the files go.")
@click.option(
    "--method",
    default="ssa",
    type=click.Choice(["ssa", "fluid", "exact"]),
    show_default=True,
    help="Which stored predictions the model claims and the recommendation use.",
)
def claims(spec: str, out_dir: str, method: str) -> None:
    """A verdict for every seed claim and the best design per workload: claims.csv, claims.md,
    recommendations.csv."""
    from demuxlab.spec import load_spec

    loaded = load_spec(Path(spec))
    for path in write_claims(loaded, Path(out_dir), method):
        click.echo(f"wrote {path}", err=True)


__all__ = ["CLAIMS", "claims", "fmt_rate", "render_markdown", "write_claims"]

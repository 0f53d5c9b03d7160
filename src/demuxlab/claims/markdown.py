"""``claims.md``: a summary table of the verdicts, each claim with its evidence, then the recommendation per
workload.

Pure: verdicts and recommendations in, Markdown text out (:mod:`demuxlab.claims.report` writes it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from demuxlab.claims.estimates import fmt_est
from demuxlab.claims.evaluation import ClaimVerdict, hardware_of
from demuxlab.claims.inputs import MeasuredPoint
from demuxlab.claims.recommendation import Recommendation


def flagged_note(flagged: Sequence[MeasuredPoint]) -> str:
    """Whether runs a validity check failed (demuxlab.validity) are behind a verdict: the points its
    evidence cites that have flagged runs (:attr:`ClaimVerdict.flagged`, from the points' ``runs_flagged``
    and ``flags``), each with its workload where two share a label, or none."""
    if not flagged:
        return "flagged runs: none among the points of the evidence"
    labels = Counter(p.label for p in dict.fromkeys(flagged))
    shown = "; ".join(
        f"{p.label}{f' ({p.workload})' if labels[p.label] > 1 else ''} {p.runs_flagged} of {p.n} ({p.flags})"
        for p in sorted(dict.fromkeys(flagged), key=lambda p: (p.label, p.workload.sort_key()))
    )
    return f"flagged runs behind this verdict (counted in the means, never left out): {shown}"


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
        "Verdicts follow from the measured means over their runs (docs/claims.md): one mean is above "
        "another when Welch's t-test says they differ (p < 0.05; the Ranking page's decision); *holds* / "
        "*refuted* when the data decide, *inconclusive* when they cannot (no difference, or a single run), "
        "*not testable* when the experiment lacks the points (and why). A run that fails a validity check "
        "(its samples not independent, a trend, arrivals not Poisson, server and client on one core, the "
        "frequency moving: report/checks.csv) is flagged, never left out: each verdict says which of its "
        "points have flagged runs.",
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
            f"- {flagged_note(v.flagged)}",
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
            "The best measured pattern × notifier × threads per workload (highest mean throughput among the "
            "points whose server threads fit the server's CPUs; oversubscribed points are named, never "
            "recommended); designs Welch's t-test cannot tell from it (p ≥ 0.05) are statistically tied "
            "with it. Where CTMC predictions exist, the model's own first choice is given, and every point "
            "where the model lies outside the measurement's interval (and the measurement outside the "
            "model's) is named.",
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

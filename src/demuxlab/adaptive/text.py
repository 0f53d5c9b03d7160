"""The replay's printed table (``demuxlab adaptive replay``). Pure: a :class:`~demuxlab.adaptive.replay.
Replay` in, lines out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from demuxlab.adaptive.replay import Replay
from demuxlab.spec.adaptive import Adaptive


def describe_settings(settings: Adaptive) -> str:
    bits = []
    if settings.repeats is not None:
        r = settings.repeats
        bits.append(f"repeats (min {r.min}, max {r.max}, ±{r.target_rel:.1%})")
    if settings.steady is not None:
        s = settings.steady
        bits.append(f"steady (min {s.min_s:g} s, ±{s.target_rel:.1%})")
    if settings.points is not None:
        p = settings.points
        bits.append(f"points (coarse {p.coarse}, model within ±{p.target_rel:.1%})")
    budget = "the fixed design's" if settings.budget_h is None else f"{settings.budget_h:g} run-hours"
    return (", ".join(bits) or "none") + f"; budget {budget}"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    out = ["  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out


def replay_lines(rep: Replay) -> list[str]:
    c = rep.comparison
    lines = [
        f"mechanisms: {describe_settings(rep.design.settings)}",
        f"run-minutes: adaptive {c.adaptive_s / 60:.1f}, full design {c.full_s / 60:.1f}: "
        f"{c.saving:.2f}x fewer (runs {c.runs} / {c.full_runs}, points {c.points} / {c.full_points}, "
        f"{c.rounds} rounds)",
        f"stop: {c.stop}",
        f"verdicts: {c.verdicts_agree} of {len(c.verdicts)} the same",
    ]
    lines += _table(
        ("claim", "host", "full design", "adaptive"),
        [(cl, h, f, a + ("" if f == a else "  <- differs")) for cl, h, f, a in c.verdicts],
    )
    lines.append(
        f"best design per workload: {c.best_agree} of {len(c.best)} the same, {c.best_tied} of {len(c.best)} "
        "the full design's best or tied with it"
    )
    lines += _table(
        ("host", "workload", "full design", "adaptive"),
        [
            (h, w, f, a + ("" if f == a else ("  (tied)" if t else "  <- differs")))
            for h, w, f, a, t in c.best
        ],
    )
    big = c.largest_gap
    if big is None:
        lines.append("largest gap: no measured point has a full-design interval")
    else:
        lines.append(
            f"largest gap: {big[1]:.2f} half-widths of the full design's 95 % interval ({big[0]}); "
            f"{c.outside} of {len(c.gaps)} measured points outside that interval"
        )
    if rep.shapes.notes:
        lines.append("models: " + "; ".join(n for n in rep.shapes.notes if "no model" not in n))
    return lines


def decisions_notes(doc: Mapping[str, Any]) -> list[str]:
    """Lines for claims.md: how much of the grid an adaptive sweep measured, and which points are model-only
    (the verdicts and the recommendation use measured points only)."""
    grid = doc.get("grid", [])
    model_only = [g["point_key"] for g in grid if not g.get("measured")]
    spent, full = doc["run_s"]["spent"], doc["run_s"]["fixed_design"]
    out = [
        f"adaptive sweep: {len(grid) - len(model_only)} of {len(grid)} points measured in "
        f"{spent / 60:.1f} of the fixed design's {full / 60:.1f} run-minutes ({doc.get('stop')}); "
        "the verdicts and the recommendation use measured points only"
    ]
    if model_only:
        out.append(f"model-only (never measured, never evidence): {', '.join(model_only)}")
    return out

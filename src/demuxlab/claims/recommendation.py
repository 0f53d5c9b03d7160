"""The best measured design per host and workload, its statistical ties, and what the model says:
:func:`recommend`.

Pure: plain rows (or typed values) in, :class:`Recommendation` values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from demuxlab.claims.context import Context, by_key, model_source, peak
from demuxlab.claims.estimates import above, fmt_est, fmt_rate
from demuxlab.claims.evaluation import parse_inputs
from demuxlab.claims.inputs import MeasuredPoint, ModelPrediction, Workload


@dataclass(frozen=True)
class Recommendation:
    """The best measured design of one workload on one host, its statistical ties, and what the model says."""

    host: str
    workload: Workload
    best: MeasuredPoint
    tied: tuple[MeasuredPoint, ...]  # intervals overlap the best one's: not distinguishable from it
    candidates: int
    model_source: str | None
    model_best: str | None  # the design the model ranks first among the modeled points
    # The model's first is the best or tied with it; judged (not None) only where every measured design of
    # the workload has predictions from model_source (issue 43: not "among modeled points").
    model_agrees: bool | None
    disagreements: tuple[str, ...]  # points where |model − measurement| exceeds both intervals
    model_missing: tuple[str, ...] = ()  # designs without a prediction from model_source, each with why

    @property
    def note(self) -> str:
        bits = []
        if self.tied:
            bits.append("statistically tied with " + ", ".join(p.label for p in self.tied))
        if self.best.oversubscribed:
            bits.append(
                f"oversubscribed: {self.best.threads} threads on {self.best.server_cpus} server CPU(s)"
            )
        if self.model_agrees is False:
            bits.append(f"the model ({self.model_source}) ranks {self.model_best} first instead")
        if self.model_missing:
            bits.append(
                f"the model ({self.model_source}) is not judged: no prediction for "
                + "; ".join(self.model_missing)
            )
        if self.disagreements:
            bits.append(f"model outside the data's CI at {len(self.disagreements)} point(s)")
        return "; ".join(bits)

    def to_row(self) -> dict[str, Any]:
        wl = self.workload
        return {
            "host": self.host,
            "work_us": wl.work_us,
            "connections": wl.connections,
            "msg_size": wl.msg_size,
            "rate": wl.rate,
            "client_threads": wl.client_threads,
            "pattern": self.best.pattern,
            "notifier": self.best.notifier,
            "threads": self.best.threads,
            "mean": self.best.mean,
            "ci_low": self.best.ci_low,
            "ci_high": self.best.ci_high,
            "n": self.best.n,
            "candidates": self.candidates,
            "tied_with": " ".join(p.label.replace(" ", "/") for p in self.tied),
            "model_source": self.model_source,
            "model_best": self.model_best,
            "model_agrees": self.model_agrees,
            "model_disagreements": " | ".join(self.disagreements),
            "model_missing": " | ".join(self.model_missing),
            "note": self.note,
        }


def recommend(
    points: Iterable[Mapping[str, Any] | MeasuredPoint],
    predictions: Iterable[Mapping[str, Any] | ModelPrediction] | None = None,
    why_missing: Mapping[tuple[str, str], str] | None = None,
) -> list[Recommendation]:
    """Per host and workload: the pattern × notifier × threads with the highest mean throughput.

    ``why_missing`` says, per (pattern, notifier), why a design has no prediction (its calibration's refusal
    with the figure, no calibration runs): a row whose designs are not all predicted lists them with it."""
    pts, preds = parse_inputs(points, predictions)
    ctx = Context(pts, preds)
    source = model_source(ctx)
    out = []
    groups = by_key(pts, lambda p: (p.host, p.workload))
    for (host, wl), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        best = peak(group)
        tied = tuple(
            sorted(
                (
                    p
                    for p in group
                    if p is not best and best.est.known and p.est.known and not above(best.est, p.est)
                ),
                key=lambda p: -p.mean,
            )
        )
        model_best = None
        agrees = None
        missing: tuple[str, ...] = ()
        disagreements: list[str] = []
        if source is not None:
            modeled = [(p, ctx.prediction(p, source)) for p in group]
            have = [(p, m) for p, m in modeled if m is not None]
            if have:
                mp, mm = max(have, key=lambda x: x[1].mean)
                model_best = f"{mp.label} ({fmt_rate(mm.mean)} msg/s predicted)"
                missing = _missing(modeled, source, why_missing or {})
                agrees = (
                    None
                    if missing
                    else mp is best or (best.est.known and mp.est.known and not above(best.est, mp.est))
                )
                for p, m in have:
                    if p.est.known and (above(m.est, p.est) or above(p.est, m.est)):
                        err = (m.mean - p.mean) / p.mean if p.mean else math.inf
                        disagreements.append(
                            f"{p.label}: model {fmt_est(m.est)} vs measured {fmt_est(p.est)} ({err:+.1%})"
                        )
        out.append(
            Recommendation(
                host, wl, best, tied, len(group), source, model_best, agrees, tuple(disagreements), missing
            )
        )
    return out


def _missing(
    modeled: list[tuple[MeasuredPoint, ModelPrediction | None]],
    source: str,
    why: Mapping[tuple[str, str], str],
) -> tuple[str, ...]:
    """The designs (pattern/notifier) with a measured point and no ``source`` prediction for it, each with
    why (``why``; else that there is none)."""
    lacking = sorted({(p.pattern, p.notifier) for p, m in modeled if m is None})
    return tuple(f"{pat}/{n} ({why.get((pat, n), f'no {source} prediction')})" for pat, n in lacking)

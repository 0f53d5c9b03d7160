"""What a claim's test sees and returns: the :class:`Context` of one host's points and predictions, the
:class:`Part` verdicts a test combines, the :class:`Claim` entry, and the selection helpers every test
shares (usable points, peaks, grouping, the reason a claim is not testable).

Pure: typed values in, typed values out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from demuxlab.claims.estimates import above
from demuxlab.claims.inputs import MeasuredPoint, ModelPrediction
from demuxlab.vocab import HOLDS, INCONCLUSIVE, NOT_TESTABLE, REFUTED, SOURCE_CALIBRATION, SOURCE_PAPER

# -- outcomes ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """The verdict of one group (a workload, a notifier) of a claim's test, with its evidence lines and the
    measured points they cite (from which a verdict says, from the data, which of them have flagged runs)."""

    verdict: str
    reason: str
    evidence: tuple[str, ...] = ()
    points: tuple[MeasuredPoint, ...] = ()


def combine(parts: Sequence[Part], none_reason: str) -> Part:
    """Refuted if any part refutes, holds if every testable part holds, else inconclusive."""
    testable = [p for p in parts if p.verdict != NOT_TESTABLE]
    evidence = tuple(e for p in parts for e in p.evidence)
    points = tuple(dict.fromkeys(x for p in parts for x in p.points))
    if not testable:
        reasons = sorted({p.reason for p in parts}) or [none_reason]
        return Part(NOT_TESTABLE, "; ".join(reasons), evidence, points)
    for verdict in (REFUTED, INCONCLUSIVE):
        hit = [p for p in testable if p.verdict == verdict]
        if hit:
            return Part(verdict, "; ".join(p.reason for p in hit), evidence, points)
    return Part(HOLDS, "; ".join(p.reason for p in testable), evidence, points)


# -- the context a claim's test sees -------------------------------------------------------------------------


@dataclass
class Context:
    points: list[MeasuredPoint]
    predictions: list[ModelPrediction] = field(default_factory=list)

    def select(
        self,
        *,
        patterns: Iterable[str] | None = None,
        notifiers: Iterable[str] | None = None,
        closed_loop: bool | None = None,
        work_us: float | None = None,
    ) -> list[MeasuredPoint]:
        pats = set(patterns) if patterns is not None else None
        nots = set(notifiers) if notifiers is not None else None
        out = []
        for p in self.points:
            if pats is not None and p.pattern not in pats:
                continue
            if nots is not None and p.notifier not in nots:
                continue
            if closed_loop is not None and (p.rate is None) != closed_loop:
                continue
            if work_us is not None and not math.isclose(p.work_us, work_us):
                continue
            out.append(p)
        return out

    def prediction(self, p: MeasuredPoint, source: str) -> ModelPrediction | None:
        """``p``'s prediction from ``source``: one for any host, or one made for ``p``'s own host (a
        hardware class's calibration), never another host's."""
        for pred in self.predictions:
            if pred.source == source and pred.host in (None, p.host) and pred.matches(p):
                return pred
        return None


@dataclass(frozen=True)
class Claim:
    """One seed claim: its id (``S<seed>.<name>``), the seed it comes from, its text, the scope it is tested
    in, and the test that judges it from a :class:`Context`."""

    id: str
    seed: str
    text: str
    scope: str
    test: Callable[[Context], Part]


def usable(points: Iterable[MeasuredPoint]) -> list[MeasuredPoint]:
    """The points whose threads fit the server's CPUs (thread-scaling tests leave the others out)."""
    return [p for p in points if not p.oversubscribed]


def cores_note(points: Sequence[MeasuredPoint]) -> str:
    cpus = sorted({p.server_cpus for p in points if p.server_cpus is not None})
    over = sorted({p.threads for p in points if p.oversubscribed})
    if not over:
        return ""
    return f"server had {'/'.join(map(str, cpus))} CPU(s): thread counts {ranges(over)} are oversubscribed"


def ranges(values: Sequence[int]) -> str:
    if not values:
        return "none"
    return f"{values[0]}" if len(values) == 1 else f"{values[0]}–{values[-1]}"


def by_key(
    points: Iterable[MeasuredPoint], key: Callable[[MeasuredPoint], Any]
) -> dict[Any, list[MeasuredPoint]]:
    out: dict[Any, list[MeasuredPoint]] = defaultdict(list)
    for p in points:
        out[key(p)].append(p)
    return dict(out)


def peak(points: Sequence[MeasuredPoint]) -> MeasuredPoint:
    return max(points, key=lambda p: (p.mean, -p.threads))


def peak_set(points: Sequence[MeasuredPoint]) -> tuple[list[int], bool]:
    """The thread counts indistinguishable from the peak (Welch's t-test cannot tell them from it) and whether
    the interval is known for all (False: one run somewhere, the peak cannot be placed)."""
    best = peak(points)
    if not all(p.est.known for p in points):
        return [best.threads], False
    return sorted(p.threads for p in points if p is best or not above(best.est, p.est)), True


def need(what: str, pts: Sequence[MeasuredPoint], ctx: Context, work0: bool = False) -> str:
    """The reason a claim is not testable, naming what the experiment lacks."""
    works = sorted({p.work_us for p in ctx.points})
    if work0 and ctx.points and 0 not in works:
        return f"needs {what} at 0 µs work; this experiment has work {', '.join(f'{w:g}' for w in works)} µs"
    note = cores_note([p for p in ctx.points])
    return f"needs {what}" + (f" ({note})" if note else "; not in this experiment")


def model_source(ctx: Context) -> str | None:
    """The rates source the model claims use: the calibrated rates where there are any, else the paper's."""
    sources = {p.source for p in ctx.predictions}
    if SOURCE_CALIBRATION in sources:
        return SOURCE_CALIBRATION
    return SOURCE_PAPER if SOURCE_PAPER in sources else None

"""Seed 003's claim (the emulated proactor against the reactor), and its test."""

from __future__ import annotations

from demuxlab.claims.context import Claim, Context, Part, by_key, combine, need, peak, usable
from demuxlab.claims.estimates import Est, above, fmt_ratio, ratio
from demuxlab.claims.inputs import MeasuredPoint, describe
from demuxlab.vocab import HOLDS, INCONCLUSIVE, NOT_TESTABLE, REFUTED

PROACTOR_RANGE = (1.10, 1.35)  # "10–35 % faster"


def _s3_proactor(ctx: Context) -> Part:
    pts = usable(ctx.select(patterns=("proactor", "reactor")))
    parts = []
    groups = by_key(pts, lambda p: (p.notifier, p.workload))
    ratios: list[tuple[str, Est]] = []
    cited: list[MeasuredPoint] = []  # the peaks the evidence cites
    peaks: list[tuple[Est, Est]] = []  # (the proactor's, the reactor's) per workload
    for (notifier, wl), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        pro = [p for p in group if p.pattern == "proactor"]
        rea = [p for p in group if p.pattern == "reactor"]
        if pro and rea:
            r = ratio(peak(pro).est, peak(rea).est)
            ratios.append((f"{notifier}, {wl}: {describe(peak(pro))} vs {describe(peak(rea))}", r))
            peaks.append((peak(pro).est, peak(rea).est))
            cited += [peak(pro), peak(rea)]
    if not ratios:
        return Part(NOT_TESTABLE, need("the emulated proactor and the reactor over one notifier", pts, ctx))
    ev = tuple(f"{what}: ratio {fmt_ratio(r)}" for what, r in ratios)
    # slower or faster by the one decision (Welch), not by the ratio's interval
    slower = [1 for p, r in peaks if above(r, p)]
    if slower:
        parts.append(Part(REFUTED, f"the proactor is slower in {len(slower)} workload(s)", ev, tuple(cited)))
    elif all(above(p, r) for p, r in peaks):
        parts.append(Part(HOLDS, "never slower", ev, tuple(cited)))
    else:
        parts.append(
            Part(
                INCONCLUSIVE,
                "never slower: tied (Welch's t-test, p ≥ 0.05) in some workloads",
                ev,
                tuple(cited),
            )
        )
    if all(r.known for _, r in ratios):
        avg = Est(
            sum(r.mean for _, r in ratios) / len(ratios),
            sum(r.lo or 0.0 for _, r in ratios) / len(ratios),
            sum(r.hi or 0.0 for _, r in ratios) / len(ratios),
        )
        lo_b, hi_b = PROACTOR_RANGE
        assert avg.lo is not None and avg.hi is not None
        txt = f"mean proactor/reactor ratio {fmt_ratio(avg)} over {len(ratios)} workload(s)"
        if avg.lo >= lo_b and avg.hi <= hi_b:
            parts.append(Part(HOLDS, txt + f", within {lo_b:g}–{hi_b:g}"))
        elif avg.hi < lo_b or avg.lo > hi_b:
            parts.append(Part(REFUTED, txt + f", outside {lo_b:g}–{hi_b:g}"))
        else:
            parts.append(Part(INCONCLUSIVE, txt + f", overlaps the {lo_b:g}–{hi_b:g} bounds"))
    else:
        parts.append(Part(INCONCLUSIVE, "single runs: no interval for the mean ratio"))
    return combine(parts, "")


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "S3.emulated-proactor",
        "003",
        "The emulated proactor is 10–35 % faster than the reactor, and never slower.",
        f"proactor (best thread count) vs reactor over the same notifier, per workload; mean ratio within "
        f"{PROACTOR_RANGE[0]:g}–{PROACTOR_RANGE[1]:g}, no workload significantly below 1",
        _s3_proactor,
    ),
)

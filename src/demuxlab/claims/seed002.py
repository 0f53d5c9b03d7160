"""Seed 002's claims (the wrong architecture is worse than none; distributed demultiplexing scales),
and their tests."""

from __future__ import annotations

from demuxlab.claims.context import Claim, Context, Part, by_key, combine, need, peak, usable
from demuxlab.claims.estimates import above, fmt_ratio, ratio
from demuxlab.claims.inputs import describe
from demuxlab.vocab import HOLDS, INCONCLUSIVE, REFUTED

DISTRIBUTED = ("multireactor",)


def _s2_wrong_architecture(ctx: Context) -> Part:
    pts = usable(ctx.select(patterns=("hsha", "reactor"), closed_loop=True))
    parts = []
    groups = by_key(pts, lambda p: (p.notifier, p.workload))
    for (notifier, wl), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        reactor = [p for p in group if p.pattern == "reactor"]
        hsha = sorted((p for p in group if p.pattern == "hsha"), key=lambda p: p.threads)
        if not (reactor and hsha):
            continue
        r = peak(reactor)
        where = f"{notifier}, {wl}"
        ev = (f"{where}: {describe(r)}", *(f"{where}: {describe(h)}" for h in hsha))
        cited = (r, *hsha)
        worse = [h.threads for h in hsha if above(r.est, h.est)]
        if worse:
            parts.append(
                Part(HOLDS, f"{where}: the single-threaded reactor beats HSHA at {worse} threads", ev, cited)
            )
        elif all(above(h.est, r.est) for h in hsha):
            parts.append(Part(REFUTED, f"{where}: HSHA beats the reactor at every thread count", ev, cited))
        else:
            parts.append(Part(INCONCLUSIVE, f"{where}: tied (Welch's t-test, p ≥ 0.05)", ev, cited))
    return combine(parts, need("HSHA and the reactor over one notifier", pts, ctx))


def _s2_distributed_scales(ctx: Context) -> Part:
    pts = usable(ctx.select(patterns=DISTRIBUTED, closed_loop=True))
    parts = []
    groups = by_key(pts, lambda p: (p.design, p.workload))
    for (design, wl), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        if len({p.threads for p in group}) < 2:
            continue
        lo = min(group, key=lambda p: p.threads)
        hi = max(group, key=lambda p: p.threads)
        r = ratio(hi.est, lo.est)
        where = f"{design}, {wl}"
        ev = (f"{where}: {describe(lo)} → {describe(hi)}: {fmt_ratio(r)}",)
        cited = (lo, hi)
        # the one decision (Welch): not "the ratio's interval excludes 1", which called differences the
        # Ranking finds (overlapping 95 % intervals, p < 0.05) inconclusive
        if above(hi.est, lo.est):
            parts.append(
                Part(HOLDS, f"{where}: t{lo.threads}→t{hi.threads} speed-up {fmt_ratio(r)}", ev, cited)
            )
        elif above(lo.est, hi.est):
            parts.append(
                Part(REFUTED, f"{where}: throughput falls from t{lo.threads} to t{hi.threads}", ev, cited)
            )
        else:
            parts.append(
                Part(
                    INCONCLUSIVE,
                    f"{where}: t{lo.threads} and t{hi.threads} tied (Welch's t-test, p ≥ 0.05)",
                    ev,
                    cited,
                )
            )
    return combine(parts, need("a multireactor at ≥ 2 thread counts", pts, ctx))


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "S2.wrong-architecture",
        "002",
        "The wrong multi-threading architecture is worse than none: the reactor partly beats HSHA.",
        "the single-threaded reactor vs HSHA at each thread count, same notifier and workload (closed loop)",
        _s2_wrong_architecture,
    ),
    Claim(
        "S2.distributed-demux-scales",
        "002",
        "Distributing event demultiplexing (and the event sources) over threads scales.",
        "the multireactor's throughput at its most vs its fewest threads (closed loop)",
        _s2_distributed_scales,
    ),
)

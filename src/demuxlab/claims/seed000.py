"""Seed 000's claims (the notifier study: HSHA and LF over select, poll and epoll), and their tests."""

from __future__ import annotations

from demuxlab.claims.context import (
    Claim,
    Context,
    Part,
    by_key,
    combine,
    cores_note,
    need,
    peak,
    peak_set,
    ranges,
    usable,
)
from demuxlab.claims.estimates import Est, above, fmt_ratio, ratio
from demuxlab.claims.inputs import MeasuredPoint, describe, kernel_costs
from demuxlab.vocab import HOLDS, INCONCLUSIVE, NOT_TESTABLE, REFUTED

SPEEDUP_MIN = 1.10  # "changes peak throughput": by more than 10 %
NOTIFIER_MAX = 2.2  # "by up to 2×", with the same 10 % materiality as SPEEDUP_MIN
SEED000_SCOPE = "closed loop, 0 µs work (seed 000 §4)"


def _s0_notifier_2x(ctx: Context) -> Part:
    pts = usable(
        ctx.select(patterns=("hsha", "lf"), notifiers=("select", "epoll-et"), closed_loop=True, work_us=0)
    )
    parts = []
    for wl, group in sorted(by_key(pts, lambda p: p.workload).items(), key=lambda kv: kv[0].sort_key()):
        ratios: list[tuple[str, Est, MeasuredPoint, MeasuredPoint]] = []
        for pattern, pp in sorted(by_key(group, lambda p: p.pattern).items()):
            sel = [p for p in pp if p.notifier == "select"]
            et = [p for p in pp if p.notifier == "epoll-et"]
            if sel and et:
                a, b = peak(et), peak(sel)
                ratios.append((pattern, ratio(a.est, b.est), a, b))
        if not ratios:
            continue
        ev = tuple(
            f"{wl}: {pat} peak epoll-et/select = {fmt_ratio(r)} ({describe(a)} vs {describe(b)})"
            for pat, r, a, b in ratios
        )
        cited = tuple(x for _, _, a, b in ratios for x in (a, b))
        if any(r.lo is not None and r.lo > NOTIFIER_MAX for _, r, _, _ in ratios):
            parts.append(
                Part(REFUTED, f"{wl}: epoll-et's peak is more than {NOTIFIER_MAX:g}× select's", ev, cited)
            )
        elif all(r.hi is not None and r.hi < SPEEDUP_MIN for _, r, _, _ in ratios):
            parts.append(
                Part(
                    REFUTED,
                    f"{wl}: epoll-et's peak is less than {SPEEDUP_MIN - 1:.0%} above select's",
                    ev,
                    cited,
                )
            )
        elif any(r.lo is not None and r.lo > SPEEDUP_MIN for _, r, _, _ in ratios):
            best = max(ratios, key=lambda x: x[1].mean)
            parts.append(
                Part(HOLDS, f"{wl}: {best[0]} epoll-et/select peak ratio {fmt_ratio(best[1])}", ev, cited)
            )
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{wl}: the peaks' intervals overlap the 1.1×/2× bounds", ev, cited)
            )
    return combine(parts, need("HSHA or LF over both select and epoll-et", pts, ctx, work0=True))


def _s0_hsha_peaks_earlier(ctx: Context) -> Part:
    pts = usable(ctx.select(patterns=("hsha", "lf"), closed_loop=True))
    parts = []
    groups = by_key(pts, lambda p: (p.notifier, p.workload))
    for (notifier, wl), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        hsha = [p for p in group if p.pattern == "hsha"]
        lf = [p for p in group if p.pattern == "lf"]
        if len(hsha) < 3 or len(lf) < 3:
            continue
        hs, hs_known = peak_set(hsha)
        ls, lf_known = peak_set(lf)
        h_open = max(hs) == max(p.threads for p in hsha)
        l_open = max(ls) == max(p.threads for p in lf)
        ev = (
            f"{notifier}, {wl}: HSHA peak {describe(peak(hsha))}, indistinguishable at threads {hs}"
            + (" (rising at the sweep's end)" if h_open else ""),
            f"{notifier}, {wl}: LF peak {describe(peak(lf))}, indistinguishable at threads {ls}"
            + (" (rising at the sweep's end)" if l_open else ""),
        )
        where = f"{notifier}, {wl}"
        cited = (*(p for p in hsha if p.threads in hs), *(p for p in lf if p.threads in ls))
        if not (hs_known and lf_known):
            parts.append(
                Part(INCONCLUSIVE, f"{where}: single runs, no intervals to place the peaks", ev, cited)
            )
        elif max(hs) < min(ls) and not h_open:
            parts.append(
                Part(HOLDS, f"{where}: HSHA peaks at {ranges(hs)} threads, LF at {ranges(ls)}", ev, cited)
            )
        elif min(hs) >= max(ls) and not l_open:
            parts.append(
                Part(REFUTED, f"{where}: HSHA peaks at {ranges(hs)} threads, LF at {ranges(ls)}", ev, cited)
            )
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{where}: the peak ranges {hs} and {ls} overlap or are open", ev, cited)
            )
    return combine(parts, need("HSHA and LF at ≥ 3 thread counts each over one notifier", pts, ctx))


def _s0_hsha_lt_worse(ctx: Context) -> Part:
    pts = usable(
        ctx.select(patterns=("hsha",), notifiers=("select", "epoll-lt"), closed_loop=True, work_us=0)
    )
    parts = []
    for wl, group in sorted(by_key(pts, lambda p: p.workload).items(), key=lambda kv: kv[0].sort_key()):
        lt = [p for p in group if p.notifier == "epoll-lt"]
        sel = [p for p in group if p.notifier == "select"]
        if not (lt and sel):
            continue
        a, b = peak(lt), peak(sel)
        ev: tuple[str, ...] = (f"{wl}: peaks {describe(a)} vs {describe(b)}",)
        cited = (a, b)
        costs = [kernel_costs(p) for p in (a, b)]
        if all(costs):
            # Seed 000 §5.1: the re-activation is a system call per message over epoll-lt (EPOLL_CTL_MOD,
            # the red-black tree under its lock), a bit set in user space over select.
            why = "re-activation: epoll_ctl per message over epoll-lt, a bit in user space over select"
            ev += (f"{wl}: the kernel's costs at the peaks ({why}): {costs[0]}; {costs[1]}",)
        if above(b.est, a.est):
            parts.append(
                Part(HOLDS, f"{wl}: HSHA's peak over select is above its peak over epoll-lt", ev, cited)
            )
        elif above(a.est, b.est):
            parts.append(
                Part(REFUTED, f"{wl}: HSHA's peak over epoll-lt is above its peak over select", ev, cited)
            )
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{wl}: the two peaks are tied (Welch's t-test, p ≥ 0.05)", ev, cited)
            )
    return combine(parts, need("HSHA over both select and epoll-lt", pts, ctx, work0=True))


def _s0_lf_beyond_11(ctx: Context) -> Part:
    raw = ctx.select(patterns=("hsha", "lf"), notifiers=("epoll-et",), closed_loop=True, work_us=0)
    pts = [p for p in usable(raw) if p.threads > 11]
    parts = []
    for wl, group in sorted(by_key(pts, lambda p: p.workload).items(), key=lambda kv: kv[0].sort_key()):
        h = {p.threads: p for p in group if p.pattern == "hsha"}
        lf = {p.threads: p for p in group if p.pattern == "lf"}
        common = sorted(set(h) & set(lf))
        if not common:
            continue
        ev = tuple(f"{wl}: t{t}: {describe(lf[t])} vs {describe(h[t])}" for t in common)
        cited = tuple(x for t in common for x in (lf[t], h[t]))
        if any(above(h[t].est, lf[t].est) for t in common):
            bad = [t for t in common if above(h[t].est, lf[t].est)]
            parts.append(Part(REFUTED, f"{wl}: HSHA beats LF at {bad} threads", ev, cited))
        elif all(above(lf[t].est, h[t].est) for t in common):
            parts.append(Part(HOLDS, f"{wl}: LF beats HSHA at every thread count {common}", ev, cited))
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{wl}: tied (Welch's t-test, p ≥ 0.05) at some of {common}", ev, cited)
            )
    over = [p for p in raw if p.threads > 11 and p.oversubscribed]
    if over and not parts:
        return Part(NOT_TESTABLE, f"needs ≥ 12 server CPUs for 12+ threads; {cores_note(over)}")
    return combine(parts, need("HSHA and LF over epoll-et at more than 11 threads", pts, ctx, work0=True))


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "S0.notifier-2x",
        "000",
        "The notifier changes peak throughput by up to 2× (select vs edge-triggered epoll).",
        f"HSHA and LF over select and epoll-et, {SEED000_SCOPE}; peak over thread counts; 'changes' = "
        f"epoll-et's peak more than {SPEEDUP_MIN - 1:.0%} above select's, 'up to 2×' = not more than "
        f"{NOTIFIER_MAX:g}×",
        _s0_notifier_2x,
    ),
    Claim(
        "S0.hsha-peaks-earlier",
        "000",
        "HSHA reaches its peak with fewer threads than LF (10 vs 13 threads).",
        "HSHA and LF over the same notifier and workload (closed loop), ≥ 3 thread counts each; a peak is "
        "every thread count Welch's t-test cannot tell from the best",
        _s0_hsha_peaks_earlier,
    ),
    Claim(
        "S0.hsha-epoll-lt-worse",
        "000",
        "HSHA over level-triggered epoll is worse than over select (re-activation in the critical stage).",
        f"HSHA peak over epoll-lt vs over select, {SEED000_SCOPE}",
        _s0_hsha_lt_worse,
    ),
    Claim(
        "S0.lf-beats-hsha-beyond-11",
        "000",
        "Beyond 11 threads LF performs better than HSHA.",
        f"HSHA and LF over epoll-et at every common thread count above 11, {SEED000_SCOPE}",
        _s0_lf_beyond_11,
    ),
)

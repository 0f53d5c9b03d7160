"""Seed 001's claims (the CTMC models of HSHA and LF, and LF against HSHA), and their tests."""

from __future__ import annotations

import itertools

from demuxlab.claims.context import Claim, Context, Part, by_key, combine, model_source, need, peak, usable
from demuxlab.claims.estimates import above, fmt_est, fmt_rate
from demuxlab.claims.inputs import describe
from demuxlab.vocab import HOLDS, INCONCLUSIVE, NOT_TESTABLE, REFUTED

MODEL_PEAK_TOL = 0.10  # "accurately predicts the peak": within 10 %


def _s1_model(ctx: Context) -> Part:
    source = model_source(ctx)
    if source is None:
        return Part(NOT_TESTABLE, "no model predictions (HSHA/LF points, closed loop)")
    pts = usable(ctx.select(patterns=("hsha", "lf"), closed_loop=True))
    parts = []
    groups = by_key(pts, lambda p: (p.design, p.workload))
    for (design, wl), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        pairs = [(p, ctx.prediction(p, source)) for p in sorted(group, key=lambda p: p.threads)]
        have = [(p, m) for p, m in pairs if m is not None]
        if len(have) < 2:
            continue
        where = f"{design}, {wl} ({source} rates)"
        ev = tuple(
            f"{where}: t{p.threads}: measured {fmt_est(p.est)}, n={p.n} · model {fmt_est(m.est)}"
            for p, m in have
        )
        # Peak: the measured peak against the model's highest prediction over the same thread counts.
        mp = peak([p for p, _ in have])
        pe = max((m for _, m in have), key=lambda m: m.mean).est
        if not mp.est.known:
            peak_part = Part(INCONCLUSIVE, f"{where}: measured peak has one run, no interval")
        else:
            assert mp.est.lo is not None and mp.est.hi is not None and pe.lo is not None and pe.hi is not None
            worst = max(abs(pe.hi - mp.est.lo), abs(mp.est.hi - pe.lo)) / mp.mean
            gap = max(0.0, pe.lo - mp.est.hi, mp.est.lo - pe.hi) / mp.mean
            err = (pe.mean - mp.mean) / mp.mean
            txt = (
                f"{where}: model peak {fmt_rate(pe.mean)} vs measured {fmt_rate(mp.mean)} "
                f"at t{mp.threads} ({err:+.1%})"
            )
            if worst <= MODEL_PEAK_TOL:
                peak_part = Part(HOLDS, txt)
            elif gap > MODEL_PEAK_TOL:
                peak_part = Part(REFUTED, txt + f", beyond {MODEL_PEAK_TOL:.0%}")
            else:
                peak_part = Part(INCONCLUSIVE, txt + f", within {MODEL_PEAK_TOL:.0%} only in part of the CIs")
        # Trend: up to the measured peak, every significant measured step has the model's direction.
        steps = [(a, b) for a, b in itertools.pairwise(have) if b[0].threads <= mp.threads]
        sig = [(a, b) for a, b in steps if above(b[0].est, a[0].est) or above(a[0].est, b[0].est)]
        wrong = [(a, b) for a, b in sig if (b[0].mean > a[0].mean) != (b[1].mean > a[1].mean)]
        if wrong:
            ts = ", ".join(f"t{a[0].threads}→t{b[0].threads}" for a, b in wrong)
            trend_part = Part(REFUTED, f"{where}: the model's trend is the wrong way at {ts}")
        elif sig:
            trend_part = Part(HOLDS, f"{where}: trend agrees at {len(sig)} significant step(s)")
        else:
            trend_part = Part(INCONCLUSIVE, f"{where}: no significant measured step up to the peak")
        parts.append(
            combine(
                [Part(peak_part.verdict, peak_part.reason, ev, tuple(p for p, _ in have)), trend_part], ""
            )
        )
    return combine(parts, need("HSHA or LF at ≥ 2 thread counts with predictions", pts, ctx))


def _s1_lf_beats_hsha(ctx: Context) -> Part:
    pts = usable(ctx.select(patterns=("hsha", "lf"), closed_loop=True))
    parts = []
    groups = by_key(pts, lambda p: (p.notifier, p.workload))
    for (notifier, wl), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        h = {p.threads: p for p in group if p.pattern == "hsha"}
        lf = {p.threads: p for p in group if p.pattern == "lf"}
        common = sorted(set(h) & set(lf))
        if not common:
            continue
        where = f"{notifier}, {wl}"
        ev = tuple(f"{where}: t{t}: {describe(lf[t])} vs {describe(h[t])}" for t in common)
        cited = tuple(x for t in common for x in (lf[t], h[t]))
        bad = [t for t in common if above(h[t].est, lf[t].est)]
        if bad:
            parts.append(Part(REFUTED, f"{where}: HSHA beats LF at {bad} threads", ev, cited))
        elif all(above(lf[t].est, h[t].est) for t in common):
            parts.append(
                Part(HOLDS, f"{where}: LF beats HSHA at every common thread count {common}", ev, cited)
            )
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{where}: tied (Welch's t-test, p ≥ 0.05) at some of {common}", ev, cited)
            )
    return combine(parts, need("HSHA and LF at a common thread count over one notifier", pts, ctx))


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "S1.model-peak-trend",
        "001",
        "The CTMC models, calibrated at the lowest concurrency, predict the peak throughput and the trend "
        "with increasing threads.",
        f"HSHA and LF points with predictions (calibrated rates, else the paper's); peak within "
        f"{MODEL_PEAK_TOL:.0%}; every significant measured step up to the peak in the model's direction",
        _s1_model,
    ),
    Claim(
        "S1.lf-beats-hsha-same-threads",
        "001",
        "LF performs better than HSHA at the same number of threads, for every workload.",
        "HSHA and LF over the same notifier and workload at each common thread count (closed loop)",
        _s1_lf_beats_hsha,
    ),
)

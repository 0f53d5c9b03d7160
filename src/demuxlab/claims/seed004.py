"""Seed 004's claim (poll's cost grows linearly with the descriptors, epoll's does not), and its test."""

from __future__ import annotations

from collections.abc import Sequence

from demuxlab.claims.context import Claim, Context, Part, by_key, combine
from demuxlab.claims.estimates import Est, fmt_est, fmt_g3
from demuxlab.claims.inputs import MeasuredPoint
from demuxlab.vocab import HOLDS, INCONCLUSIVE, NOT_TESTABLE, REFUTED

LINEAR_R2 = 0.9  # poll's cost vs descriptors: a straight line explains ≥ 90 % of the variance
EPOLL_SLOPE_FRAC = 0.1  # epoll's cost grows less than a tenth as fast as poll's


def _slope(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and R² of y against x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else 0.0
    r2 = (sxy * sxy / (sxx * syy)) if sxx and syy else 0.0
    return b, r2


def _cost(p: MeasuredPoint) -> Est:
    return Est(p.cost_us or 0.0, p.cost_ci_low, p.cost_ci_high)


def _growth(pts: Sequence[MeasuredPoint]) -> Est:
    """Cost growth per descriptor between the fewest and the most connections, with its interval."""
    a = min(pts, key=lambda p: p.connections)
    b = max(pts, key=lambda p: p.connections)
    dc = b.connections - a.connections
    assert a.cost_us is not None and b.cost_us is not None
    mean = (b.cost_us - a.cost_us) / dc
    if None in (a.cost_ci_low, a.cost_ci_high, b.cost_ci_low, b.cost_ci_high):
        return Est(mean, None, None)
    return Est(
        mean,
        (b.cost_ci_low - a.cost_ci_high) / dc,  # type: ignore[operator]
        (b.cost_ci_high - a.cost_ci_low) / dc,  # type: ignore[operator]
    )


def _kernel_costs(where: str, series_of: Sequence[tuple[str, Sequence[MeasuredPoint]]]) -> list[str]:
    """poll's scan of the descriptor array is kernel time in its call: the system CPU per message, where
    the runs read it (demuxlab.costs), shows where the growth is; with the system calls per message."""
    out = []
    for name, series in series_of:
        if all(p.sys_us_per_msg is not None for p in series):
            out.append(
                f"{where}: {name} system CPU per message (the kernel's share) "
                + ", ".join(f"c{p.connections}: {p.sys_us_per_msg:.3g}" for p in series)
                + " µs; system calls per message "
                + ", ".join(
                    f"c{p.connections}: {p.syscalls_per_msg:.2f}" if p.syscalls_per_msg is not None else "?"
                    for p in series
                )
            )
    return out


def _s4_poll_linear(ctx: Context) -> Part:
    pts = [p for p in ctx.select(notifiers=("poll", "epoll-lt", "epoll-et")) if p.cost_us is not None]
    if not any(p.rate is not None for p in pts):
        return Part(
            NOT_TESTABLE,
            "needs poll and epoll under open-loop load (mostly idle descriptors) at ≥ 3 connection counts "
            "with the server's CPU per message"
            + (
                "; this experiment's load is closed-loop"
                if ctx.points and all(p.rate is None for p in ctx.points)
                else ""
            ),
        )
    parts = []
    key = lambda p: (p.pattern, p.threads, p.work_us, p.msg_size, p.rate, p.client_threads)  # noqa: E731
    for k, group in sorted(
        by_key([p for p in pts if p.rate is not None], key).items(), key=lambda kv: str(kv[0])
    ):
        poll = sorted((p for p in group if p.notifier == "poll"), key=lambda p: p.connections)
        if len({p.connections for p in poll}) < 3:
            continue
        epolls = {
            n: sorted((p for p in group if p.notifier == n), key=lambda p: p.connections)
            for n in ("epoll-lt", "epoll-et")
        }
        epolls = {n: v for n, v in epolls.items() if len({p.connections for p in v}) >= 2}
        if not epolls:
            continue
        where = f"{k[0]} t{k[1]}, work {k[2]:g} µs, {k[3]} B, {k[4]:g} msg/s"
        slope, r2 = _slope([p.connections for p in poll], [p.cost_us or 0.0 for p in poll])
        g_poll = _growth(poll)

        def us(v: float) -> str:
            return f"{v * 1000:.3g}"

        ev = [
            f"{where}: poll cost "
            + ", ".join(f"c{p.connections}: {fmt_est(_cost(p), 'µs/msg', fmt_g3)}" for p in poll)
            + f"; growth {fmt_est(g_poll, 'ns/msg per descriptor', us)}, linear fit R² {r2:.3f}"
        ]
        g_ep = {n: _growth(v) for n, v in epolls.items()}
        ev += [
            f"{where}: {n} cost "
            + ", ".join(f"c{p.connections}: {p.cost_us:.3g}" for p in epolls[n])
            + f" µs/msg; growth {fmt_est(g, 'ns/msg per descriptor', us)}"
            for n, g in g_ep.items()
        ]
        ev += _kernel_costs(where, (("poll", poll), *epolls.items()))
        evt = tuple(ev)
        cited = (*poll, *(x for v in epolls.values() for x in v))
        if not (g_poll.known and all(g.known for g in g_ep.values())):
            parts.append(Part(INCONCLUSIVE, f"{where}: single runs, no intervals", evt, cited))
            continue
        assert g_poll.lo is not None and g_poll.hi is not None
        if g_poll.hi <= 0:
            parts.append(Part(REFUTED, f"{where}: poll's cost does not grow with descriptors", evt, cited))
        elif any((g.lo or 0.0) >= 0.5 * g_poll.hi for g in g_ep.values()):
            parts.append(Part(REFUTED, f"{where}: epoll's cost grows about as fast as poll's", evt, cited))
        elif (
            g_poll.lo > 0
            and r2 >= LINEAR_R2
            and all((g.hi or 0.0) < EPOLL_SLOPE_FRAC * g_poll.lo for g in g_ep.values())
        ):
            parts.append(
                Part(
                    HOLDS,
                    f"{where}: poll grows linearly (R² {r2:.2f}, {us(slope)} ns per descriptor), "
                    f"epoll < {EPOLL_SLOPE_FRAC:.0%} of it",
                    evt,
                    cited,
                )
            )
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{where}: growth or linearity not decided by the intervals", evt, cited)
            )
    return combine(parts, "needs poll and epoll, open loop, at ≥ 3 (poll) and ≥ 2 (epoll) connection counts")


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "S4.poll-linear-epoll-flat",
        "004",
        "poll's cost grows linearly with the number of descriptors; epoll's does not.",
        f"server CPU per message vs connections under open-loop load, same pattern and rate; poll: growth "
        f"> 0 and linear fit R² ≥ {LINEAR_R2:g}; epoll: growth below {EPOLL_SLOPE_FRAC:.0%} of poll's",
        _s4_poll_linear,
    ),
)

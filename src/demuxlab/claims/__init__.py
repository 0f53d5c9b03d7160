"""The seeds' claims as data, a verdict for each from an experiment's measured points, and a recommendation
of the best design per workload (seeds 000–004).

Everything here is pure: plain rows in, verdict objects out (no database, no files), so the report, the
dashboard and the tests call the same code. :mod:`demuxlab.claims.db` reads the rows from the database;
:mod:`demuxlab.claims.report` writes ``claims.csv``, ``recommendations.csv`` and ``claims.md``.

Input shape
===========

``points``: one mapping (or :class:`MeasuredPoint`) per measured point, its repeats already summarized:

=================  ========  ==========================================================================
key                type      meaning
=================  ========  ==========================================================================
pattern            str       ``hsha``, ``lf``, ``reactor``, ``proactor``, ``multireactor``, ``uring``, ``tpc``
notifier           str       ``select``, ``poll``, ``epoll-lt``, ``epoll-et``, ``uring``, ``none``
threads            int       every thread of the pattern (HSHA counts its monitor)
work_us            float     busy-wait work per message
connections        int
msg_size           int       bytes
mean               float     throughput, messages/s, mean over the runs
ci_low, ci_high    float     95 % confidence interval of the mean; None with one run (no interval)
n                  int       successful runs
rate               float     optional: open-loop total rate (msg/s); None or absent = closed loop
client_threads     int       optional
host               str       optional: the server host ("" if unknown); claims compare points of one host
server_cpus        int       optional: CPUs the server was pinned to; points with more threads than that
                             are oversubscribed and left out of thread-scaling tests (None = unknown, kept)
cost_us            float     optional: server CPU time per message (µs), mean over the runs (seed 004)
cost_ci_low/high   float     optional: its 95 % confidence interval
point_key          str       optional, for the evidence
=================  ========  ==========================================================================

``predictions`` (optional): one mapping per model prediction of a point: ``pattern, notifier, threads,
work_us, connections`` (+ ``msg_size``, ``rate`` if known: they must then equal the point's), ``source``
(``calibration`` or ``paper``), ``mean`` (predicted msg/s) and ``ci_halfwidth_rel`` (None = exact).

``facts`` (optional): host name → topology facts (``docs/CONTRACTS.md`` §3); only ``cores``,
``numa_nodes`` and ``cpu_model`` are read, to name the hardware in the evidence.

Verdicts
========

Comparisons use the 95 % intervals: A beats B when A's interval lies entirely above B's; when the two
overlap (or a point has a single run and so no interval) the comparison is undecided. A claim is
``holds`` or ``refuted`` when the data decide it, ``inconclusive`` when they cannot (intervals overlap),
and ``not testable`` when the experiment lacks the points (pattern or notifier not in the spec, a workload
outside the claim's scope, too few thread counts, or too few server CPUs for the thread counts). A claim
tested over several groups (workloads, notifiers) is refuted if any group refutes it, holds if every
testable group holds, and is inconclusive otherwise. Adding a claim is one :class:`Claim` entry in
:data:`CLAIMS` with a test function over a :class:`Context`.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from demuxlab.errors import DemuxlabError

HOLDS = "holds"
REFUTED = "refuted"
INCONCLUSIVE = "inconclusive"
NOT_TESTABLE = "not testable"
VERDICTS: tuple[str, ...] = (HOLDS, REFUTED, INCONCLUSIVE, NOT_TESTABLE)

# -- input ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured point (see the module docstring for the fields)."""

    pattern: str
    notifier: str
    threads: int
    work_us: float
    connections: int
    msg_size: int
    mean: float
    ci_low: float | None
    ci_high: float | None
    n: int
    rate: float | None = None
    client_threads: int | None = None
    host: str = ""
    server_cpus: int | None = None
    cost_us: float | None = None
    cost_ci_low: float | None = None
    cost_ci_high: float | None = None
    point_key: str = ""

    @property
    def design(self) -> str:
        return f"{self.pattern}/{self.notifier}"

    @property
    def label(self) -> str:
        return f"{self.pattern}/{self.notifier} t{self.threads}"

    @property
    def workload(self) -> Workload:
        return Workload(self.work_us, self.connections, self.msg_size, self.rate, self.client_threads)

    @property
    def est(self) -> Est:
        return Est(self.mean, self.ci_low, self.ci_high)

    @property
    def oversubscribed(self) -> bool:
        return self.server_cpus is not None and self.threads > self.server_cpus


@dataclass(frozen=True)
class Workload:
    work_us: float
    connections: int
    msg_size: int
    rate: float | None
    client_threads: int | None

    def __str__(self) -> str:
        load = "closed loop" if self.rate is None else f"open loop {self.rate:g} msg/s"
        return f"work {self.work_us:g} µs, {self.connections} conns, {self.msg_size} B, {load}"

    def sort_key(self) -> tuple[Any, ...]:
        return (self.work_us, self.connections, self.msg_size, self.rate or -1.0, self.client_threads or 0)


@dataclass(frozen=True)
class ModelPrediction:
    pattern: str
    notifier: str
    threads: int
    work_us: float
    connections: int
    source: str
    mean: float
    ci_halfwidth_rel: float | None = None
    msg_size: int | None = None
    rate: float | None = None
    host: str | None = None  # for that host (hardware class) only: a class's calibration; None: any host

    @property
    def est(self) -> Est:
        c = self.ci_halfwidth_rel or 0.0
        return Est(self.mean, self.mean * (1 - c), self.mean * (1 + c))

    def matches(self, p: MeasuredPoint) -> bool:
        return (
            (self.pattern, self.notifier, self.threads) == (p.pattern, p.notifier, p.threads)
            and math.isclose(self.work_us, p.work_us)
            and self.connections == p.connections
            and (self.msg_size is None or self.msg_size == p.msg_size)
            and (self.rate is None or (p.rate is not None and math.isclose(self.rate, p.rate)))
        )


_POINT_TYPES: dict[str, tuple[type, ...]] = {
    "pattern": (str,),
    "notifier": (str,),
    "threads": (int,),
    "work_us": (int, float),
    "connections": (int,),
    "msg_size": (int,),
    "mean": (int, float),
    "n": (int,),
}
_OPTIONAL_NUM = ("ci_low", "ci_high", "rate", "cost_us", "cost_ci_low", "cost_ci_high")


def _bad(where: str, key: str, value: Any, want: str) -> DemuxlabError:
    return DemuxlabError(f"{where}: {key}: must be {want}, got {value!r}")


def as_point(row: Mapping[str, Any] | MeasuredPoint, where: str = "point") -> MeasuredPoint:
    """A :class:`MeasuredPoint` from a row; a missing or mistyped field is one clear error."""
    if isinstance(row, MeasuredPoint):
        return row
    if not isinstance(row, Mapping):
        raise DemuxlabError(f"{where}: must be a mapping, got {type(row).__name__}")
    values: dict[str, Any] = {}
    for key, types in _POINT_TYPES.items():
        v: Any = row.get(key)
        if v is None or isinstance(v, bool) or not isinstance(v, types):
            raise _bad(where, key, v, "a " + "/".join(t.__name__ for t in types))
        values[key] = float(cast(float, v)) if float in types else v
    if not math.isfinite(values["mean"]) or values["mean"] < 0:
        raise _bad(where, "mean", values["mean"], "a non-negative finite number")
    for key in _OPTIONAL_NUM:
        v = row.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            raise _bad(where, key, v, "a finite number or None")
        values[key] = None if v is None else float(v)
    for key in ("client_threads", "server_cpus"):
        v = row.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise _bad(where, key, v, "an integer or None")
        values[key] = v
    values["host"] = str(row.get("host") or "")
    values["point_key"] = str(row.get("point_key") or "")
    return MeasuredPoint(**values)


def as_prediction(row: Mapping[str, Any] | ModelPrediction, where: str = "prediction") -> ModelPrediction:
    if isinstance(row, ModelPrediction):
        return row
    if not isinstance(row, Mapping):
        raise DemuxlabError(f"{where}: must be a mapping, got {type(row).__name__}")
    for key, types in (
        ("pattern", (str,)),
        ("notifier", (str,)),
        ("threads", (int,)),
        ("work_us", (int, float)),
        ("connections", (int,)),
        ("source", (str,)),
        ("mean", (int, float)),
    ):
        v = row.get(key)
        if v is None or isinstance(v, bool) or not isinstance(v, types):
            raise _bad(where, key, v, "a " + "/".join(t.__name__ for t in types))
    ci = row.get("ci_halfwidth_rel")
    if ci is not None and (not isinstance(ci, int | float) or ci < 0):
        raise _bad(where, "ci_halfwidth_rel", ci, "a non-negative number or None")
    return ModelPrediction(
        pattern=row["pattern"],
        notifier=row["notifier"],
        threads=row["threads"],
        work_us=float(row["work_us"]),
        connections=row["connections"],
        source=row["source"],
        mean=float(row["mean"]),
        ci_halfwidth_rel=None if ci is None else float(ci),
        msg_size=row.get("msg_size"),
        rate=None if row.get("rate") is None else float(row["rate"]),
        host=str(row["host"]) if row.get("host") else None,
    )


# -- intervals -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Est:
    """A mean with its 95 % interval; ``lo``/``hi`` None: no interval (one run)."""

    mean: float
    lo: float | None
    hi: float | None

    @property
    def known(self) -> bool:
        return self.lo is not None and self.hi is not None


def above(a: Est, b: Est) -> bool:
    """A's interval lies entirely above B's."""
    return a.lo is not None and b.hi is not None and a.lo > b.hi


def fmt_rate(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.4g}k"
    return f"{v:.4g}"


def fmt_est(e: Est, unit: str = "msg/s", fmt: Callable[[float], str] = fmt_rate) -> str:
    if e.lo is None or e.hi is None:
        return f"{fmt(e.mean)} {unit} (one run, no CI)"
    return f"{fmt(e.mean)} {unit} [{fmt(e.lo)}, {fmt(e.hi)}]"


def _g3(v: float) -> str:
    return f"{v:.3g}"


def describe(p: MeasuredPoint) -> str:
    return f"{p.label}: {fmt_est(p.est)}, n={p.n}"


def ratio(a: Est, b: Est) -> Est:
    """a / b with the interval from the extreme ends of both intervals."""
    mean = a.mean / b.mean if b.mean > 0 else math.inf
    if not (a.known and b.known) or not b.lo or b.lo <= 0:
        return Est(mean, None, None)
    assert a.lo is not None and a.hi is not None and b.hi is not None
    return Est(mean, a.lo / b.hi, a.hi / b.lo)


def fmt_ratio(r: Est) -> str:
    if r.lo is None or r.hi is None:
        return f"{r.mean:.3f}× (no CI)"
    return f"{r.mean:.3f}× [{r.lo:.3f}, {r.hi:.3f}]"


# -- outcomes ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """The verdict of one group (a workload, a notifier) of a claim's test, with its evidence lines."""

    verdict: str
    reason: str
    evidence: tuple[str, ...] = ()


def combine(parts: Sequence[Part], none_reason: str) -> Part:
    """Refuted if any part refutes, holds if every testable part holds, else inconclusive."""
    testable = [p for p in parts if p.verdict != NOT_TESTABLE]
    evidence = tuple(e for p in parts for e in p.evidence)
    if not testable:
        reasons = sorted({p.reason for p in parts}) or [none_reason]
        return Part(NOT_TESTABLE, "; ".join(reasons), evidence)
    for verdict in (REFUTED, INCONCLUSIVE):
        hit = [p for p in testable if p.verdict == verdict]
        if hit:
            return Part(verdict, "; ".join(p.reason for p in hit), evidence)
    return Part(HOLDS, "; ".join(p.reason for p in testable), evidence)


@dataclass(frozen=True)
class ClaimVerdict:
    claim_id: str
    seed: str
    text: str
    scope: str
    verdict: str
    reason: str
    evidence: tuple[str, ...]
    host: str
    hardware: str

    def to_row(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "seed": self.seed,
            "verdict": self.verdict,
            "host": self.host,
            "hardware": self.hardware,
            "reason": self.reason,
            "evidence": " | ".join(self.evidence),
            "text": self.text,
            "scope": self.scope,
        }


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


def usable(points: Iterable[MeasuredPoint]) -> list[MeasuredPoint]:
    """The points whose threads fit the server's CPUs (thread-scaling tests leave the others out)."""
    return [p for p in points if not p.oversubscribed]


def cores_note(points: Sequence[MeasuredPoint]) -> str:
    cpus = sorted({p.server_cpus for p in points if p.server_cpus is not None})
    over = sorted({p.threads for p in points if p.oversubscribed})
    if not over:
        return ""
    return f"server had {'/'.join(map(str, cpus))} CPU(s): thread counts {_ranges(over)} are oversubscribed"


def _ranges(values: Sequence[int]) -> str:
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
    """The thread counts indistinguishable from the peak (intervals overlap the best one's) and whether
    the interval is known for all (False: one run somewhere, the peak cannot be placed)."""
    best = peak(points)
    if not all(p.est.known for p in points):
        return [best.threads], False
    return sorted(p.threads for p in points if p is best or not above(best.est, p.est)), True


# -- the claims' tests ---------------------------------------------------------------------------------------

SPEEDUP_MIN = 1.10  # "changes peak throughput": by more than 10 %
NOTIFIER_MAX = 2.2  # "by up to 2×", with the same 10 % materiality as SPEEDUP_MIN
MODEL_PEAK_TOL = 0.10  # "accurately predicts the peak": within 10 %
PROACTOR_RANGE = (1.10, 1.35)  # "10–35 % faster"
LINEAR_R2 = 0.9  # poll's cost vs descriptors: a straight line explains ≥ 90 % of the variance
EPOLL_SLOPE_FRAC = 0.1  # epoll's cost grows less than a tenth as fast as poll's
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
        if any(r.lo is not None and r.lo > NOTIFIER_MAX for _, r, _, _ in ratios):
            parts.append(Part(REFUTED, f"{wl}: epoll-et's peak is more than {NOTIFIER_MAX:g}× select's", ev))
        elif all(r.hi is not None and r.hi < SPEEDUP_MIN for _, r, _, _ in ratios):
            parts.append(
                Part(REFUTED, f"{wl}: epoll-et's peak is less than {SPEEDUP_MIN - 1:.0%} above select's", ev)
            )
        elif any(r.lo is not None and r.lo > SPEEDUP_MIN for _, r, _, _ in ratios):
            best = max(ratios, key=lambda x: x[1].mean)
            parts.append(Part(HOLDS, f"{wl}: {best[0]} epoll-et/select peak ratio {fmt_ratio(best[1])}", ev))
        else:
            parts.append(Part(INCONCLUSIVE, f"{wl}: the peaks' intervals overlap the 1.1×/2× bounds", ev))
    return combine(parts, _need("HSHA or LF over both select and epoll-et", pts, ctx, work0=True))


def _need(what: str, pts: Sequence[MeasuredPoint], ctx: Context, work0: bool = False) -> str:
    """The reason a claim is not testable, naming what the experiment lacks."""
    works = sorted({p.work_us for p in ctx.points})
    if work0 and ctx.points and 0 not in works:
        return f"needs {what} at 0 µs work; this experiment has work {', '.join(f'{w:g}' for w in works)} µs"
    note = cores_note([p for p in ctx.points])
    return f"needs {what}" + (f" ({note})" if note else "; not in this experiment")


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
        if not (hs_known and lf_known):
            parts.append(Part(INCONCLUSIVE, f"{where}: single runs, no intervals to place the peaks", ev))
        elif max(hs) < min(ls) and not h_open:
            parts.append(
                Part(HOLDS, f"{where}: HSHA peaks at {_ranges(hs)} threads, LF at {_ranges(ls)}", ev)
            )
        elif min(hs) >= max(ls) and not l_open:
            parts.append(
                Part(REFUTED, f"{where}: HSHA peaks at {_ranges(hs)} threads, LF at {_ranges(ls)}", ev)
            )
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{where}: the peak ranges {hs} and {ls} overlap or are open", ev)
            )
    return combine(parts, _need("HSHA and LF at ≥ 3 thread counts each over one notifier", pts, ctx))


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
        ev = (f"{wl}: peaks {describe(a)} vs {describe(b)}",)
        if above(b.est, a.est):
            parts.append(Part(HOLDS, f"{wl}: HSHA's peak over select is above its peak over epoll-lt", ev))
        elif above(a.est, b.est):
            parts.append(Part(REFUTED, f"{wl}: HSHA's peak over epoll-lt is above its peak over select", ev))
        else:
            parts.append(Part(INCONCLUSIVE, f"{wl}: the peaks' intervals overlap", ev))
    return combine(parts, _need("HSHA over both select and epoll-lt", pts, ctx, work0=True))


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
        if any(above(h[t].est, lf[t].est) for t in common):
            bad = [t for t in common if above(h[t].est, lf[t].est)]
            parts.append(Part(REFUTED, f"{wl}: HSHA beats LF at {bad} threads", ev))
        elif all(above(lf[t].est, h[t].est) for t in common):
            parts.append(Part(HOLDS, f"{wl}: LF beats HSHA at every thread count {common}", ev))
        else:
            parts.append(Part(INCONCLUSIVE, f"{wl}: intervals overlap at some of {common}", ev))
    over = [p for p in raw if p.threads > 11 and p.oversubscribed]
    if over and not parts:
        return Part(NOT_TESTABLE, f"needs ≥ 12 server CPUs for 12+ threads; {cores_note(over)}")
    return combine(parts, _need("HSHA and LF over epoll-et at more than 11 threads", pts, ctx, work0=True))


def _model_source(ctx: Context) -> str | None:
    sources = {p.source for p in ctx.predictions}
    return "calibration" if "calibration" in sources else ("paper" if "paper" in sources else None)


def _s1_model(ctx: Context) -> Part:
    source = _model_source(ctx)
    if source is None:
        return Part(NOT_TESTABLE, "no model predictions (HSHA/LF points with work > 0, closed loop)")
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
        parts.append(combine([Part(peak_part.verdict, peak_part.reason, ev), trend_part], ""))
    return combine(parts, _need("HSHA or LF at ≥ 2 thread counts with predictions", pts, ctx))


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
        bad = [t for t in common if above(h[t].est, lf[t].est)]
        if bad:
            parts.append(Part(REFUTED, f"{where}: HSHA beats LF at {bad} threads", ev))
        elif all(above(lf[t].est, h[t].est) for t in common):
            parts.append(Part(HOLDS, f"{where}: LF beats HSHA at every common thread count {common}", ev))
        else:
            parts.append(Part(INCONCLUSIVE, f"{where}: intervals overlap at some of {common}", ev))
    return combine(parts, _need("HSHA and LF at a common thread count over one notifier", pts, ctx))


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
        worse = [h.threads for h in hsha if above(r.est, h.est)]
        if worse:
            parts.append(
                Part(HOLDS, f"{where}: the single-threaded reactor beats HSHA at {worse} threads", ev)
            )
        elif all(above(h.est, r.est) for h in hsha):
            parts.append(Part(REFUTED, f"{where}: HSHA beats the reactor at every thread count", ev))
        else:
            parts.append(Part(INCONCLUSIVE, f"{where}: intervals overlap", ev))
    return combine(parts, _need("HSHA and the reactor over one notifier", pts, ctx))


DISTRIBUTED = ("multireactor",)


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
        if r.lo is not None and r.lo > 1.0:
            parts.append(Part(HOLDS, f"{where}: t{lo.threads}→t{hi.threads} speed-up {fmt_ratio(r)}", ev))
        elif r.hi is not None and r.hi < 1.0:
            parts.append(Part(REFUTED, f"{where}: throughput falls from t{lo.threads} to t{hi.threads}", ev))
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{where}: t{lo.threads} and t{hi.threads} intervals overlap", ev)
            )
    return combine(parts, _need("a multireactor at ≥ 2 thread counts", pts, ctx))


def _s3_proactor(ctx: Context) -> Part:
    pts = usable(ctx.select(patterns=("proactor", "reactor")))
    parts = []
    groups = by_key(pts, lambda p: (p.notifier, p.workload))
    ratios: list[tuple[str, Est]] = []
    for (notifier, wl), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        pro = [p for p in group if p.pattern == "proactor"]
        rea = [p for p in group if p.pattern == "reactor"]
        if pro and rea:
            r = ratio(peak(pro).est, peak(rea).est)
            ratios.append((f"{notifier}, {wl}: {describe(peak(pro))} vs {describe(peak(rea))}", r))
    if not ratios:
        return Part(NOT_TESTABLE, _need("the emulated proactor and the reactor over one notifier", pts, ctx))
    ev = tuple(f"{what}: ratio {fmt_ratio(r)}" for what, r in ratios)
    slower = [what for what, r in ratios if r.hi is not None and r.hi < 1.0]
    if slower:
        parts.append(Part(REFUTED, f"the proactor is slower in {len(slower)} workload(s)", ev))
    elif all(r.lo is not None and r.lo >= 1.0 for _, r in ratios):
        parts.append(Part(HOLDS, "never slower", ev))
    else:
        parts.append(Part(INCONCLUSIVE, "never slower: intervals overlap in some workloads", ev))
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
            + ", ".join(f"c{p.connections}: {fmt_est(_cost(p), 'µs/msg', _g3)}" for p in poll)
            + f"; growth {fmt_est(g_poll, 'ns/msg per descriptor', us)}, linear fit R² {r2:.3f}"
        ]
        g_ep = {n: _growth(v) for n, v in epolls.items()}
        ev += [
            f"{where}: {n} cost "
            + ", ".join(f"c{p.connections}: {p.cost_us:.3g}" for p in epolls[n])
            + f" µs/msg; growth {fmt_est(g, 'ns/msg per descriptor', us)}"
            for n, g in g_ep.items()
        ]
        evt = tuple(ev)
        if not (g_poll.known and all(g.known for g in g_ep.values())):
            parts.append(Part(INCONCLUSIVE, f"{where}: single runs, no intervals", evt))
            continue
        assert g_poll.lo is not None and g_poll.hi is not None
        if g_poll.hi <= 0:
            parts.append(Part(REFUTED, f"{where}: poll's cost does not grow with descriptors", evt))
        elif any((g.lo or 0.0) >= 0.5 * g_poll.hi for g in g_ep.values()):
            parts.append(Part(REFUTED, f"{where}: epoll's cost grows about as fast as poll's", evt))
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
                )
            )
        else:
            parts.append(
                Part(INCONCLUSIVE, f"{where}: growth or linearity not decided by the intervals", evt)
            )
    return combine(parts, "needs poll and epoll, open loop, at ≥ 3 (poll) and ≥ 2 (epoll) connection counts")


@dataclass(frozen=True)
class Claim:
    id: str
    seed: str
    text: str
    scope: str
    test: Callable[[Context], Part]


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
        "every thread count whose interval overlaps the best one's",
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
    Claim(
        "S3.emulated-proactor",
        "003",
        "The emulated proactor is 10–35 % faster than the reactor, and never slower.",
        f"proactor (best thread count) vs reactor over the same notifier, per workload; mean ratio within "
        f"{PROACTOR_RANGE[0]:g}–{PROACTOR_RANGE[1]:g}, no workload significantly below 1",
        _s3_proactor,
    ),
    Claim(
        "S4.poll-linear-epoll-flat",
        "004",
        "poll's cost grows linearly with the number of descriptors; epoll's does not.",
        f"server CPU per message vs connections under open-loop load, same pattern and rate; poll: growth "
        f"> 0 and linear fit R² ≥ {LINEAR_R2:g}; epoll: growth below {EPOLL_SLOPE_FRAC:.0%} of poll's",
        _s4_poll_linear,
    ),
)


# -- evaluation ----------------------------------------------------------------------------------------------


def hardware_of(facts: Mapping[str, Any] | None) -> str:
    if not facts:
        return ""
    bits = []
    if facts.get("cores") is not None:
        bits.append(f"{facts['cores']} cores")
    nodes = facts.get("numa_nodes")
    if isinstance(nodes, list):
        bits.append(f"{len(nodes)} NUMA node{'s' if len(nodes) != 1 else ''}")
    elif isinstance(nodes, int):
        bits.append(f"{nodes} NUMA node{'s' if nodes != 1 else ''}")
    if facts.get("cpu_model"):
        bits.append(str(facts["cpu_model"]))
    return ", ".join(bits)


def _inputs(
    points: Iterable[Mapping[str, Any] | MeasuredPoint],
    predictions: Iterable[Mapping[str, Any] | ModelPrediction] | None,
) -> tuple[list[MeasuredPoint], list[ModelPrediction]]:
    pts = [as_point(p, f"points[{i}]") for i, p in enumerate(points)]
    preds = [as_prediction(p, f"predictions[{i}]") for i, p in enumerate(predictions or [])]
    return pts, preds


def evaluate_claims(
    points: Iterable[Mapping[str, Any] | MeasuredPoint],
    predictions: Iterable[Mapping[str, Any] | ModelPrediction] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    claims: Sequence[Claim] = CLAIMS,
) -> list[ClaimVerdict]:
    """A verdict per claim and server host (one host: one verdict per claim), in ``claims`` order."""
    pts, preds = _inputs(points, predictions)
    hosts = sorted({p.host for p in pts}) or [""]
    out = []
    for host in hosts:
        # A class's calibrated predictions are compared with that class's points only.
        ctx = Context([p for p in pts if p.host == host], [q for q in preds if q.host in (None, host)])
        hw = hardware_of((facts or {}).get(host))
        for claim in claims:
            part = claim.test(ctx) if ctx.points else Part(NOT_TESTABLE, "no measured points")
            if part.verdict not in VERDICTS:
                raise DemuxlabError(f"claim {claim.id}: test returned verdict {part.verdict!r}")
            out.append(
                ClaimVerdict(
                    claim.id,
                    claim.seed,
                    claim.text,
                    claim.scope,
                    part.verdict,
                    part.reason,
                    part.evidence,
                    host,
                    hw,
                )
            )
    return out


# -- recommendation ------------------------------------------------------------------------------------------


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
    model_agrees: bool | None  # the model's first is the best or tied with it (among modeled points)
    disagreements: tuple[str, ...]  # points where |model − measurement| exceeds both intervals

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
            "note": self.note,
        }


def recommend(
    points: Iterable[Mapping[str, Any] | MeasuredPoint],
    predictions: Iterable[Mapping[str, Any] | ModelPrediction] | None = None,
) -> list[Recommendation]:
    """Per host and workload: the pattern × notifier × threads with the highest mean throughput."""
    pts, preds = _inputs(points, predictions)
    ctx = Context(pts, preds)
    source = _model_source(ctx)
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
        disagreements: list[str] = []
        if source is not None:
            modeled = [(p, ctx.prediction(p, source)) for p in group]
            have = [(p, m) for p, m in modeled if m is not None]
            if have:
                mp, mm = max(have, key=lambda x: x[1].mean)
                model_best = f"{mp.label} ({fmt_rate(mm.mean)} msg/s predicted)"
                data_best = peak([p for p, _ in have])
                agrees = mp is data_best or (
                    data_best.est.known and mp.est.known and not above(data_best.est, mp.est)
                )
                for p, m in have:
                    if p.est.known and (above(m.est, p.est) or above(p.est, m.est)):
                        err = (m.mean - p.mean) / p.mean if p.mean else math.inf
                        disagreements.append(
                            f"{p.label}: model {fmt_est(m.est)} vs measured {fmt_est(p.est)} ({err:+.1%})"
                        )
        out.append(
            Recommendation(host, wl, best, tied, len(group), source, model_best, agrees, tuple(disagreements))
        )
    return out


__all__ = [
    "CLAIMS",
    "HOLDS",
    "INCONCLUSIVE",
    "NOT_TESTABLE",
    "REFUTED",
    "VERDICTS",
    "Claim",
    "ClaimVerdict",
    "Context",
    "MeasuredPoint",
    "ModelPrediction",
    "Part",
    "Recommendation",
    "Workload",
    "as_point",
    "evaluate_claims",
    "recommend",
]

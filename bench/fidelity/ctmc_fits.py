"""ctmc_validation's model side (a helper of bench/fidelity/): the calibrations fitted from a set of runs, the
predictions of another (or the same) set, the error tables, every calibration's outcome with its reason and
self-check figure, and the rate ablation (issue 43: the held-out error with and without each part of a
calibration, :data:`demuxlab.ctmc.calibrate.ABLATIONS`)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bench.common.cli import print_table
from bench.common.pairs import Result
from demuxlab.ctmc.calibrate import ABLATIONS, PLAIN, PlainRun, SelfCheck, calibrate
from demuxlab.ctmc.parts import SEND_WAKE
from demuxlab.ctmc.predict import PredictRequest, predict_many
from demuxlab.ctmc.rates import INSTANT_RATE, Host, Rates, calibration_threads
from demuxlab.errors import DemuxlabError

# What a calibration is fitted per: (spec, pattern, notifier, connections, size); the spec is "" where the
# calibration comes from another file's runs (--calibrate-from), whose spec is not the predicted points'.
CalKey = tuple[str, str, str, int, int]


# ctmc_validation's Point (a spec's point with the spec it came from, and ``calibrates``) and Kept (a run as
# kept: ``result``, ``background``), which import this module.
PointLike = Any
KeptLike = Any


def cal_key(p: PointLike, cross: bool) -> CalKey:
    return ("" if cross else p.spec, p.pattern, p.notifier, p.connections, p.msg_size)


@dataclass
class CalInputs:
    """One calibration's runs: the instrumented ones at the calibration concurrency, the plain runs of the
    same points, and the work values the instrumented ones had."""

    instr: list[Result] = field(default_factory=list)
    plain: list[Result] = field(default_factory=list)
    works: set[float] = field(default_factory=set)


def calibration_inputs(results: Mapping[Any, Sequence[KeptLike]], cross: bool) -> dict[CalKey, CalInputs]:
    """Per calibration key: the instrumented runs (points that calibrate) and the plain runs of the same
    points (the same pattern, notifier, threads, work, connections and size, uninstrumented)."""
    out: dict[CalKey, CalInputs] = defaultdict(CalInputs)
    for p, rs in results.items():
        if p.calibrates and rs:
            got = out[cal_key(p, cross)]
            got.instr += [k.result for k in rs]
            got.works.add(p.work_us)
    for p, rs in results.items():
        key = cal_key(p, cross)
        twin = not p.instrument and p.threads == calibration_threads(p.pattern)
        if twin and key in out and p.work_us in out[key].works:
            out[key].plain += [k.result for k in rs]
    return dict(out)


@dataclass
class Fitted:
    """A calibration's outcome: its rates, or why it was refused; its self-check comparisons either way."""

    rates: Rates | None
    refused: str | None
    checks: list[SelfCheck]
    plain_runs: int = 0
    client_share: float | None = None  # the client's share of its CPUs in the runs its r_z came from

    def worst(self) -> SelfCheck | None:
        return max(self.checks, key=lambda c: abs(c.rel_error), default=None)

    def as_row(self, key: CalKey) -> dict[str, Any]:
        """The outcome as the bench's JSON and status table give it (issue 43: every design calibrated or its
        refusal shown with its reason and its self-check figure)."""
        w = self.worst()
        return {
            "workload": list(key),
            "status": "fitted" if self.rates is not None else "refused",
            "reason": self.refused,
            "self_check_worst": w.rel_error if w else None,
            "self_check_against": w.against if w else None,
            "plain_runs": self.plain_runs,
            "rates_per_us": self.rates.as_dict() if self.rates else None,
            "source": self.rates.source if self.rates else None,
            "refused": self.refused,
            "self_check": [c.as_dict() for c in self.checks],
        }


def fit_all(
    inputs: Mapping[CalKey, CalInputs],
    wake_us: float | None,
    handoff_us: float | None,
    client_cores: int,
    off: Collection[str] = (),
    only: Collection[CalKey] | None = None,
    use_plain: bool = True,
) -> dict[CalKey, Fitted]:
    """Every calibration of ``inputs`` (or of ``only``), with the parts ``off`` left out."""
    out: dict[CalKey, Fitted] = {}
    for key, got in sorted(inputs.items()):
        if only is not None and key not in only:
            continue
        own: list[SelfCheck] = []
        plain = (
            [PlainRun(r.server, r.throughput, r.client, client_cores) for r in got.plain] if use_plain else []
        )
        try:
            rates = calibrate(
                [run.server for run in got.instr], key[1], measured=[run.throughput for run in got.instr],
                clients=[run.client for run in got.instr], client_cores=[client_cores] * len(got.instr),
                checks=own, wake_us=wake_us, handoff_us=handoff_us, plain=plain, off=off,
            )  # fmt: skip
        except DemuxlabError as exc:
            out[key] = Fitted(None, exc.message, own, len(plain))
        else:
            share = run_share(key[1], got.instr, client_cores)
            out[key] = Fitted(rates, None, own, len(plain), share[1] if share else None)
    return out


def run_share(pattern: str, runs: Sequence[Result], client_cores: int) -> tuple[float, float | None] | None:
    """The server's share of its CPUs over ``runs`` (as a calibration takes it: fit_roles._speed) and the
    client's (fit_roles._client_rate); None where the runs cannot say."""
    from demuxlab.ctmc.fit_roles import _client_rate, _speed

    try:
        speed = _speed([f"run {i}" for i in range(len(runs))], [r.server for r in runs], pattern)
        client = _client_rate([r.client for r in runs], [client_cores] * len(runs), speed)
    except (DemuxlabError, KeyError, TypeError):
        return None
    return speed, client[1] if client else None


def at_run_share(
    results: Mapping[Any, Sequence[KeptLike]], client_cores: int
) -> Callable[[Any, Fitted], Rates | None]:
    """A :class:`Source` adjustment: a point's calibrated rates at the share of its CPUs its own plain runs
    had (the server's ``speed``, and the client's turnaround by its share over the calibration's). Not a
    prediction (it reads the measured runs' scheduling, not their throughput): how much of an error is the
    host's load changing between the calibration and the point, rather than the chain."""
    cache: dict[Any, tuple[float, float | None] | None] = {}

    def adjust(p: Any, fit: Fitted) -> Rates | None:
        if fit.rates is None:
            return None
        if p not in cache:
            cache[p] = run_share(p.pattern, [k.result for k in results[p]], client_cores)
        got = cache[p]
        if got is None:
            return fit.rates
        speed, client = got
        r_z = fit.rates.r_z
        if client is not None and fit.client_share and fit.rates.has_client:
            r_z = r_z * client / fit.client_share
        return replace(fit.rates, speed=max(min(speed, 1.0), 1e-3), r_z=r_z, workloads={})

    return adjust


@dataclass(frozen=True)
class Source:
    """Where a point's prediction comes from: calibrations (None: the paper's rates), keyed across files or
    not (:func:`cal_key`), and the work values each calibration's runs had."""

    fits: Mapping[CalKey, Fitted] | None = None
    cross: bool = False
    works: Mapping[CalKey, set[float]] = field(default_factory=dict)
    # the rates as a point takes them (e.g. at its own runs' share of the CPUs: :func:`at_run_share`)
    adjust: Callable[[Any, Fitted], Rates | None] | None = None


def predictions(
    keys: Sequence[PointLike],
    sources: Mapping[str, Source],
    *,
    method: str,
    rel_ci: float,
    jobs: int,
    server_cores: int,
    client_cores: int,
    client_threads: int,
    sleeps: bool = False,
) -> tuple[dict[tuple[Any, str], float], dict[Any, float], dict[CalKey, set[float]]]:
    """Every point from each source (``sources``: name → its calibrations, or None for the paper's rates):
    the predictions by (point, source), the chain's client sleeps per message where counted,
    and per calibration the work values it could not predict (less work than any of its runs had)."""
    reqs: list[PredictRequest] = []
    slots: list[tuple[Any, str]] = []
    uncalibrated: dict[CalKey, set[float]] = defaultdict(set)
    for p in keys:
        ct = p.client_threads or client_threads
        for name, source in sources.items():
            fit = None
            if source.fits is not None:
                key = cal_key(p, source.cross)
                if p.work_us < min(source.works.get(key, set()), default=p.work_us):
                    # Less work than any of its calibration's runs had (a --time-limit or a failed run cut
                    # the others): the client's turnaround and the untimed CPU that a long spin hides, which
                    # the least-work runs fit, would be guessed. More work than some run had is predicted.
                    uncalibrated[key].add(p.work_us)
                    continue
                got = source.fits.get(key)
                fit = got.rates if got is not None else None
                if got is not None and fit is not None and source.adjust is not None:
                    fit = source.adjust(p, got)
                if fit is None:
                    continue
            h = Host(server_cores, client_threads=ct if fit is not None else None, client_cores=client_cores)
            reqs.append(
                PredictRequest(
                    p.pattern, p.threads, p.work_us, p.connections, method=method, rates=fit, rel_ci=rel_ci,
                    seed=0, host=h, notifier=p.notifier,
                    counts=(SEND_WAKE,) if sleeps and fit is not None and fit.client_sleeps else (),
                )
            )  # fmt: skip
            slots.append((p, name))
    preds = predict_many(reqs, jobs=jobs)
    model = {slot: pr.throughput_msgs_per_s for slot, pr in zip(slots, preds, strict=True) if pr.settled}
    for (p, name), pr in zip(slots, preds, strict=True):
        if not pr.settled:  # that point's prediction from that source is missing ("-"), with the reason
            why = pr.failure or "the fluid approximation did not settle"
            print(f"# no {name} prediction for {p.pattern}/{p.notifier} at {p.threads} threads, "
                  f"{p.work_us:g} µs: {why}")  # fmt: skip
    chain_sleeps = {
        p: pr.details["per_message"][SEND_WAKE]
        for (p, _), pr in zip(slots, preds, strict=True)
        if SEND_WAKE in pr.details.get("per_message", {})
    }
    return model, chain_sleeps, uncalibrated


def errors(
    keys: Iterable[PointLike],
    measured: Mapping[Any, float],
    model: Mapping[tuple[Any, str], float],
    source: str,
) -> dict[tuple[str, str], list[float]]:
    """|error| per (pattern, notifier) of ``source``'s predictions."""
    per: dict[tuple[str, str], list[float]] = defaultdict(list)
    for p in keys:
        pred = model.get((p, source))
        if pred is not None:
            per[(p.pattern, p.notifier)].append(abs(pred - measured[p]) / measured[p])
    return per


def summary_rows(per_source: Mapping[str, Mapping[tuple[str, str], list[float]]]) -> list[list[object]]:
    """mean and max |error| per source × pattern × notifier, per pattern, and overall."""
    rows: list[list[object]] = []
    for source, per in per_source.items():
        for (pattern, notifier), errs in sorted(per.items()):
            rows.append(
                [source, pattern, notifier, len(errs), f"{statistics.mean(errs):.1%}", f"{max(errs):.1%}"]
            )
        for pattern in sorted({k[0] for k in per}):
            errs = [e for (pt, _n), es in per.items() if pt == pattern for e in es]
            rows.append(
                [source, pattern, "all", len(errs), f"{statistics.mean(errs):.1%}", f"{max(errs):.1%}"]
            )
        errs = [e for es in per.values() for e in es]
        if errs:
            rows.append([source, "all", "all", len(errs), f"{statistics.mean(errs):.1%}", f"{max(errs):.1%}"])
    return rows


def overall(per: Mapping[tuple[str, str], list[float]]) -> tuple[float, float, int] | None:
    errs = [e for es in per.values() for e in es]
    return (statistics.mean(errs), max(errs), len(errs)) if errs else None


def print_status(fits: Mapping[CalKey, Fitted], title: str) -> None:
    """Every calibration's outcome: fitted or refused, the self-check's worst figure and what it was judged
    against, and the reason of a refusal."""
    rows = []
    for key, f in sorted(fits.items()):
        w = f.worst()
        fig = f"{w.rel_error:+.1%} ({w.against}, w{w.work_us:g})" if w else "-"
        why = f.refused or ""
        rows.append([key[1], key[2], f"c{key[3]} b{key[4]}", "fitted" if f.rates else "REFUSED", fig, why])
    print()
    print(title)
    print_table(["pattern", "notifier", "workload", "status", "self-check worst", "reason"], rows)


def active(part: str, rates: Rates) -> bool:
    """Whether a fitted calibration uses ``part`` (so that leaving it out can change its predictions)."""
    src = rates.source
    if part == "pace":
        return any("plain runs' cpu" in why for why in src.values())
    if part == "speed":
        return rates.speed < 1.0
    if part in ("r_l", "r_p", "r_g", "r_i", "r_o", "r_a", "r_e"):
        return src.get(part, "").startswith(("op:", "fit:"))
    if part in ("r_n", "r_x"):
        return float(getattr(rates, part)) != INSTANT_RATE
    return rates.active(part)


@dataclass
class Ablation:
    part: str
    affected: int
    refits: int
    mean: float
    max: float
    points: int


def ablate(
    parts: Sequence[str],
    base: Mapping[CalKey, Fitted],
    refit: Callable[[str, Collection[CalKey]], Mapping[CalKey, Fitted]],
    repredict: Callable[[Mapping[CalKey, Fitted], Collection[CalKey]], Mapping[tuple[Any, str], float]],
    model: Mapping[tuple[Any, str], float],
    source: str,
    score: Callable[[Mapping[tuple[Any, str], float]], tuple[float, float, int] | None],
) -> list[Ablation]:
    """For each part: the calibrations that use it (or were refused: leaving a part out may let them fit)
    fitted again without it, their points predicted again, and the held-out figure of every point with
    those predictions in place of the full calibrations'."""
    out = []
    for part in parts:
        if part not in ABLATIONS:
            raise DemuxlabError(
                f"--ablate: {part!r} is not a part to leave out (one of {', '.join(ABLATIONS)})"
            )
        keys = [k for k, f in base.items() if f.rates is None or active(part, f.rates)]
        again = {**base, **refit(part, keys)}
        changed = repredict(again, keys)
        merged = {slot: v for slot, v in model.items() if not (slot[1] == source and _key_in(slot[0], keys))}
        merged.update(changed)
        got = score(merged)
        mean, most, n = got if got else (float("nan"), float("nan"), 0)
        affected = sum(1 for k in keys if base[k].rates is not None)
        out.append(Ablation(part, affected, len(keys), mean, most, n))
    return out


def _key_in(p: Any, keys: Collection[CalKey]) -> bool:
    """Whether point ``p`` is predicted from one of the calibrations ``keys``: its own spec's (a key's spec
    is ``""`` only for --calibrate-from's, which predict every spec's points), pattern, notifier,
    connections and size. Without the spec, a run mixing specs dropped another spec's predictions."""
    return any(
        k[0] in ("", p.spec)
        and (k[1], k[2], k[3], k[4]) == (p.pattern, p.notifier, p.connections, p.msg_size)
        for k in keys
    )


def ablation_rows(rows: Sequence[Ablation], full: tuple[float, float, int] | None) -> list[list[Any]]:
    """The ablation's table: per part, the calibrations that use it, those fitted again (the refused ones
    too: leaving a part out may let them fit), the points predicted and their error. A part without which
    no point is predicted says so (every refit refused), not nan; the points are shown because a part left
    out can drop calibrations (their points leave the figure) or add some."""
    table: list[list[Any]] = []
    for r in rows:
        if r.points == 0:
            got = ["no point predicted (every refit refused)", "-", "-", "-"]
        else:
            dm = f"{(r.mean - full[0]) * 100:+.1f}" if full else "-"
            dx = f"{(r.max - full[1]) * 100:+.1f}" if full else "-"
            got = [f"{r.mean:.1%}", f"{r.max:.1%}", dm, dx]
        table.append([r.part, ABLATIONS[r.part], r.affected, r.refits, r.points, *got])
    return table


def print_ablation(rows: Sequence[Ablation], full: tuple[float, float, int] | None, what: str) -> None:
    print()
    base = f"{full[0]:.1%} / {full[1]:.1%} over {full[2]} points" if full else "-"
    print(f"rate ablation ({what}; with every part: mean / max |error| {base}):")
    print_table(
        ["left out", "what that does", "calibrations using it", "refitted", "points", "mean", "max",
         "Δmean pp", "Δmax pp"],
        ablation_rows(rows, full),
    )  # fmt: skip


__all__ = ["PLAIN"]

"""The Model page's what-if without Dash: its inputs checked in the page's own words, and its curves
predicted through :mod:`demuxlab.ctmc` (every pattern it models, on a core count, with the chosen rates
whole: a calibration's client, overhead, speed and per-workload rates included).

Nothing here names a pattern: the patterns, their thread ranges and the rates come from the models."""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

import pandas as pd

from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures import model as figs

MAX_POINTS = 32
MAX_THREADS = 128
MAX_CORES = 1024
MAX_WORK_US = 1_000_000.0
MAX_CONNECTIONS = 1_000_000
DEFAULTS = {"threads": "1-16", "work": "10", "connections": "512"}


class InputError(Exception):
    """An input of the what-if the models cannot take; the message says which and why."""


# -- the models, as demuxlab.ctmc offers them -------------------------------------------------------------


def model_patterns() -> tuple[str, ...]:
    from demuxlab.ctmc.rates import PATTERNS

    return tuple(PATTERNS)


def rate_fields() -> tuple[str, ...]:
    """Every rate a model has: seed 001's eight, then those the other chains and a calibration add."""
    from demuxlab.ctmc.rates import ALL_RATE_FIELDS

    return tuple(ALL_RATE_FIELDS)


def pattern_rates(pattern: str) -> tuple[str, ...]:
    """The rates ``pattern``'s chains read (the what-if's boxes for it; the others would change nothing)."""
    from demuxlab.ctmc.rates import rates_read

    return rates_read(pattern)


def min_threads(pattern: str) -> int:
    from demuxlab.ctmc.rates import min_threads as lowest

    return int(lowest(pattern))


def max_threads(pattern: str) -> int:
    """The most threads the what-if offers: the server's (``demux-server --list``, cut to what the chains
    describe: :func:`demuxlab.validation.manual.thread_range`), at most :data:`MAX_THREADS`."""
    from demuxlab.validation.manual import thread_range

    most = thread_range(pattern, None)[1]
    return MAX_THREADS if most is None else min(MAX_THREADS, int(most))


def paper() -> dict[str, dict[str, float]]:
    """Seed 001's rates per pattern: those whose source is the paper. Not the placeholders of what it does
    not measure (the per-call notifier cost, untimed CPU, the client, the scheduler's wake-up: instant
    there), which a table or a bar would show as a paper value of 0.001 µs."""
    from demuxlab.ctmc.rates import paper_rates

    def measured(pattern: str) -> dict[str, float]:
        rates = paper_rates(pattern)
        return {k: v for k, v in rates.as_dict().items() if rates.source.get(k) == "paper"}

    return {p: measured(p) for p in model_patterns()}


# -- inputs ----------------------------------------------------------------------------------------------


def parse_threads(text: Any) -> list[int]:
    """``1-16``, ``2,4,8`` or both (``1-4,8``) as sorted thread counts; :class:`InputError` else."""
    raw = str(text or "").strip()
    if not raw:
        raise InputError("threads: give the thread counts to predict, e.g. 1-16 or 2,4,8")
    out: set[int] = set()
    for part in raw.split(","):
        part = part.strip()
        lo, dash_, hi = part.partition("-")
        if not (lo.strip().isdigit() and (not dash_ or hi.strip().isdigit())):
            raise InputError(f"threads: write counts like 1-16 or 2,4,8 (got {shown(raw)})")
        a, b = int(lo), int(hi) if dash_ else int(lo)
        if a < 1 or b < a:
            raise InputError(f"threads: {part} is not a range of counts from 1 up (got {shown(raw)})")
        if b > MAX_THREADS or len(out) + (b - a + 1) > MAX_POINTS:
            raise InputError(
                f"threads: at most {MAX_POINTS} counts, each at most {MAX_THREADS} (got {shown(raw)})"
            )
        out.update(range(a, b + 1))
    return sorted(out)


def positive(value: Any, what: str, unit: str, limit: float, zero: bool = False) -> float:
    """A number in (0, limit] (``zero``: [0, limit]); :class:`InputError` else."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number of {unit} (got {shown(value)})") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero) or v > limit:
        least = "0 or more" if zero else "more than 0"
        raise InputError(f"{what} must be {least} and at most {base.fmt(limit)} {unit} (got {shown(value)})")
    return v


def count(value: Any, what: str, limit: int) -> int | None:
    """An optional whole count in 1..limit (empty: None); :class:`InputError` else."""
    if value is None or str(value).strip() == "":
        return None
    v = positive(value, what, what, limit)
    if not v.is_integer():
        raise InputError(f"{what} must be a whole number (got {shown(value)})")
    return int(v)


def shown(value: Any) -> str:
    from demuxlab.dashboard.address import excerpt

    if value is None or value == "":
        return "nothing"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return base.fmt(float(value))
    return excerpt(value, 30)


def rate_overrides(values: tuple[Any, ...]) -> dict[str, float]:
    """The times per operation (µs) typed over the chosen rates; an empty box keeps the chosen rate."""
    out: dict[str, float] = {}
    for k, v in zip(rate_fields(), values, strict=False):
        if v is None or v == "":
            continue
        out[k] = positive(v, figs.rate_name(k), "µs", 1e9)
    return out


def number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


# -- predictions -----------------------------------------------------------------------------------------


def override(rates: Any, overrides: dict[str, float]) -> Any:
    """The rates with each given time per operation (µs) replacing its rate (1/µs), in the pooled rates
    and in each workload's of a calibration of several (:func:`workload_rates` serves those)."""
    if not overrides:
        return rates
    src = dict(rates.source)
    src.update({k: "what-if" for k in overrides})
    workloads = {k: override(w, overrides) for k, w in rates.workloads.items()}
    return replace(rates, **{k: 1.0 / v for k, v in overrides.items()}, source=src, workloads=workloads)


def chosen_us(rates: Any, rate: str) -> str:
    """A rate of the chosen rates as the what-if's box shows it before anything is typed: its time per
    operation (µs), or ``instant`` where it is not measured (its step costs 1 ns or is off)."""
    from demuxlab.ctmc.rates import INSTANT_RATE

    v = float(getattr(rates, rate))
    if v == INSTANT_RATE or str(rates.source.get(rate, "")).startswith("instant:"):
        return "instant"
    return f"{1.0 / v:.3g}"


def override_notes(pattern: str, rates: Any, overrides: dict[str, float]) -> list[str]:
    """What a typed rate cannot do with these rates: a step ``pattern``'s chains do not take (a box the
    page hides, typed through the address), or a rate that needs another the rates leave instant."""
    from demuxlab.ctmc.rates import INSTANT_RATE, requires

    read = pattern_rates(pattern)
    notes = []
    for k in overrides:
        missing = [d for d in requires(k) if getattr(rates, d) == INSTANT_RATE]
        if k not in read:
            notes.append(
                f"{figs.rate_name(k)}: {pattern}'s chain does not take this step; it changes nothing."
            )
        elif missing:
            need = ", ".join(figs.rate_name(d) for d in missing)
            notes.append(
                f"{figs.rate_name(k)}: changes nothing without {need} (from a calibration, or typed)."
            )
    return notes


@functools.lru_cache(maxsize=4096)
def _predict(
    pattern: str,
    rates: Any,
    threads: int,
    work_us: float,
    connections: int,
    method: str,
    host: tuple[int | None, int | None],
) -> tuple[float, float | None, bool]:
    """One prediction; cached, since the solvers are deterministic (the SSA's seed is fixed) and the
    what-if asks the same points again as the user moves one control. ``rates`` is the models' own
    :class:`demuxlab.ctmc.rates.Rates` (a frozen dataclass: its rates are its hash), passed whole so that
    whatever a calibration holds beyond the eight rates reaches the model. ``host``: (server cores, client
    threads), None for a core per thread and one client thread. The flag: whether the solver settled (the
    fluid: its averages over the last quarters agree; at one connection per thread or fewer it can stall,
    and its value is no answer)."""
    from demuxlab.ctmc.predict import predict

    p = predict(
        pattern,
        threads,
        work_us,
        method=method,
        connections=connections,
        rates=rates,
        rel_ci=0.03,
        host=_host(rates, host),
    )
    return p.throughput_msgs_per_s, p.ci_halfwidth_rel, p.settled


def _host(rates: Any, host: tuple[int | None, int | None]) -> Any:
    """The models' Host from the what-if's (server cores, client threads)."""
    from demuxlab.ctmc.rates import Host

    cores, clients = host
    return Host(cores=cores, client_threads=(clients or 1) if rates.has_client else None)


def out_of_range(pattern: str, threads: list[int]) -> list[int]:
    """The thread counts ``pattern`` does not run (left out of the curve); :class:`InputError` if that is
    all of them."""
    lo, hi = min_threads(pattern), max_threads(pattern)
    left_out = [t for t in threads if not lo <= t <= hi]
    if len(left_out) == len(threads):
        raise InputError(f"threads: {pattern} runs {lo} to {hi} threads")
    return left_out


def workload_rates(rates: Any, connections: int) -> Any:
    """A calibration of several workloads: the rates of the one with these connections (the smallest
    messages first), else the pooled rates."""
    mine = sorted(
        (k for k in rates.workloads if k.startswith(f"c{connections}/")), key=lambda k: int(k.split("/b")[1])
    )
    return rates.workloads[mine[0]] if mine else rates


def predict_curve(
    pattern: str,
    rates: Any,
    threads: list[int],
    work_us: float,
    connections: int,
    method: str,
    host: tuple[int | None, int | None] = (None, None),
) -> pd.DataFrame:
    """Per thread count the pattern runs: the throughput, its CI (SSA), whether the solver settled
    (``settled`` false: a fluid that did not settle; its throughput is NaN, as it answers nothing) and the
    method."""
    rates = workload_rates(rates, connections)
    rows = []
    for t in _runs(pattern, threads):
        thr, ci, settled = _predict(pattern, rates, t, float(work_us), int(connections), method, host)
        rows.append(_row(t, thr, ci, settled, method))
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


@functools.lru_cache(maxsize=4096)
def _predict_small(
    pattern: str,
    rates: Any,
    threads: int,
    work_us: float,
    connections: int,
    host: tuple[int | None, int | None],
) -> tuple[float | None, bool]:
    """(the exact throughput where the chain is small, else None; whether it was left for its states, which
    only grow with more threads): :func:`demuxlab.ctmc.predict.predict_small`, cached as :func:`_predict`."""
    from demuxlab.ctmc.exact import IllConditioned, TooManyStates
    from demuxlab.ctmc.predict import predict_small

    try:
        p = predict_small(
            pattern, threads, work_us, connections=connections, rates=rates, host=_host(rates, host)
        )
    except TooManyStates:
        return None, True
    except IllConditioned:
        return None, False
    return (None if p is None else p.throughput_msgs_per_s), False


def quick_curve(
    pattern: str,
    rates: Any,
    threads: list[int],
    work_us: float,
    connections: int,
    host: tuple[int | None, int | None] = (None, None),
) -> pd.DataFrame:
    """The what-if's model curve: the exact solution where the chain is small (few connections:
    there the fluid approximation can be 20–100 % off, or not settle at all), the fluid elsewhere; the
    ``method`` column says which. A chain's states grow with its threads, so once one thread count has too
    many the larger ones are not tried (a tagged design's chain follows one thread, whose connections
    shrink as the threads grow: there every thread count is tried)."""
    from demuxlab.ctmc.rates import DESIGNS
    from demuxlab.vocab import METHOD_EXACT, METHOD_FLUID

    rates = workload_rates(rates, connections)
    rows = []
    grown = False
    for t in _runs(pattern, threads):
        thr, too_many = (
            (None, True)
            if grown
            else _predict_small(pattern, rates, t, float(work_us), int(connections), host)
        )
        if thr is not None:
            rows.append(_row(t, thr, None, True, METHOD_EXACT))
            continue
        grown = too_many and not DESIGNS[pattern].tagged
        thr, ci, settled = _predict(pattern, rates, t, float(work_us), int(connections), METHOD_FLUID, host)
        rows.append(_row(t, thr, ci, settled, METHOD_FLUID))
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


CURVE_COLUMNS = ["threads", "throughput_msgs_per_s", "ci_halfwidth_rel", "settled", "method"]


def _runs(pattern: str, threads: list[int]) -> list[int]:
    return [t for t in threads if min_threads(pattern) <= t <= max_threads(pattern)]


def _row(threads: int, thr: float, ci: float | None, settled: bool, method: str) -> dict[str, Any]:
    return {
        "threads": threads,
        "throughput_msgs_per_s": thr if settled else math.nan,
        "ci_halfwidth_rel": ci,
        "settled": settled,
        "method": method,
    }


def shown_methods(curve: pd.DataFrame) -> str:
    """What the curve is, in a few words: the exact solution, the SSA beside the fluid, or which where."""
    from demuxlab.vocab import METHOD_EXACT

    exact = curve.loc[curve["method"] == METHOD_EXACT, "threads"].tolist()
    if not exact:
        return "The SSA (95 % CI) beside the fluid approximation (dashed)"
    if len(exact) == len(curve):
        return "Exact solution shown"
    return (
        f"Exact solution at {', '.join(map(str, exact))} thread(s); at the others the SSA (95 % CI) beside "
        "the fluid approximation (dashed)"
    )


def unsettled_note(fluid: pd.DataFrame) -> str | None:
    """One line where the fluid approximation did not settle (left out of its curve), else None."""
    stalled = fluid.loc[~fluid["settled"].astype(bool), "threads"].tolist()
    if not stalled:
        return None
    return (
        f"The fluid approximation does not settle at {', '.join(map(str, stalled))} thread(s): too few "
        "connections per thread to treat as a fluid. Left out of its curve; the SSA stands there."
    )

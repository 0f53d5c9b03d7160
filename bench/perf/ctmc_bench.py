"""CTMC benchmark: simulation and fluid time per point, and the full grid (prints figures); with
``--what-if``, the cost of a what-if curve of every pattern instead.

    .venv/bin/python -m bench ctmc_bench [--jobs 0] [--rel-ci 0.01] [--seed 0] [--connections 512]
    .venv/bin/python -m bench ctmc_bench --what-if [--cores 2] [--work 10]
    .venv/bin/python -m bench ctmc_bench --small [--cores 2] [--work 5]

What-if (issue 19): per pattern, one curve over every thread count of 1–16 it runs, 512 connections, on
one core (this process; CPU time, so other load on the host counts less), once with a core per thread and
once with ``--cores``: target fluid ≤ 50 ms per curve, SSA to a 1 % CI ≤ 10 s per curve.

Small populations (``--small``): per pattern and connections 1, 2, 4, 8 (``--small-connections``), seed
001's rates, ``--cores`` cores, 1–16 threads: the what-if's curve at once (the dashboard's
``quick_curve``: exact where the chain is small, else the fluid) against the SSA (the page's, to a 3 %
CI): its CPU time, how many points were exact, and the largest |error| of the fluid alone and of the
curve at once, against the SSA.

Targets (docs/ctmc-reference.md): SSA median ≤ 0.5 s per point to a 1 % CI, fluid ≤ 20 ms per point, the grid
of both patterns × N = 1–16 × work 10/20/50 µs ≤ 30 s. The grid runs through ``predict_many`` (``--jobs``
processes, 0: one per CPU); the per-point times are measured where each point ran. The kernels are
compiled (or loaded from the kernel cache) first and timed separately; ``--fresh-compile`` times a
compile into an empty cache instead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence

from bench.common.cli import (
    entry,
    int_list,
    nonnegative_float,
    nonnegative_int,
    parser,
    positive_float,
    positive_int,
)
from demuxlab.ctmc.engine import compile_structure
from demuxlab.ctmc.predict import PredictRequest, predict, predict_many
from demuxlab.ctmc.rates import DESIGNS, Host, min_threads, structure, structures
from demuxlab.ctmc.rates import PATTERNS as ALL_PATTERNS

PATTERNS = ("hsha", "lf")
WORKS = (10.0, 20.0, 50.0)


def _quantiles(ts: list[float], scale: float, unit: str) -> str:
    s = sorted(ts)
    return (
        f"median {statistics.median(s) * scale:.3g} {unit}, p90 {s[int(0.9 * len(s))] * scale:.3g} {unit}, "
        f"max {s[-1] * scale:.3g} {unit}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--jobs", type=nonnegative_int, default=0, help="processes for the grid (0: one per CPU)")
    ap.add_argument("--rel-ci", type=positive_float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--connections", type=positive_int, default=512)
    ap.add_argument("--fresh-compile", action="store_true", help="time a compile into an empty cache")
    ap.add_argument("--what-if", action="store_true", help="the what-if curves of every pattern instead")
    ap.add_argument(
        "--cores", type=positive_int, default=2, help="--what-if: the core count of the second curve"
    )
    ap.add_argument("--small", action="store_true", help="the what-if's curve at once at small populations")
    ap.add_argument(
        "--small-connections",
        type=int_list,
        default=[1, 2, 4, 8],
        help="--small: the connection counts (default 1,2,4,8)",
    )
    ap.add_argument(
        "--work",
        type=nonnegative_float,
        default=None,
        help="--what-if (10), --small (5): work per message, µs",
    )
    args = ap.parse_args(argv)
    if args.small and args.what_if:
        ap.error("--small and --what-if: one at a time")

    fresh = tempfile.mkdtemp(prefix="demuxlab-kernels-") if args.fresh_compile else None
    try:
        if fresh is not None:
            os.environ["DEMUXLAB_KERNEL_CACHE"] = fresh
        if args.small:
            small(args)
        elif args.what_if:
            what_if(args)
        else:
            run(args)
    finally:
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)


def run(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    for p in PATTERNS:
        compile_structure(structure(p)).warm()
    what = "compile into an empty cache" if args.fresh_compile else "compile, or load from the kernel cache"
    print(f"kernels, both models ({what}): {time.perf_counter() - t0:.2f} s")

    requests: list[PredictRequest] = []
    for p in PATTERNS:
        for w in WORKS:
            for n in range(min_threads(p), 17):
                for method in ("ssa", "fluid"):
                    requests.append(
                        PredictRequest(
                            p, n, w, args.connections, method=method, rel_ci=args.rel_ci, seed=args.seed
                        )
                    )
    timings: list[float] = []
    t_grid = time.perf_counter()
    preds = predict_many(requests, jobs=args.jobs, timings=timings)
    total = time.perf_counter() - t_grid

    jobs = args.jobs if args.jobs > 0 else (os.cpu_count() or 1)
    ssa_t = [t for r, t in zip(requests, timings, strict=True) if r.method == "ssa"]
    fluid_t = [t for r, t in zip(requests, timings, strict=True) if r.method == "fluid"]
    grid: dict[tuple[str, float, int], list[float]] = {}
    not_conv = 0
    events = 0
    for r, pr in zip(requests, preds, strict=True):
        cell = grid.setdefault((r.pattern, r.work_us, r.threads), [0.0, 0.0, 0.0])
        if r.method == "ssa":
            cell[0], cell[1] = pr.throughput_msgs_per_s, pr.ci_halfwidth_rel or 0.0
            not_conv += not pr.details["converged"]
            events += int(pr.details["events"])
        else:
            cell[2] = pr.throughput_msgs_per_s
    print(f"points: {len(ssa_t)} (SSA not converged: {not_conv}; {events / 1e6:.0f} M events simulated)")
    print(f"SSA per point to {args.rel_ci:.0%} CI: {_quantiles(ssa_t, 1.0, 's')}")
    print(f"fluid per point: {_quantiles(fluid_t, 1000.0, 'ms')}")
    print(f"CPU time in the points: SSA {sum(ssa_t):.1f} s, fluid {sum(fluid_t):.2f} s")
    print(f"grid total (SSA + fluid, predict_many, --jobs {jobs}, without compile): {total:.1f} s")
    print()
    print("predicted throughput, msgs/s (SSA ± rel CI | fluid)")
    header = f"{'N':>3} " + " ".join(f"{p + ' w' + format(w, 'g'):>24}" for p in PATTERNS for w in WORKS)
    print(header)
    for n in range(1, 17):
        cells = []
        for p in PATTERNS:
            for w in WORKS:
                v = grid.get((p, w, n))
                cells.append(f"{'-':>24}" if v is None else f"{v[0]:>8.0f} ±{v[1] * 100:4.2f}% |{v[2]:>7.0f}")
        print(f"{n:>3} " + " ".join(cells))


def _threads(pattern: str) -> list[int]:
    d = DESIGNS[pattern]
    return [t for t in range(1, 17) if t >= d.min_threads and (d.max_threads is None or t <= d.max_threads)]


def _pct(e: float) -> str:
    return "no value" if e == float("inf") else f"{e * 100:.1f} %"


def small(args: argparse.Namespace) -> None:
    """Per pattern × connections: the what-if's curve at once against the fluid alone, both held against
    the SSA."""
    from demuxlab.ctmc.rates import paper_rates
    from demuxlab.dashboard import whatif

    work = 5.0 if args.work is None else args.work
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    print(
        f"seed 001's rates, {work:g} µs of work, {args.cores} cores, 1–16 threads (those each pattern runs)"
    )
    print(
        f"{'pattern':>13} {'conns':>5} {'points':>6} {'exact':>5} {'at once CPU':>11} "
        f"{'fluid max|err|':>14} {'at once max|err|':>16}"
    )
    worst = {"cpu": 0.0, "fluid": 0.0, "once": 0.0}
    host = (args.cores, None)
    for p in ALL_PATTERNS:
        ts = _threads(p)
        rates = paper_rates(p)
        for conns in args.small_connections:
            c0 = time.process_time()
            once = whatif.quick_curve(p, rates, ts, work, conns, host)
            cpu = time.process_time() - c0
            fluid = whatif.predict_curve(p, rates, ts, work, conns, "fluid", host)
            ssa = whatif.predict_curve(p, rates, ts, work, conns, "ssa", host)
            ref = ssa["throughput_msgs_per_s"]

            def err(col: object, ref: object = ref) -> float:
                e = ((col - ref) / ref).abs()  # type: ignore[operator]
                return float("inf") if e.isna().any() else float(e.max())  # NaN: the fluid did not settle

            f_err, o_err = err(fluid["throughput_msgs_per_s"]), err(once["throughput_msgs_per_s"])
            exact = int((once["method"] == "exact").sum())
            worst = {
                "cpu": max(worst["cpu"], cpu),
                "fluid": max(worst["fluid"], f_err),
                "once": max(worst["once"], o_err),
            }
            print(
                f"{p:>13} {conns:>5} {len(ts):>6} {exact:>5} {cpu * 1e3:>9.0f}ms "
                f"{_pct(f_err):>14} {_pct(o_err):>16}",
                flush=True,
            )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(
        f"largest |error| against the SSA (the page's, to a 3 % CI): the fluid alone {_pct(worst['fluid'])}, "
        f"the curve at once {_pct(worst['once'])}; slowest curve at once {worst['cpu'] * 1e3:.0f} ms CPU"
    )


def what_if(args: argparse.Namespace) -> None:
    """Per pattern: a curve over 1–16 threads (those it runs), fluid and SSA, CPU seconds of this process."""
    work = 10.0 if args.work is None else args.work
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    t0 = time.perf_counter()
    for p in ALL_PATTERNS:
        for st in structures(p):
            compile_structure(st).warm()
    print(
        f"kernels, every pattern (compile, or load from the kernel cache): {time.perf_counter() - t0:.1f} s"
    )
    print(f"{'pattern':>13} {'cores':>7} {'points':>6} {'fluid CPU':>10} {'SSA CPU':>8}  SSA curve, k msgs/s")
    worst = {"fluid": 0.0, "ssa": 0.0}
    for p in ALL_PATTERNS:
        ts = _threads(p)
        for cores in (None, args.cores):
            host = Host(cores=cores)
            cost: dict[str, float] = {}
            curve: list[float] = []
            for method in ("fluid", "ssa"):
                c0 = time.process_time()
                got = [
                    predict(p, t, work, method=method, connections=args.connections, host=host,
                            rel_ci=args.rel_ci, seed=args.seed)
                    for t in ts
                ]  # fmt: skip
                cost[method] = time.process_time() - c0
                worst[method] = max(worst[method], cost[method])
                if method == "ssa":
                    curve = [g.throughput_msgs_per_s for g in got]
            print(
                f"{p:>13} {cores or 'per thr':>7} {len(ts):>6} {cost['fluid'] * 1e3:>8.0f}ms "
                f"{cost['ssa']:>7.2f}s  " + " ".join(f"{v / 1e3:.0f}" for v in curve),
                flush=True,
            )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(
        f"slowest curve: fluid {worst['fluid'] * 1e3:.0f} ms (target ≤ 50 ms), SSA {worst['ssa']:.1f} s "
        f"(target ≤ 10 s), CPU time on one core"
    )


if __name__ == "__main__":
    entry(main)

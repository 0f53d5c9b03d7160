"""CTMC benchmark: simulation and fluid time per point, and the full grid (prints figures).

    .venv/bin/python bench/ctmc_bench.py [--jobs 0] [--rel-ci 0.01] [--seed 0] [--connections 512]

Targets (docs/ctmc.md): SSA median ≤ 0.5 s per point to a 1 % CI, fluid ≤ 20 ms per point, the grid of
both patterns × N = 1–16 × work 10/20/50 µs ≤ 30 s. The grid runs through ``predict_many`` (``--jobs``
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

from demuxlab.ctmc.engine import compile_structure
from demuxlab.ctmc.predict import PredictRequest, predict_many
from demuxlab.ctmc.rates import min_threads, structure

PATTERNS = ("hsha", "lf")
WORKS = (10.0, 20.0, 50.0)


def _quantiles(ts: list[float], scale: float, unit: str) -> str:
    s = sorted(ts)
    return (
        f"median {statistics.median(s) * scale:.3g} {unit}, p90 {s[int(0.9 * len(s))] * scale:.3g} {unit}, "
        f"max {s[-1] * scale:.3g} {unit}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=0, help="processes for the grid (0: one per CPU)")
    ap.add_argument("--rel-ci", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--connections", type=int, default=512)
    ap.add_argument("--fresh-compile", action="store_true", help="time a compile into an empty cache")
    args = ap.parse_args()

    fresh = tempfile.mkdtemp(prefix="demuxlab-kernels-") if args.fresh_compile else None
    try:
        if fresh is not None:
            os.environ["DEMUXLAB_KERNEL_CACHE"] = fresh
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


if __name__ == "__main__":
    main()
